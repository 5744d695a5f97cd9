"""Engine-level faults against a real vLLM server (the session's tiny-model server, started
once): every bad-input class gets an HTTP 4xx whose message names the problem, while good
requests sent at the same time complete correctly, and the server keeps serving. A highly
ambiguous grammar that hits the parser work limit during decoding must end its own request
only, never the engine.

The classes and what they return are listed in docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from e2e_helpers import HAVE_VLLM, PERSON, SKIP_REASON, client

pytestmark = pytest.mark.skipif(not HAVE_VLLM, reason=SKIP_REASON)

MSG = [{"role": "user", "content": "Reply in the requested format."}]


def _schema(s):
    return {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": s}}}


def _so(**kw):
    return {"extra_body": {"structured_outputs": kw}}


def _deep(depth):
    return json.loads('{"type":"array","items":' * depth + "{}" + "}" * depth)


WIDE = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(5000)}}
FUNC = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}

# (id, request kwargs, substrings the error message must contain)
BAD = [
    # invalid schemas
    ("schema-unknown-type", _schema({"type": "strin"}), ["unknown type name 'strin'"]),
    ("schema-bad-required", _schema({"type": "object", "required": "name"}), ["required"]),
    ("schema-negative-length", _schema({"type": "string", "minLength": -1}), ["minLength"]),
    ("schema-missing-ref", _schema({"$ref": "#/$defs/nope"}), ["does not exist"]),
    ("schema-not-json", _so(json="{\"type\": "), ["not valid JSON"]),
    # keywords the converter refuses (it never silently approximates)
    ("schema-backreference", _schema({"type": "string", "pattern": "(a)\\1"}), ["Backreference", "not supported", "pattern"]),
    ("schema-lookaround", _schema({"type": "string", "pattern": "(?<=a)b"}), ["Lookbehind assertion (?<=...) is not supported", "pattern"]),
    ("schema-recursive-ref", _schema({"$recursiveRef": "#"}), ["$recursiveRef"]),
    ("schema-unique-object-items", _schema({"type": "array", "items": {"type": "object"}, "uniqueItems": True,
                                            "minItems": 2}), ["uniqueItems", "minItems 2"]),
    # huge schemas
    ("schema-nested-400", _schema(_deep(400)), ["nested too deeply"]),  # vLLM's own check (64)
    ("schema-5000-properties", _schema(WIDE), ["5000 properties"]),
    # malformed structural tags: vLLM's own request model refuses them first (in
    # response_format and in structured_outputs.structural_tag alike), with a generic message
    ("tag-begin-not-string", {"response_format": {"type": "structural_tag", "format": {
        "type": "tag", "begin": 5, "content": {"type": "const_string", "value": "x"}, "end": "y"}}},
     ["structural_tag"]),
    ("tag-unknown-format", {"response_format": {"type": "structural_tag", "format": {"type": "nope"}}},
     ["structural_tag"]),
    ("so-tag-begin-not-string", _so(structural_tag=json.dumps({"type": "structural_tag", "format": {
        "type": "tag", "begin": 5, "content": {"type": "const_string", "value": "x"}, "end": "y"}})),
     ["structural_tag"]),
    ("so-tag-unknown-format", _so(structural_tag=json.dumps({"type": "structural_tag", "format": {
        "type": "nope"}})), ["structural_tag"]),
    ("so-tag-bad-inner-schema", _so(structural_tag=json.dumps({"type": "structural_tag", "format": {
        "type": "json_schema", "json_schema": {"type": "strin"}}})), ["structural_tag"]),
    ("so-tag-empty-sequence", _so(structural_tag=json.dumps({"type": "structural_tag", "format": {
        "type": "sequence", "elements": []}})), ["structural_tag"]),
    ("so-tag-not-json", _so(structural_tag='{"type": "structural_tag", "format": '), ["structural_tag"]),
    ("so-tag-nested-300", _so(structural_tag='{"type":"structural_tag","format":'
                              + '{"type":"optional","content":' * 300 + '{"type":"const_string","value":"a"}'
                              + "}" * 300 + "}"), ["nested too deeply"]),
    # bad EBNF / regex / choice
    ("ebnf-syntax", _so(grammar="root ::= (\"a\""), ["EBNF", "line 1"]),
    ("ebnf-undefined-rule", _so(grammar="root ::= foo"), ["foo"]),
    ("ebnf-nesting-2000", _so(grammar="root ::= " + "(" * 2000 + '"a"' + ")" * 2000), ["nesting"]),
    ("regex-unbalanced", _so(regex="(ab"), ["parenthesis is not closed"]),
    ("regex-huge-repeat", _so(regex="a{99999999999}"), ["too large"]),
    ("regex-nesting-2000", _so(regex="(" * 2000 + "a" + ")" * 2000), ["nesting"]),
    ("regex-lookahead", _so(regex="a(?=b)"), ["(?="]),
    ("choice-empty", _so(choice=[]), []),
    # a strict tool whose parameters are not a usable schema (a non-strict tool's arguments
    # are any JSON object, as upstream: its schema is not compiled)
    ("tool-bad-parameters", {"tools": [{"type": "function", "function": {
        "name": "f", "strict": True,
        "parameters": {"type": "object", "properties": {"a": {"type": "strin"}}}}}],
        "tool_choice": "required"}, ["strin"]),
]


async def _good(c, i):
    """A request that must complete correctly whatever else the server is doing."""
    import jsonschema

    r = await c.chat.completions.create(
        model="tiny", messages=MSG, max_tokens=300, seed=i,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}})
    ch = r.choices[0]
    assert ch.finish_reason == "stop", ch
    jsonschema.validate(json.loads(ch.message.content), PERSON)
    return ch.message.content


async def _bad(c, kw):
    import openai

    try:
        await c.chat.completions.create(model="tiny", messages=MSG, max_tokens=20, **kw)
    except openai.APIStatusError as e:
        return e.status_code, str(e)
    return 200, "accepted"


@pytest.mark.asyncio
@pytest.mark.parametrize("name, kw, needles", BAD, ids=[b[0] for b in BAD])
async def test_bad_input_is_4xx_while_good_requests_complete(tiny_server, name, kw, needles):
    c = client(tiny_server, async_=True)
    results = await asyncio.wait_for(
        asyncio.gather(_good(c, 1), _bad(c, kw), _good(c, 2), _bad(c, kw)), timeout=600)
    for status, msg in (results[1], results[3]):
        print(f"[fault] {name}: HTTP {status}: {msg[:300]}")
        assert 400 <= status < 500, f"{name}: HTTP {status}: {msg[:500]}"
        for n in needles:
            assert n in msg, f"{name}: {n!r} not in {msg[:500]}"
    assert tiny_server.alive() and tiny_server.healthy()


@pytest.mark.asyncio
async def test_ambiguous_grammar_ends_only_its_request(tiny_server):
    """A grammar whose parse work grows with the output hits max_step_work while decoding:
    its own request ends (a 200 with what was generated, or an error), concurrent good
    requests complete and the engine keeps serving."""
    import openai

    c = client(tiny_server, async_=True)
    g = 'root ::= s\ns ::= s s s | s s | [a-z] | ""'

    async def ambiguous(i):
        try:
            r = await c.chat.completions.create(model="tiny", messages=MSG, max_tokens=400, seed=i,
                                                extra_body={"structured_outputs": {"grammar": g}})
            ch = r.choices[0]
            assert re.fullmatch(r"[a-z]*", ch.message.content or ""), ch
            return f"200 {ch.finish_reason} {len(ch.message.content or '')} chars"
        except openai.APIStatusError as e:
            return f"{e.status_code} {str(e)[:200]}"

    results = await asyncio.wait_for(
        asyncio.gather(ambiguous(1), _good(c, 3), ambiguous(2), _good(c, 4)), timeout=900)
    print("[fault] ambiguous grammar:", results[0], "|", results[2])
    assert tiny_server.alive() and tiny_server.healthy()
    await _good(c, 5)
