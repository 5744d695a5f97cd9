"""xgrammar2.serving: the whitespace bound the engine plugins put into tool-call tags, and
errors that name the tool whose parameters failed."""

import json

import pytest

import xgrammar2 as xgr
from xgrammar2 import serving
from xgrammar2.testing import _is_grammar_accept_string

GOOD = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
# The shape of a BFCL live tool: an array whose enum holds strings (no value is both).
UNSAT = {"type": "object", "properties": {"units": {"type": "array", "enum": ["c", "f"]}}, "required": ["units"]}
BAD_REF = {"type": "object", "properties": {"units": {"$ref": "#/nope"}}, "required": ["units"]}


def _tools_schema(params):
    """The schema vLLM builds for tool_choice="required" (an array of {name, parameters})."""
    branches = [{"properties": {"name": {"type": "string", "enum": [f"t{i}"]}, "parameters": p},
                 "required": ["name", "parameters"]} for i, p in enumerate(params)]
    return {"type": "array", "minItems": 1, "items": {"type": "object", "anyOf": branches}}


def _tools_tag(params, begin='<tool_call>{{"name": "{name}", "arguments": ', trigger="<tool_call>"):
    return {"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": [trigger],
        "tags": [{"type": "tag", "begin": begin.format(name=f"t{i}"),
                  "content": {"type": "json_schema", "json_schema": p}, "end": "}</tool_call>"}
                 for i, p in enumerate(params)]}}


def _accepts(tag, text):
    return _is_grammar_accept_string(xgr.Grammar.from_structural_tag(tag), text)


CALL = '<tool_call>{"name": "t0", "arguments": {"city":%s"x"}}</tool_call>'


def test_bound_tag_whitespace_bounds_every_json_content():
    tag = _tools_tag([GOOD, GOOD])
    bounded = serving.bound_tag_whitespace(tag, 3, any_whitespace=True)
    assert all(t["content"]["max_whitespace_cnt"] == 3 for t in bounded["format"]["tags"])
    assert "max_whitespace_cnt" not in tag["format"]["tags"][0]["content"]  # caller's tag untouched
    assert _accepts(tag, CALL % (" " * 40))  # unbounded without the option
    assert _accepts(bounded, CALL % "   ")
    assert not _accepts(bounded, CALL % "    ")


def test_bound_tag_whitespace_without_any_whitespace_is_compact():
    bounded = serving.bound_tag_whitespace(_tools_tag([GOOD]), 16, any_whitespace=False)
    assert _accepts(bounded, CALL % "")
    assert not _accepts(bounded, CALL % " ")


def test_bound_tag_whitespace_keeps_explicit_bounds_and_xml_newlines():
    tag = _tools_tag([GOOD])
    tag["format"]["tags"][0]["content"]["max_whitespace_cnt"] = 7
    xml = {"type": "json_schema", "style": "qwen_xml", "json_schema": GOOD}
    tag["format"]["tags"].append({"type": "tag", "begin": "<function=t9>", "content": xml, "end": "</function>"})
    out = serving.bound_tag_whitespace(tag, 2, any_whitespace=False)
    assert out["format"]["tags"][0]["content"]["max_whitespace_cnt"] == 7
    assert out["format"]["tags"][1]["content"]["max_whitespace_cnt"] == 2  # XML: bound, not 0
    # The schema inside is data: a property named "type" with value "json_schema" is not a format.
    odd = {"type": "object", "properties": {"type": {"const": "json_schema"}, "json_schema": {}}}
    assert serving.bound_tag_whitespace(_tools_tag([odd]), 2)["format"]["tags"][0]["content"]["json_schema"] == odd


def test_bound_tag_whitespace_no_options_is_identity():
    tag = _tools_tag([GOOD])
    assert serving.bound_tag_whitespace(tag, None, any_whitespace=True) is tag
    assert serving.bound_tag_whitespace("not a dict", 4) == "not a dict"


@pytest.mark.parametrize("bad", [UNSAT, BAD_REF], ids=["unsatisfiable", "bad_ref"])
def test_tag_error_names_the_tool(bad):
    params = [GOOD] * 8 + [bad] + [GOOD] * 41  # 50 tools, the ninth is broken
    tag = _tools_tag(params)
    with pytest.raises(ValueError) as ei:
        xgr.Grammar.from_structural_tag(tag)
    assert "tags[8]" in str(ei.value)  # what the converter says on its own
    msg = serving.name_tool_in_error(json.dumps(tag), ei.value)
    assert msg is not None and msg.startswith("tools[8] (function 't8'): parameters"), msg
    if bad is BAD_REF:
        assert "#/properties/units" in msg and "does not exist" in msg, msg


def test_tag_error_names_the_tool_in_other_layouts():
    tag = _tools_tag([GOOD, BAD_REF], begin="<function={name}>", trigger="<function=")
    with pytest.raises(ValueError) as ei:
        xgr.Grammar.from_structural_tag(tag)
    assert serving.name_tool_in_error(tag, ei.value).startswith("tools[1] (function 't1'): parameters")
    # An error in a tag's own fields names the tool and the field.
    tag = _tools_tag([GOOD, GOOD], begin="<function={name}>")
    with pytest.raises(ValueError) as ei:
        xgr.Grammar.from_structural_tag(tag)
    msg = serving.name_tool_in_error(tag, ei.value)
    assert msg.startswith("tools[0] (function 't0'): $.format.tags[0].begin:"), msg


def test_schema_error_names_the_tool():
    schema = _tools_schema([GOOD, GOOD, BAD_REF])
    with pytest.raises(ValueError) as ei:
        xgr.Grammar.from_json_schema(schema)
    msg = serving.name_tool_in_error(schema, ei.value)
    assert msg is not None and msg.startswith("tools[2] (function 't2')"), msg
    assert "#/properties/units" in msg and "anyOf" not in msg, msg


def test_errors_outside_tools_are_not_renamed():
    with pytest.raises(ValueError) as ei:
        xgr.Grammar.from_json_schema(BAD_REF)
    assert serving.name_tool_in_error(BAD_REF, ei.value) is None
    assert serving.name_tool_in_error("{not json", ValueError("x")) is None


def test_log_unenforced_once(caplog):
    import logging

    log = logging.getLogger("test.xgrammar2.serving")
    schema = {"type": "string", "format": "semver-test-%d" % id(caplog)}
    compiled = xgr.GrammarCompiler(xgr.TokenizerInfo(["a", "b"])).compile_json_schema(schema)
    with caplog.at_level(logging.WARNING, logger="test.xgrammar2.serving"):
        assert serving.log_unenforced_once(log, compiled, schema)
        assert not serving.log_unenforced_once(log, compiled, json.dumps(schema, sort_keys=True))
    assert sum("not enforced" in r.getMessage() for r in caplog.records if r.name == log.name) == 1
