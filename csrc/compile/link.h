/* Linking lowered fragments into a request's automata (link.c). Internal header. */
#ifndef XGR_LINK_H
#define XGR_LINK_H

#include <stdatomic.h>

#include "fsm.h"

struct xgr_fragment {
    atomic_int refcount;
    xgr_fsm *fsm;       /* root rule f->root, not nullable */
    int32_t *token_ids; /* markers in its literals (sorted, distinct) */
    int32_t n_token_ids;
    size_t memory;
};

/* compile.c */
void xgr_compile_fill_defaults(xgr_compile_options *o);
/* Every rule derives some finite string (else XGR_ERR_SEMANTIC naming the rule). */
int xgr_fsm_check_productive(const xgr_fsm *f);
int xgr_grammar_token_terms(const xgr_grammar *g, const int32_t *extra, int32_t n_extra,
                            int32_t **out, int32_t *n_out);

/* The automata of g with stand-ins names[i] replaced by frags[i], and the token ids of
 * every marker in g and the fragments. opts has its defaults filled in. */
int xgr_link(const xgr_grammar *g, const char *const *names, xgr_fragment *const *frags,
             size_t n, const xgr_compile_options *opts, xgr_fsm **fsm, int32_t **token_ids,
             int32_t *n_token_ids);

#endif
