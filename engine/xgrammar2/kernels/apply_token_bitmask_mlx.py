"""Apply a token bitmask to MLX logits (upstream's ``xgrammar.kernels.apply_token_bitmask_mlx``;
Apple-silicon GPUs). Importing it needs ``mlx``."""

import mlx.core as mx

__all__ = ["apply_token_bitmask_mlx"]

_SHIFTS = mx.arange(32, dtype=mx.int32)


def apply_token_bitmask_mlx(bitmask: mx.array, logits: mx.array, vocab_size: int) -> mx.array:
    """The first ``vocab_size`` logits with ``-inf`` where the token's bit is 0 (a new array;
    MLX arrays are not changed in place).

    ``bitmask`` is int32 of shape ``(..., ceil(vocab_size / 32))``, ``logits`` of shape
    ``(..., >= vocab_size)``; bit ``j % 32`` of word ``j // 32`` allows token ``j``."""
    bits = mx.right_shift(mx.expand_dims(bitmask.astype(mx.int32), -1), _SHIFTS) & 1
    allowed = bits.reshape(*bitmask.shape[:-1], bitmask.shape[-1] * 32)[..., :vocab_size]
    neg_inf = mx.array(float("-inf"), dtype=logits.dtype)
    return mx.where(allowed != 0, logits[..., :vocab_size], neg_inf)
