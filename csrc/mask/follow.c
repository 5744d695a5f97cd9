/* Stack-free follow automaton used to sharpen mask-cache verdicts (see follow.h). */
#include "follow.h"

void xgr_follow_tables_free(xgr_follow_tables *t) {
    if (!t) return;
    free(t->ret_begin);
    free(t->ret);
    free((void *)t->first);
    free(t);
}

int xgr_follow_tables_build(const xgr_fsm *f, xgr_follow_tables **out) {
    size_t nr = (size_t)f->n_rules;
    *out = NULL;
    xgr_follow_tables *t = xgr_calloc(1, sizeof *t);
    if (!t || !(t->ret_begin = xgr_calloc(nr + 1, sizeof *t->ret_begin)) ||
        !(t->first = xgr_calloc(nr * 9 + 1, sizeof *t->first))) {
        xgr_follow_tables_free(t);
        return XGR_ERR_NOMEM;
    }
    for (int32_t e = 0; e < f->n_edges; e++)
        if (f->edges[e].ref >= 0) t->ret_begin[f->edges[e].ref + 1]++;
    for (size_t r = 0; r < nr; r++) t->ret_begin[r + 1] += t->ret_begin[r];
    t->ret = xgr_malloc(((size_t)t->ret_begin[nr] + 1) * sizeof *t->ret);
    int32_t *fill = xgr_malloc((nr + 1) * sizeof *fill);
    if (!t->ret || !fill) {
        free(fill);
        xgr_follow_tables_free(t);
        return XGR_ERR_NOMEM;
    }
    memcpy(fill, t->ret_begin, nr * sizeof *fill);
    for (int32_t e = 0; e < f->n_edges; e++)
        if (f->edges[e].ref >= 0) t->ret[fill[f->edges[e].ref]++] = f->edges[e].target;
    free(fill);
    t->bytes = sizeof *t + (nr * 10 + 3 + (size_t)t->ret_begin[nr]) * sizeof(int32_t);
    *out = t;
    return XGR_OK;
}

void xgr_follow_init(xgr_follow *fo, const xgr_fsm *f) {
    memset(fo, 0, sizeof *fo);
    fo->f = f;
}

/* The scratch's first-step cache: sharpening a loop entry asks a follow check of one rule
 * for thousands of token suffixes in a row, most starting with the same byte (`"` after a
 * string's characters); each used to close the rule's return points and step that byte
 * again: the set after `"` holds every return point of the string's callers (200-300
 * states in a wide object). Kept for the last rule asked, per first byte: the closed set
 * after it (pool[off[b] .. off[b] + len[b]); off -1: not yet) and the bytes that can step
 * from that set (second[b]). Exact: the set is what xgr_follow_possible computes for that
 * byte, a pure function of the grammar's automaton, the tables and the rule. */
struct xgr_follow_step {
    const xgr_follow_tables *t;
    int32_t rule;
    int32_t off[256], len[256];
    uint32_t second[256][8];
    int32_t *pool;
    size_t n, cap;
};

/* Cached sets take at most this many state ids (1 MiB) per scratch; past it a byte is
 * not kept and its queries step from the start set as before. */
#define XGR_FOLLOW_STEP_POOL_MAX ((size_t)1 << 18)

void xgr_follow_free(xgr_follow *fo) {
    if (fo->step) free(fo->step->pool);
    free(fo->step);
    free(fo->set_a);
    free(fo->set_b);
    free(fo->stamp);
    const xgr_fsm *f = fo->f;
    memset(fo, 0, sizeof *fo);
    fo->f = f;
}

static int scratch_alloc(xgr_follow *fo) {
    size_t ns = (size_t)fo->f->n_states;
    fo->set_a = xgr_malloc((ns + 1) * sizeof *fo->set_a);
    fo->set_b = xgr_malloc((ns + 1) * sizeof *fo->set_b);
    fo->stamp = xgr_calloc(ns + 1, sizeof *fo->stamp);
    if (!fo->set_a || !fo->set_b || !fo->stamp) {
        xgr_follow_free(fo);
        return XGR_ERR_NOMEM;
    }
    fo->gen = 1;
    return XGR_OK;
}

static inline void add_state(xgr_follow *fo, int32_t *set, int32_t *n, int32_t s) {
    if (fo->stamp[s] == fo->gen) return;
    fo->stamp[s] = fo->gen;
    set[(*n)++] = s;
}

static inline void add_returns(xgr_follow *fo, int32_t *set, int32_t *n, int32_t rule) {
    for (int32_t k = fo->t->ret_begin[rule]; k < fo->t->ret_begin[rule + 1]; k++)
        add_state(fo, set, n, fo->t->ret[k]);
}

/* Closes set[0..*n) under prediction, empty rules and stack-free returns. */
static void close_set(xgr_follow *fo, int32_t *set, int32_t *n) {
    const xgr_fsm *f = fo->f;
    for (int32_t j = 0; j < *n; j++) {
        int32_t s = set[j], r = f->state_rule[s];
        if (f->rule_kind[r] == XGR_RULE_REPEAT || f->final[s]) add_returns(fo, set, n, r);
        for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++) {
            const xgr_edge *ed = &f->edges[e];
            if (ed->ref < 0) continue;
            add_state(fo, set, n, f->rule_start[ed->ref]);
            if (f->rule_nullable[ed->ref]) add_state(fo, set, n, ed->target);
        }
    }
}

static void next_gen(xgr_follow *fo) {
    if (++fo->gen == 0) {
        memset(fo->stamp, 0, (size_t)fo->f->n_states * sizeof *fo->stamp);
        fo->gen = 1;
    }
}

/* Steps cur[0..nc) over byte b into nxt (closed); returns its size. */
static int32_t step_set(xgr_follow *fo, const int32_t *cur, int32_t nc, uint8_t b, int32_t *nxt) {
    const xgr_fsm *f = fo->f;
    int32_t nn = 0;
    next_gen(fo);
    for (int32_t j = 0; j < nc; j++) {
        int32_t st = cur[j];
        for (int32_t e = f->edge_begin[st]; e < f->edge_begin[st + 1]; e++) {
            const xgr_edge *ed = &f->edges[e];
            if (ed->ref >= 0 || b < ed->lo) break;
            if (b <= ed->hi) {
                add_state(fo, nxt, &nn, ed->target);
                break;
            }
        }
    }
    if (nn) close_set(fo, nxt, &nn);
    return nn;
}

/* The closed start set of `rule` (its return points) into cur; returns its size. */
static int32_t start_set(xgr_follow *fo, int32_t rule, int32_t *cur) {
    int32_t nc = 0;
    next_gen(fo);
    add_returns(fo, cur, &nc, rule);
    close_set(fo, cur, &nc);
    return nc;
}

/* The step cache for (fo->t, rule), emptied when either changed; NULL without memory. */
static xgr_follow_step *step_for(xgr_follow *fo, int32_t rule) {
    xgr_follow_step *st = fo->step;
    if (!st) {
        if (!(st = fo->step = xgr_malloc(sizeof *st))) return NULL;
        st->pool = NULL;
        st->cap = 0;
        st->t = NULL;
    }
    if (st->t != fo->t || st->rule != rule) {
        st->t = fo->t;
        st->rule = rule;
        st->n = 0;
        for (int b = 0; b < 256; b++) st->off[b] = -1;
    }
    return st;
}

/* Keeps the closed set after byte b of `rule` in st (computed on first use, in set_b):
 * 0, or -1 when it could not be kept (no memory, or the pool is full). */
static int step_byte(xgr_follow *fo, xgr_follow_step *st, int32_t rule, uint8_t b) {
    if (st->off[b] >= 0) return 0;
    int32_t nc = start_set(fo, rule, fo->set_a);
    int32_t nn = step_set(fo, fo->set_a, nc, b, fo->set_b);
    if (st->n + (size_t)nn > XGR_FOLLOW_STEP_POOL_MAX) return -1;
    if (st->n + (size_t)nn > st->cap) {
        size_t cap = st->cap ? st->cap : 1024;
        while (cap < st->n + (size_t)nn) cap *= 2;
        int32_t *np = xgr_realloc(st->pool, cap * sizeof *np);
        if (!np) return -1;
        st->pool = np;
        st->cap = cap;
    }
    const xgr_fsm *f = fo->f;
    uint32_t *sec = st->second[b];
    memset(sec, 0, 8 * sizeof *sec);
    for (int32_t j = 0; j < nn; j++) {
        int32_t q = fo->set_b[j];
        st->pool[st->n + (size_t)j] = q;
        for (int32_t e = f->edge_begin[q]; e < f->edge_begin[q + 1]; e++) {
            const xgr_edge *ed = &f->edges[e];
            if (ed->ref >= 0) break; /* (byte edges first, as step_set reads them) */
            for (int x = ed->lo; x <= ed->hi; x++) sec[x >> 5] |= 1u << (x & 31);
        }
    }
    st->off[b] = (int32_t)st->n;
    st->len[b] = nn;
    st->n += (size_t)nn;
    return 0;
}

int xgr_follow_two_admit(xgr_follow *fo, int32_t rule, const uint8_t *s, size_t n) {
    if (!n) return 1;
    if (!fo->stamp && scratch_alloc(fo)) return 1;
    xgr_follow_step *st = step_for(fo, rule);
    if (!st || step_byte(fo, st, rule, s[0])) return 1;
    if (!st->len[s[0]]) return 0;
    return n < 2 || ((st->second[s[0]][s[1] >> 5] >> (s[1] & 31)) & 1);
}

int xgr_follow_possible(xgr_follow *fo, int32_t rule, const uint8_t *s, size_t n) {
    if (!fo->stamp && scratch_alloc(fo)) return XGR_ERR_NOMEM;
    int32_t *cur = fo->set_a, *nxt = fo->set_b, nc;
    size_t i = 0;
    xgr_follow_step *st = n ? step_for(fo, rule) : NULL;
    if (st && !step_byte(fo, st, rule, s[0])) { /* the first byte from the cache */
        nc = st->len[s[0]];
        if (!nc) return 0;
        if (n > 1 && !((st->second[s[0]][s[1] >> 5] >> (s[1] & 31)) & 1)) return 0;
        memcpy(cur, st->pool + st->off[s[0]], (size_t)nc * sizeof *cur);
        i = 1;
    } else {
        nc = start_set(fo, rule, cur);
    }
    for (; i < n; i++) {
        int32_t nn = step_set(fo, cur, nc, s[i], nxt);
        if (!nn) return 0;
        int32_t *t = cur;
        cur = nxt;
        nxt = t;
        nc = nn;
    }
    return 1;
}

/* The bytes that may begin a continuation after `rule` completes, into out[8]. */
static void first_bytes(xgr_follow *fo, int32_t rule, uint32_t out[8]) {
    const xgr_fsm *f = fo->f;
    int32_t *cur = fo->set_a, nc = 0;
    memset(out, 0, 8 * sizeof *out);
    next_gen(fo);
    add_returns(fo, cur, &nc, rule);
    close_set(fo, cur, &nc);
    for (int32_t j = 0; j < nc; j++)
        for (int32_t e = f->edge_begin[cur[j]]; e < f->edge_begin[cur[j] + 1]; e++) {
            const xgr_edge *ed = &f->edges[e];
            if (ed->ref >= 0) break; /* byte edges come first */
            for (int b = ed->lo; b <= ed->hi; b++) out[b >> 5] |= 1u << (b & 31);
        }
}

int xgr_follow_first_admits(xgr_follow *fo, int32_t rule, uint8_t b) {
    _Atomic uint32_t *w = fo->t->first + (size_t)rule * 9;
    if (!atomic_load_explicit(&w[8], memory_order_acquire)) {
        if (!fo->stamp && scratch_alloc(fo)) return 1;
        uint32_t bits[8];
        first_bytes(fo, rule, bits);
        for (int k = 0; k < 8; k++) atomic_store_explicit(&w[k], bits[k], memory_order_relaxed);
        atomic_store_explicit(&w[8], 1u, memory_order_release);
    }
    return (atomic_load_explicit(&w[b >> 5], memory_order_relaxed) >> (b & 31)) & 1;
}
