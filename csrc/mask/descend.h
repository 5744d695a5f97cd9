/* Sparse states: the context-free vocabulary pass by descent (descend.c).
 * Internal header. */
#ifndef XGR_DESCEND_H
#define XGR_DESCEND_H

#include "../lower/fsm.h"
#include "region.h"
#include "vocab.h"

/* Start states with byte edges on at most this many byte values take the descent;
 * wider ones (free text, a string body) the full pass, whose block-wise stay test
 * settles most of their tokens without a walk. */
#define XGR_DESCEND_ROOT_MAX 32
/* ... and whose successors have edges on at most this many. */
#define XGR_DESCEND_NEXT_MAX 64
/* In a rule with references, states this many byte edges or fewer from one take the pass. */
#define XGR_DESCEND_REF_NEAR 3

/* Per-depth arrays (a token's length + 2) up to this many items live on the stack (the
 * descent's, entry.c's length counts): a first visit on cold caches pays more for a
 * malloc than for the walk of a key state. */
#define XGR_DEPTHS_LOCAL 258

/* Pop flags of a state (walk.c pop[]): the rule can end here, or (in an opaque
 * rule) a reference starts here. A recorded pop depth with XGR_POP_REF_BIT set is a
 * reference start: no follow check applies to it. */
enum { XGR_POP_END = 1, XGR_POP_REF = 2 };
#define XGR_POP_REF_BIT 0x8000u

/* The pop flags of state q: final, and whether a reference edge leaves it (reference edges
 * come last in a state's row). */
static inline int xgr_state_pops(const xgr_fsm *f, int32_t q) {
    int32_t e1 = f->edge_begin[q + 1];
    return (f->final[q] ? XGR_POP_END : 0) |
           (e1 > f->edge_begin[q] && f->edges[e1 - 1].ref >= 0 ? XGR_POP_REF : 0);
}

/* Does `state` take the descent? (its byte edges cover few byte values) */
int xgr_descend_applies(const xgr_fsm *f, int32_t state);

/* Can `state` reach a state with a reference edge within `depth` byte edges? A hybrid
 * descent from such a state (a key's end before its value) nearly always stops, after
 * work the full pass then does again. */
int xgr_descend_ref_near(const xgr_fsm *f, int32_t state, int depth);

enum { XGR_REFCHK_EXACT = 1, XGR_REFCHK_WIDE = 2 };

/* xgr_descend's answer when a token reaches a reference edge of a `hybrid` walk. */
#define XGR_DESCEND_STOP (-1)

/* Classifies every sorted token of v from `state`, walking the state's rule alone (its
 * byte edges; a reference edge is a pop, as for a flat or opaque rule in walk.c).
 * `refchk`: a reference start counts as a pop only where the token's next byte can begin
 * the reference (xgr_ref_first), as for opaque rules; XGR_REFCHK_WIDE: in the widened set
 * (xgr_ref_first_widen), as for TagDispatch rules, whose entries are shared. `hybrid`: the rule's references are
 * entered instead (a rule with references, whose walk goes on in the Earley parser there):
 * returns XGR_DESCEND_STOP, with partial lists, as soon as a token goes on at a state with
 * one, and the caller classifies the state by the full pass instead (most key and
 * punctuation states of such rules die before their value's reference).
 *
 * Same verdicts as the full pass: *acc gets the accepted sorted positions, *pops the
 * (position, depth) pairs of the uncertain ones, both ascending; every other token is
 * rejected. Instead of visiting one token per distinct prefix of the vocabulary, it
 * descends the sorted order along the automaton: the tokens that continue on an edge are
 * found by binary search, so a key or punctuation state, which admits a few byte paths,
 * touches a few dozen tokens instead of thousands (the pass is memory-bound: each token
 * visited is a cache miss at 128k tokens). The lists are appended to; the caller frees
 * them. Thread-safe (reads only). */
int xgr_descend(const struct xgr_vocab *v, const xgr_fsm *f, int32_t state, int refchk,
                int hybrid, xgr_pop_list *acc, xgr_pop_list *pops);

#endif
