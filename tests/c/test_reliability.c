/* Reliability regressions: inputs found by the fuzzers (tests/fuzz) and every configured
 * limit (docs/limits.md) ending in a status code with a clear message, never a crash,
 * and leaving the matcher usable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../csrc/include/xgr2.h"

static int failures = 0, checks = 0;
#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        checks++;                                                                          \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                          \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fprintf(stderr, "\n");                                                         \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

/* ids 0..255: single bytes; 256: "xx"; 257: special; 258: stop */
static xgr_vocab *make_vocab(void) {
    uint8_t data[300];
    uint32_t off[260];
    uint32_t pos = 0;
    for (int i = 0; i < 256; i++) {
        off[i] = pos;
        data[pos++] = (uint8_t)i;
    }
    off[256] = pos;
    data[pos++] = 'x';
    data[pos++] = 'x';
    off[257] = pos;
    off[258] = pos;
    off[259] = pos;
    int32_t special = 257, stop = 258;
    xgr_vocab *v = NULL;
    if (xgr_vocab_new(data, off, 259, 259, &special, 1, &stop, 1, &v))
        fprintf(stderr, "vocab: %s\n", xgr_last_error());
    return v;
}

#define WORDS ((259 + 31) / 32)

static xgr_compiled *compile_ebnf(xgr_vocab *v, const char *src, const xgr_compile_options *o) {
    xgr_grammar *g = NULL;
    xgr_compiled *c = NULL;
    if (xgr_grammar_from_ebnf(src, strlen(src), NULL, 0, &g)) {
        fprintf(stderr, "parse: %s\n", xgr_last_error());
        return NULL;
    }
    if (xgr_compile(g, v, o, &c)) c = NULL;
    xgr_grammar_release(g);
    return c;
}

static int masks_match_oracle(xgr_matcher *m) {
    int32_t a[WORDS], b[WORDS];
    int need;
    if (xgr_matcher_fill_bitmask(m, a, WORDS, &need)) return 0;
    if (xgr_matcher_fill_bitmask_bruteforce(m, b, WORDS)) return 0;
    return memcmp(a, b, sizeof a) == 0;
}

static int bit(const int32_t *row, int t) { return (row[t >> 5] >> (t & 31)) & 1; }

/* fuzz finding (regex target): the empty regex (NULL + 0 in the parser, and a DFA state
 * with no edges hashed from NULL + 0) */
static void empty_regex(xgr_vocab *v) {
    xgr_grammar *g = NULL;
    CHECK(xgr_grammar_from_regex(NULL, 0, &g) == XGR_OK, "empty regex (NULL): %s", xgr_last_error());
    xgr_compiled *c = NULL;
    CHECK(g && xgr_compile(g, v, NULL, &c) == XGR_OK, "compile empty regex: %s", xgr_last_error());
    if (c) {
        xgr_matcher *m = NULL;
        CHECK(!xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m), "matcher");
        CHECK(m && xgr_matcher_can_end(m), "empty regex matches the empty string");
        CHECK(m && masks_match_oracle(m), "empty regex mask");
        xgr_matcher_free(m);
        xgr_compiled_release(c);
    }
    xgr_grammar_release(g);
    g = NULL;
    CHECK(xgr_grammar_from_regex("", 0, &g) == XGR_OK, "empty regex (\"\")");
    xgr_grammar_release(g);
}

/* fuzz finding (regex target): an empty class `[]` with no ranges in the pool */
static void empty_class(xgr_vocab *v) {
    static const char *srcs[] = {"^\\{[]\\}%]\\}$", "[]", "a[]b|c", "[^]"};
    for (size_t i = 0; i < sizeof srcs / sizeof *srcs; i++) {
        xgr_grammar *g = NULL;
        int rc = xgr_grammar_from_regex(srcs[i], strlen(srcs[i]), &g);
        if (rc == XGR_OK) {
            xgr_compiled *c = NULL;
            rc = xgr_compile(g, v, NULL, &c);
            CHECK(rc == XGR_OK || *xgr_last_error(), "regex %s: status %d without a message", srcs[i], rc);
            xgr_compiled_release(c);
        } else {
            CHECK(*xgr_last_error() != 0, "regex %s: status %d without a message", srcs[i], rc);
        }
        xgr_grammar_release(g);
    }
}

/* fuzz finding (matcher target): an override stop token that is also grammar text was
 * allowed as text by the cached mask but rejected by accept_token (it is a stop there). */
static void override_stop_as_text(xgr_vocab *v) {
    xgr_compiled *c = compile_ebnf(v, "root ::= \"x\" \"y\" | \"xx\" \"z\"\n", NULL);
    CHECK(c != NULL, "compile: %s", xgr_last_error());
    if (!c) return;
    int32_t stops[2] = {'x', 256};
    xgr_matcher *m = NULL;
    CHECK(!xgr_matcher_new(c, stops, 2, 1, 0, -1, &m), "matcher: %s", xgr_last_error());
    if (!m) return;
    int32_t row[WORDS];
    CHECK(!xgr_matcher_fill_bitmask(m, row, WORDS, NULL), "fill");
    CHECK(!bit(row, 'x') && !bit(row, 256), "a stop token must not be allowed as text");
    CHECK(masks_match_oracle(m), "cached mask differs from brute force");
    int acc = 1;
    CHECK(!xgr_matcher_accept_token(m, 'x', &acc) && !acc, "stop token accepted as text");
    xgr_matcher_free(m);
    xgr_compiled_release(c);
}

/* max_step_work: a highly ambiguous grammar fails with XGR_ERR_LIMIT at the byte that
 * needs too much work, leaves the state unchanged and stays usable. */
static void step_work_limit(xgr_vocab *v) {
    const char *src = "root ::= s\ns ::= s s s | s s | [a-z] | \"\"\n";
    xgr_compile_options o;
    memset(&o, 0, sizeof o);
    o.max_step_work = 20000;
    xgr_compiled *c = compile_ebnf(v, src, &o);
    CHECK(c != NULL, "compile: %s", xgr_last_error());
    if (!c) return;
    xgr_matcher *m = NULL;
    CHECK(!xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m), "matcher");
    int rc = XGR_OK, acc = 0, i;
    for (i = 0; i < 2000 && rc == XGR_OK; i++) rc = xgr_matcher_accept_token(m, 'a', &acc);
    CHECK(rc == XGR_ERR_LIMIT, "expected XGR_ERR_LIMIT, got %d after %d tokens", rc, i);
    CHECK(strstr(xgr_last_error(), "max_step_work") != NULL, "message: %s", xgr_last_error());
    CHECK(xgr_matcher_num_steps(m) == i - 1, "a failed token must not be kept (%d steps, %d tried)",
          (int)xgr_matcher_num_steps(m), i);
    /* filling never fails on work limits: a token too expensive to parse is not allowed */
    int32_t row[WORDS];
    CHECK(xgr_matcher_fill_bitmask(m, row, WORDS, NULL) == XGR_OK, "fill at the limit: %s",
          xgr_last_error());
    /* (the cached mask may still allow a token whose acceptance hits the limit: context-free
     * entries never parse; accepting it then fails cleanly, as above) */
    CHECK(xgr_matcher_fill_bitmask_bruteforce(m, row, WORDS) == XGR_OK, "oracle at the limit: %s",
          xgr_last_error());
    CHECK(!xgr_matcher_rollback(m, 3), "rollback after a limit error");
    CHECK(!xgr_matcher_accept_token(m, 'b', &acc) && acc, "usable after a limit error");
    xgr_matcher_free(m);
    xgr_compiled_release(c);
    /* default: the same input is fine for a few tokens */
    c = compile_ebnf(v, src, NULL);
    CHECK(c != NULL, "compile");
    if (!c) return;
    CHECK(!xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m), "matcher");
    for (i = 0; i < 20; i++)
        CHECK(!xgr_matcher_accept_token(m, 'a', &acc) && acc, "default limit: token %d", i);
    xgr_matcher_free(m);
    xgr_compiled_release(c);
}

static void size_limits(xgr_vocab *v) {
    xgr_compile_options o;
    /* max_rules */
    memset(&o, 0, sizeof o);
    o.max_rules = 3;
    o.inline_max_states = -1;
    xgr_compiled *c = compile_ebnf(v, "root ::= a b c d\na ::= \"a\" a?\nb ::= \"b\" b?\nc ::= \"c\" c?\nd ::= \"d\" d?\n", &o);
    CHECK(!c && strstr(xgr_last_error(), "max_rules"), "max_rules: %s", xgr_last_error());
    xgr_compiled_release(c);
    /* max_fsm_states */
    memset(&o, 0, sizeof o);
    o.max_fsm_states = 100;
    char big[600];
    memcpy(big, "root ::= \"", 10);
    memset(big + 10, 'q', 500);
    memcpy(big + 510, "\"\n", 3);
    c = compile_ebnf(v, big, &o);
    CHECK(!c && strstr(xgr_last_error(), "max_fsm_states"), "max_fsm_states: %s", xgr_last_error());
    xgr_compiled_release(c);
    /* max_row_items: many parallel alternatives alive at once */
    memset(&o, 0, sizeof o);
    o.max_row_items = 16;
    o.inline_max_states = -1;
    c = compile_ebnf(v, "root ::= s+\ns ::= a | b | d | e\na ::= [a-z] [a-z]*\nb ::= [a-z]+ \"!\"\n"
                        "d ::= [a-z]* \"?\"\ne ::= s \".\"\n", &o);
    CHECK(c != NULL, "compile: %s", xgr_last_error());
    if (c) {
        xgr_matcher *m = NULL;
        CHECK(!xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m), "matcher");
        int rc = XGR_OK, acc;
        for (int i = 0; i < 200 && rc == XGR_OK; i++) rc = xgr_matcher_accept_token(m, 'a', &acc);
        CHECK(rc == XGR_ERR_LIMIT && strstr(xgr_last_error(), "max_row_items"), "max_row_items: %d %s",
              rc, xgr_last_error());
        int32_t row[WORDS];
        rc = xgr_matcher_fill_bitmask(m, row, WORDS, NULL);
        CHECK(rc == XGR_OK || rc == XGR_ERR_LIMIT, "fill after a limit error: %d", rc);
        xgr_matcher_free(m);
        xgr_compiled_release(c);
    }
    /* nesting depth of both parsers */
    size_t n = 1100;
    char *deep = malloc(2 * n + 32);
    memcpy(deep, "root ::= ", 9);
    memset(deep + 9, '(', n);
    deep[9 + n] = 'r';
    memset(deep + 10 + n, ')', n);
    xgr_grammar *g = NULL;
    int rc = xgr_grammar_from_ebnf(deep, 10 + 2 * n, NULL, 0, &g);
    CHECK(rc == XGR_ERR_LIMIT && strstr(xgr_last_error(), "nesting"), "EBNF nesting: %d %s", rc,
          xgr_last_error());
    xgr_grammar_release(g);
    g = NULL;
    rc = xgr_grammar_from_regex(deep + 9, 1 + 2 * n, &g);
    CHECK(rc == XGR_ERR_LIMIT && strstr(xgr_last_error(), "nesting"), "regex nesting: %d %s", rc,
          xgr_last_error());
    xgr_grammar_release(g);
    free(deep);
    /* huge repetition bounds */
    g = NULL;
    rc = xgr_grammar_from_regex("a{99999999999}", 14, &g);
    CHECK(rc != XGR_OK && *xgr_last_error(), "repetition bound: %d", rc);
    xgr_grammar_release(g);
}

/* Bad token ids and rollback past the start: status codes, state unchanged. */
static void bad_ids(xgr_vocab *v) {
    xgr_compiled *c = compile_ebnf(v, "root ::= \"ab\"\n", NULL);
    if (!c) return;
    xgr_matcher *m = NULL;
    CHECK(!xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m), "matcher");
    int acc = 5;
    CHECK(xgr_matcher_accept_token(m, -1, &acc) == XGR_ERR_INVALID_ARG && !acc, "negative id");
    CHECK(xgr_matcher_accept_token(m, 259, &acc) == XGR_ERR_INVALID_ARG, "id == vocab_size");
    CHECK(xgr_matcher_accept_token(m, INT32_MAX, &acc) == XGR_ERR_INVALID_ARG, "huge id");
    CHECK(xgr_matcher_accept_token(m, 257, &acc) == XGR_OK && !acc, "special id is rejected");
    CHECK(xgr_matcher_accept_token(m, 258, &acc) == XGR_OK && !acc, "stop before the end");
    CHECK(xgr_matcher_rollback(m, 1) == XGR_ERR_STATE, "rollback past the start");
    CHECK(xgr_matcher_rollback(m, -3) == XGR_ERR_INVALID_ARG, "negative rollback");
    CHECK(xgr_matcher_accept_token(m, 'a', &acc) == XGR_OK && acc, "a");
    CHECK(xgr_matcher_rollback(m, 2) == XGR_ERR_STATE, "rollback 2 of 1");
    CHECK(xgr_matcher_num_steps(m) == 1, "state unchanged");
    size_t na = 7;
    int32_t ids[3] = {'b', -5, 'b'};
    CHECK(xgr_matcher_validate_tokens(m, ids, 3, &na) != XGR_OK || na == 1, "validate: %zu", na);
    CHECK(xgr_matcher_accept_token(m, 'b', &acc) == XGR_OK && acc, "b");
    CHECK(xgr_matcher_accept_token(m, 258, &acc) == XGR_OK && acc, "stop at the end");
    CHECK(xgr_matcher_accept_token(m, 'a', &acc) == XGR_OK && !acc, "after termination");
    int32_t row[WORDS];
    CHECK(xgr_matcher_fill_bitmask(m, row, WORDS - 1, NULL) == XGR_ERR_INVALID_ARG, "short row");
    xgr_matcher_free(m);
    int32_t bad_stop = 999;
    CHECK(xgr_matcher_new(c, &bad_stop, 1, 1, 0, -1, &m) == XGR_ERR_INVALID_ARG, "bad override stop");
    xgr_compiled_release(c);
}

/* xgr_json_nesting_depth: the depth of arrays and objects, brackets in strings (and
 * escaped quotes in them) ignored, stopping once past the limit. */
static void json_nesting_depth(void) {
    struct {
        const char *text;
        int32_t limit, depth;
    } cases[] = {
        {"", 10, 0},
        {"1", 10, 0},
        {"[[]]", 10, 2},
        {"{\"a\": [1, {\"b\": []}], \"c\": {}}", 10, 4},
        {"[\"[[[\"]", 10, 1},
        {"[\"\\\"[[\"]", 10, 1},   /* ["\"[["] : the escaped quote does not end the string */
        {"[[[[[", 3, 4},               /* stops at limit + 1 */
        {"]]][[", 10, 2},              /* not JSON: only scanned */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int32_t d = -1;
        int rc = xgr_json_nesting_depth(cases[i].text, strlen(cases[i].text), cases[i].limit, &d);
        CHECK(rc == XGR_OK && d == cases[i].depth, "depth of %s: rc %d, got %d, want %d",
              cases[i].text, rc, (int)d, (int)cases[i].depth);
    }
    int32_t d;
    CHECK(xgr_json_nesting_depth(NULL, 3, 10, &d) == XGR_ERR_INVALID_ARG && *xgr_last_error(),
          "NULL text with a length");
    CHECK(xgr_json_nesting_depth("[]", 2, 10, NULL) == XGR_ERR_INVALID_ARG, "NULL output");
    CHECK(xgr_json_nesting_depth("[]", 2, -1, &d) == XGR_ERR_INVALID_ARG, "negative limit");
}

/* xgr_json_canonical: json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)
 * when proven (whitespace dropped, escapes respelled, "-0" as "0"), unknown for what Python
 * spells otherwise or refuses. Pinned against Python by tests/python/test_disk_cache_key.py. */
static void json_canonical(void) {
    struct {
        const char *text, *want; /* want NULL: unknown */
    } cases[] = {
        {" { \"a\" : [ 1 , -0 , 0.5 , true , null ] , \"b\" : { } }\n", "{\"a\":[1,0,0.5,true,null],\"b\":{}}"},
        {"\"\\u00e9\\u00C9\\/\\u0022\\u005c\\u0009\\u001F\\ud83d\\ude00\"", "\"\xc3\xa9\xc3\x89/\\\"\\\\\\t\\u001f\xf0\x9f\x98\x80\""},
        {"[1.0, 100.0, 0.0001, -0.0, 1000000000000000.0]", "[1.0,100.0,0.0001,-0.0,1000000000000000.0]"},
        {"{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8,\"i\":9,\"j\":10}",
         "{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8,\"i\":9,\"j\":10}"},
        {"{\"a\":{\"a\":1},\"b\":[{\"a\":2}]}", "{\"a\":{\"a\":1},\"b\":[{\"a\":2}]}"},
        {"{\"a\":1,\"\\u0061\":2}", NULL},  /* a duplicate key, spelled differently */
        {"{\"k\":1,\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8,\"k\":9}", NULL},
        {"[1e2]", NULL}, {"[1.50]", NULL}, {"[0.00001]", NULL}, {"[1234567890123456.0]", NULL},
        {"[NaN]", NULL}, {"[-Infinity]", NULL}, {"[01]", NULL}, {"[1.]", NULL}, {"[.5]", NULL},
        {"\"\\ud800\"", NULL}, {"\"\\udc00\"", NULL}, {"\"\\x41\"", NULL}, {"\"a\tb\"", NULL},
        {"\"\xc3\"", NULL}, {"\"\xed\xa0\x80\"", NULL}, {"[1,]", NULL}, {"{\"a\":1,}", NULL},
        {"", NULL}, {" ", NULL}, {"[] []", NULL}, {"[[[[]]]]", NULL}, /* deeper than the limit 3 */
    };
    char out[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = 99, len = strlen(cases[i].text);
        int32_t known = -1;
        int rc = xgr_json_canonical(cases[i].text, len, 3, out, &n, &known);
        int ok = rc == XGR_OK && known == (cases[i].want != NULL);
        if (ok && cases[i].want)
            ok = n == strlen(cases[i].want) && n <= len && memcmp(out, cases[i].want, n) == 0;
        CHECK(ok, "canonical %s: rc %d known %d got %.*s", cases[i].text, rc, (int)known,
              known == 1 ? (int)n : 0, out);
    }
    size_t n;
    int32_t known;
    CHECK(xgr_json_canonical(NULL, 3, 10, out, &n, &known) == XGR_ERR_INVALID_ARG && *xgr_last_error(),
          "NULL text with a length");
    CHECK(xgr_json_canonical("[]", 2, 10, NULL, &n, &known) == XGR_ERR_INVALID_ARG, "NULL output");
    CHECK(xgr_json_canonical("[]", 2, 10, out, NULL, &known) == XGR_ERR_INVALID_ARG, "NULL length");
    CHECK(xgr_json_canonical("[]", 2, -1, out, &n, &known) == XGR_ERR_INVALID_ARG, "negative limit");
    CHECK(xgr_json_canonical(NULL, 0, 10, NULL, &n, &known) == XGR_OK && known == 0, "empty");
}

/* A grammar compiled with drop_grammar no longer holds its IR, reports less memory, and
 * still masks exactly; NULL handles report 0 bytes. */
static void dropped_grammar(xgr_vocab *v) {
    const char *src = "root ::= \"x\" \"y\" | \"xx\" \"z\"\n";
    xgr_compile_options drop = {0};
    drop.drop_grammar = 1;
    xgr_compiled *kept = compile_ebnf(v, src, NULL), *dropped = compile_ebnf(v, src, &drop);
    CHECK(kept && dropped, "compile: %s", xgr_last_error());
    if (kept && dropped) {
        CHECK(xgr_compiled_grammar(kept) != NULL, "a default compile keeps its grammar");
        CHECK(xgr_compiled_grammar(dropped) == NULL, "drop_grammar releases the grammar");
        CHECK(xgr_compiled_memory(dropped) + xgr_grammar_memory(xgr_compiled_grammar(kept)) ==
                  xgr_compiled_memory(kept),
              "the dropped grammar's bytes are no longer counted");
        xgr_matcher *m = NULL;
        CHECK(!xgr_matcher_new(dropped, NULL, 0, 0, 0, -1, &m), "matcher: %s", xgr_last_error());
        if (m) {
            CHECK(masks_match_oracle(m), "mask of a grammar compiled without its IR");
            xgr_matcher_free(m);
        }
    }
    xgr_compiled_release(kept);
    xgr_compiled_release(dropped);
    CHECK(xgr_grammar_memory(NULL) == 0 && xgr_compiled_memory(NULL) == 0, "NULL has no bytes");
}

int main(void) {
    xgr_vocab *v = make_vocab();
    if (!v) return 1;
    empty_regex(v);
    empty_class(v);
    override_stop_as_text(v);
    step_work_limit(v);
    size_limits(v);
    bad_ids(v);
    json_nesting_depth();
    json_canonical();
    dropped_grammar(v);
    xgr_vocab_release(v);
    xgr_cache_clear();
    printf("test_reliability: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
