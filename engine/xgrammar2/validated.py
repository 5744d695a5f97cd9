"""Requests a front end accepted, remembered in the on-disk cache directory.

An engine's API server (vLLM validates structured-output requests there, before they reach
the engine) runs xgrammar2's front ends on every new request so that what the engine cannot
compile is refused with an HTTP 400. Converting a 100-tool request or a large JSON schema
takes 10-300 ms on that process's event loop; the plugins remember successes in memory, but
after a restart every tool set is converted again although the engine's compiled grammar is
already in the directory (whose files the API server cannot name: they are keyed by the
engine's vocabulary fingerprint). This module keeps, beside the compiled grammars, one empty
marker file per accepted request: ``<dir>/v<format>/validated/<sha256>.ok``, the name a digest
of the request's key, the options that change what compiles, the core build and the Python
package's sources (a marker never outlives the code that accepted the request). A lookup is one
``stat``; a marker is created with ``O_EXCL`` (no lock, no partial file: it has no content).

Only successes are remembered (a refused request is converted again and refused with its own
message). The marker count is bounded (``max_files``, least recently used removed, touched at
most once an hour on a hit), and a directory that cannot be created or written degrades to no
markers with one warning, never a failed request. A marker is trusted as far as the directory
is: whoever can write it can make the API server accept a request the engine then fails
(HTTP 500 instead of 400), which is why the directory is private to its user
(docs/disk-cache.md, "Sharing across nodes").
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
import warnings
from typing import Hashable, Optional

from .build_id import package_source_id
from .disk_cache import DISK_FORMAT_VERSION, _core_build_id, _feed_key

__all__ = ["ValidatedRequests", "DEFAULT_MAX_MARKERS"]

#: The most markers a directory keeps (each is an empty file: an inode and a directory entry).
DEFAULT_MAX_MARKERS = 1 << 16
_SUFFIX = ".ok"
#: A hit refreshes the marker's mtime (its LRU age) at most this often.
_TOUCH_S = 3600.0
#: The directory is scanned for the bound after this many new markers.
_SCAN_EVERY = 256


class ValidatedRequests:
    """Markers of accepted requests in ``<cache_dir>/v<format>/validated`` (thread-safe; any
    number of processes may share the directory)."""

    def __init__(self, cache_dir: str, options_digest: bytes = b"",
                 max_files: int = DEFAULT_MAX_MARKERS) -> None:
        if isinstance(max_files, bool) or not isinstance(max_files, int) or max_files < 1:
            raise ValueError(f"max_files must be an int >= 1, got {max_files!r}")
        self.path = os.path.join(os.path.abspath(os.fspath(cache_dir)), f"v{DISK_FORMAT_VERSION}",
                                 "validated")
        self.max_files = max_files
        self._prefix = hashlib.sha256(
            b"xgrammar2-validated\0" + str(DISK_FORMAT_VERSION).encode() + b"\0" + _core_build_id()
            + package_source_id() + b"\0" + options_digest).digest()
        self._lock = threading.Lock()
        self._ready = False
        self._disabled = False
        self._created = 0
        #: Counters, for tests.
        self.hits = self.misses = self.writes = self.evictions = 0

    def _file(self, key: Hashable) -> str:
        h = hashlib.sha256(self._prefix)
        _feed_key(h, key)
        return os.path.join(self.path, h.hexdigest() + _SUFFIX)

    def seen(self, key: Hashable) -> bool:
        """True when a process with the same code and options accepted ``key`` before."""
        if self._disabled:
            return False
        path = self._file(key)
        try:
            st = os.stat(path)
        except OSError:
            self.misses += 1
            return False
        self.hits += 1
        if time.time() - st.st_mtime > _TOUCH_S:
            try:
                os.utime(path)
            except OSError:
                pass
        return True

    def remember(self, key: Hashable) -> None:
        """Records that ``key`` was accepted (never raises)."""
        if self._disabled or not self._ensure_dir():
            return
        try:
            fd = os.open(self._file(key), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return
        except OSError as e:
            self._degrade(e)
            return
        os.close(fd)
        with self._lock:
            self.writes += 1
            self._created += 1
            scan = self._created >= _SCAN_EVERY
            if scan:
                self._created = 0
        if scan:
            self.evict()

    def evict(self) -> int:
        """Removes the least recently used markers down to 90 % of ``max_files`` when there
        are more than ``max_files``; returns how many were removed."""
        files = []
        try:
            with os.scandir(self.path) as it:
                for ent in it:
                    if not ent.name.endswith(_SUFFIX):
                        continue
                    try:
                        files.append((ent.stat(follow_symlinks=False).st_mtime, ent.path))
                    except OSError:
                        continue
        except OSError:
            return 0
        if len(files) <= self.max_files:
            return 0
        files.sort()
        removed = 0
        for _, path in files[:len(files) - self.max_files * 9 // 10]:
            try:
                os.unlink(path)
                removed += 1
            except OSError:
                pass
        self.evictions += removed
        return removed

    def _ensure_dir(self) -> bool:
        if self._ready:
            return True
        try:
            top = os.path.dirname(os.path.dirname(self.path))
            os.makedirs(os.path.dirname(top), exist_ok=True)
            for d in (top, os.path.dirname(self.path), self.path):
                try:
                    os.mkdir(d, 0o700)
                except FileExistsError:
                    pass
                st = os.stat(d)
                if hasattr(os, "getuid") and st.st_uid != os.getuid():
                    raise PermissionError(f"{d} belongs to another user")
        except OSError as e:
            self._degrade(e)
            return False
        self._ready = True
        return True

    def _degrade(self, err: BaseException) -> None:
        with self._lock:
            first = not self._disabled
            self._disabled = True
        if first:
            warnings.warn(f"xgrammar2: cannot record validated requests in {self.path} ({err}); "
                          "they are remembered in memory only", RuntimeWarning, stacklevel=3)


def open_validated(cache_dir: Optional[str], options_digest: bytes = b"") -> Optional[ValidatedRequests]:
    """A :class:`ValidatedRequests` for ``cache_dir``, or None when there is no directory."""
    if not cache_dir:
        return None
    return ValidatedRequests(cache_dir, options_digest)
