"""Lark regular expressions (``/pattern/flags``) -> a small regex tree -> EBNF.

The tree is what the rest of the Lark front end works with: it prints as EBNF (strings,
character classes, groups, repetition), and :mod:`xgrammar2.lark.automaton` turns it into
a DFA for lazy rules.

Dialect (upstream xgrammar 0.2.8's reading of Lark regexes):

* ``.`` is any code point but ``\\n``; with the ``s`` flag any code point.
* ``i``: ASCII case-insensitive (letters in literals, escapes and classes match both cases;
  other characters match themselves). ``u`` is accepted (code points are the unit anyway).
  Other flags (``m``, ``x``, ``l``) are errors.
* ``\\d`` ``\\w`` are ASCII; ``\\s`` is ``[\\t\\n\\v\\f\\r \\xa0]`` (as upstream; Python's
  ``\\s`` would also match other Unicode spaces). ``\\D \\W \\S`` are their complements.
* Escapes: ``\\n \\r \\t \\f \\v \\0 \\xNN \\uNNNN \\u{N...} \\cX`` and any escaped punctuation;
  ``[\\b]`` is a backspace.
* Groups ``(...)``, ``(?:...)``, ``(?<name>...)``, ``(?P<name>...)``; alternation; ``* + ?
  {m} {m,} {m,n}``, each optionally lazy (``*?`` matches the same strings).
* ``^`` / ``\\A`` where nothing can precede and ``$`` / ``\\Z`` / ``\\z`` where nothing can
  follow are no-ops (the whole text of the terminal is matched anyway).
* Refused with the column: word boundaries, lookarounds, backreferences, Unicode property
  escapes, inline flags ``(?i)``, possessive quantifiers, anchors elsewhere.
"""

from typing import Callable, List, Optional, Sequence, Tuple

__all__ = [
    "parse_regex", "to_ebnf", "class_ebnf", "lit", "cset", "seq", "alt", "rep", "EMPTY",
    "fold_ranges", "normalize", "complement", "MAX_CP", "nullable",
]

MAX_CP = 0x10FFFF
Ranges = Tuple[Tuple[int, int], ...]

EMPTY = ("empty",)

DIGIT: Ranges = ((0x30, 0x39),)
WORD: Ranges = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
SPACE: Ranges = ((0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0))


def normalize(ranges: Sequence[Tuple[int, int]]) -> Ranges:
    out: List[List[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1][1] = hi
        else:
            out.append([lo, hi])
    return tuple((a, b) for a, b in out)


def complement(ranges: Ranges) -> Ranges:
    out = []
    prev = 0
    for lo, hi in ranges:
        if lo > prev:
            out.append((prev, lo - 1))
        prev = hi + 1
    if prev <= MAX_CP:
        out.append((prev, MAX_CP))
    return tuple(out)


def fold_ranges(ranges: Ranges) -> Ranges:
    """``ranges`` plus the other ASCII case of every ASCII letter in them."""
    extra = []
    for lo, hi in ranges:
        a, b = max(lo, 0x61), min(hi, 0x7A)
        if a <= b:
            extra.append((a - 32, b - 32))
        a, b = max(lo, 0x41), min(hi, 0x5A)
        if a <= b:
            extra.append((a + 32, b + 32))
    return normalize(tuple(ranges) + tuple(extra)) if extra else ranges


# ---- tree constructors (simplifying) ----------------------------------------------------

def lit(text: str):
    return ("lit", text) if text else EMPTY


def cset(ranges: Sequence[Tuple[int, int]]):
    return ("set", normalize(ranges))


def seq(items):
    out: List = []
    for it in items:
        if it[0] == "empty":
            continue
        if it[0] == "seq":
            for sub in it[1]:
                if sub[0] == "lit" and out and out[-1][0] == "lit":
                    out[-1] = ("lit", out[-1][1] + sub[1])
                else:
                    out.append(sub)
            continue
        if it[0] == "lit" and out and out[-1][0] == "lit":
            out[-1] = ("lit", out[-1][1] + it[1])
            continue
        out.append(it)
    if not out:
        return EMPTY
    if len(out) == 1:
        return out[0]
    return ("seq", tuple(out))


def alt(items):
    out: List = []
    for it in items:
        if it[0] == "alt":
            out.extend(it[1])
        else:
            out.append(it)
    if len(out) == 1:
        return out[0]
    return ("alt", tuple(out))


def rep(item, lo: int, hi: Optional[int]):
    if item[0] == "empty" or hi == 0:
        return EMPTY
    if lo == 1 and hi == 1:
        return item
    return ("rep", item, lo, hi)


def nullable(node) -> bool:
    k = node[0]
    if k == "empty":
        return True
    if k in ("lit", "set"):
        return False
    if k == "seq":
        return all(nullable(x) for x in node[1])
    if k == "alt":
        return any(nullable(x) for x in node[1])
    if k == "rep":
        return node[2] == 0 or nullable(node[1])
    return False


def _utf8_len(cp: int) -> int:
    return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4


def fixed_bytes(node) -> Optional[int]:
    """The UTF-8 length every match of node has, or None when matches differ in length."""
    k = node[0]
    if k == "empty":
        return 0
    if k == "lit":
        return len(node[1].encode("utf-8", "surrogatepass"))
    if k == "set":
        lens = {_utf8_len(cp) for lo, hi in node[1] for cp in (lo, hi)}
        return lens.pop() if len(lens) == 1 else None
    if k == "seq":
        total = 0
        for x in node[1]:
            n = fixed_bytes(x)
            if n is None:
                return None
            total += n
        return total
    if k == "alt":
        lens2 = {fixed_bytes(x) for x in node[1]}
        return lens2.pop() if len(lens2) == 1 else None
    if k == "rep":
        n = fixed_bytes(node[1])
        return None if n is None or node[3] is None or node[2] != node[3] else n * node[2]
    return None


# ---- parsing ------------------------------------------------------------------------------

class RegexError(Exception):
    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


_SIMPLE_ESCAPES = {"n": 0x0A, "r": 0x0D, "t": 0x09, "f": 0x0C, "v": 0x0B}
_MAX_REPEAT = 1_000_000_000


class _RegexParser:
    def __init__(self, pattern: str, nocase: bool, dotall: bool) -> None:
        self.s = pattern
        self.n = len(pattern)
        self.pos = 0
        self.nocase = nocase
        self.dotall = dotall
        self.depth = 0

    def err(self, msg: str, at: Optional[int] = None) -> RegexError:
        return RegexError(msg, self.pos if at is None else at)

    def peek(self, k: int = 0) -> str:
        i = self.pos + k
        return self.s[i] if i < self.n else ""

    # alternatives := sequence ('|' sequence)*
    def alternatives(self, at_start: bool):
        items = [self.sequence(at_start)]
        while self.peek() == "|":
            self.pos += 1
            items.append(self.sequence(at_start))
        return alt(items)

    def at_end_anchor_ok(self) -> bool:
        """An end anchor is fine when only ')' and then '|' or the end follow it."""
        i = self.pos
        while i < self.n and self.s[i] == ")":
            i += 1
        return i >= self.n or self.s[i] == "|"

    def sequence(self, at_start: bool):
        items: List = []
        start_ok = at_start
        while self.pos < self.n and self.s[self.pos] not in "|)":
            at = self.pos
            c = self.s[at]
            if c == "^" or (c == "\\" and self.peek(1) == "A"):
                self.pos += 1 if c == "^" else 2
                if not start_ok:
                    raise self.err("an anchor ('^' or '\\A') is only supported at the start of "
                                   "the pattern", at)
                continue
            if c == "$" or (c == "\\" and self.peek(1) in ("Z", "z")):
                self.pos += 1 if c == "$" else 2
                if not self.at_end_anchor_ok():
                    raise self.err("an anchor ('$', '\\Z') is only supported at the end of the "
                                   "pattern", at)
                if self.peek() in "*+?{" and self.peek():
                    raise self.err("nothing to repeat (an anchor before a quantifier)")
                continue
            atom = self.atom(start_ok and not items)
            atom = self.quantifiers(atom, at)
            items.append(atom)
            start_ok = start_ok and atom[0] == "empty"
        return seq(items)

    def quantifiers(self, atom, at: int):
        c = self.peek()
        if c not in ("*", "+", "?", "{"):
            return atom
        if c == "{":
            q = self.brace()
            if q is None:
                raise self.err("invalid repetition: write {m}, {m,} or {m,n}, or escape '{' as "
                               "\\{")
            lo, hi = q
        else:
            self.pos += 1
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
        if self.peek() == "?":
            self.pos += 1  # lazy: the same strings
        elif self.peek() == "+":
            raise self.err("possessive quantifiers are not supported")
        if self.peek() in ("*", "+", "?") or (self.peek() == "{" and self.brace_ahead()):
            raise self.err("nothing to repeat (a quantifier follows a quantifier)")
        if hi is not None and hi < lo:
            raise self.err("repetition range {m,n} with n < m", at)
        return rep(atom, lo, hi)

    def brace_ahead(self) -> bool:
        save = self.pos
        try:
            return self.brace() is not None
        finally:
            self.pos = save

    def brace(self) -> Optional[Tuple[int, Optional[int]]]:
        s, i = self.s, self.pos + 1
        j = i
        while j < self.n and s[j].isascii() and s[j].isdigit():
            j += 1
        if j == i:
            return None
        lo = int(s[i:j])
        hi: Optional[int] = lo
        if j < self.n and s[j] == ",":
            k = j + 1
            while k < self.n and s[k].isascii() and s[k].isdigit():
                k += 1
            hi = int(s[j + 1:k]) if k > j + 1 else None
            j = k
        if j >= self.n or s[j] != "}":
            return None
        if lo > _MAX_REPEAT or (hi is not None and hi > _MAX_REPEAT):
            raise self.err(f"repetition bound is too large (limit {_MAX_REPEAT})")
        self.pos = j + 1
        return lo, hi

    def char(self, cp: int):
        if self.nocase and (0x41 <= cp <= 0x5A or 0x61 <= cp <= 0x7A):
            return cset(fold_ranges(((cp, cp),)))
        return lit(chr(cp))

    def atom(self, at_start: bool):
        at = self.pos
        c = self.s[at]
        if c == "(":
            return self.group(at_start)
        if c == "[":
            return self.char_class()
        if c == ".":
            self.pos += 1
            return cset(((0, MAX_CP),)) if self.dotall else cset(((0, 9), (11, MAX_CP)))
        if c == "\\":
            v = self.escape(in_class=False)
            if isinstance(v, int):
                return self.char(v)
            return cset(fold_ranges(v) if self.nocase else v)
        if c in "*+?":
            raise self.err(f"nothing to repeat before '{c}'")
        if c == "{" and self.brace_ahead():
            raise self.err("nothing to repeat before '{'")
        self.pos += 1
        return self.char(ord(c))

    def group(self, at_start: bool):
        at = self.pos
        self.pos += 1
        if self.peek() == "?":
            nxt = self.peek(1)
            if nxt == ":":
                self.pos += 2
            elif nxt == "P" and self.peek(2) == "<" or nxt == "<" and self.peek(2) not in "=!":
                self.pos += 3 if nxt == "P" else 2
                start = self.pos
                while self.pos < self.n and (self.s[self.pos].isalnum() or self.s[self.pos] == "_"):
                    self.pos += 1
                if self.pos == start or self.peek() != ">":
                    raise self.err("invalid group name in (?<name>...)", at)
                self.pos += 1
            elif nxt in ("=", "!"):
                raise self.err("Lookahead assertion is not supported", at)
            elif nxt == "<":
                raise self.err("Lookbehind assertion is not supported", at)
            elif nxt == "P" and self.peek(2) == "=":
                raise self.err("Backreference is not supported", at)
            else:
                raise self.err("inline flags and other (?...) groups are not supported (use the "
                               "flags after the closing '/': /.../i, /.../s)", at)
        if self.depth >= 100:
            raise self.err("groups are nested deeper than 100 levels", at)
        self.depth += 1
        body = self.alternatives(at_start)
        self.depth -= 1
        if self.peek() != ")":
            raise self.err("missing ')' for this group", at)
        self.pos += 1
        return body

    def char_class(self):
        at = self.pos
        self.pos += 1
        negate = False
        if self.peek() == "^":
            negate = True
            self.pos += 1
        if self.peek() == "]":
            raise self.err("Empty character class []", at)
        ranges: List[Tuple[int, int]] = []
        while True:
            if self.pos >= self.n:
                raise self.err("unterminated character class", at)
            c = self.s[self.pos]
            if c == "]":
                self.pos += 1
                break
            item_at = self.pos
            lo = self.class_item()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                hi_at = self.pos
                hi = self.class_item()
                if not isinstance(lo, int) or not isinstance(hi, int):
                    raise self.err("a class shorthand (\\d, \\w, \\s) cannot bound a range",
                                   item_at if not isinstance(lo, int) else hi_at)
                if lo > hi:
                    raise self.err("character range out of order in character class", item_at)
                ranges.append((lo, hi))
            elif isinstance(lo, int):
                ranges.append((lo, lo))
            else:
                ranges.extend(lo)
        result = normalize(ranges)
        if self.nocase:
            result = fold_ranges(result)
        if negate:
            result = complement(result)
        return cset(result)

    def class_item(self):
        c = self.s[self.pos]
        if c == "\\":
            return self.escape(in_class=True)
        self.pos += 1
        return ord(c)

    def hex_digits(self, start: int, count: int) -> Optional[int]:
        text = self.s[start:start + count]
        if len(text) != count or not all(ch in "0123456789abcdefABCDEF" for ch in text):
            return None
        return int(text, 16)

    def escape(self, in_class: bool):
        """The escape at pos: a code point (int) or ranges (a shorthand class)."""
        at = self.pos
        if at + 1 >= self.n:
            raise self.err("the pattern ends with a lone backslash", at)
        c = self.s[at + 1]
        self.pos = at + 2
        if c in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[c]
        if c in "dDwWsS":
            base = {"d": DIGIT, "w": WORD, "s": SPACE}[c.lower()]
            return complement(base) if c.isupper() else base
        if c == "0":
            if self.peek().isdigit():
                raise self.err("octal escapes are not supported", at)
            return 0
        if c == "x":
            v = self.hex_digits(self.pos, 2)
            if v is None:
                raise self.err("\\x must be followed by two hexadecimal digits", at)
            self.pos += 2
            return v
        if c == "u":
            if self.peek() == "{":
                end = self.s.find("}", self.pos)
                body = self.s[self.pos + 1:end] if end > 0 else ""
                if not body or len(body) > 6 or not all(ch in "0123456789abcdefABCDEF" for ch in body):
                    raise self.err("\\u{...} must hold 1 to 6 hex digits", at)
                v = int(body, 16)
                if v > MAX_CP:
                    raise self.err("\\u{...} is above U+10FFFF", at)
                self.pos = end + 1
                return v
            v = self.hex_digits(self.pos, 4)
            if v is None:
                raise self.err("\\u must be followed by four hexadecimal digits", at)
            self.pos += 4
            if 0xD800 <= v <= 0xDBFF and self.s.startswith("\\u", self.pos):
                lo = self.hex_digits(self.pos + 2, 4)
                if lo is not None and 0xDC00 <= lo <= 0xDFFF:
                    self.pos += 6
                    v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00)
            return v
        if c == "U":
            v = self.hex_digits(self.pos, 8)
            if v is None or v > MAX_CP:
                raise self.err("\\U must be followed by 8 hex digits (at most 0010FFFF)", at)
            self.pos += 8
            return v
        if c == "c":
            nxt = self.peek()
            if not (nxt.isascii() and nxt.isalpha()):
                raise self.err("\\c must be followed by a letter", at)
            self.pos += 1
            return ord(nxt) % 32
        if c == "b":
            if in_class:
                return 0x08
            raise self.err("Word boundary assertion \\b is not supported", at)
        if c == "B":
            raise self.err("Word boundary assertion \\B is not supported", at)
        if c in "123456789" or c == "k":
            raise self.err("Backreference is not supported", at)
        if c in "pP":
            raise self.err("Unicode property escapes (\\p{...}) are not supported", at)
        if c in "AZz":
            raise self.err(f"anchor \\{c} is not supported inside a character class" if in_class
                           else f"anchor \\{c} is only supported at the edges of the pattern", at)
        if c.isascii() and c.isalnum():
            raise self.err(f"unknown escape \\{c}", at)
        return ord(c)


def parse_regex(pattern: str, flags: str, on_error: Callable[[str, int], Exception]):
    """The tree of a Lark regex; ``on_error(message, offset_in_pattern)`` builds the
    exception raised for a bad pattern or flag."""
    nocase = dotall = False
    for f in flags:
        if f == "i":
            nocase = True
        elif f == "s":
            dotall = True
        elif f == "u":
            pass
        else:
            raise on_error(f"regular-expression flag '{f}' is not supported (supported: i, s, u)",
                           -1)
    p = _RegexParser(pattern, nocase, dotall)
    try:
        tree = p.alternatives(True)
        if p.pos < p.n:
            raise p.err("unmatched ')'")
    except RegexError as e:
        raise on_error(str(e), e.offset) from None
    except RecursionError:
        raise on_error("the pattern is nested too deeply", 0) from None
    return tree


# ---- printing as EBNF ---------------------------------------------------------------------

_CLASS_ESCAPES = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}


def _class_char(cp: int) -> str:
    if cp in _CLASS_ESCAPES:
        return _CLASS_ESCAPES[cp]
    if cp in (0x5C, 0x5D, 0x2D, 0x5E, 0x5B):
        return "\\" + chr(cp)
    if 0x20 <= cp < 0x7F:
        return chr(cp)
    if cp <= 0xFFFF:
        return "\\u%04x" % cp
    return "\\U%08x" % cp


def _class_body(ranges: Ranges) -> str:
    out = []
    for lo, hi in ranges:
        if lo == hi:
            out.append(_class_char(lo))
        elif hi == lo + 1:
            out.append(_class_char(lo) + _class_char(hi))
        else:
            out.append(_class_char(lo) + "-" + _class_char(hi))
    return "".join(out)


def _without_surrogates(ranges: Ranges) -> Ranges:
    out = []
    for lo, hi in ranges:
        if hi < 0xD800 or lo > 0xDFFF:
            out.append((lo, hi))
            continue
        if lo < 0xD800:
            out.append((lo, 0xD7FF))
        if hi > 0xDFFF:
            out.append((0xE000, hi))
    return tuple(out)


def class_ebnf(ranges: Ranges) -> str:
    """An EBNF character class matching one code point of ``ranges``."""
    pos = _without_surrogates(ranges)
    neg = _without_surrogates(complement(ranges))
    if not pos:
        return "[^\\u0000-\\U0010ffff]"
    if not neg:
        return "[\\u0000-\\U0010ffff]"
    if len(neg) < len(pos):
        return "[^" + _class_body(neg) + "]"
    return "[" + _class_body(pos) + "]"


def to_ebnf(node, quote: Callable[[str], str]) -> Tuple[str, int]:
    """(EBNF text, precedence): 2 = an atom, 1 = a sequence, 0 = alternatives."""
    k = node[0]
    if k == "empty":
        return '""', 2
    if k == "lit":
        return quote(node[1]), 2
    if k == "set":
        return class_ebnf(node[1]), 2
    if k == "seq":
        parts = []
        for x in node[1]:
            t, p = to_ebnf(x, quote)
            parts.append(f"({t})" if p == 0 else t)
        return " ".join(parts), 1
    if k == "alt":
        return " | ".join(to_ebnf(x, quote)[0] for x in node[1]), 0
    if k == "rep":
        t, p = to_ebnf(node[1], quote)
        if p < 2 or node[1][0] == "rep":
            t = f"({t})"
        lo, hi = node[2], node[3]
        if (lo, hi) == (0, None):
            return t + "*", 2
        if (lo, hi) == (1, None):
            return t + "+", 2
        if (lo, hi) == (0, 1):
            return t + "?", 2
        if hi is None:
            return f"{t}{{{lo},}}", 2
        if lo == hi:
            return f"{t}{{{lo}}}", 2
        return f"{t}{{{lo},{hi}}}", 2
    raise AssertionError(k)
