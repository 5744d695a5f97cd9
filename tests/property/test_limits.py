"""Every documented limit (docs/limits.md) ends a pathological request with a
GrammarLimitError (a ValueError) that names the limit, quickly, and leaves the engine
usable: input size, JSON nesting (schemas and structural tags), EBNF / regex nesting,
rules, automaton states, parser row size and parser work per byte."""

from __future__ import annotations

import json
import time

import pytest

import xgrammar2 as xgr
from reliability_helpers import tokenizer

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def comp():
    return xgr.GrammarCompiler(tokenizer(), cache_enabled=False)


def raises_limit(fn, *args, match: str, seconds: float = 10.0, **kwargs):
    t0 = time.perf_counter()
    with pytest.raises(xgr.GrammarLimitError, match=match) as ei:
        fn(*args, **kwargs)
    assert time.perf_counter() - t0 < seconds, f"took {time.perf_counter() - t0:.1f}s to fail"
    assert isinstance(ei.value, ValueError)
    return ei.value


def test_defaults_are_documented():
    lim = xgr.limits.get_limits()
    assert lim == {"max_input_bytes": 32 * 1024 * 1024, "max_json_nesting": 256}


def test_set_limits_validates_and_restores():
    old = xgr.limits.set_limits(max_json_nesting=10)
    try:
        assert xgr.limits.get_limits()["max_json_nesting"] == 10
        with pytest.raises(TypeError):
            xgr.limits.set_limits(max_nope=1)
        with pytest.raises(ValueError):
            xgr.limits.set_limits(max_json_nesting=0)
    finally:
        xgr.limits.set_limits(**old)
    assert xgr.limits.get_limits() == old


def test_input_size(comp):
    old = xgr.limits.set_limits(max_input_bytes=1000)
    try:
        raises_limit(comp.compile_grammar, 'root ::= "' + "a" * 2000 + '"', match="max_input_bytes")
        raises_limit(comp.compile_regex, "a" * 2000, match="max_input_bytes")
        raises_limit(comp.compile_json_schema, json.dumps({"enum": ["x" * 2000]}), match="max_input_bytes")
        raises_limit(comp.compile_structural_tag, json.dumps(
            {"type": "structural_tag", "format": {"type": "const_string", "value": "x" * 2000}}),
            match="max_input_bytes")
        comp.compile_regex("a" * 100)  # under the limit
    finally:
        xgr.limits.set_limits(**old)


@pytest.mark.parametrize("depth", [300, 5000, 100000])
def test_json_schema_nesting(comp, depth):
    text = '{"type":"array","items":' * depth + '{"type":"integer"}' + "}" * depth
    raises_limit(comp.compile_json_schema, text, match="max_json_nesting")
    if depth <= 300:  # a dict this deep can be built without hitting Python's own limit
        raises_limit(comp.compile_json_schema, json.loads(text), match="max_json_nesting")


def test_json_schema_nesting_under_the_limit_compiles(comp):
    depth = 100
    text = '{"type":"array","items":' * depth + '{"type":"integer"}' + "}" * depth
    compiled = comp.compile_json_schema(text)
    m = xgr.GrammarMatcher(compiled)
    assert m.accept_string("[" * depth + "1" + "]" * depth)


@pytest.mark.parametrize("depth", [300, 20000])
def test_structural_tag_nesting(comp, depth):
    text = ('{"type":"structural_tag","format":' + '{"type":"sequence","elements":[' * depth
            + '{"type":"const_string","value":"a"}' + "]}" * depth + "}")
    raises_limit(comp.compile_structural_tag, text, match="max_json_nesting")
    raises_limit(xgr.Grammar.from_structural_tag, text, match="max_json_nesting")


def test_ebnf_and_regex_nesting(comp):
    raises_limit(comp.compile_grammar, "root ::= " + "(" * 5000 + '"a"' + ")" * 5000, match="nesting")
    raises_limit(comp.compile_regex, "(" * 5000 + "a" + ")" * 5000, match="nesting")
    comp.compile_grammar("root ::= " + "(" * 900 + '"a"' + ")" * 900)  # under the limit


def test_max_rules():
    c = xgr.GrammarCompiler(tokenizer(), cache_enabled=False, max_rules=50, inline_max_states=-1)
    ebnf = "root ::= r0\n" + "".join(f'r{i} ::= "x" r{i + 1} | "y"\n' for i in range(100)) + 'r100 ::= "z"\n'
    raises_limit(c.compile_grammar, ebnf, match="max_rules")


def test_max_fsm_states():
    c = xgr.GrammarCompiler(tokenizer(), cache_enabled=False, max_fsm_states=1000)
    raises_limit(c.compile_grammar, 'root ::= "' + "ab" * 2000 + '"', match="max_fsm_states")


def test_max_row_items():
    c = xgr.GrammarCompiler(tokenizer(), cache_enabled=False, max_row_items=50, inline_max_states=-1)
    compiled = c.compile_grammar('root ::= s\ns ::= s s | [a-z] | ""\n')
    m = xgr.GrammarMatcher(compiled)
    with pytest.raises(xgr.GrammarLimitError, match="max_row_items"):
        for _ in range(200):
            m.accept_string("a")
    steps = m.num_steps
    m.rollback(min(steps, 2))  # still usable
    assert m.num_steps == steps - min(steps, 2)


def test_max_step_work_default_bounds_an_ambiguous_grammar(comp):
    compiled = comp.compile_grammar('root ::= s\ns ::= s s s | s s | [a-z] | ""\n')
    m = xgr.GrammarMatcher(compiled)
    t0 = time.perf_counter()
    worst = 0.0
    with pytest.raises(xgr.GrammarLimitError, match="max_step_work"):
        for _ in range(5000):
            t = time.perf_counter()
            m.accept_string("abcdefgh")
            worst = max(worst, time.perf_counter() - t)
    assert time.perf_counter() - t0 < 60
    assert worst < 5.0, f"one 8-byte step took {worst:.2f}s"
    steps = m.num_steps
    assert m.accept_string("") in (True, False)
    assert m.num_steps >= steps  # usable after the error


def test_max_step_work_option():
    c = xgr.GrammarCompiler(tokenizer(), cache_enabled=False, max_step_work=5000)
    m = xgr.GrammarMatcher(c.compile_grammar('root ::= s\ns ::= s s | [a-z] | ""\n'))
    with pytest.raises(xgr.GrammarLimitError, match="5000 work units"):
        for _ in range(500):
            m.accept_string("ab")
    with pytest.raises(ValueError):
        xgr.GrammarCompiler(tokenizer(), max_step_work=-5)


def test_repetition_bounds(comp):
    with pytest.raises(ValueError, match="too large|bound"):
        comp.compile_regex("a{99999999999}")
    with pytest.raises(ValueError):
        comp.compile_grammar('root ::= "a"{5,2}')
    comp.compile_regex("a{1000000000}")  # compressed, not unrolled
