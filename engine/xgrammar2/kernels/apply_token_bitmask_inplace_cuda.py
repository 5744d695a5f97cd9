"""Apply a token bitmask to CUDA logits in place (upstream's
``xgrammar.kernels.apply_token_bitmask_inplace_cuda``).

Upstream JIT-builds a CUDA C++ extension here; xgrammar2 has none and runs its Triton kernel
(``xgrammar2._bitmask_triton``) instead. The module imports on any machine; calling it without
CUDA logits or without triton raises ValueError saying which."""

from typing import List, Optional, Union

import torch

from ..bitmask import apply_token_bitmask_inplace

__all__ = ["apply_token_bitmask_inplace_cuda"]


def apply_token_bitmask_inplace_cuda(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    indices: Optional[Union[List[int], torch.Tensor]] = None,
) -> None:
    """Sets the logits of the tokens whose bit is 0 to ``-inf``, in place, on the GPU (the
    masked width is ``min(logits.shape[-1], 32 * bitmask.shape[-1])``).

    Raises
    ------
    ValueError
        Logits not on a CUDA device, or triton not installed.
    """
    apply_token_bitmask_inplace(logits, bitmask, indices=indices, backend="cuda")
