/* Canonical serialisation of rule reference closures (see closure.h). */
#include "closure.h"

void xgr_ref_first(const xgr_fsm *f, int32_t state, uint32_t *seen, uint32_t stamp, int32_t *stack,
                   uint32_t out[8]) {
    memset(out, 0, 8 * sizeof *out);
    int32_t sp = 0;
    for (int32_t e = f->edge_begin[state]; e < f->edge_begin[state + 1]; e++) {
        const xgr_edge *ed = &f->edges[e];
        if (ed->ref < 0) continue;
        if (f->rule_nullable[ed->ref]) {
            memset(out, 0xff, 8 * sizeof *out);
            return;
        }
        int32_t s0 = f->rule_start[ed->ref];
        if (seen[s0] != stamp) seen[s0] = stamp, stack[sp++] = s0;
    }
    while (sp) {
        int32_t s = stack[--sp];
        xgr_fsm_byte_set(f, s, out);
        for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++) {
            const xgr_edge *ed = &f->edges[e];
            if (ed->ref < 0) continue;
            int32_t next[2] = {f->rule_start[ed->ref], f->rule_nullable[ed->ref] ? ed->target : -1};
            for (int k = 0; k < 2; k++)
                if (next[k] >= 0 && seen[next[k]] != stamp) seen[next[k]] = stamp, stack[sp++] = next[k];
        }
    }
}

void xgr_ref_first_widen(uint32_t out[8]) {
    /* [0-9] in word 1, [A-Z] and '_' in word 2, [a-z] in word 3 */
    static const uint32_t word[8] = {0, 0x03ff0000u, 0x87fffffeu, 0x07fffffeu, 0, 0, 0, 0};
    int any = 0;
    for (int k = 0; k < 8; k++) any |= (out[k] & word[k]) != 0;
    if (any)
        for (int k = 0; k < 8; k++) out[k] |= word[k];
}

int xgr_closure_key(const xgr_fsm *f, int32_t rule, int opaque, const uint8_t *kind,
                    uint8_t unique_kind, size_t max_bytes, uint8_t **out, size_t *out_len,
                    uint64_t *hash) {
    int32_t *local = xgr_malloc(((size_t)f->n_rules + 1) * sizeof *local);
    XGR_VEC(int32_t) order = {0};
    xgr_keybuf b = {0};
    int rc = XGR_OK;
    /* an opaque key records, per state with references, the bytes that can start them */
    uint32_t *seen = opaque ? xgr_calloc((size_t)f->n_states + 1, sizeof *seen) : NULL, stamp = 0;
    int32_t *stack = opaque ? xgr_malloc(((size_t)f->n_states + 1) * sizeof *stack) : NULL;
    if (!local || (opaque && (!seen || !stack))) {
        free(local);
        free(seen);
        free(stack);
        return XGR_ERR_NOMEM;
    }
    for (int32_t r = 0; r < f->n_rules; r++) local[r] = -1;
    local[rule] = 0;
    if (XGR_VEC_PUSH(order, rule)) rc = XGR_ERR_NOMEM;
    /* A plain key's size is known before it is written: per rule 4 words, a word per state
     * and two per edge. So a closure past max_bytes is refused after a walk over its
     * references instead of after writing max_bytes (a key rule of a wide optional chain
     * holds the rest of the chain: 440k instructions per key rule in Github_ultra---o46322,
     * whose keys were all refused). The same answer as the writing pass below: the key only
     * grows, rule by rule in this order, and that pass refuses once it is past max_bytes. */
    if (!rc && !opaque) {
        size_t total = 0;
        for (size_t q = 0; !rc && q < order.len && total <= max_bytes; q++) {
            int32_t r = order.data[q], s0 = f->rule_start[r], s1 = xgr_fsm_rule_end(f, r);
            int32_t e0 = f->edge_begin[s0], e1 = f->edge_begin[s1];
            total += 4 * (4 + (size_t)(s1 - s0) + 2 * (size_t)(e1 - e0));
            for (int32_t e = e0; e < e1 && !rc; e++) {
                int32_t t = f->edges[e].ref;
                if (t >= 0 && local[t] < 0) {
                    local[t] = (int32_t)order.len;
                    if (XGR_VEC_PUSH(order, t)) rc = XGR_ERR_NOMEM;
                }
            }
        }
        if (!rc && total > max_bytes)
            rc = xgr_fail(XGR_ERR_LIMIT, "rule closure larger than %zu bytes", max_bytes);
        for (size_t q = 1; q < order.len; q++) local[order.data[q]] = -1; /* (the pass below numbers them) */
        order.len = 1;
    }
    /* An opaque key stands for entries that never look inside references; the tag word
     * keeps it apart from every closure key. */
    if (!rc && opaque) rc = xgr_keybuf_put32(&b, 0x4f504151);
    /* Breadth-first over references in edge order gives every reachable rule a number
     * that depends only on the structure seen from `rule`. */
    for (size_t q = 0; !rc && q < order.len; q++) {
        int32_t r = order.data[q], s0 = f->rule_start[r], s1 = xgr_fsm_rule_end(f, r);
        rc = xgr_keybuf_put32(&b, f->rule_kind[r]);
        if (!rc) rc = xgr_keybuf_put32(&b, f->repeat_min[r]);
        if (!rc) rc = xgr_keybuf_put32(&b, f->repeat_max[r]);
        if (!rc) rc = xgr_keybuf_put32(&b, s1 - s0);
        for (int32_t s = s0; !rc && s < s1; s++) {
            rc = xgr_keybuf_put32(&b, f->final[s] | (f->edge_begin[s + 1] - f->edge_begin[s]) << 1);
            for (int32_t e = f->edge_begin[s]; !rc && e < f->edge_begin[s + 1]; e++) {
                const xgr_edge *ed = &f->edges[e];
                int32_t lab;
                if (ed->ref < 0) {
                    lab = -1 - (ed->lo | ed->hi << 8);
                } else if (opaque) {
                    lab = INT32_MIN;
                } else {
                    if (local[ed->ref] < 0) {
                        if (kind && kind[ed->ref] == unique_kind) {
                            rc = xgr_fail(XGR_ERR_LIMIT, "rule closure holds a unique rule");
                            break;
                        }
                        local[ed->ref] = (int32_t)order.len;
                        if (XGR_VEC_PUSH(order, ed->ref)) {
                            rc = XGR_ERR_NOMEM;
                            break;
                        }
                    }
                    lab = local[ed->ref];
                }
                rc = xgr_keybuf_put32(&b, lab);
                if (!rc) rc = xgr_keybuf_put32(&b, ed->target - s0);
            }
            int32_t e1 = f->edge_begin[s + 1];
            if (!rc && opaque && e1 > f->edge_begin[s] && f->edges[e1 - 1].ref >= 0) {
                uint32_t first[8];
                xgr_ref_first(f, s, seen, ++stamp, stack, first);
                xgr_ref_first_widen(first); /* only a TagDispatch rule's key is opaque */
                for (int k = 0; k < 8 && !rc; k++) rc = xgr_keybuf_put32(&b, first[k]);
            }
        }
        if (!rc && b.len > max_bytes)
            rc = xgr_fail(XGR_ERR_LIMIT, "rule closure larger than %zu bytes", max_bytes);
    }
    free(local);
    free(seen);
    free(stack);
    XGR_VEC_FREE(order);
    if (rc) {
        XGR_VEC_FREE(b);
        return rc;
    }
    *hash = xgr_hash_bytes(0x51ed270b27cfc1a5ULL, b.data, b.len);
    *out = b.data;
    *out_len = b.len;
    return XGR_OK;
}
