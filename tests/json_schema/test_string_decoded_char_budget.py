"""Strings whose pattern/format admits '"', '\\' or control characters and whose automaton
times maxLength counts is past the product limit: maxLength becomes a budget in decoded
characters, a rule ``[max_json_chars=maxLength]`` spanning the characters between the
quotes over every JSON spelling (docs/json-schema.md, "Strings"; docs/rule-attributes.md).
An escape is one character, a surrogate-pair escape one code point, as JSON Schema (and
Python's json / jsonschema) count a string's length.

Oracles: jsonschema for the lengths and patterns, and for masks a brute force over a small
vocabulary that decodes the JSON text so far with Python's json (every token tried).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import warnings

import pytest

from js_engine import DATA, ENGINE
from js_helpers import accepts, allowed_ids
from xgrammar2.json_schema import json_schema_to_ebnf

jsonschema = pytest.importorskip("jsonschema")

# ~200 states, no length bound: times 201 counts past the product limit (emit.py
# string_dfa), so maxLength 200 takes the budget path. '"', '\\' and '\n' have escaped
# spellings only. Prefix-closed and extended by any of its characters (the mask oracle).
ALPHA = 'ab"\\\n😀é'
CLS = r'[ab"\\\n😀é]'
PAT = "^(?:%s+-){0,100}%s*$" % (CLS, CLS)
MAXL, MINL = 200, 5
SCHEMA = {"type": "string", "pattern": PAT, "maxLength": MAXL, "minLength": MINL}
VALID = jsonschema.Draft202012Validator(SCHEMA)


def _ebnf(schema, **kw):
    return json_schema_to_ebnf(schema, **kw).ebnf


def _spell_u(s: str, upper=False) -> str:
    """Every character as a \\u escape (astral ones as a surrogate pair)."""
    out = []
    for ch in s:
        b = ch.encode("utf-16-be")
        for i in range(0, len(b), 2):
            h = "%04x" % int.from_bytes(b[i:i + 2], "big")
            out.append("\\u" + (h.upper() if upper else h))
    return '"' + "".join(out) + '"'


def _spellings(s: str):
    return [json.dumps(s), json.dumps(s, ensure_ascii=False), _spell_u(s), _spell_u(s, upper=True)]


def test_decoded_budget_is_chosen_where_the_pattern_admits_escapes():
    text = _ebnf(SCHEMA)
    assert f"[max_json_chars={MAXL}]" in text and "[max_chars=" not in text
    assert re.search(r'"\\"" (\w+) "\\""', text)  # between the quotes only
    # a pattern of raw characters only keeps the (smaller) code-point budget
    raw = dict(SCHEMA, pattern="^(?:[abé]+-){0,100}[abé]*$")
    assert f"[max_chars={MAXL}]" in _ebnf(raw) and "max_json_chars" not in _ebnf(raw)


@pytest.mark.parametrize("unit", ['"', "\\", "\n", "😀", "é", 'a"', "\\😀"])
def test_length_max_accepted_and_one_more_refused_in_every_spelling(unit):
    s = (unit * MAXL)[:MAXL]
    over = s + unit[0]
    assert VALID.is_valid(s) and not VALID.is_valid(over)  # (the oracle agrees)
    for t in _spellings(s):
        assert accepts(SCHEMA, t), t[:40]
    for t in _spellings(over):
        assert not accepts(SCHEMA, t), t[:40]


def test_surrogate_pairs_count_once_and_the_pattern_holds_inside_the_budget():
    s = ("😀\\-" * 70)[:MAXL - 1] + "a"
    assert len(s) == MAXL and VALID.is_valid(s)
    mixed = json.dumps(s).replace("\\ud83d\\ude00", "\\uD83D\\ude00", 3)
    assert accepts(SCHEMA, mixed)
    assert not accepts(SCHEMA, json.dumps(s + "😀"))
    bad = s[:-1] + "c"  # c is outside the pattern
    assert not VALID.is_valid(bad) and not accepts(SCHEMA, json.dumps(bad))
    # minLength is still a product over decoded characters
    assert accepts(SCHEMA, _spell_u('\n"\\😀é')) and not accepts(SCHEMA, _spell_u('\n"\\😀'))


def test_random_strings_agree_with_jsonschema():
    rng = random.Random(7)
    cg = ENGINE.compile(_ebnf(SCHEMA))
    for _ in range(60):
        n = rng.choice([MINL - 1, MINL, 50, MAXL - 1, MAXL, MAXL, MAXL + 1, MAXL + 2])
        s = "".join(rng.choice(ALPHA + "-") for _ in range(n)).lstrip("-").replace("--", "-a")
        want = VALID.is_valid(s)
        for t in _spellings(s):
            assert ENGINE.accepts(cg, t) == want, (len(s), want, t[:60])


# ------------------------------------------------------------------ masks vs brute force

VOCAB = ['"', "a", "b", "-", "é", "😀", "\\", '\\"', "\\\\", "\\n", "u", "d", "8", "3", "e", "0",
         "\\u", "\\ud8", "\\ud83d", "\\ude00", "\\ud83d\\ude00", "\\u00e9", "\\u0061", "\\u000a",
         "\\t", "n", "c", "ab", "a-", '\\"-', '"a', '\\n"', "aaaa", "\\u00"]
STOP = len(VOCAB)
# Every spelling of a character of ALPHA + "-" with the vocabulary's lowercase hex digits
SPELL = {c: {json.dumps(c)[1:-1], json.dumps(c, ensure_ascii=False)[1:-1], _spell_u(c)[1:-1]}
         for c in ALPHA + "-"}


def _decode(body: str):
    """The decoded string of a complete JSON string body, or None (lone surrogates and raw
    control characters are not JSON strings the converter accepts)."""
    try:
        s = json.loads('"' + body + '"')
    except ValueError:
        return None
    return None if any(0xD800 <= ord(c) <= 0xDFFF for c in s) else s


def _prefix_ok(s: str) -> bool:
    return re.fullmatch(PAT, s) is not None and len(s) <= MAXL


def _oracle_ok(text: str) -> bool:
    """Can the JSON text so far still become an instance of SCHEMA? The body is split into a
    decoded part and a partial escape of one more character (any of its spellings)."""
    if not text.startswith('"'):
        return text == ""
    body, i = text[1:], 0
    while i < len(body) and body[i] != '"':  # the first unescaped quote closes
        i += 2 if body[i] == "\\" else 1
    if i < len(body):
        if i != len(body) - 1:
            return False
        s = _decode(body[:i])
        return s is not None and VALID.is_valid(s)
    for k in range(0, min(len(body), 12) + 1):
        head, tail = body[:len(body) - k], body[len(body) - k:]
        s = _decode(head)
        if s is None:
            continue
        if not tail:
            if _prefix_ok(s):
                return True
            continue
        for c, sp in SPELL.items():
            if any(x.startswith(tail) and x != tail for x in sp) and _prefix_ok(s + c):
                return True
    return False


def _complete(text: str) -> bool:
    if len(text) < 2 or not text.endswith('"') or not _oracle_ok(text):
        return False
    s = _decode(text[1:-1])
    return s is not None and VALID.is_valid(s)


@pytest.mark.parametrize("start", [0, MAXL - 6, MAXL - 2, MAXL - 1, MAXL])
def test_masks_equal_brute_force_oracle(start):
    if ENGINE.name != "xgrammar2":
        pytest.skip("xgrammar2's own matcher")

    xgr = ENGINE.mod
    tok = xgr.TokenizerInfo(VOCAB + ["</s>"], stop_token_ids=[STOP])
    cg = xgr.GrammarCompiler(tok, cache_enabled=False).compile_grammar(_ebnf(SCHEMA))
    rng = random.Random(start)
    head = ""
    if start:  # decoded characters: escapes, pairs and raw ones, `start` of them
        head = json.dumps(("\n😀a\\-\"é" * 40)[:start], ensure_ascii=start % 2 == 0)[:-1]
    for walk in range(5):
        m = xgr.GrammarMatcher(cg)
        text = head
        if head:
            assert m.accept_string(head)
        for step in range(14):
            if m.is_terminated():
                break
            got = allowed_ids(m, len(VOCAB) + 1)
            want = {i for i, t in enumerate(VOCAB) if _oracle_ok(text + t)}
            if _complete(text):
                want.add(STOP)
            assert got == want, (start, walk, step, repr(text[-16:]),
                                 sorted(VOCAB[i] if i < STOP else "</s>" for i in got ^ want))
            if not got:  # (a character this vocabulary cannot finish: "\\u00e" wants a 9)
                break
            pick = rng.choice(sorted(got))
            if pick == STOP:
                assert m.accept_token(pick)
                break
            assert m.accept_token(pick)
            text += VOCAB[pick]
            if step % 5 == 4 and rng.random() < 0.5:  # rollback keeps the count
                m.rollback(1)
                text = text[:-len(VOCAB[pick])]


@pytest.mark.parametrize("start", [MAXL - 2, MAXL - 1, MAXL])
def test_masks_inside_escapes_at_the_deadline(start):
    """Prefixes a walk rarely meets: the budget's last character spent on a high surrogate,
    whose low half still fits (counted 0), or on an escape not finished yet."""
    if ENGINE.name != "xgrammar2":
        pytest.skip("xgrammar2's own matcher")

    xgr = ENGINE.mod
    tok = xgr.TokenizerInfo(VOCAB + ["</s>"], stop_token_ids=[STOP])
    cg = xgr.GrammarCompiler(tok, cache_enabled=False).compile_grammar(_ebnf(SCHEMA))
    head = json.dumps(("\n😀a\\-\"é" * 40)[:start - 1], ensure_ascii=start % 2 == 0)[:-1]
    checked = 0
    for tail in ["a", "\\ud83d", "\\ud83d\\", "\\ud83d\\u", "\\ud83d\\ud", "\\ud83d\\ude", "\\", "\\u",
                 "\\ud8", "\\ud83d\\ude00", "\\u00", "\\n"]:
        text = head + tail
        m = xgr.GrammarMatcher(cg)
        ok = m.accept_string(text)
        assert ok == _oracle_ok(text), (start, tail)
        if not ok:
            continue
        got = allowed_ids(m, len(VOCAB) + 1)
        want = {i for i, t in enumerate(VOCAB) if _oracle_ok(text + t)} | ({STOP} if _complete(text) else set())
        assert got == want, (start, tail, sorted(VOCAB[i] if i < STOP else "</s>" for i in got ^ want))
        checked += 1
    assert checked >= (9 if start <= MAXL - 1 else 2)


# ------------------------------------------------------------------ real schemas


def _bench(ids):
    out = {}
    for sub in {i.split("---")[0] for i in ids}:
        path = os.path.join(DATA, "jsonschemabench", f"{sub}.jsonl.gz")
        if not os.path.exists(path):
            pytest.skip("JSONSchemaBench data not found")
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                if r["id"] in ids:
                    out[r["id"]] = r
    return out


NEW = ["Github_easy---o9778", "Github_easy---o9931", "Github_easy---o58907", "Github_easy---o21053",
       "Github_medium---o21115", "Github_medium---o21142", "Github_ultra---o62058"]


def _drop_max_length(x):
    if isinstance(x, dict):
        return {k: _drop_max_length(v) for k, v in x.items() if not (k == "maxLength" and isinstance(v, int))}
    if isinstance(x, list):
        return [_drop_max_length(v) for v in x]
    return x


def test_real_schemas_compile_and_agree_with_the_length_free_grammar():
    """Each compiles with a decoded budget (each was refused); valid test instances get the
    same verdict as the grammar without maxLength; invalid ones are not accepted where that
    one refuses them."""
    recs = _bench(set(NEW))
    accepted = 0
    for sid in NEW:
        r = recs[sid]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            strict = json_schema_to_ebnf(r["schema"])
            loose = json_schema_to_ebnf(_drop_max_length(r["schema"]))
        assert "[max_json_chars=" in strict.ebnf, sid
        g1, g2 = ENGINE.compile(strict.ebnf), ENGINE.compile(loose.ebnf)
        for t in r["tests"]:
            for text in (json.dumps(t["data"], ensure_ascii=False), json.dumps(t["data"])):
                a, b = ENGINE.accepts(g1, text), ENGINE.accepts(g2, text)
                assert a == b if t["valid"] else (b or not a), (sid, t["valid"], text[:200])
                accepted += a and t["valid"]
    assert accepted >= 8


def _sub(sid, pointer):
    node = _bench({sid})[sid]["schema"]
    for part in pointer.strip("#/").split("/"):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


# (schema id, JSON pointer, a valid string of exactly maxLength decoded characters, with
# characters that only escapes spell, and one character that must not fit after it)
def _quoted(n, domain):
    """An email of n characters whose quoted local part is quoted pairs (backslash, quote)."""
    m = n - 2 - len(domain)
    return '"' + '\\"' * (m // 2) + "a" * (m % 2) + '"' + domain


REAL = [
    # the email format's quoted local part: '"' and '\\' inside it, escaped in JSON
    ("Github_easy---o9778", "#/properties/email", lambda n: _quoted(n, "@example.com"), "m"),
    ("Github_easy---o58907", "#/properties/authentication/properties/email", lambda n: _quoted(n, "@ex.am.pl"),
     "l"),
    # \S+ word counts (at most 50 / 100 words): tabs, newlines, quotes and astral characters
    ("Github_medium---o21115", "#/properties/labAccessibility",
     lambda n: (('"\\😀' * 4 + "\t\n") * n)[:n - 1] + "x", "y"),
    ("Github_easy---o21053", "#/properties/question", lambda n: (('é"' * 30 + "\n") * n)[:n - 1] + "😀", "\\"),
]


@pytest.mark.parametrize("i", range(len(REAL)))
def test_real_strings_at_their_length_bounds(i):
    sid, ptr, make, more = REAL[i]
    schema = _sub(sid, ptr)
    assert "[max_json_chars=" in _ebnf(schema)
    n = schema["maxLength"]
    s = make(n)
    v = jsonschema.Draft202012Validator(schema)
    assert len(s) == n and v.is_valid(s), (len(s), n)
    # one more character: over maxLength (jsonschema agrees), whether or not it fits the pattern
    longer = s[:-1] + more + s[-1] if "@" in s else s + more
    assert not v.is_valid(longer)
    for t in _spellings(s):
        assert accepts(schema, t), t[:60]
    for t in _spellings(longer):
        assert not accepts(schema, t), t[:60]


def test_decoded_budget_survives_structural_tag_and_lark_embedding():
    if ENGINE.name != "xgrammar2":
        pytest.skip("xgrammar2's structural tags and Lark")
    xgr = ENGINE.mod
    st = json.dumps({"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "json_schema", "json_schema": SCHEMA}, {"type": "const_string", "value": ";"},
        {"type": "json_schema", "json_schema": SCHEMA}]}})

    def acc(g, text):
        m = ENGINE.matcher(ENGINE.compile(str(g)))
        return bool(m.accept_string(text)) and m.is_terminated()

    g = xgr.Grammar.from_structural_tag(st)
    assert acc(g, _spell_u("\n" * MAXL) + ";" + json.dumps('"' * MAXL))
    assert not acc(g, _spell_u("\n" * MAXL) + ";" + json.dumps('"' * (MAXL + 1)))
    g = xgr.Grammar.from_lark('start: "x" %json ' + json.dumps(SCHEMA))
    assert acc(g, "x" + _spell_u("😀" * MAXL)) and not acc(g, "x" + _spell_u("😀" * (MAXL + 1)))
