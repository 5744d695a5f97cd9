"""The copy budget (csrc/lower/lower.c copy_budget): a reference-free rule of more than
LW_COPY_SMALL (40) estimated states that would be copied into its callers past
LW_COPY_BUDGET (1,024) states keeps its own automaton, so its states (and their mask-cache
entries) are shared by every use instead of repeated in each caller. The shape is
Github_ultra o46322's: `defs_monetary` (a number with bounded digits, ~63 states) as the
value of 111 optional properties. Rules with references stay copied (a JSON `string` kept
as its own rule made each property's first in-string mask cost ~0.1 s in Snowplow sp_345).

What is pinned: how the compiled grammar grows with the number of properties (one copy of
the value per property, or none), and exact masks (brute-force oracle) along walks through
the grammar with the value kept as its own rule."""

from __future__ import annotations

import random

import xgrammar2 as xgr
from runtime_helpers import oracle_walk, tokenizer

VOCAB = "llama-3.1"

# o46322's `defs_monetary` (minimum / maximum / multipleOf 0.01 as the converter writes it)
MONEY = ('([0-9] | [1-9] [0-9]{1,7}) ("." [0-9]{1,2} "0"*)? | "100000000" ("." "0"+)? | '
         '"-" (([0-9] | [1-9] [0-9]{1,7}) ("." [0-9]{1,2} "0"*)? | "100000000" ("." "0"+)?)')
# the same language read through a reference to a small rule: not reference-free
MONEY_WITH_REF = MONEY.replace("[1-9] [0-9]{1,7}", "[1-9] digits")
TINY = "[0-9]"


def chain(n: int, value: str) -> xgr.Grammar:
    """An object of n properties in order (a chain of rules, each referring to the next),
    each value the rule `val`."""
    lines = ['root ::= "{" ws p0 ws "}" | "{" ws "}"', "ws ::= [ \\n]*", "val ::= " + value,
             "digits ::= [0-9]{1,7}"]
    for i in range(n):
        rest = f'ws "," ws p{i + 1} | ""' if i + 1 < n else '""'
        lines.append(f'p{i} ::= "\\"k{i}\\"" ws ":" ws val q{i}')
        lines.append(f"q{i} ::= {rest}")
    return xgr.Grammar.from_ebnf("\n".join(lines))


def growth(value: str) -> int:
    """Compiled-grammar bytes added by 20 more properties (20 -> 40)."""
    comp = xgr.GrammarCompiler(tokenizer(VOCAB), cache_enabled=False)
    small, large = (comp.compile_grammar(chain(n, value)).memory_size_bytes for n in (20, 40))
    return large - small


def test_value_used_by_many_properties_is_not_copied_into_each():
    # kept as its own rule, the value adds about what a one-state value adds per property
    # (measured: 1.05x; copied into every property, as before the budget: 2.07x)
    assert growth(MONEY) < 1.3 * growth(TINY)


def test_value_with_references_is_still_copied():
    # (the exemption for rules with references: copied, it adds its states per property)
    assert growth(MONEY_WITH_REF) > 1.5 * growth(TINY)


def test_masks_exact_with_the_value_as_its_own_rule():
    tok = tokenizer(VOCAB)
    compiled = xgr.GrammarCompiler(tok, cache_enabled=False).compile_grammar(chain(30, MONEY))
    prefixes = ('{"k0":', '{"k0":12,"k1":-', '{"k0":1,"k1":99999999.5', '{"k0":1000')
    oracle_walk(compiled, tok, random.Random(36), "money chain", steps=30, walks=len(prefixes),
                prefixes=prefixes)
