"""Lowering builds an inlined rule (or a reference sequence led by one) once per rule NFA and
end state, every other occurrence reaching it by an epsilon edge (csrc/lower/nfa.c, shared
fragments). The language must not change: strings accepted by a grammar compiled with
inlining (shared fragments) agree with the same grammar compiled without inlining (every
reference an Earley item, nothing shared) and with an equivalent Python regex, for every
string over the grammar's alphabet up to a length; masks equal the brute-force oracle."""

from __future__ import annotations

import random
import re

import pytest

import xgrammar2 as xgr
from runtime_helpers import oracle_walk, tokenizer

# (grammar, equivalent regex, alphabet, max length)
CASES = {
    # An object's optional property chain: p_k ::= ws "," ... p_{k+1} | p_{k+1}, each
    # p_{k+1} inlined twice into p_k, both copies ending at p_k's end.
    "property_chain": (
        r'''root ::= "{" (p0 | f0) "}"
f0 ::= "a" ws ":" v p1 | f1
f1 ::= "b" ws ":" v p2 | f2
f2 ::= "c" ws ":" v | ""
p0 ::= ws "," ws "a" ws ":" v p1 | p1
p1 ::= ws "," ws "b" ws ":" v p2 | p2
p2 ::= ws "," ws "c" ws ":" v | ""
v ::= "1" | "22"
ws ::= " "?''',
        None,  # checked against the grammar without inlining only
        "{}abc:12, ",
        7,
    ),
    # The same inlined rule in a loop body and around it: fragments ending at the loop
    # state and at the rule's end.
    "loop": (
        r'''root ::= (x | "-" x | x "+")* "." x?
x ::= "a" [bc]* "d"?''',
        r"(?:a[bc]*d?|-a[bc]*d?|a[bc]*d?\+)*\.(?:a[bc]*d?)?",
        "abcd-+.",
        6,
    ),
    # A nullable inlined rule inside a rule used where it must not be empty ("minus the
    # empty string" product), and sequences of references led by an inlined rule.
    "nullable_and_sequences": (
        r'''root ::= "<" w ">" | "<" y y ">" | "[" (k1 rest | "x" k1 rest | "y" k1 rest | k1 rest2) "]"
w ::= y+
y ::= "q"? ("r" | "")
k1 ::= "k" | "K"
rest ::= "1" | "2" "2"
rest2 ::= "3"''',
        r"<(?:q?r?)+>|<q?r?q?r?>|\[(?:[kK](?:1|22)|x[kK](?:1|22)|y[kK](?:1|22)|[kK]3)\]",
        "<>qr[]xykK123",
        5,
    ),
}


def _accepts(compiled: xgr.CompiledGrammar, s: str) -> tuple[bool, bool]:
    """(s is a prefix of the language, s is in the language)."""
    m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
    if not m.accept_string(s):
        return False, False
    return True, m.is_completed()


@pytest.fixture(scope="module")
def compilers() -> tuple[xgr.GrammarCompiler, xgr.GrammarCompiler]:
    tok = tokenizer("qwen3")
    return (xgr.GrammarCompiler(tok, cache_enabled=False),
            xgr.GrammarCompiler(tok, cache_enabled=False, inline_max_states=-1))


@pytest.mark.parametrize("name", list(CASES))
def test_language_unchanged_by_shared_fragments(name: str, compilers) -> None:
    src, rx, alphabet, max_len = CASES[name]
    shared = compilers[0].compile_grammar(src)
    plain = compilers[1].compile_grammar(src)
    pat = re.compile(rx) if rx else None
    # Every string up to max_len whose proper prefixes are viable (a string with a dead
    # prefix is dead in both: checked once, at its first dead prefix).
    n_in, frontier = 0, [""]
    for k in range(max_len + 1):
        nxt = []
        for s in frontier:
            got = _accepts(shared, s)
            assert got == _accepts(plain, s), f"{name}: {s!r}: inlined {got}"
            if pat is not None:
                assert got[1] == (pat.fullmatch(s) is not None), f"{name}: {s!r}: {got}"
            n_in += got[1]
            if got[0] and k < max_len:
                nxt.extend(s + ch for ch in alphabet)
        frontier = nxt
    assert n_in > 5  # the enumeration reaches the language


@pytest.mark.parametrize("name", list(CASES))
def test_masks_equal_bruteforce(name: str, compilers) -> None:
    tok = tokenizer("qwen3")
    compiled = compilers[0].compile_grammar(CASES[name][0])
    rng = random.Random(name)
    oracle_walk(compiled, tok, rng, name, 10, 3)
