"""A real vLLM server with the xgrammar2 backend (started with the short
``--structured-output-backend xgrammar2`` flag) on SmolLM2-135M-Instruct, a real instruct
model: it gives a real JSON answer, a bad schema gets HTTP 400 while the server keeps
serving, and concurrent requests with different schemas each get output of their own schema.
"""

import asyncio
import json

import pytest

from e2e_helpers import HAVE_VLLM, SKIP_REASON, client

pytestmark = pytest.mark.skipif(not HAVE_VLLM, reason=SKIP_REASON)

CAPITAL = {
    "type": "object",
    "properties": {
        "country": {"type": "string", "maxLength": 40},
        "capital": {"type": "string", "maxLength": 40},
    },
    "required": ["country", "capital"],
    "additionalProperties": False,
}


def _ask(c, question, schema, name="answer", max_tokens=80):
    return c.chat.completions.create(
        model="smollm2",
        messages=[
            {"role": "system", "content": "You are a helpful assistant. Answer in JSON."},
            {"role": "user", "content": question},
        ],
        max_tokens=max_tokens,
        temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": name, "schema": schema}},
    )


def test_real_json_answer(smollm2_server):
    import jsonschema

    r = _ask(client(smollm2_server), "What is the capital of France?", CAPITAL)
    ch = r.choices[0]
    print("[smollm2]", ch.message.content)
    assert ch.finish_reason == "stop"
    obj = json.loads(ch.message.content)
    jsonschema.validate(obj, CAPITAL)
    assert "paris" in obj["capital"].lower(), obj


def test_bad_schema_400_then_serves(smollm2_server):
    import openai

    c = client(smollm2_server)
    with pytest.raises(openai.BadRequestError) as ei:
        _ask(c, "x", {"type": "object", "properties": {"a": {"type": "nope"}}})
    assert ei.value.status_code == 400 and "xgrammar2" in str(ei.value)
    status, body = smollm2_server.post(
        "/v1/chat/completions",
        {"model": "smollm2", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5,
         "structured_outputs": {"regex": "[unclosed"}},
    )
    assert status == 400 and "xgrammar2" in json.dumps(body), body
    assert smollm2_server.alive() and smollm2_server.healthy()
    test_real_json_answer(smollm2_server)


@pytest.mark.asyncio
async def test_concurrent_different_schemas(smollm2_server):
    import jsonschema

    c = client(smollm2_server, async_=True)
    jobs = [
        ("Name a primary color.", {"type": "object", "properties": {"color": {"enum": ["red", "yellow", "blue"]}},
                                   "required": ["color"], "additionalProperties": False}),
        ("How many legs does a spider have?", {"type": "object", "properties": {"legs": {"type": "integer", "minimum": 0, "maximum": 100}},
                                               "required": ["legs"], "additionalProperties": False}),
        ("Is water wet? Answer yes or no with a reason.", {"type": "object", "properties": {
            "answer": {"type": "boolean"}, "reason": {"type": "string", "maxLength": 60}},
            "required": ["answer", "reason"], "additionalProperties": False}),
        ("List two fruits.", {"type": "object", "properties": {"fruits": {"type": "array", "items": {"type": "string", "maxLength": 15},
                                                                          "minItems": 2, "maxItems": 2}},
                              "required": ["fruits"], "additionalProperties": False}),
    ]

    async def one(q, schema):
        r = await c.chat.completions.create(
            model="smollm2", messages=[{"role": "user", "content": q}], max_tokens=100, temperature=0,
            response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": schema}})
        return r.choices[0]

    results = await asyncio.wait_for(asyncio.gather(*(one(q, s) for q, s in jobs)), timeout=600)
    for (q, schema), ch in zip(jobs, results):
        print("[smollm2]", q, "->", ch.message.content)
        assert ch.finish_reason == "stop", ch
        jsonschema.validate(json.loads(ch.message.content), schema)
