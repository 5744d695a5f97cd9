/* Entry packs (entry_pack.c): the cross-grammar cache's shareable mask entries as one byte
 * string, for the on-disk compile cache (docs/disk-cache.md, "Mask entry packs"). The
 * public functions are xgr_mask_pack_build / xgr_mask_pack_load (xgr2.h).
 * Internal header. */
#ifndef XGR_ENTRY_PACK_H
#define XGR_ENTRY_PACK_H

#include "compiled.h"

/* Whether e has only the parts a pack stores: a plain context-free form (accepted list,
 * rejected list or bitset) with its uncertain tokens and pop depths, TagDispatch runs, loop
 * units and pop suffix groups; not a REFINED entry, nor a region entry (sfx). */
int xgr_entry_packable(const xgr_mask_entry *e);

#endif
