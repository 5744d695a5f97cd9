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
#include "fuzz_common.h"

static const char *const fzp_grammars[] = {
    "root ::= \"{\" (s \":\" v (\",\" s \":\" v)*)? \"}\"\n"
    "s ::= \"\\\"\" [a-z]* \"\\\"\"\nv ::= s | [0-9]+ | root | \"[\" (v (\",\" v)*)? \"]\"\n",
    "root ::= x{2,30} \"}\"\nx ::= \"ab\" | \"c\" | [0-9]\n",
    "root ::= TagDispatch((\"<function=\", f), loop_after_dispatch=true)\n"
    "f ::= [a-z]+ \">\" \"{\" [a-z \"]* \"}\" \"</function>\"\n",
};
#define FZP_N (sizeof fzp_grammars / sizeof *fzp_grammars)

static const uint8_t fzp_ops[] = {6, 0, 3, 6, 1, 5, 6, 10, 3, 'a', 'b', 'c', 6, 7, 2, 6, 11, 4, 6, 0, 1, 2};

/* Compiles the grammars with the cross-grammar cache on and drives each once. */
static void fzp_drive_all(void) {
    xgr_compile_options o = fz_opts();
    o.cross_grammar_cache = 1;
    for (size_t i = 0; i < FZP_N; i++) {
        xgr_grammar *g = NULL;
        xgr_compiled *c = NULL;
        if (xgr_grammar_from_ebnf(fzp_grammars[i], strlen(fzp_grammars[i]), "root", 4, &g) != XGR_OK)
            continue;
        if (xgr_compile(g, fz_vocab(), &o, &c) == XGR_OK) {
            for (int ctx = 0; ctx < 2; ctx++) {
                xgr_matcher *m = NULL;
                if (xgr_matcher_new(c, NULL, 0, 0, ctx, -1, &m) == XGR_OK) {
                    fz_check_masks(m);
                    fz_drive(m, fzp_ops, sizeof fzp_ops);
                    xgr_matcher_free(m);
                }
            }
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
    uint8_t *buf;
    size_t len;
    if (size >= 1 && !(data[0] & 1)) { /* edits of the real pack */
        len = fzp_len;
        if (!(buf = malloc(len))) return 0;
        memcpy(buf, fzp_pack, len);
        for (size_t i = 1; i + 2 < size; i += 3) {
            size_t at = (size_t)data[i] | (size_t)data[i + 1] << 8;
            if (at < len) buf[at] = data[i + 2];
        }
        if (size % 3 == 2 && len > 8) len -= data[size - 1] % 64; /* sometimes cut the end */
    } else {
        len = size;
        if (!(buf = malloc(len ? len : 1))) return 0;
        if (len) memcpy(buf, data, len);
    }
    xgr_cache_clear();
    int32_t n = 0;
    if (size >= 1 && (data[0] & 2)) {
        /* the borrowing path: entries point into an image of exactly len bytes (a heap
         * block, so ASan sees a read past it), which only they hold while driven */
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
