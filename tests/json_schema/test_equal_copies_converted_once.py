"""Equal copies of a schema with oneOf or not are converted once (issue 36: bundled
schemas inline one definition at many places; JsonSchemaStore cityjson's 340 oneOfs are 12
distinct, and each copy was made exclusive by negation again). The copy's union is the first
one's; what the first said (lenient drops, unsatisfiability notes) is said again at the copy's
pointer; copies that differ in member order, or in 1 / 1.0 / true, are not equal."""

import itertools
import json

from js_helpers import accepts, assert_exact

from xgrammar2.json_schema import json_schema_to_ebnf, one_of
from xgrammar2.json_schema.convert import Converter

_SHAPE = {"oneOf": [{"type": "object", "properties": {"v": {"type": "integer"}}, "required": ["v"]},
                    {"type": "object", "properties": {"v": {"type": "integer", "minimum": 0}, "w": {"type": "null"}},
                     "required": ["w"]}]}


def _copies(n):
    return {"type": "object", "properties": {f"p{i}": json.loads(json.dumps(_SHAPE)) for i in range(n)}}


def _grid(n):
    vals = [{"v": -1}, {"v": 2}, {"v": 2, "w": None}, {"v": -1, "w": None}, {"w": None}, {}]
    out = []
    for a, b in itertools.product(vals, repeat=2):
        out.append({"p0": a, "p1": b} if n > 1 else {"p0": a})
    return out


def test_equal_copies_run_one_exclusive_oneof(monkeypatch):
    calls = []
    real = one_of.one_of

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(one_of, "one_of", counting)
    json_schema_to_ebnf(json.dumps(_copies(6)))
    assert len(calls) == 1, calls


def test_equal_copies_keep_every_verdict():
    assert_exact(_copies(2), _grid(2))


def test_member_order_and_number_kinds_keep_copies_apart():
    # (the grammar writes named properties in the schema's order: a copy with its members in
    # another order is another grammar)
    a = {"oneOf": [{"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "string"}},
                    "required": ["x", "y"], "additionalProperties": False}, {"type": "null"}]}
    b = {"oneOf": [{"type": "object", "properties": {"y": {"type": "string"}, "x": {"type": "integer"}},
                    "required": ["x", "y"], "additionalProperties": False}, {"type": "null"}]}
    schema = {"type": "object", "properties": {"a": a, "b": b}, "required": ["a", "b"],
              "additionalProperties": False}
    assert accepts(schema, '{"a": {"x": 1, "y": "s"}, "b": {"y": "s", "x": 1}}', strict_mode=False)
    assert not accepts(schema, '{"a": {"y": "s", "x": 1}, "b": {"y": "s", "x": 1}}', strict_mode=False)
    kinds = {"type": "object", "properties": {
        "t": {"oneOf": [{"const": True}, {"type": "string"}]},
        "o": {"oneOf": [{"const": 1}, {"type": "string"}]},
        "f": {"oneOf": [{"const": 1.0}, {"type": "string"}]}}, "additionalProperties": False}
    assert_exact(kinds, [{"t": True}, {"t": 1}, {"o": 1}, {"o": True}, {"f": 1}, {"f": True}, {"o": "s"}])


def test_what_a_copy_says_is_said_at_its_pointer():
    part = {"oneOf": [{"type": "string", "format": "no-such-format"}, {"type": "integer"}]}
    schema = {"type": "object", "properties": {"a": part, "b": json.loads(json.dumps(part))}}
    warns = json_schema_to_ebnf(json.dumps(schema)).warnings
    assert any(w.startswith("#/properties/a/oneOf/0") and "no-such-format" in w for w in warns), warns
    assert any(w.startswith("#/properties/b/oneOf/0") and "no-such-format" in w for w in warns), warns
    unsat = {"oneOf": [{"type": "array", "minItems": 3, "maxItems": 2}, {"type": "integer"}]}
    schema = {"type": "object", "properties": {"a": unsat, "b": json.loads(json.dumps(unsat))},
              "required": ["a", "b"]}
    conv = Converter(schema)
    conv.convert(schema)
    notes = conv.unsat_notes
    assert any(n.startswith("#/properties/a/") for n in notes), notes
    assert any(n.startswith("#/properties/b/") for n in notes), notes


def test_lenient_mode_names_every_copy_the_emitter_warns_about():
    """Where the emitter may warn about a node (lenient mode, excludes), copies are not shared:
    its warning names the node's pointer, which would be the first copy's."""
    big = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(12)}}
    part = {"oneOf": [big, {"type": "null"}]}
    schema = {"type": "object", "properties": {"a": part, "b": json.loads(json.dumps(part))}}
    warns = json_schema_to_ebnf(json.dumps(schema), any_order=True, lenient=True).warnings
    said = [w for w in warns if "any_order" in w]
    assert any(w.startswith("#/properties/a/") for w in said), said
    assert any(w.startswith("#/properties/b/") for w in said), said
