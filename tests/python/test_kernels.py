"""xgrammar2.kernels: upstream's per-backend module layout over apply_token_bitmask_inplace.

On a CPU-only machine the CUDA / Triton entry points must import (Triton's only when triton is
installed, as upstream) and refuse CPU logits with a clear ValueError; the CPU kernel is checked
against torch.masked_fill and against upstream xgrammar's own CPU kernel when installed."""

import importlib
import importlib.util

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("xgrammar2")

from xgrammar2.kernels.apply_token_bitmask_inplace_cpu import (  # noqa: E402
    apply_token_bitmask_inplace_cpu,
)
from xgrammar2.kernels.apply_token_bitmask_inplace_torch import (  # noqa: E402
    apply_token_bitmask_inplace_torch,
)
from xgrammar2.testing import bool_mask_to_bitmask  # noqa: E402


def _case(seed, batch, vocab, dtype):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, vocab, generator=g).to(dtype)
    allowed = torch.rand(batch, vocab, generator=g) < 0.5
    return logits, allowed, bool_mask_to_bitmask(allowed)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("kernel", [apply_token_bitmask_inplace_cpu, apply_token_bitmask_inplace_torch])
def test_kernel_matches_masked_fill(kernel, dtype):
    logits, allowed, bitmask = _case(0, 5, 1000, dtype)
    expected = logits.masked_fill(~allowed, float("-inf"))
    kernel(logits, bitmask)
    torch.testing.assert_close(logits, expected)


def test_cpu_kernel_indices_and_vocab_size():
    logits, allowed, bitmask = _case(1, 4, 100, torch.float32)
    expected = logits.clone()
    rows = [0, 2]
    expected[rows, :70] = expected[rows, :70].masked_fill(~allowed[rows, :70], float("-inf"))
    apply_token_bitmask_inplace_cpu(logits, bitmask, 70, torch.tensor(rows))
    torch.testing.assert_close(logits, expected)


@pytest.mark.parametrize(
    "logits, bitmask, match",
    [
        (torch.zeros(2, 32, dtype=torch.float64), torch.zeros(2, 1, dtype=torch.int32),
         "float32 or bfloat16/float16"),
        (torch.zeros(2, 32), torch.zeros(2, 1, dtype=torch.int64), "int32"),
        (torch.zeros(1, 2, 32), torch.zeros(2, 1, dtype=torch.int32), "logits should be 1D or 2D"),
        (torch.zeros(2, 32), torch.zeros(1, 2, 1, dtype=torch.int32), "bitmask should be 1D or 2D"),
    ],
)
def test_cpu_kernel_rejects(logits, bitmask, match):
    with pytest.raises(ValueError, match=match):
        apply_token_bitmask_inplace_cpu(logits, bitmask)


def test_gpu_entry_points_import_and_refuse_cpu_logits():
    cuda = importlib.import_module("xgrammar2.kernels.apply_token_bitmask_inplace_cuda")
    compiled = importlib.import_module("xgrammar2.kernels.apply_token_bitmask_inplace_torch_compile")
    assert callable(compiled.apply_token_bitmask_inplace_torch_compile)
    logits = torch.zeros(1, 32)
    bitmask = torch.zeros(1, 1, dtype=torch.int32)
    with pytest.raises(ValueError, match="CUDA"):
        cuda.apply_token_bitmask_inplace_cuda(logits, bitmask)
    if importlib.util.find_spec("triton") is None:
        with pytest.raises(ImportError, match="Triton is not installed"):
            importlib.import_module("xgrammar2.kernels.apply_token_bitmask_inplace_triton")
    else:
        triton_mod = importlib.import_module("xgrammar2.kernels.apply_token_bitmask_inplace_triton")
        with pytest.raises(ValueError, match="CUDA"):
            triton_mod.apply_token_bitmask_inplace_triton(logits, bitmask)
    assert not logits.isinf().any()


def test_mlx_module_needs_mlx():
    if importlib.util.find_spec("mlx") is not None:
        pytest.skip("mlx installed")
    with pytest.raises(ImportError):
        importlib.import_module("xgrammar2.kernels.apply_token_bitmask_mlx")


@pytest.mark.parametrize("seed", range(4))
def test_cpu_kernel_matches_upstream(seed):
    up = pytest.importorskip("xgrammar.kernels.apply_token_bitmask_inplace_cpu")
    if up.__name__.startswith("xgrammar2"):
        pytest.skip("upstream xgrammar not installed")
    logits, _, bitmask = _case(seed, 3, 257 + seed, torch.bfloat16)
    vocab = [None, 200, 257, 100][seed]
    indices = [None, [1], [0, 2], None][seed]
    ours, theirs = logits.clone(), logits.clone()
    apply_token_bitmask_inplace_cpu(ours, bitmask, vocab, indices)
    up.apply_token_bitmask_inplace_cpu(theirs, bitmask, vocab, indices)
    assert torch.equal(ours, theirs)
