"""Exclusive ``oneOf``: which branches may overlap, and each overlapping branch intersected
with the negation of the others, so that the union of the results is exactly "one branch".

The functions take the converter (``cx``, a ``convert.Converter``) as their first argument;
this module does not import convert.py (tests/python/test_import_graph.py).

``one_of`` first proves pairs of branches disjoint (by the JSON types they can have, then by
intersecting them within what the enclosing schema object requires, ``context``); only pairs
that may overlap are negated. ``_exclusive`` makes them exclusive: in the first attempt a
branch that cannot be negated alone is negated relative to the branch it is taken from (finite
key sets, enum values, other types: ``ir.subtract``); further attempts, each enabling what
stopped the previous one, negate open objects (``open_negation``: "some member's value
violates them") or defer the negation of a definition still being converted as a rule
"context minus U" (deferred_negation.py). Where two overlapping branches are plain objects
(no patternProperties/additionalProperties/propertyNames), the attempt after the first
subtracts them from each other directly (``ir.subtract_objects``), each definition's negation a
shared deferred rule. The union an exclusive oneOf built is recorded (``_record``) so that its
negation is "no branch, or two" (``ir.negate_one_of``).
"""

from __future__ import annotations

from . import automaton as fa
from . import ir
from . import regex as rx

# The work (node pairs and enum values checked, and object pairs compacted: ir.compact) one
# oneOf may spend making its branches exclusive before it is refused: 1.5x the most any
# schema that converts needs in the JSONSchemaBench sets (Github_medium---o683: 65,625;
# JsonSchemaStore---cityjson: 33,593), so an inexpressible oneOf (Github_medium---o35868:
# 0.8 M) is refused in tens of milliseconds.
ONE_OF_BUDGET = 100_000

_ALL_KINDS = ("null", "boolean", "number", "string", "array", "object")


def expand(cx, u):
    """``u`` with its references replaced by their unions (those still being converted kept)."""
    out = []
    for n in u:
        if n.kind == "ref" and cx.ref_union_memo.get(n.name) is not ir.IN_PROGRESS:
            out.extend(cx.ref_union(n.name))
        else:
            out.append(n)
    return tuple(out)


def kinds(cx, u, seen=()):
    """A superset of the JSON types of the values in ``u``; references still being
    converted are read from their schema text (``type``/``const``/``enum``/allOf/anyOf/
    oneOf/$ref), so recursive branches can be told apart by type."""
    out = set()
    for n in u:
        if n.kind == "enum":
            out.update(ir.json_type(v) for v in n.values)
        elif n.kind != "ref":
            out.add(n.kind)
        elif n.name in seen:
            return set(_ALL_KINDS)
        else:
            m = cx.ref_union_memo.get(n.name)
            if m is not None and m is not ir.IN_PROGRESS:
                out |= kinds(cx, m, seen + (n.name,))
                continue
            entry = cx.refs.get(n.name)
            if entry is None:
                return set(_ALL_KINDS)
            if entry[0] == "and":
                out |= kinds(cx, entry[1], seen + (n.name,)) & kinds(cx, (entry[2],), seen + (n.name,))
            elif entry[0] == "not":
                out |= kinds(cx, entry[1], seen + (n.name,))
            else:
                out |= _schema_kinds(cx, entry[0], entry[1], entry[2], seen + (n.name,), 0)
        if len(out) == len(_ALL_KINDS):
            break
    return out


def _schema_kinds(cx, s, base, ptr, seen, depth):
    if s is False:
        return set()
    if not isinstance(s, dict) or depth > 16:
        return set(_ALL_KINDS)
    base = cx._base_of(s, base)
    ks = set(_ALL_KINDS)
    t = s.get("type")
    if isinstance(t, str):
        t = [t]
    if isinstance(t, list) and all(isinstance(x, str) for x in t):
        ks &= {"number" if x == "integer" else x for x in t}
    if "const" in s:
        ks &= {ir.json_type(s["const"])}
    if isinstance(s.get("enum"), list):
        ks &= {ir.json_type(v) for v in s["enum"]}
    if isinstance(s.get("allOf"), list):
        for sub in s["allOf"]:
            ks &= _schema_kinds(cx, sub, base, ptr, seen, depth + 1)
    for kw in ("anyOf", "oneOf"):
        if isinstance(s.get(kw), list):
            alt = set()
            for sub in s[kw]:
                alt |= _schema_kinds(cx, sub, base, ptr, seen, depth + 1)
            ks &= alt
    ref = s.get("$ref")
    if isinstance(ref, str) and ref.startswith("#") and ks:
        try:
            loc = cx._locate(ref, base, ptr)
        except Exception:  # noqa: BLE001 - an unresolvable target is reported by the conversion itself
            loc = None
        if loc is not None and ("$ref", id(loc[0])) not in seen:
            ks &= _schema_kinds(cx, loc[0], loc[2], loc[1], seen + (("$ref", id(loc[0])),), depth + 1)
    return ks


def _patterns_disjoint(a, b):
    """True when ``a`` and ``b`` are unions of strings and every pair of their nodes has a
    pattern each whose languages do not meet (their NFAs' state pairs, fa.nfa_disjoint: no
    automaton of either pattern is built, which a bounded count such as ``{1,256}`` can make
    too large); False when that is not shown."""
    if not a or not b or any(x.kind != "string" for x in a) or any(y.kind != "string" for y in b):
        return False
    try:
        for x in a:
            for y in b:
                if not any(fa.nfa_disjoint(p, q) for p, _ in x.pos for q, _ in y.pos
                           if not rx.has_anchor(p) and not rx.has_anchor(q)):
                    return False
    except rx.RegexUnsupported:  # (AutomatonTooLarge: not shown)
        return False
    return True


def _disjoint(cx, a, b):
    """True only when no value is in both unions (node pair by node pair, so that a
    large product is not built at once)."""
    if _patterns_disjoint(a, b):
        return True
    try:
        if ir.definitely_empty(cx, ir.intersect(cx, a, b)):
            return True
    except ir.NotExpressible:
        pass
    else:
        return False
    if len(a) * len(b) > 1024:
        return False
    try:
        for x in a:
            for y in b:
                if not ir.definitely_empty(cx, ir.intersect(cx, (x,), (y,))):
                    return False
    except ir.NotExpressible:
        return False
    return True


def overlaps(cx, branches, context):
    """The overlap matrix of the branches within ``context`` (True: may overlap), or None
    when they are pairwise disjoint."""
    n = len(branches)
    ks = [kinds(cx, b) for b in branches]
    exp = []
    for b in branches:
        try:
            exp.append(ir.intersect(cx, context, expand(cx, b)))
        except ir.NotExpressible:
            exp.append(b)
    overlap = [[False] * n for _ in range(n)]
    any_overlap = False
    for i in range(n):
        for j in range(i + 1, n):
            if not ks[i] & ks[j]:
                continue
            empty = _disjoint(cx, exp[i], exp[j])
            if not empty:
                overlap[i][j] = overlap[j][i] = True
                any_overlap = True
    return overlap if any_overlap else None


def union_if_disjoint(cx, branches, context):
    """The union of ``branches`` when they are pairwise disjoint within ``context`` (then it
    is exactly their oneOf there), else None."""
    if overlaps(cx, branches, context) is not None:
        return None
    try:
        return ir.union(*branches)
    except ir.NotExpressible:
        return None


def one_of(cx, branches, ptr, context):
    """The union of values in exactly one of ``branches`` (within ``context``, what the
    schema object requires besides the oneOf); refused (cx.unsupported) when the branches
    cannot be made exclusive."""
    n = len(branches)
    if n == 1:
        return branches[0]
    overlap = overlaps(cx, branches, context)
    if overlap is None:
        return ir.union(*branches)
    own = cx.meter is None
    r = err = _exclusive(cx, branches, overlap, context, own, False)
    if not isinstance(r, ir.NotExpressible):
        return _record(cx, r, branches, overlap, context)
    # Further attempts, each enabling what stopped the previous one: the negation of open
    # objects (open_negation), then or else the negation of a definition that is still being
    # converted (or nested too deeply) as a deferred rule (defer_subtract); before those,
    # where two overlapping branches are plain objects, their direct subtraction. (The first
    # attempt is as before, with ir.negate's exact shortcuts: a recorded exclusive union, a
    # negation negated again, one negation per definition; these change the grammar text of
    # some schemas, not the language.)
    opened = deferred = relative = tried_relative = False
    while True:
        if "negation of an object schema with patternProperties" in str(r) and not opened \
                and not cx.open_negation:
            opened = True
        elif not tried_relative and not opened and not cx.defer_negation and not cx.lenient \
                and _objects_pair(cx, branches, overlap):
            # Overlapping branches that are objects without patternProperties/
            # additionalProperties/propertyNames: each subtracted from the other directly
            # (ir.subtract_objects), negations deferred where they meet a definition being
            # converted or nested too deeply; without it (as before) if that fails.
            tried_relative = relative = deferred = True
        elif str(r) in (ir.RECURSIVE_REF, ir.TOO_DEEP) and not cx.defer_negation and not cx.lenient \
                and not deferred:
            # (not in lenient mode: a deferred rule that turns out inexpressible when it is
            # computed could no longer fall back to treating the oneOf as anyOf)
            deferred = True
            relative = False
        else:
            break
        prev = cx.defer_negation
        cx.defer_negation = deferred or prev
        before = r
        try:
            r = _exclusive(cx, branches, overlap, context, own, opened, relative)
        finally:
            cx.defer_negation = prev
        if not isinstance(r, ir.NotExpressible):
            return _record(cx, r, branches, overlap, context)
        if relative:
            # (then the attempts as before, from the error that preceded this one)
            r, relative, deferred = before, False, False
    # (the message stays the first attempt's: what stops the later ones, mostly a product
    # over MAX_ALTS, is in docs/json-schema.md)
    cx.unsupported("oneOf", ptr, f"branches may overlap and cannot be made exclusive ({err}); "
                                 "lenient mode treats it as anyOf")
    return ir.union(*branches)


def _record(cx, r, branches, overlap, context):
    """``r`` (the exclusive union), remembered with the oneOf it was made from (ir.negate_one_of)
    where it is exactly "one branch" (within any context: pairs proven disjoint there are
    disjoint; within a narrower one, ``r`` is exact only inside it)."""
    if r and ir.is_any(context):
        cx.one_of_src[id(r)] = (r, tuple(branches), context, overlap)
    return r


def _plain_objects(cx, u):
    """Whether ``u`` (references expanded) is object nodes without patternProperties/
    additionalProperties/propertyNames, or None when a reference cannot be expanded now."""
    try:
        nodes = ir._expand_nodes(cx, u)
    except ir.NotExpressible:
        return False
    return bool(nodes) and all(ir.plain_object(n) for n in nodes)


def _objects_pair(cx, branches, overlap):
    """Whether some overlapping pair of branches are both plain objects (_plain_objects)."""
    n = len(branches)
    plain = [None] * n
    for i in range(n):
        for j in range(i + 1, n):
            if overlap[i][j]:
                for k in (i, j):
                    if plain[k] is None:
                        plain[k] = _plain_objects(cx, branches[k])
                if plain[i] and plain[j]:
                    return True
    return False


def _exclusive(cx, branches, overlap, context, own, open_, relative=False):
    """Each branch intersected with the negation of every branch it overlaps; the union, or
    the NotExpressible that stopped it (its own work budget when ``own``).

    Closed (``open_`` False): a branch that cannot be negated alone is negated relative to
    the branch it is taken from (finite key sets, enum values, other types), still exact.
    Open (``open_`` True): objects with patternProperties/additionalProperties are negated
    too (ir.negate_node with ``open_negation``: "some member's value violates them"), and
    contradictions are pruned at every step."""
    n = len(branches)
    cx.made_exclusive = True
    plain = [relative and _plain_objects(cx, b) for b in branches]
    rules = cx.negation_rules
    cx.negation_rules = rules or relative
    if open_:
        cx.open_negation = True
    if own:
        cx.meter = [ONE_OF_BUDGET]
    try:
        negs = {}
        out = []
        for i in range(n):
            cur = branches[i]
            for j in range(n):
                if j == i or not overlap[i][j]:
                    continue
                if plain[i] and plain[j]:
                    cur = ir.subtract_objects(cx, ir.intersect(cx, cur, context), branches[j])
                    if not cur:
                        break
                    continue
                if j not in negs:
                    if open_:
                        negs[j] = ir.prune(cx, ir.negate(cx, branches[j]))
                    else:
                        try:
                            negs[j] = ir.negate(cx, branches[j])
                        except ir.NotExpressible:
                            negs[j] = None
                if negs[j] is None:
                    cur = ir.subtract(cx, ir.intersect(cx, cur, context), branches[j])
                elif open_:
                    cur = ir.prune(cx, ir.intersect(cx, cur, negs[j]))
                else:
                    cur = ir.intersect(cx, cur, negs[j])
                if not cur:
                    break
            out.append(cur)
        return ir.union(*out)
    except ir.NotExpressible as e:
        return e
    finally:
        cx.negation_rules = rules
        if open_:
            cx.open_negation = False
        if own:
            cx.meter = None
