/* xgr_compile: lower a grammar to automata and set up its (lazy) mask cache. */
#include "../mask/compiled.h"

static void fill_defaults(xgr_compile_options *o) {
    if (o->max_rules <= 0) o->max_rules = 100000;
    if (o->max_fsm_states <= 0) o->max_fsm_states = 2000000;
    if (o->inline_max_states == 0) o->inline_max_states = 32;
    if (o->repeat_threshold <= 0) o->repeat_threshold = 16;
    if (o->max_row_items <= 0) o->max_row_items = 100000;
}

/* Every rule must derive some finite string, or a matcher could accept a prefix it can
 * never finish; reject such grammars up front. */
static int check_productive(const xgr_fsm *f) {
    uint8_t *prod_rule = xgr_calloc((size_t)f->n_rules + 1, 1);
    uint8_t *prod_state = xgr_calloc((size_t)f->n_states + 1, 1);
    if (!prod_rule || !prod_state) {
        free(prod_rule);
        free(prod_state);
        return XGR_ERR_NOMEM;
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (int32_t s = 0; s < f->n_states; s++) {
            if (prod_state[s]) continue;
            int32_t r = f->state_rule[s];
            int ok = f->rule_kind[r] == XGR_RULE_REPEAT ? f->repeat_min[r] == 0 : f->final[s];
            for (int32_t e = f->edge_begin[s]; !ok && e < f->edge_begin[s + 1]; e++) {
                const xgr_edge *ed = &f->edges[e];
                if (ed->ref < 0)
                    ok = prod_state[ed->target];
                else if (f->rule_kind[r] == XGR_RULE_REPEAT)
                    ok = prod_rule[ed->ref]; /* loop until min reached */
                else
                    ok = prod_rule[ed->ref] && prod_state[ed->target];
            }
            if (ok) {
                prod_state[s] = 1;
                if (s == f->rule_start[r] && !prod_rule[r]) prod_rule[r] = 1;
                changed = 1;
            }
        }
    }
    int rc = XGR_OK;
    for (int32_t r = 0; r < f->n_rules; r++)
        if (!prod_rule[r]) {
            rc = xgr_fail(XGR_ERR_SEMANTIC,
                          "rule '%s' can never finish (every alternative recurses forever)",
                          f->rule_name[r] ? f->rule_name[r] : "?");
            break;
        }
    free(prod_rule);
    free(prod_state);
    return rc;
}

/* repeat_parent[C] = R when every ref edge to C sits in REPEAT rule R (and C is not
 * the root), so C's items always have an R item as parent. */
static void find_repeat_parents(const xgr_fsm *f, int32_t *rp) {
    for (int32_t r = 0; r < f->n_rules; r++) rp[r] = -2; /* -2: no referrer seen yet */
    for (int32_t s = 0; s < f->n_states; s++)
        for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++) {
            int32_t c = f->edges[e].ref;
            if (c < 0) continue;
            int32_t owner = f->state_rule[s];
            int32_t want = f->rule_kind[owner] == XGR_RULE_REPEAT ? owner : -1;
            rp[c] = (rp[c] == -2 || rp[c] == want) ? want : -1;
        }
    for (int32_t r = 0; r < f->n_rules; r++)
        if (rp[r] == -2 || r == f->root) rp[r] = -1;
}

static void compiled_free(xgr_compiled *c) {
    if (!c) return;
    if (c->entries && c->entries_rep && c->fsm)
        for (int32_t s = 0; s < c->fsm->n_states; s++) {
            xgr_mask_entry_free(atomic_load(&c->entries[s]));
            xgr_mask_entry_free(atomic_load(&c->entries_rep[s]));
        }
    free((void *)c->entries);
    free((void *)c->entries_rep);
    free(c->repeat_parent);
    free(c->scannable);
    xgr_fsm_free(c->fsm);
    xgr_grammar_release(c->grammar);
    xgr_vocab_release(c->vocab);
    free(c);
}

int xgr_compile(const xgr_grammar *g, const xgr_vocab *v, const xgr_compile_options *opts,
                xgr_compiled **out) {
    if (!g || !v || !out) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_compile: NULL argument");
    *out = NULL;
    int rc = xgr_ir_validate(g);
    if (rc) return rc;
    xgr_compiled *c = xgr_calloc(1, sizeof *c);
    if (!c) return XGR_ERR_NOMEM;
    atomic_init(&c->refcount, 1);
    atomic_init(&c->memory, sizeof *c);
    if (opts) c->opts = *opts;
    fill_defaults(&c->opts);
    xgr_grammar_retain((xgr_grammar *)g);
    c->grammar = (xgr_grammar *)g;
    xgr_vocab_retain((xgr_vocab *)v);
    c->vocab = (xgr_vocab *)v;
    if ((rc = xgr_fsm_build(g, &c->opts, &c->fsm))) goto fail;
    if ((rc = check_productive(c->fsm))) goto fail;
    int32_t ns = c->fsm->n_states;
    c->entries = xgr_calloc((size_t)ns + 1, sizeof *c->entries);
    c->entries_rep = xgr_calloc((size_t)ns + 1, sizeof *c->entries_rep);
    c->scannable = xgr_calloc((size_t)ns + 1, 1);
    c->repeat_parent = xgr_malloc(((size_t)c->fsm->n_rules + 1) * sizeof *c->repeat_parent);
    if (!c->entries || !c->entries_rep || !c->scannable || !c->repeat_parent) {
        rc = XGR_ERR_NOMEM;
        goto fail;
    }
    find_repeat_parents(c->fsm, c->repeat_parent);
    for (int32_t s = 0; s < ns; s++) {
        atomic_init(&c->entries[s], NULL);
        atomic_init(&c->entries_rep[s], NULL);
        int32_t e = c->fsm->edge_begin[s];
        c->scannable[s] = e < c->fsm->edge_begin[s + 1] && c->fsm->edges[e].ref < 0;
    }
    atomic_fetch_add(&c->memory, (size_t)ns * (sizeof *c->entries + 1) +
                                     (size_t)c->fsm->n_edges * sizeof(xgr_edge) +
                                     (size_t)ns * 10);
    if (c->opts.precompute && (rc = xgr_compiled_precompute(c, -1))) goto fail;
    *out = c;
    return XGR_OK;
fail:
    compiled_free(c);
    return rc;
}

int xgr_compiled_precompute(xgr_compiled *c, int32_t k) {
    if (!c) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_compiled_precompute: NULL");
    xgr_parser p;
    int rc = xgr_parser_init(&p, c->fsm, c->opts.max_row_items);
    if (rc) return rc;
    int32_t done = 0;
    for (int32_t s = 0; s < c->fsm->n_states && (k < 0 || done < k) && !rc; s++) {
        if (!c->scannable[s]) continue;
        int has_rep = c->repeat_parent[c->fsm->state_rule[s]] >= 0;
        for (int rep = 0; rep <= has_rep && (k < 0 || done < k); rep++) {
            if (atomic_load(rep ? &c->entries_rep[s] : &c->entries[s])) continue;
            const xgr_mask_entry *e;
            if ((rc = xgr_mask_entry_get(c, &p, s, rep, &e))) break;
            done++;
        }
    }
    xgr_parser_free(&p);
    return rc;
}

size_t xgr_compiled_memory(const xgr_compiled *c) {
    return c ? atomic_load(&((xgr_compiled *)c)->memory) : 0;
}
const xgr_grammar *xgr_compiled_grammar(const xgr_compiled *c) { return c ? c->grammar : NULL; }
const xgr_vocab *xgr_compiled_vocab(const xgr_compiled *c) { return c ? c->vocab : NULL; }
void xgr_compiled_retain(xgr_compiled *c) {
    if (c) atomic_fetch_add(&c->refcount, 1);
}
void xgr_compiled_release(xgr_compiled *c) {
    if (c && atomic_fetch_sub(&c->refcount, 1) == 1) compiled_free(c);
}
