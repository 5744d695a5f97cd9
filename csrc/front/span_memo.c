/* A memo of texts by a span of a source text: FNV-1a over the span, linear probing. */
#include "span_memo.h"

#include <string.h>

#include "json_dom.h"

static uint32_t span_hash(const char *s, int32_t n) {
    uint32_t h = 2166136261u;
    for (int32_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

/* The slot of the span: its entry's, or the empty one where it would go (cap > 0). */
static size_t find(const span_memo *m, uint32_t h, int32_t off, int32_t len) {
    size_t mask = m->cap - 1, i = h & mask;
    for (;; i = (i + 1) & mask) {
        int32_t k = m->slot[i];
        if (k < 0) return i;
        const span_memo_entry *e = &m->entries.data[k];
        if (e->hash == h && e->len == len && memcmp(m->src + e->off, m->src + off, (size_t)len) == 0) return i;
    }
}

static int grow(span_memo *m) {
    size_t cap = m->cap ? m->cap * 2 : 256;
    int32_t *slot = xgr_malloc(cap * sizeof *slot);
    if (!slot) return JSON_DOM_NOMEM;
    memset(slot, 0xff, cap * sizeof *slot);
    free(m->slot);
    m->slot = slot;
    m->cap = cap;
    for (size_t k = 0; k < m->entries.len; k++) {
        const span_memo_entry *e = &m->entries.data[k];
        m->slot[find(m, e->hash, e->off, e->len)] = (int32_t)k;
    }
    return JSON_DOM_OK;
}

const char *span_memo_get(span_memo *m, int32_t off, int32_t len, size_t *n) {
    if (!m->cap) return NULL;
    int32_t k = m->slot[find(m, span_hash(m->src + off, len), off, len)];
    if (k < 0) return NULL;
    *n = (size_t)m->entries.data[k].val_len;
    return m->vals.data + m->entries.data[k].val;
}

int span_memo_put(span_memo *m, int32_t off, int32_t len, const char *v, size_t n) {
    if (n > INT32_MAX || m->vals.len > (size_t)INT32_MAX - n) return JSON_DOM_NOMEM;
    if ((m->entries.len + 1) * 2 > m->cap && grow(m)) return JSON_DOM_NOMEM;
    uint32_t h = span_hash(m->src + off, len);
    span_memo_entry e = {h, off, len, (int32_t)m->vals.len, (int32_t)n};
    if (XGR_VEC_RESERVE(m->vals, m->vals.len + n + 1) || XGR_VEC_PUSH(m->entries, e)) return JSON_DOM_NOMEM;
    memcpy(m->vals.data + m->vals.len, v, n);
    m->vals.len += n;
    m->slot[find(m, h, off, len)] = (int32_t)(m->entries.len - 1);
    return JSON_DOM_OK;
}

void span_memo_free(span_memo *m) {
    XGR_VEC_FREE(m->entries);
    free(m->slot);
    XGR_VEC_FREE(m->vals);
}
