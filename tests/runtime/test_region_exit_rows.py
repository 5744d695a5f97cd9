"""Loop-region entries of a string inside a long object (csrc/mask/region.c cont_walk): the
tokens that leave the string are walked on from its closing quote through the Earley parser,
whose row there holds an item per later optional property; a byte that no item of a row can
scan is refused from the row's byte set, without a scan of the row. The masks stay exact:
brute-force oracle at every step of seeded walks that start inside string values of such
objects (first visits: a fresh compiler and an emptied cross-grammar cache per grammar)."""

from __future__ import annotations

import json
import random

import pytest

import xgrammar2 as xgr
from runtime_helpers import oracle_walk, tokenizer

VOCAB = "llama-3.1"
N = 40


def _schema(kind: str) -> dict:
    props: dict = {f"p{i}": {"type": "string"} for i in range(N)}
    if kind == "mixed":  # strings between numbers, booleans and a nested object
        for i in range(0, N, 3):
            props[f"p{i}"] = {"type": "number"}
        props["p5"] = {"type": "boolean"}
        props["p7"] = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
    if kind == "required_tail":  # the last properties required: fewer ways on after a quote
        return {"type": "object", "properties": props, "required": [f"p{N - 2}", f"p{N - 1}"]}
    return {"type": "object", "properties": props}


@pytest.mark.parametrize("kind", ["strings", "mixed", "required_tail"])
def test_masks_exact_inside_strings_of_a_long_object(kind):
    tok = tokenizer(VOCAB)
    xgr.clear_cross_grammar_cache()
    compiled = xgr.GrammarCompiler(tok, cache_enabled=False).compile_json_schema(json.dumps(_schema(kind)))
    prefixes = ('{"p1":"', '{"p1":"a","p2":"', '{"p4":"x', '{"p8":"', '{"p37":"ab')
    if kind == "mixed":
        prefixes = ('{"p1":"', '{"p2":"a","p4":"', '{"p7":{"a":"', '{"p8":"', '{"p38":"ab')
    oracle_walk(compiled, tok, random.Random(f"region-{kind}"), kind, steps=12, walks=len(prefixes),
                prefixes=prefixes)
