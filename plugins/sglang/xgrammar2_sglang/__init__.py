"""SGLang plugin that adds the ``xgrammar2`` grammar backend.

Installed as the ``sglang.srt.plugins`` entry point ``xgrammar2`` (declared by the
``xgrammar2`` distribution), SGLang's ``load_plugins()`` calls :func:`register` in every
process (launcher, scheduler, detokenizer, DP controller). Then

    python -m sglang.launch_server --model-path M --grammar-backend xgrammar2
    sglang serve --model-path M --grammar-backend xgrammar2
    sglang serve --model-path M --structured-output-backend xgrammar2    # alias

serves every constrained request (``json_schema`` / ``$$ANY$$`` / ``response_format``,
``regex``, ``ebnf`` / ``full_assistant_ebnf``, ``structural_tag`` and the tool-call
constraints SGLang builds for ``tools`` + ``tool_choice``) with xgrammar2.

:func:`register` is idempotent, imports only SGLang's registry modules (the backend, which
loads xgrammar2, is imported by the first scheduler that builds it), and acts only on the
SGLang versions it was checked against (``SUPPORTED_SGLANG``); elsewhere it logs a warning
and leaves SGLang untouched (``XGRAMMAR2_SGLANG_FORCE=1`` tries anyway).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from typing import Optional, Tuple

__all__ = ["register", "is_registered", "BACKEND_NAME", "ALIAS_FLAG", "SUPPORTED_SGLANG", "__version__"]

__version__ = "0.1.0"
BACKEND_NAME = "xgrammar2"
#: The extra CLI flag (vLLM's spelling) accepted as an alias of ``--grammar-backend``.
ALIAS_FLAG = "--structured-output-backend"
#: [low, high) range of SGLang versions whose grammar-backend internals this adapter follows.
SUPPORTED_SGLANG: Tuple[Tuple[int, int, int], Tuple[int, int, int]] = ((0, 5, 23), (0, 6, 0))

_lock = threading.Lock()
_state = {"attempted": False, "active": False}
logger = logging.getLogger("sglang.xgrammar2_sglang")


def _version_tuple(version: str) -> Optional[Tuple[int, int, int]]:
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version or "")
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def _supported(version: str) -> bool:
    vt = _version_tuple(version)
    return vt is not None and SUPPORTED_SGLANG[0] <= vt < SUPPORTED_SGLANG[1]


def _sglang_version() -> str:
    try:
        from importlib.metadata import version

        return version("sglang")
    except Exception:  # noqa: BLE001 - not installed as a distribution (source checkout)
        try:
            import sglang

            return str(getattr(sglang, "__version__", "") or "")
        except Exception:  # noqa: BLE001
            return ""


def _force() -> bool:
    """``XGRAMMAR2_SGLANG_FORCE``, a switch (off by default; a value that is no switch warns
    once and counts as off; off too when xgrammar2 itself cannot be imported)."""
    try:
        from xgrammar2.envvars import env_flag
    except Exception:  # noqa: BLE001 - not registered either way
        return False
    return env_flag("XGRAMMAR2_SGLANG_FORCE", False, logger=logger)


def register() -> bool:
    """Adds the ``xgrammar2`` grammar backend to SGLang in this process. Returns whether it
    is active.

    Safe to call any number of times, from any thread: the registration happens once. It
    extends ``--grammar-backend``'s choices, registers the backend factory, and registers
    two hooks with SGLang's ``HookRegistry`` (applied by ``load_plugins()``): the
    ``--structured-output-backend`` alias and the whole-turn response-template grammar.
    """
    with _lock:
        if _state["attempted"]:
            return _state["active"]
        _state["attempted"] = True
        version = _sglang_version()
        if not version:
            logger.warning("xgrammar2 SGLang plugin: sglang is not installed; not registering")
            return False
        if not _supported(version) and not _force():
            lo, hi = SUPPORTED_SGLANG
            logger.warning(
                "xgrammar2 SGLang plugin: SGLang %s is outside the tested range [%s, %s); the "
                "'xgrammar2' grammar backend is NOT registered (set XGRAMMAR2_SGLANG_FORCE=1 "
                "to try anyway)",
                version, ".".join(map(str, lo)), ".".join(map(str, hi)),
            )
            return False
        try:
            from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES, add_grammar_backend_choices
            from sglang.srt.constrained.base_grammar_backend import register_grammar_backend
        except Exception as e:  # noqa: BLE001 - an unusable SGLang must not break the caller
            logger.warning(
                "xgrammar2 SGLang plugin: SGLang %s lacks the grammar-backend registry (%s); "
                "the 'xgrammar2' backend is NOT registered", version, e,
            )
            return False
        try:
            import xgrammar2  # noqa: F401
        except Exception as e:  # noqa: BLE001
            logger.warning(
                "xgrammar2 SGLang plugin: the xgrammar2 package is not importable (%s); the "
                "'xgrammar2' backend is NOT registered", e,
            )
            return False
        if BACKEND_NAME not in GRAMMAR_BACKEND_CHOICES:
            add_grammar_backend_choices([BACKEND_NAME])
        register_grammar_backend(BACKEND_NAME, _create_backend)
        from . import hooks

        hooks.register_hooks()
        _state["active"] = True
        logger.debug("xgrammar2 SGLang plugin registered (SGLang %s, pid %d)", version, os.getpid())
        return True


def _create_backend(server_args, tokenizer, vocab_size, eos_token_ids=None):
    """The factory SGLang's ``create_grammar_backend`` calls for ``--grammar-backend
    xgrammar2`` (imports the backend, and with it xgrammar2, on first use)."""
    from .backend import create_backend

    return create_backend(server_args, tokenizer, vocab_size, eos_token_ids)


def is_registered() -> bool:
    """Whether :func:`register` has activated the backend in this process."""
    return _state["active"]
