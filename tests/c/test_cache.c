/* Cross-grammar cache unit test: equal hashes with different keys never share an entry
 * (the full canonical key is compared), eviction honours the byte budget, and an entry a
 * grammar still holds survives its eviction. */
#include <stdio.h>
#include <string.h>

#include "../../csrc/common/lru.h"
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

/* common/lru.h on its own: recency order, the byte budget, drop on eviction and removal,
 * and chains that keep colliding items apart. */
typedef struct item {
    xgr_lru_node node;
    int key;
} item;
static int dropped[64];
static void item_drop(xgr_lru *l, xgr_lru_node *n) {
    (void)l;
    dropped[((item *)n)->key]++;
}
static item *find(xgr_lru *l, int key) {
    for (xgr_chain *c = xgr_lru_first(l, (uint64_t)key % 3); c; c = c->next)
        if (((item *)c)->key == key) return (item *)c;
    return NULL;
}
static void test_lru(void) {
    static item items[64];
    xgr_lru l = XGR_LRU_INIT(2, 100, item_drop);
    CHECK(find(&l, 1) == NULL, "lookup in a map with no table");
    for (int i = 0; i < 10; i++) { /* 10 bytes each, all in 3 chains (hash = key % 3) */
        items[i].key = i;
        items[i].node.link.hash = (uint64_t)i % 3;
        items[i].node.bytes = 10;
        CHECK(xgr_lru_reserve(&l) == 0, "reserve");
        xgr_chain **pp = xgr_lru_slot(&l, items[i].node.link.hash);
        while (*pp) pp = &(*pp)->next;
        xgr_lru_insert(&l, pp, &items[i].node);
    }
    CHECK(l.count == 10 && l.bytes == 100 && l.evictions == 0, "ten items within budget");
    for (int i = 0; i < 10; i++) CHECK(find(&l, i) == &items[i], "colliding keys kept apart");
    xgr_lru_touch(&l, &items[0].node); /* 0 is now the most recent: 1 is the coldest */
    items[10].key = 10;
    items[10].node.link.hash = 10 % 3;
    items[10].node.bytes = 10;
    CHECK(xgr_lru_reserve(&l) == 0, "reserve");
    xgr_chain **pp = xgr_lru_slot(&l, items[10].node.link.hash);
    while (*pp) pp = &(*pp)->next;
    xgr_lru_insert(&l, pp, &items[10].node);
    CHECK(l.bytes == 100 && l.evictions == 1, "one eviction keeps the budget");
    CHECK(dropped[1] == 1 && find(&l, 1) == NULL, "the least recent item was evicted");
    CHECK(dropped[0] == 0 && find(&l, 0) == &items[0], "the touched item stayed");
    xgr_lru_remove(&l, &items[5].node);
    CHECK(dropped[5] == 1 && find(&l, 5) == NULL && l.count == 9, "remove drops the item");
    xgr_lru_set_budget(&l, 35);
    CHECK(l.bytes <= 35 && l.count == 3, "a smaller budget evicts down to it");
    CHECK(find(&l, 10) && find(&l, 0) && find(&l, 9), "the three most recent remain");
    xgr_lru_evict_to(&l, 0);
    CHECK(l.count == 0 && l.bytes == 0 && !l.head && !l.tail, "evict to zero empties the map");
    for (int i = 0; i <= 10; i++) CHECK(dropped[i] == 1, "every item dropped exactly once");
    free(l.buckets);
}

int main(void) {
    test_lru();
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
