"""Request validation with xgrammar2, in the API-server process.

vLLM validates structured-output requests before they reach the engine
(``SamplingParams._validate_structured_outputs``); a ``VLLMValidationError`` there becomes an
HTTP 400 with its message. For any backend whose name starts with "xgrammar" vLLM would call
upstream xgrammar's validator, which would reject what xgrammar cannot do (and accept what
xgrammar2 cannot). The plugin routes ``xgrammar2`` requests here instead, so the answer is
xgrammar2's own: the same front ends (JSON schema, regex, EBNF, Lark, structural tags)
run here that will compile the grammar in the engine. A failure in the engine would instead
finish the request with an error (HTTP 500 on vLLM 0.32) after it was accepted.

Unlike upstream, ``choice`` is kept as a CHOICE request (the backend builds its grammar), and
Lark grammars are rewritten to the EBNF the engine will compile (xgrammar2's Lark front end),
except those whose special tokens need the tokenizer, which the engine compiles as Lark.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from typing import Any, Hashable

import xgrammar2 as xgr2
from xgrammar2.envvars import env_flag

__all__ = ["validate_xgrammar2_request", "configure", "validate_timed"]

logger = logging.getLogger("vllm.xgrammar2_vllm")
#: ``XGRAMMAR2_VLLM_LOG_TIMES=1``: log each validation's time (see backend.LOG_TIMES).
_LOG_TIMES = env_flag("XGRAMMAR2_VLLM_LOG_TIMES", False, logger=logger)


def validate_timed(validate: Any, sampling_params: Any) -> None:
    """``validate(sampling_params)``, its time logged when XGRAMMAR2_VLLM_LOG_TIMES is set."""
    if not _LOG_TIMES:
        return validate(sampling_params)
    t0 = time.perf_counter()
    try:
        return validate(sampling_params)
    finally:
        logger.info("xgrammar2 times: validate (API server) %.1f ms", 1e3 * (time.perf_counter() - t0))

#: The engine's xgrammar2 options that change what compiles (``lenient``), recorded by
#: :func:`configure` when vLLM builds its input processor in this process.
_options: "dict[str, Any]" = {}


#: Markers of accepted requests in the engine's compile cache directory (set by
#: :func:`configure`; None without a directory): a restarted API server does not convert a
#: request again that it (or another API server with the same code and options) accepted.
_disk: Any = None


def configure(options: "dict[str, Any]") -> None:
    """Validates later requests with the engine's options (``--additional-config``'s
    ``xgrammar2`` object), so the API server accepts exactly what the engine compiles, and
    remembers accepted requests in the engine's cache directory (``cache_dir``, default
    ``$VLLM_CACHE_ROOT/xgrammar2``; off with the same words that turn the cache off)."""
    global _disk
    _options.clear()
    _options.update(options)
    with _ok_lock:
        _ok.clear()
    _disk = None
    try:
        from .backend import _vllm_cache_root

        cache_dir = xgr2.serving.engine_cache_dir(options.get("cache_dir"), _vllm_cache_root())
        if cache_dir:
            from xgrammar2.validated import ValidatedRequests

            digest = json.dumps({"lenient": bool(options.get("lenient", False))}, sort_keys=True)
            _disk = ValidatedRequests(cache_dir, digest.encode())
    except Exception as e:  # noqa: BLE001 - never fail the API server for an optimisation
        logger.warning("xgrammar2: validated-request markers disabled: %s", e)
        _disk = None

# Requests often repeat the same schema / tool set; converting a large JSON schema (or a
# 100-tool structural tag: 130-345 ms on a loaded 2-core machine) takes that long on the API
# server's event loop, so successful validations are remembered, keyed by the request's
# canonical text (a bounded LRU; only successes: a refused request is converted, and
# refused, again). With a cache directory, successes are also marked there
# (xgrammar2.validated), so the first request of a tool set after a restart is not converted
# again either.
_CACHE_SIZE = 512
_ok: "OrderedDict[Hashable, Any]" = OrderedDict()
_ok_lock = threading.Lock()


def _seen(key: Hashable) -> bool:
    with _ok_lock:
        if key in _ok:
            _ok.move_to_end(key)
            return True
    disk = _disk
    if disk is not None and disk.seen(key):
        _remember(key, on_disk=False)
        return True
    return False


def _remember(key: Hashable, value: Any = True, on_disk: bool = True) -> None:
    with _ok_lock:
        _ok[key] = value
        _ok.move_to_end(key)
        while len(_ok) > _CACHE_SIZE:
            _ok.popitem(last=False)
    disk = _disk
    if on_disk and value is True and disk is not None:
        disk.remember(key)


def _cached_value(key: Hashable) -> Any:
    with _ok_lock:
        return _ok.get(key)


def _fail(message: str, parameter: str, err: BaseException, spec: Any = None) -> Exception:
    from vllm.exceptions import VLLMValidationError

    # A tool-call schema or tag: name the tool whose parameters failed.
    named = xgr2.serving.name_tool_in_error(spec, err) if spec is not None else None
    if named is not None:
        message, parameter = "a tool's parameters cannot be compiled", "tools"
    exc = VLLMValidationError(f"xgrammar2: {message}: {named or err}", parameter=parameter)
    exc.__cause__ = err
    return exc


def validate_xgrammar2_request(sampling_params: Any) -> None:
    """Raises VLLMValidationError (HTTP 400) if xgrammar2 cannot serve the request."""
    from .backend import (
        StructuralTagsUnavailable,
        _structural_tag_unavailable,
        choice_to_ebnf,
        grammar_spec_to_ebnf,
        legacy_tag_to_format,
    )

    so = sampling_params.structured_outputs
    if so is None:
        return

    if so.regex is not None:
        key = ("regex", so.regex)
        if _seen(key):
            return
        try:
            xgr2.Grammar.from_regex(so.regex)
        except Exception as e:  # noqa: BLE001 - any failure is the request's fault
            raise _fail("invalid regex", "structured_outputs.regex", e) from e
        _remember(key)
        return

    if so.choice is not None:
        try:
            key = ("choice", json.dumps(so.choice))
        except (TypeError, ValueError):
            key = None  # not JSON-able: validated (and refused) below, never remembered
        if key is not None and _seen(key):
            return
        try:
            xgr2.Grammar.from_ebnf(choice_to_ebnf(so.choice))
        except Exception as e:  # noqa: BLE001
            raise _fail("invalid choice", "structured_outputs.choice", e) from e
        if key is not None:
            _remember(key)
        return

    if so.json is not None:
        try:
            schema = json.loads(so.json) if isinstance(so.json, str) else so.json
            key = ("json", json.dumps(schema, sort_keys=True))
        except (TypeError, ValueError) as e:
            raise _fail("the JSON schema is not valid JSON", "response_format.json_schema", e) from e
        if _seen(key):
            return
        try:
            xgr2.Grammar.from_json_schema(schema, lenient=bool(_options.get("lenient", False)))
        except Exception as e:  # noqa: BLE001
            raise _fail("unsupported or invalid JSON schema", "response_format.json_schema", e, schema) from e
        _remember(key)
        return

    if so.grammar is not None:
        key = ("grammar", so.grammar)
        ebnf = _cached_value(key)
        if ebnf is None:
            try:
                ebnf = grammar_spec_to_ebnf(so.grammar, validate=True)
            except Exception as e:  # noqa: BLE001
                raise _fail("invalid grammar", "structured_outputs.grammar", e) from e
            _remember(key, ebnf)
        if ebnf != so.grammar:
            so.grammar = ebnf  # the engine compiles exactly what was validated
        return

    if so.structural_tag is not None:
        key = ("structural_tag", so.structural_tag)
        if _seen(key):
            return
        tag = None
        try:
            tag = json.loads(so.structural_tag)
            if isinstance(tag, dict) and "structures" in tag:
                tag = legacy_tag_to_format(tag)
            xgr2.Grammar.from_structural_tag(tag if isinstance(tag, dict) else so.structural_tag)
        except NotImplementedError as e:
            err = _structural_tag_unavailable(e)
            raise _fail("unsupported structural tag", "structural_tag", err) from e
        except StructuralTagsUnavailable as e:
            raise _fail("unsupported structural tag", "structural_tag", e) from e
        except Exception as e:  # noqa: BLE001
            raise _fail("invalid structural tag", "structural_tag", e, tag) from e
        _remember(key)
        return
    # json_object: nothing to validate.
