"""TagDispatch(...): parsing, printing, matching semantics and token masks.

Reference: upstream xgrammar 0.2.8 (``import xgrammar``). Tests that compare with it skip when
it is not installed; the others state the expected behaviour directly (derived from, and
checked against, upstream). Semantics are documented in csrc/lower/tag_dispatch.c.

Masks are checked on real vocabularies (canonical Llama-3.1 and Qwen3 files in shared/data):
at every step of several walks, ``fill_next_token_bitmask`` must equal the brute-force
oracle ``_fill_next_token_bitmask_bruteforce`` and, when upstream is installed, upstream's
mask for the same grammar.

Run ``python tests/tag_dispatch/test_tag_dispatch.py bench`` (or pytest with ``-s``, test
``test_mask_time_report``) for the per-token mask timings of free text with 100 tool
triggers against plain free text.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
import time
import zlib
from typing import Any, Dict, List, Optional, Tuple

import pytest

np = pytest.importorskip("numpy")
xg2 = pytest.importorskip("xgrammar2")

from xgrammar2.testing import _byte_tokenizer_info  # noqa: E402

try:  # the reference engine
    import xgrammar as xgr_up
except ImportError:  # pragma: no cover - depends on the environment
    xgr_up = None

needs_upstream = pytest.mark.skipif(xgr_up is None, reason="upstream xgrammar not installed")


def _data_dir() -> Optional[str]:
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.environ.get("XGR2_SHARED_DATA"), os.path.join(here, "..", "..", "..", "shared", "data"),
                 "/work/shared/data"):
        if cand and os.path.isdir(os.path.join(cand, "tokenizers", "canonical")):
            return os.path.normpath(cand)
    return None


DATA = _data_dir()
needs_data = pytest.mark.skipif(DATA is None, reason="shared/data (canonical vocabularies) not found")


# ---- byte-level matching helpers ----------------------------------------------------------------

_OURS_BYTE_COMPILER = None
_UP_BYTE_COMPILER = None


def _ours_byte_compiler():
    global _OURS_BYTE_COMPILER
    if _OURS_BYTE_COMPILER is None:
        _OURS_BYTE_COMPILER = xg2.GrammarCompiler(_byte_tokenizer_info(), cache_enabled=False)
    return _OURS_BYTE_COMPILER


def _up_byte_compiler():
    global _UP_BYTE_COMPILER
    if _UP_BYTE_COMPILER is None:
        tok = xgr_up.TokenizerInfo([bytes([b]) for b in range(256)] + [b"</s>"], xgr_up.VocabType.RAW,
                                   stop_token_ids=[256])
        _UP_BYTE_COMPILER = xgr_up.GrammarCompiler(tok, cache_enabled=False)
    return _UP_BYTE_COMPILER


def compile_bytes(mod: Any, src: str) -> Any:
    """The grammar compiled against a vocabulary of the 256 single bytes plus a stop token."""
    comp = _ours_byte_compiler() if mod is xg2 else _up_byte_compiler()
    return comp.compile_grammar(mod.Grammar.from_ebnf(src))


def status(mod: Any, compiled: Any, data: bytes) -> str:
    """Feeds `data` byte by byte: "rej@i" (byte i refused), "END" (all accepted and the
    grammar may end) or "prefix" (all accepted, more is needed)."""
    m = mod.GrammarMatcher(compiled)
    for i, b in enumerate(data):
        if not m.accept_token(b):
            return f"rej@{i}"
    return "END" if m.is_completed() else "prefix"


def ours(src: str, text: Any) -> str:
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    return status(xg2, compile_bytes(xg2, src), data)


def rules(**bodies: str) -> str:
    return "\n".join(f"{k} ::= {v}" for k, v in bodies.items())


# ---- parsing and printing ----------------------------------------------------------------------

TOOL_EBNF = '''triggered_tags ::= TagDispatch(
  ("<function=", triggered_tags_group),
  ("<tool_call>", other_rule),
  loop_after_dispatch=true,
  excludes=("</tool_call>", "<|im_end|>")
)
triggered_tags_group ::= "get_weather>" "{}" "</function>"
other_rule ::= "{}</tool_call>"
'''


def _rule_block(text: str, name: str) -> str:
    """The text of rule `name` in a printed grammar (up to the next rule)."""
    lines = text.splitlines()
    out: List[str] = []
    for ln in lines:
        if re.match(r"^[A-Za-z_.\-][A-Za-z0-9_.\-]* ::= ", ln):
            if out:
                break
            if ln.startswith(name + " ::= "):
                out.append(ln)
        elif out:
            out.append(ln)
    return "\n".join(out)


def test_print_layout_is_upstreams():
    g = xg2.Grammar.from_ebnf(TOOL_EBNF, root_rule_name="triggered_tags")
    assert str(g).startswith(TOOL_EBNF.split("\ntriggered_tags_group")[0] + "\n")
    g0 = xg2.Grammar.from_ebnf('root ::= TagDispatch()')
    assert str(g0) == "root ::= TagDispatch(\n  loop_after_dispatch=true,\n  excludes=()\n)\n"


@needs_upstream
@pytest.mark.parametrize("body", [
    'TagDispatch(("<function=", g), ("<tool_call>", h), loop_after_dispatch=true, excludes=("</tool_call>", "<|im_end|>"))',
    'TagDispatch()',
    'TagDispatch(loop_after_dispatch=false)',
    'TagDispatch(excludes=("z"))',
    'TagDispatch(("a", g), ("a", g), ("a", h))',
    'TagDispatch(( "a" , g , ), excludes = ("b", "c",), loop_after_dispatch = false)',
    'TagDispatch(("a", g), loop_after_dispatch=false, loop_after_dispatch=true, excludes=("x"), excludes=())',
    'TagDispatch(\n  ("q\\"uote\\\\", g),  # a comment\n  loop_after_dispatch=false\n)',
])
def test_printed_tag_dispatch_equals_upstream(body: str):
    src = "root ::= " + body + '\ng ::= "x"\nh ::= "y"'
    assert _rule_block(str(xg2.Grammar.from_ebnf(src)), "root") == \
        _rule_block(str(xgr_up.Grammar.from_ebnf(src)), "root")


ROUND_TRIP = [
    TOOL_EBNF,
    'root ::= TagDispatch(("\\n\\t\\r\\"\\\\ é 世界 \\x00", g), excludes=("\\u00e9\\U0001F600"))\ng ::= "x"',
    'root ::= TagDispatch((b"\\xff\\xfe", g), excludes=(b"\\x80"))\ng ::= "x"',  # raw-byte extension
    'root ::= "x" TagDispatch(("a", g)) TagDispatch(("b", g), loop_after_dispatch=false)* "y"\ng ::= "x"',
    'root ::= TagDispatch(("a", root), loop_after_dispatch=false) (= "x")',
    'root ::= TagDispatch(("a", g)) | "y"\ng ::= TagDispatch(("b", root), excludes=("c"))\nroot_1 ::= "q"',
]


@pytest.mark.parametrize("src", ROUND_TRIP)
def test_round_trip(src: str):
    root = "triggered_tags" if src is TOOL_EBNF else "root"
    p1 = str(xg2.Grammar.from_ebnf(src, root_rule_name=root))
    p2 = str(xg2.Grammar.from_ebnf(p1, root_rule_name=root))
    assert p1 == p2


def test_tag_dispatch_inside_an_expression_is_lifted_into_a_rule():
    # As upstream: a TagDispatch that is not a whole rule body becomes rule <name>_1, _2, ...
    # in source order, skipping names already taken.
    g = xg2.Grammar.from_ebnf('root ::= "x" TagDispatch(("a", g)) TagDispatch(("b", g))\ng ::= "x"\n'
                              'root_1 ::= "q"')
    text = str(g)
    assert text.splitlines()[0] == 'root ::= "x" root_2 root_3'
    assert '("a", g)' in _rule_block(text, "root_2") and '("b", g)' in _rule_block(text, "root_3")
    g2 = xg2.Grammar.from_ebnf('root ::= (TagDispatch(("a", g)))\ng ::= "x"')
    assert str(g2).startswith("root ::= TagDispatch(")


# (body, accepted by upstream 0.2.8). Our parser must agree; the b"..." literal is an
# intended extension (the printer uses it for triggers that are not valid UTF-8).
SYNTAX_CASES = [
    ('TagDispatch(("a", g), excludes=("a"))', False),   # an exclude must not be a prefix of a trigger
    ('TagDispatch(("ab", g), excludes=("a"))', False),
    ('TagDispatch(("ab", g), excludes=("b"))', True),   # ... but may be any other substring
    ('TagDispatch(("a", g), excludes=("b", "b"))', True),
    ('TagDispatch(("a", g), excludes=("b", "c",))', True),
    ('TagDispatch(("a", g), excludes=(,))', False),
    ('TagDispatch(("a", g), excludes=("b" "c"))', False),
    ('TagDispatch(("a", g), excludes="b")', False),
    ('TagDispatch(("a", g), excludes=(1))', False),
    ('TagDispatch(("a", g), excludes=(g))', False),
    ('TagDispatch(("a", g), excludes=(("b")))', False),
    ('TagDispatch(("a", g), excludes=(""))', False),
    ('TagDispatch (("a", g))', True),
    ('TagDispatch(("a", g), loop_after_dispatch=false, ("b", h))', True),
    ('TagDispatch(("a", g, h))', False),
    ('TagDispatch(("a"))', False),
    ('TagDispatch((g, "a"))', False),
    ('TagDispatch((g))', False),
    ('TagDispatch(("a" g))', False),
    ('TagDispatch("a", g)', False),
    ('TagDispatch(("a", g)', False),
    ('TagDispatch(("a", g),)', False),
    ('TagDispatch(("a", g),,("b", h))', False),
    ('TagDispatch(("a", g) ("b", h))', False),
    ('TagDispatch(("", g))', False),
    ('TagDispatch(("a", g), loop_after_dispatch=True)', False),
    ('TagDispatch(("a", g), loop_after_dispatch="true")', False),
    ('TagDispatch(("a", g), loop_after_dispatch=truex)', False),
    ('TagDispatch(("a", g), loop_after_dispatch)', False),
    ('TagDispatch(("a", g), =true)', False),
    ('TagDispatch(("a", g), foo=1)', False),
    ('TagDispatch(("a", g), stop_eos=true)', False),    # older releases' arguments: rejected
    ('TagDispatch(("a", g), stop_str=("x"))', False),
    ('TagDispatch(("a", g), 1)', False),
    ('TagDispatch(("a", g), "x")', False),
    ('TagDispatch(("a", g), g)', False),
    ('TagDispatch(("a", g), ())', False),
    ('TagDispatch(("a", g), ("b"))', False),
    ('TagDispatch(("a", "b"))', False),
    ('TagDispatch(("a", undefined_rule))', False),
    ('TagDispatch(("a", root))', True),
    ('TagDispatch(("a", g)) (= "x")', True),
    ('"x" (= TagDispatch(("a", g)))', False),            # not in a lookahead
    ('TagDispatch(("a", g))* "q"', True),
    ('TagDispatch(("a", g)) | TagDispatch(("b", h))', True),
    ('TagDispatch(("\\u00e9\\"[", g))', True),
    ('TagDispatch( )', True),
]


def _parses(mod: Any, src: str) -> Tuple[bool, str]:
    try:
        mod.Grammar.from_ebnf(src)
        return True, ""
    except Exception as e:  # noqa: BLE001 - both engines' error types
        return False, str(e)


@pytest.mark.parametrize("body,accepted", SYNTAX_CASES)
def test_syntax_like_upstream(body: str, accepted: bool):
    src = "root ::= " + body + '\ng ::= "x"\nh ::= "y"'
    ok, msg = _parses(xg2, src)
    assert ok == accepted, msg
    if not ok:
        assert re.search(r"line \d+, column \d+", msg), msg
    if xgr_up is not None:
        assert _parses(xgr_up, src)[0] == accepted


@pytest.mark.parametrize("body,line,col,needle", [
    ('TagDispatch(("a", g), foo=1)', 1, 23, "Unknown named argument for TagDispatch: foo"),
    ('TagDispatch(("a", g), stop_str=("x"))', 1, 23, "stop_str"),
    ('TagDispatch(\n  ("a", g),\n  excludes=("b", "")\n)', 3, 18, "Exclude must be a non-empty string literal"),
    ('TagDispatch(\n  ("ab", g),\n  excludes=("a")\n)', 3, 13, "Exclude string must not be a prefix of trigger string: a (the "
                                                               "excluded string at line 3, column 13 is a prefix of, or "
                                                               "equal to, the trigger at line 2, column 4)"),
    ('TagDispatch(("a", nope))', 1, 19, 'Rule "nope" is not defined'),
    ('TagDispatch(("a", g), loop_after_dispatch=yes)', 1, 43, "boolean literal (true or false), found 'yes'"),
    ('"x" (= TagDispatch(("a", g)))', 1, 8, "lookahead"),
])
def test_error_messages(body: str, line: int, col: int, needle: str):
    ok, msg = _parses(xg2, "root ::= " + body + '\ng ::= "x"')
    assert not ok
    assert f"line {line}, column {col + 9 if line == 1 else col}" in msg, msg
    assert needle in msg, msg


def test_stop_arguments_of_older_releases_are_explained():
    ok, msg = _parses(xg2, 'root ::= TagDispatch(("a", g), stop_eos=false)\ng ::= "x"')
    assert not ok and "older xgrammar" in msg and "excludes" in msg


# ---- matching semantics --------------------------------------------------------------------------

G_TOOLS = '''root ::= TagDispatch(("<f=", g), ("<t>", o), loop_after_dispatch=%s, excludes=("</t>", "STOP"))
g ::= "A>"
o ::= "B"'''

# (grammar, text, expected status). Every row is also checked against upstream when it is installed.
SEMANTIC_CASES: List[Tuple[str, str, str]] = [
    # free text, partial triggers, excludes
    (G_TOOLS % "true", "", "END"),
    (G_TOOLS % "true", "hello world", "END"),
    (G_TOOLS % "true", "<f", "END"),                    # may end right after a partial trigger
    (G_TOOLS % "true", "x <f=A>", "END"),
    (G_TOOLS % "true", "<f=", "prefix"),                # a completed trigger must be followed by its rule
    (G_TOOLS % "true", "<f=X", "rej@3"),
    (G_TOOLS % "true", "</t", "END"),
    (G_TOOLS % "true", "</t>", "rej@3"),                # excluded strings can never be generated
    (G_TOOLS % "true", "STO", "END"),
    (G_TOOLS % "true", "STOP", "rej@3"),
    (G_TOOLS % "true", "<<f=A>", "END"),                # failure transitions: "<<" falls back to "<"
    (G_TOOLS % "true", "<t<t>B", "END"),
    # loop vs single dispatch
    (G_TOOLS % "true", "<f=A>x<t>B<t>B y", "END"),
    (G_TOOLS % "false", "<f=A>", "END"),
    (G_TOOLS % "false", "<f=A>x", "rej@5"),             # without loop the rule ends after one dispatch
    (G_TOOLS % "false", "<t>B<t>B", "rej@4"),
    (G_TOOLS % "false", "text <t>B", "END"),
    # trigger that is a prefix of another: both readings stay possible, nothing else
    (rules(root='TagDispatch(("ab", g), ("abc", h), loop_after_dispatch=false)', g='"G"', h='"H"'), "abG", "END"),
    (rules(root='TagDispatch(("ab", g), ("abc", h), loop_after_dispatch=false)', g='"G"', h='"H"'), "abcH", "END"),
    (rules(root='TagDispatch(("ab", g), ("abc", h), loop_after_dispatch=false)', g='"G"', h='"H"'), "abX", "rej@2"),
    (rules(root='TagDispatch(("ab", g), ("abc", h), loop_after_dispatch=false)', g='"G"', h='"H"'), "ab", "prefix"),
    # trigger that is a suffix of another: only the longest (the AC state's own) fires
    (rules(root='TagDispatch(("xab", g), ("ab", h), loop_after_dispatch=false)', g='"G"', h='"H"'), "xabG", "END"),
    (rules(root='TagDispatch(("xab", g), ("ab", h), loop_after_dispatch=false)', g='"G"', h='"H"'), "xabH", "rej@3"),
    (rules(root='TagDispatch(("xab", g), ("ab", h), loop_after_dispatch=false)', g='"G"', h='"H"'), "abH", "END"),
    # trigger inside another's branch does not fire there ...
    (rules(root='TagDispatch(("abcd", g), ("bc", h), loop_after_dispatch=false)', g='"G"', h='"H"'), "abcHz", "END"),
    (rules(root='TagDispatch(("abcd", g), ("bc", h), loop_after_dispatch=false)', g='"G"', h='"H"'), "abcdz", "rej@4"),
    # ... but failure links do reach a trigger that starts inside an abandoned branch
    (rules(root='TagDispatch(("abce", g), ("bcd", h), loop_after_dispatch=false)', g='"G"', h='"H"'), "abcd", "prefix"),
    (rules(root='TagDispatch(("abce", g), ("bcd", h), loop_after_dispatch=false)', g='"G"', h='"H"'), "abcdHz", "rej@5"),
    # excludes overlapping triggers
    (rules(root='TagDispatch(("ab", g), excludes=("abc"))', g='"c"'), "abc", "END"),  # trigger fires first
    (rules(root='TagDispatch(("ab", g), excludes=("abc"))', g='"c"'), "abX", "rej@2"),
    (rules(root='TagDispatch(("xab", g), excludes=("ab"))', g='"c"'), "xab", "rej@2"),  # exclude inside trigger
    (rules(root='TagDispatch(("abcd", g), excludes=("bc"))', g='"c"'), "abc", "rej@2"),
    (rules(root='TagDispatch(("bc", g), excludes=("abcd"))', g='"Z"'), "abcZd", "END"),
    (rules(root='TagDispatch(("bc", g), excludes=("abcd"))', g='"Z"'), "abcd", "rej@3"),
    (rules(root='TagDispatch(("abce", g), excludes=("bcd"))', g='"c"'), "abcd", "rej@3"),
    # duplicate triggers: either rule
    (rules(root='TagDispatch(("a", g), ("a", h), loop_after_dispatch=false)', g='"G"', h='"H"'), "aG", "END"),
    (rules(root='TagDispatch(("a", g), ("a", h), loop_after_dispatch=false)', g='"G"', h='"H"'), "aH", "END"),
    # after a dispatched rule, matching restarts from scratch
    (rules(root='TagDispatch(("ab", g))', g='"a"'), "abab", "END"),
    (rules(root='TagDispatch(("ab", g))', g='"a"'), "ababab", "prefix"),
    # nullable and recursive dispatched rules
    (rules(root='TagDispatch(("ab", g), loop_after_dispatch=false)', g='"" | "Z"'), "ab", "END"),
    (rules(root='TagDispatch(("ab", g), loop_after_dispatch=false)', g='"" | "Z"'), "abZ", "END"),
    (rules(root='TagDispatch(("ab", g), loop_after_dispatch=false)', g='"" | "Z"'), "abx", "rej@2"),
    (rules(root='TagDispatch(("<", g))', g='">" | "(" g ")"'), "a<(((>)))b<>", "END"),
    (rules(root='TagDispatch(("ab", g))', g='""'), "abab", "END"),
    (rules(root='TagDispatch(("ab", g), loop_after_dispatch=false)', g='""'), "abx", "rej@2"),
    # free text is any bytes, not only UTF-8
    (rules(root='TagDispatch(("ab", g))', g='"a"'), "\udcff\udcfe\x00", "END"),
    # nested: a TagDispatch inside a dispatched rule (lifted into its own rule)
    (rules(root='TagDispatch(("<a>", g), loop_after_dispatch=true)',
           g='TagDispatch(("<b>", h), loop_after_dispatch=false, excludes=("</a>")) "</a>"', h='"B"'),
     "<a>x<b>B</a>y<a></a>", "END"),
    (rules(root='TagDispatch(("<a>", g), loop_after_dispatch=true)',
           g='TagDispatch(("<b>", h), loop_after_dispatch=false, excludes=("</a>")) "</a>"', h='"B"'),
     "<a>x<b>B", "prefix"),
    (rules(root='TagDispatch(("<a>", g), loop_after_dispatch=true)',
           g='TagDispatch(("<b>", h), loop_after_dispatch=false, excludes=("</a>")) "</a>"', h='"B"'),
     "<a>x<b>Bq", "rej@8"),
    # TagDispatch used inside expressions and repetitions
    (rules(root='TagDispatch(("a", g), loop_after_dispatch=false)+ "Q"', g='"G"'), "aGaGQ", "END"),
    (rules(root='TagDispatch(("a", g), loop_after_dispatch=false)+ "Q"', g='"G"'), "aQ", "rej@1"),
    (rules(root='(TagDispatch(("a", g), loop_after_dispatch=false) "Q")+', g='"G"'), "aGaGQ", "rej@2"),
    (rules(root='(TagDispatch(("a", g), loop_after_dispatch=false) "Q")+', g='"G"'), "aGQxQQ", "END"),
    (rules(root='"x" TagDispatch(("a", g), loop_after_dispatch=false) "Q"', g='"G"'), "xaGQ", "END"),
    # no triggers
    ('root ::= TagDispatch()', "anything at all", "END"),
    ('root ::= TagDispatch(loop_after_dispatch=false, excludes=("x"))', "abc", "END"),
    ('root ::= TagDispatch(loop_after_dispatch=false, excludes=("x"))', "x", "rej@0"),
]


def _to_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


@pytest.mark.parametrize("src,text,expected", SEMANTIC_CASES)
def test_semantics(src: str, text: str, expected: str):
    assert status(xg2, compile_bytes(xg2, src), _to_bytes(text)) == expected
    if xgr_up is not None:
        assert status(xgr_up, compile_bytes(xgr_up, src), _to_bytes(text)) == expected, "upstream disagrees"


def test_trigger_of_an_unproductive_rule_cannot_be_written():
    """Intended difference: a rule deriving no string can never complete, so xgrammar2
    refuses its trigger's last byte (as it prunes unproductive references everywhere);
    upstream accepts the trigger and then nothing can end the text."""
    src = rules(root='TagDispatch(("ab", g))', g='"x" g')
    assert ours(src, "a") == "END"
    assert ours(src, "ab") == "rej@1"
    assert ours(src, "xyz") == "END"
    src1 = rules(root='TagDispatch(("ab", g), ("abc", h))', g='"x" g', h='"H"')
    assert ours(src1, "ab") == "prefix"  # only as the start of "abc"
    assert ours(src1, "abx") == "rej@2"
    src2 = rules(root='TagDispatch(("a", g), ("abc", h))', g='"x" g', h='"H"')
    assert ours(src2, "abcH") == "END"  # the longer trigger still works through the dead one
    assert ours(src2, "ax") == "rej@1"


def _random_grammar(rng: random.Random) -> str:
    alphabet = "ab" if rng.random() < 0.5 else "abc"

    def rs(lo: int, hi: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))

    trig = [(rs(1, 4), rng.randint(0, 2)) for _ in range(rng.randint(0, 4))]
    excl = [rs(1, 4) for _ in range(rng.randint(0, 2))]
    args = [f'("{t}", g{r})' for t, r in trig]
    args.append(f"loop_after_dispatch={'true' if rng.random() < 0.5 else 'false'}")
    args.append("excludes=(" + ", ".join(f'"{e}"' for e in excl) + ")")
    return ("root ::= TagDispatch(" + ", ".join(args) + ")\n"
            'g0 ::= "0"\ng1 ::= "1" | "11" | ""\ng2 ::= "2" g2 | "2" root "2"'), alphabet


@needs_upstream
@pytest.mark.parametrize("seed", range(4))
def test_random_grammars_match_upstream(seed: int):
    """Random trigger / exclude sets over a 2-3 letter alphabet (so they overlap a lot),
    random texts: every byte accepted or refused as upstream does, same completion."""
    rng = random.Random(1000 + seed)
    compared = 0
    for _ in range(60):
        src, alphabet = _random_grammar(rng)
        ok_up, msg_up = _parses(xgr_up, src)
        ok_us, msg_us = _parses(xg2, src)
        assert ok_up == ok_us, (src, msg_up, msg_us)
        if not ok_up:
            continue
        c_up, c_us = compile_bytes(xgr_up, src), compile_bytes(xg2, src)
        for _ in range(30):
            data = "".join(rng.choice(alphabet + "012") for _ in range(rng.randint(0, 12))).encode()
            assert status(xg2, c_us, data) == status(xgr_up, c_up, data), (src, data)
            compared += 1
    assert compared > 500


# ---- token masks on real vocabularies ------------------------------------------------------------

VOCAB_FILES = {"llama-3.1": "llama-3.1.json", "qwen3": "qwen3.json"}


def _byte_decoder() -> Dict[str, int]:
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[chr(b)] = b
        else:
            out[chr(256 + n)] = b
            n += 1
    return out


class Vocab:
    def __init__(self, name: str) -> None:
        path = os.path.join(DATA, "tokenizers", "canonical", VOCAB_FILES[name])
        with open(path, encoding="utf-8") as f:
            self.canon = json.load(f)
        self.path = path
        self.name = name
        dec = _byte_decoder()
        added = set(self.canon["added_ids"])
        self.token_bytes: List[bytes] = []
        self.by_bytes: Dict[bytes, int] = {}
        for i, t in enumerate(self.canon["tokens"]):
            b = t.encode("utf-8") if i in added else bytes(dec[c] for c in t)
            self.token_bytes.append(b)
            if i not in added:
                self.by_bytes.setdefault(b, i)
        self.max_len = max(len(b) for b in self.by_bytes)
        self.n = len(self.token_bytes)
        self.eos = self.canon["eos_ids"][0]
        # Control tokens never match grammar text in xgrammar2; upstream's TokenizerInfo has
        # no notion of them and reads their names as text, so masks are compared without them.
        self.control = np.zeros(self.n, dtype=bool)
        self.control[[t for t in self.canon["special_ids"] if t not in self.canon["eos_ids"]]] = True
        self._ours = self._up = None

    def ours(self) -> Tuple[Any, Any]:
        if self._ours is None:
            info = xg2.TokenizerInfo.from_canonical_json(self.path)
            self._ours = (info, xg2.GrammarCompiler(info, cache_enabled=False))
        return self._ours

    def upstream(self) -> Tuple[Any, Any]:
        if self._up is None:
            info = xgr_up.TokenizerInfo(self.canon["tokens"], vocab_type=xgr_up.VocabType.BYTE_LEVEL,
                                        vocab_size=self.n, stop_token_ids=list(self.canon["eos_ids"]))
            self._up = (info, xgr_up.GrammarCompiler(info, max_threads=1, cache_enabled=False))
        return self._up

    def greedy(self, data: bytes) -> List[int]:
        out: List[int] = []
        i = 0
        while i < len(data):
            for n in range(min(self.max_len, len(data) - i), 0, -1):
                t = self.by_bytes.get(data[i:i + n])
                if t is not None:
                    out.append(t)
                    i += n
                    break
            else:  # pragma: no cover - byte-level vocabularies have every byte
                raise AssertionError(f"no token for byte {data[i]:#x}")
        return out

    def segment(self, data: bytes, rng: Optional[random.Random]) -> List[int]:
        """Tokens spelling `data`: greedy longest match, or (with rng) greedy tokens of which
        about half the multi-byte ones are cut at a random inner byte and re-tokenized, so
        tokens split triggers, excludes and UTF-8 characters at random places."""
        toks = self.greedy(data)
        if rng is None:
            return toks
        multi = [k for k, t in enumerate(toks) if len(self.token_bytes[t]) > 1]
        cut = {k for k in multi if rng.random() < 0.5} or set(multi[:1])
        out: List[int] = []
        for k, t in enumerate(toks):
            b = self.token_bytes[t]
            if k in cut:
                c = rng.randint(1, len(b) - 1)
                out += self.greedy(b[:c]) + self.greedy(b[c:])
            else:
                out.append(t)
        return out


_VOCABS: Dict[str, Vocab] = {}


def vocab(name: str) -> Vocab:
    if name not in _VOCABS:
        _VOCABS[name] = Vocab(name)
    return _VOCABS[name]


JSON_RULES = r'''
obj ::= "{" ws (pair (ws "," ws pair)*)? ws "}"
pair ::= str ws ":" ws value
value ::= str | num | obj | "[" ws (value (ws "," ws value)*)? ws "]" | "true" | "false" | "null"
str ::= "\"" ([^"\\\x00-\x1f] | "\\" ["\\/bfnrt])* "\""
num ::= "-"? [0-9]+ ("." [0-9]+)?
ws ::= [ \n]*
'''

MASK_GRAMMARS: Dict[str, Tuple[str, List[str]]] = {
    "tools_loop": (
        '''root ::= TagDispatch(
  ("<function=", fn),
  ("<tool_call>", call),
  loop_after_dispatch=true,
  excludes=("</tool_call>", "<|im_end|>")
)
fn ::= ("get_weather" | "get_time" | "get") ">" obj "</function>"
call ::= "\\n" obj "\\n</tool_call>"
''' + JSON_RULES,
        ['Sure, let me check the weather. <function=get_weather>{"city": "Zürich", "days": [1, 2]}</function> '
         'Then <tool_call>\n{"name": "x", "args": {}}\n</tool_call> and <function=get>{}</function> done <functio',
         'No tools here, just <tool text with < and <function and </tool_call partial 世界 🚀 <'],
    ),
    "overlapping_single": (
        '''root ::= TagDispatch(
  ("<", lt),
  ("<tool", tool),
  ("tool>", close),
  loop_after_dispatch=false,
  excludes=("<|eot_id|>", "<<<")
)
lt ::= "<" [a-z]* ">"
tool ::= "_call>" obj
close ::= " end"
''' + JSON_RULES,
        ['text << x> ', 'free text <tool_call>{"a": [true, null, -1.5]}', 'a tool> end', 'ends in a partial <to'],
    ),
    "nested": (
        '''root ::= TagDispatch(("<tool_call>", call), loop_after_dispatch=true, excludes=("<|im_end|>"))
call ::= TagDispatch(("<arg>", arg), loop_after_dispatch=true, excludes=("</tool_call>")) "</tool_call>"
arg ::= obj "</arg>"
''' + JSON_RULES,
        ['a <tool_call> thinking <arg>{"k": "v"}</arg> more </tool_call> b <tool_call></tool_call>',
         '<tool_call><arg>{}</arg><arg>{"x": {"y": [1]}}</arg></tool_call><tool_call> open'],
    ),
}


def _bits(row: Any, n: int) -> Any:
    return np.unpackbits(np.ascontiguousarray(row).view(np.uint8), bitorder="little")[:n].astype(bool)


def _mask(mod: Any, m: Any, bm: Any, brute: bool = False) -> Any:
    view = bm.numpy() if hasattr(bm, "numpy") else np.asarray(bm)
    view.fill(0)
    if brute:
        m._fill_next_token_bitmask_bruteforce(bm)
    else:
        m.fill_next_token_bitmask(bm)
    return view[0].copy()


def _describe(v: Vocab, ids: Any) -> str:
    ids = [int(t) for t in ids]
    return ", ".join(f"{t}:{v.token_bytes[t]!r}" for t in ids[:10]) + (" ..." if len(ids) > 10 else "")


def _walk(v: Vocab, src: str, tokens: List[int], compare_upstream: bool, rng: random.Random,
          random_steps: int = 0) -> int:
    """Accepts `tokens` (then `random_steps` tokens drawn from the mask), comparing our mask
    with the brute-force oracle (and upstream's) before every step. Returns the steps."""
    info, comp = v.ours()
    m = xg2.GrammarMatcher(comp.compile_grammar(src))
    bm = xg2.allocate_token_bitmask(1, info.vocab_size)
    bb = xg2.allocate_token_bitmask(1, info.vocab_size)
    mu = bu = None
    if compare_upstream:
        uinfo, ucomp = v.upstream()
        mu = xgr_up.GrammarMatcher(ucomp.compile_grammar(src))
        bu = xgr_up.allocate_token_bitmask(1, uinfo.vocab_size)
    steps = 0
    queue = list(tokens)
    extra = random_steps
    while True:
        a = _mask(xg2, m, bm)
        b = _mask(xg2, m, bb, brute=True)
        if not np.array_equal(a, b):
            fa, fb = _bits(a, v.n), _bits(b, v.n)
            pytest.fail(f"step {steps}: mask != brute force; only mask: {_describe(v, np.nonzero(fa & ~fb)[0])}; "
                        f"only brute force: {_describe(v, np.nonzero(fb & ~fa)[0])}")
        allowed = _bits(a, v.n)
        assert not (allowed & v.control).any(), "a control token is allowed"
        if mu is not None:
            c = _bits(_mask(xgr_up, mu, bu), v.n) & ~v.control
            if not np.array_equal(allowed, c):
                pytest.fail(f"step {steps}: mask != upstream; only ours: {_describe(v, np.nonzero(allowed & ~c)[0])}; "
                            f"only upstream: {_describe(v, np.nonzero(c & ~allowed)[0])}")
        if queue:
            t = queue.pop(0)
            assert allowed[t], f"step {steps}: walk token {t} {v.token_bytes[t]!r} not allowed"
        elif extra > 0:
            cand = np.nonzero(allowed)[0]
            cand = cand[cand != v.eos] if len(cand) > 1 else cand
            if len(cand) == 0:
                break
            t = int(rng.choice(list(cand)))
            extra -= 1
        else:
            break
        assert m.accept_token(t), f"step {steps}: token {t} {v.token_bytes[t]!r} refused"
        if mu is not None:
            assert mu.accept_token(t), f"step {steps}: upstream refused {t} {v.token_bytes[t]!r}"
        steps += 1
        if m.is_terminated():
            break
    return steps


MASK_CASES = [(g, vn, w, seg) for g in MASK_GRAMMARS for vn in VOCAB_FILES
              for w in range(len(MASK_GRAMMARS[g][1])) for seg in ("greedy", "random")]


@needs_data
@pytest.mark.parametrize("grammar,vocab_name,walk,seg", MASK_CASES)
def test_masks_equal_bruteforce_and_upstream(grammar: str, vocab_name: str, walk: int, seg: str):
    v = vocab(vocab_name)
    src, texts = MASK_GRAMMARS[grammar]
    rng = random.Random(zlib.crc32(f"{grammar}/{vocab_name}/{walk}/{seg}".encode()))
    data = texts[walk].encode("utf-8")
    tokens = v.segment(data, rng if seg == "random" else None)
    if seg == "random":
        assert len(tokens) > len(v.segment(data, None))  # tokens really split the text differently
    steps = _walk(v, src, tokens, xgr_up is not None, rng, random_steps=8)
    assert steps >= len(tokens)


@needs_data
def test_trigger_split_across_tokens():
    """A trigger spelled by several tokens dispatches exactly like one token would."""
    v = vocab("llama-3.1")
    src = MASK_GRAMMARS["tools_loop"][0]
    info, comp = v.ours()
    compiled = comp.compile_grammar(src)
    for cut in range(1, len("<function=")):
        m = xg2.GrammarMatcher(compiled)
        trig = "<function="
        for t in v.segment(trig[:cut].encode(), None) + v.segment(trig[cut:].encode(), None):
            assert m.accept_token(t)
        assert not m.is_completed()  # the rule must follow now
        assert not m.accept_token(v.by_bytes[b"x"])  # free text is over
        for t in v.segment(b'get_time>{}</function>', None):
            assert m.accept_token(t)
        assert m.is_completed()


# ---- timing report -------------------------------------------------------------------------------

def _hundred_tools() -> str:
    pairs = ",\n".join(f'  ("<function=tool_{i:03d}>", call_{i:03d})' for i in range(100))
    calls = "\n".join(f'call_{i:03d} ::= obj "</function>"' for i in range(100))
    return (f"root ::= TagDispatch(\n{pairs},\n  loop_after_dispatch=true,\n"
            f'  excludes=("<|eot_id|>", "<|im_end|>")\n)\n{calls}\n{JSON_RULES}')


TIMING_GRAMMARS = {
    "free text: TagDispatch()": "root ::= TagDispatch()",
    "free text: [^\\x00]* (UTF-8 chars)": "root ::= [^\\x00]*",
    "free text: b[\\x00-\\xff]* (bytes)": "root ::= b[\\x00-\\xff]*",  # xgrammar2 only
    "free text + 100 tool triggers": None,  # _hundred_tools()
}

FREE_TEXT = ("The quick brown fox jumps over the lazy dog. Let me think about which function to call: "
             "maybe <function or maybe not; 1 < 2 and <tool is fine. Zürich, 東京, emoji 🚀. ") * 3


def mask_timings(vocab_name: str = "llama-3.1", engines: Tuple[str, ...] = ("xgrammar2", "xgrammar")) -> List[Dict]:
    """Per-token fill_next_token_bitmask time over a free-text walk (no trigger completed):
    first pass (cold: masks computed just in time) and second pass (warm mask cache)."""
    v = vocab(vocab_name)
    tokens = v.segment(FREE_TEXT.encode(), None)
    out = []
    for label, src in TIMING_GRAMMARS.items():
        src = src or _hundred_tools()
        for eng in engines:
            if eng == "xgrammar" and xgr_up is None:
                continue
            mod = xg2 if eng == "xgrammar2" else xgr_up
            info, comp = v.ours() if mod is xg2 else v.upstream()
            t0 = time.perf_counter()
            try:
                compiled = comp.compile_grammar(src)
            except Exception:  # noqa: BLE001 - b[...] is an xgrammar2 extension
                if mod is xg2:
                    raise
                continue
            t_compile = time.perf_counter() - t0
            bm = mod.allocate_token_bitmask(1, info.vocab_size)
            res = {"grammar": label, "engine": eng, "vocab": vocab_name, "tokens": len(tokens),
                   "compile_ms": t_compile * 1e3}
            for pas in ("cold", "warm"):
                m = mod.GrammarMatcher(compiled)
                times = []
                for t in tokens:
                    s = time.perf_counter()
                    m.fill_next_token_bitmask(bm)
                    times.append(time.perf_counter() - s)
                    assert m.accept_token(t)
                res[f"{pas}_mean_us"] = 1e6 * sum(times) / len(times)
                res[f"{pas}_p50_us"] = 1e6 * sorted(times)[len(times) // 2]
                res[f"{pas}_max_us"] = 1e6 * max(times)
            out.append(res)
    return out


def _format_timings(rows: List[Dict]) -> str:
    lines = [f"{'grammar':36} {'engine':10} {'compile ms':>10} {'cold mean us':>12} {'cold p50':>9} "
             f"{'warm mean us':>12} {'warm p50':>9} {'warm max':>9}"]
    for r in rows:
        lines.append(f"{r['grammar']:36} {r['engine']:10} {r['compile_ms']:10.2f} {r['cold_mean_us']:12.1f} "
                     f"{r['cold_p50_us']:9.1f} {r['warm_mean_us']:12.1f} {r['warm_p50_us']:9.1f} "
                     f"{r['warm_max_us']:9.1f}")
    return "\n".join(lines)


@needs_data
def test_mask_time_report(capsys):
    """Reports (does not assert) per-token mask times: free text with 100 tool triggers
    against plain free text. Visible with pytest -s."""
    rows = mask_timings("llama-3.1")
    with capsys.disabled():
        print("\n[tag_dispatch] per-token mask time, Llama-3.1 vocabulary, "
              f"{rows[0]['tokens']} free-text tokens\n" + _format_timings(rows))
    assert rows


if __name__ == "__main__":  # pragma: no cover - manual benchmark
    if len(sys.argv) > 1 and sys.argv[1] == "bench":
        for name in ("llama-3.1", "qwen3"):
            rows = mask_timings(name)
            print(f"\n{name}: {rows[0]['tokens']} tokens\n" + _format_timings(rows))
    else:
        sys.exit(pytest.main([__file__] + sys.argv[1:]))
