/* Thompson construction of one output rule's epsilon-NFA (byte-range and rule-ref
 * edges), with inlining, UTF-8 class expansion and repetition unrolling /
 * compression, plus the product that removes the empty string from a language. */
#include "lower_internal.h"

static int new_state(lw_ctx *c, int32_t *s) {
    if (c->nfa.n_states >= c->nfa_limit)
        return xgr_fail(XGR_ERR_LIMIT, "rule '%s': automaton exceeds %lld NFA states",
                        c->orules.data[c->cur].name, (long long)c->nfa_limit);
    *s = c->nfa.n_states++;
    return XGR_OK;
}

static int add_edge(lw_nfa *a, int32_t from, int32_t to, int32_t label, uint8_t lo,
                    uint8_t hi) {
    lw_nedge e = {from, to, label, lo, hi};
    return XGR_VEC_PUSH(a->edges, e) ? XGR_ERR_NOMEM : XGR_OK;
}
int lw_nfa_state(lw_ctx *c, int32_t *s) { return new_state(c, s); }
int lw_nfa_edge(lw_ctx *c, int32_t from, int32_t to, int32_t label, uint8_t lo, uint8_t hi) {
    return add_edge(&c->nfa, from, to, label, lo, hi);
}
#define EPS(c, a, b) add_edge(&(c)->nfa, (a), (b), LW_EPS, 0, 0)

static int build(lw_ctx *c, int32_t id, int32_t a, int32_t b, int depth);

/* ---- shared fragments ----------------------------------------------------------------
 * An inlined rule, or a sequence of 2-4 rule references whose first rule is inlined
 * (`"\\" kchar_x key_rest` in a trie of property names, hundreds of times in one rule),
 * ending at `b`: built once from a fresh state s, then every other occurrence with the
 * same rules and end is one epsilon edge a -> s. The fragment's states are fresh and
 * only lead to b, and only epsilon edges enter s, so each user still spells exactly the
 * rules' language; the subset construction then visits one copy of the inlined rule
 * instead of one per occurrence (the minimal DFA is the same). An object's optional
 * property chain `p_k ::= ws "," ... p_{k+1} | p_{k+1}` with p_{k+1} inlined builds
 * p_{k+1} once instead of twice (and so on down the inlined chain). */

static uint64_t share_hash(const lw_share *k) {
    uint64_t h = xgr_mix64(((uint64_t)(uint32_t)k->n << 32) | (uint32_t)k->b);
    for (int32_t i = 0; i < k->n; i++) h = xgr_hash_combine(h, (uint32_t)k->ids[i]);
    return h;
}

static int share_same(const lw_share *x, const lw_share *y) {
    return x->n == y->n && x->b == y->b && !memcmp(x->ids, y->ids, sizeof x->ids);
}

/* The fragment already built for key's rules and end, or NULL. */
static const lw_share *share_find(const lw_ctx *c, const lw_share *key) {
    if (!c->share_cap) return NULL;
    size_t mask = c->share_cap - 1;
    for (size_t i = share_hash(key) & mask; c->share_tab[i] >= 0; i = (i + 1) & mask)
        if (share_same(&c->share.data[c->share_tab[i]], key))
            return &c->share.data[c->share_tab[i]];
    return NULL;
}

static int share_add(lw_ctx *c, lw_share key) {
    if ((c->share.len + 1) * 2 > c->share_cap) {
        size_t cap = c->share_cap ? c->share_cap * 2 : 64;
        int32_t *t = xgr_malloc(cap * sizeof *t);
        if (!t) return XGR_ERR_NOMEM;
        memset(t, 0xff, cap * sizeof *t);
        for (size_t k = 0; k < c->share.len; k++) {
            size_t i = share_hash(&c->share.data[k]) & (cap - 1);
            while (t[i] >= 0) i = (i + 1) & (cap - 1);
            t[i] = (int32_t)k;
            c->share.data[k].slot = (int32_t)i;
        }
        free(c->share_tab);
        c->share_tab = t;
        c->share_cap = cap;
    }
    size_t mask = c->share_cap - 1, i = share_hash(&key) & mask;
    for (; c->share_tab[i] >= 0; i = (i + 1) & mask)
        if (share_same(&c->share.data[c->share_tab[i]], &key)) return XGR_OK;
    key.slot = (int32_t)i;
    if (XGR_VEC_PUSH(c->share, key)) return XGR_ERR_NOMEM;
    c->share_tab[i] = (int32_t)c->share.len - 1;
    return XGR_OK;
}

/* Forgets every fragment (a new NFA). */
static void share_reset(lw_ctx *c) {
    for (size_t k = 0; k < c->share.len; k++) c->share_tab[c->share.data[k].slot] = -1;
    c->share.len = 0;
}

/* Builds kids[0..n) (references; the first one inlined) in sequence from a to b through
 * a shared fragment. */
static int shared_frag(lw_ctx *c, const int32_t *kids, int32_t n, const lw_share *key, int32_t a,
                       int32_t b, int depth) {
    const lw_share *e = share_find(c, key);
    if (e) return EPS(c, a, e->s);
    lw_share k = *key;
    int rc;
    if ((rc = new_state(c, &k.s)) || (rc = EPS(c, a, k.s))) return rc;
    int32_t cur = k.s;
    for (int32_t i = 0; i < n; i++) {
        int32_t nxt = b;
        if (i + 1 < n && (rc = new_state(c, &nxt))) return rc;
        /* (a single inlined rule: its body; kids = NULL) */
        int32_t node = kids ? kids[i] : c->g->rules.data[k.ids[0]].body;
        if ((rc = build(c, node, cur, nxt, depth + 1))) return rc;
        cur = nxt;
    }
    return share_add(c, k);
}

/* A sequence of 2-4 productive rule references led by an inlined one: shared. Sets *done
 * when it built the sequence. */
static int shared_seq(lw_ctx *c, const xgr_node *n, int32_t a, int32_t b, int depth,
                      int *done) {
    const xgr_grammar *g = c->g;
    *done = 0;
    if (c->safe || n->count < 2 || n->count > 4) return XGR_OK;
    lw_share key;
    memset(&key, 0, sizeof key);
    key.n = n->count;
    key.b = b;
    for (int32_t i = 0; i < n->count; i++) {
        const xgr_node *k = &g->nodes.data[g->kids.data[n->off + i]];
        if (k->kind != XGR_NODE_REF || !(c->rflags[k->a] & RF_PROD)) return XGR_OK;
        key.ids[i] = k->a;
    }
    if (!(c->rflags[key.ids[0]] & RF_INLINED)) return XGR_OK;
    *done = 1;
    return shared_frag(c, g->kids.data + n->off, n->count, &key, a, b, depth);
}

/* A member of an inlining group (lower.c lw_group_inline), referenced at `a` and ending
 * at `b`: its body is built once per NFA build and end state from a fresh state s, and
 * every other reference with the same end is one epsilon edge a -> s (as shared_seq:
 * only epsilon edges enter s and its fragment only leads to b). A pattern's automaton
 * emitted one rule per state refers to most states from two or more others; without
 * sharing the inlined copies would multiply along every path. */
static int shared_ref(lw_ctx *c, int32_t r, int32_t a, int32_t b, int depth) {
    if (c->grp_stamp[r] == c->nfa_builds && c->grp_end[r] == b) return EPS(c, a, c->grp_state[r]);
    int32_t s = -1;
    int rc;
    if ((rc = new_state(c, &s)) || (rc = EPS(c, a, s)) ||
        (rc = build(c, c->g->rules.data[r].body, s, b, depth + 1)))
        return rc;
    c->grp_stamp[r] = c->nfa_builds;
    c->grp_end[r] = b;
    c->grp_state[r] = s;
    return XGR_OK;
}

/* The UTF-8 byte-range sequences of class node `id` (normalised ranges split by
 * lw_utf8_sequences), computed at its first use in this compile: a class inlined into
 * many rules (a string's characters) is normalised once. *seqs stays valid until the
 * next call (cls_seqs may grow). */
static int class_seqs(lw_ctx *c, int32_t id, const lw_u8seq **seqs, size_t *nseq) {
    const xgr_grammar *g = c->g;
    if (!c->cls_beg) {
        size_t nn = g->nodes.len;
        c->cls_beg = xgr_calloc(2 * nn + 1, sizeof *c->cls_beg);
        if (!c->cls_beg) return XGR_ERR_NOMEM;
        c->cls_len = c->cls_beg + nn;
    }
    if (!c->cls_beg[id]) {
        const xgr_node *n = &g->nodes.data[id];
        int rc;
        if ((rc = lw_norm_class(g->ranges.data + n->off, n->count, n->negated, &c->ranges)))
            return rc;
        c->seqs.len = 0;
        if ((rc = lw_utf8_sequences(c->ranges.data, c->ranges.len, &c->seqs))) return rc;
        if (c->cls_seqs.len + c->seqs.len >= (size_t)INT32_MAX)
            return xgr_fail(XGR_ERR_LIMIT, "character classes too large");
        if (XGR_VEC_RESERVE(c->cls_seqs, c->cls_seqs.len + c->seqs.len + 1)) return XGR_ERR_NOMEM;
        if (c->seqs.len)
            memcpy(c->cls_seqs.data + c->cls_seqs.len, c->seqs.data, c->seqs.len * sizeof *c->seqs.data);
        c->cls_beg[id] = (int32_t)c->cls_seqs.len + 1;
        c->cls_len[id] = (int32_t)c->seqs.len;
        c->cls_seqs.len += c->seqs.len;
    }
    *seqs = c->cls_seqs.data + c->cls_beg[id] - 1;
    *nseq = (size_t)c->cls_len[id];
    return XGR_OK;
}

/* Adds states/edges so that the paths a -> b spell exactly L(node). Edges only leave
 * `a` or fresh states and only enter `b` or fresh states, so sibling fragments that
 * share a and b (alternatives) cannot leak into each other. */
static int build(lw_ctx *c, int32_t id, int32_t a, int32_t b, int depth) {
    const xgr_grammar *g = c->g;
    if (depth > LW_MAX_DEPTH)
        return xgr_fail(XGR_ERR_LIMIT,
                        "rule '%s': expression nesting (with inlined rules) deeper than %d",
                        c->orules.data[c->cur].name, LW_MAX_DEPTH);
    const xgr_node n = g->nodes.data[id];
    int rc;
    switch (n.kind) {
    case XGR_NODE_EMPTY: return EPS(c, a, b);
    case XGR_NODE_BYTES: {
        if (n.count == 0) return EPS(c, a, b);
        int32_t cur = a;
        for (int32_t i = 0; i < n.count; i++) {
            int32_t nxt = b;
            if (i + 1 < n.count && (rc = new_state(c, &nxt))) return rc;
            uint8_t ch = g->bytes.data[n.off + i];
            if ((rc = add_edge(&c->nfa, cur, nxt, LW_BYTE, ch, ch))) return rc;
            cur = nxt;
        }
        return XGR_OK;
    }
    case XGR_NODE_BYTE_CLASS:
        if ((rc = lw_norm_byte_class(g->ranges.data + n.off, n.count, n.negated, &c->ranges)))
            return rc;
        if (!c->ranges.len) c->nfa.may_dead = 1;
        for (size_t i = 0; i < c->ranges.len; i++)
            if ((rc = add_edge(&c->nfa, a, b, LW_BYTE, (uint8_t)c->ranges.data[i].lo,
                               (uint8_t)c->ranges.data[i].hi)))
                return rc;
        return XGR_OK;
    case XGR_NODE_CLASS: {
        const lw_u8seq *seqs = NULL;
        size_t nseq = 0;
        if ((rc = class_seqs(c, id, &seqs, &nseq))) return rc;
        if (!nseq) c->nfa.may_dead = 1; /* no scalar value: no sequence */
        /* Sequences sharing a leading byte range share its target state: keeps the NFA
         * (and the subset construction's work) small for wide classes. */
        int32_t prev_mid[3] = {-1, -1, -1};
        lw_u8seq prev;
        memset(&prev, 0, sizeof prev);
        for (size_t i = 0; i < nseq; i++) {
            lw_u8seq q = seqs[i];
            int32_t cur = a;
            int same = i > 0 && prev.n == q.n;
            for (int j = 0; j < q.n; j++) {
                int last = j + 1 == q.n;
                same = same && !last && prev.lo[j] == q.lo[j] && prev.hi[j] == q.hi[j];
                if (same) {
                    cur = prev_mid[j];
                    continue;
                }
                int32_t nxt = b;
                if (!last && (rc = new_state(c, &nxt))) return rc;
                if ((rc = add_edge(&c->nfa, cur, nxt, LW_BYTE, q.lo[j], q.hi[j]))) return rc;
                if (!last) prev_mid[j] = nxt;
                cur = nxt;
            }
            prev = q;
        }
        return XGR_OK;
    }
    case XGR_NODE_SEQ: {
        if (n.count == 0) return EPS(c, a, b);
        int done;
        if ((rc = shared_seq(c, &n, a, b, depth, &done)) || done) return rc;
        int32_t cur = a;
        for (int32_t i = 0; i < n.count; i++) {
            int32_t nxt = b;
            if (i + 1 < n.count && (rc = new_state(c, &nxt))) return rc;
            if ((rc = build(c, g->kids.data[n.off + i], cur, nxt, depth + 1))) return rc;
            cur = nxt;
        }
        return XGR_OK;
    }
    case XGR_NODE_ALT:
        if (n.count == 0) c->nfa.may_dead = 1;
        for (int32_t i = 0; i < n.count; i++)
            if ((rc = build(c, g->kids.data[n.off + i], a, b, depth + 1))) return rc;
        return XGR_OK;
    case XGR_NODE_REF: {
        uint8_t f = c->rflags[n.a];
        if (!(f & RF_PROD)) { /* empty language: no path */
            c->nfa.may_dead = 1;
            return XGR_OK;
        }
        if ((f & RF_INLINED) && !c->safe) {
            c->safe_differs = 1;
            if (c->grp && c->grp[n.a] >= 0) return shared_ref(c, n.a, a, b, depth);
            lw_share key;
            memset(&key, 0, sizeof key);
            key.n = 1;
            key.b = b;
            key.ids[0] = n.a;
            return shared_frag(c, NULL, 1, &key, a, b, depth);
        }
        /* A rule deriving only "" needs no Earley item. */
        if (!(f & RF_NE)) return EPS(c, a, b);
        int32_t o;
        if ((rc = lw_ref_rule(c, n.a, 0, &o))) return rc;
        return add_edge(&c->nfa, a, b, o, 0, 0);
    }
    case XGR_NODE_REPEAT: {
        if (n.max == 0) return EPS(c, a, b);
        uint8_t q = lw_node_props(c, n.a, 0);
        if (c->status) return c->status;
        if (!(q & NP_NE)) { /* the body matches at most "" */
            if (n.min == 0 || (q & NP_NULLABLE)) return EPS(c, a, b);
            c->nfa.may_dead = 1;
            return XGR_OK;
        }
        if (lw_repeat_compressed(c, id) || (c->safe && (n.max >= 2 || (n.max < 0 && n.min >= 2)))) {
            int32_t o;
            if ((rc = lw_repeat_rule(c, id, 0, &o))) return rc;
            return add_edge(&c->nfa, a, b, o, 0, 0);
        }
        /* Unroll: x{m,n} = x^m (x (x ...)?)? ; x{m,} = x^m x*. */
        if (n.max >= 2 || (n.max < 0 && n.min >= 2)) c->safe_differs = 1;
        int32_t cur = a;
        for (int32_t i = 0; i < n.min; i++) {
            int32_t nxt = b;
            if ((i + 1 < n.min || n.max != n.min) && (rc = new_state(c, &nxt))) return rc;
            if ((rc = build(c, n.a, cur, nxt, depth + 1))) return rc;
            cur = nxt;
        }
        if (n.max == n.min) return XGR_OK;
        if (n.max < 0) {
            int32_t loop = -1;
            if ((rc = new_state(c, &loop)) || (rc = EPS(c, cur, loop)) ||
                (rc = build(c, n.a, loop, loop, depth + 1)) || (rc = EPS(c, loop, b)))
                return rc;
            return XGR_OK;
        }
        for (int32_t i = n.min; i < n.max; i++) {
            int32_t nxt = -1;
            if ((rc = EPS(c, cur, b)) || (rc = new_state(c, &nxt)) ||
                (rc = build(c, n.a, cur, nxt, depth + 1)))
                return rc;
            cur = nxt;
        }
        return EPS(c, cur, b);
    }
    case XGR_NODE_SUBSTRING: return lw_substring_nfa(c, id, a, b);
    default: return xgr_fail(XGR_ERR_INTERNAL, "unknown node kind %d", (int)n.kind);
    }
}

/* Product with a "consumed something" bit: (s, 0) has read nothing yet, (s, 1) has.
 * A nullable ref R either derives "" (epsilon, bit unchanged) or R minus "" (bit set);
 * the final state is (final, 1). The result derives L \ {""}. */
static int nonempty_product(lw_ctx *c) {
    lw_nfa *in = &c->nfa, *o = &c->nfa2;
    if ((int64_t)in->n_states * 2 > c->nfa_limit)
        return xgr_fail(XGR_ERR_LIMIT, "rule '%s': automaton exceeds %lld NFA states",
                        c->orules.data[c->cur].name, (long long)c->nfa_limit);
    o->n_states = in->n_states * 2;
    o->start = in->start * 2;
    o->final = in->final * 2 + 1;
    o->may_dead = 1; /* (s, 0) states whose only way on reads nothing */
    o->edges.len = 0;
    if (XGR_VEC_RESERVE(o->edges, in->edges.len * 2)) return XGR_ERR_NOMEM;
    int rc;
    for (size_t i = 0; i < in->edges.len; i++) {
        lw_nedge e = in->edges.data[i];
        int32_t s0 = 2 * e.from, s1 = s0 + 1, t0 = 2 * e.to, t1 = t0 + 1;
        if (e.label == LW_EPS) {
            if ((rc = add_edge(o, s0, t0, LW_EPS, 0, 0)) || (rc = add_edge(o, s1, t1, LW_EPS, 0, 0)))
                return rc;
            continue;
        }
        if (e.label >= 0 && c->orules.data[e.label].nullable) {
            if ((rc = add_edge(o, s1, t1, e.label, 0, 0)) || (rc = add_edge(o, s0, t0, LW_EPS, 0, 0)))
                return rc;
            if (c->orules.data[e.label].ne) {
                int32_t p;
                if ((rc = lw_prime_rule(c, e.label, &p)) || (rc = add_edge(o, s0, t1, p, 0, 0)))
                    return rc;
            }
            continue;
        }
        if ((rc = add_edge(o, s0, t1, e.label, e.lo, e.hi)) ||
            (rc = add_edge(o, s1, t1, e.label, e.lo, e.hi)))
            return rc;
    }
    lw_nfa tmp = c->nfa;
    c->nfa = c->nfa2;
    c->nfa2 = tmp;
    return XGR_OK;
}

int lw_build_nfa(lw_ctx *c, int32_t orule) {
    lw_orule o = c->orules.data[orule];
    c->cur = orule;
    c->nfa.n_states = 0;
    c->nfa.edges.len = 0;
    c->nfa.may_dead = 0;
    c->safe_differs = 0;
    share_reset(c);
    c->nfa_builds++; /* invalidates every group member's shared fragment (shared_ref) */
    int rc;
    int32_t a = -1, b = -1;
    if ((rc = new_state(c, &a)) || (rc = new_state(c, &b))) return rc;
    c->nfa.start = a;
    c->nfa.final = b;
    int32_t node = o.src == LW_SRC_RULE ? c->g->rules.data[o.a].body : o.a;
    if ((rc = build(c, node, a, b, 0))) return rc;
    if (o.b && (rc = nonempty_product(c))) return rc;
    return XGR_OK;
}
