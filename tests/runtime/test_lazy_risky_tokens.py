"""Lazy rules on a real vocabulary: the exact checks are limited to the tokens that may
close a lazy occurrence before their last byte (csrc/runtime/lazy_tokens.h); the masks
must still equal the brute-force oracle's at every step of seeded walks, including
markers whose bytes also occur in the body, nested and nullable-tailed lazy rules, and
budgets on top."""

from __future__ import annotations

import random

import pytest

import xgrammar2 as xgr

from runtime_helpers import allowed, masks_equal_oracle, new_bitmask, pick_token, tokenizer

GRAMMARS = {
    "stop": 'start: a "!"\na[stop="END"]: /[a-z ]*/\n',
    "suffix": 'start: a "!"\na[suffix="END"]: /[a-z ]*/\n',
    "stop_in_body": 'start: a "!"\na[stop="ab"]: /[a-z ]*/\n',
    "stop_regex": 'start: a "."\na[stop=/e+n/]: /[a-z ]*/\n',
    "budget": 'start: a "!"\na[stop="END", max_tokens=6]: /[a-z ]*/\n',
    "max_chars": 'start: a "!"\na[suffix="x", max_chars=9]: /[a-z ]*/\n',
}

EBNF = {
    "nested": 'root ::= a "!"\na[lazy] ::= b " " b "END"\nb[lazy] ::= [a-z]* "q"\n',
    "nullable_tail": 'root ::= a "z"\na[lazy] ::= "x" [a-y]* c\nc ::= "y" | ""\n',
    "ref_tail": 'root ::= a "."\na[lazy] ::= [a-z ]* d\nd ::= "k" [0-9]*\n',
}


@pytest.mark.parametrize("name", sorted(GRAMMARS) + sorted(EBNF))
def test_masks_match_oracle(name: str) -> None:
    tok = tokenizer("llama-3.1")
    if name in EBNF:
        g = xgr.Grammar.from_ebnf(EBNF[name])
    else:
        g = xgr.Grammar.from_lark(GRAMMARS[name])
    cg = xgr.GrammarCompiler(tok, cache_enabled=False).compile_grammar(g)
    for seed in range(3):
        rng = random.Random(seed)
        m = xgr.GrammarMatcher(cg)
        for step in range(14):
            ok, why = masks_equal_oracle(m, tok.vocab_size)
            assert ok, f"{name} seed {seed} step {step}: {why}"
            if m.is_terminated():
                break
            bm = new_bitmask(tok.vocab_size)
            m.fill_next_token_bitmask(bm)
            ids = allowed(bm, tok.vocab_size)
            if not len(ids):
                break
            assert m.accept_token(pick_token(rng, ids, tok))


def test_stop_fill_inside_the_body_is_exact_after_a_token() -> None:
    """Inside a stop= body over [a-z ] every token used to be checked exactly (ms per
    fill); now only the few holding a byte that can end the marker are (timed in
    bench.lark_lazy_mask, not here): repeated fills from the memo stay exact."""
    tok = tokenizer("llama-3.1")
    cg = xgr.GrammarCompiler(tok, cache_enabled=False).compile_grammar(
        xgr.Grammar.from_lark(GRAMMARS["stop"]))
    m = xgr.GrammarMatcher(cg)
    bm = new_bitmask(tok.vocab_size)
    m.fill_next_token_bitmask(bm)  # (builds the risky-token list once)
    vocab = tok.decoded_vocab
    space = next(i for i, t in enumerate(vocab) if t == b" hello")
    assert m.accept_token(space)
    for _ in range(3):
        m.fill_next_token_bitmask(bm)
    ok, why = masks_equal_oracle(m, tok.vocab_size)
    assert ok, why
