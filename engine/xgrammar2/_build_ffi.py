"""cffi build script for the C core (API / out-of-line mode).

The cdef is derived from ``csrc/include/xgr2.h`` at build time (comments and preprocessor
lines stripped, C++ guards dropped) so the binding can never drift from the header. Every
``csrc/**/*.c`` file, and ``_py_arena.c`` beside this script (the one file that includes
Python.h), is compiled into the one extension module ``xgrammar2._xgr2_cffi``.

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


def _relative(path):
    """`path` relative to the build directory when that is the repository root (setuptools
    places objects by source path)."""
    return os.path.relpath(path, ROOT) if os.path.abspath(os.getcwd()) == ROOT else path


def source_files():
    """Every C source of the core, sorted, as paths relative to the build directory when
    possible."""
    return [_relative(f) for f in sorted(glob.glob(os.path.join(CSRC, "**", "*.c"), recursive=True))]


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
#: Functions of the extension that are not the core's (xgr2.h): the frame-chunk cache of
#: _py_arena.c (stack_chunks.py). Declared to cffi and, the same text, to the wrapper's C.
_PREAMBLE_CDEF = """
int xgr2_py_arena_cache_install(void);
void xgr2_py_arena_cache_counts(uint64_t out[3]);
"""

#: The C file beside this script that holds them; shipped in the sdist (MANIFEST.in).
ARENA_SOURCE = os.path.join(_HERE, "_py_arena.c")

_PREAMBLE = """
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#endif
#include <stdint.h>
#include "xgr2.h"
""" + _PREAMBLE_CDEF


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
        sources=(source_files() if sources is None else list(sources)) + [_relative(ARENA_SOURCE)],
        include_dirs=[INCLUDE_DIR] if include_dirs is None else list(include_dirs),
        extra_compile_args=cflags,
        extra_link_args=ldflags,
        libraries=[] if sys.platform == "win32" else ["pthread", "m"] + (["dl"] if sys.platform.startswith("linux") else []),
    )
    return builder


ffibuilder = make_ffibuilder()

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
