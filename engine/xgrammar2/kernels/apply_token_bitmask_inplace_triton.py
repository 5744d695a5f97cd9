"""Apply a token bitmask to CUDA logits in place with Triton (upstream's
``xgrammar.kernels.apply_token_bitmask_inplace_triton``). As upstream's module, importing it
raises ImportError when triton is not installed."""

import importlib.util
from typing import List, Optional, Union

import torch

if importlib.util.find_spec("triton") is None:
    raise ImportError("Triton is not installed")

from ..bitmask import apply_token_bitmask_inplace  # noqa: E402

__all__ = ["apply_token_bitmask_inplace_triton"]


def apply_token_bitmask_inplace_triton(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    vocab_size: Optional[int] = None,
    indices: Optional[Union[List[int], torch.Tensor]] = None,
) -> None:
    """Sets the logits of the tokens whose bit is 0 to ``-inf``, in place, with xgrammar2's
    Triton kernel (only the bitmask and the disallowed logits are touched).

    Raises
    ------
    ValueError
        Logits not on a CUDA device or not contiguous in the last dimension.
    """
    apply_token_bitmask_inplace(
        logits, bitmask, vocab_size=vocab_size, indices=indices, backend="triton"
    )
