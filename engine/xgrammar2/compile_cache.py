"""The compile cache of a GrammarCompiler: a thread-safe LRU of compiled grammars bounded by
their memory size, coalescing concurrent compiles of one key."""

import sys
import threading
from collections import OrderedDict
from typing import Callable, Dict, Hashable, Optional, Tuple

from .compiled_grammar import CompiledGrammar

__all__ = ["CompileCache"]


class _Pending:
    """A compile in flight: its owner holds ``done`` until the result is set (a bare lock,
    cheaper to make than an Event on every compile); waiters pass through it."""

    __slots__ = ("done", "result")

    def __init__(self) -> None:
        self.done = threading.Lock()
        self.done.acquire()
        self.result: Optional[CompiledGrammar] = None

    def wait(self) -> None:
        with self.done:
            pass


class CompileCache:
    """LRU of compiled grammars bounded by their (current) memory size.

    Sizes are re-read from the core when an entry is inserted or hit, since the mask cache
    of a compiled grammar grows while it is used; :meth:`size_bytes` re-reads all of them.
    Concurrent compiles of the same key are coalesced: one thread compiles, the others wait.

    A grammar linked from cached fragments (a structural tag whose tools were lowered
    before) is admitted only the second time its key is compiled: under dynamic tool sets
    most combinations are never requested again, and each would hold about 4 KB per tool
    and push out grammars that cost far more to rebuild (a JSON schema), while linking it
    again costs about a millisecond. Not keeping it also lets the next request reuse its
    memory, already mapped, instead of faulting in fresh pages.
    """

    #: Keys (by hash) of linked grammars compiled once and not admitted; cleared when full,
    #: so it costs at most this many ints. A hash collision only admits a grammar early.
    _DOOR_MAX = 1 << 14

    def __init__(self, limit_bytes: int) -> None:
        self._limit = limit_bytes
        self._lock = threading.Lock()
        self._entries: "OrderedDict[Hashable, Tuple[CompiledGrammar, int]]" = OrderedDict()
        self._total = 0
        self._pending: Dict[Hashable, _Pending] = {}
        self._door: set = set()

    def _admit(self, key: Hashable, compiled: CompiledGrammar) -> bool:
        """Whether a grammar just compiled for ``key`` goes into the cache (lock held)."""
        if not compiled._linked:
            return True
        h = hash(key)
        if h in self._door:
            self._door.discard(h)
            return True
        if len(self._door) >= self._DOOR_MAX:
            self._door.clear()
        self._door.add(h)
        return False

    @staticmethod
    def _size(key: Hashable, compiled: CompiledGrammar) -> int:
        # The key (the request's text, often kilobytes) is held as long as the grammar.
        parts = key if isinstance(key, tuple) else (key,)
        return compiled.memory_size_bytes + sum(sys.getsizeof(p) for p in parts)

    def _evict(self) -> None:
        if self._limit < 0:
            return
        while self._total > self._limit and self._entries:
            _, (_, size) = self._entries.popitem(last=False)
            self._total -= size

    def get_or_compile(self, key: Hashable, compile_fn: Callable[[], CompiledGrammar]):
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                compiled, old = hit
                new = self._size(key, compiled)
                self._entries[key] = (compiled, new)
                self._entries.move_to_end(key)
                self._total += new - old
                self._evict()
                return compiled
            pending = self._pending.get(key)
            owner = pending is None
            if owner:
                pending = _Pending()
                self._pending[key] = pending
        if not owner:
            pending.wait()
            if pending.result is not None:
                return pending.result
            return compile_fn()  # the owner failed: fail (or succeed) on our own
        try:
            compiled = compile_fn()
        except BaseException:
            with self._lock:
                del self._pending[key]
            pending.done.release()
            raise
        with self._lock:
            del self._pending[key]
            if self._admit(key, compiled):
                size = self._size(key, compiled)
                old = self._entries.pop(key, None)
                if old is not None:
                    self._total -= old[1]
                self._entries[key] = (compiled, size)
                self._total += size
                self._evict()
        pending.result = compiled
        pending.done.release()
        return compiled

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._door.clear()
            self._total = 0

    def size_bytes(self) -> int:
        with self._lock:
            total = 0
            for key, (compiled, _) in self._entries.items():
                size = self._size(key, compiled)
                self._entries[key] = (compiled, size)
                total += size
            self._total = total
            self._evict()
            return self._total

    def __len__(self) -> int:
        return len(self._entries)
