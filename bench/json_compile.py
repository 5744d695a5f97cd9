"""JSON-schema compile time per stage, and first-visit per-token tails, against llguidance and upstream xgrammar.

    python -m bench.json_compile [--n 80] [--tokenizer qwen3] [--engines xgrammar2,llguidance,xgrammar]
                                 [--out docs/benchmarks/json_compile] [--profile prof.out]

One process, one thread, engines interleaved per schema (the starting engine rotates), so machine load hits all
engines alike: compare the ratios, not the absolute numbers. The sample is bench/workloads.py's JSONSchemaBench
round-robin (seed 0; the first 50 are the docs/benchmarks sample). Per schema:

- every engine: cold compile to a matcher that has given its first mask (caches on, schema not seen before),
  into the engine's one bitmask, allocated before any timer as a server does (not per schema);
- xgrammar2, per stage (the steps ``GrammarCompiler.compile_json_schema`` takes, timed one by one):
  *key* (canonical JSON of the schema, the compile-cache key), *front* (the Python JSON-Schema converter to EBNF
  text), *parse* (EBNF text -> core grammar IR: ``Grammar.from_ebnf``), *compile* (the core's ``xgr_compile``:
  lowering, automata, mask preparation), *first mask* (matcher + first ``fill_next_token_bitmask``);
- every engine: the first decoding pass over each valid test instance (≤ --max-tests), mask fill + accept per
  token, on the freshly compiled grammar (first visits included). The slowest tokens are listed with their schema.

Writes OUT.json (raw per-schema rows + summaries) and OUT.md (tables).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import json
import os
import sys
import time
from typing import Any

from bench import engines as E
from bench import workloads as W
from bench.stats import summarize

STAGES = ["key", "front", "parse", "compile", "first_mask"]

#: The clock every timer reads: wall time (time.perf_counter, default) or the process's CPU time
#: (time.process_time, --clock cpu: all threads of this process; robust to other processes loading
#: the machine, blind to time spent waiting).
_clock = time.perf_counter


def _tokenizer_paths(name: str) -> tuple[str, str]:
    base = os.path.join(W.DATA_DIR, "tokenizers")
    return (os.path.join(base, "original", name, "tokenizer.json"), os.path.join(base, "canonical", f"{name}.json"))


def _xgr2_stages(eng: E.XGrammar2, schema: Any) -> tuple[dict[str, float], Any]:
    """Cold compile of one schema along compile_json_schema's path, one timer per stage (ms)."""
    xgr = eng.xgr
    from xgrammar2 import grammar as G

    comp = eng.compiler
    t: dict[str, float] = {}
    p = _clock
    try:
        from xgrammar2.gc_pause import paused
    except ImportError:  # a build from before gc_pause.py
        paused = contextlib.nullcontext
    with paused():  # as compile_json_schema runs (gc_pause.pausing)
        return _xgr2_stages_in(eng, xgr, G, comp, schema, t, p)


def _xgr2_stages_in(eng, xgr, G, comp, schema, t, p):
    s0 = p()
    obj = G._schema_to_obj(json.dumps(schema))
    opts = G._json_schema_options(True, None, None, True, None, False, {})
    canonical = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    s1 = p()
    plain = _plain_front(eng)
    g = plain(canonical.encode("utf-8", "surrogatepass"), opts) if plain is not None else None
    if g is not None:  # the core's own front end (its EBNF parse included in the stage)
        s2 = s3 = p()
        ebnf = None
        t["plain"] = 1.0
    else:
        ebnf = G._schema_to_ebnf(obj, _warnings_out=[], **opts, **_key_kw(canonical))
        s2 = p()
        g = xgr.Grammar.from_ebnf(ebnf)
        s3 = p()
    cg = comp._compile(g, lambda: g)
    s4 = p()
    m = xgr.GrammarMatcher(cg)
    m.fill_next_token_bitmask(_bitmask(eng)[0], 0)
    s5 = p()
    t.update(key=(s1 - s0) * 1e3, front=(s2 - s1) * 1e3, parse=(s3 - s2) * 1e3, compile=(s4 - s3) * 1e3,
             first_mask=(s5 - s4) * 1e3)
    t["total"] = (s5 - s0) * 1e3
    t["ebnf_bytes"] = float(len((str(g) if ebnf is None else ebnf).encode()))
    return t, cg


def _plain_front(eng: Any) -> Any:
    """compile_json_schema's first try on a miss: the core's front end for plain schemas
    (compiler._plain_schema_grammar), where the engine's tree has it (None: an older tree)."""
    import xgrammar2.compiler as C

    return getattr(C, "_plain_schema_grammar", None)


@functools.lru_cache(maxsize=None)
def _takes_key_text() -> bool:
    """Whether the engine's converter takes ``_key_text`` (asked once: inspect.signature costs
    45-140 µs, which used to land inside the timed *front* stage of every schema)."""
    import inspect

    from xgrammar2.json_schema import json_schema_to_ebnf

    return "_key_text" in inspect.signature(json_schema_to_ebnf).parameters


def _key_kw(canonical: str) -> dict[str, Any]:
    """compile_json_schema hands the converter its compile-cache key text (``_key_text``) where
    the engine takes it."""
    return {"_key_text": canonical} if _takes_key_text() else {}


_BITMASKS: dict[int, tuple[Any, Any]] = {}


def _bitmask(eng: E.Engine) -> tuple[Any, Any]:
    """The engine's one bitmask, allocated on first use and kept: a server allocates its bitmask once
    (vLLM's backend at start-up, for every request slot), not per request, so the first mask of a new
    grammar is a fill into memory that exists. ``main`` allocates it before any timer runs."""
    bm = _BITMASKS.get(id(eng))
    if bm is None:
        bm = _BITMASKS[id(eng)] = eng.allocate_bitmask()
    return bm


def _compile_first_mask(eng: E.Engine, spec: dict[str, Any]) -> tuple[float, Any]:
    p = _clock
    bm = _bitmask(eng)[0]
    s0 = p()
    h = eng.compile(spec)
    m = eng.new_matcher(h)
    eng.fill_mask(m, bm)
    return (p() - s0) * 1e3, h


def _trace(eng: E.Engine, handle: Any, tokens: list[int], first_matcher: Any = None) -> tuple[list[float], bool]:
    """Per-token mask + accept (µs) over one token sequence; False when the engine rejected a token."""
    m = eng.new_matcher(handle) if first_matcher is None else first_matcher
    bm = _bitmask(eng)[0]
    out: list[float] = []
    p = _clock
    for tok in tokens:
        s = p()
        eng.fill_mask(m, bm)
        ok = eng.accept(m, tok)
        out.append((p() - s) * 1e6)
        if not ok:
            return out, False
    return out, True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.json_compile", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=80, help="schemas (round-robin over the 8 subsets; default 80)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer", default="qwen3", help="shared/data/tokenizers name (default qwen3)")
    ap.add_argument("--engines", default="xgrammar2,llguidance,xgrammar")
    ap.add_argument("--max-tests", type=int, default=3, help="valid instances traced per schema (default 3)")
    ap.add_argument("--no-trace", action="store_true", help="compile only")
    ap.add_argument("--out", default=None, help="OUT.json / OUT.md (default: print only)")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="wall: time.perf_counter (default); cpu: time.process_time (a loaded machine)")
    ap.add_argument("--profile", default=None, help="cProfile xgrammar2's stage path into this file")
    ap.add_argument("--ids", default=None,
                    help="comma-separated JSONSchemaBench ids (Github_easy---o9778,...): these schemas instead of "
                         "the round-robin sample (--n, --seed ignored)")
    args = ap.parse_args(argv)
    global _clock
    _clock = time.process_time if args.clock == "cpu" else time.perf_counter
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("RAYON_NUM_THREADS", "1")

    tok_json, canon_path = _tokenizer_paths(args.tokenizer)
    canonical = E.load_canonical(canon_path)
    names = [e for e in args.engines.split(",") if e]
    cls = {"xgrammar2": E.XGrammar2, "xgrammar": E.XGrammar, "llguidance": E.LLGuidance}
    engs: dict[str, E.Engine] = {}
    for n in names:
        e = cls[n]()
        e.load_vocab(tok_json, canonical, 1)
        engs[n] = e
        _bitmask(e)  # (once, before any timer: as a server allocates it)
        if n != "xgrammar2":
            _compile_first_mask(e, W.WARMUP_SPEC)
    if "xgrammar2" in engs:
        _xgr2_stages(engs["xgrammar2"], W.WARMUP_SPEC["schema"])
    hf = E._hf_tokenizer(tok_json)
    eos = int(canonical["eos_ids"][0])
    if args.ids:
        want = [x for x in args.ids.split(",") if x]
        by_id = {it.id: it for it in W.jsonschemabench(10 ** 9, args.seed, args.max_tests, False)}
        missing = [x for x in want if x not in by_id]
        if missing:
            ap.error(f"unknown ids: {', '.join(missing)}")
        items = [by_id[x] for x in want]
        args.n = len(items)
    else:
        items = W.jsonschemabench(args.n, args.seed, args.max_tests, False)
    prof = None
    if args.profile:
        import cProfile

        prof = cProfile.Profile()

    rows: list[dict[str, Any]] = []
    for i, it in enumerate(items):
        order = names[i % len(names):] + names[:i % len(names)]
        row: dict[str, Any] = {"id": it.id, "subset": it.meta.get("subset")}
        toks = [hf.encode(inst.text, add_special_tokens=False) + [eos] for inst in it.instances if inst.valid]
        for n in order:
            eng = engs[n]
            gc.collect()
            r: dict[str, Any] = {}
            try:
                if n == "xgrammar2":
                    if prof is not None:
                        prof.enable()
                    st, h = _xgr2_stages(eng, it.spec["schema"])
                    if prof is not None:
                        prof.disable()
                    r["stages"] = st
                    r["compile_ms"] = st["total"]
                else:
                    r["compile_ms"], h = _compile_first_mask(eng, it.spec)
            except Exception as ex:  # noqa: BLE001 - a refusal or error counts as not compiled
                r["error"] = f"{type(ex).__name__}: {str(ex)[:160]}"
                row[n] = r
                continue
            if not args.no_trace:
                per: list[list[float]] = []
                ok_all = True
                for tk in toks:
                    us, ok = _trace(eng, h, tk)
                    per.append(us)
                    ok_all = ok_all and ok
                r["tokens_us"] = per
                r["accepted_all"] = ok_all
            row[n] = r
        rows.append(row)
        brief = "  ".join(f"{n} {row[n].get('compile_ms', float('nan')):.2f}" for n in names)
        print(f"[{i + 1}/{len(items)}] {it.id}: {brief}", file=sys.stderr, flush=True)
    if prof is not None:
        prof.dump_stats(args.profile)

    res = summarize_rows(rows, names)
    md = render(res, names, args)
    if args.out:  # (written before printing: a closed stdout must not lose them)
        with open(args.out + ".json", "w", encoding="utf-8") as f:
            json.dump({"args": vars(args), "summary": res, "rows": [_slim(r, names) for r in rows]}, f, indent=1)
        with open(args.out + ".md", "w", encoding="utf-8") as f:
            f.write(md)
    print(md)
    return 0


def _slim(row: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """A row for OUT.json: per engine the compile (and stages), the token count and the slowest token of each
    traced instance, not every token's time."""
    out = {k: v for k, v in row.items() if k not in names}
    for n in names:
        r = dict(row.get(n, {}))
        seqs = r.pop("tokens_us", None)
        if seqs is not None:
            r["tokens"] = [len(x) for x in seqs]
            r["slowest_token_us"] = [round(max(x), 1) if x else None for x in seqs]
        out[n] = r
    return out


def summarize_rows(rows: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    both = [r for r in rows if all("compile_ms" in r.get(n, {}) for n in names)]
    for n in names:
        ok = [r[n] for r in rows if "compile_ms" in r.get(n, {})]
        s: dict[str, Any] = {"compiled": len(ok), "of": len(rows),
                             "compile_ms": summarize(x["compile_ms"] for x in ok),
                             "compile_ms_common": summarize(r[n]["compile_ms"] for r in both)}
        toks = [u for x in ok for seq in x.get("tokens_us", []) for u in seq]
        first = [u for x in ok for seq in x.get("tokens_us", [])[:1] for u in seq]
        s["per_token_us"] = summarize(toks)
        s["per_token_first_pass_us"] = summarize(first)
        if n == "xgrammar2":
            s["stages_ms"] = {k: summarize(x["stages"][k] for x in ok) for k in STAGES + ["ebnf_bytes"]}
            slow: list[tuple[float, str, int, int]] = []
            for r in rows:
                for j, seq in enumerate(r.get(n, {}).get("tokens_us", [])):
                    for k, u in enumerate(seq):
                        slow.append((u, r["id"], j, k))
            slow.sort(reverse=True)
            s["slowest_tokens"] = slow[:15]
            s["slowest_compiles"] = sorted(((x["compile_ms"], r["id"], {k: round(x["stages"][k], 2) for k in STAGES})
                                            for r in rows for x in [r.get(n, {})] if "compile_ms" in x),
                                           key=lambda t: -t[0])[:10]
        s["errors"] = [(r["id"], r[n]["error"]) for r in rows if "error" in r.get(n, {})]
        out[n] = s
    out["common"] = len(both)
    return out


def _f(v: float | None) -> str:
    if v is None:
        return "—"
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}" if v >= 0.1 else f"{v:.3f}"


def render(res: dict[str, Any], names: list[str], args: argparse.Namespace) -> str:
    sample = (f"the listed ids ({args.ids})" if getattr(args, "ids", None) else
              f"round-robin over the 8 subsets, seed {args.seed}")
    L = [f"JSONSchemaBench, {args.n} schemas ({sample}), "
         f"{args.tokenizer} vocabulary, one process, one thread, engines interleaved per schema; "
         f"{'process CPU time' if args.clock == 'cpu' else 'wall time'}.", ""]
    L += ["| engine | compiled | compile+first mask p50 | p90 | p99 | max | mean | p50 (common) | p99 (common) | "
          "per-token p50 µs | p99 | max | first pass p99 | first pass max |", "|" + "---|" * 14]
    for n in names:
        s = res[n]
        c, cc, pt, fp = s["compile_ms"] or {}, s["compile_ms_common"] or {}, s["per_token_us"] or {}, \
            s["per_token_first_pass_us"] or {}
        L.append(f"| {n} | {s['compiled']}/{s['of']} | {_f(c.get('p50'))} | {_f(c.get('p90'))} | {_f(c.get('p99'))} "
                 f"| {_f(c.get('max'))} | {_f(c.get('mean'))} | {_f(cc.get('p50'))} | {_f(cc.get('p99'))} | "
                 f"{_f(pt.get('p50'))} | {_f(pt.get('p99'))} | {_f(pt.get('max'))} | {_f(fp.get('p99'))} | "
                 f"{_f(fp.get('max'))} |")
    L.append(f"\n(common: the {res['common']} schemas every engine compiled; ms unless marked.)")
    if "xgrammar2" in res:
        s = res["xgrammar2"]
        L += ["", "xgrammar2 per stage (ms; EBNF in bytes):", "",
              "| stage | p50 | p90 | p99 | max | mean |", "|---|---|---|---|---|---|"]
        for k in STAGES + ["ebnf_bytes"]:
            v = s["stages_ms"][k] or {}
            L.append(f"| {k} | {_f(v.get('p50'))} | {_f(v.get('p90'))} | {_f(v.get('p99'))} | {_f(v.get('max'))} "
                     f"| {_f(v.get('mean'))} |")
        L += ["", "Slowest xgrammar2 compiles: " + "; ".join(f"{i} {_f(ms)} ms {st}"
                                                          for ms, i, st in s["slowest_compiles"][:6])]
        L += ["", "Slowest xgrammar2 tokens (µs, schema, instance, step): " + "; ".join(
            f"{_f(u)} {i} #{j} @{k}" for u, i, j, k in s["slowest_tokens"][:8])]
    for n in names:
        if res[n]["errors"]:
            L.append(f"\n{n} not compiled ({len(res[n]['errors'])}): " + "; ".join(
                f"{i}: {e[:90]}" for i, e in res[n]["errors"][:6]))
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    sys.exit(main())
