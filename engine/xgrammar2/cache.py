"""The process-wide cross-grammar mask cache (XGrammar-2 paper, §3.3).

Token-mask cache entries of a rule that do not depend on the rule's context are shared by
every compiled grammar whose rule has the same canonical structure over the same
vocabulary, so a request that reuses known tools (or any JSON sub-schema) in a new
combination skips their mask computation. The cache is bounded by a byte budget (default
256 MiB) with least-recently-used eviction.
"""

from __future__ import annotations

from . import _core

__all__ = [
    "get_cross_grammar_cache_stats",
    "get_automaton_cache_stats",
    "set_cross_grammar_cache_budget",
    "clear_cross_grammar_cache",
]


def get_cross_grammar_cache_stats() -> dict:
    """Counters and size of the cross-grammar cache: ``hits``, ``misses``, ``inserts``,
    ``evictions``, ``entries``, ``bytes`` and ``budget`` (bytes)."""
    _core.require_core()
    st = _core.ffi.new("xgr_cache_stats *")
    _core.lib.xgr_cache_get_stats(st)
    return {k: int(getattr(st, k)) for k in
            ("hits", "misses", "inserts", "evictions", "entries", "bytes", "budget")}


def get_automaton_cache_stats() -> dict:
    """Counters and size of the process-wide memo of per-rule automata (determinised and
    minimised rule NFAs, keyed by structure with references renumbered): ``hits``,
    ``misses``, ``entries``, ``bytes``. A tool schema compiled in an earlier request skips
    its subset construction in the next one. Its budget is an eighth of the cross-grammar
    cache budget (at most 32 MiB); :func:`clear_cross_grammar_cache` empties it too."""
    _core.require_core()
    st = _core.ffi.new("xgr_automaton_cache_stats *")
    _core.lib.xgr_automaton_cache_get_stats(st)
    return {k: int(getattr(st, k)) for k in ("hits", "misses", "entries", "bytes")}


def set_cross_grammar_cache_budget(budget_bytes: int) -> None:
    """Sets the cache's byte budget, evicting least recently used entries down to it at
    once. 0 disables sharing (nothing is kept)."""
    if isinstance(budget_bytes, bool) or not isinstance(budget_bytes, int):
        raise TypeError(f"budget_bytes must be an int, got {type(budget_bytes).__name__}")
    if budget_bytes < 0:
        raise ValueError(f"budget_bytes must be >= 0, got {budget_bytes}")
    _core.require_core()
    _core.lib.xgr_cache_set_budget(budget_bytes)


def clear_cross_grammar_cache() -> None:
    """Drops every shared entry (grammars keep the entries they already use) and the
    automaton memo, and resets the counters."""
    _core.require_core()
    _core.lib.xgr_cache_clear()
