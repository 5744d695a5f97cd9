/* Byte-level Earley parser over per-rule automata (lower/fsm.h).
 *
 * An item is (state, origin, count): an automaton state of some rule, the row where
 * that rule was predicted, and for REPEAT rules the number of completed repetitions.
 * Rows are stored back to back in one item array (CSR by row_begin), so rolling back
 * is truncation. Origin XGR_ORIGIN_OUTER marks the item a mask-cache simulation starts
 * from: its rule completing means "the token leaves this rule" (a pop), which the
 * simulation records instead of following.
 *
 * Right recursion (`c ::= "a" c | ""`) is linear per byte through Leo items (earley.c):
 * a row leaves out the completed items of a deterministic reduction path, which can only
 * complete, and keeps its topmost item, so each row holds O(1) items for it instead of
 * one per level. Internal header. */
#ifndef XGR_EARLEY_H
#define XGR_EARLEY_H

#include "../lower/fsm.h"

#define XGR_ORIGIN_OUTER (-1)

typedef struct {
    int32_t state;
    int32_t origin;
    int32_t count;
    int32_t bud; /* budget context (parse/attrs.h): 0 = none, else an index into the
                  * parser's budget table: the tightest deadlines of the item's rule
                  * occurrence and of those it was predicted in */
} xgr_item;

/* Deadlines of a budget context, in absolute positions: the item lives while the row's
 * code-point count is <= cdl and its token count <= tdl (parse/attrs.c). */
typedef struct {
    int32_t cdl, tdl;
    int32_t jdl; /* deadline in decoded JSON-string characters (max_json_chars): the item
                  * lives while the row's count (row_jc) is <= jdl */
    /* The occurrence (rule, origin row) of a rule with a forced close (ir.h forced_body)
     * that this context was entered for, inherited by the contexts inside it: once that
     * occurrence has ended, every item of this context is dead (parse/attrs.h
     * xgr_item_ended). -1: none. */
    int32_t own_rule, own_origin;
    /* Effective deadlines (parse/need.h): an item lives only while the row's count plus
     * what the item still needs (xgr_fsm_need) is <= ceff (code points) and <= jeff
     * (decoded characters): the hard budgets of its occurrence and of those it was
     * predicted in, each less what the rules between still need once the item's rule has
     * returned. XGR_NO_DEADLINE: none (no hard budget, or below a forced close, which
     * ends where its budget is spent); below 0: nothing can finish. */
    int32_t ceff, jeff;
} xgr_budget;

/* A Leo item (the transitive item of Leo (1991), "A general context-free parsing
 * algorithm running in linear time on every LR(k) grammar"): in row j, completing `rule`
 * with origin j is a deterministic reduction path that ends at `top`. See earley.c. */
typedef struct {
    int32_t rule;
    xgr_item top;
} xgr_leo;

/* A uniqueItems element value that completed (parse/unique.h): the occurrence of an element
 * rule at row `origin`, in the array occurrence (scope_rule, scope_origin); its canonical
 * JSON text is uq_text[off .. off + len), `hash` a hash of it. */
typedef struct {
    int32_t scope_rule, scope_origin, origin;
    uint32_t off, len;
    uint64_t hash;
} xgr_uq_ev;

typedef struct {
    const xgr_fsm *fsm;
    XGR_VEC(xgr_item) items;
    XGR_VEC(int32_t) row_begin; /* n_rows + 1 entries */
    /* Leo items of each row (earley.c), CSR like the items: row r < leo_begin.len - 1
     * holds leo[leo_begin[r] .. leo_begin[r + 1]); later rows hold none (leo_begin is
     * extended only when a row has some, so most rows cost nothing). Truncated with the
     * rows; leo.len == leo_begin[leo_begin.len - 1]. */
    XGR_VEC(xgr_leo) leo;
    XGR_VEC(int32_t) leo_begin;
    XGR_VEC(xgr_leo) leo_cand; /* scratch: candidates (B, n) of the row under construction */
    int32_t max_row_items;
    int64_t max_work; /* work units per row built (max_step_work) */
    /* Dedup table for the row under construction; slots are valid when stamp == gen. */
    xgr_item *slot_item;
    uint32_t *slot_stamp;
    uint32_t *slot_again; /* == gen: the slot's item was added to the row more than once */
    uint32_t slot_cap; /* power of two */
    uint32_t gen;
    int popped; /* set when an OUTER item completed while building the last row */
    /* Rule attributes (fsm->rule_attrs; NULL: none). With budgets, every row records its
     * code-point count and token position (row_cp, row_tk: tcount * 2 + mid-token), its
     * count of decoded JSON-string characters (row_jc, row_js), and
     * items carry budget contexts (buds, append-only, entry 0 = none). With lazy rules,
     * each row lists the lazy occurrences (rule, origin) that completed in it (lazy_done,
     * CSR by lazy_begin, truncated with the rows). See parse/attrs.c. */
    const xgr_rule_attrs *attrs;
    int budgets, lazy;
    XGR_VEC(int32_t) row_cp;
    XGR_VEC(int32_t) row_tk;
    /* decoded JSON-string characters up to each row and the escape state after it
     * (parse/attrs.h xgr_json_step), for max_json_chars */
    XGR_VEC(int32_t) row_jc;
    XGR_VEC(uint8_t) row_js;
    XGR_VEC(int32_t) row_bud; /* buds.len once each row was built: rows only refer to
                               * contexts made up to them, so truncation drops the rest */
    XGR_VEC(xgr_budget) buds;
    XGR_VEC(xgr_leo) lazy_done; /* (rule, {origin}) pairs; only rule and top.origin used */
    XGR_VEC(int32_t) lazy_begin;
    /* With captures, each row lists the captured occurrences (rule, origin) that
     * completed in it (cap_done, CSR by cap_begin), and hist[j] is the byte that made row
     * j (hist[0] unused); both truncated with the rows. */
    int captures;
    XGR_VEC(xgr_leo) cap_done;
    XGR_VEC(int32_t) cap_begin;
    XGR_VEC(uint8_t) hist; /* (also kept for uniq) */
    /* uniqueItems (parse/unique.h), on only where xgr_parser_unique_on set uniq (a
     * matcher's own parser: the mask cache's simulations start mid-rule, without the
     * history, and accept a superset): each row lists the element values that completed in
     * it (uq_done, CSR by uq_begin, texts in uq_text), truncated with the rows. */
    int uniq;
    int uq_rejected; /* the row under construction refused an element's value */
    XGR_VEC(xgr_uq_ev) uq_done;
    XGR_VEC(int32_t) uq_begin;
    XGR_VEC(char) uq_text;
    XGR_VEC(char) uq_tmp; /* scratch: an element's bytes, then its canonical text */
    uint8_t cur_byte;
    int32_t cur_cp, cur_tk; /* of the row under construction */
    int32_t cur_jc;         /* the same for row_jc, row_js */
    uint8_t cur_js;
    int32_t next_tk;        /* row_tk for rows the next steps build (set by the matcher) */
    const int32_t *ref_begin; /* optional: per state, its first ref edge (skips byte edges) */
    const uint8_t *leo_rules; /* optional: xgr_leo_rules of fsm (NULL: every rule may) */
    /* Completion memo (earley.c complete_from): the items that completing a rule at a wide
     * origin row advances there, by (row, rule, the row's generation). A row never changes
     * once closed, and a row built again after a truncation gets a new generation, so an
     * entry is read only for the very row it was made from. row_gen: one per row, truncated
     * with the rows. */
    XGR_VEC(uint32_t) row_gen;
    uint32_t row_gen_next;
    struct xgr_cmemo_ent *cm_tab; /* open addressing, cm_cap slots (power of two) */
    size_t cm_cap, cm_n;
    XGR_VEC(xgr_item) cm_items; /* the entries' advanced items */
} xgr_parser;

int xgr_parser_init(xgr_parser *p, const xgr_fsm *fsm, int32_t max_row_items);
void xgr_parser_free(xgr_parser *p);
/* Marks in out[n_rules] the rules that may make Leo items (earley.c): those on a cycle of
 * tail references, a rule referenced right before one of its referrer's ends (edgeless
 * final states). A parser given this array (leo_rules) keeps right recursion linear with
 * no Leo bookkeeping for the other rules. */
int xgr_leo_rules(const xgr_fsm *f, uint8_t *out);
/* Clears all rows and makes row 0 the closure of `init`. */
int xgr_parser_start(xgr_parser *p, xgr_item init);
/* Mask-cache start with the caller on the stack: row 0 holds only `parent` (origin
 * OUTER, not closed, so it predicts nothing there) and row 1 is the closure of `child`
 * (origin 0). An OUTER REPEAT item ignores its bounds: it may always loop and always
 * end; the matcher only trusts such results when the real counter has headroom. */
int xgr_parser_start_in_caller(xgr_parser *p, xgr_item parent, xgr_item child);
/* Builds the next row by scanning `byte` from the last row. On success *alive says
 * whether the new row is non-empty; an empty row is not kept. */
int xgr_parser_step(xgr_parser *p, uint8_t byte, int *alive);
/* The same, with `extra` items added to the new row's kernel before its closure: the
 * union of two ways to read a token (runtime/token_class.c). Their origins must be rows
 * before the token; an item whose budget context was dropped since is left out. */
int xgr_parser_step_with(xgr_parser *p, uint8_t byte, const xgr_item *extra, size_t n_extra,
                         int *alive);
static inline int32_t xgr_parser_rows(const xgr_parser *p) {
    return (int32_t)p->row_begin.len - 1;
}
static inline void xgr_parser_truncate(xgr_parser *p, int32_t n_rows) {
    p->row_begin.len = (size_t)n_rows + 1;
    p->items.len = (size_t)p->row_begin.data[n_rows];
    if (p->row_gen.len > (size_t)n_rows) p->row_gen.len = (size_t)n_rows;
    if (p->row_cp.len > (size_t)n_rows) {
        p->row_cp.len = p->row_tk.len = p->row_bud.len = (size_t)n_rows;
        p->row_jc.len = p->row_js.len = (size_t)n_rows;
        if (n_rows > 0) p->buds.len = (size_t)p->row_bud.data[n_rows - 1];
    }
    if (p->lazy_begin.len > (size_t)n_rows + 1) {
        p->lazy_begin.len = (size_t)n_rows + 1;
        p->lazy_done.len = (size_t)p->lazy_begin.data[n_rows];
    }
    if (p->cap_begin.len > (size_t)n_rows + 1) {
        p->cap_begin.len = (size_t)n_rows + 1;
        p->cap_done.len = (size_t)p->cap_begin.data[n_rows];
    }
    if (p->hist.len > (size_t)n_rows) p->hist.len = (size_t)n_rows;
    if (p->uq_begin.len > (size_t)n_rows + 1) {
        p->uq_begin.len = (size_t)n_rows + 1;
        p->uq_done.len = (size_t)p->uq_begin.data[n_rows];
        p->uq_text.len = p->uq_done.len ? p->uq_done.data[p->uq_done.len - 1].off +
                                              p->uq_done.data[p->uq_done.len - 1].len
                                        : 0;
    }
    if (p->leo_begin.len > (size_t)n_rows + 1) {
        p->leo_begin.len = (size_t)n_rows + 1;
        p->leo.len = (size_t)p->leo_begin.data[n_rows];
    }
}
/* Is the rule of item `it` complete at this item (final state / enough repetitions)? */
int xgr_item_complete(const xgr_fsm *f, xgr_item it);
/* Does the last row contain a completed root item started at row 0? */
int xgr_parser_can_end(const xgr_parser *p);
/* Copies all rows of src into dst (dst initialised for the same fsm). */
int xgr_parser_copy(xgr_parser *dst, const xgr_parser *src);
/* 256-bit set of bytes some item of the last row can scan. */
void xgr_parser_next_bytes(const xgr_parser *p, uint32_t out[8]);

#endif
