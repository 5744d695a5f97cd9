"""The subset construction and minimization behind automaton.from_regex (regexes without
lookahead or ``\\b``), over alphabet classes and bit sets.

The code points are first cut into alphabet classes: the elementary intervals of all the
NFA's labels, grouped by the set of labels that contain them (code points of one class
behave alike on every edge; the formats have 2 to 40 classes). A set of NFA states is a
Python ``int`` (one bit per state), so the union of the epsilon closures of the targets of a
subset's moves is a few big-integer ORs, and a row of the DFA is dense: one target per
class. The DFA states are exactly the subsets automaton's former construction made (the
full epsilon closures, the start state apart), so the state limit is met or exceeded by the
same patterns; minimize_classes then gives the canonical minimal DFA of automaton.minimize
(same numbering, same labels) without rebuilding labels from charsets.
"""

from __future__ import annotations

import bisect
from operator import or_

from . import charset as cs



def split_blocks(touched: dict, blocks: list, block: list, work: list, in_work: set) -> None:
    """One Hopcroft refinement step: each block ``yb`` of ``touched`` (block -> its states
    with a move into the splitter) that is not wholly touched splits into the touched part
    (a new block) and the rest; the worklist gets the new block when ``yb`` was waiting,
    else the smaller half."""
    for yb, members in touched.items():
        Y = blocks[yb]
        if len(members) == len(Y):
            continue
        Y -= members
        nb = len(blocks)
        blocks.append(members)
        for s in members:
            block[s] = nb
        if yb in in_work:
            work.append(nb)
            in_work.add(nb)
        else:
            pick = nb if len(members) <= len(Y) else yb
            work.append(pick)
            in_work.add(pick)

def alphabet_classes(labels):
    """(classes, label_classes): ``classes[k]`` the sorted intervals of class k,
    ``label_classes[label]`` the class ids whose union is the label (classes in no label
    are left out)."""
    bounds = set()
    for c in labels:
        for lo, hi in c:
            bounds.add(lo)
            bounds.add(hi + 1)
    pts = sorted(bounds)
    label_list = list(labels)
    member: list = [[] for _ in range(len(pts) - 1)]
    for li, c in enumerate(label_list):
        for lo, hi in c:
            for a in range(bisect.bisect_left(pts, lo), bisect.bisect_left(pts, hi + 1)):
                member[a].append(li)
    cls_of: dict = {}
    classes: list = []
    label_classes: dict = {c: [] for c in label_list}
    for a, m in enumerate(member):
        if not m:
            continue
        key = tuple(m)
        k = cls_of.get(key)
        if k is None:
            k = cls_of[key] = len(classes)
            classes.append([])
            for li in m:
                label_classes[label_list[li]].append(k)
        classes[k].append((pts[a], pts[a + 1] - 1))
    return classes, label_classes


def determinize(nfa, start, final, limit, too_large, closure):
    """(n, accept, rows, classes): the subset DFA of ``nfa`` (automaton._NFA; ``^`` holds
    only before the first character, ``$`` only after the last), ``rows[s][k]`` the target
    of state s on class k or -1. Raises ``too_large`` as from_regex did: when the subsets
    number more than ``limit``. ``closure`` is automaton._closure (for the start state)."""
    N = len(nfa.edges)
    edges, eps = nfa.edges, nfa.eps
    labels = {c for row in edges for c, _ in row}
    classes, label_classes = alphabet_classes(labels)
    K = len(classes)
    # Bits: the states with moves first (so a subset's movers are its low bits).
    movers = [s for s in range(N) if edges[s]]
    bit = [0] * N
    for i, s in enumerate(movers):
        bit[s] = i
    nxt = len(movers)
    for s in range(N):
        if not edges[s]:
            bit[s] = nxt
            nxt += 1
    mover_mask = (1 << len(movers)) - 1
    # States that reach the final one through plain and end-of-input epsilon moves.
    rev: list = [[] for _ in range(N)]
    for s in range(N):
        for kind, t in eps[s]:
            if kind != 1:
                rev[t].append(s)
    acc_mask = 0
    seen = {final}
    stack = [final]
    while stack:
        s = stack.pop()
        acc_mask |= 1 << bit[s]
        for p in rev[s]:
            if p not in seen:
                seen.add(p)
                stack.append(p)
    memo: dict = {}

    def plain_closure(t):
        m = memo.get(t)
        if m is None:
            m = 0
            seen_ = {t}
            st = [t]
            while st:
                s_ = st.pop()
                m |= 1 << bit[s_]
                for kind, u in eps[s_]:
                    if kind == 0 and u not in seen_:
                        seen_.add(u)
                        st.append(u)
            memo[t] = m
        return m

    step = [None] * len(movers)
    for s, i in zip(movers, range(len(movers))):
        row = [0] * K
        for c, t in edges[s]:
            m = plain_closure(t)
            for k in label_classes[c]:
                row[k] |= m
        step[i] = row
    init_set = closure(nfa, [start], True, False)
    init = 0
    for s in init_set:
        init |= 1 << bit[s]
    accept = [final in closure(nfa, init_set, True, True)]
    keys: dict = {}  # (the start state, closed over its ^ moves, is not keyed)
    order = [init]
    rows = []
    empty = [0] * K
    by_movers: dict = {}  # (subsets that differ only in states without moves have one row)
    i = 0
    while i < len(order):
        x = order[i] & mover_mask
        if i:
            accept.append(bool(order[i] & acc_mask))
        i += 1
        row = by_movers.get(x)
        if row is None:
            acc = empty
            while x:
                low = x & -x
                acc = list(map(or_, acc, step[low.bit_length() - 1]))
                x ^= low
            row = [-1] * K
            for k, v in enumerate(acc):
                if v:
                    idx = keys.get(v)
                    if idx is None:
                        idx = len(order)
                        if idx >= limit:
                            raise too_large("pattern automaton exceeds the state limit")
                        keys[v] = idx
                        order.append(v)
                    row[k] = idx
            by_movers[order[i - 1] & mover_mask] = row
        rows.append(row)
    return len(order), accept, rows, classes


def minimize_classes(n, accept, rows, classes, dfa_type):
    """The canonical minimal DFA (as automaton.minimize numbers and labels it) of the DFA
    with states 0..n-1 (start 0, every state reachable from it), ``rows[s][k]`` the target
    on class k (-1: none)."""
    # pred[t][k]: the states whose move on class k goes to t (all states are reachable)
    pred: list = [{} for _ in range(n)]
    for s in range(n):
        k = 0
        for t in rows[s]:
            if t >= 0:
                pt = pred[t]
                lst = pt.get(k)
                if lst is None:
                    pt[k] = [s]
                else:
                    lst.append(s)
            k += 1
    # Live: the states that reach an accepting one. A predecessor of a live state is live,
    # so Hopcroft over the live states never meets a dead one; the dead states (and
    # missing moves) form an implicit block that is never a splitter.
    live = [False] * n
    stack = [s for s in range(n) if accept[s]]
    for s in stack:
        live[s] = True
    while stack:
        for srcs in pred[stack.pop()].values():
            for p in srcs:
                if not live[p]:
                    live[p] = True
                    stack.append(p)
    if not live[0]:
        return dfa_type([], [])
    acc = [s for s in range(n) if live[s] and accept[s]]
    rej = [s for s in range(n) if live[s] and not accept[s]]
    blocks = [set(p) for p in (acc, rej) if p]
    block = [-1] * n
    for bi, p in enumerate(blocks):
        for s in p:
            block[s] = bi
    work = list(range(len(blocks)))
    in_work = set(work)
    while work:
        bi = work.pop()
        in_work.discard(bi)
        by_sym: dict = {}
        for t in blocks[bi]:
            for a, srcs in pred[t].items():
                lst = by_sym.get(a)
                if lst is None:
                    by_sym[a] = list(srcs)
                else:
                    lst.extend(srcs)
        for a in by_sym:
            touched: dict = {}
            for s in by_sym[a]:
                b = block[s]
                m = touched.get(b)
                if m is None:
                    touched[b] = {s}
                else:
                    m.add(s)
            split_blocks(touched, blocks, block, work, in_work)
    # The quotient, BFS-numbered from the start state, rows by first code point.
    order = {block[0]: 0}
    queue = [block[0]]
    trans = []
    accept_out = []
    labels: dict = {}
    i = 0
    while i < len(queue):
        b = queue[i]
        i += 1
        rep = next(iter(blocks[b]))
        accept_out.append(bool(accept[rep]))
        by_block: dict = {}
        for k, t in enumerate(rows[rep]):
            if t >= 0 and live[t]:
                tb = block[t]
                lst = by_block.get(tb)
                if lst is None:
                    by_block[tb] = [k]
                else:
                    lst.append(k)
        merged = []
        for tb, ks in by_block.items():
            key = tuple(ks)
            c = labels.get(key)
            if c is None:
                c = labels[key] = cs.normalize([r for k in ks for r in classes[k]])
            merged.append((c, tb))
        merged.sort(key=lambda x: x[0][0][0])
        row = []
        for c, tb in merged:
            if tb not in order:
                order[tb] = len(queue)
                queue.append(tb)
            row.append((c, order[tb]))
        trans.append(tuple(row))
    return dfa_type(trans, accept_out)
