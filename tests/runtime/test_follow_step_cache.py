"""Follow checks keep each rule's first step (csrc/mask/follow.c xgr_follow_step): the closed
state set after a suffix's first byte and the bytes that can step on from it, kept by the
thread's scratch for the last rule asked. Sharpening a bounded string's loop entry asks
thousands of suffixes of one repetition rule in a row, and the strings of one grammar have
different repetition rules (one per bound) whose follow differs by context: `,` after a
middle property, `]` / `,` inside an array, `}` after an object's last property. Strings of
distinct `maxLength` in each of those contexts are typed one character per token and the mask
is compared with the brute-force oracle at every character and after each closing quote.
A cache kept across rules (keyed by the byte alone), or a second-byte set taken from another
rule, rejects the closing tokens of the later contexts (`"}`, `"]`, `"},`) and fails here."""

from __future__ import annotations

import json

import pytest

import xgrammar2 as xgr
from runtime_helpers import masks_equal_oracle, one_char_tokens, tokenizer

VOCABS = ["qwen3", "llama-2"]


def _s(n: int) -> dict:
    return {"type": "string", "maxLength": n}


SCHEMA = {
    "type": "object",
    "properties": {
        "a": _s(7),
        "b": {"type": "array", "items": _s(9)},
        "c": {"type": "object", "properties": {"d": _s(11), "e": _s(5)}, "required": ["d", "e"],
              "additionalProperties": False},
        "f": _s(13),
    },
    "required": ["a", "b", "c", "f"],
    "additionalProperties": False,
}

# (text before the string's first character, its characters); the pieces are typed in order
PIECES = [
    ('{"a":"', "abcdef"),
    ('","b":["', "xyz"),
    ('","', "pq"),
    ('"],"c":{"d":"', "klmnop"),
    ('","e":"', "uv"),
    ('"},"f":"', "ghijk"),
]


def _check(m: xgr.GrammarMatcher, vocab: str, where: str) -> None:
    ok, why = masks_equal_oracle(m, tokenizer(vocab).vocab_size)
    assert ok, f"{vocab} {where}: {why}"


@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("order", ["forward", "last_first"])
def test_strings_in_every_context(vocab: str, order: str) -> None:
    c = xgr.GrammarCompiler(tokenizer(vocab), cache_enabled=False)
    schema = json.dumps(SCHEMA)
    if order == "last_first":  # the last property's string is sharpened first
        g = c.compile_json_schema(schema, any_whitespace=False, separators=(",", ":"))
        m = xgr.GrammarMatcher(g)
        text = '{"a":"","b":[],"c":{"d":"","e":""},"f":"'
        assert m.accept_string(text)
        _check(m, vocab, f"after {text!r}")
    g = c.compile_json_schema(schema, any_whitespace=False, separators=(",", ":"))
    m = xgr.GrammarMatcher(g)
    one = one_char_tokens(vocab)
    text = ""
    for before, chars in PIECES:
        assert m.accept_string(before), (text, before)
        text += before
        _check(m, vocab, f"after {text[-16:]!r}")
        for ch in chars:
            assert m.accept_token(one[ch]), (text, ch)
            text += ch
            _check(m, vocab, f"after {text[-16:]!r}")
    assert m.accept_string('"}'), text
    _check(m, vocab, "at the end")
