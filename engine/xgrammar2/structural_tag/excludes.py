"""``excludes`` of a ``json_schema`` format: substrings that may not appear in the string
values without ``pattern`` / ``format`` (and in property names), as upstream xgrammar
defines them (Kimi-K3 keeps its ``<|open|>``, ``<|close|>``, ``<|sep|>`` markers out of tool
arguments this way).

The match is on the text as written, before JSON / XML unescaping: a string's characters
are intersected with an Aho-Corasick automaton of the excluded strings, the product written
as EBNF rules (one per state pair that can still reach the end). Upstream's other rules are
kept: ``minLength`` / ``maxLength`` of a filtered string are dropped (with a warning), a
``const`` / ``enum`` value containing an excluded string is removed.

Here:

* :func:`excluding_rules`: the product of a small character automaton with the exclusion
  automaton, as EBNF rules;
* :func:`prepare_schema` and :func:`filter_json_ebnf`: a JSON schema and the EBNF the
  JSON-schema front end writes for it, with the exclusions applied to its plain strings.
"""

import json
from typing import Any, Dict, List, Optional, Sequence, Tuple

__all__ = ["excluding_rules", "char_class", "prepare_schema", "filter_json_ebnf", "JSON_STRING_BODY", "IDENTIFIER",
           "allowed_text", "allowed_literal"]

MAX_CP = 0x10FFFF
Ranges = Tuple[Tuple[int, int], ...]

# A character automaton: state -> (accepting, [(ranges, target state or None = end)]).
# ``None`` ends the text right after that character (a JSON string's closing quote).
Automaton = Dict[str, Tuple[bool, List[Tuple[Ranges, Optional[str]]]]]


def _r(*pairs: Tuple[str, str]) -> Ranges:
    return tuple((ord(a), ord(b)) for a, b in pairs)


def _minus(ranges: Ranges, points: Sequence[int]) -> Ranges:
    out: List[Tuple[int, int]] = []
    for lo, hi in ranges:
        cur = lo
        for p in sorted(p for p in points if lo <= p <= hi):
            if cur <= p - 1:
                out.append((cur, p - 1))
            cur = p + 1
        if cur <= hi:
            out.append((cur, hi))
    return tuple(out)


_HEX = _r(("0", "9"), ("A", "F"), ("a", "f"))

#: The body of a JSON string after its opening quote, up to and including the closing
#: quote (upstream's: any \uXXXX escape, no surrogate pairing).
JSON_STRING_BODY: Tuple[str, Automaton] = ("s", {
    "s": (False, [(_minus(((0x20, MAX_CP),), [ord('"'), ord("\\")]), "s"),
                  (_r(('"', '"')), None), (_r(("\\", "\\")), "e")]),
    "e": (False, [(_r(('"', '"'), ("/", "/"), ("\\", "\\"), ("b", "b"), ("f", "f"), ("n", "n"),
                      ("r", "r"), ("t", "t")), "s"), (_r(("u", "u")), "u1")]),
    "u1": (False, [(_HEX, "u2")]),
    "u2": (False, [(_HEX, "u3")]),
    "u3": (False, [(_HEX, "u4")]),
    "u4": (False, [(_HEX, "s")]),
})

#: ``[a-zA-Z_][a-zA-Z0-9_]*`` (an XML argument name).
IDENTIFIER: Tuple[str, Automaton] = ("i0", {
    "i0": (False, [(_r(("A", "Z"), ("_", "_"), ("a", "z")), "i1")]),
    "i1": (True, [(_r(("0", "9"), ("A", "Z"), ("_", "_"), ("a", "z")), "i1")]),
})


class _AhoCorasick:
    """Matches any of ``patterns``; state 0 matched nothing, a state in ``hit`` ended a
    match."""

    def __init__(self, patterns: Sequence[str]):
        self.goto: List[Dict[str, int]] = [{}]
        self.hit = set()
        for p in patterns:
            s = 0
            for ch in p:
                nxt = self.goto[s].get(ch)
                if nxt is None:
                    nxt = len(self.goto)
                    self.goto.append({})
                    self.goto[s][ch] = nxt
                s = nxt
            self.hit.add(s)
        self.alphabet = sorted({ord(ch) for p in patterns for ch in p})
        self.fail = [0] * len(self.goto)
        order, queue = [], list(self.goto[0].values())
        while queue:
            s = queue.pop(0)
            order.append(s)
            for ch, t in self.goto[s].items():
                f = self.fail[s]
                while f and ch not in self.goto[f]:
                    f = self.fail[f]
                self.fail[t] = self.goto[f].get(ch, 0) if self.goto[f].get(ch, 0) != t else 0
                if self.fail[t] in self.hit:
                    self.hit.add(t)
                queue.append(t)

    def step(self, s: int, ch: str) -> int:
        while s and ch not in self.goto[s]:
            s = self.fail[s]
        return self.goto[s].get(ch, 0)


def char_class(ranges: Ranges) -> str:
    """An EBNF character class (or one-character literal) matching the code point ranges."""
    def esc(c: int) -> str:
        ch = chr(c)
        if ch in "\\]-^[":
            return "\\" + ch
        if 0x20 < c < 0x7F:
            return ch
        if c <= 0xFF:
            return "\\x%02x" % c
        if c <= 0xFFFF:
            return "\\u%04x" % c
        return "\\U%08x" % c

    if len(ranges) == 1 and ranges[0][0] == ranges[0][1] and 0x20 <= ranges[0][0] < 0x7F:
        ch = chr(ranges[0][0])
        return '"' + ("\\" + ch if ch in '"\\' else ch) + '"'
    parts = []
    for lo, hi in ranges:
        parts.append(esc(lo) if lo == hi else esc(lo) + "-" + esc(hi))
    return "[" + "".join(parts) + "]"


def _merge(ranges: List[Tuple[int, int]]) -> Ranges:
    out: List[List[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((a, b) for a, b in out)


def excluding_rules(automaton: Tuple[str, Automaton], excludes: Sequence[str],
                    name: str) -> Tuple[Optional[str], List[Tuple[str, str]]]:
    """EBNF rules for the texts of ``automaton`` in which no string of ``excludes`` occurs:
    ``(root rule name, [(name, body), ...])``, the rules named ``name``, ``name_1``, ...;
    ``(None, [])`` when no text is left."""
    start, states = automaton
    ac = _AhoCorasick([e for e in excludes if e])
    alphabet = ac.alphabet

    # Product states reachable from (start, 0), with their edges.
    edges: Dict[Tuple[str, int], List[Tuple[Ranges, Optional[Tuple[str, int]]]]] = {}
    todo = [(start, 0)]
    while todo:
        ps = todo.pop()
        if ps in edges:
            continue
        d, a = ps
        out: List[Tuple[Ranges, Optional[Tuple[str, int]]]] = []
        for ranges, target in states[d][1]:
            split: Dict[Optional[Tuple[str, int]], List[Tuple[int, int]]] = {}
            inside = [c for c in alphabet if any(lo <= c <= hi for lo, hi in ranges)]
            for c in inside:
                na = ac.step(a, chr(c))
                if na in ac.hit:
                    continue
                split.setdefault(None if target is None else (target, na), []).append((c, c))
            rest = _minus(ranges, inside)
            if rest:
                key = None if target is None else (target, 0)
                split.setdefault(key, []).extend(rest)
            for key, rs in split.items():
                out.append((_merge(rs), key))
                if key is not None:
                    todo.append(key)
        edges[ps] = out

    # Keep the states that can still end.
    productive = {ps for ps in edges if states[ps[0]][0] or any(t is None for _, t in edges[ps])}
    changed = True
    while changed:
        changed = False
        for ps, out in edges.items():
            if ps not in productive and any(t in productive for _, t in out if t is not None):
                productive.add(ps)
                changed = True
    if (start, 0) not in productive:
        return None, []
    names: Dict[Tuple[str, int], str] = {(start, 0): name}
    for ps in edges:
        if ps in productive and ps not in names:
            names[ps] = f"{name}_{len(names)}"
    rules = []
    for ps, rule_name in names.items():
        grouped: Dict[Optional[Tuple[str, int]], List[Tuple[int, int]]] = {}
        for ranges, target in edges[ps]:
            if target is None or target in productive:
                grouped.setdefault(target, []).extend(ranges)
        alts = ['""'] if states[ps[0]][0] else []
        for target, rs in grouped.items():
            cls = char_class(_merge(rs))
            alts.append(cls if target is None else f"{cls} {names[target]}")
        rules.append((rule_name, " | ".join(alts) if alts else '""'))
    return name, rules


# ---- literals ---------------------------------------------------------------------------


def allowed_text(text: str, excludes: Sequence[str]) -> bool:
    return not any(e and e in text for e in excludes)


def _encoded(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)[1:-1]


def allowed_literal(value: Any, excludes: Sequence[str], raw_string: bool = False) -> bool:
    """Whether a JSON value written as a literal keeps clear of ``excludes`` (strings as
    written in JSON, or raw with ``raw_string``; object keys and nested values included)."""
    if not excludes:
        return True
    if isinstance(value, str):
        return allowed_text(value if raw_string else _encoded(value), excludes)
    if isinstance(value, list):
        return all(allowed_literal(v, excludes) for v in value)
    if isinstance(value, dict):
        return all(allowed_literal(k, excludes) and allowed_literal(v, excludes) for k, v in value.items())
    return True


# ---- JSON schemas -----------------------------------------------------------------------

_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_ONE = ("items", "additionalProperties", "unevaluatedProperties", "additionalItems",
               "unevaluatedItems", "contains", "propertyNames", "not", "if", "then", "else")
_SCHEMA_LISTS = ("prefixItems", "allOf", "anyOf", "oneOf", "items")


def prepare_schema(schema: Any, excludes: Sequence[str], warn) -> Any:
    """``schema`` with upstream's rules for ``excludes`` applied before conversion: plain
    strings (no ``pattern`` / ``format``) lose ``minLength`` / ``maxLength`` (``warn(path,
    message)`` is told), ``enum`` / ``const`` values containing an excluded string are
    removed (an empty choice is the ``false`` schema)."""

    def walk(s: Any, path: str) -> Any:
        if not isinstance(s, dict):
            return s
        out = dict(s)
        t = s.get("type")
        is_str = t == "string" or (isinstance(t, list) and "string" in t)
        if is_str and "pattern" not in s and "format" not in s and ("minLength" in s or "maxLength" in s):
            out.pop("minLength", None)
            out.pop("maxLength", None)
            warn(path, "minLength / maxLength of a string are not applied together with the "
                       "json_schema format's excludes")
        if "const" in s and not allowed_literal(s["const"], excludes):
            return False
        if isinstance(s.get("enum"), list):
            kept = [v for v in s["enum"] if allowed_literal(v, excludes)]
            if not kept:
                return False
            out["enum"] = kept
        props = s.get("properties")
        if isinstance(props, dict):
            # A declared name that contains an excluded string cannot be written.
            dropped = [n for n in props if not allowed_literal(n, excludes)]
            if dropped:
                required = s.get("required")
                if isinstance(required, list) and any(n in required for n in dropped):
                    return False
                out["properties"] = {n: v for n, v in props.items() if n not in dropped}
                s = dict(s, properties=out["properties"])
        for k in _SCHEMA_MAPS:
            if isinstance(s.get(k), dict):
                out[k] = {n: walk(v, f"{path}/{k}/{n}") for n, v in s[k].items()}
        for k in _SCHEMA_ONE:
            if isinstance(s.get(k), dict):
                out[k] = walk(s[k], f"{path}/{k}")
        for k in _SCHEMA_LISTS:
            if isinstance(s.get(k), list):
                out[k] = [walk(v, f"{path}/{k}/{i}") for i, v in enumerate(s[k])]
        return out

    return walk(schema, "#")


_PLAIN_STRING = 'string ::= "\\"" char* "\\""'


def filter_json_ebnf(text: str, excludes: Sequence[str]) -> Tuple[str, bool]:
    """The JSON-schema front end's EBNF with its plain-string rule (``string ::= "\\""
    char* "\\""``) keeping clear of ``excludes``. Returns ``(text, complete)``: ``complete``
    is False when other rules still match string characters unfiltered (property names of
    additional properties), which the caller reports."""
    lines = text.split("\n")
    taken = {ln.split(" ::= ", 1)[0] for ln in lines if " ::= " in ln}
    base = "string_excl"
    while any(n == base or n.startswith(base + "_") for n in taken):
        base += "_"
    root, rules = excluding_rules(JSON_STRING_BODY, excludes, base)
    out, replaced = [], False
    for ln in lines:
        if ln == _PLAIN_STRING:
            if root is None:
                raise ValueError("the json_schema format's excludes leave no JSON string")
            ln = 'string ::= "\\"" ' + root
            replaced = True
        out.append(ln)
    if not replaced:
        return text, not any(" char" in ln or ln.startswith("char ::=") for ln in lines)
    if out and out[-1] == "":
        out.pop()
    out += [f"{n} ::= {b}" for n, b in rules]
    out.append("")
    # ``char`` is left for the rules that still use it (additional property names).
    rest = [ln for ln in out if not ln.startswith("char ::=") and not ln.startswith("string ::=")]
    complete = not any(_uses(ln, "char") for ln in rest)
    return "\n".join(out), complete


def _uses(line: str, name: str) -> bool:
    import re

    body = line.split(" ::= ", 1)[1] if " ::= " in line else line
    body = re.sub(r'"(?:[^"\\]|\\.)*"', '""', body)
    body = re.sub(r"\[(?:[^\]\\]|\\.)*\]", "[]", body)
    return re.search(r"(?<![\w.\-])" + re.escape(name) + r"(?![\w.\-])", body) is not None
