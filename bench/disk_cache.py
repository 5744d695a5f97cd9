"""The on-disk compile cache (docs/disk-cache.md): what a second process gains from a warm directory.

    python -m bench.disk_cache [--schemas 16] [--tool-sets 6] [--out rows.json]

Rows (each phase is a fresh process over the Llama-3.1 vocabulary, after one warm-up schema compiled to its first mask,
as a server after its first request):

- *cold*: no directory: compile to first mask of every JSONSchemaBench sample schema (round-robin over the subsets,
  as `python -m bench`) and of dynamic 100-tool requests (`<function=NAME>` triggered tags over the BFCL pool);
- *fill*: the same requests with an empty directory (the writes happen in the background; timed too, to show the
  cold path does not pay for them), then the directory is flushed;
- *warm*: the same requests in a new process with the warm directory;
- per token: the first decoding pass over each schema's valid instances in the warm-directory process, against a
  second pass over the same grammar in the same process (a warm in-memory grammar);
- *warm, no layer files*: the warm phase again with ``XGRAMMAR2_CACHE_LAYERS=0`` (grammars and packs from the
  directory, each grammar's own mask layers built on first use, as before layer files existed);
- *warm, copied packs*: the warm phase again with ``XGRAMMAR2_CACHE_MMAP=0`` (the packs' entries copied into
  the cache instead of borrowing from the read-only mappings);
- *concurrent*: four processes compile overlapping 20-tool sets into one directory at once under a small budget;
  afterwards every file must load (header, checksum, image checks) and the directory must be within its budget;
- *rss*: four processes at once load the warm directory's packs (mapped, then copied), and each reads its
  ``/proc/self/smaps_rollup`` and the ``.xgm`` mappings of ``/proc/self/smaps`` while all four hold them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from typing import Any, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


def _tools_request(tools: list[dict[str, Any]]) -> str:
    return json.dumps({"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<function="],
        "tags": [{"type": "tag", "begin": f"<function={t['function']['name']}>",
                  "content": {"type": "json_schema", "json_schema": t["function"]["parameters"]},
                  "end": "</function>"} for t in tools]}})


def _child(args: argparse.Namespace) -> None:
    sys.path.insert(0, ROOT)
    import xgrammar2 as xgr
    from bench.tools import load_pool
    from bench.workloads import DATA_DIR, WARMUP_SPEC, Tokenize, jsonschemabench

    t_start = time.perf_counter()
    tok_json = os.path.join(DATA_DIR, "tokenizers/original/llama-3-instruct/tokenizer.json")
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast(tokenizer_file=tok_json)
    ti = xgr.TokenizerInfo.from_huggingface(hf, stop_token_ids=[128009])
    t_comp = time.perf_counter()
    comp = xgr.GrammarCompiler(ti, cache_dir=args.dir or False,
                               cache_dir_limit_bytes=args.limit or None)
    t_made = time.perf_counter()
    out: dict[str, Any] = {"phase": args.phase}
    if args.phase == "rss":
        dc = comp.disk_cache
        dc.wait_packs(120)
        out["make_ms"] = 1e3 * (t_made - t_comp)  # the compiler (with the vocabulary's handle)
        out["load_ms"] = 1e3 * (time.perf_counter() - t_made)  # packs loaded after that
        out["pack_loads"], out["entries"] = dc.pack_loads, dc.pack_entries_loaded
        out["cache_bytes"] = xgr.get_cross_grammar_cache_stats()["bytes"]
        _barrier(args.barrier, "ready", args.seed, 4)
        out["rollup"] = _smaps_rollup()
        out["xgm"] = _smaps_files(".xgm")
        _barrier(args.barrier, "measured", args.seed, 4)
        print(json.dumps(out))
        return
    bm = xgr.allocate_token_bitmask(1, ti.vocab_size)

    def first_mask(cg: Any) -> Any:
        m = xgr.GrammarMatcher(cg)
        m.fill_next_token_bitmask(bm)
        return m

    if args.phase == "concurrent":
        pool = load_pool()
        rng = random.Random(f"concurrent:{args.seed}")
        for _ in range(args.tool_sets):
            tools = [pool[i].tool for i in rng.sample(range(40), 20)]  # overlapping: 40 tools, 20 each
            first_mask(comp.compile_structural_tag(_tools_request(tools)))
        comp.disk_cache.flush()
        out["writes"] = comp.disk_cache.writes
        print(json.dumps(out))
        return

    t0 = time.perf_counter()
    first_mask(comp.compile_json_schema(json.dumps(WARMUP_SPEC["schema"])))
    out["warmup_ms"] = 1e3 * (time.perf_counter() - t0)
    out["setup_ms"] = 1e3 * (time.perf_counter() - t_start)
    if comp.disk_cache is not None:  # packs load in the background: what is left after the warm-up
        t0 = time.perf_counter()
        comp.disk_cache.wait_packs(120)
        out["pack_wait_ms"] = 1e3 * (time.perf_counter() - t0)
    tokenize = Tokenize(tok_json)
    schemas = []
    for it in jsonschemabench(args.schemas, 0, 3, False):
        ms, first, again = None, [], []
        try:
            t0 = time.perf_counter()
            cg = comp.compile_json_schema(json.dumps(it.spec["schema"]))
            m = first_mask(cg)
            ms = 1e3 * (time.perf_counter() - t0)
        except Exception as e:  # noqa: BLE001 - a schema xgrammar2 refuses: not a row
            schemas.append({"id": it.id, "error": f"{type(e).__name__}: {e}"[:200]})
            continue
        for inst in it.instances:
            toks = tokenize(inst.text) + [128009]
            for sink in (first, again):  # first pass on the grammar, then the same pass warm
                m = xgr.GrammarMatcher(cg)
                for t in toks:
                    a = time.perf_counter_ns()
                    m.fill_next_token_bitmask(bm)
                    sink.append((time.perf_counter_ns() - a) / 1e3)
                    if not m.accept_token(t):
                        break
        schemas.append({"id": it.id, "ms": ms, "first_us": first, "again_us": again})
    out["schemas"] = schemas
    pool = load_pool()
    rng = random.Random("disk-cache-100")
    tools_ms = []
    for _ in range(args.tool_sets):
        tools = [pool[i].tool for i in rng.sample(range(len(pool)), 100)]
        t0 = time.perf_counter()
        first_mask(comp.compile_structural_tag(_tools_request(tools)))
        tools_ms.append(1e3 * (time.perf_counter() - t0))
    out["tools_ms"] = tools_ms
    if comp.disk_cache is not None:
        t0 = time.perf_counter()
        comp.disk_cache.flush()
        out["flush_ms"] = 1e3 * (time.perf_counter() - t0)
        dc = comp.disk_cache
        out["disk"] = {"hits": dc.hits, "misses": dc.misses, "rejected": dc.rejected,
                       "writes": dc.writes, "bytes": dc.size_bytes(), "pack_loads": dc.pack_loads,
                       "pack_entries_loaded": dc.pack_entries_loaded, "pack_writes": dc.pack_writes,
                       "pack_entries_written": dc.pack_entries_written, "layer_loads": dc.layer_loads,
                       "layer_entries_loaded": dc.layer_entries_loaded, "layer_writes": dc.layer_writes,
                       "layer_entries_written": dc.layer_entries_written}
    print(json.dumps(out))


def _barrier(d: str, name: str, me: int, n: int) -> None:
    """Waits until n processes reached `name` (files in d)."""
    open(os.path.join(d, f"{name}.{me}"), "w").close()
    deadline = time.monotonic() + 300
    while sum(f.startswith(name + ".") for f in os.listdir(d)) < n and time.monotonic() < deadline:
        time.sleep(0.05)


def _smaps_rollup() -> dict[str, int]:
    """kB fields of /proc/self/smaps_rollup (empty where there is none)."""
    out: dict[str, int] = {}
    try:
        with open("/proc/self/smaps_rollup") as f:
            for line in f:
                k, _, rest = line.partition(":")
                if rest.strip().endswith("kB"):
                    out[k] = int(rest.split()[0])
    except OSError:
        pass
    return out


def _smaps_files(suffix: str) -> dict[str, int]:
    """kB fields summed over the mappings of files ending with suffix (/proc/self/smaps)."""
    out: dict[str, int] = {"mappings": 0}
    inside = False
    try:
        with open("/proc/self/smaps") as f:
            for line in f:
                head = line.split()
                if head and "-" in head[0] and len(head) >= 5 and ":" not in head[0]:
                    name = " ".join(head[5:])
                    inside = name.replace(" (deleted)", "").endswith(suffix)
                    out["mappings"] += inside
                elif inside and line.rstrip().endswith("kB"):
                    k, _, rest = line.partition(":")
                    out[k] = out.get(k, 0) + int(rest.split()[0])
    except OSError:
        pass
    return out


def _run(phase: str, d: str, args: argparse.Namespace, extra: list[str] = (),
         env_extra: Optional[dict[str, str]] = None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "bench.disk_cache", "--child", phase, "--dir", d,
           "--schemas", str(args.schemas), "--tool-sets", str(args.tool_sets), *extra]
    env = dict(os.environ)
    env.update(env_extra or {})
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "engine"), ROOT, env.get("PYTHONPATH", "")])
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)


def _result(p: subprocess.Popen) -> dict[str, Any]:
    outp, _ = p.communicate()
    if p.returncode:
        raise SystemExit(f"child failed ({p.returncode})")
    return json.loads(outp.strip().splitlines()[-1])


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One run whose per-item times are the medians over the runs (the machine is shared: a single process's
    numbers carry other processes' noise); per-token samples are pooled."""
    out = dict(runs[0])
    schemas = []
    for i, s in enumerate(runs[0]["schemas"]):
        if "ms" not in s or any("ms" not in r["schemas"][i] for r in runs):
            schemas.append(s)
            continue
        schemas.append({"id": s["id"], "ms": _pct([r["schemas"][i]["ms"] for r in runs], 50),
                        "first_us": [x for r in runs for x in r["schemas"][i]["first_us"]],
                        "again_us": [x for r in runs for x in r["schemas"][i]["again_us"]]})
    out["schemas"] = schemas
    out["tools_ms"] = [_pct([r["tools_ms"][k] for r in runs], 50) for k in range(len(runs[0]["tools_ms"]))]
    out["setup_ms"] = _pct([r["setup_ms"] for r in runs], 50)
    out["warmup_ms"] = _pct([r["warmup_ms"] for r in runs], 50)
    out["warmup_ms_all"] = [r["warmup_ms"] for r in runs]
    if all("pack_wait_ms" in r for r in runs):
        out["pack_wait_ms"] = _pct([r["pack_wait_ms"] for r in runs], 50)
    return out


def _verify_dir(d: str) -> dict[str, Any]:
    """Loads every file of a directory through the checks a reader makes."""
    sys.path.insert(0, os.path.join(ROOT, "engine"))
    import xgrammar2 as xgr
    from xgrammar2 import disk_cache as dcm

    files = bad = 0
    for sub in os.listdir(d):
        p = os.path.join(d, sub)
        for name in os.listdir(p):
            if not name.endswith(".xgc"):
                continue
            files += 1
            with open(os.path.join(p, name), "rb") as f:
                data = f.read()
            if dcm.check_file_bytes(data) is None:
                bad += 1
    del xgr
    return {"files": files, "corrupt": bad}


def markdown(rows: dict[str, Any], args: argparse.Namespace) -> str:
    s, t, c = rows["schemas"], rows["tools100"], rows["concurrent"]
    ft, wt = s["per_token_first_pass_us"], s["per_token_warm_grammar_us"]
    fc = s["per_token_first_pass_copied_us"]
    fn = s["per_token_first_pass_nolayers_us"]
    ct = s["per_token_cold_first_pass_us"]
    lines = [
        "# On-disk compile cache: a second process with a warm directory",
        "",
        f"`python -m bench.disk_cache --schemas {args.schemas} --tool-sets {args.tool_sets} --repeats {args.repeats}`"
        " (see `bench/disk_cache.py`; Llama-3.1 vocabulary; each phase a fresh process after one warm-up schema; "
        f"per-item medians over {args.repeats} processes per phase; a 2-core machine shared with other jobs). "
        "Design: [../disk-cache.md](../disk-cache.md).",
        "",
        "## Compile to first mask",
        "",
        "| requests | cold p50 (ms) | cold p99 | warm dir p50 | warm dir p99 | warm / cold per request: p50 | max | "
        "requests at <= 10 % |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {s['n']} JSONSchemaBench sample schemas | {s['cold_p50_ms']:.2f} | {s['cold_p99_ms']:.2f} | "
        f"{s['warm_p50_ms']:.2f} | {s['warm_p99_ms']:.2f} | {s['ratio_p50']:.3f} | {s['ratio_max']:.3f} | "
        f"{sum(r <= 0.10 for r in s['ratio'])} / {s['n']} |",
        f"| {len(t['cold_ms'])} dynamic 100-tool requests | {_pct(t['cold_ms'], 50):.2f} | {_pct(t['cold_ms'], 99):.2f} | "
        f"{_pct(t['warm_ms'], 50):.2f} | {_pct(t['warm_ms'], 99):.2f} | {t['ratio_p50']:.3f} | {t['ratio_max']:.3f} | "
        f"{sum(r <= 0.10 for r in t['ratio'])} / {len(t['ratio'])} |",
        "",
        "Per schema (ms): cold / with an empty directory (writes queued) / warm directory",
        "",
        "| schema | cold | fill | warm | warm / cold |",
        "| --- | --- | --- | --- | --- |",
    ]
    for i, a, b, w in zip(s["ids"], s["cold_ms"], s["fill_ms"], s["warm_ms"]):
        lines.append(f"| {i} | {a:.2f} | {b:.2f} | {w:.2f} | {w / a:.3f} |")
    lines += [
        "",
        "100-tool requests (ms), in order (the tag table of the process fills, so later cold requests reuse "
        "tools lowered for earlier ones):",
        "",
        "| request | cold | fill | warm | warm / cold |",
        "| --- | --- | --- | --- | --- |",
    ]
    for k, (a, b, w) in enumerate(zip(t["cold_ms"], t["fill_ms"], t["warm_ms"])):
        lines.append(f"| {k + 1} | {a:.2f} | {b:.2f} | {w:.2f} | {w / a:.3f} |")
    lines += [
        "",
        "## First decoding pass per token (warm-directory process)",
        "",
        "| pass | tokens | p50 (us) | p90 | p99 (us) |",
        "| --- | --- | --- | --- | --- |",
        f"| first pass, cold process (no directory) | {ct['n']} | {ct['p50']:.1f} | {ct['p90']:.1f} | {ct['p99']:.1f} |",
        f"| first pass over a grammar loaded from the warm directory (with its mask entry packs) | {ft['n']} | "
        f"{ft['p50']:.1f} | {ft['p90']:.1f} | {ft['p99']:.1f} |",
        f"| the same without layer files (`XGRAMMAR2_CACHE_LAYERS=0`: packs only) | {fn['n']} | "
        f"{fn['p50']:.1f} | {fn['p90']:.1f} | {fn['p99']:.1f} |",
        f"| the same with the packs' entries copied (`XGRAMMAR2_CACHE_MMAP=0`) | {fc['n']} | "
        f"{fc['p50']:.1f} | {fc['p90']:.1f} | {fc['p99']:.1f} |",
        f"| the same pass again (warm in-memory grammar) | {wt['n']} | {wt['p50']:.1f} | {wt['p90']:.1f} | "
        f"{wt['p99']:.1f} |",
        "",
        f"Mask entry packs: the warm processes loaded {rows['disk']['warm'] and rows['disk']['warm'].get('pack_entries_loaded')} "
        f"entries from {rows['disk']['warm'] and rows['disk']['warm'].get('pack_loads')} pack(s) "
        "([../disk-cache.md](../disk-cache.md), \"Mask entry packs\"), and "
        f"{rows['disk']['warm'] and rows['disk']['warm'].get('layer_entries_loaded')} slot entries from "
        f"{rows['disk']['warm'] and rows['disk']['warm'].get('layer_loads')} layer file(s) (\"Layer packs\"). "
        "Compile to first mask without layer files (ms, p50 / p99): schemas "
        f"{_pct(s['warm_nolayers_ms'], 50):.2f} / {_pct(s['warm_nolayers_ms'], 99):.2f}, 100-tool requests "
        f"{_pct(t['warm_nolayers_ms'], 50):.2f} / {_pct(t['warm_nolayers_ms'], 99):.2f}.",
        "",
        "## A process's first compile (the warm-up schema, compile to first mask)",
        "",
        "| process | first compile (ms), per process | packs still loading in the background after it (ms) |",
        "| --- | --- | --- |",
        *[f"| {k} | {', '.join('%.1f' % x for x in p['warmup_ms_all'])} | "
          f"{'-' if p.get('pack_wait_ms') is None else '%.1f' % p['pack_wait_ms']} |"
          for k, p in rows["process"].items()],
        "",
        "## Memory of four processes holding the same packs",
        "",
        "Four processes at once load the warm directory's packs and read `/proc/self/smaps_rollup` (and the `.xgm` "
        "mappings of `/proc/self/smaps`) while all four hold them; MiB, median of the four:",
        "",
        "| packs | entries | packs loaded after the compiler was made (ms) | Rss | Pss | Shared_Clean | Private_Dirty | .xgm mapped: Rss | .xgm Pss | "
        ".xgm Shared_Clean | cross-grammar cache bytes (MiB) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *[f"| {mode} | {rs[0]['entries']} | {_pct([r['load_ms'] for r in rs], 50):.1f} | "
          + " | ".join(f"{_pct([r['rollup'].get(k, 0) for r in rs], 50) / 1024:.1f}"
                       for k in ("Rss", "Pss", "Shared_Clean", "Private_Dirty"))
          + " | "
          + " | ".join(f"{_pct([r['xgm'].get(k, 0) for r in rs], 50) / 1024:.1f}"
                       for k in ("Rss", "Pss", "Shared_Clean"))
          + f" | {_pct([r['cache_bytes'] for r in rs], 50) / 2**20:.1f} |"
          for mode, rs in rows["rss"].items()],
        "",
        "## Four processes, one directory",
        "",
        f"Four processes compiled overlapping 20-tool sets (from 40 tools) into one directory at once with a "
        f"{c['budget']} byte budget: {c['files']} files, {c['corrupt']} corrupt, {c['bytes']} bytes "
        f"({'within' if c['within_budget'] else 'OVER'} budget).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--schemas", type=int, default=16)
    ap.add_argument("--tool-sets", type=int, default=6)
    ap.add_argument("--out", default="")
    ap.add_argument("--md", default="", help="also write the rows as a markdown table")
    ap.add_argument("--child", default="")
    ap.add_argument("--phase", default="")
    ap.add_argument("--dir", default="")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--barrier", default="")
    ap.add_argument("--repeats", type=int, default=3, help="cold and warm processes each (per-item medians)")
    args = ap.parse_args()
    if args.child:
        args.phase = args.child
        _child(args)
        return
    rows: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="xgr2-disk-bench-") as tmp:
        d = os.path.join(tmp, "cache")
        colds = [_result(_run("cold", "", args)) for _ in range(args.repeats)]
        fill = _result(_run("fill", d, args))
        warms = [_result(_run("warm", d, args)) for _ in range(args.repeats)]
        copies = [_result(_run("warm", d, args, env_extra={"XGRAMMAR2_CACHE_MMAP": "0"}))
                  for _ in range(args.repeats)]
        nolayers = [_result(_run("warm", d, args, env_extra={"XGRAMMAR2_CACHE_LAYERS": "0"}))
                    for _ in range(args.repeats)]
        cold, warm, copied = _median_run(colds), _median_run(warms), _median_run(copies)
        nolayer = _median_run(nolayers)
        rss = {}
        for mode, flag in (("mapped", "1"), ("copied", "0")):
            bar = os.path.join(tmp, f"barrier-{mode}")
            os.mkdir(bar)
            procs = [_run("rss", d, args, ["--seed", str(i), "--barrier", bar],
                          env_extra={"XGRAMMAR2_CACHE_MMAP": flag}) for i in range(4)]
            rss[mode] = [_result(p) for p in procs]
        rows["rss"] = rss
        cd = os.path.join(tmp, "concurrent")
        budget = 2 << 20
        procs = [_run("concurrent", cd, args, ["--limit", str(budget), "--seed", str(i)]) for i in range(4)]
        conc = [_result(p) for p in procs]
        from xgrammar2.disk_cache import DiskCache  # noqa: F401 - engine on sys.path via _verify_dir
        check = _verify_dir(cd)
        size = sum(os.path.getsize(os.path.join(cd, s, n)) for s in os.listdir(cd)
                   for n in os.listdir(os.path.join(cd, s)))
        rows["concurrent"] = {"processes": 4, "writes": [c["writes"] for c in conc], "budget": budget,
                              "bytes": size, "within_budget": size <= budget, **check}
    ok = [i for i, s in enumerate(cold["schemas"]) if "ms" in s and "ms" in warm["schemas"][i]]
    ratios = [warm["schemas"][i]["ms"] / cold["schemas"][i]["ms"] for i in ok]
    tool_ratios = [w / c for w, c in zip(warm["tools_ms"], cold["tools_ms"])]
    cold_first = [x for i in ok for x in cold["schemas"][i]["first_us"]]
    first = [x for i in ok for x in warm["schemas"][i]["first_us"]]
    first_copied = [x for i in ok for x in copied["schemas"][i]["first_us"]]
    first_nolayers = [x for i in ok for x in nolayer["schemas"][i]["first_us"]]
    again = [x for i in ok for x in warm["schemas"][i]["again_us"]]
    rows["schemas"] = {
        "n": len(ok), "ids": [cold["schemas"][i]["id"] for i in ok],
        "cold_ms": [cold["schemas"][i]["ms"] for i in ok], "fill_ms": [fill["schemas"][i]["ms"] for i in ok],
        "warm_ms": [warm["schemas"][i]["ms"] for i in ok], "ratio": ratios,
        "ratio_p50": _pct(ratios, 50), "ratio_max": max(ratios) if ratios else None,
        "cold_p50_ms": _pct([cold["schemas"][i]["ms"] for i in ok], 50),
        "warm_p50_ms": _pct([warm["schemas"][i]["ms"] for i in ok], 50),
        "cold_p99_ms": _pct([cold["schemas"][i]["ms"] for i in ok], 99),
        "warm_p99_ms": _pct([warm["schemas"][i]["ms"] for i in ok], 99),
        "per_token_cold_first_pass_us": {"p50": _pct(cold_first, 50), "p90": _pct(cold_first, 90),
                                         "p99": _pct(cold_first, 99), "n": len(cold_first)},
        "per_token_first_pass_us": {"p50": _pct(first, 50), "p90": _pct(first, 90), "p99": _pct(first, 99),
                                    "n": len(first)},
        "per_token_first_pass_copied_us": {"p50": _pct(first_copied, 50), "p90": _pct(first_copied, 90),
                                           "p99": _pct(first_copied, 99), "n": len(first_copied)},
        "warm_nolayers_ms": [nolayer["schemas"][i]["ms"] for i in ok],
        "per_token_first_pass_nolayers_us": {"p50": _pct(first_nolayers, 50), "p90": _pct(first_nolayers, 90),
                                             "p99": _pct(first_nolayers, 99), "n": len(first_nolayers)},
        "per_token_warm_grammar_us": {"p50": _pct(again, 50), "p90": _pct(again, 90), "p99": _pct(again, 99),
                                      "n": len(again)},
    }
    rows["tools100"] = {"cold_ms": cold["tools_ms"], "fill_ms": fill["tools_ms"], "warm_ms": warm["tools_ms"],
                        "warm_nolayers_ms": nolayer["tools_ms"],
                        "ratio": tool_ratios, "ratio_p50": _pct(tool_ratios, 50),
                        "ratio_max": max(tool_ratios) if tool_ratios else None}
    rows["process"] = {k: {"setup_ms": r["setup_ms"], "warmup_ms": r["warmup_ms"],
                           "warmup_ms_all": r.get("warmup_ms_all", [r["warmup_ms"]]),
                           "pack_wait_ms": r.get("pack_wait_ms")}
                       for k, r in (("cold", cold), ("fill", fill), ("warm", warm), ("warm_copied", copied))}
    rows["disk"] = {"fill": fill.get("disk"), "warm": warm.get("disk"), "warm_copied": copied.get("disk"),
                    "warm_nolayers": nolayer.get("disk"),
                    "flush_ms": fill.get("flush_ms")}
    text = json.dumps(rows, indent=1)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    if args.md:
        with open(args.md, "w", encoding="utf-8") as f:
            f.write(markdown(rows, args))
    s, t = rows["schemas"], rows["tools100"]
    print(f"schemas n={s['n']}: cold p50 {s['cold_p50_ms']:.2f} ms p99 {s['cold_p99_ms']:.2f}; warm dir p50 "
          f"{s['warm_p50_ms']:.2f} p99 {s['warm_p99_ms']:.2f}; warm/cold p50 {s['ratio_p50']:.3f} max "
          f"{s['ratio_max']:.3f}")
    print(f"per token first pass (warm dir) p50 {s['per_token_first_pass_us']['p50']:.1f} us p99 "
          f"{s['per_token_first_pass_us']['p99']:.1f}; warm grammar p50 {s['per_token_warm_grammar_us']['p50']:.1f} "
          f"p99 {s['per_token_warm_grammar_us']['p99']:.1f}")
    print(f"100 tools: cold {['%.1f' % x for x in t['cold_ms']]} warm {['%.1f' % x for x in t['warm_ms']]} "
          f"ratio p50 {t['ratio_p50']:.3f} max {t['ratio_max']:.3f}")
    print("concurrent:", json.dumps(rows["concurrent"]))
    print("disk:", json.dumps(rows["disk"]), "process:", json.dumps(rows["process"]))
    for mode, rs in rows["rss"].items():
        print(f"rss {mode}:", json.dumps([{k: r["rollup"].get(k) for k in ("Rss", "Pss", "Shared_Clean",
                                                                       "Private_Clean", "Private_Dirty")}
                                          | {"xgm": r["xgm"], "load_ms": r["load_ms"], "entries": r["entries"]}
                                          for r in rs]))


if __name__ == "__main__":
    main()
