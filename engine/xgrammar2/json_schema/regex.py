"""ECMA-262 regular expressions (the dialect of JSON Schema ``pattern``) as a small AST.

Parsing is done by the C core's one regex front end (``csrc/front/regex.c``, dialect
``XGR_REGEX_ECMASCRIPT``, through ``xgr_regex_parse``); this module turns the core's flat
tree into the tuples below and holds the AST helpers the converter uses (combinators,
length ranges, anchor handling). Only the Unicode general-category tables for ``\\p{..}``
come from Python's ``unicodedata``.

The AST is made of tuples so that equal expressions compare and hash equal:

* ``("set", charset)``            one code point from the set (empty set: matches nothing)
* ``("cat", (n1, n2, ...))``      concatenation
* ``("alt", (n1, n2, ...))``      alternation
* ``("rep", n, lo, hi)``          repetition, ``hi`` is ``None`` for unbounded
* ``("eps",)``                    the empty string
* ``("bol",)`` / ``("eol",)``     the ``^`` / ``$`` assertions (no multiline flag exists)
* ``("look", n, neg)``            the lookahead ``(?=n)`` (``(?!n)`` when ``neg``)
* ``("wordb", neg)``              the word boundary ``\\b`` (``\\B`` when ``neg``)

Semantics are those of a ``u``-flag regex: the unit is the code point, so an astral
character is one character, as it is for ``minLength``. The assertions (``^ $``,
lookahead, ``\\b \\B``) keep the language regular; automaton.from_regex builds their
automata exactly. Constructs that a regular grammar cannot express (back-references) or
that are not supported (lookbehind) raise :class:`RegexUnsupported`; malformed patterns
raise :class:`RegexSyntaxError`.
"""

from __future__ import annotations

import unicodedata

from .. import _core
from ..exception import GrammarSyntaxError, InvalidUTF8Error
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
_gc_table: dict = {}


def _general_category(short: str) -> tuple:
    """Code points of a general category given by its short name (the core has checked
    the name; Python's unicodedata supplies the table)."""
    if short not in _GC_LONG:
        raise RegexUnsupported(f"unicode property \\p{{{short}}} is not supported")
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


# Node kinds of the core's flat regex tree (XGR_RX_* in xgr2.h).
_SET, _CAT, _ALT, _REP, _EPS, _BOL, _EOL, _LOOK, _WORDB = range(9)


def _core_utf8(pattern: str) -> bytes:
    """UTF-8 for the core. A Python string may hold UTF-16 surrogates (lone ones from a
    JSON ``\\ud800`` escape, or a pair as two characters): a pair becomes its code point,
    a lone surrogate the escape ``\\uXXXX`` (read as that code point, as before)."""
    try:
        return pattern.encode("utf-8")
    except UnicodeEncodeError:
        pass
    out = []
    i, n = 0, len(pattern)
    while i < n:
        cp = ord(pattern[i])
        if 0xD800 <= cp <= 0xDBFF and i + 1 < n and 0xDC00 <= ord(pattern[i + 1]) <= 0xDFFF:
            out.append(chr(0x10000 + ((cp - 0xD800) << 10) + (ord(pattern[i + 1]) - 0xDC00)))
            i += 2
            continue
        if 0xD800 <= cp <= 0xDFFF:
            k = 0  # after an escaping backslash the escape is already open
            while k < len(out) and out[-1 - k] == "\\":
                k += 1
            out.append(f"u{cp:04X}" if k % 2 else f"\\u{cp:04X}")
        else:
            out.append(pattern[i])
        i += 1
    return "".join(out).encode("utf-8")


def _from_tree(nodes, data, root):
    """The tuple AST of the core's flat tree, built with the combinators above (so equal
    expressions compare equal, as the automata and emitters expect)."""
    built: list = []
    for i in range(0, len(nodes), 5):
        k, a, b, c, d = nodes[i:i + 5]
        if k == _SET:
            if b == 1 and not c and not d:  # the common case: a literal or one range
                built.append(("set", ((data[a], data[a + 1]),)))
                continue
            rs = data[a:a + 2 * b]
            cset = cs.normalize(zip(rs[0::2], rs[1::2]))
            for code in data[a + 2 * b:a + 2 * b + c]:
                name = chr((code >> 1) & 0xFF) + (chr(code >> 9) if code >> 9 else "")
                ps = _general_category(name)
                cset = cs.union(cset, cs.complement(ps) if code & 1 else ps)
            node = ("set", cs.complement(cset) if d else cset)
        elif k == _CAT:
            node = cat(*[built[j] for j in data[a:a + b]])
        elif k == _ALT:
            node = alt(*[built[j] for j in data[a:a + b]])
        elif k == _REP:
            if built[a] in (BOL, EOL) or built[a][0] in ("look", "wordb"):
                raise RegexSyntaxError("nothing to repeat: a group holding only an assertion")
            node = rep(built[a], b, None if c < 0 else c)
        elif k == _EPS:
            node = EPS
        elif k == _BOL:
            node = BOL
        elif k == _EOL:
            node = EOL
        elif k == _LOOK:
            node = ("look", built[a], bool(b))
        elif k == _WORDB:
            node = ("wordb", bool(b))
        else:  # pragma: no cover - the core only emits the kinds above
            raise AssertionError(k)
        built.append(node)
    return built[root]


def _parse_uncached(pattern: str):
    try:
        tree = _core.regex_tree(_core_utf8(pattern), _core.REGEX_ECMASCRIPT)
    except (GrammarSyntaxError, InvalidUTF8Error) as e:
        raise RegexSyntaxError(f"{e} in /{pattern}/") from None
    except RuntimeError as e:  # GrammarSemanticError / GrammarLimitError: unsupported
        raise RegexUnsupported(f"{e} in /{pattern}/") from None
    try:
        return _from_tree(*tree)
    except RegexSyntaxError as e:
        raise RegexSyntaxError(f"{e} in /{pattern}/") from None


_cache: dict = {}


def parse(pattern: str):
    """Parses an ECMA-262 pattern with the C core's regex front end (the ECMAScript
    dialect of ``xgr_regex_parse``); results are cached per pattern text."""
    r = _cache.get(pattern)
    if r is None:
        r = _parse_uncached(pattern)
        if len(_cache) > 4096:
            _cache.clear()
        _cache[pattern] = r
    return r


def _length_range(n):
    """(min, max) length in code points of strings matched by ``n`` (max None: unbounded)."""
    k = n[0]
    if k == "set":
        return (1, 1) if n[1] else (0, 0)
    if k in ("eps", "bol", "eol", "look", "wordb"):
        return (0, 0)
    if k == "cat":
        lo = 0
        hi = 0
        for m in n[1]:
            a, b = _length_range(m)
            lo += a
            hi = None if hi is None or b is None else hi + b
        return lo, hi
    if k == "alt":
        rs = [_length_range(m) for m in n[1]]
        lo = min(r[0] for r in rs)
        hi = None if any(r[1] is None for r in rs) else max(r[1] for r in rs)
        return lo, hi
    if k == "rep":
        a, b = _length_range(n[1])
        lo = a * n[2]
        if n[3] is None:
            hi = None if (b is None or b > 0) else 0
        else:
            hi = None if b is None else b * n[3]
        return lo, hi
    raise AssertionError(k)


def _has_anchor(n) -> bool:
    k = n[0]
    if k in ("bol", "eol", "look", "wordb"):
        return True
    if k in ("cat", "alt"):
        return any(_has_anchor(m) for m in n[1])
    if k == "rep":
        return _has_anchor(n[1])
    return False


#: id(AST) -> (AST, length_range, has_anchor): the emitter asks both of the same parsed
#: pattern (ASTs are shared: parse() caches them) in every conversion. The entry keeps the
#: AST alive, so its id cannot be reused while the entry exists.
_ast_facts: dict = {}


def _has_lookaround(n) -> bool:
    k = n[0]
    if k in ("look", "wordb"):
        return True
    if k in ("cat", "alt"):
        return any(_has_lookaround(m) for m in n[1])
    if k == "rep":
        return _has_lookaround(n[1])
    return False


def _facts(n):
    f = _ast_facts.get(id(n))
    if f is None or f[0] is not n:
        f = (n, _length_range(n), _has_anchor(n), _has_lookaround(n))
        if len(_ast_facts) > 4096:
            _ast_facts.clear()
        _ast_facts[id(n)] = f
    return f


def length_range(n):
    """(min, max) length in code points of strings matched by ``n`` (max None: unbounded)."""
    return _facts(n)[1]


def has_anchor(n) -> bool:
    """Whether ``n`` contains an assertion: ^, $, a lookahead, \\b or \\B (then only an
    automaton, automaton.from_regex, honours it)."""
    return _facts(n)[2]


def has_lookaround(n) -> bool:
    """Whether ``n`` contains a lookahead, \\b or \\B."""
    return _facts(n)[3]


ANY_STAR = ("rep", ("set", cs.ALL), 0, None)


def _strip_anchors(n):
    """Rewrites a search regex into a full-match regex when anchors only occur at the ends
    of a concatenation (the usual ``^...$`` shapes) or of top-level alternatives; returns
    None otherwise (the caller then builds an automaton that honours the assertions)."""
    if n[0] == "alt":
        # Branches without anchors are searched together: ".*(en|de|...).*", not the union of
        # ".*en.*", ".*de.*", ... whose subset construction tracks every branch's progress apart
        # (exponential in the branches: eleven two-letter words exceeded 4,000 states,
        # JsonSchemaStore---io-package); the language is the same.
        free = [b for b in n[1] if not has_anchor(b)]
        outs = []
        if len(free) > 1:
            body = alt(*free)
            outs.append(ANY_STAR if _matches_empty(body) else cat(ANY_STAR, body, ANY_STAR))
        for b in n[1]:
            if len(free) > 1 and not has_anchor(b):
                continue
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
    if k in ("eps", "bol", "eol", "look", "wordb"):
        return True
    if k == "cat":
        return all(_matches_empty(m) for m in n[1])
    if k == "alt":
        return any(_matches_empty(m) for m in n[1])
    if k == "rep":
        return n[2] == 0 or _matches_empty(n[1])
    return False


def nonempty(n):
    """The strings of the anchor-free AST ``n`` other than the empty one, as an AST (``n``
    itself when it never matches the empty string): minLength 1 folded into a pattern
    without building its automaton, so counted repetitions stay counted."""
    if not _matches_empty(n):
        return n
    k = n[0]
    if k == "eps":
        return NOTHING
    if k == "alt":
        return alt(*(nonempty(m) for m in n[1]))
    if k == "cat":  # (every part matches the empty string): A R \ {""} = (A \ {""}) R | R \ {""}
        first, rest = n[1][0], cat(*n[1][1:])
        return alt(cat(nonempty(first), rest), nonempty(rest))
    if k == "rep":  # X{a,b} with a = 0 or X nullable: a non-empty X first, then X{0,b-1}
        x, hi = n[1], n[3]
        return cat(nonempty(x), rep(x, 0, None if hi is None else hi - 1))
    raise AssertionError(k)


def counted_over(n, bound: int):
    """The bodies of the counted repetitions in ``n`` whose count goes past ``bound`` (their
    upper bound, or their lower one when unbounded)."""
    k = n[0]
    if k in ("cat", "alt"):
        return [b for m in n[1] for b in counted_over(m, bound)]
    if k == "rep":
        own = n[3] if n[3] is not None else n[2]
        return ([n[1]] if own > bound else []) + counted_over(n[1], bound)
    return []


def to_full_match(n):
    """Search-semantics regex → anchored regex AST without assertions, or None when the
    anchors are placed such that an automaton is needed (see automaton.search_nfa)."""
    return _strip_anchors(n)
