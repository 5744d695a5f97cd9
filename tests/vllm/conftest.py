"""Fixtures for the vLLM adapter tests: a tiny local model (no hub), a vLLM config and a
StructuredOutputManager with the xgrammar2 backend, no server and no model weights loaded.

These tests need vLLM, so they run in the vLLM venv (``bash e2e/run_vllm_tests.sh``); in any
other interpreter every test module is skipped with the reason. The adapter is imported from
this checkout (plugins/vllm) even when it is not installed.
"""

from __future__ import annotations

import pytest

from vllm_harness import Harness, make_manager, make_vllm_config, require_vllm


@pytest.fixture(scope="session")
def tiny_model_dir() -> str:
    require_vllm()
    import models  # e2e/models.py

    return str(models.build_tiny())


@pytest.fixture(scope="session")
def registered():
    require_vllm()
    import xgrammar2_vllm

    assert xgrammar2_vllm.register()
    return xgrammar2_vllm


@pytest.fixture(scope="session")
def model_config(tiny_model_dir, registered):
    from vllm.config import ModelConfig

    return ModelConfig(model=tiny_model_dir, tokenizer=tiny_model_dir, dtype="bfloat16", max_model_len=512)


@pytest.fixture(scope="session")
def vllm_config(model_config):
    return make_vllm_config(model_config)


@pytest.fixture(scope="session")
def manager(vllm_config):
    return make_manager(vllm_config)


@pytest.fixture(scope="session")
def tokenizer(manager):
    return manager.tokenizer


@pytest.fixture(scope="session")
def harness(manager, model_config):
    return Harness(manager, model_config)
