"""Objects with existential member conditions (ir.Obj.somes, from negating patternProperties/
additionalProperties: "some member's key is in L and its value in V") → grammar rules.

The members are written as Emitter.object() writes them (named properties in their order, then
any number of additional members), with one more component in the state: the set of conditions
not yet met. A member whose key is in the language of some conditions has one alternative per
subset of them (its value in the intersection of their unions, or just the member's own schema
for the empty subset); the content may end only when every condition is met. Additional
members are split into key regions by every pattern involved (the object's, and the
conditions' languages), so that a region's key is in a condition's language for all its keys
or for none. At most ir.MAX_SOMES conditions (2^MAX_SOMES sets).
"""

from __future__ import annotations

from . import automaton as fa
from . import grammar as G
from . import ir
from . import regex as rx
from .convert import _sanitize
from .grammar import EPS, alt, seq

Q = ("lit", '"')


def _masks(bits):
    """Every subset of the condition indices ``bits``, as bit masks (the empty one first)."""
    out = [0]
    for b in bits:
        out += [m | (1 << b) for m in out]
    return out


def object_somes(em, n, name, depth, state_limit):
    """Emitter.object() for an object node with ``somes`` (``state_limit``: emit.STATE_LIMIT,
    passed in: this module does not import emit)."""
    oo, oc, ao, ac, sep, kv, eo, ea = em.layout(depth)
    cx = em.cx
    addl = n.addl
    if cx.strict and not n.ev_all and (n.ev_keys or n.ev_pats):
        addl = addl + ((ir.NEVER, n.ev_keys | frozenset(n.required), n.ev_pats),)
    somes = n.somes
    full = (1 << len(somes)) - 1
    if em.any_order:
        em.unsupported("oneOf", somes[0][4], "any_order with the negation of an object with "
                       "patternProperties/additionalProperties is not supported")
        return em.object(n.copy(somes=()), name, depth)  # (lenient: the conditions dropped)
    listed = [k for k, _ in n.props] + [r for r in n.required if n.prop(r) is None]
    req = set(n.required)
    pmap: dict = {}
    for kk, pu in n.props:
        pmap.setdefault(kk, pu)
    try:
        entries = []
        for k in listed:
            u = pmap.get(k)
            u = ir.ANY if u is None else u
            for ast, su in n.patterns:
                if u and em._matches(ast, k):
                    u = ir.intersect(cx, u, su)
            for su, keys, pats in addl:
                if u and k not in keys and not any(em._matches(p, k) for p in pats):
                    u = ir.intersect(cx, u, su)
            for nu in n.names:
                if u and not ir.validate(cx, nu, k):
                    u = ir.NEVER
            variants = []
            kt = em.key_text(k) if u else None
            if kt is not None:
                app = [b for b, s in enumerate(somes) if _some_key(s, k)]
                for mask in _masks(app):
                    w = u
                    for b in range(len(somes)):
                        if w and mask >> b & 1:
                            w = ir.intersect(cx, w, somes[b][3])
                    e = em.sub(w, f"{name}_{_sanitize(k, 30)}" + (f"_w{mask}" if mask else ""), depth + 1)
                    if e is not None:
                        variants.append((seq(kt, kv, e), mask))
            if not variants:
                if k in req:
                    return None
                continue
            entries.append((variants, k in req))
        extras = _extras(em, n, addl, listed, name, depth, kv, state_limit)
    except (ir.NotExpressible, rx.RegexUnsupported) as e:
        em.unsupported("patternProperties" if n.patterns else "additionalProperties", n.src, str(e))
        return em.object(n.copy(somes=()), name, depth)  # (lenient: the conditions dropped)
    pmin, pmax = n.minp, n.maxp
    nreq = sum(1 for _, r in entries if r)
    if pmax is not None and nreq > pmax:
        return None
    bounded = pmin > nreq or pmax is not None
    if not bounded:
        pmin, pmax = 0, None
    cap = max(pmin, 1) if pmax is None else pmax
    nent = len(entries)
    if (nent + 1) * (cap + 1) * (full + 1) > state_limit:
        em.unsupported("oneOf", somes[0][4], "the negation of an object with patternProperties/"
                       "additionalProperties needs too large a member automaton")
        return em.object(n.copy(somes=()), name, depth)  # (lenient: the conditions dropped)
    memo: dict = {}
    xmemo: dict = {}

    def extras_state(c, need):
        """Additional members after c members (c == 0: none yet, the content must be
        non-empty), conditions ``need`` still unmet; a rule per state (they loop)."""
        key = (c, need)
        if key in xmemo:
            return xmemo[key]
        lo = max(0, pmin - c)
        hi = None if pmax is None else pmax - c
        if hi is not None and hi < lo:
            xmemo[key] = None
            return None
        rn = em.g.unique(f"{name}__x{c}_{need}")
        em.g.define(rn, None)
        xmemo[key] = r = ("ref", rn)
        alts = []
        if need == 0 and lo == 0 and c > 0:
            alts.append(EPS)
        if hi is None or hi > 0:
            nc = min(c + 1, cap) if pmax is None else c + 1
            for e, mask in extras:
                nxt = extras_state(nc, need & ~mask)
                if nxt is not None:
                    alts.append(seq(e if c == 0 else seq(sep, e), nxt))
        em.g.rules[rn] = alt(*alts)  # (None: unproductive, pruned when the grammar is finalized)
        return r

    def state(i, c, need):
        cc = min(c, cap) if pmax is None else c
        key = (i, cc, need)
        if key in memo:
            return memo[key]
        if i == nent:
            e = extras_state(cc, need)
            memo[key] = e
            return e
        variants, required = entries[i]
        alts = []
        if pmax is None or cc + 1 <= pmax:
            for e, mask in variants:
                alts.append(seq(e if cc == 0 else seq(sep, e), state(i + 1, cc + 1, need & ~mask)))
        if not required:
            alts.append(state(i + 1, cc, need))
        body = alt(*alts)
        memo[key] = em.intern(em.g.unique(f"{name}__s{i}_{cc}_{need}"), body) if body is not None else None
        return memo[key]

    content = state(0, 0, full)
    # (the empty object meets no condition: never accepted here)
    return seq(oo, content, oc) if content is not None else None


def _some_key(s, k) -> bool:
    try:
        return ir.some_key(s, k)
    except rx.RegexUnsupported as e:
        raise ir.NotExpressible(str(e))


#: key_regions by (listed keys, patterns, limit), without propertyNames: (regions, {region
#: index: fa.restrict_alphabet of its automaton}). Objects of one shape recur within a schema
#: (helm-testsuite: 650 negated objects over a few shapes) and across requests.
_REGIONS: dict = {}


def cached_regions(listed_set, pats, names_dfa, limit):
    """key_regions through the process-wide memo (``names_dfa`` None only), with the table of
    restricted automata that ``restricted`` fills: (regions, restricted table)."""
    rkey = (tuple(listed_set), tuple(pats), limit) if names_dfa is None else None
    hit = _REGIONS.get(rkey) if rkey is not None else None
    if hit is None:
        hit = (key_regions(listed_set, pats, names_dfa, limit), {})
        if rkey is not None:
            if len(_REGIONS) > 512:
                _REGIONS.clear()
            _REGIONS[rkey] = hit
    return hit


def restricted(hit, i):
    """fa.restrict_alphabet of region ``i``'s automaton of a cached_regions result, made once
    (the regions are outputs of minimize: their labels lie in the scalars, but for a
    pattern's own automaton, and only then is anything to do)."""
    rd = hit[1].get(i)
    if rd is None:
        rd = hit[1][i] = fa.restrict_alphabet(hit[0][i][1], minimal=True)
    return rd


#: key_regions' splits by (listed keys, limit): a trie over the patterns, each node
#: [regions after the patterns on its path, {next pattern AST: node}]. Objects of one schema
#: share leading patterns (JsonSchemaStore pyrseas: 17 objects whose 7-16 patterns share
#: prefixes of 6-9), and each shared prefix is split once.
_SPLITS: dict = {}
_SPLIT_NODES = [0]


def key_regions(listed_set, pats, names_dfa, limit):
    """The regions of the keys an object may have besides ``listed_set``: one (matched
    patterns, automaton) pair per combination of ``pats`` a key can match (automaton None:
    every key), within ``names_dfa`` (propertyNames) where given. Raises NotExpressible past
    64 regions."""
    if names_dfa is not None or not pats:
        base = _other_keys(listed_set)
        if names_dfa is not None:
            base = names_dfa if base is None else fa.intersect(base, names_dfa, limit)
        regions = [((), base)]
        for p in pats:
            regions = _split(regions, p, limit)
        return regions
    rkey = (tuple(listed_set), limit)
    node = _SPLITS.get(rkey)
    if node is None:
        if _SPLIT_NODES[0] > 4096:
            _SPLITS.clear()
            _SPLIT_NODES[0] = 0
        # (the root's regions, the complement of the listed keys, made when first needed:
        # the first pattern splits it without building it, _split_others)
        node = _SPLITS[rkey] = [None, {}]
        _SPLIT_NODES[0] += 1
    root = node

    def root_regions():
        if root[0] is None:
            root[0] = [((), _other_keys(listed_set))]
        return root[0]

    for p in pats:
        nxt = node[1].get(p)
        if nxt is None:
            if node is root:
                regions = _split_others(listed_set, p, limit, root_regions)
            else:
                regions = _split(node[0], p, limit)
            nxt = node[1][p] = [regions, {}]
            _SPLIT_NODES[0] += 1
        node = nxt
    return list(root_regions() if node is root else node[0])


def _other_keys(listed_set):
    """The automaton of every key but ``listed_set`` (None: every key)."""
    return fa.negate(fa.literal_set_dfa(listed_set), minimal=True) if listed_set else None


#: _split_others' two sides of a pattern AST: its automaton and its complement's, on the
#: scalars (objects of one schema repeat a pattern with other listed keys: web-types' 51)
_SIDES: dict = {}


def _split_others(listed_set, p, limit, root_regions):
    """``_split(root_regions(), p, limit)``, the same regions (``root_regions()``: the
    complement of the listed keys, one object per listed set, made when first needed), each
    found as the pattern's keys (or its complement's) less the listed ones: no product with
    the complement of the listed keys (``fa.minus_words``). A pattern that meets none of the
    other keys leaves the root region whole, that very object (the emitter writes a key
    automaton's rules once per object: Emitter.key_dfa)."""
    if not listed_set:
        return _split(root_regions(), p, limit)
    sides = _SIDES.get(p)
    if sides is None:
        pd = ir.regex_dfa(p)
        sides = ((p,), fa.restrict_alphabet(pd, minimal=True)), \
            ((), fa.restrict_alphabet(fa.negate(pd, minimal=True), minimal=True))
        sides = ir._bounded_put(_SIDES, p, sides, 256)
    inside = fa.minus_words(sides[0][1], listed_set, limit)
    if inside.is_empty():
        return list(root_regions())
    out = [(sides[0][0], inside)]
    outside = fa.minus_words(sides[1][1], listed_set, limit)
    if not outside.is_empty():
        out.append((sides[1][0], outside))
    return out


def _split(regions, p, limit):
    """``regions`` each split by pattern ``p`` into the keys it matches and the others."""
    pd = ir.regex_dfa(p)
    nxt = []
    for m, d in regions:
        if d is not None and fa.disjoint(d, pd, limit):
            nxt.append((m, d))  # (the pattern misses this region: it stays whole)
            continue
        inside = pd if d is None else fa.intersect(d, pd, limit)
        outside = fa.negate(pd, minimal=True) if d is None else fa.difference(d, pd, limit)
        if not inside.is_empty():
            nxt.append((m + (p,), inside))
        if not outside.is_empty():
            nxt.append((m, outside))
    if len(nxt) > 64:
        raise ir.NotExpressible("too many patternProperties regions")
    return nxt


def _extras(em, n, addl, listed, name, depth, kv, limit):
    """(member expression, mask of the conditions it meets) for additional members."""
    cx = em.cx
    real = []
    for ast, _ in n.patterns:
        if ast not in real:
            real.append(ast)
    for _, _, ps in addl:
        for ast in ps:
            if ast not in real:
                real.append(ast)
    pats = list(real)
    lits = []  # per condition: the AST of its excluded keys (or None)
    for pos, keys, ps, _, _ in n.somes:
        for ast in ((pos,) if pos is not None else ()) + tuple(ps):
            if ast not in pats:
                pats.append(ast)
        la = ir.literal_set_ast(sorted(keys)) if keys else None
        lits.append(la)
        if la is not None and la not in pats:
            pats.append(la)
    names_dfa = None
    for nu in n.names:
        d = em.names_dfa(nu)
        names_dfa = d if names_dfa is None else fa.intersect(names_dfa, d, limit)
    if names_dfa is not None and names_dfa.is_empty():
        return []
    listed_set = sorted(set(listed))
    hit = cached_regions(listed_set, pats, names_dfa, limit)
    regions = hit[0]

    def value_for(matched):
        u = ir.ANY
        for ast, su in n.patterns:
            if ast in matched:
                u = ir.intersect(cx, u, su)
        for su, keys, ps in addl:
            if not any(p in matched for p in ps):
                u = ir.intersect(cx, u, su)
        return u

    out = []
    for i, (m, d) in enumerate(regions):
        u = value_for(m)
        if not u:
            continue
        if d is None:
            key = em.shared("string")
        else:
            d = restricted(hit, i)
            if d.is_empty():
                continue
            if em.excl and not any(p in m for p in real) and not any(em._has_pattern(nu) for nu in n.names):
                body = em.excl_body(d, False, f"{name}__key{i}")
                if body is None:
                    continue
                key = seq(Q, body)
            else:
                key = em.key_dfa(d, f"{name}__key{i}")
        app = [b for b, (pos, keys, ps, _, _) in enumerate(n.somes)
               if (pos is None or pos in m) and (lits[b] is None or lits[b] not in m)
               and not any(p in m for p in ps)]
        for mask in _masks(app):
            w = u
            for b in range(len(n.somes)):
                if w and mask >> b & 1:
                    w = ir.intersect(cx, w, n.somes[b][3])
            v = em.sub(w, f"{name}_addl{i}" + (f"_w{mask}" if mask else ""), depth + 1) if w else None
            if v is not None:
                out.append((seq(key, kv, v), mask))
    return out
