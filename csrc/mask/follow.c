/* Stack-free follow automaton used to sharpen mask-cache verdicts (see follow.h). */
#include "follow.h"

void xgr_follow_free(xgr_follow *fo) {
    free(fo->ret_begin);
    free(fo->ret);
    free(fo->set_a);
    free(fo->set_b);
    free(fo->stamp);
    memset(fo, 0, sizeof *fo);
}

int xgr_follow_init(xgr_follow *fo, const xgr_fsm *f) {
    memset(fo, 0, sizeof *fo);
    fo->f = f;
    return XGR_OK;
}

/* The return-point table and scratch sets, on first use. */
static int follow_build(xgr_follow *fo) {
    const xgr_fsm *f = fo->f;
    size_t nr = (size_t)f->n_rules, ns = (size_t)f->n_states;
    fo->ret_begin = xgr_calloc(nr + 1, sizeof *fo->ret_begin);
    fo->set_a = xgr_malloc((ns + 1) * sizeof *fo->set_a);
    fo->set_b = xgr_malloc((ns + 1) * sizeof *fo->set_b);
    fo->stamp = xgr_calloc(ns + 1, sizeof *fo->stamp);
    if (!fo->ret_begin || !fo->set_a || !fo->set_b || !fo->stamp) goto oom;
    for (int32_t e = 0; e < f->n_edges; e++)
        if (f->edges[e].ref >= 0) fo->ret_begin[f->edges[e].ref + 1]++;
    for (size_t r = 0; r < nr; r++) fo->ret_begin[r + 1] += fo->ret_begin[r];
    fo->ret = xgr_malloc(((size_t)fo->ret_begin[nr] + 1) * sizeof *fo->ret);
    int32_t *fill = xgr_malloc((nr + 1) * sizeof *fill);
    if (!fo->ret || !fill) {
        free(fill);
        goto oom;
    }
    memcpy(fill, fo->ret_begin, nr * sizeof *fill);
    for (int32_t e = 0; e < f->n_edges; e++)
        if (f->edges[e].ref >= 0) fo->ret[fill[f->edges[e].ref]++] = f->edges[e].target;
    free(fill);
    fo->gen = 1;
    return XGR_OK;
oom:
    xgr_follow_free(fo);
    fo->f = f;
    return XGR_ERR_NOMEM;
}

static inline void add_state(xgr_follow *fo, int32_t *set, int32_t *n, int32_t s) {
    if (fo->stamp[s] == fo->gen) return;
    fo->stamp[s] = fo->gen;
    set[(*n)++] = s;
}

static inline void add_returns(xgr_follow *fo, int32_t *set, int32_t *n, int32_t rule) {
    for (int32_t k = fo->ret_begin[rule]; k < fo->ret_begin[rule + 1]; k++)
        add_state(fo, set, n, fo->ret[k]);
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
    if (!fo->ret && follow_build(fo)) return XGR_ERR_NOMEM;
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
