/* Earley row construction: scan one byte, then predict/complete to a fixpoint.
 *
 * Right recursion and Leo items. In `c ::= "a" c | ""` each "a" opens one more `c`
 * whose item waits, right before its end, for the inner `c`. After n bytes the last row
 * completes the innermost `c`, which completes its parent, and so on down to row 0: n
 * completed items per row, O(n) work per byte and O(n^2) in all. Leo (1991), "A general
 * context-free parsing algorithm running in linear time on every LR(k) grammar",
 * memoises such deterministic reduction paths as transitive items; this is that scheme
 * on per-rule automata:
 *
 *   - In row j, a rule B is *deterministic* when exactly one item y of the row waits on
 *     B (has a ref edge on B it may take) and y's advance n = (target, y.origin, y.count)
 *     is *penultimate*: a NORMAL rule's final state without edges, so n can do nothing
 *     but complete its rule A at y.origin. A Leo item (j, B) -> top records where that
 *     chain ends: top is the Leo item (y.origin, A)'s top when there is one (of a row
 *     before j, or of row j itself when y was predicted there: leo_close_row), else n.
 *   - Completing B with origin j, a row that has the Leo item (j, B) adds its top only,
 *     not the chain of completed items below it. Those items have no edges (they
 *     neither scan nor predict, are never a caller in collect_states or a mask-cache
 *     key) and their completions each advance exactly one item, the next of the chain,
 *     so the row is the same less edgeless completed items, which change nothing but the
 *     row's size. Work per row is O(1) for the chain, and so is the row's size.
 *   - A chain stops at a root item started in row 0 (xgr_parser_can_end looks for it)
 *     and at an item of origin XGR_ORIGIN_OUTER (a mask-cache pop): both stay in the row.
 *
 * Leo items are computed eagerly when a row is closed (from candidates met while
 * predicting, O(1) each: uniqueness is read off the dedup table, whose entry for B's
 * predicted start item was added once exactly when one item waits on B), stored per row
 * in CSR like the items, and truncated with the rows, so rollback stays truncation and a
 * row's Leo items depend only on the rows up to it. A missing Leo item is always safe
 * (the completion then walks the origin row as before); candidates are conservative.
 *
 * Only rules on a cycle of tail references (xgr_leo_rules) make candidates: a chain
 * longer than the grammar has rules repeats one, so it runs around such a cycle, and
 * every other rule appears at most once in it, costing one ordinary completion. That
 * keeps the work per byte bounded and leaves rows of grammars without right recursion
 * (JSON: every tail reference there ends in a bracket or a quote) to the plain parser. */
#include "attrs.h"
#include "unique.h"

#if defined(__GNUC__)
#define XGR_NOINLINE_WORK __attribute__((noinline, cold))
#else
#define XGR_NOINLINE_WORK
#endif

int xgr_parser_init(xgr_parser *p, const xgr_fsm *fsm, int32_t max_row_items) {
    memset(p, 0, sizeof *p);
    p->fsm = fsm;
    p->max_row_items = max_row_items > 0 ? max_row_items : 100000;
    p->max_work = 500000; /* callers with compile options set it to max_step_work */
    p->slot_cap = 64;
    p->slot_item = xgr_malloc(p->slot_cap * sizeof *p->slot_item);
    p->slot_stamp = xgr_calloc(p->slot_cap, sizeof *p->slot_stamp);
    p->slot_again = xgr_calloc(p->slot_cap, sizeof *p->slot_again);
    if (!p->slot_item || !p->slot_stamp || !p->slot_again) {
        xgr_parser_free(p);
        return XGR_ERR_NOMEM;
    }
    p->gen = 1;
    if (XGR_VEC_PUSH(p->row_begin, 0) || XGR_VEC_PUSH(p->leo_begin, 0) || xgr_attrs_init(p)) {
        xgr_parser_free(p);
        return XGR_ERR_NOMEM;
    }
    return XGR_OK;
}

void xgr_parser_free(xgr_parser *p) {
    XGR_VEC_FREE(p->items);
    XGR_VEC_FREE(p->row_begin);
    XGR_VEC_FREE(p->leo);
    XGR_VEC_FREE(p->leo_begin);
    XGR_VEC_FREE(p->leo_cand);
    XGR_VEC_FREE(p->row_gen);
    XGR_VEC_FREE(p->cm_items);
    free(p->cm_tab);
    p->cm_tab = NULL;
    p->cm_cap = p->cm_n = 0;
    xgr_attrs_free(p);
    free(p->slot_item);
    free(p->slot_stamp);
    free(p->slot_again);
    p->slot_item = NULL;
    p->slot_stamp = NULL;
    p->slot_again = NULL;
}

static inline uint32_t item_hash(xgr_item it) {
    uint64_t h = ((uint64_t)(uint32_t)it.state << 32) ^ (uint32_t)it.origin;
    h = xgr_mix64(h ^ ((uint64_t)(uint32_t)it.count * 0x9e3779b97f4a7c15ULL) ^
                  ((uint64_t)(uint32_t)it.bud << 40));
    return (uint32_t)h;
}

static XGR_NOINLINE_WORK void dedup_wrap(xgr_parser *p) {
    memset(p->slot_stamp, 0, p->slot_cap * sizeof *p->slot_stamp);
    memset(p->slot_again, 0, p->slot_cap * sizeof *p->slot_again);
    p->gen = 1;
}

/* Starts a new dedup generation; stamps wrap only after 4e9 rows. */
static inline void dedup_reset(xgr_parser *p) {
    if (++p->gen == 0) dedup_wrap(p);
}

/* Doubles the dedup table, keeping the row's items and which were added again. */
static int dedup_grow(xgr_parser *p) {
    uint32_t ncap = p->slot_cap * 2;
    xgr_item *ni = xgr_malloc(ncap * sizeof *ni);
    uint32_t *ns = xgr_calloc(ncap, sizeof *ns);
    uint32_t *na = xgr_calloc(ncap, sizeof *na);
    if (!ni || !ns || !na) {
        free(ni);
        free(ns);
        free(na);
        return XGR_ERR_NOMEM;
    }
    for (uint32_t o = 0; o < p->slot_cap; o++) {
        if (p->slot_stamp[o] != p->gen) continue;
        xgr_item it = p->slot_item[o];
        uint32_t h = item_hash(it) & (ncap - 1);
        while (ns[h] == 1) h = (h + 1) & (ncap - 1);
        ns[h] = 1;
        ni[h] = it;
        na[h] = p->slot_again[o] == p->gen;
    }
    free(p->slot_item);
    free(p->slot_stamp);
    free(p->slot_again);
    p->slot_item = ni;
    p->slot_stamp = ns;
    p->slot_again = na;
    p->slot_cap = ncap;
    p->gen = 1;
    return XGR_OK;
}

static inline int same_item(xgr_item a, xgr_item b) {
    return a.state == b.state && a.origin == b.origin && a.count == b.count && a.bud == b.bud;
}

/* Appends `it` to the row under construction unless already present, or its budget has
 * run out, or it belongs to a lazy occurrence that completed in an earlier row. */
static int add_item(xgr_parser *p, size_t row_start, xgr_item it) {
    if (it.bud && !xgr_bud_alive(p, it)) return XGR_OK;
    if (p->lazy && it.origin >= 0 &&
        xgr_item_ended(p, it, p->fsm->state_rule[it.state], (int32_t)p->row_begin.len - 2))
        return XGR_OK;
    size_t row_len = p->items.len - row_start;
    if ((row_len + 1) * 2 > p->slot_cap) {
        int rc = dedup_grow(p);
        if (rc) return rc;
    }
    uint32_t mask = p->slot_cap - 1;
    for (uint32_t h = item_hash(it) & mask;; h = (h + 1) & mask) {
        if (p->slot_stamp[h] != p->gen) {
            if ((int64_t)row_len >= p->max_row_items)
                return xgr_fail(XGR_ERR_LIMIT,
                                "parser row exceeds %d items (max_row_items); the grammar "
                                "is too ambiguous for this input",
                                (int)p->max_row_items);
            p->slot_stamp[h] = p->gen;
            p->slot_item[h] = it;
            return XGR_VEC_PUSH(p->items, it) ? XGR_ERR_NOMEM : XGR_OK;
        }
        if (same_item(p->slot_item[h], it)) {
            p->slot_again[h] = p->gen;
            return XGR_OK;
        }
    }
}

/* Was `it` added to the row under construction exactly once? */
static int added_once(const xgr_parser *p, xgr_item it) {
    uint32_t mask = p->slot_cap - 1;
    for (uint32_t h = item_hash(it) & mask; p->slot_stamp[h] == p->gen; h = (h + 1) & mask) {
        if (same_item(p->slot_item[h], it)) return p->slot_again[h] != p->gen;
    }
    return 0;
}

/* The Leo item of row `row` for `rule`, or NULL. Rows hold few (one per deterministic
 * rule), so a scan; rows past the last one with Leo items have none (earley.h). */
static inline const xgr_leo *leo_find(const xgr_parser *p, int32_t row, int32_t rule) {
    if ((size_t)row + 1 >= p->leo_begin.len) return NULL;
    /* (indices: leo.data may be NULL under an empty range, after a copy) */
    for (int32_t k = p->leo_begin.data[row]; k < p->leo_begin.data[row + 1]; k++)
        if (p->leo.data[k].rule == rule) return &p->leo.data[k];
    return NULL;
}

/* Is `t`, a state of rule r, a penultimate target: a final state without edges of a
 * NORMAL rule? */
static inline int leo_penultimate(const xgr_fsm *f, int32_t r, int32_t t) {
    return f->rule_kind[r] == XGR_RULE_NORMAL && f->final[t] &&
           f->edge_begin[t] == f->edge_begin[t + 1];
}

/* Turns the candidates met while closing row cur_row into its Leo items (see the top of
 * the file). A candidate (B, n) was recorded when B's predicted start item was first
 * added; it counts when that item was not added again, so that n's item was the only one
 * waiting on B. Its top then follows n up: through the Leo item of an earlier row (whose
 * top is final), or through one of this row's own when n's rule A was predicted here too
 * (`b ::= c` forwarding to a rule predicted in the same row), until a row has none, the
 * root's item of row 0, or an OUTER item. Such same-row steps could loop (unit rules
 * predicting each other): after as many steps as the row has Leo items the walk stops,
 * which only leaves a longer chain to the ordinary completion. */
static int leo_close_row(xgr_parser *p, int32_t cur_row) {
    const xgr_fsm *f = p->fsm;
    size_t first = p->leo.len;
    for (size_t i = 0; i < p->leo_cand.len; i++) {
        xgr_leo e = p->leo_cand.data[i]; /* (B, n) */
        if (!added_once(p, (xgr_item){f->rule_start[e.rule], cur_row, 0, 0})) continue;
        if (p->leo.len == first) {
            /* the first Leo item since row leo_begin.len - 2: earlier rows have none */
            while (p->leo_begin.len <= (size_t)cur_row)
                if (XGR_VEC_PUSH(p->leo_begin, (int32_t)first)) return XGR_ERR_NOMEM;
        }
        if (XGR_VEC_PUSH(p->leo, e)) return XGR_ERR_NOMEM;
    }
    size_t end = p->leo.len;
    if (end == first) return XGR_OK;
    for (size_t i = first; i < end; i++) {
        xgr_item top = p->leo.data[i].top;
        for (size_t steps = 0; steps <= end - first; steps++) {
            int32_t a = f->state_rule[top.state];
            if (top.origin < 0 || (a == f->root && top.origin == 0)) break;
            const xgr_leo *up = NULL;
            if (top.origin < cur_row) {
                if ((up = leo_find(p, top.origin, a))) top = up->top;
                break;
            }
            for (size_t k = first; k < end && !up; k++)
                if (p->leo.data[k].rule == a) up = &p->leo.data[k];
            if (!up) break;
            top = up->top;
        }
        p->leo.data[i].top = top;
    }
    return XGR_VEC_PUSH(p->leo_begin, (int32_t)end) ? XGR_ERR_NOMEM : XGR_OK;
}

int xgr_item_complete(const xgr_fsm *f, xgr_item it) {
    int32_t r = f->state_rule[it.state];
    if (f->rule_kind[r] == XGR_RULE_REPEAT)
        return it.origin == XGR_ORIGIN_OUTER || it.count >= f->repeat_min[r];
    return f->final[it.state];
}

/* May item `it` (in a REPEAT rule) take its loop edge once more? */
static inline int repeat_open(const xgr_fsm *f, int32_t rule, xgr_item it) {
    return it.origin == XGR_ORIGIN_OUTER || f->repeat_max[rule] < 0 ||
           it.count < f->repeat_max[rule];
}

/* Advances item `y` over a completed `rule` when y's state has a ref edge on it. */
static int advance_over(xgr_parser *p, size_t row_start, xgr_item y, int32_t rule) {
    const xgr_fsm *f = p->fsm;
    int32_t yr = f->state_rule[y.state];
    int32_t e0 = p->ref_begin ? p->ref_begin[y.state] : f->edge_begin[y.state];
    for (int32_t e = e0; e < f->edge_begin[y.state + 1]; e++) {
        const xgr_edge *ed = &f->edges[e];
        if (ed->ref != rule) continue;
        xgr_item n = {ed->target, y.origin, y.count, y.bud};
        if (f->rule_kind[yr] == XGR_RULE_REPEAT) {
            if (!repeat_open(f, yr, y)) continue;
            n.count = y.count + 1;
        }
        int rc = add_item(p, row_start, n);
        if (rc) return rc;
    }
    return XGR_OK;
}

/* Completion memo (earley.h): rows of at least CM_MIN_ROW items only (a narrow row is
 * scanned faster than looked up); emptied past CM_MAX_ITEMS kept items or CM_MAX_ENTS
 * entries. */
struct xgr_cmemo_ent {
    int32_t row, rule; /* row -1: empty */
    uint32_t gen, off, n;
};
#define CM_MIN_ROW 32
#define CM_MAX_ITEMS (1u << 16)
#define CM_MAX_ENTS (1u << 14)

static void cm_clear(xgr_parser *p) {
    for (size_t i = 0; i < p->cm_cap; i++) p->cm_tab[i].row = -1;
    p->cm_n = 0;
    p->cm_items.len = 0;
}

static inline size_t cm_slot(int32_t row, int32_t rule, uint32_t gen, size_t cap) {
    uint64_t h = ((uint64_t)(uint32_t)row * 0x9e3779b97f4a7c15ull) ^
                 ((uint64_t)(uint32_t)rule * 0xff51afd7ed558ccdull) ^ gen;
    h ^= h >> 29;
    return (size_t)(h * 0xc4ceb9fe1a85ec53ull >> 7) & (cap - 1);
}

/* A slot for a new entry, growing the table; NULL without memory (no memo then). */
static struct xgr_cmemo_ent *cm_new_slot(xgr_parser *p, int32_t row, int32_t rule, uint32_t gen) {
    if (p->cm_items.len > CM_MAX_ITEMS || p->cm_n > CM_MAX_ENTS) cm_clear(p);
    if (2 * (p->cm_n + 1) > p->cm_cap) {
        size_t cap = p->cm_cap ? 2 * p->cm_cap : 256;
        struct xgr_cmemo_ent *t = xgr_malloc(cap * sizeof *t);
        if (!t) return NULL;
        for (size_t i = 0; i < cap; i++) t[i].row = -1;
        for (size_t i = 0; i < p->cm_cap; i++) {
            if (p->cm_tab[i].row < 0) continue;
            const struct xgr_cmemo_ent *x = &p->cm_tab[i];
            size_t j = cm_slot(x->row, x->rule, x->gen, cap);
            while (t[j].row >= 0) j = (j + 1) & (cap - 1);
            t[j] = *x;
        }
        free(p->cm_tab);
        p->cm_tab = t;
        p->cm_cap = cap;
    }
    size_t j = cm_slot(row, rule, gen, p->cm_cap);
    while (p->cm_tab[j].row >= 0) j = (j + 1) & (p->cm_cap - 1);
    return &p->cm_tab[j];
}

/* Advances the items of row `origin` over a completed `rule` (advance_over on each). The
 * advanced items are a function of the closed row and the rule alone, so for a wide row
 * they are kept (the completion memo) and replayed in the same order: the string values
 * of an object with many properties complete into the object's row token after token. */
static int complete_from(xgr_parser *p, size_t row_start, int32_t origin, int32_t rule) {
    int32_t ob = p->row_begin.data[origin], oe = p->row_begin.data[origin + 1];
    if (oe - ob < CM_MIN_ROW || (size_t)origin >= p->row_gen.len) {
        for (int32_t k = ob; k < oe; k++) {
            int rc = advance_over(p, row_start, p->items.data[k], rule);
            if (rc) return rc;
        }
        return XGR_OK;
    }
    uint32_t gen = p->row_gen.data[origin];
    if (p->cm_cap)
        for (size_t j = cm_slot(origin, rule, gen, p->cm_cap); p->cm_tab[j].row >= 0;
             j = (j + 1) & (p->cm_cap - 1)) {
            const struct xgr_cmemo_ent *x = &p->cm_tab[j];
            if (x->row != origin || x->rule != rule || x->gen != gen) continue;
            for (uint32_t i = 0; i < x->n; i++) {
                int rc = add_item(p, row_start, p->cm_items.data[x->off + i]);
                if (rc) return rc;
            }
            return XGR_OK;
        }
    /* not kept: collect the advanced items, keep them, then add them */
    struct xgr_cmemo_ent *slot = cm_new_slot(p, origin, rule, gen);
    size_t off = p->cm_items.len;
    const xgr_fsm *f = p->fsm;
    for (int32_t k = ob; k < oe && slot; k++) {
        xgr_item y = p->items.data[k];
        int32_t yr = f->state_rule[y.state];
        int32_t e0 = p->ref_begin ? p->ref_begin[y.state] : f->edge_begin[y.state];
        for (int32_t e = e0; e < f->edge_begin[y.state + 1]; e++) {
            const xgr_edge *ed = &f->edges[e];
            if (ed->ref != rule) continue;
            xgr_item n = {ed->target, y.origin, y.count, y.bud};
            if (f->rule_kind[yr] == XGR_RULE_REPEAT) {
                if (!repeat_open(f, yr, y)) continue;
                n.count = y.count + 1;
            }
            if (XGR_VEC_PUSH(p->cm_items, n)) {
                slot = NULL;
                break;
            }
        }
    }
    if (!slot) { /* no memory for the memo: as without it */
        p->cm_items.len = off;
        for (int32_t k = ob; k < oe; k++) {
            int rc = advance_over(p, row_start, p->items.data[k], rule);
            if (rc) return rc;
        }
        return XGR_OK;
    }
    *slot = (struct xgr_cmemo_ent){origin, rule, gen, (uint32_t)off,
                                   (uint32_t)(p->cm_items.len - off)};
    p->cm_n++;
    for (size_t i = off; i < p->cm_items.len; i++) {
        int rc = add_item(p, row_start, p->cm_items.data[i]);
        if (rc) return rc;
    }
    return XGR_OK;
}

/* Can the row that starts at row_start go on: an item with a byte edge, or the root
 * complete from row 0? (A row whose only items are elements that completed with a refused
 * value (complete_unique) cannot.) */
static int row_useful(const xgr_parser *p, size_t row_start) {
    const xgr_fsm *f = p->fsm;
    for (size_t k = row_start; k < p->items.len; k++) {
        xgr_item it = p->items.data[k];
        int32_t e = f->edge_begin[it.state];
        if (e < f->edge_begin[it.state + 1] && f->edges[e].ref < 0) return 1;
        if (it.origin == 0 && f->state_rule[it.state] == f->root && xgr_item_complete(f, it))
            return 1;
    }
    return 0;
}

/* Completes uniqueItems element occurrence (rule, origin) (parse/unique.h): each item of
 * the origin row waiting on it advances unless its array already holds the value. */
static int complete_unique(xgr_parser *p, size_t row_start, int32_t origin, int32_t rule,
                           int32_t cur_row) {
    const xgr_fsm *f = p->fsm;
    size_t len;
    uint64_t hash;
    int rc = xgr_uniq_value(p, origin, cur_row, &len, &hash);
    for (int32_t k = p->row_begin.data[origin]; !rc && k < p->row_begin.data[origin + 1]; k++) {
        xgr_item y = p->items.data[k];
        int waits = 0;
        for (int32_t e = f->edge_begin[y.state]; e < f->edge_begin[y.state + 1] && !waits; e++)
            waits = f->edges[e].ref == rule;
        if (!waits) continue;
        int32_t sr, so;
        if (xgr_uniq_scope(p, y, &sr, &so)) {
            if (xgr_uniq_seen(p, sr, so, origin, len, hash)) {
                p->uq_rejected = 1;
                /* (recorded: a row that lives on past a refused value, "1" that may become
                 * "12", must not let a token rely on the completion; matcher.c) */
                if ((rc = xgr_uniq_note(p, -1, -1, -2, 0, 0))) break;
                continue;
            }
            if ((rc = xgr_uniq_note(p, sr, so, origin, len, hash))) break;
        }
        rc = advance_over(p, row_start, y, rule);
    }
    return rc;
}

static XGR_NOINLINE_WORK int work_limit(const xgr_parser *p) {
    return xgr_fail(XGR_ERR_LIMIT,
                    "parsing one byte needs more than %lld work units (max_step_work); the "
                    "grammar is too ambiguous for this input",
                    (long long)p->max_work);
}

/* Closes the row starting at row_start under prediction and completion. Work (items
 * visited plus completions tried) is bounded by p->max_work per row. */
static int closure(xgr_parser *p, size_t row_start, int32_t cur_row) {
    const xgr_fsm *f = p->fsm;
    int64_t work = 0;
    const uint8_t *leo_rules = p->leo_rules;
    p->leo_cand.len = 0;
    for (size_t j = row_start; j < p->items.len; j++) {
        xgr_item it = p->items.data[j];
        if (++work > p->max_work) return work_limit(p);
        int32_t r = f->state_rule[it.state];
        /* (a forced close ends its rule only once the budget is spent) */
        int done = xgr_item_complete(f, it) ||
                   (xgr_forced_item(p, r, it) && xgr_forced_spent(p, it, p->cur_cp, p->cur_tk));
        if (done) {
            if (p->captures && it.origin >= 0 && xgr_capture_wanted(p, r, it, cur_row)) {
                int rc = xgr_capture_note(p, r, it.origin, it.state);
                if (rc) return rc;
            }
            if (p->lazy && it.origin >= 0 &&
                (p->attrs[r].lazy || (it.bud && xgr_bud_expired(p, it.bud)))) {
                int rc = xgr_lazy_note(p, r, it.origin);
                if (rc) return rc;
            }
            if (p->uniq && it.origin >= 0 && p->attrs[r].unique >= XGR_UNIQUE_SCOPE) {
                int rc = xgr_uniq_note(p, r, it.origin, -1, 0, 0); /* (an array ended) */
                if (rc) return rc;
            }
            if (it.origin == XGR_ORIGIN_OUTER) {
                p->popped = 1;
            } else if (p->uniq && it.origin != cur_row && p->attrs[r].unique == XGR_UNIQUE_ITEM) {
                int rc = complete_unique(p, row_start, it.origin, r, cur_row);
                if (rc) return rc;
            } else if (it.origin != cur_row) {
                /* Same-row completions are empty derivations, already covered by the
                 * nullable advance at prediction time. A Leo item of the origin row
                 * stands for the whole deterministic chain above this completion. */
                const xgr_leo *leo = leo_find(p, it.origin, r);
                if (leo) {
                    int rc = add_item(p, row_start, leo->top);
                    if (rc) return rc;
                } else {
                    int32_t ob = p->row_begin.data[it.origin],
                            oe = p->row_begin.data[it.origin + 1];
                    if ((work += oe - ob) > p->max_work) return work_limit(p);
                    int rc = complete_from(p, row_start, it.origin, r);
                    if (rc) return rc;
                }
            }
        }
        int32_t e0 = p->ref_begin ? p->ref_begin[it.state] : f->edge_begin[it.state],
                e1 = f->edge_begin[it.state + 1];
        if (e0 == e1) continue;
        /* an ended occurrence predicts nothing (its sub-rules could never complete it) */
        if (p->lazy && it.origin >= 0 && (p->attrs[r].lazy || it.bud) &&
            xgr_lazy_closed_now(p, r, it.origin))
            continue;
        /* (an element's completion is checked, never skipped over by a Leo item) */
        if ((leo_rules && !leo_rules[r]) || (p->uniq && p->attrs[r].unique == XGR_UNIQUE_ITEM)) {
            for (int32_t e = e0; e < e1; e++) {
                const xgr_edge *ed = &f->edges[e];
                if (ed->ref < 0) continue;
                if (f->rule_kind[r] == XGR_RULE_REPEAT && !repeat_open(f, r, it)) continue;
                xgr_item n = {ed->target, it.origin,
                              f->rule_kind[r] == XGR_RULE_REPEAT ? it.count + 1 : it.count,
                              it.bud};
                xgr_item pr = {f->rule_start[ed->ref], cur_row, 0, it.bud};
                if (p->budgets && (pr.bud = xgr_bud_enter(p, ed->ref, it.bud, &n)) < 0)
                    return XGR_ERR_NOMEM;
                int rc = add_item(p, row_start, pr);
                if (rc) return rc;
                if (f->rule_nullable[ed->ref] && (rc = add_item(p, row_start, n))) return rc;
            }
            continue;
        }
        /* the same, also recording Leo item candidates */
        for (int32_t e = e0; e < e1; e++) {
            const xgr_edge *ed = &f->edges[e];
            if (ed->ref < 0) continue;
            if (f->rule_kind[r] == XGR_RULE_REPEAT && !repeat_open(f, r, it)) continue;
            xgr_item n = {ed->target, it.origin,
                          f->rule_kind[r] == XGR_RULE_REPEAT ? it.count + 1 : it.count, it.bud};
            xgr_item pr = {f->rule_start[ed->ref], cur_row, 0, it.bud};
            if (p->budgets && (pr.bud = xgr_bud_enter(p, ed->ref, it.bud, &n)) < 0)
                return XGR_ERR_NOMEM;
            size_t len0 = p->items.len;
            int rc = add_item(p, row_start, pr);
            if (rc) return rc;
            /* (a start item already there: another item waits on B, or it came some
             * other way; either way no Leo item) */
            if (p->items.len != len0 && leo_penultimate(f, r, ed->target)) {
                xgr_leo c = {ed->ref, n};
                if (XGR_VEC_PUSH(p->leo_cand, c)) return XGR_ERR_NOMEM;
            }
            if (f->rule_nullable[ed->ref] && (rc = add_item(p, row_start, n))) return rc;
        }
    }
    return p->leo_cand.len ? leo_close_row(p, cur_row) : XGR_OK;
}

int xgr_leo_rules(const xgr_fsm *f, uint8_t *out) {
    int32_t nr = f->n_rules;
    memset(out, 0, (size_t)nr);
    /* tail edges A -> B (A NORMAL, B referenced right before one of A's edgeless ends),
     * in CSR by A */
    int32_t *beg = xgr_calloc((size_t)nr + 1, sizeof *beg);
    if (!beg) return XGR_ERR_NOMEM;
    for (int pass = 0; pass < 2; pass++) {
        int32_t *adj = NULL;
        if (pass) {
            for (int32_t r = 0; r < nr; r++) beg[r + 1] += beg[r];
            adj = xgr_malloc(((size_t)beg[nr] + 1) * sizeof *adj);
            if (!adj) {
                free(beg);
                return XGR_ERR_NOMEM;
            }
        }
        for (int32_t r = 0; r < nr; r++) {
            if (f->rule_kind[r] != XGR_RULE_NORMAL) continue;
            int32_t fill = pass ? beg[r] : 0;
            for (int32_t st = f->rule_start[r]; st < xgr_fsm_rule_end(f, r); st++)
                for (int32_t e = f->edge_begin[st]; e < f->edge_begin[st + 1]; e++) {
                    const xgr_edge *ed = &f->edges[e];
                    if (ed->ref < 0 || !leo_penultimate(f, r, ed->target)) continue;
                    if (!pass) beg[r + 1]++;
                    else adj[fill++] = ed->ref;
                }
        }
        if (!pass) continue;
        /* Tarjan's strongly connected components, iteratively; a rule is marked when its
         * component has a cycle (two rules or more, or a self reference). */
        int32_t *idx = xgr_malloc(((size_t)nr + 1) * sizeof *idx),
                *low = xgr_malloc(((size_t)nr + 1) * sizeof *low),
                *stk = xgr_malloc(((size_t)nr + 1) * sizeof *stk),
                *cs = xgr_malloc(((size_t)nr + 1) * sizeof *cs),
                *ce = xgr_malloc(((size_t)nr + 1) * sizeof *ce);
        uint8_t *on = xgr_calloc((size_t)nr + 1, 1);
        int rc = idx && low && stk && cs && ce && on ? XGR_OK : XGR_ERR_NOMEM;
        int32_t counter = 0, sp = 0;
        for (int32_t r = 0; r < nr && !rc; r++) idx[r] = -1;
        for (int32_t root = 0; root < nr && !rc; root++) {
            if (idx[root] >= 0) continue;
            int32_t depth = 0;
            cs[0] = root;
            ce[0] = beg[root];
            idx[root] = low[root] = counter++;
            stk[sp++] = root;
            on[root] = 1;
            while (depth >= 0) {
                int32_t v = cs[depth];
                if (ce[depth] < beg[v + 1]) {
                    int32_t w = adj[ce[depth]++];
                    if (w == v) out[v] = 1;
                    if (idx[w] < 0) {
                        idx[w] = low[w] = counter++;
                        stk[sp++] = w;
                        on[w] = 1;
                        cs[++depth] = w;
                        ce[depth] = beg[w];
                    } else if (on[w] && idx[w] < low[v]) {
                        low[v] = idx[w];
                    }
                    continue;
                }
                if (low[v] == idx[v]) {
                    int32_t first = sp;
                    do first--; while (stk[first] != v);
                    for (int32_t k = first; k < sp; k++) {
                        on[stk[k]] = 0;
                        if (sp - first > 1) out[stk[k]] = 1;
                    }
                    sp = first;
                }
                if (--depth >= 0 && low[v] < low[cs[depth]]) low[cs[depth]] = low[v];
            }
        }
        free(idx);
        free(low);
        free(stk);
        free(cs);
        free(ce);
        free(on);
        free(adj);
        free(beg);
        return rc;
    }
    free(beg); /* not reached */
    return XGR_OK;
}

/* Clears all rows (the first row's start is pushed already by init). */
static void clear_rows(xgr_parser *p) {
    p->items.len = 0;
    p->row_begin.len = 1;
    p->row_begin.data[0] = 0;
    p->leo.len = 0;
    p->leo_begin.len = 1;
    p->leo_begin.data[0] = 0;
    p->popped = 0;
    p->row_gen.len = 0;
    xgr_attrs_clear(p);
}

/* A new generation for the row being pushed (earley.h row_gen); on wrapping, the memo is
 * emptied so that no entry can name a generation given out again. */
static int next_gen(xgr_parser *p) {
    if (++p->row_gen_next == 0) {
        if (p->cm_cap) cm_clear(p);
        p->row_gen_next = 1;
    }
    return XGR_VEC_PUSH(p->row_gen, p->row_gen_next) ? XGR_ERR_NOMEM : XGR_OK;
}

/* Ends the row just closed (leo_close_row ended its Leo items, if it has any). */
static inline int push_row(xgr_parser *p) {
    if ((p->budgets || p->lazy || p->captures || p->uniq) && xgr_attrs_push_row(p))
        return XGR_ERR_NOMEM;
    size_t rows = p->row_begin.len - 1; /* (the index of the row being pushed) */
    if (p->row_gen.len > rows) p->row_gen.len = rows; /* (left by a push that failed) */
    if (p->row_gen.len == rows && next_gen(p)) return XGR_ERR_NOMEM;
    return XGR_VEC_PUSH(p->row_begin, (int32_t)p->items.len) ? XGR_ERR_NOMEM : XGR_OK;
}

int xgr_parser_start(xgr_parser *p, xgr_item init) {
    clear_rows(p);
    dedup_reset(p);
    if (p->budgets && init.origin >= 0 &&
        (init.bud = xgr_bud_enter(p, p->fsm->state_rule[init.state], init.bud, NULL)) < 0)
        return XGR_ERR_NOMEM;
    int rc = add_item(p, 0, init);
    if (!rc) rc = closure(p, 0, 0);
    if (!rc) rc = push_row(p);
    return rc;
}

int xgr_parser_start_in_caller(xgr_parser *p, xgr_item parent, xgr_item child) {
    clear_rows(p);
    /* row 0 is not closed: it has no Leo items */
    if (XGR_VEC_PUSH(p->items, parent) || push_row(p)) return XGR_ERR_NOMEM;
    dedup_reset(p);
    int rc = add_item(p, 1, child);
    if (!rc) rc = closure(p, 1, 1);
    if (!rc) rc = push_row(p);
    return rc;
}

int xgr_parser_step(xgr_parser *p, uint8_t byte, int *alive) {
    return xgr_parser_step_with(p, byte, NULL, 0, alive);
}

int xgr_parser_step_with(xgr_parser *p, uint8_t byte, const xgr_item *extra, size_t n_extra,
                         int *alive) {
    const xgr_fsm *f = p->fsm;
    int32_t last = xgr_parser_rows(p) - 1;
    int32_t b = p->row_begin.data[last], e = p->row_begin.data[last + 1];
    size_t row_start = p->items.len; /* (Leo items are fewer: one per new start item) */
    if (row_start > (size_t)INT32_MAX - 1)
        return xgr_fail(XGR_ERR_LIMIT, "parser history too long");
    p->popped = 0;
    dedup_reset(p);
    if (p->budgets) {
        p->cur_cp = p->row_cp.data[last] + ((byte & 0xC0) != 0x80);
        int32_t inc;
        p->cur_js = xgr_json_step(p->row_js.data[last], byte, &inc);
        p->cur_jc = p->row_jc.data[last] + inc;
        p->cur_tk = p->next_tk;
        p->buds.len = (size_t)p->row_bud.data[last]; /* (those of a row that failed) */
    }
    if (p->lazy) p->lazy_done.len = (size_t)p->lazy_begin.data[p->lazy_begin.len - 1];
    if (p->captures) p->cap_done.len = (size_t)p->cap_begin.data[p->cap_begin.len - 1];
    if (p->uniq) xgr_uniq_row_reset(p);
    p->cur_byte = byte;
    for (int32_t k = b; k < e; k++) {
        xgr_item it = p->items.data[k];
        if (p->lazy && xgr_item_ended(p, it, f->state_rule[it.state], last))
            continue; /* a lazy occurrence ended where it completed */
        for (int32_t x = f->edge_begin[it.state]; x < f->edge_begin[it.state + 1]; x++) {
            const xgr_edge *ed = &f->edges[x];
            if (ed->ref >= 0) break; /* byte edges come first */
            if (byte < ed->lo) break;
            if (byte <= ed->hi) {
                xgr_item n = {ed->target, it.origin, it.count, it.bud};
                int rc = add_item(p, row_start, n);
                if (rc) {
                    p->items.len = row_start;
                    return rc;
                }
                break;
            }
        }
    }
    for (size_t k = 0; k < n_extra; k++) {
        xgr_item n = extra[k];
        if (p->budgets && (size_t)n.bud >= p->buds.len) continue; /* a context since dropped */
        int rc = add_item(p, row_start, n);
        if (rc) {
            p->items.len = row_start;
            return rc;
        }
    }
    if (p->items.len == row_start) {
        *alive = 0;
        return XGR_OK;
    }
    p->uq_rejected = 0;
    int rc = closure(p, row_start, last + 1);
    if (!rc && p->uq_rejected && !row_useful(p, row_start)) {
        /* (only elements whose values were refused ended here: nothing goes on) */
        xgr_parser_truncate(p, last + 1);
        p->leo.len = (size_t)p->leo_begin.data[p->leo_begin.len - 1];
        *alive = 0;
        return XGR_OK;
    }
    if (!rc) rc = push_row(p);
    if (rc) {
        /* back to the rows before: Leo items of this row, if closing it got that far */
        xgr_parser_truncate(p, last + 1);
        p->leo.len = (size_t)p->leo_begin.data[p->leo_begin.len - 1];
        return rc;
    }
    *alive = 1;
    return XGR_OK;
}

int xgr_parser_can_end(const xgr_parser *p) {
    const xgr_fsm *f = p->fsm;
    int32_t last = xgr_parser_rows(p) - 1;
    for (int32_t k = p->row_begin.data[last]; k < p->row_begin.data[last + 1]; k++) {
        xgr_item it = p->items.data[k];
        if (it.origin != 0 || f->state_rule[it.state] != f->root) continue;
        if (xgr_item_complete(f, it) ||
            (xgr_forced_item(p, f->root, it) &&
             xgr_forced_spent(p, it, p->row_cp.data[last], p->row_tk.data[last])))
            return 1;
    }
    return 0;
}

int xgr_parser_copy(xgr_parser *dst, const xgr_parser *src) {
    if (XGR_VEC_RESERVE(dst->items, src->items.len) ||
        XGR_VEC_RESERVE(dst->row_begin, src->row_begin.len) ||
        XGR_VEC_RESERVE(dst->leo, src->leo.len) ||
        XGR_VEC_RESERVE(dst->leo_begin, src->leo_begin.len))
        return XGR_ERR_NOMEM;
    if (src->items.len)
        memcpy(dst->items.data, src->items.data, src->items.len * sizeof *src->items.data);
    if (src->leo.len)
        memcpy(dst->leo.data, src->leo.data, src->leo.len * sizeof *src->leo.data);
    memcpy(dst->row_begin.data, src->row_begin.data,
           src->row_begin.len * sizeof *src->row_begin.data);
    memcpy(dst->leo_begin.data, src->leo_begin.data,
           src->leo_begin.len * sizeof *src->leo_begin.data);
    dst->items.len = src->items.len;
    dst->row_begin.len = src->row_begin.len;
    dst->leo.len = src->leo.len;
    dst->leo_begin.len = src->leo_begin.len;
    /* dst's rows are new to its completion memo: a generation each */
    dst->row_gen.len = 0;
    for (size_t i = 0; i + 1 < dst->row_begin.len; i++)
        if (next_gen(dst)) return XGR_ERR_NOMEM;
    return xgr_attrs_copy(dst, src);
}

void xgr_parser_next_bytes(const xgr_parser *p, uint32_t out[8]) {
    const xgr_fsm *f = p->fsm;
    memset(out, 0, 8 * sizeof *out);
    int32_t last = xgr_parser_rows(p) - 1;
    for (int32_t k = p->row_begin.data[last]; k < p->row_begin.data[last + 1]; k++)
        xgr_fsm_byte_set(f, p->items.data[k].state, out);
}
