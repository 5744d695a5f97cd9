"""Vocabulary-mask helpers shared by the grammar objects and the backend.

The layout is XGrammar's (SGLang's speculative decoding and strict-thinking filters hard-code
it): ``int32[batch, ceil(vocab_size / 32)]``, token ``t`` is bit ``t % 32`` of word
``t // 32``, 1 = allowed, a fresh row is all ``-1``.
"""

from __future__ import annotations

from typing import Any, List

import torch

__all__ = [
    "allocate_vocab_mask",
    "move_vocab_mask",
    "apply_vocab_mask",
    "set_token_filter",
]


def _pin_memory() -> bool:
    try:
        from sglang.srt.utils.common import is_pin_memory_available

        return bool(is_pin_memory_available())
    except Exception:  # noqa: BLE001 - helper moved: pin only where CUDA is present
        return torch.cuda.is_available()


def allocate_vocab_mask(vocab_size: int, batch_size: int, device: Any = None) -> torch.Tensor:
    """An all-allowed CPU mask (pinned where pinning exists, so the copy to the device is
    truly asynchronous). ``device`` is accepted for SGLang's signature; masks are filled on
    the CPU and moved with :func:`move_vocab_mask`."""
    return torch.full(
        (batch_size, (vocab_size + 31) // 32), -1, dtype=torch.int32, pin_memory=_pin_memory()
    )


def move_vocab_mask(vocab_mask: torch.Tensor, device: Any) -> torch.Tensor:
    """Non-blocking copy to ``device``."""
    return vocab_mask.to(device, non_blocking=True)


def _is_hip() -> bool:
    return bool(getattr(torch.version, "hip", None))


def apply_vocab_mask(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
    """Sets the logits of disallowed tokens to ``-inf`` in place: SGLang's Triton kernel on
    CUDA / XPU / MUSA (``sgl_kernel`` on ROCm), the NPU op on Ascend, xgrammar2's own
    implementation on the CPU."""
    kind = logits.device.type
    if kind in ("cuda", "xpu", "musa"):
        if _is_hip():
            from sgl_kernel import apply_token_bitmask_inplace_cuda

            apply_token_bitmask_inplace_cuda(logits, vocab_mask)
        else:
            from sglang.kernels.ops.grammar.bitmask_ops import apply_token_bitmask_inplace_triton

            apply_token_bitmask_inplace_triton(logits, vocab_mask)
    elif kind == "npu":
        import sgl_kernel_npu  # noqa: F401

        torch.ops.npu.apply_token_bitmask(logits, vocab_mask)
    elif kind == "cpu":
        import xgrammar2 as xgr2

        xgr2.apply_token_bitmask_inplace(logits, vocab_mask.to("cpu"))
    else:
        raise RuntimeError(f"xgrammar2: unsupported logits device {logits.device}")


def set_token_filter(
    vocab_mask: torch.Tensor,
    token_ids: List[int],
    batch_idx: int,
    is_allowed: bool = True,
    reset_vocab_mask: bool = True,
) -> None:
    """Allows (``is_allowed``) or forbids ``token_ids`` in row ``batch_idx``; with
    ``reset_vocab_mask`` the row is first reset (to none allowed when allowing, to all
    allowed when forbidding). SGLang's strict-thinking filter; delegates to SGLang's own
    torch / Triton implementations so the semantics are exactly SGLang's."""
    if _is_hip() or vocab_mask.device.type != "cuda":
        from sglang.srt.constrained.torch_ops.token_filter_torch_ops import set_token_filter_torch

        set_token_filter_torch(
            vocab_mask, token_ids, batch_idx, is_allowed=is_allowed, reset_vocab_mask=reset_vocab_mask
        )
    else:
        from sglang.kernels.ops.grammar.token_filter_ops import set_token_filter_triton

        set_token_filter_triton(
            vocab_mask, token_ids, batch_idx, is_allowed=is_allowed, reset_vocab_mask=reset_vocab_mask
        )
