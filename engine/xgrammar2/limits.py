"""Process-wide input limits checked in Python before any parsing (docs/limits.md).

The C core bounds what it builds (``max_rules``, ``max_fsm_states``, ``max_row_items``,
``max_step_work``: options of :class:`GrammarCompiler`); the limits here bound what reaches
it, so a request cannot exhaust the stack or spend seconds in a front end:

* ``max_input_bytes`` (default 32 MiB): size of EBNF, regex, JSON-schema or structural-tag
  text, and of the EBNF a schema or structural tag converts to;
* ``max_json_nesting`` (default 256): nesting depth of arrays/objects in a JSON schema or a
  structural tag (as text, dict or list). Deeper documents would otherwise end in a
  ``RecursionError`` somewhere in ``json`` or the converters.

Exceeding one raises :class:`GrammarLimitError` (a ValueError) naming the limit. JSON nesting is
also bounded by upstream's process-wide maximum recursion depth
(:func:`xgrammar2.set_max_recursion_depth`, default 10,000): the smaller bound applies.
"""

from __future__ import annotations

import threading
from typing import Any, Dict

from . import _core
from . import config as _config
from .exception import GrammarLimitError

__all__ = ["get_limits", "set_limits", "check_input_size", "check_json_nesting",
           "check_structural_tag_args", "too_deep_error", "json_nesting_limit"]

_DEFAULTS = {"max_input_bytes": 32 * 1024 * 1024, "max_json_nesting": 256}
_limits: Dict[str, int] = dict(_DEFAULTS)
_lock = threading.Lock()


def get_limits() -> Dict[str, int]:
    """The current limits (a copy)."""
    with _lock:
        return dict(_limits)


def set_limits(**limits: int) -> Dict[str, int]:
    """Sets some limits (``max_input_bytes``, ``max_json_nesting``; ``None`` restores the
    default) for the whole process and returns the previous values."""
    with _lock:
        old = dict(_limits)
        for k, v in limits.items():
            if k not in _DEFAULTS:
                raise TypeError(f"unknown limit {k!r}; expected one of {sorted(_DEFAULTS)}")
            if v is None:
                v = _DEFAULTS[k]
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{k} must be a positive int, got {v!r}")
            _limits[k] = v
        return old


def check_input_size(n_bytes: int, what: str) -> None:
    limit = _limits["max_input_bytes"]
    if n_bytes > limit:
        raise GrammarLimitError(
            f"{what} is {n_bytes} bytes, more than max_input_bytes = {limit} "
            "(xgrammar2.limits.set_limits)"
        )


def json_nesting_limit() -> int:
    """The nesting bound of JSON documents: the smaller of ``max_json_nesting`` and the
    maximum recursion depth (:mod:`xgrammar2.config`)."""
    return min(_limits["max_json_nesting"], _config.get_max_recursion_depth())


def too_deep_error(what: str) -> GrammarLimitError:
    return _too_deep(what, json_nesting_limit())


def _too_deep(what: str, limit: int) -> GrammarLimitError:
    if limit < _limits["max_json_nesting"]:  # the maximum recursion depth binds
        return GrammarLimitError(
            f"Maximum recursion depth exceeded: {what} is nested deeper than "
            f"max_recursion_depth = {limit} levels (xgrammar2.set_max_recursion_depth)"
        )
    return GrammarLimitError(
        f"{what} is nested deeper than max_json_nesting = {limit} levels "
        "(xgrammar2.limits.set_limits)"
    )


def check_json_nesting(doc: Any, what: str) -> None:
    """Raises GrammarLimitError when ``doc`` (JSON text, or dicts/lists) nests deeper than
    ``max_json_nesting`` or the maximum recursion depth; also checks the size of text against
    ``max_input_bytes``.
    Linear time; the walk over dicts/lists is iterative."""
    limit = json_nesting_limit()
    if isinstance(doc, (bytes, bytearray, str)):
        check_input_size(len(doc), what)
        raw = doc.encode("utf-8", "surrogatepass") if isinstance(doc, str) else bytes(doc)
        depth = _core.ffi.new("int32_t *")
        _core.check(_core.lib.xgr_json_nesting_depth(raw, len(raw), limit, depth),
                    "measuring JSON nesting")
        if depth[0] > limit:
            raise _too_deep(what, limit)
        return
    if not isinstance(doc, (dict, list, tuple)):
        return
    stack = [(doc, 1)]
    seen = set()
    while stack:
        obj, d = stack.pop()
        if d > limit:
            raise _too_deep(what, limit)
        if id(obj) in seen:  # a cycle (or shared subtree): reported by json later
            continue
        seen.add(id(obj))
        children = obj.values() if isinstance(obj, dict) else obj
        for c in children:
            if isinstance(c, (dict, list, tuple)):
                stack.append((c, d + 1))


def check_structural_tag_args(args: Any, kwargs: Any) -> None:
    """Checks the structural tag (or legacy tags / triggers) passed to
    ``compile_structural_tag`` / ``Grammar.from_structural_tag``."""
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, (str, bytes, bytearray, dict, list, tuple)):
            check_json_nesting(a, "the structural tag")
