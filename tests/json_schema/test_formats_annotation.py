"""``format`` as JSON Schema 2020-12 defines it: an annotation unless asserted.

* the known formats (formats.FORMATS) stay enforced;
* OpenAPI 3 formats get their meaning: int32 / int64 bound integers and numbers (intersected
  with minimum/maximum), byte is padded RFC 4648 base64, float / double / binary / password
  add nothing;
* any other value (unknown, or regex / idn-* / iri*) compiles unenforced with a warning naming
  the JSON pointer and the format, on ConversionResult, Grammar and CompiledGrammar (cache
  hits included), as a UserWarning and once per distinct conversion on the
  ``xgrammar2.json_schema`` logger;
* a format on a type it does not describe is ignored.

Acceptance is checked with the matcher (js_helpers) against independent oracles: Python's
``base64.b64decode(validate=True)`` for byte, integer comparisons for int32 / int64, and the
``jsonschema`` validator (format as annotation) for unenforced formats.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import random
import uuid
from decimal import Decimal

import pytest

from js_helpers import accepts, check
from xgrammar2.json_schema import InvalidSchemaError, UnsatisfiableSchemaError, json_schema_to_ebnf

INT32 = (-(2 ** 31), 2 ** 31 - 1)
INT64 = (-(2 ** 63), 2 ** 63 - 1)

# format -> instance type it describes (OpenAPI 3 "Data Types")
OPENAPI = {"int32": "integer", "int64": "integer", "float": "number", "double": "number",
           "byte": "string", "binary": "string", "password": "string"}
NOT_ENFORCED = ["semver", "color", "decimal", "uint8", "regex", "idn-email", "idn-hostname", "iri",
                "iri-reference"]


def _fresh(schema):
    """``schema`` under a property name never seen before, so the conversion cache misses."""
    name = "p" + uuid.uuid4().hex
    return {"type": "object", "properties": {name: schema}, "required": [name]}, name


def _xgr():
    xgr = pytest.importorskip("xgrammar2")
    if not hasattr(xgr, "GrammarCompiler"):
        pytest.skip("xgrammar2's compiled core is not available")
    return xgr


# ------------------------------------------------------------------ every format compiles


@pytest.mark.parametrize("fmt", sorted(OPENAPI))
def test_openapi_format_compiles_without_warning(fmt):
    r = json_schema_to_ebnf({"type": "object", "properties": {"v": {"type": OPENAPI[fmt], "format": fmt}}})
    assert r.warnings == []


@pytest.mark.parametrize("fmt", NOT_ENFORCED)
@pytest.mark.parametrize("lenient", [False, True])
def test_unenforced_format_compiles_with_warning(fmt, lenient):
    r = json_schema_to_ebnf({"type": "object", "properties": {"v": {"type": "string", "format": fmt}}},
                            lenient=lenient)
    assert len(r.warnings) == 1, r.warnings
    w = r.warnings[0]
    assert w.startswith(f"#/properties/v: format '{fmt}' is not enforced (")
    assert "annotation" in w
    if fmt in ("semver", "color", "decimal", "uint8"):
        assert "unknown format" in w
    # the string is unconstrained: the same grammar as without the format
    assert r.ebnf == json_schema_to_ebnf({"type": "object", "properties": {"v": {"type": "string"}}}).ebnf


def test_warning_text_exact():
    r = json_schema_to_ebnf({"type": "object", "properties": {"v": {"type": "string", "format": "semver"}}})
    assert r.warnings == ["#/properties/v: format 'semver' is not enforced "
                          "(unknown format; JSON Schema treats format as an annotation)"]


def test_warning_once_per_schema_location():
    s = {"$defs": {"ver": {"type": "string", "format": "semver"}}, "type": "object",
         "properties": {"a": {"$ref": "#/$defs/ver"}, "b": {"$ref": "#/$defs/ver"},
                        "c": {"type": ["string", "integer", "null"], "format": "color"}}}
    r = json_schema_to_ebnf(s)
    assert sorted(r.warnings) == sorted([
        "#/$defs/ver: format 'semver' is not enforced (unknown format; JSON Schema treats format as an annotation)",
        "#/properties/c: format 'color' is not enforced (unknown format; JSON Schema treats format as an "
        "annotation)"])


def test_non_string_format_value_is_invalid():
    with pytest.raises(InvalidSchemaError) as ei:
        json_schema_to_ebnf({"type": "object", "properties": {"n": {"type": "integer", "format": 32}}})
    assert ei.value.pointer == "#/properties/n" and ei.value.keyword == "format"
    assert "must be a string" in str(ei.value)


def test_upstream_xgrammar_also_compiles_these_schemas():
    xgr_up = pytest.importorskip("xgrammar")
    comp = xgr_up.GrammarCompiler(xgr_up.TokenizerInfo(["a"]), cache_enabled=False)
    for fmt in sorted(OPENAPI) + NOT_ENFORCED:
        typ = OPENAPI.get(fmt, "string")
        s = {"type": "object", "properties": {"v": {"type": typ, "format": fmt}}}
        comp.compile_json_schema(json.dumps(s))  # the reference accepts the schema ...
        json_schema_to_ebnf(s)  # ... and so do we


# ------------------------------------------------------------------ int32 / int64


def _int_candidates(lo, hi, seed):
    rng = random.Random(seed)
    near = [lo - 2, lo - 1, lo, lo + 1, -1, 0, 1, hi - 1, hi, hi + 1, hi + 2, 10 * hi, 10 * lo,
            int("9" * len(str(hi))), -int("9" * len(str(hi)))]
    digits = len(str(hi))
    rand = [rng.choice((-1, 1)) * rng.randrange(10 ** rng.randrange(1, digits + 2)) for _ in range(60)]
    return near + rand


@pytest.mark.parametrize("fmt,rng", [("int32", INT32), ("int64", INT64)])
def test_integer_format_bounds(fmt, rng):
    lo, hi = rng
    schema = {"type": "integer", "format": fmt}
    for v in _int_candidates(lo, hi, fmt):
        assert accepts(schema, str(v)) == (lo <= v <= hi), (fmt, v)


def test_int32_edges():
    check({"type": "integer", "format": "int32"}, ["2147483647", "-2147483648", "0"],
          ["2147483648", "-2147483649", "1.5", '"1"'])
    check({"type": "integer", "format": "int64"}, ["9223372036854775807", "-9223372036854775808"],
          ["9223372036854775808", "-9223372036854775809"])


def test_int32_intersected_with_bounds():
    check({"type": "integer", "format": "int32", "maximum": 10}, ["10", "-2147483648"], ["11", "-2147483649"])
    check({"type": "integer", "format": "int32", "minimum": -5, "exclusiveMaximum": 2 ** 40},
          ["-5", "2147483647"], ["-6", "2147483648"])
    check({"type": "integer", "format": "int32", "exclusiveMinimum": -2 ** 31}, ["-2147483647"],
          ["-2147483648"])
    with pytest.raises(UnsatisfiableSchemaError):
        json_schema_to_ebnf({"type": "integer", "format": "int32", "minimum": 2 ** 31})


def test_int32_on_number_bounds_the_value():
    lo, hi = INT32
    schema = {"type": "number", "format": "int32"}
    for text in ["0", "1.5", "-0.25", "2147483647", "2147483647.0", "2147483647.5", "2147483648",
                 "-2147483648", "-2147483648.5", "-2147483649", "123456789012"]:
        assert accepts(schema, text) == (lo <= Decimal(text) <= hi), text


def test_int_format_without_type_bounds_numbers_only():
    check({"format": "int32"}, ["5", "-7.5", '"any string"', "null", "[]", "{}", "true"],
          ["2147483648", "-2147483649"])


# ------------------------------------------------------------------ byte (base64)


def _is_base64(s: str) -> bool:
    """RFC 4648 base64 of some bytes: Python decodes it (standard alphabet, validate=True)
    and its padding only completes the final quantum (Python alone also takes extra '=')."""
    try:
        raw = base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        return False
    return len(s) == 4 * ((len(raw) + 2) // 3)


def test_byte_is_base64():
    schema = {"type": "string", "format": "byte"}
    check(schema, [json.dumps(x) for x in ["aGVsbG8=", "", "YQ==", "YWI=", "YWJj", "+/+/"]],
          [json.dumps(x) for x in ["abc", "ab!d", "YQ=", "YWJj=", "====", "-_-_", "YQ==YQ==", "a GV"]] + ["1"])
    fixed = ["", "abc", "ab!d", "aGVsbG8=", "YQ==", "YQ=", "YWJj=", "YWJj==", "YR==", "YQ==YQ==", "YWJjZA",
             "YWJjZA==", "a b=", "YWJ=", "AB=C", "Y===", "-_-_"]
    rng = random.Random("base64")
    alphabet = "AYaz09+/=!-_ "
    rand = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 10))) for _ in range(150)]
    rand += [base64.b64encode(bytes(rng.randrange(256) for _ in range(n))).decode() for n in range(12)]
    seen = 0
    for s in fixed + rand:
        assert accepts(schema, json.dumps(s)) == _is_base64(s), s
        seen += _is_base64(s)
    assert seen >= 20  # the oracle says yes often enough for the check to mean something


@pytest.mark.parametrize("fmt", ["binary", "password"])
def test_plain_string_formats_accept_any_string(fmt):
    check({"type": "string", "format": fmt}, ['""', '"x"', '"p@ss w0rd!"', '"\\u0000\\n"', '"\\u00e9"'],
          ["1", "null"])


@pytest.mark.parametrize("fmt", ["float", "double"])
def test_float_double_are_numbers(fmt):
    assert json_schema_to_ebnf({"type": "number", "format": fmt}).ebnf == json_schema_to_ebnf({"type": "number"}).ebnf
    check({"type": "number", "format": fmt}, ["1e308", "-0.5", "3"], ['"3"'])


# ------------------------------------------------------------------ unenforced formats


@pytest.mark.parametrize("fmt", NOT_ENFORCED)
def test_unenforced_formats_agree_with_jsonschema(fmt):
    jsonschema = pytest.importorskip("jsonschema")
    schema = {"type": "object", "properties": {"v": {"format": fmt}}}
    validator = jsonschema.Draft202012Validator(schema)  # no FormatChecker: format is an annotation
    values = ["", "1.2.3", "not a " + fmt, "\u00e9\u4e2d", "a\nb", 300, -1.5, True, None, [1], {"k": "v"}]
    for v in values:
        doc = {"v": v}
        assert accepts(schema, json.dumps(doc)) == validator.is_valid(doc), (fmt, v)


def test_unknown_format_on_integer_warns_and_constrains_nothing():
    r = json_schema_to_ebnf({"type": "integer", "format": "uint8"})
    assert r.warnings == ["#: format 'uint8' is not enforced (unknown format; JSON Schema treats format as "
                          "an annotation)"]
    check({"type": "integer", "format": "uint8"}, ["300", "-1"], ['"x"'])


# ------------------------------------------------------------------ known formats and types


def test_known_formats_still_enforced():
    check({"type": "string", "format": "email"}, ['"joe.bloggs@example.com"'], ['"a..b@c"', '"@x"', '"plain"'])
    check({"type": "string", "format": "date"}, ['"2024-02-29"'], ['"2023-02-29"', '"2024-13-01"'])
    assert json_schema_to_ebnf({"type": "string", "format": "date"}).warnings == []


@pytest.mark.parametrize("schema,plain", [
    ({"type": "integer", "format": "email"}, {"type": "integer"}),
    ({"type": "integer", "format": "byte"}, {"type": "integer"}),
    ({"type": "number", "format": "date-time"}, {"type": "number"}),
    ({"type": "string", "format": "int32"}, {"type": "string"}),
    ({"type": "string", "format": "double"}, {"type": "string"}),
    ({"type": "boolean", "format": "int64"}, {"type": "boolean"}),
    ({"type": "array", "format": "uuid"}, {"type": "array"}),
    ({"type": "integer", "format": "regex"}, {"type": "integer"}),
    ({"type": ["null", "object"], "format": "idn-email"}, {"type": ["null", "object"]}),
])
def test_format_on_other_types_is_ignored(schema, plain):
    r = json_schema_to_ebnf(schema)
    assert r.ebnf == json_schema_to_ebnf(plain).ebnf and r.warnings == []


def test_string_format_without_type_applies_to_strings_only():
    check({"format": "email"}, ["5", "true", "null", "[]", '{"a": 1}', '"a@b.c"'], ['"not an email"'])
    check({"format": "byte"}, ["12", '"YQ=="'], ['"abc"'])


# ------------------------------------------------------------------ Grammar / CompiledGrammar


def test_grammar_warnings():
    xgr = _xgr()
    schema, name = _fresh({"type": "string", "format": "semver"})
    with pytest.warns(UserWarning, match="format 'semver' is not enforced"):
        g = xgr.Grammar.from_json_schema(schema)
    assert g.warnings == (f"#/properties/{name}: format 'semver' is not enforced (unknown format; JSON Schema "
                          "treats format as an annotation)",)
    assert xgr.Grammar.from_json_schema({"type": "string", "format": "date"}).warnings == ()
    assert xgr.Grammar.from_ebnf('root ::= "a"').warnings == ()
    assert xgr.Grammar.builtin_json_grammar().warnings == ()


def test_compiled_grammar_warnings_survive_the_cache():
    xgr = _xgr()
    compiler = xgr.GrammarCompiler(xgr.TokenizerInfo(["a", "b"]))
    schema, name = _fresh({"type": "string", "format": "iri"})
    with pytest.warns(UserWarning):
        first = compiler.compile_json_schema(schema)
    assert len(first.warnings) == 1 and f"#/properties/{name}: format 'iri'" in first.warnings[0]
    second = compiler.compile_json_schema(json.dumps(schema))  # a compile-cache hit
    assert second.warnings == first.warnings
    assert compiler.compile_json_schema({"type": "string", "format": "int32"}).warnings == ()
    # the grammar rebuilt for .grammar carries them too
    with pytest.warns(UserWarning):
        assert second.grammar.warnings == first.warnings
    uncached = xgr.GrammarCompiler(xgr.TokenizerInfo(["a", "b"]), cache_enabled=False)
    with pytest.warns(UserWarning):
        assert uncached.compile_json_schema(schema).warnings == first.warnings
    # a Grammar compiled directly keeps its warnings; the same text without them has none
    with pytest.warns(UserWarning):
        g = xgr.Grammar.from_json_schema(schema)
    assert compiler.compile_grammar(g).warnings == first.warnings
    assert compiler.compile_grammar(xgr.Grammar.from_ebnf(str(g))).warnings == ()
    assert compiler.compile_builtin_json_grammar().warnings == ()


def test_matcher_runs_on_grammar_with_unenforced_format():
    xgr = _xgr()
    compiler = xgr.GrammarCompiler(xgr.TokenizerInfo(["a", "b"]), cache_enabled=False)
    with pytest.warns(UserWarning):
        cg = compiler.compile_json_schema({"type": "object", "properties": {"v": {"type": "string",
                                                                                   "format": "semver"}}},
                                          any_whitespace=False)
    m = xgr.GrammarMatcher(cg, terminate_without_stop_token=True)
    assert m.accept_string('{"v": "1.2.3-rc.1"}') and m.is_terminated()


def test_logged_once_per_distinct_conversion(caplog):
    schema, name = _fresh({"type": "string", "format": "semver"})
    with caplog.at_level(logging.WARNING, logger="xgrammar2.json_schema"):
        json_schema_to_ebnf(schema)
        json_schema_to_ebnf(schema)  # the conversion cache: not logged again
        json_schema_to_ebnf(json.loads(json.dumps(schema)))
    records = [r for r in caplog.records if r.name == "xgrammar2.json_schema"]
    assert len(records) == 1
    assert f"#/properties/{name}: format 'semver' is not enforced" in records[0].getMessage()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="xgrammar2.json_schema"):
        json_schema_to_ebnf(_fresh({"type": "string", "format": "email"})[0])
    assert not [r for r in caplog.records if r.name == "xgrammar2.json_schema"]
