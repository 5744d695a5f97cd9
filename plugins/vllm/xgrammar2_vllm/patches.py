"""The patches that plug ``xgrammar2`` into vLLM (0.32 / 0.33), each idempotent.

vLLM selects structured-output backends with a hard-coded if/elif and validates the backend
name with a pydantic Literal, so there is no registry to add to. What is changed, and why:

1. ``StructuredOutputsConfig.backend``: the Literal is widened with "xgrammar2" and the
   pydantic dataclasses are rebuilt, so ``--structured-outputs-config.backend xgrammar2``
   (dotted or JSON form) and ``LLM(structured_outputs_config={"backend": "xgrammar2"})``
   parse. The config's model validator also allows ``disable_any_whitespace`` with xgrammar2.
2. ``StructuredOutputManager.grammar_init``: sets :class:`Xgrammar2Backend` when the first
   request's ``_backend`` is "xgrammar2", then defers to vLLM (which skips its factory because
   ``self.backend`` is set). When the engine's configured backend is "xgrammar2", the
   manager's ``__init__`` (engine start) already starts building it on a daemon thread (the
   tokenizer info, the compiler and its directory's vocabulary fingerprint: 0.1-1.4 s that
   the first request paid before); the first request takes it, waiting if it is not done
   (``XGRAMMAR2_VLLM_EAGER=0``: the lazy build only). Offline beam search has its own
   factory, wrapped the same way.
3. Validation: vLLM calls upstream xgrammar's validator for every backend name starting with
   "xgrammar"; a dispatcher sends ``xgrammar2`` requests to
   :func:`xgrammar2_vllm.validate.validate_xgrammar2_request` and everything else to the
   original.
4. CLI: ``--structured-output-backend NAME`` (shown in ``--help``) is rewritten to
   ``--structured-outputs-config.backend=NAME`` before vLLM's parser runs.
5. Bitmasks: when the engine has no speculative decoding and no reasoning gate, the rows of
   all xgrammar2 requests of a step are filled by one ``fill_next_token_bitmask_batch`` call
   (C thread pool, GIL released) instead of one Python call per row; the manager's own
   parallel path (> 128 requests) also batches (its rows are 3-tuples on vLLM 0.32 and
   4-tuples with ``masked_ids`` on 0.33). Anything else goes through vLLM's code.
   ``XGRAMMAR2_VLLM_BATCH_FILL=0`` turns this off.
6. ``InputProcessor.__init__`` records the engine's xgrammar2 options for request
   validation in the API server (so ``lenient`` is honoured there too).
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import threading
import time
from typing import Any, Callable, List, Optional

from xgrammar2.envvars import env_flag

logger = logging.getLogger("vllm.xgrammar2_vllm")

BACKEND = "xgrammar2"
LOG_TIMES = env_flag("XGRAMMAR2_VLLM_LOG_TIMES", False, logger=logger)
SHORT_FLAG = "--structured-output-backend"
_MARK = "_xgrammar2_patched"


def _is_patched(fn: Any) -> bool:
    return bool(getattr(fn, _MARK, False))


def _mark(fn: Callable) -> Callable:
    setattr(fn, _MARK, True)
    return fn


# ---- 1. config --------------------------------------------------------------------------


def patch_config() -> None:
    from typing import Literal, get_args

    import pydantic.dataclasses as pdc
    from vllm.config import structured_outputs as so_mod

    cls = so_mod.StructuredOutputsConfig
    current = so_mod.StructuredOutputsBackend
    changed = False
    if BACKEND not in get_args(current):
        widened = Literal[(*get_args(current), BACKEND)]  # type: ignore[valid-type]
        so_mod.StructuredOutputsBackend = widened
        cls.__annotations__["backend"] = widened
        cls.__dataclass_fields__["backend"].type = widened
        changed = True

    decorators = getattr(cls, "__pydantic_decorators__", None)
    validators = getattr(decorators, "model_validators", {}) if decorators is not None else {}
    info = validators.get("_validate_structured_output_config")
    if info is not None and not _is_patched(info.func):
        original = info.func

        def _validate_structured_output_config(self):  # noqa: ANN001
            if getattr(self, "backend", None) == BACKEND:
                if getattr(self, "disable_additional_properties", False):
                    raise ValueError(
                        "disable_additional_properties is only supported for the guidance backend."
                    )
                return self
            return original(self)

        info.func = _mark(_validate_structured_output_config)
        changed = True
    elif info is None:
        logger.debug("xgrammar2: StructuredOutputsConfig has no _validate_structured_output_config")

    if changed:
        pdc.rebuild_dataclass(cls, force=True)
        from vllm.config import VllmConfig

        pdc.rebuild_dataclass(VllmConfig, force=True)


# ---- 2. backend factory -----------------------------------------------------------------


def _request_backend(request: Any) -> Any:
    sp = getattr(request, "sampling_params", None)
    so = getattr(sp, "structured_outputs", None) if sp is not None else None
    return getattr(so, "_backend", None) if so is not None else None


def make_backend(vllm_config: Any, tokenizer: Any, eager: bool = False) -> Any:
    from .backend import Xgrammar2Backend

    backend = Xgrammar2Backend(
        vllm_config, tokenizer=tokenizer, vocab_size=vllm_config.model_config.get_vocab_size()
    )
    backend.built_at_start = eager
    return backend


#: ``XGRAMMAR2_VLLM_EAGER=0``: build the backend on the first xgrammar2 request (as vLLM does
#: for its own backends) instead of when the engine's StructuredOutputManager is created.
EAGER = env_flag("XGRAMMAR2_VLLM_EAGER", True, logger=logger)
_PENDING = "_xgrammar2_pending_backend"


def _wants_eager_backend(manager: Any) -> bool:
    cfg = getattr(manager, "vllm_config", None)
    so = getattr(cfg, "structured_outputs_config", None)
    return (
        EAGER
        and getattr(so, "backend", None) == BACKEND
        and getattr(manager, "tokenizer", None) is not None
        and getattr(manager, "backend", None) is None
    )


def start_backend_setup(manager: Any) -> Optional["concurrent.futures.Future"]:
    """Builds the manager's xgrammar2 backend (tokenizer info, compiler, the directory's
    vocabulary fingerprint) on a daemon thread, so that the first request finds it ready
    instead of paying for it; :func:`take_backend` collects it. Only when the engine's
    configured backend is xgrammar2 (every request then resolves to it). Returns the
    future, or None when nothing was started."""
    if not _wants_eager_backend(manager):
        return None
    fut: "concurrent.futures.Future" = concurrent.futures.Future()
    vllm_config, tokenizer = manager.vllm_config, manager.tokenizer

    def build() -> None:
        if not fut.set_running_or_notify_cancel():
            return
        try:
            fut.set_result(make_backend(vllm_config, tokenizer, eager=True))
        except BaseException as e:  # noqa: BLE001 - re-raised (or rebuilt) by take_backend
            fut.set_exception(e)

    # started first: a thread that cannot start leaves no future for the request to wait on
    threading.Thread(target=build, name="xgrammar2-backend-setup", daemon=True).start()
    setattr(manager, _PENDING, fut)
    return fut


def take_backend(manager: Any) -> Any:
    """The backend :func:`start_backend_setup` built for ``manager`` (waiting for it), or a
    new one when none was started or the background build failed (its error is then
    raised here, on the first request, as without the eager build)."""
    fut = getattr(manager, _PENDING, None)
    if fut is not None:
        setattr(manager, _PENDING, None)
        t0 = time.perf_counter()
        try:
            backend = fut.result()
        except Exception as e:  # noqa: BLE001 - built again below, where it fails the request
            logger.warning("xgrammar2: building the backend at engine start failed (%s); "
                           "building it for the first request", e)
        else:
            if LOG_TIMES:
                logger.info("xgrammar2 times: first request waited %.1f ms for the backend "
                            "built at engine start", 1e3 * (time.perf_counter() - t0))
            return backend
    return make_backend(manager.vllm_config, manager.tokenizer)


def patch_manager() -> None:
    from vllm.v1.structured_output import StructuredOutputManager as M

    if not _is_patched(M.__init__):
        original_init = M.__init__

        @functools.wraps(original_init)
        def __init__(self, *args, **kwargs):  # noqa: ANN001
            original_init(self, *args, **kwargs)
            try:
                start_backend_setup(self)
            except Exception as e:  # noqa: BLE001 - never fail the engine: the lazy path remains
                logger.warning("xgrammar2: could not start the backend set-up (%s)", e)

        M.__init__ = _mark(__init__)

    if not _is_patched(M.grammar_init):
        original = M.grammar_init

        @functools.wraps(original)
        def grammar_init(self, request):  # noqa: ANN001
            if (
                self.backend is None
                and getattr(request, "structured_output_request", None) is not None
                and _request_backend(request) == BACKEND
            ):
                self.backend = take_backend(self)
                # vLLM 0.33 remembers the backend name and rejects later requests that
                # resolve to another one; 0.32 has no such attribute (harmless there).
                self.backend_name = BACKEND
            return original(self, request)

        M.grammar_init = _mark(grammar_init)

    if not _is_patched(M._fill_bitmasks):
        original_fill = M._fill_bitmasks

        @functools.wraps(original_fill)
        def _fill_bitmasks(self, batch):  # noqa: ANN001
            from .backend import Xgrammar2Backend, Xgrammar2Grammar

            backend = self.backend
            batch = list(batch)
            # Rows are (grammar, index, apply_bitmask) on vLLM 0.32 and (grammar, index,
            # apply_bitmask, masked_ids) on 0.33: only the first three are read here; rows
            # the grammar does not constrain go to vLLM's own code whole, whatever they hold.
            if (
                len(batch) > 1
                and isinstance(backend, Xgrammar2Backend)
                and backend.batch_fill
                and all(isinstance(item[0], Xgrammar2Grammar) for item in batch)
            ):
                grammars, rows, others = [], [], []
                for item in batch:
                    if item[2]:
                        grammars.append(item[0])
                        rows.append(item[1])
                    else:
                        others.append(item)
                backend.fill_bitmasks(self._grammar_bitmask, grammars, rows)
                if others:
                    original_fill(self, others)
                return None
            return original_fill(self, batch)

        M._fill_bitmasks = _mark(_fill_bitmasks)

    if not _is_patched(M.grammar_bitmask):
        original_bitmask = M.grammar_bitmask

        @functools.wraps(original_bitmask)
        def grammar_bitmask(self, requests, structured_output_request_ids, scheduled_spec_decode_tokens):  # noqa: ANN001
            fast = _fast_bitmask(self, requests, structured_output_request_ids)
            if fast is not None:
                return fast
            return original_bitmask(
                self, requests, structured_output_request_ids, scheduled_spec_decode_tokens
            )

        M.grammar_bitmask = _mark(grammar_bitmask)


def _fast_bitmask(manager: Any, requests: Any, ids: List[str]) -> Any:
    """The batch rows in one C call, or None when vLLM's general path is needed
    (speculative decoding, a reasoning gate, diffusion models, another backend)."""
    from .backend import Xgrammar2Backend, Xgrammar2Grammar

    backend = manager.backend
    if len(ids) < 2 or not isinstance(backend, Xgrammar2Backend) or not backend.batch_fill:
        return None
    cfg = manager.vllm_config
    num_spec = getattr(cfg, "num_speculative_tokens", None)
    if num_spec is None:
        spec = getattr(cfg, "speculative_config", None)
        num_spec = getattr(spec, "num_speculative_tokens", 0) if spec is not None else 0
    has_reasoner = (getattr(manager, "reasoner_cls", None) or getattr(manager, "reasoner", None)) is not None
    if (
        num_spec
        or (has_reasoner and not getattr(manager, "enable_in_reasoning", False))
        or getattr(cfg.model_config, "is_diffusion", False)
    ):
        return None
    grammars = []
    for rid in ids:
        sreq = requests[rid].structured_output_request
        g = sreq.grammar if sreq is not None else None
        if not isinstance(g, Xgrammar2Grammar):
            return None
        grammars.append(g)
    if manager._grammar_bitmask is None:
        max_batch = manager.vllm_config.scheduler_config.max_num_seqs
        manager._grammar_bitmask = backend.allocate_token_bitmask(max_batch)
    bitmask = manager._grammar_bitmask
    backend.fill_bitmasks(bitmask, grammars, range(len(grammars)))
    out = bitmask[: len(grammars)] if len(grammars) < bitmask.shape[0] else bitmask
    return out.numpy()


def patch_beam_search() -> None:
    try:
        from vllm.entrypoints.generate.beam_search import offline as bs
    except Exception:  # noqa: BLE001 - module layout differs between versions
        return
    mixin = getattr(bs, "BeamSearchOfflineMixin", None)
    original = getattr(mixin, "_init_beam_search_structured_output", None)
    if original is None or _is_patched(original):
        return

    @functools.wraps(original)
    def _init_beam_search_structured_output(self, structured_outputs, tokenizer):  # noqa: ANN001
        so_config = self.llm_engine.vllm_config.structured_outputs_config
        name = structured_outputs._backend or getattr(so_config, "backend", None)
        if name != BACKEND:
            return original(self, structured_outputs, tokenizer)
        structured_outputs._backend = BACKEND
        from vllm.v1.structured_output.request import get_structured_output_key

        backend = make_backend(self.llm_engine.vllm_config, tokenizer)
        return backend, get_structured_output_key(structured_outputs), backend.allocate_token_bitmask(1)

    mixin._init_beam_search_structured_output = _mark(_init_beam_search_structured_output)


# ---- 3. validation ----------------------------------------------------------------------


def patch_validation() -> None:
    import vllm.sampling_params as sp_mod
    from vllm.v1.structured_output import backend_xgrammar as bx

    original = bx.validate_xgrammar_grammar
    if _is_patched(original):
        return

    @functools.wraps(original)
    def validate_xgrammar_grammar(sampling_params):  # noqa: ANN001
        so = sampling_params.structured_outputs
        if so is not None and getattr(so, "_backend", None) == BACKEND:
            from .validate import validate_xgrammar2_request, validate_timed

            return validate_timed(validate_xgrammar2_request, sampling_params)
        return original(sampling_params)

    _mark(validate_xgrammar_grammar)
    bx.validate_xgrammar_grammar = validate_xgrammar_grammar
    # Versions that import the validator at module level call it through this global.
    if getattr(sp_mod, "validate_xgrammar_grammar", None) is original:
        sp_mod.validate_xgrammar_grammar = validate_xgrammar_grammar


# ---- 4. CLI -----------------------------------------------------------------------------


def rewrite_short_flag(args: List[str]) -> List[str]:
    """``--structured-output-backend X`` / ``=X`` -> ``--structured-outputs-config.backend=X``."""
    out: List[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == SHORT_FLAG and i + 1 < len(args):
            out.append(f"--structured-outputs-config.backend={args[i + 1]}")
            i += 2
            continue
        if isinstance(a, str) and a.startswith(SHORT_FLAG + "="):
            out.append("--structured-outputs-config.backend=" + a.split("=", 1)[1])
            i += 1
            continue
        out.append(a)
        i += 1
    return out


def patch_cli() -> None:
    import sys

    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser as P

    if not _is_patched(P.parse_args):
        original_parse = P.parse_args

        @functools.wraps(original_parse)
        def parse_args(self, args=None, namespace=None):  # noqa: ANN001
            if args is None:
                args = sys.argv[1:]
            if any(isinstance(a, str) and a.startswith(SHORT_FLAG) for a in args):
                args = rewrite_short_flag(list(args))
            return original_parse(self, args, namespace)

        P.parse_args = _mark(parse_args)

    original_add = EngineArgs.__dict__.get("add_cli_args")
    func = getattr(original_add, "__func__", None)
    if func is not None and not _is_patched(func):

        @functools.wraps(func)
        def add_cli_args(parser, *a, **kw):  # noqa: ANN001
            parser = func(parser, *a, **kw)
            try:
                parser.add_argument(
                    SHORT_FLAG,
                    dest="xgrammar2_structured_output_backend",
                    default=None,
                    metavar="NAME",
                    help="Shorthand for --structured-outputs-config.backend NAME "
                    "(added by the xgrammar2 plugin), e.g. xgrammar2.",
                )
            except Exception:  # noqa: BLE001 - already defined (a newer vLLM)
                pass
            return parser

        EngineArgs.add_cli_args = staticmethod(_mark(add_cli_args))


def patch_input_processor() -> None:
    """The API server validates requests in its InputProcessor; recording the engine's
    xgrammar2 options there makes validation use the options the engine compiles with."""
    try:
        from vllm.v1.engine.input_processor import InputProcessor
    except Exception:  # noqa: BLE001 - moved in a later vLLM: validation uses defaults
        logger.debug("xgrammar2: vllm.v1.engine.input_processor.InputProcessor not found")
        return
    original = InputProcessor.__init__
    if _is_patched(original):
        return

    @functools.wraps(original)
    def __init__(self, vllm_config, *args, **kwargs):  # noqa: ANN001
        original(self, vllm_config, *args, **kwargs)
        so = getattr(vllm_config, "structured_outputs_config", None)
        if getattr(so, "backend", None) == BACKEND or _mentions_xgrammar2(vllm_config):
            from .backend import _read_options
            from .validate import configure

            configure(_read_options(vllm_config))

    InputProcessor.__init__ = _mark(__init__)


def _mentions_xgrammar2(vllm_config: Any) -> bool:
    extra = getattr(vllm_config, "additional_config", None)
    return isinstance(extra, dict) and "xgrammar2" in extra


def apply_all() -> None:
    for patch in (patch_config, patch_manager, patch_validation, patch_cli, patch_beam_search,
                  patch_input_processor):
        patch()
