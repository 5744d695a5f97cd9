"""``format`` values as regular expressions (full-match, ECMA syntax, parsed by regex.py).

Each entry is exact for its RFC grammar, or a documented *subset* of it (never a superset):

* date / date-time: RFC 3339 ``full-date`` including days per month and leap years.
* time / date-time: a leap second (``:60``) is accepted only as ``23:59:60`` with ``Z`` or a
  zero offset; leap seconds under a non-zero offset are rejected (subset).
* hostname: RFC 1123 labels (1-63 chars); labels whose 3rd and 4th characters are ``--``
  (A-labels such as ``xn--...``, whose validity depends on IDNA tables) are rejected; the
  253-character total is guaranteed by accepting at most 4 labels (first ≤ 63, others
  ≤ 62), 8 labels ≤ 30 or 16 labels ≤ 14 characters (subset).
* email: RFC 5321 ``Mailbox`` syntax (dot-atom or quoted local part; domain or IPv4 /
  IPv6 address literal), without the SMTP size limits.
* duration: RFC 3339 appendix A ABNF.
* ipv4 / ipv6 / uuid / uri / uri-reference / uri-template / json-pointer /
  relative-json-pointer: the RFC ABNF.

OpenAPI 3 formats: ``byte`` is base64 (RFC 4648 standard alphabet, padded, exact);
``int32`` / ``int64`` bound integers and numbers to the type's range (convert.py);
``float``, ``double``, ``binary`` and ``password`` add no constraint. Every other value, and
REFUSED_FORMATS, is an annotation: not enforced, reported as a conversion warning.
"""

from __future__ import annotations

from . import regex as rx

_AN = "[A-Za-z0-9]"
_ANH = "[A-Za-z0-9-]"


def _label(maxlen: int, allow_reserved: bool) -> str:
    # A 1..maxlen character LDH label that neither starts nor ends with '-'.
    if allow_reserved:
        return f"{_AN}(?:{_ANH}{{0,{maxlen - 2}}}{_AN})?"
    # ... and whose 3rd and 4th characters are not both '-' (RFC 5891 reserved labels).
    long_ = f"{_AN}{_ANH}(?:{_AN}{_ANH}|-{_AN}){_ANH}{{0,{maxlen - 5}}}{_AN}"
    return f"(?:{_AN}|{_AN}{_AN}|{_AN}{_ANH}{_AN}|{_AN}{_ANH}{_ANH}{_AN}|{long_})"


def _hostname() -> str:
    shapes = [
        f"{_label(63, False)}(?:\\.{_label(62, False)}){{0,3}}",
        f"{_label(30, False)}(?:\\.{_label(30, False)}){{0,7}}",
        f"{_label(14, False)}(?:\\.{_label(14, False)}){{0,15}}",
    ]
    return "(?:" + "|".join(shapes) + ")"


_DEC_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"
_IPV4 = f"(?:{_DEC_OCTET}\\.{_DEC_OCTET}\\.{_DEC_OCTET}\\.{_DEC_OCTET})"
_H16 = "[0-9A-Fa-f]{1,4}"
_LS32 = f"(?:{_H16}:{_H16}|{_IPV4})"
_IPV6 = "(?:" + "|".join([
    f"(?:{_H16}:){{6}}{_LS32}",
    f"::(?:{_H16}:){{5}}{_LS32}",
    f"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
    f"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}",
    f"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
    f"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
    f"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
    f"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
    f"(?:(?:{_H16}:){{0,6}}{_H16})?::",
]) + ")"

_YEAR = "[0-9]{4}"
_LEAP = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
_DATE = ("(?:" + f"{_YEAR}-(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
         f"|{_YEAR}-(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
         f"|{_YEAR}-02-(?:0[1-9]|1[0-9]|2[0-8])"
         f"|{_LEAP}-02-29" + ")")
_FRAC = "(?:\\.[0-9]+)?"
_OFFSET = "(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_TIME = (f"(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]{_FRAC}{_OFFSET}"
         f"|23:59:60{_FRAC}(?:[Zz]|[+-]00:00))")

_DUR = ("P(?:(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)"
        "(?:T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))?"
        "|T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
        "|[0-9]+W)")

_ATEXT = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_DOMAIN = f"{_label(63, True)}(?:\\.{_label(63, True)})*"
_EMAIL = (f"(?:{_ATEXT}+(?:\\.{_ATEXT}+)*|\"(?:[\\x20\\x21\\x23-\\x5b\\x5d-\\x7e]|\\\\[\\x20-\\x7e])*\")"
          f"@(?:{_DOMAIN}|\\[{_IPV4}\\]|\\[IPv6:{_IPV6}\\])")

_UNRES = "A-Za-z0-9\\-._~"
_SUB = "!$&'()*+,;="
_PCT = "%[0-9A-Fa-f]{2}"
_PCHAR = f"(?:[{_UNRES}{_SUB}:@]|{_PCT})"
_SEG = f"{_PCHAR}*"
_SEG_NZ = f"{_PCHAR}+"
_SEG_NZ_NC = f"(?:[{_UNRES}{_SUB}@]|{_PCT})+"
_AUTH = (f"(?:(?:[{_UNRES}{_SUB}:]|{_PCT})*@)?"
         f"(?:\\[(?:{_IPV6}|v[0-9A-Fa-f]+\\.[{_UNRES}{_SUB}:]+)\\]|{_IPV4}|(?:[{_UNRES}{_SUB}]|{_PCT})*)"
         "(?::[0-9]*)?")
_QF = f"(?:\\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?"
_URI = (f"[A-Za-z][A-Za-z0-9+\\-.]*:(?://{_AUTH}(?:/{_SEG})*|/(?:{_SEG_NZ}(?:/{_SEG})*)?|{_SEG_NZ}(?:/{_SEG})*|)"
        + _QF)
_REL = f"(?://{_AUTH}(?:/{_SEG})*|/(?:{_SEG_NZ}(?:/{_SEG})*)?|{_SEG_NZ_NC}(?:/{_SEG})*|)" + _QF

_UT_LIT = "(?:[\\x21\\x23\\x24\\x26-\\x3b\\x3d\\x3f-\\x5b\\x5d\\x5f\\x61-\\x7a\\x7e\\xa0-\\ud7ff\\uf900-\\ufdcf\\ufdf0-\\uffef\\u{10000}-\\u{10fffd}\\ue000-\\uf8ff]|%[0-9A-Fa-f]{2})"
_UT_VARCHAR = "(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})"
_UT_VARSPEC = f"{_UT_VARCHAR}(?:\\.?{_UT_VARCHAR})*(?::[1-9][0-9]{{0,3}}|\\*)?"
_UT_EXPR = f"\\{{[+#./;?&=,!@|]?{_UT_VARSPEC}(?:,{_UT_VARSPEC})*\\}}"
_URI_TEMPLATE = f"(?:{_UT_LIT}|{_UT_EXPR})*"

_JSON_POINTER = "(?:/(?:[^/~]|~[01])*)*"

FORMATS = {
    "date": _DATE,
    "time": _TIME,
    "date-time": f"{_DATE}[Tt]{_TIME}",
    "duration": _DUR,
    "email": _EMAIL,
    "hostname": _hostname(),
    "ipv4": _IPV4,
    "ipv6": _IPV6,
    "uuid": "[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}",
    "uri": _URI,
    "uri-reference": f"(?:{_URI}|{_REL})",
    "uri-template": _URI_TEMPLATE,
    "json-pointer": _JSON_POINTER,
    "relative-json-pointer": f"(?:0|[1-9][0-9]*)(?:#|{_JSON_POINTER})",
}

# OpenAPI 3 data-type formats (OpenAPI Specification 3.x, "Data Types"), given their
# meaning here. "byte" is base64 (RFC 4648 section 4: the standard alphabet, whole 4-character
# quanta, '=' padding); see STRING_FORMATS below.
_BASE64 = "(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?"

#: Formats that constrain strings: a full-match regex (the RFC formats above plus
#: OpenAPI's "byte").
STRING_FORMATS = dict(FORMATS, byte=_BASE64)

#: OpenAPI integer formats: the inclusive range of values of an integer or number instance.
INTEGER_FORMAT_RANGES = {
    "int32": (-(2 ** 31), 2 ** 31 - 1),
    "int64": (-(2 ** 63), 2 ** 63 - 1),
}

#: Known formats that add no constraint to any JSON value: OpenAPI's "float" / "double"
#: (any JSON number) and "binary" / "password" (any string).
UNCONSTRAINED_FORMATS = frozenset(("float", "double", "binary", "password"))

# Formats known to the specification that we cannot enforce (no exact regular grammar):
# they compile unenforced, as annotations, with a warning (as unknown formats do).
REFUSED_FORMATS = {
    "regex": "the set of valid ECMA-262 regexes is not a regular language",
    "idn-email": "needs IDNA tables",
    "idn-hostname": "needs IDNA tables",
    "iri": "needs IRI character tables",
    "iri-reference": "needs IRI character tables",
}

def annotation_warning(ptr: str, name: str, types) -> str | None:
    """The warning for format ``name`` at ``ptr`` when the converter leaves it unenforced (an
    unknown or refused format: JSON Schema makes ``format`` an annotation), None where it
    enforces it, it constrains nothing (UNCONSTRAINED_FORMATS), or it is a refused string
    format on a schema whose ``types`` (a list, None: untyped) hold no string. Shared by the
    converter (convert.Converter._format) and the core's path (core_strings.format_warnings)."""
    if name in STRING_FORMATS or name in INTEGER_FORMAT_RANGES or name in UNCONSTRAINED_FORMATS:
        return None
    if name in REFUSED_FORMATS and types is not None and "string" not in types:
        return None
    why = REFUSED_FORMATS.get(name, "unknown format")
    return f"{ptr}: format '{name}' is not enforced ({why}; JSON Schema treats format as an annotation)"


_cache: dict = {}
_names: dict = {}  # AST -> format name, for the ASTs format_ast returned


def format_name(ast):
    """The name of the string format whose format_ast is ``ast`` (one format_ast returned in
    this process), else None."""
    return _names.get(ast)


def format_ast(name: str):
    """Full-match regex AST of a string format (STRING_FORMATS), or None when the format
    does not constrain strings (unknown, refused, or a format of another type)."""
    if name not in STRING_FORMATS:
        return None
    r = _cache.get(name)
    if r is None:
        # (shipped as data, equal to the parse: format_exprs; parsed when missing or stale)
        from . import format_exprs
        r = format_exprs.shipped_ast(name, STRING_FORMATS[name])
        if r is None:
            r = rx.parse(STRING_FORMATS[name])
        _cache[name] = r
        _names.setdefault(r, name)
    return r
