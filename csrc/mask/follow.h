/* Stack-free over-approximation of what may follow a rule (lookahead derivation).
 *
 * After rule R completes, the text continues at some return point of R: a state t with
 * an edge (q --R--> t) anywhere in the grammar. Forgetting which caller is on the stack
 * gives a regular over-approximation of every possible continuation: from a set of
 * states, scan bytes, predict referenced rules, and on completing any rule jump to all of
 * its return points. If a token's remaining bytes die in this automaton, no real parser
 * stack could accept them either, so the mask cache can reject the token instead of
 * leaving it uncertain. Internal header. */
#ifndef XGR_FOLLOW_H
#define XGR_FOLLOW_H

#include "../compile/fsm.h"

typedef struct {
    const xgr_fsm *f;
    int32_t *ret_begin; /* CSR per rule: return states */
    int32_t *ret;
    /* scratch for one thread */
    int32_t *set_a, *set_b;
    uint32_t *stamp;
    uint32_t gen;
} xgr_follow;

/* Cheap: the tables (a pass over every edge of the grammar, a few hundred µs for large
 * tool grammars) are built on the first query, since most mask entries never need one. */
int xgr_follow_init(xgr_follow *fo, const xgr_fsm *f);
void xgr_follow_free(xgr_follow *fo);
/* Could `s[0..n)` follow a completion of `rule` in some context? n >= 1. Returns 1 / 0,
 * or XGR_ERR_NOMEM when the tables could not be built. */
int xgr_follow_possible(xgr_follow *fo, int32_t rule, const uint8_t *s, size_t n);

#endif
