"""Layer files in the on-disk compile cache (docs/disk-cache.md, "Layer packs"): each grammar's
own mask layers are stored next to its file and loaded with it, so a second process with a warm
directory gets the same masks on every step without building them; every damaged layer file
(truncated at each section, flipped bytes, another version, vocabulary or grammar) is ignored
and removed with equal masks; layer files count in the budget and are evicted by LRU."""

import glob
import hashlib
import json
import os
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

import xgrammar2 as xgr
from xgrammar2 import _core
from xgrammar2 import disk_cache as dcm
from xgrammar2 import disk_layers as dlm

from test_disk_cache import EOS, ENGINE, REQUESTS, VOCAB, compile_one, walk

SEEDS = (0, 1, 2)

CHILD = r'''
import json, sys
import xgrammar2 as xgr
sys.path.insert(0, sys.argv[3])
from test_disk_cache import VOCAB, EOS, REQUESTS, compile_one, walk
from test_disk_cache_layers import SEEDS
from xgrammar2.disk_layers import layer_count
d = sys.argv[1] or False
info = xgr.TokenizerInfo(VOCAB, stop_token_ids=[EOS])
comp = xgr.GrammarCompiler(info, cache_dir=d)
dc = comp.disk_cache
if dc is not None:
    assert dc.wait_packs(60)
grammars = [compile_one(comp, k, a) for k, a in REQUESTS]
counts = [layer_count(g) for g in grammars]
out = {"masks": [walk(info, g, seed=s) for g in grammars for s in SEEDS],
       "layers_at_load": counts,
       "built": [layer_count(g) - n for g, n in zip(grammars, counts)]}
if dc is not None:
    dc.flush()
    out.update(hits=dc.hits, rejected=dc.rejected, layer_loads=dc.layer_loads,
               layer_writes=dc.layer_writes, layer_rejected=dc.layer_rejected,
               loaded=dc.layer_entries_loaded, written=dc.layer_entries_written)
with open(sys.argv[2], "w") as f:
    json.dump(out, f)
'''


def run_child(tmp_path, d, name):
    out = tmp_path / f"{name}.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([ENGINE, env.get("PYTHONPATH", "")])
    env.pop(dcm.ENV_CACHE_DIR, None)
    env.pop(dcm.ENV_CACHE_MMAP, None)
    subprocess.run([sys.executable, "-c", CHILD, str(d or ""), str(out),
                    os.path.dirname(os.path.abspath(__file__))], check=True, env=env)
    return json.loads(out.read_text())


def layer_files(d):
    return sorted(glob.glob(os.path.join(str(d), f"v{dcm.DISK_FORMAT_VERSION}", "*" + dlm.LAYER_SUFFIX)))


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A directory filled by one process (grammars, packs, layer files), and the masks of a
    process without a directory."""
    tmp = tmp_path_factory.mktemp("layers")
    ref = run_child(tmp, None, "nodir")
    d = tmp / "cache"
    fill = run_child(tmp, d, "fill")
    assert fill["masks"] == ref["masks"]
    return d, ref, fill


def test_second_process_loads_every_grammars_layers_with_equal_masks(tmp_path, warm):
    d, ref, fill = warm
    assert fill["layer_writes"] == len(REQUESTS) and fill["written"] > 0
    assert len(layer_files(d)) == len(REQUESTS)
    got = run_child(tmp_path, d, "warm")
    assert got["masks"] == ref["masks"]
    assert got["hits"] == len(REQUESTS) and got["rejected"] == 0
    assert got["layer_loads"] == len(REQUESTS) and got["loaded"] == fill["written"]
    assert got["layers_at_load"] == fill["built"]
    # the walks (the same as the first process's) found every entry they needed loaded:
    # the first pass builds no layer of its own (tool-call grammars and JSON schemas alike)
    assert got["built"] == [0] * len(REQUESTS)
    assert sum(fill["built"]) > 0
    # nothing new: the layer files are not written again
    assert got["layer_writes"] == 0


def _parse(payload):
    """Section offsets of a layer pack (csrc/mask/layer_pack.c): the end of the core header,
    the start of every base entry and every slot entry, and the end."""
    pad = lambda n: (n + 7) & ~7  # noqa: E731
    rw = struct.unpack_from("<i", payload, 32)[0]
    n_bases, n_ents = struct.unpack_from("<ii", payload, 56)
    at, bounds = 64, [64]
    for _ in range(n_bases):
        f = struct.unpack_from("<12i", payload, at)
        form, n_ids, _, _, n_unc, n_pops, n_runs, max_units, n_unit, ps_n, ps_bytes, _ = f
        at += 48 + pad(rw * 4 if form == 2 else n_ids * 4) + pad(n_unc * 4) + pad((n_unc + 1) * 4)
        at += pad(n_pops * 2)
        if n_runs >= 0:
            at += pad((n_runs + 1) * 4) + pad(n_runs * 4)
        if max_units:
            at += pad(n_unit * 4) + pad((max_units + 2) * 4)
        if ps_n >= 0:
            at += pad(n_unc * 4) + pad((ps_n + 1) * 4) + pad(ps_bytes)
        bounds.append(at)
    kinds = set()
    for _ in range(n_ents):
        slot, base, n_ids, n_unc, _, _, has_bits, has_exit, has_ub, ub, _, _ = \
            struct.unpack_from("<12i", payload, at)
        kinds.add("slot base" if base < 0 else "exit_first" if has_exit else "base")
        at += 48 + 2 * pad(n_ids * 4) + pad(n_unc * 4) + (pad(rw * 4) if has_bits else 0)
        at += 32 if has_exit else 0
        at += pad((n_unc + 1) * 4) + pad(ub) if has_ub else 0
        bounds.append(at)
    assert at == len(payload)
    return bounds, kinds


def _rewrite(path, payload=None, *, header=None, fix_checksum=True):
    data = open(path, "rb").read()
    H = dcm._HEADER
    magic, version, flags, vfp, kd, plen, csum = H.unpack_from(data, 0)
    old = data[H.size:]
    payload = old if payload is None else payload
    fields = dict(magic=magic, version=version, flags=flags, vfp=vfp, kd=kd, plen=len(payload),
                  csum=hashlib.sha256(payload).digest() if fix_checksum else csum)
    fields.update(header or {})
    with open(path, "wb") as f:
        f.write(H.pack(*fields.values()) + payload)


def _core_header_edit(p, at, value):
    return p[:at] + value + p[at + len(value):]


def _corruptions(d):
    """name -> edit(path of a layer file, paths of all of them)."""
    out = {
        "flipped byte (checksum)": lambda p, _: _rewrite(
            p, _flip(open(p, "rb").read()[dcm._HEADER.size:], 100), fix_checksum=False),
        "file version": lambda p, _: _rewrite(p, header={"version": dcm.DISK_FORMAT_VERSION + 1}),
        "file magic": lambda p, _: _rewrite(p, header={"magic": b"XGR2XXX\x00"}),
        "file vocabulary": lambda p, _: _rewrite(p, header={"vfp": b"\x01" * 32}),
        "another grammar's file": lambda p, all_: _copy_other(p, all_, keep_key=False),
        "another grammar's layers (header forged)": lambda p, all_: _copy_other(p, all_, keep_key=True),
        "core version": lambda p, _: _rewrite(p, _core_header_edit(_payload(p), 12, b"\x09\x00\x00\x00")),
        "core vocabulary": lambda p, _: _rewrite(p, _core_header_edit(_payload(p), 16, b"\xff" * 8)),
        "core byte order": lambda p, _: _rewrite(p, _core_header_edit(_payload(p), 8, b"\x01\x02\x03\x04")),
        "core grammar hash": lambda p, _: _rewrite(p, _core_header_edit(_payload(p), 40, b"\x00" * 8)),
        "trailing bytes": lambda p, _: _rewrite(p, _payload(p) + b"\x00" * 8),
        "empty": lambda p, _: open(p, "wb").close(),
    }
    return out


def _payload(path):
    return open(path, "rb").read()[dcm._HEADER.size:]


def _flip(b, at):
    at = min(at, len(b) - 1)
    return b[:at] + bytes([b[at] ^ 0x5A]) + b[at + 1:]


_originals: dict = {}


def _copy_other(path, all_paths, keep_key):
    """Writes the next file's original bytes (in all_paths' order) over path."""
    for p in all_paths:
        _originals.setdefault(p, open(p, "rb").read())
    data = _originals[all_paths[(all_paths.index(path) + 1) % len(all_paths)]]
    with open(path, "wb") as f:
        f.write(data)
    if keep_key:  # a hostile writer: the header names this grammar, the core must refuse
        kd = bytes.fromhex(os.path.basename(path)[:64])
        _rewrite(path, header={"kd": kd})


def _load_all(d):
    """The masks of every request from a fresh compiler over directory d (this process, the
    cross-grammar cache emptied), and its disk cache."""
    xgr.clear_cross_grammar_cache()
    info = xgr.TokenizerInfo(VOCAB, stop_token_ids=[EOS])
    comp = xgr.GrammarCompiler(info, cache_dir=str(d))
    grammars = [compile_one(comp, k, a) for k, a in REQUESTS]
    masks = [walk(info, g, seed=s) for g in grammars for s in SEEDS]
    dc = comp.disk_cache
    dc.keep = (comp, grammars)  # alive while the test looks at dc (layers are watched weakly)
    _kept.append(dc)
    return masks, dc


#: Disk caches holding their compiler and grammars (``keep``): released after each test, since
#: a cache's writer thread keeps the cache alive, which would keep the grammars (and the pack
#: mappings their entries borrow from) alive for the rest of the session.
_kept: list = []


@pytest.fixture(autouse=True)
def _release_kept():
    yield
    for dc in _kept:
        dc.keep = None
    _kept.clear()


def _copy_dir(src, dst):
    import shutil

    shutil.copytree(str(src), str(dst))
    return dst


@pytest.mark.parametrize("kind", sorted(_corruptions(None)))
def test_damaged_layer_files_are_ignored_with_equal_masks(tmp_path, warm, kind):
    d, ref, _ = warm
    d = _copy_dir(d, tmp_path / "cache")
    files = layer_files(d)
    edit = _corruptions(d)[kind]
    for p in files:
        edit(p, files)
    masks, dc = _load_all(d)
    assert masks == ref["masks"]
    assert dc.layer_rejected == len(files) and dc.layer_loads == 0
    assert dc.hits == len(REQUESTS)  # the grammar files themselves are fine
    dc.flush()  # the layers built again are written again (a timed write may add one more)
    assert dc.layer_writes >= len(files) and all(os.path.exists(p) for p in files)


def test_layer_files_truncated_at_every_section_are_ignored(tmp_path, warm):
    """Cut at every section boundary (core header, each base entry, each slot entry) and in
    the middle of each, the checksum made valid, so the core's checks are what refuses it."""
    d, ref, _ = warm
    files = layer_files(d)
    kinds = set()
    cuts = {}
    for p in files:
        payload = _payload(p)
        bounds, k = _parse(payload)
        kinds |= k
        pts = {0, 8, 40, 63}
        for a, b in zip(bounds, bounds[1:]):
            pts |= {a, (a + b) // 2, b - 8}
        cuts[p] = sorted(x for x in pts if 0 <= x < len(payload))
    assert "base" in kinds, kinds  # (caller-context entries: the Llama test below)
    rounds = max(len(c) for c in cuts.values())
    # every file cut at its i-th point in round i (rounds spread over few loads)
    step = max(1, rounds // 6)
    for i in list(range(0, rounds, step)) + [rounds - 1]:
        dd = _copy_dir(d, tmp_path / f"cut{i}")
        for p in files:
            q = os.path.join(str(dd), os.path.relpath(p, str(d)))
            c = cuts[p][min(i, len(cuts[p]) - 1)]
            _rewrite(q, _payload(p)[:c])
        masks, dc = _load_all(dd)
        assert masks == ref["masks"]
        assert dc.layer_rejected == len(files) and dc.layer_loads == 0


def test_every_cut_point_is_refused_by_the_core(warm):
    """Each cut of the section list, against the core directly (no files): refused whole."""
    d, _, _ = warm
    ffi, lib = _core.ffi, _core.lib
    info = xgr.TokenizerInfo(VOCAB, stop_token_ids=[EOS])
    comp = xgr.GrammarCompiler(info, cache_dir=False)
    for p in layer_files(d):
        payload = _payload(p)
        bounds, _ = _parse(payload)
        # a grammar from the directory whose layers are this file's (same key digest)
        digest = bytes.fromhex(os.path.basename(p)[:64])
        data = open(os.path.join(os.path.dirname(p), digest.hex() + ".xgc"), "rb").read()
        parts = dcm.check_file_bytes(data)
        assert parts is not None
        image = parts[2]
        for c in sorted(set(bounds) | {b + 4 for b in bounds}):
            if c >= len(payload):
                continue
            cp = ffi.new("xgr_compiled **")
            assert lib.xgr_compiled_from_image(ffi.from_buffer(image), len(image), info._handle(),
                                               comp._opts, cp) == 0
            got = ffi.new("int32_t *")
            rc = lib.xgr_layer_pack_load(cp[0], ffi.from_buffer(payload), c, got)
            assert rc == lib.XGR_ERR_INVALID_ARG
            assert lib.xgr_compiled_layer_count(cp[0]) == 0
            lib.xgr_compiled_release(cp[0])


def test_layer_files_count_in_the_budget_and_are_evicted_by_lru(tmp_path, warm):
    d, ref, _ = warm
    d = _copy_dir(d, tmp_path / "cache")
    v = os.path.join(str(d), f"v{dcm.DISK_FORMAT_VERSION}")
    files = layer_files(d)
    info = xgr.TokenizerInfo(VOCAB, stop_token_ids=[EOS])
    comp = xgr.GrammarCompiler(info, cache_dir=str(d))
    dc = comp.disk_cache
    total = dc.size_bytes()
    assert total == sum(os.path.getsize(os.path.join(v, n)) for n in os.listdir(v))
    # the layer files are the least recently used: a budget under the total removes them
    # first, oldest first, before any grammar or pack file
    for i, p in enumerate(files):
        os.utime(p, (1000 + i, 1000 + i))
    dc.limit_bytes = total - 1
    removed = dc.evict()
    assert removed >= 1
    gone = [not os.path.exists(p) for p in files]
    assert gone[0] and gone == sorted(gone, reverse=True)  # a prefix, by age
    others = [n for n in os.listdir(v) if not n.endswith(dlm.LAYER_SUFFIX)]
    assert removed == sum(gone) or all(gone)
    assert len(others) + len(files) - sum(gone) == len(os.listdir(v))
    assert dc.size_bytes() <= dc.limit_bytes
    # a grammar whose layer file was evicted loads without it, with equal masks
    masks, dc2 = _load_all(d)
    assert masks == ref["masks"]
    assert dc2.layer_loads == len(files) - sum(gone) and dc2.layer_rejected == 0


def test_a_hit_touches_its_layer_file_with_its_grammar_file(tmp_path, warm):
    """The LRU touch of a hit (on the background thread, done by flush) moves the grammar file
    and its layer file to the front together; files touched lately are left as they are."""
    d, ref, _ = warm
    d = _copy_dir(d, tmp_path / "cache")
    v = os.path.join(str(d), f"v{dcm.DISK_FORMAT_VERSION}")
    layers = layer_files(d)
    grammars = [p[: -len(dlm.LAYER_SUFFIX)] + ".xgc" for p in layers]
    assert layers and all(os.path.exists(g) for g in grammars)
    for p in layers + grammars:
        os.utime(p, (1000, 1000))
    masks, dc = _load_all(d)
    assert masks == ref["masks"] and dc.layer_loads == len(layers)
    dc.flush()
    now = time.time()
    assert all(now - os.stat(p).st_mtime < 60 for p in layers + grammars)
    recent = now - 5
    for p in layers + grammars:
        os.utime(p, (recent, recent))
    masks, dc = _load_all(d)
    dc.flush()
    assert masks == ref["masks"] and dc.layer_loads == len(layers)
    assert all(os.stat(p).st_mtime == pytest.approx(recent, abs=1e-3) for p in layers + grammars)
    assert len(os.listdir(v)) >= len(layers) * 2


def test_layer_file_larger_than_the_budget_is_not_written(tmp_path):
    info = xgr.TokenizerInfo(VOCAB, stop_token_ids=[EOS])
    comp = xgr.GrammarCompiler(info, cache_dir=str(tmp_path / "c"), cache_dir_limit_bytes=1 << 20)
    g = compile_one(comp, *REQUESTS[0])
    walk(info, g)
    dc = comp.disk_cache
    dc.flush()
    assert dc.layer_writes >= 1
    dc.limit_bytes = 200  # smaller than any layer file
    comp2 = xgr.GrammarCompiler(info, cache_dir=str(tmp_path / "c2"), cache_dir_limit_bytes=1 << 20)
    g2 = compile_one(comp2, *REQUESTS[0])
    comp2.disk_cache.flush()  # the grammar is written, its layers (none built yet) are not
    walk(info, g2)
    comp2.disk_cache.limit_bytes = 200
    comp2.disk_cache.flush()
    assert comp2.disk_cache.layer_writes == 0


def test_layers_grow_and_are_rewritten(tmp_path):
    """A grammar read from the directory that builds more entries later (a walk the first
    process never took) has its layer file rewritten with them."""
    info = xgr.TokenizerInfo(VOCAB, stop_token_ids=[EOS])
    d = tmp_path / "c"
    comp = xgr.GrammarCompiler(info, cache_dir=str(d))
    g = compile_one(comp, *REQUESTS[5])
    walk(info, g, steps=3)
    comp.disk_cache.flush()
    assert comp.disk_cache.layer_writes >= 1
    xgr.clear_cross_grammar_cache()
    comp2 = xgr.GrammarCompiler(info, cache_dir=str(d))
    g2 = compile_one(comp2, *REQUESTS[5])
    first = comp2.disk_cache.layer_entries_loaded
    assert 0 < first <= dlm.layer_count(g)
    before = dlm.layer_count(g2)
    for seed in SEEDS:
        walk(info, g2, steps=40, seed=seed)
    assert dlm.layer_count(g2) > before
    comp2.disk_cache.flush()
    assert comp2.disk_cache.layer_writes >= 1
    # the rewritten file holds the new entries too
    xgr.clear_cross_grammar_cache()
    comp3 = xgr.GrammarCompiler(info, cache_dir=str(d))
    compile_one(comp3, *REQUESTS[5])
    assert comp3.disk_cache.layer_entries_loaded > first


# ---- a real vocabulary: tool calls over 20 BFCL tools and JSON schemas ---------------------

from pathlib import Path  # noqa: E402

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def _llama():
    path = DATA / "tokenizers" / "canonical" / "llama-3.1.json"
    if not path.is_file():
        pytest.skip(f"tokenizer not found at {path}")
    return xgr.TokenizerInfo.from_canonical_json(str(path))


def _tools(n):
    from test_compiled_memory import _bfcl_tools

    return _bfcl_tools(n)


def _tool_tag(tools):
    return json.dumps({"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<function="],
        "tags": [{"type": "tag", "begin": f"<function={t['name']}>",
                  "content": {"type": "json_schema", "json_schema": t["parameters"]},
                  "end": "</function>"} for t in tools]}})


def _trace(info, compiled, text, by_bytes, max_len):
    """The masks along `text`, each step taking the longest allowed token that the rest of
    the text starts with (then the stop token)."""
    m = xgr.GrammarMatcher(compiled)
    bm = xgr.allocate_token_bitmask(1, info.vocab_size)
    rows, rest = [], text.encode()
    while True:
        m.fill_next_token_bitmask(bm)
        row = np.asarray(bm[0]).tobytes()
        rows.append(hashlib.sha256(row).hexdigest())
        bits = int.from_bytes(row, "little")
        pick = None
        for n in range(min(max_len, len(rest)), 0, -1):
            t = by_bytes.get(rest[:n])
            if t is not None and bits >> t & 1:
                pick, rest = t, rest[n:]
                break
        if pick is None:
            break
        assert m.accept_token(pick)
    return rows, rest


@pytest.fixture(scope="module")
def llama_requests():
    info = _llama()
    vocab = info.decoded_vocab
    by_bytes = {}
    for i, t in enumerate(vocab):
        b = t if isinstance(t, bytes) else t.encode()
        if b and b not in by_bytes and i not in info.stop_token_ids and i not in info.special_token_ids:
            by_bytes[b] = i
    max_len = max(len(b) for b in by_bytes)
    tools = _tools(20)
    reqs = []
    for k in (0, 7):
        t = tools[k]
        args = {}
        for name, p in list(t["parameters"].get("properties", {}).items()):
            if name in t["parameters"].get("required", []):
                args[name] = p["enum"][0] if p.get("enum") else {"integer": 3, "number": 2.5, "boolean": True, "array": [],
                              "object": {}}.get(p.get("type"), "x")
        text = f'Let me look that up. <function={t["name"]}>{json.dumps(args)}</function>'
        reqs.append(("structural_tag", _tool_tag(tools), text))
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
              "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name", "age"]}
    reqs.append(("json_schema", json.dumps(schema), json.dumps({"name": "Ada Lovelace", "age": 36,
                                                                 "tags": ["math", "engines"]})))
    schema2 = {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"},
               "ok": {"type": "boolean"}}, "required": ["id"]}, "maxItems": 5}
    reqs.append(("json_schema", json.dumps(schema2), json.dumps([{"id": 1, "ok": False}, {"id": 22}])))
    return info, by_bytes, max_len, reqs


def test_real_vocabulary_tool_calls_and_schemas_equal_masks_from_layers(tmp_path, llama_requests):
    info, by_bytes, max_len, reqs = llama_requests

    def traces(comp):
        out, grammars = [], []
        for kind, arg, text in reqs:
            g = compile_one(comp, kind, arg)
            grammars.append(g)
            before = dlm.layer_count(g)
            rows, rest = _trace(info, g, text, by_bytes, max_len)
            out.append((rows, rest, before, dlm.layer_count(g)))
        return out, grammars

    xgr.clear_cross_grammar_cache()
    ref, _ = traces(xgr.GrammarCompiler(info, cache_dir=False))
    assert all(rest == b"" for _, rest, _, _ in ref)  # every text was followed to its end
    d = tmp_path / "c"
    xgr.clear_cross_grammar_cache()
    comp = xgr.GrammarCompiler(info, cache_dir=str(d))
    first, keep = traces(comp)
    comp.disk_cache.flush()
    # (the timer may have written a file before the next trace added to it: then again)
    assert comp.disk_cache.layer_writes >= len({(k, a) for k, a, _ in reqs})
    assert len(layer_files(d)) == len({(k, a) for k, a, _ in reqs})
    # a warm directory: the packs, the grammars and their layers
    xgr.clear_cross_grammar_cache()
    comp2 = xgr.GrammarCompiler(info, cache_dir=str(d))
    assert comp2.disk_cache.wait_packs(60)
    got, keep2 = traces(comp2)
    dc = comp2.disk_cache
    assert dc.layer_loads >= len({(k, a) for k, a, _ in reqs}) and dc.layer_rejected == 0
    for (r_rows, _, _, _), (g_rows, g_rest, at_load, after) in zip(ref, got):
        assert g_rows == r_rows and g_rest == b""
    # the first pass over the grammar from the directory builds (almost) nothing: only
    # entries a layer file cannot hold (over a loop region's shared entry)
    built = sum(after - at_load for _, _, at_load, after in got)
    assert built <= sum(after - at_load for _, _, at_load, after in first) // 4, (built, first)
    kinds = set()
    for p in layer_files(d):
        kinds |= _parse(_payload(p))[1]
    assert {"base", "slot base"} <= kinds, kinds


def test_layer_files_read_into_memory_give_equal_masks(tmp_path, warm, monkeypatch):
    """``XGRAMMAR2_CACHE_MMAP=0``: the layer file is read into one heap block instead of mapped."""
    d, ref, _ = warm
    d = _copy_dir(d, tmp_path / "cache")
    monkeypatch.setenv(dcm.ENV_CACHE_MMAP, "0")
    masks, dc = _load_all(d)
    assert masks == ref["masks"]
    assert dc.layer_loads == len(REQUESTS) and dc.layer_rejected == 0


def test_layer_files_off(tmp_path, warm, monkeypatch):
    """``XGRAMMAR2_CACHE_LAYERS=0``: layer files are neither read nor written."""
    d, ref, _ = warm
    d = _copy_dir(d, tmp_path / "cache")
    before = {p: os.path.getmtime(p) for p in layer_files(d)}
    monkeypatch.setenv(dlm.ENV_CACHE_LAYERS, "0")
    masks, dc = _load_all(d)
    assert masks == ref["masks"]
    assert dc.layer_loads == 0 and dc.layer_rejected == 0
    dc.flush()
    assert dc.layer_writes == 0
    assert {p: os.path.getmtime(p) for p in layer_files(d)} == before


def test_large_layer_files_load_in_the_background(tmp_path, warm, monkeypatch):
    """A layer file over ``SYNC_MAX`` bytes is loaded by the background thread, into the slots
    the request has not filled yet: the same masks whenever it lands."""
    d, ref, fill = warm
    d = _copy_dir(d, tmp_path / "cache")
    monkeypatch.setattr(dlm, "SYNC_MAX", 0)
    masks, dc = _load_all(d)
    assert masks == ref["masks"]
    dc.flush()  # waits for the queued loads
    assert dc.layer_loads == len(REQUESTS) and dc.layer_rejected == 0
    assert dc.layer_entries_loaded <= fill["written"]
