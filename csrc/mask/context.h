/* Caller-context entries shared across grammars (context.c): a pair slot's verdicts on
 * the child state's raw uncertain tokens with the caller on the stack, keyed by the
 * caller rule's closure, and each grammar's REFINED entry from them.
 * Internal header. */
#ifndef XGR_CONTEXT_H
#define XGR_CONTEXT_H

#include "compiled.h"

/* The shared pair entry of pair slot `slot` over `raw` (the child's context-free entry),
 * looked up in, or computed into, the cross-grammar cache under the caller rule's key. */
int xgr_context_shared_pair_entry(xgr_compiled *c, xgr_parser *p, xgr_follow *fo, int32_t slot,
                                  const xgr_rule_key *key, const xgr_mask_entry *raw,
                                  xgr_mask_entry **out);

/* This grammar's REFINED entry over `base` (the child's sharpened plain entry) from a
 * shared pair entry. */
int xgr_context_refine_from_pair(xgr_compiled *c, xgr_follow *fo, int32_t caller_rule,
                                 const xgr_mask_entry *base, const xgr_mask_entry *pair,
                                 xgr_mask_entry **out);

#endif
