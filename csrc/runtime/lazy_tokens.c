#include "lazy_tokens.h"

#include <stdlib.h>
#include <string.h>

#include "../common/util.h"

static inline int has_byte(const uint32_t s[8], uint8_t b) { return (s[b >> 5] >> (b & 31)) & 1; }

static inline int picked(const xgr_fsm *f, int32_t r, int unique) {
    return unique ? f->rule_attrs[r].unique == XGR_UNIQUE_ITEM : f->rule_attrs[r].lazy;
}

/* A rule's states from which it may end (ends[s] = 1): final ones (a REPEAT rule's one
 * state whatever its counter: a superset), and those with a nullable reference into one.
 * Edges stay inside their rule, so this is a fixpoint over the rule's own states. */
static void rule_ends(const xgr_fsm *f, const int32_t *states, int32_t n, uint8_t *ends) {
    for (int32_t i = 0; i < n; i++) {
        int32_t s = states[i];
        ends[s] = f->final[s] || f->rule_kind[f->state_rule[s]] == XGR_RULE_REPEAT;
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (int32_t i = 0; i < n; i++) {
            int32_t s = states[i];
            for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1] && !ends[s]; e++) {
                const xgr_edge *ed = &f->edges[e];
                if (ed->ref >= 0 && f->rule_nullable[ed->ref] && ends[ed->target]) ends[s] = changed = 1;
            }
        }
    }
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
    int32_t *begin = xgr_calloc((size_t)nr + 1, sizeof *begin);
    int32_t *states = xgr_malloc((ns > 0 ? (size_t)ns : 1) * sizeof *states);
    int32_t *used = xgr_malloc((nr > 0 ? (size_t)nr : 1) * sizeof *used); /* the rules that matter */
    uint8_t *in_used = xgr_calloc(nr > 0 ? (size_t)nr : 1, 1);
    int rc = -1;
    if (!ends || !eb || !begin || !states || !used || !in_used) goto out;
    /* Each rule's states (counting sort by owner). */
    for (int32_t s = 0; s < ns; s++) begin[f->state_rule[s] + 1]++;
    for (int32_t r = 0; r < nr; r++) begin[r + 1] += begin[r];
    {
        int32_t *fill = used; /* (borrowed as cursors until the rules below are listed) */
        memcpy(fill, begin, (size_t)nr * sizeof *fill);
        for (int32_t s = 0; s < ns; s++) states[fill[f->state_rule[s]]++] = s;
    }
    /* Only the picked rules and the rules they reach through a reference into an ending
     * state can contribute bytes: list them, each with its ending states. */
    int32_t n_used = 0;
    for (int32_t r = 0; r < nr; r++)
        if (picked(f, r, unique)) {
            in_used[r] = 1;
            used[n_used++] = r;
        }
    for (int32_t k = 0; k < n_used; k++) {
        int32_t r = used[k];
        rule_ends(f, states + begin[r], begin[r + 1] - begin[r], ends);
        for (int32_t i = begin[r]; i < begin[r + 1]; i++)
            for (int32_t e = f->edge_begin[states[i]]; e < f->edge_begin[states[i] + 1]; e++) {
                const xgr_edge *ed = &f->edges[e];
                if (ed->ref >= 0 && ends[ed->target] && !in_used[ed->ref]) {
                    in_used[ed->ref] = 1;
                    used[n_used++] = ed->ref;
                }
            }
    }
    /* Per rule, the bytes after which it may complete: byte edges into an ending state, and
     * the end bytes of a rule referenced by an edge into one (to a fixpoint). */
    for (int changed = 1; changed;) {
        changed = 0;
        for (int32_t k = 0; k < n_used; k++) {
            int32_t r = used[k];
            uint32_t *dst = eb + (size_t)r * 8;
            for (int32_t i = begin[r]; i < begin[r + 1]; i++)
                for (int32_t e = f->edge_begin[states[i]]; e < f->edge_begin[states[i] + 1]; e++) {
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
    rc = 0;
out:
    free(ends);
    free(eb);
    free(begin);
    free(states);
    free(used);
    free(in_used);
    return rc;
}

/* Whether the vocabulary's folded byte sets (vocab.h xgr_byte_fold) tell exactly which
 * tokens hold a byte of `ends`: ASCII bytes only, without NUL (shared with stray bytes) and
 * DEL (shared with whole multi-byte characters). JSON elements end at such bytes. */
static int exact_in_folds(const uint32_t ends[8]) {
    if ((ends[0] & 1u) || (ends[3] >> 31)) return 0;
    for (int w = 4; w < 8; w++)
        if (ends[w]) return 0;
    return 1;
}

static int count_bytes(const uint32_t ends[8], int all, const uint8_t *tok, uint32_t upto, int min_count) {
    int c = 0;
    for (uint32_t j = 0; j < upto && c < min_count; j++) c += all || has_byte(ends, tok[j]);
    return c;
}

/* The sorted-order ids of the tokens holding at least min_count bytes of `ends` (every
 * byte when `all`), among their bytes before the last one only when before_last. For an
 * ASCII set, the vocabulary's transposed byte sets (vocab.h byte_sets) list the tokens with
 * some byte of `ends` 64 at a time, and only they are read (a few of 151k for a JSON
 * element's end bytes, instead of every token's bytes). */
static int pick_tokens(const struct xgr_vocab *v, const uint32_t ends[8], int all, int min_count,
                       int before_last, int32_t **out, int32_t *n) {
    int32_t *ids = xgr_malloc((v->n_sorted > 0 ? (size_t)v->n_sorted : 1) * sizeof *ids);
    if (!ids) return -1;
    int32_t k = 0;
    if (!all && min_count >= 1 && v->byte_sets && exact_in_folds(ends)) {
        int32_t sw = v->set_words;
        const uint64_t *rows[0x7F];
        int nb = 0;
        for (int b = 1; b < 0x7F; b++)
            if (has_byte(ends, (uint8_t)b)) rows[nb++] = v->byte_sets + (size_t)b * (size_t)sw;
        for (int32_t w = 0; w < sw; w++) {
            uint64_t any = 0;
            for (int r = 0; r < nb; r++) any |= rows[r][w];
            for (; any; any &= any - 1) {
                int32_t i = w * 64 + xgr_ctz64(any);
                uint32_t len;
                const uint8_t *tok = xgr_vocab_sorted_token(v, i, &len);
                uint32_t upto = before_last && len ? len - 1 : len;
                if ((min_count == 1 && !before_last) || count_bytes(ends, 0, tok, upto, min_count) >= min_count)
                    ids[k++] = v->sorted[i];
            }
        }
    } else {
        for (int32_t i = 0; i < v->n_sorted; i++) {
            uint32_t len;
            const uint8_t *tok = xgr_vocab_sorted_token(v, i, &len);
            uint32_t upto = before_last && len ? len - 1 : len;
            if (count_bytes(ends, all, tok, upto, min_count) >= min_count) ids[k++] = v->sorted[i];
        }
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
