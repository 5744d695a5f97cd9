"""Byte-identity check of compiled grammars (``xgr_compiled_image``) between two engine trees.

    python -m bench.image_identity --ref /work/main/engine --new engine [--out /tmp/image_identity]

Step 1 (once, with the ``--new`` tree's converter): every schema of shared/data JSONSchemaBench (all subsets) and
of the JSON-Schema-Test-Suite (draft2020-12) is converted to EBNF under a few option sets (bench.ebnf_identity's);
the distinct EBNF texts go to OUT/ebnf.jsonl. Step 2: each tree, in its own subprocess with PYTHONPATH set to it,
parses and compiles every EBNF text against the qwen3 vocabulary and hashes the compiled image (or the error).
Prints the number of grammars compared and every difference (exit status 1 when any). The image holds the
automata and token-terminal ids, so a change to lowering, determinisation or minimisation that changes any
automaton shows up here.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys

from bench.ebnf_identity import conversions


def _dump(data_dir: str, out_path: str, only: str | None) -> None:
    import warnings

    warnings.simplefilter("ignore")  # unenforced-constraint warnings: not what this compares
    seen: set[str] = set()
    with open(out_path, "w", encoding="utf-8") as f:
        for sid, k, r in conversions(data_dir, only):
            if isinstance(r, Exception):  # unconvertible: nothing to compile
                continue
            ebnf = r.ebnf
            h = hashlib.sha256(ebnf.encode()).hexdigest()
            if h in seen:
                continue
            seen.add(h)
            f.write(json.dumps([f"{sid}/{k}", ebnf]) + "\n")


def _hash(data_dir: str, ebnf_path: str, out_path: str) -> None:
    import xgrammar2 as xgr  # the tree on PYTHONPATH
    from xgrammar2 import _core

    with open(os.path.join(data_dir, "tokenizers", "canonical", "qwen3.json"), encoding="utf-8") as f:
        canon = json.load(f)
    ti = xgr.TokenizerInfo(canon["tokens"], vocab_type=xgr.VocabType.BYTE_LEVEL,
                           vocab_size=canon["num_tokens"], stop_token_ids=list(canon["eos_ids"]))
    comp = xgr.GrammarCompiler(ti, cache_enabled=False)
    ffi, lib = _core.ffi, _core.lib
    with open(ebnf_path, encoding="utf-8") as fin, open(out_path, "w", encoding="utf-8") as f:
        for line in fin:
            gid, ebnf = json.loads(line)
            try:
                cg = comp.compile_grammar(xgr.Grammar.from_ebnf(ebnf))
                out = ffi.new("uint8_t **")
                n = ffi.new("size_t *")
                _core.check(lib.xgr_compiled_image(cg._ptr, out, n), "image")
                image = b"" if out[0] == ffi.NULL else ffi.buffer(out[0], n[0])[:]
                if out[0] != ffi.NULL:
                    lib.xgr_free(out[0])
                res = hashlib.sha256(image).hexdigest() + f" {len(image)}"
            except Exception as ex:  # noqa: BLE001 - an error is a result too
                res = f"ERR {type(ex).__name__}: {ex}"[:300]
            f.write(json.dumps([gid, res]) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.image_identity", description=__doc__)
    ap.add_argument("--ref", default="/work/main/engine")
    ap.add_argument("--new", default="engine")
    ap.add_argument("--data", default=None)
    ap.add_argument("--out", default="/tmp/image_identity")
    ap.add_argument("--only", default=None, help="only schema ids containing this")
    ap.add_argument("--keep-ebnf", action="store_true", help="reuse OUT/ebnf.jsonl from an earlier run")
    ap.add_argument("--keep-ref", action="store_true", help="reuse OUT/ref.jsonl from an earlier run")
    ap.add_argument("--dump", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--hash", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.data is None:
        from bench.workloads import DATA_DIR
        a.data = DATA_DIR
    ebnf_path = os.path.join(a.out, "ebnf.jsonl")
    if a.dump:
        _dump(a.data, a.dump, a.only)
        return 0
    if a.hash:
        _hash(a.data, ebnf_path, a.hash)
        return 0
    os.makedirs(a.out, exist_ok=True)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def sub(tree: str, *args: str) -> None:
        env = dict(os.environ, PYTHONPATH=os.path.abspath(tree) + os.pathsep + root)
        subprocess.run([sys.executable, "-m", "bench.image_identity", "--data", a.data, "--out", a.out, *args],
                       env=env, check=True, cwd=root)

    if not (a.keep_ebnf and os.path.exists(ebnf_path)):
        sub(a.new, "--dump", ebnf_path, *(["--only", a.only] if a.only else []))
    res = {}
    for name, tree in (("ref", a.ref), ("new", a.new)):
        path = os.path.join(a.out, f"{name}.jsonl")
        if not (name == "ref" and a.keep_ref and os.path.exists(path)):
            sub(tree, "--hash", path)
        with open(path, encoding="utf-8") as f:
            res[name] = dict(tuple(json.loads(line)) for line in f)
    diffs = [g for g in res["ref"] if res["ref"][g] != res["new"].get(g)]
    errs = sum(1 for v in res["new"].values() if v.startswith("ERR"))
    print(f"{len(res['ref'])} grammars compiled by both trees ({errs} errors in new), {len(diffs)} differences")
    for g in diffs[:50]:
        print(f"  {g}: ref {res['ref'][g][:120]} | new {res['new'].get(g, '(missing)')[:120]}")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
