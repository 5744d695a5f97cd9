"""The commonest linked request written out directly: one ``triggered_tags`` format with a
single trigger whose tags were all seen before and all hold a linked JSON-schema content
(``<function=NAME>{args}</function>`` for N tools, what vLLM and SGLang send for a tool
list). The EBNF text is the one :func:`~.converter.format_to_linked_ebnf` writes for the
same tags, character for character (``tests/structural_tag/test_link.py`` compares them),
without building the format tree and walking it: at 50 tools that walk was about 0.3 ms of
a 0.9 ms request. Any other shape, or any field the reader would have to check, returns
None and goes the general way, which raises the errors with their JSON paths.
"""

from typing import Any, Dict, List, Optional, Tuple

from . import nodes as N
from .converter import _alt, _dedupe, _lit, _seq
from .ebnf import tag_dispatch_body

__all__ = ["LinkedEBNF", "triggered_linked_ebnf"]

_FORMAT_KEYS = frozenset(("type", "triggers", "tags", "excludes", "at_least_one", "stop_after_first"))

#: (stand-in name, trigger) -> the tag's alternative in the tool-picking rule. A stand-in
#: name is unique to its cached tag (link.py numbers them), which fixes begin and end.
_SNIPPETS: Dict[Tuple[str, str], str] = {}
_SNIPPETS_MAX = 1 << 16


class LinkedEBNF:
    """EBNF text (start rule ``root``) and the (stand-in rule, fragment) pairs to link."""

    __slots__ = ("text", "links")

    def __init__(self, text: str, links: List[Tuple[str, Any]]) -> None:
        self.text = text
        self.links = links


def _snippet(tag: N.Tag, name: str, trigger: str) -> str:
    key = (name, trigger)
    s = _SNIPPETS.get(key)
    if s is None:
        s = _seq([_lit(tag.begin[len(trigger):]), name, _lit(tag.end[0])])
        if len(_SNIPPETS) >= _SNIPPETS_MAX:
            _SNIPPETS.clear()
        _SNIPPETS[key] = s
    return s


def triggered_linked_ebnf(skeleton: Any, tags: List[Any]) -> Optional[LinkedEBNF]:
    """The linked grammar of ``skeleton`` (the request's JSON with each tag replaced by
    null) whose tags, in order, are the cached ``tags``; None unless it is the shape above."""
    if type(skeleton) is not dict or len(skeleton) != 2 or skeleton.get("type") != "structural_tag":
        return None
    f = skeleton.get("format")
    if type(f) is not dict or f.get("type") != "triggered_tags" or not _FORMAT_KEYS.issuperset(f):
        return None
    triggers, slots = f.get("triggers"), f.get("tags")
    excludes = f.get("excludes", [])
    at_least_one, stop_after_first = f.get("at_least_one", False), f.get("stop_after_first", False)
    if (type(triggers) is not list or len(triggers) != 1 or type(triggers[0]) is not str
            or not triggers[0] or type(slots) is not list or len(slots) != len(tags) or not tags
            or type(excludes) is not list or any(type(e) is not str for e in excludes)
            or at_least_one is not False or type(stop_after_first) is not bool):
        return None
    trigger = triggers[0]
    links: Dict[int, Tuple[str, Any]] = {}
    alts = []
    for tag in tags:
        if (type(tag) is not N.Tag or type(tag.content) is not N.LinkedJSON
                or type(tag.begin) is not str or not tag.begin.startswith(trigger)
                or type(tag.end) is not list or len(tag.end) != 1):
            return None
        frag = tag.content.fragment
        hit = links.get(id(frag))
        if hit is None:
            name = tag.content.name
            if name in ("root", "triggered_tags", "triggered_tags_group"):
                return None
            hit = links[id(frag)] = (name, frag)
        alts.append(_snippet(tag, hit[0], trigger))
    out = ["root ::= triggered_tags\n"]
    out += [f'{name} ::= "L"\n' for name, _ in links.values()]
    out.append(f"triggered_tags_group ::= {_alt(alts)}\n")
    body = tag_dispatch_body([(trigger, "triggered_tags_group")], not stop_after_first,
                             _dedupe([e for e in excludes if e]))
    out.append(f"triggered_tags ::= {body}\n")
    return LinkedEBNF("".join(out), list(links.values()))
