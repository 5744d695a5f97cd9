"""Background precomputation (engine/xgrammar2/background.py): the hook the engine plugins
call after a compile builds mask entries off the calling thread, once per compiled grammar,
with exact masks; a burst drops the oldest waiting grammar; a failure is counted, not raised,
and the worker keeps serving."""

from __future__ import annotations

import gc
import threading

import pytest

import xgrammar2 as xgr
from runtime_helpers import masks_equal_oracle, tokenizer
from xgrammar2.background import BackgroundPrecompute

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"}},
          "required": ["q", "n"]}


def test_compiled_grammar_gets_entries_in_background_with_exact_masks() -> None:
    tok = tokenizer("llama-3.1")
    xgr.clear_cross_grammar_cache()
    c = xgr.GrammarCompiler(tok, cache_enabled=False)
    compiled = c.compile_json_schema(SCHEMA)
    before = compiled.memory_size_bytes
    assert c.precompute_in_background(compiled, 4) is True
    assert c._background is not None and c._background.wait_idle(60)
    assert c._background.done == 1 and c._background.failed == 0
    assert compiled.memory_size_bytes > before  # entries were built without a matcher
    m = xgr.GrammarMatcher(compiled)
    for prefix in ('{"q": "', 'hi", "n": ', "12"):
        assert m.accept_string(prefix)
        ok, why = masks_equal_oracle(m, tok.vocab_size)
        assert ok, why


def test_each_grammar_once_and_k_zero_is_a_no_op() -> None:
    c = xgr.GrammarCompiler(tokenizer("llama-3.1"))
    compiled = c.compile_json_schema(SCHEMA)
    assert c.precompute_in_background(compiled, 0) is False
    assert c.precompute_in_background(compiled, 2) is True
    # a compile-cache hit hands back the same object: not queued again
    assert c.compile_json_schema(SCHEMA) is compiled
    assert c.precompute_in_background(compiled, 2) is False
    with pytest.raises(TypeError):
        c.precompute_in_background("not a grammar", 2)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        c.precompute_in_background(compiled, 1.5)  # type: ignore[arg-type]
    assert c._background.wait_idle(60)


class _Blocking:
    """Stands in for a CompiledGrammar: precompute blocks until released, or raises."""

    def __init__(self, gate: threading.Event, fail: bool = False) -> None:
        self.gate, self.fail, self.calls = gate, fail, []

    def precompute(self, k: int) -> None:
        self.gate.wait(30)
        self.calls.append(k)
        if self.fail:
            raise RuntimeError("boom")


def test_burst_drops_the_oldest_waiting_grammar() -> None:
    bg = BackgroundPrecompute(max_pending=1)
    gate = threading.Event()
    first, second, third = _Blocking(gate), _Blocking(gate), _Blocking(gate)
    assert bg.submit(first, 3)  # type: ignore[arg-type]
    while bg.pending:  # the worker has taken `first` and blocks in it
        threading.Event().wait(0.001)
    assert bg.submit(second, 3)  # type: ignore[arg-type]
    assert bg.submit(third, 5)  # type: ignore[arg-type]  (queue full: `second` is dropped)
    assert bg.dropped == 1 and bg.pending == 1
    gate.set()
    assert bg.wait_idle(30)
    assert first.calls == [3] and second.calls == [] and third.calls == [5]
    assert bg.done == 2


def test_failure_is_counted_and_the_worker_goes_on(caplog) -> None:
    bg = BackgroundPrecompute()
    gate = threading.Event()
    gate.set()
    bad, good = _Blocking(gate, fail=True), _Blocking(gate)
    bg.submit(bad, 1)  # type: ignore[arg-type]
    bg.submit(good, 1)  # type: ignore[arg-type]
    assert bg.wait_idle(30)
    assert bg.failed == 1 and bg.done == 1 and good.calls == [1]
    assert any("background precompute failed: boom" in r.getMessage() for r in caplog.records)


def test_grammar_dropped_by_its_owner_is_skipped() -> None:
    bg = BackgroundPrecompute()
    gate = threading.Event()
    holder = _Blocking(gate)
    bg.submit(holder, 1)  # type: ignore[arg-type]
    while bg.pending:
        threading.Event().wait(0.001)
    gone = _Blocking(gate)
    bg.submit(gone, 1)  # type: ignore[arg-type]
    del gone
    gc.collect()
    gate.set()
    assert bg.wait_idle(30)
    assert bg.done == 1 and bg.failed == 0  # only `holder` ran


def test_max_pending_is_checked() -> None:
    with pytest.raises(ValueError):
        BackgroundPrecompute(max_pending=0)
