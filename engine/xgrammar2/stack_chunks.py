"""Python 3.11 and 3.12: calls across a frame-stack chunk boundary, kept cheap.

CPython 3.11 and 3.12 keep a thread's Python frames in chunks of 16 KiB. A call that does
not fit in the current chunk maps a new one, and the chunk is unmapped as soon as that call
returns; a loop deep in a recursion whose callee lands just past a chunk's end pays an
``mmap`` and a ``munmap`` per call (CPython gh-142183; 3.13 and 3.14 keep one chunk per
thread since). Where the boundary falls depends on the caller's depth, so any deep front-end
work can hit it by chance: the JSON-schema converter's intersections for JSONSchemaStore's
service-schema made 342k call pairs (2.1 s of 0.5 s), and wrapping one function in another
moved the boundary away.

The interpreter takes these chunks from its arena allocator. ``install()`` (called when
xgrammar2 is imported, on CPython 3.11 and 3.12) puts in front of it one that keeps up to four
freed blocks of at most 64 KiB for the next request of the same size (the extension's
``xgr2_py_arena_cache_*``, _py_arena.c) and hands everything else, the interpreter's
1 MiB object arenas included, to the allocator it replaced. ``XGRAMMAR2_STACK_CHUNK_CACHE=0``
leaves the interpreter's allocator alone.
"""

from __future__ import annotations

import sys
from typing import Tuple

from .envvars import env_flag

_installed = False


def applies() -> bool:
    """Whether this interpreter has the chunk boundary cost (CPython 3.11 or 3.12)."""
    return sys.implementation.name == "cpython" and (3, 11) <= sys.version_info[:2] < (3, 13)


def install() -> bool:
    """Installs the caching arena allocator once where it applies and is not switched off;
    True when it is in place."""
    global _installed
    if _installed:
        return True
    if not applies() or not env_flag("XGRAMMAR2_STACK_CHUNK_CACHE", True):
        return False
    try:
        from ._xgr2_cffi import lib  # type: ignore[import-not-found]
    except ImportError:  # (a tree without the extension: nothing to install)
        return False
    _installed = bool(lib.xgr2_py_arena_cache_install())
    return _installed


def counts() -> Tuple[int, int, int]:
    """(requests served from kept blocks, requests of kept sizes passed on, blocks kept when
    freed) since the install; zeros where it is not installed."""
    if not _installed:
        return (0, 0, 0)
    from ._xgr2_cffi import ffi, lib  # type: ignore[import-not-found]

    out = ffi.new("uint64_t[3]")
    lib.xgr2_py_arena_cache_counts(out)
    return (int(out[0]), int(out[1]), int(out[2]))
