"""Compile to first mask in fresh processes, cold and with a warm cache directory, per JSONSchemaBench sample
schema: a lighter ``bench/disk_cache.py`` (no tool sets, no RSS or concurrency phases) for A/B runs of the hit path.

    python -m bench.disk_cache_fresh [--schemas 24] [--repeats 3] [--engines TREE_A/engine,TREE_B/engine]
                                     [--clock wall|cpu] [--tool-sets 0]

Per engine tree: one process fills a new directory; then ``--repeats`` rounds, each a cold process (no directory)
and two warm ones (that directory) per tree, trees alternated: ``warm`` as a server runs (the directory's grammar
files preloaded by the background thread when the compiler is made, ``disk_preload.py``) and ``warm-nopre``
with ``XGRAMMAR2_CACHE_PRELOAD_BYTES=0`` (every grammar read from its file on the request's thread). Each process
loads the Llama-3.1 vocabulary, compiles one warm-up schema (and awaits the directory's mask entry packs and the
preload), then times per schema ``compile_json_schema`` +
``GrammarMatcher`` + the first ``fill_next_token_bitmask`` (``--clock cpu``: the CPU time of the requesting
thread, steadier on a loaded machine; a layer file over 1 MiB loads on the background thread either way). Prints per-schema medians (ms) and warm / cold ratios as
a markdown table. ``--tool-sets N`` also times N dynamic 100-tool requests (``bench.disk_cache``'s: ``<function=NAME>``
triggered tags over the BFCL pool, given as JSON text), rows ``tools100-i``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _child(mode: str, d: str, n: int, clock: str = "wall", tool_sets: int = 0) -> None:
    import warnings

    import xgrammar2 as xgr

    from bench.workloads import WARMUP_SPEC, jsonschemabench, llama31_tokenizer_info

    info = llama31_tokenizer_info(xgr)
    warnings.simplefilter("ignore")
    texts = [(it.id, json.dumps(it.spec["schema"])) for it in jsonschemabench(n, 0, 0, False)]
    comp = xgr.GrammarCompiler(info, cache_dir=d if mode != "cold" else False)
    bm = xgr.allocate_token_bitmask(1, info.vocab_size)
    m = xgr.GrammarMatcher(comp.compile_json_schema(json.dumps(WARMUP_SPEC["schema"])))
    m.fill_next_token_bitmask(bm)
    if comp.disk_cache is not None:
        comp.disk_cache.wait_packs(10)
        if hasattr(comp.disk_cache, "wait_preload"):  # (a tree without the preload: as warm-nopre)
            comp.disk_cache.wait_preload(30)
    out: dict[str, float] = {}
    p = time.thread_time if clock == "cpu" else time.perf_counter
    for sid, text in texts:
        try:
            t0 = p()
            m = xgr.GrammarMatcher(comp.compile_json_schema(text))
            m.fill_next_token_bitmask(bm)
            out[sid] = (p() - t0) * 1e3
        except Exception:  # noqa: BLE001 - a schema the engine refuses is left out
            pass
    if tool_sets:
        import random

        from bench.disk_cache import _tools_request
        from bench.tools import load_pool

        pool = load_pool()
        rng = random.Random("disk-cache-100")
        for i in range(tool_sets):
            text = _tools_request([pool[k].tool for k in rng.sample(range(len(pool)), 100)])
            t0 = p()
            m = xgr.GrammarMatcher(comp.compile_structural_tag(text))
            m.fill_next_token_bitmask(bm)
            out[f"tools100-{i}"] = (p() - t0) * 1e3
    if comp.disk_cache is not None:
        comp.disk_cache.flush()
    pre = getattr(comp.disk_cache, "preload", None)
    print(json.dumps({"mode": mode, "engine": xgr.__file__, "ms": out,
                      "hits": getattr(comp.disk_cache, "hits", None),
                      "preloaded": getattr(pre, "loads", None), "preload_hits": getattr(pre, "hits", None)}))


def _run(engine: str, mode: str, d: str, n: int, clock: str = "wall", tool_sets: int = 0) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([engine, ROOT])
    env.pop("XGRAMMAR2_CACHE_PRELOAD_BYTES", None)
    if mode == "warm-nopre":
        env["XGRAMMAR2_CACHE_PRELOAD_BYTES"] = "0"
    cmd = [sys.executable, "-m", "bench.disk_cache_fresh", "--child", mode, "--dir", d, "--schemas", str(n),
           "--clock", clock, "--tool-sets", str(tool_sets)]
    res = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


MODES = ("cold", "warm", "warm-nopre")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--schemas", type=int, default=24)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--engines", default=os.path.join(ROOT, "engine"),
                    help="comma-separated engine/ folders (trees to compare, alternated)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    ap.add_argument("--tool-sets", type=int, default=0)
    ap.add_argument("--child", default="")
    ap.add_argument("--dir", default="")
    args = ap.parse_args()
    if args.child:
        _child(args.child, args.dir, args.schemas, args.clock, args.tool_sets)
        return
    engines = [e for e in args.engines.split(",") if e]
    with tempfile.TemporaryDirectory(prefix="xgr2-fresh-") as tmp:
        dirs = {e: os.path.join(tmp, f"dir{i}") for i, e in enumerate(engines)}
        for e in engines:
            _run(e, "fill", dirs[e], args.schemas, args.clock, args.tool_sets)
        runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for _ in range(args.repeats):
            for e in engines:
                for mode in MODES:
                    runs.setdefault((e, mode), []).append(_run(e, mode, dirs[e], args.schemas, args.clock, args.tool_sets))
    med = {k: {s: statistics.median(r["ms"][s] for r in v if s in r["ms"]) for s in v[0]["ms"]}
           for k, v in runs.items()}
    ids = [s for s in med[(engines[0], "cold")] if all(s in med[(e, m)] for e in engines for m in MODES)]
    head = "| schema | " + " | ".join(f"cold {i} (ms) | warm-preload {i} | ratio {i} | warm-no-preload {i} | ratio {i}"
                                     for i in range(len(engines))) + " |"
    print(head)
    print("|---" * (1 + 5 * len(engines)) + "|")
    ratios: dict[tuple[str, str], list[float]] = {(e, m): [] for e in engines for m in MODES[1:]}
    for s in ids:
        cells = []
        for e in engines:
            c = med[(e, "cold")][s]
            cells.append(f"{c:.2f}")
            for m in MODES[1:]:
                w = med[(e, m)][s]
                ratios[(e, m)].append(w / c)
                cells += [f"{w:.3f}", f"{w / c:.3f}"]
        print(f"| {s} | " + " | ".join(cells) + " |")
    for i, e in enumerate(engines):
        for m, label in zip(MODES[1:], ("warm-preload", "warm-no-preload")):
            r = ratios[(e, m)]
            print(f"- {i} ({e}) {label}: / cold median {statistics.median(r):.3f}, at <= 10 %: "
                  f"{sum(x <= 0.1 for x in r)} / {len(r)}; p50 {statistics.median(med[(e, m)].values()):.3f} ms, "
                  f"cold p50 {statistics.median(med[(e, 'cold')].values()):.2f} ms; hits per process "
                  f"{[x['hits'] for x in runs[(e, m)]]}, preloaded {[x.get('preloaded') for x in runs[(e, m)]]}, "
                  f"preload hits {[x.get('preload_hits') for x in runs[(e, m)]]}")


if __name__ == "__main__":
    main()
