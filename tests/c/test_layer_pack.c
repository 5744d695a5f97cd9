/* Layer packs (csrc/mask/layer_pack.c): a grammar's published slot entries, loaded into a
 * fresh copy of the grammar made from its image (as a directory hit makes it), give the same
 * masks along the same walk and leave it nothing to build; the copy path agrees; a second
 * load publishes nothing; every proper prefix, another grammar's pack, another
 * vocabulary's, and a set of hostile edits are refused whole (nothing published) or loaded
 * without a fault (run under ASan/UBSan by tests/c/run_sanitized.sh, the borrowed arrays in
 * a heap image exactly the pack's size). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pack_common.h"

static const char *const pieces[] = {"a", "b", "c", "ab", "{", "}", "[", "]", "\"", ":", ",",
                                     " ", "0", "1", "9", "x", "<function=", ">", "</function>",
                                     "{\"", "\":", "name", "get", "\\", "\",", "1,", "<eos>"};
#define NP ((int32_t)(sizeof pieces / sizeof *pieces))
#define WORDS ((NP + 31) / 32)

#define STEPS 32

/* The masks along a walk (the lowest allowed non-stop token, or the `seed`-th one). */
static void walk(xgr_compiled *c, int seed, int32_t *rows) {
    xgr_matcher *m = NULL;
    memset(rows, 0, sizeof(int32_t) * STEPS * WORDS);
    CHECK(xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m) == XGR_OK);
    for (int s = 0; m && s < STEPS; s++) {
        int32_t *row = rows + (size_t)s * WORDS;
        int need = 0, acc = 0;
        CHECK(xgr_matcher_fill_bitmask(m, row, WORDS, &need) == XGR_OK);
        int32_t allowed[NP], n = 0;
        for (int32_t t = 0; t < NP - 1; t++)
            if ((uint32_t)row[t / 32] >> (t % 32) & 1u) allowed[n++] = t;
        if (!n) break;
        int32_t pick = allowed[(seed * (s + 1)) % n];
        if (xgr_matcher_accept_token(m, pick, &acc) != XGR_OK || !acc) break;
    }
    xgr_matcher_free(m);
}

static xgr_compiled *from_image(const uint8_t *img, size_t len, xgr_vocab *v) {
    xgr_compile_options o;
    memset(&o, 0, sizeof o);
    o.cross_grammar_cache = 1;
    o.context_min_uncertain = -1; /* caller-context (pair) slots always */
    xgr_compiled *c = NULL;
    CHECK(xgr_compiled_from_image(img, len, v, &o, &c) == XGR_OK && c);
    return c;
}

#define SEEDS 3

int main(void) {
    xgr_vocab *v = pack_vocab(pieces, NP), *other_v = pack_vocab(pieces, NP - 1);
    if (!v || !other_v) return 1;
    xgr_compile_options o;
    memset(&o, 0, sizeof o);
    o.cross_grammar_cache = 1;
    o.context_min_uncertain = -1; /* caller-context (pair) slots always */
    uint8_t *packs[NG], *images[NG];
    size_t plen[NG], ilen[NG];
    int32_t counts[NG];
    static int32_t ref[NG][SEEDS][STEPS * WORDS], got[SEEDS][STEPS * WORDS];
    size_t rows = sizeof got[0];
    int total = 0;
    for (int g = 0; g < NG; g++) {
        xgr_grammar *gr = NULL;
        xgr_compiled *c = NULL;
        packs[g] = images[g] = NULL;
        plen[g] = ilen[g] = 0;
        counts[g] = 0;
        CHECK(xgr_grammar_from_ebnf(pack_grammars[g], strlen(pack_grammars[g]), "root", 4, &gr) == XGR_OK);
        CHECK(gr && xgr_compile(gr, v, &o, &c) == XGR_OK && c);
        if (!c) return 1;
        for (int s = 0; s < SEEDS; s++) walk(c, s, ref[g][s]);
        CHECK(xgr_layer_pack_build(c, &packs[g], &plen[g], &counts[g]) == XGR_OK && packs[g]);
        CHECK(counts[g] > 0 && counts[g] <= xgr_compiled_layer_count(c));
        CHECK(xgr_compiled_image(c, &images[g], &ilen[g]) == XGR_OK && images[g]);
        xgr_compiled_release(c);
        xgr_grammar_release(gr);
        total += counts[g];
    }
    for (int g = 0; g < NG; g++) {
        int32_t n = -1;
        /* borrowed from a heap image exactly the pack's size, released before the walks */
        xgr_cache_clear();
        xgr_compiled *c = from_image(images[g], ilen[g], v);
        xgr_file_map *m = NULL;
        CHECK(xgr_file_map_from_bytes(packs[g], plen[g], &m) == XGR_OK && m);
        CHECK(c && m && xgr_layer_pack_load_mapped(c, m, 0, plen[g], &n) == XGR_OK && n == counts[g]);
        CHECK(xgr_file_map_refs(m) >= 1 + counts[g]);
        xgr_file_map_release(m);
        int32_t before = xgr_compiled_layer_count(c);
        CHECK(before == counts[g]);
        for (int s = 0; s < SEEDS; s++) {
            walk(c, s, got[s]);
            CHECK(memcmp(ref[g][s], got[s], rows) == 0);
        }
        /* the walks found every entry they needed published */
        CHECK(xgr_compiled_layer_count(c) == before);
        /* a second load: every slot is taken, nothing published */
        CHECK(xgr_layer_pack_load(c, packs[g], plen[g], &n) == XGR_OK && n == 0);
        /* the pack built again from the loaded grammar holds the same entries */
        uint8_t *again = NULL;
        size_t again_len = 0;
        int32_t n2 = 0;
        CHECK(xgr_layer_pack_build(c, &again, &again_len, &n2) == XGR_OK && n2 == counts[g] &&
              again_len == plen[g] && memcmp(again, packs[g], plen[g]) == 0);
        xgr_free(again);
        xgr_compiled_release(c);
        /* copies: the same masks */
        c = from_image(images[g], ilen[g], v);
        CHECK(c && xgr_layer_pack_load(c, packs[g], plen[g], &n) == XGR_OK && n == counts[g]);
        for (int s = 0; c && s < SEEDS; s++) {
            walk(c, s, got[s]);
            CHECK(memcmp(ref[g][s], got[s], rows) == 0);
        }
        xgr_compiled_release(c);
        /* every proper prefix refused, nothing published */
        c = from_image(images[g], ilen[g], v);
        int prefix_ok = c != NULL;
        for (size_t k = 0; c && k < plen[g]; k++) {
            if (xgr_layer_pack_load(c, packs[g], k, &n) == XGR_OK || xgr_compiled_layer_count(c))
                prefix_ok = 0;
        }
        CHECK(prefix_ok);
        /* another grammar's pack; this pack against another vocabulary */
        int h = (g + 1) % NG;
        CHECK(xgr_layer_pack_load(c, packs[h], plen[h], &n) == XGR_ERR_INVALID_ARG);
        CHECK(xgr_compiled_layer_count(c) == 0);
        xgr_compiled_release(c);
        c = NULL;
        if (xgr_compiled_from_image(images[g], ilen[g], other_v, &o, &c) == XGR_OK) {
            CHECK(xgr_layer_pack_load(c, packs[g], plen[g], &n) == XGR_ERR_INVALID_ARG);
            CHECK(xgr_compiled_layer_count(c) == 0);
        }
        xgr_compiled_release(c);
        /* the grammar hash covers every edge (four chains and their tail): an image with
         * one byte edge narrowed by one byte (same counts, still well-formed) is another
         * grammar, and this pack is refused on it */
        {
            uint32_t nr_, ns_, ne_;
            memcpy(&nr_, images[g] + 16, 4);
            memcpy(&ns_, images[g] + 24, 4);
            memcpy(&ne_, images[g] + 28, 4);
            size_t e0 = 40 + (size_t)nr_ * 23 + (size_t)ns_ * 5 + ((size_t)ns_ + 1) * 4;
            uint8_t *im = malloc(ilen[g]);
            int narrowed = 0;
            for (uint32_t e = 0; im && e < ne_; e++) {
                const uint8_t *x = images[g] + e0 + (size_t)e * 10;
                int32_t ref;
                memcpy(&ref, x + 4, 4);
                if (ref >= 0 || x[9] <= x[8]) continue;
                memcpy(im, images[g], ilen[g]);
                im[e0 + (size_t)e * 10 + 9]--;
                xgr_compiled *d = NULL;
                if (xgr_compiled_from_image(im, ilen[g], v, &o, &d) != XGR_OK) continue;
                narrowed++;
                CHECK(xgr_layer_pack_load(d, packs[g], plen[g], &n) == XGR_ERR_INVALID_ARG);
                CHECK(xgr_compiled_layer_count(d) == 0);
                xgr_compiled_release(d);
            }
            CHECK(narrowed > 0);
            free(im);
        }
        /* hostile edits: every 4-byte word set to a few values; refused whole or loaded,
         * never a fault, and the walks run over whatever was loaded */
        uint8_t *ed = malloc(plen[g]);
        const uint32_t vals[] = {0, 1, 0xffffffffu, 0x7fffffffu, 0x8000u, (uint32_t)NP, 2};
        c = from_image(images[g], ilen[g], v);
        for (size_t at = 0; ed && c && at + 4 <= plen[g]; at += 4)
            for (size_t k = 0; k < sizeof vals / sizeof *vals && c; k++) {
                memcpy(ed, packs[g], plen[g]);
                memcpy(ed + at, &vals[k], 4);
                int rc = xgr_layer_pack_load(c, ed, plen[g], &n);
                if (rc != XGR_OK) {
                    CHECK(xgr_compiled_layer_count(c) == 0);
                    continue;
                }
                walk(c, (int)k, got[0]);
                xgr_compiled_release(c);
                c = from_image(images[g], ilen[g], v);
            }
        xgr_compiled_release(c);
        free(ed);
    }
    xgr_cache_clear();
    for (int g = 0; g < NG; g++) {
        xgr_free(packs[g]);
        xgr_free(images[g]);
    }
    xgr_vocab_release(v);
    xgr_vocab_release(other_v);
    printf("test_layer_pack: %d checks, %d failures (%d slot entries in %d grammars)\n", checks,
           failures, total, NG);
    return failures != 0;
}
