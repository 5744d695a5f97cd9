"""The backend inside SGLang's ReasonerGrammarBackend (``--reasoning-parser qwen3``): the
grammar applies only after ``</think>``, rollback across the boundary, strict-thinking token
filters (``--enable-strict-thinking`` + ``SGLANG_MAX_THINK_TOKENS``) through our
``set_token_filter``, and the native batched fill of wrapped grammars."""

from __future__ import annotations

import json

import pytest

from sglang_harness import QWEN3_EOS, QWEN3_VOCAB, allowed, encode, publish_server_args, require_sglang

require_sglang()

import torch  # noqa: E402
from sglang.srt.constrained.base_grammar_backend import GrammarRow, create_grammar_backend  # noqa: E402
from sglang.srt.constrained.reasoner_grammar_backend import (  # noqa: E402
    ReasonerGrammarBackend,
    ReasonerGrammarObject,
)

from xgrammar2_sglang.grammar import XGrammar2Grammar  # noqa: E402

V = QWEN3_VOCAB
EOS = QWEN3_EOS[0]
THINK_END = 151668  # "</think>" in Qwen3
SCHEMA = json.dumps({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]})


def _reasoner(model_path, tokenizer, *flags):
    try:
        args = publish_server_args(model_path, "--grammar-backend", "xgrammar2", "--reasoning-parser", "qwen3", *flags)
        b = create_grammar_backend(args, tokenizer, V, set(QWEN3_EOS))
    finally:
        publish_server_args(model_path, "--grammar-backend", "xgrammar2")
    assert isinstance(b, ReasonerGrammarBackend)
    return b


def _get(b, key, reasoning=True):
    value, hit = b.get_cached_or_future_value(key, reasoning)
    return value if hit else value.result(timeout=120)


def _row(g, n=1, idx=0):
    mask = g.allocate_vocab_mask(vocab_size=V, batch_size=n, device="cpu")
    g.fill_vocab_mask(mask, idx)
    return mask, allowed(mask[idx].numpy(), V)


@pytest.fixture(scope="module")
def reasoner(model_path, tokenizer):
    return _reasoner(model_path, tokenizer)


def test_grammar_applies_after_think_end(reasoner, tokenizer):
    g = _get(reasoner, ("json", SCHEMA))
    assert isinstance(g, ReasonerGrammarObject) and isinstance(g.grammar, XGrammar2Grammar)
    for t in encode(tokenizer, "Let me think { about it"):
        mask, row = _row(g)
        assert bool((mask[0] == -1).all()), "the row must stay untouched while thinking"
        g.accept_token(t)
    g.accept_token(THINK_END)
    _, row = _row(g)
    assert encode(tokenizer, "{")[0] in row and encode(tokenizer, "Let")[0] not in row
    for t in encode(tokenizer, '{"ok": true}'):
        g.accept_token(t)
    g.accept_token(EOS)
    assert g.is_terminated()
    # Roll back over the stop token, the JSON and </think>: thinking again, row untouched.
    g.rollback(1 + len(encode(tokenizer, '{"ok": true}')) + 1)
    assert not g.is_terminated()
    mask, _ = _row(g)
    assert bool((mask[0] == -1).all())


def test_no_reasoning_request_is_constrained_from_the_start(reasoner, tokenizer):
    g = _get(reasoner, ("json", SCHEMA), reasoning=False)
    _, row = _row(g)
    assert encode(tokenizer, "{")[0] in row and THINK_END not in row


def test_batched_fill_with_wrapped_grammars(reasoner, tokenizer):
    """Rows of wrapped grammars after </think> go through the native batch; a wrapper still
    thinking fills (leaves) its own row; the result equals per-row filling."""
    schemas = [SCHEMA, json.dumps({"type": "array", "items": {"type": "integer"}}), SCHEMA]
    gs = [_get(reasoner, ("json", s)) for s in schemas]
    for g in gs[:2]:
        g.accept_token(THINK_END)
    gs[1].accept_token(encode(tokenizer, "[")[0])
    entries = [GrammarRow(i, g) for i, g in enumerate(gs)]
    batched = gs[0].allocate_vocab_mask(vocab_size=V, batch_size=3, device="cpu")
    # As SGLang calls it: on the batch's first grammar, here the reasoner wrapper, which the
    # factory gave our native batched fill.
    assert ReasonerGrammarObject.fill_vocab_mask_batched is XGrammar2Grammar.fill_vocab_mask_batched
    gs[0].fill_vocab_mask_batched(entries, batched)
    single = gs[0].allocate_vocab_mask(vocab_size=V, batch_size=3, device="cpu")
    for e in entries:
        e.grammar.fill_vocab_mask(single, e.row)
    assert torch.equal(batched, single)
    assert bool((batched[2] == -1).all())  # still thinking
    assert not bool((batched[0] == -1).all()) and not bool((batched[1] == -1).all())


def test_strict_thinking_budget_filter(model_path, tokenizer, monkeypatch):
    """With a thinking budget, once it is spent only </think> may come next; the filter is
    our backend's set_token_filter (SGLang's torch op on CPU tensors)."""
    monkeypatch.setenv("SGLANG_MAX_THINK_TOKENS", "3")
    b = _reasoner(model_path, tokenizer, "--enable-strict-thinking")
    assert b.enable_token_filter and b.grammar_backend.is_support_token_filter
    g = _get(b, ("json", SCHEMA))
    for t in encode(tokenizer, "a b c")[:3]:
        _, row = _row(g)
        assert len(row) > 1000  # free thinking (minus excluded tokens, if any)
        g.accept_token(t)
    _, row = _row(g)
    assert row == {THINK_END}
    g.accept_token(THINK_END)
    _, row = _row(g)
    assert encode(tokenizer, "{")[0] in row and THINK_END not in row


def test_strict_thinking_without_grammar(model_path, tokenizer, monkeypatch):
    """Strict thinking with no request grammar uses the backend-level mask helpers."""
    monkeypatch.setenv("SGLANG_MAX_THINK_TOKENS", "1")
    b = _reasoner(model_path, tokenizer, "--enable-strict-thinking")
    g = b.init_strict_reasoning_grammar(True)
    assert isinstance(g, ReasonerGrammarObject) and g.grammar is None
    mask = g.allocate_vocab_mask(V, 1, "cpu")
    assert mask.dtype == torch.int32 and tuple(mask.shape) == (1, (V + 31) // 32)
    g.accept_token(encode(tokenizer, "x")[0])
    g.fill_vocab_mask(mask, 0)
    assert allowed(mask[0].numpy(), V) == {THINK_END}
    logits = torch.zeros(1, V)
    g.apply_vocab_mask(logits=logits, vocab_mask=g.move_vocab_mask(mask, "cpu"))
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [THINK_END]
