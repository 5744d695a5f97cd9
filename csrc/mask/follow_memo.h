/* The follow checks of a compiled grammar (follow_memo.c): its return-point tables
 * (follow.h), built by the first check of any thread, and a memo of their answers shared
 * by every entry build of the grammar (the vocabulary pass, sharpening, caller-context
 * entries).
 * Internal header. */
#ifndef XGR_FOLLOW_MEMO_H
#define XGR_FOLLOW_MEMO_H

#include "compiled.h"

/* Points fo at the grammar's return-point tables, building them on first use. */
int xgr_follow_memo_tables(xgr_compiled *c, xgr_follow *fo);

/* Could bytes s[0..n) follow a completion of `rule` somewhere in this grammar (stack-free
 * over-approximation)? 1 also when out of memory (the token stays open). */
int xgr_follow_memo(xgr_compiled *c, xgr_follow *fo, int32_t rule, const uint8_t *s,
                    uint32_t n);

#endif
