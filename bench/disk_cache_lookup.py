"""The on-disk compile cache's hit path in one warm process (docs/disk-cache.md, "Reading"):
what a disk hit costs beyond an in-memory hit, per JSONSchemaBench sample schema, with the
scheduler's noise taken out by repetition (``bench/disk_cache.py`` times one first compile per
fresh process, which a loaded 2-core machine cannot resolve below about a millisecond).

    python -m bench.disk_cache_lookup [--schemas 24] [--iters 200] [--engine PATH]

Llama-3.1 vocabulary. The schemas are compiled once into a new directory (flushed); then, per
schema, the median over ``--iters`` of: an in-memory hit (``compile_json_schema`` again: the
request's own Python work, the floor of any hit) and a disk hit (the compiler's in-memory cache
cleared, then ``compile_json_schema``: key, lookup, read and checks, the core's image load),
and a full compile for reference (cross-grammar caches warm: this process has compiled it
before, so it is below a fresh process's cold compile). ``--engine`` imports xgrammar2 from
another tree (A/B runs of two versions). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--schemas", type=int, default=24)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--engine", default=os.path.join(ROOT, "engine"))
    args = ap.parse_args()
    sys.path.insert(0, ROOT)
    sys.path.insert(0, args.engine)
    import xgrammar2 as xgr
    from transformers import PreTrainedTokenizerFast

    from bench.workloads import DATA_DIR, jsonschemabench

    tok_json = os.path.join(DATA_DIR, "tokenizers/original/llama-3-instruct/tokenizer.json")
    ti = xgr.TokenizerInfo.from_huggingface(PreTrainedTokenizerFast(tokenizer_file=tok_json),
                                            stop_token_ids=[128009])
    texts = []
    for it in jsonschemabench(args.schemas, 0, 3, False):
        texts.append((it.id, json.dumps(it.spec["schema"])))

    def med(fn, n):
        xs = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            xs.append(1e6 * (time.perf_counter() - t0))
        xs.sort()
        return xs[len(xs) // 2]

    out = {"engine": xgr.__file__, "rows": []}
    with tempfile.TemporaryDirectory(prefix="xgr2-lookup-") as d:
        comp = xgr.GrammarCompiler(ti, cache_dir=d)
        plain = xgr.GrammarCompiler(ti, cache_dir=False)
        ok = []
        for sid, text in texts:
            try:
                comp.compile_json_schema(text)
                ok.append((sid, text))
            except Exception:  # noqa: BLE001 - a schema xgrammar2 refuses: not a row
                pass
        comp.disk_cache.flush()
        for sid, text in ok:
            mem = med(lambda: comp.compile_json_schema(text), args.iters)

            def disk() -> None:
                comp.clear_cache()
                comp.compile_json_schema(text)

            hit = med(disk, args.iters)

            def full() -> None:
                plain.clear_cache()
                plain.compile_json_schema(text)

            cold = med(full, max(5, args.iters // 20))
            size = os.path.getsize(comp.disk_cache.file_for(comp.disk_cache.key_digest(
                next(k for k in comp._cache._entries if k[1] == json.dumps(
                    json.loads(text), separators=(",", ":"), ensure_ascii=False)))))
            out["rows"].append({"id": sid, "memory_hit_us": round(mem, 1), "disk_hit_us": round(hit, 1),
                                "compile_us": round(cold, 1), "file_bytes": size})
        out["hits"] = comp.disk_cache.hits
    print(json.dumps(out))


if __name__ == "__main__":
    main()
