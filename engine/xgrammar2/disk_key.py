"""The compile-cache key as a disk-cache file holds it (docs/disk-cache.md, "Layout and format"):
``_feed_key``'s prefix-free encoding, which ``DiskCache.key_digest`` hashes after the prefix and
a grammar file (format 3) carries, and its strict inverse ``decode_key``."""

from typing import Any, Tuple

__all__ = ["encode_key", "decode_key"]


def _feed_key(h: Any, key: Any) -> None:
    """Feeds a compile-cache key to ``h`` as a prefix-free encoding: a type letter, then the
    length and bytes of str / bytes, the digits of an int, the fields of a tuple; anything
    else by its repr. (One pass over the request's text, unlike repr, which escapes it.)"""
    if isinstance(key, str):
        b = key.encode("utf-8", "surrogatepass")
        h.update(b"s%d:" % len(b))
        h.update(b)
    elif isinstance(key, tuple):
        h.update(b"t%d:" % len(key))
        for k in key:
            _feed_key(h, k)
    elif key is None:
        h.update(b"n")
    elif isinstance(key, bool):
        h.update(b"T" if key else b"F")
    elif isinstance(key, int):
        h.update(b"i%d;" % key)
    elif isinstance(key, (bytes, bytearray)):
        h.update(b"b%d:" % len(key))
        h.update(key)
    else:
        b = repr(key).encode("utf-8", "surrogatepass")
        h.update(b"r%d:" % len(b))
        h.update(b)


class _Collect(list):
    """What ``_feed_key`` writes into to encode a key (``update`` appends)."""

    __slots__ = ()
    update = list.append


def encode_key(key: Any) -> bytes:
    """A compile-cache key in ``_feed_key``'s encoding: what ``key_digest`` hashes after the
    prefix, so a file's key is checked against its name by hashing it again."""
    out = _Collect()
    _feed_key(out, key)
    return b"".join(out)


def decode_key(data: bytes) -> Any:
    """The key ``encode_key`` gave ``data``; _NO_KEY when ``data`` is not such an encoding of
    one key or holds a field encoded by its repr (no value to give back)."""
    try:
        key, pos = _decode_field(data, 0, 0)
    except (ValueError, IndexError, UnicodeDecodeError):
        return _NO_KEY
    return key if pos == len(data) else _NO_KEY


_NO_KEY = object()
_KEY_DEPTH = 8  # compile keys nest tuples two deep


def _decode_field(data: bytes, pos: int, depth: int) -> Tuple[Any, int]:
    t = data[pos:pos + 1]
    pos += 1
    if t == b"n":
        return None, pos
    if t in (b"T", b"F"):
        return t == b"T", pos
    if t == b"i":
        end = data.index(b";", pos)
        num = data[pos:end]
        digits = num[1:] if num[:1] == b"-" else num
        if not digits.isdigit() or (len(digits) > 1 and digits[:1] == b"0") or num == b"-0":
            raise ValueError("int")
        return int(num), end + 1
    if t in (b"s", b"b", b"t"):
        end = data.index(b":", pos, pos + 24)
        num = data[pos:end]
        if not num.isdigit() or (len(num) > 1 and num[:1] == b"0"):
            raise ValueError("length")
        n = int(num)
        pos = end + 1
        if t == b"t":
            if depth >= _KEY_DEPTH or n > len(data) - pos:
                raise ValueError("tuple")
            items = []
            for _ in range(n):
                item, pos = _decode_field(data, pos, depth + 1)
                items.append(item)
            return tuple(items), pos
        if n > len(data) - pos:
            raise ValueError("length")
        raw = data[pos:pos + n]
        return (raw.decode("utf-8", "surrogatepass") if t == b"s" else raw), pos + n
    raise ValueError("field")  # (b"r": a repr, which gives no value back)
