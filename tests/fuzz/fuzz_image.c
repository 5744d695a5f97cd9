/* libFuzzer target: compiled-grammar images (xgr_compiled_from_image, the on-disk compile
 * cache's loader; docs/disk-cache.md). Input: one length byte L, an op stream of L bytes,
 * then the image. A valid image (the corpus holds images of real grammars) is compiled
 * against the small fuzz vocabulary and driven with the op stream (fuzz_common.h); every
 * other image must be refused with a status. The cached-vs-brute-force mask oracle is off:
 * a mutated image may be a well-formed automaton whose lookahead hints lie, which changes
 * masks but must never read out of bounds (ASan/UBSan are the oracle). */
#define FZ_NO_MASK_ORACLE 1
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    size_t n_ops = data[0];
    if (n_ops > size - 1) n_ops = size - 1;
    const uint8_t *ops = data + 1, *img = data + 1 + n_ops;
    size_t len = size - 1 - n_ops;
    xgr_compile_options o = fz_opts();
    xgr_compiled *c = NULL;
    if (xgr_compiled_from_image(img, len, fz_vocab(), &o, &c) != XGR_OK) {
        (void)xgr_last_error();
        return 0;
    }
    /* a loaded grammar images back to the same bytes */
    uint8_t *again = NULL;
    size_t again_len = 0;
    if (xgr_compiled_image(c, &again, &again_len) == XGR_OK && again) {
        if (again_len != len || memcmp(again, img, len) != 0) {
            fprintf(stderr, "image(from_image(x)) != x\n");
            abort();
        }
        xgr_free(again);
    }
    xgr_matcher *m = NULL;
    if (xgr_matcher_new(c, NULL, 0, 0, (int)(n_ops & 1), (n_ops % 3 == 0) ? 3 : -1, &m) == XGR_OK) {
        fz_check_masks(m);
        fz_drive(m, ops, n_ops);
        xgr_matcher_free(m);
    }
    xgr_compiled_release(c);
    return 0;
}
