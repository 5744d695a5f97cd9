"""States with both byte edges and reference edges (csrc/mask/walk.c xgr_walk_refs_to_callees).

After `{"` of an object with named properties and additionalProperties, the state has a
listed name's byte edge and a reference to the key rule. Its vocabulary pass used to hand the
whole walk to the Earley parser at the first byte (every token through the parser, the key
rule's own item skipped as covered: ~8 ms per first mask on Qwen3); it now walks the byte edges
alone at the first byte and leaves the reference to the callee's predicted item, which keeps
its own entry (cover.c no longer counts such a state as covering). The masks must stay exact:
each grammar is checked against the brute-force oracle at its first mask and along seeded
walks, on two real vocabularies, with the callee rules kept as their own automata."""

from __future__ import annotations

import gzip
import json
import os
import random

import pytest

import xgrammar2 as xgr
from runtime_helpers import masks_equal_oracle, new_bitmask, oracle_walk, shared_data, tokenizer

VOCABS = ["qwen3", "llama-3.1"]

# A JSON-string key body as one automaton (no references): the additionalProperties key.
KEY = r'''
key ::= ([^\x00-\x1f"\\] | "\\" ["/\\bfnrt] | "\\u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])* "\""
'''
NUM = r'''
num ::= "-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [+-]? [0-9]+)?
'''

GRAMMARS = {
    # the repro: one listed name beside the key rule
    "repro": r'root ::= "{\"" (key | "employee\"") ":1}"' + KEY,
    # several byte alternatives (sharing first bytes with the key) and two references
    "several": r'''
root ::= "{\"" (key | "employee\"" | "e\"" | "id\"" | "\\u00e9\"" | num "\"") ":" ("1" | "\"" key) "}"
''' + KEY + NUM,
    # nested and recursive: obj's own value position mixes bytes with a reference to obj
    "nested": r'''
root ::= obj
obj ::= "{\"" (key | "employee\"" | "x\"") ":" (obj | num | "[" obj ("," obj)* "]" | "null") "}"
''' + KEY + NUM,
    # a recursive callee whose start has byte edges only
    "recursive_callee": r'''
root ::= "<" (rec | "xx" | "\"q") ">"
rec ::= "x" rec "y" | "\"" key | "z"
''' + KEY,
    # a nullable callee: the item after the reference is in the row beside the callee's
    "nullable_callee": r'''
root ::= "<" (opt | "ab" | "zz") ">"
opt ::= ([a-f] [0-9]? | "q" [a-f] [a-f])*
''',
    # bounded repetitions around the mixed state
    "bounded": r'''
root ::= "[" item{1,3} "]" | item{2,4}
item ::= "{\"" (key | "employee\"" | "id\"") ":" ("1" | "\"" key) "}" ","?
''' + KEY,
}

PREFIXES = {
    "repro": ('{"', '{"em', '{"employee'),
    "several": ('{"', '{"e', '{"1', '{"\\u'),
    "nested": ('{"', '{"x":', '{"a":{"', '{"a":[{"'),
    "recursive_callee": ('<', '<x', '<xx', '<x"'),
    "nullable_callee": ('<', '<a', '<q'),
    "bounded": ('[', '[{"', '{"a":1}{"', '[{"id":1},{"'),
}


def _compiler(vocab: str, inline: int) -> xgr.GrammarCompiler:
    # a fresh compiler (no entry of another test's grammar reused); the small rules kept as
    # their own automata so the state after the prefix has byte and reference edges
    return xgr.GrammarCompiler(tokenizer(vocab), cache_enabled=False, inline_max_states=inline)


@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("inline", [4, -1])
@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_first_masks_at_mixed_states_equal_bruteforce(name: str, inline: int, vocab: str) -> None:
    """The first mask after each prefix (a fresh grammar and cross-grammar cache each time:
    the first visit is what the change walks differently) equals the oracle's."""
    tok = tokenizer(vocab)
    for prefix in PREFIXES[name]:
        xgr.clear_cross_grammar_cache()
        compiled = _compiler(vocab, inline).compile_grammar(GRAMMARS[name])
        m = xgr.GrammarMatcher(compiled)
        assert m.accept_string(prefix), prefix
        ok, why = masks_equal_oracle(m, tok.vocab_size)
        assert ok, f"{name} inline={inline} {vocab} after {prefix!r}: {why}"


@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_walks_through_mixed_states_equal_bruteforce(name: str, vocab: str) -> None:
    xgr.clear_cross_grammar_cache()
    compiled = _compiler(vocab, 4).compile_grammar(GRAMMARS[name])
    oracle_walk(compiled, tokenizer(vocab), random.Random(f"{name}-{vocab}"), name, 10, walks=3,
                prefixes=PREFIXES[name])


def test_callee_entry_is_shared_after_a_mixed_first_mask() -> None:
    """The key rule's item gets its own (cross-grammar) entry at the mixed state: a second
    grammar that reaches the same key rule finds it in the cache. Before, the mixed state's
    walk covered the key's item through the parser and no key entry was built (the second
    grammar missed)."""
    tok = tokenizer("qwen3")
    xgr.clear_cross_grammar_cache()

    def first_mask(src: str) -> dict:
        m = xgr.GrammarMatcher(_compiler("qwen3", 4).compile_grammar(src))
        assert m.accept_string('{"')
        m.fill_next_token_bitmask(new_bitmask(tok.vocab_size))
        return dict(xgr.get_cross_grammar_cache_stats())

    first_mask(GRAMMARS["repro"])
    before = first_mask(GRAMMARS["repro"])  # (the same grammar again: its entries are hits)
    after = first_mask(r'root ::= "{\"" key ":2}"' + KEY)
    assert after["misses"] == before["misses"], (before, after)
    assert after["hits"] > before["hits"], (before, after)


def _o42286() -> dict:
    path = os.path.join(shared_data(), "jsonschemabench", "Github_medium.jsonl.gz")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if '"Github_medium---o42286"' in line:
                rec = json.loads(line)
                if rec["id"] == "Github_medium---o42286":
                    return rec
    pytest.skip("Github_medium---o42286 not in the data")


@pytest.mark.parametrize("vocab", VOCABS)
def test_o42286_masks_along_a_valid_instance_equal_bruteforce(vocab: str) -> None:
    """The schema of the issue: named properties beside additionalProperties, whose key
    state mixes a listed name's byte edge with the key trie's reference. Every mask along
    the first 64 bytes of a valid instance (the `{"` key states of `root`, `employees` and
    an `Employee` included) is exact."""
    rec = _o42286()
    text = next(json.dumps(t["data"], separators=(",", ":")) for t in rec["tests"] if t.get("valid"))
    tok = tokenizer(vocab)
    xgr.clear_cross_grammar_cache()
    compiled = xgr.GrammarCompiler(tok, cache_enabled=False).compile_json_schema(json.dumps(rec["schema"]))
    m = xgr.GrammarMatcher(compiled)
    for i, ch in enumerate(text[:64]):
        ok, why = masks_equal_oracle(m, tok.vocab_size)
        assert ok, f"{vocab} at {text[:i]!r}: {why}"
        assert m.accept_string(ch), f"rejected {ch!r} after {text[:i]!r}"
