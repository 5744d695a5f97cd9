"""Background precomputation of token-mask cache entries (XGrammar-2 paper, §3.5).

An engine compiles a request's grammar before the request is scheduled, then runs its
prefill; the mask entries the first decoding steps need are built just in time. A
:class:`BackgroundPrecompute` builds the K most expensive of them on one daemon thread in
the meantime (the core releases the GIL), so the first steps find them ready.

Each compiled grammar is precomputed at most once (a cache hit hands back the same object).
The queue is bounded: under a burst of new grammars the oldest waiting one is dropped, and
its entries are built on first use, as without this hook. The queue holds weak references,
so a grammar whose request is gone is not kept alive for it.
"""

from __future__ import annotations

import collections
import logging
import threading
import weakref
from typing import TYPE_CHECKING, Deque, Optional, Tuple

if TYPE_CHECKING:  # pragma: no cover
    from .compiled_grammar import CompiledGrammar

__all__ = ["BackgroundPrecompute", "check_k"]

logger = logging.getLogger(__name__)


def check_k(k: object) -> int:
    """``k`` for ``precompute``: an int (0 = nothing, < 0 = every entry); TypeError otherwise."""
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k must be an int, got {type(k).__name__}")
    return k


class BackgroundPrecompute:
    """A queue of ``CompiledGrammar.precompute(k)`` calls served by one daemon thread.

    Thread-safe: :meth:`submit` may be called from any thread and never blocks on the work.
    """

    def __init__(self, max_pending: int = 64) -> None:
        if isinstance(max_pending, bool) or not isinstance(max_pending, int) or max_pending < 1:
            raise ValueError(f"max_pending must be a positive int, got {max_pending!r}")
        self._max_pending = max_pending
        self._cond = threading.Condition()
        self._queue: Deque[Tuple["weakref.ref[CompiledGrammar]", int]] = collections.deque()
        self._seen: "weakref.WeakSet[CompiledGrammar]" = weakref.WeakSet()
        self._thread: Optional[threading.Thread] = None
        self._busy = False
        self.done = 0
        self.dropped = 0
        self.failed = 0

    def submit(self, compiled: "CompiledGrammar", k: int) -> bool:
        """Queues ``compiled.precompute(k)``; returns False (and queues nothing) when ``k``
        is 0 or this grammar was submitted before."""
        if check_k(k) == 0:
            return False
        with self._cond:
            if compiled in self._seen:
                return False
            self._seen.add(compiled)
            if len(self._queue) >= self._max_pending:
                self._queue.popleft()
                self.dropped += 1
            self._queue.append((weakref.ref(compiled), k))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="xgrammar2-precompute", daemon=True
                )
                self._thread.start()
            self._cond.notify()
        return True

    def wait_idle(self, timeout: Optional[float] = None) -> bool:
        """Blocks until the queue is empty and no precompute is running (tests, shutdown);
        returns False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue and not self._busy, timeout)

    @property
    def pending(self) -> int:
        """Grammars waiting in the queue."""
        with self._cond:
            return len(self._queue)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._queue))
                ref, k = self._queue.popleft()
                self._busy = True
            compiled = ref()
            try:
                if compiled is not None:
                    compiled.precompute(k)
                    with self._cond:
                        self.done += 1
            except Exception as e:  # noqa: BLE001 - the grammar still works, built on first use
                with self._cond:
                    self.failed += 1
                logger.warning("xgrammar2: background precompute failed: %s", e)
            finally:
                compiled = None  # the queue's references are weak: so is the wait for the next
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
