/* The tag table: tool tags seen before, by their JSON text, for the request whose every tag
 * was seen (a tool list in a new combination, what vLLM and SGLang send).
 *
 * The Python tag cache (structural_tag/link.py) decides what is cached and evicts it; it
 * mirrors here each tag of the direct shape (a begin, a JSON-schema content lowered to a
 * fragment, one end). Resolving a request then finds its tags' spans, looks every one up
 * and writes the skeleton in one call, and compiling builds the tool-set grammar, spells
 * special tokens and links the fragments in another: no Python object per tag. A request
 * served from the process's warm caches saves little by this, but one after other work
 * (a server between requests) pays a cache miss for every object it touches, and the
 * per-tag Python work was most of its compile. */
#include <pthread.h>
#include <stdatomic.h>

#include "compile.h"
#include "link.h"

typedef struct tag_rec {
    atomic_int refcount;
    atomic_int used; /* set by a resolve, taken by xgr_tag_table_take_used */
    uint64_t hash;
    size_t klen;
    uint32_t blen, nlen, elen;
    xgr_fragment *frag;
    char *name;      /* NUL-terminated: the stand-in rule's name */
    uint8_t bytes[]; /* key, then begin, then end */
} tag_rec;

struct xgr_tag_table {
    pthread_mutex_t lock;
    tag_rec **slot; /* open addressing, linear probing, NULL empty */
    size_t cap, n;
};

struct xgr_tag_hits {
    size_t n;
    tag_rec *rec[];
};

static void rec_release(tag_rec *r) {
    if (!r || atomic_fetch_sub(&r->refcount, 1) != 1) return;
    xgr_fragment_release(r->frag);
    free(r->name);
    free(r);
}

static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

/* Hash of a tag's text. A request hashes every tag (most of its bytes), so the bulk goes
 * through four independent lanes (an xxHash-style round: no lane waits on another's
 * multiplies), folded with the length and mixed at the end. A match is always confirmed
 * by comparing the bytes, so only spread matters. */
static uint64_t key_hash(const uint8_t *k, size_t n) {
    const uint64_t p1 = 0x9e3779b185ebca87ULL, p2 = 0xc2b2ae3d27d4eb4fULL;
    uint64_t a = 0x7a6c3f1d ^ p1, b = 0x1b873593, c = 0x85ebca6b, d = 0xcc9e2d51 ^ p2;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        uint64_t w[4];
        memcpy(w, k + i, 32);
        a = rotl64(a + w[0] * p2, 31) * p1;
        b = rotl64(b + w[1] * p2, 31) * p1;
        c = rotl64(c + w[2] * p2, 31) * p1;
        d = rotl64(d + w[3] * p2, 31) * p1;
    }
    uint64_t h = xgr_hash_combine(xgr_hash_combine(xgr_hash_combine(a, b), c), d);
    return xgr_hash_bytes(h ^ (uint64_t)n, k + i, n - i);
}

int xgr_tag_table_new(xgr_tag_table **out) {
    if (!out) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_tag_table_new: NULL argument");
    *out = NULL;
    xgr_tag_table *t = xgr_calloc(1, sizeof *t);
    if (!t) return XGR_ERR_NOMEM;
    if (pthread_mutex_init(&t->lock, NULL)) {
        free(t);
        return xgr_fail(XGR_ERR_NOMEM, "xgr_tag_table_new: cannot create a mutex");
    }
    *out = t;
    return XGR_OK;
}

static void clear_locked(xgr_tag_table *t) {
    for (size_t i = 0; i < t->cap; i++) rec_release(t->slot[i]);
    free(t->slot);
    t->slot = NULL;
    t->cap = t->n = 0;
}

void xgr_tag_table_free(xgr_tag_table *t) {
    if (!t) return;
    clear_locked(t);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

void xgr_tag_table_clear(xgr_tag_table *t) {
    if (!t) return;
    pthread_mutex_lock(&t->lock);
    clear_locked(t);
    pthread_mutex_unlock(&t->lock);
}

size_t xgr_tag_table_size(xgr_tag_table *t) {
    if (!t) return 0;
    pthread_mutex_lock(&t->lock);
    size_t n = t->n;
    pthread_mutex_unlock(&t->lock);
    return n;
}

/* The slot holding key, or the empty slot where it would go (t->cap > t->n). */
static size_t find(const xgr_tag_table *t, uint64_t h, const uint8_t *k, size_t n) {
    size_t j = (size_t)h & (t->cap - 1);
    for (;; j = (j + 1) & (t->cap - 1)) {
        const tag_rec *r = t->slot[j];
        if (!r || (r->hash == h && r->klen == n && memcmp(r->bytes, k, n) == 0)) return j;
    }
}

static int grow(xgr_tag_table *t) {
    size_t cap = t->cap ? t->cap * 2 : 64;
    tag_rec **s = xgr_calloc(cap, sizeof *s);
    if (!s) return XGR_ERR_NOMEM;
    for (size_t i = 0; i < t->cap; i++) {
        tag_rec *r = t->slot[i];
        if (!r) continue;
        size_t j = (size_t)r->hash & (cap - 1);
        while (s[j]) j = (j + 1) & (cap - 1);
        s[j] = r;
    }
    free(t->slot);
    t->slot = s;
    t->cap = cap;
    return XGR_OK;
}

int xgr_tag_table_put(xgr_tag_table *t, const uint8_t *key, size_t klen, const uint8_t *begin,
                      size_t blen, const char *name, size_t nlen, const uint8_t *end,
                      size_t elen, xgr_fragment *frag) {
    if (!t || !key || !begin || !name || !end || !frag)
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_tag_table_put: NULL argument");
    if (blen > UINT32_MAX || nlen > UINT32_MAX || elen > UINT32_MAX || !nlen ||
        memchr(name, 0, nlen))
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_tag_table_put: bad tag strings");
    tag_rec *r = xgr_malloc(sizeof *r + klen + blen + elen + 1);
    if (!r) return XGR_ERR_NOMEM;
    if (!(r->name = xgr_strndup(name, nlen))) {
        free(r);
        return XGR_ERR_NOMEM;
    }
    atomic_init(&r->refcount, 1);
    atomic_init(&r->used, 0);
    r->hash = key_hash(key, klen);
    r->klen = klen;
    r->blen = (uint32_t)blen;
    r->nlen = (uint32_t)nlen;
    r->elen = (uint32_t)elen;
    memcpy(r->bytes, key, klen);
    memcpy(r->bytes + klen, begin, blen);
    memcpy(r->bytes + klen + blen, end, elen);
    xgr_fragment_retain(frag);
    r->frag = frag;
    pthread_mutex_lock(&t->lock);
    if ((t->n + 1) * 2 > t->cap && grow(t)) {
        pthread_mutex_unlock(&t->lock);
        rec_release(r);
        return XGR_ERR_NOMEM;
    }
    size_t j = find(t, r->hash, key, klen);
    tag_rec *old = t->slot[j];
    t->slot[j] = r;
    if (!old) t->n++;
    pthread_mutex_unlock(&t->lock);
    rec_release(old);
    return XGR_OK;
}

/* Removes slot j, shifting later entries of its probe run back (no tombstones). */
static void remove_at(xgr_tag_table *t, size_t j) {
    t->slot[j] = NULL;
    t->n--;
    size_t mask = t->cap - 1;
    for (size_t i = (j + 1) & mask; t->slot[i]; i = (i + 1) & mask) {
        size_t home = (size_t)t->slot[i]->hash & mask;
        /* move i back to j when its home is not cyclically within (j, i] */
        if (((i - home) & mask) >= ((i - j) & mask)) {
            t->slot[j] = t->slot[i];
            t->slot[i] = NULL;
            j = i;
        }
    }
}

int xgr_tag_table_remove(xgr_tag_table *t, const uint8_t *key, size_t klen) {
    if (!t || (!key && klen)) return 0;
    tag_rec *gone = NULL;
    pthread_mutex_lock(&t->lock);
    if (t->n) {
        size_t j = find(t, key_hash(key, klen), key, klen);
        if ((gone = t->slot[j])) remove_at(t, j);
    }
    pthread_mutex_unlock(&t->lock);
    rec_release(gone);
    return gone != NULL;
}

int xgr_tag_table_take_used(xgr_tag_table *t, const uint8_t *key, size_t klen) {
    if (!t || (!key && klen)) return 0;
    int used = 0;
    pthread_mutex_lock(&t->lock);
    if (t->n) {
        tag_rec *r = t->slot[find(t, key_hash(key, klen), key, klen)];
        if (r) used = atomic_exchange(&r->used, 0);
    }
    pthread_mutex_unlock(&t->lock);
    return used;
}

void xgr_tag_hits_free(xgr_tag_hits *h) {
    if (!h) return;
    for (size_t i = 0; i < h->n; i++) rec_release(h->rec[i]);
    free(h);
}

int xgr_tag_table_resolve(xgr_tag_table *t, const uint8_t *raw, size_t len,
                          xgr_tag_hits **hits, uint8_t **skeleton, size_t *skeleton_len) {
    if (!t || !raw || !hits || !skeleton || !skeleton_len)
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_tag_table_resolve: NULL argument");
    *hits = NULL;
    *skeleton = NULL;
    *skeleton_len = 0;
    uint64_t *sp = NULL;
    size_t n = 0;
    int rc = xgr_structural_tag_spans((const char *)raw, len, &sp, &n);
    if (rc == XGR_ERR_NOMEM) return rc;
    if (rc || !n) { /* not splittable, or no tags: the general way */
        free(sp);
        return XGR_OK;
    }
    xgr_tag_hits *h = xgr_malloc(sizeof *h + n * sizeof *h->rec);
    uint64_t *hs = xgr_malloc(n * sizeof *hs);
    if (!h || !hs) {
        free(sp), free(h), free(hs);
        return XGR_ERR_NOMEM;
    }
    /* Hash outside the lock: most of the bytes are the tags'. */
    size_t tag_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        hs[i] = key_hash(raw + sp[2 * i], (size_t)(sp[2 * i + 1] - sp[2 * i]));
        tag_bytes += (size_t)(sp[2 * i + 1] - sp[2 * i]);
    }
    h->n = 0;
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < n && t->n; i++) {
        size_t a = (size_t)sp[2 * i], b = (size_t)sp[2 * i + 1];
        tag_rec *r = t->slot[find(t, hs[i], raw + a, b - a)];
        if (!r) break;
        atomic_fetch_add(&r->refcount, 1);
        h->rec[h->n++] = r;
    }
    if (h->n == n)
        for (size_t i = 0; i < n; i++) atomic_store(&h->rec[i]->used, 1);
    pthread_mutex_unlock(&t->lock);
    free(hs);
    if (h->n != n) { /* a tag not seen before: the general way reads and caches it */
        free(sp);
        xgr_tag_hits_free(h);
        return XGR_OK;
    }
    size_t sk_len = len - tag_bytes + 4 * n, pos = 0, o = 0;
    uint8_t *sk = xgr_malloc(sk_len + 1);
    if (!sk) {
        free(sp);
        xgr_tag_hits_free(h);
        return XGR_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        size_t a = (size_t)sp[2 * i], b = (size_t)sp[2 * i + 1];
        memcpy(sk + o, raw + pos, a - pos);
        o += a - pos;
        memcpy(sk + o, "null", 4);
        o += 4;
        pos = b;
    }
    memcpy(sk + o, raw + pos, len - pos);
    sk[sk_len] = 0;
    free(sp);
    *hits = h;
    *skeleton = sk;
    *skeleton_len = sk_len;
    return XGR_OK;
}

size_t xgr_tag_hits_count(const xgr_tag_hits *h) { return h ? h->n : 0; }

/* Appends part p to data at *o, recording its end in offsets[*k]. */
static void put_part(uint8_t *data, uint32_t *offsets, size_t *k, size_t *o, const void *p,
                     size_t n) {
    if (n) memcpy(data + *o, p, n);
    *o += n;
    offsets[++*k] = (uint32_t)*o;
}

int xgr_compile_tag_hits(const xgr_tag_hits *h, const uint8_t *trigger, size_t trigger_len,
                         const uint8_t *excl_data, const uint32_t *excl_offsets, size_t n_excl,
                         int loop_after_dispatch, const uint8_t *sp_data,
                         const uint32_t *sp_offsets, const int32_t *sp_ids, size_t n_sp,
                         const xgr_vocab *v, const xgr_compile_options *opts,
                         xgr_compiled **out) {
    if (!h || !trigger || !v || !out || (n_excl && (!excl_data || !excl_offsets)))
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_compile_tag_hits: NULL argument");
    *out = NULL;
    /* Every begin must start with the trigger (else the general way names the problem). */
    for (size_t i = 0; i < h->n; i++) {
        const tag_rec *r = h->rec[i];
        if (r->blen < trigger_len || memcmp(r->bytes + r->klen, trigger, trigger_len)) return XGR_OK;
    }
    /* Distinct tags in first-seen order: the alternation drops a tag listed twice, and a
     * record is its tag text, so identity is the text's own deduplication. */
    const tag_rec **uniq = xgr_malloc((h->n + 1) * sizeof *uniq);
    const char **names = xgr_malloc((h->n + 1) * sizeof *names);
    xgr_fragment **frags = xgr_malloc((h->n + 1) * sizeof *frags);
    size_t cap = 64;
    while (cap < 2 * h->n) cap *= 2;
    const tag_rec **seen = xgr_calloc(cap, sizeof *seen);
    uint8_t *data = NULL;
    uint32_t *offsets = NULL;
    xgr_grammar *g = NULL, *spelled = NULL;
    int rc = XGR_OK;
    if (!uniq || !names || !frags || !seen) {
        rc = XGR_ERR_NOMEM;
        goto done;
    }
    size_t nu = 0, total = trigger_len + (n_excl ? excl_offsets[n_excl] - excl_offsets[0] : 0);
    for (size_t i = 0; i < h->n; i++) {
        const tag_rec *r = h->rec[i];
        size_t j = (size_t)(r->hash ^ (r->hash >> 29)) & (cap - 1);
        while (seen[j] && seen[j] != r) j = (j + 1) & (cap - 1);
        if (seen[j]) continue;
        seen[j] = r;
        uniq[nu] = r;
        names[nu] = r->name;
        frags[nu] = r->frag;
        nu++;
        total += r->blen - trigger_len + r->nlen + r->elen;
    }
    if (total >= UINT32_MAX) goto done; /* the general way */
    size_t n_off = 2 + 3 * nu + n_excl, k = 0, o = 0;
    data = xgr_malloc(total + 1);
    offsets = xgr_malloc(n_off * sizeof *offsets);
    if (!data || !offsets) {
        rc = XGR_ERR_NOMEM;
        goto done;
    }
    offsets[0] = 0;
    put_part(data, offsets, &k, &o, trigger, trigger_len);
    for (size_t i = 0; i < nu; i++) {
        const tag_rec *r = uniq[i];
        put_part(data, offsets, &k, &o, r->bytes + r->klen + trigger_len, r->blen - trigger_len);
        put_part(data, offsets, &k, &o, r->name, r->nlen);
        put_part(data, offsets, &k, &o, r->bytes + r->klen + r->blen, r->elen);
    }
    for (size_t i = 0; i < n_excl; i++)
        put_part(data, offsets, &k, &o, excl_data + excl_offsets[i],
                 excl_offsets[i + 1] - excl_offsets[i]);
    if ((rc = xgr_grammar_triggered_links(data, offsets, nu, n_excl, loop_after_dispatch, &g)))
        goto done;
    if (n_sp && (rc = xgr_grammar_spell_tokens(g, sp_data, sp_offsets, sp_ids, n_sp, &spelled)))
        goto done;
    /* Productive by construction: literals, the dispatch, and checked fragments. */
    rc = xgr_compile_linked_ex(spelled ? spelled : g, names, frags, nu, v, opts, 1, out);
done:
    xgr_grammar_release(spelled);
    xgr_grammar_release(g);
    free(data);
    free(offsets);
    free(uniq);
    free(names);
    free(frags);
    free((void *)seen);
    return rc;
}
