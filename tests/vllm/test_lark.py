"""Lark ``grammar`` requests on the xgrammar2 backend: vLLM's ``grammar_is_likely_lark``
picks them out, xgrammar2's Lark front end (``Grammar.from_lark`` / ``compile_lark``) compiles
them. The validator rewrites a Lark grammar to the EBNF the engine then compiles, unless its
special tokens need the tokenizer (the engine compiles those as Lark)."""

import re

import pytest

from vllm_harness import Harness, allowed, require_vllm  # noqa: F401 - puts plugins/vllm on sys.path

require_vllm()

from xgrammar2_vllm.backend import grammar_spec_to_ebnf  # noqa: E402

EOS = 2  # <|im_end|> in the tiny tokenizer


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
        ('start: x~3\nx: "z"', ["zzz"], ["zz", "zzzz"]),
        # what the old literal-subset converter refused
        ("start: /[a-z]+/ NUM\n%import common.INT -> NUM", ["ab12"], ["12", "ab"]),
        ('start: "a"i "b"', ["ab", "Ab"], ["aB"]),
        ('%import common.WS\n%ignore WS\nstart: "[" INT ("," INT)* "]"\n%import common.INT',
         ["[1]", "[1, 2 ,3 ]"], ["[1 2]", " [1]"]),
        ('start: "v=" %json {"type": "integer", "minimum": 0}', ["v=0", "v=42"], ["v=-1", "v="]),
    ],
)
def test_lark_becomes_ebnf(lark, good, bad):
    ebnf = grammar_spec_to_ebnf(lark, validate=True)
    assert ebnf.startswith("root ::= ") and re.search("::=", ebnf)
    for text in good:
        assert _matches(ebnf, text), (lark, text, ebnf)
    for text in bad:
        assert not _matches(ebnf, text), (lark, text, ebnf)


def test_ebnf_passes_through():
    g = 'root ::= "a" b\nb ::= [0-9]+'
    assert grammar_spec_to_ebnf(g, validate=True) is g


def test_lark_with_named_special_tokens_stays_lark():
    g = 'start: <|im_start|> "x"'
    assert grammar_spec_to_ebnf(g, validate=True) == g


@pytest.mark.parametrize(
    "lark, needle",
    [
        ('start: x\n', "unknown name 'x'"),
        ('item: "a"', "no start rule found"),
        ('start: "a"\nstart: "b"', "duplicate rule or terminal 'start'"),
        ('start: pair{"a"}\npair{x}: x x', "templates are not supported"),
        ('start: "b".."a"', "range start must not exceed end"),
        ("start: /a(?=b)/", "Lookahead assertion is not supported"),
        ('start: r\nr[max_tokens=0]: /a+/', "max_tokens must be positive"),
    ],
)
def test_invalid_lark_is_a_located_error(lark, needle):
    with pytest.raises(ValueError) as ei:
        grammar_spec_to_ebnf(lark, validate=True)
    msg = str(ei.value)
    assert needle in msg and "Lark error at line " in msg, msg


def test_request_flow(harness):
    """Through vLLM's validation and the manager: the Lark request is rewritten to EBNF and
    its tokens walk to the stop token."""
    h = harness
    lark = '%import common.INT\nstart: "(" INT ("," INT)* ")"'
    sp = h.params(grammar=lark)
    assert sp.structured_outputs.grammar.startswith("root ::= ")
    req = h.request(grammar=lark)
    g = req.structured_output_request.grammar
    for t in h.encode("(12,3)"):
        assert t in allowed(h.bitmask(req)[0], h.vocab_size)
        assert h.manager.accept_tokens(req, [t])
    assert EOS in allowed(h.bitmask(req)[0], h.vocab_size)
    assert h.manager.accept_tokens(req, [EOS]) and g.is_terminated()


def test_special_token_request_compiles_with_the_tokenizer(harness):
    h = harness
    lark = 'start: <|im_start|> "ok"'
    sp = h.params(grammar=lark)
    assert sp.structured_outputs.grammar == lark  # kept: the engine resolves the token
    req = h.request(grammar=lark)
    start_id = 1  # <|im_start|>
    assert allowed(h.bitmask(req)[0], h.vocab_size) == {start_id}
    assert h.manager.accept_tokens(req, [start_id])
    for t in h.encode("ok"):
        assert h.manager.accept_tokens(req, [t])
    assert h.manager.accept_tokens(req, [EOS])


def test_invalid_lark_request_is_a_400(harness):
    from vllm.exceptions import VLLMValidationError

    with pytest.raises(VLLMValidationError) as ei:
        harness.params(grammar='start: "a" missing')
    msg = str(ei.value)
    assert msg.startswith("xgrammar2: invalid grammar") and "line 1, column 12" in msg, msg
