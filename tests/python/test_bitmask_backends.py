"""apply_token_bitmask_inplace's backends: the Triton kernel (run by Triton's interpreter on the
CPU here, on the GPU where CUDA exists), torch_native, torch_compile and the backend checks."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import xgrammar2 as xgr
from pyapi_helpers import random_bitmask, reference_apply

torch = pytest.importorskip("torch")

HAS_CUDA = torch.cuda.is_available()
HAS_TRITON = xgr.bitmask._installed("triton")


INTERPRETED_CHECK = textwrap.dedent(
    """
    import numpy as np, torch
    from xgrammar2._bitmask_triton import apply_bitmask_triton
    rng = np.random.default_rng(11)
    cases = 0
    # The kernel picks a path per 4096-token block: all allowed, few disallowed, many
    # disallowed; the densities below reach each of them.
    shapes = [(1, 1, 0), (1, 33, 3), (3, 4096, 0), (2, 4097, 31), (2, 9000, 1)]
    for (n_rows, vocab, pad), allowed in zip(shapes * 3, [0.5] * 5 + [0.999] * 5 + [0.02] * 5):
        n_words = (vocab + 31) // 32
        bits = rng.random((n_rows, (n_words + 2) * 32)) < allowed
        bm = np.packbits(bits, axis=-1, bitorder="little").view("<i4").astype(np.int32)
        bm[0, : n_words // 2] = -1  # a fully allowed stretch
        # bfloat16 is checked on CUDA only: older Triton interpreters cannot build it.
        for dtype in (torch.float32, torch.float16):
            logits = torch.randn(n_rows, vocab + pad).to(dtype)
            expected = logits.float().numpy().copy()
            for r in range(n_rows):
                for j in range(vocab):
                    if not (int(bm[r, j // 32]) >> (j % 32)) & 1:
                        expected[r, j] = -np.inf
            got = logits.clone()
            apply_bitmask_triton(got, torch.from_numpy(bm), vocab, None)
            assert np.array_equal(got.float().numpy(), expected), (n_rows, vocab, dtype)
            rows = [n_rows - 1]
            got = logits.clone()
            apply_bitmask_triton(got, torch.from_numpy(bm), vocab, torch.tensor(rows))
            want = logits.float().numpy().copy()
            want[rows] = expected[rows]
            assert np.array_equal(got.float().numpy(), want), ("rows", n_rows, vocab, dtype)
            cases += 1
    print("checked", cases)
    """
)


@pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")
def test_triton_kernel_masks_exactly_the_zero_bits_in_the_interpreter():
    # TRITON_INTERPRET is read when the kernel is decorated, so it runs in a fresh process.
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run(
        [sys.executable, "-c", INTERPRETED_CHECK], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "checked 30" in done.stdout


def test_unknown_backend_is_named():
    with pytest.raises(ValueError, match="backend must be one of.*'bogus'"):
        xgr.apply_token_bitmask_inplace(torch.zeros(1, 32), torch.zeros(1, 1, dtype=torch.int32), backend="bogus")


@pytest.mark.parametrize("backend", ["triton", "cuda"])
def test_gpu_backends_refuse_cpu_logits(backend):
    with pytest.raises(ValueError, match=f"backend '{backend}' needs CUDA logits"):
        xgr.apply_token_bitmask_inplace(torch.zeros(1, 32), torch.zeros(1, 1, dtype=torch.int32), backend=backend)


def test_torch_backends_refuse_numpy_logits():
    with pytest.raises(ValueError, match="needs torch tensors"):
        xgr.apply_token_bitmask_inplace(np.zeros((1, 32), np.float32), np.zeros((1, 1), np.int32), backend="torch_native")


@pytest.mark.parametrize("backend", ["auto", "cpu", "torch_native", "torch_compile"])
def test_cpu_backends_match_the_bitwise_reference(backend):
    rng = np.random.default_rng(5)
    bm = random_bitmask(rng, 3, 1270, extra_words=1)
    logits = np.random.default_rng(6).standard_normal((3, 1275)).astype(np.float32)
    got = torch.from_numpy(logits.copy())
    xgr.apply_token_bitmask_inplace(got, torch.from_numpy(bm), vocab_size=1270, backend=backend)
    assert np.array_equal(got.numpy(), reference_apply(logits, bm, 1270, None))
    got = torch.from_numpy(logits.copy())
    xgr.apply_token_bitmask_inplace(got, torch.from_numpy(bm), vocab_size=1270, indices=[2, 0], backend=backend)
    assert np.array_equal(got.numpy(), reference_apply(logits, bm, 1270, [2, 0]))


def test_numpy_logits_take_the_cpu_backend():
    rng = np.random.default_rng(8)
    bm = random_bitmask(rng, 2, 100)
    logits = np.ones((2, 100), np.float32)
    got = logits.copy()
    xgr.apply_token_bitmask_inplace(got, bm, backend="cpu")
    assert np.array_equal(got, reference_apply(logits, bm, 100, None))


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("backend", ["auto", "triton", "cuda", "torch_native", "torch_compile"])
def test_cuda_backends_match_the_bitwise_reference(backend):
    if backend in ("triton", "cuda") and not HAS_TRITON:
        pytest.skip("triton is not installed")
    rng = np.random.default_rng(21)
    for n_rows, vocab, pad, dtype in [
        (1, 32000, 0, torch.float32),
        (4, 128256, 0, torch.bfloat16),
        (3, 151936, 64, torch.float16),
        (2, 4097, 7, torch.float32),
    ]:
        bm = random_bitmask(rng, n_rows, vocab, extra_words=1)
        logits = torch.randn(n_rows, vocab + pad, generator=torch.Generator().manual_seed(n_rows)).to(dtype)
        want = torch.from_numpy(reference_apply(logits.float().numpy(), bm, vocab, None)).to(dtype)
        got = logits.cuda()
        xgr.apply_token_bitmask_inplace(got, torch.from_numpy(bm).cuda(), vocab_size=vocab, backend=backend)
        assert torch.equal(got.cpu(), want), (n_rows, vocab, dtype)
        rows = [n_rows - 1] if n_rows > 1 else [0]
        want_rows = logits.clone()
        want_rows[rows] = want[rows]
        got = logits.cuda()
        xgr.apply_token_bitmask_inplace(got, torch.from_numpy(bm), vocab_size=vocab, indices=rows, backend=backend)
        assert torch.equal(got.cpu(), want_rows), ("indices", n_rows, vocab, dtype)


@pytest.mark.skipif(not (HAS_CUDA and HAS_TRITON), reason="needs a CUDA device and triton")
def test_cuda_kernel_handles_strided_rows_and_1d_logits():
    rng = np.random.default_rng(4)
    bm = random_bitmask(rng, 2, 5000)
    big = torch.randn(2, 6000)
    want = torch.from_numpy(reference_apply(big[:, :5000].numpy(), bm, 5000, None))
    got = big.cuda()[:, :5000]  # row stride 6000, last dimension contiguous
    xgr.apply_token_bitmask_inplace(got, torch.from_numpy(bm).cuda(), backend="triton")
    assert torch.equal(got.cpu(), want)
    one = big[0, :5000].cuda()
    xgr.apply_token_bitmask_inplace(one, torch.from_numpy(bm[0]).cuda(), backend="triton")
    assert torch.equal(one.cpu(), want[0])
    cols = big.t().contiguous().cuda().t()  # last dimension strided: the kernel refuses it
    with pytest.raises(ValueError, match="contiguous in the last dimension"):
        xgr.apply_token_bitmask_inplace(cols, torch.from_numpy(np.ascontiguousarray(bm)).cuda(), backend="triton")


def test_auto_falls_back_to_torch_once_when_triton_breaks(monkeypatch):
    bitmask_mod = xgr.bitmask
    calls = []

    def broken(*args):
        calls.append(1)
        raise RuntimeError("no C compiler for the launcher")

    monkeypatch.setattr(bitmask_mod, "_TRITON_FAILED", bitmask_mod._FailureLatch())
    monkeypatch.setattr(bitmask_mod, "_apply_triton", broken)
    real = bitmask_mod._torch_backend
    monkeypatch.setattr(  # make the CPU look like a CUDA device with triton
        bitmask_mod,
        "_torch_backend",
        lambda lg, b: "triton" if b == "auto" and bitmask_mod._TRITON_FAILED.reason is None else real(lg, b),
    )
    rng = np.random.default_rng(9)
    bm = random_bitmask(rng, 2, 300)
    logits = np.random.default_rng(10).standard_normal((2, 300)).astype(np.float32)
    got = torch.from_numpy(logits.copy())
    with pytest.warns(RuntimeWarning, match="no C compiler for the launcher"):
        xgr.apply_token_bitmask_inplace(got, torch.from_numpy(bm))
    assert np.array_equal(got.numpy(), reference_apply(logits, bm, 300, None))
    got = torch.from_numpy(logits.copy())
    xgr.apply_token_bitmask_inplace(got, torch.from_numpy(bm))  # no second attempt
    assert calls == [1] and np.array_equal(got.numpy(), reference_apply(logits, bm, 300, None))
    with pytest.raises(RuntimeError, match="no C compiler"):  # an explicit backend is not rescued
        monkeypatch.setattr(bitmask_mod, "_torch_backend", lambda lg, b: "triton")
        xgr.apply_token_bitmask_inplace(got, torch.from_numpy(bm), backend="triton")
