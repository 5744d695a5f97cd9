/* Shared pieces of the libFuzzer harnesses (tests/fuzz/fuzz_*.c): a small fixed
 * vocabulary, bounded compile options and a short byte/token drive of a matcher.
 * Every call must return a status; a crash, a sanitizer report, a leak or a mismatch
 * between the cached and brute-force masks is a finding. */
#ifndef XGR_FUZZ_COMMON_H
#define XGR_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../csrc/include/xgr2.h"

/* Tokens chosen to cross rule boundaries, code points and JSON structure. */
static const char *const fz_pieces[] = {
    "a", "b", "c", "x", "\"", "{", "}", "[", "]", ":", ",", " ", "\n", "0", "1", "9", "-",
    ".", "e", "\\", "n", "u", "t", "r", "true", "null", "false", "\xc3\xa9", "\xe4\xb8\xad",
    "\xf0\x9f\x98\x80", "\xc3", "\xa9", "\x80", "\xff", "ab", "\": ", "\",", "},", "]}",
    "{\"", "\"}", "<", ">", "</", "<tool_call>", "</tool_call>", "<function=", "</function>",
    "name", "\"name\"", "abc", "123", "1.5e3", "  ", "\t", "\r\n", "/", "*", "+", "?", "(",
    ")", "|", "_", "A", "Z", "z", "<|", "|>", "\x00", "\x01"};
#define FZ_NPIECES ((int32_t)(sizeof fz_pieces / sizeof *fz_pieces))
/* ids: pieces, then one special (empty text), one stop, then 2 ids with no token. */
#define FZ_SPECIAL FZ_NPIECES
#define FZ_STOP (FZ_NPIECES + 1)
#define FZ_NTOK (FZ_NPIECES + 2)
#define FZ_VOCAB (FZ_NTOK + 2)
#define FZ_WORDS ((FZ_VOCAB + 31) / 32)

static xgr_vocab *fz_vocab(void) {
    static xgr_vocab *v;
    if (v) return v;
    uint8_t data[1024];
    uint32_t off[FZ_NTOK + 1];
    uint32_t pos = 0;
    for (int32_t i = 0; i < FZ_NTOK; i++) {
        off[i] = pos;
        if (i < FZ_NPIECES) {
            /* "\x00" and "\x01" pieces: strlen would see 0 bytes */
            size_t l = fz_pieces[i][0] ? strlen(fz_pieces[i]) : 1;
            memcpy(data + pos, fz_pieces[i], l);
            pos += (uint32_t)l;
        }
    }
    off[FZ_NTOK] = pos;
    int32_t special = FZ_SPECIAL, stop = FZ_STOP;
    if (xgr_vocab_new(data, off, FZ_NTOK, FZ_VOCAB, &special, 1, &stop, 1, &v)) {
        fprintf(stderr, "fuzz vocab: %s\n", xgr_last_error());
        abort();
    }
    return v;
}

/* Small limits so that one input cannot spend seconds; every limit error is a valid
 * outcome. */
static xgr_compile_options fz_opts(void) {
    xgr_compile_options o;
    memset(&o, 0, sizeof o);
    o.max_rules = 2000;
    o.max_fsm_states = 20000;
    o.max_row_items = 5000;
    o.cross_grammar_cache = -1; /* keep inputs independent (no process-wide state) */
    return o;
}

static void fz_check_masks(xgr_matcher *m) {
    int32_t a[FZ_WORDS], b[FZ_WORDS];
    int need;
    int ra = xgr_matcher_fill_bitmask(m, a, FZ_WORDS, &need);
    int rb = xgr_matcher_fill_bitmask_bruteforce(m, b, FZ_WORDS);
#ifdef FZ_NO_MASK_ORACLE
    /* Automata not built from a grammar (fuzz_image.c): every invariant the core indexes
     * with is checked on load, but hints such as a rule's lookahead are the author's
     * promise, so the cache may legitimately disagree with the oracle; both fills still
     * run (memory safety is the finding). */
    (void)ra;
    (void)rb;
    if (0) {
#else
    if (ra == XGR_OK && rb == XGR_OK && memcmp(a, b, sizeof a) != 0) {
#endif
        /* A token the cache allows but whose parse hits a work limit (max_step_work /
         * max_row_items) is excluded by the oracle: accepting it must fail with the limit. */
        int real = 0;
        for (int32_t t = 0; t < FZ_VOCAB && !real; t++) {
            if (!(((a[t / 32] ^ b[t / 32]) >> (t % 32)) & 1)) continue;
            xgr_matcher *f = NULL;
            int acc = 0;
            real = !((a[t / 32] >> (t % 32)) & 1) || xgr_matcher_fork(m, &f) != XGR_OK ||
                   xgr_matcher_accept_token(f, t, &acc) != XGR_ERR_LIMIT;
            xgr_matcher_free(f);
        }
        if (!real) return;
        fprintf(stderr, "cached mask != brute-force mask (steps %d):", (int)xgr_matcher_num_steps(m));
        for (int32_t t = 0; t < FZ_VOCAB; t++)
            if (((a[t / 32] ^ b[t / 32]) >> (t % 32)) & 1)
                fprintf(stderr, " %d(%s, cached=%d)", (int)t, t < FZ_NPIECES ? fz_pieces[t] : "-",
                        (int)((a[t / 32] >> (t % 32)) & 1));
        fprintf(stderr, "\n");
        abort();
    }
}

/* Drives a matcher with an op stream: each byte picks an operation. */
static void fz_drive(xgr_matcher *m, const uint8_t *ops, size_t n) {
    int acc;
    for (size_t i = 0; i < n; i++) {
        uint8_t op = ops[i];
        uint8_t arg = i + 1 < n ? ops[i + 1] : 0;
        switch (op % 16) {
        case 0: case 1: case 2: case 3: case 4: case 5: {
            /* token ids, including special/stop/out-of-range/negative */
            int32_t id = (int32_t)(arg % (FZ_VOCAB + 4)) - 2;
            int rc = xgr_matcher_accept_token(m, id, &acc);
            if (getenv("FZ_TRACE"))
                fprintf(stderr, "accept %d (%s) rc=%d acc=%d\n", (int)id,
                        id >= 0 && id < FZ_NPIECES ? fz_pieces[id] : "-", rc, rc ? -1 : acc);
            i++;
            break;
        }
        case 6: fz_check_masks(m); break;
        case 7: {
            int rc = xgr_matcher_rollback(m, (int32_t)(arg % 6) - 1);
            if (getenv("FZ_TRACE")) fprintf(stderr, "rollback %d rc=%d\n", (int)(arg % 6) - 1, rc);
            i++;
            break;
        }
        case 8: {
            int32_t ids[4];
            size_t k = 0, na;
            for (; k < 4 && i + 1 + k < n; k++)
                ids[k] = (int32_t)(ops[i + 1 + k] % (FZ_VOCAB + 2)) - 1;
            xgr_matcher_validate_tokens(m, ids, k, &na);
            i += k;
            break;
        }
        case 9: {
            char *s = NULL;
            size_t l = 0;
            if (xgr_matcher_jump_forward(m, &s, &l) == XGR_OK) xgr_free(s);
            break;
        }
        case 10: {
            size_t start = i + 2 < n ? i + 2 : n;
            size_t l = arg % 8;
            if (l > n - start) l = n - start;
            int rc = xgr_matcher_accept_bytes(m, ops + start, l, &acc);
            if (getenv("FZ_TRACE")) {
                fprintf(stderr, "accept_bytes [");
                for (size_t q = 0; q < l; q++) fprintf(stderr, "%02x", ops[start + q]);
                fprintf(stderr, "] rc=%d acc=%d\n", rc, rc ? -1 : acc);
            }
            i = start + l - 1;
            break;
        }
        case 11: {
            xgr_matcher *f = NULL;
            if (xgr_matcher_fork(m, &f) == XGR_OK) {
                fz_check_masks(f);
                xgr_matcher_accept_token(f, (int32_t)(arg % FZ_VOCAB), &acc);
                xgr_matcher_free(f);
            }
            i++;
            break;
        }
        case 12:
            if (getenv("FZ_TRACE")) fprintf(stderr, "reset\n");
            xgr_matcher_reset(m);
            break;
        case 13: (void)xgr_matcher_is_terminated(m); (void)xgr_matcher_can_end(m);
                 (void)xgr_matcher_num_steps(m); break;
        case 14: {
            xgr_matcher *ms[1] = {m};
            int32_t row[FZ_WORDS];
            xgr_fill_bitmask_batch(ms, 1, row, FZ_WORDS, NULL, 1);
            break;
        }
        default: xgr_matcher_accept_token(m, FZ_STOP, &acc); break;
        }
    }
}

/* Compiles g with bounded options and drives a matcher with ops. */
static void fz_compile_and_drive(xgr_grammar *g, const uint8_t *ops, size_t n) {
    xgr_compile_options o = fz_opts();
    xgr_compiled *c = NULL;
    if (xgr_compile(g, fz_vocab(), &o, &c) != XGR_OK) return;
    xgr_matcher *m = NULL;
    if (xgr_matcher_new(c, NULL, 0, 0, (n & 1), (n % 3 == 0) ? 3 : -1, &m) == XGR_OK) {
        fz_check_masks(m);
        fz_drive(m, ops, n);
        xgr_matcher_free(m);
    }
    xgr_compiled_release(c);
}

/* Splits data at the first 0xFF 0x00 pair: grammar text before, op stream after. */
static size_t fz_split(const uint8_t *d, size_t n) {
    for (size_t i = 0; i + 1 < n; i++)
        if (d[i] == 0xFF && d[i + 1] == 0x00) return i;
    return n;
}

#endif
