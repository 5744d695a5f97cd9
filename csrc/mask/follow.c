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

void xgr_follow_free(xgr_follow *fo) {
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

int xgr_follow_possible(xgr_follow *fo, int32_t rule, const uint8_t *s, size_t n) {
    if (!fo->stamp && scratch_alloc(fo)) return XGR_ERR_NOMEM;
    const xgr_fsm *f = fo->f;
    int32_t *cur = fo->set_a, *nxt = fo->set_b, nc = 0;
    next_gen(fo);
    add_returns(fo, cur, &nc, rule);
    close_set(fo, cur, &nc);
    for (size_t i = 0; i < n; i++) {
        int32_t nn = 0;
        next_gen(fo);
        for (int32_t j = 0; j < nc; j++) {
            int32_t st = cur[j];
            for (int32_t e = f->edge_begin[st]; e < f->edge_begin[st + 1]; e++) {
                const xgr_edge *ed = &f->edges[e];
                if (ed->ref >= 0 || s[i] < ed->lo) break;
                if (s[i] <= ed->hi) {
                    add_state(fo, nxt, &nn, ed->target);
                    break;
                }
            }
        }
        if (!nn) return 0;
        close_set(fo, nxt, &nn);
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
