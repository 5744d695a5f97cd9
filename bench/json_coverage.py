"""Which JSONSchemaBench schemas each engine compiles (support, not speed), per subset.

    python -m bench.json_coverage [--engines xgrammar2,xgrammar,llguidance] [--subsets A,B]
                                  [--out docs/benchmarks/json_coverage] [--timeout 120]

Compile only (no decoding), every schema of every shared subset, with a tiny vocabulary (schema support does not
depend on it): xgrammar family ``GrammarCompiler.compile_json_schema(strict_mode=True)`` (bench.json_compile's call),
llguidance ``grammar_from_json_schema`` + ``LLMatcher`` on a byte vocabulary (an error state is a failure). Each
engine runs in a child process that appends one JSON line per schema to OUT.<engine>.jsonl (resumable); a schema
that crashes the child or runs past --timeout seconds counts as not compiled. Writes OUT.md: per-subset counts and
xgrammar2's failures grouped by message.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import re
import subprocess
import sys
import time

from bench import workloads as W


def _rows(subsets):
    for sub in subsets:
        with gzip.open(os.path.join(W.DATA_DIR, "jsonschemabench", f"{sub}.jsonl.gz"), "rt", encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    yield sub, r["id"], r["schema"]


def _compiler(engine):
    if engine in ("xgrammar2", "xgrammar"):
        if engine == "xgrammar2":
            root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "engine")
            if os.path.isdir(os.path.join(root, "xgrammar2")) and root not in sys.path:
                sys.path.insert(0, root)
            import warnings

            warnings.simplefilter("ignore")  # format-as-annotation notices
        import importlib

        x = importlib.import_module(engine)
        comp = x.GrammarCompiler(x.TokenizerInfo(["a", "b"]), cache_enabled=False)
        return lambda s: comp.compile_json_schema(json.dumps(s), strict_mode=True)
    if engine == "llguidance":
        import llguidance as L

        class _Bytes:
            tokens = [bytes([i]) for i in range(256)] + [b"<eos>"]
            eos_token_id = 256
            bos_token_id = None
            special_token_ids = [256]

            def __call__(self, s):
                return list(s.encode()) if isinstance(s, str) else list(s)

        tok = L.LLTokenizer(L.TokenizerWrapper(_Bytes()))

        def c(s):
            m = L.LLMatcher(tok, L.LLMatcher.grammar_from_json_schema(s), log_level=0)
            if m.is_error():
                raise RuntimeError(m.get_error())
        return c
    raise SystemExit(f"unknown engine {engine}")


def _worker(engine, out, subsets):
    done = set()
    if os.path.exists(out):
        with open(out) as f:
            done = {d["id"] for d in map(json.loads, f) if d["st"] != "start"}
    compile_ = _compiler(engine)
    with open(out, "a") as f:
        for sub, id_, s in _rows(subsets):
            if id_ in done:
                continue
            f.write(json.dumps({"id": id_, "sub": sub, "st": "start"}) + "\n")
            f.flush()
            t0 = time.process_time()
            try:
                compile_(s)
                st, msg = "ok", ""
            except Exception as e:  # noqa: BLE001 - any error is "not compiled"
                st, msg = "fail", f"{type(e).__name__}: {str(e)[:400]}"
            f.write(json.dumps({"id": id_, "sub": sub, "st": st, "msg": msg, "t": time.process_time() - t0}) + "\n")
            f.flush()


def _run_engine(engine, out, subsets, timeout):
    while True:
        p = subprocess.Popen([sys.executable, "-m", "bench.json_coverage", "--worker", engine, "--worker-out", out,
                              "--subsets", ",".join(subsets)], stderr=subprocess.DEVNULL)  # (engines log warnings)
        last = (-1, time.time())
        while p.poll() is None:
            time.sleep(1)
            sz = os.path.getsize(out) if os.path.exists(out) else 0
            if sz != last[0]:
                last = (sz, time.time())
            elif time.time() - last[1] > timeout:
                p.kill()
                p.wait()
        if p.returncode == 0:
            return
        with open(out) as f:
            lines = [json.loads(x) for x in f]
        if not lines or lines[-1]["st"] != "start":
            raise SystemExit(f"{engine}: worker failed with rc {p.returncode}")
        with open(out, "a") as f:
            f.write(json.dumps({"id": lines[-1]["id"], "sub": lines[-1]["sub"], "st": "fail",
                                "msg": f"crash or timeout (rc {p.returncode})"}) + "\n")


def _load(out):
    d = {}
    with open(out) as f:
        for x in map(json.loads, f):
            if x["st"] != "start":
                d[x["id"]] = x
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engines", default="xgrammar2,xgrammar,llguidance")
    ap.add_argument("--subsets", default=",".join(W.JSB_SUBSETS))
    ap.add_argument("--out", default="docs/benchmarks/json_coverage")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--worker")
    ap.add_argument("--worker-out")
    a = ap.parse_args()
    subsets = a.subsets.split(",")
    if a.worker:
        _worker(a.worker, a.worker_out, subsets)
        return
    engines = a.engines.split(",")
    res = {}
    for e in engines:
        out = f"{a.out}.{e}.jsonl"
        _run_engine(e, out, subsets, a.timeout)
        res[e] = _load(out)
    lines = ["| subset | schemas | " + " | ".join(engines) + " |", "|---|---|" + "---|" * len(engines)]
    tot = collections.Counter()
    for sub in subsets + ["all"]:
        ids = [i for i, x in res[engines[0]].items() if sub in ("all", x["sub"])]
        cells = []
        for e in engines:
            n = sum(1 for i in ids if res[e].get(i, {}).get("st") == "ok")
            cells.append(str(n))
        lines.append(f"| {sub} | {len(ids)} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    if "xgrammar2" in res:
        groups = collections.defaultdict(list)
        for x in res["xgrammar2"].values():
            if x["st"] != "ok":
                key = re.sub(r"#\S*", "#…", x["msg"])[:140]
                groups[key].append(x["id"])
        text += "\nxgrammar2 not compiled, by message:\n\n"
        for key, ids in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            text += f"- {len(ids)}: {key} ({', '.join(ids[:6])}{', …' if len(ids) > 6 else ''})\n"
    with open(a.out + ".md", "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
