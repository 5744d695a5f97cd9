"""The commonest linked request built directly: one ``triggered_tags`` format with a single
trigger whose tags were all seen before and all hold a linked JSON-schema content
(``<function=NAME>{args}</function>`` for N tools, what vLLM and SGLang send for a tool
list). Its grammar is built by the core from the tags' strings
(``xgr_grammar_triggered_links``), without building the format tree, walking it, writing
EBNF and parsing it again: at 50 tools the walk was about 0.3 ms of a 0.9 ms request, and
the text and its parse a third of what was left. The EBNF text stays available: it is the
one :func:`~.converter.format_to_linked_ebnf` writes for the same tags, character for
character, and the built grammar prints the same as that text parsed
(``tests/structural_tag/test_link.py`` checks both). Any other shape, or any field the
reader would have to check, returns None and goes the general way, which raises the errors
with their JSON paths.
"""

from itertools import accumulate
from typing import Any, Dict, List, Optional, Tuple

from .. import _core
from . import nodes as N
from .converter import _alt, _dedupe, _lit, _seq
from .ebnf import tag_dispatch_body

__all__ = ["FastTag", "LinkedEBNF", "fast_tag", "triggered_linked_ebnf", "triggered_shape"]

_FORMAT_KEYS = frozenset(("type", "triggers", "tags", "excludes", "at_least_one", "stop_after_first"))
_RESERVED = ("root", "triggered_tags", "triggered_tags_group")


class FastTag:
    """What the direct build needs of one cached tag with a linked content, checked and
    UTF-8 encoded once when the tag is cached (link.py's TagCache), so a request that
    reuses it pays a lookup per tag."""

    __slots__ = ("begin", "end", "name", "fragment", "begin_b", "end_b", "name_b")

    def __init__(self, begin: str, end: str, name: str, fragment: Any) -> None:
        self.begin, self.end, self.name, self.fragment = begin, end, name, fragment
        self.begin_b, self.end_b, self.name_b = begin.encode(), end.encode(), name.encode()


def fast_tag(tag: Any) -> Optional[FastTag]:
    """The record of a cached tag, or None when a request holding it goes the general way
    (a content that is not linked, a token-level begin or end, several ends, a string that
    is not valid Unicode: the general way names the problem)."""
    if (type(tag) is not N.Tag or type(tag.content) is not N.LinkedJSON
            or type(tag.begin) is not str or type(tag.end) is not list or len(tag.end) != 1
            or type(tag.end[0]) is not str or tag.content.name in _RESERVED):
        return None
    try:
        return FastTag(tag.begin, tag.end[0], tag.content.name, tag.content.fragment)
    except UnicodeEncodeError:
        return None


class LinkedEBNF:
    """The linked grammar of a request of the shape above: its EBNF text (start rule
    ``root``, written when asked for), the grammar itself (built by the core without the
    text) and the (stand-in rule, fragment) pairs to link."""

    __slots__ = ("_trigger", "_loop", "_excludes", "_tags", "_text", "links")

    def __init__(self, trigger: str, loop: bool, excludes: List[str], tags: List[FastTag],
                 links: List[Tuple[str, Any]]) -> None:
        self._trigger = trigger
        self._loop = loop
        self._excludes = excludes  # deduplicated, none empty
        self._tags = tags  # in request order, each begins with the trigger
        self._text: Optional[str] = None
        self.links = links

    @property
    def text(self) -> str:
        """The EBNF text :func:`~.converter.format_to_linked_ebnf` writes for the request."""
        if self._text is None:
            trigger = self._trigger
            out = ["root ::= triggered_tags\n"]
            out += [f'{name} ::= "L"\n' for name, _ in self.links]
            alts = [_seq([_lit(t.begin[len(trigger):]), t.name, _lit(t.end)]) for t in self._tags]
            out.append(f"triggered_tags_group ::= {_alt(alts)}\n")
            body = tag_dispatch_body([(trigger, "triggered_tags_group")], self._loop, self._excludes)
            out.append(f"triggered_tags ::= {body}\n")
            self._text = "".join(out)
        return self._text

    def grammar(self) -> Any:
        """The grammar of :attr:`text`, built directly (``xgr_grammar_triggered_links``); a
        trigger or exclude that is not valid Unicode goes through the text, whose parser
        names it."""
        from ..grammar import Grammar

        # The alternation drops a tag listed twice; distinct cached tags have distinct
        # stand-ins, so identity is the text's own deduplication.
        tags = list(dict.fromkeys(self._tags))
        try:
            trigger = self._trigger.encode()
            excludes = [e.encode() for e in self._excludes]
        except UnicodeEncodeError:
            return Grammar.from_ebnf(self.text)
        cut = len(trigger)  # a str prefix is a prefix of the UTF-8 bytes too
        parts = [trigger]
        for t in tags:
            parts += (t.begin_b[cut:], t.name_b, t.end_b)
        parts += excludes
        offsets = [0]
        offsets += accumulate(map(len, parts))
        if offsets[-1] >= 1 << 32:
            return Grammar.from_ebnf(self.text)
        ffi, lib = _core.ffi, _core.lib
        out = ffi.new("xgr_grammar **")
        data = b"".join(parts)
        _core.check(lib.xgr_grammar_triggered_links(ffi.from_buffer("uint8_t[]", data),
                                                    ffi.new("uint32_t[]", offsets), len(tags),
                                                    len(excludes), self._loop, out),
                    "building the tool-calling grammar")
        return Grammar._from_out(out)


def triggered_shape(skeleton: Any, n_tags: int) -> Optional[Tuple[str, bool, List[str]]]:
    """(trigger, loop after dispatch, excludes deduplicated and none empty) when
    ``skeleton`` (the request's JSON with each of its ``n_tags`` tags replaced by null) is
    the shape above; else None."""
    if type(skeleton) is not dict or len(skeleton) != 2 or skeleton.get("type") != "structural_tag":
        return None
    f = skeleton.get("format")
    if type(f) is not dict or f.get("type") != "triggered_tags" or not _FORMAT_KEYS.issuperset(f):
        return None
    triggers, slots = f.get("triggers"), f.get("tags")
    excludes = f.get("excludes", [])
    at_least_one, stop_after_first = f.get("at_least_one", False), f.get("stop_after_first", False)
    if (type(triggers) is not list or len(triggers) != 1 or type(triggers[0]) is not str
            or not triggers[0] or type(slots) is not list or len(slots) != n_tags or not n_tags
            or type(excludes) is not list or any(type(e) is not str for e in excludes)
            or at_least_one is not False or type(stop_after_first) is not bool):
        return None
    return triggers[0], not stop_after_first, _dedupe([e for e in excludes if e])


def triggered_linked_ebnf(skeleton: Any, tags: List[Optional[FastTag]]) -> Optional[LinkedEBNF]:
    """The linked grammar of ``skeleton`` (the request's JSON with each tag replaced by
    null) whose tags, in order, are the cached ones with these records (:func:`fast_tag`);
    None unless it is the shape above."""
    shape = triggered_shape(skeleton, len(tags))
    if shape is None:
        return None
    trigger, loop, excludes = shape
    links: Dict[int, Tuple[str, Any]] = {}
    for t in tags:
        if t is None or not t.begin.startswith(trigger):
            return None
        if id(t.fragment) not in links:
            links[id(t.fragment)] = (t.name, t.fragment)
    return LinkedEBNF(trigger, loop, excludes, tags, list(links.values()))
