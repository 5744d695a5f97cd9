/* The flat regex tree (xgr_regex_ast in xgr2.h) that csrc/front/regex.c builds for
 * xgr_regex_parse: nodes of five int32 fields, ranges and child lists in one array. */
#include "front.h"

static int32_t too_big(void) {
    xgr_fail(XGR_ERR_LIMIT, "regex syntax tree is too large");
    return -1;
}

static int32_t nomem(void) {
    xgr_fail(XGR_ERR_NOMEM, "out of memory");
    return -1;
}

int32_t xgr_rx_add(xgr_rx_builder *b, int kind, int32_t a, int32_t bb, int32_t c) {
    if (b->nodes.len / 5 >= (size_t)INT32_MAX) return too_big();
    int32_t id = (int32_t)(b->nodes.len / 5);
    if (XGR_VEC_RESERVE(b->nodes, b->nodes.len + 5)) return nomem();
    int32_t *n = b->nodes.data + b->nodes.len;
    n[0] = kind, n[1] = a, n[2] = bb, n[3] = c, n[4] = 0;
    b->nodes.len += 5;
    return id;
}

int32_t xgr_rx_add_set(xgr_rx_builder *b, const uint32_t *ranges, size_t n,
                       const uint32_t *props, size_t np, int neg) {
    size_t off = b->data.len;
    if (off > (size_t)INT32_MAX - 2 * n - np || n > (size_t)INT32_MAX / 4 ||
        np > (size_t)INT32_MAX / 4)
        return too_big();
    if (XGR_VEC_RESERVE(b->data, off + 2 * n + np)) return nomem();
    for (size_t i = 0; i < 2 * n; i++) b->data.data[off + i] = (int32_t)ranges[i];
    for (size_t i = 0; i < np; i++) b->data.data[off + 2 * n + i] = (int32_t)props[i];
    b->data.len = off + 2 * n + np;
    int32_t id = xgr_rx_add(b, XGR_RX_SET, (int32_t)off, (int32_t)n, (int32_t)np);
    if (id >= 0) b->nodes.data[5 * (size_t)id + 4] = neg ? 1 : 0;
    return id;
}

int32_t xgr_rx_add_list(xgr_rx_builder *b, int kind, const int32_t *kids, size_t n) {
    size_t off = b->data.len;
    if (off > (size_t)INT32_MAX - n) return too_big();
    if (XGR_VEC_RESERVE(b->data, off + n + 1)) return nomem();
    if (n) memcpy(b->data.data + off, kids, n * sizeof *kids);
    b->data.len = off + n;
    return xgr_rx_add(b, kind, (int32_t)off, (int32_t)n, 0);
}

int xgr_rx_finish(xgr_rx_builder *b, int32_t root, xgr_regex_ast **out) {
    xgr_regex_ast *a = calloc(1, sizeof *a);
    if (!a) return xgr_fail(XGR_ERR_NOMEM, "out of memory");
    a->nodes = b->nodes.data;
    a->n_nodes = b->nodes.len / 5;
    a->data = b->data.data;
    a->n_data = b->data.len;
    a->root = root;
    memset(b, 0, sizeof *b);
    *out = a;
    return XGR_OK;
}

void xgr_rx_builder_free(xgr_rx_builder *b) {
    XGR_VEC_FREE(b->nodes);
    XGR_VEC_FREE(b->data);
}

void xgr_regex_ast_free(xgr_regex_ast *ast) {
    if (!ast) return;
    free(ast->nodes);
    free(ast->data);
    free(ast);
}
