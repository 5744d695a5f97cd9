"""The converter's fast paths against the plain definitions they replace: the fused printer
(text and references of a rule in one walk), the raw printing of printable-ASCII literals and
strings, and the memoised number-automaton build (against Decimal comparisons)."""

import random
import re
from decimal import Decimal

from xgrammar2.json_schema import _cache, json_schema_to_ebnf
from xgrammar2.json_schema import grammar as G
from xgrammar2.json_schema import ir, numeric
from xgrammar2.json_schema.convert import Converter
from xgrammar2.json_schema.emit import _SAFE, Q, Emitter

_SCHEMAS = [
    {"type": "object", "properties": {"a\"b": {"type": "string", "pattern": "^[a-z]{2,5}$"},
                                      "n": {"type": "number", "minimum": 0, "maximum": 360},
                                      "t": {"enum": ["x\\y", "é", "tab\t"]},
                                      "r": {"$ref": "#/$defs/node"}},
     "required": ["n"], "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}},
                                           "additionalProperties": {"type": "integer"}}}},
    {"type": "array", "items": {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "null"},
                                          {"type": "number", "multipleOf": 0.01}]}, "minItems": 1},
]


def _expected_walk(e, out):  # walk_refs' definition: left to right, every reference
    k = e[0]
    if k == "ref":
        out.append(e[1])
    elif k in ("seq", "alt"):
        for x in e[1]:
            _expected_walk(x, out)
    elif k == "rep":
        _expected_walk(e[1], out)


def _quant(lo, hi):
    if hi is None:
        return "*" if lo == 0 else ("+" if lo == 1 else "{%d,}" % lo)
    if lo == 0 and hi == 1:
        return "?"
    return "{%d}" % lo if lo == hi else "{%d,%d}" % (lo, hi)


def _expected_print(e, prec):  # the printer's definition, one node at a time, no fast paths
    k = e[0]
    if k == "ref":
        return e[1]
    if k == "lit":
        return '"' + "".join(G._esc_cp(ord(ch), False) for ch in e[1]) + '"'
    if k == "cls":
        c = e[1]
        if len(c) == 1 and c[0][0] == c[0][1]:
            return _expected_print(("lit", chr(c[0][0])), prec)
        return G._print_class(c)
    if k == "seq":
        if not e[1]:
            return '""'
        merged: list = []  # adjacent literals / one-character classes print as one literal
        for x in e[1]:
            if x[0] == "cls" and len(x[1]) == 1 and x[1][0][0] == x[1][0][1]:
                x = ("lit", chr(x[1][0][0]))
            if x[0] == "lit" and merged and merged[-1][0] == "lit":
                merged[-1] = ("lit", merged[-1][1] + x[1])
            else:
                merged.append(x)
        s = " ".join(_expected_print(x, 1) for x in merged)
        return "(" + s + ")" if prec >= 2 and len(merged) > 1 else s
    if k == "alt":
        s = " | ".join(_expected_print(x, 1) for x in e[1])
        return "(" + s + ")" if prec >= 1 else s
    assert k == "rep", k
    inner = _expected_print(e[1], 2)
    if e[1][0] == "rep":
        inner = "(" + inner + ")"
    return inner + _quant(e[2], e[3])


def test_fused_printer_matches_print_expr_and_walk_refs():
    checked = 0
    for s in _SCHEMAS:
        for opts in ({}, {"any_whitespace": False, "indent": 2}):
            cx = Converter(s, index=False)
            em = Emitter(cx, **opts)
            u = cx.convert(s, "#")
            em.g.define("root", None)
            em.g.define("root", em.emit(u, "root", 0))
            em.drain()
            for body in em.g.rules.values():
                if body is None:
                    continue
                for prec in (0, 1, 2):
                    out: list = []
                    text = G.print_refs(body, prec, out)
                    assert text == G.print_expr(body, prec) == _expected_print(body, prec)
                    want: list = []
                    _expected_walk(body, want)
                    assert out == want
                    walked: list = []
                    G.walk_refs(body, walked)
                    assert out == walked
                checked += 1
    assert checked > 20


def test_printable_ascii_literals_and_strings_print_as_before():
    rng = random.Random(5)
    alphabet = [chr(c) for c in range(0, 0x90)] + ['"', "\\"] * 8 + ["é", "\u2028", "\U0001F600"]
    for _ in range(4000):
        t = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 7)))
        G._lit_text.clear()
        assert G._print_lit(t) == '"' + "".join(G._esc_cp(ord(ch), False) for ch in t) + '"'
        for key in (False, True):
            parts, run = [], []
            for ch in t:
                if ch in _SAFE:
                    run.append(ch)
                    continue
                if run:
                    parts.append(G.lit("".join(run)))
                    run = []
                parts.append(G.json_char(G.cs.single(ord(ch)), full=not key))
            if run:
                parts.append(G.lit("".join(run)))
            assert Emitter._str_text(t, key) == G.seq(Q, *parts, Q)


def _number_texts(rng):
    for _ in range(300):
        v = Decimal(rng.randint(-10**6, 10**6)).scaleb(-rng.randint(0, 4))
        yield format(v, "f")
    yield from ("0", "-0", "0.0", "1e2", "360", "360.0", "360.01", "-360", "00", "1.", ".5", "-", "12.340", "7")


_JSON_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")


def test_number_automaton_agrees_with_decimal_comparisons():
    rng = random.Random(11)
    cases = [dict(lo=Decimal(0), hi=Decimal(360)), dict(lo=Decimal(-360), hi=Decimal(360), hi_x=True),
             dict(lo=Decimal("0.5"), integer=True), dict(lo=Decimal(0), hi=Decimal("99.99"), mults=(Decimal("0.01"),)),
             dict(hi=Decimal(1000), mults=(Decimal(7),), nots=(Decimal(14),))]
    for kw in cases:
        n = ir.Num(**kw)
        numeric._cache.clear()
        d = numeric.number_dfa(n)
        accepted = 0
        for text in _number_texts(rng):
            got = d.run(text)
            if not got:
                continue
            accepted += 1
            # every accepted text is a JSON number satisfying the constraint
            v = Decimal(text)
            assert _JSON_NUMBER.fullmatch(text), (kw, text)
            if n.lo is not None:
                assert v > n.lo if n.lo_x else v >= n.lo
            if n.hi is not None:
                assert v < n.hi if n.hi_x else v <= n.hi
            for m in n.mults:
                assert v % m == 0
            for x in n.nots:
                assert v != x
            if n.integer:
                assert v == v.to_integral_value()
        assert accepted >= 3, kw
        # and the canonical texts of satisfying values are accepted
        for text in _number_texts(rng):
            if not text.lstrip("-")[:1].isdigit() or text in ("-0", "00") or text.endswith("."):
                continue
            v = Decimal(text)
            if text.startswith("-0") and v == 0:
                continue
            sat = ((n.lo is None or (v > n.lo if n.lo_x else v >= n.lo))
                   and (n.hi is None or (v < n.hi if n.hi_x else v <= n.hi))
                   and all(v % m == 0 for m in n.mults) and all(v != x for x in n.nots)
                   and (not n.integer or v == v.to_integral_value()))
            canon = format(v.normalize(), "f") if v != v.to_integral_value() else str(int(v))
            if sat and not n.integer:
                assert d.run(canon), (kw, canon)
            elif sat and n.integer:
                assert d.run(str(int(v))), (kw, text)


def test_conversions_unchanged_by_repeated_fast_paths():
    for s in _SCHEMAS:
        _cache.clear()
        a = json_schema_to_ebnf(s).ebnf
        _cache.clear()
        assert json_schema_to_ebnf(s).ebnf == a
