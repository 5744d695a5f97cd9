"""Helpers shared by the end-to-end tests, the demo and the benchmark (named uniquely:
tests/ has other conftest.py files)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for _p in (HERE, REPO / "plugins" / "vllm"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

def _real_package(name: str) -> bool:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin not in (None, "namespace")


HAVE_VLLM = _real_package("vllm") and _real_package("openai")
SKIP_REASON = (
    "vllm / openai are not importable in this interpreter; run the end-to-end tests in the "
    "vLLM venv: bash e2e/run_vllm_tests.sh --e2e"
)

TINY_SERVER_ARGS = [
    # Default xgrammar2 options: the plugin bounds JSON whitespace by default, which is what
    # makes bounded schemas finish even with random weights.
    "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
]


def start_server(model_dir: str, served_name: str, **kw):
    from server import VllmServer

    srv = VllmServer(model_dir, served_name=served_name, **kw)
    try:
        srv.start()
    except Exception:
        srv.stop()
        raise
    print(f"[e2e] {served_name} server up in {srv.startup_s:.0f}s at {srv.base_url} (log {srv.log_path})")
    return srv


def client(srv, async_=False):
    import openai

    cls = openai.AsyncOpenAI if async_ else openai.OpenAI
    return cls(base_url=srv.base_url, api_key="EMPTY", timeout=300, max_retries=0)


# The object schema the tiny-model server tests and the end-to-end benchmark both request.
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 10},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "color": {"enum": ["red", "green", "blue"]},
        "ok": {"type": "boolean"},
    },
    "required": ["name", "age", "color", "ok"],
    "additionalProperties": False,
}
