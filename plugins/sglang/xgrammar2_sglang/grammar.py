"""``XGrammar2Grammar``: SGLang's per-request grammar object over an xgrammar2 matcher.

Semantics follow SGLang's built-in xgrammar object, which the scheduler, the overlap
scheduler, speculative decoding (``spec_utils.traverse_tree``) and the reasoner wrapper rely
on:

* ``accept_token`` raises ``ValueError`` on a rejected (or out-of-vocabulary) token -- the
  only exception type the scheduler turns into a per-request abort -- and is a no-op once the
  matcher has terminated;
* ``is_terminated`` becomes true only after a stop token was accepted where the grammar may
  end; ``rollback(k)`` undoes k accepted tokens (history of ``MAX_ROLLBACK_TOKENS``);
* masks use the XGrammar int32 layout; ``fill_vocab_mask`` overwrites the whole row of a
  CPU mask; ``fill_vocab_mask_batched`` fills all xgrammar2 rows of a batch in one native
  call (thread pool in the C core, GIL released);
* ``copy()`` is a fresh matcher at the initial state sharing the compiled grammar.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any, List, Optional, Tuple

import torch
import xgrammar2 as xgr2
from xgrammar2.envvars import env_int
from sglang.srt.constrained.base_grammar_backend import BaseGrammarObject, GrammarRow, GrammarStats

from . import masks

logger = logging.getLogger("sglang.xgrammar2_sglang")

__all__ = ["XGrammar2Grammar", "MAX_ROLLBACK_TOKENS"]

#: Rollback history per matcher (SGLang's xgrammar backend keeps the same).
MAX_ROLLBACK_TOKENS = 200


def _fill_threads() -> int:
    return env_int("XGRAMMAR2_SGLANG_FILL_THREADS", max(1, min((os.cpu_count() or 2) // 2, 8)),
                   minimum=1, logger=logger)


class XGrammar2Grammar(BaseGrammarObject):
    """One request's grammar state: an xgrammar2 ``GrammarMatcher`` plus what SGLang reads."""

    def __init__(
        self,
        matcher: "xgr2.GrammarMatcher",
        vocab_size: int,
        ctx: "xgr2.CompiledGrammar",
        override_stop_tokens: Optional[List[int]],
        key_string: Optional[str] = None,
        grammar_stats: Optional[GrammarStats] = None,
    ) -> None:
        super().__init__()
        self.matcher = matcher
        self.vocab_size = vocab_size
        self.ctx = ctx
        self.override_stop_tokens = override_stop_tokens
        self.key_string = key_string
        self.grammar_stats = grammar_stats
        self.num_accepted = 0

    @classmethod
    def from_compiled(
        cls,
        ctx: "xgr2.CompiledGrammar",
        vocab_size: int,
        override_stop_tokens: Optional[List[int]] = None,
        key_string: Optional[str] = None,
        grammar_stats: Optional[GrammarStats] = None,
    ) -> "XGrammar2Grammar":
        """A grammar object at the initial state of ``ctx``."""
        matcher = xgr2.GrammarMatcher(
            ctx, override_stop_tokens=override_stop_tokens, max_rollback_tokens=MAX_ROLLBACK_TOKENS
        )
        return cls(matcher, vocab_size, ctx, override_stop_tokens, key_string, grammar_stats)

    # ---- stepping -------------------------------------------------------------------------

    def accept_token(self, token: int) -> None:
        """Advances over ``token``. Raises ValueError when the grammar rejects it."""
        if self.matcher.is_terminated():
            return
        self.current_token = token
        try:
            ok = self.matcher.accept_token(token)
        except (ValueError, OverflowError, TypeError) as e:
            raise ValueError(f"xgrammar2: token {token!r} is not a valid token id: {e}") from None
        if not ok:
            raise ValueError(
                f"xgrammar2: the grammar rejected token {token} after {self.num_accepted} "
                f"accepted token(s) (key: {_short(self.key_string)})"
            )
        self.num_accepted += 1

    def rollback(self, k: int) -> None:
        """Undoes the last ``k`` accepted tokens."""
        if k <= 0:
            return
        self.matcher.rollback(k)
        self.num_accepted = max(0, self.num_accepted - k)

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    # ---- masks ----------------------------------------------------------------------------

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device: Any) -> torch.Tensor:
        return masks.allocate_vocab_mask(vocab_size, batch_size, device)

    def fill_vocab_mask(self, vocab_mask: torch.Tensor, idx: int) -> None:
        if self.matcher.is_terminated():
            # as fill_vocab_mask_batched: a finished grammar's row allows everything (the
            # matcher itself has no mask after the stop token)
            vocab_mask[idx].fill_(-1)
            return
        self.matcher.fill_next_token_bitmask(vocab_mask, idx)

    @staticmethod
    def fill_vocab_mask_batched(entries: List[GrammarRow], vocab_mask: torch.Tensor) -> None:
        """Fills the listed rows (unlisted rows stay untouched). Rows whose grammar is an
        xgrammar2 object -- directly, or inside SGLang's reasoner wrapper once the reasoning
        is over -- are filled in one native call; any other grammar fills its own row."""
        native: List[Tuple[int, "xgr2.GrammarMatcher"]] = []
        others: List[GrammarRow] = []
        for entry in entries:
            inner = _native_target(entry.grammar)
            if inner is None:
                others.append(entry)
            elif inner.matcher.is_terminated():
                vocab_mask[entry.row].fill_(-1)
            else:
                native.append((entry.row, inner.matcher))
        if len(native) == 1:
            row, m = native[0]
            m.fill_next_token_bitmask(vocab_mask, row)
        elif native:
            if vocab_mask.is_contiguous() and len({id(m) for _, m in native}) == len(native):
                xgr2.fill_next_token_bitmask_batch(
                    [m for _, m in native], vocab_mask, [r for r, _ in native],
                    max_threads=min(_fill_threads(), len(native)),
                )
            else:
                for row, m in native:
                    m.fill_next_token_bitmask(vocab_mask, row)
        for entry in others:
            entry.grammar.fill_vocab_mask(vocab_mask, entry.row)

    @staticmethod
    def move_vocab_mask(vocab_mask: torch.Tensor, device: Any) -> torch.Tensor:
        return masks.move_vocab_mask(vocab_mask, device)

    @staticmethod
    def apply_vocab_mask(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
        masks.apply_vocab_mask(logits, vocab_mask)

    # ---- copies and (unused in SGLang 0.5.23) jump-forward --------------------------------

    def copy(self) -> "XGrammar2Grammar":
        """A fresh object at the initial state sharing the compiled grammar (cache hits)."""
        stats = self.grammar_stats
        if stats is not None:
            stats = dataclasses.replace(stats, is_cache_hit=True, tree_traversal_time=[])
        return XGrammar2Grammar.from_compiled(
            self.ctx, self.vocab_size, self.override_stop_tokens, self.key_string, stats
        )

    def try_jump_forward(self, tokenizer: Any) -> Optional[Tuple[List[int], str]]:
        s = self.matcher.find_jump_forward_string()
        return ([], s) if s else None

    def jump_forward_str_state(self, helper: Tuple[List[int], str]) -> Tuple[str, int]:
        return helper[1], -1

    def jump_and_retokenize(self, old_output_ids: List[int], new_output_ids: List[int], next_state: int) -> None:
        k = 0
        for old, new in zip(old_output_ids, new_output_ids):
            if old != new:
                break
            k += 1
        if k < len(old_output_ids):
            self.rollback(len(old_output_ids) - k)
        for t in new_output_ids[k:]:
            self.accept_token(t)

    def __repr__(self) -> str:
        return (
            f"XGrammar2Grammar(key={_short(self.key_string)!r}, accepted={self.num_accepted}, "
            f"terminated={self.is_terminated()})"
        )


def _native_target(grammar: Any) -> Optional[XGrammar2Grammar]:
    """The xgrammar2 object whose row ``grammar.fill_vocab_mask`` would write unchanged, or
    None when the grammar has its own filling logic (e.g. a reasoner wrapper still thinking)."""
    if type(grammar) is XGrammar2Grammar:
        return grammar
    inner = getattr(grammar, "grammar", None)
    if type(inner) is not XGrammar2Grammar or type(grammar).__name__ != "ReasonerGrammarObject":
        return None
    try:
        # ReasonerGrammarObject.fill_vocab_mask in SGLang 0.5.23: after the reasoning (and with
        # the grammar not covering it) the row is exactly the inner grammar's row.
        if not grammar.reasoning_in_grammar and grammar._is_generation():  # noqa: SLF001
            return inner
    except Exception:  # noqa: BLE001 - changed internals: let the wrapper fill its row
        return None
    return None


def _short(s: Optional[str], n: int = 120) -> str:
    if s is None:
        return "<none>"
    return s if len(s) <= n else s[:n] + "..."
