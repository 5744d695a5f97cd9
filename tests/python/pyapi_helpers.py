"""Shared helpers for the Python API tests (a uniquely named module, so test files can import
it whatever other test folders' conftest.py files are called).

Data comes from the shared data folder beside the repository (``../shared/data``), or from
``$XGR2_SHARED_DATA``. Tests that need the compiled C core are skipped when it is not built.
"""

import gzip
import os
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("XGR2_SHARED_DATA", REPO.parent / "shared" / "data"))
TOKENIZERS = DATA / "tokenizers"


def core_available() -> bool:
    from xgrammar2 import _core

    return _core.AVAILABLE


requires_core = pytest.mark.skipif(
    not core_available(), reason="the xgrammar2 C core is not built (pip install -e .)"
)
requires_data = pytest.mark.skipif(
    not TOKENIZERS.is_dir(), reason=f"shared tokenizer data not found at {TOKENIZERS}"
)


def load_hf_tokenizer(name: str):
    """A `tokenizers.Tokenizer` for one of the original tokenizer.json files."""
    tokenizers = pytest.importorskip("tokenizers")
    folder = TOKENIZERS / "original" / name
    if (folder / "tokenizer.json").exists():
        return tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    gz = folder / "tokenizer.json.gz"
    if gz.exists():
        with gzip.open(gz, "rt", encoding="utf-8") as f:
            return tokenizers.Tokenizer.from_str(f.read())
    pytest.skip(f"no tokenizer.json for {name}")


def canonical_path(name: str) -> Path:
    path = TOKENIZERS / "canonical" / f"{name}.json"
    if not path.exists():
        pytest.skip(f"canonical vocabulary {name} not found")
    return path


def random_bitmask(rng: np.random.Generator, rows: int, vocab: int, extra_words: int = 0) -> np.ndarray:
    """Random int32 bitmask words for `vocab` tokens (plus `extra_words` of padding)."""
    words = rng.integers(-(2**31), 2**31, size=(rows, (vocab + 31) // 32 + extra_words), dtype=np.int64)
    return words.astype(np.int32)


def reference_apply(logits, bitmask, vocab_size=None, indices=None):
    """apply_token_bitmask_inplace's documented semantics, one element at a time, on a float64
    copy."""
    logits = np.array(logits, dtype=np.float64, copy=True)
    bitmask = np.asarray(bitmask)
    squeeze = logits.ndim == 1
    if squeeze:
        logits = logits[None]
        bitmask = bitmask.reshape(1, -1)
    width = min(logits.shape[-1], bitmask.shape[-1] * 32) if vocab_size is None else vocab_size
    rows = range(logits.shape[0]) if indices is None else indices
    for i in rows:
        for j in range(width):
            word = int(bitmask[i, j // 32]) & 0xFFFFFFFF
            if not (word >> (j % 32)) & 1:
                logits[i, j] = -np.inf
    return logits[0] if squeeze else logits
