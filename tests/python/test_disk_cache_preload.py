"""The preload of the on-disk compile cache (docs/disk-cache.md, "Preload"): a compiler made
with a warm directory reads its most recently used grammar files on the background thread, and
a request for one of them is a hit that opens no file, with the masks of a process without a
directory; damaged files are ignored (removed, counted), another vocabulary's are left alone;
the byte budget and the count cap hold; 0 turns it off; a request never waits for it."""

import glob
import os
import threading
import time
import warnings

import pytest

import xgrammar2 as xgr
from xgrammar2 import disk_cache as dcm
from xgrammar2 import disk_layers as dlm
from xgrammar2 import disk_preload as dpm
from xgrammar2.disk_layers import layer_count

from test_disk_cache import EOS, REQUESTS, VOCAB, compile_one, files, info, reference, walk  # noqa: F401  (fixtures)


@pytest.fixture(autouse=True)
def _default_env(monkeypatch):
    for name in (dpm.ENV_PRELOAD_BYTES, dpm.ENV_PRELOAD_FILES, dlm.ENV_CACHE_LAYERS, dcm.ENV_CACHE_DIR):
        monkeypatch.delenv(name, raising=False)


def layer_files(d):
    return sorted(glob.glob(os.path.join(str(d), "v*", "*" + dlm.LAYER_SUFFIX)))


def fill(info, d):
    """A directory a first process filled: every request's grammar and its layer file."""
    comp = xgr.GrammarCompiler(info, cache_dir=d)
    for k, a in REQUESTS:
        walk(info, compile_one(comp, k, a))  # (the walk publishes the layers that get written)
    comp.disk_cache.flush()
    assert files(d) and layer_files(d)
    return files(d)


def held(dc):
    """key digest -> bytes of every preloaded grammar no request has taken yet: those waiting
    in the preload's map and those it put into the compile cache."""
    out = {k: e.size for k, e in dc.preload.map.items()}
    out.update(dc.preload.adopted)
    return out


def preloaded(info, d, **kw):
    comp = xgr.GrammarCompiler(info, cache_dir=d, **kw)
    assert comp.disk_cache.wait_preload(60)
    return comp, comp.disk_cache


def served(info, comp):
    """Every request through ``comp``: its masks, and the layer entries each grammar came with."""
    grammars = [compile_one(comp, k, a) for k, a in REQUESTS]
    counts = [layer_count(g) for g in grammars]
    return [walk(info, g) for g in grammars], counts


@pytest.fixture
def warm(tmp_path, info):
    d = tmp_path / "c"
    names = fill(info, d)
    # what a process without the preload gets from this directory
    os.environ[dpm.ENV_PRELOAD_BYTES] = "0"
    try:
        comp = xgr.GrammarCompiler(info, cache_dir=d)
    finally:
        del os.environ[dpm.ENV_PRELOAD_BYTES]
    dc = comp.disk_cache
    _, counts = served(info, comp)
    expect = {"hits": dc.hits, "misses": dc.misses, "layer_loads": dc.layer_loads,
              "layer_entries_loaded": dc.layer_entries_loaded, "counts": counts}
    assert dc.preload.loads == 0 and dc.misses == 0 and dc.hits > 0
    return d, names, expect


def test_preloaded_grammars_give_the_masks_of_a_process_without_a_directory(info, reference, warm):
    d, names, expect = warm
    comp, dc = preloaded(info, d)
    assert dc.preload.loads == len(names) and len(held(dc)) == len(names)
    # JSON schemas, EBNF, regex and builtin JSON go into the compile cache; the linked tool
    # sets and the caller's Grammar wait in the map
    assert len(dc.preload.adopted) == 5 and len(comp._cache) == 5
    assert dc.preload.held == sum(held(dc).values()) > 0
    assert dc.rejected == 0 and dc.preload.skipped == 0
    masks, counts = served(info, comp)
    assert masks == reference
    # the same hits, layers and counters as the ordinary path; every grammar came from memory
    assert counts == expect["counts"] and any(counts)
    assert (dc.hits, dc.misses) == (expect["hits"], expect["misses"])
    assert dc.layer_loads == expect["layer_loads"]
    assert dc.layer_entries_loaded == expect["layer_entries_loaded"]
    assert dc.preload.hits == len(names) and not held(dc) and dc.preload.held == 0


def test_a_preload_hit_opens_no_file(info, reference, warm, monkeypatch):
    d, names, expect = warm
    comp, dc = preloaded(info, d)
    opened = []
    real_open = os.open

    def counting_open(path, *a, **kw):
        opened.append(os.fspath(path))
        return real_open(path, *a, **kw)

    monkeypatch.setattr(dcm.os, "open", counting_open)
    # nor could it: the files are gone (the layer files too, which the core opens)
    for f in files(d) + layer_files(d):
        os.unlink(f)
    masks, counts = served(info, comp)
    monkeypatch.undo()
    assert masks == reference and counts == expect["counts"]
    assert dc.hits == expect["hits"] and dc.misses == 0 and dc.preload.hits == len(names)
    assert not [p for p in opened if p.endswith((".xgc", dlm.LAYER_SUFFIX))]


def test_damaged_and_foreign_files_met_by_the_preload_are_ignored(tmp_path, info, reference, warm):
    d, names, expect = warm
    # another vocabulary's compiler shares the directory: its files are not this one's to judge
    other = xgr.TokenizerInfo(VOCAB[:-2] + ["zz", "<eos>"], stop_token_ids=[EOS])
    comp_o = xgr.GrammarCompiler(other, cache_dir=d)
    compile_one(comp_o, *REQUESTS[0])
    comp_o.disk_cache.flush()
    # (its own preload skipped this vocabulary's files; done before they are damaged in place)
    assert comp_o.disk_cache.wait_preload(60) and comp_o.disk_cache.preload.skipped == len(names)
    foreign = sorted(set(files(d)) - set(names))
    assert len(foreign) == 1
    flipped, truncated, resealed = names[0], names[1], names[2]
    data = bytearray(open(flipped, "rb").read())
    data[-3] ^= 0x5A  # the checksum fails
    open(flipped, "wb").write(bytes(data))
    data = open(truncated, "rb").read()
    open(truncated, "wb").write(data[:len(data) // 2])
    # a file whose header names another key (a file copied under a wrong name)
    os.replace(names[3], resealed)
    comp, dc = preloaded(info, d)
    assert dc.preload.skipped == 1 and os.path.exists(foreign[0])
    assert dc.rejected == 3 and dc.preload.loads == len(names) - 4
    assert not any(os.path.exists(p) for p in (flipped, truncated, resealed, names[3]))
    masks, _ = served(info, comp)
    assert masks == reference
    assert dc.preload.hits == len(names) - 4 and dc.misses == 4 and dc.rejected == 3


def test_the_byte_budget_and_the_count_cap_hold(info, warm, monkeypatch):
    d, names, _ = warm
    # newest first: give the files a known order
    order = list(reversed(names))
    for i, f in enumerate(order):
        os.utime(f, (1_000_000 - i * 100, 1_000_000 - i * 100))
    _, dc = preloaded(info, d)
    sizes = {dc.file_for(k): v for k, v in held(dc).items()}
    assert len(sizes) == len(names)
    # the count cap: the two newest
    monkeypatch.setenv(dpm.ENV_PRELOAD_FILES, "2")
    _, dc = preloaded(info, d)
    assert dc.preload.max_files == 2 and dc.preload.loads == 2
    assert sorted(map(dc.file_for, held(dc))) == sorted(order[:2])
    monkeypatch.delenv(dpm.ENV_PRELOAD_FILES)
    # the byte budget: what the first three newest hold, less one byte, so the third does not fit
    budget = sizes[order[0]] + sizes[order[1]] + sizes[order[2]] - 1
    monkeypatch.setenv(dpm.ENV_PRELOAD_BYTES, str(budget))
    _, dc = preloaded(info, d)
    got = {dc.file_for(k) for k in held(dc)}
    assert dc.preload.budget == budget and dc.preload.held <= budget
    assert dc.preload.held == sum(sizes[f] for f in got)
    assert order[0] in got and order[1] in got and order[2] not in got
    # (a smaller, older one may still fit behind it)
    assert all(sizes[f] + sizes[order[0]] + sizes[order[1]] <= budget for f in got - set(order[:2]))
    # the preload touches no file: the LRU order is the requests'
    assert [os.stat(f).st_mtime for f in order] == [1_000_000 - i * 100 for i in range(len(order))]


@pytest.mark.parametrize("name", [dpm.ENV_PRELOAD_BYTES, dpm.ENV_PRELOAD_FILES])
def test_preload_off_loads_nothing(info, reference, warm, monkeypatch, name):
    d, names, expect = warm
    monkeypatch.setenv(name, "0")
    comp, dc = preloaded(info, d)
    assert not dc.preload.enabled and not dc.preload.started
    assert dc.preload.loads == 0 and not held(dc)
    masks, counts = served(info, comp)
    assert masks == reference and counts == expect["counts"]
    assert dc.hits == expect["hits"] and dc.preload.hits == 0


def test_a_bad_budget_warns_and_keeps_the_default(info, tmp_path, monkeypatch):
    monkeypatch.setenv(dpm.ENV_PRELOAD_BYTES, "64MB")
    with pytest.warns(RuntimeWarning, match=dpm.ENV_PRELOAD_BYTES):
        comp = xgr.GrammarCompiler(info, cache_dir=tmp_path / "c")
    assert comp.disk_cache.preload.budget == dpm.DEFAULT_PRELOAD_BYTES


def gate_preload(monkeypatch):
    """Holds the preload before its first file until the returned event is set."""
    gate = threading.Event()
    real = dpm.Preloader._one

    def held(self, *a):
        gate.wait(60)
        return real(self, *a)

    monkeypatch.setattr(dpm.Preloader, "_one", held)
    return gate


def test_a_request_during_the_preload_takes_the_ordinary_path(info, reference, warm, monkeypatch):
    d, names, expect = warm
    gate = gate_preload(monkeypatch)
    comp = xgr.GrammarCompiler(info, cache_dir=d)
    dc = comp.disk_cache
    t0 = time.monotonic()
    masks, counts = served(info, comp)  # the preload is held: the requests do not wait for it
    assert time.monotonic() - t0 < 30
    assert not dc.wait_preload(0) and dc.preload.active
    gate.set()
    assert dc.wait_preload(60)
    assert masks == reference and counts == expect["counts"]
    assert dc.hits == expect["hits"] and dc.preload.hits == 0 and dc.rejected == 0
    # the preload left alone every key the requests took: nothing loaded twice
    assert dc.preload.loads == 0 and not held(dc)
    assert dc.layer_loads == expect["layer_loads"]


@pytest.mark.parametrize("index", [0, 5])  # from the compile cache, from the preload's map
def test_a_preload_hit_of_an_old_file_touches_it(info, warm, index):
    d, names, _ = warm
    for f in files(d) + layer_files(d):
        os.utime(f, (1, 1))
    comp, dc = preloaded(info, d)
    assert all(os.stat(f).st_mtime == 1 for f in files(d))
    assert len(dc.preload.adopted) == 5 and len(dc.preload.map) == 3
    g = compile_one(comp, *REQUESTS[index])
    dc.flush()
    (digest,) = [k for k, v in dc._alive.items() if v is g]
    assert digest not in held(dc) and dc.preload.hits == 1
    assert os.stat(dc.file_for(digest)).st_mtime > 1
    assert sum(os.stat(f).st_mtime > 1 for f in files(d)) == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_mid_preload_does_not_wait_for_it(info, reference, warm, monkeypatch):
    d, _, _ = warm
    gate = gate_preload(monkeypatch)
    comp = xgr.GrammarCompiler(info, cache_dir=d)
    assert not comp.disk_cache.wait_preload(0.05)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # (fork with threads)
        pid = os.fork()
    if pid == 0:  # the child: no background thread, no preload in flight
        code = 1
        try:
            dc = comp.disk_cache
            if dc.wait_preload(5) and not dc.preload.active:
                masks, _ = served(info, comp)
                code = 0 if masks == reference else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    gate.set()
    assert comp.disk_cache.wait_preload(60)
    assert os.WEXITSTATUS(status) == 0
