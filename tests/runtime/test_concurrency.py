"""Concurrency: one compiled grammar shared by 8 threads (a matcher each) gives the same
masks as a serial run, while the mask cache is being filled just in time by all of them;
batch filling equals per-matcher filling; one compiler compiles from many threads."""

from __future__ import annotations

import json
import os
import threading

import numpy as np
import pytest

import xgrammar2 as xgr
from runtime_helpers import new_bitmask, shared_data, tokenizer

tokenizers = pytest.importorskip("tokenizers")

DOCS = [
    {"id": i, "name": f"user {i}", "scores": [i * 1.5, -i, 1e3], "tags": ["a" * (i % 7), "ü"], "x": None}
    for i in range(8)
]


def token_streams():
    enc = tokenizers.Tokenizer.from_file(
        os.path.join(shared_data(), "tokenizers", "original", "llama-3-instruct", "tokenizer.json")
    )
    return [enc.encode(json.dumps(d), add_special_tokens=False).ids for d in DOCS]


def run(compiled: xgr.CompiledGrammar, ids: list[int], vocab_size: int) -> list[bytes]:
    m = xgr.GrammarMatcher(compiled)
    bm = new_bitmask(vocab_size)
    out = []
    for t in ids:
        m.fill_next_token_bitmask(bm)
        out.append(bm.tobytes())
        assert m.accept_token(t)
    return out


def test_eight_threads_share_one_compiled_grammar() -> None:
    tok = tokenizer("llama-3-instruct")
    streams = token_streams()
    # fresh compiled grammar: every thread races to build the same cache entries
    compiled = xgr.GrammarCompiler(tok, cache_enabled=False).compile_builtin_json_grammar()
    results: list = [None] * len(streams)
    errors: list = []

    def work(i: int) -> None:
        try:
            results[i] = run(compiled, streams[i], tok.vocab_size)
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(streams))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    serial_compiled = xgr.GrammarCompiler(tok, cache_enabled=False).compile_builtin_json_grammar()
    for i, ids in enumerate(streams):
        assert results[i] == run(serial_compiled, ids, tok.vocab_size), f"thread {i} differs"


def test_batch_fill_equals_single_fills() -> None:
    tok = tokenizer("llama-3-instruct")
    streams = token_streams()
    compiled = xgr.GrammarCompiler(tok).compile_builtin_json_grammar()
    ms = [xgr.GrammarMatcher(compiled) for _ in streams]
    for i, m in enumerate(ms):
        for t in streams[i][: 3 + 2 * i]:
            assert m.accept_token(t)
    batch = np.zeros((len(ms) + 2, (tok.vocab_size + 31) // 32), dtype=np.int32)
    idx = list(range(2, len(ms) + 2))
    xgr.fill_next_token_bitmask_batch(ms, batch, indices=idx, max_threads=4)
    for i, m in enumerate(ms):
        one = new_bitmask(tok.vocab_size)
        m.fill_next_token_bitmask(one)
        assert np.array_equal(batch[idx[i]], one[0])
    assert not batch[:2].any()


def test_compile_from_many_threads() -> None:
    tok = tokenizer("llama-3-instruct")
    c = xgr.GrammarCompiler(tok)
    grammars = [f'root ::= "{{" "\\"k{i}\\"" ":" [0-9]{{1,{i + 1}}} "}}"' for i in range(16)]
    out: dict = {}
    errors: list = []

    def work(i: int) -> None:
        try:
            m = xgr.GrammarMatcher(c.compile_grammar(grammars[i % len(grammars)]))
            k = i % len(grammars)
            out[i] = m.accept_string('{"k%d":%s}' % (k, "7" * (k + 1))) and m.is_completed()
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and all(out.values()) and len(out) == 32


SIXTEEN_SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}},
     "required": ["name", "age"]},
    {"type": "array", "items": {"enum": ["red", "green", "blue", 7, None]}, "maxItems": 5},
    {"type": "object", "properties": {"when": {"type": "string", "format": "date"},
                                      "tags": {"type": "array", "items": {"type": "string"}}}},
    {"anyOf": [{"type": "number", "minimum": 0}, {"type": "string", "pattern": "^[a-z]+$"}]},
]
SIXTEEN_TAG = {"type": "structural_tag", "format": {
    "type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [
        {"begin": "<tool_call>", "content": {"type": "json_schema", "json_schema": SIXTEEN_SCHEMAS[0]},
         "end": "</tool_call>"}]}}


def _walk_digest(compiled: xgr.CompiledGrammar, seed: int, vocab_size: int, steps: int = 16) -> list:
    """Seeded walk: fill, pick an allowed token, accept (rolling back and re-accepting every
    fifth step); the masks and the chosen tokens."""
    import random

    rng = random.Random(seed)
    m = xgr.GrammarMatcher(compiled)
    bm = new_bitmask(vocab_size)
    out = []
    for s in range(steps):
        if m.is_terminated():
            break
        m.fill_next_token_bitmask(bm)
        out.append(bm.tobytes())
        ids = np.flatnonzero(np.unpackbits(bm.reshape(-1).view(np.uint8), bitorder="little")[:vocab_size])
        if len(ids) == 0:
            break
        t = int(ids[rng.randrange(len(ids))])
        out.append(t)
        assert m.accept_token(t)
        if s % 5 == 4:
            m.rollback(1)
            assert m.accept_token(t)
    return out


def test_sixteen_threads_compile_fill_accept_like_serial() -> None:
    """16 threads at once on one shared compiler: each compiles (schemas shared by 4
    threads, so concurrent compiles of one key coalesce), then walks the shared compiled
    grammars with its own matchers while the mask caches fill just in time. Results equal a
    serial run on a separate compiler without caches."""
    tok = tokenizer("llama-3-instruct")
    n = tok.vocab_size
    shared = xgr.GrammarCompiler(tok)
    jobs = [("schema", i % 4) for i in range(16)]
    results: list = [None] * 16
    errors: list = []
    start = threading.Barrier(16)

    def compile_one(c: xgr.GrammarCompiler, kind: str, k: int) -> xgr.CompiledGrammar:
        return c.compile_json_schema(SIXTEEN_SCHEMAS[k]) if kind == "schema" else c.compile_structural_tag(SIXTEEN_TAG)

    def work(i: int) -> None:
        try:
            start.wait()
            kind, k = jobs[i]
            a = compile_one(shared, kind, k)
            b = compile_one(shared, "tag", 0) if i % 2 else shared.compile_builtin_json_grammar()
            results[i] = (_walk_digest(a, i, n), _walk_digest(b, 100 + i, n))
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    serial = xgr.GrammarCompiler(tok, cache_enabled=False, cross_grammar_cache=False)
    for i in range(16):
        kind, k = jobs[i]
        a = compile_one(serial, kind, k)
        b = compile_one(serial, "tag", 0) if i % 2 else serial.compile_builtin_json_grammar()
        assert results[i][0] == _walk_digest(a, i, n), f"thread {i}: first grammar differs from serial"
        assert results[i][1] == _walk_digest(b, 100 + i, n), f"thread {i}: second grammar differs from serial"
