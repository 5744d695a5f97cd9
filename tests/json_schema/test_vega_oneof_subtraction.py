"""An exclusive oneOf of open object branches whose shared entries are large definitions
(Vega-Lite 1.x: Github_ultra---o19343 and ---o83932, refused before: "making the branches
exclusive needs too large a product"). one_of.one_of subtracts such branches from each other
directly (ir.subtract_objects: a key the other branch requires missing, or one of its entries
violated, never an entry both share), each definition's negation a rule of its own
("any value minus the definition"), and negates the union an exclusive oneOf built as
"outside its context, in no branch, or in two" (ir.negate_one_of).

Oracle: ``jsonschema`` on the dataset's own instances and on grids that match one branch, both
(rejected) and none, with nested values that violate a definition deep inside (a layer whose
transform filter matches two oneOf branches)."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest

from js_engine import ENGINE
import itertools

from js_helpers import bench_row, grammar_for, mutations
from test_oneof_deferred_negation import _sub

IDS = ("Github_ultra---o19343", "Github_ultra---o83932")
ENC = {"x": {"field": "a", "type": "nominal"}, "y": {"field": "b", "type": "quantitative"}}
UNIT = {"mark": "bar", "encoding": ENC}
BAD_FILTERS = [{"field": "f", "equal": 1, "range": [1, 2]},  # two oneOf branches
               {"field": "f"}, {"equal": 1}, 3]
GOOD_FILTERS = ["datum.x > 1", {"field": "f", "equal": 1}, {"field": "f", "range": [1, {"year": 2000}]},
                [{"field": "f", "equal": "s"}, "datum.y"]]


def _units():
    out = [UNIT, {"mark": "point"}, {"mark": "nope"}, {"mark": "bar", "encoding": {"x": {"axis": 1}}},
           {"mark": "bar", "encoding": {"x": {"sort": "ascending", "bin": True}}},
           {"mark": "bar", "encoding": {"detail": [{"field": "d"}]}},
           {"mark": "bar", "encoding": {"x": {"axis": {"labelAngle": "x"}}}},
           {"mark": "bar", "config": {"mark": {"opacity": 2}}}, {"mark": "bar", "config": {"viewport": 3}},
           {"encoding": ENC}, {}]
    out += [{"mark": "line", "transform": {"filter": f}} for f in BAD_FILTERS + GOOD_FILTERS]
    return out


def _specs():
    """Values for FacetSpec's spec (oneOf LayerSpec, UnitSpec): one branch, both, neither."""
    units = _units()
    out = list(units)
    out += [{"layers": [u]} for u in units]
    out += [{"layers": []}, {"layers": [UNIT, {"mark": 1}]}, {"layers": {}}, {"layers": [UNIT], "name": 1}]
    # both branches: layers valid and a valid mark (rejected), or one of them broken
    out += [{"layers": [UNIT], **u} for u in units[:10]]
    out += [{"layers": [{"mark": "tick", "transform": {"filter": f}}], "mark": "bar"} for f in BAD_FILTERS]
    return out + [1, "s", None, []]


def _orders(x, cap=64):
    """Serializations of ``x`` with the members of its objects, at every level, in any order
    (at most ``cap``): the grammar writes an object's named properties in the order of the
    schema node that accepts it (a negated branch names the member it violates first)."""
    if isinstance(x, list):
        return ["[" + ", ".join(t) + "]" for t in itertools.islice(itertools.product(*map(_orders, x)), cap)]
    if not isinstance(x, dict):
        return [json.dumps(x)]
    perms = list(itertools.islice(itertools.permutations(x), cap))
    sub = {k: _orders(x[k], cap) for k in x}
    out = []
    for ks in perms:  # (every order of this level, each with a share of the nested ones)
        for vs in itertools.islice(itertools.product(*(sub[k] for k in ks)), max(1, cap // len(perms))):
            out.append("{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in zip(ks, vs)) + "}")
    return out


def _check(schema, instances, strict_mode=False):
    cg = grammar_for(schema, strict_mode=strict_mode)
    v = jsonschema.validators.validator_for(schema)(schema)
    wrong = []
    n_valid = 0
    for x in instances:
        valid = v.is_valid(x)
        n_valid += valid
        if any(ENGINE.accepts(cg, t) for t in _orders(x)) != valid:
            wrong.append((valid, json.dumps(x)[:200]))
    assert not wrong, wrong[:6]
    assert 0 < n_valid < len(instances)


@pytest.mark.parametrize("id_", IDS)
def test_facet_spec_one_of_grid(id_):
    """oneOf [LayerSpec, UnitSpec]: exactly one; a layer whose transform filter matches
    EqualFilter and RangeFilter at once is not a UnitSpec, so a spec with a valid mark and such
    a layer is a UnitSpec only (accepted), one with a valid layer is both (rejected)."""
    schema = _sub(bench_row(id_)["schema"], "#/definitions/FacetSpec/properties/spec")
    _check(schema, _specs())


@pytest.mark.parametrize("id_", IDS)
def test_whole_schema(id_):
    """The whole schema (root oneOf [ExtendedUnitSpec, FacetSpec, LayerSpec]): the dataset's
    instances and mutations of its valid ones, and documents of each branch, two, and none;
    strict mode (bench's setting) converts and accepts the dataset's valid instances."""
    row = bench_row(id_)
    schema = row["schema"]
    facet = {"row": {"field": "r", "type": "nominal"}}
    inst = [t["data"] for t in row["tests"]]
    for t in row["tests"]:
        if t["valid"]:
            inst += mutations(t["data"], [1, {"field": "z"}])[:12]
    for s in _specs()[:40]:
        inst.append({"facet": facet, "spec": s})
        if isinstance(s, dict):
            inst.append({**copy.deepcopy(s), "facet": facet, "spec": UNIT})  # facet and unit/layer
    inst += [{"facet": facet}, {"spec": UNIT}, {"layers": [UNIT]}, {"layers": [UNIT], "mark": "bar"}]
    _check(schema, inst)
    cg = grammar_for(schema, strict_mode=True)
    for t in row["tests"]:
        if t["valid"]:
            assert ENGINE.accepts(cg, json.dumps(t["data"]))


def _queries(depth):
    p, c = {"pattern": {}}, {"code": "x"}
    out = [p, c, {"pattern": {}, "code": "x"}, {"code": 1}, {"pattern": 1}, {}, 1,
           {"not": p, "and": []}, {"and": [], "or": []}, {"not": 1}, {"and": {}}]
    if depth:
        inner = _queries(depth - 1)
        out += [{"not": q} for q in inner] + [{"and": [q]} for q in inner] + [{"or": [p, q]} for q in inner]
        out += [{"not": q, "code": "x"} for q in inner[:6]]
    return out


def test_recursive_query_one_of_grid():
    """Github_medium---o3626 (rules: condition = oneOf of pattern/code/not/and/or queries, open
    objects, mutually recursive through not/and/or; refused before): exactly one query kind at
    every depth (a query that is both, e.g. {"not": q, "code": "x"}, is none)."""
    schema = _sub(bench_row("Github_medium---o3626")["schema"], "#/properties/condition")
    _check(schema, _queries(2))
