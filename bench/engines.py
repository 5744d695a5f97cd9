"""Engine adapters: one small interface, each engine in its best native form.

An adapter lives inside a worker process (bench/worker.py), never in the driver, so that a crash, a hang or the
import cost of one engine cannot touch the others. All adapters see the same vocabulary: the HF `tokenizer.json`
named by the run (Llama-3 instruct by default), with the stop ids of the canonical vocabulary file.

Grammar specs are dicts built by bench/workloads.py:
  {"kind": "json_schema", "schema": {...}}
  {"kind": "grammar", "ebnf": "<xgrammar EBNF>", "lark": "<llguidance lark>", "regex": optional}
  {"kind": "builtin_json"}
  {"kind": "regex", "regex": "..."}
  {"kind": "tools", "format": "function" | "llama" | "harmony", "tools": [OpenAI function tools]}
      free text and tool calls: "function" = DESIGN.md's baseline "<function=NAME>{json}</function>" after free
      text; "llama" = Llama 3.x '{"name": "NAME", "parameters": {json}}'; "harmony" = gpt-oss messages (analysis,
      then commentary tool calls ending in <|call|>). Built in each engine's native form (bench/tools.py).
An adapter raises Unsupported for a kind it cannot express (reported as "n/a", not as a failure).
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import json
import os
import sys
from typing import Any

import numpy as np


class Unsupported(Exception):
    """The engine cannot express this kind of grammar; not counted as a compile failure."""


class CompileError(Exception):
    """The engine rejected the grammar (or failed building it)."""


def _byte_level_decoder() -> dict[str, int]:
    # GPT-2 byte->unicode alphabet, inverted: printable Latin-1 bytes map to themselves, the rest to U+0100...
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out: dict[str, int] = {}
    n = 0
    for b in range(256):
        if b in keep:
            out[chr(b)] = b
        else:
            out[chr(256 + n)] = b
            n += 1
    return out


def load_canonical(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def canonical_token_bytes(canon: dict[str, Any]) -> list[bytes]:
    """Token id -> bytes for a canonical vocabulary (byte_level or byte_fallback)."""
    added = set(canon.get("added_ids", []))
    out: list[bytes] = []
    if canon["vocab_type"] == "byte_level":
        dec = _byte_level_decoder()
        for i, t in enumerate(canon["tokens"]):
            if i in added or any(c not in dec for c in t):
                out.append(t.encode("utf-8"))
            else:
                out.append(bytes(dec[c] for c in t))
    else:
        for i, t in enumerate(canon["tokens"]):
            if i in added:
                out.append(t.encode("utf-8"))
            elif len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
                out.append(bytes([int(t[3:5], 16)]))
            else:
                out.append(t.replace("\u2581", " ").encode("utf-8"))
    return out


def _version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


class Engine:
    """The adapter interface. Handles and matchers are opaque to the caller."""

    name = "?"
    #: Per-run options from the driver (Config.options): "stop_ids" (override the canonical stop tokens),
    #: "compiler" (xgrammar2 compile options, for the ablation), "specials_as_text" (xgrammar2: build the
    #: vocabulary so that special tokens spell their text, for Harmony).
    options: dict[str, Any] = {}

    def memory_stats(self, handle: Any = None) -> dict[str, Any]:
        """Engine-reported memory (bytes) where the engine exposes it; RSS is taken by the worker."""
        return {}

    def reset_caches(self) -> None:
        """Forget every cached compile result (start of a tool sequence), where the engine has caches."""

    def load_vocab(self, tokenizer_json: str, canonical: dict[str, Any], threads: int) -> dict[str, Any]:
        raise NotImplementedError

    def request(self, spec: dict[str, Any]) -> dict[str, Any]:
        """The spec with what a serving engine receives from its client built in (untimed: the client's
        work, not the engine's); compile() takes the result."""
        return spec

    def compile(self, spec: dict[str, Any], cache: bool = True) -> Any:
        raise NotImplementedError

    def new_matcher(self, handle: Any) -> Any:
        raise NotImplementedError

    def allocate_bitmask(self) -> tuple[Any, np.ndarray]:
        """(the engine's preallocated int32[1, words] bitmask, a numpy view of the same memory)."""
        raise NotImplementedError

    def fill_mask(self, matcher: Any, bitmask: Any) -> None:
        raise NotImplementedError

    def accept(self, matcher: Any, token: int) -> bool:
        raise NotImplementedError

    def is_terminated(self, matcher: Any) -> bool:
        raise NotImplementedError

    def versions(self) -> dict[str, str | None]:
        return {}


def _hf_tokenizer(tokenizer_json: str):
    import transformers

    cfg = os.path.join(os.path.dirname(tokenizer_json), "tokenizer_config.json")
    kwargs = {}
    if os.path.exists(cfg):
        # Keep the special-token names the model ships, so stop ids and added tokens match the canonical file.
        with open(cfg, encoding="utf-8") as f:
            c = json.load(f)
        for k in ("bos_token", "eos_token", "unk_token", "pad_token"):
            v = c.get(k)
            if isinstance(v, dict):
                v = v.get("content")
            if isinstance(v, str):
                kwargs[k] = v
    return transformers.PreTrainedTokenizerFast(tokenizer_file=tokenizer_json, **kwargs)


class XGrammarFamily(Engine):
    """Upstream xgrammar and xgrammar2 share the public API, so one adapter serves both."""

    module_name = "xgrammar"
    has_cache = True

    def __init__(self) -> None:
        self.xgr: Any = None
        self.tokenizer_info: Any = None
        self.compiler: Any = None
        self.compiler_nocache: Any = None
        self.vocab_path = ""

    def _import(self):
        return importlib.import_module(self.module_name)

    def load_vocab(self, tokenizer_json, canonical, threads):
        self.xgr = self._import()
        try:
            import torch

            torch.set_num_threads(threads)
        except ImportError:
            pass
        stop = list(self.options.get("stop_ids") or canonical["eos_ids"])
        ti = None
        if self.options.get("specials_as_text"):
            # Every token spells its text, special ones included (so "<|channel|>" in a grammar matches the
            # <|channel|> token): the raw constructor over the canonical spelling.
            ti = self.xgr.TokenizerInfo(canonical["tokens"], vocab_type=self.xgr.VocabType.BYTE_LEVEL,
                                        vocab_size=canonical["num_tokens"], stop_token_ids=stop)
            self.vocab_path = "raw TokenizerInfo (special tokens as text)"
        else:
            try:
                tok = _hf_tokenizer(tokenizer_json)
                ti = self.xgr.TokenizerInfo.from_huggingface(tok, stop_token_ids=stop)
                self.vocab_path = "TokenizerInfo.from_huggingface"
            except Exception as e:  # noqa: BLE001 - fall back to the raw constructor, and say so
                self.vocab_path = f"raw TokenizerInfo (from_huggingface failed: {type(e).__name__}: {e})"
        if ti is None:
            ti = self.xgr.TokenizerInfo(
                canonical["tokens"],
                vocab_type=self.xgr.VocabType.BYTE_LEVEL,
                vocab_size=canonical["num_tokens"],
                stop_token_ids=stop,
            )
        self.tokenizer_info = ti
        extra = dict(self.options.get("compiler") or {})
        self.compiler = self.xgr.GrammarCompiler(ti, max_threads=threads, cache_enabled=True, **extra)
        self.compiler_nocache = self.xgr.GrammarCompiler(ti, max_threads=threads, cache_enabled=False, **extra)
        return {"vocab_size": int(ti.vocab_size), "vocab_path": self.vocab_path,
                "stop_token_ids": list(ti.stop_token_ids)}

    def compile(self, spec, cache=True):
        comp = self.compiler if cache else self.compiler_nocache
        kind = spec["kind"]
        try:
            if kind == "json_schema":
                cg = comp.compile_json_schema(json.dumps(spec["schema"]), strict_mode=spec.get("strict_mode", True))
            elif kind == "builtin_json":
                cg = comp.compile_builtin_json_grammar()
            elif kind == "grammar":
                cg = comp.compile_grammar(spec["ebnf"])
            elif kind == "regex":
                cg = comp.compile_regex(spec["regex"])
            elif kind == "tools":
                cg = comp.compile_structural_tag(spec.get("request") or self.structural_tag(spec))
            else:
                raise Unsupported(kind)
        except Unsupported:
            raise
        except Exception as e:  # noqa: BLE001 - any engine exception is a compile failure
            raise CompileError(f"{type(e).__name__}: {e}") from e
        return cg

    def request(self, spec):
        # A server receives the structural tag as JSON text (vLLM and SGLang pass it on as a string).
        if spec["kind"] == "tools" and spec["format"] == "function":
            return {**spec, "request": self.structural_tag(spec)}
        return spec

    def structural_tag(self, spec):
        """The tool format as this engine's structural tag: the model templates of get_model_structural_tag
        (Llama, Harmony), or a triggered_tags format for "<function=NAME>" (DESIGN.md's baseline format)."""
        fmt, tools = spec["format"], spec["tools"]
        if fmt == "function":
            return json.dumps({"type": "structural_tag", "format": {
                "type": "triggered_tags", "triggers": ["<function="],
                "tags": [{"type": "tag", "begin": f"<function={t['function']['name']}>",
                          "content": {"type": "json_schema", "json_schema": t["function"]["parameters"]},
                          "end": "</function>"} for t in tools]}})
        if fmt in ("llama", "harmony"):
            return self.xgr.get_model_structural_tag(fmt, tools=tools, tool_choice="auto",
                                                     reasoning=(fmt == "harmony"))
        raise Unsupported(f"tool format {fmt}")

    def memory_stats(self, handle=None):
        out: dict[str, Any] = {}
        try:
            out["compiler_cache_bytes"] = int(self.compiler.get_cache_size_bytes())
        except Exception:  # noqa: BLE001
            pass
        if handle is not None:
            try:
                out["grammar_bytes"] = int(handle.memory_size_bytes)
            except Exception:  # noqa: BLE001
                pass
        return out

    def reset_caches(self):
        self.compiler.clear_cache()

    def new_matcher(self, handle):
        return self.xgr.GrammarMatcher(handle)

    def allocate_bitmask(self):
        bm = self.xgr.allocate_token_bitmask(1, self.tokenizer_info.vocab_size)
        view = bm.numpy() if hasattr(bm, "numpy") else np.asarray(bm)
        return bm, view

    def fill_mask(self, matcher, bitmask):
        matcher.fill_next_token_bitmask(bitmask, 0)

    def accept(self, matcher, token):
        return bool(matcher.accept_token(token))

    def is_terminated(self, matcher):
        return bool(matcher.is_terminated())

    def versions(self):
        return {self.module_name: _version(self.module_name) or getattr(self.xgr, "__version__", None)}


class XGrammar(XGrammarFamily):
    name = "xgrammar"
    module_name = "xgrammar"


class XGrammar2(XGrammarFamily):
    name = "xgrammar2"
    module_name = "xgrammar2"

    def _import(self):
        try:
            return importlib.import_module("xgrammar2")
        except ImportError:
            # Not installed: try the checkout's engine/ folder (an in-place build).
            root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "engine")
            if os.path.isdir(os.path.join(root, "xgrammar2")) and root not in sys.path:
                sys.path.insert(0, root)
            return importlib.import_module("xgrammar2")

    def memory_stats(self, handle=None):
        out = super().memory_stats(handle)
        try:
            st = self.xgr.get_cross_grammar_cache_stats()
            out["xgc_bytes"] = st["bytes"]
            out["xgc_entries"] = st["entries"]
            out["xgc_hits"] = st["hits"]
            out["xgc_misses"] = st["misses"]
        except Exception:  # noqa: BLE001 - an older engine without the cross-grammar cache
            pass
        get_auto = getattr(self.xgr, "get_automaton_cache_stats", None) or getattr(
            getattr(self.xgr, "cache", None), "get_automaton_cache_stats", None)
        if get_auto is not None:
            try:
                st = get_auto()
                out.update(automaton_hits=st["hits"], automaton_misses=st["misses"], automaton_bytes=st["bytes"])
            except Exception:  # noqa: BLE001
                pass
        return out

    def reset_caches(self):
        super().reset_caches()
        try:
            self.xgr.clear_cross_grammar_cache()
        except Exception:  # noqa: BLE001
            pass

    def versions(self):
        v = _version("xgrammar2") or getattr(self.xgr, "__version__", None)
        return {"xgrammar2": v, "xgrammar2_path": getattr(self.xgr, "__file__", None)}


class _LLGHandle:
    __slots__ = ("grammar", "spare")

    def __init__(self, grammar: str, spare: Any) -> None:
        self.grammar = grammar
        self.spare = spare


class LLGuidance(Engine):
    """llguidance: LLTokenizer built from the HF tokenizer, LLMatcher on JSON-schema or lark grammars; masks go
    straight into the preallocated numpy row through unsafe_compute_mask_ptr (what llguidance.numpy does, minus
    its per-call asserts)."""

    name = "llguidance"

    def load_vocab(self, tokenizer_json, canonical, threads):
        import llguidance
        import llguidance.hf

        self.llg = llguidance
        tok = _hf_tokenizer(tokenizer_json)
        self.tok = llguidance.hf.from_tokenizer(tok, eos_token=list(self.options.get("stop_ids")
                                                                    or canonical["eos_ids"]))
        self.words = (self.tok.vocab_size + 31) // 32
        return {"vocab_size": int(self.tok.vocab_size), "vocab_path": "llguidance.hf.from_tokenizer",
                "stop_token_ids": list(self.tok.eos_tokens)}

    def grammar_text(self, spec):
        LLM = self.llg.LLMatcher
        kind = spec["kind"]
        if kind == "json_schema":
            return LLM.grammar_from_json_schema(spec["schema"])
        if kind == "builtin_json":
            # llguidance's own "any JSON value": the JSON-schema compiler on the empty schema.
            return LLM.grammar_from_lark("start: %json {}")
        if kind == "grammar":
            if not spec.get("lark"):
                raise Unsupported("no lark version of this grammar")
            return LLM.grammar_from_lark(spec["lark"])
        if kind == "regex":
            return LLM.grammar_from_regex(spec["regex"])
        if kind == "tools":
            from bench.tools import llguidance_tools_grammar

            return llguidance_tools_grammar(self.llg, spec)
        raise Unsupported(kind)

    def compile(self, spec, cache=True):
        # llguidance has no compile cache; cache=False is the same path.
        try:
            g = self.grammar_text(spec)
        except Unsupported:
            raise
        except Exception as e:  # noqa: BLE001
            raise CompileError(f"{type(e).__name__}: {e}") from e
        m = self.llg.LLMatcher(self.tok, g, log_level=0)
        if m.is_error():
            raise CompileError(m.get_error())
        # llguidance's compiled artefact is the grammar text plus the matcher built from it (the constructor does
        # the lexer/parser building). Keep that first matcher as a spare so compile-to-matcher counts it once;
        # later matchers are built anew, which is what a serving engine does per request with llguidance.
        return _LLGHandle(g, m)

    def new_matcher(self, handle):
        if handle.spare is not None:
            m, handle.spare = handle.spare, None
            return m
        return self.llg.LLMatcher(self.tok, handle.grammar, log_level=0)

    def allocate_bitmask(self):
        bm = np.zeros((1, self.words), dtype=np.int32)
        return bm, bm

    def fill_mask(self, matcher, bitmask):
        matcher.unsafe_compute_mask_ptr(bitmask.ctypes.data, bitmask.nbytes)

    def accept(self, matcher, token):
        return bool(matcher.consume_token(token))

    def is_terminated(self, matcher):
        return bool(matcher.is_stopped()) and not matcher.is_error()

    def versions(self):
        return {"llguidance": _version("llguidance")}


class OutlinesCore(Engine):
    """outlines-core: JSON schema -> regex -> token-level DFA index. No EBNF; EOS is accepted in a final state."""

    name = "outlines-core"

    def load_vocab(self, tokenizer_json, canonical, threads):
        import outlines_core

        self.oc = outlines_core
        toks = canonical_token_bytes(canonical)
        added = set(canonical.get("added_ids", []))
        self.eos = list(self.options.get("stop_ids") or canonical["eos_ids"])
        m: dict[bytes, list[int]] = {}
        for i, b in enumerate(toks):
            if i in added:
                continue
            m.setdefault(b, []).append(i)
        self.vocab = outlines_core.Vocabulary(self.eos[-1], m)
        self.n = canonical["num_tokens"]
        self.words = (self.n + 31) // 32
        return {"vocab_size": self.n, "vocab_path": "outlines_core.Vocabulary(canonical bytes)",
                "stop_token_ids": [self.eos[-1]]}

    def compile(self, spec, cache=True):
        from outlines_core.json_schema import build_regex_from_schema

        kind = spec["kind"]
        try:
            if kind == "json_schema":
                rx = build_regex_from_schema(json.dumps(spec["schema"]))
            elif kind == "regex":
                rx = spec["regex"]
            elif kind == "grammar" and spec.get("regex"):
                rx = spec["regex"]
            elif kind == "tools":
                raise Unsupported("outlines-core has no free-text-then-tag construct (no lazy or triggered "
                                  "lexemes): a tool format would be one regex over all N argument schemas")
            else:
                raise Unsupported(kind)
            idx = self.oc.Index(rx, self.vocab)
        except Unsupported:
            raise
        except Exception as e:  # noqa: BLE001
            raise CompileError(f"{type(e).__name__}: {e}") from e
        return idx

    def new_matcher(self, handle):
        return {"guide": self.oc.Guide(handle), "done": False}

    def allocate_bitmask(self):
        bm = np.zeros((1, self.words), dtype=np.int32)
        return bm, bm

    def fill_mask(self, matcher, bitmask):
        matcher["guide"].write_mask_into(bitmask.ctypes.data, bitmask.size, 4)

    def accept(self, matcher, token):
        g = matcher["guide"]
        if token in self.eos:
            if g.is_finished():
                matcher["done"] = True
                return True
            return False
        try:
            g.advance(token, return_tokens=False)
            return True
        except Exception:  # noqa: BLE001 - outlines-core raises on a rejected token
            return False

    def is_terminated(self, matcher):
        return matcher["done"]

    def versions(self):
        return {"outlines-core": _version("outlines-core")}


ENGINES: dict[str, type[Engine]] = {
    "xgrammar2": XGrammar2,
    "xgrammar": XGrammar,
    "llguidance": LLGuidance,
    "outlines-core": OutlinesCore,
}
