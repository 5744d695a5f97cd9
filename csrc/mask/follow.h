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

#include <stdatomic.h>

#include "../lower/fsm.h"

/* Return points per rule (CSR): immutable once built, so one copy serves every thread
 * of a compiled grammar (compiled.h keeps it). */
typedef struct {
    int32_t *ret_begin;
    int32_t *ret;
    /* Per rule, filled on first use by any thread (xgr_follow_first_admits): 8 words of
     * the bytes that may begin a continuation, then a ready flag (the 9th word, stored
     * last with release order). The one mutable part: each word is only ever written
     * with the same value, atomically. */
    _Atomic uint32_t *first;
    size_t bytes;
} xgr_follow_tables;

/* A pass over every edge of the grammar (a few hundred µs for large tool grammars), so
 * it is built on the first query of a grammar, never per entry. */
int xgr_follow_tables_build(const xgr_fsm *f, xgr_follow_tables **out);
void xgr_follow_tables_free(xgr_follow_tables *t);

/* One rule's first step, kept by a thread's scratch (follow.c): per first byte, the closed
 * state set after it and the bytes that can step on from that set. */
typedef struct xgr_follow_step xgr_follow_step;

/* Query scratch for one thread: state sets sized to the automaton, allocated on the first
 * query and reused by every later one (the stamps never need clearing). */
typedef struct {
    const xgr_fsm *f;
    const xgr_follow_tables *t; /* set by the owner before a query */
    int32_t *set_a, *set_b;
    uint32_t *stamp;
    uint32_t gen;
    xgr_follow_step *step; /* NULL until the first query */
} xgr_follow;

void xgr_follow_init(xgr_follow *fo, const xgr_fsm *f);
void xgr_follow_free(xgr_follow *fo);
/* Could `s[0..n)` follow a completion of `rule` in some context? n >= 1, fo->t set.
 * Returns 1 / 0, or XGR_ERR_NOMEM when the scratch could not be allocated. */
int xgr_follow_possible(xgr_follow *fo, int32_t rule, const uint8_t *s, size_t n);
/* 0 when s[0..min(n, 2)) already dies after a completion of `rule` (then so does
 * xgr_follow_possible), 1 otherwise or when unknown (no memory). Answered from the
 * scratch's step of `rule` (built on the rule's first query), without a closure. */
int xgr_follow_two_admit(xgr_follow *fo, int32_t rule, const uint8_t *s, size_t n);
/* Could some continuation after a completion of `rule` begin with byte b? The first step
 * of xgr_follow_possible, answered from a per-rule byte set (most of a token's suffixes
 * die at their first byte). Returns 1 / 0; 1 when the scratch could not be allocated. */
int xgr_follow_first_admits(xgr_follow *fo, int32_t rule, uint8_t b);

#endif
