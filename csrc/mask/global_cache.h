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
void xgr_mask_entry_retain(xgr_mask_entry *e);
void xgr_mask_entry_release(xgr_mask_entry *e);

#endif
