"""The matcher's debug line reports the tightest max_tokens deadline of the open rules
(``budget_deadline=N``, as upstream xgrammar's ParserState dump), and a huge budget
saturates at INT32_MAX instead of overflowing (upstream's
test_any_text_max_tokens_int32_does_not_overflow_after_prefix)."""

import xgrammar2 as xgr

VOCAB = ["prefix", "<think>", "a", "</think>", "<eos>"]


def _matcher(max_tokens: int) -> xgr.GrammarMatcher:
    info = xgr.TokenizerInfo(VOCAB, stop_token_ids=[4])
    tag = {
        "type": "structural_tag",
        "format": {
            "type": "sequence",
            "elements": [
                {"type": "const_string", "value": "prefix"},
                {"type": "tag", "begin": "<think>",
                 "content": {"type": "any_text", "max_tokens": max_tokens}, "end": "</think>"},
            ],
        },
    }
    compiled = xgr.GrammarCompiler(info, cache_enabled=False).compile_structural_tag(tag)
    return xgr.GrammarMatcher(compiled)


def _deadline(m: xgr.GrammarMatcher):
    state = m._debug_print_internal_state()
    if "budget_deadline=" not in state:
        return None
    return int(state.split("budget_deadline=")[1].split(",")[0])


def test_no_deadline_outside_the_budgeted_rule() -> None:
    m = _matcher(5)
    assert _deadline(m) is None
    assert m.accept_token(0)
    assert _deadline(m) is None


def test_deadline_is_absolute_and_stays_while_inside() -> None:
    m = _matcher(5)
    assert m.accept_token(0) and m.accept_token(1)
    first = _deadline(m)
    assert first is not None and 5 <= first <= 7
    assert m.accept_token(2)
    assert _deadline(m) == first
    m.rollback(2)
    assert _deadline(m) is None


def test_huge_budget_saturates_at_int32_max() -> None:
    for budget in (2**31 - 1, 2**31 - 3):
        m = _matcher(budget)
        assert m.accept_token(0) and m.accept_token(1)
        assert f"budget_deadline={2**31 - 1}" in m._debug_print_internal_state()
        # the budget is still effectively unlimited: text goes on and the tag closes
        for _ in range(50):
            assert m.accept_token(2)
        assert m.accept_token(3)
