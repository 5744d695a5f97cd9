/* Capture events out of the parser rows (parse/attrs.h xgr_parser_captures).
 *
 * Each row lists the occurrences (rule, origin) that completed in it and are capture
 * events (attrs.h xgr_capture_wanted), with the state their item was in. An event of a
 * captured rule gives (label, bytes of the span). Lark suffix= / stop= rules (ir.h
 * hidden_kind) end with a marker of hidden_bytes bytes when the completion went through
 * it (xgr_marker_seen):
 *   - the rule's own capture leaves the marker out;
 *   - its stop_capture label gets the marker, as an event right before the rule's own;
 *   - (hidden_before: the marker is the bytes right before the occurrence, outside it)
 *   - a stop marker is also left out of every enclosing capture: an event of a rule P
 *     whose span holds the stop occurrence and that can reach the stop rule (through
 *     rule references: an occurrence on an unrelated Earley branch that happens to lie
 *     inside P's span does not count).
 * With dedup, each occurrence gives its last (longest) completion, in completion order;
 * the stop spans hidden from enclosing captures are those of every completion. */
#include "attrs.h"

typedef struct {
    int32_t rule, origin, row, idx, state;
} cap_ev;

static int cap_cmp(const void *a, const void *b) {
    const cap_ev *x = a, *y = b;
    if (x->rule != y->rule) return x->rule < y->rule ? -1 : 1;
    if (x->origin != y->origin) return x->origin < y->origin ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int idx_cmp(const void *a, const void *b) {
    const cap_ev *x = a, *y = b;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* A stop marker hidden from enclosing captures: the bytes of rows (from, to] of an
 * occurrence (rule, origin) that completed in row `row`. */
typedef struct {
    int32_t rule, origin, from, to, row;
} hidden_span;

/* The marker of a completion that went through it: rows (*from, *to]. */
static void marker_span(const xgr_rule_attrs *a, int32_t origin, int32_t row, int32_t *from,
                        int32_t *to) {
    if (a->hidden_before) {
        *to = origin;
        *from = origin - a->hidden_bytes;
        if (*from < 0) *from = 0;
    } else {
        *to = row;
        *from = row - a->hidden_bytes;
        if (*from < origin) *from = origin;
    }
}

typedef struct {
    const xgr_parser *p;
    XGR_VEC(char) buf;
    hidden_span *hid;
    size_t n_hid;
    uint8_t **reach; /* per rule, lazily: the rules it reaches through references */
    int32_t *queue;
    uint8_t *keep;   /* per byte of the span being written */
} cap_out;

/* The rules `rule` reaches (itself only through a cycle), computed once. */
static const uint8_t *reach_of(cap_out *c, int32_t rule) {
    const xgr_fsm *f = c->p->fsm;
    if (c->reach[rule]) return c->reach[rule];
    uint8_t *seen = xgr_calloc((size_t)f->n_rules, 1);
    if (!seen) return NULL;
    size_t head = 0, tail = 0;
    c->queue[tail++] = rule;
    while (head < tail) {
        int32_t r = c->queue[head++];
        int32_t kids[1] = {f->repeat_child[r]};
        if (kids[0] >= 0 && !seen[kids[0]]) {
            seen[kids[0]] = 1;
            c->queue[tail++] = kids[0];
        }
        for (int32_t s = f->rule_start[r]; s < xgr_fsm_rule_end(f, r); s++)
            for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++) {
                int32_t t = f->edges[e].ref;
                if (t >= 0 && !seen[t]) {
                    seen[t] = 1;
                    c->queue[tail++] = t;
                }
            }
    }
    c->reach[rule] = seen;
    return seen;
}

/* Appends one event: label, then the bytes of rows (from, to] whose keep flag is set
 * (keep NULL: all of them). */
static int put(cap_out *c, const char *label, int32_t from, int32_t to, const uint8_t *keep) {
    uint32_t ll = (uint32_t)strlen(label);
    uint32_t span = to > from ? (uint32_t)(to - from) : 0, vl = 0;
    size_t at = c->buf.len;
    if (XGR_VEC_RESERVE(c->buf, at + 8 + ll + span)) return XGR_ERR_NOMEM;
    char *d = c->buf.data + at;
    memcpy(d + 4, label, ll);
    for (uint32_t k = 0; k < span; k++)
        if (!keep || keep[k]) d[8 + ll + vl++] = (char)c->p->hist.data[from + 1 + (int32_t)k];
    memcpy(d, &ll, 4);
    memcpy(d + 4 + ll, &vl, 4);
    c->buf.len = at + 8 + ll + vl;
    return XGR_OK;
}

/* The events of one completion: the stop_capture marker, then the rule's own capture. */
static int put_event(cap_out *c, const cap_ev *ev) {
    const xgr_parser *p = c->p;
    const xgr_rule_attrs *a = &p->attrs[ev->rule];
    int32_t end = ev->row;
    int rc;
    if (a->hidden_kind && xgr_marker_seen(p->fsm, ev->rule, ev->state)) {
        int32_t from, to;
        marker_span(a, ev->origin, ev->row, &from, &to);
        if (a->stop_capture_off >= 0 &&
            (rc = put(c, p->fsm->attr_names + a->stop_capture_off, from, to, NULL)))
            return rc;
        if (!a->hidden_before) end = from;
    }
    if (a->capture_off < 0) return XGR_OK;
    const uint8_t *keep = NULL;
    if (c->n_hid && end > ev->origin) {
        const uint8_t *reach = reach_of(c, ev->rule);
        if (!reach) return XGR_ERR_NOMEM;
        int32_t len = end - ev->origin;
        memset(c->keep, 1, (size_t)len);
        for (size_t h = 0; h < c->n_hid; h++) {
            const hidden_span *s = &c->hid[h];
            if (s->origin < ev->origin || s->row > ev->row || !reach[s->rule] ||
                (s->rule == ev->rule && s->origin == ev->origin))
                continue;
            for (int32_t k = s->from > ev->origin ? s->from : ev->origin; k < s->to && k < end;
                 k++)
                c->keep[k - ev->origin] = 0;
        }
        keep = c->keep;
    }
    return put(c, p->fsm->attr_names + a->capture_off, ev->origin, end, keep);
}

int xgr_parser_captures(const xgr_parser *p, int dedup, char **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    if (!p->captures) {
        if (!(*out = xgr_malloc(1))) return XGR_ERR_NOMEM;
        return XGR_OK;
    }
    const xgr_fsm *f = p->fsm;
    int32_t rows = xgr_parser_rows(p);
    size_t n = (size_t)p->cap_begin.data[rows];
    cap_out c;
    memset(&c, 0, sizeof c);
    c.p = p;
    cap_ev *ev = xgr_malloc((n ? n : 1) * sizeof *ev);
    c.hid = xgr_malloc((n ? n : 1) * sizeof *c.hid);
    int rc = ev && c.hid ? XGR_OK : XGR_ERR_NOMEM;
    size_t m = 0;
    for (int32_t j = 0; j < rows && !rc; j++)
        for (int32_t k = p->cap_begin.data[j]; k < p->cap_begin.data[j + 1]; k++) {
            const xgr_leo *d = &p->cap_done.data[k];
            cap_ev e = {d->rule, d->top.origin, j, (int32_t)m, d->top.state};
            ev[m++] = e;
            const xgr_rule_attrs *a = &p->attrs[e.rule];
            if (a->hidden_kind == XGR_HIDDEN_STOP && xgr_marker_seen(f, e.rule, e.state)) {
                hidden_span h = {e.rule, e.origin, 0, 0, j};
                marker_span(a, e.origin, j, &h.from, &h.to);
                c.hid[c.n_hid++] = h;
            }
        }
    if (!rc && c.n_hid) {
        c.reach = xgr_calloc((size_t)f->n_rules, sizeof *c.reach);
        c.queue = xgr_malloc(((size_t)f->n_rules + 1) * sizeof *c.queue);
        c.keep = xgr_malloc((size_t)rows + 1);
        if (!c.reach || !c.queue || !c.keep) rc = XGR_ERR_NOMEM;
    }
    if (!rc && dedup && m > 1) {
        /* the last (longest) completion of each occurrence, in the order they happened */
        qsort(ev, m, sizeof *ev, cap_cmp);
        size_t w = 0;
        for (size_t i = 0; i < m; i++)
            if (i + 1 == m || ev[i + 1].rule != ev[i].rule || ev[i + 1].origin != ev[i].origin)
                ev[w++] = ev[i];
        m = w;
        qsort(ev, m, sizeof *ev, idx_cmp);
    }
    for (size_t i = 0; i < m && !rc; i++) rc = put_event(&c, &ev[i]);
    if (!rc && !c.buf.data && !(c.buf.data = xgr_malloc(1))) rc = XGR_ERR_NOMEM;
    free(ev);
    free(c.hid);
    if (c.reach)
        for (int32_t r = 0; r < f->n_rules; r++) free(c.reach[r]);
    free(c.reach);
    free(c.queue);
    free(c.keep);
    if (rc) {
        XGR_VEC_FREE(c.buf);
        return rc;
    }
    *out = c.buf.data;
    *out_len = c.buf.len;
    return XGR_OK;
}
