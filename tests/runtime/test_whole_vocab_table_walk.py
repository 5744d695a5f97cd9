"""A new state's context-free entry is one walk of the whole vocabulary through its rule's
automaton (walk.c). Two things changed how that walk runs, and neither may change a mask:

- a table walk (a flat rule, a bounded string's loop) runs in its own tight loop
  (``flat_vocab_walk``), which must take the same steps as the general one;
- a rule of more than 256 states (a pattern's length product: a semver pattern under
  ``maxLength: 32`` lowers to ~1,460 states with every character's ``\\uXXXX`` spellings)
  now gets a byte-class table for such a walk instead of scanning each state's edges,
  and with the table the stay test at character boundaries.

The cached mask is compared with the brute-force mask (every token through the parser) at
every step of seeded walks that start inside those strings, on byte-level BPE (Qwen3,
gpt-oss) and SentencePiece byte fallback (Llama-2) vocabularies."""

from __future__ import annotations

import json
import random

import pytest

from runtime_helpers import compiler, oracle_walk, tokenizer

VOCABS = ["qwen3", "gpt-oss", "llama-2"]

# Snowplow sp_345's processor version (JSONSchemaBench): a pattern ending in ".*" under a
# length bound: the converter's product automaton, one large rule.
SEMVER = {"type": "string", "pattern": "^(\\d+\\.\\d+\\.\\d+.*)$", "maxLength": 32}


def _schema() -> str:
    return json.dumps({
        "type": "object",
        "properties": {
            "version": SEMVER,
            "name": {"type": "string", "maxLength": 40},
            "tag": {"type": "string", "pattern": "^[a-z][a-z0-9_-]*$", "maxLength": 20},
        },
        "required": ["version", "name", "tag"],
        "additionalProperties": False,
    })


# Prefixes that put the first fill inside each string (a fresh compile per vocabulary, so
# every walk's first mask builds its entries) and at its bounds.
PREFIXES = (
    '{"version": "3.1.1',
    '{"version": "10.20.30-rc.1+build.',
    '{"version": "1.2.3abcdefghijklmnopqrstuvwxy',  # 29 characters: 3 left of 32
    '{"version": "1.2.3", "name": "',
    '{"version": "1.2.3", "name": "naïve café ',
    '{"version": "1.2.3", "name": "\\u00e9t\\u00e9 and',
    '{"version": "1.2.3", "name": "x", "tag": "a',
)


@pytest.mark.parametrize("vocab", VOCABS)
def test_entries_of_large_and_table_rules_equal_bruteforce(vocab: str) -> None:
    tok = tokenizer(vocab)
    compiled = compiler(vocab).compile_json_schema(_schema())
    rng = random.Random(f"whole-vocab-walk/{vocab}")
    oracle_walk(compiled, tok, rng, f"semver/{vocab}", steps=10, walks=len(PREFIXES), prefixes=PREFIXES)


@pytest.mark.parametrize("vocab", ["qwen3", "llama-2"])
def test_bounded_string_loop_entry_equals_bruteforce_near_its_bound(vocab: str) -> None:
    """A bounded string's loop entry (the units walk) decides how many characters each token
    runs; near the bound those counts decide the mask."""
    tok = tokenizer(vocab)
    schema = json.dumps({"type": "object", "properties": {"s": {"type": "string", "maxLength": 24}},
                         "required": ["s"], "additionalProperties": False})
    compiled = compiler(vocab).compile_json_schema(schema, any_whitespace=False)
    prefixes = tuple('{"s": "' + "ab" * k for k in (0, 5, 9, 11, 12))
    rng = random.Random(f"loop-units/{vocab}")
    oracle_walk(compiled, tok, rng, f"loop/{vocab}", steps=8, walks=len(prefixes), prefixes=prefixes)


# Rules without references (flat) whose states loop: their entries come from the table walk
# with the stay test (a token whose bytes all keep the state is accepted at the first
# character boundary where that is known), including multi-byte characters.
FLAT = r'''root ::= "<" [^<>\n]* ">" | "[" [a-z ]* "]" ("." | "!")? | "{" [\u00e0-\u00ff a-z]+ "}"'''


@pytest.mark.parametrize("vocab", VOCABS)
def test_flat_rule_entries_with_stays_equal_bruteforce(vocab: str) -> None:
    tok = tokenizer(vocab)
    compiled = compiler(vocab).compile_grammar(FLAT)
    prefixes = ("", "<", "<abc d", "[", "[ab c", "{", "{éa")
    rng = random.Random(f"flat-stay/{vocab}")
    oracle_walk(compiled, tok, rng, f"flat/{vocab}", steps=8, walks=len(prefixes), prefixes=prefixes)
