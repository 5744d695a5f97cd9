/* The key of an extra object member in the core's JSON-schema front end: a JSON string
 * that is none of the listed property names (additionalProperties beside properties).
 * Internal header. */
#ifndef XGR_FRONT_JSON_KEY_EXCL_H
#define XGR_FRONT_JSON_KEY_EXCL_H

#include <stdint.h>

#include "json_text.h"

/* The character sets of the `xc<i>` rules written into one grammar so far (each a key
 * spelling of any character outside the set): shared by every trie of the grammar. */
typedef struct {
    int n;
    char c[96];
} json_key_set;
typedef struct {
    XGR_VEC(json_key_set) sets;
    json_text sigs;          /* the names of each xk<i> rule written, '\n'-joined */
    XGR_VEC(int32_t) sig_at; /* per xk<i>: offset and length of its names in sigs */
} json_key_excl_ctx;

void json_key_excl_ctx_free(json_key_excl_ctx *ctx);

/* Rule xk<*k> for the rest of a key after its opening quote, up to and including the
 * closing quote, whose text is not one of the n names names[i] = src[off[i] .. off[i] +
 * len[i]) (printable ASCII without '"' or '\\', pairwise distinct), with the Python
 * converter's spellings (emit.key_not_in): a character that follows a listed name's prefix
 * is raw, the first one off every name's path any key spelling (raw, a two-character escape,
 * or a `\u` escape of a character that is not printable ASCII: rule `xu`; rules `xc<i>`),
 * everything after it any JSON string character (rule `char`). Written into `rules` once per
 * list of names and grammar (`ctx`, as the converter shares its key rules). The caller
 * defines `char`, `xu` and `xr` (JSON_KEY_EXCL_XU). Returns 0, or 2 when out of memory
 * (json_dom.h's JSON_DOM_NOMEM). */
int json_key_excl_rule(json_key_excl_ctx *ctx, const char *src, const int32_t *off,
                       const int32_t *len, int32_t n, json_text *rules, int32_t *k);

/* Rules `xu`, a `\u` escape (a surrogate pair included) of a character that is not printable
 * ASCII (0x20-0x7f), and `xr`, the rest of a key (`char* "\""`). */
extern const char JSON_KEY_EXCL_XU[];

#endif
