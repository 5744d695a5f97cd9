/* TagDispatch rule bodies (XGR_NODE_TAG_DISPATCH) lowered straight to a rule automaton:
 * an Aho-Corasick DFA over triggers and excluded strings, built without the NFA / subset
 * construction path.
 *
 * Semantics (upstream xgrammar 0.2.8, pinned by differential tests against it; see
 * tests/tag_dispatch). Let T be the trie of all triggers and excludes, u a trie node (the
 * longest suffix of the text read so far that is a path in T, i.e. the Aho-Corasick
 * state) and fail(u) its failure link.
 *   - u is dead when u is the end of an excluded string or fail(u) is dead: an excluded
 *     string is forbidden anywhere in the free text, also inside a trigger (trigger
 *     "xab" with exclude "ab" can never fire) and inside text that follows a longer
 *     pattern's branch. Dead states and everything below them are removed.
 *   - u dispatches when u itself is the end of a trigger. Only u's own string counts:
 *     a trigger that is a proper suffix of u's string (triggers "xab" and "ab" on text
 *     "xab"; or "bc" inside the branch of "abcd" on text "abc") does not fire there,
 *     since upstream never looks at dictionary-suffix outputs. Such a trigger fires only
 *     where the AC state is exactly its node.
 *   - A dispatching state is not final and keeps only its trie children as byte edges
 *     (a trigger that is a prefix of another, "ab" / "abc": after "ab" the text may
 *     either continue to "abc" or be the start of ab's rule; no other free text). It gets
 *     one ref edge per distinct paired rule (duplicate triggers with different rules are
 *     nondeterministic choices the Earley parser explores), leading to the AC root when
 *     loop_after_dispatch (the text before the trigger is forgotten: matching restarts
 *     from scratch after the rule), else to a final sink state without edges.
 *   - Every other live state is final and has the full AC transition row (goto edges,
 *     the failure function folded in), minus edges into dead states. So the rule may end
 *     anywhere in free text, including right after a partial trigger.
 * Free text is any bytes (not only UTF-8), except in a grammar with token markers
 * (common/token_marker.h: special tokens the grammar names, e.g. gpt-oss's <|end|>):
 * there byte 0xFF only starts a marker, and free text never contains one. A special
 * token is not text: an excluded "<|end|>" must not slip through as the token, and a
 * channel's text must end where the grammar names that token. So 0xFF is read only along
 * the trie (a trigger that spells a special token), and a trie node whose string holds
 * a marker has no failure fallback and is not final: past a marker the text must go on
 * to complete that trigger. The parser rejects an excluded string that is
 * a prefix of (or equal to) a trigger, as upstream does; the construction itself copes
 * with any sets (such a trigger is just dead).
 *
 * One intended difference: a trigger whose rule derives no string at all gets no ref
 * edge, and states that can then never complete are trimmed (fsm.h: every state reaches
 * a final state), so such a trigger cannot be written. Upstream lets the text run into
 * that dead end; xgrammar2 prunes unproductive references everywhere, not only here.
 *
 * Rows are kept as sorted byte ranges (fsm.h's edge format): row(u) is row(fail(u))
 * overlaid with u's trie children, computed in BFS order, so memory stays proportional
 * to the ranges actually needed rather than 256 entries a state. */
#include "lower_internal.h"
#include "../common/token_marker.h"

typedef struct {
    uint8_t lo, hi;
    int32_t t;
} td_range;

enum { TD_EXCL = 1, TD_DEAD = 2, TD_MARK = 4 /* string holds a marker byte */ };

/* Bound on the transition rows kept while building (64 Mi ranges, 512 MiB): only trigger
 * sets built to defeat the range compression (tens of thousands of strings branching on
 * every byte) come near it. */
#define TD_MAX_RANGES ((size_t)1 << 26)

typedef struct {
    const xgr_grammar *g;
    const xgr_node *nd;
    int markers;    /* 0xFF is a marker lead, never free text */
    int32_t nt, np; /* triggers; triggers + excludes */
    /* trie, node 0 = root */
    int32_t n;
    uint8_t *byte, *flag;
    int32_t *first, *next, *last, *fail, *order, *trig_head, *trig_next;
    /* full transition rows of live nodes */
    XGR_VEC(td_range) rows;
    int32_t *roff, *rlen;
    /* candidate automaton: trie nodes, then the sink (N), then the start copy (N + 1) */
    int32_t nc;
    uint8_t *cfinal;
    int32_t *cbeg; /* nc + 1 */
    XGR_VEC(xgr_edge) cedges;
} td_work;

static void td_work_free(td_work *w) {
    free(w->byte);
    free(w->flag);
    free(w->first);
    free(w->next);
    free(w->last);
    free(w->fail);
    free(w->order);
    free(w->trig_head);
    free(w->trig_next);
    XGR_VEC_FREE(w->rows);
    free(w->roff);
    free(w->rlen);
    free(w->cfinal);
    free(w->cbeg);
    XGR_VEC_FREE(w->cedges);
}

void lw_td_dfa_free(lw_dfa *d) {
    XGR_VEC_FREE(d->final);
    XGR_VEC_FREE(d->ebeg);
    XGR_VEC_FREE(d->edges);
}

/* BYTES node of pattern k (triggers first, then excludes). */
static const xgr_node *pat_node(const td_work *w, int32_t k) {
    const int32_t *pay = w->g->kids.data + w->nd->off;
    return &w->g->nodes.data[k < w->nt ? pay[2 * k] : pay[w->nt + k]];
}

static int cmp_pat(const void *ctx, int32_t a, int32_t b) {
    const td_work *w = ctx;
    const xgr_node *x = pat_node(w, a), *y = pat_node(w, b);
    size_t m = (size_t)(x->count < y->count ? x->count : y->count);
    int c = memcmp(w->g->bytes.data + x->off, w->g->bytes.data + y->off, m);
    if (c) return c;
    return (x->count > y->count) - (x->count < y->count);
}

int lw_td_refs(const xgr_grammar *g, int32_t id, lw_i32v *out) {
    const xgr_node *n = &g->nodes.data[id];
    if (n->count < 0 || n->min < 0 || n->off < 0 ||
        (size_t)n->off + 2 * (size_t)n->count + (size_t)n->min > g->kids.len)
        return xgr_fail(XGR_ERR_INVALID_ARG, "TagDispatch payload out of range");
    const int32_t *pay = g->kids.data + n->off;
    for (int32_t k = 0; k < n->count + n->min; k++) {
        int32_t s = k < n->count ? pay[2 * k] : pay[n->count + k];
        if (s < 0 || (size_t)s >= g->nodes.len || g->nodes.data[s].kind != XGR_NODE_BYTES)
            return xgr_fail(XGR_ERR_INVALID_ARG, "TagDispatch string is not a literal");
        const xgr_node *b = &g->nodes.data[s];
        if (b->count < 1 || b->off < 0 || (size_t)b->off + (size_t)b->count > g->bytes.len)
            return xgr_fail(XGR_ERR_INVALID_ARG, "TagDispatch string empty or out of range");
        if (k < n->count) {
            int32_t r = pay[2 * k + 1];
            if (r < 0 || (size_t)r >= g->rules.len)
                return xgr_fail(XGR_ERR_INVALID_ARG, "grammar rule id %d out of range", (int)r);
            if (XGR_VEC_PUSH(*out, r)) return XGR_ERR_NOMEM;
        }
    }
    return XGR_OK;
}

/* The trie of all patterns, built from them in sorted order so each node's children are
 * appended in increasing byte order and shared prefixes are found by comparing with the
 * previous pattern only. */
static int build_trie(td_work *w) {
    int64_t total = 1;
    int32_t maxlen = 0;
    for (int32_t k = 0; k < w->np; k++) {
        int32_t l = pat_node(w, k)->count;
        total += l;
        if (l > maxlen) maxlen = l;
    }
    if (total > INT32_MAX / 2) return xgr_fail(XGR_ERR_LIMIT, "TagDispatch strings too large");
    size_t cap = (size_t)total, np = (size_t)(w->np ? w->np : 1);
    w->byte = xgr_calloc(cap, 1);
    w->flag = xgr_calloc(cap, 1);
    w->first = xgr_malloc(cap * sizeof(int32_t));
    w->next = xgr_malloc(cap * sizeof(int32_t));
    w->last = xgr_malloc(cap * sizeof(int32_t));
    w->fail = xgr_calloc(cap, sizeof(int32_t));
    w->order = xgr_malloc(cap * sizeof(int32_t));
    w->trig_head = xgr_malloc(cap * sizeof(int32_t));
    w->trig_next = xgr_malloc(np * sizeof(int32_t));
    int32_t *idx = xgr_malloc(np * sizeof *idx), *tmp = xgr_malloc(np * sizeof *tmp);
    int32_t *path = xgr_malloc(((size_t)maxlen + 1) * sizeof *path);
    int rc = XGR_OK;
    if (!w->byte || !w->flag || !w->first || !w->next || !w->last || !w->fail || !w->order ||
        !w->trig_head || !w->trig_next || !idx || !tmp || !path) {
        rc = XGR_ERR_NOMEM;
        goto done;
    }
    for (int32_t k = 0; k < w->np; k++) idx[k] = k;
    lw_sort_i32(idx, (size_t)w->np, tmp, cmp_pat, w);
    w->n = 1;
    w->first[0] = w->next[0] = w->last[0] = w->trig_head[0] = -1;
    path[0] = 0;
    const uint8_t *prev = NULL;
    int32_t prev_len = 0;
    for (int32_t i = 0; i < w->np; i++) {
        int32_t k = idx[i];
        const xgr_node *pn = pat_node(w, k);
        const uint8_t *s = w->g->bytes.data + pn->off;
        int32_t len = pn->count, l = 0;
        while (prev && l < len && l < prev_len && s[l] == prev[l]) l++;
        for (int32_t d = l; d < len; d++) {
            int32_t u = path[d], v = w->n++;
            w->byte[v] = s[d];
            w->first[v] = w->next[v] = w->last[v] = w->trig_head[v] = -1;
            if (w->last[u] < 0)
                w->first[u] = v;
            else
                w->next[w->last[u]] = v;
            w->last[u] = v;
            path[d + 1] = v;
        }
        int32_t e = path[len];
        if (k < w->nt) {
            w->trig_next[k] = w->trig_head[e];
            w->trig_head[e] = k;
        } else {
            w->flag[e] |= TD_EXCL;
        }
        prev = s;
        prev_len = len;
    }
done:
    free(idx);
    free(tmp);
    free(path);
    return rc;
}

/* Target of row `u` on byte b (rows cover 0..255). */
static int32_t row_step(const td_work *w, int32_t u, uint8_t b) {
    const td_range *r = w->rows.data + w->roff[u];
    int32_t lo = 0, hi = w->rlen[u] - 1;
    while (lo < hi) {
        int32_t mid = (lo + hi) / 2;
        if (r[mid].hi < b)
            lo = mid + 1;
        else
            hi = mid;
    }
    return r[lo].t;
}

static int push_range(td_work *w, int lo, int hi, int32_t t) {
    td_range x = {(uint8_t)lo, (uint8_t)hi, t};
    return XGR_VEC_PUSH(w->rows, x) ? XGR_ERR_NOMEM : XGR_OK;
}

/* Failure links, dead flags and full rows, in BFS order. A live node's failure target is
 * live (an exclude inside it would lie inside the node itself or an ancestor), so every
 * row a live node needs is already computed. */
static int build_rows(td_work *w) {
    w->roff = xgr_calloc((size_t)w->n, sizeof(int32_t));
    w->rlen = xgr_calloc((size_t)w->n, sizeof(int32_t));
    if (!w->roff || !w->rlen) return XGR_ERR_NOMEM;
    int32_t qt = 0;
    w->order[qt++] = 0;
    int rc;
    for (int32_t qh = 0; qh < qt; qh++) {
        int32_t u = w->order[qh];
        for (int32_t v = w->first[u]; v >= 0; v = w->next[v]) w->order[qt++] = v;
        if (w->flag[u] & TD_DEAD) {
            for (int32_t v = w->first[u]; v >= 0; v = w->next[v]) w->flag[v] |= TD_DEAD;
            continue;
        }
        /* row(u) = row(fail(u)) (all -> root for the root) overlaid with u's children */
        size_t off = w->rows.len;
        if (off > TD_MAX_RANGES)
            return xgr_fail(XGR_ERR_LIMIT, "TagDispatch automaton too large (more than %zu "
                                           "transition ranges)", TD_MAX_RANGES);
        /* the root row: every byte back to the root; 0xFF nowhere (-1) when it leads markers */
        td_range base_root[2] = {{0, 255, 0}, {255, 255, -1}};
        if (w->markers) base_root[0].hi = 254;
        const td_range *base = u ? w->rows.data + w->roff[w->fail[u]] : base_root;
        int32_t nb = u ? w->rlen[w->fail[u]] : 1 + w->markers;
        int32_t c = w->first[u];
        for (int32_t i = 0; i < nb; i++) {
            /* base may move when rows grows: reread it through the index each time */
            td_range r = u ? w->rows.data[w->roff[w->fail[u]] + i] : base[i];
            int cur = r.lo;
            while (c >= 0 && w->byte[c] <= r.hi) {
                int b = w->byte[c];
                if (b > cur && (rc = push_range(w, cur, b - 1, r.t))) return rc;
                if ((rc = push_range(w, b, b, c))) return rc;
                cur = b + 1;
                c = w->next[c];
            }
            if (cur <= r.hi && (rc = push_range(w, cur, r.hi, r.t))) return rc;
        }
        w->roff[u] = (int32_t)off;
        w->rlen[u] = (int32_t)(w->rows.len - off);
        for (int32_t v = w->first[u]; v >= 0; v = w->next[v]) {
            int32_t f = u ? row_step(w, w->fail[u], w->byte[v]) : 0;
            w->fail[v] = f < 0 ? 0 : f;
            if ((w->flag[v] & TD_EXCL) || (w->flag[w->fail[v]] & TD_DEAD)) w->flag[v] |= TD_DEAD;
            if (w->markers && ((w->flag[u] & TD_MARK) || w->byte[v] == XGR_TOKEN_MARKER_LEAD))
                w->flag[v] |= TD_MARK;
        }
    }
    return XGR_OK;
}

static int push_edge(td_work *w, int32_t t, int32_t ref, int lo, int hi) {
    xgr_edge e = {t, ref, (uint8_t)lo, (uint8_t)hi};
    return XGR_VEC_PUSH(w->cedges, e) ? XGR_ERR_NOMEM : XGR_OK;
}

static int cmp_edge_ref(const void *x, const void *y) {
    const xgr_edge *a = x, *b = y;
    return (a->ref > b->ref) - (a->ref < b->ref);
}

/* Candidate automaton (before trimming). With `analysis` set no output rule is created:
 * ref edges carry the IR rule id and only say "this trigger can complete". */
static int build_candidates(lw_ctx *c, td_work *w, int nonempty, int analysis) {
    int32_t N = w->n, sink = N, copy = N + 1;
    int loop = w->nd->a != 0;
    w->nc = N + 2;
    w->cfinal = xgr_calloc((size_t)w->nc, 1);
    w->cbeg = xgr_calloc((size_t)w->nc + 1, sizeof(int32_t));
    if (!w->cfinal || !w->cbeg) return XGR_ERR_NOMEM;
    const int32_t *pay = w->g->kids.data + w->nd->off;
    int rc;
    for (int32_t u = 0; u < N; u++) {
        if (w->cedges.len > TD_MAX_RANGES)
            return xgr_fail(XGR_ERR_LIMIT, "TagDispatch automaton too large (more than %zu "
                                           "edges)", TD_MAX_RANGES);
        w->cbeg[u] = (int32_t)w->cedges.len;
        if (w->flag[u] & TD_DEAD) continue;
        if (w->trig_head[u] < 0 && !(w->flag[u] & TD_MARK)) {
            w->cfinal[u] = 1;
            const td_range *r = w->rows.data + w->roff[u];
            for (int32_t i = 0; i < w->rlen[u]; i++)
                if (r[i].t >= 0 && !(w->flag[r[i].t] & TD_DEAD) &&
                    (rc = push_edge(w, r[i].t, -1, r[i].lo, r[i].hi)))
                    return rc;
            continue;
        }
        /* a dispatching state, or one inside a marker: only the trie goes on */
        for (int32_t v = w->first[u]; v >= 0; v = w->next[v])
            if (!(w->flag[v] & TD_DEAD) && (rc = push_edge(w, v, -1, w->byte[v], w->byte[v])))
                return rc;
        size_t rb = w->cedges.len;
        for (int32_t k = w->trig_head[u]; k >= 0; k = w->trig_next[k]) {
            int32_t r = pay[2 * k + 1], o = r;
            /* a rule deriving nothing cannot complete: no edge */
            if (!(c->rflags[r] & RF_PROD)) continue;
            if (!analysis && (rc = lw_ref_rule(c, r, 0, &o))) return rc;
            if ((rc = push_edge(w, loop ? 0 : sink, o, 0, 0))) return rc;
        }
        /* one edge per rule, sorted by rule id */
        size_t m = w->cedges.len - rb;
        qsort(w->cedges.data + rb, m, sizeof(xgr_edge), cmp_edge_ref);
        size_t keep = 0;
        for (size_t i = 0; i < m; i++)
            if (!keep || w->cedges.data[rb + keep - 1].ref != w->cedges.data[rb + i].ref)
                w->cedges.data[rb + keep++] = w->cedges.data[rb + i];
        w->cedges.len = rb + keep;
    }
    w->cbeg[sink] = (int32_t)w->cedges.len;
    w->cfinal[sink] = !loop;
    /* "minus the empty string": a non-final copy of the root as the start */
    w->cbeg[copy] = (int32_t)w->cedges.len;
    if (nonempty) {
        size_t e0 = (size_t)w->cbeg[0], e1 = (size_t)w->cbeg[1];
        if (XGR_VEC_RESERVE(w->cedges, w->cedges.len + (e1 - e0))) return XGR_ERR_NOMEM;
        for (size_t e = e0; e < e1; e++) w->cedges.data[w->cedges.len++] = w->cedges.data[e];
    }
    if (w->cedges.len > INT32_MAX / 2)
        return xgr_fail(XGR_ERR_LIMIT, "TagDispatch automaton too large");
    w->cbeg[w->nc] = (int32_t)w->cedges.len;
    return XGR_OK;
}

/* Keeps the candidates reachable from the start and able to reach a final state,
 * numbered in BFS order (start = 0). An empty language gives one non-final state. */
static int trim_to_dfa(td_work *w, int32_t start, int64_t budget, const char *name,
                       lw_dfa *out) {
    int32_t nc = w->nc;
    size_t ne = w->cedges.len;
    int32_t *rbeg = xgr_calloc((size_t)nc + 1, sizeof *rbeg);
    int32_t *rsrc = xgr_malloc((ne ? ne : 1) * sizeof *rsrc);
    int32_t *queue = xgr_malloc((size_t)nc * sizeof *queue);
    int32_t *newid = xgr_malloc((size_t)nc * sizeof *newid);
    uint8_t *co = xgr_calloc((size_t)nc, 1);
    int rc = XGR_OK;
    if (!rbeg || !rsrc || !queue || !newid || !co) {
        rc = XGR_ERR_NOMEM;
        goto done;
    }
    /* reverse CSR */
    for (size_t e = 0; e < ne; e++) rbeg[w->cedges.data[e].target + 1]++;
    for (int32_t s = 0; s < nc; s++) rbeg[s + 1] += rbeg[s];
    for (int32_t s = 0; s < nc; s++) newid[s] = rbeg[s];
    for (int32_t s = 0; s < nc; s++)
        for (int32_t e = w->cbeg[s]; e < w->cbeg[s + 1]; e++)
            rsrc[newid[w->cedges.data[e].target]++] = s;
    int32_t qt = 0;
    for (int32_t s = 0; s < nc; s++)
        if (w->cfinal[s]) co[s] = 1, queue[qt++] = s;
    for (int32_t qh = 0; qh < qt; qh++)
        for (int32_t i = rbeg[queue[qh]]; i < rbeg[queue[qh] + 1]; i++)
            if (!co[rsrc[i]]) co[rsrc[i]] = 1, queue[qt++] = rsrc[i];
    for (int32_t s = 0; s < nc; s++) newid[s] = -1;
    out->n = 0;
    out->final.len = out->ebeg.len = out->edges.len = 0;
    if (!co[start]) {
        if (XGR_VEC_PUSH(out->final, 0) || XGR_VEC_PUSH(out->ebeg, 0) || XGR_VEC_PUSH(out->ebeg, 0))
            rc = XGR_ERR_NOMEM;
        out->n = 1;
        goto done;
    }
    qt = 0;
    newid[start] = 0;
    queue[qt++] = start;
    for (int32_t qh = 0; qh < qt; qh++) {
        int32_t s = queue[qh];
        for (int32_t e = w->cbeg[s]; e < w->cbeg[s + 1]; e++) {
            int32_t t = w->cedges.data[e].target;
            if (co[t] && newid[t] < 0) newid[t] = qt, queue[qt++] = t;
        }
    }
    if (qt > budget) {
        rc = xgr_fail(XGR_ERR_LIMIT,
                      "rule '%s': TagDispatch automaton needs %d states, more than "
                      "max_fsm_states leaves (%lld)",
                      name, (int)qt, (long long)budget);
        goto done;
    }
    if (XGR_VEC_RESERVE(out->final, (size_t)qt) || XGR_VEC_RESERVE(out->ebeg, (size_t)qt + 1)) {
        rc = XGR_ERR_NOMEM;
        goto done;
    }
    for (int32_t i = 0; i < qt; i++) {
        int32_t s = queue[i];
        out->final.data[out->final.len++] = w->cfinal[s];
        out->ebeg.data[out->ebeg.len++] = (int32_t)out->edges.len;
        for (int32_t e = w->cbeg[s]; e < w->cbeg[s + 1]; e++) {
            xgr_edge ed = w->cedges.data[e];
            if (!co[ed.target]) continue;
            ed.target = newid[ed.target];
            /* dropped neighbours never leave equal-target ranges adjacent, but merging
             * here keeps the invariant independent of that argument */
            xgr_edge *prev = out->edges.len > (size_t)out->ebeg.data[i]
                                 ? &out->edges.data[out->edges.len - 1]
                                 : NULL;
            if (ed.ref < 0 && prev && prev->ref < 0 && prev->target == ed.target &&
                prev->hi + 1 == ed.lo) {
                prev->hi = ed.hi;
                continue;
            }
            if (XGR_VEC_PUSH(out->edges, ed)) {
                rc = XGR_ERR_NOMEM;
                goto done;
            }
        }
    }
    out->ebeg.data[out->ebeg.len++] = (int32_t)out->edges.len;
    out->n = qt;
done:
    free(rbeg);
    free(rsrc);
    free(queue);
    free(newid);
    free(co);
    return rc;
}

static int td_construct(lw_ctx *c, int32_t node, int nonempty, int analysis, int64_t budget,
                        const char *name, lw_dfa *out) {
    td_work w;
    memset(&w, 0, sizeof w);
    w.g = c->g;
    w.nd = &c->g->nodes.data[node];
    w.markers = c->markers;
    w.nt = w.nd->count;
    w.np = w.nd->count + w.nd->min;
    int rc;
    if (!(rc = build_trie(&w)) && !(rc = build_rows(&w)) &&
        !(rc = build_candidates(c, &w, nonempty, analysis)))
        rc = trim_to_dfa(&w, nonempty ? w.n + 1 : 0, budget, name, out);
    td_work_free(&w);
    return rc;
}

uint8_t lw_td_props(lw_ctx *c, int32_t id) {
    const xgr_node *n = &c->g->nodes.data[id];
    const int32_t *pay = c->g->kids.data + n->off;
    /* The root state is final (nothing read, nothing forbidden yet). Any byte that starts
     * no pattern loops on it, so the language is non-empty too: the common case. */
    uint8_t starts[256] = {0};
    int n_starts = 0;
    if (c->markers) starts[XGR_TOKEN_MARKER_LEAD] = 1, n_starts = 1; /* never free text */
    for (int32_t k = 0; k < n->count + n->min; k++) {
        const xgr_node *b = &c->g->nodes.data[k < n->count ? pay[2 * k] : pay[n->count + k]];
        uint8_t ch = c->g->bytes.data[b->off];
        n_starts += !starts[ch];
        starts[ch] = 1;
    }
    uint8_t p = NP_NULLABLE | NP_PROD;
    if (n_starts < 256) return p | NP_NE;
    /* Every byte starts a pattern: decide on the trimmed automaton itself. */
    lw_dfa d;
    memset(&d, 0, sizeof d);
    int rc = td_construct(c, id, 0, 1, INT64_MAX, "", &d);
    if (rc) {
        if (!c->status) c->status = rc;
    } else if (d.ebeg.data[1] > d.ebeg.data[0]) {
        p |= NP_NE;
    }
    lw_td_dfa_free(&d);
    return p;
}

int lw_td_build(lw_ctx *c, int32_t orule, int64_t budget, lw_dfa *out) {
    lw_orule o = c->orules.data[orule];
    c->cur = orule;
    int32_t node = c->g->rules.data[o.a].body;
    return td_construct(c, node, o.b, 0, budget, o.name, out);
}
