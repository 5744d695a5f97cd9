"""automaton.from_regex (subset.determinize + subset.minimize_classes: alphabet classes, NFA
state sets as bit sets) gives exactly the DFA of the plain subset construction over
frozensets of NFA states followed by automaton.minimize (same states, numbering and labels),
and meets its state limit at the same number of subsets (issue 36: the format automata's
cold cost)."""

import random

import pytest

from xgrammar2.json_schema import automaton as fa
from xgrammar2.json_schema import formats as fmts
from xgrammar2.json_schema import regex as rx


def _reference(node, limit=fa.DEFAULT_LIMIT):
    """The plain subset construction: states are (epsilon closure, is the start), labels
    split by automaton._split; then automaton.minimize."""
    nfa = fa._NFA(limit)
    start = nfa.new()
    final = nfa.build(node, start)
    init = (fa._closure(nfa, [start], True, False), True)
    keys = {init: 0}
    order = [init]
    trans, accept = [], []
    i = 0
    while i < len(order):
        S, first = order[i]
        i += 1
        accept.append(final in fa._closure(nfa, S, first, True))
        pairs = [(c, t) for s in S for c, t in nfa.edges[s]]
        row = []
        for c, tgts in (fa._split(pairs) if pairs else ()):
            key = (fa._closure(nfa, tgts, False, False), False)
            idx = keys.get(key)
            if idx is None:
                idx = len(order)
                if idx >= limit:
                    raise fa.AutomatonTooLarge("pattern automaton exceeds the state limit")
                keys[key] = idx
                order.append(key)
            row.append((c, idx))
        trans.append(row)
    return fa.minimize(fa.DFA(trans, accept)), len(order)


_ATOMS = ["a", "b", "[a-c]", "[^a]", ".", "\\d", "x", "(?:ab)", "^", "$", "[\\u0100-\\u0200]", "\\w", ""]


def _random_regex(rng, depth=0):
    r = rng.random()
    if depth > 3 or r < 0.3:
        return rng.choice(_ATOMS)
    if r < 0.5:
        return _random_regex(rng, depth + 1) + _random_regex(rng, depth + 1)
    if r < 0.65:
        return "(?:" + _random_regex(rng, depth + 1) + "|" + _random_regex(rng, depth + 1) + ")"
    if r < 0.75:
        return "(?:" + _random_regex(rng, depth + 1) + ")*"
    if r < 0.85:
        return "(?:" + _random_regex(rng, depth + 1) + ")?"
    lo = rng.randint(0, 2)
    return "(?:%s){%d,%d}" % (_random_regex(rng, depth + 1), lo, lo + rng.randint(0, 3))


def _asts(n, seed):
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        try:
            out.append(rx.parse(_random_regex(rng)))
        except (rx.RegexSyntaxError, rx.RegexUnsupported):
            continue
    return out


@pytest.mark.parametrize("name", ["date-time", "ipv6", "email", "uri", "hostname"])
def test_from_regex_of_a_format_equals_the_plain_subset_construction(name):
    ast = fmts.format_ast(name)
    assert fa.from_regex(ast).key() == _reference(ast)[0].key()


def test_from_regex_of_random_regexes_equals_the_plain_subset_construction():
    for ast in _asts(400, 36):
        assert fa.from_regex(ast).key() == _reference(ast)[0].key(), ast


def _outcome(f, ast, limit):
    try:
        d = f(ast, limit)
    except fa.AutomatonTooLarge as e:
        return str(e)
    return (d[0] if type(d) is tuple else d).key()


def test_from_regex_meets_the_state_limit_at_the_same_number_of_subsets():
    checked = 0
    for ast in _asts(300, 7):
        _, subsets = _reference(ast)
        if subsets < 3:
            continue
        for limit in (subsets - 1, subsets, subsets + 1):
            assert _outcome(fa.from_regex, ast, limit) == _outcome(_reference, ast, limit), (ast, limit)
        if _outcome(_reference, ast, subsets - 1) == "pattern automaton exceeds the state limit":
            assert _outcome(fa.from_regex, ast, subsets) != "pattern automaton exceeds the state limit"
            checked += 1
    assert checked > 50


def test_from_regex_lets_caret_hold_only_before_the_first_character_and_dollar_after_the_last():
    d = fa.from_regex(rx.parse("(?:^a)*"))
    assert d.run("") and d.run("a") and not d.run("aa")
    d = fa.from_regex(rx.parse("(?:a$)*"))
    assert d.run("") and d.run("a") and not d.run("aa")
    d = fa.from_regex(rx.parse("a(?:^b|c)"))
    assert d.run("ac") and not d.run("ab")
