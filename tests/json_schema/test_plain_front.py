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
    mp, mc = xgr.GrammarMatcher(comp.compile_grammar(gp)), xgr.GrammarMatcher(comp.compile_grammar(gc))
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
        gp = xgr.Grammar.from_ebnf(to_ebnf(schema).ebnf)
    except SchemaError as e:  # the core converted what Python refuses
        return f"{tag}: the core converts it, Python refuses: {e}"
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


def test_plain_front_matches_python_on_jsonschemabench(tools):
    n_plain = n_all = 0
    bad = []
    for sub in S.bench_subsets():
        for r in S.load_bench(sub, SAMPLE):
            schema = r["schema"]
            if isinstance(schema, str):
                schema = json.loads(schema)
            n_all += 1
            res = _check(tools, schema, [t["data"] for t in r.get("tests", [])], r.get("id", sub))
            if res is None:
                continue
            n_plain += 1
            if res != "ok":
                bad.append(res)
    print(f"\nplain front: {n_plain}/{n_all} JSONSchemaBench schemas converted in the core")
    assert not bad, "\n".join(bad[:10])
    assert n_plain >= n_all // 5  # (the subset covers ~40 % of the corpus: a regression guard)


def test_plain_front_matches_python_on_the_official_suite(tools):
    n_plain = 0
    bad = []
    for rel in S.suite_files():
        with open(os.path.join(S.SUITE_DIR, rel)) as f:
            groups = json.load(f)
        for g in groups:
            res = _check(tools, g["schema"], [t["data"] for t in g["tests"]], f"{rel}: {g['description']}")
            if res is None:
                continue
            n_plain += 1
            if res != "ok":
                bad.append(res)
    print(f"\nplain front: {n_plain} suite schemas converted in the core")
    assert not bad, "\n".join(bad[:10])
    assert n_plain >= 20


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
])
def test_plain_front_matches_python_on_hand_made_schemas(tools, schema):
    res = _check(tools, schema, [], json.dumps(schema))
    assert res == "ok", res


@pytest.mark.parametrize("schema", [
    {"type": "string", "minLength": 1},  # a keyword outside the subset
    {"type": "object", "properties": {"é": {"type": "string"}}},  # a key that is not plain ASCII
    {"enum": [1.5]},  # a float
    {"enum": ["a\"b"]},  # an escape
    {"type": "object", "properties": {"a": {}}, "required": ["b"]},  # required, not listed
    {"type": "object", "properties": {"a": {}}, "additionalProperties": True},
    {"type": "string", "enum": [1]},  # unsatisfiable: Python says why
    {"$ref": "#/$defs/a", "$defs": {"a": {"type": "string"}}},
    {"type": "string", "properties": {"a": {}}},
    False,
])
def test_plain_front_leaves_other_schemas_to_python(tools, schema):
    xgr, comp, info, canonical_dumps, plain, to_ebnf, SchemaError = tools
    assert plain(canonical_dumps(schema)) is None


@pytest.mark.parametrize("text", [b"", b"{", b"{\"type\":", b"[1,2", b"nul", b"{\"type\":\"string\"}x", b"\xff",
                                  b"{\"type\":\"strin", b"-", b"01", b"{\"a\":1,}", b"\"\\", b"{\"type\":[]}"])
def test_plain_front_refuses_broken_text_without_failing(tools, text):
    xgr, comp, info, canonical_dumps, plain, to_ebnf, SchemaError = tools
    assert plain(text) is None


def test_plain_front_deep_schemas_go_to_python(tools):
    xgr, comp, info, canonical_dumps, plain, to_ebnf, SchemaError = tools
    s = {"type": "string"}
    for _ in range(70):
        s = {"type": "array", "items": s}
    assert plain(canonical_dumps(s)) is None
    s = {"type": "string"}
    for _ in range(40):
        s = {"type": "array", "items": s}
    assert plain(canonical_dumps(s)) is not None


def test_plain_front_leaves_every_keyword_python_reads_to_python(tools):
    """The core ignores unknown keywords (annotations, as in the Python converter): every
    keyword of the policy table that is neither handled by the core nor an annotation must
    send the schema to Python, so a keyword added to the table cannot be ignored in C."""
    xgr, comp, info, canonical_dumps, plain, to_ebnf, SchemaError = tools
    from xgrammar2.json_schema.policy import KEYWORD_POLICY, Policy

    handled = {"type", "properties", "required", "items", "additionalProperties", "enum", "const"}
    for k, (pol, _) in KEYWORD_POLICY.items():
        s = {"type": "string", k: "x"}
        if k in handled:
            continue
        if pol is Policy.ANNOTATION:
            assert plain(canonical_dumps(s)) is not None, k
        else:
            assert plain(canonical_dumps(s)) is None, k
    assert plain(canonical_dumps({"type": "string", "x-unknown": {"minLength": 3}})) is not None
