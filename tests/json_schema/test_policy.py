"""One test per row of the keyword policy table (policy.KEYWORD_POLICY): enforced keywords
accept a valid and reject an invalid text, annotations do not change the grammar, refused
keywords raise UnsupportedSchemaError naming the keyword and the JSON pointer (and warn in
lenient mode). Adding a row to the table without a case here fails test_every_row_has_a_case.
"""

from __future__ import annotations

import pytest

from js_helpers import check
from xgrammar2.json_schema import (KEYWORD_POLICY, UNKNOWN_KEYWORD_POLICY, Policy, UnsupportedSchemaError,
                                   json_schema_to_ebnf)

# keyword -> (schema, accepted texts, rejected texts[, options])
ENFORCED = {
    "$id": ({"$id": "https://example.com/root.json", "$defs": {"a": {"$id": "a.json", "type": "integer"}},
             "$ref": "a.json"}, ["1"], ['"x"']),
    "id": ({"id": "https://example.com/root.json", "definitions": {"a": {"id": "a.json", "type": "integer"}},
            "properties": {"x": {"$ref": "a.json"}}, "type": "object"}, ['{"x": 1}'], ['{"x": "s"}']),
    "$anchor": ({"$defs": {"a": {"$anchor": "num", "type": "number"}}, "$ref": "#num"}, ["1.5"], ["true"]),
    "$ref": ({"$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}}, "$ref": "#/$defs/t"},
             ["[[], [[]]]"], ["[1]"]),
    "$defs": ({"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s"}, ['"a"'], ["1"]),
    "definitions": ({"definitions": {"s": {"type": "string"}}, "$ref": "#/definitions/s"}, ['"a"'], ["1"]),
    "$dynamicRef": ({"$id": "https://example.com/list", "$dynamicAnchor": "item", "type": "array",
                     "items": {"$dynamicRef": "#item"}}, ["[[], [[]]]"], ["[1]"]),
    "$dynamicAnchor": ({"$defs": {"a": {"$dynamicAnchor": "x", "type": "null"}}, "$ref": "#x"}, ["null"], ["0"]),
    "allOf": ({"allOf": [{"type": "integer"}, {"minimum": 3}]}, ["3"], ["2", '"x"']),
    "anyOf": ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, ["3", "null"], ['"x"']),
    "oneOf": ({"oneOf": [{"type": "integer"}, {"minimum": 2}]}, ["1", "2.5", '"s"'], ["2", "7"]),
    "not": ({"not": {"type": "string"}}, ["1", "null", "[]"], ['"x"']),
    "if": ({"if": {"type": "integer"}, "then": {"minimum": 5}, "else": {"type": "string"}}, ["5", '"a"'],
           ["4", "true"]),
    "then": ({"if": {"const": 1}, "then": {"type": "integer"}}, ["1", '"x"'], []),
    "else": ({"if": {"type": "string"}, "else": {"type": "null"}}, ['"x"', "null"], ["1"]),
    "dependentRequired": ({"type": "object", "properties": {"a": {}, "b": {}}, "dependentRequired": {"a": ["b"]}},
                          ['{"b": 1}', '{"a": 1, "b": 2}', "{}"], ['{"a": 1}']),
    "dependentSchemas": ({"type": "object", "properties": {"a": {}, "b": {}},
                          "dependentSchemas": {"a": {"required": ["b"]}}}, ['{"a": 1, "b": 2}'], ['{"a": 1}']),
    "dependencies": ({"type": "object", "properties": {"a": {}, "b": {}}, "dependencies": {"a": ["b"]}},
                     ['{"a": 1, "b": 2}'], ['{"a": 1}']),
    "type": ({"type": ["integer", "null"]}, ["1", "null"], ["1.5", '"x"']),
    "enum": ({"enum": ["a", 1, None, {"k": [1]}]}, ['"a"', "1", "1.0", "null", '{"k": [1]}'], ['"b"', "2"]),
    "const": ({"const": {"a": 1, "b": "x"}}, ['{"a": 1, "b": "x"}', '{"b": "x", "a": 1}'], ['{"a": 1}']),
    "minimum": ({"type": "number", "minimum": -1.25}, ["-1.25", "0", "3e2"][:2], ["-1.26", "-2"]),
    "maximum": ({"type": "integer", "maximum": 100}, ["100", "-5"], ["101", "1000"]),
    "exclusiveMinimum": ({"type": "number", "exclusiveMinimum": 0}, ["0.001", "1e-9"], ["0", "-0.0", "-1"]),
    "exclusiveMaximum": ({"type": "integer", "exclusiveMaximum": 10}, ["9"], ["10", "11"]),
    "multipleOf": ({"type": "number", "multipleOf": 0.25}, ["0.75", "2", "-1.5"], ["0.1", "1.3"]),
    "minLength": ({"type": "string", "minLength": 2}, ['"ab"', '"\\n\\t"', '"\\ud83d\\ude00x"'], ['"a"', '"\\n"']),
    "maxLength": ({"type": "string", "maxLength": 2}, ['"ab"', '"\\u00e9\\n"'], ['"abc"']),
    "pattern": ({"type": "string", "pattern": "b+c"}, ['"abbcd"', '"bc"'], ['"ac"', '"cb"']),
    "format": ({"type": "string", "format": "date"}, ['"2024-02-29"'], ['"2023-02-29"', '"2024-13-01"']),
    "items": ({"type": "array", "items": {"type": "integer"}}, ["[]", "[1, 2]"], ['["a"]']),
    "prefixItems": ({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
                    ["[1]", '[1, "a"]'], ['["a"]', '[1, "a", 3]']),
    "additionalItems": ({"type": "array", "items": [{"type": "integer"}], "additionalItems": {"type": "null"}},
                        ["[1, null, null]"], ["[1, 2]"]),
    "minItems": ({"type": "array", "minItems": 2}, ["[1, 2]"], ["[1]"]),
    "maxItems": ({"type": "array", "maxItems": 1}, ["[]", "[1]"], ["[1, 2]"]),
    "contains": ({"type": "array", "contains": {"type": "string"}}, ['[1, "a"]'], ["[1]", "[]"]),
    "minContains": ({"type": "array", "contains": {"const": 0}, "minContains": 2}, ["[0, 1, 0]"], ["[0, 1]"]),
    "maxContains": ({"type": "array", "contains": {"const": 0}, "maxContains": 1}, ["[0, 1]"], ["[0, 0]", "[1]"]),
    "uniqueItems": ({"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True},
                    ['["a", "c"]', "[]"], ['["a", "a"]']),
    "unevaluatedItems": ({"type": "array", "prefixItems": [{"type": "integer"}], "unevaluatedItems": False},
                         ["[1]"], ["[1, 2]"], {"strict_mode": False}),
    "properties": ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}},
                   ["{}", '{"a": 1}', '{"a": 1, "b": "x"}', '{"b": "x"}'], ['{"a": "x"}', '{"c": 1}']),
    "required": ({"type": "object", "properties": {"a": {}}, "required": ["a"]}, ['{"a": 1}'], ["{}"]),
    "additionalProperties": ({"type": "object", "properties": {"a": {"type": "integer"}},
                              "additionalProperties": {"type": "string"}},
                             ['{"a": 1, "b": "x"}', '{"b": "x"}'], ['{"b": 1}', '{"a": "x"}']),
    "patternProperties": ({"type": "object", "patternProperties": {"^n_": {"type": "integer"}},
                           "additionalProperties": False}, ['{"n_a": 1}'], ['{"n_a": "x"}', '{"m": 1}']),
    "propertyNames": ({"type": "object", "propertyNames": {"maxLength": 2}}, ['{"ab": 1}'], ['{"abc": 1}']),
    "minProperties": ({"type": "object", "minProperties": 1}, ['{"a": 1}'], ["{}"]),
    "maxProperties": ({"type": "object", "maxProperties": 1}, ['{"a": 1}'], ['{"a": 1, "b": 2}']),
    "unevaluatedProperties": ({"type": "object", "allOf": [{"properties": {"a": {}}}],
                               "unevaluatedProperties": False}, ['{"a": 1}'], ['{"a": 1, "b": 2}'],
                              {"strict_mode": False}),
}

ANNOTATIONS = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$comment": "note",
    "$vocabulary": {"https://json-schema.org/draft/2020-12/vocab/core": True},
    "contentEncoding": "base64",
    "contentMediaType": "application/json",
    "contentSchema": {"type": "object"},
    "title": "T",
    "description": "D",
    "default": 3,
    "examples": [1, 2],
    "deprecated": True,
    "readOnly": True,
    "writeOnly": False,
}

REFUSED = {
    "$recursiveRef": {"$recursiveRef": "#"},
    "$recursiveAnchor": {"$recursiveAnchor": True, "type": "object"},
}


def test_every_row_has_a_case():
    for kw, (pol, reason) in KEYWORD_POLICY.items():
        assert reason, kw
        table = {Policy.ENFORCED: ENFORCED, Policy.ANNOTATION: ANNOTATIONS, Policy.UNSUPPORTED: REFUSED}[pol]
        assert kw in table, f"policy row '{kw}' ({pol.value}) has no test case"
    for table in (ENFORCED, ANNOTATIONS, REFUSED):
        for kw in table:
            assert kw in KEYWORD_POLICY, f"test case for '{kw}' has no policy row"


@pytest.mark.parametrize("kw", sorted(ENFORCED))
def test_enforced(kw):
    case = ENFORCED[kw]
    schema, good, bad = case[:3]
    opts = case[3] if len(case) > 3 else {}
    assert KEYWORD_POLICY[kw][0] is Policy.ENFORCED
    check(schema, good, bad, **opts)


@pytest.mark.parametrize("kw", sorted(ANNOTATIONS))
def test_annotation_is_ignored(kw):
    assert KEYWORD_POLICY[kw][0] is Policy.ANNOTATION
    base = {"type": "object", "properties": {"a": {"type": "integer"}}}
    with_kw = dict(base, **{kw: ANNOTATIONS[kw]})
    r1 = json_schema_to_ebnf(base)
    r2 = json_schema_to_ebnf(with_kw)
    assert r1.ebnf == r2.ebnf and not r2.warnings


def test_unknown_keyword_is_annotation():
    assert UNKNOWN_KEYWORD_POLICY[0] is Policy.ANNOTATION
    assert json_schema_to_ebnf({"type": "integer", "x-custom": {"type": "string"}}).ebnf == \
        json_schema_to_ebnf({"type": "integer"}).ebnf


@pytest.mark.parametrize("kw", sorted(REFUSED))
def test_refused(kw):
    assert KEYWORD_POLICY[kw][0] is Policy.UNSUPPORTED
    schema = {"type": "object", "properties": {"p": REFUSED[kw]}}
    with pytest.raises(UnsupportedSchemaError) as ei:
        json_schema_to_ebnf(schema)
    assert kw in str(ei.value) and "#/properties/p" in str(ei.value)
    assert ei.value.keyword == kw and ei.value.pointer == "#/properties/p"
    r = json_schema_to_ebnf(schema, lenient=True)
    assert any(kw in w and "#/properties/p" in w for w in r.warnings)


# Enforced keywords with values that cannot be enforced exactly: refused, never widened.
REFUSED_VALUES = [
    ({"type": "array", "items": {"type": "object"}, "uniqueItems": True, "minItems": 2}, "uniqueItems", "#"),
    ({"type": "string", "pattern": "(?<=x)a"}, "pattern", "#"),
    ({"type": "string", "pattern": "(a)\\1"}, "pattern", "#"),
    ({"not": {"type": "object", "additionalProperties": {"type": "string"}}}, "not", "#"),
    ({"$ref": "https://example.com/other.json"}, "$ref", "#"),
    ({"type": "integer", "multipleOf": 123456789}, "multipleOf", "#"),
    # (maxLength alone is a decoded-character budget now; minLength stays a product: 101 x 401)
    ({"type": "string", "pattern": "^(\\S+\\s+){0,49}\\S+$", "minLength": 400, "maxLength": 500}, "pattern", "#"),
]


@pytest.mark.parametrize("schema,kw,ptr", REFUSED_VALUES)
def test_refused_values(schema, kw, ptr):
    with pytest.raises(UnsupportedSchemaError) as ei:
        json_schema_to_ebnf(schema)
    assert ei.value.keyword == kw, str(ei.value)
    assert ei.value.pointer == ptr, str(ei.value)
    r = json_schema_to_ebnf(schema, lenient=True)
    assert r.warnings and kw in r.warnings[0]


def test_docs_policy_table():
    """docs/json-schema.md mirrors KEYWORD_POLICY row by row."""
    import os
    import re as _re

    doc = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "json-schema.md")
    with open(doc) as f:
        text = f.read()
    block = text.split("<!-- policy-table:start -->")[1].split("<!-- policy-table:end -->")[0]
    rows = {}
    for line in block.splitlines():
        m = _re.match(r"\| `([^`]+)` \| (\w+) \| (.*) \|$", line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3))
    assert set(rows) == set(KEYWORD_POLICY), set(rows) ^ set(KEYWORD_POLICY)
    for kw, (pol, reason) in KEYWORD_POLICY.items():
        assert rows[kw] == (pol.value, reason), kw
