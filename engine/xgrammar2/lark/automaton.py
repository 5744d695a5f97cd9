"""Committed-shortest ("lazy") matching for terminal-like Lark rules, as EBNF.

A lazy rule must end at the first position where its body can end. When the body is a
regular language B (strings, character classes, regexes, terminals, groups, repetition),
an occurrence matches exactly the strings of B none of whose proper prefixes is in B. That
language is regular too: build B's DFA, drop the transitions out of accepting states, and
print the automaton as right-linear EBNF rules (one rule per non-accepting state):

    name ::= [a-z] | [0-9] name_s1        # a letter ends the occurrence at once
    name_s1 ::= [a-z] | [0-9] name_s1

The DFA works on code point intervals. Large repetition counts make large automata: past
``MAX_DFA_STATES`` the rule is refused with an error rather than built.
"""

from typing import Callable, Dict, FrozenSet, List, Optional, Tuple

from .regex import class_ebnf, normalize

__all__ = ["lazy_rules", "AutomatonTooLarge", "MAX_DFA_STATES"]

MAX_NFA_STATES = 50_000
MAX_DFA_STATES = 2_000


class AutomatonTooLarge(Exception):
    pass


class _NFA:
    def __init__(self) -> None:
        self.eps: List[List[int]] = []
        self.edges: List[List[Tuple[Tuple[Tuple[int, int], ...], int]]] = []

    def state(self) -> int:
        if len(self.eps) >= MAX_NFA_STATES:
            raise AutomatonTooLarge(f"more than {MAX_NFA_STATES} automaton states")
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def build(self, node, start: int) -> int:
        """Adds ``node`` from ``start``; returns its end state."""
        k = node[0]
        if k == "empty":
            return start
        if k == "lit":
            cur = start
            for ch in node[1]:
                nxt = self.state()
                self.edges[cur].append((((ord(ch), ord(ch)),), nxt))
                cur = nxt
            return cur
        if k == "set":
            nxt = self.state()
            if node[1]:
                self.edges[start].append((node[1], nxt))
            return nxt
        if k == "seq":
            cur = start
            for x in node[1]:
                cur = self.build(x, cur)
            return cur
        if k == "alt":
            end = self.state()
            for x in node[1]:
                s = self.state()
                self.eps[start].append(s)
                self.eps[self.build(x, s)].append(end)
            return end
        if k == "rep":
            item, lo, hi = node[1], node[2], node[3]
            cur = start
            if hi is None:
                # lo - 1 copies, then one copy with a way back (x+ builds x once).
                for _ in range(max(lo - 1, 0)):
                    cur = self.build(item, cur)
                loop = self.state()
                self.eps[cur].append(loop)
                body_end = self.build(item, loop)
                self.eps[body_end].append(loop)
                return loop if lo == 0 else body_end
            for _ in range(lo):
                cur = self.build(item, cur)
            end = self.state()
            for _ in range(hi - lo):
                self.eps[cur].append(end)
                cur = self.build(item, cur)
            self.eps[cur].append(end)
            return end
        raise AssertionError(k)


def _closure(nfa: _NFA, states) -> FrozenSet[int]:
    seen = set(states)
    stack = list(states)
    while stack:
        s = stack.pop()
        for t in nfa.eps[s]:
            if t not in seen:
                seen.add(t)
                stack.append(t)
    return frozenset(seen)


def _moves(nfa: _NFA, states: FrozenSet[int]) -> List[Tuple[Tuple[Tuple[int, int], ...], FrozenSet[int]]]:
    """The transitions out of a DFA state: (code point ranges, target NFA state set), the
    ranges of different entries disjoint."""
    points = set()
    edges = []
    for s in states:
        for ranges, t in nfa.edges[s]:
            for lo, hi in ranges:
                points.add(lo)
                points.add(hi + 1)
                edges.append((lo, hi, t))
    if not edges:
        return []
    bounds = sorted(points)
    by_target: Dict[FrozenSet[int], List[Tuple[int, int]]] = {}
    for a, b in zip(bounds, bounds[1:]):
        hi = b - 1
        targets = frozenset(t for lo, h, t in edges if lo <= a and hi <= h)
        if targets:
            by_target.setdefault(targets, []).append((a, hi))
    return [(normalize(r), t) for t, r in by_target.items()]


def lazy_rules(tree, name: str, fresh: Callable[[str], str]) -> List[Tuple[str, str]]:
    """EBNF rules ``[(rule name, body), ...]`` matching ``tree`` committed-shortest; the
    first is named ``name``, the others come from ``fresh(hint)``."""
    nfa = _NFA()
    start = nfa.state()
    final = nfa.build(tree, start)

    first = _closure(nfa, [start])
    index: Dict[FrozenSet[int], int] = {first: 0}
    order = [first]
    trans: List[List[Tuple[Tuple[Tuple[int, int], ...], int]]] = []
    accepting: List[bool] = []
    i = 0
    while i < len(order):
        cur = order[i]
        i += 1
        acc = final in cur
        accepting.append(acc)
        out: List[Tuple[Tuple[Tuple[int, int], ...], int]] = []
        if not acc:  # committed: nothing continues past the first possible end
            for ranges, targets in _moves(nfa, cur):
                nxt = _closure(nfa, targets)
                j = index.get(nxt)
                if j is None:
                    if len(order) >= MAX_DFA_STATES:
                        raise AutomatonTooLarge(f"more than {MAX_DFA_STATES} automaton states")
                    j = index[nxt] = len(order)
                    order.append(nxt)
                out.append((ranges, j))
        trans.append(out)

    # Keep the states from which an end is reachable.
    n = len(order)
    live = [accepting[s] for s in range(n)]
    changed = True
    while changed:
        changed = False
        for s in range(n):
            if not live[s] and any(live[t] for _, t in trans[s]):
                live[s] = True
                changed = True

    if accepting[0]:
        return [(name, '""')]
    if not live[0]:
        return [(name, "[^\\u0000-\\U0010ffff]")]  # matches nothing

    names: Dict[int, str] = {0: name}
    rules: List[Tuple[str, str]] = []
    pending = [0]
    while pending:
        s = pending.pop(0)
        # Merge the ranges that lead to the same place.
        groups: Dict[Optional[int], List[Tuple[int, int]]] = {}
        for ranges, t in trans[s]:
            if not live[t]:
                continue
            key = None if accepting[t] else t
            groups.setdefault(key, []).extend(ranges)
        alts = []
        for t, ranges in groups.items():
            cls = class_ebnf(normalize(ranges))
            if t is None:
                alts.append(cls)
            else:
                if t not in names:
                    names[t] = fresh(f"{name}_s")
                    pending.append(t)
                alts.append(f"{cls} {names[t]}")
        rules.append((names[s], " | ".join(alts)))
    return rules

