"""The ``Substring(...)`` EBNF macro in the front end: parsing, printing back, lifting into
its own rule, and errors (upstream xgrammar 0.2.8's key phrases, with line:column)."""

from __future__ import annotations

import pytest

import xgrammar2 as xgr
from xgrammar2.testing import _is_grammar_accept_string


@pytest.mark.parametrize(
    "ebnf, printed",
    [
        ('root ::= Substring("abc", "de", "fg")', 'root ::= Substring("abc", "de", "fg")\n'),
        ("root ::= Substring( )", "root ::= Substring()\n"),
        ('root ::= Substring ("ab")', 'root ::= Substring("ab")\n'),
        ('root ::= (Substring("ab"))', 'root ::= Substring("ab")\n'),
        ('root ::= Substring("", "")', 'root ::= Substring("", "")\n'),
        ('root ::= Substring("a", "\\0", "b")', 'root ::= Substring("a", "\\0", "b")\n'),
        ('root ::= Substring("\\n\\t\\\\\\"")', 'root ::= Substring("\\n\\t\\\\\\"")\n'),
        ('root ::= Substring(b"\\xff", "é")', 'root ::= Substring(b"\\xff", "é")\n'),
        # not a whole rule body: moved into a fresh rule named as upstream names it
        ('root ::= "x" Substring("abc") "y"', 'root ::= "x" root_1 "y"\nroot_1 ::= Substring("abc")\n'),
        ('root ::= Substring("ab") | "z"', 'root ::= root_1 | "z"\nroot_1 ::= Substring("ab")\n'),
        ('root ::= Substring("ab") Substring("cd")\nroot_1 ::= "q"',
         'root ::= root_2 root_3\nroot_1 ::= "q"\nroot_2 ::= Substring("ab")\n'
         'root_3 ::= Substring("cd")\n'),
        ('root ::= Substring("ab") (= "x")', 'root ::= Substring("ab") (= "x")\n'),
    ],
)
def test_parse_and_print(ebnf: str, printed: str) -> None:
    grammar = xgr.Grammar.from_ebnf(ebnf)
    assert str(grammar) == printed
    assert str(xgr.Grammar.from_ebnf(str(grammar))) == printed


def test_upstream_prints_the_same_whole_body_form() -> None:
    up = pytest.importorskip("xgrammar")
    for ebnf in ['root ::= Substring("abc", "de", "fg")', "root ::= Substring()",
                 'root ::= Substring("", "a", "")', 'root ::= Substring("a", "\\0", "b")']:
        assert str(xgr.Grammar.from_ebnf(ebnf)) == str(up.Grammar.from_ebnf(ebnf))


def test_substring_is_a_rule_name_without_parentheses() -> None:
    grammar = xgr.Grammar.from_ebnf('root ::= Substring "!"\nSubstring ::= "s"')
    assert _is_grammar_accept_string(grammar, "s!")


@pytest.mark.parametrize(
    "ebnf, phrase, where",
    [
        ('root ::= Substring("a", foo=true)', "Substring() does not accept named arguments", "1, column 25"),
        ("root ::= Substring(abc)", "Substring() arguments must be strings", "1, column 20"),
        ('root ::= Substring("a", 1)', "Substring() arguments must be strings", "1, column 25"),
        ('root ::= Substring(("a"))', "Substring() arguments must be strings", "1, column 20"),
        ("root ::= Substring(Token(3))", "Substring() arguments must be strings", "1, column 20"),
        ('root ::= Substring("a",)', "expected a string argument in Substring(...)", "1, column 24"),
        ('root ::= Substring("ab" "cd")', "expected ',' or ')' in Substring(...)", "1, column 25"),
        ('root ::= Substring("ab"\nx ::= "a"', "unclosed 'Substring('", "1, column 10"),
        ('root ::= "a" (=Substring("b"))', "Substring should not be in lookahead assertion", "1, column 16"),
        ('root ::= "a"\nr ::= "b" (= "c" Substring("b"))', "Substring should not be in lookahead assertion",
         "2, column 18"),
    ],
)
def test_errors(ebnf: str, phrase: str, where: str) -> None:
    with pytest.raises(RuntimeError) as info:
        xgr.Grammar.from_ebnf(ebnf)
    assert phrase in str(info.value)
    assert f"line {where}" in str(info.value)


def test_serialization_union_concat() -> None:
    grammar = xgr.Grammar.from_ebnf('root ::= Substring("abc", "de")')
    back = xgr.Grammar.deserialize_json(grammar.serialize_json())
    assert str(back) == str(grammar)
    assert _is_grammar_accept_string(back, "abcde") and not _is_grammar_accept_string(back, "bc")
    z = xgr.Grammar.from_ebnf('root ::= "z"')
    union = xgr.Grammar.union(grammar, z)
    assert "Substring(\"abc\", \"de\")" in str(union)
    for cand, ok in [("", True), ("de", True), ("z", True), ("dez", False)]:
        assert _is_grammar_accept_string(union, cand) == ok
    concat = xgr.Grammar.concat(grammar, z, grammar)
    for cand, ok in [("z", True), ("abcdezde", True), ("bcz", False)]:
        assert _is_grammar_accept_string(concat, cand) == ok
    # the printed union / concat parse back to the same language
    again = xgr.Grammar.from_ebnf(str(concat))
    assert _is_grammar_accept_string(again, "abczabcde")
