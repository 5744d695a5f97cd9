/* The key of a subschema the core's JSON-schema front end asks its caller to convert
 * (json_schema_plain.c: an `xgr_json_string_form` with keyword "schema"). Internal header. */
#ifndef XGR_FRONT_JSON_FORM_KEY_H
#define XGR_FRONT_JSON_FORM_KEY_H

#include <stddef.h>
#include <stdint.h>

#include "json_dom.h"
#include "json_text.h"

/* Appends to `out` the compact JSON object {"type":"<type>", then each member of
 * `members` (n member node ids of d; -1 entries skipped) as "key":value, its key and value
 * spelled as d's text spells them (a string between its quotes as written, a number as
 * written), in the order given}: the subschema of one type with just those keywords, for
 * the caller to convert. JSON_DOM_NO when a member is not a plain-keyed scalar (the caller
 * then leaves the schema to the converter), JSON_DOM_NOMEM when out of memory. */
int json_form_key(const json_dom *d, const char *type, const int32_t *members, size_t n, json_text *out);

#endif
