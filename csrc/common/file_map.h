/* A read-only file image with a reference count (file_map.c): the bytes of a file mapped
 * with mmap (or read into memory where mapping is not safe), released when the last holder
 * lets go. Mask entries loaded from a pack borrow their arrays from one (mask/entry_pack.c)
 * instead of copying them, so processes that load the same pack share its pages.
 * The public handle is xgr2.h's xgr_file_map. Internal header. */
#ifndef XGR_FILE_MAP_H
#define XGR_FILE_MAP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../include/xgr2.h"

struct xgr_file_map {
    atomic_int refs;
    const uint8_t *data; /* len bytes: the mapping or the heap copy */
    size_t len;
    int mapped;          /* 1: data is a mapping of map_len bytes; 0: a heap block */
    size_t map_len;
};

/* One more reference (NULL-safe). */
void xgr_file_map_retain(xgr_file_map *m);

#endif
