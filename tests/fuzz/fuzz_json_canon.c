/* libFuzzer target: xgr_json_canonical (the compile caches' key of a JSON schema given as
 * text). Input: the text. The output buffer is exactly the input's length (the canonical
 * text is never longer; ASan reports a write past it), and a canonical text must be its own
 * canonical text (a fixpoint: no whitespace, escapes and numbers already in Python's
 * spelling, keys distinct) within the same nesting. Agreement with Python's json.dumps is
 * pinned by tests/python/test_disk_cache_key.py. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../csrc/include/xgr2.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *out = malloc(size ? size : 1);
    if (!out) return 0;
    size_t n = 0;
    int32_t known = 0;
    if (xgr_json_canonical((const char *)data, size, 64, out, &n, &known) != XGR_OK) {
        (void)xgr_last_error(); /* out of memory only */
        free(out);
        return 0;
    }
    if (known) {
        if (n > size || n == 0) abort();
        char *again = malloc(n);
        if (!again) {
            free(out);
            return 0;
        }
        size_t m = 0;
        int32_t k2 = 0;
        if (xgr_json_canonical(out, n, 64, again, &m, &k2) != XGR_OK || !k2 || m != n
            || memcmp(out, again, n) != 0)
            abort();
        int32_t depth = 0;
        if (xgr_json_nesting_depth(out, n, 64, &depth) != XGR_OK || depth > 64) abort();
        free(again);
    }
    free(out);
    return 0;
}
