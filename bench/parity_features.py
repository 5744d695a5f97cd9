"""What the upstream-parity features cost: xgrammar2 against upstream xgrammar 0.2.8 on the
same grammars and inputs, one process, engines interleaved per repeat.

Workloads (each a grammar and a text it accepts):

* ``right-recursion``: GBNF-style ``list ::= item "," list | item`` over 2,000 items (Leo items
  in the Earley parser keep it linear);
* ``substring``: ``Substring(...)`` over 2,000 ten-character chunks (20,000 characters),
  matching a run of 200 of them;
* ``substring-200k``: ``Substring(...)`` over 200,000 one-character chunks (a seeded random
  ``acgt`` text), matching a run of 300 characters (fewer compile repeats: one compile takes
  seconds);
* ``max-chars``: a Lark rule ``[max_chars=400]`` over free text, 390 characters then ``>``;
* ``max-tokens``: a Lark rule ``[max_tokens=64]`` over free text (the soft budget), 300 bytes;
* ``temperature``: EBNF ``value[temperature=0.6]`` inside a JSON-like object, reading
  ``matcher.temperature`` after every token;
* ``captures``: a Lark list with ``[capture]`` items, ``get_captures()`` at the end;
* ``draft-tree``: ``traverse_draft_tree`` over a 64-node EAGLE-like tree of a JSON schema.

For each: *compile* (median ms, caches off), *first token* (ms of the first
fill_next_token_bitmask + accept_token after the compile: xgrammar2 builds masks on first
use, upstream at compile time) and *per token* (median µs of fill_next_token_bitmask +
accept_token over the rest of the text, fed as one token per byte of a byte-level
vocabulary plus a few multi-byte tokens; for the draft tree, one whole traversal, the median
over batches of 200 calls, engines alternating batch by batch).
Prints a markdown table: each engine's compile and per-token figure side by side and the
ratio xgrammar2 / upstream (below 1: xgrammar2 faster).

``--clock cpu`` times with the process's CPU time (all threads) instead of the wall clock:
steadier on a machine loaded by other work (upstream's compile may use several threads,
which CPU time adds up). ``--only NAME[,NAME]`` runs some workloads only.

    python -m bench.parity_features [--repeats 5] [--clock wall|cpu] [--out parity.json]
"""

import argparse
import json
import random
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

# the clock (seconds); --clock cpu switches it to the process's CPU time
_now: Callable[[], float] = time.perf_counter


def _vocab() -> List[bytes]:
    return [bytes([b]) for b in range(256)] + [b"ab", b"cd", b", ", b'": "', b"item"]


def _substring_200k() -> Tuple[str, str]:
    """Substring over 200,000 one-character chunks and a 300-character run of them."""
    rng = random.Random(7)
    text = "".join(rng.choice("acgt") for _ in range(200_000))
    grammar = "root ::= Substring(" + ", ".join(f'"{ch}"' for ch in text) + ")"
    return grammar, text[100_000:100_300]


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
        ("substring-200k", "ebnf", *_substring_200k()),
    ]


def _median(xs: List[float]) -> Optional[float]:
    return statistics.median(xs) if xs else None


def _run_engine(mod: Any, kind: str, grammar: str, text: str, repeats: int) -> Dict[str, Optional[float]]:
    info = mod.TokenizerInfo(_vocab())
    compile_ms: List[float] = []
    first_ms: List[float] = []  # the first token: fill + accept (xgrammar2 builds masks here)
    token_us: List[float] = []  # the tokens after it
    for _ in range(repeats):
        t = _now()
        try:
            comp = mod.GrammarCompiler(info, cache_enabled=False)
            compiled = comp.compile_lark(grammar) if kind == "lark" else comp.compile_grammar(grammar)
        except Exception as e:  # noqa: BLE001 - an engine that refuses the grammar
            print(f"  {mod.__name__}: {type(e).__name__}: {str(e)[:120]}", file=sys.stderr)
            return {"compile_ms": None, "first_ms": None, "token_us": None}
        compile_ms.append((_now() - t) * 1e3)
        m = mod.GrammarMatcher(compiled, terminate_without_stop_token=True)
        bm = mod.allocate_token_bitmask(1, info.vocab_size)
        data = text.encode()
        # (decided once: a substring test per token on a 1 MB grammar would cost 0.3 ms)
        read_temperature = kind == "ebnf" and "temperature" in grammar
        read_captures = "capture" in grammar
        t = _now()
        t_first = None
        for b in data:
            m.fill_next_token_bitmask(bm)
            if not m.accept_token(b):
                print(f"  {mod.__name__}: rejected byte {bytes([b])!r}", file=sys.stderr)
                return {"compile_ms": _median(compile_ms), "first_ms": None, "token_us": None}
            if read_temperature:
                _ = m.temperature
            if t_first is None:
                t_first = _now()
        if read_captures:
            m.get_captures()
        first_ms.append((t_first - t) * 1e3)
        token_us.append((_now() - t_first) * 1e6 / max(1, len(data) - 1))
    return {"compile_ms": _median(compile_ms), "first_ms": _median(first_ms),
            "token_us": _median(token_us)}


def _draft_tree_setup(mod: Any) -> Optional[Callable[[], None]]:
    """A call of ``traverse_draft_tree`` over a 64-node tree, or None without the method."""
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
    a, b, c = (torch.tensor(x, dtype=torch.int64) for x in (nxt, sib, tok))
    bm = mod.allocate_token_bitmask(n, info.vocab_size)
    m = mod.GrammarMatcher(compiled)
    if not hasattr(m, "traverse_draft_tree"):
        return None
    walk = m.traverse_draft_tree

    def call() -> None:
        walk(a, b, c, bm)

    return call


def _draft_trees(engines: Dict[str, Any], repeats: int) -> Dict[str, Dict[str, Optional[float]]]:
    """µs per traversal for each engine: batches of 200 calls, engines alternating."""
    calls = {e: _draft_tree_setup(mod) for e, mod in engines.items()}
    batch = 200
    times: Dict[str, List[float]] = {e: [] for e in engines}
    for _ in range(max(10, repeats * 10)):
        for e, call in calls.items():
            if call is None:
                continue
            t = _now()
            for _ in range(batch):
                call()
            times[e].append((_now() - t) * 1e6 / batch)
    return {e: {"compile_ms": None, "first_ms": None, "token_us": _median(times[e])}
            for e in engines}


def main(argv: Optional[List[str]] = None) -> int:
    global _now
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    a = ap.parse_args(argv)
    if a.clock == "cpu":
        _now = time.process_time
    import torch  # noqa: F401 - imported before any timing (allocate_token_bitmask needs it)
    import xgrammar2

    engines: Dict[str, Any] = {"xgrammar2": xgrammar2}
    try:
        import xgrammar

        engines["xgrammar 0.2.8"] = xgrammar
    except ImportError:
        pass
    only = {w for w in a.only.split(",") if w}
    draft = "draft-tree (64 nodes, µs per traversal)"
    rows: Dict[str, Dict[str, Dict[str, Optional[float]]]] = {}
    for name, kind, grammar, text in _workloads():
        if only and name not in only:
            continue
        reps = min(a.repeats, 2) if name == "substring-200k" else a.repeats
        rows[name] = {e: _run_engine(mod, kind, grammar, text, reps) for e, mod in engines.items()}
    if not only or "draft-tree" in only:
        rows[draft] = _draft_trees(engines, a.repeats)

    def fmt(x: Optional[float], digits: int = 2) -> str:
        return "—" if x is None else f"{x:.{digits}f}"

    def ratio(x: Optional[float], y: Optional[float]) -> str:
        return "—" if x is None or y is None or y == 0 else f"{x / y:.2f}"

    names = list(engines)
    up_name = "xgrammar 0.2.8"
    cols = (("compile_ms", "compile ms", "compile"), ("first_ms", "first token ms", "first token"),
            ("token_us", "per token µs", "per token"))
    print(f"clock: {a.clock}")
    print("| workload | " + " | ".join(" | ".join(f"{e} {label}" for e in names) + f" | ratio {what}"
                                       for _, label, what in cols) + " |")
    print("|---" + "|---:" * (len(cols) * (len(names) + 1)) + "|")
    for w, r in rows.items():
        ours, up = r["xgrammar2"], r.get(up_name, {})
        cells = []
        for key, _, _ in cols:
            cells += [fmt(r[e][key]) for e in names] + [ratio(ours[key], up.get(key))]
        print(f"| {w} | " + " | ".join(cells) + " |")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"clock": a.clock, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
