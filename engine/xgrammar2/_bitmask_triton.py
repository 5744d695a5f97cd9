"""The GPU kernel of :func:`xgrammar2.apply_token_bitmask_inplace` (Triton).

One program masks ``32 * WORDS`` logits of one row, choosing per block how to touch memory:

- every bit set (free text): nothing beyond the bitmask words is read or written;
- few zero bits (at most one in ``SPARSE_DIV``): ``-inf`` is stored only where a bit is 0,
  so allowed logits are neither read nor written;
- otherwise: the block is read and written whole (vector loads and stores), which beats
  per-element predicated stores once many tokens are disallowed.

On an H100 (``docs/benchmarks/gpu_bitmask.md``) it runs at 0.69-1.89x the speed of upstream
xgrammar's Triton kernel (median 1.02x): slower where most tokens are disallowed, faster where
most are allowed. Imported only when a CUDA tensor is masked and triton is
installed.
"""

from typing import Any, Optional

import torch
import triton
import triton.language as tl

__all__ = ["apply_bitmask_triton"]

_WORDS = 128  # bitmask words per program: 4096 logits
_SPARSE_DIV = 8


@triton.jit
def _mask_rows(
    logits_ptr,
    bitmask_ptr,
    rows_ptr,
    logits_stride,
    bitmask_stride,
    width,
    n_words,
    HAS_ROWS: tl.constexpr,
    WORDS: tl.constexpr,
    SPARSE_DIV: tl.constexpr,
):
    if HAS_ROWS:
        row = tl.load(rows_ptr + tl.program_id(0)).to(tl.int64)
    else:
        row = tl.program_id(0).to(tl.int64)
    w = tl.program_id(1) * WORDS + tl.arange(0, WORDS)
    words = tl.load(bitmask_ptr + row * bitmask_stride + w, mask=w < n_words, other=-1)
    if tl.sum((words != -1).to(tl.int32), axis=0) > 0:
        bit = tl.arange(0, 32)
        allowed = ((words[:, None] >> bit[None, :]) & 1) != 0
        cols = w[:, None] * 32 + bit[None, :]
        inside = cols < width
        banned = inside & (allowed == 0)
        n_banned = tl.sum(tl.sum(banned.to(tl.int32), axis=1), axis=0)
        ptrs = logits_ptr + row * logits_stride + cols
        neg_inf = tl.full([WORDS, 32], float("-inf"), logits_ptr.dtype.element_ty)
        if n_banned * SPARSE_DIV <= WORDS * 32:
            tl.store(ptrs, neg_inf, mask=banned)
        else:
            vals = tl.load(ptrs, mask=inside)
            tl.store(ptrs, tl.where(allowed, vals, neg_inf), mask=inside)


def apply_bitmask_triton(
    logits2d: torch.Tensor, bitmask2d: torch.Tensor, width: int, rows: Optional[Any]
) -> None:
    """Masks ``logits2d[r, :width]`` by ``bitmask2d[r]`` for each row ``r`` (all rows when
    ``rows`` is None, else the int64 CUDA tensor ``rows``). Both tensors are on the same CUDA
    device; their last dimension is contiguous (the caller checks)."""
    n_rows = logits2d.shape[0] if rows is None else rows.numel()
    if n_rows == 0 or width == 0:
        return
    n_words = (width + 31) // 32
    grid = (n_rows, triton.cdiv(n_words, _WORDS))
    _mask_rows[grid](
        logits2d,
        bitmask2d,
        rows if rows is not None else bitmask2d,
        logits2d.stride(0),
        bitmask2d.stride(0),
        width,
        n_words,
        HAS_ROWS=rows is not None,
        WORDS=_WORDS,
        SPARSE_DIV=_SPARSE_DIV,
        num_warps=8,
    )
