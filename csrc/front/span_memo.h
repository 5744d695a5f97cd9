/* A memo of texts by a span of a source text (equal spans, one entry), for the core's
 * JSON-schema front end: a subschema's expression by its canonical text. Internal header. */
#ifndef XGR_FRONT_SPAN_MEMO_H
#define XGR_FRONT_SPAN_MEMO_H

#include <stddef.h>
#include <stdint.h>

#include "../common/util.h"

typedef struct {
    uint32_t hash;
    int32_t off, len;   /* the key: src[off .. off + len) */
    int32_t val, val_len; /* the value in `vals` */
} span_memo_entry;

typedef struct {
    const char *src;
    XGR_VEC(span_memo_entry) entries;
    int32_t *slot; /* open addressing over entries (-1: empty), cap slots */
    size_t cap;
    XGR_VEC(char) vals;
} span_memo;

/* The value stored for the span src[off .. off + len), or NULL (*n its length). */
const char *span_memo_get(span_memo *m, int32_t off, int32_t len, size_t *n);
/* Stores value v[0..n) for the span (not present). Returns 0, or 2 when out of memory or
 * past int32 offsets (json_dom.h's JSON_DOM_NOMEM; the memo is then unchanged). */
int span_memo_put(span_memo *m, int32_t off, int32_t len, const char *v, size_t n);
void span_memo_free(span_memo *m);

#endif
