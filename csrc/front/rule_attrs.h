/* Rule-head attributes of the EBNF front end: `name[max_tokens=3, lazy] ::= body`
 * (upstream xgrammar 0.2.8's syntax; semantics in parse/attrs.c). Internal header. */
#ifndef XGR_FRONT_RULE_ATTRS_H
#define XGR_FRONT_RULE_ATTRS_H

#include <stddef.h>
#include <stdint.h>

#include "../ir/ir.h"

/* Length of the bracket group starting at s[i] == '[' (up to its ']' on the same line,
 * quoted strings skipped), or 0 when there is none. */
size_t xgr_attrs_group_len(const uint8_t *s, size_t n, size_t i);

/* Parses the attribute group s[i .. i + len) (from '[' to ']') into *out (capture labels
 * are added to g's names pool). On a malformed group returns XGR_ERR_SYNTAX, on an invalid
 * value XGR_ERR_SEMANTIC, with *err_pos the offending offset and a message in msg[cap]
 * (upstream's phrases: "Assign should be preceded by an identifier", "The temperature
 * must be a finite non-negative number", "The capture name must not be empty");
 * XGR_ERR_NOMEM on OOM. */
int xgr_attrs_parse(const uint8_t *s, size_t i, size_t len, xgr_grammar *g,
                    xgr_rule_attrs *out, size_t *err_pos, char *msg, size_t cap);

#endif
