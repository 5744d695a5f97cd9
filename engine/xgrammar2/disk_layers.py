"""Layer packs in the on-disk compile cache (docs/disk-cache.md, "Layer packs"): each
grammar's own mask layers (its published slot entries: sharpened plain entries, caller-context
entries, TagDispatch views, with the context-free entries they refine), stored next to the
grammar's file as ``<key digest>.xgl`` and loaded with it, so a process that takes the
grammar from the directory does not rebuild them on its first pass.

A layer file has the grammar file's header (magic ``XGR2LYR\\0``, format version, vocabulary
fingerprint, the grammar's key digest, payload length and SHA-256) and the core's layer pack
(``xgr_layer_pack_build``). It is written by the cache's background thread on the timer that
writes mask entry packs (the entries accumulate while decoding, after the compile), again
whenever the grammar has published more entries since, and read when the grammar is read:
mapped, checked whole by the core (``xgr_layer_pack_load_mapped``), its entries borrowing
their arrays from the mapping. A file that fails a check is removed and ignored: the grammar
builds its layers on first use as without one.
"""

import hashlib
import logging
import os
import struct
import threading
import time
import weakref
from typing import Any, Callable, Dict, Optional, Tuple

from . import _core
from .envvars import env_flag

__all__ = ["LayerStore", "LAYER_MAGIC", "LAYER_SUFFIX", "ENV_CACHE_LAYERS", "LAYER_JOB", "HEADER", "check_header",
           "open_checked", "pack_header", "take_core_bytes"]

logger = logging.getLogger(__name__)

LAYER_MAGIC = b"XGR2LYR\x00"
LAYER_SUFFIX = ".xgl"
# every cache file's header (grammar files, mask entry packs, layer files): magic, format
# version, flags (0), vocabulary fingerprint, key digest, payload length, payload SHA-256
HEADER = _HEADER = struct.Struct("<8sII32s32sQ32s")


def pack_header(magic: bytes, version: int, vocab_fp: bytes, key: bytes, payload: bytes,
                csum: Optional[bytes] = None) -> bytes:
    """The header of a cache file holding ``payload`` (``csum``: its SHA-256, when known)."""
    if csum is None:
        csum = hashlib.sha256(payload).digest()
    return _HEADER.pack(magic, version, 0, vocab_fp, key, len(payload), csum)


def open_checked(path: str, mode: int, limit: int, check: Callable[[memoryview], Tuple[int, str]],
                 too_large: str = "size") -> Tuple[Any, int, str]:
    """Opens the cache file at ``path`` as a core file map (``xgr_file_map_open``: ``mode``,
    at most ``limit`` bytes) and checks its bytes with ``check`` (-> (payload length, "") or
    (-1, the failed check)). Returns (the map, payload length, "") for the caller to load from
    and release; (None, -1, why) when the file fails a check (``too_large`` when over
    ``limit``); (None, 0, "") when there is none (or it is unreadable, or removed meanwhile)."""
    ffi, lib = _core.ffi, _core.lib
    out = ffi.new("xgr_file_map **")
    rc = lib.xgr_file_map_open(os.fsencode(path), mode, limit, out)
    if rc == lib.XGR_ERR_LIMIT:
        return None, -1, too_large
    if rc != 0:
        return None, 0, ""
    fm = out[0]
    try:
        size = ffi.new("size_t *")
        data = lib.xgr_file_map_data(fm, size)
        view = memoryview(ffi.buffer(data, size[0]))
        try:
            plen, why = check(view)
        finally:
            view.release()  # no Python view outlives the map
    except BaseException:
        lib.xgr_file_map_release(fm)
        raise
    if plen < 0:
        lib.xgr_file_map_release(fm)
        return None, -1, why
    return fm, plen, ""


def take_core_bytes(out: Any, n: Any, keep: bool = True) -> bytes:
    """The ``n[0]`` bytes the core allocated at ``out[0]`` (b"" when ``keep`` is false or there
    are none), copied; the core's buffer is freed either way."""
    ffi, lib = _core.ffi, _core.lib
    if out[0] == ffi.NULL:
        return b""
    try:
        return ffi.buffer(out[0], n[0])[:] if keep else b""
    finally:
        lib.xgr_free(out[0])


def check_header(view: memoryview, magic: bytes, version: int, vocab_fp: bytes, key: bytes,
                 what: str = "") -> Tuple[int, str]:
    """(payload length, "") when a cache file's bytes (grammar-file header layout: magic,
    version, flags, vocabulary fingerprint, key, payload length, payload SHA-256) have the
    given magic, version, vocabulary and key, the exact length and the checksum; else
    (-1, the failed check, prefixed by ``what``)."""
    if len(view) < _HEADER.size:
        return -1, what + "size"
    magic_, version_, flags, vfp, kd, plen, csum = _HEADER.unpack_from(view, 0)
    if magic_ != magic or version_ != version or flags != 0:
        return -1, what + "header"
    if vfp != vocab_fp:
        return -1, what + "vocabulary"
    if kd != key:
        return -1, what + "key"
    if plen != len(view) - _HEADER.size:
        return -1, what + "length"
    payload = view[_HEADER.size:]
    try:
        if hashlib.sha256(payload).digest() != csum:
            return -1, what + "checksum"
    finally:
        payload.release()
    return plen, ""
#: ``XGRAMMAR2_CACHE_LAYERS=0`` (or false/off/no) turns layer files off (neither written nor read);
#: a value that is no switch warns once and leaves them on.
ENV_CACHE_LAYERS = "XGRAMMAR2_CACHE_LAYERS"
#: Layer files up to this size are loaded with their grammar, on the request's thread (0.1-0.5 ms);
#: larger ones (a huge schema's: up to 12 MB on the JSONSchemaBench sample, tens of ms to hash and
#: check) on the cache's background thread, published into the slots the request has not filled yet.
SYNC_MAX = 1 << 20
#: Layer files up to this size are read into memory, larger ones mapped (XGR_FILE_MAP_SMALL: the core
#: decides after its one open).
READ_MAX = 64 << 10
#: A background-queue item: load this grammar's layer file (DiskCache._write_loop).
LAYER_JOB = object()
#: At most this many grammars are watched for new layers per cache (the newest kept).
_TRACK_MAX = 1024
#: A layer file touched (or written) within this many seconds is not touched again on load.
_TOUCH_S = 60.0


class LayerStore:
    """The layer files of one ``DiskCache``: which of its grammars to write layers for (by
    key digest, with how many slot entries the last write saw), and their loads."""

    def __init__(self, cache: Any) -> None:
        self._cache = cache
        self.enabled = env_flag(ENV_CACHE_LAYERS, True)
        self._lock = threading.Lock()
        # digest -> (the compiled grammar, weakly; its layer count at the last write)
        self._tracked: Dict[bytes, Tuple["weakref.ref[Any]", int]] = {}

    def path_for(self, digest: bytes) -> str:
        return self._cache.path + os.sep + digest.hex() + LAYER_SUFFIX

    # ---- which grammars ----------------------------------------------------------------

    def track(self, digest: bytes, compiled: Any, count: int = 0) -> None:
        """Watches ``compiled`` (stored under ``digest``) for layers to write."""
        if not self.enabled:
            return
        try:
            ref = weakref.ref(compiled)
        except TypeError:
            return
        with self._lock:
            self._tracked.pop(digest, None)
            self._tracked[digest] = (ref, count)
            while len(self._tracked) > _TRACK_MAX:
                self._tracked.pop(next(iter(self._tracked)))

    # ---- writing -----------------------------------------------------------------------

    def write_all(self) -> int:
        """Writes the layers of every watched grammar that published slot entries since its
        last write (on the background thread); returns how many files were written."""
        cache = self._cache
        if not self.enabled or not cache._writable or cache._vocab is None:
            return 0
        lib = _core.lib
        with self._lock:
            items = list(self._tracked.items())
        written = 0
        for digest, (ref, last) in items:
            compiled = ref()
            if compiled is None:
                with self._lock:
                    if self._tracked.get(digest, (None,))[0] is ref:
                        del self._tracked[digest]
                continue
            count = lib.xgr_compiled_layer_count(compiled._ptr)
            if count <= last:
                continue
            if self.write(digest, compiled):
                written += 1
            with self._lock:
                if digest in self._tracked:
                    self._tracked[digest] = (ref, count)
        return written

    def write(self, digest: bytes, compiled: Any) -> bool:
        """Writes ``compiled``'s layers now (tmp file, fsync, atomic rename over the last)."""
        cache = self._cache
        if not cache._writable or not cache._ensure_dir():
            return False
        ffi, lib = _core.ffi, _core.lib
        out = ffi.new("uint8_t **")
        n = ffi.new("size_t *")
        count = ffi.new("int32_t *")
        if lib.xgr_layer_pack_build(compiled._ptr, out, n, count) != 0:
            return False
        payload = take_core_bytes(out, n, keep=count[0] > 0)
        if not payload or _HEADER.size + len(payload) > cache.limit_bytes:
            return False
        if not cache._publish_file(self.path_for(digest), LAYER_MAGIC, digest, payload):
            return False
        cache.layer_writes += 1
        cache.layer_entries_written += count[0]
        return True

    # ---- reading -----------------------------------------------------------------------

    def attach(self, digest: bytes, compiled: Any) -> int:
        """Loads the layer file of ``digest`` (if any) into ``compiled``, a grammar just read
        from the directory, and watches it for layers to write; returns the entries loaded.
        A file that fails a check is removed (counted in ``rejected``). A file over
        ``SYNC_MAX`` bytes is loaded on the background thread instead (0 returned). One
        ``open`` does it all (no ``stat`` first: the core's open refuses a file over
        ``SYNC_MAX`` and reads one of at most ``READ_MAX`` bytes); the caller touches the file
        with its grammar's (``DiskCache.load``)."""
        if not self.enabled:
            return 0
        n = 0
        try:
            n = self._load(digest, compiled, SYNC_MAX)
        except Exception as e:  # noqa: BLE001 - a layer file never fails a request
            logger.debug("xgrammar2 disk cache: layer load failed: %s", e)
        if n < 0:  # over SYNC_MAX: the background thread loads it (and tracks the grammar)
            if self._cache._queue_job(LAYER_JOB, (digest, compiled)):
                return 0
            return self.attach_now(digest, compiled)
        count = _core.lib.xgr_compiled_layer_count(compiled._ptr) if n > 0 else 0
        self.track(digest, compiled, count)
        return n

    def attach_now(self, digest: bytes, compiled: Any) -> int:
        """``attach`` on this thread, whatever the file's size; touches the file (the LRU
        order) unless it was touched or written lately."""
        n = 0
        try:
            path = self.path_for(digest)
            n = self._load(digest, compiled, self._cache.max_payload)
            if n > 0:
                st = os.stat(path)
                if time.time() - st.st_mtime >= _TOUCH_S:
                    os.utime(path)
        except Exception as e:  # noqa: BLE001 - a layer file never fails a request
            logger.debug("xgrammar2 disk cache: layer load failed: %s", e)
        count = _core.lib.xgr_compiled_layer_count(compiled._ptr) if n > 0 else 0
        self.track(digest, compiled, count)
        return max(n, 0)

    def _load(self, digest: bytes, compiled: Any, limit: int, count: bool = True,
              reject: Optional[Callable[[str, str], int]] = None) -> int:
        """The entries loaded from the layer file of ``digest`` (0: none, removed meanwhile,
        or failed a check, then ``reject(path, why)``, by default removed), or -1 when it holds
        more than ``limit`` bytes of payload (not read). ``count``: add the load to the cache's
        counters (the preload counts it when a request takes the grammar)."""
        cache = self._cache
        if reject is None:
            reject = self._reject
        ffi, lib = _core.ffi, _core.lib
        path = self.path_for(digest)
        # a small file is read (one read: no mmap / munmap, page faults or statfs; its
        # private copy is at most READ_MAX bytes), a larger one mapped (shared pages)
        mode = lib.XGR_FILE_MAP_SMALL if cache.mmap_packs() else lib.XGR_FILE_MAP_READ
        fm, plen, why = open_checked(path, mode, _HEADER.size + min(limit, cache.max_payload),
                                     lambda view: self._check(view, digest), too_large="")
        if fm is None:  # none (the common case), removed meanwhile, over the limit, or failed a check
            if plen < 0 and not why:
                return -1 if limit < cache.max_payload else reject(path, "size")
            return reject(path, why) if why else 0
        try:
            got = ffi.new("int32_t *")
            if lib.xgr_layer_pack_load_mapped(compiled._ptr, fm, _HEADER.size, plen, got) != 0:
                msg = ffi.string(lib.xgr_last_error()).decode("utf-8", "replace")
                return reject(path, f"layers: {msg}")
        finally:
            lib.xgr_file_map_release(fm)  # the loaded entries hold their own references
        if count:
            cache.layer_loads += 1
            cache.layer_entries_loaded += got[0]
        return got[0]

    def _check(self, view: memoryview, digest: bytes) -> Tuple[int, str]:
        """(payload length, "") when the header, length and checksum hold, else (-1, why)."""
        return check_header(view, LAYER_MAGIC, self._cache.format_version, self._cache._vocab_fp, digest)

    def _reject(self, path: str, why: str) -> int:
        """A layer file that fails a check: removed (the layers are built again on use), and
        counted unless someone else removed it first (the preload and a request, or two
        processes, that read it at once)."""
        logger.debug("xgrammar2 disk cache: ignoring %s (%s)", path, why)
        try:
            os.unlink(path)
        except FileNotFoundError:
            return 0
        except OSError:
            pass
        self._cache.rejected += 1
        self._cache.layer_rejected += 1
        return 0


def layer_count(compiled: Any) -> int:
    """The number of mask-cache slot entries ``compiled`` has published (tests, benchmarks)."""
    return int(_core.lib.xgr_compiled_layer_count(compiled._ptr))
