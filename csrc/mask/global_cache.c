/* Cross-grammar mask cache: one byte-budgeted LRU map (common/lru.h) behind a mutex (see
 * the header), its closure keys held once in a second table. */
#define _POSIX_C_SOURCE 200809L
#include "global_cache.h"

#include "entry.h"
#include "../common/lru.h"
#include "../lower/lower_internal.h"

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
    xgr_lru_node node; /* node.link.hash: slot_hash(); node.bytes: the entry and the node
                        * (the key is counted once, by key_acquire) */
    int32_t local_state;
    int from_disk; /* loaded from an entry pack (entry_pack.c): never written again */
    uint64_t seq;  /* insertion number (g_seq), for xgr_gcache_collect */
    gkey *key;
    xgr_mask_entry *entry;
} gnode;

static void gnode_drop(xgr_lru *l, xgr_lru_node *n);

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
/* g_map.bytes also counts the shared keys (key_acquire / key_release) */
static xgr_lru g_map = XGR_LRU_INIT(1024, (size_t)256 << 20, gnode_drop);
static xgr_chain **g_kbuckets;
static size_t g_nkbuckets, g_nkeys;
static uint64_t g_hits, g_misses, g_inserts, g_seq;

void xgr_mask_entry_retain(xgr_mask_entry *e) {
    if (e) atomic_fetch_add(&e->refcount, 1);
}

void xgr_mask_entry_release(xgr_mask_entry *e) {
    if (e && atomic_fetch_sub(&e->refcount, 1) == 1) xgr_mask_entry_free(e);
}

static uint64_t slot_hash(uint64_t vocab_fp, uint64_t hash, int32_t local_state) {
    return hash ^ vocab_fp ^ (uint64_t)local_state * 0x9e3779b97f4a7c15ULL;
}

static int node_eq(const gnode *n, uint64_t vocab_fp, uint64_t hash, const uint8_t *key,
                   size_t key_len, int32_t local_state) {
    const gkey *k = n->key;
    return n->local_state == local_state && k->hash == hash && k->vocab_fp == vocab_fp &&
           k->len == key_len && memcmp(k->bytes, key, key_len) == 0;
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
        g_map.bytes += sizeof *k + key_len;
    }
    gkey *k = (gkey *)*pp;
    k->refs++;
    return k;
}

static void key_release(gkey *k) {
    if (--k->refs) return;
    xgr_chain_unlink(g_kbuckets, g_nkbuckets, &k->link);
    g_nkeys--;
    g_map.bytes -= sizeof *k + k->len;
    free(k);
}

static void gnode_drop(xgr_lru *l, xgr_lru_node *node) {
    (void)l;
    gnode *n = (gnode *)node;
    xgr_mask_entry_release(n->entry);
    key_release(n->key);
    free(n);
}

xgr_mask_entry *xgr_gcache_lookup(uint64_t vocab_fp, uint64_t hash, const uint8_t *key,
                                  size_t key_len, int32_t local_state) {
    xgr_mask_entry *e = NULL;
    pthread_mutex_lock(&g_lock);
    uint64_t h = slot_hash(vocab_fp, hash, local_state);
    for (xgr_chain *c = xgr_lru_first(&g_map, h); c; c = c->next) {
        gnode *n = (gnode *)c;
        if (!node_eq(n, vocab_fp, hash, key, key_len, local_state)) continue;
        xgr_lru_touch(&g_map, &n->node);
        e = n->entry;
        xgr_mask_entry_retain(e);
        break;
    }
    if (e) g_hits++;
    else g_misses++;
    pthread_mutex_unlock(&g_lock);
    return e;
}

xgr_mask_entry *xgr_gcache_insert(uint64_t vocab_fp, uint64_t hash, const uint8_t *key,
                                  size_t key_len, int32_t local_state, xgr_mask_entry *e) {
    return xgr_gcache_insert_ex(vocab_fp, hash, key, key_len, local_state, e, 0);
}

xgr_mask_entry *xgr_gcache_insert_ex(uint64_t vocab_fp, uint64_t hash, const uint8_t *key,
                                     size_t key_len, int32_t local_state, xgr_mask_entry *e,
                                     int from_disk) {
    xgr_mask_entry *out = NULL;
    size_t bytes = e->bytes + key_len + sizeof(gnode);
    pthread_mutex_lock(&g_lock);
    if (bytes > g_map.budget) goto done; /* larger than the whole budget: do not cache */
    if (xgr_lru_reserve(&g_map)) goto done;
    uint64_t h = slot_hash(vocab_fp, hash, local_state);
    xgr_chain **pp = xgr_lru_slot(&g_map, h);
    while (*pp && !node_eq((gnode *)*pp, vocab_fp, hash, key, key_len, local_state))
        pp = &(*pp)->next;
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
    n->node.link.hash = h;
    n->node.bytes = bytes;
    n->local_state = local_state;
    n->from_disk = from_disk;
    n->seq = ++g_seq;
    n->key = k;
    n->entry = e;
    xgr_mask_entry_retain(e); /* the cache's reference */
    xgr_lru_insert(&g_map, pp, &n->node);
    g_inserts++;
    out = e;
    xgr_mask_entry_retain(out);
done:
    pthread_mutex_unlock(&g_lock);
    return out;
}

int xgr_gcache_collect(uint64_t vocab_fp, uint64_t after_seq, int (*keep)(const xgr_mask_entry *),
                       xgr_gcache_item **out, size_t *n_out, uint64_t *last_seq) {
    *out = NULL;
    *n_out = 0;
    pthread_mutex_lock(&g_lock);
    *last_seq = g_seq;
    size_t n = 0, cap = 0;
    xgr_gcache_item *items = NULL;
    int rc = XGR_OK;
    for (xgr_lru_node *ln = g_map.head; ln; ln = ln->next) {
        gnode *g = (gnode *)ln;
        if (g->from_disk || g->seq <= after_seq || g->key->vocab_fp != vocab_fp || !keep(g->entry))
            continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            xgr_gcache_item *ni = realloc(items, nc * sizeof *ni);
            if (!ni) {
                rc = XGR_ERR_NOMEM;
                break;
            }
            items = ni;
            cap = nc;
        }
        xgr_gcache_item *it = &items[n];
        g->key->refs++; /* kept until xgr_gcache_items_free */
        it->key_ref = g->key;
        it->key = g->key->bytes;
        it->key_len = g->key->len;
        it->hash = g->key->hash;
        it->local_state = g->local_state;
        it->entry = g->entry;
        xgr_mask_entry_retain(it->entry);
        n++;
    }
    pthread_mutex_unlock(&g_lock);
    if (rc) {
        xgr_gcache_items_free(items, n); /* takes the lock again */
        return rc;
    }
    *out = items;
    *n_out = n;
    return XGR_OK;
}

void xgr_gcache_items_free(xgr_gcache_item *items, size_t n) {
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < n; i++) key_release(items[i].key_ref);
    pthread_mutex_unlock(&g_lock);
    for (size_t i = 0; i < n; i++) xgr_mask_entry_release(items[i].entry);
    free(items);
}

void xgr_cache_get_stats(xgr_cache_stats *out) {
    if (!out) return;
    pthread_mutex_lock(&g_lock);
    out->hits = g_hits;
    out->misses = g_misses;
    out->inserts = g_inserts;
    out->evictions = g_map.evictions;
    out->entries = g_map.count;
    out->bytes = g_map.bytes;
    out->budget = g_map.budget;
    pthread_mutex_unlock(&g_lock);
}

void xgr_cache_set_budget(uint64_t bytes) {
    pthread_mutex_lock(&g_lock);
    xgr_lru_set_budget(&g_map, (size_t)bytes);
    pthread_mutex_unlock(&g_lock);
    /* The determinisation memo (compile/dfa_memo.c) gets an eighth of the budget, at
     * most 32 MiB: it only saves compile time, masks are the expensive part. */
    size_t memo = (size_t)(bytes / 8);
    lw_dfa_memo_set_budget(memo < ((size_t)32 << 20) ? memo : ((size_t)32 << 20));
}

void xgr_cache_clear(void) {
    pthread_mutex_lock(&g_lock);
    xgr_lru_evict_to(&g_map, 0);
    g_hits = g_misses = g_inserts = g_map.evictions = 0;
    pthread_mutex_unlock(&g_lock);
    lw_dfa_memo_clear();
}
