/* Public grammar operations: union / concatenation, printing, reference counting. */
#include "front.h"

/* Builds a grammar whose root is `alt`ernation or sequence of refs to the given
 * grammars' roots. The new root is declared first so it keeps the name "root" and the
 * imported rules (including each input's own root) are renamed around it. */
static int combine(xgr_grammar *const *gs, size_t n, int alt, xgr_grammar **out,
                   const char *fn) {
    if (!out) return xgr_fail(XGR_ERR_INVALID_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if (!gs || n == 0) return xgr_fail(XGR_ERR_INVALID_ARG, "%s: no grammars given", fn);
    for (size_t i = 0; i < n; i++)
        if (!gs[i] || gs[i]->root < 0 || (size_t)gs[i]->root >= gs[i]->rules.len)
            return xgr_fail(XGR_ERR_INVALID_ARG, "%s: grammar %zu is NULL or has no root",
                            fn, i);
    xgr_grammar *g = xgr_ir_new();
    if (!g) return XGR_ERR_NOMEM;
    int32_t *kids = xgr_malloc(n * sizeof *kids);
    int rc = XGR_OK;
    int32_t root = kids ? xgr_ir_rule(g, "root", 4) : -1;
    if (root < 0) {
        rc = kids ? xgr_front_ir_status() : XGR_ERR_NOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        int32_t r = xgr_ir_import(g, gs[i]);
        if (r < 0 || (kids[i] = xgr_ir_ref(g, r)) < 0) {
            rc = xgr_front_ir_status();
            goto done;
        }
    }
    int32_t body = alt ? xgr_ir_alt(g, kids, n) : xgr_ir_seq(g, kids, n);
    if (body < 0) {
        rc = xgr_front_ir_status();
        goto done;
    }
    g->rules.data[root].body = body;
    g->root = root;
    rc = xgr_ir_validate(g);
done:
    free(kids);
    if (rc) {
        xgr_ir_free(g);
        return rc;
    }
    *out = g;
    return XGR_OK;
}

int xgr_grammar_union(xgr_grammar *const *gs, size_t n, xgr_grammar **out) {
    return combine(gs, n, 1, out, "xgr_grammar_union");
}

int xgr_grammar_concat(xgr_grammar *const *gs, size_t n, xgr_grammar **out) {
    return combine(gs, n, 0, out, "xgr_grammar_concat");
}

int xgr_grammar_to_ebnf(const xgr_grammar *g, char **out, size_t *out_len) {
    if (!g || !out) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_grammar_to_ebnf: NULL argument");
    return xgr_ir_print(g, out, out_len);
}

size_t xgr_grammar_memory(const xgr_grammar *g) { return xgr_ir_memory(g); }

void xgr_grammar_retain(xgr_grammar *g) {
    if (g) atomic_fetch_add_explicit(&g->refcount, 1, memory_order_relaxed);
}

void xgr_grammar_release(xgr_grammar *g) {
    /* acq_rel: the freeing thread must see every other owner's writes. */
    if (g && atomic_fetch_sub_explicit(&g->refcount, 1, memory_order_acq_rel) == 1)
        xgr_ir_free(g);
}

int xgr_front_ir_status(void) {
    int st = xgr_last_status();
    /* An IR builder that failed without a message would leave an earlier status here;
     * every one of them fails through xgr_fail or a checked allocation, so this is only
     * a guard against a future one that does not. */
    return st == XGR_OK ? xgr_fail(XGR_ERR_INTERNAL, "an IR builder failed without a status") : st;
}
