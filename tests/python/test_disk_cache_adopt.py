"""Preloaded grammars put straight into the compile cache (docs/disk-cache.md, "Preload";
format 3: a grammar file carries its compile-cache key): a request for one is a memory hit with
the masks of a process without a directory; files of format 2 are ignored; a grammar is never
served for a request under other options or limits; the compile cache's byte budget holds."""

import json
import os
import shutil
import struct

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import xgrammar2 as xgr
from xgrammar2 import config, limits
from xgrammar2 import disk_cache as dcm
from xgrammar2 import disk_preload as dpm
from xgrammar2.disk_layers import pack_header

from test_disk_cache import REQUESTS, compile_one, files, info, reference, walk  # noqa: F401  (fixtures)
from test_disk_cache_preload import _default_env, fill, held, preloaded, served, warm  # noqa: F401

#: (kind, argument) of the requests whose grammars the preload puts into the compile cache
ADOPTED = REQUESTS[:5]
#: a request with non-default JSON options (they are part of its key)
SCHEMA = json.dumps({"type": "object", "properties": {"k": {"type": "array", "items": {"type": "integer"}}},
                     "required": ["k"]})
OPTS = {"any_whitespace": False, "indent": 2, "separators": (",", ": ")}
DEEP = json.dumps({"type": "array", "items": {"type": "array", "items": {"type": "integer"}}})


def test_preloaded_grammars_are_memory_hits_with_the_masks_of_no_directory(info, reference, warm, monkeypatch):
    d, names, expect = warm
    comp, dc = preloaded(info, d)
    assert sorted(dc.preload.adopted) == sorted(dc.key_digest(comp_key) for comp_key in comp._cache._entries)
    loads = []
    real = dcm.DiskCache.load

    def counting(self, key, *a):
        loads.append(key[0])
        return real(self, key, *a)

    monkeypatch.setattr(dcm.DiskCache, "load", counting)
    masks, counts = served(info, comp)
    assert masks == reference and counts == expect["counts"]
    # only the grammars the preload could not put into the compile cache went through the disk
    # cache's load (the linked tool sets and the caller's Grammar, from the preload's map)
    assert sorted(loads) == ["grammar", "structural_tag", "structural_tag"]
    assert (dc.hits, dc.misses) == (expect["hits"], expect["misses"])
    assert dc.layer_loads == expect["layer_loads"]
    assert dc.layer_entries_loaded == expect["layer_entries_loaded"]
    assert dc.preload.hits == len(names) and not held(dc) and dc.preload.held == 0
    # a second round: the same grammars, no more preload hits (the linked tool sets, which the
    # compile cache admits on their second request, are read from their files again)
    loads.clear()
    assert [walk(info, compile_one(comp, k, a)) for k, a in REQUESTS] == reference
    assert dc.preload.hits == len(names) and dc.misses == 0
    assert sorted(loads) == ["structural_tag", "structural_tag"]
    # what they were compiled from, converted again from the key
    cold = xgr.GrammarCompiler(info, cache_dir=False)
    for k, a in ADOPTED:
        assert str(compile_one(comp, k, a).grammar) == str(compile_one(cold, k, a).grammar)


def test_json_options_come_back_from_the_key(info, tmp_path):
    d = tmp_path / "c"
    first = xgr.GrammarCompiler(info, cache_dir=d)
    first.compile_json_schema(SCHEMA, **OPTS)
    first.disk_cache.flush()
    comp, dc = preloaded(info, d)
    assert len(dc.preload.adopted) == 1
    g = comp.compile_json_schema(SCHEMA, **OPTS)
    assert dc.preload.hits == 1 and dc.misses == 0
    cold = xgr.GrammarCompiler(info, cache_dir=False).compile_json_schema(SCHEMA, **OPTS)
    assert str(g.grammar) == str(cold.grammar)
    assert walk(info, g) == walk(info, cold)


def _as_format_2(data):
    """A format-3 grammar file as format 2 wrote it: no key in the payload, version 2."""
    linked, warns, image = dcm.check_file_bytes(data)
    parts = [struct.pack("<BI", 1 if linked else 0, len(warns))]
    for w in warns:
        parts += [struct.pack("<I", len(w.encode())), w.encode()]
    payload = b"".join(parts) + image
    hs = dcm._HEADER.size
    _magic, _version, _flags, vfp, kd, _plen, _csum = dcm._HEADER.unpack_from(data, 0)
    assert len(pack_header(dcm._MAGIC, 2, vfp, kd, payload)) == hs
    return pack_header(dcm._MAGIC, 2, vfp, kd, payload) + payload


def test_files_of_format_2_are_ignored(info, reference, tmp_path):
    d = tmp_path / "c"
    names = fill(info, d)
    v3 = os.path.join(str(d), f"v{dcm.DISK_FORMAT_VERSION}")
    assert dcm.DISK_FORMAT_VERSION == 3 and all(os.path.dirname(f) == v3 for f in names)
    # the directory as format 2 left it: its own folder
    v2 = os.path.join(str(d), "v2")
    os.mkdir(v2)
    old = {}
    for f in names:
        data = _as_format_2(open(f, "rb").read())
        p = os.path.join(v2, os.path.basename(f))
        with open(p, "wb") as out:
            out.write(data)
        old[p] = data
    # and one format-2 file under a format-3 name (a copied directory)
    first = names[0]
    with open(first, "wb") as out:
        out.write(old[os.path.join(v2, os.path.basename(first))])
    comp, dc = preloaded(info, d)
    assert dc.preload.loads == len(names) - 1 and dc.rejected == 1  # (removed, as a damaged file)
    assert not os.path.exists(first)
    masks, _ = served(info, comp)
    assert masks == reference
    assert dc.misses == 1 and dc.hits == len(names) - 1
    dc.flush()
    assert os.path.exists(first)  # written again, as format 3
    assert dcm.check_file_bytes(open(first, "rb").read()) is not None
    # the format-2 folder is another version's: neither read nor removed
    assert {p: open(p, "rb").read() for p in old} == old


def test_a_grammar_is_not_served_under_other_options_or_limits(info, reference, warm):
    d, names, _ = warm
    # a compiler with other lowering options shares the directory: the keys its files carry do
    # not hash to their names under its options, so nothing goes into its compile cache
    comp, dc = preloaded(info, d, inline_max_states=3)
    assert not dc.preload.adopted and len(comp._cache) == 0
    assert dc.preload.loads == len(names)  # (read, but under digests no request of it makes)
    masks, _ = served(info, comp)
    assert masks == reference and dc.preload.hits == 0 and dc.misses == len(names)
    # a request with other JSON options is another key: compiled, with its own masks
    comp, dc = preloaded(info, d)
    kind, schema = REQUESTS[0]
    g = comp.compile_json_schema(schema, **OPTS)
    cold = xgr.GrammarCompiler(info, cache_dir=False).compile_json_schema(schema, **OPTS)
    assert dc.misses == 1 and dc.preload.hits == 0 and walk(info, g) == walk(info, cold)
    assert walk(info, g) != reference[0]


def test_lowered_limits_refuse_a_preloaded_grammar(info, tmp_path):
    d = tmp_path / "c"
    first = xgr.GrammarCompiler(info, cache_dir=d)
    first.compile_json_schema(DEEP)
    first.disk_cache.flush()
    comp, dc = preloaded(info, d)
    assert len(dc.preload.adopted) == 1
    old_depth = config.get_max_recursion_depth()
    try:
        config.set_max_recursion_depth(2)
        with pytest.raises(xgr.GrammarLimitError):
            comp.compile_json_schema(DEEP)
    finally:
        config.set_max_recursion_depth(old_depth)
    old = limits.get_limits()["max_input_bytes"]
    try:
        limits.set_limits(max_input_bytes=len(DEEP) - 1)
        with pytest.raises(xgr.GrammarLimitError):
            comp.compile_json_schema(DEEP)
    finally:
        limits.set_limits(max_input_bytes=old)
    assert dc.preload.hits == 0
    assert comp.compile_json_schema(DEEP) is comp.compile_json_schema(DEEP)
    assert dc.preload.hits == 1 and dc.misses == 0


def test_the_compile_cache_budget_holds_with_preloaded_grammars(info, reference, warm):
    d, names, expect = warm
    _, dc = preloaded(info, d)
    sizes = sorted(dc.preload.adopted.values())
    assert len(sizes) == 5
    # room for about two of them (their keys' bytes count too)
    limit = sizes[0] + sizes[1] + 4096
    comp, dc = preloaded(info, d, cache_limit_bytes=limit)
    assert 1 <= len(dc.preload.adopted) < 5 and dc.preload.loads == len(names)
    assert comp._cache._total <= limit and comp.get_cache_size_bytes() <= limit
    # the others wait in the map; the requests' grammars push preloaded ones out of the compile
    # cache (the least recently used), which are then read from their files again: no misses
    masks, counts = served(info, comp)
    assert masks == reference and counts == expect["counts"]
    assert dc.hits == expect["hits"] and dc.misses == 0
    assert comp._cache._total <= limit and not held(dc) and dc.preload.held == 0
    # a preloaded grammar never pushes out one a request put there
    comp = xgr.GrammarCompiler(info, cache_dir=d, cache_limit_bytes=limit)
    g = comp.compile_json_schema(REQUESTS[1][1])  # (before or while the preload runs)
    assert comp.disk_cache.wait_preload(60)
    assert comp.compile_json_schema(REQUESTS[1][1]) is g
    assert comp._cache._total <= limit


_fields = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(), st.binary()),
    lambda inner: st.lists(inner, max_size=4).map(tuple), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(_fields)
def test_a_key_comes_back_from_its_encoding(key):
    code = dcm.encode_key(key)
    back = dcm.decode_key(code)
    assert back == key and type(back) is type(key)
    assert dcm.encode_key(back) == code


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=64))
@example(b"i05;")
@example(b"i-0;")
@example(b"i+5;")
@example(b"s01:a")
@example(b"t2:nT")
@example(b"r1:x")
@example(b"t1:t1:t1:t1:t1:t1:t1:t1:t1:n")
def test_any_bytes_decode_to_a_key_or_to_none(data):
    key = dcm.decode_key(data)  # never raises
    assert key is dcm._NO_KEY or dcm.encode_key(key) == data
