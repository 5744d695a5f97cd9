"""JSON serialization of Grammar, TokenizerInfo and CompiledGrammar (``serialize_json`` /
``deserialize_json``, upstream xgrammar's API). Format and rules: ``docs/serialization.md``.

Every payload is one JSON object with ``"__VERSION__"`` (:data:`SERIALIZATION_VERSION`) and
``"__TYPE__"`` (``"Grammar"``, ``"TokenizerInfo"`` or ``"CompiledGrammar"``):

* a Grammar is its canonical EBNF (``str(grammar)``), the name of its root rule and its
  warnings;
* a TokenizerInfo is its encoded vocabulary (text tokens as JSON strings, bytes tokens as
  ``{"b64": ...}``) and its metadata (:meth:`TokenizerInfo.dump_metadata`'s fields);
* a CompiledGrammar is its grammar, the metadata of the tokenizer info it was compiled with
  and a SHA-256 digest of that tokenizer info's payload. As upstream's, it does not hold the
  vocabulary: :func:`deserialize_compiled_grammar` takes the tokenizer info, refuses one that
  differs, and compiles the grammar again (with default options), so its token masks are
  those of the original.

Nothing is pickled and nothing in a payload is executed: a payload is parsed as JSON, checked
field by field, and rebuilt through the public constructors.

Errors, as upstream's: text that is not JSON (or nests deeper than the maximum recursion
depth) raises :class:`InvalidJSONError`; a missing or different ``__VERSION__`` (such as an
upstream payload's ``"v16"``) raises :class:`DeserializeVersionError`; anything else that is
not a payload of the expected type (wrong ``__TYPE__``, missing or ill-typed field, grammar
text that does not parse, ids out of range, a tokenizer info that does not match) raises
:class:`DeserializeFormatError`.
"""

import base64
import binascii
import hashlib
import json
import re
from typing import TYPE_CHECKING, Any, Dict, List, NoReturn

from . import _core
from .exception import (
    DeserializeFormatError,
    DeserializeVersionError,
    GrammarSemanticError,
    GrammarSyntaxError,
    InvalidArgumentError,
    InvalidJSONError,
    InvalidUTF8Error,
)
from .config import get_max_recursion_depth
from .limits import json_nesting_limit

if TYPE_CHECKING:  # pragma: no cover
    from .compiled_grammar import CompiledGrammar
    from .grammar import Grammar
    from .tokenizer_info import TokenizerInfo

__all__ = [
    "SERIALIZATION_VERSION",
    "serialize_grammar",
    "deserialize_grammar",
    "serialize_tokenizer_info",
    "deserialize_tokenizer_info",
    "serialize_compiled_grammar",
    "deserialize_compiled_grammar",
]

#: The ``__VERSION__`` of every payload. Bumped whenever the format changes; a payload of any
#: other version is refused. Distinct from upstream's ("v<N>"): the formats differ.
SERIALIZATION_VERSION = "xgrammar2-v1"

_VERSION_KEY = "__VERSION__"
_TYPE_KEY = "__TYPE__"
_GRAMMAR, _TOKENIZER_INFO, _COMPILED = "Grammar", "TokenizerInfo", "CompiledGrammar"

#: The tokenizer metadata a compiled grammar records, compared on load (upstream's fields).
_TOKENIZER_METADATA_KEYS = ("vocab_type", "vocab_size", "add_prefix_space", "stop_token_ids")

#: The first line of canonical EBNF names the root rule (ir/print.c prints it first).
_ROOT_RE = re.compile(r"\s*([^\s\[]+?)(?:\[[^\]\n]*\])?\s*::=")

#: Attribute caching a tokenizer info's payload digest (a TokenizerInfo is immutable).
_DIGEST_ATTR = "_xgr2_serialized_digest"


# ---- writing --------------------------------------------------------------------------------


def _dumps(obj: Dict[str, Any]) -> str:
    # Fixed key order and separators: equal objects give equal text (serialize_json is a
    # fixed point of deserialize_json). ASCII-only, so tokens with lone surrogates survive.
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def _header(kind: str) -> Dict[str, Any]:
    return {_VERSION_KEY: SERIALIZATION_VERSION, _TYPE_KEY: kind}


_RULE_HEAD_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.\-]*)(\[[^\n]*?\])? ::= ", re.M)
_HIDDEN_RE = re.compile(r"capture_hidden_(suffix|stop)_bytes=(\d+)")
_STOP_CAPTURE_RE = re.compile(r'stop_capture="([^"]*)"')
_SPLIT_RE = re.compile(r"capture_hidden_(body|marker)_rule_id=(\d+)")


def _rule_tables(text: str) -> Dict[str, Any]:
    """Upstream's per-rule tables, for readers of its format (informational: reading
    uses only the EBNF): ``rules`` ([name] per rule, in printed order) and
    ``suffix_stop_infos`` ([rule index, suffix bytes, stop bytes, body rule, marker rule,
    stop_capture label] per rule with a Lark suffix / stop marker; rule ids are indexes in
    ``rules``, -1 for a fixed-length marker).
    Empty (no keys) when no rule has such a marker."""
    rules: List[List[Any]] = []
    infos: List[List[Any]] = []
    for i, m in enumerate(_RULE_HEAD_RE.finditer(text)):
        rules.append([m.group(1)])
        h = _HIDDEN_RE.search(m.group(2) or "")
        if h is not None:
            sc = _STOP_CAPTURE_RE.search(m.group(2) or "")
            split = {k: int(v) for k, v in _SPLIT_RE.findall(m.group(2) or "")}
            n = int(h.group(2))
            infos.append([i, n if h.group(1) == "suffix" else 0, n if h.group(1) == "stop" else 0,
                          split.get("body", -1), split.get("marker", -1),
                          sc.group(1) if sc else ""])
    return {"rules": rules, "suffix_stop_infos": infos} if infos else {}


def _grammar_body(grammar: "Grammar", warnings: Any) -> Dict[str, Any]:
    text = str(grammar)
    m = _ROOT_RE.match(text)
    if m is None:  # cannot happen for a grammar the core printed
        raise ValueError("cannot serialize the grammar: its EBNF has no root rule")
    out = {"root_rule_name": m.group(1), "ebnf": text, "warnings": [str(w) for w in warnings]}
    out.update(_rule_tables(text))
    return out


def serialize_grammar(grammar: "Grammar") -> str:
    """The JSON payload of a Grammar."""
    obj = _header(_GRAMMAR)
    obj.update(_grammar_body(grammar, grammar.warnings))
    return _dumps(obj)


def _encode_token(token: Any) -> Any:
    if isinstance(token, str):
        return token
    if isinstance(token, (bytes, bytearray, memoryview)):
        return {"b64": base64.b64encode(bytes(token)).decode("ascii")}
    raise TypeError(f"cannot serialize a token of type {type(token).__name__}")


def serialize_tokenizer_info(tokenizer_info: "TokenizerInfo") -> str:
    """The JSON payload of a TokenizerInfo: its metadata and encoded vocabulary."""
    meta = json.loads(tokenizer_info.dump_metadata())
    obj = _header(_TOKENIZER_INFO)
    obj.update(
        vocab_type=int(meta["vocab_type"]),
        vocab_size=int(meta["vocab_size"]),
        add_prefix_space=bool(meta["add_prefix_space"]),
        stop_token_ids=list(meta["stop_token_ids"]),
        special_token_ids=list(meta.get("special_token_ids", [])),
        added_token_ids=list(meta.get("added_token_ids", [])),
        encoded_vocab=[_encode_token(t) for t in tokenizer_info.encoded_vocab],
    )
    return _dumps(obj)


def _tokenizer_digest(tokenizer_info: "TokenizerInfo") -> str:
    """SHA-256 of the tokenizer info's payload (everything its token masks depend on),
    computed once per object."""
    digest = getattr(tokenizer_info, _DIGEST_ATTR, None)
    if digest is None:
        text = serialize_tokenizer_info(tokenizer_info)
        digest = "sha256:" + hashlib.sha256(text.encode("ascii")).hexdigest()
        try:
            setattr(tokenizer_info, _DIGEST_ATTR, digest)
        except AttributeError:  # a class with __slots__: recompute next time
            pass
    return digest


def _tokenizer_metadata(tokenizer_info: "TokenizerInfo") -> Dict[str, Any]:
    return {
        "vocab_type": int(tokenizer_info.vocab_type.value),
        "vocab_size": int(tokenizer_info.vocab_size),
        "add_prefix_space": bool(tokenizer_info.add_prefix_space),
        "stop_token_ids": list(tokenizer_info.stop_token_ids),
    }


def serialize_compiled_grammar(compiled: "CompiledGrammar") -> str:
    """The JSON payload of a CompiledGrammar: its grammar and the identity of its tokenizer
    info (metadata and digest), not the vocabulary itself nor the token masks."""
    grammar = compiled.grammar
    warnings = getattr(compiled, "warnings", None)
    if warnings is None:
        warnings = grammar.warnings
    info = compiled.tokenizer_info
    obj = _header(_COMPILED)
    obj.update(
        grammar=_grammar_body(grammar, warnings),
        tokenizer_metadata=_tokenizer_metadata(info),
        tokenizer_digest=_tokenizer_digest(info),
    )
    return _dumps(obj)


# ---- reading --------------------------------------------------------------------------------


def _format_error(kind: str, message: str) -> NoReturn:
    raise DeserializeFormatError(f"Deserialize format error for {kind}: {message}")


def _load(text: Any, kind: str) -> Dict[str, Any]:
    """Parses a payload and checks its version and type; returns the JSON object."""
    if isinstance(text, str):
        raw = text.encode("utf-8", "surrogatepass")
    elif isinstance(text, (bytes, bytearray)):
        raw = bytes(text)
    else:
        raise TypeError(f"{kind}.deserialize_json takes a str, got {type(text).__name__}")
    limit = json_nesting_limit()
    depth = _core.ffi.new("int32_t *")
    _core.check(
        _core.lib.xgr_json_nesting_depth(raw, len(raw), limit, depth), "measuring JSON nesting"
    )
    if depth[0] > limit:
        if limit == get_max_recursion_depth():
            knob = "max_recursion_depth, xgrammar2.set_max_recursion_depth"
        else:
            knob = "max_json_nesting, xgrammar2.limits.set_limits"
        raise InvalidJSONError(
            f"Invalid JSON: Maximum recursion depth exceeded: the serialized {kind} nests "
            f"more than {limit} levels ({knob})"
        )
    try:
        obj = json.loads(text)
    except RecursionError:  # deeper than Python's own recursion limit
        raise InvalidJSONError(
            f"Invalid JSON: Maximum recursion depth exceeded while parsing the serialized {kind}"
        ) from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        raise InvalidJSONError(f"Invalid JSON: the serialized {kind} is not JSON: {e}") from e
    if not isinstance(obj, dict):
        _format_error(kind, f"expected a JSON object, got {type(obj).__name__}")
    version = obj.get(_VERSION_KEY)
    if version is None:
        raise DeserializeVersionError(
            f"Deserialize version error for {kind}: missing version field {_VERSION_KEY} "
            f"(this is xgrammar2 {SERIALIZATION_VERSION})"
        )
    if version != SERIALIZATION_VERSION:
        origin = ""
        if isinstance(version, str) and re.fullmatch(r"v\d+", version):
            origin = " (a payload of upstream xgrammar, which xgrammar2 cannot read)"
        raise DeserializeVersionError(
            f"Deserialize version error for {kind}: {_VERSION_KEY} is {version!r}{origin}, "
            f"expected {SERIALIZATION_VERSION!r}"
        )
    found = obj.get(_TYPE_KEY)
    if found != kind:
        _format_error(kind, f"{_TYPE_KEY} is {found!r}, expected {kind!r}")
    return obj


def _field(obj: Dict[str, Any], key: str, types: Any, kind: str) -> Any:
    if key not in obj:
        _format_error(kind, f"missing member {key!r}")
    value = obj[key]
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        _format_error(kind, f"member {key!r} must be {_type_names(types)}, got bool")
    if not isinstance(value, types):
        _format_error(kind, f"member {key!r} must be {_type_names(types)}, "
                            f"got {type(value).__name__}")
    return value


def _type_names(types: Any) -> str:
    names = {bool: "a boolean", int: "an integer", str: "a string", list: "an array",
             dict: "an object"}
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join(names.get(t, t.__name__) for t in types)


def _int_list(obj: Dict[str, Any], key: str, kind: str) -> List[int]:
    values = _field(obj, key, list, kind)
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int):
            _format_error(kind, f"member {key!r} must hold integers, got {v!r}")
    return values


def _str_list(obj: Dict[str, Any], key: str, kind: str) -> List[str]:
    values = _field(obj, key, list, kind)
    for v in values:
        if not isinstance(v, str):
            _format_error(kind, f"member {key!r} must hold strings, got {v!r}")
    return values


def _grammar_from_body(body: Dict[str, Any], kind: str) -> "Grammar":
    from .grammar import Grammar

    root = _field(body, "root_rule_name", str, kind)
    ebnf = _field(body, "ebnf", str, kind)
    warnings = _str_list(body, "warnings", kind)
    if not root:
        _format_error(kind, "member 'root_rule_name' is empty")
    try:
        grammar = Grammar.from_ebnf(ebnf, root_rule_name=root)
    except (GrammarSyntaxError, GrammarSemanticError, InvalidUTF8Error,
            InvalidArgumentError) as e:
        raise DeserializeFormatError(
            f"Deserialize format error for {kind}: the grammar does not parse: {e}"
        ) from e
    grammar._warnings = tuple(warnings)
    return grammar


def deserialize_grammar(text: Any) -> "Grammar":
    """The Grammar of a payload from :func:`serialize_grammar`."""
    return _grammar_from_body(_load(text, _GRAMMAR), _GRAMMAR)


def _decode_token(token: Any, index: int, kind: str) -> Any:
    if isinstance(token, str):
        return token
    if isinstance(token, dict) and set(token) == {"b64"} and isinstance(token["b64"], str):
        try:
            return base64.b64decode(token["b64"].encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError, ValueError):
            pass
    _format_error(kind, f"encoded_vocab[{index}] is neither a string nor {{\"b64\": base64}}")


#: Most padding ids (vocab_size beyond the vocabulary) a TokenizerInfo payload may declare.
_MAX_PADDING_IDS = 1 << 20


def deserialize_tokenizer_info(text: Any) -> "TokenizerInfo":
    """The TokenizerInfo of a payload from :func:`serialize_tokenizer_info`."""
    from .tokenizer_info import TokenizerInfo, VocabType

    kind = _TOKENIZER_INFO
    obj = _load(text, kind)
    vocab_type = _field(obj, "vocab_type", int, kind)
    try:
        vocab_type = VocabType(vocab_type)
    except ValueError:
        _format_error(kind, f"unknown vocab_type {vocab_type!r}")
    vocab_size = _field(obj, "vocab_size", int, kind)
    add_prefix_space = _field(obj, "add_prefix_space", bool, kind)
    stops = _int_list(obj, "stop_token_ids", kind)
    special = _int_list(obj, "special_token_ids", kind)
    added = _int_list(obj, "added_token_ids", kind)
    vocab = [_decode_token(t, i, kind) for i, t in enumerate(_field(obj, "encoded_vocab", list,
                                                                    kind))]
    # Real models pad their logits by at most a few thousand ids past the tokenizer's; a
    # payload is outside input, so a vocab_size far beyond its vocabulary is refused rather
    # than allocated (the constructor builds a set of every padding id).
    if vocab_size > len(vocab) + _MAX_PADDING_IDS:
        _format_error(kind, f"vocab_size {vocab_size} exceeds the {len(vocab)} tokens of the payload "
                            f"by more than {_MAX_PADDING_IDS} padding ids")
    try:
        return TokenizerInfo(
            vocab,
            vocab_type,
            vocab_size=vocab_size,
            stop_token_ids=stops,
            add_prefix_space=add_prefix_space,
            special_token_ids=special,
            added_token_ids=added,
        )
    except (ValueError, TypeError) as e:  # ids out of range, undecodable tokens, ...
        raise DeserializeFormatError(f"Deserialize format error for {kind}: {e}") from e


def deserialize_compiled_grammar(text: Any, tokenizer_info: "TokenizerInfo") -> "CompiledGrammar":
    """The CompiledGrammar of a payload from :func:`serialize_compiled_grammar`, compiled
    against ``tokenizer_info``, which must be the tokenizer info it was compiled with (equal
    metadata and vocabulary), else :class:`DeserializeFormatError`."""
    from .compiler import GrammarCompiler
    from .tokenizer_info import TokenizerInfo

    kind = _COMPILED
    if not isinstance(tokenizer_info, TokenizerInfo):
        raise TypeError(
            "CompiledGrammar.deserialize_json takes a TokenizerInfo, got "
            f"{type(tokenizer_info).__name__}"
        )
    obj = _load(text, kind)
    body = _field(obj, "grammar", dict, kind)
    meta = _field(obj, "tokenizer_metadata", dict, kind)
    digest = _field(obj, "tokenizer_digest", str, kind)
    expected = _tokenizer_metadata(tokenizer_info)
    for key in _TOKENIZER_METADATA_KEYS:
        if key not in meta:
            _format_error(kind, f"missing member 'tokenizer_metadata.{key}'")
        if meta[key] != expected[key] or type(meta[key]) is not type(expected[key]):
            _format_error(
                kind,
                f"tokenizer metadata mismatch: {key} is {meta[key]!r} in the serialized "
                f"grammar, {expected[key]!r} in the given tokenizer info",
            )
    if digest != _tokenizer_digest(tokenizer_info):
        _format_error(
            kind,
            "the given tokenizer info is not the one the grammar was compiled with (same "
            "metadata, different vocabulary or special tokens)",
        )
    grammar = _grammar_from_body(body, kind)
    compiler = GrammarCompiler(tokenizer_info, cache_enabled=False)
    return compiler.compile_grammar(grammar)
