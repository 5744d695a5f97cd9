"""The cached mask equals the brute-force mask (every token run through the parser) at every
step of seeded constrained walks, on real vocabularies of every kind (byte-level BPE:
Llama-3.1, Qwen3, gpt-oss; SentencePiece byte fallback: Llama-2)."""

from __future__ import annotations

import os
import random

import pytest

import xgrammar2 as xgr
from runtime_helpers import (
    allowed,
    compiler,
    masks_equal_oracle,
    new_bitmask,
    pick_token,
    shared_data,
    tokenizer,
)

VOCABS = ["llama-3.1", "qwen3", "gpt-oss", "llama-2"]

GRAMMARS = {
    "builtin_json": None,
    "schema_like": r'''
root ::= "{" ws "\"name\"" ws ":" ws string ws "," ws "\"age\"" ws ":" ws int ws ("," ws "\"tags\"" ws ":" ws tags ws)? "}"
string ::= "\"" ([^"\\\x00-\x1f] | "\\" ["\\/bfnrt] | "\\u" [0-9a-fA-F]{4}){0,40} "\""
int ::= "-"? ("0" | [1-9] [0-9]{0,17})
tags ::= "[" ws (string (ws "," ws string){0,30})? ws "]"
ws ::= [ \n\t]{0,4}
''',
    "repetition": r'''root ::= "\"" [a-z ]{5,300} "\"" | "[" ("ab" | "c"){20,2000} "]"''',
    # JSON Schema's maxLength / minLength: a unit repetition of `char` (one character or
    # escape per repetition) whose mask is one walk of the char automaton as a loop, with
    # the repetitions left applied per fill; bounds just above the unrolling threshold
    # (16) so the walks reach them.
    "bounded_strings": r'''
root ::= "{" "\"a\":" s17 "," "\"b\":" s18to22 "," "\"c\":" s20 "}"
s17 ::= "\"" char{0,17} "\""
s18to22 ::= "\"" char{18,22} "\""
s20 ::= "\"" char{0,20} "\"" | "null"
char ::= [^\x00-\x1f"\\] | "\\" ["/\\bfnrt] | "\\u" [0-9a-fA-F]{4}
''',
    # A bounded repetition that a token may leave for what follows it: letters past the
    # bound go on in `tail` (not yet in the row while the minimum is unmet), so dropping a
    # token that runs too many repetitions needs the exact check.
    "bounded_then_tail": r'''root ::= "<" [a-z]{17,20} tail ">" "\n" | "[" [a-z ]{20,30} "]"
tail ::= [a-z0-9]*''',
    "unicode": r'''root ::= ([\u4e00-\u9fff] | [\u00c0-\u00ff] | [\U0001F600-\U0001F64F] | " ")+ "."''',
    "recursive": r'''
root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ | "(" expr ")" | "-" factor
''',
}


def grammar(name: str, vocab: str) -> xgr.CompiledGrammar:
    c = compiler(vocab)
    src = GRAMMARS[name]
    return c.compile_builtin_json_grammar() if src is None else c.compile_grammar(src)


@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("name", list(GRAMMARS))
def test_cached_mask_equals_bruteforce_along_walks(name: str, vocab: str) -> None:
    tok = tokenizer(vocab)
    compiled = grammar(name, vocab)
    rng = random.Random(f"{name}/{vocab}")
    bm = new_bitmask(tok.vocab_size)
    for walk in range(2):
        m = xgr.GrammarMatcher(compiled)
        for step in range(12):
            ok, why = masks_equal_oracle(m, tok.vocab_size)
            assert ok, f"{name}/{vocab} walk {walk} step {step}: {why}"
            if m.is_terminated():
                break
            m.fill_next_token_bitmask(bm)
            ids = allowed(bm, tok.vocab_size)
            assert len(ids), f"{name}/{vocab}: dead end at step {step}"
            t = pick_token(rng, ids, tok)
            assert m.accept_token(t), f"allowed token {t} rejected"


def test_every_allowed_token_is_accepted_and_every_other_rejected_by_fork() -> None:
    """A second oracle that does not share the core's brute-force path: accept_token on forks."""
    tok = tokenizer("llama-2")
    compiled = compiler("llama-2").compile_grammar(GRAMMARS["schema_like"])
    m = xgr.GrammarMatcher(compiled)
    assert m.accept_string('{"name": "Al')
    bm = new_bitmask(tok.vocab_size)
    m.fill_next_token_bitmask(bm)
    ids = set(allowed(bm, tok.vocab_size).tolist())
    for t in range(tok.vocab_size):
        assert m.fork().accept_token(t) == (t in ids), f"token {t} {tok.decoded_vocab[t]!r}"


def test_ids_beyond_tokenizer_are_never_allowed() -> None:
    path = os.path.join(shared_data(), "tokenizers", "canonical", "qwen3.json")
    tok = xgr.TokenizerInfo.from_canonical_json(path, vocab_size=151936)
    compiled = xgr.GrammarCompiler(tok).compile_grammar('root ::= [^"]* "\\""')
    m = xgr.GrammarMatcher(compiled)
    bm = new_bitmask(151936)
    m.fill_next_token_bitmask(bm)
    ids = allowed(bm, 151936)
    assert ids.max() < 151669 and len(ids) > 100000
