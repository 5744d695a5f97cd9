"""Exact automata for constrained JSON numbers.

A number constraint (``ir.Num``) is compiled into a DFA over the characters of the JSON
number text by exploring the product of small deterministic "readers":

* the text format: integers are ``-?(0|[1-9][0-9]*)`` (no ``-0``); numbers add ``.[0-9]+``
  and, only when every bound is 0 and there is no ``multipleOf``, an exponent (a value
  compared with a non-zero decimal, or tested for divisibility, must be written without an
  exponent: a subset of the texts, never a superset);
* one comparator per bound / excluded value, comparing |value| with |K| digit by digit;
* one remainder automaton per ``multipleOf`` m = P / 10^s (value·10^s must be an integer
  divisible by P);
* a flag for "has a non-zero fractional digit" (``nonint``, from ``not: {type: integer}``).

The state space is bounded by ``LIMIT``; beyond it UnsupportedSchemaError is raised by the
caller.
"""

from __future__ import annotations

from decimal import Decimal

from . import automaton as fa
from . import ir

LIMIT = 5000
ALPHA = "0123456789-.eE+"
DIGITS = "0123456789"


class TooLarge(Exception):
    pass


def _split_dec(k: Decimal):
    """|k| as (integer digits without leading zeros, fraction digits without trailing zeros)."""
    t = format(abs(k).normalize(), "f")
    if "." in t:
        i, f = t.split(".")
    else:
        i, f = t, ""
    i = i.lstrip("0")
    f = f.rstrip("0")
    return i, f


# Comparator states: ("i", n, c) while reading integer digits (n significant digits so far,
# c lexicographic comparison with the first n digits of KI), ("f", j) in the fraction while
# equal so far, or a final verdict -1 / 1 (|v| < |K| / |v| > |K|).

def _cmp_step(st, ch, KI, KF, phase_change):
    if st == -1 or st == 1:
        return st
    if phase_change:  # '.'
        _, n, c = st
        if n < len(KI):
            return -1
        if c:
            return c
        return ("f", 0)
    d = ch
    if st[0] == "i":
        _, n, c = st
        if n == 0 and d == "0":
            return st
        if n + 1 > len(KI):
            return 1
        if c == 0:
            k = KI[n]
            c = -1 if d < k else (1 if d > k else 0)
        return ("i", n + 1, c)
    _, j = st
    k = KF[j] if j < len(KF) else "0"
    if d < k:
        return -1
    if d > k:
        return 1
    return ("f", min(j + 1, len(KF)))


def _cmp_final(st, KI, KF):
    if st == -1 or st == 1:
        return st
    if st[0] == "i":
        _, n, c = st
        if n < len(KI):
            return -1
        if c:
            return c
        return -1 if KF else 0
    _, j = st
    return -1 if j < len(KF) else 0


def _signed(neg, zero, m, K: Decimal):
    """sign(value - K) given sign, zero-ness and magnitude comparison m = sign(|v| - |K|)."""
    if zero:
        return -1 if K > 0 else (0 if K == 0 else 1)
    if not neg:
        return 1 if K <= 0 else m
    return -1 if K >= 0 else -m


def _mod_step(st, ch, P, s, phase_change):
    if st == "bad":
        return st
    ph, r, j = st
    if phase_change:
        return ("f", r, 0)
    d = ord(ch) - 48
    if ph == "i":
        return ("i", (r * 10 + d) % P, 0)
    if j < s:
        return ("f", (r * 10 + d) % P, j + 1)
    return st if d == 0 else "bad"


def _mod_final(st, P, s):
    if st == "bad":
        return False
    _, r, j = st
    return (r * pow(10, s - j, P)) % P == 0


def _mod_params(m: Decimal):
    sign, digits, exp = m.normalize().as_tuple()
    P = int("".join(map(str, digits)))
    s = -exp if exp < 0 else 0
    if exp > 0:
        P *= 10 ** exp
    return P, s


_FMT_ACCEPT = {"Z", "I", "F", "E"}


def _fmt_step(f, ch, integer, allow_exp):
    if f == "S":
        if ch == "-":
            return "M"
        if ch == "0":
            return "Z"
        if ch in DIGITS:
            return "I"
        return None
    if f == "M":
        if ch == "0":
            return None if integer else "Z"
        if ch in DIGITS:
            return "I"
        return None
    if f in ("Z", "I"):
        if f == "I" and ch in DIGITS:
            return "I"
        if ch == "." and not integer:
            return "F0"
        if ch in "eE" and allow_exp:
            return "E0"
        return None
    if f in ("F0", "F"):
        if ch in DIGITS:
            return "F"
        if ch in "eE" and allow_exp and f == "F":
            return "E0"
        return None
    if f == "E0":
        if ch in "+-":
            return "E1"
        if ch in DIGITS:
            return "E"
        return None
    if f in ("E1", "E"):
        return "E" if ch in DIGITS else None
    return None


_fmt_rows: dict = {}


def _fmt_row(f, integer, allow_exp):
    """[(ch, _fmt_step(f, ch, ...))] over ALPHA, the steps that are not None."""
    k = (f, integer, allow_exp)
    r = _fmt_rows.get(k)
    if r is None:
        r = _fmt_rows[k] = [(ch, f2) for ch in ALPHA for f2 in (_fmt_step(f, ch, integer, allow_exp),)
                            if f2 is not None]
    return r


_cache: dict = {}
#: code points of one row's transitions to one state (in ALPHA order) -> their charset
_row_sets: dict = {}


def number_dfa(n: ir.Num) -> fa.DFA:
    key = (n.integer, n.lo, n.lo_x, n.hi, n.hi_x, n.mults, n.nots, n.nonint, n.notmults)
    d = _cache.get(key)
    if d is None:
        d = _build(n)
        if len(_cache) > 1024:
            _cache.clear()
        _cache[key] = d
    return d


def _build(n: ir.Num) -> fa.DFA:
    comps = []  # (K, KI, KF, accept(cmp) -> bool)
    if n.lo is not None:
        comps.append((n.lo, (lambda c, x=n.lo_x: c > 0 or (c == 0 and not x))))
    if n.hi is not None:
        comps.append((n.hi, (lambda c, x=n.hi_x: c < 0 or (c == 0 and not x))))
    for v in n.nots:
        comps.append((v, (lambda c: c != 0)))
    comps = [(K,) + _split_dec(K) + (acc,) for K, acc in comps]
    mods = [(_mod_params(m), True) for m in n.mults] + [(_mod_params(m), False) for m in n.notmults]
    integer = n.integer
    allow_exp = (not integer and not mods and not n.nonint and all(K == 0 for K, _, _, _ in comps))
    for (P, s), _ in mods:
        if P * (s + 1) > LIMIT:
            raise TooLarge(f"multipleOf needs a {P * (s + 1)}-state remainder automaton")

    init = ("S", False, True, tuple(("i", 0, 0) for _ in comps), tuple(("i", 0, 0) for _ in mods), False)
    keys = {init: 0}
    order = [init]
    trans = []
    accept = []
    # Memos of this build: the comparator / remainder readers' next states depend on their own
    # states and the character only, which recur across many product states; and the rows'
    # code-point lists recur as well (the same digit ranges).
    c_next: dict = {}
    m_next: dict = {}
    i = 0
    while i < len(order):
        st = order[i]
        i += 1
        f, neg, zero, cst, mst, fracnz = st
        ok = f in _FMT_ACCEPT
        if ok:
            for (K, KI, KF, acc), c in zip(comps, cst):
                if not acc(_signed(neg, zero, _cmp_final(c, KI, KF), K)):
                    ok = False
                    break
        if ok:
            for ((P, s), want), m in zip(mods, mst):
                if _mod_final(m, P, s) != want:
                    ok = False
                    break
        if ok and n.nonint and not fracnz:
            ok = False
        accept.append(ok)
        row: dict = {}
        for ch, f2 in _fmt_row(f, integer, allow_exp):
            neg2, zero2, fracnz2 = neg, zero, fracnz
            if ch == "-" and f == "S":
                neg2 = True
                nxt = (f2, neg2, zero2, cst, mst, fracnz2)
            elif f2 in ("E0", "E1", "E"):
                nxt = (f2, neg2, zero2, cst, mst, fracnz2)
            else:
                dot = ch == "."
                if not dot and ch != "0":
                    zero2 = False
                    if f2 == "F":
                        fracnz2 = True
                ck = (cst, ch)
                c2 = c_next.get(ck)
                if c2 is None:
                    c2 = c_next[ck] = tuple([_cmp_step(c, ch, KI, KF, dot) for (K, KI, KF, _), c in zip(comps, cst)])
                if mods:
                    mk = (mst, ch)
                    m2 = m_next.get(mk)
                    if m2 is None:
                        m2 = m_next[mk] = tuple([_mod_step(m, ch, P, s, dot) for ((P, s), _), m in zip(mods, mst)])
                else:
                    m2 = ()
                if not n.nonint:
                    fracnz2 = False
                nxt = (f2, neg2, zero2, c2, m2, fracnz2)
            k = keys.get(nxt)
            if k is None:
                k = len(order)
                if k >= LIMIT:
                    raise TooLarge("number constraint automaton exceeds the state limit")
                keys[nxt] = k
                order.append(nxt)
            row.setdefault(k, []).append(ord(ch))
        out_row = []
        for k, v in row.items():
            vk = tuple(v)
            c = _row_sets.get(vk)
            if c is None:
                if len(_row_sets) > 4096:
                    _row_sets.clear()
                c = _row_sets[vk] = fa.cs.normalize((x, x) for x in vk)
            out_row.append((c, k))
        trans.append(out_row)
    return fa.minimize(fa.DFA(trans, accept))
