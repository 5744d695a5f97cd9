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

/* ---- variable markers: body and marker rules run over the occurrence's bytes ---------- */

typedef struct {
    const xgr_fsm *f;
    const uint8_t *s; /* the bytes */
    int32_t n;
    int64_t work; /* left */
} ends_ctx;

/* The positions e in [p, n] such that rule derives s[p .. e), into ends (n + 1 flags, set
 * by the caller to 0). XGR_ERR_LIMIT when the work bound is spent or recursion is deep. */
static int rule_ends(ends_ctx *x, int32_t rule, int32_t p, uint8_t *ends, int depth) {
    const xgr_fsm *f = x->f;
    int32_t n = x->n, rc = XGR_OK;
    if (depth > 64 || --x->work < 0) return XGR_ERR_LIMIT;
    if (f->rule_kind[rule] == XGR_RULE_REPEAT) {
        /* k matches of the child (which never derives ""), repeat_min <= k <= repeat_max */
        uint8_t *cur = xgr_calloc((size_t)n + 1, 1), *nxt = xgr_calloc((size_t)n + 1, 1);
        if (!cur || !nxt) rc = XGR_ERR_NOMEM;
        if (!rc) cur[p] = 1;
        if (!rc && f->repeat_min[rule] == 0) ends[p] = 1;
        for (int32_t k = 1; !rc && (f->repeat_max[rule] < 0 || k <= f->repeat_max[rule]); k++) {
            int any = 0;
            memset(nxt, 0, (size_t)n + 1);
            for (int32_t q = 0; q <= n && !rc; q++)
                if (cur[q]) rc = rule_ends(x, f->repeat_child[rule], q, nxt, depth + 1);
            for (int32_t q = 0; q <= n; q++) {
                any |= nxt[q];
                if (nxt[q] && k >= f->repeat_min[rule]) ends[q] = 1;
            }
            uint8_t *t = cur;
            cur = nxt;
            nxt = t;
            if (!any) break;
        }
        free(cur);
        free(nxt);
        return rc;
    }
    if (f->rule_nullable[rule]) ends[p] = 1;
    int32_t s0 = f->rule_start[rule], ns = xgr_fsm_rule_end(f, rule) - s0;
    size_t cells = (size_t)ns * ((size_t)(n - p) + 1); /* (state, position - p) */
    uint8_t *seen = xgr_calloc(cells, 1);
    int32_t *stack = xgr_malloc((cells + 1) * 2 * sizeof *stack);
    uint8_t *sub = xgr_malloc((size_t)n + 1);
    if (!seen || !stack || !sub) rc = XGR_ERR_NOMEM;
    size_t top = 0;
    if (!rc) {
        seen[0] = 1;
        stack[top++] = s0;
        stack[top++] = p;
    }
#define PUSH(st, pos)                                                                        \
    do {                                                                                     \
        size_t c_ = (size_t)((pos) - p) * (size_t)ns + (size_t)((st) - s0);                  \
        if (!seen[c_]) {                                                                     \
            seen[c_] = 1;                                                                    \
            stack[top++] = (st);                                                             \
            stack[top++] = (pos);                                                            \
        }                                                                                    \
    } while (0)
    while (!rc && top) {
        int32_t q = stack[top - 2], at = stack[top - 1];
        top -= 2;
        if (--x->work < 0) {
            rc = XGR_ERR_LIMIT;
            break;
        }
        if (f->final[q]) ends[at] = 1;
        for (int32_t e = f->edge_begin[q]; e < f->edge_begin[q + 1] && !rc; e++) {
            const xgr_edge *ed = &f->edges[e];
            if (ed->target < s0 || ed->target >= s0 + ns) continue; /* (not this rule's) */
            if (ed->ref < 0) {
                if (at < n && x->s[at] >= ed->lo && x->s[at] <= ed->hi) PUSH(ed->target, at + 1);
                continue;
            }
            memset(sub, 0, (size_t)n + 1);
            if ((rc = rule_ends(x, ed->ref, at, sub, depth + 1))) break;
            for (int32_t k = at; k <= n; k++)
                if (sub[k]) PUSH(ed->target, k);
        }
    }
#undef PUSH
    free(seen);
    free(stack);
    free(sub);
    return rc;
}

/* The first split k of s[0 .. n) into a body s[0 .. k) and a marker s[k .. n): *k, or -1
 * when there is none (or finding it is too much work). */
static int split_marker(const xgr_fsm *f, const xgr_rule_attrs *a, const uint8_t *s, int32_t n,
                        int32_t *k) {
    *k = -1;
    ends_ctx x = {f, s, n, 1000000};
    uint8_t *body = xgr_calloc((size_t)n + 1, 1), *mark = xgr_malloc((size_t)n + 1);
    int rc = body && mark ? XGR_OK : XGR_ERR_NOMEM;
    if (!rc) rc = rule_ends(&x, a->hidden_body, 0, body, 0);
    for (int32_t i = 0; i <= n && !rc && *k < 0; i++) {
        if (!body[i]) continue;
        memset(mark, 0, (size_t)n + 1);
        if (!(rc = rule_ends(&x, a->hidden_marker, i, mark, 0)) && mark[n]) *k = i;
    }
    free(body);
    free(mark);
    return rc == XGR_ERR_LIMIT ? XGR_OK : rc;
}

/* The marker of a completion that went through it: rows (*from, *to]; *from = -1 when it
 * cannot be found (a variable marker without a split). */
static int marker_span(const xgr_parser *p, const xgr_rule_attrs *a, int32_t origin,
                       int32_t row, int32_t *from, int32_t *to) {
    if (a->hidden_body >= 0 && a->hidden_marker >= 0) {
        int32_t k;
        int rc = split_marker(p->fsm, a, p->hist.data + origin + 1, row - origin, &k);
        *to = row;
        *from = k < 0 ? -1 : origin + k;
        return rc;
    }
    if (a->hidden_before) {
        *to = origin;
        *from = origin - a->hidden_bytes;
        if (*from < 0) *from = 0;
    } else {
        *to = row;
        *from = row - a->hidden_bytes;
        if (*from < origin) *from = origin;
    }
    return XGR_OK;
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
        if ((rc = marker_span(p, a, ev->origin, ev->row, &from, &to))) return rc;
        if (from < 0) goto own; /* (no split found: nothing hidden) */
        if (a->stop_capture_off >= 0 &&
            (rc = put(c, p->fsm->attr_names + a->stop_capture_off, from, to, NULL)))
            return rc;
        if (!a->hidden_before) end = from;
    }
own:
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
                if ((rc = marker_span(p, a, e.origin, j, &h.from, &h.to))) break;
                if (h.from >= 0) c.hid[c.n_hid++] = h;
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
