/* xgr_fsm_build: the lowering driver. Output rules are created on demand (root first,
 * then every rule reachable through non-inlined references, repetition counters and
 * their bodies, "minus empty string" variants and lookaheads) and processed as a FIFO
 * worklist, so each rule's states are emitted contiguously into the global pool. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lower_internal.h"
#include "../common/token_marker.h"

/* ---- output-rule table -------------------------------------------------------------- */

static uint64_t okey_hash(int32_t src, int32_t a, int32_t b, int32_t cc) {
    uint64_t h = xgr_mix64((uint64_t)(uint32_t)src);
    h = xgr_hash_combine(h, (uint64_t)(uint32_t)a);
    h = xgr_hash_combine(h, (uint64_t)(uint32_t)b);
    return xgr_hash_combine(h, (uint64_t)(uint32_t)cc);
}

static int omap_grow(lw_ctx *c) {
    size_t cap = c->omap_cap ? c->omap_cap * 2 : 256;
    int32_t *t = xgr_malloc(cap * sizeof *t);
    if (!t) return XGR_ERR_NOMEM;
    memset(t, 0xff, cap * sizeof *t);
    for (size_t i = 0; i < c->orules.len; i++) {
        const lw_orule *o = &c->orules.data[i];
        size_t j = okey_hash(o->src, o->a, o->b, o->c) & (cap - 1);
        while (t[j] >= 0) j = (j + 1) & (cap - 1);
        t[j] = (int32_t)i;
    }
    free(c->omap);
    c->omap = t;
    c->omap_cap = cap;
    return XGR_OK;
}

static char *fmt_name(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
static char *fmt_name(const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (w < 0) w = 0;
    if ((size_t)w >= sizeof buf) w = (int)sizeof buf - 1;
    return xgr_strndup(buf, (size_t)w);
}

/* fmt_name("%.300s%s%d", base, suffix, id) (no id when negative), without printf's
 * format parsing: a request's skeleton names a rule per tool this way. */
static char *cat_name(const char *base, const char *suffix, int32_t id) {
    char buf[512];
    size_t n = 0;
    while (n < 300 && base[n]) n++;
    memcpy(buf, base, n);
    for (size_t k = 0; suffix[k] && n < sizeof buf - 12; k++) buf[n++] = suffix[k];
    if (id >= 0) {
        char dig[11];
        size_t d = 0;
        do dig[d++] = (char)('0' + id % 10);
        while ((id /= 10) > 0);
        while (d) buf[n++] = dig[--d];
    }
    return xgr_strndup(buf, n);
}

/* Finds or creates the output rule with the given key. A new rule is named
 * base + suffix (+ its id when number is set). */
static int get_rule(lw_ctx *c, int32_t src, int32_t a, int32_t b, int32_t cc,
                    const char *base, const char *suffix, int number, int32_t *out) {
    if ((c->orules.len + 1) * 2 > c->omap_cap && omap_grow(c)) return XGR_ERR_NOMEM;
    size_t mask = c->omap_cap - 1, j = okey_hash(src, a, b, cc) & mask;
    for (; c->omap[j] >= 0; j = (j + 1) & mask) {
        const lw_orule *o = &c->orules.data[c->omap[j]];
        if (o->src == src && o->a == a && o->b == b && o->c == cc) {
            *out = c->omap[j];
            return XGR_OK;
        }
    }
    int32_t id = (int32_t)c->orules.len;
    char *name = cat_name(base, suffix, number ? id : -1);
    if (!name) return XGR_ERR_NOMEM;
    if (id >= c->max_rules) {
        int rc = xgr_fail(XGR_ERR_LIMIT, "grammar needs more than max_rules = %d rules (at '%s')",
                          (int)c->max_rules, name);
        free(name);
        return rc;
    }
    lw_orule o = {src, a, b, cc, XGR_RULE_NORMAL, 0, 0, -1, name, 0, -1};
    if (src == LW_SRC_RULE) {
        uint8_t f = c->rflags[a];
        o.nullable = (uint8_t)(!b && (f & RF_NULLABLE));
        o.ne = (uint8_t)((f & RF_NE) != 0);
    } else if (src == LW_SRC_EXPR) {
        uint8_t q = lw_node_props(c, a, 0);
        if (c->status) {
            free(name);
            return c->status;
        }
        o.nullable = (uint8_t)(!b && (q & NP_NULLABLE));
        o.ne = (uint8_t)((q & NP_NE) != 0);
    } else {
        o.kind = XGR_RULE_REPEAT;
        o.nullable = (uint8_t)(b == 0);
        o.ne = 1;
    }
    if (XGR_VEC_PUSH(c->orules, o)) {
        free(name);
        return XGR_ERR_NOMEM;
    }
    c->omap[j] = id;
    *out = id;
    return XGR_OK;
}

static const char *cur_name(const lw_ctx *c) {
    return c->orules.len ? c->orules.data[c->cur].name : "";
}

/* Counter rule for REPEAT node `node` (its body derives a non-empty string). A
 * nullable body x gives x{m,n} = (x minus "")^{0..n}; the body rule never derives "". */
static int repeat_rule_impl(lw_ctx *c, int32_t node, int nonempty, const char *alias,
                            int32_t *out) {
    const xgr_node n = c->g->nodes.data[node];
    uint8_t q = lw_node_props(c, n.a, 0);
    if (c->status) return c->status;
    int yn = (q & NP_NULLABLE) != 0;
    const xgr_node y = c->g->nodes.data[n.a];
    int32_t cid = -1;
    int rc;
    if (y.kind == XGR_NODE_REF && !(c->rflags[y.a] & RF_INLINED)) {
        if ((rc = lw_ref_rule(c, y.a, yn, &cid))) return rc;
        if (c->orules.data[cid].kind == XGR_RULE_REPEAT) cid = -1; /* bodies stay NORMAL */
    }
    if (cid < 0 && (rc = get_rule(c, LW_SRC_EXPR, n.a, yn, 0, cur_name(c), "$body", 1, &cid)))
        return rc;
    int32_t min = yn ? 0 : n.min;
    if (nonempty && min < 1) min = 1;
    if (alias) return get_rule(c, LW_SRC_REPEAT, cid, min, n.max, alias, "", 0, out);
    return get_rule(c, LW_SRC_REPEAT, cid, min, n.max, cur_name(c), "$repeat", 1, out);
}

int lw_repeat_rule(lw_ctx *c, int32_t repeat_node, int nonempty, int32_t *out) {
    return repeat_rule_impl(c, repeat_node, nonempty, NULL, out);
}

int lw_ref_rule(lw_ctx *c, int32_t r, int nonempty, int32_t *out) {
    const xgr_grammar *g = c->g;
    const xgr_rule *ru = &g->rules.data[r];
    const xgr_node *body = &g->nodes.data[ru->body];
    const char *nm = xgr_ir_rule_name(g, r);
    /* A rule that is just a large repetition becomes the counter rule itself: one
     * Earley item less per use. The root stays NORMAL; lookaheads and attributes stay
     * attached to a NORMAL rule (a counter rule has none: `b[max_chars=7] ::= "a"{0,30}`
     * lost its budget). */
    if (r != g->root && ru->lookahead < 0 && !xgr_attrs_any(&ru->attrs) && body->kind == XGR_NODE_REPEAT &&
        body->max != 0 &&
        lw_repeat_compressed(c, ru->body) && (lw_node_props(c, body->a, 0) & NP_NE)) {
        if (c->status) return c->status;
        if (!nonempty) return repeat_rule_impl(c, ru->body, 0, nm, out);
        char *alias = fmt_name("%.300s$nonempty", nm);
        if (!alias) return XGR_ERR_NOMEM;
        int rc = repeat_rule_impl(c, ru->body, 1, alias, out);
        free(alias);
        return rc;
    }
    return get_rule(c, LW_SRC_RULE, r, nonempty ? 1 : 0, 0, nm, nonempty ? "$nonempty" : "", 0,
                    out);
}

int lw_prime_rule(lw_ctx *c, int32_t id, int32_t *out) {
    lw_orule o = c->orules.data[id];
    switch (o.src) {
    case LW_SRC_RULE: return lw_ref_rule(c, o.a, 1, out);
    case LW_SRC_EXPR: return get_rule(c, LW_SRC_EXPR, o.a, 1, 0, o.name, "$nonempty", 0, out);
    default:
        return get_rule(c, LW_SRC_REPEAT, o.a, o.b < 1 ? 1 : o.b, o.c, o.name, "$nonempty", 0,
                        out);
    }
}

/* ---- emission -------------------------------------------------------------------------- */

typedef struct {
    lw_i32v start, state_rule, ebeg;
    lw_u8v final;
    XGR_VEC(xgr_edge) edges;
} lw_out;

static void out_free(lw_out *o) {
    XGR_VEC_FREE(o->start);
    XGR_VEC_FREE(o->state_rule);
    XGR_VEC_FREE(o->ebeg);
    XGR_VEC_FREE(o->final);
    XGR_VEC_FREE(o->edges);
}

/* Appends rule's DFA to the global pool: its states are contiguous from
 * rule_start[rule], edge targets become global ids. */
static int emit(lw_ctx *c, lw_out *o, int32_t rule, const lw_dfa *d) {
    int64_t base = (int64_t)o->state_rule.len;
    if (base + d->n > c->max_states)
        return xgr_fail(XGR_ERR_LIMIT, "rule '%s': grammar exceeds max_fsm_states = %lld",
                        c->orules.data[rule].name, (long long)c->max_states);
    size_t ns = o->state_rule.len + (size_t)d->n, ne = o->edges.len + d->edges.len;
    if (ne > INT32_MAX) return xgr_fail(XGR_ERR_LIMIT, "grammar has too many edges");
    if (XGR_VEC_RESERVE(o->state_rule, ns) || XGR_VEC_RESERVE(o->final, ns) ||
        XGR_VEC_RESERVE(o->ebeg, ns + 1) || XGR_VEC_RESERVE(o->edges, ne) ||
        XGR_VEC_PUSH(o->start, (int32_t)base))
        return XGR_ERR_NOMEM;
    int32_t eb = (int32_t)o->edges.len;
    for (int32_t s = 0; s < d->n; s++) {
        o->state_rule.data[o->state_rule.len++] = rule;
        o->final.data[o->final.len++] = d->final.data[s];
        o->ebeg.data[o->ebeg.len++] = eb + d->ebeg.data[s];
    }
    for (size_t e = 0; e < d->edges.len; e++) {
        xgr_edge ed = d->edges.data[e];
        ed.target += (int32_t)base;
        o->edges.data[o->edges.len++] = ed;
    }
    return XGR_OK;
}

/* A REPEAT rule: one state, final (the counter decides), one ref edge to the child
 * looping back. */
static int emit_repeat(lw_ctx *c, lw_out *o, int32_t rule) {
    lw_dfa d;
    memset(&d, 0, sizeof d);
    uint8_t fin = 1; /* may end subject to the counter (earley.c checks repeat_min) */
    int32_t eb[2] = {0, 1};
    xgr_edge e = {0, c->orules.data[rule].a, 0, 0};
    d.n = 1;
    d.final.data = &fin;
    d.ebeg.data = eb;
    d.edges.data = &e;
    d.edges.len = 1;
    return emit(c, o, rule, &d);
}

/* rule_nullable from the automata themselves; must agree with the IR analysis the
 * construction relied on (a mismatch is a lowering bug). */
static int check_nullable(lw_ctx *c, const lw_out *o) {
    size_t nr = c->orules.len, ns = o->state_rule.len;
    uint8_t *nl = xgr_calloc(nr, 1);
    uint32_t *seen = xgr_calloc(ns + 1, sizeof *seen);
    int32_t *stack = xgr_malloc((ns + 1) * sizeof *stack);
    int rc = XGR_OK;
    if (!nl || !seen || !stack) {
        rc = XGR_ERR_NOMEM;
        goto done;
    }
    uint32_t stamp = 0;
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = nr; i-- > 0;) {
            if (nl[i]) continue;
            const lw_orule *r = &c->orules.data[i];
            int v = 0;
            if (r->kind == XGR_RULE_REPEAT) {
                v = r->b == 0 || nl[r->a];
            } else {
                stamp++;
                size_t sp = 0;
                stack[sp++] = o->start.data[i];
                seen[o->start.data[i]] = stamp;
                while (sp && !v) {
                    int32_t s = stack[--sp];
                    if (o->final.data[s]) v = 1;
                    for (int32_t e = o->ebeg.data[s]; e < o->ebeg.data[s + 1]; e++) {
                        const xgr_edge *ed = &o->edges.data[e];
                        if (ed->ref >= 0 && nl[ed->ref] && seen[ed->target] != stamp) {
                            seen[ed->target] = stamp;
                            stack[sp++] = ed->target;
                        }
                    }
                }
            }
            if (v) {
                nl[i] = 1;
                changed = 1;
            }
        }
    }
    for (size_t i = 0; i < nr; i++)
        if (nl[i] != c->orules.data[i].nullable) {
            rc = xgr_fail(XGR_ERR_INTERNAL, "lowering: nullability of rule '%s' inconsistent",
                          c->orules.data[i].name);
            break;
        }
done:
    free(nl);
    free(seen);
    free(stack);
    return rc;
}

static void ctx_free(lw_ctx *c) {
    for (size_t i = 0; i < c->orules.len; i++) free(c->orules.data[i].name);
    XGR_VEC_FREE(c->orules);
    free(c->omap);
    free(c->rflags);
    free(c->est);
    free(c->nprops);
    free(c->nest);
    free(c->grp);
    free(c->nwide);
    free(c->rwide);
    XGR_VEC_FREE(c->nfa.edges);
    XGR_VEC_FREE(c->nfa2.edges);
    XGR_VEC_FREE(c->share);
    free(c->share_tab);
    XGR_VEC_FREE(c->ranges);
    XGR_VEC_FREE(c->seqs);
    free(c->cls_beg);
    XGR_VEC_FREE(c->cls_seqs);
}

size_t xgr_fsm_memory(const xgr_fsm *f) {
    if (!f) return 0;
    size_t names = 0;
    for (int32_t r = 0; r < f->n_rules; r++)
        if (f->rule_name[r]) names += strlen(f->rule_name[r]) + 1;
    /* per rule: name pointer, start, kind, nullable, repeat child/min/max, lookahead,
     * dispatch; per state: rule, final, edge_begin */
    if (f->rule_attrs) names += (size_t)f->n_rules * sizeof *f->rule_attrs + f->attr_names_len;
    return sizeof *f + names + (size_t)f->n_rules * (sizeof(char *) + 4 * 5 + 3) +
           ((size_t)f->n_states + 1) * 9 + (size_t)f->n_edges * sizeof *f->edges +
           (f->need ? sizeof *f->need + (size_t)f->n_states * 4 * (XGR_NEED_JS + 2) +
                          (size_t)f->n_rules * (8 + 2 * XGR_NEED_JS)
                    : 0);
}

xgr_fsm *xgr_fsm_alloc(size_t nr, size_t ns, size_t ne) {
    xgr_fsm *f = xgr_calloc(1, sizeof *f);
    if (!f) return NULL;
    f->rule_name = xgr_calloc(nr + 1, sizeof *f->rule_name);
    f->rule_start = xgr_malloc((nr + 1) * sizeof(int32_t));
    f->rule_kind = xgr_malloc(nr + 1);
    f->rule_nullable = xgr_malloc(nr + 1);
    f->repeat_child = xgr_malloc((nr + 1) * sizeof(int32_t));
    f->repeat_min = xgr_malloc((nr + 1) * sizeof(int32_t));
    f->repeat_max = xgr_malloc((nr + 1) * sizeof(int32_t));
    f->rule_lookahead = xgr_malloc((nr + 1) * sizeof(int32_t));
    f->rule_dispatch = xgr_malloc(nr + 1);
    f->state_rule = xgr_malloc((ns + 1) * sizeof(int32_t));
    f->final = xgr_malloc(ns + 1);
    f->edge_begin = xgr_malloc((ns + 1) * sizeof(int32_t));
    f->edges = xgr_malloc((ne + 1) * sizeof(xgr_edge));
    f->n_rules = (int32_t)nr; /* so xgr_fsm_free walks the (NULL) names */
    f->attr_min_budget = INT32_MAX;
    if (!f->rule_name || !f->rule_start || !f->rule_kind || !f->rule_nullable ||
        !f->repeat_child || !f->repeat_min || !f->repeat_max || !f->rule_lookahead ||
        !f->rule_dispatch || !f->state_rule || !f->final || !f->edge_begin || !f->edges) {
        xgr_fsm_free(f);
        return NULL;
    }
    return f;
}

void xgr_fsm_free(xgr_fsm *f) {
    if (!f) return;
    if (f->rule_name)
        for (int32_t r = 0; r < f->n_rules; r++) free(f->rule_name[r]);
    free(f->rule_name);
    free(f->rule_start);
    free(f->rule_kind);
    free(f->rule_nullable);
    free(f->repeat_child);
    free(f->repeat_min);
    free(f->repeat_max);
    free(f->rule_lookahead);
    free(f->rule_dispatch);
    free(f->rule_attrs);
    free(f->attr_names);
    free(f->state_rule);
    free(f->final);
    free(f->edge_begin);
    free(f->edges);
    if (f->need) {
        free(f->need->cp);
        free(f->need->jc);
        free(f->need->jc_min);
        free(f->need->rule_cp);
        free(f->need->rule_jc);
        free(f->need->rule_exit);
        free(f->need);
    }
    free(f);
}

/* Gives back a grown vector's spare capacity (up to half of it): the automaton lives as
 * long as its compiled grammar, in a cache counted in bytes. Keeps p if realloc fails. */
static void *shrink_to(void *p, size_t bytes) {
    void *q = p && bytes ? realloc(p, bytes) : NULL;
    return q ? q : p;
}

static int make_fsm(lw_ctx *c, lw_out *o, xgr_fsm **out) {
    size_t nr = c->orules.len, ns = o->state_rule.len;
    xgr_fsm *f = xgr_calloc(1, sizeof *f);
    if (!f) return XGR_ERR_NOMEM;
    f->rule_name = xgr_calloc(nr, sizeof *f->rule_name);
    f->rule_kind = xgr_calloc(nr, 1);
    f->rule_nullable = xgr_calloc(nr, 1);
    f->repeat_child = xgr_malloc(nr * sizeof(int32_t));
    f->repeat_min = xgr_malloc(nr * sizeof(int32_t));
    f->repeat_max = xgr_malloc(nr * sizeof(int32_t));
    f->rule_lookahead = xgr_malloc(nr * sizeof(int32_t));
    f->rule_dispatch = xgr_calloc(nr, 1);
    if (!f->rule_name || !f->rule_kind || !f->rule_nullable || !f->repeat_child || !f->rule_dispatch ||
        !f->repeat_min || !f->repeat_max || !f->rule_lookahead || XGR_VEC_RESERVE(o->edges, 1) || XGR_VEC_RESERVE(o->final, 1) ||
        XGR_VEC_RESERVE(o->state_rule, 1)) {
        xgr_fsm_free(f);
        return XGR_ERR_NOMEM;
    }
    f->n_rules = (int32_t)nr;
    f->root = 0;
    for (size_t i = 0; i < nr; i++) {
        lw_orule *r = &c->orules.data[i];
        f->rule_name[i] = r->name;
        r->name = NULL;
        f->rule_kind[i] = r->kind;
        f->rule_nullable[i] = r->nullable;
        f->repeat_child[i] = r->kind == XGR_RULE_REPEAT ? r->a : -1;
        f->repeat_min[i] = r->kind == XGR_RULE_REPEAT ? r->b : 0;
        f->repeat_max[i] = r->kind == XGR_RULE_REPEAT ? r->c : 0;
        f->rule_lookahead[i] = r->lookahead;
        f->rule_dispatch[i] = r->dispatch;
    }
    if (xgr_ir_has_attrs(c->g)) {
        /* the "minus ''" variant of an attributed rule is the same rule in a context
         * where it is not empty: it carries the attributes too */
        const xgr_grammar *g = c->g;
        f->rule_attrs = xgr_malloc(nr * sizeof *f->rule_attrs);
        f->attr_names = xgr_malloc(g->names.len + 1);
        if (!f->rule_attrs || !f->attr_names) {
            xgr_fsm_free(f);
            return XGR_ERR_NOMEM;
        }
        memcpy(f->attr_names, g->names.data, g->names.len);
        f->attr_names_len = g->names.len;
        f->attr_min_budget = INT32_MAX;
        for (size_t i = 0; i < nr; i++) {
            const lw_orule *r = &c->orules.data[i];
            f->rule_attrs[i] = r->src == LW_SRC_RULE ? g->rules.data[r->a].attrs
                                                      : xgr_attrs_none();
            xgr_rule_attrs *w = &f->rule_attrs[i];
            if (w->hidden_kind && w->hidden_body >= 0 && w->hidden_marker >= 0) {
                /* IR rule ids -> output rule ids (made at the start: found, not made) */
                int32_t ob, om;
                if (lw_ref_rule(c, w->hidden_body, 0, &ob) ||
                    lw_ref_rule(c, w->hidden_marker, 0, &om) || (size_t)ob >= nr ||
                    (size_t)om >= nr) {
                    xgr_fsm_free(f);
                    return xgr_fail(XGR_ERR_INTERNAL, "suffix/stop marker rules not lowered");
                }
                w->hidden_body = ob;
                w->hidden_marker = om;
            } else {
                w->hidden_body = w->hidden_marker = -1;
            }
            w->forced_body = c->orules.data[i].forced;
            const xgr_rule_attrs *a = w;
            if (a->max_chars >= 0 || a->max_tokens >= 0 || a->max_json_chars >= 0)
                f->attr_budgets = 1;
            if (a->max_chars >= 0 && a->max_chars < f->attr_min_budget)
                f->attr_min_budget = a->max_chars;
            /* (a decoded character takes at least one byte too) */
            if (a->max_json_chars >= 0 && a->max_json_chars < f->attr_min_budget)
                f->attr_min_budget = a->max_json_chars;
            if (a->max_tokens == 0) f->attr_min_budget = 0;
            if (a->lazy || a->max_tokens >= 0) f->attr_lazy = 1;
            if (a->lazy) f->attr_lazy_rules = 1;
            if (a->unique == XGR_UNIQUE_ITEM) f->attr_unique = 1;
            if (a->unique == XGR_UNIQUE_SEARCH_SCOPE) f->attr_unique_search = 1;
            if (a->forced_body >= 0) f->attr_forced = 1;
            /* (a suffix / stop marker alone records nothing: it only edits captures) */
            if (a->capture_off >= 0 || a->stop_capture_off >= 0) f->attr_captures = 1;
        }
    }
    f->rule_start = shrink_to(o->start.data, o->start.len * sizeof *o->start.data);
    o->start.data = NULL;
    f->n_states = (int32_t)ns;
    f->state_rule = shrink_to(o->state_rule.data, (ns + 1) * sizeof *o->state_rule.data);
    o->state_rule.data = NULL;
    f->final = shrink_to(o->final.data, ns + 1);
    o->final.data = NULL;
    f->edge_begin = shrink_to(o->ebeg.data, o->ebeg.len * sizeof *o->ebeg.data);
    o->ebeg.data = NULL;
    f->n_edges = (int32_t)o->edges.len;
    f->edges = shrink_to(o->edges.data, (o->edges.len + 1) * sizeof *o->edges.data);
    o->edges.data = NULL;
    *out = f;
    return XGR_OK;
}

/* The forced close of a suffix / stop rule with a budget (ir.h forced_body): does output
 * rule `rule` get one? The body must derive some non-empty string (an empty body could
 * only close at the rule's entry, which is not modelled). */
static int wants_forced_close(const lw_ctx *c, const lw_orule *r) {
    if (r->src != LW_SRC_RULE || r->kind != XGR_RULE_NORMAL) return 0;
    const xgr_rule_attrs *a = &c->g->rules.data[r->a].attrs;
    return a->hidden_kind && !a->hidden_before && a->hidden_body >= 0 && a->hidden_marker >= 0 &&
           (a->max_chars >= 0 || a->max_tokens >= 0) && (c->rflags[a->hidden_body] & RF_NE);
}

/* *out = d plus the forced close of output rule `rule`: a reference edge from the start to
 * the body alone (minus "", its own output rule, recorded in the rule's `forced`) leading
 * to a new edgeless state that is not final: the parser counts it as an end only once the
 * occurrence's budget is spent (parse/attrs.h xgr_forced_spent). For the mask cache it is
 * a dead end where an entry's walk leaves the rule from a row's item (the matcher adds the
 * tokens such a close allows near a deadline: runtime/matcher.c); inside a token the
 * cache's parser applies the budgets the token enters. A start state that edges lead back
 * to gets a fresh copy as the new start, so the body starts only where the rule does. */
static int add_forced_close(lw_ctx *c, int32_t rule, const lw_dfa *d, lw_dfa *out) {
    int32_t body;
    int rc = lw_ref_rule(c, c->g->rules.data[c->orules.data[rule].a].attrs.hidden_body, 1, &body);
    if (rc) return rc;
    int back = 0; /* an edge into the start state */
    for (size_t e = 0; e < d->edges.len && !back; e++) back = d->edges.data[e].target == 0;
    int32_t shift = back ? 1 : 0, n = d->n + shift + 1, ff = n - 1;
    size_t ne = d->edges.len + 1 + (back ? (size_t)(d->ebeg.data[1] - d->ebeg.data[0]) : 0);
    out->edges.len = 0;
    if (XGR_VEC_RESERVE(out->final, (size_t)n) || XGR_VEC_RESERVE(out->ebeg, (size_t)n + 1) ||
        XGR_VEC_RESERVE(out->edges, ne))
        return XGR_ERR_NOMEM;
    out->n = n;
    for (int32_t s = 0; s < n; s++) {
        int32_t src = s == ff ? -1 : s < shift ? 0 : s - shift; /* (the old state copied) */
        out->final.data[s] = src < 0 ? 0 : d->final.data[src];
        out->ebeg.data[s] = (int32_t)out->edges.len;
        if (src < 0) continue;
        int added = s != 0; /* the body's edge: start only, among the refs by id */
        for (int32_t e = d->ebeg.data[src]; e < d->ebeg.data[src + 1]; e++) {
            xgr_edge ed = d->edges.data[e];
            if (!added && ed.ref >= body) {
                if (ed.ref == body) return XGR_OK; /* (referenced already: no forced close) */
                xgr_edge f = {ff, body, 0, 0};
                out->edges.data[out->edges.len++] = f;
                added = 1;
            }
            ed.target += shift;
            out->edges.data[out->edges.len++] = ed;
        }
        if (!added) {
            xgr_edge f = {ff, body, 0, 0};
            out->edges.data[out->edges.len++] = f;
        }
    }
    out->ebeg.data[n] = (int32_t)out->edges.len;
    out->final.len = (size_t)n;
    out->ebeg.len = (size_t)n + 1;
    c->orules.data[rule].forced = body;
    return XGR_OK;
}

/* Forgets output rules created from `keep` on (a failed attempt's). */
static int rollback_rules(lw_ctx *c, size_t keep) {
    for (size_t i = keep; i < c->orules.len; i++) free(c->orules.data[i].name);
    c->orules.len = keep;
    memset(c->omap, 0xff, c->omap_cap * sizeof *c->omap);
    for (size_t i = 0; i < keep; i++) {
        const lw_orule *o = &c->orules.data[i];
        size_t j = okey_hash(o->src, o->a, o->b, o->c) & (c->omap_cap - 1);
        while (c->omap[j] >= 0) j = (j + 1) & (c->omap_cap - 1);
        c->omap[j] = (int32_t)i;
    }
    return XGR_OK;
}

/* Determinisation budget of one rule: DFAs of ordinary rules stay within a small
 * multiple of their NFA; beyond that the subset construction is blowing up
 * exponentially and would only burn time and memory up to max_fsm_states. */
static int64_t rule_budget(const lw_ctx *c, int64_t remaining) {
    int64_t local = LW_DFA_PER_NFA * (int64_t)c->nfa.n_states;
    if (local < LW_DFA_MIN_BUDGET) local = LW_DFA_MIN_BUDGET;
    return local < remaining ? local : remaining;
}

/* DFA of output rule `id`. A determinisation that blows up is retried once in safe
 * mode (see lw_ctx.safe), which keeps regex-like rules such as (a|b)* a (a|b){20}
 * small by moving the counting into a REPEAT rule; if that blows up too it is an
 * error. */
static int determinise(lw_ctx *c, lw_dfa_ws *ws, int64_t budget, const lw_dfa **d) {
    return c->memo ? lw_dfa_memo(ws, &c->nfa, budget, &c->memo_out, d)
                   : lw_nfa_to_dfa(ws, &c->nfa, budget, d);
}

static int build_rule_dfa(lw_ctx *c, lw_dfa_ws *ws, int32_t id, int64_t remaining,
                          const lw_dfa **d) {
    size_t keep = c->orules.len;
    int rc = lw_build_nfa(c, id);
    if (rc) return rc;
    int64_t budget = rule_budget(c, remaining);
    rc = determinise(c, ws, budget, d);
    if (rc == XGR_ERR_LIMIT && c->safe_differs) {
        rollback_rules(c, keep);
        c->safe = 1;
        rc = lw_build_nfa(c, id);
        c->safe = 0;
        if (rc) return rc;
        budget = rule_budget(c, remaining);
        rc = determinise(c, ws, budget, d);
    }
    if (rc == XGR_ERR_LIMIT) {
        char why[256];
        snprintf(why, sizeof why, "%s", xgr_last_error());
        rc = xgr_fail(XGR_ERR_LIMIT, "rule '%s': automaton too large: %s (%s)",
                      c->orules.data[id].name, why,
                      budget == remaining ? "max_fsm_states reached"
                                          : "subset construction blew up");
    }
    return rc;
}

/* Whether some literal holds a token marker: then byte 0xFF only ever starts a marker,
 * and TagDispatch free text must not admit it (tag_dispatch.c). */
static int has_markers(const xgr_grammar *g) {
    for (size_t i = 0; i < g->nodes.len; i++) {
        const xgr_node *nd = &g->nodes.data[i];
        size_t pos = 0;
        if (nd->kind == XGR_NODE_BYTES &&
            xgr_token_marker_find(g->bytes.data + nd->off, (size_t)nd->count, &pos) >= 0)
            return 1;
    }
    return 0;
}

int xgr_fsm_build(const xgr_grammar *g, const xgr_compile_options *opts, xgr_fsm **out) {
    return xgr_fsm_build_ex(g, opts, NULL, out);
}

int xgr_fsm_build_ex(const xgr_grammar *g, const xgr_compile_options *opts,
                     xgr_fsm_externs *ext, xgr_fsm **out) {
    if (!g || !opts || !out) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_fsm_build: NULL argument");
    *out = NULL;
    lw_ctx c;
    memset(&c, 0, sizeof c);
    c.g = g;
    c.max_rules = opts->max_rules > 0 ? opts->max_rules : 100000;
    c.max_states = opts->max_fsm_states > 0 ? opts->max_fsm_states : 2000000;
    c.inline_max = opts->inline_max_states;
    c.rthresh = opts->repeat_threshold > 0 ? opts->repeat_threshold : 16;
    c.memo = opts->cross_grammar_cache != -1;
    c.markers = has_markers(g) || (ext && ext->markers);
    c.externs = ext ? ext->is_extern : NULL;
    c.nfa_limit = 4 * c.max_states + 4096;
    if (c.nfa_limit > INT32_MAX / 2) c.nfa_limit = INT32_MAX / 2;
    lw_out o;
    memset(&o, 0, sizeof o);
    lw_dfa_ws *ws = lw_dfa_ws_new();
    lw_dfa tdd; /* automata built directly: TagDispatch rules, literal-led alternations */
    memset(&tdd, 0, sizeof tdd);
    lw_dfa fcd; /* a rule's automaton with its forced close (add_forced_close) */
    memset(&fcd, 0, sizeof fcd);
    int rc = ws ? XGR_OK : XGR_ERR_NOMEM;
    int32_t root;
    if (rc || (rc = lw_analyze(&c))) goto done;
    if ((rc = get_rule(&c, LW_SRC_RULE, g->root, 0, 0, xgr_ir_rule_name(g, g->root), "", 0,
                       &root)))
        goto done;
    /* the body and marker rules of variable suffix / stop markers: run at capture time
     * (parse/captures.c), referenced by nothing */
    for (size_t r = 0; r < g->rules.len; r++) {
        const xgr_rule_attrs *a = &g->rules.data[r].attrs;
        int32_t o;
        if (!(c.rflags[r] & RF_REACH) || !a->hidden_kind || a->hidden_body < 0 ||
            a->hidden_marker < 0)
            continue;
        if ((rc = lw_ref_rule(&c, a->hidden_body, 0, &o)) ||
            (rc = lw_ref_rule(&c, a->hidden_marker, 0, &o)))
            goto done;
    }
    for (size_t i = 0; i < c.orules.len; i++) {
        c.cur = (int32_t)i;
        lw_orule r = c.orules.data[i];
        if (r.kind == XGR_RULE_REPEAT) {
            if ((rc = emit_repeat(&c, &o, (int32_t)i))) goto done;
            continue;
        }
        int32_t la = r.src == LW_SRC_RULE ? g->rules.data[r.a].lookahead : -1;
        if (la >= 0) {
            uint8_t q = lw_node_props(&c, la, 0);
            if ((rc = c.status)) goto done;
            /* An unsatisfiable assertion would only mislead the mask cache. */
            int32_t lid = -1;
            if ((q & NP_PROD) &&
                (rc = get_rule(&c, LW_SRC_EXPR, la, 0, 0, r.name, "$lookahead", 0, &lid)))
                goto done;
            c.orules.data[i].lookahead = lid;
        }
        const lw_dfa *d = &tdd;
        int64_t remaining = c.max_states - (int64_t)o.state_rule.len;
        if (r.src == LW_SRC_RULE && c.externs && c.externs[r.a]) {
            /* A stand-in's own automaton is never entered (link.c redirects its uses):
             * one byte, so it is productive and not nullable, with nothing to lower. A
             * nullable stand-in would have been lowered with "" in mind: refused. */
            if (r.nullable) {
                rc = xgr_fail(XGR_ERR_SEMANTIC, "stand-in rule '%s' matches the empty string",
                              r.name);
                goto done;
            }
            static const uint8_t fin[2] = {0, 1};
            static const int32_t eb[3] = {0, 1, 1};
            static const xgr_edge one = {1, -1, 'L', 'L'};
            lw_dfa stub;
            memset(&stub, 0, sizeof stub);
            stub.n = 2;
            stub.final.data = (uint8_t *)fin;
            stub.ebeg.data = (int32_t *)eb;
            stub.edges.data = (xgr_edge *)&one;
            stub.edges.len = 1;
            if ((rc = emit(&c, &o, (int32_t)i, &stub))) goto done;
            continue;
        }
        if (r.src == LW_SRC_RULE && g->nodes.data[g->rules.data[r.a].body].kind ==
                                        XGR_NODE_TAG_DISPATCH) {
            c.orules.data[i].dispatch = 1;
            rc = lw_td_build(&c, (int32_t)i, remaining, &tdd);
        } else {
            int built = 0;
            rc = lw_trie_build(&c, (int32_t)i, remaining, &tdd, &built);
            if (!rc && !built) rc = build_rule_dfa(&c, ws, (int32_t)i, remaining, &d);
            if (!rc && wants_forced_close(&c, &r)) {
                if (!(rc = add_forced_close(&c, (int32_t)i, d, &fcd)) &&
                    c.orules.data[i].forced >= 0)
                    d = &fcd;
            }
        }
        if (rc || (rc = emit(&c, &o, (int32_t)i, d))) goto done;
    }
    if (XGR_VEC_PUSH(o.ebeg, (int32_t)o.edges.len)) {
        rc = XGR_ERR_NOMEM;
        goto done;
    }
    if ((rc = check_nullable(&c, &o))) goto done;
    if (ext) { /* a stand-in is never nullable (link.c checks), so "minus ''" is itself */
        ext->rule_extern = xgr_malloc((c.orules.len + 1) * sizeof *ext->rule_extern);
        if (!ext->rule_extern) {
            rc = XGR_ERR_NOMEM;
            goto done;
        }
        for (size_t i = 0; i < c.orules.len; i++) {
            const lw_orule *r = &c.orules.data[i];
            ext->rule_extern[i] =
                r->src == LW_SRC_RULE && ext->is_extern[r->a] ? r->a : -1;
        }
    }
    rc = make_fsm(&c, &o, out);
done:
    lw_dfa_ws_free(ws);
    lw_td_dfa_free(&tdd);
    lw_td_dfa_free(&fcd);
    lw_td_dfa_free(&c.memo_out);
    out_free(&o);
    ctx_free(&c);
    return rc;
}

/* ---- dump --------------------------------------------------------------------------------- */

typedef struct {
    char *p;
    size_t len, cap;
    int err;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->err) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (w < 0) {
            b->err = XGR_ERR_INTERNAL;
            return;
        }
        if (b->p && b->len + (size_t)w < b->cap) {
            b->len += (size_t)w;
            return;
        }
        size_t ncap = b->cap ? b->cap * 2 : 4096;
        while (ncap < b->len + (size_t)w + 1) ncap *= 2;
        char *q = xgr_realloc(b->p, ncap);
        if (!q) {
            b->err = XGR_ERR_NOMEM;
            return;
        }
        b->p = q;
        b->cap = ncap;
    }
}

static void sb_byte(sbuf *b, uint8_t ch) {
    if (ch >= 0x21 && ch < 0x7f && ch != '\'' && ch != '\\')
        sb_printf(b, "'%c'", ch);
    else
        sb_printf(b, "\\x%02x", ch);
}

/* A linked automaton's fragment rules have no names (link.c fsm_append). */
static const char *rule_label(const xgr_fsm *f, int32_t r) {
    return f->rule_name[r] ? f->rule_name[r] : "?";
}

int xgr_fsm_dump(const xgr_fsm *f, char **out, size_t *out_len) {
    if (!f || !out) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_fsm_dump: NULL argument");
    sbuf b = {0};
    sb_printf(&b, "fsm: %d rules, %d states, %d edges, root %d\n", (int)f->n_rules,
              (int)f->n_states, (int)f->n_edges, (int)f->root);
    for (int32_t r = 0; r < f->n_rules; r++) {
        int32_t s0 = f->rule_start[r], s1 = xgr_fsm_rule_end(f, r);
        sb_printf(&b, "rule %d '%s' %s start=%d nullable=%d", (int)r, rule_label(f, r),
                  f->rule_kind[r] == XGR_RULE_REPEAT ? "repeat" : "normal", (int)s0,
                  (int)f->rule_nullable[r]);
        if (f->rule_kind[r] == XGR_RULE_REPEAT)
            sb_printf(&b, " child=%d min=%d max=%d", (int)f->repeat_child[r],
                      (int)f->repeat_min[r], (int)f->repeat_max[r]);
        if (f->rule_lookahead[r] >= 0) sb_printf(&b, " lookahead=%d", (int)f->rule_lookahead[r]);
        sb_printf(&b, "\n");
        for (int32_t s = s0; s < s1; s++) {
            sb_printf(&b, "  %d%s:", (int)s, f->final[s] ? "*" : "");
            for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++) {
                const xgr_edge *ed = &f->edges[e];
                sb_printf(&b, " ");
                if (ed->ref >= 0) {
                    sb_printf(&b, "<%s>", rule_label(f, ed->ref));
                } else {
                    sb_byte(&b, ed->lo);
                    if (ed->hi != ed->lo) {
                        sb_printf(&b, "-");
                        sb_byte(&b, ed->hi);
                    }
                }
                sb_printf(&b, "->%d", (int)ed->target);
            }
            sb_printf(&b, "\n");
        }
    }
    if (b.err) {
        free(b.p);
        return b.err == XGR_ERR_NOMEM ? XGR_ERR_NOMEM
                                      : xgr_fail(XGR_ERR_INTERNAL, "xgr_fsm_dump: format error");
    }
    if (!b.p) {
        b.p = xgr_strndup("", 0);
        if (!b.p) return XGR_ERR_NOMEM;
    }
    *out = b.p;
    if (out_len) *out_len = b.len;
    return XGR_OK;
}
