"""The key of an object with named properties and additional properties: a trie of the
named keys whose every node also reads `kchar_x key_rest` (any other character, then the
rest of the key) or the closing quote (json_schema/emit.py key_not_in). With eight or more
alternatives at its top it used to be built by the direct trie builder (csrc/lower/
trie_alt.c), which keeps references as references; since those two rules start with almost
any byte, the first mask at a key's start walked the vocabulary into `kchar_x` and again
under its caller (20 ms on JSONSchemaStore typings). It now takes the general path, which
inlines them (trie_alt.c inlines_wide). The masks at key positions and along walks from
there equal the brute-force oracle, and the language is the one without inlining."""

from __future__ import annotations

import json
import random

import pytest

import xgrammar2 as xgr
from runtime_helpers import masks_equal_oracle, oracle_walk, tokenizer

# typings' shape: named keys with ten distinct first letters, any other key allowed
NAMES = ["main", "browser", "version", "homepage", "resolution", "files", "global", "name",
         "dependencies", "devDependencies", "postmessage"]
SCHEMA = json.dumps({"type": "object", "properties": {k: {"type": "string"} for k in NAMES},
                     "additionalProperties": True})

# key positions: a key's start (first key, after a named one, after an additional one),
# inside a named key, past its end, inside an escape, inside an additional key
PREFIXES = ['{"', '{"main": "a", "', '{"x": 1, "', '{"ma', '{"main', '{"de', '{"devDependencies": "x", "',
            '{"\\', '{"\\u00', '{"x\\u0061', '{"x', '{"br\\u00e9', '{"versions": 2, "v']


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("vocab", ["qwen3", "llama-2"])
def test_key_masks_equal_oracle(vocab: str, strict: bool) -> None:
    tok = tokenizer(vocab)
    compiled = xgr.GrammarCompiler(tok, cache_enabled=False).compile_json_schema(SCHEMA, strict_mode=strict)
    for p in PREFIXES:
        m = xgr.GrammarMatcher(compiled)
        assert m.accept_string(p), p
        ok, why = masks_equal_oracle(m, tok.vocab_size)
        assert ok, f"{vocab} strict={strict} after {p!r}: {why}"
    rng = random.Random(f"keys/{vocab}/{strict}")
    oracle_walk(compiled, tok, rng, f"keys/{vocab}", 8, 3, ('{"', '{"main": "a", "', '{"d'))


SAMPLES = ['{"main":"a"}', '{"mainx":1}', '{"mai":[1]}', '{"m\\u0061in":null}', '{"":{}}', '{"main":1}',
           '{"br\\u00e9":"x"}', '{"\\ud83d\\ude00k":true}', '{"version":"1","versions":2}', '{"n":3,"name":"n"}',
           '{"devDependencies":{"a":"b"},"devDependencie":1}', '{"dependencies":{"a":1}}', '{"a\\\\b":5}',
           '{"\\"q":4}', '{"files":["a"],"filesx":{}}', '{"x":1,"main":"m"}']


def test_language_unchanged_without_inlining() -> None:
    """Every sample, its cuts and one-character edits are accepted as without inlining
    (``inline_max_states=-1``: every rule its own automaton, the references kept)."""
    tok = tokenizer("qwen3")
    src = xgr.Grammar.from_json_schema(SCHEMA)
    on = xgr.GrammarCompiler(tok, cache_enabled=False).compile_grammar(src)
    off = xgr.GrammarCompiler(tok, cache_enabled=False, inline_max_states=-1).compile_grammar(src)
    rng = random.Random("keys")
    texts = list(SAMPLES)
    for t in SAMPLES:
        for _ in range(8):
            i = rng.randrange(len(t) + 1)
            texts.append(t[:i])
            texts.append(t[:i] + rng.choice('"\\ma{}:,x1é') + t[i:])
    n_accepted = 0
    for t in texts:
        a, b = xgr.GrammarMatcher(on), xgr.GrammarMatcher(off)
        ra, rb = a.accept_string(t), b.accept_string(t)
        assert ra == rb, f"{t!r} accepted={ra} without inlining={rb}"
        if ra:
            n_accepted += 1
            assert a.is_completed() == b.is_completed(), f"{t!r} completion differs"
    assert 0 < n_accepted < len(texts)
    # named keys keep their value types; additional keys take any value
    for t, want in [('{"main":1}', False), ('{"mainx":1}', True), ('{"main":"a","main":"b"}', False)]:
        m = xgr.GrammarMatcher(on)
        assert (m.accept_string(t) and m.is_completed()) == want, t


# A trie node's first byte of a multi-byte character: a token that starts with such a
# character and stays in the key's loop is accepted with a word of tokens at a time when
# every character with that lead byte ends in one state that keeps the rest of the token
# (stay.c xgr_stay_first). Characters of one lead byte that end in different
# states (U+5000-57FF / U+5800-5FFF: lead byte E5 either way; U+4F60 and the rest of E4)
# or that die (U+5800-5FFF in the last one) must leave their tokens to the walk.
LEAD_BYTE_SPLITS = [
    'root ::= "<" ([\\u5000-\\u57ff] [\\u4e00-\\u9fff]* | [\\u5800-\\u5fff] [0-9]*) ">"',
    'root ::= "<" [\\u5000-\\u57ff] [\\u4e00-\\u9fff]* ">"',
    'root ::= "<" ("a" "b"* | [^a<>] [^<>]*) ">"',
    'root ::= "<" ("\\u4f60" "x"* | [^\\u4f60<>] [^<>]*) ">"',
    'root ::= "<" ("a" "b"* | [^a<>\\u5800-\\u5fff] [^<>]*) ">"',
]


@pytest.mark.parametrize("src", LEAD_BYTE_SPLITS, ids=[f"g{i}" for i in range(len(LEAD_BYTE_SPLITS))])
def test_tokens_starting_with_a_character_that_ends_in_one_state_equal_oracle(src: str) -> None:
    tok = tokenizer("qwen3")
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(tok, cache_enabled=False).compile_grammar(src))
    assert m.accept_string("<")
    ok, why = masks_equal_oracle(m, tok.vocab_size)
    assert ok, why
