"""A definition intersected with a node while the definition is still being converted (a
recursive `$ref` with sibling keywords inside itself) becomes a deferred rule "ref ∩ node".
That rule's body must be the intersection of the definition's union with the node: built
from the reference instead, it found itself under its own key and was defined as itself
(an empty language), so e.g. every additional member of JsonSchemaStore---bukkit-plugin's
recursive permission objects was refused and valid instances were rejected."""

from __future__ import annotations

import itertools

from js_helpers import assert_exact


LEAVES = [{}, True, False, 1, "s", None]


def _nested(depth):
    vals = list(LEAVES)
    if depth:
        inner = _nested(depth - 1)
        vals += [{"c": v} for v in inner[:12]] + [{"c": {"a": v}} for v in inner[:12]]
    return vals


def _instances():
    out = list(LEAVES)
    for v in _nested(1):
        out.append({"c": v})
        out.append({"c": {"a": v}})
        out.append({"c": {"a": v, "b": 1}})
    for a, b in itertools.product([{}, True, 1], repeat=2):
        out.append({"c": {"a": a, "b": b}})
    return out


def test_recursive_ref_with_type_list_sibling_keeps_members():
    schema = {"definitions": {"p": {"properties": {"c": {
        "type": "object",
        "additionalProperties": {"type": ["boolean", "object"], "$ref": "#/definitions/p"}}}}},
        "$ref": "#/definitions/p"}
    assert_exact(schema, _instances())


def test_recursive_ref_with_object_sibling_keeps_members():
    schema = {"$defs": {"p": {"properties": {"c": {
        "type": "object",
        "additionalProperties": {"type": "object", "$ref": "#/$defs/p"}}}}},
        "$ref": "#/$defs/p"}
    assert_exact(schema, _instances())


def test_recursive_ref_with_required_sibling_in_items():
    schema = {"$defs": {"t": {"type": "object", "properties": {
        "kids": {"type": "array", "items": {"$ref": "#/$defs/t", "required": ["n"]}},
        "n": {"type": "integer"}}}}, "$ref": "#/$defs/t"}
    inst = [{}, {"n": 1}, {"kids": []}, {"kids": [{}]}, {"kids": [{"n": 1}]},
            {"kids": [{"kids": [{"n": 2}], "n": 1}]}, {"kids": [{"kids": [{}], "n": 1}]},
            {"kids": [{"n": "x"}]}, {"kids": 1}, 1]
    # (nested objects are written in the schema's member order: kids, then n)
    assert_exact(schema, inst)
