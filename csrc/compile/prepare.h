/* Compile preparation shared by compile.c and link.c (defined in prepare.c). Internal header. */
#ifndef XGR_COMPILE_PREPARE_H
#define XGR_COMPILE_PREPARE_H

#include "../lower/fsm.h"

/* Fills every option left at 0 (or below) with its default. */
void xgr_compile_fill_defaults(xgr_compile_options *o);
/* Every rule derives some finite string (else XGR_ERR_SEMANTIC naming the rule). */
int xgr_fsm_check_productive(const xgr_fsm *f);
/* The sorted, distinct token ids the markers in g's literals name, plus `extra`. */
int xgr_grammar_token_terms(const xgr_grammar *g, const int32_t *extra, int32_t n_extra,
                            int32_t **out, int32_t *n_out);

#endif
