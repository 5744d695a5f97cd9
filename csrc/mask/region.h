/* Loop regions (region.c): context-free entries of the loop states of reference-free
 * rules, shared by every grammar whose automaton holds the same loop, whatever surrounds
 * it. (The region code builds its entries with entry.h.)
 * Internal header. */
#ifndef XGR_REGION_H
#define XGR_REGION_H

#include "compiled.h"

/* The context-free entry of `state`, a state of a normal rule that lies on a loop of byte
 * edges (no reference, no final state on it: a JSON string's body, a whitespace run),
 * built from the loop's shared region entry (looked up in, or computed into, the
 * cross-grammar cache) plus this grammar's walk of the tokens that leave the loop: on the
 * rule's automaton, or with the Earley parser `p` (scratch) when the rule has references.
 * *out = NULL when the state is not on such a loop. Thread-safe as the rest of the cache. */
int xgr_region_raw_entry(xgr_compiled *c, xgr_parser *p, int32_t state, xgr_mask_entry **out);

/* 1 when `state` lies on a loop of its rule (a strongly connected component of two states
 * or more, or a self-edge; references count as edges), 0 when not; a negative status on
 * failure. The components are computed once per rule and grammar. */
int xgr_region_on_loop(xgr_compiled *c, int32_t state);

#endif
