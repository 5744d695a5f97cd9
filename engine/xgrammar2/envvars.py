"""Reading xgrammar2's environment variables (the engine's ``XGRAMMAR2_*`` and the vLLM and
SGLang plugins'): one reading of a switch and of a number for all of them.

A switch accepts ``1``/``0``, ``true``/``false``, ``on``/``off`` and ``yes``/``no`` in any case;
unset or empty is the default. A number accepts a base-10 integer at or above its minimum (and,
for some, words such as ``none``). Anything else is never silently taken as some other value:
it gets one warning per process naming the variable and the value, and the default applies.
The accepted values of each variable are listed in docs/environment.md.
"""

import os
import threading
import warnings
from typing import Any, Mapping, Optional, Set, Tuple

__all__ = ["env_flag", "env_int", "warn_bad_env", "TRUE_WORDS", "FALSE_WORDS"]

TRUE_WORDS = frozenset(("1", "true", "on", "yes"))
FALSE_WORDS = frozenset(("0", "false", "off", "no"))

_warned: Set[Tuple[str, str]] = set()
_lock = threading.Lock()


def warn_bad_env(name: str, raw: str, expected: str, default: Any, logger: Any = None) -> None:
    """Once per process and (variable, value): says that ``name=raw`` is not ``expected`` and
    that ``default`` is used instead. Through ``logger.warning`` when given (the plugins, whose
    hosts show their loggers), else as a ``RuntimeWarning``."""
    with _lock:
        if (name, raw) in _warned:
            return
        _warned.add((name, raw))
    msg = f"{name}={raw!r} is not {expected}; using {default}"
    if logger is not None:
        logger.warning("xgrammar2: %s", msg)
    else:
        warnings.warn(msg, RuntimeWarning, stacklevel=3)


def _read(name: str, environ: Optional[Mapping[str, str]]) -> Tuple[Optional[str], str]:
    """(the raw value, the value stripped and in lower case); (None, "") when unset."""
    raw = (os.environ if environ is None else environ).get(name)
    return raw, "" if raw is None else raw.strip().lower()


def env_flag(name: str, default: bool, logger: Any = None,
             environ: Optional[Mapping[str, str]] = None) -> bool:
    """The switch ``name``: True for 1/true/on/yes, False for 0/false/off/no (any case, spaces
    around ignored), ``default`` when unset or empty; anything else warns once
    (``warn_bad_env``) and gives ``default``."""
    raw, value = _read(name, environ)
    if raw is None or not value:
        return default
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS:
        return False
    warn_bad_env(name, raw, "a switch (1/0, true/false, on/off, yes/no)", "on" if default else "off", logger)
    return default


def env_int(name: str, default: Optional[int], minimum: int = 0,
            words: Optional[Mapping[str, Optional[int]]] = None, logger: Any = None,
            environ: Optional[Mapping[str, str]] = None) -> Optional[int]:
    """The number ``name``: a base-10 integer >= ``minimum`` (spaces around ignored), or the
    value of one of ``words`` (lower case; e.g. ``{"none": None}``); ``default`` when unset or
    empty; anything else warns once (``warn_bad_env``) and gives ``default``."""
    raw, value = _read(name, environ)
    if raw is None or not value:
        return default
    if words and value in words:
        return words[value]
    try:
        n = int(value, 10)
    except ValueError:
        n = None
    if n is not None and n >= minimum:
        return n
    expected = f"an integer >= {minimum}"
    if words:
        expected += " or " + "/".join(words)
    warn_bad_env(name, raw, expected, "the default" if default is None else default, logger)
    return default
