/* libFuzzer target: vocabulary construction (token byte strings as decoded from a
 * tokenizer, special and stop ids) and mask computation over it. Input: a sequence of
 * tokens, each a length byte (low 4 bits) then that many bytes; the byte after the
 * tokens gives vocab_size padding, special and stop ids come from the last two bytes.
 * Compiles two fixed grammars over the vocabulary and compares cached masks with the
 * brute-force oracle along a short walk. */
#include "fuzz_common.h"

static void walk(xgr_vocab *v, xgr_grammar *g, const uint8_t *d, size_t n) {
    xgr_compile_options o = fz_opts();
    xgr_compiled *c = NULL;
    if (xgr_compile(g, v, &o, &c)) return;
    xgr_matcher *m = NULL;
    int32_t vs = xgr_vocab_size(v);
    size_t words = ((size_t)vs + 31) / 32;
    int32_t *a = calloc(words, 4), *b = calloc(words, 4);
    if (a && b && xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m) == XGR_OK) {
        for (size_t i = 0; i <= n && i < 24; i++) {
            int need;
            int ra = xgr_matcher_fill_bitmask(m, a, words, &need);
            int rb = xgr_matcher_fill_bitmask_bruteforce(m, b, words);
            if (ra == XGR_OK && rb == XGR_OK && memcmp(a, b, words * 4) != 0) {
                fprintf(stderr, "cached mask != brute-force mask at step %zu\n", i);
                abort();
            }
            if (i == n) break;
            /* accept the k-th allowed token */
            int k = d[i], seen = 0, acc;
            for (int32_t t = 0; t < vs; t++)
                if ((a[t / 32] >> (t % 32)) & 1) {
                    if (seen++ == k % 7) { xgr_matcher_accept_token(m, t, &acc); break; }
                }
        }
        xgr_matcher_free(m);
    }
    free(a);
    free(b);
    xgr_compiled_release(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3 || size > 4096) return 0;
    uint8_t buf[4096];
    uint32_t off[1025];
    int32_t nt = 0;
    size_t i = 0, pos = 0;
    while (i < size - 3 && nt < 1024) {
        size_t l = data[i] & 15;
        if (data[i] == 0xEE) { i++; break; } /* end of tokens */
        i++;
        if (l > size - 3 - i) l = size - 3 - i;
        off[nt++] = (uint32_t)pos;
        memcpy(buf + pos, data + i, l);
        pos += l;
        i += l;
    }
    off[nt] = (uint32_t)pos;
    int32_t vsize = nt + (data[size - 3] % 5);
    int32_t special = nt ? (int32_t)(data[size - 2] % (nt + 2)) - 1 : -1;
    int32_t stop = nt ? (int32_t)(data[size - 1] % (nt + 2)) - 1 : -1;
    xgr_vocab *v = NULL;
    if (xgr_vocab_new(buf, off, nt, vsize, &special, special >= 0 && (data[size - 2] & 0x80),
                      &stop, stop >= 0 ? 1 : 0, &v) != XGR_OK)
        return 0;
    static const char *ebnf =
        "root ::= \"{\" ([a-z]+ \":\" [0-9]+)? \"}\" | \"\\u00e9\"+ | [\\x00-\\x7f]{1,3}\n";
    xgr_grammar *g = NULL;
    if (xgr_grammar_builtin_json(&g) == XGR_OK) { walk(v, g, data + i, size - i); xgr_grammar_release(g); }
    if (xgr_grammar_from_ebnf(ebnf, strlen(ebnf), NULL, 0, &g) == XGR_OK) { walk(v, g, data + i, size - i); xgr_grammar_release(g); }
    xgr_vocab_release(v);
    return 0;
}
