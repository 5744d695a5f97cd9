/* Accessors of the compiled-grammar type (compiled.h) that the mask cache needs: they read
 * only the tables compile.c builds, so they live with the type, below the compile stage. */
#include "compiled.h"

void xgr_pair_slot(const xgr_compiled *c, int32_t slot, int32_t *state, int32_t *parent) {
    const xgr_fsm *f = c->fsm;
    int32_t k = slot - f->n_states, lo = 0, hi = c->n_pair_edges - 1;
    while (lo < hi) { /* the last edge whose first pair slot is <= k */
        int32_t mid = lo + (hi - lo + 1) / 2;
        if (c->pair_first[mid] <= k) lo = mid;
        else hi = mid - 1;
    }
    int32_t e = c->pair_edges[lo], j = k - c->pair_first[lo];
    int32_t s0 = 0, s1 = f->n_states - 1;
    while (s0 < s1) { /* the last state whose edges start at or before e: e's source */
        int32_t mid = s0 + (s1 - s0 + 1) / 2;
        if (f->edge_begin[mid] <= e) s0 = mid;
        else s1 = mid - 1;
    }
    *parent = s0;
    int32_t r = f->edges[e].ref, end = xgr_fsm_rule_end(f, r);
    *state = -1;
    for (int32_t s = f->rule_start[r]; s < end; s++)
        if (c->scan_local[s] == j) {
            *state = s;
            break;
        }
}
