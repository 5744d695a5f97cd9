/* Literal-led alternations built directly as a minimal acyclic DFA.
 *
 * A tool-call group ("name1>" R1 "</function>" | "name2>" R2 "</function>" | ...) and a
 * large enum ("\"red\"" | "\"green\"" | ...) are new in nearly every request, so the
 * automaton memo cannot help them, and the subset construction plus minimisation cost
 * about 1.5 ms for a hundred tools. Their language is finite over bytes and references,
 * so the minimal DFA can be built in linear time instead: every state is hash-consed on
 * (final, outgoing edges) bottom-up, the classic register construction for acyclic
 * automata. References stay references (never inlined), which the Earley parser handles
 * like any other ref edge. */
#include "lower_internal.h"

/* Below this many alternatives the general path (memoised across grammars) is as fast. */
#define TRIE_MIN_ALTS 8
/* Leading literals longer than this go the general way (bounds the recursion depth). */
#define TRIE_MAX_LEAD 512

typedef struct {
    int32_t node;  /* the alternative's node (SEQ or BYTES) */
    int32_t first; /* kids index of its first element, or -1 for a lone BYTES node */
    int32_t n_el;  /* elements */
    const uint8_t *lead;
    int32_t lead_len;
    int32_t tail; /* state after the leading literal */
} trie_alt;

typedef struct {
    lw_ctx *c;
    lw_dfa *d;         /* states in creation order; renumbered at the end */
    int64_t budget;
    int32_t *table;    /* open addressing over state ids, -1 empty */
    XGR_VEC(uint64_t) hashes; /* per state */
    size_t cap;
    XGR_VEC(xgr_edge) stack; /* outgoing edges of the trie nodes being built, LIFO */
} trie_ws;

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t state_hash(uint8_t final, const xgr_edge *e, int32_t n) {
    uint64_t h = mix(0x51ed27, final);
    for (int32_t i = 0; i < n; i++)
        h = mix(mix(mix(h, (uint64_t)(uint32_t)e[i].ref), (uint64_t)e[i].lo << 8 | e[i].hi),
                (uint64_t)(uint32_t)e[i].target);
    return h;
}

static int same_state(const lw_dfa *d, int32_t s, uint8_t final, const xgr_edge *e, int32_t n) {
    if (d->final.data[s] != final || d->ebeg.data[s + 1] - d->ebeg.data[s] != n) return 0;
    const xgr_edge *f = d->edges.data + d->ebeg.data[s];
    for (int32_t i = 0; i < n; i++)
        if (f[i].ref != e[i].ref || f[i].lo != e[i].lo || f[i].hi != e[i].hi ||
            f[i].target != e[i].target)
            return 0;
    return 1;
}

static int grow_table(trie_ws *w) {
    size_t cap = w->cap ? w->cap * 2 : 1024;
    int32_t *t = xgr_malloc(cap * sizeof *t);
    if (!t) return XGR_ERR_NOMEM;
    memset(t, 0xff, cap * sizeof *t);
    for (int32_t s = 0; s < w->d->n; s++) {
        size_t j = w->hashes.data[s] & (cap - 1);
        while (t[j] >= 0) j = (j + 1) & (cap - 1);
        t[j] = s;
    }
    free(w->table);
    w->table = t;
    w->cap = cap;
    return XGR_OK;
}

/* The state with these edges (sorted: bytes by lo, then refs), created unless an equal
 * one exists; its successors must already be registered. */
static int reg(trie_ws *w, uint8_t final, const xgr_edge *e, int32_t n, int32_t *out) {
    lw_dfa *d = w->d;
    uint64_t h = state_hash(final, e, n);
    if ((size_t)d->n * 2 + 2 > w->cap && grow_table(w)) return XGR_ERR_NOMEM;
    size_t j = h & (w->cap - 1);
    for (; w->table[j] >= 0; j = (j + 1) & (w->cap - 1)) {
        int32_t s = w->table[j];
        if (w->hashes.data[s] == h && same_state(d, s, final, e, n)) {
            *out = s;
            return XGR_OK;
        }
    }
    if (d->n >= w->budget)
        return xgr_fail(XGR_ERR_LIMIT, "rule '%s': more than %lld states",
                        w->c->orules.data[w->c->cur].name, (long long)w->budget);
    int32_t s = d->n;
    if (XGR_VEC_RESERVE(d->final, (size_t)s + 1) || XGR_VEC_RESERVE(d->ebeg, (size_t)s + 2) ||
        XGR_VEC_RESERVE(d->edges, d->edges.len + (size_t)n) || XGR_VEC_PUSH(w->hashes, h))
        return XGR_ERR_NOMEM;
    d->final.data[s] = final;
    d->final.len = (size_t)s + 1;
    if (s == 0) d->ebeg.data[0] = 0;
    if (n) memcpy(d->edges.data + d->edges.len, e, (size_t)n * sizeof *e);
    d->edges.len += (size_t)n;
    d->ebeg.data[s + 1] = (int32_t)d->edges.len;
    d->ebeg.len = (size_t)s + 2;
    d->n = s + 1;
    w->table[j] = s;
    *out = s;
    return XGR_OK;
}

static int reg1(trie_ws *w, int32_t ref, uint8_t ch, int32_t target, int32_t *out) {
    xgr_edge e = {target, ref, ch, ch};
    return reg(w, 0, &e, 1, out);
}

/* Does the element list of alternative `node` fit (a leading literal, then literals,
 * references to productive rules and empties)? Fills a's shape; no side effects. */
static int alt_shape(const lw_ctx *c, int32_t node, trie_alt *a) {
    const xgr_grammar *g = c->g;
    const xgr_node *n = &g->nodes.data[node];
    a->node = node;
    if (n->kind == XGR_NODE_BYTES) {
        a->first = -1;
        a->n_el = 1;
    } else if (n->kind == XGR_NODE_SEQ && n->count >= 1) {
        a->first = n->off;
        a->n_el = n->count;
    } else {
        return 0;
    }
    for (int32_t i = 0; i < a->n_el; i++) {
        const xgr_node *el = a->first < 0 ? n : &g->nodes.data[g->kids.data[a->first + i]];
        if (i == 0) {
            if (el->kind != XGR_NODE_BYTES || el->count < 1 || el->count > TRIE_MAX_LEAD) return 0;
            a->lead = g->bytes.data + el->off;
            a->lead_len = el->count;
        } else if (el->kind == XGR_NODE_REF) {
            if (!(c->rflags[el->a] & RF_PROD)) return 0;
        } else if (el->kind != XGR_NODE_BYTES && el->kind != XGR_NODE_EMPTY) {
            return 0;
        }
    }
    return 1;
}

/* The state after alternative a's leading literal: its other elements, as a chain. */
static int build_tail(trie_ws *w, trie_alt *a, int32_t final_state) {
    lw_ctx *c = w->c;
    const xgr_grammar *g = c->g;
    int32_t cur = final_state;
    int rc;
    for (int32_t i = a->n_el - 1; i >= 1; i--) {
        const xgr_node el = g->nodes.data[g->kids.data[a->first + i]];
        if (el.kind == XGR_NODE_BYTES) {
            for (int32_t k = el.count - 1; k >= 0; k--)
                if ((rc = reg1(w, -1, g->bytes.data[el.off + k], cur, &cur))) return rc;
        } else if (el.kind == XGR_NODE_REF && (c->rflags[el.a] & RF_NE)) {
            int32_t o; /* (a rule deriving only "" needs no edge, as in nfa.c) */
            if ((rc = lw_ref_rule(c, el.a, 0, &o))) return rc;
            if ((rc = reg1(w, o, 0, cur, &cur))) return rc;
        }
    }
    a->tail = cur;
    return XGR_OK;
}

static int cmp_lead(const void *x, const void *y) {
    const trie_alt *a = x, *b = y;
    int32_t n = a->lead_len < b->lead_len ? a->lead_len : b->lead_len;
    int r = memcmp(a->lead, b->lead, (size_t)n);
    return r ? r : (a->lead_len > b->lead_len) - (a->lead_len < b->lead_len);
}

/* The state reading the rest (from byte `depth` on) of alternatives alts[lo..hi), which
 * share their first `depth` bytes. */
static int build_trie(trie_ws *w, trie_alt *alts, int32_t lo, int32_t hi, int32_t depth,
                      int32_t *out) {
    size_t base = w->stack.len; /* children push and pop above this before we push */
    int rc;
    for (int32_t i = lo; i < hi;) {
        uint8_t ch = alts[i].lead[depth];
        int32_t j = i + 1;
        while (j < hi && alts[j].lead[depth] == ch) j++;
        int32_t child;
        if (j == i + 1) { /* one alternative left: the rest of its literal is a chain */
            child = alts[i].tail;
            for (int32_t k = alts[i].lead_len - 1; k > depth; k--)
                if ((rc = reg1(w, -1, alts[i].lead[k], child, &child))) return rc;
        } else if ((rc = build_trie(w, alts, i, j, depth + 1, &child))) {
            return rc;
        }
        xgr_edge *last = w->stack.len > base ? &w->stack.data[w->stack.len - 1] : NULL;
        if (last && last->target == child && last->hi + 1 == ch) {
            last->hi = ch; /* adjacent bytes to the same state: one range (fsm.h) */
        } else {
            xgr_edge e = {child, -1, ch, ch};
            if (XGR_VEC_PUSH(w->stack, e)) return XGR_ERR_NOMEM;
        }
        i = j;
    }
    rc = reg(w, 0, w->stack.data + base, (int32_t)(w->stack.len - base), out);
    w->stack.len = base;
    return rc;
}

/* Renumbers the states so that `start` is 0 (the DFA convention), keeping edge order. */
static int renumber(lw_dfa *d, int32_t start) {
    int32_t n = d->n;
    int32_t *id = xgr_malloc(((size_t)n + 1) * sizeof *id);
    uint8_t *fin = xgr_malloc((size_t)n + 1);
    int32_t *beg = xgr_malloc(((size_t)n + 2) * sizeof *beg);
    xgr_edge *ed = xgr_malloc((d->edges.len + 1) * sizeof *ed);
    if (!id || !fin || !beg || !ed) {
        free(id), free(fin), free(beg), free(ed);
        return XGR_ERR_NOMEM;
    }
    /* start first, then the others in creation order */
    id[start] = 0;
    for (int32_t s = 0, k = 1; s < n; s++)
        if (s != start) id[s] = k++;
    size_t ne = 0;
    for (int32_t k = 0; k < n; k++) {
        int32_t s = k == 0 ? start : (k <= start ? k - 1 : k);
        fin[k] = d->final.data[s];
        beg[k] = (int32_t)ne;
        for (int32_t e = d->ebeg.data[s]; e < d->ebeg.data[s + 1]; e++) {
            ed[ne] = d->edges.data[e];
            ed[ne].target = id[ed[ne].target];
            ne++;
        }
    }
    beg[n] = (int32_t)ne;
    memcpy(d->final.data, fin, (size_t)n);
    memcpy(d->ebeg.data, beg, ((size_t)n + 1) * sizeof *beg);
    memcpy(d->edges.data, ed, ne * sizeof *ed);
    free(id), free(fin), free(beg), free(ed);
    return XGR_OK;
}

int lw_trie_build(lw_ctx *c, int32_t orule, int64_t budget, lw_dfa *out, int *built) {
    *built = 0;
    const lw_orule o = c->orules.data[orule];
    if (o.src != LW_SRC_RULE || o.b || o.kind != XGR_RULE_NORMAL) return XGR_OK;
    const xgr_grammar *g = c->g;
    int32_t node = g->rules.data[o.a].body;
    while (g->nodes.data[node].kind == XGR_NODE_SEQ && g->nodes.data[node].count == 1)
        node = g->kids.data[g->nodes.data[node].off];
    const xgr_node alt = g->nodes.data[node];
    if (alt.kind != XGR_NODE_ALT || alt.count < TRIE_MIN_ALTS) return XGR_OK;
    trie_alt *alts = xgr_malloc((size_t)alt.count * sizeof *alts);
    if (!alts) return XGR_ERR_NOMEM;
    int rc = XGR_OK;
    for (int32_t i = 0; i < alt.count; i++) {
        int32_t k = g->kids.data[alt.off + i];
        while (g->nodes.data[k].kind == XGR_NODE_SEQ && g->nodes.data[k].count == 1 &&
               g->nodes.data[g->kids.data[g->nodes.data[k].off]].kind == XGR_NODE_SEQ)
            k = g->kids.data[g->nodes.data[k].off];
        if (!alt_shape(c, k, &alts[i])) goto done;
    }
    qsort(alts, (size_t)alt.count, sizeof *alts, cmp_lead);
    /* Deterministic only when no leading literal is a prefix of another (sorted order
     * puts such a pair next to each other). */
    for (int32_t i = 0; i + 1 < alt.count; i++)
        if (alts[i].lead_len <= alts[i + 1].lead_len &&
            memcmp(alts[i].lead, alts[i + 1].lead, (size_t)alts[i].lead_len) == 0)
            goto done;
    trie_ws w;
    memset(&w, 0, sizeof w);
    w.c = c;
    w.d = out;
    w.budget = budget;
    out->n = 0;
    out->final.len = out->ebeg.len = out->edges.len = 0;
    int32_t final_state, start;
    if ((rc = reg(&w, 1, NULL, 0, &final_state))) goto fail;
    for (int32_t i = 0; i < alt.count; i++)
        if ((rc = build_tail(&w, &alts[i], final_state))) goto fail;
    if ((rc = build_trie(&w, alts, 0, alt.count, 0, &start))) goto fail;
    if ((rc = renumber(out, start))) goto fail;
    *built = 1;
fail:
    free(w.table);
    XGR_VEC_FREE(w.hashes);
    XGR_VEC_FREE(w.stack);
done:
    free(alts);
    return rc;
}
