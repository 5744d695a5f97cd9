/* Covered items: scannable items of the parser's last row whose tokens another item's
 * mask-cache entry already decides (cover.c), so the matcher neither builds nor merges
 * their entries. Internal header. */
#ifndef XGR_COVER_H
#define XGR_COVER_H

#include "../mask/compiled.h"

/* Per-rule scratch of one matcher, allocated on first use. */
typedef struct {
    uint32_t *stamp; /* per rule: == gen when the row has a predictor of the rule */
    int32_t *last;   /* per rule: row index (from the row's first item) of its last predictor */
    uint8_t *ok;     /* per rule: every predictor may cover what it predicts */
    uint8_t *drop;   /* per item of the row: covered */
    size_t drop_cap;
    uint32_t gen;
} xgr_cover;

void xgr_cover_free(xgr_cover *cv);

/* Marks cv->drop[k - row_begin] for the items k of the parser's last row that are
 * covered: predicted in this row (origin = the row), by predictors that all come earlier
 * in the row, are scannable (so the matcher asks for their entries, or they are covered
 * in turn), and lie in ordinary rules that are neither opaque nor repetitions. Such a
 * predictor's entry simulates its rule with references followed, the predicted rule
 * included; a token the covered item could scan is accepted or kept uncertain there (and
 * then checked exactly), never rejected. Returns how many were marked (0 when the parser
 * has lazy rules or budgets: none then), or -1 when out of memory. */
int32_t xgr_cover_mark(const xgr_compiled *c, const xgr_parser *p, xgr_cover *cv);

/* Is every caller of item `it` (of rule `rule`) in its origin row a unit repetition
 * (bounded or not) whose body is `rule` as a loop table (mask/walk.c
 * xgr_walk_loop_child), with pair slots? Then
 * the matcher goes to those pair slots, loop entries (one table walk over the vocabulary
 * each, shared by every bound), without building the item's plain entry: a JSON string's
 * `char` alone ends after one character, so that entry would leave every longer token open
 * (~130k of them at 150k tokens: a vocabulary pass of ~15 ms on a first visit) and ask for
 * the pair slots anyway. */
int xgr_cover_loop_body(const xgr_compiled *c, const xgr_parser *p, xgr_item it, int32_t rule);

#endif
