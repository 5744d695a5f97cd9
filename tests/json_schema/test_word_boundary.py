"""A word boundary between two parts of a pattern is rewritten into a union without
assertions (word_boundary.py); the rewritten pattern must hold exactly the strings of the
exact lookaround automaton (automaton.from_regex honours ``\\b`` / ``\\B``), and patterns of
other shapes are left alone."""

from __future__ import annotations

import json
import re

import pytest

import xgrammar2 as xgr
from xgrammar2.json_schema import automaton as fa
from xgrammar2.json_schema import json_schema_to_ebnf
from xgrammar2.json_schema import regex as rx
from xgrammar2.json_schema.word_boundary import drop_word_boundary
from xgrammar2.testing import _is_grammar_accept_string

# The URL pattern of JsonSchemaStore dein (and many schemas), with small bounds so that the
# exact automaton of its lookaround stays small, then variants of every split case.
SHAPES = [
    r"^https?:\/\/(www\.)?[-a-z0-9@:%._\+~#=]{1,4}\.[a-z0-9()]{1,3}\b([-a-z0-9()@:%_\+.~#?&//=]*)$",
    r"^[a-c(]{1,3}\b[-a-c)]*$",
    r"^[a-c(]{0,3}\b[-a-c)]*$",  # both sides may be empty: the start and the end count as non-word
    r"^[a-c(]*\B[-a-c)]?$",
    r"^(ab|-|x_)\b(c|\.|)$",
    r"^(ab|-|x_)?\B(c|\.)+$",
    r"^(a|b-)\b(c-)?d$",  # the right side starts in an optional group
    r"^x[b-]?\b[c.]$",  # the left side ends in an optional part: the character before it decides
    r"^[a.]\B[c.]?y?$",
    r"x\b[ .y]",  # unanchored, neither side empty
    r"[a-]{2}\B[b.]{1,2}",
    r"^$|^a\b",  # not a concatenation: left alone
    r"^(a\b)c$",  # (a group is no node: the boundary is at the top, and never holds here)
]


def _search_dfa(ast):
    return fa.from_regex(rx.cat(rx.ANY_STAR, ast, rx.ANY_STAR))


@pytest.mark.parametrize("pattern", SHAPES)
def test_rewritten_pattern_holds_the_lookaround_automatons_strings(pattern):
    raw = rx.parse(pattern)
    dropped = drop_word_boundary(raw)
    if pattern.startswith("^$|"):
        assert dropped is None
        return
    assert dropped is not None and not rx.has_lookaround(dropped), pattern
    full = rx.to_full_match(dropped)
    assert full is not None and not rx.has_anchor(full)
    want = _search_dfa(raw)
    got = fa.from_regex(full)
    assert fa.difference(want, got).is_empty() and fa.difference(got, want).is_empty(), pattern


@pytest.mark.parametrize("pattern", [
    r"^a\bb\bc$",          # two boundaries
    r"^(a\b|b)c$",         # inside an alternative
    r"^a(?=b)\bb$",        # with a lookahead
    r"a?\bb",              # a side that can be empty, unanchored
    r"^a\b(b|c?)",         # the right side can be empty, no $
    r"^(a*)*\bb$",         # a repetition whose body can be empty
])
def test_other_shapes_are_left_to_the_automaton(pattern):
    assert drop_word_boundary(rx.parse(pattern)) is None


URL = r"^https?:\/\/(www\.)?[-a-zA-Z0-9@:%._\+~#=]{1,256}\.[a-zA-Z0-9()]{1,6}\b([-a-zA-Z0-9()@:%_\+.~#?&//=]*)$"


def test_the_url_pattern_compiles_and_follows_the_regex():
    """Refused before (the lookaround automaton passes the state limit); upstream xgrammar
    and llguidance refuse \\b outright."""
    g = xgr.Grammar.from_ebnf(json_schema_to_ebnf(json.dumps({"type": "string", "pattern": URL})).ebnf)
    py = re.compile(URL.replace("\\/", "/"), re.ASCII)  # Python's \b is ECMA-262's on ASCII
    texts = ["https://example.com", "https://example.com/a?b=1", "http://www.a.b", "https://exa_mple.co(",
             "https://a.b(c", "https://a.bc)d", "https://a.comx_", "https://a.com)", "https://a.(", "ftp://a.com",
             "https://" + "a" * 256 + ".io", "https://" + "a" * 257 + ".io", "https://a.abcdefg", "https://a.abcdef",
             "https://a.com.", "https://a.com(x"]
    seen = set()
    for t in texts:
        want = py.search(t) is not None
        seen.add(want)
        assert _is_grammar_accept_string(g, json.dumps(t)) == want, t
    assert seen == {True, False}
