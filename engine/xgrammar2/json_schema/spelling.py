"""Automata over the *raw text* of JSON strings (the characters between the quotes, before
unescaping), for ``excludes``: substrings that string values and property names must not
contain, as written (``"a\\u0062"`` does not contain ``ab``; ``"a\\nb"`` contains ``\\n``).

A string constraint is an automaton over decoded code points (automaton.py). ``spell_dfa``
substitutes for every decoded character the JSON spellings the emitter allows for it (raw,
short escape, ``\\uXXXX``, surrogate pairs; grammar.json_char_parts), giving an automaton over
raw code points; ``avoid_dfa`` is the raw strings containing none of the excluded words. Their
intersection is exact: a raw text is accepted iff its decoding satisfies the constraint, it is
a spelling the emitter allows, and it contains no excluded word.
"""

from __future__ import annotations

from . import automaton as fa
from . import charset as cs
from . import grammar as G
from . import regex as rx

_SAFE = cs.difference(cs.normalize([(0x20, 0x7E)]), cs.of_chars('"\\'))

_cache: dict = {}
_CACHE_MAX = 512


def _cached(key, make):
    r = _cache.get(key)
    if r is None:
        r = make()
        if len(_cache) > _CACHE_MAX:
            _cache.clear()
        _cache[key] = r
    return r


def _lit(s: str):
    return rx.literal(s)


def _hex4_ast(ranges):
    """4 hex digits (either case) whose value lies in ``ranges``."""
    pats = []
    for lo, hi in ranges:
        for p in G._split_range(lo, hi, 4, 16):
            pats.append(rx.cat(*[("set", cs.case_fold_ascii(G._digit_set(a, b))) for a, b in p]))
    return rx.alt(*pats)


def char_ast(c, full: bool):
    """Regex AST over raw code points: the spellings of one JSON-string character whose
    decoded code point is in ``c`` (as grammar.json_char_parts: ``full`` admits every \\u
    spelling, else only those of grammar.U_ELIGIBLE)."""
    c = cs.intersect(c, cs.SCALARS)
    alts = []
    raw = cs.intersect(c, G.RAW_OK)
    if raw:
        alts.append(("set", raw))
    short = [ord(ch) for cp, ch in G._SHORT_ESC.items() if cs.contains(c, cp)]
    if short:
        alts.append(rx.cat(_lit("\\"), ("set", cs.normalize((x, x) for x in short))))
    u = c if full else cs.intersect(c, G.U_ELIGIBLE)
    bmp = cs.intersect(u, ((0, 0xFFFF),))
    if bmp:
        alts.append(rx.cat(_lit("\\u"), _hex4_ast(bmp)))
    astral = cs.intersect(u, ((0x10000, cs.MAX_CP),))
    for lo, hi in astral:
        h1, l1 = 0xD800 + ((lo - 0x10000) >> 10), 0xDC00 + ((lo - 0x10000) & 0x3FF)
        h2, l2 = 0xD800 + ((hi - 0x10000) >> 10), 0xDC00 + ((hi - 0x10000) & 0x3FF)
        if h1 == h2:
            parts = [((h1, h1), (l1, l2))]
        else:
            parts = [((h1, h1), (l1, 0xDFFF))]
            if h2 > h1 + 1:
                parts.append(((h1 + 1, h2 - 1), (0xDC00, 0xDFFF)))
            parts.append(((h2, h2), (0xDC00, l2)))
        for hr, lr in parts:
            alts.append(rx.cat(_lit("\\u"), _hex4_ast((hr,)), _lit("\\u"), _hex4_ast((lr,))))
    return rx.alt(*alts) if alts else rx.NOTHING


def literal_ast(s: str, key: bool):
    """The spellings Emitter.str_text allows for ``s``: printable ASCII raw, other
    characters every spelling (values) or the key spelling (keys)."""
    parts = []
    for ch in s:
        cp = ord(ch)
        if cs.contains(_SAFE, cp):
            parts.append(("set", cs.single(cp)))
        else:
            parts.append(char_ast(cs.single(cp), not key))
    return rx.cat(*parts) if parts else rx.EPS


def spell_dfa(d: fa.DFA, full: bool, limit=fa.DEFAULT_LIMIT) -> fa.DFA:
    """The raw spellings of the decoded strings of ``d`` (see module doc)."""
    return _cached(("spell", d.key(), full, limit), lambda: _spell(d, full, limit))


def _spell(d, full, limit):
    if d.n == 0:
        return d
    nfa = fa._NFA(limit * 8)
    nodes = [nfa.new() for _ in range(d.n)]
    asts: dict = {}
    for s in range(d.n):
        for c, t in d.trans[s]:
            a = asts.get(c)
            if a is None:
                a = asts[c] = char_ast(c, full)
            end = nfa.build(a, nodes[s])
            nfa.eps[end].append((0, nodes[t]))
    finals = frozenset(nodes[s] for s in range(d.n) if d.accept[s])
    return _determinize(nfa, nodes[0], finals, limit)


def _determinize(nfa, start, finals, limit):
    init = fa._closure(nfa, [start], False, False)
    keys = {init: 0}
    order = [init]
    trans = []
    accept = []
    i = 0
    while i < len(order):
        S = order[i]
        i += 1
        accept.append(not finals.isdisjoint(S))
        pairs = [(cset, t) for s in S for cset, t in nfa.edges[s]]
        row = []
        if pairs:
            for cset, tgts in fa._split(pairs):
                T = fa._closure(nfa, tgts, False, False)
                idx = keys.get(T)
                if idx is None:
                    idx = len(order)
                    if idx >= limit:
                        raise fa.AutomatonTooLarge("string spelling automaton exceeds the state limit")
                    keys[T] = idx
                    order.append(T)
                row.append((cset, idx))
        trans.append(row)
    return fa.minimize(fa.DFA(trans, accept))


def avoid_dfa(words) -> fa.DFA:
    """Strings of code points containing none of ``words`` (non-empty strings)."""
    words = tuple(words)
    return _cached(("avoid", words), lambda: fa.negate(fa.from_regex(
        rx.cat(rx.ANY_STAR, rx.alt(*[_lit(w) for w in words]), rx.ANY_STAR), limit=100000)))


def excluded_dfa(d: fa.DFA, full: bool, words, limit=fa.DEFAULT_LIMIT) -> fa.DFA:
    """Raw spellings of the strings of ``d`` that contain none of ``words``; raises
    automaton.AutomatonTooLarge past ``limit`` states."""
    words = tuple(words)
    return _cached(("excl", d.key(), full, words, limit),
                   lambda: fa.intersect(spell_dfa(d, full, limit * 4), avoid_dfa(words), limit * 4))


def literal_excluded(s: str, key: bool, words):
    """(DFA of the allowed spellings of the literal ``s`` containing none of ``words``,
    whether that is every allowed spelling)."""
    words = tuple(words)

    def make():
        if all(cs.contains(_SAFE, ord(ch)) for ch in s):
            # One spelling: the text itself.
            if any(w in s for w in words):
                return fa.DFA([], []), False
            return None, True
        every = fa.from_regex(literal_ast(s, key), limit=100000)
        ok = fa.intersect(every, avoid_dfa(words), 100000)
        return ok, ok.key() == every.key()

    return _cached(("lit", s, key, words), make)
