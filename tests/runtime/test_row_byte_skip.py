"""Vocabulary passes that walk tokens through wide Earley rows (csrc/mask/walk.c, stay.h
xgr_row_bytes).

After a value in an object with many optional properties, the row predicts every later
property (`p_k ::= ws "," ws "\"k\"" ... p_{k+1} | p_{k+1}`): hundreds of items, each a
whitespace loop or a key's first byte. A first mask there walks the vocabulary through that
row, and used to step the parser over every item for each token's byte (and scan every item
again for a loop the token's rest could stay in). The walk now reads, once per row, the bytes
some item scans and the bytes some looping item stays on, and settles a token whose byte is
outside them at a bit read: it dies there (no item scans it) or cannot stay in a loop.

The masks must stay exact: the first mask at every character of valid instances (fresh
grammar and cross-grammar cache, so each state's entry is built by the walk being tested) is
compared with the brute-force oracle, for JSON objects with many optional properties of mixed
types (with and without whitespace, callee rules inlined or kept as their own automata) and
for hand-written grammars whose rows mix looping items, pops and dead bytes."""

from __future__ import annotations

import json
import random

import pytest

import xgrammar2 as xgr
from runtime_helpers import assert_prefix_masks, masks_equal_oracle, oracle_walk, tokenizer

VOCABS = ["qwen3", "llama-3.1"]


def _wide_schema(n: int = 24) -> dict:
    kinds = [
        {"type": "number"},
        {"type": "integer", "minimum": 0},
        {"type": "boolean"},
        {"type": "string"},
        {"type": "string", "maxLength": 6},
        {"type": "null"},
        {"type": "array", "items": {"type": "number"}},
        {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "string"}}},
        {"enum": ["UK", "US", "a b"]},
    ]
    props = {f"k{i:02d}{'abcdefgh'[i % 8]}": kinds[i % len(kinds)] for i in range(n)}
    return {"type": "object", "properties": props, "additionalProperties": False}


_VALUES = {
    "number": ["12.5", "0", "-3e2", "100000.0"],
    "integer": ["7", "12500", "0"],
    "boolean": ["true", "false"],
    "string": ['"UK"', '"a b,c"', '"x\\"y"'],
    "null": ["null"],
}


def _value(s: dict, rng: random.Random) -> object:
    if "enum" in s:
        return rng.choice(s["enum"])
    t = s["type"]
    if t == "array":
        return [json.loads(rng.choice(_VALUES["number"])) for _ in range(rng.randrange(3))]
    if t == "object":
        return {"x": rng.randrange(100), "y": "q r"}
    if t == "string":
        v = json.loads(rng.choice(_VALUES["string"]))
        return v[: s.get("maxLength", 99)]
    return json.loads(rng.choice(_VALUES[t]))


def _instances(schema: dict, seed: int) -> list[str]:
    """Valid instances: a subset of the properties in order, compact and with whitespace."""
    rng = random.Random(seed)
    props = schema["properties"]
    out = []
    for sep, colon in ((",", ":"), (", ", ": "), (",\n  ", " : ")):
        keys = [k for k in props if rng.random() < 0.5]
        body = sep.join(f'"{k}"{colon}{json.dumps(_value(props[k], rng))}' for k in keys)
        out.append("{" + body + "}")
    return out


def _check_along(compiled: xgr.CompiledGrammar, vocab: str, text: str, step: int = 1) -> None:
    tok = tokenizer(vocab)
    m = xgr.GrammarMatcher(compiled)
    for i in range(0, len(text), step):
        ok, why = masks_equal_oracle(m, tok.vocab_size)
        assert ok, f"{vocab} after {text[:i]!r}: {why}"
        assert m.accept_string(text[i:i + step]), f"rejected {text[i:i + step]!r} after {text[:i]!r}"
    ok, why = masks_equal_oracle(m, tok.vocab_size)
    assert ok, f"{vocab} after {text!r}: {why}"


@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("inline", [None, -1])
@pytest.mark.parametrize("seed", [0, 1])
def test_wide_object_masks_equal_bruteforce(vocab: str, inline: int | None, seed: int) -> None:
    """Every character of three instances (compact, spaced, with newlines) of a 24-property
    object of mixed value types: each value position is a first visit of a state whose row
    predicts every later property."""
    schema = json.dumps(_wide_schema())
    for text in _instances(json.loads(schema), seed):
        xgr.clear_cross_grammar_cache()
        kw = {} if inline is None else {"inline_max_states": inline}
        c = xgr.GrammarCompiler(tokenizer(vocab), cache_enabled=False, **kw)
        _check_along(c.compile_json_schema(schema), vocab, text)


# Rows that mix looping items (a string body, whitespace), items that end their rule (pops
# kept with the token), dead bytes at every depth, and references entered mid-token.
GRAMMARS = {
    # a number followed by a chain of optional keyed values: the digit state holds the
    # reference, so its whole walk runs in the parser over the chain's row
    "chain": r'''
root ::= "{" ws num p1 ws "}"
p1 ::= ws "," ws "\"ab\"" ws ":" ws num p2 | p2
p2 ::= ws "," ws "\"ac\"" ws ":" ws str p3 | p3
p3 ::= ws "," ws "\"b c\"" ws ":" ws num | ""
num ::= "-"? [0-9]+ ("." [0-9]+)?
str ::= "\"" [^"\\]* "\""
ws ::= [ \n]*
''',
    # after a digit: a string body, a space loop and a letter loop side by side, each
    # reached through a different reference; tokens stay in one loop or die past it
    "loops": r'''
root ::= [0-9]+ (a | b | c) "!"
a ::= "\"" [^"]* "\""
b ::= " "+ "x"
c ::= [a-z]+ ("." [a-z]+)*
''',
    # a nullable reference beside byte edges: the rule can end mid-token (pops) where the
    # next byte then dies in the caller
    "nullable": r'''
root ::= item ("," item)* ";"
item ::= [0-9] tail
tail ::= [0-9]* opt
opt ::= ( " " [a-c]+ )?
''',
}

PREFIXES = {
    "chain": ("{", "{1", '{1, "ab": 2', '{1,"ab":2,"ac":"q'),
    "loops": ("1", "12", '1"ab', "12  "),
    "nullable": ("1", "12", "1 ab", "1,2"),
}


@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("inline", [4, -1])
@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_first_masks_in_wide_rows_equal_bruteforce(name: str, inline: int, vocab: str) -> None:
    assert_prefix_masks(GRAMMARS[name], PREFIXES[name], vocab, inline, name)


@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_walks_in_wide_rows_equal_bruteforce(name: str, vocab: str) -> None:
    xgr.clear_cross_grammar_cache()
    c = xgr.GrammarCompiler(tokenizer(vocab), cache_enabled=False, inline_max_states=4)
    oracle_walk(c.compile_grammar(GRAMMARS[name]), tokenizer(vocab), random.Random(f"{name}-{vocab}"),
                name, 12, walks=3, prefixes=PREFIXES[name])
