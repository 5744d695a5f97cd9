"""The plugin's Lark -> EBNF converter (pure Python: runs without vLLM too)."""

import re

import pytest

import vllm_harness  # noqa: F401 - puts plugins/vllm on sys.path
from xgrammar2_vllm.lark import LarkConversionError, lark_to_ebnf


def _matches(ebnf, text):
    import xgrammar2 as xgr

    info = xgr.TokenizerInfo([chr(c) for c in range(32, 127)] + ["\n", "<eos>"], stop_token_ids=[96])
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_grammar(ebnf))
    return m.accept_string(text) and m.is_completed()


@pytest.mark.parametrize(
    "lark, good, bad",
    [
        ('start: "yes" | "no"', ["yes", "no"], ["maybe", "yesno"]),
        ('start: greeting (" " NAME)?\ngreeting: "hi" | "hello"\nNAME: ("a".."z")+\n',
         ["hi", "hello bob"], ["hi ", "hey"]),
        ('?start: item ("," item)*\n!item: DIGIT~1..3 -> num\nDIGIT: "0".."9"', ["1", "12,345,6"], ["1234", "1,"]),
        ('start: "(" [inner] ")"\ninner: "x"+\n// a comment\n', ["()", "(xxx)"], ["(y)"]),
        ('start: "a"\n     | "b" "c"\n', ["a", "bc"], ["b"]),
        ('start: "q\\"\\n" root\nroot: "r"', ['q"\nr'], ["qr"]),
        ('start: x~3\nx: "z"', ["zzz"], ["zz", "zzzz"]),
    ],
)
def test_literal_lark_converts_exactly(lark, good, bad):
    ebnf = lark_to_ebnf(lark)
    assert ebnf.startswith("root ::= ")
    for text in good:
        assert _matches(ebnf, text), (lark, text, ebnf)
    for text in bad:
        assert not _matches(ebnf, text), (lark, text, ebnf)


@pytest.mark.parametrize(
    "lark, needle",
    [
        ("start: /[a-z]+/", "regular-expression terminal"),
        ('start: "a"i', "case-insensitive"),
        ("start: WORD\n%import common.WORD", "directive %import"),
        ('start: "a"\n%ignore " "', "directive %ignore"),
        ('start: x\n', "undefined rule or terminal x"),
        ('item: "a"', "no `start` rule"),
        ('start: "a"\nstart: "b"', "defined twice"),
        ('start: pair{"a"}\npair{x}: x x', "template"),
        ("", "empty grammar"),
        ('start: "b".."a"', "bad range"),
    ],
)
def test_unsupported_lark_is_a_clear_error(lark, needle):
    with pytest.raises(LarkConversionError) as ei:
        lark_to_ebnf(lark)
    msg = str(ei.value)
    assert needle in msg and "EBNF" in msg, msg
    assert isinstance(ei.value, ValueError)


def test_lark_detection_matches_vllm():
    """vLLM calls a grammar Lark when no line has '::='; the plugin uses vLLM's own check."""
    assert re.search("::=", lark_to_ebnf('start: "a"'))
