"""Token bitmask helpers: allocation, reset and applying a bitmask to logits.

Layout (fixed by vLLM and SGLang): ``int32[batch, ceil(vocab_size / 32)]``; token ``t`` is bit
``t % 32`` of word ``t // 32``; 1 = allowed.

torch and numpy are imported only inside the functions that need them (torch only if
installed); numpy arrays are supported everywhere a tensor is.
"""

import functools
import importlib.util
import math
import sys
import threading
import warnings
from typing import Any, List, Optional, Sequence, Tuple, Union

__all__ = [
    "bitmask_dtype",
    "get_bitmask_shape",
    "allocate_token_bitmask",
    "reset_token_bitmask",
    "apply_token_bitmask_inplace",
]


def _installed(module: str) -> bool:
    return module in sys.modules or importlib.util.find_spec(module) is not None


def _is_torch_tensor(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _is_ndarray(x: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.ndarray)


def __getattr__(name: str) -> Any:
    if name == "bitmask_dtype":
        if _installed("torch"):
            import torch

            return torch.int32
        import numpy as np

        return np.int32
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_bitmask_shape(batch_size: int, vocab_size: int) -> Tuple[int, int]:
    """The shape of the bitmask: ``(batch_size, ceil(vocab_size / 32))``."""
    if batch_size < 0 or vocab_size < 0:
        raise ValueError(
            f"batch_size and vocab_size must be non-negative, got {batch_size}, {vocab_size}"
        )
    return (batch_size, math.ceil(vocab_size / 32))


def allocate_token_bitmask(batch_size: int, vocab_size: int) -> Any:
    """Allocates a bitmask with every token allowed (all bits set, i.e. -1 words): a CPU
    ``torch.int32`` tensor when torch is installed, else a ``numpy.int32`` array. Shape
    ``(batch_size, ceil(vocab_size / 32))``.

    Engines that manage their own (e.g. pinned) memory can build the tensor themselves with
    :func:`get_bitmask_shape` and ``bitmask_dtype``.
    """
    shape = get_bitmask_shape(batch_size, vocab_size)
    if _installed("torch"):
        import torch

        return torch.full(shape, -1, dtype=torch.int32)
    import numpy as np

    return np.full(shape, -1, dtype=np.int32)


def reset_token_bitmask(bitmask: Any) -> None:
    """Resets the bitmask to the full mask (every token allowed)."""
    if _is_torch_tensor(bitmask):
        bitmask.fill_(-1)
    elif _is_ndarray(bitmask):
        bitmask.fill(-1)
    else:
        raise TypeError(
            f"bitmask must be a torch.Tensor or numpy.ndarray, got {type(bitmask).__name__}"
        )


def _resolve_vocab_size(
    logits_width: int, bitmask_width: int, vocab_size: Optional[int], stacklevel: int
) -> int:
    if vocab_size is None:
        if bitmask_width * 32 < logits_width:
            warnings.warn(
                f"The bitmask covers only {bitmask_width * 32} tokens but logits have "
                f"{logits_width}, so logits[..., {bitmask_width * 32}:] are left unmasked. "
                "Allocate the bitmask with the full vocab size, or pass vocab_size explicitly.",
                stacklevel=stacklevel,
            )
        return min(logits_width, bitmask_width * 32)
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 0:
        raise ValueError(f"vocab_size must be a non-negative int, got {vocab_size!r}")
    if vocab_size > logits_width:
        raise ValueError(f"vocab_size ({vocab_size}) exceeds the logits' width ({logits_width})")
    if vocab_size > bitmask_width * 32:
        raise ValueError(
            f"vocab_size ({vocab_size}) exceeds what the bitmask covers "
            f"({bitmask_width} words = {bitmask_width * 32} tokens)"
        )
    return vocab_size


def _indices_list(indices: Any, batch: int, bitmask_batch: int) -> Optional[List[int]]:
    if indices is None:
        return None
    if _is_torch_tensor(indices) or _is_ndarray(indices):
        indices = indices.tolist()
    out = [int(i) for i in indices]
    for i in out:
        if not 0 <= i < batch:
            raise ValueError(f"index {i} is out of range for logits with batch size {batch}")
        if not 0 <= i < bitmask_batch:
            raise ValueError(f"index {i} is out of range for a bitmask with {bitmask_batch} rows")
    if len(set(out)) != len(out):
        raise ValueError("indices must be unique")
    return out


def apply_token_bitmask_inplace(
    logits: Any,
    bitmask: Any,
    *,
    vocab_size: Optional[int] = None,
    indices: Optional[Union[Sequence[int], Any]] = None,
    backend: str = "auto",
) -> None:
    """Sets the logits of disallowed tokens to ``-inf``, in place.

    ``logits`` has shape ``(batch, V)`` or ``(V,)``; ``bitmask`` has shape
    ``(batch, ceil(vocab / 32))`` or ``(ceil(vocab / 32),)``, int32. The operation is::

        for i in (indices if indices is not None else range(batch)):
            for j in range(vocab_size):
                if bit j of bitmask[i] is 0:
                    logits[i, j] = -inf

    Works for torch tensors on any device (the bitmask is moved to the logits' device when it
    lives elsewhere) and for numpy arrays. On a CUDA device with triton installed a Triton
    kernel does it, touching only the bitmask and the disallowed logits.

    Parameters
    ----------
    logits
        The logits, ``torch.Tensor`` or ``numpy.ndarray`` of floating type.

    bitmask
        The bitmask (int32, same kind of array as logits).

    vocab_size : Optional[int], default: None
        The real vocabulary size when logits or bitmask are padded: only
        ``logits[..., :vocab_size]`` is touched. Defaults to
        ``min(logits.shape[-1], bitmask.shape[-1] * 32)`` (with a warning when the bitmask
        covers fewer tokens than the logits).

    indices : Optional[Sequence[int]], default: None
        Rows to mask (the same row of logits and bitmask); others are left alone. Useful
        when structured and unstructured requests share a batch. With indices, logits and
        bitmask may have different batch sizes.

    backend : str, default: "auto"
        Which implementation runs, as in upstream xgrammar: ``"auto"`` (the Triton kernel for
        CUDA logits when triton is installed, else ``"torch_native"``; numpy arrays always
        use numpy), ``"cpu"`` (logits on the CPU), ``"triton"`` and ``"cuda"`` (both the
        Triton kernel; xgrammar2 ships no separate CUDA C++ kernel), ``"torch_native"``
        (plain torch operations, any device) and ``"torch_compile"`` (the same operations
        through ``torch.compile``). A backend that cannot run on the given logits raises
        ``ValueError``.
    """
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, _BACKENDS))}, got {backend!r}")
    if _is_torch_tensor(logits):
        _apply_torch(logits, bitmask, vocab_size, indices, backend)
    elif _is_ndarray(logits):
        if backend not in ("auto", "cpu"):
            raise ValueError(f"backend {backend!r} needs torch tensors; logits is a numpy array")
        _apply_numpy(logits, bitmask, vocab_size, indices)
    else:
        raise TypeError(
            f"logits must be a torch.Tensor or numpy.ndarray, got {type(logits).__name__}"
        )


_BACKENDS = ("auto", "cpu", "cuda", "triton", "torch_compile", "torch_native")


def _check_dims(logits_dim: int, bitmask_dim: int) -> None:
    if logits_dim not in (1, 2):
        raise ValueError(f"logits should be 1D or 2D, but got {logits_dim}D")
    if bitmask_dim not in (1, 2):
        raise ValueError(f"bitmask should be 1D or 2D, but got {bitmask_dim}D")


def _apply_torch(
    logits: Any, bitmask: Any, vocab_size: Optional[int], indices: Any, backend: str
) -> None:
    import torch

    if not isinstance(bitmask, torch.Tensor):
        if _is_ndarray(bitmask):
            bitmask = torch.from_numpy(bitmask)
        else:
            raise TypeError(f"bitmask must be a torch.Tensor, got {type(bitmask).__name__}")
    if bitmask.dtype != torch.int32:
        raise ValueError(f"bitmask must be of dtype int32, got {bitmask.dtype}")
    if not logits.is_floating_point():
        raise ValueError(f"logits must be a floating-point tensor, got {logits.dtype}")
    _check_dims(logits.dim(), bitmask.dim())
    logits2d = logits if logits.dim() == 2 else logits.unsqueeze(0)
    bitmask2d = bitmask if bitmask.dim() == 2 else bitmask.unsqueeze(0)
    width = _resolve_vocab_size(logits2d.shape[-1], bitmask2d.shape[-1], vocab_size, 4)
    idx = _indices_list(indices, logits2d.shape[0], bitmask2d.shape[0])
    if idx is None and logits2d.shape[0] != bitmask2d.shape[0]:
        raise ValueError(
            f"logits have {logits2d.shape[0]} rows but the bitmask has {bitmask2d.shape[0]}; "
            "pass indices to mask a subset of rows"
        )
    auto = backend == "auto"
    backend = _torch_backend(logits2d, backend)
    if width == 0 or (idx is not None and not idx):
        return
    device = logits.device
    if backend == "triton":
        try:
            _apply_triton(logits2d, bitmask2d, width, idx)
            return
        except Exception as e:  # noqa: BLE001 - triton itself failed (import, compile, launch)
            if not auto:
                raise
            _TRITON_FAILED.set(f"{type(e).__name__}: {e}")
        backend = "torch_native"
    n_words = (width + 31) // 32
    if idx is not None:
        rows = torch.tensor(idx, dtype=torch.long, device=bitmask2d.device)
        words = bitmask2d.index_select(0, rows)[:, :n_words]
    else:
        words = bitmask2d[:, :n_words]
    if words.device != device:
        words = words.to(device)
    disallowed = (_compiled_unpack() if backend == "torch_compile" else _unpack_torch)(words, width)
    if idx is None:
        logits2d[:, :width].masked_fill_(disallowed, float("-inf"))
    else:
        rows = torch.tensor(idx, dtype=torch.long, device=device)
        sub = logits2d.index_select(0, rows)[:, :width]
        sub.masked_fill_(disallowed, float("-inf"))
        logits2d[rows, :width] = sub


def _apply_triton(logits2d: Any, bitmask2d: Any, width: int, idx: Optional[List[int]]) -> None:
    import torch

    from ._bitmask_triton import apply_bitmask_triton

    words = bitmask2d.to(logits2d.device, non_blocking=True)
    if words.stride(-1) != 1:
        words = words.contiguous()
    rows = None
    if idx is not None:
        # Pinned, so the copy is queued behind earlier work instead of waiting for it.
        host = torch.tensor(idx, dtype=torch.int64)
        rows = host.pin_memory().to(logits2d.device, non_blocking=True)
    apply_bitmask_triton(logits2d, words, width, rows)


class _FailureLatch:
    """Remembers the first failure of the Triton path so "auto" warns once and then keeps
    to plain torch (a broken triton install must not fail every step)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reason: Optional[str] = None

    def set(self, reason: str) -> None:
        with self._lock:
            if self.reason is not None:
                return
            self.reason = reason
        warnings.warn(
            f"the Triton bitmask kernel failed ({reason}); apply_token_bitmask_inplace falls "
            "back to plain torch operations for backend='auto'",
            RuntimeWarning,
            stacklevel=4,
        )


_TRITON_FAILED = _FailureLatch()


def _torch_backend(logits2d: Any, backend: str) -> str:
    """The implementation that runs for torch logits: "triton", "torch_native" or
    "torch_compile". Raises ValueError when the asked-for backend cannot run on them."""
    on_cuda = logits2d.device.type == "cuda"
    if backend == "cpu":
        if logits2d.device.type != "cpu":
            raise ValueError(f"backend 'cpu' needs logits on the CPU, got {logits2d.device}")
        return "torch_native"
    if backend in ("triton", "cuda"):
        if not on_cuda:
            raise ValueError(f"backend {backend!r} needs CUDA logits, got {logits2d.device}")
        if not _installed("triton"):
            raise ValueError(f"backend {backend!r} needs triton, which is not installed")
        if logits2d.stride(-1) != 1:
            raise ValueError(f"backend {backend!r} needs logits contiguous in the last dimension")
        return "triton"
    if backend == "auto":
        usable = _TRITON_FAILED.reason is None and _installed("triton")
        if on_cuda and usable and logits2d.stride(-1) == 1:
            return "triton"
        return "torch_native"
    return backend


def _unpack_torch(words: Any, width: int) -> Any:
    """Disallowed flags (bool) of shape (rows, width) from int32 words of shape (rows, n)."""
    import torch

    shifts = torch.arange(32, dtype=torch.int32, device=words.device)
    bits = (words.unsqueeze(-1) >> shifts) & 1
    return (bits == 0).reshape(words.shape[0], words.shape[1] * 32)[:, :width]


@functools.lru_cache(maxsize=1)
def _compiled_unpack() -> Any:
    import torch

    return torch.compile(_unpack_torch, dynamic=True)


def _unpack_numpy(words: Any, width: int) -> Any:
    """Allowed flags (bool) of shape (rows, width) from int32 words of shape (rows, n)."""
    import numpy as np

    little = np.ascontiguousarray(words, dtype="<i4")
    bits = np.unpackbits(little.view(np.uint8), axis=-1, bitorder="little")
    return bits[:, :width].astype(bool)


def _apply_numpy(logits: Any, bitmask: Any, vocab_size: Optional[int], indices: Any) -> None:
    import numpy as np

    if _is_torch_tensor(bitmask):
        bitmask = bitmask.detach().cpu().numpy()
    if not isinstance(bitmask, np.ndarray):
        raise TypeError(f"bitmask must be a numpy.ndarray, got {type(bitmask).__name__}")
    if bitmask.dtype != np.int32:
        raise ValueError(f"bitmask must be of dtype int32, got {bitmask.dtype}")
    if not np.issubdtype(logits.dtype, np.floating):
        raise ValueError(f"logits must be a floating-point array, got {logits.dtype}")
    _check_dims(logits.ndim, bitmask.ndim)
    logits2d = logits if logits.ndim == 2 else logits[None, :]
    bitmask2d = bitmask if bitmask.ndim == 2 else bitmask[None, :]
    width = _resolve_vocab_size(logits2d.shape[-1], bitmask2d.shape[-1], vocab_size, 4)
    idx = _indices_list(indices, logits2d.shape[0], bitmask2d.shape[0])
    if idx is None and logits2d.shape[0] != bitmask2d.shape[0]:
        raise ValueError(
            f"logits have {logits2d.shape[0]} rows but the bitmask has {bitmask2d.shape[0]}; "
            "pass indices to mask a subset of rows"
        )
    if width == 0 or (idx is not None and not idx):
        return
    n_words = (width + 31) // 32
    rows = slice(None) if idx is None else idx
    allowed = _unpack_numpy(bitmask2d[rows, :n_words], width)
    view = logits2d[rows, :width]
    view[~allowed] = -np.inf
    if idx is not None:  # fancy indexing made a copy: write it back
        logits2d[idx, :width] = view
