"""Front ends through the Python package: EBNF / regex parsing, printing (str(grammar)),
error classes and messages, upstream-xgrammar compatibility, and fuzzing for crashes.

The C-level details (IR shapes, reference-matcher language checks, sanitizers) are in
tests/c/test_front.c; these tests pin the behaviour users see from Python."""

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
try:
    import xgrammar2  # noqa: F401
except ImportError:  # a source checkout that is not installed
    sys.path.insert(0, str(REPO / "engine"))
    import xgrammar2  # noqa: F401

from xgrammar2 import Grammar, _core  # noqa: E402
from xgrammar2.exception import (  # noqa: E402
    GrammarLimitError,
    GrammarSemanticError,
    GrammarSyntaxError,
    InvalidUTF8Error,
    XGrammar2Error,
)

pytestmark = pytest.mark.skipif(
    not getattr(_core, "AVAILABLE", False), reason="the xgrammar2 C core is not built"
)


def roundtrip(g: Grammar) -> str:
    text = str(g)
    again = str(Grammar.from_ebnf(text))
    assert again == text, f"printing is not stable:\n{text}\n---\n{again}"
    return text


# ---- EBNF --------------------------------------------------------------------------------

EBNF_CASES = [
    ('root ::= "abc"', 'root ::= "abc"\n'),
    ('root ::= "a" b\nb ::= "x"\n  "y" | "z"', 'root ::= "a" b\nb ::= "x" "y" | "z"\n'),
    ('root ::= "a"{2,3} ("b")* [^a-z]? (= "c")', 'root ::= "a"{2,3} "b"* [^a-z]? (= "c")\n'),
    ('root ::= ((("a" "b") "c"))', 'root ::= ("a" "b") "c"\n'),
    ('root ::= "a" ("b" | "c") | "d"', 'root ::= "a" ("b" | "c") | "d"\n'),
    ('root ::= "a"{0,} "b"{1,} "c"{0,1} "d"{2, -1}', 'root ::= "a"* "b"+ "c"? "d"{2,}\n'),
    ('root ::= [\\-a\\]] [] [^]', "root ::= [\\-a\\]] [] [^]\n"),
    ('root ::= "\\u00e9\\U0001F600\\x41"', 'root ::= "é😀A"\n'),
    ('root ::= "\\x00\\u0085\\n\\"\\\\"', 'root ::= "\\x00\\u0085\\n\\"\\\\"\n'),
    ("root ::= [\\u0000-\\U0010FFFF]", "root ::= [\\x00-\\U0010ffff]\n"),
    ('root ::= b"\\xff\\x80" b[\\x80-\\xbf]', 'root ::= b"\\xff\\x80" b[\\x80-\\xbf]\n'),
    ('# comment\nb ::= "x"\nroot ::= b | c\nc ::= "y"', 'root ::= b | c\nb ::= "x"\nc ::= "y"\n'),
    ('root ::= Regex("[a-z]+\\\\.(com|org)$")', 'root ::= [a-z]+ "." ("com" | "org")\n'),
    ('root ::= "(" root ")" | ""', 'root ::= "(" root ")" | ""\n'),
    ("root ::= a.b-c\na.b-c ::= \"x\"", 'root ::= a.b-c\na.b-c ::= "x"\n'),
]


@pytest.mark.parametrize("src,expected", EBNF_CASES)
def test_ebnf_prints_canonically(src, expected):
    g = Grammar.from_ebnf(src)
    assert roundtrip(g) == expected


def test_custom_root():
    g = Grammar.from_ebnf('start ::= a\na ::= "x"', root_rule_name="start")
    assert str(g) == 'start ::= a\na ::= "x"\n'
    with pytest.raises(GrammarSemanticError, match='The root rule with name "nope" is not found'):
        Grammar.from_ebnf('root ::= "x"', root_rule_name="nope")


EBNF_ERRORS = [
    ('root ::= "a"**', GrammarSyntaxError, "line 1, column 14"),
    ('root ::= "a" (= "b") "c"', GrammarSyntaxError, "must end the rule body"),
    ('root ::= x\nx ::= "a"\nx ::= "b"', GrammarSemanticError, 'line 3, column 1: Rule "x" is defined multiple times'),
    ('root ::= "a" y', GrammarSemanticError, 'EBNF parser error at line 1, column 14: Rule "y" is not defined'),
    ('r ::= "a"', GrammarSemanticError, 'line 1, column 1: The root rule with name "root" is not found'),
    ('root ::= "a"{3,2}', GrammarSemanticError, "Lower bound is larger than upper bound: 3 > 2"),
    ('root ::= "a"{2000000000}', GrammarSemanticError, "too large"),
    ('root ::= TagDispatch(("a", b))', GrammarSemanticError, 'Rule "b" is not defined'),
    ('root ::= "abc', GrammarSyntaxError, 'EBNF lexer error at line 1, column 14: Expect " in string literal (the string starting at line 1, column 10'),
    ("root ::= [z-a]", GrammarSemanticError, "Invalid character class: lower bound is larger than upper bound"),
    ('root ::= "\\q"', GrammarSyntaxError, "EBNF lexer error at line 1, column 11: Invalid escape sequence"),
    ('root ::= "a" |', GrammarSyntaxError, "line 1, column 15: Expect element, but got end of input"),
    ('root ::= ("a"', GrammarSyntaxError, "unclosed '('"),
    ('root ::= "a")', GrammarSyntaxError, "unmatched ')'"),
    ('root ::= Regex("(?<=a)")', GrammarSyntaxError, "column 16: in the pattern of Regex(...): regex error at line 1, column 1: Lookbehind assertion"),
    ("root ::= " + "(" * 5000 + '"a"' + ")" * 5000, GrammarLimitError, "nesting"),
]


@pytest.mark.parametrize("src,exc,needle", EBNF_ERRORS)
def test_ebnf_errors(src, exc, needle):
    with pytest.raises(exc) as info:
        Grammar.from_ebnf(src)
    assert needle in str(info.value)
    assert isinstance(info.value, ValueError)


def test_invalid_utf8_position():
    with pytest.raises(InvalidUTF8Error, match="line 2, column 4"):
        Grammar.from_ebnf(b'root ::= "a"\n  "\xc3"')
    with pytest.raises(InvalidUTF8Error):
        Grammar.from_ebnf('root ::= "\udcff"')  # lone surrogate: rejected by the binding
    with pytest.raises(InvalidUTF8Error, match="column 2"):
        Grammar.from_regex(b"\xc3\xa9\xff")


def test_nul_bytes():
    with pytest.raises(GrammarSyntaxError, match="but got byte 0x00"):
        Grammar.from_ebnf('root ::= "a"\0')
    assert str(Grammar.from_ebnf('root ::= "a\0"')) == 'root ::= "a\\x00"\n'


# ---- regex ----------------------------------------------------------------------------------

REGEX_CASES = [
    ("^a+$", 'root ::= "a"+\n'),
    ("abc*d", 'root ::= "ab" "c"* "d"\n'),
    ("a.b", 'root ::= "a" [\\x00-\\U0010ffff] "b"\n'),  # any code point, as upstream
    ("(?:ab|c){2,}?", 'root ::= ("ab" | "c"){2,}\n'),
    ("(?<y>\\d{4})-\\d\\d", 'root ::= [0-9]{4} "-" [0-9] [0-9]\n'),
    ("[\\w.-]+@x\\.com", 'root ::= [0-9A-Z_a-z.\\-]+ "@x.com"\n'),
    ("^abc$|^d(e|f)$", 'root ::= "abc" | "d" ("e" | "f")\n'),
    ("\\u{1F600}\\uD83D\\uDE00", 'root ::= "😀😀"\n'),
    ("", 'root ::= ""\n'),
]


@pytest.mark.parametrize("src,expected", REGEX_CASES)
def test_regex_prints(src, expected):
    assert roundtrip(Grammar.from_regex(src)) == expected


REGEX_ERRORS = [
    ("(?=a)", "column 1: Lookahead assertion (?=...) is not supported by Grammar.from_regex"),
    ("ab(?<!a)", "column 3: Lookbehind assertion"),
    ("(a)\\1", "column 4: Backreference \\1 is not supported"),
    ("\\p{L}", "Unicode property escape"),
    ("a{2", "Invalid repetition count"),
    ("a**", "column 3: Two consecutive repetition modifiers are not allowed."),
    ("(ab", "column 1: The parenthesis is not closed."),
    ("ab)", "column 3: Unmatched ')'"),
    ("*", "There is nothing to repeat before '*'"),
    ("[]", "Empty character class"),
    ("ab[c]\0", "column 6: The regex must not contain null characters."),
]


@pytest.mark.parametrize("src,needle", REGEX_ERRORS)
def test_regex_errors(src, needle):
    with pytest.raises(GrammarSyntaxError) as info:
        Grammar.from_regex(src)
    assert needle in str(info.value)


# ---- builtin JSON and combinators --------------------------------------------------------

def test_builtin_json():
    text = roundtrip(Grammar.builtin_json_grammar())
    assert text.startswith("root ::= object | array\nvalue ::= object | array | string | number")
    assert 'string ::= "\\"" ([^"\\\\\\x00-\\x1f] | "\\\\"' in text


def test_union_concat():
    a = Grammar.from_ebnf('root ::= "a" x\nx ::= "x"')
    b = Grammar.from_ebnf('root ::= "b" x\nx ::= "y"')
    u = Grammar.union(a, b)
    assert roundtrip(u) == (
        'root ::= root_1 | root_2\nroot_1 ::= "a" x\nx ::= "x"\nroot_2 ::= "b" x_1\nx_1 ::= "y"\n'
    )
    c = Grammar.concat(a, b)
    assert roundtrip(c).startswith("root ::= root_1 root_2\n")


# ---- upstream compatibility ----------------------------------------------------------------

def test_parses_upstream_printed_grammars():
    xg = pytest.importorskip("xgrammar")
    texts = [
        str(xg.Grammar.builtin_json_grammar()),
        str(xg.Grammar.from_regex(r"(\d+\.)?[\w-]{2,5}\u00e9")),
        str(xg.Grammar.from_ebnf('root ::= "a"{2,3} ("b")* [^a-z]? (= "c")')),
        str(
            xg.Grammar.from_json_schema(
                '{"type":"object","properties":{"a":{"type":"string"},'
                '"b":{"type":"array","items":{"type":"number"},"minItems":2}},"required":["a"]}'
            )
        ),
    ]
    for text in texts:
        roundtrip(Grammar.from_ebnf(text))


# ---- fuzzing: any input either parses (and round-trips) or raises a ValueError -------------

def _check_no_crash(fn, text):
    try:
        g = fn(text)
    except XGrammar2Error as e:
        assert isinstance(e, ValueError) and str(e)
        return
    roundtrip(g)


def test_fuzz_hypothesis():
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    alphabet = st.sampled_from(list('root::= "ab\\x[]^-()|*+?{},019#\nbé(=$.') + ["Regex(", "::="])

    @hypothesis.settings(max_examples=300, deadline=None, database=None)
    @hypothesis.given(st.lists(alphabet, max_size=40).map("".join) | st.text(max_size=40))
    def run(text):
        _check_no_crash(Grammar.from_ebnf, text)
        _check_no_crash(Grammar.from_regex, text)

    run()
