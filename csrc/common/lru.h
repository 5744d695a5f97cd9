/* A byte-budgeted least-recently-used map: a chained hash table whose items are also on a
 * recency list, evicted from the cold end while the bytes held exceed a budget. Both
 * process-wide caches of the core use it: the determinisation memo (compile/dfa_memo.c)
 * and the cross-grammar mask cache (mask/global_cache.c). Internal header.
 *
 * Ownership: items are the owner's structs with an xgr_lru_node as their FIRST member; the
 * map links them but never allocates or compares them. The owner gives `drop`, called for
 * an item leaving the map by eviction or removal (it frees the item or drops a reference).
 * Threading: none inside; the owner holds its own lock around every call (one mutex per
 * cache, a static struct behind it). Keys: the owner compares them; the map only buckets
 * by `node.link.hash`. */
#ifndef XGR_COMMON_LRU_H
#define XGR_COMMON_LRU_H

#include "util.h"

typedef struct xgr_lru_node {
    xgr_chain link; /* link.hash: the item's bucket hash (set by the owner before insert) */
    struct xgr_lru_node *prev, *next; /* recency list: prev is more recent */
    size_t bytes;                     /* what this item counts against the budget */
} xgr_lru_node;

typedef struct xgr_lru {
    xgr_chain **buckets;
    size_t nbuckets, first_buckets; /* first_buckets: a power of two, the initial table */
    size_t count, bytes, budget;    /* bytes may also hold owner-side extras (shared keys) */
    xgr_lru_node *head, *tail;      /* head = most recent */
    uint64_t evictions;
    void (*drop)(struct xgr_lru *lru, xgr_lru_node *node);
} xgr_lru;

/* A map with no table yet (made on the first insert), this budget and drop callback. */
#define XGR_LRU_INIT(first, budget_bytes, drop_fn) \
    {NULL, 0, (first), 0, 0, (budget_bytes), NULL, NULL, 0, (drop_fn)}

/* The first item of the chain where items of `hash` live (NULL: none, or no table yet),
 * for the owner's key comparison on lookups: `for (xgr_chain *c = xgr_lru_first(l, h); c;
 * c = c->next)`. */
xgr_chain *xgr_lru_first(const xgr_lru *l, uint64_t hash);
/* The chain head itself, for inserts: only after xgr_lru_reserve succeeded (the table
 * exists then). Walk `pp = &(*pp)->next` to the end or to an equal item. */
xgr_chain **xgr_lru_slot(xgr_lru *l, uint64_t hash);
/* Grows the table, if needed, so one more item keeps the load at most 1/2. 0, or -1
 * without memory (the map is unchanged; the owner skips caching). Call it BEFORE looking
 * up the slot an insert will use: growing moves chains. */
int xgr_lru_reserve(xgr_lru *l);
/* Links `n` (n->link.hash and n->bytes set) at the end of chain `slot` (as found by a
 * lookup after xgr_lru_reserve that stopped at *slot == NULL), makes it the most recent,
 * counts its bytes, then evicts cold items down to the budget (never `n` itself unless
 * it alone exceeds the budget: owners check `n->bytes <= l->budget` first). */
void xgr_lru_insert(xgr_lru *l, xgr_chain **slot, xgr_lru_node *n);
/* Makes `n` the most recent item. */
void xgr_lru_touch(xgr_lru *l, xgr_lru_node *n);
/* Takes `n` out of the map and hands it to drop(). */
void xgr_lru_remove(xgr_lru *l, xgr_lru_node *n);
/* Evicts from the cold end until l->bytes <= budget (counting evictions). */
void xgr_lru_evict_to(xgr_lru *l, size_t budget);
/* Sets the budget and evicts down to it. */
void xgr_lru_set_budget(xgr_lru *l, size_t budget);

#endif
