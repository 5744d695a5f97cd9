/* Concurrency: 16 threads at once compile grammars on shared grammar / vocabulary handles,
 * fill masks and accept tokens on shared compiled grammars (a matcher each, while the
 * just-in-time mask cache and the process-wide cross-grammar cache are being filled by
 * all of them), batch-fill, fork and roll back. Every walk's digest (masks and chosen
 * tokens) must equal the serial run's. Built by run_sanitized.sh (ASan+UBSan) and by
 * run_tsan.sh (ThreadSanitizer). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../csrc/include/xgr2.h"

#define N_THREADS 16
#define N_WALKS 3
#define N_STEPS 24

static int failures = 0;
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;
#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            pthread_mutex_lock(&fail_lock);                                                \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                          \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fprintf(stderr, "\n");                                                         \
            failures++;                                                                    \
            pthread_mutex_unlock(&fail_lock);                                              \
        }                                                                                  \
    } while (0)

static uint64_t next_rnd(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static const char *const pieces[] = {
    "a", "b", "x", "\"", "{", "}", "[", "]", ":", ",", " ", "\n", "0", "1", "9", "-", ".",
    "e", "\\", "n", "u", "true", "null", "\xc3\xa9", "\xe4\xb8\xad", "ab", "\": ", "\",",
    "},", "{\"", "<tool_call>", "</tool_call>", "<function=", "</function>", ">", "name",
    "id", "_", "get", "weather"};
#define NP ((int)(sizeof pieces / sizeof *pieces))

static xgr_vocab *make_vocab(int32_t *stop_id) {
    uint64_t s = 0x9E3779B97F4A7C15ULL;
    int32_t n = 256 + 1200 + 2;
    uint8_t *data = malloc((size_t)n * 64);
    uint32_t *off = malloc(((size_t)n + 1) * sizeof *off);
    uint32_t pos = 0;
    for (int32_t i = 0; i < n; i++) {
        off[i] = pos;
        if (i < 256) {
            data[pos++] = (uint8_t)i;
        } else if (i < 256 + 1200) {
            int k = 1 + (int)(next_rnd(&s) % 3);
            for (int j = 0; j < k; j++) {
                const char *p = pieces[next_rnd(&s) % NP];
                size_t l = strlen(p);
                memcpy(data + pos, p, l);
                pos += (uint32_t)l;
            }
        }
    }
    off[n] = pos;
    int32_t special = n - 2;
    *stop_id = n - 1;
    xgr_vocab *v = NULL;
    if (xgr_vocab_new(data, off, n, n, &special, 1, stop_id, 1, &v))
        fprintf(stderr, "vocab: %s\n", xgr_last_error());
    free(data);
    free(off);
    return v;
}

static const char *const ebnfs[] = {
    NULL, /* builtin JSON */
    "root ::= \"{\" ws \"\\\"name\\\"\" ws \":\" ws str ws (\",\" ws \"\\\"id\\\"\" ws \":\" ws num)? ws \"}\"\n"
    "str ::= \"\\\"\" ([^\"\\\\] | \"\\\\\" [\"\\\\/bfnrtu])* \"\\\"\"\n"
    "num ::= \"-\"? [0-9]+ (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)?\n"
    "ws ::= [ \\n]{0,2}\n",
    "root ::= TagDispatch((\"<tool_call>\", call), (\"<function=\", fn), "
    "loop_after_dispatch=true, excludes=())\n"
    "call ::= \"{\\\"name\\\": \\\"get_weather\\\"}\" \"</tool_call>\"\n"
    "fn ::= [a-z_]+ \">\" [a-z0-9 ]{0,30} \"</function>\"\n",
    "root ::= item{0,40}\nitem ::= \"a\" | \"b\" \"x\"? | \"[\" root \"]\"\n",
    /* uniqueItems over elements that run out (six values): the grammar's token lists are
     * built by whichever thread fills first and shared (matcher.c uq_tables) */
    "root ::= arr\narr[unique_search_scope] ::= \"[\" (el (\",\" \" \"? el)*)? \"]\"\n"
    "el[unique] ::= \"{\\\"\" [ab] \"\\\": \" [019] \"}\"\n",
    /* a lazy rule: its token lists are shared the same way (matcher.c lazy_prepare) */
    "root ::= (\"{\" ans \"}\")+\nans[lazy] ::= [abx ]+\n",
};
#define NG ((int)(sizeof ebnfs / sizeof *ebnfs))
static const char *const regex_src = "(\\{\"id\": [0-9]{1,6}\\}|[a-z]{2,12}@[a-z]+\\.(com|org))";
#define NGR (NG + 1)

static xgr_vocab *vocab;
static int32_t stop_tok, row_words, vocab_size;
static xgr_grammar *grammars[NGR];
static xgr_compiled *shared[NGR];
static uint64_t serial_digest[NGR][N_WALKS];

static int parse_grammar(int i, xgr_grammar **g) {
    if (i == NG) return xgr_grammar_from_regex(regex_src, strlen(regex_src), g);
    if (!ebnfs[i]) return xgr_grammar_builtin_json(g);
    return xgr_grammar_from_ebnf(ebnfs[i], strlen(ebnfs[i]), NULL, 0, g);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

/* A seeded constrained walk with rollback and fork; returns the digest of every mask and
 * every chosen token. */
static uint64_t walk(xgr_compiled *c, int g, int w) {
    uint64_t s = 0x51ED270B27ULL * (uint64_t)(g * 131 + w + 1), h = 1469598103934665603ULL;
    int32_t *row = calloc((size_t)row_words, 4);
    xgr_matcher *m = NULL;
    if (!row || xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m)) {
        CHECK(0, "matcher_new: %s", xgr_last_error());
        free(row);
        return 0;
    }
    for (int step = 0; step < N_STEPS; step++) {
        int need;
        if (xgr_matcher_fill_bitmask(m, row, (size_t)row_words, &need)) {
            CHECK(0, "fill: %s", xgr_last_error());
            break;
        }
        h = fnv(h, row, (size_t)row_words * 4);
        int32_t cnt = 0;
        for (int32_t t = 0; t < vocab_size; t++) cnt += (row[t >> 5] >> (t & 31)) & 1;
        if (!cnt) break;
        int32_t k = (int32_t)(next_rnd(&s) % (uint64_t)cnt), tok = -1;
        for (int32_t t = 0; t < vocab_size && tok < 0; t++)
            if (((row[t >> 5] >> (t & 31)) & 1) && k-- == 0) tok = t;
        if (tok == stop_tok && step < N_STEPS / 2 && cnt > 1) continue; /* go deeper */
        int acc = 0;
        CHECK(!xgr_matcher_accept_token(m, tok, &acc) && acc, "allowed token %d rejected", tok);
        h = fnv(h, &tok, sizeof tok);
        if (xgr_matcher_is_terminated(m)) break;
        if (step % 7 == 6) {
            CHECK(!xgr_matcher_rollback(m, 1), "rollback: %s", xgr_last_error());
            CHECK(!xgr_matcher_accept_token(m, tok, &acc) && acc, "re-accept %d", tok);
        }
        if (step % 9 == 8) { /* a fork and the batch path (2 threads) give the same row */
            xgr_matcher *f = NULL;
            if (!xgr_matcher_fork(m, &f)) {
                int32_t *rows = calloc(2 * (size_t)row_words, 4);
                xgr_matcher *ms[2] = {m, f};
                CHECK(rows && !xgr_fill_bitmask_batch(ms, 2, rows, (size_t)row_words, NULL, 2),
                      "batch: %s", xgr_last_error());
                if (rows)
                    CHECK(!memcmp(rows, rows + row_words, (size_t)row_words * 4),
                          "fork/batch rows differ");
                free(rows);
                xgr_matcher_free(f);
            }
        }
    }
    xgr_matcher_free(m);
    free(row);
    return h;
}

typedef struct {
    int id;
} targ;

static void *worker(void *p) {
    int id = ((targ *)p)->id;
    for (int r = 0; r < NGR; r++) {
        int g = (r + id) % NGR; /* different order per thread */
        /* compile from many threads at once on shared grammar / vocabulary handles */
        xgr_compiled *own = NULL;
        xgr_compile_options o;
        memset(&o, 0, sizeof o);
        if (xgr_compile(grammars[g], vocab, &o, &own)) {
            CHECK(0, "thread %d compile %d: %s", id, g, xgr_last_error());
            continue;
        }
        for (int w = 0; w < N_WALKS; w++) {
            int ww = (w + id) % N_WALKS;
            uint64_t a = walk(shared[g], g, ww); /* shared compiled grammar */
            CHECK(a == serial_digest[g][ww], "thread %d grammar %d walk %d: shared digest differs",
                  id, g, ww);
            if (w == id % N_WALKS) {
                uint64_t b = walk(own, g, ww); /* own compile: the same masks */
                CHECK(b == serial_digest[g][ww], "thread %d grammar %d walk %d: own digest differs",
                      id, g, ww);
            }
        }
        xgr_compiled_release(own);
    }
    return NULL;
}

int main(void) {
    vocab = make_vocab(&stop_tok);
    if (!vocab) return 1;
    vocab_size = xgr_vocab_size(vocab);
    row_words = (vocab_size + 31) / 32;
    for (int g = 0; g < NGR; g++) {
        if (parse_grammar(g, &grammars[g])) {
            fprintf(stderr, "grammar %d: %s\n", g, xgr_last_error());
            return 1;
        }
    }
    /* serial reference: private caches, fresh compiles */
    xgr_cache_clear();
    for (int g = 0; g < NGR; g++) {
        xgr_compiled *c = NULL;
        xgr_compile_options o;
        memset(&o, 0, sizeof o);
        o.cross_grammar_cache = -1;
        if (xgr_compile(grammars[g], vocab, &o, &c)) {
            fprintf(stderr, "compile %d: %s\n", g, xgr_last_error());
            return 1;
        }
        for (int w = 0; w < N_WALKS; w++) serial_digest[g][w] = walk(c, g, w);
        xgr_compiled_release(c);
    }
    /* shared compiled grammars, fresh (no mask built yet), cross-grammar cache on */
    xgr_cache_clear();
    for (int g = 0; g < NGR; g++) {
        xgr_compile_options o;
        memset(&o, 0, sizeof o);
        if (xgr_compile(grammars[g], vocab, &o, &shared[g])) {
            fprintf(stderr, "compile %d: %s\n", g, xgr_last_error());
            return 1;
        }
    }
    pthread_t th[N_THREADS];
    targ args[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        args[i].id = i;
        if (pthread_create(&th[i], NULL, worker, &args[i])) {
            fprintf(stderr, "pthread_create failed\n");
            return 1;
        }
    }
    for (int i = 0; i < N_THREADS; i++) pthread_join(th[i], NULL);
    /* a small budget while threads are done: eviction must keep held entries valid */
    xgr_cache_stats st;
    xgr_cache_get_stats(&st);
    CHECK(st.bytes <= st.budget, "cache bytes %llu over budget %llu",
          (unsigned long long)st.bytes, (unsigned long long)st.budget);
    for (int g = 0; g < NGR; g++) {
        xgr_compiled_release(shared[g]);
        xgr_grammar_release(grammars[g]);
    }
    xgr_vocab_release(vocab);
    xgr_cache_clear();
    printf("test_threads: %d threads x %d grammars x %d walks (+ own compiles), cache %llu "
           "entries; %d failures\n",
           N_THREADS, NGR, N_WALKS, (unsigned long long)st.entries, failures);
    return failures ? 1 : 0;
}
