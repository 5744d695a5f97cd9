/* Tail memo (tail_memo.c): verdicts of token tails read from parser rows seen before, for
 * the matcher's exact checks. Internal header. */
#ifndef XGR_TAIL_MEMO_H
#define XGR_TAIL_MEMO_H

#include "../parse/earley.h"

/* Suffixes longer than this are neither looked up nor kept. */
#define XGR_TAIL_MAX_SUFFIX 24

typedef struct {
    XGR_VEC(xgr_item) items;   /* the distinct rows, flat (origin -1: the row itself) */
    XGR_VEC(uint32_t) row_off; /* row i: items[row_off[i] .. row_off[i + 1]) */
    XGR_VEC(uint64_t) row_hash;
    int32_t *row_tab; /* open addressing: row id + 1, 0 empty */
    size_t row_cap;
    struct xgr_tail_ent *ents; /* open addressing: row -1 empty */
    size_t ent_cap, n_ents;
    uint32_t gen; /* slots of another generation are empty (tail_memo.c) */
    XGR_VEC(uint8_t) bytes; /* the kept suffixes */
} xgr_tail_memo;

void xgr_tail_memo_free(xgr_tail_memo *t);
/* Forgets every row and verdict (keeps the memory). */
void xgr_tail_memo_clear(xgr_tail_memo *t);
/* Is the memo past its size cap? (the caller clears it between fills) */
int xgr_tail_memo_full(const xgr_tail_memo *t);
/* The id of parser row `r` as the memo knows it (added when new): its items that can still
 * scan or complete (a state with edges, or the root's), origins at or past `r` written as
 * -1; with `room`, the collapsed key: a repetition's counter at or above its minimum as -2,
 * and *room the smallest room (max - count) of those counters, INT32_MAX if none
 * (tail_memo.c tail_count: read and keep under it only tails shorter than *room). Rows
 * `stable` and before must never change while the memo lives (the matcher clears it on
 * rollback and reset); a row with an item whose origin lies between `stable` and `r` (a row
 * of the token being checked) gets -1, as does any row when memory runs out. */
int32_t xgr_tail_row(xgr_tail_memo *t, const xgr_parser *p, int32_t r, int32_t stable,
                     int32_t *room);
/* The verdict of bytes s[0..n) fed from a row of id `row`: 1 accepted, 0 rejected, -1
 * unknown. */
int xgr_tail_get(const xgr_tail_memo *t, int32_t row, const uint8_t *s, uint32_t n);
/* Keeps a verdict (n <= XGR_TAIL_MAX_SUFFIX); without memory, keeps nothing. */
void xgr_tail_put(xgr_tail_memo *t, int32_t row, const uint8_t *s, uint32_t n, int v);

#endif
