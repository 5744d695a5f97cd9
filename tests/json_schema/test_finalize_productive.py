"""Grammar.finalize: the productive rules (one callees-first pass plus a worklist for
cycles) are exactly the least fixpoint, on random grammars with recursion, undefined and
empty rules; the printed rules are the productive ones reachable from the root."""

from __future__ import annotations

import random

from xgrammar2.json_schema import grammar as G


def _naive_productive(rules):
    prod = set()
    changed = True
    while changed:
        changed = False
        for name, body in rules.items():
            if body is not None and name not in prod and G._productive(body, prod):
                prod.add(name)
                changed = True
    return prod


def _random_expr(rng, names, depth=0):
    r = rng.random()
    if depth > 3 or r < 0.3:
        return G.ref(rng.choice(names)) if rng.random() < 0.6 else G.lit(rng.choice("abc"))
    kids = [_random_expr(rng, names, depth + 1) for _ in range(rng.randint(1, 3))]
    if r < 0.6:
        return G.seq(*kids)
    if r < 0.85:
        return G.alt(*kids)
    return G.rep(kids[0], rng.randint(0, 2), rng.choice([None, 3]))


def test_finalize_matches_fixpoint():
    rng = random.Random(7)
    for _ in range(400):
        n = rng.randint(1, 12)
        names = ["root"] + [f"r{i}" for i in range(1, n)]
        g = G.Grammar()
        for nm in names:
            body = None if (nm != "root" and rng.random() < 0.1) else _random_expr(rng, names + ["undef"])
            g.define(nm, body)
        g.may_be_empty = rng.random() < 0.8
        rules = dict(g.rules)
        prod = _naive_productive(rules)
        text = g.finalize("root")
        if not g.may_be_empty and all(v is not None for v in rules.values()) and "undef" not in repr(rules):
            continue  # (the fast path trusts the emitter's flag)
        if "root" not in prod:
            assert text is None
            continue
        assert text is not None
        printed = {line.split(" ::= ")[0] for line in text.splitlines()}
        assert printed <= prod
        assert "root" in printed
        for line in text.splitlines():
            assert "undef" not in line.split(" ::= ")[1].split()
