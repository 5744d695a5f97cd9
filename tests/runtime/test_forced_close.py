"""The forced close of Lark ``suffix=`` / ``stop=`` rules with a budget whose body is not free
text (issue 33): once the occurrence's ``max_tokens`` / ``max_chars`` budget is spent, the rule
ends where its body alone can end, without its marker (and records no ``stop_capture``).

Differential against real upstream xgrammar 0.2.8 (masks filled before every token, as serving
does: upstream commits a forced close while filling a mask) on every token sequence up to a
depth, and against the brute-force mask oracle (every token run through the parser) on
vocabularies whose tokens cross the budget point. Known differences, asserted here as ours:

* a ``max_chars`` budget spent inside a token: upstream's ``accept_token`` closes the rule
  there, but its mask leaves such tokens out; ours allows what ``accept_token`` accepts;
* a root rule force-closed with nothing after it: upstream neither terminates nor allows a
  token (a dead end); ours terminates.
"""

from __future__ import annotations

import json
from typing import List, Sequence, Tuple

import pytest

import xgrammar2 as xgr

upstream = pytest.importorskip("xgrammar")


def _compile(mod, source: str, vocab: Sequence[str]):
    info = mod.TokenizerInfo(list(vocab))
    grammar = mod.Grammar.from_lark(source, tokenizer_info=info)
    return mod.GrammarCompiler(info, cache_enabled=False).compile_grammar(grammar)


def _allowed(mod, matcher, n: int) -> List[int]:
    bitmask = mod.allocate_token_bitmask(1, n)
    matcher.fill_next_token_bitmask(bitmask)
    return [i for i in range(n) if (int(bitmask[0, i // 32]) >> (i % 32)) & 1]


def _oracle(matcher, n: int) -> List[int]:
    bitmask = xgr.allocate_token_bitmask(1, n)
    matcher._fill_next_token_bitmask_bruteforce(bitmask)
    return [i for i in range(n) if (int(bitmask[0, i // 32]) >> (i % 32)) & 1]


def _walk(source: str, vocab: Sequence[str], depth: int, differential: bool) -> int:
    """Every token sequence the masks allow, up to `depth` tokens: our mask equals the
    oracle's and (with `differential`) upstream's, and a terminated match has upstream's
    captures. Returns the number of states checked."""
    n = len(vocab)
    ours_c = _compile(xgr, source, vocab)
    up_c = _compile(upstream, source, vocab) if differential else None
    checked = 0
    stack: List[List[int]] = [[]]
    while stack:
        seq = stack.pop()
        mo = xgr.GrammarMatcher(ours_c, terminate_without_stop_token=True)
        mu = upstream.GrammarMatcher(up_c, terminate_without_stop_token=True) if up_c else None
        for t in seq:
            if mu is not None:
                _allowed(upstream, mu, n)  # (upstream commits a forced close here)
                assert mu.accept_token(t), [vocab[i] for i in seq]
            assert mo.accept_token(t), [vocab[i] for i in seq]
        where = [vocab[i] for i in seq]
        if mo.is_terminated():
            if mu is not None:
                assert mo.get_captures() == mu.get_captures(), where
            continue
        mine = _allowed(xgr, mo, n)
        assert mine == _oracle(mo, n), where
        if mu is not None:
            assert mine == _allowed(upstream, mu, n), where
            assert not mu.is_terminated(), where
        checked += 1
        if len(seq) < depth:
            stack.extend(seq + [t] for t in mine)
    return checked


# Single-character tokens: no budget is spent inside a token, so upstream's masks agree.
SINGLE = ["a", "b", "!", ">", ",", "x", "y", "z"]

DIFFERENTIAL = [
    # same rule: marker first keeps the marker capture, budget first closes through the body
    'start[capture="all"]: v ">"\nv[max_tokens=2, capture="body", {a}="!", stop_capture="m"]: /[ab]*/',
    'start[capture="all"]: v ">"\nv[max_chars=2, capture="body", {a}="!", stop_capture="m"]: /[ab]*/',
    'start[capture="all"]: v ">"\nv[max_chars=3, capture="body", {a}="!", stop_capture="m"]: /[ab]*/',
    # a marker of several lengths, partly read when the budget runs out
    'start[capture="all"]: v ">"\nv[max_tokens=1, capture="body", {a}=END, stop_capture="m"]: /[ab]*/\n'
    'END: /!!+/',
    # the expired parent's other alternative must not survive the forced close
    'start: o "z"\no[max_tokens=1]: v | v "y"\nv[max_tokens=1, {a}="!"]: /x*/',
    'start: o "z"\no[max_tokens=2]: v | v "y"\nv[max_tokens=1, {a}="!"]: /x*/',
    # an enclosing budget tighter than the rule's own closes it too
    'start[capture="all"]: o ">"\no[max_chars=2]: v\nv[max_chars=5, capture="v", {a}="!"]: /[ab]*/',
    'start[capture="all"]: o ">"\no[max_chars=3]: "x" v\nv[max_chars=5, capture="v", {a}="!"]: /[ab]*/',
    # each occurrence has its own budget
    'start[capture="all"]: v ("," v)* ">"\nv[max_chars=1, capture="v", {a}="!"]: /[ab]*/',
]


@pytest.mark.parametrize("attribute", ["suffix", "stop"])
@pytest.mark.parametrize("case", range(len(DIFFERENTIAL)))
def test_forced_close_matches_upstream(case: int, attribute: str) -> None:
    source = DIFFERENTIAL[case].replace("{a}", attribute)
    assert _walk(source, SINGLE, 4, differential=True) > 1


# Tokens that cross the budget point (and the marker, and code points).
ORACLE: List[Tuple[str, List[str]]] = [
    ('start[capture="all"]: v ">"\nv[max_chars=2, capture="body", {a}="!", stop_capture="m"]: /[ab]*/',
     ["a", "b", "!", ">", "ab", "a!", "b!", "!>", "b>", "ab!", "a>", "aa>"]),
    ('start[capture="all"]: v ">"\nv[max_tokens=2, capture="body", {a}="!", stop_capture="m"]: /[ab]*/',
     ["a", "b", "!", ">", "ab", "a!", "b!", "!>", "b>", "ab!", "a>"]),
    ('start[capture="c"]: (v ",")* v\nv[max_chars=2, capture="v", {a}=";"]: /[a-z中]*/',
     ["a", "中", ";", ",", "a,", "中,", "a;", "中;", "aa", "a中", "中a"]),
    ('start[capture="c"]: v "."\nv[max_tokens=2, capture="v", {a}="!!"]: /[ab]{{2}}|[ab]{{4}}/',
     ["a", "b", "!", ".", "ab", "a!", "!!", "ba", "b.", "!."]),
    ('start: o "z"\no[max_tokens=1]: v | v "y"\nv[max_tokens=1, {a}="!"]: /x*/',
     ["x", "!", "z", "y", "xz", "x!", "!z", "xy", "xx"]),
]


@pytest.mark.parametrize("attribute", ["suffix", "stop"])
@pytest.mark.parametrize("case", range(len(ORACLE)))
def test_forced_close_mask_is_exact(case: int, attribute: str) -> None:
    source, vocab = ORACLE[case]
    assert _walk(source.replace("{a}", attribute).replace("{{", "{").replace("}}", "}"),
                 vocab, 4, differential=False) > 1


@pytest.mark.parametrize("attribute", ["suffix", "stop"])
def test_budget_spent_inside_a_token(attribute: str) -> None:
    # upstream's accept_token closes inside the token too; ours also allows it in the mask
    source = f'start[capture="all"]: v ">"\nv[max_chars=2, capture="v", {attribute}="!"]: /[ab]*/'
    vocab = ["a", "b", "!", ">", "a>", "aa>", "ab!>"]
    for mod in (xgr, upstream):
        compiled = _compile(mod, source, vocab)
        m = mod.GrammarMatcher(compiled, terminate_without_stop_token=True)
        assert m.accept_token(0) and m.accept_token(4) and m.is_terminated()
        assert m.get_captures() == [("v", b"aa"), ("all", b"aa>")]
        m = mod.GrammarMatcher(compiled, terminate_without_stop_token=True)
        assert m.accept_token(5) and m.is_terminated()
        m = mod.GrammarMatcher(compiled, terminate_without_stop_token=True)
        assert not m.accept_token(6)  # three code points
    m = xgr.GrammarMatcher(_compile(xgr, source, vocab), terminate_without_stop_token=True)
    assert m.accept_token(0)
    assert [vocab[i] for i in _allowed(xgr, m, len(vocab))] == ["a", "b", "!", "a>"]


def test_root_closed_by_its_budget_terminates() -> None:
    source = 'start[capture="c"]: v\nv[max_tokens=2, capture="v", suffix="!!"]: /[ab]{2}|[ab]{4}/'
    vocab = ["a", "b", "!"]
    m = xgr.GrammarMatcher(_compile(xgr, source, vocab), terminate_without_stop_token=True)
    assert m.accept_token(0) and m.accept_token(1) and m.is_terminated()
    assert m.get_captures() == [("v", b"ab"), ("c", b"ab")]
    # upstream: a dead end (no token allowed, not terminated)
    mu = upstream.GrammarMatcher(_compile(upstream, source, vocab),
                                 terminate_without_stop_token=True)
    for t in (0, 1):
        _allowed(upstream, mu, len(vocab))
        assert mu.accept_token(t)
    assert _allowed(upstream, mu, len(vocab)) == [] and not mu.is_terminated()


@pytest.mark.parametrize("attribute", ["suffix", "stop"])
def test_printed_and_serialized_grammar_keep_the_forced_close(attribute: str) -> None:
    source = (f'start[capture="all"]: v ">"\n'
              f'v[max_tokens=2, capture="body", {attribute}="!", stop_capture="m"]: /[ab]*/')
    vocab = ["a", "b", "!", ">", "a!"]
    info = xgr.TokenizerInfo(vocab)
    grammar = xgr.Grammar.from_lark(source, tokenizer_info=info)
    printed = str(grammar)
    assert "capture_hidden_body_rule_id=" in printed
    assert "capture_hidden_marker_rule_id=" in printed
    infos = json.loads(grammar.serialize_json())["suffix_stop_infos"]
    assert len(infos) == 1 and infos[0][3] >= 0 and infos[0][4] >= 0
    marker = b"!>" if attribute == "suffix" else b">"
    for g in (grammar, xgr.Grammar.from_ebnf(printed),
              xgr.Grammar.deserialize_json(grammar.serialize_json())):
        compiled = xgr.GrammarCompiler(info, cache_enabled=False).compile_grammar(g)
        m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
        assert m.accept_token(0) and m.accept_token(1)
        assert _allowed(xgr, m, len(vocab)) == [3]
        assert m.accept_token(3) and m.is_terminated()
        assert m.get_captures() == [("body", b"ab"), ("all", b"ab>")]
        m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
        assert m.accept_token(4) and m.accept_token(3) and m.is_terminated()
        assert m.get_captures() == [("m", b"!"), ("body", b"a"), ("all", b"a" + marker)]


def test_rollback_and_fork_across_the_forced_close() -> None:
    source = 'start[capture="all"]: v ">"\nv[max_chars=2, capture="v", stop="!"]: /[ab]*/'
    vocab = ["a", "b", "!", ">", "b!"]
    compiled = _compile(xgr, source, vocab)
    m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
    assert m.accept_token(0) and m.accept_token(1)  # "ab": the budget is spent
    assert _allowed(xgr, m, len(vocab)) == [3]
    assert not m.accept_token(2)  # the marker no longer fits
    forked = m.fork()
    assert forked.accept_token(3) and forked.get_captures() == [("v", b"ab"), ("all", b"ab>")]
    m.rollback(1)  # back before the budget was spent: the marker fits again
    assert _allowed(xgr, m, len(vocab)) == [0, 1, 2]  # ("b!" would be three code points)
    assert m.accept_token(2) and m.accept_token(3) and m.is_terminated()
    assert m.get_captures() == [("v", b"a"), ("all", b"a>")]


def test_unbudgeted_and_free_text_rules_are_unchanged() -> None:
    # no budget: no body rule for a one-length marker, and no forced close
    g = xgr.Grammar.from_lark('start: v ">"\nv[suffix="!"]: /[ab]*/')
    assert "capture_hidden_body_rule_id" not in str(g)
    compiled = xgr.GrammarCompiler(xgr.TokenizerInfo([]), cache_enabled=False).compile_grammar(g)
    m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
    assert not m.accept_string("ab>")
    # free text up to a trigger (a TagDispatch) could always end: no split rules added
    g = xgr.Grammar.from_lark('start: v ">"\nv[max_chars=2, suffix="!"]: TEXT\nTEXT: /(\\n|.)*/')
    assert "TagDispatch" in str(g) and "capture_hidden_body_rule_id" not in str(g)
