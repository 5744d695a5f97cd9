"""A tiny grammar AST, its printer in xgrammar's EBNF dialect, and the JSON text encodings
(string characters with every escape form, hex escapes, automata → rules).

Expressions are tuples:

* ``("lit", text)``          a literal (printed as a quoted string)
* ``("cls", charset)``       one code point from a non-empty set
* ``("seq", (e, ...))``      sequence; ``EPS`` is the empty sequence
* ``("alt", (e, ...))``      choice
* ``("rep", e, lo, hi)``     repetition, ``hi`` None for unbounded
* ``("ref", name)``          a rule
* ``None``                   the empty language (never printed: pruned before printing)
"""

from __future__ import annotations

import warnings

from . import automaton as fa
from . import charset as cs
from . import regex as rx

EPS = ("seq", ())
NEVER = None


def lit(s: str):
    return ("lit", s) if s else EPS


def cls(c):
    return ("cls", c) if c else NEVER


def ref(name: str):
    return ("ref", name)


def seq(*items):
    out = []
    last_lit = False
    for e in items:
        if e is None:
            return None
        k = e[0]
        if k == "seq":
            # (a sequence's items are already flat, no two literals adjacent: only its first
            # item can join the literal before it)
            xs = e[1]
            if xs:
                if last_lit and xs[0][0] == "lit":
                    out[-1] = ("lit", out[-1][1] + xs[0][1])
                    out.extend(xs[1:])
                else:
                    out.extend(xs)
                last_lit = xs[-1][0] == "lit"
        elif k == "lit":
            if last_lit:
                out[-1] = ("lit", out[-1][1] + e[1])
            else:
                out.append(e)
                last_lit = True
        else:
            out.append(e)
            last_lit = False
    if len(out) == 1:
        return out[0]
    return ("seq", tuple(out))


def alt(*items):
    n = len(items)
    if n == 2:  # (the common case, without the set)
        a, b = items
        if a is not None and b is not None and a[0] != "alt" and b[0] != "alt":
            return a if a == b else ("alt", items)
    elif n == 1:
        a = items[0]
        if a is None or a[0] != "alt":
            return a
    out = []
    seen = set()
    for e in items:
        if e is None:
            continue
        for x in (e[1] if e[0] == "alt" else (e,)):
            if x not in seen:
                seen.add(x)
                out.append(x)
    if not out:
        return None
    if len(out) == 1:
        return out[0]
    return ("alt", tuple(out))


#: The largest repetition bound the EBNF front end takes (csrc/front/front.h,
#: XGR_FRONT_MAX_REPEAT).
MAX_REPEAT = 1_000_000_000


def rep(e, lo: int, hi):
    if hi is not None and hi < lo:
        return None
    if hi is not None and hi > MAX_REPEAT and lo <= MAX_REPEAT:
        # No output reaches 10^9 repetitions (a gigabyte of text): the bound is kept in
        # effect by every real length limit, but the grammar cannot spell it. Said aloud.
        warnings.warn(f"a maximum of {hi} repetitions is above the EBNF limit {MAX_REPEAT} and is "
                      "written as no upper bound (no output can reach it)", stacklevel=2)
        hi = None
    if e is None:
        return EPS if lo == 0 else None
    if hi == 0 or e == EPS:
        return EPS
    if lo == 1 and hi == 1:
        return e
    return ("rep", e, lo, hi)


def opt(e):
    return rep(e, 0, 1)


# ---------------------------------------------------------------- printing

def _esc_cp(cp: int, in_class: bool) -> str:
    if cp == 0x22 and not in_class:
        return '\\"'
    if cp == 0x5C:
        return "\\\\"
    if in_class and cp in (0x5D, 0x5B, 0x2D, 0x5E):
        return "\\" + chr(cp)
    if cp == 0x0A:
        return "\\n"
    if cp == 0x0D:
        return "\\r"
    if cp == 0x09:
        return "\\t"
    if cp < 0x20 or cp == 0x7F:
        return "\\x%02x" % cp
    if cp < 0x7F:
        return chr(cp)
    if cp <= 0xFFFF:
        return "\\u%04x" % cp
    return chr(cp)


_class_text: dict = {}


def _print_class(c) -> str:
    t = _class_text.get(c)
    if t is None:
        t = _print_class_uncached(c)
        if len(_class_text) > 8192:
            _class_text.clear()
        _class_text[c] = t
    return t


#: JSON whitespace, spelled in the order upstream xgrammar prints it (text that code written
#: against upstream looks for in a printed grammar).
_JSON_WS = cs.of_chars(" \n\t\r")


def _print_class_uncached(c) -> str:
    if c == _JSON_WS:
        return "[ \\n\\r\\t]"
    neg = cs.difference(cs.complement(c), cs.normalize([(cs.SURR_LO, cs.SURR_HI)]))
    use_neg = len(neg) < len(c)
    body = neg if use_neg else c
    parts = []
    for lo, hi in body:
        if lo == hi:
            parts.append(_esc_cp(lo, True))
        elif hi == lo + 1:
            parts.append(_esc_cp(lo, True) + _esc_cp(hi, True))
        else:
            parts.append(_esc_cp(lo, True) + "-" + _esc_cp(hi, True))
    if use_neg and not body:
        return "[^\\x00-" + chr(cs.MAX_CP) + "]" if not c else "[\\x00-" + chr(cs.MAX_CP) + "]"
    return ("[^" if use_neg else "[") + "".join(parts) + "]"


_lit_text: dict = {}


def _print_lit(t: str) -> str:
    r = _lit_text.get(t)
    if r is None:
        if t.isascii() and t.isprintable():  # (_esc_cp writes these as is, but " and \)
            r = '"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"'
        else:
            r = '"' + "".join([_esc_cp(ord(ch), False) for ch in t]) + '"'
        if len(_lit_text) > 16384:
            _lit_text.clear()
        _lit_text[t] = r
    return r


def print_expr(e, prec: int = 0) -> str:
    """prec: 0 = alternatives allowed, 1 = inside a sequence, 2 = operand of a quantifier."""
    return print_refs(e, prec, [])


#: id(expression) -> (expression, text at prec 0, references, several parts): printed texts
#: known without a walk, for expression objects that recur in every conversion (the string
#: formats' expressions, shipped with their text: format_exprs). Keyed by identity (the entry
#: keeps its expression alive, so its id cannot be reused while the entry exists); the text
#: is print_refs' own (tests/json_schema/test_format_exprs.py rebuilds it).
_print_memo: dict = {}


def print_refs(e, prec: int, out: list) -> str:
    """The EBNF text of expression ``e`` (prec: 0 = alternatives allowed, 1 = inside a
    sequence, 2 = operand of a quantifier), also appending to ``out`` the rule names ``e``
    refers to, in walk_refs' order (left to right): finalize prints and collects references
    in one pass. Adjacent literals (and one-character classes) of a sequence print as one."""
    k = e[0]
    if k == "ref":
        out.append(e[1])
        return e[1]
    if k == "lit":
        return _print_lit(e[1])
    if k == "cls":
        c = e[1]
        if len(c) == 1 and c[0][0] == c[0][1]:
            return _print_lit(chr(c[0][0]))
        return _print_class(c)
    if _print_memo:
        m = _print_memo.get(id(e))
        if m is not None and m[0] is e:
            out.extend(m[2])
            s = m[1]
            if k == "alt":
                return "(" + s + ")" if prec >= 1 else s
            if k == "seq":
                return "(" + s + ")" if prec >= 2 and m[3] else s
            return s
    if k == "seq":
        xs = e[1]
        if not xs:
            return '""'
        parts = []
        pending = None
        for x in xs:
            kx = x[0]
            if kx == "ref":
                if pending is not None:
                    parts.append(_print_lit(pending))
                    pending = None
                r = x[1]
                out.append(r)
                parts.append(r)
            elif kx == "lit":
                pending = x[1] if pending is None else pending + x[1]
            elif kx == "cls" and len(x[1]) == 1 and x[1][0][0] == x[1][0][1]:
                ch = chr(x[1][0][0])
                pending = ch if pending is None else pending + ch
            else:
                if pending is not None:
                    parts.append(_print_lit(pending))
                    pending = None
                parts.append(print_refs(x, 1, out))
        if pending is not None:
            parts.append(_print_lit(pending))
        s = " ".join(parts)
        return "(" + s + ")" if prec >= 2 and len(parts) > 1 else s
    if k == "alt":
        parts = []
        for x in e[1]:
            if x[0] == "ref":
                out.append(x[1])
                parts.append(x[1])
            else:
                parts.append(print_refs(x, 1, out))
        s = " | ".join(parts)
        return "(" + s + ")" if prec >= 1 else s
    if k == "rep":
        inner = print_refs(e[1], 2, out)
        lo, hi = e[2], e[3]
        if hi is None:
            q = "*" if lo == 0 else ("+" if lo == 1 else "{%d,}" % lo)
        elif lo == 0 and hi == 1:
            q = "?"
        elif lo == hi:
            q = "{%d}" % lo
        else:
            q = "{%d,%d}" % (lo, hi)
        if e[1][0] == "rep":
            inner = "(" + inner + ")"
        return inner + q
    raise AssertionError(k)


def walk_refs(e, out):
    if e is None:
        return
    k = e[0]
    if k == "ref":
        out.append(e[1])
    elif k == "seq" or k == "alt":
        for x in e[1]:
            if x is None:
                continue
            kx = x[0]
            if kx == "ref":
                out.append(x[1])
            elif kx != "lit" and kx != "cls":  # (leaves inline: most nodes are leaves)
                walk_refs(x, out)
    elif k == "rep":
        walk_refs(e[1], out)


def _productive(e, prod) -> bool:
    k = e[0]
    if k == "lit" or k == "cls":
        return True
    if k == "ref":
        return e[1] in prod
    if k == "seq":
        for x in e[1]:
            kx = x[0]
            if kx == "ref":
                if x[1] not in prod:
                    return False
            elif kx != "lit" and kx != "cls" and not _productive(x, prod):
                return False
        return True
    if k == "alt":
        for x in e[1]:
            kx = x[0]
            if kx == "ref":
                if x[1] in prod:
                    return True
            elif kx == "lit" or kx == "cls" or _productive(x, prod):
                return True
        return False
    if k == "rep":
        return e[2] == 0 or _productive(e[1], prod)
    raise AssertionError(k)


def _prune(e, prod):
    k = e[0]
    if k in ("lit", "cls"):
        return e
    if k == "ref":
        return e if e[1] in prod else None
    if k == "seq":
        return seq(*[_prune(x, prod) for x in e[1]])
    if k == "alt":
        return alt(*[_prune(x, prod) for x in e[1]])
    if k == "rep":
        return rep(_prune(e[1], prod), e[2], e[3])
    raise AssertionError(k)


def _rename(e, m):
    k = e[0]
    if k == "ref":
        return ("ref", m.get(e[1], e[1]))
    if k in ("seq", "alt"):
        return (k, tuple(_rename(x, m) for x in e[1]))
    if k == "rep":
        return ("rep", _rename(e[1], m), e[2], e[3])
    return e


class Grammar:
    """Rules in creation order; names are unique identifiers chosen by the caller."""

    def __init__(self):
        self.rules: dict = {}
        self.may_be_empty = False
        #: name -> attribute group printed after the name (``"[max_chars=64]"``); such rules
        #: are never merged with another (the emitter interns bodies, not attributes)
        self.attrs: dict = {}
        #: names of rules defined outside this grammar (productive, never printed): the core's
        #: rules for definitions that a part's rules refer to (json_schema._convert_parts)
        self.external: set = set()

    def has(self, name):
        return name in self.rules

    def define(self, name, body):
        self.rules[name] = body

    def unique(self, base: str) -> str:
        if base not in self.rules:
            return base
        i = 1
        while f"{base}_{i}" in self.rules:
            i += 1
        return f"{base}_{i}"

    def finalize(self, root: str) -> str | None:
        """Prunes unproductive parts, drops unreachable rules and prints (rules with equal
        bodies are merged by the emitter). Returns None when the root derives nothing."""
        rules = {k: v for k, v in self.rules.items() if v is not None}
        ext = self.external
        # Every rule's text and references in one walk (print_refs): nearly every rule is
        # reachable and productive, so printing before the reachability pass wastes little.
        refs = {}
        texts = {}
        missing = False
        known = rules if not ext else {**rules, **dict.fromkeys(ext)}
        for name, body in rules.items():
            if name in _SHARED_PRINT:
                hit = _body_text.get(body)
                if hit is None:
                    out: list = []
                    hit = (print_refs(body, 0, out), tuple(out))
                    if len(_body_text) > 256:
                        _body_text.clear()
                    _body_text[body] = hit
                texts[name], out = hit
            else:
                out = []
                texts[name] = print_refs(body, 0, out)
            refs[name] = out
            if not missing and not all(map(known.__contains__, out)):
                missing = True
        # Productive rules: worklist, re-checking the users of a rule that became productive.
        prod: set = set(ext)
        if not self.may_be_empty and not missing and len(rules) == len(self.rules):
            # Every rule is defined and non-empty by construction; only recursion can make a
            # rule unproductive, and the emitter flags that case (may_be_empty).
            prod.update(rules)
            work = []
        else:
            work = list(rules)
        rev: dict = {}
        if work:
            # One pass callees-first (post-order from every rule) finds nearly every
            # productive rule with one check each; only rules on reference cycles whose
            # productivity depends on a later rule are left to the worklist below. (The
            # result is the same least fixpoint: every rule added is productive.)
            done: set = set()
            for top in rules:
                if top in done:
                    continue
                done.add(top)
                stack = [(top, iter(refs[top]))]
                while stack:
                    name, it = stack[-1]
                    for r in it:
                        if r not in done and r in rules:
                            done.add(r)
                            stack.append((r, iter(refs[r])))
                            break
                    else:
                        stack.pop()
                        # (every reference productive: the body is, as alternatives are never
                        # empty; the walk only where one is not)
                        if all(map(prod.__contains__, refs[name])) or _productive(rules[name], prod):
                            prod.add(name)
            work = [name for name in rules if name not in prod]
            # Reverse edges of the rules still waiting only: every other user is productive
            # already, and the worklist skips productive users.
            for name in work:
                for r in refs[name]:
                    rev.setdefault(r, set()).add(name)
        while work:
            name = work.pop()
            if name in prod:
                continue
            if _productive(rules[name], prod):
                prod.add(name)
                work.extend(u for u in rev.get(name, ()) if u not in prod)
        if root not in prod:
            return None
        if len(prod) != len(rules) + len(ext) or missing:
            # Only the bodies that mention an unproductive (or undefined) rule change.
            pruned = {}
            for k, v in rules.items():
                if k not in prod:
                    continue
                if all(r in prod for r in refs[k]):
                    pruned[k] = v
                    continue
                v = _prune(v, prod)
                pruned[k] = v
                out = []
                texts[k] = print_refs(v, 0, out)
                refs[k] = out
            rules = pruned
        # Reachable rules in BFS order from the root (the printing order).
        order = [root]
        seen_r = {root}
        i = 0
        while i < len(order):
            for r in refs.get(order[i], ()):
                if r not in seen_r:
                    seen_r.add(r)
                    order.append(r)
            i += 1
        out = []
        attrs = self.attrs
        for name in order:
            if name in rules:
                out.append(f"{name}{attrs.get(name, '')} ::= {texts[name]}\n" if attrs else
                           f"{name} ::= {texts[name]}\n")
        return "".join(out)


_SHARED_PRINT = frozenset(("char", "char_u", "string", "number", "integer", "ws", "value", "object", "array"))
_body_text: dict = {}


# ---------------------------------------------------------------- automata → rules

def dfa_to_rules(g: Grammar, d: fa.DFA, name: str, tail, enc):
    """Emits a trimmed DFA as right-linear rules ``name``, ``name_1``, ...; ``tail`` is
    appended where the DFA accepts; ``enc(charset)`` gives the expression for one input
    code point. Returns the expression for the start state, or NEVER if empty."""
    if d.n == 0:
        return None
    indeg = [0] * d.n
    for s in range(d.n):
        for _, t in d.trans[s]:
            if t != s:
                indeg[t] += 1
    names = {}
    for s in range(d.n):
        if s == 0 or indeg[s] != 1:
            names[s] = name if s == 0 else f"{name}__q{s}"
    # Bound the nesting of inlined states (deep expressions are slow to print and parse).
    depth = {0: 0}
    order = [0]
    for s in order:
        for _, t in d.trans[s]:
            if t not in depth:
                depth[t] = 0 if t in names else depth[s] + 1
                if depth[t] >= 24:
                    names[t] = f"{name}__q{t}"
                    depth[t] = 0
                order.append(t)

    def body(s):
        loop = None
        alts = []
        for c, t in d.trans[s]:
            if t == s:
                loop = enc(c)
            elif t in names:
                alts.append(seq(enc(c), ref(names[t])))
            else:
                alts.append(seq(enc(c), body(t)))
        if d.accept[s]:
            alts.append(tail)
        rest = alt(*alts)
        if loop is not None:
            return seq(rep(loop, 0, None), rest)
        return rest

    for s, nm in names.items():
        g.define(nm, body(s))
    body = None  # a recursive closure is a reference cycle: break it (no work for the collector)
    return ref(name)


def dfa_to_expr(d: fa.DFA, enc):
    """Inline expression for a small acyclic DFA (no rules)."""
    if d.n == 0:
        return None
    memo = {}

    def body(s):
        if s in memo:
            return memo[s]
        alts = []
        for c, t in d.trans[s]:
            alts.append(seq(enc(c), body(t)))
        if d.accept[s]:
            alts.append(EPS)
        memo[s] = alt(*alts)
        return memo[s]

    try:
        return body(0)
    finally:
        body = None  # (cycle break, as in dfa_to_rules)


# ---------------------------------------------------------------- JSON text encodings

HEX = cs.normalize([(0x30, 0x39), (0x61, 0x66)])


def _split_range(lo, hi, width, base):
    if width == 0:
        return [()]
    p = base ** (width - 1)
    lo_d, lo_r = divmod(lo, p)
    hi_d, hi_r = divmod(hi, p)
    if lo_d == hi_d:
        return [((lo_d, lo_d),) + r for r in _split_range(lo_r, hi_r, width - 1, base)]
    out = []
    if lo_r != 0:
        out += [((lo_d, lo_d),) + r for r in _split_range(lo_r, p - 1, width - 1, base)]
        lo_d += 1
    tail = []
    if hi_r != p - 1:
        tail = [((hi_d, hi_d),) + r for r in _split_range(0, hi_r, width - 1, base)]
        hi_d -= 1
    if lo_d <= hi_d:
        out.append(((lo_d, hi_d),) + ((0, base - 1),) * (width - 1))
    return out + tail


_HEXCH = "0123456789abcdef"


def _digit_set(lo, hi):
    return cs.normalize((ord(_HEXCH[d]), ord(_HEXCH[d])) for d in range(lo, hi + 1))


_hex_cache: dict = {}


def _hex_expr(vals, width, memo):
    """What dfa_to_expr writes for the minimal DFA of the ``width``-digit lowercase hex
    numerals whose values lie in ``vals`` (normalized ranges), each digit set case-folded.
    Built straight from the residual sets, which are the minimal DFA's states (Myhill-Nerode:
    a state is the set of values its suffixes may take): the digits leading to the same
    residual share a transition, whose label is their characters, and transitions come in
    the order minimize() numbers them (by first code point). No NFA, subset construction or
    minimization."""
    if width == 0:
        return EPS
    mk = (vals, width)
    r = memo.get(mk)
    if r is not None:
        return r
    p = 16 ** (width - 1)
    groups: dict = {}
    for d in range(vals[0][0] // p, vals[-1][1] // p + 1):
        lo_d, hi_d = d * p, d * p + p - 1
        sub = tuple((max(lo, lo_d) - lo_d, min(hi, hi_d) - lo_d) for lo, hi in vals if lo <= hi_d and hi >= lo_d)
        if sub:
            ch = ord(_HEXCH[d])
            g = groups.get(sub)
            if g is None:
                groups[sub] = [(ch, ch)]
            else:
                g.append((ch, ch))
    rows = sorted(((cs.normalize(chars), sub) for sub, chars in groups.items()), key=lambda x: x[0][0][0])
    r = alt(*[seq(cls(cs.case_fold_ascii(c)), _hex_expr(sub, width - 1, memo)) for c, sub in rows])
    memo[mk] = r
    return r


def hex4(ranges):
    """Expression for 4 hex digits (either case) whose value lies in ``ranges``."""
    key = tuple(ranges)
    r = _hex_cache.get(key)
    if r is not None:
        return r
    vals = cs.normalize(key)
    r = _hex_expr(vals, 4, {}) if vals else None
    if len(_hex_cache) > 4096:
        _hex_cache.clear()
    _hex_cache[key] = r
    return r


_SHORT_ESC = {0x22: '"', 0x5C: "\\", 0x2F: "/", 0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t"}
RAW_OK = cs.difference(cs.SCALARS, cs.normalize([(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)]))
# Code points whose \uXXXX spelling is accepted in object *keys* (listed names, excluded
# names, key patterns): control characters and everything outside ASCII -- the characters
# json.dumps(ensure_ascii=True) escapes. Printable ASCII is accepted in its raw form (and
# '"', '\\', '/' in their short escapes) only: a subset of the spellings, never a superset,
# and much smaller key automata. String values accept every spelling.
U_ELIGIBLE = cs.difference(cs.SCALARS, ((0x20, 0x7F),))
_json_char_cache: dict = {}


def _u_escape(c):
    """Expression for the \\uXXXX spellings (surrogate pairs for astral) of the set ``c``."""
    alts = []
    bmp = cs.intersect(c, ((0, 0xFFFF),))
    if bmp:
        alts.append(seq(lit("\\u"), hex4(bmp)))
    astral = cs.intersect(c, ((0x10000, cs.MAX_CP),))
    if astral:
        pairs: dict = {}
        for lo, hi in astral:
            h1, l1 = 0xD800 + ((lo - 0x10000) >> 10), 0xDC00 + ((lo - 0x10000) & 0x3FF)
            h2, l2 = 0xD800 + ((hi - 0x10000) >> 10), 0xDC00 + ((hi - 0x10000) & 0x3FF)
            if h1 == h2:
                pairs.setdefault(((l1, l2),), []).append((h1, h1))
            else:
                pairs.setdefault(((l1, 0xDFFF),), []).append((h1, h1))
                if h2 > h1 + 1:
                    pairs.setdefault(((0xDC00, 0xDFFF),), []).append((h1 + 1, h2 - 1))
                pairs.setdefault(((0xDC00, l2),), []).append((h2, h2))
        merged: dict = {}
        for lows, highs in pairs.items():
            hk = cs.normalize(highs)
            merged[hk] = cs.union(merged.get(hk, cs.EMPTY), lows)
        for highs, lows in merged.items():
            alts.append(seq(lit("\\u"), hex4(highs), lit("\\u"), hex4(lows)))
    return alt(*alts)


def json_char_parts(c, full=False):
    """(raw-and-short-escape expression, \\u-escape code point set) for one JSON-string
    character whose decoded code point is in ``c``. ``full``: every \\u spelling, else only
    those of U_ELIGIBLE code points. Lone surrogates are never produced."""
    c = cs.intersect(c, cs.SCALARS)
    alts = []
    raw = cs.intersect(c, RAW_OK)
    if raw:
        alts.append(cls(raw))
    short = [ord(ch) for cp, ch in _SHORT_ESC.items() if cs.contains(c, cp)]
    if short:
        alts.append(seq(lit("\\"), cls(cs.normalize((x, x) for x in short))))
    u = c if full else cs.intersect(c, U_ELIGIBLE)
    return alt(*alts), u


def json_char(c, full=False):
    """Expression for one JSON-string character whose decoded code point is in ``c`` (see
    json_char_parts)."""
    key = (c, full)
    r = _json_char_cache.get(key)
    if r is not None:
        return r
    base, u = json_char_parts(c, full)
    r = alt(base, _u_escape(u) if u else None)
    if len(_json_char_cache) > 4096:
        _json_char_cache.clear()
    _json_char_cache[key] = r
    return r
