"""Lark grammars (``Grammar.from_lark`` / ``GrammarCompiler.compile_lark``, issue 33).

A corpus of Lark grammars, each with strings it must accept and strings it must reject, runs
on xgrammar2 and, when it is installed, on upstream xgrammar 0.2.8 (the dialect's
reference): both must give the stated answer for every string. Then the errors (with line and
column), special tokens, named and nested grammars, lazy rules, the attributes xgrammar2
refuses, and the compiler cache.
"""

import sys
import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
try:
    import xgrammar2  # noqa: F401
except ImportError:  # a source checkout that is not installed
    sys.path.insert(0, str(REPO / "engine"))
    import xgrammar2  # noqa: F401

import xgrammar2 as xgr  # noqa: E402
from xgrammar2 import _core  # noqa: E402
from xgrammar2.lark import LarkGrammarError, lark_to_ebnf  # noqa: E402

pytestmark = pytest.mark.skipif(
    not getattr(_core, "AVAILABLE", False), reason="the xgrammar2 C core is not built"
)

try:
    import xgrammar as xgr_up
except ImportError:  # upstream is optional: the expectations still hold for xgrammar2
    xgr_up = None


# ---- helpers ---------------------------------------------------------------------------------

def _accepts(mod, grammar, text: str, info=None) -> bool:
    if mod is xgr:
        from xgrammar2.testing import _is_grammar_accept_string

        if info is None:
            return _is_grammar_accept_string(grammar, text)
    compiled = mod.GrammarCompiler(info or mod.TokenizerInfo([]), cache_enabled=False) \
        .compile_grammar(grammar)
    m = mod.GrammarMatcher(compiled, terminate_without_stop_token=True)
    return bool(m.accept_string(text)) and bool(m.is_terminated())


def _accepts_tokens(mod, compiled, ids) -> bool:
    m = mod.GrammarMatcher(compiled, terminate_without_stop_token=True)
    for i in ids:
        if not m.accept_token(i):
            return False
    return bool(m.is_terminated())


def _check_language(mod, grammar_src, accepted, rejected, **kw):
    g = mod.Grammar.from_lark(grammar_src, **kw)
    wrong = [s for s in accepted if not _accepts(mod, g, s)]
    wrong += [s for s in rejected if _accepts(mod, g, s)]
    return wrong


# ---- the corpus ------------------------------------------------------------------------------
# (id, grammar, accepted, rejected)

CORPUS = [
    ("sequence-and-choice", 'start: "a" "b" | "c" ("d" | "e")', ["ab", "cd", "ce"],
     ["", "a", "c", "abce", "cde"]),
    ("group-and-optional", 'start: ("x" | "y") ["z"]', ["x", "y", "xz", "yz"], ["", "z", "xyz"]),
    ("empty-first-alternative", 'start: | "p" | "q"', ["", "p", "q"], ["pq", "r"]),
    ("empty-last-alternative", 'start: "p" |', ["", "p"], ["pp"]),
    ("empty-rule", "start:", [""], ["a", " "]),
    ("empty-strings", 'start: "" "k" ""', ["k"], ["", "kk"]),
    ("rule-prefixes", '?value: "v"\n!tail: "t"\nstart: value tail', ["vt"], ["v", "t", ""]),
    ("underscore-names", 'start: _inner _LEX\n_inner: "i"\n_LEX: "l"', ["il"], ["i", "_inner_LEX"]),
    ("aliases-ignored", 'start: "m" -> first\n     | "n" -> second', ["m", "n"], ["first", ""]),
    ("continuation-lines", 'start: "a"\n     | "b" "c"\n     | "d"', ["a", "bc", "d"], ["b", "ad"]),
    ("recursion", 'start: v\nv: "x" | "(" v ")" | "[" vs? "]"\nvs: v ("," v)*',
     ["x", "(x)", "((x))", "[]", "[x]", "[x,(x),[x]]"], ["", "()", "[", "[x,]", "(x"]),
    ("center-recursion", 'start: s\ns: "m" | "a" s "b"', ["m", "amb", "aambb"], ["ab", "aamb", ""]),
    ("terminal-composition", 'start: SIGNED\nSIGNED: SIGN? DIGIT+\nSIGN: "+" | "-"\nDIGIT: "0".."9"',
     ["0", "42", "+7", "-13"], ["", "+", "--1", "1a"]),
    ("literal-vs-terminal", "start: \"'q'\" /a+/ | STR /b+/\nSTR: /'[^']*'/",
     ["'q'a", "'q'aaa", "'z'b", "'q'bb"], ["'z'a", "q"]),
    ("regex-dot-is-one-codepoint", 'start: /.../ "mid" /../',
     ["abcmidde", "\U0001F600xymidzz", "中文字mid好的"], ["abmidde", "abcmidd"]),
    ("regex-escaped-slash-and-bounds", r"start: /a\/b/ /[0-9]{2,4}/",
     ["a/b12", "a/b1234"], ["a/b1", "a/b12345", "a-b12"]),
    ("regex-dot-excludes-newline", "start: /x.y/", ["x y", "x😀y"], ["xy", "x\ny"]),
    ("regex-dotall", "start: /x.y/s", ["x\ny", "xzy"], ["xy", "x\n\ny"]),
    ("regex-dotall-escaped-dot", r"start: /x\.y/s", ["x.y"], ["xzy", "x\ny"]),
    ("regex-dotall-class-dot", "start: /x[.]y/s", ["x.y"], ["xzy"]),
    ("regex-case-insensitive", r"start: /hey[0-2]\x21/iu", ["hey0!", "HEY1!", "hEy2!"],
     ["hey3!", "hey1", "héy1!"]),
    ("regex-nocase-ascii-only", "start: /Σ|k|é/i", ["Σ", "k", "K", "é"], ["σ", "É", "\u212a"]),
    ("regex-nocase-negated-class", "start: /[^kσ]+/i", ["A", "Σ", "😀"], ["k", "K", "σ", "aK"]),
    ("regex-nocase-class-range", "start: TOK\nTOK: /[A-Cx-z]+/i", ["abc", "ABC", "XyZ"],
     ["", "d", "W"]),
    ("regex-nocase-dotall", "start: /a.b/is", ["a b", "A\nB"], ["ab", "a\n\nb"]),
    ("regex-nocase-escapes", r"start: /\x41\u0062\u{43}/i", ["abc", "ABC", "AbC"], ["abd"]),
    ("regex-unicode-escape", r"start: /\u{1F600}+/", ["😀", "😀😀"], ["", "😁"]),
    ("regex-control-escape", r"start: /x\cAy/", ["x\x01y"], ["xy", "xAy"]),
    ("regex-whitespace-class", r"start: /a\sb/", ["a b", "a\tb", "a\nb", "a\x0bb", "a\xa0b"],
     ["ab", "a\x00b", "a\u2028b"]),
    ("regex-digit-word-ascii", r"start: /\d\w/", ["1a", "9_", "0Z"], ["٣a", "1é", "a1"]),
    ("regex-non-space", r"start: /\S+/", ["好!x", "\x00"], ["a b", ""]),
    ("regex-named-groups", "start: /(?<n>ab)+(?P<m>c)/i", ["abc", "ABabC"], ["c", "ab"]),
    ("regex-noncapturing", "start: /(?:ab)+c/", ["abc", "ababc"], ["c"]),
    ("regex-lazy-quantifiers", "start: /a+?b??c/", ["ac", "abc", "aac"], ["c", "abbc"]),
    ("regex-empty-alternatives", "start: /(a|)b|c|/", ["ab", "b", "c", ""], ["a"]),
    ("regex-edge-anchors", "start: /^ab$/", ["ab"], ["", "a"]),
    ("regex-large-repeat", "start: /(ab){2,300}c/", ["ababc", "ab" * 300 + "c"],
     ["abc", "ab" * 301 + "c"]),
    ("regex-unbounded-repeat", "start: /(xy){20,}z/", ["xy" * 20 + "z", "xy" * 33 + "z"],
     ["xy" * 19 + "z"]),
    ("ascii-ranges", 'start: "a".."z"+ "0".."9"?', ["a", "xyz", "hello7"], ["", "A", "7", "ab78"]),
    ("unicode-ranges", 'start: "α".."γ"+', ["α", "βγ"], ["", "δ", "a"]),
    ("unicode-literals", 'start: "😀" "é" "中文"', ["😀é中文"], ["😀é", "😀e中文"]),
    ("nocase-string", 'start: "Ab-C9"i', ["Ab-C9", "ab-c9", "AB-C9"], ["ab_c9", "äb-c9", ""]),
    ("nocase-string-in-terminal", 'start: T\nT: "Yes"i | "no"', ["yes", "YES", "no"], ["No", "y"]),
    ("json-escapes", r'''start: "\n" "\t" "\\" "\"" "\u03bb" "\/"''', ['\n\t\\"λ/'], ["\n\tλ"]),
    ("control-escapes", r'''start: "\b" "\f" "\r"''', ["\b\f\r"], ["bfr"]),
    ("hyphenated-names", 'start: foo-bar FOO-BAR\nfoo-bar: "a"\nFOO-BAR: "b"', ["ab"], ["a-b"]),
    ("comments", 'start: item // one\nitem: "ok" # two\n# three', ["ok"], ["item", ""]),
    ("crlf-lines", 'start: a\r\na: "x"\r\n  | "y"\r\n', ["x", "y"], ["xy"]),
    # repetition forms
    ("rep-star-plus-opt", 'start: "a"* "b"+ "c"?', ["b", "aabbc", "bc"], ["", "a", "cc"]),
    ("rep-tilde-exact", 'start: "ab"~3', ["ababab"], ["abab", "abababab"]),
    ("rep-tilde-range", 'start: "z"~2..4', ["zz", "zzz", "zzzz"], ["z", "zzzzz"]),
    ("rep-braces", 'start: "q"{3} "w"{1,2} "e"{2,} "r"{,1}', ["qqqwee", "qqqwweeeer"],
     ["qqwee", "qqqwwwee", "qqqwe", "qqqweerr"]),
    ("rep-zero", 'start: "a"{0} "b"', ["b"], ["ab"]),
    ("rep-group", 'start: ("ab" | "c")~2', ["abab", "abc", "cc"], ["ab", "ccc"]),
    ("rep-optional-bracket-repeat", 'start: ["a" "b"]+ "c"', ["c", "abc", "ababc"], ["aabc", "ab"]),
    # common imports
    ("common-int-ws", "%import common.INT\n%import common.WS\n%ignore WS\nstart: INT (\",\" INT)*",
     ["1", "1,2", "1 , 2 ", "10,\n20"], [" 1", "1 2", "a"]),
    ("common-number", "%import common.NUMBER\nstart: NUMBER",
     ["0", "12", "1.5", ".5", "1.", "1e5", "2.5E-3"], ["", "-1", "e5", "1.2.3"]),
    ("common-signed", "%import common (SIGNED_NUMBER, SIGNED_INT)\nstart: SIGNED_NUMBER \";\" SIGNED_INT",
     ["-1.5;+2", "3;-4", "+.5e1;0"], ["--1;1", "1;1.5"]),
    ("common-float-decimal", "%import common.FLOAT\n%import common.DECIMAL\nstart: FLOAT \"|\" DECIMAL",
     ["1.0|2.", "1e3|.5", ".5e-2|3.25"], ["1|1.0", "1.0|1"]),
    ("common-hexdigit", "%import common.HEXDIGIT\nstart: HEXDIGIT+", ["0fA9"], ["g", ""]),
    ("common-escaped-string", "%import common.ESCAPED_STRING\nstart: ESCAPED_STRING",
     ['""', '"abc"', r'"a\"b"', r'"\\"'], ['"', '"a"b"', 'abc', r'"\"']),
    ("common-names", "%import common (CNAME, WORD, LETTER, LCASE_LETTER, UCASE_LETTER)\n"
     "start: CNAME \" \" WORD \" \" LETTER LCASE_LETTER UCASE_LETTER",
     ["_a1 word xyZ", "abc Hello AbC"], ["1a word xyZ", "a wo1d xyZ", "a b xYz"]),
    ("common-newline", "%import common.NEWLINE\n%import common.WS_INLINE\nstart: \"a\" WS_INLINE? NEWLINE \"b\"",
     ["a\nb", "a \t\r\n\nb"], ["ab", "a \rb"]),
    ("common-comments", "%import common (SH_COMMENT, CPP_COMMENT, C_COMMENT, SQL_COMMENT)\n"
     "start: SH_COMMENT \"\\n\" CPP_COMMENT \"\\n\" C_COMMENT \"\\n\" SQL_COMMENT",
     ["# x\n// y\n/* z */\n-- w", "#\n//\n/**/\n--"], ["# x\n/ y\n/* z */\n-- w", "#\n//\n/* */ */\n--"]),
    ("common-cr-lf", "%import common (CR, LF)\nstart: CR LF", ["\r\n"], ["\n"]),
    ("import-alias", "%import common.INT -> NUM\nstart: NUM \"x\"", ["12x"], ["x"]),
    ("import-after-use", 'start: DIGIT "!"\n%import common.DIGIT', ["7!"], ["77!"]),
    # %ignore
    ("ignore-between-and-after", '%import common.WS\n%ignore WS\nstart: "a" DIGIT\nDIGIT: "0".."9"',
     ["a1", "a 1", "a\n1  "], [" a1", "a 12"]),
    ("ignore-not-inside-terminal", '%ignore " "\nstart: NUM\nNUM: /[0-9]+/', ["12", "12 "], ["1 2", " 12"]),
    ("ignore-multiple", '%import common (WS, CPP_COMMENT)\n%ignore WS\n%ignore CPP_COMMENT\n'
     'start: "x" "y"', ["xy", "x // c\ny", "x y // done"], ["// c\nxy", "x / y"]),
    ("ignore-inline-regex", '%ignore /[ \\t]+/\nstart: "a" "b"', ["ab", "a b", "a \tb\t"], ["a\nb"]),
    ("ignore-alternatives", '%ignore " " | ";"\nstart: "u" "v"', ["u v", "u;;v", "u ;v ;"], ["u,v"]),
    ("ignore-allow-initial", '%grammar_options {"allow_initial_skip": true}\n%ignore " "\n'
     'start: "a" "b"', [" ab", "  a b "], ["a-b"]),
    ("ignore-not-before-first", '%ignore " "\nstart: "a" "b"', ["a b "], [" a b"]),
    ("ignore-with-rule-boundaries", '%ignore " "\nstart: pair+\npair: "(" ")"', ["()", "() ( ) "],
     [" ()"]),
    ("ignore-after-empty-string", '%ignore " "\nstart: "" "a"', ["a", "a "], [" a"]),
    # %json
    ("json-object", 'start: "<t>" args "</t>"\nargs: %json {"type": "object", '
     '"properties": {"city": {"type": "string"}}, "required": ["city"], '
     '"additionalProperties": false}', ['<t>{"city": "Paris"}</t>', '<t>{"city":"x"}</t>'],
     ['<t>{}</t>', '<t>{"city": 1}</t>', '<t>{"city": "x", "b": 1}</t>']),
    ("json-in-sequence-and-repeat", 'start: (%json {"type": "integer"} ";")+', ["1;", "1;-20;"],
     ["", "1", "a;"]),
    ("json-multiline", 'start: %json {\n  "type": "array",\n  "items": {"type": "boolean"},\n'
     '  "maxItems": 2\n}', ["[]", "[true]", "[true, false]"], ["[true, true, true]", "[1]"]),
    ("json-enum", 'start: %json {"enum": ["a", 1, null]} "."', ['"a".', "1.", "null."], ['"b".', "2."]),
    # %regex substring
    ("substring-chunks", 'start: %regex {"substring_chunks": ["abc", "de", "fg"]}',
     ["", "abc", "de", "abcde", "defg", "abcdefg", "fg"], ["ab", "cde", "abcfg", "abcdefgabc"]),
    ("substring-chars", 'start: %regex {"substring_chars": "a😀c"}', ["", "a", "😀c", "a😀c", "c"],
     ["ac", "ca", "a😀c😀"]),
    ("substring-in-rule", 'start: "<" %regex {"substring_chunks": ["x", "y"]} ">"',
     ["<>", "<x>", "<xy>", "<y>"], ["<yx>"]),
    ("substring-in-terminal", 'start: T "!"\nT: %regex {"substring_chars": "abc"}',
     ["!", "ab!", "bc!"], ["ac!"]),
    # %lark and lazy forms
    ("nested-lark", 'start: "[" %lark {\n  start: item\n  item: "x" | "(" item ")"\n} "]"',
     ["[x]", "[(x)]"], ["[]", "[(x]"]),
    ("nested-lark-own-namespace", 'start: item %lark {\nstart: item\nitem: "in"\n}\nitem: "out"',
     ["outin"], ["inout", "outout"]),
    ("nested-lark-ignore-json", 'start: "[" %lark {\n  %import common.WS\n  %ignore WS\n'
     '  start: key ":" %json {"type": "integer"}\n  key: "k"\n} "]"', ["[k:1]", "[k : 2 ]"],
     ["[ k:1]", "[k:a]"]),
    ("two-nested-lark", 'start: %lark {\nstart: "a"\n} %lark {\nstart: "b"\n}', ["ab"], ["a", "ba"]),
    ("lazy-standalone-trigger", 'start: head\nhead[lazy]: TEXT "<end>"\nTEXT: /(\\n|.)*/',
     ["", "abc", "abc<end>", "<end>", "a\nb<end>", "abc<en"], ["a<end>b", "<end><end>"]),
    ("lazy-stop-any-text", 'start: f "!"\nf[stop="</x>"]: TEXT\nTEXT: /(.|\\n)*/',
     ["a</x>!", "</x>!", "ab!"], ["a</x>b!"]),
    ("lazy-suffix-any-text", 'start: f\nf[suffix="END"]: /(?:.|\\n)*/', ["xyEND", "xy"], ["xyENDz"]),
    ("lazy-committed-shortest", 'start: "<" r ">"\nr[lazy]: /[a-z]+/', ["<a>", "<q>"],
     ["<ab>", "<>", "<a"]),
    ("lazy-one-unit", 'start: r "a"\nr[lazy]: /[b]+/', ["ba"], ["bba", "a"]),
    ("lazy-nullable", 'start: "<" r ">"\nr[lazy]: /[a-z]*/', ["<>"], ["<a>"]),
    ("lazy-choices", 'start: "<" r ">"\nr[lazy]: "ab" | "abc"', ["<ab>"], ["<abc>"]),
    ("lazy-prefix-free-choices", 'start: "<" r ">"\nr[lazy]: "aa" | "bb"', ["<aa>", "<bb>"],
     ["<a>", "<ab>"]),
    ("lazy-terminals", 'start: "<" r ">"\nr[lazy]: SUB SUB\nSUB: /[a-z]/', ["<ab>"], ["<a>", "<abc>"]),
    ("lazy-per-occurrence", 'start: r " " r\nr[lazy]: /[a-z]+/', ["a b"], ["ab b", "a bb"]),
    ("lazy-ignore-not-inside", 'start: "<" r ">"\nr[lazy]: /[a-z]+/\n%ignore " "',
     ["<a>", "< a >"], ["<ab>"]),
    ("stop-general-body", 'start: f "z"\nf[stop="!"]: /[a-y!]*/', ["ab!z", "!z"], ["ab!!z", "abz"]),
    ("suffix-regex-marker", 'start: f "z"\nf[suffix=/!+/]: /[a-y]*/', ["ab!z"], ["abz", "ab!!z"]),
    ("suffix-terminal-marker", 'start: f\nf[suffix=END]: /[a-z]*/\nEND: "</e>" | "<e>"',
     ["ab</e>", "<e>"], ["ab", "ab<e></e>"]),
    ("stop-nocase-marker", 'start: f\nf[stop="END"i]: /[a-z]*/', ["abEnD", "end"], ["ab", "abendx"]),
    ("stop-marker-in-body-alphabet", 'start: r "c"\nr[stop="b"]: /[a-z]*/', ["aabc", "bc"],
     ["abbc", "aac", "abab", "aab"]),
    ("suffix-regex-marker-bounded-body", 'start: "<" r ">"\nr[suffix=/!!+/]: /[a-z]{1,4}/',
     ["<a!!>", "<abcd!!>"], ["<!!>", "<a!>", "<a!!!>", "<abcde!!>"]),
    ("stop-terminal-marker-alternatives", 'start: "<" r ">"\nr[stop=END]: /[a-z]+/\nEND: /!!+/ | "??"',
     ["<a!!>", "<word??>"], ["<a!>", "<a!!!>", "<word?>", "<word???>"]),
    ("stop-dotall-regex-marker", 'start: r "z"\nr[stop=/X.Y/s]: /[a-z]*/', ["abcX\nYz", "abcXaYz"],
     ["abcX\nZz", "abcXYz"]),
    ("suffix-terminal-composition", 'start: "<" r ">"\nr[suffix="!"]: AB+\nAB: "a" | "b"',
     ["<a!>", "<ab!>"], ["<!>", "<ab!!>", "<a!b!>"]),
    ("lazy-starred-terminal-then-literal", 'start: head "!"\nhead[lazy]: T* "<end>"\nT: /[a-z]/',
     ["<end>!", "abc<end>!"], ["ABC<end>!", "a<end>b<end>!", "abc<end>"]),
    ("lazy-starred-any-text", 'start: head "!"\nhead[lazy]: TEXT* "<end>"\nTEXT: /(\\n|.)*/',
     ["<end>!", "abc<end>!", "a\nb<end>!", "你好<end>!"], ["a<end>b<end>!"]),
    ("lazy-plus-terminal", 'start: head "!"\nhead[lazy]: T+ "<end>"\nT: /[a-z]/',
     ["a<end>!", "abc<end>!"], ["<end>!", "a<end>b<end>!"]),
    ("lazy-quantified-group", 'start: head "!"\nhead[lazy]: ("a"|"b")* "<end>"',
     ["<end>!", "ba<end>!"], ["c<end>!", "a<end>b<end>!"]),
    # dynamic tool-call dispatch
    ("dispatch-string-trigger", 'start: tool* tail\ntail: TEXT\ntool_head[lazy]: TEXT "<call>"\n'
     'tool: tool_head %json {"type": "object", "properties": {"x": {"type": "integer"}}, '
     '"required": ["x"], "additionalProperties": false} "</call>"\nTEXT: /(\\n|.)*/',
     ["", "hello", 'a<call>{"x": 1}</call>b', '<call>{"x":1}</call><call>{"x":2}</call>', "tail <cal"],
     ['<call>{"x": "a"}</call>', "<call>", '<call>{"x": 1}']),
    ("dispatch-json-whitespace", 'start: tool* tail\ntail: TEXT\nh[lazy]: TEXT "<tc>"\n'
     'tool: h %json {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]} '
     '"</tc>"\nTEXT: /(\\n|.)*/',
     ['l1\nl2<tc>{ "x" : -3 }</tc>tail', '<tc>{"x":1}</tc>'],
     ['<tc> {"x":1}</tc>', '<tc>{"x":1} </tc>', "before<tc>free</tc>after"]),
    ("dispatch-any-text-via-terminals", 'start: tool* tail\ntail: FREE\nhead[lazy]: FREE "<c>"\n'
     'tool: head /[0-9]+/ "</c>"\nFREE: TEXT\nTEXT: /(\\n|.)*/',
     ["free", "x<c>12</c>y", "partial <"], ["<c>", "<c>x</c>", "<c>12"]),
    ("dispatch-dotall-regex-head", 'start: tool* tail\ntail: TEXT\nhead[lazy]: /.*<c>/s\n'
     'tool: head "ok" "</c>"\nTEXT: /.*/s', ["l1\nl2", "x\n<c>ok</c>t"], ["<c>", "<c>bad</c>"]),
    ("dispatch-escaped-regex-trigger", 'start: tool* tail\ntail: TEXT\nhead[lazy]: /(\\n|.)*END\\./\n'
     'tool: head "ok"\nTEXT: /(\\n|.)*/', ["free END text", "beforeEND.okafter"],
     ["END.", "beforeEND.no", "beforeEND.okEND."]),
    ("dispatch-two-triggers", 'start: (foo | bar)* tail\ntail: TEXT\nfoo_head[lazy]: TEXT "<f"\n'
     'foo: foo_head "=foo>" /[a-z]+/ "</f>"\nbar_head[lazy]: TEXT "<f"\n'
     'bar: bar_head "=bar>" /[0-9]+/ "</f>"\nTEXT: /(\\n|.)*/',
     ["x<f=foo>ab</f>y", "<f=bar>12</f>", ""], ["<f=foo>12</f>", "<f=baz>1</f>"]),
    ("dispatch-regex-suffix-head", 'start: tool* tail\ntail: TEXT\nh[lazy]: /(\\n|.)*<t>/\n'
     'tool: h "x" "</t>"\nTEXT: /(\\n|.)*/', ["a<t>x</t>b", "abc"], ["a<t>y</t>"]),
    ("dispatch-suffix-head", 'start: tool* tail\ntail: TEXT\nh[suffix="<t>"]: TEXT\n'
     'tool: h "1" "</t>"\nTEXT: /(.|\\n)*/', ["<t>1</t>", "q<t>1</t>r"], ["<t>2</t>"]),
]

CORPUS_IDS = [c[0] for c in CORPUS]


@pytest.mark.parametrize("case", CORPUS, ids=CORPUS_IDS)
def test_corpus_xgrammar2(case):
    _id, src, accepted, rejected = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wrong = _check_language(xgr, src, accepted, rejected)
    assert not wrong, f"xgrammar2 disagrees on {wrong!r}\n{lark_to_ebnf(src)}"


@pytest.mark.skipif(xgr_up is None, reason="upstream xgrammar is not installed")
@pytest.mark.parametrize("case", CORPUS, ids=CORPUS_IDS)
def test_corpus_upstream_agrees(case):
    _id, src, accepted, rejected = case
    wrong = _check_language(xgr_up, src, accepted, rejected)
    assert not wrong, f"upstream xgrammar disagrees on {wrong!r}"


def test_compile_lark_matches_from_lark_and_caches():
    info = xgr.TokenizerInfo(["a", "b", ",", " ", "1", "2"])
    compiler = xgr.GrammarCompiler(info)
    src = '%import common.INT\n%ignore " "\nstart: INT ("," INT)*'
    c1 = compiler.compile_lark(src)
    c2 = compiler.compile_lark(src)
    assert c1 is c2 or str(c1.grammar) == str(c2.grammar)
    m = xgr.GrammarMatcher(c1, terminate_without_stop_token=True)
    assert m.accept_string("12, 1 ,2") and m.is_terminated()
    assert str(c1.grammar) == str(xgr.Grammar.from_lark(src))
    # Named grammars are part of the key.
    a = compiler.compile_lark("start: @x", named_grammars={"x": 'start: "a"'})
    b = compiler.compile_lark("start: @x", named_grammars={"x": 'start: "b"'})
    assert xgr.GrammarMatcher(a).accept_string("a")
    assert xgr.GrammarMatcher(b).accept_string("b")
    assert not xgr.GrammarMatcher(b).accept_string("a")


def test_compile_async_lark():
    compiler = xgr.GrammarCompiler(xgr.TokenizerInfo(["a", "b"]))
    compiled = compiler.compile_async("lark", 'start: "a"+').result()
    assert xgr.GrammarMatcher(compiled).accept_string("aaa")


# ---- errors with line and column ----------------------------------------------------------
# (grammar, message fragment, line, column); upstream errors on each of them too.

ERRORS = [
    ('item: "a"', "no start rule found", 1, 1),
    ("start: missing", "unknown name 'missing'", 1, 8),
    ('start: foo\nfoo: "a"\nfoo: "b"', "duplicate rule or terminal 'foo'", 3, 1),
    ('start: FOO\nFOO: "a"\nFOO: "b"', "duplicate rule or terminal 'FOO'", 3, 1),
    ("start: FOO\nFOO: BAR\nBAR: FOO", "circular reference in terminal", 3, 6),
    ('start: T\nT: r\nr: "a"', "terminal 'T' cannot reference rule 'r'", 2, 4),
    ('start[budget=10]: "a"', "attribute 'budget' is not supported", 1, 7),
    ('start[capture=""]: "a"', "capture name must not be empty", 1, 15),
    ('start[capture="a b"]: "a"', "capture name must only contain", 1, 15),
    ('start[capture, capture]: "a"', "capture attribute is specified more than once", 1, 16),
    ("T[lazy]: /a/\nstart: T", "attributes are only supported on rules", 1, 2),
    ('start.1: "a"', "priorities", 1, 6),
    ('start{x}: "a"', "templates", 1, 6),
    ('start: foo{x}\nfoo: "a"', "templates", 1, 11),
    ('start::0: "a"', "parametric", 1, 6),
    ("start: ~/[a]/", "complement '~' is not supported", 1, 8),
    ("start: /[abc/", "failed to compile regular expression", 1, 9),
    (r"start: /a\b/", "Word boundary", 1, 10),
    (r"start: /(a)\1/", "Backreference", 1, 12),
    ("start: /[]/", "Empty character class", 1, 9),
    ("start: /(?<=a)b/", "Lookbehind", 1, 9),
    ("start: /(?=a)b/", "Lookahead", 1, 9),
    ("start: /(?i)b/", "inline flags", 1, 9),
    (r"start: /\p{L}/", "Unicode property", 1, 9),
    ("start: /a/x", "flag 'x' is not supported", 1, 8),
    ("start: /a/m", "flag 'm' is not supported", 1, 8),
    ('start: "\\q"', "invalid string literal", 1, 8),
    ('start: "abc', "unterminated string literal", 1, 8),
    ("start: /abc", "unterminated regular expression", 1, 8),
    ("start: <bad token>", "invalid special token", 1, 8),
    ("start: <abc", "unterminated special token", 1, 8),
    ("start: @", "empty grammar reference", 1, 8),
    ("start: $", "unexpected character '$'", 1, 8),
    ("start: -", "unexpected '-' character", 1, 8),
    ("start: !", "unexpected '!' character", 1, 8),
    ('start "a"', "expected ':' after rule name", 1, 7),
    ('start: ("a"', "expected ')' after group", 1, 12),
    ('start: ["a"', "expected ']' after optional group", 1, 12),
    ('start: "a" ->', "expected alias name after '->'", 1, 14),
    ('start: "a"{3,2}', "repetition end must be greater", 1, 8),
    ('start: "a"{-1,}', "invalid repetition count", 1, 12),
    ('start: "z".."a"', "range start must not exceed end", 1, 8),
    ('start: "ab".."c"', "endpoints must be one character", 1, 8),
    ('start: "a"i.."c"', "flags are not allowed on character ranges", 1, 8),
    ('start: "é"i', "ASCII characters only", 1, 8),
    ("start: @other", "unknown named grammar '@other'", 1, 8),
    ("start: <[,]>", "empty numeric special-token range", 1, 8),
    ("start: <[*,1]>", "wildcard cannot be mixed", 1, 8),
    ("start: <[^*]>", "negated wildcard", 1, 8),
    ("start: <[5-2]>", "invalid numeric special-token range", 1, 8),
    ("start: <[0-2000000]>", "special-token range is too large", 1, 8),
    ("start: <|eot|>", "requires tokenizer_info", 1, 8),
    ("%import common.NOPE\nstart: NOPE", "unknown common import 'common.NOPE'", 1, 9),
    ("%import other.X\nstart: X", "only the common library", 1, 9),
    ('%import common.INT\nstart: INT\nINT: "1"', "duplicate rule or terminal 'INT'", 3, 1),
    ('start: "a"\n%weird x', "directive %weird is not supported", 2, 1),
    ("start: T\nT: %json {}", "%json cannot be used in terminals", 2, 4),
    ('start: T\nT: %lark {\nstart: "a"\n}', "nested %lark cannot be used in terminals", 2, 4),
    ("start: T\nT: <[1]>", "special tokens cannot be used in terminals", 2, 4),
    ("start: T\nT: @x", "named grammars (@name) cannot be used in terminals", 2, 4),
    ("start: %json {\"type\": 5}", "failed to compile inline JSON schema", 1, 8),
    ("start: %json {\"type\": ", "failed to parse JSON value after %json", 1, 8),
    ('start: %regex {"substring_words": 5}', "substring_words must be a string", 1, 8),
    ('start: %regex {"nope": "a"}', "unknown field 'nope' in %regex", 1, 8),
    ('start: %regex {}', "no fields set on %regex", 1, 8),
    ('start: %regex {"substring_chars": "a", "substring_chunks": ["b"]}',
     "only one field can be set", 1, 8),
    ('%grammar_options {"bogus": true}\nstart: "a"', "unknown %grammar_options option 'bogus'", 1, 1),
    ('%grammar_options {"allow_initial_skip": 1}\nstart: "a"', "allow_initial_skip must be a boolean",
     1, 1),
    ('%grammar_options [1]\nstart: "a"', "value must be an object", 1, 1),
    ('start: "a" | "b" & "c"', "intersection '&' is not supported", 1, 18),
    ('start[suffix="x", stop="y"]: "a"', "stop cannot be combined with suffix", 1, 19),
    ('start[stop_capture="m"]: "a"', "stop_capture requires stop or suffix", 1, 7),
    ('start: f\nf[stop=""]: /a*/', "stop must not be empty", 2, 8),
    ('start: f\nf[suffix=lower]: /a*/', "suffix terminal name must be uppercase", 2, 10),
    ('T: "a"\nstart: T\nstart: T', "duplicate rule or terminal 'start'", 3, 1),
    ("START: \"a\"", "start", 1, 1),
    ('start: "a"\n  x', "expected ':' after rule name", 2, 4),
    ("start: \"a\"\r\nitem missing", "expected ':' after rule name", 2, 6),
]


@pytest.mark.parametrize("src, fragment, line, column", ERRORS,
                         ids=[f"err{i}" for i in range(len(ERRORS))])
def test_errors_name_line_and_column(src, fragment, line, column):
    with pytest.raises(LarkGrammarError) as ei:
        xgr.Grammar.from_lark(src)
    e = ei.value
    assert fragment in str(e), str(e)
    assert (e.line, e.column) == (line, column), str(e)
    assert str(e).startswith(f"Lark error at line {line}, column {column}: ")
    assert isinstance(e, ValueError) and isinstance(e, RuntimeError)
    assert isinstance(e, xgr.GrammarSyntaxError)


@pytest.mark.skipif(xgr_up is None, reason="upstream xgrammar is not installed")
@pytest.mark.parametrize("src, fragment, line, column", ERRORS,
                         ids=[f"err{i}" for i in range(len(ERRORS))])
def test_upstream_rejects_the_same_grammars(src, fragment, line, column):
    with pytest.raises(RuntimeError):
        xgr_up.Grammar.from_lark(src)


def test_error_shows_the_source_line_and_a_caret():
    with pytest.raises(LarkGrammarError) as ei:
        xgr.Grammar.from_lark('start: item\nitem missing\n')
    assert str(ei.value) == ("Lark error at line 2, column 6: expected ':' after rule name item, "
                             "found name 'missing'\nitem missing\n     ^")


# ---- rule attributes pass through to the EBNF rule head ---------------------------------------

@pytest.mark.parametrize("src, head", [
    ('start: r\nr[max_tokens=5]: /a+/', "r[max_tokens=5] ::="),
    ('start: r\nr[max_chars=5]: /a+/', "r[max_chars=5] ::="),
    ('start: r\nr[temperature=0.5]: /a+/', "r[temperature=0.5] ::="),
    ('start: r\nr[capture]: /a+/', 'r[capture="r"] ::='),
    ('start: r\nr[capture="x", max_chars=2, max_tokens=5]: /a+/',
     'r[max_tokens=5, max_chars=2, capture="x"] ::='),
])
def test_rule_attributes_are_printed(src, head):
    g = xgr.Grammar.from_lark(src)
    assert head in str(g)
    assert head in str(xgr.Grammar.from_ebnf(str(g)))  # round trip


@pytest.mark.parametrize("src, message", [
    ('start: a\na[temperature=2]: "x" b\nb: "y"',
     "temperature is only supported on terminals and subgrammars"),
    ('start[temperature=-1]: "a"', "temperature must be a finite non-negative number"),
    ('start[max_tokens=0]: "a"', "max_tokens must be positive"),
    ('start[temperature=abc]: "a"', "expected number after temperature="),
])
def test_rule_attribute_errors(src, message):
    with pytest.raises(LarkGrammarError, match=message):
        xgr.Grammar.from_lark(src)


# ---- special tokens -------------------------------------------------------------------------

VOCAB = ["a", "b", "<|tool|>", "c", "<|tool|>", "{", "}", "</s>"]


def _info(mod):
    return mod.TokenizerInfo(VOCAB, stop_token_ids=[7])


def _token_cases():
    return [
        # (grammar, accepted token sequences, rejected token sequences)
        ("start: <[2]>", [[2]], [[4], [0], []]),
        ("start: <|tool|> \"a\"", [[2, 0], [4, 0]], [[0], [2]]),
        ('start: "a" <[1,3-4]>', [[0, 1], [0, 3], [0, 4]], [[0, 2], [0, 0]]),
        ('start: <[0-1]>+ <[5]>', [[0, 1, 5], [1, 5]], [[5], [0, 2, 5]]),
    ]


@pytest.mark.parametrize("src, good, bad", _token_cases())
@pytest.mark.parametrize("mod", [pytest.param(xgr, id="xgrammar2"),
                                 pytest.param(xgr_up, id="upstream", marks=pytest.mark.skipif(
                                     xgr_up is None, reason="upstream xgrammar is not installed"))])
def test_special_tokens(mod, src, good, bad):
    info = _info(mod)
    compiled = mod.GrammarCompiler(info, cache_enabled=False).compile_lark(src)
    for ids in good:
        assert _accepts_tokens(mod, compiled, ids), ids
    for ids in bad:
        assert not _accepts_tokens(mod, compiled, ids), ids


def test_named_special_token_resolution():
    info = _info(xgr)
    ebnf = lark_to_ebnf("start: <|tool|>", tokenizer_info=info)
    assert "Token(2, 4)" in ebnf
    with pytest.raises(LarkGrammarError, match="unknown special token <|nope|>"):
        xgr.Grammar.from_lark("start: <|nope|>", tokenizer_info=info)


def test_wildcard_and_negated_token_sets_need_the_vocabulary():
    info = _info(xgr)
    compiled = xgr.GrammarCompiler(info, cache_enabled=False).compile_lark('start: "a" <[^0,1]>')
    for tok, ok in [(0, False), (1, False), (2, True), (3, True), (6, True), (7, False)]:
        m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
        assert m.accept_token(0)
        assert bool(m.accept_token(tok)) == ok, tok
    compiled = xgr.GrammarCompiler(info, cache_enabled=False).compile_lark("start: <[*]>{2}")
    assert _accepts_tokens(xgr, compiled, [3, 0])
    with pytest.raises(LarkGrammarError, match="requires tokenizer_info"):
        xgr.Grammar.from_lark("start: <[^1]>")


def test_token_dispatch():
    src = 'start: tool* tail\ntail: TEXT\ntool: TEXT <|tool|> "{" "}"\nTEXT: /(\\n|.)*/'
    for mod in [xgr] + ([xgr_up] if xgr_up is not None else []):
        compiled = mod.GrammarCompiler(_info(mod), cache_enabled=False).compile_lark(src)
        assert _accepts_tokens(mod, compiled, [0, 2, 5, 6, 1])
        assert _accepts_tokens(mod, compiled, [0, 1, 3])
        assert not _accepts_tokens(mod, compiled, [0, 2, 0])


def test_lazy_token_trigger():
    src = 'start: head "c"\nhead[lazy]: TEXT <|tool|>\nTEXT: /(\\n|.)*/'
    for mod in [xgr] + ([xgr_up] if xgr_up is not None else []):
        compiled = mod.GrammarCompiler(_info(mod), cache_enabled=False).compile_lark(src)
        assert _accepts_tokens(mod, compiled, [0, 1, 2, 3])
        assert not _accepts_tokens(mod, compiled, [0, 2, 0, 3])


# ---- named grammars -------------------------------------------------------------------------

def _named_cases(mod):
    args = mod.Grammar.from_json_schema({"type": "object", "properties": {"c": {"type": "string"}},
                                         "required": ["c"], "additionalProperties": False})
    return [
        ('start: "<t>" @args "</t>" ":" @status',
         {"args": args, "status": 'start: "ok" | "cancelled"'},
         ['<t>{"c": "x"}</t>:ok', '<t>{"c":""}</t>:cancelled'], ["<t>{}</t>:ok", '<t>{"c":"x"}</t>:no']),
        ('start: %lark {\nstart: @inner "!"\n}', {"inner": 'start: "a"+'}, ["a!", "aaa!"], ["!"]),
        ("start: @a", {"a": 'start: @b "x"', "b": 'start: "y"'}, ["yx"], ["x", "y"]),
        ("start: @a @a", {"a": 'start: "q"'}, ["qq"], ["q"]),
        ('start: @a\n%ignore " "', {"a": 'start: "p" "q"'}, ["pq", "pq "], ["p q"]),
        ('start: @a', {"a": '%ignore " "\nstart: "p" "q"'}, ["pq", "p q "], [" pq"]),
    ]


@pytest.mark.parametrize("i", range(6))
@pytest.mark.parametrize("mod", [pytest.param(xgr, id="xgrammar2"),
                                 pytest.param(xgr_up, id="upstream", marks=pytest.mark.skipif(
                                     xgr_up is None, reason="upstream xgrammar is not installed"))])
def test_named_grammars(mod, i):
    src, named, good, bad = _named_cases(mod)[i]
    assert not _check_language(mod, src, good, bad, named_grammars=named)


def test_named_grammar_errors():
    with pytest.raises(LarkGrammarError, match="circular named grammar reference: @a -> @b -> @a"):
        xgr.Grammar.from_lark("start: @a", named_grammars={"a": "start: @b", "b": "start: @a"})
    with pytest.raises(LarkGrammarError, match="failed to compile named grammar '@a'"):
        xgr.Grammar.from_lark("start: @a", named_grammars={"a": "start: nope"})
    with pytest.raises(LarkGrammarError, match="Invalid named grammar name"):
        xgr.Grammar.from_lark("start: @a", named_grammars={"a b": 'start: "x"'})
    with pytest.raises(TypeError):
        xgr.Grammar.from_lark("start: @a", named_grammars={"a": 5})
    with pytest.raises(TypeError):
        xgr.Grammar.from_lark("start: @a", named_grammars=[("a", 'start: "x"')])


# ---- what xgrammar2 adds to upstream's dialect -----------------------------------------------

def test_override_and_extend():
    from xgrammar2.testing import _is_grammar_accept_string as acc

    g = xgr.Grammar.from_lark('%import common.INT\n%override INT: /[0-7]+/\nstart: INT')
    assert acc(g, "17") and not acc(g, "18")
    g = xgr.Grammar.from_lark('start: a\na: "x"\n%extend a: "y"')
    assert acc(g, "x") and acc(g, "y") and not acc(g, "z")
    with pytest.raises(LarkGrammarError, match="%override of 'b', which is not defined"):
        xgr.Grammar.from_lark('start: "a"\n%override b: "x"')


def test_declare_is_refused_where_used():
    from xgrammar2.testing import _is_grammar_accept_string as acc

    g = xgr.Grammar.from_lark('%declare _INDENT _DEDENT\nstart: "a"')
    assert acc(g, "a")
    with pytest.raises(LarkGrammarError, match="only %declare'd") as ei:
        xgr.Grammar.from_lark('%declare _INDENT\nstart: "a" _INDENT')
    assert (ei.value.line, ei.value.column) == (2, 12)


def test_substring_words():
    from xgrammar2.testing import _is_grammar_accept_string as acc

    g = xgr.Grammar.from_lark('start: %regex {"substring_words": "the quick, brown fox"}')
    for s in ["", "quick", "the quick", "quick, brown", ", ", "brown fox", "the quick, brown fox"]:
        assert acc(g, s), s
    for s in ["qui", "he quick", "fox brown", "the  quick"]:
        assert not acc(g, s), s


def test_lazy_general_bodies_with_repetition():
    from xgrammar2.testing import _is_grammar_accept_string as acc

    # Upstream rejects these lazy bodies ("terminal-like"); xgrammar2 builds the automaton.
    g = xgr.Grammar.from_lark('start: "<" r ">"\nr[lazy]: /([a-z]+ )+/')
    assert acc(g, "<ab >") and not acc(g, "<ab cd >")
    g = xgr.Grammar.from_lark('start: "<" r ">"\nr[lazy]: T* "x"\nT: /ab/')
    assert acc(g, "<ababx>") and acc(g, "<x>")


def test_lazy_too_large_is_refused():
    with pytest.raises(LarkGrammarError, match="too large") as ei:
        xgr.Grammar.from_lark('start: r\nr[lazy]: /[a-z]{1,5000}[0-9]{1,5000}/')
    assert (ei.value.line, ei.value.column) == (2, 1)


def test_lark_to_ebnf_round_trips():
    src = '%import common.WS\n%ignore WS\nstart: "a" b\nb: /[0-9]+/'
    ebnf = lark_to_ebnf(src)
    g = xgr.Grammar.from_ebnf(ebnf)
    assert str(xgr.Grammar.from_lark(src)) == str(g)
    assert str(xgr.Grammar.from_ebnf(str(g))) == str(g)


def test_json_warnings_are_kept():
    with pytest.warns(UserWarning):
        g = xgr.Grammar.from_lark('start: %json {"type": "string", "format": "semver"}')
    assert any("semver" in w for w in g.warnings)


def test_large_substring_stays_linear():
    import random

    from xgrammar2.testing import _is_grammar_accept_string as acc

    rng = random.Random(0)
    text = "".join(rng.choice("abcde ") for _ in range(5000))
    g = xgr.Grammar.from_lark('start: "<" %regex {"substring_chars": "' + text + '"} ">"')
    assert acc(g, "<" + text[1234:2345] + ">")
    assert acc(g, "<" + text + ">") and acc(g, "<>")
    assert not acc(g, "<" + text[1234:2345] + "x>")


def test_json_directive_depth_counts_the_value_only() -> None:
    """%json values count towards max_recursion_depth on their own (upstream's phrase)."""
    with xgr.max_recursion_depth(50):
        assert xgr.Grammar.from_lark("start: %json true\n# " + "[" * 100) is not None
        with pytest.raises(RuntimeError, match="Maximum recursion depth exceeded"):
            xgr.Grammar.from_lark("start: %json " + "[" * 60 + "]" * 60)
