"""Mask entry packs in the on-disk compile cache (docs/disk-cache.md, "Mask entry packs"): a
second process with a warm directory starts with the cross-grammar cache entries the first one
computed and gets the same masks; every damaged pack is ignored (and removed) with equal masks;
the core's loader refuses truncated and hostile packs whole."""

import glob
import hashlib
import json
import os
import struct
import subprocess
import sys

import pytest

import xgrammar2 as xgr
from xgrammar2 import _core
from xgrammar2 import disk_cache as dcm

from test_disk_cache import EOS, ENGINE, REQUESTS, VOCAB, compile_one, walk

SEEDS = (0, 1, 2)

CHILD = r'''
import gc, json, sys
import xgrammar2 as xgr
sys.path.insert(0, sys.argv[3])
from test_disk_cache import VOCAB, EOS, REQUESTS, compile_one, walk
from test_disk_cache_masks import SEEDS, mapped_packs
d = sys.argv[1] or False
info = xgr.TokenizerInfo(VOCAB, stop_token_ids=[EOS])
comp = xgr.GrammarCompiler(info, cache_dir=d)
dc = comp.disk_cache
if dc is not None and sys.argv[4] == "wait":  # the background pack load, before any compile
    assert dc.wait_packs(60)
grammars = [compile_one(comp, k, a) for k, a in REQUESTS]
before = xgr.get_cross_grammar_cache_stats()
out = {"masks": [walk(info, g, seed=s) for g in grammars for s in SEEDS],
       "computed": xgr.get_cross_grammar_cache_stats()["inserts"] - before["inserts"],
       "entries_before_walks": before["entries"]}
if dc is not None:
    dc.flush()
    dc.wait_packs(60)
    out.update(rejected=dc.rejected, pack_loads=dc.pack_loads, pack_writes=dc.pack_writes,
               loaded=dc.pack_entries_loaded, written=dc.pack_entries_written)
# the packs this process maps while their entries are cached, and after every entry is gone
out["mapped"] = mapped_packs()
del grammars
comp.clear_cache()
gc.collect()
xgr.clear_cross_grammar_cache()
out["mapped_after_clear"] = mapped_packs()
with open(sys.argv[2], "w") as f:
    json.dump(out, f)
'''


def mapped_packs():
    """The pack files (.xgm) this process has mapped (Linux: /proc/self/maps), or None."""
    try:
        with open("/proc/self/maps") as f:
            return len({ln.split()[-1] for ln in f if ln.rstrip().endswith(dcm._PACK_SUFFIX)
                        or ".xgm (deleted)" in ln})
    except OSError:
        return None


def run_child(tmp_path, d, name, *, wait=True, env_extra=None):
    out = tmp_path / f"{name}.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([ENGINE, env.get("PYTHONPATH", "")])
    env.pop(dcm.ENV_CACHE_DIR, None)
    env.pop(dcm.ENV_CACHE_MMAP, None)
    env.update(env_extra or {})
    subprocess.run([sys.executable, "-c", CHILD, str(d or ""), str(out),
                    os.path.dirname(os.path.abspath(__file__)), "wait" if wait else "race"],
                   check=True, env=env)
    return json.loads(out.read_text())


def packs(d):
    return sorted(glob.glob(os.path.join(str(d), "v*", "*.xgm")))


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return run_child(tmp_path_factory.mktemp("ref"), None, "ref")["masks"]


def test_second_process_starts_with_the_first_ones_entries(tmp_path, reference):
    d = tmp_path / "c"
    first = run_child(tmp_path, d, "first")
    assert first["masks"] == reference
    assert first["pack_writes"] >= 1 and first["written"] > 0 and packs(d)
    second = run_child(tmp_path, d, "second")
    assert second["masks"] == reference
    assert second["rejected"] == 0 and second["pack_loads"] >= 1
    assert second["loaded"] == first["written"]
    # the entries were there before the first mask, and the walks computed (almost) none
    assert second["entries_before_walks"] >= first["written"]
    assert second["computed"] < first["computed"] / 4
    # nothing new to write: no second pack of the same entries
    assert second["written"] == 0
    # the entries borrow from the mapped packs (no copy); the maps go with the last entry
    if second["mapped"] is not None:
        assert second["mapped"] >= 1 and first["mapped"] == 0
        assert second["mapped_after_clear"] == 0


def test_copied_packs_give_the_same_masks(tmp_path, reference):
    """XGRAMMAR2_CACHE_MMAP=0: entries copied out of the packs, nothing stays mapped."""
    d = tmp_path / "c"
    first = run_child(tmp_path, d, "first")
    second = run_child(tmp_path, d, "second", env_extra={dcm.ENV_CACHE_MMAP: "0"})
    assert second["masks"] == reference
    assert second["loaded"] == first["written"] and second["rejected"] == 0
    assert second["mapped"] in (None, 0)


def test_first_compile_does_not_wait_for_packs(tmp_path, reference):
    """The packs load on the background thread while the process compiles and walks (no
    wait): whatever the interleaving, the masks are those of a process without a directory."""
    d = tmp_path / "c"
    run_child(tmp_path, d, "first")
    for k in range(2):
        out = run_child(tmp_path, d, f"race{k}", wait=False)
        assert out["masks"] == reference
        assert out["rejected"] == 0 and out["pack_loads"] >= 1


def test_packs_replaced_or_unlinked_while_mapped(tmp_path, reference):
    """A pack renamed over (same name, as a rewrite publishes it) or unlinked (eviction) while
    its entries are in use: the mapping keeps the old file, the masks stay the same."""
    d = tmp_path / "c"
    run_child(tmp_path, d, "fill")
    ps = packs(d)
    assert ps
    info = xgr.TokenizerInfo(VOCAB, stop_token_ids=[EOS])
    xgr.clear_cross_grammar_cache()
    comp = xgr.GrammarCompiler(info, cache_dir=str(d))
    assert comp.disk_cache.wait_packs(60)
    assert comp.disk_cache.pack_loads == len(ps) and comp.disk_cache.rejected == 0
    grammars = [compile_one(comp, k, a) for k, a in REQUESTS]
    half = [walk(info, g, seed=SEEDS[0]) for g in grammars]
    for i, p in enumerate(ps):
        data = open(p, "rb").read()
        if i % 2 == 0:
            os.unlink(p)
        else:  # rename-publish of a new file under the same name
            with open(p + ".new", "wb") as f:
                f.write(data)
            os.replace(p + ".new", p)
    # drop every file: the mappings are all that is left
    for p in packs(d):
        os.unlink(p)
    xgr.clear_cross_grammar_cache()  # the grammars keep the entries they published
    assert [walk(info, g, seed=SEEDS[0]) for g in grammars] == half
    fresh = xgr.GrammarCompiler(info, cache_enabled=False, cache_dir=False)
    assert [walk(info, compile_one(fresh, k, a), seed=s) for k, a in REQUESTS
            for s in SEEDS] == reference
    del grammars
    comp.clear_cache()
    import gc

    gc.collect()
    xgr.clear_cross_grammar_cache()
    if mapped_packs() is not None:
        assert mapped_packs() == 0


def _rewrite(path, payload, *, magic=None, version=None, csum=None):
    data = open(path, "rb").read()
    h = list(dcm._HEADER.unpack_from(data, 0))
    if magic is not None:
        h[0] = magic
    if version is not None:
        h[1] = version
    h[5] = len(payload)
    h[6] = csum if csum is not None else hashlib.sha256(payload).digest()
    with open(path, "wb") as f:
        f.write(dcm._HEADER.pack(*h) + payload)


def _payload(path):
    return open(path, "rb").read()[dcm._HEADER.size:]


CORRUPTIONS = {
    "truncated file": lambda p: open(p, "r+b").truncate(dcm._HEADER.size + 7),
    "empty file": lambda p: open(p, "wb").close(),
    "flipped payload byte": lambda p: _rewrite(p, _payload(p)[:50] + bytes([_payload(p)[50] ^ 1])
                                               + _payload(p)[51:], csum=hashlib.sha256(_payload(p)).digest()),
    "wrong magic": lambda p: _rewrite(p, _payload(p), magic=b"XGR2XXX\x00"),
    "other format version": lambda p: _rewrite(p, _payload(p), version=99),
    # valid checksums over payloads the core must refuse
    "core: truncated pack": lambda p: _rewrite(p, _payload(p)[:-8]),
    "core: trailing bytes": lambda p: _rewrite(p, _payload(p) + bytes(8)),
    "core: other pack version": lambda p: _rewrite(p, _payload(p)[:12] + struct.pack("=I", 7)
                                                   + _payload(p)[16:]),
    "core: other vocabulary": lambda p: _rewrite(p, _payload(p)[:16] + bytes(8) + _payload(p)[24:]),
    "core: huge entry count": lambda p: _rewrite(p, _payload(p)[:36] + struct.pack("=i", 1 << 30)
                                                 + _payload(p)[40:]),
    "core: huge key count": lambda p: _rewrite(p, _payload(p)[:40] + struct.pack("=I", 1 << 31)
                                               + _payload(p)[44:]),
}


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_damaged_packs_are_ignored_with_equal_masks(tmp_path, reference, kind):
    d = tmp_path / "c"
    run_child(tmp_path, d, "fill")
    ps = packs(d)
    assert ps
    good = {p: open(p, "rb").read() for p in ps}
    for p in ps:
        CORRUPTIONS[kind](p)
    # without the grammars' layer files (disk_layers.py), which hold the entries the walks
    # refine, so the process computes the shared entries again and rewrites the pack
    for p in glob.glob(os.path.join(str(d), "v*", "*.xgl")):
        os.unlink(p)
    out = run_child(tmp_path, d, "after")
    assert out["masks"] == reference
    assert out["rejected"] >= len(ps) and out["loaded"] == 0
    # removed, and written again by the process that computed its entries (same content,
    # same name)
    assert out["written"] > 0 and packs(d)
    for p in ps:
        assert not os.path.exists(p) or open(p, "rb").read() == good[p]


# ---- the core's loader, in process ---------------------------------------------------------

def _build(info, after=0):
    ffi, lib = _core.ffi, _core.lib
    out, n = ffi.new("uint8_t **"), ffi.new("size_t *")
    seq, count = ffi.new("uint64_t *"), ffi.new("int32_t *")
    assert lib.xgr_mask_pack_build(info._handle(), after, out, n, seq, count) == 0
    try:
        return ffi.buffer(out[0], n[0])[:], seq[0], count[0]
    finally:
        lib.xgr_free(out[0])


def _load(info, data):
    ffi, lib = _core.ffi, _core.lib
    n = ffi.new("int32_t *")
    rc = lib.xgr_mask_pack_load(ffi.from_buffer(data), len(data), info._handle(), n)
    return rc, n[0], ffi.string(lib.xgr_last_error()).decode() if rc else ""


def test_core_round_trip_truncations_and_mutations():
    info = xgr.TokenizerInfo(VOCAB, stop_token_ids=[EOS])
    comp = xgr.GrammarCompiler(info, cache_enabled=False, cache_dir=False)
    xgr.clear_cross_grammar_cache()
    grammars = [compile_one(comp, k, a) for k, a in REQUESTS]
    ref = [walk(info, g, seed=s) for g in grammars for s in SEEDS]
    pack, seq, count = _build(info)
    assert count > 0
    assert _build(info, seq)[2] == 0  # nothing new since
    xgr.clear_cross_grammar_cache()
    assert _load(info, pack)[:2] == (0, count)
    assert xgr.get_cross_grammar_cache_stats()["entries"] == count
    assert _build(info)[2] == 0  # loaded entries are never written again
    fresh = [compile_one(comp, k, a) for k, a in REQUESTS]
    assert [walk(info, g, seed=s) for g in fresh for s in SEEDS] == ref
    # unaligned input is copied, not misread
    buf = bytearray(b"\0" + pack)
    xgr.clear_cross_grammar_cache()
    assert _load(info, memoryview(buf)[1:])[:2] == (0, count)
    # every proper prefix is refused whole
    for k in range(0, len(pack), max(1, len(pack) // 400)):
        xgr.clear_cross_grammar_cache()
        rc, _, msg = _load(info, pack[:k])
        assert rc != 0 and "corrupt mask pack" in msg
        assert xgr.get_cross_grammar_cache_stats()["entries"] == 0
    # another vocabulary's pack
    other = xgr.TokenizerInfo(VOCAB + ["zz"], stop_token_ids=[EOS])
    assert "another vocabulary" in _load(other, pack)[2]
    # random mutations: refused, or loaded without a fault (ASan/UBSan runs: tests/fuzz)
    import random

    rng = random.Random(7)
    for _ in range(300):
        b = bytearray(pack)
        for _ in range(rng.randrange(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        xgr.clear_cross_grammar_cache()
        _load(info, bytes(b))
    xgr.clear_cross_grammar_cache()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_starts_its_own_background_thread(tmp_path):
    """A child forked after the compiler was made (its background thread started) loads packs
    and writes files on a thread of its own: none of the parent's locks or queue is used."""
    import warnings

    d = tmp_path / "c"
    run_child(tmp_path, d, "fill")
    info = xgr.TokenizerInfo(VOCAB, stop_token_ids=[EOS])
    comp = xgr.GrammarCompiler(info, cache_dir=str(d))
    dc = comp.disk_cache
    assert dc.wait_packs(60) and dc._writer is not None
    r, w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads running
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        ok = False
        try:
            dc._request_sync(info._handle(), force=True)
            ok = dc.wait_packs(30)
            comp.compile_grammar('root ::= "zz" [a-c]* "b"\n')  # a miss: written by the child
            dc.flush(30)
            ok = ok and dc.writes == 1 and dc._writer is not None and dc._writer.is_alive()
        finally:
            os.write(w, b"1" if ok else b"0")
            os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.close(r)
    os.waitpid(pid, 0)
    assert got == b"1"


KILLED_CHILD = r'''
import sys, time
import xgrammar2 as xgr
sys.path.insert(0, sys.argv[2])
from test_disk_cache import VOCAB, EOS, REQUESTS, compile_one, walk
info = xgr.TokenizerInfo(VOCAB, stop_token_ids=[EOS])
comp = xgr.GrammarCompiler(info, cache_dir=sys.argv[1])
grammars = [compile_one(comp, k, a) for k, a in REQUESTS]
for g in grammars:  # decoding computes the entries, after the compiles
    walk(info, g, seed=0)
print("walked", flush=True)
time.sleep(600)  # killed here: no flush, no exit hook
'''


def test_a_killed_process_leaves_the_entries_it_computed_while_decoding(tmp_path, reference):
    """vLLM SIGKILLs its engine core on shutdown (exit hooks never run): the background
    thread writes the entries decoding computed on a timer, so they survive the kill."""
    import signal
    import time
    d = tmp_path / "c"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([ENGINE, env.get("PYTHONPATH", "")])
    env.pop(dcm.ENV_CACHE_DIR, None)
    p = subprocess.Popen([sys.executable, "-c", KILLED_CHILD, str(d),
                          os.path.dirname(os.path.abspath(__file__))],
                         env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "walked"
        # the timer writes within _PACK_WRITE_S of the last compile, then at doubling intervals
        deadline = time.monotonic() + 20 * dcm._PACK_WRITE_S
        while not packs(d) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(2 * dcm._PACK_WRITE_S + 1)  # a second timed write covers the last walks
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert packs(d), "no pack written before the kill"
    second = run_child(tmp_path, d, "second")
    assert second["masks"] == reference
    assert second["rejected"] == 0 and second["loaded"] > 0
    # the walks of the second process found (almost) every entry in the dead one's packs
    fresh = run_child(tmp_path, None, "fresh")
    assert second["computed"] < fresh["computed"]
