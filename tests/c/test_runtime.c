/* Runtime oracle test: at every step of random constrained walks, the cached bitmask
 * equals the brute-force bitmask (every token tried by the parser), rollback restores
 * the same masks, and fork/validate/jump-forward agree with direct acceptance. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../csrc/include/xgr2.h"
#include "../../csrc/mask/compiled.h"
#include "../../csrc/mask/vocab.h"
#include "../../csrc/runtime/lazy_tokens.h"

static int failures = 0;
#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                          \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fprintf(stderr, "\n");                                                         \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

static uint64_t rng_state = 88172645463325252ULL;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)rng_state;
}

/* A synthetic vocabulary: every byte, then random strings over grammar-ish pieces,
 * a special token (empty text) and a stop token. */
static xgr_vocab *make_vocab(int32_t *stop_id) {
    static const char *pieces[] = {"a", "b", "c", "x", "\"", "{", "}", "[", "]", ":", ",",
                                   " ", "\n", "0", "1", "9", "-", ".", "e", "\\", "n",
                                   "u", "t", "r", "true", "null", "\xc3\xa9", "\xe4\xb8\xad",
                                   "\xf0\x9f\x98\x80", "ab", "\": ", "\",", "},", "]}"};
    size_t np = sizeof pieces / sizeof *pieces;
    int32_t n = 256 + 1500 + 2;
    uint8_t *data = malloc((size_t)n * 32);
    uint32_t *off = malloc(((size_t)n + 1) * sizeof *off);
    uint32_t pos = 0;
    for (int32_t i = 0; i < n; i++) {
        off[i] = pos;
        if (i < 256) {
            data[pos++] = (uint8_t)i;
        } else if (i < 256 + 1500) {
            int k = 1 + (int)(rnd() % 4);
            for (int j = 0; j < k; j++) {
                const char *p = pieces[rnd() % np];
                size_t l = strlen(p);
                memcpy(data + pos, p, l);
                pos += (uint32_t)l;
            }
            /* cut some tokens mid-UTF-8 on purpose */
            if (rnd() % 7 == 0 && pos > off[i] + 1) pos--;
        }
        /* the last two tokens are empty: special and stop */
    }
    off[n] = pos;
    int32_t special = n - 2;
    *stop_id = n - 1;
    xgr_vocab *v = NULL;
    int rc = xgr_vocab_new(data, off, n, n + 5, &special, 1, stop_id, 1, &v);
    if (rc) fprintf(stderr, "vocab: %s\n", xgr_last_error());
    free(data);
    free(off);
    return v;
}

static int row_words;

static int rows_equal(const int32_t *a, const int32_t *b) {
    return memcmp(a, b, (size_t)row_words * sizeof *a) == 0;
}

static int first_diff(const int32_t *a, const int32_t *b) {
    for (int w = 0; w < row_words; w++)
        if (a[w] != b[w])
            for (int k = 0; k < 32; k++)
                if (((a[w] ^ b[w]) >> k) & 1) return w * 32 + k;
    return -1;
}

static int32_t pick_allowed(const int32_t *row, int32_t vocab_size, int32_t avoid) {
    int32_t cnt = 0;
    for (int32_t t = 0; t < vocab_size; t++)
        if (((row[t >> 5] >> (t & 31)) & 1) && t != avoid) cnt++;
    if (!cnt) return -1;
    int32_t k = (int32_t)(rnd() % (uint32_t)cnt);
    for (int32_t t = 0; t < vocab_size; t++)
        if (((row[t >> 5] >> (t & 31)) & 1) && t != avoid && k-- == 0) return t;
    return -1;
}

static xgr_compile_options walk_opts;

static void walk(const char *name, const char *ebnf, xgr_vocab *v, int32_t stop, int steps,
                 int walks) {
    xgr_grammar *g = NULL;
    if (xgr_grammar_from_ebnf(ebnf, strlen(ebnf), "", 0, &g)) {
        CHECK(0, "%s: parse failed: %s", name, xgr_last_error());
        return;
    }
    xgr_compiled *c = NULL;
    if (xgr_compile(g, v, &walk_opts, &c)) {
        CHECK(0, "%s: compile failed: %s", name, xgr_last_error());
        xgr_grammar_release(g);
        return;
    }
    int32_t vs = xgr_vocab_size(v);
    int32_t *row = calloc((size_t)row_words, 4), *oracle = calloc((size_t)row_words, 4);
    int32_t *hist = malloc(sizeof(int32_t) * (size_t)row_words * (size_t)(steps + 1));
    for (int w = 0; w < walks; w++) {
        xgr_matcher *m = NULL;
        if (xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m)) {
            CHECK(0, "%s: matcher: %s", name, xgr_last_error());
            break;
        }
        int s;
        for (s = 0; s < steps; s++) {
            int need;
            CHECK(!xgr_matcher_fill_bitmask(m, row, (size_t)row_words, &need), "%s: fill: %s",
                  name, xgr_last_error());
            CHECK(!xgr_matcher_fill_bitmask_bruteforce(m, oracle, (size_t)row_words),
                  "%s: oracle: %s", name, xgr_last_error());
            if (!rows_equal(row, oracle)) {
                int t = first_diff(row, oracle);
                CHECK(0, "%s walk %d step %d: mask differs from oracle at token %d (cache=%d)",
                      name, w, s, t, (row[t >> 5] >> (t & 31)) & 1);
                break;
            }
            memcpy(hist + (size_t)s * (size_t)row_words, row, (size_t)row_words * 4);
            /* prefer text over stopping so walks go deep */
            int32_t t = pick_allowed(row, vs, rnd() % 8 ? stop : -1);
            if (t < 0) t = pick_allowed(row, vs, -1);
            if (t < 0) break;
            /* validate_tokens must agree and not change state */
            size_t na = 9;
            CHECK(!xgr_matcher_validate_tokens(m, &t, 1, &na) && na == 1,
                  "%s: validate_tokens rejected an allowed token %d", name, t);
            int acc = 0;
            CHECK(!xgr_matcher_accept_token(m, t, &acc) && acc,
                  "%s: allowed token %d rejected", name, t);
            if (t == stop) {
                CHECK(xgr_matcher_is_terminated(m), "%s: stop accepted but not terminated", name);
                s++;
                break;
            }
            /* occasionally roll back and compare with the recorded mask */
            if (s > 2 && rnd() % 5 == 0) {
                int32_t j = 1 + (int32_t)(rnd() % 3);
                CHECK(!xgr_matcher_rollback(m, j), "%s: rollback: %s", name, xgr_last_error());
                CHECK(!xgr_matcher_fill_bitmask(m, row, (size_t)row_words, NULL), "fill");
                CHECK(rows_equal(row, hist + (size_t)(s + 1 - j) * (size_t)row_words),
                      "%s: mask after rollback(%d) differs", name, j);
                s -= j;
            }
        }
        /* fork keeps the state */
        xgr_matcher *f = NULL;
        CHECK(!xgr_matcher_fork(m, &f), "fork");
        if (f) {
            /* (after a stop token there is no mask: an error, with the row zeroed) */
            int want = xgr_matcher_is_terminated(m) ? XGR_ERR_STATE : XGR_OK;
            CHECK(xgr_matcher_fill_bitmask(f, row, (size_t)row_words, NULL) == want, "fill fork");
            CHECK(xgr_matcher_fill_bitmask(m, oracle, (size_t)row_words, NULL) == want, "fill m");
            CHECK(rows_equal(row, oracle), "%s: fork mask differs", name);
            xgr_matcher_free(f);
        }
        char *jf = NULL;
        size_t jl = 0;
        CHECK(!xgr_matcher_jump_forward(m, &jf, &jl), "jump_forward: %s", xgr_last_error());
        if (jl) {
            int acc = 0;
            CHECK(!xgr_matcher_accept_bytes(m, (const uint8_t *)jf, jl, &acc) && acc,
                  "%s: jump-forward string not accepted", name);
        }
        xgr_free(jf);
        xgr_matcher_free(m);
    }
    free(row);
    free(oracle);
    free(hist);
    xgr_compiled_release(c);
    xgr_grammar_release(g);
    printf("ok %s\n", name);
}

/* Compares cache and oracle right after a fixed prefix (states a random walk may miss). */
static void at_prefix(const char *name, const char *ebnf, const char *prefix, xgr_vocab *v) {
    xgr_grammar *g = NULL;
    xgr_compiled *c = NULL;
    xgr_matcher *m = NULL;
    if (xgr_grammar_from_ebnf(ebnf, strlen(ebnf), "", 0, &g) ||
        xgr_compile(g, v, &walk_opts, &c) || xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m)) {
        CHECK(0, "%s: setup failed: %s", name, xgr_last_error());
    } else {
        int acc = 0;
        CHECK(!xgr_matcher_accept_bytes(m, (const uint8_t *)prefix, strlen(prefix), &acc) && acc,
              "%s: prefix rejected", name);
        int32_t *a = calloc((size_t)row_words, 4), *b = calloc((size_t)row_words, 4);
        CHECK(!xgr_matcher_fill_bitmask(m, a, (size_t)row_words, NULL), "fill");
        CHECK(!xgr_matcher_fill_bitmask_bruteforce(m, b, (size_t)row_words), "oracle");
        CHECK(rows_equal(a, b), "%s: mask differs from oracle after prefix (token %d)", name,
              first_diff(a, b));
        free(a);
        free(b);
    }
    xgr_matcher_free(m);
    xgr_compiled_release(c);
    xgr_grammar_release(g);
}

/* A rule shared by two different grammars is computed once: the second grammar's first
 * mask in that rule is a cache hit, and its masks still equal the oracle. */
static void cross_grammar(xgr_vocab *v) {
    const char *g1 = "root ::= \"A\" item\nitem ::= \"[\" [a-c]* \"]\"";
    const char *g2 = "root ::= \"xx\" thing \"!\"\nthing ::= \"[\" [a-c]* \"]\"";
    xgr_cache_clear();
    xgr_cache_stats st0, st1;
    walk_opts.inline_max_states = -1; /* keep `item`/`thing` as rules of their own */
    at_prefix("cross_1", g1, "A[ab", v);
    xgr_cache_get_stats(&st0);
    CHECK(st0.inserts > 0 && st0.bytes > 0, "cross-grammar cache got no entries");
    at_prefix("cross_2", g2, "xx[ab", v);
    xgr_cache_get_stats(&st1);
    CHECK(st1.hits > st0.hits, "the shared rule was not reused (hits %llu -> %llu)",
          (unsigned long long)st0.hits, (unsigned long long)st1.hits);
    xgr_cache_set_budget(0);
    xgr_cache_get_stats(&st1);
    CHECK(st1.bytes == 0 && st1.entries == 0, "budget 0 left %llu bytes",
          (unsigned long long)st1.bytes);
    at_prefix("cross_nocache", g2, "xx[ab", v); /* still correct with nothing cached */
    xgr_cache_set_budget((uint64_t)256 << 20);
    memset(&walk_opts, 0, sizeof walk_opts);
}

static void bad_inputs(xgr_vocab *v) {
    xgr_grammar *g = NULL;
    const char *e = "root ::= \"a\"";
    if (xgr_grammar_from_ebnf(e, strlen(e), "", 0, &g)) return;
    xgr_compiled *c = NULL;
    if (!xgr_compile(g, v, NULL, &c)) {
        xgr_matcher *m = NULL;
        if (!xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m)) {
            int acc = 1;
            CHECK(xgr_matcher_accept_token(m, -1, &acc) == XGR_ERR_INVALID_ARG, "negative id");
            CHECK(xgr_matcher_accept_token(m, xgr_vocab_size(v), &acc) == XGR_ERR_INVALID_ARG,
                  "id past vocab");
            CHECK(strstr(xgr_last_error(), "out of range") != NULL, "message: %s",
                  xgr_last_error());
            CHECK(xgr_matcher_rollback(m, 1) == XGR_ERR_STATE, "rollback past start");
            int32_t small[1];
            CHECK(xgr_matcher_fill_bitmask(m, small, 1, NULL) == XGR_ERR_INVALID_ARG,
                  "short row");
            /* the return-value forms: minus the status, need_apply, the verdict */
            CHECK(xgr_matcher_accept_token_ret(m, -1) == -XGR_ERR_INVALID_ARG, "ret: negative id");
            CHECK(xgr_matcher_accept_token_ret(NULL, 0) == -XGR_ERR_INVALID_ARG, "ret: NULL matcher");
            CHECK(xgr_matcher_fill_bitmask_ret(NULL, small, 1) == -XGR_ERR_INVALID_ARG,
                  "ret: NULL matcher (fill)");
            CHECK(xgr_matcher_fill_bitmask_ret(m, small, 1) == -XGR_ERR_INVALID_ARG, "ret: short row");
            int32_t *row = calloc((size_t)row_words, 4);
            CHECK(xgr_matcher_fill_bitmask_ret(m, row, (size_t)row_words) == 1, "ret: need_apply");
            CHECK(xgr_matcher_accept_token_ret(m, 'b') == 0, "ret: rejected");
            CHECK(xgr_matcher_accept_token_ret(m, 'a') == 1, "ret: accepted");
            free(row);
            xgr_matcher_free(m);
        }
        xgr_compiled_release(c);
    }
    xgr_grammar_release(g);
    const char *rec = "root ::= \"a\" root";
    if (!xgr_grammar_from_ebnf(rec, strlen(rec), "", 0, &g)) {
        CHECK(xgr_compile(g, v, NULL, &c) == XGR_ERR_SEMANTIC, "unproductive grammar accepted");
        xgr_grammar_release(g);
    }
    xgr_vocab *bad = NULL;
    uint32_t off[1] = {0};
    CHECK(xgr_vocab_new(NULL, off, -1, 0, NULL, 0, NULL, 0, &bad) == XGR_ERR_INVALID_ARG,
          "negative token count");
}

/* An empty vocabulary (as upstream xgrammar's TokenizerInfo([])): grammars compile, a
 * matcher accepts strings, and the masks are empty: zero words (a NULL row) when
 * vocab_size is 0, all zeros when the ids have no tokens. */
static void empty_vocab(void) {
    static const char *grammars[] = {
        "root ::= \"ab\" [c-d]* | \"{\" [0-9]+ \"}\"",
        "root ::= x x\nx ::= \"a\"* | \"a\" \"b\"?",
    };
    for (int sized = 0; sized < 2; sized++) {
        uint32_t off[1] = {0};
        int32_t stop = 3;
        xgr_vocab *v = NULL;
        /* no tokens: vocab_size 0, or 40 ids that are all special (one a stop token) */
        int rc = xgr_vocab_new(NULL, off, 0, sized ? 40 : 0, NULL, 0, &stop, sized ? 1 : 0, &v);
        CHECK(rc == XGR_OK, "empty vocab (sized %d): %s", sized, xgr_last_error());
        if (rc) continue;
        size_t rw = (size_t)(xgr_vocab_size(v) + 31) / 32;
        int32_t rows[4] = {-1, -1, -1, -1}; /* two rows of up to two words */
        int32_t *row = sized ? rows : NULL;
        for (int k = 0; k < 3; k++) {
            xgr_grammar *g = NULL;
            if (k == 2 ? xgr_grammar_builtin_json(&g)
                       : xgr_grammar_from_ebnf(grammars[k], strlen(grammars[k]), "", 0, &g)) {
                CHECK(0, "empty vocab grammar %d: %s", k, xgr_last_error());
                continue;
            }
            xgr_compiled *c = NULL;
            if (xgr_compile(g, v, NULL, &c)) {
                CHECK(0, "empty vocab compile %d: %s", k, xgr_last_error());
                xgr_grammar_release(g);
                continue;
            }
            xgr_matcher *m = NULL, *f = NULL;
            if (!xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m)) {
                int need = 7, acc = 0;
                rc = xgr_matcher_fill_bitmask(m, row, rw, &need);
                /* (x x with a nullable x can end at once: the stop token is allowed) */
                CHECK(rc == XGR_OK && (sized ? row[0] == (k == 1 ? 8 : 0) && row[1] == 0 && need == 1
                                             : need == 0),
                      "empty vocab fill %d: rc %d need %d", k, rc, need);
                CHECK(xgr_matcher_fill_bitmask_ret(m, row, rw) == (sized ? 1 : 0),
                      "empty vocab fill_ret %d", k);
                CHECK(!xgr_matcher_fill_bitmask_bruteforce(m, row, rw), "empty vocab oracle %d", k);
                const char *text = k == 2 ? "{\"a\": [1, \"x\"]}" : k ? "aab" : "abcd";
                CHECK(!xgr_matcher_accept_bytes(m, (const uint8_t *)text, strlen(text), &acc) && acc,
                      "empty vocab accept '%s' (%d)", text, k);
                CHECK(xgr_matcher_can_end(m) && !xgr_matcher_is_terminated(m),
                      "empty vocab can_end %d", k);
                CHECK(!xgr_matcher_accept_bytes(m, (const uint8_t *)"}", 1, &acc) && !acc,
                      "empty vocab reject (%d)", k);
                if (sized) {
                    CHECK(!xgr_matcher_fill_bitmask(m, row, rw, &need) && row[0] == 8 && row[1] == 0,
                          "empty vocab: the stop token where the grammar can end (%d): %x", k,
                          (unsigned)row[0]);
                    CHECK(!xgr_matcher_accept_token(m, 0, &acc) && !acc, "a tokenless id (%d)", k);
                    CHECK(!xgr_matcher_accept_token(m, 3, &acc) && acc && xgr_matcher_is_terminated(m),
                          "empty vocab stop (%d)", k);
                } else {
                    CHECK(xgr_matcher_accept_token(m, 0, &acc) == XGR_ERR_INVALID_ARG,
                          "no token ids at all (%d)", k);
                }
                if (!xgr_matcher_fork(m, &f)) {
                    xgr_matcher *ms[2] = {m, f};
                    /* (sized: both accepted the stop token, so there is no mask) */
                    int brc = xgr_fill_bitmask_batch(ms, 2, row, rw, NULL, 2);
                    CHECK(sized ? brc == XGR_ERR_STATE : brc == XGR_OK, "empty vocab batch %d: %s",
                          k, xgr_last_error());
                    xgr_matcher_free(f);
                }
                char *jf = NULL;
                size_t jn = 9;
                xgr_matcher_reset(m);
                CHECK(!xgr_matcher_jump_forward(m, &jf, &jn) && jn == 0,
                      "empty vocab jump forward %d", k);
                xgr_free(jf);
                xgr_matcher_free(m);
            } else {
                CHECK(0, "empty vocab matcher %d: %s", k, xgr_last_error());
            }
            xgr_compiled_release(c);
            xgr_grammar_release(g);
        }
        xgr_vocab_release(v);
    }
}

/* terminate_without_stop, as upstream xgrammar's: is_terminated is can_end, stop tokens
 * are never accepted, but what the grammar allows goes on being accepted after it may end;
 * the mask is the default mode's (the stop token where the grammar can end), and the
 * cached mask still equals the oracle. */
static void terminate_without_stop(xgr_vocab *v, int32_t stop) {
    const char *e = "root ::= [a-z]*";
    xgr_grammar *g = NULL;
    if (xgr_grammar_from_ebnf(e, strlen(e), "", 0, &g)) return;
    xgr_compiled *c = NULL;
    if (xgr_compile(g, v, NULL, &c)) {
        CHECK(0, "terminate_without_stop compile: %s", xgr_last_error());
        xgr_grammar_release(g);
        return;
    }
    int32_t *row = calloc((size_t)row_words, 4), *oracle = calloc((size_t)row_words, 4);
    xgr_matcher *m = NULL;
    if (row && oracle && !xgr_matcher_new(c, NULL, 0, 0, 1, -1, &m)) {
        int acc = 0, need = 0;
        CHECK(xgr_matcher_is_terminated(m), "nullable grammar: terminated at the start");
        for (int k = 0; k < 3; k++) {
            CHECK(!xgr_matcher_fill_bitmask(m, row, (size_t)row_words, &need) &&
                      !xgr_matcher_fill_bitmask_bruteforce(m, oracle, (size_t)row_words) &&
                      rows_equal(row, oracle),
                  "terminate_without_stop: mask differs from the oracle at step %d", k);
            CHECK(((row['q' >> 5] >> ('q' & 31)) & 1) && ((row[stop >> 5] >> (stop & 31)) & 1) &&
                      !((row['.' >> 5] >> ('.' & 31)) & 1),
                  "terminate_without_stop: mask at step %d", k);
            CHECK(!xgr_matcher_accept_token(m, stop, &acc) && !acc, "stop token accepted");
            CHECK(!xgr_matcher_accept_token(m, 'q', &acc) && acc, "letter after completion");
            CHECK(xgr_matcher_is_terminated(m) && xgr_matcher_can_end(m), "terminated = can_end");
        }
        CHECK(!xgr_matcher_accept_bytes(m, (const uint8_t *)"ab.", 3, &acc) && !acc, "'.'");
        CHECK(!xgr_matcher_rollback(m, 2) && xgr_matcher_num_steps(m) == 1, "rollback");
        xgr_matcher_free(m);
    }
    /* the default mode still stops at the stop token; a fill after it fails, zeroing the row */
    if (row && !xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m)) {
        int acc = 0;
        CHECK(!xgr_matcher_is_terminated(m), "default mode: not terminated at the start");
        CHECK(!xgr_matcher_accept_token(m, stop, &acc) && acc && xgr_matcher_is_terminated(m),
              "default mode: stop token");
        CHECK(!xgr_matcher_accept_token(m, 'q', &acc) && !acc, "default mode: after the stop");
        CHECK(xgr_matcher_fill_bitmask(m, row, (size_t)row_words, NULL) == XGR_ERR_STATE,
              "default mode fill after the stop token is an error");
        int any = 0;
        for (int w = 0; w < row_words; w++) any |= row[w];
        CHECK(!any, "default mode: row after the stop token is empty");
        xgr_matcher_free(m);
    }
    free(row);
    free(oracle);
    xgr_compiled_release(c);
    xgr_grammar_release(g);
}

/* xgr_vocab_prefix_end (the jumps along next_shorter) against a scan, for every sorted
 * token and every prefix length of it; and the sorted copy of the bytes against the ids. */
static void prefix_ranges(const xgr_vocab *v) {
    for (int32_t i = 0; i < v->n_sorted; i++) {
        uint32_t len, slen;
        const uint8_t *tok = xgr_vocab_token(v, v->sorted[i], &len);
        const uint8_t *stok = xgr_vocab_sorted_token(v, i, &slen);
        CHECK(len == slen && memcmp(tok, stok, len) == 0, "sorted token %d differs from id %d",
              (int)i, (int)v->sorted[i]);
        for (uint32_t plen = 1; plen <= len; plen++) {
            int32_t want = i + 1;
            while (want < v->n_sorted && xgr_vocab_id_has_prefix(v, v->sorted[want], tok, plen))
                want++;
            int32_t got = xgr_vocab_prefix_end(v, i, tok, plen);
            CHECK(got == want, "prefix_end(%d, len %u) = %d, scan says %d", (int)i, plen,
                  (int)got, (int)want);
        }
    }
}

/* One rule of ~100 literal alternatives: more states than a flat table is built for, so
 * its vocabulary passes step through each state's edges. */
static void large_rule(xgr_vocab *v, int32_t stop) {
    static const char alpha[] = "abcx01 ,:";
    char *ebnf = malloc(16384);
    size_t n = (size_t)sprintf(ebnf, "root ::= (");
    for (int w = 0; w < 100; w++) {
        n += (size_t)sprintf(ebnf + n, "%s\"", w ? " | " : "");
        for (int k = 0; k < 7; k++) ebnf[n++] = alpha[rnd() % (sizeof alpha - 1)];
        n += (size_t)sprintf(ebnf + n, "\"");
    }
    sprintf(ebnf + n, ")+ \"}\"");
    walk("large_rule", ebnf, v, stop, 30, 10);
    free(ebnf);
}

/* A fill that reuses the row of an earlier fill (matcher.c memo_hit: the same items in the
 * last parser row) must not outlive a rollback: here both branches reach the same string
 * body item, with the same origin row, after five tokens, but the string is followed by
 * "x" in one and "}" in the other, so tokens such as `"x` are allowed in one only. */
static void memo_and_rollback(xgr_vocab *v) {
    const char *ebnf = "root ::= \"a\" s \"x\" | \"b\" s \"}\"\ns ::= \"\\\"\" [a-c]* \"\\\"\"";
    xgr_grammar *g = NULL;
    xgr_compiled *c = NULL;
    xgr_compile_options o = {0};
    o.inline_max_states = -1; /* s stays a rule: its body item is the same in both branches */
    if (xgr_grammar_from_ebnf(ebnf, strlen(ebnf), "", 0, &g) || xgr_compile(g, v, &o, &c)) {
        CHECK(0, "memo_and_rollback: %s", xgr_last_error());
        xgr_grammar_release(g);
        return;
    }
    int32_t *row = calloc((size_t)row_words, 4), *oracle = calloc((size_t)row_words, 4),
            *first = calloc((size_t)row_words, 4);
    xgr_matcher *m = NULL;
    CHECK(!xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m), "matcher");
    const char *paths[2] = {"a\"abc", "b\"abc"};
    for (int k = 0; k < 2 && m; k++) {
        for (const char *q = paths[k]; *q; q++) {
            int acc = 0;
            CHECK(!xgr_matcher_fill_bitmask(m, row, (size_t)row_words, NULL), "fill");
            CHECK(!xgr_matcher_fill_bitmask_bruteforce(m, oracle, (size_t)row_words), "oracle");
            CHECK(rows_equal(row, oracle), "memo_and_rollback: path %d at %ld differs from oracle", k,
                  (long)(q - paths[k]));
            CHECK(!xgr_matcher_accept_token(m, (uint8_t)*q, &acc) && acc, "accept");
        }
        CHECK(!xgr_matcher_fill_bitmask(m, row, (size_t)row_words, NULL), "fill");
        CHECK(!xgr_matcher_fill_bitmask_bruteforce(m, oracle, (size_t)row_words), "oracle");
        CHECK(rows_equal(row, oracle), "memo_and_rollback: path %d at the end differs from oracle", k);
        if (k == 0) {
            memcpy(first, row, (size_t)row_words * 4);
            CHECK(!xgr_matcher_rollback(m, 5), "rollback");
        } else {
            CHECK(!rows_equal(row, first), "memo_and_rollback: the branches' masks should differ");
        }
    }
    xgr_matcher_free(m);
    free(row);
    free(oracle);
    free(first);
    xgr_compiled_release(c);
    xgr_grammar_release(g);
    printf("ok memo_and_rollback\n");
}

/* Counters in the memo's comparison (matcher.c memo_count): a bounded repetition walked
 * one "a" at a time from its start to its maximum, each fill against the oracle, so rows
 * whose counters are near a bound (where "a]" becomes allowed, then "aaaa" no longer is)
 * are never served a row kept at another count. */
static void memo_repeat(void) {
    /* its own vocabulary: every byte, and tokens that leave the repetition (exactly
     * checked in every fill, so the fills are kept) or run several repetitions */
    static const char *const toks[] = {"a]", "a)", "aa", "aaaa", "aaaaaaaa", "a])"};
    size_t nt = sizeof toks / sizeof *toks;
    uint8_t data[512];
    uint32_t off[256 + 8], pos = 0;
    int32_t n = 256 + (int32_t)nt;
    for (int32_t i = 0; i < n; i++) {
        off[i] = pos;
        if (i < 256) {
            data[pos++] = (uint8_t)i;
        } else {
            memcpy(data + pos, toks[i - 256], strlen(toks[i - 256]));
            pos += (uint32_t)strlen(toks[i - 256]);
        }
    }
    off[n] = pos;
    xgr_vocab *v = NULL;
    int32_t stop = 0;
    CHECK(!xgr_vocab_new(data, off, n, n, NULL, 0, &stop, 1, &v), "memo_repeat vocab");
    int32_t rw = (n + 31) / 32;
    /* (no inlining) `s` is followed by "]" or ")": tokens that leave it stay uncertain */
    const char *ebnf = "root ::= \"[\" s \"]\" | \"(\" s \")\"\ns ::= [ab]{20,30}";
    xgr_grammar *g = NULL;
    xgr_compiled *c = NULL;
    xgr_compile_options o = {0};
    o.inline_max_states = -1;
    if (!v || xgr_grammar_from_ebnf(ebnf, strlen(ebnf), "", 0, &g) || xgr_compile(g, v, &o, &c)) {
        CHECK(0, "memo_repeat: %s", xgr_last_error());
        xgr_grammar_release(g);
        xgr_vocab_release(v);
        return;
    }
    int32_t row[16], oracle[16];
    xgr_matcher *m = NULL;
    CHECK(!xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m), "matcher");
    for (int i = 0; i <= 31 && m; i++) {
        int acc = 0;
        if (getenv("XGR_DBG")) fprintf(stderr, "step %d\n", i);
        CHECK(!xgr_matcher_fill_bitmask(m, row, (size_t)rw, NULL), "fill");
        CHECK(!xgr_matcher_fill_bitmask_bruteforce(m, oracle, (size_t)rw), "oracle");
        CHECK(!memcmp(row, oracle, (size_t)rw * 4), "memo_repeat: after %d bytes the mask differs from oracle", i);
        CHECK(!xgr_matcher_accept_token(m, i == 0 ? '[' : i == 31 ? ']' : 'a', &acc) && acc,
              "memo_repeat: accept at %d", i);
    }
    xgr_matcher_free(m);
    xgr_compiled_release(c);
    xgr_grammar_release(g);
    xgr_vocab_release(v);
    printf("ok memo_repeat\n");
}

/* Right recursion stays linear (Leo items, csrc/parse/earley.c): every parser row of a
 * long right-recursive match holds a bounded number of items and Leo items (it held one
 * completed item per level before), a long match fits the default max_step_work, and
 * rolling back over a long run restores the masks. */
static int rr_compile(xgr_vocab *v, const char *ebnf, int no_inline, xgr_compiled **c) {
    xgr_grammar *g = NULL;
    xgr_compile_options o;
    memset(&o, 0, sizeof o);
    o.inline_max_states = no_inline ? -1 : 0;
    int rc = xgr_grammar_from_ebnf(ebnf, strlen(ebnf), "", 0, &g);
    if (!rc) rc = xgr_compile(g, v, &o, c);
    if (rc) CHECK(0, "right_recursion: %s: %s", ebnf, xgr_last_error());
    xgr_grammar_release(g);
    return rc;
}

/* Feeds `unit` repeated up to n bytes to a bare parser; checks the rows' sizes and that
 * truncating back and feeding again gives the same rows. */
static void rr_rows(xgr_vocab *v, const char *name, const char *ebnf, const char *unit,
                    int32_t n, int no_inline) {
    xgr_compiled *c = NULL;
    if (rr_compile(v, ebnf, no_inline, &c)) return;
    xgr_parser p;
    if (xgr_parser_init(&p, c->fsm, 0)) {
        CHECK(0, "%s: parser init", name);
        xgr_compiled_release(c);
        return;
    }
    p.ref_begin = c->ref_begin;
    p.leo_rules = c->rule_leo;
    xgr_item root = {c->fsm->rule_start[c->fsm->root], 0, 0, 0};
    CHECK(!xgr_parser_start(&p, root), "%s: start", name);
    size_t ul = strlen(unit);
    int32_t max_items = 0, max_leo = 0, mid = n / 2, mid_items = 0;
    for (int32_t i = 0; i < n; i++) {
        int alive = 0, rc = xgr_parser_step(&p, (uint8_t)unit[(size_t)i % ul], &alive);
        if (rc || !alive) {
            CHECK(0, "%s: byte %d rejected: %s", name, (int)i, rc ? xgr_last_error() : "dead");
            break;
        }
        int32_t r = xgr_parser_rows(&p) - 1;
        int32_t ni = p.row_begin.data[r + 1] - p.row_begin.data[r];
        int32_t nl = (size_t)r + 1 < p.leo_begin.len
                         ? p.leo_begin.data[r + 1] - p.leo_begin.data[r] : 0;
        if (ni > max_items) max_items = ni;
        if (nl > max_leo) max_leo = nl;
        if (i == mid) mid_items = (int32_t)p.items.len;
    }
    CHECK(max_items <= 16 && max_leo <= 8, "%s: rows grow with the input (%d items, %d Leo items)",
          name, (int)max_items, (int)max_leo);
    CHECK(xgr_parser_can_end(&p), "%s: cannot end after %d bytes", name, (int)n);
    /* rollback is truncation, Leo items included: back to the middle, then on again */
    xgr_parser_truncate(&p, mid + 2);
    CHECK((int32_t)p.items.len == mid_items, "%s: truncate", name);
    CHECK(p.leo_begin.len <= (size_t)mid + 3 &&
              p.leo.len == (size_t)p.leo_begin.data[p.leo_begin.len - 1],
          "%s: Leo items truncated", name);
    for (int32_t i = mid + 1; i < n; i++) {
        int alive = 0;
        if (xgr_parser_step(&p, (uint8_t)unit[(size_t)i % ul], &alive) || !alive) {
            CHECK(0, "%s: byte %d rejected after rollback", name, (int)i);
            break;
        }
    }
    CHECK(xgr_parser_can_end(&p), "%s: cannot end after rollback", name);
    xgr_parser_free(&p);
    xgr_compiled_release(c);
}

static void right_recursion(xgr_vocab *v) {
    /* once as written, once without inlining (every rule kept, as in big grammars) */
    for (int ni = 0; ni < 2; ni++) {
        rr_rows(v, "rr_empty", "root ::= c\nc ::= \"\" | \"a\" c", "a", 100000, ni);
        rr_rows(v, "rr_list", "root ::= list\nlist ::= elem | elem \",\" list\nelem ::= [0-9]+",
                "12,3,", 99999, ni);
        rr_rows(v, "rr_string", "root ::= chars\nchars ::= char chars | \"\"\n"
                "char ::= [^\"\\\\] | \"\\\\\" [\"\\\\n]", "ab\\n\\\\", 20004, ni);
        rr_rows(v, "rr_mutual", "root ::= a\na ::= \"x\" b | \"\"\nb ::= \"y\" a | \"\"", "xy",
                50000, ni);
        rr_rows(v, "rr_mid_nullable", "root ::= c\nc ::= \"a\" ws c | \"\"\nws ::= \" \"*", "a  a",
                40000, ni);
        rr_rows(v, "rr_root", "root ::= \"a\" root | \"\"", "a", 50000, ni);
        /* a cycle through a rule that only forwards (`b ::= c`, kept as a rule without
         * inlining): its level is predicted in the row its caller waits in */
        rr_rows(v, "rr_forward", "root ::= a\na ::= \"x\" b | \"z\"\nb ::= c\nc ::= \"w\" a | \"\"",
                "xw", 50001, ni);
    }

    /* a long match through the matcher, under the default limits */
    xgr_compiled *c = NULL;
    if (rr_compile(v, "root ::= c \"!\" | c\nc ::= \"\" | \"a\" c", 0, &c)) return;
    xgr_matcher *m = NULL;
    CHECK(!xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m), "matcher");
    if (!m) {
        xgr_compiled_release(c);
        return;
    }
    size_t n = 100000;
    uint8_t *buf = malloc(n);
    memset(buf, 'a', n);
    int acc = 0;
    CHECK(!xgr_matcher_accept_bytes(m, buf, n, &acc) && acc, "rr: 100,000 bytes: %s",
          xgr_last_error());
    CHECK(xgr_matcher_can_end(m), "rr: cannot end after 100,000 bytes");
    CHECK(!xgr_matcher_accept_bytes(m, (const uint8_t *)"b", 1, &acc) && !acc, "rr: b accepted");
    free(buf);

    /* 1,200 one-byte tokens, masks kept; roll back over 1,000 of them */
    int32_t *row = calloc((size_t)row_words, 4), *oracle = calloc((size_t)row_words, 4),
            *at200 = calloc((size_t)row_words, 4);
    xgr_matcher_reset(m);
    for (int i = 0; i < 1200; i++) {
        if (i == 200) CHECK(!xgr_matcher_fill_bitmask(m, at200, (size_t)row_words, NULL), "fill");
        CHECK(!xgr_matcher_accept_token(m, 'a', &acc) && acc, "rr: token %d rejected", i);
    }
    CHECK(!xgr_matcher_fill_bitmask(m, row, (size_t)row_words, NULL), "fill");
    CHECK(!xgr_matcher_fill_bitmask_bruteforce(m, oracle, (size_t)row_words), "oracle");
    CHECK(rows_equal(row, oracle), "rr: mask after 1,200 tokens differs from oracle");
    CHECK(!xgr_matcher_rollback(m, 1000), "rr: rollback: %s", xgr_last_error());
    CHECK(xgr_matcher_num_steps(m) == 200, "rr: %d steps after rollback",
          (int)xgr_matcher_num_steps(m));
    CHECK(!xgr_matcher_fill_bitmask(m, row, (size_t)row_words, NULL), "fill");
    CHECK(rows_equal(row, at200), "rr: mask after rollback(1000) differs");
    CHECK(!xgr_matcher_fill_bitmask_bruteforce(m, oracle, (size_t)row_words), "oracle");
    CHECK(rows_equal(row, oracle), "rr: mask after rollback differs from oracle");
    CHECK(!xgr_matcher_accept_token(m, '!', &acc) && acc && xgr_matcher_can_end(m),
          "rr: '!' after rollback");
    free(row);
    free(oracle);
    free(at200);
    xgr_matcher_free(m);
    xgr_compiled_release(c);
    printf("ok right_recursion\n");
}

/* The vocabulary memo (vocab.h): a value per key, the first of two equal puts kept (the
 * second freed), a full memo handing the value back to the caller. */
static int memo_frees;
static void memo_free_fn(void *p) {
    memo_frees++;
    free(p);
}

static void vocab_memo_api(void) {
    static const uint8_t data[] = "ab";
    uint32_t off[] = {0, 1, 2};
    xgr_vocab *v = NULL;
    if (xgr_vocab_new(data, off, 2, 2, NULL, 0, NULL, 0, &v)) {
        CHECK(0, "memo vocab: %s", xgr_last_error());
        return;
    }
    uint32_t key[XGR_VOCAB_MEMO_KEY] = {7, 1};
    CHECK(xgr_vocab_memo_get(v, key) == NULL, "empty memo has a value");
    int *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    CHECK(xgr_vocab_memo_put(v, key, a, memo_free_fn) == a, "first put not kept");
    CHECK(xgr_vocab_memo_get(v, key) == a, "get after put");
    CHECK(xgr_vocab_memo_put(v, key, b, memo_free_fn) == a && memo_frees == 1, "second equal put: first kept, second freed");
    int *mine[XGR_VOCAB_MEMO_SLOTS];
    int kept = 0;
    for (int i = 0; i < XGR_VOCAB_MEMO_SLOTS; i++) {
        key[1] = 100u + (uint32_t)i;
        mine[i] = malloc(sizeof *mine[i]);
        if (xgr_vocab_memo_put(v, key, mine[i], memo_free_fn) == mine[i]) {
            kept++;
        } else {
            free(mine[i]); /* the memo is full: still the caller's */
        }
    }
    CHECK(kept == XGR_VOCAB_MEMO_SLOTS - 1, "memo kept %d of %d new keys", kept, XGR_VOCAB_MEMO_SLOTS - 1);
    memo_frees = 0;
    xgr_vocab_release(v);
    CHECK(memo_frees == XGR_VOCAB_MEMO_SLOTS, "vocabulary freed %d memo values", memo_frees);
}

/* Two grammars whose uniqueItems elements end at the same bytes share one copy of their
 * token lists (runtime/matcher.c uq_tables_of), which outlives the first grammar; a grammar
 * with other end bytes gets its own; the masks equal a compile's own. */
static void shared_unique_tables(xgr_vocab *v, int32_t stop) {
    const char *same[2] = {
        "root ::= arr\narr[unique_search_scope] ::= \"[\" (el (\",\" el)*)? \"]\"\n"
        "el[unique] ::= \"\\\"\" [abc] \"\\\"\"\n",
        "root ::= \"{\" arr \"}\"\narr[unique_search_scope] ::= \"[\" (el (\",\" el)*)? \"]\"\n"
        "el[unique] ::= \"\\\"\" [ab]+ \"\\\"\"\n",
    };
    const char *other = "root ::= arr\narr[unique_search_scope] ::= \"[\" (el (\",\" el)*)? \"]\"\n"
                        "el[unique] ::= \"x\" [0-9]\n";
    xgr_compiled *c[3] = {NULL, NULL, NULL};
    int32_t *row = calloc((size_t)row_words, sizeof *row);
    for (int i = 0; i < 3; i++) {
        const char *src = i < 2 ? same[i] : other;
        xgr_grammar *g = NULL;
        xgr_compile_options o;
        memset(&o, 0, sizeof o);
        if (xgr_grammar_from_ebnf(src, strlen(src), NULL, 0, &g) || xgr_compile(g, v, &o, &c[i])) {
            CHECK(0, "unique grammar %d: %s", i, xgr_last_error());
            xgr_grammar_release(g);
            continue;
        }
        xgr_grammar_release(g);
        xgr_matcher *m = NULL;
        int need = 0, acc = 0;
        const char *pre = i == 1 ? "{[\"a\"," : "[";
        CHECK(!xgr_matcher_new(c[i], NULL, 0, 0, 0, -1, &m), "matcher %d", i);
        if (!m) continue;
        CHECK(!xgr_matcher_accept_bytes(m, (const uint8_t *)pre, strlen(pre), &acc) && acc, "prefix %d", i);
        CHECK(!xgr_matcher_fill_bitmask(m, row, (size_t)row_words, &need), "fill %d", i);
        xgr_matcher_free(m);
    }
    if (c[0] && c[1] && c[2]) {
        xgr_uq_tables *t0 = atomic_load(&c[0]->uq), *t1 = atomic_load(&c[1]->uq), *t2 = atomic_load(&c[2]->uq);
        CHECK(t0 && t0 == t1 && t0->shared, "grammars with the same end bytes do not share their uniqueItems lists");
        CHECK(t2 && t2 != t0, "a grammar with other end bytes took the same lists");
        xgr_compiled_release(c[0]);
        c[0] = NULL;
        /* still there for the second grammar: a walk over it meets the oracle */
        walk("unique_shared_after_release", same[1], v, stop, 30, 3);
    }
    for (int i = 0; i < 3; i++) xgr_compiled_release(c[i]);
    free(row);
}

/* The end bytes of lazy / unique rules (runtime/lazy_tokens.c: per rule, from the picked
 * rules through references into ending states) against the first, global fixpoint over
 * every state; and the token lists of a byte set (the byte_sets fast path for ASCII sets)
 * against a scan of every token's bytes. */
static int oracle_has(const uint32_t s[8], uint8_t b) { return (s[b >> 5] >> (b & 31)) & 1; }

static int oracle_end_bytes(const xgr_fsm *f, int unique, uint32_t out[8]) {
    memset(out, 0, 8 * sizeof *out);
    if (!f->rule_attrs) return 0;
    for (int32_t r = 0; r < f->n_rules; r++)
        if ((unique ? f->rule_attrs[r].unique == XGR_UNIQUE_ITEM : f->rule_attrs[r].lazy) && f->rule_nullable[r]) {
            memset(out, 0xff, 8 * sizeof *out);
            return 1;
        }
    uint8_t *ends = calloc((size_t)f->n_states + 1, 1);
    uint32_t *eb = calloc((size_t)f->n_rules * 8 + 1, sizeof *eb);
    for (int32_t s = 0; s < f->n_states; s++) ends[s] = f->final[s] || f->rule_kind[f->state_rule[s]] == XGR_RULE_REPEAT;
    for (int changed = 1; changed;) {
        changed = 0;
        for (int32_t s = 0; s < f->n_states; s++)
            for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++)
                if (!ends[s] && f->edges[e].ref >= 0 && f->rule_nullable[f->edges[e].ref] && ends[f->edges[e].target])
                    ends[s] = changed = 1;
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (int32_t s = 0; s < f->n_states; s++) {
            uint32_t *dst = eb + (size_t)f->state_rule[s] * 8;
            for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++) {
                const xgr_edge *ed = &f->edges[e];
                if (!ends[ed->target]) continue;
                for (int b = 0; b < 256; b++) {
                    int add = ed->ref < 0 ? (b >= ed->lo && b <= ed->hi) : oracle_has(eb + (size_t)ed->ref * 8, (uint8_t)b);
                    if (add && !oracle_has(dst, (uint8_t)b)) {
                        dst[b >> 5] |= 1u << (b & 31);
                        changed = 1;
                    }
                }
            }
        }
    }
    for (int32_t r = 0; r < f->n_rules; r++)
        if (unique ? f->rule_attrs[r].unique == XGR_UNIQUE_ITEM : f->rule_attrs[r].lazy)
            for (int w = 0; w < 8; w++) out[w] |= eb[(size_t)r * 8 + w];
    free(ends);
    free(eb);
    return 0;
}

static void check_token_lists(const xgr_vocab *v, const uint32_t ends[8], int all, const char *what) {
    for (int min_count = 1; min_count <= 2; min_count++) {
        int32_t *ids = NULL, n = 0, k = 0;
        if (xgr_lazy_unique_tokens(v, ends, all, min_count, &ids, &n)) {
            CHECK(0, "%s: token lists out of memory", what);
            return;
        }
        for (int32_t i = 0; i < v->n_sorted; i++) {
            uint32_t len;
            const uint8_t *tok = xgr_vocab_sorted_token(v, i, &len);
            int c = 0;
            for (uint32_t j = 0; j < len; j++) c += all || oracle_has(ends, tok[j]);
            if (c >= min_count) {
                CHECK(k < n && ids[k] == v->sorted[i], "%s: token %d (>= %d end bytes) missing or out of order",
                      what, (int)v->sorted[i], min_count);
                k++;
            }
        }
        CHECK(k == n, "%s: %d tokens listed, %d expected (min_count %d)", what, (int)n, (int)k, min_count);
        free(ids);
    }
    /* the lazy rules' list: tokens holding such a byte before their last one */
    int32_t *ids = NULL, n = 0, k = 0;
    if (xgr_lazy_risky_tokens(v, ends, all, &ids, &n)) {
        CHECK(0, "%s: risky tokens out of memory", what);
        return;
    }
    if (all) {
        CHECK(!ids && n == -1, "%s: every token is at risk when all", what);
        return;
    }
    for (int32_t i = 0; i < v->n_sorted; i++) {
        uint32_t len;
        const uint8_t *tok = xgr_vocab_sorted_token(v, i, &len);
        int c = 0;
        for (uint32_t j = 0; j + 1 < len; j++) c += oracle_has(ends, tok[j]);
        if (c) {
            CHECK(k < n && ids[k] == v->sorted[i], "%s: risky token %d missing or out of order", what, (int)v->sorted[i]);
            k++;
        }
    }
    CHECK(k == n, "%s: %d risky tokens listed, %d expected", what, (int)n, (int)k);
    free(ids);
}

static void lazy_end_bytes_oracle(xgr_vocab *v) {
    static const char *const srcs[] = {
        "root ::= \"[\" (el (\",\" el)*)? \"]\"\nel[unique] ::= \"\\\"\" [abc]+ \"\\\"\" | \"true\" | num\n"
        "num ::= \"-\"? [0-9]+ frac\nfrac ::= (\".\" [0-9]+)?\n",
        /* an element ending through a nullable reference, and one through recursion */
        "root ::= \"[\" (el (\",\" el)*)? \"]\"\nel[unique] ::= \"{\" kv \"}\" tail\ntail ::= \" \"*\n"
        "kv ::= \"\\\"k\\\":\" val\nval ::= \"\\u00e9\" | \"[\" val \"]\" | [x-z]\n",
        "root ::= \"a\" v [x,]*\nv[lazy] ::= \"x\"+ w\nw ::= \",\"? | \"\\u4e2d\"\n",
        "root ::= (\"{\" ans \"}\")+\nans[lazy] ::= [abx ]+\n",
        "root ::= \"[\" el \"]\"\nel[unique] ::= [\\x00-\\x05]\n", /* NUL: the slow path */
    };
    for (size_t i = 0; i < 2 * (sizeof srcs / sizeof *srcs); i++) {
        xgr_grammar *g = NULL;
        xgr_compiled *c = NULL;
        xgr_compile_options o;
        memset(&o, 0, sizeof o);
        if (i % 2) o.inline_max_states = -1; /* (no inlining: elements end in references) */
        if (xgr_grammar_from_ebnf(srcs[i / 2], strlen(srcs[i / 2]), NULL, 0, &g) || xgr_compile(g, v, &o, &c)) {
            CHECK(0, "end bytes grammar %d: %s", (int)i, xgr_last_error());
            xgr_grammar_release(g);
            continue;
        }
        for (int u = 0; u < 2; u++) {
            uint32_t got[8], want[8];
            int a = xgr_lazy_end_bytes(c->fsm, u, got), b = oracle_end_bytes(c->fsm, u, want);
            CHECK(a == b && !memcmp(got, want, sizeof got), "end bytes grammar %d (unique %d) differ from the global fixpoint",
                  (int)i, u);
            char what[64];
            snprintf(what, sizeof what, "grammar %d unique %d", (int)i, u);
            check_token_lists(v, got, a == 1, what);
        }
        xgr_compiled_release(c);
        xgr_grammar_release(g);
    }
    /* random byte sets: ASCII ones (the fast path), and sets with NUL, DEL or a high byte */
    for (int t = 0; t < 40; t++) {
        uint32_t ends[8] = {0};
        int nb = 1 + (int)(rnd() % 6);
        for (int j = 0; j < nb; j++) {
            uint8_t b = t % 4 == 3 ? (uint8_t)rnd() : (uint8_t)(0x20 + rnd() % 0x5F);
            if (t % 8 == 1) b = j ? b : 0;
            if (t % 8 == 5) b = j ? b : 0x7F;
            ends[b >> 5] |= 1u << (b & 31);
        }
        check_token_lists(v, ends, 0, "random set");
    }
}

int main(void) {
    int32_t stop;
    xgr_vocab *v = make_vocab(&stop);
    if (!v) return 1;
    row_words = (xgr_vocab_size(v) + 31) / 32;
    struct {
        const char *name, *ebnf;
    } cases[] = {
        {"literal", "root ::= \"abc\" | \"ab\" \"x\"*"},
        {"classes", "root ::= [a-c]+ [^a-z\\n]? \"\\u00e9\"*"},
        {"utf8", "root ::= ([\\u4e00-\\u9fff] | [\\U0001F600-\\U0001F64F] | \"\\u00e9\")+ \"x\""},
        {"nested", "root ::= \"[\" (root (\",\" root)*)? \"]\" | \"a\""},
        {"nullable", "root ::= a b c \"x\"\na ::= \"a\"?\nb ::= a*\nc ::= (\"\" | \"b\") a"},
        /* a loop that most tokens leave at their first byte (served by a pass over the
         * rule), and one with narrow exits (served by its shared loop entry) */
        /* loops that stay put on DEL: one every whole character brings back (a token of
         * complete characters is accepted without a walk), and two it does not (all of
         * ASCII; every character but one), where those tokens must still be walked */
        {"utf8_closed_loop", "root ::= [^\"]* \"\\\"\""},
        {"ascii_loop", "root ::= [\\x01-\\x7f]* \"\\u00e9\""},
        {"all_but_one_char_loop", "root ::= [^\"\\u00e9]* \"\\\"\""},
        {"wide_loop_exit", "root ::= [0-9]+ [^0-9] [a-z ,\"{}]* \"}\""},
        {"narrow_loop_exit", "root ::= \"[\" [0-9]+ (\",\" [0-9]+)* \"]\""},
        {"repeat_small", "root ::= \"\\\"\" [a-c]{2,5} \"\\\"\""},
        {"repeat_large", "root ::= \"\\\"\" ([a-c] | \"\\\\n\"){3,200} \"\\\"\""},
        {"repeat_near_max", "root ::= \"<\" [abc]{17,20} \">\" | \"[\" (\"ab\" | \"c\"){18,30} \"]\""},
        /* a token past the bound may leave the repetition for the tail: dropped from the
         * loop entry's accepted set, it must get the exact check */
        {"repeat_exit_to_tail", "root ::= \"<\" [a-c]{17,20} [a-c0-9]* \">\""},
        {"repeat_rule", "root ::= \"[\" (item (\",\" item){0,40})? \"]\"\nitem ::= \"ab\" | \"x\" item"},
        {"left_rec", "root ::= root \"a\" | \"b\""},
        /* (no inlining) `item` can end right after "a" through the empty `opt`: a
         * vocabulary pass that walks item's own bytes must record that pop where it
         * hands over to the parser, or "a]" is lost */
        /* (no inlining) the same after a loop: "]}" leaves `[a-c]*` at "]" and item ends
         * through the empty `opt`, which the walk on from the loop's exit must see */
        {"loop_exit_then_empty_ref", "root ::= \"[\" item \"}\" item \"|\"\nitem ::= [a-c]* \"]\" opt\nopt ::= \"b\"*"},
        {"empty_ref_then_end", "root ::= \"[\" item \"]\" item \"|\"\nitem ::= \"a\" opt\nopt ::= \"b\"*"},
        {"ambiguous", "root ::= x x\nx ::= \"a\"* | \"a\" \"b\"?"},
        /* right recursion (Leo items, csrc/parse/earley.c): GBNF-style lists, a
         * JSON-string-like character rule, mutual recursion, a rule nullable in the
         * middle, one nullable after its recursive call (no Leo item: the level waits on
         * `ws`), and a chain through the root */
        {"rr_empty", "root ::= c\nc ::= \"\" | \"a\" c"},
        {"rr_list", "root ::= \"[\" list \"]\"\nlist ::= elem | elem \",\" list\nelem ::= [0-9]+ | \"ab\""},
        {"rr_gbnf_list", "root ::= list\nlist ::= elem (\",\" list)?\nelem ::= [a-c]+ | \"[\" list \"]\""},
        {"rr_string",
         "root ::= \"{\" ws \"\\\"x\\\"\" ws \":\" ws str ws \"}\"\nstr ::= \"\\\"\" chars \"\\\"\"\n"
         "chars ::= char chars | \"\"\nchar ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" [\"\\\\/bfnrt]\nws ::= [ \\n]*"},
        {"rr_mutual", "root ::= a\na ::= \"x\" b | \"\"\nb ::= \"y\" a | \"\""},
        {"rr_mid_nullable", "root ::= c\nc ::= \"a\" ws c | \"b\" | \"\"\nws ::= [ \\n]*"},
        {"rr_tail_nullable", "root ::= c\nc ::= \"a\" c ws | \"\"\nws ::= \" \"*"},
        {"rr_root", "root ::= \"a\" root | \"x\" | \"\""},
        /* rule attributes (csrc/parse/attrs.c): per-occurrence code-point budgets,
         * nested and on a sibling a token enters through the parent, a soft token budget,
         * a lazy rule, captures on right recursion */
        /* token classes (csrc/runtime/token_class.c): a class loop after text (a token is
         * read as text and as the class at once), a TokenTagDispatch, a budgeted class
         * loop, a class beside Token(k) */
        {"token_class_loop", "root ::= [a-c]+ (ExcludeToken(97, 98, 99) | Token(300) \"x\")* \"]\""},
        {"token_dispatch", "b ::= [a-c]+ \"]\"\nroot ::= TokenTagDispatch((99, b), excludes=(97,))"},
        {"token_dispatch_once", "b ::= \"x\"\nroot ::= \"[\" TokenTagDispatch((99, b), loop_after_dispatch=false) \"]\""},
        {"token_class_budget", "root ::= \"[\" r \"]\"\nr[max_tokens=2] ::= ExcludeToken(93)*"},
        {"attr_max_chars", "root ::= \"[\" v \"]\"\nv[max_chars=3] ::= [a-c\\u00e9\\u4e00-\\u9fff]*"},
        {"attr_nested_chars", "root ::= o \"!\"\no[max_chars=4] ::= \"x\" i \"b\"?\ni[max_chars=2] ::= [a-c]*"},
        /* decoded JSON-string characters: escapes (\\u with hex digits the vocabulary has)
         * count one each, per string of a list */
        {"attr_json_chars",
         "root ::= \"[\" s (\",\" s)* \"]\"\ns ::= \"\\\"\" b \"\\\"\"\n"
         "b[max_json_chars=3] ::= ([^\"\\\\\\x00-\\x1f] | \"\\\\\" [\"\\\\nrt] | "
         "\"\\\\u\" [0-9a-e]{4})*"},
        {"attr_sibling", "root ::= \"[\" t \",\" b \"]\"\nt ::= [a-c]*\nb[max_chars=2] ::= [a-c]*"},
        {"attr_max_tokens", "root ::= \"[\" r \"]\" [a-c]*\nr[max_tokens=2] ::= ([a-c]* \" \")+"},
        {"attr_lazy", "root ::= \"a\" v [x,]*\nv[lazy] ::= \"x\"+ \",\"?"},
        {"attr_capture_rr", "root ::= c\nc[capture, temperature=0.5] ::= \"\" | \"a\" c"},
        {"json",
         "root ::= value\nvalue ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
         "object ::= \"{\" ws (string ws \":\" ws value ws (\",\" ws string ws \":\" ws value ws)*)? \"}\"\n"
         "array ::= \"[\" ws (value ws (\",\" ws value ws)*)? \"]\"\n"
         "string ::= \"\\\"\" ([^\"\\\\\\x00-\\x1f] | \"\\\\\" [\"\\\\/bfnrt])* \"\\\"\"\n"
         "number ::= \"-\"? ([0-9] | [1-9] [0-9]+) (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)?\n"
         "ws ::= [ \\n]*"},
    };
    /* Once with default options, once with parent-context entries everywhere and no
     * inlining, so both cache paths meet the oracle on every grammar. */
    for (int pass = 0; pass < 2; pass++) {
        memset(&walk_opts, 0, sizeof walk_opts);
        if (pass == 1) {
            walk_opts.context_min_uncertain = -1;
            walk_opts.inline_max_states = -1;
        }
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
            walk(cases[i].name, cases[i].ebnf, v, stop, 40, 6);
        /* a repetition counter one or two short of its maximum */
        const char *rep = "root ::= \"<\" [abc]{17,20} \">\"";
        at_prefix("near_max_19", rep, "<aaaaaaaaaaaaaaaaaa", v);
        at_prefix("near_max_20", rep, "<aaaaaaaaaaaaaaaaaaa", v);
        at_prefix("near_max_5", rep, "<aaaaa", v);
    }
    xgr_grammar *bj = NULL;
    memset(&walk_opts, 0, sizeof walk_opts);
    prefix_ranges(v);
    large_rule(v, stop);
    cross_grammar(v);
    memo_and_rollback(v);
    memo_repeat();
    vocab_memo_api();
    shared_unique_tables(v, stop);
    lazy_end_bytes_oracle(v);
    right_recursion(v);
    bad_inputs(v);
    empty_vocab();
    terminate_without_stop(v, stop);
    if (!xgr_grammar_builtin_json(&bj)) {
        char *txt = NULL;
        size_t tl = 0;
        if (!xgr_grammar_to_ebnf(bj, &txt, &tl)) walk("builtin_json", txt, v, stop, 60, 6);
        xgr_free(txt);
        xgr_grammar_release(bj);
    } else {
        CHECK(0, "builtin json: %s", xgr_last_error());
    }
    xgr_vocab_release(v);
    if (failures) {
        printf("%d failures\n", failures);
        return 1;
    }
    printf("all runtime checks passed\n");
    return 0;
}
