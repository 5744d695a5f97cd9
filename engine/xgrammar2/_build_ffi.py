"""cffi build script for the C core (API / out-of-line mode).

The cdef is derived from ``csrc/include/xgr2.h`` at build time (comments and preprocessor
lines stripped, C++ guards dropped) so the binding can never drift from the header. Every
``csrc/**/*.c`` file is compiled into the one extension module ``xgrammar2._xgr2_cffi``.

Environment variables
---------------------
XGR2_SANITIZE=1  build with ASan + UBSan (run Python with ``LD_PRELOAD=$(gcc
                 -print-file-name=libasan.so)``).
XGR2_DEBUG=1     build with ``-O0 -g``.
XGR2_CFLAGS      extra compile flags appended last (space separated).
"""

import glob
import os
import re
import sys

from cffi import FFI

_HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(_HERE))
CSRC = os.path.join(ROOT, "csrc")
INCLUDE_DIR = os.path.join(CSRC, "include")
HEADER = os.path.join(INCLUDE_DIR, "xgr2.h")


def _strip_comments(text: str) -> str:
    # String literals never occur in xgr2.h declarations, so a plain regex is exact here.
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


_INT_DEFINE = re.compile(r"define\s+([A-Za-z_]\w*)\s+(\(?-?(?:0[xX][0-9a-fA-F]+|\d+)[uUlL]*\)?)\s*$")
_DECORATION_DEFINE = re.compile(r"define\s+([A-Za-z_]\w*)(?:\s+(__attribute__.*|__declspec.*))?\s*$")


def header_to_cdef(text: str) -> str:
    """Turns the public header into a cdef string that pycparser (cffi) accepts.

    Preprocessor directives are dropped, except object-like integer macros, which cffi
    understands. The bodies of ``#ifdef __cplusplus`` blocks (``extern "C" {`` and its closing
    brace) are skipped; other conditional blocks (the include guard) keep their bodies.
    Macros that expand to nothing or to an attribute (e.g. an export decoration) are
    removed from the declarations.
    """
    text = _strip_comments(text)
    # Join backslash-continued preprocessor lines before filtering them out.
    text = re.sub(r"\\\n", " ", text)
    out = []
    decorations = []
    stack = []  # one bool per open #if: True when this block's body is skipped
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#"):
            directive = s[1:].strip()
            if re.match(r"(ifdef|if)\s+(defined\s*\(?\s*)?__cplusplus", directive):
                stack.append(True)
            elif re.match(r"if", directive):
                stack.append(False)
            elif directive.startswith("endif"):
                if stack:
                    stack.pop()
            elif not any(stack):
                m = _INT_DEFINE.match(directive)
                if m:
                    out.append(f"#define {m.group(1)} {m.group(2).strip('()').rstrip('uUlL')}")
                else:
                    m = _DECORATION_DEFINE.match(directive)
                    # The include guard (XGR2_H) also matches: harmless to strip.
                    if m:
                        decorations.append(m.group(1))
            continue
        if any(stack):
            continue
        if s:
            out.append(line)
    cdef = "\n".join(out) + "\n"
    for name in decorations:
        cdef = re.sub(rf"\b{re.escape(name)}\b", "", cdef)
    return cdef


def source_files():
    """Every C source of the core, sorted, as paths relative to the build directory when
    possible (setuptools places objects by source path)."""
    files = sorted(glob.glob(os.path.join(CSRC, "**", "*.c"), recursive=True))
    cwd = os.path.abspath(os.getcwd())
    if cwd == ROOT:
        files = [os.path.relpath(f, ROOT) for f in files]
    return files


def compile_flags():
    cflags = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-fvisibility=hidden"]
    ldflags = []
    if os.environ.get("XGR2_DEBUG") == "1":
        cflags += ["-O0", "-g"]
    elif os.environ.get("XGR2_SANITIZE") == "1":
        cflags += ["-O1", "-g"]
    else:
        cflags += ["-O3"]
    if os.environ.get("XGR2_SANITIZE") == "1":
        san = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"]
        cflags += san
        ldflags += san
    extra = os.environ.get("XGR2_CFLAGS", "").split()
    cflags += extra
    if sys.platform == "win32":  # pragma: no cover - not a supported target
        cflags, ldflags = [], []
    return cflags, ldflags


# The generated wrapper code is cffi's, not ours: -Werror is meant for the core (compiled as
# separate translation units, unaffected by these pragmas). cffi 2.x generates warning-free
# code; the pragmas keep older or newer cffi releases from failing the build on warnings
# in code we do not control.
_PREAMBLE = """
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#endif
#include "xgr2.h"
""" + r"""
/* Python 3.11 and 3.12 keep Python frames in per-thread chunks (16 KiB) that are mmap'ed when
 * a call does not fit in the current one and munmap'ed when its first frame returns. A loop
 * whose callee's frame lands just past a chunk's end pays an mmap and a munmap per call
 * (CPython gh-142183, fixed in 3.13 and 3.14 by keeping one chunk per thread): the JSON-schema
 * converter's intersections of service-schema took 2.1 s instead of 0.5 s, 342k mmap/munmap
 * pairs. The interpreter takes these chunks from its arena allocator; this one (stack_chunks.py
 * installs it on those versions) keeps up to XGR2_ARENA_SLOTS freed blocks of at most
 * XGR2_ARENA_MAX bytes for the next request of the same size and hands everything else to the
 * allocator it replaced, which also frees every block in the end. The interpreter calls it with
 * its GIL held; the flag makes it safe under per-interpreter GILs too. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct {
    void *ctx;
    void *(*alloc)(void *ctx, size_t size);
    void (*free)(void *ctx, void *ptr, size_t size);
} xgr2_arena_t; /* PyObjectArenaAllocator (not in the limited API) */

#define XGR2_ARENA_SLOTS 4
#define XGR2_ARENA_MAX ((size_t)64 << 10)

static xgr2_arena_t xgr2_arena_prev;
static struct {
    void *p;
    size_t n;
} xgr2_arena_slot[XGR2_ARENA_SLOTS];
static int xgr2_arena_used;
static uint64_t xgr2_arena_counts[3]; /* served from the slots, passed on, kept */
static atomic_flag xgr2_arena_flag = ATOMIC_FLAG_INIT;

static void xgr2_arena_lock(void) {
    while (atomic_flag_test_and_set_explicit(&xgr2_arena_flag, memory_order_acquire)) {
    }
}

static void xgr2_arena_unlock(void) { atomic_flag_clear_explicit(&xgr2_arena_flag, memory_order_release); }

static void *xgr2_arena_alloc(void *ctx, size_t n) {
    (void)ctx;
    void *p = NULL;
    if (n <= XGR2_ARENA_MAX) {
        xgr2_arena_lock();
        for (int i = xgr2_arena_used - 1; i >= 0 && !p; i--)
            if (xgr2_arena_slot[i].n == n) {
                p = xgr2_arena_slot[i].p;
                xgr2_arena_slot[i] = xgr2_arena_slot[--xgr2_arena_used];
            }
        xgr2_arena_counts[p ? 0 : 1]++;
        xgr2_arena_unlock();
    }
    return p ? p : xgr2_arena_prev.alloc(xgr2_arena_prev.ctx, n);
}

static void xgr2_arena_free(void *ctx, void *p, size_t n) {
    (void)ctx;
    if (p && n <= XGR2_ARENA_MAX) {
        int kept = 0;
        xgr2_arena_lock();
        if (xgr2_arena_used < XGR2_ARENA_SLOTS) {
            xgr2_arena_slot[xgr2_arena_used].p = p;
            xgr2_arena_slot[xgr2_arena_used].n = n;
            xgr2_arena_used++;
            xgr2_arena_counts[2]++;
            kept = 1;
        }
        xgr2_arena_unlock();
        if (kept) return;
    }
    xgr2_arena_prev.free(xgr2_arena_prev.ctx, p, n);
}

/* Installs the caching arena allocator once (under the GIL, which cffi released for the
 * call); 1 when it is in place, 0 when the interpreter has no arena allocator API. */
int xgr2_py_arena_cache_install(void) {
    static int installed;
    int rc = 1;
    PyGILState_STATE g = PyGILState_Ensure();
    if (!installed) {
        void *get = dlsym(RTLD_DEFAULT, "PyObject_GetArenaAllocator");
        void *set = dlsym(RTLD_DEFAULT, "PyObject_SetArenaAllocator");
        if (get && set) {
            xgr2_arena_t mine = {NULL, xgr2_arena_alloc, xgr2_arena_free};
            ((void (*)(xgr2_arena_t *))get)(&xgr2_arena_prev);
            ((void (*)(xgr2_arena_t *))set)(&mine);
            installed = 1;
        } else {
            rc = 0;
        }
    }
    PyGILState_Release(g);
    return rc;
}

/* out[0]: requests served from the kept blocks, out[1]: requests passed on (sizes it keeps),
 * out[2]: blocks kept when freed. */
void xgr2_py_arena_cache_counts(uint64_t out[3]) {
    xgr2_arena_lock();
    for (int i = 0; i < 3; i++) out[i] = xgr2_arena_counts[i];
    xgr2_arena_unlock();
}
"""

#: Declarations of the functions _PREAMBLE adds to the extension (not the core's: xgr2.h).
_PREAMBLE_CDEF = """
int xgr2_py_arena_cache_install(void);
void xgr2_py_arena_cache_counts(uint64_t out[3]);
"""


def make_ffibuilder(sources=None, include_dirs=None, module_name="xgrammar2._xgr2_cffi"):
    """Builds the FFI object; `sources` / `include_dirs` default to the repository's core.
    Tests may pass other sources (e.g. a stand-in core) with the same header."""
    with open(HEADER, encoding="utf-8") as f:
        cdef = header_to_cdef(f.read())
    cflags, ldflags = compile_flags()
    builder = FFI()
    builder.cdef(cdef + _PREAMBLE_CDEF)
    builder.set_source(
        module_name,
        _PREAMBLE,
        sources=source_files() if sources is None else list(sources),
        include_dirs=[INCLUDE_DIR] if include_dirs is None else list(include_dirs),
        extra_compile_args=cflags,
        extra_link_args=ldflags,
        libraries=[] if sys.platform == "win32" else ["pthread", "m"] + (["dl"] if sys.platform.startswith("linux") else []),
    )
    return builder


ffibuilder = make_ffibuilder()

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
