"""The ``xgrammar2`` StructuredOutputBackend / StructuredOutputGrammar for vLLM's V1 engine.

Semantics follow vLLM's built-in xgrammar backend (the contract the scheduler and the
structured-output manager rely on):

* ``compile_grammar`` runs on the manager's thread pool, several at once. xgrammar2 compiles
  with the GIL released and its compiler cache is thread-safe (concurrent compiles of one
  key are coalesced), so nothing here needs a lock except the lazily built full-vocabulary
  compiler.
* ``stop_token_ids`` (the request's ``all_stop_token_ids``) replace the tokenizer's stop
  tokens; stop tokens stay masked until the grammar may end, and accepting one terminates.
* Special (control) tokens never match grammar text in JSON / regex / EBNF / choice requests:
  xgrammar2's TokenizerInfo decodes them to nothing. A structural tag that spells control
  tokens (e.g. ``<|python_tag|>``) compiles against a vocabulary view in which exactly those
  tokens are text; all others stay masked.
* ``validate_tokens`` never changes the matcher state; ``rollback(n)`` recomputes the
  terminated flag; ``fill_bitmask`` overwrites the whole row in place (ids at or beyond the
  tokenizer's size are masked).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence

import xgrammar2 as xgr2
from xgrammar2.envvars import env_flag
from vllm.v1.structured_output.backend_types import (
    StructuredOutputBackend,
    StructuredOutputGrammar,
    StructuredOutputOptions,
)

logger = logging.getLogger("vllm.xgrammar2_vllm")

__all__ = [
    "Xgrammar2Backend",
    "Xgrammar2Grammar",
    "StructuralTagsUnavailable",
    "choice_to_ebnf",
    "grammar_spec_to_ebnf",
]

_MIB = 1024 * 1024
_OPTION_TYPES = {
    "any_whitespace": bool,
    "max_whitespace_cnt": int,
    "strict_mode": bool,
    "lenient": bool,
    "cache_limit_mb": int,
    "batch_fill": bool,
    "fill_threads": int,
    "precompute_k": int,
    "cache_dir": str,
    "cache_dir_limit_mb": int,
}
#: Smallest accepted value of the int options (1 unless listed).
_INT_MIN = {"precompute_k": 0}
#: Options that may be JSON null (``max_whitespace_cnt: null``: whitespace unbounded).
_NULLABLE = {"max_whitespace_cnt"}

#: Mask entries each newly compiled grammar builds in the background while its request
#: waits for prefill (``precompute_k``; 0 turns it off).
DEFAULT_PRECOMPUTE_K = 8

#: ``XGRAMMAR2_VLLM_LOG_TIMES=1``: log (INFO) the backend's set-up time (tokenizer info,
#: compiler) and each compile's time with its on-disk cache hits and misses, and the API
#: server's validation times (``bench/vllm_restart_ttft.py`` reads these lines).
LOG_TIMES = env_flag("XGRAMMAR2_VLLM_LOG_TIMES", False, logger=logger)


class StructuralTagsUnavailable(ValueError):
    """The installed xgrammar2 cannot compile structural tags (tool calling) yet."""


def _structural_tag_unavailable(err: BaseException) -> StructuralTagsUnavailable:
    return StructuralTagsUnavailable(
        "the xgrammar2 structured-output backend cannot compile this structural tag "
        "(response_format type 'structural_tag', or the tool-calling constraint vLLM builds "
        f"for tool_choice 'required' / a named function / strict tools): {err}"
    )


def _escape_ebnf(s: str) -> str:
    out = []
    for ch in s:
        o = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\x{o:02x}")
        else:
            out.append(ch)
    return "".join(out)


def choice_to_ebnf(choices: Sequence[str]) -> str:
    """EBNF matching exactly one of ``choices`` (vLLM's ``choice`` request)."""
    if not isinstance(choices, (list, tuple)) or not choices:
        raise ValueError("choice must be a non-empty list of strings")
    alts = []
    for c in choices:
        if not isinstance(c, str):
            raise ValueError(f"choice entries must be strings, got {type(c).__name__}")
        alts.append(f'"{_escape_ebnf(c)}"' if c else '""')
    return "root ::= " + " | ".join(alts)


def _is_lark(spec: str) -> bool:
    from vllm.v1.structured_output.utils import grammar_is_likely_lark

    return grammar_is_likely_lark(spec)


def grammar_spec_to_ebnf(spec: str, validate: bool = False) -> str:
    """What the engine compiles for a ``grammar`` request: EBNF is returned as is; a Lark
    grammar (vLLM's ``grammar_is_likely_lark``: no line has ``::=``) becomes the EBNF of
    xgrammar2's Lark front end (``Grammar.from_lark``), except when its special tokens need
    the tokenizer (``<|eot_id|>``, ``<[*]>``): then the Lark text itself is returned and the
    engine compiles it with ``compile_lark``. With ``validate`` the grammar is also parsed
    (the special tokens of such a Lark grammar are checked when it compiles). Raises
    ValueError with a line and column on an invalid grammar."""
    if not _is_lark(spec):
        if validate:
            xgr2.Grammar.from_ebnf(spec)
        return spec
    from xgrammar2.lark import lower_lark

    lowered = lower_lark(spec, defer_tokens=True)
    if validate:
        xgr2.Grammar.from_ebnf(lowered.ebnf)
    return spec if lowered.needs_tokenizer else lowered.ebnf


def _vllm_cache_root() -> Optional[str]:
    """vLLM's cache root (``VLLM_CACHE_ROOT``, default ``~/.cache/vllm``), where the on-disk
    compile cache goes by default (``<root>/xgrammar2``)."""
    try:
        import vllm.envs as envs

        root = envs.VLLM_CACHE_ROOT
    except Exception:  # noqa: BLE001 - vLLM not importable here: its documented default
        root = os.environ.get("VLLM_CACHE_ROOT") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "vllm")
    return root or None


def _read_options(vllm_config: Any) -> Dict[str, Any]:
    """xgrammar2 options from ``--additional-config '{"xgrammar2": {...}}'`` (invalid ones are
    logged and ignored: the backend is built at engine start or by the first request, where
    raising would fail the engine rather than the request)."""
    extra = getattr(vllm_config, "additional_config", None) or {}
    raw = extra.get("xgrammar2") if isinstance(extra, dict) else None
    if not raw:
        return {}
    if not isinstance(raw, dict):
        logger.warning("additional_config.xgrammar2 must be an object; ignored: %r", raw)
        return {}
    opts = {}
    for k, v in raw.items():
        typ = _OPTION_TYPES.get(k)
        if v is None and k in _NULLABLE:
            opts[k] = None
        elif typ is None:
            logger.warning("additional_config.xgrammar2.%s is not an xgrammar2 option; ignored", k)
        elif typ is int and (isinstance(v, bool) or not isinstance(v, int) or v < _INT_MIN.get(k, 1)):
            logger.warning("additional_config.xgrammar2.%s must be an int >= %d; ignored", k, _INT_MIN.get(k, 1))
        elif typ is bool and not isinstance(v, bool):
            logger.warning("additional_config.xgrammar2.%s must be true/false; ignored", k)
        elif typ is str and not isinstance(v, str):
            logger.warning("additional_config.xgrammar2.%s must be a string; ignored", k)
        else:
            opts[k] = v
    return opts


def _tokenizer_info(tokenizer: Any, vocab_size: int) -> "tuple[xgr2.TokenizerInfo, int]":
    """(TokenizerInfo, bitmask vocabulary size) for vLLM's tokenizer."""
    try:
        from vllm.utils.mistral import is_mistral_tokenizer
    except ImportError:  # pragma: no cover - moved in some vLLM version
        def is_mistral_tokenizer(_tok: Any) -> bool:
            return False

    if is_mistral_tokenizer(tokenizer):
        # Same treatment as vLLM's xgrammar backend: mistral-common exposes the raw vocabulary
        # (tekken: bytes-as-text, else SentencePiece byte fallback) and only its EOS stops.
        vocab = list(tokenizer.vocab)
        size = len(vocab)
        info = xgr2.TokenizerInfo(
            vocab,
            xgr2.VocabType.RAW if getattr(tokenizer, "is_tekken", False) else xgr2.VocabType.BYTE_FALLBACK,
            vocab_size=size,
            stop_token_ids=[tokenizer.eos_token_id],
            add_prefix_space=True,
        )
        return info, size
    info = xgr2.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
    return info, vocab_size


def legacy_tag_to_format(tag: Dict[str, Any]) -> Dict[str, Any]:
    """vLLM's legacy ``{"structures": [{begin, schema, end}], "triggers": [...]}`` as a
    current structural tag (``StructuralTag.from_legacy_structural_tag``: triggered tags
    whose contents are JSON schemas), so that the engine's JSON options reach its schemas."""
    structures = tag.get("structures")
    triggers = tag.get("triggers", [])
    if not isinstance(structures, list) or not isinstance(triggers, list):
        raise ValueError("a legacy structural tag needs the lists 'structures' and 'triggers'")
    items = []
    for i, s in enumerate(structures):
        if not isinstance(s, dict) or not isinstance(s.get("begin"), str) or not isinstance(s.get("end"), str):
            raise ValueError(f"structures[{i}] needs string 'begin' and 'end'")
        schema = s.get("schema", {})
        items.append(xgr2.StructuralTagItem(begin=s["begin"], end=s["end"],
                                            schema=schema if isinstance(schema, str) else json.dumps(schema)))
    return xgr2.StructuralTag.from_legacy_structural_tag(items, list(triggers)).model_dump(by_alias=True)


def _rebuildable(err: BaseException) -> bool:
    """Whether ``type(err)(message)`` builds the same kind of error (keeps its class)."""
    try:
        type(err)("x")
        return True
    except Exception:  # noqa: BLE001
        return False



@dataclass
class Xgrammar2Backend(StructuredOutputBackend):
    """One per engine: built at engine start when the engine's configured backend is
    ``xgrammar2`` (:func:`xgrammar2_vllm.patches.start_backend_setup`), else by the first
    ``xgrammar2`` request."""

    def __post_init__(self) -> None:
        #: Whether it was built when the engine started (set by ``patches.make_backend``).
        self.built_at_start = False
        cfg = self.vllm_config
        so_cfg = getattr(cfg, "structured_outputs_config", None)
        self.options = _read_options(cfg)
        self.disable_any_whitespace = bool(getattr(so_cfg, "disable_any_whitespace", False))
        self.any_whitespace = self.options.get("any_whitespace", not self.disable_any_whitespace)
        # Bounded by default in every JSON context (xgrammar2.serving): unbounded whitespace
        # is how a model runs to max_tokens inside JSON. ``null`` lifts the bound.
        self.max_whitespace_cnt = self.options.get("max_whitespace_cnt", xgr2.serving.DEFAULT_MAX_WHITESPACE_CNT)
        self.strict_mode = self.options.get("strict_mode", True)
        self.lenient = self.options.get("lenient", False)
        self.batch_fill = self.options.get("batch_fill", True) and (
            env_flag("XGRAMMAR2_VLLM_BATCH_FILL", True, logger=logger)
        )
        self.precompute_k = self.options.get("precompute_k", DEFAULT_PRECOMPUTE_K)
        self.fill_threads = self.options.get("fill_threads") or max(1, min((os.cpu_count() or 2) // 2, 8))
        cache_mb = self.options.get("cache_limit_mb")
        if cache_mb is None:
            try:
                import vllm.envs as envs

                cache_mb = int(envs.VLLM_XGRAMMAR_CACHE_MB)
            except Exception:  # noqa: BLE001
                cache_mb = 512
        self._cache_limit_bytes = cache_mb * _MIB

        t_info = time.perf_counter()
        self.tokenizer_info, self.vocab_size = _tokenizer_info(self.tokenizer, self.vocab_size)
        t_compiler = time.perf_counter()
        self.cache_dir = xgr2.serving.engine_cache_dir(self.options.get("cache_dir"), _vllm_cache_root())
        disk_mb = self.options.get("cache_dir_limit_mb")
        self.compiler = xgr2.GrammarCompiler(
            self.tokenizer_info, cache_enabled=True, cache_limit_bytes=self._cache_limit_bytes,
            cache_dir=self.cache_dir or False,
            cache_dir_limit_bytes=disk_mb * _MIB if disk_mb is not None else None,
        )
        if LOG_TIMES:
            logger.info("xgrammar2 times: backend set-up: tokenizer info %.1f ms, compiler %.1f ms "
                        "(cache_dir %s; thread %s)", 1e3 * (t_compiler - t_info),
                        1e3 * (time.perf_counter() - t_compiler), self.cache_dir,
                        threading.current_thread().name)

        spec = getattr(cfg, "speculative_config", None)
        self.num_speculative_tokens = int(getattr(spec, "num_speculative_tokens", 0) or 0) if spec else 0
        # Rollback history kept per matcher: the manager rolls back at most the number of
        # drafts it advanced (<= num_speculative_tokens); one extra step is free insurance.
        self.max_rollback_tokens = self.num_speculative_tokens + 1 if self.num_speculative_tokens else 0
        logger.info(
            "xgrammar2 structured-output backend: vocab %d (tokenizer %d tokens), "
            "any_whitespace=%s, max_whitespace_cnt=%s, spec tokens %d",
            self.vocab_size, len(self.tokenizer_info.encoded_vocab), self.any_whitespace,
            self.max_whitespace_cnt, self.num_speculative_tokens,
        )

    # ---- compilation ---------------------------------------------------------------------

    def _json_kwargs(self) -> Dict[str, Any]:
        kw: Dict[str, Any] = {"any_whitespace": self.any_whitespace, "strict_mode": self.strict_mode}
        if not self.any_whitespace:
            kw["separators"] = (",", ":")
        if self.max_whitespace_cnt is not None and self.any_whitespace:
            kw["max_whitespace_cnt"] = self.max_whitespace_cnt
        if self.lenient:
            kw["lenient"] = True
        return kw

    def tag_with_options(self, tag: Any) -> Any:
        """``tag`` with the engine's whitespace options in its ``json_schema`` contents that
        set none (the tags vLLM builds for ``tools`` carry their own JSON options)."""
        return xgr2.serving.bound_tag_whitespace(tag, self.max_whitespace_cnt, self.any_whitespace)

    def compiler_for_tag(self, tag: Any) -> "xgr2.GrammarCompiler":
        """The compiler for a structural tag: the engine's own. Control tokens a tag spells
        (e.g. "<|python_tag|>", gpt-oss's "<|channel|>") are admitted where it spells them
        by xgrammar2 itself (special-token spellings), so no vocabulary view is needed."""
        return self.compiler

    def compile(self, request_type: StructuredOutputOptions, grammar_spec: str) -> "xgr2.CompiledGrammar":
        """The CompiledGrammar of one request (cached by the compiler). Raises ValueError
        (a subclass) with xgrammar2's message when the request is invalid."""
        O = StructuredOutputOptions
        if request_type == O.JSON:
            try:
                ctx = self.compiler.compile_json_schema(grammar_spec, **self._json_kwargs())
            except ValueError as e:
                named = xgr2.serving.name_tool_in_error(grammar_spec, e)
                if named is None:
                    raise
                raise type(e)(named) if _rebuildable(e) else ValueError(named) from e
            xgr2.serving.log_unenforced_once(logger, ctx, grammar_spec)
            return ctx
        if request_type == O.JSON_OBJECT:
            kw = self._json_kwargs()
            kw["strict_mode"] = False  # any object, not only {}
            return self.compiler.compile_json_schema('{"type": "object"}', **kw)
        if request_type == O.REGEX:
            return self.compiler.compile_regex(grammar_spec)
        if request_type == O.GRAMMAR:
            if _is_lark(grammar_spec):  # not rewritten to EBNF by the validator
                return self.compiler.compile_lark(grammar_spec)
            return self.compiler.compile_grammar(grammar_spec)
        if request_type == O.CHOICE:
            choices = json.loads(grammar_spec) if isinstance(grammar_spec, str) else grammar_spec
            return self.compiler.compile_grammar(choice_to_ebnf(choices))
        if request_type == O.STRUCTURAL_TAG:
            return self.compile_structural_tag(grammar_spec)
        raise ValueError(f"xgrammar2: unsupported structured output type {request_type!s}")

    def compile_structural_tag(self, grammar_spec: str) -> "xgr2.CompiledGrammar":
        tag = json.loads(grammar_spec)
        compiler = self.compiler_for_tag(tag)
        try:
            if isinstance(tag, dict) and "structures" in tag:
                # Legacy form: each schema becomes a json_schema content with the options.
                tag = legacy_tag_to_format(tag)
            bounded = self.tag_with_options(tag)
            spec = grammar_spec if bounded is tag else json.dumps(bounded)
            return compiler.compile_structural_tag(spec)
        except NotImplementedError as e:
            raise _structural_tag_unavailable(e) from e
        except ValueError as e:
            named = xgr2.serving.name_tool_in_error(tag, e)
            if named is None:
                raise
            raise ValueError(named) from e

    def compile_grammar(
        self,
        request_type: StructuredOutputOptions,
        grammar_spec: str,
        stop_token_ids: Optional[Iterable[int]] = None,
    ) -> "Xgrammar2Grammar":
        t0 = time.perf_counter()
        ctx = self.compile(request_type, grammar_spec)
        if LOG_TIMES:
            disk = self.compiler.disk_cache
            logger.info("xgrammar2 times: compile %s (%d bytes) %.1f ms; disk cache hits %s misses %s "
                        "packs loaded %s", getattr(request_type, "name", request_type), len(grammar_spec),
                        1e3 * (time.perf_counter() - t0), disk and disk.hits, disk and disk.misses,
                        disk and disk.pack_loads)
        # vLLM schedules the request once this returns: its prefill overlaps the build of
        # the grammar's most expensive mask entries (once per compiled grammar).
        self.compiler.precompute_in_background(ctx, self.precompute_k)
        stops = None
        if stop_token_ids:
            # Ids the bitmask cannot represent are dropped rather than failing the request.
            stops = sorted({int(t) for t in stop_token_ids if 0 <= int(t) < self.vocab_size}) or None
        matcher = xgr2.GrammarMatcher(
            ctx, override_stop_tokens=stops, max_rollback_tokens=self.max_rollback_tokens
        )
        return Xgrammar2Grammar(matcher, self.vocab_size, ctx)

    # ---- bitmasks ----------------------------------------------------------------------

    def allocate_token_bitmask(self, max_num_seqs: int):
        import torch

        return torch.full((max_num_seqs, (self.vocab_size + 31) // 32), -1, dtype=torch.int32)

    def fill_bitmasks(self, bitmask: Any, grammars: Sequence["Xgrammar2Grammar"], rows: Sequence[int]) -> None:
        """Fills ``bitmask[rows[i]]`` for ``grammars[i]`` in one call (the core's thread pool,
        GIL released). Terminated grammars get an all-ones row, like the manager does."""
        live, idx = [], []
        for g, r in zip(grammars, rows):
            if g._is_terminated:
                bitmask[r].fill_(-1)
            else:
                live.append(g.matcher)
                idx.append(r)
        if len(live) == 1:
            live[0].fill_next_token_bitmask(bitmask, idx[0])
        elif live:
            xgr2.fill_next_token_bitmask_batch(live, bitmask, idx, max_threads=self.fill_threads)

    def destroy(self) -> None:
        self.compiler.clear_cache()


class Xgrammar2Grammar(StructuredOutputGrammar):
    """One per request: an xgrammar2 GrammarMatcher plus the terminated flag vLLM reads."""

    __slots__ = ("matcher", "vocab_size", "ctx", "num_processed_tokens", "_is_terminated")

    def __init__(self, matcher: "xgr2.GrammarMatcher", vocab_size: int, ctx: "xgr2.CompiledGrammar") -> None:
        self.matcher = matcher
        self.vocab_size = vocab_size
        self.ctx = ctx
        self.num_processed_tokens = 0
        self._is_terminated = False

    def accept_tokens(self, request_id: str, tokens: List[int]) -> bool:
        """Advances over ``tokens``; False at the first rejected one. Tokens after termination
        are ignored (True)."""
        if self._is_terminated:
            return True
        m = self.matcher
        for token in tokens:
            try:
                ok = m.accept_token(token)
            except (ValueError, OverflowError, TypeError):
                ok = False  # out-of-vocabulary id
            if not ok:
                logger.error(
                    "xgrammar2: grammar rejected token %s for request %s", token, request_id
                )
                return False
            self.num_processed_tokens += 1
            if m.is_terminated():
                self._is_terminated = True
                break
        return True

    def validate_tokens(self, tokens: List[int]) -> List[int]:
        """The longest accepted prefix of ``tokens`` (ending at a stop token, if any). The
        matcher state does not change."""
        if self._is_terminated or not tokens:
            return []
        n = 0
        for t in tokens:  # the core rejects out-of-range ids; cut the draft there instead
            if not (isinstance(t, int) and 0 <= t < self.vocab_size):
                break
            n += 1
        if n == 0:
            return []
        k = self.matcher.validate_tokens(tokens[:n] if n < len(tokens) else tokens)
        return list(tokens[:k])

    def rollback(self, num_tokens: int) -> None:
        if num_tokens <= 0:
            return
        self.matcher.rollback(num_tokens)
        self.num_processed_tokens -= num_tokens
        self._is_terminated = self.matcher.is_terminated()

    def fill_bitmask(self, bitmask: Any, batch_index: int) -> None:
        self.matcher.fill_next_token_bitmask(bitmask, batch_index)

    def is_terminated(self) -> bool:
        return self._is_terminated

    def reset(self) -> None:
        self.matcher.reset()
        self.num_processed_tokens = 0
        self._is_terminated = False
