"""Tail memo rows compare a repetition's counter as equal at every count at or above the
minimum and more than XGR_TAIL_MAX_SUFFIX (24) below the maximum (tail_memo.c tail_count):
inside a long bounded string the rows after each byte of a token then compare equal, so a
string's tokens are walked once, not once per fill. This is exact only because a kept tail
is at most 24 bytes: at a count within 24 of the bound (or below the minimum) the counter
must stay in the row. Strings with `maxLength` around that room and `minLength` above it are
typed one character per token, so that every fill sits at a new count and reads the tails
kept at earlier counts, and the mask is compared with the brute-force mask (every token run
through the parser) at every character, across the bound, then past the closing quote into a
row that predicts every later property. Fails when the counter is dropped at any count at or
above the minimum (no room test), or below the minimum."""

from __future__ import annotations

import pytest

import xgrammar2 as xgr
from runtime_helpers import tokenizer, type_string_checked, wide_object_schema

VOCABS = ["qwen3", "llama-2"]


@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("min_len,max_len", [(0, 26), (0, 30), (0, 40), (28, 40), (30, 60)])
def test_long_string_at_every_count(vocab: str, min_len: int, max_len: int) -> None:
    c = xgr.GrammarCompiler(tokenizer(vocab), cache_enabled=False)
    g = c.compile_json_schema(wide_object_schema(max_len, min_len, 30), any_whitespace=False, separators=(",", ":"))
    m = xgr.GrammarMatcher(g)
    type_string_checked(m, vocab, max_len, ['"', ',"q0', '2":true', "}"])
