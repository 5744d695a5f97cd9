"""Real vLLM servers with default xgrammar2 options: whitespace bounded in every JSON context
(tool-call tags included), ``format`` as an annotation, errors that name the tool.

Two servers on the random-weight tiny Llama: ``tiny_server`` (default options, hermes tool
parser, strict tool calling: vLLM builds structural tags with their own ``json_schema``
contents for tools) and ``compact_server`` (the same with
``--structured-outputs-config.disable_any_whitespace true``). A random-weight model picks
whitespace whenever the grammar allows it, so an unbounded JSON context runs to max_tokens:
every request here must stop by itself with a valid output.
"""

from __future__ import annotations

import json
import re

import pytest

from e2e_helpers import HAVE_VLLM, PERSON, SKIP_REASON, TINY_SERVER_ARGS, client, start_server

pytestmark = pytest.mark.skipif(not HAVE_VLLM, reason=SKIP_REASON)

MSG = [{"role": "user", "content": "Reply in the requested format."}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {"city": {"enum": ["Paris", "Oslo", "Lima"]},
                           "days": {"type": "integer", "minimum": 1, "maximum": 7}},
            "required": ["city", "days"],
            "additionalProperties": False,
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "strict": True,
        "parameters": {"type": "object", "properties": {"tz": {"enum": ["UTC", "CET"]}},
                       "required": ["tz"], "additionalProperties": False},
    },
}


@pytest.fixture(scope="module")
def compact_server():
    import models

    srv = start_server(str(models.build_tiny()), "tiny",
                       extra_args=TINY_SERVER_ARGS + ["--structured-outputs-config.disable_any_whitespace", "true"])
    yield srv
    srv.stop()


@pytest.fixture(params=["default", "compact"])
def server(request, tiny_server):
    return tiny_server if request.param == "default" else request.getfixturevalue("compact_server")


def _chat(srv, n=1, max_tokens=300, seed=0, **kw):
    return client(srv).chat.completions.create(model="tiny", messages=MSG, max_tokens=max_tokens, n=n,
                                               seed=seed, **kw)


def test_default_options_bound_whitespace(tiny_server):
    _chat(tiny_server, max_tokens=5, extra_body={"structured_outputs": {"choice": ["ok"]}})  # builds the backend
    assert "max_whitespace_cnt=16" in tiny_server.log_text()


def test_json_schema_stops(server):
    import jsonschema

    r = _chat(server, n=4, response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}})
    for ch in r.choices:
        assert ch.finish_reason == "stop", ch
        jsonschema.validate(json.loads(ch.message.content), PERSON)


def _longest_whitespace_run(text):
    return max((len(m) for m in re.findall(r"[ \t\n\r]+", text)), default=0)


def test_json_object_whitespace_is_bounded(server, request):
    """Any JSON object: its strings are unbounded, so a random model may still be inside one
    at max_tokens; what must not happen is a whitespace run past the bound."""
    bound = 0 if "compact" in request.node.name else 16
    r = _chat(server, n=4, max_tokens=200, response_format={"type": "json_object"})
    for ch in r.choices:
        text = ch.message.content
        if ch.finish_reason == "stop":
            assert isinstance(json.loads(text), dict)
        assert _longest_whitespace_run(_outside_strings(text)) <= bound, text


def _outside_strings(text):
    """``text`` with the contents of its JSON strings removed (whitespace there is data)."""
    out, in_str, esc = [], False, False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
                out.append(ch)
        else:
            out.append(ch)
            if ch == '"':
                in_str = True
    return "".join(out)


@pytest.mark.parametrize("tool_choice", ["required", "named", "auto"])
def test_tool_calls_stop(server, tool_choice):
    import jsonschema

    choice = {"type": "function", "function": {"name": "get_time"}} if tool_choice == "named" else tool_choice
    r = _chat(server, n=3, max_tokens=400, tools=[WEATHER, TIME], tool_choice=choice)
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER, TIME)}
    for ch in r.choices:
        if tool_choice == "auto" and not ch.message.tool_calls:
            continue  # free text is allowed before a call; the constraint binds inside calls
        assert ch.finish_reason in ("stop", "tool_calls"), ch
        assert ch.message.tool_calls, ch
        for call in ch.message.tool_calls:
            args = json.loads(call.function.arguments)
            jsonschema.validate(args, schemas[call.function.name])
            if tool_choice == "named":
                assert call.function.name == "get_time"


@pytest.mark.parametrize("fmt", ["int32", "int64", "float", "double", "byte", "binary", "password", "semver"])
def test_openapi_and_unknown_formats_compile(tiny_server, fmt):
    typ = {"int32": "integer", "int64": "integer", "float": "number", "double": "number"}.get(fmt, "string")
    v = {"type": typ, "format": fmt}
    if typ == "string":
        v["maxLength"] = 12  # a random model rarely closes an unbounded string
    schema = {"type": "object", "properties": {"v": v}, "required": ["v"], "additionalProperties": False}
    r = _chat(tiny_server, n=2, response_format={"type": "json_schema", "json_schema": {"name": "f", "schema": schema}})
    for ch in r.choices:
        assert ch.finish_reason == "stop", ch
        v = json.loads(ch.message.content)["v"]
        if fmt == "int32":
            assert isinstance(v, int) and -2**31 <= v < 2**31
        if fmt == "byte":
            import base64

            base64.b64decode(v, validate=True)
    if fmt == "semver":
        assert "format 'semver' is not enforced" in tiny_server.log_text()


@pytest.mark.parametrize("kind", ["required", "auto"])
def test_broken_tool_is_a_400_naming_it(tiny_server, kind):
    import openai

    broken = {"type": "function", "function": {
        "name": "set_units", "strict": True,
        "parameters": {"type": "object", "properties": {"units": {"type": "array", "enum": ["c", "f"]}},
                       "required": ["units"]}}}
    tools = [TIME, WEATHER, broken]
    with pytest.raises(openai.BadRequestError) as ei:
        _chat(tiny_server, tools=tools, tool_choice=kind)
    msg = str(ei.value)
    assert ei.value.status_code == 400
    assert "tools[2]" in msg and "set_units" in msg, msg
    assert tiny_server.healthy()
