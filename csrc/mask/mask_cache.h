/* The mask cache's entry of a slot (mask_cache.c): built on first use with a thread's
 * scratch, then published in the grammar's slot for every thread.
 * Internal header. */
#ifndef XGR_MASK_CACHE_H
#define XGR_MASK_CACHE_H

#include "compiled.h"

/* What building entries needs besides the grammar, owned by one thread (a matcher, a
 * precompute call): a parser over the grammar's automata and the follow checks' state
 * sets, both sized to the automaton once and reused by every entry built. */
typedef struct {
    xgr_parser p;
    xgr_follow fo;
    /* the descent's accepted and uncertain lists, reused (emptied) by each entry built */
    xgr_pop_list dacc, dpops;
} xgr_mask_scratch;

int xgr_mask_scratch_init(xgr_mask_scratch *s, const xgr_compiled *c);
void xgr_mask_scratch_free(xgr_mask_scratch *s);

/* Returns the cache entry of `slot`, building it with `scratch` (for this grammar, owned
 * by the caller) when absent. *out is borrowed. */
int xgr_mask_entry_get(xgr_compiled *c, xgr_mask_scratch *scratch, int32_t slot,
                       const xgr_mask_entry **out);

/* Publishes e (owned) in `slot` unless one is there already: then e is freed and *out is
 * the published one, and it returns 1; XGR_OK when e was published; XGR_ERR_NOMEM (e
 * freed). */
int xgr_mask_slot_publish(xgr_compiled *c, int32_t slot, xgr_mask_entry *e,
                          const xgr_mask_entry **out);

/* Published entries with at most this many uncertain tokens carry their bytes (compiled.h
 * uoff / ubytes). */
#define XGR_UBYTES_MAX 1024

#endif
