/* Analyses over IR rules that drive lowering: reachability, recursion (SCCs),
 * nullability / productivity, size estimates and inlining decisions. */
#include "lower_internal.h"

#define EST_CAP (1 << 30)

static int class_nonempty(lw_ctx *c, const xgr_node *n) {
    const uint32_t *p = c->g->ranges.data + n->off;
    uint32_t limit = n->kind == XGR_NODE_CLASS ? 0x10FFFF : 255;
    /* Fast paths: a plain class with one usable range; a negated class missing a probe. */
    if (!n->negated) {
        for (int32_t i = 0; i < n->count; i++) {
            uint32_t lo = p[2 * i], hi = p[2 * i + 1] < limit ? p[2 * i + 1] : limit;
            if (lo <= hi && (limit == 255 || lo < 0xD800 || hi > 0xDFFF)) return 1;
        }
        return 0;
    }
    static const uint32_t probes[4] = {0, 'a', 0xFF, 0x10FFFF};
    for (int k = 0; k < 4; k++) {
        if (probes[k] > limit) continue;
        int in = 0;
        for (int32_t i = 0; i < n->count && !in; i++) in = probes[k] >= p[2 * i] && probes[k] <= p[2 * i + 1];
        if (!in) return 1;
    }
    int rc = n->kind == XGR_NODE_CLASS ? lw_norm_class(p, n->count, n->negated, &c->ranges)
                                       : lw_norm_byte_class(p, n->count, n->negated, &c->ranges);
    if (rc) {
        if (!c->status) c->status = rc;
        return 0;
    }
    return c->ranges.len > 0;
}

static uint8_t rule_props(const lw_ctx *c, int32_t r) {
    uint8_t f = c->rflags[r];
    return (uint8_t)(((f & RF_NULLABLE) ? NP_NULLABLE : 0) | ((f & RF_NE) ? NP_NE : 0) |
                     ((f & RF_PROD) ? NP_PROD : 0));
}

uint8_t lw_node_props(lw_ctx *c, int32_t id, int depth) {
    if (c->memo_on && c->nprops[id]) return c->nprops[id] & 7;
    if (depth > LW_MAX_DEPTH) {
        if (!c->status)
            c->status = xgr_fail(XGR_ERR_LIMIT, "grammar expression nesting deeper than %d",
                                 LW_MAX_DEPTH);
        return 0;
    }
    const xgr_node *n = &c->g->nodes.data[id];
    uint8_t p = 0;
    switch (n->kind) {
    case XGR_NODE_EMPTY: p = NP_NULLABLE | NP_PROD; break;
    case XGR_NODE_BYTES: p = n->count > 0 ? NP_NE | NP_PROD : NP_NULLABLE | NP_PROD; break;
    case XGR_NODE_CLASS:
    case XGR_NODE_BYTE_CLASS: p = class_nonempty(c, n) ? NP_NE | NP_PROD : 0; break;
    case XGR_NODE_SEQ: {
        int all_null = 1, all_prod = 1, any_ne = 0;
        for (int32_t i = 0; i < n->count; i++) {
            uint8_t q = lw_node_props(c, c->g->kids.data[n->off + i], depth + 1);
            all_null &= (q & NP_NULLABLE) != 0;
            all_prod &= (q & NP_PROD) != 0;
            any_ne |= (q & NP_NE) != 0;
        }
        p = (uint8_t)((all_null ? NP_NULLABLE : 0) | (all_prod ? NP_PROD : 0) |
                      (all_prod && any_ne ? NP_NE : 0));
        break;
    }
    case XGR_NODE_ALT:
        for (int32_t i = 0; i < n->count; i++)
            p |= lw_node_props(c, c->g->kids.data[n->off + i], depth + 1);
        break;
    case XGR_NODE_REF: p = rule_props(c, n->a); break;
    case XGR_NODE_TAG_DISPATCH: p = lw_td_props(c, id); break;
    case XGR_NODE_SUBSTRING: p = lw_substring_props(c->g, id); break;
    case XGR_NODE_REPEAT: {
        uint8_t q = lw_node_props(c, n->a, depth + 1);
        if (n->max == 0) {
            p = NP_NULLABLE | NP_PROD;
        } else {
            p = (uint8_t)(((n->min == 0 || (q & NP_NULLABLE)) ? NP_NULLABLE : 0) |
                          ((n->min == 0 || (q & NP_PROD)) ? NP_PROD : 0) | (q & NP_NE));
        }
        break;
    }
    default: break; /* rejected by validate_tree */
    }
    if (c->memo_on) c->nprops[id] = (uint8_t)(p | NP_KNOWN);
    return p;
}

/* Checks node `id` and its subtree against the pools and appends the rule ids it
 * references to `out`, so later passes can index without checks. */
static int walk_refs(lw_ctx *c, int32_t id, lw_i32v *out, int depth) {
    const xgr_grammar *g = c->g;
    if (depth > LW_MAX_DEPTH)
        return xgr_fail(XGR_ERR_LIMIT, "grammar expression nesting deeper than %d",
                        LW_MAX_DEPTH);
    if (id < 0 || (size_t)id >= g->nodes.len)
        return xgr_fail(XGR_ERR_INVALID_ARG, "grammar node id %d out of range", (int)id);
    const xgr_node *n = &g->nodes.data[id];
    switch (n->kind) {
    case XGR_NODE_EMPTY: return XGR_OK;
    case XGR_NODE_BYTES:
        if (n->off < 0 || n->count < 0 || (size_t)n->off + (size_t)n->count > g->bytes.len)
            return xgr_fail(XGR_ERR_INVALID_ARG, "grammar literal out of range");
        return XGR_OK;
    case XGR_NODE_CLASS:
    case XGR_NODE_BYTE_CLASS:
        if (n->off < 0 || n->count < 0 ||
            (size_t)n->off + 2 * (size_t)n->count > g->ranges.len)
            return xgr_fail(XGR_ERR_INVALID_ARG, "grammar class out of range");
        return XGR_OK;
    case XGR_NODE_SEQ:
    case XGR_NODE_ALT:
        if (n->off < 0 || n->count < 0 || (size_t)n->off + (size_t)n->count > g->kids.len)
            return xgr_fail(XGR_ERR_INVALID_ARG, "grammar node list out of range");
        for (int32_t i = 0; i < n->count; i++) {
            int rc = walk_refs(c, g->kids.data[n->off + i], out, depth + 1);
            if (rc) return rc;
        }
        return XGR_OK;
    case XGR_NODE_REF:
        if (n->a < 0 || (size_t)n->a >= g->rules.len)
            return xgr_fail(XGR_ERR_INVALID_ARG, "grammar rule id %d out of range", (int)n->a);
        if (XGR_VEC_PUSH(*out, n->a)) return XGR_ERR_NOMEM;
        return XGR_OK;
    case XGR_NODE_REPEAT:
        if (n->min < 0 || n->max < -1 || (n->max >= 0 && n->max < n->min))
            return xgr_fail(XGR_ERR_SEMANTIC, "invalid repetition bounds {%d,%d}", (int)n->min,
                            (int)n->max);
        return walk_refs(c, n->a, out, depth + 1);
    case XGR_NODE_SUBSTRING: return lw_substring_check(g, id);
    case XGR_NODE_TAG_DISPATCH:
        /* lowered as a whole rule automaton (tag_dispatch.c), so only a rule body */
        if (depth > 0)
            return xgr_fail(XGR_ERR_SEMANTIC, "TagDispatch(...) must be a whole rule body "
                                              "(not part of an expression or a lookahead)");
        {
            size_t first = out->len;
            int rc = lw_td_refs(g, id, out);
            for (size_t k = first; !rc && k < out->len; k++)
                c->rflags[out->data[k]] |= RF_TD_TARGET; /* built as a trie (trie_alt.c) */
            return rc;
        }
    default:
        return xgr_fail(XGR_ERR_INVALID_ARG, "unknown grammar node kind %d", (int)n->kind);
    }
}

static int64_t est_node(lw_ctx *c, int32_t id, int depth);

int lw_repeat_compressed(lw_ctx *c, int32_t id) {
    const xgr_node *n = &c->g->nodes.data[id];
    if (n->max >= 0 ? n->max > c->rthresh : n->min > c->rthresh) return 1;
    if (n->max == 0) return 0;
    int64_t copies = n->max >= 0 ? n->max : (int64_t)n->min + 1;
    return est_node(c, n->a, 0) * copies > LW_MAX_UNROLL;
}

/* Automaton-size estimate of a node with inlined rules expanded (saturating). It only
 * depends on the inlining of rules in callee SCCs (final when first asked; rules of
 * the asking SCC are recursive, hence never inlined), so it is memoised per node. */
static int64_t est_node(lw_ctx *c, int32_t id, int depth) {
    if (c->nest[id] >= 0) return c->nest[id];
    if (depth > LW_MAX_DEPTH) return EST_CAP;
    const xgr_node *n = &c->g->nodes.data[id];
    int64_t s = 0;
    switch (n->kind) {
    case XGR_NODE_EMPTY: s = 0; break;
    case XGR_NODE_BYTES: s = n->count; break;
    case XGR_NODE_CLASS: {
        /* one transition plus the intermediate states of the longest UTF-8 form */
        uint32_t top = 0;
        const uint32_t *p = c->g->ranges.data + n->off;
        for (int32_t i = 0; i < n->count; i++)
            if (p[2 * i + 1] > top) top = p[2 * i + 1];
        if (n->negated) top = 0x10FFFF;
        int len = top < 0x80 ? 1 : top < 0x800 ? 2 : top < 0x10000 ? 3 : 4;
        s = 1 + 2 * (len - 1);
        break;
    }
    case XGR_NODE_BYTE_CLASS: s = 1; break;
    case XGR_NODE_TAG_DISPATCH: s = EST_CAP; break; /* never inlined */
    case XGR_NODE_SUBSTRING: s = lw_substring_est(c->g, id); break;
    case XGR_NODE_SEQ:
    case XGR_NODE_ALT:
        for (int32_t i = 0; i < n->count && s < EST_CAP; i++)
            s += est_node(c, c->g->kids.data[n->off + i], depth + 1);
        break;
    case XGR_NODE_REF: s = (c->rflags[n->a] & RF_INLINED) ? c->est[n->a] : 1; break;
    case XGR_NODE_REPEAT: {
        if (lw_repeat_compressed(c, id)) {
            s = 1;
            break;
        }
        int64_t k = n->max >= 0 ? n->max : (int64_t)n->min + 1;
        s = est_node(c, n->a, depth + 1) * k + 1;
        break;
    }
    default: s = EST_CAP; break;
    }
    if (s > EST_CAP) s = EST_CAP;
    c->nest[id] = (int32_t)s;
    return s;
}

/* Passes 2-3 for one SCC (callee SCCs are final): RF_NULLABLE / RF_NE / RF_PROD become
 * the least fixpoint; RF_RECURSIVE marks rules on a reference cycle; RF_INLINED marks
 * non-recursive rules other than the root, without lookahead, whose estimated
 * automaton has at most inline_max states. */
static int finish_scc(lw_ctx *c, const int32_t *m, size_t k, const lw_i32v *refs,
                      const int32_t *roff, const int32_t *rlen) {
    const xgr_grammar *g = c->g;
    int recursive = k > 1;
    for (int32_t i = 0; !recursive && i < rlen[m[0]]; i++)
        if (refs->data[roff[m[0]] + i] == m[0]) recursive = 1;
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = 0; i < k; i++) {
            int32_t r = m[i];
            uint8_t p = lw_node_props(c, g->rules.data[r].body, 0);
            if (c->status) return c->status;
            uint8_t f = (uint8_t)(((p & NP_NULLABLE) ? RF_NULLABLE : 0) |
                                  ((p & NP_NE) ? RF_NE : 0) | ((p & NP_PROD) ? RF_PROD : 0));
            uint8_t old = c->rflags[r] & (RF_NULLABLE | RF_NE | RF_PROD);
            if (f != old) {
                c->rflags[r] = (uint8_t)(c->rflags[r] | f);
                changed = recursive;
            }
        }
    }
    for (size_t i = 0; i < k; i++) {
        int32_t r = m[i];
        if (recursive) {
            c->rflags[r] |= RF_RECURSIVE;
            continue;
        }
        if (r == g->root || g->rules.data[r].lookahead >= 0 || c->inline_max < 0 ||
            xgr_attrs_any(&g->rules.data[r].attrs) || (c->rflags[r] & RF_HIDDEN) ||
            (c->externs && c->externs[r]))
            continue;
        int64_t e = est_node(c, g->rules.data[r].body, 0);
        c->est[r] = (int32_t)(e < EST_CAP ? e : EST_CAP);
        if (e <= c->inline_max) c->rflags[r] |= RF_INLINED;
    }
    return XGR_OK;
}

typedef struct {
    int32_t r, i;
} tj_frame;

/* Passes 1-3 over IR rules: RF_REACH marks rules reachable from the root through
 * bodies and lookaheads (every reachable node is validated), then SCCs are finished
 * callees-first. Afterwards node properties are memoised. */
int lw_analyze(lw_ctx *c) {
    const xgr_grammar *g = c->g;
    size_t nr = g->rules.len;
    if (g->root < 0 || (size_t)g->root >= nr)
        return xgr_fail(XGR_ERR_SEMANTIC, "grammar has no root rule");
    int rc = XGR_OK;
    lw_i32v refs = {0}, stk = {0};
    XGR_VEC(tj_frame) frames = {0};
    int32_t *roff = xgr_malloc(nr * sizeof *roff);
    int32_t *rlen = xgr_calloc(nr, sizeof *rlen);
    int32_t *queue = xgr_malloc(nr * sizeof *queue);
    int32_t *idx = xgr_malloc(nr * sizeof *idx);
    int32_t *low = xgr_malloc(nr * sizeof *low);
    uint8_t *onstk = xgr_calloc(nr, 1);
    c->rflags = xgr_calloc(nr, 1);
    c->est = xgr_calloc(nr, sizeof *c->est);
    c->nprops = xgr_calloc(g->nodes.len, 1);
    c->nest = xgr_malloc((g->nodes.len ? g->nodes.len : 1) * sizeof *c->nest);
    if (c->nest) memset(c->nest, 0xff, g->nodes.len * sizeof *c->nest);
    if (!c->nest || !roff || !rlen || !queue || !idx || !low || !onstk || !c->rflags || !c->est ||
        !c->nprops) {
        rc = XGR_ERR_NOMEM;
        goto done;
    }

    /* 1. Reachability from the root through bodies and lookaheads (a lookahead's rules
     * are needed by the lookahead rule built for it). */
    size_t qh = 0, qt = 0;
    queue[qt++] = g->root;
    c->rflags[g->root] |= RF_REACH;
    while (qh < qt) {
        int32_t r = queue[qh++];
        const xgr_rule *ru = &g->rules.data[r];
        if (ru->body < 0) {
            rc = xgr_fail(XGR_ERR_SEMANTIC, "rule '%s' is referenced but never defined",
                          xgr_ir_rule_name(g, r));
            goto done;
        }
        roff[r] = (int32_t)refs.len;
        if ((rc = walk_refs(c, ru->body, &refs, 0))) goto done;
        rlen[r] = (int32_t)refs.len - roff[r];
        if (ru->lookahead >= 0 && (rc = walk_refs(c, ru->lookahead, &refs, 1))) goto done;
        if (ru->attrs.hidden_kind && ru->attrs.hidden_body >= 0 && ru->attrs.hidden_marker >= 0) {
            c->rflags[ru->attrs.hidden_body] |= RF_HIDDEN;
            c->rflags[ru->attrs.hidden_marker] |= RF_HIDDEN;
            if (XGR_VEC_PUSH(refs, ru->attrs.hidden_body) ||
                XGR_VEC_PUSH(refs, ru->attrs.hidden_marker)) {
                rc = XGR_ERR_NOMEM;
                goto done;
            }
        }
        for (size_t i = (size_t)roff[r]; i < refs.len; i++) {
            int32_t t = refs.data[i];
            if (!(c->rflags[t] & RF_REACH)) {
                c->rflags[t] |= RF_REACH;
                queue[qt++] = t;
            }
        }
        refs.len = (size_t)roff[r] + (size_t)rlen[r];
    }

    /* 2-3. Tarjan's SCCs over body references (iterative: rule chains can be long).
     * SCCs pop callees-first, so each is finished as soon as it is found. */
    for (size_t i = 0; i < nr; i++) idx[i] = -1;
    int32_t counter = 0;
    for (size_t qi = 0; qi < qt; qi++) {
        int32_t v0 = queue[qi];
        if (idx[v0] >= 0) continue;
        idx[v0] = low[v0] = counter++;
        onstk[v0] = 1;
        if (XGR_VEC_PUSH(stk, v0) || XGR_VEC_PUSH(frames, ((tj_frame){v0, 0}))) {
            rc = XGR_ERR_NOMEM;
            goto done;
        }
        while (frames.len) {
            tj_frame *f = &frames.data[frames.len - 1];
            int32_t v = f->r;
            if (f->i < rlen[v]) {
                int32_t w = refs.data[roff[v] + f->i++];
                if (idx[w] < 0) {
                    idx[w] = low[w] = counter++;
                    onstk[w] = 1;
                    if (XGR_VEC_PUSH(stk, w) || XGR_VEC_PUSH(frames, ((tj_frame){w, 0}))) {
                        rc = XGR_ERR_NOMEM;
                        goto done;
                    }
                } else if (onstk[w] && idx[w] < low[v]) {
                    low[v] = idx[w];
                }
                continue;
            }
            frames.len--;
            if (low[v] == idx[v]) {
                size_t b = stk.len;
                do b--;
                while (stk.data[b] != v);
                for (size_t j = b; j < stk.len; j++) onstk[stk.data[j]] = 0;
                if ((rc = finish_scc(c, stk.data + b, stk.len - b, &refs, roff, rlen)))
                    goto done;
                stk.len = b;
            }
            if (frames.len) {
                int32_t u = frames.data[frames.len - 1].r;
                if (low[v] < low[u]) low[u] = low[v];
            }
        }
    }
    c->memo_on = 1;
done:
    free(roff);
    free(rlen);
    free(queue);
    free(idx);
    free(low);
    free(onstk);
    XGR_VEC_FREE(refs);
    XGR_VEC_FREE(stk);
    XGR_VEC_FREE(frames);
    return rc;
}
