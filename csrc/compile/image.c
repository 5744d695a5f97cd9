/* Compiled-grammar images: a compiled grammar's automata and token-terminal ids as one
 * flat byte string (xgr_compiled_image), and a compiled grammar rebuilt from one
 * (xgr_compiled_from_image) without parsing or lowering. The on-disk compile cache
 * (engine/xgrammar2/disk_cache.py, docs/disk-cache.md) stores them.
 *
 * An image is outside input (a file another process wrote, maybe truncated or damaged):
 * the reader checks every count against the bytes present before it reads, every id
 * against its range, and the automata's invariants that the parser and the mask cache
 * index with (lower/fsm.h): rules own contiguous state ranges, edges stay inside their
 * rule, byte edges are sorted, disjoint and come first, at most one reference edge per
 * (state, rule), REPEAT rules have their one looping edge, every state is reachable from
 * its rule's start and can reach an end, every rule is productive, nullability agrees with
 * the automata. A failed
 * check is XGR_ERR_INVALID_ARG ("corrupt compiled image: ..."), never a crash.
 *
 * Layout (native byte order, checked by an order mark; 4-byte fields unless said):
 *   header  magic "XGR2FSM\0" (8 bytes), order mark 0x01020304, version, n_rules, root,
 *           n_states, n_edges, n_token_ids, reserved 0
 *   rules   rule_start, rule_kind (1 byte each), rule_nullable (1), repeat_child,
 *           repeat_min, repeat_max, rule_lookahead, rule_dispatch (1): each an array of
 *           n_rules
 *   states  state_rule, final (1 byte each): n_states; edge_begin: n_states + 1
 *   edges   per edge target, ref, lo (1), hi (1)
 *   tokens  token ids: n_token_ids
 * and nothing after. Grammars with rule attributes (budgets, captures, laziness,
 * temperatures) have no image. */
#include "compile.h"

#include "../mask/compiled.h"
#include "prepare.h"

#define IMG_MAGIC "XGR2FSM"
#define IMG_VERSION 1u
#define IMG_ORDER 0x01020304u
#define IMG_HEADER 40u
#define EDGE_BYTES 10u

/* ---- writing --------------------------------------------------------------------------- */

typedef struct {
    uint8_t *p;
} img_w;

static void w_bytes(img_w *w, const void *src, size_t n) {
    if (n) memcpy(w->p, src, n);
    w->p += n;
}
static void w_u32(img_w *w, uint32_t x) { w_bytes(w, &x, 4); }

int xgr_compiled_image(const xgr_compiled *c, uint8_t **out, size_t *out_len) {
    if (!c || !out || !out_len) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_compiled_image: NULL argument");
    *out = NULL;
    *out_len = 0;
    const xgr_fsm *f = c->fsm;
    if (f->rule_attrs) return XGR_OK; /* not imaged: see the header comment */
    size_t nr = (size_t)f->n_rules, ns = (size_t)f->n_states, ne = (size_t)f->n_edges;
    size_t nt = (size_t)c->n_token_ids;
    size_t len = IMG_HEADER + nr * (4 + 1 + 1 + 4 * 4 + 1) + ns * (4 + 1) + (ns + 1) * 4 +
                 ne * EDGE_BYTES + nt * 4;
    uint8_t *buf = xgr_malloc(len);
    if (!buf) return XGR_ERR_NOMEM;
    img_w w = {buf};
    w_bytes(&w, IMG_MAGIC, 8); /* with its NUL */
    w_u32(&w, IMG_ORDER);
    w_u32(&w, IMG_VERSION);
    w_u32(&w, (uint32_t)f->n_rules);
    w_u32(&w, (uint32_t)f->root);
    w_u32(&w, (uint32_t)f->n_states);
    w_u32(&w, (uint32_t)f->n_edges);
    w_u32(&w, (uint32_t)c->n_token_ids);
    w_u32(&w, 0);
    w_bytes(&w, f->rule_start, nr * 4);
    w_bytes(&w, f->rule_kind, nr);
    w_bytes(&w, f->rule_nullable, nr);
    w_bytes(&w, f->repeat_child, nr * 4);
    w_bytes(&w, f->repeat_min, nr * 4);
    w_bytes(&w, f->repeat_max, nr * 4);
    w_bytes(&w, f->rule_lookahead, nr * 4);
    w_bytes(&w, f->rule_dispatch, nr);
    w_bytes(&w, f->state_rule, ns * 4);
    w_bytes(&w, f->final, ns);
    w_bytes(&w, f->edge_begin, (ns + 1) * 4);
    for (size_t e = 0; e < ne; e++) {
        const xgr_edge *ed = &f->edges[e];
        w_bytes(&w, &ed->target, 4);
        w_bytes(&w, &ed->ref, 4);
        w_bytes(&w, &ed->lo, 1);
        w_bytes(&w, &ed->hi, 1);
    }
    w_bytes(&w, c->token_ids, nt * 4);
    if ((size_t)(w.p - buf) != len) { /* cannot happen: the sizes above are the writes */
        free(buf);
        return xgr_fail(XGR_ERR_INTERNAL, "xgr_compiled_image: size mismatch");
    }
    *out = buf;
    *out_len = len;
    return XGR_OK;
}

/* ---- reading --------------------------------------------------------------------------- */

typedef struct {
    const uint8_t *p, *end;
} img_r;

static int corrupt(const char *what) {
    return xgr_fail(XGR_ERR_INVALID_ARG, "corrupt compiled image: %s", what);
}

/* Copies n bytes into dst (allocated by the caller for at least n), or fails when the
 * image has fewer left. */
static int r_bytes(img_r *r, void *dst, size_t n) {
    if ((size_t)(r->end - r->p) < n) return corrupt("truncated");
    if (n) memcpy(dst, r->p, n);
    r->p += n;
    return XGR_OK;
}
static int r_u32(img_r *r, uint32_t *x) { return r_bytes(r, x, 4); }

/* The most rules / states / edges / token ids an image may declare (each well above what
 * the compile limits allow, and small enough that no size computation overflows). */
#define IMG_MAX_COUNT ((uint32_t)1 << 28)

static int check_rules(const xgr_fsm *f) {
    int32_t nr = f->n_rules, ns = f->n_states;
    if (f->rule_start[0] != 0) return corrupt("the first rule does not start at state 0");
    for (int32_t r = 0; r < nr; r++) {
        int32_t end = xgr_fsm_rule_end(f, r);
        if (f->rule_start[r] < 0 || f->rule_start[r] >= end || end > ns)
            return corrupt("rule state ranges are not increasing");
        if (f->rule_kind[r] > XGR_RULE_REPEAT || f->rule_nullable[r] > 1 || f->rule_dispatch[r] > 1)
            return corrupt("a rule flag is out of range");
        if (f->rule_lookahead[r] < -1 || f->rule_lookahead[r] >= nr)
            return corrupt("a lookahead rule id is out of range");
        for (int32_t s = f->rule_start[r]; s < end; s++)
            if (f->state_rule[s] != r) return corrupt("a state's rule disagrees with the rule ranges");
        if (f->rule_kind[r] == XGR_RULE_REPEAT) {
            int32_t s = f->rule_start[r], child = f->repeat_child[r];
            if (end != s + 1 || f->edge_begin[s + 1] - f->edge_begin[s] != 1)
                return corrupt("a repetition rule is not one state with one edge");
            const xgr_edge *ed = &f->edges[f->edge_begin[s]];
            if (child < 0 || child >= nr || ed->ref != child || ed->target != s)
                return corrupt("a repetition rule's edge is not its loop");
            if (f->repeat_min[r] < 0 || f->repeat_max[r] < -1 ||
                (f->repeat_max[r] >= 0 && f->repeat_max[r] < f->repeat_min[r]))
                return corrupt("a repetition rule's bounds are out of range");
            if (f->rule_nullable[child]) return corrupt("a repetition's body is nullable");
        } else if (f->repeat_child[r] != -1) {
            return corrupt("a plain rule names a repetition body");
        }
    }
    return XGR_OK;
}

/* Edges: CSR bounds, targets inside the source's rule, byte edges sorted, disjoint and
 * first, one reference edge per (state, rule). seen: n_rules scratch ints. */
static int check_edges(const xgr_fsm *f, int32_t *seen) {
    int32_t ns = f->n_states, nr = f->n_rules;
    if (f->edge_begin[0] != 0 || f->edge_begin[ns] != f->n_edges) return corrupt("edge offsets");
    for (int32_t s = 0; s < ns; s++)
        if (f->edge_begin[s + 1] < f->edge_begin[s]) return corrupt("edge offsets decrease");
    for (int32_t r = 0; r < nr; r++) seen[r] = -1;
    for (int32_t s = 0; s < ns; s++) {
        int32_t r = f->state_rule[s], lo = f->rule_start[r], hi = xgr_fsm_rule_end(f, r);
        int in_refs = 0, prev_hi = -1;
        for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++) {
            const xgr_edge *ed = &f->edges[e];
            if (ed->target < lo || ed->target >= hi) return corrupt("an edge leaves its rule");
            if (ed->ref < -1 || ed->ref >= nr) return corrupt("a rule reference is out of range");
            if (ed->ref < 0) {
                if (in_refs) return corrupt("a byte edge follows a reference edge");
                if (ed->lo > ed->hi || (int)ed->lo <= prev_hi)
                    return corrupt("byte edges are not sorted and disjoint");
                prev_hi = ed->hi;
            } else {
                in_refs = 1;
                if (seen[ed->ref] == s) return corrupt("two reference edges to one rule");
                seen[ed->ref] = s;
            }
        }
    }
    return XGR_OK;
}

/* Every state reachable from its rule's start, final flags in range, and each rule's
 * nullability equal to the automata's: a final state reached from the start through
 * references to nullable rules only (a REPEAT rule: min == 0). That every state can also
 * reach a final state of its rule is check_productive's (one backward pass for both). */
static int check_shape(const xgr_fsm *f) {
    int32_t ns = f->n_states, nr = f->n_rules;
    uint8_t *mark = xgr_calloc((size_t)ns + 1, 1);
    int32_t *stack = xgr_malloc(((size_t)ns + 1) * sizeof *stack);
    int rc = XGR_OK;
    if (!mark || !stack) {
        rc = XGR_ERR_NOMEM;
        goto out;
    }
    for (int32_t s = 0; s < ns; s++)
        if (f->final[s] > 1) {
            rc = corrupt("a final flag is out of range");
            goto out;
        }
    /* forward reachability */
    for (int32_t r = 0; r < nr; r++) {
        int32_t n = 0;
        stack[n++] = f->rule_start[r];
        mark[f->rule_start[r]] = 1;
        while (n) {
            int32_t s = stack[--n];
            for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++) {
                int32_t t = f->edges[e].target;
                if (!mark[t]) {
                    mark[t] = 1;
                    stack[n++] = t;
                }
            }
        }
    }
    for (int32_t s = 0; s < ns; s++)
        if (!mark[s]) {
            rc = corrupt("a state is unreachable");
            goto out;
        }
    /* nullability, per rule, over the stored flags of the rules it references */
    memset(mark, 0, (size_t)ns);
    for (int32_t r = 0; r < nr; r++) {
        int null;
        if (f->rule_kind[r] == XGR_RULE_REPEAT) {
            null = f->repeat_min[r] == 0;
        } else {
            null = 0;
            int32_t n = 0;
            stack[n++] = f->rule_start[r];
            mark[f->rule_start[r]] = 1;
            int32_t hi = xgr_fsm_rule_end(f, r);
            while (n) {
                int32_t s = stack[--n];
                if (f->final[s]) null = 1;
                for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++) {
                    const xgr_edge *ed = &f->edges[e];
                    if (ed->ref < 0 || !f->rule_nullable[ed->ref] || mark[ed->target]) continue;
                    mark[ed->target] = 1;
                    stack[n++] = ed->target;
                }
            }
            for (int32_t s = f->rule_start[r]; s < hi; s++) mark[s] = 0;
        }
        if (null != f->rule_nullable[r]) {
            rc = corrupt("a rule's nullability disagrees with its automaton");
            goto out;
        }
    }
out:
    free(mark);
    free(stack);
    return rc;
}

/* Every rule productive (derives some finite string: xgr_fsm_productive_states) and every
 * state able to reach a final state of its rule. With every rule productive, the productive
 * states are exactly those that reach a final state taking any edge (a REPEAT rule's state
 * counting as final), so one worklist pass answers both (before, a second backward pass
 * over the reversed edges answered the latter: a third of a large image's checks). */
static int check_productive(const xgr_fsm *f) {
    int32_t ns = f->n_states, nr = f->n_rules;
    uint8_t *prod = xgr_malloc((size_t)ns + 1);
    if (!prod) return XGR_ERR_NOMEM;
    int rc = xgr_fsm_productive_states(f, prod);
    for (int32_t r = 0; !rc && r < nr; r++)
        if (!prod[f->rule_start[r]]) rc = corrupt("a rule can never finish");
    for (int32_t s = 0; !rc && s < ns; s++)
        if (!prod[s]) rc = corrupt("a state cannot end");
    free(prod);
    return rc;
}

int xgr_compiled_from_image(const uint8_t *img, size_t len, const xgr_vocab *v,
                            const xgr_compile_options *opts, xgr_compiled **out) {
    if (!img || !v || !out) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_compiled_from_image: NULL argument");
    *out = NULL;
    img_r r = {img, img + len};
    char magic[8];
    uint32_t order = 0, version = 0, h[6] = {0, 0, 0, 0, 0, 0};
    int rc;
    if ((rc = r_bytes(&r, magic, 8))) return rc;
    if (memcmp(magic, IMG_MAGIC, 8) != 0) return corrupt("bad magic");
    if ((rc = r_u32(&r, &order)) || (rc = r_u32(&r, &version))) return rc;
    if (order != IMG_ORDER) return corrupt("written with another byte order");
    if (version != IMG_VERSION) return corrupt("another image version");
    for (int i = 0; i < 6; i++)
        if ((rc = r_u32(&r, &h[i]))) return rc;
    uint32_t nr = h[0], root = h[1], ns = h[2], ne = h[3], nt = h[4];
    if (nr == 0 || nr > IMG_MAX_COUNT || ns > IMG_MAX_COUNT || ne > IMG_MAX_COUNT ||
        nt > IMG_MAX_COUNT || h[5] != 0 || root >= nr || ns < nr)
        return corrupt("counts out of range");
    /* the exact length, checked before anything is allocated for the counts */
    uint64_t want = (uint64_t)IMG_HEADER + (uint64_t)nr * 23 + (uint64_t)ns * 5 +
                    ((uint64_t)ns + 1) * 4 + (uint64_t)ne * EDGE_BYTES + (uint64_t)nt * 4;
    if (want != (uint64_t)len) return corrupt(want > len ? "truncated" : "trailing bytes");
    xgr_fsm *f = xgr_fsm_alloc(nr, ns, ne);
    int32_t *tokens = xgr_malloc(((size_t)nt + 1) * sizeof *tokens);
    int32_t *seen = xgr_malloc(((size_t)nr + 1) * sizeof *seen);
    if (!f || !tokens || !seen) {
        rc = XGR_ERR_NOMEM;
        goto fail;
    }
    f->root = (int32_t)root;
    f->n_states = (int32_t)ns;
    f->n_edges = (int32_t)ne;
    if ((rc = r_bytes(&r, f->rule_start, nr * 4u)) || (rc = r_bytes(&r, f->rule_kind, nr)) ||
        (rc = r_bytes(&r, f->rule_nullable, nr)) || (rc = r_bytes(&r, f->repeat_child, nr * 4u)) ||
        (rc = r_bytes(&r, f->repeat_min, nr * 4u)) || (rc = r_bytes(&r, f->repeat_max, nr * 4u)) ||
        (rc = r_bytes(&r, f->rule_lookahead, nr * 4u)) || (rc = r_bytes(&r, f->rule_dispatch, nr)) ||
        (rc = r_bytes(&r, f->state_rule, (size_t)ns * 4)) || (rc = r_bytes(&r, f->final, ns)) ||
        (rc = r_bytes(&r, f->edge_begin, ((size_t)ns + 1) * 4)))
        goto fail;
    /* The edges in one bounds check (not four per edge: on a disk-cache hit of a small
     * grammar the per-field reads were a tenth of the load). */
    if ((size_t)(r.end - r.p) < (size_t)ne * EDGE_BYTES) {
        rc = corrupt("truncated");
        goto fail;
    }
    for (uint32_t e = 0; e < ne; e++, r.p += EDGE_BYTES) {
        xgr_edge *ed = &f->edges[e];
        memcpy(&ed->target, r.p, 4);
        memcpy(&ed->ref, r.p + 4, 4);
        ed->lo = r.p[8];
        ed->hi = r.p[9];
    }
    if ((rc = r_bytes(&r, tokens, (size_t)nt * 4))) goto fail;
    for (uint32_t s = 0; s < ns; s++)
        if (f->state_rule[s] < 0 || (uint32_t)f->state_rule[s] >= nr) {
            rc = corrupt("a state's rule is out of range");
            goto fail;
        }
    /* rule ranges first (check_edges reads them), but REPEAT checks read edges: the
     * edge offsets are checked for bounds before either */
    if (f->edge_begin[0] != 0 || f->edge_begin[ns] != (int32_t)ne) {
        rc = corrupt("edge offsets");
        goto fail;
    }
    for (uint32_t s = 0; s < ns; s++)
        if (f->edge_begin[s + 1] < f->edge_begin[s]) {
            rc = corrupt("edge offsets decrease");
            goto fail;
        }
    for (uint32_t k = 0; k < nt; k++)
        if (tokens[k] < 0 || tokens[k] >= xgr_vocab_size(v)) {
            rc = corrupt("a token id is outside the vocabulary");
            goto fail;
        }
    if ((rc = check_rules(f)) || (rc = check_edges(f, seen)) || (rc = check_shape(f)) ||
        (rc = check_productive(f)))
        goto fail;
    free(seen);
    return xgr_compile_from_fsm(f, tokens, (int32_t)nt, v, opts, out);
fail:
    xgr_fsm_free(f);
    free(tokens);
    free(seen);
    return rc;
}
