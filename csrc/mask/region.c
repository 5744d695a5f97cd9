/* Loop regions: context-free entries of loop states, shared across rules.
 *
 * Lowering inlines small rules, so the body of a JSON string ends up inside the rule of
 * each property list, whose closure is unique to its schema: the entry of the in-string
 * state could never be shared, and costs a vocabulary pass (~3 ms at 128k tokens) on its
 * first visit in every request. The loop itself (the strongly connected component of the
 * state) is the same in every schema; only where its exit edges lead differs. A region
 * entry classifies the vocabulary by the loop alone: a token that stays inside it to its
 * last byte is accepted, one that dies inside it is rejected, and one that leaves it
 * through exit edge k after e bytes (with bytes left) is kept with (e, k). The key is the
 * loop's canonical serialisation with its exit edges numbered, so every grammar with that
 * loop shares the entry; each grammar then walks only the leaving tokens (about 1% of the
 * vocabulary for a string) on its own automaton.
 * A loop may hold final states (a digit run that can end its rule): a token that dies
 * inside the loop or leaves it keeps the depths where the rule could have ended, as a
 * vocabulary pass over the whole rule records them. */
#include "region.h"

#include "entry.h"
#include "global_cache.h"
#include "stay.h"
#include "suffix_set.h"

#define RG_MAX_EXITS 32767 /* exit indices are stored in 16 bits */
#define RG_LOCAL (-2)      /* the cache's local-state field for region entries */
#define RG_EXIT 0xFFFFu    /* in a region entry's depth list: (exit depth, exit index) follow */

typedef struct {
    int32_t n;            /* loop states, in BFS order from the entry state */
    int32_t *state;       /* local -> global */
    int32_t *local;       /* global - rule start -> local, -1 outside the loop */
    int32_t n_exit;
    int32_t *exit_target; /* exit k -> global target state */
    int32_t *exit_edge;   /* exit k -> global edge index */
    xgr_keybuf key;
    uint64_t hash;
} region;

static void region_free(region *R) {
    free(R->state);
    free(R->local);
    free(R->exit_target);
    free(R->exit_edge);
    XGR_VEC_FREE(R->key);
}

/* Per state of rule r (indexed from its start): the id of its strongly connected
 * component when that component is a loop (two states or more, or a self-edge), else -1.
 * Tarjan's algorithm, iterative, over the rule's byte and reference edges; computed once
 * per rule and grammar, so a state's first mask costs no pass over its whole rule. */
static int rule_loops(xgr_compiled *c, int32_t r, const int32_t **out) {
    int32_t *comp = atomic_load_explicit(&c->rule_loops[r], memory_order_acquire);
    if (comp) {
        *out = comp;
        return XGR_OK;
    }
    const xgr_fsm *f = c->fsm;
    int32_t s0 = f->rule_start[r], n = xgr_fsm_rule_end(f, r) - s0;
    comp = xgr_malloc(((size_t)n + 1) * sizeof *comp);
    int32_t *index = xgr_malloc(((size_t)n + 1) * sizeof *index);
    int32_t *low = xgr_malloc(((size_t)n + 1) * sizeof *low);
    int32_t *stack = xgr_malloc(((size_t)n + 1) * sizeof *stack);
    int32_t *call = xgr_malloc(((size_t)n + 1) * sizeof *call); /* DFS: state */
    int32_t *next = xgr_malloc(((size_t)n + 1) * sizeof *next); /* DFS: its next edge */
    uint8_t *on = xgr_calloc((size_t)n + 1, 1);
    int rc = comp && index && low && stack && call && next && on ? XGR_OK : XGR_ERR_NOMEM;
    for (int32_t i = 0; !rc && i < n; i++) index[i] = -1;
    int32_t counter = 0, sp = 0, n_comp = 0;
    for (int32_t root = 0; !rc && root < n; root++) {
        if (index[root] >= 0) continue;
        int32_t depth = 0;
        call[0] = root;
        next[0] = f->edge_begin[s0 + root];
        index[root] = low[root] = counter++;
        stack[sp++] = root;
        on[root] = 1;
        while (depth >= 0) {
            int32_t u = call[depth];
            if (next[depth] < f->edge_begin[s0 + u + 1]) {
                int32_t t = f->edges[next[depth]++].target - s0;
                if (index[t] < 0) {
                    index[t] = low[t] = counter++;
                    stack[sp++] = t;
                    on[t] = 1;
                    call[++depth] = t;
                    next[depth] = f->edge_begin[s0 + t];
                } else if (on[t] && index[t] < low[u]) {
                    low[u] = index[t];
                }
                continue;
            }
            if (low[u] == index[u]) { /* u roots a component: pop it */
                int32_t size = 0, w, self = 0;
                for (int32_t e = f->edge_begin[s0 + u]; e < f->edge_begin[s0 + u + 1]; e++)
                    self |= f->edges[e].target - s0 == u;
                int32_t first = sp;
                do {
                    w = stack[--sp];
                    on[w] = 0;
                    size++;
                } while (w != u);
                int32_t id = size > 1 || self ? n_comp++ : -1;
                for (int32_t k = sp; k < first; k++) comp[stack[k]] = id;
            }
            if (--depth >= 0 && low[u] < low[call[depth]]) low[call[depth]] = low[u];
        }
    }
    free(index);
    free(low);
    free(stack);
    free(call);
    free(next);
    free(on);
    if (rc) {
        free(comp);
        return rc;
    }
    int32_t *expected = NULL;
    if (atomic_compare_exchange_strong(&c->rule_loops[r], &expected, comp)) {
        atomic_fetch_add(&c->memory, ((size_t)n + 1) * sizeof *comp);
    } else {
        free(comp);
        comp = expected;
    }
    *out = comp;
    return XGR_OK;
}

/* Finds the loop of `state` (its strongly connected component within its rule) and
 * serialises it; returns 0 in *ok when there is none, or a state on it enters a
 * reference, or it has too many exits. */
static int region_find(xgr_compiled *c, int32_t state, region *R, int *ok) {
    const xgr_fsm *f = c->fsm;
    int32_t r = f->state_rule[state], s0 = f->rule_start[r], n = xgr_fsm_rule_end(f, r) - s0;
    const int32_t *comp = NULL;
    *ok = 0;
    if (f->rule_kind[r] != XGR_RULE_NORMAL) return XGR_OK;
    int rc = rule_loops(c, r, &comp);
    if (rc || comp[state - s0] < 0) return rc;
    int32_t id = comp[state - s0];
    int32_t *queue = xgr_malloc((size_t)n * sizeof *queue);
    int32_t *local = xgr_malloc((size_t)n * sizeof *local);
    if (!queue || !local) {
        free(queue);
        free(local);
        return XGR_ERR_NOMEM;
    }
    /* number the loop in BFS order from state over its own edges */
    for (int32_t i = 0; i < n; i++) local[i] = -1;
    int32_t nl = 0;
    local[state - s0] = nl;
    queue[nl++] = state - s0;
    for (int32_t qh = 0; qh < nl; qh++) {
        int32_t s = s0 + queue[qh];
        if (f->edge_begin[s + 1] > f->edge_begin[s] && f->edges[f->edge_begin[s + 1] - 1].ref >= 0)
            goto out; /* a loop state that enters a child rule: not a plain byte loop */
        for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++) {
            int32_t t = f->edges[e].target - s0;
            if (comp[t] == id && local[t] < 0) local[t] = nl, queue[nl++] = t;
        }
    }
    R->n = nl;
    R->state = xgr_malloc((size_t)nl * sizeof *R->state);
    if (!R->state) {
        rc = XGR_ERR_NOMEM;
        goto out;
    }
    for (int32_t i = 0; i < nl; i++) R->state[i] = s0 + queue[i];
    int32_t ne = 0;
    for (int32_t i = 0; i < nl; i++)
        for (int32_t e = f->edge_begin[R->state[i]]; e < f->edge_begin[R->state[i] + 1]; e++)
            ne += local[f->edges[e].target - s0] < 0;
    if (ne > RG_MAX_EXITS) goto out;
    R->exit_target = xgr_malloc(((size_t)ne + 1) * sizeof(int32_t));
    R->exit_edge = xgr_malloc(((size_t)ne + 1) * sizeof(int32_t));
    if (!R->exit_target || !R->exit_edge) {
        rc = XGR_ERR_NOMEM;
        goto out;
    }
    /* key: magic, size, then per state its finality and edges (lo, hi, local target or
     * nl + exit index) */
    if ((rc = xgr_keybuf_put32(&R->key, 0x324e4752u)) || (rc = xgr_keybuf_put32(&R->key, (uint32_t)nl)))
        goto out;
    for (int32_t i = 0; i < nl && !rc; i++) {
        int32_t s = R->state[i];
        rc = xgr_keybuf_put32(&R->key, (uint32_t)(f->edge_begin[s + 1] - f->edge_begin[s]) |
                                           (uint32_t)f->final[s] << 31);
        for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1] && !rc; e++) {
            const xgr_edge *ed = &f->edges[e];
            int32_t t = local[ed->target - s0], tag = t;
            if (t < 0) {
                R->exit_target[R->n_exit] = ed->target;
                R->exit_edge[R->n_exit] = e;
                tag = nl + R->n_exit++;
            }
            rc = xgr_keybuf_put32(&R->key, (uint32_t)ed->lo | (uint32_t)ed->hi << 8);
            if (!rc) rc = xgr_keybuf_put32(&R->key, (uint32_t)tag);
        }
    }
    if (rc) goto out;
    R->hash = xgr_hash_bytes(0x7265676e6c6f6f70ULL, R->key.data, R->key.len);
    *ok = 1;
out:
    R->local = local; /* freed with R */
    free(queue);
    return rc;
}

/* stay.h xgr_next_fn over the loop's byte table (exits and dead bytes: none). */
static int32_t tab_next(const void *ctx, int32_t s, uint8_t b) {
    return ((const int32_t *)ctx)[(size_t)s * 256 + b];
}

static int region_suffixes(const struct xgr_vocab *v, xgr_mask_entry *reg, const xgr_pop_list *pops);

/* The region entry: one pass over the sorted vocabulary on the loop alone. Uncertain
 * tokens are those that leave the loop with bytes left, and those that die inside it after
 * passing a final state; their depth list holds those pops, then for a leaving token
 * RG_EXIT, the depth after the exit byte and the exit index. */
static int region_classify(const struct xgr_vocab *v, const xgr_fsm *f, const region *R,
                           xgr_mask_entry **out) {
    int32_t n = R->n;
    int32_t *tab = xgr_malloc((size_t)n * 256 * sizeof *tab); /* >= 0 local, -1 dead, -2-k exit */
    int32_t *dstate = xgr_malloc(((size_t)v->max_token_len + 2) * sizeof *dstate);
    uint64_t *leave = xgr_malloc((size_t)n * 2 * sizeof *leave);
    uint64_t *acc = xgr_calloc((size_t)v->set_words + 1, sizeof *acc); /* by sorted position */
    uint64_t *scratch = xgr_malloc(((size_t)v->set_words + 1) * sizeof *scratch);
    xgr_pop_list pops = {0};
    int rc = XGR_OK;
    if (!tab || !dstate || !leave || !acc || !scratch) {
        rc = XGR_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < (size_t)n * 256; i++) tab[i] = -1;
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t s = R->state[i];
        for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++) {
            const xgr_edge *ed = &f->edges[e];
            int32_t t = -1;
            if (k < R->n_exit && R->exit_edge[k] == e)
                t = -2 - k++;
            else
                t = R->local[ed->target - f->rule_start[f->state_rule[s]]];
            for (int b = ed->lo; b <= ed->hi; b++) tab[(size_t)i * 256 + (size_t)b] = t;
        }
    }
    /* leave[2i..2i+1]: the folded set of bytes on which loop state i does not stay put
     * (vocab.h sorted_bytes): a token whose byte set misses it stays there to its end */
    for (int32_t i = 0; i < n; i++) {
        int stays = 0;
        leave[2 * i] = leave[2 * i + 1] = 0;
        for (int b = 0; b < 256; b++)
            if (tab[(size_t)i * 256 + (size_t)b] != i) {
                int bit = xgr_byte_fold((uint8_t)b);
                leave[2 * i + (bit >> 6)] |= (uint64_t)1 << (bit & 63);
            } else {
                stays = 1;
            }
        uint64_t ch = (uint64_t)1 << (XGR_FOLD_CHAR & 63);
        if (!(leave[2 * i + 1] & ch) && (!stays || !xgr_utf8_closed(i, n, tab_next, tab)))
            leave[2 * i + 1] |= ch;
    }
    /* tokens that stay put after their first byte: a first-byte range at a time */
    {
        const uint64_t *lv[256];
        xgr_stay_first(tab, leave, 0, 0, NULL, NULL, lv);
        xgr_stay_accept(v, lv, acc, scratch);
    }
    dstate[0] = 0;
    int32_t cur = 0; /* depths 0..cur hold the states of ptok's prefix */
    const uint8_t *ptok = NULL;
    uint32_t plen = 0;
    int skipped = 0;
    for (int32_t i = 0; i < v->n_sorted; i++) {
        if ((acc[i >> 6] >> (i & 63)) & 1) { /* accepted by its range: skip the run */
            if ((i = xgr_next_clear(acc, v->set_words, i)) >= v->n_sorted) break;
            skipped = 1;
        }
        uint32_t len;
        const uint8_t *tok = xgr_vocab_sorted_token(v, i, &len);
        const uint64_t *tb = v->sorted_bytes + 2 * (size_t)i;
        int32_t li = v->lcp[i];
        if (skipped && ptok) {
            uint32_t m2 = len < plen ? len : plen, q = 0;
            while (q < m2 && tok[q] == ptok[q]) q++;
            li = (int32_t)q;
        }
        skipped = 0;
        ptok = tok;
        plen = len;
        int32_t d = li < cur ? li : cur, x = 0;
        while ((uint32_t)d < len) {
            const uint64_t *lv = leave + 2 * dstate[d];
            if (!xgr_utf8_cont(tok[d]) && !((lv[0] & tb[0]) | (lv[1] & tb[1]))) {
                cur = d;
                d = (int32_t)len;
                goto accepted;
            }
            if ((x = tab[(size_t)dstate[d] * 256 + tok[d]]) < 0) break;
            dstate[++d] = x;
        }
        cur = d;
    accepted:
        if ((uint32_t)d == len) {
            acc[i >> 6] |= (uint64_t)1 << (i & 63);
            continue;
        }
        /* every following token with bytes 0..d dies or leaves here alike, with the same
         * pops (final loop states passed at depths 1..d) */
        int32_t end = xgr_vocab_prefix_end(v, i, tok, (uint32_t)d + 1), npop = 0;
        for (int32_t e = 1; e <= d; e++) npop += f->final[R->state[dstate[e]]];
        if (x <= -2 || npop) {
            for (int32_t j = i; j < end; j++) {
                uint32_t lj;
                xgr_vocab_sorted_token(v, j, &lj);
                if (x <= -2 && lj == (uint32_t)d + 1) { /* ends right after the exit byte */
                    acc[j >> 6] |= (uint64_t)1 << (j & 63);
                    continue;
                }
                for (int32_t e = 1; e <= d; e++)
                    if (f->final[R->state[dstate[e]]] && (XGR_VEC_PUSH(pops, j) || XGR_VEC_PUSH(pops, e)))
                        goto nomem;
                if (x <= -2 && (XGR_VEC_PUSH(pops, j) || XGR_VEC_PUSH(pops, (int32_t)RG_EXIT) ||
                                XGR_VEC_PUSH(pops, j) || XGR_VEC_PUSH(pops, d + 1) ||
                                XGR_VEC_PUSH(pops, j) || XGR_VEC_PUSH(pops, -2 - x)))
                    goto nomem;
            }
        }
        i = end - 1;
    }
    rc = xgr_mask_entry_from_bits(v, acc, &pops, out);
    if (!rc && (rc = region_suffixes(v, *out, &pops))) {
        xgr_mask_entry_release(*out);
        *out = NULL;
    }
    goto out;
nomem:
    rc = XGR_ERR_NOMEM;
out:
    free(tab);
    free(dstate);
    free(leave);
    free(acc);
    free(scratch);
    XGR_VEC_FREE(pops);
    return rc;
}

/* Target of `s` on byte b, or -1 (byte edges sorted by range, before ref edges). */
static int32_t step(const xgr_fsm *f, int32_t s, uint8_t b) {
    int32_t lo = f->edge_begin[s], hi = f->edge_begin[s + 1] - 1;
    while (lo <= hi) {
        int32_t mid = lo + (hi - lo) / 2;
        const xgr_edge *ed = &f->edges[mid];
        if (ed->ref >= 0 || b < ed->lo)
            hi = mid - 1;
        else if (b > ed->hi)
            lo = mid + 1;
        else
            return ed->target;
    }
    return -1;
}

/* Walks token bytes tok[e..len) on from exit target x, as a vocabulary pass over the whole
 * rule would have gone on: through the automaton alone for a reference-free rule; else
 * through the automaton while the walk is on states without reference edges (where it is
 * the only derivation), then through the Earley parser with the state it reached as the
 * outer item (rows and states shared with the previous token when it left through the same
 * exit, for their common bytes). pop[q] says whether the rule can end after q more bytes.
 * Returns the bytes walked before dying, or len - e. */
typedef struct {
    const xgr_fsm *f;
    xgr_parser *p; /* NULL: automaton walk */
    const uint8_t *flags;     /* compiled.h scannable: XGR_SCAN_LOOP states */
    const int32_t *ref_begin; /* compiled.h: per state, its first reference edge */
    int32_t x;     /* exit target of the kept prefix, -1 none */
    const uint8_t *prev;
    uint32_t prev_n, rows; /* previous suffix; depths 0..rows valid */
    int32_t sw;            /* depth where the parser took over, -1: automaton so far */
    int32_t *dstate;       /* automaton state at depths 0..rows (up to sw) */
    uint8_t *pop;
    uint32_t (*bset)[8];   /* per parser row from sw: the bytes its items can scan */
    int32_t bs_valid;      /* rows 0..bs_valid-1 of the parser have their bset */
} cont;

static int cont_walk(cont *w, int32_t x, const uint8_t *s, uint32_t n, uint32_t *walked) {
    const xgr_fsm *f = w->f;
    if (!w->p) {
        int32_t t = x;
        uint32_t q = 0;
        for (;; q++) {
            w->pop[q] = f->final[t];
            if (q == n || (t = step(f, t, s[q])) < 0) break;
        }
        *walked = q;
        return XGR_OK;
    }
    uint32_t q = 0;
    if (w->x == x) {
        uint32_t m = n < w->prev_n ? n : w->prev_n;
        while (q < m && q < w->rows && s[q] == w->prev[q]) q++;
        if (w->sw > (int32_t)q) w->sw = -1; /* back on the automaton's part */
    } else {
        w->x = x;
        w->sw = -1;
        w->dstate[0] = x;
        w->pop[0] = f->final[x];
    }
    uint32_t rows = q; /* depths 0..rows hold s's prefix */
    for (; q < n; q++) {
        rows = q;
        if (w->sw < 0) {
            int32_t t = w->dstate[q];
            if (w->ref_begin[t] == f->edge_begin[t + 1]) {
                int32_t t2 = step(f, t, s[q]);
                if (t2 < 0) break;
                w->dstate[q + 1] = t2;
                w->pop[q + 1] = f->final[t2];
                rows = q + 1;
                continue;
            }
            xgr_item it = {t, XGR_ORIGIN_OUTER, 0, 0};
            int rc = xgr_parser_start(w->p, it);
            if (rc) {
                w->x = -1;
                return rc;
            }
            w->sw = (int32_t)q;
            w->bs_valid = 0;
            if (w->p->popped) w->pop[q] = 1; /* ends here through empty references */
        }
        int32_t r = (int32_t)q - w->sw;
        xgr_parser_truncate(w->p, r + 1);
        /* A byte that no item of the row can scan dies here: the row's bytes are collected
         * once, and a suffix that reaches the row with another byte is refused without a
         * scan of the row (nor a look for a loop to stay in: no item scans the byte). After
         * a string's closing quote in a long object the row holds an item per later
         * optional property, and most suffixes (`")`, `".`, ...) die on their first byte:
         * 130 string properties took ~640 parser steps of ~130 items each per property. */
        if (r >= w->bs_valid) {
            xgr_parser_next_bytes(w->p, w->bset[r]);
            w->bs_valid = r + 1;
        }
        if (!((w->bset[r][s[q] >> 5] >> (s[q] & 31)) & 1u)) break;
        if (xgr_row_stays(w->p, r, w->flags, s + q, n - q)) {
            q = n; /* the rest stays in a loop of some item (a string body) */
            break;
        }
        int alive;
        int rc = xgr_parser_step(w->p, s[q], &alive);
        if (rc) {
            w->x = -1;
            return rc;
        }
        if (w->bs_valid > r + 1) w->bs_valid = r + 1; /* row r + 1 is new */
        if (!alive) break;
        rows = q + 1;
        w->pop[q + 1] = (uint8_t)w->p->popped;
    }
    w->prev = s;
    w->prev_n = n;
    w->rows = rows;
    *walked = q;
    return XGR_OK;
}

/* A pair's place in the order: its exit, then its first byte (none first). */
static inline size_t sfx_key(const xgr_sfx_set *set, int32_t j) {
    size_t first = set->off[j + 1] > set->off[j] ? (size_t)set->bytes[set->off[j]] + 1 : 0;
    return (size_t)set->key[j] * 257 + first;
}

/* Groups the leaving tokens of region entry `reg` by (exit, bytes after the exit), so each
 * grammar walks every distinct suffix once and never reads the tokens' bytes, which lie
 * scattered over the vocabulary (establishes reg->sfx; its memory is added to reg->bytes,
 * so call it before the entry is shared). `pops` is the (sorted position, depth) list reg
 * was built from: the bytes are read in sorted order, once each, and deduplicated through
 * a hash table; the distinct suffixes are then ordered by exit and first byte. */
static int region_suffixes(const struct xgr_vocab *v, xgr_mask_entry *reg, const xgr_pop_list *pops) {
    int32_t nu = reg->n_uncertain;
    xgr_sfx_set set;
    xgr_region_sfx *S = xgr_calloc(1, sizeof *S);
    int32_t *rank = xgr_malloc(((size_t)nu + 1) * sizeof *rank);
    int rc = xgr_sfx_set_init(&set, nu);
    if (!rc && (!S || !rank || !(S->group = xgr_malloc(((size_t)nu + 1) * sizeof *S->group))))
        rc = XGR_ERR_NOMEM;
    for (int32_t i = 0; i < nu && !rc; i++) {
        int32_t k = reg->pop_begin[i], k1 = reg->pop_begin[i + 1];
        S->group[i] = -1;
        while (k < k1 && reg->pop_depth[k] != RG_EXIT) k++;
        if (k == k1) continue; /* died inside the loop */
        uint32_t len, d = reg->pop_depth[k + 1];
        const uint8_t *tok = xgr_vocab_sorted_token(v, pops->data[2 * (size_t)k], &len);
        if ((S->group[i] = xgr_sfx_set_add(&set, reg->pop_depth[k + 2], tok + d, len - d)) < 0)
            rc = XGR_ERR_NOMEM;
    }
    /* ordered by exit and first byte (a counting sort), so suffixes that share a walk's
     * first steps come one after another (cont_walk reuses them) */
    int32_t ng = set.n, max_k = 0;
    for (int32_t j = 0; j < ng; j++) max_k = set.key[j] > max_k ? set.key[j] : max_k;
    size_t nkeys = ((size_t)max_k + 1) * 257;
    int32_t *cnt = rc ? NULL : xgr_calloc(nkeys + 1, sizeof *cnt);
    if (!rc && (!cnt || !(S->exit = xgr_malloc(((size_t)ng + 1) * sizeof *S->exit)) ||
                !(S->off = xgr_malloc(((size_t)ng + 1) * sizeof *S->off)) ||
                !(S->bytes = xgr_malloc(set.used + 1))))
        rc = XGR_ERR_NOMEM;
    if (rc) {
        free(cnt);
        xgr_region_sfx_free(S);
        goto out;
    }
    for (int32_t j = 0; j < ng; j++) cnt[sfx_key(&set, j) + 1]++;
    for (size_t q = 0; q < nkeys; q++) cnt[q + 1] += cnt[q];
    for (int32_t j = 0; j < ng; j++) rank[j] = cnt[sfx_key(&set, j)]++;
    free(cnt);
    for (int32_t j = 0; j < ng; j++) S->exit[rank[j]] = j; /* temporarily: rank -> pair */
    uint32_t pos = 0;
    for (int32_t r = 0; r < ng; r++) {
        int32_t j = S->exit[r];
        uint32_t n = set.off[j + 1] - set.off[j];
        S->exit[r] = set.key[j];
        S->off[r] = pos;
        if (n) memcpy(S->bytes + pos, set.bytes + set.off[j], n);
        pos += n;
    }
    S->off[ng] = pos;
    for (int32_t i = 0; i < nu; i++)
        if (S->group[i] >= 0) S->group[i] = rank[S->group[i]];
    S->n = ng;
    S->mem = sizeof *S + ((size_t)nu + 1) * 4 + ((size_t)ng + 1) * 8 + set.used + 1;
    reg->sfx = S;
    reg->bytes += S->mem;
out:
    free(rank);
    xgr_sfx_set_free(&set);
    return rc;
}

/* The finished entry's suffix groups (compiled.h psfx), one per (region group g, depth q
 * after its exit where the rule ends): bytes[off[j] ..] = the bytes after that pop, a tail
 * of g's suffix. `group` is allocated for region_finish to fill (n_unc tokens at most). */
static xgr_region_sfx *pop_groups(const xgr_region_sfx *S, const uint16_t *gq, const int32_t *gpb,
                                  int32_t nq, int32_t n_unc) {
    xgr_region_sfx *P = xgr_calloc(1, sizeof *P);
    size_t total = 0;
    for (int32_t g = 0; P && g < S->n; g++)
        for (int32_t j = gpb[g]; j < gpb[g + 1]; j++) total += S->off[g + 1] - S->off[g] - gq[j];
    if (!P || !(P->group = xgr_malloc(((size_t)n_unc + 1) * sizeof *P->group)) ||
        !(P->off = xgr_malloc(((size_t)nq + 1) * sizeof *P->off)) || !(P->bytes = xgr_malloc(total + 1))) {
        xgr_region_sfx_free(P);
        return NULL;
    }
    uint32_t pos = 0;
    for (int32_t g = 0; g < S->n; g++)
        for (int32_t j = gpb[g]; j < gpb[g + 1]; j++) {
            uint32_t n = S->off[g + 1] - S->off[g] - gq[j];
            P->off[j] = pos;
            memcpy(P->bytes + pos, S->bytes + S->off[g] + gq[j], n);
            pos += n;
        }
    P->off[nq] = pos;
    P->n = nq;
    P->mem = sizeof *P + ((size_t)n_unc + 1) * 4 + ((size_t)nq + 1) * 4 + total + 1;
    return P;
}

/* This grammar's entry from the region entry: the leaving tokens walked on from their
 * exit targets, one walk per distinct suffix (reg->sfx), with the pops (the rule ends with
 * bytes left) of those that die, as a vocabulary pass over the whole rule would have
 * recorded them. */
static int region_finish(const xgr_compiled *c, xgr_parser *p, int flat, const region *R,
                         const xgr_mask_entry *reg, xgr_mask_entry **out) {
    const struct xgr_vocab *v = c->vocab;
    const xgr_region_sfx *S = reg->sfx;
    int32_t nu = reg->n_uncertain, ng = S->n;
    uint8_t *verdict = xgr_malloc((size_t)nu + 1);
    XGR_VEC(uint16_t) depths = {0};
    XGR_VEC(uint16_t) gq = {0}; /* per group: the depths after its exit where the rule ends */
    int32_t *dbeg = xgr_malloc(((size_t)nu + 1) * sizeof *dbeg);
    int32_t *gwalk = xgr_malloc(((size_t)ng + 1) * sizeof *gwalk); /* -1: walked to the end */
    int32_t *gpb = xgr_malloc(((size_t)ng + 1) * sizeof *gpb);
    xgr_mask_entry *e = xgr_calloc(1, sizeof *e);
    cont w = {c->fsm, flat ? NULL : p, c->scannable, c->ref_begin, -1, NULL, 0, 0, -1,
              xgr_malloc(((size_t)v->max_token_len + 2) * sizeof(int32_t)),
              xgr_malloc((size_t)v->max_token_len + 2),
              xgr_malloc(((size_t)v->max_token_len + 2) * sizeof(uint32_t[8])), 0};
    int rc = XGR_OK;
    if (!verdict || !dbeg || !gwalk || !gpb || !e || !w.pop || !w.dstate || !w.bset) goto nomem;
    for (int32_t g = 0; g < ng; g++) {
        uint32_t n = S->off[g + 1] - S->off[g], walked = 0;
        gpb[g] = (int32_t)gq.len;
        if ((rc = cont_walk(&w, R->exit_target[S->exit[g]], S->bytes + S->off[g], n, &walked)))
            goto out;
        gwalk[g] = walked == n ? -1 : (int32_t)walked;
        if (walked == n) continue;
        for (uint32_t q = 0; q <= walked; q++)
            if (w.pop[q] && XGR_VEC_PUSH(gq, (uint16_t)q)) goto nomem;
    }
    gpb[ng] = (int32_t)gq.len;
    int32_t n_acc = 0, n_unc = 0, n_rej = 0;
    for (int32_t i = 0; i < nu; i++) {
        int32_t k = reg->pop_begin[i], k1 = reg->pop_begin[i + 1], g = S->group[i];
        dbeg[i] = (int32_t)depths.len;
        for (; k < k1 && reg->pop_depth[k] != RG_EXIT; k++) /* pops inside the loop */
            if (XGR_VEC_PUSH(depths, reg->pop_depth[k])) goto nomem;
        if (g < 0) { /* died inside the loop, after a final state */
            verdict[i] = XGR_V_UNCERTAIN;
            n_unc++;
            continue;
        }
        if (gwalk[g] < 0) {
            depths.len = (size_t)dbeg[i];
            verdict[i] = XGR_V_ACCEPT;
            n_acc++;
            continue;
        }
        uint32_t d = reg->pop_depth[k + 1];
        for (int32_t j = gpb[g]; j < gpb[g + 1]; j++) {
            /* depths beyond the 15-bit field keep the token uncertain, as classify does */
            uint32_t at = d + gq.data[j];
            uint16_t rec = (uint16_t)(at < 0x8000u ? at : 0x8000u | (at & 0x7fffu));
            if (XGR_VEC_PUSH(depths, rec)) goto nomem;
        }
        verdict[i] = depths.len > (size_t)dbeg[i] ? XGR_V_UNCERTAIN : XGR_V_REJECT;
        n_unc += verdict[i] == XGR_V_UNCERTAIN;
        n_rej += verdict[i] == XGR_V_REJECT;
    }
    dbeg[nu] = (int32_t)depths.len;
    atomic_init(&e->refcount, 1);
    e->form = reg->form;
    e->n_accepted = reg->n_accepted + n_acc;
    size_t rw = (size_t)v->row_words, add = e->form == XGR_MASK_ACCEPTED_LIST ? (size_t)n_acc
                                                   : e->form == XGR_MASK_REJECTED_LIST ? (size_t)n_rej
                                                                                        : 0;
    if (e->form == XGR_MASK_BITSET) {
        if (!(e->bits = xgr_malloc(rw * sizeof *e->bits))) goto nomem;
        memcpy(e->bits, reg->bits, rw * sizeof *e->bits);
    } else {
        e->n_ids = reg->n_ids + (int32_t)add;
        if (!(e->ids = xgr_malloc(((size_t)e->n_ids + 1) * sizeof *e->ids))) goto nomem;
        memcpy(e->ids, reg->ids, (size_t)reg->n_ids * sizeof *e->ids);
    }
    e->n_uncertain = n_unc;
    e->uncertain = xgr_malloc(((size_t)n_unc + 1) * sizeof *e->uncertain);
    e->pop_begin = xgr_malloc(((size_t)n_unc + 1) * sizeof *e->pop_begin);
    e->pop_depth = xgr_malloc((depths.len + 1) * sizeof *e->pop_depth);
    if (!e->uncertain || !e->pop_begin || !e->pop_depth) goto nomem;
    int32_t ki = reg->n_ids, ku = 0;
    size_t np = 0;
    xgr_region_sfx *P = n_unc >= XGR_PSFX_MIN ? pop_groups(S, gq.data, gpb, (int32_t)gq.len, n_unc) : NULL;
    if (n_unc >= XGR_PSFX_MIN && !P) goto nomem;
    e->psfx = P;
    for (int32_t i = 0; i < nu; i++) {
        int32_t id = reg->uncertain[i];
        if (verdict[i] == XGR_V_UNCERTAIN) {
            /* a single pop, after the exit: the bytes after it are group gpb[g]'s */
            int32_t g = S->group[i];
            if (P)
                P->group[ku] = g >= 0 && gpb[g + 1] - gpb[g] == 1 && dbeg[i + 1] - dbeg[i] == 1 &&
                                       !(depths.data[dbeg[i]] & 0x8000u)
                                   ? gpb[g]
                                   : -1;
            e->pop_begin[ku] = (int32_t)np;
            e->uncertain[ku++] = id;
            for (int32_t q = dbeg[i]; q < dbeg[i + 1]; q++) e->pop_depth[np++] = depths.data[q];
        } else if (verdict[i] == XGR_V_ACCEPT) {
            if (e->form == XGR_MASK_BITSET) e->bits[id >> 5] |= 1u << (id & 31);
            if (e->form == XGR_MASK_ACCEPTED_LIST) e->ids[ki++] = id;
        } else if (e->form == XGR_MASK_REJECTED_LIST) {
            e->ids[ki++] = id;
        }
    }
    e->pop_begin[ku] = (int32_t)np;
    /* The lists only grew: a list now larger than a bitset becomes one, as a pass over the
     * whole rule would have chosen (a bitset is also the cheapest to apply: one OR). */
    if (e->form != XGR_MASK_BITSET && (size_t)e->n_ids > rw) {
        uint32_t *bits = xgr_calloc(rw, sizeof *bits);
        if (!bits) goto nomem;
        if (e->form == XGR_MASK_REJECTED_LIST) {
            memcpy(bits, v->text_bits, rw * sizeof *bits);
            for (int32_t k = 0; k < e->n_ids; k++) bits[e->ids[k] >> 5] &= ~(1u << (e->ids[k] & 31));
            for (int32_t k = 0; k < e->n_uncertain; k++)
                bits[e->uncertain[k] >> 5] &= ~(1u << (e->uncertain[k] & 31));
        } else {
            for (int32_t k = 0; k < e->n_ids; k++) bits[e->ids[k] >> 5] |= 1u << (e->ids[k] & 31);
        }
        free(e->ids);
        e->ids = NULL;
        e->n_ids = 0;
        e->bits = bits;
        e->form = XGR_MASK_BITSET;
    }
    e->bytes = sizeof *e + ((size_t)n_unc + 1) * 8 + np * 2 +
               (e->form == XGR_MASK_BITSET ? rw * 4 : ((size_t)e->n_ids + 1) * 4) + (P ? P->mem : 0);
    *out = e;
    e = NULL;
    goto out;
nomem:
    rc = XGR_ERR_NOMEM;
out:
    xgr_mask_entry_free(e);
    free(verdict);
    free(dbeg);
    free(gwalk);
    free(gpb);
    XGR_VEC_FREE(gq);
    free(w.pop);
    free(w.dstate);
    free(w.bset);
    XGR_VEC_FREE(depths);
    return rc;
}

int xgr_region_on_loop(xgr_compiled *c, int32_t state) {
    int32_t r = c->fsm->state_rule[state];
    const int32_t *comp = NULL;
    int rc = rule_loops(c, r, &comp);
    if (rc) return rc;
    return comp[state - c->fsm->rule_start[r]] >= 0;
}

int xgr_region_raw_entry(xgr_compiled *c, xgr_parser *p, int32_t state, xgr_mask_entry **out) {
    *out = NULL;
    if (c->vocab->max_token_len >= 0x7fff) return XGR_OK; /* exit depths are 16-bit */
    region R;
    memset(&R, 0, sizeof R);
    int ok, rc = region_find(c, state, &R, &ok);
    if (rc || !ok) {
        region_free(&R);
        return rc;
    }
    const struct xgr_vocab *v = c->vocab;
    /* A loop that many tokens leave at their first byte (a digit run followed by optional
     * whitespace: every token that starts with a space) costs a per-token record for each
     * in the shared entry and a walk from the exit in every grammar; a pass over the rule
     * settles most of them a prefix range at a time instead. The count of tokens whose
     * first byte is an exit byte of some loop state estimates how many leave. Past about a
     * thousand (a digit run's exits to ",", "}" and "." at Llama-3's vocabulary: 8k
     * tokens), the pass is cheaper than the shared entry on a miss (0.4 ms) and about
     * even on a hit; the floor keeps small vocabularies on the shared entry. */
    int64_t leaving = 0;
    for (int32_t k = 0; k < R.n_exit; k++) {
        const xgr_edge *ed = &c->fsm->edges[R.exit_edge[k]];
        for (int b = ed->lo; b <= ed->hi; b++) leaving += v->first_byte_count[b];
    }
    if (leaving > v->n_sorted / 128 && leaving > 256) {
        region_free(&R);
        return XGR_OK;
    }
    xgr_mask_entry *reg = xgr_gcache_lookup(v->fingerprint, R.hash, R.key.data, R.key.len, RG_LOCAL);
    if (!reg) {
        if ((rc = region_classify(v, c->fsm, &R, &reg))) {
            xgr_mask_entry_release(reg);
            region_free(&R);
            return rc;
        }
        xgr_mask_entry *shared = xgr_gcache_insert(v->fingerprint, R.hash, R.key.data, R.key.len, RG_LOCAL, reg);
        if (shared) {
            xgr_mask_entry_release(reg);
            reg = shared;
        }
    }
    rc = region_finish(c, p, c->rule_flat[c->fsm->state_rule[state]], &R, reg, out);
    xgr_mask_entry_release(reg);
    region_free(&R);
    return rc;
}
