"""Linked compiles of structural tags: each tag's JSON-schema content is lowered once to a
fragment (``xgr_fragment``) and a request's grammar links the fragments of its tags.

A tool-calling request repeats tools seen before in a new combination. The text of each tag
in the request (found by ``xgr_structural_tag_spans`` without parsing the schemas) keys a
cache of read tags whose content is already lowered; when every tag hits, the request
costs the parse of its skeleton (the JSON with each tag replaced by ``null``), a read of
that, and a link, instead of converting, parsing and lowering every schema again.

The language is the one the unlinked conversion gives: the linking converter writes the
same rules except that a linked content is a reference to its fragment's root (which the
plain conversion would inline or share by name), and a fragment is the plain conversion
of that content alone (``tests/structural_tag/test_link.py`` compares both).
"""

import itertools
import json
import threading
from collections import OrderedDict
from typing import Any, Callable, List, Optional, Tuple, Union

from .. import _core
from ..limits import check_json_nesting
from . import nodes as N
from .fast_link import LinkedEBNF, fast_tag, triggered_linked_ebnf

__all__ = ["TagCache", "tag_slots", "split"]

_SERIAL = itertools.count()

#: Keys under which structural-tag formats nest (as in ``xgr_structural_tag_spans``).
_DESCEND = ("format", "content", "elements")


def tag_slots(obj: Any) -> List[Tuple[list, int]]:
    """(array, index) of every element of a "tags" array reached from ``obj`` through
    "format", "content" and "elements", in document order: the places
    ``xgr_structural_tag_spans`` reports, for the same document parsed."""
    out: List[Tuple[list, int]] = []

    def walk(o: Any) -> None:
        if type(o) is dict:
            for k, v in o.items():
                if k == "tags":
                    if type(v) is list:
                        out.extend((v, i) for i in range(len(v)))
                elif k in _DESCEND:
                    walk(v)
        elif type(o) is list:
            for v in o:
                if type(v) is dict:
                    walk(v)

    if type(obj) is dict:
        walk(obj)
    return out


def split(raw: bytes) -> Optional[List[Tuple[int, int]]]:
    """The tags' byte spans in ``raw`` (a structural tag's JSON text), or None when the text
    cannot be split (invalid JSON, a repeated format key): the caller reads it in full."""
    ffi, lib = _core.ffi, _core.lib
    spans = ffi.new("uint64_t **")
    n = ffi.new("size_t *")
    if lib.xgr_structural_tag_spans(raw, len(raw), spans, n) != 0:
        return None
    try:
        flat = ffi.unpack(spans[0], 2 * n[0]) if n[0] else []
    finally:
        lib.xgr_free(spans[0])
    return list(zip(flat[0::2], flat[1::2]))


def _tag_nodes(node: N.Node) -> List[N.Tag]:
    """The tag items of every triggered_tags / tags_with_separator in ``node``, in the order
    ``tag_slots`` visits their JSON."""
    out: List[N.Tag] = []

    def walk(n: N.Node) -> None:
        kind = n.kind
        if kind in ("triggered_tags", "tags_with_separator"):
            for t in n.tags:
                out.append(t)
        elif kind in ("sequence", "or"):
            for e in n.elements:
                walk(e)
        elif kind in ("tag", "optional", "plus", "star", "repeat"):
            walk(n.content)
        elif kind == "token_level" and n.type == "token_triggered_tags":
            out.extend(n.data["tags"])

    walk(node)
    return out


def linkable(tag: N.Tag) -> bool:
    """Whether a tag's content is a JSON schema written as JSON (a tool's arguments), or a
    sequence with such an element (a model template's call header, then the arguments)."""
    c = tag.content
    if type(c) is N.Sequence:
        return any(_json_args(e) for e in c.elements)
    return _json_args(c)


def _json_args(node: N.Node) -> bool:
    return type(node) is N.JSONSchema and node.style == "json" and not node.excludes


def _linked(node: N.JSONSchema, make_fragment: Callable[[N.JSONSchema], Any]) -> Tuple[N.Node, int]:
    frag, size = make_fragment(node)
    return N.LinkedJSON(node, frag, f"linked.{next(_SERIAL)}"), size


def _linked_content(content: N.Node,
                    make_fragment: Callable[[N.JSONSchema], Any]) -> Tuple[N.Node, int]:
    """A linkable tag's content with its JSON arguments lowered to fragments, and their
    size in bytes."""
    if type(content) is not N.Sequence:
        return _linked(content, make_fragment)
    elements, total = [], 0
    for e in content.elements:
        if _json_args(e):
            e, size = _linked(e, make_fragment)
            total += size
        elements.append(e)
    return N.Sequence(content.path, elements), total


class _Plain:
    """A cache entry for a tag that is not linked: its JSON value, put back as it was."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value


class TagCache:
    """LRU of read tags keyed by their JSON text, bounded in bytes (the key, twice for the
    parsed copy the entry holds, plus the fragment's automata). Thread-safe."""

    def __init__(self, limit_bytes: int) -> None:
        self._limit = limit_bytes
        self._lock = threading.Lock()
        self._entries: "OrderedDict[bytes, Tuple[Any, int, Any]]" = OrderedDict()
        self._total = 0
        self.hits = 0
        self.misses = 0
        # The core's mirror of the entries with a direct-build record (fast_tag), which
        # resolves a request of tags seen before in one call (:meth:`resolve`).
        ffi, lib = _core.ffi, _core.lib
        out = ffi.new("xgr_tag_table **")
        _core.check(lib.xgr_tag_table_new(out), "creating the tag table")
        self._table = ffi.gc(out[0], lib.xgr_tag_table_free)

    def get_many(self, keys: List[bytes]) -> Tuple[List[Any], List[Any]]:
        """The entries under ``keys`` (None where missing), and their direct-build records
        (:func:`~.fast_link.fast_tag`, None where missing or not applicable)."""
        with self._lock:
            out, fast = [], []
            for k in keys:
                hit = self._entries.get(k)
                if hit is None:
                    out.append(None)
                    fast.append(None)
                else:
                    self._entries.move_to_end(k)
                    out.append(hit[0])
                    fast.append(hit[2])
            n_hit = sum(1 for x in out if x is not None)
            self.hits += n_hit
            self.misses += len(out) - n_hit
            return out, fast

    def put(self, key: bytes, entry: Any, size: int) -> None:
        fast = fast_tag(entry)
        lib = _core.lib
        if fast is not None:  # the core's copy: the key and the tag's strings
            size += len(key) + len(fast.begin_b) + len(fast.name_b) + len(fast.end_b) + 64
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._total -= old[1]
                if old[2] is not None:
                    lib.xgr_tag_table_remove(self._table, key, len(key))
            if fast is not None:
                _core.check(lib.xgr_tag_table_put(
                    self._table, key, len(key), fast.begin_b, len(fast.begin_b), fast.name_b,
                    len(fast.name_b), fast.end_b, len(fast.end_b), fast.fragment),
                    "caching a tag")
            self._entries[key] = (entry, size, fast)
            self._total += size
            while self._limit >= 0 and self._total > self._limit and self._entries:
                k, (e, s, f) = self._entries.popitem(last=False)
                if f is not None:
                    # Used by a resolve since it was last placed: the LRU order would have
                    # moved it to the end (a second chance; the flag is now clear).
                    if k != key and lib.xgr_tag_table_take_used(self._table, k, len(k)):
                        self._entries[k] = (e, s, f)
                        continue
                    lib.xgr_tag_table_remove(self._table, k, len(k))
                self._total -= s

    def resolve(self, raw: bytes) -> Optional[Tuple[Any, bytes, int]]:
        """When every tag of the structural tag text ``raw`` is cached with a direct-build
        record: (the core's hits, the skeleton with each tag replaced by null, the number
        of tags); else None. Counts nothing (see :meth:`count_hits`)."""
        ffi, lib = _core.ffi, _core.lib
        hits = ffi.new("xgr_tag_hits **")
        sk = ffi.new("uint8_t **")
        n = ffi.new("size_t *")
        _core.check(lib.xgr_tag_table_resolve(self._table, raw, len(raw), hits, sk, n),
                    "looking up the structural tag's tags")
        if hits[0] == ffi.NULL:
            return None
        h = ffi.gc(hits[0], lib.xgr_tag_hits_free)
        try:
            skeleton = ffi.unpack(ffi.cast("char *", sk[0]), n[0])
        finally:
            lib.xgr_free(sk[0])
        return h, skeleton, int(lib.xgr_tag_hits_count(h))

    def count_hits(self, n: int) -> None:
        """Counts n hits served by :meth:`resolve`."""
        with self._lock:
            self.hits += n

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._total = 0
            _core.lib.xgr_tag_table_clear(self._table)

    def size_bytes(self) -> int:
        with self._lock:
            return self._total

    def __len__(self) -> int:
        return len(self._entries)


def read_linked(raw: bytes, spans: List[Tuple[int, int]], cache: TagCache,
                make_fragment: Callable[[N.JSONSchema], Any],
                direct: bool = True) -> Union[None, N.Node, LinkedEBNF]:
    """The format tree of the structural tag ``raw`` with every linkable tag's content a
    :class:`~.nodes.LinkedJSON`; None when the tags cannot be matched to their spans (the
    caller compiles the tag unlinked). Errors as ``read_structural_tag`` (and, for a tag
    not seen before, as the conversion of its schema); GrammarLimitError for JSON nested
    deeper than ``max_json_nesting`` in what is parsed (the whole text, or only the skeleton
    when every tag was seen before: those were checked when first read). With ``direct``, a request of the
    shape :func:`~.fast_link.triggered_linked_ebnf` writes out, every tag seen before,
    comes back as its grammar text instead of a tree."""
    keys = [raw[a:b] for a, b in spans]
    entries, fast = cache.get_many(keys)
    if all(e is not None for e in entries):
        # Every tag seen before: read the skeleton, the cached tags standing in for theirs.
        parts, pos = [], 0
        for a, b in spans:
            parts.append(raw[pos:a])
            parts.append(b"null")
            pos = b
        parts.append(raw[pos:])
        text = b"".join(parts)
        # The cached tags were checked when first read; what is parsed now is the rest.
        check_json_nesting(text, "the structural tag")
        try:
            skeleton = json.loads(text)
        except ValueError:
            return None
        if direct:
            linked = triggered_linked_ebnf(skeleton, fast)
            if linked is not None:
                return linked
        slots = tag_slots(skeleton)
        if len(slots) != len(spans):
            return None
        for (arr, i), e in zip(slots, entries):
            arr[i] = e.value if type(e) is _Plain else N.ReadTag(e)
        return N.read_structural_tag(skeleton)
    check_json_nesting(raw, "the structural tag")
    doc = json.loads(raw)  # strict JSON: the scanner accepted it
    full = N.read_structural_tag(doc)  # raises the errors, with their JSON paths
    tags = _tag_nodes(full)
    if len(tags) != len(spans):
        return None
    values = None
    for k, (tag, entry) in enumerate(zip(tags, entries)):
        if entry is None:
            if linkable(tag):
                content, size = _linked_content(tag.content, make_fragment)
                entry = N.Tag(tag.path, tag.begin, content, tag.end)
                cache.put(keys[k], entry, 2 * len(keys[k]) + size)
            else:
                if values is None:
                    values = tag_slots(doc)
                    if len(values) != len(spans):
                        return None
                arr, i = values[k]
                cache.put(keys[k], _Plain(arr[i]), 2 * len(keys[k]))
                continue
        elif type(entry) is _Plain:
            continue
        tag.content = entry.content
    return full
