/* Compiling a grammar, whole or linked from tool fragments (defined in compile.c; the public
 * entry points are in xgr2.h). Internal header. */
#ifndef XGR_COMPILE_COMPILE_H
#define XGR_COMPILE_COMPILE_H

#include "../lower/fsm.h"

/* xgr_compile_linked; `productive`: g is known to derive a finite string from every rule
 * (a skeleton xgr_grammar_triggered_links built: literals and references to fragments,
 * which are checked when made), so the check is skipped. */
int xgr_compile_linked_ex(const xgr_grammar *g, const char *const *names,
                          xgr_fragment *const *frags, size_t n, const xgr_vocab *v,
                          const xgr_compile_options *opts, int productive, xgr_compiled **out);

/* A compiled grammar over automata built elsewhere (image.c reads them from an image):
 * takes ownership of f and token_ids (freed on failure too); no grammar is kept. Checks
 * opts' max_rules / max_fsm_states against f, then does what every compile does after
 * lowering. */
int xgr_compile_from_fsm(xgr_fsm *f, int32_t *token_ids, int32_t n_token_ids,
                         const xgr_vocab *v, const xgr_compile_options *opts,
                         xgr_compiled **out);

#endif
