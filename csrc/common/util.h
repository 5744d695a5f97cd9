/* Shared helpers for the C core: status codes, the thread-local error message,
 * checked allocation and a growable-array macro. Internal header. */
#ifndef XGR_UTIL_H
#define XGR_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../include/xgr2.h"

/* Sets the calling thread's error message (printf-style) and returns `code`,
 * so call sites read `return xgr_fail(XGR_ERR_SYNTAX, "...", ...);`. */
int xgr_fail(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The status code of the calling thread's latest xgr_fail (XGR_OK before any): lets a
 * caller that only saw a sentinel (an IR builder's -1) return the failing call's status
 * instead of guessing it from the message. */
int xgr_last_status(void);

/* Checked allocation: on failure they set an out-of-memory error message and
 * return NULL; callers must propagate XGR_ERR_NOMEM. */
void *xgr_malloc(size_t n);
void *xgr_calloc(size_t count, size_t size);
void *xgr_realloc(void *p, size_t n);
char *xgr_strndup(const char *s, size_t n);

/* A link of a chained hash table, the first member of each item struct (so an item and
 * its link convert to each other); `hash` chooses the bucket: hash & (buckets - 1). */
typedef struct xgr_chain {
    struct xgr_chain *next;
    uint64_t hash;
} xgr_chain;
/* Doubles a chained table of *n buckets (or makes one of `first`, a power of two), moving
 * every item to its bucket in the new array. 0, or -1 without memory (table unchanged). */
int xgr_chain_grow(xgr_chain ***buckets, size_t *n, size_t first);
/* Takes item `it` out of its bucket, found by identity (no key comparison). */
void xgr_chain_unlink(xgr_chain **buckets, size_t n, xgr_chain *it);

/* A growable array of T: `XGR_VEC(int32_t) v = {0}; if (XGR_VEC_PUSH(v, x)) fail;`
 * XGR_VEC_PUSH / XGR_VEC_RESERVE evaluate to 0 on success, -1 on OOM. */
#define XGR_VEC(T) struct { T *data; size_t len; size_t cap; }
int xgr_vec_grow_(void **data, size_t *cap, size_t need, size_t elem);
#define XGR_VEC_RESERVE(v, n)                                                    \
    ((n) <= (v).cap ? 0                                                          \
                    : xgr_vec_grow_((void **)&(v).data, &(v).cap, (n), sizeof(*(v).data)))
#define XGR_VEC_PUSH(v, x)                                                       \
    (XGR_VEC_RESERVE((v), (v).len + 1) ? -1 : ((v).data[(v).len++] = (x), 0))
#define XGR_VEC_FREE(v) (free((v).data), (v).data = NULL, (v).len = (v).cap = 0)

/* A byte buffer for serialised keys, and appending a 32-bit word to it (host order: keys
 * are only compared within one process). */
typedef XGR_VEC(uint8_t) xgr_keybuf;
typedef XGR_VEC(size_t) xgr_spanvec; /* (offset, length) pairs into an xgr_keybuf */
static inline int xgr_keybuf_put32(xgr_keybuf *b, uint32_t x) {
    if (XGR_VEC_RESERVE(*b, b->len + 4)) return XGR_ERR_NOMEM;
    memcpy(b->data + b->len, &x, 4);
    b->len += 4;
    return XGR_OK;
}

/* Index of the lowest set bit of x != 0, and the number of set bits (bitset scans). */
static inline int xgr_ctz64(uint64_t x) {
#if defined(__GNUC__)
    return __builtin_ctzll(x);
#else
    int n = 0;
    while (!(x & 1)) x >>= 1, n++;
    return n;
#endif
}
/* Without a popcnt instruction in the target (the default x86-64 baseline), GCC's
 * builtin is a call into libgcc per word; the bit-slicing form stays inline. */
static inline int xgr_popcount64(uint64_t x) {
#if defined(__GNUC__) && defined(__POPCNT__)
    return __builtin_popcountll(x);
#else
    x = x - ((x >> 1) & 0x5555555555555555ULL);
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
    return (int)((x * 0x0101010101010101ULL) >> 56);
#endif
}

/* Length of the longest common prefix of a[0..la) and b[0..lb) (token walks share parser
 * rows or walker states for it). */
static inline uint32_t xgr_common_prefix(const uint8_t *a, uint32_t la, const uint8_t *b, uint32_t lb) {
    uint32_t n = la < lb ? la : lb, k = 0;
    while (k < n && a[k] == b[k]) k++;
    return k;
}

/* 64-bit mixing used by every hash in the core (splitmix64 finaliser). */
static inline uint64_t xgr_mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}
/* Order-sensitive combine: combine(a,b) != combine(b,a). */
static inline uint64_t xgr_hash_combine(uint64_t seed, uint64_t v) {
    return xgr_mix64(seed ^ (v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2)));
}
/* Hash of a byte string (8 bytes at a time), from `seed`. */
static inline uint64_t xgr_hash_bytes(uint64_t seed, const uint8_t *p, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        seed = xgr_hash_combine(seed, w);
    }
    for (; i < n; i++) seed = xgr_hash_combine(seed, p[i]);
    return seed;
}

#endif
