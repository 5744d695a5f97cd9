"""Arrays with several ``contains`` constraints (each with minContains/maxContains) compile
exactly (emit_contains.py: item classes per subset of the contains schemas, one counter per
constraint). They come from allOf of contains, and from the exclusive branches of a oneOf of
arrays ("some item is not an X" for every other branch), e.g. Github_trivial---o25751,
Github_medium---o62056, JsonSchemaStore---circleciconfig, which were refused ("several
'contains' constraints on one array").

Oracle: jsonschema (Draft 2020-12) on a grid of small arrays, and on the dataset's instances
with mutated arrays: accepted iff valid."""

from __future__ import annotations

import json
import os

import jsonschema
import pytest

from js_helpers import arrays_over, assert_exact, bench_row, member_ordered, mutations
from xgrammar2.json_schema import UnsupportedSchemaError, json_schema_to_ebnf

import suite_runner as S

POOL = [1, 2, 3.5, "a", "bb", None, True]


CASES = {
    # two counted contains, with an item bound
    "allof_min_max": {"type": "array", "maxItems": 4, "allOf": [
        {"contains": {"type": "integer"}, "minContains": 1, "maxContains": 2},
        {"contains": {"type": "string"}, "minContains": 1}]},
    # overlapping contains schemas (an item can count for both), one of them with maxContains
    "overlapping": {"type": "array", "allOf": [
        {"contains": {"type": "number", "minimum": 2}, "minContains": 2},
        {"contains": {"type": "integer"}, "maxContains": 1}]},
    # a prefix item, three contains, one of them at most once
    "prefix_three": {"type": "array", "prefixItems": [{"type": "string"}], "allOf": [
        {"contains": {"const": 1}},
        {"contains": {"type": "string", "maxLength": 1}, "maxContains": 1},
        {"contains": {"type": ["number", "boolean"]}, "minContains": 2}]},
    # a contains together with "no item is null" (a negated contains: maxContains 0)
    "with_negated_contains": {"type": "array", "allOf": [
        {"contains": {"type": "string"}}, {"contains": {"type": "integer"}},
        {"not": {"contains": {"type": "null"}}}]},
    # exclusive oneOf of arrays by item type (Github_trivial---o25751's shape): each branch
    # intersected with "some item is not in the other branch's items" for every other branch
    "oneof_arrays": {"oneOf": [
        {"type": "array", "items": {"type": "integer"}},
        {"type": "array", "items": {"type": ["integer", "string"]}},
        {"type": "array", "items": {"type": ["string", "null"]}}]},
    # the same with a minItems in one branch and overlapping enums (Github_medium---o62056)
    "oneof_enum_arrays": {"oneOf": [
        {"type": "array", "maxItems": 3, "items": {"enum": [1, 2, "a"]}},
        {"type": "array", "items": {"enum": [2, "a", "bb"]}, "minItems": 1},
        {"type": "array", "items": {"enum": [3.5, "bb", None]}}]},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_several_contains_exact_on_grid(case):
    assert_exact(CASES[case], arrays_over(POOL, 4) + [1, "a", None, {}])


def test_several_contains_strict_mode_exact_on_grid():
    """strict_mode=True changes nothing for arrays of scalars."""
    assert_exact(CASES["oneof_arrays"], arrays_over(POOL, 4), strict_mode=True)


def test_too_many_contains_refused_with_pointer():
    schema = {"type": "array", "allOf": [{"contains": {"const": i}} for i in range(6)]}
    with pytest.raises(UnsupportedSchemaError) as ei:
        json_schema_to_ebnf(schema)
    assert "at most 5" in str(ei.value) and ei.value.keyword == "contains"
    # lenient: dropped with a warning (all six, the array stays)
    r = json_schema_to_ebnf(schema, lenient=True)
    assert any("contains" in w for w in r.warnings)


def test_equal_and_trivial_contains_are_folded():
    """A contains schema every item matches bounds the item count; one no item can match
    makes a positive minContains impossible."""
    s = {"type": "array", "items": {"type": "integer"}, "allOf": [
        {"contains": {"type": "number"}, "minContains": 2, "maxContains": 3},
        {"contains": {"type": "string"}, "minContains": 0, "maxContains": 0},
        {"contains": {"const": 1}}]}
    assert_exact(s, arrays_over([1, 2, "a"], 5))
    never = {"type": "array", "items": {"type": "integer"}, "allOf": [
        {"contains": {"type": "string"}}, {"contains": {"const": 1}}]}
    assert_exact({"anyOf": [never, {"type": "array", "minItems": 3}]}, arrays_over([1, 2, "a"], 4))


# ---------------------------------------------------------------- dataset schemas

BENCH = S.BENCH_DIR


def _order_o25751(schema, x):
    """Each repository element's members in the properties order of the branch that its
    repository_system selects."""
    if not isinstance(x, dict) or not isinstance(x.get("_elements"), list):
        return x
    system = (x.get("_attributes") or {}).get("repository_system") if isinstance(x.get("_attributes"), dict) else None
    for b in schema["oneOf"]:
        if system in b["properties"]["_attributes"]["properties"]["repository_system"]["enum"]:
            order = list(b["properties"]["_elements"]["items"]["properties"])
            return {**x, "_elements": [member_ordered(e, order) for e in x["_elements"]]}
    return x


def _order_circleci(schema, x):
    """The top-level properties first; a job's own properties (steps, ...) before those of its
    executor choice (docker, ...)."""
    if not isinstance(x, dict):
        return x
    x = member_ordered(x, list(schema["properties"]))
    if not isinstance(x.get("jobs"), dict):
        return x
    order = list(schema["definitions"]["jobs"]["additionalProperties"]["properties"])
    return {**x, "jobs": {k: member_ordered(j, order) for k, j in x["jobs"].items()}}


DATASET = [("Github_trivial", "o25751", 6, _order_o25751), ("JsonSchemaStore", "circleciconfig", 5, _order_circleci)]


@pytest.mark.skipif(not os.path.isdir(BENCH), reason="JSONSchemaBench data not found")
@pytest.mark.parametrize("subset,oid,n_tests,order", DATASET)
def test_dataset_schema_compiles_and_judges_mutated_instances(subset, oid, n_tests, order):
    """The schema compiles (strict_mode=True, as bench.json_coverage); with strict_mode=False
    its instances and copies with one array changed are accepted iff jsonschema finds them
    valid (members in the order the grammar writes them)."""
    r = bench_row(f"{subset}---{oid}")
    strict = S.OursPipeline(strict_mode=True)
    _, st = strict.compile(r["schema"])
    assert st == "compiled", st
    loose = S.OursPipeline(strict_mode=False)
    c, st = loose.compile(r["schema"])
    assert st == "compiled", st
    # (2020-12: the converter applies $ref siblings; draft-04, which the schemas declare, ignores them)
    v = jsonschema.Draft202012Validator(r["schema"])
    assert len(r["tests"]) == n_tests
    judged = [0, 0]
    fillers = [1, "x", None, {}, {"image": "a"}]
    for t in r["tests"]:
        assert v.is_valid(t["data"]) == t["valid"]
        for x in mutations(t["data"], fillers)[:80]:
            valid = v.is_valid(x)
            acc = all(loose.accepts(c, s) for s in loose.variants(order(r["schema"], x)))
            assert acc == valid, (oid, valid, json.dumps(x)[:300])
            judged[valid] += 1
    assert judged[0] > 10 and judged[1] > 1, judged


@pytest.mark.skipif(not os.path.isdir(BENCH), reason="JSONSchemaBench data not found")
def test_github_medium_o62056_service_types_exact():
    """Github_medium---o62056 compiles; its oneOf of arrays of overlapping enums (the
    property that needed several contains) is exact on arrays of its enum values."""
    r = bench_row("Github_medium---o62056")
    _, st = S.OursPipeline(strict_mode=True).compile(r["schema"])
    assert st == "compiled", st
    sub = r["schema"]["properties"]["serviceTypes"]
    values = []
    for b in sub["oneOf"]:
        for e in b["items"]["enum"]:
            if e not in values:
                values.append(e)
    shared = [e for e in values if sum(e in b["items"]["enum"] for b in sub["oneOf"]) > 1]
    pool = shared[:3] + [e for e in values if e not in shared][:3] + [values[-1], 1]
    assert_exact(sub, arrays_over(pool, 3))
