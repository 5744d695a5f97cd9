"""Shared helpers for the runtime tests: real vocabularies, mask decoding, seeded walks."""

from __future__ import annotations

import functools
import json
import os
import random

import numpy as np
import pytest

import xgrammar2 as xgr


def shared_data() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.environ.get("XGR2_SHARED_DATA"), os.path.join(here, "..", "..", "..", "shared", "data")):
        if cand and os.path.isdir(os.path.join(cand, "tokenizers", "canonical")):
            return os.path.abspath(cand)
    pytest.skip("../shared/data not found (set XGR2_SHARED_DATA)")


@functools.lru_cache(maxsize=None)
def tokenizer(name: str) -> xgr.TokenizerInfo:
    return xgr.TokenizerInfo.from_canonical_json(
        os.path.join(shared_data(), "tokenizers", "canonical", name + ".json")
    )


@functools.lru_cache(maxsize=None)
@functools.lru_cache(maxsize=None)
def one_char_tokens(name: str) -> dict[str, int]:
    """The first token id of each printable ASCII character that is a token on its own."""
    one: dict[str, int] = {}
    for i, s in enumerate(tokenizer(name).decoded_vocab):
        t = s.decode("utf-8", "replace") if isinstance(s, bytes) else s
        if len(t) == 1 and t.isascii() and t.isprintable():
            one.setdefault(t, i)
    return one


def compiler(name: str) -> xgr.GrammarCompiler:
    return xgr.GrammarCompiler(tokenizer(name))


def allowed(bitmask: np.ndarray, vocab_size: int) -> np.ndarray:
    """Sorted ids whose bit is set in a 1-row int32 bitmask."""
    bits = np.unpackbits(bitmask.reshape(-1).view(np.uint8), bitorder="little")
    return np.flatnonzero(bits[:vocab_size])


def new_bitmask(vocab_size: int) -> np.ndarray:
    return np.zeros((1, (vocab_size + 31) // 32), dtype=np.int32)


def masks_equal_oracle(m: xgr.GrammarMatcher, vocab_size: int) -> tuple[bool, str]:
    """Fills the mask through the cache and through the brute-force oracle; compares."""
    a, b = new_bitmask(vocab_size), new_bitmask(vocab_size)
    m._fill_next_token_bitmask_bruteforce(b)
    try:
        m.fill_next_token_bitmask(a)
    except RuntimeError:
        # after a stop token there is no mask (as upstream): the oracle's row is empty
        return (not b.any(), "terminated, but the oracle allows tokens")
    if np.array_equal(a, b):
        return True, ""
    diff = np.setxor1d(allowed(a, vocab_size), allowed(b, vocab_size))
    return False, f"{len(diff)} tokens differ, e.g. {diff[:8].tolist()}"


def pick_token(rng: random.Random, ids: np.ndarray, tok: xgr.TokenizerInfo, stop_weight: float = 0.05) -> int:
    """A seeded choice among allowed ids that favours long tokens (they cross rule
    boundaries and code points, which is what the tests want to exercise)."""
    stops = set(tok.stop_token_ids)
    text = [int(t) for t in ids if int(t) not in stops]
    if not text or (len(text) < len(ids) and rng.random() < stop_weight):
        return int(ids[0]) if not text else int(rng.choice([t for t in ids if int(t) in stops]))
    vocab = tok.decoded_vocab
    sample = rng.sample(text, min(len(text), 64))
    sample.sort(key=lambda t: -len(vocab[t]))
    return sample[0] if rng.random() < 0.6 else rng.choice(sample)


def oracle_walk(compiled: xgr.CompiledGrammar, tok: xgr.TokenizerInfo, rng: random.Random, label: str,
                steps: int, walks: int = 1, prefixes: "tuple[str, ...]" = ()) -> None:
    """`walks` seeded random walks of at most `steps` tokens through `compiled`, checking the
    cached mask against the brute-force oracle before every token; walk i first accepts
    ``prefixes[i]`` when given (to start inside a sub-language)."""
    bm = new_bitmask(tok.vocab_size)
    for walk in range(walks):
        m = xgr.GrammarMatcher(compiled)
        if walk < len(prefixes) and prefixes[walk]:
            assert m.accept_string(prefixes[walk])
        for step in range(steps):
            ok, why = masks_equal_oracle(m, tok.vocab_size)
            assert ok, f"{label} walk {walk} step {step}: {why}"
            if m.is_terminated():
                break
            m.fill_next_token_bitmask(bm)
            ids = allowed(bm, tok.vocab_size)
            assert len(ids), f"{label}: dead end at step {step}"
            t = pick_token(rng, ids, tok)
            assert m.accept_token(t), f"{label}: allowed token {t} rejected"


def wide_object_schema(max_len: int, min_len: int, n_props: int, second_string: bool = False) -> str:
    """A closed object: n_props // 2 integer properties p.., the string "s" (maxLength
    max_len, minLength min_len), with second_string a string "t" of the same maxLength, then
    n_props // 2 boolean properties q..: a string inside a wide object, so that closing it
    predicts many later members."""
    props: dict[str, dict] = {f"p{i:02d}": {"type": "integer"} for i in range(n_props // 2)}
    s: dict = {"type": "string", "maxLength": max_len}
    if min_len:
        s["minLength"] = min_len
    props["s"] = s
    if second_string:
        props["t"] = {"type": "string", "maxLength": max_len}
    props.update({f"q{i:02d}": {"type": "boolean"} for i in range(n_props // 2)})
    return json.dumps({"type": "object", "properties": props, "additionalProperties": False})


def assert_oracle_mask(m: xgr.GrammarMatcher, vocab: str, where: str) -> None:
    """The matcher's mask equals the brute-force mask (masks_equal_oracle)."""
    ok, why = masks_equal_oracle(m, tokenizer(vocab).vocab_size)
    assert ok, f"{vocab} {where}: {why}"


def type_string_checked(m: xgr.GrammarMatcher, vocab: str, n_chars: int, pieces: list[str]) -> None:
    """After '{"p03":7,"s":"', types n_chars letters one character per token, then the
    ``pieces`` by accept_string, comparing the mask with the brute-force mask after each."""
    one = one_char_tokens(vocab)
    text = '{"p03":7,"s":"'
    assert m.accept_string(text)
    assert_oracle_mask(m, vocab, f"after {text!r}")
    letters = "abcdefghijklmnopqrstuvwxyz"
    for k in range(n_chars):
        ch = letters[k % 26]
        assert m.accept_token(one[ch]), (text, ch)
        text += ch
        assert_oracle_mask(m, vocab, f"after {len(text)} characters")
    for piece in pieces:
        assert m.accept_string(piece), (text, piece)
        text += piece
        assert_oracle_mask(m, vocab, f"after {text[-12:]!r}")


def assert_prefix_masks(grammar: str, prefixes, vocab: str, inline: int, label: str) -> None:
    """After each prefix (a fresh compile, empty cross-grammar cache, ``inline_max_states``
    = ``inline``), the mask equals the brute-force oracle."""
    tok = tokenizer(vocab)
    for prefix in prefixes:
        xgr.clear_cross_grammar_cache()
        c = xgr.GrammarCompiler(tok, cache_enabled=False, inline_max_states=inline)
        m = xgr.GrammarMatcher(c.compile_grammar(grammar))
        assert m.accept_string(prefix), prefix
        ok, why = masks_equal_oracle(m, tok.vocab_size)
        assert ok, f"{label} inline={inline} {vocab} after {prefix!r}: {why}"
