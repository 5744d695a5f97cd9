"""The converter's cross-conversion memos (issue 36) change no output: a conversion gives the
same EBNF whether the module caches are cold or warmed by other schemas; the direct \\uXXXX
digit construction equals the regex -> DFA route; the $id index is still built for draft-04
string ids (and the text-keyed path agrees with the repr-keyed one)."""

import json
import random

from xgrammar2.json_schema import _cache, emit, emit_somes, grammar as G, ir, json_schema_to_ebnf
from xgrammar2.json_schema import automaton as fa
from xgrammar2.json_schema import charset as cs
from xgrammar2.json_schema import numeric
from xgrammar2.json_schema import regex as rx


def _dfa_route(ranges):
    pats = [rx.cat(*[("set", G._digit_set(a, b)) for a, b in p])
            for lo, hi in ranges for p in G._split_range(lo, hi, 4, 16)]
    d = fa.from_regex(rx.alt(*pats), limit=100000)
    return G.dfa_to_expr(d, lambda c: G.cls(cs.case_fold_ascii(c)))


def test_hex4_equals_dfa_route():
    rng = random.Random(36)
    cases = [((0, 0xD7FF), (0xE000, 0xFFFF)), ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)),
             ((0, 9), (0xB, 0xC), (0xE, 0x2027), (0x202A, 0xD7FF), (0xE000, 0xFFFF)), ((0xDC00, 0xDFFF),),
             ((0, 0xFFFF),), ((0x41, 0x41),), ((0xFFFF, 0xFFFF),), ((0x100, 0x1FF),)]
    for _ in range(150):
        k = rng.choice([1, 2, 3, 5, 9])
        scale = rng.choice([0x80, 0x1000, 0x10000])
        pts = sorted(rng.randrange(0, scale) for _ in range(2 * k))
        cases.append(cs.normalize([(pts[2 * i], pts[2 * i + 1]) for i in range(k)]))
    for c in range(0, 0x10000, 97):
        cases.append(((c, c),))
    for r in cases:
        G._hex_cache.clear()
        assert G.hex4(r) == _dfa_route(r), r


_SCHEMAS = [
    {"type": "object", "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}(-[0-9]{4})?$"},
                                      "naïve": {"type": "string", "pattern": "^[A-Za-z_ü]+$"},
                                      "tag": {"enum": ["é", "ß", "x"]}},
     "required": ["zip"], "additionalProperties": False},
    {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Za-z_ü]+$"},
                                      "n": {"type": "number", "minimum": 1, "maximum": 99.5},
                                      "k": {"type": "string", "pattern": "^\\w{2,4}$", "minLength": 3}},
     "patternProperties": {"^x-[a-z]+$": {"type": "integer"}}},
    {"type": "array", "items": {"type": "string", "pattern": "^[^\\s]+é$"}, "maxItems": 3},
    # the negation of an object with patternProperties (emit_somes: key regions per
    # condition), the same shape under two properties: one set of key rules for both
    {"type": "object", "properties": {k: {"oneOf": [
        {"type": "object", "patternProperties": {"^x": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
        {"type": "object", "properties": {"k": {"type": "null"}}, "required": ["k"]}]} for k in ("a", "b")}},
    # key regions (listed keys x overlapping patterns), the same shape twice
    {"type": "object", "properties": {
        "p": {"type": "object", "properties": {"ab": {"type": "null"}},
              "patternProperties": {"^a": {"type": "integer"}, "b$": {"type": "number", "minimum": 2}},
              "additionalProperties": {"type": "boolean"}},
        "q": {"type": "object", "properties": {"ab": {"type": "string"}},
              "patternProperties": {"^a": {"type": "integer"}, "b$": {"type": "number", "minimum": 2}},
              "additionalProperties": {"type": "boolean"}}}},
]


def _clear_module_caches():
    for d in (emit._char_cache, emit._rx_cache, emit._str_text_cache, emit._SHARED_BODY, emit._LAYOUTS, emit_somes._REGIONS,
              G._hex_cache, G._json_char_cache, G._lit_text, G._body_text, ir._match_cache, rx._ast_facts,
              numeric._cache, numeric._row_sets):
        d.clear()


def test_same_ebnf_with_cold_or_warm_module_caches():
    for opts in ({}, {"any_whitespace": False}, {"any_whitespace": False, "indent": 2}):
        cold = []
        for s in _SCHEMAS:
            _cache.clear()
            _clear_module_caches()
            cold.append(json_schema_to_ebnf(s, **opts).ebnf)
        # warm: every schema converted after the others (in both orders)
        for order in (list(range(len(_SCHEMAS))), list(reversed(range(len(_SCHEMAS))))):
            for i in order:
                _cache.clear()
                assert json_schema_to_ebnf(_SCHEMAS[i], **opts).ebnf == cold[i]


def test_draft04_string_id_is_indexed_on_the_text_path():
    schema = {"id": "http://example.com/root.json", "type": "object",
              "properties": {"id": {"type": "string"}, "x": {"$ref": "item.json"}},
              "definitions": {"item": {"id": "item.json", "type": "integer", "minimum": 3}}}
    text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
    _cache.clear()
    by_text = json_schema_to_ebnf(schema, _key_text=text).ebnf
    _cache.clear()
    assert by_text == json_schema_to_ebnf(schema).ebnf
    # a property named "id" alone (no string-valued id) converts the same on both paths
    plain = {"type": "object", "properties": {"id": {"type": "integer"}, "r": {"$ref": "#/$defs/a"}},
             "$defs": {"a": {"type": "string"}}}
    _cache.clear()
    t = json_schema_to_ebnf(plain, _key_text=json.dumps(plain, separators=(",", ":"))).ebnf
    _cache.clear()
    assert t == json_schema_to_ebnf(plain).ebnf
