"""Bitmask helpers against a plain-Python reference (no C core needed)."""

import math
import warnings

import numpy as np
import pytest

import xgrammar2 as xgr
from pyapi_helpers import random_bitmask, reference_apply

torch = pytest.importorskip("torch")


def test_shape_and_allocation():
    assert xgr.get_bitmask_shape(3, 100) == (3, 4)
    assert xgr.get_bitmask_shape(1, 32) == (1, 1)
    assert xgr.get_bitmask_shape(1, 33) == (1, 2)
    assert xgr.get_bitmask_shape(2, 128256) == (2, 4008)
    bm = xgr.allocate_token_bitmask(2, 70)
    assert isinstance(bm, torch.Tensor)
    assert bm.dtype == torch.int32 and tuple(bm.shape) == (2, 3) and bm.device.type == "cpu"
    assert bool((bm == -1).all())
    assert xgr.bitmask_dtype == torch.int32
    bm.zero_()
    xgr.reset_token_bitmask(bm)
    assert bool((bm == -1).all())
    arr = np.zeros((2, 3), dtype=np.int32)
    xgr.reset_token_bitmask(arr)
    assert (arr == -1).all()
    with pytest.raises(ValueError):
        xgr.get_bitmask_shape(-1, 10)


@pytest.mark.parametrize("vocab", [1, 31, 32, 33, 100, 1000])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_apply_matches_reference(vocab, dtype):
    rng = np.random.default_rng(vocab)
    batch = 3
    bm = random_bitmask(rng, batch, vocab)
    logits = rng.standard_normal((batch, vocab)).astype(np.float32)
    t = torch.tensor(logits, dtype=dtype)
    xgr.apply_token_bitmask_inplace(t, torch.from_numpy(bm))
    expected = reference_apply(t.new_tensor(logits).float().numpy(), bm)
    got = t.float().numpy()
    assert np.array_equal(np.isneginf(got), np.isneginf(expected))
    keep = ~np.isneginf(expected)
    assert np.allclose(got[keep], expected[keep])


def test_apply_indices_vocab_size_and_1d():
    rng = np.random.default_rng(0)
    bm = random_bitmask(rng, 4, 100)
    logits = rng.standard_normal((4, 100)).astype(np.float32)

    t = torch.tensor(logits)
    xgr.apply_token_bitmask_inplace(t, torch.from_numpy(bm), indices=[0, 2])
    assert np.array_equal(t.numpy(), reference_apply(logits, bm, indices=[0, 2]).astype(np.float32))

    t = torch.tensor(logits)
    xgr.apply_token_bitmask_inplace(t, torch.from_numpy(bm), vocab_size=70)
    assert np.array_equal(t.numpy(), reference_apply(logits, bm, vocab_size=70).astype(np.float32))
    assert not np.isneginf(t.numpy()[:, 70:]).any()

    t = torch.tensor(logits[1])
    xgr.apply_token_bitmask_inplace(t, torch.from_numpy(bm[1]))
    assert np.array_equal(t.numpy(), reference_apply(logits[1], bm[1]).astype(np.float32))

    # indices with a bitmask that has more rows than logits is fine.
    t = torch.tensor(logits[:2])
    xgr.apply_token_bitmask_inplace(t, torch.from_numpy(bm), indices=[1])
    assert np.array_equal(t.numpy(), reference_apply(logits[:2], bm[:2], indices=[1]).astype(np.float32))


def test_apply_padded_logits_warns_and_leaves_tail():
    bm = np.zeros((1, 1), dtype=np.int32)  # 32 tokens, all disallowed
    t = torch.zeros(1, 40)
    with pytest.warns(UserWarning, match="covers only 32 tokens"):
        xgr.apply_token_bitmask_inplace(t, torch.from_numpy(bm))
    assert bool(torch.isinf(t[0, :32]).all()) and bool((t[0, 32:] == 0).all())
    t = torch.zeros(1, 40)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        xgr.apply_token_bitmask_inplace(t, torch.from_numpy(bm), vocab_size=30)
    assert bool(torch.isinf(t[0, :30]).all()) and bool((t[0, 30:] == 0).all())


def test_apply_errors():
    t = torch.zeros(2, 64)
    with pytest.raises(ValueError, match="int32"):
        xgr.apply_token_bitmask_inplace(t, torch.zeros(2, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match="rows"):
        xgr.apply_token_bitmask_inplace(t, torch.zeros(3, 2, dtype=torch.int32))
    with pytest.raises(ValueError, match="out of range"):
        xgr.apply_token_bitmask_inplace(t, torch.zeros(2, 2, dtype=torch.int32), indices=[5])
    with pytest.raises(ValueError, match="exceeds"):
        xgr.apply_token_bitmask_inplace(t, torch.zeros(2, 2, dtype=torch.int32), vocab_size=65)
    with pytest.raises(ValueError, match="3D"):
        xgr.apply_token_bitmask_inplace(torch.zeros(1, 2, 64), torch.zeros(2, 2, dtype=torch.int32))
    with pytest.raises(TypeError):
        xgr.apply_token_bitmask_inplace([0.0] * 64, torch.zeros(2, dtype=torch.int32))


@pytest.mark.parametrize("vocab", [5, 64, 300])
def test_apply_numpy_matches_reference(vocab):
    rng = np.random.default_rng(vocab + 1)
    bm = random_bitmask(rng, 3, vocab)
    logits = rng.standard_normal((3, vocab)).astype(np.float32)
    got = logits.copy()
    xgr.apply_token_bitmask_inplace(got, bm)
    assert np.array_equal(got, reference_apply(logits, bm).astype(np.float32))
    got = logits.copy()
    xgr.apply_token_bitmask_inplace(got, bm, indices=[2])
    assert np.array_equal(got, reference_apply(logits, bm, indices=[2]).astype(np.float32))
    got = logits[0].copy()
    xgr.apply_token_bitmask_inplace(got, bm[0])
    assert np.array_equal(got, reference_apply(logits[0], bm[0]).astype(np.float32))


def test_apply_matches_upstream_xgrammar():
    up = pytest.importorskip("xgrammar")
    rng = np.random.default_rng(7)
    for vocab in (33, 1000, 4099):
        bm = torch.from_numpy(random_bitmask(rng, 4, vocab))
        logits = torch.randn(4, vocab)
        a, b = logits.clone(), logits.clone()
        xgr.apply_token_bitmask_inplace(a, bm, indices=[0, 3])
        up.apply_token_bitmask_inplace(b, bm, indices=[0, 3])
        assert torch.equal(a, b)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_apply_on_gpu_with_cpu_bitmask():
    rng = np.random.default_rng(3)
    bm = random_bitmask(rng, 2, 1000)
    logits = torch.randn(2, 1000)
    expected = logits.clone()
    xgr.apply_token_bitmask_inplace(expected, torch.from_numpy(bm))
    gpu = logits.cuda()
    xgr.apply_token_bitmask_inplace(gpu, torch.from_numpy(bm))  # bitmask moved to the GPU
    assert torch.equal(gpu.cpu(), expected)
    gpu = logits.cuda()
    xgr.apply_token_bitmask_inplace(gpu, torch.from_numpy(bm).cuda(), indices=[1])
    assert torch.equal(gpu.cpu()[1], expected[1]) and torch.equal(gpu.cpu()[0], logits[0])


def test_bits_are_little_endian_within_words():
    bm = np.zeros((1, 2), dtype=np.int32)
    bm[0, 0] = 1 << 3  # token 3
    bm[0, 1] = np.int32(-(2**31))  # token 63 (bit 31 of word 1)
    logits = np.zeros((1, 64), dtype=np.float32)
    xgr.apply_token_bitmask_inplace(logits, bm)
    allowed = np.flatnonzero(~np.isneginf(logits[0]))
    assert allowed.tolist() == [3, 63]
    t = torch.zeros(1, 64)
    xgr.apply_token_bitmask_inplace(t, torch.from_numpy(bm))
    assert torch.nonzero(~torch.isinf(t[0])).flatten().tolist() == [3, 63]
    assert math.isinf(float(t[0, 0]))


def test_fill_into_an_inference_mode_tensor():
    """Tensors made under torch.inference_mode() track no version counter: filling them
    must work (the checked view is simply not reused)."""
    torch = pytest.importorskip("torch")
    info = xgr.TokenizerInfo(["a", "b", "c"])
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_grammar('root ::= "a" "b"'))
    with torch.inference_mode():
        bm = xgr.allocate_token_bitmask(1, 3)
        m.fill_next_token_bitmask(bm)
        assert bm.tolist() == [[1]]
        assert m.accept_token(0)
        m.fill_next_token_bitmask(bm)
        assert bm.tolist() == [[2]]
