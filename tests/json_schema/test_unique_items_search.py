"""uniqueItems over elements whose values can run out (objects of enums, strings with a pattern
or maxLength, long enums): the array is ``[unique_search_scope]`` and the matcher refuses a
token after which every completion of the element is a duplicate (csrc/parse/unique_search.h).

The oracle is independent of the engine: every document the schema allows (all arrays of
distinct values from a small finite item set, in every spelling the grammar has) is listed, and
a token is allowed exactly when the text so far plus the token is a prefix of one of them (the
stop token when the text is one of them). Walks pick random allowed tokens, so they run into
arrays where few fresh values are left, and must never reach a dead end."""

from __future__ import annotations

import itertools
import json
import random
import sys
import os

import jsonschema
import pytest

import xgrammar2 as xgr
from xgrammar2.json_schema import json_schema_to_ebnf
from xgrammar2.json_schema.errors import UnsupportedSchemaError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "runtime"))
from runtime_helpers import allowed, new_bitmask, tokenizer  # noqa: E402

OBJ_ITEM = {"type": "object", "properties": {"a": {"enum": ["x", "y"]}, "b": {"type": "boolean"}},
            "required": ["a"], "additionalProperties": False}
OBJECTS = {"type": "array", "items": OBJ_ITEM, "uniqueItems": True}
PATTERN = {"type": "array", "items": {"type": "string", "pattern": "^[ab]{1,2}$"}, "uniqueItems": True}
MAXLEN = {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j",
                                                                 "k", "l", "m", "ab"]},
          "uniqueItems": True}


def _obj_values():
    out = []
    for a in ("x", "y"):
        out.append({"a": a})
        for b in (True, False):
            out.append({"a": a, "b": b})
    return out


def _obj_spellings(v):
    return [json.dumps(v, separators=(", ", ": "))]


def _pattern_values():
    return ["".join(p) for n in (1, 2) for p in itertools.product("ab", repeat=n)]


def _pattern_spellings(v):
    # each character raw or as the \u escape the grammar has
    opts = [(c, "\\u%04x" % ord(c)) for c in v]
    return ['"' + "".join(p) + '"' for p in itertools.product(*opts)]


def _enum_values():
    return MAXLEN["items"]["enum"]


def _enum_spellings(v):
    return [json.dumps(v)]


NESTED_ITEM = {"type": "object", "properties": {"l": {"type": "array", "items": {"type": "string", "pattern": "^[ab]$"},
                                                  "uniqueItems": True, "maxItems": 2}},
               "required": ["l"], "additionalProperties": False}
NESTED = {"type": "array", "items": NESTED_ITEM, "uniqueItems": True}


def _nested_values():
    return [{"l": list(p)} for k in range(3) for p in itertools.permutations("ab", k)]


def _nested_spellings(v):
    chars = [(c, "\\u%04x" % ord(c)) for c in v["l"]]
    return ['{"l": [' + ", ".join('"%s"' % c for c in p) + ']}' for p in itertools.product(*chars)]


CASES = {
    "nested": (NESTED, _nested_values, _nested_spellings),
    "objects": (OBJECTS, _obj_values, _obj_spellings),
    "pattern": (PATTERN, _pattern_values, _pattern_spellings),
    "long_enum": (MAXLEN, _enum_values, _enum_spellings),
}


def _documents(values, spell, max_items):
    docs = set()
    for k in range(0, max_items + 1):
        for seq in itertools.permutations(values, k):
            for parts in itertools.product(*(spell(v) for v in seq)):
                docs.add("[" + ", ".join(parts) + "]")
    return docs


def _prefixes(docs):
    pre = set()
    for d in docs:
        for i in range(len(d) + 1):
            pre.add(d[:i])
    return pre


def _vocab(case, chars):
    # every single character of the documents, so that only the engine can cause a dead end
    common = ['[', ']', ', ', ',', ' ', '[]', ']\n'] + sorted(chars)
    if case == "objects":
        pieces = ['{', '}', '{"a": ', '"a": ', '"x"', '"y"', '"b": ', 'true', 'false', '{"a": "x"}', '{"a": "y"',
                  '}, ', ', {', '"x"}', '"y"}', ', "b": ', 'true}', 'false}', '}]', '{"a": "x", "b": true}',
                  '"', 'x', 'y', '}, {"a": "x"}', '[{"a": "x"}, {"a": "x"']
    elif case == "nested":
        pieces = ['{"l": [', '{"l": []}', ']}', '"a"', '"b"', '"a", "b"', '"b"]}', ']}, ', '}, {"l": ["', '["', '"]}',
                  '\\u0061', '\\u0062', '"a"]}, {"l": ["b', '{"l": ["a"]}']
    elif case == "pattern":
        pieces = ['"', 'a', 'b', 'aa', 'ab', 'ba', '\\u0061', '\\u0062', '\\u006', '1', '2', '"a"', '"b"',
                  '", "', '"]', '["', 'a"', 'b"', 'a", "', '"ab"', '["a", "a', '"a", "b"', 'aa"']
    else:
        pieces = ['"'] + [c for c in "abcdefghijklm"] + ['"%s"' % c for c in "abcdefghijklm"] + \
                 ['"ab"', 'ab', '", "', '"]', 'b"', 'a"', '"a", "', '["a", "b", "c"', '"a", "a"']
    pieces = list(dict.fromkeys(common + pieces))
    return xgr.TokenizerInfo(pieces + ["</s>"], stop_token_ids=[len(pieces)])


def _oracle_mask(text, vocab, stop, docs, prefixes):
    ok = {i for i, t in enumerate(vocab) if i != stop and text + t in prefixes}
    if text in docs:
        ok.add(stop)
    return ok


@pytest.mark.parametrize("case", sorted(CASES))
def test_masks_equal_the_enumerated_oracle_on_random_walks(case):
    schema, values, spell = CASES[case]
    vals = values()
    max_items = len(vals) if case != "long_enum" else 4
    docs = _documents(vals, spell, max_items)
    prefixes = _prefixes(docs)
    tok = _vocab(case, {c for d in docs for c in d})
    vocab = [b.decode() for b in tok.decoded_vocab]
    stop = tok.stop_token_ids[0]
    cg = xgr.GrammarCompiler(tok).compile_json_schema(json.dumps(schema), any_whitespace=False)
    assert "unique_search_scope" in json_schema_to_ebnf(json.dumps(schema), any_whitespace=False).ebnf
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(11)
    bm = new_bitmask(tok.vocab_size)
    finished = full = 0
    for walk in range(60):
        m = xgr.GrammarMatcher(cg)
        text = ""
        for _ in range(80):
            if m.is_terminated():
                break
            m.fill_next_token_bitmask(bm)
            got = set(allowed(bm, tok.vocab_size).tolist())
            if case == "long_enum" and text.count(",") >= 2:
                break  # (a token adds at most one item: the documents listed have up to 4)
            want = _oracle_mask(text, vocab, stop, docs, prefixes)
            assert got == want, (walk, text, sorted(vocab[i] for i in got ^ want))
            assert got, f"dead end after {text!r}"
            # lean towards long arrays: the stop token and ']' rarely
            ids = sorted(got)
            pick = [i for i in ids if i != stop and "]" not in vocab[i]] or ids
            t = rng.choice(pick if rng.random() < 0.9 else ids)
            assert m.accept_token(t), (text, vocab[t])
            if t != stop:
                text += vocab[t]
        if m.is_terminated():
            finished += 1
            doc = json.loads(text)
            assert validator.is_valid(doc), text
            full += len(doc) == len(vals)
    if case != "long_enum":
        assert finished >= 20
        assert full >= 3  # walks that used up every value


def test_numbers_compare_by_value():
    # 1, 1.0 and 10e-1 are one value (JSON Schema equality): the parser's canonical form and the search agree
    tok = xgr.TokenizerInfo(["a"])
    bounded = {"type": "array", "items": {"type": "number", "maximum": 5}, "uniqueItems": True}
    plain = {"type": "array", "items": {"type": "number"}, "uniqueItems": True}
    for schema, cases in ((bounded, (("[1, 1.0]", False), ("[0.5, 0.50]", False), ("[-0, 0]", False),
                                     ("[1.00, 1.5, 1]", False), ("[1, 1.5]", True), ("[2, 2.000, 3]", False),
                                     ("[1, 0.1]", True))),
                          (plain, (("[1, 10e-1]", False), ("[100, 1e2]", False), ("[0.5, 5E-1]", False),
                                   ("[1, 10e-2]", True), ("[1e400, 1e401]", True), ("[-0.0, 0e7]", False)))):
        cg = xgr.GrammarCompiler(tok).compile_json_schema(json.dumps(schema), any_whitespace=False)
        for text, ok in cases:
            m = xgr.GrammarMatcher(cg)
            assert (m.accept_string(text) and m.is_completed()) is ok, text


def _bench_row(id_):
    from js_helpers import bench_row
    return bench_row(id_)


@pytest.mark.parametrize("id_", ["JsonSchemaStore---artifacthub-repo", "JsonSchemaStore---chisel-slices",
                                 "JsonSchemaStore---github-funding", "JsonSchemaStore---bashly"])
def test_real_schemas_allow_every_token_of_their_valid_instances(id_):
    # qwen3 tokens, the dataset's valid instances: the search never masks a token of a valid document
    row = _bench_row(id_)
    schema = row["schema"] if isinstance(row["schema"], str) else json.dumps(row["schema"])
    assert "unique_search_scope" in json_schema_to_ebnf(schema, strict_mode=False).ebnf
    tok = tokenizer("qwen3")
    cg = xgr.GrammarCompiler(tok, cache_enabled=False).compile_json_schema(schema, strict_mode=False)
    bm = new_bitmask(tok.vocab_size)
    from tokenizers import Tokenizer
    from runtime_helpers import shared_data
    hf = Tokenizer.from_file(os.path.join(shared_data(), "tokenizers", "original", "qwen3", "tokenizer.json"))
    walked = 0
    for t in row["tests"]:
        text = json.dumps(t["data"], ensure_ascii=False)
        if not t["valid"] or not xgr.GrammarMatcher(cg).accept_string(text):
            continue  # (key order: the grammar keeps schema order)
        m = xgr.GrammarMatcher(cg)
        for tk in hf.encode(text, add_special_tokens=False).ids:
            m.fill_next_token_bitmask(bm)
            assert tk in set(allowed(bm, tok.vocab_size).tolist()), (text, hf.decode([tk]))
            assert m.accept_token(tk)
        assert m.is_completed()
        walked += 1
    assert walked >= 1


@pytest.mark.parametrize("case", sorted(CASES))
def test_accept_token_takes_exactly_the_tokens_the_mask_allows(case):
    # speculative decoding and jump-forward feed tokens without a mask: a token the mask refuses
    # because every completion of its element is a duplicate (a dead end) is refused there too
    schema, values, spell = CASES[case]
    docs = _documents(values(), spell, len(values()) if case != "long_enum" else 3)
    tok = _vocab(case, {c for d in docs for c in d})
    vocab = [b.decode() for b in tok.decoded_vocab]
    cg = xgr.GrammarCompiler(tok).compile_json_schema(json.dumps(schema), any_whitespace=False)
    rng = random.Random(5)
    bm = new_bitmask(tok.vocab_size)
    refused_by_search = 0
    for walk in range(25):
        m = xgr.GrammarMatcher(cg, max_rollback_tokens=-1)
        text = ""
        for _ in range(40):
            if m.is_terminated():
                break
            m.fill_next_token_bitmask(bm)
            got = set(allowed(bm, tok.vocab_size).tolist())
            for t in range(tok.vocab_size):
                took = m.accept_token(t)
                assert took == (t in got), (walk, text, vocab[t], took)
                if took:
                    m.rollback(1)
                elif xgr.GrammarMatcher(cg).accept_string(text + vocab[t]) is False and \
                        _prefix_of_grammar_without_uniqueness(case, text + vocab[t]):
                    refused_by_search += 1
            ids = sorted(got)
            if not ids:
                break
            pick = [i for i in ids if "]" not in vocab[i] and i != tok.stop_token_ids[0]] or ids
            t = rng.choice(pick)
            assert m.accept_token(t)
            if t != tok.stop_token_ids[0]:
                text += vocab[t]
    assert refused_by_search > 0  # (the walks met dead ends that only the search refuses)


def _prefix_of_grammar_without_uniqueness(case, text):
    schema = dict(CASES[case][0])
    schema["uniqueItems"] = False
    tok = xgr.TokenizerInfo(["a"])
    return xgr.GrammarMatcher(xgr.GrammarCompiler(tok).compile_json_schema(json.dumps(schema),
                                                                          any_whitespace=False)).accept_string(text)


def test_a_token_holding_two_equal_objects_is_refused_whatever_was_judged_before_it():
    # the objects of a token's own elements lie in text that changes from token to token at the
    # same address: they are compared afresh, never through the index of earlier values that a
    # fill keeps (csrc/parse/unique_search.c `members`). The first token leaves {"a": "x"} (one
    # member) where the second's first object, with two members, begins; both are judged on
    # their text alone (neither leaves an element that could still become an earlier value).
    pieces = ['[', ']', ', ', '{"a": "x"}, {"a": "y"}', '{"a": "y", "b": true}, {"a": "y", "b": true}',
              '{"a": "y", "b": true}, {"a": "y", "b": false}', '{"a": "y", "b": true}']
    tok = xgr.TokenizerInfo(pieces + ["</s>"], stop_token_ids=[len(pieces)])
    cg = xgr.GrammarCompiler(tok).compile_json_schema(json.dumps(OBJECTS), any_whitespace=False)
    m = xgr.GrammarMatcher(cg)
    assert m.accept_token(0)
    bm = new_bitmask(tok.vocab_size)
    for _ in range(2):  # (a second fill of the same state, its index warm)
        m.fill_next_token_bitmask(bm)
        got = {pieces[i] for i in allowed(bm, tok.vocab_size).tolist() if i < len(pieces)}
        assert got == {']', pieces[3], pieces[5], pieces[6]}, got
