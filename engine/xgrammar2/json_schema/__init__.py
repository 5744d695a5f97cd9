"""JSON Schema (draft 2020-12) → EBNF in upstream xgrammar's dialect.

    >>> from xgrammar2.json_schema import json_schema_to_ebnf
    >>> r = json_schema_to_ebnf({"type": "integer", "minimum": 1})
    >>> print(r.ebnf)

See docs/json-schema.md for the keyword policy and the exact semantics of each option.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from .. import gc_pause
from . import grammar as grammar_ir
from . import ir
from .convert import DEFAULT_BASE, Converter
from .emit import Emitter
from .errors import (InvalidSchemaError, SchemaError, UnsatisfiableSchemaError,
                     UnsupportedSchemaError)
from .policy import KEYWORD_POLICY, UNKNOWN_KEYWORD_POLICY, Policy, policy_of

__all__ = [
    "ConversionResult", "json_schema_to_ebnf", "builtin_json_ebnf", "KEYWORD_POLICY", "Policy",
    "policy_of", "UNKNOWN_KEYWORD_POLICY", "SchemaError", "UnsupportedSchemaError", "InvalidSchemaError",
    "UnsatisfiableSchemaError",
]


@dataclass
class ConversionResult:
    """The EBNF of a schema and the conversion's warnings: constraints not enforced (a
    ``format`` JSON Schema treats as an annotation; with ``lenient=True``, dropped
    unsupported keywords), each naming its JSON pointer."""

    ebnf: str
    warnings: list = field(default_factory=list)


#: Logs each distinct conversion's warnings once (a cached conversion does not log again).
_log = logging.getLogger("xgrammar2.json_schema")


#: a member "id" whose value is a string, in JSON text (the only "id" the $id index reads)
_ID_STRING = re.compile(r'"id"\s*:\s*"')
_ID_STRING_REPR = re.compile(r"'id': ['\"]")  # (the same in the repr of the schema object)

_CACHE_SIZE = 4096  # conversions; tool schemas recur across requests
_cache: "OrderedDict[tuple, tuple]" = OrderedDict()
_lock = threading.Lock()


def _load(schema):
    if isinstance(schema, (dict, bool)):
        return schema
    if isinstance(schema, (str, bytes, bytearray)):
        try:
            return json.loads(schema)
        except json.JSONDecodeError as e:
            raise InvalidSchemaError(f"schema is not valid JSON: {e}", "#") from None
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        return schema.model_json_schema()
    raise InvalidSchemaError(f"schema must be a JSON string, dict, bool or pydantic model class, "
                             f"got {type(schema).__name__}", "#")


def _check_options(any_whitespace, indent, separators, max_whitespace_cnt):
    if indent is not None and not (isinstance(indent, str) or (isinstance(indent, int) and indent >= 0)):
        raise ValueError("indent must be None, a non-negative int or a string")
    if isinstance(indent, str) and any(c not in " \t" for c in indent):
        raise ValueError("indent may only contain spaces and tabs")
    if separators is not None:
        if (not isinstance(separators, (tuple, list)) or len(separators) != 2
                or not all(isinstance(x, str) for x in separators)):
            raise ValueError("separators must be a pair of strings (item_separator, key_separator)")
        if separators[0].strip() != "," or separators[1].strip() != ":":
            raise ValueError("separators must be ',' and ':' with optional whitespace")
        if any(c not in " \t\n," for c in separators[0]) or any(c not in " \t\n:" for c in separators[1]):
            raise ValueError("separators may only add spaces, tabs and newlines")
    if max_whitespace_cnt is not None and (not isinstance(max_whitespace_cnt, int) or max_whitespace_cnt < 0):
        raise ValueError("max_whitespace_cnt must be None or a non-negative int")


def _check_excludes(excludes):
    if excludes is None:
        return ()
    if isinstance(excludes, (str, bytes)) or not isinstance(excludes, (list, tuple)):
        raise ValueError("excludes must be a list of non-empty strings")
    out = []
    for w in excludes:
        if not isinstance(w, str) or not w:
            raise ValueError("excludes must be a list of non-empty strings")
        if w not in out:
            out.append(w)
    return tuple(out)


def json_schema_to_ebnf(schema, *, any_whitespace: bool = True, indent=None, separators=None,
                        strict_mode: bool = True, max_whitespace_cnt=None, lenient: bool = False,
                        ref_resolver=None, any_order: bool = False, excludes=None,
                        _key_text: "str | None" = None) -> ConversionResult:
    """Converts a JSON Schema to EBNF (root rule ``root``).

    Raises UnsupportedSchemaError (a keyword or value that cannot be enforced exactly; with
    ``lenient=True`` it is dropped and listed in ``warnings``), InvalidSchemaError (a malformed
    schema) or UnsatisfiableSchemaError (no value satisfies the schema).

    ``ref_resolver`` (xgrammar2 extension): a callable mapping an absolute document URI to a
    schema (dict/bool) or None; used for ``$ref`` to other documents, which are refused
    otherwise. Results are not cached when it is given.

    ``format``: known formats are enforced (docs/json-schema.md, "Formats"); any other value
    is an annotation, as JSON Schema 2020-12 defines it: not enforced, and listed in
    ``warnings`` (also logged once per distinct conversion on the ``xgrammar2.json_schema``
    logger).

    ``any_order``: object members may come in any order, exactly (every required property
    present, no property twice, additionalProperties/patternProperties/propertyNames and
    min/maxProperties enforced). Objects with more than ``emit.ANY_ORDER_MAX_KEYS`` named
    properties are refused (lenient: upstream's relaxed any_order, with a warning).

    ``excludes``: non-empty substrings that the raw text (before unescaping) of string
    values without pattern/format and of property names must not contain, nested strings
    included; const/enum strings containing one are removed (upstream's
    ``JSONSchemaFormat.excludes`` of structural tags; docs/json-schema.md)."""
    _check_options(any_whitespace, indent, separators, max_whitespace_cnt)
    excl = _check_excludes(excludes)
    s = _load(schema)
    opts = (bool(any_whitespace), indent, tuple(separators) if separators else None, bool(strict_mode),
            max_whitespace_cnt, bool(lenient), bool(any_order), excl)
    try:
        # The repr of JSON data tells any two values apart (1 / "1" / true) and keeps the
        # property order the grammar enforces: a tool schema seen in an earlier request costs
        # one repr and one lookup. ``_key_text`` (private: GrammarCompiler.compile_json_schema)
        # is the compact json.dumps of ``schema`` that the caller already made for its own
        # compile-cache key; it tells the same values apart as the compile cache does, and
        # saves the repr (10-20x slower than json.dumps on large schemas with many strings).
        if ref_resolver is not None:
            key = None
        elif _key_text is not None:
            key = (("json", _key_text), opts)
        else:
            key = (repr(s), opts)
    except Exception:  # noqa: BLE001 - a value whose repr fails is converted unkeyed
        key = None
    if key is not None:
        with _lock:
            hit = _cache.get(key)
            if hit is not None:
                _cache.move_to_end(key)
        if hit is not None:
            return ConversionResult(hit[0], list(hit[1]))
    # The $id/$anchor index is only needed when such keywords (or draft-04 "id") occur.
    if key is None:
        need_index = True
    elif _key_text is not None:
        need_index = _needs_index(_key_text)
    else:
        need_index = (any(k in key[0] for k in ("'$id'", "'$anchor'", "'$dynamicAnchor'", "'$dynamicRef'"))
                      or ("'id'" in key[0] and _ID_STRING_REPR.search(key[0]) is not None))
    with gc_pause.paused():  # allocation-heavy: no collector pauses inside (gc_pause.py)
        # (The converter's objects are freed inside _convert, before the collector is back:
        # alive, the first collection after the block would walk all of them.)
        text, warns, notes = _convert(s, need_index, strict_mode=strict_mode, lenient=lenient,
                                      ref_resolver=ref_resolver, any_whitespace=any_whitespace, indent=indent,
                                      separators=separators, max_whitespace_cnt=max_whitespace_cnt,
                                      any_order=any_order, excludes=excl)
    if text is None:
        why = ""
        if notes:
            why = " (" + "; ".join(notes[:3]) + ("; ..." if len(notes) > 3 else "") + ")"
        raise UnsatisfiableSchemaError("schema is unsatisfiable: no JSON value matches it" + why, "#")
    res = (text, warns)
    if res[1]:
        _log.warning("JSON schema converted with %d constraint(s) not enforced: %s", len(res[1]),
                     "; ".join(res[1]))
    if key is not None:
        with _lock:
            _cache[key] = res
            if len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
    return ConversionResult(text, list(res[1]))


def _needs_index(text: str) -> bool:
    """Whether a schema whose canonical text is ``text`` may carry an $id, an anchor or a
    draft-04 id (then the converter indexes them). A draft-04 "id" counts only with a string
    value: a property named "id" does not."""
    return (any(k in text for k in ('"$id"', '"$anchor"', '"$dynamicAnchor"', '"$dynamicRef"'))
            or ('"id"' in text and _ID_STRING.search(text) is not None))


def _convert(s, need_index, *, strict_mode, lenient, ref_resolver, any_whitespace, indent, separators,
             max_whitespace_cnt, any_order, excludes, root="root"):
    """One conversion: (EBNF text or None when unsatisfiable, warnings, unsatisfiability notes).
    ``root``: the start rule's name, which the rules made for it extend (``root__num``);
    core_strings names a fragment's rules apart this way."""
    cx = Converter(s, strict_mode=strict_mode, lenient=lenient, ref_resolver=ref_resolver, index=need_index)
    # (equal copies share one union, whose nodes name the first copy's pointer: only where the
    # emitter cannot warn about a node, which it does in lenient mode and with excludes)
    cx.share_copies = not lenient and not excludes
    em = Emitter(cx, any_whitespace=any_whitespace, indent=indent, separators=separators,
                 max_whitespace_cnt=max_whitespace_cnt, any_order=any_order, excludes=excludes)
    try:
        u = cx.convert(s, "#")
        if "root" in cx.refs:
            cx.ref_union_memo.setdefault("root", u)
        em.g.define(root, None)
        # (products the emitter builds are not compacted past ir.MAX_ALTS: there a refused
        # negation falls back to a relative one, ir.subtract, with a much smaller grammar)
        cx.emitting = True
        e = em.emit(u, root, 0)
        em.g.define(root, e)
        em.drain()
        text = em.g.finalize(root)
    except ir.NotExpressible as ex:  # pragma: no cover - converted at the source normally
        raise UnsupportedSchemaError(f"unsupported schema: {ex}", "#") from None
    except RecursionError as ex:
        raise _too_deep(ex, getattr(cx, "emitting", False)) from None
    out = text, tuple(cx.warnings), list(cx.unsat_notes)
    # The emitter, the converter and their memo tables reference each other (closures kept
    # in memos, the emitter's converter): clearing them frees the whole conversion by
    # reference counting instead of leaving thousands of tuples to the cyclic collector.
    em.__dict__.clear()
    cx.__dict__.clear()
    return out


def _convert_parts(doc, parts, *, max_whitespace_cnt, index):
    """The rules of several subschemas of one document in one conversion, for the core's
    front end (core_strings.part_rows): ``parts`` pairs (rule name, subschema), each converted
    as it stands in ``doc`` (local references resolve against it), with compile_json_schema's
    default options. A reference to a definition the core writes itself is its rule, named
    ``px_<k>`` here, not converted again; the others are converted once for all parts. Returns
    the rules' text (every name in ``parts`` defined, or None when one is unsatisfiable), the
    warnings and the references {"#/definitions/NAME": "px_<k>"}; raises what the converter
    raises. ``index``: whether the document may carry
    an $id, an anchor or a draft-04 id (json_schema_to_ebnf's need_index); each part is then
    converted under the document's base, as in a conversion of the whole."""
    cx = Converter(doc, strict_mode=True, lenient=False, ref_resolver=None, index=index)
    cx.share_copies = True
    em = Emitter(cx, any_whitespace=True, indent=None, separators=None, max_whitespace_cnt=max_whitespace_cnt,
                 any_order=False, excludes=_check_excludes(None))
    external: dict = {}  # the core's definitions the rules refer to: "#/definitions/NAME" -> px_<k>
    top_base = cx._base_of(doc, DEFAULT_BASE) if index and isinstance(doc, dict) else DEFAULT_BASE

    def external_ref(rname):
        # A schema the core resolves (json_schema_plain.c's resolve_ref_text: a pointer of plain
        # segments), reached without a change of base or dynamic scope, is the core's rule:
        # referred to, not converted again here.
        entry = cx.refs.get(rname)
        if entry is None or entry[0] in ("and", "not") or cx.has_dynamic or entry[1] != top_base:
            return None
        m = _CORE_DEF.fullmatch(entry[2])
        if m is None:
            return None
        name = external.get(entry[2])
        if name is None:
            name = external[entry[2]] = f"px_{len(external)}"
        return name

    em.external_ref = external_ref
    try:
        us = [(name, cx.convert(s, "#/" + name, top_base)) for name, s in parts]
        cx.emitting = True
        for name, u in us:
            em.g.define(name, None)
            em.g.define(name, em.emit(u, name, 0))
        em.drain()
        top = em.g.unique("pp_all")  # (one start rule reaching every part: finalize prunes from it)
        em.g.define(top, grammar_ir.alt(*(grammar_ir.ref(name) for name, _ in parts)))
        text = em.g.finalize(top)
    except ir.NotExpressible as ex:  # pragma: no cover - converted at the source normally
        raise UnsupportedSchemaError(f"unsupported schema: {ex}", "#") from None
    except RecursionError as ex:
        raise _too_deep(ex, getattr(cx, "emitting", False)) from None
    warns = tuple(cx.warnings)
    if text is not None:
        lines = text.split("\n")
        names = {ln.partition(" ::= ")[0] for ln in lines[1:] if ln}
        text = None if any(name not in names for name, _ in parts) else "".join(ln + "\n" for ln in lines[1:] if ln)
    em.__dict__.clear()
    cx.__dict__.clear()
    return text, warns, external


#: The pointers the core's front end resolves (resolve_ref_text in json_schema_plain.c):
#: plain segments, no pointer escape, no percent sign (array items by index).
_CORE_DEF = re.compile(r'#(?:/[ !#$&-.0-\[\]-}]+)+')


def _too_deep(ex, emitting):
    """The refusal of a schema whose conversion (or grammar) recursed past Python's limit,
    naming where: the schema object met most often while unwinding (the one that recurses;
    the innermost among equals), as the schema object that has the applicator (a oneOf
    branch "#/x/oneOf/3" is reported as keyword 'oneOf' at "#/x")."""
    ptrs = getattr(ex, "pointers", None) or ["#"]
    counts: dict = {}
    for p in ptrs:
        counts[p] = counts.get(p, 0) + 1
    parts = max(counts, key=counts.__getitem__).split("/")  # (the first, innermost, among equals)
    kw = None
    if len(parts) > 2 and parts[-2] in ("allOf", "anyOf", "oneOf", "prefixItems") and parts[-1].isdigit():
        kw, parts = parts[-2], parts[:-2]
    else:
        kw = next((p for p in reversed(parts) if p in _NESTING_KW), None)
    ptr = "/".join(parts) or "#"
    what = "writing its grammar recurses" if emitting else "its conversion recurses"
    at = f"unsupported keyword '{kw}' at {ptr}" if kw else f"unsupported schema at {ptr}"
    return UnsupportedSchemaError(f"{at}: nested too deeply ({what} deeper than Python's recursion limit)",
                                  ptr, kw)


_NESTING_KW = frozenset(("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref", "items", "prefixItems",
                         "contains", "properties", "patternProperties", "additionalProperties",
                         "dependentSchemas", "unevaluatedProperties", "unevaluatedItems"))


def builtin_json_ebnf(*, object_only: bool = False, any_whitespace: bool = True, indent=None, separators=None,
                      max_whitespace_cnt=None) -> str:
    """EBNF for any JSON value (``object_only=True``: any JSON object, the "JSON mode" of
    OpenAI-style ``response_format: {"type": "json_object"}``)."""
    schema = {"type": "object"} if object_only else True
    return json_schema_to_ebnf(schema, any_whitespace=any_whitespace, indent=indent, separators=separators,
                               strict_mode=False, max_whitespace_cnt=max_whitespace_cnt).ebnf
