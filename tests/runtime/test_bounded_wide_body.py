"""Bounded repetitions of a wide body (`char{0,255}`, `[^;]{22}`, short strings
`char{0,15}`): the cached mask equals the brute-force mask (every token run through the
parser) under bounded and unbounded callers, where one row holds the repetition at several
counts (an ambiguous prefix: `[a-z]+ [^;]{22}` after `abc...!` started the repetition after
each letter), and on JSON strings with maxLength / minLength around the unrolling threshold
(16) nested in arrays and objects (an outer bounded caller: `maxItems`)."""

from __future__ import annotations

import random

import pytest

import xgrammar2 as xgr
from runtime_helpers import masks_equal_oracle, oracle_walk, tokenizer

VOCAB = "qwen3"

CHAR = r'''char ::= [^\x00-\x1f"\\] | "\\" ["/\\bfnrt] | "\\u" [0-9a-fA-F]{4}'''


def _fresh() -> xgr.GrammarCompiler:
    # no entry of another test's grammar is reused
    return xgr.GrammarCompiler(tokenizer(VOCAB), cache_enabled=False)


# (grammar, prefixes accepted one after the other; the mask is compared after each)
AMBIGUOUS = [
    # The repetition may start after any letter: after "!" the row holds it at counts 1..16
    # under one caller state, so one cache slot serves callers with 6..21 repetitions left.
    # (A slot kept the fewest repetitions left of its callers and its loop entry rejected,
    # without an exact check, tokens only those callers cannot take: 43k tokens of qwen3.)
    (r'root ::= [a-z]+ [^;]{22} ";"', ["abcdefgh", "ijklmnop", "!", "q", "rstu"]),
    (r'root ::= [a-z]+ [^;]{22}', ["abcdefgh", "ijklmnop", "!", "q"]),
    (r'root ::= [a-z]+ [^;]{0,22} ";"', ["abcdefgh", "ijklmnop", "!", "q"]),
    (r'root ::= [a-z]+ [^;]{3,30} [;.]', ["abcdefghijklmnopqrst", "!", "qq"]),
    # the same through a JSON string body (a loop table with escapes)
    ('root ::= "\\"" [a-z]* char{0,40} "\\""\n' + CHAR, ['"', "abcdefghij", "!", "k", "lmn"]),
    ('root ::= "\\"" [a-z]* char{0,40} "\\""\n' + CHAR, ['"', "abcdefghij", "\\n", "k"]),
    # short bounds (at and below the unrolling threshold) with an ambiguous prefix
    ('root ::= "\\"" [a-z]* char{2,16} "\\""\n' + CHAR, ['"', "abcdefghij", "!", "k", "lm"]),
    ('root ::= "\\"" [a-z]* char{0,15} "\\""\n' + CHAR, ['"', "abcdefghij", "!", "k", "lm"]),
    # unbounded caller of the same body
    ('root ::= "\\"" [a-z]* char* "\\""\n' + CHAR, ['"', "abcdefghij", "!", "k"]),
]


def _masks_equal_oracle_along(src: str, prefixes: list[str]) -> None:
    """The mask at the start and after each prefix (accepted one after the other) equals the
    brute-force mask."""
    tok = tokenizer(VOCAB)
    m = xgr.GrammarMatcher(_fresh().compile_grammar(src))
    ok, why = masks_equal_oracle(m, tok.vocab_size)
    assert ok, f"start: {why}"
    text = ""
    for s in prefixes:
        assert m.accept_string(s), f"{text!r} + {s!r} rejected"
        text += s
        ok, why = masks_equal_oracle(m, tok.vocab_size)
        assert ok, f"after {text!r}: {why}"


@pytest.mark.parametrize("src,prefixes", AMBIGUOUS, ids=[f"g{i}" for i in range(len(AMBIGUOUS))])
def test_one_slot_under_callers_at_several_counts(src: str, prefixes: list[str]) -> None:
    _masks_equal_oracle_along(src, prefixes)


# JSON-schema strings: bounds at, below and above the unrolling threshold, under an
# unbounded caller (an object's value), a bounded one (array with maxItems) and in a row
# with a sibling string of another bound.
SCHEMAS = [
    {"type": "string", "maxLength": 15},
    {"type": "string", "minLength": 2, "maxLength": 16},
    {"type": "string", "maxLength": 255},
    {"type": "string", "minLength": 3, "maxLength": 3},
    {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 4},
    {"type": "array", "items": {"type": "string", "maxLength": 30}, "minItems": 1, "maxItems": 3},
    {
        "type": "object",
        "properties": {
            "zip": {"type": "string", "maxLength": 15},
            "app_id": {"type": "string", "maxLength": 255},
            "regime": {"type": "string", "minLength": 2, "maxLength": 16},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3},
        },
        "additionalProperties": False,
    },
    {"anyOf": [{"type": "string", "maxLength": 4}, {"type": "string", "minLength": 6, "maxLength": 12}]},
]


def _walk(compiled: xgr.CompiledGrammar, seed: str, steps: int, walks: int) -> None:
    oracle_walk(compiled, tokenizer(VOCAB), random.Random(seed), seed, steps, walks)


@pytest.mark.parametrize("i", range(len(SCHEMAS)))
def test_json_strings_with_length_bounds_random_walks(i: int) -> None:
    import json

    schema = json.dumps(SCHEMAS[i])
    compiled = _fresh().compile_json_schema(schema, any_whitespace=False)
    _walk(compiled, f"schema{i}", 24, 3)


@pytest.mark.parametrize(
    "schema,texts",
    [
        ({"type": "string", "maxLength": 15}, ['"', "1000", "1", "x", "y", "zzzz", "abc", "d"]),
        ({"type": "string", "minLength": 2, "maxLength": 16}, ['"', "U", "K", "abcdefghijkl", "mn"]),
        ({"type": "string", "maxLength": 255}, ['"', "my", "app", "\\u00e9", "x" * 40]),
        # a counter rule (bound above the unrolling threshold) walked up to its bound: the
        # counter trim drops long tokens, and those that close the string in time (`ab",`)
        # go to the exact check (the sharpened loop entry's unit_open)
        ({"type": "string", "maxLength": 20}, ['"', "abcdefgh", "ijklmnop", "q", "r", "s", "t"]),
        (
            {"type": "array", "items": {"type": "string", "maxLength": 18}, "maxItems": 3},
            ['["', "abcdefghijklmn", "o", "p", '", "', "abcdefghijklmnop", "q", "r", '"'],
        ),
        (
            {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 4},
            ['["', "ab", "c", '", "', "abcde", '", "', '"'],
        ),
    ],
)
def test_json_strings_along_a_text(schema: dict, texts: list[str]) -> None:
    """Every step up to and at the bound, one character or escape at a time and in blocks."""
    import json

    tok = tokenizer(VOCAB)
    m = xgr.GrammarMatcher(_fresh().compile_json_schema(json.dumps(schema), any_whitespace=False))
    done = ""
    for s in texts:
        assert m.accept_string(s), f"{done!r} + {s!r}"
        done += s
        ok, why = masks_equal_oracle(m, tok.vocab_size)
        assert ok, f"after {done!r}: {why}"


# The repetition's follow can take its body's bytes: a token running more repetitions than
# are left may leave the repetition at the limit and go on in the caller ("abcdefgh" with 2
# left: "ab" then "cdefgh" after it), so the counter trim sends it to the exact check rather
# than dropping it. Near the bound most of the vocabulary runs too many repetitions, and
# the trim builds the dropped tokens 32 at a time (matcher.c drop_units); both ways agree
# with the brute-force mask at every count left.
LEAVE_EARLY = [
    (r'root ::= "<" [a-z]{0,40} [a-z0-9]* ">"', "<"),
    (r'root ::= "<" [a-z ]{3,40} [a-z]+ ">"', "<"),
    ('root ::= "\\"" char{0,40} [a-z]* "\\""\n' + CHAR, '"'),
]


@pytest.mark.parametrize("src,opener", LEAVE_EARLY, ids=[f"g{i}" for i in range(len(LEAVE_EARLY))])
def test_tokens_that_may_leave_the_repetition_at_its_bound_are_checked_not_dropped(
    src: str, opener: str
) -> None:
    tok = tokenizer(VOCAB)
    m = xgr.GrammarMatcher(_fresh().compile_grammar(src))
    assert m.accept_string(opener)
    text = "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopq"
    for k in range(len(text)):
        assert m.accept_string(text[k]), f"{text[:k + 1]!r} rejected"
        if k >= 30:
            ok, why = masks_equal_oracle(m, tok.vocab_size)
            assert ok, f"after {k + 1} letters: {why}"


# A repetition whose follow begins with one of its body's bytes and goes on with bytes its
# body has not ("e" then [a-z]*): a token may leave the repetition at an earlier exit and
# not at its last one ("hello" leaves [a-m] before "ello", not before "o"). The sharpening
# of a loop entry tests only each token's last exit where no byte that may begin the follow
# can begin a repetition (a string body before its closing quote); here every exit counts.
FOLLOW_TAKES_A_BODY_BYTE = [
    (r'root ::= "<" [a-m]{0,40} "e" [a-z]* ">"', ["<", "abc", "d"]),
    (r'root ::= "<" [a-m]{0,8} "e" [a-z]* ">"', ["<", "abc", "d"]),
    (r'root ::= "<" [a-m]{2,30} "e" [a-z]* ">" [a-m]{0,30} "e"', ["<ab", "cehk>", "ab"]),
]


@pytest.mark.parametrize("src,prefixes", FOLLOW_TAKES_A_BODY_BYTE,
                         ids=[f"g{i}" for i in range(len(FOLLOW_TAKES_A_BODY_BYTE))])
def test_tokens_leaving_before_their_last_exit_are_kept_where_the_follow_begins_with_a_body_byte(
    src: str, prefixes: list[str]
) -> None:
    _masks_equal_oracle_along(src, prefixes)
