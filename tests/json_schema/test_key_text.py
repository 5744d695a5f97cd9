"""The converter's cache keyed by the compile cache's JSON text (``_key_text``) gives the same
EBNF as the repr-keyed path, and keeps values that JSON tells apart apart."""

import json

from xgrammar2.json_schema import _cache, json_schema_to_ebnf


def _conv(schema, **kw):
    text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
    return json_schema_to_ebnf(schema, _key_text=text, **kw).ebnf


def test_same_ebnf_as_repr_keyed():
    schema = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 1},
                                               "b": {"$ref": "#/$defs/s"}}, "$defs": {"s": {"type": "string"}}}
    _cache.clear()
    by_text = _conv(schema)
    _cache.clear()
    assert by_text == json_schema_to_ebnf(schema).ebnf


def test_distinct_values_distinct_entries():
    _cache.clear()
    one = _conv({"const": 1})
    one_f = _conv({"const": 1.5})
    true = _conv({"const": True})
    assert len({one, one_f, true}) == 3
    assert _conv({"const": 1}) == one  # a hit


def test_id_keywords_still_indexed():
    schema = {"$id": "https://example.com/root.json", "type": "object",
              "properties": {"x": {"$ref": "https://example.com/root.json#/$defs/n"}},
              "$defs": {"n": {"type": "integer"}}}
    _cache.clear()
    assert _conv(schema) == json_schema_to_ebnf(schema).ebnf


def test_options_are_part_of_the_key():
    _cache.clear()
    a = _conv({"type": "array", "items": {"type": "integer"}})
    b = _conv({"type": "array", "items": {"type": "integer"}}, any_whitespace=False)
    assert a != b
