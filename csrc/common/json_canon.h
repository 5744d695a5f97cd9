/* The canonical text of a JSON document (json_canon.c; declared for callers in xgr2.h as
 * xgr_json_canonical). */
#ifndef XGR_COMMON_JSON_CANON_H
#define XGR_COMMON_JSON_CANON_H

#include "util.h"

/* xgr_json_canonical, but numbers spelled by their decimal value (json_canon.c
 * number_value) and object members in key order, so that values JSON Schema calls equal
 * (1, 1.0, 10e-1; {"a":1,"b":2}, {"b":2,"a":1}) have one text: uniqueItems
 * (parse/unique.h). `out` must hold XGR_JSON_VALUE_OUT(len) bytes. */
#define XGR_JSON_VALUE_OUT(len) (3 * (len) + 24)
int xgr_json_canonical_value(const char *text, size_t len, int32_t limit, char *out,
                             size_t *out_len, int32_t *known);

#endif
