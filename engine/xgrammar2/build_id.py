"""What the Python side of xgrammar2 is, for cache names.

A compiled grammar on disk is the C core's lowering of what the Python front ends (JSON
schema, Lark, structural tags, tool calls) produced from a request. The core's build is in
every file name (``disk_cache._core_build_id``); the front ends are identified here, so that a
directory written by one version of the package's Python code is never read by another (a
converter fix changes the grammar a request compiles to without changing the core library).
"""

from __future__ import annotations

import hashlib
import os
import threading
from typing import Optional

__all__ = ["package_source_id"]

_id: Optional[bytes] = None
_lock = threading.Lock()


def package_source_id() -> bytes:
    """SHA-256 of the package version and of the name, size and modification time of every
    ``.py`` file of the installed package (computed once per process: one ``stat`` per file,
    about 0.3 ms; a reinstall of the same version therefore starts a new directory, a wasted
    compile at worst)."""
    global _id
    with _lock:
        if _id is None:
            from .version import __version__

            here = os.path.dirname(os.path.abspath(__file__))
            h = hashlib.sha256(b"xgrammar2-package\0" + str(__version__).encode() + b"\0")
            for root, dirs, files in os.walk(here):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                for name in sorted(files):
                    if not name.endswith(".py"):
                        continue
                    path = os.path.join(root, name)
                    try:
                        st = os.stat(path)
                    except OSError:
                        continue
                    rel = os.path.relpath(path, here).encode("utf-8", "surrogatepass")
                    h.update(b"%d:%s %d %d;" % (len(rel), rel, st.st_size, st.st_mtime_ns))
            _id = h.digest()
        return _id
