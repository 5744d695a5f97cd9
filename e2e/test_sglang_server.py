"""Server-level tests: a real SGLang server launched with ``--grammar-backend xgrammar2``
runs SGLang's own constrained-decoding kits (JSON / regex / EBNF through ``/generate`` and the
OpenAI client, JSON mode non-streaming and streaming), with the overlap scheduler on and off,
plus a forced tool call through the OpenAI client.

This is SGLang's ``test/registered/constrained_decoding/test_constrained_decoding.py``
template with our backend. It needs a CUDA GPU: the PyPI SGLang cannot serve on a CPU-only
machine (``../shared/docs/sglang-integration.md`` §4), so without one every test here is
skipped with that reason. Run it in the SGLang venv:

    bash e2e/run_sglang_tests.sh --server
    XGR2_SGLANG_MODEL=/path/or/hub-id bash e2e/run_sglang_tests.sh --server   # model override

The model defaults to SGLang's ``DEFAULT_SMALL_MODEL_NAME_FOR_TEST`` (Llama-3.2-1B-Instruct,
from the Hugging Face hub or its cache); ``XGR2_SGLANG_TOOL_PARSER`` sets the tool parser
(``llama3`` by default).
"""

from __future__ import annotations

import importlib.util
import json
import os
import unittest

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip(
        "needs the sglang package: run `bash e2e/run_sglang_tests.sh --server` (SGLang venv)",
        allow_module_level=True,
    )


def _cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        return False


if not _cuda_available():
    pytest.skip(
        "no CUDA GPU: SGLang 0.5.23 from PyPI cannot serve on a CPU-only machine (its CPU "
        "engine needs a CPU build of sgl-kernel that is on no registry); the CPU tests in "
        "tests/sglang cover the backend without a server",
        allow_module_level=True,
    )

import openai  # noqa: E402
import requests  # noqa: E402
from sglang.srt.utils import kill_process_tree  # noqa: E402
from sglang.test.kits.ebnf_constrained_kit import EBNFConstrainedMixin  # noqa: E402
from sglang.test.kits.json_constrained_kit import JSONConstrainedMixin  # noqa: E402
from sglang.test.kits.json_mode_kit import JSONModeMixin  # noqa: E402
from sglang.test.kits.regex_constrained_kit import RegexConstrainedMixin  # noqa: E402
from sglang.test.test_utils import (  # noqa: E402
    DEFAULT_SMALL_MODEL_NAME_FOR_TEST,
    DEFAULT_TIMEOUT_FOR_SERVER_LAUNCH,
    DEFAULT_URL_FOR_TEST,
    CustomTestCase,
    popen_launch_server,
)

MODEL = os.environ.get("XGR2_SGLANG_MODEL", DEFAULT_SMALL_MODEL_NAME_FOR_TEST)
TOOL_PARSER = os.environ.get("XGR2_SGLANG_TOOL_PARSER", "llama3")


class ServerWithXGrammar2(CustomTestCase):
    """Launches one server per class with the xgrammar2 backend."""

    backend_flag = "--grammar-backend"
    disable_overlap = False

    @classmethod
    def setUpClass(cls):
        cls.model = MODEL
        cls.base_url = DEFAULT_URL_FOR_TEST
        args = [cls.backend_flag, "xgrammar2", "--max-running-requests", "10", "--tool-call-parser", TOOL_PARSER]
        if cls.disable_overlap:
            args.append("--disable-overlap-schedule")
        cls.process = popen_launch_server(
            cls.model, cls.base_url, timeout=DEFAULT_TIMEOUT_FOR_SERVER_LAUNCH, other_args=args
        )
        cls.client = openai.Client(api_key="EMPTY", base_url=f"{cls.base_url}/v1")

    @classmethod
    def tearDownClass(cls):
        kill_process_tree(cls.process.pid)

    def test_server_uses_xgrammar2(self):
        info = requests.get(self.base_url + "/server_info", timeout=60).json()
        self.assertEqual(info.get("grammar_backend"), "xgrammar2", info.get("grammar_backend"))

    def test_invalid_schema_is_a_request_error(self):
        r = requests.post(self.base_url + "/generate", json={
            "text": "x", "sampling_params": {"max_new_tokens": 8,
                                             "json_schema": json.dumps({"type": "no-such-type"})}},
                          timeout=120)
        body = r.text
        self.assertIn("xgrammar2", body, body)

    def test_forced_tool_call(self):
        tools = [{"type": "function", "function": {
            "name": "get_weather", "description": "Weather of a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
        resp = self.client.chat.completions.create(
            model=self.model, messages=[{"role": "user", "content": "Weather in Paris?"}],
            tools=tools, tool_choice="required", temperature=0, max_tokens=128,
        )
        calls = resp.choices[0].message.tool_calls
        self.assertTrue(calls, resp)
        self.assertEqual(calls[0].function.name, "get_weather")
        self.assertIsInstance(json.loads(calls[0].function.arguments)["city"], str)


class TestXGrammar2Backend(
    ServerWithXGrammar2, JSONConstrainedMixin, RegexConstrainedMixin, EBNFConstrainedMixin, JSONModeMixin
):
    pass


class TestXGrammar2BackendNoOverlap(TestXGrammar2Backend):
    disable_overlap = True


class TestXGrammar2BackendAliasFlag(ServerWithXGrammar2, JSONModeMixin):
    """``--structured-output-backend xgrammar2`` (the plugin's alias) selects the backend."""

    backend_flag = "--structured-output-backend"


if __name__ == "__main__":
    unittest.main()
