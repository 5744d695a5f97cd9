/* Substring(...) nodes (XGR_NODE_SUBSTRING) lowered to an NFA fragment.
 *
 * Language: every concatenation c_i c_i+1 ... c_j of consecutive chunks (1 <= i <= j <= n),
 * plus "". Chunks are atomic byte strings; "" chunks change nothing (a run through them
 * spells what the run without them spells), so they are dropped.
 *
 * The runs of a sequence are its factors, recognised by the sequence's suffix automaton:
 * here built over the chunks as symbols (equal chunks are one symbol), at most 2n - 1
 * states and 3n - 4 transitions, every state accepting. Each state's outgoing chunks are
 * then spelled as a byte trie (chunks sorted, shared prefixes share states) whose leaves
 * enter the target states, so the fragment has at most 2n states plus, per transition,
 * its chunk's length minus one (fewer where chunks leaving a state share prefixes). It is
 * deterministic except where one chunk leaving a state is a prefix of another; the subset
 * construction (dfa.c) resolves that. With one-byte chunks (substring_chars over ASCII)
 * the fragment is the byte-level suffix automaton itself. */
#include "lower_internal.h"

/* The chunk nodes of SUBSTRING node `nd` must be BYTES / EMPTY nodes within the pools. */
int lw_substring_check(const xgr_grammar *g, int32_t id) {
    const xgr_node *nd = &g->nodes.data[id];
    if (nd->off < 0 || nd->count < 0 || (size_t)nd->off + (size_t)nd->count > g->kids.len)
        return xgr_fail(XGR_ERR_INVALID_ARG, "Substring chunk list out of range");
    for (int32_t i = 0; i < nd->count; i++) {
        int32_t k = g->kids.data[nd->off + i];
        if (k < 0 || (size_t)k >= g->nodes.len)
            return xgr_fail(XGR_ERR_INVALID_ARG, "Substring chunk node %d out of range", (int)k);
        const xgr_node *b = &g->nodes.data[k];
        if (b->kind == XGR_NODE_EMPTY) continue;
        if (b->kind != XGR_NODE_BYTES || b->off < 0 || b->count < 0 ||
            (size_t)b->off + (size_t)b->count > g->bytes.len)
            return xgr_fail(XGR_ERR_INVALID_ARG, "Substring chunk %d is not a literal", (int)i);
    }
    return XGR_OK;
}

/* Bytes of all chunks (saturating at INT32_MAX). */
static int64_t chunk_bytes(const xgr_grammar *g, const xgr_node *nd) {
    int64_t t = 0;
    for (int32_t i = 0; i < nd->count && t < INT32_MAX; i++) {
        const xgr_node *b = &g->nodes.data[g->kids.data[nd->off + i]];
        if (b->kind == XGR_NODE_BYTES) t += b->count;
    }
    return t < INT32_MAX ? t : INT32_MAX;
}

uint8_t lw_substring_props(const xgr_grammar *g, int32_t id) {
    return (uint8_t)(NP_NULLABLE | NP_PROD | (chunk_bytes(g, &g->nodes.data[id]) ? NP_NE : 0));
}

int64_t lw_substring_est(const xgr_grammar *g, int32_t id) {
    const xgr_node *nd = &g->nodes.data[id];
    return 2 * (int64_t)nd->count + chunk_bytes(g, nd) + 1;
}

/* ---- suffix automaton over symbols ------------------------------------------------ */

typedef struct {
    int32_t src, sym, target, next; /* next: the source state's previous edge, or -1 */
} sam_edge;

typedef struct {
    XGR_VEC(int32_t) link, len, head; /* per state; head: its last edge, or -1 */
    XGR_VEC(sam_edge) edges;
    int32_t *table; /* open addressing: (src, sym) -> edge id, -1 empty */
    size_t cap;     /* a power of 2, more than twice the edges (at most 3n + 1) */
} sam;

static void sam_free(sam *a) {
    XGR_VEC_FREE(a->link);
    XGR_VEC_FREE(a->len);
    XGR_VEC_FREE(a->head);
    XGR_VEC_FREE(a->edges);
    free(a->table);
    a->table = NULL;
}

static size_t slot(const sam *a, int32_t s, int32_t sym) {
    return (size_t)xgr_mix64(((uint64_t)(uint32_t)s << 32) | (uint32_t)sym) & (a->cap - 1);
}

/* The edge id of (s, sym) or -1; *at gets the slot where it is or would go. */
static int32_t sam_find(const sam *a, int32_t s, int32_t sym, size_t *at) {
    size_t i = slot(a, s, sym);
    for (;; i = (i + 1) & (a->cap - 1)) {
        int32_t e = a->table[i];
        if (e < 0 || (a->edges.data[e].src == s && a->edges.data[e].sym == sym)) {
            if (at) *at = i;
            return e;
        }
    }
}

static int sam_add_edge(sam *a, int32_t s, int32_t sym, int32_t t) {
    size_t at;
    if (a->edges.len * 2 + 2 > a->cap)
        return xgr_fail(XGR_ERR_INTERNAL, "Substring: suffix automaton edge table full");
    if (sam_find(a, s, sym, &at) >= 0)
        return xgr_fail(XGR_ERR_INTERNAL, "Substring: duplicate suffix automaton edge");
    sam_edge e = {s, sym, t, a->head.data[s]};
    if (XGR_VEC_PUSH(a->edges, e)) return XGR_ERR_NOMEM;
    a->head.data[s] = (int32_t)a->edges.len - 1;
    a->table[at] = (int32_t)a->edges.len - 1;
    return XGR_OK;
}

static int sam_new_state(sam *a, int32_t len, int32_t link, int32_t *out) {
    if (XGR_VEC_PUSH(a->link, link) || XGR_VEC_PUSH(a->len, len) || XGR_VEC_PUSH(a->head, -1))
        return XGR_ERR_NOMEM;
    *out = (int32_t)a->link.len - 1;
    return XGR_OK;
}

/* The suffix automaton of seq[0..n) (the classic online construction). */
static int sam_build(sam *a, const int32_t *seq, size_t n) {
    size_t cap = 16;
    while (cap < 8 * n + 16) cap *= 2;
    a->table = xgr_malloc(cap * sizeof *a->table);
    if (!a->table) return XGR_ERR_NOMEM;
    memset(a->table, 0xff, cap * sizeof *a->table);
    a->cap = cap;
    if (XGR_VEC_RESERVE(a->link, 2 * n + 1) || XGR_VEC_RESERVE(a->len, 2 * n + 1) ||
        XGR_VEC_RESERVE(a->head, 2 * n + 1) || XGR_VEC_RESERVE(a->edges, 3 * n + 1))
        return XGR_ERR_NOMEM;
    int32_t last, cur, clone;
    int rc = sam_new_state(a, 0, -1, &last);
    for (size_t i = 0; !rc && i < n; i++) {
        int32_t c = seq[i], p = last, e;
        if ((rc = sam_new_state(a, a->len.data[last] + 1, -1, &cur))) break;
        while (p != -1 && sam_find(a, p, c, NULL) < 0) {
            if ((rc = sam_add_edge(a, p, c, cur))) return rc;
            p = a->link.data[p];
        }
        if (p == -1) {
            a->link.data[cur] = 0;
        } else {
            int32_t q = a->edges.data[sam_find(a, p, c, NULL)].target;
            if (a->len.data[p] + 1 == a->len.data[q]) {
                a->link.data[cur] = q;
            } else {
                if ((rc = sam_new_state(a, a->len.data[p] + 1, a->link.data[q], &clone))) break;
                for (int32_t k = a->head.data[q]; k >= 0; k = a->edges.data[k].next) {
                    sam_edge ed = a->edges.data[k];
                    if ((rc = sam_add_edge(a, clone, ed.sym, ed.target))) return rc;
                }
                while (p != -1 && (e = sam_find(a, p, c, NULL)) >= 0 &&
                       a->edges.data[e].target == q) {
                    a->edges.data[e].target = clone;
                    p = a->link.data[p];
                }
                a->link.data[q] = clone;
                a->link.data[cur] = clone;
            }
        }
        last = cur;
    }
    return rc;
}

/* ---- chunks as symbols -------------------------------------------------------------- */

typedef struct {
    const xgr_grammar *g;
    const int32_t *kid; /* chunk index -> BYTES node */
} chunk_ctx;

static int cmp_chunk(const void *ctx, int32_t x, int32_t y) {
    const chunk_ctx *cc = ctx;
    const xgr_node *a = &cc->g->nodes.data[cc->kid[x]], *b = &cc->g->nodes.data[cc->kid[y]];
    size_t m = (size_t)(a->count < b->count ? a->count : b->count);
    int d = memcmp(cc->g->bytes.data + a->off, cc->g->bytes.data + b->off, m);
    if (d) return d;
    return (a->count > b->count) - (a->count < b->count);
}

/* Edges of one state, sorted by symbol (= by chunk bytes). */
static int cmp_edge_sym(const void *ctx, int32_t x, int32_t y) {
    const sam_edge *e = ctx;
    return (e[x].sym > e[y].sym) - (e[x].sym < e[y].sym);
}

int lw_substring_nfa(lw_ctx *c, int32_t id, int32_t a, int32_t b) {
    const xgr_grammar *g = c->g;
    const xgr_node nd = g->nodes.data[id];
    sam m;
    memset(&m, 0, sizeof m);
    size_t n = 0, cnt = (size_t)nd.count;
    int32_t *kid = xgr_malloc((cnt + 1) * sizeof *kid);   /* non-empty chunks' nodes */
    int32_t *order = xgr_malloc((cnt + 1) * sizeof *order); /* chunk indexes by bytes */
    int32_t *tmp = xgr_malloc((cnt + 1) * sizeof *tmp);
    int32_t *sym = xgr_malloc((cnt + 1) * sizeof *sym);     /* chunk index -> symbol */
    int32_t *rep = xgr_malloc((cnt + 1) * sizeof *rep);     /* symbol -> BYTES node */
    int32_t *st = NULL, *path = NULL, *es = NULL, *etmp = NULL;
    int rc = kid && order && tmp && sym && rep ? XGR_OK : XGR_ERR_NOMEM;
    for (size_t i = 0; !rc && i < cnt; i++) {
        int32_t k = g->kids.data[nd.off + (int32_t)i];
        if (g->nodes.data[k].kind == XGR_NODE_BYTES && g->nodes.data[k].count > 0) {
            order[n] = (int32_t)n;
            kid[n++] = k;
        }
    }
    if (rc) goto done;
    /* the suffix automaton alone has up to 2n states: refuse what cannot fit early */
    if ((int64_t)n * 2 + 2 > c->nfa_limit) {
        rc = xgr_fail(XGR_ERR_LIMIT, "rule '%s': Substring with %zu chunks exceeds %lld NFA states",
                      c->orules.data[c->cur].name, n, (long long)c->nfa_limit);
        goto done;
    }
    chunk_ctx cc = {g, kid};
    lw_sort_i32(order, n, tmp, cmp_chunk, &cc);
    int32_t n_sym = 0, max_len = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || cmp_chunk(&cc, order[i - 1], order[i]) != 0) rep[n_sym++] = kid[order[i]];
        sym[order[i]] = n_sym - 1;
        if (g->nodes.data[kid[order[i]]].count > max_len) max_len = g->nodes.data[kid[order[i]]].count;
    }
    if ((rc = sam_build(&m, sym, n))) goto done;

    size_t ns = m.link.len;
    st = xgr_malloc(ns * sizeof *st);
    path = xgr_malloc(((size_t)max_len + 1) * sizeof *path);
    es = xgr_malloc((m.edges.len + 1) * sizeof *es);
    etmp = xgr_malloc((m.edges.len + 1) * sizeof *etmp);
    if (!st || !path || !es || !etmp) {
        rc = XGR_ERR_NOMEM;
        goto done;
    }
    for (size_t s = 0; s < ns; s++)
        if ((rc = lw_nfa_state(c, &st[s])) || (rc = lw_nfa_edge(c, st[s], b, LW_EPS, 0, 0)))
            goto done;
    if ((rc = lw_nfa_edge(c, a, st[0], LW_EPS, 0, 0))) goto done;
    for (size_t s = 0; s < ns; s++) {
        size_t k = 0;
        for (int32_t e = m.head.data[s]; e >= 0; e = m.edges.data[e].next) es[k++] = e;
        if (!k) continue;
        lw_sort_i32(es, k, etmp, cmp_edge_sym, m.edges.data);
        /* Byte trie of the chunks leaving s: path[i] is the trie state after i bytes of
         * the previous chunk; sorted order makes its common prefix with the previous
         * chunk the longest with any earlier one. */
        path[0] = st[s];
        const xgr_node *prev = NULL;
        for (size_t j = 0; j < k; j++) {
            const sam_edge *ed = &m.edges.data[es[j]];
            const xgr_node *cur = &g->nodes.data[rep[ed->sym]];
            const uint8_t *cb = g->bytes.data + cur->off;
            int32_t L = cur->count, l = 0;
            if (prev) {
                const uint8_t *pb = g->bytes.data + prev->off;
                while (l < prev->count && l < L && pb[l] == cb[l]) l++;
            }
            /* l < L: the chunks are distinct and sorted, so cur is no prefix of prev */
            for (int32_t i = l + 1; i < L; i++)
                if ((rc = lw_nfa_state(c, &path[i])) ||
                    (rc = lw_nfa_edge(c, path[i - 1], path[i], LW_BYTE, cb[i - 1], cb[i - 1])))
                    goto done;
            int prefix_of_next = 0;
            if (j + 1 < k) {
                const xgr_node *nx = &g->nodes.data[rep[m.edges.data[es[j + 1]].sym]];
                prefix_of_next = nx->count > L && memcmp(g->bytes.data + nx->off, cb, (size_t)L) == 0;
            }
            int32_t to = st[ed->target];
            if (prefix_of_next) {
                if ((rc = lw_nfa_state(c, &path[L])) ||
                    (rc = lw_nfa_edge(c, path[L - 1], path[L], LW_BYTE, cb[L - 1], cb[L - 1])) ||
                    (rc = lw_nfa_edge(c, path[L], to, LW_EPS, 0, 0)))
                    goto done;
            } else if ((rc = lw_nfa_edge(c, path[L - 1], to, LW_BYTE, cb[L - 1], cb[L - 1]))) {
                goto done;
            }
            prev = cur;
        }
    }
done:
    sam_free(&m);
    free(kid);
    free(order);
    free(tmp);
    free(sym);
    free(rep);
    free(st);
    free(path);
    free(es);
    free(etmp);
    return rc;
}
