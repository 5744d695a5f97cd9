/* libFuzzer target: regex text. Input: regex [0xFF 0x00 op-stream]. Parses it as a flat
 * tree in all three dialects (xgr_regex_parse: checks the tree's ids and offsets), then
 * as a grammar; on success prints the grammar, re-parses the printed EBNF, compiles under bounded options and
 * drives a matcher with the op stream (see fuzz_common.h). */
#include "fuzz_common.h"

/* Aborts unless every child id is below its parent's and every offset is in range. */
static void check_tree(const xgr_regex_ast *t) {
    if ((size_t)t->root >= t->n_nodes) abort();
    for (size_t i = 0; i < t->n_nodes; i++) {
        const int32_t *n = t->nodes + 5 * i;
        size_t a = (size_t)n[1], b = (size_t)n[2], c = (size_t)n[3];
        if (n[0] == XGR_RX_SET) {
            if (n[1] < 0 || n[2] < 0 || n[3] < 0 || a + 2 * b + c > t->n_data) abort();
            for (size_t k = 0; k < 2 * b; k++)
                if (t->data[a + k] < 0 || t->data[a + k] > 0x10ffff) abort();
        } else if (n[0] == XGR_RX_CAT || n[0] == XGR_RX_ALT) {
            if (n[1] < 0 || n[2] < 0 || a + b > t->n_data) abort();
            for (size_t k = 0; k < b; k++)
                if (t->data[a + k] < 0 || (size_t)t->data[a + k] >= i) abort();
        } else if (n[0] == XGR_RX_REP) {
            if (n[1] < 0 || a >= i || n[2] < 0 || (n[3] >= 0 && n[3] < n[2])) abort();
        } else if (n[0] == XGR_RX_LOOK) {
            if (n[1] < 0 || a >= i || (n[2] != 0 && n[2] != 1)) abort();
        } else if (n[0] == XGR_RX_WORDB) {
            if (n[2] != 0 && n[2] != 1) abort();
        } else if (n[0] < XGR_RX_EPS || n[0] > XGR_RX_EOL) {
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t cut = fz_split(data, size);
    for (int d = XGR_REGEX_CONVERTER; d <= XGR_REGEX_ECMASCRIPT; d++) {
        xgr_regex_ast *t = NULL;
        if (xgr_regex_parse((const char *)data, cut, d, &t) == XGR_OK) check_tree(t);
        else (void)xgr_last_error();
        xgr_regex_ast_free(t);
    }
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
