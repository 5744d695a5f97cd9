/* Token-level terminals (`Token(k)` in EBNF, token formats in structural tags) as bytes.
 *
 * The parser is byte-level, so a terminal that must match one specific token id k is
 * spelled as a marker: 0xFF followed by five UTF-8 continuation bytes carrying k in
 * base 64 (most significant first). 0xFF never occurs in UTF-8, so grammar text cannot
 * produce it; a grammar that contains markers rejects every text token whose bytes
 * contain 0xFF, and the matcher feeds token k as its marker where the grammar admits
 * that marker (runtime/matcher.c). Ids up to 2^30 - 1.
 * Internal header. */
#ifndef XGR_TOKEN_MARKER_H
#define XGR_TOKEN_MARKER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define XGR_TOKEN_MARKER_LEN 6
#define XGR_TOKEN_MARKER_LEAD 0xFF
#define XGR_TOKEN_ID_MAX ((int32_t)((1 << 30) - 1))

static inline void xgr_token_marker(int32_t id, uint8_t out[XGR_TOKEN_MARKER_LEN]) {
    out[0] = XGR_TOKEN_MARKER_LEAD;
    for (int i = 0; i < 5; i++) out[1 + i] = (uint8_t)(0x80 | ((uint32_t)id >> (6 * (4 - i)) & 0x3F));
}

/* The id of the marker at s (n >= 6 bytes available), or -1 when s is not a marker. */
static inline int32_t xgr_token_marker_id(const uint8_t *s, size_t n) {
    if (n < XGR_TOKEN_MARKER_LEN || s[0] != XGR_TOKEN_MARKER_LEAD) return -1;
    int32_t id = 0;
    for (int i = 1; i < XGR_TOKEN_MARKER_LEN; i++) {
        if ((s[i] & 0xC0) != 0x80) return -1;
        id = id << 6 | (s[i] & 0x3F);
    }
    return id;
}

/* The first marker in s[*pos..n): its id, with *pos at it; -1 when there is none. */
static inline int32_t xgr_token_marker_find(const uint8_t *s, size_t n, size_t *pos) {
    for (size_t i = *pos; i < n;) {
        const uint8_t *p = memchr(s + i, XGR_TOKEN_MARKER_LEAD, n - i);
        if (!p) break;
        i = (size_t)(p - s);
        int32_t id = xgr_token_marker_id(p, n - i);
        if (id >= 0) {
            *pos = i;
            return id;
        }
        i++;
    }
    return -1;
}

/* Token classes (`ExcludeToken(s1, ..., sn)`: any one token whose id is none of the s_i)
 * are spelled as a span of markers: XGR_TOKEN_CLASS_OPEN, the s_i ascending, then
 * XGR_TOKEN_CLASS_CLOSE. The two are pseudo ids above every vocabulary; no token is fed
 * as them, so a span is only ever fed whole, by the matcher, for a token of the class
 * (runtime/token_class.c). */
#define XGR_TOKEN_CLASS_OPEN XGR_TOKEN_ID_MAX
#define XGR_TOKEN_CLASS_CLOSE (XGR_TOKEN_ID_MAX - 1)
#define XGR_TOKEN_BIG (XGR_TOKEN_ID_MAX - 2)
#define XGR_TOKEN_PSEUDO_MIN XGR_TOKEN_BIG

/* A `Token(k)` with k >= XGR_TOKEN_PSEUDO_MIN (no vocabulary has such a token; upstream
 * parses any int32 id and refuses it when compiling) is spelled as three markers:
 * XGR_TOKEN_BIG, k >> 16, k & 0xFFFF. It prints back as Token(k); compiling refuses it. */
#define XGR_TOKEN_BIG_LEN (3 * XGR_TOKEN_MARKER_LEN)

static inline void xgr_token_big(int32_t id, uint8_t out[XGR_TOKEN_BIG_LEN]) {
    xgr_token_marker(XGR_TOKEN_BIG, out);
    xgr_token_marker((int32_t)((uint32_t)id >> 16), out + XGR_TOKEN_MARKER_LEN);
    xgr_token_marker(id & 0xFFFF, out + 2 * XGR_TOKEN_MARKER_LEN);
}

/* The id of a big spelling at s (n bytes available), or -1. */
static inline int32_t xgr_token_big_id(const uint8_t *s, size_t n) {
    if (n < XGR_TOKEN_BIG_LEN || xgr_token_marker_id(s, n) != XGR_TOKEN_BIG) return -1;
    int32_t hi = xgr_token_marker_id(s + XGR_TOKEN_MARKER_LEN, n - XGR_TOKEN_MARKER_LEN);
    int32_t lo = xgr_token_marker_id(s + 2 * XGR_TOKEN_MARKER_LEN, n - 2 * XGR_TOKEN_MARKER_LEN);
    if (hi < 0 || hi > 0x7FFF || lo < 0 || lo > 0xFFFF) return -1;
    return (int32_t)((uint32_t)hi << 16 | (uint32_t)lo);
}

/* If s[0..n) starts with a whole class span: its length in bytes, with *n_ids its ids
 * (read them with xgr_token_marker_id at s + 6 * (1 + i)); else 0. */
static inline size_t xgr_token_class_span(const uint8_t *s, size_t n, int32_t *n_ids) {
    if (xgr_token_marker_id(s, n) != XGR_TOKEN_CLASS_OPEN) return 0;
    for (size_t i = XGR_TOKEN_MARKER_LEN; i + XGR_TOKEN_MARKER_LEN <= n; i += XGR_TOKEN_MARKER_LEN) {
        int32_t id = xgr_token_marker_id(s + i, n - i);
        if (id < 0 || id == XGR_TOKEN_CLASS_OPEN) return 0;
        if (id == XGR_TOKEN_CLASS_CLOSE) {
            *n_ids = (int32_t)(i / XGR_TOKEN_MARKER_LEN - 1);
            return i + XGR_TOKEN_MARKER_LEN;
        }
    }
    return 0;
}

#endif
