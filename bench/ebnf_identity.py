"""Byte-identity check of the JSON-schema converter's EBNF between two engine trees.

    python -m bench.ebnf_identity --ref /work/main/engine --new engine [--out /tmp/x]

Converts every schema of shared/data JSONSchemaBench (all subsets) and of the JSON-Schema-Test-Suite
(draft2020-12) with each tree's ``xgrammar2.json_schema.json_schema_to_ebnf`` (each in its own subprocess with
PYTHONPATH set to the tree), under a few option sets, and compares the EBNF text (or the error class + message).
Prints the number of conversions, and every difference (exit status 1 when any).
"""

from __future__ import annotations

import argparse
import glob
import gzip
import hashlib
import json
import os
import subprocess
import sys
from typing import Iterator

OPTION_SETS = [
    {},
    {"any_whitespace": False},
    {"strict_mode": False},
    {"any_order": True, "lenient": True},
]


def _schemas(data_dir: str) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for p in sorted(glob.glob(os.path.join(data_dir, "jsonschemabench", "*.jsonl.gz"))):
        with gzip.open(p, "rt", encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                out.append((r["id"], r["schema"]))
    for p in sorted(glob.glob(os.path.join(data_dir, "json-schema-test-suite", "draft2020-12", "**", "*.json"),
                         recursive=True)):
        with open(p, encoding="utf-8") as f:
            groups = json.load(f)
        for i, g in enumerate(groups):
            out.append((f"{os.path.relpath(p, data_dir)}#{i}", g["schema"]))
    return out


def conversions(data_dir: str, only: str | None) -> Iterator[tuple[str, int, object]]:
    """(schema id, option set index, ``json_schema_to_ebnf``'s result or the exception it
    raised) for every corpus schema whose id contains ``only`` (all when None), with the
    converter of the tree on PYTHONPATH."""
    from xgrammar2.json_schema import json_schema_to_ebnf  # the tree on PYTHONPATH

    for sid, s in _schemas(data_dir):
        if only and only not in sid:
            continue
        for k, opts in enumerate(OPTION_SETS):
            try:
                r: object = json_schema_to_ebnf(s, **opts)
            except Exception as ex:  # noqa: BLE001 - an error is a result too
                r = ex
            yield sid, k, r


def _worker(data_dir: str, out_path: str, only: str | None) -> None:
    with open(out_path, "w", encoding="utf-8") as f:
        for sid, k, r in conversions(data_dir, only):
            if isinstance(r, Exception):
                res = f"ERR {type(r).__name__}: {r}"
            else:
                res = "OK " + r.ebnf + "\nW " + json.dumps(r.warnings)
            f.write(json.dumps([sid, k, hashlib.sha256(res.encode()).hexdigest(), res[:200]]) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ebnf_identity", description=__doc__)
    ap.add_argument("--ref", default="/work/main/engine")
    ap.add_argument("--new", default="engine")
    ap.add_argument("--data", default=None)
    ap.add_argument("--out", default="/tmp/ebnf_identity")
    ap.add_argument("--only", default=None, help="only schema ids containing this")
    ap.add_argument("--keep-ref", action="store_true", help="reuse OUT/ref.jsonl from an earlier run")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.data is None:
        from bench.workloads import DATA_DIR
        a.data = DATA_DIR
    if a.worker:
        _worker(a.data, a.worker, a.only)
        return 0
    os.makedirs(a.out, exist_ok=True)
    res = {}
    for name, tree in (("ref", a.ref), ("new", a.new)):
        path = os.path.join(a.out, name + ".jsonl")
        if name == "ref" and a.keep_ref and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                res[name] = [json.loads(x) for x in f]
            continue
        env = dict(os.environ, PYTHONPATH=os.path.abspath(tree) + os.pathsep + os.getcwd())
        cmd = [sys.executable, "-m", "bench.ebnf_identity", "--worker", path, "--data", a.data]
        if a.only:
            cmd += ["--only", a.only]
        subprocess.run(cmd, env=env, check=True)
        with open(path, encoding="utf-8") as f:
            res[name] = [json.loads(x) for x in f]
    diff = 0
    okc = sum(1 for r in res["ref"] if r[3].startswith("OK "))
    for r, n in zip(res["ref"], res["new"], strict=True):
        if r[:3] != n[:3]:
            diff += 1
            print("DIFF", r[0], "opts", OPTION_SETS[r[1]], "\n  ref:", r[3][:120], "\n  new:", n[3][:120])
    print(f"{len(res['ref'])} conversions ({okc} converted, the rest refused), {diff} differences")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
