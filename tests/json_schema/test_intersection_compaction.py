"""A product of unions that passes ir.MAX_ALTS alternatives is compacted before it is refused
(ir.compact): structurally equal alternatives dropped, and object alternatives that differ in
one key's entry only merged ("k absent" ∪ "k present with a value in V" is "k, if present, in
V"). The negations of if/then and oneOf branches split each condition in two that way, so
e.g. JsonSchemaStore---prometheus ("at most one of six auth keys is non-null", six if/then),
JsonSchemaStore---minecraft-recipe and Github_medium---o66069 were refused ("intersection has
too many alternatives").

Oracle: jsonschema (Draft 2020-12) on a grid of objects, and on the dataset's instances with
mutated arrays: accepted iff valid (members in the order the grammar writes them)."""

from __future__ import annotations

import collections
import itertools
import json
import os

import jsonschema
import pytest

from js_engine import ENGINE
from js_helpers import bench_row, grammar_for, member_ordered, mutations
from xgrammar2.json_schema import ir

import suite_runner as S

KEYS = [f"k{i}" for i in range(7)]

#: "at most one of the keys is non-null", one if/then per key (JsonSchemaStore---prometheus's
#: auth block has six; seven pass MAX_ALTS without compaction here)
AT_MOST_ONE = {"type": "object", "allOf": [
    {"if": {"not": {"properties": {k: {"const": None}}}},
     "then": {"properties": {o: {"const": None} for o in KEYS if o != k}}} for k in KEYS]}


@pytest.mark.parametrize("strict_mode", [False, True])
def test_at_most_one_non_null_if_then_exact_on_grid(strict_mode):
    """(strict_mode=True closes the object to k0..k6: the grid's other keys are left out.)"""
    cg = grammar_for(AT_MOST_ONE, strict_mode=strict_mode)
    v = jsonschema.Draft202012Validator(AT_MOST_ONE)
    wrong, n_valid, grid = [], 0, []
    for vals in itertools.product([0, None, 1], repeat=len(KEYS)):
        grid.append({k: x for k, x in zip(KEYS, vals) if x != 0})
    grid += [{"k2": [], "k3": {}}, {"k4": "s", "k6": None}, 1, "a", None, []]
    if not strict_mode:
        grid += [{"k0": "s", "z": 1}, {"k1": None, "z": [1]}, {"k1": 1, "k5": 2, "z": None}]
    for x in grid:
        valid = v.is_valid(x)
        n_valid += valid
        if ENGINE.accepts(cg, json.dumps(x)) != valid:
            wrong.append((valid, x))
    assert not wrong, f"{len(wrong)} wrong verdicts: {wrong[:8]}"
    assert 0 < n_valid < len(grid)


def test_compact_merges_only_one_key_differences():
    never_k = ir.Obj(props=(("k", ir.NEVER), ("j", (ir.NULL,))))
    null_k = ir.Obj(props=(("k", (ir.NULL,)), ("j", (ir.NULL,))), required=("k",))
    out = ir.compact([never_k, null_k])
    assert len(out) == 1
    m = out[0]
    assert m.required == () and [k for k, _ in m.props] == ["k", "j"]
    assert [n.kind for n in m.prop("k")] == ["null"]
    # two differing keys, or another difference (minProperties), or another key order: kept apart
    other_j = ir.Obj(props=(("k", (ir.NULL,)), ("j", (ir.BOOL,))), required=("k",))
    assert len(ir.compact([never_k, other_j])) == 2
    assert len(ir.compact([never_k, null_k.copy(minp=1)])) == 2
    swapped = ir.Obj(props=(("j", (ir.NULL,)), ("k", (ir.NULL,))), required=("k",))
    assert len(ir.compact([never_k, swapped])) == 2
    # strict mode closes an object to its evaluated and required keys: "k required" and "k
    # absent" stay apart where k is not evaluated (merged, k would no longer be allowed)
    closed = never_k.copy(ev_keys=frozenset({"j"}))
    assert len(ir.compact([closed, null_k.copy(ev_keys=frozenset({"j"}))])) == 2
    assert len(ir.compact([closed.copy(ev_keys=frozenset({"j", "k"})),
                           null_k.copy(ev_keys=frozenset({"j", "k"}))])) == 1
    # structurally equal alternatives (distinct objects) collapse
    assert len(ir.compact([ir.Str(minl=1), ir.Str(minl=1), ir.Str(minl=2)])) == 2


def _compact_by_same(nodes):
    """compact() as it was before its structural numbers: every pair compared by ir.same, and
    each merge decided by walking both nodes (the reference for the numbered version)."""
    groups: dict = {}
    for n in nodes:
        key = (n.kind, tuple(k for k, _ in n.props)) if n.kind == "object" else (n.kind,)
        groups.setdefault(key, []).append(n)
    out = []
    for g in groups.values():
        changed = len(g) > 1
        while changed:
            changed = False
            i = 0
            while i < len(g):
                j = i + 1
                while j < len(g):
                    x, y = g[i], g[j]
                    m = x if ir.same(x, y) else None
                    if m is None and x.kind == "object" and len(x.props) == len(y.props) and \
                            [k for k, _ in x.props] == [k for k, _ in y.props]:
                        diff = [k for (k, u), (_, v) in zip(x.props, y.props) if not ir.same(u, v)]
                        d = set(x.required) ^ set(y.required)
                        k = diff[0] if len(diff) == 1 else (next(iter(d)) if not diff and len(d) == 1 else None)
                        if k is not None and ir.same(tuple(r for r in x.required if r != k),
                                                     tuple(r for r in y.required if r != k)) and \
                                all(ir.same(getattr(x, f), getattr(y, f)) for f in ir._OBJ_REST) and \
                                ((k in x.required) == (k in y.required) or k in x.ev_keys or x.ev_all
                                 or not (x.ev_keys or x.ev_pats)):
                            m = ir._merge_pair(x, y, ir.same)
                    if m is not None:
                        g[i] = m
                        del g[j]
                        changed = True
                    else:
                        j += 1
                i += 1
        out.extend(g)
    return out


def _random_value(rng, depth):
    pick = rng.randrange(6 if depth < 3 else 3)
    if pick == 0:
        return (ir.NULL,)
    if pick == 1:
        return (ir.Str(minl=rng.randrange(2)),)
    if pick == 2:
        return (ir.Num(integer=True, lo=rng.choice([None, 0, 1])),)
    if pick == 3:
        return (ir.Arr(items=_random_value(rng, depth + 1)),)
    if pick == 4:
        return ir.NEVER
    return (_random_obj(rng, depth + 1),)


def _random_obj(rng, depth=0):
    keys = ["a", "b", "c"][:rng.randrange(1, 4)]
    return ir.Obj(props=tuple((k, _random_value(rng, depth)) for k in keys),
                  required=tuple(k for k in keys if rng.random() < 0.4), minp=rng.choice([0, 0, 1]))


def test_compact_by_numbers_equals_compact_by_same():
    """compact() compares nodes by structural numbers (ir._Numbers: one walk per node, not per
    pair); on random object unions (equal copies built separately, nested objects and arrays,
    optional and required keys) it merges exactly as the pairwise ir.same walk did."""
    import random

    rng = random.Random(3626)
    merged = 0
    for _ in range(300):
        seed = rng.randrange(10 ** 9)
        nodes = [_random_obj(random.Random(seed + rng.randrange(4))) for _ in range(rng.randrange(2, 12))]
        got, want = ir.compact(list(nodes)), _compact_by_same(list(nodes))
        assert len(got) == len(want) and all(ir.same(a, b) for a, b in zip(got, want)), seed
        merged += len(nodes) - len(got)
    assert merged > 300


BENCH = S.BENCH_DIR


def _deep_ordered(x, order):
    if isinstance(x, dict):
        return {k: _deep_ordered(v, order) for k, v in member_ordered(x, order).items()}
    if isinstance(x, list):
        return [_deep_ordered(v, order) for v in x]
    return x


#: (subset, id, number of tests, the member order the grammar writes where it differs from the
#: instances')
DATASET = [("JsonSchemaStore", "prometheus", 12, []),
           ("JsonSchemaStore", "minecraft-recipe", 7, ["type", "pattern", "key", "result", "count", "item"]),
           ("Github_medium", "o66069", 2, [])]


@pytest.mark.skipif(not os.path.isdir(BENCH), reason="JSONSchemaBench data not found")
@pytest.mark.parametrize("subset,oid,n_tests,order", DATASET)
def test_dataset_schema_compiles_and_judges_mutated_instances(subset, oid, n_tests, order):
    r = bench_row(f"{subset}---{oid}")
    _, st = S.OursPipeline(strict_mode=True).compile(r["schema"])
    assert st == "compiled", st
    loose = S.OursPipeline(strict_mode=False)
    c, st = loose.compile(r["schema"])
    assert st == "compiled", st
    v = jsonschema.Draft202012Validator(r["schema"])
    assert len(r["tests"]) == n_tests
    judged = [0, 0]
    for t in r["tests"]:
        assert v.is_valid(t["data"]) == t["valid"]
        for x in mutations(t["data"], [1, "x", None, {}])[:60]:
            valid = v.is_valid(x)
            acc = all(loose.accepts(c, s) for s in loose.variants(_deep_ordered(x, order)))
            assert acc == valid, (oid, valid, json.dumps(x)[:300])
            judged[valid] += 1
    assert judged[1] >= 2, judged


@pytest.mark.skipif(not os.path.isdir(BENCH), reason="JSONSchemaBench data not found")
def test_emitter_products_are_not_compacted():
    """The emitter's products (e.g. a contains schema's negation) are not compacted: there a
    refused negation falls back to a relative one (ir.subtract) with a much smaller grammar.
    Compacted, Github_ultra---o19343's lenient any_order grammar grew from 5.7 MB to 84 MB."""
    from xgrammar2.json_schema import json_schema_to_ebnf

    r = json_schema_to_ebnf(bench_row("Github_ultra---o19343")["schema"], any_order=True, lenient=True)
    assert len(r.ebnf) < 10_000_000, len(r.ebnf)


def test_compact_charges_the_product_meter():
    """compact() charges the meter of the product it compacts (one_of's ONE_OF_BUDGET, subtract's
    budget) one unit per pair compared plus one per entry of two objects, and refuses past it; the
    result is the one compact() gives without a meter."""
    import random

    rng = random.Random(683)
    nodes = [_random_obj(random.Random(rng.randrange(10 ** 9))) for _ in range(40)]
    free = ir.compact(list(nodes))
    meter = [10 ** 9]
    got = ir.compact(list(nodes), None, meter)
    assert len(got) == len(free) and all(ir.same(a, b) for a, b in zip(got, free))
    spent = 10 ** 9 - meter[0]
    # (at least one unit per pair of a group compared once, more for objects with entries)
    groups = collections.Counter(tuple(k for k, _ in n.props) for n in nodes)
    assert spent > sum(c * (c - 1) // 2 for c in groups.values())
    exact = [spent]
    ir.compact(list(nodes), None, exact)
    assert exact == [0]
    with pytest.raises(ir.NotExpressible, match="too large a product"):
        ir.compact(list(nodes), None, [spent - 1])
