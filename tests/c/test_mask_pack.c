/* Mask entry packs (csrc/mask/entry_pack.c): a pack of the cross-grammar cache's entries,
 * loaded into an emptied cache, gives the same masks along the same walks; loaded entries
 * are not packed again; every proper prefix and a set of hostile edits are refused whole
 * (nothing inserted) without a fault (run under ASan/UBSan by tests/c/run_sanitized.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xgr2.h"

static int failures, checks;
#define CHECK(c)                                                             \
    do {                                                                     \
        checks++;                                                            \
        if (!(c)) {                                                          \
            failures++;                                                      \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
        }                                                                    \
    } while (0)

static const char *const pieces[] = {"a", "b", "c", "ab", "{", "}", "[", "]", "\"", ":", ",",
                                     " ", "0", "1", "9", "x", "<function=", ">", "</function>",
                                     "{\"", "\":", "name", "get", "\\", "<eos>"};
#define NP ((int32_t)(sizeof pieces / sizeof *pieces))
#define WORDS ((NP + 31) / 32)

static const char *const grammars[] = {
    "root ::= \"{\" (s \":\" v (\",\" s \":\" v)*)? \"}\"\n"
    "s ::= \"\\\"\" [a-z]* \"\\\"\"\nv ::= s | [0-9]+ | root | \"[\" (v (\",\" v)*)? \"]\"\n",
    "root ::= x{2,30} \"}\"\nx ::= \"ab\" | \"c\" | [0-9]\n",
    "root ::= TagDispatch((\"<function=\", f), loop_after_dispatch=true)\n"
    "f ::= [a-z]+ \">\" \"{\" [a-z \"]* \"}\" \"</function>\"\n",
};
#define NG (sizeof grammars / sizeof *grammars)
#define STEPS 24

/* The masks along a walk that takes the lowest allowed non-stop token at every step. */
static void walk(xgr_vocab *v, int32_t *rows) {
    xgr_compile_options o;
    memset(&o, 0, sizeof o);
    o.cross_grammar_cache = 1;
    memset(rows, 0, sizeof(int32_t) * NG * STEPS * WORDS);
    for (size_t g = 0; g < NG; g++) {
        xgr_grammar *gr = NULL;
        xgr_compiled *c = NULL;
        xgr_matcher *m = NULL;
        CHECK(xgr_grammar_from_ebnf(grammars[g], strlen(grammars[g]), "root", 4, &gr) == XGR_OK);
        CHECK(gr && xgr_compile(gr, v, &o, &c) == XGR_OK);
        CHECK(c && xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m) == XGR_OK);
        for (int s = 0; m && s < STEPS; s++) {
            int32_t *row = rows + (g * STEPS + (size_t)s) * WORDS;
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

int main(void) {
    uint8_t data[256];
    uint32_t off[NP + 1], pos = 0;
    for (int32_t i = 0; i < NP; i++) {
        off[i] = pos;
        size_t l = strlen(pieces[i]);
        memcpy(data + pos, pieces[i], l);
        pos += (uint32_t)l;
    }
    off[NP] = pos;
    int32_t stop = NP - 1;
    xgr_vocab *v = NULL;
    CHECK(xgr_vocab_new(data, off, NP, NP, NULL, 0, &stop, 1, &v) == XGR_OK);
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
