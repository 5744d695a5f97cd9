"""Structural tags: upstream xgrammar's JSON description of tool-calling / reasoning output
formats, their conversion to EBNF, model templates and the OpenAI request mapping.

* :func:`structural_tag_to_ebnf` — a structural tag (JSON text, dict or model) to EBNF text
  in upstream xgrammar's dialect (``TagDispatch(...)`` included), start rule ``root``.
* :func:`get_model_structural_tag` — xgrammar2's structural tag for a model family's
  tool-call syntax (Llama 3.x, Qwen/Hermes, Qwen3-Coder, DeepSeek, Kimi K2 / K3, gpt-oss
  Harmony, GLM, MiniMax M2 / M3, Cohere, Mistral, ...), from OpenAI-style ``tools`` and
  ``tool_choice``, tuned to the real chat templates. Upstream's exact builtin tags are
  :mod:`xgrammar2.builtin_structural_tag` (``xgrammar2.get_model_structural_tag``);
  ``normalize_tool_choice`` here is upstream's too.
* :mod:`.openai` — an OpenAI chat request (tools, tool_choice, parallel_tool_calls,
  response_format) to EBNF / a compiled grammar.
* Pydantic models of every format (``StructuralTag``, ``TagFormat``, ...), named as upstream
  names them. They need pydantic (imported on first use); the converter does not.
"""

from typing import Any

from .converter import format_to_ebnf, structural_tag_to_ebnf
from .errors import StructuralTagError, StructuralTagJSONError
from .nodes import FORMAT_TYPES, JSON_SCHEMA_STYLES, read_structural_tag
from .templates import (
    get_model_structural_tag,
    list_model_structural_tags,
    register_model_structural_tag,
)

_MODEL_NAMES = (
    "ConstStringFormat",
    "JSONSchemaFormat",
    "QwenXMLParameterFormat",
    "AnyTextFormat",
    "GrammarFormat",
    "RegexFormat",
    "TokenFormat",
    "ExcludeTokenFormat",
    "AnyTokensFormat",
    "SequenceFormat",
    "OrFormat",
    "TagFormat",
    "TriggeredTagsFormat",
    "TokenTriggeredTagsFormat",
    "TagsWithSeparatorFormat",
    "OptionalFormat",
    "PlusFormat",
    "StarFormat",
    "RepeatFormat",
    "DispatchFormat",
    "TokenDispatchFormat",
    "Format",
    "StructuralTagItem",
    "StructuralTag",
)


def __getattr__(name: str) -> Any:
    # The pydantic models are loaded on first use so that converting a dict or JSON text
    # works without pydantic installed.
    if name == "normalize_tool_choice":  # upstream's (pydantic tool models)
        from ..builtin_structural_tag import normalize_tool_choice

        return normalize_tool_choice
    if name in _MODEL_NAMES:
        from . import models

        return getattr(models, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "structural_tag_to_ebnf",
    "format_to_ebnf",
    "read_structural_tag",
    "get_model_structural_tag",
    "list_model_structural_tags",
    "normalize_tool_choice",
    "register_model_structural_tag",
    "StructuralTagError",
    "StructuralTagJSONError",
    "FORMAT_TYPES",
    "JSON_SCHEMA_STYLES",
    *_MODEL_NAMES,
]
