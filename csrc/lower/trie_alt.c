/* Finite alternations built directly as a minimal acyclic DFA.
 *
 * A tool-call group ("name1>" R1 "</function>" | "name2>" R2 "</function>" | ...), the
 * tag alternation of a chat format (Harmony's headers, with their special tokens spelled
 * as ("<|channel|>" | Token) alternatives) and a large enum are new in nearly every
 * request, so the automaton memo cannot help them, and the subset construction plus
 * minimisation cost milliseconds for a hundred tools. Their language is finite over bytes
 * and references, so the minimal DFA can be built in linear time instead: each
 * alternative is expanded into words over bytes and references (a nested alternation of
 * such words multiplies them, within bounds), the sorted words form a trie, and every
 * state is hash-consed on (final, outgoing edges) bottom-up, the classic register
 * construction for acyclic automata. References stay references (never inlined), which
 * the Earley parser handles like any other ref edge; so an alternation referencing a rule
 * the general path would inline and whose first bytes are wide (a JSON string character,
 * as in a trie of property names with additional properties) is left to the general path
 * (inlines_wide), unless a TagDispatch trigger hands over to it.
 *
 * A special token spelled as text is ("<|channel|>" | Token) (front/token_spell.c), so a
 * Harmony header with four of them would expand into 16 words. Such a small choice of
 * byte strings with distinct first bytes is one symbol instead (a *choice*, identified by
 * its content): the trie is built over bytes, references and choices, and each choice edge
 * is then replaced by its strings, which stays deterministic unless a state also reads one
 * of their first bytes; only then are the choices expanded into words after all. */
#include "lower_internal.h"

/* Below this many alternatives the general path (memoised across grammars, and able to
 * inline small referenced rules) is as fast, except for the rule a TagDispatch trigger
 * hands over to: a tool set's group, new in nearly every request, which the memo misses. */
#define TRIE_MIN_ALTS 8
/* Bounds of the expansion: words per top-level alternative, words, symbols, word length
 * (the trie recursion goes as deep as a shared prefix). */
#define TRIE_MAX_WORDS_PER_ALT 64
#define TRIE_MAX_WORDS ((size_t)1 << 16)
#define TRIE_MAX_SYMS ((size_t)1 << 22)
#define TRIE_MAX_LEN 2048
/* A word symbol: a byte (0..255), or TRIE_REF + a rule id (IR while expanding, output
 * rule once resolved), so bytes sort before references as fsm.h orders edges. */
#define TRIE_REF 256
/* Choices: symbol -1 - k for choice k (sorting before bytes); on an edge, ref CHOICE_REF(k). */
#define CHOICE_MAX_KIDS 8
#define CHOICE_REF(k) (-2 - (k))

/* Words: word k is sym[off[k] .. off[k + 1]). */
typedef struct {
    XGR_VEC(int32_t) sym;
    XGR_VEC(size_t) off; /* n_words + 1 */
} words;

static void words_free(words *w) {
    XGR_VEC_FREE(w->sym);
    XGR_VEC_FREE(w->off);
}

static size_t n_words(const words *w) { return w->off.len ? w->off.len - 1 : 0; }

/* Replaces w by every word of w followed by the symbols s[0..n). */
static int words_append(words *w, const int32_t *s, size_t n) {
    size_t nw = n_words(w), old = w->sym.len;
    if (old + nw * n > TRIE_MAX_SYMS) return 1;
    if (XGR_VEC_RESERVE(w->sym, old + nw * n + 1)) return XGR_ERR_NOMEM;
    /* back to front, so each word moves right by k * n without overwriting its source */
    for (size_t k = nw; k-- > 0;) {
        size_t a = w->off.data[k], b = w->off.data[k + 1];
        if (b - a + n > TRIE_MAX_LEN) return 1;
        memmove(w->sym.data + a + k * n, w->sym.data + a, (b - a) * sizeof(int32_t));
        memcpy(w->sym.data + b + k * n, s, n * sizeof(int32_t));
    }
    for (size_t k = 1; k <= nw; k++) w->off.data[k] += k * n;
    w->sym.len = old + nw * n;
    return XGR_OK;
}

/* Appends every word of `src` to `dst`; returns 1 past max_words or the symbol bound. */
static int words_concat(words *dst, const words *src, size_t max_words) {
    size_t base = dst->sym.len, np = n_words(src);
    if (n_words(dst) + np > max_words || base + src->sym.len > TRIE_MAX_SYMS) return 1;
    if (XGR_VEC_RESERVE(dst->sym, base + src->sym.len + 1) ||
        XGR_VEC_RESERVE(dst->off, dst->off.len + np + 1))
        return XGR_ERR_NOMEM;
    if (src->sym.len) memcpy(dst->sym.data + base, src->sym.data, src->sym.len * sizeof(int32_t));
    dst->sym.len = base + src->sym.len;
    if (!dst->off.len) dst->off.data[dst->off.len++] = 0;
    for (size_t k = 1; k <= np; k++) dst->off.data[dst->off.len++] = base + src->off.data[k];
    return XGR_OK;
}

/* The distinct choices met while expanding one rule: a representative IR node each. */
typedef XGR_VEC(int32_t) choice_tab;

/* The node a chain of one-element sequences wraps. */
static int32_t unwrap_seq(const xgr_grammar *g, int32_t node) {
    while (g->nodes.data[node].kind == XGR_NODE_SEQ && g->nodes.data[node].count == 1)
        node = g->kids.data[g->nodes.data[node].off];
    return node;
}

/* The BYTES node an alternative is (through one-element sequences), or -1. */
static int32_t bytes_kid(const xgr_grammar *g, int32_t node) {
    node = unwrap_seq(g, node);
    return g->nodes.data[node].kind == XGR_NODE_BYTES && g->nodes.data[node].count > 0 ? node : -1;
}

/* Is ALT node `n` a choice: a few non-empty byte strings whose first bytes differ (so
 * none is a prefix of another, and their paths from one state never meet early)? */
static int is_choice(const xgr_grammar *g, const xgr_node *n) {
    if (n->count < 2 || n->count > CHOICE_MAX_KIDS) return 0;
    uint32_t seen[8] = {0};
    for (int32_t i = 0; i < n->count; i++) {
        int32_t k = bytes_kid(g, g->kids.data[n->off + i]);
        if (k < 0) return 0;
        uint8_t b = g->bytes.data[g->nodes.data[k].off];
        if (seen[b >> 5] >> (b & 31) & 1) return 0;
        seen[b >> 5] |= 1u << (b & 31);
    }
    return 1;
}

/* Do two choice nodes spell the same strings in the same order? */
static int same_choice(const xgr_grammar *g, const xgr_node *a, const xgr_node *b) {
    if (a->count != b->count) return 0;
    for (int32_t i = 0; i < a->count; i++) {
        const xgr_node *x = &g->nodes.data[bytes_kid(g, g->kids.data[a->off + i])];
        const xgr_node *y = &g->nodes.data[bytes_kid(g, g->kids.data[b->off + i])];
        if (x->count != y->count || memcmp(g->bytes.data + x->off, g->bytes.data + y->off, (size_t)x->count))
            return 0;
    }
    return 1;
}

/* The choice id of ALT node `node` (registered in ct if new). */
static int choice_id(const xgr_grammar *g, choice_tab *ct, int32_t node, int32_t *out) {
    const xgr_node *n = &g->nodes.data[node];
    for (size_t k = 0; k < ct->len; k++)
        if (same_choice(g, &g->nodes.data[ct->data[k]], n)) {
            *out = (int32_t)k;
            return XGR_OK;
        }
    if (XGR_VEC_PUSH(*ct, node)) return XGR_ERR_NOMEM;
    *out = (int32_t)ct->len - 1;
    return XGR_OK;
}

/* Replaces w by w followed by the language of IR node `node`; returns 1 (and leaves w
 * undefined) when the node is not a finite alternation of bytes and references or the
 * expansion exceeds its bounds. With ct, a choice becomes one symbol (registered in ct).
 * No side effects on the lowering context. */
static int expand(const lw_ctx *c, choice_tab *ct, int32_t node, words *w, int depth) {
    const xgr_grammar *g = c->g;
    const xgr_node *n = &g->nodes.data[node];
    if (depth > 64) return 1;
    switch (n->kind) {
    case XGR_NODE_EMPTY:
        return XGR_OK;
    case XGR_NODE_BYTES: {
        int32_t buf[64];
        for (int32_t i = 0; i < n->count; i += 64) {
            int32_t m = n->count - i < 64 ? n->count - i : 64;
            for (int32_t k = 0; k < m; k++) buf[k] = g->bytes.data[n->off + i + k];
            int rc = words_append(w, buf, (size_t)m);
            if (rc) return rc;
        }
        return XGR_OK;
    }
    case XGR_NODE_REF: {
        if (!(c->rflags[n->a] & RF_PROD)) return 1;
        if (!(c->rflags[n->a] & RF_NE)) return XGR_OK; /* derives only "": no edge (nfa.c) */
        int32_t sym = TRIE_REF + n->a;
        return words_append(w, &sym, 1);
    }
    case XGR_NODE_SEQ:
        for (int32_t i = 0; i < n->count; i++) {
            int rc = expand(c, ct, g->kids.data[n->off + i], w, depth + 1);
            if (rc) return rc;
        }
        return XGR_OK;
    case XGR_NODE_ALT: {
        if (ct && is_choice(g, n)) {
            int32_t k;
            int rc = choice_id(g, ct, node, &k);
            if (rc) return rc;
            k = -1 - k;
            return words_append(w, &k, 1);
        }
        words out = {0}, part = {0};
        int rc = XGR_OK;
        for (int32_t i = 0; i < n->count && !rc; i++) {
            part.sym.len = part.off.len = 0;
            if (XGR_VEC_RESERVE(part.sym, w->sym.len + 1) || XGR_VEC_RESERVE(part.off, w->off.len)) {
                rc = XGR_ERR_NOMEM;
                break;
            }
            if (w->sym.len) memcpy(part.sym.data, w->sym.data, w->sym.len * sizeof(int32_t));
            if (w->off.len) memcpy(part.off.data, w->off.data, w->off.len * sizeof(size_t));
            part.sym.len = w->sym.len;
            part.off.len = w->off.len;
            if ((rc = expand(c, ct, g->kids.data[n->off + i], &part, depth + 1))) break;
            rc = words_concat(&out, &part, TRIE_MAX_WORDS);
        }
        words_free(&part);
        if (rc) {
            words_free(&out);
            return rc;
        }
        words_free(w);
        *w = out;
        return XGR_OK;
    }
    default:
        return 1;
    }
}

typedef struct {
    lw_ctx *c;
    lw_dfa *d;         /* states in creation order; renumbered at the end */
    int64_t budget;
    int32_t *table;    /* open addressing over state ids, -1 empty */
    XGR_VEC(uint64_t) hashes; /* per state */
    size_t cap;
    XGR_VEC(xgr_edge) stack; /* outgoing edges of the trie nodes being built, LIFO */
} trie_ws;

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t state_hash(uint8_t final, const xgr_edge *e, int32_t n) {
    uint64_t h = mix(0x51ed27, final);
    for (int32_t i = 0; i < n; i++)
        h = mix(mix(mix(h, (uint64_t)(uint32_t)e[i].ref), (uint64_t)e[i].lo << 8 | e[i].hi),
                (uint64_t)(uint32_t)e[i].target);
    return h;
}

static int same_state(const lw_dfa *d, int32_t s, uint8_t final, const xgr_edge *e, int32_t n) {
    if (d->final.data[s] != final || d->ebeg.data[s + 1] - d->ebeg.data[s] != n) return 0;
    if (!n) return 1; /* (the edge array may not exist yet) */
    const xgr_edge *f = d->edges.data + d->ebeg.data[s];
    for (int32_t i = 0; i < n; i++)
        if (f[i].ref != e[i].ref || f[i].lo != e[i].lo || f[i].hi != e[i].hi ||
            f[i].target != e[i].target)
            return 0;
    return 1;
}

static int grow_table(trie_ws *w) {
    size_t cap = w->cap ? w->cap * 2 : 1024;
    int32_t *t = xgr_malloc(cap * sizeof *t);
    if (!t) return XGR_ERR_NOMEM;
    memset(t, 0xff, cap * sizeof *t);
    for (int32_t s = 0; s < w->d->n; s++) {
        size_t j = w->hashes.data[s] & (cap - 1);
        while (t[j] >= 0) j = (j + 1) & (cap - 1);
        t[j] = s;
    }
    free(w->table);
    w->table = t;
    w->cap = cap;
    return XGR_OK;
}

/* The state with these edges (sorted: bytes by lo, then refs), created unless an equal
 * one exists; its successors must already be registered. */
static int reg(trie_ws *w, uint8_t final, const xgr_edge *e, int32_t n, int32_t *out) {
    lw_dfa *d = w->d;
    uint64_t h = state_hash(final, e, n);
    if ((size_t)d->n * 2 + 2 > w->cap && grow_table(w)) return XGR_ERR_NOMEM;
    size_t j = h & (w->cap - 1);
    for (; w->table[j] >= 0; j = (j + 1) & (w->cap - 1)) {
        int32_t s = w->table[j];
        if (w->hashes.data[s] == h && same_state(d, s, final, e, n)) {
            *out = s;
            return XGR_OK;
        }
    }
    if (d->n >= w->budget)
        return xgr_fail(XGR_ERR_LIMIT, "rule '%s': more than %lld states",
                        w->c->orules.data[w->c->cur].name, (long long)w->budget);
    int32_t s = d->n;
    if (XGR_VEC_RESERVE(d->final, (size_t)s + 1) || XGR_VEC_RESERVE(d->ebeg, (size_t)s + 2) ||
        XGR_VEC_RESERVE(d->edges, d->edges.len + (size_t)n) || XGR_VEC_PUSH(w->hashes, h))
        return XGR_ERR_NOMEM;
    d->final.data[s] = final;
    d->final.len = (size_t)s + 1;
    if (s == 0) d->ebeg.data[0] = 0;
    if (n) memcpy(d->edges.data + d->edges.len, e, (size_t)n * sizeof *e);
    d->edges.len += (size_t)n;
    d->ebeg.data[s + 1] = (int32_t)d->edges.len;
    d->ebeg.len = (size_t)s + 2;
    d->n = s + 1;
    w->table[j] = s;
    *out = s;
    return XGR_OK;
}

static int reg1(trie_ws *w, int32_t ref, uint8_t ch, int32_t target, int32_t *out) {
    xgr_edge e = {target, ref, ch, ch};
    return reg(w, 0, &e, 1, out);
}

typedef struct {
    const words *w;
    int32_t *order; /* word indices, sorted */
    int32_t final_state;
} trie_in;

static int cmp_words(const words *w, int32_t x, int32_t y) {
    const int32_t *a = w->sym.data + w->off.data[x], *b = w->sym.data + w->off.data[y];
    size_t la = w->off.data[x + 1] - w->off.data[x], lb = w->off.data[y + 1] - w->off.data[y];
    for (size_t i = 0; i < la && i < lb; i++)
        if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
    return (la > lb) - (la < lb);
}

static int cmp_words_ctx(const void *ctx, int32_t x, int32_t y) { return cmp_words(ctx, x, y); }

static int32_t word_len(const words *w, int32_t k) {
    return (int32_t)(w->off.data[k + 1] - w->off.data[k]);
}

static int32_t word_sym(const words *w, int32_t k, int32_t i) { return w->sym.data[w->off.data[k] + (size_t)i]; }

/* The edge reading word symbol `sym` into `target`. */
static xgr_edge sym_edge(int32_t sym, int32_t target) {
    if (sym < 0) return (xgr_edge){target, CHOICE_REF(-1 - sym), 0, 0};
    if (sym >= TRIE_REF) return (xgr_edge){target, sym - TRIE_REF, 0, 0};
    return (xgr_edge){target, -1, (uint8_t)sym, (uint8_t)sym};
}

/* Adds the edge on `sym` to the node whose edges start at stack index `base`. */
static int push_edge(trie_ws *w, size_t base, int32_t sym, int32_t child) {
    xgr_edge *last = w->stack.len > base ? &w->stack.data[w->stack.len - 1] : NULL;
    if (sym >= 0 && sym < TRIE_REF && last && last->ref == -1 && last->target == child &&
        last->hi + 1 == sym) {
        last->hi = (uint8_t)sym; /* adjacent bytes to the same state: one range (fsm.h) */
        return XGR_OK;
    }
    return XGR_VEC_PUSH(w->stack, sym_edge(sym, child)) ? XGR_ERR_NOMEM : XGR_OK;
}

/* The state reading the rest (from symbol `depth` on) of the sorted, distinct words
 * order[lo..hi), which share their first `depth` symbols. */
static int build_trie(trie_ws *w, const trie_in *in, int32_t lo, int32_t hi, int32_t depth,
                      int32_t *out) {
    const words *ws = in->w;
    uint8_t final = 0;
    if (word_len(ws, in->order[lo]) == depth) final = 1, lo++; /* the shortest sorts first */
    size_t base = w->stack.len; /* children push and pop above this before we push */
    int rc;
    for (int32_t i = lo; i < hi;) {
        int32_t sym = word_sym(ws, in->order[i], depth);
        int32_t j = i + 1;
        while (j < hi && word_sym(ws, in->order[j], depth) == sym) j++;
        int32_t child;
        if (j == i + 1) { /* one word left: the rest of it is a chain */
            int32_t k = in->order[i];
            child = in->final_state;
            for (int32_t q = word_len(ws, k) - 1; q > depth; q--) {
                xgr_edge e = sym_edge(word_sym(ws, k, q), child);
                if ((rc = reg(w, 0, &e, 1, &child))) return rc;
            }
        } else if ((rc = build_trie(w, in, i, j, depth + 1, &child))) {
            return rc;
        }
        if ((rc = push_edge(w, base, sym, child))) return rc;
        i = j;
    }
    /* (a node without edges, possibly before the stack ever grew: no pointer into it) */
    rc = reg(w, final, w->stack.len > base ? w->stack.data + base : NULL,
             (int32_t)(w->stack.len - base), out);
    w->stack.len = base;
    return rc;
}

/* Renumbers the states so that `start` is 0 (the DFA convention), keeping edge order. */
static int renumber(lw_dfa *d, int32_t start) {
    int32_t n = d->n;
    if (n < 1 || start < 0 || start >= n) /* (also tells the compiler n is a valid size) */
        return xgr_fail(XGR_ERR_INTERNAL, "trie: start state %d of %d", (int)start, (int)n);
    int32_t *id = xgr_malloc(((size_t)n + 1) * sizeof *id);
    uint8_t *fin = xgr_malloc((size_t)n + 1);
    int32_t *beg = xgr_malloc(((size_t)n + 2) * sizeof *beg);
    xgr_edge *ed = xgr_malloc((d->edges.len + 1) * sizeof *ed);
    if (!id || !fin || !beg || !ed) {
        free(id), free(fin), free(beg), free(ed);
        return XGR_ERR_NOMEM;
    }
    /* start first, then the others in creation order */
    id[start] = 0;
    for (int32_t s = 0, k = 1; s < n; s++)
        if (s != start) id[s] = k++;
    size_t ne = 0;
    for (int32_t k = 0; k < n; k++) {
        int32_t s = k == 0 ? start : (k <= start ? k - 1 : k);
        fin[k] = d->final.data[s];
        beg[k] = (int32_t)ne;
        for (int32_t e = d->ebeg.data[s]; e < d->ebeg.data[s + 1]; e++) {
            ed[ne] = d->edges.data[e];
            ed[ne].target = id[ed[ne].target];
            ne++;
        }
    }
    beg[n] = (int32_t)ne;
    memcpy(d->final.data, fin, (size_t)n);
    memcpy(d->ebeg.data, beg, ((size_t)n + 1) * sizeof *beg);
    if (ne) memcpy(d->edges.data, ed, ne * sizeof *ed); /* (no edges: maybe no array) */
    free(id), free(fin), free(beg), free(ed);
    return XGR_OK;
}

static int cmp_edge(const void *a, const void *b) {
    const xgr_edge *x = a, *y = b;
    int kx = x->ref != -1, ky = y->ref != -1;
    if (kx != ky) return kx - ky;
    int32_t vx = kx ? x->ref : x->lo, vy = ky ? y->ref : y->lo;
    return (vx > vy) - (vx < vy);
}

/* Registers in w->d the automaton `raw` (states in creation order, so successors first)
 * with each choice edge replaced by the byte paths of its strings; returns 1 when a state
 * would then read some byte on two edges (the caller expands the choices instead). */
static int substitute_choices(trie_ws *w, const choice_tab *ct, const lw_dfa *raw, int32_t raw_start,
                              int32_t *start) {
    const xgr_grammar *g = w->c->g;
    int32_t *id = xgr_malloc(((size_t)raw->n + 1) * sizeof *id);
    XGR_VEC(xgr_edge) es = {0};
    int rc = id ? XGR_OK : XGR_ERR_NOMEM;
    for (int32_t s = 0; s < raw->n && !rc; s++) {
        es.len = 0;
        for (int32_t e = raw->ebeg.data[s]; e < raw->ebeg.data[s + 1] && !rc; e++) {
            xgr_edge x = raw->edges.data[e];
            if (x.ref >= -1) {
                x.target = id[x.target];
                if (XGR_VEC_PUSH(es, x)) rc = XGR_ERR_NOMEM;
                continue;
            }
            const xgr_node *n = &g->nodes.data[ct->data[-2 - x.ref]];
            for (int32_t i = 0; i < n->count && !rc; i++) {
                const xgr_node *b = &g->nodes.data[bytes_kid(g, g->kids.data[n->off + i])];
                const uint8_t *p = g->bytes.data + b->off;
                int32_t child = id[x.target];
                for (int32_t q = b->count - 1; q >= 1 && !rc; q--) rc = reg1(w, -1, p[q], child, &child);
                if (!rc && XGR_VEC_PUSH(es, ((xgr_edge){child, -1, p[0], p[0]}))) rc = XGR_ERR_NOMEM;
            }
        }
        if (rc) break;
        if (es.len > 1) qsort(es.data, es.len, sizeof *es.data, cmp_edge);
        size_t m = 0;
        for (size_t k = 0; k < es.len && !rc; k++) {
            xgr_edge x = es.data[k];
            if (m && x.ref == -1 && es.data[m - 1].ref == -1) {
                xgr_edge *l = &es.data[m - 1];
                if (x.lo <= l->hi) {
                    rc = 1; /* two edges on one byte: not deterministic */
                    break;
                }
                if (x.lo == l->hi + 1 && x.target == l->target) {
                    l->hi = x.hi;
                    continue;
                }
            }
            es.data[m++] = x;
        }
        if (!rc) rc = reg(w, raw->final.data[s], es.data, (int32_t)m, &id[s]);
    }
    if (!rc) *start = id[raw_start];
    free(id);
    XGR_VEC_FREE(es);
    return rc;
}

/* lw_trie_build with choices as symbols (ct) or expanded into words (ct NULL): 1 when
 * the rule is not a finite alternation within bounds, 2 when its choices would clash. */
static int trie_try(lw_ctx *c, const xgr_node *alt, int64_t budget, choice_tab *ct, lw_dfa *out) {
    const xgr_grammar *g = c->g;
    /* every alternative must expand (no side effects until all have) */
    words all = {0}, one = {0};
    lw_dfa raw = {0};
    int32_t *order = NULL, *tmp = NULL;
    int rc = XGR_OK;
    for (int32_t i = 0; i < alt->count && !rc; i++) {
        one.sym.len = one.off.len = 0;
        if (XGR_VEC_PUSH(one.off, 0) || XGR_VEC_PUSH(one.off, 0)) {
            rc = XGR_ERR_NOMEM;
            break;
        }
        if ((rc = expand(c, ct, g->kids.data[alt->off + i], &one, 0))) break;
        rc = n_words(&one) > TRIE_MAX_WORDS_PER_ALT ? 1 : words_concat(&all, &one, TRIE_MAX_WORDS);
    }
    words_free(&one);
    if (rc) {
        words_free(&all);
        return rc;
    }
    /* resolve references to output rules (creates them: committed from here on) */
    for (size_t i = 0; i < all.sym.len && !rc; i++)
        if (all.sym.data[i] >= TRIE_REF) {
            int32_t r;
            if (!(rc = lw_ref_rule(c, all.sym.data[i] - TRIE_REF, 0, &r))) all.sym.data[i] = TRIE_REF + r;
        }
    int32_t nw = (int32_t)n_words(&all);
    order = xgr_malloc(((size_t)nw + 1) * sizeof *order);
    tmp = xgr_malloc(((size_t)nw + 1) * sizeof *tmp);
    if (!rc && (!order || !tmp)) rc = XGR_ERR_NOMEM;
    trie_ws w;
    memset(&w, 0, sizeof w);
    if (rc) goto done;
    for (int32_t i = 0; i < nw; i++) order[i] = i;
    lw_sort_i32(order, (size_t)nw, tmp, cmp_words_ctx, &all);
    int32_t m = 0; /* distinct words */
    for (int32_t i = 0; i < nw; i++)
        if (!m || cmp_words(&all, order[m - 1], order[i])) order[m++] = order[i];
    int with_choices = ct && ct->len;
    w.c = c;
    w.d = with_choices ? &raw : out;
    w.budget = budget;
    out->n = 0;
    out->final.len = out->ebeg.len = out->edges.len = 0;
    trie_in in = {&all, order, -1};
    int32_t start;
    /* A trie has at most one state per symbol, plus the final one: size the register for
     * that at once rather than rehash it while it doubles. */
    while (w.cap < 2 * all.sym.len + 4) w.cap = w.cap ? w.cap * 2 : 1024;
    w.cap /= 2;
    if (grow_table(&w)) {
        rc = XGR_ERR_NOMEM;
        goto done;
    }
    if ((rc = reg(&w, 1, NULL, 0, &in.final_state))) goto done;
    if ((rc = build_trie(&w, &in, 0, m, 0, &start))) goto done;
    if (with_choices) {
        /* a fresh register for the substituted automaton */
        free(w.table);
        w.table = NULL;
        w.cap = 0;
        w.hashes.len = 0;
        w.d = out;
        if ((rc = substitute_choices(&w, ct, &raw, start, &start))) {
            if (rc == 1) rc = 2;
            goto done;
        }
    }
    rc = renumber(out, start);
done:
    free(w.table);
    XGR_VEC_FREE(w.hashes);
    XGR_VEC_FREE(w.stack);
    free(order);
    free(tmp);
    words_free(&all);
    lw_td_dfa_free(&raw);
    return rc;
}

/* Does the alternation under IR node `node` (bytes, references, sequences, alternations:
 * what expand() reads) reference a rule the general path inlines whose first bytes are
 * wide (lower.c lw_rule_wide)? The tail `kchar_x key_rest` of a trie of property names
 * with additional properties is such: kept as references here, the first mask at a
 * key's start walked the vocabulary once into kchar_x (which pops after one character)
 * and again under its caller (125k uncertain tokens, 20 ms at 150k tokens); inlined by
 * the general path, the key is one flat automaton (1 ms). */
static int inlines_wide(lw_ctx *c, int32_t node, int depth) {
    const xgr_grammar *g = c->g;
    const xgr_node *n = &g->nodes.data[node];
    if (depth > 64) return 0;
    switch (n->kind) {
    case XGR_NODE_REF:
        return (c->rflags[n->a] & RF_INLINED) && (c->rflags[n->a] & RF_NE) && lw_rule_wide(c, n->a);
    case XGR_NODE_SEQ:
    case XGR_NODE_ALT:
        for (int32_t i = 0; i < n->count; i++)
            if (inlines_wide(c, g->kids.data[n->off + i], depth + 1)) return 1;
        return 0;
    default: return 0;
    }
}

int lw_trie_build(lw_ctx *c, int32_t orule, int64_t budget, lw_dfa *out, int *built) {
    *built = 0;
    const lw_orule o = c->orules.data[orule];
    if (o.src != LW_SRC_RULE || o.b || o.kind != XGR_RULE_NORMAL) return XGR_OK;
    const xgr_grammar *g = c->g;
    const xgr_node alt = g->nodes.data[unwrap_seq(g, g->rules.data[o.a].body)];
    if (alt.kind != XGR_NODE_ALT || alt.count < 2 ||
        (alt.count < TRIE_MIN_ALTS && !(c->rflags[o.a] & RF_TD_TARGET)))
        return XGR_OK;
    if (!(c->rflags[o.a] & RF_TD_TARGET) && inlines_wide(c, unwrap_seq(g, g->rules.data[o.a].body), 0))
        return XGR_OK;
    choice_tab ct = {0};
    int rc = trie_try(c, &alt, budget, &ct, out);
    if (rc == 2) rc = trie_try(c, &alt, budget, NULL, out);
    XGR_VEC_FREE(ct);
    if (rc == 1 || rc == 2) return XGR_OK; /* not this shape: the general path takes it */
    if (!rc) *built = 1;
    return rc;
}
