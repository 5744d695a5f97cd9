/* uniqueItems at run time: see unique.h. */
#include "unique.h"

#include <string.h>

#include "../common/json_canon.h"

/* the nesting the canonical form follows; deeper values are compared as written */
#define UQ_NESTING 256
/* levels from an element's waiting item up to its array (unique.h xgr_uniq_scope) */
#define UQ_SCOPE_DEPTH 6

void xgr_uniq_row_reset(xgr_parser *p) {
    p->uq_done.len = (size_t)p->uq_begin.data[p->uq_begin.len - 1];
    p->uq_text.len =
        p->uq_done.len ? p->uq_done.data[p->uq_done.len - 1].off + p->uq_done.data[p->uq_done.len - 1].len
                       : 0;
}

static uint64_t fnv(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

int xgr_uniq_value(xgr_parser *p, int32_t origin, int32_t cur_row, size_t *len, uint64_t *hash) {
    /* bytes of rows origin+1 .. cur_row: hist[origin+1 .. cur_row-1], then cur_byte */
    size_t n = (size_t)(cur_row - origin), room = XGR_JSON_VALUE_OUT(n);
    if (XGR_VEC_RESERVE(p->uq_tmp, room + n)) return XGR_ERR_NOMEM;
    char *raw = p->uq_tmp.data + room, *out = p->uq_tmp.data;
    if (n > 1) memcpy(raw, p->hist.data + origin + 1, n - 1);
    raw[n - 1] = (char)p->cur_byte;
    size_t cl = 0;
    int32_t known = 0;
    if (xgr_json_canonical_value(raw, n, UQ_NESTING, out, &cl, &known)) return XGR_ERR_NOMEM;
    if (!known) {
        memcpy(out, raw, n);
        cl = n;
    }
    *len = cl;
    *hash = fnv(out, cl);
    return XGR_OK;
}

static int scope_up(const xgr_parser *p, xgr_item y, int depth, int32_t *srule, int32_t *sorig) {
    const xgr_fsm *f = p->fsm;
    int32_t r = f->state_rule[y.state];
    if (p->attrs[r].unique >= XGR_UNIQUE_SCOPE) {
        *srule = r;
        *sorig = y.origin;
        return 1;
    }
    if (depth >= UQ_SCOPE_DEPTH || y.origin < 0) return 0;
    for (int32_t k = p->row_begin.data[y.origin]; k < p->row_begin.data[y.origin + 1]; k++) {
        xgr_item z = p->items.data[k];
        for (int32_t e = f->edge_begin[z.state]; e < f->edge_begin[z.state + 1]; e++)
            if (f->edges[e].ref == r) {
                if (scope_up(p, z, depth + 1, srule, sorig)) return 1;
                break;
            }
    }
    return 0;
}

int xgr_uniq_scope(const xgr_parser *p, xgr_item y, int32_t *srule, int32_t *sorig) {
    return scope_up(p, y, 0, srule, sorig);
}

int xgr_uniq_seen(xgr_parser *p, int32_t srule, int32_t sorig, int32_t origin, size_t len,
                  uint64_t hash) {
    /* Elements that started after the array and before this one; each one's latest
     * completion before `origin` (rows scanned newest first, an occurrence taken once). */
    int32_t last_taken = INT32_MAX;
    for (int32_t row = origin - 1; row > sorig; row--) {
        for (int32_t k = p->uq_begin.data[row + 1] - 1; k >= p->uq_begin.data[row]; k--) {
            const xgr_uq_ev *ev = &p->uq_done.data[k];
            if (ev->scope_rule != srule || ev->scope_origin != sorig || ev->origin < 0 ||
                ev->origin >= origin)
                continue;
            /* Elements do not overlap: an earlier element's completions all come before
             * the next one starts, so occurrences appear newest first in origin order and
             * one already taken has an origin at or after this one's. */
            if (ev->origin >= last_taken) continue;
            last_taken = ev->origin;
            if (ev->hash == hash && ev->len == len &&
                memcmp(p->uq_text.data + ev->off, p->uq_tmp.data, len) == 0)
                return 1;
        }
    }
    return 0;
}

int xgr_uniq_note(xgr_parser *p, int32_t srule, int32_t sorig, int32_t origin, size_t len,
                  uint64_t hash) {
    size_t b = (size_t)p->uq_begin.data[p->uq_begin.len - 1];
    for (size_t k = b; k < p->uq_done.len; k++) {
        const xgr_uq_ev *ev = &p->uq_done.data[k];
        if (ev->scope_rule == srule && ev->scope_origin == sorig && ev->origin == origin)
            return XGR_OK;
    }
    if (len > UINT32_MAX - p->uq_text.len) return XGR_ERR_LIMIT;
    xgr_uq_ev ev = {srule, sorig, origin, (uint32_t)p->uq_text.len, (uint32_t)len, hash};
    if (XGR_VEC_RESERVE(p->uq_text, p->uq_text.len + len) || XGR_VEC_PUSH(p->uq_done, ev))
        return XGR_ERR_NOMEM;
    if (len) memcpy(p->uq_text.data + p->uq_text.len, p->uq_tmp.data, len);
    p->uq_text.len += len;
    return XGR_OK;
}

int xgr_uniq_refused_last(const xgr_parser *p) {
    int32_t last = (int32_t)p->uq_begin.len - 2; /* (the last row's events) */
    if (last < 0) return 0;
    for (int32_t k = p->uq_begin.data[last]; k < p->uq_begin.data[last + 1]; k++)
        if (p->uq_done.data[k].origin == -2) return 1;
    return 0;
}

int xgr_uniq_open(xgr_parser *p) {
    /* newest first: an array's end comes after all of its elements */
    struct {
        int32_t rule, origin;
    } ended[32];
    int n_ended = 0;
    for (size_t k = p->uq_done.len; k-- > 0;) {
        const xgr_uq_ev *ev = &p->uq_done.data[k];
        if (ev->origin == -2) continue; /* (a refused value) */
        int seen = 0;
        for (int j = 0; j < n_ended && !seen; j++)
            seen = ended[j].rule == ev->scope_rule && ended[j].origin == ev->scope_origin;
        if (ev->origin >= 0) {
            if (!seen) return 1;
        } else if (!seen) {
            if (n_ended == 32) return 1; /* (unsure: open) */
            ended[n_ended].rule = ev->scope_rule;
            ended[n_ended++].origin = ev->scope_origin;
        }
    }
    return 0;
}
