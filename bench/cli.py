"""`python -m bench`: run the workloads on every available engine and write results.json, README.md and plots."""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata as md
import json
import os
import platform
import sys
import time
from typing import Any

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_ENGINES = "xgrammar2,xgrammar,llguidance"
ALL_WORKLOADS = "jsonschemabench,json-mode-eval,grammars"


def _single_thread_env() -> None:
    # Set before any worker is spawned (workers inherit the environment): every engine runs on one thread.
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS",
              "NUMEXPR_NUM_THREADS"):
        os.environ[k] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"


def machine_info() -> dict[str, Any]:
    cpu = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    mem = int(line.split()[1]) // 1024
    except OSError:
        pass
    pk = {}
    for d in ("xgrammar2", "xgrammar", "llguidance", "outlines-core", "torch", "numpy", "tokenizers",
              "transformers", "matplotlib", "jsonschema"):
        try:
            pk[d] = md.version(d)
        except md.PackageNotFoundError:
            pk[d] = None
    return {
        "cpu_model": cpu,
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "mem_total_mib": mem,
        "platform": platform.platform(),
        "loadavg_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "packages": pk,
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--quick", action="store_true",
                   help="CI smoke run: a few items per workload, well under 5 minutes on 2 cores "
                        "(default --out .cache/bench-quick so the committed results stay)")
    p.add_argument("--engines", default=DEFAULT_ENGINES,
                   help=f"comma list from xgrammar2,xgrammar,llguidance,outlines-core (default {DEFAULT_ENGINES}); "
                        "an engine that does not import is reported as unavailable")
    p.add_argument("--workloads", default=ALL_WORKLOADS, help=f"comma list (default {ALL_WORKLOADS})")
    p.add_argument("--out", default=None, help="output folder (default docs/benchmarks)")
    p.add_argument("--n-schemas", type=int, default=None, help="JSONSchemaBench sample size (default 50, quick 5)")
    p.add_argument("--n-jme", type=int, default=None, help="json-mode-eval items (default 100, quick 5)")
    p.add_argument("--max-tests", type=int, default=None,
                   help="valid (and invalid) instances per schema at most (default 10, quick 2)")
    p.add_argument("--no-invalid", action="store_true", help="do not run invalid instances (rejection cross-check)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compile-timeout", type=float, default=None, help="seconds per compile (default 30, quick 15)")
    p.add_argument("--trace-timeout", type=float, default=None, help="seconds per instance trace (default 120, quick 30)")
    p.add_argument("--threads", type=int, default=1, help="engine threads (default 1)")
    p.add_argument("--tokenizer", default=None,
                   help="HF tokenizer.json (default shared/data/tokenizers/original/llama-3-instruct/tokenizer.json)")
    p.add_argument("--canonical", default=None,
                   help="canonical vocab json for stop ids and checks (default .../canonical/llama-3-instruct.json)")
    p.add_argument("--report-only", action="store_true", help="rewrite README.md and plots from OUT/results.json")
    p.add_argument("--no-plots", action="store_true")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from bench import report

    out = args.out or (os.path.join(REPO_ROOT, ".cache", "bench-quick") if args.quick
                       else os.path.join(REPO_ROOT, "docs", "benchmarks"))
    os.makedirs(out, exist_ok=True)
    if args.report_only:
        with open(os.path.join(out, "results.json"), encoding="utf-8") as f:
            results = json.load(f)
        report.write_all(results, out, plots=not args.no_plots)
        return 0

    _single_thread_env()
    from bench import workloads as W
    from bench.runner import Config, Worker, log, run_items, summarize_run

    q = args.quick
    n_schemas = args.n_schemas if args.n_schemas is not None else (5 if q else 50)
    n_jme = args.n_jme if args.n_jme is not None else (5 if q else 100)
    max_tests = args.max_tests if args.max_tests is not None else (2 if q else 10)
    compile_timeout = args.compile_timeout if args.compile_timeout is not None else (15.0 if q else 30.0)
    trace_timeout = args.trace_timeout if args.trace_timeout is not None else (30.0 if q else 120.0)
    n_grammar_traces = 2 if q else 10
    compile_repeats = 2 if q else 5
    tok_json = args.tokenizer or os.path.join(W.DATA_DIR, "tokenizers", "original", "llama-3-instruct",
                                              "tokenizer.json")
    canon_path = args.canonical or os.path.join(W.DATA_DIR, "tokenizers", "canonical", "llama-3-instruct.json")
    with open(canon_path, encoding="utf-8") as f:
        canon = json.load(f)
    eos = canon["eos_ids"][-1]
    cfg = Config(tok_json, canon_path, eos, threads=args.threads, compile_timeout=compile_timeout,
                 trace_timeout=trace_timeout)
    engine_names = [e.strip() for e in args.engines.split(",") if e.strip()]
    wl = [w.strip() for w in args.workloads.split(",") if w.strip()]
    for w in wl:
        if w not in ALL_WORKLOADS.split(","):
            raise SystemExit(f"unknown workload {w!r} (choose from {ALL_WORKLOADS})")

    t0 = time.time()
    results: dict[str, Any] = {
        "schema_version": 1,
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": "python -m bench " + " ".join(sys.argv[1:] if argv is None else argv),
        "quick": q,
        "settings": {"n_schemas": n_schemas, "n_jme": n_jme, "max_tests": max_tests, "seed": args.seed,
                     "with_invalid": not args.no_invalid, "compile_timeout_s": compile_timeout,
                     "trace_timeout_s": trace_timeout, "threads": args.threads,
                     "grammar_traces": n_grammar_traces, "nocache_repeats_grammars": compile_repeats,
                     "tokenizer": tok_json, "canonical": canon_path, "eos_token": eos,
                     "vocab_tokens": canon["num_tokens"]},
        "machine": machine_info(),
        "engines": {},
        "workloads": {},
    }

    workers: dict[str, Worker] = {}
    for e in engine_names:
        from bench.engines import ENGINES

        if e not in ENGINES:
            raise SystemExit(f"unknown engine {e!r} (choose from {', '.join(ENGINES)})")
        w = Worker(e, cfg)
        ts = time.time()
        ok = w.start()
        if ok:
            log(f"{e}: ready in {time.time() - ts:.1f}s ({w.info})")
            workers[e] = w
            results["engines"][e] = {"available": True, **(w.info or {})}
        else:
            log(f"{e}: unavailable: {w.error}")
            results["engines"][e] = {"available": False, "error": w.error}
    if not workers:
        log("no engine could start")
        return 2

    tokenize = W.Tokenize(tok_json)
    try:
        with_invalid = not args.no_invalid
        jsb_items = W.jsonschemabench(n_schemas, args.seed, max_tests, with_invalid)
        if "jsonschemabench" in wl:
            run = run_items("jsonschemabench", jsb_items, workers, cfg, tokenize)
            results["workloads"]["jsonschemabench"] = summarize_run(run)
            results["workloads"]["jsonschemabench"]["sample"] = [it.id for it in jsb_items]
        if "json-mode-eval" in wl:
            items = W.json_mode_eval(n_jme, max_tests, with_invalid)
            run = run_items("json-mode-eval", items, workers, cfg, tokenize)
            results["workloads"]["json-mode-eval"] = summarize_run(run)
        if "grammars" in wl:
            texts = [inst.text for it in jsb_items for inst in it.instances if inst.valid]
            items = W.grammar_items(texts, n_grammar_traces, args.seed)
            run = run_items("grammars", items, workers, cfg, tokenize, compile_repeats=compile_repeats)
            s = summarize_run(run, keep_cdf=False)
            s["grammars"] = {it.id: {**it.meta, "spec_kind": it.spec["kind"], "traces": len(it.instances)}
                             for it in items}
            results["workloads"]["grammars"] = s
    finally:
        for e, w in workers.items():
            results["engines"][e]["restarts"] = w.restarts
            results["engines"][e]["crashes"] = w.crashes
            w.close()
    results["duration_s"] = round(time.time() - t0, 1)
    if hasattr(os, "getloadavg"):
        # Other work on the machine skews every engine's numbers (interleaving keeps the ratios fair); say how much.
        results["machine"]["loadavg_at_end"] = list(os.getloadavg())
    results["targets"] = report.evaluate_targets(results)
    with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1, sort_keys=False)
        f.write("\n")
    report.write_all(results, out, plots=not args.no_plots)
    log(f"done in {results['duration_s']:.0f}s; wrote {out}/results.json, README.md"
        + ("" if args.no_plots else ", plots"))
    print(report.console_table(results))
    return 0
