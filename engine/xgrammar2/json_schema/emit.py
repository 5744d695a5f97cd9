"""IR unions → grammar rules (see grammar.py), with the whitespace / indentation style."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from decimal import Decimal

from . import automaton as fa
from . import charset as cs
from . import emit_contains
from . import emit_somes
from . import format_exprs
from . import formats as fmts
from . import grammar as G
from . import ir
from . import numeric
from . import regex as rx
from . import spelling as sp
from .convert import _sanitize
from .errors import UnsupportedSchemaError
from .grammar import EPS, alt, lit, opt, ref, rep, seq
from .ranges import int_range_expr, num_range_expr

MAX_INDENT_DEPTH = 32
STATE_LIMIT = 4000
# The largest max_chars the EBNF front end takes (docs/rule-attributes.md).
_MAX_CHARS = 2147483647
# A pattern x length product above this many states becomes the pattern's automaton under a
# character budget instead (_budget_string): each character of a product is a new state, so
# every token inside such a string was a first visit of the mask cache and its rules too many
# to inline as one group (csrc/lower LW_GROUP_MAX); the budget's states repeat across positions.
# Measured on the 38 JSONSchemaBench schemas with products over 200 states
# (docs/benchmarks/json_compile.md, "Budgets instead of large length products").
PREFER_BUDGET_STATES = 256
#: A pattern whose counted repetition goes past this (the core's repeat_threshold, above which
#: it keeps a repetition counted instead of unrolling it) keeps its own expression beside
#: minLength 0 / 1 and maxLength (Emitter._counted_string) instead of an automaton.
COUNTED_MIN = 16


class _PreferBudget(Exception):
    """string_dfa(budget_ok=True): the length product would exceed PREFER_BUDGET_STATES."""
UNIQUE_MAX_VALUES = 12
PERMUTE_MAX_KEYS = 4
# any_order: exact matching (every required key present, no key twice) tracks the set of
# named properties seen, one grammar state per subset: 2^n. Past this many named properties
# of one object the option is refused (lenient: upstream's relaxed any_order, with a warning).
# Measured (docs/json-schema.md, "any_order"): 10 named properties cost ~45 ms to convert and
# compile and ~4.5 MB of compiled grammar; 12 cost ~0.2 s and ~18 MB.
ANY_ORDER_MAX_KEYS = 10
# excludes: a string's minLength/maxLength are kept (exactly) while (bound + 1) x spelling
# states x exclusion states stays under this estimate (~25 ms to convert at the limit), else
# dropped with a warning, as upstream always does.
EXCLUDES_LENGTH_STATES = 1024
Q = ("lit", '"')
_str_text_cache: dict = {}

# Characters written literally inside generated string literals; everything else gets the
# spellings json_char allows.
_SAFE = frozenset(chr(c) for c in range(0x20, 0x7F)) - {'"', "\\"}


def _then(pre, e):
    """``seq(pre, e)`` for a ``pre`` that seq() made (so its items need no re-flattening):
    when ``e`` is a rule reference, as the next state of a chain mostly is, the items are
    extended without the walk."""
    if e is not None and e[0] == "ref" and pre is not None:
        if pre[0] == "seq":
            items = pre[1]
            return ("seq", items + (e,)) if items else e
        return ("seq", (pre, e))
    return seq(pre, e)


def _outline(u):
    """What two equal unions have in common at a glance (kinds, object keys and counts, array
    bounds), without walking into their members: Emitter.sub numbers the structure of a union
    only when an earlier one had the same outline."""
    out = []
    for n in u:
        k = n.kind
        if k == "object":
            out.append((k, tuple([p for p, _ in n.props]), n.required, n.minp, n.maxp, len(n.patterns),
                        len(n.addl), len(n.somes)))
        elif k == "array":
            out.append((k, len(n.prefix), n.minn, n.maxn, n.unique is not None))
        elif k == "ref":
            out.append((k, n.name))
        else:
            out.append(k)
    return tuple(out)


#: sub() looks unions up by structure once a conversion has emitted this many (Emitter.sub)
EQUAL_SUBS_AFTER = 500


def _small(e) -> bool:
    if e is None:
        return True
    k = e[0]
    if k == "ref" or k == "lit" or k == "cls":
        return True
    if k == "seq" or k == "alt":
        xs = e[1]
        if len(xs) > 3:
            return False
        for x in xs:  # (a loop, not all() over a generator: called for every body)
            kx = x[0]
            if kx != "ref" and kx != "lit" and kx != "cls":
                return False
        return True
    if k == "rep":
        return e[1][0] in ("lit", "cls", "ref")
    return False


def _relabel(e, names):
    """``e`` with every reference to a rule in ``names`` (a dict) renamed to its value."""
    if e is None:
        return None
    k = e[0]
    if k == "ref":
        r = names.get(e[1])
        return e if r is None else ("ref", r)
    if k == "seq" or k == "alt":
        return (k, tuple([_relabel(x, names) for x in e[1]]))
    if k == "rep":
        return ("rep", _relabel(e[1], names), e[2], e[3])
    return e


#: (charset, full) -> (expression, steps): what Emitter.char_ref returns for one charset and
#: the rules it defines on first use, in order (("shared", name) or ("def", name, body)).
#: Pure functions of the key, shared across conversions (a tool's string patterns and key
#: tries recur across requests); bounded like the other module caches.
_char_cache: dict = {}


def _char_recipe(mk):
    r = _char_cache.get(mk)
    if r is not None:
        return r
    c, full = mk
    c = cs.intersect(c, cs.SCALARS)
    steps: list = []
    if not c:
        e = None
    elif c == cs.SCALARS:
        steps.append(("shared", "char"))
        e = ref("char")
    else:
        base, u = G.json_char_parts(c, full)
        if not u:
            e = base
        elif u == G.U_ELIGIBLE and not full:
            steps.append(("shared", "char_u"))
            e = alt(base, ref("char_u"))
        else:
            ue = G._u_escape(u)
            if not _small(ue):
                name = "char_u_" + hashlib.blake2b(repr(u).encode(), digest_size=5).hexdigest()
                steps.append(("def", name, ue))
                ue = ref(name)
            e = alt(base, ue)
        if not _small(e):
            name = ("char_" if full else "kchar_") + hashlib.blake2b(repr(c).encode(), digest_size=5).hexdigest()
            steps.append(("def", name, e))
            e = ref(name)
    r = (e, tuple(steps))
    if len(_char_cache) > 4096:
        _char_cache.clear()
    _char_cache[mk] = r
    return r


#: (regex AST, key) -> (expression, charsets): Emitter.regex_expr's result and the
#: (charset, full) pairs it passes to char_ref, in first-use order (their rules are defined
#: again, in that order, by a conversion that reuses the entry).
_rx_cache: dict = {}


def _rx_build(n, key, chars, flags):
    k = n[0]
    if k == "set":
        mk = (n[1], not key)
        chars[mk] = None
        return _char_recipe(mk)[0]
    if k == "eps":
        return EPS
    if k == "cat":
        return seq(*[_rx_build(x, key, chars, flags) for x in n[1]])
    if k == "alt":
        return alt(*[_rx_build(x, key, chars, flags) for x in n[1]])
    if k == "rep":
        if n[3] is not None and n[3] > G.MAX_REPEAT:
            flags.append(n[3])  # rep() warns: not cached, so that every conversion warns
        return rep(_rx_build(n[1], key, chars, flags), n[2], n[3])
    raise AssertionError(k)


def _rx_alphabet(n):
    """The union of the character sets a regex AST reads."""
    k = n[0]
    if k == "set":
        return n[1]
    if k in ("cat", "alt"):
        return cs.normalize([iv for m in n[1] for iv in _rx_alphabet(m)])
    if k == "rep":
        return _rx_alphabet(n[1])
    return cs.EMPTY


def _rx_raw(n):
    """A regex AST over raw characters (grammar.RAW_OK) as an expression of their raw spellings
    only (the budgeted strings of _budget_string and _counted_string)."""
    k = n[0]
    if k == "set":
        return G.cls(n[1])
    if k == "eps":
        return EPS
    if k == "cat":
        return seq(*[_rx_raw(x) for x in n[1]])
    if k == "alt":
        return alt(*[_rx_raw(x) for x in n[1]])
    if k == "rep":
        return rep(_rx_raw(n[1]), n[2], n[3])
    raise AssertionError(k)


def _shipped_format_expr(n):
    """regex_expr's (expression, charsets) of a string value whose AST is a string format's
    (formats.format_ast), from the shipped table (format_exprs: exactly what _rx_build and
    _char_recipe return, without walking the AST), cached in _rx_cache; None for any other
    AST or a stale entry."""
    name = fmts.format_name(n)
    if name is None:
        return None
    e = format_exprs.entry(name, fmts.STRING_FORMATS.get(name))
    if e is None:
        return None
    if len(_char_cache) > 4096 - len(e[4]):
        _char_cache.clear()
    for mk, recipe in e[4]:
        _char_cache.setdefault(mk, recipe)
    expr = e[2]
    if len(G._print_memo) > 4096:
        G._print_memo.clear()
    for i, text, refs, multi in e[5]:
        node = expr if i < 0 else expr[1][i]
        G._print_memo[id(node)] = (node, text, refs, multi)
    hit = (expr, e[3])
    if len(_rx_cache) > 2048:
        _rx_cache.clear()
    _rx_cache[(n, False)] = hit
    return hit


#: Bodies of the shared rules that are the same in every conversion (built once).
_KEY_REST = seq(rep(ref("char"), 0, None), Q)
_STRING = seq(Q, rep(ref("char"), 0, None), Q)
_INTEGER = alt(lit("0"), seq(opt(lit("-")), G.cls(cs.of_chars("123456789")),
                             rep(G.cls(cs.of_chars("0123456789")), 0, None)))
_DIG = G.cls(cs.of_chars("0123456789"))
_NUMBER = seq(opt(lit("-")), alt(lit("0"), seq(G.cls(cs.of_chars("123456789")), rep(_DIG, 0, None))),
              opt(seq(lit("."), rep(_DIG, 1, None))),
              opt(seq(G.cls(cs.of_chars("eE")), opt(G.cls(cs.of_chars("+-"))), rep(_DIG, 1, None))))
#: Emitter.string_dfa by value (at most 64 entries: a product holds up to STATE_LIMIT
#: states, ~0.5 MB): (pattern ASTs, negated ASTs[, minLength, maxLength]) -> DFA,
#: or the (class, args) of the exception it raised. Equal strings at different pointers, in
#: one schema or in several, share their automata; their rules are still emitted per
#: occurrence (the same output), and the refusals made per occurrence by the callers (the
#: messages cached here name no pointer).
_SDFA: dict = {}
_SHARED_BODY: dict = {}  # ("ws", max_whitespace_cnt) -> body
#: Emitter.layout results by (any_whitespace, indent, separators, depth); with any
#: whitespace they refer to the rule "ws", which layout() defines first.
_LAYOUTS: dict = {}


class Emitter:
    def __init__(self, cx, *, any_whitespace=True, indent=None, separators=None, max_whitespace_cnt=None,
                 any_order=False, excludes=()):
        self.cx = cx
        self.any_order = bool(any_order)
        # excludes: substrings forbidden in the raw text of strings (spelling.py)
        self.excl = tuple(excludes)
        self.g = G.Grammar()
        self.any_ws = any_whitespace
        if isinstance(indent, int) and not isinstance(indent, bool):
            indent = " " * indent
        self.indent = None if any_whitespace else indent
        if separators is None:
            separators = (", ", ": ") if indent is None else (",", ": ")
        self.seps = tuple(separators)
        self.max_ws = max_whitespace_cnt
        self._shared: set = set()
        self._char_memo: dict = {}
        self._bodies: dict = {}
        self._cycles: dict = {}
        self._subs: dict = {}
        self._nums = ir._Numbers(enums_by_id=True)  # (structural numbers of the unions sub() emits)
        self._outlines: dict = {}  # (_outline, depth) -> [(union, expression)], at most 8
        self._n_subs = 0
        self._eq_looked = self._eq_found = 0
        # (not where emitting a node may warn, naming its pointer: lenient mode, excludes)
        self._share = not cx.lenient and not self.excl
        self._memo: dict = {}
        self._pending: list = []
        #: rname -> the name of a rule the grammar's user defines for that reference instead
        #: (None: emitted here), or None: every reference emitted here (_convert_parts sets it)
        self.external_ref = None
        self._ref_nesting = 0
        #: (definition, depth) -> its rule. A definition's name can be taken by a rule named
        #: after a path ("defs_a" + property "b_c" = "defs_a_b_c", also definition "a_b_c"'s
        #: name): the definition then gets a fresh one.
        self._ref_rules: dict = {("root", 0): "root"}
        self._layouts: dict = {}
        if self.excl:
            self.g.may_be_empty = True  # a listed key or a constant may be excluded entirely

    # ------------------------------------------------------------ diagnostics

    def unsupported(self, keyword, ptr, msg):
        self.cx.unsupported(keyword, ptr, msg)

    # ------------------------------------------------------------ shared rules

    def shared(self, name):
        if name in self._shared:
            return ref(name)
        self._shared.add(name)
        g = self.g
        if name == "ws":
            hi = self.max_ws
            keep = hi is None or (type(hi) is int and hi <= G.MAX_REPEAT)  # (rep() warns past the limit)
            body = _SHARED_BODY.get(("ws", hi)) if keep else None
            if body is None:
                body = rep(G.cls(cs.of_chars(" \n\t\r")), 0, hi)
                if keep:
                    if len(_SHARED_BODY) > 64:
                        _SHARED_BODY.clear()
                    _SHARED_BODY[("ws", hi)] = body
            g.define("ws", body)
        elif name == "char":
            g.define("char", G.json_char(cs.SCALARS, full=True))
        elif name == "key_rest":
            self.shared("char")
            g.define("key_rest", _KEY_REST)
        elif name == "char_u":
            g.define("char_u", G._u_escape(G.U_ELIGIBLE))
        elif name == "string":
            if self.excl:
                g.define("string", seq(Q, self.excl_body(fa.length_dfa(0, None), True, "string_x")))
            else:
                self.shared("char")
                g.define("string", _STRING)
        elif name == "integer":
            g.define("integer", _INTEGER)
        elif name == "number":
            g.define("number", _NUMBER)
        else:
            raise AssertionError(name)
        return ref(name)

    def char_ref(self, c, full=True):
        """One JSON-string character with decoded code point in ``c``: every spelling when
        ``full`` (string values), else the key spelling (see grammar.U_ELIGIBLE)."""
        mk = (c, full)
        hit = self._char_memo.get(mk)
        if hit is not None:
            return hit
        e, steps = _char_recipe(mk)
        # The rules this character needs, defined in the order a first use defines them.
        for st in steps:
            if st[0] == "shared":
                self.shared(st[1])
            elif st[1] not in self._shared:
                self._shared.add(st[1])
                self.g.define(st[1], st[2])
        if e is not None:
            self._char_memo[mk] = e
        return e

    # ------------------------------------------------------------ layout

    def _d(self, depth):
        return depth if self.indent is not None else 0

    def layout(self, depth):
        """(open_obj, close_obj, open_arr, close_arr, item_sep, kv_sep, empty_obj, empty_arr)."""
        d = self._d(depth)
        r = self._layouts.get(d)
        if r is None:
            lk = (self.any_ws, self.indent, self.seps, d)
            r = _LAYOUTS.get(lk)
            if r is None:
                r = self._layout(d)
                if len(_LAYOUTS) > 256:
                    _LAYOUTS.clear()
                _LAYOUTS[lk] = r
            elif self.any_ws:
                self.shared("ws")  # (what _layout defines)
            self._layouts[d] = r
        return r

    def _layout(self, depth):
        if self.any_ws:
            ws = self.shared("ws")
            return (seq(lit("{"), ws), seq(ws, lit("}")), seq(lit("["), ws), seq(ws, lit("]")),
                    seq(ws, lit(","), ws), seq(ws, lit(":"), ws), seq(lit("{"), ws, lit("}")),
                    seq(lit("["), ws, lit("]")))
        if self.indent is None:
            return (lit("{"), lit("}"), lit("["), lit("]"), lit(self.seps[0]), lit(self.seps[1]), lit("{}"),
                    lit("[]"))
        nl_in = "\n" + self.indent * (depth + 1)
        nl_out = "\n" + self.indent * depth
        return (lit("{" + nl_in), lit(nl_out + "}"), lit("[" + nl_in), lit(nl_out + "]"),
                lit(self.seps[0] + nl_in), lit(self.seps[1]), lit("{}"), lit("[]"))

    # ------------------------------------------------------------ entry points

    def reserve(self, name):
        name = self.g.unique(name)
        self.g.define(name, None)
        return name

    def sub(self, u, name, depth):
        """Emits ``u`` as an inline expression when small, else as a rule named after ``name``."""
        if not u:
            return None
        if ir.is_any(u):
            return self.any_value(depth)
        if len(u) == 1 and u[0].kind == "ref":
            return self.ref_rule(u[0].name, depth)
        # The same union reached again (a definition or an intersection shared by several
        # paths) is the same expression: its rules are reused. (The union is kept alive with
        # its entry, so its id names it.)
        mk = (id(u), self._d(depth))
        hit = self._subs.get(mk)
        if hit is not None:
            return hit[1]
        # An equal union built elsewhere (negations and intersections rebuild equal nodes:
        # Github_medium o3626's exclusive oneOf of recursive queries) is the same expression,
        # unless its emission said something (a warning names the node's pointer). Looked up
        # in large grammars whose conversion made oneOf branches exclusive (where negations
        # rebuild nodes) only, and compared in full (structural numbers) only with earlier
        # unions of the same outline: numbering every union cost small schemas ~10 % of their
        # conversion, and service-schema (no negation, 238 task objects) ~15 %.
        ok = None
        self._n_subs += 1
        if self._n_subs > EQUAL_SUBS_AFTER and self._share and self.cx.made_exclusive:
            ok = (_outline(u), mk[1])
            seen = self._outlines.get(ok)
            if seen:
                num = self._nums.of(u)
                self._eq_looked += 1
                for u2, e2 in seen:
                    if self._nums.of(u2) == num:
                        self._eq_found += 1
                        self._subs[mk] = (u, e2)
                        return e2
                if self._eq_looked >= 100 and self._eq_found * 10 < self._eq_looked:
                    self._share = False  # (outlines alike, structures not: numbering finds nothing)
        if ok is not None:
            said = len(self.cx.warnings) + len(self.cx.unsat_notes)
        name = self.reserve(name)
        e = self.emit(u, name, depth)
        if e is None or _small(e) or (e[0] == "ref" and e[1] != name):
            del self.g.rules[name]
        else:
            del self.g.rules[name]
            e = self.intern(name, e)
        self._subs[mk] = (u, e)
        if ok is not None and len(self.cx.warnings) + len(self.cx.unsat_notes) == said:
            seen = self._outlines.setdefault(ok, [])
            if len(seen) < 8:
                seen.append((u, e))
        return e

    def intern(self, name, body):
        """Defines rule ``name`` (which must be free or reserved) unless an identical body was
        already emitted: then that rule is reused. Children are emitted before their parents,
        so equal sub-schemas yield equal bodies and one rule (canonical output)."""
        bodies = self._bodies
        n = len(bodies)
        other = bodies.setdefault(body, name)  # (one hash of the body, not a lookup and a store)
        if len(bodies) == n:  # (an equal body was there)
            return ("ref", other)
        self.g.rules[name] = body
        return ("ref", name)

    def close_cycle(self, names, e):
        """The interning of a group of rules that refer to each other (the states of a
        counting automaton, ``names`` in the order they were defined) and that only ``e``
        refers to from outside: when an earlier group had the same bodies up to the names
        of its members, this group's rules are dropped and ``e`` refers to that group's.
        intern() cannot see that equality, since each body names its own group's states, and
        without it every path to an equal sub-schema kept its own copy of the automaton and
        of every rule above it (Github_medium o3626: a recursive exclusive oneOf whose
        ``contains``-like negated arrays were written 713 times)."""
        rules, attrs = self.g.rules, self.g.attrs
        local = {nm: "\x00%d" % i for i, nm in enumerate(names)}
        # (a member's attributes are part of what it means: none carries one today)
        key = tuple([(_relabel(rules[nm], local), attrs.get(nm)) for nm in names])
        hit = self._cycles.setdefault(key, names)
        if hit is names:
            return e
        for nm in names:
            del rules[nm]
        return _relabel(e, dict(zip(names, hit)))

    def emit(self, u, name, depth):
        if not u:
            return None
        if ir.is_any(u):
            return self.any_value(depth)
        if len(u) == 1:
            return self.node(u[0], name, depth)
        kinds = [n.kind for n in u]
        alts = []
        for i, n in enumerate(u):
            nm = name if kinds.count(n.kind) == 1 else f"{name}_{i}"
            if n.kind in ("array", "object") or (n.kind == "string" and not n.is_plain()) or \
                    (n.kind == "number" and not n.is_plain()):
                alts.append(self.sub((n,), nm + "_" + n.kind[:3], depth))
            else:
                alts.append(self.node(n, nm, depth))
        return alt(*alts)

    def node(self, n, name, depth):
        k = n.kind
        if k == "null":
            return lit("null")
        if k == "boolean":
            return alt(*[lit("true" if v else "false") for v in (True, False) if v in n.vals])
        if k == "number":
            return self.number(n, name)
        if k == "string":
            return self.string(n, name)
        if k == "enum":
            return alt(*[self.value_text(v, depth) for v in n.values])
        if k == "ref":
            return self.ref_rule(n.name, depth)
        try:
            if k == "array":
                return self.array(n, name, depth)
            if k == "object":
                return self.object(n, name, depth)
        except RecursionError as e:
            # (where, for the message: the source pointers of the arrays/objects it unwinds)
            if n.src != "#":
                e.__dict__.setdefault("pointers", []).append(n.src)
            raise
        raise AssertionError(k)

    def ref_rule(self, rname, depth):
        d = self._d(depth)
        if d > MAX_INDENT_DEPTH:
            return None
        name = self._ref_rules.get((rname, d))
        if name is not None:
            return ref(name)
        if self.external_ref is not None and d == 0:
            ext = self.external_ref(rname)
            if ext is not None:  # (a rule of the caller's: core_strings.part_rows)
                self.g.external.add(ext)
                self._ref_rules[(rname, d)] = ext
                return ref(ext)
        name = self._ref_rules[(rname, d)] = self.g.unique(rname if d == 0 else f"{rname}_d{d}")
        self.g.may_be_empty = True
        self.g.define(name, None)
        if self._ref_nesting >= 24:
            # Emitted later by drain(): long chains of definitions must not nest Python calls.
            self._pending.append((rname, name, depth))
            return ref(name)
        self._ref_nesting += 1
        try:
            self._emit_ref(rname, name, depth)
        finally:
            self._ref_nesting -= 1
        return ref(name)

    def _emit_ref(self, rname, name, depth):
        try:
            u = self.cx.ref_union(rname)
        except ir.NotExpressible as e:
            self.unsupported("$ref", self.cx.ref_ptr(rname), str(e))
            u = ir.ANY
        e = self.emit(u, name, depth)
        self.g.define(name, e)
        if e is not None:
            self._bodies.setdefault(e, name)

    def drain(self):
        """Emits the bodies of referenced definitions (iteratively, LIFO: deterministic)."""
        while self._pending:
            rname, name, depth = self._pending.pop()
            self._emit_ref(rname, name, depth)

    # ------------------------------------------------------------ any JSON value

    def any_value(self, depth):
        d = self._d(depth)
        if d > MAX_INDENT_DEPTH:
            return alt(self.shared("string"), self.shared("number"), lit("true"), lit("false"), lit("null"))
        name = "value" if d == 0 else f"value_d{d}"
        if name not in self._shared:
            self._shared.add(name)
            self.g.define(name, None)
            self.g.define(name, alt(self.any_object(depth), self.any_array(depth), self.shared("string"),
                                    self.shared("number"), lit("true"), lit("false"), lit("null")))
        return ref(name)

    def any_object(self, depth):
        d = self._d(depth)
        name = "object" if d == 0 else f"object_d{d}"
        if name not in self._shared:
            self._shared.add(name)
            self.g.define(name, None)
            oo, oc, _, _, sep, kv, eo, _ = self.layout(depth)
            member = seq(self.shared("string"), kv, self.any_value(depth + 1))
            self.g.define(name, alt(eo, seq(oo, member, rep(seq(sep, member), 0, None), oc)))
        return ref(name)

    def any_array(self, depth):
        d = self._d(depth)
        name = "array" if d == 0 else f"array_d{d}"
        if name not in self._shared:
            self._shared.add(name)
            self.g.define(name, None)
            _, _, ao, ac, sep, _, _, ea = self.layout(depth)
            v = self.any_value(depth + 1)
            self.g.define(name, alt(ea, seq(ao, v, rep(seq(sep, v), 0, None), ac)))
        return ref(name)

    # ------------------------------------------------------------ literals

    def str_text(self, s: str, key=False):
        """A JSON string literal decoding to ``s``. Printable ASCII is written raw (a literal
        with every \\u spelling of every letter would be huge); other characters get every
        spelling in values, the key spelling (grammar.U_ELIGIBLE) in object keys."""
        r = _str_text_cache.get((s, key))
        if r is None:
            r = self._str_text(s, key)
            if len(_str_text_cache) > 8192:
                _str_text_cache.clear()
            _str_text_cache[(s, key)] = r
        return r

    @staticmethod
    def _str_text(s: str, key: bool):
        if s.isascii() and s.isprintable() and '"' not in s and "\\" not in s:
            return ("lit", '"' + s + '"')  # (every character in _SAFE: one raw literal)
        parts = []
        run = []
        for ch in s:
            if ch in _SAFE:
                run.append(ch)
                continue
            if run:
                parts.append(lit("".join(run)))
                run = []
            parts.append(G.json_char(cs.single(ord(ch)), full=not key))
        if run:
            parts.append(lit("".join(run)))
        return seq(Q, *parts, Q)

    @staticmethod
    def num_text(v):
        if isinstance(v, bool):
            raise AssertionError
        d = ir.to_dec(v)
        if d == d.to_integral_value():
            i = int(d)
            zeros = opt(seq(lit("."), rep(lit("0"), 1, None)))
            if i == 0:
                return seq(opt(lit("-")), lit("0"), zeros)
            return seq(lit(str(i)), zeros)
        t = format(d.normalize(), "f")
        if d.is_zero():
            t = "0"
        return seq(lit(t), rep(lit("0"), 0, None))

    def value_text(self, v, depth):
        if v is None:
            return lit("null")
        if v is True:
            return lit("true")
        if v is False:
            return lit("false")
        if isinstance(v, (int, float, Decimal)):
            return self.num_text(v)
        if isinstance(v, str):
            return self.excl_text(v, False) if self.excl else self.str_text(v)
        oo, oc, ao, ac, sep, kv, eo, ea = self.layout(depth)
        if isinstance(v, list):
            if not v:
                return ea
            items = [self.value_text(x, depth + 1) for x in v]
            out = [ao, items[0]]
            for x in items[1:]:
                out += [sep, x]
            out.append(ac)
            return seq(*out)
        if not v:
            return eo
        pairs = [seq(self.key_text(k), kv, self.value_text(x, depth + 1)) for k, x in v.items()]
        if any(p is None for p in pairs):
            return None
        if self.any_order and PERMUTE_MAX_KEYS < len(pairs) <= ANY_ORDER_MAX_KEYS:
            rn = "const_" + hashlib.blake2b(repr((pairs, oo, oc, sep)).encode(), digest_size=5).hexdigest()
            hit = self._memo.get(("const_obj", rn))
            if hit is None:
                firsts = [p if _small(p) else self.intern(f"{rn}__k{i}", p) for i, p in enumerate(pairs)]
                nexts = [seq(sep, f) for f in firsts]
                content = self._subsets(f"{rn}__o", firsts, nexts, (1 << len(pairs)) - 1, None, None, 0, None,
                                        False, 0)
                hit = self._memo[("const_obj", rn)] = seq(oo, content, oc)
            return hit
        orders = itertools.permutations(pairs) if len(pairs) <= PERMUTE_MAX_KEYS else [pairs]
        alts = []
        for order in orders:
            out = [oo, order[0]]
            for x in order[1:]:
                out += [sep, x]
            out.append(oc)
            alts.append(seq(*out))
        return alt(*alts)

    # ------------------------------------------------------------ excludes

    def excl_body(self, d, full, name):
        """Rules for the raw text of a string after its opening quote (through the closing
        one) whose decoding is in the automaton ``d`` and which contains no excluded word;
        None when there is none. Raises automaton.AutomatonTooLarge."""
        x = sp.excluded_dfa(d, full, self.excl, STATE_LIMIT)
        if x.is_empty():
            return None
        key = ("excl", x.key())
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = G.dfa_to_rules(self.g, x, self.g.unique(name), Q, G.cls)
        return hit

    def excl_text(self, s, key):
        """str_text(s, key) without the spellings that contain an excluded word; None when
        every spelling does."""
        ok, every = sp.literal_excluded(s, key, self.excl)
        if every:
            return self.str_text(s, key)
        if ok.is_empty():
            return None
        return seq(Q, G.dfa_to_expr(ok, G.cls), Q)

    def key_text(self, k):
        return self.excl_text(k, True) if self.excl else self.str_text(k, key=True)

    def _excl_string(self, n, name):
        """A string without pattern/format under ``excludes``: its raw text avoids the
        excluded words; lengths and negated patterns are kept exactly while the automaton
        stays small, else the lengths are dropped. Returns (expression, [(dropped keyword,
        why)])."""
        lengths = n.minl or n.maxl is not None
        try:
            if n.neg:
                d = self.string_dfa(n)
            else:
                if n.maxl is not None or n.minl:
                    top = n.maxl if n.maxl is not None else n.minl
                    est = (top + 1) * sp.spell_dfa(fa.length_dfa(0, None), True).n * \
                        sp.avoid_dfa(self.excl).n
                    if est > EXCLUDES_LENGTH_STATES:
                        raise fa.AutomatonTooLarge(f"about {est} states")
                d = fa.length_dfa(n.minl, n.maxl)
            body = self.excl_body(d, True, name + "__xs")
        except rx.RegexUnsupported as e:
            if lengths:
                why = f"length x exclusion automaton too large: {e}"
                kws = [(k, why) for k, on in (("minLength", n.minl), ("maxLength", n.maxl is not None)) if on]
                return self.string(n.copy(minl=0, maxl=None), name), kws
            self.unsupported("not", n.src, f"{e}: a negated pattern on a string filtered by excludes")
            return self.shared("string"), []
        return (seq(Q, body) if body is not None else None), []

    # ------------------------------------------------------------ numbers

    def number(self, n, name):
        if n.is_plain():
            return self.shared("integer" if n.integer else "number")
        if n.integer and not (n.mults or n.nots or n.nonint or n.notmults):
            return int_range_expr(n)
        e = num_range_expr(n)
        if e is not NotImplemented:
            if e is None and n.mults:  # (as below: the note names why)
                self.cx.unsat(n.src, f"the range contains no multipleOf value (multipleOf {n.mults[0]})")
            return e
        try:
            d = numeric.number_dfa(n)
        except numeric.TooLarge as e:
            self.unsupported("multipleOf" if (n.mults or n.notmults) else "minimum", n.src, str(e))
            return self.shared("integer" if n.integer else "number")
        if d.is_empty():
            if n.mults:
                self.cx.unsat(n.src, f"the range contains no multipleOf value (multipleOf {n.mults[0]})")
            return None
        key = ("num", n.integer, n.lo, n.lo_x, n.hi, n.hi_x, n.mults, n.nots, n.nonint, n.notmults)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = G.dfa_to_rules(self.g, d, self.g.unique(name + "__num"), EPS, G.cls)
        return hit

    # ------------------------------------------------------------ strings

    def regex_expr(self, n, key=False):
        ck = (n, key)
        hit = _rx_cache.get(ck)
        if hit is None and not key:
            hit = _shipped_format_expr(n)
        if hit is None:
            chars: dict = {}
            flags: list = []
            hit = (_rx_build(n, key, chars, flags), tuple(chars))
            if not flags:
                if len(_rx_cache) > 2048:
                    _rx_cache.clear()
                _rx_cache[ck] = hit
        for mk in hit[1]:
            self.char_ref(*mk)
        return hit[0]

    @staticmethod
    def adjust_length(ast, minl, maxl):
        """For concatenations with one variable part ``X{a,b}`` (X of fixed width), fold the
        length bounds into the repetition; returns None when the shape does not fit."""
        parts = list(ast[1]) if ast[0] == "cat" else [ast]
        fixed = 0
        var = None
        for i, p in enumerate(parts):
            lo, hi = rx.length_range(p)
            if lo == hi:
                fixed += lo
                continue
            if var is not None or p[0] != "rep":
                return None
            wlo, whi = rx.length_range(p[1])
            if wlo != whi or wlo == 0:
                return None
            var = (i, p, wlo)
        if var is None:
            if fixed < minl or (maxl is not None and fixed > maxl):
                return rx.NOTHING
            return ast
        i, p, w = var
        a, b = p[2], p[3]
        na = max(a, -((fixed - minl) // w)) if minl > fixed else a
        nb = b
        if maxl is not None:
            cap = (maxl - fixed) // w if maxl >= fixed else -1
            nb = cap if b is None else min(b, cap)
        if nb is not None and na > nb:
            return rx.NOTHING
        parts[i] = ("rep", p[1], na, nb)
        return rx.cat(*parts)

    def string(self, n, name):
        if n.is_plain():
            return self.shared("string")
        if self.excl and not n.pos:
            key = ("xstr", n.minl, n.maxl, n.neg)
            hit = self._memo.get(key)
            if hit is None:
                hit = self._memo[key] = self._excl_string(n, name)
            e, dropped = hit
            for k, why in dropped:  # named for every string they are dropped from
                self.cx.warn(f"{n.src}: dropped '{k}': not enforced on a string filtered by excludes ({why})")
            return e
        key = ("str", n.minl, n.maxl, n.pos, n.neg)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = self._string(n, name)
        return hit

    def _string(self, n, name):
        if not n.pos and not n.neg:
            return seq(Q, rep(self.shared("char"), n.minl, n.maxl), Q)
        if len(n.pos) == 1 and not n.neg and not rx.has_anchor(n.pos[0][0]):
            ast = n.pos[0][0]
            lo, hi = rx.length_range(ast)
            if not (n.minl <= lo and (n.maxl is None or (hi is not None and hi <= n.maxl))):
                ast = self.adjust_length(ast, n.minl, n.maxl)
                if ast is None and not self.excl:
                    counted = self._counted_string(n, name)
                    if counted is not None:
                        return counted[0]
            if ast is not None:
                return seq(Q, self.regex_expr(ast), Q) if ast != rx.NOTHING else None
        try:
            try:
                d = self.string_dfa(n, budget_ok=n.maxl is not None and not self.excl)
            except _PreferBudget:
                try:
                    return self._budget_string(n, name)
                except rx.RegexUnsupported:
                    d = self.string_dfa(n)  # (no budget applies: the product, within the limit)
        except rx.RegexUnsupported as e:
            if isinstance(e, fa.AutomatonTooLarge) and n.maxl is not None and not self.excl:
                try:
                    return self._budget_string(n, name)
                except rx.RegexUnsupported:
                    pass  # (no exact budget either: refused with the product's message)
            ptr = n.pos[0][1] if n.pos else n.src
            self.unsupported("pattern", ptr, f"{e}: the combination of pattern/format/length constraints is too "
                                             "large to intersect exactly")
            # lenient: keep the patterns, drop the lengths (then the extra patterns)
            if n.minl or n.maxl is not None:
                return self.string(n.copy(minl=0, maxl=None), name)
            if len(n.pos) + len(n.neg) > 1:
                return self.string(n.copy(pos=n.pos[:1], neg=()), name)
            return self.shared("string")
        if d.is_empty():
            return None
        rname = self.g.unique(name + "__str")
        return seq(Q, G.dfa_to_rules(self.g, d, rname, Q, self.char_ref))

    def _counted_string(self, n, name):
        """A pattern that counts space-separated words past ``COUNTED_MIN``
        (``(\\S+\\s+){0,99}``) beside ``minLength`` 0 or 1 and any ``maxLength``: the
        pattern's own expression, the empty string taken out for minLength 1
        (regex.nonempty), under the ``maxLength`` budget rule where the pattern may be longer
        (as _budget_string: ``[max_chars=]`` over raw spellings where every character has
        one, else ``[max_json_chars=]``). The automaton the other paths build unrolls the
        repetition into a state per count, each with its own mask; a loop that a space
        leaves is left by most tokens at their first byte (BPE vocabularies spell words with
        their leading space), so the core cannot share one loop entry among those states and
        paid a vocabulary pass per word on its first visit (5-6 ms a token at 151k tokens,
        Github_easy---o21053, docs/json-schema.md "Strings"). Kept counted, the states are
        a handful. Other counted patterns (hostname labels: few tokens start with a dot)
        keep the automaton, whose states share their loop entries. Returns (expression or
        None,) when it applies, None when it does not (the caller builds the automaton)."""
        ast = n.pos[0][0]
        if n.minl > 1 or not any(cs.contains(_rx_alphabet(b), 0x20) for b in rx.counted_over(ast, COUNTED_MIN)):
            return None
        if n.minl == 1:
            ast = rx.nonempty(ast)
            if ast == rx.NOTHING:
                return (None,)
        lo, hi = rx.length_range(ast)
        if n.maxl is not None and lo > n.maxl:
            return (None,)
        if n.maxl is None or (hi is not None and hi <= n.maxl):
            return (seq(Q, self.regex_expr(ast), Q),)
        if n.maxl > _MAX_CHARS:
            return None
        bname = self.g.unique(name + "__len")
        if not cs.difference(_rx_alphabet(ast), G.RAW_OK):  # (raw spellings only, as _budget_string)
            self.g.define(bname, _rx_raw(ast))
            self.g.attrs[bname] = f"[max_chars={n.maxl}]"
        else:
            self.g.define(bname, self.regex_expr(ast))
            self.g.attrs[bname] = f"[max_json_chars={n.maxl}]"
        return (seq(Q, ref(bname), Q),)

    def _budget_string(self, n, name):
        """``pattern``/``format`` with a ``maxLength`` whose product automaton is too large:
        the pattern's automaton (times the ``minLength`` counts, when it needs them) in a rule
        with a character budget that spans exactly the characters between the quotes
        (docs/rule-attributes.md: a hard bound per occurrence). Where every character the
        automaton reads has a raw spelling (grammar.RAW_OK: no '"', '\\' or control
        character), ``[max_chars=maxLength]`` (code points of the text) over the raw
        spellings alone (a subset of the spellings as for keys; every value keeps its raw
        spelling; the smaller grammar); otherwise ``[max_json_chars=maxLength]``, which
        counts decoded characters (an escape is one, a surrogate-pair escape one code
        point), over every spelling. Raises RegexUnsupported where no budget applies (the
        caller refuses as before)."""
        if n.maxl > _MAX_CHARS:
            raise fa.AutomatonTooLarge(f"maxLength is above {_MAX_CHARS}")
        d = self.string_dfa(n.copy(minl=0, maxl=None))
        if d.is_empty():
            return None
        # (the union of the distinct labels, normalized once)
        alpha = cs.normalize([iv for c in {c for row in d.trans for c, _ in row} for iv in c])
        raw = not cs.difference(alpha, G.RAW_OK)
        lo, hi = fa.length_bounds(d)
        if lo < n.minl:
            # (the budget bounds from above only: the counts up to minLength stay a product)
            why = f"a {d.n}-state pattern automaton times {n.minl + 1} minLength counts is too large"
            # (_length_string_dfa makes the cheap size check first, and its refusal is cached)
            key = (tuple(ast for ast, _ in n.pos), tuple(ast for ast, _ in n.neg), n.minl, None)
            try:
                d = self._sdfa_get(key, self._length_string_dfa, d, n.minl, None, hi)
            except fa.AutomatonTooLarge:
                raise fa.AutomatonTooLarge(why) from None
            if d.is_empty():
                return None
            lo, hi = fa.length_bounds(d)
        if lo > n.maxl:
            return None
        rname = self.g.unique(name + "__str")
        if hi is not None and hi <= n.maxl:  # (minLength's product bounded it: no budget needed)
            return seq(Q, G.dfa_to_rules(self.g, d, rname, Q, self.char_ref))
        body = G.dfa_to_rules(self.g, d, rname, EPS, G.cls if raw else self.char_ref)
        bname = self.g.unique(name + "__len")
        self.g.define(bname, body)
        self.g.attrs[bname] = f"[max_chars={n.maxl}]" if raw else f"[max_json_chars={n.maxl}]"
        return seq(Q, ref(bname), Q)

    def string_dfa(self, n, budget_ok=False):
        """The automaton of a string node's decoded value (patterns, negated patterns,
        lengths). Raises RegexUnsupported (AutomatonTooLarge where a product is too large).
        Memoised by value (_SDFA), failures included: their messages name no pointer. With
        ``budget_ok`` (the caller can put maxLength in a character budget instead), raises
        _PreferBudget where the maxLength product would exceed PREFER_BUDGET_STATES."""
        pos = tuple(ast for ast, _ in n.pos)
        neg = tuple(ast for ast, _ in n.neg)
        d = self._sdfa_get((pos, neg), self._base_string_dfa, pos, neg)
        if d.is_empty():
            return d
        lo, hi = fa.length_bounds(d)
        if lo < n.minl or (n.maxl is not None and (hi is None or hi > n.maxl)):
            if budget_ok and n.maxl is not None and (hi is None or hi > n.maxl) and fa.length_product_states(
                    d, n.minl, n.maxl, PREFER_BUDGET_STATES) > PREFER_BUDGET_STATES:
                raise _PreferBudget("a pattern x maxLength product of more than "
                                    f"{PREFER_BUDGET_STATES} states")
            return self._sdfa_get((pos, neg, n.minl, n.maxl), self._length_string_dfa, d, n.minl, n.maxl, hi)
        return d

    @staticmethod
    def _sdfa_get(key, f, *args):
        hit = _SDFA.get(key)
        if hit is None:
            try:
                hit = f(*args)
            except rx.RegexUnsupported as e:
                hit = (type(e), e.args)
            ir._bounded_put(_SDFA, key, hit, 64)
        if type(hit) is tuple:
            raise hit[0](*hit[1])
        return hit

    @staticmethod
    def _base_string_dfa(pos, neg):
        d = None
        for ast in pos:
            x = ir.regex_dfa(ast)
            d = x if d is None else fa.intersect(d, x, STATE_LIMIT)
        negs = list(neg)
        plain = [ast for ast in negs if not rx.has_anchor(ast)]
        if len(plain) > 1:
            # one difference with the union instead of one per excluded pattern: the excluded
            # names of a closed object are often a hundred literals (JsonSchemaStore---cloudify:
            # 123), each a product and a minimisation of the whole automaton. Same language,
            # so the same minimal automaton
            negs = [rx.alt(*plain)] + [ast for ast in negs if rx.has_anchor(ast)]
        for ast in negs:
            x = ir.regex_dfa(ast)
            d = fa.negate(x, minimal=True) if d is None else fa.difference(d, x, STATE_LIMIT)
        # (d: an output of minimize, whether from regex_dfa, a product or negate)
        return fa.restrict_alphabet(d, minimal=True)

    @staticmethod
    def _length_string_dfa(d, minl, maxl, hi):
        top = maxl if maxl is not None else minl
        if hi is None and d.n * (top + 1) > 8 * STATE_LIMIT:
            raise fa.AutomatonTooLarge(f"a {d.n}-state pattern automaton times {top + 1} length counts")
        return fa.intersect_length(d, minl, maxl, STATE_LIMIT)

    # ------------------------------------------------------------ arrays

    def array(self, n, name, depth, wrap=None):
        oo, oc, ao, ac, sep, kv, eo, ea = self.layout(depth)
        closed = self.cx.strict and not n.ev_all and n.ev_n > 0
        tail = n.items if n.items is not None else (ir.NEVER if closed else ir.ANY)
        P = len(n.prefix)
        minn, maxn = n.minn, n.maxn
        if not tail:
            maxn = P if maxn is None else min(maxn, P)
        if maxn is not None and minn > maxn:
            return None
        contains = list(n.contains)
        if contains:
            keep = []
            for cu, cmin, cmax, src in contains:
                if ir.is_any(cu):
                    minn = max(minn, cmin)
                    if cmax is not None:
                        maxn = cmax if maxn is None else min(maxn, cmax)
                else:
                    keep.append((cu, cmin, cmax, src))
            contains = keep
            if maxn is not None and minn > maxn:
                return None
        if n.unique is not None and not (maxn is not None and maxn <= 1):
            if contains:
                self.unsupported("uniqueItems", n.unique, "uniqueItems together with contains")
            else:
                return self.unique_array(n, name, depth, P, tail, minn, maxn)
        if contains:
            if len(contains) > 1:
                return emit_contains.contains_array(self, n, name, depth, P, tail, minn, maxn, contains, STATE_LIMIT)
            return self.contains_array(n, name, depth, P, tail, minn, maxn, contains[0])
        elems = [self.sub(n.prefix[i], f"{name}_{i}", depth + 1) for i in range(P if maxn is None else min(P, maxn))]
        for i, e in enumerate(elems):
            if e is None:
                if i < minn:
                    return None
                maxn = i if maxn is None else min(maxn, i)
                break
        t = None
        if maxn is None or maxn > P:
            t = self.sub(tail, f"{name}_item", depth + 1)
            if t is None:
                maxn = P if maxn is None else min(maxn, P)
                if minn > maxn:
                    return None

        if wrap is not None:  # (runtime_unique_array: each element's value its own rule)
            elems = [None if e is None else wrap(e) for e in elems]
            t = None if t is None else wrap(t)

        def rest(i):
            if maxn is not None and i >= maxn:
                return EPS
            if i < P:
                if i >= len(elems) or elems[i] is None:
                    return EPS if i >= minn else None
                return alt(EPS if i >= minn else None, seq(sep, elems[i], rest(i + 1)))
            return rep(seq(sep, t), max(0, minn - i), None if maxn is None else maxn - i)

        if maxn == 0:
            return ea
        first = seq(elems[0], rest(1)) if P > 0 else seq(t, rest(1))
        rest = None  # a recursive closure is a reference cycle: break it (no work for the collector)
        return alt(ea if minn == 0 else None, seq(ao, first, ac))

    def _pos_schema(self, n, i, tail):
        return n.prefix[i] if i < len(n.prefix) else tail

    def contains_array(self, n, name, depth, P, tail, minn, maxn, c):
        oo, oc, ao, ac, sep, kv, eo, ea = self.layout(depth)
        cu, cmin, cmax, src = c
        rel = {}
        try:
            ncu = ir.negated_from(self.cx, cu) or ir.negate(self.cx, cu)
        except ir.NotExpressible as e:
            # Negated relative to each position's schema instead (ir.subtract), still exact.
            ncu = None
            try:
                for p in range(P):
                    rel[p] = ir.subtract(self.cx, self._pos_schema(n, p, tail), cu)
                rel["item"] = ir.subtract(self.cx, tail, cu)
            except ir.NotExpressible:
                try:  # (negating open objects: existential member conditions, emit_somes.py)
                    ncu = ir.negate_open(self.cx, cu)
                except ir.NotExpressible:
                    self.unsupported("contains", src, f"the contains schema cannot be negated ({e})")
                    return self.array(n.copy(contains=()), name, depth)
        I = maxn if maxn is not None else max(P, minn)
        ccap = cmax + 1 if cmax is not None else cmin
        if (I + 1) * (ccap + 1) > STATE_LIMIT:
            self.unsupported("contains", src, "the counting automaton for contains/minItems/maxItems is too large")
            return self.array(n.copy(contains=()), name, depth)
        exprs = {}

        def pos_exprs(p):
            if p not in exprs:
                s = self._pos_schema(n, p, tail) if p < P else tail
                m = ir.intersect(self.cx, s, cu)
                tag = p if p < P else "item"
                u = ir.intersect(self.cx, s, ncu) if ncu is not None else rel[tag]
                exprs[p] = (self.sub(m, f"{name}_{tag}_c", depth + 1), self.sub(u, f"{name}_{tag}_n", depth + 1))
            return exprs[p]

        states = {}
        self.g.may_be_empty = True

        def state(i, cnt, first):
            key = (i, cnt, first)
            if key in states:
                return states[key]
            rn = f"{name}__s{i}_{cnt}" + ("f" if first else "")
            states[key] = ref(rn)
            self.g.define(rn, None)
            names.append(rn)
            can_end = i >= minn and cnt >= cmin and (cmax is None or cnt <= cmax)
            alts = []
            if can_end and not first:
                alts.append(EPS)
            if maxn is None or i < maxn:
                p = i if i < P else P
                me, ue = pos_exprs(p)
                ni = i + 1 if maxn is not None else min(i + 1, I)
                s_ = EPS if first else sep
                if me is not None and (cmax is None or cnt + 1 <= cmax):
                    alts.append(seq(s_, me, state(ni, min(cnt + 1, ccap), False)))
                if ue is not None:
                    alts.append(seq(s_, ue, state(ni, cnt, False)))
            self.g.define(rn, alt(*alts))
            return states[key]

        empty_ok = minn == 0 and cmin == 0
        names: list = []
        body = self.close_cycle(names, seq(ao, state(0, 0, True), ac))
        state = None  # (cycle break, as in array)
        return alt(ea if empty_ok else None, body)

    def _enum_values(self, u):
        vals = []
        for node in u:
            if node.kind == "ref":
                sub = self._enum_values(self.cx.ref_union(node.name))
                if sub is None:
                    return None
                vals.extend(sub)
            elif node.kind == "enum":
                vals.extend(node.values)
            elif node.kind == "boolean":
                vals.extend(v for v in (True, False) if v in node.vals)
            elif node.kind == "null":
                vals.append(None)
            else:
                return None
        return vals

    def _open_item(self, u, seen=()):
        """Is every value of union ``u`` a string without maxLength or pattern, or an integer
        without an upper bound or multipleOf whose lower bound (if any) is at least 0 (a
        ``$ref`` to one counts)? From any prefix of such a value that is not complete,
        infinitely many values remain (a string goes on; digits can always be appended, and
        "-" has every negative integer), so a uniqueItems element of it can only meet a
        duplicate where it completes, which the parser checks at run time
        (runtime_unique_array)."""
        if not u or len(u) != 1 or self.excl:
            return False
        node = u[0]
        if node.kind == "ref":
            if node.name in seen:
                return False
            return self._open_item(self.cx.ref_union(node.name), seen + (node.name,))
        if node.kind == "string":
            return node.maxl is None and not node.pos and not node.neg
        if node.kind == "number":
            return (node.integer and node.hi is None and not node.mults and not node.nots and not node.nonint
                    and not node.notmults and (node.lo is None or node.lo >= 0))
        return False

    def search_unique_array(self, n, name, depth, minn, why):
        """uniqueItems over elements whose values can run out before they complete (objects,
        strings with a pattern or maxLength, bounded numbers, unions, long enums): the parser
        refuses duplicates as for runtime_unique_array, and the matcher refuses a token after
        which every completion of the element is a duplicate (``[unique_search_scope]``,
        csrc/parse/unique_search.h; one array may sit in an element of another: the search
        follows every open one). Refused when the array needs two elements or more (a small set
        of values could then run out across elements)."""
        if minn >= 2:
            self.unsupported("uniqueItems", n.unique, f"{why}, and minItems {minn} would need that many distinct "
                                                      "values to exist (a run-time search covers one element at a "
                                                      "time)")
            return self.array(n.copy(unique=None), name, depth)
        return self.runtime_unique_array(n, name, depth, search=True)

    def runtime_unique_array(self, n, name, depth, search=False):
        """uniqueItems enforced by the parser (csrc/parse/unique.h): the array's rule is
        ``[unique_scope]`` and each element's value a ``[unique]`` rule, whose completion the
        parser refuses when an earlier element of the same array has the same value (JSON
        equality: escapes decoded). Used for elements whose value set never runs out before
        they complete (_open_item), so the masks stay exact; with ``search``, the array's
        rule is ``[unique_search_scope]`` (search_unique_array)."""
        def wrap(e):
            rn = self.g.unique(f"{name}__uel")
            self.g.define(rn, e)
            self.g.attrs[rn] = "[unique]"
            return ref(rn)

        body = self.array(n.copy(unique=None), name, depth, wrap=wrap)
        if body is None:
            return None
        sn = self.g.unique(f"{name}__uarr")
        self.g.define(sn, body)
        self.g.attrs[sn] = "[unique_search_scope]" if search else "[unique_scope]"
        return ref(sn)

    def unique_array(self, n, name, depth, P, tail, minn, maxn):
        oo, oc, ao, ac, sep, kv, eo, ea = self.layout(depth)
        positions = P + (1 if tail else 0)
        per_pos = []
        for p in range(positions):
            s = self._pos_schema(n, p, tail) if p < P else tail
            try:
                vs = self._enum_values(s)
            except ir.NotExpressible:
                vs = None
            if vs is None:
                if all(self._open_item(self._pos_schema(n, q, tail) if q < P else tail)
                       for q in range(positions)):
                    return self.runtime_unique_array(n, name, depth)
                return self.search_unique_array(n, name, depth, minn, "item values can run out before they complete")
            per_pos.append(vs)
        allv = []
        idx = {}
        for vs in per_pos:
            for v in vs:
                k = ir.jkey(v)
                if k not in idx:
                    idx[k] = len(allv)
                    allv.append(v)
        if len(allv) > UNIQUE_MAX_VALUES:
            return self.search_unique_array(n, name, depth, minn, f"{len(allv)} distinct item values (at most "
                                                                  f"{UNIQUE_MAX_VALUES} are enumerated)")
        limit = len(allv) if maxn is None else min(maxn, len(allv))
        if minn > limit:
            return None
        if P == 0 and 1 + sum(math.comb(len(allv), k) for k in range(1, limit + 1)) > STATE_LIMIT + 1:
            # (the states below are the start and every set of 1..limit values: the build
            # would stop past STATE_LIMIT, after thousands of rules that finalize prunes
            # again; JsonSchemaStore asconfig's 12 features twice, 0.1 s)
            return self.search_unique_array(n, name, depth, minn, "uniqueItems automaton too large")
        texts = [self.value_text(v, depth + 1) for v in allv]
        pos_bits = [[idx[ir.jkey(v)] for v in vs] for vs in per_pos]
        states = {}
        self.g.may_be_empty = True

        def state(i, used, first):
            key = (min(i, P), used, first) if maxn is None else (i, used, first)
            if key in states:
                return states[key]
            if len(states) > STATE_LIMIT:
                raise ir.NotExpressible("uniqueItems automaton too large")
            rn = f"{name}__u{len(states)}"
            states[key] = ref(rn)
            self.g.define(rn, None)
            names.append(rn)
            alts = []
            if i >= minn and not first:
                alts.append(EPS)
            if i < limit:
                p = i if i < P else P
                if p < positions:
                    for b in pos_bits[p]:
                        if not used >> b & 1:
                            alts.append(seq(EPS if first else sep, texts[b], state(i + 1, used | (1 << b), False)))
            self.g.define(rn, alt(*alts))
            return states[key]

        names: list = []
        try:
            body = seq(ao, state(0, 0, True), ac)
        except ir.NotExpressible as e:
            return self.search_unique_array(n, name, depth, minn, str(e))
        finally:
            state = None  # (cycle break, as in array)
        return alt(ea if minn == 0 else None, self.close_cycle(names, body))

    # ------------------------------------------------------------ objects

    def _matches(self, ast, key):
        try:
            return ir.regex_match(ast, key)
        except rx.RegexUnsupported as e:
            raise ir.NotExpressible(str(e))

    def object(self, n, name, depth):
        if n.somes:  # (negated patternProperties/additionalProperties: emit_somes.py)
            return emit_somes.object_somes(self, n, name, depth, STATE_LIMIT)
        oo, oc, ao, ac, sep, kv, eo, ea = self.layout(depth)
        cx = self.cx
        addl = n.addl
        closed = cx.strict and not n.ev_all and (n.ev_keys or n.ev_pats)
        if closed:
            addl = addl + ((ir.NEVER, n.ev_keys | frozenset(n.required), n.ev_pats),)
        if n.is_plain() and not addl:
            return self.any_object(depth)
        listed = [k for k, _ in n.props] + [r for r in n.required if n.prop(r) is None]
        req = set(n.required)
        pmap: dict = {}  # (n.prop(k) for every listed key without a scan per key)
        for kk, pu in n.props:
            pmap.setdefault(kk, pu)
        try:
            entries = []
            for k in listed:
                u = pmap.get(k)
                u = ir.ANY if u is None else u
                for ast, su in n.patterns:
                    if u and self._matches(ast, k):
                        u = ir.intersect(cx, u, su)
                for su, keys, pats in addl:
                    if u and k not in keys and not any(self._matches(p, k) for p in pats):
                        u = ir.intersect(cx, u, su)
                for nu in n.names:
                    if u and not ir.validate(cx, nu, k):
                        u = ir.NEVER
                kt = self.key_text(k) if u else None
                e = self.sub(u, f"{name}_{_sanitize(k, 30)}", depth + 1) if kt is not None else None
                if e is None:
                    if k in req:
                        return None
                    continue
                entries.append((seq(kt, kv, e), k in req))
            extras = self.object_extras(n, addl, listed, name, depth, kv)
        except ir.NotExpressible as e:
            self.unsupported("patternProperties" if n.patterns else "properties", n.src, str(e))
            return self.any_object(depth)
        pmin, pmax = n.minp, n.maxp
        nreq = sum(1 for _, r in entries if r)
        if pmax is not None and nreq > pmax:
            return None
        if extras is None and pmin > len(entries):
            return None
        bounded = pmin > nreq or pmax is not None
        if not bounded:
            pmin, pmax = 0, None
        cap = max(pmin, 1) if pmax is None else pmax
        nent = len(entries)
        if self.any_order and (nent > 1 or (nent == 1 and extras is not None)):
            content = self.any_order_content(n, entries, extras, pmin, pmax, bounded, nreq, sep, name)
            empty_ok = nreq == 0 and pmin == 0
            return alt(eo if empty_ok else None, seq(oo, content, oc) if content is not None else None)
        # (the states below are (i, count) with count <= i: no more members than named properties
        # decided so far; the additional members after the last are one bounded repetition,
        # whatever the count: JsonSchemaStore---tokenlist's maxProperties 10000 without named
        # properties)
        if (nent + 1) * (min(nent, cap) + 1) > STATE_LIMIT:
            if bounded:
                self.unsupported("maxProperties" if pmax is not None else "minProperties", n.src,
                                 "the property-counting automaton is too large")
            else:  # no count bound in the schema: the object is simply too wide
                self.unsupported("properties", n.src,
                                 f"{nent} properties need a larger automaton than the "
                                 f"{STATE_LIMIT}-state limit")
            pmin, pmax, cap = 0, None, 1
        memo = {}
        # Without a count, "after a member, from key i on" is the separator and then any
        # member from key i on (the state with nothing emitted yet), or the end when no
        # required key is left: p_i = sep f_i | "" instead of the unfolded
        # p_i = sep kv_i p_{i+1} | p_{i+1}. The same language; each member is spelt once
        # instead of twice, and after a value the parser holds the separator and the end
        # instead of one item per later optional key (a 130-key chain: 130 items on every
        # byte from the closing quote to the next key; docs/benchmarks/json_compile.md,
        # "Optional chains").
        plain = pmin == 0 and pmax is None
        rest_optional = [True] * (nent + 1)
        for i in range(nent - 1, -1, -1):
            rest_optional[i] = rest_optional[i + 1] and not entries[i][1]
        # (each member after a separator, flattened once)
        after_sep = None if plain else [seq(sep, kvx) for kvx, _ in entries]

        def extras_tail(c, first):
            lo = max(0, pmin - c)
            hi = None if pmax is None else pmax - c
            if hi is not None and hi < lo:
                return None
            if extras is None:
                return EPS if lo == 0 and not first else None
            if first:
                if hi == 0:
                    return None
                return seq(extras, rep(seq(sep, extras), max(0, lo - 1), None if hi is None else hi - 1))
            return rep(seq(sep, extras), lo, hi)

        def state(i, c):
            """Content after keys < i were decided with c emitted (c == 0: nothing yet, and
            the content must be non-empty)."""
            cc = min(c, cap) if pmax is None else c
            key = (i, cc)
            if key in memo:
                return memo[key]
            if i == nent:
                e = extras_tail(cc, cc == 0)
                memo[key] = e
                return e
            kvx, required = entries[i]
            if plain and cc > 0:
                alts = [seq(sep, state(i, 0)), EPS if rest_optional[i] else None]
            else:
                alts = []
                if pmax is None or cc + 1 <= pmax:
                    alts.append(_then(kvx if cc == 0 else after_sep[i], state(i + 1, cc + 1)))
                if not required:
                    alts.append(state(i + 1, cc))
            body = alt(*alts)
            # (a member after a required one is reached only through the separator: p_i
            # spells it, as one rule instead of two)
            lone = plain and cc == 0 and i > 0 and entries[i - 1][1]
            if body is None or body[0] == "ref" or _small(body) or lone:
                memo[key] = body
                return body
            rn = f"{name}__{'f' if cc == 0 else 'p'}{i}" + (f"_{cc}" if bounded and cc > 0 else "")
            memo[key] = self.intern(rn, body)
            return memo[key]

        if plain:  # (from the last key back, so that no call recurses more than two deep)
            for i in range(nent, -1, -1):
                state(i, 0)
                if i > 0:
                    state(i, 1)
        content = state(0, 0)
        state = extras_tail = None  # (cycle break, as in array)
        empty_ok = nreq == 0 and pmin == 0
        return alt(eo if empty_ok else None, seq(oo, content, oc) if content is not None else None)

    def any_order_content(self, n, entries, extras, pmin, pmax, bounded, nreq, sep, name):
        """Members in any order (option ``any_order``), exactly: every required property
        present, no named property twice, min/maxProperties counted. The state is the set
        of named properties seen (and, when additional properties are allowed and the count
        is bounded, the number of members so far)."""
        nent = len(entries)
        track = bounded and extras is not None
        cap = (max(pmin, 1) if pmax is None else pmax) if track else 0
        if nent > ANY_ORDER_MAX_KEYS:
            why = (f"any_order with {nent} named properties: exact any-order matching (every required property "
                   f"present, no property twice) needs one grammar state per subset of them (2^{nent}); at most "
                   f"{ANY_ORDER_MAX_KEYS} are supported")
            if not self.cx.lenient:
                raise UnsupportedSchemaError(f"unsupported schema at {n.src}: {why} (lenient=True falls back to "
                                             f"upstream's relaxed any_order with a warning)", n.src, "properties")
            self.cx.warn(f"{n.src}: any_order: presence of required properties and uniqueness of keys are not "
                         f"enforced ({nent} named properties exceed the exact any-order limit of "
                         f"{ANY_ORDER_MAX_KEYS}); property values and names are")
            member = alt(*[kvx for kvx, _ in entries], extras)
            lo = max(pmin, nreq, 1)
            if pmax is not None and lo > pmax:
                return None
            return seq(member, rep(seq(sep, member), lo - 1, None if pmax is None else pmax - 1))
        if track:
            # (set, count) states: a set of k named properties with k..top members so far
            top = pmax if pmax is not None else cap
            ks = range(nent + 1) if pmax is None else range(min(nent, pmax) + 1)
            states = sum(math.comb(nent, k) * (max(top, k) - k + 1) for k in ks)
            if states > 2 << ANY_ORDER_MAX_KEYS:
                self.unsupported("maxProperties" if pmax is not None else "minProperties", n.src,
                                 f"counting properties in any order needs {states} states (subsets of the "
                                 f"named properties x member counts; limit {2 << ANY_ORDER_MAX_KEYS})")
                pmin, pmax, track, cap = 0, None, False, 0
        firsts = []
        nexts = []
        for i, (kvx, _) in enumerate(entries):
            first = kvx if _small(kvx) else self.intern(f"{name}__k{i}", kvx)
            nxt = seq(sep, first)
            firsts.append(first)
            nexts.append(nxt if _small(nxt) else self.intern(f"{name}__m{i}", nxt))
        xf = xn = None
        if extras is not None:
            xf = extras if _small(extras) else self.intern(f"{name}__k_x", extras)
            xn = seq(sep, xf)
            xn = xn if _small(xn) else self.intern(f"{name}__m_x", xn)
        req_mask = 0
        for i, (_, r) in enumerate(entries):
            if r:
                req_mask |= 1 << i
        return self._subsets(f"{name}__o", firsts, nexts, req_mask, xf, xn, pmin, pmax, track, cap)

    def _subsets(self, rn, firsts, nexts, req_mask, xf, xn, pmin, pmax, track, cap):
        """Right-linear rules over (set of named members seen, member count): the content
        of an object whose members come in any order, none twice, the ``req_mask`` ones
        required, ``xf``/``xn`` (additional properties, first/after a separator) any number
        of times. The count is tracked only when ``track`` (else it is the set's size, or
        "something was emitted" when there are additional properties)."""
        nent = len(firsts)
        memo = {}

        cyclic = xf is not None  # additional members keep the set: a state may repeat

        def state(mask, c):
            key = (mask, c)
            if key in memo:
                return memo[key]
            nm = f"{rn}{mask:x}" + (f"_{c}" if track else ("f" if c == 0 else ""))
            if cyclic:
                nm = self.g.unique(nm)
                self.g.define(nm, None)
                memo[key] = ref(nm)
                names.append(nm)
            alts = []
            if c > 0 and mask & req_mask == req_mask and c >= pmin:
                alts.append(EPS)
            room = pmax is None or c + 1 <= pmax
            if room:
                for i in range(nent):
                    if not mask >> i & 1:
                        nc = c + 1 if (track or xf is None) else 1
                        if track and pmax is None:
                            nc = min(nc, cap)
                        m, st = firsts[i] if c == 0 else nexts[i], state(mask | 1 << i, nc)
                        # (two rules: the common case, built without seq's flattening)
                        alts.append(("seq", (m, st)) if m[0] == "ref" and st is not None and st[0] == "ref"
                                    else seq(m, st))
                if xf is not None:
                    nc = (min(c + 1, cap) if pmax is None else c + 1) if track else 1
                    alts.append(seq(xf if c == 0 else xn, state(mask, nc)))
            body = alt(*alts)
            if cyclic:
                self.g.define(nm, body)
                return memo[key]
            if body is None or _small(body):
                memo[key] = body
                return body
            memo[key] = self.intern(self.g.unique(nm), body)
            return memo[key]

        names: list = []
        try:
            e = state(0, 0)
        finally:
            state = None  # (cycle break, as in array)
        return self.close_cycle(names, e) if cyclic else e

    def object_extras(self, n, addl, listed, name, depth, kv):
        """Alternatives for one additional property (key, separator, value), or None."""
        cx = self.cx
        pats = []
        for ast, _ in n.patterns:
            if ast not in pats:
                pats.append(ast)
        for _, _, ps in addl:
            for ast in ps:
                if ast not in pats:
                    pats.append(ast)
        names_dfa = None
        names_pos = bool(self.excl) and any(self._has_pattern(nu) for nu in n.names)
        if n.names:
            for nu in n.names:
                d = self.names_dfa(nu)
                names_dfa = d if names_dfa is None else fa.intersect(names_dfa, d, STATE_LIMIT)
            if names_dfa.is_empty():
                return None

        def value_for(matched):
            u = ir.ANY
            for ast, su in n.patterns:
                if ast in matched:
                    u = ir.intersect(cx, u, su)
            for su, keys, ps in addl:
                if not any(p in matched for p in ps):
                    u = ir.intersect(cx, u, su)
            return u

        listed_set = sorted(set(listed))
        if not pats and names_dfa is None:
            u = value_for(())
            if not u:
                return None
            key = self.key_not_in(listed_set)
            if key is None:
                return None
            v = self.sub(u, f"{name}_addl", depth + 1)
            if v is None:
                return None
            return seq(key, kv, v)
        simple = {}
        if names_dfa is None:
            # A region "matches exactly pattern p" needs no automaton when no listed key and
            # no other pattern can match p's strings: emit p structurally. When additionally
            # the "no pattern" region has no allowed value, no automaton is built at all.
            for p in pats:
                if rx.has_anchor(p) or any(self._matches(p, k) for k in listed_set):
                    continue
                if len(pats) > 1:
                    pd = ir.regex_dfa(p)
                    if not all(q is p or fa.intersect(pd, ir.regex_dfa(q), STATE_LIMIT).is_empty() for q in pats):
                        continue
                simple[p] = True
            if len(simple) == len(pats) and not value_for(()):
                alts = []
                for i, p in enumerate(pats):
                    u = value_for((p,))
                    v = self.sub(u, f"{name}_addl{i}", depth + 1) if u else None
                    if v is not None:
                        alts.append(seq(Q, self.regex_expr(p, key=True), Q, kv, v))
                return alt(*alts)
        # The key regions depend on the listed keys and the patterns only (without
        # propertyNames): computed once per process (objects of the same shape recur).
        try:
            hit = emit_somes.cached_regions(listed_set, pats, names_dfa, STATE_LIMIT)
        except rx.RegexUnsupported as e:
            raise ir.NotExpressible(str(e))
        regions = hit[0]
        alts = []
        for i, (m, d) in enumerate(regions):
            u = value_for(m)
            if not u:
                continue
            if len(m) == 1 and m[0] in simple:
                key = seq(Q, self.regex_expr(m[0], key=True), Q)
            elif d is None:
                key = self.shared("string")
            else:
                d = emit_somes.restricted(hit, i)
                if d.is_empty():
                    continue
                if self.excl and not m and not names_pos:
                    # Keys matching no pattern are filtered; a pattern alone decides its keys.
                    try:
                        body = self.excl_body(d, False, f"{name}__key{i}")
                    except rx.RegexUnsupported as e:
                        raise ir.NotExpressible(f"{e}: the property-name automaton with excludes is too large")
                    if body is None:
                        continue
                    key = seq(Q, body)
                else:
                    key = self.key_dfa(d, f"{name}__key{i}")
            v = self.sub(u, f"{name}_addl{i}", depth + 1)
            if v is not None:
                alts.append(seq(key, kv, v))
        return alt(*alts)

    def key_dfa(self, d, name):
        """A key of automaton ``d`` (a cached region's, emit_somes.restricted) between its
        quotes: its rules are written once per grammar, under the first ``name`` it is
        asked for, and every object of the same shape refers to them."""
        mk = ("key_dfa", d)  # a DFA hashes by identity, and the key keeps it alive
        e = self._memo.get(mk)
        if e is None:
            e = seq(Q, G.dfa_to_rules(self.g, d, self.g.unique(name), Q, lambda c: self.char_ref(c, False)))
            self._memo[mk] = e
        return e

    def _has_pattern(self, nu, depth=0):
        """Whether a propertyNames union constrains strings by pattern/format."""
        for node in nu:
            if node.kind == "ref" and depth < 8:
                if self._has_pattern(self.cx.ref_union(node.name), depth + 1):
                    return True
            elif node.kind == "string" and node.pos:
                return True
        return False

    def names_dfa(self, nu):
        d = None
        for node in nu:
            if node.kind == "ref":
                x = self.names_dfa(self.cx.ref_union(node.name))
            elif node.kind == "string":
                if node.is_plain():
                    x = fa.length_dfa(0, None)
                elif not node.pos and not node.neg:
                    x = fa.length_dfa(node.minl, node.maxl)
                else:
                    x = self.string_dfa(node)
            elif node.kind == "enum":
                strs = [v for v in node.values if isinstance(v, str)]
                x = fa.literal_set_dfa(strs) if strs else fa.DFA([], [])
            else:
                continue
            d = x if d is None else fa.union(d, x, STATE_LIMIT)
        return d if d is not None else fa.DFA([], [])

    def key_not_in(self, words):
        """A JSON string (with quotes) whose decoded value is not one of ``words``."""
        if not words:
            return self.shared("string")
        if self.excl:
            try:
                body = self.excl_body(fa.negate(fa.literal_set_dfa(words), minimal=True), False, "key_x")
            except rx.RegexUnsupported as e:
                raise ir.NotExpressible(f"{e}: the property-name automaton with excludes is too large")
            return seq(Q, body) if body is not None else None
        trie: dict = {}
        for w in words:
            t = trie
            for ch in w:
                t = t.setdefault(ch, {})
            t[""] = {}
        rest = self.shared("key_rest")

        name = "key_" + hashlib.blake2b(json.dumps(words).encode(), digest_size=5).hexdigest()
        counter = [0]

        def node(t, depth=0):
            if depth >= 16:
                counter[0] += 1
                sub = f"{name}__t{counter[0]}"
                self.g.define(sub, node(t))
                return ref(sub)
            alts = []
            chars = sorted(k for k in t if k)
            for ch in chars:
                alts.append(seq(self.char_ref(cs.single(ord(ch)), False), node(t[ch], depth + 1)))
            other = cs.complement(cs.normalize((ord(c), ord(c)) for c in chars)) if chars else cs.ALL
            oc = self.char_ref(other, False)
            if oc is not None:
                alts.append(seq(oc, rest))
            if "" not in t:
                alts.append(Q)
            return alt(*alts)

        if name not in self._shared:
            self._shared.add(name)
            self.g.define(name, node(trie))
        node = None  # (cycle break, as in array)
        return seq(Q, ref(name))
