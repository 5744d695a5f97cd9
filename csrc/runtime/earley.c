/* Earley row construction: scan one byte, then predict/complete to a fixpoint. */
#include "earley.h"

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
    if (!p->slot_item || !p->slot_stamp) {
        xgr_parser_free(p);
        return XGR_ERR_NOMEM;
    }
    p->gen = 1;
    if (XGR_VEC_PUSH(p->row_begin, 0)) {
        xgr_parser_free(p);
        return XGR_ERR_NOMEM;
    }
    return XGR_OK;
}

void xgr_parser_free(xgr_parser *p) {
    XGR_VEC_FREE(p->items);
    XGR_VEC_FREE(p->row_begin);
    free(p->slot_item);
    free(p->slot_stamp);
    p->slot_item = NULL;
    p->slot_stamp = NULL;
}

static inline uint32_t item_hash(xgr_item it) {
    uint64_t h = ((uint64_t)(uint32_t)it.state << 32) ^ (uint32_t)it.origin;
    h = xgr_mix64(h ^ ((uint64_t)(uint32_t)it.count * 0x9e3779b97f4a7c15ULL));
    return (uint32_t)h;
}

/* Starts a new dedup generation; stamps wrap only after 4e9 rows. */
static void dedup_reset(xgr_parser *p) {
    if (++p->gen == 0) {
        memset(p->slot_stamp, 0, p->slot_cap * sizeof *p->slot_stamp);
        p->gen = 1;
    }
}

static int dedup_grow(xgr_parser *p, size_t row_start) {
    uint32_t ncap = p->slot_cap * 2;
    xgr_item *ni = xgr_malloc(ncap * sizeof *ni);
    uint32_t *ns = xgr_calloc(ncap, sizeof *ns);
    if (!ni || !ns) {
        free(ni);
        free(ns);
        return XGR_ERR_NOMEM;
    }
    free(p->slot_item);
    free(p->slot_stamp);
    p->slot_item = ni;
    p->slot_stamp = ns;
    p->slot_cap = ncap;
    p->gen = 1;
    for (size_t i = row_start; i < p->items.len; i++) {
        xgr_item it = p->items.data[i];
        uint32_t h = item_hash(it) & (ncap - 1);
        while (ns[h] == 1) h = (h + 1) & (ncap - 1);
        ns[h] = 1;
        ni[h] = it;
    }
    return XGR_OK;
}

/* Appends `it` to the row under construction unless already present. */
static int add_item(xgr_parser *p, size_t row_start, xgr_item it) {
    size_t row_len = p->items.len - row_start;
    if ((row_len + 1) * 2 > p->slot_cap) {
        int rc = dedup_grow(p, row_start);
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
        xgr_item o = p->slot_item[h];
        if (o.state == it.state && o.origin == it.origin && o.count == it.count) return XGR_OK;
    }
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
        xgr_item n = {ed->target, y.origin, y.count};
        if (f->rule_kind[yr] == XGR_RULE_REPEAT) {
            if (!repeat_open(f, yr, y)) continue;
            n.count = y.count + 1;
        }
        int rc = add_item(p, row_start, n);
        if (rc) return rc;
    }
    return XGR_OK;
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
    for (size_t j = row_start; j < p->items.len; j++) {
        xgr_item it = p->items.data[j];
        if (++work > p->max_work) return work_limit(p);
        int32_t r = f->state_rule[it.state];
        if (xgr_item_complete(f, it)) {
            if (it.origin == XGR_ORIGIN_OUTER) {
                p->popped = 1;
            } else if (it.origin != cur_row) {
                /* Same-row completions are empty derivations, already covered by the
                 * nullable advance at prediction time. */
                int32_t ob = p->row_begin.data[it.origin], oe = p->row_begin.data[it.origin + 1];
                if ((work += oe - ob) > p->max_work) return work_limit(p);
                for (int32_t k = ob; k < oe; k++) {
                    int rc = advance_over(p, row_start, p->items.data[k], r);
                    if (rc) return rc;
                }
            }
        }
        int32_t e0 = p->ref_begin ? p->ref_begin[it.state] : f->edge_begin[it.state];
        for (int32_t e = e0; e < f->edge_begin[it.state + 1]; e++) {
            const xgr_edge *ed = &f->edges[e];
            if (ed->ref < 0) continue;
            if (f->rule_kind[r] == XGR_RULE_REPEAT && !repeat_open(f, r, it)) continue;
            xgr_item pr = {f->rule_start[ed->ref], cur_row, 0};
            int rc = add_item(p, row_start, pr);
            if (rc) return rc;
            if (f->rule_nullable[ed->ref]) {
                xgr_item n = {ed->target, it.origin,
                              f->rule_kind[r] == XGR_RULE_REPEAT ? it.count + 1 : it.count};
                if ((rc = add_item(p, row_start, n))) return rc;
            }
        }
    }
    return XGR_OK;
}

int xgr_parser_start(xgr_parser *p, xgr_item init) {
    p->items.len = 0;
    p->row_begin.len = 1;
    p->row_begin.data[0] = 0;
    p->popped = 0;
    dedup_reset(p);
    int rc = add_item(p, 0, init);
    if (!rc) rc = closure(p, 0, 0);
    if (!rc && XGR_VEC_PUSH(p->row_begin, (int32_t)p->items.len)) rc = XGR_ERR_NOMEM;
    return rc;
}

int xgr_parser_start_in_caller(xgr_parser *p, xgr_item parent, xgr_item child) {
    p->items.len = 0;
    p->row_begin.len = 1;
    p->row_begin.data[0] = 0;
    p->popped = 0;
    if (XGR_VEC_PUSH(p->items, parent) || XGR_VEC_PUSH(p->row_begin, 1)) return XGR_ERR_NOMEM;
    dedup_reset(p);
    int rc = add_item(p, 1, child);
    if (!rc) rc = closure(p, 1, 1);
    if (!rc && XGR_VEC_PUSH(p->row_begin, (int32_t)p->items.len)) rc = XGR_ERR_NOMEM;
    return rc;
}

int xgr_parser_step(xgr_parser *p, uint8_t byte, int *alive) {
    const xgr_fsm *f = p->fsm;
    int32_t last = xgr_parser_rows(p) - 1;
    int32_t b = p->row_begin.data[last], e = p->row_begin.data[last + 1];
    size_t row_start = p->items.len;
    if (row_start > (size_t)INT32_MAX - 1)
        return xgr_fail(XGR_ERR_LIMIT, "parser history too long");
    p->popped = 0;
    dedup_reset(p);
    for (int32_t k = b; k < e; k++) {
        xgr_item it = p->items.data[k];
        for (int32_t x = f->edge_begin[it.state]; x < f->edge_begin[it.state + 1]; x++) {
            const xgr_edge *ed = &f->edges[x];
            if (ed->ref >= 0) break; /* byte edges come first */
            if (byte < ed->lo) break;
            if (byte <= ed->hi) {
                xgr_item n = {ed->target, it.origin, it.count};
                int rc = add_item(p, row_start, n);
                if (rc) return rc;
                break;
            }
        }
    }
    if (p->items.len == row_start) {
        *alive = 0;
        return XGR_OK;
    }
    int rc = closure(p, row_start, last + 1);
    if (rc) {
        p->items.len = row_start;
        return rc;
    }
    if (XGR_VEC_PUSH(p->row_begin, (int32_t)p->items.len)) {
        p->items.len = row_start;
        return XGR_ERR_NOMEM;
    }
    *alive = 1;
    return XGR_OK;
}

int xgr_parser_can_end(const xgr_parser *p) {
    const xgr_fsm *f = p->fsm;
    int32_t last = xgr_parser_rows(p) - 1;
    for (int32_t k = p->row_begin.data[last]; k < p->row_begin.data[last + 1]; k++) {
        xgr_item it = p->items.data[k];
        if (it.origin == 0 && f->state_rule[it.state] == f->root && xgr_item_complete(f, it))
            return 1;
    }
    return 0;
}

int xgr_parser_copy(xgr_parser *dst, const xgr_parser *src) {
    if (XGR_VEC_RESERVE(dst->items, src->items.len) ||
        XGR_VEC_RESERVE(dst->row_begin, src->row_begin.len))
        return XGR_ERR_NOMEM;
    if (src->items.len)
        memcpy(dst->items.data, src->items.data, src->items.len * sizeof *src->items.data);
    memcpy(dst->row_begin.data, src->row_begin.data,
           src->row_begin.len * sizeof *src->row_begin.data);
    dst->items.len = src->items.len;
    dst->row_begin.len = src->row_begin.len;
    return XGR_OK;
}

void xgr_parser_next_bytes(const xgr_parser *p, uint32_t out[8]) {
    const xgr_fsm *f = p->fsm;
    memset(out, 0, 8 * sizeof *out);
    int32_t last = xgr_parser_rows(p) - 1;
    for (int32_t k = p->row_begin.data[last]; k < p->row_begin.data[last + 1]; k++)
        xgr_fsm_byte_set(f, p->items.data[k].state, out);
}
