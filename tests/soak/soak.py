"""Memory soak: compiles N distinct tool sets and N distinct JSON schemas, creating and
dropping matchers that fill a few masks each, under small cache budgets; samples process
RSS and the caches' bytes.

    python tests/soak/soak.py --n 10000 [--out soak.json]

Tool sets are random subsets (1-8 tools) of the BFCL function pool with perturbed tool and
parameter names (so no two sets, and almost no two tools, are alike), turned into a model's
tool-calling structural tag (``get_model_structural_tag``, a few model families in turn)
and compiled; schemas are BFCL parameter schemas with perturbed property names. Every
iteration creates two matchers, fills 3 masks on each (accepting an allowed token in
between) and drops them.

Checked (and returned): the cross-grammar cache never holds more bytes than its budget,
the compiler cache stays within its limit, and RSS stops growing: growth over the second
half of the run below ``--max-growth-mb``. Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = Path(os.environ.get("XGR2_SHARED_DATA", HERE.parents[2] / "shared" / "data"))


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def load_tools() -> list:
    out, seen = [], set()
    for fn in ("BFCL_v4_simple_python.json", "BFCL_v4_multiple.json", "BFCL_v4_parallel.json",
               "BFCL_v4_parallel_multiple.json", "BFCL_v4_simple_javascript.json"):
        path = DATA / "bfcl" / fn
        if not path.exists():
            continue
        for line in open(path):
            for f in json.loads(line)["function"]:
                if f["name"] in seen:
                    continue
                seen.add(f["name"])
                p = json.loads(json.dumps(f.get("parameters") or {"type": "object"}))
                out.append({"name": f["name"], "parameters": p})
    return out


def fix_types(s):
    """BFCL writes "dict" / "float" / "tuple" / "any" for JSON-schema types."""
    if isinstance(s, dict):
        s = {k: fix_types(v) for k, v in s.items()}
        t = s.get("type")
        m = {"dict": "object", "float": "number", "tuple": "array", "any": None, "list": "array",
             "bool": "boolean", "int": "integer", "str": "string", "string": "string",
             "boolean": "boolean", "integer": "integer", "number": "number", "array": "array",
             "object": "object", "hashmap": "object", "long": "integer", "double": "number", "": None}
        if isinstance(t, str) and t.lower() in m:
            t = t.lower()
            if m[t] is None:
                s.pop("type")
            else:
                s["type"] = m[t]
        return s
    if isinstance(s, list):
        return [fix_types(x) for x in s]
    return s


def perturb(params: dict, tag: str) -> dict:
    """Renames every property (and its `required` entry) with a unique suffix."""
    params = fix_types(params)
    props = params.get("properties")
    if isinstance(props, dict):
        ren = {k: f"{k}_{tag}" for k in props}
        params["properties"] = {ren[k]: v for k, v in props.items()}
        if isinstance(params.get("required"), list):
            params["required"] = [ren.get(r, r) for r in params["required"]]
    return params


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10000, help="tool sets (and as many schemas)")
    ap.add_argument("--cross-budget-mb", type=float, default=16.0)
    ap.add_argument("--compiler-cache-mb", type=float, default=32.0)
    ap.add_argument("--tokenizer", default="smollm2-135m-instruct")
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--max-growth-mb", type=float, default=40.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)

    import xgrammar2 as xgr
    from xgrammar2.structural_tag import get_model_structural_tag

    rng = random.Random(a.seed)
    tok = xgr.TokenizerInfo.from_canonical_json(str(DATA / "tokenizers" / "canonical" / f"{a.tokenizer}.json"))
    budget = int(a.cross_budget_mb * 2**20)
    xgr.clear_cross_grammar_cache()
    xgr.set_cross_grammar_cache_budget(budget)
    comp_limit = int(a.compiler_cache_mb * 2**20)
    comp = xgr.GrammarCompiler(tok, cache_limit_bytes=comp_limit)
    pool = load_tools()
    models = ["qwen_3", "llama", "deepseek_v3_1", "kimi", "glm_4_7", "mistral"]
    n = tok.vocab_size
    bm = xgr.allocate_token_bitmask(1, n)
    samples, errors, max_cross, max_comp = [], [], 0, 0
    every = max(1, a.n // a.samples)
    t0 = time.time()

    def drive(compiled) -> None:
        m = xgr.GrammarMatcher(compiled)
        for _ in range(3):
            if m.is_terminated():  # (after a stop token there is no mask: an error)
                break
            m.fill_next_token_bitmask(bm)
            bits = np.unpackbits(np.asarray(bm).reshape(-1).view(np.uint8), bitorder="little")[:n]
            ids = np.flatnonzero(bits)
            if len(ids) == 0:
                break
            m.accept_token(int(ids[rng.randrange(len(ids))]))
        del m

    for i in range(a.n):
        k = rng.randint(1, 8)
        tools = []
        for j, f in enumerate(rng.sample(pool, k)):
            tag = f"{i}_{j}"
            tools.append({"type": "function", "function": {
                "name": f"{f['name'].replace('.', '_')}_{tag}", "parameters": perturb(f["parameters"], tag)}})
        try:
            st = get_model_structural_tag(models[i % len(models)], tools, as_dict=True)
            drive(comp.compile_structural_tag(st))
        except (ValueError, NotImplementedError) as e:
            errors.append(f"tools {i}: {type(e).__name__}: {str(e)[:120]}")
        f = rng.choice(pool)
        schema = perturb(f["parameters"], f"s{i}")
        try:
            drive(comp.compile_json_schema(schema, strict_mode=False))
        except (ValueError, NotImplementedError) as e:
            errors.append(f"schema {i}: {type(e).__name__}: {str(e)[:120]}")
        cs = xgr.get_cross_grammar_cache_stats()
        max_cross = max(max_cross, cs["bytes"])
        if (i + 1) % every == 0 or i == 0:
            gc.collect()
            cb = comp.get_cache_size_bytes()
            max_comp = max(max_comp, cb)
            ac = xgr.get_automaton_cache_stats() if hasattr(xgr, "get_automaton_cache_stats") else {}
            s = {"iteration": i + 1, "seconds": round(time.time() - t0, 1), "rss_mb": round(rss_mb(), 1),
                 "cross_cache_bytes": cs["bytes"], "cross_cache_budget": cs["budget"],
                 "cross_cache_entries": cs["entries"], "cross_cache_evictions": cs["evictions"],
                 "compiler_cache_bytes": cb, "automaton_cache_bytes": ac.get("bytes")}
            samples.append(s)
            print(json.dumps(s), flush=True)
    half = [s for s in samples if s["iteration"] >= a.n // 2]
    growth = half[-1]["rss_mb"] - half[0]["rss_mb"] if half else 0.0
    result = {
        "n_tool_sets": a.n, "n_schemas": a.n, "tokenizer": a.tokenizer, "vocab_size": n,
        "cross_cache_budget": budget, "max_cross_cache_bytes": max_cross,
        "compiler_cache_limit": comp_limit, "max_compiler_cache_bytes": max_comp,
        "rss_start_mb": samples[0]["rss_mb"], "rss_end_mb": samples[-1]["rss_mb"],
        "rss_second_half_growth_mb": round(growth, 1), "seconds": round(time.time() - t0, 1),
        "n_errors": len(errors), "errors_sample": errors[:5], "samples": samples,
    }
    result["ok"] = bool(max_cross <= budget and max_comp <= comp_limit * 1.05 and growth <= a.max_growth_mb)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}), flush=True)
    return result


if __name__ == "__main__":
    sys.exit(0 if main()["ok"] else 1)
