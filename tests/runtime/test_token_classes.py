"""Token classes (``ExcludeToken(...)``, ``TokenTagDispatch(...)``, structural-tag
``exclude_token`` / ``any_tokens``): masks against a brute-force oracle (accept_token then
rollback, for every token) and against real upstream xgrammar 0.2.8 on the same grammar,
vocabulary and token walk."""
import random
from typing import List, Set

import pytest

import xgrammar2 as xgr2
from xgrammar2.testing import _get_masked_tokens_from_bitmask as _masked2

xgr = pytest.importorskip("xgrammar")

VOCAB = ["<s>", "</s>", "<tool>", "<code>", "<blocked>", "hello", "he", "name", "x", "y",
         "{", "}", ":", ",", "fn(", ")", "a:", "42", ""]

GRAMMARS = [
    "root ::= TokenTagDispatch(excludes=(4, 5))",
    'loop ::= TokenTagDispatch(excludes=(4, 5))\nroot ::= [a-z]+ loop Token(5) [a-z]+',
    'arg ::= [a-z]+\ncall ::= "fn(" Token(8, 9) "," arg ")"\n'
    "root ::= TokenTagDispatch((2, call), excludes=(3,))",
    'leaf ::= Token(8, 9)\ninner ::= TokenTagDispatch((3, leaf), excludes=(5,))\n'
    'tool ::= "fn(" inner ")"\nroot ::= TokenTagDispatch((2, tool), excludes=(4,))',
    'body ::= "x"\nroot ::= TokenTagDispatch((2, body), loop_after_dispatch=false, excludes=(4,))',
    'root ::= "he" ExcludeToken(4, 7) ")" | [a-z]+ ExcludeToken(0) "}"',
    'root ::= (ExcludeToken(1, 2) | "hello")+ Token(3)',
]


def _allowed(matcher, bitmask, n: int, masked) -> Set[int]:
    matcher.fill_next_token_bitmask(bitmask)
    return set(range(n)) - set(masked(bitmask, n))


def _oracle(matcher, n: int) -> Set[int]:
    out = set()
    for t in range(n):
        if matcher.accept_token(t):
            out.add(t)
            matcher.rollback(1)
    return out


@pytest.mark.parametrize("grammar", GRAMMARS)
def test_masks_match_oracle_and_upstream(grammar: str) -> None:
    from xgrammar.testing import _get_masked_tokens_from_bitmask as masked1
    from xgrammar.testing import _get_matcher_from_grammar_and_tokenizer_info as up_matcher
    from xgrammar2.testing import _get_matcher_from_grammar_and_tokenizer_info as our_matcher

    n = len(VOCAB)
    rng = random.Random(grammar)
    for walk in range(6):
        ours = our_matcher(xgr2.Grammar.from_ebnf(grammar), xgr2.TokenizerInfo(VOCAB))
        up = up_matcher(xgr.Grammar.from_ebnf(grammar), xgr.TokenizerInfo(VOCAB))
        b2 = xgr2.allocate_token_bitmask(1, n)
        b1 = xgr.allocate_token_bitmask(1, n)
        for step in range(8):
            mine = _allowed(ours, b2, n, _masked2)
            assert mine == _oracle(ours, n), (grammar, walk, step)
            assert mine == _allowed(up, b1, n, masked1), (grammar, walk, step)
            choices = sorted(mine - {1})
            if not choices:
                break
            t = rng.choice(choices)
            assert ours.accept_token(t) and up.accept_token(t)


def test_rollback_restores_class_positions() -> None:
    from xgrammar2.testing import _get_matcher_from_grammar_and_tokenizer_info as our_matcher
    g = xgr2.Grammar.from_ebnf(GRAMMARS[2])
    m = our_matcher(g, xgr2.TokenizerInfo(VOCAB))
    b = xgr2.allocate_token_bitmask(1, len(VOCAB))
    masks: List[Set[int]] = [_allowed(m, b, len(VOCAB), _masked2)]
    for t in (2, 14, 8, 13, 7):
        assert m.accept_token(t)
        masks.append(_allowed(m, b, len(VOCAB), _masked2))
    for k in range(5, 0, -1):
        m.rollback(1)
        assert _allowed(m, b, len(VOCAB), _masked2) == masks[k - 1]


def test_print_round_trip() -> None:
    g = xgr2.Grammar.from_ebnf("root ::= ExcludeToken(3, 1, 2, 1) Token(5)")
    assert "ExcludeToken(1, 2, 3)" in str(g)
    assert str(xgr2.Grammar.from_ebnf(str(g))) == str(g)
    with pytest.raises(Exception):
        xgr2.Grammar.from_ebnf("b ::= Token(2)\nroot ::= TokenTagDispatch((3, b), excludes=(3,))")


STAG_VOCAB = ["<s>", "</s>", "<tool>", "<code>", "<end>", "<think>", "<think_end>", "hello",
              "world", "{", "}", "fn(", ")", "x", "y", ",", "<bad>"]


@pytest.mark.parametrize("content", [
    {"type": "any_tokens", "exclude_tokens": [16]},
    {"type": "any_tokens", "exclude_tokens": [16], "max_tokens": 2},
    {"type": "exclude_token", "exclude_tokens": [16]},
    {"type": "sequence", "elements": [{"type": "exclude_token", "exclude_tokens": [16]},
                                      {"type": "const_string", "value": "x"}]},
])
def test_structural_tag_token_formats_match_upstream(content) -> None:
    stag = {"type": "structural_tag", "format": {
        "type": "tag", "begin": {"type": "token", "token": "<think>"}, "content": content,
        "end": {"type": "token", "token": "<think_end>"}}}
    n = len(STAG_VOCAB)
    ours = xgr2.GrammarMatcher(
        xgr2.GrammarCompiler(xgr2.TokenizerInfo(STAG_VOCAB)).compile_structural_tag(stag))
    up = xgr.GrammarMatcher(
        xgr.GrammarCompiler(xgr.TokenizerInfo(STAG_VOCAB)).compile_structural_tag(stag))
    from xgrammar.testing import _get_masked_tokens_from_bitmask as masked1
    b2, b1 = xgr2.allocate_token_bitmask(1, n), xgr.allocate_token_bitmask(1, n)
    rng = random.Random(str(content))
    for step in range(7):
        mine = _allowed(ours, b2, n, _masked2)
        assert mine == _allowed(up, b1, n, masked1), (content, step)
        assert mine == _oracle(ours, n)
        choices = sorted(mine - {1})
        if not choices:
            break
        t = rng.choice(choices)
        assert ours.accept_token(t) and up.accept_token(t)
