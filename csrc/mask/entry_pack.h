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

/* The pack's byte writer and reader, shared with the per-grammar layer packs
 * (layer_pack.c): every array padded to 8 bytes. */
typedef XGR_VEC(uint8_t) xgr_pack_bytes;
typedef struct {
    const uint8_t *p;
    size_t left;
} xgr_pack_reader;
/* Appends n bytes of p and zero padding to the next multiple of 8. */
int xgr_pack_put(xgr_pack_bytes *b, const void *p, size_t n);
/* The next count * size bytes (8-padded), or NULL when fewer are left. */
const void *xgr_pack_take(xgr_pack_reader *r, size_t count, size_t size);
/* Whether id is a text token of v. */
int xgr_pack_is_text(const struct xgr_vocab *v, int32_t id);
/* A packable entry (xgr_entry_packable) without its cache key: its fields and arrays. */
int xgr_pack_put_plain(xgr_pack_bytes *b, const struct xgr_vocab *v, const xgr_mask_entry *e);
/* Reads and checks what xgr_pack_put_plain wrote: a copy (map NULL) or an entry borrowing
 * its arrays from map (holding a reference). XGR_ERR_INVALID_ARG with *why naming the
 * failed check. */
int xgr_pack_read_plain(xgr_pack_reader *r, const struct xgr_vocab *v, xgr_mask_entry **out,
                        const char **why, xgr_file_map *map);

#endif
