"""The in-memory hit path (issue 37): ``compile_json_schema`` of a schema the compiler has cached, then
``GrammarMatcher`` and the first ``fill_next_token_bitmask``, for the smallest JSONSchemaBench sample schemas,
where this path, not the compile, bounds a warm process's first mask.

    python -m bench.hit_path [--smallest 6] [--repeats 5] [--loops 2000] [--engines TREE_A/engine,TREE_B/engine]

Per engine tree and round (trees alternated), one fresh process loads the Llama-3.1 vocabulary, compiles one warm-up
schema (no cache directory), then per schema, smallest first: a cold compile; the *first* in-memory hit of the same
text (compile, matcher, fill, each timed once); the first hit of the same schema spelled otherwise (``indent=2``: same
canonical key, new text); then the steady state, the mean over ``--loops`` calls of each of the three. Times are the
CPU time of the calling thread (``time.thread_time``), in microseconds; the table gives the median over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
import sys
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIELDS = ("cold", "hit_compile", "hit_matcher", "hit_fill", "hit_total", "respelled_total",
          "steady_compile", "steady_matcher", "steady_fill")


def _smallest(k: int) -> list[tuple[str, Any]]:
    from bench.workloads import jsonschemabench

    items = [(it.id, it.spec["schema"]) for it in jsonschemabench(24, 0, 0, False)]
    items.sort(key=lambda x: (len(json.dumps(x[1])), x[0]))
    return items[:k]


def _child(k: int, loops: int) -> None:
    import warnings

    import xgrammar2 as xgr

    from bench.workloads import WARMUP_SPEC, llama31_tokenizer_info

    info = llama31_tokenizer_info(xgr)
    warnings.simplefilter("ignore")
    comp = xgr.GrammarCompiler(info, cache_dir=False)
    bm = xgr.allocate_token_bitmask(1, info.vocab_size)
    xgr.GrammarMatcher(comp.compile_json_schema(json.dumps(WARMUP_SPEC["schema"]))).fill_next_token_bitmask(bm)
    p = time_fn = time.thread_time
    out: dict[str, dict[str, float]] = {}
    for sid, schema in _smallest(k):
        text, other = json.dumps(schema), json.dumps(schema, indent=2)
        r: dict[str, float] = {}
        t0 = p()
        xgr.GrammarMatcher(comp.compile_json_schema(text)).fill_next_token_bitmask(bm)
        r["cold"] = p() - t0
        t0 = p()
        g = comp.compile_json_schema(text)
        t1 = p()
        m = xgr.GrammarMatcher(g)
        t2 = p()
        m.fill_next_token_bitmask(bm)
        t3 = p()
        r.update(hit_compile=t1 - t0, hit_matcher=t2 - t1, hit_fill=t3 - t2, hit_total=t3 - t0)
        t0 = p()
        xgr.GrammarMatcher(comp.compile_json_schema(other)).fill_next_token_bitmask(bm)
        r["respelled_total"] = p() - t0
        for name, fn in (("steady_compile", lambda: comp.compile_json_schema(text)),
                         ("steady_matcher", lambda: xgr.GrammarMatcher(g)),
                         ("steady_fill", lambda: m.fill_next_token_bitmask(bm))):
            t0 = time_fn()
            for _ in range(loops):
                fn()
            r[name] = (time_fn() - t0) / loops
        out[sid] = {f: v * 1e6 for f, v in r.items()}
    print(json.dumps({"engine": xgr.__file__, "us": out}))


def _run(engine: str, k: int, loops: int) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([engine, ROOT])
    cmd = [sys.executable, "-m", "bench.hit_path", "--child", "--smallest", str(k), "--loops", str(loops)]
    res = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smallest", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--loops", type=int, default=2000)
    ap.add_argument("--engines", default=os.path.join(ROOT, "engine"),
                    help="comma-separated engine/ folders (trees to compare, alternated)")
    ap.add_argument("--child", action="store_true")
    args = ap.parse_args()
    if args.child:
        _child(args.smallest, args.loops)
        return
    engines = [e for e in args.engines.split(",") if e]
    runs: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
    for _ in range(args.repeats):
        for e in engines:
            runs[e].append(_run(e, args.smallest, args.loops)["us"])
    ids = list(runs[engines[0]][0])
    print("| schema | tree | cold compile+matcher+fill | first hit: compile | matcher | fill | total | "
          "first hit, respelled: total | steady: compile | matcher | fill |")
    print("|---" * 11 + "|")
    for s in ids:
        for i, e in enumerate(engines):
            med = {f: statistics.median(r[s][f] for r in runs[e]) for f in FIELDS}
            print(f"| {s} | {i} | " + " | ".join(f"{med[f]:.1f}" for f in FIELDS) + " |")
    for i, e in enumerate(engines):
        tot = {f: statistics.median(statistics.median(r[s][f] for r in runs[e]) for s in ids) for f in FIELDS}
        print(f"- {i} ({e}): medians over schemas (us): " + ", ".join(f"{f} {tot[f]:.1f}" for f in FIELDS))


if __name__ == "__main__":
    main()
