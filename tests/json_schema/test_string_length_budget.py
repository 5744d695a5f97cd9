"""Strings whose pattern/format automaton times their maxLength counts is too large for the
product automaton: maxLength becomes a per-occurrence character budget, a rule
``[max_chars=maxLength]`` spanning exactly the characters between the quotes
(docs/rule-attributes.md), with minLength a product with min+1 counts. Exact where each
character of the string is one character of the text: the pattern admits no '"', '\\' or
control character and the budgeted rule takes raw spellings only; other patterns take a
decoded budget, ``[max_json_chars=maxLength]`` (test_string_decoded_char_budget.py; docs/
json-schema.md, "Strings").

Checked with the matcher against independent oracles: Python's ``re`` for the pattern and
``len`` of the decoded string for the lengths, and, for masks, a brute force over a small
vocabulary from the same oracle (every token tried on the text so far).
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
from js_helpers import accepts, allowed_ids, grammar_for
from xgrammar2.json_schema import UnsupportedSchemaError, json_schema_to_ebnf

# A pattern whose automaton has ~200 states and no length bound: times 201 length counts it
# is past the product limit (emit.py string_dfa), so maxLength 200 takes the budget path.
# Its language is prefix-closed (every prefix of a member is a member) and extends by any
# letter, which makes the mask oracle below a plain fullmatch.
LETTERS = "abé中😀"
PAT = "^(?:[%s]+-){0,100}[%s]*$" % (LETTERS, LETTERS)
MAXL, MINL = 200, 5
SCHEMA = {"type": "string", "pattern": PAT, "maxLength": MAXL, "minLength": MINL}


def _ebnf(schema, **kw):
    return json_schema_to_ebnf(schema, **kw).ebnf


def _q(s):
    return json.dumps(s, ensure_ascii=False)


def test_budget_path_is_taken_and_spans_only_the_characters():
    text = _ebnf(SCHEMA)
    assert f"[max_chars={MAXL}]" in text
    # the budgeted rule sits between the quotes (a budget counting the quotes would be off by 2)
    assert re.search(r'"\\"" (\w+) "\\""', text)


def test_exactly_max_length_accepted_and_one_more_refused():
    assert accepts(SCHEMA, _q("a" * MAXL))
    assert not accepts(SCHEMA, _q("a" * (MAXL + 1)))
    s = "ab-" * 66 + "ab"  # 200 characters, 66 groups
    assert len(s) == MAXL and accepts(SCHEMA, _q(s))
    assert not accepts(SCHEMA, _q(s + "a"))
    assert not accepts(SCHEMA, _q(s[:-1] + "c"))  # the pattern still holds inside the budget


def test_exactly_min_length_accepted_and_one_less_refused():
    assert accepts(SCHEMA, _q("a" * MINL))
    assert not accepts(SCHEMA, _q("a" * (MINL - 1)))
    assert accepts(SCHEMA, _q("a-b-a"))
    assert not accepts(SCHEMA, _q("a-b-"))
    # a large minLength too: its product (~200 states x 151 counts) is still refused below the
    # limit estimate, so min + max must both hold through the budget and the product
    big = dict(SCHEMA, minLength=150)
    with pytest.raises(UnsupportedSchemaError, match="too large to intersect exactly"):
        _ebnf(big)


@pytest.mark.parametrize("ch", ["é", "中", "😀"])
def test_multibyte_characters_count_as_one(ch):
    # 2, 3 and 4 bytes of UTF-8 each (😀 is astral): one code point of the budget each
    assert accepts(SCHEMA, _q(ch * MAXL))
    assert not accepts(SCHEMA, _q(ch * (MAXL + 1)))
    mixed = ("a" + ch) * (MAXL // 2)
    assert accepts(SCHEMA, _q(mixed))
    assert not accepts(SCHEMA, _q(mixed + ch))


def test_escape_spellings_are_refused_inside_the_budget():
    # Raw spelling only: a \u escape is 6 characters of text for one of the string, so a
    # budget over the text would refuse "a"*199 + "\u00e9" (200 characters) -- the grammar
    # takes the raw spelling alone, which every value of this pattern has.
    assert accepts(SCHEMA, _q("a" * (MAXL - 1) + "é"))
    assert not accepts(SCHEMA, '"' + "a" * (MAXL - 1) + '\\u00e9"')
    assert not accepts(SCHEMA, '"\\u0061aaaa"')
    assert accepts(SCHEMA, '"aaaaa"')


@pytest.mark.parametrize("cls", ['"', "\\\\", "\\n", "\\x00-\\x1f"])
def test_patterns_admitting_escaped_characters_take_the_decoded_budget(cls):
    # '"', '\\' and control characters have no raw spelling: their escapes are several
    # characters of text, which max_chars would count; these take [max_json_chars=N], which
    # counts decoded characters (test_string_decoded_char_budget.py), strictly and leniently
    pat = "^(?:[ab%s]+-){0,100}[ab]*$" % cls
    schema = {"type": "string", "pattern": pat, "maxLength": MAXL}
    for kw in ({}, {"lenient": True}):
        r = json_schema_to_ebnf(schema, **kw)
        assert f"[max_json_chars={MAXL}]" in r.ebnf and "max_chars" not in r.ebnf and not r.warnings
    esc = {'"': '\\"', "\\\\": "\\\\", "\\n": "\\n", "\\x00-\\x1f": "\\u0001"}[cls]
    assert accepts(schema, '"' + esc * (MAXL - 1) + '-"')  # (one group: the escapes and '-')
    assert not accepts(schema, '"' + esc * MAXL + '-"')


def test_budget_is_per_occurrence_and_not_shared_with_unbudgeted_uses():
    # every array item has its own budget; the same pattern without maxLength (property b)
    # is not bounded by it, nor bounded through shared rules
    schema = {"type": "object", "properties": {
        "a": {"type": "array", "items": SCHEMA},
        "b": {"type": "string", "pattern": PAT}}, "required": ["a", "b"]}
    long = "ab-" * 66 + "ab"
    assert accepts(schema, json.dumps({"a": [long, long, "a" * MAXL], "b": "a" * 500}))
    assert not accepts(schema, json.dumps({"a": [long, long + "a"], "b": "a"}))
    assert accepts(schema, json.dumps({"a": [], "b": "ab-" * 90 + "a" * 300}))
    text = _ebnf(schema)
    assert text.count("[max_chars=") == 1


def test_two_budgets_in_one_grammar_keep_their_own_bounds():
    s2 = dict(SCHEMA, maxLength=300, minLength=0)
    schema = {"type": "array", "prefixItems": [SCHEMA, s2], "items": False, "minItems": 2}
    assert accepts(schema, json.dumps(["a" * 200, "a" * 300]))
    assert not accepts(schema, json.dumps(["a" * 201, "a" * 300]))
    assert not accepts(schema, json.dumps(["a" * 200, "a" * 301]))
    assert sorted(re.findall(r"max_chars=(\d+)", _ebnf(schema))) == ["200", "300"]


# ------------------------------------------------------------------ masks vs brute force

VOCAB = ['"', "a", "b", "-", "é", "中", "😀", "ab", "a-", "--", "-a", "aaaa", "ab-ab-", 'a"', 'é"',
         "\\", "\\u0061", "\\n", "c", '""', " ", "aaaaaaaaaaaaaaaa", "a-b-c"]
STOP = len(VOCAB)  # "</s>"


def _oracle_ok(text: str) -> bool:
    """Whether ``text`` (the JSON text so far) can still become a valid instance of SCHEMA
    as the converter spells it (raw characters only inside the budgeted string)."""
    if not text.startswith('"'):
        return text == ""
    body = text[1:]
    closed = body.endswith('"')
    if closed:
        body = body[:-1]
    if '"' in body or "\\" in body or any(ord(c) < 0x20 for c in body):
        return False
    if re.fullmatch(PAT, body) is None or len(body) > MAXL:
        return False
    return not closed or len(body) >= MINL


def _oracle_mask(text: str, complete: bool):
    allowed = {i for i, t in enumerate(VOCAB) if _oracle_ok(text + t)}
    if complete:
        allowed.add(STOP)
    return allowed


def _complete(text: str) -> bool:
    return len(text) >= 2 and text.endswith('"') and _oracle_ok(text)


@pytest.mark.parametrize("start", [0, MAXL - 12, MAXL - 3, MAXL])
def test_masks_equal_brute_force_oracle(start):
    if ENGINE.name != "xgrammar2":
        pytest.skip("xgrammar2's own matcher")

    xgr = ENGINE.mod
    tok = xgr.TokenizerInfo(VOCAB + ["</s>"], stop_token_ids=[STOP])
    comp = xgr.GrammarCompiler(tok, cache_enabled=False)
    cg = comp.compile_grammar(_ebnf(SCHEMA))
    rng = random.Random(start)
    for walk in range(4):
        m = xgr.GrammarMatcher(cg)
        text = ""
        if start:
            text = '"' + ("ab-" * 70)[:start]
            assert m.accept_string(text)
        for step in range(20):
            if m.is_terminated():
                break
            got = allowed_ids(m, len(VOCAB) + 1)
            want = _oracle_mask(text, _complete(text))
            assert got == want, (start, walk, step, repr(text[-12:]),
                                 sorted(VOCAB[i] if i < STOP else "</s>" for i in got ^ want))
            pick = rng.choice(sorted(got))
            if pick == STOP:
                assert m.accept_token(pick)
                break
            assert m.accept_token(pick)
            text += VOCAB[pick]


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


NEW = ["Github_medium---o15711", "Github_medium---o26594", "Github_medium---o63939", "Github_medium---o74461",
       "Github_medium---o9906", "Github_medium---o9907", "JsonSchemaStore---datahub_ingestion_schema",
       "JsonSchemaStore---sourcery_yaml_schema"]


def test_real_schemas_compile_with_a_budget_and_agree_with_the_length_free_grammar():
    """Each compiles (it was refused); on every test instance (its strings are within their
    maxLength) it agrees with the lenient grammar, which keeps the pattern and drops the length."""
    recs = _bench(set(NEW))
    accepted = rejected = 0
    for sid in NEW:
        r = recs[sid]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            strict = json_schema_to_ebnf(r["schema"])
            loose = json_schema_to_ebnf(_drop_max_length(r["schema"]))
        assert "[max_chars=" in strict.ebnf and "[max_chars=" not in loose.ebnf, sid
        g1, g2 = ENGINE.compile(strict.ebnf), ENGINE.compile(loose.ebnf)
        for t in r["tests"]:
            text = json.dumps(t["data"], ensure_ascii=False)
            a, b = ENGINE.accepts(g1, text), ENGINE.accepts(g2, text)
            # valid instances keep every maxLength: the same verdict; invalid ones may break one
            assert a == b if t["valid"] else (b or not a), (sid, t["valid"], text[:200])
            accepted += a and t["valid"]
            rejected += not a and not t["valid"]
    assert accepted >= 5 and rejected >= 10


def _drop_max_length(x):
    if isinstance(x, dict):
        return {k: _drop_max_length(v) for k, v in x.items() if not (k == "maxLength" and isinstance(v, int))}
    if isinstance(x, list):
        return [_drop_max_length(v) for v in x]
    return x


REAL_STRINGS = [
    # Github_medium---o9906 #/properties/iconData/oneOf/0
    ({"type": "string", "maxLength": 32767,
      "pattern": "^data:image/(jpg|jpeg|png|svg\\+xml);base64,[0-9a-zA-Z+/=]*$"}, "data:image/png;base64,", "A"),
    # JsonSchemaStore---sourcery_yaml_schema #/definitions/ProxyConfig/properties/url
    ({"minLength": 1, "maxLength": 65536, "format": "uri", "type": "string"}, "https://example.com/", "a"),
    # Github_medium---o63939 #/properties/file
    ({"maxLength": 1024, "minLength": 16, "pattern": "^[\\w\\-\\./]+\\.php+$", "type": "string"}, "", None),
]


@pytest.mark.parametrize("i", range(len(REAL_STRINGS)))
def test_real_strings_at_their_length_bounds(i):
    schema, head, fill = REAL_STRINGS[i]
    assert "[max_chars=" in _ebnf(schema)
    maxl = schema["maxLength"]
    if fill is None:  # ...\.php at both ends
        ok = "a" * (maxl - 4) + ".php"
        short = "a" * (schema["minLength"] - 4) + ".php"
        assert accepts(schema, _q(short)) and not accepts(schema, _q(short[1:]))
    else:
        ok = head + fill * (maxl - len(head))
    assert len(ok) == maxl
    assert accepts(schema, _q(ok))
    assert not accepts(schema, _q(ok[:-1] + fill + ok[-1] if fill else "a" + ok))


def test_budget_survives_structural_tag_and_lark_embedding():
    # the embedded JSON grammar keeps its budgeted rule (rules with attributes are not shared
    # across embedded grammars, structural_tag/ebnf.py), one budget per occurrence
    if ENGINE.name != "xgrammar2":
        pytest.skip("xgrammar2's structural tags and Lark")
    xgr = ENGINE.mod
    st = json.dumps({"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "json_schema", "json_schema": SCHEMA}, {"type": "const_string", "value": ";"},
        {"type": "json_schema", "json_schema": SCHEMA}]}})
    lark = 'start: "x" %json ' + json.dumps(SCHEMA)

    def acc(g, text):
        m = ENGINE.matcher(ENGINE.compile(str(g)))
        return bool(m.accept_string(text)) and m.is_terminated()

    g = xgr.Grammar.from_structural_tag(st)
    assert acc(g, _q("a" * MAXL) + ";" + _q("b" * MAXL))
    assert not acc(g, _q("a" * (MAXL + 1)) + ";" + _q("b" * MINL))
    assert not acc(g, _q("a" * MINL) + ";" + _q("b" * (MAXL + 1)))
    g = xgr.Grammar.from_lark(lark)
    assert acc(g, "x" + _q("é" * MAXL)) and not acc(g, "x" + _q("é" * (MAXL + 1)))


def test_bounded_format_longer_than_max_length():
    # Github_medium---o74461 #/properties/website: the hostname automaton (1,236 states) is
    # bounded (252 characters) but its product with 129 counts is past the state limit
    schema = {"format": "hostname", "maxLength": 128, "type": "string"}
    assert "[max_chars=128]" in _ebnf(schema)
    ok = "a" * 63 + "." + "b" * 62 + ".c"
    assert len(ok) == 128 and accepts(schema, _q(ok))
    assert not accepts(schema, _q(ok + "d"))
    assert accepts({"format": "hostname", "type": "string"}, _q(ok + "d"))  # (the format alone allows it)
    assert not accepts(schema, _q("a" * 64 + ".b"))  # the format still holds inside the budget
