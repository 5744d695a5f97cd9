"""What persisting the cross-grammar mask entries (issue 37, part 2) could gain at best.

    python -m bench.mask_entry_bound [--schemas 24] [--tool-sets 4]

One process, Llama-3.1 vocabulary. For every JSONSchemaBench sample schema and every dynamic 100-tool
request (`<function=NAME>` tags over the BFCL pool, traced with a call of one of its tools after free text):

- *no shared entries*: the process-wide cross-grammar cache is emptied, the request compiled into a fresh grammar
  object and its first decoding pass timed per token (what a process with a warm compile directory does today:
  it computes every shared entry, then this grammar's own layers);
- *entries from a pack*: the cache emptied again and filled from a mask entry pack of what the first pass
  computed, copied (`xgr_mask_pack_build` / `xgr_mask_pack_load`; the pack's build and load times are
  reported), then a second fresh grammar object's first pass;
- *entries from a mapped pack*: the same with the pack written to a file, mapped read-only and its entries
  borrowing their arrays from the mapping (`xgr_file_map_open` / `xgr_mask_pack_load_mapped`, as a process with
  a warm directory does; open + map + load timed, without the disk cache's SHA-256), a third fresh grammar;
- *grammar + layers from the directory*: what a process with a warm directory now does: the cache emptied and
  filled from the mapped pack as above, a grammar object made from the first grammar's image
  (`xgr_compiled_image` / `xgr_compiled_from_image`, as a directory hit does) and its own layers loaded from a
  mapped layer file of the first grammar's published slot entries (`xgr_layer_pack_build` / `xgr_file_map_open`
  / `xgr_layer_pack_load_mapped`; open + map + checks + publish timed, without the SHA-256), then its first pass;
- *shared entries present*: a third fresh grammar object of the same request, first pass: the cross-grammar
  cache now holds every shared entry the trace needs, so only the per-grammar layers (sharpening, caller-context
  refinement, uncertain-byte copies) are built. This is the best a disk pack of shared entries can do: it leaves
  out the cost of loading the pack and keeps the CPU caches of the first pass;
- *warm grammar*: the same pass again on the second grammar (nothing left to build).

It also reports the shared entries one request builds (count, bytes): the size of a pack per request.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PHASES = ("no shared entries", "entries from a pack", "entries from a mapped pack",
          "grammar + layers from the directory", "shared entries present", "warm grammar")


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


def measure(n_schemas: int, n_tool_sets: int) -> dict[str, Any]:
    """Per-token first-pass times (us) and first-mask times (us) by phase, per workload."""
    sys.path.insert(0, ROOT)
    import xgrammar2 as xgr
    from xgrammar2 import _core
    from xgrammar2.compiled_grammar import CompiledGrammar
    from bench.tools import load_pool, render_call
    from bench.workloads import DATA_DIR, WARMUP_SPEC, Tokenize, jsonschemabench
    from transformers import PreTrainedTokenizerFast

    tok_json = os.path.join(DATA_DIR, "tokenizers/original/llama-3-instruct/tokenizer.json")
    ti = xgr.TokenizerInfo.from_huggingface(PreTrainedTokenizerFast(tokenizer_file=tok_json),
                                            stop_token_ids=[128009])
    tokenize = Tokenize(tok_json)
    bm = xgr.allocate_token_bitmask(1, ti.vocab_size)

    def fresh() -> Any:  # no compile cache, no directory: every compile is a new grammar object
        return xgr.GrammarCompiler(ti, cache_enabled=False, cache_dir=False)

    rejected: list[int] = []

    def first_pass(cg: Any, traces: list[list[int]], tok_us: list[float], first_us: list[float]) -> None:
        for k, toks in enumerate(traces):
            m = xgr.GrammarMatcher(cg)
            for i, t in enumerate(toks):
                a = time.perf_counter_ns()
                m.fill_next_token_bitmask(bm)
                dt = (time.perf_counter_ns() - a) / 1e3
                tok_us.append(dt)
                if k == 0 and i == 0:
                    first_us.append(dt)
                if not m.accept_token(t):  # an instance the grammar refuses: its trace ends here
                    rejected.append(k)
                    break

    def run(requests: list[tuple[Any, list[list[int]]]]) -> dict[str, Any]:
        tok = {p: [] for p in PHASES}
        first = {p: [] for p in PHASES}
        entries, nbytes, pack_bytes, build_ms, load_ms, map_ms = [], [], [], [], [], []
        layer_bytes, layer_entries, layer_ms = [], [], []
        ffi, lib = _core.ffi, _core.lib
        for compile_fn, traces in requests:
            xgr.clear_cross_grammar_cache()
            cg0 = compile_fn(fresh())
            first_pass(cg0, traces, tok[PHASES[0]], first[PHASES[0]])
            out_l, n_l, cnt_l = ffi.new("uint8_t **"), ffi.new("size_t *"), ffi.new("int32_t *")
            assert lib.xgr_layer_pack_build(cg0._ptr, out_l, n_l, cnt_l) == 0
            layers = ffi.buffer(out_l[0], n_l[0])[:]
            lib.xgr_free(out_l[0])
            layer_bytes.append(len(layers))
            layer_entries.append(cnt_l[0])
            assert lib.xgr_compiled_image(cg0._ptr, out_l, n_l) == 0
            image = ffi.buffer(out_l[0], n_l[0])[:]
            lib.xgr_free(out_l[0])
            st = xgr.get_cross_grammar_cache_stats()
            entries.append(st["entries"])
            nbytes.append(st["bytes"])
            out_p, n_p = ffi.new("uint8_t **"), ffi.new("size_t *")
            seq, cnt, nl = ffi.new("uint64_t *"), ffi.new("int32_t *"), ffi.new("int32_t *")
            t0 = time.perf_counter()
            assert lib.xgr_mask_pack_build(ti._handle(), 0, out_p, n_p, seq, cnt) == 0
            pack = ffi.buffer(out_p[0], n_p[0])[:]
            lib.xgr_free(out_p[0])
            build_ms.append(1e3 * (time.perf_counter() - t0))
            pack_bytes.append(len(pack))
            xgr.clear_cross_grammar_cache()
            t0 = time.perf_counter()
            assert lib.xgr_mask_pack_load(ffi.from_buffer(pack), len(pack), ti._handle(), nl) == 0
            load_ms.append(1e3 * (time.perf_counter() - t0))
            first_pass(compile_fn(fresh()), traces, tok[PHASES[1]], first[PHASES[1]])
            xgr.clear_cross_grammar_cache()
            with open(pack_file, "wb") as f:
                f.write(pack)
            t0 = time.perf_counter()
            fm = ffi.new("xgr_file_map **")
            assert lib.xgr_file_map_open(pack_file.encode(), lib.XGR_FILE_MAP_AUTO, len(pack), fm) == 0
            assert lib.xgr_mask_pack_load_mapped(fm[0], 0, len(pack), ti._handle(), nl) == 0
            lib.xgr_file_map_release(fm[0])
            map_ms.append(1e3 * (time.perf_counter() - t0))
            os.unlink(pack_file)  # the mapping keeps it while its entries live
            first_pass(compile_fn(fresh()), traces, tok[PHASES[2]], first[PHASES[2]])
            # a warm directory: shared entries from the mapped pack, the grammar from its image,
            # its own layers from a mapped layer file
            xgr.clear_cross_grammar_cache()
            fm = ffi.new("xgr_file_map **")
            with open(pack_file, "wb") as f:
                f.write(pack)
            assert lib.xgr_file_map_open(pack_file.encode(), lib.XGR_FILE_MAP_AUTO, len(pack), fm) == 0
            assert lib.xgr_mask_pack_load_mapped(fm[0], 0, len(pack), ti._handle(), nl) == 0
            lib.xgr_file_map_release(fm[0])
            os.unlink(pack_file)
            cp = ffi.new("xgr_compiled **")
            assert lib.xgr_compiled_from_image(ffi.from_buffer(image), len(image), ti._handle(),
                                               fresh()._opts, cp) == 0
            cg1 = CompiledGrammar._create(ffi.gc(cp[0], lib.xgr_compiled_release), ti, None,
                                          linked=cg0._linked)
            with open(layer_file, "wb") as f:
                f.write(layers)
            t0 = time.perf_counter()
            assert lib.xgr_file_map_open(layer_file.encode(), lib.XGR_FILE_MAP_AUTO, len(layers), fm) == 0
            assert lib.xgr_layer_pack_load_mapped(cp[0], fm[0], 0, len(layers), nl) == 0
            assert nl[0] == cnt_l[0], (nl[0], cnt_l[0])
            lib.xgr_file_map_release(fm[0])
            layer_ms.append(1e3 * (time.perf_counter() - t0))
            os.unlink(layer_file)
            first_pass(cg1, traces, tok[PHASES[3]], first[PHASES[3]])
            del cg0, cg1
            cg = compile_fn(fresh())
            first_pass(cg, traces, tok[PHASES[4]], first[PHASES[4]])
            first_pass(cg, traces, tok[PHASES[5]], first[PHASES[5]])
        out = {"tok_us": tok, "first_us": first, "entries": entries, "bytes": nbytes,
               "pack_bytes": pack_bytes, "pack_build_ms": build_ms, "pack_load_ms": load_ms,
               "pack_map_ms": map_ms, "layer_bytes": layer_bytes, "layer_entries": layer_entries,
               "layer_map_ms": layer_ms,
               "rejected_traces": len(rejected) // len(PHASES)}  # each trace runs in every phase
        rejected.clear()
        return out

    import tempfile

    pack_file = os.path.join(tempfile.mkdtemp(prefix="xgr2-pack-bench-"), "bench.xgm")
    layer_file = pack_file[:-4] + ".xgl"
    warm = fresh().compile_json_schema(json.dumps(WARMUP_SPEC["schema"]))
    xgr.GrammarMatcher(warm).fill_next_token_bitmask(bm)
    reqs: list[tuple[Any, list[list[int]]]] = []
    for it in jsonschemabench(n_schemas, 0, 3, False):
        s = json.dumps(it.spec["schema"])
        try:
            fresh().compile_json_schema(s)
        except Exception:  # noqa: BLE001 - a schema xgrammar2 refuses: not a row
            continue
        reqs.append((lambda c, s=s: c.compile_json_schema(s),
                     [tokenize(inst.text) + [128009] for inst in it.instances]))
    out = {"schemas": run(reqs)}
    pool = load_pool()
    rng = random.Random("mask-entry-bound-100")
    reqs = []
    for _ in range(n_tool_sets):
        tools = [pool[i] for i in rng.sample(range(len(pool)), 100)]
        r = _tools_request([t.tool for t in tools])
        called = [t for t in tools if t.calls][:3]
        traces = [tokenize(render_call("function", t.name, t.calls[0], "Let me look that up.")) + [128009]
                  for t in called]
        reqs.append((lambda c, r=r: c.compile_structural_tag(r), traces))
    out["tools100"] = run(reqs)
    return out


def markdown(res: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [
        "| workload | phase | tokens | p50 (us) | p90 | p99 | max | first mask p50 (us) | first mask max |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    names = {"schemas": f"JSONSchemaBench sample ({args.schemas} schemas)",
             "tools100": f"{args.tool_sets} dynamic 100-tool requests"}
    for w, r in res.items():
        for p in PHASES:
            xs, fs = r["tok_us"][p], r["first_us"][p]
            lines.append(f"| {names[w]} | {p} | {len(xs)} | {_pct(xs, 50):.1f} | {_pct(xs, 90):.1f} | "
                         f"{_pct(xs, 99):.1f} | {max(xs):.0f} | {_pct(fs, 50):.1f} | {max(fs):.0f} |")
    lines.append("")
    for w, r in res.items():
        lines.append(f"- {names[w]}: shared entries built per request: median {_pct(r['entries'], 50):.0f} "
                     f"(max {max(r['entries'])}), {_pct(r['bytes'], 50) / 1024:.0f} KiB "
                     f"(max {max(r['bytes']) / 1024:.0f} KiB); traces cut at a refused token: "
                     f"{r['rejected_traces']}; packs: median {_pct(r['pack_bytes'], 50) / 1024:.0f} KiB, built in "
                     f"{_pct(r['pack_build_ms'], 50):.2f} ms, loaded as copies in {_pct(r['pack_load_ms'], 50):.3f} ms "
                     f"(max {max(r['pack_load_ms']):.2f}), mapped (open + map + checks + insert) in "
                     f"{_pct(r['pack_map_ms'], 50):.3f} ms (max {max(r['pack_map_ms']):.2f}); layer files: "
                     f"median {_pct(r['layer_entries'], 50):.0f} slot entries (max {max(r['layer_entries'])}), "
                     f"{_pct(r['layer_bytes'], 50) / 1024:.0f} KiB (max {max(r['layer_bytes']) / 1024:.0f} KiB), "
                     f"mapped (open + map + checks + publish) in {_pct(r['layer_map_ms'], 50):.3f} ms "
                     f"(max {max(r['layer_map_ms']):.2f})")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--schemas", type=int, default=24)
    ap.add_argument("--tool-sets", type=int, default=4)
    ap.add_argument("--out", default="", help="also write the raw times as JSON")
    args = ap.parse_args()
    res = measure(args.schemas, args.tool_sets)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f)
    print(markdown(res, args))


if __name__ == "__main__":
    main()
