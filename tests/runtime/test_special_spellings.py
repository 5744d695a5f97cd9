"""Special tokens spelled by a format: tokenizers mark delimiters such as gpt-oss's
`<|channel|>` as special (never grammar text), yet tool-call formats spell them as text and
models emit the token. Where a grammar's literal spells a special token's text, that token
is admitted (as a token terminal); anywhere else (free text, JSON strings) it is not."""

from __future__ import annotations

import gzip
import json
import os
import shutil

import pytest

import xgrammar2 as xgr
import xgrammar2.structural_tag  # noqa: F401  (get_model_structural_tag)
from runtime_helpers import allowed, masks_equal_oracle, new_bitmask, shared_data

transformers = pytest.importorskip("transformers")

WEATHER = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


@pytest.fixture(scope="module")
def gptoss(tmp_path_factory):
    src = os.path.join(shared_data(), "tokenizers", "original", "gpt-oss")
    dst = tmp_path_factory.mktemp("gpt-oss")
    with gzip.open(os.path.join(src, "tokenizer.json.gz"), "rb") as f, open(dst / "tokenizer.json", "wb") as g:
        shutil.copyfileobj(f, g)
    hf = transformers.PreTrainedTokenizerFast(tokenizer_file=str(dst / "tokenizer.json"))
    return hf, xgr.TokenizerInfo.from_huggingface(hf, stop_token_ids=[200002])


@pytest.fixture(scope="module")
def llama():
    path = os.path.join(shared_data(), "tokenizers", "original", "llama-3-instruct", "tokenizer.json")
    hf = transformers.PreTrainedTokenizerFast(tokenizer_file=path)
    return hf, xgr.TokenizerInfo.from_huggingface(hf, stop_token_ids=[128009])


def test_harmony_tool_call_with_real_special_tokens_is_accepted_with_oracle_masks(gptoss) -> None:
    hf, ti = gptoss
    channel = hf.convert_tokens_to_ids("<|channel|>")
    assert channel in ti.special_token_ids  # the tokenizer really marks it special
    st = xgr.structural_tag.get_model_structural_tag("harmony", tools=WEATHER, reasoning=True)
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(ti).compile_structural_tag(st))
    text = ('<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>'
            'commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>')
    ids = hf.encode(text, add_special_tokens=False)
    assert ids[0] == channel
    for k, t in enumerate(ids):
        if k % 4 == 0:  # the oracle is a pass over 200k tokens
            ok, why = masks_equal_oracle(m, ti.vocab_size)
            assert ok, (k, why)
        assert m.accept_token(t), f"step {k}: {hf.decode([t])!r} rejected"
    # <|return|> is the stop token: the call is complete, so it ends the generation
    assert m.accept_token(200002) and m.is_terminated()


def test_harmony_free_text_never_holds_special_tokens(gptoss) -> None:
    """A channel's text ends at the <|end|> token (an excluded spelling cannot slip through as
    the token), and the special tokens the format names elsewhere are not text."""
    hf, ti = gptoss
    st = xgr.structural_tag.get_model_structural_tag("harmony", tools=WEATHER, reasoning=True)
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(ti).compile_structural_tag(st))
    special = {n: hf.convert_tokens_to_ids(n) for n in
               ("<|end|>", "<|start|>", "<|channel|>", "<|message|>", "<|call|>", "<|constrain|>")}
    for t in hf.encode("<|channel|>analysis<|message|>Need the weather.", add_special_tokens=False):
        assert m.accept_token(t)
    bm = new_bitmask(ti.vocab_size)
    m.fill_next_token_bitmask(bm)
    ok = set(allowed(bm, ti.vocab_size)) & set(special.values())
    assert ok == {special["<|end|>"]}, sorted(hf.convert_ids_to_tokens(sorted(ok)))
    assert not m.accept_token(special["<|channel|>"])
    assert m.accept_token(special["<|end|>"])
    # the message is over: no more text, only the next message's header or the end
    assert not m.accept_token(hf.encode(" more", add_special_tokens=False)[0])
    m.fill_next_token_bitmask(bm)
    assert special["<|start|>"] in allowed(bm, ti.vocab_size)
    assert m.accept_token(200002) and m.is_terminated()


def test_a_spelled_special_token_is_admitted_only_where_spelled(llama) -> None:
    hf, ti = llama
    tag = hf.convert_tokens_to_ids("<|start_header_id|>")
    assert tag in ti.special_token_ids
    c = xgr.GrammarCompiler(ti)
    m = xgr.GrammarMatcher(c.compile_grammar('root ::= "call: " "<|start_header_id|>" [a-z]+'))
    assert m.accept_string("call: ")
    bm = new_bitmask(ti.vocab_size)
    m.fill_next_token_bitmask(bm)
    assert tag in allowed(bm, ti.vocab_size)
    assert m.accept_token(tag)
    ok, why = masks_equal_oracle(m, ti.vocab_size)
    assert ok, why
    # the letters still work too (the grammar spells them)
    m2 = xgr.GrammarMatcher(c.compile_grammar('root ::= "call: " "<|start_header_id|>" [a-z]+'))
    assert m2.accept_string("call: <|start_header_id|>abc")
    # never inside a JSON string: free text does not admit special tokens
    j = xgr.GrammarMatcher(c.compile_json_schema({"type": "string"}))
    assert j.accept_string('"abc')
    assert not j.accept_token(tag)


def test_triggers_spelling_a_special_token_dispatch_on_the_token(llama) -> None:
    hf, ti = llama
    tag = hf.convert_tokens_to_ids("<|start_header_id|>")
    st = {"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<|start_header_id|>"],
        "tags": [{"begin": "<|start_header_id|>", "content": {"type": "json_schema", "json_schema": {
            "type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}},
            "end": "<|end_header_id|>"}]}}
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(ti).compile_structural_tag(json.dumps(st)))
    ids = (hf.encode("Checking. ", add_special_tokens=False) + [tag]
           + hf.encode('{"x": 5}', add_special_tokens=False) + [hf.convert_tokens_to_ids("<|end_header_id|>")])
    for k, t in enumerate(ids):
        ok, why = masks_equal_oracle(m, ti.vocab_size)
        assert ok, (k, why)
        assert m.accept_token(t), k
