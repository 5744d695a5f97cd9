/* Cross-grammar mask cache: one hash table + LRU list behind a mutex (see the header). */
#define _POSIX_C_SOURCE 200809L
#include "global_cache.h"

#include "../compile/lower_internal.h"

#include <pthread.h>

/* A closure key, held once however many of its rule's states have entries: a rule whose
 * closure holds a request's whole tool list (Harmony's message loop: tens of KB) has an
 * entry for every state a trace visits, and a copy of the key per entry cost a page fault
 * every 4 KB on each first visit. */
typedef struct gkey {
    xgr_chain link; /* link.hash: hash ^ vocab_fp */
    uint64_t vocab_fp, hash;
    size_t len;
    size_t refs; /* nodes pointing here */
    uint8_t bytes[];
} gkey;

typedef struct gnode {
    xgr_chain link; /* link.hash: slot_hash() */
    int32_t local_state;
    gkey *key;
    size_t bytes; /* the entry and the node; the key is counted once, in g_bytes */
    xgr_mask_entry *entry;
    struct gnode *lru_prev, *lru_next;
} gnode;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static xgr_chain **g_buckets;
static size_t g_nbuckets, g_count, g_bytes;
static size_t g_budget = (size_t)256 << 20;
static gnode *g_lru_head, *g_lru_tail; /* head = most recent */
static xgr_chain **g_kbuckets;
static size_t g_nkbuckets, g_nkeys;
static uint64_t g_hits, g_misses, g_inserts, g_evictions;

void xgr_mask_entry_retain(xgr_mask_entry *e) {
    if (e) atomic_fetch_add(&e->refcount, 1);
}

void xgr_mask_entry_release(xgr_mask_entry *e) {
    if (e && atomic_fetch_sub(&e->refcount, 1) == 1) xgr_mask_entry_free(e);
}

static void lru_unlink(gnode *n) {
    if (n->lru_prev) n->lru_prev->lru_next = n->lru_next;
    else g_lru_head = n->lru_next;
    if (n->lru_next) n->lru_next->lru_prev = n->lru_prev;
    else g_lru_tail = n->lru_prev;
    n->lru_prev = n->lru_next = NULL;
}

static void lru_push_front(gnode *n) {
    n->lru_prev = NULL;
    n->lru_next = g_lru_head;
    if (g_lru_head) g_lru_head->lru_prev = n;
    g_lru_head = n;
    if (!g_lru_tail) g_lru_tail = n;
}

static uint64_t slot_hash(uint64_t vocab_fp, uint64_t hash, int32_t local_state) {
    return hash ^ vocab_fp ^ (uint64_t)local_state * 0x9e3779b97f4a7c15ULL;
}

static xgr_chain **find_slot(uint64_t vocab_fp, uint64_t hash, const uint8_t *key, size_t key_len,
                             int32_t local_state) {
    xgr_chain **pp = &g_buckets[slot_hash(vocab_fp, hash, local_state) & (g_nbuckets - 1)];
    for (; *pp; pp = &(*pp)->next) {
        gnode *n = (gnode *)*pp;
        const gkey *k = n->key;
        if (n->local_state == local_state && k->hash == hash && k->vocab_fp == vocab_fp &&
            k->len == key_len && memcmp(k->bytes, key, key_len) == 0)
            break;
    }
    return pp;
}

static xgr_chain **find_key(uint64_t vocab_fp, uint64_t hash, const uint8_t *key, size_t key_len) {
    xgr_chain **pp = &g_kbuckets[(hash ^ vocab_fp) & (g_nkbuckets - 1)];
    for (; *pp; pp = &(*pp)->next) {
        gkey *k = (gkey *)*pp;
        if (k->hash == hash && k->vocab_fp == vocab_fp && k->len == key_len &&
            memcmp(k->bytes, key, key_len) == 0)
            break;
    }
    return pp;
}

/* The held copy of a key, with one more reference; NULL without memory. */
static gkey *key_acquire(uint64_t vocab_fp, uint64_t hash, const uint8_t *key, size_t key_len) {
    if ((g_nkeys + 1) * 2 > g_nkbuckets && xgr_chain_grow(&g_kbuckets, &g_nkbuckets, 256))
        return NULL;
    xgr_chain **pp = find_key(vocab_fp, hash, key, key_len);
    if (!*pp) {
        gkey *k = malloc(sizeof *k + (key_len ? key_len : 1));
        if (!k) return NULL;
        k->link.next = NULL;
        k->link.hash = hash ^ vocab_fp;
        k->vocab_fp = vocab_fp;
        k->hash = hash;
        k->len = key_len;
        k->refs = 0;
        memcpy(k->bytes, key, key_len);
        *pp = &k->link;
        g_nkeys++;
        g_bytes += sizeof *k + key_len;
    }
    gkey *k = (gkey *)*pp;
    k->refs++;
    return k;
}

static void key_release(gkey *k) {
    if (--k->refs) return;
    xgr_chain_unlink(g_kbuckets, g_nkbuckets, &k->link);
    g_nkeys--;
    g_bytes -= sizeof *k + k->len;
    free(k);
}

static void remove_node(gnode *n) {
    xgr_chain_unlink(g_buckets, g_nbuckets, &n->link);
    lru_unlink(n);
    g_count--;
    g_bytes -= n->bytes;
    xgr_mask_entry_release(n->entry);
    key_release(n->key);
    free(n);
}

static void evict_to(size_t budget) {
    while (g_bytes > budget && g_lru_tail) {
        remove_node(g_lru_tail);
        g_evictions++;
    }
}

xgr_mask_entry *xgr_gcache_lookup(uint64_t vocab_fp, uint64_t hash, const uint8_t *key,
                                  size_t key_len, int32_t local_state) {
    xgr_mask_entry *e = NULL;
    pthread_mutex_lock(&g_lock);
    if (g_nbuckets) {
        gnode *n = (gnode *)*find_slot(vocab_fp, hash, key, key_len, local_state);
        if (n) {
            lru_unlink(n);
            lru_push_front(n);
            e = n->entry;
            xgr_mask_entry_retain(e);
        }
    }
    if (e) g_hits++;
    else g_misses++;
    pthread_mutex_unlock(&g_lock);
    return e;
}

xgr_mask_entry *xgr_gcache_insert(uint64_t vocab_fp, uint64_t hash, const uint8_t *key,
                                  size_t key_len, int32_t local_state, xgr_mask_entry *e) {
    xgr_mask_entry *out = NULL;
    size_t bytes = e->bytes + key_len + sizeof(gnode);
    pthread_mutex_lock(&g_lock);
    if (bytes > g_budget) goto done; /* larger than the whole budget: do not cache */
    if ((g_count + 1) * 2 > g_nbuckets && xgr_chain_grow(&g_buckets, &g_nbuckets, 1024)) goto done;
    xgr_chain **pp = find_slot(vocab_fp, hash, key, key_len, local_state);
    if (*pp) { /* another grammar computed it first */
        out = ((gnode *)*pp)->entry;
        xgr_mask_entry_retain(out);
        goto done;
    }
    gnode *n = calloc(1, sizeof *n);
    gkey *k = n ? key_acquire(vocab_fp, hash, key, key_len) : NULL;
    if (!k) {
        free(n);
        goto done;
    }
    bytes -= key_len; /* the key is counted once, by key_acquire */
    n->link.hash = slot_hash(vocab_fp, hash, local_state);
    n->local_state = local_state;
    n->key = k;
    n->bytes = bytes;
    n->entry = e;
    xgr_mask_entry_retain(e); /* the cache's reference */
    *pp = &n->link;
    lru_push_front(n);
    g_count++;
    g_bytes += bytes;
    g_inserts++;
    evict_to(g_budget);
    out = e;
    xgr_mask_entry_retain(out);
done:
    pthread_mutex_unlock(&g_lock);
    return out;
}

void xgr_cache_get_stats(xgr_cache_stats *out) {
    if (!out) return;
    pthread_mutex_lock(&g_lock);
    out->hits = g_hits;
    out->misses = g_misses;
    out->inserts = g_inserts;
    out->evictions = g_evictions;
    out->entries = g_count;
    out->bytes = g_bytes;
    out->budget = g_budget;
    pthread_mutex_unlock(&g_lock);
}

void xgr_cache_set_budget(uint64_t bytes) {
    pthread_mutex_lock(&g_lock);
    g_budget = (size_t)bytes;
    evict_to(g_budget);
    pthread_mutex_unlock(&g_lock);
    /* The determinisation memo (compile/dfa_memo.c) gets an eighth of the budget, at
     * most 32 MiB: it only saves compile time, masks are the expensive part. */
    size_t memo = (size_t)(bytes / 8);
    lw_dfa_memo_set_budget(memo < ((size_t)32 << 20) ? memo : ((size_t)32 << 20));
}

void xgr_cache_clear(void) {
    pthread_mutex_lock(&g_lock);
    evict_to(0);
    g_hits = g_misses = g_inserts = g_evictions = 0;
    pthread_mutex_unlock(&g_lock);
    lw_dfa_memo_clear();
}
