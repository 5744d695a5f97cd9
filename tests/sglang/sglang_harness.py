"""Shared helpers for the SGLang adapter tests (no server, no model weights).

The tests need the real ``sglang`` package, so they run in the SGLang venv
(``bash e2e/run_sglang_tests.sh``); elsewhere every module is skipped at collection with
the reason (:func:`require_sglang`). The adapter is imported from this checkout
(plugins/sglang) even when it is not installed.

The model directory is the Qwen3 tokenizer from ``../shared/data/tokenizers/original/qwen3``
plus a config.json (a tiny Qwen3 architecture with Qwen3's real 151,936-row embedding, so
the logits width exceeds the tokenizer's 151,669 tokens as in the real model). SGLang only
reads the config and the tokenizer; no weights are loaded.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Iterable, List, Optional, Set

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("XGR2_SHARED", REPO.parent / "shared"))
QWEN3_TOKENIZER = SHARED / "data" / "tokenizers" / "original" / "qwen3"
BFCL = SHARED / "data" / "bfcl"
QWEN3_VOCAB = 151936
QWEN3_EOS = [151645, 151643]  # <|im_end|>, <|endoftext|>

SKIP_REASON = (
    "needs the sglang package (SGLang 0.5.23): run `bash e2e/run_sglang_tests.sh`, which "
    "creates the cached SGLang venv"
)

# Only the adapter's folder: engine/ may hold a stale, git-ignored xgrammar2.egg-info from an
# in-place build, which would shadow the installed distribution's metadata (entry points).
if str(REPO / "plugins" / "sglang") not in sys.path:
    sys.path.insert(0, str(REPO / "plugins" / "sglang"))


def have_sglang() -> bool:
    return importlib.util.find_spec("sglang") is not None


def require_sglang() -> None:
    """Skips the calling test module (at collection) when sglang is not installed."""
    if not have_sglang():
        pytest.skip(SKIP_REASON, allow_module_level=True)
    if not QWEN3_TOKENIZER.is_dir():
        pytest.skip(f"test data missing: {QWEN3_TOKENIZER}", allow_module_level=True)


def model_dir(root: Path) -> Path:
    """A model directory with the Qwen3 tokenizer and a tiny Qwen3 config (no weights)."""
    d = root / "qwen3-tiny"
    d.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        target = d / name
        if not target.exists():
            target.write_bytes((QWEN3_TOKENIZER / name).read_bytes())
    cfg = {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": QWEN3_VOCAB,
        "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 1000000,
        "torch_dtype": "bfloat16", "bos_token_id": 151643, "eos_token_id": 151645,
        "tie_word_embeddings": True,
    }
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def publish_server_args(model: Path, *extra: str):
    """Parses SGLang CLI flags exactly as the launcher does (after ``load_plugins()``),
    resolves them and publishes them as a scheduler process would. Returns the ServerArgs."""
    from sglang.srt.plugins import load_plugins
    from sglang.srt.runtime_context import publish
    from sglang.srt.server_args import prepare_server_args

    load_plugins()
    args = prepare_server_args(["--model-path", str(model), "--device", "cpu", *extra])
    args.resolve_once()
    publish(args, role="scheduler")
    return args


def allowed(mask_row, vocab_size: int) -> Set[int]:
    """The token ids whose bit is set in one int32 bitmask row (ids < vocab_size)."""
    import numpy as np

    words = np.asarray(mask_row, dtype=np.int32).view(np.uint32)
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")[:vocab_size]
    return set(np.nonzero(bits)[0].tolist())


def is_allowed(mask_row, token: int) -> bool:
    return bool((int(mask_row[token // 32]) >> (token % 32)) & 1)


def encode(tokenizer, text: str) -> List[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def walk(grammar, tokenizer, text: str, vocab_size: int, *, stop: Optional[int] = QWEN3_EOS[0]) -> List[Set[int]]:
    """Feeds ``text`` (then ``stop``) token by token, checking each token is allowed by the
    row filled before it. Returns the rows (as allowed-id sets)."""
    import torch

    ids = encode(tokenizer, text) + ([stop] if stop is not None else [])
    mask = grammar.allocate_vocab_mask(vocab_size=vocab_size, batch_size=1, device="cpu")
    rows = []
    for i, t in enumerate(ids):
        mask.fill_(0)
        grammar.fill_vocab_mask(mask, 0)
        row = allowed(mask[0].numpy(), vocab_size)
        rows.append(row)
        assert t in row, f"step {i}: token {t} ({tokenizer.decode([t])!r}) masked for {text!r}"
        grammar.accept_token(t)
    if stop is not None:
        assert grammar.is_terminated(), f"not terminated after the stop token ({text!r})"
    return rows


def bfcl_functions(name: str = "BFCL_v4_simple_python.json", limit: int = 20) -> List[dict]:
    """Real function definitions from BFCL (JSON lines), as OpenAI tool dicts."""
    out = []
    with open(BFCL / name) as f:
        for line in f:
            rec = json.loads(line)
            for fn in rec["function"]:
                params = dict(fn.get("parameters") or {"type": "object", "properties": {}})
                if params.get("type") == "dict":
                    params["type"] = "object"
                params = _bfcl_types(params)
                out.append({"type": "function", "function": {
                    "name": fn["name"].replace(".", "_"), "description": fn.get("description", ""),
                    "parameters": params}})
                if len(out) >= limit:
                    return out
    return out


def _bfcl_types(node):
    """BFCL uses Python type names ("dict", "float", "tuple"); map them to JSON Schema."""
    mapping = {"dict": "object", "float": "number", "tuple": "array", "any": None}
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "type" and isinstance(v, str):
                t = mapping.get(v, v)
                if t is not None:
                    out[k] = t
            elif k == "optional":
                continue
            else:
                out[k] = _bfcl_types(v)
        return out
    if isinstance(node, list):
        return [_bfcl_types(v) for v in node]
    return node


def ids_text(tokenizer, ids: Iterable[int], n: int = 8) -> list:
    return [tokenizer.decode([i]) for i in sorted(ids)[:n]]


def classify_difference(tokenizer, ours_only: Set[int], up_only: Set[int], up_grammar=None) -> tuple:
    """Sorts the tokens on which two rows disagree into the documented kinds (see
    test_parity.py). Returns (kinds, unexplained ours-only, unexplained upstream-only)."""
    specials = set(tokenizer.all_special_ids) | {
        i for i, tok in (getattr(tokenizer, "added_tokens_decoder", None) or {}).items() if tok.special
    }
    kinds = set()
    rest_up = set()
    for t in up_only:
        text = tokenizer.decode([t])
        if t in specials:
            kinds.add("CONTROL")
        elif _never_utf8(token_bytes(tokenizer, t)):
            kinds.add("INVALID_UTF8")
        elif "\r" in text:  # JSON whitespace: upstream admits \r, xgrammar2 [ \t\n] only
            kinds.add("CR")
        else:
            rest_up.add(t)
    rest_ours = set()
    for t in ours_only:
        if up_grammar is not None and _upstream_accepts(up_grammar, t):
            kinds.add("UPSTREAM_MASK")
        else:
            rest_ours.add(t)
    return kinds, rest_ours, rest_up


_BYTE_DECODER = None


def token_bytes(tokenizer, token: int) -> bytes:
    """The raw bytes of a byte-level BPE token (added tokens: their UTF-8 text)."""
    global _BYTE_DECODER
    if _BYTE_DECODER is None:
        bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
        cs = bs[:]
        n = 0
        for b in range(256):
            if b not in bs:
                bs.append(b)
                cs.append(256 + n)
                n += 1
        _BYTE_DECODER = {chr(c): b for b, c in zip(bs, cs)}
    piece = tokenizer.convert_ids_to_tokens(token)
    if piece is None:
        return b""
    if token in (getattr(tokenizer, "added_tokens_decoder", None) or {}):
        return piece.encode("utf-8")
    try:
        return bytes(_BYTE_DECODER[c] for c in piece)
    except KeyError:
        return piece.encode("utf-8")


def _never_utf8(data: bytes) -> bool:
    """Bytes that occur in no well-formed UTF-8 text (C0, C1, F5..FF)."""
    return any(b in (0xC0, 0xC1) or b >= 0xF5 for b in data)


def _upstream_accepts(grammar, token: int) -> bool:
    m = grammar.matcher
    if m.accept_token(token):
        m.rollback(1)
        return True
    return False
