"""JSON-schema compatibility with SGLang's built-in backend (upstream xgrammar).

SGLang's own constraints rely on one upstream reading that differs from JSON Schema: a
subschema without ``"type"`` whose keywords all belong to objects (``properties``,
``required``, ...) is taken as an *object* schema. The named-``tool_choice`` constraint
(``sglang.srt.function_call.utils.get_json_schema_constraint``) is built that way --
``{"type": "array", "items": {"properties": {"name": ...}, "required": [...]}}`` -- so under
the specification any non-object item (``["x"]``) would satisfy it, and the model could
answer with something that is not a tool call.

:func:`infer_types` adds the implied ``"type"`` where a subschema carries only object
keywords (-> ``object``) or only array keywords (-> ``array``) and says nothing else about
its type (no ``type`` / ``enum`` / ``const`` / ``$ref`` / combinators). Everything else is
left exactly as written. ``XGRAMMAR2_SGLANG_INFER_TYPES=0`` turns this off (pure JSON Schema
semantics).
"""

from __future__ import annotations

import logging
from typing import Any

from xgrammar2.envvars import env_flag

__all__ = ["infer_types", "INFER_TYPES"]

INFER_TYPES = env_flag("XGRAMMAR2_SGLANG_INFER_TYPES", True, logger=logging.getLogger("sglang.xgrammar2_sglang"))

_OBJECT_KEYS = frozenset({
    "properties", "required", "additionalProperties", "patternProperties", "minProperties",
    "maxProperties", "propertyNames", "dependentRequired", "dependentSchemas", "unevaluatedProperties",
})
_ARRAY_KEYS = frozenset({
    "items", "prefixItems", "minItems", "maxItems", "contains", "minContains", "maxContains",
    "uniqueItems", "unevaluatedItems",
})
_TYPE_DECIDING = frozenset({"type", "enum", "const", "$ref", "anyOf", "oneOf", "allOf", "not", "if"})
# Keywords whose value is a subschema, a list of subschemas, or a map of subschemas.
_SUB_ONE = ("items", "additionalProperties", "contains", "propertyNames", "not", "if", "then", "else",
            "unevaluatedProperties", "unevaluatedItems")
_SUB_LIST = ("prefixItems", "anyOf", "oneOf", "allOf")
_SUB_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def infer_types(schema: Any) -> Any:
    """A copy of ``schema`` with the object / array types upstream xgrammar infers made
    explicit (see the module docstring). Non-dict input is returned unchanged."""
    if not INFER_TYPES:
        return schema
    return _walk(schema, 0)


def _walk(node: Any, depth: int) -> Any:
    if not isinstance(node, dict) or depth > 200:
        return node
    out = dict(node)
    for k in _SUB_ONE:
        if k in out:
            out[k] = _walk(out[k], depth + 1)
    for k in _SUB_LIST:
        if isinstance(out.get(k), list):
            out[k] = [_walk(v, depth + 1) for v in out[k]]
    for k in _SUB_MAP:
        if isinstance(out.get(k), dict):
            out[k] = {name: _walk(v, depth + 1) for name, v in out[k].items()}
    if not (_TYPE_DECIDING & out.keys()):
        has_obj, has_arr = bool(_OBJECT_KEYS & out.keys()), bool(_ARRAY_KEYS & out.keys())
        if has_obj and not has_arr:
            out["type"] = "object"
        elif has_arr and not has_obj:
            out["type"] = "array"
    return out
