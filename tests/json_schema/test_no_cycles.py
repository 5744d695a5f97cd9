"""A conversion is freed by reference counting: it leaves no reference cycles for the
cyclic collector (which, in a serving process, walked the whole heap; gc_pause.py)."""

import gc

from xgrammar2.json_schema import _cache, json_schema_to_ebnf

SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": 1, "maximum": 99999},
        "price": {"type": "number", "minimum": -1e6, "maximum": 1e6, "multipleOf": 0.01},
        "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3,5}$"},
        "name": {"type": "string", "minLength": 2, "maxLength": 12},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True, "maxItems": 3},
        "pts": {"type": "array", "prefixItems": [{"type": "number"}], "contains": {"const": 0},
                "maxContains": 2},
        "kind": {"oneOf": [{"const": "x"}, {"const": "y"}]},
        "child": {"$ref": "#"},
    },
    "required": ["id", "name"],
    "additionalProperties": {"type": "boolean"},
    "patternProperties": {"^x-": {"type": "string"}},
}


def test_conversion_leaves_no_cyclic_garbage():
    json_schema_to_ebnf(SCHEMA)  # warm module-level caches
    for opts in ({}, {"any_whitespace": False}, {"any_order": True}):
        _cache.clear()
        gc.collect()
        was = gc.isenabled()
        gc.disable()
        try:
            assert json_schema_to_ebnf(SCHEMA, **opts).ebnf
            found = gc.collect()
        finally:
            if was:
                gc.enable()
        assert found == 0, f"{found} objects in reference cycles after a conversion ({opts})"
