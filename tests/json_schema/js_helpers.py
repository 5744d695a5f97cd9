"""Small helpers shared by the JSON-schema tests."""

from __future__ import annotations

import copy
import functools
import gzip
import itertools
import json
import os

import jsonschema
import pytest

from js_engine import DATA, ENGINE
from xgrammar2.json_schema import json_schema_to_ebnf


@functools.lru_cache(maxsize=512)
def _compile_cached(ebnf: str):
    return ENGINE.compile(ebnf)


def grammar_for(schema, **kw):
    return _compile_cached(json_schema_to_ebnf(schema, **kw).ebnf)


def accepts(schema, text: str, **kw) -> bool:
    return ENGINE.accepts(grammar_for(schema, **kw), text)


def allowed_ids(matcher, n: int) -> set:
    """The token ids among the first ``n`` that ``matcher``'s next bitmask allows."""
    import numpy as np

    bm = np.zeros((1, (n + 31) // 32), dtype=np.int32)
    matcher.fill_next_token_bitmask(bm)
    bits = np.unpackbits(bm.reshape(-1).view(np.uint8), bitorder="little")[:n]
    return set(np.flatnonzero(bits).tolist())


def check(schema, good=(), bad=(), **kw):
    """Asserts every text in ``good`` is accepted and every text in ``bad`` rejected.
    Non-string entries are serialized with json.dumps."""
    cg = grammar_for(schema, **kw)
    for t in good:
        t = t if isinstance(t, str) else json.dumps(t)
        assert ENGINE.accepts(cg, t), f"rejected valid text {t!r} for {json.dumps(schema)}"
    for t in bad:
        t = t if isinstance(t, str) else json.dumps(t)
        assert not ENGINE.accepts(cg, t), f"accepted invalid text {t!r} for {json.dumps(schema)}"


# ---------------------------------------------------------------- instance grids and oracles


def objects_over(keys, pool, max_keys=3):
    """Objects over ``keys`` (in that order, as the grammar writes them, at most ``max_keys``
    members), values from ``pool``; the empty object first."""
    out = [{}]
    for r in range(1, min(max_keys, len(keys)) + 1):
        for ks in itertools.combinations(keys, r):
            for vals in itertools.product(pool, repeat=r):
                out.append(dict(zip(ks, vals)))
    return out


def arrays_over(pool, max_len=3):
    """Every array of up to ``max_len`` items from ``pool``."""
    out = []
    for n in range(max_len + 1):
        out.extend(list(t) for t in itertools.product(pool, repeat=n))
    return out


def member_orders(x):
    """Serializations of ``x``: every order of an object's members (the grammar writes named
    properties in the order of the schema node that accepts the object, and the branches of a
    union may order them differently); nested values as json.dumps writes them."""
    if not isinstance(x, dict) or len(x) < 2:
        return [json.dumps(x)]
    return [json.dumps(dict((k, x[k]) for k in ks)) for ks in itertools.permutations(x)]


def assert_exact(schema, instances, strict_mode=False, texts=member_orders, narrows=False):
    """The grammar of ``schema`` agrees with ``jsonschema`` (draft 2020-12) on every instance:
    a valid one is accepted in at least one of its ``texts``, an invalid one in none. With
    ``narrows`` (strict mode, which narrows objects) only accepting an invalid one is wrong;
    otherwise the grid must hold both valid and invalid instances."""
    cg = grammar_for(schema, strict_mode=strict_mode)
    v = jsonschema.Draft202012Validator(schema)
    wrong, n_valid = [], 0
    for x in instances:
        valid = v.is_valid(x)
        n_valid += valid
        acc = [t for t in texts(x) if ENGINE.accepts(cg, t)]
        if acc and not valid:
            wrong.append(("accepted invalid", acc[0]))
        elif valid and not acc and not narrows:
            wrong.append(("rejected valid", x))
    assert not wrong, f"{len(wrong)} wrong verdicts for {json.dumps(schema)}: {wrong[:8]}"
    if not narrows:
        assert 0 < n_valid < len(instances), "the grid must contain valid and invalid instances"


def bench_row(id_):
    """The JSONSchemaBench row ``id_`` ("Subset---name"); skips the test where the data is missing."""
    sub = id_.split("---")[0]
    p = os.path.join(DATA, "jsonschemabench", f"{sub}.jsonl.gz")
    if not os.path.exists(p):
        pytest.skip(f"no {p}")
    with gzip.open(p, "rt", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r["id"] == id_:
                return r
    raise KeyError(id_)


def mutations(x, fillers):
    """``x`` and copies with one array changed: an item appended (each filler), the first item
    removed, the first item replaced by a filler."""
    out = [x]
    paths = []

    def walk(v, path):
        if isinstance(v, list):
            paths.append(path)
            for i, y in enumerate(v):
                walk(y, path + (i,))
        elif isinstance(v, dict):
            for k, y in v.items():
                walk(y, path + (k,))

    walk(x, ())

    def at(root, path):
        for p in path:
            root = root[p]
        return root

    for p in paths:
        for f in fillers:
            y = copy.deepcopy(x)
            at(y, p).append(f)
            out.append(y)
            y = copy.deepcopy(x)
            if at(y, p):
                at(y, p)[0] = f
                out.append(y)
        y = copy.deepcopy(x)
        if at(y, p):
            del at(y, p)[0]
            out.append(y)
    return out


def member_ordered(d, order):
    """``d`` with its keys in ``order`` first (the grammar writes named properties in the
    schema's order), the others after them as they were."""
    if not isinstance(d, dict):
        return d
    return {**{k: d[k] for k in order if k in d}, **{k: v for k, v in d.items() if k not in order}}
