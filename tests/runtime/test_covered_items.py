"""Items another item's entry covers (csrc/runtime/cover.c) and loop bodies whose plain entry
is skipped (matcher.c loop_callers_only): the cached mask still equals the brute-force mask at
every step, where the rows are full of predicted rules (optional-property chains, mutually
recursive rules that predict each other, rules predicted by states without byte edges), and a
long optional-property chain no longer costs one vocabulary pass per later property after
each value."""

from __future__ import annotations

import json
import random

import pytest

import xgrammar2 as xgr
from runtime_helpers import allowed, masks_equal_oracle, new_bitmask, oracle_walk, tokenizer

VOCAB = "qwen3"

# An optional-property chain as the JSON-schema converter writes it (p_k refers to the rest
# of the list in both alternatives), values from a numeric automaton split into rules with
# references (`multipleOf: 0.01`), a string with maxLength above the unrolling threshold.
CHAIN = r'''
root ::= "{" ws "}" | "{" ws f0 ws "}"
ws ::= [ \n\r\t]*
f0 ::= "\"a\"" ws ":" ws num p1 | f1
f1 ::= "\"b\"" ws ":" ws str p2 | f2
f2 ::= "\"c\"" ws ":" ws num p3 | f3
f3 ::= "\"d\"" ws ":" ws num
p1 ::= ws "," ws "\"b\"" ws ":" ws str p2 | p2
p2 ::= ws "," ws "\"c\"" ws ":" ws num p3 | p3
p3 ::= ws "," ws "\"d\"" ws ":" ws num | ""
num ::= "-"? ("0" q2 | [1-9] q3)
q2 ::= "." q5 | ""
q3 ::= "." q5 | [0-9] q3 | ""
q5 ::= [0-9] ([0-9] | "")
str ::= "\"" char{0,40} "\""
char ::= [^\x00-\x1f"\\] | "\\" ["/\\bfnrt] | "\\u" [0-9a-fA-F]{4}
'''

# Rules that predict each other in one row (a cycle of predictors), a predictor without byte
# edges (`x`'s start only refers), and a nullable rule between them.
CYCLE = r'''
root ::= a ";" | x "!"
a ::= b "x" | "a" a | "a"
b ::= a "y" | "b" | e b "z"
e ::= "" | "e"
x ::= y | "w" x
y ::= "v" y | "v" | z
z ::= "q" | ""
'''


def _walk(compiled: xgr.CompiledGrammar, seed: str, steps: int, walks: int = 3) -> None:
    oracle_walk(compiled, tokenizer(VOCAB), random.Random(seed), seed, steps, walks)


@pytest.mark.parametrize("name,src", [("chain", CHAIN), ("cycle", CYCLE)])
def test_cached_mask_equals_bruteforce_where_items_are_covered(name: str, src: str) -> None:
    # a fresh compiler: no entry of another test's grammar is reused
    c = xgr.GrammarCompiler(tokenizer(VOCAB), cache_enabled=False)
    _walk(c.compile_grammar(src), name, 14)


def test_cached_mask_equals_bruteforce_along_a_text_through_the_chain() -> None:
    """The text visits every row kind: after each value (all later properties predicted),
    inside the bounded string, and the end."""
    tok = tokenizer(VOCAB)
    c = xgr.GrammarCompiler(tok, cache_enabled=False)
    compiled = c.compile_grammar(CHAIN)
    text = '{"a": 10.25, "b": "hello \\"x\\" world", "c":-3,"d":0.5}'
    m = xgr.GrammarMatcher(compiled)
    for i, ch in enumerate(text):
        ok, why = masks_equal_oracle(m, tok.vocab_size)
        assert ok, f"at {text[:i]!r}: {why}"
        assert m.accept_string(ch), f"rejected {ch!r} after {text[:i]!r}"
    ok, why = masks_equal_oracle(m, tok.vocab_size)
    assert ok, why


def _chain_schema(n: int) -> dict:
    money = {"type": "number", "minimum": 0, "maximum": 1e9, "multipleOf": 0.01}
    return {"type": "object", "properties": {f"prop{k:03d}": money for k in range(n)},
            "additionalProperties": False}


def test_long_optional_chain_mask_after_a_value_is_exact() -> None:
    """400 optional properties: after the first value every later property's rule is
    predicted, and all but the first are covered items (skipped). Before covered items, each
    was its own first-visit entry (a vocabulary pass through the rest of the chain: ~70 ms at
    200 properties; now under 1 ms — timed in bench.json_compile, not here): the mask must
    still be exact."""
    tok = tokenizer(VOCAB)
    c = xgr.GrammarCompiler(tok, cache_enabled=False)
    schema = _chain_schema(400)
    compiled = c.compile_json_schema(json.dumps(schema))
    m = xgr.GrammarMatcher(compiled)
    assert m.accept_string('{"prop000":1')
    bm = new_bitmask(tok.vocab_size)
    m.fill_next_token_bitmask(bm)
    ok, why = masks_equal_oracle(m, tok.vocab_size)
    assert ok, why
    ids = set(allowed(bm, tok.vocab_size).tolist())
    vocab = tok.decoded_vocab
    assert any(vocab[t] == b"," for t in ids) and any(vocab[t] == b"}" for t in ids)
    assert any(vocab[t] == b"0" for t in ids) and any(vocab[t] == b"." for t in ids)
