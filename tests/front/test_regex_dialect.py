"""The two regex dialects of upstream xgrammar 0.2.8, as xgrammar2's C front end
(csrc/front/regex.c) implements them:

- the *converter* dialect: ``Grammar.from_regex`` / ``compile_regex`` / ``_regex_to_ebnf``;
- the *macro* dialect: the EBNF ``Regex("...", json_string=..., flags="...")``.

Explicit tests pin the semantics (accept / reject, the error class and its key phrase, the
position); differential tests run the same patterns and inputs through real upstream
``xgrammar`` (installed in the test venv) and compare.

Known, intended differences (not compared):
- upstream reports a bad ``Regex(...)`` pattern when the grammar is first compiled,
  xgrammar2 when it is parsed (with line:column);
- a ``json_string=true`` pattern that can match no string is an error in xgrammar2
  (upstream builds a grammar that accepts nothing);
- ``\\uD83D\\uDE00`` (a UTF-16 surrogate pair written as two escapes) is one code point
  in xgrammar2; upstream matches nothing with it;
- ``\\u{110000}`` (above U+10FFFF) is an error in both dialects; upstream's converter
  builds a grammar that matches nothing.

Upstream 0.2.8 also has wrong answers that xgrammar2 does not copy (checked against Python's
``re`` below): some optional groups around a star (``Regex("([a]*z)?", flags="i")`` accepts
"a", ``Regex("([-](😀*))?")`` accepts "😀"), ``from_regex("\\x41a{0}")`` accepts "" but not
"A", and its converter reads ``[\\^]`` as any character and ``[\\s-a]`` as an error
(xgrammar2: a class escape before '-' makes the '-' a literal, as in ECMAScript). The
random seeds of the differential tests avoid these.
"""

import importlib
import json
import random
from typing import List, Optional, Tuple, Union

import pytest

import xgrammar2 as xgr
from xgrammar2.exception import GrammarSemanticError, GrammarSyntaxError
from xgrammar2.testing import _is_grammar_accept_string

Outcome = Union[str, Tuple[bool, ...]]


def macro(pattern: str, opts: str = "") -> xgr.Grammar:
    """``root ::= Regex(<pattern>, <opts>)``."""
    return xgr.Grammar.from_ebnf(f"root ::= Regex({json.dumps(pattern, ensure_ascii=False)}{opts})")


def accepts(grammar: xgr.Grammar, inputs: List[str]) -> List[bool]:
    return [_is_grammar_accept_string(grammar, s) for s in inputs]


# ---- macro dialect: options ---------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern, opts, yes, no",
    [
        # json_string removes '"', '\\' and U+0000..U+001F from every character match
        (r"\S+", ", json_string=true", ["abc", "a.b!c", "\x7f", "é"], ['a"b', "a\\b", "a b"]),
        (".+", ", json_string=true", ["ab", "你好"], ["a\tb", "a\nb", "\x1f"]),
        ("[^a]", ", json_string=true", ["b", "\x7f"], ['"', "\\", "\x00", "a"]),
        (r"\W", ", json_string=true", ["#"], ['"', "\\", "\n"]),
        ('a"b|c', ", json_string=true", ["c"], ['a"b', "a"]),
        ('(")?x', ", json_string=true", ["x"], ['"x']),
        (r"\S+", ", json_string=false", ['a"b', "a\\b"], ["a b"]),
        # flags: i folds ASCII letters, s lets '.' match \n, u is a no-op; with any flags
        # argument '.' excludes \n unless s
        ("abc", ', flags="i"', ["aBc", "ABC"], ["abd"]),
        ("[a-d]+", ', flags="i"', ["AbCd"], ["E", "e"]),
        ("Σ", ', flags="i"', ["Σ"], ["σ"]),
        ("a.b", ', flags=""', ["acb", "a\rb", "a\u2028b"], ["a\nb"]),
        ("a.b", ', flags="s"', ["a\nb"], ["A\nB"]),
        ("a.b", ', flags="is"', ["A\nB"], []),
        ("a.b", ', flags="u"', ["a😀b"], ["a\nb"]),
        ("a.b", "", ["a\nb"], []),
        ("a[^x]b", ', flags=""', ["a\nb"], ["axb"]),
        ("(?i)abc", ', flags="i"', ["ABC"], ["abd"]),
        ("a[b-d]+", ', flags="i", json_string=true', ["ABC"], ["AE"]),
        (".+", ', json_string=true, flags="i"', ["AbC"], ['a"b']),
    ],
)
def test_macro_options(pattern: str, opts: str, yes: List[str], no: List[str]) -> None:
    g = macro(pattern, opts)
    assert accepts(g, yes) == [True] * len(yes)
    assert accepts(g, no) == [False] * len(no)


@pytest.mark.parametrize(
    "args, phrase",
    [
        ("", "line 1, column 10: Regex expects exactly one string argument"),
        ('"a", "b"', "Regex expects exactly one string argument"),
        ('"a", foo', "Regex expects exactly one string argument"),
        ("abc", "column 16: Regex pattern must be a string literal"),
        ("1", "Regex pattern must be a string literal"),
        ('"a", foo=true', "column 21: Regex does not support the named argument foo"),
        ('"a", json_string="yes"', "json_string must be a boolean"),
        ('"a", json_string=1', "json_string must be a boolean"),
        ('"a", json_string=True', "json_string must be a boolean"),
        ('"a", flags=true', "flags must be a string"),
        ('"a", flags=("i",)', "flags must be a string"),
        ('"a", flags="m"', "regular-expression flag 'm' is not supported"),
        ('"a", flags="il"', "regular-expression flag 'l' is not supported"),
        ('"a",', "column 20: Expect string, integer, boolean, or tuple in macro argument"),
        ('"a" "b"', "expected ',' or ')' closing Regex("),
    ],
)
def test_macro_argument_errors(args: str, phrase: str) -> None:
    src = f"root ::= Regex({args})"
    with pytest.raises(GrammarSyntaxError) as info:
        xgr.Grammar.from_ebnf(src)
    assert phrase in str(info.value)
    assert isinstance(info.value, RuntimeError)


def test_macro_options_in_any_order_and_spacing() -> None:
    g = xgr.Grammar.from_ebnf('root ::= Regex( "a.b" ,json_string = true , flags = "is" )')
    assert accepts(g, ["AxB", "a\x7fb"]) == [True, True]
    assert accepts(g, ['a"b', "a\nb"]) == [False, False]  # json_string wins over s


def test_macro_json_string_matching_nothing_is_an_error() -> None:
    with pytest.raises(GrammarSemanticError, match="column 16: in the pattern of Regex"
                       r"\(\.\.\.\): regex error at line 1, column 1: the pattern matches no string"):
        macro('a"b', ", json_string=true")
    with pytest.raises(GrammarSemanticError, match="matches no string"):
        macro(r"\n+|\\", ", json_string=true")


def test_macro_result_survives_print_and_serialization() -> None:
    for pattern, opts, yes, no in [
        ("a.b", ', flags="is"', "A\nB", "ab"),
        ("a.b", ', flags=""', "acb", "a\nb"),
        ("(?i)abc", "", "ABC", "abd"),
        (r"\S+", ", json_string=true", "abc", 'a"b'),
    ]:
        g = macro(pattern, opts)
        for h in (xgr.Grammar.from_ebnf(str(g)), xgr.Grammar.deserialize_json(g.serialize_json())):
            assert _is_grammar_accept_string(h, yes)
            assert not _is_grammar_accept_string(h, no)


# ---- macro dialect: syntax -----------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern, yes, no",
    [
        ("(?i)abc", ["aBc", "ABC"], ["abd"]),
        ("(?i)[^k]", ["a"], ["k", "K"]),
        ("(?i)[Z-a]", ["z", "A", "[", "_"], ["b"]),
        (r"(?i)\W", ["#"], ["k", "K", "_"]),
        (r"(?i)\x41", ["a", "A"], ["b"]),
        ("(?i)\u212a", ["\u212a"], ["k", "K"]),
        ("a(?=b)c", ["ac"], ["abc"]),
        ("a(?!b)c", ["ac"], ["abc"]),
        ("a(?=b)+", ["a"], ["ab"]),
        ("(?<name>ab)+", ["abab"], ["a"]),
        ("(?P<name>ab)c", ["abc"], []),
        ("(?<1a>x)", ["x"], []),
        ("a{1,3}?{1,3}", ["a", "aaaa", "a" * 9], ["", "a" * 10]),
        ("a???", ["", "a"], ["aa"]),
        ("a{2}{3}", ["a" * 6], ["aa", "a" * 5]),
        ("a+*", ["", "a", "aaa"], ["b"]),
        ("a^b$c", ["abc"], ["ab"]),
        ("a$*", ["", "a", "aa"], ["b"]),
        ("(^a)*", ["", "a", "aa"], []),
        (r"\s", [" ", "\t", "\n", "\v", "\f", "\r"], ["\xa0", "\u2028", "\x1c"]),
        (r"\S", ["\xa0", "\x00", "好"], [" "]),
        (r"\a\e\q\h\z", ["\x07\x1bqhz"], []),
        (r"\0", ["\x00"], ["0"]),
        (r"\012", ["\x0012"], ["\n"]),
        (r"x\cAy", ["x\x01y"], ["xy"]),
        (r"\u{1F600}", ["😀"], ["😁"]),
        (r"[\u0041-\u0043]+", ["ABC"], ["D"]),
        (r"[\d-z]", ["-", "5", "z"], ["y"]),
        ("a}", ["a}"], []),
        ("好*", ["", "好好"], []),
        ("(a|)b", ["b", "ab"], []),
    ],
)
def test_macro_syntax(pattern: str, yes: List[str], no: List[str]) -> None:
    g = macro(pattern)
    assert accepts(g, yes) == [True] * len(yes)
    assert accepts(g, no) == [False] * len(no)


@pytest.mark.parametrize(
    "pattern, phrase",
    [
        (r"a\b", "column 2: Word boundary assertion \\b is not supported"),
        (r"a\B", "Word boundary assertion \\B"),
        (r"[\B]", "Word boundary assertion \\B"),
        (r"\p{L}", "Unicode property escape"),
        (r"(a)\1", "column 4: Backreference \\1"),
        (r"(?<name>a)\k<name>", "column 11: Backreference \\k"),
        ("(?<=a)b", "Lookbehind assertion"),
        ("(?<!a)b", "Lookbehind assertion"),
        ("[]", "Empty character class"),
        ("[^]", "Empty character class"),
        ("[]a]", "Empty character class"),
        ("a]", "column 2: Unmatched ']'"),
        (r"\uZZ", "must be followed by four hexadecimal digits"),
        (r"\x4", "must be followed by two hexadecimal digits"),
        (r"\u{110000}", "beyond the Unicode range"),
        (r"\u{}", "one to six hexadecimal digits"),
        ("\\", "trailing backslash"),
        (r"\c1", "\\c must be followed by a letter"),
        ("+a", "column 1: There is nothing to repeat before '+'"),
        ("{1}", "nothing to repeat before the repetition"),
        ("^*a", "column 2: There is nothing to repeat before '*'"),
        ("a{", "Invalid repetition count"),
        ("a{,3}", "Invalid repetition count: expected a number"),
        ("a{3,1}", "lower bound 3 is larger than the upper bound 1"),
        ("abc)", "column 4: Unmatched ')'"),
        ("abc((a)", "column 4: The parenthesis is not closed"),
        ("a(?i)b", "column 2: Unsupported group modifier '(?i'"),
        ("(?s).", "Unsupported group modifier '(?s'"),
        ("(?P=n)", "Unsupported group modifier '(?P'"),
        ("(?", "Group modifier is not finished"),
        ("(?<>a)", "Invalid named capturing group"),
        ("[z-a]", "lower bound exceeds upper bound"),
        (r"[a-\d]", "Invalid character range endpoint"),
        ("[a", "Unclosed '['"),
    ],
)
def test_macro_errors(pattern: str, phrase: str) -> None:
    with pytest.raises(RuntimeError) as info:
        macro(pattern)
    assert phrase in str(info.value)
    assert "line 1, column 16: in the pattern of Regex(...)" in str(info.value)


# ---- converter dialect ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern, yes, no",
    [
        (r"\s", [" ", "\t", "\xa0"], ["\u2028", "\x1c"]),
        (r"\S", ["[", "a", "\u2028"], [" ", "\xa0"]),
        (r"\"\'\a\f\n\r\t\v\0\e", ["\"'\a\f\n\r\t\v\0\x1b"], []),
        (r"\u{20BB7}\u0300\x1F\cJ", ["\U00020bb7\u0300\x1f\n"], []),
        (r"[\r\n\$\u0010-\u006F\]\--]+", ["\r\n$ -", "]"], ["p"]),
        ("[^]", ["a", "\n"], [""]),
        ("[^]a", ["]a", "xa"], ["a"]),
        ("a]", ["a]"], []),
        ("a^b", ["ab"], []),
        ("a$*", ["a"], []),
        (r"\01", ["\x001"], []),
        ("(?<n>a)", ["a"], []),
        ("(?<>a)", ["a"], []),
        ("(a{2,}){1,2}", ["aa", "aaa", "aaaa"], ["", "a"]),
        (".+a.+", ["bbbabb"], ["ba"]),
    ],
)
def test_converter_syntax(pattern: str, yes: List[str], no: List[str]) -> None:
    g = xgr.Grammar.from_regex(pattern)
    assert accepts(g, yes) == [True] * len(yes)
    assert accepts(g, no) == [False] * len(no)


@pytest.mark.parametrize(
    "pattern, phrase",
    [
        ("a{1,3}?{1,3}", "column 8: Two consecutive repetition modifiers are not allowed."),
        ("a???", "column 4: Two consecutive repetition modifiers are not allowed."),
        ("a++", "Two consecutive repetition modifiers are not allowed."),
        (r"\w?$??", "Two consecutive repetition modifiers are not allowed."),
        ("[]", "Empty character class is not allowed in regex."),
        ("abc)", "Unmatched ')'"),
        ("abc((a)", "The parenthesis is not closed."),
        ("\0", "The regex must not contain null characters."),
        ("a\0b", "column 2: The regex must not contain null characters."),
        ("(?=abc)", "Lookahead assertion"),
        ("(?!abc)", "Lookahead assertion"),
        ("(?<=abc)", "Lookbehind assertion"),
        ("(?<!abc)", "Lookbehind assertion"),
        ("(?i)abc", "Unsupported group modifier '(?i'"),
        ("(?P<n>a)", "Unsupported group modifier '(?P'"),
        ("(?<1a>a)", "Invalid named capturing group"),
        (r"\b", "Word boundary"),
        (r"\p{L}", "Unicode property escape"),
        (r"\8", "Backreference"),
    ],
)
def test_converter_errors(pattern: str, phrase: str) -> None:
    with pytest.raises(RuntimeError) as info:
        xgr.Grammar.from_regex(pattern)
    assert phrase in str(info.value)
    with pytest.raises(RuntimeError):
        xgr.testing._regex_to_ebnf(pattern)


# ---- differential: real upstream xgrammar on the same patterns -------------------------------

INPUTS = ["", "a", "b", "ab", "A", "aa", "aaa", "abab", "é", "1", "12", " ", "\t", "\n", "\r", "_",
          ".", "-", "c", "B", '"', "\\", "\x01", "\x00", "a1", "aB", "Ab", "abc", "a\n", "\xa0",
          "q", "\x07", "\x7f", "ac", "aab", "ba", "AB", "a-b", "a.b", "😀", "}", "]"]

CURATED = [
    "abc", "a|bc|def", "(a|b)(c|d)", "a+b*c?", "(ab)+", r"\d+\.\d+", r"\w+", r"\W", r"\s\S",
    "a.c", ".+", "[^a-z]", "[a-f]{2,3}", "[0-9]{2,}", "^[0-9]+$", "a{2}", "a{0,2}b", "(a|)b",
    "a|", "()", "(())", "()|()", "^$", "$", "^", "", r"[\w.-]+@[a-z]+\.(com|org)",
    r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?", r"\x41\u0042\u{43}", r"[\u0041-\u0043]+",
    r"x\cAy", r"\a\e\0", r"\q\h\Z", r"\012", r"[\d-z]", r"[-a]", r"[a-]", r"[\]\-]",
    "a]", "a}", "(?:ab|c){2,}?", "(?<n>ab)+", "a+?b", "a^b", "a$b", "(^a)*", "a$*", "ab^+",
    "a{1,3}?{1,3}", "a???", "a++", "a**", "a{2}{3}", "a+*", "(a{2,}){1,2}", "(a{2,}){2}",
    "(?i)abc", "(?i)[a-d]+", "(?i)[^k]", "(?i)Σ", r"(?i)\x41", "(?i)[Z-a]", r"(?i)\W",
    "a(?=b)c", "a(?!b)c", "a(?=b)+", "(?P<n>ab)c", "好*", r"\u{1F600}", "[^]", "[^]a", "[]",
    r"\b", r"\p{L}", r"(a)\1", "(?<=a)b", "a{", "a{,3}", "x{abc}", "a{3,1}", "{", "*", "+a",
    "abc)", "abc((a)", r"\uZZ", r"\x4", r"\c1", "(?", "(?x)", "[a", "[z-a]",
    r"[a-\d]", r"\w?$??[\w.]", r"[\s]", r"[^\s]", r"[^\S]", r"[\S]", r"[\b]", "[.]", "[[]",
]

ATOMS = ["a", "b", "A", "é", r"\d", r"\w", r"\s", r"\S", r"\W", ".", "[a-c]", "[^ab]", r"\n",
         r"\t", r"\x41", r"\u0062", r"\u{63}", r"\.", r"\-", r"[\d-]", r"[\w.]", "}", r"\q",
         r"\a", r"\0", '"', r"\\", r"\cA", "-", "1", "^", "$", "(?=b)"]
QUANTS = ["", "", "", "*", "+", "?", "??", "{2}", "{1,2}", "{0,}", "+?", "*?"]


def random_pattern(r: random.Random, depth: int = 0) -> str:
    """A pattern with balanced groups, mostly valid in both dialects."""
    parts = []
    for _ in range(r.randint(1, 4)):
        if depth < 2 and r.random() < 0.25:
            inner = "|".join(random_pattern(r, depth + 1) for _ in range(r.randint(1, 3)))
            atom = r.choice(["(", "(?:", "(?<g>"]) + inner + ")"
        else:
            atom = r.choice(ATOMS)
        parts.append(atom + r.choice(QUANTS))
    if depth == 0 and r.random() < 0.1:
        parts.insert(0, "(?i)")
    return "".join(parts)


def outcome(mod, mode: str, pattern: str, opts: str = "") -> Outcome:
    """Accept flags on INPUTS, or "error" (raised at construction or at first use)."""
    try:
        if mode == "macro":
            g = mod.Grammar.from_ebnf(
                f"root ::= Regex({json.dumps(pattern, ensure_ascii=False)}{opts})")
        else:
            g = mod.Grammar.from_regex(pattern)
        acc = importlib.import_module(mod.__name__ + ".testing")._is_grammar_accept_string
        acc(g, "")
        return tuple(acc(g, s) for s in INPUTS)
    except RuntimeError:
        return "error"


def intended_difference(ours: Outcome, up: Outcome, opts: str) -> bool:
    """The json_string empty-language case (see the module docstring)."""
    return ours == "error" and "json_string=true" in opts and isinstance(up, tuple) and not any(up)


def compare(up_mod, mode: str, pattern: str, opts: str = "") -> Optional[str]:
    up = outcome(up_mod, mode, pattern, opts)
    ours = outcome(xgr, mode, pattern, opts)
    if ours == up or intended_difference(ours, up, opts):
        return None
    if isinstance(up, tuple) and isinstance(ours, tuple):
        bad = [s for s, u, o in zip(INPUTS, up, ours) if u != o]
        return f"{mode} {pattern!r}{opts}: differs on {bad!r} (upstream accepts {[up[INPUTS.index(b)] for b in bad]})"
    return f"{mode} {pattern!r}{opts}: upstream {'error' if up == 'error' else 'ok'}, ours {'error' if ours == 'error' else 'ok'}"


@pytest.fixture(scope="module")
def upstream():
    return pytest.importorskip("xgrammar")


@pytest.mark.parametrize("mode", ["conv", "macro"])
def test_differential_curated(upstream, mode: str) -> None:
    diffs = [d for p in CURATED for d in [compare(upstream, mode, p)] if d]
    assert not diffs, "\n".join(diffs)


@pytest.mark.parametrize("opts", [", json_string=true", ', flags="i"', ', flags="s"', ', flags=""',
                                  ', flags="is", json_string=true'])
def test_differential_macro_options(upstream, opts: str) -> None:
    pats = [p for p in CURATED if p not in ("(?i)abc",)] + [r"\S+", "[^a]+", r"a\\b", 'a"|b']
    diffs = [d for p in pats for d in [compare(upstream, "macro", p, opts)] if d]
    assert not diffs, "\n".join(diffs)


@pytest.mark.parametrize("seed", range(4))
def test_differential_random(upstream, seed: int) -> None:
    r = random.Random(seed)
    opts_choices = ["", "", ", json_string=true", ', flags="i"', ', flags=""']
    diffs = []
    for _ in range(60):
        p = random_pattern(r)
        diffs += [d for d in [compare(upstream, "conv", p),
                              compare(upstream, "macro", p, r.choice(opts_choices))] if d]
    assert not diffs, "\n".join(diffs)


# ---- structural tags read their regexes as from_regex (upstream's converter) --------------


def _stag_regex(pattern: str) -> xgr.Grammar:
    return xgr.Grammar.from_structural_tag(json.dumps({
        "type": "structural_tag",
        "format": {"type": "sequence", "elements": [
            {"type": "const_string", "value": "x"}, {"type": "regex", "pattern": pattern}]},
    }))


def test_structural_tag_regex_is_the_converter_dialect() -> None:
    g = _stag_regex(r"\s+")
    assert accepts(g, ["x \xa0", "x\t"]) == [True, True]
    assert accepts(g, ["x\u2028", "x"]) == [False, False]
    for bad, phrase in [("(?i)a", "Unsupported group modifier"), ("a**", "Two consecutive"),
                        ("a(?=b)", "Lookahead assertion")]:
        with pytest.raises(ValueError) as info:
            _stag_regex(bad)
        assert "$.format.elements[1].pattern" in str(info.value) and phrase in str(info.value)


def test_structural_tag_regex_differential(upstream) -> None:
    for pattern in [r"\s+", r"[\w.]+@x\.com", "a|bc?", r"\d{2,3}"]:
        ours = _stag_regex(pattern)
        up = upstream.Grammar.from_structural_tag(json.dumps({
            "type": "structural_tag",
            "format": {"type": "sequence", "elements": [
                {"type": "const_string", "value": "x"}, {"type": "regex", "pattern": pattern}]},
        }))
        up_acc = importlib.import_module("xgrammar.testing")._is_grammar_accept_string
        inputs = ["x" + s for s in INPUTS] + ["x  \xa0", "xa.b@x.com", "x123", "x1234"]
        assert accepts(ours, inputs) == [up_acc(up, s) for s in inputs], pattern


@pytest.mark.parametrize(
    "mode, pattern, opts",
    [
        ("conv", r"\x41a{0}", ""),
        ("macro", "((0[1]{1,}|)){3,}", ", json_string=true"),
        ("macro", "([a]*z)?", ', flags="i"'),
        ("macro", "([-](😀*))?", ', flags=""'),
        ("macro", "((cA{1,})?)", ', flags=""'),
        ("conv", r"[\^]+", ""),
    ],
)
def test_where_upstream_is_wrong_we_follow_python_re(mode: str, pattern: str, opts: str) -> None:
    import re

    g = macro(pattern, opts) if mode == "macro" else xgr.Grammar.from_regex(pattern)
    flags = re.IGNORECASE | re.ASCII if "i" in opts else 0
    expected = [re.fullmatch(pattern, s, flags) is not None for s in INPUTS]
    assert accepts(g, INPUTS) == expected
