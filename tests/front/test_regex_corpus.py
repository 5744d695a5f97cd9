"""One corpus of regex dialect rules (tests/front/regex_dialect_corpus.json) run through
every path of the C core's one regex front end (csrc/front/regex.c):

- ECMAScript (``dialect`` "ecma" or "all"): a JSON schema ``{"type": "string",
  "pattern": p}`` must accept / reject the JSON-quoted strings (search semantics: the
  pattern may match anywhere unless anchored);
- upstream xgrammar's dialects ("upstream" or "all"): ``Grammar.from_regex(p)`` and the
  EBNF macro ``Regex(p)`` must accept / reject the strings (whole-string match; ``^`` and
  ``$`` match the empty string);

and checks the corpus itself against Python's ``re`` (with the dialect translated: ``.``,
``\\s``, ``$``, ``\\u{...}``) and, for the upstream dialects, against real upstream
xgrammar where it is installed. Entries with ``"re": false`` use what ``re`` cannot say
(``\\p{..}``, ``[]``, surrogate-pair escapes, nested quantifiers).
"""

import importlib
import json
import os
import re
from typing import Any, Dict, List

import pytest

import xgrammar2 as xgr
from xgrammar2.json_schema import regex as rx
from xgrammar2.json_schema.errors import UnsatisfiableSchemaError
from xgrammar2.testing import _is_grammar_accept_string

CORPUS: List[Dict[str, Any]] = json.load(
    open(os.path.join(os.path.dirname(__file__), "regex_dialect_corpus.json"), encoding="utf-8"))

ECMA_SPACE = "\\t\\n\\v\\f\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
CONV_SPACE = "\\t\\n\\v\\f\\r \\xa0"
MACRO_SPACE = "\\t\\n\\v\\f\\r "


def to_python_re(p: str, dialect: str) -> str:
    """Translates a corpus pattern into Python ``re`` syntax (used with re.ASCII, which
    makes ``\\d`` ``\\w`` ASCII as in every dialect here). ``dialect``: ecma, conv, macro."""
    space = {"ecma": ECMA_SPACE, "conv": CONV_SPACE, "macro": MACRO_SPACE}[dialect]
    out: List[str] = []
    i, in_class = 0, False
    while i < len(p):
        c = p[i]
        if c == "\\":
            e = p[i + 1]
            if e in "sS":
                if in_class:
                    assert e == "s", "\\S inside a class has no re translation"
                    out.append(space)
                else:
                    out.append(("[^" if e == "S" else "[") + space + "]")
            elif e == "u" and p[i + 2] == "{":
                j = p.index("}", i)
                out.append("\\U%08X" % int(p[i + 3:j], 16))
                i = j + 1
                continue
            else:
                out.append(p[i:i + 2])
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            out.append(c)
        elif c == "[":
            in_class = True
            out.append(c)
            if p[i + 1:i + 2] == "^":
                out.append("^")
                i += 1
        elif c == ".":
            out.append("[^\\n\\r\\u2028\\u2029]" if dialect == "ecma" else "(?s:.)")
        elif c == "(" and p.startswith("(?<", i) and p[i + 3:i + 4] not in ("=", "!"):
            out.append("(?P<")
            i += 3
            continue
        elif c == "{" and dialect == "ecma" and not re.match(r"\{\d+(,\d*)?\}", p[i:]):
            out.append("\\{")  # ECMAScript: no quantifier, a literal brace
        elif c in "^$":
            out.append(("\\A" if c == "^" else "\\Z") if dialect == "ecma" else "")
        else:
            out.append(c)
        i += 1
    return "".join(out)


def entries(kind: str) -> List[Dict[str, Any]]:
    return [x for x in CORPUS if x["dialect"] in (kind, "all")]


def ids(xs: List[Dict[str, Any]]) -> List[str]:
    return [x["pattern"] for x in xs]


def test_corpus_is_well_formed() -> None:
    assert len(CORPUS) >= 50
    for x in CORPUS:
        assert x["dialect"] in ("ecma", "upstream", "all"), x
        assert x["match"] or x["nomatch"], x
    # every dialect rule the corpus is about appears in it
    text = " ".join(x["pattern"] for x in CORPUS)
    for needle in [".", "\\d", "\\D", "\\w", "\\W", "\\s", "\\S", "[^", "\\u{", "\\u00", "\\p{",
                   "{3}", "{2,}", "{1,3}", "*?", "^", "$"]:
        assert needle in text, needle


@pytest.mark.parametrize("x", entries("ecma"), ids=ids(entries("ecma")))
def test_ecmascript_pattern_via_json_schema(x: Dict[str, Any]) -> None:
    schema = json.dumps({"type": "string", "pattern": x["pattern"]})
    if not x["match"]:  # a pattern no string matches may make the schema unsatisfiable
        try:
            g = xgr.Grammar.from_json_schema(schema)
        except UnsatisfiableSchemaError:
            return
    g = xgr.Grammar.from_json_schema(schema)
    for s in x["match"]:
        assert _is_grammar_accept_string(g, json.dumps(s)), (x["pattern"], s)
    for s in x["nomatch"]:
        assert not _is_grammar_accept_string(g, json.dumps(s)), (x["pattern"], s)


@pytest.mark.parametrize("x", entries("upstream"), ids=ids(entries("upstream")))
def test_upstream_dialects_via_from_regex_and_macro(x: Dict[str, Any]) -> None:
    conv = xgr.Grammar.from_regex(x["pattern"])
    macro = xgr.Grammar.from_ebnf(f"root ::= Regex({json.dumps(x['pattern'], ensure_ascii=False)})")
    for g in (conv, macro):
        for s in x["match"]:
            assert _is_grammar_accept_string(g, s), (x["pattern"], s)
        for s in x["nomatch"]:
            assert not _is_grammar_accept_string(g, s), (x["pattern"], s)


@pytest.mark.parametrize("x", [x for x in CORPUS if x.get("re", True)],
                         ids=ids([x for x in CORPUS if x.get("re", True)]))
def test_corpus_agrees_with_python_re(x: Dict[str, Any]) -> None:
    dialects = {"ecma": ["ecma"], "upstream": ["conv", "macro"], "all": ["ecma", "conv", "macro"]}
    for d in dialects[x["dialect"]]:
        if d != "ecma" and "\\s" in x["pattern"] and x["dialect"] == "upstream":
            continue  # the upstream \s entry lists only strings both upstream dialects agree on
        r = re.compile(to_python_re(x["pattern"], d), re.ASCII)
        find = r.search if d == "ecma" else r.fullmatch
        for s in x["match"]:
            assert find(s), (d, x["pattern"], s)
        for s in x["nomatch"]:
            assert not find(s), (d, x["pattern"], s)


def test_ecmascript_tree_is_the_search_language() -> None:
    """The flat tree the core returns (json_schema/regex.py's AST) runs the corpus through
    the Python automata too (pattern ∩ length and friends are built on it)."""
    from xgrammar2.json_schema import automaton as fa

    for x in entries("ecma"):
        full = rx.to_full_match(rx.parse(x["pattern"]))
        if full is None:
            full = rx.cat(rx.ANY_STAR, rx.parse(x["pattern"]), rx.ANY_STAR)
        d = fa.from_regex(full, limit=100000)
        for s in x["match"]:
            assert d.run(s), (x["pattern"], s)
        for s in x["nomatch"]:
            assert not d.run(s), (x["pattern"], s)


def test_real_upstream_xgrammar_agrees_on_upstream_entries() -> None:
    try:
        up = importlib.import_module("xgrammar")
        up_testing = importlib.import_module("xgrammar.testing")
    except ImportError:
        pytest.skip("real upstream xgrammar is not installed")
    if up is xgr:
        pytest.skip("xgrammar is aliased to xgrammar2 here")
    for x in entries("upstream"):
        if "\\uD83D" in x["pattern"]:
            continue  # upstream matches nothing with a \u surrogate pair (docs/regex.md)
        g = up.Grammar.from_regex(x["pattern"])
        for s in x["match"]:
            assert up_testing._is_grammar_accept_string(g, s), (x["pattern"], s)
        for s in x["nomatch"]:
            assert not up_testing._is_grammar_accept_string(g, s), (x["pattern"], s)


@pytest.mark.parametrize("pattern, kind, phrase", [
    ("\\1", "unsupported", "Backreference"),
    ("\\k<a>", "unsupported", "Backreference"),
    ("\\01", "unsupported", "octal"),
    ("(?<=a)b", "unsupported", "Lookbehind"),
    ("(?<!a)b", "unsupported", "Lookbehind"),
    ("(?i)a", "unsupported", "group modifier"),
    ("[\\B]", "unsupported", "Word boundary"),
    ("(?=a)*", "syntax", "lookahead cannot be repeated"),
    ("a\\b+", "syntax", "assertion cannot be repeated"),
    ("((?!a))*", "syntax", "nothing to repeat"),
    ("\\a", "unsupported", "no meaning"),
    ("\\p{Script=Greek}", "unsupported", "general categories"),
    ("\\p{Nope}", "unsupported", "unknown general category"),
    ("(", "syntax", "not closed"),
    ("a)", "syntax", "Unmatched ')'"),
    ("*a", "syntax", "nothing to repeat"),
    ("^+", "syntax", "nothing to repeat"),
    ("(^)*", "syntax", "nothing to repeat"),
    ("[z-a]", "syntax", "lower bound exceeds"),
    ("a{3,2}", "syntax", "lower bound"),
    ("[\\w-z]", "syntax", "range"),
    ("\\u12", "syntax", "four hexadecimal digits"),
    ("\\u{110000}", "syntax", "Unicode range"),
    ("\\x4", "syntax", "two hexadecimal digits"),
    ("\\c1", "syntax", "letter"),
    ("[ab", "syntax", "Unclosed"),
    ("a\\", "syntax", "trailing backslash"),
])
def test_ecmascript_refusals(pattern: str, kind: str, phrase: str) -> None:
    """What the ECMAScript dialect refuses, and how: RegexUnsupported for valid patterns a
    regular grammar cannot express (the schema keyword then follows the converter's policy),
    RegexSyntaxError for malformed ones (the schema is invalid); both name the pattern."""
    rx._cache.clear()
    cls = rx.RegexUnsupported if kind == "unsupported" else rx.RegexSyntaxError
    with pytest.raises(cls) as e:
        rx.parse(pattern)
    assert type(e.value) is cls
    assert phrase in str(e.value) and f"/{pattern}/" in str(e.value)
