"""``TagDispatch(...)``: how we print it (exactly as upstream xgrammar prints it) and what it
means, on hand-written grammars. These pin the semantics the xgrammar2 C core must give the
macro (upstream's): free text in which no trigger and no excluded string appears; a trigger
hands over to its rule (the trigger itself is consumed); afterwards free text again
(``loop_after_dispatch=true``) or the end; the free text may end anywhere."""

import json
import re

import pytest

from st_support import ENGINE, accepts, engine_module, fmt_ebnf, requires_engine
from xgrammar2.structural_tag.ebnf import tag_dispatch_body

pytestmark = requires_engine


def grammar(pairs, loop, excludes, extra):
    return "root ::= td\ntd ::= " + tag_dispatch_body(pairs, loop, excludes) + "\n" + extra


def test_printed_layout():
    body = tag_dispatch_body([("<function=", "triggered_tags_group")], True, ["</tool_call>"])
    assert body == (
        'TagDispatch(\n'
        '  ("<function=", triggered_tags_group),\n'
        '  loop_after_dispatch=true,\n'
        '  excludes=("</tool_call>")\n'
        ')'
    )
    assert tag_dispatch_body([], False, []) == "TagDispatch(\n  loop_after_dispatch=false,\n  excludes=()\n)"
    assert 'excludes=("a\\"b", "\\n")' in tag_dispatch_body([], False, ['a"b', "\n"])


def _dispatch_blocks(text):
    return re.findall(r"TagDispatch\(\n(?:  .*\n)*\)", text)


@pytest.mark.parametrize("fmt", [
    {"type": "triggered_tags", "triggers": ["<function="], "excludes": ["</tool_call>"],
     "tags": [{"begin": "<function=f>", "content": {"type": "const_string", "value": "x"}, "end": "</function>"}]},
    {"type": "any_text", "excludes": ["<a>", "b\"c"]},
    {"type": "tag", "begin": "<r>", "content": {"type": "any_text", "excludes": ["X"]}, "end": ["</r>", "</s>"]},
    {"type": "triggered_tags", "triggers": ["<a", "[b"], "stop_after_first": True,
     "tags": [{"begin": "<a>", "content": {"type": "const_string", "value": "1"}, "end": "."},
              {"begin": "[b]", "content": {"type": "const_string", "value": "2"}, "end": "."}]},
])
def test_same_text_as_upstream(fmt):
    """Our TagDispatch blocks are character for character the ones upstream prints."""
    import xgrammar

    ours = _dispatch_blocks(fmt_ebnf(fmt))
    theirs = _dispatch_blocks(str(xgrammar.Grammar.from_structural_tag(
        json.dumps({"type": "structural_tag", "format": fmt}))))
    assert ours and ours == theirs


AB = 'A ::= "1"\nB ::= "2"\n'


def test_free_text_and_dispatch():
    g = grammar([("<f", "A"), ("[g", "B")], True, [], AB)
    assert accepts(g, "")
    assert accepts(g, "plain text ✓")
    assert accepts(g, "x<f1y[g2z<f1")
    assert not accepts(g, "x<f2")  # a trigger must be followed by its own rule
    assert not accepts(g, "x<f")  # ... even at the end


def test_free_text_may_end_in_a_partial_trigger():
    g = grammar([("<function=", "A")], True, [], AB)
    for s in ["<", "x<func", "x<function", "<function<funct"]:
        assert accepts(g, s), s
    assert not accepts(g, "x<function=")


def test_excludes():
    g = grammar([("<f", "A")], True, ["</o>", "STOP"], AB)
    assert accepts(g, "a</ob STO")  # partial excluded strings are fine, at the end too
    assert accepts(g, "</o")
    assert not accepts(g, "a</o>")
    assert not accepts(g, "xSTOPx")
    # excludes only apply to the free text, not to the dispatched rule
    g2 = grammar([("<f", "C")], True, ["STOP"], 'C ::= "STOP!"\n')
    assert accepts(g2, "<fSTOP!")


def test_loop_vs_single_dispatch():
    loop = grammar([("<f", "A")], True, [], AB)
    once = grammar([("<f", "A")], False, [], AB)
    assert accepts(loop, "a<f1b<f1c")
    assert accepts(once, "a<f1")
    assert accepts(once, "abc")
    assert not accepts(once, "a<f1b")
    assert not accepts(once, "a<f1<f1")


def test_overlapping_triggers():
    # A trigger that ends first wins: "abc" completes before "bcd" could.
    g = grammar([("abc", "A"), ("bcd", "B")], True, [], AB)
    assert accepts(g, "abc1")
    assert accepts(g, "bcd2")
    assert not accepts(g, "abcd2")
    # Two triggers ending at the same place: the longer one ("ab" over its suffix "b").
    g = grammar([("ab", "A"), ("b", "B")], True, [], AB)
    assert accepts(g, "ab1")
    assert accepts(g, "xb2")
    assert not accepts(g, "ab2")
    # A trigger that is a prefix of another: either may dispatch (upstream keeps both
    # readings until the text decides).
    g = grammar([("<a", "A"), ("<ab", "B")], True, [], AB)
    assert accepts(g, "<a1")
    assert accepts(g, "<ab2")
    assert not accepts(g, "<ab")
    assert not accepts(g, "<ab1")


def test_dispatched_rule_sees_text_after_trigger():
    g = grammar([("<function=", "G")], True, [], 'G ::= "get>" [0-9]+ "</function>"\n')
    assert accepts(g, "hi <function=get>42</function> bye")
    assert not accepts(g, "hi <function=get>42 bye")


def _vocab_matcher(text, vocab):
    """A matcher over a small vocabulary of multi-byte tokens (plus a stop token)."""
    x = engine_module()
    stop = len(vocab)
    if ENGINE == "xgrammar2":
        info = x.TokenizerInfo([v.encode() for v in vocab] + [b"</s>"], x.VocabType.RAW,
                               stop_token_ids=[stop], special_token_ids=[stop])
    else:
        info = x.TokenizerInfo(list(vocab) + ["</s>"], vocab_type=x.VocabType.RAW, stop_token_ids=[stop])
    compiled = x.GrammarCompiler(info, cache_enabled=False).compile_grammar(text)
    return x, x.GrammarMatcher(compiled, terminate_without_stop_token=False), stop


def _allowed(x, matcher, n):
    import torch

    bm = x.allocate_token_bitmask(1, n)
    matcher.fill_next_token_bitmask(bm)
    row = bm[0].tolist()
    return {i for i in range(n) if (row[i // 32] >> (i % 32)) & 1}


def test_triggers_split_across_tokens():
    pytest.importorskip("torch")
    vocab = ["a", "<", "<fun", "ction=", "get>", "put>", "1", "</function>", "x<function=get>",
             "1</function>y<fun", "<function=", "=", "ction=get>1</function>", "<function=put>"]
    text = grammar([("<function=", "G")], True, ["</function>"], 'G ::= "get>" [0-9]+ "</function>"\n')
    ids = {v: i for i, v in enumerate(vocab)}
    x, m, stop = _vocab_matcher(text, vocab)
    n = len(vocab) + 1
    # free text: every token that does not complete a trigger into a wrong rule
    allowed = _allowed(x, m, n)
    assert {ids["a"], ids["<fun"], ids["x<function=get>"], ids["<function="], stop} <= allowed
    assert ids["<function=put>"] not in allowed  # the trigger completes inside the token
    assert ids["</function>"] not in allowed  # excluded in free text
    for tok in ["a", "<fun", "ction=", "get>", "1", "</function>"]:  # trigger split 2 ways
        assert m.accept_token(ids[tok]), tok
    assert m.accept_token(ids["x<function=get>"])  # free text + trigger + rule in one token
    allowed = _allowed(x, m, n)
    assert ids["1"] in allowed and stop not in allowed and ids["a"] not in allowed
    assert m.accept_token(ids["1</function>y<fun"])  # rule end, free text, partial trigger
    assert m.accept_token(ids["ction=get>1</function>"])
    assert stop in _allowed(x, m, n)
    assert m.accept_token(stop)
