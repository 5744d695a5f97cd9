"""An exclusive oneOf whose branches are open objects sharing entries: a branch minus another is
negated within it (ir._negate_closed_obj_within: a required key missing, or a property's value
outside its entry), skipping what the branch already implies (a key it requires, an entry equal
to its own), so a large definition both share is never negated; and, while deferred negation
is on, the negation of a definition too large to build in place (past ir.MAX_ALTS) is the rule
"any value minus the definition" (deferred_negation.py) instead of a refusal.

Github_easy---o78062 (a competency framework): competency = named ∩ oneOf(competencies:
[competency], abilities: [ability]), recursive; refused before ("intersection has too many
alternatives"). Oracle: ``jsonschema`` on its own test instances and on a grid that nests
competencies matching one branch, both branches (rejected) and none."""

from __future__ import annotations

import itertools
import json

import jsonschema

from js_engine import ENGINE
from js_helpers import bench_row as _row
from js_helpers import grammar_for
from test_oneof_deferred_negation import _sub

AB = {"name": "a", "level": "l"}
BASE = {"description": "d", "scale": {"name": "s", "levels": ["l"]}}


def _competencies(depth):
    out = [{"name": "c", "competencies": []}, {"name": "c", "abilities": [AB]},
           {"name": "c", "competencies": [], "abilities": []},  # both branches
           {"name": "c"}, {"name": "c", "abilities": [{"name": "a"}]}, 1, {"competencies": []}]
    if depth:
        inner = _competencies(depth - 1)
        out += [{"name": "c", "competencies": [x]} for x in inner]
        out += [{"name": "c", "competencies": [x], "abilities": [AB]} for x in inner[:3]]
    return out


def test_competency_grid():
    schema = _row("Github_easy---o78062")["schema"]
    inst = [{**c, **BASE} for c in _competencies(2) if isinstance(c, dict)]
    inst += [{"name": "c", "competencies": [], **BASE, "extra": 1}, {"name": "c", "abilities": []}, {}]
    for a, b in itertools.product(_competencies(0), repeat=2):
        inst.append({"name": "c", "competencies": [a, b], **BASE})
    _assert_exact_any_order(schema, inst)


def _assert_exact_any_order(schema, instances):
    """Verdicts equal to jsonschema's (members in any order: ``any_order=True``, exact for
    objects of at most 10 named properties, as here), on valid and invalid instances."""
    cg = grammar_for(schema, strict_mode=False, any_order=True)
    v = jsonschema.validators.validator_for(schema)(schema)
    wrong = [x for x in instances if v.is_valid(x) != ENGINE.accepts(cg, json.dumps(x))]
    assert not wrong, [json.dumps(x)[:300] for x in wrong[:6]]
    n_valid = sum(v.is_valid(x) for x in instances)
    assert 0 < n_valid < len(instances)


def test_competency_bench_instances():
    row = _row("Github_easy---o78062")
    cg = grammar_for(row["schema"], strict_mode=False, any_order=True)
    v = jsonschema.validators.validator_for(row["schema"])(row["schema"])
    verdicts = [(v.is_valid(t["data"]), ENGINE.accepts(cg, json.dumps(t["data"]))) for t in row["tests"]]
    assert verdicts and all(a == b for a, b in verdicts), verdicts
    assert any(a for a, _ in verdicts) and not all(a for a, _ in verdicts)


def test_command_build_or_buy_grid():
    """Github_medium---o683: command = oneOf(Build: required build, Buy: required buy with
    BuyObject = oneOf(Spaceship, Acres)), open objects; refused before ("intersection has too
    many alternatives"). Commands with both keys, neither, and invalid members."""
    schema = _sub(_row("Github_medium---o683")["schema"], "#/properties/command")
    builds = [{}, {"building": "b", "maxCost": 3}, {"maxCost": "x"}, 1]
    buys = [{"spaceship": "s"}, {"acres": 2, "location": "l"}, {"spaceship": "s", "acres": 2, "location": "l"},
            {"location": "l"}, {"spaceship": 1}, {"acres": 2, "location": "l", "exactCost": "x"}, []]
    inst = [{"build": b} for b in builds] + [{"buy": b} for b in buys]
    inst += [{"build": a, "buy": b} for a, b in itertools.product(builds, buys)]
    inst += [{}, {"other": 1}, 1, {"build": {}, "x": 1}]
    _assert_exact_any_order(schema, inst)
