"""The on-disk compile cache (docs/disk-cache.md): processes sharing a directory get the masks
of a process without one; every kind of damaged file is ignored (and rewritten); concurrent
writers; the byte budget; directories that cannot be used degrade with one warning."""

import errno
import glob
import json
import os
import struct
import subprocess
import sys
import warnings

import pytest

import xgrammar2 as xgr
from xgrammar2 import disk_cache as dcm
from xgrammar2.json_key import canonical_dumps

ENGINE = os.path.dirname(os.path.dirname(os.path.abspath(xgr.__file__)))

VOCAB = (["a", "b", "c", "ab", "{", "}", "[", "]", "\"", ":", ",", " ", "1", "2", "0", "-", ".",
          "true", "false", "null", "\"a", "\":", "\",", "x", "y", "<function=", "get", "set", ">",
          "</function>", "{\"", "name", "\\", "e", "n", "\n", "<eos>"])
EOS = len(VOCAB) - 1

TOOLS = [{"type": "function", "function": {"name": n, "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "name": {"type": "string"}},
    "required": ["a"]}}} for n in ("get", "set", "getx")]


def tools_tag(names):
    return json.dumps({"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<function="],
        "tags": [{"type": "tag", "begin": f"<function={t['function']['name']}>",
                  "content": {"type": "json_schema", "json_schema": t["function"]["parameters"]},
                  "end": "</function>"} for t in TOOLS if t["function"]["name"] in names]}})


#: (kind, argument) of every grammar the tests compile: each compile path of GrammarCompiler.
REQUESTS = [
    ("json_schema", json.dumps({"type": "object", "properties": {
        "a": {"type": "string", "maxLength": 3}, "b": {"type": "array", "items": {"type": "integer"}},
        "c": {"enum": [1, "x", None]}}, "required": ["a"]})),
    ("json_schema", json.dumps({"type": "array", "items": {"type": "boolean"}, "minItems": 1,
                                "maxItems": 40})),
    ("ebnf", 'root ::= "a" r* "b"\nr ::= "ab" | [c-e] | "{" root? "}"\n'),
    ("regex", "(ab|c)+[0-9]{1,3}x?"),
    ("builtin_json", ""),
    ("structural_tag", tools_tag({"get", "set"})),
    ("structural_tag", tools_tag({"get", "set", "getx"})),
    ("grammar", 'root ::= "x" ("y" | "ab")* [0-2]\n'),
]

CHILD = r'''
import json, sys, random
import xgrammar2 as xgr
sys.path.insert(0, sys.argv[3])
from test_disk_cache import VOCAB, EOS, REQUESTS, compile_one, walk
d = sys.argv[1] or False
info = xgr.TokenizerInfo(VOCAB, stop_token_ids=[EOS])
comp = xgr.GrammarCompiler(info, cache_dir=d)
out = {"masks": [walk(info, compile_one(comp, k, a)) for k, a in REQUESTS]}
if comp.disk_cache is not None:
    comp.disk_cache.flush()
    dc = comp.disk_cache
    out.update(hits=dc.hits, misses=dc.misses, rejected=dc.rejected, writes=dc.writes)
with open(sys.argv[2], "w") as f:
    json.dump(out, f)
'''


def compile_one(comp, kind, arg):
    if kind == "json_schema":
        return comp.compile_json_schema(arg)
    if kind == "ebnf":
        return comp.compile_grammar(arg)
    if kind == "regex":
        return comp.compile_regex(arg)
    if kind == "builtin_json":
        return comp.compile_builtin_json_grammar()
    if kind == "structural_tag":
        return comp.compile_structural_tag(arg)
    return comp.compile_grammar(xgr.Grammar.from_ebnf(arg))


def walk(info, compiled, steps=40, seed=0):
    """The masks along a seeded walk (each step takes an allowed token), as hex rows."""
    import random

    import numpy as np

    rng = random.Random(seed)
    m = xgr.GrammarMatcher(compiled)
    bm = xgr.allocate_token_bitmask(1, info.vocab_size)
    rows = []
    for _ in range(steps):
        if m.is_terminated():
            break
        m.fill_next_token_bitmask(bm)
        row = np.asarray(bm[0]).tobytes()  # a torch tensor or, without torch imported, an array
        rows.append(row.hex())
        bits = int.from_bytes(row, "little")
        allowed = [t for t in range(info.vocab_size) if bits >> t & 1]
        if not allowed:
            break
        # prefer non-stop tokens so the walk goes deep
        pick = [t for t in allowed if t != EOS] or allowed
        assert m.accept_token(rng.choice(pick))
    return rows


def run_child(tmp_path, d, name):
    out = tmp_path / f"{name}.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([ENGINE, env.get("PYTHONPATH", "")])
    env.pop(dcm.ENV_CACHE_DIR, None)
    subprocess.run([sys.executable, "-c", CHILD, str(d or ""), str(out),
                    os.path.dirname(os.path.abspath(__file__))], check=True, env=env)
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def info():
    return xgr.TokenizerInfo(VOCAB, stop_token_ids=[EOS])


@pytest.fixture(scope="module")
def reference(info):
    comp = xgr.GrammarCompiler(info, cache_dir=False)
    return [walk(info, compile_one(comp, k, a)) for k, a in REQUESTS]


def files(d):
    return sorted(glob.glob(os.path.join(str(d), "v*", "*.xgc")))


def test_two_processes_share_a_directory(tmp_path, reference):
    d = tmp_path / "cache"
    first = run_child(tmp_path, d, "first")
    second = run_child(tmp_path, d, "second")
    plain = run_child(tmp_path, None, "plain")
    assert first["hits"] == 0 and first["writes"] == len(REQUESTS)
    assert second["hits"] == len(REQUESTS) and second["writes"] == 0 and second["rejected"] == 0
    assert first["masks"] == plain["masks"] == second["masks"] == reference
    assert len(files(d)) == len(REQUESTS)
    assert (os.stat(d).st_mode & 0o777) == 0o700
    for f in files(d):
        assert (os.stat(f).st_mode & 0o777) == 0o600


def fresh_load(info, d, kind, arg):
    comp = xgr.GrammarCompiler(info, cache_dir=d)
    compiled = compile_one(comp, kind, arg)
    return comp, compiled


def write_one(info, d, i):
    comp = xgr.GrammarCompiler(info, cache_dir=d)
    compile_one(comp, *REQUESTS[i])
    comp.disk_cache.flush()
    (path,) = [f for f in files(d)]
    return path


def section_offsets(data):
    """Offsets where each section of a file starts: header fields, payload parts, the image's
    header and its arrays (compile/image.c's layout)."""
    hs = dcm._HEADER.size
    offs = [0, 8, 12, 16, 48, 80, 88, hs]
    linked, nw = struct.unpack_from("<BI", data, hs)
    pos = hs + 5
    for _ in range(nw):
        (k,) = struct.unpack_from("<I", data, pos)
        offs.append(pos)
        pos += 4 + k
    (k,) = struct.unpack_from("<I", data, pos)  # the key
    offs += [pos, pos + 4]
    pos += 4 + k
    img = pos
    offs += [img + k for k in (0, 8, 12, 16, 20, 24, 28, 32, 36, 40)]
    nr, _root, ns, ne, nt = struct.unpack_from("<5I", data, img + 16)
    p = img + 40
    for size in (4 * nr, nr, nr, 4 * nr, 4 * nr, 4 * nr, 4 * nr, nr, 4 * ns, ns, 4 * (ns + 1),
                 10 * ne, 4 * nt):
        offs.append(p)
        p += size
    assert p == len(data)
    return sorted(set(o for o in offs if o < len(data)))


def reseal(data):
    """The same file with its checksum recomputed over the (changed) payload: what reaches
    the core's own checks."""
    hs = dcm._HEADER.size
    payload = data[hs:]
    head = bytearray(data[:hs])
    struct.pack_into("<Q32s", head, 80, len(payload), __import__("hashlib").sha256(payload).digest())
    return bytes(head) + payload


@pytest.mark.parametrize("index", [0, 5])
def test_every_corruption_is_ignored(tmp_path, info, reference, index):
    kind, arg = REQUESTS[index]
    d = tmp_path / "c"
    path = write_one(info, d, index)
    good = open(path, "rb").read()
    cases = []
    for off in section_offsets(good):
        cases.append((f"truncate@{off}", good[:off]))
        cases.append((f"truncate@{off}+1", good[:off + 1]))
    for off in list(range(0, len(good), max(1, len(good) // 97))) + section_offsets(good):
        flipped = bytearray(good)
        flipped[off] ^= 0x5A
        cases.append((f"flip@{off}", bytes(flipped)))
        cases.append((f"flip+reseal@{off}", reseal(bytes(flipped))))
    wrong_version = bytearray(good)
    struct.pack_into("<I", wrong_version, 8, dcm.DISK_FORMAT_VERSION + 1)
    cases.append(("version", bytes(wrong_version)))
    img = len(good) - len(dcm.check_file_bytes(good)[2])
    img_version = bytearray(good)
    struct.pack_into("<I", img_version, img + 12, 99)
    cases.append(("image-version", reseal(bytes(img_version))))
    cases.append(("extra", reseal(good + b"\0\0\0\0")))
    cases.append(("empty", b""))
    hostile_loaded = 0
    for name, data in cases:
        with open(path, "wb") as f:
            f.write(data)
        comp, compiled = fresh_load(info, d, kind, arg)
        dc = comp.disk_cache
        masks = walk(info, compiled)
        if name.startswith("flip+reseal") and dc.hits:
            # A changed file with a valid checksum (a hostile writer, not damage): the core
            # checked it is a well-formed automaton, which it may be (another byte range on
            # an edge); it must not crash, and its masks are its own.
            hostile_loaded += 1
            continue
        assert dc.hits == 0 and dc.rejected == 1, name
        assert masks == reference[index], name
        comp.disk_cache.flush()
        assert open(path, "rb").read() == good, name  # rewritten after the rejection
    # most hostile flips break an invariant the core checks
    assert hostile_loaded < len([c for c in cases if c[0].startswith("flip+reseal")]) // 2


@pytest.mark.parametrize("index", [0, 2, 5])
def test_resealed_dead_end_states_are_refused(tmp_path, info, reference, index, caplog):
    """A hostile file (valid checksum) whose automaton has a state that cannot reach an end:
    a final state with no edges made non-final. The core refuses it (since the productivity
    pass also answers "every state can end": image.c check_productive), the request gets
    the reference masks, and the file is rewritten."""
    kind, arg = REQUESTS[index]
    d = tmp_path / "c"
    path = write_one(info, d, index)
    good = open(path, "rb").read()
    img = len(good) - len(dcm.check_file_bytes(good)[2])
    nr, _root, ns, _ne, _nt = struct.unpack_from("<5I", good, img + 16)
    starts = set(struct.unpack_from(f"<{nr}I", good, img + 40))
    fin = img + 40 + 23 * nr + 4 * ns
    eb = struct.unpack_from(f"<{ns + 1}i", good, fin + ns)
    cases = [s for s in range(ns) if good[fin + s] == 1 and eb[s + 1] == eb[s] and s not in starts]
    assert cases
    why = []
    for s in cases:
        bad = bytearray(good)
        bad[fin + s] = 0
        with open(path, "wb") as f:
            f.write(reseal(bytes(bad)))
        with caplog.at_level("DEBUG", logger="xgrammar2.disk_cache"):
            caplog.clear()
            comp, compiled = fresh_load(info, d, kind, arg)
            masks = walk(info, compiled)
        dc = comp.disk_cache
        assert dc.hits == 0 and dc.rejected == 1, s
        assert masks == reference[index], s
        why += [r.getMessage() for r in caplog.records if "ignoring" in r.getMessage()]
        comp.disk_cache.flush()
        assert open(path, "rb").read() == good, s
    # each refused for a whole-automaton reason; in the first request's grammar the
    # state-level check is what refuses some (the others leave their rule with no way to
    # finish, or change its nullability)
    assert all(any(k in w for k in ("a state cannot end", "a rule can never finish", "nullability"))
               for w in why), why
    if index == 0:
        assert any("a state cannot end" in w for w in why), why


def test_foreign_vocabulary_file_is_ignored(tmp_path, info, reference):
    d = tmp_path / "c"
    other = xgr.TokenizerInfo(VOCAB[:-2] + ["zz", "<eos>"], stop_token_ids=[EOS])
    # the file another vocabulary's compiler wrote, put where this vocabulary looks
    comp_o = xgr.GrammarCompiler(other, cache_dir=d)
    compile_one(comp_o, *REQUESTS[0])
    comp_o.disk_cache.flush()
    (src,) = files(d)
    comp = xgr.GrammarCompiler(info, cache_dir=d)
    dst = comp.disk_cache.file_for(comp.disk_cache.key_digest(
        ("json_schema", canonical_dumps(json.loads(REQUESTS[0][1])),
         json.dumps(_default_schema_opts(), sort_keys=True, default=repr))))
    os.replace(src, dst)
    compiled = compile_one(comp, *REQUESTS[0])
    assert comp.disk_cache.hits == 0 and comp.disk_cache.rejected == 1
    assert walk(info, compiled) == reference[0]


def _default_schema_opts():
    from xgrammar2.grammar import _json_schema_options

    return _json_schema_options(True, None, None, True, None, False, {})


def test_concurrent_writers(tmp_path, reference):
    d = tmp_path / "cache"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([ENGINE, env.get("PYTHONPATH", "")])
    env.pop(dcm.ENV_CACHE_DIR, None)
    here = os.path.dirname(os.path.abspath(__file__))
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(d), str(tmp_path / f"w{i}.json"), here],
                              env=env) for i in range(4)]
    for p in procs:
        assert p.wait(timeout=300) == 0
    for i in range(4):
        assert json.loads((tmp_path / f"w{i}.json").read_text())["masks"] == reference
    assert len(files(d)) == len(REQUESTS)
    assert not glob.glob(os.path.join(str(d), "v*", "*.tmp"))
    for f in files(d):
        assert dcm.check_file_bytes(open(f, "rb").read()) is not None
    last = run_child(tmp_path, d, "after")
    assert last["hits"] == len(REQUESTS) and last["rejected"] == 0


def test_eviction_keeps_the_budget(tmp_path, info):
    d = tmp_path / "c"
    comp = xgr.GrammarCompiler(info, cache_dir=d, cache_dir_limit_bytes=1 << 20)
    sizes = []
    for k, a in REQUESTS:
        compile_one(comp, k, a)
    comp.disk_cache.flush()
    sizes = sorted(os.path.getsize(f) for f in files(d))
    # every cache file counts (grammars, mask packs, layer files): half of the bytes must go
    total, every = comp.disk_cache.scan()
    budget = total // 2
    comp2 = xgr.GrammarCompiler(info, cache_dir=d, cache_dir_limit_bytes=budget)
    dc = comp2.disk_cache
    keep = min(files(d), key=os.path.getsize)  # the most recent (and smallest): survives
    assert os.path.getsize(keep) < budget * 9 // 10
    for _, _, f in every:
        if f != keep:
            os.utime(f, (1, 1))
    os.utime(keep)
    assert dc.evict() > 0
    assert dc.size_bytes() <= budget
    assert keep in files(d)
    # writes evict on their own: a budget of one file's size keeps at most that
    comp3 = xgr.GrammarCompiler(info, cache_dir=tmp_path / "small", cache_dir_limit_bytes=max(sizes))
    for i in range(30):
        comp3.compile_regex(f"(ab|c)+x{{{i}}}")
    comp3.disk_cache.flush()
    comp3.disk_cache.evict()
    assert comp3.disk_cache.size_bytes() <= max(sizes)
    assert comp3.disk_cache.evictions > 0


def test_unusable_directories_degrade_with_one_warning(tmp_path, info, reference, monkeypatch):
    # a path under a regular file: cannot be created
    blocker = tmp_path / "file"
    blocker.write_text("x")
    comp = xgr.GrammarCompiler(info, cache_dir=blocker / "cache")
    with pytest.warns(RuntimeWarning, match="cached in memory only") as rec:
        for i, (k, a) in enumerate(REQUESTS):
            compiled = compile_one(comp, k, a)
            assert walk(info, compiled) == reference[i]
        comp.disk_cache.flush()
    assert len([w for w in rec if "cached in memory only" in str(w.message)]) == 1

    # read-only (EROFS) and full (ENOSPC) directories: as the kernel reports them
    for err in (errno.EROFS, errno.ENOSPC):
        d = tmp_path / f"ro{err}"
        comp = xgr.GrammarCompiler(info, cache_dir=d)
        real_write = os.write

        def failing_write(fd, data, _err=err):
            raise OSError(_err, os.strerror(_err))

        monkeypatch.setattr(dcm.os, "write", failing_write)
        try:
            with pytest.warns(RuntimeWarning, match="cached in memory only") as rec:
                for i, (k, a) in enumerate(REQUESTS):
                    assert walk(info, compile_one(comp, k, a)) == reference[i]
                    comp.disk_cache.write(("again", i), compile_one(comp, k, a))
                comp.disk_cache.flush()
        finally:
            monkeypatch.setattr(dcm.os, "write", real_write)
        assert len([w for w in rec if "cached in memory only" in str(w.message)]) == 1
        assert files(d) == [] and not glob.glob(os.path.join(str(d), "v*", "*.tmp"))

    # a directory that vanishes between compiles is made again
    import shutil

    d = tmp_path / "vanish"
    comp = xgr.GrammarCompiler(info, cache_dir=d)
    compile_one(comp, *REQUESTS[0])
    comp.disk_cache.flush()
    shutil.rmtree(d)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled = compile_one(comp, *REQUESTS[2])
        comp.disk_cache.flush()
    assert walk(info, compiled) == reference[2]
    assert len(files(d)) == 1


def test_read_only_directory_still_serves_hits(tmp_path, info, reference, monkeypatch):
    d = tmp_path / "c"
    comp = xgr.GrammarCompiler(info, cache_dir=d)
    compile_one(comp, *REQUESTS[3])
    comp.disk_cache.flush()
    real_open = os.open

    def ro_open(path, flags, *a):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return real_open(path, flags, *a)

    monkeypatch.setattr(dcm.os, "open", ro_open)
    comp2 = xgr.GrammarCompiler(info, cache_dir=d)
    assert walk(info, compile_one(comp2, *REQUESTS[3])) == reference[3]
    assert comp2.disk_cache.hits == 1


def test_options_and_environment(tmp_path, info, monkeypatch):
    monkeypatch.setenv(dcm.ENV_CACHE_DIR, str(tmp_path / "env"))
    assert xgr.GrammarCompiler(info).disk_cache.path.startswith(str(tmp_path / "env"))
    assert xgr.GrammarCompiler(info, cache_dir=False).disk_cache is None
    assert xgr.GrammarCompiler(info, cache_enabled=False).disk_cache is None
    monkeypatch.delenv(dcm.ENV_CACHE_DIR)
    assert xgr.GrammarCompiler(info).disk_cache is None
    with pytest.raises(ValueError):
        xgr.GrammarCompiler(info, cache_dir=tmp_path, cache_dir_limit_bytes=-5)
    # compile options that change the automata use other files
    a = xgr.GrammarCompiler(info, cache_dir=tmp_path / "o").disk_cache
    b = xgr.GrammarCompiler(info, cache_dir=tmp_path / "o", repeat_threshold=3).disk_cache
    assert a.key_digest(("regex", "x")) != b.key_digest(("regex", "x"))


def test_engine_cache_dir(monkeypatch, tmp_path):
    from xgrammar2.serving import engine_cache_dir

    monkeypatch.delenv(dcm.ENV_CACHE_DIR, raising=False)
    assert engine_cache_dir(None, str(tmp_path)) == os.path.join(str(tmp_path), "xgrammar2")
    assert engine_cache_dir("off", str(tmp_path)) is None
    assert engine_cache_dir("/x/y", str(tmp_path)) == "/x/y"
    monkeypatch.setenv(dcm.ENV_CACHE_DIR, "/e")
    assert engine_cache_dir(None, str(tmp_path)) == "/e"
    monkeypatch.setenv(dcm.ENV_CACHE_DIR, "off")
    assert engine_cache_dir(None, str(tmp_path)) is None
    assert engine_cache_dir(None, None) is None


def test_image_of_grammar_with_attributes_is_not_written(tmp_path, info):
    comp = xgr.GrammarCompiler(info, cache_dir=tmp_path)
    g = comp.compile_grammar('root ::= a "b"\na[max_chars=3] ::= [a-c]+\n')
    comp.disk_cache.flush()
    assert files(tmp_path) == []
    assert g is not None


def test_loaded_grammar_keeps_its_grammar_and_warnings(tmp_path, info):
    d = tmp_path / "c"
    reqs = REQUESTS + [("json_schema", json.dumps({"type": "string", "format": "not-a-format"}))]
    first = xgr.GrammarCompiler(info, cache_dir=d)
    made = [compile_one(first, k, a) for k, a in reqs]
    first.disk_cache.flush()
    again = xgr.GrammarCompiler(info, cache_dir=d)
    loaded = [compile_one(again, k, a) for k, a in reqs]
    assert again.disk_cache.hits == len(reqs)
    for a, b in zip(made, loaded):
        assert str(a.grammar) == str(b.grammar)
        assert a.warnings == b.warnings
        assert b.memory_size_bytes > 0
    assert loaded[-1].warnings  # the unenforced format is reported after a load too
    # serialize_json of a loaded grammar round-trips
    text = loaded[0].serialize_json()
    assert xgr.CompiledGrammar.deserialize_json(text, info).serialize_json() == text


def test_writes_queued_at_exit_reach_the_disk(tmp_path):
    d = tmp_path / "c"
    script = (
        "import sys\nimport xgrammar2 as xgr\n"
        "info = xgr.TokenizerInfo(['a', 'b', '{', '}'], stop_token_ids=[3])\n"
        "c = xgr.GrammarCompiler(info, cache_dir=sys.argv[1])\n"
        "for i in range(20):\n    c.compile_regex(f'(ab)+a{{{i}}}')\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([ENGINE, env.get("PYTHONPATH", "")])
    subprocess.run([sys.executable, "-c", script, str(d)], check=True, env=env)
    assert len(files(d)) == 20
    assert not glob.glob(os.path.join(str(d), "v*", "*.tmp"))


def test_a_grammar_still_alive_is_handed_out_again_not_read_twice(tmp_path, info):
    """A tool set's grammar is linked from lowered tools, so the memory cache admits it only
    on its second compile; meanwhile the directory hands out the live first copy (its masks
    already built) instead of a second one read from the file. Once no one holds it, the
    file is read again."""
    import gc

    comp = xgr.GrammarCompiler(info, cache_dir=tmp_path / "c")
    tag = tools_tag({"get", "set"})
    comp.compile_structural_tag(tools_tag({"get"}))  # the tools lowered: the next is linked
    first = comp.compile_structural_tag(tag)
    assert first._linked
    dc = comp.disk_cache
    hits = dc.hits
    again = comp.compile_structural_tag(tag)  # not admitted to memory on its first compile
    assert again is first
    assert dc.live_hits == 1 and dc.hits == hits + 1
    masks = walk(info, again)
    dc.flush()
    del first, again
    gc.collect()
    comp.clear_cache()
    read = comp.compile_structural_tag(tag)  # from the file now, a new object
    assert dc.live_hits == 1 and dc.hits == hits + 2
    assert walk(info, read) == masks
