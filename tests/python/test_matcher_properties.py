"""Property tests through the Python API: on small vocabularies and random literal grammars,
every mask equals (1) the set of tokens a fork accepts, (2) the core's brute-force oracle and
(3) the set computed directly from the grammar's strings."""

import numpy as np
import pytest

import xgrammar2 as xgr

from pyapi_helpers import requires_core

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

pytestmark = requires_core

ALPHABET = "abc"
TOKENS = [""] + list(ALPHABET) + [x + y for x in ALPHABET for y in ALPHABET] + ["abc", "</s>"]
STOP = len(TOKENS) - 1
INFO = None


def info():
    global INFO
    if INFO is None:
        # Token 0 is empty (a special token); the last one is the stop token.
        INFO = xgr.TokenizerInfo(
            [t.encode() for t in TOKENS], vocab_size=len(TOKENS) + 5, stop_token_ids=[STOP],
            special_token_ids=[STOP],
        )
    return INFO


def allowed_ids(bm, n):
    row = bm[0].astype(np.int64) & 0xFFFFFFFF
    return {t for t in range(n) if (row[t // 32] >> (t % 32)) & 1}


def expected_ids(literals, prefix):
    out = set()
    for t, text in enumerate(TOKENS[:-1]):
        if text and any(lit.startswith(prefix + text) for lit in literals):
            out.add(t)
    if prefix in literals:
        out.add(STOP)
    return out


literal_sets = st.sets(st.text(alphabet=ALPHABET, min_size=1, max_size=6), min_size=1, max_size=4)


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(literals=literal_sets, choices=st.lists(st.integers(0, 10**6), max_size=8))
def test_masks_match_oracles_on_random_walks(literals, choices):
    lits = sorted(literals)
    ebnf = "root ::= " + " | ".join(f'"{s}"' for s in lits)
    compiled = xgr.GrammarCompiler(info(), cache_limit_bytes=0).compile_grammar(ebnf)
    m = xgr.GrammarMatcher(compiled)
    n = info().vocab_size
    prefix = ""
    bm = np.zeros(xgr.get_bitmask_shape(1, n), dtype=np.int32)
    brute = np.zeros_like(bm)
    for choice in choices + [None]:
        m.fill_next_token_bitmask(bm)
        m._fill_next_token_bitmask_bruteforce(brute)
        got = allowed_ids(bm, n)
        assert got == allowed_ids(brute, n)
        assert got == {t for t in range(n) if m.fork().accept_token(t)}
        assert got == expected_ids(lits, prefix), (lits, prefix)
        assert m.is_completed() == (prefix in lits)
        if choice is None or not got:
            break
        token = sorted(got)[choice % len(got)]
        assert m.accept_token(token)
        if token == STOP:
            # What a terminated matcher's mask holds is the core's choice (upstream raises);
            # only check that it accepts nothing more.
            assert m.is_terminated()
            assert not any(m.fork().accept_token(t) for t in range(n))
            break
        else:
            prefix += TOKENS[token]
    # Rolling everything back returns to the start.
    m.rollback(m.num_steps)
    m.fill_next_token_bitmask(bm)
    assert allowed_ids(bm, n) == expected_ids(lits, "")
