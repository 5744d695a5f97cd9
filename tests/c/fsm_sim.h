/* Reference simulator of lowered automata for the C tests (test_lower, test_tag_dispatch):
 * byte edges directly, ref edges by memoised recursion, REPEAT counters unrolled, on
 * strings of at most MAXLEN bytes. fsm_accepts returns 1/0, or -1 when recursion got too
 * deep to decide. Header-only so each test driver stays one translation unit. */
#ifndef XGR_TEST_FSM_SIM_H
#define XGR_TEST_FSM_SIM_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../csrc/lower/fsm.h"

#define MAXLEN 63
typedef struct {
    const xgr_fsm *f;
    const uint8_t *s;
    int n;
    uint64_t *memo;
    uint8_t *done;
    int err;
} fsim;

static uint64_t sim_rule(fsim *m, int32_t r, int pos, int depth) {
    const xgr_fsm *f = m->f;
    size_t key = (size_t)r * (MAXLEN + 1) + (size_t)pos;
    if (m->done[key]) return m->memo[key];
    if (depth > 400) {
        m->err = 1;
        return 0;
    }
    uint64_t res = 0;
    if (f->rule_kind[r] == XGR_RULE_REPEAT) {
        int32_t ch = f->repeat_child[r], mn = f->repeat_min[r], mx = f->repeat_max[r];
        uint64_t P = 1ULL << pos;
        if (mn == 0) res |= P;
        for (int k = 1; P && (mx < 0 || k <= mx) && k <= mn + MAXLEN + 2; k++) {
            uint64_t Q = 0;
            for (int p = 0; p <= m->n; p++)
                if (P >> p & 1) Q |= sim_rule(m, ch, p, depth + 1);
            if (k >= mn) res |= Q;
            P = Q;
        }
    } else {
        int32_t s0 = f->rule_start[r];
        int32_t s1 = r + 1 < f->n_rules ? f->rule_start[r + 1] : f->n_states;
        int32_t ns = s1 - s0;
        uint64_t *vis = calloc((size_t)ns, sizeof *vis);
        int32_t *qs = malloc(sizeof(int32_t) * (size_t)ns * (MAXLEN + 1));
        int *qp = malloc(sizeof(int) * (size_t)ns * (MAXLEN + 1));
        if (!vis || !qs || !qp) exit(2);
        size_t qh = 0, qt = 0;
        vis[0] |= 1ULL << pos;
        qs[qt] = s0, qp[qt++] = pos;
        while (qh < qt) {
            int32_t s = qs[qh];
            int p = qp[qh++];
            if (f->final[s]) res |= 1ULL << p;
            for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++) {
                const xgr_edge *ed = &f->edges[e];
                uint64_t ends;
                if (ed->ref < 0)
                    ends = (p < m->n && m->s[p] >= ed->lo && m->s[p] <= ed->hi) ? 1ULL << (p + 1) : 0;
                else
                    ends = sim_rule(m, ed->ref, p, depth + 1);
                int32_t t = ed->target - s0;
                uint64_t fresh = ends & ~vis[t];
                vis[t] |= fresh;
                for (int q = 0; q <= m->n; q++)
                    if (fresh >> q & 1) qs[qt] = ed->target, qp[qt++] = q;
            }
        }
        free(vis);
        free(qs);
        free(qp);
    }
    m->done[key] = 1;
    m->memo[key] = res;
    return res;
}

static int fsm_accepts(const xgr_fsm *f, const uint8_t *s, int n) {
    if (n > MAXLEN) {
        fprintf(stderr, "test string longer than %d bytes\n", MAXLEN);
        exit(2);
    }
    fsim m = {f, s, n, NULL, NULL, 0};
    size_t sz = (size_t)f->n_rules * (MAXLEN + 1);
    m.memo = calloc(sz, sizeof *m.memo);
    m.done = calloc(sz, 1);
    if (!m.memo || !m.done) exit(2);
    uint64_t r = sim_rule(&m, f->root, 0, 0);
    free(m.memo);
    free(m.done);
    if (m.err) return -1;
    return (int)(r >> n & 1);
}
static int fsm_accepts_str(const xgr_fsm *f, const char *s) {
    return fsm_accepts(f, (const uint8_t *)s, (int)strlen(s));
}

#endif
