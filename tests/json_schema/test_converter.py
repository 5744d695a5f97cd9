"""Unit and property tests of the JSON Schema → EBNF converter."""

from __future__ import annotations

import json
import re
import time
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from js_engine import ENGINE
from js_helpers import accepts, check, grammar_for
from xgrammar2.json_schema import (InvalidSchemaError, UnsatisfiableSchemaError, UnsupportedSchemaError,
                                   builtin_json_ebnf, json_schema_to_ebnf)
from xgrammar2.json_schema import automaton as fa
from xgrammar2.json_schema import ir, numeric
from xgrammar2.json_schema import regex as rx

# ------------------------------------------------------------------ whitespace and layout

NESTED = {"type": "object", "properties": {
    "a": {"type": "integer"},
    "b": {"type": "array", "items": {"type": "object", "properties": {"c": {"type": "string"}}}},
    "d": {"type": "object", "properties": {}, "additionalProperties": {"type": "integer"}},
    "e": {"type": "array", "items": {"type": "integer"}}}}
NESTED_VALUE = {"a": 1, "b": [{"c": "x"}, {}], "d": {"k": 2}, "e": []}


@pytest.mark.parametrize("indent,separators", [(None, None), (2, None), (4, None), (None, (",", ":")),
                                               (2, (", ", ": ")), ("\t", None), (0, None)])
def test_fixed_layout_matches_json_dumps(indent, separators):
    kw = dict(any_whitespace=False, indent=indent, separators=separators)
    text = json.dumps(NESTED_VALUE, indent=indent, separators=separators)
    assert accepts(NESTED, text, **kw), text
    other = json.dumps(NESTED_VALUE, indent=3 if indent != 3 else 1)
    assert not accepts(NESTED, other, **kw)


def test_default_separators_follow_upstream():
    # like json.dumps: (", ", ": ") on one line, (",", ": ") when indented
    check({"type": "array", "items": {"type": "integer"}}, ["[1, 2]"], ["[1,2]", "[1 ,2]"], any_whitespace=False)
    check({"type": "array", "items": {"type": "integer"}}, ["[\n  1,\n  2\n]"], ["[\n  1, \n  2\n]"],
          any_whitespace=False, indent=2)


def test_any_whitespace_and_bound():
    s = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}
    # \r is JSON whitespace too (RFC 8259; upstream's any_whitespace allows it)
    check(s, ['{"a":[1,2]}', '{ \n\t"a" :\n [ 1 ,2 ] }', '{\r\n"a"\r:[1\r,2]\r}'],
          ['{"a":[1,2]}\r', ' {"a": []}', '{"a": [1 2]}'])
    check(s, ['{  "a": [1]}', '{\r\n"a": [1]}'], ['{   "a": [1]}', '{\r\r\r"a": [1]}'], max_whitespace_cnt=2)
    assert "[ \\n\\r\\t]{0,2}" in json_schema_to_ebnf(s, max_whitespace_cnt=2).ebnf


def test_indent_with_recursion():
    s = {"$defs": {"n": {"type": "object", "properties": {"k": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}},
         "$ref": "#/$defs/n"}
    v = {"k": [{"k": [{}]}, {"k": []}]}
    check(s, [json.dumps(v, indent=2)], [json.dumps(v), json.dumps(v, indent=4)], any_whitespace=False, indent=2)


# ------------------------------------------------------------------ strict mode

def test_strict_mode_semantics():
    s = {"type": "object", "properties": {"a": {"type": "integer"}}}
    check(s, ['{"a": 1}', "{}"], ['{"a": 1, "b": 2}', '{"b": 2}'], strict_mode=True)
    check(s, ['{"a": 1, "b": 2}', '{"b": [1]}'], ['{"a": "x"}', '{"b": 1, "a": 1}'], strict_mode=False)
    # a bare object / array stays open in strict mode (upstream semantics)
    check({"type": "object"}, ['{"x": 1}'], [], strict_mode=True)
    check({"type": "array"}, ['[1, "a"]'], [], strict_mode=True)
    # prefixItems without items closes the array in strict mode only
    p = {"type": "array", "prefixItems": [{"type": "integer"}]}
    check(p, ["[1]", "[]"], ["[1, 2]"], strict_mode=True)
    check(p, ["[1, 2]"], ['["x"]'], strict_mode=False)
    # explicit additionalProperties wins; required-only keys stay allowed
    check({"type": "object", "properties": {"a": {}}, "additionalProperties": True}, ['{"a": 1, "z": 2}'], [])
    check({"type": "object", "properties": {"a": {}}, "required": ["b"]}, ['{"b": 1}'], ['{"a": 1}', '{"b": 1, "c": 1}'])
    # allOf parts are merged before closing
    check({"allOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"b": {"type": "string"}}}],
           "type": "object"}, ['{"a": 1, "b": "x"}'], ['{"c": 1}'])


def test_property_order_and_extras_position():
    s = {"type": "object", "properties": {"a": {}, "b": {}}, "additionalProperties": {"type": "integer"}}
    check(s, ['{"a": 1, "b": 2, "c": 3}', '{"b": 2}', '{"c": 3, "d": 4}'], ['{"b": 1, "a": 2}', '{"c": 3, "a": 1}'])


def test_extra_keys_exclude_listed_names():
    s = {"type": "object", "properties": {"name": {"type": "string"}}, "additionalProperties": {"type": "integer"}}
    # "name" as an extra key with an integer value would bypass the property's schema
    check(s, ['{"nam": 1}', '{"names": 1}', '{"name": "x", "other": 1}'], ['{"name": 1}', '{"n\\u0061me": 1}'])


# ------------------------------------------------------------------ strings

def test_string_escapes_and_code_point_lengths():
    s = {"type": "string", "minLength": 2, "maxLength": 3}
    check(s, ['"ab"', '"\\n\\t"', '"\\u00e9x"', '"\\ud83d\\ude00ab"', '"é😀x"', '"\\"\\\\/"'],
          ['"a"', '"\\ud83d"x"', '"abcd"', '"\\ud83d\\ude00"', '"a\nb"', '"\\x"', '"\\ud83dab"'])


def test_string_spellings():
    # const/enum literals: printable ASCII raw only, other characters in every spelling
    check({"enum": ["ab", "é\n"]}, ['"ab"', '"\\u00E9\\n"', '"é\\u000a"'], ['"\\u0061b"'])
    check({"type": "string", "pattern": "^[a-c]+$"}, ['"\\u0061\\u0062"', '"abc"'], ['"\\u0064"'])
    check({"type": "string", "format": "ipv4"}, ['"1.2.3.\\u0034"'], [])
    s = {"type": "object", "properties": {"ab": {"type": "integer"}}, "required": ["ab"]}
    check(s, ['{"ab": 1}'], ['{"\\u0061b": 1}'])


def test_pattern_is_a_search():
    check({"type": "string", "pattern": "a"}, ['"xay"', '"a"'], ['"xyz"', '""'])
    check({"type": "string", "pattern": "^a"}, ['"ab"'], ['"ba"'])
    check({"type": "string", "pattern": "a$"}, ['"ba"'], ['"ab"'])
    check({"type": "string", "pattern": "^a|b$"}, ['"ax"', '"xb"'], ['"xa"', '"bx"'])
    with pytest.raises(UnsatisfiableSchemaError):
        json_schema_to_ebnf({"type": "string", "pattern": "x^y"})


def test_pattern_with_lengths_is_intersected():
    check({"type": "string", "pattern": "^[a-z]+$", "maxLength": 3}, ['"abc"', '"a"'], ['"abcd"', '""'])
    check({"type": "string", "pattern": "ab", "minLength": 4, "maxLength": 5}, ['"xabx"', '"abxyz"'],
          ['"ab"', '"xxabxx"'])
    check({"allOf": [{"pattern": "^a"}, {"pattern": "b$"}], "type": "string"}, ['"ab"', '"axb"'], ['"ba"', '"a"'])


def test_large_bounds_use_repetition():
    e = json_schema_to_ebnf({"type": "string", "maxLength": 100000}).ebnf
    assert "{0,100000}" in e and len(e) < 2000
    e = json_schema_to_ebnf({"type": "array", "items": {"type": "integer"}, "maxItems": 5000}).ebnf
    assert "{0,4999}" in e and len(e) < 2000
    e = json_schema_to_ebnf({"type": "string", "pattern": "^[a-z]*$", "maxLength": 100000}).ebnf
    assert "{0,100000}" in e


# ------------------------------------------------------------------ numbers

def _num_ok(text, lo, hi, lo_x, hi_x, integer):
    if integer and not re.fullmatch(r"0|-?[1-9][0-9]*", text):
        return False
    if not integer and not re.fullmatch(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?", text):
        return False
    v = Decimal(text)
    if lo is not None and (v < lo or (lo_x and v == lo)):
        return False
    if hi is not None and (v > hi or (hi_x and v == hi)):
        return False
    return True


decimals = st.decimals(min_value=-1000, max_value=1000, places=3, allow_nan=False, allow_infinity=False)
number_texts = st.from_regex(r"\A-?(0|[1-9][0-9]{0,4})(\.[0-9]{1,4})?\Z")


@settings(max_examples=150, deadline=None)
@given(decimals, decimals, st.booleans(), st.booleans(), st.booleans(), st.lists(number_texts, max_size=12))
def test_number_range_automaton_is_exact(a, b, lo_x, hi_x, integer, texts):
    lo, hi = min(a, b), max(a, b)
    n = ir.Num(integer, lo.normalize(), lo_x, hi.normalize(), hi_x)
    if n.trivially_empty():
        return
    d = numeric.number_dfa(n)
    samples = texts + [str(lo), str(hi), format(lo.normalize(), "f"), format(hi.normalize(), "f")]
    for t in samples:
        assert d.run(t) == _num_ok(t, lo, hi, lo_x, hi_x, integer), (t, lo, hi, lo_x, hi_x, integer)


def _expr_to_re(e):
    """Python regex for a grammar expression without rule references (test oracle)."""
    k = e[0]
    if k == "lit":
        return re.escape(e[1])
    if k == "cls":
        return "[" + "".join(re.escape(chr(a)) + ("-" + re.escape(chr(b)) if b > a else "") for a, b in e[1]) + "]"
    if k == "seq":
        return "".join("(?:" + _expr_to_re(x) + ")" for x in e[1])
    if k == "alt":
        return "|".join("(?:" + _expr_to_re(x) + ")" for x in e[1])
    if k == "rep":
        hi = "" if e[3] is None else str(e[3])
        return "(?:" + _expr_to_re(e[1]) + "){%d,%s}" % (e[2], hi)
    raise AssertionError(k)


ints = st.one_of(st.none(), st.integers(-10 ** 6, 10 ** 6), st.integers(-10 ** 20, 10 ** 20))


@settings(max_examples=200, deadline=None)
@given(ints, ints, st.booleans(), st.booleans(), st.lists(st.integers(-10 ** 7, 10 ** 7), max_size=20))
def test_integer_range_expression_is_exact(a, b, lo_x, hi_x, values):
    from xgrammar2.json_schema.emit import int_range_expr

    lo, hi = (a, b) if a is None or b is None or a <= b else (b, a)
    n = ir.Num(True, None if lo is None else Decimal(lo), lo_x, None if hi is None else Decimal(hi), hi_x)
    e = int_range_expr(n)
    samples = list(values) + [x + d for x in (lo, hi) if x is not None for d in (-1, 0, 1)] + [0]
    if e is None:
        assert n.trivially_empty()
        return
    pat = re.compile(_expr_to_re(e))
    for v in samples:
        ok = (lo is None or v > lo or (v == lo and not lo_x)) and (hi is None or v < hi or (v == hi and not hi_x))
        assert (pat.fullmatch(str(v)) is not None) == ok, (v, lo, hi, lo_x, hi_x)
    assert not pat.fullmatch("-0") and not pat.fullmatch("01")


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 60), st.integers(0, 3), st.lists(number_texts, min_size=1, max_size=15))
def test_multiple_of_automaton_is_exact(p, s, texts):
    m = Decimal(p) / (Decimal(10) ** s)
    d = numeric.number_dfa(ir.Num(False, mults=(m.normalize(),)))
    for t in texts:
        assert d.run(t) == (Decimal(t) % m == 0), (t, m)


def test_number_texts():
    check({"type": "number"}, ["0", "-0", "1.5e-3", "1E+2", "-0.0"], ["01", "1.", ".5", "+1", "1e"])
    check({"type": "integer"}, ["0", "-12"], ["-0", "1.0", "1e2", "01"])
    check({"type": "number", "minimum": 0}, ["0", "-0.0", "1e5", "0.5"], ["-1", "-1e-9"])
    check({"type": "number", "minimum": 0.5}, ["0.5", "0.50", "12"], ["0.49999", "5e-1"])  # no exponent off zero
    check({"type": "integer", "minimum": -10, "maximum": 10, "multipleOf": 5}, ["-10", "0", "5", "10"],
          ["-5.0", "3", "15", "-15"])


def test_integer_ranges_through_engine():
    s = {"type": "integer", "minimum": -105, "exclusiveMaximum": 2000}
    cg = grammar_for(s)
    for v in list(range(-130, 40)) + list(range(1980, 2030)):
        assert ENGINE.accepts(cg, str(v)) == (-105 <= v < 2000), v


# ------------------------------------------------------------------ values, composition

def test_const_and_enum_equality():
    check({"const": 1}, ["1", "1.0", "1.00"], ["1.5", "true", '"1"'])
    check({"const": 0}, ["0", "-0", "0.0"], ["false"])
    check({"const": {"a": [1, {"b": None}], "c": True}},
          ['{"a": [1, {"b": null}], "c": true}', '{"c": true, "a": [1, {"b": null}]}'], ['{"a": [1, {}], "c": true}'])
    check({"enum": ["a\nb", "é"]}, ['"a\\nb"', '"\\u00e9"', '"é"'], ['"a\nb"', '"e"'])
    check({"type": "string", "enum": ["a", 1, "bb"], "maxLength": 1}, ['"a"'], ["1", '"bb"'])


def test_allof_intersection():
    check({"allOf": [{"type": ["integer", "string"]}, {"type": ["string", "null"]}, {"maxLength": 2}]},
          ['"ab"'], ["1", "null", '"abc"'])
    check({"allOf": [{"minimum": 1}, {"maximum": 3}, {"type": "integer"}]}, ["1", "3"], ["0", "4", "2.5"])
    check({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
           "allOf": [{"properties": {"a": {"minimum": 5}}}]}, ['{"a": 5}'], ['{"a": 4}', "{}"])


def test_ref_siblings_intersect_and_recursion():
    s = {"$defs": {"pos": {"type": "integer", "minimum": 1}}, "$ref": "#/$defs/pos", "maximum": 3}
    check(s, ["1", "3"], ["0", "4"])
    tree = {"$defs": {"t": {"type": "object", "properties": {"v": {"type": "integer"},
                                                             "c": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
                            "required": ["v"]}}, "$ref": "#/$defs/t"}
    check(tree, ['{"v": 1, "c": [{"v": 2}, {"v": 3, "c": []}]}'], ['{"v": 1, "c": [{}]}'])
    e = json_schema_to_ebnf(tree).ebnf
    assert e.startswith("root ::= defs_t") and "defs_t ::=" in e

def test_a_definition_named_like_a_property_path_keeps_its_own_rule():
    # Github_medium---o60984: definition "rel" has property "recent", an array of definition
    # "rel_recent"; the property's rule "defs_rel" + "_recent" took the definition's name, and
    # the items became arrays of themselves (valid instances refused). Found by the core's
    # plain front end, whose grammar disagreed (tests/json_schema/test_plain_front.py).
    s = {"definitions": {
        "rel": {"type": "object", "properties": {"recent": {"type": "array", "items": {"$ref": "#/definitions/rel_recent"}}}},
        "rel_recent": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}},
        "type": "object", "properties": {"r": {"$ref": "#/definitions/rel"}}, "required": ["r"]}
    check(s, ['{"r": {"recent": [{"n": 1}, {"n": 2}]}}', '{"r": {}}'],
          ['{"r": {"recent": [[]]}}', '{"r": {"recent": [{}]}}'])



def test_fragment_only_ids_name_no_resource_and_plain_names_are_anchors():
    # draft-04 "id": "#/properties/app" on a sub-schema: "#/definitions/app" inside it still
    # points into the document (JsonSchemaStore---ize-spec); "id": "#orgName" is a plain-name
    # fragment, which "$ref": "#orgName" reaches (Github_easy---o35904). Both were refused
    # ("target does not exist", "unknown anchor") when a fragment-only id became a resource.
    s = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
         "properties": {"app": {"id": "#/properties/app", "type": "object",
                                "additionalProperties": {"$ref": "#/definitions/app"}},
                        "org": {"$ref": "#orgName"}},
         "definitions": {"app": {"id": "#/definitions/app", "type": "integer"},
                         "orgName": {"id": "#orgName", "type": "string", "pattern": "^[a-z]+$"}}}
    import jsonschema
    good = ['{"app": {"x": 1}}', '{"org": "ab"}', '{"app": {}, "org": "z"}']
    bad = ['{"app": {"x": "s"}}', '{"org": "AB"}', '{"org": 1}']
    for t in good + bad:
        assert jsonschema.Draft4Validator(s).is_valid(json.loads(t)) == (t in good), t
    check(s, good, bad)


def test_oneof_exact():
    s = {"type": "object", "properties": {"a": {}, "b": {}}, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}
    check(s, ['{"a": 1}', '{"b": 1}'], ['{"a": 1, "b": 2}', "{}"])
    tagged = {"oneOf": [{"type": "object", "properties": {"k": {"const": "x"}, "v": {"type": "integer"}},
                         "required": ["k"]},
                        {"type": "object", "properties": {"k": {"const": "y"}, "v": {"type": "string"}},
                         "required": ["k"]}]}
    check(tagged, ['{"k": "x", "v": 1}', '{"k": "y", "v": "s"}'], ['{"k": "x", "v": "s"}'])


def test_not_and_if_then_else():
    check({"type": "integer", "not": {"enum": [1, 2]}}, ["0", "3"], ["1", "2"])
    check({"type": "string", "not": {"pattern": "^a"}}, ['"ba"', '""'], ['"ab"'])
    check({"type": "array", "not": {"items": {"type": "integer"}}}, ['[1, "a"]'], ["[1]", "[]"])
    check({"type": "object", "properties": {"k": {"type": "string"}, "n": {"type": "integer"}},
           "if": {"properties": {"k": {"const": "num"}}, "required": ["k"]},
           "then": {"required": ["n"]}},
          ['{"k": "num", "n": 1}', '{"k": "x"}', "{}"], ['{"k": "num"}'])


def test_contains_counting_and_unique():
    check({"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 10}, "minContains": 2,
           "maxContains": 3}, ["[10, 1, 11]", "[10, 10, 10, 1]"], ["[10]", "[10, 10, 10, 10]", "[]"])
    check({"type": "array", "prefixItems": [{"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}], "items": False,
           "uniqueItems": True}, ['["a", "b"]', '["b", "c"]', '["a"]'], ['["a", "a"]', '["c"]'])
    check({"type": "array", "items": {"type": "boolean"}, "uniqueItems": True}, ["[true, false]"],
          ["[true, true]", "[true, false, true]"])


def test_property_names_and_pattern_properties():
    s = {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"},
         "patternProperties": {"^i": {"type": "integer"}}, "additionalProperties": {"type": "string"}}
    check(s, ['{"ix": 1, "a": "s"}', "{}"], ['{"ix": "s"}', '{"a": 1}', '{"A": "s"}'])
    check({"type": "object", "properties": {"ab": {}, "abc": {}}, "propertyNames": {"maxLength": 2}},
          ['{"ab": 1}'], ['{"abc": 1}'], strict_mode=False)


def test_min_max_properties_counting():
    s = {"type": "object", "properties": {"a": {}, "b": {}}, "minProperties": 1, "maxProperties": 2,
         "additionalProperties": {"type": "integer"}}
    check(s, ['{"a": 1}', '{"b": 1, "c": 2}', '{"x": 1, "y": 2}'], ["{}", '{"a": 1, "b": 1, "c": 2}'])


def test_a_large_property_count_without_named_properties_is_one_repetition():
    # no (named property, count) states: the members are a bounded repetition of the additional
    # ones, so a count far over the state limit compiles (JsonSchemaStore---tokenlist's tokenMap:
    # maxProperties 10000); it was refused as "the property-counting automaton is too large"
    s = {"type": "object", "minProperties": 2, "maxProperties": 5000, "additionalProperties": {"type": "integer"}}
    members = lambda n: "{" + ", ".join('"k%d": %d' % (i, i) for i in range(n)) + "}"  # noqa: E731
    check(s, [members(2), members(5000)], ["{}", members(1), members(5001), '{"a": "x", "b": 1}'])
    # with named properties the states are (property, members so far), at most one per member
    # decided: a count above the number of properties adds none
    named = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
             "required": ["b"], "maxProperties": 5000, "additionalProperties": {"type": "integer"}}
    check(named, [members(0)[:-1] + '"b": 1}', '{"a": 1, "b": 2, ' + members(4998)[1:], '{"b": 2, ' + members(4999)[1:]],
          ['{"a": 1, "b": 2, ' + members(4999)[1:], '{"b": 2, ' + members(5000)[1:], '{"a": 1}'])
    # past the limit: as many named properties as the count allows
    wide = {"type": "object", "properties": {"p%d" % i: {} for i in range(80)}, "maxProperties": 80}
    with pytest.raises(UnsupportedSchemaError, match="property-counting automaton is too large"):
        grammar_for(wide)


# ------------------------------------------------------------------ formats

FORMAT_CASES = {
    "date-time": (["2024-02-29T23:59:60Z", "1990-12-31t15:59:59.5-08:00"],
                  ["2023-02-29T00:00:00Z", "2024-01-01T24:00:00Z", "2024-01-01 00:00:00Z"]),
    "time": (["08:30:06.283185Z", "23:59:60+00:00"], ["08:30:06", "22:59:60Z"]),
    "duration": (["P4DT12H30M5S", "P2W", "PT0S"], ["P", "PT", "P1Y2D", "P1WT1H"]),
    "email": (["joe.bloggs@example.com", '"a b"@x.org', "a@[127.0.0.1]"], ["a..b@c", "@x", "a@b@c"]),
    "hostname": (["www.example.com", "a-b.c"], ["-a.com", "a_b", "xn--abc.com", "a." + "b" * 64]),
    "ipv4": (["192.168.0.1"], ["256.1.1.1", "01.1.1.1", "1.1.1"]),
    "ipv6": (["::1", "1:2:3:4:5:6:7:8", "::ffff:1.2.3.4"], ["1:2:3:4:5:6:7:8:9", "1::2::3", "12345::"]),
    "uuid": (["123e4567-e89b-12d3-a456-426614174000"], ["123e4567e89b12d3a456426614174000"]),
    "uri": (["https://x.org/a?b#c", "urn:isbn:123"], ["//x.org", "a b:c", "http://x y"]),
    "uri-reference": (["../a", "#f", "https://x.org"], ["\\\\x", "a b"]),
    "uri-template": (["http://x/{id}", "{+path}/x"], ["{", "x}"]),
    "json-pointer": (["", "/a/b~0~1"], ["a", "/~2"]),
    "relative-json-pointer": (["0", "1/a", "2#"], ["-1", "01"]),
    "date": (["2000-02-29"], ["1900-02-29", "2000-2-29"]),
}


@pytest.mark.parametrize("fmt", sorted(FORMAT_CASES))
def test_formats(fmt):
    good, bad = FORMAT_CASES[fmt]
    check({"type": "string", "format": fmt}, [json.dumps(x) for x in good], [json.dumps(x) for x in bad])


# ------------------------------------------------------------------ regex translation vs Python re

PATTERNS = ["a", "^ab", "b$", "^a|b$", "a+b*", "(ab|ba){2}", "^[a-c]{1,3}$", "^(a|b)*c", "[^a]b", "a.b",
            "^$", "(^a)|(b$)", "a{2,}", "^(?:ab)?c?$", "ab|^ba$", "[a-]b", "ab|ba|ca", "a|^b|c$|bb",
            "ac|b*|ca", "ab|c|^ba$|bc"]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(PATTERNS), st.lists(st.text(alphabet="abc\n", max_size=6), min_size=1, max_size=10))
def test_regex_search_semantics_match_python(p, strings):
    raw = rx.parse(p)
    full = rx.to_full_match(raw) or rx.cat(rx.ANY_STAR, raw, rx.ANY_STAR)
    d = fa.from_regex(full)
    nfa = fa.compile_nfa(full)
    for s in strings:
        expect = re.search(p.replace("$", r"\Z"), s) is not None
        assert d.run(s) == expect, (p, s)
        assert fa.nfa_match(nfa, s) == expect, (p, s)


def test_unanchored_alternatives_are_searched_together():
    # ".*(w1|w2|...).*" instead of the union of ".*w1.*", ".*w2.*", ...: the subset construction
    # of that union tracked every word apart and exceeded the state limit at eight two-letter
    # words (JsonSchemaStore---io-package's patternProperties); the language is the same
    p = "en|de|ru|pt|nl|fr|it|es|pl|uk|zh-cn"
    d = fa.from_regex(rx.to_full_match(rx.parse(p)))
    assert d.n < 40
    for text in ["en", "xen", "zh-c", "zh-cnx", "ed", "", "polish", "uk!", "e n", "dE"]:
        assert d.run(text) == (re.search(p, text) is not None), text
    check({"type": "object", "patternProperties": {p: {"type": "string"}}, "additionalProperties": False},
          ['{"en": "a", "xfr": "b"}', "{}"], ['{"en": 1}', '{"xx": "a"}'])


LEN_PATTERNS = ["^[ab]+$", "^a[ab]*b$", "^(ab){1,3}$", "ab", "^a", "^[ab]{2,}c?$", "^(a|bb)*$", "b$"]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(LEN_PATTERNS), st.integers(0, 4), st.one_of(st.none(), st.integers(0, 6)),
       st.lists(st.text(alphabet="abc", max_size=7), min_size=1, max_size=12))
def test_pattern_length_intersection_is_exact(p, minl, maxl, strings):
    schema = {"type": "string", "pattern": p, "minLength": minl}
    if maxl is not None:
        schema["maxLength"] = maxl
    try:
        cg = grammar_for(schema)
    except UnsatisfiableSchemaError:
        cg = None
    for s in strings:
        expect = re.search(p.replace("$", r"\Z"), s) is not None and minl <= len(s) and (maxl is None or len(s) <= maxl)
        got = cg is not None and ENGINE.accepts(cg, json.dumps(s))
        assert got == expect, (p, minl, maxl, s)


# ------------------------------------------------------------------ errors, lenient, API

@pytest.mark.parametrize("schema,ptr,kw", [
    ({"properties": {"a": {"minLength": -1}}}, "#/properties/a", "minLength"),
    ({"properties": {"a": {"type": "strin"}}}, "#/properties/a", "type"),
    ({"items": {"$ref": "#/$defs/missing"}}, "#/items", "$ref"),
    ({"pattern": "(a"}, "#", "pattern"),
    ({"required": "a"}, "#", "required"),
    ({"anyOf": []}, "#", "anyOf"),
    ({"properties": {"a/b~c": 3}}, "#/properties/a~1b~0c", "schema"),
])
def test_invalid_schemas_raise_with_pointer(schema, ptr, kw):
    with pytest.raises(InvalidSchemaError) as ei:
        json_schema_to_ebnf(schema)
    assert ei.value.pointer == ptr and ei.value.keyword == kw, str(ei.value)
    assert ptr in str(ei.value)


def test_unsatisfiable():
    for s in (False, {"type": "integer", "minimum": 3, "maximum": 2}, {"allOf": [{"type": "string"}, {"type": "null"}]},
              {"type": "object", "properties": {"a": False}, "required": ["a"]}):
        with pytest.raises(UnsatisfiableSchemaError):
            json_schema_to_ebnf(s)


def test_lenient_warnings_name_the_dropped_constraint():
    s = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "uniqueItems": True,
                                                   "minItems": 2},
                                          "f": {"type": "string", "format": "color"}}}
    with pytest.raises(UnsupportedSchemaError):
        json_schema_to_ebnf(s)
    r = json_schema_to_ebnf(s, lenient=True)
    assert len(r.warnings) == 2
    assert any("#/properties/tags" in w and "uniqueItems" in w for w in r.warnings)
    assert any("#/properties/f" in w and "format" in w and "color" in w for w in r.warnings)


def test_inputs_string_dict_bool_pydantic():
    pydantic = pytest.importorskip("pydantic")

    class Item(pydantic.BaseModel):
        name: str
        qty: int = 1

    class Order(pydantic.BaseModel):
        items: list[Item]
        note: str | None = None

    text = json.dumps({"type": "integer"})
    assert json_schema_to_ebnf(text).ebnf == json_schema_to_ebnf({"type": "integer"}).ebnf
    assert json_schema_to_ebnf(True).ebnf == builtin_json_ebnf()
    check(Order.model_json_schema(), ['{"items": [{"name": "a", "qty": 2}], "note": null}', '{"items": []}'],
          ['{"items": [{"qty": 2}]}', '{"note": "x"}'])
    r = json_schema_to_ebnf(Order)
    assert "defs_Item" in r.ebnf


def test_builtin_json_and_object_mode():
    cg = ENGINE.compile(builtin_json_ebnf())
    for t in ['{"a": [1, 2.5, "x", null, true]}', "3", '"s"', "[]"]:
        assert ENGINE.accepts(cg, t)
    cg = ENGINE.compile(builtin_json_ebnf(object_only=True))
    assert ENGINE.accepts(cg, '{"a": {"b": []}}') and not ENGINE.accepts(cg, "[1]")


def test_deterministic_canonical_output():
    s = {"type": "object", "properties": {"x": {"$ref": "#/$defs/pt"}, "y": {"$ref": "#/$defs/pt"},
                                          "z": {"type": "object", "properties": {"a": {"type": "integer"}}}},
         "$defs": {"pt": {"type": "object", "properties": {"a": {"type": "integer"}}}}}
    a = json_schema_to_ebnf(s).ebnf
    import xgrammar2.json_schema as J
    J._cache.clear()
    b = json_schema_to_ebnf(json.loads(json.dumps(s))).ebnf
    assert a == b
    # the same sub-schema becomes one rule, named after its definition
    assert a.count("::= \"{\"") == 1 or a.count("defs_pt ::=") == 1
    assert "root_z" not in a  # identical body merged into defs_pt


def test_typical_conversion_is_fast():
    s = {"type": "object", "properties": {
        "location": {"type": "string", "description": "City"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "include": {"type": "array", "items": {"type": "string"}, "maxItems": 5}},
        "required": ["location"], "additionalProperties": False}
    import xgrammar2.json_schema as J
    best = 1.0
    for i in range(20):
        J._cache.clear()
        s2 = dict(s, title=f"t{i}")
        t = time.thread_time()
        json_schema_to_ebnf(s2)
        best = min(best, time.thread_time() - t)
    assert best < 1e-3, f"{best * 1e3:.2f} ms"
    t = time.perf_counter()
    json_schema_to_ebnf(s2)  # cached
    assert time.perf_counter() - t < 1e-3
