"""A bounded warm start of the on-disk compile cache (docs/disk-cache.md, "Preload"): when a
compiler with a directory is made, its background thread (after the mask entry packs) loads the
directory's most recently used grammar files, newest first, into memory, so that a request for
one of them finds it without touching the disk.

Each file is checked exactly as ``DiskCache.load`` checks it (size, header, vocabulary
fingerprint, key digest, payload length and SHA-256, payload structure, then the core's image
checks) and gets its layer file attached. A file of another vocabulary is skipped on its header
alone (it is another compiler's, so it is neither loaded nor removed); a file that fails a check
is removed and counted in ``rejected`` as a load would. A file carries its compile-cache key
(format 3); when that key hashes to the file's name again and the compiler can convert its
request again (``GrammarCompiler._adopt_preloaded``: JSON schemas with the standard options,
EBNF, regex, builtin JSON, unlinked structural tags), the grammar goes straight into the
compiler's compile cache (``CompileCache.offer``: as its least recently used entry, only
where it fits the cache's byte budget without evicting anything), so a request for it is an
ordinary memory hit; its first hit counts it and touches its file (``_first_hit``). The other
preloaded grammars wait in a map by key digest; ``DiskCache.load`` takes one out of it (a hit,
no file I/O), and from then on the compile cache holds it like any other. Both are bounded,
until a request takes them, by a byte budget (``XGRAMMAR2_CACHE_PRELOAD_BYTES``, what the core
says they hold) and a count (``XGRAMMAR2_CACHE_PRELOAD_FILES``); 0 turns preloading off.

A request never waits for the preload: a key that is not (yet) in the map takes the ordinary
path, and the preload then leaves that key alone, so no grammar is loaded twice.
"""

import logging
import os
import threading
import time
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _core
from .envvars import env_int

__all__ = ["Preloader", "ENV_PRELOAD_BYTES", "ENV_PRELOAD_FILES", "DEFAULT_PRELOAD_BYTES",
           "DEFAULT_PRELOAD_FILES", "PRELOAD_JOB"]

logger = logging.getLogger(__name__)

#: The preload's byte budget: what the preloaded grammars hold (``xgr_compiled_memory``, their
#: layers included) while no request has taken them. 0 turns preloading off.
ENV_PRELOAD_BYTES = "XGRAMMAR2_CACHE_PRELOAD_BYTES"
DEFAULT_PRELOAD_BYTES = 64 << 20
#: At most this many grammars are preloaded (the newest files first).
ENV_PRELOAD_FILES = "XGRAMMAR2_CACHE_PRELOAD_FILES"
DEFAULT_PRELOAD_FILES = 1024
#: A background-queue item: preload (part of) the directory (DiskCache._write_loop).
PRELOAD_JOB = object()


class _Entry:
    """A preloaded grammar: the core's handle (owned, released by the garbage collector), what
    the compiler wraps it with, its file's mtime (for the LRU touch of a hit), the layer slot
    entries it holds and the bytes it holds."""

    __slots__ = ("ptr", "linked", "warns", "mtime", "layers", "loaded", "size")

    def __init__(self, ptr: Any, linked: bool, warns: Tuple[str, ...], mtime: float, layers: int,
                 loaded: int, size: int) -> None:
        self.ptr = ptr
        self.linked = linked
        self.warns = warns
        self.mtime = mtime
        self.layers = layers  # its layer count (xgr_compiled_layer_count), -1: no layer file
        self.loaded = loaded  # the entries its layer file held
        self.size = size


class _Handle:
    """What LayerStore loads a layer file into: a compiled grammar's handle (``_ptr``)."""

    __slots__ = ("_ptr",)

    def __init__(self, ptr: Any) -> None:
        self._ptr = ptr


class Preloader:
    """The preload of one ``DiskCache``. Its map and the set of keys the request path has taken
    while a preload runs are guarded by the cache's lock (``DiskCache._lock``)."""

    def __init__(self, cache: Any) -> None:
        self._cache = cache
        self.budget = env_int(ENV_PRELOAD_BYTES, DEFAULT_PRELOAD_BYTES, minimum=0) or 0
        self.max_files = env_int(ENV_PRELOAD_FILES, DEFAULT_PRELOAD_FILES, minimum=0) or 0
        self.enabled = self.budget > 0 and self.max_files > 0
        #: key digest -> preloaded grammar, until a request takes it
        self.map: Dict[bytes, _Entry] = {}
        #: key digest -> bytes, of the grammars put into the compile cache, until their first hit
        self.adopted: Dict[bytes, int] = {}
        #: The compiler's _adopt_preloaded (weakly: the compiler holds this cache), or None.
        self._adopter: Optional[Any] = None
        #: keys the request path looked up while a preload ran: the preload leaves them alone
        self.claimed: set = set()
        self.active = False
        self.started = False
        self.idle = threading.Event()
        self.idle.set()
        #: bytes the grammars in the map hold
        self.held = 0
        #: Counters, for tests and benchmarks: grammars preloaded, taken by a request, files of
        #: another vocabulary skipped, grammars dropped (over the budget, or taken meanwhile).
        self.loads = self.hits = self.skipped = self.dropped = 0
        #: Wall seconds the last preload took (from the first file to the last), for benchmarks.
        self.seconds = 0.0

    def reset_after_fork(self) -> None:
        """A forked child has no background thread: a preload in flight is over (what it had
        loaded stays in the map)."""
        self.active = False
        self.claimed = set()
        self.idle = threading.Event()
        self.idle.set()

    def adopt_into(self, compiler: Any) -> None:
        """Lets the preload put grammars into ``compiler``'s compile cache
        (``compiler._adopt_preloaded``)."""
        self._adopter = weakref.WeakMethod(compiler._adopt_preloaded)

    # ---- the request's side (DiskCache.load, under the cache's lock) ---------------------

    def take(self, digest: bytes) -> Optional[_Entry]:
        """The preloaded grammar of ``digest``, out of the map; None when there is none (then,
        while a preload runs, the preload leaves ``digest`` to the request). Under the lock."""
        e = self.map.pop(digest, None)
        if e is not None:
            self.held -= e.size
        else:
            size = self.adopted.pop(digest, None)
            if size is not None:  # put into the compile cache, evicted before any hit
                self.held -= size
            if self.active:
                self.claimed.add(digest)
        return e

    def _adopted_hit(self, digest: bytes, path: str, layers: int, loaded: int,
                     mtime: float) -> None:
        """The first hit on a grammar the preload put into the compile cache: counted as
        ``DiskCache.load`` counts a preload hit, and its file (``path``, named when it was
        preloaded) touched (not under a lock)."""
        cache = self._cache
        with cache._lock:
            size = self.adopted.pop(digest, None)
            if size is None:  # (two first hits at once: counted once)
                return
            self.held -= size
            self.hits += 1
            cache.hits += 1
            if layers >= 0:
                cache.layer_loads += 1
                cache.layer_entries_loaded += loaded
        cache._touch_if_old(path, digest, mtime)

    # ---- the background thread's side ------------------------------------------------------

    def start(self, vocab: Any, opts: Any) -> bool:
        """Queues the preload on the cache's background thread (once per cache); False when it
        is off, was started before, or the queue is full."""
        cache = self._cache
        with cache._lock:
            if not self.enabled or self.started:
                return False
            self.started = True
            self.active = True
            self.idle.clear()
        if cache._queue_job(PRELOAD_JOB, (vocab, opts, None)):
            return True
        self._finish()
        return False

    def _finish(self) -> None:
        with self._cache._lock:
            self.active = False
            self.claimed = set()
        self.idle.set()

    def candidates(self) -> List[Tuple[float, int, str]]:
        """(mtime, size, path) of the directory's grammar files, newest first (from the
        cache's own directory scan, which eviction uses too)."""
        suffix = self._cache.grammar_suffix
        out = [f for f in self._cache.scan()[1] if f[2].endswith(suffix)]
        out.sort(reverse=True)
        return out

    def run(self, vocab: Any, opts: Any, todo: Optional[List[Tuple[float, int, str]]]) -> None:
        """Preloads files of ``todo`` (the directory's, newest first, when None) within the
        budget; hands the rest back to the queue when other work is waiting there (writes and
        layer loads of requests are not held up behind a long preload)."""
        cache = self._cache
        t0 = time.perf_counter()
        try:
            if todo is None:
                todo = self.candidates()
                todo.reverse()  # popped from the end: newest first
            while todo:
                with cache._lock:
                    if not self.active or self.loads >= self.max_files:
                        break
                    room = self.budget - self.held
                if room <= 0:
                    break
                mtime, size, path = todo.pop()
                if size <= room:  # (a grammar holds at least its file's bytes)
                    self._one(path, mtime, vocab, opts)
                if todo and cache._queue.qsize() > 0:
                    if cache._queue_job(PRELOAD_JOB, (vocab, opts, todo)):
                        todo = None
                        return
        finally:
            self.seconds += time.perf_counter() - t0
            if todo is not None:
                self._finish()

    def _judged(self, digest: bytes, reject: Callable[[], Any]) -> None:
        """A file of ``digest`` the preload found damaged: ``reject()`` (removed and counted, as
        a load does) unless a request has taken the key, which then judges the file itself.
        Under the lock, so a request that finds the file gone finds it counted, and the two
        never both count one file."""
        with self._cache._lock:
            if self.active and digest not in self.claimed:
                reject()

    def _one(self, path: str, mtime: float, vocab: Any, opts: Any) -> None:
        """Preloads the grammar file at ``path`` unless the request path has its key."""
        cache = self._cache
        name = os.path.basename(path)[:-len(cache.grammar_suffix)]
        try:
            digest = bytes.fromhex(name)
        except ValueError:
            return
        if len(digest) != 32:
            return
        with cache._lock:
            if digest in self.claimed or digest in self.map or cache._alive.get(digest) is not None:
                return
        got = cache.read_grammar(path, digest, vocab, opts, foreign_ok=True,
                                 reject=lambda p, why, st=None: self._judged(
                                     digest, lambda: cache._reject(p, why, st)))
        if got is None:
            return
        if got is False:  # another vocabulary's file
            self.skipped += 1
            return
        ptr, linked, warns, key_code = got[:4]
        key = self._key_of(key_code, digest)  # None: none to adopt it by
        layers, loaded = -1, 0
        lib = _core.lib
        if cache._layers.enabled:
            try:
                loaded = cache._layers._load(
                    digest, _Handle(ptr), cache.max_payload, count=False,
                    reject=lambda p, why: self._judged(digest, lambda: cache._layers._reject(p, why)) or 0)
                if loaded > 0:
                    layers = int(lib.xgr_compiled_layer_count(ptr))
            except Exception as e:  # noqa: BLE001 - a layer file never fails a preload
                logger.debug("xgrammar2 disk cache: preload of a layer file failed: %s", e)
                loaded = 0
        size = int(lib.xgr_compiled_memory(ptr))
        loaded = max(loaded, 0)
        adopt = self._adopter() if self._adopter is not None and key is not None else None
        with cache._lock:
            if (not self.active or digest in self.claimed or cache._alive.get(digest) is not None
                    or self.held + size > self.budget or self.loads >= self.max_files):
                self.dropped += 1
                return
            # (under the lock, so a request either finds it in the compile cache, or in the
            # map, or has claimed the key and loads it itself: never twice)
            compiled = None
            if adopt is not None:
                compiled = adopt(key, ptr, linked, warns, lambda: self._adopted_hit(
                    digest, path, layers, loaded, mtime))
            if compiled is not None:
                self.adopted[digest] = size
                cache._alive[digest] = compiled
            else:
                self.map[digest] = _Entry(ptr, linked, warns, mtime, layers, loaded, size)
            self.held += size
            self.loads += 1
        if compiled is not None:
            cache._layers.track(digest, compiled, max(layers, 0))

    def _key_of(self, key_code: bytes, digest: bytes) -> Any:
        """The compile-cache key a file carries, when it hashes to the file's name again (under
        this compiler's prefix: its options, vocabulary and build); else None (no key is
        None)."""
        cache = self._cache
        key = cache.decode_key(key_code)
        if key is None or key is cache.NO_KEY or cache.key_digest(key) != digest:
            return None
        return key
