/* A small JSON reader for the core's JSON-schema front end (json_schema_plain.c): the
 * document as a flat array of nodes (int32 ids, first-child / next-sibling links), strings
 * and numbers as spans of the text (not decoded). Internal header. */
#ifndef XGR_FRONT_JSON_DOM_H
#define XGR_FRONT_JSON_DOM_H

#include <stddef.h>
#include <stdint.h>

#include "../common/util.h"

enum { JSON_DOM_NULL, JSON_DOM_FALSE, JSON_DOM_TRUE, JSON_DOM_NUM, JSON_DOM_STR, JSON_DOM_ARR, JSON_DOM_OBJ };

typedef struct {
    uint8_t kind;
    uint8_t plain;     /* JSON_DOM_STR: printable ASCII without '"' or '\\' */
    uint8_t key_plain; /* the member key, likewise */
    uint8_t is_int;    /* JSON_DOM_NUM: -?(0|[1-9][0-9]*) */
    int32_t off, len;  /* JSON_DOM_STR: the content between the quotes; JSON_DOM_NUM: the number;
                        * JSON_DOM_OBJ / JSON_DOM_ARR: the text from its bracket through the
                        * closing one */
    int32_t key_off, key_len; /* a member's key (key_off -1: not a member) */
    int32_t first, next; /* first child, next sibling (-1: none) */
    int32_t n;           /* children */
} json_dom_node;

/* Status: read, not JSON (or nested deeper than the limit), out of memory. */
enum { JSON_DOM_OK = 0, JSON_DOM_NO = 1, JSON_DOM_NOMEM = 2 };

typedef struct {
    const char *s; /* the text (borrowed) */
    size_t len, i;
    int max_depth;
    XGR_VEC(json_dom_node) nodes;
} json_dom;

/* Reads the JSON value that is all of s[0..len) (whitespace around it allowed) into a zeroed
 * `d`, nesting at most max_depth containers deep; *root is its node. Strings are checked
 * only for raw control characters and their end (escapes are not decoded or validated: a
 * string with one is not plain); numbers for their JSON shape up to the fraction. The
 * caller frees d with json_dom_free, whatever the status. */
int json_dom_parse(json_dom *d, const char *s, size_t len, int max_depth, int32_t *root);
void json_dom_free(json_dom *d);

#endif
