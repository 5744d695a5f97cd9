"""Apply a token bitmask to CPU logits in place (upstream's
``xgrammar.kernels.apply_token_bitmask_inplace_cpu``)."""

from typing import List, Optional, Union

import torch

from ..bitmask import apply_token_bitmask_inplace

__all__ = ["apply_token_bitmask_inplace_cpu"]

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def apply_token_bitmask_inplace_cpu(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    vocab_size: Optional[int] = None,
    indices: Optional[Union[List[int], torch.Tensor]] = None,
) -> None:
    """Sets ``logits[i, j]`` to ``-inf`` where bit ``j`` of ``bitmask[i]`` is 0, for the rows
    ``indices`` (default: all) and ``j < vocab_size`` (default:
    ``min(logits.shape[-1], 32 * bitmask.shape[-1])``).

    Raises
    ------
    ValueError
        Tensors not on the CPU, a bitmask that is not int32, logits that are not float32 /
        float16 / bfloat16, or tensors that are not 1-D / 2-D.
    """
    if logits.device.type != "cpu":
        raise ValueError(f"logits must be on CPU, got {logits.device}")
    if bitmask.device.type != "cpu":
        raise ValueError(f"bitmask must be on CPU, got {bitmask.device}")
    if bitmask.dtype != torch.int32:
        raise ValueError(f"bitmask must be of type int32, got {bitmask.dtype}")
    if logits.dim() not in (1, 2):
        raise ValueError(f"logits should be 1D or 2D, but got {logits.dim()}D")
    if bitmask.dim() not in (1, 2):
        raise ValueError(f"bitmask should be 1D or 2D, but got {bitmask.dim()}D")
    if logits.dtype not in _DTYPES:
        raise ValueError(f"logits must be of type float32 or bfloat16/float16, got {logits.dtype}")
    apply_token_bitmask_inplace(
        logits, bitmask, vocab_size=vocab_size, indices=indices, backend="cpu"
    )
