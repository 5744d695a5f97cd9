/* Linking lowered fragments into a request's automata (link.c). Internal header. */
#ifndef XGR_LINK_H
#define XGR_LINK_H

#include <stdatomic.h>

#include "../lower/fsm.h"
#include "prepare.h"
#include "scan_tables.h"

struct xgr_fragment {
    atomic_int refcount;
    xgr_fsm *fsm;       /* root rule f->root, not nullable */
    int32_t *token_ids; /* markers in its literals (sorted, distinct) */
    int32_t n_token_ids;
    /* The compiled grammar's tables for the fragment alone (edge ids local), and its ref
     * edges with pair slots (pair_first from 0; pair_slots in all): a fragment never
     * references outside itself, so linking copies these with offsets. */
    xgr_scan_tables scan;
    int32_t *pair_edges;
    int32_t *pair_first;
    int32_t n_pairs;
    int64_t pair_slots;
    size_t memory;
};

/* Where a linked automaton's parts lie: the skeleton's rules, states and edges first,
 * then each fragment's in order (xgr_link appends them so). */
typedef struct {
    xgr_fragment *const *frags;
    size_t n;
    int32_t sk_rules, sk_states, sk_edges;
} xgr_link_layout;

/* The automata of g with stand-ins names[i] replaced by frags[i], and the token ids of
 * every marker in g and the fragments, and where the parts lie. opts has its defaults
 * filled in. */
int xgr_link(const xgr_grammar *g, const char *const *names, xgr_fragment *const *frags,
             size_t n, const xgr_compile_options *opts, int productive, xgr_fsm **fsm,
             int32_t **token_ids, int32_t *n_token_ids, xgr_link_layout *layout);

#endif
