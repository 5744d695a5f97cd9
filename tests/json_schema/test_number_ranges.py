"""``type: number`` ranges with integer bounds are written as expressions (ranges.num_range_expr)
instead of the product automaton of numeric.py; both must hold exactly the same texts.

Each case's expression is turned into an automaton (through the regex AST) and compared with
``numeric.number_dfa`` by difference both ways; then the grammar compiled by the core is
checked on texts around the bounds against Decimal arithmetic."""

from __future__ import annotations

import itertools
import json
import re
from decimal import Decimal

import pytest

import xgrammar2 as xgr
from xgrammar2.json_schema import automaton as fa
from xgrammar2.json_schema import json_schema_to_ebnf
from xgrammar2.json_schema import ir, numeric
from xgrammar2.json_schema import regex as rx
from xgrammar2.json_schema.ranges import num_range_expr
from xgrammar2.testing import _is_grammar_accept_string


def _to_regex(e):
    """A grammar expression of ranges.py (literals, classes, sequences, alternatives,
    repetitions) as a regex AST."""
    k = e[0]
    if k == "lit":
        return rx.literal(e[1])
    if k == "cls":
        return ("set", e[1])
    if k == "seq":
        return rx.cat(*[_to_regex(x) for x in e[1]])
    if k == "alt":
        return rx.alt(*[_to_regex(x) for x in e[1]])
    if k == "rep":
        return rx.rep(_to_regex(e[1]), e[2], e[3])
    raise AssertionError(f"unexpected expression node {k}")


def _same_language(a: fa.DFA, b: fa.DFA) -> bool:
    return fa.difference(a, b).is_empty() and fa.difference(b, a).is_empty()


BOUNDS = [None, -1000, -360, -10, -9, -1, 0, 1, 9, 10, 99, 100, 360, 999, 1000, 123456789]


def _cases():
    for lo, hi in itertools.product(BOUNDS, BOUNDS):
        if lo is None and hi is None:
            continue
        for lo_x, hi_x in itertools.product((False, True), repeat=2):
            if (lo is None and lo_x) or (hi is None and hi_x):
                continue
            yield lo, lo_x, hi, hi_x


def _num(lo, lo_x, hi, hi_x):
    return ir.Num(integer=False, lo=None if lo is None else Decimal(lo), lo_x=lo_x,
                  hi=None if hi is None else Decimal(hi), hi_x=hi_x)


def test_every_integer_bounded_range_holds_the_automatons_texts():
    checked = empty = 0
    for lo, lo_x, hi, hi_x in _cases():
        n = _num(lo, lo_x, hi, hi_x)
        e = num_range_expr(n)
        assert e is not NotImplemented, (lo, lo_x, hi, hi_x)
        d = numeric._build(n)
        if e is None:
            assert d.is_empty(), (lo, lo_x, hi, hi_x)
            empty += 1
            continue
        mine = fa.from_regex(_to_regex(e))
        assert _same_language(mine, d), (lo, lo_x, hi, hi_x)
        checked += 1
    assert checked > 400 and empty > 20


MULT_BOUNDS = [None, -10, -1, 0, 1, 9, 100]


def test_ranges_with_a_decimal_place_multiple_hold_the_automatons_texts():
    """multipleOf 1, 0.1, 0.01, 0.001 (digits past the last place are zeros), with and
    without integer bounds."""
    checked = 0
    for m in ("1", "0.1", "0.01", "0.001", "1E-4"):
        for lo, hi in itertools.product(MULT_BOUNDS, MULT_BOUNDS):
            for lo_x, hi_x in itertools.product((False, True), repeat=2):
                if (lo is None and lo_x) or (hi is None and hi_x):
                    continue
                n = ir.Num(integer=False, lo=None if lo is None else Decimal(lo), lo_x=lo_x,
                           hi=None if hi is None else Decimal(hi), hi_x=hi_x, mults=(Decimal(m),))
                e = num_range_expr(n)
                assert e is not NotImplemented, (m, lo, lo_x, hi, hi_x)
                d = numeric._build(n)
                if e is None:
                    assert d.is_empty(), (m, lo, lo_x, hi, hi_x)
                    continue
                assert _same_language(fa.from_regex(_to_regex(e)), d), (m, lo, lo_x, hi, hi_x)
                checked += 1
    assert checked > 400


@pytest.mark.parametrize("kw", [
    dict(lo=Decimal("0.5")),                       # a decimal bound
    dict(lo=Decimal(0), mults=(Decimal(2),)),     # multipleOf other than 10^-s
    dict(lo=Decimal(0), mults=(Decimal("0.5"),)),
    dict(hi=Decimal(9), mults=(Decimal(10),)),
    dict(lo=Decimal(0), mults=(Decimal("0.1"), Decimal("0.01"))),  # two of them
    dict(lo=Decimal("0.5"), mults=(Decimal("0.1"),)),  # a decimal bound
    dict(hi=Decimal(10), nots=(Decimal(3),)),      # an excluded value
    dict(lo=Decimal(0), nonint=True),             # not: {type: integer}
    dict(integer=True, lo=Decimal(1)),             # integers: int_range_expr
    dict(hi=Decimal(10) ** 30),                    # more digits than MAX_DIGITS
    dict(),                                        # plain
])
def test_other_constraints_are_left_to_the_automaton(kw):
    assert num_range_expr(ir.Num(**kw)) is NotImplemented


def _texts(k: int):
    """Number texts near k and near 0, with fractions, signs and exponents."""
    out = set()
    for base in {k - 1, k, k + 1, 0, 1, -1, -k}:
        s = str(abs(base))
        for sign in ("", "-"):
            for frac in ("", ".0", ".00", ".5", ".01", ".010", ".001", ".000001", ".9"):
                for exp in ("", "e0", "E+1", "e-2"):
                    out.add(f"{sign}{s}{frac}{exp}")
    out |= {"00", "01", "-", ".5", "1.", "+1", "-00"}
    return sorted(out)


@pytest.mark.parametrize("schema", [
    {"type": "number", "minimum": 0, "maximum": 360},
    {"type": "number", "exclusiveMinimum": -360, "maximum": 360},
    {"type": "number", "minimum": 1, "exclusiveMaximum": 31},
    {"type": "number", "minimum": 0},
    {"type": "number", "exclusiveMaximum": 0},
    {"type": "number", "minimum": -5, "maximum": -5},
    {"type": "number", "minimum": 0, "maximum": 100, "multipleOf": 0.01},
    {"type": "number", "exclusiveMinimum": -1, "multipleOf": 1},
])
def test_compiled_grammar_follows_decimal_arithmetic(schema):
    g = xgr.Grammar.from_json_schema(json.dumps(schema), any_whitespace=False)
    bounds = {key: v for key, v in schema.items() if key not in ("type", "multipleOf")}
    k = int(next(iter(bounds.values())))
    every_zero = all(v == 0 for v in bounds.values()) and "multipleOf" not in schema
    for text in _texts(k):
        try:
            v = Decimal(text)
            ok = (rx_json_number(text) and ("e" not in text.lower() or every_zero)
                  and (schema.get("minimum") is None or v >= schema["minimum"])
                  and (schema.get("exclusiveMinimum") is None or v > schema["exclusiveMinimum"])
                  and (schema.get("maximum") is None or v <= schema["maximum"])
                  and (schema.get("exclusiveMaximum") is None or v < schema["exclusiveMaximum"])
                  and ("multipleOf" not in schema or v % Decimal(str(schema["multipleOf"])) == 0))
        except ArithmeticError:
            ok = False
        got = _is_grammar_accept_string(g, text)
        assert got == ok, (schema, text)


def rx_json_number(text: str) -> bool:
    return re.fullmatch(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?", text) is not None


def test_an_empty_range_of_multiples_says_why():
    from xgrammar2.json_schema import UnsatisfiableSchemaError

    s = {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "multipleOf": 1}
    with pytest.raises(UnsatisfiableSchemaError, match="no multipleOf value"):
        json_schema_to_ebnf(json.dumps(s))
