"""Rollback: after accepting k tokens and rolling back j, the state (next mask, completion,
termination) equals the state after accepting the first k-j tokens."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import xgrammar2 as xgr
from runtime_helpers import compiler, new_bitmask, shared_data, tokenizer

tokenizers = pytest.importorskip("tokenizers")


def hf(name: str):
    return tokenizers.Tokenizer.from_file(
        os.path.join(shared_data(), "tokenizers", "original", name, "tokenizer.json")
    )


DOC = {"city": "Zürich", "temp_c": -3.5, "tags": ["snow", "北风"], "ok": True, "note": None}


def states(m: xgr.GrammarMatcher, vocab_size: int):
    bm = new_bitmask(vocab_size)
    m.fill_next_token_bitmask(bm)
    return bm.copy(), m.is_completed(), m.is_terminated()


@pytest.mark.parametrize("k,j", [(5, 1), (9, 4), (20, 20), (21, 7)])
def test_rollback_restores_state_and_mask(k: int, j: int) -> None:
    tok = tokenizer("llama-3-instruct")
    ids = hf("llama-3-instruct").encode(json.dumps(DOC), add_special_tokens=False).ids
    compiled = compiler("llama-3-instruct").compile_builtin_json_grammar()
    ref = xgr.GrammarMatcher(compiled)
    for t in ids[: k - j]:
        assert ref.accept_token(t)
    m = xgr.GrammarMatcher(compiled)
    for t in ids[:k]:
        assert m.accept_token(t)
    m.rollback(j)
    a, b = states(m, tok.vocab_size), states(ref, tok.vocab_size)
    assert np.array_equal(a[0], b[0]) and a[1:] == b[1:]
    # and the matcher goes on exactly like the reference
    for t in ids[k - j :]:
        assert m.accept_token(t)
    assert m.is_completed()


def test_rollback_undoes_stop_token_and_rejects_over_rollback() -> None:
    tok = tokenizer("llama-3-instruct")
    compiled = compiler("llama-3-instruct").compile_grammar('root ::= "yes" | "no"')
    m = xgr.GrammarMatcher(compiled)
    assert m.accept_string("yes")
    stop = tok.stop_token_ids[0]
    assert m.accept_token(stop) and m.is_terminated()
    assert not m.accept_token(stop)
    m.rollback(1)
    assert not m.is_terminated() and m.is_completed()
    with pytest.raises(RuntimeError, match="rollback"):
        m.rollback(5)


def test_rejected_token_leaves_state_unchanged() -> None:
    tok = tokenizer("llama-3-instruct")
    compiled = compiler("llama-3-instruct").compile_builtin_json_grammar()
    m = xgr.GrammarMatcher(compiled)
    assert m.accept_string('{"a": [1, ')
    before = states(m, tok.vocab_size)
    bad = hf("llama-3-instruct").encode("}", add_special_tokens=False).ids[0]
    assert not m.accept_token(bad)
    after = states(m, tok.vocab_size)
    assert np.array_equal(before[0], after[0]) and before[1:] == after[1:]


def test_validate_tokens_reports_longest_prefix_without_state_change() -> None:
    compiled = compiler("llama-3-instruct").compile_builtin_json_grammar()
    enc = hf("llama-3-instruct")
    good = enc.encode('{"x": [1, 2]}', add_special_tokens=False).ids
    bad = enc.encode('{"x": ]', add_special_tokens=False).ids
    m = xgr.GrammarMatcher(compiled)
    assert m.validate_tokens(good) == len(good)
    n = m.validate_tokens(bad)
    assert 0 < n < len(bad)
    assert m.num_steps == 0 if isinstance(m.num_steps, int) else m.num_steps() == 0
    for t in good:
        assert m.accept_token(t)
