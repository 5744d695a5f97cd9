/* The vocabulary pass (walk.c): a walker steps token bytes through a rule's flat
 * next-state table, its edges, or the Earley parser, and xgr_walk_classify runs it over a
 * list of tokens, sharing the walk of common prefixes, to sort them into accepted,
 * rejected and uncertain (with the depths where the rule could end).
 * Internal header. */
#ifndef XGR_WALK_H
#define XGR_WALK_H

#include "compiled.h"

/* Tokens to classify: all sorted tokens (ids and pos NULL), a sorted subset of ids, or a
 * subset of sorted positions, ascending. Positions read the bytes in sorted order, where
 * neighbours share cache lines and the lcp array gives their common prefix; ids jump
 * through the vocabulary, a cache miss per token on a cold cache. */
typedef struct {
    const struct xgr_vocab *v;
    const int32_t *ids;
    int32_t n;
    const int32_t *pos;
} xgr_walk_token_list;

/* Can byte b start what a reference at `state` enters? (xgr_ref_first, cached for the last
 * state asked about; `seen` / `stack` are per-state scratch.) */
typedef struct {
    uint32_t *seen, stamp;
    int32_t *stack;
    int32_t state;
    uint32_t bits[8];
    int widen; /* xgr_ref_first_widen the sets: a TagDispatch rule's shared entries */
} xgr_walk_first_cache;

/* What a classification writes; every member is optional. */
typedef struct {
    uint8_t *verdict; /* by list position */
    xgr_pop_list *pops; /* context-free: (position, depth) of every pop that leaves bytes */
    xgr_pop_list *acc;  /* accepted list positions */
    /* The whole vocabulary only, instead of acc: the accepted sorted positions as bits
     * (vocab.h set_words words, zeroed). A table walk first accepts, a first-byte range
     * at a time, every token that stays put after its first byte (stay.h). */
    uint64_t *acc_bits;
    /* With pops: pops->len at the start of every run of tokens that die at the same byte
     * after the same prefix, so share their pops and every verdict that depends on bytes
     * up to there (sharpen.c sharpen_dispatch decides such runs at once). */
    xgr_pop_list *groups;
    /* Loop mode (the whole vocabulary, a pair slot whose caller is a unit repetition,
     * xgr_walk_loop_child): walk the child's loop table, and for every accepted sorted position
     * write how many repetitions it runs (1 + the final states it passes before its end). */
    uint16_t *units;
} xgr_walk_out;

/* The byte-class next-state table of reference-free (or opaque) rule r, built on first use
 * and published like the entries; `utf8`: close the leave sets over whole multi-byte
 * characters (stay.h). */
int xgr_walk_flat_table(xgr_compiled *c, int32_t r, int utf8, const xgr_flat_table **out);

/* The child rule of unit repetition `rep` when its body can be walked as a loop table,
 * else -1. */
int32_t xgr_walk_loop_child(const xgr_compiled *c, int32_t rep);

/* Does the vocabulary pass of plain slot `state` (a hybrid walk) leave the state's own
 * reference edges to the callees' items? True for a state of an ordinary rule with byte
 * edges and references whose callees start on byte edges only (after `{"` in an object
 * with named properties and additionalProperties: a listed name's first byte and the
 * key rule): the pass then walks the byte edges alone at the first byte instead of every
 * token through the parser, and the callee's predicted item, which the row always holds,
 * gets its own entry, shareable across grammars. cover.c must then not count the state as
 * covering what it predicts. */
int xgr_walk_refs_to_callees(const xgr_compiled *c, int32_t state);

int xgr_walk_first_cache_init(xgr_walk_first_cache *fc, const xgr_fsm *f);
void xgr_walk_first_cache_free(xgr_walk_first_cache *fc);
/* Can byte b start what a reference at `state` enters? */
int xgr_walk_first_cache_admits(xgr_walk_first_cache *fc, const xgr_fsm *f, int32_t state,
                                uint8_t b);

/* Classifies the tokens of `tl` for `slot` (a plain state, or a pair slot with its caller
 * on the stack) into `o`; `earley`: through the parser even for an opaque rule. */
int xgr_walk_classify(xgr_compiled *c, xgr_parser *p, xgr_follow *fo, int32_t slot,
                      const xgr_walk_token_list *tl, const xgr_walk_out *o, int earley);

#endif
