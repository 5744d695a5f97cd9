"""A pattern with a counted repetition past the core's repeat threshold (``(\\S+\\s+){0,99}``)
beside minLength 0 / 1 and a maxLength keeps its own expression (emit.Emitter._counted_string):
the empty string taken out for minLength 1 (regex.nonempty), maxLength as the character budget
of the string's body. The automaton the converter built before unrolled the repetition into a
state per count, each with its own mask: inside such a string every token's first visit was a
vocabulary pass (5-6 ms at 151k tokens, Github_easy---o21053; docs/json-schema.md, "Strings").

Checked against independent oracles: Python's ``re`` with ``len`` of the decoded string for the
language (texts spelled raw and with escapes), a brute force over a small vocabulary for masks.
"""

from __future__ import annotations

import json
import random
import re

import pytest

from js_engine import ENGINE
from js_helpers import accepts, allowed_ids
from xgrammar2.json_schema import json_schema_to_ebnf
from xgrammar2.json_schema import regex as rx

WORDS = r"^$|(^(?:\S+\s+){0,99}\S+$)"  # Github_easy---o21053's pattern
PATTERNS = [
    WORDS,
    r"^(?:\S+\s+){0,20}\S*$",  # nullable, counted past 16
    r"^(?:[a ]{0,20}|x)$",  # a nullable branch
    r"^(?:a?\s?){0,30}$",  # a repetition of a nullable part
    r"^(?:a\s){0,18}(?:x|)$",  # a concatenation of nullable parts
]
ALPHABET = ["a", "x", "é", " ", "\t", "\n"]


def _ebnf(schema):
    return json_schema_to_ebnf(schema).ebnf


def _oracle(pattern, minl, maxl, s):
    return re.fullmatch(pattern, s) is not None and len(s) >= minl and (maxl is None or len(s) <= maxl)


def _samples(pattern, rng):
    """Texts near the pattern's language: words and spaces, the empty string, odd mixes."""
    out = ["", "a", " ", "x", "a ", " a", "a a", "aaaa", "a" * 20, "a" * 21, "ax" * 15, "xa" * 16]
    for n in range(60):
        k = rng.randrange(0, 40)
        out.append("".join(rng.choice(ALPHABET) for _ in range(k)))
        words = rng.randrange(1, 110)
        out.append(" ".join(rng.choice(["a", "xé", "ax"]) for _ in range(words)))
    return out


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("minl,maxl", [(0, None), (1, None), (0, 7), (1, 7), (1, 30), (1, 5000)])
def test_counted_patterns_with_lengths_match_re_and_len(pattern, minl, maxl):
    schema = {"type": "string", "pattern": pattern, "minLength": minl}
    if maxl is not None:
        schema["maxLength"] = maxl
    rng = random.Random(hash((pattern, minl, maxl)) & 0xFFFF)
    for s in _samples(pattern, rng):
        want = _oracle(pattern, minl, maxl, s)
        for ascii_only in (False, True):  # raw characters, and escapes (\u00e9, \t, \n)
            text = json.dumps(s, ensure_ascii=ascii_only)
            assert accepts(schema, text) == want, (pattern, minl, maxl, text)


def test_words_pattern_stays_counted_and_the_length_is_a_budget():
    text = _ebnf({"type": "string", "pattern": WORDS, "minLength": 1, "maxLength": 5000})
    assert "{0,99}" in text  # one counted repetition, not a rule per count
    assert "[max_json_chars=5000]" in text
    assert text.count("::=") < 12
    # no maxLength: no budget; minLength 1 only takes the empty string out
    text = _ebnf({"type": "string", "pattern": WORDS, "minLength": 1})
    assert "{0,99}" in text and "max_json_chars" not in text


def test_small_counts_and_larger_min_lengths_keep_the_automaton():
    # (a count the core unrolls anyway, or a minLength the empty-string removal does not give)
    assert "{0,9}" not in _ebnf({"type": "string", "pattern": r"^$|^(?:\S+\s+){0,9}\S+$", "minLength": 1,
                                 "maxLength": 50})
    assert "{0,99}" not in _ebnf({"type": "string", "pattern": WORDS, "minLength": 2, "maxLength": 5000})
    # a count whose loop no space leaves (hostname-like labels: the automaton's states share
    # their loop entries in the core)
    label = r"^$|^[a-z]([a-z0-9-]{0,40}[a-z0-9])?(\.[a-z]+)*$"
    assert "{0,40}" not in _ebnf({"type": "string", "pattern": label, "minLength": 1, "maxLength": 100})


@pytest.mark.parametrize("ast,empty", [
    (rx.parse(r"^(?:a?x?){0,30}$"), True),
    (rx.parse(r"^(?:a{0,20}|x)$"), True),
    (rx.parse(r"^a+$"), False),
])
def test_nonempty_is_the_language_less_the_empty_string(ast, empty):
    full = rx.to_full_match(ast)
    ne = rx.nonempty(full)
    assert (ne != full) == empty
    lo, _ = rx.length_range(ne)
    assert lo >= 1


# ------------------------------------------------------------------ masks vs brute force

VOCAB = ['"', "a", "x", " ", "a ", " a", "aa", "a a", "xa x", "a\"", " \"", "  ", "aaaaaaaa", "a a a a ",
         "é", "\\t", "\\u0061", "\\n"]
STOP = len(VOCAB)


def _oracle_ok(pattern, minl, maxl, text):
    """Whether the JSON text so far can still become a valid instance (a prefix of one)."""
    if not text.startswith('"'):
        return text == ""
    for tail in ("", '"', 'a"', 'a a"', ' a"', 'xa"'):  # closed, or short completions
        s = _string(text + tail)
        if s is not None and _oracle(pattern, minl, maxl, s):
            return True
    return False


def _string(text):
    """The string that JSON text ``text`` is exactly (nothing after it), else None."""
    try:
        s, end = json.JSONDecoder().raw_decode(text)
    except ValueError:
        return None
    return s if end == len(text) and isinstance(s, str) else None


@pytest.mark.parametrize("maxl", [8, 40])
def test_masks_equal_brute_force_oracle(maxl):
    if ENGINE.name != "xgrammar2":
        pytest.skip("xgrammar2's own matcher")

    pattern, minl = WORDS, 1
    xgr = ENGINE.mod
    tok = xgr.TokenizerInfo(VOCAB + ["</s>"], stop_token_ids=[STOP])
    comp = xgr.GrammarCompiler(tok, cache_enabled=False)
    cg = comp.compile_grammar(_ebnf({"type": "string", "pattern": pattern, "minLength": minl, "maxLength": maxl}))
    rng = random.Random(maxl)
    for walk in range(12):
        m = xgr.GrammarMatcher(cg)
        text = ""
        for step in range(30):
            if m.is_terminated():
                break
            got = allowed_ids(m, len(VOCAB) + 1)
            want = {i for i, t in enumerate(VOCAB) if _oracle_ok(pattern, minl, maxl, text + t)}
            done = _string(text)
            if done is not None and _oracle(pattern, minl, maxl, done):
                want.add(STOP)
            assert got == want, (maxl, walk, step, repr(text),
                                 sorted(VOCAB[i] if i < STOP else "</s>" for i in got ^ want))
            pick = rng.choice(sorted(got))
            assert m.accept_token(pick)
            if pick == STOP:
                break
            text += VOCAB[pick]
