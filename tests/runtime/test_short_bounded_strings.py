"""Short bounded strings (JSON `maxLength` <= 16, around the unrolling threshold) inside
objects with many optional properties: the cached mask equals the brute-force mask (every
token run through the parser) at every character position, where the matcher remembers the
exact verdicts of the tokens that close the string and go on in the object (matcher.c
verdict memo: kept across fills whose rows differ only by the repetition counter, read only
for tokens shorter than the counter's room) and the verdicts of token tails from a row seen
before (the row after the closing quote is the same whatever the string held).

Each walk types the string one piece at a time (ASCII, escapes, multibyte UTF-8), so
successive fills share the memo up to and past the bounds, then closes the string and
types the next property; another walk rolls back inside the string and goes on with other
characters (the memo must not outlive the rows it was made for)."""

from __future__ import annotations

import json

import pytest

import xgrammar2 as xgr
from runtime_helpers import masks_equal_oracle, one_char_tokens, tokenizer

VOCABS = ["qwen3", "llama-2"]


def _schema(max_len: int, min_len: int = 0, n_props: int = 40) -> str:
    props = {f"p{i:02d}": {"type": "integer"} for i in range(n_props)}
    s = {"type": "string", "maxLength": max_len}
    if min_len:
        s["minLength"] = min_len
    # the string sits in the middle of the optional properties: its closing tokens go on
    # into a row that predicts every later property
    keys = list(props)
    mid = n_props // 2
    ordered = {k: props[k] for k in keys[:mid]}
    ordered["s"] = s
    ordered.update({k: props[k] for k in keys[mid:]})
    return json.dumps({"type": "object", "properties": ordered, "additionalProperties": False})


def _compile(vocab: str, schema: str) -> xgr.CompiledGrammar:
    # a fresh compiler: no mask entry of another test's grammar is reused
    c = xgr.GrammarCompiler(tokenizer(vocab), cache_enabled=False)
    return c.compile_json_schema(schema, any_whitespace=False, separators=(",", ":"))


def _check(m: xgr.GrammarMatcher, vocab: str, where: str) -> None:
    ok, why = masks_equal_oracle(m, tokenizer(vocab).vocab_size)
    assert ok, f"{vocab} {where}: {why}"


def _type(m: xgr.GrammarMatcher, vocab: str, pieces: list[str], text: str) -> str:
    for p in pieces:
        assert m.accept_string(p), f"{text!r} + {p!r} rejected"
        text += p
        _check(m, vocab, f"after {text!r}")
    return text


# string contents typed one piece at a time (each piece one JSON character)
PLAIN = list("abcdefghijklmnopq")
MIXED = ["a", "\\n", "é", "b", "\\u00e9", "日", "\\\"", "c", "😀", "d", "\\\\", "e", "f", "g", "h", "i", "j"]


@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("max_len", [1, 2, 3, 5, 8, 12, 15, 16])
def test_string_filled_to_its_bound(vocab: str, max_len: int) -> None:
    m = xgr.GrammarMatcher(_compile(vocab, _schema(max_len)))
    text = _type(m, vocab, ['{"p00":1,"p05":2,"s":"'], "")
    pieces = PLAIN[:max_len] if max_len % 2 else MIXED[:max_len]
    text = _type(m, vocab, pieces, text)
    _type(m, vocab, ['"', ',"p', '25":3', "}"], text)


@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("min_len,max_len", [(1, 1), (2, 4), (3, 16), (8, 10), (15, 16), (16, 16)])
def test_string_with_min_length(vocab: str, min_len: int, max_len: int) -> None:
    m = xgr.GrammarMatcher(_compile(vocab, _schema(max_len, min_len)))
    text = _type(m, vocab, ['{"s":"'], "")
    text = _type(m, vocab, MIXED[:max_len], text)
    _type(m, vocab, ['"'], text)


@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("max_len", [4, 16])
def test_rollback_inside_the_string(vocab: str, max_len: int) -> None:
    tok = tokenizer(vocab)
    m = xgr.GrammarMatcher(_compile(vocab, _schema(max_len)), max_rollback_tokens=64)
    assert m.accept_string('{"p03":7,"s":"')
    ids = tok.decoded_vocab
    # accept single-character tokens so that rollback counts match characters
    one = one_char_tokens(vocab)
    text = '{"p03":7,"s":"'
    for ch in "xyz"[: max_len - 1]:
        assert m.accept_token(one[ch])
        text += ch
        _check(m, vocab, f"after {text!r}")
    m.rollback(2 if max_len > 2 else 1)
    text = text[: -(2 if max_len > 2 else 1)]
    _check(m, vocab, f"after rollback to {text!r}")
    for ch in "QRSTUVWXYZ"[: max_len - len(text) + len('{"p03":7,"s":"')]:
        assert m.accept_token(one[ch]), (text, ch)
        text += ch
        _check(m, vocab, f"after {text!r}")
    _type(m, vocab, ['",'], text)


@pytest.mark.parametrize("vocab", VOCABS)
def test_several_strings_in_one_object(vocab: str) -> None:
    """Several short strings in one wide object: the rows after their closing quotes differ
    (each predicts the properties after its own), so memoised tails must not leak."""
    props = {f"p{i:02d}": {"type": "integer"} for i in range(30)}
    props.update({"a": {"type": "string", "maxLength": 3}, "b": {"type": "string", "maxLength": 6, "minLength": 2}})
    props.update({f"q{i:02d}": {"type": "boolean"} for i in range(30)})
    props["c"] = {"type": "string", "maxLength": 16}
    schema = json.dumps({"type": "object", "properties": props, "required": ["c"]})
    m = xgr.GrammarMatcher(_compile(vocab, schema))
    text = _type(m, vocab, ['{"a":"', "x", "y", '"', ',"b":"', "u", "v", "w", '"'], "")
    text = _type(m, vocab, [',"q03":true', ',"c":"'] + PLAIN[:16] + ['"'], text)


@pytest.mark.parametrize("vocab", VOCABS)
def test_rollback_into_another_string_at_the_same_rows(vocab: str) -> None:
    """Two properties share one object definition (every rule its own automaton, so the
    string's rows hold the same items under both); after a rollback the other property's
    string sits at the same parser rows with the same items, but an older row they point to
    differs (after `a` the required `b` must follow, after `b` the object may close): what
    the matcher remembered about the first string's closing tokens (`"}}`) must be
    forgotten. Fails when rollback keeps the memos."""
    inner = {"type": "object", "properties": {"s": {"type": "string", "maxLength": 8}}}
    inner["properties"].update({f"p{i:02d}": {"type": "integer"} for i in range(30)})
    schema = json.dumps({"$defs": {"Inner": inner}, "type": "object",
                         "properties": {"a": {"$ref": "#/$defs/Inner"}, "b": {"$ref": "#/$defs/Inner"}},
                         "required": ["b"]})
    c = xgr.GrammarCompiler(tokenizer(vocab), cache_enabled=False, inline_max_states=-1)
    g = c.compile_json_schema(schema, any_whitespace=False, separators=(",", ":"))
    one = one_char_tokens(vocab)
    m = xgr.GrammarMatcher(g, max_rollback_tokens=64)
    for ch in '{"':
        assert m.accept_token(one[ch])
    for text in ['a":{"s":"xyz', 'b":{"s":"xyz']:
        for ch in text:
            assert m.accept_token(one[ch]), (text, ch)
            if ch in "xyz":
                _check(m, vocab, f"after {text!r} up to {ch!r}")
        m.rollback(len(text))  # back to `{"`
