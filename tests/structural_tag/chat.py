"""Rendering real chat templates (jinja2, as Hugging Face does) and real BFCL tool calls.

``render`` follows transformers' ``apply_chat_template`` environment (trim_blocks,
lstrip_blocks, loopcontrols, ``tojson`` with ensure_ascii=False, ``raise_exception``,
``strftime_now``) but in a mutable sandbox: the Kimi-K2 templates call ``list.append``.
"""

import json
import os
import sys
from datetime import datetime
from functools import lru_cache
from typing import Any, Dict, List, Optional

from st_support import BFCL, TEMPLATES

# BFCL's schemas and answers are read the way the benchmarks read them (one copy of that code).
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
from bench.tools import bfcl_schema, call_args, load_pool  # noqa: E402,F401


@lru_cache(maxsize=None)
def _template(name: str):
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import SandboxedEnvironment

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = SandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                               extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime(2025, 1, 1).strftime(fmt)
    return env.from_string((TEMPLATES / name).read_text())


def render(name: str, messages: List[Dict[str, Any]], tools, add_generation_prompt: bool,
           **kwargs) -> str:
    kw = dict(bos_token="<s>", eos_token="</s>")
    kw.update(kwargs)
    return _template(name).render(messages=messages, tools=tools,
                                  add_generation_prompt=add_generation_prompt, **kw)


# ---- BFCL ---------------------------------------------------------------------------------

def tool_name(name: str) -> str:
    return name.replace(".", "_")


def bfcl_cases(kind: str, limit: Optional[int] = None) -> List[Dict[str, Any]]:
    """``[{"id", "question", "tools", "calls": [(name, args)], "valid"}]`` for one BFCL file.
    Arguments are put in the schema's property order; a case whose ground truth does not
    validate against its converted schema (or names an undeclared argument) has
    ``valid=False`` and is not used."""
    import jsonschema

    answers = {}
    path = BFCL / "possible_answer" / f"BFCL_v4_{kind}.json"
    for line in path.read_text().splitlines():
        d = json.loads(line)
        answers[d["id"]] = d["ground_truth"]
    out = []
    for line in (BFCL / f"BFCL_v4_{kind}.json").read_text().splitlines():
        d = json.loads(line)
        if d["id"] not in answers:
            continue
        tools, schemas = [], {}
        for fn in d["function"]:
            params = bfcl_schema(fn["parameters"])
            tools.append({"type": "function", "function": {
                "name": tool_name(fn["name"]), "description": fn.get("description", ""),
                "parameters": params}})
            schemas[tool_name(fn["name"])] = params
        calls, ok = [], True
        for call in answers[d["id"]]:
            (name, params), = call.items()
            args = call_args(params)
            name = tool_name(name)
            try:
                jsonschema.validate(args, schemas[name])
            except (jsonschema.ValidationError, KeyError):
                ok = False
                break
            # The grammars (like upstream's) take tool arguments in strict mode and in the
            # schema's property order, which is what a constrained model writes.
            props = list((schemas[name].get("properties") or {}))
            if any(k not in props for k in args):
                ok = False
                break
            args = {k: args[k] for k in props if k in args}
            calls.append((name, args))
        q = d["question"][0]
        out.append({"id": d["id"], "question": q, "tools": tools, "calls": calls, "valid": ok})
        if limit is not None and len(out) >= limit:
            break
    return out


BFCL_KINDS = ("simple_python", "multiple", "parallel", "parallel_multiple")


def bfcl_limit() -> Optional[int]:
    """Cases per BFCL file: all with XGR2_BFCL_FULL=1, else a sample (XGR2_BFCL_LIMIT, 12)."""
    if os.environ.get("XGR2_BFCL_FULL"):
        return None
    return int(os.environ.get("XGR2_BFCL_LIMIT", "12"))
