"""Tokenizer information: the vocabulary decoded to the bytes each token produces, the stop
and special tokens, and the C vocabulary handle built from them.

Decoding is pure Python and needs no C core; the core's vocabulary handle is built lazily,
the first time a grammar is compiled against this tokenizer.
"""

import json
import os
import re
import threading
import warnings
from enum import Enum
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from . import _core
from .exception import InvalidArgumentError

__all__ = ["VocabType", "TokenizerInfo"]


class VocabType(Enum):
    """How the tokens of a vocabulary are spelled. Same names and values as upstream xgrammar.

    TokenizerInfo always decodes the vocabulary back to the bytes each token produces.
    """

    RAW = 0
    """Tokens are kept as they are: ``str`` tokens are UTF-8 text, ``bytes`` tokens are the
    bytes themselves (tiktoken-style vocabularies)."""

    BYTE_FALLBACK = 1
    """SentencePiece byte-fallback vocabularies (Llama-2, Mistral): ``<0xNN>`` is the byte
    0xNN and ``▁`` (U+2581) is a space."""

    BYTE_LEVEL = 2
    """Byte-level BPE (GPT-2, Llama-3, Qwen, DeepSeek, gpt-oss): every byte is spelled with one
    character of the GPT-2 byte-to-unicode alphabet (``Ġ`` = space, ``Ċ`` = newline)."""


# ---- decoding -------------------------------------------------------------------------------


def _bytes_to_unicode() -> Dict[int, str]:
    """GPT-2's byte -> printable character map (transformers' ``bytes_to_unicode``)."""
    kept = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(0xA1, 0xAC + 1))
        + list(range(0xAE, 0xFF + 1))
    )
    mapping = {b: chr(b) for b in kept}
    shifted = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + shifted)
            shifted += 1
    return mapping


_BYTE_TO_UNICODE = _bytes_to_unicode()
_BYTE_LEVEL_CHARSET = frozenset(_BYTE_TO_UNICODE.values())

# str.translate table: alphabet character -> the byte it stands for (as a code point < 256);
# Latin-1 characters that are NOT in the alphabet -> U+FFFF so that the following
# .encode("latin-1") fails and the token falls back to literal UTF-8 (like upstream).
_BYTE_LEVEL_TABLE: Dict[int, int] = {cp: 0xFFFF for cp in range(256)}
_BYTE_LEVEL_TABLE.update({ord(ch): b for b, ch in _BYTE_TO_UNICODE.items()})

_BYTE_FALLBACK_RE = re.compile(r"<0x([0-9A-Fa-f]{2})>\Z")

# Names that upstream xgrammar recognises as stop tokens when none are given.
_STOP_TOKEN_NAMES = (
    "</s>",
    "<|end_of_text|>",
    "<|eot_id|>",
    "<|endoftext|>",
    "<eos>",
    "<|eos|>",
    "<end_of_turn>",
    "<｜end▁of▁sentence｜>",
)


def _token_text(token: Union[str, bytes], token_id: int) -> str:
    if isinstance(token, str):
        return token
    if isinstance(token, (bytes, bytearray)):
        try:
            return bytes(token).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(
                f"token {token_id} is bytes that are not UTF-8 text ({token!r}); only a RAW "
                "vocabulary may hold arbitrary bytes"
            ) from e
    raise TypeError(f"token {token_id} must be str or bytes, got {type(token).__name__}")


def _utf8(text: str, token_id: int) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"token {token_id} is not valid Unicode text: {text!r}") from e


def _decode_token(token: Union[str, bytes], vocab_type: VocabType, token_id: int = -1) -> bytes:
    """The bytes one encoded token stands for (not for added tokens, which are literal)."""
    if vocab_type is VocabType.RAW:
        if isinstance(token, (bytes, bytearray)):
            return bytes(token)
        return _utf8(_token_text(token, token_id), token_id)
    text = _token_text(token, token_id)
    if vocab_type is VocabType.BYTE_LEVEL:
        try:
            return text.translate(_BYTE_LEVEL_TABLE).encode("latin-1")
        except UnicodeEncodeError:
            # Not spelled in the byte alphabet: an added token written as literal text.
            return _utf8(text, token_id)
    if vocab_type is VocabType.BYTE_FALLBACK:
        m = _BYTE_FALLBACK_RE.match(text)
        if m is not None:
            return bytes((int(m.group(1), 16),))
        return _utf8(text.replace("\u2581", " "), token_id)
    raise ValueError(f"unknown vocab_type {vocab_type!r}")


def _as_vocab_type(vocab_type: Any) -> VocabType:
    if isinstance(vocab_type, VocabType):
        return vocab_type
    if isinstance(vocab_type, str):
        key = vocab_type.strip().upper().replace("-", "_")
        if key in VocabType.__members__:
            return VocabType[key]
    elif isinstance(vocab_type, int) and not isinstance(vocab_type, bool):
        try:
            return VocabType(vocab_type)
        except ValueError:
            pass
    # Upstream-compatible enums from another package (same names / values).
    value = getattr(vocab_type, "value", None)
    if isinstance(value, int):
        return VocabType(value)
    raise ValueError(
        f"vocab_type must be a VocabType (RAW, BYTE_FALLBACK or BYTE_LEVEL), got {vocab_type!r}"
    )


def _id_list(ids: Any, what: str) -> Optional[List[int]]:
    if ids is None:
        return None
    if isinstance(ids, bool):
        raise TypeError(f"{what} must be an int or a list of ints, got bool")
    if isinstance(ids, int) or hasattr(ids, "__index__") and not hasattr(ids, "__len__"):
        return [int(ids.__index__())]
    out = []
    for x in ids:
        if isinstance(x, bool) or not hasattr(x, "__index__"):
            raise TypeError(f"{what} must contain ints, got {x!r}")
        out.append(int(x.__index__()))
    return out


def _unique(ids: Iterable[int]) -> List[int]:
    seen = set()
    out = []
    for i in ids:
        if i not in seen:
            seen.add(i)
            out.append(i)
    return out


# ---- HF metadata detection ----------------------------------------------------------------


def _components(node: Any, key: str) -> List[Dict[str, Any]]:
    """Flattens a tokenizers.json component (decoder / pre_tokenizer / normalizer) that may be
    a Sequence into its list of leaf components."""
    if not isinstance(node, dict):
        return []
    if node.get("type") == "Sequence":
        out: List[Dict[str, Any]] = []
        for child in node.get(key) or []:
            out.extend(_components(child, key))
        return out
    return [node]


def _metadata_from_components(
    decoder: Any, pre_tokenizer: Any, normalizer: Any, model: Any
) -> Dict[str, Any]:
    decs = _components(decoder, "decoders")
    pres = _components(pre_tokenizer, "pretokenizers")
    norms = _components(normalizer, "normalizers")
    types = {c.get("type") for c in decs + pres}
    if "ByteLevel" in types:
        add_prefix_space = any(
            c.get("type") == "ByteLevel" and bool(c.get("add_prefix_space")) for c in pres
        )
        return {"vocab_type": VocabType.BYTE_LEVEL, "add_prefix_space": add_prefix_space}
    byte_fallback = (
        "ByteFallback" in types
        or "Metaspace" in types
        or bool(isinstance(model, dict) and model.get("byte_fallback"))
        or any(
            c.get("type") == "Replace"
            and (c.get("pattern") or {}).get("String") == "\u2581"
            and c.get("content") == " "
            for c in decs
        )
    )
    if byte_fallback:
        add_prefix_space = any(
            c.get("type") == "Prepend" and c.get("prepend") == "\u2581" for c in norms
        ) or any(
            c.get("type") == "Metaspace"
            and (
                c.get("prepend_scheme") in ("always", "first")
                or bool(c.get("add_prefix_space"))
            )
            for c in pres + decs
        )
        return {"vocab_type": VocabType.BYTE_FALLBACK, "add_prefix_space": add_prefix_space}
    return {"vocab_type": VocabType.RAW, "add_prefix_space": False}


def _component_json(component: Any) -> Any:
    """The JSON of one tokenizers component (cheap: avoids serialising the whole vocab)."""
    if component is None:
        return None
    try:
        state = component.__getstate__()
        if isinstance(state, (bytes, bytearray)):
            state = state.decode("utf-8")
        return json.loads(state)
    except Exception:  # noqa: BLE001 - fall back to the full serialisation
        raise LookupError from None


def _detect_metadata_from_backend(backend: Any) -> Dict[str, Any]:
    """vocab_type / add_prefix_space of a `tokenizers.Tokenizer`."""
    try:
        decoder = _component_json(backend.decoder)
        pre = _component_json(backend.pre_tokenizer)
        norm = _component_json(backend.normalizer)
    except LookupError:
        return TokenizerInfo._detect_metadata_from_hf(backend.to_str())
    # Only the model's byte_fallback flag matters; serialising the model would copy the vocab.
    model = {"byte_fallback": bool(getattr(backend.model, "byte_fallback", False))}
    return _metadata_from_components(decoder, pre, norm, model)


def _detect_vocab_type_from_vocab(tokens: Iterable[str]) -> Optional[VocabType]:
    """The encoding a vocabulary's own spelling proves, or None (same rule as upstream)."""
    tokens = [t for t in tokens if isinstance(t, str)]
    token_set = set(tokens)
    if sum(f"<0x{b:02X}>" in token_set for b in range(256)) >= 128:
        return VocabType.BYTE_FALLBACK
    if sum(ch in token_set for ch in _BYTE_LEVEL_CHARSET) < 128:
        return None
    outside = set("".join(tokens)) - _BYTE_LEVEL_CHARSET
    if not outside:
        return VocabType.BYTE_LEVEL
    rx = re.compile("[" + "".join(re.escape(ch) for ch in outside) + "]")
    n_outside = sum(1 for t in tokens if rx.search(t))
    # Added tokens (chat-template markers) may use other characters: tolerate a few.
    if len(tokens) - n_outside >= 0.99 * len(tokens):
        return VocabType.BYTE_LEVEL
    return None


def _eos_ids_of(obj: Any) -> List[int]:
    if obj is None:
        return []
    if isinstance(obj, dict):
        value = obj.get("eos_token_id")
    else:
        value = getattr(obj, "eos_token_id", None)
    if value is None:
        return []
    return _id_list(value, "eos_token_id") or []


def _load_generation_config(generation_config: Any) -> Any:
    if isinstance(generation_config, (str, os.PathLike)):
        path = os.fspath(generation_config)
        if os.path.isdir(path):
            path = os.path.join(path, "generation_config.json")
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    return generation_config


# ---- TokenizerInfo --------------------------------------------------------------------------


class TokenizerInfo:
    """The vocabulary of a tokenizer, decoded to the bytes of each token, and the information
    grammar-guided generation needs: vocabulary size (of the model's logits), stop tokens and
    special (control) tokens.

    Tokens are decoded from their stored spelling (see :class:`VocabType`): e.g. ``<0x1B>`` in
    a byte-fallback vocabulary and ``Ġ`` in a byte-level one become ``b"\\x1b"`` and ``b" "``.
    Special tokens decode to ``b""``: they never match grammar text, and stop tokens are
    allowed only where the grammar may end.

    Some models pad their vocabulary (e.g. Qwen 151,936 logits for 151,669 tokens). Pass the
    model's size as ``vocab_size``: ids past the tokenizer's tokens are never allowed.
    """

    def __init__(
        self,
        encoded_vocab: Sequence[Union[bytes, str]],
        vocab_type: VocabType = VocabType.RAW,
        *,
        vocab_size: Optional[int] = None,
        stop_token_ids: Optional[Union[List[int], int]] = None,
        add_prefix_space: bool = False,
        special_token_ids: Optional[Union[List[int], int]] = None,
        added_token_ids: Optional[Union[List[int], int]] = None,
    ) -> None:
        """Constructs the tokenizer info.

        Parameters
        ----------
        encoded_vocab : Sequence[Union[bytes, str]]
            Token ``i`` as the tokenizer stores it (the spelling described by ``vocab_type``).

        vocab_type : VocabType, default: VocabType.RAW
            How tokens are spelled. See :class:`VocabType`.

        vocab_size : Optional[int], default: None
            The model's vocabulary size (the logits' width); at least ``len(encoded_vocab)``.
            Defaults to ``len(encoded_vocab)``.

        stop_token_ids : Optional[Union[List[int], int]], default: None
            Tokens that end generation. When None they are detected from well-known names
            (``</s>``, ``<|eot_id|>``, ``<|endoftext|>``, ...), which may be incomplete.

        add_prefix_space : bool, default: False
            Whether the tokenizer prepends a space to the text it encodes (metadata only).

        special_token_ids : Optional[List[int]], default: None
            (xgrammar2 extension) Control tokens: they decode to ``b""`` and never match
            grammar text. Tokens whose decoded text is empty are always special.

        added_token_ids : Optional[List[int]], default: None
            (xgrammar2 extension) Tokens whose stored text is literal (added tokens of a
            byte-level or byte-fallback tokenizer), decoded as UTF-8 without the byte mapping.

        Raises
        ------
        ValueError
            ``vocab_size`` is smaller than the vocabulary, a token id is out of range, or a
            token cannot be decoded.
        """
        vocab_type = _as_vocab_type(vocab_type)
        if isinstance(encoded_vocab, (str, bytes)):
            raise TypeError("encoded_vocab must be a sequence of tokens, not a single string")
        encoded = list(encoded_vocab)
        # An empty vocabulary is valid (as upstream's): matching strings only, empty masks.
        n_tokens = len(encoded)
        if vocab_size is None:
            vocab_size = n_tokens
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
            raise TypeError(f"vocab_size must be an int, got {type(vocab_size).__name__}")
        if vocab_size < n_tokens:
            raise InvalidArgumentError(
                f"vocab_size ({vocab_size}) is smaller than the number of tokens in "
                f"encoded_vocab ({n_tokens}); pass the model's vocabulary size, or truncate "
                "the vocabulary first"
            )
        if vocab_size > 2**31 - 1:
            raise ValueError(f"vocab_size ({vocab_size}) does not fit in int32")

        def checked(ids: Optional[List[int]], what: str, limit: int) -> List[int]:
            ids = ids or []
            for i in ids:
                if not 0 <= i < limit:
                    raise ValueError(
                        f"{what} contains {i}, which is outside the vocabulary [0, {limit})"
                    )
            return _unique(ids)

        stops = _id_list(stop_token_ids, "stop_token_ids")
        explicit_special = checked(
            _id_list(special_token_ids, "special_token_ids"), "special_token_ids", vocab_size
        )
        added = set(
            checked(_id_list(added_token_ids, "added_token_ids"), "added_token_ids", n_tokens)
        )
        special_set = set(explicit_special)

        decoded: List[bytes] = [b""] * n_tokens
        byte_level = vocab_type is VocabType.BYTE_LEVEL
        table = _BYTE_LEVEL_TABLE
        for i, tok in enumerate(encoded):
            if i in special_set:
                continue
            if i in added:
                if isinstance(tok, (bytes, bytearray)):
                    decoded[i] = bytes(tok)
                else:
                    decoded[i] = _utf8(_token_text(tok, i), i)
                continue
            if byte_level and type(tok) is str:  # the common case, inlined for speed
                try:
                    decoded[i] = tok.translate(table).encode("latin-1")
                    continue
                except UnicodeEncodeError:
                    pass
            decoded[i] = _decode_token(tok, vocab_type, i)

        if stops is None:
            # Prefer control / added tokens: a regular token may be spelled like a stop token
            # (Qwen's vocabulary has a plain "</s>").
            candidates = sorted(special_set | added) or range(n_tokens)
            by_name = {}
            for i in candidates:
                tok = encoded[i]
                text = tok.decode("utf-8", "replace") if isinstance(tok, bytes) else tok
                if text in _STOP_TOKEN_NAMES and text not in by_name:
                    by_name[text] = i
            stops = [by_name[name] for name in _STOP_TOKEN_NAMES if name in by_name]
        stops = checked(stops, "stop_token_ids", vocab_size)

        special = sorted(
            special_set
            | {i for i, d in enumerate(decoded) if not d}
            | set(range(n_tokens, vocab_size))
        )

        self._encoded_vocab = encoded
        self._decoded_vocab = decoded
        self._vocab_type = vocab_type
        self._vocab_size = vocab_size
        self._stop_token_ids = stops
        self._special_token_ids = special
        self._explicit_special = sorted(explicit_special)
        self._added_token_ids = sorted(added)
        self._add_prefix_space = bool(add_prefix_space)
        self._vocab_handle: Any = None
        self._lock = threading.Lock()

    # ---- properties ---------------------------------------------------------------------

    @property
    def vocab_type(self) -> VocabType:
        """The type of the vocabulary."""
        return self._vocab_type

    @property
    def vocab_size(self) -> int:
        """The model's vocabulary size (width of the logits and of the token bitmask)."""
        return self._vocab_size

    @property
    def add_prefix_space(self) -> bool:
        """Whether the tokenizer prepends a space to the text it encodes."""
        return self._add_prefix_space

    @property
    def prepend_space_in_tokenization(self) -> bool:
        """Deprecated alias of :attr:`add_prefix_space`."""
        warnings.warn(
            "prepend_space_in_tokenization is deprecated. Use add_prefix_space instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        return self._add_prefix_space

    @property
    def decoded_vocab(self) -> List[bytes]:
        """The bytes each token produces (``b""`` for special tokens), one per tokenizer token
        (ids at or beyond ``len(decoded_vocab)`` up to ``vocab_size`` have no token)."""
        return list(self._decoded_vocab)

    @property
    def encoded_vocab(self) -> List[Union[str, bytes]]:
        """The vocabulary as given (xgrammar2 extension)."""
        return list(self._encoded_vocab)

    @property
    def added_token_ids(self) -> List[int]:
        """(xgrammar2) Tokens whose stored text is literal (added tokens), sorted."""
        return list(self._added_token_ids)

    @property
    def stop_token_ids(self) -> List[int]:
        """The stop token ids."""
        return list(self._stop_token_ids)

    @property
    def special_token_ids(self) -> List[int]:
        """Tokens that never match grammar text: control tokens, tokens that decode to
        nothing, and the padding ids ``[len(decoded_vocab), vocab_size)``."""
        return list(self._special_token_ids)

    def __repr__(self) -> str:
        return (
            f"TokenizerInfo(vocab_type={self._vocab_type.name}, vocab_size={self._vocab_size}, "
            f"num_tokens={len(self._decoded_vocab)}, stop_token_ids={self._stop_token_ids})"
        )

    # ---- metadata -----------------------------------------------------------------------

    def dump_metadata(self) -> str:
        """The metadata as a JSON string; with the encoded vocabulary it rebuilds this object
        through :meth:`from_vocab_and_metadata`. Upstream's keys (vocab_type, vocab_size,
        add_prefix_space, stop_token_ids) come first; special_token_ids and added_token_ids
        are xgrammar2 additions."""
        return json.dumps(
            {
                "vocab_type": self._vocab_type.value,
                "vocab_size": self._vocab_size,
                "add_prefix_space": self._add_prefix_space,
                "stop_token_ids": self._stop_token_ids,
                "special_token_ids": self._explicit_special,
                "added_token_ids": self._added_token_ids,
            },
            separators=(",", ":"),
        )

    @staticmethod
    def from_vocab_and_metadata(
        encoded_vocab: Sequence[Union[bytes, str]], metadata: str
    ) -> "TokenizerInfo":
        """Constructs the tokenizer info from the encoded vocabulary and a metadata JSON string
        (from :meth:`dump_metadata`, or upstream xgrammar's)."""
        try:
            meta = json.loads(metadata)
        except (TypeError, ValueError) as e:
            raise ValueError(f"metadata is not a JSON string: {e}") from e
        if not isinstance(meta, dict):
            raise ValueError("metadata must be a JSON object")
        missing = [k for k in ("vocab_type", "vocab_size") if k not in meta]
        if missing:
            raise ValueError(f"metadata lacks {', '.join(missing)}")
        return TokenizerInfo(
            encoded_vocab,
            _as_vocab_type(meta["vocab_type"]),
            vocab_size=meta["vocab_size"],
            stop_token_ids=meta.get("stop_token_ids"),
            add_prefix_space=bool(meta.get("add_prefix_space", False)),
            special_token_ids=meta.get("special_token_ids"),
            added_token_ids=meta.get("added_token_ids"),
        )

    @staticmethod
    def _detect_metadata_from_hf(backend_str: str) -> Dict[str, Any]:
        """vocab_type and add_prefix_space of a serialized ``tokenizer.json`` (upstream's
        private helper, which some engines call)."""
        d = json.loads(backend_str)
        return _metadata_from_components(
            d.get("decoder"), d.get("pre_tokenizer"), d.get("normalizer"), d.get("model")
        )

    # ---- constructors -------------------------------------------------------------------

    @staticmethod
    def from_canonical_json(
        path: Union[str, "os.PathLike[str]", Dict[str, Any]],
        *,
        vocab_size: Optional[int] = None,
        stop_token_ids: Optional[Union[List[int], int]] = None,
    ) -> "TokenizerInfo":
        """Loads a vocabulary in xgrammar2's canonical JSON format (``tokens``,
        ``vocab_type`` in {"byte_level", "byte_fallback", "raw"}, ``special_ids``,
        ``eos_ids``, ``added_ids``), from a path or an already-parsed dict.

        ``vocab_size`` is the model's size (>= number of tokens); ``stop_token_ids``
        replaces the file's ``eos_ids``.
        """
        if isinstance(path, dict):
            d = path
        else:
            with open(os.fspath(path), encoding="utf-8") as f:
                d = json.load(f)
        try:
            tokens = d["tokens"]
            vtype = _as_vocab_type(d["vocab_type"])
        except KeyError as e:
            raise ValueError(f"canonical vocabulary lacks the {e.args[0]!r} field") from None
        num = d.get("num_tokens")
        if num is not None and num != len(tokens):
            raise ValueError(f"num_tokens is {num} but the file has {len(tokens)} tokens")
        return TokenizerInfo(
            tokens,
            vtype,
            vocab_size=vocab_size,
            stop_token_ids=d.get("eos_ids") if stop_token_ids is None else stop_token_ids,
            add_prefix_space=vtype is VocabType.BYTE_FALLBACK,
            special_token_ids=d.get("special_ids") or [],
            added_token_ids=d.get("added_ids") or [],
        )

    @staticmethod
    def from_huggingface(
        tokenizer: Any,
        *,
        vocab_size: Optional[int] = None,
        stop_token_ids: Optional[Union[List[int], int]] = None,
        generation_config: Any = None,
    ) -> "TokenizerInfo":
        """Constructs the tokenizer info from a Hugging Face tokenizer: a transformers
        ``PreTrainedTokenizer(Fast)`` or a ``tokenizers.Tokenizer``.

        The vocabulary type and add_prefix_space come from the backend's decoder,
        pre-tokenizer and normalizer (ByteLevel -> BYTE_LEVEL; ByteFallback / Metaspace /
        ``▁`` replacement -> BYTE_FALLBACK), cross-checked against the vocabulary's own
        spelling. Added tokens are decoded as literal text; those marked ``special`` are
        control tokens.

        Parameters
        ----------
        tokenizer
            The Hugging Face tokenizer.

        vocab_size : Optional[int], default: None
            The vocabulary size **of the model** (its lm_head width), which may be larger than
            the tokenizer's (padding; those ids are never allowed) or smaller (tokens past it
            are dropped). Defaults to the tokenizer's size.

        stop_token_ids : Optional[Union[List[int], int]], default: None
            The stop tokens. When None: ``generation_config``'s eos_token_id together with the
            tokenizer's eos_token_id; else tokens with well-known stop names.

        generation_config : default: None
            (xgrammar2 extension) A transformers ``GenerationConfig``, a dict, or a path to a
            ``generation_config.json`` (or its directory), whose eos_token_id lists the
            model's stop tokens (e.g. Llama-3.1's ``[128001, 128008, 128009]``).
        """
        stop_ids = _id_list(stop_token_ids, "stop_token_ids")
        if stop_ids is not None and len(stop_ids) == 0:
            raise ValueError("stop_token_ids cannot be empty")

        backend = None
        added_decoder: Dict[int, Any] = {}
        extra_special: List[int] = []
        eos: List[int] = []
        module = type(tokenizer).__module__ or ""
        if module.split(".")[0] == "tokenizers" and hasattr(tokenizer, "get_added_tokens_decoder"):
            backend = tokenizer
            vocab_dict = tokenizer.get_vocab(with_added_tokens=True)
            added_decoder = dict(tokenizer.get_added_tokens_decoder())
        elif hasattr(tokenizer, "get_vocab"):
            try:
                vocab_dict = tokenizer.get_vocab()
            except Exception as e:  # noqa: BLE001
                raise ValueError(f"cannot read the vocabulary of {type(tokenizer)}: {e}") from e
            backend = getattr(tokenizer, "backend_tokenizer", None)
            added_decoder = dict(getattr(tokenizer, "added_tokens_decoder", None) or {})
            if not added_decoder and backend is not None:
                try:
                    added_decoder = dict(backend.get_added_tokens_decoder())
                except AttributeError:
                    pass
            eos = _eos_ids_of(tokenizer)
            # bos / eos / pad / unk and additional special tokens configured on the wrapper.
            # Only added tokens qualify: a pad token may be configured as a regular token
            # that grammar text must still be able to use.
            try:
                extra_special = [int(i) for i in (getattr(tokenizer, "all_special_ids", None) or [])]
            except (TypeError, ValueError):
                extra_special = []
            if added_decoder:
                extra_special = [i for i in extra_special if i in added_decoder]
        else:
            raise ValueError(
                f"Unsupported tokenizer type: {type(tokenizer)}; expected a transformers "
                "tokenizer or a tokenizers.Tokenizer"
            )
        if not vocab_dict:
            raise ValueError("the tokenizer's vocabulary is empty")

        tokenizer_size = max(len(vocab_dict), max(vocab_dict.values()) + 1)
        model_size = vocab_size if vocab_size is not None else tokenizer_size
        n_tokens = min(tokenizer_size, model_size)
        encoded: List[Union[str, bytes]] = [""] * n_tokens
        for tok, idx in vocab_dict.items():
            if 0 <= idx < n_tokens:
                encoded[idx] = tok

        added_ids = []
        special_ids = []
        for idx, added_tok in added_decoder.items():
            idx = int(idx)
            if not 0 <= idx < n_tokens:
                continue
            content = getattr(added_tok, "content", None)
            if content is None:
                content = str(added_tok)
            encoded[idx] = content
            added_ids.append(idx)
            if getattr(added_tok, "special", False):
                special_ids.append(idx)
        special_ids += [i for i in extra_special if 0 <= i < n_tokens]

        if backend is not None:
            metadata = _detect_metadata_from_backend(backend)
        elif hasattr(tokenizer, "sp_model") or hasattr(getattr(tokenizer, "tokenizer", None), "sp_model"):
            metadata = {"vocab_type": VocabType.RAW, "add_prefix_space": True}
            if any("\u2581" in t for t in encoded if isinstance(t, str)):
                metadata["vocab_type"] = VocabType.BYTE_FALLBACK
        else:
            metadata = {"vocab_type": VocabType.RAW, "add_prefix_space": False}
        added_set = set(added_ids)
        from_vocab = _detect_vocab_type_from_vocab(
            t for i, t in enumerate(encoded) if i not in added_set
        )
        if from_vocab is not None and from_vocab != metadata["vocab_type"]:
            # The vocabulary's spelling is decisive evidence (a serialized backend may have
            # lost its decoder); re-derive add_prefix_space from actual encoding behaviour.
            metadata = {
                "vocab_type": from_vocab,
                "add_prefix_space": _detect_add_prefix_space_by_encoding(tokenizer, from_vocab),
            }

        if stop_ids is None:
            if generation_config is not None:
                eos = _eos_ids_of(_load_generation_config(generation_config)) + eos
            stop_ids = _unique(i for i in eos if 0 <= i < model_size) or None
            if stop_ids is None and backend is not tokenizer:
                warnings.warn(
                    "TokenizerInfo.from_huggingface: no stop_token_ids given and the tokenizer "
                    "has no eos_token_id; detecting stop tokens by name",
                    stacklevel=2,
                )

        return TokenizerInfo(
            encoded,
            metadata["vocab_type"],
            vocab_size=model_size,
            stop_token_ids=stop_ids,
            add_prefix_space=metadata["add_prefix_space"],
            special_token_ids=_unique(special_ids),
            added_token_ids=added_ids,
        )

    def serialize_json(self) -> str:
        """The tokenizer info as versioned JSON (encoded vocabulary and metadata;
        xgrammar2/serialization.py, docs/serialization.md)."""
        from .serialization import serialize_tokenizer_info

        return serialize_tokenizer_info(self)

    @staticmethod
    def deserialize_json(json_string: str) -> "TokenizerInfo":
        """The tokenizer info of :meth:`serialize_json`'s JSON. Raises InvalidJSONError,
        DeserializeVersionError or DeserializeFormatError."""
        from .serialization import deserialize_tokenizer_info

        return deserialize_tokenizer_info(json_string)

    def __reduce__(self):
        # Pickles as vocabulary + metadata; the core's handle is rebuilt on demand.
        return (TokenizerInfo.from_vocab_and_metadata, (self._encoded_vocab, self.dump_metadata()))

    # ---- C vocabulary -------------------------------------------------------------------

    def _handle(self) -> Any:
        """The core's `xgr_vocab *` (built once, on first use; released with this object)."""
        h = self._vocab_handle
        if h is not None:
            return h
        with self._lock:
            if self._vocab_handle is None:
                self._vocab_handle = self._build_handle()
            return self._vocab_handle

    def _special_spellings(self) -> Any:
        """(data, offsets, ids, n) cffi buffers of the special tokens that have a text (their
        entry in the encoded vocabulary), for ``xgr_grammar_spell_tokens``; None if none.
        Built once."""
        sp = getattr(self, "_spellings_cache", None)
        if sp is not None:
            return sp or None
        import numpy as np

        ffi = _core.ffi
        texts, ids = [], []
        enc = self._encoded_vocab
        for i in sorted(set(self._special_token_ids)):
            if i >= len(enc):  # stop tokens too: a format may spell its end token
                continue
            t = enc[i]
            b = t.encode("utf-8") if isinstance(t, str) else bytes(t)
            if len(b) >= 2:  # one-byte "specials" would shadow ordinary text
                texts.append(b)
                ids.append(i)
        if not texts:
            self._spellings_cache = ()
            return None
        # In the core's order (first byte, then second), so it need not sort them per call.
        order = sorted(range(len(texts)), key=lambda k: (texts[k][0], texts[k][1]))
        texts, ids = [texts[k] for k in order], [ids[k] for k in order]
        offsets = np.zeros(len(texts) + 1, dtype=np.uint32)
        np.cumsum([len(b) for b in texts], out=offsets[1:])
        data = b"".join(texts)
        keep = (data, offsets, np.asarray(ids, dtype=np.int32))
        self._spellings_cache = (
            ffi.from_buffer("uint8_t[]", keep[0]),
            ffi.from_buffer("uint32_t[]", keep[1]),
            ffi.from_buffer("int32_t[]", keep[2]),
            len(texts),
            keep,
        )
        return self._spellings_cache

    def _build_handle(self) -> Any:
        import numpy as np

        ffi, lib = _core.ffi, _core.lib
        decoded = self._decoded_vocab
        n = len(decoded)
        lengths = np.fromiter(map(len, decoded), dtype=np.int64, count=n)
        offsets64 = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets64[1:])
        if offsets64[-1] > 0xFFFFFFFF:
            raise ValueError("the decoded vocabulary exceeds 4 GiB of text")
        offsets = np.ascontiguousarray(offsets64, dtype=np.uint32)
        data = b"".join(decoded)
        special = np.asarray([i for i in self._special_token_ids if i < n], dtype=np.int32)
        stops = np.asarray(self._stop_token_ids, dtype=np.int32)
        out = ffi.new("xgr_vocab **")
        data_buf = ffi.from_buffer("uint8_t[]", data) if data else ffi.NULL
        _core.check(
            lib.xgr_vocab_new(
                data_buf,
                ffi.from_buffer("uint32_t[]", offsets),
                n,
                self._vocab_size,
                ffi.from_buffer("int32_t[]", special) if len(special) else ffi.NULL,
                len(special),
                ffi.from_buffer("int32_t[]", stops) if len(stops) else ffi.NULL,
                len(stops),
                out,
            ),
            "building the vocabulary",
        )
        return ffi.gc(out[0], lib.xgr_vocab_release)


def _detect_add_prefix_space_by_encoding(tokenizer: Any, vocab_type: VocabType) -> bool:
    try:
        if hasattr(tokenizer, "convert_ids_to_tokens"):
            ids = tokenizer.encode("a", add_special_tokens=False)
            toks = tokenizer.convert_ids_to_tokens(ids)
        else:  # tokenizers.Tokenizer
            toks = tokenizer.encode("a", add_special_tokens=False).tokens
    except Exception:  # noqa: BLE001
        return False
    if not toks or not toks[0]:
        return False
    return toks[0].startswith("\u2581" if vocab_type is VocabType.BYTE_FALLBACK else "Ġ")
