"""Normalized schema IR: a schema is a *union* (tuple) of typed nodes, each describing a
set of JSON values of one type with a conjunction of constraints. allOf is computed by
intersecting unions, ``not``/``oneOf``/``if`` by negating them where the negation stays in
the IR (otherwise UnsupportedSchemaError).

``cx`` arguments are the converter (see convert.py); it resolves references and reports
unsupported constructs.
"""

from __future__ import annotations

import re

from decimal import Decimal

from . import automaton as fa
from . import regex as rx


class NotExpressible(Exception):
    """Raised by negate() and friends; the converter turns it into an Unsupported error
    that names the keyword being converted."""


def to_dec(x) -> Decimal:
    if isinstance(x, Decimal):
        return x
    if isinstance(x, int):
        return Decimal(x)
    return Decimal(repr(float(x)))


# ---------------------------------------------------------------- nodes

class Node:
    __slots__ = ()
    kind = ""

    def copy(self, **kw):
        n = object.__new__(type(self))
        for s in self.__slots__:
            object.__setattr__(n, s, kw[s] if s in kw else getattr(self, s))
        return n


class Null(Node):
    __slots__ = ()
    kind = "null"


class Bool(Node):
    __slots__ = ("vals",)
    kind = "boolean"

    def __init__(self, vals=frozenset((True, False))):
        self.vals = frozenset(vals)


class Num(Node):
    """``nots``: excluded values; ``nonint``: must have a non-zero fractional part;
    ``notmults``: must not be a multiple of any of these."""
    __slots__ = ("integer", "lo", "lo_x", "hi", "hi_x", "mults", "nots", "nonint", "notmults", "src")
    kind = "number"

    def __init__(self, integer=False, lo=None, lo_x=False, hi=None, hi_x=False, mults=(), nots=(),
                 nonint=False, notmults=(), src="#"):
        self.integer = integer
        self.lo, self.lo_x, self.hi, self.hi_x = lo, lo_x, hi, hi_x
        self.mults, self.nots, self.nonint, self.notmults = mults, nots, nonint, notmults
        self.src = src

    def trivially_empty(self):
        if self.integer and self.nonint:
            return True
        if self.lo is not None and self.hi is not None:
            if self.lo > self.hi or (self.lo == self.hi and (self.lo_x or self.hi_x)):
                return True
            if self.integer:
                lo = _ceil(self.lo) + (1 if self.lo_x and self.lo == _ceil(self.lo) else 0)
                hi = _floor(self.hi) - (1 if self.hi_x and self.hi == _floor(self.hi) else 0)
                if lo > hi:
                    return True
        return False

    def is_plain(self):
        return (self.lo is None and self.hi is None and not self.mults and not self.nots
                and not self.nonint and not self.notmults)


def _ceil(d: Decimal) -> Decimal:
    return d.to_integral_value(rounding="ROUND_CEILING")


def _floor(d: Decimal) -> Decimal:
    return d.to_integral_value(rounding="ROUND_FLOOR")


class Str(Node):
    """``pos``/``neg``: tuples of (regex AST with full-match semantics, source pointer)."""
    __slots__ = ("minl", "maxl", "pos", "neg", "src")
    kind = "string"

    def __init__(self, minl=0, maxl=None, pos=(), neg=(), src="#"):
        self.minl, self.maxl, self.pos, self.neg, self.src = minl, maxl, pos, neg, src

    def is_plain(self):
        return self.minl == 0 and self.maxl is None and not self.pos and not self.neg


class Arr(Node):
    """``items`` None: unspecified (any value, not evaluated). ``contains``: tuple of
    (union, min, max, src). ``unique``: src pointer or None. ``ev_n``/``ev_all``: items
    evaluated by prefixItems/items (for unevaluatedItems and strict mode)."""
    __slots__ = ("prefix", "items", "minn", "maxn", "contains", "unique", "ev_n", "ev_all", "src")
    kind = "array"

    def __init__(self, prefix=(), items=None, minn=0, maxn=None, contains=(), unique=None, ev_n=0,
                 ev_all=False, src="#"):
        self.prefix, self.items, self.minn, self.maxn = prefix, items, minn, maxn
        self.contains, self.unique, self.ev_n, self.ev_all, self.src = contains, unique, ev_n, ev_all, src

    def is_plain(self):
        return (not self.prefix and self.items is None and self.minn == 0 and self.maxn is None
                and not self.contains and self.unique is None)


class Obj(Node):
    """``props``: tuple of (key, union) in emission order (conjunction of all ``properties``
    entries for that key). ``patterns``: tuple of (regex AST, union). ``addl``: tuple of
    (union, keys, pattern ASTs): values of keys outside ``keys`` and matching none of the
    patterns must be in the union. ``names``: unions every key must satisfy.
    ``ev_keys``/``ev_pats``/``ev_all``: what properties/patternProperties/
    additionalProperties evaluated (unevaluatedProperties and strict mode).
    ``somes``: existential conditions, the negations of patternProperties/additionalProperties
    entries: tuples (pos, keys, pats, union, src), "some member's key matches the regex AST
    ``pos`` (any key when None), is not in ``keys`` and matches none of ``pats``, and its
    value is in the union" (at most MAX_SOMES per node)."""
    __slots__ = ("props", "required", "patterns", "addl", "names", "minp", "maxp", "ev_keys",
                 "ev_pats", "ev_all", "src", "somes")
    kind = "object"

    def __init__(self, props=(), required=(), patterns=(), addl=(), names=(), minp=0, maxp=None,
                 ev_keys=frozenset(), ev_pats=(), ev_all=False, src="#", somes=()):
        self.props, self.required, self.patterns, self.addl = props, required, patterns, addl
        self.names, self.minp, self.maxp = names, minp, maxp
        self.ev_keys, self.ev_pats, self.ev_all, self.src = ev_keys, ev_pats, ev_all, src
        self.somes = somes

    def is_plain(self):
        return (not self.props and not self.required and not self.patterns and not self.addl
                and not self.names and self.minp == 0 and self.maxp is None and not self.somes)

    def prop(self, k):
        for kk, u in self.props:
            if kk == k:
                return u
        return None


class Enum(Node):
    """A finite set of JSON values (``keys``: their canonical equality keys)."""
    __slots__ = ("values", "keys", "keyset")
    kind = "enum"

    def __init__(self, values, keys=None):
        self.values = tuple(values)
        self.keys = tuple(keys) if keys is not None else tuple(jkey(v) for v in self.values)
        self.keyset = frozenset(self.keys)


class Ref(Node):
    __slots__ = ("name",)
    kind = "ref"

    def __init__(self, name):
        self.name = name


NULL = Null()
BOOL = Bool()
NUMBER = Num()
STRING = Str()
ARRAY = Arr()
OBJECT = Obj()
ANY = (NULL, BOOL, NUMBER, STRING, ARRAY, OBJECT)
NEVER = ()
TYPE_NODES = {"null": NULL, "boolean": BOOL, "number": NUMBER, "integer": Num(integer=True),
              "string": STRING, "array": ARRAY, "object": OBJECT}


def is_any(u) -> bool:
    return u is ANY or (len(u) == 6 and all(a is b for a, b in zip(u, ANY)))


# ---------------------------------------------------------------- JSON equality

def jkey(v):
    if v is None:
        return ("n",)
    if v is True or v is False:
        return ("b", v)
    if isinstance(v, (int, float, Decimal)):
        return ("d", to_dec(v).normalize() if v != 0 else Decimal(0))
    if isinstance(v, str):
        return ("s", v)
    if isinstance(v, list):
        return ("a", tuple(jkey(x) for x in v))
    if isinstance(v, dict):
        return ("o", frozenset((k, jkey(x)) for k, x in v.items()))
    raise TypeError(f"not a JSON value: {type(v).__name__}")


def json_type(v) -> str:
    if v is None:
        return "null"
    if v is True or v is False:
        return "boolean"
    if isinstance(v, (int, float, Decimal)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


# ---------------------------------------------------------------- validation (finite values)

def _bounded_put(cache: dict, key, value, cap: int):
    """Store ``key -> value`` in a memo dict that is emptied once it holds more than ``cap``
    entries (a crude bound: these memos are cheap to refill and a clear costs nothing per hit)."""
    if len(cache) > cap:
        cache.clear()
    cache[key] = value
    return value


_dfa_cache: dict = {}
#: ast -> (exception type, args) of a regex whose automaton was refused (its state limit):
#: refused again without building it again. (JsonSchemaStore---aerleon-definitions' fqdn
#: pattern, a lookahead automaton, reaches the limit after 0.3 s; the emptiness check and the
#: emitter each built it.)
_dfa_refused: dict = {}


def regex_dfa(ast):
    d = _dfa_cache.get(ast)
    if d is None:
        refused = _dfa_refused.get(ast)
        if refused is not None:
            raise refused[0](*refused[1])
        # (a string format's automaton is shipped: format_table, the same DFA as from_regex's;
        # imported here so that ``python -m xgrammar2.json_schema.format_table`` runs it once)
        from . import format_table

        try:
            d = format_table.dfa_for_ast(ast)
            if d is None:
                d = fa.from_regex(ast)
        except rx.RegexUnsupported as e:
            _bounded_put(_dfa_refused, ast, (type(e), e.args), 256)
            raise
        d = _bounded_put(_dfa_cache, ast, d, 2048)
    return d


_nfa_cache: dict = {}


#: id(ast) -> (ast, {string: matches}, the literal it is or None); the AST is kept alive with
#: its entry, so its id names it. (Keyed by (ast, string) the memo hashed the whole AST tuple,
#: which Python does not cache, on every lookup: 5.7 us each, 0.12 s of Github_ultra o83932's
#: conversion.)
_match_cache: dict = {}
_match_seen: dict = {}  # ast -> the {string: matches} memo its entries share
_match_count = [0]  # strings memoised over all entries (the memo is emptied past 65,536)


def _match_clear():
    _match_cache.clear()
    _match_seen.clear()
    _match_count[0] = 0


def _literal_of(ast):
    """The one string a full-match regex AST matches when it is a sequence of single code
    points (rx.to_full_match of "^DockerInstaller@0$"), else None. Such patterns are
    matched by comparison: JsonSchemaStore service-schema tests 238 task names against 238
    of them (56,644 NFA runs, 0.2 s)."""
    items = ast[1] if ast[0] == "cat" else (ast,)
    out = []
    for it in items:
        if it[0] != "set" or len(it[1]) != 1 or it[1][0][0] != it[1][0][1]:
            return None
        out.append(chr(it[1][0][0]))
    return "".join(out)


def regex_match(ast, s: str) -> bool:
    """Full match of ``s`` against a regex AST: the cached DFA when one exists, else an NFA
    simulation (no subset construction, cheap for the few literal keys we test). Results are
    memoised: the same enum strings are tested against the same patterns many times (each
    pair of overlapping oneOf branches, every intersection with an enum)."""
    ent = _match_cache.get(id(ast))
    if ent is None or ent[0] is not ast:
        if len(_match_cache) > 4096:
            _match_clear()
        seen = _match_seen.get(ast)  # (an equal AST built again shares the memo: one hash per object)
        if seen is None:
            seen = _match_seen[ast] = {}
        ent = _match_cache[id(ast)] = (ast, seen, _literal_of(ast))
    if ent[2] is not None:
        return s == ent[2]
    seen = ent[1]
    r = seen.get(s)
    if r is not None:
        return r
    d = _dfa_cache.get(ast)
    if d is not None:
        r = bool(d.run(s))
    else:
        nfa = _nfa_cache.get(ast)
        if nfa is None:
            nfa = _bounded_put(_nfa_cache, ast, fa.compile_nfa(ast), 2048)
        r = bool(fa.nfa_match(nfa, s))
    if _match_count[0] >= 65536:
        _match_clear()
        seen.clear()
        _match_cache[id(ast)] = ent
        _match_seen[ast] = seen
    seen[s] = r
    _match_count[0] += 1
    return r


def validate(cx, u, v, depth=0) -> bool:
    if depth > 200:
        raise NotExpressible("validation recursion too deep")
    for n in u:
        if validate_node(cx, n, v, depth):
            return True
    return False


def is_integral(v) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return True
    d = to_dec(v)
    return d == d.to_integral_value()


_SURROGATE = re.compile("[\ud800-\udfff]")


def _valid_str(n, v: str) -> bool:
    """validate_node for a string node ``n`` and a str ``v``."""
    ln = len(v)
    if ln < n.minl or (n.maxl is not None and ln > n.maxl):
        return False
    if _SURROGATE.search(v) is not None:
        return False
    for ast, _ in n.pos:
        if not regex_match(ast, v):
            return False
    for ast, _ in n.neg:
        if regex_match(ast, v):
            return False
    return True


def validate_node(cx, n, v, depth=0) -> bool:
    k = n.kind
    if k == "ref":
        return validate(cx, cx.ref_union(n.name), v, depth + 1)
    if k == "enum":
        kv = jkey(v)
        return kv in n.keyset
    t = json_type(v)
    if k != t:
        return False
    if k == "null":
        return True
    if k == "boolean":
        return v in n.vals
    if k == "number":
        d = to_dec(v)
        integral = is_integral(v)
        if n.integer and not integral:
            return False
        if n.nonint and integral:
            return False
        if n.lo is not None and (d < n.lo or (n.lo_x and d == n.lo)):
            return False
        if n.hi is not None and (d > n.hi or (n.hi_x and d == n.hi)):
            return False
        for m in n.mults:
            if d % m != 0:
                return False
        for m in n.notmults:
            if d % m == 0:
                return False
        for x in n.nots:
            if d == x:
                return False
        return True
    if k == "string":
        return _valid_str(n, v)
    if k == "array":
        if len(v) < n.minn or (n.maxn is not None and len(v) > n.maxn):
            return False
        for i, x in enumerate(v):
            if i < len(n.prefix):
                if not validate(cx, n.prefix[i], x, depth + 1):
                    return False
            elif n.items is not None and not validate(cx, n.items, x, depth + 1):
                return False
        for cu, cmin, cmax, _ in n.contains:
            c = sum(1 for x in v if validate(cx, cu, x, depth + 1))
            if c < cmin or (cmax is not None and c > cmax):
                return False
        if n.unique is not None:
            ks = [jkey(x) for x in v]
            if len(set(ks)) != len(ks):
                return False
        return True
    if k == "object":
        if len(v) < n.minp or (n.maxp is not None and len(v) > n.maxp):
            return False
        for r in n.required:
            if r not in v:
                return False
        for key, x in v.items():
            for nu in n.names:
                if not validate(cx, nu, key, depth + 1):
                    return False
            pu = n.prop(key)
            if pu is not None and not validate(cx, pu, x, depth + 1):
                return False
            matched = []
            for ast, su in n.patterns:
                if regex_match(ast, key):
                    matched.append(ast)
                    if not validate(cx, su, x, depth + 1):
                        return False
            for su, keys, pats in n.addl:
                if key in keys:
                    continue
                if any(regex_match(p, key) for p in pats):
                    continue
                if not validate(cx, su, x, depth + 1):
                    return False
        for s in n.somes:
            if not any(some_key(s, key) and validate(cx, s[3], x, depth + 1) for key, x in v.items()):
                return False
        return True
    raise AssertionError(k)


def some_key(s, key) -> bool:
    """Whether ``key`` is in the key language of the existential condition ``s`` (Obj.somes)."""
    pos, keys, pats = s[0], s[1], s[2]
    if key in keys or (pos is not None and not regex_match(pos, key)):
        return False
    return not any(regex_match(p, key) for p in pats)


# ---------------------------------------------------------------- intersection

MAX_ALTS = 256

#: Intersections of a definition with a schema that get a rule of their own, per conversion
#: (convert.py's synthesized `ref ∩ node` rules and deferred_negation.py's `context minus U`).
MAX_SYNTH_REFS = 5000
#: The value of Converter.ref_union_memo for a reference being converted (convert.py sets it,
#: one_of.py reads it).
IN_PROGRESS = object()
#: Existential conditions (Obj.somes) one object node may carry: the emitter tracks which are
#: still unmet, one grammar state per subset (2^MAX_SOMES per member position).
MAX_SOMES = 3


def intersect(cx, a, b):
    if a is b:
        return a
    if is_any(a):
        return b
    if is_any(b):
        return a
    if not a or not b:
        return NEVER
    m = getattr(cx, "meter", None)
    if m is not None:
        m[0] -= len(a) * len(b)
        if m[0] < 0:
            raise NotExpressible("making the branches exclusive needs too large a product")
    out = []
    compactions = 0
    for x in a:
        for y in b:
            r = intersect_node(cx, x, y)
            if r is not None:
                if isinstance(r, tuple):
                    out.extend(r)
                else:
                    out.append(r)
                if len(out) > MAX_ALTS:  # (as soon as it is known: not after the whole product)
                    if compactions < COMPACTIONS and not getattr(cx, "emitting", False):
                        compactions += 1
                        out = compact(out, getattr(cx, "numbers", None), m)
                    if len(out) > MAX_ALTS:
                        raise NotExpressible("intersection has too many alternatives")
    return tuple(out)


# ---------------------------------------------------------------- compaction (past MAX_ALTS)

def same(a, b, depth=0) -> bool:
    """True only when ``a`` and ``b`` (nodes, unions, or their fields) are structurally equal
    (the source pointers aside); False when unsure (objects without a known structure are
    compared by identity)."""
    if a is b:
        return True
    ta = type(a)
    if ta is not type(b) or depth > 40:
        return False
    if isinstance(a, Node):
        return all(s == "src" or same(getattr(a, s), getattr(b, s), depth + 1) for s in a.__slots__)
    if ta is tuple or ta is list:
        return len(a) == len(b) and all(same(x, y, depth + 1) for x, y in zip(a, b))
    if ta in (str, int, bool, Decimal, frozenset, type(None)):
        return a == b
    return False


_SID_PLAIN = (str, int, bool, Decimal, frozenset, type(None))


class _Numbers:
    """Structural numbers of IR values, one table per owner (a conversion's Converter.numbers,
    an Emitter's; no state shared between conversions or threads): ``of(a)`` is equal for structurally equal values as ``same``
    compares them (source pointers aside; objects of unknown structure by identity), and
    ``same(a, b)`` compares two values by their numbers, one walk per value rather than one
    per pair (compact() compares thousands of pairs). Unlike ``same`` it has no depth limit.
    Nodes and tuples are never changed once made, so a number stays right while its object
    lives (kept in the table)."""
    __slots__ = ("ids", "keys", "enums_by_id")

    def __init__(self, enums_by_id=False):
        self.ids: dict = {}   # id(node or tuple) -> (it, number)
        self.keys: dict = {}  # structure -> number
        #: an enum numbered by the identity of its value tuple (an equal enum built anew is
        #: another number): cheaper where enums of hundreds of values are rebuilt often
        self.enums_by_id = enums_by_id

    def of(self, a):
        t = type(a)
        if t in _SID_PLAIN:
            return (t, a)  # (compared by ==, as same() does: Decimal 1.0 and 1 alike)
        e = self.ids.get(id(a))
        if e is not None and e[0] is a:
            return e[1]
        if t is Enum and self.enums_by_id:
            k = (t, id(a.values))  # (a keeps its values alive)
        elif isinstance(a, Node):
            k = (t,) + tuple([self.of(getattr(a, f)) for f in a.__slots__ if f != "src"])
        elif t is tuple:
            k = (tuple,) + tuple([self.of(x) for x in a])
        elif t is list:  # (not numbered: a list may change)
            return (list,) + tuple([self.of(x) for x in a])
        else:
            k = ("id", id(a))
        n = self.keys.get(k)
        if n is None:
            n = self.keys[k] = len(self.keys)
        self.ids[id(a)] = (a, n)
        return n

    def same(self, a, b) -> bool:
        if a is b:
            return True
        t = type(a)
        if t is not type(b):
            return False
        if t is tuple:  # (a union: its length and its members' kinds first, then the structure)
            if len(a) != len(b) or any(type(x) is not type(y) for x, y in zip(a, b)):
                return False
        return self.of(a) == self.of(b)


#: the fields of an object node that _merge_pair compares as they are
_OBJ_REST = tuple(s for s in Obj.__slots__ if s not in ("props", "required", "src"))


def _merge_pair(x, y, eq):
    """One object node for ``x ∪ y`` when they differ in one key's entry only, else None:
    "k absent or in V1" (or "k present and in V1") ∪ the same with V2 is "k, if present, in
    V1 ∪ V2", required only where both require k. Exact: the other conditions are the same
    (and, in strict mode, the keys the object is closed to). ``eq``: how two fields compare
    (ir.same, or a _Numbers table's ``same``)."""
    if x.kind != "object" or y.kind != "object" or len(x.props) != len(y.props):
        return None
    # (one walk: a different key order, or a second differing entry, ends it; compact()
    # compares thousands of pairs of large objects that differ in many entries)
    diff = []
    for (k, u), (kk, v) in zip(x.props, y.props):
        if k != kk:
            return None
        if not eq(u, v):
            if diff:
                return None
            diff.append(k)
    rx_, ry = set(x.required), set(y.required)
    if diff:
        k = diff[0]
    else:
        d = rx_ ^ ry
        if len(d) != 1:
            return None  # (equal nodes: compact() drops one)
        k = next(iter(d))
    if tuple(r for r in x.required if r != k) != tuple(r for r in y.required if r != k) or \
            not all(eq(getattr(x, f), getattr(y, f)) for f in _OBJ_REST):
        return None
    if (k in rx_) != (k in ry) and not (k in x.ev_keys or x.ev_all or not (x.ev_keys or x.ev_pats)):
        # (strict mode closes an object to its evaluated and required keys, emit.object: k
        # stays allowed only where it is evaluated)
        return None
    req = x.required if k in rx_ and k in ry else tuple(r for r in x.required if r != k)
    if not diff:  # (the same entry, or none: "k required" ∪ "k optional" is "k optional")
        return x.copy(required=req)
    v = union(x.prop(k), y.prop(k))
    return x.copy(props=tuple((kk, v if kk == k else u) for kk, u in x.props), required=req)


#: compact() calls one intersection may make (each when its product passes MAX_ALTS), and the
#: node pairs one call compares: past them the product is refused as before.
COMPACTIONS = 2
COMPACT_PAIRS = 20000


#: pairs one compact() call compares by walking them before it numbers structures (a few
#: pairs of large nodes that differ early cost less walked: Github_medium o683)
COMPACT_WALKED = 2000


def compact(nodes, nums=None, meter=None):
    """``nodes`` (a union's alternatives) with structurally equal ones dropped and object
    nodes that differ in one key's entry merged (_merge_pair), repeatedly: the same set of
    values in fewer alternatives. Used where a product passes MAX_ALTS (the products of negated
    branches: "k absent" and "k present with a value in V" split one condition in two). Only
    nodes of one kind with the same property keys in the same order are compared. ``nums``: the
    conversion's structural numbers (Converter.numbers), a table of this call's own without.
    ``meter``: the budget of the product being compacted (intersect's ``cx.meter``), charged per
    pair compared, one unit plus one per entry of two objects (a pair walks up to each entry): a
    product that keeps passing MAX_ALTS is refused within its budget instead of compacting for
    free (Github_trivial o63308's oneOf took 0.75 s to its refusal, most of it compacting)."""
    if nums is None:
        nums = _Numbers()
    groups: dict = {}
    for n in nodes:
        key = (n.kind, tuple(k for k, _ in n.props)) if n.kind == "object" else (n.kind,)
        groups.setdefault(key, []).append(n)
    left = [COMPACT_PAIRS]
    out = []
    for g in groups.values():
        changed = len(g) > 1
        cost = 1 + len(g[0].props) if g[0].kind == "object" else 1  # (a pair walks up to each entry)
        while changed and left[0] > 0:
            changed = False
            i = 0
            while i < len(g):
                j = i + 1
                while j < len(g) and left[0] > 0:
                    left[0] -= 1
                    if meter is not None:
                        meter[0] -= cost
                        if meter[0] < 0:
                            raise NotExpressible("making the branches exclusive needs too large a product")
                    # (the first pairs by walking them, which stops at the first difference;
                    # past COMPACT_WALKED, by structural numbers: one walk per node)
                    eq = same if left[0] > COMPACT_PAIRS - COMPACT_WALKED else nums.same
                    m = g[i] if eq(g[i], g[j]) else _merge_pair(g[i], g[j], eq)
                    if m is not None:
                        g[i] = m
                        del g[j]
                        changed = True
                    else:
                        j += 1
                i += 1
        out.extend(g)
    return out


def _merge_decimal_bounds(a: Num, b: Num):
    lo, lo_x = a.lo, a.lo_x
    if b.lo is not None and (lo is None or b.lo > lo or (b.lo == lo and b.lo_x)):
        lo, lo_x = b.lo, b.lo_x
    hi, hi_x = a.hi, a.hi_x
    if b.hi is not None and (hi is None or b.hi < hi or (b.hi == hi and b.hi_x)):
        hi, hi_x = b.hi, b.hi_x
    return lo, lo_x, hi, hi_x


def _uniq(t):
    out = []
    for x in t:
        if x not in out:
            out.append(x)
    return tuple(out)


#: jkey's tag of the values a node of each kind holds (refs: any).
_KIND_TAG = {"null": "n", "boolean": "b", "number": "d", "string": "s", "array": "a", "object": "o"}


def intersect_node(cx, x, y):
    """Returns a node, a tuple of nodes, or None for the empty set."""
    if x is y:
        return x
    kx, ky = x.kind, y.kind
    if kx == "ref" or ky == "ref":
        return cx.intersect_ref(x, y)
    if kx == "enum" or ky == "enum":
        m = getattr(cx, "meter", None)
        if m is not None:  # (the values checked count toward the budget of a product)
            m[0] -= len(x.values) if kx == "enum" else len(y.values)
            if m[0] < 0:
                raise NotExpressible("making the branches exclusive needs too large a product")
        if kx == "enum" and ky == "enum":
            keep = [(v, k) for v, k in zip(x.values, x.keys) if k in y.keyset]
        else:
            e, o = (x, y) if kx == "enum" else (y, x)
            if o.kind == "string":  # (validate_node's string case, without its dispatch)
                keep = [(v, k) for v, k in zip(e.values, e.keys) if isinstance(v, str) and _valid_str(o, v)]
            else:
                tag = _KIND_TAG.get(o.kind)  # (only values of the node's type can pass: by their keys' tag)
                keep = [(v, k) for v, k in zip(e.values, e.keys)
                        if (tag is None or k[0] == tag) and validate_node(cx, o, v)]
        if not keep:
            return None
        return Enum([v for v, _ in keep], [k for _, k in keep])
    if kx != ky:
        return None
    if kx == "null":
        return x
    if kx == "boolean":
        v = x.vals & y.vals
        return Bool(v) if v else None
    if kx == "number":
        if x.is_plain() and not x.integer:
            return y
        if y.is_plain() and not y.integer:
            return x
        lo, lo_x, hi, hi_x = _merge_decimal_bounds(x, y)
        n = Num(x.integer or y.integer, lo, lo_x, hi, hi_x, _uniq(x.mults + y.mults), _uniq(x.nots + y.nots),
                x.nonint or y.nonint, _uniq(x.notmults + y.notmults), x.src if not x.is_plain() else y.src)
        return None if n.trivially_empty() else n
    if kx == "string":
        if x.is_plain():
            return y
        if y.is_plain():
            return x
        minl = max(x.minl, y.minl)
        maxl = x.maxl if y.maxl is None else (y.maxl if x.maxl is None else min(x.maxl, y.maxl))
        if maxl is not None and minl > maxl:
            return None
        return Str(minl, maxl, _uniq(x.pos + y.pos), _uniq(x.neg + y.neg), x.src if not x.is_plain() else y.src)
    if kx == "array":
        if x.is_plain() and not x.ev_all and not x.ev_n:
            return y
        if y.is_plain() and not y.ev_all and not y.ev_n:
            return x
        n = max(len(x.prefix), len(y.prefix))
        prefix = []
        for i in range(n):
            a = x.prefix[i] if i < len(x.prefix) else (x.items if x.items is not None else ANY)
            b = y.prefix[i] if i < len(y.prefix) else (y.items if y.items is not None else ANY)
            prefix.append(intersect(cx, a, b))
        if x.items is None:
            items = y.items
        elif y.items is None:
            items = x.items
        else:
            items = intersect(cx, x.items, y.items)
        minn = max(x.minn, y.minn)
        maxn = x.maxn if y.maxn is None else (y.maxn if x.maxn is None else min(x.maxn, y.maxn))
        if maxn is not None and minn > maxn:
            return None
        for i in range(min(minn, n)):
            if not prefix[i]:
                return None
        return Arr(tuple(prefix), items, minn, maxn, x.contains + y.contains, x.unique or y.unique,
                   max(x.ev_n, y.ev_n), x.ev_all or y.ev_all, x.src if not x.is_plain() else y.src)
    if kx == "object":
        if x.is_plain() and not x.ev_all and not x.ev_keys and not x.ev_pats:
            return y
        if y.is_plain() and not y.ev_all and not y.ev_keys and not y.ev_pats:
            return x
        required = x.required + tuple(r for r in y.required if r not in x.required)
        minp = max(x.minp, y.minp)
        maxp = x.maxp if y.maxp is None else (y.maxp if x.maxp is None else min(x.maxp, y.maxp))
        if maxp is not None and (minp > maxp or len(required) > maxp):
            return None
        props = list(x.props)
        idx = {k: i for i, (k, _) in enumerate(props)}
        later = []
        for k, u in y.props:
            if k in idx:
                i = idx[k]
                if k in required:
                    # a required key first: when its two schemas share no value the object is
                    # empty, and the other keys' (often much larger) intersections are not built
                    r = intersect(cx, props[i][1], u)
                    if not r:
                        return None
                    props[i] = (k, r)
                else:
                    later.append((i, k, u))
            else:
                idx[k] = len(props)
                props.append((k, u))
        for i, k, u in later:
            props[i] = (k, intersect(cx, props[i][1], u))
        pd = dict(props)
        for r in required:
            if r in pd and not pd[r]:
                return None
        somes = x.somes
        if y.somes:
            somes = _uniq(x.somes + y.somes)
            if len(somes) > MAX_SOMES:
                raise NotExpressible(f"negation of open objects needs more than {MAX_SOMES} 'some member "
                                     "violates patternProperties/additionalProperties' conditions on one object")
        return Obj(tuple(props), required, _uniq(x.patterns + y.patterns), _uniq(x.addl + y.addl),
                   _uniq(x.names + y.names), minp, maxp, x.ev_keys | y.ev_keys, _uniq(x.ev_pats + y.ev_pats),
                   x.ev_all or y.ev_all, x.src if not x.is_plain() else y.src, somes)
    raise AssertionError(kx)


def union(*us):
    out = []
    enums = 0
    for u in us:
        for n in u:
            if not any(n is m for m in out):
                out.append(n)
                enums += n.kind == "enum"
    if enums > 1:
        out = _merge_enums(out)
    if len(out) > MAX_ALTS:
        out = compact(out)
        if len(out) > MAX_ALTS:
            raise NotExpressible("union has too many alternatives")
    return tuple(out)


def _merge_enums(nodes):
    """``nodes`` with its enum nodes made one, where the first was (their values in order,
    each JSON value once). An anyOf of single-value enums (JsonSchemaStore service-schema's
    238 task names) otherwise stays 238 alternatives: every intersection with the union
    tested each of them against each node of the other side, and past MAX_ALTS of them the
    union was refused."""
    vals, keys, seen, out, at = [], [], set(), [], None
    for n in nodes:
        if n.kind == "enum":
            for v, k in zip(n.values, n.keys):
                if k not in seen:
                    seen.add(k)
                    vals.append(v)
                    keys.append(k)
            if at is None:
                at = len(out)
                out.append(n)
        else:
            out.append(n)
    out[at] = Enum(vals, keys)
    return out


# ---------------------------------------------------------------- negation

def _others(kind):
    return tuple(n for t, n in (("null", NULL), ("boolean", BOOL), ("number", NUMBER), ("string", STRING),
                                ("array", ARRAY), ("object", OBJECT)) if t != kind)


#: The failures a deferred negation avoids (Converter.defer_subtract, only while
#: ``cx.defer_negation``): the definition is still being converted, or its negation unrolls
#: recursion deeper than negate() goes.
RECURSIVE_REF = "a recursive $ref is intersected with itself"
TOO_DEEP = "negation nested too deeply"
#: (the end of the refusals past MAX_ALTS: "intersection/union has too many alternatives")
TOO_MANY = "has too many alternatives"


def deferrable(cx, e) -> bool:
    return getattr(cx, "defer_negation", False) and str(e) in (RECURSIVE_REF, TOO_DEEP)


def negate(cx, u, depth=0):
    """Complement of a union within all JSON values; raises NotExpressible."""
    if depth > 8:
        raise NotExpressible(TOO_DEEP)
    if not u:
        return ANY
    if is_any(u):
        return NEVER
    src = getattr(cx, "neg_src", None)
    out = negate_one_of(cx, u, depth) if len(u) > 1 else None
    if out is None:
        out = ANY
        for n in u:
            out = intersect(cx, out, negate_node(cx, n, depth))
            if not out:
                break
    if src is not None and out and not is_any(out) and id(out) not in src:
        src[id(out)] = (out, u)
    return out


def negated_from(cx, u):
    """The union ``u`` is the negation of (ir.negate recorded it), else None: the emitter's
    ``contains`` negates its schema again (¬¬v = v). Not used while converting: ``v`` keeps its
    evaluation annotations (unevaluatedProperties/Items), which a ``not`` does not pass on."""
    src = getattr(cx, "neg_src", None)
    rec = src.get(id(u)) if src else None
    return rec[1] if rec is not None and rec[0] is u else None


def _unannotated(cx, u):
    """``u`` (references expanded) without the evaluation annotations of its top-level nodes
    (what a value in it has evaluated does not count outside a failed or negated branch)."""
    out = []
    for n in _expand_nodes(cx, u):
        if n.kind == "object" and (n.ev_keys or n.ev_pats or n.ev_all):
            n = n.copy(ev_keys=frozenset(), ev_pats=(), ev_all=False)
        elif n.kind == "array" and (n.ev_n or n.ev_all):
            n = n.copy(ev_n=0, ev_all=False)
        out.append(n)
    return tuple(out)


def negate_one_of(cx, u, depth):
    """The complement of ``u`` when it is the union an exclusive oneOf built (one_of.one_of,
    recorded where its context is any value), else None: a value is outside "exactly one
    branch" when it is in no branch or in two (pairs not marked in ``overlap`` are disjoint; the
    context term is empty then). Exact, and it negates the branches themselves, not the
    alternatives of their exclusive products (whose negation is a product of products)."""
    rec = getattr(cx, "one_of_src", None)
    rec = rec.get(id(u)) if rec else None
    if rec is None or rec[0] is not u:
        return None
    _, branches, context, overlap = rec
    n = len(branches)
    try:
        pairs = [_unannotated(cx, intersect(cx, branches[i], branches[j]))
                 for i in range(n) for j in range(i + 1, n) if overlap[i][j]]
    except NotExpressible:
        return None  # (a definition still being converted: negated as before)
    return union(negate(cx, context, depth), negate(cx, union(*branches), depth), *pairs)


def negate_open(cx, u):
    """negate() with the negation of objects with patternProperties/additionalProperties
    (existential conditions, Obj.somes) enabled, contradictions pruned; raises NotExpressible."""
    prev = getattr(cx, "open_negation", False)
    cx.open_negation = True
    try:
        return prune(cx, negate(cx, u))
    finally:
        cx.open_negation = prev


def negate_node(cx, n, depth):
    k = n.kind
    if k == "ref":
        entry = getattr(cx, "refs", {}).get(n.name)
        if entry is not None and entry[0] == "not":
            # ¬(ctx minus U) = ¬ctx ∪ U (a deferred negation negated again)
            return union(negate(cx, entry[1], depth + 1), entry[2])
        if getattr(cx, "negation_rules", False):
            # (one_of's relative attempt: every definition's negation a rule of its own, shared
            # by all the places that negate it, computed when needed)
            return (cx.defer_subtract(ANY, (n,)),)
        memo = getattr(cx, "neg_memo", None)
        key = (n.name, getattr(cx, "open_negation", False), getattr(cx, "defer_negation", False))
        if memo is not None and key in memo:
            # (one union per definition: the negations of two branches that share an entry
            # then intersect it with itself, which intersect() returns at once)
            return memo[key]
        try:
            r = negate(cx, cx.ref_union(n.name), depth + 1)
            if memo is not None:
                memo[key] = r
            return r
        except NotExpressible as e:
            if not (deferrable(cx, e) or (getattr(cx, "defer_negation", False) and TOO_MANY in str(e))):
                raise
            # A rule "not this definition", computed once the definition is complete (or, one
            # too large to negate in place, when it is used: within the context it meets there).
            return (cx.defer_subtract(ANY, (n,)),)
    if k == "null":
        return _others("null")
    if k == "boolean":
        rest = frozenset((True, False)) - n.vals
        return _others("boolean") + ((Bool(rest),) if rest else ())
    if k == "enum":
        by_t: dict = {}
        for v in n.values:
            by_t.setdefault(json_type(v), []).append(v)
        out = []
        for t, base in (("null", NULL), ("boolean", BOOL), ("number", NUMBER), ("string", STRING),
                        ("array", ARRAY), ("object", OBJECT)):
            vs = by_t.get(t)
            if not vs:
                out.append(base)
            elif t == "boolean":
                rest = frozenset((True, False)) - frozenset(vs)
                if rest:
                    out.append(Bool(rest))
            elif t == "number":
                out.append(Num(nots=_uniq(tuple(to_dec(v) for v in vs))))
            elif t == "string":
                out.append(Str(neg=((literal_set_ast(vs), "#"),)))
            elif t in ("array", "object"):
                cur = (Arr(),) if t == "array" else (Obj(),)
                for v in vs:
                    cur = intersect(cx, cur, _negate_container(cx, v, depth))
                    if not cur:
                        break
                out.extend(cur)
        return tuple(out)
    others = _others(k)
    if k == "number":
        alts = []
        if n.integer:
            alts.append(Num(nonint=True))
        if n.nonint:
            alts.append(Num(integer=True))
        if n.lo is not None:
            alts.append(Num(hi=n.lo, hi_x=not n.lo_x))
        if n.hi is not None:
            alts.append(Num(lo=n.hi, lo_x=not n.hi_x))
        for m in n.mults:
            alts.append(Num(notmults=(m,)))
        for m in n.notmults:
            alts.append(Num(mults=(m,)))
        if n.nots:
            alts.append(Enum(list(n.nots)))
        return others + tuple(alts)
    if k == "string":
        alts = []
        if n.minl > 0:
            alts.append(Str(maxl=n.minl - 1))
        if n.maxl is not None:
            alts.append(Str(minl=n.maxl + 1))
        for p in n.pos:
            alts.append(Str(neg=(p,)))
        for p in n.neg:
            alts.append(Str(pos=(p,)))
        return others + tuple(alts)
    if k == "array":
        # De Morgan over the conjuncts: each alternative violates one of them.
        if n.unique is not None:
            raise NotExpressible("negation of uniqueItems")
        alts = []
        if n.minn > 0:
            alts.append(Arr(maxn=n.minn - 1))
        if n.maxn is not None:
            alts.append(Arr(minn=n.maxn + 1))
        for i, pu in enumerate(n.prefix):
            if is_any(pu):
                continue
            npu = negate(cx, pu, depth + 1)
            if npu:
                alts.append(Arr(prefix=(ANY,) * i + (npu,), minn=i + 1))
        if n.prefix and n.items is not None and not n.items:
            alts.append(Arr(minn=len(n.prefix) + 1))  # (items: false after the prefix)
        elif n.items is not None and not is_any(n.items):
            ni = negate(cx, n.items, depth + 1)
            if ni:
                if n.prefix:
                    raise NotExpressible("negation of 'items' after prefixItems")
                alts.append(Arr(contains=((ni, 1, None, n.src),)))
        for cu, cmin, cmax, src in n.contains:
            if cmin > 0:
                alts.append(Arr(contains=((cu, 0, cmin - 1, src),)))
            if cmax is not None:
                alts.append(Arr(contains=((cu, cmax + 1, None, src),)))
        return others + tuple(alts)
    if k == "object":
        if (n.patterns or n.addl or n.names or n.somes) and not getattr(cx, "open_negation", False):
            # (the converter first tries the relative negation, ir.subtract, which is cheaper where
            # it applies; see one_of.one_of)
            raise NotExpressible("negation of an object schema with patternProperties/additionalProperties/"
                                 "propertyNames")
        if n.names:
            raise NotExpressible("negation of an object schema with propertyNames")
        alts = []
        merged = set()
        for r in n.required:
            pu = n.prop(r)
            if getattr(cx, "open_negation", False) and pu and not is_any(pu):
                # "r missing" ∪ "r present with a value outside pu" is one node: "r, if present,
                # is outside pu" (one alternative, not two: negated branches are intersected
                # with each other, and the product of the alternatives is what grows)
                merged.add(r)
                alts.append(Obj(props=((r, negate(cx, pu, depth + 1)),)))
            else:
                alts.append(Obj(props=((r, NEVER),)))
        for key, pu in n.props:
            if key in merged:
                continue
            if not pu:
                alts.append(Obj(props=((key, ANY),), required=(key,)))
                continue
            if is_any(pu):
                continue
            npu = negate(cx, pu, depth + 1)
            if npu:
                alts.append(Obj(props=((key, npu),), required=(key,)))
        # De Morgan over "every key matching p has a value in su" (and over additionalProperties,
        # "every key outside keys/pats ..."): some key of that language has a value outside.
        for ast, su in n.patterns:
            if not is_any(su):
                alts.extend(_some_alts(cx, ast, frozenset(), (), negate(cx, su, depth + 1), n.src))
        for su, keys, pats in n.addl:
            if not is_any(su):
                alts.extend(_some_alts(cx, None, keys, pats, negate(cx, su, depth + 1), n.src))
        for pos, keys, pats, vu, _ in n.somes:
            # ¬(some key of L has a value in vu) = every key of L has a value in ¬vu
            nv = negate(cx, vu, depth + 1)
            if is_any(nv):
                continue
            if pos is None:
                # (the excluded keys listed as properties: the emitter reads an additionalProperties
                # entry's keys as named properties of the same object)
                alts.append(Obj(props=tuple((key, ANY) for key in sorted(keys)), addl=((nv, keys, pats),)))
            elif not keys and not pats:
                alts.append(Obj(patterns=((pos, nv),)))
            else:
                raise NotExpressible("negation of a 'some member' condition with a pattern and exclusions")
        if n.minp > 0:
            alts.append(Obj(maxp=n.minp - 1))
        if n.maxp is not None:
            alts.append(Obj(minp=n.maxp + 1))
        return others + tuple(alts)
    raise AssertionError(k)


#: A key language with at most this many strings becomes one alternative per key (a property
#: with a value in the union) instead of an existential condition (Obj.somes).
FINITE_KEYS_MAX = 16


def _some_alts(cx, pos, keys, pats, vu, src):
    """Objects with some key of the language (``pos``, not ``keys``, none of ``pats``, as in
    Obj.somes) whose value is in ``vu``: one alternative per key when the language is a small
    finite set, else one node with an existential condition."""
    if not vu:
        return ()
    if pos is not None:
        try:
            ks = finite_language(regex_dfa(pos), FINITE_KEYS_MAX)
        except rx.RegexUnsupported:
            ks = None
        if ks is not None:
            ks = [k for k in ks if k not in keys and not any(regex_match(p, k) for p in pats)]
            return tuple(Obj(props=((k, vu),), required=(k,)) for k in ks)
    return (Obj(somes=((pos, keys, pats, vu, src),), src=src),)


def finite_language(d, limit):
    """The strings a DFA accepts, sorted, when they are at most ``limit``; else None."""
    d = fa.trim(d)
    if d.is_empty():
        return []
    if fa.length_bounds(d)[1] is None:
        return None
    out = []
    stack = [(0, "")]
    while stack:
        st, pre = stack.pop()
        if d.accept[st]:
            out.append(pre)
            if len(out) > limit:
                return None
        for cset, t in d.trans[st]:
            if sum(hi - lo + 1 for lo, hi in cset) > limit:
                return None
            for lo, hi in cset:
                for cp in range(lo, hi + 1):
                    stack.append((t, pre + chr(cp)))
        if len(stack) > 4 * limit + 64:
            return None
    return sorted(out)


def _negate_container(cx, v, depth):
    """Arrays (resp. objects) other than the constant ``v``: a different length (key count),
    or an element (a key of ``v``) that differs. Exact: an array of ``len(v)`` items whose every
    item equals ``v``'s is ``v``; an object with ``len(v)`` keys that has every key of ``v``
    with an equal value is ``v``."""
    if depth > 8:
        raise NotExpressible(TOO_DEEP)
    if isinstance(v, list):
        n = len(v)
        alts = [Arr(minn=n + 1)] + ([Arr(maxn=n - 1)] if n else [])
        for i, x in enumerate(v):
            nx = negate(cx, (Enum([x]),), depth + 1)
            if nx:
                alts.append(Arr(prefix=(ANY,) * i + (nx,), minn=i + 1))
        return tuple(alts)
    alts = [Obj(minp=len(v) + 1)]
    for k, x in v.items():
        alts.append(Obj(props=((k, NEVER),)))
        nx = negate(cx, (Enum([x]),), depth + 1)
        if nx:
            alts.append(Obj(props=((k, nx),), required=(k,)))
    return tuple(alts)


# ---------------------------------------------------------------- difference (ctx ∧ ¬u)

def subtract(cx, ctx, u, depth=0):
    """``ctx ∩ ¬u``, exact. Tries the plain negation first; where ``u`` cannot be negated on
    its own, negates it node by node relative to each node of ``ctx``: enum contexts keep the
    values that fail ``u``; a context of another type is disjoint from an object node; an
    object node with patternProperties/additionalProperties/propertyNames is negated within
    an object context whose keys are a finite set (all other keys forbidden), where "some
    key violates them" becomes a finite disjunction over those keys. Raises NotExpressible
    otherwise."""
    try:
        return intersect(cx, ctx, negate(cx, u, depth))
    except NotExpressible as e:
        first = e
    if depth > 8:
        raise first
    if getattr(cx, "meter", None) is None:
        cx.meter = [getattr(cx, "subtract_left", SUBTRACT_BUDGET)]
        try:
            return _subtract(cx, ctx, u, depth, first)
        finally:
            cx.subtract_left = cx.meter[0]
            cx.meter = None
    return _subtract(cx, ctx, u, depth, first)


def subtract_objects(cx, ctx, u):
    """``ctx ∩ ¬u``, exact, where ``u``'s nodes are objects without patternProperties/
    additionalProperties/propertyNames: each object node of ``u`` is negated within each object
    node of the context (_negate_closed_obj_within: a condition the context already implies, such
    as an entry both share, is not negated), without first building ``u``'s whole negation and
    intersecting the context with it (which intersects each shared entry with its own negation,
    a product as large as the definitions involved). Falls back to subtract() where that fails."""
    first = NotExpressible("relative object negation")
    try:
        if getattr(cx, "meter", None) is None:
            cx.meter = [getattr(cx, "subtract_left", SUBTRACT_BUDGET)]
            try:
                return _subtract(cx, ctx, u, 0, first, True)
            finally:
                cx.subtract_left = cx.meter[0]
                cx.meter = None
        return _subtract(cx, ctx, u, 0, first, True)
    except NotExpressible as e:
        if e is not first:
            raise
    return subtract(cx, ctx, u)


def plain_object(n) -> bool:
    """An object node whose conditions are its required keys, properties and size only."""
    return n.kind == "object" and not (n.patterns or n.addl or n.names or n.somes)


def _subtract(cx, ctx, u, depth, first, relative=False):
    out = []
    nodes, later = _expand_nodes_deferring(cx, u)
    try:
        ctx_nodes = _expand_nodes(cx, ctx)
    except NotExpressible as e:
        if not deferrable(cx, e):
            raise
        # (the context is a definition still being converted: the whole difference a rule)
        return (cx.defer_subtract(ctx, u),)
    compactions = 0
    for c in ctx_nodes:
        cur = (c,)
        for n in nodes:
            cur = _subtract_node(cx, cur, n, depth, first, relative)
            if not cur:
                break
        for name in later:
            if not cur:
                break
            # (last: the rule "cur minus the definition" replaces cur)
            cur = (cx.defer_subtract(cur, (Ref(name),)),)
        out.extend(cur)
        if len(out) > MAX_ALTS:
            if compactions < COMPACTIONS and not getattr(cx, "emitting", False):
                compactions += 1
                out = compact(out, getattr(cx, "numbers", None), getattr(cx, "meter", None))
            if len(out) > MAX_ALTS:
                raise NotExpressible("intersection has too many alternatives")
    return _uniq(tuple(out))


def _expand_nodes(cx, u):
    out = []
    for n in u:
        if n.kind == "ref":
            out.extend(_expand_nodes(cx, cx.ref_union(n.name)))
        else:
            out.append(n)
    return out


def _expand_nodes_deferring(cx, u):
    """_expand_nodes(), and the names of the references whose union cannot be had now
    (deferrable(): only while ``cx.defer_negation``), to be subtracted by a deferred rule."""
    out, later = [], []
    for n in u:
        if n.kind != "ref":
            out.append(n)
            continue
        try:
            ru = cx.ref_union(n.name)
        except NotExpressible as e:
            if not deferrable(cx, e):
                raise
            later.append(n.name)
            continue
        o, l2 = _expand_nodes_deferring(cx, ru)
        out.extend(o)
        later.extend(l2)
    return out, later


def _subtract_node(cx, cur, n, depth, first, relative=False):
    """``cur ∩ ¬n`` for one node ``n`` (``cur``: a union of non-reference nodes); ``relative``
    (subtract_objects): a plain object node ``n`` negated within each object of ``cur``, not
    negated on its own first."""
    nn = None
    if not (relative and plain_object(n)):
        try:
            nn = negate_node(cx, n, depth)
        except NotExpressible:
            nn = None
    if nn is not None:
        try:
            return intersect(cx, cur, nn)
        except NotExpressible:
            pass
    out = []
    for c in cur:
        if c.kind == "enum":
            keep = [(v, k) for v, k in zip(c.values, c.keys) if not validate_node(cx, n, v)]
            if keep:
                out.append(Enum([v for v, _ in keep], [k for _, k in keep]))
        elif n.kind == "enum":
            vs = [v for v in n.values if json_type(v) == c.kind]
            if not vs:
                out.append(c)
            else:
                raise first
        elif c.kind != n.kind:
            out.append(c)
        elif c.kind == "array":
            for r in intersect(cx, (c,), _negate_arr_within(cx, n, c, depth, first)):
                if not node_definitely_empty(cx, r, 0):
                    out.append(r)
        elif c.kind == "object":
            if definitely_empty(cx, intersect(cx, (c,), (n,))):
                out.append(c)  # (c ∩ n = ∅: c ∩ ¬n = c)
                continue
            for r in intersect(cx, (c,), _negate_obj_within(cx, n, c, depth, first)):
                if not node_definitely_empty(cx, r, 0):
                    out.append(r)
        else:
            raise first
        if len(out) > MAX_ALTS:
            raise NotExpressible("intersection has too many alternatives")
    return tuple(out)


#: Node pairs that the relative negations of one conversion may intersect, all subtract() calls
#: together (nested intersections included; the conversion of a referenced schema met on the way
#: is not counted): beyond it the construct is refused, so that a schema whose exclusivity needs
#: a huge product fails fast instead of taking many seconds.
SUBTRACT_BUDGET = 1_000_000


def _negate_arr_within(cx, n, c, depth, first):
    """Arrays violating array node ``n`` among those ``c`` allows: as negate_node, with the
    positional and item schemas negated relative to ``c``'s (an item outside ``n.items`` is
    one in some position schema of ``c`` and not in ``n.items``)."""
    if n.unique is not None or (n.prefix and n.items and not is_any(n.items)):
        raise first
    alts = []
    if n.prefix and n.items is not None and not n.items:
        alts.append(Arr(minn=len(n.prefix) + 1))  # (items: false after the prefix)
    if n.minn > 0:
        alts.append(Arr(maxn=n.minn - 1))
    if n.maxn is not None:
        alts.append(Arr(minn=n.maxn + 1))
    c_items = c.items if c.items is not None else ANY
    for i, pu in enumerate(n.prefix):
        if is_any(pu):
            continue
        npu = subtract(cx, c.prefix[i] if i < len(c.prefix) else c_items, pu, depth + 1)
        if npu:
            alts.append(Arr(prefix=(ANY,) * i + (npu,), minn=i + 1))
    if n.items and not is_any(n.items):
        ni = subtract(cx, union(*c.prefix, c_items), n.items, depth + 1)
        if ni:
            alts.append(Arr(contains=((ni, 1, None, n.src),)))
    for cu, cmin, cmax, src in n.contains:
        if cmin > 0:
            alts.append(Arr(contains=((cu, 0, cmin - 1, src),)))
        if cmax is not None:
            alts.append(Arr(contains=((cu, cmax + 1, None, src),)))
    return tuple(alts)


def finite_keys(c):
    """The keys an object node ``c`` can have when that is a finite set (an additional-
    properties entry that forbids every other key), else None."""
    if c.maxp == 0:
        return frozenset()
    ks = None
    for su, keys, pats in c.addl:
        if not su and not pats:
            ks = keys if ks is None else ks & keys
    return ks


def _negate_obj_within(cx, n, c, depth, first):
    """Objects violating object node ``n``, among those ``c`` allows (finite key set)."""
    keys = finite_keys(c)
    if keys is None and not (n.patterns or n.addl or n.names or n.somes):
        return _negate_closed_obj_within(cx, n, c, depth)
    if keys is None or n.somes:
        raise first
    alts = []
    for r in n.required:
        alts.append(Obj(props=((r, NEVER),)))
    for k in sorted(keys):
        ck = ANY
        if any(not validate(cx, nu, k, depth + 1) for nu in n.names):
            ck = NEVER
        pu = n.prop(k)
        if ck and pu is not None:
            ck = intersect(cx, ck, pu)
        for ast, su in n.patterns:
            if ck and regex_match(ast, k):
                ck = intersect(cx, ck, su)
        for su, ks, pats in n.addl:
            if ck and k not in ks and not any(regex_match(p, k) for p in pats):
                ck = intersect(cx, ck, su)
        if is_any(ck):
            continue
        if not ck:
            alts.append(Obj(props=((k, ANY),), required=(k,)))
            continue
        cp = c.prop(k)
        nk = subtract(cx, cp if cp is not None else ANY, ck, depth + 1)
        if nk:
            alts.append(Obj(props=((k, nk),), required=(k,)))
    if n.minp > 0:
        alts.append(Obj(maxp=n.minp - 1))
    if n.maxp is not None:
        alts.append(Obj(minp=n.maxp + 1))
    return tuple(alts)


def _negate_closed_obj_within(cx, n, c, depth):
    """Objects violating object node ``n`` (no patternProperties/additionalProperties/
    propertyNames: its conditions are its required keys, its properties and its size) among
    those ``c`` allows (any key set): a required key missing, a property's value outside its
    entry, or a size out of range. A condition ``c`` already implies adds nothing (``c``
    requires the key; ``c``'s entry for the key is the same union), so the negation of such an
    entry (often a large definition both share) is not built."""
    alts = []
    for r in n.required:
        if r not in c.required:
            alts.append(Obj(props=((r, NEVER),)))
    for k, pu in n.props:
        if is_any(pu):
            continue
        cp = c.prop(k)
        if cp is not None and same(cp, pu):
            continue
        if not pu:
            alts.append(Obj(props=((k, ANY),), required=(k,)))
            continue
        nk = subtract(cx, cp if cp is not None else ANY, pu, depth + 1)
        if nk:
            alts.append(Obj(props=((k, nk),), required=(k,)))
    if n.minp > 0:
        alts.append(Obj(maxp=n.minp - 1))
    if n.maxp is not None:
        alts.append(Obj(minp=n.maxp + 1))
    return tuple(alts)


def literal_set_ast(strings):
    return rx.alt(*[rx.literal(s) for s in strings])


# ---------------------------------------------------------------- emptiness (conservative)

def prune(cx, u):
    """``u`` without the nodes definitely_empty() finds empty, also looking at what every
    required key's value must satisfy (its ``properties`` entry, the patternProperties entries
    that match it and the additionalProperties entries that apply): the products of negated
    open objects are mostly such contradictions."""
    out = tuple(n for n in u if not node_definitely_empty(cx, n, 0) and not _required_key_empty(cx, n))
    return out if len(out) != len(u) else u


def _required_key_empty(cx, n) -> bool:
    if n.kind != "object" or not n.required or not (n.patterns or n.addl):
        return False
    try:
        for r in n.required:
            ru = n.prop(r)
            ru = ANY if ru is None else ru
            for ast, su in n.patterns:
                if ru and regex_match(ast, r):
                    ru = intersect(cx, ru, su)
            for su, keys, pats in n.addl:
                if ru and r not in keys and not any(regex_match(p, r) for p in pats):
                    ru = intersect(cx, ru, su)
            if definitely_empty(cx, ru, 1):
                return True
    except (rx.RegexUnsupported, NotExpressible):
        return False
    return False


def definitely_empty(cx, u, depth=0) -> bool:
    """True only when no value can satisfy ``u`` (False means: unknown or satisfiable)."""
    if depth > 6:
        return False
    return all(node_definitely_empty(cx, n, depth) for n in u)


def node_definitely_empty(cx, n, depth) -> bool:
    k = n.kind
    if k == "ref":
        u = cx.try_ref_union(n.name)
        return u is not None and definitely_empty(cx, u, depth + 1)
    if k == "enum":
        return not n.values
    if k == "number":
        return n.trivially_empty()
    if k == "string":
        if n.maxl is not None and n.minl > n.maxl:
            return True
        if not n.pos and not n.neg:
            return False
        sk = (n.minl, n.maxl, tuple(a for a, _ in n.pos), tuple(a for a, _ in n.neg))
        r = _str_empty_cache.get(sk)
        if r is None:
            r = _bounded_put(_str_empty_cache, sk, _str_node_empty(n), 4096)
        return r
    if k == "array":
        if n.maxn is not None and n.minn > n.maxn:
            return True
        for i in range(min(n.minn, len(n.prefix))):
            if definitely_empty(cx, n.prefix[i], depth + 1):
                return True
        if n.minn > len(n.prefix) and n.items is not None and definitely_empty(cx, n.items, depth + 1):
            return True
        return False
    if k == "object":
        if n.maxp is not None and (n.minp > n.maxp or len(n.required) > n.maxp):
            return True
        if n.somes:
            if n.maxp == 0:
                return True
            keys = finite_keys(n)
            for sm in n.somes:
                if definitely_empty(cx, sm[3], depth + 1):
                    return True
                try:
                    if keys is not None and not any(some_key(sm, key) for key in keys):
                        return True
                except rx.RegexUnsupported:
                    pass
        for r in n.required:
            pu = n.prop(r)
            if pu is not None and definitely_empty(cx, pu, depth + 1):
                return True
            for ast, su in n.patterns:
                try:
                    if regex_match(ast, r) and definitely_empty(cx, su, depth + 1):
                        return True
                except rx.RegexUnsupported:
                    pass
            for su, keys, pats in n.addl:
                if su or r in keys:
                    continue
                try:
                    if not any(regex_match(p, r) for p in pats):
                        return True
                except rx.RegexUnsupported:
                    pass
        return False
    return False


_str_empty_cache: dict = {}


def _str_node_empty(n) -> bool:
    """node_definitely_empty() of a string node with patterns (automaton products: memoised by
    the caller, the same combinations recur across the alternatives of negated branches)."""
    try:
        d = fa.length_dfa(n.minl, n.maxl) if (n.minl or n.maxl is not None) and n.maxl is not None and n.maxl < 64 else None
        acc = None
        for ast, _ in n.pos:
            dd = regex_dfa(ast)
            acc = dd if acc is None else fa.intersect(acc, dd)
            if acc.is_empty():
                return True
        for ast, _ in n.neg:
            dd = regex_dfa(ast)
            acc = fa.negate(dd) if acc is None else fa.difference(acc, dd)
            if acc.is_empty():
                return True
        if d is not None and acc is not None:
            return fa.intersect(acc, d).is_empty()
    except rx.RegexUnsupported:
        return False
    return False
