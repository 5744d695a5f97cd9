/* JSON Schema uniqueItems at run time, in the Earley parser (earley.h uniq).
 *
 * The JSON-Schema converter marks an array's rule `unique_scope` and the rule of each of
 * its elements `unique` (ir.h). When an element occurrence (rule, origin) completes in a
 * row, its bytes (the rows' history) are read as a JSON value and put in canonical form
 * (common/json_canon.h xgr_json_canonical_value: what json.dumps(json.loads(text),
 * separators=(",", ":")) gives, with numbers by decimal value, so "\u0061" and "a" are one
 * value, as are 1 and 1.0); each item waiting on the element in the origin row
 * is advanced only when its array occurrence, the nearest `unique_scope` occurrence above
 * it, holds no earlier element with that value. The values that passed are recorded per
 * row (xgr_uq_ev), as are the end of an array occurrence (origin -1) and a refused value
 * (origin -2, in a row that lives on through the element's other items), so rolling back is
 * truncation.
 *
 * An element occurrence may complete more than once (a number: "1", then "12"); an earlier
 * element's value is the last completion of its occurrence before the later element
 * starts. Only the parser of a matcher checks (xgr_parser_unique_on): the mask cache's
 * simulations start mid-rule without the history, so their entries accept a superset, and
 * the matcher decides the tokens that can complete an element exactly (matcher.c).
 * Internal header. */
#ifndef XGR_PARSE_UNIQUE_H
#define XGR_PARSE_UNIQUE_H

#include "earley.h"

/* Drops what a row that was not kept had recorded (the row under construction starts
 * empty). */
void xgr_uniq_row_reset(xgr_parser *p);

/* The canonical text of the element occurrence from row `origin` completing in the row
 * under construction (cur_row; its byte is p->cur_byte) into p->uq_tmp (*len bytes), and
 * its hash. A text json_canon cannot prove (a lone surrogate escape, a duplicate key) is
 * compared as written. */
int xgr_uniq_value(xgr_parser *p, int32_t origin, int32_t cur_row, size_t *len, uint64_t *hash);

/* The array occurrence of item y (an item of the origin row waiting on an element rule):
 * the nearest `unique_scope` occurrence (rule, origin) above it, found through the items
 * waiting on its rule (at most a few levels: the array's rule, or a repetition the
 * lowering made inside it). Returns 0 when there is none. */
int xgr_uniq_scope(const xgr_parser *p, xgr_item y, int32_t *srule, int32_t *sorig);

/* Does an earlier element of array (srule, sorig), one that started before row `origin`,
 * have the value in p->uq_tmp[0 .. len)? */
int xgr_uniq_seen(xgr_parser *p, int32_t srule, int32_t sorig, int32_t origin, size_t len,
                  uint64_t hash);

/* Records, in the row under construction, the value in uq_tmp[0 .. len) for the element
 * from `origin` of array (srule, sorig) (origin -1, len 0: the array ended), once. */
int xgr_uniq_note(xgr_parser *p, int32_t srule, int32_t sorig, int32_t origin, size_t len,
                  uint64_t hash);

/* Did the last row refuse an element's value (and live on: "1" may still become "12")? */
int xgr_uniq_refused_last(const xgr_parser *p);

/* Is some array occurrence open at the last row with at least one element recorded? A
 * token can only meet a duplicate by completing an element in such an array, or two
 * elements of one array within itself. */
int xgr_uniq_open(xgr_parser *p);

#endif
