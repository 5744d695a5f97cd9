"""ECMA-262 regular expressions (the dialect of JSON Schema ``pattern``) to a small AST.

The AST is made of tuples so that equal expressions compare and hash equal:

* ``("set", charset)``            one code point from the set (empty set: matches nothing)
* ``("cat", (n1, n2, ...))``      concatenation
* ``("alt", (n1, n2, ...))``      alternation
* ``("rep", n, lo, hi)``          repetition, ``hi`` is ``None`` for unbounded
* ``("eps",)``                    the empty string
* ``("bol",)`` / ``("eol",)``     the ``^`` / ``$`` assertions (no multiline flag exists)

Semantics are those of a ``u``-flag regex: the unit is the code point, so an astral
character is one character, as it is for ``minLength``. Constructs that a regular grammar
cannot express exactly (lookaround, back-references, word boundaries) raise
:class:`RegexUnsupported`; malformed patterns raise :class:`RegexSyntaxError`.
"""

from __future__ import annotations

import unicodedata

from . import charset as cs


class RegexUnsupported(Exception):
    pass


class RegexSyntaxError(Exception):
    pass


EPS = ("eps",)
BOL = ("bol",)
EOL = ("eol",)
NOTHING = ("set", ())

DIGIT = ((0x30, 0x39),)
WORD = cs.normalize([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
SPACE = cs.normalize([(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
                      (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000),
                      (0xFEFF, 0xFEFF)])
DOT = cs.complement(cs.normalize([(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]))


def cat(*parts):
    out = []
    for p in parts:
        if p == NOTHING:
            return NOTHING
        if p[0] == "cat":
            out.extend(p[1])
        elif p != EPS:
            out.append(p)
    if not out:
        return EPS
    if len(out) == 1:
        return out[0]
    return ("cat", tuple(out))


def alt(*parts):
    out = []
    seen = set()
    sets = None
    for p in parts:
        if p[0] == "alt":
            items = p[1]
        else:
            items = (p,)
        for q in items:
            if q == NOTHING:
                continue
            if q[0] == "set":
                sets = q[1] if sets is None else cs.union(sets, q[1])
            elif q not in seen:
                seen.add(q)
                out.append(q)
    if sets is not None:
        out.insert(0, ("set", sets))
    if not out:
        return NOTHING
    if len(out) == 1:
        return out[0]
    return ("alt", tuple(out))


def rep(n, lo, hi):
    if hi is not None and hi < lo:
        raise RegexSyntaxError("numbers out of order in {} quantifier")
    if n == EPS or (hi == 0):
        return EPS
    if n == NOTHING:
        return EPS if lo == 0 else NOTHING
    if lo == 1 and hi == 1:
        return n
    return ("rep", n, lo, hi)


def literal(s: str):
    return cat(*[("set", cs.single(ord(c))) for c in s])


_GC_LONG = {
    "L": "Letter", "Lu": "Uppercase_Letter", "Ll": "Lowercase_Letter", "Lt": "Titlecase_Letter",
    "LC": "Cased_Letter", "Lm": "Modifier_Letter", "Lo": "Other_Letter", "M": "Mark",
    "Mn": "Nonspacing_Mark", "Mc": "Spacing_Mark", "Me": "Enclosing_Mark", "N": "Number",
    "Nd": "Decimal_Number", "Nl": "Letter_Number", "No": "Other_Number", "P": "Punctuation",
    "Pc": "Connector_Punctuation", "Pd": "Dash_Punctuation", "Ps": "Open_Punctuation",
    "Pe": "Close_Punctuation", "Pi": "Initial_Punctuation", "Pf": "Final_Punctuation",
    "Po": "Other_Punctuation", "S": "Symbol", "Sm": "Math_Symbol", "Sc": "Currency_Symbol",
    "Sk": "Modifier_Symbol", "So": "Other_Symbol", "Z": "Separator", "Zs": "Space_Separator",
    "Zl": "Line_Separator", "Zp": "Paragraph_Separator", "C": "Other", "Cc": "Control",
    "Cf": "Format", "Cs": "Surrogate", "Co": "Private_Use", "Cn": "Unassigned",
}
_GC_ALIAS = {"digit": "Nd", "punct": "P", "Combining_Mark": "M"}
_gc_table: dict = {}


def _general_category(name: str) -> tuple:
    short = None
    for k, v in _GC_LONG.items():
        if name == k or name == v:
            short = k
    if short is None:
        short = _GC_ALIAS.get(name)
    if short is None:
        raise RegexUnsupported(f"unicode property \\p{{{name}}} is not supported")
    if not _gc_table:
        # One pass over all code points, cached for the process (about 0.2 s, first use only).
        runs: dict = {}
        prev_cat, start = None, 0
        for cp in range(cs.MAX_CP + 1):
            c = unicodedata.category(chr(cp))
            if c != prev_cat:
                if prev_cat is not None:
                    runs.setdefault(prev_cat, []).append((start, cp - 1))
                prev_cat, start = c, cp
        runs.setdefault(prev_cat, []).append((start, cs.MAX_CP))
        for k, v in runs.items():
            _gc_table[k] = cs.normalize(v)
    if short == "LC":
        return cs.normalize(_gc_table.get("Lu", ()) + _gc_table.get("Ll", ()) + _gc_table.get("Lt", ()))
    if len(short) == 1:
        out: tuple = ()
        for k, v in _gc_table.items():
            if k[0] == short:
                out = cs.union(out, v)
        return out
    return _gc_table.get(short, ())


class _Parser:
    def __init__(self, src: str):
        self.s = src
        self.i = 0
        self.n = len(src)

    def error(self, msg):
        raise RegexSyntaxError(f"{msg} at offset {self.i} in /{self.s}/")

    def peek(self):
        return self.s[self.i] if self.i < self.n else None

    def parse(self):
        node = self.parse_alt()
        if self.i < self.n:
            self.error("unmatched ')'")
        return node

    def parse_alt(self):
        branches = [self.parse_seq()]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.parse_seq())
        if len(branches) == 1:
            return branches[0]
        # Keep the branch structure (no set merging across anchors): alt() merges only
        # plain sets, which is language-preserving.
        return alt(*branches)

    def parse_seq(self):
        items = []
        while self.i < self.n and self.s[self.i] not in "|)":
            atom = self.parse_atom()
            atom = self.parse_quant(atom)
            items.append(atom)
        return cat(*items)

    def parse_quant(self, atom):
        while True:
            c = self.peek()
            if c == "*":
                lo, hi = 0, None
                self.i += 1
            elif c == "+":
                lo, hi = 1, None
                self.i += 1
            elif c == "?":
                lo, hi = 0, 1
                self.i += 1
            elif c == "{":
                q = self.try_brace()
                if q is None:
                    return atom
                lo, hi = q
            else:
                return atom
            if atom in (BOL, EOL):
                self.error("nothing to repeat")
            if self.peek() == "?":  # lazy: same language
                self.i += 1
            atom = rep(atom, lo, hi)

    def try_brace(self):
        j = self.i + 1
        k = j
        while k < self.n and self.s[k].isdigit():
            k += 1
        if k == j:
            return None
        lo = int(self.s[j:k])
        hi = lo
        if k < self.n and self.s[k] == ",":
            k += 1
            m = k
            while k < self.n and self.s[k].isdigit():
                k += 1
            hi = int(self.s[m:k]) if k > m else None
        if k < self.n and self.s[k] == "}":
            self.i = k + 1
            if hi is not None and hi < lo:
                self.error("numbers out of order in {} quantifier")
            return lo, hi
        return None

    def parse_atom(self):
        c = self.s[self.i]
        if c == "(":
            self.i += 1
            if self.s.startswith("?:", self.i):
                self.i += 2
            elif self.s.startswith("?<", self.i) and self.i + 2 < self.n and self.s[self.i + 2] not in "=!":
                end = self.s.find(">", self.i)
                if end < 0:
                    self.error("unterminated group name")
                self.i = end + 1
            elif self.peek() == "?":
                raise RegexUnsupported(f"lookaround or inline flags '(?{self.s[self.i + 1:self.i + 3]}' in /{self.s}/")
            node = self.parse_alt()
            if self.peek() != ")":
                self.error("missing ')'")
            self.i += 1
            return node
        if c == "[":
            return ("set", self.parse_class())
        if c == ".":
            self.i += 1
            return ("set", DOT)
        if c == "^":
            self.i += 1
            return BOL
        if c == "$":
            self.i += 1
            return EOL
        if c == "\\":
            return self.parse_escape(in_class=False)
        if c in "*+?":
            self.error("nothing to repeat")
        if c == "{" and self.try_brace_peek():
            self.error("nothing to repeat")
        self.i += 1
        cp = ord(c)
        if 0xD800 <= cp <= 0xDBFF and self.i < self.n and 0xDC00 <= ord(self.s[self.i]) <= 0xDFFF:
            cp = 0x10000 + ((cp - 0xD800) << 10) + (ord(self.s[self.i]) - 0xDC00)
            self.i += 1
        return ("set", cs.single(cp))

    def try_brace_peek(self):
        save = self.i
        r = self.try_brace()
        self.i = save
        return r is not None

    def parse_hex(self, k):
        h = self.s[self.i:self.i + k]
        if len(h) != k or any(ch not in "0123456789abcdefABCDEF" for ch in h):
            self.error("bad hex escape")
        self.i += k
        return int(h, 16)

    def parse_escape(self, in_class):
        """Returns ("set", charset) or an assertion; self.i is at the backslash."""
        self.i += 1
        if self.i >= self.n:
            self.error("trailing backslash")
        c = self.s[self.i]
        self.i += 1
        simple = {"t": 9, "n": 10, "v": 11, "f": 12, "r": 13}
        if c in simple:
            return ("set", cs.single(simple[c]))
        if c == "d":
            return ("set", DIGIT)
        if c == "D":
            return ("set", cs.complement(DIGIT))
        if c == "w":
            return ("set", WORD)
        if c == "W":
            return ("set", cs.complement(WORD))
        if c == "s":
            return ("set", SPACE)
        if c == "S":
            return ("set", cs.complement(SPACE))
        if c == "b":
            if in_class:
                return ("set", cs.single(8))
            raise RegexUnsupported(f"word boundary \\b in /{self.s}/")
        if c == "B":
            raise RegexUnsupported(f"word boundary \\B in /{self.s}/")
        if c == "c":
            if self.i < self.n and self.s[self.i].isascii() and self.s[self.i].isalpha():
                cp = ord(self.s[self.i]) % 32
                self.i += 1
                return ("set", cs.single(cp))
            self.error("bad control escape")
        if c == "0" and not (self.i < self.n and self.s[self.i].isdigit()):
            return ("set", cs.single(0))
        if c.isdigit():
            raise RegexUnsupported(f"back-reference or octal escape \\{c} in /{self.s}/")
        if c == "k":
            raise RegexUnsupported(f"named back-reference in /{self.s}/")
        if c == "x":
            return ("set", cs.single(self.parse_hex(2)))
        if c == "u":
            if self.peek() == "{":
                end = self.s.find("}", self.i)
                if end < 0:
                    self.error("bad \\u{} escape")
                h = self.s[self.i + 1:end]
                try:
                    cp = int(h, 16)
                except ValueError:
                    self.error("bad \\u{} escape")
                if cp > cs.MAX_CP:
                    self.error("code point out of range")
                self.i = end + 1
                return ("set", cs.single(cp))
            cp = self.parse_hex(4)
            if 0xD800 <= cp <= 0xDBFF and self.s.startswith("\\u", self.i):
                save = self.i
                self.i += 2
                try:
                    lo = self.parse_hex(4)
                except RegexSyntaxError:
                    lo = None
                if lo is not None and 0xDC00 <= lo <= 0xDFFF:
                    return ("set", cs.single(0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)))
                self.i = save
            return ("set", cs.single(cp))
        if c in "pP":
            if self.peek() != "{":
                self.error("bad \\p escape")
            end = self.s.find("}", self.i)
            if end < 0:
                self.error("bad \\p escape")
            name = self.s[self.i + 1:end]
            self.i = end + 1
            if "=" in name:
                key, _, val = name.partition("=")
                if key not in ("General_Category", "gc"):
                    raise RegexUnsupported(f"unicode property \\p{{{name}}} is not supported")
                name = val
            s = _general_category(name)
            return ("set", cs.complement(s) if c == "P" else s)
        if c.isascii() and c.isalnum():
            raise RegexUnsupported(f"escape \\{c} has no ECMA-262 meaning in /{self.s}/")
        if in_class and c == "-":
            return ("set", cs.single(0x2D))
        return ("set", cs.single(ord(c)))

    def class_atom(self):
        c = self.s[self.i]
        if c == "\\":
            node = self.parse_escape(in_class=True)
            return node[1]
        self.i += 1
        cp = ord(c)
        if 0xD800 <= cp <= 0xDBFF and self.i < self.n and 0xDC00 <= ord(self.s[self.i]) <= 0xDFFF:
            cp = 0x10000 + ((cp - 0xD800) << 10) + (ord(self.s[self.i]) - 0xDC00)
            self.i += 1
        return cs.single(cp)

    def parse_class(self):
        self.i += 1
        neg = False
        if self.peek() == "^":
            neg = True
            self.i += 1
        acc: tuple = ()
        while True:
            if self.i >= self.n:
                self.error("unterminated character class")
            if self.s[self.i] == "]":
                self.i += 1
                break
            a = self.class_atom()
            if self.peek() == "-" and self.i + 1 < self.n and self.s[self.i + 1] != "]":
                self.i += 1
                b = self.class_atom()
                if len(a) == 1 and a[0][0] == a[0][1] and len(b) == 1 and b[0][0] == b[0][1]:
                    if a[0][0] > b[0][0]:
                        self.error("range out of order in character class")
                    acc = cs.union(acc, ((a[0][0], b[0][0]),))
                    continue
                # A class escape such as \d on either side of '-' is an error in u-mode.
                self.error("invalid character class range")
            acc = cs.union(acc, a)
        return cs.complement(acc) if neg else acc


_cache: dict = {}


def parse(pattern: str):
    """Parses an ECMA-262 pattern; results are cached per pattern text."""
    r = _cache.get(pattern)
    if r is None:
        r = _Parser(pattern).parse()
        if len(_cache) > 4096:
            _cache.clear()
        _cache[pattern] = r
    return r


def length_range(n):
    """(min, max) length in code points of strings matched by ``n`` (max None: unbounded)."""
    k = n[0]
    if k == "set":
        return (1, 1) if n[1] else (0, 0)
    if k in ("eps", "bol", "eol"):
        return (0, 0)
    if k == "cat":
        lo = 0
        hi = 0
        for m in n[1]:
            a, b = length_range(m)
            lo += a
            hi = None if hi is None or b is None else hi + b
        return lo, hi
    if k == "alt":
        rs = [length_range(m) for m in n[1]]
        lo = min(r[0] for r in rs)
        hi = None if any(r[1] is None for r in rs) else max(r[1] for r in rs)
        return lo, hi
    if k == "rep":
        a, b = length_range(n[1])
        lo = a * n[2]
        if n[3] is None:
            hi = None if (b is None or b > 0) else 0
        else:
            hi = None if b is None else b * n[3]
        return lo, hi
    raise AssertionError(k)


def has_anchor(n) -> bool:
    k = n[0]
    if k in ("bol", "eol"):
        return True
    if k in ("cat", "alt"):
        return any(has_anchor(m) for m in n[1])
    if k == "rep":
        return has_anchor(n[1])
    return False


ANY_STAR = ("rep", ("set", cs.ALL), 0, None)


def _strip_anchors(n):
    """Rewrites a search regex into a full-match regex when anchors only occur at the ends
    of a concatenation (the usual ``^...$`` shapes) or of top-level alternatives; returns
    None otherwise (the caller then builds an automaton that honours the assertions)."""
    if n[0] == "alt":
        outs = []
        for b in n[1]:
            r = _strip_anchors(b)
            if r is None:
                return None
            outs.append(r)
        return alt(*outs)
    items = list(n[1]) if n[0] == "cat" else [n]
    start = end = False
    while items and items[0] == BOL:
        items.pop(0)
        start = True
    while items and items[-1] == EOL:
        items.pop()
        end = True
    if any(has_anchor(x) for x in items):
        if len(items) == 1 and items[0][0] == "alt" and not start and not end:
            return _strip_anchors(items[0])
        return None
    body = cat(*items)
    if not start and not end and _matches_empty(body):
        return ANY_STAR
    parts = []
    if not start:
        parts.append(ANY_STAR)
    parts.append(body)
    if not end:
        parts.append(ANY_STAR)
    return cat(*parts)


def _matches_empty(n) -> bool:
    k = n[0]
    if k == "set":
        return False
    if k in ("eps", "bol", "eol"):
        return True
    if k == "cat":
        return all(_matches_empty(m) for m in n[1])
    if k == "alt":
        return any(_matches_empty(m) for m in n[1])
    if k == "rep":
        return n[2] == 0 or _matches_empty(n[1])
    return False


def to_full_match(n):
    """Search-semantics regex → anchored regex AST without assertions, or None when the
    anchors are placed such that an automaton is needed (see automaton.search_nfa)."""
    return _strip_anchors(n)
