"""Finite automata over code points, used where a constraint is an intersection or a
complement of regular languages (pattern ∩ pattern, pattern ∩ length, not-pattern,
property-name regions) and for exact emptiness/inclusion checks.

A DFA has states ``0..n-1``, start state 0, ``trans[s]`` a tuple of ``(charset, target)``
with pairwise disjoint charsets, and ``accept[s]``. DFAs returned here are trimmed (every
state is reachable and can reach an accepting state), so a DFA with no states is the empty
language.
"""

from __future__ import annotations

import bisect

from . import charset as cs
from . import subset
from .regex import WORD, RegexUnsupported, has_anchor, has_lookaround

DEFAULT_LIMIT = 4000


class AutomatonTooLarge(RegexUnsupported):
    pass


class DFA:
    __slots__ = ("trans", "accept")

    def __init__(self, trans, accept):
        self.trans = trans
        self.accept = accept

    @property
    def n(self):
        return len(self.accept)

    def is_empty(self):
        return not self.accept

    def run(self, s: str) -> bool:
        if not self.accept:
            return False
        st = 0
        for ch in s:
            cp = ord(ch)
            for cset, t in self.trans[st]:
                if cs.contains(cset, cp):
                    st = t
                    break
            else:
                return False
        return self.accept[st]

    def key(self):
        return (tuple(self.trans), tuple(self.accept))


# ---------------------------------------------------------------- NFA construction

class _NFA:
    def __init__(self, limit):
        self.edges = []   # per state: list of (charset, target)
        # per state: list of (kind, target); kind 0 plain, 1 bol, 2 eol, 3 + i the
        # assertion looks[i] (a ("look", ..) or ("wordb", ..) node; see _Look)
        self.eps = []
        self.looks = []
        self.limit = limit

    def new(self):
        if len(self.edges) >= self.limit * 4:
            raise AutomatonTooLarge("regular expression too large to intersect")
        self.edges.append([])
        self.eps.append([])
        return len(self.edges) - 1

    def build(self, node, start):
        k = node[0]
        if k == "set":
            end = self.new()
            if node[1]:
                self.edges[start].append((node[1], end))
            return end
        if k == "eps":
            return start
        if k == "bol" or k == "eol":
            end = self.new()
            self.eps[start].append((1 if k == "bol" else 2, end))
            return end
        if k == "look" or k == "wordb":
            end = self.new()
            self.eps[start].append((3 + len(self.looks), end))
            self.looks.append(node)
            return end
        if k == "cat":
            cur = start
            for m in node[1]:
                cur = self.build(m, cur)
            return cur
        if k == "alt":
            end = self.new()
            for m in node[1]:
                s = self.new()
                self.eps[start].append((0, s))
                e = self.build(m, s)
                self.eps[e].append((0, end))
            return end
        if k == "rep":
            sub, lo, hi = node[1], node[2], node[3]
            cur = start
            for _ in range(lo):
                cur = self.build(sub, cur)
            if hi is None:
                loop = self.new()
                self.eps[cur].append((0, loop))
                e = self.build(sub, loop)
                self.eps[e].append((0, loop))
                return loop
            end = self.new()
            for _ in range(hi - lo):
                self.eps[cur].append((0, end))
                cur = self.build(sub, cur)
            self.eps[cur].append((0, end))
            return end
        raise AssertionError(k)


def _closure(nfa, states, allow_bol, allow_eol):
    stack = list(states)
    seen = set(states)
    while stack:
        s = stack.pop()
        for kind, t in nfa.eps[s]:
            if kind == 1 and not allow_bol:
                continue
            if kind == 2 and not allow_eol:
                continue
            if t not in seen:
                seen.add(t)
                stack.append(t)
    return frozenset(seen)


def _split(pairs):
    """Given (charset, payload) pairs, returns [(charset, frozenset(payloads))] for the
    coarsest partition of their union (in the order of the first code point of each part)."""
    if len(pairs) == 1:
        return [(pairs[0][0], frozenset((pairs[0][1],)))]
    by_set: dict = {}  # (many NFA states share a label: each label located once)
    for cset, p in pairs:
        ps = by_set.get(cset)
        if ps is None:
            by_set[cset] = {p}
        else:
            ps.add(p)
    bounds = set()
    for cset in by_set:
        for lo, hi in cset:
            bounds.add(lo)
            bounds.add(hi + 1)
    pts = sorted(bounds)
    cover = [None] * (len(pts) - 1)
    for cset, ps in by_set.items():
        for lo, hi in cset:
            for a in range(bisect.bisect_left(pts, lo), bisect.bisect_left(pts, hi + 1)):
                c = cover[a]
                if c is None:
                    cover[a] = set(ps)
                else:
                    c |= ps
    groups: dict = {}
    for a, c in enumerate(cover):
        if c:
            lo, hi = pts[a], pts[a + 1] - 1
            g = groups.setdefault(frozenset(c), [])
            if g and g[-1][1] + 1 == lo:  # (elementary intervals come sorted: merged as normalize does)
                g[-1] = (g[-1][0], hi)
            else:
                g.append((lo, hi))
    return [(tuple(v), k) for k, v in groups.items()]


def compile_nfa(node, limit=DEFAULT_LIMIT):
    """A matcher for nfa_match: an NFA, or for a regex with lookahead / \\b \\B the lazy
    subset construction of _Look (states made only for the strings matched)."""
    if has_lookaround(node):
        return _Look(node, limit, START)
    nfa = _NFA(limit * 8)
    start = nfa.new()
    final = nfa.build(node, start)
    return nfa, start, final


def nfa_match(compiled, s: str) -> bool:
    if isinstance(compiled, _Look):
        return compiled.match(s)
    nfa, start, final = compiled
    cur = _closure(nfa, [start], True, not s)
    for i, ch in enumerate(s):
        cp = ord(ch)
        nxt = set()
        for st in cur:
            for cset, t in nfa.edges[st]:
                if cs.contains(cset, cp):
                    nxt.add(t)
        if not nxt:
            return False
        cur = _closure(nfa, nxt, False, i == len(s) - 1)
    return final in cur


def from_regex(node, limit=DEFAULT_LIMIT, ctx=None) -> DFA:
    """DFA of the full-match language of a regex AST; ``bol``/``eol`` assertions hold only
    at the start / end of the string, lookaheads and ``\\b`` ``\\B`` are exact (_Look).
    ``ctx`` (START, WORD, OTHER; default START) is what precedes the string: the start of
    the whole input, a word character or another one (a lookahead's body is matched in
    the context of its position)."""
    ctx = START if ctx is None else ctx
    if has_lookaround(node) or (ctx != START and _needs_ctx(node)[0]):
        return _Look(node, limit, ctx).dfa()
    nfa = _NFA(limit)
    start = nfa.new()
    final = nfa.build(node, start)
    n, accept, rows, classes = subset.determinize(nfa, start, final, limit, AutomatonTooLarge, _closure)
    return subset.minimize_classes(n, accept, rows, classes, DFA)


# ---------------------------------------------------------------- lookahead, \b, \B
#
# An ECMA-262 lookahead at a position is a condition on the rest of the whole input from
# there: (?=X) holds when that rest is in X·Σ*, (?!X) when it is not (X's own assertions
# are read against the same rest, so X·Σ* is compiled as one regex, recursively). \b and
# \B compare the classes of the characters before and after the position: the class of
# the previous one is known (it is part of the automaton state: the context START, WORD
# or OTHER), so the assertion is a lookahead on the next one: (?=\w) or (?!\w). $ is the
# lookahead (?![^]). The subset construction then runs over configurations
# (NFA state, pending obligations), an obligation being (negated, sub-automaton, its
# state): every character advances the obligations with the NFA; a positive one dies
# with its configuration when its automaton has no move and is met (dropped) once it
# reaches the state accepting everything; a negative one the other way round. At the end
# of the input a configuration accepts at the final NFA state when each positive
# obligation's state accepts and no negative one's does. The language is regular (no
# back-references), so the result is exact; its size is bounded by the usual limit.

START, WORD_CTX, OTHER = 0, 1, 2
_DROP = "drop"
_DEAD = "dead"
_ANY_CHAR = ("set", cs.ALL)
_WORD_CHAR = ("set", WORD)
_ANY_STAR = ("rep", ("set", cs.ALL), 0, None)


def _needs_ctx(n):
    """(has ^, has \\b or \\B) anywhere in ``n``, lookahead bodies included: whether the
    automaton of ``n`` depends on what precedes its input."""
    k = n[0]
    if k == "bol":
        return True, False
    if k == "wordb":
        return False, True
    if k == "look":
        return _needs_ctx(n[1])
    if k in ("cat", "alt"):
        b = w = False
        for m in n[1]:
            x, y = _needs_ctx(m)
            b, w = b or x, w or y
        return b, w
    if k == "rep":
        return _needs_ctx(n[1])
    return False, False


#: (body AST, context, limit) -> (DFA of body·Σ*, its universal states): the automata of
#: lookahead bodies, shared by all patterns that use the same body.
_sub_cache: dict = {}


def _sub_automaton(body, ctx, limit):
    bol, wb = _needs_ctx(body)
    ctx = ctx if wb else (START if bol and ctx == START else OTHER)
    key = (body, ctx, limit)
    hit = _sub_cache.get(key)
    if hit is None:
        d = from_regex(("cat", (body, _ANY_STAR)), limit, ctx)
        uni = frozenset(s_ for s_ in range(d.n) if d.accept[s_] and tuple(d.trans[s_]) == ((cs.ALL, s_),))
        if len(_sub_cache) > 512:
            _sub_cache.clear()
        hit = _sub_cache[key] = (d, uni)
    return hit


class _Look:
    """Subset construction for a regex with lookaheads, ``\\b`` / ``\\B`` (see above). A
    state is (frozenset of configurations, context); a configuration is (NFA state,
    frozenset of obligations (negated, sub id, sub state))."""

    def __init__(self, node, limit, ctx):
        self.limit = limit
        self.nfa = _NFA(limit)
        self.start = self.nfa.new()
        self.final = self.nfa.build(node, self.start)
        self.track_word = _needs_ctx(node)[1]
        self.subs: list = []     # sub id -> (DFA, universal states)
        self.sub_ids: dict = {}  # (body, ctx) -> sub id
        self.ctx0 = ctx
        self._moves: dict = {}   # state -> [(charset, state)] (lazy: match() builds few)

    def _spawn(self, neg, body, ctx):
        sk = (body, ctx)
        sid = self.sub_ids.get(sk)
        if sid is None:
            sid = self.sub_ids[sk] = len(self.subs)
            self.subs.append(_sub_automaton(body, ctx, self.limit))
        return self._norm(neg, sid, 0 if self.subs[sid][0].n else None)

    def _norm(self, neg, sid, st):
        if st is None:  # the sub-automaton has no move: X·Σ* cannot match any more
            return _DROP if neg else _DEAD
        if st in self.subs[sid][1]:  # X·Σ* matches whatever follows
            return _DEAD if neg else _DROP
        return (neg, sid, st)

    def _closure(self, configs, ctx):
        nfa = self.nfa
        out = set()
        stack = list(configs)
        while stack:
            c = stack.pop()
            if c in out:
                continue
            out.add(c)
            q, obl = c
            for kind, t in nfa.eps[q]:
                if kind == 0:
                    nc = (t, obl)
                elif kind == 1:
                    if ctx != START:
                        continue
                    nc = (t, obl)
                else:
                    if kind == 2:
                        ob = self._spawn(True, _ANY_CHAR, ctx)
                    else:
                        a = nfa.looks[kind - 3]
                        if a[0] == "look":
                            ob = self._spawn(a[2], a[1], ctx)
                        else:  # \b: the next character's class differs from the previous one's
                            next_word = (ctx == WORD_CTX) if a[1] else (ctx != WORD_CTX)
                            ob = self._spawn(not next_word, _WORD_CHAR, ctx)
                    if ob is _DEAD:
                        continue
                    nc = (t, obl) if ob is _DROP else (t, obl | frozenset((ob,)))
                if nc not in out:
                    stack.append(nc)
        return self._prune(out)

    @staticmethod
    def _prune(configs):
        """Drops a configuration whose obligations include another's at the same NFA state
        (it accepts a subset of what the other accepts)."""
        by_q: dict = {}
        for q, obl in configs:
            by_q.setdefault(q, []).append(obl)
        out = []
        for q, obls in by_q.items():
            if len(obls) > 1:
                obls.sort(key=len)
                kept: list = []
                for o in obls:
                    if not any(k <= o for k in kept):
                        kept.append(o)
                obls = kept
            out.extend((q, o) for o in obls)
        return frozenset(out)

    def initial(self):
        return (self._closure([(self.start, frozenset())], self.ctx0), self.ctx0)

    def accepting(self, state) -> bool:
        for q, obl in state[0]:
            if q == self.final and all(self.subs[sid][0].accept[st] != neg for neg, sid, st in obl):
                return True
        return False

    def moves(self, state):
        hit = self._moves.get(state)
        if hit is not None:
            return hit
        configs, _ = state
        nfa = self.nfa
        pairs = [(cset, (0, q, t)) for q, _ in configs for cset, t in nfa.edges[q]]
        out = []
        if pairs:
            for ob in {ob for _, obl in configs for ob in obl}:
                _, sid, st = ob
                for cset, t in self.subs[sid][0].trans[st]:
                    pairs.append((cset, (1, sid, st, t)))
            if self.track_word:
                pairs.append((WORD, (2,)))
            for cset, payload in _split(pairs):
                nmap: dict = {}
                omap: dict = {}
                word = False
                for p in payload:
                    if p[0] == 0:
                        nmap.setdefault(p[1], []).append(p[2])
                    elif p[0] == 1:
                        omap[(p[1], p[2])] = p[3]
                    else:
                        word = True
                if not nmap:
                    continue
                new = set()
                for q, obl in configs:
                    ts = nmap.get(q)
                    if not ts:
                        continue
                    kept = []
                    for neg, sid, st in obl:
                        r = self._norm(neg, sid, omap.get((sid, st)))
                        if r is _DEAD:
                            break
                        if r is not _DROP:
                            kept.append(r)
                    else:
                        fo = frozenset(kept)
                        new.update((t, fo) for t in ts)
                if new:
                    nctx = WORD_CTX if word else OTHER
                    out.append((cset, (self._closure(new, nctx), nctx)))
        self._moves[state] = out
        return out

    def dfa(self) -> DFA:
        init = self.initial()
        keys = {init: 0}
        order = [init]
        trans = []
        accept = []
        i = 0
        while i < len(order):
            st = order[i]
            i += 1
            accept.append(self.accepting(st))
            row = []
            for cset, nxt in self.moves(st):
                idx = keys.get(nxt)
                if idx is None:
                    idx = len(order)
                    if idx >= self.limit:
                        raise AutomatonTooLarge("pattern automaton (with lookahead or \\b) exceeds the state limit")
                    keys[nxt] = idx
                    order.append(nxt)
                row.append((cset, idx))
            trans.append(row)
            self._moves.pop(st, None)
        return minimize(DFA(trans, accept))

    def match(self, s: str) -> bool:
        st = self.initial()
        for ch in s:
            cp = ord(ch)
            for cset, nxt in self.moves(st):
                if cs.contains(cset, cp):
                    st = nxt
                    break
            else:
                return False
            if len(self._moves) > 4 * self.limit:
                self._moves.clear()
        return self.accepting(st)


# ---------------------------------------------------------------- DFA operations

def trim(d: DFA) -> DFA:
    n = d.n
    if n == 0:
        return d
    reach = {0}
    stack = [0]
    while stack:
        s = stack.pop()
        for _, t in d.trans[s]:
            if t not in reach:
                reach.add(t)
                stack.append(t)
    rev = [[] for _ in range(n)]
    for s in range(n):
        for _, t in d.trans[s]:
            rev[t].append(s)
    co = {s for s in range(n) if d.accept[s]}
    stack = list(co)
    while stack:
        s = stack.pop()
        for p in rev[s]:
            if p not in co:
                co.add(p)
                stack.append(p)
    live = reach & co
    if 0 not in live:
        return DFA([], [])
    order = [0] + sorted(live - {0})
    idx = {s: i for i, s in enumerate(order)}
    trans = []
    for s in order:
        row = [(c, idx[t]) for c, t in d.trans[s] if t in idx]
        trans.append(row)
    return DFA(trans, [d.accept[s] for s in order])


def _merge_row(row):
    """Merges charsets that go to the same target; output sorted by first code point."""
    by_t: dict = {}
    for c, t in row:
        by_t[t] = cs.union(by_t[t], c) if t in by_t else c
    out = [(c, t) for t, c in by_t.items()]
    out.sort(key=lambda x: x[0][0][0])
    return out


def minimize(d: DFA) -> DFA:
    """Hopcroft's algorithm over the elementary intervals of all transition labels; the
    result is trimmed and numbered in BFS order from the start state (canonical).

    Symbols are alphabet classes (elementary intervals grouped by the labels that contain
    them). Costs stay proportional to the transitions, not states x symbols: a splitter visits
    only the predecessors of its states, and the implicit dead state is a block of its own
    from the start (every state of a trimmed DFA is live, so it is never equivalent to
    one), never used as a splitter, so missing transitions are never enumerated."""
    d = trim(d)
    n = d.n
    if n <= 1:
        if n == 1:
            return DFA([tuple(_merge_row(d.trans[0]))], list(d.accept))
        return d
    bounds = set()
    for row in d.trans:
        for c, _ in row:
            for lo, hi in c:
                bounds.add(lo)
                bounds.add(hi + 1)
    pts = sorted(bounds)
    # Symbols: elementary intervals that lie in exactly the same labels behave alike in
    # every state, so they form one alphabet class (a few dozen, however many intervals).
    label_id: dict = {}
    for row in d.trans:
        for c, _ in row:
            if c not in label_id:
                label_id[c] = len(label_id)
    member: list = [[] for _ in range(len(pts) - 1)]
    for c, li in label_id.items():
        for lo, hi in c:
            for a in range(bisect.bisect_left(pts, lo), bisect.bisect_left(pts, hi + 1)):
                member[a].append(li)
    cls_of: dict = {}
    label_classes: list = [set() for _ in range(len(label_id))]
    for m in member:
        if not m:
            continue
        k = cls_of.setdefault(tuple(m), len(cls_of))
        for li in m:
            label_classes[li].add(k)
    # pred[t][k]: the states whose transition on alphabet class k goes to t
    pred: list = [dict() for _ in range(n)]
    for s_, row in enumerate(d.trans):
        for c, t in row:
            pt = pred[t]
            for k in label_classes[label_id[c]]:
                lst = pt.get(k)
                if lst is None:
                    pt[k] = [s_]
                else:
                    lst.append(s_)
    acc = [s_ for s_ in range(n) if d.accept[s_]]
    rej = [s_ for s_ in range(n) if not d.accept[s_]]
    blocks = [set(p) for p in (acc, rej) if p]
    block = [0] * n
    for bi, p in enumerate(blocks):
        for s_ in p:
            block[s_] = bi
    work = list(range(len(blocks)))
    in_work = set(work)
    while work:
        bi = work.pop()
        in_work.discard(bi)
        by_sym: dict = {}
        for t in list(blocks[bi]):
            for a, srcs in pred[t].items():
                lst = by_sym.get(a)
                if lst is None:
                    by_sym[a] = list(srcs)
                else:
                    lst.extend(srcs)
        for a in sorted(by_sym):
            touched: dict = {}
            for s_ in by_sym[a]:
                touched.setdefault(block[s_], set()).add(s_)
            subset.split_blocks(touched, blocks, block, work, in_work)
    return _quotient(d, block, blocks)


def _quotient(d: DFA, block, blocks) -> DFA:
    """The quotient of trimmed ``d`` by its state partition (``block[s]``: the index of s's
    block in ``blocks``), numbered in BFS order from the start state, each row's labels
    merged per target and sorted by first code point: minimize's canonical form."""
    order = {block[0]: 0}
    queue = [block[0]]
    trans = []
    accept = []
    norm: dict = {}  # (the same labels recur in many rows: each normalized once)
    i = 0
    while i < len(queue):
        b = queue[i]
        i += 1
        rep_s = next(iter(blocks[b]))
        accept.append(bool(d.accept[rep_s]))
        by_block: dict = {}
        for c, t in d.trans[rep_s]:
            tb = block[t]
            c = c if type(c) is tuple else tuple(c)
            by_block[tb] = by_block[tb] + c if tb in by_block else c
        merged = []
        for tb, v in by_block.items():
            nv = norm.get(v)
            if nv is None:
                nv = norm[v] = cs.normalize(v)
            merged.append((nv, tb))
        merged.sort(key=lambda x: x[0][0][0])
        row = []
        for c, tb in merged:
            if tb not in order:
                order[tb] = len(queue)
                queue.append(tb)
            row.append((c, order[tb]))
        trans.append(tuple(row))
    return DFA(trans, accept)


def _product(a: DFA, b: DFA, acc, limit, complete_a=False, complete_b=False) -> DFA:
    """Generic product; ``acc(x, y)`` decides acceptance where x/y are accept flags
    (a missing side, i.e. the implicit sink, is ``False``)."""
    if complete_a:
        a = complete(a)
    if complete_b:
        b = complete(b)
    if a.n == 0 or b.n == 0:
        return DFA([], [])
    keys = {(0, 0): 0}
    order = [(0, 0)]
    trans = []
    accept = []
    meets: dict = {}  # the same label pairs meet in many state pairs
    i = 0
    while i < len(order):
        x, y = order[i]
        i += 1
        accept.append(acc(a.accept[x], b.accept[y]))
        row = []
        for c1, t1 in a.trans[x]:
            for c2, t2 in b.trans[y]:
                c = meets.get((c1, c2))
                if c is None:
                    c = meets[(c1, c2)] = cs.intersect(c1, c2)
                if not c:
                    continue
                k = keys.get((t1, t2))
                if k is None:
                    k = len(order)
                    if k >= limit:
                        raise AutomatonTooLarge("automaton product exceeds the state limit")
                    keys[(t1, t2)] = k
                    order.append((t1, t2))
                row.append((c, k))
        trans.append(row)
    return minimize(DFA(trans, accept))


def disjoint(a: DFA, b: DFA, limit=DEFAULT_LIMIT) -> bool:
    """Whether no string is accepted by both: a search of the product's reachable pairs that
    stops at the first pair accepting in both, without building or minimising the product.
    Patterns of one object are mostly disjoint (literal prefixes: JsonSchemaStore pyrseas'
    "^schema ", "^table ", ...), and for those the region split needs no product at all."""
    if a.n == 0 or b.n == 0:
        return True
    seen = {(0, 0)}
    stack = [(0, 0)]
    while stack:
        x, y = stack.pop()
        if a.accept[x] and b.accept[y]:
            return False
        for c1, t1 in a.trans[x]:
            for c2, t2 in b.trans[y]:
                if (t1, t2) not in seen and cs.intersect(c1, c2):
                    if len(seen) >= limit:
                        raise AutomatonTooLarge("automaton product exceeds the state limit")
                    seen.add((t1, t2))
                    stack.append((t1, t2))
    return True


#: pairs of NFA states nfa_disjoint visits at most
NFA_PAIR_LIMIT = 20_000


def nfa_disjoint(a, b, limit=NFA_PAIR_LIMIT) -> bool:
    """Whether no string fully matches both regex ASTs ``a`` and ``b`` (without assertions):
    a search of the pairs of states of their NFAs, with no subset construction, so a bounded
    count (``[...]{1,256}`` before a suffix, whose DFA passes any state limit) costs its NFA's
    size. Raises AutomatonTooLarge past ``limit`` pairs; RegexUnsupported for assertions."""
    nfas = []
    for x in (a, b):
        if has_anchor(x):
            raise RegexUnsupported("nfa_disjoint takes regexes without assertions")
        nfa = _NFA(DEFAULT_LIMIT * 8)  # (as compile_nfa)
        start = nfa.new()
        nfas.append((nfa, start, nfa.build(x, start)))
    (na, sa, fa_), (nb, sb, fb) = nfas
    seen = {(sa, sb)}
    stack = [(sa, sb)]
    while stack:
        p, q = stack.pop()
        if p == fa_ and q == fb:
            return False
        nxt = [(t, q) for _, t in na.eps[p]] + [(p, t) for _, t in nb.eps[q]]
        for c1, t1 in na.edges[p]:
            for c2, t2 in nb.edges[q]:
                if cs.intersect(c1, c2):
                    nxt.append((t1, t2))
        for pair in nxt:
            if pair not in seen:
                if len(seen) >= limit:
                    raise AutomatonTooLarge("automaton product exceeds the state limit")
                seen.add(pair)
                stack.append(pair)
    return True


def complete(d: DFA, universe=cs.SCALARS) -> DFA:
    """Adds a rejecting sink so every state has a transition on every code point."""
    n = d.n
    if n == 0:
        return DFA([((universe, 0),)], [False])
    trans = []
    sink = n
    need_sink = False
    for s in range(n):
        covered = ()
        for c, _ in d.trans[s]:
            covered = cs.union(covered, c)
        rest = cs.difference(universe, covered)
        row = list(d.trans[s])
        if rest:
            row.append((rest, sink))
            need_sink = True
        trans.append(row)
    accept = list(d.accept)
    if need_sink:
        trans.append([(universe, sink)])
        accept.append(False)
    return DFA(trans, accept)


def intersect(a: DFA, b: DFA, limit=DEFAULT_LIMIT) -> DFA:
    return _product(a, b, lambda x, y: x and y, limit)


def union(a: DFA, b: DFA, limit=DEFAULT_LIMIT) -> DFA:
    return _product(a, b, lambda x, y: x or y, limit, True, True)


def difference(a: DFA, b: DFA, limit=DEFAULT_LIMIT) -> DFA:
    return _product(a, b, lambda x, y: x and not y, limit, False, True)


def negate(a: DFA, universe=cs.SCALARS, minimal=False) -> DFA:
    """The complement of ``a`` within ``universe``*. ``minimal``: ``a`` is an output of
    minimize; then the complement needs no refinement (the states of the completed ``a``,
    its sink included, are pairwise distinguishable, and so stay under complement; trimming
    drops at most the one state that accepted everything), only minimize's canonical form."""
    c = complete(a, universe)
    neg = DFA(c.trans, [not x for x in c.accept])
    if not minimal:
        return minimize(neg)
    t = trim(neg)
    if t.n <= 1:
        return minimize(neg)
    return _quotient(t, list(range(t.n)), [{s} for s in range(t.n)])


def restrict_alphabet(a: DFA, universe=cs.SCALARS, minimal=False) -> DFA:
    """``a`` on the code points of ``universe`` only. ``minimal``: ``a`` is an output of
    minimize (canonical); then, where every label lies in ``universe``, it is returned as it
    is (minimize would give it back unchanged)."""
    if minimal and all(cs.intersect(c, universe) == c for row in a.trans for c, _ in row):
        return a
    return minimize(DFA([[(cs.intersect(c, universe), t) for c, t in row if cs.intersect(c, universe)]
                         for row in a.trans], list(a.accept)))


def length_dfa(lo: int, hi, universe=cs.SCALARS) -> DFA:
    """Strings of lo..hi code points (hi None: unbounded)."""
    top = hi if hi is not None else lo
    trans = []
    accept = []
    for i in range(top + 1):
        if i < top:
            trans.append([(universe, i + 1)])
        elif hi is None:
            trans.append([(universe, i)])
        else:
            trans.append([])
        accept.append(i >= lo)
    return minimize(DFA(trans, accept))


def length_product_states(d: DFA, lo: int, hi, cap: int, universe=cs.SCALARS) -> int:
    """The number of states ``_product(d, length_dfa(lo, hi, universe))`` creates (its
    reachable pairs), or ``cap + 1`` as soon as it exceeds ``cap``: plain integer sets, no
    charset work beyond one test per label. length_dfa(lo, hi) counts characters 0..top
    (top = hi, or lo when hi is None; then its last state loops), every state reading all
    of ``universe``; so the pairs are (x, k) for x in S_k, the d-states that strings of k
    characters (over the labels that meet ``universe``) reach, k < top, plus (x, top) for
    x in S_top when hi is given, or for x reachable from S_top when it is None."""
    if d.n == 0 or (hi is not None and hi < lo):
        return 0  # (an empty side: the product makes no state)
    meets: dict = {}
    succ = []
    for row in d.trans:
        out = set()
        for c, t in row:
            m = meets.get(c)
            if m is None:
                m = meets[c] = bool(cs.intersect(c, universe))
            if m:
                out.add(t)
        succ.append(out)
    top = hi if hi is not None else lo
    level = {0}
    count = 0
    for _ in range(top):
        count += len(level)
        if count > cap:
            return cap + 1
        nxt: set = set()
        for x in level:
            nxt |= succ[x]
        if not nxt:
            return count
        level = nxt
    if hi is not None:
        count += len(level)
        return count if count <= cap else cap + 1
    seen = set(level)
    stack = list(level)
    while stack:
        for t in succ[stack.pop()]:
            if t not in seen:
                seen.add(t)
                stack.append(t)
        if count + len(seen) > cap:
            return cap + 1
    return count + len(seen)


def intersect_length(d: DFA, lo: int, hi, limit=DEFAULT_LIMIT) -> DFA:
    """intersect(d, length_dfa(lo, hi), limit), the same automaton or the same exception,
    without building a product that length_product_states says exceeds the limit."""
    if length_product_states(d, lo, hi, limit) > limit:
        raise AutomatonTooLarge("automaton product exceeds the state limit")
    return intersect(d, length_dfa(lo, hi), limit)


def _word_trie(strings):
    """The trie of ``strings``: (per node, {code point: child}; per node, whether a string ends
    there), nodes numbered as created, so children come after their parents."""
    trans: list = [dict()]
    accept = [False]
    for s in strings:
        st = 0
        for ch in s:
            cp = ord(ch)
            nxt = trans[st].get(cp)
            if nxt is None:
                nxt = len(accept)
                trans[st][cp] = nxt
                trans.append(dict())
                accept.append(False)
            st = nxt
        accept[st] = True
    return trans, accept


def literal_set_dfa(strings, universe=cs.SCALARS) -> DFA:
    """Trie automaton of a finite set of strings."""
    trans, accept = _word_trie(strings)
    d = DFA([[(((cp, cp),), t) for cp, t in row.items()] for row in trans], accept)
    n = len(accept)
    if n <= 1 or not any(accept):
        return minimize(d)
    # A trie is acyclic, every node is reachable and leads to a word, and children are
    # numbered after their parents: states are equivalent exactly when they agree on
    # acceptance and on the classes of their children by label, decided children first
    # (minimize's refinement, in one backward pass).
    cls = [0] * n
    ids: dict = {}
    for s in range(n - 1, -1, -1):
        sig = (accept[s], tuple(sorted((cp, cls[t]) for cp, t in trans[s].items())))
        cls[s] = ids.setdefault(sig, len(ids))
    blocks: list = [set() for _ in range(len(ids))]
    for s in range(n):
        blocks[cls[s]].add(s)
    return _quotient(d, cls, blocks)


def _minus_points(c, pts):
    """Charset ``c`` without the sorted code points ``pts`` (all in ``c``)."""
    out = []
    j = 0
    for lo, hi in c:
        while j < len(pts) and pts[j] <= hi:
            cp = pts[j]
            j += 1
            if cp > lo:
                out.append((lo, cp - 1))
            lo = cp + 1
        if lo <= hi:
            out.append((lo, hi))
    return tuple(out)


def _first_cp(item):
    return item[0][0][0]


def minus_words(b: DFA, words, limit=DEFAULT_LIMIT) -> DFA:
    """``minimize(difference(b, literal_set_dfa(words)))`` for ``b`` an output of minimize:
    the keys of a pattern (or of its complement) that an object does not list. The product's
    states off the trie of ``words`` are ``b``'s own, pairwise distinguishable already; those
    on it, pairs (state of ``b``, trie node), form an acyclic layer above them, so the
    refinement is one backward pass over the pairs (deepest first), each given the class of
    the first state, pair or ``b``'s, with its acceptance and its labels per target class.
    JsonSchemaStore web-types splits 51 objects' other keys by one pattern each; the generic
    product refined ~300 states per split. Raises AutomatonTooLarge past ``limit`` states
    (the generic product has at least as many)."""
    if b.n == 0 or not words:
        return b
    kids, term = _word_trie(words)
    nb = b.n
    # The pairs in breadth-first order: an edge goes one trie level down, so every pair's
    # successors come after it. Targets: >= 0 a state of b (off the trie), ~k pair k.
    keys = {(0, 0): 0}
    plist = [(0, 0)]
    prows: list = []
    cuts: dict = {}  # (label, a trie node's characters) -> (those in the label, the rest)
    i = 0
    while i < len(plist):
        q, t = plist[i]
        i += 1
        ch = kids[t]
        row = []
        for c, q2 in b.trans[q]:
            if ch:
                ck = (c, tuple(ch))
                cut = cuts.get(ck)
                if cut is None:
                    pts = sorted(cp for cp in ch if cs.contains(c, cp))
                    cut = cuts[ck] = (pts, _minus_points(c, pts) if pts else c)
                pts, c = cut
                for cp in pts:
                    k = keys.get((q2, ch[cp]))
                    if k is None:
                        k = len(plist)
                        if k + nb >= limit:
                            raise AutomatonTooLarge("automaton product exceeds the state limit")
                        keys[(q2, ch[cp])] = k
                        plist.append((q2, ch[cp]))
                    row.append((((cp, cp),), ~k))
            if c:
                row.append((c, q2))
        prows.append(row)
    # b's states are their own classes; a signature equal to one of theirs is that state.
    sigs = {(bool(b.accept[q]), tuple(b.trans[q])): q for q in range(nb)}
    cls = [0] * len(plist)
    extra: list = []  # (accept, row) of the new classes, ids nb, nb + 1, ...
    for k in range(len(plist) - 1, -1, -1):
        q, t = plist[k]
        by: dict = {}
        merged = False
        for c, tg in prows[k]:
            tc = cls[~tg] if tg < 0 else tg
            if tc < 0:
                continue  # (a dead pair)
            if tc in by:
                by[tc] = by[tc] + c
                merged = True
            else:
                by[tc] = c
        # (each label is normalized, and they are disjoint: only a merged one needs it again)
        if len(by) == 1:
            (tc, v), = by.items()
            row = [(cs.normalize(v) if merged else v, tc)]
        else:
            row = sorted(((cs.normalize(v), tc) for tc, v in by.items()) if merged else
                         ((v, tc) for tc, v in by.items()), key=_first_cp)
        acc = bool(b.accept[q]) and not term[t]
        if not acc and not row:
            cls[k] = -1
            continue
        sig = (acc, tuple(row))
        c_id = sigs.get(sig)
        if c_id is None:
            c_id = sigs[sig] = nb + len(extra)
            extra.append(sig)
        cls[k] = c_id
    start = cls[0]
    if start < 0:
        return DFA([], [])
    # minimize's canonical numbering of the class automaton, the start first.
    n = nb + len(extra)
    order = [start] + [x for x in range(n) if x != start]
    pos = {x: j for j, x in enumerate(order)}
    trans = []
    accept = []
    for x in order:
        a, row = (bool(b.accept[x]), b.trans[x]) if x < nb else extra[x - nb]
        trans.append([(c, pos[tc]) for c, tc in row])
        accept.append(a)
    return _quotient(DFA(trans, accept), list(range(n)), [{j} for j in range(n)])


def length_bounds(d: DFA):
    """(min, max) length of accepted strings; max None when unbounded. DFA must be trimmed
    and non-empty."""
    n = d.n
    # shortest
    dist = {0: 0}
    frontier = [0]
    best = None
    while frontier:
        nxt = []
        for s in frontier:
            if d.accept[s] and best is None:
                best = dist[s]
            for _, t in d.trans[s]:
                if t not in dist:
                    dist[t] = dist[s] + 1
                    nxt.append(t)
        if best is not None:
            break
        frontier = nxt
    # longest: cycle in a trimmed DFA means unbounded
    color = [0] * n
    longest = [0] * n

    def visit(s):
        stack = [(s, iter(d.trans[s]))]
        color[s] = 1
        while stack:
            u, it = stack[-1]
            for _, t in it:
                if color[t] == 1:
                    return False
                if color[t] == 0:
                    color[t] = 1
                    stack.append((t, iter(d.trans[t])))
                    break
            else:
                stack.pop()
                color[u] = 2
                m = 0 if d.accept[u] else -1
                for _, t in d.trans[u]:
                    m = max(m, longest[t] + 1)
                longest[u] = m
        return True

    if not visit(0):
        return best, None
    return best, longest[0]
