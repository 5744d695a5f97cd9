"""Instruction counts (valgrind callgrind) of the in-memory hit path, deterministic where wall-clock timings on a
shared machine are not: per call of ``compile_json_schema`` (a hit on the same text), ``GrammarMatcher`` and
``fill_next_token_bitmask``, on a small raw vocabulary (so the count is the Python layer's, not a vocabulary-sized
memset) and the smallest JSONSchemaBench sample schema (WashingtonPost---wp_87_Normalized, inlined: loading the
sample under valgrind takes minutes).

    python -m bench.hit_path_ir [--engines TREE_A/engine,TREE_B/engine] [--loops 2000]

``canonical_hit`` is a hit on the same schema spelled otherwise with text aliases turned off (every call makes the
canonical key, as every hit did before aliases), ``tag_hit`` a structural tag given as text. Each count is (Ir of
a process running ``loops`` calls - Ir of the same process running none) / loops.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPS = ("compile_hit", "canonical_hit", "tag_hit", "matcher", "fill")
TAG = json.dumps({"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<f="], "tags": [
    {"begin": "<f=a>", "content": {"type": "json_schema", "json_schema": {"type": "object"}}, "end": "</f>"}]}})
SCHEMA = json.dumps({"$schema": "http://json-schema.org/draft-04/schema",
                     "description": "A short reference name for internal editorial use", "title": "Slug",
                     "type": "string"})


def _child(op: str, loops: int) -> None:
    import warnings

    import numpy as np

    import xgrammar2 as xgr

    warnings.simplefilter("ignore")
    vocab = [b"<s>", b"</s>"] + [bytes([c]) for c in range(32, 127)] + [b'{"', b'":', b'",', b"true", b"null"]
    info = xgr.TokenizerInfo(vocab, xgr.VocabType.RAW, vocab_size=len(vocab), stop_token_ids=[1])
    comp = xgr.GrammarCompiler(info, cache_dir=False)
    text = SCHEMA
    bm = np.zeros((1, (info.vocab_size + 31) // 32), dtype=np.int32)
    g = comp.compile_json_schema(text)
    assert comp.compile_json_schema(text) is g  # (the compile_hit op is the text alias after this)
    m = xgr.GrammarMatcher(g)
    m.fill_next_token_bitmask(bm)
    # canonical_hit: the same schema spelled otherwise, with no text alias (a tree without them: as always), so
    # every call takes the canonical key; tag_hit: a structural tag given as text (kept from its 2nd compile).
    comp._cache.ALIAS_MAX = 0  # (compile_hit: the text first compiled keeps its alias)
    other = json.dumps(json.loads(text), indent=2)
    for _ in range(3):  # warm every path once
        comp.compile_json_schema(text), comp.compile_json_schema(other), comp.compile_structural_tag(TAG)
        xgr.GrammarMatcher(g), m.fill_next_token_bitmask(bm)
    fn = {"compile_hit": lambda: comp.compile_json_schema(text), "matcher": lambda: xgr.GrammarMatcher(g),
          "canonical_hit": lambda: comp.compile_json_schema(other),
          "tag_hit": lambda: comp.compile_structural_tag(TAG),
          "fill": lambda: m.fill_next_token_bitmask(bm)}[op]
    for _ in range(loops):
        fn()


def _ir(engine: str, op: str, loops: int) -> int:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([engine, ROOT])
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-m",
               "bench.hit_path_ir", "--child", op, "--loops", str(loops)]
        res = subprocess.run(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                             check=True)
    return int(re.findall(r"Collected : (\d+)", res.stderr)[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engines", default=os.path.join(ROOT, "engine"))
    ap.add_argument("--loops", type=int, default=2000)
    ap.add_argument("--child", default="")
    args = ap.parse_args()
    if args.child:
        _child(args.child, args.loops)
        return
    engines = [e for e in args.engines.split(",") if e]
    print("| tree | " + " | ".join(f"{op} (Ir / call)" for op in OPS) + " |")
    print("|---" * (1 + len(OPS)) + "|")
    for i, e in enumerate(engines):
        cells = [f"{(_ir(e, op, args.loops) - _ir(e, op, 0)) / args.loops:,.0f}" for op in OPS]
        print(f"| {i} ({e}) | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
