/* xgr_structural_tag_spans: where the tag objects sit in a structural tag's JSON text.
 *
 * A tool-calling request repeats tools seen in earlier requests in new combinations; the
 * text of each tag is what identifies a tool, and finding those texts must not cost a
 * full parse of the document (the schemas inside are most of its bytes). This is a
 * strict JSON scanner (RFC 8259, no extensions) that descends only through the keys a
 * structural tag nests formats under: "format", "content", "elements" (objects and arrays
 * of objects) and records the elements of every "tags" array it reaches. */
#include "front.h"

#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define TS_MAX_DEPTH 256

typedef struct {
    const uint8_t *s;
    size_t n, i;
    XGR_VEC(uint64_t) out; /* (begin, end) byte offsets */
    int bad;               /* not JSON, or a shape the caller must read in full */
} ts_ctx;

static void ts_ws(ts_ctx *c) {
    size_t i = c->i, n = c->n;
    const uint8_t *s = c->s;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    c->i = i;
}

static int is_hex(uint8_t ch) {
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

/* Bytes a string scan must stop at: the quote, the backslash and control bytes. */
static const uint8_t ts_stop[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    ['"'] = 1, ['\\'] = 1};

/* The first stop byte at or after i (n if none). Most of a request is schema text: plain
 * runs are skipped 16 bytes at a time where SSE2 exists (every x86-64), a lookup a byte
 * after that. */
static size_t skip_plain(const uint8_t *s, size_t i, size_t n) {
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'),
                  ctl = _mm_set1_epi8(0x1f);
    for (; i + 16 <= n; i += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        /* x <= 0x1f unsigned exactly when min(x, 0x1f) == x */
        __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bslash)),
                                    _mm_cmpeq_epi8(_mm_min_epu8(x, ctl), x));
        unsigned m = (unsigned)_mm_movemask_epi8(stop);
        if (m) return i + (size_t)__builtin_ctz(m);
    }
#endif
    while (i < n && !ts_stop[s[i]]) i++;
    return i;
}

/* A string at c->i (the opening quote); sets *key to its contents' span. UTF-8 is checked
 * by the caller's decoder later; here only the JSON escapes and control bytes matter. */
static void ts_string(ts_ctx *c, size_t *kb, size_t *ke) {
    c->i++;
    *kb = c->i;
    while (c->i < c->n) {
        /* Most of a request is schema text: skip plain runs with one lookup a byte (in
         * locals: a store through c could alias the bytes read). */
        size_t i = c->i, n = c->n;
        const uint8_t *s = c->s;
        i = skip_plain(s, i, n);
        c->i = i;
        if (i >= n) break;
        uint8_t ch = c->s[c->i];
        if (ch == '"') {
            *ke = c->i++;
            return;
        }
        if (ch < 0x20) break;
        if (ch == '\\') {
            if (c->i + 1 >= c->n) break;
            uint8_t e = c->s[c->i + 1];
            if (e == 'u') {
                if (c->i + 5 >= c->n || !is_hex(c->s[c->i + 2]) || !is_hex(c->s[c->i + 3]) ||
                    !is_hex(c->s[c->i + 4]) || !is_hex(c->s[c->i + 5]))
                    break;
                c->i += 6;
                continue;
            }
            if (!strchr("\"\\/bfnrt", e) || e == 0) break;
            c->i += 2;
            continue;
        }
        c->i++;
    }
    c->bad = 1;
}

static void ts_number(ts_ctx *c) {
    size_t i = c->i;
    if (i < c->n && c->s[i] == '-') i++;
    if (i < c->n && c->s[i] == '0') i++;
    else if (i < c->n && c->s[i] >= '1' && c->s[i] <= '9')
        while (i < c->n && c->s[i] >= '0' && c->s[i] <= '9') i++;
    else {
        c->bad = 1;
        return;
    }
    if (i < c->n && c->s[i] == '.') {
        if (++i >= c->n || c->s[i] < '0' || c->s[i] > '9') {
            c->bad = 1;
            return;
        }
        while (i < c->n && c->s[i] >= '0' && c->s[i] <= '9') i++;
    }
    if (i < c->n && (c->s[i] == 'e' || c->s[i] == 'E')) {
        i++;
        if (i < c->n && (c->s[i] == '+' || c->s[i] == '-')) i++;
        if (i >= c->n || c->s[i] < '0' || c->s[i] > '9') {
            c->bad = 1;
            return;
        }
        while (i < c->n && c->s[i] >= '0' && c->s[i] <= '9') i++;
    }
    c->i = i;
}

enum { TS_SKIP = 0, TS_DESCEND = 1, TS_TAGS = 2 };

static void ts_value(ts_ctx *c, int mode, int depth);

static int key_is(const ts_ctx *c, size_t kb, size_t ke, const char *k) {
    size_t n = strlen(k);
    return ke - kb == n && memcmp(c->s + kb, k, n) == 0;
}

/* An object at c->i. On the descent path its "format"/"content"/"elements" values are
 * descended and a "tags" array's elements recorded; a repeated one of those keys makes
 * the document ambiguous to a second reader (JSON parsers keep the last), so it is bad. */
static void ts_object(ts_ctx *c, int descend, int depth) {
    unsigned seen = 0;
    c->i++;
    ts_ws(c);
    if (c->i < c->n && c->s[c->i] == '}') {
        c->i++;
        return;
    }
    while (!c->bad) {
        if (c->i >= c->n || c->s[c->i] != '"') {
            c->bad = 1;
            return;
        }
        size_t kb = 0, ke = 0;
        ts_string(c, &kb, &ke);
        if (c->bad) return;
        ts_ws(c);
        if (c->i >= c->n || c->s[c->i] != ':') {
            c->bad = 1;
            return;
        }
        c->i++;
        ts_ws(c);
        int mode = TS_SKIP;
        if (descend) {
            static const char *const keys[4] = {"format", "content", "elements", "tags"};
            for (unsigned k = 0; k < 4; k++)
                if (key_is(c, kb, ke, keys[k])) {
                    if (seen & (1u << k)) {
                        c->bad = 1;
                        return;
                    }
                    seen |= 1u << k;
                    mode = k == 3 ? TS_TAGS : TS_DESCEND;
                }
        }
        ts_value(c, mode, depth + 1);
        if (c->bad) return;
        ts_ws(c);
        if (c->i < c->n && c->s[c->i] == ',') {
            c->i++;
            ts_ws(c);
            continue;
        }
        if (c->i < c->n && c->s[c->i] == '}') {
            c->i++;
            return;
        }
        c->bad = 1;
    }
}

static void ts_array(ts_ctx *c, int mode, int depth) {
    c->i++;
    ts_ws(c);
    if (c->i < c->n && c->s[c->i] == ']') {
        c->i++;
        return;
    }
    while (!c->bad) {
        size_t b = c->i;
        ts_value(c, mode == TS_DESCEND ? TS_DESCEND : TS_SKIP, depth + 1);
        if (c->bad) return;
        if (mode == TS_TAGS && (XGR_VEC_PUSH(c->out, (uint64_t)b) ||
                                XGR_VEC_PUSH(c->out, (uint64_t)c->i))) {
            c->bad = 2; /* out of memory */
            return;
        }
        ts_ws(c);
        if (c->i < c->n && c->s[c->i] == ',') {
            c->i++;
            ts_ws(c);
            continue;
        }
        if (c->i < c->n && c->s[c->i] == ']') {
            c->i++;
            return;
        }
        c->bad = 1;
    }
}

static void ts_value(ts_ctx *c, int mode, int depth) {
    if (depth > TS_MAX_DEPTH || c->i >= c->n) {
        c->bad = 1;
        return;
    }
    uint8_t ch = c->s[c->i];
    size_t kb, ke;
    switch (ch) {
    case '{': ts_object(c, mode == TS_DESCEND, depth); return;
    case '[': ts_array(c, mode, depth); return;
    case '"': ts_string(c, &kb, &ke); return;
    case 't':
    case 'f':
    case 'n': {
        const char *w = ch == 't' ? "true" : ch == 'f' ? "false" : "null";
        size_t len = strlen(w);
        if (c->n - c->i < len || memcmp(c->s + c->i, w, len) != 0) c->bad = 1;
        else c->i += len;
        return;
    }
    default: ts_number(c); return;
    }
}

int xgr_structural_tag_spans(const char *text, size_t len, uint64_t **spans, size_t *n_spans) {
    if ((!text && len) || !spans || !n_spans)
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_structural_tag_spans: bad argument");
    *spans = NULL;
    *n_spans = 0;
    ts_ctx c;
    memset(&c, 0, sizeof c);
    c.s = (const uint8_t *)text;
    c.n = len;
    ts_ws(&c);
    if (c.i < c.n && c.s[c.i] == '{') ts_object(&c, 1, 0);
    else c.bad = 1;
    ts_ws(&c);
    if (!c.bad && c.i != c.n) c.bad = 1;
    if (c.bad) {
        XGR_VEC_FREE(c.out);
        return c.bad == 2 ? XGR_ERR_NOMEM
                          : xgr_fail(XGR_ERR_SYNTAX, "not a structural tag this scanner can split "
                                                     "(invalid JSON or a repeated key)");
    }
    *spans = c.out.data;
    *n_spans = c.out.len / 2;
    return XGR_OK;
}
