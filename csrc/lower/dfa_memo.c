/* Process-wide memo of per-rule determinisations (see lower_internal.h, lw_dfa_memo).
 *
 * A request's tool set changes, but each tool's argument schema lowers to the same rule
 * NFAs every time, up to the ids of the rules they reference. The memo keys a rule by
 * its NFA with references renumbered in order of first appearance, so the subset
 * construction and minimisation run once per distinct rule, not once per request. The
 * full key bytes are compared, so a hash collision can never return a wrong automaton.
 * One byte-budgeted LRU map (common/lru.h) under a mutex. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "../common/lru.h"
#include "lower_internal.h"

typedef struct mnode {
    xgr_lru_node node; /* node.link.hash: the key's hash */
    uint8_t *key;
    size_t key_len;
    int32_t raw_states; /* subset states before minimisation: the budget check on a hit */
    lw_dfa dfa;         /* references as local ids */
} mnode;

static void dfa_free_parts(lw_dfa *d) {
    XGR_VEC_FREE(d->final);
    XGR_VEC_FREE(d->ebeg);
    XGR_VEC_FREE(d->edges);
}

static void mnode_free(mnode *n) {
    dfa_free_parts(&n->dfa);
    free(n->key);
    free(n);
}

static void mnode_drop(xgr_lru *l, xgr_lru_node *n) {
    (void)l;
    mnode_free((mnode *)n);
}

static pthread_mutex_t m_lock = PTHREAD_MUTEX_INITIALIZER;
static xgr_lru m_map = XGR_LRU_INIT(1024, (size_t)32 << 20, mnode_drop);
static uint64_t m_hits, m_misses;

static int dfa_copy(lw_dfa *dst, const lw_dfa *src) {
    dst->n = src->n;
    dst->final.len = dst->ebeg.len = dst->edges.len = 0;
    if (XGR_VEC_RESERVE(dst->final, (size_t)src->n + 1) ||
        XGR_VEC_RESERVE(dst->ebeg, (size_t)src->n + 1) ||
        XGR_VEC_RESERVE(dst->edges, src->edges.len + 1))
        return XGR_ERR_NOMEM;
    /* (an empty part may have a NULL buffer, which memcpy must not see) */
    if (src->n) memcpy(dst->final.data, src->final.data, (size_t)src->n);
    memcpy(dst->ebeg.data, src->ebeg.data, ((size_t)src->n + 1) * sizeof(int32_t));
    if (src->edges.len) memcpy(dst->edges.data, src->edges.data, src->edges.len * sizeof(xgr_edge));
    dst->final.len = (size_t)src->n;
    dst->ebeg.len = (size_t)src->n + 1;
    dst->edges.len = src->edges.len;
    return XGR_OK;
}

static int key_eq(const mnode *n, uint64_t hash, const uint8_t *key, size_t key_len) {
    return n->node.link.hash == hash && n->key_len == key_len && memcmp(n->key, key, key_len) == 0;
}

/* Copies the memoised DFA of `key` into *out; 1 if found (and within budget). */
static int memo_get(uint64_t hash, const uint8_t *key, size_t key_len, int64_t budget,
                    lw_dfa *out, int *rc) {
    int found = 0;
    *rc = XGR_OK;
    pthread_mutex_lock(&m_lock);
    for (xgr_chain *c = xgr_lru_first(&m_map, hash); c; c = c->next) {
        mnode *n = (mnode *)c;
        if (!key_eq(n, hash, key, key_len)) continue;
        if (n->raw_states <= budget) {
            xgr_lru_touch(&m_map, &n->node);
            *rc = dfa_copy(out, &n->dfa);
            found = *rc == XGR_OK;
        }
        break;
    }
    if (found) m_hits++;
    else m_misses++;
    pthread_mutex_unlock(&m_lock);
    return found;
}

/* Offers a determinisation to the memo; failures to allocate only skip caching. */
static void memo_put(uint64_t hash, const uint8_t *key, size_t key_len, int32_t raw_states,
                     const lw_dfa *d) {
    size_t bytes = sizeof(mnode) + key_len + (size_t)d->n * 5 + 4 + d->edges.len * sizeof(xgr_edge);
    mnode *n = calloc(1, sizeof *n);
    uint8_t *k = malloc(key_len ? key_len : 1);
    if (!n || !k || dfa_copy(&n->dfa, d)) {
        if (n) dfa_free_parts(&n->dfa);
        free(n);
        free(k);
        return;
    }
    memcpy(k, key, key_len);
    n->node.link.hash = hash;
    n->node.bytes = bytes;
    n->key = k;
    n->key_len = key_len;
    n->raw_states = raw_states;
    pthread_mutex_lock(&m_lock);
    xgr_chain **pp = NULL;
    if (bytes <= m_map.budget && !xgr_lru_reserve(&m_map))
        for (pp = xgr_lru_slot(&m_map, hash); *pp && !key_eq((mnode *)*pp, hash, key, key_len);)
            pp = &(*pp)->next;
    if (!pp || *pp) { /* too big, no memory, or another thread inserted it first */
        pthread_mutex_unlock(&m_lock);
        mnode_free(n);
        return;
    }
    xgr_lru_insert(&m_map, pp, &n->node);
    pthread_mutex_unlock(&m_lock);
}

void lw_dfa_memo_set_budget(size_t bytes) {
    pthread_mutex_lock(&m_lock);
    xgr_lru_set_budget(&m_map, bytes);
    pthread_mutex_unlock(&m_lock);
}

void lw_dfa_memo_clear(void) {
    pthread_mutex_lock(&m_lock);
    xgr_lru_evict_to(&m_map, 0);
    m_hits = m_misses = 0;
    pthread_mutex_unlock(&m_lock);
}

void xgr_automaton_cache_get_stats(xgr_automaton_cache_stats *out) {
    if (!out) return;
    pthread_mutex_lock(&m_lock);
    out->hits = m_hits;
    out->misses = m_misses;
    out->entries = m_map.count;
    out->bytes = m_map.bytes;
    pthread_mutex_unlock(&m_lock);
}


/* Sorts each state's ref edges (they follow its byte edges) by rule id. */
static void sort_refs(lw_dfa *d) {
    for (int32_t s = 0; s < d->n; s++) {
        int32_t e0 = d->ebeg.data[s], e1 = d->ebeg.data[s + 1];
        while (e0 < e1 && d->edges.data[e0].ref < 0) e0++;
        for (int32_t i = e0 + 1; i < e1; i++) { /* few refs per state: insertion sort */
            xgr_edge x = d->edges.data[i];
            int32_t j = i - 1;
            while (j >= e0 && d->edges.data[j].ref > x.ref) {
                d->edges.data[j + 1] = d->edges.data[j];
                j--;
            }
            d->edges.data[j + 1] = x;
        }
    }
}

int lw_dfa_memo(lw_dfa_ws *ws, lw_nfa *nfa, int64_t budget, lw_dfa *scratch,
                const lw_dfa **out) {
    size_t m = nfa->edges.len, cap = 16;
    while (cap < m * 2 + 2) cap *= 2;
    int32_t *slot_key = xgr_malloc(cap * sizeof *slot_key), *slot_val = xgr_malloc(cap * sizeof *slot_val);
    XGR_VEC(int32_t) global = {0}; /* local ref id -> output rule id */
    xgr_keybuf key = {0};
    size_t renumbered = 0; /* edges [0, renumbered) carry local ids */
    int rc = XGR_OK;
    if (!slot_key || !slot_val) {
        rc = XGR_ERR_NOMEM;
        goto done;
    }
    for (size_t i = 0; i < cap; i++) slot_key[i] = -1;
    /* Renumber references in order of first appearance (edge order is deterministic). */
    for (size_t i = 0; i < m; i++) {
        lw_nedge *e = &nfa->edges.data[i];
        if (e->label < 0) continue;
        size_t k = xgr_mix64((uint64_t)e->label) & (cap - 1);
        while (slot_key[k] >= 0 && slot_key[k] != e->label) k = (k + 1) & (cap - 1);
        if (slot_key[k] < 0) {
            slot_key[k] = e->label;
            slot_val[k] = (int32_t)global.len;
            if (XGR_VEC_PUSH(global, e->label)) {
                rc = XGR_ERR_NOMEM;
                goto done;
            }
        }
        e->label = slot_val[k];
        renumbered = i + 1;
    }
    renumbered = m;
    /* The key: four header words, then four words per edge, written into one buffer. */
    if (XGR_VEC_RESERVE(key, 16 * (m + 1))) {
        rc = XGR_ERR_NOMEM;
        goto done;
    }
    {
        uint32_t hdr[4] = {(uint32_t)nfa->n_states, (uint32_t)nfa->start, (uint32_t)nfa->final,
                           (uint32_t)nfa->may_dead};
        uint8_t *kp = key.data;
        memcpy(kp, hdr, sizeof hdr);
        kp += sizeof hdr;
        for (size_t i = 0; i < m; i++, kp += 16) {
            const lw_nedge *e = &nfa->edges.data[i];
            uint32_t wv[4] = {(uint32_t)e->from, (uint32_t)e->to, (uint32_t)e->label,
                              (uint32_t)e->lo | (uint32_t)e->hi << 8};
            memcpy(kp, wv, sizeof wv);
        }
        key.len = 16 * (m + 1);
    }
    if (rc) goto done;
    /* Four independent multiply lanes: the key is compared in full on a hit, so the
     * hash only has to spread keys, and it must not cost more than the lookup saves. */
    uint64_t lane[4] = {0x6a09e667f3bcc909ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL,
                        0xa54ff53a5f1d36f1ULL};
    size_t i = 0;
    for (; i + 32 <= key.len; i += 32)
        for (int l = 0; l < 4; l++) {
            uint64_t w;
            memcpy(&w, key.data + i + 8 * l, 8);
            lane[l] = (lane[l] ^ w) * 0x9e3779b97f4a7c15ULL;
            lane[l] ^= lane[l] >> 31;
        }
    uint64_t h = xgr_hash_combine(xgr_hash_combine(lane[0], lane[1]),
                                  xgr_hash_combine(lane[2], lane[3]));
    for (; i < key.len; i++) h = xgr_hash_combine(h, key.data[i]);
    if (!memo_get(h, key.data, key.len, budget, scratch, &rc)) {
        if (rc) goto done;
        const lw_dfa *d;
        if ((rc = lw_nfa_to_dfa(ws, nfa, budget, &d))) goto done;
        memo_put(h, key.data, key.len, lw_dfa_ws_raw_states(ws), d);
        if ((rc = dfa_copy(scratch, d))) goto done;
    }
    for (size_t e = 0; e < scratch->edges.len; e++)
        if (scratch->edges.data[e].ref >= 0)
            scratch->edges.data[e].ref = global.data[scratch->edges.data[e].ref];
    sort_refs(scratch);
    *out = scratch;
done:
    /* The NFA goes back to output rule ids for any later use (a retry in safe mode). */
    for (size_t k = 0; k < renumbered; k++)
        if (nfa->edges.data[k].label >= 0)
            nfa->edges.data[k].label = global.data[nfa->edges.data[k].label];
    free(slot_key);
    free(slot_val);
    XGR_VEC_FREE(global);
    XGR_VEC_FREE(key);
    return rc;
}
