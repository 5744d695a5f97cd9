"""What the upstream-parity features cost: xgrammar2 against upstream xgrammar 0.2.8 on the
same grammars and inputs, one process, engines interleaved per repeat.

Workloads (each a grammar and a text it accepts):

* ``right-recursion``: GBNF-style ``list ::= item "," list | item`` over 2,000 items (Leo items
  in the Earley parser keep it linear);
* ``substring``: ``Substring(...)`` over 2,000 ten-character chunks (20,000 characters),
  matching a run of 200 of them;
* ``max-chars``: a Lark rule ``[max_chars=400]`` over free text, 390 characters then ``>``;
* ``max-tokens``: a Lark rule ``[max_tokens=64]`` over free text (the soft budget), 300 bytes;
* ``temperature``: EBNF ``value[temperature=0.6]`` inside a JSON-like object, reading
  ``matcher.temperature`` after every token;
* ``captures``: a Lark list with ``[capture]`` items, ``get_captures()`` at the end;
* ``draft-tree``: ``traverse_draft_tree`` over a 64-node EAGLE-like tree of a JSON schema.

For each: *compile* (median ms, caches off) and *per token* (median µs of
fill_next_token_bitmask + accept_token over the text, fed as one token per byte of a
byte-level vocabulary plus the 94 printable ASCII characters; for the draft tree, one whole
traversal). Prints a markdown table and the ratio xgrammar2 / upstream (below 1: faster).

    python -m bench.parity_features [--repeats 5] [--out parity.json]
"""

import argparse
import json
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple


def _vocab() -> List[bytes]:
    return [bytes([b]) for b in range(256)] + [b"ab", b"cd", b", ", b'": "', b"item"]


def _workloads() -> List[Tuple[str, str, str, str]]:
    """(name, kind, grammar, text) with kind in ebnf / lark."""
    items = ",".join(f"x{i % 10}" for i in range(2000))
    words = ["".join(chr(ord("a") + (i * 7 + j) % 26) for j in range(9)) + " " for i in range(2000)]
    free = "".join(chr(ord("a") + (i * 5) % 26) for i in range(390))
    return [
        ("right-recursion", "ebnf", 'root ::= list\nlist ::= item "," list | item\nitem ::= "x" [0-9]', items),
        ("substring", "ebnf", "root ::= Substring(" + ", ".join(f'"{w}"' for w in words) + ")",
         "".join(words[500:700])),
        ("max-chars", "lark", 'start: body ">"\nbody[max_chars=400]: TEXT\nTEXT: /[a-z ]*/', free + ">"),
        ("max-tokens", "lark", 'start: body ">"\nbody[max_tokens=64]: TEXT\nTEXT: /[a-z]*/',
         free[:40] + ">"),
        ("temperature", "ebnf",
         'root ::= "{" pair ("," pair)* "}"\npair ::= "\\"k\\":" value\n'
         'value[temperature=0.6] ::= [0-9]+', "{" + ",".join(f'"k":{i}' for i in range(200)) + "}"),
        ("captures", "lark", 'start: (item ",")* item\nitem[capture]: /[0-9]+/',
         ",".join(str(i) for i in range(300))),
    ]


def _median(xs: List[float]) -> Optional[float]:
    return statistics.median(xs) if xs else None


def _run_engine(mod: Any, kind: str, grammar: str, text: str, repeats: int) -> Dict[str, Optional[float]]:
    info = mod.TokenizerInfo(_vocab())
    compile_ms: List[float] = []
    token_us: List[float] = []
    for _ in range(repeats):
        t = time.perf_counter()
        try:
            comp = mod.GrammarCompiler(info, cache_enabled=False)
            compiled = comp.compile_lark(grammar) if kind == "lark" else comp.compile_grammar(grammar)
        except Exception as e:  # noqa: BLE001 - an engine that refuses the grammar
            print(f"  {mod.__name__}: {type(e).__name__}: {str(e)[:120]}", file=sys.stderr)
            return {"compile_ms": None, "token_us": None}
        compile_ms.append((time.perf_counter() - t) * 1e3)
        m = mod.GrammarMatcher(compiled, terminate_without_stop_token=True)
        bm = mod.allocate_token_bitmask(1, info.vocab_size)
        data = text.encode()
        t = time.perf_counter()
        for b in data:
            m.fill_next_token_bitmask(bm)
            if not m.accept_token(b):
                print(f"  {mod.__name__}: rejected byte {bytes([b])!r}", file=sys.stderr)
                return {"compile_ms": _median(compile_ms), "token_us": None}
            if kind == "ebnf" and "temperature" in grammar:
                _ = m.temperature
        if "capture" in grammar:
            m.get_captures()
        token_us.append((time.perf_counter() - t) * 1e6 / len(data))
    return {"compile_ms": _median(compile_ms), "token_us": _median(token_us)}


def _draft_tree(mod: Any, repeats: int) -> Dict[str, Optional[float]]:
    import torch

    info = mod.TokenizerInfo(_vocab())
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
              "required": ["a", "b"]}
    compiled = mod.GrammarCompiler(info, cache_enabled=False).compile_json_schema(json.dumps(schema))
    # 64 nodes: a chain of 8 levels, each with 8 siblings (EAGLE-like top-k per level)
    n, k = 64, 8
    nxt, sib, tok = [-1] * n, [-1] * n, [0] * n
    chars = b'{"a": 12'
    for lvl in range(n // k):
        base = 1 + lvl * k
        for j in range(k):
            i = base + j
            if i >= n:
                break
            tok[i] = chars[lvl % len(chars)] if j == 0 else ord("z") - j
            sib[i] = i + 1 if j + 1 < k and i + 1 < n else -1
        parent = 0 if lvl == 0 else 1 + (lvl - 1) * k
        if base < n:
            nxt[parent] = base
    args = [torch.tensor(x, dtype=torch.int64) for x in (nxt, sib, tok)]
    bm = mod.allocate_token_bitmask(n, info.vocab_size)
    m = mod.GrammarMatcher(compiled)
    if not hasattr(m, "traverse_draft_tree"):
        return {"compile_ms": None, "token_us": None}
    times = []
    for _ in range(repeats * 5):
        t = time.perf_counter()
        m.traverse_draft_tree(args[0], args[1], args[2], bm)
        times.append((time.perf_counter() - t) * 1e6)
    return {"compile_ms": None, "token_us": _median(times)}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    a = ap.parse_args(argv)
    import xgrammar2

    engines: Dict[str, Any] = {"xgrammar2": xgrammar2}
    try:
        import xgrammar

        engines["xgrammar 0.2.8"] = xgrammar
    except ImportError:
        pass
    rows: Dict[str, Dict[str, Dict[str, Optional[float]]]] = {}
    for name, kind, grammar, text in _workloads():
        rows[name] = {e: _run_engine(mod, kind, grammar, text, a.repeats) for e, mod in engines.items()}
    rows["draft-tree (64 nodes, µs per traversal)"] = {e: _draft_tree(mod, a.repeats)
                                                       for e, mod in engines.items()}

    def fmt(x: Optional[float], digits: int = 2) -> str:
        return "—" if x is None else f"{x:.{digits}f}"

    def ratio(a: Optional[float], b: Optional[float]) -> str:
        return "—" if a is None or b is None or b == 0 else f"{a / b:.2f}"

    names = list(engines)
    print("| workload | " + " | ".join(f"{e} compile ms" for e in names) + " | "
          + " | ".join(f"{e} per token µs" for e in names) + " | ratio compile | ratio per token |")
    print("|---" * (2 * len(names) + 3) + "|")
    for w, r in rows.items():
        ours, up = r["xgrammar2"], r.get("xgrammar 0.2.8", {})
        print(f"| {w} | " + " | ".join(fmt(r[e]["compile_ms"]) for e in names) + " | "
              + " | ".join(fmt(r[e]["token_us"]) for e in names) + " | "
              + ratio(ours["compile_ms"], up.get("compile_ms")) + " | "
              + ratio(ours["token_us"], up.get("token_us")) + " |")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
