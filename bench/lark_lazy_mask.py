"""Per-step cost of a Lark lazy rule (``stop=`` / ``suffix=``) on a real vocabulary:
``fill_next_token_bitmask`` + ``accept_token`` per generated token, xgrammar2 against
upstream xgrammar 0.2.8 where it accepts the grammar.

    python -m bench.lark_lazy_mask --hf /work/shared/data/tokenizers/original/llama-3.1

Each row drives a matcher through the tokens of a fixed text (tokenised with the same
tokenizer) and reports the median microseconds per step (fill + accept).
"""

import argparse
import statistics
import time
from typing import Any, Dict, List, Optional

TEXT = "hello there general kenobi you are a bold one"

CASES: Dict[str, str] = {
    "stop": 'start: a "!"\na[stop="END"]: /[a-z ]*/\n',
    "suffix": 'start: a "!"\na[suffix="END"]: /[a-z ]*/\n',
    "stop+max_tokens": 'start: a "!"\na[stop="END", max_tokens=64]: /[a-z ]*/\n',
    "plain (no lazy)": 'start: a "!"\na: /[a-z ]*/\n',
}


def _run(mod: Any, info: Any, lark: str, ids: List[int], repeats: int) -> Optional[float]:
    import torch

    try:
        comp = mod.GrammarCompiler(info, cache_enabled=False)
        cg = comp.compile_grammar(mod.Grammar.from_lark(lark)) if hasattr(mod.Grammar, "from_lark") \
            else comp.compile_lark(lark)
    except Exception as e:  # noqa: BLE001 - a grammar one engine cannot compile
        print(f"  {mod.__name__}: cannot compile: {str(e)[:100]}")
        return None
    bm = mod.allocate_token_bitmask(1, info.vocab_size)
    per: List[float] = []
    for _ in range(repeats):
        m = mod.GrammarMatcher(cg)
        for t in ids:
            s = time.perf_counter()
            m.fill_next_token_bitmask(bm)
            ok = m.accept_token(t)
            per.append((time.perf_counter() - s) * 1e6)
            if not ok:
                print(f"  {mod.__name__}: rejected token {t}")
                break
    return statistics.median(per) if per else None


def _greedy(vocab: List[bytes], text: bytes) -> List[int]:
    """Longest-match tokenisation of `text` (a valid token path, enough for timing)."""
    index = {t: i for i, t in enumerate(vocab) if t}
    out, i = [], 0
    while i < len(text):
        for j in range(min(len(text), i + 16), i, -1):
            if text[i:j] in index:
                out.append(index[text[i:j]])
                i = j
                break
        else:
            raise ValueError(f"no token for {text[i:i + 1]!r}")
    return out


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--canonical", default="/work/shared/data/tokenizers/canonical/llama-3.1.json")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-upstream", action="store_true")
    args = ap.parse_args(argv)
    import xgrammar2

    mods: Dict[str, Any] = {"xgrammar2": xgrammar2}
    if not args.no_upstream:
        try:
            import xgrammar

            mods["xgrammar 0.2.8"] = xgrammar
        except ImportError:
            pass
    ours = xgrammar2.TokenizerInfo.from_canonical_json(args.canonical)
    vocab = [bytes(t) if not isinstance(t, str) else t.encode() for t in ours.decoded_vocab]
    ids = _greedy(vocab, (TEXT + "END!").encode())
    infos = {"xgrammar2": ours}
    if "xgrammar 0.2.8" in mods:
        infos["xgrammar 0.2.8"] = mods["xgrammar 0.2.8"].TokenizerInfo(
            vocab, vocab_type=mods["xgrammar 0.2.8"].VocabType.RAW,
            vocab_size=ours.vocab_size, stop_token_ids=list(ours.stop_token_ids))
    print(f"| case | " + " | ".join(f"{n} µs/step" for n in mods) + " |")
    print("|---|" + "---|" * len(mods))
    for name, lark in CASES.items():
        cells = []
        for mname, mod in mods.items():
            info = infos[mname]
            r = _run(mod, info, lark, ids, args.repeats)
            cells.append("—" if r is None else f"{r:.1f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
