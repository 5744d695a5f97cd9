"""Apply a token bitmask in place with plain torch operations (upstream's
``xgrammar.kernels.apply_token_bitmask_inplace_torch``); any device."""

from typing import List, Optional, Union

import torch

from ..bitmask import apply_token_bitmask_inplace

__all__ = ["apply_token_bitmask_inplace_torch"]


def apply_token_bitmask_inplace_torch(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    vocab_size: Optional[int] = None,
    indices: Optional[Union[List[int], torch.Tensor]] = None,
) -> None:
    """Sets the logits of the tokens whose bit is 0 to ``-inf``, in place, with torch
    operations on the logits' device."""
    apply_token_bitmask_inplace(
        logits, bitmask, vocab_size=vocab_size, indices=indices, backend="torch_native"
    )
