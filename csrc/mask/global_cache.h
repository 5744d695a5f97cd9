/* Process-wide cross-grammar cache of context-free mask entries (XGrammar-2 paper, §3.3).
 *
 * Key: (vocabulary fingerprint, canonical closure serialisation of the state's rule, the
 * state's index within its rule). Entries are reference counted: a compiled grammar keeps
 * what it uses even after eviction. All access goes through one mutex; the per-token path
 * never touches it (a compiled grammar publishes the entries it got in its own slots).
 * Eviction is least-recently-used under a byte budget (default 256 MiB).
 * Internal header. */
#ifndef XGR_GLOBAL_CACHE_H
#define XGR_GLOBAL_CACHE_H

#include "compiled.h"

/* Returns a retained entry or NULL. */
xgr_mask_entry *xgr_gcache_lookup(uint64_t vocab_fp, uint64_t hash, const uint8_t *key,
                                  size_t key_len, int32_t local_state);
/* Inserts `e` (the cache takes its own reference). If an equal key is present, returns
 * that entry retained instead and leaves `e` untouched; else returns `e` retained.
 * Returns NULL only on allocation failure (then `e` is simply not cached). */
xgr_mask_entry *xgr_gcache_insert(uint64_t vocab_fp, uint64_t hash, const uint8_t *key,
                                  size_t key_len, int32_t local_state, xgr_mask_entry *e);
/* The same; from_disk marks an entry loaded from an entry pack (never collected again). */
xgr_mask_entry *xgr_gcache_insert_ex(uint64_t vocab_fp, uint64_t hash, const uint8_t *key,
                                     size_t key_len, int32_t local_state, xgr_mask_entry *e,
                                     int from_disk);

/* One cached entry as xgr_gcache_collect hands it out: its key (held: the bytes stay put
 * until xgr_gcache_items_free; items of one rule share key_ref) and the entry, retained. */
typedef struct {
    void *key_ref;
    const uint8_t *key;
    size_t key_len;
    uint64_t hash;
    int32_t local_state;
    xgr_mask_entry *entry;
} xgr_gcache_item;
/* The entries of vocabulary vocab_fp inserted after insertion number after_seq, not loaded
 * from a pack, for which keep() holds (called under the cache's lock: it must only read
 * the entry); *last_seq = the latest insertion number. Free with xgr_gcache_items_free. */
int xgr_gcache_collect(uint64_t vocab_fp, uint64_t after_seq, int (*keep)(const xgr_mask_entry *),
                       xgr_gcache_item **out, size_t *n_out, uint64_t *last_seq);
void xgr_gcache_items_free(xgr_gcache_item *items, size_t n);
void xgr_mask_entry_retain(xgr_mask_entry *e);
void xgr_mask_entry_release(xgr_mask_entry *e);

#endif
