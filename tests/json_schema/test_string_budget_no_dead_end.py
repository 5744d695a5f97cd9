"""A string under a character budget (maxLength past the product limit: the budget path of
test_string_length_budget.py / test_string_decoded_char_budget.py) never reaches a dead end:
near the budget's end the mask leaves out a character after which the pattern could not
finish in what is left (csrc/parse/need.c), so every walk ends in a valid instance.

The product limit is lowered here (emit.STATE_LIMIT) so that small maxLengths take the budget
path, which a brute-force oracle can cover. Oracles: every valid string over the vocabulary's
characters, enumerated (masks), and jsonschema (walks)."""

from __future__ import annotations

import itertools
import json
import os
import random

import numpy as np
import pytest

from js_engine import DATA, ENGINE
from xgrammar2.json_schema import emit, json_schema_to_ebnf

jsonschema = pytest.importorskip("jsonschema")

PAT = r"^[a-z]+@[a-z]+\.com$"
MAXL = 9
PATTERN_SCHEMA = {"type": "string", "pattern": PAT, "maxLength": MAXL}
EMAIL_SCHEMA = {"type": "string", "format": "email", "maxLength": 12}
# an escape-admitting pattern: the decoded budget (max_json_chars)
ESC_PAT = r'^[a-z"]+@[a-z]+\.com$'
ESC_SCHEMA = {"type": "string", "pattern": ESC_PAT, "maxLength": MAXL}

LETTERS = "acmo"  # (c, o, m spell ".com" and are letters too)
VOCAB = ['"', "a", "c", "o", "m", "@", ".", ".com", "com", "a@", "@a", "aa", 'm"', '.com"', "ac"]
# (whole escapes only: a token ending inside one could go on as any escape spelling, which
# the enumerated texts below do not list; csrc tests cover tokens ending inside escapes)
ESC_VOCAB = VOCAB + ['\\"', '\\"@', "\\u0022", '"\\"']


@pytest.fixture
def budget_path(monkeypatch):
    """Any pattern with a maxLength takes the budget path."""
    monkeypatch.setattr(emit, "STATE_LIMIT", 1)


def _ebnf(schema):
    return json_schema_to_ebnf(schema).ebnf


def _valid_strings(xs: str, ys: str, maxl: int) -> set[str]:
    """Every x@y.com (x over xs, y over ys) of at most maxl characters."""
    out = set()
    room = maxl - len("@.com")
    for i in range(1, room):
        for j in range(1, room - i + 1):
            for x in itertools.product(xs, repeat=i):
                for y in itertools.product(ys, repeat=j):
                    out.add("".join(x) + "@" + "".join(y) + ".com")
    return out


def _texts(values: set[str], spell) -> tuple[set[str], set[str]]:
    """The JSON texts of the values (every spelling `spell` gives) and all their prefixes."""
    whole = {t for v in values for t in spell(v)}
    prefixes = {t[:k] for t in whole for k in range(len(t) + 1)}
    return whole, prefixes


def _raw(v):
    return [json.dumps(v)]


def _escaped(v):
    # '"' as \" or \u0022 (lower case hex, as the vocabulary spells it)
    out = []
    for choice in itertools.product(['\\"', "\\u0022"], repeat=v.count('"')):
        parts = v.split('"')
        out.append('"' + "".join(p + (choice[k] if k < len(choice) else "") for k, p in enumerate(parts)) + '"')
    return out


def _compile(schema, vocab):
    xgr = ENGINE.mod
    tok = xgr.TokenizerInfo(vocab + ["</s>"], stop_token_ids=[len(vocab)])
    ebnf = _ebnf(schema)
    assert "[max_chars=" in ebnf or "[max_json_chars=" in ebnf  # (the budget path)
    return xgr, xgr.GrammarCompiler(tok, cache_enabled=False).compile_grammar(ebnf)


def _allowed(m, n):
    bm = np.zeros((1, (n + 31) // 32), dtype=np.int32)
    m.fill_next_token_bitmask(bm)
    bits = np.unpackbits(bm.reshape(-1).view(np.uint8), bitorder="little")[:n]
    return set(np.flatnonzero(bits).tolist())


def _walk_all(schema, vocab, whole, prefixes):
    """Every prefix of a valid text the vocabulary spells: the mask is exactly the tokens
    after which a valid text still starts (and the stop token once one is complete)."""
    if ENGINE.name != "xgrammar2":
        pytest.skip("xgrammar2's own matcher")
    xgr, cg = _compile(schema, vocab)
    stop, n = len(vocab), len(vocab) + 1
    m = xgr.GrammarMatcher(cg)
    seen = 0

    def visit(text):
        nonlocal seen
        seen += 1
        got = _allowed(m, n)
        want = {i for i, t in enumerate(vocab) if text + t in prefixes}
        if text in whole:
            want.add(stop)
        assert got == want, (repr(text), sorted(vocab[i] if i < stop else "</s>" for i in got ^ want))
        assert got, repr(text)  # (no dead end)
        for i in sorted(want - {stop}):
            assert m.accept_token(i)
            visit(text + vocab[i])
            m.rollback(1)

    visit("")
    assert seen > 100


def test_pattern_budget_masks_have_no_dead_end(budget_path):
    whole, prefixes = _texts(_valid_strings(LETTERS, LETTERS, MAXL), _raw)
    _walk_all(PATTERN_SCHEMA, VOCAB, whole, prefixes)


def test_decoded_budget_masks_have_no_dead_end(budget_path):
    """Escapes count one character each (\\" and \\u0022 alike)."""
    values = _valid_strings(LETTERS + '"', LETTERS, MAXL)
    whole, prefixes = _texts(values, _escaped)
    _walk_all(ESC_SCHEMA, ESC_VOCAB, whole, prefixes)


def _random_walk(xgr, cg, vocab_size, decode, rng, brute=False, max_steps=200):
    m = xgr.GrammarMatcher(cg)
    out = b""
    for _ in range(max_steps):
        if m.is_terminated():
            return out
        got = sorted(_allowed(m, vocab_size))
        assert got, ("dead end", out)
        if brute:  # the cached entries agree with the parser near the budget's end
            bm = np.zeros((1, (vocab_size + 31) // 32), dtype=np.int32)
            m._fill_next_token_bitmask_bruteforce(bm)
            bits = np.unpackbits(bm.reshape(-1).view(np.uint8), bitorder="little")[:vocab_size]
            assert got == np.flatnonzero(bits).tolist(), out
        # letters first: runs into the budget's end far more often than a uniform pick
        pick = rng.choice(got)
        for _ in range(3):
            if decode(pick) and decode(pick).isalpha():
                break
            pick = rng.choice(got)
        assert m.accept_token(pick)
        out += decode(pick)
    raise AssertionError(("no end", out))


@pytest.mark.parametrize("schema", [PATTERN_SCHEMA, EMAIL_SCHEMA, ESC_SCHEMA], ids=["pattern", "email", "escapes"])
def test_random_walks_end_valid_on_a_real_vocabulary(budget_path, schema):
    if ENGINE.name != "xgrammar2":
        pytest.skip("xgrammar2's own matcher")
    path = os.path.join(DATA, "tokenizers", "canonical", "llama-3.1.json")
    if not os.path.exists(path):
        pytest.skip("tokenizer data not found")
    xgr = ENGINE.mod
    tok = xgr.TokenizerInfo.from_canonical_json(path)
    cg = xgr.GrammarCompiler(tok, cache_enabled=False).compile_grammar(_ebnf(schema))
    vocab = tok.decoded_vocab
    stops = set(tok.stop_token_ids)

    def decode(i):
        if i in stops:
            return b""
        s = vocab[i]
        return s if isinstance(s, bytes) else s.encode()

    check = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    rng = random.Random(11)
    for k in range(25):
        text = _random_walk(xgr, cg, tok.vocab_size, decode, rng, brute=k < 3)
        value = json.loads(text.decode())
        assert check.is_valid(value), text
