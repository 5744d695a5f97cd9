/* Adaptive token-mask cache: per scannable state, split the vocabulary into accepted,
 * rejected and uncertain tokens by simulating the state's rule alone over the sorted
 * vocabulary, reusing parser rows across shared prefixes and skipping subtrees. */
#include "compiled.h"
#include "follow.h"

enum { V_ACCEPT = 0, V_REJECT = 1, V_UNCERTAIN = 2 };

void xgr_mask_entry_free(xgr_mask_entry *e) {
    if (!e) return;
    free(e->ids);
    free(e->bits);
    free(e->uncertain);
    free(e);
}

/* Is some pop at depth e in [1, d] (pop[e] set) followed by bytes tok[e..len) that the
 * stack-free follow automaton of `rule` admits? Then the token is uncertain. */
static int pop_continues(xgr_follow *fo, int32_t rule, const uint8_t *pop, int32_t d,
                         const uint8_t *tok, uint32_t len) {
    for (int32_t e = 1; e <= d; e++)
        if (pop[e] && (uint32_t)e < len &&
            xgr_follow_possible(fo, rule, tok + e, (size_t)(len - (uint32_t)e)))
            return 1;
    return 0;
}

/* Classifies every sortable token for `slot` into verdict[] (indexed by sorted pos).
 * A pair slot simulates its state with the caller state on the stack (compiled.h). */
static int classify(const xgr_compiled *c, xgr_parser *p, xgr_follow *fo, int32_t slot,
                    uint8_t *verdict) {
    const struct xgr_vocab *v = c->vocab;
    int32_t ns = c->fsm->n_states;
    int32_t state = slot < ns ? slot : c->slot_state[slot - ns];
    int32_t pop_rule = c->fsm->state_rule[state];
    int rc;
    if (slot >= ns) {
        int32_t caller = c->slot_parent[slot - ns];
        pop_rule = c->fsm->state_rule[caller];
        xgr_item parent = {caller, XGR_ORIGIN_OUTER, 0};
        xgr_item child = {state, 0, 0};
        rc = xgr_parser_start_in_caller(p, parent, child);
    } else {
        xgr_item init = {state, XGR_ORIGIN_OUTER, 0};
        rc = xgr_parser_start(p, init);
    }
    if (rc) return rc;
    int32_t base = xgr_parser_rows(p) - 1; /* row index of token depth 0 */
    size_t depth_cap = (size_t)v->max_token_len + 2;
    uint8_t *pop = xgr_calloc(depth_cap, 1);    /* pop[e]: the rule can end after e bytes */
    int32_t *npop = xgr_calloc(depth_cap, sizeof *npop); /* pops in depths 1..e */
    if (!pop || !npop) {
        free(pop);
        free(npop);
        return XGR_ERR_NOMEM;
    }
    int32_t cur = 0; /* rows 0..cur are valid for the previous token's prefix */
    for (int32_t i = 0; i < v->n_sorted; i++) {
        uint32_t len;
        const uint8_t *tok = xgr_vocab_token(v, v->sorted[i], &len);
        int32_t d = v->lcp[i] < cur ? v->lcp[i] : cur;
        xgr_parser_truncate(p, base + d + 1);
        int dead = 0;
        while ((uint32_t)d < len) {
            int alive;
            if ((rc = xgr_parser_step(p, tok[d], &alive))) goto out;
            if (!alive) {
                dead = 1;
                break;
            }
            d++;
            pop[d] = p->popped ? 1 : 0;
            npop[d] = npop[d - 1] + pop[d];
        }
        cur = d;
        if (!dead) {
            verdict[i] = V_ACCEPT;
            continue;
        }
        /* Byte d has no transition: every following token sharing bytes 0..d dies at the
         * same place with the same pops; only their bytes after each pop differ. */
        for (int32_t j = i;; j++) {
            if (npop[d] == 0) {
                verdict[j] = V_REJECT;
            } else {
                uint32_t lj;
                const uint8_t *tj = xgr_vocab_token(v, v->sorted[j], &lj);
                verdict[j] = pop_continues(fo, pop_rule, pop, d, tj, lj) ? V_UNCERTAIN : V_REJECT;
            }
            if (j + 1 >= v->n_sorted || v->lcp[j + 1] <= d) {
                i = j;
                break;
            }
        }
    }
out:
    free(pop);
    free(npop);
    return rc;
}

static int build_entry(const xgr_compiled *c, xgr_parser *p, int32_t slot,
                       xgr_mask_entry **out) {
    const struct xgr_vocab *v = c->vocab;
    uint8_t *verdict = xgr_malloc((size_t)v->n_sorted + 1);
    if (!verdict) return XGR_ERR_NOMEM;
    xgr_follow fo;
    int rc = xgr_follow_init(&fo, c->fsm);
    if (rc) {
        free(verdict);
        return rc;
    }
    rc = classify(c, p, &fo, slot, verdict);
    xgr_follow_free(&fo);
    if (rc) {
        free(verdict);
        return rc;
    }
    int32_t n_acc = 0, n_rej = 0, n_unc = 0;
    for (int32_t i = 0; i < v->n_sorted; i++) {
        n_acc += verdict[i] == V_ACCEPT;
        n_rej += verdict[i] == V_REJECT;
        n_unc += verdict[i] == V_UNCERTAIN;
    }
    xgr_mask_entry *e = xgr_calloc(1, sizeof *e);
    if (!e) {
        free(verdict);
        return XGR_ERR_NOMEM;
    }
    size_t list_acc = (size_t)n_acc * 4, list_rej = (size_t)n_rej * 4,
           bitset = (size_t)v->row_words * 4;
    if (list_acc <= list_rej && list_acc <= bitset) {
        e->form = XGR_MASK_ACCEPTED_LIST;
        e->n_ids = n_acc;
    } else if (list_rej <= bitset) {
        e->form = XGR_MASK_REJECTED_LIST;
        e->n_ids = n_rej;
    } else {
        e->form = XGR_MASK_BITSET;
    }
    e->n_uncertain = n_unc;
    e->n_accepted = n_acc;
    e->uncertain = xgr_malloc(((size_t)n_unc + 1) * sizeof *e->uncertain);
    if (e->form == XGR_MASK_BITSET)
        e->bits = xgr_calloc((size_t)v->row_words, sizeof *e->bits);
    else
        e->ids = xgr_malloc(((size_t)e->n_ids + 1) * sizeof *e->ids);
    if (!e->uncertain || (!e->bits && !e->ids)) {
        free(verdict);
        xgr_mask_entry_free(e);
        return XGR_ERR_NOMEM;
    }
    int32_t ki = 0, ku = 0;
    uint8_t want = e->form == XGR_MASK_REJECTED_LIST ? V_REJECT : V_ACCEPT;
    for (int32_t i = 0; i < v->n_sorted; i++) {
        int32_t id = v->sorted[i];
        if (verdict[i] == V_UNCERTAIN) {
            e->uncertain[ku++] = id;
        } else if (verdict[i] == want) {
            if (e->form == XGR_MASK_BITSET)
                e->bits[id >> 5] |= 1u << (id & 31);
            else
                e->ids[ki++] = id;
        }
    }
    free(verdict);
    e->bytes = sizeof *e + ((size_t)n_unc + 1) * 4 +
               (e->form == XGR_MASK_BITSET ? bitset : ((size_t)e->n_ids + 1) * 4);
    *out = e;
    return XGR_OK;
}

int xgr_mask_entry_get(xgr_compiled *c, xgr_parser *scratch, int32_t slot_id,
                       const xgr_mask_entry **out) {
    _Atomic(xgr_mask_entry *) *slot = &c->entries[slot_id];
    xgr_mask_entry *e = atomic_load_explicit(slot, memory_order_acquire);
    if (e) {
        *out = e;
        return XGR_OK;
    }
    int rc = build_entry(c, scratch, slot_id, &e);
    if (rc) return rc;
    xgr_mask_entry *expected = NULL;
    if (atomic_compare_exchange_strong_explicit(slot, &expected, e,
                                                memory_order_acq_rel, memory_order_acquire)) {
        atomic_fetch_add(&c->memory, e->bytes);
        *out = e;
    } else {
        xgr_mask_entry_free(e);
        *out = expected;
    }
    return XGR_OK;
}
