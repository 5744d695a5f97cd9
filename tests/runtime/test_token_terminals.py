"""Token-level terminals: ``Token(id)`` in EBNF and the token formats of structural tags
(``token``, ``token_triggered_tags``, ``token_dispatch``, token ``begin`` / ``end``).

A terminal matches exactly one token id, special tokens included, and nothing spelled as
text; the cached mask equals the brute-force oracle (accept_token on every id) at every
step, and equals upstream xgrammar's mask for the same grammar and vocabulary."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import xgrammar2 as xgr
from runtime_helpers import allowed, masks_equal_oracle, new_bitmask, shared_data, tokenizer
from xgrammar2.structural_tag import StructuralTagError, structural_tag_to_ebnf

PYTHON_TAG, EOM, EOT = 128010, 128008, 128009  # Llama 3.1: <|python_tag|>, <|eom_id|>, <|eot_id|>

TOOL_CALL_TAG = {
    "type": "structural_tag",
    "format": {
        "type": "token_triggered_tags",
        "trigger_tokens": ["<|python_tag|>"],
        "tags": [{
            "type": "tag",
            "begin": {"type": "token", "token": "<|python_tag|>"},
            "content": {"type": "json_schema", "json_schema": {
                "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
            "end": {"type": "token", "token": "<|eom_id|>"},
        }],
    },
}


def _hf_tokenizer():
    transformers = pytest.importorskip("transformers")
    path = os.path.join(shared_data(), "tokenizers", "original", "llama-3-instruct", "tokenizer.json")
    return transformers.PreTrainedTokenizerFast(tokenizer_file=path)


def _ids(text: str) -> list[int]:
    return _hf_tokenizer().encode(text, add_special_tokens=False)


def _walk(m: xgr.GrammarMatcher, ids: list[int], vocab_size: int) -> None:
    for k, t in enumerate(ids):
        ok, why = masks_equal_oracle(m, vocab_size)
        assert ok, (k, why)
        assert m.accept_token(t), f"step {k}: token {t} rejected"
    ok, why = masks_equal_oracle(m, vocab_size)
    assert ok, why


def test_token_terminal_admits_exactly_that_token() -> None:
    tok = tokenizer("llama-3.1")
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(tok).compile_grammar(
        'root ::= "a" Token(128010) "b" | "c"'))
    assert m.accept_string("a")
    bm = new_bitmask(tok.vocab_size)
    m.fill_next_token_bitmask(bm)
    assert allowed(bm, tok.vocab_size).tolist() == [PYTHON_TAG]
    assert not m.accept_token(_ids("b")[0])
    assert m.find_jump_forward_string() == ""  # never the marker's bytes
    assert m.accept_token(PYTHON_TAG)
    _walk(m, _ids("b"), tok.vocab_size)
    assert m.accept_token(EOT) and m.is_terminated()
    m.rollback(2)  # back over the stop token and "b"
    m.fill_next_token_bitmask(bm)
    assert allowed(bm, tok.vocab_size).tolist() == _ids("b")


def test_stop_token_named_by_the_grammar_is_a_terminal_not_the_end() -> None:
    tok = tokenizer("llama-3.1")
    assert EOM in tok.stop_token_ids
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(tok).compile_grammar('root ::= "x" Token(128008) "y"'))
    assert m.accept_string("x") and m.accept_token(EOM)
    assert not m.is_terminated()
    _walk(m, _ids("y"), tok.vocab_size)
    assert m.accept_token(EOT) and m.is_terminated()


def test_text_tokens_with_byte_ff_are_never_text_in_a_token_grammar() -> None:
    tok = tokenizer("llama-3.1")
    ff = [i for i, b in enumerate(tok.decoded_vocab) if b and b"\xff" in b]
    assert ff, "the vocabulary has raw 0xFF byte tokens"
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(tok).compile_grammar(
        'root ::= (b[\\x00-\\xff] | Token(128010))+'))
    bm = new_bitmask(tok.vocab_size)
    m.fill_next_token_bitmask(bm)
    got = set(allowed(bm, tok.vocab_size).tolist())
    assert PYTHON_TAG in got and not got & set(ff)
    assert not m.accept_token(ff[0])
    ok, why = masks_equal_oracle(m, tok.vocab_size)
    assert ok, why


def test_token_triggered_tool_call_walks_a_real_call_with_oracle_masks() -> None:
    tok = tokenizer("llama-3.1")
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(tok).compile_structural_tag(json.dumps(TOOL_CALL_TAG)))
    ids = _ids("Let me look that up. ") + [PYTHON_TAG] + _ids('{"city": "Paris"}') + [EOM] + _ids(" Done.")
    _walk(m, ids, tok.vocab_size)
    assert m.accept_token(EOT) and m.is_terminated()
    # a call must end with its end token, not with text that spells something else
    m2 = xgr.GrammarMatcher(xgr.GrammarCompiler(tok).compile_structural_tag(json.dumps(TOOL_CALL_TAG)))
    for t in [PYTHON_TAG] + _ids('{"city": "Paris"}'):
        assert m2.accept_token(t)
    assert not m2.accept_token(EOT)
    assert not any(m2.accept_token(t) for t in _ids("<|eom_id|>")[:1])


def test_token_dispatch_and_token_tag_begin_end() -> None:
    tok = tokenizer("llama-3.1")
    tag = {"type": "structural_tag", "format": {
        "type": "token_dispatch",
        "rules": [[PYTHON_TAG, {"type": "sequence", "elements": [
            {"type": "const_string", "value": "go("},
            {"type": "regex", "pattern": "[0-9]+"},
            {"type": "tag", "begin": ")", "content": {"type": "const_string", "value": ""},
             "end": {"type": "token", "token": EOM}}]}]],
        "loop": False,
    }}
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(tok).compile_structural_tag(tag))
    _walk(m, _ids("hi ") + [PYTHON_TAG] + _ids("go(42)") + [EOM], tok.vocab_size)
    assert m.accept_token(EOT)


def test_token_formats_match_upstream_xgrammar_bit_for_bit() -> None:
    up = pytest.importorskip("xgrammar")
    hf = _hf_tokenizer()
    tok = tokenizer("llama-3.1")
    up_info = up.TokenizerInfo.from_huggingface(hf, vocab_size=tok.vocab_size,
                                                stop_token_ids=list(tok.stop_token_ids))
    # (a stop token as a terminal differs on purpose: upstream 0.2.8 never admits a stop
    # token through Token(...), so such a grammar cannot finish there; see the test above)
    ebnf = 'root ::= "Result: " (Token(128010) [0-9]+ Token(128011) | [a-z]+)'
    ours = xgr.GrammarMatcher(xgr.GrammarCompiler(tok).compile_grammar(ebnf))
    theirs = up.GrammarMatcher(up.GrammarCompiler(up_info).compile_grammar(ebnf))
    ids = _ids("Result: ") + [PYTHON_TAG] + _ids("12345") + [128011]
    a, b = new_bitmask(tok.vocab_size), up.allocate_token_bitmask(1, tok.vocab_size)
    for k, t in enumerate(ids + [EOT]):
        ours.fill_next_token_bitmask(a)
        theirs.fill_next_token_bitmask(b)
        mine, upstream = set(allowed(a, tok.vocab_size)), set(allowed(b.numpy(), tok.vocab_size))
        assert mine == upstream, (k, sorted(mine ^ upstream)[:20])
        assert ours.accept_token(t) and theirs.accept_token(t)
    assert ours.is_terminated() and theirs.is_terminated()


def test_token_strings_need_a_tokenizer_and_must_exist() -> None:
    with pytest.raises(StructuralTagError, match=r"\$\.format\.trigger_tokens\[0\].*needs a tokenizer"):
        xgr.Grammar.from_structural_tag(json.dumps(TOOL_CALL_TAG))
    ebnf = structural_tag_to_ebnf({"type": "structural_tag",
                                   "format": {"type": "token", "token": 5}})
    assert "Token(5)" in ebnf
    tok = tokenizer("llama-3.1")
    bad = {"type": "structural_tag", "format": {"type": "token", "token": "<|no_such_token|>"}}
    with pytest.raises(StructuralTagError, match=r"\$\.format\.token.*not a token of this tokenizer"):
        xgr.GrammarCompiler(tok).compile_structural_tag(bad)
    big = {"type": "structural_tag", "format": {"type": "token", "token": tok.vocab_size}}
    with pytest.raises(StructuralTagError, match="outside the vocabulary"):
        xgr.GrammarCompiler(tok).compile_structural_tag(big)


@pytest.mark.parametrize("fmt", [
    {"type": "exclude_token", "exclude_tokens": [5]},
    {"type": "any_tokens", "exclude_tokens": [5]},
])
def test_token_sets_are_written_as_exclude_token(fmt) -> None:
    g = str(xgr.Grammar.from_structural_tag({"type": "structural_tag", "format": fmt}))
    assert "ExcludeToken(5)" in g


def test_any_tokens_masks_on_a_real_tokenizer() -> None:
    """any_tokens between special-token begin and end, llama-3.1: at every step the mask
    equals the oracle's, and inside it is every token but special, stop and excluded
    ones, plus the end token."""
    tok = tokenizer("llama-3.1")
    tag_id, end_id = _ids("<|python_tag|>")[0], _ids("<|eom_id|>")[0]
    word = _ids(" forbidden")[0]
    tag = {"type": "structural_tag", "format": {
        "type": "tag", "begin": {"type": "token", "token": tag_id},
        "content": {"type": "any_tokens", "exclude_tokens": [word]},
        "end": {"type": "token", "token": end_id}}}
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(tok).compile_structural_tag(tag))
    assert m.accept_token(tag_id)
    special = set(tok.special_token_ids) | set(tok.stop_token_ids)
    want = {i for i in range(len(tok.decoded_vocab)) if i not in special} - {word} | {end_id}
    bm = new_bitmask(tok.vocab_size)
    for t in [*_ids(" hello world"), *_ids("{\"a\": 1}")]:
        ok, why = masks_equal_oracle(m, tok.vocab_size)
        assert ok, why
        m.fill_next_token_bitmask(bm)
        assert set(allowed(bm, tok.vocab_size).tolist()) == want
        assert not m.accept_token(word)
        assert m.accept_token(t)
    assert m.accept_token(end_id) and m.is_terminated() is False


def test_exclude_tokens_exclude_token_ids() -> None:
    """token_triggered_tags free tokens are whole tokens (TokenTagDispatch, as upstream):
    an excluded id is refused as a token, its text spelled by other tokens is not."""
    tok = tokenizer("llama-3.1")
    word = _ids(" forbidden")
    assert len(word) == 1
    tag = json.loads(json.dumps(TOOL_CALL_TAG))
    tag["format"]["exclude_tokens"] = [word[0], EOT]
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(tok).compile_structural_tag(tag))
    for t in _ids("this is"):
        assert m.accept_token(t)
    assert not m.accept_token(word[0])
    for t in _ids(" forb"):
        assert m.accept_token(t)
    ok, why = masks_equal_oracle(m, tok.vocab_size)
    assert ok, why
    by_id = json.loads(json.dumps(TOOL_CALL_TAG).replace('"<|python_tag|>"', str(PYTHON_TAG))
                       .replace('"<|eom_id|>"', str(EOM)))
    assert "(128010, " in structural_tag_to_ebnf(by_id)  # ids need no tokenizer
    by_id["format"]["exclude_tokens"] = [5]
    assert "excludes=(5)" in structural_tag_to_ebnf(by_id)
