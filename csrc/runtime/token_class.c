/* Token classes (`ExcludeToken(...)`) at run time. A class is spelled as a span of
 * markers (common/token_marker.h); the parser sees only bytes, so the classes a position
 * admits are found by walking the spans the parser accepts from there: after the
 * opening marker, each marker's five digit bytes follow the parser's next-byte set, so
 * the walk visits only the admitted spans (a few markers each). */
#include "token_class.h"

#include <string.h>

#include "../common/token_marker.h"

#define TC_MAX_STEPS 1000000

typedef struct {
    xgr_parser *p;
    xgr_tc_list *out;
    XGR_VEC(int32_t) cur; /* excluded ids of the span so far */
    int64_t steps;
} tc_walk;

static int tc_step(tc_walk *w, uint8_t b, int *alive) {
    if (++w->steps > TC_MAX_STEPS)
        return xgr_fail(XGR_ERR_LIMIT, "token classes: more than %d parser steps", TC_MAX_STEPS);
    return xgr_parser_step(w->p, b, alive);
}

static int walk_marker(tc_walk *w);

/* Inside a marker: `level` digits read, their value `id`. */
static int walk_digits(tc_walk *w, int level, int32_t id) {
    int rc = XGR_OK;
    if (level == XGR_TOKEN_MARKER_LEN - 1) {
        if (id == XGR_TOKEN_CLASS_CLOSE) {
            if (XGR_VEC_PUSH(*w->out, (int32_t)w->cur.len)) return XGR_ERR_NOMEM;
            for (size_t i = 0; i < w->cur.len; i++)
                if (XGR_VEC_PUSH(*w->out, w->cur.data[i])) return XGR_ERR_NOMEM;
            return XGR_OK;
        }
        if (id >= XGR_TOKEN_PSEUDO_MIN) return XGR_OK;
        if (XGR_VEC_PUSH(w->cur, id)) return XGR_ERR_NOMEM;
        rc = walk_marker(w);
        w->cur.len--;
        return rc;
    }
    uint32_t nb[8];
    xgr_parser_next_bytes(w->p, nb);
    int32_t rows = xgr_parser_rows(w->p);
    for (int b = 0x80; b <= 0xBF && !rc; b++) {
        if (!(nb[b >> 5] >> (b & 31) & 1)) continue;
        int alive;
        if ((rc = tc_step(w, (uint8_t)b, &alive)) || !alive) continue;
        rc = walk_digits(w, level + 1, id << 6 | (b & 0x3F));
        xgr_parser_truncate(w->p, rows);
    }
    return rc;
}

/* At a marker boundary inside a span. */
static int walk_marker(tc_walk *w) {
    int32_t rows = xgr_parser_rows(w->p);
    int alive, rc = tc_step(w, XGR_TOKEN_MARKER_LEAD, &alive);
    if (!rc && alive) rc = walk_digits(w, 0, 0);
    xgr_parser_truncate(w->p, rows);
    return rc;
}

int xgr_token_classes_admitted(xgr_parser *p, xgr_tc_list *out) {
    tc_walk w = {p, out, {0}, 0};
    int32_t rows = xgr_parser_rows(p);
    uint8_t open[XGR_TOKEN_MARKER_LEN];
    xgr_token_marker(XGR_TOKEN_CLASS_OPEN, open);
    int rc = XGR_OK, alive = 1;
    for (int i = 0; i < XGR_TOKEN_MARKER_LEN && !rc && alive; i++)
        rc = tc_step(&w, open[i], &alive);
    if (!rc && alive) rc = walk_marker(&w);
    xgr_parser_truncate(p, rows);
    XGR_VEC_FREE(w.cur);
    return rc;
}

int xgr_token_class_excludes(const int32_t *cls, int32_t id) {
    int32_t lo = 0, hi = cls[0];
    const int32_t *ids = cls + 1;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (ids[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < cls[0] && ids[lo] == id;
}

void xgr_token_class_spell(const int32_t *cls, uint8_t *out) {
    xgr_token_marker(XGR_TOKEN_CLASS_OPEN, out);
    for (int32_t i = 0; i < cls[0]; i++)
        xgr_token_marker(cls[1 + i], out + (size_t)(i + 1) * XGR_TOKEN_MARKER_LEN);
    xgr_token_marker(XGR_TOKEN_CLASS_CLOSE, out + (size_t)(cls[0] + 1) * XGR_TOKEN_MARKER_LEN);
}

/* Steps s[0..n) (the last byte with `extra` in its kernel); rows restored on a dead byte. */
static int feed_one(xgr_parser *p, const uint8_t *s, size_t n, const xgr_item *extra,
                    size_t n_extra, int32_t tk, int *ok) {
    int32_t rows = xgr_parser_rows(p);
    *ok = 0;
    for (size_t i = 0; i < n; i++) {
        if (p->budgets) p->next_tk = i + 1 == n ? tk & ~1 : tk;
        int alive, rc = i + 1 == n ? xgr_parser_step_with(p, s[i], extra, n_extra, &alive)
                                   : xgr_parser_step(p, s[i], &alive);
        if (rc || !alive) {
            xgr_parser_truncate(p, rows);
            return rc;
        }
    }
    *ok = 1;
    return XGR_OK;
}

int xgr_token_feed_union(xgr_parser *p, const xgr_tc_reading *r, size_t n, int *ok) {
    int32_t rows = xgr_parser_rows(p);
    int32_t tk = p->next_tk;
    XGR_VEC(xgr_item) extra = {0};
    size_t main = n;
    int rc = XGR_OK;
    *ok = 0;
    for (size_t a = 0; a < n && !rc; a++) {
        int ok_a;
        if (!r[a].n || (rc = feed_one(p, r[a].s, r[a].n, NULL, 0, tk, &ok_a)) || !ok_a) continue;
        if (main == n) {
            main = a;
        } else {
            /* its last row's items from before the token; those it predicted there the
             * closure of the union predicts again */
            int32_t last = xgr_parser_rows(p) - 1;
            for (int32_t k = p->row_begin.data[last]; k < p->row_begin.data[last + 1] && !rc; k++)
                if (p->items.data[k].origin < rows && XGR_VEC_PUSH(extra, p->items.data[k]))
                    rc = XGR_ERR_NOMEM;
        }
        xgr_parser_truncate(p, rows);
    }
    if (!rc && main < n) rc = feed_one(p, r[main].s, r[main].n, extra.data, extra.len, tk, ok);
    XGR_VEC_FREE(extra);
    return rc;
}

int xgr_token_class_member(const struct xgr_vocab *v, const int32_t *stop, int32_t n_stop,
                           int32_t id) {
    if (id < 0 || id >= v->n_tokens || v->is_special[id]) return 0;
    for (int32_t i = 0; i < n_stop; i++)
        if (stop[i] == id) return 0;
    return 1;
}

int xgr_token_classes_mask(xgr_parser *p, const uint32_t *members, uint32_t *scratch,
                           size_t row_words, uint32_t *row) {
    xgr_tc_list cls = {0};
    int rc = xgr_token_classes_admitted(p, &cls);
    if (rc == XGR_ERR_LIMIT) rc = XGR_OK; /* a work limit leaves them out, as elsewhere */
    for (size_t i = 0; !rc && i < cls.len; i += 1 + (size_t)cls.data[i]) {
        memcpy(scratch, members, row_words * sizeof *scratch);
        for (int32_t k = 1; k <= cls.data[i]; k++) {
            int32_t id = cls.data[i + (size_t)k];
            if ((size_t)(id >> 5) < row_words) scratch[id >> 5] &= ~(1u << (id & 31));
        }
        for (size_t w = 0; w < row_words; w++) row[w] |= scratch[w];
    }
    XGR_VEC_FREE(cls);
    return rc;
}

int xgr_token_accept_union(xgr_parser *p, const struct xgr_vocab *v, int32_t token, int named,
                           int *done, int *ok) {
    xgr_tc_list cls = {0};
    XGR_VEC(xgr_tc_reading) rd = {0};
    XGR_VEC(uint8_t) spans = {0};
    uint8_t mk[XGR_TOKEN_MARKER_LEN];
    int32_t tk = p->next_tk;
    *done = *ok = 0;
    int rc = xgr_token_classes_admitted(p, &cls);
    if (rc == XGR_ERR_LIMIT) rc = XGR_OK;
    p->next_tk = tk;
    size_t n_cls = 0, need = 0;
    for (size_t i = 0; !rc && i < cls.len; i += 1 + (size_t)cls.data[i])
        if (!xgr_token_class_excludes(cls.data + i, token)) {
            n_cls++;
            need += ((size_t)cls.data[i] + 2) * XGR_TOKEN_MARKER_LEN;
        }
    if (rc || (!n_cls && !named)) goto done;
    if (XGR_VEC_RESERVE(spans, need + 1) || XGR_VEC_RESERVE(rd, n_cls + 2)) {
        rc = XGR_ERR_NOMEM;
        goto done;
    }
    if (named) {
        xgr_token_marker(token, mk);
        rd.data[rd.len++] = (xgr_tc_reading){mk, sizeof mk};
    }
    for (size_t i = 0; i < cls.len; i += 1 + (size_t)cls.data[i]) {
        if (xgr_token_class_excludes(cls.data + i, token)) continue;
        size_t len = ((size_t)cls.data[i] + 2) * XGR_TOKEN_MARKER_LEN;
        xgr_token_class_spell(cls.data + i, spans.data + spans.len);
        rd.data[rd.len++] = (xgr_tc_reading){spans.data + spans.len, len};
        spans.len += len;
    }
    if (!(v->ff_bits[token >> 5] >> (token & 31) & 1)) { /* 0xFF in it: never text here */
        uint32_t len;
        const uint8_t *s = xgr_vocab_token(v, token, &len);
        rd.data[rd.len++] = (xgr_tc_reading){s, len};
    }
    *done = 1;
    rc = xgr_token_feed_union(p, rd.data, rd.len, ok);
done:
    XGR_VEC_FREE(cls);
    XGR_VEC_FREE(rd);
    XGR_VEC_FREE(spans);
    return rc;
}
