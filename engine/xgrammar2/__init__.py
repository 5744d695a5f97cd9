"""xgrammar2: structured generation for LLM serving (JSON schema, EBNF, regex) with the
public API of upstream xgrammar (`import xgrammar2 as xgr`).

Importing the package does not import torch: torch is loaded only by the functions that
take or make tensors.
"""

from . import exception, limits, serving, stack_chunks, testing
from .bitmask import (
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
    get_bitmask_shape,
    reset_token_bitmask,
)
from .cache import (
    clear_cross_grammar_cache,
    get_automaton_cache_stats,
    get_cross_grammar_cache_stats,
    set_cross_grammar_cache_budget,
)
from .compiler import CompiledGrammar, GrammarCompiler
from .config import (
    get_max_recursion_depth,
    get_serialization_version,
    max_recursion_depth,
    set_max_recursion_depth,
)
from .exception import (
    DeserializeFormatError,
    DeserializeVersionError,
    GrammarLimitError,
    GrammarSemanticError,
    GrammarSyntaxError,
    InternalError,
    InvalidArgumentError,
    InvalidIndexError,
    InvalidJSONError,
    InvalidJSONSchemaError,
    InvalidStateError,
    InvalidStructuralTagError,
    InvalidUTF8Error,
    OutOfMemoryError,
    XGrammar2Error,
)
from .grammar import Grammar
from .matcher import BatchGrammarMatcher, GrammarMatcher, fill_next_token_bitmask_batch
from .tokenizer_info import TokenizerInfo, VocabType
from .version import __version__


_LAZY_STRUCTURAL_TAG = ("StructuralTag", "StructuralTagItem")
# Upstream's builtin structural tags (xgrammar.get_model_structural_tag, ...), from
# xgrammar2.builtin_structural_tag; like the models they need pydantic.
_LAZY_BUILTIN_TAG = ("get_model_structural_tag", "get_builtin_structural_tag", "normalize_tool_choice",
                     "register_model_structural_tag")
_LAZY_MODULES = ("builtin_structural_tag", "openai_tool_call_schema", "structural_tag")


def __getattr__(name):
    # Resolved on first use so that `import xgrammar2` loads neither torch nor pydantic:
    # `bitmask_dtype` is torch.int32 (numpy.int32 without torch); the structural-tag models
    # live in xgrammar2.structural_tag.
    if name == "bitmask_dtype":
        from . import bitmask

        return bitmask.bitmask_dtype
    if name in _LAZY_STRUCTURAL_TAG:
        from . import structural_tag

        return getattr(structural_tag, name)
    if name in _LAZY_BUILTIN_TAG:
        from . import builtin_structural_tag

        return getattr(builtin_structural_tag, name)
    if name in _LAZY_MODULES:
        import importlib

        return importlib.import_module("." + name, __name__)
    if name in ("contrib", "lark"):  # xgr.contrib.hf.LogitsProcessor, as upstream spells it
        import importlib

        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'xgrammar2' has no attribute {name!r}")


__all__ = [
    "__version__",
    "exception",
    "testing",
    "TokenizerInfo",
    "VocabType",
    "Grammar",
    "GrammarCompiler",
    "CompiledGrammar",
    "GrammarMatcher",
    "BatchGrammarMatcher",
    "fill_next_token_bitmask_batch",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "bitmask_dtype",
    "get_bitmask_shape",
    "reset_token_bitmask",
    "get_cross_grammar_cache_stats",
    "get_automaton_cache_stats",
    "set_cross_grammar_cache_budget",
    "clear_cross_grammar_cache",
    "get_max_recursion_depth",
    "set_max_recursion_depth",
    "max_recursion_depth",
    "get_serialization_version",
    "XGrammar2Error",
    "InvalidArgumentError",
    "InvalidIndexError",
    "GrammarSyntaxError",
    "GrammarSemanticError",
    "InvalidUTF8Error",
    "GrammarLimitError",
    "OutOfMemoryError",
    "InvalidStateError",
    "InternalError",
    "InvalidJSONError",
    "InvalidJSONSchemaError",
    "InvalidStructuralTagError",
    "DeserializeFormatError",
    "DeserializeVersionError",
]

stack_chunks.install()  # (CPython 3.11/3.12 only: see stack_chunks.py)
