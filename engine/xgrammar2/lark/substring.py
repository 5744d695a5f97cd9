"""``%regex {"substring_chunks": [...]}``: any contiguous run of the chunks (the empty run
included), as EBNF.

The run language of a sequence is recognised by its suffix automaton (at most 2n - 1 states
and 3n - 4 transitions for n chunks, every state accepting), built here over the chunks as
symbols and printed as right-linear rules::

    sub ::= "" | "ab" sub_1 | "c" sub_2
    sub_1 ::= "" | "c" sub_2

One state per rule keeps the grammar linear in the text and deterministic over the chunks,
so the matcher follows one path per position (an alternation of every start position would
keep n candidates alive at once).
"""

from typing import Callable, Dict, List, Sequence, Tuple

__all__ = ["substring_rules"]


def _suffix_automaton(symbols: Sequence[str]) -> List[Dict[str, int]]:
    nxt: List[Dict[str, int]] = [{}]
    link = [-1]
    length = [0]
    last = 0
    for c in symbols:
        cur = len(nxt)
        nxt.append({})
        link.append(-1)
        length.append(length[last] + 1)
        p = last
        while p != -1 and c not in nxt[p]:
            nxt[p][c] = cur
            p = link[p]
        if p == -1:
            link[cur] = 0
        else:
            q = nxt[p][c]
            if length[p] + 1 == length[q]:
                link[cur] = q
            else:
                clone = len(nxt)
                nxt.append(dict(nxt[q]))
                link.append(link[q])
                length.append(length[p] + 1)
                while p != -1 and nxt[p].get(c) == q:
                    nxt[p][c] = clone
                    p = link[p]
                link[q] = clone
                link[cur] = clone
        last = cur
    return nxt


def substring_rules(chunks: Sequence[str], name: str, fresh: Callable[[str], str],
                    quote: Callable[[str], str]) -> List[Tuple[str, str]]:
    """Rules ``[(name, body), ...]`` matching any contiguous run of ``chunks``; the first
    is ``name``, the others are named by ``fresh(hint)``."""
    nxt = _suffix_automaton(list(chunks))
    names: Dict[int, str] = {0: name}
    rules: List[Tuple[str, str]] = []
    order = [0]
    i = 0
    while i < len(order):
        s = order[i]
        i += 1
        alts = ['""']
        for sym, t in nxt[s].items():
            lit = quote(sym) if sym else '""'
            if not nxt[t]:
                alts.append(lit)  # nothing follows: the run ends here
                continue
            if t not in names:
                names[t] = fresh(name + "_s")
                order.append(t)
            alts.append(f"{lit} {names[t]}")
        rules.append((names[s], " | ".join(alts)))
    return rules
