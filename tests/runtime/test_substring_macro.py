"""Matching and token masks of the ``Substring(...)`` EBNF macro (csrc/lower/substring.c).

``Substring("c1", ..., "cn")`` matches any run ``c_i ... c_j`` of consecutive chunks, or "";
chunks are atomic byte strings. Checked three ways: against a brute-force reference of the
language, differentially against real upstream xgrammar 0.2.8 (accept / reject of many
candidate strings, and the token bitmask at every step of a walk over a small vocabulary),
and for scale (long texts stay linear: the automaton is a suffix automaton).
"""

from __future__ import annotations

import json
import random
import time
from typing import List, Set

import pytest

import xgrammar2 as xgr
from xgrammar2.testing import _get_masked_tokens_from_bitmask, _is_grammar_accept_string


def _lit(chunk: str) -> str:
    return json.dumps(chunk, ensure_ascii=False)


def _substring_ebnf(chunks: List[str], wrap: bool = False) -> str:
    body = "Substring(" + ", ".join(_lit(c) for c in chunks) + ")"
    return f'root ::= "<" {body} ">"' if wrap else f"root ::= {body}"


def _language(chunks: List[str]) -> Set[str]:
    n = len(chunks)
    return {"".join(chunks[i:j]) for i in range(n + 1) for j in range(i, n + 1)}


def _random_chunks(rng: random.Random) -> List[str]:
    alpha = rng.choice(["ab", "abc", "a", "aé", "x你", "a\n\""])
    return [
        "".join(rng.choice(alpha) for _ in range(rng.choice([0, 1, 1, 1, 2, 3])))
        for _ in range(rng.randint(0, 6))
    ]


def _candidates(rng: random.Random, chunks: List[str]) -> Set[str]:
    full = "".join(chunks)
    alpha = sorted(set(full)) or ["a"]
    out = set(_language(chunks))
    for _ in range(40):
        i = rng.randint(0, len(full))
        out.add(full[i : rng.randint(i, len(full))])
        out.add("".join(rng.choice(alpha) for _ in range(rng.randint(0, 6))))
    return out


# ---- the language ---------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_language_matches_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(40):
        chunks = _random_chunks(rng)
        grammar = xgr.Grammar.from_ebnf(_substring_ebnf(chunks))
        expected = _language(chunks)
        for cand in _candidates(rng, chunks):
            assert _is_grammar_accept_string(grammar, cand) == (cand in expected), (chunks, cand)


def test_chunks_are_atomic_bytes() -> None:
    # "你" and "好" share their UTF-8 lead byte: a chunk's bytes never split
    grammar = xgr.Grammar.from_ebnf('root ::= Substring("你好", "好你")')
    for cand, ok in [("你好", True), ("好你", True), ("你好好你", True), ("你", False),
                     ("好", False), ("好你你好", False), ("你好你", False)]:
        assert _is_grammar_accept_string(grammar, cand) == ok, cand


@pytest.mark.parametrize(
    "ebnf, accepted, rejected",
    [
        ('root ::= Substring("ab")*', ["", "ab", "abab"], ["a", "aba"]),
        ('root ::= (Substring("ab", "c") ";")+', [";", "ab;", "abc;c;"], ["", "a;", "ca;"]),
        ('root ::= Substring("ab"){2}', ["", "ab", "abab"], ["ababab", "b"]),
        ('root ::= x "!" | "q"\nx ::= Substring("a", "b")', ["!", "ab!", "q"], ["ba!", "qa"]),
        ('root ::= "(" root ")" | Substring("x", "y")', ["", "xy", "((x))"], ["(yx)", "(x"]),
    ],
)
def test_substring_in_context(ebnf: str, accepted: List[str], rejected: List[str]) -> None:
    grammar = xgr.Grammar.from_ebnf(ebnf)
    for cand in accepted:
        assert _is_grammar_accept_string(grammar, cand), cand
    for cand in rejected:
        assert not _is_grammar_accept_string(grammar, cand), cand


def test_long_text_is_linear() -> None:
    rng = random.Random(7)
    text = "".join(rng.choice("acgt") for _ in range(20000))
    ebnf = _substring_ebnf(list(text))
    start = time.perf_counter()
    grammar = xgr.Grammar.from_ebnf(ebnf)
    compiled = xgr.GrammarCompiler(xgr.TokenizerInfo([]), cache_enabled=False).compile_grammar(grammar)
    assert time.perf_counter() - start < 20
    matcher = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
    assert matcher.accept_string(text[5000:5300])
    assert not matcher.fork().accept_string("x")
    # 4,000 distinct 3-byte code points (llguidance's substring_chars example)
    chars = [chr(0x1000 + i) for i in range(4000)]
    grammar = xgr.Grammar.from_ebnf(_substring_ebnf(chars))
    assert _is_grammar_accept_string(grammar, "".join(chars[50:100]))
    assert not _is_grammar_accept_string(grammar, "".join(chars[50:100]) + chars[0])


# ---- differential: real upstream xgrammar 0.2.8 -------------------------------------------


def test_accept_reject_matches_upstream() -> None:
    up = pytest.importorskip("xgrammar")
    from xgrammar.testing import _is_grammar_accept_string as up_accept

    rng = random.Random(2026)
    grammars = 0
    for _ in range(150):
        chunks = _random_chunks(rng)
        wrap = rng.random() < 0.3
        ebnf = _substring_ebnf(chunks, wrap)
        ours_g, up_g = xgr.Grammar.from_ebnf(ebnf), up.Grammar.from_ebnf(ebnf)
        if ebnf.isascii() and not wrap:  # upstream escapes non-ASCII and adds parentheses
            assert str(ours_g) == str(up_g)
        for cand in _candidates(rng, chunks):
            if wrap:
                cand = "<" + cand + ">"
            assert _is_grammar_accept_string(ours_g, cand) == up_accept(up_g, cand), (ebnf, cand)
        grammars += 1
    assert grammars == 150


VOCAB = ["a", "b", "ab", "ba", "c", "cd", "d", "abc", "<", ">", "b>", "<a", "é", "\u00e9a",
         "\xc3", "x", "abab", "dab"]


@pytest.mark.parametrize(
    "ebnf",
    [
        'root ::= "<" Substring("ab", "cd") ">"',
        'root ::= "<" Substring("a", "b", "a", "b", "") ">"',
        'root ::= "<" Substring("ab", "a", "b", "ba", "é") ">"',
        'root ::= "<" (Substring("abc", "d") "x")* ">"',
        'root ::= Substring("a", "ba", "b", "cd", "ab")',
    ],
)
def test_masks_match_upstream(ebnf: str) -> None:
    up = pytest.importorskip("xgrammar")
    import torch

    def matcher(mod):
        info = mod.TokenizerInfo(VOCAB)
        compiled = mod.GrammarCompiler(info, cache_enabled=False).compile_grammar(ebnf)
        return info, mod.GrammarMatcher(compiled, terminate_without_stop_token=True)

    ours_info, ours = matcher(xgr)
    up_info, theirs = matcher(up)
    rng = random.Random(ebnf)
    for _walk in range(6):
        ours.reset()
        theirs.reset()
        for _step in range(12):
            a = xgr.allocate_token_bitmask(1, ours_info.vocab_size)
            b = up.allocate_token_bitmask(1, up_info.vocab_size)
            ours.fill_next_token_bitmask(a)
            theirs.fill_next_token_bitmask(b)
            assert torch.equal(a, b), (ebnf, _walk, _step)
            allowed = [t for t in range(len(VOCAB))
                       if t not in set(_get_masked_tokens_from_bitmask(a, len(VOCAB)))]
            if not allowed:
                break
            tok = rng.choice(allowed)
            assert ours.accept_token(tok) and theirs.accept_token(tok)
            assert ours.is_terminated() == theirs.is_terminated()
            if ours.is_terminated():
                break


def test_bitmask_agrees_with_accept_string() -> None:
    """Every allowed piece is accepted by a fork and every masked one rejected."""
    info = xgr.TokenizerInfo(VOCAB)
    compiled = xgr.GrammarCompiler(info, cache_enabled=False).compile_grammar(
        'root ::= "<" Substring("ab", "a", "b", "ba", "cd") ">"')
    m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
    mask = xgr.allocate_token_bitmask(1, info.vocab_size)
    for ch in "<ababba>":
        m.fill_next_token_bitmask(mask)
        rejected = set(_get_masked_tokens_from_bitmask(mask, info.vocab_size))
        for tid, piece in enumerate(VOCAB):
            assert m.fork().accept_string(piece) == (tid not in rejected), (ch, piece)
        assert m.accept_string(ch)
