/* The per-grammar memo of follow checks and the return-point tables they query. */
#include "follow_memo.h"

/* Memo of follow checks, per compiled grammar (compiled.h): tokens that leave a rule at
 * the same bytes (",", "\"}") share the verdict, those suffixes repeat across thousands of
 * tokens, and across every state of the rule, whose entries are built one at a time. The
 * suffixes point into the vocabulary, which the grammar keeps alive. */
static size_t fmemo_find(const xgr_follow_memo_slot *tab, size_t cap, uint64_t h, int32_t rule,
                         const uint8_t *s, uint32_t n) {
    for (size_t k = h & (cap - 1);; k = (k + 1) & (cap - 1))
        if (tab[k].val < 0 ||
            (tab[k].rule == rule && tab[k].n == n && memcmp(tab[k].s, s, n) == 0))
            return k;
}

static int fmemo_grow(xgr_compiled *c) {
    size_t cap = c->fmemo_cap ? c->fmemo_cap * 2 : 1024;
    xgr_follow_memo_slot *tab = xgr_malloc(cap * sizeof *tab);
    if (!tab) return -1;
    for (size_t k = 0; k < cap; k++) tab[k].val = -1;
    for (size_t k = 0; k < c->fmemo_cap; k++) {
        const xgr_follow_memo_slot *o = &c->fmemo[k];
        if (o->val >= 0) tab[fmemo_find(tab, cap, o->hash, o->rule, o->s, o->n)] = *o;
    }
    free(c->fmemo);
    atomic_fetch_add(&c->memory, (cap - c->fmemo_cap) * sizeof *tab);
    c->fmemo = tab;
    c->fmemo_cap = cap;
    return 0;
}

/* The grammar's return-point tables, built by the first query of any thread and published
 * with a compare-and-swap like the entries. */
int xgr_follow_memo_tables(xgr_compiled *c, xgr_follow *fo) {
    xgr_follow_tables *t = atomic_load_explicit(&c->follow, memory_order_acquire);
    if (!t) {
        int rc = xgr_follow_tables_build(c->fsm, &t);
        if (rc) return rc;
        xgr_follow_tables *expected = NULL;
        if (atomic_compare_exchange_strong(&c->follow, &expected, t)) {
            atomic_fetch_add(&c->memory, t->bytes);
        } else {
            xgr_follow_tables_free(t);
            t = expected;
        }
    }
    fo->t = t;
    return XGR_OK;
}

int xgr_follow_memo(xgr_compiled *c, xgr_follow *fo, int32_t rule, const uint8_t *s,
                    uint32_t n) {
    if (!fo->t && xgr_follow_memo_tables(c, fo)) return 1; /* out of memory: keep the token open */
    /* Most suffixes die at their first byte: no hashing, no lock. */
    if (n && !xgr_follow_first_admits(fo, rule, s[0])) return 0;
    /* Most of the rest die at their second byte (`",` past a string of a wide object's
     * property: the step after `"` is kept by the scratch). */
    if (n > 1 && !xgr_follow_two_admit(fo, rule, s, n)) return 0;
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)(uint32_t)rule;
    for (uint32_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ULL;
    h = xgr_mix64(h);
    int val = -1;
    pthread_mutex_lock(&c->fmemo_lock);
    if (c->fmemo_cap) {
        const xgr_follow_memo_slot *sl = &c->fmemo[fmemo_find(c->fmemo, c->fmemo_cap, h, rule, s, n)];
        val = sl->val;
    }
    pthread_mutex_unlock(&c->fmemo_lock);
    if (val >= 0) return val;
    val = xgr_follow_possible(fo, rule, s, n);
    if (val != 0 && val != 1) return 1; /* no scratch (out of memory): keep the token open */
    pthread_mutex_lock(&c->fmemo_lock);
    /* Bounded: past XGR_FOLLOW_MEMO_MAX slots a grammar just stops memoising. */
    if ((c->fmemo_len + 1) * 10 <= c->fmemo_cap * 7 ||
        (c->fmemo_cap < XGR_FOLLOW_MEMO_MAX && !fmemo_grow(c))) {
        xgr_follow_memo_slot *sl = &c->fmemo[fmemo_find(c->fmemo, c->fmemo_cap, h, rule, s, n)];
        if (sl->val < 0) {
            sl->s = s;
            sl->n = n;
            sl->rule = rule;
            sl->hash = h;
            sl->val = (int8_t)val;
            c->fmemo_len++;
        }
    }
    pthread_mutex_unlock(&c->fmemo_lock);
    return val;
}
