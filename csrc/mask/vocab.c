/* Vocabulary construction: validation, sorting for prefix reuse, stop/special sets. */
#include "vocab.h"

#include "stay.h"

typedef struct {
    const uint8_t *data;
    const uint32_t *offsets;
} sort_ctx;

/* qsort has no context argument in C11: sort (offset, len, id) records instead. */
typedef struct {
    const uint8_t *p;
    uint32_t len;
    int32_t id;
} tok_ref;

static int cmp_tok(const void *a, const void *b) {
    const tok_ref *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = n ? memcmp(x->p, y->p, n) : 0;
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : (x->id > y->id);
}

/* A token's folded byte set (vocab.h xgr_byte_fold): ASCII bytes exactly, each complete
 * multi-byte character as XGR_FOLD_CHAR, any other byte as bit 0. */
static void fold_token(const uint8_t *p, uint32_t len, uint64_t out[2]) {
    for (uint32_t k = 0; k < len;) {
        uint32_t cl = p[k] < 0x80 ? 0 : xgr_utf8_char_len(p + k, len - k);
        int bit = p[k] < 0x80 ? p[k] : cl ? XGR_FOLD_CHAR : 0;
        out[bit >> 6] |= (uint64_t)1 << (bit & 63);
        k += cl ? cl : 1;
    }
}

struct xgr_vocab_memo_entry {
    uint32_t key[XGR_VOCAB_MEMO_KEY];
    void *value;
    void (*free_fn)(void *);
};

const void *xgr_vocab_memo_get(const struct xgr_vocab *cv, const uint32_t key[XGR_VOCAB_MEMO_KEY]) {
    struct xgr_vocab *v = (struct xgr_vocab *)cv; /* (atomic loads take a non-const object) */
    for (int i = 0; i < XGR_VOCAB_MEMO_SLOTS; i++) {
        xgr_vocab_memo_entry *e = atomic_load_explicit(&v->memo[i], memory_order_acquire);
        if (!e) return NULL; /* (slots fill in order) */
        if (!memcmp(e->key, key, sizeof e->key)) return e->value;
    }
    return NULL;
}

const void *xgr_vocab_memo_put(const struct xgr_vocab *cv, const uint32_t key[XGR_VOCAB_MEMO_KEY], void *value,
                               void (*free_fn)(void *)) {
    struct xgr_vocab *v = (struct xgr_vocab *)cv;
    xgr_vocab_memo_entry *mine = xgr_malloc(sizeof *mine);
    if (!mine) return NULL;
    memcpy(mine->key, key, sizeof mine->key);
    mine->value = value;
    mine->free_fn = free_fn;
    for (int i = 0; i < XGR_VOCAB_MEMO_SLOTS; i++) {
        xgr_vocab_memo_entry *seen = NULL;
        if (atomic_compare_exchange_strong_explicit(&v->memo[i], &seen, mine, memory_order_acq_rel,
                                                    memory_order_acquire))
            return value;
        if (!memcmp(seen->key, key, sizeof seen->key)) { /* published first by another thread */
            free(mine);
            free_fn(value);
            return seen->value;
        }
    }
    free(mine);
    return NULL;
}

static void vocab_free(struct xgr_vocab *v) {
    if (!v) return;
    for (int i = 0; i < XGR_VOCAB_MEMO_SLOTS; i++) {
        xgr_vocab_memo_entry *e = atomic_load_explicit(&v->memo[i], memory_order_acquire);
        if (!e) break;
        e->free_fn(e->value);
        free(e);
    }
    free(v->data);
    free(v->offsets);
    free(v->is_special);
    free(v->stop_ids);
    free(v->sorted);
    free(v->lcp);
    free(v->next_shorter);
    free(v->sorted_data);
    free(v->sorted_offsets);
    free(v->sorted_head);
    free(v->sorted_bytes);
    free(v->byte_sets);
    free(v->text_bits);
    free(v->ff_bits);
    free(v->ff_ids);
    for (int b = 0; b < 256; b++) free(v->first_ids[b]);
    free(v->pair_start);
    free(v->by_len);
    free(v);
}

int xgr_vocab_new(const uint8_t *data, const uint32_t *offsets, int32_t n_tokens,
                  int32_t vocab_size, const int32_t *special_ids, size_t n_special,
                  const int32_t *stop_ids, size_t n_stop, xgr_vocab **out) {
    if (!out) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_vocab_new: out is NULL");
    *out = NULL;
    /* An empty vocabulary (n_tokens == 0, even vocab_size == 0) is valid, as upstream
     * xgrammar's: matching strings only, with empty masks. */
    if (n_tokens < 0)
        return xgr_fail(XGR_ERR_INVALID_ARG, "negative token count %d", (int)n_tokens);
    if (!offsets || (!data && offsets[n_tokens] > 0))
        return xgr_fail(XGR_ERR_INVALID_ARG, "vocabulary data or offsets is NULL");
    if (vocab_size < n_tokens)
        return xgr_fail(XGR_ERR_INVALID_ARG,
                        "vocab_size %d is smaller than the number of tokens %d",
                        (int)vocab_size, (int)n_tokens);
    if (vocab_size > INT32_MAX - 32)
        return xgr_fail(XGR_ERR_INVALID_ARG, "vocab_size %d too large", (int)vocab_size);
    for (int32_t i = 0; i < n_tokens; i++)
        if (offsets[i + 1] < offsets[i])
            return xgr_fail(XGR_ERR_INVALID_ARG, "vocabulary offsets decrease at token %d",
                            (int)i);
    for (size_t i = 0; i < n_special; i++)
        if (special_ids[i] < 0 || special_ids[i] >= n_tokens)
            return xgr_fail(XGR_ERR_INVALID_ARG, "special token id %d out of range [0, %d)",
                            (int)special_ids[i], (int)n_tokens);
    for (size_t i = 0; i < n_stop; i++)
        if (stop_ids[i] < 0 || stop_ids[i] >= vocab_size)
            return xgr_fail(XGR_ERR_INVALID_ARG, "stop token id %d out of range [0, %d)",
                            (int)stop_ids[i], (int)vocab_size);

    struct xgr_vocab *v = xgr_calloc(1, sizeof *v);
    if (!v) return XGR_ERR_NOMEM;
    atomic_init(&v->refcount, 1);
    for (int i = 0; i < XGR_VOCAB_MEMO_SLOTS; i++) atomic_init(&v->memo[i], NULL);
    v->n_tokens = n_tokens;
    v->vocab_size = vocab_size;
    v->row_words = (vocab_size + 31) / 32;
    size_t total = offsets[n_tokens] - offsets[0];
    v->data = xgr_malloc(total ? total : 1);
    v->offsets = xgr_malloc(((size_t)n_tokens + 1) * sizeof *v->offsets);
    v->is_special = xgr_calloc((size_t)n_tokens, 1);
    v->stop_ids = xgr_malloc((n_stop ? n_stop : 1) * sizeof *v->stop_ids);
    v->sorted = xgr_malloc((size_t)n_tokens * sizeof *v->sorted);
    v->lcp = xgr_malloc((size_t)n_tokens * sizeof *v->lcp);
    v->next_shorter = xgr_malloc((size_t)n_tokens * sizeof *v->next_shorter);
    v->sorted_data = xgr_malloc(total ? total : 1);
    v->sorted_offsets = xgr_malloc(((size_t)n_tokens + 1) * sizeof *v->sorted_offsets);
    v->sorted_head = xgr_calloc((size_t)n_tokens + 1, sizeof *v->sorted_head);
    v->sorted_bytes = xgr_calloc((size_t)n_tokens * 2 + 2, sizeof *v->sorted_bytes);
    v->text_bits = xgr_calloc((size_t)v->row_words, sizeof *v->text_bits);
    v->ff_bits = xgr_calloc((size_t)v->row_words + 1, sizeof *v->ff_bits);
    tok_ref *refs = xgr_malloc((size_t)n_tokens * sizeof *refs);
    uint8_t *is_stop = xgr_calloc((size_t)vocab_size, 1);
    if (!v->data || !v->offsets || !v->is_special || !v->stop_ids || !v->sorted || !v->lcp ||
        !v->next_shorter || !v->sorted_data || !v->sorted_offsets || !v->sorted_head || !v->sorted_bytes ||
        !v->text_bits || !v->ff_bits || !refs || !is_stop)
        goto nomem;
    if (total) memcpy(v->data, data + offsets[0], total);
    for (int32_t i = 0; i <= n_tokens; i++) v->offsets[i] = offsets[i] - offsets[0];
    for (size_t i = 0; i < n_special; i++) v->is_special[special_ids[i]] = 1;
    /* Deduplicated stop list: callers sometimes pass eos twice. */
    for (size_t i = 0; i < n_stop; i++)
        if (!is_stop[stop_ids[i]]) {
            is_stop[stop_ids[i]] = 1;
            v->stop_ids[v->n_stop++] = stop_ids[i];
        }
    int32_t n = 0;
    for (int32_t i = 0; i < n_tokens; i++) {
        uint32_t len = v->offsets[i + 1] - v->offsets[i];
        if (len == 0 || v->is_special[i] || is_stop[i]) continue;
        refs[n].p = v->data + v->offsets[i];
        refs[n].len = len;
        refs[n].id = i;
        n++;
        if ((int32_t)len > v->max_token_len) v->max_token_len = (int32_t)len;
    }
    qsort(refs, (size_t)n, sizeof *refs, cmp_tok);
    for (int32_t i = 0; i < n; i++) {
        v->sorted[i] = refs[i].id;
        v->text_bits[refs[i].id >> 5] |= 1u << (refs[i].id & 31);
        if (i == 0) {
            v->lcp[i] = 0;
            continue;
        }
        uint32_t m = refs[i].len < refs[i - 1].len ? refs[i].len : refs[i - 1].len, k = 0;
        while (k < m && refs[i].p[k] == refs[i - 1].p[k]) k++;
        v->lcp[i] = (int32_t)k;
    }
    v->n_sorted = n;
    v->set_words = (n + 63) / 64;
    v->byte_sets = xgr_calloc((size_t)v->set_words * (XGR_CTRL_SET + 1) + 1, sizeof *v->byte_sets);
    if (!v->byte_sets) goto nomem;
    v->sorted_offsets[0] = 0;
    for (int32_t i = 0; i < n; i++) {
        memcpy(v->sorted_data + v->sorted_offsets[i], refs[i].p, refs[i].len);
        v->sorted_offsets[i + 1] = v->sorted_offsets[i] + refs[i].len;
        for (uint32_t k = 0; k < 4 && k < refs[i].len; k++)
            v->sorted_head[i] |= (uint32_t)refs[i].p[k] << (24 - 8 * k);
        uint64_t *tb = v->sorted_bytes + 2 * (size_t)i;
        fold_token(refs[i].p, refs[i].len, tb);
        for (int h = 0; h < 2; h++)
            for (uint64_t m = tb[h]; m; m &= m - 1) {
                size_t b = (size_t)(64 * h + xgr_ctz64(m));
                v->byte_sets[b * (size_t)v->set_words + ((size_t)i >> 6)] |= (uint64_t)1 << (i & 63);
            }
        if (tb[0] & XGR_CTRL_BITS)
            v->byte_sets[(size_t)XGR_CTRL_SET * (size_t)v->set_words + ((size_t)i >> 6)] |= (uint64_t)1 << (i & 63);
    }
    /* next_shorter by a backward scan that jumps along the chains already built
     * (amortised linear: the classic next-smaller-value construction) */
    for (int32_t i = n - 1; i >= 0; i--) {
        int32_t j = i + 1;
        while (j < n && v->lcp[j] >= v->lcp[i]) j = v->next_shorter[j];
        v->next_shorter[i] = j;
    }
    for (int32_t i = 0; i < n; i++) v->first_byte_count[refs[i].p[0]]++;
    for (int b = 0; b < 256; b++) v->first_byte_start[b + 1] = v->first_byte_start[b] + v->first_byte_count[b];
    if (!(v->pair_start = xgr_malloc((65536 + 1) * sizeof *v->pair_start))) goto nomem;
    for (int32_t k = 0, i = 0; k <= 65536; k++) {
        /* 2 * key + 1 for two bytes or more, 2 * (b0 * 256) for the one-byte token b0 */
        while (i < n && (refs[i].len >= 2 ? 2 * (refs[i].p[0] * 256 + refs[i].p[1]) + 1
                                          : 2 * (refs[i].p[0] * 256)) < 2 * k + 1)
            i++;
        v->pair_start[k] = i;
    }
    for (int b = 0; b < 256; b++) {
        if (!v->first_byte_count[b] || v->first_byte_count[b] < v->row_words) continue;
        if (!(v->first_ids[b] = xgr_calloc((size_t)v->row_words, sizeof *v->first_ids[b])))
            goto nomem;
        for (int32_t i = v->first_byte_start[b]; i < v->first_byte_start[b + 1]; i++)
            v->first_ids[b][v->sorted[i] >> 5] |= 1u << (v->sorted[i] & 31);
    }
    /* by_len: a counting sort by length, longest first, stable in sorted order */
    {
        int32_t *start = xgr_calloc((size_t)v->max_token_len + 2, sizeof *start);
        v->by_len = xgr_malloc(((size_t)n + 1) * sizeof *v->by_len);
        if (!start || !v->by_len) {
            free(start);
            goto nomem;
        }
        for (int32_t i = 0; i < n; i++) start[v->max_token_len - (int32_t)refs[i].len + 1]++;
        for (int32_t k = 1; k <= v->max_token_len + 1; k++) start[k] += start[k - 1];
        for (int32_t i = 0; i < n; i++) v->by_len[start[v->max_token_len - (int32_t)refs[i].len]++] = i;
        free(start);
    }
    /* Verdicts depend on the matchable tokens' ids and bytes only. */
    uint64_t h = xgr_mix64((uint64_t)vocab_size * 31 + (uint64_t)n);
    for (int32_t i = 0; i < n; i++) {
        h = xgr_hash_combine(h, (uint64_t)refs[i].id << 32 | refs[i].len);
        uint64_t w = 0;
        for (uint32_t k = 0; k < refs[i].len; k++) {
            w = (w << 8) | refs[i].p[k];
            if ((k & 7) == 7) {
                h = xgr_hash_combine(h, w);
                w = 0;
            }
        }
        h = xgr_hash_combine(h, w);
    }
    v->fingerprint = h;
    for (int32_t id = 0; id < n_tokens; id++) {
        uint32_t len;
        const uint8_t *t = xgr_vocab_token(v, id, &len);
        if (len && memchr(t, 0xFF, len)) v->n_ff++;
    }
    v->ff_ids = xgr_malloc(((size_t)v->n_ff + 1) * sizeof *v->ff_ids);
    if (!v->ff_ids) goto nomem;
    for (int32_t id = 0, k = 0; id < n_tokens; id++) {
        uint32_t len;
        const uint8_t *t = xgr_vocab_token(v, id, &len);
        if (!len || !memchr(t, 0xFF, len)) continue;
        v->ff_ids[k++] = id;
        v->ff_bits[id >> 5] |= 1u << (id & 31);
    }
    free(refs);
    free(is_stop);
    *out = v;
    return XGR_OK;
nomem:
    free(refs);
    free(is_stop);
    vocab_free(v);
    return XGR_ERR_NOMEM;
}

int32_t xgr_vocab_size(const xgr_vocab *v) { return v ? v->vocab_size : 0; }

void xgr_vocab_retain(xgr_vocab *v) {
    if (v) atomic_fetch_add(&v->refcount, 1);
}

void xgr_vocab_release(xgr_vocab *v) {
    if (v && atomic_fetch_sub(&v->refcount, 1) == 1) vocab_free(v);
}
