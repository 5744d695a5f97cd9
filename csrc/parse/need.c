/* Characters each state still needs (see need.h). */
#include "need.h"

#include "attrs.h"

#define INF XGR_NEED_INF
#define NJS XGR_NEED_JS

static inline int32_t add_sat(int32_t a, int32_t b) {
    int64_t s = (int64_t)a + b;
    return s >= INF ? INF : (int32_t)s;
}
static inline int32_t mul_sat(int32_t a, int32_t b) {
    int64_t s = (int64_t)a * b;
    return s >= INF ? INF : (int32_t)s;
}

/* Bytes that act alike in xgr_json_step from every escape state: class of each byte, and
 * per class and escape state, the next state and the count. */
typedef struct {
    uint8_t cls[256];
    int n;
    uint8_t next[64][NJS];
    uint8_t inc[64][NJS];
} byte_classes;

static int make_classes(byte_classes *bc) {
    bc->n = 0;
    for (int b = 0; b < 256; b++) {
        uint8_t nx[NJS], in[NJS];
        for (int s = 0; s < NJS; s++) {
            int32_t inc;
            nx[s] = xgr_json_step((uint8_t)s, (uint8_t)b, &inc);
            in[s] = (uint8_t)inc;
        }
        int c = 0;
        while (c < bc->n && (memcmp(bc->next[c], nx, NJS) || memcmp(bc->inc[c], in, NJS))) c++;
        if (c == bc->n) {
            if (bc->n == 64) return 0;
            memcpy(bc->next[c], nx, NJS);
            memcpy(bc->inc[c], in, NJS);
            bc->n++;
        }
        bc->cls[b] = (uint8_t)c;
    }
    return 1;
}

typedef struct {
    const xgr_fsm *f;
    xgr_fsm_need *n;
    const byte_classes *bc;
    const uint64_t *emask; /* per byte edge: the classes it reads */
    const uint8_t *ecp;    /* per byte edge: code points it counts at least (0 / 1) */
    const int32_t *fstate; /* per rule: its forced-close state, or -1 */
    uint16_t *seen;        /* exits(): escape states per state and entry state */
    const uint8_t *in;     /* per rule: inside a budget (budgeted, or referenced from one
                            * inside): only these rules' states are computed */
} need_ctx;

/* Fewest decoded characters of rule r entered in escape state js (a JSON budget starts
 * its rule outside an escape), INF when r cannot end within its own budget. */
static int32_t rule_jc_from(const need_ctx *x, int32_t r, int js) {
    const xgr_rule_attrs *a = &x->f->rule_attrs[r];
    if (a->max_json_chars >= 0) js = XGR_JS_TEXT;
    return x->n->rule_jc[r] == INF ? INF : x->n->jc[(size_t)x->f->rule_start[r] * NJS + js];
}

/* Recomputes state s from its edges; returns whether anything went down. */
static int relax(const need_ctx *x, int32_t s) {
    const xgr_fsm *f = x->f;
    xgr_fsm_need *n = x->n;
    int32_t r = f->state_rule[s];
    int32_t cp = INF, jc[NJS];
    for (int j = 0; j < NJS; j++) jc[j] = INF;
    int32_t e0 = f->edge_begin[s], e1 = f->edge_begin[s + 1];
    if (f->rule_kind[r] == XGR_RULE_REPEAT) {
        int32_t c = f->repeat_child[r], k = f->repeat_min[r];
        if (k <= 0) {
            cp = 0;
            for (int j = 0; j < NJS; j++) jc[j] = 0;
        } else {
            cp = mul_sat(k, n->rule_cp[c]);
            int32_t rest = mul_sat(k - 1, n->rule_jc[c]);
            for (int j = 0; j < NJS; j++) jc[j] = add_sat(rule_jc_from(x, c, j), rest);
        }
    } else if (f->final[s] || e0 == e1 || x->fstate[r] == s) {
        cp = 0;
        for (int j = 0; j < NJS; j++) jc[j] = 0;
    } else {
        for (int32_t e = e0; e < e1; e++) {
            const xgr_edge *ed = &f->edges[e];
            int32_t t = ed->target;
            if (ed->ref < 0) {
                int32_t v = add_sat(x->ecp[e], n->cp[t]);
                if (v < cp) cp = v;
                uint64_t m = x->emask[e];
                for (int c = 0; m; c++, m >>= 1) {
                    if (!(m & 1)) continue;
                    for (int j = 0; j < NJS; j++) {
                        int32_t w = add_sat(x->bc->inc[c][j],
                                            n->jc[(size_t)t * NJS + x->bc->next[c][j]]);
                        if (w < jc[j]) jc[j] = w;
                    }
                }
            } else {
                int32_t v = add_sat(n->rule_cp[ed->ref], n->cp[t]);
                if (v < cp) cp = v;
                for (int j = 0; j < NJS; j++) {
                    uint16_t ex = n->rule_exit[(size_t)ed->ref * NJS + j];
                    int32_t after = ex ? xgr_need_jc_exit(n, t, ex) : n->jc_min[t];
                    int32_t w = add_sat(rule_jc_from(x, ed->ref, j), after);
                    if (w < jc[j]) jc[j] = w;
                }
            }
        }
    }
    int changed = 0;
    if (cp < n->cp[s]) {
        n->cp[s] = cp;
        changed = 1;
    }
    int32_t lo = n->jc_min[s];
    for (int j = 0; j < NJS; j++) {
        if (jc[j] < n->jc[(size_t)s * NJS + j]) {
            n->jc[(size_t)s * NJS + j] = jc[j];
            changed = 1;
        }
        if (jc[j] < lo) lo = jc[j];
    }
    n->jc_min[s] = lo;
    return changed;
}

/* The rule minima from the start states, INF where a rule cannot end within its own
 * hard budget; returns whether anything went down. */
static int rule_minima(const need_ctx *x) {
    const xgr_fsm *f = x->f;
    xgr_fsm_need *n = x->n;
    int changed = 0;
    for (int32_t r = 0; r < f->n_rules; r++) {
        const xgr_rule_attrs *a = &f->rule_attrs[r];
        int32_t s = f->rule_start[r];
        int32_t cp = n->cp[s], jc = n->jc_min[s];
        int32_t jt = n->jc[(size_t)s * NJS + XGR_JS_TEXT];
        if (a->max_json_chars >= 0) jc = jt;
        if (a->forced_body < 0 && ((a->max_chars >= 0 && cp > a->max_chars) ||
                                   (a->max_json_chars >= 0 && jt > a->max_json_chars)))
            cp = jc = INF;
        if (cp == INF || jc == INF) cp = jc = INF; /* (cannot end at all) */
        if (cp < n->rule_cp[r] || jc < n->rule_jc[r]) changed = 1;
        if (cp < n->rule_cp[r]) n->rule_cp[r] = cp;
        if (jc < n->rule_jc[r]) n->rule_jc[r] = jc;
    }
    return changed;
}

/* The escape states each rule may end in, by the escape state it was entered in
 * (need->rule_exit): a forward reachability over states x escape states, per entry
 * state (x->seen[s * NJS + e]: the escape states state s is reached in when its rule was
 * entered in e); a JSON budget's rule is entered outside an escape. */
static int exits(need_ctx *x) {
    const xgr_fsm *f = x->f;
    size_t ns = (size_t)f->n_states, nr = (size_t)f->n_rules;
    uint16_t *seen = xgr_calloc(ns * NJS + 1, sizeof *seen);
    uint16_t *ex = x->n->rule_exit;
    /* a worklist of states whose escape sets grew (each state at most once in it), and per
     * rule the states with a reference to it (CSR), to revisit when its exit sets grow */
    int32_t *work = xgr_malloc((ns + 1) * sizeof *work);
    uint8_t *queued = xgr_calloc(ns + 1, 1);
    int32_t *ubeg = xgr_calloc(nr + 2, sizeof *ubeg), *users = NULL;
    int rc = XGR_ERR_NOMEM;
    if (!seen || !work || !queued || !ubeg) goto out;
    for (size_t s = 0; s < ns; s++)
        if (x->in[f->state_rule[s]])
            for (int32_t k = f->edge_begin[s]; k < f->edge_begin[s + 1]; k++)
                if (f->edges[k].ref >= 0) ubeg[f->edges[k].ref + 1]++;
    for (size_t r = 0; r < nr; r++) ubeg[r + 1] += ubeg[r];
    users = xgr_malloc(((size_t)ubeg[nr] + 1) * sizeof *users);
    if (!users) goto out;
    {
        int32_t *fill = xgr_malloc((nr + 1) * sizeof *fill);
        if (!fill) goto out;
        memcpy(fill, ubeg, nr * sizeof *fill);
        for (size_t s = 0; s < ns; s++)
            if (x->in[f->state_rule[s]])
                for (int32_t k = f->edge_begin[s]; k < f->edge_begin[s + 1]; k++)
                    if (f->edges[k].ref >= 0) users[fill[f->edges[k].ref]++] = (int32_t)s;
        free(fill);
    }
    size_t top = 0; /* (a stack: the order does not change the least fixpoint) */
    for (int32_t r = 0; r < f->n_rules; r++) {
        int json = f->rule_attrs[r].max_json_chars >= 0;
        int32_t s0 = f->rule_start[r];
        for (int e = 0; e < NJS; e++)
            seen[(size_t)s0 * NJS + e] = (uint16_t)(1u << (json ? XGR_JS_TEXT : e));
        if (x->in[r] && !queued[s0]) {
            queued[s0] = 1;
            work[top++] = s0;
        }
    }
    while (top) {
        int32_t s = work[--top];
        queued[s] = 0;
        int32_t r = f->state_rule[s];
        int ends = f->final[s] || f->edge_begin[s] == f->edge_begin[s + 1] || x->fstate[r] == s ||
                   f->rule_kind[r] == XGR_RULE_REPEAT;
        if (ends) {
            int grew = 0;
            for (int e = 0; e < NJS; e++) {
                uint16_t here = seen[(size_t)s * NJS + e], *xr = &ex[(size_t)r * NJS + e];
                if ((*xr | here) != *xr) {
                    *xr |= here;
                    grew = 1;
                }
            }
            for (int32_t u = ubeg[r]; grew && u < ubeg[r + 1]; u++)
                if (!queued[users[u]]) {
                    queued[users[u]] = 1;
                    work[top++] = users[u];
                }
        }
        for (int32_t k = f->edge_begin[s]; k < f->edge_begin[s + 1]; k++) {
            const xgr_edge *ed = &f->edges[k];
            /* step[j]: the escape states the edge leads to from escape state j */
            uint16_t step[NJS];
            if (ed->ref < 0) {
                for (int j = 0; j < NJS; j++) step[j] = 0;
                uint64_t m = x->emask[k];
                for (int c = 0; m; c++, m >>= 1)
                    if (m & 1)
                        for (int j = 0; j < NJS; j++)
                            step[j] |= (uint16_t)(1u << x->bc->next[c][j]);
            } else {
                for (int j = 0; j < NJS; j++) step[j] = ex[(size_t)ed->ref * NJS + j];
            }
            int grew = 0;
            for (int e = 0; e < NJS; e++) {
                uint16_t here = seen[(size_t)s * NJS + e], to = 0;
                for (int j = 0; here; j++, here >>= 1)
                    if (here & 1) to |= step[j];
                uint16_t *st = &seen[(size_t)ed->target * NJS + e];
                if ((*st | to) != *st) {
                    *st |= to;
                    grew = 1;
                }
            }
            if (grew && !queued[ed->target]) {
                queued[ed->target] = 1;
                work[top++] = ed->target;
            }
        }
    }
    x->seen = seen;
    seen = NULL;
    rc = XGR_OK;
out:
    free(seen);
    free(work);
    free(queued);
    free(ubeg);
    free(users);
    return rc;
}

/* Rules inside a budget: budgeted ones and every rule they reference (out[n_rules]). */
static void mark_in(const xgr_fsm *f, uint8_t *in) {
    int32_t nr = f->n_rules;
    for (int32_t r = 0; r < nr; r++)
        if (f->rule_attrs[r].max_chars >= 0 || f->rule_attrs[r].max_json_chars >= 0) in[r] = 1;
    for (int grew = 1; grew;) {
        grew = 0;
        for (int32_t r = 0; r < nr; r++) {
            if (!in[r]) continue;
            for (int32_t s = f->rule_start[r]; s < xgr_fsm_rule_end(f, r); s++)
                for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++)
                    if (f->edges[e].ref >= 0 && !in[f->edges[e].ref]) {
                        in[f->edges[e].ref] = 1;
                        grew = 1;
                    }
        }
    }
}

/* need->reach: the most an item under a character budget needs, its rule's remainder and
 * those of the rules above it up to the outermost budget (longest chains of references
 * inside budgeted rules; unbounded on a cycle that needs characters). */
static int32_t reach(const need_ctx *x) {
    const xgr_fsm *f = x->f;
    const xgr_fsm_need *n = x->n;
    int32_t nr = f->n_rules, res = 0;
    const uint8_t *in = x->in;
    int64_t *up = xgr_calloc((size_t)nr + 1, sizeof *up);
    if (!up) return -1;
    int32_t n_in = 0;
    for (int32_t r = 0; r < nr; r++) n_in += in[r];
    /* a state that cannot end, reached: an entry may walk into it, the parser drops it */
    for (int32_t s = 0; s < f->n_states && res != INF; s++) {
        if (!in[f->state_rule[s]]) continue;
        uint16_t any = 0;
        for (int e = 0; e < NJS; e++) any |= x->seen[(size_t)s * NJS + e];
        if (n->cp[s] == INF) res = INF;
        for (int j = 0; j < NJS; j++)
            if ((any >> j & 1) && n->jc[(size_t)s * NJS + j] == INF) res = INF;
    }
    int changed = 1;
    for (int32_t it = 0; it <= n_in && changed && res != INF; it++) {
        changed = 0;
        for (int32_t p = 0; p < nr; p++) {
            if (!in[p]) continue;
            for (int32_t s = f->rule_start[p]; s < xgr_fsm_rule_end(f, p); s++)
                for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++) {
                    const xgr_edge *ed = &f->edges[e];
                    if (ed->ref < 0) continue;
                    int32_t t = ed->target, m = n->cp[t];
                    for (int j = 0; j < NJS; j++)
                        if (n->jc[(size_t)t * NJS + j] > m && n->jc[(size_t)t * NJS + j] < INF)
                            m = n->jc[(size_t)t * NJS + j];
                    int64_t v = up[p] + m;
                    if (v > INF) v = INF;
                    if (v > up[ed->ref]) up[ed->ref] = v, changed = 1;
                }
        }
    }
    if (changed) res = INF; /* (a cycle that needs characters) */
    for (int32_t s = 0; s < f->n_states && res != INF; s++) {
        int32_t r = f->state_rule[s];
        if (!in[r]) continue;
        int64_t m = n->cp[s];
        for (int j = 0; j < NJS; j++)
            if (n->jc[(size_t)s * NJS + j] > m && n->jc[(size_t)s * NJS + j] < INF)
                m = n->jc[(size_t)s * NJS + j];
        m += up[r];
        if (m >= INF) res = INF;
        else if (m > res) res = (int32_t)m;
    }
    free(up);
    return res;
}

int xgr_need_build(xgr_fsm *f) {
    if (f->need || !f->rule_attrs) return XGR_OK;
    int any = 0;
    for (int32_t r = 0; r < f->n_rules && !any; r++)
        any = f->rule_attrs[r].max_chars >= 0 || f->rule_attrs[r].max_json_chars >= 0;
    if (!any) return XGR_OK;
    size_t ns = (size_t)f->n_states, nr = (size_t)f->n_rules, ne = (size_t)f->n_edges;
    byte_classes bc;
    if (!make_classes(&bc)) return XGR_OK; /* (cannot happen: a few classes) */
    xgr_fsm_need *n = xgr_calloc(1, sizeof *n);
    uint64_t *emask = xgr_calloc(ne + 1, sizeof *emask);
    uint8_t *in = xgr_calloc(nr + 1, 1);
    uint8_t *ecp = xgr_calloc(ne + 1, 1);
    int32_t *fstate = xgr_malloc((nr + 1) * sizeof *fstate);
    int rc = XGR_ERR_NOMEM;
    need_ctx x;
    memset(&x, 0, sizeof x);
    if (!n || !emask || !ecp || !fstate || !in) goto out;
    mark_in(f, in);
    n->cp = xgr_malloc((ns + 1) * sizeof *n->cp);
    n->jc = xgr_malloc((ns * NJS + 1) * sizeof *n->jc);
    n->jc_min = xgr_malloc((ns + 1) * sizeof *n->jc_min);
    n->rule_cp = xgr_malloc((nr + 1) * sizeof *n->rule_cp);
    n->rule_jc = xgr_malloc((nr + 1) * sizeof *n->rule_jc);
    n->rule_exit = xgr_calloc(nr * NJS + 1, sizeof *n->rule_exit);
    if (!n->cp || !n->jc || !n->jc_min || !n->rule_cp || !n->rule_jc || !n->rule_exit) goto out;
    for (size_t i = 0; i < ns; i++) n->cp[i] = n->jc_min[i] = INF;
    for (size_t i = 0; i < ns * NJS; i++) n->jc[i] = INF;
    for (size_t i = 0; i < nr; i++) n->rule_cp[i] = n->rule_jc[i] = INF;
    for (size_t e = 0; e < ne; e++) {
        const xgr_edge *ed = &f->edges[e];
        if (ed->ref >= 0) continue;
        for (int b = ed->lo; b <= ed->hi; b++) emask[e] |= (uint64_t)1 << bc.cls[b];
        ecp[e] = !(ed->hi >= 0x80 && ed->lo <= 0xBF); /* (may it read a continuation?) */
    }
    for (int32_t r = 0; r < f->n_rules; r++)
        fstate[r] = xgr_forced_state(f, &f->rule_attrs[r], r);
    x = (need_ctx){f, n, &bc, emask, ecp, fstate, NULL, in};
    if ((rc = exits(&x))) goto out;
    rc = XGR_ERR_NOMEM;
    /* sweeps from the last state back (automata number states from the start, so most
     * shortest paths settle in one sweep) until nothing goes down; past the work limit
     * the grammar keeps no table (budgets bound characters only, as before) */
    int64_t work = 0, limit = (int64_t)1 << 22;
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t s = ns; s-- > 0;) {
            if (!in[f->state_rule[s]]) continue;
            changed |= relax(&x, (int32_t)s);
            work += f->edge_begin[s + 1] - f->edge_begin[s] + 1;
        }
        changed |= rule_minima(&x);
        if (work > limit) {
            rc = XGR_OK; /* (too large: none) */
            goto out;
        }
    }
    int32_t w = reach(&x);
    if (w < 0) goto out;
    n->reach = w;
    f->need = n;
    n = NULL;
    rc = XGR_OK;
out:
    if (n) {
        free(n->cp);
        free(n->jc);
        free(n->jc_min);
        free(n->rule_cp);
        free(n->rule_jc);
        free(n->rule_exit);
        free(n);
    }
    free(emask);
    free(ecp);
    free(fstate);
    free(x.seen);
    free(in);
    return rc;
}
