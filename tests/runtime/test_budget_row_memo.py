"""Grammars with character budgets keep the row and verdict memos in rows outside every
budgeted occurrence (runtime/matcher.c ``memo_row``): there a row's mask depends on its
items alone, so a later row with the same items (the next element of a list, after a
budgeted string closed with a different number of characters left) may reuse it. Inside an
occurrence the memos stay off (the characters left decide). The long tokens that may enter
a budgeted rule and overrun it are still decided exactly (``check_attr_tokens``, which now
reads only the tokens longer than the limit).

Exactness is checked against the brute-force mask (every token run through the parser)
before every token of seeded walks that pass the same budget-free rows many times with
different budget histories, on real vocabularies (long tokens: qwen3 has tokens of 100+
bytes, longer than the budgets here)."""

from __future__ import annotations

import json
import random

import pytest

import xgrammar2 as xgr
from runtime_helpers import masks_equal_oracle, one_char_tokens, oracle_walk, tokenizer

# A list of records whose name is a budgeted run of letters and spaces; the budget-free rows
# (after '[', after ',', after a record's name) repeat across records with the budget spent
# to different depths.
LIST_EBNF = r"""
root ::= "[" rec ("," rec)* "]"
rec ::= "{\"name\":\"" name "\",\"n\":" [0-9] [0-9]? "}"
name[max_chars=6] ::= [a-z ] [a-z ]*
"""

# The same shape with a decoded budget over JSON-string spellings (the converter's
# max_json_chars strings) and a longer budget.
JSON_EBNF = r"""
root ::= "[" rec ("," rec)* "]"
rec ::= "{\"s\":\"" body "\"}"
body[max_json_chars=12] ::= ch*
ch ::= [a-z ] | "\\" ["\\/bfnrt] | "\\u00" [0-9a-f] [0-9a-f]
"""

# A JSON schema whose pattern x maxLength product is past the converter's product limit:
# the budget path (emit.py _budget_string), items of a list.
SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"w": {"type": "string", "pattern": "^(?:[a-z]+ ){0,40}[a-z]+$", "maxLength": 150}},
        "required": ["w"],
        "additionalProperties": False,
    },
}


def _compiled(vocab: str, source: str) -> xgr.CompiledGrammar:
    return xgr.GrammarCompiler(tokenizer(vocab), cache_enabled=False).compile_grammar(source)


@pytest.mark.parametrize("vocab", ["qwen3", "llama-2"])
@pytest.mark.parametrize("name", ["list", "json"])
def test_budget_grammar_masks_equal_oracle_along_walks(vocab: str, name: str) -> None:
    compiled = _compiled(vocab, LIST_EBNF if name == "list" else JSON_EBNF)
    oracle_walk(compiled, tokenizer(vocab), random.Random(f"budget-memo-{name}-{vocab}"), f"{name}/{vocab}",
                steps=45, walks=2)


@pytest.mark.parametrize("vocab", ["qwen3", "llama-2"])
def test_repeated_budget_free_rows_after_different_budget_histories(vocab: str) -> None:
    """One character per token: the rows after '{"name":"' recur with the budget fresh, and
    the rows after '","n":' recur after names of 1..6 characters; each mask equals the
    oracle's (a memo row reused inside an occurrence, or one stored with a budget open,
    would allow a seventh letter or refuse a valid one)."""
    compiled = _compiled(vocab, LIST_EBNF)
    one = one_char_tokens(vocab)
    m = xgr.GrammarMatcher(compiled)
    n = tokenizer(vocab).vocab_size
    text = "["
    for k, name in enumerate(["a", "abcdef", "ab", "abcdef", "a b c", "x", "abcdef"]):
        piece = ("," if k else "") + '{"name":"' + name + '","n":' + str(k) + "}"
        text += piece
    text += "]"
    for i, ch in enumerate(text):
        ok, why = masks_equal_oracle(m, n)
        assert ok, f"{vocab} before {text[:i]!r}+{ch!r}: {why}"
        assert m.accept_token(one[ch]), (text[:i], ch)
    assert m.is_terminated() or m.accept_token(tokenizer(vocab).stop_token_ids[0])


@pytest.mark.parametrize("vocab", ["qwen3"])
def test_budgeted_schema_string_list_masks_equal_oracle(vocab: str) -> None:
    compiled = xgr.GrammarCompiler(tokenizer(vocab), cache_enabled=False).compile_json_schema(
        json.dumps(SCHEMA), any_whitespace=False)
    assert "max_json_chars=150" in str(compiled.grammar) or "max_chars=150" in str(compiled.grammar)
    # (any_whitespace=False keeps upstream's separators ", " and ": ")
    prefixes = ('[{"w": "ab cd"}, {"w": "', '[{"w": "' + "abc " * 30 + 'x"}, {"w": "ab')
    oracle_walk(compiled, tokenizer(vocab), random.Random("budget-memo-schema"), "schema", steps=40, walks=2,
                prefixes=prefixes)
