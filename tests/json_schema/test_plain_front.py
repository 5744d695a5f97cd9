"""The core's JSON-schema front end for the plain subset (csrc/front/json_schema_plain.c)
accepts exactly what the Python converter's grammar accepts.

Every schema of JSONSchemaBench (a deterministic sample per subset by default, all of them
with XGR_FULL=1) and of the official JSON-Schema-Test-Suite that the core converts is also
converted by the Python converter; both grammars are compiled against a byte vocabulary and
walked side by side: along every instance of the schema (valid and invalid, compact and
indented) and along seeded random walks through the Python grammar, the allowed next bytes
and the stop token must be the same set at every step. A schema the Python converter
refuses (unsupported, unsatisfiable) must be refused (left to Python) by the core too.
"""

from __future__ import annotations

import gzip
import json
import os
import random

import pytest

import suite_runner as S
from js_engine import ENGINE

pytestmark = pytest.mark.skipif(ENGINE.name != "xgrammar2", reason="xgrammar2's own front end")

FULL = bool(os.environ.get("XGR_FULL"))
SAMPLE = None if FULL else 120
WALKS = 3
WALK_STEPS = 160


@pytest.fixture(scope="module")
def tools():
    import xgrammar2 as xgr
    from xgrammar2.compiler import canonical_dumps
    from xgrammar2.grammar import _plain_json_schema_grammar
    from xgrammar2.json_schema import SchemaError, json_schema_to_ebnf
    from xgrammar2.testing import _byte_tokenizer_info

    info = _byte_tokenizer_info()
    comp = xgr.GrammarCompiler(info, cache_enabled=False)
    return xgr, comp, info, canonical_dumps, _plain_json_schema_grammar, json_schema_to_ebnf, SchemaError


def _allowed(xgr, m, info, bm):
    bm.fill_(-1)  # (a stale word would pass for an allowed token)
    m.fill_next_token_bitmask(bm, 0)
    words = bm[0].tolist()
    return frozenset(i for i in range(info.vocab_size) if (words[i >> 5] >> (i & 31)) & 1)


def _walk(xgr, comp, info, gp, gc, data: bytes, rng: random.Random | None):
    """Walks both grammars over `data` (or, with rng, over random bytes the Python grammar
    allows); returns the first step where their masks differ, else None."""
    mp, mc = xgr.GrammarMatcher(gp), xgr.GrammarMatcher(gc)
    bm = xgr.allocate_token_bitmask(1, info.vocab_size)
    stop = info.stop_token_ids[0]
    steps = WALK_STEPS if rng is not None else len(data)
    for k in range(steps + 1):
        ap, ac = _allowed(xgr, mp, info, bm), _allowed(xgr, mc, info, bm)
        if ap != ac:
            return k, sorted(ap ^ ac)[:8]
        if k == steps:
            return None
        if rng is not None:
            nxt = sorted(ap - {stop})
            if not nxt:
                return None
            b = rng.choice(nxt)
        else:
            b = data[k]
            if b not in ap:
                return None  # both refuse here (the masks agree)
        assert mp.accept_token(b) and mc.accept_token(b)
    return None


def _texts(data):
    out = [json.dumps(data, ensure_ascii=False), json.dumps(data, indent=2, ensure_ascii=False)]
    return [t.encode("utf-8") for t in out]


def _check(tools, schema, instances, tag):
    xgr, comp, info, canonical_dumps, plain, to_ebnf, SchemaError = tools
    try:
        canon = canonical_dumps(schema)
    except (TypeError, ValueError):
        return None
    gc = plain(canon)
    if gc is None:
        return None
    try:
        conv = to_ebnf(schema)
    except SchemaError as e:  # the core converted what Python refuses
        return f"{tag}: the core converts it, Python refuses: {e}"
    if list(gc.warnings) != list(conv.warnings):  # (annotation formats: the same pointers, in order)
        return f"{tag}: the core warns {list(gc.warnings)}, Python warns {conv.warnings}"
    gp = xgr.Grammar.from_ebnf(conv.ebnf)
    gp, gc = comp.compile_grammar(gp), comp.compile_grammar(gc)
    for data in instances:
        for t in _texts(data):
            bad = _walk(xgr, comp, info, gp, gc, t, None)
            if bad:
                return f"{tag}: masks differ at byte {bad[0]} of {t[:120]!r}: tokens {bad[1]}"
    rng = random.Random(tag)
    for _ in range(WALKS):
        bad = _walk(xgr, comp, info, gp, gc, b"", rng)
        if bad:
            return f"{tag}: masks differ on a random walk at step {bad[0]}: tokens {bad[1]}"
    return "ok"


def _check_all(tools, cases):
    """(schemas the core converted, failures) over (schema, instances, tag) cases."""
    n_plain, bad = 0, []
    for schema, instances, tag in cases:
        res = _check(tools, schema, instances, tag)
        if res is None:
            continue
        n_plain += 1
        if res != "ok":
            bad.append(res)
    return n_plain, bad


def _bench_cases():
    for sub in S.bench_subsets():
        for r in S.load_bench(sub, SAMPLE):
            schema = r["schema"]
            if isinstance(schema, str):
                schema = json.loads(schema)
            yield schema, [t["data"] for t in r.get("tests", [])], r.get("id", sub)


def _suite_cases():
    for rel in S.suite_files():
        with open(os.path.join(S.SUITE_DIR, rel)) as f:
            groups = json.load(f)
        for g in groups:
            yield g["schema"], [t["data"] for t in g["tests"]], f"{rel}: {g['description']}"


def test_plain_front_matches_python_on_jsonschemabench(tools):
    cases = list(_bench_cases())
    n_plain, bad = _check_all(tools, cases)
    print(f"\nplain front: {n_plain}/{len(cases)} JSONSchemaBench schemas converted in the core")
    assert not bad, "\n".join(bad[:10])
    assert n_plain >= len(cases) // 4  # (the subset covers ~50 % of the corpus: a regression guard)


def test_plain_front_matches_python_on_the_official_suite(tools):
    n_plain, bad = _check_all(tools, _suite_cases())
    print(f"\nplain front: {n_plain} suite schemas converted in the core")
    assert not bad, "\n".join(bad[:10])
    assert n_plain >= 40


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["b"]},
    {"type": "object", "properties": {"a": {"enum": [0, -3, "x", True, None]}, "b": {}, "c": True}},
    {"type": "object", "properties": {}, "additionalProperties": False},
    {"type": "object", "properties": {"a": {"type": "object"}, "b": {"type": "array"}}, "required": ["a", "b"]},
    {"type": ["integer", "number", "null"]},
    {"type": ["object", "array", "string", "boolean"]},
    {"type": "array", "items": {"type": "array", "items": {"const": 12}}},
    {"type": "integer", "enum": [1, "1", 2, 2]},
    {"title": "t", "description": "d", "examples": [1], "default": None},
    {"type": "object", "properties": {"": {"type": "boolean"}, "x y": {"type": "null"}}},
    {"$ref": "#/definitions/node", "definitions": {"node": {"type": "object", "properties": {
        "v": {"$ref": "#/definitions/num"}, "kids": {"type": "array", "items": {"$ref": "#/definitions/node"}}},
        "required": ["v"]}, "num": {"$ref": "#/$defs/int"}}, "$defs": {"int": {"type": "integer"}}},
    {"type": "object", "properties": {"a": {"$ref": "#", "description": "the root again"}, "b": {"type": "string"}}},
    {"type": "array", "items": {"$ref": "#/$defs/e"}, "$defs": {"e": {"enum": ["a", "b", 1, 2]}, "unused": {"x": 1}}},
    {"type": "string", "minLength": 2, "maxLength": 4},
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 0}, "b": {"type": "string", "minLength": 3}}},
    {"type": "array", "minItems": 2, "maxItems": 3, "items": {"type": "boolean"}},
    {"type": "array", "maxItems": 1}, {"type": "array", "minItems": 1, "items": {"type": "null"}},
    {"type": "array", "maxItems": 0}, {"type": "array", "minItems": 0, "maxItems": 2},
    {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "null"}, {"$ref": "#/$defs/o"}],
     "$defs": {"o": {"type": "object", "properties": {"k": {"type": "integer"}}}}},
    {"$id": "https://example.com/s.json", "type": "object", "properties": {"a": {"$ref": "#/$defs/a"}},
     "$defs": {"a": {"type": "boolean"}}},
    # draft-04's root id with an empty fragment names the same document
    {"id": "http://example.com/s.json#", "type": "object", "properties": {"a": {"$ref": "#/definitions/a"}},
     "definitions": {"a": {"type": "string"}}},
    {"$id": "https://example.com/s#", "type": "array", "items": {"$ref": "#"}},
    # string formats (the converter's expressions, handed to the core: json_schema/core_formats.py)
    {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"},
                                      "day": {"type": "string", "format": "date"},
                                      "again": {"type": "string", "format": "date"},
                                      "mail": {"type": "string", "format": "email"}}, "required": ["when"]},
    {"type": "array", "items": {"type": "string", "format": "uri"}, "maxItems": 2},
    {"type": ["string", "null"], "format": "uuid"}, {"format": "ipv4"}, {"format": "hostname"},
    {"type": "integer", "format": "date"},  # a string format beside another type: nothing
    {"type": "number", "format": "float"}, {"type": "string", "format": "password"},
    {"$ref": "#/$defs/t", "$defs": {"t": {"type": "string", "format": "time"}}},
    {"anyOf": [{"type": "string", "format": "ipv6"}, {"type": "string", "format": "uri-reference"}]},
    *({"type": "string", "format": f} for f in ("byte", "duration", "json-pointer", "relative-json-pointer",
                                               "uri-template")),
    # patterns (likewise)
    {"type": "object", "properties": {"zip": {"type": "string", "pattern": "^\\d{5}(-\\d{4})?$"},
                                      "code": {"type": "string", "pattern": "^[A-Z]{2}$"},
                                      "again": {"type": "string", "pattern": "^[A-Z]{2}$"},
                                      "any": {"type": "string", "pattern": "ab"}}, "required": ["zip"]},
    {"type": "array", "items": {"type": "string", "pattern": "^[^/\"]+$"}},
    {"pattern": "^[a-zé]+$"}, {"type": ["string", "integer"], "pattern": "x$"},
    {"type": "string", "pattern": "^\\p{L}+$"}, {"type": "string", "pattern": "^.*$"},
    {"type": "string", "format": "float", "pattern": "^[0-9]+$"},
    {"type": "object", "properties": {"a": {"type": "string", "pattern": "^a"}, "b": {"type": "string", "format": "date"}}},
    # formats the converter leaves as annotations, with a warning naming the pointer (the core's
    # grammar must carry the same warnings, in the same order)
    {"type": "string", "format": "no-such-format"}, {"type": "string", "format": "regex"},
    {"type": "integer", "format": "idn-hostname"},  # a refused string format beside another type: silent
    {"format": "idn-email"}, {"type": ["integer", "string"], "format": "iri"},
    {"type": "object", "properties": {"a/b~c": {"type": "string", "format": "x-custom"},
                                      "n": {"type": "array", "items": {"format": "x-custom", "type": "string"}},
                                      "u": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/w"}]},
                                      "v": {"$ref": "#/$defs/w"}},
     "$defs": {"w": {"type": "string", "format": "x-defined"}, "unused": {"type": "string", "format": "x-never"}}},
    {"type": "object", "format": "x-root", "properties": {"self": {"$ref": "#"}, "d": {"type": "string", "format": "color"}}},
    {"type": "string", "format": "x-custom", "pattern": "^[a-z]+$"},  # the pattern is enforced, the format is not
    {"anyOf": [{"type": "null"}, {"type": "string", "format": "x-in-a-branch"}]},
    {"oneOf": [{"type": "null"}, {"type": "string", "format": "x-in-a-one-of-branch"}]},
    # additionalProperties true or a schema: extra members after the listed ones, keys none of the
    # listed names (the converter's trie of raw prefixes)
    {"type": "object", "properties": {"ab": {"type": "string"}, "ac": {"type": "integer"}}, "required": ["ab"],
     "additionalProperties": True},
    {"type": "object", "properties": {"a": {"type": "integer"}, "ab": {}, "b]^-": {}, "": {"type": "null"},
                                      "x y": {"type": "boolean"}, "a/b": {}}, "additionalProperties": {"type": "number"}},
    {"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"], "additionalProperties": {}},
    {"type": "object", "properties": {"k": {"type": "string"}, "l": {}}, "required": ["l"],
     "additionalProperties": {"type": "array", "items": {"type": "string", "format": "date"}}},
    {"type": "object", "additionalProperties": {"type": "integer"}}, {"additionalProperties": True},
    {"type": "object", "properties": {}, "additionalProperties": {"enum": ["x", 1]}},
    {"type": "object", "properties": {"n": {"type": "object", "properties": {"m": {}},
                                            "additionalProperties": {"$ref": "#"}}}, "additionalProperties": True},
    {"type": "object", "properties": {"abcdefghijklmnopqrstu": {}, "abcdefghijklmnopqrstv": {},
                                      "abcdefghijklmnopqrs": {}}, "additionalProperties": True},
    # oneOf whose branches are disjoint by type: exactly one matches where any does
    {"oneOf": [{"type": "string"}, {"type": "null"}]},
    {"type": "object", "properties": {"a": {"oneOf": [{"type": "array", "items": {"type": "integer"}},
                                                      {"type": "string", "maxLength": 3},
                                                      {"type": "object", "properties": {"x": {"type": "boolean"}}},
                                                      {"type": "integer", "minimum": 2}]}}},
    {"oneOf": [{"type": "number", "description": "d"}, {"type": "boolean"}, {"type": "null", "title": "t"}]},
    {"$ref": "#/$defs/n", "$defs": {"n": {"oneOf": [{"type": "array", "items": {"$ref": "#/$defs/n"}}, {"type": "null"}]}}},
    {"$ref": "#/definitions/a", "definitions": {"a": {"type": "string", "format": "phone"}}},
    # type parts the core leaves to the converter inside its own grammar ("schema" forms):
    # a format or pattern beside a length or beside each other, number bounds, integer bounds
    # that are not integers
    {"type": "string", "format": "date", "maxLength": 12}, {"type": "string", "pattern": "^a", "maxLength": 3},
    {"type": "string", "pattern": "^2", "format": "date"}, {"type": "string", "format": "email", "minLength": 5},
    {"type": "string", "format": "url", "pattern": "^h", "maxLength": 9},  # (an annotation format: warned)
    {"type": ["string", "null"], "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 4},
    {"pattern": "^x", "maxLength": 2},  # (no type: the string part only)
    {"type": "string", "pattern": "^$|(^(?:\\S+\\s+){0,99}\\S+$)", "minLength": 1, "maxLength": 5000},
    {"type": "number", "minimum": 0.5}, {"type": "number", "minimum": 0, "maximum": 1},
    {"type": "number", "exclusiveMinimum": -2.25, "exclusiveMaximum": 1e3}, {"type": ["number", "null"], "maximum": 7},
    {"type": "integer", "minimum": 0.5}, {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
    {"minimum": 1.5, "maximum": 9},  # (no type: the number part only)
    {"type": "object", "properties": {"p": {"type": "number", "minimum": 0, "maximum": 100},
                                      "q": {"type": "number", "minimum": 0, "maximum": 100},
                                      "r": {"type": "array", "items": {"type": "number", "minimum": -90, "maximum": 90}}},
     "required": ["p"]},
    # references by JSON pointer (not only to definitions): the core resolves them
    {"$ref": "#/$defs/a/properties/b", "$defs": {"a": {"properties": {"b": {}}}}},
    {"type": "object", "properties": {"a": {"type": "string", "enum": ["x", "y"]}, "b": {"$ref": "#/properties/a"}}},
    {"type": "object", "properties": {"l": {"type": "array", "items": {"$ref": "#/definitions/n/properties/v"}}},
     "definitions": {"n": {"type": "object", "properties": {"v": {"type": "integer", "minimum": 1}}}}},
])
def test_plain_front_matches_python_on_hand_made_schemas(tools, schema):
    res = _check(tools, schema, [], json.dumps(schema))
    assert res == "ok", res


@pytest.mark.parametrize("bounds", [
    {"minimum": 0}, {"minimum": 1}, {"minimum": -5, "maximum": 12}, {"maximum": -3}, {"maximum": 0},
    {"exclusiveMinimum": 0, "exclusiveMaximum": 1000}, {"minimum": -120, "maximum": -17},
    {"minimum": 1, "maximum": 65535}, {"minimum": 99, "maximum": 101}, {"minimum": 123456},
    {"minimum": -1000000, "exclusiveMaximum": -999990}, {"minimum": 7, "exclusiveMinimum": 9, "maximum": 90},
    {"minimum": 5, "maximum": 5}, {"minimum": 0, "maximum": 9}, {"minimum": 10, "maximum": 99},
])
def test_plain_front_integer_ranges_match_python(tools, bounds):
    """Integer bounds: the byte masks along every integer from -1,100 to 1,100, the bounds
    and their neighbours, and the random walks."""
    schema = {"type": "integer", **bounds}
    edges = [v + d for v in bounds.values() for d in (-10, -1, 0, 1, 10)]
    res = _check(tools, schema, list(range(-1100, 1101)) + edges + [65536, 10 ** 7, -10 ** 7], json.dumps(schema))
    assert res == "ok", res


@pytest.mark.parametrize("schema", [
    {"type": "object", "patternProperties": {"^a": {}}},  # a keyword outside the subset
    {"type": "object", "properties": {"é": {"type": "string"}}},  # a key that is not plain ASCII
    {"enum": [1.5]},  # a float
    {"enum": ["a\"b"]},  # an escape
    {"type": "object", "properties": {"a": {}}, "required": ["b"]},  # required, not listed
    {"type": "string", "enum": [1]},  # unsatisfiable: Python says why
    {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}},  # a cycle
    {"$ref": "#"},
    {"$ref": "other.json#/$defs/a"},
    {"type": "string", "minLength": 3, "maxLength": 2},  # unsatisfiable
    {"type": "array", "minItems": 1.5},
    {"type": "integer", "minLength": 1},  # (a string keyword beside another type)
    {"anyOf": [{"type": "string"}], "type": "string"},  # an intersection
    {"anyOf": []},
    {"type": "string", "$id": "#frag"},
    {"type": "string", "$id": "http://x/y#a#"}, {"type": "string", "id": "http://x/y#/definitions"},
    {"type": "object", "properties": {"a": {}}, "additionalProperties": 3},
    {"type": "object", "properties": {"a": {}}, "required": ["b"], "additionalProperties": True},
    {"type": "object", "additionalProperties": {"type": "string", "enum": [1]}},  # unsatisfiable values
    # oneOf whose branches may overlap, or beside other keywords: Python's exclusivity
    {"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]},
    {"oneOf": [{"type": "integer"}, {"type": "number"}]},  # an integer is a number
    {"oneOf": [{"type": "string"}, {"enum": [1]}]}, {"oneOf": [{"type": ["string", "null"]}, {"type": "integer"}]},
    {"oneOf": [{"type": "string"}, True]}, {"oneOf": []}, {"oneOf": {"type": "string"}},
    {"oneOf": [{"type": "string"}, {"type": "null"}], "type": "string"},
    {"oneOf": [{"type": "string"}, {"type": "null"}], "anyOf": [{"type": "string"}]},
    # a definition that is a $ref with a keyword beside it is an intersection, not a chain to follow
    {"type": "object", "properties": {"a": {"$id": "http://x/y", "type": "string"}}},
    {"type": "string", "properties": {"a": {}}},
    False,
    {"type": "string", "format": "dat\u00e9"},  # a name spelled with an escape: Python names it
    {"type": "integer", "format": "int32"},  # a range: Python's
    {"enum": ["2020-01-01"], "format": "date"},
    {"anyOf": [{"type": "string"}], "format": "date"},
    {"type": "string", "format": 3},
    {"type": "string", "pattern": "(?i)abc"},  # refused by the converter
    # type parts left to the converter ("schema" forms) that it refuses or finds empty
    {"type": "number", "minimum": 5, "maximum": 1}, {"type": "number", "minimum": "a"},
    {"type": "string", "pattern": "^a", "maxLength": 0}, {"type": "string", "pattern": "(?i)a", "maxLength": 3},
    {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0.5, "maximum": 0.7}}},
    {"type": "number", "format": "int32", "minimum": 0.5},  # (an integer format: Python's range)
    {"type": "string", "pattern": "^(a"},  # not a regex
    {"type": "string", "pattern": 3},
    {"enum": ["a"], "pattern": "a"},
])
def test_plain_front_leaves_other_schemas_to_python(tools, schema):
    xgr, comp, info, canonical_dumps, plain, to_ebnf, SchemaError = tools
    assert plain(canonical_dumps(schema)) is None


@pytest.mark.parametrize("text", [b"", b"{", b"{\"type\":", b"[1,2", b"nul", b"{\"type\":\"string\"}x", b"\xff",
                                  b"{\"type\":\"strin", b"-", b"01", b"{\"a\":1,}", b"\"\\", b"{\"type\":[]}"])
def test_plain_front_refuses_broken_text_without_failing(tools, text):
    xgr, comp, info, canonical_dumps, plain, to_ebnf, SchemaError = tools
    assert plain(text) is None


# ---- parts: subschemas the core leaves to the converter inside a schema it writes
# (json_schema_plain.c's part_ref, core_strings.part_rows: keys "@OFF:LEN")

PART_SCHEMAS = [
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"$defs": {}, "type": "null"}}},
    # a definition that is a $ref with a keyword beside it is an intersection (a part), not a chain
    {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b", "minLength": 3}, "b": {"type": "string"}}},
    {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b", "maximum": 3}, "b": {"type": "integer"}}},
    # keywords of the converter's inside a plain object: the object stays the core's
    {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 3}, "s": {"type": "string"}},
     "required": ["s"]},
    {"type": "object", "properties": {"o": {"type": "object", "minProperties": 1,
                                            "properties": {"x": {"type": "boolean"}, "y": {"type": "null"}}}}},
    {"type": "array", "items": {"type": "object", "patternProperties": {"^a": {"type": "integer"}},
                                "additionalProperties": False}, "maxItems": 3},
    {"type": "object", "properties": {"u": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True,
                                            "maxItems": 3}}},
    # overlapping oneOf (exclusivity by negation), not, allOf: one part each, twice (equal text: one rule)
    {"type": "object", "properties": {
        "a": {"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]},
        "b": {"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]},
        "c": {"not": {"type": "string"}}, "d": {"allOf": [{"type": "integer"}, {"minimum": 2}]}},
     "required": ["a"]},
    # a part whose references reach definitions the core writes too, and a recursive one
    {"type": "object", "properties": {"p": {"$ref": "#/definitions/P"},
                                      "q": {"allOf": [{"$ref": "#/definitions/P"}], "required": ["name"]}},
     "definitions": {"P": {"type": "object", "properties": {"name": {"type": "string"},
                                                            "kids": {"type": "array", "items": {"$ref": "#/definitions/P"}}}}}},
    {"type": "object", "properties": {"t": {"$ref": "#/definitions/T"}},
     "definitions": {"T": {"type": "object", "minProperties": 1,
                           "properties": {"v": {"type": "integer"}, "c": {"$ref": "#/definitions/T"}}}}},
    # a part beside formats, patterns and a type part of the core's table
    {"type": "object", "properties": {"d": {"type": "string", "format": "date"},
                                      "p": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
                                      "x": {"type": "number", "minimum": 0.5},
                                      "m": {"type": "object", "dependentRequired": {"a": ["b"]},
                                            "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}}},
    # a reference in an annotation (hyper-schema links) names nothing the core must convert
    {"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 2,
                                            "links": [{"targetSchema": {"$ref": "#/definitions/far"}}]}},
     "definitions": {"far": {"$id": "http://x/far", "type": "string"}}},
    # the root itself, with definitions (without any, a root part would be all of the converter's)
    {"$ref": "#/$defs/a", "$defs": {"a": {"type": "string"}}, "type": "string"},  # an intersection
    {"$ref": "#/$defs/a~1b", "$defs": {"a/b": {"type": "string"}}},  # an escaped name
    {"$ref": "#/$defs/a", "format": "date", "$defs": {"a": {"type": "string"}}},
    {"$ref": "#/$defs/a", "pattern": "a", "$defs": {"a": {"type": "string"}}},
]


@pytest.mark.parametrize("schema", PART_SCHEMAS)
def test_plain_front_parts_match_python(tools, schema):
    """A schema the core writes but for subschemas it cannot: each subschema converted by the
    Python converter in one conversion of the document (its rules pp_<i>), the grammar's masks
    equal to the converter's along random walks."""
    xgr, comp, info, canonical_dumps, plain, to_ebnf, SchemaError = tools
    g = plain(canonical_dumps(schema))
    assert g is not None and "pp_0 ::= " in str(g)
    res = _check(tools, schema, [], json.dumps(schema))
    assert res == "ok", res


@pytest.mark.parametrize("schema", [
    # a part whose subtree resolves against another base, or the root itself: the whole schema is Python's
    {"type": "object", "properties": {"a": {"$id": "http://x/y", "type": "string", "minProperties": 1}}},
    {"type": "object", "properties": {"a": {"allOf": [{"$ref": "other.json"}]}}},
    {"type": "object", "properties": {"a": {"allOf": [{"$ref": "#"}]}}},
    {"type": "object", "properties": {"a": {"$anchor": "x", "not": {}}}},
    # a part the converter refuses or finds unsatisfiable, or that warns
    {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b", "anyOf": [{"type": "null"}]}, "b": {"type": "string"}}},
    {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b", "oneOf": [{"type": "null"}]}, "b": {"type": "string"}}},
    {"type": "object", "properties": {"a": {"allOf": [{"type": "string"}, {"type": "integer"}]}}, "required": ["a"]},
    {"type": "object", "properties": {"a": {"not": {"type": "string"}, "pattern": "(?i)x"}}},
    {"type": "object", "properties": {"a": {"format": "color", "minProperties": 1}}},
])
def test_plain_front_parts_left_to_python(tools, schema):
    """Parts the core does not take: the whole schema goes to Python (which warns or says why)."""
    xgr, comp, info, canonical_dumps, plain, to_ebnf, SchemaError = tools
    assert plain(canonical_dumps(schema)) is None


def test_plain_front_parts_protocol(tools):
    """The core asks for each part once by its span ("@OFF:LEN" in the canonical text), equal
    subschemas once in all; without `wants` it asks for nothing and takes nothing."""
    import xgrammar2._core as C

    xgr, comp, info, canonical_dumps, plain, to_ebnf, SchemaError = tools
    sub = {"type": "integer", "multipleOf": 2}
    canon = canonical_dumps({"type": "object", "properties": {"a": sub, "b": sub, "c": {"not": {}}}})
    ffi, lib = C.ffi, C.lib
    out, missing = ffi.new("xgr_grammar **"), ffi.new("int32_t *")
    wants, wants_len = ffi.new("char **"), ffi.new("size_t *")
    C.check(lib.xgr_json_schema_plain(canon, len(canon), -1, ffi.NULL, 0, out, missing, wants, wants_len), "t")
    keys = ffi.buffer(wants[0], wants_len[0])[:].split(b"\0")[:-1]
    lib.xgr_free(wants[0])
    assert out[0] == ffi.NULL and missing[0] == 2 and len(keys) == 2
    spans = [canon[int(k[1:].split(b":")[0]):][:int(k.split(b":")[1])] for k in keys]
    assert sorted(map(json.loads, spans), key=str) == sorted([sub, {"not": {}}], key=str)
    C.check(lib.xgr_json_schema_plain(canon, len(canon), -1, ffi.NULL, 0, out, missing, ffi.NULL, ffi.NULL), "t")
    assert out[0] == ffi.NULL and missing[0] == 0  # (no parts for a caller that cannot convert them)


def test_plain_front_parts_bad_rules_are_the_callers_error(tools):
    """A part table whose rules do not parse is the caller's error (InvalidArgumentError naming
    the caller's forms), not the core's; a shared rule spelled differently from the core's, or
    a part-ref the core cannot resolve, leaves the schema to the caller (no grammar)."""
    import xgrammar2._core as C
    from xgrammar2.exception import InvalidArgumentError

    xgr, comp, info, canonical_dumps, plain, to_ebnf, SchemaError = tools
    canon = canonical_dumps({"type": "object", "properties": {"a": {"not": {}}}})
    ffi, lib = C.ffi, C.lib
    out, missing = ffi.new("xgr_grammar **"), ffi.new("int32_t *")
    wants, wants_len = ffi.new("char **"), ffi.new("size_t *")
    C.check(lib.xgr_json_schema_plain(canon, len(canon), -1, ffi.NULL, 0, out, missing, wants, wants_len), "t")
    key = ffi.buffer(wants[0], wants_len[0])[:].rstrip(b"\0")
    lib.xgr_free(wants[0])
    from xgrammar2.json_schema.core_strings import form_array

    def call(rows):
        arr, keep = form_array(rows)
        C.check(lib.xgr_json_schema_plain(canon, len(canon), -1, arr, len(rows), out, missing, wants, wants_len),
                "converting a JSON schema")
        if wants[0] != ffi.NULL:
            lib.xgr_free(wants[0])
        return out[0]

    with pytest.raises(InvalidArgumentError, match="formats and patterns does not parse"):
        call([(b"part", key, b"pp_0", b"pp_0 ::= ((( \"x\"\n")])
    assert call([(b"part", key, b"pp_0", b"pp_0 ::= ws\nws ::= \" \"\n")]) == ffi.NULL
    assert call([(b"part", key, b"pp_0", b"pp_0 ::= px_0\n"), (b"part-ref", b"#/nowhere", b"px_0", None)]) == ffi.NULL
    g = call([(b"part", key, b"pp_0", b"pp_0 ::= \"1\"\n")])
    assert g != ffi.NULL
    lib.xgr_grammar_release(g)


def test_plain_front_deep_schemas_go_to_python(tools):
    xgr, comp, info, canonical_dumps, plain, to_ebnf, SchemaError = tools
    s = {"type": "string"}
    for _ in range(70):
        s = {"type": "array", "items": s}
    g = plain(canonical_dumps(s))  # (past the core's depth: the innermost levels are a part)
    assert g is not None and "pp_0 ::= " in str(g)
    assert _check(tools, s, [[[[]]]], "deep") == "ok"
    s = {"type": "string"}
    for _ in range(40):
        s = {"type": "array", "items": s}
    assert plain(canonical_dumps(s)) is not None


@pytest.mark.parametrize("bounds", [
    {"minimum": 0.5}, {"minimum": 0, "maximum": 1}, {"exclusiveMinimum": -2.25, "maximum": 3.75},
    {"maximum": -0.001}, {"minimum": 10, "exclusiveMaximum": 12.5},
])
@pytest.mark.parametrize("kind", ["number", "integer"])
def test_plain_front_number_bounds_match_python(tools, bounds, kind):
    """Number bounds ("schema" forms, the converter's own expression inside the core's
    grammar): the byte masks along numbers around each bound, spelled several ways."""
    schema = {"type": kind, **bounds}
    vals = []
    for v in bounds.values():
        for d in (-1, -0.5, -0.001, 0, 0.001, 0.5, 1):
            vals.append(v + d)
    vals += [0, -0, 1e-5, 12, 1e3, -1e3, 2.5e1]
    res = _check(tools, schema, vals, json.dumps(schema))
    assert res == "ok", res


def test_plain_front_leaves_every_keyword_python_reads_to_python(tools):
    """The core ignores unknown keywords (annotations, as in the Python converter): every
    keyword of the policy table that is neither handled by the core nor an annotation must
    send the schema to Python, so a keyword added to the table cannot be ignored in C."""
    xgr, comp, info, canonical_dumps, plain, to_ebnf, SchemaError = tools
    from xgrammar2.json_schema.policy import KEYWORD_POLICY, Policy

    handled = {"type", "properties", "required", "items", "additionalProperties", "enum", "const", "$ref",
               "definitions", "$defs", "anyOf", "minLength", "maxLength", "minItems", "maxItems", "$id", "id",
               "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "format", "pattern"}
    for k, (pol, _) in KEYWORD_POLICY.items():
        s = {"type": "string", k: "x"}
        if k in handled:
            continue
        if pol is Policy.ANNOTATION:
            assert plain(canonical_dumps(s)) is not None, k
        else:
            assert plain(canonical_dumps(s)) is None, k
    assert plain(canonical_dumps({"type": "string", "x-unknown": {"minLength": 3}})) is not None


def test_plain_front_builds_string_entries_only_for_schemas_it_takes(tools):
    """Formats and patterns are converted (by the converter, one call each) only for a schema
    the core takes otherwise: the core is asked first without them (`missing`)."""
    xgr, comp, info, canonical_dumps, plain, to_ebnf, SchemaError = tools
    from xgrammar2.json_schema import core_strings

    left = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^left-to-python$"}},
            "oneOf": [{"required": ["a"]}, {"maxProperties": 0}]}
    assert plain(canonical_dumps(left)) is None
    assert b"^left-to-python$" not in core_strings._patterns
    taken = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^taken-by-the-core$"}}}
    assert plain(canonical_dumps(taken)) is not None
    assert core_strings._patterns[b"^taken-by-the-core$"] is not None
    # a value the converter refuses: no entry, the schema goes to Python
    refused = {"type": "object", "properties": {"a": {"type": "string", "pattern": "(?i)refused"}}}
    assert plain(canonical_dumps(refused)) is None
    assert core_strings._patterns[b"(?i)refused"] is None


def test_plain_front_names_the_type_parts_it_leaves_to_the_converter(tools):
    """Type parts the core does not write itself are asked for by key (`wants`: the compact
    JSON of the one-type subschema, spelled as the canonical text spells it), only for a
    schema otherwise in the subset; their entries are the converter's, under rule names of
    their own; one the converter refuses leaves the schema to Python."""
    xgr, comp, info, canonical_dumps, plain, to_ebnf, SchemaError = tools
    from xgrammar2 import _core
    from xgrammar2.exception import InvalidArgumentError
    from xgrammar2.json_schema import core_strings

    ffi, lib = _core.ffi, _core.lib

    def asked(schema):
        canon = canonical_dumps(schema)
        out, missing = ffi.new("xgr_grammar **"), ffi.new("int32_t *")
        wants, wants_len = ffi.new("char **"), ffi.new("size_t *")
        assert lib.xgr_json_schema_plain(canon, len(canon), -1, ffi.NULL, 0, out, missing, wants, wants_len) == 0
        assert out[0] == ffi.NULL
        if wants[0] == ffi.NULL:
            return missing[0], []
        text = ffi.buffer(wants[0], wants_len[0])[:]
        lib.xgr_free(wants[0])
        assert text.endswith(b"\0")
        return missing[0], text[:-1].split(b"\0")

    schema = {"type": "object", "properties": {"a": {"type": ["number", "null"], "exclusiveMaximum": 2.5e1,
                                                      "minimum": -1},
                                               "b": {"maxLength": 3, "type": "string", "pattern": "^a"},
                                               "c": {"type": "integer", "maximum": 7.5}}}
    n, keys = asked(schema)
    assert n == 4 and keys == [  # (4: the pattern's own entry is missing too)
        b'{"type":"number","minimum":-1,"exclusiveMaximum":25.0}', b'{"type":"string","pattern":"^a","maxLength":3}',
        b'{"type":"integer","maximum":7.5}']
    # `wants` without `wants_len` (or the other way): a clear error, nothing converted
    canon = canonical_dumps(schema)
    out = ffi.new("xgr_grammar **")
    for w, wl in ((ffi.new("char **"), ffi.NULL), (ffi.NULL, ffi.new("size_t *"))):
        with pytest.raises(InvalidArgumentError, match="NULL argument"):
            _core.check(lib.xgr_json_schema_plain(canon, len(canon), -1, ffi.NULL, 0, out, ffi.NULL, w, wl),
                        "converting a JSON schema")
        assert out[0] == ffi.NULL
    # a schema outside the subset for another reason: nothing asked, nothing converted
    left = dict(schema, allOf=[{"required": ["a"]}])
    assert asked(left) == (0, [])
    g = plain(canonical_dumps(schema))
    assert g is not None
    names = [ln.split(" ::= ")[0] for ln in str(g).splitlines()]
    assert sum(n.startswith("sf") and "__" not in n for n in names) == 3  # one rule per entry, its own name
    # the converter refuses one of them (unsatisfiable bounds): no grammar, Python says why
    bad = {"type": "object", "properties": {"a": {"type": "number", "minimum": 3, "maximum": 1}}}
    assert plain(canonical_dumps(bad)) is None
    assert core_strings._schemas[b'{"type":"number","minimum":3,"maximum":1}'] is None


def test_plain_front_names_a_format_table_whose_texts_do_not_parse(tools):
    """A caller's table entry that is not EBNF gets an error naming the table, not a crash or a
    grammar; an entry whose `char` rule is not the core's own leaves the schema to the caller."""
    from xgrammar2 import _core
    from xgrammar2.exception import InvalidArgumentError

    ffi, lib = _core.ffi, _core.lib
    canon = b'{"type":"string","format":"date"}'
    keep = []

    def form(value, rules=None):
        arr = ffi.new("xgr_json_string_form[]", 1)
        for field, text in (("keyword", b"format"), ("text", b"date"), ("value", value), ("rules", rules)):
            if text is not None:
                keep.append(ffi.new("char[]", text))
                setattr(arr[0], field, keep[-1])
        return arr

    out = ffi.new("xgr_grammar **")
    with pytest.raises(InvalidArgumentError, match="formats and patterns does not parse"):
        _core.check(lib.xgr_json_schema_plain(canon, len(canon), -1, form(b'"\\"" ((( "\\""'), 1, out, ffi.NULL,
                                              ffi.NULL, ffi.NULL),
                    "converting a JSON schema")
    assert out[0] == ffi.NULL
    rc = lib.xgr_json_schema_plain(canon, len(canon), -1, form(b'"\\"" char* "\\""', b'char ::= "x"\n'), 1, out,
                                   ffi.NULL, ffi.NULL, ffi.NULL)
    assert rc == 0 and out[0] == ffi.NULL
    missing = ffi.new("int32_t *")
    assert lib.xgr_json_schema_plain(canon, len(canon), -1, ffi.NULL, 0, out, missing, ffi.NULL, ffi.NULL) == 0
    assert out[0] == ffi.NULL and missing[0] == 1


def test_plain_front_equal_subschemas_share_their_rules(tools):
    """Equal subschemas (equal canonical text) are converted once: one object rule and one key
    rule for the two equal properties below, as the converter's interned rules."""
    xgr, comp, info, canonical_dumps, plain, to_ebnf, SchemaError = tools
    item = {"type": "object", "properties": {"id": {"type": "integer"}, "tag": {"type": "string"}},
            "required": ["id"], "additionalProperties": {"type": "boolean"}}
    schema = {"type": "object", "properties": {"a": item, "b": {"type": "array", "items": item}, "c": item}}
    text = str(plain(canonical_dumps(schema)))
    heads = [line.split(" ::= ")[0] for line in text.splitlines()]
    assert sum(h.startswith("o") and "_" not in h for h in heads) == 2, text  # the root and the item
    assert sum(h.startswith("xk") and "_" not in h for h in heads) == 1, text
    assert _check(tools, schema, [{"a": {"id": 1, "x": True}, "b": [{"id": 2}], "c": {"id": 3, "tag": "t"}}],
                  "shared") == "ok"


def test_plain_front_leaves_long_names_beside_extra_members_to_python(tools):
    xgr, comp, info, canonical_dumps, plain, to_ebnf, SchemaError = tools
    long = {"type": "object", "properties": {"n" * 600: {}}, "additionalProperties": True}
    assert plain(canonical_dumps(long)) is None
    assert plain(canonical_dumps({**long, "additionalProperties": False})) is not None


def test_plain_front_annotation_formats_are_said_as_on_the_converter_path(tools):
    """A schema the core takes with an unknown format: compile_json_schema warns (UserWarning)
    and the compiled grammar carries the converter's warning; a tool's arguments with it log
    only, as the converter's fragment path does."""
    import warnings as w

    xgr, comp, info, canonical_dumps, plain, to_ebnf, SchemaError = tools
    schema = {"type": "object", "properties": {"u": {"type": "string", "format": "x-said-%d" % id(tools)}}}
    assert plain(canonical_dumps(schema)) is not None  # (the core's path)
    with pytest.warns(UserWarning, match="is not enforced"):
        cg = comp.compile_json_schema(schema)
    assert cg.warnings == tuple(to_ebnf(schema).warnings)
    tag = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<function="], "tags": [
        {"type": "tag", "begin": "<function=f>", "content": {"type": "json_schema", "json_schema": schema},
         "end": "</function>"}]}}
    with w.catch_warnings():
        w.simplefilter("error", UserWarning)
        comp.compile_structural_tag(json.dumps(tag))
