"""A schema refused because its conversion or its grammar recurses past Python's limit ("nested
too deeply") names where: the JSON pointer of the innermost schema object (or array/object
node) that recurses (the common prefix of the pointers unwound), and the applicator keyword
there, like every other refusal."""

from __future__ import annotations

import pytest

from js_helpers import bench_row as _row
from xgrammar2.json_schema import UnsupportedSchemaError, json_schema_to_ebnf


def test_conversion_too_deep_names_pointer_and_keyword():
    s = {"type": "integer"}
    for _ in range(400):
        s = {"allOf": [s]}
    with pytest.raises(UnsupportedSchemaError, match="nested too deeply") as ei:
        json_schema_to_ebnf(s)
    e = ei.value
    assert e.pointer.startswith("#/allOf/0/allOf/0/") and e.keyword == "allOf"
    assert str(e).startswith(f"unsupported keyword 'allOf' at {e.pointer}: nested too deeply")


@pytest.mark.parametrize("oid,defn", [("o37786", "colorSelector"), ("o37787", "fontSelector"),
                                      ("o37788", "textSelector")])
def test_grammar_too_deep_names_the_oneof_branch(oid, defn):
    """Github_easy's locale selectors: the grammar of the deferred negations of one oneOf
    branch recurses while it is written."""
    with pytest.raises(UnsupportedSchemaError, match="nested too deeply") as ei:
        json_schema_to_ebnf(_row(f"Github_easy---{oid}")["schema"])
    e = ei.value
    assert e.pointer == f"#/definitions/{defn}" and e.keyword == "oneOf"
    assert str(e).startswith(f"unsupported keyword 'oneOf' at #/definitions/{defn}: nested too deeply")
