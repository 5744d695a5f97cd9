/* What a whole-grammar compile (compile.c) and a tool fragment or a linked request
 * (link.c) both do before building mask tables: fill option defaults, check that every
 * rule can finish, collect the token ids a grammar's literals name. */
#include "prepare.h"

#include "../common/token_marker.h"

void xgr_compile_fill_defaults(xgr_compile_options *o) {
    if (o->max_rules <= 0) o->max_rules = 100000;
    if (o->max_fsm_states <= 0) o->max_fsm_states = 2000000;
    if (o->inline_max_states == 0) o->inline_max_states = 64;
    if (o->repeat_threshold <= 0) o->repeat_threshold = 16;
    if (o->max_row_items <= 0) o->max_row_items = 100000;
    if (o->max_step_work <= 0) o->max_step_work = 500000;
    if (o->context_min_uncertain == 0) o->context_min_uncertain = 256;
    if (o->cross_grammar_cache == 0) o->cross_grammar_cache = 1;
}

/* Whether state s can derive a finite string through edge e, given what is known
 * productive so far (a rule is productive when its start state is). */
static int edge_productive(const xgr_fsm *f, const uint8_t *prod_state, int32_t s, int32_t e) {
    const xgr_edge *ed = &f->edges[e];
    if (ed->ref < 0) return prod_state[ed->target];
    int ref_ok = prod_state[f->rule_start[ed->ref]];
    /* a REPEAT rule loops on its child until the minimum is reached */
    if (f->rule_kind[f->state_rule[s]] == XGR_RULE_REPEAT) return ref_ok;
    return ref_ok && prod_state[ed->target];
}

/* Every rule must derive some finite string, or a matcher could accept a prefix it can
 * never finish; reject such grammars up front. A worklist over reverse dependencies: each
 * edge is listed under the states it depends on (its target, its referenced rule's start)
 * and re-examined alone when one of them becomes productive, so this is linear in the
 * edges even for free-text states with hundreds of them. */
int xgr_fsm_check_productive(const xgr_fsm *f) {
    uint8_t *prod_state = xgr_malloc((size_t)f->n_states + 1);
    if (!prod_state) return XGR_ERR_NOMEM;
    int rc = xgr_fsm_productive_states(f, prod_state);
    for (int32_t r = 0; !rc && r < f->n_rules; r++)
        if (!prod_state[f->rule_start[r]]) {
            rc = xgr_fail(XGR_ERR_SEMANTIC,
                          "rule '%s' can never finish: it matches no string (every "
                          "alternative recurses forever or has a character class that "
                          "admits no character)",
                          f->rule_name[r] ? f->rule_name[r] : "?");
            break;
        }
    free(prod_state);
    return rc;
}

int xgr_fsm_productive_states(const xgr_fsm *f, uint8_t *prod_state) {
    int32_t ns = f->n_states, ne = f->n_edges;
    memset(prod_state, 0, (size_t)ns);
    int32_t *dep_begin = xgr_calloc((size_t)ns + 2, sizeof *dep_begin);
    int32_t *dep = xgr_malloc(((size_t)ne * 2 + 1) * sizeof *dep);
    int32_t *src = xgr_malloc(((size_t)ne + 1) * sizeof *src);
    int32_t *work = xgr_malloc(((size_t)ns + 1) * sizeof *work);
    int rc = XGR_OK;
    if (!dep_begin || !dep || !src || !work) {
        rc = XGR_ERR_NOMEM;
        goto out;
    }
    /* dep: CSR by the state depended on, of the edges to re-examine when it becomes
     * productive (a referenced rule is represented by its start state). */
    for (int32_t s = 0; s < ns; s++)
        for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++) {
            src[e] = s;
            dep_begin[f->edges[e].target + 1]++;
            if (f->edges[e].ref >= 0) dep_begin[f->rule_start[f->edges[e].ref] + 1]++;
        }
    for (int32_t s = 0; s < ns; s++) dep_begin[s + 1] += dep_begin[s];
    int32_t *fill = work; /* reused as a cursor array before the worklist starts */
    memcpy(fill, dep_begin, (size_t)ns * sizeof *fill);
    for (int32_t e = 0; e < ne; e++) {
        dep[fill[f->edges[e].target]++] = e;
        if (f->edges[e].ref >= 0) dep[fill[f->rule_start[f->edges[e].ref]]++] = e;
    }
    int32_t n_work = 0;
    for (int32_t s = 0; s < ns; s++) {
        int32_t r = f->state_rule[s];
        if (f->rule_kind[r] == XGR_RULE_REPEAT ? f->repeat_min[r] == 0 : f->final[s]) {
            prod_state[s] = 1;
            work[n_work++] = s;
        }
    }
    while (n_work > 0) {
        int32_t t = work[--n_work];
        for (int32_t k = dep_begin[t]; k < dep_begin[t + 1]; k++) {
            int32_t e = dep[k], s = src[e];
            if (prod_state[s] || !edge_productive(f, prod_state, s, e)) continue;
            prod_state[s] = 1;
            work[n_work++] = s;
        }
    }
out:
    free(dep_begin);
    free(dep);
    free(src);
    free(work);
    return rc;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The sorted, distinct token ids of every marker in g's literals (TagDispatch strings
 * included; a token class span as XGR_TOKEN_CLASS_OPEN, last), plus `extra`. With one, the vocabulary's tokens containing byte 0xFF are
 * never text (vocab.h ff_bits, computed once per vocabulary). *out = NULL when none. */
int xgr_grammar_token_terms(const xgr_grammar *g, const int32_t *extra, int32_t n_extra,
                            int32_t **out, int32_t *n_out) {
    XGR_VEC(int32_t) ids = {0};
    *out = NULL;
    *n_out = 0;
    for (int32_t i = 0; i < n_extra; i++)
        if (XGR_VEC_PUSH(ids, extra[i])) goto oom;
    for (size_t i = 0; g && i < g->nodes.len; i++) {
        const xgr_node *nd = &g->nodes.data[i];
        if (nd->kind != XGR_NODE_BYTES) continue;
        int32_t id;
        const uint8_t *lit = g->bytes.data + nd->off;
        for (size_t pos = 0; (id = xgr_token_marker_find(lit, (size_t)nd->count, &pos)) >= 0;) {
            /* a class span (ExcludeToken) counts as its opening pseudo id only */
            int32_t n_cls = 0, big = xgr_token_big_id(lit + pos, (size_t)nd->count - pos);
            size_t span = xgr_token_class_span(lit + pos, (size_t)nd->count - pos, &n_cls);
            if (big >= 0) span = XGR_TOKEN_BIG_LEN; /* an id no vocabulary has: refused later */
            if (XGR_VEC_PUSH(ids, big >= 0 ? big : span ? XGR_TOKEN_CLASS_OPEN : id)) goto oom;
            pos += span ? span : 1;
        }
    }
    if (!ids.len) return XGR_OK;
    qsort(ids.data, ids.len, sizeof *ids.data, cmp_i32);
    size_t n = 0;
    for (size_t i = 0; i < ids.len; i++)
        if (n == 0 || ids.data[n - 1] != ids.data[i]) ids.data[n++] = ids.data[i];
    *out = ids.data;
    *n_out = (int32_t)n;
    return XGR_OK;
oom:
    XGR_VEC_FREE(ids);
    return XGR_ERR_NOMEM;
}
