"""UTF-8 at the byte level: tokens that end or start inside a multi-byte code point, and
SentencePiece byte-fallback <0xNN> tokens, are accepted exactly when the bytes fit."""

from __future__ import annotations

import xgrammar2 as xgr
from runtime_helpers import allowed, compiler, masks_equal_oracle, new_bitmask, tokenizer


def token_id(tok: xgr.TokenizerInfo, b: bytes) -> int:
    return tok.decoded_vocab.index(b)


def test_byte_fallback_tokens_build_a_code_point() -> None:
    tok = tokenizer("llama-2")
    compiled = compiler("llama-2").compile_grammar('root ::= "\\u4e2d" [\\u00e0-\\u00ff]+')
    m = xgr.GrammarMatcher(compiled)
    e4, b8, ad = (token_id(tok, bytes([b])) for b in (0xE4, 0xB8, 0xAD))
    bm = new_bitmask(tok.vocab_size)
    m.fill_next_token_bitmask(bm)
    ids = set(allowed(bm, tok.vocab_size).tolist())
    assert e4 in ids and b8 not in ids
    assert m.accept_token(e4)
    assert not m.accept_token(ad)  # the wrong continuation byte
    assert m.accept_token(b8) and m.accept_token(ad)
    ok, why = masks_equal_oracle(m, tok.vocab_size)
    assert ok, why
    # after 中 only Latin-1 letters: the 0xC3 lead byte is allowed, 0xE4 is not
    m.fill_next_token_bitmask(bm)
    ids = set(allowed(bm, tok.vocab_size).tolist())
    assert token_id(tok, b"\xc3") in ids and e4 not in ids


def test_byte_level_tokens_split_inside_code_points() -> None:
    tok = tokenizer("qwen3")
    vocab = tok.decoded_vocab
    # tokens that end inside a code point: an incomplete UTF-8 tail
    partial = [i for i, b in enumerate(vocab) if b and b[-1] >= 0xC0]
    assert partial, "expected byte-level tokens that end with a lead byte"
    compiled = compiler("qwen3").compile_grammar(r'root ::= [\u0080-\U0010ffff]{1,8} "!"')
    m = xgr.GrammarMatcher(compiled)
    bm = new_bitmask(tok.vocab_size)
    m.fill_next_token_bitmask(bm)
    ids = set(allowed(bm, tok.vocab_size).tolist())
    # a lone lead byte token may start a code point; a lone continuation byte may not
    lead = vocab.index(b"\xe4") if b"\xe4" in vocab else None
    cont = vocab.index(b"\x80") if b"\x80" in vocab else None
    if lead is not None:
        assert lead in ids
    if cont is not None:
        assert cont not in ids
    ok, why = masks_equal_oracle(m, tok.vocab_size)
    assert ok, why
    # accepting a lead byte leaves a state where only continuation bytes fit
    if lead is not None:
        assert m.accept_token(lead)
        ok, why = masks_equal_oracle(m, tok.vocab_size)
        assert ok, why
        m.fill_next_token_bitmask(bm)
        for t in allowed(bm, tok.vocab_size)[:200]:
            assert 0x80 <= vocab[t][0] <= 0xBF


def test_invalid_utf8_in_grammar_text_is_a_clear_error() -> None:
    import pytest

    # a lone surrogate cannot be encoded as UTF-8
    with pytest.raises(ValueError, match="(?i)utf-?8|surrogate"):
        xgr.Grammar.from_ebnf('root ::= "\udcff"')
    with pytest.raises(ValueError, match="(?i)utf-?8|surrogate"):
        xgr.Grammar.from_ebnf("root ::= \"\udcff\"")


def test_accept_string_with_bytes_that_split_a_code_point() -> None:
    compiled = compiler("qwen3").compile_grammar('root ::= "héllo"')
    m = xgr.GrammarMatcher(compiled)
    data = "héllo".encode()
    assert m.accept_string(data[:2])  # ends inside é
    assert not m.fork().accept_string(b"\xa8")  # wrong continuation byte
    assert m.accept_string(data[2:])
    assert m.is_completed()
