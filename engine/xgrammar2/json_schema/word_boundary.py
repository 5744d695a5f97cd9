"""A word boundary (``\\b``, ``\\B``) between two parts of an anchored pattern, rewritten away.

``\\b`` only compares the character before it with the one after it (ECMA-262 with the ``u``
flag: word characters are ``[A-Za-z0-9_]``; the start and the end of the string count as
non-word). When it sits at the top level of a concatenation, the part before it can be
split by its last character (a word character, another one, or none when the part is
empty) and the part after it by its first, and the boundary becomes a union of those pieces
without any assertion:

    L \\b R  =  L_w (R_n | R_e)  |  (L_n | L_e) R_w
    L \\B R  =  L_w R_w  |  (L_n | L_e) (R_n | R_e)

The pattern then takes the regular-expression path (repetitions stay counters, such as
``{1,256}``) instead of the exact automaton of lookarounds (automaton.from_regex), whose
subset construction for the common URL pattern
``^https?://(www\\.)?[-a-zA-Z0-9@:%._+~#=]{1,256}\\.[a-zA-Z0-9()]{1,6}\\b([-a-zA-Z0-9()@:%_+.~#?&//=]*)$``
passes the state limit (refused in 0.3-0.5 s before; upstream xgrammar and llguidance refuse
``\\b`` outright). Anything else (several boundaries, one inside a group, a lookahead, a part
that can be empty where the pattern is not anchored) is left as it is (None).
"""

from __future__ import annotations

from . import charset as cs
from . import regex as rx

_W = rx.WORD
_N = cs.complement(rx.WORD)


def drop_word_boundary(n):
    """The full-match-equivalent AST of search regex ``n`` without its one top-level word
    boundary, still with its ``^`` / ``$``; None when ``n`` is not of that shape."""
    if n[0] != "cat" or not rx.has_lookaround(n):
        return None
    items = list(n[1])
    at = [i for i, x in enumerate(items) if x[0] == "wordb"]
    if len(at) != 1:
        return None
    i = at[0]
    neg = items[i][1]
    left, right = items[:i], items[i + 1:]
    bol = bool(left) and left[0] == rx.BOL
    eol = bool(right) and right[-1] == rx.EOL
    if bol:
        left = left[1:]
    if eol:
        right = right[:-1]
    if any(rx.has_anchor(x) for x in left + right):
        return None
    ls = _ends(left, True)
    rs = _ends(right, False)
    if ls is None or rs is None:
        return None
    lw, ln, le = ls
    rw, rn, re_ = rs
    if (le and not bol) or (re_ and not eol):
        return None  # (an empty side would see the searched text around the match)
    eps_l = rx.EPS if le else rx.NOTHING
    eps_r = rx.EPS if re_ else rx.NOTHING
    if not neg:
        body = rx.alt(rx.cat(lw, rx.alt(rn, eps_r)), rx.cat(rx.alt(ln, eps_l), rw))
    else:
        body = rx.alt(rx.cat(lw, rw), rx.cat(rx.alt(ln, eps_l), rx.alt(rn, eps_r)))
    return rx.cat(*(([rx.BOL] if bol else []) + [body] + ([rx.EOL] if eol else [])))


def _ends(items, last):
    """(strings of cat(items) whose last (``last``) or first character is a word character,
    those where it is another one, whether cat(items) matches the empty string), or None
    when a part cannot be split."""
    if not items:
        return rx.NOTHING, rx.NOTHING, True
    if last:
        *rest, edge = items
    else:
        edge, *rest = items
    t = _split(edge, last)
    if t is None:
        return None
    other = rx.cat(*rest) if rest else rx.EPS
    w, nw = ((rx.cat(other, t[0]), rx.cat(other, t[1])) if last else (rx.cat(t[0], other), rx.cat(t[1], other)))
    if not t[2]:
        return w, nw, False
    r = _ends(rest, last)  # the edge part can be empty: the character comes from the rest
    if r is None:
        return None
    return rx.alt(w, r[0]), rx.alt(nw, r[1]), r[2]


def _split(x, last):
    """One AST node split by its last (``last``) or first character: (word-char strings,
    other strings, matches empty), or None."""
    k = x[0]
    if k == "set":
        return (("set", cs.intersect(x[1], _W)), ("set", cs.intersect(x[1], _N)), False)
    if k == "eps":
        return rx.NOTHING, rx.NOTHING, True
    if k == "cat":
        return _ends(list(x[1]), last)
    if k == "alt":
        parts = [_split(b, last) for b in x[1]]
        if any(p is None for p in parts):
            return None
        return (rx.alt(*[p[0] for p in parts]), rx.alt(*[p[1] for p in parts]), any(p[2] for p in parts))
    if k == "rep":
        body, lo, hi = x[1], x[2], x[3]
        if hi == 0:
            return rx.NOTHING, rx.NOTHING, True
        s = _split(body, last)
        if s is None or s[2]:
            return None  # (a body that can be empty: not split)
        more = rx.rep(body, max(lo - 1, 0), None if hi is None else hi - 1)
        w = rx.cat(more, s[0]) if last else rx.cat(s[0], more)
        nw = rx.cat(more, s[1]) if last else rx.cat(s[1], more)
        return w, nw, lo == 0
    return None
