/* libFuzzer target: regex text. Input: regex [0xFF 0x00 op-stream]. Parses; on success
 * prints the grammar, re-parses the printed EBNF, compiles under bounded options and
 * drives a matcher with the op stream (see fuzz_common.h). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t cut = fz_split(data, size);
    xgr_grammar *g = NULL;
    if (xgr_grammar_from_regex((const char *)data, cut, &g) != XGR_OK) {
        (void)xgr_last_error();
        return 0;
    }
    char *txt = NULL;
    size_t len = 0;
    if (xgr_grammar_to_ebnf(g, &txt, &len) == XGR_OK) {
        xgr_grammar *g2 = NULL;
        if (xgr_grammar_from_ebnf(txt, len, NULL, 0, &g2) != XGR_OK) {
            fprintf(stderr, "printed regex grammar does not parse: %s\n%s\n", xgr_last_error(), txt);
            abort();
        }
        xgr_grammar_release(g2);
        xgr_free(txt);
    }
    if (cut < size) fz_compile_and_drive(g, data + cut + 2, size - cut - 2);
    else fz_compile_and_drive(g, NULL, 0);
    xgr_grammar_release(g);
    return 0;
}
