"""The emitter writes a union equal to one it wrote before (equal nodes built separately, by
negations and intersections) as that union's expression, once a conversion has emitted
EQUAL_SUBS_AFTER unions (issue 36: Github_medium o3626's exclusive oneOf of recursive queries
emitted 3,800 objects, most of them equal). The grammar text is the one written without the
lookup; a union whose emission said something (a warning naming its pointer) is written again
where it recurs, and where emitting may warn (lenient mode, excludes) nothing is looked up, so
each place is named."""

import json

import pytest

from js_helpers import bench_row
from xgrammar2.json_schema import emit, json_schema_to_ebnf


def _ebnf(schema, after, monkeypatch, **kw):
    monkeypatch.setattr(emit, "EQUAL_SUBS_AFTER", after)
    calls = []
    real = emit.Emitter.object

    def counting(self, *a, **k):
        calls.append(1)
        return real(self, *a, **k)

    monkeypatch.setattr(emit.Emitter, "object", counting)
    text = json.dumps(schema) if not isinstance(schema, str) else schema
    res = json_schema_to_ebnf(text, **kw)
    monkeypatch.setattr(emit.Emitter, "object", real)
    return res, len(calls)


@pytest.mark.parametrize("sid", ["Github_medium---o3626", "WashingtonPost---wp_1_Normalized",
                                 "JsonSchemaStore---cityjson.min.schema"])
def test_the_grammar_is_the_one_written_without_the_lookup(sid, monkeypatch):
    schema = bench_row(sid)["schema"]
    off, n_off = _ebnf(schema, 10 ** 9, monkeypatch)
    on, n_on = _ebnf(schema, 0, monkeypatch)
    assert on.ebnf == off.ebnf
    assert n_on <= n_off
    if sid == "Github_medium---o3626":
        assert n_on * 2 < n_off, (n_on, n_off)


def test_a_union_that_warned_is_written_again_at_each_place(monkeypatch):
    big = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(12)}}
    schema = {"type": "object", "properties": {"a": big, "b": json.loads(json.dumps(big))}}
    res, _ = _ebnf(schema, 0, monkeypatch, any_order=True, lenient=True)
    said = [w for w in res.warnings if "any_order" in w]
    assert any(w.startswith("#/properties/a") for w in said), said
    assert any(w.startswith("#/properties/b") for w in said), said
