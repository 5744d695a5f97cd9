/* The per-state and per-rule tables of a compiled grammar that depend on its automata
 * alone (scan_tables.h). */
#include "scan_tables.h"

#include "../mask/compiled.h"

void xgr_scan_rules_init(const xgr_fsm *f, int32_t r0, int32_t r1, xgr_scan_tables *t) {
    const uint8_t *kind = f->rule_kind, *dispatch = f->rule_dispatch;
    uint8_t *restrict flat = t->flat, *restrict opaque = t->opaque;
    int32_t *restrict n_scan = t->n_scan;
    for (int32_t r = r0; r < r1; r++) {
        flat[r] = kind[r] == XGR_RULE_NORMAL;
        opaque[r] = kind[r] == XGR_RULE_NORMAL && dispatch[r] ? XGR_OPAQUE_DISPATCH : 0;
        n_scan[r] = 0;
    }
}

/* One pass over the states (edges are grouped by source, byte edges first). The rules a
 * trigger hands over to (a tag group: the rest of each begin, then refs to the tag
 * contents) are unique to their request, and their references start after a literal:
 * they are opaque. */
void xgr_scan_states(const xgr_fsm *f, int32_t ns, xgr_scan_tables *t) {
    const xgr_edge *edges = f->edges;
    const int32_t *eb = f->edge_begin, *srule = f->state_rule;
    const uint8_t *kind = f->rule_kind, *dispatch = f->rule_dispatch;
    /* Through locals: a store to a uint8_t array may alias anything, which made every
     * iteration reload the struct's pointers. */
    uint8_t *restrict scannable = t->scannable, *restrict flat = t->flat,
                      *restrict opaque = t->opaque;
    int32_t *restrict ref_begin = t->ref_begin, *restrict scan_local = t->scan_local,
                      *restrict n_scan = t->n_scan;
    for (int32_t s = 0; s < ns; s++) {
        int32_t e = eb[s], end = eb[s + 1], r = srule[s];
        uint8_t sc = e < end && edges[e].ref < 0 ? XGR_SCAN_BYTE : 0;
        for (; e < end && edges[e].ref < 0; e++)
            if (edges[e].target == s) sc |= XGR_SCAN_LOOP;
        scannable[s] = sc;
        ref_begin[s] = e;
        scan_local[s] = sc ? n_scan[r]++ : -1;
        for (; e < end; e++) {
            int32_t ref = edges[e].ref;
            if (ref < 0) continue;
            int32_t tr = srule[edges[e].target];
            flat[tr] = 0;
            if (dispatch[tr] && kind[ref] == XGR_RULE_NORMAL && !opaque[ref])
                opaque[ref] = XGR_OPAQUE_GROUP;
        }
    }
}

int32_t xgr_scan_pairs(const xgr_fsm *f, int32_t ns, const xgr_scan_tables *t, int64_t base,
                       int32_t *edges_out, int32_t *first, int64_t *total) {
    const xgr_edge *edges = f->edges;
    const int32_t *eb = f->edge_begin, *rb = t->ref_begin, *n_scan = t->n_scan;
    int32_t k = 0;
    for (int32_t s = 0; s < ns; s++)
        for (int32_t e = rb[s]; e < eb[s + 1]; e++) {
            int32_t r = edges[e].ref;
            if (r < 0 || n_scan[r] == 0) continue;
            if (edges_out) {
                edges_out[k] = e;
                first[k] = (int32_t)base;
            }
            base += n_scan[r];
            k++;
        }
    *total = base;
    return k;
}
