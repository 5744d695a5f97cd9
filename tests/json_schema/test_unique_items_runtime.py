"""uniqueItems over strings without maxLength or pattern and integers without an upper bound,
enforced by the parser as each item completes (csrc/parse/unique.h): whole documents agree with jsonschema, masks with the
brute-force oracle at every step (also with tokens that close one item and open the next),
no walk reaches a dead end, and item kinds whose values can run out are still refused."""

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
from runtime_helpers import allowed, masks_equal_oracle, new_bitmask, tokenizer  # noqa: E402

from js_helpers import assert_exact  # noqa: E402

TAGS = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
SCHEMAS = {
    "tags": TAGS,
    "bounded": {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True,
                "minItems": 1, "maxItems": 4},
    "ref_prefix": {"$defs": {"s": {"type": "string"}}, "type": "array", "prefixItems": [{"$ref": "#/$defs/s"}],
                   "items": {"type": "string"}, "uniqueItems": True},
    "ints": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
    "ints_min": {"type": "array", "items": {"type": "integer", "minimum": 1}, "uniqueItems": True, "maxItems": 5},
    "nested": {"type": "object", "properties": {"a": TAGS, "b": {"type": "array", "items": TAGS, "uniqueItems": False}},
               "required": ["a", "b"], "additionalProperties": False},
}
# spellings of equal values: JSON equality decodes escapes
POOL = ["a", "b", "", "ab", "é"]


def _texts(x):
    """json.dumps and a spelling with every 'a' escaped (the same value)."""
    t = json.dumps(x, ensure_ascii=False)
    return [t, t.replace("a", "\\u0061")]


@pytest.mark.parametrize("name", ["tags", "bounded", "ref_prefix"])
def test_whole_arrays_agree_with_jsonschema(name):
    schema = SCHEMAS[name]
    grid = [list(t) for n in range(5) for t in itertools.product(POOL[:4], repeat=n)]
    assert_exact(schema, grid, texts=_texts)


@pytest.mark.parametrize("name", ["ints", "ints_min"])
def test_integer_arrays_agree_with_jsonschema(name):
    grid = [list(t) for n in range(4) for t in itertools.product([0, 1, 12, -1], repeat=n)]
    assert_exact(SCHEMAS[name], grid, texts=lambda x: [json.dumps(x)])


def _digit_vocab():
    # "1" may complete an item and still go on ("12"): tokens after it must not rely on it
    pieces = ['[', ']', '0', '1', '2', '12', '21', ', ', '1, ', '-', '-1', '1]', ', 1', '1, 1', '0]', '2, ', ',', ' ']
    return xgr.TokenizerInfo(pieces + ["</s>"], stop_token_ids=[len(pieces)])


@pytest.mark.parametrize("name", ["ints", "ints_min"])
def test_integer_masks_equal_the_oracle(name):
    tok = _digit_vocab()
    vocab = [b.decode() for b in tok.decoded_vocab]
    cg = xgr.GrammarCompiler(tok).compile_json_schema(json.dumps(SCHEMAS[name]), any_whitespace=False)
    bm = new_bitmask(tok.vocab_size)
    m = xgr.GrammarMatcher(cg)
    assert m.accept_string("[1, 2, 1")
    m.fill_next_token_bitmask(bm)
    ok = {vocab[i] for i in allowed(bm, tok.vocab_size).tolist()}
    # "1" repeats the first item unless a digit follows ("11]", "10]")
    assert {"2", "1]", "0]", "1, 1"} <= ok and not {", ", "]", ","} & ok, ok
    _oracle_walks(cg, tok, SCHEMAS[name], seed=3, steps=30)


def test_a_refused_item_that_goes_on_does_not_open_the_separator():
    # the element's digits in its own rule: a cache entry in the array's context would take
    # ", " after a refused "1" (the row lives on as "1" may become "12")
    g = xgr.Grammar.from_ebnf('root ::= arr\narr[unique_scope] ::= "[" (el (", " el)*)? "]"\n'
                              'el[unique] ::= "0" | [1-9] [0-9]*\n')
    tok = _digit_vocab()
    vocab = [b.decode() for b in tok.decoded_vocab]
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(tok).compile_grammar(g))
    bm = new_bitmask(tok.vocab_size)
    assert m.accept_string("[1, 2, 1")
    m.fill_next_token_bitmask(bm)
    ok = {vocab[i] for i in allowed(bm, tok.vocab_size).tolist()}
    assert {"2", "1]", "0]", "1, 1"} <= ok and not {", ", "]", ","} & ok, ok
    good, why = masks_equal_oracle(m, tok.vocab_size)
    assert good, why


def test_nested_arrays_are_separate_scopes():
    grid = [{"a": a, "b": b} for a in (["x"], ["x", "x"], ["x", "y"])
            for b in ([], [["x"]], [["x", "x"]], [["x"], ["x"]], [["x", "y"], ["y", "x"]])]
    assert_exact(SCHEMAS["nested"], grid, strict_mode=False)


def _oracle_walks(cg, tok, schema, seed, steps, walks=40):
    """Seeded random walks over every allowed token: before each token the mask equals the
    brute-force oracle and is not empty; at least 10 walks end, each with a text that
    jsonschema takes."""
    rng = random.Random(seed)
    vocab = [b.decode() for b in tok.decoded_vocab]
    validator = jsonschema.Draft202012Validator(schema)
    bm = new_bitmask(tok.vocab_size)
    finished = 0
    for walk in range(walks):
        m = xgr.GrammarMatcher(cg)
        text = ""
        for _ in range(steps):
            good, why = masks_equal_oracle(m, tok.vocab_size)
            assert good, f"walk {walk} after {text!r}: {why}"
            if m.is_terminated():
                break
            m.fill_next_token_bitmask(bm)
            ids = allowed(bm, tok.vocab_size).tolist()
            assert ids, f"dead end after {text!r}"
            t = rng.choice(ids)
            assert m.accept_token(t), (text, t)
            if t not in tok.stop_token_ids:
                text += vocab[t]
        if m.is_terminated():
            finished += 1
            assert validator.is_valid(json.loads(text)), text
    assert finished >= 10


def _small_vocab():
    # pieces that open, close and chain items, so duplicates come up often in a walk
    pieces = ['[', ']', '"', 'a', 'b', 'ab', '\\u0061', '", "', '","', '"]', '["', '"a"', '"a",', 'a"', 'b"',
              'a", "', 'b", "a"', '", "a"', '"b"]', ' ', ', ', ',', '{', '}', '"a": ', '"b": ', ':',
              '"a", "a"', '"a", "b"', '["a", "a', '["a", "a"]']
    return xgr.TokenizerInfo(pieces + ["</s>"], stop_token_ids=[len(pieces)])


@pytest.mark.parametrize("name", ["tags", "bounded", "nested"])
def test_masks_equal_the_oracle_on_walks_that_repeat_items(name):
    tok = _small_vocab()
    cg = xgr.GrammarCompiler(tok).compile_json_schema(json.dumps(SCHEMAS[name]), any_whitespace=False)
    _oracle_walks(cg, tok, SCHEMAS[name], seed=7, steps=40)


def test_a_token_holding_two_equal_items_is_masked_before_any_item():
    tok = _small_vocab()
    vocab = [b.decode() for b in tok.decoded_vocab]
    cg = xgr.GrammarCompiler(tok).compile_json_schema(json.dumps(SCHEMAS["tags"]), any_whitespace=False)
    m = xgr.GrammarMatcher(cg)
    bm = new_bitmask(tok.vocab_size)
    m.fill_next_token_bitmask(bm)
    ok = {vocab[i] for i in allowed(bm, tok.vocab_size).tolist()}
    assert '["a", "a' in ok and '["a", "a"]' not in ok
    assert m.accept_string("[")
    m.fill_next_token_bitmask(bm)
    ok = {vocab[i] for i in allowed(bm, tok.vocab_size).tolist()}
    assert '"a", "b"' in ok and '"a", "a"' not in ok


def test_duplicate_closing_tokens_are_masked_on_a_real_vocabulary():
    tok = tokenizer("llama-3.1")
    vocab = [b.decode(errors="replace") for b in tok.decoded_vocab]
    closing = {i for i, t in enumerate(vocab) if t in ('"', '",', '"]', '"],', '",\n')}
    quote_first = {i for i, t in enumerate(vocab) if t.startswith('"')}
    assert len(closing) >= 4
    cg = xgr.GrammarCompiler(tok).compile_json_schema(json.dumps(SCHEMAS["nested"]))
    m = xgr.GrammarMatcher(cg)
    bm = new_bitmask(tok.vocab_size)
    assert m.accept_string('{"a": ["alpha", "", "beta", "gam')
    m.fill_next_token_bitmask(bm)
    ok_ids = set(allowed(bm, tok.vocab_size).tolist())
    assert closing <= ok_ids  # "gam" is new: it may be closed
    for prefix, dup in (('ma", "beta', "beta"), ('2", "', ""), ('x", "\\u0062eta', "beta")):
        assert m.accept_string(prefix), prefix
        ok, why = masks_equal_oracle(m, tok.vocab_size)
        assert ok, why
        m.fill_next_token_bitmask(bm)
        ok_ids = set(allowed(bm, tok.vocab_size).tolist())
        # closing the string now would repeat an earlier item: no token starting with a quote
        assert not ok_ids & quote_first, (dup, [vocab[i] for i in sorted(ok_ids & quote_first)][:8])
        assert ok_ids, dup  # but the item can go on
    assert m.accept_string('s"], "b": []}')


def test_rollback_forgets_items_past_the_rollback_point():
    tok = tokenizer("llama-3.1")
    cg = xgr.GrammarCompiler(tok).compile_json_schema(json.dumps(TAGS))
    m = xgr.GrammarMatcher(cg, max_rollback_tokens=16)
    for piece in ['["', 'x', '",', ' "', 'y', '",', ' "']:
        assert m.accept_string(piece) if len(piece) > 2 else m.accept_token(_one_token(tok, piece)), piece
    assert not m.accept_string('y"')
    m.rollback(4)  # back to after '["x",': "y" was never an item
    assert m.accept_string(' "z", "y"]')


def _one_token(tok, s):
    return [i for i, b in enumerate(tok.decoded_vocab) if b == s.encode()][0]


def test_item_kinds_that_can_run_out_are_searched_or_refused():
    # values that can run out before they complete: the run-time search (test_unique_items_search.py)
    kinds = ({"type": "string", "maxLength": 3}, {"type": "string", "pattern": "^[ab]+$"},
             {"type": "object"}, {"type": "number"}, {"type": "integer", "maximum": 100},
             {"type": "integer", "minimum": -5}, {"type": "integer", "multipleOf": 3},
             {"anyOf": [{"type": "string"}, {"type": "null"}]})
    for items in kinds:
        ebnf = json_schema_to_ebnf({"type": "array", "items": items, "uniqueItems": True}).ebnf
        assert "[unique_search_scope]" in ebnf and "[unique]" in ebnf, items
        # two distinct values needed: one element at a time cannot tell whether they exist
        with pytest.raises(UnsupportedSchemaError, match="uniqueItems.*minItems 2"):
            json_schema_to_ebnf({"type": "array", "items": items, "uniqueItems": True, "minItems": 2})
    # one searched array inside an element of another (test_unique_items_search.py "nested")
    inner = {"type": "array", "items": {"type": "object"}, "uniqueItems": True}
    ebnf = json_schema_to_ebnf({"type": "array", "items": {"type": "object", "properties": {"l": inner}},
                                "uniqueItems": True}).ebnf
    assert ebnf.count("[unique_search_scope]") == 2


def test_printed_grammar_keeps_the_attributes():
    ebnf = json_schema_to_ebnf(TAGS).ebnf
    assert "[unique_scope]" in ebnf and "[unique]" in ebnf
    g = xgr.Grammar.from_ebnf(ebnf)
    assert str(g).count("[unique") == 2
    assert xgr.Grammar.from_ebnf(str(g)).__str__() == str(g)
    searched = json_schema_to_ebnf({"type": "array", "items": {"type": "object"}, "uniqueItems": True}).ebnf
    assert xgr.Grammar.from_ebnf(searched).__str__().count("[unique_search_scope]") == 1
    for bad in ('root[unique, unique_scope] ::= "a"', 'root[unique_scope, unique_search_scope] ::= "a"', 'root[unique=1] ::= "a"', 'root[unique, unique] ::= "a"',
                'root[unique_scope=x] ::= "a"'):
        with pytest.raises(Exception, match="line 1, column"):
            xgr.Grammar.from_ebnf(bad)
