/* Sharpening (sharpen.c): a grammar's view of a context-free entry, which may be shared
 * with other grammars: its uncertain tokens are re-decided by this grammar's follow
 * checks, a TagDispatch state's run by run with its reference starts checked.
 * Internal header. */
#ifndef XGR_SHARPEN_H
#define XGR_SHARPEN_H

#include "compiled.h"

/* The REFINED entry of `state` over its context-free entry `raw` (retained); `rep` >= 0:
 * raw is the loop entry of state under unit repetition `rep`. */
int xgr_sharpen(xgr_compiled *c, xgr_parser *p, xgr_follow *fo, int32_t state,
                int32_t rep, xgr_mask_entry *raw, xgr_mask_entry **out);

#endif
