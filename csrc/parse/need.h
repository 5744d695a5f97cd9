/* What an item still needs: the fewest characters from each automaton state to its rule's
 * end (lower/fsm.h xgr_fsm_need), so that a character budget (parse/attrs.h) drops an item
 * once it can no longer finish within the budget, instead of letting it run into a dead
 * end at the deadline.
 *
 * Code points (max_chars) are exact: a shortest path over the automata, a reference edge
 * costing the fewest code points of its rule (rules are recursive: a fixpoint), a byte
 * edge 0 where it may read a UTF-8 continuation byte, else 1. Decoded JSON-string
 * characters (max_json_chars) are exact over the product of states and the escape states
 * of xgr_json_step within a rule; across a reference the escape state the sub-rule ends in
 * is not tracked (the least over them is taken), a lower bound, exact where sub-rules end
 * outside an escape, as a JSON string's pieces do. A lower bound never drops an item that
 * can finish. A state of a forced close (ir.h forced_body) and an edgeless state need 0
 * (such a rule ends where its budget is spent). Internal header. */
#ifndef XGR_PARSE_NEED_H
#define XGR_PARSE_NEED_H

#include "../lower/fsm.h"

/* Sets f->need when some rule has max_chars or max_json_chars (else leaves it NULL). A
 * grammar too large to analyse within a work limit keeps NULL (budgets then bound the
 * characters only). */
int xgr_need_build(xgr_fsm *f);

#endif
