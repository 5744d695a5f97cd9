"""The work a oneOf may spend proving or making its branches exclusive is bounded (a refusal of
an inexpressible oneOf is quick), and an object intersection whose required keys share no value
stops before intersecting its other keys. Counted in ``ir.intersect_node`` calls, not time."""

import itertools
import string

import pytest

from xgrammar2.json_schema import UnsupportedSchemaError, ir, json_schema_to_ebnf


def _count_calls(monkeypatch, name):
    """Counts the calls of ``ir.<name>`` (a one-element list) while the test runs."""
    calls = [0]
    orig = getattr(ir, name)

    def counted(*args):
        calls[0] += 1
        return orig(*args)

    monkeypatch.setattr(ir, name, counted)
    return calls


@pytest.fixture
def count_nodes(monkeypatch):
    return _count_calls(monkeypatch, "intersect_node")


def _codes(n, salt):
    pairs = ("".join(p) for p in itertools.product(string.ascii_uppercase, repeat=2))
    return [salt + p for p in itertools.islice(pairs, n)]


def _address_one_of(tag):
    # Github_medium---o35868's shape: nine countries with optional country / state / postal
    # code, and one branch of all other countries; nothing required, so the branches overlap
    # ({} is in every one) and must be negated
    countries = _codes(230, tag + "C")
    branches = [{"properties": {"country": {"type": "string", "enum": [countries[i]]},
                                "state": {"type": "string", "enum": _codes(n, tag)},
                                "postalCode": {"type": "string", "maxLength": 10}}}
                for i, n in enumerate([27, 110, 32, 63, 13, 35, 34, 8, 26])]
    branches.append({"properties": {"country": {"type": "string", "enum": countries},
                                    "postalCode": {"type": "string", "maxLength": 10}}})
    return {"type": "object", "properties": {"street": {"type": "string", "maxLength": 50}},
            "oneOf": branches}


def test_inexpressible_one_of_is_refused_within_its_budget(count_nodes):
    with pytest.raises(UnsupportedSchemaError, match="oneOf"):
        json_schema_to_ebnf(_address_one_of("w"))
    # without the budget over enum values this shape ran ~90,000 node intersections (1.3 s on
    # the real schema); the budget (100,000 units, an enum's values counting one each) stops it
    assert count_nodes[0] < 20_000, count_nodes[0]


def test_one_of_budget_is_what_refuses(monkeypatch):
    from xgrammar2.json_schema import one_of

    monkeypatch.setattr(one_of, "ONE_OF_BUDGET", 10 ** 9)
    # with an unbounded budget the same shape still fails, later, on too many alternatives:
    # the budget changes when the refusal comes, not whether
    with pytest.raises(UnsupportedSchemaError, match="oneOf"):
        json_schema_to_ebnf(_address_one_of("x"))


def test_required_discriminator_stops_object_intersection(count_nodes):
    # cityjson's shape: many object kinds told apart by a required "type" const, each with
    # big optional members; checking that two kinds are disjoint needs only "type"
    def big(i):  # (each kind's own, overlapping the others': their intersections are real work)
        return {"type": "object", "properties": {f"p{k}": {"type": "string", "enum": _codes(60 + i, f"v{k}")}
                                                 for k in range(6)}}

    kinds = [{"type": "object", "required": ["type"],
              "properties": {"type": {"const": f"Kind{i}"}, "attributes": big(i), "extra": big(i + 1)}}
             for i in range(12)]
    out = json_schema_to_ebnf({"oneOf": kinds})
    assert "Kind11" in out.ebnf if hasattr(out, "ebnf") else "Kind11" in str(out)
    # pairwise disjointness: 66 pairs, each settled by the "type" key: 276 node intersections;
    # intersecting "attributes" and "extra" of every pair as well costs 1,200
    assert count_nodes[0] < 600, count_nodes[0]


def test_refused_one_of_stops_compacting_within_its_budget(monkeypatch):
    """Github_trivial---o63308's oneOf cannot be made exclusive; its products kept passing MAX_ALTS
    and were compacted for free (109,510 object pairs merged or not, 0.75 s to the refusal). With
    compaction charged to the oneOf's budget the same refusal (keyword, pointer) comes after a third
    of those pairs."""
    from js_helpers import bench_row

    calls = _count_calls(monkeypatch, "_merge_pair")
    with pytest.raises(UnsupportedSchemaError) as e:
        json_schema_to_ebnf(bench_row("Github_trivial---o63308")["schema"])
    assert "'oneOf' at #/oneOf/7/properties/geometry" in str(e.value)
    assert "cannot be made exclusive" in str(e.value)
    assert 0 < calls[0] < 50_000, calls[0]
