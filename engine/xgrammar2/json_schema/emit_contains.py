"""Arrays with several ``contains`` constraints (each with its minContains/maxContains) → grammar
rules. They mostly come from negated array schemas (the exclusive branches of a oneOf: "some
item is not an X" for each other branch), but also from allOf of several contains.

Each position's schema (a prefixItems entry, or the items schema after them) is split into item
classes, one per subset S of the k contains schemas: the items in the position's schema, in
every contains schema of S and in none outside S (position ∩ ⋂_{j∈S} c_j ∩ ⋂_{j∉S} ¬c_j, through
the converter's intersection and negation, ir.py; the classes partition the position's schema,
empty ones are dropped). The automaton's state is the position (capped at max(prefix, minItems)
when maxItems is unbounded) and one counter per contains (capped at maxContains + 1, or at
minContains when there is no maxContains); an item of class S increments the counters in S, and
is refused where a counter would pass its maxContains. The array may end when every counter has
reached its minContains and the position has reached minItems. Exact; past MAX_CONTAINS
constraints or STATE_LIMIT states the construct is refused.
"""

from __future__ import annotations

from . import ir
from .grammar import EPS, alt, ref, seq

#: Contains constraints one array may carry (2^MAX_CONTAINS item classes per position).
MAX_CONTAINS = 5


def _item_classes(em, s, cs_, negs):
    """[(mask, union)] partitioning ``s`` by membership in each contains schema (ir unions).
    ``negs[j]``: the negation of contains schema j, or None (then subtracted relative to each
    class). Raises ir.NotExpressible."""
    cx = em.cx
    classes = [(0, s)]
    for j, cu in enumerate(cs_):
        nxt = []
        for mask, u in classes:
            inside = ir.intersect(cx, u, cu)
            outside = ir.intersect(cx, u, negs[j]) if negs[j] is not None else ir.subtract(cx, u, cu)
            if inside and not ir.definitely_empty(cx, inside):
                nxt.append((mask | (1 << j), inside))
            if outside and not ir.definitely_empty(cx, outside):
                nxt.append((mask, outside))
        classes = nxt
    return classes


class _Empty(Exception):
    pass


def _simplify(cx, contains, scheds, minn, maxn):
    """The same constraints with fewer counters: equal contains schemas (the same nodes) merged
    (the larger minimum, the smaller maximum); a schema that no item can match (disjoint from
    every position's schema) dropped when its minimum is 0, else the array is impossible
    (raises _Empty); a schema that every item matches bounds the item count instead; a schema
    that no item may match (maxContains 0) is subtracted from every position's schema. Returns
    (contains, scheds, minn, maxn)."""
    merged = {}
    for cu, cmin, cmax, csrc in contains:
        key = tuple(id(x) for x in cu)
        if key in merged:
            _, m0, x0, s0 = merged[key]
            cmin = max(cmin, m0)
            cmax = x0 if cmax is None else (cmax if x0 is None else min(cmax, x0))
            csrc = s0
        merged[key] = (cu, cmin, cmax, csrc)
    out = []
    for cu, cmin, cmax, csrc in merged.values():
        if cmax is not None and cmin > cmax:
            raise _Empty()
        try:
            none_in = all(ir.definitely_empty(cx, ir.intersect(cx, s, cu)) for s in scheds)
        except ir.NotExpressible:
            none_in = False
        if none_in:
            if cmin > 0:
                raise _Empty()
            continue
        try:
            all_in = all(ir.definitely_empty(cx, ir.subtract(cx, s, cu)) for s in scheds)
        except ir.NotExpressible:
            all_in = False
        if all_in:
            minn = max(minn, cmin)
            if cmax is not None:
                maxn = cmax if maxn is None else min(maxn, cmax)
            continue
        if cmax == 0:
            # (no item may match: each position's schema minus cu, when that is expressible)
            try:
                scheds = [ir.subtract(cx, s, cu) for s in scheds]
                continue
            except ir.NotExpressible:
                pass
        out.append((cu, cmin, cmax, csrc))
    return out, scheds, minn, maxn


def contains_array(em, n, name, depth, P, tail, minn, maxn, contains, state_limit):
    """Emitter.array() for several contains constraints ``contains`` (cu, min, max, src) left
    after the trivial ones were folded into minn/maxn (``state_limit``: emit.STATE_LIMIT)."""
    # (the same array reached through several parents, e.g. one definition under every branch
    # of a oneOf, is the same nodes: emitted once; the key's objects are kept alive with it)
    pin = (n, tail, tuple(contains))
    key = ("contains_multi", id(n), id(tail), tuple((id(c[0]), c[1], c[2]) for c in contains), minn, maxn, depth)
    hit = em._memo.get(key)
    if hit is not None and hit[0] == pin:
        return hit[1]
    e = _contains_array(em, n, name, depth, P, tail, minn, maxn, contains, state_limit)
    em._memo[key] = (pin, e)
    return e


def _contains_array(em, n, name, depth, P, tail, minn, maxn, contains, state_limit):
    oo, oc, ao, ac, sep, kv, eo, ea = em.layout(depth)
    cx = em.cx
    src = contains[1][3]
    positions = list(range(P if maxn is None else min(P, maxn)))
    if maxn is None or maxn > P:
        positions.append(P)
    scheds = [n.prefix[p] if p < P else tail for p in positions]
    try:
        contains, scheds, minn, maxn = _simplify(cx, contains, scheds, minn, maxn)
    except _Empty:
        return None
    if maxn is not None and minn > maxn:
        return None
    if len(positions) > P:
        tail = scheds[-1]
    prefix = tuple(scheds[:min(P, len(positions))]) + n.prefix[len(positions):]
    if len(contains) <= 1:
        m = n.copy(prefix=prefix, items=tail, contains=tuple(contains), minn=minn, maxn=maxn)
        if contains:
            return em.contains_array(m, name, depth, P, tail, minn, maxn, contains[0])
        return em.array(m, name, depth)
    k = len(contains)
    if k > MAX_CONTAINS:
        em.unsupported("contains", src, f"{k} 'contains' constraints on one array (at most {MAX_CONTAINS}: one "
                                        f"item class per subset of them)")
        return em.array(n.copy(contains=()), name, depth)
    cs_ = [c[0] for c in contains]
    cmins = [c[1] for c in contains]
    cmaxs = [c[2] for c in contains]
    caps = [cmax + 1 if cmax is not None else cmin for cmin, cmax in zip(cmins, cmaxs)]
    I = maxn if maxn is not None else max(P, minn)
    size = I + 1
    for c in caps:
        size *= c + 1
    if size > state_limit:
        em.unsupported("contains", src, f"the counting automaton for {k} contains constraints and minItems/maxItems "
                                        f"has {size} states (at most {state_limit})")
        return em.array(n.copy(contains=()), name, depth)
    negs = []
    for j, cu in enumerate(cs_):
        try:
            negs.append(ir.negate(cx, cu))
        except ir.NotExpressible:
            negs.append(None)  # (subtracted relative to each class, or negated as an open object)
    parts = {}
    try:
        for p in positions:
            s = scheds[p]
            try:
                parts[p] = _item_classes(em, s, cs_, negs)
            except ir.NotExpressible:
                opens = [ir.negate_open(cx, cu) if ng is None else ng for cu, ng in zip(cs_, negs)]
                parts[p] = _item_classes(em, s, cs_, opens)
    except ir.NotExpressible as e:
        em.unsupported("contains", src, f"the item classes of {k} contains constraints cannot be built ({e})")
        return em.array(n.copy(contains=()), name, depth)
    classes = {}

    def pos_classes(p):
        if p not in classes:
            tag = p if p < P else "item"
            out = []
            for mask, u in parts[p]:
                e = em.sub(u, f"{name}_{tag}_c{mask}", depth + 1)
                if e is not None:
                    out.append((mask, e))
            classes[p] = out
        return classes[p]

    states = {}
    em.g.may_be_empty = True

    def state(i, cnts, first):
        key = (i, cnts, first)
        if key in states:
            return states[key]
        rn = f"{name}__m{i}_" + "_".join(map(str, cnts)) + ("f" if first else "")
        states[key] = ref(rn)
        em.g.define(rn, None)
        names.append(rn)
        can_end = i >= minn and all(c >= m for c, m in zip(cnts, cmins))
        alts = []
        if can_end and not first:
            alts.append(EPS)
        if maxn is None or i < maxn:
            p = i if i < P else P
            cls = pos_classes(p)
            ni = i + 1 if maxn is not None else min(i + 1, I)
            s_ = EPS if first else sep
            for mask, e in cls:
                nc = []
                for j, c in enumerate(cnts):
                    if mask >> j & 1:
                        if cmaxs[j] is not None and c + 1 > cmaxs[j]:
                            break
                        c = min(c + 1, caps[j])
                    nc.append(c)
                else:
                    alts.append(seq(s_, e, state(ni, tuple(nc), False)))
        em.g.define(rn, alt(*alts))
        return states[key]

    empty_ok = minn == 0 and all(m == 0 for m in cmins)
    names: list = []
    body = em.close_cycle(names, seq(ao, state(0, (0,) * k, True), ac))
    state = None  # (a recursive closure is a reference cycle: break it)
    return alt(ea if empty_ok else None, body)
