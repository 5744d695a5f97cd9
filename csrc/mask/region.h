/* Loop regions (region.c): context-free entries of the loop states of reference-free
 * rules, shared by every grammar whose automaton holds the same loop, whatever surrounds
 * it. Also the few mask_cache.c pieces the region code builds entries with.
 * Internal header. */
#ifndef XGR_REGION_H
#define XGR_REGION_H

#include "compiled.h"

enum { XGR_V_ACCEPT = 0, XGR_V_REJECT = 1, XGR_V_UNCERTAIN = 2 };

/* mask_cache.c: a context-free entry from a classification of the whole sorted
 * vocabulary (the accepted sorted positions as bits, vocab.h set_words words; the
 * uncertain ones with their pop depths; the rest rejected), in the smallest of the three
 * plain forms. */
int xgr_mask_entry_from_bits(const struct xgr_vocab *v, const uint64_t *acc_bits,
                             const xgr_pop_list *pops, xgr_mask_entry **out);

/* The context-free entry of `state`, a state of a normal rule that lies on a loop of byte
 * edges (no reference, no final state on it: a JSON string's body, a whitespace run),
 * built from the loop's shared region entry (looked up in, or computed into, the
 * cross-grammar cache) plus this grammar's walk of the tokens that leave the loop: on the
 * rule's automaton, or with the Earley parser `p` (scratch) when the rule has references.
 * *out = NULL when the state is not on such a loop. Thread-safe as the rest of the cache. */
int xgr_region_raw_entry(xgr_compiled *c, xgr_parser *p, int32_t state, xgr_mask_entry **out);

#endif
