"""Process-wide configuration with upstream xgrammar's API (``xgrammar.config``): the maximum
recursion depth and the serialization version.

The maximum recursion depth bounds how deeply nested a JSON document that xgrammar2 parses may
be: a JSON schema, a structural tag, a serialized Grammar / TokenizerInfo / CompiledGrammar.
As upstream, it is one value per process (default 10,000, or ``XGRAMMAR_MAX_RECURSION_DEPTH``
when that is set to an integer in [1, 1,000,000]), and it does not bound the matcher: the
Earley parser is iterative and accepts input nested to any depth. xgrammar2's own
``max_json_nesting`` limit (:mod:`xgrammar2.limits`, default 256) also applies; the smaller of
the two is the bound (``docs/limits.md``).
"""

import os
import threading
import warnings
from contextlib import contextmanager
from typing import Iterator

from .exception import InvalidArgumentError

__all__ = [
    "get_max_recursion_depth",
    "set_max_recursion_depth",
    "max_recursion_depth",
    "get_serialization_version",
    "InvalidRecursionDepthError",
]

#: Upstream's default and upper bound (``RecursionGuard`` in upstream xgrammar).
DEFAULT_MAX_RECURSION_DEPTH = 10000
MAX_REASONABLE_DEPTH = 1000000
_ENV_VAR = "XGRAMMAR_MAX_RECURSION_DEPTH"


class InvalidRecursionDepthError(InvalidArgumentError, RuntimeError):
    """A maximum recursion depth outside [1, 1,000,000]. (Both a ValueError and the
    RuntimeError upstream xgrammar raises.)"""


def _depth_from_env() -> int:
    raw = os.environ.get(_ENV_VAR)
    if raw is None:
        return DEFAULT_MAX_RECURSION_DEPTH
    try:
        value = int(raw.strip(), 10)
    except ValueError:
        value = 0
    if value <= 0:
        warnings.warn(
            f"{_ENV_VAR} is not a valid positive integer: {raw!r}; using the default "
            f"{DEFAULT_MAX_RECURSION_DEPTH}",
            RuntimeWarning,
            stacklevel=2,
        )
        return DEFAULT_MAX_RECURSION_DEPTH
    if value > MAX_REASONABLE_DEPTH:
        warnings.warn(
            f"{_ENV_VAR} is too large: {value}; clamping to {MAX_REASONABLE_DEPTH}",
            RuntimeWarning,
            stacklevel=2,
        )
        return MAX_REASONABLE_DEPTH
    return value


# One int read without a lock (atomic under the GIL, and under free-threading an int
# attribute load is atomic too); writes take the lock so that set/get pairs stay ordered.
_max_depth = _depth_from_env()
_lock = threading.Lock()


def get_max_recursion_depth() -> int:
    """The maximum allowed recursion depth, shared by the whole process.

    In order: the value set with :func:`set_max_recursion_depth`; the
    ``XGRAMMAR_MAX_RECURSION_DEPTH`` environment variable (read at import, when it is an
    integer in [1, 1,000,000]); the default 10,000.
    """
    return _max_depth


def set_max_recursion_depth(max_recursion_depth: int) -> None:
    """Sets the maximum allowed recursion depth for the whole process. Thread-safe.

    Raises
    ------
    TypeError
        ``max_recursion_depth`` is not an int.
    InvalidRecursionDepthError
        It is not in [1, 1,000,000] (a ValueError and a RuntimeError, as upstream raises).
    """
    global _max_depth
    if not isinstance(max_recursion_depth, int):  # bool is an int, as upstream accepts
        raise TypeError(
            f"max_recursion_depth must be an int, got {type(max_recursion_depth).__name__}"
        )
    value = int(max_recursion_depth)
    if not 0 < value <= MAX_REASONABLE_DEPTH:
        raise InvalidRecursionDepthError(
            "Maximum recursion depth must be positive and at most "
            f"{MAX_REASONABLE_DEPTH}, got: {value}"
        )
    with _lock:
        _max_depth = value


@contextmanager
def max_recursion_depth(temp_depth: int) -> Iterator[None]:
    """A context manager that sets the maximum recursion depth and restores the previous
    value on exit. The value is process-wide, so other threads see it meanwhile.

    >>> with xgr.max_recursion_depth(1000):
    ...     pass  # the depth is 1000 here
    """
    prev = get_max_recursion_depth()
    set_max_recursion_depth(temp_depth)
    try:
        yield
    finally:
        set_max_recursion_depth(prev)


def get_serialization_version() -> str:
    """The version of the JSON that ``serialize_json`` writes (the ``__VERSION__`` field).
    ``deserialize_json`` accepts only this version. It differs from upstream xgrammar's
    (``"v16"`` in 0.2.8): the payloads are xgrammar2's own and not interchangeable."""
    from .serialization import SERIALIZATION_VERSION

    return SERIALIZATION_VERSION
