"""OpenAI-style tool and tool-choice types accepted by the builtin structural tags
(:mod:`xgrammar2.builtin_structural_tag`), named and shaped as upstream xgrammar's
``xgrammar.openai_tool_call_schema``: the same classes, fields, defaults and validation, so
``from xgrammar2.openai_tool_call_schema import FunctionToolParam, BuiltinToolParam`` works
where ``xgrammar.openai_tool_call_schema`` was imported.

The shapes follow the Chat Completions API:

* a function tool ``{"type": "function", "function": {"name", "description", "parameters",
  "strict"}}`` (:class:`FunctionToolParam`);
* a builtin (hosted) tool ``{"type": ..., "name": ..., "parameters": ...}``
  (:class:`BuiltinToolParam`): ``name`` is what the model writes (``type`` when absent),
  ``parameters`` the JSON schema of its arguments;
* ``tool_choice``: ``"none" | "auto" | "required"``, a named function
  (:class:`NamedToolChoiceParam`), a builtin tool type (:class:`BuiltinToolChoiceParam`) or an
  allowed-tools subset (:class:`AllowedToolChoiceParam`).

Unknown fields are ignored, as pydantic does by default. This module needs pydantic (v2).
"""

from typing import Any, Dict, List, Literal, Optional, Union

from pydantic import BaseModel

__all__ = [
    "FunctionDefinition",
    "FunctionToolParam",
    "BuiltinToolParam",
    "ToolParam",
    "NamedToolChoiceFunction",
    "NamedToolChoiceParam",
    "BuiltinToolChoiceParam",
    "AllowedToolRef",
    "AllowedToolsParam",
    "AllowedToolChoiceParam",
    "ToolChoiceOptionParam",
]


# ---- tools ------------------------------------------------------------------------------


class FunctionDefinition(BaseModel):
    """A function the model may call: its ``name``, a ``description`` for the prompt, the
    JSON schema of its arguments (``parameters``; None leaves the arguments unconstrained
    JSON) and ``strict`` (``False`` also leaves them unconstrained)."""

    name: str
    description: Optional[str] = None
    parameters: Optional[Dict[str, Any]] = None
    strict: Optional[bool] = None


class FunctionToolParam(BaseModel):
    """A function tool, ``{"type": "function", "function": {...}}``."""

    type: Literal["function"] = "function"
    function: FunctionDefinition


class BuiltinToolParam(BaseModel):
    """A builtin / hosted tool (a web search, a code interpreter, ...). ``type`` is the
    provider's tool type; ``name`` is the name the model writes in its output (``type`` when
    None), e.g. ``browser.search`` for a ``web_search_preview`` tool of a Harmony model;
    ``parameters`` is the JSON schema of the arguments (None: unconstrained JSON)."""

    type: str
    name: Optional[str] = None
    parameters: Optional[Dict[str, Any]] = None


ToolParam = Union[FunctionToolParam, BuiltinToolParam]
"""A function tool or a builtin tool (a ``type`` other than ``"function"``)."""


# ---- tool choice ------------------------------------------------------------------------


class NamedToolChoiceFunction(BaseModel):
    """``{"name": ...}``: the function a named tool choice refers to."""

    name: str


class NamedToolChoiceParam(BaseModel):
    """Force one function: ``{"type": "function", "function": {"name": ...}}``."""

    type: Literal["function"] = "function"
    function: NamedToolChoiceFunction


class BuiltinToolChoiceParam(BaseModel):
    """Force one builtin tool, matched by ``type`` (``name`` is accepted and ignored)."""

    type: str
    name: Optional[str] = None


class AllowedToolRef(BaseModel):
    """One entry of an allowed-tools list: ``{"type": "function", "function": {"name": ...}}``
    for a function, ``{"type": <builtin type>}`` for a builtin tool (matched by ``type``)."""

    type: str
    function: Optional[NamedToolChoiceFunction] = None
    name: Optional[str] = None


class AllowedToolsParam(BaseModel):
    """The tools a turn may use (``tools``) and whether a call is needed (``mode``)."""

    mode: Literal["auto", "required"]
    tools: List[AllowedToolRef]


class AllowedToolChoiceParam(BaseModel):
    """``{"type": "allowed_tools", "allowed_tools": {"mode": ..., "tools": [...]}}``."""

    type: Literal["allowed_tools"] = "allowed_tools"
    allowed_tools: AllowedToolsParam


ToolChoiceOptionParam = Union[
    Literal["none", "auto", "required"],
    NamedToolChoiceParam,
    AllowedToolChoiceParam,
    BuiltinToolChoiceParam,
]
"""``"none"`` (no tool), ``"auto"`` (text or calls), ``"required"`` (at least one call), a
named function, an allowed-tools subset, or a builtin tool type."""
