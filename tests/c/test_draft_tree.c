/* xgr_matcher_traverse_draft_tree: rows per node against a replay oracle (a fresh matcher
 * accepting the path), bad trees refused without touching the matcher, timeout, a deep
 * chain, and the matcher left where it started. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xgr2.h"

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

/* tokens: 0 "a", 1 "b", 2 "{", 3 "}", 4 "ab", 5 stop (empty text) */
static xgr_vocab *make_vocab(void) {
    static const char *toks[] = {"a", "b", "{", "}", "ab", ""};
    uint8_t data[16];
    uint32_t off[7], pos = 0;
    for (int i = 0; i < 6; i++) {
        off[i] = pos;
        memcpy(data + pos, toks[i], strlen(toks[i]));
        pos += (uint32_t)strlen(toks[i]);
    }
    off[6] = pos;
    int32_t stop = 5;
    xgr_vocab *v = NULL;
    if (xgr_vocab_new(data, off, 6, 6, &stop, 1, &stop, 1, &v)) return NULL;
    return v;
}

static xgr_compiled *compile(xgr_vocab *v, const char *ebnf) {
    xgr_grammar *g = NULL;
    xgr_compiled *c = NULL;
    if (xgr_grammar_from_ebnf(ebnf, strlen(ebnf), "", 0, &g)) return NULL;
    int rc = xgr_compile(g, v, NULL, &c);
    xgr_grammar_release(g);
    return rc ? NULL : c;
}

/* The row after accepting path[0..len) on a fresh matcher; -2 when a token is rejected
 * or the matcher is terminated before the end. */
static int32_t oracle_row(xgr_compiled *c, const int64_t *path, int len) {
    xgr_matcher *m = NULL;
    if (xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m)) return -3;
    int32_t row = 0;
    for (int i = 0; i < len; i++) {
        int acc = 0;
        if (xgr_matcher_is_terminated(m) || xgr_matcher_accept_token(m, (int32_t)path[i], &acc) ||
            !acc) {
            xgr_matcher_free(m);
            return -2;
        }
    }
    if (!xgr_matcher_is_terminated(m) && xgr_matcher_fill_bitmask(m, &row, 1, NULL)) row = -3;
    xgr_matcher_free(m);
    return row;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)rng_state;
}

static void random_trees(xgr_compiled *c) {
    enum { N = 24 };
    for (int round = 0; round < 200; round++) {
        int n = 1 + (int)(rnd() % N);
        int64_t nt[N], ns[N], dt[N], parent[N], last_child[N];
        for (int i = 0; i < n; i++) {
            nt[i] = ns[i] = last_child[i] = -1;
            parent[i] = -1;
            dt[i] = (int64_t)(rnd() % 7) - (rnd() % 9 == 0 ? 3 : 0); /* some ids out of range */
        }
        for (int i = 1; i < n; i++) {
            int p = (int)(rnd() % (uint32_t)i);
            parent[i] = p;
            if (last_child[p] < 0) nt[p] = i;
            else ns[last_child[p]] = i;
            last_child[p] = i;
        }
        xgr_matcher *m = NULL;
        if (xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m)) {
            CHECK(0, "matcher: %s", xgr_last_error());
            return;
        }
        int32_t rows[N];
        for (int i = 0; i < n; i++) rows[i] = 0x5A5A5A5A;
        int done = -1;
        CHECK(!xgr_matcher_traverse_draft_tree(m, nt, ns, dt, n, rows, 1, 1, -1.0, &done) &&
                  done == 1,
              "round %d: traverse: %s", round, xgr_last_error());
        CHECK(xgr_matcher_num_steps(m) == 0, "round %d: the matcher moved", round);
        for (int i = 0; i < n; i++) {
            /* the path root -> i (node 0's token is not part of it) */
            int64_t path[N];
            int len = 0;
            for (int j = i; j > 0; j = (int)parent[j]) path[len++] = dt[j];
            for (int a = 0, b = len - 1; a < b; a++, b--) {
                int64_t t = path[a];
                path[a] = path[b];
                path[b] = t;
            }
            /* expected: the oracle row; a node whose parent path fails keeps 0x5A5A5A5A,
             * a node rejected itself (or out of range) gets 0 */
            int32_t want = oracle_row(c, path, len);
            if (want == -2) {
                int32_t parent_row = len > 1 ? oracle_row(c, path, len - 1) : 0;
                int parent_ok = len <= 1 || parent_row != -2;
                int parent_live = parent_ok;
                if (parent_ok && len > 1) {
                    /* the parent itself may be terminated: then i is not visited */
                    xgr_matcher *p = NULL;
                    if (!xgr_matcher_new(c, NULL, 0, 0, 0, -1, &p)) {
                        int acc;
                        for (int k = 0; k < len - 1; k++)
                            (void)xgr_matcher_accept_token(p, (int32_t)path[k], &acc);
                        parent_live = !xgr_matcher_is_terminated(p);
                        xgr_matcher_free(p);
                    }
                }
                want = parent_ok && parent_live ? 0 : 0x5A5A5A5A;
            }
            CHECK(rows[i] == want, "round %d node %d: row %x, expected %x", round, i,
                  (unsigned)rows[i], (unsigned)want);
        }
        xgr_matcher_free(m);
    }
}

static void bad_trees(xgr_compiled *c) {
    xgr_matcher *m = NULL;
    if (xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m)) return;
    int32_t rows[3] = {7, 7, 7};
    int done = 5;
    int64_t dt[3] = {0, 2, 0};
    struct {
        int64_t nt[3], ns[3];
        const char *msg;
    } cases[] = {
        {{1, 2, -1}, {1, -1, -1}, "must not have siblings"},
        {{3, -1, -1}, {-1, -1, -1}, "out of bounds"},
        {{1, -1, -1}, {-1, -9, -1}, "out of bounds"},
        {{1, 0, -1}, {-1, -1, -1}, "must not be the child"},
        {{1, 1, -1}, {-1, -1, -1}, "cycles or shared nodes"},
        {{1, 2, -1}, {-1, 2, -1}, "cycles or shared nodes"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        int rc = xgr_matcher_traverse_draft_tree(m, cases[k].nt, cases[k].ns, dt, 3, rows, 1, 1,
                                                 -1.0, &done);
        CHECK(rc == XGR_ERR_INVALID_ARG && strstr(xgr_last_error(), cases[k].msg),
              "bad tree %zu: rc %d (%s)", k, rc, xgr_last_error());
        CHECK(rows[0] == 7 && rows[1] == 7 && rows[2] == 7, "bad tree %zu: rows touched", k);
    }
    CHECK(xgr_matcher_traverse_draft_tree(m, cases[0].nt, cases[0].ns, dt, 0, rows, 1, 1, -1.0,
                                          &done) == XGR_ERR_INVALID_ARG,
          "empty tree");
    CHECK(xgr_matcher_traverse_draft_tree(NULL, cases[0].nt, cases[0].ns, dt, 3, rows, 1, 1,
                                          -1.0, &done) == XGR_ERR_INVALID_ARG,
          "NULL matcher");
    CHECK(xgr_matcher_traverse_draft_tree(m, cases[0].nt, cases[0].ns, dt, 3, rows, 0, 1, -1.0,
                                          &done) == XGR_ERR_INVALID_ARG,
          "row stride below the row width");
    CHECK(xgr_matcher_num_steps(m) == 0, "bad trees moved the matcher");
    xgr_matcher_free(m);
}

static void deep_chain_and_timeout(xgr_compiled *c) {
    enum { N = 5000 };
    int64_t *nt = malloc(N * sizeof *nt), *ns = malloc(N * sizeof *ns);
    int64_t *dt = malloc(N * sizeof *dt);
    int32_t *rows = malloc(N * sizeof *rows);
    xgr_matcher *m = NULL;
    if (!nt || !ns || !dt || !rows || xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m)) {
        CHECK(0, "setup");
        goto out;
    }
    for (int i = 0; i < N; i++) {
        nt[i] = i + 1 < N ? i + 1 : -1;
        ns[i] = -1;
        dt[i] = 0; /* "a" */
        rows[i] = 0x5A5A5A5A;
    }
    int done = -1;
    CHECK(!xgr_matcher_traverse_draft_tree(m, nt, ns, dt, N, rows, 1, 1, 1e-9, &done) && done == 0,
          "timeout: %d", done);
    CHECK(rows[0] != 0x5A5A5A5A && xgr_matcher_num_steps(m) == 0, "timeout: root / state");
    CHECK(!xgr_matcher_traverse_draft_tree(m, nt, ns, dt, N, rows, 1, 1, 0.0, &done) && done == 1,
          "deep chain");
    CHECK(rows[N - 1] == (1 << 0 | 1 << 1 | 1 << 4 | 1 << 5) && xgr_matcher_num_steps(m) == 0,
          "deep chain: last row %x", (unsigned)rows[N - 1]);
out:
    xgr_matcher_free(m);
    free(nt);
    free(ns);
    free(dt);
    free(rows);
}

/* xgr_matcher_traverse_draft_tree_ret (the bindings' call): the same rows as the plain
 * call, 1 / 0 for walked / timed out, minus XGR_ERR_INVALID_ARG for lengths that disagree,
 * an empty tree (NULL addresses allowed then) and too many nodes; stack (small) and heap
 * (large) scratch both. */
static void ret_variant(xgr_compiled *c) {
    enum { N = 600 };
    int64_t *nt = malloc(N * sizeof *nt), *ns = malloc(N * sizeof *ns);
    int64_t *dt = malloc(N * sizeof *dt);
    int32_t *rows = malloc(N * sizeof *rows), *rows2 = malloc(N * sizeof *rows2);
    xgr_matcher *m = NULL;
    if (!nt || !ns || !dt || !rows || !rows2 || xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m)) {
        CHECK(0, "setup");
        goto out;
    }
    /* a chain of "a" (odd nodes; node i + 2 is the first child of node i) with a rejected
     * "}" sibling (even nodes) at every level */
    for (int i = 0; i < N; i++) {
        int odd = i % 2 == 1;
        dt[i] = odd ? 0 : 3;
        nt[i] = i == 0 ? 1 : odd && i + 2 < N ? i + 2 : -1;
        ns[i] = odd && i + 1 < N ? i + 1 : -1;
    }
    int sizes[2] = {40, N};
    for (int k = 0; k < 2; k++) {
        int n = sizes[k];
        int64_t nt_n[N];
        for (int i = 0; i < n; i++) nt_n[i] = nt[i] < n ? nt[i] : -1;
        int64_t ns_n[N];
        for (int i = 0; i < n; i++) ns_n[i] = ns[i] < n ? ns[i] : -1;
        int done = -1;
        memset(rows, 0x5A, (size_t)n * sizeof *rows);
        memset(rows2, 0x5A, (size_t)n * sizeof *rows2);
        int rc = xgr_matcher_traverse_draft_tree(m, nt_n, ns_n, dt, n, rows, 1, 1, -1.0, &done);
        int r = xgr_matcher_traverse_draft_tree_ret(m, (uintptr_t)nt_n, (uintptr_t)ns_n,
                                                    (uintptr_t)dt, n, n, n, rows2, n, 1, 1, -1.0);
        CHECK(!rc && done == 1 && r == 1, "ret n=%d: rc %d done %d r %d (%s)", n, rc, done, r,
              xgr_last_error());
        CHECK(memcmp(rows, rows2, (size_t)n * sizeof *rows) == 0, "ret n=%d: rows differ", n);
        CHECK(xgr_matcher_num_steps(m) == 0, "ret n=%d: state", n);
        r = xgr_matcher_traverse_draft_tree_ret(m, (uintptr_t)nt_n, (uintptr_t)ns_n,
                                                (uintptr_t)dt, n, n, n, rows2, n, 1, 1, 1e-12);
        CHECK(r == 0 && xgr_matcher_num_steps(m) == 0, "ret n=%d timeout: %d", n, r);
    }
    struct {
        int64_t n_nt, n_ns, n_dt, rows;
        const char *msg;
    } bad[] = {
        {3, 2, 3, 3, "retrieve_next_sibling tensors must have the same length"},
        {3, 3, 4, 3, "draft_tokens tensors must have the same length"},
        {3, 3, 3, 2, "batch size must match the number of nodes in the tree (3), got 2"},
        {0, 0, 0, 0, "must not be empty"},
        {(int64_t)1 << 31, (int64_t)1 << 31, (int64_t)1 << 31, (int64_t)1 << 31,
         "at most 2**31 - 1"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        int empty = bad[k].n_nt == 0;
        int r = xgr_matcher_traverse_draft_tree_ret(
            m, empty ? 0 : (uintptr_t)nt, empty ? 0 : (uintptr_t)ns, empty ? 0 : (uintptr_t)dt,
            bad[k].n_nt, bad[k].n_ns, bad[k].n_dt, empty ? NULL : rows, bad[k].rows, 1, 1, -1.0);
        CHECK(r == -XGR_ERR_INVALID_ARG && strstr(xgr_last_error(), bad[k].msg),
              "bad %zu: %d %s", k, r, xgr_last_error());
    }
    int64_t cyc_nt[3] = {1, 1, -1}, cyc_ns[3] = {-1, -1, -1};
    int r = xgr_matcher_traverse_draft_tree_ret(m, (uintptr_t)cyc_nt, (uintptr_t)cyc_ns,
                                                (uintptr_t)dt, 3, 3, 3, rows, 3, 1, 1, -1.0);
    CHECK(r == -XGR_ERR_INVALID_ARG && strstr(xgr_last_error(), "cycles or shared nodes"),
          "shared node: %d %s", r, xgr_last_error());
    CHECK(xgr_matcher_num_steps(m) == 0, "bad trees: state");
out:
    xgr_matcher_free(m);
    free(nt);
    free(ns);
    free(dt);
    free(rows);
    free(rows2);
}

int main(void) {
    xgr_vocab *v = make_vocab();
    xgr_compiled *json = v ? compile(v, "root ::= \"{\" [ab]* \"}\" | \"a\" root | \"b\"") : NULL;
    xgr_compiled *chain = v ? compile(v, "root ::= [ab]*") : NULL;
    CHECK(json && chain, "setup: %s", xgr_last_error());
    if (json) random_trees(json), bad_trees(json);
    if (chain) deep_chain_and_timeout(chain);
    if (json) ret_variant(json);
    xgr_compiled_release(json);
    xgr_compiled_release(chain);
    xgr_vocab_release(v);
    printf("test_draft_tree: %d failures\n", failures);
    return failures ? 1 : 0;
}
