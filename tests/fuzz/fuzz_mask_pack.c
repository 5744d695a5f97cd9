/* libFuzzer target: mask entry packs (xgr_mask_pack_load, the on-disk compile cache's
 * loader of cross-grammar mask entries; docs/disk-cache.md). A real pack is made once from
 * a few grammars over the fuzz vocabulary; an input whose first byte is even edits it
 * (then: pairs of a 2-byte offset and a byte to write), any other input is a pack as it
 * is; when the first byte has bit 1 set it is loaded through the borrowing path
 * (xgr_mask_pack_load_mapped over a heap image of exactly its bytes, released by the
 * caller at once, so the entries alone keep it), else copied. A pack the core accepts is
 * loaded into an empty cross-grammar cache and the same grammars are driven through it,
 * so hostile entries reach every consumer of the cache. The cached-vs-brute-force mask oracle is off: an accepted but altered entry changes
 * masks; memory safety is the finding (ASan/UBSan). */
#define FZ_NO_MASK_ORACLE 1
#include "fuzz_pack_common.h"

#define FZP_N 3 /* the first three of fzk_grammars */

/* Compiles the grammars with the cross-grammar cache on and drives each once. */
static void fzp_drive_all(void) {
    xgr_compile_options o = fz_opts();
    o.cross_grammar_cache = 1;
    for (size_t i = 0; i < FZP_N; i++) {
        xgr_grammar *g = NULL;
        xgr_compiled *c = NULL;
        if (xgr_grammar_from_ebnf(fzk_grammars[i], strlen(fzk_grammars[i]), "root", 4, &g) != XGR_OK)
            continue;
        if (xgr_compile(g, fz_vocab(), &o, &c) == XGR_OK) {
            fzk_drive(c);
            xgr_compiled_release(c);
        }
        xgr_grammar_release(g);
    }
}

static uint8_t *fzp_pack;
static size_t fzp_len;

static void fzp_make_pack(void) {
    if (fzp_pack) return;
    xgr_cache_clear();
    fzp_drive_all();
    uint64_t seq;
    int32_t n;
    if (xgr_mask_pack_build(fz_vocab(), 0, &fzp_pack, &fzp_len, &seq, &n) != XGR_OK || n <= 0) {
        fprintf(stderr, "fuzz_mask_pack: no seed pack (%s)\n", xgr_last_error());
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fzp_make_pack();
    size_t len;
    uint8_t *buf = fzk_input(data, size, fzp_pack, fzp_len, &len);
    if (!buf) return 0;
    xgr_cache_clear();
    int32_t n = 0;
    if (fzk_borrow(data, size)) {
        xgr_file_map *m = NULL;
        if (xgr_file_map_from_bytes(buf, len, &m) == XGR_OK) {
            int ok = xgr_mask_pack_load_mapped(m, 0, len, fz_vocab(), &n) == XGR_OK;
            xgr_file_map_release(m);
            if (ok) fzp_drive_all();
            else (void)xgr_last_error();
        }
    } else if (xgr_mask_pack_load(buf, len, fz_vocab(), &n) == XGR_OK) fzp_drive_all();
    else (void)xgr_last_error();
    xgr_cache_clear();
    free(buf);
    return 0;
}
