/* Fragments and linking: a request grammar's stand-in rules replaced by automata lowered
 * once (one per tool), so recurring tools skip parsing and lowering. */
#include <string.h>

#include "link.h"

/* The fragment's compiled-grammar tables (scan_tables.h), as compiling it alone would
 * make them. */
static int fragment_tables(xgr_fragment *f) {
    const xgr_fsm *q = f->fsm;
    size_t ns = (size_t)q->n_states + 1, nr = (size_t)q->n_rules + 1;
    xgr_scan_tables *t = &f->scan;
    t->scannable = xgr_malloc(ns);
    t->ref_begin = xgr_malloc(ns * sizeof(int32_t));
    t->scan_local = xgr_malloc(ns * sizeof(int32_t));
    t->n_scan = xgr_malloc(nr * sizeof(int32_t));
    t->flat = xgr_malloc(nr);
    t->opaque = xgr_malloc(nr);
    if (!t->scannable || !t->ref_begin || !t->scan_local || !t->n_scan || !t->flat || !t->opaque)
        return XGR_ERR_NOMEM;
    xgr_scan_rules_init(q, 0, q->n_rules, t);
    xgr_scan_states(q, q->n_states, t);
    f->n_pairs = xgr_scan_pairs(q, q->n_states, t, 0, NULL, NULL, &f->pair_slots);
    f->pair_edges = xgr_malloc(((size_t)f->n_pairs + 1) * sizeof(int32_t));
    f->pair_first = xgr_malloc(((size_t)f->n_pairs + 1) * sizeof(int32_t));
    if (!f->pair_edges || !f->pair_first) return XGR_ERR_NOMEM;
    if (f->pair_slots > INT32_MAX) /* far past any grammar's pair budget: never used */
        f->n_pairs = 0;
    else
        xgr_scan_pairs(q, q->n_states, t, 0, f->pair_edges, f->pair_first, &f->pair_slots);
    return XGR_OK;
}

int xgr_fragment_new(const xgr_grammar *g, const xgr_compile_options *opts,
                     xgr_fragment **out) {
    if (!g || !out) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_fragment_new: NULL argument");
    *out = NULL;
    int rc = xgr_ir_validate(g);
    if (rc) return rc;
    xgr_compile_options o;
    memset(&o, 0, sizeof o);
    if (opts) o = *opts;
    xgr_compile_fill_defaults(&o);
    xgr_fragment *f = xgr_calloc(1, sizeof *f);
    if (!f) return XGR_ERR_NOMEM;
    atomic_init(&f->refcount, 1);
    if ((rc = xgr_fsm_build(g, &o, &f->fsm)) || (rc = xgr_fsm_check_productive(f->fsm)) ||
        (rc = xgr_grammar_token_terms(g, NULL, 0, &f->token_ids, &f->n_token_ids)))
        goto fail;
    if (f->fsm->rule_nullable[f->fsm->root]) {
        rc = xgr_fail(XGR_ERR_SEMANTIC,
                      "the root rule '%s' matches the empty string, so it cannot be linked",
                      f->fsm->rule_name[f->fsm->root]);
        goto fail;
    }
    if ((rc = fragment_tables(f))) goto fail;
    f->memory = sizeof *f + xgr_fsm_memory(f->fsm) + (size_t)f->n_token_ids * sizeof(int32_t) +
                (size_t)f->fsm->n_states * 9 + (size_t)f->fsm->n_rules * 6 +
                (size_t)f->n_pairs * 8;
    *out = f;
    return XGR_OK;
fail:
    xgr_fragment_release(f);
    return rc;
}

size_t xgr_fragment_memory(const xgr_fragment *f) { return f ? f->memory : 0; }

void xgr_fragment_retain(xgr_fragment *f) {
    if (f) atomic_fetch_add(&f->refcount, 1);
}

void xgr_fragment_release(xgr_fragment *f) {
    if (!f || atomic_fetch_sub(&f->refcount, 1) != 1) return;
    xgr_fsm_free(f->fsm);
    free(f->token_ids);
    free(f->scan.scannable);
    free(f->scan.ref_begin);
    free(f->scan.scan_local);
    free(f->scan.n_scan);
    free(f->scan.flat);
    free(f->scan.opaque);
    free(f->pair_edges);
    free(f->pair_first);
    free(f);
}


/* Appends automaton `src` at rule offset `ro`, state offset `so`, edge offset `eo`; its
 * references go through `remap` (NULL: shift by ro). Names are moved when `take`; else
 * they stay NULL: only messages read them, and every check that names a rule has passed
 * on the fragment, so copying a hundred tools' names would buy nothing. */
static void fsm_append(xgr_fsm *dst, xgr_fsm *src, int32_t ro, int32_t so, int32_t eo,
                       const int32_t *remap, int take) {
    for (int32_t r = 0; r < src->n_rules; r++) {
        int32_t d = ro + r;
        if (take) {
            dst->rule_name[d] = src->rule_name[r];
            src->rule_name[r] = NULL;
        }
        dst->rule_start[d] = src->rule_start[r] + so;
        dst->rule_kind[d] = src->rule_kind[r];
        dst->rule_nullable[d] = src->rule_nullable[r];
        int32_t ch = src->repeat_child[r], la = src->rule_lookahead[r];
        dst->repeat_child[d] = ch < 0 ? -1 : remap ? remap[ch] : ch + ro;
        dst->repeat_min[d] = src->repeat_min[r];
        dst->repeat_max[d] = src->repeat_max[r];
        dst->rule_lookahead[d] = la < 0 ? -1 : remap ? remap[la] : la + ro;
        dst->rule_dispatch[d] = src->rule_dispatch[r];
    }
    /* Flat copies with offsets, through local pointers so the loops vectorize (a linked
     * request copies every fragment's states and edges). */
    int32_t nst = src->n_states, ned = src->n_edges;
    const int32_t *ssr = src->state_rule, *seb = src->edge_begin;
    int32_t *restrict dsr = dst->state_rule + so, *restrict deb = dst->edge_begin + so;
    for (int32_t s = 0; s < nst; s++) dsr[s] = ssr[s] + ro;
    for (int32_t s = 0; s < nst; s++) deb[s] = seb[s] + eo;
    memcpy(dst->final + so, src->final, (size_t)nst);
    const xgr_edge *se = src->edges;
    xgr_edge *restrict de = dst->edges + eo;
    if (remap) {
        for (int32_t e = 0; e < ned; e++) {
            xgr_edge ed = se[e];
            ed.target += so;
            if (ed.ref >= 0) ed.ref = remap[ed.ref];
            de[e] = ed;
        }
    } else {
        for (int32_t e = 0; e < ned; e++) {
            xgr_edge ed = se[e];
            ed.target += so;
            ed.ref = ed.ref < 0 ? ed.ref : ed.ref + ro;
            de[e] = ed;
        }
    }
}

/* Rule attributes of the pieces (rule offsets: skeleton 0, fragment i rule_off[i]) into
 * the linked automaton, capture labels' pools concatenated. Nothing when none has any. */
static int link_attrs(xgr_fsm *f, xgr_fsm *sk, xgr_fragment *const *frags, size_t n,
                      const int32_t *rule_off) {
    size_t names = sk->rule_attrs ? sk->attr_names_len : 0;
    int any = sk->rule_attrs != NULL;
    for (size_t i = 0; i < n; i++)
        if (frags[i]->fsm->rule_attrs) {
            any = 1;
            names += frags[i]->fsm->attr_names_len;
        }
    if (!any) return XGR_OK;
    f->rule_attrs = xgr_malloc((size_t)f->n_rules * sizeof *f->rule_attrs + 1);
    f->attr_names = xgr_malloc(names + 1);
    if (!f->rule_attrs || !f->attr_names) return XGR_ERR_NOMEM;
    for (int32_t r = 0; r < f->n_rules; r++) f->rule_attrs[r] = xgr_attrs_none();
    f->attr_min_budget = INT32_MAX;
    size_t at = 0;
    for (size_t i = 0; i <= n; i++) {
        const xgr_fsm *q = i == 0 ? sk : frags[i - 1]->fsm;
        int32_t ro = i == 0 ? 0 : rule_off[i - 1];
        if (!q->rule_attrs) continue;
        memcpy(f->attr_names + at, q->attr_names, q->attr_names_len);
        for (int32_t r = 0; r < q->n_rules; r++) {
            xgr_rule_attrs a = q->rule_attrs[r];
            if (a.capture_off >= 0) a.capture_off += (int32_t)at;
            if (a.stop_capture_off >= 0) a.stop_capture_off += (int32_t)at;
            if (a.hidden_body >= 0) a.hidden_body += ro;
            if (a.hidden_marker >= 0) a.hidden_marker += ro;
            if (a.forced_body >= 0) a.forced_body += ro;
            f->rule_attrs[ro + r] = a;
        }
        at += q->attr_names_len;
        f->attr_budgets |= q->attr_budgets;
        f->attr_lazy |= q->attr_lazy;
        f->attr_captures |= q->attr_captures;
        f->attr_lazy_rules |= q->attr_lazy_rules;
        f->attr_unique |= q->attr_unique;
        f->attr_unique_search |= q->attr_unique_search;
        f->attr_forced |= q->attr_forced;
        if (q->attr_min_budget < f->attr_min_budget) f->attr_min_budget = q->attr_min_budget;
    }
    f->attr_names_len = at;
    return XGR_OK;
}

int xgr_link(const xgr_grammar *g, const char *const *names, xgr_fragment *const *frags,
             size_t n, const xgr_compile_options *opts, int productive, xgr_fsm **fsm,
             int32_t **token_ids, int32_t *n_token_ids, xgr_link_layout *layout) {
    size_t nr = g->rules.len;
    uint8_t *is_ext = xgr_calloc(nr + 1, 1);
    int32_t *frag_of = xgr_malloc((nr + 1) * sizeof *frag_of);
    int32_t *extra = NULL, *remap = NULL, *rule_off = NULL;
    xgr_fsm *sk = NULL, *f = NULL;
    xgr_fsm_externs ext = {is_ext, 0, NULL};
    int rc = XGR_OK;
    if (!is_ext || !frag_of) {
        rc = XGR_ERR_NOMEM;
        goto done;
    }
    size_t n_extra = 0;
    for (size_t i = 0; i < n; i++) {
        if (!names[i] || !frags[i]) {
            rc = xgr_fail(XGR_ERR_INVALID_ARG, "xgr_compile_linked: NULL name or fragment %zu", i);
            goto done;
        }
        int32_t r = xgr_ir_find_rule(g, names[i], strlen(names[i]));
        if (r < 0) {
            rc = xgr_fail(XGR_ERR_SEMANTIC, "no rule named '%.200s' to link a fragment to",
                          names[i]);
            goto done;
        }
        if (is_ext[r] || r == g->root) {
            rc = xgr_fail(XGR_ERR_INVALID_ARG, "rule '%.200s' %s", names[i],
                          is_ext[r] ? "is named twice" : "is the root: it cannot be a stand-in");
            goto done;
        }
        is_ext[r] = 1;
        frag_of[r] = (int32_t)i;
        n_extra += (size_t)frags[i]->n_token_ids;
        if (frags[i]->n_token_ids) ext.markers = 1;
    }
    if ((rc = xgr_fsm_build_ex(g, opts, &ext, &sk)) ||
        (!productive && (rc = xgr_fsm_check_productive(sk))))
        goto done;
    /* Totals, and where each fragment's rules start. */
    int64_t ns = sk->n_states, ne = sk->n_edges, nrules = sk->n_rules;
    rule_off = xgr_malloc((n + 1) * sizeof *rule_off);
    remap = xgr_malloc(((size_t)sk->n_rules + 1) * sizeof *remap);
    extra = xgr_malloc((n_extra + 1) * sizeof *extra);
    if (!rule_off || !remap || !extra) {
        rc = XGR_ERR_NOMEM;
        goto done;
    }
    n_extra = 0;
    for (size_t i = 0; i < n; i++) {
        const xgr_fsm *q = frags[i]->fsm;
        rule_off[i] = (int32_t)nrules;
        nrules += q->n_rules;
        ns += q->n_states;
        ne += q->n_edges;
        if (frags[i]->n_token_ids)
            memcpy(extra + n_extra, frags[i]->token_ids,
                   (size_t)frags[i]->n_token_ids * sizeof *extra);
        n_extra += (size_t)frags[i]->n_token_ids;
    }
    if (ns > opts->max_fsm_states) {
        rc = xgr_fail(XGR_ERR_LIMIT, "linked grammar exceeds max_fsm_states = %d",
                      (int)opts->max_fsm_states);
        goto done;
    }
    if (nrules > opts->max_rules || ne > INT32_MAX) {
        rc = xgr_fail(XGR_ERR_LIMIT, "linked grammar needs more than max_rules = %d rules",
                      (int)opts->max_rules);
        goto done;
    }
    /* A stand-in's uses (its "minus ''" variant too: the build refuses a nullable
     * stand-in) enter the fragment's root; the stand-in's stub stays behind, unreachable. */
    for (int32_t r = 0; r < sk->n_rules; r++) {
        int32_t x = ext.rule_extern[r];
        remap[r] = x < 0 ? r : rule_off[frag_of[x]] + frags[frag_of[x]]->fsm->root;
    }
    if (!(f = xgr_fsm_alloc((size_t)nrules, (size_t)ns, (size_t)ne))) {
        rc = XGR_ERR_NOMEM;
        goto done;
    }
    f->root = sk->root;
    f->n_states = (int32_t)ns;
    f->n_edges = (int32_t)ne;
    int32_t so = sk->n_states, eo = sk->n_edges;
    fsm_append(f, sk, 0, 0, 0, remap, 1);
    for (size_t i = 0; i < n; i++) {
        xgr_fsm *q = frags[i]->fsm;
        fsm_append(f, q, rule_off[i], so, eo, NULL, 0);
        so += q->n_states;
        eo += q->n_edges;
    }
    f->edge_begin[ns] = (int32_t)ne;
    if ((rc = link_attrs(f, sk, frags, n, rule_off))) goto done;
    if ((rc = xgr_grammar_token_terms(g, extra, (int32_t)n_extra, token_ids, n_token_ids)))
        goto done;
    layout->frags = frags;
    layout->n = n;
    layout->sk_rules = sk->n_rules;
    layout->sk_states = sk->n_states;
    layout->sk_edges = sk->n_edges;
    *fsm = f;
    f = NULL;
done:
    xgr_fsm_free(f);
    xgr_fsm_free(sk);
    free(ext.rule_extern);
    free(is_ext);
    free(frag_of);
    free(extra);
    free(remap);
    free(rule_off);
    return rc;
}
