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
    return type(node) is N.JSONSchema and node.style == "json"


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
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._total -= old[1]
            self._entries[key] = (entry, size, fast)
            self._total += size
            while self._limit >= 0 and self._total > self._limit and self._entries:
                _, (_, s, _) = self._entries.popitem(last=False)
                self._total -= s

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._total = 0

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
