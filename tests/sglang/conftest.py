"""Fixtures for the SGLang adapter tests: SGLang's own classes on the CPU (no server, no
weights). Outside the SGLang venv every module here is skipped at collection (see
sglang_harness.require_sglang); run them with ``bash e2e/run_sglang_tests.sh``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sglang_harness import QWEN3_EOS, QWEN3_VOCAB, have_sglang, model_dir  # noqa: E402


@pytest.fixture(scope="session")
def model_path(tmp_path_factory) -> Path:
    if not have_sglang():
        pytest.skip("sglang not installed")
    return model_dir(tmp_path_factory.mktemp("sglang-model"))


@pytest.fixture(scope="session")
def tokenizer(model_path):
    # SGLang's scheduler loads the tokenizer with transformers' AutoTokenizer too.
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model_path))


@pytest.fixture(scope="session")
def published(model_path):
    """ServerArgs for ``--grammar-backend xgrammar2`` published as in a scheduler process."""
    from sglang_harness import publish_server_args

    return publish_server_args(model_path, "--grammar-backend", "xgrammar2")


@pytest.fixture(scope="session")
def backend(tokenizer, published):
    """Our backend, built as SGLang's factory builds it (no reasoning parser)."""
    from xgrammar2_sglang.backend import XGrammar2GrammarBackend

    b = XGrammar2GrammarBackend(tokenizer, vocab_size=QWEN3_VOCAB, model_eos_token_ids=QWEN3_EOS)
    # The same JSON language as upstream's backend for the parity tests: whitespace
    # unbounded (the plugin's default bound is tested in test_dispatch / test_plugin).
    b.max_whitespace_cnt = None
    return b


@pytest.fixture(scope="session")
def upstream(tokenizer, published):
    """SGLang's built-in xgrammar backend (upstream xgrammar 0.2.7), same tokenizer and EOS."""
    from sglang.srt.constrained.xgrammar_backend import XGrammarGrammarBackend

    return XGrammarGrammarBackend(tokenizer, vocab_size=QWEN3_VOCAB, model_eos_token_ids=QWEN3_EOS)
