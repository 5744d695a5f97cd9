/* A compiled grammar: automata + vocabulary + the adaptive token-mask cache.
 *
 * The cache has one slot per automaton state that can scan a byte. A slot is filled
 * the first time a matcher needs it (or eagerly on request) and then never changes:
 * it is published with an atomic compare-and-swap, so readers take no lock and two
 * threads racing on one slot both compute it and one copy is dropped.
 * Internal header. */
#ifndef XGR_COMPILED_H
#define XGR_COMPILED_H

#include <stdatomic.h>

#include "../compile/fsm.h"
#include "../runtime/earley.h"
#include "vocab.h"

enum {
    XGR_MASK_ACCEPTED_LIST = 0, /* ids = accepted tokens */
    XGR_MASK_REJECTED_LIST = 1, /* ids = rejected tokens; every other text token that is
                                 * not uncertain is accepted */
    XGR_MASK_BITSET = 2         /* bits = accepted tokens (row_words words) */
};

typedef struct {
    int32_t form;
    int32_t n_ids;
    int32_t n_uncertain;
    int32_t n_accepted; /* statistics */
    int32_t *ids;       /* ACCEPTED_LIST / REJECTED_LIST */
    uint32_t *bits;     /* BITSET */
    int32_t *uncertain; /* tokens whose fate depends on the enclosing rules */
    size_t bytes;       /* memory held by this entry */
} xgr_mask_entry;

struct xgr_compiled {
    atomic_int refcount;
    xgr_grammar *grammar;
    xgr_vocab *vocab;
    xgr_fsm *fsm;
    xgr_compile_options opts;
    _Atomic(xgr_mask_entry *) *entries; /* n_states slots, NULL until built */
    /* Repetition context (seed 000 §3.6): for states of a rule C whose only referrer is
     * a REPEAT rule R, entries_rep simulates R's loop as well, so tokens spanning several
     * repetitions are decided by the cache. Valid only while R's counter has headroom
     * (max unbounded, or max - count > the longest token), which the matcher checks. */
    _Atomic(xgr_mask_entry *) *entries_rep;
    int32_t *repeat_parent; /* per rule: R as above, or -1 */
    uint8_t *scannable;                 /* n_states: state has a byte edge */
    atomic_size_t memory;
};

/* Returns the cache entry of `state`, building it with `scratch` (a parser over the
 * same automata, owned by the caller) when absent. *out is borrowed. */
int xgr_mask_entry_get(xgr_compiled *c, xgr_parser *scratch, int32_t state, int in_repeat,
                       const xgr_mask_entry **out);
void xgr_mask_entry_free(xgr_mask_entry *e);

#endif
