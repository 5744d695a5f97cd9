/* A set of byte strings, each with a small integer key, deduplicated through a hash table
 * and copied into one buffer: the distinct suffixes that many tokens leave after a pop or
 * a loop's exit, so a grammar decides each once from compact memory (compiled.h
 * xgr_region_sfx). Single-threaded; internal header. */
#ifndef XGR_SUFFIX_SET_H
#define XGR_SUFFIX_SET_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int32_t n;      /* distinct (key, bytes) pairs so far, numbered in order of arrival */
    int32_t *key;   /* per pair */
    uint32_t *off;  /* per pair: bytes[off[g] .. off[g + 1]) */
    uint8_t *bytes;
    size_t used, bcap;
    int32_t *slot; /* open addressing: pair number or -1 */
    uint64_t *hash; /* per pair */
    size_t cap;
} xgr_sfx_set;

/* Room for up to `max` pairs; XGR_OK or XGR_ERR_NOMEM (s is then safe to free). */
int xgr_sfx_set_init(xgr_sfx_set *s, int32_t max);
/* The pair number of (key, b[0..n)), added if new; -1 when out of memory. At most `max`
 * distinct pairs. */
int32_t xgr_sfx_set_add(xgr_sfx_set *s, int32_t key, const uint8_t *b, uint32_t n);
void xgr_sfx_set_free(xgr_sfx_set *s);

#endif
