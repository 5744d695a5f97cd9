/* Layer packs (layer_pack.c): one compiled grammar's own mask layers as one byte string, for
 * the on-disk compile cache (docs/disk-cache.md, "Layer packs"). The public functions are
 * xgr_layer_pack_build / xgr_layer_pack_load / xgr_layer_pack_load_mapped /
 * xgr_compiled_layer_count (xgr2.h).
 * Internal header. */
#ifndef XGR_LAYER_PACK_H
#define XGR_LAYER_PACK_H

#include "compiled.h"

#endif
