"""Apply a token bitmask in place with ``torch.compile``d torch operations (upstream's
``xgrammar.kernels.apply_token_bitmask_inplace_torch_compile``); any device."""

from typing import List, Optional, Union

import torch

from ..bitmask import apply_token_bitmask_inplace

__all__ = ["apply_token_bitmask_inplace_torch_compile"]


def apply_token_bitmask_inplace_torch_compile(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    vocab_size: Optional[int] = None,
    indices: Optional[Union[List[int], torch.Tensor]] = None,
) -> None:
    """Sets the logits of the tokens whose bit is 0 to ``-inf``, in place; the bit unpacking
    is compiled with ``torch.compile`` (the bitmask is moved to the logits' device)."""
    apply_token_bitmask_inplace(
        logits, bitmask, vocab_size=vocab_size, indices=indices, backend="torch_compile"
    )
