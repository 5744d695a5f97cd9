"""Exclusive oneOf whose branches need the negation of an *open* object with
patternProperties / additionalProperties (ir.negate_node with ``open_negation``: "some member's
value violates them", ir.Obj.somes, emitted by emit_somes.py), where no branch has a finite key
set to negate within.

Brute-force oracle: every schema is checked on a grid of small objects (keys in the order the
grammar writes them: named properties in schema order, then the others in any order) and scalars
against ``jsonschema`` (strict_mode=False, the JSON Schema meaning): accepted iff valid. The grids
contain instances that match several branches, which exclusivity must reject."""

from __future__ import annotations

import json

import jsonschema
import pytest

from js_engine import ENGINE
from js_helpers import assert_exact, bench_row, grammar_for, member_orders, objects_over
from xgrammar2.json_schema import UnsupportedSchemaError, json_schema_to_ebnf

SCALARS = [None, True, 0, 1.5, "", "a"]


CLOSED_X = {"type": "object", "properties": {"x": {"type": "integer"}}, "additionalProperties": False}

CASES = {
    # two open branches whose nested values are closed objects: {"a": {"x": 1}} matches both
    # unless the nested object has a key outside {x} (some member violates additionalProperties)
    "nested_closed": ({"oneOf": [
        {"type": "object", "required": ["a"], "properties": {"a": CLOSED_X}},
        {"type": "object", "properties": {"a": {"type": "object"}, "b": {"type": "integer"}}}]},
        [{"a": o} for o in objects_over(["x", "y", "z"], [1, "s"], 2)]
        + [{"a": o, "b": b} for o in objects_over(["x", "y"], [1], 2) for b in (1, "s")]
        + [{"b": 1}, {"a": 1}] + SCALARS),
    # additionalProperties as a schema in an open-context branch: members outside {p} must be
    # strings in branch 0; branch 1 is any object with a number member "n"
    "additional_schema": ({"oneOf": [
        {"type": "object", "properties": {"p": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
        {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}]},
        objects_over(["p", "n", "q", "r"], [1, "s", None], 3) + SCALARS),
    # patternProperties with an infinite key language (^x): some key starting with x has a
    # non-integer value
    "pattern_infinite": ({"oneOf": [
        {"type": "object", "patternProperties": {"^x": {"type": "integer"}}},
        {"type": "object", "required": ["k"]}]},
        objects_over(["k", "x", "xa", "y"], [1, "s"], 3) + SCALARS),
    # Github_trivial---o88605's shape: one required key each, a finite pattern forcing the
    # other keys to null (finite key language: one alternative per key)
    "finite_pattern_null": ({"oneOf": [
        {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}},
         "patternProperties": {"^(b|c)$": {"type": "null"}}},
        {"type": "object", "required": ["b"], "properties": {"b": {"type": "integer"}},
         "patternProperties": {"^(a|c)$": {"type": "null"}}},
        {"type": "object", "required": ["c"], "properties": {"c": {"type": "boolean"}},
         "patternProperties": {"^(a|b)$": {"type": "null"}}}]},
        objects_over(["a", "b", "c", "d"], [None, "s", 1, True], 3) + SCALARS),
    # a finite key language that really overlaps: {"b": 1} matches both branches
    "finite_pattern_overlap": ({"oneOf": [
        {"type": "object", "patternProperties": {"^(b|c)$": {"type": "integer"}}},
        {"type": "object", "required": ["b"]}]},
        objects_over(["b", "c", "d"], [1, "s"], 3) + SCALARS),
    # both patternProperties and additionalProperties:false in the negated branch, plus
    # minProperties on the other one (counting members while tracking the condition)
    "pattern_and_closed": ({"oneOf": [
        {"type": "object", "properties": {"id": {"type": "integer"}}, "patternProperties": {"^t": {"type": "string"}},
         "additionalProperties": False},
        {"type": "object", "minProperties": 2}]},
        objects_over(["id", "ta", "tb", "z"], [1, "s"], 3) + SCALARS),
    # three overlapping open branches: two conditions tracked at once on one object
    "three_branches": ({"oneOf": [
        {"type": "object", "additionalProperties": {"type": "integer"}},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "object", "patternProperties": {"^a": {"type": "null"}}}]},
        objects_over(["a", "ab", "b"], [1, "s", None], 3) + SCALARS),
    # a branch that is itself an exclusive oneOf with an existential condition ("some member
    # other than p is not an integer"), negated by the outer oneOf: "every member other than p
    # is an integer", p itself left free
    "negated_condition": ({"oneOf": [
        {"oneOf": [{"type": "object", "properties": {"p": {}}, "additionalProperties": {"type": "integer"}},
                   {"type": "object"}]},
        {"type": "object", "required": ["z"]}]},
        objects_over(["p", "z", "q"], [1, "s"], 3) + SCALARS),
    # (refused before: test_oneof_exact.py's test_open_key_context_still_refused)
    "open_key_context": ({"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}},
                                    {"type": "object", "additionalProperties": {"type": "string"}}]},
                         objects_over(["a", "b", "c"], [1, "s", None], 3) + SCALARS),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_open_object_negation_exact(case):
    schema, instances = CASES[case]
    assert_exact(schema, instances)


@pytest.mark.parametrize("case", sorted(CASES))
def test_open_object_negation_strict_mode_sound(case):
    """strict_mode=True (objects without additionalProperties closed to their named keys)
    narrows objects: nothing invalid is accepted, in any member order."""
    schema, instances = CASES[case]
    cg = grammar_for(schema, strict_mode=True)
    v = jsonschema.Draft202012Validator(schema)
    bad = [t for x in instances if not v.is_valid(x) for t in member_orders(x) if ENGINE.accepts(cg, t)]
    assert not bad, f"{len(bad)} invalid instances accepted in strict mode: {bad[:8]}"


def test_open_negation_inside_arrays_and_nested_oneof():
    """The exclusive oneOf deep inside an array item and referenced through $defs."""
    schema = {"type": "array", "items": {"$ref": "#/$defs/it"}, "$defs": {"it": CASES["nested_closed"][0]}}
    items = [{"a": {"x": 1}}, {"a": {"x": 1, "y": 1}}, {"b": 2}, {"a": {"y": "s"}, "b": 1}]
    inst = [[]] + [[a] for a in items] + [[a, b] for a in items for b in items]
    assert_exact(schema, inst)


def test_open_negation_key_order_free_for_additional_members():
    """The violating member may come anywhere among the additional members."""
    schema = {"oneOf": [
        {"type": "object", "additionalProperties": {"type": "integer"}},
        {"type": "object"}]}  # exactly one: the objects with a non-integer member
    cg = grammar_for(schema, strict_mode=False)
    for text, ok in (('{"a": 1, "b": "s", "c": 2}', True), ('{"b": "s", "a": 1}', True),
                     ('{"a": 1, "c": 2, "b": null}', True), ('{"a": 1, "c": 2}', False), ("{}", False)):
        assert ENGINE.accepts(cg, text) == ok, text


def test_first_attempt_unchanged_when_relative_negation_applies():
    """A closed branch (finite key set) is still made exclusive by ir.subtract, not by the open
    negation: the EBNF has no existential-condition rules."""
    closed_a = {"type": "object", "additionalProperties": False, "properties": {"foo": {"type": "string"}}}
    closed_b = {"type": "object", "additionalProperties": False, "properties": {"bar": {"type": "string"}}}
    ebnf = json_schema_to_ebnf({"oneOf": [closed_a, closed_b]}, strict_mode=False).ebnf
    assert "__x" not in ebnf and "_w1" not in ebnf


def test_any_order_refused():
    """any_order does not track the conditions: refused (lenient: dropped, with a warning)."""
    schema = CASES["open_key_context"][0]
    with pytest.raises(UnsupportedSchemaError, match="any_order"):
        json_schema_to_ebnf(schema, any_order=True)
    r = json_schema_to_ebnf(schema, any_order=True, lenient=True)
    assert any("any_order" in w for w in r.warnings)


def test_property_names_still_refused():
    """Negating propertyNames of an open object is not implemented: refused, naming oneOf."""
    schema = {"oneOf": [{"type": "object", "propertyNames": {"maxLength": 1}}, {"type": "object", "required": ["a"]}]}
    with pytest.raises(UnsupportedSchemaError, match="oneOf"):
        json_schema_to_ebnf(schema, strict_mode=False)


BENCH_IDS = ["Github_trivial---o88605", "Github_medium---o72203", "Github_ultra---o39230", "Github_ultra---o69900",
             "JsonSchemaStore---helm-testsuite"]


@pytest.mark.parametrize("idx", range(len(BENCH_IDS)), ids=BENCH_IDS)
def test_jsonschemabench_schemas_agree_with_labels(idx):
    """JSONSchemaBench schemas refused before (an exclusive oneOf needing the negation of an open
    object) convert, and their test instances agree with their labels (which assume formats are
    asserted, as the converter does; ``jsonschema`` without a format checker differs): an
    invalid one is rejected (as given and with its top-level members in the schema's property
    order), a valid one accepted in that order (the grammar writes named properties in schema
    order; three valid instances of o39230/o69900 list them otherwise)."""
    r = bench_row(BENCH_IDS[idx])
    schema = r["schema"]
    cg = grammar_for(schema, strict_mode=False)
    order = list(schema.get("properties", {}))
    wrong = []
    for t in r["tests"]:
        x = t["data"]
        texts = [json.dumps(x)]
        if isinstance(x, dict):
            texts.append(json.dumps({k: x[k] for k in sorted(x, key=lambda k: order.index(k) if k in order else 1 << 30)}))
        acc = [ENGINE.accepts(cg, s) for s in texts]
        if t["valid"] and not acc[-1]:
            wrong.append(("rejected valid", texts[-1][:200]))
        if not t["valid"] and any(acc):
            wrong.append(("accepted invalid", texts[0][:200]))
    assert not wrong, wrong
    assert r["tests"], "the schema has test instances"
