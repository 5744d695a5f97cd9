"""String automata are memoised by value (emit.Emitter.string_dfa, issue 36): equal
pattern/length strings at different JSON pointers share their automata, yet each occurrence
keeps its own rules and its own refusal; the length products are predicted on integer sets
(automaton.length_product_states) and one that would exceed the limit is never built, with
the same result or exception as building it."""

import random

import pytest

from xgrammar2.json_schema import UnsupportedSchemaError, emit, json_schema_to_ebnf
from xgrammar2.json_schema import automaton as fa
from xgrammar2.json_schema import ir
from xgrammar2.json_schema import regex as rx

# (ab|c)*d(ab|c)*: 4 states, unbounded; times 30001 length counts is refused before any
# product, and the minLength counts make the budget fail too: a refusal per occurrence
_REFUSED = {"type": "string", "pattern": "^(ab|c)*d(ab|c)*$", "minLength": 20000, "maxLength": 30000}
# a product too large, a budget that fits: one budgeted rule per occurrence
_BUDGET = {"type": "string", "pattern": "^[a-z]+(-[a-z0-9]+)*$", "maxLength": 3000}


def test_equal_refused_strings_each_name_their_pointer_lenient():
    s = {"type": "object", "properties": {"a": dict(_REFUSED), "b": dict(_REFUSED),
                                          "c": {"type": "array", "items": dict(_REFUSED)}}}
    r = json_schema_to_ebnf(s, lenient=True)
    dropped = [w for w in r.warnings if "dropped 'pattern'" in w]
    assert sorted(w.split(":")[0] for w in dropped) == ["#/properties/a", "#/properties/b", "#/properties/c/items"]
    for w in dropped:  # (the cached failure keeps the product's message)
        assert "4-state pattern automaton times 30001 length counts" in w


def test_equal_refused_strings_strict_name_the_first_then_the_other():
    s = {"type": "object", "properties": {"a": dict(_REFUSED), "b": dict(_REFUSED)}}
    with pytest.raises(UnsupportedSchemaError, match="#/properties/a"):
        json_schema_to_ebnf(s)
    # the same string, first met at b after an equal one that converts (no lengths): b's own refusal
    s = {"type": "object", "properties": {"a": {"type": "string", "pattern": _REFUSED["pattern"]},
                                          "b": dict(_REFUSED)}}
    with pytest.raises(UnsupportedSchemaError, match="#/properties/b"):
        json_schema_to_ebnf(s)


def test_equal_budgeted_strings_keep_one_rule_each():
    s = {"type": "object", "properties": {"a": dict(_BUDGET), "b": dict(_BUDGET),
                                          "c": {"type": "array", "items": dict(_BUDGET)}}}
    r = json_schema_to_ebnf(s)
    assert not r.warnings
    rules = {}
    for line in r.ebnf.splitlines():
        head, _, body = line.partition(" ::= ")
        rules[head] = body
    for x in ("root_a", "root_b", "root_c_item"):
        assert rules[f"{x}__len[max_chars=3000]"] == f"{x}__str"
        assert rules[f"{x}__str"] == f'[a-z] [a-z]* ("-" {x}__str__q2 | "")'
        assert rules[f"{x}__str__q2"] == f'[0-9a-z] [0-9a-z]* ("-" {x}__str__q2 | "")'
    # every occurrence refers to its own budgeted rule
    assert r.ebnf.count('"\\"" root_a__len "\\""') == 1
    assert r.ebnf.count('"\\"" root_b__len "\\""') == 1  # (each member is spelt once: p1 = sep f1)
    assert r.ebnf.count('"\\"" root_c_item__len "\\""') == 2  # (first item, later items)


def _product_states(d, lo, hi):
    """The number of states _product builds, by definition: the least limit it fits."""
    n = 1
    while True:
        try:
            fa.intersect(d, fa.length_dfa(lo, hi), n)
            return n
        except fa.AutomatonTooLarge:
            n += 1


_PATTERNS = ["^[a-z]+(-[a-z0-9]+)*$", "^(ab|c)*d(ab|c)*$", "^x{2,5}y?$", "^[^a]*a[^a]*$",
             "^(?:[0-9]{3}-){0,3}[0-9]+$", "^\\w+@\\w+\\.(com|org)$", "^\\ud800?x*$"]


def test_length_product_prediction_is_the_built_size():
    rng = random.Random(36)
    for p in _PATTERNS:
        d = fa.restrict_alphabet(ir.regex_dfa(rx.parse(p)))
        for _ in range(12):
            lo = rng.randint(0, 9)
            hi = rng.choice([None, lo + rng.randint(-1, 12)])
            want = 0 if hi is not None and hi < lo else _product_states(d, lo, hi)
            assert fa.length_product_states(d, lo, hi, 10 ** 6) == want, (p, lo, hi)
            assert fa.length_product_states(d, lo, hi, want - 1) == want if want else True


def test_length_product_just_under_and_over_the_limit():
    limit = emit.STATE_LIMIT
    d = fa.restrict_alphabet(ir.regex_dfa(rx.parse("^[a-z]+(-[a-z0-9]+)*$")))
    # the largest maxLength whose product fits, and the next one
    hi = 1
    while fa.length_product_states(d, 0, hi + 1, limit) <= limit:
        hi += 1
    assert fa.length_product_states(d, 0, hi + 1, limit) == limit + 1
    under = fa.intersect_length(d, 0, hi, limit)
    assert under.key() == fa.intersect(d, fa.length_dfa(0, hi), limit).key()
    for f in (lambda: fa.intersect_length(d, 0, hi + 1, limit),
              lambda: fa.intersect(d, fa.length_dfa(0, hi + 1), limit)):
        with pytest.raises(fa.AutomatonTooLarge, match="automaton product exceeds the state limit"):
            f()
    # the emitter prefers the budget from PREFER_BUDGET_STATES on: just under, a product rule
    # (no budget); just over, the budget
    cap = emit.PREFER_BUDGET_STATES
    lo = 1
    while fa.length_product_states(d, 0, lo + 1, cap) <= cap:
        lo += 1
    for maxl, budget in ((lo, False), (lo + 1, True), (hi, True), (hi + 1, True)):
        r = json_schema_to_ebnf({"type": "string", "pattern": "^[a-z]+(-[a-z0-9]+)*$", "maxLength": maxl})
        assert (f"[max_chars={maxl}]" in r.ebnf) == budget, maxl
