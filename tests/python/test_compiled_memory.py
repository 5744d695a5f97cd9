"""A compiled grammar's reported size (``memory_size_bytes``, which the compile cache's byte
budget sums) matches what it really holds: measured with glibc's allocator statistics
around a compile whose process-wide memos (front-end results, automata) are already warm,
so the only bytes retained are the grammar's own."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import json
import random
from pathlib import Path

import pytest

import xgrammar2 as xgr

from pyapi_helpers import requires_core

pytestmark = requires_core

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _load_mallinfo2():
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    fn = getattr(libc, "mallinfo2", None)
    if fn is not None:
        fn.restype = _MallInfo2
    return fn


_MALLINFO2 = _load_mallinfo2()  # once: loading it allocates


def _allocated_bytes():
    """Bytes in use in malloc's heap and mmapped chunks, or None off glibc (< 2.33)."""
    if _MALLINFO2 is None:
        return None
    info = _MALLINFO2()
    return int(info.uordblks + info.hblkhd)


def _tool_tag(tools):
    return json.dumps({"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<function="],
        "tags": [{"type": "tag", "begin": f"<function={t['name']}>",
                  "content": {"type": "json_schema", "json_schema": t["parameters"]},
                  "end": "</function>"} for t in tools]}})


_TYPES = {"dict": "object", "float": "number", "tuple": "array", "list": "array"}


def _fix_types(s):
    """BFCL writes Python's type names ("dict", "float", "tuple", "any")."""
    if isinstance(s, list):
        return [_fix_types(v) for v in s]
    if not isinstance(s, dict):
        return s
    s = {k: _fix_types(v) for k, v in s.items()}
    if s.get("type") == "any":
        del s["type"]
    elif isinstance(s.get("type"), str):
        s["type"] = _TYPES.get(s["type"], s["type"])
    return s


def _bfcl_tools(n):
    path = DATA / "bfcl" / "BFCL_v4_simple_python.json"
    if not path.is_file():
        pytest.skip(f"BFCL data not found at {path}")
    tools = []
    with open(path) as f:
        for line in f:
            for fn in json.loads(line)["function"]:
                tools.append({"name": fn["name"].replace(".", "_"),
                              "parameters": _fix_types(fn["parameters"])})
    return random.Random(0).sample(tools, n)


@pytest.fixture(scope="module")
def llama_info():
    path = DATA / "tokenizers" / "canonical" / "llama-3.1.json"
    if not path.is_file():
        pytest.skip(f"tokenizer not found at {path}")
    return xgr.TokenizerInfo.from_canonical_json(str(path))


@pytest.mark.parametrize("n_tools", [5, 20])
def test_compile_cache_counts_what_a_grammar_holds(llama_info, n_tools):
    """The cache's size grows by what one more cached grammar really retains: its automata,
    tables, mask entries and key (the grammar's IR is dropped and rebuilt on demand)."""
    compiler = xgr.GrammarCompiler(llama_info)
    tools = _bfcl_tools(n_tools)
    tags = [_tool_tag(tools[k:] + tools[:k]) for k in range(3)]  # same tools, new keys
    bm = xgr.allocate_token_bitmask(1, llama_info.vocab_size)
    for tag in tags[:2]:  # warm the process-wide memos these tools touch
        xgr.GrammarMatcher(compiler.compile_structural_tag(tag)).fill_next_token_bitmask(bm)
    gc.collect()
    before, counted_before = _allocated_bytes(), compiler.get_cache_size_bytes()
    if before is None:
        pytest.skip("needs glibc's mallinfo2")
    compiler.compile_structural_tag(tags[2])  # linked: admitted the second time (below)
    gc.collect()
    before, counted_before = _allocated_bytes(), compiler.get_cache_size_bytes()
    xgr.GrammarMatcher(compiler.compile_structural_tag(tags[2])).fill_next_token_bitmask(bm)
    gc.collect()
    retained = _allocated_bytes() - before
    counted = compiler.get_cache_size_bytes() - counted_before
    # Allocator headers, rounding and the Python wrappers are not counted; the rest is.
    assert 0.8 * retained <= counted <= 1.25 * retained, (counted, retained)


def test_cached_grammar_without_its_ir_still_gives_its_grammar(llama_info):
    compiler = xgr.GrammarCompiler(llama_info)
    tag = _tool_tag(_bfcl_tools(3))
    compiler.compile_structural_tag(tag)
    compiled = compiler.compile_structural_tag(tag)  # a linked grammar is cached the second time
    assert compiler.compile_structural_tag(tag) is compiled
    assert _core_grammar(compiled) is None  # dropped after compiling
    text = str(compiled.grammar)  # converted again from the cached tag
    assert text == str(xgr.Grammar.from_structural_tag(tag))
    assert "TagDispatch" in text
    assert compiler.get_cache_size_bytes() >= compiled.memory_size_bytes + len(tag)


def _core_grammar(compiled):
    from xgrammar2 import _core

    ptr = _core.lib.xgr_compiled_grammar(compiled._ptr)
    return None if ptr == _core.ffi.NULL else ptr
