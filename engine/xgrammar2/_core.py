"""Loads the compiled C core (cffi, API mode) and turns its status codes into exceptions.

Importing this module never fails: when the extension is missing (e.g. a source checkout
that was not built) `lib` / `ffi` are placeholders that raise ImportError on first use,
so the pure-Python parts of the package (tokenizer decoding, bitmask helpers) keep working.

cffi releases the GIL around every call into the core, so compilation and mask filling run
in parallel with other Python threads.
"""

from typing import Any, List, NoReturn, Tuple

from .exception import (
    GrammarLimitError,
    GrammarSemanticError,
    GrammarSyntaxError,
    InternalError,
    InvalidArgumentError,
    InvalidStateError,
    InvalidUTF8Error,
    OutOfMemoryError,
    XGrammar2Error,
)


class _MissingCore:
    """Stands in for `ffi` / `lib` when the extension could not be imported."""

    def __init__(self, reason: BaseException) -> None:
        self._reason = reason

    def __getattr__(self, name: str) -> NoReturn:
        raise ImportError(
            "the xgrammar2 C core (xgrammar2._xgr2_cffi) is not available: "
            f"{self._reason!r}. Build it with `pip install .` (or `pip install -e .`)."
        ) from self._reason


try:
    from ._xgr2_cffi import ffi, lib  # type: ignore[import-not-found]

    AVAILABLE = True
    IMPORT_ERROR = None
except ImportError as _e:  # pragma: no cover - depends on the build
    ffi = _MissingCore(_e)  # type: ignore[assignment]
    lib = _MissingCore(_e)  # type: ignore[assignment]
    AVAILABLE = False
    IMPORT_ERROR = _e


def require_core() -> None:
    """Raises ImportError with the reason when the C core is not available."""
    if not AVAILABLE:
        lib.xgr_last_error  # noqa: B018 - raises the descriptive ImportError


# Status name (xgr2.h's XGR_ERR_*) -> exception class and words; the codes are read from
# the header through the cdef, so Python never restates them (the numbers below are only
# the fallback when the core did not load, and tests/python/test_status_codes.py pins them).
_STATUS = (
    ("XGR_ERR_INVALID_ARG", 1, InvalidArgumentError, "invalid argument"),
    ("XGR_ERR_SYNTAX", 2, GrammarSyntaxError, "syntax error"),
    ("XGR_ERR_SEMANTIC", 3, GrammarSemanticError, "semantic error"),
    ("XGR_ERR_NOMEM", 4, OutOfMemoryError, "out of memory"),
    ("XGR_ERR_LIMIT", 5, GrammarLimitError, "limit exceeded"),
    ("XGR_ERR_UTF8", 6, InvalidUTF8Error, "invalid UTF-8"),
    ("XGR_ERR_STATE", 7, InvalidStateError, "invalid state"),
    ("XGR_ERR_INTERNAL", 8, InternalError, "internal error"),
)


def _code(name: str, fallback: int) -> int:
    return int(getattr(lib, name)) if AVAILABLE else fallback


_ERRORS = {_code(n, c): cls for n, c, cls, _ in _STATUS}
_NAMES = {_code(n, c): words for n, c, _, words in _STATUS}


def last_error() -> str:
    """The calling thread's last error message from the core."""
    p = lib.xgr_last_error()
    if p == ffi.NULL:
        return ""
    return ffi.string(p).decode("utf-8", "replace")


def error_from_status(status: int, context: str = "") -> XGrammar2Error:
    """Builds (does not raise) the exception for a non-zero status, with the core's message.

    Must be called on the thread that made the failing call, before any other failing call
    (the message is thread-local in the core)."""
    cls = _ERRORS.get(status, InternalError)
    msg = last_error() or _NAMES.get(status, f"unknown status {status}")
    if context:
        msg = f"{context}: {msg}"
    if status not in _ERRORS:
        msg += f" (unknown status code {status})"
    return cls(msg)


def check(status: int, context: str = "") -> None:
    """Raises the exception matching a core status code; returns for XGR_OK (0)."""
    if status:
        raise error_from_status(status, context)


def take_string(pp: Any, plen: Any) -> bytes:
    """Copies a core-owned buffer returned through `char **` / `size_t *` and frees it."""
    p = pp[0]
    if p == ffi.NULL:
        return b""
    try:
        return bytes(ffi.buffer(p, plen[0]))
    finally:
        lib.xgr_free(p)


def to_bytes(text: Any, what: str) -> bytes:
    """str -> UTF-8 bytes; bytes-like -> bytes. Other types raise TypeError naming `what`."""
    if isinstance(text, str):
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError as e:  # lone surrogates
            raise InvalidUTF8Error(f"{what} is not valid Unicode text: {e}") from e
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text)
    raise TypeError(f"{what} must be str or bytes, got {type(text).__name__}")


__all__ = [
    "ffi",
    "lib",
    "AVAILABLE",
    "IMPORT_ERROR",
    "require_core",
    "check",
    "error_from_status",
    "last_error",
    "take_string",
    "to_bytes",
]


#: Regex dialects of xgr_regex_parse (XGR_REGEX_* in xgr2.h).
REGEX_CONVERTER = 0
REGEX_MACRO = 1
REGEX_ECMASCRIPT = 2


def regex_tree(pattern: bytes, dialect: int) -> Tuple[List[int], List[int], int]:
    """Parses a UTF-8 regex with the core's regex front end (``xgr_regex_parse``) and
    returns its flat syntax tree ``(nodes, data, root)``: ``nodes`` holds five ints per
    node (kind, a, b, c, d), ``data`` the ranges and child lists (layout documented at
    ``xgr_regex_ast`` in xgr2.h). Raises the core's error class for a bad pattern
    (GrammarSyntaxError: malformed; GrammarSemanticError: an unsupported construct)."""
    out = ffi.new("xgr_regex_ast **")
    check(lib.xgr_regex_parse(pattern, len(pattern), dialect, out))
    tree = out[0]
    try:
        nodes = ffi.unpack(tree.nodes, tree.n_nodes * 5) if tree.n_nodes else []
        data = ffi.unpack(tree.data, tree.n_data) if tree.n_data else []
        return nodes, data, tree.root
    finally:
        lib.xgr_regex_ast_free(tree)
