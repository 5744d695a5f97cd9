"""The BFCL AST checker and helpers of the end-to-end BFCL evaluation (e2e/bfcl_ast.py) on
hand-made cases and on the real ground truth; no vLLM, no server."""

import json
import sys
from pathlib import Path

import pytest

E2E = Path(__file__).resolve().parents[2] / "e2e"
if str(E2E) not in sys.path:
    sys.path.insert(0, str(E2E))

import bfcl_ast as B  # noqa: E402

AREA = {
    "name": "geometry.area", "description": "Area of a rectangle.",
    "parameters": {"type": "dict", "properties": {
        "width": {"type": "float", "description": "w"},
        "height": {"type": "integer", "description": "h"},
        "unit": {"type": "string", "description": "u"},
        "tags": {"type": "array", "items": {"type": "string"}, "description": "t"},
        "opts": {"type": "dict", "properties": {"round": {"type": "boolean"}}, "description": "o"},
    }, "required": ["width", "height"]},
}
AREA_GT = {"geometry.area": {"width": [2.5, 3.0], "height": [4], "unit": ["square meters", "m2", ""],
                             "tags": [["Room A", "big"], ""], "opts": [{"round": [True]}, ""]}}


def ok(args, name="geometry_area", func=AREA, gt=AREA_GT, category="simple"):
    return B.check(category, [func], [(name, json.dumps(args))], [gt])


def test_correct_call_passes():
    assert ok({"width": 2.5, "height": 4}) == (True, "")
    # the dotted name as given, too (both sides are compared with "." -> "_")
    assert ok({"width": 2.5, "height": 4}, name="geometry.area")[0]


def test_int_accepted_for_float():
    assert ok({"width": 3, "height": 4})[0]


def test_wrong_type_fails():
    good, why = ok({"width": 2.5, "height": "4"})
    assert not good and why.startswith("type_error")
    good, why = ok({"width": 2.5, "height": 4.0})  # float for an integer parameter
    assert not good and why.startswith("type_error")
    good, why = ok({"width": True, "height": 4})  # bool is not a number here
    assert not good and why.startswith("type_error")


def test_wrong_value_name_and_params():
    assert ok({"width": 2.0, "height": 4})[1].startswith("value_error")
    assert ok({"width": 2.5, "height": 4}, name="geometry_volume")[1].startswith("wrong_func_name")
    assert ok({"width": 2.5})[1].startswith("missing_required")
    assert ok({"width": 2.5, "height": 4, "color": "red"})[1].startswith("unexpected_param")


def test_string_normalisation():
    assert ok({"width": 2.5, "height": 4, "unit": "Square-Meters"})[0]
    assert ok({"width": 2.5, "height": 4, "unit": "M2."})[0]
    assert not ok({"width": 2.5, "height": 4, "unit": "feet"})[0]


def test_lists_and_dicts():
    assert ok({"width": 2.5, "height": 4, "tags": ["room a", "BIG"]})[0]
    assert not ok({"width": 2.5, "height": 4, "tags": ["big", "room a"]})[0]  # order matters
    assert not ok({"width": 2.5, "height": 4, "tags": ["room a", 3]})[0]  # item type
    assert ok({"width": 2.5, "height": 4, "opts": {"round": True}})[0]
    assert not ok({"width": 2.5, "height": 4, "opts": {"round": False}})[0]
    assert not ok({"width": 2.5, "height": 4, "opts": {"round": True, "x": 1}})[0]


def test_optional_parameter_needs_empty_marker():
    gt = {"geometry.area": {"width": [2.5], "height": [4], "unit": ["m2"]}}  # unit not optional
    assert not ok({"width": 2.5, "height": 4}, gt=gt)[0]
    assert ok({"width": 2.5, "height": 4, "unit": "m2"}, gt=gt)[0]


def test_count_and_parallel_order_free():
    f = {"name": "play", "parameters": {"type": "dict", "properties": {
        "artist": {"type": "string"}, "minutes": {"type": "integer"}}, "required": ["artist", "minutes"]}}
    gt = [{"play": {"artist": ["Taylor Swift"], "minutes": [20]}},
          {"play": {"artist": ["Maroon 5"], "minutes": [15]}}]
    a = ("play", json.dumps({"artist": "Taylor Swift", "minutes": 20}))
    b = ("play", json.dumps({"artist": "Maroon 5", "minutes": 15}))
    assert B.check("parallel", [f], [b, a], gt)[0]
    assert B.check("parallel", [f], [a, b], gt)[0]
    assert B.check("parallel", [f], [a], gt)[1].startswith("wrong_count")
    assert not B.check("parallel", [f], [a, a], gt)[0]  # one call cannot match two
    # an expected call that allows both values must not take the only call the other accepts
    loose = [{"play": {"artist": ["Maroon 5", "Taylor Swift"], "minutes": [15, 20]}}, gt[0]]
    assert B.check("parallel", [f], [a, b], loose)[0] and B.check("parallel", [f], [b, a], loose)[0]
    assert B.check("simple", [f], [a, a], gt[:1])[1].startswith("wrong_count")
    assert B.check("simple", [f], [], gt[:1])[1].startswith("wrong_count")


def test_multiple_picks_the_expected_function():
    other = {"name": "other", "parameters": {"type": "dict", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}
    assert B.check("multiple", [other, AREA], [("geometry_area", '{"width": 2.5, "height": 4}')], [AREA_GT])[0]
    assert not B.check("multiple", [other, AREA], [("other", '{"x": 1}')], [AREA_GT])[0]


def test_variable_of_ground_truth_type_accepted():
    # BFCL: a value of the ground truth's type (not the declared one) is taken as a variable
    f = {"name": "f", "parameters": {"type": "dict", "properties": {"flag": {"type": "string"}}, "required": ["flag"]}}
    gt = {"f": {"flag": [True]}}
    assert B.check("simple", [f], [("f", '{"flag": true}')], [gt])[0]
    assert not B.check("simple", [f], [("f", '{"flag": false}')], [gt])[0]


def test_schema_conversion_and_validity():
    tools = B.to_tools([AREA])
    params = tools[0]["function"]["parameters"]
    assert tools[0]["function"]["name"] == "geometry_area"
    assert params["type"] == "object" and params["properties"]["width"]["type"] == "number"
    assert params["properties"]["opts"]["type"] == "object"
    assert B.schema_valid([("geometry_area", '{"width": 1, "height": 2}')], tools) == (True, "")
    assert not B.schema_valid([("geometry_area", '{"width": 1}')], tools)[0]
    assert not B.schema_valid([("geometry_area", '{"width": 1, "height": 2.5}')], tools)[0]
    assert not B.schema_valid([("nope", "{}")], tools)[0]
    assert not B.schema_valid([], tools)[0]
    assert not B.schema_valid([("geometry_area", '{"width": 1, "height": 2')], tools)[0]
    assert not B.schema_valid([("geometry_area", '{"width": 1, "height": 2}')], tools, only="other")[0]


def test_parse_hermes():
    text = ('Sure.\n<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>\n'
            '<tool_call>{"name": "b", "arguments": {}}')
    assert B.parse_hermes(text) == [("a", '{"x": 1}'), ("b", "{}")]
    assert B.parse_hermes("no call here") == []
    assert B.parse_hermes('<tool_call>{"name": "a", "argu</tool_call>') == []


def test_sample_is_spread_and_deterministic():
    xs = list(range(10))
    assert B.sample(xs, 3) == [0, 3, 6]
    assert B.sample(xs, None) == xs and B.sample(xs, 20) == xs


def _first_allowed(v):
    for a in v:
        if a == "":
            continue
        if isinstance(a, dict):
            return {k: _first_allowed(x) for k, x in a.items() if _first_allowed(x) is not None}
        if isinstance(a, list) and a and isinstance(a[0], dict):
            return [{k: _first_allowed(x) for k, x in d.items() if _first_allowed(x) is not None} for d in a]
        return a
    return None


@pytest.mark.skipif(not B.BFCL_DIR.exists(), reason="../shared/data/bfcl not present")
@pytest.mark.parametrize("category", list(B.CATEGORY_FILES))
def test_ground_truth_calls_pass(category):
    """A call built from each test's first allowed values passes the checker, in reverse order for
    parallel; the same calls with one required value changed fail."""
    cases = B.load_category(category)
    assert len(cases) >= 200
    for c in cases:
        calls = []
        for gt in c["ground_truth"]:
            name, params = next(iter(gt.items()))
            args = {p: _first_allowed(v) for p, v in params.items() if _first_allowed(v) is not None}
            calls.append((B.oai_name(name), json.dumps(args)))
        if category == "parallel":
            calls.reverse()
        assert B.check(category, c["functions"], calls, c["ground_truth"]) == (True, ""), c["id"]
        name, args = calls[0]
        args = json.loads(args)
        required = next(f for f in c["functions"] if B.oai_name(f["name"]) == name)["parameters"]["required"]
        if required:
            args.pop(required[0], None)
            bad = [(name, json.dumps(args))] + calls[1:]
            assert not B.check(category, c["functions"], bad, c["ground_truth"])[0], c["id"]
