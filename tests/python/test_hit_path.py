"""The compile cache's hit path (issue 37): a hit on a JSON schema's text as given (an alias of
its canonical entry), the closure-free hits of the other compile_* methods, and the matcher
constructor's per-grammar constants. Pins what the fast paths rely on: the same object comes
back, the byte bound and LRU order still hold, a changed dict or limit is never served stale,
and concurrent compiles of one key still compile once."""

import json
import threading

import numpy as np
import pytest

import xgrammar2 as xgr
from xgrammar2 import _core, config, limits
from xgrammar2.compile_cache import CompileCache

from pyapi_helpers import requires_core

pytestmark = requires_core

VOCAB = [b"<s>", b"</s>", b"{", b"}", b"\"", b"a", b"b", b":", b",", b" ", b"1", b"true", b"null"]
VOCAB_SIZE = 40
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


@pytest.fixture(scope="module")
def info():
    return xgr.TokenizerInfo(VOCAB, xgr.VocabType.RAW, vocab_size=VOCAB_SIZE, stop_token_ids=[1],
                             special_token_ids=[0])


def allowed(m):
    bm = xgr.allocate_token_bitmask(1, VOCAB_SIZE)
    m.fill_next_token_bitmask(bm)
    row = np.asarray(bm[0]).astype(np.int64) & 0xFFFFFFFF
    return [i for i in range(VOCAB_SIZE) if row[i // 32] >> (i % 32) & 1]


def test_text_hit_returns_the_same_object_for_every_spelling(info):
    comp = xgr.GrammarCompiler(info)
    text = json.dumps(SCHEMA)
    g = comp.compile_json_schema(text)
    assert comp.compile_json_schema(text) is g  # the text as given (alias)
    assert comp.compile_json_schema(str(text.encode().decode())) is g  # an equal, new str
    assert comp.compile_json_schema(json.dumps(SCHEMA, indent=2)) is g  # canonical key
    assert comp.compile_json_schema(json.dumps(SCHEMA, indent=2)) is g  # now an alias too
    assert comp.compile_json_schema(SCHEMA) is g  # a dict: dumped, same key
    assert len(comp._cache) == 1
    # Other options are another grammar, on the fast path and with extra keyword options.
    strict = comp.compile_json_schema(text, any_whitespace=False)
    assert strict is not g and comp.compile_json_schema(text, any_whitespace=False) is strict
    assert comp.compile_json_schema(text, any_whitespace=False, any_order=False) is strict
    # A differently typed value makes the same options, so the same key (as before aliases).
    assert comp.compile_json_schema(text, any_whitespace=1) is g
    m = xgr.GrammarMatcher(comp.compile_json_schema(text))
    assert allowed(m) == allowed(xgr.GrammarMatcher(g))


def test_aliases_are_counted_bounded_and_leave_with_their_entry(info):
    comp = xgr.GrammarCompiler(info)
    cache = comp._cache
    text = json.dumps(SCHEMA)
    g = comp.compile_json_schema(text)
    before = comp.get_cache_size_bytes()
    spellings = [json.dumps(SCHEMA, indent=i) for i in range(1, 9)]
    for s in spellings:
        assert comp.compile_json_schema(s) is g
    assert len(cache._aliases) == CompileCache.ALIAS_MAX  # the first text and 3 more
    grown = comp.get_cache_size_bytes()
    assert grown > before  # the aliases' text counts in the entry's size
    assert sum(e[1] for e in cache._entries.values()) == cache._total
    # An alias past the cap still hits through the canonical key.
    assert comp.compile_json_schema(spellings[-1]) is g
    comp.clear_cache()
    assert not cache._aliases and comp.get_cache_size_bytes() == 0
    cache.ALIAS_MAX = 0  # no aliases at all: every hit takes the canonical key
    h = comp.compile_json_schema(text)
    assert comp.compile_json_schema(text) is h and not cache._aliases
    assert comp.compile_json_schema(text) is not g


def test_byte_bound_and_lru_hold_after_many_hits(info):
    texts = [json.dumps({"type": "object", "properties": {f"k{i}": {"type": "integer"}}})
             for i in range(6)]
    probe = xgr.GrammarCompiler(info)
    bm = xgr.allocate_token_bitmask(1, VOCAB_SIZE)
    for t in texts:  # a grammar grows as its masks are built: measure it after a fill
        xgr.GrammarMatcher(probe.compile_json_schema(t)).fill_next_token_bitmask(bm)
    one = max(probe.compile_json_schema(t).memory_size_bytes + 2 * len(t) for t in texts)
    limit = 3 * one + 2048
    comp = xgr.GrammarCompiler(info, cache_limit_bytes=limit * 8 // 7)  # 1/8 goes to the tag cache
    cache = comp._cache
    first = [comp.compile_json_schema(t) for t in texts[:2]]
    for _ in range(500):  # many hits on the first two: they stay the most recent
        for t, g in zip(texts[:2], first):
            assert comp.compile_json_schema(t) is g
            xgr.GrammarMatcher(g).fill_next_token_bitmask(bm)
        assert cache._total <= cache._limit
    for t in texts[2:]:
        xgr.GrammarMatcher(comp.compile_json_schema(t)).fill_next_token_bitmask(bm)
        comp.compile_json_schema(t)  # a hit re-reads its size, grown by the fill
        comp.compile_json_schema(texts[0])  # keeps the first one recent
        assert cache._total <= cache._limit
    assert comp.compile_json_schema(texts[0]) is first[0]
    assert comp.compile_json_schema(texts[1]) is not first[1]  # least recent: evicted
    assert comp.get_cache_size_bytes() <= cache._limit
    # Every alias points at a cached entry, and each entry's aliases are in the map.
    for alias, key in cache._aliases.items():
        assert alias in cache._entries[key][3]


def test_changed_dict_and_lowered_limits_are_not_served_stale(info):
    comp = xgr.GrammarCompiler(info)
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    g = comp.compile_json_schema(schema)
    schema["properties"]["a"]["type"] = "boolean"
    h = comp.compile_json_schema(schema)
    assert h is not g
    m = xgr.GrammarMatcher(h)
    assert m.accept_string('{"a":') and m.accept_string("true") and not m.accept_string("1")

    deep = json.dumps({"type": "array", "items": {"type": "array", "items": {"type": "integer"}}})
    comp.compile_json_schema(deep)
    assert comp.compile_json_schema(deep) is comp.compile_json_schema(deep)
    old_depth = config.get_max_recursion_depth()
    try:
        config.set_max_recursion_depth(2)
        with pytest.raises(xgr.GrammarLimitError):
            comp.compile_json_schema(deep)
    finally:
        config.set_max_recursion_depth(old_depth)
    old = limits.get_limits()["max_input_bytes"]
    try:
        limits.set_limits(max_input_bytes=len(deep) - 1)
        with pytest.raises(xgr.GrammarLimitError):
            comp.compile_json_schema(deep)
    finally:
        limits.set_limits(max_input_bytes=old)


def test_cache_disabled_compiles_every_time(info):
    comp = xgr.GrammarCompiler(info, cache_enabled=False)
    text = json.dumps(SCHEMA)
    assert comp.compile_json_schema(text) is not comp.compile_json_schema(text)
    assert comp.compile_regex("ab") is not comp.compile_regex("ab")
    assert comp.get_cache_size_bytes() == 0


def test_concurrent_compiles_of_one_text_compile_once(info, monkeypatch):
    comp = xgr.GrammarCompiler(info)
    compiles = []
    real = comp._compile
    gate = threading.Barrier(8)

    def counting(grammar, rebuild=None):
        compiles.append(1)
        return real(grammar, rebuild)

    monkeypatch.setattr(comp, "_compile", counting)
    text = json.dumps({"type": "object", "properties": {"b": {"type": "string"}}})
    results, errors = [], []

    def work(spelled):
        try:
            gate.wait()
            results.append(comp.compile_json_schema(spelled))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    spellings = [text if i % 2 else json.dumps(json.loads(text), indent=i) for i in range(8)]
    threads = [threading.Thread(target=work, args=(s,)) for s in spellings]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len({id(r) for r in results}) == 1
    assert len(compiles) == 1


def test_key_mismatch_still_compiles_the_slow_way(info, monkeypatch, caplog):
    from xgrammar2 import compiler as compiler_mod

    comp = xgr.GrammarCompiler(info)
    text = json.dumps(SCHEMA)
    monkeypatch.setattr(compiler_mod, "canonical_schema_text", lambda t: b'{"type":"null"}')
    g = comp.compile_json_schema(text)
    m = xgr.GrammarMatcher(g)
    assert m.accept_string('{"a":1}')  # the schema's grammar, not the wrong key's
    assert not comp._cache._aliases  # nothing aliased to a key the core got wrong
    assert "differs from json.dumps" in caplog.text


def test_other_entry_points_hit_without_a_compile(info, monkeypatch):
    comp = xgr.GrammarCompiler(info)
    ebnf = comp.compile_grammar('root ::= "a" "b"')
    regex = comp.compile_regex("ab+")
    builtin = comp.compile_builtin_json_grammar()
    tag = json.dumps({"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<f="], "tags": [
            {"begin": "<f=a>", "content": {"type": "json_schema", "json_schema": SCHEMA},
             "end": "</f>"}]}})
    comp.compile_structural_tag(tag)
    linked = comp.compile_structural_tag(tag)  # (a linked grammar is kept from its 2nd compile)
    assert comp.compile_structural_tag(tag) is linked

    def fail(*a, **k):
        raise AssertionError("compiled on a hit")

    monkeypatch.setattr(comp, "_compile", fail)
    monkeypatch.setattr(comp._cache, "get_or_compile", fail)
    assert comp.compile_grammar('root ::= "a" "b"') is ebnf
    assert comp.compile_regex("ab+") is regex
    assert comp.compile_builtin_json_grammar() is builtin
    assert comp.compile_structural_tag(tag) is linked
    assert comp.compile_structural_tag(tag.encode()) is linked  # bytes: the general path


def test_matcher_constants_and_arguments(info):
    comp = xgr.GrammarCompiler(info)
    g = comp.compile_regex("ab")
    m = xgr.GrammarMatcher(g)
    assert g._matcher_consts == (VOCAB_SIZE, 2, (1,))
    assert m.stop_token_ids == [1] and m.max_rollback_tokens == -1
    ids = m.stop_token_ids
    ids.append(7)  # a copy: neither the matcher nor the grammar changes
    assert xgr.GrammarMatcher(g).stop_token_ids == [1] and g._matcher_consts[2] == (1,)
    o = xgr.GrammarMatcher(g, override_stop_tokens=[2, 3], max_rollback_tokens=3,
                           terminate_without_stop_token=True, default_temperature=0.5)
    assert o.stop_token_ids == [2, 3] and o.max_rollback_tokens == 3
    assert o.temperature == 0.5 and o.fork().stop_token_ids == [2, 3]
    assert m.accept_string("a") and not m.accept_string("x")  # the out-flag made on first use
    with pytest.raises(TypeError):
        xgr.GrammarMatcher(g, max_rollback_tokens=True)
    with pytest.raises(TypeError):
        xgr.GrammarMatcher(g, max_rollback_tokens=1.0)
    with pytest.raises(ValueError):
        xgr.GrammarMatcher(g, max_rollback_tokens=-2)
    with pytest.raises(ValueError):
        xgr.GrammarMatcher(g, override_stop_tokens=[VOCAB_SIZE])
    with pytest.raises(ValueError):
        xgr.GrammarMatcher(comp)
    big = xgr.GrammarMatcher(g, max_rollback_tokens=2**40)
    assert big.max_rollback_tokens == 2**40
    assert _core.lib.xgr_matcher_num_steps(big._ptr) == 0
