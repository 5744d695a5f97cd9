"""A union's enum alternatives are one enum (ir._merge_enums).

``anyOf`` of single-value ``enum``/``const`` branches is how many schemas list names with a
description each (JsonSchemaStore service-schema: 238 Azure Pipelines task names). As 238
alternatives, every intersection with the union tested each against every node of the other
side (340k node intersections, 0.24 s of that schema's conversion), and past 256 of them the
union was refused."""

from __future__ import annotations

from js_helpers import assert_exact, check
from xgrammar2.json_schema import ir


def test_any_of_300_consts_compiles_and_accepts_exactly_them():
    schema = {"anyOf": [{"const": f"t{i}"} for i in range(300)]}
    check(schema, good=['"t0"', '"t150"', '"t299"'], bad=['"t300"', '"t"', '""', 0, None])


def test_any_of_enums_with_other_types_keeps_every_value_once_and_every_other_branch():
    schema = {"anyOf": [{"const": 1}, {"type": "string", "maxLength": 1}, {"enum": [1.0, "abc", 2, None]},
                        {"const": "abc"}, {"type": "boolean"}, {"enum": [[1, 2], {"k": 3}]}]}
    instances = [1, 1.0, 2, 3, "a", "", "ab", "abc", "abcd", None, True, False, [1, 2], [2, 1], {"k": 3}, {"k": 4},
                 {}, []]
    assert_exact(schema, instances)


def test_union_keeps_the_first_enum_position_and_each_json_value_once():
    u = ir.union((ir.Enum(["a"]),), (ir.STRING, ir.Enum([1, "a"])), (ir.NULL, ir.Enum([1.0, True])))
    assert [n.kind for n in u] == ["enum", "string", "null"]
    assert u[0].values == ("a", 1, True)  # (1.0 is JSON-equal to 1)
    assert u[1] is ir.STRING and u[2] is ir.NULL


def test_merged_enum_intersects_property_schemas_like_the_branches():
    # the service-schema shape: a required property whose schema is an anyOf of consts,
    # intersected with a pattern-constrained string from the other side of an allOf
    schema = {"allOf": [
        {"type": "object", "properties": {"task": {"anyOf": [{"const": f"T{i}@1"} for i in range(40)]}},
         "required": ["task"]},
        {"type": "object", "properties": {"task": {"type": "string", "pattern": "^T[0-9]*[05]@"}}}]}
    good = [{"task": f"T{i}@1"} for i in (0, 5, 10, 35)]
    bad = [{"task": f"T{i}@1"} for i in (1, 4, 39)] + [{"task": "T40@1"}, {}]
    check(schema, good=good, bad=bad)
