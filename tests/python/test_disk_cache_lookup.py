"""The on-disk compile cache's lookup path (docs/disk-cache.md, "Reading"): the key digest's
encoding, one read (or a map for large files), the LRU touch only for files not touched
lately, and the write after a miss reusing the miss's digest."""

import os
import time

import pytest

import xgrammar2 as xgr
from xgrammar2 import disk_cache as dcm

# (the module-scoped fixtures `info` and `reference` are test_disk_cache's own, imported so
# that pytest registers them here too, instead of a copy)
from test_disk_cache import REQUESTS, compile_one, files, info, reference, walk  # noqa: F401


def test_key_digest_separates_types_and_boundaries(tmp_path):
    dc = dcm.DiskCache(str(tmp_path), b"vocab", b"opts")
    keys = [
        ("a", 1), ("a", "1"), ("a", True), ("a", None), ("a", b"1"), ("a1",), (("a",), 1),
        ("a", (1,)), ("ab", "c"), ("a", "bc"), ("a", False), ("a", 0), ("a", -1), ("a", ""),
        ("a", ("",)), ("a\udc80",), ("a", 1.0 + 1e-9),
    ]
    digests = [dc.key_digest(k) for k in keys]
    assert len(set(digests)) == len(keys)
    assert all(len(d) == 32 for d in digests)
    assert dc.key_digest(("a", "bc")) == dc.key_digest(("a", "b" + "c"))  # by value
    # the prefix (format, build, vocabulary, options) is part of every name
    other = dcm.DiskCache(str(tmp_path), b"vocab", b"other-opts")
    assert other.key_digest(("a", 1)) != dc.key_digest(("a", 1))


def test_read_exact(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(bytes(range(200)))
    for size, want in ((200, bytes(range(200))), (199, None), (201, None)):
        fd = os.open(str(p), os.O_RDONLY)
        try:
            assert dcm._read_exact(fd, size) == want
        finally:
            os.close(fd)


@pytest.mark.parametrize("read_max", [0, 1 << 20], ids=["mapped", "read"])
def test_hits_and_corruption_on_both_read_paths(tmp_path, info, reference, monkeypatch, read_max):
    monkeypatch.setattr(dcm, "_READ_MAX", read_max)
    d = tmp_path / "c"
    w = xgr.GrammarCompiler(info, cache_dir=d)
    compile_one(w, *REQUESTS[0])
    w.disk_cache.flush()
    (path,) = files(d)
    good = open(path, "rb").read()
    r = xgr.GrammarCompiler(info, cache_dir=d)
    assert walk(info, compile_one(r, *REQUESTS[0])) == reference[0]
    assert r.disk_cache.hits == 1 and r.disk_cache.rejected == 0
    # a damaged payload byte: the checksum refuses it on either path
    bad = bytearray(good)
    bad[-3] ^= 0x21
    with open(path, "wb") as f:
        f.write(bytes(bad))
    r2 = xgr.GrammarCompiler(info, cache_dir=d)
    assert walk(info, compile_one(r2, *REQUESTS[0])) == reference[0]
    assert r2.disk_cache.hits == 0 and r2.disk_cache.rejected == 1
    r2.disk_cache.flush()
    assert open(path, "rb").read() == good  # rewritten


def test_hit_touches_only_files_not_touched_lately(tmp_path, info):
    d = tmp_path / "c"
    w = xgr.GrammarCompiler(info, cache_dir=d)
    compile_one(w, *REQUESTS[3])
    w.disk_cache.flush()
    (path,) = files(d)
    os.utime(path, (1, 1))  # old: a hit moves it to the front of the LRU order
    r = xgr.GrammarCompiler(info, cache_dir=d)
    compile_one(r, *REQUESTS[3])
    assert r.disk_cache.hits == 1
    r.disk_cache.flush()  # the background thread touches it (off the request's thread)
    assert time.time() - os.stat(path).st_mtime < 60
    recent = time.time() - 5  # touched seconds ago: already among the newest, left as is
    os.utime(path, (recent, recent))
    r2 = xgr.GrammarCompiler(info, cache_dir=d)
    compile_one(r2, *REQUESTS[3])
    assert r2.disk_cache.hits == 1
    r2.disk_cache.flush()
    assert os.stat(path).st_mtime == pytest.approx(recent, abs=1e-3)


def test_write_after_a_miss_hashes_the_key_once(tmp_path, info, monkeypatch):
    calls = []
    original = dcm.DiskCache.key_digest

    def counting(self, key):
        calls.append(key)
        return original(self, key)

    monkeypatch.setattr(dcm.DiskCache, "key_digest", counting)
    d = tmp_path / "c"
    comp = xgr.GrammarCompiler(info, cache_dir=d)
    compile_one(comp, *REQUESTS[1])
    comp.disk_cache.flush()
    assert len(calls) == 1 and comp.disk_cache.writes == 1
    (path,) = files(d)
    assert os.path.basename(path) == original(comp.disk_cache, calls[0]).hex() + ".xgc"
    # a write not preceded by this thread's miss of the same key hashes it itself
    compiled = comp.compile_regex("x+")
    comp.disk_cache.flush()
    before = set(files(d))
    assert comp.disk_cache.write(("custom", "key"), compiled)
    (new,) = set(files(d)) - before
    assert os.path.basename(new) == original(comp.disk_cache, ("custom", "key")).hex() + ".xgc"


def test_vocab_fingerprint_covers_tokens_kinds_and_metadata():
    base = ["a", "b", "ab", "<eos>"]
    fp = dcm.vocab_fingerprint

    def info(vocab, **kw):
        return xgr.TokenizerInfo(vocab, stop_token_ids=kw.pop("stop", [len(vocab) - 1]), **kw)

    ref = fp(info(base))
    assert len(ref) == 32
    assert fp(info(list(base))) == ref  # by content
    different = [
        info(["a", "b", "a" + "b", "<eos>", "c"]),  # one more token
        info(["ab", "b", "a", "<eos>"]),  # order
        info(["a", "ba", "b", "<eos>"]),  # same letters, other boundaries
        info(base, stop=[0]),  # other stop ids
        info(base, vocab_size=8),  # padded vocabulary
        info([b"a", b"b", b"ab", b"<eos>"]),  # bytes, not text
        info(["a", b"b", "ab", "<eos>"]),  # one token as bytes
    ]
    fps = [fp(i) for i in different]
    assert ref not in fps and len(set(fps)) == len(fps)
    # a compiler's directory knows the vocabulary by it (file header and name prefix)
    assert fp(info([b"a", "b", b"ab", "<eos>"])) != fp(info(["a", b"b", b"ab", "<eos>"]))
