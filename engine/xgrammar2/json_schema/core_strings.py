"""The string formats and patterns the core's plain JSON-schema front end enforces
(``xgr_json_string_form`` entries for ``xgr_json_schema_plain``, csrc/front/json_schema_plain.c).

The core knows neither formats nor regular expressions: for each ``format`` and ``pattern``
value named in a schema's canonical text this module hands it what the Python converter
writes for ``{"type": "string", "format": F}`` or ``{"type": "string", "pattern": P}``, the
string's expression and its character rules, so the core's grammar is the converter's and the
definitions live in one place (formats.py, regex.py, emit.py). Formats that constrain nothing
without a warning (``UNCONSTRAINED_FORMATS``) are passed with no expression, and so are the
formats the converter leaves as annotations with a warning (unknown formats and
``REFUSED_FORMATS``): for a schema the core takes with such a format, :func:`format_warnings`
writes the converter's warnings (the same pointers, the same text). Everything else is left
out, so the core leaves such a schema to Python: integer formats, format names spelled with
an escape, and patterns the converter refuses or only approximates.
Entries are built once per process (patterns: the last ``_PATTERNS_MAX``), each by the
converter's own (memoised) conversion, and only for schemas the core takes otherwise (it is
asked first without them): for a schema left to Python they would be wasted work.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Dict, FrozenSet, Optional, Tuple

from .. import _core
from . import formats as fmts

#: ``format`` / ``pattern`` members with a string value in canonical (compact) JSON text: the
#: value as spelled there. A match elsewhere (inside a string, or a property named "format"
#: whose schema is a string) only adds an entry the core does not use.
_MEMBER = re.compile(rb'"(format|pattern)":"((?:[^"\\]|\\.)*)"')
#: The converter's character rules (content-addressed names) and JSON's character rule.
_HELPER = re.compile(r"(?:char_[A-Za-z0-9_]+|char) ::= [^\n]*")

Entry = Tuple[Optional[bytes], Optional[bytes]]  # (value expression, helper rules): UTF-8 EBNF
_formats: Dict[str, Optional[Entry]] = {}
_patterns: Dict[bytes, Optional[Entry]] = {}
_schemas: Dict[bytes, Optional[Entry]] = {}  # schema_entry's, by key
_PATTERNS_MAX = 4096
_tables: Dict[FrozenSet[Tuple[bytes, bytes]], Tuple[Any, int, list]] = {}  # members() -> table
_TABLES_MAX = 256


def format_entry(name: str) -> Optional[Entry]:
    """Format ``name``'s entry: (None, None) for a format that constrains nothing (an
    annotation: :func:`annotation` says whether the converter may warn about it), None for one the
    core must leave to Python."""
    if name in _formats:
        return _formats[name]
    e: Optional[Entry] = None
    if name in fmts.UNCONSTRAINED_FORMATS or annotation(name):
        e = (None, None)
    elif name in fmts.STRING_FORMATS:
        e = _converted({"type": "string", "format": name})
    if len(_formats) >= _PATTERNS_MAX:  # (unknown names are the client's: bounded)
        _formats.clear()
    _formats[name] = e
    return e


def annotation(name: str) -> bool:
    """Whether the converter may leave format ``name`` unenforced with a warning (formats.
    annotation_warning, which also says where it stays silent)."""
    return fmts.annotation_warning("", name, None) is not None


def needs_warnings(found: "Members") -> bool:
    """Whether a schema whose members are ``found`` names a format the converter warns about
    (then :func:`format_warnings` says where)."""
    return any(k == b"format" and b"\\" not in v and annotation(v.decode("ascii", "replace")) for k, v in found)


def format_warnings(schema: Any) -> list:
    """The converter's warnings for the annotation formats (:func:`annotation`) of a schema in
    the core's plain subset, in its order: every schema object reachable from the root through
    ``properties``, ``additionalProperties``, ``items``, ``anyOf``, ``oneOf`` and local
    ``$ref`` (each definition once, named by its own pointer; definitions never referenced are
    never converted, so they do not warn), a format outside ``string``'s types but refused
    silent, as convert.Converter._format does.
    tests/json_schema/test_plain_front.py compares these with the converter's on every
    JSONSchemaBench schema the core takes."""
    from .convert import ptr_join

    out: list = []
    seen: set = set()
    pending = [(schema, "#")]
    defs = {}
    if isinstance(schema, dict):
        for kw in ("definitions", "$defs"):
            d = schema.get(kw)
            if isinstance(d, dict):
                for k, v in d.items():
                    defs["#/" + kw + "/" + k] = v

    def visit(s: Any, ptr: str) -> None:
        if not isinstance(s, dict):
            return
        ref = s.get("$ref")
        if isinstance(ref, str):
            if ref not in seen:
                seen.add(ref)
                pending.append((schema if ref == "#" else defs.get(ref), "#" if ref == "#" else ref))
            return
        f = s.get("format")
        if isinstance(f, str):
            t = s.get("type")
            msg = fmts.annotation_warning(ptr, f, [t] if isinstance(t, str) else t if isinstance(t, list) else None)
            if msg is not None:
                out.append(msg)
        for kw in ("anyOf", "oneOf"):
            for i, sub in enumerate(s.get(kw) or ()):
                visit(sub, ptr_join(ptr, kw, i))
        props = s.get("properties")
        if isinstance(props, dict):
            for k, sub in props.items():
                visit(sub, ptr_join(ptr, "properties", k))
        for kw in ("additionalProperties", "items"):
            if isinstance(s.get(kw), dict):
                visit(s[kw], ptr_join(ptr, kw))

    seen.add("#")
    while pending:
        s, ptr = pending.pop(0)
        visit(s, ptr)
    return out


def pattern_entry(spelled: bytes) -> Optional[Entry]:
    """The entry of the pattern whose canonical JSON spelling (between the quotes) is
    ``spelled``; None when the converter refuses it, warns or cannot be asked."""
    if spelled in _patterns:
        return _patterns[spelled]
    try:
        pattern = json.loads(b'"' + spelled + b'"')
    except ValueError:
        pattern = None
    e = None
    if isinstance(pattern, str):
        try:
            e = _converted({"type": "string", "pattern": pattern})
        except Exception:  # refused, over a limit...: the whole schema's conversion says why
            e = None
    if len(_patterns) >= _PATTERNS_MAX:
        _patterns.clear()
    _patterns[spelled] = e
    return e


def schema_entry(spelled: bytes) -> Optional[Entry]:
    """The entry of a type part the core leaves to the converter (keyword "schema": a string
    format or pattern beside a length or beside each other, bounds on a number, bounds on an
    integer that are not integers), ``spelled`` the compact JSON of that one-type subschema
    (csrc/front/json_form_key.c): the converter's grammar of it, its rules named after the
    text's digest (``sf<hex>``, ``sf<hex>__num``, ...) so that they never meet the core's or
    another entry's; None when the converter refuses it, finds it unsatisfiable, warns or
    writes a shared rule other than ``char`` (the whole schema then goes to Python, which
    says why)."""
    if spelled in _schemas:
        return _schemas[spelled]
    e = None
    try:
        schema = json.loads(spelled)
    except ValueError:
        schema = None
    if isinstance(schema, dict):
        from . import _check_excludes, _convert

        name = "sf" + hashlib.blake2b(spelled, digest_size=6).hexdigest()
        try:
            text, warns, _ = _convert(schema, False, strict_mode=True, lenient=False, ref_resolver=None,
                                      any_whitespace=True, indent=None, separators=None, max_whitespace_cnt=None,
                                      any_order=False, excludes=_check_excludes(None), root=name)
        except Exception:  # refused, invalid, over a limit: the whole schema's conversion says why
            text, warns = None, ()
        own = re.compile(re.escape(name) + r"(?:__[A-Za-z0-9_]*)?(?:\[[^\]\n]*\])? ::= [^\n]*")
        lines = [ln for ln in (text or "").split("\n") if ln]
        if text and not warns and lines and lines[0].startswith(name + " ::= ") and \
                all(own.fullmatch(ln) or _HELPER.fullmatch(ln) for ln in lines):
            try:
                e = name.encode("ascii"), "".join(ln + "\n" for ln in lines).encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate in a pattern
                e = None
    if len(_schemas) >= _PATTERNS_MAX:
        _schemas.clear()
    _schemas[spelled] = e
    return e


def wanted(buf: bytes) -> "Members":
    """The "schema" and "part" members for the keys the core asked for
    (xgr_json_schema_plain's ``wants``: NUL-ended texts; a part's begins with "@")."""
    return frozenset((b"part" if k[:1] == b"@" else b"schema", k) for k in buf.split(b"\0") if k)


#: Rule names a part's rules may not define: the core's own (xgr2.h, xgr_json_string_form),
#: the type parts' (sf<hex>), the parts' start rule. Shared rules (ws, string, char, ...)
#: pass: the core checks their text against its own.
_CORE_NAME = re.compile(r"(?:root|xu|xr|px_\d+|pp_all(?:_\d+)?|[oaedf]\d[0-9A-Za-z_]*|x[a-z]*\d[0-9A-Za-z_]*|sf[0-9a-f]{12}.*)")


def part_rows(canonical: bytes, keys: "Members", max_whitespace_cnt: Optional[int]) -> list:
    """The "part" rows (keyword, text, value, rules) for the parts the core asked for (keys
    "@OFF:LEN": a subschema's span in ``canonical``): the converter's rules of all of them
    from one conversion of the document (json_schema._convert_parts), part i's rule named
    ``pp_i``, every rule on the first row, then a "part-ref" row for each definition of the
    core's that the rules name instead of converting it again (text its pointer, value the
    name). Every row without a value when any part is
    refused, unsatisfiable or warns, the document names a format the converter may warn
    about (below), or a rule would take a name of the core's: the core then leaves the whole
    schema to Python, which says why."""
    from . import _convert_parts, _needs_index

    spans = sorted(k for kw, k in keys if kw == b"part")
    # A format the converter may warn about inside a part or a definition: the schema's
    # warnings would be format_warnings', which neither follows the keywords parts hold (a
    # definition reached only through a part's patternProperties: JsonSchemaStore accelerator)
    # nor walks only where the converter reads (o18021's "properties" beside "type": "string").
    annotated = b'"format":"' in canonical and needs_warnings(members(canonical))
    doc = json.loads(canonical)
    parts: Optional[list] = []
    if annotated and isinstance(doc, dict):
        for kw in ("definitions", "$defs"):
            if kw in doc and needs_warnings(members(json.dumps(doc[kw], separators=(",", ":"), ensure_ascii=False)
                                                    .encode("utf-8", "surrogatepass"))):
                parts = None
    for i, k in enumerate(spans if parts is not None else ()):
        try:
            off, ln = (int(x) for x in k[1:].split(b":"))
            span = canonical[off:off + ln]
            if annotated and needs_warnings(members(span)):
                parts = None
                break
            parts.append((f"pp_{i}", json.loads(span)))
        except ValueError:
            parts = None
            break
    text, warns, external = None, (), {}
    if parts:
        try:
            text, warns, external = _convert_parts(doc, parts, max_whitespace_cnt=max_whitespace_cnt,
                                         index=_needs_index(canonical.decode("utf-8", "surrogatepass")))
        except Exception:  # refused, invalid, over a limit: the whole schema's conversion says why
            text, warns = None, ()
        if warns or (text and any(_CORE_NAME.fullmatch(ln.partition(" ::= ")[0].partition("[")[0])
                                  for ln in text.split("\n") if ln)):
            text = None
    if text is None:
        return [(b"part", k, None, None) for k in spans]
    rules = text.encode("utf-8", "surrogatepass")
    return ([(b"part", k, f"pp_{i}".encode(), rules if i == 0 else None) for i, k in enumerate(spans)]
            + [(b"part-ref", ptr.encode("ascii"), name.encode("ascii"), None) for ptr, name in external.items()])


def _converted(schema: dict) -> Optional[Entry]:
    from . import json_schema_to_ebnf

    res = json_schema_to_ebnf(schema, any_whitespace=True, strict_mode=True)
    if res.warnings:
        return None
    first, _, rest = res.ebnf.partition("\n")
    if not first.startswith("root ::= ") or re.search(r"\broot\b", first[9:]):
        return None
    lines = [ln for ln in rest.split("\n") if ln]
    if not all(_HELPER.fullmatch(ln) for ln in lines):
        return None  # (another rule name could collide with the core's)
    try:
        return first[9:].encode("utf-8"), "".join(ln + "\n" for ln in lines).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate in a pattern
        return None


Members = FrozenSet[Tuple[bytes, bytes]]


def members(canonical: bytes) -> Members:
    """The (keyword, spelled value) pairs of the ``format`` / ``pattern`` members named in
    ``canonical`` (a schema's canonical text): the key of its table."""
    return frozenset(_MEMBER.findall(canonical))


def cached_table(found: Members) -> Tuple[Any, int]:
    """:func:`table` of ``found`` when it was built before, else (NULL, 0): the caller first
    asks the core whether the schema is in its subset but for these values (building entries
    for a schema it leaves to Python would be wasted: each is a conversion)."""
    hit = _tables.get(found)
    return (hit[0], hit[1]) if hit is not None else (_core.ffi.NULL, 0)


def table(found: Members) -> Tuple[Any, int]:
    """(``xgr_json_string_form`` array, its length) for the formats and patterns ``found``
    (:func:`members`); (NULL, 0) when it names none the core takes."""
    if not found:
        return _core.ffi.NULL, 0
    hit = _tables.get(found)
    if hit is not None:
        return hit[0], hit[1]
    rows = []
    for keyword, spelled in sorted(found):
        if keyword == b"format":
            try:  # (a name spelled with an escape: the converter's warning would name it decoded)
                e = format_entry(spelled.decode("ascii")) if b"\\" not in spelled else None
            except UnicodeDecodeError:
                e = None
        elif keyword == b"schema":
            e = schema_entry(spelled)
        else:
            e = pattern_entry(spelled)
        if e is not None:
            rows.append((keyword, spelled) + e)
    arr, keep = form_array(rows)
    if len(_tables) >= _TABLES_MAX:
        _tables.clear()
    _tables[found] = (arr, len(rows), keep)
    return arr, len(rows)


def form_array(rows: list) -> Tuple[Any, list]:
    """An ``xgr_json_string_form`` array of ``rows`` (keyword, text, value, rules: bytes or
    None) and the buffers it borrows (kept alive with it); (NULL, []) for no rows."""
    ffi = _core.ffi
    if not rows:
        return ffi.NULL, []
    arr = ffi.new("xgr_json_string_form[]", len(rows))
    keep = [arr]
    for i, row in enumerate(rows):
        for field, text in zip(("keyword", "text", "value", "rules"), row):
            if text is not None:
                buf = ffi.new("char[]", text)
                keep.append(buf)
                setattr(arr[i], field, buf)
    return arr, keep


def with_parts(found: Members, parts: list) -> Tuple[Any, int, list]:
    """:func:`table` of ``found`` (its parts left out) followed by the "part" rows ``parts``
    (:func:`part_rows`): (array, length, buffers to keep alive with it). The table's rows are
    copied by pointer; its buffers stay in its cache entry, which the result keeps too."""
    base = frozenset(m for m in found if m[0] != b"part")
    arr, n = table(base)
    hit = _tables.get(base)
    parr, keep = form_array(parts)
    if not n:
        return parr, len(parts), keep
    ffi = _core.ffi
    out = ffi.new("xgr_json_string_form[]", n + len(parts))
    for i in range(n):
        out[i] = arr[i]
    for j in range(len(parts)):
        out[n + j] = parr[j]
    return out, n + len(parts), [out, keep, hit]
