"""Reading a structural tag (JSON text, dict, or pydantic model) into a checked tree.

The tree mirrors upstream xgrammar's formats one to one; every node keeps the JSON path it
came from so that later errors (conversion, unsupported features) can name it. Reading is
strict about types (``"at_least_one": 1`` is an error, not ``True``) and lenient about
unknown keys (ignored, as upstream's parsers do).
"""

import json
from typing import Any, Dict, List, Optional, Tuple, Union

from .errors import StructuralTagError, StructuralTagJSONError, describe, path_join
from .phrases import annotate

__all__ = [
    "Node",
    "ConstString",
    "JSONSchema",
    "AnyText",
    "GrammarText",
    "Regex",
    "Sequence",
    "Or",
    "Tag",
    "TriggeredTags",
    "TagsWithSeparator",
    "Optional_",
    "Plus",
    "Star",
    "Repeat",
    "Dispatch",
    "TokenLevel",
    "read_structural_tag",
    "read_format",
    "JSON_SCHEMA_STYLES",
    "FORMAT_TYPES",
]

#: Styles of the ``json_schema`` format, as upstream xgrammar names them.
JSON_SCHEMA_STYLES = (
    "json",
    "qwen_xml",
    "minimax_xml",
    "minimax_m3_xml",
    "deepseek_xml",
    "glm_xml",
    "cohere_xml",
    "kimi_k3_xml",
    "deepseek_v4_1_xml",
)

_MAX_I32 = 2_147_483_647

_TOKEN_TYPES = ("token", "exclude_token", "any_tokens", "token_triggered_tags", "token_dispatch")

#: Every ``type`` a format may have.
FORMAT_TYPES = (
    "const_string",
    "json_schema",
    "qwen_xml_parameter",
    "any_text",
    "grammar",
    "regex",
    "sequence",
    "or",
    "tag",
    "triggered_tags",
    "tags_with_separator",
    "optional",
    "plus",
    "star",
    "repeat",
    "dispatch",
) + _TOKEN_TYPES


class Node:
    __slots__ = ("path",)
    kind = ""

    def __init__(self, path: str):
        self.path = path


class ConstString(Node):
    __slots__ = ("value",)
    kind = "const_string"

    def __init__(self, path: str, value: str):
        super().__init__(path)
        self.value = value


class JSONSchema(Node):
    __slots__ = ("schema", "style", "any_order", "max_whitespace_cnt", "excludes", "strict")
    kind = "json_schema"

    def __init__(self, path, schema, style="json", any_order=False, max_whitespace_cnt=None,
                 excludes=(), strict=True):
        super().__init__(path)
        self.schema = schema
        self.style = style
        self.any_order = any_order
        self.max_whitespace_cnt = max_whitespace_cnt
        self.excludes = list(excludes)
        #: False: objects without additionalProperties / unevaluatedProperties allow other
        #: properties (JSON schema's default). Structural tags are always strict (True); only
        #: ``xgrammar2.testing._json_schema_to_ebnf(strict_mode=False)`` sets it.
        self.strict = strict


class LinkedJSON(JSONSchema):
    """A json_schema content whose grammar was lowered once to a linked fragment (see
    ``structural_tag.link``): the linking converter refers to the fragment instead of
    writing the schema's rules; any other converter reads ``schema`` as usual."""

    __slots__ = ("fragment", "name")

    def __init__(self, node: JSONSchema, fragment: Any, name: str):
        super().__init__(node.path, node.schema, node.style, node.any_order,
                         node.max_whitespace_cnt, node.excludes, node.strict)
        self.fragment = fragment
        self.name = name  # of its stand-in rule, unique to the fragment


class ReadTag:
    """A tag read before (the compiler's tag cache), put where its JSON stood: read as that
    tag at its new path."""

    __slots__ = ("tag",)

    def __init__(self, tag: "Tag"):
        self.tag = tag


class AnyText(Node):
    __slots__ = ("excludes", "max_tokens", "max_chars", "token_excludes")
    kind = "any_text"

    def __init__(self, path, excludes=(), max_tokens=None, max_chars=None, token_excludes=()):
        super().__init__(path)
        self.excludes = list(excludes)
        self.max_tokens = max_tokens
        self.max_chars = max_chars
        self.token_excludes = list(token_excludes)


class GrammarText(Node):
    __slots__ = ("grammar",)
    kind = "grammar"

    def __init__(self, path: str, grammar: str):
        super().__init__(path)
        self.grammar = grammar


class Regex(Node):
    __slots__ = ("pattern",)
    kind = "regex"

    def __init__(self, path: str, pattern: str):
        super().__init__(path)
        self.pattern = pattern


class Sequence(Node):
    __slots__ = ("elements",)
    kind = "sequence"

    def __init__(self, path: str, elements: List[Node]):
        super().__init__(path)
        self.elements = elements


class Or(Node):
    __slots__ = ("elements",)
    kind = "or"

    def __init__(self, path: str, elements: List[Node]):
        super().__init__(path)
        self.elements = elements


class Tag(Node):
    """``begin content end``. ``begin`` / ``end`` entries are strings, or a :class:`TokenLevel`
    node for upstream's token-id begin / end."""

    __slots__ = ("begin", "content", "end")
    kind = "tag"

    def __init__(self, path, begin, content: Node, end):
        super().__init__(path)
        self.begin = begin
        self.content = content
        self.end = end  # List[str] or TokenLevel


class TriggeredTags(Node):
    __slots__ = ("triggers", "tags", "at_least_one", "stop_after_first", "excludes")
    kind = "triggered_tags"

    def __init__(self, path, triggers, tags, at_least_one=False, stop_after_first=False,
                 excludes=()):
        super().__init__(path)
        self.triggers = list(triggers)
        self.tags: List[Tag] = list(tags)
        self.at_least_one = at_least_one
        self.stop_after_first = stop_after_first
        self.excludes = list(excludes)


class TagsWithSeparator(Node):
    __slots__ = ("tags", "separator", "at_least_one", "stop_after_first")
    kind = "tags_with_separator"

    def __init__(self, path, tags, separator, at_least_one=False, stop_after_first=False):
        super().__init__(path)
        self.tags: List[Tag] = list(tags)
        self.separator = separator
        self.at_least_one = at_least_one
        self.stop_after_first = stop_after_first


class Optional_(Node):
    __slots__ = ("content",)
    kind = "optional"

    def __init__(self, path: str, content: Node):
        super().__init__(path)
        self.content = content


class Plus(Optional_):
    __slots__ = ()
    kind = "plus"


class Star(Optional_):
    __slots__ = ()
    kind = "star"


class Repeat(Node):
    __slots__ = ("min", "max", "content")
    kind = "repeat"

    def __init__(self, path: str, lo: int, hi: int, content: Node):
        super().__init__(path)
        self.min = lo
        self.max = hi
        self.content = content


class Dispatch(Node):
    __slots__ = ("rules", "loop", "excludes")
    kind = "dispatch"

    def __init__(self, path, rules: List[Tuple[str, Node]], loop=True, excludes=()):
        super().__init__(path)
        self.rules = rules
        self.loop = loop
        self.excludes = list(excludes)


class TokenLevel(Node):
    """A token-level format (``token``, ``exclude_token``, ``any_tokens``,
    ``token_triggered_tags``, ``token_dispatch``, or a token used as a tag's begin / end).
    Read and checked, but not convertible to EBNF (see the converter)."""

    __slots__ = ("type", "data")
    kind = "token_level"

    def __init__(self, path: str, type_: str, data: Dict[str, Any]):
        super().__init__(path)
        self.type = type_
        self.data = data


# ---- reading ----------------------------------------------------------------------------


def _err(path: str, msg: str, code: Optional[str] = None) -> StructuralTagError:
    return StructuralTagError(path, msg, code)


def _get(obj: Dict[str, Any], key: str, path: str, required: bool = True, default: Any = None):
    if key in obj:
        return obj[key]
    if required:
        raise _err(path_join(path, key), f"missing required field '{key}'", "missing")
    return default


def _str(obj, key, path, required=True, default=None, non_empty=False) -> Optional[str]:
    v = _get(obj, key, path, required, default)
    if v is None and not required:
        return default
    if not isinstance(v, str):
        raise _err(path_join(path, key), f"must be a string, got {describe(v)}", "type")
    if non_empty and not v:
        raise _err(path_join(path, key), "must be a non-empty string", "empty")
    return v


def _bool(obj, key, path, default: bool) -> bool:
    v = obj.get(key, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise _err(path_join(path, key), f"must be a boolean, got {describe(v)}", "type")
    return v


def _int(obj, key, path, required=True, default=None, minimum=None, maximum=None) -> Optional[int]:
    v = _get(obj, key, path, required, default)
    if v is None and not required:
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        else:
            raise _err(path_join(path, key), f"must be an integer, got {describe(v)}", "type")
    if minimum is not None and v < minimum:
        raise _err(path_join(path, key), f"must be >= {minimum}, got {v}", "range")
    if maximum is not None and v > maximum:
        raise _err(path_join(path, key), f"must be <= {maximum}, got {v}", "range")
    return v


def _list(obj, key, path, required=True, non_empty=False) -> List[Any]:
    v = _get(obj, key, path, required, [])
    if v is None and not required:
        return []
    if not isinstance(v, (list, tuple)):
        raise _err(path_join(path, key), f"must be an array, got {describe(v)}", "type")
    if non_empty and not v:
        raise _err(path_join(path, key), "must be a non-empty array", "empty")
    return list(v)


def _str_list(obj, key, path, required=False, non_empty=False, non_empty_items=False):
    items = _list(obj, key, path, required=required, non_empty=non_empty)
    for i, s in enumerate(items):
        if not isinstance(s, str):
            raise _err(path_join(path, key, i), f"must be a string, got {describe(s)}", "item")
        if non_empty_items and not s:
            raise _err(path_join(path, key, i), "must be a non-empty string", "item")
    return items


def _token_value(v: Any, path: str) -> Union[int, str]:
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise _err(path, f"a token must be a token id (integer) or a token string, got {describe(v)}",
                   "type")
    if isinstance(v, int) and v < 0:
        raise _err(path, f"a token id must be >= 0, got {v}")
    return v


def _token_format(v: Any, path: str) -> TokenLevel:
    if not isinstance(v, dict) or v.get("type") != "token":
        raise _err(path, 'must be a string or a token format {"type": "token", "token": ...}')
    tok = _token_value(_get(v, "token", path), path_join(path, "token"))
    return TokenLevel(path, "token", {"token": tok})


def _token_list(obj, key, path) -> List[Union[int, str]]:
    items = _list(obj, key, path, required=False)
    return [_token_value(t, path_join(path, key, i)) for i, t in enumerate(items)]


def _schema_value(v: Any, path: str) -> Union[bool, Dict[str, Any]]:
    if isinstance(v, (dict, bool)):
        return v
    if isinstance(v, str):
        try:
            parsed = json.loads(v)
        except ValueError as e:
            raise _err(path, f"a JSON schema given as a string must be JSON text: {e}", "type") from e
        if isinstance(parsed, (dict, bool)):
            return parsed
    to_schema = getattr(v, "model_json_schema", None)
    if isinstance(v, type) and callable(to_schema):
        return to_schema()
    raise _err(path, f"must be a JSON schema (an object or a boolean), got {describe(v)}", "type")


def _guess_type(obj: Dict[str, Any]) -> Optional[str]:
    """The type of a format written without ``type``, in upstream's order of preference."""
    if "begin" in obj and "content" in obj and "end" in obj:
        return "tag"
    if "value" in obj:
        return "const_string"
    if "json_schema" in obj:
        return "json_schema"
    if "elements" in obj:
        return "sequence"
    if "triggers" in obj and "tags" in obj:
        return "triggered_tags"
    if "tags" in obj and "separator" in obj:
        return "tags_with_separator"
    if "excludes" in obj and len(obj) == 1:
        return "any_text"
    return None


def read_format(value: Any, path: str = "$.format", depth: int = 0) -> Node:
    """Reads one format (a dict) at JSON path ``path``."""
    if depth > 200:
        raise _err(path, "formats are nested too deeply (more than 200 levels)")
    value = _plain(value)
    if not isinstance(value, dict):
        raise _err(path, f"Format must be an object, got {describe(value)}")
    t = value.get("type")
    if t is None:
        t = _guess_type(value)
        if t is None:
            raise _err(path, "Invalid format: the format has no 'type' field (one of: "
                       + ", ".join(FORMAT_TYPES) + ")")
    elif not isinstance(t, str):
        raise _err(path_join(path, "type"), f"Format's type must be a string, got {describe(t)}")
    try:
        return _read_typed(value, t, path, depth)
    except StructuralTagError as e:
        better = annotate(e, t, path)
        if better is e:
            raise
        raise better from e


def _read_typed(value: Dict[str, Any], t: str, path: str, depth: int) -> Node:
    """Reads a format whose type is ``t``."""
    d = depth + 1
    sub = lambda v, p: read_format(v, p, d)  # noqa: E731

    if t == "const_string":
        return ConstString(path, _str(value, "value", path))
    if t == "json_schema":
        plain = _plain_json_schema(value)
        if plain is not None:
            return JSONSchema(path, plain)  # the plain case, as below reads it
    if t in ("json_schema", "qwen_xml_parameter"):
        schema = _schema_value(_get(value, "json_schema", path), path_join(path, "json_schema"))
        if t == "qwen_xml_parameter":
            style = "qwen_xml"
        else:
            style = _str(value, "style", path, required=False, default="json")
            if style not in JSON_SCHEMA_STYLES:
                raise _err(path_join(path, "style"),
                           f"unknown style {style!r}; expected one of: " + ", ".join(JSON_SCHEMA_STYLES),
                           "type")
        # 0 (no whitespace at all) is an xgrammar2 extension (upstream asks for >= 1): what
        # the engine plugins set for disable_any_whitespace (xgrammar2.serving).
        mw = _int(value, "max_whitespace_cnt", path, required=False, minimum=0)
        if "excludes" in value and value["excludes"] is None:
            raise _err(path_join(path, "excludes"), "must be an array, got null", "type")
        return JSONSchema(path, schema, style, _bool(value, "any_order", path, False), mw,
                          _str_list(value, "excludes", path, non_empty_items=True))
    if t == "any_text":
        excludes, token_excludes = [], []
        for i, e in enumerate(_list(value, "excludes", path, required=False)):
            if isinstance(e, str):
                if e:
                    excludes.append(e)
            elif isinstance(e, dict):
                token_excludes.append(_token_format(e, path_join(path, "excludes", i)))
            else:
                raise _err(path_join(path, "excludes", i), f"must be a string, got {describe(e)}", "item")
        return AnyText(path, excludes,
                       _int(value, "max_tokens", path, required=False, minimum=0, maximum=_MAX_I32),
                       _int(value, "max_chars", path, required=False, minimum=0, maximum=_MAX_I32),
                       token_excludes)
    if t == "grammar":
        return GrammarText(path, _str(value, "grammar", path, non_empty=True))
    if t == "regex":
        return Regex(path, _str(value, "pattern", path, non_empty=True))
    if t in ("sequence", "or"):
        items = _list(value, "elements", path, non_empty=True)
        els = []
        for i, e in enumerate(items):
            p = f"{path}.elements[{i}]"  # path_join(path, "elements", i)
            if (type(e) is dict and len(e) == 2 and e.get("type") == "const_string"
                    and type(e.get("value")) is str):
                els.append(ConstString(p, e["value"]))  # a plain literal, as below reads it
            else:
                els.append(sub(e, p))
        return Sequence(path, els) if t == "sequence" else Or(path, els)
    if t == "tag":
        return _read_tag(value, path, d)
    if t == "triggered_tags":
        triggers = _str_list(value, "triggers", path, required=True, non_empty=True,
                             non_empty_items=True)
        tags = [_read_tag_item(x, f"{path}.tags[{i}]", d)  # path_join(path, "tags", i)
                for i, x in enumerate(_list(value, "tags", path, non_empty=True))]
        return TriggeredTags(path, triggers, tags, _bool(value, "at_least_one", path, False),
                             _bool(value, "stop_after_first", path, False),
                             [e for e in _str_list(value, "excludes", path) if e])
    if t == "tags_with_separator":
        tags = [_read_tag_item(x, path_join(path, "tags", i), d)
                for i, x in enumerate(_list(value, "tags", path, non_empty=True))]
        return TagsWithSeparator(path, tags, _str(value, "separator", path),
                                 _bool(value, "at_least_one", path, False),
                                 _bool(value, "stop_after_first", path, False))
    if t in ("optional", "plus", "star"):
        content = sub(_get(value, "content", path), path_join(path, "content"))
        return {"optional": Optional_, "plus": Plus, "star": Star}[t](path, content)
    if t == "repeat":
        lo = _int(value, "min", path, minimum=0)
        hi = _int(value, "max", path)
        if hi != -1 and hi < lo:
            raise _err(path_join(path, "max"), f"must be -1 (unbounded) or >= min ({lo}), got {hi}",
                       "range" if hi < 0 else "order")
        return Repeat(path, lo, hi, sub(_get(value, "content", path), path_join(path, "content")))
    if t == "dispatch":
        rules = []
        for i, r in enumerate(_list(value, "rules", path, non_empty=True)):
            rp = path_join(path, "rules", i)
            r = _plain(r)
            if not isinstance(r, (list, tuple)) or len(r) != 2:
                raise _err(rp, "must be a [pattern, format] pair")
            if not isinstance(r[0], str) or not r[0]:
                raise _err(path_join(rp, 0), "the pattern must be a non-empty string")
            rules.append((r[0], sub(r[1], path_join(rp, 1))))
        return Dispatch(path, rules, _bool(value, "loop", path, True),
                        [e for e in _str_list(value, "excludes", path) if e])
    if t == "token":
        return TokenLevel(path, t, {"token": _token_value(_get(value, "token", path),
                                                           path_join(path, "token"))})
    if t in ("exclude_token", "any_tokens"):
        data = {"exclude_tokens": _token_list(value, "exclude_tokens", path)}
        if t == "any_tokens":
            data["max_tokens"] = _int(value, "max_tokens", path, required=False, minimum=0,
                                      maximum=_MAX_I32)
        return TokenLevel(path, t, data)
    if t == "token_triggered_tags":
        trig = _list(value, "trigger_tokens", path, non_empty=True)
        data = {
            "trigger_tokens": [_token_value(x, path_join(path, "trigger_tokens", i))
                               for i, x in enumerate(trig)],
            "tags": [_read_tag_item(x, path_join(path, "tags", i), d)
                     for i, x in enumerate(_list(value, "tags", path, non_empty=True))],
            "exclude_tokens": _token_list(value, "exclude_tokens", path),
            "at_least_one": _bool(value, "at_least_one", path, False),
            "stop_after_first": _bool(value, "stop_after_first", path, False),
        }
        return TokenLevel(path, t, data)
    if t == "token_dispatch":
        rules = []
        for i, r in enumerate(_list(value, "rules", path, non_empty=True)):
            rp = path_join(path, "rules", i)
            r = _plain(r)
            if not isinstance(r, (list, tuple)) or len(r) != 2:
                raise _err(rp, "must be a [token, format] pair")
            rules.append((_token_value(r[0], path_join(rp, 0)), sub(r[1], path_join(rp, 1))))
        return TokenLevel(path, t, {"rules": rules, "loop": _bool(value, "loop", path, True),
                                    "exclude_tokens": _token_list(value, "exclude_tokens", path)})
    raise _err(path_join(path, "type"),
               f"Format type not recognized: {t}; expected one of: " + ", ".join(FORMAT_TYPES))


_SIMPLE_TAG_KEYS = frozenset(("type", "begin", "content", "end"))


def _is_default_json_option(key: str, value: Any) -> bool:
    """Is this a JSONSchemaFormat field other than type and json_schema, at its default (as
    a pydantic dump writes it)?"""
    if key == "style":
        return value == "json"
    if key == "any_order":
        return value is False
    if key == "max_whitespace_cnt":
        return value is None
    if key == "excludes":
        return type(value) is list and not value
    return False


def _plain_json_schema(content: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The schema of a json_schema format whose other fields are absent or at their defaults
    (as a pydantic dump writes them); None for any other format."""
    schema = content.get("json_schema")
    if content.get("type") != "json_schema" or type(schema) is not dict:
        return None
    if len(content) != 2 and not all(k == "type" or k == "json_schema" or _is_default_json_option(k, v)
                                     for k, v in content.items()):
        return None
    return schema


def _simple_json_tag(value: Dict[str, Any], path: str) -> Optional[Tag]:
    """``{"begin": str, "content": {"type": "json_schema", "json_schema": {...}}, "end": str}``
    (the content's other fields, if present, at their defaults, as a pydantic dump writes
    them), the shape of every tool in a tool-calling format, read as the general path reads
    it minus the checks it cannot fail; None for any other shape."""
    if value.get("type", "tag") != "tag" or not _SIMPLE_TAG_KEYS.issuperset(value):
        return None
    begin, content, end = value.get("begin"), value.get("content"), value.get("end")
    if type(begin) is not str or type(end) is not str or type(content) is not dict:
        return None
    schema = _plain_json_schema(content)
    if schema is None:
        return None
    return Tag(path, begin, JSONSchema(path + ".content", schema), [end])


def _read_tag_item(value: Any, path: str, depth: int) -> Tag:
    if type(value) is ReadTag:
        t = value.tag
        return Tag(path, t.begin, t.content, t.end)
    if type(value) is dict:
        simple = _simple_json_tag(value, path)
        if simple is not None:
            return simple
    value = _plain(value)
    if not isinstance(value, dict):
        raise _err(path, f"a tag must be an object, got {describe(value)}")
    t = value.get("type", "tag")
    if t != "tag":
        raise _err(path_join(path, "type"), f"must be \"tag\" here, got {t!r}")
    try:
        return _read_tag(value, path, depth)
    except StructuralTagError as e:
        better = annotate(e, "tag", path)
        if better is e:
            raise
        raise better from e


def _read_tag(value: Dict[str, Any], path: str, depth: int) -> Tag:
    begin = _get(value, "begin", path)
    if isinstance(begin, dict):
        begin = _token_format(begin, path_join(path, "begin"))
    elif not isinstance(begin, str):
        raise _err(path_join(path, "begin"), f"must be a string, got {describe(begin)}", "type")
    content = read_format(_get(value, "content", path), path_join(path, "content"), depth)
    end = _get(value, "end", path)
    if isinstance(end, str):
        end = [end]
    elif isinstance(end, dict):
        end = _token_format(end, path_join(path, "end"))
    elif isinstance(end, (list, tuple)):
        if not end:
            raise _err(path_join(path, "end"), "an end list must not be empty", "empty")
        for i, e in enumerate(end):
            if not isinstance(e, str):
                raise _err(path_join(path, "end", i), f"must be a string, got {describe(e)}", "item")
        end = list(end)
    else:
        raise _err(path_join(path, "end"), f"must be a string or an array of strings, got {describe(end)}",
                   "type")
    return Tag(path, begin, content, end)


def _plain(value: Any) -> Any:
    """pydantic models -> plain JSON data (dicts and lists)."""
    if type(value) is dict:
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        return dump(by_alias=True)
    return value


def _legacy(obj: Dict[str, Any], path: str) -> Node:
    """``{"structures": [{"begin", "schema", "end"}], "triggers": [...]}`` -> triggered tags."""
    triggers = _str_list(obj, "triggers", path, required=True, non_empty=True, non_empty_items=True)
    tags = []
    for i, s in enumerate(_list(obj, "structures", path, non_empty=True)):
        sp = path_join(path, "structures", i)
        s = _plain(s)
        if not isinstance(s, dict):
            raise _err(sp, f"a structure must be an object, got {describe(s)}")
        begin = _str(s, "begin", sp)
        end = _str(s, "end", sp)
        if "schema" not in s and "schema_" not in s:
            raise _err(path_join(sp, "schema"), "missing required field 'schema'")
        schema = _schema_value(s["schema"] if "schema" in s else s["schema_"], path_join(sp, "schema"))
        tags.append(Tag(sp, begin, JSONSchema(path_join(sp, "schema"), schema), [end]))
    return TriggeredTags(path, triggers, tags)


def read_structural_tag(tag: Any) -> Node:
    """Reads a whole structural tag: JSON text, a dict, or a pydantic ``StructuralTag`` (or a
    bare format model). Accepts upstream's current form ``{"type": "structural_tag",
    "format": {...}}`` and the legacy form ``{"type": "structural_tag", "structures": [...],
    "triggers": [...]}``."""
    if isinstance(tag, (bytes, bytearray)):
        tag = tag.decode("utf-8")
    if isinstance(tag, str):
        try:
            tag = json.loads(tag)
        except ValueError as e:
            raise StructuralTagJSONError(f"Failed to parse JSON: the structural tag is not valid JSON: {e}") from e
    tag = _plain(tag)
    if not isinstance(tag, dict):
        raise _err("$", f"Structural tag must be an object, got {describe(tag)}")
    t = tag.get("type", "structural_tag")
    if "format" not in tag and "structures" not in tag and t in FORMAT_TYPES:
        return read_format(tag, "$")  # a bare format
    if t != "structural_tag":
        raise _err("$.type", f'Structural tag\'s type must be a string "structural_tag", got {t!r}')
    if "format" in tag:
        return read_format(tag["format"], "$.format")
    if "structures" in tag or "triggers" in tag:
        return _legacy(tag, "$")
    raise _err("$", "Structural tag must have a format field (or the legacy 'structures' + 'triggers')")
