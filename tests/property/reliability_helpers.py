"""Shared pieces of the reliability property tests (tests/property): a real vocabulary, the
exception types every bad input may end in, and a runner that drives a matcher."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np
import pytest

import xgrammar2 as xgr

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("XGR2_SHARED_DATA", REPO.parent / "shared" / "data"))

#: What a bad input may raise: a ValueError (every xgrammar2 input error is one, including
#: GrammarLimitError, schema and structural-tag errors), a TypeError for wrong Python
#: types, NotImplementedError for a feature the engine names as unsupported. Anything else
#: (KeyError, AttributeError, RecursionError, IndexError that is not InvalidIndexError,
#: RuntimeError, ...) is a bug.
ALLOWED = (ValueError, TypeError, NotImplementedError, xgr.InvalidStateError)


def allowed_error(e: BaseException) -> bool:
    if isinstance(e, (RecursionError, KeyError, AttributeError, AssertionError)):
        return False
    if isinstance(e, IndexError) and not isinstance(e, xgr.InvalidIndexError):
        return False
    return isinstance(e, ALLOWED)


def check_outcome(fn, *args, **kwargs):
    """Runs fn; returns its result, or None when it raised an allowed error (re-raises
    anything else with the input in the message)."""
    try:
        return fn(*args, **kwargs)
    except BaseException as e:  # noqa: BLE001 - classified below
        if allowed_error(e):
            return None
        raise AssertionError(f"{type(e).__name__} is not a clean input error: {e!r}") from e


@functools.lru_cache(maxsize=None)
def tokenizer() -> xgr.TokenizerInfo:
    path = DATA / "tokenizers" / "canonical" / "smollm2-135m-instruct.json"
    if not path.exists():
        pytest.skip(f"shared tokenizer data not found at {path}")
    return xgr.TokenizerInfo.from_canonical_json(str(path))


@functools.lru_cache(maxsize=None)
def compiler() -> xgr.GrammarCompiler:
    # Bounded limits: a random input must not spend long even when it is accepted.
    return xgr.GrammarCompiler(tokenizer(), cache_limit_bytes=64 << 20, max_fsm_states=200_000,
                               max_row_items=20_000, max_step_work=200_000)


def allowed_ids(bm, n: int) -> np.ndarray:
    arr = bm.numpy() if hasattr(bm, "numpy") else np.asarray(bm)
    bits = np.unpackbits(arr.reshape(-1).view(np.uint8), bitorder="little")
    return np.flatnonzero(bits[:n])


def short_walk(compiled: xgr.CompiledGrammar, choices, oracle_every: int = 0) -> None:
    """Fills masks and accepts allowed tokens chosen by `choices` (ints); every
    `oracle_every` steps compares the mask with the brute-force oracle."""
    tok = compiled.tokenizer_info
    n = tok.vocab_size
    m = xgr.GrammarMatcher(compiled)
    bm = xgr.allocate_token_bitmask(1, n)
    for i, c in enumerate(choices):
        if m.is_terminated():
            break
        try:
            m.fill_next_token_bitmask(bm)
        except xgr.GrammarLimitError:
            return
        ids = allowed_ids(bm, n)
        if oracle_every and i % oracle_every == 0:
            bm2 = xgr.allocate_token_bitmask(1, n)
            m._fill_next_token_bitmask_bruteforce(bm2)
            assert_masks_agree(m, bm, bm2, n)
        if len(ids) == 0:
            break
        t = int(ids[c % len(ids)])
        try:
            assert m.accept_token(t), f"allowed token {t} rejected"
        except xgr.GrammarLimitError:
            return


def assert_masks_agree(m: xgr.GrammarMatcher, cached, oracle, n: int) -> None:
    """Cached mask == brute-force mask, except tokens the cache allows whose parse hits a
    work limit (the oracle excludes them; accepting one must raise GrammarLimitError)."""
    a, b = allowed_ids(cached, n), allowed_ids(oracle, n)
    if np.array_equal(a, b):
        return
    only_oracle = np.setdiff1d(b, a)
    assert len(only_oracle) == 0, f"brute force allows {only_oracle[:8].tolist()} the cache does not"
    for t in np.setdiff1d(a, b)[:16]:
        f = m.fork()
        with pytest.raises(xgr.GrammarLimitError):
            f.accept_token(int(t))
