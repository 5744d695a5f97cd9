"""The JSON-schema converter (the *front* stage of bench.json_compile) and the *key* stage, per schema of the
bench.json_compile sample, for before/after comparisons of converter changes.

    python -m bench.json_front_profile times [--n 50]
    python -m bench.json_front_profile cprofile ID[,ID...] [--sort tottime]
    python -m bench.json_front_profile select slow|median [--n 50]        # prints ids, one a line
    python -m bench.json_front_profile run FRONT|KEY|NONE --ids FILE      # the workload for callgrind

``times``: per schema, the key stage (json.dumps of the parsed schema after parsing its text, as bench.json_compile
times it) and the converter with the compile-cache key text (``_key_text``), first conversion in bench order
(module caches as the bench leaves them) and the best of 5 warm repeats (the converter's conversion cache cleared
each time), process CPU time, sorted by the warm converter time. Errors (a refused schema) are timed too.

``run``: one warm-up conversion of every selected schema, then one more pass of FRONT (the converters) or KEY (the
key stage) or NONE (nothing): under ``valgrind --tool=callgrind`` the instruction count of FRONT minus that of
NONE is the converter's, deterministic (docs/benchmarks/json_compile.md, "Converter hot paths"):

    PYTHONPATH=engine valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \\
        python -m bench.json_front_profile run front --ids /tmp/slow.txt
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from bench import workloads as W


def _key(schema: Any) -> tuple[Any, str]:
    from xgrammar2 import grammar as G

    obj = G._schema_to_obj(json.dumps(schema))
    return obj, json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _front(obj: Any, canon: str) -> str:
    import xgrammar2.json_schema as JS
    from xgrammar2 import grammar as G

    JS._cache.clear()  # (the conversion cache: every call converts)
    opts = G._json_schema_options(True, None, None, True, None, False, {})
    try:
        return G._schema_to_ebnf(obj, _warnings_out=[], **opts, _key_text=canon)
    except Exception as e:  # noqa: BLE001 - a refused schema costs its time too
        return f"ERR {type(e).__name__}"


def _times(items: list[W.Item]) -> list[tuple[str, float, float, int, float, float]]:
    from xgrammar2.gc_pause import paused

    rows = []
    clock = time.process_time
    for it in items:
        with paused():
            t0 = clock()
            obj, canon = _key(it.spec["schema"])
            t1 = clock()
            _front(obj, canon)
            t2 = clock()
        rows.append([it.id, (t1 - t0) * 1e3, (t2 - t1) * 1e3, len(canon)])
    for row, it in zip(rows, items):
        obj, canon = _key(it.spec["schema"])
        bk = bf = float("inf")
        for _ in range(5):
            with paused():
                t0 = clock()
                _key(it.spec["schema"])
                t1 = clock()
                _front(obj, canon)
                t2 = clock()
            bk, bf = min(bk, t1 - t0), min(bf, t2 - t1)
        row += [bk * 1e3, bf * 1e3]
    rows.sort(key=lambda r: -r[5])
    return [tuple(r) for r in rows]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["times", "cprofile", "select", "run"])
    ap.add_argument("arg", nargs="?", default="")
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ids", default=None, help="run: a file of schema ids (one a line)")
    ap.add_argument("--sort", default="tottime")
    args = ap.parse_args(argv)
    items = W.jsonschemabench(args.n, args.seed, 0, False)
    import logging
    import warnings

    logging.getLogger("xgrammar2").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    if args.mode == "times":
        print(f"{'schema':45s} {'key':>7s} {'front':>8s} {'bytes':>8s} {'key_w':>7s} {'front_w':>8s}  (ms)")
        for r in _times(items):
            print("%-45s %7.2f %8.2f %8d %7.2f %8.2f" % r)
    elif args.mode == "select":
        by_id = {it.id: it for it in items}
        # (a refused schema is left out: bench.json_compile counts it as an error, not in the stage times)
        ok = [r for r in _times(items) if not _front(*_key(by_id[r[0]].spec["schema"])).startswith("ERR ")]
        if args.arg == "slow":
            sel = ok[:5]
        else:  # the 12 around the median of the warm converter time
            mid = len(ok) // 2
            sel = ok[mid - 6:mid + 6]
        print("\n".join(r[0] for r in sel))
    elif args.mode == "cprofile":
        import cProfile
        import pstats

        want = set(args.arg.split(","))
        pairs = [_key(it.spec["schema"]) for it in items if it.id in want]
        for o, c in pairs:
            _front(o, c)
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(3):
            for o, c in pairs:
                _front(o, c)
        pr.disable()
        pstats.Stats(pr).sort_stats(args.sort).print_stats(45)
    else:
        what = args.arg.lower()
        if what not in ("front", "key", "none"):
            ap.error("run: FRONT, KEY or NONE")
        ids = None if args.ids is None else set(open(args.ids, encoding="utf-8").read().split())
        its = [it for it in items if ids is None or it.id in ids]
        pairs = [_key(it.spec["schema"]) for it in its]
        for o, c in pairs:
            _front(o, c)
        if what == "front":
            for o, c in pairs:
                _front(o, c)
        elif what == "key":
            for it in its:
                _key(it.spec["schema"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
