"""`python -m bench`: run the workloads on every available engine and write results.json, README.md and plots."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.metadata as md
import json
import os
import platform
import sys
import time
from typing import Any

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_ENGINES = "xgrammar2,xgrammar,llguidance,outlines-core"
ALL_WORKLOADS = "jsonschemabench,json-mode-eval,grammars,tools,tool-formats,ablation,memory"
#: The acceptance cross-check again with JSON Schema's own semantics: xgrammar and xgrammar2 default to
#: strict_mode=True, which forbids properties a schema does not list even where it does not forbid them.
JSON_SCHEMA_SEMANTICS = {"xgrammar2": {"strict_mode": False}, "xgrammar": {"strict_mode": False}}

#: xgrammar2 compile options of the ablation rows (XGrammar-2 paper, Table 4), each row adding one technique.
ABLATION_BIG_REPEAT = 100000
ABLATION = [
    ("baseline", {"precompute": True, "cross_grammar_cache": False, "repeat_threshold": ABLATION_BIG_REPEAT}),
    ("+JIT", {"cross_grammar_cache": False, "repeat_threshold": ABLATION_BIG_REPEAT}),
    ("+cross-grammar cache", {"repeat_threshold": ABLATION_BIG_REPEAT}),
    ("+repetition compression", {}),
]


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
    p.add_argument("--outlines-timeout", type=float, default=None,
                   help="compile timeout for outlines-core, whose regex compiles can take minutes (default 3 s, quick 2 s)")
    p.add_argument("--tool-sizes", default=None, help="tool counts N (default 5,20,50,100; quick 5,20)")
    p.add_argument("--tool-requests", type=int, default=None,
                   help="dynamic requests per tool sequence (default 24, quick 3); static and seen-before: a third")
    p.add_argument("--memory-requests", default=None, help="memory checkpoints (default 10,100,1000; quick 5,20)")
    p.add_argument("--threads", type=int, default=1, help="engine threads (default 1)")
    p.add_argument("--tokenizer", default=None,
                   help="HF tokenizer.json (default shared/data/tokenizers/original/llama-3-instruct/tokenizer.json)")
    p.add_argument("--canonical", default=None,
                   help="canonical vocab json for stop ids and checks (default .../canonical/llama-3-instruct.json)")
    p.add_argument("--no-engine-snapshot", action="store_true",
                   help="import xgrammar2 from where it is installed in every worker; by default the workers import "
                        "a copy of the package taken at start, so a rebuild during the run cannot mix two builds")
    p.add_argument("--report-only", action="store_true", help="rewrite README.md and plots from OUT/results.json")
    p.add_argument("--no-plots", action="store_true")
    return p.parse_args(argv)


def _snapshot_engine() -> dict[str, Any] | None:
    """Copy the xgrammar2 package (Python files and the compiled core) to a temporary folder put first on the
    workers' PYTHONPATH: every worker of the run, whenever it starts, then runs the same build."""
    import hashlib
    import importlib.util
    import shutil
    import tempfile

    try:
        spec = importlib.util.find_spec("xgrammar2")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        root = os.path.join(REPO_ROOT, "engine", "xgrammar2")
        if not os.path.isdir(root):
            return None
    else:
        root = os.path.dirname(spec.origin)
    dst = tempfile.mkdtemp(prefix="xgr2-bench-engine-")
    import atexit

    atexit.register(shutil.rmtree, dst, True)
    shutil.copytree(root, os.path.join(dst, "xgrammar2"), ignore=shutil.ignore_patterns("__pycache__"))
    # Spawned workers start from the driver's sys.path (multiprocessing passes it on), and grandchildren from the
    # environment: set both.
    sys.path.insert(0, dst)
    os.environ["PYTHONPATH"] = dst + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
    sos = sorted(f for f in os.listdir(root) if f.endswith(".so"))
    digest = None
    if sos:
        with open(os.path.join(root, sos[0]), "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()[:16]
    try:
        import subprocess

        head = subprocess.run(["git", "-C", REPO_ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip() or None
        dirty = bool(subprocess.run(["git", "-C", REPO_ROOT, "status", "--porcelain", "--", "csrc", "engine"],
                                    capture_output=True, text=True, timeout=10).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        head, dirty = None, None
    return {"source": root, "snapshot": dst, "core": sos[0] if sos else None, "core_sha256_16": digest,
            "git_head": head, "engine_tree_modified": dirty}


def run_tool_formats(T, pool, texts, workers, cfg, tokenize, eos, args, sizes, n_req, results, log):
    """Llama format on the main workers (Llama-3 vocabulary); Harmony on workers over gpt-oss's vocabulary."""
    from bench.runner import Config, Worker, start_all
    from bench.workloads import Tokenize

    h_tok, h_canon = T.gpt_oss_tokenizer(os.path.join(REPO_ROOT, ".cache", "bench-tok"))
    h_cfg = Config(h_tok, h_canon, T.HARMONY_STOP, threads=cfg.threads, compile_timeout=cfg.compile_timeout,
                   trace_timeout=cfg.trace_timeout, engine_compile_timeout=cfg.engine_compile_timeout)
    h_tokenize = Tokenize(h_tok)
    h_workers: dict[str, Worker] = {}
    h_info: dict[str, Any] = {}
    for e in workers:
        if e == "outlines-core":
            continue  # cannot express tool formats (see the tools workload); not started on a second vocabulary
        # Every engine on its standard HF vocabulary. (xgrammar2 admits a special token where a grammar spells
        # its text, e.g. <|channel|>; the probe below still checks that a real Harmony sequence is accepted.)
        opts: dict[str, Any] = {"stop_ids": [T.HARMONY_STOP]}
        h_workers[e] = Worker(e, h_cfg, options=opts)
    for (e, w), ok in zip(list(h_workers.items()), start_all(list(h_workers.values()))):
        if ok:
            h_info[e] = w.info
        else:
            h_info[e] = {"error": w.error}
            del h_workers[e]
            log(f"{e} (gpt-oss vocabulary): unavailable: {w.error}")
    probe = None
    if "xgrammar2" in workers:
        probe = harmony_native_probe(T, pool, texts, h_cfg, h_tokenize, log)
    try:
        out = T.tool_formats_workload(pool, texts, {"llama": (workers, cfg, tokenize, eos),
                                                    "harmony": (h_workers, h_cfg, h_tokenize, T.HARMONY_STOP)},
                                      log, sizes, n_req, max(1, n_req // 3), args.seed)
    finally:
        for w in h_workers.values():
            w.close()
    out["harmony_vocabulary"] = {"tokenizer": _short(h_tok), "stop_token": T.HARMONY_STOP, "engines": h_info}
    out["xgrammar2_harmony_native_probe"] = probe
    if probe and probe.get("outcome") and probe["outcome"] != "accepted":
        n = probe.get("n_tokens")
        out["disagreements"] = [{
            "item": "harmony: one BFCL call, xgrammar2 with TokenizerInfo.from_huggingface(gpt-oss)",
            "text": probe.get("text"), "n_tokens": n,
            "outcomes": {"xgrammar2 (from_huggingface)": f"{probe['outcome']}@{probe.get('reject_step')}/{n}",
                         "xgrammar (from_huggingface)": "accepted (every Harmony trace of the sequences)"},
            "reproduce": "xgr = xgrammar2; tok = AutoTokenizer(gpt-oss); ti = xgr.TokenizerInfo.from_huggingface(tok, "
                         "stop_token_ids=[200002]); st = xgr.get_model_structural_tag('harmony', tools, "
                         "reasoning=True); m = xgr.GrammarMatcher(xgr.GrammarCompiler(ti).compile_structural_tag(st));"
                         " m.accept_token(200005)  # <|channel|> -> False"}]
    return out


def _short(p: str) -> str:
    return os.path.relpath(p, REPO_ROOT) if p.startswith(REPO_ROOT) else p


def harmony_native_probe(T, pool, texts, h_cfg, h_tokenize, log):
    """One Harmony call through xgrammar2 with its native TokenizerInfo.from_huggingface vocabulary."""
    from bench.runner import Worker

    w = Worker("xgrammar2", h_cfg, options={"stop_ids": [T.HARMONY_STOP]})
    if not w.start():
        return {"error": w.error}
    try:
        t = pool[0]
        spec = {"kind": "tools", "format": "harmony", "tools": [t.tool]}
        r = w.call(("compile", "probe", spec, "cold"), h_cfg.compile_timeout)
        if not r.get("ok"):
            return {"compile_error": r.get("error")}
        text = T.render_call("harmony", t.name, t.calls[0], texts[0])
        tokens = h_tokenize(text) + [T.HARMONY_STOP]
        r = w.call(("trace", "probe", tokens), h_cfg.trace_timeout)
        res = {"text": text, "n_tokens": len(tokens), "vocab_path": (w.info or {}).get("vocab_path"),
               "outcome": r.get("outcome"), "reject_step": r.get("reject_step")}
        if r.get("reject_step") is not None:
            res["rejected_token"] = tokens[r["reject_step"]]
        log(f"xgrammar2 Harmony with TokenizerInfo.from_huggingface: {res['outcome']}"
            + (f" at step {res['reject_step']} (token {res.get('rejected_token')})" if res.get("reject_step")
               is not None else ""))
        return res
    finally:
        w.close()


def run_ablation(T, W, pool, texts, cfg, tokenize, eos, args, n_schemas, max_tests, log, quick):
    """The XGrammar-2 paper's Table 4 (ablation) for xgrammar2: one worker per row, each row adding one technique; engines interleaved."""
    from bench.runner import Worker, run_items, start_all, summarize_run

    workers: dict[str, Worker] = {}
    rows = []
    # The baseline row precomputes every mask at compile time: seconds per complex schema, so a tighter budget.
    cfg = dataclasses.replace(cfg, compile_timeout=min(cfg.compile_timeout, 20.0))
    pending = [Worker(label, cfg, engine="xgrammar2", options={"compiler": opts}) for label, opts in ABLATION]
    for (label, opts), w, ok in zip(ABLATION, pending, start_all(pending)):
        rows.append({"label": label, "options": opts})
        if ok:
            workers[label] = w
        else:
            log(f"ablation {label}: unavailable: {w.error}")
            rows[-1]["error"] = w.error
    out: dict[str, Any] = {"rows": rows}
    try:
        if not workers:
            return out
        items = W.jsonschemabench(n_schemas, args.seed, min(max_tests, 3), False)
        run = run_items("ablation-json", items, workers, cfg, tokenize)
        out["json"] = summarize_run(run, keep_cdf=False)
        out["json"].pop("per_item", None)
        g_items = [it for it in W.grammar_items([], 1 if quick else 2, args.seed)
                   if it.id in (("repeat_az_2000",) if quick else
                                ("repeat_az_2000", "schema_long_string", "schema_many_items"))]
        run = run_items("ablation-repetition", g_items, workers, cfg, tokenize)
        out["repetition"] = summarize_run(run, keep_cdf=False)
        n = 5 if quick else 20
        seq = T.make_sequence("function", n, "dynamic", len(pool), 2 if quick else 10, 0, args.seed + 1)
        out["tools"] = T.run_sequence(seq, pool, texts, workers, cfg, tokenize, eos, log, key_prefix="ablation")
        T.strip_raw([out["tools"]])
    finally:
        for w in workers.values():
            w.close()
    return out


def run_memory(T, pool, engines, cfg, marks, n_tools, seed, log):
    """Memory per compiled grammar and cache size after N dynamic tool-set requests, one fresh worker per engine."""
    from bench.runner import Worker

    rng = __import__("random").Random(f"{seed}:memory")
    specs = [{"kind": "tools", "format": "function", "tools": [pool[i].tool for i in rng.sample(range(len(pool)),
                                                                                                  n_tools)]}
             for _ in range(max(marks))]
    out: dict[str, Any] = {"format": "function", "n_tools": n_tools, "marks": marks, "engines": {}}
    from bench.runner import start_all

    todo = [e for e in engines if e != "outlines-core"]
    if "outlines-core" in engines:
        out["engines"]["outlines-core"] = {"unsupported": "cannot express the tool format"}
    # Started together (separate processes, so each RSS stays its own), then run one at a time.
    pending = [Worker(e, cfg) for e in todo]
    for e, w, ok in zip(todo, pending, start_all(pending, parallel=len(pending) or 1)):
        if not ok:
            out["engines"][e] = {"error": w.error}
            continue
        try:
            t0 = time.time()
            r = w.call(("mem_run", specs, marks), 900)
            r.pop("ok", None)
            gb = r.pop("grammar_bytes", None) or []
            from bench.stats import summarize

            r["grammar_bytes"] = summarize(gb)
            r["duration_s"] = round(time.time() - t0, 1)
            out["engines"][e] = r
            pts = ", ".join(f"{p['requests']}: RSS {p['rss'] / 2**20:.0f} MiB" for p in r.get("points", []))
            log(f"memory {e}: {pts} ({r['duration_s']:.0f}s)")
        finally:
            w.close()
    return out


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
    snapshot = None if args.no_engine_snapshot else _snapshot_engine()
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
    oc_timeout = args.outlines_timeout if args.outlines_timeout is not None else (2.0 if q else 3.0)
    cfg = Config(tok_json, canon_path, eos, threads=args.threads, compile_timeout=compile_timeout,
                 trace_timeout=trace_timeout, engine_compile_timeout={"outlines-core": oc_timeout})
    tool_sizes = [int(x) for x in (args.tool_sizes or ("5,20" if q else "5,20,50,100")).split(",")]
    n_dyn = args.tool_requests if args.tool_requests is not None else (3 if q else 24)
    n_static = max(2, n_dyn // 3)
    n_seen = max(1, n_dyn // 3)
    n_fmt = max(2, n_dyn // 3)
    mem_marks = [int(x) for x in (args.memory_requests or ("5,20" if q else "10,100,1000")).split(",")]
    mem_n_tools = 5 if q else 20
    abl_schemas = 2 if q else 8
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
                     "outlines_compile_timeout_s": oc_timeout, "tool_sizes": tool_sizes,
                     "tool_requests_dynamic": n_dyn, "tool_requests_static": n_static,
                     "tool_requests_seen_before": n_seen, "tool_format_requests": n_fmt,
                     "memory_marks": mem_marks, "memory_n_tools": mem_n_tools, "ablation_schemas": abl_schemas,
                     "tokenizer": tok_json, "canonical": canon_path, "eos_token": eos,
                     "vocab_tokens": canon["num_tokens"]},
        "machine": machine_info(),
        "xgrammar2_build": snapshot,
        "engines": {},
        "workloads": {},
    }

    workers: dict[str, Worker] = {}
    from bench.engines import ENGINES
    from bench.runner import start_all

    for e in engine_names:
        if e not in ENGINES:
            raise SystemExit(f"unknown engine {e!r} (choose from {', '.join(ENGINES)})")
    ts = time.time()
    pending = [Worker(e, cfg) for e in engine_names]
    for w, ok in zip(pending, start_all(pending)):
        e = w.name
        if ok:
            log(f"{e}: ready after {time.time() - ts:.1f}s ({w.info})")
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
            run = run_items("jsonschemabench", jsb_items, workers, cfg, tokenize, semantics=JSON_SCHEMA_SEMANTICS)
            results["workloads"]["jsonschemabench"] = summarize_run(run)
            results["workloads"]["jsonschemabench"]["sample"] = [it.id for it in jsb_items]
        if "json-mode-eval" in wl:
            items = W.json_mode_eval(n_jme, max_tests, with_invalid)
            run = run_items("json-mode-eval", items, workers, cfg, tokenize, semantics=JSON_SCHEMA_SEMANTICS)
            results["workloads"]["json-mode-eval"] = summarize_run(run)
        if "grammars" in wl:
            texts = [inst.text for it in jsb_items for inst in it.instances if inst.valid]
            items = W.grammar_items(texts, n_grammar_traces, args.seed)
            run = run_items("grammars", items, workers, cfg, tokenize, compile_repeats=compile_repeats)
            s = summarize_run(run, keep_cdf=False)
            s["grammars"] = {it.id: {**it.meta, "spec_kind": it.spec["kind"], "traces": len(it.instances)}
                             for it in items}
            results["workloads"]["grammars"] = s
        tool_wl = [w for w in ("tools", "tool-formats", "ablation", "memory") if w in wl]
        if tool_wl:
            from bench import tools as T

            pool = T.load_pool(args.seed)
            texts = T.confetti_texts()
            pool_info = {"size": len(pool), "source": "BFCL v4 " + ", ".join(T.BFCL_FILES),
                         "calls": sum(len(t.calls) for t in pool), "formats": T.FORMATS}
        if "tools" in wl:
            r = T.tools_workload(pool, texts, workers, cfg, tokenize, eos, log, tool_sizes, n_dyn, n_static,
                                 n_seen, args.seed)
            results["workloads"]["tools"] = {"pool": pool_info, **r}
        if "tool-formats" in wl:
            results["workloads"]["tool-formats"] = run_tool_formats(
                T, pool, texts, workers, cfg, tokenize, eos, args, tool_sizes, n_fmt, results, log)
        # The remaining workloads start their own workers; free the memory the main ones hold.
        for e, w in workers.items():
            results["engines"][e]["restarts"] = w.restarts
            results["engines"][e]["crashes"] = w.crashes
            w.close()
        if "ablation" in wl:
            results["workloads"]["ablation"] = run_ablation(
                T, W, pool, texts, cfg, tokenize, eos, args, abl_schemas, max_tests, log, q)
        if "memory" in wl:
            results["workloads"]["memory"] = run_memory(
                T, pool, [e for e in workers], cfg, mem_marks, mem_n_tools, args.seed, log)
    finally:
        for e, w in workers.items():
            results["engines"][e].setdefault("restarts", w.restarts)
            results["engines"][e].setdefault("crashes", w.crashes)
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
