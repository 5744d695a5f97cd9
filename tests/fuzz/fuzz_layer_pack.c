/* libFuzzer target: layer packs (xgr_layer_pack_load / xgr_layer_pack_load_mapped, the
 * on-disk compile cache's loader of one grammar's own mask layers; docs/disk-cache.md,
 * "Layer packs"). A real layer pack and image are made once per grammar (caller-context
 * slots forced on, so plain, pair-over-slot, loop and TagDispatch entries all occur) after
 * driving it over the fuzz vocabulary. The first byte picks the grammar (bits 2-3) and the
 * mode: even = edits of that grammar's real pack (then pairs of a 2-byte offset and a byte
 * to write; sometimes the end cut), odd = the input is a pack as it is; bit 1 = the
 * borrowing path (xgr_layer_pack_load_mapped over a heap image of exactly the pack's bytes,
 * released by the caller at once, so only the entries keep it), else the copy path. A pack
 * the core accepts is loaded into a fresh grammar made from the image (as a directory hit
 * makes it), which is then driven, so hostile entries reach every consumer of the slots.
 * The cached-vs-brute-force mask oracle is off: an accepted but altered entry changes
 * masks; memory safety is the finding (ASan/UBSan). */
#define FZ_NO_MASK_ORACLE 1
#include "fuzz_pack_common.h"

#define FZL_N FZK_N_ALL

static xgr_compile_options fzl_opts(void) {
    xgr_compile_options o = fz_opts();
    o.cross_grammar_cache = 1;
    o.context_min_uncertain = -1; /* caller-context slots wherever a caller applies */
    return o;
}

static uint8_t *fzl_pack[FZL_N], *fzl_image[FZL_N];
static size_t fzl_len[FZL_N], fzl_ilen[FZL_N];
static int fzl_ready;

static void fzl_make_packs(void) {
    if (fzl_ready) return;
    fzl_ready = 1;
    xgr_compile_options o = fzl_opts();
    for (size_t i = 0; i < FZL_N; i++) {
        xgr_grammar *g = NULL;
        xgr_compiled *c = NULL;
        int32_t n = 0;
        if (xgr_grammar_from_ebnf(fzk_grammars[i], strlen(fzk_grammars[i]), "root", 4, &g) != XGR_OK ||
            xgr_compile(g, fz_vocab(), &o, &c) != XGR_OK) {
            fprintf(stderr, "fuzz_layer_pack: grammar %zu (%s)\n", i, xgr_last_error());
            abort();
        }
        fzk_drive(c);
        if (xgr_layer_pack_build(c, &fzl_pack[i], &fzl_len[i], &n) != XGR_OK || n <= 0 ||
            xgr_compiled_image(c, &fzl_image[i], &fzl_ilen[i]) != XGR_OK) {
            fprintf(stderr, "fuzz_layer_pack: no seed pack for grammar %zu (%s)\n", i, xgr_last_error());
            abort();
        }
        xgr_compiled_release(c);
        xgr_grammar_release(g);
    }
    xgr_cache_clear();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fzl_make_packs();
    size_t gi = size ? (size_t)(data[0] >> 2) % FZL_N : 0;
    size_t len;
    uint8_t *buf = fzk_input(data, size, fzl_pack[gi], fzl_len[gi], &len);
    if (!buf) return 0;
    xgr_compile_options o = fzl_opts();
    xgr_compiled *c = NULL;
    if (xgr_compiled_from_image(fzl_image[gi], fzl_ilen[gi], fz_vocab(), &o, &c) != XGR_OK) {
        free(buf);
        return 0;
    }
    int32_t n = 0;
    int ok = 0;
    if (fzk_borrow(data, size)) {
        xgr_file_map *m = NULL;
        if (xgr_file_map_from_bytes(buf, len, &m) == XGR_OK) {
            ok = xgr_layer_pack_load_mapped(c, m, 0, len, &n) == XGR_OK;
            xgr_file_map_release(m);
        }
    } else {
        ok = xgr_layer_pack_load(c, buf, len, &n) == XGR_OK;
    }
    free(buf);
    if (ok) fzk_drive(c);
    else if (xgr_compiled_layer_count(c) != 0) abort(); /* a refused pack publishes nothing */
    else (void)xgr_last_error();
    xgr_compiled_release(c);
    xgr_cache_clear();
    return 0;
}
