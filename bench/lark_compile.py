"""Lark compile time: xgrammar2 against upstream xgrammar 0.2.8, on the Lark corpus of
tests/front/test_lark_front.py.

For each grammar, the median over ``--repeats`` runs of

* *front end*: ``Grammar.from_lark`` (xgrammar2: Lark -> EBNF -> Grammar; upstream: its C++
  converter);
* *compile*: ``GrammarCompiler(info, cache_enabled=False).compile_lark`` (front end plus what
  each engine does ahead of matching: upstream precomputes token masks, xgrammar2 builds them
  on first use);
* *first mask*: compile, then a matcher's first ``fill_next_token_bitmask`` (the fair
  comparison: what a request waits for).

Caches are off: upstream's compile cache, xgrammar2's compile cache and its cross-grammar
mask cache (``cross_grammar_cache=False``), so every repeat is a cold compile.

    python -m bench.lark_compile                       # one-byte-per-token vocabulary
    python -m bench.lark_compile --hf /work/shared/data/tokenizers/original/llama-3-instruct
    python -m bench.lark_compile --repeats 9 --out lark.json

Prints a markdown table (ms) and a summary: the geometric mean of the per-grammar ratios
xgrammar2 / upstream (below 1: xgrammar2 faster). Upstream is optional (its columns are
then empty).
"""

import argparse
import importlib.util
import json
import math
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

REPO = Path(__file__).resolve().parents[1]


def _corpus() -> List[Any]:
    spec = importlib.util.spec_from_file_location("_lark_corpus", REPO / "tests/front/test_lark_front.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return list(mod.CORPUS)


def _median_ms(fn: Callable[[], Any], repeats: int) -> Optional[float]:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        try:
            fn()
        except Exception:  # noqa: BLE001 - a grammar one engine cannot compile
            return None
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def _infos(mods: Dict[str, Any], hf: Optional[str]) -> Dict[str, Any]:
    if hf:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(hf)
        return {name: mod.TokenizerInfo.from_huggingface(tok) for name, mod in mods.items()}
    vocab = [bytes([b]) for b in range(256)] + [b"</s>"]
    return {name: mod.TokenizerInfo(vocab, stop_token_ids=[256]) for name, mod in mods.items()}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--hf", help="a Hugging Face tokenizer directory (default: a byte vocabulary)")
    ap.add_argument("--out", help="also write the rows as JSON")
    args = ap.parse_args(argv)

    import xgrammar2

    mods: Dict[str, Any] = {"xgrammar2": xgrammar2}
    try:
        import xgrammar

        if hasattr(xgrammar.Grammar, "from_lark"):
            mods["upstream"] = xgrammar
    except ImportError:
        pass
    infos = _infos(mods, args.hf)
    warnings.simplefilter("ignore")

    rows = []
    for cid, src, _good, _bad in _corpus():
        row: Dict[str, Any] = {"id": cid}
        for name, mod in mods.items():
            kw = {"cross_grammar_cache": False} if name == "xgrammar2" else {}
            compiler = mod.GrammarCompiler(infos[name], cache_enabled=False, **kw)
            row[f"{name}_front"] = _median_ms(lambda: mod.Grammar.from_lark(src), args.repeats)
            row[f"{name}_compile"] = _median_ms(lambda: compiler.compile_lark(src), args.repeats)

            def first_mask(mod=mod, compiler=compiler, info=infos[name]) -> None:
                m = mod.GrammarMatcher(compiler.compile_lark(src))
                m.fill_next_token_bitmask(mod.allocate_token_bitmask(1, info.vocab_size))

            row[f"{name}_first_mask"] = _median_ms(first_mask, args.repeats)
        rows.append(row)

    def fmt(v: Optional[float]) -> str:
        return "—" if v is None else f"{v:.3f}"

    names = list(mods)
    kinds = ("front", "compile", "first_mask")
    head = ["grammar"] + [f"{n} {k.replace('_', ' ')} ms" for k in kinds for n in names]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        cells = [r["id"]] + [fmt(r.get(f"{n}_{k}")) for k in kinds for n in names]
        print("| " + " | ".join(cells) + " |")
    print()
    for k in kinds:
        for n in names:
            vals = [r[f"{n}_{k}"] for r in rows if r.get(f"{n}_{k}") is not None]
            if vals:
                print(f"{n} {k}: median {statistics.median(vals):.3f} ms over {len(vals)} grammars")
        if "upstream" in mods:
            ratios = [r[f"xgrammar2_{k}"] / r[f"upstream_{k}"] for r in rows
                      if r.get(f"xgrammar2_{k}") and r.get(f"upstream_{k}")]
            if ratios:
                g = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
                print(f"{k}: geometric mean of xgrammar2 / upstream = {g:.2f} ({len(ratios)} grammars)")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
