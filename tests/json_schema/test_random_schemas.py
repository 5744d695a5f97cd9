"""Property test: for random small schemas and random JSON values, whenever the grammar
accepts json.dumps(value), `jsonschema` must say the value is valid (no wrong-valid verdict).
Schemas the converter refuses are skipped; strict_mode=False (value semantics)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from js_engine import ENGINE
from js_helpers import _compile_cached
from xgrammar2.json_schema import SchemaError, json_schema_to_ebnf

jsonschema = pytest.importorskip("jsonschema")

KEYS = ["a", "b", "c"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 12), st.sampled_from([0.5, -1.25, 2.0, 7.75]),
                    st.text(alphabet="ab\u00e9", max_size=3))
values = st.recursive(scalars, lambda ch: st.one_of(st.lists(ch, max_size=3),
                                                    st.dictionaries(st.sampled_from(KEYS), ch, max_size=3)),
                      max_leaves=6)

num_kw = st.fixed_dictionaries({}, optional={
    "minimum": st.sampled_from([-2, 0, 1.5, 3]), "maximum": st.sampled_from([0, 2.5, 5, 10]),
    "exclusiveMinimum": st.sampled_from([-1, 0, 2]), "exclusiveMaximum": st.sampled_from([1, 4.5, 9]),
    "multipleOf": st.sampled_from([2, 3, 0.5, 0.25])})
str_kw = st.fixed_dictionaries({}, optional={
    "minLength": st.integers(0, 2), "maxLength": st.integers(0, 3),
    "pattern": st.sampled_from(["a", "^a", "b$", "^[ab]*$", "é", "^(ab)+$"])})


def schemas(depth=2):
    leaf = st.one_of(
        st.sampled_from([{}, True, False, {"type": "null"}, {"type": "boolean"}, {"type": "string"},
                         {"type": "integer"}, {"type": "number"}, {"type": ["integer", "string"]}]),
        num_kw.map(lambda d: dict(d, type="number")), num_kw.map(lambda d: dict(d, type="integer")),
        str_kw.map(lambda d: dict(d, type="string")), str_kw,
        st.lists(scalars, min_size=1, max_size=3).map(lambda v: {"enum": v}),
        values.map(lambda v: {"const": v}),
    )
    if depth == 0:
        return leaf
    sub = schemas(depth - 1)
    return st.one_of(
        leaf,
        st.fixed_dictionaries({"type": st.just("array")}, optional={
            "items": sub, "prefixItems": st.lists(sub, max_size=2), "minItems": st.integers(0, 2),
            "maxItems": st.integers(0, 3), "contains": sub, "maxContains": st.integers(0, 2),
            "minContains": st.integers(0, 2)}),
        st.fixed_dictionaries({"type": st.just("object")}, optional={
            "properties": st.dictionaries(st.sampled_from(KEYS), sub, max_size=2),
            "required": st.lists(st.sampled_from(KEYS), max_size=2, unique=True),
            "additionalProperties": sub, "minProperties": st.integers(0, 2), "maxProperties": st.integers(0, 2),
            "patternProperties": st.dictionaries(st.sampled_from(["^a", "b", "^c$"]), sub, max_size=1),
            "propertyNames": st.sampled_from([{"maxLength": 1}, {"pattern": "^[ab]"}, {"enum": ["a", "c"]}])}),
        st.lists(sub, min_size=1, max_size=3).map(lambda xs: {"anyOf": xs}),
        st.lists(sub, min_size=1, max_size=3).map(lambda xs: {"allOf": xs}),
        st.lists(sub, min_size=2, max_size=3).map(lambda xs: {"oneOf": xs}),
        sub.map(lambda x: {"not": x}),
        st.tuples(sub, sub, sub).map(lambda t: {"if": t[0], "then": t[1], "else": t[2]}),
        st.lists(st.sampled_from(["x", "y", 1, True]), min_size=1, max_size=3).map(
            lambda v: {"type": "array", "items": {"enum": v}, "uniqueItems": True}),
    )


@settings(max_examples=int(__import__("os").environ.get("XGR_RANDOM_SCHEMAS", "300")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(schemas(), st.lists(values, min_size=1, max_size=8))
def test_no_wrong_valid_on_random_schemas(schema, vals):
    try:
        ebnf = json_schema_to_ebnf(schema, strict_mode=False).ebnf
    except SchemaError:
        return
    cg = _compile_cached(ebnf)
    validator = jsonschema.Draft202012Validator(json.loads(json.dumps(schema), parse_float=Decimal))
    for v in vals:
        text = json.dumps(v)
        if ENGINE.accepts(cg, text):
            dv = json.loads(text, parse_float=Decimal)
            errs = list(validator.iter_errors(dv))
            assert not errs, f"accepted invalid {text} for {json.dumps(schema)}: {errs[0].message}"
