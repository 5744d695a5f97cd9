/* Deduplicated byte strings with a key (suffix_set.h). */
#include "suffix_set.h"

#include <stdlib.h>
#include <string.h>

#include "../common/util.h"

int xgr_sfx_set_init(xgr_sfx_set *s, int32_t max) {
    memset(s, 0, sizeof *s);
    s->cap = 64;
    while (s->cap < 2 * (size_t)max) s->cap *= 2;
    s->bcap = 256;
    s->slot = xgr_malloc(s->cap * sizeof *s->slot);
    s->key = xgr_malloc(((size_t)max + 1) * sizeof *s->key);
    s->hash = xgr_malloc(((size_t)max + 1) * sizeof *s->hash);
    s->off = xgr_malloc(((size_t)max + 2) * sizeof *s->off);
    s->bytes = xgr_malloc(s->bcap);
    if (!s->slot || !s->key || !s->hash || !s->off || !s->bytes) return XGR_ERR_NOMEM;
    memset(s->slot, -1, s->cap * sizeof *s->slot);
    s->off[0] = 0;
    return XGR_OK;
}

int32_t xgr_sfx_set_add(xgr_sfx_set *s, int32_t key, const uint8_t *b, uint32_t n) {
    uint64_t h = xgr_hash_bytes((uint64_t)(uint32_t)key, b, n);
    size_t at = (size_t)h & (s->cap - 1);
    for (; s->slot[at] >= 0; at = (at + 1) & (s->cap - 1)) {
        int32_t g = s->slot[at];
        if (s->hash[g] == h && s->key[g] == key && s->off[g + 1] - s->off[g] == n &&
            !memcmp(s->bytes + s->off[g], b, n))
            return g;
    }
    if (s->used + n > s->bcap) {
        size_t bcap = s->bcap;
        while (s->used + n > bcap) bcap *= 2;
        uint8_t *nb = realloc(s->bytes, bcap);
        if (!nb) return -1;
        s->bytes = nb;
        s->bcap = bcap;
    }
    if (n) memcpy(s->bytes + s->used, b, n);
    s->used += n;
    int32_t g = s->n++;
    s->key[g] = key;
    s->hash[g] = h;
    s->off[g + 1] = (uint32_t)s->used;
    s->slot[at] = g;
    return g;
}

void xgr_sfx_set_free(xgr_sfx_set *s) {
    free(s->slot);
    free(s->key);
    free(s->hash);
    free(s->off);
    free(s->bytes);
    memset(s, 0, sizeof *s);
}
