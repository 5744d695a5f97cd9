/* Compile preparation shared by compile.c and link.c (defined in prepare.c). Internal header. */
#ifndef XGR_COMPILE_PREPARE_H
#define XGR_COMPILE_PREPARE_H

#include "../lower/fsm.h"

/* Fills every option left at 0 (or below) with its default. */
void xgr_compile_fill_defaults(xgr_compile_options *o);
/* Every rule derives some finite string (else XGR_ERR_SEMANTIC naming the rule). */
int xgr_fsm_check_productive(const xgr_fsm *f);
/* The productive states: prod[s] = 1 when state s can derive a finite string (taking a
 * reference edge only when its rule is productive), else 0; prod has n_states bytes. When
 * every rule is productive these are exactly the states that can reach a final state of
 * their rule (a REPEAT rule's state counts as final): the image loader's "every state can
 * end" check. XGR_ERR_NOMEM, else XGR_OK. */
int xgr_fsm_productive_states(const xgr_fsm *f, uint8_t *prod);
/* The sorted, distinct token ids the markers in g's literals name, plus `extra`. */
int xgr_grammar_token_terms(const xgr_grammar *g, const int32_t *extra, int32_t n_extra,
                            int32_t **out, int32_t *n_out);

#endif
