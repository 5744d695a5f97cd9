/* Mask entry packs (csrc/mask/entry_pack.c): a pack of the cross-grammar cache's entries,
 * loaded into an emptied cache, gives the same masks along the same walks; loaded entries
 * are not packed again; every proper prefix and a set of hostile edits are refused whole
 * (nothing inserted) without a fault (run under ASan/UBSan by tests/c/run_sanitized.sh).
 * Mapped packs (xgr_mask_pack_load_mapped, common/file_map.c): entries borrow from the
 * image and hold a reference each; the image lives until the last of them is evicted (a
 * heap image exactly the pack's size, so ASan sees any read past it or after its release);
 * a mapped file unlinked or renamed over while its entries are used; on Linux, the
 * mappings in /proc/self/maps counted before and after eviction. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "pack_common.h"

static const char *const pieces[] = {"a", "b", "c", "ab", "{", "}", "[", "]", "\"", ":", ",",
                                     " ", "0", "1", "9", "x", "<function=", ">", "</function>",
                                     "{\"", "\":", "name", "get", "\\", "<eos>"};
#define NP ((int32_t)(sizeof pieces / sizeof *pieces))
#define WORDS ((NP + 31) / 32)

#define STEPS 24

/* The masks along a walk that takes the lowest allowed non-stop token at every step. */
static void walk(xgr_vocab *v, int32_t *rows) {
    xgr_compile_options o;
    memset(&o, 0, sizeof o);
    o.cross_grammar_cache = 1;
    memset(rows, 0, sizeof(int32_t) * NG * STEPS * WORDS);
    for (int g = 0; g < NG; g++) {
        xgr_grammar *gr = NULL;
        xgr_compiled *c = NULL;
        xgr_matcher *m = NULL;
        CHECK(xgr_grammar_from_ebnf(pack_grammars[g], strlen(pack_grammars[g]), "root", 4, &gr) == XGR_OK);
        CHECK(gr && xgr_compile(gr, v, &o, &c) == XGR_OK);
        CHECK(c && xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m) == XGR_OK);
        for (int s = 0; m && s < STEPS; s++) {
            int32_t *row = rows + ((size_t)g * STEPS + (size_t)s) * WORDS;
            int need = 0, acc = 0;
            CHECK(xgr_matcher_fill_bitmask(m, row, WORDS, &need) == XGR_OK);
            int32_t pick = -1;
            for (int32_t t = 0; t < NP - 1 && pick < 0; t++)
                if ((uint32_t)row[t / 32] >> (t % 32) & 1u) pick = t;
            if (pick < 0 || xgr_matcher_accept_token(m, pick, &acc) != XGR_OK || !acc) break;
        }
        xgr_matcher_free(m);
        xgr_compiled_release(c);
        xgr_grammar_release(gr);
    }
}

static uint64_t cache_entries(void) {
    xgr_cache_stats st;
    xgr_cache_get_stats(&st);
    return st.entries;
}

/* Lines of /proc/self/maps naming `path` (-1 where there is no such file). */
static int maps_of(const char *path) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, path)) n++;
    fclose(f);
    return n;
}

static int write_file(const char *path, const uint8_t *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* Entries that borrow from a heap image and from a mapped file. */
static void mapped_packs(xgr_vocab *v, const uint8_t *pack, size_t len, int32_t n,
                         const int32_t *ref, int32_t *got) {
    size_t rows = sizeof(int32_t) * NG * STEPS * WORDS;
    int32_t loaded = 0;
    /* heap image: one reference per inserted entry, released with them */
    xgr_file_map *m = NULL;
    CHECK(xgr_file_map_from_bytes(pack, len, &m) == XGR_OK && m && !xgr_file_map_is_mapped(m));
    if (!m) return;
    xgr_cache_clear();
    CHECK(xgr_mask_pack_load_mapped(m, 0, len, v, &loaded) == XGR_OK && loaded == n);
    CHECK(xgr_file_map_refs(m) == 1 + n);
    walk(v, got);
    CHECK(memcmp(ref, got, rows) == 0);
    CHECK(xgr_file_map_refs(m) == 1 + n); /* the walks' grammars are gone, the cache keeps them */
    /* a second load of the same pack: every key is cached already, nothing more borrowed */
    CHECK(xgr_mask_pack_load_mapped(m, 0, len, v, &loaded) == XGR_OK);
    CHECK(xgr_file_map_refs(m) == 1 + n);
    /* budget eviction releases the entries' references */
    xgr_cache_set_budget(1);
    CHECK(xgr_file_map_refs(m) == 1);
    xgr_cache_set_budget((uint64_t)256 << 20);
    /* entries outlive the caller's reference; xgr_cache_clear frees the image (ASan: a read
     * of a freed image is a use after free, a never freed one a leak) */
    CHECK(xgr_mask_pack_load_mapped(m, 0, len, v, &loaded) == XGR_OK && loaded == n);
    xgr_file_map_release(m);
    walk(v, got);
    CHECK(memcmp(ref, got, rows) == 0);
    xgr_cache_clear();
    /* every proper prefix refused through the borrowing path, no reference kept */
    int prefix_ok = 1;
    for (size_t k = 0; k < len; k += 1 + k / 64) {
        xgr_file_map *c = NULL;
        if (xgr_file_map_from_bytes(pack, k, &c) != XGR_OK) break;
        if (xgr_mask_pack_load_mapped(c, 0, k, v, &loaded) == XGR_OK || cache_entries() ||
            xgr_file_map_refs(c) != 1)
            prefix_ok = 0;
        xgr_file_map_release(c);
    }
    CHECK(prefix_ok);
    /* a region outside the image is refused; an unaligned one is loaded as copies */
    uint8_t *shifted = malloc(len + 1);
    if (shifted) {
        shifted[0] = 0;
        memcpy(shifted + 1, pack, len);
        CHECK(xgr_file_map_from_bytes(shifted, len + 1, &m) == XGR_OK);
        CHECK(xgr_mask_pack_load_mapped(m, 1, len + 1, v, &loaded) != XGR_OK);
        CHECK(xgr_mask_pack_load_mapped(m, 1, len, v, &loaded) == XGR_OK && loaded == n);
        CHECK(xgr_file_map_refs(m) == 1);
        xgr_file_map_release(m);
        free(shifted);
        walk(v, got);
        CHECK(memcmp(ref, got, rows) == 0);
        xgr_cache_clear();
    }
    /* hostile edits through the borrowing path (a sample of the copy path's) */
    uint8_t *ed = malloc(len);
    const uint32_t vals[] = {0, 0xffffffffu, (uint32_t)NP};
    for (size_t at = 0; ed && at + 4 <= len; at += 12)
        for (size_t k = 0; k < sizeof vals / sizeof *vals; k++) {
            memcpy(ed, pack, len);
            memcpy(ed + at, &vals[k], 4);
            xgr_file_map *h = NULL;
            if (xgr_file_map_from_bytes(ed, len, &h) != XGR_OK) continue;
            xgr_cache_clear();
            int ok = xgr_mask_pack_load_mapped(h, 0, len, v, &loaded) == XGR_OK;
            xgr_file_map_release(h);
            if (ok && at % 48 == 0) walk(v, got);
        }
    free(ed);
    xgr_cache_clear();
    /* a mapped file: unlinked, and renamed over, while its entries are in use */
    const char *tmp = getenv("TMPDIR");
    char path[512], other[600];
    snprintf(path, sizeof path, "%s/xgr2-test-mask-pack-%ld.xgm", tmp && *tmp ? tmp : "/tmp",
             (long)getpid());
    snprintf(other, sizeof other, "%s.new", path);
    /* XGR_FILE_MAP_SMALL: read up to XGR_FILE_MAP_SMALL_BYTES, past that as AUTO */
    {
        size_t sizes[3] = {len, XGR_FILE_MAP_SMALL_BYTES, (size_t)XGR_FILE_MAP_SMALL_BYTES + 1};
        uint8_t *big = calloc(XGR_FILE_MAP_SMALL_BYTES + 1, 1);
        CHECK(big != NULL);
        for (int k = 0; big && k < 3; k++) {
            memcpy(big, pack, len < sizes[k] ? len : sizes[k]);
            CHECK(write_file(path, big, sizes[k]) == 0);
            xgr_file_map *sm = NULL, *am = NULL;
            CHECK(xgr_file_map_open(path, XGR_FILE_MAP_SMALL, sizes[k] - 1, &sm) == XGR_ERR_LIMIT && !sm);
            CHECK(xgr_file_map_open(path, XGR_FILE_MAP_SMALL, sizes[k], &sm) == XGR_OK && sm);
            CHECK(xgr_file_map_open(path, XGR_FILE_MAP_AUTO, sizes[k], &am) == XGR_OK && am);
            if (sm && am) {
                size_t sl = 0;
                const uint8_t *sd = xgr_file_map_data(sm, &sl);
                CHECK(sd && sl == sizes[k] && memcmp(sd, big, sl) == 0);
                CHECK(xgr_file_map_is_mapped(sm) == (k < 2 ? 0 : xgr_file_map_is_mapped(am)));
            }
            xgr_file_map_release(sm);
            xgr_file_map_release(am);
        }
        free(big);
    }
    CHECK(write_file(path, pack, len) == 0);
    m = NULL;
    CHECK(xgr_file_map_open(path, XGR_FILE_MAP_MMAP, len - 1, &m) == XGR_ERR_LIMIT && !m);
    CHECK(xgr_file_map_open(path, XGR_FILE_MAP_MMAP, len, &m) == XGR_OK && m);
    if (!m) return;
    CHECK(xgr_file_map_is_mapped(m));
    size_t got_len = 0;
    CHECK(xgr_file_map_data(m, &got_len) && got_len == len);
    int before = maps_of(path);
    CHECK(before == -1 || before >= 1);
    CHECK(xgr_mask_pack_load_mapped(m, 0, len, v, &loaded) == XGR_OK && loaded == n);
    xgr_file_map_release(m); /* only the entries hold it now */
    CHECK(before == -1 || maps_of(path) == before);
    CHECK(write_file(other, pack, len) == 0 && rename(other, path) == 0); /* renamed over */
    walk(v, got);
    CHECK(memcmp(ref, got, rows) == 0);
    CHECK(unlink(path) == 0); /* evicted */
    walk(v, got);
    CHECK(memcmp(ref, got, rows) == 0);
    CHECK(before == -1 || maps_of(path) >= 1); /* "(deleted)", still mapped */
    xgr_cache_set_budget(1);                    /* evicting the last entry unmaps it */
    CHECK(before == -1 || maps_of(path) == 0);
    xgr_cache_set_budget((uint64_t)256 << 20);
    CHECK(xgr_file_map_open(path, XGR_FILE_MAP_AUTO, len, &m) == XGR_ERR_INVALID_ARG && !m);
    xgr_cache_clear();
}

int main(void) {
    xgr_vocab *v = pack_vocab(pieces, NP);
    if (!v) return 1;
    static int32_t ref[NG * STEPS * WORDS], got[NG * STEPS * WORDS];
    xgr_cache_clear();
    walk(v, ref);
    uint8_t *pack = NULL;
    size_t len = 0;
    uint64_t seq = 0, seq2 = 0;
    int32_t n = 0, n2 = -1, loaded = 0;
    CHECK(xgr_mask_pack_build(v, 0, &pack, &len, &seq, &n) == XGR_OK && n > 0 && pack);
    uint8_t *again = NULL;
    size_t again_len = 0;
    CHECK(xgr_mask_pack_build(v, seq, &again, &again_len, &seq2, &n2) == XGR_OK && n2 == 0);
    xgr_free(again);
    /* loaded: the same masks, and nothing to pack again */
    xgr_cache_clear();
    CHECK(xgr_mask_pack_load(pack, len, v, &loaded) == XGR_OK && loaded == n);
    CHECK(cache_entries() == (uint64_t)n);
    CHECK(xgr_mask_pack_build(v, 0, &again, &again_len, &seq2, &n2) == XGR_OK && n2 == 0);
    xgr_free(again);
    walk(v, got);
    CHECK(memcmp(ref, got, sizeof ref) == 0);
    /* every proper prefix refused, nothing inserted */
    int prefix_ok = 1;
    for (size_t k = 0; k < len; k++) {
        xgr_cache_clear();
        uint8_t *cut = malloc(k ? k : 1);
        if (!cut) break;
        memcpy(cut, pack, k);
        if (xgr_mask_pack_load(cut, k, v, &loaded) == XGR_OK || cache_entries()) prefix_ok = 0;
        free(cut);
    }
    CHECK(prefix_ok);
    mapped_packs(v, pack, len, n, ref, got);
    /* hostile edits: every 4-byte word set to a few values; refused or loaded, never a fault,
     * and the walks still run over whatever was loaded */
    uint8_t *ed = malloc(len);
    const uint32_t vals[] = {0, 1, 0xffffffffu, 0x7fffffffu, 0x8000u, (uint32_t)NP};
    for (size_t at = 0; ed && at + 4 <= len; at += 4)
        for (size_t k = 0; k < sizeof vals / sizeof *vals; k++) {
            memcpy(ed, pack, len);
            memcpy(ed + at, &vals[k], 4);
            xgr_cache_clear();
            if (xgr_mask_pack_load(ed, len, v, &loaded) == XGR_OK && at % 64 == 0) walk(v, got);
        }
    free(ed);
    xgr_cache_clear();
    xgr_free(pack);
    xgr_vocab_release(v);
    printf("test_mask_pack: %d checks, %d failures (%d entries, %zu bytes)\n", checks, failures, n, len);
    return failures != 0;
}
