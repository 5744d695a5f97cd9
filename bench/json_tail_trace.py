"""Per-token first-pass fill+accept times of chosen JSONSchemaBench schemas (xgrammar2 only).

    PYTHONPATH=engine python -m bench.json_tail_trace [--ids Github_ultra---o46322,Snowplow---sp_345_Normalized]
                                                     [--n 50] [--reps 1] [--above 200] [--show 40]

Drives bench.json_compile's own stage and trace functions (cold compile, then the first pass over the first
valid instance), process CPU time. Prints per schema the tokens above --above µs with their position and text,
the count above it and the total; with --reps > 1 each schema is recompiled cold per rep (caches cleared)
and the per-rep counts are listed, for alternating two builds.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

from bench import engines as E
from bench import json_compile as J
from bench import workloads as W


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.json_tail_trace")
    ap.add_argument("--ids", default="Github_ultra---o46322,Snowplow---sp_345_Normalized")
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--tokenizer", default="qwen3")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--above", type=float, default=200.0)
    ap.add_argument("--show", type=int, default=40)
    ap.add_argument("--all-instances", action="store_true", help="trace every valid instance, not just the first")
    args = ap.parse_args(argv)
    J._clock = time.process_time
    tok_json, canon_path = J._tokenizer_paths(args.tokenizer)
    canonical = E.load_canonical(canon_path)
    eng = E.XGrammar2()
    eng.load_vocab(tok_json, canonical, 1)
    J._xgr2_stages(eng, W.WARMUP_SPEC["schema"])
    hf = E._hf_tokenizer(tok_json)
    eos = int(canonical["eos_ids"][0])
    want = [s for s in args.ids.split(",") if s]
    items = {it.id: it for it in W.jsonschemabench(args.n, 0, 3, False) if it.id in want}
    for sid in want:
        it = items.get(sid)
        if it is None:
            print(f"{sid}: not in the first {args.n}", file=sys.stderr)
            continue
        insts = [inst for inst in it.instances if inst.valid]
        if not args.all_instances:
            insts = insts[:1]
        for rep in range(args.reps):
            if rep:
                eng.reset_caches()
            gc.collect()
            st, h = J._xgr2_stages(eng, it.spec["schema"])
            tot_n = tot_above = 0
            tot_us = 0.0
            slow: list[tuple[float, int, int, str]] = []
            for k, inst in enumerate(insts):
                toks = hf.encode(inst.text, add_special_tokens=False) + [eos]
                us, ok = J._trace(eng, h, toks)
                tot_n += len(us)
                tot_us += sum(us)
                for i, u in enumerate(us):
                    if u > args.above:
                        tot_above += 1
                        slow.append((u, k, i, hf.decode([toks[i]]) if i < len(toks) else "?"))
                if not ok:
                    print(f"  {sid}: instance {k} rejected at token {len(us) - 1}", file=sys.stderr)
            print(f"{sid} rep {rep}: compile {st['total']:.1f} ms, {tot_n} tokens, {tot_above} > {args.above:g} µs, "
                  f"total {tot_us / 1e3:.1f} ms", flush=True)
            if rep == 0:
                for u, k, i, txt in sorted(slow, reverse=True)[:args.show]:
                    print(f"   {u:9.1f} µs  inst {k} @{i} {txt!r}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main())
