"""The intersection of two $refs whose rule already includes the other's definitions is that
rule (A∩B∩B = A∩B: Converter._conjuncts), not a new rule whose body multiplies the
alternatives of A∩B by those of B again.

Github_ultra---o69206 (CWL): CommandInputRecordSchema's fields are CommandInputType, merged
through allOf chains with InputRecordField's CwlType, so "type" meets CwlType ∩
(CommandInputType ∩ CwlType) ∩ CwlType ...: refused before ("intersection has too many
alternatives"). Oracle: ``jsonschema`` on a grid of CWL type expressions, valid and not."""

from __future__ import annotations

import itertools

from js_helpers import bench_row as _row
from test_oneof_deferred_negation import _assert_agree, _sub

TYPES = [
    "File", "int", "anything", 1, None, True, {}, {"type": "File"}, {"type": "bogus"}, {"type": 1},
    ["File", "int"], ["File", 1], [{"type": "File"}], [{"type": "bogus"}],
    {"items": "File", "type": "array"}, {"items": 1, "type": "array"}, {"type": "array"},
    {"items": {"items": "int", "type": "array"}, "type": "array"},
    {"items": {"type": "bogus"}, "type": "array"},
    {"type": "enum", "symbols": ["a", "b"]}, {"type": "enum", "symbols": [1]}, {"type": "enum"},
    {"fields": [{"type": "int", "name": "a"}], "type": "record"},
    {"fields": [{"type": 1, "name": "a"}], "type": "record"},
    {"fields": [{"type": {"items": "File", "type": "array"}, "name": "a"}], "type": "record"},
    {"fields": [{"type": {"type": "bogus"}, "name": "a"}], "type": "record"},
    {"fields": [], "type": "record"}, {"type": "record"}, {"fields": 1, "type": "record"},
]


def test_cwl_command_input_parameter_type():
    schema = _sub(_row("Github_ultra---o69206")["schema"], "#/definitions/CommandInputParameter")
    inst = [{"type": t} for t in TYPES]
    for t, b in itertools.product(TYPES[:6], ({"loadContents": True}, {"loadContents": 1}, {"position": 2})):
        inst.append({"inputBinding": b, "type": t})
    inst += [{}, {"inputBinding": 1}, 5]
    _assert_agree(schema, inst, orders=(["inputBinding", "type"],))


def test_cwl_command_input_record_schema_fields():
    schema = _sub(_row("Github_ultra---o69206")["schema"], "#/definitions/CommandInputRecordSchema")
    inst = [{"fields": [t], "type": "record"} for t in TYPES]
    inst += [{"fields": [t, u], "type": "record"} for t, u in itertools.product(TYPES[:8], repeat=2)]
    inst += [{"type": "record"}, {"type": "enum"}, {}]
    _assert_agree(schema, inst, orders=(["fields", "type"],))
