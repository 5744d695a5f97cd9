"""XML-style tool arguments: the ``json_schema`` format with ``style`` other than ``json``.

Models such as Qwen3-Coder, MiniMax, DeepSeek-V3.2, GLM-4.7, Kimi-K3 and Cohere write each
argument of a tool call as its own XML-like element instead of one JSON object, e.g.
Qwen3-Coder::

    <parameter=city>
    Paris
    </parameter>
    <parameter=days>
    3
    </parameter>

The grammar follows upstream xgrammar 0.2.8's converters for these styles.

Parameter-list styles (one element per top-level argument; nested values are JSON):

==================  =====================================================================
``qwen_xml``        ``<parameter=KEY>VALUE</parameter>``
``minimax_xml``     ``<parameter name="KEY">VALUE</parameter>``
``deepseek_xml``    ``<｜DSML｜parameter name="KEY" string="true|false">VALUE</｜DSML｜parameter>``
``deepseek_v4_1_xml`` ``<｜DSML｜ parameter name="KEY" string="true|false">VALUE</｜DSML｜ parameter>``
``glm_xml``         ``<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>``
``kimi_k3_xml``     ``<|open|>argument key="KEY" type="TYPE"<|sep|>VALUE<|close|>argument<|sep|>``
==================  =====================================================================

* the arguments object's properties come in declared order (``any_order`` lifts it),
  required ones present, optional ones skippable, ``minProperties`` / ``maxProperties``
  counted; ``additionalProperties`` (true or a schema) allows further elements named by an
  identifier after the declared ones; a schema with no constraint (``true``, ``{}``,
  ``{"type": "object"}``) allows any elements;
* a value: a plain string is raw text up to the closing element; a string with ``pattern``
  or a known ``format`` matches it raw; ``enum`` / ``const`` values are written raw
  (strings) or as JSON; ``anyOf`` / ``oneOf`` / type lists choose per option; numbers,
  booleans, null, objects and arrays are JSON (strings inside them quoted); an unconstrained
  value is raw text or a JSON array or object. Whitespace may surround a value that is not
  raw text;
* DeepSeek's ``string`` attribute says whether the value is a raw string (``true``) or JSON
  (``false``), per ``anyOf`` option; Kimi-K3's ``type`` attribute is the value's JSON type
  (``number`` for integers too) when the schema fixes one, else any of the seven; Kimi-K3
  escapes ``&`` and ``"`` in key attributes;
* ``excludes`` (Kimi-K3's special markers) are kept out of raw strings, identifier keys and
  the JSON strings inside values (see :mod:`.excludes`); they may not start or end with
  whitespace.

Recursive styles (nested objects and arrays are elements too):

* ``cohere_xml``: ``<cofl:value name="KEY" type="raw|json|dict|list">VALUE</cofl:value>``
  per property (keys XML-escaped), ``type="dict"`` holding the nested object's properties,
  ``type="list"`` holding unnamed ``<cofl:value type=...>`` items back to back; raw strings
  are ``raw``, numbers / booleans / null ``json``; unions choose the type per option;
* ``minimax_m3_xml``: ``]<]minimax[>[<KEY>VALUE]<]minimax[>[</KEY>`` per property, arrays as
  ``]<]minimax[>[<item>...`` elements, strings raw up to the next namespace marker; fixed
  property names only (no ``additionalProperties``, no unconstrained values, no string
  ``pattern`` / ``format`` / length), as upstream.

Deliberate differences from upstream: a string ``pattern`` matches anywhere unless anchored
(JSON Schema's rule, as xgrammar2's JSON front end does; upstream matches the whole value);
``qwen_xml`` also takes Python's ``True`` / ``False`` / ``None`` for boolean and null values
(what the Qwen3-Coder and Qwen3.5 chat templates write); a root schema that is an array is
written as JSON.
"""

import json
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import nodes as N
from .ebnf import quote, tag_dispatch_body
from .errors import StructuralTagError, path_join, warn_approximation
from .excludes import IDENTIFIER, allowed_literal, allowed_text, char_class, excluding_rules

__all__ = ["xml_schema_expr", "XML_STYLES"]

_DSML = "\uff5cDSML\uff5c"  # ｜DSML｜
_M3_NS = "]<]minimax[>["
_COHERE_OPEN, _COHERE_CLOSE = "<cofl:value", "</cofl:value>"
_KIMI_TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")


class _Style:
    """How one parameter-list style writes an argument element."""

    def __init__(self, name: str, key_prefix: str, key_suffix: str, close: str,
                 value_prefix: str = "", typed: bool = False, kimi: bool = False,
                 python_scalars: bool = False):
        self.name = name
        self.key_prefix = key_prefix  # text before the argument name
        self.key_suffix = key_suffix  # text after it (Kimi-K3: before the type attribute)
        self.value_prefix = value_prefix  # GLM: <arg_value>, after optional whitespace
        self.close = close
        self.typed = typed  # DeepSeek: string="true|false" after the name
        self.kimi = kimi  # Kimi-K3: type="TYPE"<|sep|> after the name, escaped keys
        # Qwen3-Coder / Qwen3.5 templates write top-level scalars with Jinja's |string, so a
        # boolean argument reads True / False and null reads None.
        self.python_scalars = python_scalars


XML_STYLES: Dict[str, _Style] = {
    "qwen_xml": _Style("qwen_xml", "<parameter=", ">", "</parameter>", python_scalars=True),
    "minimax_xml": _Style("minimax_xml", '<parameter name="', '">', "</parameter>"),
    "deepseek_xml": _Style("deepseek_xml", f'<{_DSML}parameter name="', "", f"</{_DSML}parameter>",
                           typed=True),
    "deepseek_v4_1_xml": _Style("deepseek_v4_1_xml", f'<{_DSML} parameter name="', "",
                                f"</{_DSML} parameter>", typed=True),
    "glm_xml": _Style("glm_xml", "<arg_key>", "</arg_key>", "</arg_value>", value_prefix="<arg_value>"),
    "kimi_k3_xml": _Style("kimi_k3_xml", '<|open|>argument key="', '" type="',
                          "<|close|>argument<|sep|>", kimi=True),
}

_ALL_STYLES = tuple(XML_STYLES) + ("cohere_xml", "minimax_m3_xml")

# ---- schema helpers ---------------------------------------------------------------------

_ANNOTATIONS = frozenset(("title", "default", "description", "examples", "deprecated", "readOnly",
                          "writeOnly", "$comment", "$schema"))
_JSON_TYPES = ("string", "integer", "number", "boolean", "null", "array", "object")


def _kind(s: Any) -> str:
    """What upstream reads a schema as, in its order of precedence: ``$ref``, ``const``,
    ``enum``, ``anyOf``, ``oneOf``, ``allOf``, a type list (``types``), a type, an object or
    array by its keywords, else ``any``."""
    if s is True:
        return "any"
    if s is False:
        return "false"
    if not isinstance(s, dict):
        return "invalid"
    for k in ("$ref", "const", "enum", "anyOf", "oneOf", "allOf"):
        if k in s:
            return k
    if "type" in s:
        t = s["type"]
        if isinstance(t, list):
            return "types"
        return t if t in _JSON_TYPES else "invalid"
    if any(k in s for k in ("properties", "additionalProperties", "unevaluatedProperties")):
        return "object"
    if any(k in s for k in ("items", "prefixItems", "unevaluatedItems")):
        return "array"
    return "any"


def _is_basic(s: Any, t: str) -> bool:
    """Whether ``s`` is exactly ``{"type": t}`` up to annotations (upstream's cached rules)."""
    return isinstance(s, dict) and s.get("type") == t and all(k in _ANNOTATIONS for k in s if k != "type")


def _json_type(v: Any) -> Optional[str]:
    if isinstance(v, str):
        return "string"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if v is None:
        return "null"
    if isinstance(v, dict):
        return "object"
    if isinstance(v, list):
        return "array"
    return None


def _rendered_type(s: Any) -> Optional[str]:
    """The one JSON type a value of ``s`` is written as (``number`` for integers), or None
    when it may be several (any, unions, references)."""
    k = _kind(s)
    if k in ("string", "boolean", "null", "array", "object"):
        return k
    if k in ("integer", "number"):
        return "number"
    if k == "const":
        return _json_type(s["const"])
    if k == "enum" and isinstance(s["enum"], list) and s["enum"]:
        types = {_json_type(v) for v in s["enum"]}
        return types.pop() if len(types) == 1 and None not in types else None
    return None


def _json_text(v: Any) -> str:
    def norm(x):
        if isinstance(x, float) and x.is_integer() and abs(x) < 2 ** 63:
            return int(x)
        if isinstance(x, list):
            return [norm(y) for y in x]
        if isinstance(x, dict):
            return {k: norm(y) for k, y in x.items()}
        return x

    return json.dumps(norm(v), ensure_ascii=False, separators=(",", ":"))


def _xml_value(v: Any) -> str:
    """A literal value as written in XML: a string raw, anything else as JSON."""
    return v if isinstance(v, str) else _json_text(v)


def _lit(s: str) -> str:
    return quote(s) if s else '""'


def _seq(parts: Sequence[str]) -> str:
    parts = [p for p in parts if p and p != '""']
    if not parts:
        return '""'
    return parts[0] if len(parts) == 1 else "(" + " ".join(parts) + ")"


def _alt(parts: Sequence[str]) -> str:
    parts = list(dict.fromkeys(parts))
    return parts[0] if len(parts) == 1 else "(" + " | ".join(parts) + ")"


def _rep(expr: str, lo: int, hi: int) -> str:
    """``expr`` repeated ``lo`` to ``hi`` times (``hi == -1``: unbounded)."""
    if hi == 0:
        return '""'
    if (lo, hi) == (1, 1):
        return expr
    if (lo, hi) == (0, 1):
        return f"({expr})?"
    if (lo, hi) == (0, -1):
        return f"({expr})*"
    if (lo, hi) == (1, -1):
        return f"({expr})+"
    return f"({expr}){{{lo},{'' if hi == -1 else hi}}}"


def _format_expr(name: Any, path: str) -> Optional[str]:
    """An EBNF expression for a string ``format`` the JSON-schema front end enforces (its
    regex, read by its regex parser), or None for a format it does not know."""
    if not isinstance(name, str):
        return None
    try:
        from ..json_schema.formats import format_ast
    except ImportError:  # pragma: no cover - the front end ships with the package
        return None
    ast = format_ast(name)
    return None if ast is None else _ast_expr(ast, path_join(path, "format"))


def _pattern_expr(pattern: Any, path: str) -> str:
    """A JSON-schema ``pattern`` (ECMA-262, matching anywhere unless anchored) as an EBNF
    expression over the raw characters, read by the JSON-schema front end's regex parser."""
    if not isinstance(pattern, str):
        raise StructuralTagError(path_join(path, "pattern"), "must be a string")
    try:
        from ..json_schema import regex as rx
    except ImportError:  # pragma: no cover - the front end ships with the package
        return f"Regex({quote(_search_regex(pattern))})"
    try:
        full = rx.to_full_match(rx.parse(pattern))
    except rx.RegexSyntaxError as e:
        raise StructuralTagError(path_join(path, "pattern"), f"is not a valid ECMA-262 regex: {e}") from None
    except rx.RegexUnsupported as e:
        raise StructuralTagError(path_join(path, "pattern"), f"is not supported: {e}") from None
    if full is None:  # anchors inside: the regex engine's own reading
        return f"Regex({quote(_search_regex(pattern))})"
    return _ast_expr(full, path_join(path, "pattern"))


def _ast_expr(ast: Any, path: str) -> str:
    """EBNF for a regex AST of the JSON-schema front end (``set`` / ``cat`` / ``alt`` /
    ``rep`` / ``eps``, no assertions) over raw characters."""

    def emit(n) -> str:
        k = n[0]
        if k == "set":
            if not n[1]:
                raise StructuralTagError(path, "matches no string")
            return char_class(n[1])
        if k == "eps":
            return '""'
        if k == "cat":
            return _seq([emit(m) for m in n[1]])
        if k == "alt":
            return "(" + " | ".join(emit(m) for m in n[1]) + ")"
        if k == "rep":
            return _rep(emit(n[1]), n[2], -1 if n[3] is None else n[3])
        raise StructuralTagError(path, f"unsupported regex construct {k!r}")

    return emit(ast)


def _search_regex(pattern: str) -> str:
    """A JSON-schema ``pattern`` (matches anywhere) as a whole-string regex."""
    start = pattern.startswith("^")
    end = pattern.endswith("$") and not re.search(r"(?<!\\)(\\\\)*\\\$$", pattern)
    core = pattern[1 if start else 0: len(pattern) - 1 if end else len(pattern)]
    return ("" if start else "[\\s\\S]*") + "(" + core + ")" + ("" if end else "[\\s\\S]*")


# ---- shared machinery -------------------------------------------------------------------


class _Gen:
    """Rules for one ``json_schema`` node of an XML style."""

    style_name = ""

    def __init__(self, conv, node: N.JSONSchema):
        self.conv = conv
        self.node = node
        self.path = path_join(node.path, "json_schema")
        self.root = node.schema if isinstance(node.schema, dict) else {}
        mw = node.max_whitespace_cnt
        self.ws = "[ \\n\\r\\t]*" if mw is None else f"[ \\n\\r\\t]{{0,{mw}}}"
        self.excl = list(node.excludes)
        self._cache = conv.__dict__.setdefault("_xml_cache", {})
        self._refs: Dict[Any, str] = {}
        self._resolving: List[str] = []

    # -- rules ----------------------------------------------------------------------------

    def cached(self, what: str, make) -> str:
        """One rule per structural tag for ``what`` under this node's style and options."""
        key = (self.style_name, self.ws, tuple(self.excl), what)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = make()
        return hit

    def rule(self, hint: str, body: str) -> str:
        return self.conv.as_rule(body, hint)

    def forward(self, key: Any, hint: str, make) -> str:
        """A rule defined after it is named, so that ``make`` may refer back to it (a
        recursive ``$ref``)."""
        name = self._refs.get(key)
        if name is None:
            name = self._refs[key] = self.conv.rules.fresh(hint)
            self.conv.rules.define(name, make())
        return name

    def raw_text(self, ends: Sequence[str]) -> str:
        """Any text in which neither ``ends`` nor the node's excludes appear."""
        stops = list(dict.fromkeys(list(self.excl) + list(ends)))
        return self.cached("raw:" + "\0".join(ends),
                           lambda: self.conv.rules.add("xml_string", tag_dispatch_body([], False, stops)))

    def identifier(self) -> str:
        def make() -> str:
            if not self.excl:
                return self.conv.rules.add("xml_variable_name", "[a-zA-Z_] [a-zA-Z0-9_]*")
            base = self.conv.rules.fresh("xml_variable_name")
            root, rules = excluding_rules(IDENTIFIER, self.excl, base)
            if root is None:
                raise StructuralTagError(self.path, "the excludes leave no argument name")
            taken = {base}
            names = {base: base}
            for n, _ in rules:
                if n not in names:
                    names[n] = self.conv.rules.fresh(base + "_s")
                    taken.add(names[n])
            for n, body in rules:
                for old, new in sorted(names.items(), key=lambda kv: -len(kv[0])):
                    body = re.sub(r"(?<![\w.\-])" + re.escape(old) + r"(?![\w.\-])", new, body)
                self.conv.rules.define(names[n], body)
            return base

        return self.cached("identifier", make)

    def json(self, schema: Any, hint: str, strict: bool = True) -> str:
        return self.conv.json_value(self.node, self.with_defs(schema), hint, strict and self.node.strict)

    def with_defs(self, schema: Any) -> Any:
        """``schema`` as a standalone document that still resolves the root's ``$ref``s."""
        if not isinstance(schema, dict) or schema is self.root:
            return schema
        extra = {k: self.root[k] for k in ("$defs", "definitions") if k in self.root and k not in schema}
        if not extra:
            return schema
        out = dict(schema)
        out.update(extra)
        return out

    # -- schema helpers -------------------------------------------------------------------

    def deref(self, s: Dict[str, Any], path: str) -> Any:
        """The schema a ``$ref`` points to (local references only)."""
        ref = s["$ref"]
        if not isinstance(ref, str):
            raise StructuralTagError(path_join(path, "$ref"), "must be a string")
        if ref == "#":
            return self.node.schema
        if not ref.startswith("#/"):
            raise StructuralTagError(path_join(path, "$ref"),
                                     f"only local references (#/...) are supported, got {ref!r}")
        cur: Any = self.node.schema
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(cur, dict) and part in cur:
                cur = cur[part]
            elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
                cur = cur[int(part)]
            else:
                raise StructuralTagError(path_join(path, "$ref"), f"cannot resolve $ref {ref!r}")
        return cur

    def no_cycle(self, s: Dict[str, Any], path: str):
        ref = s["$ref"]
        if ref in self._resolving:
            raise StructuralTagError(path_join(path, "$ref"),
                                     f"the reference {ref!r} refers back to itself without a container")
        return _RefGuard(self._resolving, ref)

    def options(self, s: Dict[str, Any], k: str, path: str) -> List[Tuple[Any, str]]:
        """The alternatives of an ``anyOf`` / ``oneOf`` / type list, with their paths."""
        if k == "types":
            types = s["type"]
            if not types:
                raise StructuralTagError(path_join(path, "type"), "an empty type list allows no value")
            return [(dict(s, type=t), path) for t in types]
        opts = s[k]
        if not isinstance(opts, list) or not opts:
            raise StructuralTagError(path_join(path, k), "must be a non-empty array")
        return [(o, path_join(path, k, str(i))) for i, o in enumerate(opts)]

    # -- objects --------------------------------------------------------------------------

    def object_body(self, items: List[Tuple[str, bool]], extra: Optional[str], lo: int, hi: int,
                    any_order: bool, empty: str, hint: str) -> str:
        """Elements separated by whitespace: ``items`` (element, required) in declared order
        (any order with ``any_order``), then ``extra`` elements (additional properties), in
        all between ``lo`` and ``hi`` elements (``hi == -1``: no bound); ``empty`` (text of
        an object without elements) when none is needed."""
        ws = self.ws
        n = len(items)
        nreq = sum(1 for _, r in items if r)
        if n == 0:
            if extra is None or hi == 0:
                return empty
            body = _seq([ws, extra, _rep(_seq([ws, extra]), max(0, lo - 1), -1 if hi == -1 else hi - 1), ws])
            return _alt([body, empty]) if lo == 0 else body
        could_be_empty = nreq == 0 and lo == 0
        if hi == 0:
            return empty if could_be_empty else '""'
        if any_order:
            item = self.rule(hint + "_item", _alt([e for e, _ in items] + ([extra] if extra else [])))
            m = max(lo, nreq)
            body = _seq([ws, item, _rep(_seq([ws, item]), max(0, m - 1), -1 if hi == -1 else hi - 1), ws])
        elif lo == 0 and hi == -1 and empty == ws:
            # Upstream's rules (a tail rule per property) written flat: the same language
            # when an object without elements is the whitespace, with a rule less per property.
            parts = [_seq([ws, e]) if req else f"({_seq([ws, e])})?" for e, req in items]
            if extra is not None:
                parts.append(_rep(_seq([ws, extra]), 0, -1))
            return " ".join(parts + [ws])
        elif lo == 0 and hi == -1:
            body = self.ordered(items, extra, hint)
        else:
            body = self.counted(items, extra, lo, hi, hint)
        return _alt([body, empty]) if could_be_empty else body

    def ordered(self, items: List[Tuple[str, bool]], extra: Optional[str], hint: str) -> str:
        ws, n = self.ws, len(items)
        tails = ['""'] * n
        if extra is not None:
            tails[-1] = self.rule(hint + "_rest", _rep(_seq([ws, extra]), 0, -1))
        for i in range(n - 2, -1, -1):
            nxt, req = items[i + 1]
            with_next = _seq([ws, nxt, tails[i + 1]])
            tails[i] = self.rule(hint + "_part", with_next if req else _alt([tails[i + 1], with_next]))
        starts = []
        for i, (e, req) in enumerate(items):
            starts.append(_seq([e, tails[i]]))
            if req:
                break
        if extra is not None and not any(r for _, r in items):
            starts.append(_seq([extra, tails[-1]]))
        return _seq([ws, _alt(starts), ws])

    def counted(self, items: List[Tuple[str, bool]], extra: Optional[str], lo: int, hi: int,
                hint: str) -> str:
        ws, n = self.ws, len(items)
        memo: Dict[Tuple[int, int], Optional[str]] = {}

        def tail(i: int, c: int) -> Optional[str]:
            """After the declared property ``i`` (emitted or skipped), ``c`` emitted."""
            if (i, c) in memo:
                return memo[(i, c)]
            if i == n - 1:
                if extra is None:
                    res = '""' if c >= lo and (hi == -1 or c <= hi) else None
                else:
                    more = -1 if hi == -1 else hi - c
                    need = max(0, lo - c)
                    res = None if more != -1 and more < need else (
                        '""' if more == 0 else self.rule(hint + "_rest", _rep(_seq([ws, extra]), need, more)))
            else:
                e, req = items[i + 1]
                alts = []
                if not req:
                    t = tail(i + 1, c)
                    if t is not None:
                        alts.append(t)
                if hi == -1 or c + 1 <= hi:
                    t = tail(i + 1, c + 1)
                    if t is not None:
                        alts.append(_seq([ws, e, t]))
                res = self.rule(hint + "_part", _alt(alts)) if alts else None
            memo[(i, c)] = res
            return res

        starts = []
        for i, (e, req) in enumerate(items):
            t = tail(i, 1)
            if t is not None:
                starts.append(_seq([e, t]))
            if req:
                break
        if extra is not None and not any(r for _, r in items):
            starts.append(_seq([extra, _rep(_seq([ws, extra]), max(0, lo - 1), -1 if hi == -1 else hi - 1)]))
        if not starts:
            raise StructuralTagError(self.path, "no set of properties satisfies the property counts")
        return _seq([ws, _alt(starts), ws])

    def object_parts(self, s: Dict[str, Any], path: str):
        """(properties, required, additional schema or None, minProperties, maxProperties)."""
        props = s.get("properties") or {}
        if not isinstance(props, dict):
            raise StructuralTagError(path_join(path, "properties"), "must be an object")
        required = s.get("required") or []
        if not isinstance(required, list):
            raise StructuralTagError(path_join(path, "required"), "must be an array")
        if "additionalProperties" in s:
            addl = s["additionalProperties"]
        elif "unevaluatedProperties" in s:
            addl = s["unevaluatedProperties"]
        else:
            # strict: no properties beyond the declared ones (JSON schema's default otherwise)
            addl = not self.node.strict
        if addl is False:
            addl = None
        lo = s.get("minProperties", 0)
        hi = s.get("maxProperties", -1)
        if not isinstance(lo, int) or lo < 0:
            raise StructuralTagError(path_join(path, "minProperties"), "must be a non-negative integer")
        if not isinstance(hi, int) or hi < -1:
            raise StructuralTagError(path_join(path, "maxProperties"), "must be a non-negative integer")
        return props, set(required), addl, lo, hi

    def extra_keys(self, s: Dict[str, Any], props: Dict[str, Any], addl: Any, path: str,
                   plain_key: str, excluding_key) -> List[Tuple[str, Any, str]]:
        """The further elements an object allows: ``(key expression, value schema, path)``
        per kind, as upstream builds them: one per ``patternProperties`` pattern (the key a
        raw string matching it; with ``additionalProperties`` also any key), else
        ``propertyNames`` (the key a raw string of that schema; the values
        ``additionalProperties``, or anything when no property is declared), else
        ``additionalProperties`` under any key not declared (``excluding_key()``)."""
        pattern_props = s.get("patternProperties")
        names = s.get("propertyNames")
        if isinstance(pattern_props, dict) and pattern_props:
            out = [(self.key_value({"type": "string", "pattern": p}, path_join(path, "patternProperties", p)),
                    sub, path_join(path, "patternProperties", p)) for p, sub in pattern_props.items()]
            if addl is not None:
                out.append((plain_key, addl, path_join(path, "additionalProperties")))
            return out
        if isinstance(names, (dict, bool)) and names is not True and (addl is not None or not props):
            if names is False:
                return []
            key_schema = names if "type" in names else dict(names, type="string")
            key = self.key_value(key_schema, path_join(path, "propertyNames"))
            return [(key, addl if addl is not None else True, path_join(path, "additionalProperties"))]
        if addl is None:
            return []
        return [(excluding_key() if props else plain_key, addl, path_join(path, "additionalProperties"))]

    def key_value(self, schema: Any, path: str) -> str:  # pragma: no cover - overridden
        raise NotImplementedError


class _RefGuard:
    def __init__(self, stack: List[str], ref: str):
        self.stack, self.ref = stack, ref

    def __enter__(self):
        self.stack.append(self.ref)

    def __exit__(self, *exc):
        self.stack.pop()


# ---- parameter-list styles ----------------------------------------------------------------


class _ParamList(_Gen):
    def __init__(self, conv, node: N.JSONSchema, style: _Style):
        super().__init__(conv, node)
        self.style = style
        self.style_name = style.name

    def close_text(self) -> str:
        return self.raw_text([self.style.close])

    # -- the arguments object (level 0) ---------------------------------------------------

    def root_expr(self) -> str:
        return self.level0(self.node.schema, self.path)

    def level0(self, s: Any, path: str) -> str:
        k = _kind(s)
        if k == "false":
            raise StructuralTagError(path, "the schema is false: no arguments are allowed")
        if k == "any" or _is_basic(s, "object"):
            return self.any_object()
        if k == "$ref":
            with self.no_cycle(s, path):
                return self.level0(self.deref(s, path), path)
        if k == "object":
            return self.params(s, path)
        if k == "const" and isinstance(s["const"], dict):
            items = []
            for name, v in s["const"].items():
                el = self.property(name, {"const": v}, path_join(path, "const", name), "xml_param")
                if el is None:
                    raise StructuralTagError(path, f"the argument name {name!r} contains an excluded string")
                items.append((el, True))
            return self.rule("xml_object", self.object_body(items, None, 0, -1, False, self.ws, "xml_object"))
        if k in ("anyOf", "oneOf", "types"):
            return self.rule("xml_object", _alt([self.level0(o, p) for o, p in self.options(s, k, path)]))
        if k == "allOf":
            if isinstance(s["allOf"], list) and len(s["allOf"]) == 1:
                return self.level0(s["allOf"][0], path_join(path, "allOf", "0"))
            return self.any_object()
        if k == "enum" and isinstance(s["enum"], list) and any(isinstance(v, dict) for v in s["enum"]):
            alts = []
            for v in s["enum"]:
                try:
                    alts.append(self.level0({"const": v}, path))
                except _NoValue:
                    continue
            if not alts:
                raise StructuralTagError(path, "every value of the enum contains an excluded string")
            return self.rule("xml_object", _alt(alts))
        if k == "array":  # upstream writes the items' strings raw; here the array is JSON
            return self.json(s, "xml_value")
        # Any other root (the whole arguments one value, e.g. Kimi-K3 tags each argument on
        # its own): the value alone.
        return self.value(s, path, "xml_value")[0]

    def any_object(self) -> str:
        def make() -> str:
            el = self.other_property(self.identifier(), True, self.path)
            return self.rule("xml_object", self.object_body([], el, 0, -1, False, self.ws, "xml_object"))

        return self.cached("any_object", make)

    def params(self, s: Dict[str, Any], path: str) -> str:
        props, required, addl, lo, hi = self.object_parts(s, path)
        items = []
        for name, sub in props.items():
            try:
                el = self.property(name, sub, path_join(path, "properties", name), "xml_value")
            except _NoValue:  # every value excluded: the property cannot appear
                el = None
            if el is None:  # a name with an excluded string: the property cannot appear
                if name in required:
                    raise StructuralTagError(path_join(path, "properties", name),
                                             "a required argument name contains an excluded string")
                continue
            items.append((self.rule("xml_param", el), name in required))
        missing = [r for r in required if r not in props]
        if missing and addl is None:
            raise StructuralTagError(path_join(path, "required"),
                                     f"required properties without a schema: {missing}")
        extra = None
        if addl is not None or "patternProperties" in s or "propertyNames" in s:
            others = [self.other_property(key, sub, p) for key, sub, p in self.extra_keys(
                s, props, addl, path, self.identifier(), self.identifier)]
            extra = self.rule("xml_additional", _alt(others)) if others else None
        body = self.object_body(items, extra, lo, hi, self.node.any_order, self.ws, "xml_object")
        return self.rule("xml_object", body)

    def key_value(self, schema: Any, path: str) -> str:
        return self.value(schema, path, "xml_key")[0]

    # -- elements -------------------------------------------------------------------------

    def property(self, name: str, schema: Any, path: str, hint: str) -> Optional[str]:
        """The element of a declared argument (None when its name is excluded)."""
        st = self.style
        key = name.replace("&", "&amp;").replace('"', "&quot;") if st.kimi else name
        if not allowed_text(key, self.excl):
            return None
        if st.typed:
            return _seq([_lit(st.key_prefix + key), self.typed_suffix(schema, path, hint)])
        return self.element([_lit(st.key_prefix + key)], schema, path, hint)

    def other_property(self, key_expr: str, schema: Any, path: str) -> str:
        """The element of an additional argument named by ``key_expr``."""
        st = self.style
        if st.typed:
            return _seq([_lit(st.key_prefix), key_expr, self.typed_suffix(schema, path, "xml_value")])
        return self.element([_lit(st.key_prefix), key_expr], schema, path, "xml_value")

    def element(self, head: List[str], schema: Any, path: str, hint: str) -> str:
        st, ws = self.style, self.ws
        parts = list(head)
        if st.kimi:
            t = _rendered_type(schema)
            types = _lit(t) if t is not None else self.cached(
                "kimi_types", lambda: self.rule("xml_type", _alt([_lit(x) for x in _KIMI_TYPES])))
            parts += [_lit(st.key_suffix), types, _lit('"<|sep|>')]
        else:
            parts.append(_lit(st.key_suffix))
        if st.value_prefix:
            parts += [ws, _lit(st.value_prefix)]
        value, raw = self.value(schema, path, hint)
        parts += [value] if raw else [ws, value, ws]
        parts.append(_lit(st.close))
        return _seq(parts)

    def typed_suffix(self, schema: Any, path: str, hint: str) -> str:
        """DeepSeek: ``" string="true">RAW`` or ``" string="false">`` JSON, then the closing
        element; unions get one alternative per option."""
        st, ws = self.style, self.ws

        def wrap(value: str, is_string: bool) -> str:
            if is_string:
                return _seq([_lit('" string="true">'), value, _lit(st.close)])
            return _seq([_lit('" string="false">'), ws, value, ws, _lit(st.close)])

        k = _kind(schema)
        if k == "$ref":
            return self.forward(("dsml", schema["$ref"]), hint + "_dsml_param",
                                lambda: self.typed_suffix(self.deref(schema, path), path, hint))
        t = _rendered_type(schema)
        if t is not None:
            return wrap(self.value(schema, path, hint)[0], t == "string")
        if k in ("anyOf", "oneOf", "types"):
            opts = self.options(schema, k, path)
        elif k == "allOf" and isinstance(schema["allOf"], list) and len(schema["allOf"]) == 1:
            opts = [(schema["allOf"][0], path_join(path, "allOf", "0"))]
        elif k == "enum" and isinstance(schema["enum"], list) and schema["enum"]:
            opts = [({"const": v}, path) for v in schema["enum"]]
        else:
            opts = []
        if not opts:
            def make() -> str:
                other = _alt([self.json({"type": t}, "json_" + t, False)
                              for t in ("number", "boolean", "null", "array", "object")])
                return _alt([wrap(self.close_text(), True), wrap(self.rule("xml_non_string", other), False)])

            return self.cached("dsml_any", lambda: self.rule("xml_any_param", make()))
        alts = []
        for o, p in opts:
            try:
                alts.append(self.typed_suffix(o, p, hint))
            except _NoValue:
                continue
        if not alts:
            raise StructuralTagError(path, "no value of the schema is allowed")
        return _alt(alts)

    # -- values (level 1) -----------------------------------------------------------------

    def any_value(self) -> str:
        """An argument value the schema does not describe: raw text, or a JSON array or
        object."""
        def make() -> str:
            arr = self.json({"type": "array"}, "json_array", False)
            obj = self.json({"type": "object"}, "json_object", False)
            return self.rule("xml_any", _alt([self.close_text(), arr, obj]))

        return self.cached("any_value", make)

    def value(self, s: Any, path: str, hint: str) -> Tuple[str, bool]:
        """(expression, whether it is the raw-text rule) for an argument's value."""
        k = _kind(s)
        if k == "false":
            raise StructuralTagError(path, "the property's schema is false: no value is allowed")
        if k == "any":
            return self.any_value(), False
        if k == "$ref":
            with self.no_cycle(s, path):
                return self.value(self.deref(s, path), path, hint)
        if k in ("const", "enum"):
            vals = [s["const"]] if k == "const" else s["enum"]
            if not isinstance(vals, list) or not vals:
                raise StructuralTagError(path_join(path, k), "must be a non-empty array")
            alts = [_lit(_xml_value(v)) for v in vals if allowed_literal(v, self.excl, raw_string=True)]
            if not alts:
                raise _NoValue(path, "every value of the enum contains an excluded string")
            return self.rule(hint, _alt(alts)), False
        if k in ("anyOf", "oneOf", "types"):
            alts = []
            for o, p in self.options(s, k, path):
                try:
                    alts.append(self.value(o, p, hint)[0])
                except _NoValue:
                    continue
            if not alts:
                raise StructuralTagError(path, "no value of the schema is allowed")
            return self.rule(hint, _alt(alts)), False
        if k == "allOf":
            if isinstance(s["allOf"], list) and len(s["allOf"]) == 1:
                return self.value(s["allOf"][0], path_join(path, "allOf", "0"), hint)[0], False
            return self.any_value(), False
        if k == "string":
            return self.string_value(s, path, hint)
        if k in ("integer", "number", "boolean", "null"):
            value = self.json(s, hint)
            if self.style.python_scalars and k in ("boolean", "null"):
                value = self.rule(hint, _alt([value, '"True" | "False"' if k == "boolean" else '"None"']))
            return value, False
        # objects and arrays (and invalid schemas, which the JSON front end reports)
        return self.json(s, hint), False

    def string_value(self, s: Dict[str, Any], path: str, hint: str) -> Tuple[str, bool]:
        fmt = s.get("format")
        fx = _format_expr(fmt, path) if fmt is not None else None
        if fx is not None:
            return self.rule(hint, fx), False
        if "pattern" in s:
            return self.rule(hint, _pattern_expr(s["pattern"], path)), False
        lo, hi = s.get("minLength", 0), s.get("maxLength")
        bounded = lo != 0 or hi is not None
        if not self.excl and (bounded or fmt is not None):
            if fmt is not None and not bounded:
                warn_approximation(path, f"format {fmt!r} of a raw XML string value is not enforced")
            return self.rule(hint, f"[\\0-\\U0010ffff]{{{int(lo)},{'' if hi is None else int(hi)}}}"), False
        if bounded:
            warn_approximation(path, "minLength / maxLength of a string are not applied together "
                                     "with the json_schema format's excludes")
        return self.close_text(), True


class _NoValue(StructuralTagError):
    """An enum / const whose every value is excluded (an alternative that drops out)."""


def _item_bounds(s: Dict[str, Any], path: str) -> Tuple[int, int]:
    """(minItems, maxItems or -1); a maximum beyond 2**31 - 1 is no bound (as upstream)."""
    lo, hi = s.get("minItems", 0), s.get("maxItems")
    if not isinstance(lo, int) or lo < 0:
        raise StructuralTagError(path_join(path, "minItems"), "must be a non-negative integer")
    if lo > 2 ** 31 - 1:
        raise StructuralTagError(path_join(path, "minItems"),
                                 f"minItems and minContains must not exceed 2147483647 (got {lo})")
    if hi is not None and (not isinstance(hi, int) or hi < 0):
        raise StructuralTagError(path_join(path, "maxItems"), "must be a non-negative integer")
    return lo, -1 if hi is None or hi > 2 ** 31 - 1 else hi


# ---- cohere_xml -----------------------------------------------------------------------------


_COHERE_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}


def _cohere_key(name: str, path: str) -> str:
    if "\0" in name:
        raise StructuralTagError(path, "Cohere property names cannot contain NUL")
    return "".join(_COHERE_ENTITIES.get(ch, ch) for ch in name)


def _cohere_type(v: Any) -> str:
    return "raw" if isinstance(v, str) else "json"


class _Cohere(_Gen):
    style_name = "cohere_xml"

    def root_expr(self) -> str:
        s = self.node.schema
        if _kind(s) == "any" or _is_basic(s, "object"):
            return self.dict_any()
        return self.value(s, self.path, "root")

    # -- shared rules -----------------------------------------------------------------------

    def raw(self) -> str:
        return self.raw_text([_COHERE_CLOSE])

    def key(self) -> str:
        return self.cached("cohere_key", lambda: self.conv.rules.add(
            "cohere_key", '([^\\x00"&<>] | "&amp;" | "&lt;" | "&gt;" | "&quot;")+'))

    def any_scalar(self) -> str:
        return self.cached("cohere_any_scalar", lambda: self.conv.rules.add("cohere_any_scalar", _alt(
            [self.json({"type": t}, "json_" + t, False) for t in ("number", "boolean", "null")])))

    def any_suffix(self) -> str:
        """The type attribute, value and closing tag of an unconstrained value: each type
        with its own kind of value."""
        def make() -> str:
            name = self.conv.rules.fresh("cohere_any_value")
            self._cache[("cohere_xml", self.ws, (), "cohere_any_suffix")] = name
            body = _alt([self.with_type("raw", self.raw()), self.with_type("json", self.any_scalar()),
                         self.with_type("dict", self.dict_any()), self.with_type("list", self.list_any())])
            self.conv.rules.define(name, body)
            return name

        return self.cached("cohere_any_suffix", make)

    def dict_any(self) -> str:
        """A dict of any values under any keys."""
        def make() -> str:
            name = self.conv.rules.fresh("xml_object")
            self._cache[("cohere_xml", self.ws, (), "cohere_dict_any")] = name
            el = _seq([_lit(_COHERE_OPEN + ' name="'), self.key(), _lit('"'), self.any_suffix()])
            self.conv.rules.define(name, self.object_body([], el, 0, -1, False, self.ws, "xml_object"))
            return name

        return self.cached("cohere_dict_any", make)

    def list_any(self) -> str:
        def make() -> str:
            name = self.conv.rules.fresh("cohere_any_list")
            self._cache[("cohere_xml", self.ws, (), "cohere_list_any")] = name
            self.conv.rules.define(name, _rep(_seq([_lit(_COHERE_OPEN), self.any_suffix()]), 0, -1))
            return name

        return self.cached("cohere_list_any", make)

    def value_any(self) -> str:
        return self.cached("cohere_value_any", lambda: self.rule(
            "xml_any", _alt([self.raw(), self.any_scalar(), self.dict_any(), self.list_any()])))

    def with_type(self, type_expr: str, value: str) -> str:
        text = value if value == self.raw() else _seq([self.ws, value, self.ws])
        return _seq([_lit(' type="' + type_expr + '">'), text, _lit(_COHERE_CLOSE)])

    # -- parameters -------------------------------------------------------------------------

    def param(self, name_part: List[str], schema: Any, path: str, hint: str) -> str:
        return _seq([_lit(_COHERE_OPEN)] + name_part + [self.suffix(schema, path, hint)])

    def suffix(self, s: Any, path: str, hint: str) -> str:
        k = _kind(s)
        if k == "$ref":
            return self.forward(("suffix", s["$ref"]), hint + "_cohere_param",
                                lambda: self.suffix(self.deref(s, path), path, hint))
        if k == "any" or (k == "allOf" and not (isinstance(s["allOf"], list) and len(s["allOf"]) == 1)):
            return self.any_suffix()
        opts = None
        if k in ("anyOf", "oneOf", "types"):
            opts = self.options(s, k, path)
        elif k == "allOf":
            opts = [(s["allOf"][0], path_join(path, "allOf", "0"))]
        elif k == "enum" and isinstance(s["enum"], list) and s["enum"] and \
                len({_cohere_type(v) for v in s["enum"]}) > 1:
            opts = [({"const": v}, path) for v in s["enum"]]
        if opts is not None:
            return _alt([self.suffix(o, p, hint) for o, p in opts])
        if k == "string":
            t = "raw"
        elif k == "object":
            t = "dict"
        elif k == "array":
            t = "list"
        elif k == "const":
            t = _cohere_type(s["const"])
        elif k == "enum":
            vals = s["enum"] if isinstance(s["enum"], list) and s["enum"] else [0]
            t = _cohere_type(vals[0])
        else:
            t = "json"
        return self.with_type(t, self.value(s, path, hint))

    # -- values -----------------------------------------------------------------------------

    def value(self, s: Any, path: str, hint: str) -> str:
        k = _kind(s)
        if k == "false":
            raise StructuralTagError(path, "the schema is false: no value is allowed")
        if k == "any":
            return self.value_any()
        if _is_basic(s, "string"):
            return self.raw()
        if _is_basic(s, "object"):
            return self.dict_any()
        if k == "$ref":
            return self.forward(("value", s["$ref"]), hint + "_ref",
                                lambda: self.value(self.deref(s, path), path, hint))
        if k in ("const", "enum"):
            vals = [s["const"]] if k == "const" else s["enum"]
            if not isinstance(vals, list) or not vals:
                raise StructuralTagError(path_join(path, k), "must be a non-empty array")
            return self.rule(hint, _alt([_lit(_xml_value(v)) for v in vals]))
        if k in ("anyOf", "oneOf", "types"):
            return self.rule(hint, _alt([self.value(o, p, hint) for o, p in self.options(s, k, path)]))
        if k == "allOf":
            if isinstance(s["allOf"], list) and len(s["allOf"]) == 1:
                return self.value(s["allOf"][0], path_join(path, "allOf", "0"), hint)
            return self.value_any()
        if k == "string":
            fmt = s.get("format")
            fx = _format_expr(fmt, path) if fmt is not None else None
            if fx is not None:
                return self.rule(hint, fx)
            if "pattern" in s:
                return self.rule(hint, _pattern_expr(s["pattern"], path))
            lo, hi = s.get("minLength", 0), s.get("maxLength")
            if lo != 0 or hi is not None:
                return self.rule(hint, f"[\\0-\\U0010ffff]{{{int(lo)},{'' if hi is None else int(hi)}}}")
            if fmt is None:
                return self.raw()
            return self.json({"type": "string"}, hint)  # an unknown format: a JSON string, as upstream
        if k in ("integer", "number", "boolean", "null"):
            return self.json(s, hint)
        if k == "object":
            return self.dict_value(s, path, hint)
        if k == "array":
            return self.list_value(s, path, hint)
        return self.json(s, hint)  # invalid: the JSON front end reports it

    def dict_value(self, s: Dict[str, Any], path: str, hint: str) -> str:
        props, required, addl, lo, hi = self.object_parts(s, path)
        items = []
        for name, sub in props.items():
            p = path_join(path, "properties", name)
            name_part = [_lit(' name="' + _cohere_key(name, p) + '"')]
            items.append((self.rule(hint + "_param", self.param(name_part, sub, p, hint + "_prop")),
                          name in required))
        others = [self.param([_lit(' name="'), key, _lit('"')], sub, p, hint + "_addl")
                  for key, sub, p in self.extra_keys(s, props, addl, path, self.key(),
                                                     lambda: self.key_excluding(list(props), hint))]
        extra = self.rule(hint + "_additional", _alt(others)) if others else None
        return self.rule(hint, self.object_body(items, extra, lo, hi, self.node.any_order, self.ws, hint))

    def key_value(self, schema: Any, path: str) -> str:
        return self.value(schema, path, "cohere_key")

    def list_value(self, s: Dict[str, Any], path: str, hint: str) -> str:
        prefix = s.get("prefixItems") or []
        items = [self.param([], sub, path_join(path, "prefixItems", str(i)), hint + "_item")
                 for i, sub in enumerate(prefix)]
        if "items" in s:
            add = s["items"]
        elif "unevaluatedItems" in s:
            add = s["unevaluatedItems"]
        else:
            add = False
        extra = None if add is False else self.rule(
            hint + "_items", self.param([], add, path_join(path, "items"), hint + "_item"))
        lo, hi = _item_bounds(s, path)
        if not items:
            if extra is None or hi == 0:
                return '""'
            return self.rule(hint, _rep(extra, lo, hi))
        body = _seq(items)
        if extra is not None:
            body = _seq([body, _rep(extra, max(0, lo - len(items)), -1 if hi == -1 else hi - len(items))])
        return self.rule(hint, body)

    def key_excluding(self, names: List[str], hint: str) -> str:
        """A key (XML-escaped) that is not one of ``names``."""
        trie: Dict[str, Any] = {}
        for n in names:
            node = trie
            for ch in n:
                node = node.setdefault(ch, {})
            if n:
                node[None] = True
        key = self.key()

        def body(node: Dict[str, Any], depth: int) -> str:
            children = sorted(c for c in node if c is not None)
            alts = []
            if depth > 0 and None not in node:
                alts.append('""')
            rest = _alt(['""', key])
            excluded = {"\0", "&", "<", ">", '"'} | set(children)
            cls = "[^" + "".join(_class_char(c) for c in sorted(excluded)) + "]"
            alts.append(_seq([cls, rest]))
            for ch, ent in _COHERE_ENTITIES.items():
                if ch not in node:
                    alts.append(_seq([_lit(ent), rest]))
            for ch in children:
                child = self.rule(hint + "_key", body(node[ch], depth + 1))
                alts.append(_seq([_lit(_COHERE_ENTITIES.get(ch, ch)), child]))
            return _alt(alts)

        return self.rule(hint + "_cohere_addl_key", body(trie, 0))


def _class_char(ch: str) -> str:
    c = ord(ch)
    if ch in "\\]-^[":
        return "\\" + ch
    if 0x20 < c < 0x7F:
        return ch
    if c <= 0xFF:
        return "\\x%02x" % c
    if c <= 0xFFFF:
        return "\\u%04x" % c
    return "\\U%08x" % c


# ---- minimax_m3_xml -------------------------------------------------------------------------


class _MiniMaxM3(_Gen):
    style_name = "minimax_m3_xml"

    def root_expr(self) -> str:
        return self.value(self.node.schema, self.path, "root")

    def not_fixed_names(self, path: str, keyword: str) -> StructuralTagError:
        return StructuralTagError(path, "minimax_m3_xml requires fixed object property names; "
                                        "additionalProperties, unevaluatedProperties, patternProperties, "
                                        f"and propertyNames are not supported (found {keyword})")

    def string(self) -> str:
        return self.cached("m3_string", lambda: self.conv.rules.add(
            "basic_string", tag_dispatch_body([], False, [_M3_NS])))

    def element(self, name: str, value: str, path: str) -> str:
        if not name or name.startswith("/") or ">" in name or not name.strip(" \t\n\r\f\v"):
            raise StructuralTagError(path, f"invalid minimax_m3_xml element name {name!r}")
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise StructuralTagError(path, f"invalid minimax_m3_xml element name {name!r}: not valid "
                                           "Unicode (a lone surrogate)") from None
        return _seq([_lit(f"{_M3_NS}<{name}>"), value, _lit(f"{_M3_NS}</{name}>")])

    def literal(self, v: Any, path: str) -> str:
        if isinstance(v, str):
            if _M3_NS in v:
                raise StructuralTagError(path, "a minimax_m3_xml string literal cannot contain the namespace marker")
            return _lit(v)
        if isinstance(v, dict):
            return _seq([self.element(k, self.literal(x, path), path) for k, x in v.items()])
        if isinstance(v, list):
            return _seq([self.element("item", self.literal(x, path), path) for x in v])
        return _lit(_json_text(v))

    def value(self, s: Any, path: str, hint: str) -> str:
        k = _kind(s)
        if k == "false":
            raise StructuralTagError(path, "the schema is false: no value is allowed")
        if k == "any" or (k == "allOf" and not (isinstance(s["allOf"], list) and len(s["allOf"]) == 1)):
            raise StructuralTagError(path, "minimax_m3_xml does not support unconstrained schemas "
                                           "(a value here may be anything)")
        if k == "$ref":
            return self.forward(("value", s["$ref"]), hint + "_ref",
                                lambda: self.value(self.deref(s, path), path, hint))
        if k in ("const", "enum"):
            vals = [s["const"]] if k == "const" else s["enum"]
            if not isinstance(vals, list) or not vals:
                raise StructuralTagError(path_join(path, k), "must be a non-empty array")
            return self.rule(hint, _alt([self.literal(v, path) for v in vals]))
        if k in ("anyOf", "oneOf", "types"):
            return self.rule(hint, _alt([self.value(o, p, hint) for o, p in self.options(s, k, path)]))
        if k == "allOf":
            return self.value(s["allOf"][0], path_join(path, "allOf", "0"), hint)
        if k == "string":
            if ("pattern" in s or _format_expr(s.get("format"), path) is not None
                    or s.get("minLength", 0) != 0 or "maxLength" in s):
                raise StructuralTagError(
                    path, "String pattern, recognized format, and length constraints are not supported "
                          "by minimax_m3_xml because they cannot be combined with the namespace-marker "
                          "exclusion")
            return self.string()
        if k in ("integer", "number", "boolean", "null"):
            return self.json(s, hint)
        if k == "object":
            return self.object_value(s, path, hint)
        if k == "array":
            return self.array_value(s, path, hint)
        return self.json(s, hint)

    def object_value(self, s: Dict[str, Any], path: str, hint: str) -> str:
        for key in ("patternProperties", "propertyNames"):
            if key in s:
                raise self.not_fixed_names(path_join(path, key), key)
        for key in ("additionalProperties", "unevaluatedProperties"):
            if s.get(key, False) is not False:
                raise self.not_fixed_names(path_join(path, key), key)
        if not self.node.strict and "additionalProperties" not in s and "unevaluatedProperties" not in s:
            raise self.not_fixed_names(path, "additionalProperties (not strict: other properties "
                                             "are allowed unless it is false)")
        props, required, _, lo, hi = self.object_parts(s, path)
        missing = [r for r in required if r not in props]
        if missing:
            raise StructuralTagError(path_join(path, "required"), f"required properties without a schema: {missing}")
        items = []
        for name, sub in props.items():
            p = path_join(path, "properties", name)
            items.append((self.rule(hint + "_param", self.element(name, self.value(sub, p, hint + "_prop"), p)),
                          name in required))
        return self.rule(hint, self.object_body(items, None, lo, hi, self.node.any_order, '""', hint))

    def array_value(self, s: Dict[str, Any], path: str, hint: str) -> str:
        ws = self.ws
        prefix = [self.element("item", self.value(sub, path_join(path, "prefixItems", str(i)), hint + "_item"), path)
                  for i, sub in enumerate(s.get("prefixItems") or [])]
        add = s.get("items", s.get("unevaluatedItems", False))
        extra = None
        if add is not False:
            extra = self.element("item", self.value(add, path_join(path, "items"), hint + "_item"), path)
        lo, hi = _item_bounds(s, path)
        if hi == 0:
            return '""'
        if not prefix:
            if extra is None:
                return '""'
            body = _seq([ws, extra, _rep(_seq([ws, extra]), max(0, lo - 1), -1 if hi == -1 else max(0, hi - 1)), ws])
            return self.rule(hint, _alt([body, '""']) if lo == 0 else body)
        n = len(prefix)
        tail = '""'
        if extra is not None:
            tail = _rep(_seq([ws, extra]), max(0, lo - n), -1 if hi == -1 else max(0, hi - n))
        for i in range(n - 2, -1, -1):
            emitted = i + 1
            can_stop = emitted >= lo
            can_continue = hi == -1 or emitted < hi
            body = '""'
            if can_continue:
                cont = _seq([ws, prefix[i + 1], tail])
                body = _alt([cont, '""']) if can_stop else cont
            tail = self.rule(hint + "_prefix_tail", body)
        body = _seq([ws, prefix[0], tail, ws])
        return self.rule(hint, _alt([body, '""']) if lo == 0 else body)


# ---- entry point --------------------------------------------------------------------------


def xml_schema_expr(conv, node: N.JSONSchema) -> str:
    style = node.style
    if style not in _ALL_STYLES:
        raise NotImplementedError(
            f"{path_join(node.path, 'style')}: the json_schema style {style!r} is not supported by "
            "xgrammar2 (supported: json, " + ", ".join(_ALL_STYLES) + ")"
        )
    if node.excludes:
        if style in ("cohere_xml", "minimax_m3_xml"):
            raise StructuralTagError(path_join(node.path, "excludes"),
                                     f"JSONSchemaFormat.excludes is not supported for {style}")
        for e in node.excludes:
            if e[:1] in " \t\r\n" or e[-1:] in " \t\r\n":
                raise StructuralTagError(path_join(node.path, "excludes"),
                                         "XML JSONSchemaFormat.excludes must not start or end with formatting "
                                         "whitespace (space, tab, CR, LF)")
    if style == "cohere_xml":
        return _Cohere(conv, node).root_expr()
    if style == "minimax_m3_xml":
        return _MiniMaxM3(conv, node).root_expr()
    return _ParamList(conv, node, XML_STYLES[style]).root_expr()
