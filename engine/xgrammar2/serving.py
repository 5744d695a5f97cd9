"""What a serving engine (vLLM, SGLang) adds around a request's grammar.

Two things both engine plugins need, kept here so they behave the same:

* **Bounded whitespace.** A JSON grammar with unbounded whitespace lets a model that prefers
  whitespace (a random-weight model, a confused small model, or one sampled hot) emit spaces
  and newlines until ``max_tokens``: the most reported structured-output failure of every
  engine. The plugins bound each run of whitespace by default (:data:`DEFAULT_MAX_WHITESPACE_CNT`)
  in every JSON context, including the ``json_schema`` contents of the structural tags that
  the engines build for ``tools``, which carry their own options and so escape request-level
  settings. :func:`bound_tag_whitespace` applies the engine's options to those contents.
  The library's own defaults stay upstream xgrammar's (unbounded).
* **Errors that name the tool.** A tool-call request compiles one grammar from all of its
  tools; when one tool's ``parameters`` cannot compile, the converter's error names a
  position in the generated schema or tag (``#/items/anyOf/8/...``,
  ``$.format.tags[8].content.json_schema``). :func:`name_tool_in_error` rewrites it as
  ``tools[8] (function 'get_weather'): parameters at #/properties/x: ...``.
"""

from __future__ import annotations

import copy
import json
import logging
import re
import threading
from typing import Any, Dict, List, Optional, Tuple

__all__ = [
    "DEFAULT_MAX_WHITESPACE_CNT",
    "bound_tag_whitespace",
    "name_tool_in_error",
    "log_unenforced_once",
]

#: The plugins' default bound on consecutive whitespace characters in JSON (a newline and
#: the indentation of pretty-printed JSON four levels deep at four spaces fit; a run of
#: hundreds does not). Users change it with the engine's option (``max_whitespace_cnt``).
DEFAULT_MAX_WHITESPACE_CNT = 16


def bound_tag_whitespace(tag: Any, max_whitespace_cnt: Optional[int], any_whitespace: bool = True) -> Any:
    """A copy of structural tag ``tag`` (a dict; anything else is returned as is) whose
    ``json_schema`` contents that set no ``max_whitespace_cnt`` of their own get the engine's
    options: with ``any_whitespace=False`` the JSON style gets no whitespace at all
    (``max_whitespace_cnt: 0``, the compact separators of ``json.dumps(..., separators=(",",
    ":"))``); XML styles, whose native format puts newlines between parameters, get the bound
    only. ``max_whitespace_cnt=None`` with ``any_whitespace=True`` leaves the tag unchanged.
    The caller's tag is never modified."""
    if not isinstance(tag, dict) or (max_whitespace_cnt is None and any_whitespace):
        return tag
    out = copy.deepcopy(tag)
    _bound(out, max_whitespace_cnt, any_whitespace)
    return out


def _bound(node: Any, mw: Optional[int], any_ws: bool) -> None:
    if isinstance(node, list):
        for v in node:
            _bound(v, mw, any_ws)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") in ("json_schema", "qwen_xml_parameter") and "json_schema" in node:
        if node.get("max_whitespace_cnt") is None:
            json_style = node.get("type") == "json_schema" and node.get("style", "json") == "json"
            bound = 0 if (json_style and not any_ws) else mw
            if bound is not None:
                node["max_whitespace_cnt"] = bound
        return  # the schema inside is data, not formats
    for k, v in node.items():
        if isinstance(v, (dict, list)):
            _bound(v, mw, any_ws)


# ---- errors that name the tool -------------------------------------------------------------

# Where a tool's name sits in the begin strings of the tags that engines build (JSON calls,
# Llama / Qwen-coder / MiniMax / DeepSeek / Kimi / Harmony layouts); the first match wins.
_NAME_IN_BEGIN = [
    re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)+)"'),
    re.compile(r"<function=([^>\s]+)>"),
    re.compile(r'<invoke name="([^"]+)"'),
    re.compile(r"functions\.([A-Za-z0-9_.\-]+)"),
    re.compile(r"<\|tool[▁_]sep\|>([A-Za-z0-9_.\-]+)"),
    re.compile(r"<tool_call>\s*([A-Za-z0-9_.\-]+)"),
]

_TAG_PATH = re.compile(r"^(\$(?:\.[A-Za-z_]\w*|\[\d+\])*?\.tags\[(\d+)\])(.*)$")


def _tool_name_of_branch(branch: Any) -> Optional[str]:
    """The tool name a vLLM-style tool-call schema branch pins (``name`` const or enum)."""
    if not isinstance(branch, dict):
        return None
    props = branch.get("properties")
    name = props.get("name") if isinstance(props, dict) else None
    if isinstance(name, dict):
        if isinstance(name.get("const"), str):
            return name["const"]
        enum = name.get("enum")
        if isinstance(enum, list) and len(enum) == 1 and isinstance(enum[0], str):
            return enum[0]
    return None


def _from_schema(schema: Any, pointer: str) -> Optional[Tuple[int, str, str]]:
    """(tool index, name, pointer inside its parameters) when ``pointer`` lies in a tool
    branch of a tool-call schema (``{"type": "array", "items": {"anyOf": [...]}}`` as vLLM
    builds for tool_choice "required", or the same at the root)."""
    m = re.match(r"^#(/items)?/anyOf/(\d+)(/.*)?$", pointer or "")
    if not m or not isinstance(schema, dict):
        return None
    holder = schema.get("items") if m.group(1) else schema
    branches = holder.get("anyOf") if isinstance(holder, dict) else None
    i = int(m.group(2))
    if not isinstance(branches, list) or i >= len(branches):
        return None
    name = _tool_name_of_branch(branches[i])
    if name is None:
        return None
    rest = m.group(3) or ""
    for key in ("/properties/parameters", "/properties/arguments"):
        if rest.startswith(key):
            return i, name, "#" + rest[len(key):]
    return i, name, "#" + rest


def _walk_path(tag: Any, path: str) -> Any:
    """The value at a ``$.a.b[3]`` path inside ``tag`` (None when it is not there)."""
    cur = tag
    for name, idx in re.findall(r"\.([A-Za-z_]\w*)|\[(\d+)\]", path[1:]):
        if name:
            cur = cur.get(name) if isinstance(cur, dict) else None
        else:
            cur = cur[int(idx)] if isinstance(cur, list) and int(idx) < len(cur) else None
        if cur is None:
            return None
    return cur


def _tag_names(tags: List[Any]) -> List[Optional[str]]:
    out: List[Optional[str]] = []
    for t in tags:
        begin = t.get("begin") if isinstance(t, dict) else None
        name = None
        if isinstance(begin, str):
            for rx in _NAME_IN_BEGIN:
                m = rx.search(begin)
                if m:
                    name = m.group(1)
                    break
        out.append(name)
    return out


def _from_tag(tag: Any, path: str) -> Optional[Tuple[Optional[int], Optional[str], str, str]]:
    """(tool index, name, tag path, rest of the path) when ``path`` lies inside a tag of a
    tag list. The tool index counts distinct names in order (one tag per tool, as engines
    build them); it is None when the names cannot be read from the begin strings."""
    m = _TAG_PATH.match(path or "")
    if not m:
        return None
    tag_path, rest = m.group(1), m.group(3)
    holder_path = tag_path[: tag_path.rfind("[")]
    tags = _walk_path(tag, holder_path)
    if not isinstance(tags, list):
        return None
    i = int(m.group(2))
    names = _tag_names(tags)
    name = names[i] if i < len(names) else None
    index = None
    if name is not None and all(n is not None for n in names):
        seen: Dict[str, int] = {}
        for n in names:
            seen.setdefault(n, len(seen))  # type: ignore[arg-type]
        index = seen[name]
    return index, name, tag_path, rest


def name_tool_in_error(spec: Any, err: BaseException) -> Optional[str]:
    """A message naming the tool whose ``parameters`` made ``err``, or None when ``err``
    does not point into a tool.

    ``spec`` is what the engine compiled: the tool-call JSON schema (dict or JSON text) or
    the structural tag (dict or JSON text). ``err`` is the compile error: a JSON-schema error
    carries ``pointer`` (and, inside a structural tag, the tag error carries ``path`` and the
    schema's own ``schema_pointer``)."""
    if isinstance(spec, (str, bytes, bytearray)):
        try:
            spec = json.loads(spec)
        except ValueError:
            return None
    detail = getattr(err, "detail", None) or str(err)
    path = getattr(err, "path", None)
    if isinstance(path, str) and path.startswith("$"):
        hit = _from_tag(spec, path)
        if hit is None:
            return None
        index, name, tag_path, rest = hit
        who = f"tools[{index}]" if index is not None else f"the tool of {tag_path}"
        if name is not None:
            who += f" (function {name!r})"
        if not rest.startswith(".content"):
            return f"{who}: {path}: {detail}"
        inner = getattr(err, "schema_pointer", None) or "#"
        return f"{who}: parameters at {inner}: {detail}"
    pointer = getattr(err, "pointer", None)
    if isinstance(pointer, str):
        hit2 = _from_schema(spec, pointer)
        if hit2 is None:
            return None
        index2, name2, inner2 = hit2
        # The converter's message names the pointer in the generated schema: name the one
        # inside the tool's parameters instead.
        if pointer in detail:
            return f"tools[{index2}] (function {name2!r}): parameters: {detail.replace(pointer, inner2)}"
        return f"tools[{index2}] (function {name2!r}): parameters at {inner2}: {detail}"
    return None


# ---- constraints compiled but not enforced --------------------------------------------------

_logged: Dict[int, None] = {}
_logged_lock = threading.Lock()


def log_unenforced_once(log: logging.Logger, compiled: Any, spec: Any) -> bool:
    """Logs, once per distinct ``spec`` (the request's schema, as text or JSON data), the
    constraints that ``compiled`` (a CompiledGrammar) does not enforce, e.g. an unknown
    ``format``, which JSON Schema makes an annotation. Returns whether it logged."""
    warnings = getattr(compiled, "warnings", ())
    if not warnings:
        return False
    text = spec if isinstance(spec, str) else json.dumps(spec, sort_keys=True, default=str)
    key = hash(text)
    with _logged_lock:
        if key in _logged:
            return False
        if len(_logged) >= 4096:
            _logged.clear()
        _logged[key] = None
    log.warning("xgrammar2: JSON schema compiled with constraints not enforced: %s", "; ".join(warnings))
    return True


def engine_cache_dir(option: Any, engine_root: Optional[str]) -> Optional[str]:
    """The on-disk compile cache directory (docs/disk-cache.md) an engine plugin gives its
    compiler: ``option`` when set (a path; ``""``, ``"off"``, ``"none"``, ``"0"`` or False turn
    the cache off), else ``$XGRAMMAR2_CACHE_DIR`` when set (the same words turn it off),
    else ``<engine_root>/xgrammar2`` (the engine's own cache root), else None."""
    import os

    def read(value: Any) -> Any:
        if value is False:
            return False
        if isinstance(value, str):
            v = value.strip()
            if v.lower() in ("", "off", "none", "0", "false"):
                return False
            return os.path.expanduser(v)
        return None

    for value in (option, os.environ.get("XGRAMMAR2_CACHE_DIR")):
        got = read(value)
        if got is False:
            return None
        if got:
            return got
    if engine_root:
        return os.path.join(os.path.expanduser(engine_root), "xgrammar2")
    return None
