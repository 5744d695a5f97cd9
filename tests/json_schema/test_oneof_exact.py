"""Exclusive oneOf / not / if over branches that cannot be negated on their own (closed objects,
patternProperties, propertyNames, array/object constants, recursive references): the converter
negates them relative to the other branch (ir.subtract) and must stay exact.

Every schema is checked on a grid of small instances against ``jsonschema`` (strict_mode=False:
the JSON Schema meaning): an instance is accepted iff it is valid. The grids contain the
instances that match several branches (valid only if exclusivity were dropped)."""

from __future__ import annotations

import json

import jsonschema

import pytest

from js_engine import ENGINE
from js_helpers import arrays_over, assert_exact, grammar_for, objects_over
from xgrammar2.json_schema import UnsupportedSchemaError, json_schema_to_ebnf

SCALARS = [None, True, False, 0, 1, 2, -3, 2.5, "", "a", "b", "foo"]


def _assert_exact(schema, instances, strict_mode=False):
    """Each instance written once (as json.dumps writes it)."""
    assert_exact(schema, instances, strict_mode, texts=lambda x: [json.dumps(x)], narrows=strict_mode)


CLOSED_A = {"type": "object", "additionalProperties": False, "properties": {"foo": {"type": "string"}}}
CLOSED_B = {"type": "object", "additionalProperties": False, "properties": {"bar": {"type": "string"}}}

CASES = {
    # {} matches both closed branches: rejected; {"foo": ...} only A; {"bar": ...} only B.
    "closed_objects": ({"oneOf": [CLOSED_A, CLOSED_B]},
                       objects_over(["foo", "bar", "zz"], ["a", 1], 2) + SCALARS),
    # required key forbidden by additionalProperties:false in the other branch
    "required_vs_closed": ({"oneOf": [
        {"type": "object", "required": ["ref"], "properties": {"ref": {"type": "string"}},
         "additionalProperties": False},
        {"type": "object", "properties": {"inherit": {"enum": [True]}, "ref": {"type": "integer"}}}]},
        objects_over(["inherit", "ref", "zz"], [True, "a", 1], 2)),
    # additionalProperties as a schema, patternProperties and propertyNames in the negated branch
    # (the parent's additionalProperties:false gives both branches a finite key set)
    "pattern_and_additional": ({"type": "object", "properties": {"a": {}, "ab": {}, "b": {}},
                                "additionalProperties": False, "oneOf": [
        {"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
        {"patternProperties": {"^a": {"type": "integer", "minimum": 1}}, "additionalProperties": {"type": "string"}}]},
        objects_over(["a", "ab", "b", "c"], [0, 1, "x"], 3)),
    "property_names": ({"oneOf": [
        {"type": "object", "properties": {"x": {}, "yy": {}}, "additionalProperties": False},
        {"type": "object", "properties": {"x": {}, "yy": {}, "z": {}}, "additionalProperties": False,
         "propertyNames": {"maxLength": 1}}]},
        objects_over(["x", "yy", "z"], [1], 3)),
    "min_max_properties": ({"oneOf": [
        {"type": "object", "properties": {"p": {}, "q": {}, "r": {}}, "additionalProperties": False},
        {"type": "object", "properties": {"p": {"type": "integer"}, "q": {}, "s": {}}, "additionalProperties": False,
         "minProperties": 2, "maxProperties": 2}]},
        objects_over(["p", "q", "r", "s"], [1, "a"], 3)),
    # nested: the value of a listed key must itself be negated relative to the context
    "nested_closed": ({"oneOf": [
        {"type": "object", "properties": {"k": CLOSED_A}, "additionalProperties": False},
        {"type": "object", "properties": {"k": CLOSED_B}, "additionalProperties": False, "required": ["k"]}]},
        [{"k": o} for o in objects_over(["foo", "bar"], ["a", 1], 2)] + [{}, {"k": 1}, {"j": {}}]),
    # arrays whose items are closed objects: an item outside the other branch's items
    "arrays_of_closed": ({"oneOf": [{"type": "array", "items": CLOSED_A, "maxItems": 2},
                                    {"type": "array", "items": CLOSED_B}]},
                         arrays_over([{}, {"foo": "x"}, {"bar": "x"}, 1], 3)),
    "prefix_of_closed": ({"oneOf": [{"type": "array", "items": CLOSED_A},
                                    {"type": "array", "prefixItems": [CLOSED_A, CLOSED_B], "items": False}]},
                         arrays_over([{}, {"foo": "x"}, {"bar": "x"}, 1], 3)),
    "contains_closed": ({"type": "array", "items": {"type": "object", "properties": {"foo": {}, "bar": {}},
                                                    "additionalProperties": False},
                         "contains": CLOSED_A, "maxContains": 1},
                        arrays_over([{}, {"foo": "x"}, {"bar": "x"}, {"foo": 1, "bar": 1}], 3)),
    # array and object constants
    "array_const": ({"oneOf": [{"const": [1, 2]}, {"type": "array", "items": {"type": "integer"}}]},
                    arrays_over([1, 2, "a"], 3)),
    "object_const": ({"oneOf": [{"const": {"a": 1, "b": [True]}},
                                {"type": "object", "properties": {"a": {"type": "integer"}}}]},
                     objects_over(["a", "b", "c"], [1, 2, [True], [False]], 3)),
    "enum_of_containers": ({"oneOf": [{"enum": [[], [1], {"x": None}]},
                                      {"type": ["array", "object"], "maxItems": 1, "maxProperties": 1}]},
                           arrays_over([1, 2], 2) + objects_over(["x", "y"], [None, 1], 2)),
    # discriminated with status const on the parent + closed variants (the JSONSchemaBench pattern)
    "discriminated_closed": ({"type": "object", "required": ["status"], "properties": {"status": {"enum": ["c"]}},
                              "oneOf": [
        {"properties": {"status": {}, "path": {"type": "string"}}, "additionalProperties": False},
        {"properties": {"status": {}, "path": {"type": "string"}, "target": {"type": "string"}},
         "required": ["target"], "additionalProperties": False},
        {"properties": {"status": {}, "gone": {"const": True}}, "required": ["gone"],
         "additionalProperties": False}]},
        objects_over(["status", "path", "target", "gone"], ["c", "p", True], 3)),
    # not / if with a closed object
    "not_closed": ({"type": "object", "properties": {"a": {}, "b": {}}, "additionalProperties": False,
                    "not": {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False}},
                   objects_over(["a", "b", "c"], [1, "s"], 2)),
    "if_closed": ({"type": "object", "properties": {"a": {}, "b": {}}, "additionalProperties": False,
                   "if": {"properties": {"a": {"const": 1}}, "additionalProperties": False},
                   "then": {"required": ["a"]}, "else": {"required": ["b"]}},
                  objects_over(["a", "b"], [1, 2], 2)),
    # enum context: the values failing the other branch are kept
    "enum_context": ({"oneOf": [{"enum": [{"a": 1}, {"a": 1, "z": 2}, "s"]},
                                {"type": "object", "properties": {"a": {}}, "additionalProperties": False}]},
                     objects_over(["a", "z"], [1, 2], 2) + ["s", "t"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_oneof_exact(name):
    schema, instances = CASES[name]
    _assert_exact(schema, instances)


@pytest.mark.parametrize("name", sorted(CASES))
def test_oneof_strict_mode_never_widens(name):
    schema, instances = CASES[name]
    _assert_exact(schema, instances, strict_mode=True)


def test_closed_objects_exclusivity_is_kept():
    # The texts upstream xgrammar accepts by dropping exclusivity (valid for both branches).
    cg = grammar_for({"oneOf": [CLOSED_A, CLOSED_B]})
    assert not ENGINE.accepts(cg, "{}")
    assert ENGINE.accepts(cg, '{"foo": "x"}') and ENGINE.accepts(cg, '{"bar": "x"}')


RECURSIVE = {
    "$defs": {"el": {"type": "object", "properties": {"tag": {"type": "string"},
                                                      "children": {"$ref": "#/$defs/children"}},
                     "required": ["tag"]},
              "children": {"oneOf": [{"type": "string"}, {"$ref": "#/$defs/el"},
                                     {"type": "array", "items": {"$ref": "#/$defs/el"}}]}},
    "$ref": "#/$defs/el"}


def test_recursive_branches_disjoint_by_type():
    leaf = [{"tag": "a"}, {"tag": "a", "children": "t"}, {"tag": "a", "children": {"tag": "b"}},
            {"tag": "a", "children": [{"tag": "b"}, {"tag": "c", "children": "x"}]}]
    bad = [{"tag": "a", "children": 1}, {"tag": "a", "children": {"x": 1}}, {"tag": "a", "children": [1]},
           {"children": "t"}]
    _assert_exact(RECURSIVE, leaf + bad)


def test_recursive_overlapping_open_branches_exact():
    # Both branches accept objects and one is the reference being defined (refused before
    # session 37): the plain object branches are subtracted from each other
    # (ir.subtract_objects), "a outside n" a deferred rule; exact at every depth (members in
    # any order at every level: a negated branch names the member it violates first).
    from test_vega_oneof_subtraction import _orders
    s = {"$defs": {"n": {"oneOf": [{"type": "object", "properties": {"a": {"$ref": "#/$defs/n"}}},
                                   {"type": "object", "required": ["b"]}]}}, "$ref": "#/$defs/n"}
    lvl0 = [1, {}, {"b": 1}, {"a": 1}, {"a": {}, "b": 1}, {"a": {"b": 1}, "b": 2}]
    lvl1 = objects_over(["a", "b"], lvl0 + [None], 2)
    inst = lvl0 + lvl1 + objects_over(["a", "b"], lvl1[:20] + [3], 2)
    v = jsonschema.Draft202012Validator(s)
    for strict in (False, True):
        cg = grammar_for(s, strict_mode=strict)
        wrong = [x for x in inst if any(ENGINE.accepts(cg, t) for t in _orders(x)) != v.is_valid(x)
                 and not (strict and v.is_valid(x))]
        assert not wrong, wrong[:5]
    assert 0 < sum(map(v.is_valid, inst)) < len(inst)
    r = json_schema_to_ebnf(s, lenient=True)  # (lenient keeps treating it as anyOf)
    assert any("oneOf" in w for w in r.warnings)


def test_open_key_context_still_refused():
    # Branch B cannot be negated and A allows any key: no finite disjunction exists. (With
    # additionalProperties instead of propertyNames it converts now, exactly:
    # test_oneof_open_object_negation.py, "open_key_context".)
    s = {"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}},
                   {"type": "object", "propertyNames": {"maxLength": 2}}]}
    with pytest.raises(UnsupportedSchemaError):
        json_schema_to_ebnf(s)


def test_work_limit_refuses(monkeypatch):
    from xgrammar2.json_schema import one_of

    # (a schema no other test converts: conversions are cached)
    s = {"oneOf": [{"type": "object", "additionalProperties": False, "properties": {"lim1": {}}},
                   {"type": "object", "additionalProperties": False, "properties": {"lim2": {}}}]}
    monkeypatch.setattr(one_of, "ONE_OF_BUDGET", 1)  # (a oneOf's subtractions share its budget)
    with pytest.raises(UnsupportedSchemaError, match="too large a product"):
        json_schema_to_ebnf(s)
    r = json_schema_to_ebnf(s, lenient=True)
    assert any("oneOf" in w for w in r.warnings)
