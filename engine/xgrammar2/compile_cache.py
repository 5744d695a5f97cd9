"""The compile cache of a GrammarCompiler: a thread-safe LRU of compiled grammars bounded by
their memory size, coalescing concurrent compiles of one key."""

import sys
import threading
from collections import OrderedDict
from typing import Any, Callable, Dict, Hashable, List, Optional

from . import _core
from .compiled_grammar import CompiledGrammar

__all__ = ["CompileCache"]

# Bound once (a hit reads it); the compiler requires the core before making a cache.
_compiled_memory = _core.lib.xgr_compiled_memory if _core.AVAILABLE else None


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


def _grammar_bytes(compiled: CompiledGrammar) -> int:
    """``compiled.memory_size_bytes``, read from the core directly when no grammar is kept
    apart (a cached JSON schema, EBNF text or regex: the common case, one C call)."""
    if compiled._grammar is None:
        return _compiled_memory(compiled._ptr)
    return compiled.memory_size_bytes


def _key_bytes(key: Hashable) -> int:
    # The key (the request's text, often kilobytes) is held as long as the grammar.
    parts = key if isinstance(key, tuple) else (key,)
    return sum(sys.getsizeof(p) for p in parts)


class CompileCache:
    """LRU of compiled grammars bounded by their (current) memory size.

    Sizes are re-read from the core when an entry is inserted or hit, since the mask cache
    of a compiled grammar grows while it is used; :meth:`size_bytes` re-reads all of them.
    (A hit re-reads only the grammar's part, one C call: the bytes of its key and aliases
    are counted once, when they are added.) Concurrent compiles of the same key are
    coalesced: one thread compiles, the others wait.

    An entry may also be found under a few *aliases* (:meth:`add_alias`): other keys known
    to mean the same request, such as a JSON schema's text as the caller spelled it, whose
    canonical key costs a pass over the text to make. An alias's bytes count in its entry's
    size and it leaves the cache with its entry.

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
    #: Aliases one entry keeps at most (a schema sent in a few whitespace spellings).
    ALIAS_MAX = 4

    def __init__(self, limit_bytes: int) -> None:
        self._limit = limit_bytes
        self._lock = threading.Lock()
        # key -> [compiled, size, bytes of the key and aliases, aliases or None, what its
        # first hit calls (an entry offered by the disk cache's preload) or None]
        self._entries: "OrderedDict[Hashable, List[Any]]" = OrderedDict()
        self._aliases: Dict[Hashable, Hashable] = {}  # alias -> key
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

    def _drop(self, entry: List[Any]) -> None:
        """Forgets the aliases of an entry leaving the cache (lock held)."""
        aliases = entry[3]
        if aliases is not None:
            for a in aliases:
                self._aliases.pop(a, None)

    def _evict(self) -> None:
        if self._limit < 0:
            return
        while self._total > self._limit and self._entries:
            _, entry = self._entries.popitem(last=False)
            self._total -= entry[1]
            self._drop(entry)

    def _touch(self, key: Hashable, entry: List[Any]) -> CompiledGrammar:
        """A hit (lock held): the entry becomes the most recent, its size is re-read."""
        compiled = entry[0]
        new = _grammar_bytes(compiled) + entry[2]
        self._total += new - entry[1]
        entry[1] = new
        self._entries.move_to_end(key)
        if self._limit >= 0 and self._total > self._limit:
            self._evict()
        return compiled

    @staticmethod
    def _first_hit(entry: List[Any]) -> None:
        """Calls the first-hit callback of an entry the preload offered (outside the lock:
        it may take the disk cache's lock, which is taken before this one in ``offer``)."""
        first = entry[4]
        if first is not None:
            entry[4] = None
            first()

    def get(self, key: Hashable) -> Optional[CompiledGrammar]:
        """The grammar cached under ``key`` (a hit, as in :meth:`get_or_compile`), or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            compiled = self._touch(key, entry)
            if entry[4] is None:
                return compiled
        self._first_hit(entry)
        return compiled

    def get_alias(self, alias: Hashable) -> Optional[CompiledGrammar]:
        """The grammar cached under the key ``alias`` stands for (a hit), or None."""
        with self._lock:
            key = self._aliases.get(alias)
            if key is None:
                return None
            entry = self._entries[key]
            compiled = self._touch(key, entry)
            if entry[4] is None:
                return compiled
        self._first_hit(entry)
        return compiled

    def add_alias(self, alias: Hashable, key: Hashable) -> bool:
        """Lets :meth:`get_alias` find the entry of ``key`` under ``alias``, which must mean
        the same request. False (nothing done) when ``key`` is not cached, ``alias`` is
        already known, or the entry has ``ALIAS_MAX`` aliases."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or alias in self._aliases:
                return False
            aliases = entry[3]
            if aliases is None:
                aliases = []
            if len(aliases) >= self.ALIAS_MAX:
                return False
            size = _key_bytes(alias)
            aliases.append(alias)
            entry[3] = aliases
            self._aliases[alias] = key
            entry[2] += size
            entry[1] += size
            self._total += size
            self._evict()
            return True

    def get_or_compile(self, key: Hashable, compile_fn: Callable[[], CompiledGrammar]):
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                compiled = self._touch(key, entry)
                if entry[4] is None:
                    return compiled
            else:
                pending = self._pending.get(key)
                owner = pending is None
                if owner:
                    pending = _Pending()
                    self._pending[key] = pending
        if entry is not None:
            self._first_hit(entry)
            return compiled
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
                fixed = _key_bytes(key)
                size = compiled.memory_size_bytes + fixed
                old = self._entries.pop(key, None)
                if old is not None:
                    self._total -= old[1]
                    self._drop(old)
                self._entries[key] = [compiled, size, fixed, None, None]
                self._total += size
                self._evict()
        pending.result = compiled
        pending.done.release()
        return compiled

    def offer(self, key: Hashable, compiled: CompiledGrammar,
              on_first_hit: Optional[Callable[[], None]] = None) -> bool:
        """Adds ``compiled`` (read ahead of any request: the disk cache's preload) under
        ``key`` as the least recently used entry, when the key is neither cached nor being
        compiled and the entry fits in the byte budget without evicting anything (a grammar
        no request asked for yet never pushes out one a request did). ``on_first_hit`` is
        called (under the cache's lock) by the first hit on it. False when not added."""
        with self._lock:
            if key in self._entries or key in self._pending or compiled._linked:
                return False
            fixed = _key_bytes(key)
            size = _grammar_bytes(compiled) + fixed
            if self._limit >= 0 and self._total + size > self._limit:
                return False
            self._entries[key] = [compiled, size, fixed, None, on_first_hit]
            self._entries.move_to_end(key, last=False)
            self._total += size
            return True

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._aliases.clear()
            self._door.clear()
            self._total = 0

    def size_bytes(self) -> int:
        with self._lock:
            total = 0
            for entry in self._entries.values():
                size = entry[0].memory_size_bytes + entry[2]
                entry[1] = size
                total += size
            self._total = total
            self._evict()
            return self._total

    def __len__(self) -> int:
        return len(self._entries)
