"""Numeric ranges written as expressions, without an automaton.

``int_range_expr``: the integers of a range (``type: integer`` with bounds only), digit
ranges by width. ``num_range_expr``: the JSON numbers of a range whose bounds are integers
(``type: number``, ``minimum: 0``, ``maximum: 360``, ...), optionally multiples of 10^-s
(``multipleOf: 0.01``), the most common numeric constraints in real schemas. The general
case (decimal bounds, other ``multipleOf`` steps, excluded values) is the product automaton
of numeric.py; this module writes the same language as that
automaton (tests/json_schema/test_number_ranges.py compares the two exactly) at a fraction of
its cost: the product and its minimisation took 0.3-0.9 ms per range, the expression ~20 µs.
"""

from __future__ import annotations

import functools

from . import charset as cs
from . import grammar as G
from . import ir
from .grammar import alt, lit, opt, rep, seq

_DIGITS = cs.of_chars("0123456789")


def _fixed_width_range(lo: int, hi: int):
    """Digit strings of exactly len(str(lo)) == len(str(hi)) digits in [lo, hi] (no leading
    zero unless the number is 0)."""
    width = len(str(lo))
    out = []
    for pat in G._split_range(lo, hi, width, 10):
        parts = []
        run = 0
        for a, b in pat:
            if (a, b) == (0, 9):
                run += 1
                continue
            if run:
                parts.append(rep(G.cls(_DIGITS), run, run))
                run = 0
            parts.append(G.cls(((48 + a, 48 + b),)))
        if run:
            parts.append(rep(G.cls(_DIGITS), run, run))
        out.append(seq(*parts))
    return alt(*out)


def _nonneg_range(x: int, y):
    """Canonical decimal texts of the integers in [x, y] (y None: unbounded), x >= 0.
    Consecutive complete widths ([1-9][0-9]{w-1}) are merged into one repetition."""
    nz = G.cls(cs.of_chars("123456789"))
    dig = G.cls(_DIGITS)
    alts = []
    full_lo = None  # first width of a pending run of complete widths
    w0 = len(str(x))
    w = w0
    while True:
        bottom = 10 ** (w - 1) if w > 1 else 0
        top = 10 ** w - 1
        if y is not None and bottom > y:
            break
        if y is None and w > w0:
            start = full_lo if full_lo is not None else w
            alts.append(seq(nz, rep(dig, start - 1, None)))
            full_lo = None
            break
        lo = max(x, bottom)
        hi = top if y is None else min(y, top)
        if w > 1 and lo == bottom and hi == top:
            if full_lo is None:
                full_lo = w
        else:
            if full_lo is not None:
                alts.append(seq(nz, rep(dig, full_lo - 1, w - 2)))
                full_lo = None
            alts.append(_fixed_width_range(lo, hi))
        w += 1
    if full_lo is not None:
        alts.append(seq(nz, rep(dig, full_lo - 1, w - 2)))
    return alt(*alts)


def int_range_expr(n):
    lo = None if n.lo is None else int(ir._ceil(n.lo)) + (1 if n.lo_x and n.lo == ir._ceil(n.lo) else 0)
    hi = None if n.hi is None else int(ir._floor(n.hi)) - (1 if n.hi_x and n.hi == ir._floor(n.hi) else 0)
    if lo is not None and hi is not None and lo > hi:
        return None
    alts = []
    if hi is None or hi >= 0:
        alts.append(_nonneg_range(max(lo, 0) if lo is not None else 0, hi))
    if lo is None or lo < 0:
        # negative part: "-" then magnitudes in [max(1, -hi), -lo]
        mlo = 1 if hi is None or hi >= 0 else -hi
        mhi = None if lo is None else -lo
        alts.append(seq(lit("-"), _nonneg_range(mlo, mhi)))
    return alt(*alts)


# ---------------------------------------------------------------- numbers with integer bounds

#: Largest bound (in digits) written as an expression; past it the automaton of numeric.py.
MAX_DIGITS = 18

_NZ = G.cls(cs.of_chars("123456789"))
_DIG = G.cls(_DIGITS)
#: fraction classes: absent or only zeros / at least one non-zero digit / anything
_FZERO = opt(seq(lit("."), rep(G.cls(cs.of_chars("0")), 1, None)))
_FNZ = seq(lit("."), rep(_DIG, 0, None), _NZ, rep(_DIG, 0, None))
_FANY = opt(seq(lit("."), rep(_DIG, 1, None)))
_EXP = opt(seq(G.cls(cs.of_chars("eE")), opt(G.cls(cs.of_chars("+-"))), rep(_DIG, 1, None)))
# Texts of one sign class when every bound is 0 (an exponent is allowed then, numeric.py):
_ZERO_TEXT = seq(lit("0"), _FZERO, _EXP)  # value 0 (after an optional "-")
_POS_TEXT = seq(alt(seq(lit("0"), _FNZ), seq(_NZ, rep(_DIG, 0, None), _FANY)), _EXP)

NONE, ZERO, NZ, ANY = 0, 1, 2, 3  # fraction classes; ZERO & NZ == NONE, ANY & x == x
_FRACS = {ZERO: _FZERO, NZ: _FNZ, ANY: _FANY}
_FRACS_BY_PLACES: dict = {}


def _fracs(places):
    """The fraction classes of numbers that are multiples of 10^-places (None: any number):
    digits past the ``places``-th are zeros."""
    if places is None:
        return _FRACS
    f = _FRACS_BY_PLACES.get(places)
    if f is None:
        zeros = rep(G.cls(cs.of_chars("0")), 0, None)
        if places == 0:
            f = {ZERO: _FZERO, NZ: None, ANY: _FZERO}
        else:
            f = {ZERO: _FZERO,
                 NZ: seq(lit("."), alt(*[seq(rep(_DIG, j - 1, j - 1), _NZ, zeros) for j in range(1, places + 1)])),
                 ANY: opt(seq(lit("."), rep(_DIG, 1, places), zeros))}
        _FRACS_BY_PLACES[places] = f
    return f


def _decimal_places(m):
    """s when the multipleOf ``m`` is 10^-s (s >= 0: 1, 0.1, 0.01, ...), else None."""
    sign, digits, exp = m.normalize().as_tuple()
    if sign or digits != (1,) or not isinstance(exp, int) or exp > 0 or -exp > MAX_DIGITS:
        return None
    return -exp


def _meet(a: int, b: int) -> int:
    return a & b


def _integral_bound(k) -> bool:
    return k is None or (k == k.to_integral_value() and len(str(abs(int(k)))) <= MAX_DIGITS)


def num_range_expr(n):
    """num_range_expr_uncached, memoised per process (expressions are immutable: the same
    ranges recur across requests)."""
    return _num_range_memo(n.integer, n.lo, n.lo_x, n.hi, n.hi_x, n.mults, n.nots, n.nonint, n.notmults)


@functools.lru_cache(maxsize=1024)
def _num_range_memo(*fields):
    return num_range_expr_uncached(ir.Num(*fields))


def num_range_expr_uncached(n):
    """The JSON number texts of ``type: number`` with bounds, each None or an integer of at
    most MAX_DIGITS digits, and at most one ``multipleOf`` of the form 10^-s (1, 0.01: money
    and measurements): the language of ``numeric.number_dfa(n)``, or NotImplemented for any
    other ``n``. None when the range holds no number.

    Texts: ``-?(0|[1-9][0-9]*)(.[0-9]+)?``, ``-0`` included (value 0), and an exponent only
    when every bound is 0 and there is no multipleOf (numeric.py's format reader)."""
    if n.integer or n.nots or n.nonint or n.notmults or len(n.mults) > 1:
        return NotImplemented
    places = _decimal_places(n.mults[0]) if n.mults else None
    if n.mults and places is None:
        return NotImplemented
    if (n.lo is None and n.hi is None and not n.mults) or not (_integral_bound(n.lo) and _integral_bound(n.hi)):
        return NotImplemented
    if not n.mults and (n.lo is None or n.lo == 0) and (n.hi is None or n.hi == 0):
        return _sign_classes(n)
    fracs = _fracs(places)
    lo = None if n.lo is None else int(n.lo)
    hi = None if n.hi is None else int(n.hi)
    alts = []
    # Texts without "-": v = m >= 0, the magnitude m = I + f (integer part I, fraction f).
    if lo is None or lo < 0 or (lo == 0 and not n.lo_x):
        low = (0, ANY)
    else:
        low = (lo, NZ) if n.lo_x else (lo, ANY)  # v > lo: I > lo, or I == lo and f > 0
    if hi is None:
        high = None
    elif hi < 0 or (hi == 0 and n.hi_x):
        high = False
    else:
        high = (hi, NONE) if n.hi_x else (hi, ZERO)  # v <= hi: I < hi, or I == hi and f == 0
    if high is not False:
        alts.append(_side(low, high, fracs))
    # Texts with "-": v = -m; m <= -lo (or < -lo), m >= -hi (or > -hi).
    if lo is not None and (lo > 0 or (lo == 0 and n.lo_x)):
        mhigh = False
    elif lo is None:
        mhigh = None
    else:
        mhigh = (-lo, NONE) if n.lo_x else (-lo, ZERO)
    if hi is None or hi > 0 or (hi == 0 and not n.hi_x):
        mlow = (0, ANY)
    else:
        mlow = (-hi, NZ) if n.hi_x else (-hi, ANY)
    if mhigh is not False:
        e = _side(mlow, mhigh, fracs)
        if e is not None:
            alts.append(seq(lit("-"), e))
    alts = [a for a in alts if a is not None]
    return alt(*alts) if alts else None


def _side(low, high, fracs):
    """Magnitudes I + f with I >= a (the class ``ca`` at I == a, any fraction above) and,
    when ``high`` is given, I <= b (any fraction below b, the class ``cb`` at I == b);
    ``fracs``: the classes' expressions (_fracs)."""
    a, ca = low
    pieces = []  # (I from, I to or None, fraction class), increasing
    if high is None:
        pieces = [(a, a, ca), (a + 1, None, ANY)]
    else:
        b, cb = high
        if a > b:
            return None
        if a == b:
            pieces = [(a, a, _meet(ca, cb))]
        else:
            pieces = [(a, a, ca), (a + 1, b - 1, ANY), (b, b, cb)]
    merged = []
    for x, y, c in pieces:
        if c == NONE or (y is not None and x > y):
            continue
        if merged and merged[-1][2] == c and merged[-1][1] is not None and merged[-1][1] + 1 == x:
            merged[-1] = (merged[-1][0], y, c)
        else:
            merged.append((x, y, c))
    if not merged:
        return None
    return alt(*[seq(_nonneg_range(x, y), fracs[c]) for x, y, c in merged])


def _sign_classes(n):
    """Every bound 0: the texts of value 0 (with or without "-"), of positive values and of
    negative ones, exponents allowed."""
    want = {"zero", "pos", "neg"}
    if n.lo is not None:
        want -= {"neg", "zero"} if n.lo_x else {"neg"}
    if n.hi is not None:
        want -= {"pos", "zero"} if n.hi_x else {"pos"}
    alts = []
    if "zero" in want:
        alts.append(seq(opt(lit("-")), _ZERO_TEXT))
    if "pos" in want:
        alts.append(_POS_TEXT)
    if "neg" in want:
        alts.append(seq(lit("-"), _POS_TEXT))
    return alt(*alts) if alts else None
