/* Cross-grammar cache unit test: equal hashes with different keys never share an entry
 * (the full canonical key is compared), eviction honours the byte budget, and an entry a
 * grammar still holds survives its eviction. */
#include <stdio.h>
#include <string.h>

#include "../../csrc/mask/global_cache.h"

static int failures = 0;
#define CHECK(c, msg)                                                                      \
    do {                                                                                   \
        if (!(c)) {                                                                        \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, msg);                 \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

static xgr_mask_entry *entry(size_t bytes) {
    xgr_mask_entry *e = xgr_calloc(1, sizeof *e);
    atomic_init(&e->refcount, 1);
    e->bytes = bytes;
    return e;
}

int main(void) {
    const uint8_t key_a[] = "rule closure A", key_b[] = "rule closure B";
    const uint64_t same_hash = 42, fp = 7;
    xgr_cache_clear();
    xgr_cache_set_budget(1 << 20);
    xgr_mask_entry *a = entry(1000);
    xgr_mask_entry *got = xgr_gcache_insert(fp, same_hash, key_a, sizeof key_a, 3, a);
    CHECK(got == a, "insert returns the entry");
    xgr_mask_entry_release(got);
    /* a colliding hash with another structure must miss */
    CHECK(xgr_gcache_lookup(fp, same_hash, key_b, sizeof key_b, 3) == NULL,
          "hash collision shared an entry");
    CHECK(xgr_gcache_lookup(fp, same_hash, key_a, sizeof key_a, 4) == NULL,
          "another state of the same rule shared an entry");
    CHECK(xgr_gcache_lookup(fp + 1, same_hash, key_a, sizeof key_a, 3) == NULL,
          "another vocabulary shared an entry");
    xgr_mask_entry *hit = xgr_gcache_lookup(fp, same_hash, key_a, sizeof key_a, 3);
    CHECK(hit == a, "exact key did not hit");
    /* evict everything while `hit` is still held by a "grammar": it must stay valid */
    xgr_cache_set_budget(0);
    xgr_cache_stats st;
    xgr_cache_get_stats(&st);
    CHECK(st.entries == 0 && st.bytes == 0, "budget 0 left entries");
    CHECK(hit && hit->bytes == 1000, "held entry was freed by eviction");
    xgr_mask_entry_release(hit);
    xgr_mask_entry_release(a); /* the creator's reference */
    /* LRU: under a small budget the least recently used entry goes first */
    xgr_cache_set_budget(3 * (1000 + 64 + 200));
    uint8_t k[16];
    for (int i = 0; i < 6; i++) {
        snprintf((char *)k, sizeof k, "key-%d", i);
        xgr_mask_entry *e = entry(1000);
        xgr_mask_entry *r = xgr_gcache_insert(fp, (uint64_t)i, k, strlen((char *)k), 0, e);
        xgr_mask_entry_release(r);
        xgr_mask_entry_release(e);
        xgr_cache_get_stats(&st);
        CHECK(st.bytes <= st.budget, "bytes over budget");
    }
    CHECK(st.evictions > 0, "nothing evicted");
    snprintf((char *)k, sizeof k, "key-%d", 5);
    xgr_mask_entry *last = xgr_gcache_lookup(fp, 5, k, strlen((char *)k), 0);
    CHECK(last != NULL, "most recent entry evicted");
    xgr_mask_entry_release(last);
    snprintf((char *)k, sizeof k, "key-%d", 0);
    CHECK(xgr_gcache_lookup(fp, 0, k, strlen((char *)k), 0) == NULL, "oldest entry kept");
    xgr_cache_clear();
    xgr_cache_set_budget((uint64_t)256 << 20);
    printf("test_cache: %s\n", failures ? "FAILED" : "all checks passed");
    return failures != 0;
}
