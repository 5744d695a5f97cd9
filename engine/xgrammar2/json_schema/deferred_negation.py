"""Deferred negation: a rule "context minus U" (a ``("not", ctx, U, open_negation)`` entry of
``Converter.refs``, U a union) whose body is computed when it is needed, by then with the
definitions it refers to complete.

An exclusive ``oneOf`` negates the branches each branch overlaps. A branch that refers to a
definition still being converted (the oneOf sits inside that recursive definition) or whose
negation unrolls a recursion deeper than ``ir.negate`` goes ("negation nested too deeply")
could not be negated eagerly. ``one_of.one_of`` then retries with
``Converter.defer_negation`` set, and ``ir.negate_node`` / ``ir.subtract`` make such a
negation a rule instead (``defer_subtract``).

Exactness: the rules form a system of equations. ``body`` refuses a rule that reaches itself
without entering an array or object (checked on the computed body, and before it for the
definitions in the context and in U: "a = a ∪ B" would give its negated equation the empty
language as least solution), so every recursion through these rules passes through a member
or an item. By induction on the depth of a JSON value, the rule then accepts exactly the values
of the context that U rejects. ``¬(ctx minus U)`` is ``¬ctx ∪ U`` (``ir.negate_node``), and
``(ctx minus U) ∩ node`` is the rule ``(node ∩ ctx) minus U`` (an "and" entry over a "not"
rule), so that only the part needed is negated.
"""

from __future__ import annotations

from . import ir, one_of
from .ir import Ref


#: Rules ("not" rules, and "and" rules over any rule) synthesized after the first deferred
#: negation of a conversion: their bodies build new nodes, and rules keyed by node identity
#: need not converge (e.g. an open recursive branch negated inside itself); beyond this the
#: rule being computed is refused instead of recursing without end.
MAX_RULES = 400


def count_rule(cx):
    cx._deferred += 1
    if cx._deferred > MAX_RULES:
        raise ir.NotExpressible(f"deferred negation needs more than {MAX_RULES} rules")


def defer_subtract(cx, ctx, u):
    """The rule ``ctx`` minus the union ``u`` (one per context, union and mode)."""
    rules = getattr(cx, "negation_rules", False)
    key = ("not", _key(ctx), _key(u), cx.open_negation) + ((True,) if rules else ())
    rn = cx.ref_by_key.get(key)
    if rn is None:
        count_rule(cx)
        cx._synth += 1
        if cx._synth > ir.MAX_SYNTH_REFS:
            raise ir.NotExpressible(f"more than {ir.MAX_SYNTH_REFS} intersections of definitions")
        base = next((n.name for n in tuple(u) + tuple(ctx) if n.kind == "ref"), "value")
        rn = f"{base}_not{cx._synth}"
        cx.ref_by_key[key] = rn
        cx.refs[rn] = ("not", ctx, u, cx.open_negation) + ((True,) if rules else ())
        cx._keep.append((ctx, u))
    return Ref(rn)


def _key(u):
    # (a reference by its name: equal references are often distinct node objects)
    return tuple(("ref", n.name) if n.kind == "ref" else id(n) for n in u)


def _in_place_refs(u):
    return [n.name for n in u if n.kind == "ref"]


def _reaches_in_place(cx, start, target):
    """Whether rule ``target`` is reachable from the names ``start`` through references that
    stand in place (top-level members of the rules' unions). Computes those unions."""
    seen = set()
    todo = list(start)
    while todo:
        name = todo.pop()
        if name == target:
            return True
        if name in seen:
            continue
        seen.add(name)
        todo.extend(_in_place_refs(cx.ref_union(name)))
    return False


def body(cx, name, entry, within=None):
    """The union of rule ``name`` = ``("not", ctx, U, open_negation)``, intersected with
    ``within`` when given (``name`` is then the "and" rule over it): ``(within ∩ ctx)`` minus
    U (ir.subtract, with deferral on for what it meets)."""
    _, ctx, u, open_ = entry[:4]
    rules = len(entry) > 4  # (made while negations of definitions are rules: so are its own)
    for d in _in_place_refs(u) + _in_place_refs(ctx):
        if _reaches_in_place(cx, _in_place_refs(cx.ref_union(d)), d):
            raise ir.NotExpressible("a negated $ref contains itself in place")
    saved = cx.open_negation, cx.defer_negation, cx.meter, cx.negation_rules
    cx.open_negation, cx.defer_negation, cx.meter, cx.negation_rules = open_, True, None, rules
    try:
        if within is not None:
            ctx = ir.intersect(cx, within, ctx)
        if not ctx:
            return ir.NEVER
        # (nodes of U of a type the context lacks take nothing from it)
        kinds = one_of.kinds(cx, ctx)
        du = []
        for n in u:
            for m in (cx.ref_union(n.name) if n.kind == "ref" else (n,)):
                if m.kind in ("ref", "enum") or m.kind in kinds:
                    du.append(m)
        r = ir.subtract(cx, ctx, tuple(du))
        if open_:
            r = ir.prune(cx, r)
    finally:
        cx.open_negation, cx.defer_negation, cx.meter, cx.negation_rules = saved
    if _reaches_in_place(cx, _in_place_refs(r), name):
        raise ir.NotExpressible("a negated $ref contains itself in place")
    return r
