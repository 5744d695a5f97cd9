"""ir.regex_match answers as the pattern's automaton does: a pattern that is one literal (the
full-match form of "^DockerInstaller@0$") is matched by comparison, and an equal AST built again
shares the memo of its strings (issue 36: JsonSchemaStore service-schema tested 238 task names
against 238 such patterns; Github_ultra o83932 hashed its pattern ASTs on every lookup)."""

from __future__ import annotations

import copy

from xgrammar2.json_schema import automaton as fa
from xgrammar2.json_schema import ir
from xgrammar2.json_schema import regex as rx

PATTERNS = ["^DockerInstaller@0$", "^abc", "abc$", "abc", "^$", "^a.c$", "^(ab)$", "^a{2}$", "^a|b$", "^\\u00e9$",
            "^[a]$", "^a$", "^\\.$", "^(?:ab)c$", "^a\\$$", "^x$|^y$", "^\\^$", "^[Aa]b$", "^ab?$", "^(?!ab$).*$"]
STRINGS = ["", "a", "ab", "abc", "xabc", "abcx", "aa", "b", "é", ".", "$", "a$", "^", "x", "y", "Ab",
           "DockerInstaller@0", "DockerInstaller@0x", "dockerinstaller@0"]


def _full(p):
    raw = rx.parse(p)
    return rx.to_full_match(raw) or rx.cat(rx.ANY_STAR, raw, rx.ANY_STAR)


def test_regex_match_agrees_with_the_nfa_on_literal_and_other_patterns():
    literal = 0
    for p in PATTERNS:
        ast = _full(p)
        literal += ir._literal_of(ast) is not None
        nfa = fa.compile_nfa(ast)
        for s in STRINGS:
            assert ir.regex_match(ast, s) == bool(fa.nfa_match(nfa, s)), (p, s)
            # an equal AST built anew (its own object) answers the same from the shared memo
            assert ir.regex_match(copy.deepcopy(ast), s) == bool(fa.nfa_match(nfa, s)), (p, s)
    assert 5 <= literal < len(PATTERNS)


def test_enum_meets_each_kind_of_node_in_the_values_of_that_kind():
    values = [None, True, False, 0, 1.5, -3, "a", "", "bc", [1], [], {"k": 1}, {}]
    e = ir.Enum(values)
    nodes = [ir.NULL, ir.BOOL, ir.NUMBER, ir.Num(integer=True), ir.STRING, ir.Str(minl=1), ir.ARRAY, ir.OBJECT,
             ir.Arr(minn=1), ir.Obj(required=("k",))]

    class _Cx:
        meter = None

    for n in nodes:
        r = ir.intersect_node(_Cx(), e, n)
        got = [] if r is None else list(r.values)
        want = [v for v in values if ir.validate_node(_Cx(), n, v)]
        assert got == want, (n.kind, got, want)
        assert (r is None) == (not want)
