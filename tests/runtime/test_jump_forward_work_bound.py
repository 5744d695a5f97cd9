"""find_jump_forward_string bounds its parser work, not only its length (matcher.c
JUMP_FORWARD_MAX_ITEMS). Where the forced text leaves more pending items at every byte, the
rows it builds add up quadratically: ``("x" | "xx"){2000} "y"`` forces 2,000 x's whose rows hold
every possible unit count, ~1M items in one call (a fuzzed compiled image did the same with
8.4M items, 15 s per call under ASan). The call now stops after a bounded number of items with
the text found so far, which is still forced: the next call, after the caller accepted it, goes
on. Cheap forced text (a long literal) still comes in one call."""

from __future__ import annotations

import xgrammar2 as xgr
from runtime_helpers import compiler


def _jump_all(m: xgr.GrammarMatcher) -> list[str]:
    chunks = []
    while True:
        s = m.find_jump_forward_string()
        if not s:
            return chunks
        chunks.append(s)
        assert m.accept_string(s), f"the forced text {s[:20]!r}... was not accepted"


def test_forced_text_with_growing_rows_comes_in_bounded_chunks() -> None:
    m = xgr.GrammarMatcher(compiler("llama-2").compile_grammar('root ::= ("x" | "xx"){2000} "y"'))
    chunks = _jump_all(m)
    # 2,000 units may spell 2,000..4,000 x's: "y" is possible only from the 2,000th x on.
    assert "".join(chunks) == "x" * 2000
    assert len(chunks) > 1 and max(map(len, chunks)) < 1000, [len(c) for c in chunks]
    assert m.accept_string("y") and m.is_completed()


def test_cheap_forced_text_still_comes_in_one_call() -> None:
    m = xgr.GrammarMatcher(compiler("llama-2").compile_grammar('root ::= "a"{3000} "b" ("c" | "d")'))
    assert m.find_jump_forward_string() == "a" * 3000 + "b"
