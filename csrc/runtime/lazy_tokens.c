#include "lazy_tokens.h"

#include <stdlib.h>
#include <string.h>

#include "../common/util.h"

static inline int has_byte(const uint32_t s[8], uint8_t b) { return (s[b >> 5] >> (b & 31)) & 1; }

static inline int picked(const xgr_fsm *f, int32_t r, int unique) {
    return unique ? f->rule_attrs[r].unique == XGR_UNIQUE_ITEM : f->rule_attrs[r].lazy;
}

int xgr_lazy_end_bytes(const xgr_fsm *f, int unique, uint32_t out[8]) {
    memset(out, 0, 8 * sizeof *out);
    if (!f->rule_attrs) return 0;
    for (int32_t r = 0; r < f->n_rules; r++)
        if (picked(f, r, unique) && f->rule_nullable[r]) {
            memset(out, 0xff, 8 * sizeof *out);
            return 1;
        }
    int32_t ns = f->n_states, nr = f->n_rules;
    uint8_t *ends = xgr_calloc(ns > 0 ? (size_t)ns : 1, 1);
    uint32_t *eb = xgr_calloc(nr > 0 ? (size_t)nr * 8 : 1, sizeof *eb);
    if (!ends || !eb) {
        free(ends);
        free(eb);
        return -1;
    }
    /* States from which their rule may end: final, or a nullable reference to one. A
     * REPEAT rule's one state counts whatever its counter (a superset). */
    for (int32_t s = 0; s < ns; s++)
        ends[s] = f->final[s] || f->rule_kind[f->state_rule[s]] == XGR_RULE_REPEAT;
    for (int changed = 1; changed;) {
        changed = 0;
        for (int32_t s = 0; s < ns; s++) {
            if (ends[s]) continue;
            for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1] && !ends[s]; e++) {
                const xgr_edge *ed = &f->edges[e];
                if (ed->ref >= 0 && f->rule_nullable[ed->ref] && ends[ed->target])
                    ends[s] = changed = 1;
            }
        }
    }
    /* Per rule, the bytes after which it may complete: byte edges into such a state, and
     * the end bytes of a rule referenced by an edge into one (to a fixpoint). */
    for (int changed = 1; changed;) {
        changed = 0;
        for (int32_t s = 0; s < ns; s++) {
            uint32_t *dst = eb + (size_t)f->state_rule[s] * 8;
            for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++) {
                const xgr_edge *ed = &f->edges[e];
                if (!ends[ed->target]) continue;
                if (ed->ref < 0) {
                    for (int b = ed->lo; b <= ed->hi; b++)
                        if (!has_byte(dst, (uint8_t)b)) {
                            dst[b >> 5] |= 1u << (b & 31);
                            changed = 1;
                        }
                } else {
                    const uint32_t *src = eb + (size_t)ed->ref * 8;
                    for (int w = 0; w < 8; w++)
                        if (src[w] & ~dst[w]) {
                            dst[w] |= src[w];
                            changed = 1;
                        }
                }
            }
        }
    }
    for (int32_t r = 0; r < nr; r++)
        if (picked(f, r, unique))
            for (int w = 0; w < 8; w++) out[w] |= eb[(size_t)r * 8 + w];
    free(ends);
    free(eb);
    return 0;
}

/* The sorted-order ids of the tokens holding at least min_count bytes of `ends` (every
 * byte when `all`), among their bytes before the last one only when before_last. */
static int pick_tokens(const struct xgr_vocab *v, const uint32_t ends[8], int all, int min_count,
                       int before_last, int32_t **out, int32_t *n) {
    int32_t *ids = xgr_malloc((v->n_sorted > 0 ? (size_t)v->n_sorted : 1) * sizeof *ids);
    if (!ids) return -1;
    int32_t k = 0;
    for (int32_t i = 0; i < v->n_sorted; i++) {
        uint32_t len;
        const uint8_t *tok = xgr_vocab_sorted_token(v, i, &len);
        uint32_t upto = before_last && len ? len - 1 : len;
        int c = 0;
        for (uint32_t j = 0; j < upto && c < min_count; j++) c += all || has_byte(ends, tok[j]);
        if (c >= min_count) ids[k++] = v->sorted[i];
    }
    *out = ids;
    *n = k;
    return 0;
}

int xgr_lazy_risky_tokens(const struct xgr_vocab *v, const uint32_t ends[8], int all,
                          int32_t **out, int32_t *n) {
    *out = NULL;
    *n = -1;
    return all ? 0 : pick_tokens(v, ends, 0, 1, 1, out, n);
}

int xgr_lazy_unique_tokens(const struct xgr_vocab *v, const uint32_t ends[8], int all, int min_count,
                           int32_t **out, int32_t *n) {
    *out = NULL;
    *n = 0;
    return pick_tokens(v, ends, all, min_count, 0, out, n);
}
