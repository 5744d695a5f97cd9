"""Shared helpers for the runtime tests: real vocabularies, mask decoding, seeded walks."""

from __future__ import annotations

import functools
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
