/* Mask-cache entries: allocation (one block per entry, or the grammar's arena), release,
 * and the forms a classification or a refinement is turned into. */
#include "entry.h"

#include "../common/file_map.h"
#include "descend.h"
#include "global_cache.h"
#include "suffix_set.h"

enum { V_ACCEPT = XGR_V_ACCEPT, V_REJECT = XGR_V_REJECT, V_UNCERTAIN = XGR_V_UNCERTAIN };
#define POP_REF_BIT XGR_POP_REF_BIT

/* (sorted position, depth) of every pop a context-free classification leaves open */
typedef xgr_pop_list pop_list;

/* Frees array p of entry e unless it lies in e's own block (entry_block). */
static void free_array(const xgr_mask_entry *e, void *p) {
    uintptr_t a = (uintptr_t)p, lo = (uintptr_t)(e + 1);
    if (a < lo || a >= lo + e->block) free(p);
}

void xgr_mask_entry_free(xgr_mask_entry *e) {
    if (!e) return;
    if (e->map) { /* borrowed arrays (entry_pack.c, layer_pack.c): only the structs are
                   * the entry's, and a layer's REFINED entry holds its base */
        if (e->owns_base) xgr_mask_entry_release(e->base);
        xgr_file_map_release(e->map);
        free(e->psfx);
        free(e->unit_count);
        free(e);
        return;
    }
    if (e->owns_base) xgr_mask_entry_release(e->base);
    free_array(e, e->ids_by_len);
    free_array(e, e->run_begin);
    free_array(e, e->run_pos);
    free_array(e, e->pop_begin);
    free_array(e, e->pop_depth);
    free_array(e, e->ids);
    free_array(e, e->bits);
    free_array(e, e->uncertain);
    free_array(e, e->unit_ids);
    free_array(e, e->unit_end);
    free_array(e, e->unit_count);
    free_array(e, e->exit_first);
    free_array(e, e->unit_open);
    xgr_region_sfx_free(e->sfx);
    xgr_region_sfx_free(e->psfx);
    free(e->uoff);
    if (!e->in_arena) free(e);
}

/* mem as a zeroed entry with `extra` bytes of block behind it. */
static xgr_mask_entry *block_init(void *mem, size_t extra, char **tail) {
    xgr_mask_entry *e = mem;
    memset(e, 0, sizeof *e);
    e->block = extra;
    *tail = (char *)(e + 1);
    return e;
}

/* A zeroed entry with `extra` bytes behind it for its arrays, carved by the caller with
 * block_take. One allocation instead of one per array: a first visit runs on cold caches,
 * where each malloc costs more than the arrays' bytes (docs/mask-cache.md). */
xgr_mask_entry *xgr_entry_block(size_t extra, char **tail) {
    void *mem = xgr_malloc(sizeof(xgr_mask_entry) + extra);
    return mem ? block_init(mem, extra, tail) : NULL;
}

/* Entries of at most this many bytes (with their block) that live as long as their grammar
 * come from the grammar's arena; chunks hold ARENA_CHUNK bytes. */
#define ARENA_MAX 2048
#define ARENA_CHUNK 16384

/* entry_block for an entry that only grammar c holds (a sharpened entry, published in one
 * of its slots): from c's arena when small, so a first visit makes no malloc for it. Its
 * memory returns with the grammar; one that loses the race to publish (xgr_mask_entry_get)
 * stays there unused until then. */
xgr_mask_entry *xgr_entry_grammar_block(xgr_compiled *c, size_t extra, char **tail) {
    size_t n = (sizeof(xgr_mask_entry) + extra + 15) & ~(size_t)15;
    if (n > ARENA_MAX) return xgr_entry_block(extra, tail);
    pthread_mutex_lock(&c->arena_lock);
    xgr_arena_chunk *k = c->arena;
    if (!k || k->cap - k->used < n) {
        k = xgr_malloc(sizeof *k + ARENA_CHUNK);
        if (!k) {
            pthread_mutex_unlock(&c->arena_lock);
            return NULL;
        }
        k->next = c->arena;
        k->used = 0;
        k->cap = ARENA_CHUNK;
        c->arena = k;
        atomic_fetch_add(&c->memory, sizeof *k + ARENA_CHUNK); /* (its entries: not again) */
    }
    void *mem = (char *)k->data + k->used;
    k->used += n;
    pthread_mutex_unlock(&c->arena_lock);
    xgr_mask_entry *e = block_init(mem, extra, tail);
    e->in_arena = 1;
    return e;
}

void xgr_region_sfx_free(xgr_region_sfx *S) {
    if (!S) return;
    free(S->group);
    free(S->exit);
    free(S->off);
    free(S->bytes);
    free(S);
}

/* Number of distinct tokens in a (position, depth) pop list (positions ascending). */
int32_t xgr_entry_pop_tokens(const pop_list *pops) {
    int32_t n = 0;
    for (size_t k = 0; k < pops->len; k += 2) n += k == 0 || pops->data[k] != pops->data[k - 2];
    return n;
}

/* Block bytes for the uncertain part of a pop list with n tokens (set_uncertain). */
size_t xgr_entry_uncertain_bytes(const pop_list *pops, int32_t n) {
    return ((size_t)n + 1) * 8 + (pops->len / 2 + 1) * 2;
}

/* Fills e's uncertain tokens and their pop depths from a pop list of n tokens, in e's
 * block (uncertain_bytes of it, taken last: the depths are 2-byte); ids maps a list
 * position to its token id. */
void xgr_entry_set_uncertain(xgr_mask_entry *e, const pop_list *pops, int32_t n,
                             const int32_t *ids, char **tail) {
    e->n_uncertain = n;
    e->uncertain = xgr_entry_block_take(tail, ((size_t)n + 1) * sizeof *e->uncertain);
    e->pop_begin = xgr_entry_block_take(tail, ((size_t)n + 1) * sizeof *e->pop_begin);
    e->pop_depth = xgr_entry_block_take(tail, (pops->len / 2 + 1) * sizeof *e->pop_depth);
    int32_t ku = 0;
    size_t np = 0;
    for (size_t k = 0; k < pops->len; k += 2) {
        if (k == 0 || pops->data[k] != pops->data[k - 2]) {
            e->pop_begin[ku] = (int32_t)np;
            e->uncertain[ku++] = ids[pops->data[k]];
        }
        e->pop_depth[np++] = (uint16_t)pops->data[k + 1];
    }
    e->pop_begin[ku] = (int32_t)np;
}

/* The form of a context-free entry with n_acc accepted and n_unc uncertain tokens: the
 * smallest of the three. A rejected-list entry is applied by clearing its rejected and its
 * uncertain tokens from the text row (matcher.c), so a long uncertain list (a TagDispatch
 * state just before a trigger's last byte) makes the bitset cheaper to apply. */
static int entry_form(const struct xgr_vocab *v, int32_t n_acc, int32_t n_unc) {
    int32_t n_rej = v->n_sorted - n_acc - n_unc;
    size_t list_acc = (size_t)n_acc * 4, list_rej = (size_t)n_rej * 4,
           bitset = (size_t)v->row_words * 4;
    if (list_acc <= list_rej && list_acc <= bitset) return XGR_MASK_ACCEPTED_LIST;
    if (list_rej + (size_t)n_unc * 4 <= bitset) return XGR_MASK_REJECTED_LIST;
    return XGR_MASK_BITSET;
}

/* A context-free entry of `form` with its uncertain part filled from pops and room for its
 * ids or bits (e->bytes set); NULL when out of memory. */
static xgr_mask_entry *entry_shell(const struct xgr_vocab *v, int form, int32_t n_acc,
                                   const pop_list *pops) {
    int32_t n_unc = xgr_entry_pop_tokens(pops);
    int32_t n_ids = form == XGR_MASK_ACCEPTED_LIST   ? n_acc
                    : form == XGR_MASK_REJECTED_LIST ? v->n_sorted - n_acc - n_unc
                                                     : 0;
    size_t own = form == XGR_MASK_BITSET ? (size_t)v->row_words * sizeof(uint32_t)
                                         : ((size_t)n_ids + 1) * sizeof(int32_t);
    char *tail = NULL;
    xgr_mask_entry *e = xgr_entry_block(own + xgr_entry_uncertain_bytes(pops, n_unc), &tail);
    if (!e) return NULL;
    e->form = form;
    e->n_ids = n_ids;
    atomic_init(&e->refcount, 1);
    e->n_accepted = n_acc;
    if (form == XGR_MASK_BITSET) e->bits = xgr_entry_block_take(&tail, own);
    else e->ids = xgr_entry_block_take(&tail, own);
    xgr_entry_set_uncertain(e, pops, n_unc, v->sorted, &tail);
    e->bytes = sizeof *e + e->block;
    return e;
}

/* The bits of positions [s, t) in word w of a sorted-position bitset. */
static inline uint64_t range_word(int32_t s, int32_t t, int32_t w) {
    uint64_t in = ~(uint64_t)0;
    if (w == s >> 6) in &= ~(uint64_t)0 << (s & 63);
    if (w == (t - 1) >> 6 && (t & 63) != 0) in &= ~(uint64_t)0 >> (64 - (t & 63));
    return in;
}

/* Clears from `bits` (an id row) every wide first-byte range (vocab.h first_ids) that
 * holds few accepted positions, a word at a time, and sets those few back; *todo gets
 * ~acc_bits without those ranges, for the caller's per-token pass over the rest (NULL when
 * no range was cleared). */
static int clear_wide_ranges(const struct xgr_vocab *v, const uint64_t *acc_bits, uint32_t *bits,
                             uint64_t **todo) {
    size_t sw = (size_t)v->set_words;
    *todo = NULL;
    for (int b = 0; b < 256; b++) {
        if (!v->first_ids[b]) continue;
        int32_t s = v->first_byte_start[b], t = v->first_byte_start[b + 1], n_acc = 0;
        for (int32_t w = s >> 6; w <= (t - 1) >> 6; w++)
            n_acc += xgr_popcount64(acc_bits[w] & range_word(s, t, w));
        if (n_acc > (t - s) / 8) continue;
        if (!*todo) {
            if (!(*todo = xgr_malloc((sw + 1) * sizeof **todo))) return XGR_ERR_NOMEM;
            for (size_t w = 0; w < sw; w++) (*todo)[w] = ~acc_bits[w];
        }
        for (int32_t k = 0; k < v->row_words; k++) bits[k] &= ~v->first_ids[b][k];
        for (int32_t w = s >> 6; w <= (t - 1) >> 6; w++) {
            uint64_t in = range_word(s, t, w);
            (*todo)[w] &= ~in;
            for (uint64_t m = acc_bits[w] & in; m; m &= m - 1) {
                int32_t id = v->sorted[(size_t)w * 64 + (size_t)xgr_ctz64(m)];
                bits[id >> 5] |= 1u << (id & 31);
            }
        }
    }
    return XGR_OK;
}

/* Builds the context-free entry of a state from its classification of the whole sorted
 * vocabulary (accepted sorted positions as bits, set_words words; the (position, pop
 * depth) pairs of the uncertain ones; the rest rejected), in the smallest of the three
 * forms. Every form is built from the accepted bits or their complement, whichever is
 * sparse: a free-text state accepts nearly all 128k tokens, a key state nearly none. The
 * entry may be shared by other grammars, so it holds no grammar-specific data. */
int xgr_mask_entry_from_bits(const struct xgr_vocab *v, const uint64_t *acc_bits,
                             const pop_list *pops, xgr_mask_entry **out) {
    size_t sw = (size_t)v->set_words;
    int32_t n_acc = 0;
    for (size_t w = 0; w < sw; w++) n_acc += xgr_popcount64(acc_bits[w]);
    xgr_mask_entry *e = entry_shell(v, entry_form(v, n_acc, xgr_entry_pop_tokens(pops)), n_acc, pops);
    if (!e) return XGR_ERR_NOMEM;
    int32_t k = 0;
    if (e->form == XGR_MASK_ACCEPTED_LIST) {
        for (size_t w = 0; w < sw; w++)
            for (uint64_t m = acc_bits[w]; m; m &= m - 1)
                e->ids[k++] = v->sorted[w * 64 + (size_t)xgr_ctz64(m)];
    } else {
        /* the positions not accepted: rejected ones, and the uncertain (pops, ascending) */
        uint64_t *todo = NULL; /* ~acc_bits less the first-byte ranges cleared word-wise */
        if (e->bits) {
            memcpy(e->bits, v->text_bits, (size_t)v->row_words * sizeof *e->bits);
            if (clear_wide_ranges(v, acc_bits, e->bits, &todo)) {
                xgr_mask_entry_free(e);
                return XGR_ERR_NOMEM;
            }
        }
        size_t kp = 0;
        for (size_t w = 0; w < sw; w++) {
            uint64_t m = todo ? todo[w] : ~acc_bits[w];
            if (w == sw - 1 && (v->n_sorted & 63)) m &= ~(uint64_t)0 >> (64 - (v->n_sorted & 63));
            for (; m; m &= m - 1) {
                int32_t i = (int32_t)(w * 64) + xgr_ctz64(m), id = v->sorted[i];
                if (e->bits) {
                    e->bits[id >> 5] &= ~(1u << (id & 31));
                    continue;
                }
                while (kp < pops->len && pops->data[kp] < i) kp += 2;
                if (kp < pops->len && pops->data[kp] == i) continue;
                e->ids[k++] = id;
            }
        }
        free(todo);
    }
    *out = e;
    return XGR_OK;
}

/* The same entry from the accepted sorted positions as a list (ascending), as the descent
 * gives them: an accepted list straight from it, without a pass over set_words words. */
int xgr_entry_from_lists(const struct xgr_vocab *v, const pop_list *acc, const pop_list *pops,
                         xgr_mask_entry **out) {
    int32_t n_acc = (int32_t)acc->len;
    int form = entry_form(v, n_acc, xgr_entry_pop_tokens(pops));
    if (form != XGR_MASK_ACCEPTED_LIST) {
        uint64_t *bits = xgr_calloc((size_t)v->set_words + 1, sizeof *bits);
        if (!bits) return XGR_ERR_NOMEM;
        for (size_t k = 0; k < acc->len; k++)
            bits[acc->data[k] >> 6] |= (uint64_t)1 << (acc->data[k] & 63);
        int rc = xgr_mask_entry_from_bits(v, bits, pops, out);
        free(bits);
        return rc;
    }
    xgr_mask_entry *e = entry_shell(v, form, n_acc, pops);
    if (!e) return XGR_ERR_NOMEM;
    for (int32_t k = 0; k < n_acc; k++) e->ids[k] = v->sorted[acc->data[k]];
    *out = e;
    return XGR_OK;
}

/* Builds a REFINED entry from verdicts over base's uncertain tokens. */
/* ids sorted by token length, longest first (insertion into buckets by length). */
static int sort_by_length_desc(const struct xgr_vocab *v, const int32_t *ids, int32_t n,
                               int32_t *out) {
    int32_t maxl = v->max_token_len, local[XGR_DEPTHS_LOCAL];
    int32_t *cnt = maxl + 2 <= XGR_DEPTHS_LOCAL ? local
                                                : xgr_malloc(((size_t)maxl + 2) * sizeof *cnt);
    if (!cnt) return XGR_ERR_NOMEM;
    memset(cnt, 0, ((size_t)maxl + 2) * sizeof *cnt);
    for (int32_t i = 0; i < n; i++) {
        uint32_t l;
        xgr_vocab_token(v, ids[i], &l);
        cnt[maxl - (int32_t)l]++;
    }
    for (int32_t k = 0, acc = 0; k <= maxl; k++) {
        int32_t c0 = cnt[k];
        cnt[k] = acc;
        acc += c0;
    }
    for (int32_t i = 0; i < n; i++) {
        uint32_t l;
        xgr_vocab_token(v, ids[i], &l);
        out[cnt[maxl - (int32_t)l]++] = ids[i];
    }
    if (cnt != local) free(cnt);
    return XGR_OK;
}

/* A REFINED entry over `base` that accepts acc[0..n_acc) and leaves unc[0..n_unc) open
 * (both among base's uncertain tokens, in its order); base's other uncertain tokens are
 * rejected. The lists are copied. */
int xgr_entry_refined_from_lists(const struct xgr_vocab *v, const xgr_mask_entry *base,
                                 const int32_t *acc, int32_t n_acc, const int32_t *unc,
                                 int32_t n_unc, xgr_mask_entry **out) {
    /* Large sets are ORed as a bitset; the length order serves REPEAT callers near their
     * maximum, where the longest accepted tokens must be re-checked (matcher.c). */
    size_t rw = (size_t)v->row_words, nb = (size_t)n_acc > rw ? rw : 0;
    char *tail = NULL;
    xgr_mask_entry *e =
        xgr_entry_block((2 * ((size_t)n_acc + 1) + (size_t)n_unc + 1 + nb) * 4, &tail);
    if (!e) return XGR_ERR_NOMEM;
    atomic_init(&e->refcount, 1);
    e->form = XGR_MASK_REFINED;
    e->base = (xgr_mask_entry *)base;
    e->n_ids = n_acc;
    e->n_accepted = base->n_accepted + n_acc;
    e->n_uncertain = n_unc;
    e->ids = xgr_entry_block_take(&tail, ((size_t)n_acc + 1) * sizeof *e->ids);
    e->ids_by_len = xgr_entry_block_take(&tail, ((size_t)n_acc + 1) * sizeof *e->ids_by_len);
    e->uncertain = xgr_entry_block_take(&tail, ((size_t)n_unc + 1) * sizeof *e->uncertain);
    memcpy(e->ids, acc, (size_t)n_acc * sizeof *e->ids);
    memcpy(e->uncertain, unc, (size_t)n_unc * sizeof *e->uncertain);
    e->bytes = sizeof *e + e->block;
    if (nb) {
        e->bits = xgr_entry_block_take(&tail, nb * sizeof *e->bits);
        memset(e->bits, 0, nb * sizeof *e->bits);
        for (int32_t i = 0; i < n_acc; i++) e->bits[e->ids[i] >> 5] |= 1u << (e->ids[i] & 31);
    }
    if (sort_by_length_desc(v, e->ids, n_acc, e->ids_by_len)) {
        xgr_mask_entry_free(e);
        return XGR_ERR_NOMEM;
    }
    *out = e;
    return XGR_OK;
}

/* The same from verdicts over base's uncertain list. */
int xgr_entry_make_refined(const struct xgr_vocab *v, const xgr_mask_entry *base,
                           const uint8_t *verdict, xgr_mask_entry **out) {
    int32_t n = base->n_uncertain, n_acc = 0, n_unc = 0;
    int32_t *acc = xgr_malloc(((size_t)n + 1) * sizeof *acc);
    int32_t *unc = xgr_malloc(((size_t)n + 1) * sizeof *unc);
    int rc = acc && unc ? XGR_OK : XGR_ERR_NOMEM;
    for (int32_t i = 0; i < n && !rc; i++) {
        if (verdict[i] == V_ACCEPT) acc[n_acc++] = base->uncertain[i];
        if (verdict[i] == V_UNCERTAIN) unc[n_unc++] = base->uncertain[i];
    }
    if (!rc) rc = xgr_entry_refined_from_lists(v, base, acc, n_acc, unc, n_unc, out);
    free(acc);
    free(unc);
    return rc;
}

/* Splits e's uncertain tokens into runs (compiled.h run_begin): a run starts where
 * classify started a group (`groups`: pops->len there, so twice a pop index) or where the
 * pop depths differ from the previous token's; `pops` (sorted position, depth) gives each
 * run's sorted position where its tokens are consecutive there (run_pos). */
int xgr_entry_set_runs(xgr_mask_entry *e, const pop_list *groups, const pop_list *pops) {
    int32_t n = e->n_uncertain, nr = 0;
    int32_t *rb = xgr_malloc(((size_t)n + 1) * sizeof *rb);
    if (!rb) return XGR_ERR_NOMEM;
    size_t g = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t b = e->pop_begin[i], nb = e->pop_begin[i + 1] - b;
        while (g < groups->len && groups->data[g] / 2 < b) g++;
        int start = i == 0 || (g < groups->len && groups->data[g] / 2 == b);
        if (!start) {
            int32_t pb = e->pop_begin[i - 1];
            start = nb != b - pb || memcmp(e->pop_depth + pb, e->pop_depth + b, (size_t)nb * sizeof *e->pop_depth);
        }
        if (start) rb[nr++] = i;
    }
    rb[nr] = n;
    int32_t *shrunk = realloc(rb, ((size_t)nr + 1) * sizeof *rb);
    e->run_begin = shrunk ? shrunk : rb;
    e->n_runs = nr;
    e->bytes += ((size_t)nr + 1) * sizeof *rb;
    e->run_pos = xgr_malloc(((size_t)nr + 1) * sizeof *e->run_pos);
    if (!e->run_pos) return XGR_ERR_NOMEM;
    e->bytes += ((size_t)nr + 1) * sizeof *e->run_pos;
    /* token i's first pop record is pops[2 * pop_begin[i]] (set_uncertain's order) */
    for (int32_t r = 0; r < nr; r++) {
        int32_t i0 = e->run_begin[r], i1 = e->run_begin[r + 1];
        int32_t p0 = pops->data[2 * (size_t)e->pop_begin[i0]];
        int32_t p1 = pops->data[2 * (size_t)e->pop_begin[i1 - 1]];
        e->run_pos[r] = p1 - p0 == i1 - 1 - i0 ? p0 : -1;
    }
    return XGR_OK;
}

/* Groups e's uncertain tokens that have a single plain pop by the bytes after it
 * (compiled.h psfx), deduplicated through a hash table; the other tokens get group -1.
 * `pops`: the (sorted position, depth) list e was built from, so the bytes are read in
 * sorted order. Establishes e->psfx (its memory added to e->bytes, so call it before e is
 * shared); entries with few uncertain tokens, or runs, are left without. */
int xgr_entry_pop_suffixes(const struct xgr_vocab *v, xgr_mask_entry *e, const pop_list *pops) {
    if (e->run_begin || e->n_uncertain < XGR_PSFX_MIN) return XGR_OK;
    int32_t nu = e->n_uncertain;
    xgr_sfx_set set;
    xgr_region_sfx *S = xgr_calloc(1, sizeof *S);
    int rc = xgr_sfx_set_init(&set, nu);
    if (!rc && (!S || !(S->group = xgr_malloc(((size_t)nu + 1) * sizeof *S->group))))
        rc = XGR_ERR_NOMEM;
    for (int32_t i = 0; i < nu && !rc; i++) {
        int32_t k = e->pop_begin[i];
        uint32_t len, d = e->pop_depth[k];
        const uint8_t *tok = xgr_vocab_sorted_token(v, pops->data[2 * (size_t)k], &len);
        S->group[i] = -1;
        if (e->pop_begin[i + 1] - k != 1 || (d & POP_REF_BIT) || d >= len) continue;
        if ((S->group[i] = xgr_sfx_set_add(&set, 0, tok + d, len - d)) < 0) rc = XGR_ERR_NOMEM;
    }
    if (rc) {
        xgr_region_sfx_free(S);
        xgr_sfx_set_free(&set);
        return rc;
    }
    S->n = set.n;
    S->off = set.off; /* taken over from the set */
    S->bytes = set.bytes;
    set.off = NULL;
    set.bytes = NULL;
    S->mem = sizeof *S + ((size_t)nu + 1) * 4 + ((size_t)nu + 2) * 4 + set.bcap;
    xgr_sfx_set_free(&set);
    e->psfx = S;
    e->bytes += S->mem;
    return XGR_OK;
}

int xgr_entry_set_unit_count(const struct xgr_vocab *v, xgr_mask_entry *e) {
    size_t n = (size_t)v->row_words * 32;
    uint8_t *b = xgr_calloc(n + 1, 1);
    if (!b) return XGR_ERR_NOMEM;
    /* unit_ids[unit_end[u] .. unit_end[u - 1]) run exactly u repetitions (u >= 2) */
    for (int32_t u = e->max_units, k = 0; u >= 2; u--)
        for (; k < e->unit_end[u - 1]; k++)
            b[e->unit_ids[k]] = (uint8_t)(u < XGR_UNIT_COUNT_MAX ? u : XGR_UNIT_COUNT_MAX);
    e->unit_count = b;
    e->bytes += n + 1;
    return XGR_OK;
}
