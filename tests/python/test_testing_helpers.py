"""xgrammar2.testing's helpers that upstream's users call (names and results as upstream's)."""

import numpy as np
import pytest

import xgrammar2 as xgr
from xgrammar2 import testing

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("n", [1, 31, 32, 33, 100])
def test_bool_mask_bitmask_round_trip(n):
    rng = np.random.default_rng(n)
    bools = torch.from_numpy(rng.random((3, n)) < 0.5)
    bm = testing.bool_mask_to_bitmask(bools)
    assert bm.dtype == torch.int32 and bm.shape == (3, (n + 31) // 32)
    assert torch.equal(testing.bitmask_to_bool_mask(bm, n), bools)
    # padding bits are set (as upstream's helper sets them)
    assert testing.bitmask_to_bool_mask(bm)[:, n:].all()
    up = pytest.importorskip("xgrammar.testing")
    assert torch.equal(bm, up.bool_mask_to_bitmask(bools))
    assert torch.equal(testing.bitmask_to_bool_mask(bm, n), up.bitmask_to_bool_mask(bm, n))


def test_bitmask_to_bool_mask_checks():
    with pytest.raises(ValueError):
        testing.bitmask_to_bool_mask(torch.zeros((1, 1), dtype=torch.int64))
    with pytest.raises(ValueError):
        testing.bitmask_to_bool_mask(torch.zeros((1, 1), dtype=torch.int32), 33)


def test_single_token_bitmask_and_matcher_helpers():
    info = xgr.TokenizerInfo(["a", "b", "c"])
    m = testing._get_matcher_from_grammar_and_tokenizer_info('root ::= "b"', info)
    bm = xgr.allocate_token_bitmask(1, 3)
    m.fill_next_token_bitmask(bm)
    assert testing._is_single_token_bitmask(bm, 3) == (True, 1)
    m2 = testing._get_matcher_from_grammar_and_tokenizer_info('root ::= "a" | "b"', info)
    m2.fill_next_token_bitmask(bm)
    assert testing._is_single_token_bitmask(bm, 3) == (False, -1)
    assert testing._get_matcher_from_grammar('root ::= "xy"').accept_string("xy")


def test_json_format_styles_give_tool_parameter_grammars():
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"]}
    g = testing._json_schema_to_ebnf(schema, json_format="qwen_xml")
    ok = "<parameter=name>Bob</parameter><parameter=age>100</parameter>"
    assert testing._is_grammar_accept_string(g, ok)
    assert not testing._is_grammar_accept_string(g, "<parameter=age>x</parameter>")


def test_private_passes_say_they_are_missing():
    with pytest.raises(NotImplementedError, match="rule_inliner"):
        testing.GrammarFunctor.rule_inliner(None)
    with pytest.raises(NotImplementedError):
        testing._generate_range_regex(0, 10)
