"""Rule attributes at run time (temperature, max_chars, max_tokens, lazy, capture),
differential against real upstream xgrammar 0.2.8 on the same grammars and inputs: masks
after every token, the reported temperature, acceptance and captures must agree."""

from typing import List, Optional, Sequence

import pytest

import xgrammar2 as xgr

upstream = pytest.importorskip("xgrammar")


def _pair(kind: str, grammar: str, vocab: Sequence, stops: Sequence[int] = ()):
    """(ours, theirs): compiled grammars of both libraries."""
    out = []
    for mod in (xgr, upstream):
        info = mod.TokenizerInfo(list(vocab), stop_token_ids=list(stops))
        g = mod.Grammar.from_lark(grammar) if kind == "lark" else mod.Grammar.from_ebnf(grammar)
        out.append((mod, info, mod.GrammarCompiler(info, cache_enabled=False).compile_grammar(g)))
    return out


def _allowed(mod, info, matcher) -> List[int]:
    bm = mod.allocate_token_bitmask(1, info.vocab_size)
    matcher.fill_next_token_bitmask(bm)
    return [t for t in range(info.vocab_size) if (int(bm[0, t // 32]) >> (t % 32)) & 1]


def _walk(kind, grammar, vocab, tokens, *, default_temperature: Optional[float] = None,
          stops=()):
    """Per step (mask, temperature, accepted, terminated) for both libraries."""
    traces = []
    for mod, info, compiled in _pair(kind, grammar, vocab, stops):
        m = mod.GrammarMatcher(compiled, terminate_without_stop_token=not stops,
                               default_temperature=default_temperature)
        trace = []
        for t in tokens:
            temp = m.temperature
            trace.append((_allowed(mod, info, m), None if temp is None else round(temp, 5)))
            ok = m.accept_token(t)
            trace.append(("accept", t, ok, m.is_terminated()))
            if not ok:
                break
        temp = m.temperature
        trace.append((_allowed(mod, info, m), None if temp is None else round(temp, 5)))
        traces.append(trace)
    return traces


CASES = [
    # temperature: enters and leaves a rule, nested, defaults
    ("ebnf", 'root ::= "a" value "z"\nvalue[temperature=0.6] ::= "x"+', ["a", "x", "z", "xz", "ax"],
     [0, 1, 1, 2], 0.1),
    ("lark", 'start: "a" v "z"\nv[temperature=0.25]: /x+/', ["a", "x", "z", "xz"], [0, 3], None),
    # max_chars: code points across tokens, nested budgets, per occurrence
    ("lark", 'start: r ">"\nr[max_chars=2]: TEXT\nTEXT: /(\\n|.)*/',
     ["a", "ab", "abc", "a>", "ab>", ">", "中", "中文", "中文>"], [6, 6, 5], None),
    ("lark", 'start: r ">"\nr[max_chars=2]: TEXT\nTEXT: /(\\n|.)*/',
     ["a", "ab", "abc", "a>", "ab>", ">", "中", "中文", "中文>"], [0, 3], None),
    ("lark", 'start: outer ">"\nouter[max_chars=3]: "x" inner\ninner[max_chars=5]: /[a-z]*/',
     ["x", "a", "b", "c", ">", "xa"], [0, 1, 2, 4], None),
    ("lark", 'start: item ":" item ">"\nitem[max_chars=2]: /[a-z]*/',
     ["a", "b", ":", ">", "ab", "abc"], [4, 2, 0, 1, 3], None),
    ("ebnf", 'root ::= "<" t "," b "|"\nt ::= [a-z]*\nb[max_chars=2] ::= [a-z]*',
     ["<", "a", "b", ",", "|", "a,bbb|", "a,bb|", ",bbb"], [0, 1, 3, 2, 2, 4], None),
    # max_tokens: soft budget, closes where the region can end
    ("lark", 'start: "<t>" r "</t>" ans\nr[max_tokens=2]: /([a-z]* )+/\nans: "1"',
     ["ab ", "cd", " ", "</t>", "1", "<t>", "x"], [5, 0, 0, 3, 4], None),
    ("lark", 'start: "<t>" r "</t>" ans\nr[max_tokens=2]: /([a-z]* )+/\nans: "1"',
     ["ab ", "cd", " ", "</t>", "1", "<t>", "x"], [5, 1, 1, 2, 3, 4], None),
    ("lark", 'start: r+ "1"\nr[max_tokens=2]: /[a-z]+ /',
     ["ab ", "cd", " ", "</t>", "1", "<t>", "x"], [0, 0, 0, 1, 1, 2, 4], None),
    ("ebnf", 'root ::= a " " b\na[max_tokens=1] ::= sub\nb ::= sub\nsub ::= [a-z] sub | [a-z]',
     ["ab ", "cd", " ", "</t>", "1", "<t>", "x"], [1, 2, 1, 1], None),
    # a rule that is one counted repetition past the counter threshold (16): its attributes
    # hold (it once became the counter rule itself and lost them)
    ("ebnf", 'root ::= r ">"\nr[max_chars=3] ::= [a-z]{0,30}', ["a", "ab", "abc", "abcd", ">", "a>"],
     [1, 0, 4], None),
    ("ebnf", 'root ::= r ">"\nr[max_chars=3] ::= [a-z]{0,30}', ["a", "ab", "abc", "abcd", ">", "a>"],
     [0, 0, 0, 0], None),
    ("ebnf", 'root ::= "a" v "z"\nv[temperature=0.6] ::= "x"{0,40}', ["a", "x", "z", "xz"], [0, 1, 1, 3],
     0.1),
    # combined attributes
    ("lark", 'start: value ">"\nvalue[max_chars=2, temperature=0.7]: /[a-z]*/',
     ["a", "ab", "abc", ">"], [1, 3], None),
    ("lark", 'start: r ">"\nr[max_tokens=2, max_chars=3]: TEXT\nTEXT: /(\\n|.)*/',
     ["a", "ab", ">"], [1, 0, 2], None),
]


@pytest.mark.parametrize("kind, grammar, vocab, tokens, default", CASES)
def test_masks_and_temperature_match_upstream(kind, grammar, vocab, tokens, default):
    ours, theirs = _walk(kind, grammar, vocab, tokens, default_temperature=default)
    assert ours == theirs


@pytest.mark.parametrize("grammar, text, dedup", [
    ('start: "a" v "b"\nv[capture]: /[0-9]+/', "a123b", True),
    ('start: "a" v "b"\nv[capture]: /[0-9]+/', "a123b", False),
    ('start: outer\nouter[capture="o"]: "x" inner "!"\ninner[capture="i"]: /[a-z]+/', "xabc!", True),
    ('start: (item ",")* item\nitem[capture]: /[0-9]+/', "1,22,333", True),
    ('start: lst\nlst[capture]: ITEM "," lst | ITEM\nITEM: /[0-9]+/', "1,2,3", True),
    ('start[capture="all"]: "a" /[0-9]+/ "b"', "a12b", True),
    ('start: "a" v "b"\nv[capture]: /[0-9]{1,40}/', "a123b", True),
])
def test_captures_match_upstream(grammar, text, dedup):
    got = []
    for mod in (xgr, upstream):
        info = mod.TokenizerInfo([])
        compiled = mod.GrammarCompiler(info, cache_enabled=False).compile_grammar(
            mod.Grammar.from_lark(grammar))
        m = mod.GrammarMatcher(compiled, terminate_without_stop_token=True)
        assert m.accept_string(text)
        got.append(m.get_captures(deduplicate=dedup))
    assert got[0] == got[1]


def test_captures_follow_rollback_and_fork():
    info = xgr.TokenizerInfo(["a", "1", "2", "b", "</s>"], stop_token_ids=[4])
    compiled = xgr.GrammarCompiler(info).compile_grammar(
        xgr.Grammar.from_lark('start: "a" v "b"\nv[capture]: /[0-9]+/'))
    m = xgr.GrammarMatcher(compiled)
    for t in [0, 1, 3]:
        assert m.accept_token(t)
    f = m.fork()
    assert m.get_captures() == [("v", b"1")]
    m.rollback(2)
    assert m.get_captures() == []
    bm = xgr.allocate_token_bitmask(1, info.vocab_size)
    m.fill_next_token_bitmask(bm)  # records nothing
    assert m.get_captures(deduplicate=False) == []
    for t in [2, 2, 3]:
        assert m.accept_token(t)
    assert m.get_captures() == [("v", b"22")]
    assert f.get_captures() == [("v", b"1")]


def test_temperature_rollback_reset_and_default_validation():
    info = xgr.TokenizerInfo(["a", "x", "z"])
    compiled = xgr.GrammarCompiler(info).compile_grammar(
        xgr.Grammar.from_ebnf('root ::= "a" value "z"\nvalue[temperature=0.6] ::= "x"+'))
    m = xgr.GrammarMatcher(compiled, default_temperature=0.1)
    assert m.temperature == pytest.approx(0.1)
    assert m.accept_token(0) and m.temperature == pytest.approx(0.6)
    assert m.accept_token(1) and m.accept_token(2) and m.temperature == pytest.approx(0.1)
    m.rollback(1)
    assert m.temperature == pytest.approx(0.6)
    m.reset()
    assert m.temperature == pytest.approx(0.1)
    for bad in (-1.0, float("inf"), float("nan")):
        with pytest.raises(RuntimeError, match="finite non-negative"):
            xgr.GrammarMatcher(compiled, default_temperature=bad)


def test_budget_state_survives_rollback():
    """Rolling back over a budget's expiry restores the budget (the rows hold it)."""
    info = xgr.TokenizerInfo(["ab ", "cd", " ", "</t>", "1", "<t>", "x"])
    compiled = xgr.GrammarCompiler(info).compile_grammar(xgr.Grammar.from_lark(
        'start: "<t>" r "</t>" ans\nr[max_tokens=2]: /([a-z]* )+/\nans: "1"'))
    m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
    for t in [5, 0, 0]:
        assert m.accept_token(t)
    assert _allowed(xgr, info, m) == [3]
    m.rollback(1)
    assert 0 in _allowed(xgr, info, m)
    assert m.accept_token(0) and _allowed(xgr, info, m) == [3]


def test_ebnf_lazy_ends_at_first_completion():
    info = xgr.TokenizerInfo(["a", "x", "z", "xz", "xx"])
    compiled = xgr.GrammarCompiler(info).compile_grammar(
        xgr.Grammar.from_ebnf('root ::= "a" value "z"\nvalue[lazy] ::= "x"+'))
    m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
    assert m.accept_token(0)
    assert _allowed(xgr, info, m) == [1, 3]  # "xx" would go on after value could end
    assert m.accept_token(1)
    assert _allowed(xgr, info, m) == [2]
    assert not m.accept_token(1)


def test_budget_in_linked_structural_tag_matches_upstream():
    """A structural tag given as JSON text is linked from cached fragments in the core
    (compile/link.c): the skeleton's budgeted free text keeps its attributes."""
    import json

    vocab = ["<think>", "</think>", "a", "b ", "<f>", "</f>", '{"x": 1}', "{", "}", '"x"', ":",
             "1", " ", "<eos>"]
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    stag = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "tag", "begin": "<think>", "content": {"type": "any_text", "max_tokens": 2},
         "end": "</think>"},
        {"type": "triggered_tags", "triggers": ["<f>"], "tags": [
            {"begin": "<f>", "content": {"type": "json_schema", "json_schema": schema},
             "end": "</f>"}], "at_least_one": True, "stop_after_first": True}]}}
    results = []
    for mod in (xgr, upstream):
        info = mod.TokenizerInfo(vocab, stop_token_ids=[13])
        compiler = mod.GrammarCompiler(info, cache_enabled=True)
        for _ in range(2):  # the second compile links cached fragments
            compiled = compiler.compile_structural_tag(json.dumps(stag))
            m = mod.GrammarMatcher(compiled)
            trace = []
            for t in [0, 2, 3, 1, 4, 6, 5]:
                trace.append(_allowed(mod, info, m))
                assert m.accept_token(t)
            trace.append(_allowed(mod, info, m))
            results.append(trace)
    assert results[2] == results[0] == results[1] == results[3]
    assert results[0][3] == [1]  # the budget is spent: only "</think>"


def test_traverse_draft_tree_matches_upstream():
    """Per-node masks and temperatures of a draft tree (with a rejected branch and a
    sibling), and the matcher's state unchanged afterwards."""
    import torch

    grammar = 'start: "a" value "z"\nvalue[temperature=0.6]: /x+/'
    vocab = ["a", "b", "x", "z", " "]
    nxt = torch.tensor([1, 2, 4, -1, -1, -1], dtype=torch.int64)
    sib = torch.tensor([-1, 3, 5, -1, -1, -1], dtype=torch.int64)
    draft = torch.tensor([0, 0, 2, 1, 3, 2], dtype=torch.int64)
    got = []
    for mod in (xgr, upstream):
        info = mod.TokenizerInfo(vocab, vocab_size=len(vocab), stop_token_ids=[])
        compiled = mod.GrammarCompiler(info).compile_grammar(
            mod.Grammar.from_lark(grammar, tokenizer_info=info))
        m = mod.GrammarMatcher(compiled, default_temperature=0.1)
        bm = mod.allocate_token_bitmask(6, len(vocab))
        temps = torch.empty(6, dtype=torch.float32)
        assert m.traverse_draft_tree(nxt, sib, draft, bm, temperatures=temps)
        got.append((bm.tolist(), [round(float(t), 5) for t in temps], m.temperature,
                    _allowed(mod, info, m)))
    assert got[0] == got[1]
