"""The compile caches' key of a JSON schema given as text: its canonical text,
``json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)``, made by the core in
one pass over the text (``xgr_json_canonical``) instead of building the document and dumping it
again, which cost 3-5 ms on a 236 KB schema: as much as reading its compiled grammar from the
directory (docs/disk-cache.md, "The key of a JSON schema").

The core proves the canonical text or gives up (NaN / Infinity, exponents, floats whose repr is
not their text, lone surrogate escapes, duplicate keys, very long integers, nesting over the
limit, invalid JSON); the caller then converts the slow way, so the key is the same text either
way and equal schemas share every cache entry as before. A compile after a miss checks the fast
text against ``json.dumps`` of the parsed schema before anything is stored under it
(``KeyMismatch``)."""

import json
from typing import Any, Optional

from . import _core
from .limits import check_input_size, json_nesting_limit

__all__ = ["canonical_schema_text", "canonical_dumps", "KeyMismatch"]


class KeyMismatch(Exception):
    """The core's canonical text of a schema differs from json.dumps of the parsed schema (a bug
    in ``xgr_json_canonical``): nothing is cached under it, the compile takes the slow path."""


def canonical_dumps(obj: Any) -> bytes:
    """The canonical text of a parsed schema, UTF-8 (lone surrogates kept, as json.loads keeps
    them): the slow path, and the check after a miss."""
    try:
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"the JSON schema cannot be serialized: {e}") from e
    return text.encode("utf-8", "surrogatepass")


def canonical_schema_text(text: str) -> Optional[bytes]:
    """The canonical text (UTF-8) of the JSON schema ``text`` when the core can prove it, else
    None. Raises GrammarLimitError when ``text`` is over ``max_input_bytes`` (as the slow path).
    Bytes, not str: the key digest and the memory cache take it as it is, with no decode and
    no second encode of a text that can be hundreds of kilobytes."""
    check_input_size(len(text), "the JSON schema")
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: json.loads keeps it, the slow path spells it
        return None
    ffi, lib = _core.ffi, _core.lib
    out = bytearray(len(raw) or 1)
    n = ffi.new("size_t *")
    known = ffi.new("int32_t *")
    if lib.xgr_json_canonical(raw, len(raw), json_nesting_limit(), ffi.from_buffer(out), n, known) != 0:
        return None
    if not known[0]:
        return None
    m = n[0]
    if m == len(raw) and out == raw:  # already canonical
        return raw
    del out[m:]
    return bytes(out)
