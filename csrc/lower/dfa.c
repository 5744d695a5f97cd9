/* Per-rule epsilon-NFA -> minimal DFA over bytes + rule ids: subset construction with
 * hashed state sets, trimming of dead states, partition-refinement minimisation and a
 * canonical (BFS) state numbering. All scratch memory lives in a reusable workspace. */
#include "lower_internal.h"

typedef struct {
    uint8_t lo, hi;
    int32_t to;
} bedge;
typedef struct {
    int32_t ref, to;
} redge;

struct lw_dfa_ws {
    /* NFA in CSR form */
    lw_i32v eps_beg, eps_to, lab_beg, cursor;
    XGR_VEC(lw_nedge) lab;
    lw_u8v important;
    lw_u32v mark;
    uint32_t stamp;
    /* one_dfa[s]: the DFA state of closure({s}) (-1: not yet looked up; -2: no important
     * state), valid while one_gen[s] == gen (gen: this rule's subset construction) */
    lw_i32v one_dfa;
    lw_u32v one_gen;
    uint32_t gen;
    lw_i32v stack, cset, seeds;
    /* subset construction */
    lw_i32v pool, set_off, set_len, set_slot;
    XGR_VEC(uint64_t) set_hash;
    int32_t *table;
    size_t tcap;
    XGR_VEC(bedge) bedges;
    XGR_VEC(redge) redges;
    lw_i32v bucket;
    lw_dfa raw, trim, min;
    /* trimming / minimisation */
    lw_i32v rbeg, rsrc, newid, bfs;
    lw_u8v live;
    lw_i32v cls, elems, pos, bfirst, bend, mcount, dirty, next, touched, base, sorttmp;
    lw_i32v gid, gcnt, gslot, gtab; /* grouping a block's dirty states by signature */
    lw_u8v dflag;
    lw_u32v sig;
    lw_i32v sig_off, sig_len;
    XGR_VEC(uint64_t) sig_hash;
};

lw_dfa_ws *lw_dfa_ws_new(void) { return xgr_calloc(1, sizeof(lw_dfa_ws)); }

static void dfa_free(lw_dfa *d) {
    XGR_VEC_FREE(d->final);
    XGR_VEC_FREE(d->ebeg);
    XGR_VEC_FREE(d->edges);
}

void lw_dfa_ws_free(lw_dfa_ws *w) {
    if (!w) return;
    XGR_VEC_FREE(w->eps_beg);
    XGR_VEC_FREE(w->eps_to);
    XGR_VEC_FREE(w->lab_beg);
    XGR_VEC_FREE(w->cursor);
    XGR_VEC_FREE(w->lab);
    XGR_VEC_FREE(w->important);
    XGR_VEC_FREE(w->mark);
    XGR_VEC_FREE(w->one_dfa);
    XGR_VEC_FREE(w->one_gen);
    XGR_VEC_FREE(w->stack);
    XGR_VEC_FREE(w->cset);
    XGR_VEC_FREE(w->seeds);
    XGR_VEC_FREE(w->pool);
    XGR_VEC_FREE(w->set_off);
    XGR_VEC_FREE(w->set_len);
    XGR_VEC_FREE(w->set_slot);
    XGR_VEC_FREE(w->set_hash);
    free(w->table);
    XGR_VEC_FREE(w->bedges);
    XGR_VEC_FREE(w->redges);
    XGR_VEC_FREE(w->bucket);
    dfa_free(&w->raw);
    dfa_free(&w->trim);
    dfa_free(&w->min);
    XGR_VEC_FREE(w->rbeg);
    XGR_VEC_FREE(w->rsrc);
    XGR_VEC_FREE(w->newid);
    XGR_VEC_FREE(w->bfs);
    XGR_VEC_FREE(w->live);
    XGR_VEC_FREE(w->cls);
    XGR_VEC_FREE(w->elems);
    XGR_VEC_FREE(w->pos);
    XGR_VEC_FREE(w->bfirst);
    XGR_VEC_FREE(w->bend);
    XGR_VEC_FREE(w->mcount);
    XGR_VEC_FREE(w->dirty);
    XGR_VEC_FREE(w->next);
    XGR_VEC_FREE(w->touched);
    XGR_VEC_FREE(w->base);
    XGR_VEC_FREE(w->sorttmp);
    XGR_VEC_FREE(w->dflag);
    XGR_VEC_FREE(w->gid);
    XGR_VEC_FREE(w->gcnt);
    XGR_VEC_FREE(w->gslot);
    XGR_VEC_FREE(w->gtab);
    XGR_VEC_FREE(w->sig);
    XGR_VEC_FREE(w->sig_off);
    XGR_VEC_FREE(w->sig_len);
    XGR_VEC_FREE(w->sig_hash);
    free(w);
}

#define RESERVE(v, n)                                                                  \
    do {                                                                               \
        if (XGR_VEC_RESERVE((v), (size_t)(n))) return XGR_ERR_NOMEM;                   \
    } while (0)

/* ---- sorting ------------------------------------------------------------------------ */
void lw_sort_i32(int32_t *a, size_t n, int32_t *tmp, lw_cmp_fn cmp, const void *ctx) {
    if (n <= 16) {
        for (size_t i = 1; i < n; i++) {
            int32_t x = a[i];
            size_t j = i;
            while (j > 0 && cmp(ctx, a[j - 1], x) > 0) {
                a[j] = a[j - 1];
                j--;
            }
            a[j] = x;
        }
        return;
    }
    size_t h = n / 2;
    lw_sort_i32(a, h, tmp, cmp, ctx);
    lw_sort_i32(a + h, n - h, tmp, cmp, ctx);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = cmp(ctx, a[j], a[i]) < 0 ? a[j++] : a[i++];
    while (i < h) tmp[k++] = a[i++];
    while (j < n) tmp[k++] = a[j++];
    memcpy(a, tmp, n * sizeof *a);
}

/* Ascending sort of ints (closure sets: distinct NFA states): quicksort with a middle
 * pivot (Hoare partition), the smaller side recursed, insertion sort below 17. */
static void sort_small_i32(int32_t *a, size_t n) {
    while (n > 16) {
        int32_t p = a[(n - 1) / 2];
        size_t i = 0, j = n - 1;
        for (;;) {
            while (a[i] < p) i++;
            while (a[j] > p) j--;
            if (i >= j) break;
            int32_t t = a[i];
            a[i++] = a[j];
            a[j--] = t;
        }
        /* [0, j] <= p <= [j + 1, n) */
        size_t left = j + 1;
        if (left < n - left) {
            sort_small_i32(a, left);
            a += left;
            n -= left;
        } else {
            sort_small_i32(a + left, n - left);
            n = left;
        }
    }
    for (size_t i = 1; i < n; i++) {
        int32_t x = a[i];
        size_t j = i;
        while (j > 0 && a[j - 1] > x) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = x;
    }
}

static int cmp_redge(const void *x, const void *y) {
    const redge *a = x, *b = y;
    if (a->ref != b->ref) return (a->ref > b->ref) - (a->ref < b->ref);
    return (a->to > b->to) - (a->to < b->to);
}

/* ---- subset construction ------------------------------------------------------------ */

/* CSR of epsilon and labelled edges; "important" states (those with labelled edges,
 * and the final state) are the only ones kept in DFA state sets. */
static int prep_nfa(lw_dfa_ws *w, const lw_nfa *a) {
    size_t n = (size_t)a->n_states, m = a->edges.len;
    RESERVE(w->eps_beg, n + 1);
    RESERVE(w->lab_beg, n + 1);
    RESERVE(w->cursor, n + 1);
    RESERVE(w->important, n);
    RESERVE(w->mark, n);
    RESERVE(w->one_dfa, n);
    RESERVE(w->one_gen, n);
    RESERVE(w->stack, n);
    RESERVE(w->cset, n);
    memset(w->eps_beg.data, 0, (n + 1) * sizeof(int32_t));
    memset(w->lab_beg.data, 0, (n + 1) * sizeof(int32_t));
    memset(w->mark.data, 0, n * sizeof(uint32_t));
    w->stamp = 0;
    if (++w->gen == 0) { /* wrapped: forget every stamp */
        memset(w->one_gen.data, 0, w->one_gen.cap * sizeof(uint32_t));
        w->gen = 1;
    }
    if (n > w->one_gen.len) { /* states never seen before carry no stamp */
        memset(w->one_gen.data + w->one_gen.len, 0, (n - w->one_gen.len) * sizeof(uint32_t));
        w->one_gen.len = n;
    }
    size_t ne = 0;
    for (size_t i = 0; i < m; i++) {
        const lw_nedge *e = &a->edges.data[i];
        if (e->label == LW_EPS) {
            w->eps_beg.data[e->from + 1]++;
            ne++;
        } else {
            w->lab_beg.data[e->from + 1]++;
        }
    }
    RESERVE(w->eps_to, ne);
    RESERVE(w->lab, m - ne);
    for (size_t s = 0; s < n; s++) {
        w->eps_beg.data[s + 1] += w->eps_beg.data[s];
        w->lab_beg.data[s + 1] += w->lab_beg.data[s];
    }
    memcpy(w->cursor.data, w->eps_beg.data, n * sizeof(int32_t));
    for (size_t i = 0; i < m; i++) {
        const lw_nedge *e = &a->edges.data[i];
        if (e->label == LW_EPS) w->eps_to.data[w->cursor.data[e->from]++] = e->to;
    }
    memcpy(w->cursor.data, w->lab_beg.data, n * sizeof(int32_t));
    for (size_t i = 0; i < m; i++) {
        const lw_nedge *e = &a->edges.data[i];
        if (e->label != LW_EPS) w->lab.data[w->cursor.data[e->from]++] = *e;
    }
    for (size_t s = 0; s < n; s++)
        w->important.data[s] =
            (uint8_t)(w->lab_beg.data[s + 1] > w->lab_beg.data[s] || (int32_t)s == a->final);
    return XGR_OK;
}

/* w->cset = sorted important states of the epsilon closure of seeds. */
static void closure(lw_dfa_ws *w, const int32_t *seeds, size_t k) {
    if (k == 1 && w->eps_beg.data[seeds[0]] == w->eps_beg.data[seeds[0] + 1]) {
        /* one seed without epsilon edges: itself if important (most literal steps) */
        w->cset.data[0] = seeds[0];
        w->cset.len = w->important.data[seeds[0]] ? 1 : 0;
        return;
    }
    uint32_t st = ++w->stamp;
    int32_t *stack = w->stack.data, *out = w->cset.data;
    size_t sp = 0, no = 0;
    for (size_t i = 0; i < k; i++) {
        int32_t s = seeds[i];
        if (w->mark.data[s] != st) {
            w->mark.data[s] = st;
            stack[sp++] = s;
        }
    }
    while (sp) {
        int32_t s = stack[--sp];
        if (w->important.data[s]) out[no++] = s;
        for (int32_t e = w->eps_beg.data[s]; e < w->eps_beg.data[s + 1]; e++) {
            int32_t t = w->eps_to.data[e];
            if (w->mark.data[t] != st) {
                w->mark.data[t] = st;
                stack[sp++] = t;
            }
        }
    }
    sort_small_i32(out, no);
    w->cset.len = no;
}

/* Multiply-xor over pairs of words in two independent lanes (a short dependency chain)
 * and one final mix: good enough for tables whose keys are also compared in full. */
static uint64_t hash_words(const uint32_t *s, size_t n) {
    uint64_t h0 = n, h1 = 0x9e3779b97f4a7c15ULL;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        h0 = (h0 ^ (s[i] | (uint64_t)s[i + 1] << 32)) * 0x9e3779b97f4a7c15ULL;
        h1 = (h1 ^ (s[i + 2] | (uint64_t)s[i + 3] << 32)) * 0xbf58476d1ce4e5b9ULL;
        h0 ^= h0 >> 29;
        h1 ^= h1 >> 31;
    }
    for (; i < n; i++) h0 = (h0 ^ s[i]) * 0x100000001b3ULL + (h0 >> 29);
    return xgr_mix64(h0 ^ (h1 * 0x94d049bb133111ebULL));
}

static uint64_t hash_set(const int32_t *s, size_t n) {
    return hash_words((const uint32_t *)(const void *)s, n);
}

static int table_grow(lw_dfa_ws *w, size_t need) {
    size_t cap = w->tcap ? w->tcap : 64;
    while (cap < need * 2) cap *= 2;
    if (cap == w->tcap) return XGR_OK;
    int32_t *t = xgr_malloc(cap * sizeof *t);
    if (!t) return XGR_ERR_NOMEM;
    memset(t, 0xff, cap * sizeof *t);
    free(w->table);
    w->table = t;
    w->tcap = cap;
    for (int32_t d = 0; d < w->raw.n; d++) {
        size_t i = w->set_hash.data[d] & (cap - 1);
        while (t[i] >= 0) i = (i + 1) & (cap - 1);
        t[i] = d;
        w->set_slot.data[d] = (int32_t)i;
    }
    return XGR_OK;
}

/* Pool entries (ints) of state sets one rule may hold: bounds memory when subset
 * construction blows up before the state budget is reached. */
#define LW_MAX_SET_POOL ((size_t)1 << 24)

/* Finds or creates the DFA state for w->cset. */
static int find_or_add(lw_dfa_ws *w, int32_t nfa_final, int64_t budget, int32_t *id) {
    const int32_t *s = w->cset.data;
    size_t n = w->cset.len;
    uint64_t h = hash_set(s, n);
    size_t mask = w->tcap - 1, i = h & mask;
    for (; w->table[i] >= 0; i = (i + 1) & mask) {
        int32_t d = w->table[i];
        if (w->set_hash.data[d] == h && (size_t)w->set_len.data[d] == n &&
            (n == 0 || memcmp(w->pool.data + w->set_off.data[d], s, n * sizeof *s) == 0)) {
            *id = d;
            return XGR_OK;
        }
    }
    int32_t d = w->raw.n;
    if (d >= budget)
        return xgr_fail(XGR_ERR_LIMIT, "determinisation exceeds %lld states", (long long)budget);
    if (w->pool.len + n > LW_MAX_SET_POOL)
        return xgr_fail(XGR_ERR_LIMIT, "determinisation too large (%d states, %zu set entries)",
                        (int)d, w->pool.len);
    RESERVE(w->pool, w->pool.len + n);
    RESERVE(w->set_off, (size_t)d + 1);
    RESERVE(w->set_len, (size_t)d + 1);
    RESERVE(w->set_slot, (size_t)d + 1);
    RESERVE(w->set_hash, (size_t)d + 1);
    RESERVE(w->raw.final, (size_t)d + 1);
    w->set_off.data[d] = (int32_t)w->pool.len;
    w->set_len.data[d] = (int32_t)n;
    w->set_hash.data[d] = h;
    w->set_slot.data[d] = (int32_t)i;
    int fin = 0;
    for (size_t k = 0; k < n; k++) fin |= s[k] == nfa_final;
    w->raw.final.data[d] = (uint8_t)fin;
    if (n) memcpy(w->pool.data + w->pool.len, s, n * sizeof *s);
    w->pool.len += n;
    w->table[i] = d;
    w->raw.n = d + 1;
    *id = d;
    if ((size_t)w->raw.n * 2 > w->tcap) return table_grow(w, (size_t)w->raw.n);
    return XGR_OK;
}

/* The DFA state of closure({s}) (-1 when it holds no important state), looked up once
 * per NFA state and rule: most transitions lead to one NFA state. */
static int dfa_of_one(lw_dfa_ws *w, int32_t s, int32_t nfa_final, int64_t budget, int32_t *id) {
    if (w->one_gen.data[s] == w->gen) {
        *id = w->one_dfa.data[s];
        return XGR_OK;
    }
    closure(w, &s, 1);
    int32_t t = -1;
    int rc;
    if (w->cset.len && (rc = find_or_add(w, nfa_final, budget, &t))) return rc;
    w->one_gen.data[s] = w->gen;
    w->one_dfa.data[s] = t;
    *id = t;
    return XGR_OK;
}

static void sort_redges(redge *a, size_t n) {
    if (n > 16) {
        qsort(a, n, sizeof *a, cmp_redge);
        return;
    }
    for (size_t i = 1; i < n; i++) { /* few ref edges per state: insertion sort */
        redge x = a[i];
        size_t j = i;
        while (j > 0 && cmp_redge(&a[j - 1], &x) > 0) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = x;
    }
}

/* Sorts a state set's byte edges by lo (insertion sort: they come mostly in order) and
 * tells whether the ranges are pairwise disjoint. The order does not matter to the
 * interval split, which takes the edges in any order. */
static int sorted_disjoint(bedge *a, size_t n) {
    for (size_t i = 1; i < n; i++) {
        bedge x = a[i];
        size_t j = i;
        while (j > 0 && a[j - 1].lo > x.lo) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = x;
    }
    for (size_t i = 1; i < n; i++)
        if (a[i].lo <= a[i - 1].hi) return 0;
    return 1;
}

static int push_edge(lw_dfa *d, int32_t target, int32_t ref, uint8_t lo, uint8_t hi) {
    xgr_edge e = {target, ref, lo, hi};
    return XGR_VEC_PUSH(d->edges, e) ? XGR_ERR_NOMEM : XGR_OK;
}

/* Subset construction: w->raw is a DFA for the NFA's language, all states reachable
 * from state 0; per state, byte edges are disjoint and sorted by lo (adjacent runs to
 * one target merged), followed by ref edges sorted by rule id. */
/* RESERVE for subset(): an allocation failure still empties the hash table (out:). */
#define SUBSET_RESERVE(v, n)                                                           \
    do {                                                                               \
        if (XGR_VEC_RESERVE((v), (size_t)(n))) {                                       \
            rc = XGR_ERR_NOMEM;                                                        \
            goto out;                                                                  \
        }                                                                              \
    } while (0)

static int subset(lw_dfa_ws *w, const lw_nfa *a, int64_t budget) {
    int rc = 0;
    if ((rc = prep_nfa(w, a))) return rc;
    if (!w->tcap && (rc = table_grow(w, 32))) return rc;
    w->raw.n = 0;
    w->raw.edges.len = 0;
    w->pool.len = 0;
    int32_t d0;
    closure(w, &a->start, 1);
    if ((rc = find_or_add(w, a->final, budget, &d0))) goto out;
    for (int32_t d = 0; d < w->raw.n; d++) {
        SUBSET_RESERVE(w->raw.ebeg, (size_t)d + 2);
        w->raw.ebeg.data[d] = (int32_t)w->raw.edges.len;
        w->bedges.len = 0;
        w->redges.len = 0;
        int32_t off = w->set_off.data[d], len = w->set_len.data[d];
        for (int32_t i = 0; i < len; i++) {
            int32_t s = w->pool.data[off + i];
            for (int32_t e = w->lab_beg.data[s]; e < w->lab_beg.data[s + 1]; e++) {
                const lw_nedge *ed = &w->lab.data[e];
                if (ed->label == LW_BYTE) {
                    bedge b = {ed->lo, ed->hi, ed->to};
                    if (XGR_VEC_PUSH(w->bedges, b)) { rc = XGR_ERR_NOMEM; goto out; }
                } else {
                    redge r = {ed->label, ed->to};
                    if (XGR_VEC_PUSH(w->redges, r)) { rc = XGR_ERR_NOMEM; goto out; }
                }
            }
        }
        if (w->bedges.len == 1) { /* one byte range (a literal's step): no intervals */
            const bedge *b = &w->bedges.data[0];
            int32_t t;
            if ((rc = dfa_of_one(w, b->to, a->final, budget, &t))) goto out;
            if (t >= 0 && (rc = push_edge(&w->raw, t, -1, b->lo, b->hi))) goto out;
        } else if (w->bedges.len && sorted_disjoint(w->bedges.data, w->bedges.len)) {
            /* Pairwise disjoint ranges (a state set whose byte edges are already
             * deterministic, e.g. a string body's class, its escape and its closing
             * quote): each range is its own interval with one target, visited in the
             * order of the general path below, so the result is the same. */
            for (size_t i = 0; i < w->bedges.len; i++) {
                const bedge *b = &w->bedges.data[i];
                int32_t t;
                if ((rc = dfa_of_one(w, b->to, a->final, budget, &t))) goto out;
                if (t < 0) continue;
                size_t ne = w->raw.edges.len;
                xgr_edge *last = ne > (size_t)w->raw.ebeg.data[d] ? &w->raw.edges.data[ne - 1]
                                                                   : NULL;
                if (last && last->target == t && last->hi + 1 == b->lo)
                    last->hi = b->hi;
                else if ((rc = push_edge(&w->raw, t, -1, b->lo, b->hi)))
                    goto out;
            }
        } else if (w->bedges.len) {
            /* Elementary intervals [pts[k], pts[k+1]): maximal byte runs on which the
             * same edges apply. Few edges: sort their end points; many: a bitmap. */
            int32_t pts[257], idx_of[257], cnt[257], fill[256];
            int32_t np = 0;
            size_t nb = w->bedges.len;
            if (nb <= 32) {
                int32_t tmp[64];
                int32_t nt = 0;
                for (size_t i = 0; i < nb; i++) {
                    tmp[nt++] = w->bedges.data[i].lo;
                    tmp[nt++] = w->bedges.data[i].hi + 1;
                }
                sort_small_i32(tmp, (size_t)nt);
                for (int32_t i = 0; i < nt; i++)
                    if (np == 0 || pts[np - 1] != tmp[i]) pts[np++] = tmp[i];
            } else {
                uint8_t bound[257];
                memset(bound, 0, sizeof bound);
                for (size_t i = 0; i < nb; i++) {
                    bound[w->bedges.data[i].lo] = 1;
                    bound[w->bedges.data[i].hi + 1] = 1;
                }
                for (int v = 0; v <= 256; v++)
                    if (bound[v]) pts[np++] = v;
            }
            for (int32_t k = 0; k < np; k++) idx_of[pts[k]] = k;
            int32_t niv = np - 1;
            memset(cnt, 0, (size_t)(niv + 1) * sizeof *cnt);
            size_t total = 0;
            for (size_t i = 0; i < nb; i++) {
                const bedge *b = &w->bedges.data[i];
                int32_t k0 = idx_of[b->lo], k1 = idx_of[b->hi + 1];
                for (int32_t k = k0; k < k1; k++) cnt[k + 1]++;
                total += (size_t)(k1 - k0);
            }
            for (int32_t k = 0; k < niv; k++) cnt[k + 1] += cnt[k];
            SUBSET_RESERVE(w->bucket, total);
            memcpy(fill, cnt, (size_t)niv * sizeof *fill);
            for (size_t i = 0; i < nb; i++) {
                const bedge *b = &w->bedges.data[i];
                int32_t k0 = idx_of[b->lo], k1 = idx_of[b->hi + 1];
                for (int32_t k = k0; k < k1; k++) w->bucket.data[fill[k]++] = b->to;
            }
            int32_t prev_t = -1, prev_k = -1;
            for (int32_t k = 0; k < niv; k++) {
                int32_t bo = cnt[k], bl = cnt[k + 1] - cnt[k];
                if (bl == 0) {
                    prev_k = -1;
                    continue;
                }
                int32_t t;
                if (prev_k >= 0 && cnt[prev_k + 1] - cnt[prev_k] == bl &&
                    memcmp(w->bucket.data + cnt[prev_k], w->bucket.data + bo,
                           (size_t)bl * sizeof(int32_t)) == 0) {
                    t = prev_t;
                } else if (bl == 1) {
                    if ((rc = dfa_of_one(w, w->bucket.data[bo], a->final, budget, &t))) goto out;
                } else {
                    closure(w, w->bucket.data + bo, (size_t)bl);
                    t = -1;
                    if (w->cset.len && (rc = find_or_add(w, a->final, budget, &t)))
                        goto out;
                }
                prev_t = t;
                prev_k = k;
                if (t < 0) continue;
                uint8_t lo = (uint8_t)pts[k];
                uint8_t hi = (uint8_t)(pts[k + 1] - 1);
                size_t ne = w->raw.edges.len;
                xgr_edge *last = ne > (size_t)w->raw.ebeg.data[d] ? &w->raw.edges.data[ne - 1]
                                                                   : NULL;
                if (last && last->target == t && last->hi + 1 == lo)
                    last->hi = hi;
                else if ((rc = push_edge(&w->raw, t, -1, lo, hi)))
                    goto out;
            }
        }
        if (w->redges.len) {
            sort_redges(w->redges.data, w->redges.len);
            for (size_t i = 0; i < w->redges.len;) {
                size_t j = i;
                w->seeds.len = 0;
                while (j < w->redges.len && w->redges.data[j].ref == w->redges.data[i].ref) {
                    if (XGR_VEC_PUSH(w->seeds, w->redges.data[j].to)) {
                        rc = XGR_ERR_NOMEM;
                        goto out;
                    }
                    j++;
                }
                int32_t t = -1;
                if (w->seeds.len == 1) {
                    if ((rc = dfa_of_one(w, w->seeds.data[0], a->final, budget, &t))) goto out;
                } else {
                    closure(w, w->seeds.data, w->seeds.len);
                    if (w->cset.len && (rc = find_or_add(w, a->final, budget, &t))) goto out;
                }
                if (t >= 0 && (rc = push_edge(&w->raw, t, w->redges.data[i].ref, 0, 0))) goto out;
                i = j;
            }
        }
    }
    SUBSET_RESERVE(w->raw.ebeg, (size_t)w->raw.n + 1);
    w->raw.ebeg.data[w->raw.n] = (int32_t)w->raw.edges.len;
out:
    /* Empty the hash table for the next rule by clearing only the used slots. */
    for (int32_t d = 0; d < w->raw.n; d++) w->table[w->set_slot.data[d]] = -1;
    return rc;
}

/* ---- trimming ------------------------------------------------------------------------ */

/* Keeps the states that can reach a final state (all are reachable from the start by
 * construction); an empty language leaves one non-final state. */
static int trim(lw_dfa_ws *w) {
    const lw_dfa *d = &w->raw;
    lw_dfa *o = &w->trim;
    int32_t n = d->n;
    size_t m = d->edges.len;
    RESERVE(w->rbeg, (size_t)n + 1);
    RESERVE(w->rsrc, m);
    RESERVE(w->live, (size_t)n);
    RESERVE(w->newid, (size_t)n);
    RESERVE(w->bfs, (size_t)n);
    memset(w->rbeg.data, 0, ((size_t)n + 1) * sizeof(int32_t));
    for (size_t e = 0; e < m; e++) w->rbeg.data[d->edges.data[e].target + 1]++;
    for (int32_t s = 0; s < n; s++) w->rbeg.data[s + 1] += w->rbeg.data[s];
    int32_t *fill = w->newid.data; /* scratch before it holds new ids */
    memcpy(fill, w->rbeg.data, (size_t)n * sizeof *fill);
    for (int32_t s = 0; s < n; s++)
        for (int32_t e = d->ebeg.data[s]; e < d->ebeg.data[s + 1]; e++)
            w->rsrc.data[fill[d->edges.data[e].target]++] = s;
    size_t qt = 0;
    for (int32_t s = 0; s < n; s++) {
        w->live.data[s] = d->final.data[s];
        if (d->final.data[s]) w->bfs.data[qt++] = s;
    }
    for (size_t qh = 0; qh < qt; qh++) {
        int32_t t = w->bfs.data[qh];
        for (int32_t e = w->rbeg.data[t]; e < w->rbeg.data[t + 1]; e++) {
            int32_t s = w->rsrc.data[e];
            if (!w->live.data[s]) {
                w->live.data[s] = 1;
                w->bfs.data[qt++] = s;
            }
        }
    }
    o->edges.len = 0;
    if (!w->live.data[0]) {
        o->n = 1;
        RESERVE(o->final, 1);
        RESERVE(o->ebeg, 2);
        o->final.data[0] = 0;
        o->ebeg.data[0] = o->ebeg.data[1] = 0;
        return XGR_OK;
    }
    int32_t k = 0;
    for (int32_t s = 0; s < n; s++) w->newid.data[s] = w->live.data[s] ? k++ : -1;
    o->n = k;
    RESERVE(o->final, (size_t)k);
    RESERVE(o->ebeg, (size_t)k + 1);
    RESERVE(o->edges, m);
    for (int32_t s = 0; s < n; s++) {
        int32_t ns = w->newid.data[s];
        if (ns < 0) continue;
        o->final.data[ns] = d->final.data[s];
        o->ebeg.data[ns] = (int32_t)o->edges.len;
        for (int32_t e = d->ebeg.data[s]; e < d->ebeg.data[s + 1]; e++) {
            xgr_edge ed = d->edges.data[e];
            if (w->newid.data[ed.target] < 0) continue;
            ed.target = w->newid.data[ed.target];
            o->edges.data[o->edges.len++] = ed;
        }
    }
    o->ebeg.data[k] = (int32_t)o->edges.len;
    return XGR_OK;
}

/* ---- minimisation -------------------------------------------------------------------- */

/* Signature of s under the current partition: byte runs (adjacent runs into the same
 * block merged, so it does not depend on how subset construction cut ranges) and ref
 * edges, each with the target's block. */
static int compute_sig(lw_dfa_ws *w, const lw_dfa *d, int32_t s) {
    size_t start = w->sig.len;
    int32_t eb = d->ebeg.data[s], ee = d->ebeg.data[s + 1];
    RESERVE(w->sig, start + 2 * (size_t)(ee - eb));
    uint32_t *o = w->sig.data;
    size_t k = start;
    for (int32_t e = eb; e < ee; e++) {
        const xgr_edge *ed = &d->edges.data[e];
        uint32_t cl = (uint32_t)w->cls.data[ed->target];
        if (ed->ref < 0) {
            if (k > start && o[k - 1] == cl && (o[k - 2] >> 31) == 0 &&
                ((o[k - 2] >> 8) & 0xFF) + 1 == ed->lo) {
                o[k - 2] = (o[k - 2] & 0xFFu) | ((uint32_t)ed->hi << 8);
                continue;
            }
            o[k++] = (uint32_t)ed->lo | ((uint32_t)ed->hi << 8);
        } else {
            o[k++] = 0x80000000u | (uint32_t)ed->ref;
        }
        o[k++] = cl;
    }
    w->sig.len = k;
    w->sig_off.data[s] = (int32_t)start;
    w->sig_len.data[s] = (int32_t)(k - start);
    return XGR_OK;
}

/* Signatures are hashed only when a block is grouped (sig_group): most blocks agree. */
static void sig_hash(lw_dfa_ws *w, int32_t s) {
    int32_t n = w->sig_len.data[s];
    w->sig_hash.data[s] = n ? hash_words(w->sig.data + w->sig_off.data[s], (size_t)n)
                            : hash_words(NULL, 0);
}

static int sig_eq(const lw_dfa_ws *w, int32_t a, int32_t b) {
    return w->sig_len.data[a] == w->sig_len.data[b] &&
           (w->sig_len.data[a] == 0 ||
            memcmp(w->sig.data + w->sig_off.data[a], w->sig.data + w->sig_off.data[b],
                   (size_t)w->sig_len.data[a] * sizeof(uint32_t)) == 0);
}

/* Group of s among a block's signatures so far (w->gtab: an open-addressing table of
 * states, gcap slots, -1 = free; *ng groups, numbered in order of first appearance; the
 * slot of group g's entry in gslot[g], for clearing). */
static int32_t sig_group(lw_dfa_ws *w, size_t gcap, int32_t s, int32_t *ng) {
    size_t mask = gcap - 1;
    sig_hash(w, s);
    for (size_t i = w->sig_hash.data[s] & mask;; i = (i + 1) & mask) {
        int32_t t = w->gtab.data[i];
        if (t < 0) {
            int32_t g = (*ng)++;
            w->gtab.data[i] = s;
            w->gid.data[s] = g;
            w->gcnt.data[g] = 0;
            w->gslot.data[g] = (int32_t)i;
            return g;
        }
        if (w->sig_hash.data[s] == w->sig_hash.data[t] && sig_eq(w, s, t))
            return w->gid.data[s] = w->gid.data[t];
    }
}

/* End of group g laid out by minimize: groups 1.. (0.. without a rep) in order from the
 * block's start, then rep's group 0, which runs on to the block's end e. */
static int32_t group_end(const int32_t *gstart, int32_t g, int32_t ng, int has_rep, int32_t e,
                         int32_t dirty_end) {
    if (has_rep && g == 0) return e;
    if (g + 1 < ng) return gstart[g + 1];
    return has_rep ? gstart[0] : dirty_end;
}

/* Partition refinement by signatures with a worklist: only states with a successor
 * that changed block are re-examined, and a splitting block keeps its id for its
 * largest part, so each state is re-examined O(log n) times per successor edge.
 * Result: the coarsest congruence refining final/non-final = the minimal DFA (the
 * input is trimmed, so missing edges all mean the same dead state). */
static int minimize(lw_dfa_ws *w, const lw_dfa *d) {
    lw_dfa *o = &w->min;
    int32_t n = d->n;
    size_t m = d->edges.len;
    RESERVE(w->cls, (size_t)n);
    RESERVE(w->elems, (size_t)n);
    RESERVE(w->pos, (size_t)n);
    RESERVE(w->bfirst, (size_t)n);
    RESERVE(w->bend, (size_t)n);
    RESERVE(w->mcount, (size_t)n);
    RESERVE(w->dirty, (size_t)n);
    RESERVE(w->next, (size_t)n);
    RESERVE(w->touched, (size_t)n);
    RESERVE(w->base, (size_t)n);
    RESERVE(w->sorttmp, 2 * (size_t)n + 1);
    RESERVE(w->dflag, (size_t)n);
    RESERVE(w->gid, (size_t)n);
    RESERVE(w->gcnt, (size_t)n + 1);
    RESERVE(w->gslot, (size_t)n + 1);
    size_t gcap = 16;
    while (gcap < 2 * ((size_t)n + 1)) gcap *= 2;
    if (w->gtab.cap < gcap) { /* every slot stays -1 between uses */
        RESERVE(w->gtab, gcap);
        memset(w->gtab.data, 0xff, w->gtab.cap * sizeof(int32_t));
    }
    RESERVE(w->sig_off, (size_t)n);
    RESERVE(w->sig_len, (size_t)n);
    RESERVE(w->sig_hash, (size_t)n);
    RESERVE(w->rbeg, (size_t)n + 1);
    RESERVE(w->rsrc, m);
    RESERVE(w->newid, (size_t)n);
    RESERVE(w->bfs, (size_t)n);

    int32_t nb = 0, k = 0;
    for (int pass = 0; pass < 2; pass++) {
        int32_t first = k;
        for (int32_t s = 0; s < n; s++)
            if (d->final.data[s] == pass) {
                w->pos.data[s] = k;
                w->elems.data[k++] = s;
                w->cls.data[s] = nb;
            }
        if (k > first) {
            w->bfirst.data[nb] = first;
            w->bend.data[nb] = k;
            w->mcount.data[nb] = 0;
            nb++;
        }
    }
    /* predecessors */
    memset(w->rbeg.data, 0, ((size_t)n + 1) * sizeof(int32_t));
    for (size_t e = 0; e < m; e++) w->rbeg.data[d->edges.data[e].target + 1]++;
    for (int32_t s = 0; s < n; s++) w->rbeg.data[s + 1] += w->rbeg.data[s];
    int32_t *fill = w->newid.data;
    memcpy(fill, w->rbeg.data, (size_t)n * sizeof *fill);
    for (int32_t s = 0; s < n; s++)
        for (int32_t e = d->ebeg.data[s]; e < d->ebeg.data[s + 1]; e++)
            w->rsrc.data[fill[d->edges.data[e].target]++] = s;

    for (int32_t s = 0; s < n; s++) {
        w->dirty.data[s] = s;
        w->dflag.data[s] = 1;
    }
    w->dirty.len = (size_t)n;
    while (w->dirty.len) {
        w->sig.len = 0;
        w->touched.len = 0;
        for (size_t i = 0; i < w->dirty.len; i++) {
            int32_t s = w->dirty.data[i];
            int rc = compute_sig(w, d, s);
            if (rc) return rc;
            int32_t b = w->cls.data[s];
            /* move s to the front segment of its block */
            int32_t p = w->bfirst.data[b] + w->mcount.data[b]++, ps = w->pos.data[s];
            int32_t other = w->elems.data[p];
            w->elems.data[p] = s;
            w->pos.data[s] = p;
            w->elems.data[ps] = other;
            w->pos.data[other] = ps;
            if (w->mcount.data[b] == 1) w->touched.data[w->touched.len++] = b;
        }
        /* One untouched member represents the rest of its block; signatures are all
         * taken before any block changes in this round. */
        for (size_t t = 0; t < w->touched.len; t++) {
            int32_t b = w->touched.data[t];
            int32_t rep = -1;
            if (w->mcount.data[b] < w->bend.data[b] - w->bfirst.data[b]) {
                rep = w->elems.data[w->bfirst.data[b] + w->mcount.data[b]];
                int rc = compute_sig(w, d, rep);
                if (rc) return rc;
            }
            w->base.data[t] = rep;
        }
        for (size_t i = 0; i < w->dirty.len; i++) w->dflag.data[w->dirty.data[i]] = 0;
        w->next.len = 0;
        for (size_t t = 0; t < w->touched.len; t++) {
            int32_t b = w->touched.data[t], rep = w->base.data[t];
            int32_t f = w->bfirst.data[b], mc = w->mcount.data[b], e = w->bend.data[b];
            w->mcount.data[b] = 0;
            /* Common case: every dirty state still agrees with the block. */
            int32_t s0 = w->elems.data[f];
            int same = rep < 0 || sig_eq(w, s0, rep);
            for (int32_t i = f + 1; same && i < f + mc; i++) same = sig_eq(w, w->elems.data[i], s0);
            if (same) continue;
            /* Group the dirty states by signature (hashing, not sorting); group 0 is the
             * untouched members' (rep's) when there are any. */
            int32_t ng = 0, *el = w->elems.data + f;
            if (rep >= 0) sig_group(w, gcap, rep, &ng);
            for (int32_t i = 0; i < mc; i++) w->gcnt.data[sig_group(w, gcap, el[i], &ng)]++;
            for (int32_t g = 0; g < ng; g++) w->gtab.data[w->gslot.data[g]] = -1;
            if (ng <= 1) continue;
            /* Lay the groups out in order, rep's last (it runs on into the untouched part
             * [f + mc, e)); the largest keeps the block's id. */
            int32_t *gstart = w->sorttmp.data + mc; /* (sorttmp holds 2n + 1 >= mc + ng) */
            int32_t at = f, g0 = rep >= 0 ? 1 : 0, best_g = -1, best_len = -1;
            for (int32_t g = g0; g < ng; g++) {
                gstart[g] = at;
                at += w->gcnt.data[g];
            }
            if (rep >= 0) gstart[0] = at;
            for (int32_t i = 0; i < mc; i++) w->sorttmp.data[i] = el[i];
            for (int32_t i = 0; i < mc; i++) {
                int32_t st = w->sorttmp.data[i];
                int32_t p = gstart[w->gid.data[st]] + w->gcnt.data[w->gid.data[st]] - 1;
                w->gcnt.data[w->gid.data[st]]--; /* fills each group from its end */
                w->elems.data[p] = st;
                w->pos.data[st] = p;
            }
            int32_t best_s = f, best_e = f;
            for (int32_t g = 0; g < ng; g++) {
                int32_t gs = gstart[g];
                int32_t ge = group_end(gstart, g, ng, rep >= 0, e, f + mc);
                if (ge - gs > best_len) {
                    best_len = ge - gs;
                    best_g = g;
                    best_s = gs;
                    best_e = ge;
                }
            }
            for (int32_t g = 0; g < ng; g++) {
                if (g == best_g) continue;
                int32_t gs = gstart[g];
                int32_t ge = group_end(gstart, g, ng, rep >= 0, e, f + mc);
                int32_t nbk = nb++;
                w->bfirst.data[nbk] = gs;
                w->bend.data[nbk] = ge;
                w->mcount.data[nbk] = 0;
                for (int32_t i = gs; i < ge; i++) {
                    int32_t s = w->elems.data[i];
                    w->cls.data[s] = nbk;
                    for (int32_t r = w->rbeg.data[s]; r < w->rbeg.data[s + 1]; r++) {
                        int32_t p = w->rsrc.data[r];
                        if (!w->dflag.data[p]) {
                            w->dflag.data[p] = 1;
                            w->next.data[w->next.len++] = p;
                        }
                    }
                }
            }
            w->bfirst.data[b] = best_s;
            w->bend.data[b] = best_e;
        }
        lw_i32v tmp = w->dirty;
        w->dirty = w->next;
        w->next = tmp;
    }

    /* Canonical numbering: BFS over blocks from the start's, edges in row order, so
     * equal languages give identical automata (up to the rule ids on ref edges). */
    int32_t *nid = w->newid.data, *order = w->bfs.data;
    for (int32_t b = 0; b < nb; b++) nid[b] = -1;
    int32_t cnt = 0;
    nid[w->cls.data[0]] = cnt;
    order[cnt++] = w->cls.data[0];
    for (int32_t qh = 0; qh < cnt; qh++) {
        int32_t rep = w->elems.data[w->bfirst.data[order[qh]]];
        for (int32_t e = d->ebeg.data[rep]; e < d->ebeg.data[rep + 1]; e++) {
            int32_t tb = w->cls.data[d->edges.data[e].target];
            if (nid[tb] < 0) {
                nid[tb] = cnt;
                order[cnt++] = tb;
            }
        }
    }
    o->n = cnt;
    o->edges.len = 0;
    RESERVE(o->final, (size_t)cnt);
    RESERVE(o->ebeg, (size_t)cnt + 1);
    RESERVE(o->edges, m);
    for (int32_t q = 0; q < cnt; q++) {
        int32_t rep = w->elems.data[w->bfirst.data[order[q]]];
        o->final.data[q] = d->final.data[rep];
        o->ebeg.data[q] = (int32_t)o->edges.len;
        for (int32_t e = d->ebeg.data[rep]; e < d->ebeg.data[rep + 1]; e++) {
            xgr_edge ed = d->edges.data[e];
            ed.target = nid[w->cls.data[ed.target]];
            size_t ne = o->edges.len;
            if (ed.ref < 0 && ne > (size_t)o->ebeg.data[q]) {
                xgr_edge *last = &o->edges.data[ne - 1];
                if (last->ref < 0 && last->target == ed.target && last->hi + 1 == ed.lo) {
                    last->hi = ed.hi;
                    continue;
                }
            }
            o->edges.data[o->edges.len++] = ed;
        }
    }
    o->ebeg.data[cnt] = (int32_t)o->edges.len;
    return XGR_OK;
}

int32_t lw_dfa_ws_raw_states(const lw_dfa_ws *w) { return w->raw.n; }

int lw_nfa_to_dfa(lw_dfa_ws *w, const lw_nfa *nfa, int64_t budget, const lw_dfa **out) {
    int rc;
    if ((rc = subset(w, nfa, budget))) return rc;
    /* Without dead fragments every NFA state reaches the final one, so every subset
     * does too: nothing to trim. */
    const lw_dfa *live = &w->raw;
    if (nfa->may_dead) {
        if ((rc = trim(w))) return rc;
        live = &w->trim;
    }
    if ((rc = minimize(w, live))) return rc;
    *out = &w->min;
    return XGR_OK;
}
