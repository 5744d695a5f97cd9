"""``XGrammar2GrammarBackend``: SGLang's grammar backend over xgrammar2, and the factory
SGLang's ``create_grammar_backend`` calls for ``--grammar-backend xgrammar2``.

Compilation runs on the backend's ``executor`` (SGLang's ``BaseGrammarBackend`` thread
pool); xgrammar2 compiles with the GIL released and its compiler cache is thread-safe
(concurrent compiles of one key are coalesced), so several requests compile in parallel
without blocking the scheduler. Every compile error becomes an ``InvalidGrammarObject``
carrying xgrammar2's message, which SGLang reports as "Failed to compile ... grammar".
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import xgrammar2 as xgr2
from xgrammar2.envvars import env_flag, env_int
from sglang.srt.constrained.base_grammar_backend import (
    BaseGrammarBackend,
    BaseGrammarObject,
    GrammarStats,
    InvalidGrammarObject,
)

from . import masks
from .grammar import XGrammar2Grammar
from .schema_compat import infer_types

logger = logging.getLogger("sglang.xgrammar2_sglang")

__all__ = [
    "XGrammar2GrammarBackend",
    "TokenizerNotSupportedError",
    "create_backend",
    "legacy_structural_tag_to_format",
    "tokenizer_info_for",
]

_MIB = 1024 * 1024

#: Mask entries each newly compiled grammar builds in the background while its request
#: waits for prefill (XGRAMMAR2_SGLANG_PRECOMPUTE_K; 0 turns it off).
DEFAULT_PRECOMPUTE_K = 8


class TokenizerNotSupportedError(Exception):
    """xgrammar2 cannot build a TokenizerInfo for SGLang's tokenizer."""


# ---- tokenizer ------------------------------------------------------------------------------


def tokenizer_info_for(
    tokenizer: Any, vocab_size: int, eos_token_ids: Optional[Iterable[int]] = None
) -> Tuple["xgr2.TokenizerInfo", Optional[List[int]]]:
    """(TokenizerInfo, override stop tokens) for SGLang's tokenizer.

    Hugging Face tokenizers go through ``TokenizerInfo.from_huggingface`` with the model's
    EOS ids as the stop tokens (as SGLang's xgrammar backend does). Tokenizers that build
    their own upstream-xgrammar info (``init_xgrammar()``: tiktoken, Mistral) are converted
    field by field. Raises TokenizerNotSupportedError otherwise.
    """
    eos = sorted({int(t) for t in eos_token_ids if 0 <= int(t) < vocab_size}) if eos_token_ids else None
    if hasattr(tokenizer, "init_xgrammar"):
        try:
            up_info, override = tokenizer.init_xgrammar()
        except Exception as e:  # noqa: BLE001
            raise TokenizerNotSupportedError(f"{type(tokenizer).__name__}.init_xgrammar() failed: {e}") from e
        if up_info is None:
            raise TokenizerNotSupportedError(f"tokenizer type {type(tokenizer).__name__} is not supported")
        try:
            # Upstream keeps the decoded vocabulary (raw bytes per token) and its own list of
            # special tokens; the same vocabulary as RAW bytes is exactly equivalent.
            info = xgr2.TokenizerInfo(
                list(up_info.decoded_vocab),
                xgr2.VocabType.RAW,
                vocab_size=int(up_info.vocab_size),
                stop_token_ids=list(up_info.stop_token_ids) or None,
                special_token_ids=list(up_info.special_token_ids),
            )
        except Exception as e:  # noqa: BLE001
            raise TokenizerNotSupportedError(f"cannot convert the tokenizer's xgrammar info: {e}") from e
        if override is not None:
            override = [override] if isinstance(override, int) else list(override)
        return info, override
    try:
        return xgr2.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=eos), None
    except Exception as e:  # noqa: BLE001
        raise TokenizerNotSupportedError(f"cannot build an xgrammar2 TokenizerInfo: {e}") from e


# ---- structural tags -------------------------------------------------------------------------


def legacy_structural_tag_to_format(tag: Dict[str, Any]) -> Dict[str, Any]:
    """SGLang's legacy ``{"structures": [{begin, schema, end}], "triggers": [...],
    "at_least_one": bool}`` as a current structural tag (what upstream's
    ``StructuralTag.from_legacy_structural_tag`` builds, with ``at_least_one`` kept and a
    missing schema meaning any JSON object, as SGLang's xgrammar backend does)."""
    structures = tag.get("structures")
    triggers = tag.get("triggers")
    if not isinstance(structures, list) or not isinstance(triggers, list):
        raise ValueError("a legacy structural tag needs the lists 'structures' and 'triggers'")
    tags = []
    for i, s in enumerate(structures):
        if not isinstance(s, dict) or not isinstance(s.get("begin"), str) or not isinstance(s.get("end"), str):
            raise ValueError(f"structures[{i}] needs string 'begin' and 'end'")
        schema = s.get("schema")
        if schema is None:
            schema = {}
        elif isinstance(schema, str):
            schema = json.loads(schema)
        tags.append({"type": "tag", "begin": s["begin"],
                     "content": {"type": "json_schema", "json_schema": infer_types(schema)},
                     "end": s["end"]})
    return {
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": list(triggers),
            "tags": tags,
            "at_least_one": bool(tag.get("at_least_one", False)),
            "stop_after_first": False,
        },
    }


def _sanitize_format(fmt: Any) -> None:
    """Missing ``json_schema`` fields mean any JSON object (SGLang's xgrammar sanitizer);
    schemas get upstream's implied types (:func:`infer_types`)."""
    if isinstance(fmt, dict):
        if fmt.get("type") in ("json_schema", "qwen_xml_parameter"):
            if fmt.get("json_schema") is None:
                fmt["json_schema"] = {}
            else:
                fmt["json_schema"] = infer_types(fmt["json_schema"])
        for k, v in fmt.items():
            if k == "json_schema":
                continue
            if isinstance(v, (dict, list)):
                _sanitize_format(v)
    elif isinstance(fmt, list):
        for v in fmt:
            _sanitize_format(v)


def _whitespace_bound(option: Optional[int]) -> Optional[int]:
    """The bound on consecutive JSON whitespace: SGLang's option when set (> 0), else
    XGRAMMAR2_SGLANG_MAX_WHITESPACE_CNT (an int, or "none" for unbounded), else the
    default of xgrammar2.serving."""
    if option is not None and option > 0:
        return int(option)
    return env_int("XGRAMMAR2_SGLANG_MAX_WHITESPACE_CNT", xgr2.serving.DEFAULT_MAX_WHITESPACE_CNT,
                   minimum=1, words={"none": None, "null": None, "unbounded": None}, logger=logger)


def _env_mib(name: str) -> Optional[int]:
    """The byte budget an environment variable gives in MiB (an integer >= 0), else None (the
    library's default; a value that is no such integer warns once)."""
    mb = env_int(name, None, logger=logger)
    return None if mb is None else mb * _MIB


# ---- the backend -----------------------------------------------------------------------------


class XGrammar2GrammarBackend(BaseGrammarBackend):
    """xgrammar2 behind SGLang's grammar-backend interface."""

    def __init__(
        self,
        tokenizer: Any,
        vocab_size: int,
        model_eos_token_ids: Optional[Iterable[int]] = None,
        any_whitespace: bool = True,
        max_whitespace_cnt: Optional[int] = None,
        whitespace_pattern: Optional[str] = None,
        cache_limit_bytes: Optional[int] = None,
    ) -> None:
        super().__init__()
        self.tokenizer_info, self.override_stop_tokens = tokenizer_info_for(
            tokenizer, vocab_size, model_eos_token_ids
        )
        self.vocab_size = vocab_size
        self.any_whitespace = bool(any_whitespace)
        # Bounded by default in every JSON context, tool calls' tags included
        # (xgrammar2.serving): SGLang's --constrained-json-max-whitespace-cnt sets the bound,
        # XGRAMMAR2_SGLANG_MAX_WHITESPACE_CNT=none lifts it.
        self.max_whitespace_cnt = _whitespace_bound(max_whitespace_cnt)
        self.lenient = env_flag("XGRAMMAR2_SGLANG_LENIENT", False, logger=logger)
        if whitespace_pattern:
            # xgrammar2 (like SGLang's xgrammar backend) takes a whitespace policy, not a regex.
            logger.warning(
                "xgrammar2: --constrained-json-whitespace-pattern %r is not supported (it is an "
                "outlines / llguidance option); using any_whitespace=%s, max_whitespace_cnt=%s",
                whitespace_pattern, self.any_whitespace, self.max_whitespace_cnt,
            )
        self.precompute_k = env_int("XGRAMMAR2_SGLANG_PRECOMPUTE_K", DEFAULT_PRECOMPUTE_K, logger=logger)
        if cache_limit_bytes is None:
            cache_limit_bytes = _env_mib("XGRAMMAR2_SGLANG_CACHE_MB")
        self._cache_limit_bytes = cache_limit_bytes
        # The on-disk compile cache (docs/disk-cache.md), shared by every SGLang process of
        # the node: XGRAMMAR2_SGLANG_CACHE_DIR (a path, or "off"), else XGRAMMAR2_CACHE_DIR,
        # else <SGLANG_CACHE_ROOT or ~/.cache/sglang>/xgrammar2.
        self.cache_dir = xgr2.serving.engine_cache_dir(
            os.environ.get("XGRAMMAR2_SGLANG_CACHE_DIR"),
            os.environ.get("SGLANG_CACHE_ROOT") or os.path.join(
                os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sglang"))
        self.compiler = xgr2.GrammarCompiler(
            self.tokenizer_info, cache_enabled=True, cache_limit_bytes=cache_limit_bytes,
            cache_dir=self.cache_dir or False,
            cache_dir_limit_bytes=_env_mib("XGRAMMAR2_SGLANG_CACHE_DIR_MB"),
        )
        n_tok = len(self.tokenizer_info.encoded_vocab)
        logger.info(
            "xgrammar2 grammar backend: vocab %d (tokenizer %d tokens), any_whitespace=%s, "
            "max_whitespace_cnt=%s", vocab_size, n_tok, self.any_whitespace, self.max_whitespace_cnt,
        )

    # ---- SGLang's backend-level mask helpers (used by the reasoner wrapper) ---------------

    allocate_vocab_mask = staticmethod(masks.allocate_vocab_mask)
    move_vocab_mask = staticmethod(masks.move_vocab_mask)
    apply_vocab_mask = staticmethod(masks.apply_vocab_mask)
    set_token_filter = staticmethod(masks.set_token_filter)

    @property
    def is_support_token_filter(self) -> bool:
        return True

    # ---- compilation --------------------------------------------------------------------

    def _grammar(self, ctx: "xgr2.CompiledGrammar", key_string: str, kind: str) -> XGrammar2Grammar:
        return XGrammar2Grammar.from_compiled(
            ctx, self.vocab_size, self.override_stop_tokens, key_string, GrammarStats(dispatch_type=kind)
        )

    def _compile(self, kind: str, key_string: str, fn: Callable[[], "xgr2.CompiledGrammar"]) -> BaseGrammarObject:
        try:
            ctx = fn()
        except (KeyboardInterrupt, SystemExit, MemoryError):
            raise
        except Exception as e:  # noqa: BLE001 - every compile failure rejects the request only
            msg = str(e) or type(e).__name__
            logger.warning("xgrammar2: invalid %s grammar: %s", kind, msg)
            return InvalidGrammarObject(f"xgrammar2: {msg}")
        # SGLang moves the request to the waiting queue once this returns: its prefill
        # overlaps the build of the grammar's most expensive mask entries.
        self.compiler.precompute_in_background(ctx, self.precompute_k)
        return self._grammar(ctx, key_string, kind)

    def json_kwargs(self) -> Dict[str, Any]:
        """The whitespace options of JSON compiles (SGLang's --constrained-json-* flags)."""
        kw: Dict[str, Any] = {"any_whitespace": self.any_whitespace}
        if self.any_whitespace and self.max_whitespace_cnt is not None:
            kw["max_whitespace_cnt"] = self.max_whitespace_cnt
        if self.lenient:
            kw["lenient"] = True
        return kw

    def dispatch_json(self, key_string: str) -> BaseGrammarObject:
        if key_string == "$$ANY$$":
            return self._compile("json", key_string, self.compile_any_json)
        return self._compile("json", key_string, lambda: self.compile_json(key_string))

    def compile_any_json(self) -> "xgr2.CompiledGrammar":
        """``$$ANY$$``: any JSON object or array, as SGLang's xgrammar backend serves it
        (upstream's builtin JSON grammar has an object or an array at the root; xgrammar2's
        builtin grammar admits any value, so its root is narrowed here)."""
        text = str(xgr2.Grammar.builtin_json_grammar())
        lines = text.splitlines()
        if lines and lines[0].replace(" ", "") == "root::=value":
            return self.compiler.compile_grammar("\n".join(["root ::= object | array"] + lines[1:]))
        return self.compiler.compile_builtin_json_grammar()

    def compile_json(self, key_string: str) -> "xgr2.CompiledGrammar":
        """A JSON-schema request (text), with upstream's implied object / array types."""
        try:
            schema = json.loads(key_string)
        except ValueError as e:
            raise ValueError(f"the JSON schema is not valid JSON: {e}") from None
        schema = infer_types(schema)
        try:
            ctx = self.compiler.compile_json_schema(schema, **self.json_kwargs())
        except ValueError as e:
            named = xgr2.serving.name_tool_in_error(schema, e)
            if named is None:
                raise
            raise ValueError(named) from e
        xgr2.serving.log_unenforced_once(logger, ctx, key_string)
        return ctx

    def dispatch_regex(self, key_string: str) -> BaseGrammarObject:
        return self._compile("regex", key_string, lambda: self.compiler.compile_regex(key_string))

    def dispatch_ebnf(self, key_string: str) -> BaseGrammarObject:
        """xgrammar's EBNF dialect; also serves ``full_assistant_ebnf`` (GLM-4.7 tool turns)."""
        return self._compile("ebnf", key_string, lambda: self.compiler.compile_grammar(key_string))

    def dispatch_structural_tag(self, key_string: str) -> BaseGrammarObject:
        return self._compile("structural_tag", key_string, lambda: self.compile_structural_tag(key_string))

    def compile_structural_tag(self, key_string: str) -> "xgr2.CompiledGrammar":
        """A legacy (``structures`` / ``triggers``) or current (``format``) structural tag."""
        tag = json.loads(key_string)
        if not isinstance(tag, dict):
            raise ValueError("a structural tag must be a JSON object")
        if tag.get("structures") is not None:
            tag = legacy_structural_tag_to_format(tag)
        elif tag.get("format") is None:
            raise ValueError("a structural tag needs 'format' (or the legacy 'structures' and 'triggers')")
        else:
            _sanitize_format(tag["format"])
        tag.setdefault("type", "structural_tag")
        # The tool-call tags SGLang builds carry their own JSON options: the engine's bound
        # goes into their json_schema contents that set none.
        # With --constrained-json-disable-any-whitespace SGLang's JSON layout has one space
        # after ',' and ':' (upstream's separators), so tags get a bound of 1 there.
        bound = self.max_whitespace_cnt if self.any_whitespace else 1
        tag = xgr2.serving.bound_tag_whitespace(tag, bound, any_whitespace=True)
        try:
            return self.compiler_for_tag(tag).compile_structural_tag(tag)
        except ValueError as e:
            named = xgr2.serving.name_tool_in_error(tag, e)
            if named is None:
                raise
            raise ValueError(named) from e

    def compiler_for_tag(self, tag: Any) -> "xgr2.GrammarCompiler":
        """The compiler for a structural tag: the engine's own. Control tokens a tag spells
        (e.g. "<|python_tag|>", gpt-oss's "<|channel|>") are admitted where it spells them
        by xgrammar2 itself (special-token spellings), so no vocabulary view is needed."""
        return self.compiler

    def compile_framed_grammar(self, grammar: BaseGrammarObject, frame: Callable[[dict], dict]) -> Optional[BaseGrammarObject]:
        """Embeds ``grammar`` in the reasoning detector's answer frame (a structural tag,
        token-level elements included). A frame xgrammar2 cannot compile (e.g. one using
        ``exclude_token`` / ``any_tokens``) returns None, and SGLang falls back to plain
        reasoner gating."""
        if not isinstance(grammar, XGrammar2Grammar):
            return None
        try:
            tag = frame({"type": "grammar", "grammar": str(grammar.ctx.grammar)})
            key = json.dumps(tag)
            ctx = self.compile_structural_tag(key)
        except Exception as e:  # noqa: BLE001
            logger.info("xgrammar2: answer frame not compiled (%s); using plain reasoner gating", e)
            return None
        return self._grammar(ctx, key, "structural_tag")

    def reset(self) -> None:
        super().reset()
        self.compiler.clear_cache()


# ---- the factory ------------------------------------------------------------------------------


def create_backend(
    server_args: Any, tokenizer: Any, vocab_size: int, eos_token_ids: Optional[Sequence[int]] = None
) -> Optional[BaseGrammarBackend]:
    """SGLang's ``init_func`` for ``xgrammar2``: the backend with SGLang's JSON whitespace
    options, wrapped in ``ReasonerGrammarBackend`` when a reasoning parser is configured (the
    custom-backend path of ``create_grammar_backend`` returns before SGLang would wrap it).
    Returns None (no grammar backend, like SGLang's xgrammar fallback) when xgrammar2 cannot
    handle the tokenizer."""
    from sglang.srt.runtime_context import get_context, get_serving

    serving = get_serving()
    try:
        backend: BaseGrammarBackend = XGrammar2GrammarBackend(
            tokenizer,
            vocab_size=vocab_size,
            model_eos_token_ids=list(eos_token_ids) if eos_token_ids else None,
            any_whitespace=not serving.constrained_json_disable_any_whitespace,
            max_whitespace_cnt=serving.constrained_json_max_whitespace_cnt,
            whitespace_pattern=serving.constrained_json_whitespace_pattern,
        )
    except TokenizerNotSupportedError as e:
        if serving.enable_strict_thinking:
            raise ValueError(
                f"--enable-strict-thinking needs a grammar backend with token filtering, but "
                f"xgrammar2 failed to initialize: {e}"
            ) from e
        logger.warning(
            "xgrammar2 grammar backend disabled: %s. Falling back to grammar_backend='none'; "
            "structured outputs will not be available.", e,
        )
        get_context().override("grammar.import_fallback", grammar_backend="none")
        return None

    if serving.reasoning_parser and tokenizer is not None:
        from sglang.srt.constrained.reasoner_grammar_backend import ReasonerGrammarBackend
        from sglang.srt.parser.reasoning_parser import ReasoningParser

        parser = ReasoningParser(model_type=serving.reasoning_parser, stream_reasoning=False, tokenizer=tokenizer)
        if parser.detector.get_think_end_token_ids(tokenizer):
            backend = ReasonerGrammarBackend(
                backend, parser, tokenizer, enable_strict_thinking=serving.enable_strict_thinking
            )
            enable_native_batch_fill_for_reasoner()
        else:
            logger.warning(
                "xgrammar2: the reasoning parser's think_end_token %r cannot be encoded; "
                "grammars apply from the first token", parser.detector.think_end_token,
            )
    return backend


def enable_native_batch_fill_for_reasoner() -> bool:
    """SGLang calls ``fill_vocab_mask_batched`` on the batch's first grammar; with a reasoning
    parser that is a ``ReasonerGrammarObject``, which inherits the base per-row loop. Give it
    ours: rows of xgrammar2 grammars whose reasoning is over are filled in one native call;
    every other row is filled by its own ``fill_vocab_mask`` exactly as the base loop does.
    Only done when SGLang's class does not define its own; returns whether it is in place."""
    from sglang.srt.constrained.reasoner_grammar_backend import ReasonerGrammarObject

    current = ReasonerGrammarObject.__dict__.get("fill_vocab_mask_batched")
    ours = XGrammar2Grammar.__dict__["fill_vocab_mask_batched"]
    if current is ours:
        return True
    if current is not None:
        return False
    ReasonerGrammarObject.fill_vocab_mask_batched = ours
    return True
