"""Shared helpers for the vLLM adapter tests (imported by conftest.py and the test modules;
named uniquely because tests/python has its own conftest.py)."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
for _p in (REPO / "plugins" / "vllm", REPO / "e2e"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

def _real_package(name: str) -> bool:
    # tests/vllm itself can look like a namespace package named "vllm" when tests/ is on
    # sys.path; only a regular package (with an __init__) counts.
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin not in (None, "namespace")


HAVE_VLLM = _real_package("vllm")
SKIP_REASON = (
    "vllm is not importable in this interpreter; run these tests in the vLLM venv: "
    "bash e2e/run_vllm_tests.sh"
)

os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def require_vllm():
    if not HAVE_VLLM:
        pytest.skip(SKIP_REASON, allow_module_level=True)


def make_vllm_config(model_config, backend="xgrammar2", num_spec=0, reasoning_parser="",
                     max_num_seqs=16, **so_kwargs):
    from vllm.config import SchedulerConfig, SpeculativeConfig, StructuredOutputsConfig, VllmConfig

    kwargs = {}
    if num_spec:
        kwargs["speculative_config"] = SpeculativeConfig(
            method="ngram", num_speculative_tokens=num_spec, prompt_lookup_max=3, prompt_lookup_min=1
        )
    return VllmConfig(
        model_config=model_config,
        structured_outputs_config=StructuredOutputsConfig(
            backend=backend, reasoning_parser=reasoning_parser, **so_kwargs
        ),
        scheduler_config=SchedulerConfig(
            max_num_seqs=max_num_seqs,
            max_model_len=model_config.max_model_len,
            max_num_batched_tokens=2048,
            is_encoder_decoder=False,
        ),
        **kwargs,
    )


def make_manager(vllm_config):
    from vllm.v1.structured_output import StructuredOutputManager

    return StructuredOutputManager(vllm_config)


class Harness:
    """Builds requests the way vLLM's front end does (SamplingParams validation sets
    ``_backend`` and runs the patched validator) and drives one StructuredOutputManager."""

    def __init__(self, manager, model_config):
        self.manager = manager
        self.model_config = model_config
        self.tokenizer = manager.tokenizer
        self.vocab_size = model_config.get_vocab_size()
        self.n = 0

    def params(self, stop_token_ids=None, **so):
        from vllm.sampling_params import SamplingParams, StructuredOutputsParams

        sp = SamplingParams(
            structured_outputs=StructuredOutputsParams(**so), max_tokens=64,
            stop_token_ids=stop_token_ids,
        )
        sp._validate_structured_outputs(
            self.model_config, self.manager.vllm_config.structured_outputs_config, self.tokenizer
        )
        if stop_token_ids is None:
            # What the engine adds from the tokenizer / generation config.
            sp.all_stop_token_ids.add(self.tokenizer.eos_token_id)
        return sp

    def request(self, stop_token_ids=None, reasoning_ended=None, prompt=(5, 6, 7), wait=True, **so):
        from vllm.v1.request import Request

        self.n += 1
        req = Request(
            f"req-{self.n}", list(prompt), self.params(stop_token_ids, **so), None,
            reasoning_ended=reasoning_ended,
        )
        self.manager.grammar_init(req)
        if wait:
            self.wait(req)
        return req

    @staticmethod
    def wait(req, timeout=60.0):
        deadline = time.monotonic() + timeout
        while not req.structured_output_request.is_grammar_ready:
            if time.monotonic() > deadline:
                raise TimeoutError("grammar compilation did not finish")
            time.sleep(0.005)
        return req.structured_output_request.grammar

    def bitmask(self, *reqs, spec=None):
        requests = {r.request_id: r for r in reqs}
        return self.manager.grammar_bitmask(requests, [r.request_id for r in reqs], spec or {})

    def encode(self, text):
        return self.tokenizer.encode(text, add_special_tokens=False)


def allowed(row, vocab_size):
    """The set of token ids a bitmask row allows."""
    import numpy as np

    bits = np.unpackbits(np.ascontiguousarray(row, dtype=np.int32).view(np.uint8), bitorder="little")
    return set(np.nonzero(bits[:vocab_size])[0].tolist())
