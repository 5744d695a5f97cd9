"""Exclusive oneOf of string patterns decides disjointness on the patterns' NFAs
(automaton.nfa_disjoint, one_of._patterns_disjoint), without their automata: it must agree
with the DFA product everywhere, and a oneOf it proves disjoint must still be exact."""

from __future__ import annotations

import json
import random

import pytest

import xgrammar2 as xgr
from xgrammar2.json_schema import automaton as fa
from xgrammar2.json_schema import json_schema_to_ebnf
from xgrammar2.json_schema import regex as rx
from xgrammar2.testing import _is_grammar_accept_string

jsonschema = pytest.importorskip("jsonschema")

_PIECES = ["a", "b", "/", ".", "[ab]", "[a-c/]", "[^a]", "(a|b/)", "a?", "b*", "[ab]{1,3}", "(ab){0,2}", "c+"]


def _random_pattern(rng: random.Random) -> str:
    return "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 4)))


def test_nfa_disjointness_agrees_with_the_dfa_product():
    rng = random.Random(7)
    both = {True: 0, False: 0}
    for _ in range(600):
        a = rx.to_full_match(rx.parse("^" + _random_pattern(rng) + "$"))
        b = rx.to_full_match(rx.parse("^" + _random_pattern(rng) + "$"))
        want = fa.disjoint(fa.from_regex(a), fa.from_regex(b))
        assert fa.nfa_disjoint(a, b) == want, (a, b)
        both[want] += 1
    assert both[True] > 50 and both[False] > 50


def test_assertions_are_refused():
    with pytest.raises(rx.RegexUnsupported):
        fa.nfa_disjoint(rx.parse("^a\\b"), rx.parse("a"))


URL = r"^https?:\/\/(www\.)?[-a-zA-Z0-9@:%._\+~#=]{1,256}\.[a-zA-Z0-9()]{1,6}\b([-a-zA-Z0-9()@:%_\+.~#?&//=]*)$"
# JsonSchemaStore dein's repository: a URL, a path or a user/repo name, exactly one of them
DEIN = {"oneOf": [{"type": "string", "pattern": URL},
                  {"type": "string", "pattern": r"^[~|/][a-zA-Z-_0-9/\.~]+$"},
                  {"type": "string", "pattern": r"^[a-zA-Z-_0-9]+/[a-zA-Z-_0-9\.]+$"}]}
TEXTS = ["https://github.com/Shougo/dein.vim", "~/src/plugin", "/opt/x", "Shougo/dein.vim", "dein.vim",
         "http://a.b", "|x", "https://a", "a/b/c", "~", "https://a.io/~x", "git@github.com:a/b"]


def _check(schema):
    g = xgr.Grammar.from_ebnf(json_schema_to_ebnf(json.dumps(schema)).ebnf)
    v = jsonschema.Draft202012Validator(schema, format_checker=None)
    verdicts = set()
    for t in TEXTS:
        want = v.is_valid(t)
        verdicts.add(want)
        assert _is_grammar_accept_string(g, json.dumps(t)) == want, (schema, t)
    assert verdicts == {True, False}


def test_dein_repository_oneof_compiles_and_is_exact():
    _check(DEIN)


def test_overlapping_patterns_are_not_taken_for_disjoint():
    """A third branch that meets the URL branch ("http..." paths also match ^h): exclusivity
    must still subtract, never become a plain union."""
    schema = {"oneOf": [{"type": "string", "pattern": r"^https?://[a-z]{1,40}\.[a-z]{2,3}$"},
                        {"type": "string", "pattern": r"^h[a-z:/.]*$"},
                        {"type": "string", "pattern": r"^[~/][a-z/]+$"}]}
    assert not __import__("xgrammar2.json_schema.one_of", fromlist=["x"])._patterns_disjoint(
        _strings(schema["oneOf"][0]), _strings(schema["oneOf"][1]))
    g = xgr.Grammar.from_ebnf(json_schema_to_ebnf(json.dumps(schema)).ebnf)
    v = jsonschema.Draft202012Validator(schema)
    for t in ["https://abc.io", "habc", "http:/x", "~/a", "/b", "https://a.b"]:
        assert _is_grammar_accept_string(g, json.dumps(t)) == v.is_valid(t), t


def _strings(s):
    from xgrammar2.json_schema import ir

    return (ir.Str(pos=((rx.to_full_match(rx.parse(s["pattern"])), "#"),)),)
