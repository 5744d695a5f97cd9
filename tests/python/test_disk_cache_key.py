"""The key of a JSON schema given as text (json_key.py, docs/disk-cache.md "The key of a JSON
schema"): the core's one-pass canonical text must be json.dumps(json.loads(text)) exactly
whenever it claims to know it, so two schemas with different meanings never share a key (a
wrong grammar from the memory cache or the directory) and equal schemas spelled differently
(re-serialised, escaped, indented, with duplicate keys) still share one."""

import gzip
import json
import random

import pytest

import xgrammar2 as xgr
from xgrammar2 import compiler as compiler_mod
from xgrammar2.json_key import canonical_dumps, canonical_schema_text

from pyapi_helpers import DATA
from test_disk_cache import files, info, walk  # noqa: F401  (the module-scoped fixture)


def reference_text(text):
    """What the slow path keys ``text`` by, or None when json.loads refuses it."""
    try:
        return canonical_dumps(json.loads(text))
    except ValueError:
        return None


_CHARS = ["a", "Z", "é", "\u2028", "\u00a0", '"', "\\", "/", "\x00", "\x01", "\x1f", "\n", "\t", "\r", "\b",
          "\f", "\x7f", "😀", "\ud83d", " ", "\u0100", "\uffff"]


def _string(r):
    return "".join(r.choice(_CHARS) for _ in range(r.randrange(4)))


def _number(r):
    k = r.randrange(7)
    if k == 0:
        return r.randrange(-10**6, 10**6)
    if k == 1:
        return r.choice([0.0, -0.0, 1.0, 0.5, 1e-4, 1e-5, 1e15, 1e16, 123.456, 0.1 + 0.2, 1 / 3, 10**20, -0])
    if k == 2:
        return r.uniform(-1e6, 1e6)
    if k == 3:
        return round(r.uniform(-100, 100), r.randrange(6))
    if k == 4:
        return r.random() * 10 ** r.randrange(-8, 20)
    if k == 5:
        return r.choice([float("nan"), float("inf"), -float("inf"), 10**700])
    return r.choice([True, False, None])


def _value(r, depth=0):
    k = r.randrange(4 if depth < 5 else 2)
    if k == 0:
        return _string(r)
    if k == 1:
        return _number(r)
    if k == 2:
        return [_value(r, depth + 1) for _ in range(r.randrange(4))]
    return {_string(r): _value(r, depth + 1) for _ in range(r.randrange(12))}


def _spell(r, v):
    m = r.randrange(5)
    if m == 0:
        return json.dumps(v)
    if m == 1:
        return json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    if m == 2:
        return json.dumps(v, indent=r.choice([1, "\t", " \r\n"]), ensure_ascii=r.random() < 0.5)
    if m == 3:
        return json.dumps(v, ensure_ascii=False, sort_keys=True)
    return " \n" + json.dumps(v, separators=(" ,", ": ")) + "\t"


_INSERTS = [" ", ",", '"', "\\", "0", "-", ".", "e", "}", "]", "{", "[", ":", "\\u", "E5", "\\ud83d", "\\uDE00",
            "\\udc00", "00", ".0", "0.", " \n", "x", "\ufeff", "\\u00E9", "\\/", "NaN", "-Infinity", "\x01", "\\x"]


def _mutate(r, t):
    if not t or r.random() < 0.4:
        return t
    i = r.randrange(len(t) + 1)
    op = r.randrange(5)
    if op == 0:
        return t[:i] + r.choice(_INSERTS) + t[i:]
    if op == 1:
        return t[:i] + t[i + 1:]
    if op == 2:
        return t[:i] + t[i:].upper()
    if op == 3 and t.startswith("{") and len(t) > 2:  # a duplicate key
        return '{"k":1,' + t[1:] + "" if r.random() < 0.5 else t[:-1] + ',"k":[1]}'
    return t.replace("é", "\\u00e9").replace("😀", "\\ud83d\\ude00").replace("/", "\\/")


@pytest.mark.parametrize("seed", range(4))
def test_core_text_is_json_dumps_whenever_known(seed):
    r = random.Random(seed)
    known = 0
    for _ in range(3000):
        t = _mutate(r, _spell(r, _value(r)))
        got = canonical_schema_text(t)
        if got is None:
            continue
        known += 1
        assert got == reference_text(t), t  # never a text json.loads refuses, never another text
    assert known > 1000  # the fast path is the common one


def test_floats_are_known_only_in_their_repr_form():
    r = random.Random(7)
    known = 0
    for _ in range(20000):
        x = r.choice([r.uniform(-1e17, 1e17), r.random() * 10 ** r.randrange(-6, 18),
                      round(r.uniform(0, 1000), r.randrange(1, 17))])
        for s in (repr(x), f"{x:.{r.randrange(1, 18)}f}", f"{x:.{r.randrange(1, 17)}g}", f"[{x!r}]"):
            got = canonical_schema_text(s)
            if got is not None:
                known += 1
                assert got == reference_text(s), s
    assert known > 20000
    for s in ("0.1", "-0.0", "0.0001", "1000000000000000.0", "123456789012345.0", "1.5"):
        assert canonical_schema_text(s) == s.encode()
    for s in ("1e2", "1E2", "0.00001", "1.50", "10000000000000000.0", "0.10000000000000001",
              "1234567890123456.0", "NaN", "Infinity", "-Infinity", "1" * 700):
        assert canonical_schema_text(s) is None, s


@pytest.mark.skipif(not (DATA / "jsonschemabench").is_dir(), reason="no JSONSchemaBench data")
def test_usual_spellings_of_real_schemas():
    """Every JSONSchemaBench schema (first 150 of each subset) in the spellings clients send:
    known and right for all but a handful (exponents), and never wrong."""
    unknown = total = 0
    for path in sorted((DATA / "jsonschemabench").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line, _ in zip(f, range(150)):
                s = json.loads(line)["schema"]
                want = canonical_dumps(s)
                for t in (json.dumps(s), json.dumps(s, indent=2),
                          json.dumps(s, separators=(",", ":"), ensure_ascii=False)):
                    got = canonical_schema_text(t)
                    total += 1
                    if got is None:
                        unknown += 1
                    else:
                        assert got == want
    assert total > 1000 and unknown * 100 < total


def test_limits_and_refusals_keep_their_errors():
    deep = "[" * 300 + "]" * 300
    assert canonical_schema_text(deep) is None  # over max_json_nesting: the slow path raises
    comp = xgr.GrammarCompiler(xgr.TokenizerInfo(["a", "b"]), cache_dir=False)
    with pytest.raises(xgr.GrammarLimitError):
        comp.compile_json_schema(deep)
    with pytest.raises(xgr.InvalidJSONError):
        comp.compile_json_schema('{"type": "string",}')
    assert canonical_schema_text('{"type":"string"}\ud800') is None  # not encodable: slow path


# Pairs spelled differently with the same meaning (json.loads gives equal documents): one file.
SAME = [
    ('{"type": "string", "maxLength": 3}', '{"type":"string","maxLength":3}'),
    ('{"const": "caf\\u00e9"}', '{"const":"café"}'),
    ('{"const": "caf\\u00E9"}', '{"const": "caf\\u00e9"}'),
    ('{"const": "\\ud83d\\ude00"}', '{"const":"😀"}'),
    ('{"const": "a\\/b"}', '{"const":"a/b"}'),
    ('{"const": "\\u0009"}', '{"const":"\\t"}'),
    ('{"const": "\\u001F"}', '{"const":"\\u001f"}'),
    ('{"const": "\\u0022"}', '{"const":"\\""}'),
    ('{"type": "string", "type": "integer"}', '{"type":"integer"}'),  # json.loads keeps the last
    ('{"enum": [-0]}', '{"enum":[0]}'),
    ('{"enum": [1.50]}', '{"enum":[1.5]}'),
    ('{"enum": [1e2]}', '{"enum":[100.0]}'),
    ('{"enum": [0.10000000000000001]}', '{"enum":[0.1]}'),
    ('\n {\n  "type" : "object" ,\n  "properties" : { }\n }\n', '{"type":"object","properties":{}}'),
]
# Pairs with different meanings, however close their texts: never one file.
DIFFERENT = [
    ('{"const": "\\\\u0041"}', '{"const": "A"}'),  # a backslash and "u0041" vs the letter A
    ('{"const": "\\\\n"}', '{"const": "\\n"}'),
    ('{"const": "caf\\u00e9"}', '{"const": "caf\\u00e8"}'),
    ('{"const": "\\ud83d\\ude00"}', '{"const": "\\ud83d\\ude01"}'),
    ('{"enum": [1]}', '{"enum": [1.0]}'),
    ('{"enum": [0.0]}', '{"enum": [-0.0]}'),
    ('{"enum": [10]}', '{"enum": [1]}'),
    ('{"type": "integer", "type": "string"}', '{"type": "string", "type": "integer"}'),
    ('{"a": {"b": 1}, "c": 2}', '{"a": {"b": 1, "c": 2}}'),
    ('{"enum": ["a", "b"]}', '{"enum": ["a,b"]}'),
    ('{"enum": ["\\u0000"]}', '{"enum": [""]}'),
]


def _two_processes(info, tmp_path, first, second):  # noqa: F811
    d = tmp_path / "c"
    a = xgr.GrammarCompiler(info, cache_dir=d)
    a.compile_json_schema(first)
    a.disk_cache.flush()
    b = xgr.GrammarCompiler(info, cache_dir=d)  # a fresh process's view: no memory cache
    got = b.compile_json_schema(second)
    b.disk_cache.flush()
    return b.disk_cache, got, len(files(d))


@pytest.mark.parametrize("first,second", SAME)
def test_equal_schemas_share_one_file(info, tmp_path, first, second):  # noqa: F811
    assert json.loads(first) == json.loads(second)
    dc, got, n = _two_processes(info, tmp_path, first, second)
    assert (dc.hits, dc.misses, n) == (1, 0, 1)
    ref = xgr.GrammarCompiler(info, cache_dir=False).compile_json_schema(second)
    assert walk(info, got) == walk(info, ref)
    # and in one process: the memory cache hands out the same grammar
    comp = xgr.GrammarCompiler(info, cache_dir=False)
    assert comp.compile_json_schema(first) is comp.compile_json_schema(second)


@pytest.mark.parametrize("first,second", DIFFERENT)
def test_different_schemas_never_share(info, tmp_path, first, second):  # noqa: F811
    assert canonical_dumps(json.loads(first)) != canonical_dumps(json.loads(second))
    dc, got, n = _two_processes(info, tmp_path, first, second)
    assert (dc.hits, dc.misses, n) == (0, 1, 2)
    comp = xgr.GrammarCompiler(info, cache_dir=False)
    assert comp.compile_json_schema(first) is not comp.compile_json_schema(second)


def test_a_wrong_core_text_is_caught_before_anything_is_stored(info, tmp_path, monkeypatch):  # noqa: F811
    """Were the core ever to spell a schema as another schema's text, the compile after the
    miss sees it (json.dumps of the parsed schema differs), stores nothing under that text and
    compiles the schema under its own."""
    real = '{"type": "string", "maxLength": 2}'
    other = '{"type": "integer"}'
    monkeypatch.setattr(compiler_mod, "canonical_schema_text",
                        lambda text: canonical_dumps(json.loads(other)))
    d = tmp_path / "c"
    a = xgr.GrammarCompiler(info, cache_dir=d)
    got = a.compile_json_schema(real)
    a.disk_cache.flush()
    ref = xgr.GrammarCompiler(info, cache_dir=False)
    assert walk(info, got) == walk(info, ref.compile_json_schema(real))
    monkeypatch.undo()
    b = xgr.GrammarCompiler(info, cache_dir=d)
    assert walk(info, b.compile_json_schema(other)) == walk(info, ref.compile_json_schema(other))
    assert (b.disk_cache.hits, b.disk_cache.misses) == (0, 1)  # nothing was stored as `other`
    assert walk(info, b.compile_json_schema(real)) == walk(info, ref.compile_json_schema(real))
    assert b.disk_cache.hits == 1  # `real` under its own text


def test_key_digest_fast_path_is_feed_key(tmp_path):
    """DiskCache.key_digest's loop over a tuple's str / bytes fields encodes exactly as
    _feed_key (the names of existing files stay the same function of the key)."""
    import hashlib

    from xgrammar2 import disk_cache as dcm

    dc = dcm.DiskCache(str(tmp_path), b"vocab", b"opts")

    class S(str):
        pass

    keys = [("json_schema", b'{"a":1}', '{"any_whitespace": true}'), ("regex", "a\udc80"), ("x", S("y")),
            ("t", ("a", b"b"), None, True, 3, -1), ("s", "", b""), "bare", b"bare", ()]
    for k in keys:
        h = hashlib.sha256(dc._prefix)
        dcm._feed_key(h, k)
        assert dc.key_digest(k) == h.digest(), k


def test_memoized_option_keys_are_the_options_json(info):  # noqa: F811
    """compile_json_schema memoizes its options' key text per compiler: every memoized key is
    json.dumps of the options it stands for, options of equal value but another type (1 / True,
    0 / False / None) never share one, and unmemoizable values (a list) still compile."""
    from xgrammar2.grammar import _json_schema_options

    comp = xgr.GrammarCompiler(info)
    schema = '{"type": "object", "properties": {"a": {"type": "integer"}}}'
    calls = [dict(), dict(any_whitespace=False), dict(any_whitespace=0), dict(any_whitespace=False, indent=2),
             dict(any_whitespace=False, indent=4), dict(strict_mode=False), dict(strict_mode=0),
             dict(any_whitespace=False, separators=(",", ":")), dict(any_whitespace=False, separators=[",", ":"]),
             dict(max_whitespace_cnt=1), dict(max_whitespace_cnt=True), dict(lenient=True), dict(any_order=True)]
    texts = {}
    for kw in calls:
        for _ in range(2):  # the second call is served from the memo
            g = comp.compile_json_schema(schema, **kw)
        texts[repr(kw)] = str(g.grammar)
    assert comp._opts_memo
    for key, (opts, opts_key) in comp._opts_memo.items():
        vals = [v for _, v in key]
        aw, indent, seps, strict, mwc, any_order, lenient = vals
        extra = {"any_order": True} if any_order else {}
        assert opts == _json_schema_options(aw, indent, seps, strict, mwc, lenient, extra)
        assert opts_key == json.dumps(opts, sort_keys=True, default=repr)
    # every spelling's own key text was memoized (1 and True did not share an entry), but the
    # list of separators (unhashable: not memoized)
    memo_keys = {k for _, k in comp._opts_memo.values()}
    for kw in calls:
        if isinstance(kw.get("separators"), list):
            continue
        d = dict(any_whitespace=True, indent=None, separators=None, strict_mode=True,
                 max_whitespace_cnt=None, lenient=False)
        d.update(kw)
        extra = {"any_order": True} if d.pop("any_order", False) else {}
        opts = _json_schema_options(d["any_whitespace"], d["indent"], d["separators"], d["strict_mode"],
                                    d["max_whitespace_cnt"], d["lenient"], extra)
        assert json.dumps(opts, sort_keys=True, default=repr) in memo_keys, kw
    assert texts[repr(dict(any_whitespace=False, indent=2))] != texts[repr(dict(any_whitespace=False, indent=4))]
