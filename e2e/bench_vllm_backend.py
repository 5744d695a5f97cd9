"""In-process timing of the two vLLM backends (xgrammar2 plugin vs vLLM's xgrammar) on the
same vLLM config and tokenizer, without a server: backend construction, grammar compilation,
one bitmask row, and a whole manager step (grammar_bitmask) for batches of 1 and 8.

    ~/.cache/xgrammar2/vllm-venv/bin/python e2e/bench_vllm_backend.py [--model tiny|smollm2]

Medians over repetitions; run on an idle machine for stable numbers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "plugins" / "vllm"), str(HERE.parent / "tests" / "vllm")]

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 10},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "color": {"enum": ["red", "green", "blue"]},
        "ok": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name", "age", "color", "ok"],
}


def median_ms(fn, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["tiny", "smollm2"], default="tiny")
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args(argv)

    import models
    import xgrammar2_vllm
    from vllm.config import ModelConfig
    from vllm.v1.request import Request
    from vllm.v1.structured_output.backend_types import StructuredOutputOptions as O
    from vllm.v1.structured_output.backend_xgrammar import XgrammarBackend
    from vllm.v1.structured_output.utils import choice_as_grammar
    from vllm_harness import Harness, make_manager, make_vllm_config

    xgrammar2_vllm.register()
    model_dir = str(models.build_tiny() if args.model == "tiny" else models.build_smollm2())
    mc = ModelConfig(model=model_dir, tokenizer=model_dir, dtype="bfloat16", max_model_len=512)
    specs = {
        "json_schema": (O.JSON, json.dumps(PERSON), '{"name": "Ada", "age": 36, "color": "red", "ok": true, "tags": ["x", "y"]}'),
        "json_object": (O.JSON_OBJECT, "", '{"k": [1, 2.5, {"z": null}], "t": true, "s": "hello world"}'),
        "regex": (O.REGEX, r"[0-9]{3}-[a-z]{2}( [A-Z][a-z]+){1,5}", "332-wp Alpha Beta Gamma"),
        "ebnf": (O.GRAMMAR, 'root ::= "SELECT " col (", " col)* " FROM " tbl\ncol ::= [a-z]+\ntbl ::= [a-z]+ [0-9]?',
                 "SELECT abc, de FROM table1"),
        "choice": (O.GRAMMAR, choice_as_grammar(["alpha", "beta", "gamma", "delta"]), "gamma"),
    }
    results = {}
    for name in ("xgrammar2", "xgrammar"):
        cfg = make_vllm_config(mc, backend=name)
        mgr = make_manager(cfg)
        tok = mgr.tokenizer
        t0 = time.perf_counter()
        if name == "xgrammar2":
            backend = xgrammar2_vllm.patches.make_backend(cfg, tok)
        else:
            backend = XgrammarBackend(cfg, tokenizer=tok, vocab_size=mc.get_vocab_size())
        r = {"backend_init_ms": (time.perf_counter() - t0) * 1e3}
        bm = backend.allocate_token_bitmask(8)
        for kind, (typ, spec, text) in specs.items():
            t0 = time.perf_counter()
            g = backend.compile_grammar(typ, spec, stop_token_ids={tok.eos_token_id})
            r[f"{kind}/compile_ms"] = (time.perf_counter() - t0) * 1e3
            ids = tok.encode(text, add_special_tokens=False)
            fills = []
            for t in ids:  # one row per step along a valid output (first use builds masks)
                t1 = time.perf_counter()
                g.fill_bitmask(bm, 0)
                fills.append(time.perf_counter() - t1)
                assert g.accept_tokens("r", [t])
            r[f"{kind}/first_pass_fill_us"] = statistics.mean(fills) * 1e6
            g.rollback(0)
            g2 = backend.compile_grammar(typ, spec, stop_token_ids={tok.eos_token_id})
            fills = []
            for t in ids:  # same path again: cached masks
                t1 = time.perf_counter()
                for _ in range(20):
                    g2.fill_bitmask(bm, 0)
                fills.append((time.perf_counter() - t1) / 20)
                g2.accept_tokens("r", [t])
            r[f"{kind}/fill_us"] = statistics.median(fills) * 1e6
        # a whole manager step for a batch of 1 and 8 mixed requests
        mgr.backend = backend
        h = Harness(mgr, mc)
        reqs = []
        for i in range(8):
            typ, spec, text = list(specs.values())[i % len(specs)]
            so = {O.JSON: "json", O.JSON_OBJECT: "json_object", O.REGEX: "regex", O.GRAMMAR: "grammar"}[typ]
            val = True if typ == O.JSON_OBJECT else (json.loads(spec) if typ == O.JSON else spec)
            sp = h.params(**{so: val})
            sp.structured_outputs._backend = name
            req = Request(f"b{i}", [5, 6], sp, None)
            mgr.grammar_init(req)
            h.wait(req)
            mgr.accept_tokens(req, tok.encode(text, add_special_tokens=False)[:2])
            reqs.append(req)
        r["step_b1_us"] = median_ms(lambda: h.bitmask(reqs[0]), args.reps) * 1e3
        r["step_b8_us"] = median_ms(lambda: h.bitmask(*reqs), args.reps) * 1e3
        results[name] = {k: round(v, 2) for k, v in r.items()}
        mgr.clear_backend()
    keys = list(results["xgrammar2"].keys())
    print(f"| metric ({args.model}) | xgrammar2 | xgrammar (vLLM built-in) |")
    print("|---|---|---|")
    for k in keys:
        print(f"| {k} | {results['xgrammar2'][k]} | {results['xgrammar'].get(k)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
