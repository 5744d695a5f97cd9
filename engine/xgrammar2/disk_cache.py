"""The on-disk compile cache: compiled grammars shared by every process of a node (and kept
across restarts) through one directory. Layout, format, failure behaviour: docs/disk-cache.md.

One file per compiled grammar, named by ``sha256(format version, core build, package
sources, vocabulary fingerprint, compile options, canonical key)``. A file is a fixed header (magic, format
version, the vocabulary fingerprint, the key digest, the payload's length and SHA-256) and
the payload (whether the grammar was linked, its warnings, and the core's image of its
automata, ``xgr_compiled_image``). Readers read the file (map it when large) and check the
header, the length and the checksum before the core checks the image itself
(``xgr_compiled_from_image``: bounds, ids, automata invariants); anything that fails is a
miss (the file is removed and rewritten). Writers publish with write-to-temporary, fsync
and an atomic rename, so readers never see a partial file and need no lock. Nothing is
pickled or executed: a file is data.

The directory is bounded by a byte budget: after writes, any process may scan it and remove
the least recently used files (by mtime, touched on hits) down to 90 % of the budget.
A directory that cannot be created, written (read-only, full) or that vanishes degrades to
the in-memory caches with one warning per process; a request never fails because of it.
"""

import array
import atexit
import hashlib
import logging
import mmap
import os
import queue
import struct
import sys
import threading
import time
import warnings
import weakref
from typing import Any, Callable, Hashable, Optional, Tuple

from . import _core
from .build_id import package_source_id
from .disk_layers import HEADER as _HEADER
from .disk_layers import (LAYER_JOB, LAYER_SUFFIX, LayerStore, check_header, open_checked, pack_header,
                          take_core_bytes)
from .disk_key import _NO_KEY, _feed_key, decode_key, encode_key
from .disk_preload import PRELOAD_JOB, Preloader
from .envvars import env_flag

__all__ = ["DiskCache", "DISK_FORMAT_VERSION", "DEFAULT_DISK_LIMIT_BYTES", "ENV_CACHE_DIR", "ENV_CACHE_MMAP",
           "resolve_cache_dir", "vocab_fingerprint"]

logger = logging.getLogger(__name__)

#: Bumped whenever the file layout changes (it is part of every file name and header).
#: 3: a grammar file's payload carries its compile-cache key (``encode_key``).
DISK_FORMAT_VERSION = 3
#: The directory's byte budget when none is given: finite, so a node's disk stays bounded.
DEFAULT_DISK_LIMIT_BYTES = 1 << 30
#: The environment variable naming the directory when the compiler is given none.
ENV_CACHE_DIR = "XGRAMMAR2_CACHE_DIR"

_MAGIC = b"XGR2DSK\x00"
_SUFFIX = ".xgc"
#: A payload larger than this is not read (nor written): no real grammar comes near it.
_MAX_PAYLOAD = 1 << 30
#: Mask entry packs (xgr_mask_pack_build): the cross-grammar cache's shareable entries,
#: one immutable file per flush, named ``<vocabulary tag>-<sha256>.xgm``.
_PACK_MAGIC = b"XGR2MPK\x00"
_PACK_SUFFIX = ".xgm"
#: A process looks for packs other processes wrote at most this often (and always on its
#: first compile), and writes its own new entries at most this often (and on flush/exit).
_PACK_SCAN_S = 1.0
_PACK_WRITE_S = 2.0
#: After a compile or a hit, the background thread also writes the entries computed since
#: (decoding computes most of them, after the compile) on its own: _PACK_WRITE_S later, then
#: at doubling intervals up to this, reset by the next compile. A process that is killed
#: (vLLM SIGKILLs its engine core on shutdown, so exit hooks never run) keeps all but the
#: last interval's entries, and a long-running one adds at most one pack a minute.
_PACK_IDLE_MAX_S = 60.0
#: ``XGRAMMAR2_CACHE_MMAP=0`` makes a process copy the entries of the packs it loads instead of
#: mapping the files read-only and letting the entries borrow their arrays from the mapping
#: (the default; network filesystems are read into memory either way: ``xgr_file_map_open``).
ENV_CACHE_MMAP = "XGRAMMAR2_CACHE_MMAP"


def _pack_mmap() -> bool:
    return env_flag(ENV_CACHE_MMAP, True)
#: Per process and directory+vocabulary: the packs already loaded and the insertion number
#: up to which this process's entries were written (shared by every compiler there).
_pack_states: "dict[Tuple[str, bytes], _PackState]" = {}
_pack_states_lock = threading.Lock()


class _PackState:
    def __init__(self) -> None:
        self.lock = threading.Lock()  # held while packs are loaded or one is written
        self.loaded: set = set()
        self.seq = 0
        self.last_scan = -1e9
        self.last_write = -1e9
        # timed writes by the background thread (DiskCache._arm_pack_timer)
        self.due: Optional[float] = None
        self.interval = _PACK_WRITE_S
        # background loads (DiskCache._request_sync): at most one queued or running
        self.state_lock = threading.Lock()
        self.pending = False
        self.last_request = -1e9
        self.idle = threading.Event()
        self.idle.set()

    def reset_after_fork(self) -> None:
        self.due = None
        self.interval = _PACK_WRITE_S
        self.lock = threading.Lock()
        self.state_lock = threading.Lock()
        self.pending = False
        self.last_request = -1e9
        self.idle = threading.Event()
        self.idle.set()


#: Grammar files up to this size are read with one read (larger ones are mapped).
_READ_MAX = 1 << 20
#: A hit touches its file's mtime (the LRU order) unless it is younger than this.
_TOUCH_S = 60.0


def _read_exact(fd: int, size: int) -> Optional[bytes]:
    """The file's ``size`` bytes from ``fd`` (one read for a regular file), or None when it
    holds fewer or more."""
    data = os.read(fd, size + 1)
    if len(data) < size:  # a short read: only at the end of the file, or a special file
        parts = [data]
        got = len(data)
        while got <= size:
            more = os.read(fd, size + 1 - got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        data = b"".join(parts)
    return data if len(data) == size else None


def vocab_fingerprint(tokenizer_info: Any) -> bytes:
    """What a cache directory knows a vocabulary by (the name prefix and header of every file):
    SHA-256 of the tokenizer info's metadata (vocabulary type and size, prefix space, stop,
    special and added ids) and of every token with its kind (text or bytes): the tokens'
    kinds, their lengths and their concatenation. The same content as the tokenizer info's
    serialization (docs/serialization.md), hashed without a Python step per token when the
    tokens are all text or all bytes: it is computed when a compiler with a directory is made,
    which an engine does on its first request. Remembered on the object."""
    fp = getattr(tokenizer_info, "_xgr2_disk_vocab_fp", None)
    if isinstance(fp, bytes):
        return fp
    vocab = tokenizer_info.encoded_vocab
    types = set(map(type, vocab))
    if types <= {str}:
        kinds = b"text"
        data = "".join(vocab).encode("utf-8", "surrogatepass")  # lengths in code points
    elif types <= {bytes}:
        kinds = b"bytes"
        data = b"".join(vocab)
    else:
        kinds = b"mixed:" + bytes(not isinstance(t, str) for t in vocab)
        vocab = [t.encode("utf-8", "surrogatepass") if isinstance(t, str) else bytes(t) for t in vocab]
        data = b"".join(vocab)
    lengths = array.array("Q", map(len, vocab))
    if sys.byteorder != "little":
        lengths.byteswap()
    h = hashlib.sha256(b"xgrammar2-vocabulary\0")
    meta = tokenizer_info.dump_metadata().encode("utf-8")
    for part in (meta, kinds, lengths.tobytes(), data):
        h.update(b"%d:" % len(part))
        h.update(part)
    fp = h.digest()
    try:
        setattr(tokenizer_info, "_xgr2_disk_vocab_fp", fp)
    except AttributeError:  # a class with __slots__: computed again next time
        pass
    return fp


#: Temporary files older than this (a writer that died mid-write) are removed by scans.
_STALE_TMP_S = 3600.0

_build_id: Optional[bytes] = None
_build_lock = threading.Lock()

#: Caches with a writer thread, so that writes queued just before the process exits still
#: reach the disk (a server that stops right after compiling restarts warm).
_live: "weakref.WeakSet[DiskCache]" = weakref.WeakSet()
#: How long the exit hook waits for each cache's queued writes.
_EXIT_FLUSH_S = 2.0


def _flush_at_exit() -> None:
    for cache in list(_live):
        try:
            cache.flush(_EXIT_FLUSH_S)
        except Exception:  # noqa: BLE001 - never fail an exit
            pass


atexit.register(_flush_at_exit)

#: Every cache of the process, so a forked child can drop the parent's background thread.
_caches: "weakref.WeakSet[DiskCache]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """A forked child has none of the parent's threads: each cache starts its own again
    (with fresh locks and queue), and pack loads the parent had in flight are forgotten."""
    global _pack_states_lock, _build_lock
    _pack_states_lock = threading.Lock()
    _build_lock = threading.Lock()
    for st in list(_pack_states.values()):
        st.reset_after_fork()
    for cache in list(_caches):
        cache._reset_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _core_build_id() -> bytes:
    """SHA-256 of the core's shared library: a rebuilt core (whose lowering may differ)
    never reads another build's files."""
    global _build_id
    with _build_lock:
        if _build_id is None:
            h = hashlib.sha256()
            path = getattr(_core.lib, "__file__", None) or _core_library_path()
            try:
                with open(path, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
            except (OSError, TypeError):
                h.update(b"unknown-build")
            _build_id = h.digest()
        return _build_id


def _core_library_path() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    for name in sorted(os.listdir(here)):
        if name.startswith("_xgr2_cffi") and name.endswith((".so", ".pyd", ".dylib")):
            return os.path.join(here, name)
    return ""


def resolve_cache_dir(cache_dir: Any) -> Optional[str]:
    """The directory a compiler uses: ``cache_dir`` when given (False or "" = none), else
    ``$XGRAMMAR2_CACHE_DIR`` when set and non-empty, else None (no disk cache)."""
    if cache_dir is False:
        return None
    if cache_dir is None or cache_dir is True:
        env = os.environ.get(ENV_CACHE_DIR, "")
        return env or None
    path = os.fspath(cache_dir)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    return path or None


def _touch(paths: Tuple[str, ...]) -> None:
    """Sets each file's mtime to now (the LRU order); a file gone meanwhile is skipped."""
    for p in paths:
        try:
            os.utime(p)
        except OSError:
            pass


def _pack_payload(linked: bool, warns: Tuple[str, ...], key: bytes, image: bytes) -> bytes:
    parts = [struct.pack("<BI", 1 if linked else 0, len(warns))]
    for w in warns:
        b = w.encode("utf-8", "surrogatepass")
        parts.append(struct.pack("<I", len(b)))
        parts.append(b)
    parts.append(struct.pack("<I", len(key)))
    parts.append(key)
    parts.append(image)
    return b"".join(parts)


def _unpack_payload(buf: memoryview) -> Optional[Tuple[bool, Tuple[str, ...], memoryview, memoryview]]:
    """(linked, warnings, the key's encoding, image) of a payload, or None when it is
    malformed."""
    n = len(buf)
    if n < 5:
        return None
    linked, count = struct.unpack_from("<BI", buf, 0)
    if linked > 1 or count > n:
        return None
    pos = 5
    warns = []
    for _ in range(count):
        if pos + 4 > n:
            return None
        (k,) = struct.unpack_from("<I", buf, pos)
        pos += 4
        if k > n - pos:
            return None
        try:
            warns.append(bytes(buf[pos:pos + k]).decode("utf-8", "surrogatepass"))
        except UnicodeDecodeError:
            return None
        pos += k
    if pos + 4 > n:
        return None
    (k,) = struct.unpack_from("<I", buf, pos)
    pos += 4
    if k > n - pos:
        return None
    return bool(linked), tuple(warns), buf[pos:pos + k], buf[pos + k:]


_TOUCH_JOB = object()  # a queue item: touch these files (a hit's LRU touch)
_PACK_JOB = object()  # a queue item: write this process's new mask entries as a pack
_SYNC_JOB = object()  # a queue item: load the packs other processes wrote (sync_packs)


class DiskCache:
    """One compiler's view of a cache directory (thread-safe; any number of processes may
    share the directory)."""

    def __init__(self, path: str, vocab_fingerprint: bytes, options_digest: bytes,
                 limit_bytes: Optional[int] = None) -> None:
        limit_bytes = self._check_limit(limit_bytes)
        self.path = os.path.join(os.path.abspath(path), f"v{DISK_FORMAT_VERSION}")
        self.limit_bytes = limit_bytes
        self._vocab_fp = hashlib.sha256(vocab_fingerprint).digest()
        self._prefix = hashlib.sha256(
            b"xgrammar2-disk-cache\0" + str(DISK_FORMAT_VERSION).encode() + b"\0"
            + _core_build_id() + package_source_id() + self._vocab_fp + options_digest
            + b"\0fields").digest()
        self._pack_id = hashlib.sha256(
            b"xgrammar2-mask-pack\0" + str(DISK_FORMAT_VERSION).encode() + b"\0"
            + _core_build_id() + self._vocab_fp).digest()
        self._prefix_hash = hashlib.sha256(self._prefix)  # copied for each key digest
        with _pack_states_lock:
            self._packs = _pack_states.setdefault((self.path, self._pack_id), _PackState())
        self._vocab: Any = None  # the core's vocabulary handle, from the first load()
        # per thread: (key, digest) of its last miss, so the write that follows a miss does not
        # hash the request's text again
        self._last_miss = threading.local()
        self._lock = threading.Lock()
        self._warned = False
        self._writable = True
        self._ready = False
        self._since_scan = 0  # bytes written since this process last scanned
        self._queue: "queue.Queue[Any]" = queue.Queue(maxsize=256)
        self._writer: Optional[threading.Thread] = None
        #: Counters, for tests and benchmarks.
        self.hits = self.misses = self.rejected = self.writes = self.evictions = 0
        #: Mask entry packs loaded / written by this compiler, and the entries they held.
        self.pack_loads = self.pack_writes = self.pack_entries_loaded = self.pack_entries_written = 0
        #: Layer files (each grammar's own mask layers, disk_layers.py) loaded / written /
        #: refused, and the slot entries they held.
        self.layer_loads = self.layer_writes = self.layer_rejected = 0
        self.layer_entries_loaded = self.layer_entries_written = 0
        self._layers = LayerStore(self)
        #: Grammars of this process still alive somewhere (a request holds them), by key
        #: digest: a grammar the memory cache did not admit (a linked tool set's first
        #: compile) is handed out again instead of a second copy read from the file, which
        #: would start without the first one's masks and compete with it for the layer file.
        self._alive: "weakref.WeakValueDictionary[bytes, Any]" = weakref.WeakValueDictionary()
        #: Loads answered by such a live grammar (also counted in ``hits``).
        self.live_hits = 0
        #: The bounded warm start (disk_preload.py): grammar files read into memory by the
        #: background thread when the compiler is made, before any request asks for them.
        self._preload = Preloader(self)
        _caches.add(self)

    #: The format version and payload bound of every file (for disk_layers.LayerStore).
    format_version = DISK_FORMAT_VERSION
    max_payload = _MAX_PAYLOAD
    grammar_suffix = _SUFFIX
    #: A grammar file's key (for disk_preload.Preloader): decode_key, and what it gives for none.
    decode_key = staticmethod(decode_key)
    NO_KEY = _NO_KEY

    @staticmethod
    def mmap_packs() -> bool:
        """Whether pack and layer files are mapped (``XGRAMMAR2_CACHE_MMAP``)."""
        return _pack_mmap()

    def _reset_after_fork(self) -> None:
        self._lock = threading.Lock()
        self._queue = queue.Queue(maxsize=256)
        self._writer = None
        self._preload.reset_after_fork()

    @staticmethod
    def _check_limit(limit_bytes: Optional[int]) -> int:
        if limit_bytes is None:
            return DEFAULT_DISK_LIMIT_BYTES
        if isinstance(limit_bytes, bool) or not isinstance(limit_bytes, int) or limit_bytes < 0:
            raise ValueError(f"cache_dir_limit_bytes must be an int >= 0, got {limit_bytes!r}")
        return limit_bytes

    # ---- failures --------------------------------------------------------------------

    def _degrade(self, what: str, err: BaseException) -> None:
        """Stops writing (reads go on where they can) and warns once per process."""
        with self._lock:
            self._writable = False
            first = not self._warned
            self._warned = True
        if first:
            warnings.warn(f"xgrammar2: the compile cache directory {self.path} cannot be "
                          f"{what} ({err}); compiled grammars are cached in memory only",
                          RuntimeWarning, stacklevel=3)

    def _ensure_dir(self) -> bool:
        """Creates the directory (and the cache_dir above it) private to the user (0700);
        refuses one that another user owns. Existing directories keep their mode."""
        if self._ready:
            return True
        try:
            # the cache_dir and its version folder are made 0700 (the umask can only take
            # permissions away); folders above, and folders that exist, are left as they are
            top = os.path.dirname(self.path)
            os.makedirs(os.path.dirname(top), exist_ok=True)
            for d in (top, self.path):
                try:
                    os.mkdir(d, 0o700)
                except FileExistsError:
                    pass
            for d in (top, self.path):
                st = os.stat(d)
                if hasattr(os, "getuid") and st.st_uid != os.getuid():
                    raise PermissionError(f"{d} belongs to another user")
        except OSError as e:
            self._degrade("created", e)
            return False
        self._ready = True
        return True

    # ---- names -----------------------------------------------------------------------

    def key_digest(self, key: Hashable) -> bytes:
        """The content address of a compile-cache key: SHA-256 of the prefix and the key's
        fields, each typed and length-prefixed (``_feed_key``; the keys are tuples of str,
        bytes, int, bool and None)."""
        h = self._prefix_hash.copy()
        if type(key) is tuple:  # every compile key: _feed_key's encoding, without a call per field
            h.update(b"t%d:" % len(key))
            for k in key:
                t = type(k)
                if t is bytes:
                    h.update(b"b%d:" % len(k))
                    h.update(k)
                elif t is str:
                    b = k.encode("utf-8", "surrogatepass")
                    h.update(b"s%d:" % len(b))
                    h.update(b)
                else:
                    _feed_key(h, k)
        else:
            _feed_key(h, key)
        return h.digest()

    def file_for(self, digest: bytes) -> str:
        return self.path + os.sep + digest.hex() + _SUFFIX  # (os.path.join, without its checks)

    # ---- reading ---------------------------------------------------------------------

    def load(self, key: Hashable, make: Callable[[Any, bool, Tuple[str, ...]], Any],
             opts: Any, vocab: Any) -> Any:
        """The compiled grammar of ``key`` from the directory, or None. ``make(ptr, linked,
        warnings)`` wraps the core's handle. New mask entry packs are looked for in the
        background (at most once a second): the request never waits for them. A grammar the
        preload read (``disk_preload.py``) is taken from memory: no file is opened."""
        self._vocab = vocab
        self._request_sync(vocab)
        self._arm_pack_timer(reset=False)
        digest = self.key_digest(key)
        pre = None
        with self._lock:
            alive = self._alive.get(digest)
            if alive is None and (self._preload.active or self._preload.map or self._preload.adopted):
                pre = self._preload.take(digest)
        if alive is not None:
            self.hits += 1
            self.live_hits += 1
            return alive
        if pre is not None:
            result = make(pre.ptr, pre.linked, pre.warns)
            self.hits += 1
            self._preload.hits += 1
            self._remember(digest, result)
            if pre.layers >= 0:  # its layer file was loaded with it
                self.layer_loads += 1
                self.layer_entries_loaded += pre.loaded
            self._layers.track(digest, result, max(pre.layers, 0))
            self._touch_if_old(self.file_for(digest), digest, pre.mtime)  # (the preload touched nothing)
            return result
        path = self.file_for(digest)
        self._last_miss.entry = (key, digest)  # cleared below on a hit
        got = self.read_grammar(path, digest, vocab, opts)
        if got is None:
            self.misses += 1
            return None
        result = make(*got[:3])
        self.hits += 1
        self._last_miss.entry = None
        self._remember(digest, result)
        self._layers.attach(digest, result)
        self._touch_if_old(path, digest, got[4])
        return result

    def _touch_if_old(self, path: str, digest: bytes, mtime: float) -> None:
        """A hit's LRU touch: the order every process evicts by. A file touched (or written)
        within the last _TOUCH_S seconds is among the newest already, so it is not touched
        again. Its layer file (written after it, so no older unless evicted) goes with it.
        The background thread touches them (flush() waits for it): two utime calls off the
        request's thread."""
        if time.time() - mtime >= _TOUCH_S:
            paths = (path, self._layers.path_for(digest))
            if not self._queue_job(_TOUCH_JOB, paths):
                _touch(paths)

    def read_grammar(self, path: str, digest: bytes, vocab: Any, opts: Any,
                     foreign_ok: bool = False, reject: Optional[Callable[..., None]] = None) -> Any:
        """(the core's handle, linked, warnings, its key's encoding, the file's mtime) of the grammar file at
        ``path``, named by ``digest``, after every check; None when there is none or it fails a
        check (then ``reject(path, why, stat)``, by default ``_reject``: removed, counted in
        ``rejected``). With ``foreign_ok`` (the preload, which does not know whose a file is),
        a file whose header names another vocabulary is left alone after reading the header:
        False."""
        if reject is None:
            reject = self._reject
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return None
        mm = None
        try:
            try:
                st = os.fstat(fd)
                size = st.st_size
                if size < _HEADER.size or size > _HEADER.size + _MAX_PAYLOAD:
                    return reject(path, "size", st)
                if foreign_ok:
                    head = os.pread(fd, _HEADER.size, 0)
                    magic, version, flags, vfp = _HEADER.unpack_from(head, 0)[:4]
                    if magic == _MAGIC and version == DISK_FORMAT_VERSION and vfp != self._vocab_fp:
                        return False
                if size <= _READ_MAX:
                    # one read into one buffer: cheaper than mapping (and unmapping) a small
                    # file; a renamed-over file is another inode, so this one cannot change
                    data = _read_exact(fd, size)
                    if data is None:
                        return reject(path, "unreadable", st)
                    view = memoryview(data)
                else:
                    mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
                    view = memoryview(mm)
            except (OSError, ValueError, struct.error):
                return reject(path, "unreadable")
        finally:
            os.close(fd)
        try:
            try:
                got = self._load_mapped(view, digest, path, opts, vocab, st, reject)
            finally:
                view.release()
        finally:
            if mm is not None:
                mm.close()
        return None if got is None else got + (st.st_mtime,)

    def _remember(self, digest: bytes, compiled: Any) -> None:
        """Hands ``compiled`` out for ``digest`` while it lives (``_alive``)."""
        try:
            with self._lock:
                self._alive[digest] = compiled
        except TypeError:  # not weakly referenceable: nothing to share
            pass

    def _reject(self, path: str, why: str, st: Optional[os.stat_result] = None) -> None:
        """A file that fails a check: removed so the compile rewrites it (the caller counts
        the miss), and counted in ``rejected`` unless someone else removed it first (the
        preload and a request, or two processes, that read it at once). With ``st`` (the
        file as it was read), a file renamed over it since (a rewrite) is left alone."""
        logger.debug("xgrammar2 disk cache: ignoring %s (%s)", path, why)
        try:
            if st is not None:
                now = os.stat(path)
                if (now.st_ino, now.st_dev) != (st.st_ino, st.st_dev):
                    return None
            os.unlink(path)
        except FileNotFoundError:
            return None
        except OSError:
            pass
        self.rejected += 1
        return None

    def _load_mapped(self, view: memoryview, digest: bytes, path: str, opts: Any, vocab: Any,
                     st: Optional[os.stat_result], reject: Callable[..., None]
                     ) -> Optional[Tuple[Any, bool, Tuple[str, ...], bytes]]:
        """(the core's handle, linked, warnings, its key's encoding) of a grammar file's bytes after every check,
        else None (``reject`` called: the file is removed)."""
        magic, version, flags, vfp, kd, plen, csum = _HEADER.unpack_from(view, 0)
        if magic != _MAGIC or version != DISK_FORMAT_VERSION or flags != 0:
            return reject(path, "header", st)
        if vfp != self._vocab_fp:
            return reject(path, "vocabulary", st)
        if kd != digest:
            return reject(path, "key", st)
        if plen != len(view) - _HEADER.size:
            return reject(path, "length", st)
        payload = view[_HEADER.size:]
        if hashlib.sha256(payload).digest() != csum:
            return reject(path, "checksum", st)
        parts = _unpack_payload(payload)
        if parts is None:
            return reject(path, "payload", st)
        linked, warns, key, image = parts
        ffi, lib = _core.ffi, _core.lib
        out = ffi.new("xgr_compiled **")
        buf = ffi.from_buffer(image)
        rc = lib.xgr_compiled_from_image(buf, len(image), vocab, opts, out)
        if rc != 0:
            msg = ffi.string(lib.xgr_last_error()).decode("utf-8", "replace")
            return reject(path, f"image: {msg}", st)
        return ffi.gc(out[0], lib.xgr_compiled_release), linked, warns, bytes(key)

    # ---- mask entry packs ------------------------------------------------------------

    def _pack_prefix(self) -> str:
        return self._pack_id.hex()[:32] + "-"

    def prefetch_packs(self, vocab: Any, opts: Any = None) -> None:
        """Starts loading this vocabulary's mask entry packs on the background thread (the
        compiler calls it when it is made, so a server's first request finds them loaded;
        a compile never waits for it), then, given the compiler's options ``opts``, the
        directory's most recently used grammar files (``disk_preload.py``; once per cache)."""
        self._vocab = vocab
        self._request_sync(vocab, force=True)
        if opts is not None:
            self._preload.start(vocab, opts)

    def wait_packs(self, timeout: Optional[float] = None) -> bool:
        """Waits until no background pack load is queued or running (tests, benchmarks);
        False on timeout."""
        return self._packs.idle.wait(timeout)

    def wait_preload(self, timeout: Optional[float] = None) -> bool:
        """Waits until the preload (if one was started) is done (tests, benchmarks); False on
        timeout."""
        return self._preload.idle.wait(timeout)

    @property
    def preload(self) -> Preloader:
        """The preload's state and counters (``loads``, ``hits``, ``skipped``, ``dropped``,
        ``held`` bytes, ``budget``, ``max_files``)."""
        return self._preload

    def _request_sync(self, vocab: Any, force: bool = False) -> None:
        """Queues a sync_packs on the background thread unless one is queued or running, or
        (without ``force``) one was queued less than a second ago."""
        st = self._packs
        now = time.monotonic()
        if not force and (st.pending or now - st.last_request < _PACK_SCAN_S):
            return  # (read without the lock: the common case of a hit; checked again below)
        with st.state_lock:
            if st.pending or (not force and now - st.last_request < _PACK_SCAN_S):
                return
            st.pending = True
            st.last_request = now
            st.idle.clear()
        queued = False
        try:
            self._start_worker()
            self._queue.put_nowait((_SYNC_JOB, vocab))
            queued = True
        except (queue.Full, RuntimeError):
            pass
        finally:
            if not queued:
                self._sync_done()

    def _queue_job(self, kind: Any, arg: Any) -> bool:
        """Queues a job for the background thread; False when the queue is full."""
        try:
            self._start_worker()
            self._queue.put_nowait((kind, arg))
            return True
        except (queue.Full, RuntimeError):
            return False

    def _sync_done(self) -> None:
        st = self._packs
        with st.state_lock:
            st.pending = False
            st.idle.set()

    def sync_packs(self, vocab: Any, force: bool = False) -> int:
        """Loads the mask entry packs of this vocabulary that this process has not loaded
        yet (at most once a second unless ``force``); returns how many were loaded. A pack
        that fails a check is removed and counted in ``rejected``."""
        st = self._packs
        now = time.monotonic()
        if not force and now - st.last_scan < _PACK_SCAN_S:
            return 0
        # a pack being written (fsync) holds the lock: a request never waits for the disk,
        # it looks again on a later compile
        if not st.lock.acquire(blocking=force):
            return 0
        try:
            st.last_scan = now
            prefix = self._pack_prefix()
            try:
                names = [n for n in os.listdir(self.path)
                         if n.startswith(prefix) and n.endswith(_PACK_SUFFIX) and n not in st.loaded]
            except OSError:
                return 0
            done = 0
            for name in sorted(names):
                st.loaded.add(name)  # once per process, loaded or refused
                done += self._load_pack(os.path.join(self.path, name), vocab)
            return done
        finally:
            st.lock.release()

    def _load_pack(self, path: str, vocab: Any) -> int:
        """Checks and loads one pack: mapped read-only, its entries borrowing their arrays
        from the mapping (no copy), unless XGRAMMAR2_CACHE_MMAP=0 (then copied)."""
        if _pack_mmap():
            return self._load_pack_mapped(path, vocab)
        try:
            with open(path, "rb") as f:
                data = f.read(_HEADER.size + _MAX_PAYLOAD + 1)
        except OSError:
            return 0
        view = memoryview(data)
        plen, why = self._check_pack(view)
        if plen < 0:
            return self._reject_pack(path, why)
        payload = view[_HEADER.size:]
        ffi, lib = _core.ffi, _core.lib
        n = ffi.new("int32_t *")
        if lib.xgr_mask_pack_load(ffi.from_buffer(payload), len(payload), vocab, n) != 0:
            msg = ffi.string(lib.xgr_last_error()).decode("utf-8", "replace")
            return self._reject_pack(path, f"pack: {msg}")
        self._loaded_pack(path, n[0])
        return 1

    def _check_pack(self, view: memoryview) -> Tuple[int, str]:
        """(payload length, "") for a pack file's bytes whose header, length and checksum
        are sound, else (-1, the failed check)."""
        return check_header(view, _PACK_MAGIC, DISK_FORMAT_VERSION, self._vocab_fp, self._pack_id, "pack ")

    def _loaded_pack(self, path: str, entries: int) -> None:
        self.pack_loads += 1
        self.pack_entries_loaded += entries
        try:
            os.utime(path)  # the LRU order every process evicts by
        except OSError:
            pass

    def _load_pack_mapped(self, path: str, vocab: Any) -> int:
        ffi, lib = _core.ffi, _core.lib
        fm, plen, why = open_checked(path, lib.XGR_FILE_MAP_AUTO, _HEADER.size + _MAX_PAYLOAD,
                                     self._check_pack, too_large="pack size")
        if fm is None:  # removed meanwhile (evicted, or replaced and gone), unreadable, or failed a check
            return self._reject_pack(path, why) if why else 0
        try:
            n = ffi.new("int32_t *")
            if lib.xgr_mask_pack_load_mapped(fm, _HEADER.size, plen, vocab, n) != 0:
                msg = ffi.string(lib.xgr_last_error()).decode("utf-8", "replace")
                return self._reject_pack(path, f"pack: {msg}")
        finally:
            lib.xgr_file_map_release(fm)  # the loaded entries hold their own references
        self._loaded_pack(path, n[0])
        return 1

    def _reject_pack(self, path: str, why: str) -> int:
        """A pack that fails a check: removed (its entries are computed again)."""
        self.rejected += 1
        logger.debug("xgrammar2 disk cache: ignoring %s (%s)", path, why)
        self._cleanup(path)
        return 0

    def write_pack(self) -> bool:
        """Writes the mask entries this process computed since its last pack (tmp file,
        fsync, atomic rename); False when there are none or the directory cannot take it."""
        vocab = self._vocab
        if vocab is None or not self._writable or not self._ensure_dir():
            return False
        ffi, lib = _core.ffi, _core.lib
        st = self._packs
        with st.lock:
            out = ffi.new("uint8_t **")
            n = ffi.new("size_t *")
            seq = ffi.new("uint64_t *")
            count = ffi.new("int32_t *")
            if lib.xgr_mask_pack_build(vocab, st.seq, out, n, seq, count) != 0:
                return False
            payload = take_core_bytes(out, n, keep=count[0] > 0)
            if not payload or len(payload) > _MAX_PAYLOAD or _HEADER.size + len(payload) > self.limit_bytes:
                st.seq = seq[0]
                return False
            csum = hashlib.sha256(payload).digest()
            name = self._pack_prefix() + csum.hex() + _PACK_SUFFIX
            if not self._publish_file(os.path.join(self.path, name), _PACK_MAGIC, self._pack_id,
                                      payload, csum):
                return False
            st.seq = seq[0]
            st.loaded.add(name)  # its entries are this process's own
        self.pack_writes += 1
        self.pack_entries_written += count[0]
        return True

    def _write_file(self, path: str, data: bytes) -> None:
        """Publishes ``data`` at ``path`` atomically: a private temporary file, fsync, then
        a rename over ``path``. On OSError the temporary file is removed and the error raised."""
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
                         0o600)
            try:
                view = memoryview(data)
                while view:
                    k = os.write(fd, view)
                    view = view[k:]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except OSError:
            self._cleanup(tmp)
            raise

    def _publish_file(self, path: str, magic: bytes, key: bytes, payload: bytes,
                      csum: Optional[bytes] = None) -> bool:
        """Publishes a cache file (header with ``magic`` and ``key``, then ``payload``) at
        ``path`` (``_write_file``), and evicts when this process wrote a sixteenth of the
        budget since its last scan; False when the directory cannot take it (a vanished
        directory is made again by the next write)."""
        try:
            self._write_file(path, pack_header(magic, DISK_FORMAT_VERSION, self._vocab_fp, key,
                                               payload, csum) + payload)
        except FileNotFoundError:  # the directory vanished: the next write makes it again
            self._ready = False
            return False
        except OSError as e:
            self._degrade("written", e)
            return False
        self._wrote(_HEADER.size + len(payload))
        return True

    def _wrote(self, size: int, first: bool = False) -> None:
        """Counts ``size`` bytes written; evicts after a sixteenth of the budget (or ``first``)."""
        self._since_scan += size
        if self._since_scan * 16 >= self.limit_bytes or first:
            self.evict()

    # ---- writing ---------------------------------------------------------------------

    def _start_worker(self) -> None:
        """Starts this cache's background thread (writes, pack loads) once."""
        with self._lock:
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_loop, daemon=True,
                                                name="xgrammar2-disk-cache")
                self._writer.start()
                _live.add(self)

    def store(self, key: Hashable, compiled: Any) -> None:
        """Queues ``compiled`` to be written under ``key`` by a background thread (the
        request does not wait for the disk); dropped when the queue is full."""
        if not self._writable:
            return
        self._start_worker()
        last = getattr(self._last_miss, "entry", None)
        self._last_miss.entry = None
        digest = last[1] if last is not None and last[0] is key else None
        if digest is not None:  # (a load of this key just missed: the common case)
            self._remember(digest, compiled)
        self._arm_pack_timer(reset=True)
        try:
            self._queue.put_nowait(((key, digest), compiled))
            now = time.monotonic()
            if now - self._packs.last_write >= _PACK_WRITE_S:
                self._packs.last_write = now
                self._queue.put_nowait((_PACK_JOB, None))
        except queue.Full:
            pass

    def flush(self, timeout: Optional[float] = None) -> None:
        """Writes this process's new mask entries as a pack (when it compiled through this
        cache) and waits until every queued write is done (tests, benchmarks, shutdown)."""
        if self._writer is None:
            if self._vocab is not None:  # only hits so far: no writer thread to wait for
                try:
                    self.write_pack()
                    self._layers.write_all()
                except Exception as e:  # noqa: BLE001 - a write never fails a caller
                    logger.debug("xgrammar2 disk cache: pack write failed: %s", e)
            return
        self._queue.put((_PACK_JOB, None))
        done = threading.Event()
        self._queue.put((None, done))
        done.wait(timeout)

    def _arm_pack_timer(self, reset: bool) -> None:
        """Schedules a timed pack write on the background thread: ``_PACK_WRITE_S`` from now
        when ``reset`` (a compile) or when none is scheduled (a hit)."""
        st = self._packs
        if not reset and st.due is not None:
            return  # (read without the lock: a hit while a write is scheduled)
        with st.state_lock:
            if reset or st.due is None:
                st.interval = _PACK_WRITE_S
                st.due = time.monotonic() + _PACK_WRITE_S

    def _pack_timeout(self) -> Optional[float]:
        st = self._packs
        with st.state_lock:
            due = st.due
        return None if due is None else max(0.0, due - time.monotonic())

    def _timed_pack_write(self) -> None:
        """The timer fired: writes the entries computed since the last pack (if any) and
        doubles the interval up to ``_PACK_IDLE_MAX_S``."""
        st = self._packs
        with st.state_lock:
            if st.due is None or time.monotonic() < st.due:
                return
            st.interval = min(st.interval * 2.0, _PACK_IDLE_MAX_S)
            st.due = time.monotonic() + st.interval
        if self._vocab is not None:
            self.write_pack()
            self._layers.write_all()
            st.last_write = time.monotonic()

    def _write_loop(self) -> None:
        while True:
            try:
                key, compiled = self._queue.get(timeout=self._pack_timeout())
            except queue.Empty:
                try:
                    self._timed_pack_write()
                except Exception as e:  # noqa: BLE001 - a write never fails a request
                    logger.debug("xgrammar2 disk cache: timed pack write failed: %s", e)
                continue
            if key is None:
                compiled.set()
                continue
            try:
                if key is _SYNC_JOB:
                    try:
                        self.sync_packs(compiled, force=True)
                    finally:
                        self._sync_done()
                    continue
                if key is _TOUCH_JOB:
                    _touch(compiled)
                    continue
                if key is LAYER_JOB:
                    self._layers.attach_now(*compiled)
                    continue
                if key is PRELOAD_JOB:
                    self._preload.run(*compiled)
                    continue
                if key is _PACK_JOB:
                    self.write_pack()
                    self._layers.write_all()
                    continue
                self.write(key[0], compiled, key[1])
            except Exception as e:  # noqa: BLE001 - a write never fails a request
                logger.debug("xgrammar2 disk cache: write failed: %s", e)

    def write(self, key: Hashable, compiled: Any, digest: Optional[bytes] = None) -> bool:
        """Writes ``compiled`` under ``key`` (whose ``key_digest`` is ``digest`` when given)
        now (tmp file, fsync, atomic rename); False when it has no image or the directory
        cannot take it."""
        if not self._writable or not self._ensure_dir():
            return False
        ffi, lib = _core.ffi, _core.lib
        out = ffi.new("uint8_t **")
        n = ffi.new("size_t *")
        if lib.xgr_compiled_image(compiled._ptr, out, n) != 0 or out[0] == ffi.NULL:
            return False
        image = take_core_bytes(out, n)
        payload = _pack_payload(bool(compiled._linked), tuple(compiled.warnings), encode_key(key), image)
        if len(payload) > _MAX_PAYLOAD or _HEADER.size + len(payload) > self.limit_bytes:
            return False
        if digest is None:
            digest = self.key_digest(key)
        header = pack_header(_MAGIC, DISK_FORMAT_VERSION, self._vocab_fp, digest, payload)
        path = self.file_for(digest)
        try:
            self._write_file(path, header + payload)
        except FileNotFoundError as e:  # the directory vanished: make it again, once
            self._ready = False
            if self._ensure_dir():
                return self._retry_once(key, compiled, e)
            return False
        except OSError as e:  # read-only, full, permissions
            self._degrade("written", e)
            return False
        self.writes += 1
        self._remember(digest, compiled)
        self._layers.track(digest, compiled)
        self._wrote(_HEADER.size + len(payload), first=self.writes == 1)
        return True

    def _retry_once(self, key: Hashable, compiled: Any, first: BaseException) -> bool:
        if getattr(self, "_retrying", False):
            self._degrade("written", first)
            return False
        self._retrying = True
        try:
            return self.write(key, compiled)
        finally:
            self._retrying = False

    @staticmethod
    def _cleanup(tmp: str) -> None:
        try:
            os.unlink(tmp)
        except OSError:
            pass

    # ---- budget ----------------------------------------------------------------------

    def scan(self) -> Tuple[int, list]:
        """(total bytes, [(mtime, size, path)]) of the directory's cache files; removes
        temporary files a dead writer left behind."""
        total = 0
        files = []
        now = time.time()
        try:
            it = os.scandir(self.path)
        except OSError:
            return 0, []
        with it:
            for ent in it:
                try:
                    st = ent.stat(follow_symlinks=False)
                except OSError:
                    continue
                if ent.name.endswith(".tmp"):
                    if now - st.st_mtime > _STALE_TMP_S:
                        self._cleanup(ent.path)
                    else:
                        total += st.st_size
                    continue
                if not ent.name.endswith((_SUFFIX, _PACK_SUFFIX, LAYER_SUFFIX)):
                    continue
                total += st.st_size
                files.append((st.st_mtime, st.st_size, ent.path))
        return total, files

    def evict(self) -> int:
        """Removes least recently used files until the directory holds at most 90 % of the
        budget (when it holds more than the budget); returns how many were removed. Any
        process may run it at any time: a file another process removed first is skipped."""
        self._since_scan = 0
        total, files = self.scan()
        if total <= self.limit_bytes:
            return 0
        files.sort()
        target = self.limit_bytes * 9 // 10
        removed = 0
        for _, size, path in files:
            if total <= target:
                break
            try:
                os.unlink(path)
                removed += 1
            except FileNotFoundError:
                pass
            except OSError:
                break
            total -= size
        self.evictions += removed
        return removed

    def size_bytes(self) -> int:
        return self.scan()[0]


def check_file_bytes(data: bytes) -> Optional[Tuple[bool, Tuple[str, ...], bytes]]:
    """(linked, warnings, image) of a cache file's bytes when its header, length, checksum
    and payload structure are sound, else None (the image itself is checked by the core when
    loaded). For tests and tools that audit a directory."""
    view = memoryview(data)
    if len(view) < _HEADER.size:
        return None
    magic, version, flags, _vfp, _kd, plen, csum = _HEADER.unpack_from(view, 0)
    if magic != _MAGIC or version != DISK_FORMAT_VERSION or flags != 0:
        return None
    if plen != len(view) - _HEADER.size:
        return None
    payload = view[_HEADER.size:]
    if hashlib.sha256(payload).digest() != csum:
        return None
    parts = _unpack_payload(payload)
    if parts is None:
        return None
    return parts[0], parts[1], bytes(parts[3])
