"""Stay tests along a looping item's byte path in vocabulary walks through Earley rows
(csrc/mask/stay.c xgr_row_stays, walk.c path_stays).

A key position of an object with optional properties and ``additionalProperties`` walks the
vocabulary through the parser: after ``"`` or ``" `` the row holds the key string's body, a
state that loops on most bytes. A token's rest used to stay only where every byte looped on
that state, so each token with a multi-byte character (``" Notícia"``) was stepped byte by
byte through the parser (Github_medium---o82646: ~80k rows a mask, 20-50 ms). The test now
follows the looping item's own byte edges, in and out of the loop (a character's continuation
states), and the walk keeps that path for the row at its depth across sorted tokens, resuming
at the bytes a token shares with the one before.

The masks must stay exact: the brute-force oracle at every character of instances with
non-ASCII keys and values (fresh grammar and cross-grammar cache, so every entry is built by
the walk), and at prefixes of hand-written grammars whose loops take only some multi-byte
characters (``é`` but not ``è``: tokens that share a lead byte and part with the kept path),
leave the loop through an escape, or stop at a budget."""

from __future__ import annotations

import json

import pytest

import xgrammar2 as xgr
from runtime_helpers import assert_prefix_masks, masks_equal_oracle, tokenizer

VOCABS = ["qwen3", "llama-3.1"]

SCHEMA = {
    "type": "object",
    "properties": {
        "etag": {"type": "string", "pattern": "^[\\w\\.:-]+$"},
        "css_class": {"type": "string", "pattern": "^[\\w\\s-]+$"},
        "aside": {"type": "boolean"},
        "text": {"type": "string", "maxLength": 12},
        "stroke": {"type": "string", "pattern": "^([\\w\\/-]|[\\w-][\\w\\/-]*[\\w-])$"},
    },
    "additionalProperties": True,
}

INSTANCES = [
    '{"etag":"a-1","aside":false,"Notícia":"Nẵng ü"}',
    '{"css_class": "x y", "text": "é\\"è", "stroke": "a/b", "è€": 1}',
]


def _check_along(compiled: xgr.CompiledGrammar, vocab: str, text: str) -> None:
    m = xgr.GrammarMatcher(compiled)
    for i, ch in enumerate(text):
        ok, why = masks_equal_oracle(m, tokenizer(vocab).vocab_size)
        assert ok, f"{vocab} after {text[:i]!r}: {why}"
        assert m.accept_string(ch), f"rejected {ch!r} after {text[:i]!r}"


@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("inline", [None, -1])
def test_additional_keys_masks_equal_bruteforce(vocab: str, inline: int | None) -> None:
    for text in INSTANCES:
        xgr.clear_cross_grammar_cache()
        kw = {} if inline is None else {"inline_max_states": inline}
        c = xgr.GrammarCompiler(tokenizer(vocab), cache_enabled=False, **kw)
        _check_along(c.compile_json_schema(json.dumps(SCHEMA)), vocab, text)


GRAMMARS = {
    # a body that takes é (c3 a9) but not è (c3 a8): a kept path through c3 must not
    # carry over to a token that parts from it after the lead byte
    "acute": r'''
root ::= "{" ws (key ws ":" ws num ws)? "}"
key ::= "\"" "id" "\"" | "\"" [a-zé ]* "\""
num ::= [0-9]+
ws ::= [ ]*
''',
    # an escape leaves the loop for a state that takes few bytes; a three-byte character
    # (€) passes through two continuation states
    "escape": r'''
root ::= "[" ws (str ws ("," ws str ws)*)? "]"
str ::= "\"" ([^"\\\x00-\x1f] | "\\" ["\\n])* "\""
ws ::= [ \n]*
''',
}

PREFIXES = {
    "acute": ("{", '{"', '{"a', '{"é', '{ "ab '),
    "escape": ("[", '["', '["\\', '["a€', '["x", "'),
}


@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("inline", [4, -1])
@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_loop_paths_equal_bruteforce(name: str, inline: int, vocab: str) -> None:
    assert_prefix_masks(GRAMMARS[name], PREFIXES[name], vocab, inline, name)
