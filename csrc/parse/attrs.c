/* Rule attributes at run time: budgets, laziness, temperature. See attrs.h. */
#include "attrs.h"

int xgr_attrs_init(xgr_parser *p) {
    const xgr_fsm *f = p->fsm;
    p->attrs = f->rule_attrs;
    p->budgets = f->attr_budgets;
    p->lazy = f->attr_lazy; /* (set for token budgets too: they end occurrences) */
    xgr_budget none = {XGR_NO_DEADLINE, XGR_NO_DEADLINE, XGR_NO_DEADLINE, -1, -1,
                       XGR_NO_DEADLINE, XGR_NO_DEADLINE};
    p->captures = f->attr_captures;
    if (XGR_VEC_PUSH(p->buds, none) || XGR_VEC_RESERVE(p->lazy_begin, 16) ||
        XGR_VEC_RESERVE(p->cap_begin, 16))
        return XGR_ERR_NOMEM;
    xgr_attrs_clear(p);
    return XGR_OK;
}

void xgr_attrs_clear(xgr_parser *p) {
    p->row_cp.len = p->row_tk.len = p->row_bud.len = p->row_jc.len = p->row_js.len = 0;
    p->buds.len = p->buds.len ? 1 : 0;
    p->lazy_done.len = 0;
    p->lazy_begin.len = 0;
    p->cur_cp = p->cur_tk = p->next_tk = p->cur_jc = 0;
    p->cur_js = XGR_JS_TEXT;
    if (p->lazy) p->lazy_begin.data[p->lazy_begin.len++] = 0; /* (capacity from init) */
    p->cap_done.len = p->cap_begin.len = p->hist.len = 0;
    p->cur_byte = 0;
    if (p->captures) p->cap_begin.data[p->cap_begin.len++] = 0;
    p->uq_done.len = p->uq_begin.len = p->uq_text.len = 0;
    if (p->uniq) p->uq_begin.data[p->uq_begin.len++] = 0; /* (capacity: unique_on) */
}

int xgr_parser_unique_on(xgr_parser *p) {
    if (!p->fsm->attr_unique || p->uniq) return XGR_OK;
    if (XGR_VEC_RESERVE(p->uq_begin, 16)) return XGR_ERR_NOMEM;
    p->uniq = 1;
    xgr_attrs_clear(p);
    return XGR_OK;
}

void xgr_attrs_free(xgr_parser *p) {
    XGR_VEC_FREE(p->row_cp);
    XGR_VEC_FREE(p->row_tk);
    XGR_VEC_FREE(p->row_jc);
    XGR_VEC_FREE(p->row_js);
    XGR_VEC_FREE(p->row_bud);
    XGR_VEC_FREE(p->buds);
    XGR_VEC_FREE(p->lazy_done);
    XGR_VEC_FREE(p->lazy_begin);
    XGR_VEC_FREE(p->cap_done);
    XGR_VEC_FREE(p->cap_begin);
    XGR_VEC_FREE(p->hist);
    XGR_VEC_FREE(p->uq_done);
    XGR_VEC_FREE(p->uq_begin);
    XGR_VEC_FREE(p->uq_text);
    XGR_VEC_FREE(p->uq_tmp);
}

static inline int32_t min32(int32_t a, int32_t b) { return a < b ? a : b; }

/* a + b saturating at XGR_NO_DEADLINE - 1 (a real deadline stays below "none") */
static inline int32_t add_sat(int32_t a, int32_t b) {
    int64_t s = (int64_t)a + b;
    return s >= XGR_NO_DEADLINE ? XGR_NO_DEADLINE - 1 : (int32_t)s;
}

/* An effective deadline less a reserve (kept below XGR_NO_DEADLINE; -1: none can finish) */
static inline int32_t eff_less(int32_t dl, int32_t reserve) {
    if (dl == XGR_NO_DEADLINE) return dl;
    int64_t v = (int64_t)dl - reserve;
    return v < -1 ? -1 : (int32_t)v;
}

int32_t xgr_bud_enter(xgr_parser *p, int32_t rule, int32_t parent, const xgr_item *ret) {
    const xgr_rule_attrs *a = &p->attrs[rule];
    const xgr_budget *pb = &p->buds.data[parent];
    int32_t rc = 0, rj = 0; /* what the predicting item needs once the occurrence returns */
    if (ret && pb->ceff != XGR_NO_DEADLINE) rc = xgr_need_cp(p->fsm, *ret);
    if (ret && pb->jeff != XGR_NO_DEADLINE) rj = xgr_need_jc_after(p->fsm, *ret, rule, p->cur_js);
    if (a->max_chars < 0 && a->max_tokens < 0 && a->max_json_chars < 0 && !rc && !rj &&
        a->forced_body < 0)
        return parent;
    xgr_budget b = *pb;
    b.ceff = eff_less(b.ceff, rc);
    b.jeff = eff_less(b.jeff, rj);
    if (a->max_chars >= 0) {
        b.cdl = min32(b.cdl, add_sat(p->cur_cp, a->max_chars));
        if (a->forced_body < 0) b.ceff = min32(b.ceff, add_sat(p->cur_cp, a->max_chars));
    }
    if (a->max_json_chars >= 0) {
        b.jdl = min32(b.jdl, add_sat(p->cur_jc, a->max_json_chars));
        if (a->forced_body < 0) b.jeff = min32(b.jeff, add_sat(p->cur_jc, a->max_json_chars));
        /* a JSON string's body starts outside an escape: say so, for a row whose state
         * was guessed (a mask-cache walk starts a token in XGR_JS_TEXT wherever it is) */
        p->cur_js = XGR_JS_TEXT;
    }
    if (!p->fsm->need || a->forced_body >= 0) /* (a forced close ends where it is spent) */
        b.ceff = b.jeff = XGR_NO_DEADLINE;
    if (a->max_tokens >= 0) {
        /* tokens touched from here: the current one too when the next byte continues it */
        int32_t tdl = add_sat(p->cur_tk >> 1, a->max_tokens) - (p->cur_tk & 1);
        b.tdl = min32(b.tdl, tdl);
    }
    if (a->forced_body >= 0) { /* its own context: it names the occurrence */
        b.own_rule = rule;
        b.own_origin = (int32_t)p->row_begin.len - 1; /* (the row under construction) */
    }
    /* contexts entered in one row repeat: look back a little before adding one */
    size_t n = p->buds.len;
    for (size_t k = n; k > 1 && k + 8 > n; k--) {
        const xgr_budget *o = &p->buds.data[k - 1];
        if (o->cdl == b.cdl && o->tdl == b.tdl && o->jdl == b.jdl && o->own_rule == b.own_rule &&
            o->own_origin == b.own_origin && o->ceff == b.ceff && o->jeff == b.jeff)
            return (int32_t)(k - 1);
    }
    if (n >= (size_t)INT32_MAX || XGR_VEC_PUSH(p->buds, b)) return -1;
    return (int32_t)n;
}

int xgr_lazy_closed(const xgr_parser *p, int32_t rule, int32_t origin, int32_t upto) {
    if (origin < 0) return 0;
    int32_t last = (int32_t)p->lazy_begin.len - 2; /* last finished row */
    if (upto > last) upto = last;
    if (upto < origin) return 0;
    /* the closures of rows origin..upto, in row order (few: one per ended occurrence) */
    for (int32_t k = p->lazy_begin.data[origin]; k < p->lazy_begin.data[upto + 1]; k++)
        if (p->lazy_done.data[k].rule == rule && p->lazy_done.data[k].top.origin == origin)
            return 1;
    return 0;
}

int xgr_lazy_closed_now(const xgr_parser *p, int32_t rule, int32_t origin) {
    if (origin < 0) return 0;
    int32_t last = (int32_t)p->lazy_begin.len - 2;
    if (origin <= last && xgr_lazy_closed(p, rule, origin, last)) return 1;
    for (size_t k = (size_t)p->lazy_begin.data[last + 1]; k < p->lazy_done.len; k++)
        if (p->lazy_done.data[k].rule == rule && p->lazy_done.data[k].top.origin == origin)
            return 1;
    return 0;
}

/* The (rule, origin) record of the current row's list d[b..n), or a fresh one to push
 * (*e set) when the row has none yet: 1 when already noted. */
static int noted(const xgr_leo *d, size_t b, size_t n, int32_t rule, int32_t origin, xgr_leo *e) {
    for (size_t k = b; k < n; k++)
        if (d[k].rule == rule && d[k].top.origin == origin) return 1;
    memset(e, 0, sizeof *e);
    e->rule = rule;
    e->top.origin = origin;
    return 0;
}

int xgr_lazy_note(xgr_parser *p, int32_t rule, int32_t origin) {
    xgr_leo e;
    size_t b = (size_t)p->lazy_begin.data[p->lazy_begin.len - 1];
    if (noted(p->lazy_done.data, b, p->lazy_done.len, rule, origin, &e)) return XGR_OK;
    return XGR_VEC_PUSH(p->lazy_done, e) ? XGR_ERR_NOMEM : XGR_OK;
}

int xgr_capture_note(xgr_parser *p, int32_t rule, int32_t origin, int32_t state) {
    xgr_leo e;
    size_t b = (size_t)p->cap_begin.data[p->cap_begin.len - 1];
    if (noted(p->cap_done.data, b, p->cap_done.len, rule, origin, &e)) return XGR_OK;
    e.top.state = state;
    return XGR_VEC_PUSH(p->cap_done, e) ? XGR_ERR_NOMEM : XGR_OK;
}

int xgr_attrs_push_row(xgr_parser *p) {
    if (p->budgets && (XGR_VEC_PUSH(p->row_cp, p->cur_cp) || XGR_VEC_PUSH(p->row_tk, p->cur_tk) ||
                       XGR_VEC_PUSH(p->row_bud, (int32_t)p->buds.len) ||
                       XGR_VEC_PUSH(p->row_jc, p->cur_jc) || XGR_VEC_PUSH(p->row_js, p->cur_js)))
        return XGR_ERR_NOMEM;
    if (p->lazy && XGR_VEC_PUSH(p->lazy_begin, (int32_t)p->lazy_done.len)) return XGR_ERR_NOMEM;
    if (p->captures && XGR_VEC_PUSH(p->cap_begin, (int32_t)p->cap_done.len))
        return XGR_ERR_NOMEM;
    if ((p->captures || p->uniq) && XGR_VEC_PUSH(p->hist, p->cur_byte)) return XGR_ERR_NOMEM;
    if (p->uniq && XGR_VEC_PUSH(p->uq_begin, (int32_t)p->uq_done.len)) return XGR_ERR_NOMEM;
    return XGR_OK;
}

#define COPY_VEC(d, s)                                                                       \
    do {                                                                                     \
        if (XGR_VEC_RESERVE((d), (s).len)) return XGR_ERR_NOMEM;                             \
        if ((s).len) memcpy((d).data, (s).data, (s).len * sizeof *(s).data);                 \
        (d).len = (s).len;                                                                   \
    } while (0)

int xgr_attrs_copy(xgr_parser *dst, const xgr_parser *src) {
    if (src->uniq && !dst->uniq && xgr_parser_unique_on(dst)) return XGR_ERR_NOMEM;
    COPY_VEC(dst->row_cp, src->row_cp);
    COPY_VEC(dst->row_tk, src->row_tk);
    COPY_VEC(dst->row_jc, src->row_jc);
    COPY_VEC(dst->row_js, src->row_js);
    COPY_VEC(dst->row_bud, src->row_bud);
    COPY_VEC(dst->buds, src->buds);
    COPY_VEC(dst->lazy_done, src->lazy_done);
    COPY_VEC(dst->lazy_begin, src->lazy_begin);
    COPY_VEC(dst->cap_done, src->cap_done);
    COPY_VEC(dst->cap_begin, src->cap_begin);
    COPY_VEC(dst->hist, src->hist);
    COPY_VEC(dst->uq_done, src->uq_done);
    COPY_VEC(dst->uq_begin, src->uq_begin);
    COPY_VEC(dst->uq_text, src->uq_text);
    dst->cur_byte = src->cur_byte;
    dst->cur_cp = src->cur_cp;
    dst->cur_jc = src->cur_jc;
    dst->cur_js = src->cur_js;
    dst->cur_tk = src->cur_tk;
    dst->next_tk = src->next_tk;
    return XGR_OK;
}

void xgr_parser_budget_left(const xgr_parser *p, int32_t *chars, int32_t *tokens) {
    *chars = *tokens = XGR_NO_DEADLINE;
    if (!p->budgets) return;
    int32_t last = xgr_parser_rows(p) - 1;
    int32_t cp = p->row_cp.data[last], tc = p->row_tk.data[last] >> 1, jc = p->row_jc.data[last];
    for (int32_t k = p->row_begin.data[last]; k < p->row_begin.data[last + 1]; k++) {
        int32_t bud = p->items.data[k].bud;
        if (!bud) continue;
        const xgr_budget *b = &p->buds.data[bud];
        if (b->cdl != XGR_NO_DEADLINE && b->cdl - cp < *chars) *chars = b->cdl - cp;
        if (b->jdl != XGR_NO_DEADLINE && b->jdl - jc < *chars) *chars = b->jdl - jc;
        if (b->tdl != XGR_NO_DEADLINE && b->tdl - tc < *tokens) *tokens = b->tdl - tc;
    }
}

int xgr_parser_budget_open(const xgr_parser *p) {
    if (!p->budgets) return 0;
    int32_t last = xgr_parser_rows(p) - 1;
    for (int32_t k = p->row_begin.data[last]; k < p->row_begin.data[last + 1]; k++)
        if (p->items.data[k].bud) return 1;
    return 0;
}

int32_t xgr_parser_eff_left(const xgr_parser *p) {
    int32_t best = XGR_NO_DEADLINE;
    if (!p->budgets) return best;
    int32_t last = xgr_parser_rows(p) - 1;
    int32_t cp = p->row_cp.data[last], jc = p->row_jc.data[last];
    for (int32_t k = p->row_begin.data[last]; k < p->row_begin.data[last + 1]; k++) {
        int32_t bud = p->items.data[k].bud;
        if (!bud) continue;
        const xgr_budget *b = &p->buds.data[bud];
        if (b->ceff != XGR_NO_DEADLINE && b->ceff - cp < best) best = b->ceff - cp;
        if (b->jeff != XGR_NO_DEADLINE && b->jeff - jc < best) best = b->jeff - jc;
    }
    return best;
}

int32_t xgr_parser_token_deadline(const xgr_parser *p) {
    if (!p->budgets) return -1;
    int32_t last = xgr_parser_rows(p) - 1, best = XGR_NO_DEADLINE;
    for (int32_t k = p->row_begin.data[last]; k < p->row_begin.data[last + 1]; k++) {
        int32_t bud = p->items.data[k].bud;
        if (bud && p->buds.data[bud].tdl < best) best = p->buds.data[bud].tdl;
    }
    if (best == XGR_NO_DEADLINE) return -1;
    return best == XGR_NO_DEADLINE - 1 ? XGR_NO_DEADLINE : best; /* (add_sat's ceiling) */
}

/* ---- temperature ----------------------------------------------------------------------- */

/* What the open rules above an occurrence say: temperatures seen (lo..hi) on paths that
 * have one. */
typedef struct {
    int has;
    float lo, hi;
} temp_set;

static void temp_add(temp_set *t, float v) {
    if (!t->has) {
        t->has = 1;
        t->lo = t->hi = v;
        return;
    }
    if (v < t->lo) t->lo = v;
    if (v > t->hi) t->hi = v;
}

static void temp_merge(temp_set *t, const temp_set *u) {
    if (!u->has) return;
    temp_add(t, u->lo);
    temp_add(t, u->hi);
}

typedef struct {
    const xgr_parser *p;
    int64_t *key; /* (row << 32 | rule) + 1, 0 = empty */
    temp_set *val;
    uint8_t *busy;
    size_t cap, n;
    int64_t budget; /* work left */
} temp_memo;

static int memo_slot(temp_memo *m, int64_t key, size_t *slot) {
    if ((m->n + 1) * 2 > m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 64;
        int64_t *nk = xgr_calloc(nc, sizeof *nk);
        temp_set *nv = xgr_malloc(nc * sizeof *nv);
        uint8_t *nb = xgr_malloc(nc);
        if (!nk || !nv || !nb) {
            free(nk);
            free(nv);
            free(nb);
            return XGR_ERR_NOMEM;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->key[i]) continue;
            size_t h = (size_t)xgr_mix64((uint64_t)m->key[i]) & (nc - 1);
            while (nk[h]) h = (h + 1) & (nc - 1);
            nk[h] = m->key[i];
            nv[h] = m->val[i];
            nb[h] = m->busy[i];
        }
        free(m->key);
        free(m->val);
        free(m->busy);
        m->key = nk;
        m->val = nv;
        m->busy = nb;
        m->cap = nc;
    }
    size_t h = (size_t)xgr_mix64((uint64_t)key) & (m->cap - 1);
    while (m->key[h] && m->key[h] != key) h = (h + 1) & (m->cap - 1);
    *slot = h;
    return XGR_OK;
}

/* Temperatures of the contexts an occurrence of `rule` predicted in row `row` sits in. */
static int context_temps(temp_memo *m, int32_t row, int32_t rule, int depth, temp_set *out);

/* Temperatures on the paths of item `it` (in some row): its rule's own, else its
 * context's. */
static int item_temps(temp_memo *m, xgr_item it, int depth, temp_set *out) {
    const xgr_fsm *f = m->p->fsm;
    int32_t r = f->state_rule[it.state];
    const xgr_rule_attrs *a = &m->p->attrs[r];
    memset(out, 0, sizeof *out);
    if (a->has_temperature) {
        temp_add(out, a->temperature);
        return XGR_OK;
    }
    if (it.origin < 0) return XGR_OK;
    if (r == f->root && it.origin == 0) return XGR_OK;
    return context_temps(m, it.origin, r, depth + 1, out);
}

static int context_temps(temp_memo *m, int32_t row, int32_t rule, int depth, temp_set *out) {
    memset(out, 0, sizeof *out);
    if (depth > 4096 || --m->budget < 0) return XGR_OK; /* too deep: no say */
    int64_t key = (((int64_t)row << 32) | (uint32_t)rule) + 1;
    size_t slot;
    int rc = memo_slot(m, key, &slot);
    if (rc) return rc;
    if (m->key[slot]) {
        if (!m->busy[slot]) *out = m->val[slot];
        return XGR_OK; /* (a cycle: contributes nothing more) */
    }
    m->key[slot] = key;
    m->busy[slot] = 1;
    m->n++;
    const xgr_parser *p = m->p;
    const xgr_fsm *f = p->fsm;
    temp_set acc;
    memset(&acc, 0, sizeof acc);
    for (int32_t k = p->row_begin.data[row]; k < p->row_begin.data[row + 1]; k++) {
        xgr_item y = p->items.data[k];
        int waits = 0;
        for (int32_t e = f->edge_begin[y.state]; e < f->edge_begin[y.state + 1] && !waits; e++)
            waits = f->edges[e].ref == rule;
        if (!waits) continue;
        temp_set t;
        if ((rc = item_temps(m, y, depth, &t))) return rc;
        temp_merge(&acc, &t);
    }
    if ((rc = memo_slot(m, key, &slot))) return rc; /* (the table may have grown) */
    m->val[slot] = acc;
    m->busy[slot] = 0;
    *out = acc;
    return XGR_OK;
}

/* Is the budget of item `it` of the last row spent (it can take no more input)? */
static int spent(const xgr_parser *p, xgr_item it, int32_t last) {
    if (!it.bud) return 0;
    const xgr_budget *b = &p->buds.data[it.bud];
    /* (a decoded budget at its deadline still takes the rest of an escape, or the low half
     * of a surrogate pair) */
    return p->row_cp.data[last] >= b->cdl || (p->row_tk.data[last] >> 1) >= b->tdl ||
           (p->row_jc.data[last] >= b->jdl && p->row_js.data[last] == XGR_JS_TEXT);
}

int xgr_parser_temperature(const xgr_parser *p, int *has, float *out, int *conflict) {
    *has = 0;
    *conflict = 0;
    *out = 0;
    if (!p->attrs) return XGR_OK;
    const xgr_fsm *f = p->fsm;
    int32_t last = xgr_parser_rows(p) - 1;
    temp_memo m;
    memset(&m, 0, sizeof m);
    m.p = p;
    m.budget = 1000000;
    temp_set all;
    memset(&all, 0, sizeof all);
    int rc = XGR_OK;
    for (int32_t k = p->row_begin.data[last]; k < p->row_begin.data[last + 1] && !rc; k++) {
        xgr_item it = p->items.data[k];
        int32_t e0 = f->edge_begin[it.state];
        if (e0 == f->edge_begin[it.state + 1] || f->edges[e0].ref >= 0) continue; /* no byte */
        if (spent(p, it, last)) continue;
        if (p->lazy && p->attrs[f->state_rule[it.state]].lazy &&
            xgr_lazy_closed(p, f->state_rule[it.state], it.origin, last))
            continue;
        if (p->lazy && it.bud && xgr_bud_dead(p, it.bud, last)) continue;
        temp_set t;
        if (!(rc = item_temps(&m, it, 0, &t))) temp_merge(&all, &t);
    }
    free(m.key);
    free(m.val);
    free(m.busy);
    if (rc) return rc;
    if (all.has) {
        *has = 1;
        *out = all.hi;
        *conflict = all.lo != all.hi;
    }
    return XGR_OK;
}
