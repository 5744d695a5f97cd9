/* A growing text (always NUL-terminated) and appending to it, for the core's JSON-schema
 * front end (json_schema_plain.c, json_key_excl.c). Internal header. */
#ifndef XGR_FRONT_JSON_TEXT_H
#define XGR_FRONT_JSON_TEXT_H

#include <string.h>

#include "../common/util.h"
#include "json_dom.h"

typedef XGR_VEC(char) json_text;

/* Appends s[0..n); JSON_DOM_OK, or JSON_DOM_NOMEM (the text unchanged). */
static inline int json_put(json_text *b, const char *s, size_t n) {
    if (XGR_VEC_RESERVE(*b, b->len + n + 1)) return JSON_DOM_NOMEM;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
    return JSON_DOM_OK;
}

static inline int json_puts(json_text *b, const char *s) { return json_put(b, s, strlen(s)); }

#endif
