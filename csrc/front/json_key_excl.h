/* The key of an extra object member in the core's JSON-schema front end: a JSON string
 * that is none of the listed property names (additionalProperties beside properties).
 * Internal header. */
#ifndef XGR_FRONT_JSON_KEY_EXCL_H
#define XGR_FRONT_JSON_KEY_EXCL_H

#include <stdint.h>

#include "../common/util.h"

typedef XGR_VEC(char) json_text;

/* Appends to `rules` the EBNF rule `NAME ::= ...` (with NAME = name) for the rest of a key
 * after its opening quote, up to and including the closing quote, whose text is not one of
 * the n names names[i] = src[off[i] .. off[i] + len[i]) (printable ASCII without '"' or
 * '\\', pairwise distinct), with the Python converter's spellings (emit.key_not_in): a
 * character that follows a listed name's prefix is raw, the first one off every name's path
 * any key spelling (raw, a two-character escape, or a `\u` escape of a character that is
 * not printable ASCII: rule `xu`), everything after it any JSON string character (rule
 * `char`). The caller defines `char` and `xu` (JSON_KEY_EXCL_XU). Returns 0, or 2 when out
 * of memory (json_dom.h's JSON_DOM_NOMEM). */
int json_key_excl_write(const char *src, const int32_t *off, const int32_t *len, int32_t n,
                        const char *name, json_text *rules);

/* Rule `xu`: a `\u` escape (a surrogate pair included) of a character that is not printable
 * ASCII (0x20-0x7f). */
extern const char JSON_KEY_EXCL_XU[];

#endif
