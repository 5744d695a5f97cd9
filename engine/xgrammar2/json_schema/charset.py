"""Sets of Unicode code points as sorted, disjoint, non-adjacent inclusive ranges.

A charset is a plain ``tuple`` of ``(lo, hi)`` pairs so it can be hashed and compared
cheaply; every function here returns a normalized tuple.
"""

from __future__ import annotations

import bisect

MAX_CP = 0x10FFFF
SURR_LO, SURR_HI = 0xD800, 0xDFFF

EMPTY: tuple = ()
ALL: tuple = ((0, MAX_CP),)
# Code points a JSON text can carry: everything but the UTF-16 surrogates, which have no
# UTF-8 encoding and, as lone \u escapes, no meaning as characters.
SCALARS: tuple = ((0, SURR_LO - 1), (SURR_HI + 1, MAX_CP))


def normalize(ranges) -> tuple:
    rs = sorted((lo, hi) for lo, hi in ranges if lo <= hi)
    out: list = []
    for lo, hi in rs:
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


def of_chars(chars: str) -> tuple:
    return normalize((ord(c), ord(c)) for c in chars)


def single(cp: int) -> tuple:
    return ((cp, cp),)


def union(a: tuple, b: tuple) -> tuple:
    if not a:
        return b
    if not b:
        return a
    return normalize(a + b)


def complement(a: tuple, universe_hi: int = MAX_CP) -> tuple:
    out = []
    prev = 0
    for lo, hi in a:
        if lo > prev:
            out.append((prev, lo - 1))
        prev = hi + 1
    if prev <= universe_hi:
        out.append((prev, universe_hi))
    return tuple(out)


def intersect(a: tuple, b: tuple) -> tuple:
    out = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def difference(a: tuple, b: tuple) -> tuple:
    return intersect(a, complement(b))


def contains(a: tuple, cp: int) -> bool:
    if len(a) <= 4:
        for lo, hi in a:
            if cp < lo:
                return False
            if cp <= hi:
                return True
        return False
    i = bisect.bisect_right(a, (cp, MAX_CP + 1)) - 1
    return i >= 0 and a[i][0] <= cp <= a[i][1]


def size(a: tuple) -> int:
    return sum(hi - lo + 1 for lo, hi in a)


def case_fold_ascii(a: tuple) -> tuple:
    """Adds the other ASCII case of every ASCII letter in ``a``."""
    extra = []
    for lo, hi in a:
        for base, other in ((0x41, 0x61), (0x61, 0x41)):
            l2, h2 = max(lo, base), min(hi, base + 25)
            if l2 <= h2:
                extra.append((l2 - base + other, h2 - base + other))
    return union(a, normalize(extra)) if extra else a
