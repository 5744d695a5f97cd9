"""An enumerated uniqueItems array (Emitter.unique_array: one grammar state per set of values
used) is built exactly when its states fit STATE_LIMIT; past it the run-time search takes the
array (search_unique_array). For arrays without prefixItems the count is known before the
build (the start and every set of 1..limit values), so a too-large automaton is no longer
built up to the limit and thrown away (JsonSchemaStore asconfig: 124 -> 3 ms, same EBNF)."""

from __future__ import annotations

import math
import re

import pytest

from js_helpers import check
from xgrammar2.json_schema import _cache, emit, json_schema_to_ebnf


def _schema(n_values, max_items=None):
    s = {"type": "array", "uniqueItems": True, "items": {"enum": [f"v{i}" for i in range(n_values)]}}
    if max_items is not None:
        s["maxItems"] = max_items
    return s


@pytest.mark.parametrize("n_values,max_items,state_limit", [
    (5, None, 40), (6, None, 40), (6, 2, 40), (7, 2, 40), (7, 3, 40), (8, 2, 40),
    (6, 3, 40), (6, 3, 41)])  # (the last two: 42 states, one past the limit and exactly at it)
def test_enumerated_automaton_is_built_exactly_when_its_states_fit(monkeypatch, n_values, max_items, state_limit):
    monkeypatch.setattr(emit, "STATE_LIMIT", state_limit)
    _cache.clear()  # (the conversion memo does not know the limit)
    limit = n_values if max_items is None else max_items
    states = 1 + sum(math.comb(n_values, k) for k in range(1, limit + 1))
    ebnf = json_schema_to_ebnf(_schema(n_values, max_items)).ebnf
    built = re.search(r"__u\d+ ::=", ebnf) is not None
    assert built == (states <= state_limit + 1), (states, ebnf[:400])
    assert ("unique_search_scope" in ebnf) == (not built)
    # either way the array refuses a repeated value
    if limit >= 2:
        check(_schema(n_values, max_items), good=['["v0","v1"]', "[]"], bad=['["v0","v0"]', '["v9x"]'])


def test_twelve_values_go_to_the_search_without_building():
    calls = []
    orig = emit.Emitter.search_unique_array

    def spy(self, *a, **kw):
        calls.append(a[-1])
        return orig(self, *a, **kw)

    emit.Emitter.search_unique_array = spy
    _cache.clear()
    try:
        ebnf = json_schema_to_ebnf(_schema(12)).ebnf
    finally:
        emit.Emitter.search_unique_array = orig
    assert calls == ["uniqueItems automaton too large"] and not re.search(r"__u\d+ ::=", ebnf)
