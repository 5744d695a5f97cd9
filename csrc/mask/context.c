/* ---- caller-context entries shared across grammars -----------------------------------
 * A pair slot's verdicts depend on the caller rule's closure (which contains the child)
 * and, for tokens that finish the caller too, on what may follow it in this grammar. The
 * shared part classifies the child state's *raw* uncertain tokens (grammar-independent)
 * with the caller on the stack and keeps the pop depths of those that leave the caller;
 * each grammar then applies its own follow automaton, as `sharpen` does for plain
 * entries. Key: the caller rule's closure key + (caller state, ref edge, child state)
 * positions within it. */
#include "context.h"

#include "descend.h"
#include "entry.h"
#include "follow_memo.h"
#include "global_cache.h"
#include "walk.h"

enum { V_ACCEPT = XGR_V_ACCEPT, V_REJECT = XGR_V_REJECT, V_UNCERTAIN = XGR_V_UNCERTAIN };
#define POP_REF_BIT XGR_POP_REF_BIT

/* walk.h's types under their short names */
typedef xgr_walk_token_list token_list;
typedef xgr_walk_out cl_out;
typedef xgr_pop_list pop_list;

/* Accepted ids (`ids`) and uncertain ids with pop depths, over `tl`; the rest of tl is
 * rejected. */
static int make_pair_entry(const token_list *tl, const pop_list *pops, const pop_list *acc,
                           xgr_mask_entry **out) {
    int32_t n_unc = xgr_entry_pop_tokens(pops);
    char *tail = NULL;
    xgr_mask_entry *e =
        xgr_entry_block((acc->len + 1) * sizeof *e->ids + xgr_entry_uncertain_bytes(pops, n_unc), &tail);
    if (!e) return XGR_ERR_NOMEM;
    atomic_init(&e->refcount, 1);
    e->form = XGR_MASK_ACCEPTED_LIST;
    e->n_ids = e->n_accepted = (int32_t)acc->len;
    e->ids = xgr_entry_block_take(&tail, (acc->len + 1) * sizeof *e->ids);
    xgr_entry_set_uncertain(e, pops, n_unc, tl->ids, &tail);
    for (size_t k = 0; k < acc->len; k++) e->ids[k] = tl->ids[acc->data[k]];
    e->bytes = sizeof *e + e->block;
    *out = e;
    return XGR_OK;
}

int xgr_context_shared_pair_entry(xgr_compiled *c, xgr_parser *p, xgr_follow *fo, int32_t slot,
                                  const xgr_rule_key *key, const xgr_mask_entry *raw,
                                  xgr_mask_entry **out) {
    const xgr_fsm *f = c->fsm;
    const struct xgr_vocab *v = c->vocab;
    int32_t child, caller;
    xgr_pair_slot(c, slot, &child, &caller);
    int32_t crule = f->state_rule[child], edge = -1;
    for (int32_t e = c->ref_begin[caller]; e < f->edge_begin[caller + 1]; e++)
        if (f->edges[e].ref == crule) edge = e - f->edge_begin[caller];
    int32_t pos[3] = {caller - f->rule_start[f->state_rule[caller]], edge,
                      child - f->rule_start[crule]};
    uint8_t *k = xgr_malloc(key->len + sizeof pos + 4);
    if (!k) return XGR_ERR_NOMEM;
    memcpy(k, key->bytes, key->len);
    memcpy(k + key->len, "PAIR", 4);
    memcpy(k + key->len + 4, pos, sizeof pos);
    size_t klen = key->len + 4 + sizeof pos;
    uint64_t h = xgr_hash_combine(xgr_hash_combine(key->hash, 0x50414952u),
                                  xgr_hash_combine(((uint64_t)(uint32_t)pos[0] << 32) | (uint32_t)pos[1],
                                                   (uint64_t)(uint32_t)pos[2]));
    int rc = XGR_OK;
    xgr_mask_entry *e = xgr_gcache_lookup(v->fingerprint, h, k, klen, -1);
    if (!e) {
        token_list tl = {v, raw->uncertain, raw->n_uncertain, NULL};
        uint8_t *verdict = xgr_malloc((size_t)tl.n + 1);
        pop_list pops = {0}, acc = {0};
        cl_out o = {verdict, &pops, &acc, NULL, NULL, NULL};
        rc = verdict ? xgr_walk_classify(c, p, fo, slot, &tl, &o, 0) : XGR_ERR_NOMEM;
        if (!rc) rc = make_pair_entry(&tl, &pops, &acc, &e);
        free(verdict);
        XGR_VEC_FREE(pops);
        XGR_VEC_FREE(acc);
        if (!rc) {
            xgr_mask_entry *shared = xgr_gcache_insert(v->fingerprint, h, k, klen, -1, e);
            if (shared) {
                xgr_mask_entry_release(e);
                e = shared;
            }
        }
    }
    free(k);
    *out = e;
    return rc;
}

/* This grammar's REFINED entry over `base` (the child's sharpened plain entry) from a
 * shared pair entry: its accepted tokens, and its uncertain ones whose bytes after a pop
 * could follow the caller rule here; every other token of base's uncertain list is
 * rejected (a token the pair accepts is always among them: the follow automaton admits
 * every real continuation). */
int xgr_context_refine_from_pair(xgr_compiled *c, xgr_follow *fo, int32_t caller_rule,
                                 const xgr_mask_entry *base, const xgr_mask_entry *pair,
                                 xgr_mask_entry **out) {
    const struct xgr_vocab *v = c->vocab;
    size_t rw = (size_t)v->row_words;
    uint32_t *acc_bits = xgr_calloc(2 * rw + 1, sizeof *acc_bits), *unc_bits = acc_bits + rw;
    uint8_t *verdict = xgr_malloc((size_t)base->n_uncertain + 1);
    int rc = XGR_OK;
    if (!acc_bits || !verdict) {
        rc = XGR_ERR_NOMEM;
        goto out;
    }
    for (int32_t i = 0; i < pair->n_ids; i++) acc_bits[pair->ids[i] >> 5] |= 1u << (pair->ids[i] & 31);
    for (int32_t i = 0; i < pair->n_uncertain; i++) {
        uint32_t len;
        const uint8_t *tok = xgr_vocab_token(v, pair->uncertain[i], &len);
        for (int32_t k = pair->pop_begin[i]; k < pair->pop_begin[i + 1]; k++) {
            uint32_t d = pair->pop_depth[k];
            if ((d & POP_REF_BIT) || xgr_follow_memo(c, fo, caller_rule, tok + d, len - d)) {
                unc_bits[pair->uncertain[i] >> 5] |= 1u << (pair->uncertain[i] & 31);
                break;
            }
        }
    }
    for (int32_t i = 0; i < base->n_uncertain; i++) {
        int32_t id = base->uncertain[i];
        verdict[i] = (acc_bits[id >> 5] >> (id & 31)) & 1   ? V_ACCEPT
                     : (unc_bits[id >> 5] >> (id & 31)) & 1 ? V_UNCERTAIN
                                                            : V_REJECT;
    }
    rc = xgr_entry_make_refined(v, base, verdict, out);
out:
    free(acc_bits);
    free(verdict);
    return rc;
}
