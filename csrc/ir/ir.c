/* Grammar IR builder: appends nodes and rules to flat pools. */
#include "ir.h"

#include <stdio.h>

xgr_grammar *xgr_ir_new(void) {
    xgr_grammar *g = xgr_calloc(1, sizeof *g);
    if (!g) return NULL;
    atomic_init(&g->refcount, 1);
    g->root = -1;
    /* Pools never NULL: `pool.data + off` with an empty pool (an empty class or literal)
     * would be NULL + 0, undefined behaviour in C. */
    if (XGR_VEC_RESERVE(g->kids, 4) || XGR_VEC_RESERVE(g->bytes, 4) ||
        XGR_VEC_RESERVE(g->ranges, 4)) {
        xgr_ir_free(g);
        return NULL;
    }
    return g;
}

void xgr_ir_free(xgr_grammar *g) {
    if (!g) return;
    XGR_VEC_FREE(g->nodes);
    XGR_VEC_FREE(g->rules);
    XGR_VEC_FREE(g->kids);
    XGR_VEC_FREE(g->bytes);
    XGR_VEC_FREE(g->ranges);
    XGR_VEC_FREE(g->names);
    free(g->name_index);
    free(g);
}

size_t xgr_ir_memory(const xgr_grammar *g) {
    if (!g) return 0;
    return sizeof *g + g->nodes.cap * sizeof *g->nodes.data + g->rules.cap * sizeof *g->rules.data +
           g->kids.cap * sizeof *g->kids.data + g->bytes.cap + g->ranges.cap * sizeof *g->ranges.data +
           g->names.cap + g->name_index_cap * sizeof *g->name_index;
}

static int32_t push_node(xgr_grammar *g, xgr_node n) {
    if (g->nodes.len >= INT32_MAX) {
        xgr_fail(XGR_ERR_LIMIT, "grammar has too many nodes");
        return -1;
    }
    if (XGR_VEC_PUSH(g->nodes, n)) return -1;
    return (int32_t)(g->nodes.len - 1);
}

int32_t xgr_ir_empty(xgr_grammar *g) {
    xgr_node n = {XGR_NODE_EMPTY, -1, 0, 0, 0, 0, 0};
    return push_node(g, n);
}

int32_t xgr_ir_bytes(xgr_grammar *g, const uint8_t *s, size_t len) {
    if (len == 0) return xgr_ir_empty(g);
    if (len > INT32_MAX || g->bytes.len > (size_t)INT32_MAX - len) {
        xgr_fail(XGR_ERR_LIMIT, "grammar literal pool too large");
        return -1;
    }
    size_t off = g->bytes.len;
    if (XGR_VEC_RESERVE(g->bytes, off + len)) return -1;
    memcpy(g->bytes.data + off, s, len);
    g->bytes.len += len;
    xgr_node n = {XGR_NODE_BYTES, -1, (int32_t)off, (int32_t)len, 0, 0, 0};
    return push_node(g, n);
}

static int32_t push_ranges(xgr_grammar *g, int kind, const uint32_t *r, size_t n_ranges,
                           int negated) {
    size_t off = g->ranges.len;
    if (n_ranges > (size_t)INT32_MAX / 2 || off > (size_t)INT32_MAX - 2 * n_ranges) {
        xgr_fail(XGR_ERR_LIMIT, "grammar class pool too large");
        return -1;
    }
    if (XGR_VEC_RESERVE(g->ranges, off + 2 * n_ranges)) return -1;
    if (n_ranges) memcpy(g->ranges.data + off, r, 2 * n_ranges * sizeof *r);
    g->ranges.len += 2 * n_ranges;
    xgr_node n = {kind, -1, (int32_t)off, (int32_t)n_ranges, 0, 0, negated ? 1 : 0};
    return push_node(g, n);
}

int32_t xgr_ir_class(xgr_grammar *g, const uint32_t *ranges, size_t n_ranges, int negated) {
    return push_ranges(g, XGR_NODE_CLASS, ranges, n_ranges, negated);
}

int32_t xgr_ir_byte_class(xgr_grammar *g, const uint32_t *ranges, size_t n_ranges,
                          int negated) {
    return push_ranges(g, XGR_NODE_BYTE_CLASS, ranges, n_ranges, negated);
}

static int32_t push_list(xgr_grammar *g, int kind, const int32_t *kids, size_t n) {
    size_t off = g->kids.len;
    if (n > (size_t)INT32_MAX || off > (size_t)INT32_MAX - n) {
        xgr_fail(XGR_ERR_LIMIT, "grammar child pool too large");
        return -1;
    }
    if (XGR_VEC_RESERVE(g->kids, off + n)) return -1;
    if (n) memcpy(g->kids.data + off, kids, n * sizeof *kids);
    g->kids.len += n;
    xgr_node nd = {kind, -1, (int32_t)off, (int32_t)n, 0, 0, 0};
    return push_node(g, nd);
}

int32_t xgr_ir_seq(xgr_grammar *g, const int32_t *kids, size_t n) {
    if (n == 0) return xgr_ir_empty(g);
    if (n == 1) return kids[0];
    return push_list(g, XGR_NODE_SEQ, kids, n);
}

int32_t xgr_ir_alt(xgr_grammar *g, const int32_t *kids, size_t n) {
    if (n == 1) return kids[0];
    return push_list(g, XGR_NODE_ALT, kids, n);
}

int32_t xgr_ir_ref(xgr_grammar *g, int32_t rule) {
    xgr_node n = {XGR_NODE_REF, rule, 0, 0, 0, 0, 0};
    return push_node(g, n);
}

int32_t xgr_ir_repeat(xgr_grammar *g, int32_t child, int32_t min, int32_t max) {
    if (min < 0 || (max >= 0 && max < min)) {
        xgr_fail(XGR_ERR_SEMANTIC, "invalid repetition bounds {%d,%d}", (int)min, (int)max);
        return -1;
    }
    xgr_node n = {XGR_NODE_REPEAT, child, 0, 0, min, max, 0};
    return push_node(g, n);
}

int32_t xgr_ir_tag_dispatch(xgr_grammar *g, const uint8_t *const *trig, const size_t *trig_len,
                            const int32_t *trig_rule, size_t n_trig,
                            const uint8_t *const *excl, const size_t *excl_len, size_t n_excl,
                            int loop_after_dispatch) {
    if (n_trig > (size_t)INT32_MAX / 4 || n_excl > (size_t)INT32_MAX / 4) {
        xgr_fail(XGR_ERR_LIMIT, "TagDispatch has too many strings");
        return -1;
    }
    for (size_t i = 0; i < n_trig; i++) {
        if (!trig_len[i] || !trig[i] || trig_rule[i] < 0 || (size_t)trig_rule[i] >= g->rules.len) {
            xgr_fail(XGR_ERR_INVALID_ARG, "TagDispatch trigger %zu: empty string or bad rule id", i);
            return -1;
        }
    }
    for (size_t j = 0; j < n_excl; j++) {
        if (!excl_len[j] || !excl[j]) {
            xgr_fail(XGR_ERR_INVALID_ARG, "TagDispatch excluded string %zu is empty", j);
            return -1;
        }
    }
    size_t n = 2 * n_trig + n_excl;
    int32_t *pay = xgr_malloc((n ? n : 1) * sizeof *pay);
    if (!pay) return -1;
    for (size_t i = 0; i < n_trig; i++) {
        pay[2 * i] = xgr_ir_bytes(g, trig[i], trig_len[i]);
        pay[2 * i + 1] = trig_rule[i];
        if (pay[2 * i] < 0) goto fail;
    }
    for (size_t j = 0; j < n_excl; j++)
        if ((pay[2 * n_trig + j] = xgr_ir_bytes(g, excl[j], excl_len[j])) < 0) goto fail;
    int32_t id = push_list(g, XGR_NODE_TAG_DISPATCH, pay, n);
    free(pay);
    if (id < 0) return -1;
    xgr_node *nd = &g->nodes.data[id];
    nd->count = (int32_t)n_trig;
    nd->min = (int32_t)n_excl;
    nd->a = loop_after_dispatch ? 1 : 0;
    return id;
fail:
    free(pay);
    return -1;
}

int32_t xgr_ir_substring(xgr_grammar *g, const uint8_t *const *chunk, const size_t *chunk_len,
                         size_t n) {
    if (n > (size_t)INT32_MAX / 2) {
        xgr_fail(XGR_ERR_LIMIT, "Substring has too many chunks");
        return -1;
    }
    int32_t *kids = xgr_malloc((n ? n : 1) * sizeof *kids);
    if (!kids) return -1;
    for (size_t i = 0; i < n; i++) {
        if (chunk_len[i] && !chunk[i]) {
            free(kids);
            xgr_fail(XGR_ERR_INVALID_ARG, "Substring chunk %zu is NULL", i);
            return -1;
        }
        kids[i] = chunk_len[i] ? xgr_ir_bytes(g, chunk[i], chunk_len[i]) : xgr_ir_empty(g);
        if (kids[i] < 0) {
            free(kids);
            return -1;
        }
    }
    int32_t id = push_list(g, XGR_NODE_SUBSTRING, kids, n);
    free(kids);
    return id;
}

/* Chunks are copied as they are: each is one atomic piece of text, not a literal to
 * rewrite. They go through a private buffer, so dst may be src. */
static int32_t copy_substring(xgr_grammar *dst, const xgr_grammar *src, const xgr_node *nd) {
    size_t n = (size_t)nd->count, total = 0;
    for (size_t i = 0; i < n; i++) {
        const xgr_node *k = &src->nodes.data[src->kids.data[nd->off + (int32_t)i]];
        if (k->kind == XGR_NODE_BYTES) total += (size_t)k->count;
    }
    const uint8_t **str = xgr_malloc((n ? n : 1) * sizeof *str);
    size_t *len = xgr_malloc((n ? n : 1) * sizeof *len);
    uint8_t *buf = xgr_malloc(total ? total : 1);
    int32_t id = -1;
    if (str && len && buf) {
        size_t at = 0;
        for (size_t i = 0; i < n; i++) {
            const xgr_node *k = &src->nodes.data[src->kids.data[nd->off + (int32_t)i]];
            len[i] = k->kind == XGR_NODE_BYTES ? (size_t)k->count : 0;
            if (len[i]) memcpy(buf + at, src->bytes.data + k->off, len[i]);
            str[i] = buf + at;
            at += len[i];
        }
        id = xgr_ir_substring(dst, str, len, n);
    }
    free(str);
    free(len);
    free(buf);
    return id;
}

static uint64_t name_hash(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ULL;
    return xgr_mix64(h);
}

static int name_eq(const xgr_grammar *g, int32_t r, const char *s, size_t n) {
    const char *nm = xgr_ir_rule_name(g, r);
    return strlen(nm) == n && memcmp(nm, s, n) == 0;
}

int32_t xgr_ir_find_rule(const xgr_grammar *g, const char *name, size_t n) {
    if (!g->name_index_cap) return -1;
    size_t mask = g->name_index_cap - 1;
    for (size_t i = name_hash(name, n) & mask;; i = (i + 1) & mask) {
        int32_t r = g->name_index[i];
        if (r < 0) return -1;
        if (name_eq(g, r, name, n)) return r;
    }
}

/* Keeps the index at most half full so probes stay short. */
static int index_insert(xgr_grammar *g, int32_t r) {
    if ((g->rules.len + 1) * 2 > g->name_index_cap) {
        size_t ncap = g->name_index_cap ? g->name_index_cap * 2 : 64;
        int32_t *ni = xgr_malloc(ncap * sizeof *ni);
        if (!ni) return -1;
        memset(ni, 0xff, ncap * sizeof *ni);
        free(g->name_index);
        g->name_index = ni;
        g->name_index_cap = ncap;
        for (size_t k = 0; k < g->rules.len; k++) {
            if ((int32_t)k == r) continue;
            const char *nm = xgr_ir_rule_name(g, (int32_t)k);
            size_t i = name_hash(nm, strlen(nm)) & (ncap - 1);
            while (ni[i] >= 0) i = (i + 1) & (ncap - 1);
            ni[i] = (int32_t)k;
        }
    }
    const char *nm = xgr_ir_rule_name(g, r);
    size_t mask = g->name_index_cap - 1;
    size_t i = name_hash(nm, strlen(nm)) & mask;
    while (g->name_index[i] >= 0) i = (i + 1) & mask;
    g->name_index[i] = r;
    return 0;
}

int32_t xgr_ir_rule(xgr_grammar *g, const char *name, size_t n) {
    int32_t r = xgr_ir_find_rule(g, name, n);
    if (r >= 0) return r;
    if (g->rules.len >= INT32_MAX || g->names.len > (size_t)INT32_MAX - n - 1) {
        xgr_fail(XGR_ERR_LIMIT, "grammar has too many rules");
        return -1;
    }
    size_t off = g->names.len;
    if (XGR_VEC_RESERVE(g->names, off + n + 1)) return -1;
    memcpy(g->names.data + off, name, n);
    g->names.data[off + n] = '\0';
    g->names.len += n + 1;
    xgr_rule rule = {(int32_t)off, -1, -1, xgr_attrs_none()};
    if (XGR_VEC_PUSH(g->rules, rule)) return -1;
    r = (int32_t)(g->rules.len - 1);
    if (index_insert(g, r)) return -1;
    return r;
}

int32_t xgr_ir_add_name(xgr_grammar *g, const char *s, size_t n) {
    if (g->names.len > (size_t)INT32_MAX - n - 1) {
        xgr_fail(XGR_ERR_LIMIT, "grammar names too long");
        return -1;
    }
    size_t off = g->names.len;
    if (XGR_VEC_RESERVE(g->names, off + n + 1)) return -1;
    if (n) memcpy(g->names.data + off, s, n);
    g->names.data[off + n] = '\0';
    g->names.len += n + 1;
    return (int32_t)off;
}

int xgr_ir_copy_attrs(xgr_grammar *dst, int32_t dr, const xgr_grammar *src, int32_t sr) {
    xgr_rule_attrs a = src->rules.data[sr].attrs;
    if (a.capture_off >= 0) {
        const char *c = src->names.data + a.capture_off;
        if ((a.capture_off = xgr_ir_add_name(dst, c, strlen(c))) < 0) return XGR_ERR_NOMEM;
    }
    if (a.stop_capture_off >= 0) {
        const char *c = src->names.data + a.stop_capture_off;
        if ((a.stop_capture_off = xgr_ir_add_name(dst, c, strlen(c))) < 0)
            return XGR_ERR_NOMEM;
    }
    dst->rules.data[dr].attrs = a;
    return XGR_OK;
}

int xgr_ir_has_attrs(const xgr_grammar *g) {
    for (size_t r = 0; r < g->rules.len; r++)
        if (xgr_attrs_any(&g->rules.data[r].attrs)) return 1;
    return 0;
}

int32_t xgr_ir_fresh_rule(xgr_grammar *g, const char *base) {
    size_t bl = strlen(base);
    if (xgr_ir_find_rule(g, base, bl) < 0) return xgr_ir_rule(g, base, bl);
    char buf[256];
    for (unsigned k = 1;; k++) {
        int w = snprintf(buf, sizeof buf, "%.200s_%u", base, k);
        if (w < 0) return xgr_fail(XGR_ERR_INTERNAL, "rule name formatting failed"), -1;
        if (xgr_ir_find_rule(g, buf, (size_t)w) < 0) return xgr_ir_rule(g, buf, (size_t)w);
    }
}

static int32_t copy_tag_dispatch(xgr_grammar *dst, const xgr_grammar *src, const xgr_node *nd,
                                 const int32_t *rmap, const xgr_ir_rewrite *rw) {
    size_t nt = (size_t)nd->count, ne = (size_t)nd->min;
    const int32_t *pay = src->kids.data + nd->off;
    xgr_keybuf buf = {0};
    xgr_spanvec spans = {0};
    XGR_VEC(int32_t) rules = {0};
    const uint8_t **str = NULL;
    size_t *len = NULL;
    int32_t id = -1;
    int rc = XGR_OK;
    for (size_t k = 0; k < nt && !rc; k++) {
        const xgr_node *b = &src->nodes.data[pay[2 * k]];
        const uint8_t *s = src->bytes.data + b->off;
        size_t before = spans.len;
        if (rw && rw->trigger) {
            rc = rw->trigger(rw->ctx, s, (size_t)b->count, &buf, &spans);
        } else if (XGR_VEC_RESERVE(buf, buf.len + (size_t)b->count) ||
                   XGR_VEC_PUSH(spans, buf.len) || XGR_VEC_PUSH(spans, (size_t)b->count)) {
            rc = XGR_ERR_NOMEM;
        } else {
            memcpy(buf.data + buf.len, s, (size_t)b->count);
            buf.len += (size_t)b->count;
        }
        for (size_t v = before; !rc && v < spans.len; v += 2)
            if (XGR_VEC_PUSH(rules, rmap[pay[2 * k + 1]])) rc = XGR_ERR_NOMEM;
    }
    size_t nv = spans.len / 2, n = nv + ne;
    if (!rc) {
        str = xgr_malloc((n + 1) * sizeof *str);
        len = xgr_malloc((n + 1) * sizeof *len);
    }
    if (!rc && str && len) {
        for (size_t k = 0; k < nv; k++) { /* buf is final now: pointers stay valid */
            str[k] = buf.data + spans.data[2 * k];
            len[k] = spans.data[2 * k + 1];
        }
        for (size_t j = 0; j < ne; j++) {
            const xgr_node *e = &src->nodes.data[pay[2 * nt + j]];
            str[nv + j] = src->bytes.data + e->off;
            len[nv + j] = (size_t)e->count;
        }
        id = xgr_ir_tag_dispatch(dst, str, len, rules.data, nv, str + nv, len + nv, ne, nd->a);
    } else {
        xgr_fail(rc ? rc : XGR_ERR_NOMEM, "cannot copy a TagDispatch (out of memory)");
    }
    XGR_VEC_FREE(buf);
    XGR_VEC_FREE(spans);
    XGR_VEC_FREE(rules);
    free(str);
    free(len);
    return id;
}

int32_t xgr_ir_copy_node(xgr_grammar *dst, const xgr_grammar *src, int32_t n, const int32_t *rmap,
                         const xgr_ir_rewrite *rw, int depth) {
    if (depth > 10000) {
        xgr_fail(XGR_ERR_LIMIT, "grammar expression nesting too deep");
        return -1;
    }
    const xgr_node *nd = &src->nodes.data[n];
    switch (nd->kind) {
    case XGR_NODE_EMPTY: return xgr_ir_empty(dst);
    case XGR_NODE_BYTES:
        if (rw && rw->literal)
            return rw->literal(rw->ctx, dst, src->bytes.data + nd->off, (size_t)nd->count);
        return xgr_ir_bytes(dst, src->bytes.data + nd->off, (size_t)nd->count);
    case XGR_NODE_CLASS:
        return xgr_ir_class(dst, src->ranges.data + nd->off, (size_t)nd->count, nd->negated);
    case XGR_NODE_BYTE_CLASS:
        return xgr_ir_byte_class(dst, src->ranges.data + nd->off, (size_t)nd->count,
                                 nd->negated);
    case XGR_NODE_REF: return xgr_ir_ref(dst, rmap[nd->a]);
    case XGR_NODE_REPEAT: {
        int32_t c = xgr_ir_copy_node(dst, src, nd->a, rmap, rw, depth + 1);
        if (c < 0) return -1;
        return xgr_ir_repeat(dst, c, nd->min, nd->max);
    }
    case XGR_NODE_SEQ:
    case XGR_NODE_ALT: {
        int32_t *kids = xgr_malloc(((size_t)nd->count + 1) * sizeof *kids);
        if (!kids) return -1;
        for (int32_t i = 0; i < nd->count; i++) {
            kids[i] = xgr_ir_copy_node(dst, src, src->kids.data[nd->off + i], rmap, rw, depth + 1);
            if (kids[i] < 0) {
                free(kids);
                return -1;
            }
        }
        int32_t r = push_list(dst, nd->kind, kids, (size_t)nd->count);
        free(kids);
        return r;
    }
    case XGR_NODE_TAG_DISPATCH: return copy_tag_dispatch(dst, src, nd, rmap, rw);
    case XGR_NODE_SUBSTRING: return copy_substring(dst, src, nd);
    default: xgr_fail(XGR_ERR_INTERNAL, "unknown node kind %d", (int)nd->kind); return -1;
    }
}

int32_t xgr_ir_import(xgr_grammar *dst, const xgr_grammar *src) {
    size_t nr = src->rules.len;
    int32_t *rmap = xgr_malloc((nr ? nr : 1) * sizeof *rmap);
    if (!rmap) return -1;
    for (size_t r = 0; r < nr; r++) {
        rmap[r] = xgr_ir_fresh_rule(dst, xgr_ir_rule_name(src, (int32_t)r));
        if (rmap[r] < 0) goto fail;
    }
    for (size_t r = 0; r < nr; r++) {
        const xgr_rule *sr = &src->rules.data[r];
        int32_t body = -1, la = -1;
        if (sr->body >= 0 && (body = xgr_ir_copy_node(dst, src, sr->body, rmap, NULL, 0)) < 0) goto fail;
        if (sr->lookahead >= 0 && (la = xgr_ir_copy_node(dst, src, sr->lookahead, rmap, NULL, 0)) < 0)
            goto fail;
        dst->rules.data[rmap[r]].body = body;
        dst->rules.data[rmap[r]].lookahead = la;
        if (xgr_ir_copy_attrs(dst, rmap[r], src, (int32_t)r)) goto fail;
        xgr_rule_attrs *a = &dst->rules.data[rmap[r]].attrs;
        if (a->hidden_body >= 0) a->hidden_body = rmap[a->hidden_body];
        if (a->hidden_marker >= 0) a->hidden_marker = rmap[a->hidden_marker];
    }
    int32_t root = src->root >= 0 ? rmap[src->root] : -1;
    free(rmap);
    return root;
fail:
    free(rmap);
    return -1;
}

int xgr_ir_validate(const xgr_grammar *g) {
    if (g->root < 0 || (size_t)g->root >= g->rules.len)
        return xgr_fail(XGR_ERR_SEMANTIC, "grammar has no root rule");
    for (size_t r = 0; r < g->rules.len; r++)
        if (g->rules.data[r].body < 0)
            return xgr_fail(XGR_ERR_SEMANTIC, "rule '%s' is referenced but never defined",
                            xgr_ir_rule_name(g, (int32_t)r));
    return XGR_OK;
}
