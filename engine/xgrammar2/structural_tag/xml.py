"""XML-style tool arguments: the ``json_schema`` format with ``style`` other than ``json``.

Models such as Qwen3-Coder, MiniMax-M2, DeepSeek-V3.2 and GLM-4.7 write each argument of a
tool call as its own XML-like element instead of one JSON object, e.g. Qwen3-Coder::

    <parameter=city>
    Paris
    </parameter>
    <parameter=days>
    3
    </parameter>

The grammar follows upstream xgrammar's converters for these styles:

* an object schema's properties come in declared order, required ones must appear,
  optional ones may be skipped (``any_order`` lifts the order); a root schema of another
  type is the bare value (a plain string as raw text, else JSON), as upstream does;
* a plain string value is raw text that cannot contain the closing element; a string with an
  ``enum`` / ``const`` is one of its raw values; other values are JSON (strings inside them
  are quoted), with whitespace allowed around;
* ``additionalProperties`` (true or a schema) allows further elements with any
  identifier name after the declared ones; a schema without properties (``true``, ``{}``,
  ``{"type": "object"}``) allows any elements.

Styles ``minimax_m3_xml``, ``cohere_xml`` and ``kimi_k3_xml`` are not implemented and raise
NotImplementedError.
"""

import re
from typing import Any, Dict, List, Optional, Tuple

from . import nodes as N
from .ebnf import quote, tag_dispatch_body
from .errors import StructuralTagError, path_join

__all__ = ["xml_schema_expr", "XML_STYLES"]

_DSML = "\uff5cDSML\uff5c"  # ｜DSML｜


class _Style:
    """How one XML style writes an argument element."""

    def __init__(self, name: str, open_prefix: str, open_suffix: str, close: str,
                 typed: Optional[Tuple[str, str]] = None, ws_inside_open: bool = False,
                 ws_around_enum: bool = True, python_scalars: bool = False):
        self.name = name
        self.open_prefix = open_prefix  # text before the argument name
        self.open_suffix = open_suffix  # text after the name (for typed styles: before the type)
        self.close = close
        # (attribute text for string values, attribute text for other values), e.g.
        # ('" string="true">', '" string="false">') for DeepSeek.
        self.typed = typed
        self.ws_inside_open = ws_inside_open  # GLM: whitespace between </arg_key> and <arg_value>
        self.ws_around_enum = ws_around_enum
        # Qwen3-Coder / Qwen3.5 templates write top-level scalars with Jinja's |string, so a
        # boolean argument reads True / False and null reads None.
        self.python_scalars = python_scalars


XML_STYLES: Dict[str, _Style] = {
    "qwen_xml": _Style("qwen_xml", "<parameter=", ">", "</parameter>", python_scalars=True),
    "minimax_xml": _Style("minimax_xml", '<parameter name="', '">', "</parameter>"),
    "deepseek_xml": _Style(
        "deepseek_xml", f'<{_DSML}parameter name="', "", f"</{_DSML}parameter>",
        typed=('" string="true">', '" string="false">'), ws_around_enum=False,
    ),
    "deepseek_v4_1_xml": _Style(
        "deepseek_v4_1_xml", f'<{_DSML} parameter name="', "", f"</{_DSML} parameter>",
        typed=('" string="true">', '" string="false">'), ws_around_enum=False,
    ),
    "glm_xml": _Style("glm_xml", "<arg_key>", "</arg_key>", "</arg_value>", ws_inside_open=True),
}

_NAME_RULE = "[a-zA-Z_] [a-zA-Z0-9_]*"


def _lit(s: str) -> str:
    return quote(s) if s else '""'


def _seq(parts: List[str]) -> str:
    parts = [p for p in parts if p and p != '""']
    if not parts:
        return '""'
    return parts[0] if len(parts) == 1 else "(" + " ".join(parts) + ")"


class _Ctx:
    def __init__(self, conv, node: N.JSONSchema, style: _Style):
        self.conv = conv
        self.node = node
        self.style = style
        self.root = node.schema if isinstance(node.schema, dict) else {}
        mw = node.max_whitespace_cnt
        self.ws = "[ \\n\\r\\t]*" if mw is None else f"[ \\n\\r\\t]{{0,{mw}}}"

    # -- schema helpers -----------------------------------------------------------------

    def resolve(self, schema: Any, path: str, seen=()) -> Any:
        """Follows a local ``$ref`` (``#/$defs/...``, ``#/definitions/...``) for classification."""
        if isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
            ref = schema["$ref"]
            if ref in seen:
                return schema
            if ref == "#":
                return self.root
            if ref.startswith("#/"):
                cur: Any = self.root
                for part in ref[2:].split("/"):
                    part = part.replace("~1", "/").replace("~0", "~")
                    if isinstance(cur, dict) and part in cur:
                        cur = cur[part]
                    else:
                        raise StructuralTagError(path, f"cannot resolve $ref {ref!r}")
                if len(schema) == 1:
                    return self.resolve(cur, path, seen + (ref,))
        return schema

    def with_defs(self, schema: Any) -> Any:
        """``schema`` as a standalone document that still resolves the root's ``$ref``s."""
        if not isinstance(schema, dict) or not isinstance(self.root, dict):
            return schema
        extra = {k: self.root[k] for k in ("$defs", "definitions") if k in self.root and k not in schema}
        if not extra:
            return schema
        out = dict(schema)
        out.update(extra)
        return out

    def json(self, schema: Any, hint: str) -> str:
        return self.conv.json_value(self.node, self.with_defs(schema), hint)

    def raw_string(self) -> str:
        key = ("xml_string", self.style.close)
        cache = self.conv.__dict__.setdefault("_xml_cache", {})
        if key not in cache:
            cache[key] = self.conv.rules.add(
                "xml_string", tag_dispatch_body([], False, [self.style.close])
            )
        return cache[key]

    def any_value(self) -> str:
        """A value of an argument the schema does not describe: raw text, or a JSON array or
        object (upstream's ``xml_any``)."""
        key = ("xml_any", self.style.close)
        cache = self.conv.__dict__.setdefault("_xml_cache", {})
        if key not in cache:
            arr = self.conv.json_value(self.node, {"type": "array"}, "json_array", False)
            obj = self.conv.json_value(self.node, {"type": "object"}, "json_object", False)
            cache[key] = self.conv.rules.add("xml_any", f"{self.raw_string()} | {arr} | {obj}")
        return cache[key]

    # -- elements -----------------------------------------------------------------------

    def open_parts(self, name_expr: str) -> List[str]:
        st = self.style
        parts = [_lit(st.open_prefix), name_expr, _lit(st.open_suffix)]
        if st.ws_inside_open:
            parts += [self.ws, _lit("<arg_value>")]
        return parts

    def value_parts(self, schema: Any, path: str, hint: str) -> Tuple[str, List[str]]:
        """(kind, parts): kind is "string" (string attribute for typed styles) or "json"."""
        s = self.resolve(schema, path)
        ws, st = self.ws, self.style
        if s is True or s == {} or (isinstance(s, dict) and not _has_constraints(s)):
            return "any", []
        if s is False:
            raise StructuralTagError(path, "the property's schema is false: no value is allowed")
        if not isinstance(s, dict):
            raise StructuralTagError(path, "a property schema must be an object or a boolean")
        values = None
        if "enum" in s and isinstance(s["enum"], list):
            values = s["enum"]
        elif "const" in s:
            values = [s["const"]]
        if values is not None and values and all(isinstance(v, str) for v in values):
            alts = " | ".join(dict.fromkeys(_lit(v) for v in values))
            expr = self.conv.as_rule(f"({alts})" if len(values) > 1 else alts, hint)
            return "string", ([ws, expr, ws] if st.ws_around_enum else [expr])
        t = s.get("type")
        is_str = t == "string" or (isinstance(t, list) and "string" in t)
        if values is None and is_str and not any(k in s for k in _COMPOSITE):
            if "pattern" in s:
                expr = self.conv.rules.add(hint, f"Regex({quote(_search_regex(s['pattern']))})")
            elif "minLength" in s or "maxLength" in s:
                lo = int(s.get("minLength", 0))
                hi = s.get("maxLength")
                expr = self.conv.rules.add(
                    hint, f"[\\0-\\U0010ffff]{{{lo},{'' if hi is None else int(hi)}}}"
                )
            elif "format" in s and _format_regex(s["format"]) is not None:
                expr = self.conv.rules.add(hint, f"Regex({quote(_format_regex(s['format']))})")
            else:
                if "format" in s:
                    from .converter import warn_approximation

                    warn_approximation(path, f"format {s['format']!r} of a raw XML string value "
                                             "is not enforced")
                return "string", [self.raw_string()]
            return "string", ([ws, expr, ws] if st.ws_around_enum else [expr])
        value = self.json(schema, hint)
        if st.python_scalars:
            types = t if isinstance(t, list) else [t]
            extra = [lit for ty, lit in (("boolean", '"True" | "False"'), ("null", '"None"'))
                     if ty in types]
            if extra and values is None and not any(k in s for k in _COMPOSITE):
                value = self.conv.rules.add(hint, " | ".join([value] + extra))
        return "json", [ws, value, ws]

    def element(self, name: str, schema: Any, path: str, hint: str) -> str:
        st = self.style
        kind, value = self.value_parts(schema, path, hint)
        name_lit = _lit(name)
        if kind == "any":
            return self.generic_element(name_lit)
        if st.typed is not None:
            attr = st.typed[0] if kind == "string" else st.typed[1]
            parts = [self.ws, _lit(st.open_prefix + name + attr)] + value + [_lit(st.close)]
        else:
            parts = [self.ws] + self.open_parts(name_lit) + value + [_lit(st.close)]
        return _seq(parts)

    def generic_element(self, name_expr: str) -> str:
        st, ws = self.style, self.ws
        if st.typed is not None:
            other = self.conv.rules.add(
                "xml_non_string",
                " | ".join(self.conv.json_value(self.node, {"type": t}, "json_" + t, False)
                           for t in ("number", "boolean", "null", "array", "object")),
            )
            tail = (f"({_lit(st.typed[0])} {self.raw_string()} {_lit(st.close)} | "
                    f"{_lit(st.typed[1])} {ws} {other} {ws} {_lit(st.close)})")
            return _seq([ws, _lit(st.open_prefix), name_expr, tail])
        return _seq([ws] + self.open_parts(name_expr) + [ws, self.any_value(), ws, _lit(st.close)])

    def generic_name(self) -> str:
        cache = self.conv.__dict__.setdefault("_xml_cache", {})
        if "xml_variable_name" not in cache:
            cache["xml_variable_name"] = self.conv.rules.add("xml_variable_name", _NAME_RULE)
        return cache["xml_variable_name"]

    def bare_value(self, s: Dict[str, Any], path: str) -> str:
        """A root schema of another type than object (e.g. Kimi-K3 tags style each argument
        on its own): the value alone, as upstream xgrammar writes it -- a plain string is raw
        text up to the closing element, other types are JSON."""
        kind, parts = self.value_parts(s, path, "xml_value")
        if kind == "any":
            parts = [self.any_value()]
        return self.conv.as_rule(_seq(parts), "xml_value")

    def object_expr(self) -> str:
        node, schema, ws = self.node, self.node.schema, self.ws
        path = path_join(node.path, "json_schema")
        s = self.resolve(schema, path)
        if s is False:
            raise StructuralTagError(path, "the schema is false: no arguments are allowed")
        if isinstance(s, dict) and isinstance(s.get("type"), str) and s["type"] != "object":
            return self.bare_value(s, path)
        if s is True or not isinstance(s, dict) or (
            "properties" not in s and s.get("additionalProperties", True) is not False
            and s.get("type", "object") == "object"
        ):
            if isinstance(s, dict) and s.get("type", "object") != "object":
                raise StructuralTagError(path, f"style {self.style.name!r} needs an object schema")
            generic = self.generic_element(self.generic_name())
            rule = self.conv.as_rule(f"({generic})* {ws}", "xml_object")
            return rule
        t = s.get("type", "object")
        if t != "object":
            raise StructuralTagError(path_join(path, "type"),
                                     f"style {self.style.name!r} needs an object schema, got type {t!r}")
        props = s.get("properties") or {}
        if not isinstance(props, dict):
            raise StructuralTagError(path_join(path, "properties"), "must be an object")
        required = s.get("required") or []
        items: List[Tuple[str, bool]] = []
        for name, sub in props.items():
            el = self.element(name, sub, path_join(path, "properties", name), "xml_value")
            items.append((self.conv.as_rule(el, "xml_param"), name in required))
        missing = [r for r in required if r not in props]
        if missing and s.get("additionalProperties", False) is False:
            raise StructuralTagError(path_join(path, "required"),
                                     f"required properties without a schema: {missing}")
        addl = s.get("additionalProperties", False)
        extra = None
        if addl is not False:
            if addl is True or addl == {}:
                extra = self.generic_element(self.generic_name())
            else:
                extra = self.conv.as_rule(_seq([
                    ws, *self.open_parts(self.generic_name()),
                    *self.value_parts(addl, path_join(path, "additionalProperties"), "xml_value")[1],
                    _lit(self.style.close)]), "xml_additional")
        if node.any_order:
            alts = [e for e, _ in items] + ([extra] if extra else [])
            lo = max(len(required), int(s.get("minProperties", 0)))
            hi = s.get("maxProperties")
            if not alts:
                return self.conv.as_rule(ws, "xml_object")
            body = f"({' | '.join(alts)}){{{lo},{'' if hi is None else int(hi)}}} {ws}"
            return self.conv.as_rule(body, "xml_object")
        parts = [e if req else f"({e})?" for e, req in items]
        if extra:
            parts.append(f"({extra})*")
        parts.append(ws)
        return self.conv.as_rule(" ".join(parts), "xml_object")


_COMPOSITE = ("anyOf", "oneOf", "allOf", "not", "if", "$ref")
_CONSTRAINT_KEYS = {
    "type", "enum", "const", "properties", "items", "prefixItems", "pattern", "format",
    "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "required", "additionalProperties", "minItems", "maxItems", "anyOf", "oneOf",
    "allOf", "not", "$ref", "if", "patternProperties", "propertyNames", "minProperties",
    "maxProperties", "uniqueItems", "contains",
}


def _has_constraints(s: Dict[str, Any]) -> bool:
    return any(k in s for k in _CONSTRAINT_KEYS)


_RAW_FORMATS = ("date", "time", "date-time", "uuid", "ipv4", "email", "duration")


def _format_regex(name: Any) -> Optional[str]:
    """A whole-string regex for a JSON-schema ``format`` (the JSON-schema front end's
    table), for the formats whose regexes use plain ASCII classes only."""
    if name not in _RAW_FORMATS:
        return None
    try:
        from ..json_schema.formats import FORMATS
    except ImportError:
        return None
    rx = FORMATS.get(name)
    return rx if isinstance(rx, str) and "\\u" not in rx else None


def _search_regex(pattern: str) -> str:
    """A JSON-schema ``pattern`` (matches anywhere) as a whole-string regex."""
    start = pattern.startswith("^")
    end = pattern.endswith("$") and not re.search(r"(?<!\\)(\\\\)*\\\$$", pattern)
    core = pattern[1 if start else 0: len(pattern) - 1 if end else len(pattern)]
    return ("" if start else "[\\s\\S]*") + "(" + core + ")" + ("" if end else "[\\s\\S]*")


def xml_schema_expr(conv, node: N.JSONSchema) -> str:
    style = XML_STYLES.get(node.style)
    if style is None:
        raise NotImplementedError(
            f"{path_join(node.path, 'style')}: the json_schema style {node.style!r} is not "
            "supported by xgrammar2 yet (supported: json, " + ", ".join(XML_STYLES) + ")"
        )
    if node.excludes:
        raise NotImplementedError(
            f"{path_join(node.path, 'excludes')}: excludes in a json_schema format is not "
            "supported by xgrammar2 yet"
        )
    return _Ctx(conv, node, style).object_expr()
