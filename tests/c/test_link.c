/* Tests for linking (csrc/compile/link.c), the tag table (csrc/compile/tag_table.c) and
 * the structural-tag span scanner
 * (csrc/front/tag_spans.c).
 *
 * Build and run (from the repository root), as tests/c/run_sanitized.sh does:
 *   gcc -std=c11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -Wall -Wextra \
 *       -Werror -pedantic-errors -pthread -Icsrc/include tests/c/test_link.c \
 *       $(find csrc -name '*.c' | sort) -o /tmp/test_link -lm && /tmp/test_link
 *
 * A linked grammar must behave exactly as the same grammar written out whole: masks and
 * accepted strings are compared with the unlinked compile (and masks with the brute-force
 * oracle) along random walks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../csrc/include/xgr2.h"
#include "../../csrc/compile/link.h"
#include "../../csrc/mask/compiled.h"

static int n_fail = 0, n_check = 0;
#define CHECK(cond)                                                                    \
    do {                                                                               \
        n_check++;                                                                     \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
            n_fail++;                                                                  \
        }                                                                              \
    } while (0)

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static xgr_grammar *parse(const char *src) {
    xgr_grammar *g = NULL;
    if (xgr_grammar_from_ebnf(src, strlen(src), NULL, 0, &g)) {
        fprintf(stderr, "parse failed: %s\n", xgr_last_error());
        return NULL;
    }
    return g;
}

static xgr_fragment *fragment(const char *src) {
    xgr_grammar *g = parse(src);
    xgr_fragment *f = NULL;
    CHECK(g && xgr_fragment_new(g, NULL, &f) == XGR_OK);
    xgr_grammar_release(g);
    return f;
}

/* Single bytes plus a few multi-byte tokens that cross the linked boundaries. */
static const char *const extra[] = {"<f=", "a>{", "}</f>", "b>[", "]</f>", "</f>", "{1", "23}",
                                    "qr", "r]", "a>", "b>", "x<f", "=a", "1}</f><f=b>["};

static xgr_vocab *vocab(int32_t *n_out) {
    static uint8_t data[1024];
    static uint32_t off[300];
    size_t ne = sizeof extra / sizeof *extra;
    int32_t n = 256 + (int32_t)ne + 1;
    uint32_t pos = 0;
    for (int32_t i = 0; i < n; i++) {
        off[i] = pos;
        if (i < 256) {
            data[pos++] = (uint8_t)i;
        } else if (i < 256 + (int32_t)ne) {
            size_t l = strlen(extra[i - 256]);
            memcpy(data + pos, extra[i - 256], l);
            pos += (uint32_t)l;
        }
    }
    off[n] = pos;
    int32_t stop = n - 1;
    xgr_vocab *v = NULL;
    CHECK(xgr_vocab_new(data, off, n, n, NULL, 0, &stop, 1, &v) == XGR_OK);
    *n_out = n;
    return v;
}

/* A linked grammar's tables (copied from its fragments at their offsets) equal a fresh
 * scan of its whole automaton, and so does its pair-slot layout. */
static void check_tables_as_whole(const xgr_compiled *c) {
    const xgr_fsm *f = c->fsm;
    size_t ns = (size_t)f->n_states + 1, nr = (size_t)f->n_rules + 1;
    xgr_scan_tables t = {malloc(ns), malloc(ns * 4), malloc(ns * 4), malloc(nr * 4), malloc(nr),
                         malloc(nr)};
    int32_t *pe = malloc(((size_t)f->n_edges + 1) * 4), *pf = malloc(((size_t)f->n_edges + 1) * 4);
    CHECK(t.scannable && t.ref_begin && t.scan_local && t.n_scan && t.flat && t.opaque && pe && pf);
    if (t.scannable && t.ref_begin && t.scan_local && t.n_scan && t.flat && t.opaque && pe && pf) {
        xgr_scan_rules_init(f, 0, f->n_rules, &t);
        xgr_scan_states(f, f->n_states, &t);
        size_t s4 = (size_t)f->n_states * 4, r1 = (size_t)f->n_rules;
        CHECK(memcmp(t.scannable, c->scannable, (size_t)f->n_states) == 0);
        CHECK(memcmp(t.ref_begin, c->ref_begin, s4) == 0);
        CHECK(memcmp(t.scan_local, c->scan_local, s4) == 0);
        CHECK(memcmp(t.flat, c->rule_flat, r1) == 0);
        CHECK(memcmp(t.opaque, c->rule_opaque, r1) == 0);
        int64_t total;
        int32_t k = xgr_scan_pairs(f, f->n_states, &t, 0, pe, pf, &total);
        CHECK(k == c->n_pair_edges && total == c->n_slots - f->n_states);
        if (k == c->n_pair_edges) {
            CHECK(memcmp(pe, c->pair_edges, (size_t)k * 4) == 0);
            CHECK(memcmp(pf, c->pair_first, (size_t)k * 4) == 0);
        }
    }
    free(t.scannable), free(t.ref_begin), free(t.scan_local), free(t.n_scan), free(t.flat);
    free(t.opaque), free(pe), free(pf);
}

#define SKELETON                                                                        \
    "root ::= TagDispatch((\"<f=\", g), loop_after_dispatch=true, excludes=(\"</f>\"))\n" \
    "g ::= \"a>\" x \"</f>\" | \"b>\" y \"</f>\" | \"c>\" x \"|\" y \"</f>\"\n"
#define X_BODY "\"{\" [0-9]+ \"}\""
#define Y_BODY(self) "\"[\" (\"q\" | \"r\" " self ")* \"]\""

static void test_linked_equals_whole(void) {
    int32_t n;
    xgr_vocab *v = vocab(&n);
    xgr_grammar *skel = parse(SKELETON "x ::= \"L\"\ny ::= \"L\"\n");
    xgr_grammar *whole = parse(SKELETON "x ::= " X_BODY "\ny ::= " Y_BODY("y") "\n");
    xgr_fragment *fx = fragment("root ::= " X_BODY "\n");
    xgr_fragment *fy = fragment("root ::= " Y_BODY("root") "\n");
    CHECK(xgr_fragment_memory(fx) > 0 && xgr_fragment_memory(NULL) == 0);
    const char *names[2] = {"x", "y"};
    xgr_fragment *frags[2] = {fx, fy};
    xgr_compiled *cl = NULL, *cw = NULL;
    CHECK(xgr_compile_linked(skel, names, frags, 2, v, NULL, &cl) == XGR_OK);
    CHECK(xgr_compile(whole, v, NULL, &cw) == XGR_OK);
    /* the result holds what it needs: fragments and skeleton may go */
    xgr_fragment_release(fx);
    xgr_fragment_release(fy);
    xgr_grammar_release(skel);
    if (!cl || !cw) return;
    check_tables_as_whole(cl);
    CHECK(cl->n_pair_edges > 0); /* the y fragment's self-reference, at least */
    size_t words = ((size_t)n + 31) / 32;
    int32_t ml[16], mw[16], mb[16];
    for (int walk = 0; walk < 200; walk++) {
        xgr_matcher *a = NULL, *b = NULL;
        CHECK(xgr_matcher_new(cl, NULL, 0, 0, 0, -1, &a) == XGR_OK);
        CHECK(xgr_matcher_new(cw, NULL, 0, 0, 0, -1, &b) == XGR_OK);
        for (int step = 0; step < 24 && a && b; step++) {
            int ea = 0, eb = 0;
            CHECK(xgr_matcher_fill_bitmask(a, ml, words, &ea) == XGR_OK);
            CHECK(xgr_matcher_fill_bitmask(b, mw, words, &eb) == XGR_OK);
            CHECK(xgr_matcher_fill_bitmask_bruteforce(a, mb, words) == XGR_OK);
            CHECK(memcmp(ml, mw, words * 4) == 0);
            CHECK(memcmp(ml, mb, words * 4) == 0);
            /* mostly allowed tokens, sometimes any token: both must agree on it */
            int32_t allowed[512], k = 0;
            for (int32_t t = 0; t < n; t++)
                if ((ml[t >> 5] >> (t & 31)) & 1) allowed[k++] = t;
            int32_t t = k && rnd(8) ? allowed[rnd((uint32_t)k)] : (int32_t)rnd((uint32_t)n);
            int oka = 0, okb = 0;
            CHECK(xgr_matcher_accept_token(a, t, &oka) == XGR_OK);
            CHECK(xgr_matcher_accept_token(b, t, &okb) == XGR_OK);
            CHECK(oka == okb);
            if (xgr_matcher_is_terminated(a)) break;
        }
        xgr_matcher_free(a);
        xgr_matcher_free(b);
    }
    /* a whole string, crossing both fragments and a nested one */
    static const char *const texts[] = {"hi <f=a>{12}</f> <f=c>{3}|[qr[q]]</f>", "<f=b>[]</f>",
                                        "<f=a>{}</f>", "<f=b>[rq]</f>", "<f=c>{1}[q]</f>"};
    static const int ok[] = {1, 1, 0, 0, 0};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        xgr_matcher *a = NULL, *b = NULL;
        CHECK(xgr_matcher_new(cl, NULL, 0, 0, 0, -1, &a) == XGR_OK);
        CHECK(xgr_matcher_new(cw, NULL, 0, 0, 0, -1, &b) == XGR_OK);
        int oka = 0, okb = 0;
        CHECK(xgr_matcher_accept_bytes(a, (const uint8_t *)texts[i], strlen(texts[i]), &oka) == XGR_OK);
        CHECK(xgr_matcher_accept_bytes(b, (const uint8_t *)texts[i], strlen(texts[i]), &okb) == XGR_OK);
        CHECK(oka == ok[i] && okb == ok[i]);
        if (oka) CHECK(xgr_matcher_can_end(a));
        xgr_matcher_free(a);
        xgr_matcher_free(b);
    }
    xgr_grammar_release(whole);
    xgr_compiled_release(cl);
    xgr_compiled_release(cw);
    xgr_vocab_release(v);
}

/* A skeleton rule that references two tools is this request's own: its closure key would
 * be the whole tool set, so the key stops there (rule_unique); a rule of one fragment, or
 * of a skeleton that references one tool, stays shareable. The masks stay exact. */
static void test_multi_tool_rules_are_unique(void) {
    int32_t n;
    xgr_vocab *v = vocab(&n);
    xgr_fragment *fx = fragment("root ::= " X_BODY "\n");
    xgr_fragment *fy = fragment("root ::= " Y_BODY("root") "\n");
    xgr_grammar *two = parse("root ::= (\"a\" x | \"b\" y)+ \"!\"\nx ::= \"L\"\ny ::= \"L\"\n");
    xgr_grammar *one = parse("root ::= (\"a\" x)+ \"!\"\nx ::= \"L\"\n");
    const char *names[2] = {"x", "y"};
    xgr_fragment *frags[2] = {fx, fy};
    xgr_compiled *c2 = NULL, *c1 = NULL;
    CHECK(xgr_compile_linked(two, names, frags, 2, v, NULL, &c2) == XGR_OK);
    CHECK(xgr_compile_linked(one, names, frags, 1, v, NULL, &c1) == XGR_OK);
    if (c2 && c1) {
        const xgr_fsm *f = c2->fsm;
        int32_t root = f->state_rule[0], uniq = 0;
        for (int32_t r = 0; r < f->n_rules; r++) uniq += c2->rule_unique[r];
        CHECK(c2->rule_unique[root] == 1 && uniq == 1);
        for (int32_t r = 0; r < c1->fsm->n_rules; r++) CHECK(c1->rule_unique[r] == 0);
        size_t words = ((size_t)n + 31) / 32;
        int32_t ml[16], mb[16];
        xgr_matcher *m = NULL;
        CHECK(xgr_matcher_new(c2, NULL, 0, 0, 0, -1, &m) == XGR_OK);
        static const char *const steps[] = {"a", "{1", "}", "b[", "q]", ""};
        for (size_t i = 0; m && i < sizeof steps / sizeof *steps; i++) {
            int ok = 0, need = 0;
            CHECK(xgr_matcher_fill_bitmask(m, ml, words, &need) == XGR_OK);
            CHECK(xgr_matcher_fill_bitmask_bruteforce(m, mb, words) == XGR_OK);
            CHECK(memcmp(ml, mb, words * 4) == 0);
            CHECK(xgr_matcher_accept_bytes(m, (const uint8_t *)steps[i], strlen(steps[i]), &ok) == XGR_OK);
            CHECK(ok);
        }
        xgr_matcher_free(m);
    }
    xgr_fragment_release(fx);
    xgr_fragment_release(fy);
    xgr_grammar_release(two);
    xgr_grammar_release(one);
    xgr_compiled_release(c2);
    xgr_compiled_release(c1);
    xgr_vocab_release(v);
}

static void test_link_errors(void) {
    int32_t n;
    xgr_vocab *v = vocab(&n);
    xgr_grammar *skel = parse("root ::= \"<\" x \">\"\nx ::= \"L\"\n");
    xgr_fragment *f = fragment("root ::= [a-z]+\n");
    xgr_compiled *c = NULL;
    const char *missing[1] = {"nope"}, *root[1] = {"root"}, *twice[2] = {"x", "x"},
               *x[1] = {"x"};
    xgr_fragment *fs[2] = {f, f};
    CHECK(xgr_compile_linked(skel, missing, fs, 1, v, NULL, &c) == XGR_ERR_SEMANTIC && !c);
    CHECK(strstr(xgr_last_error(), "nope") != NULL);
    CHECK(xgr_compile_linked(skel, root, fs, 1, v, NULL, &c) == XGR_ERR_INVALID_ARG && !c);
    CHECK(xgr_compile_linked(skel, twice, fs, 2, v, NULL, &c) == XGR_ERR_INVALID_ARG && !c);
    CHECK(xgr_compile_linked(NULL, x, fs, 1, v, NULL, &c) == XGR_ERR_INVALID_ARG);
    CHECK(xgr_compile_linked(skel, NULL, fs, 1, v, NULL, &c) == XGR_ERR_INVALID_ARG);
    xgr_fragment *none = NULL;
    CHECK(xgr_fragment_new(NULL, NULL, &none) == XGR_ERR_INVALID_ARG && !none);
    CHECK(xgr_fragment_new(skel, NULL, NULL) == XGR_ERR_INVALID_ARG);
    xgr_fragment *nul[1] = {NULL};
    CHECK(xgr_compile_linked(skel, x, nul, 1, v, NULL, &c) == XGR_ERR_INVALID_ARG);
    /* a fragment that matches "" cannot stand in for a non-nullable rule */
    xgr_grammar *g = parse("root ::= [a-z]*\n");
    xgr_fragment *bad = NULL;
    CHECK(xgr_fragment_new(g, NULL, &bad) == XGR_ERR_SEMANTIC && !bad);
    xgr_grammar_release(g);
    /* a stand-in that is nullable */
    xgr_grammar *skel2 = parse("root ::= \"<\" x \">\"\nx ::= \"\" | \"L\"\n");
    CHECK(xgr_compile_linked(skel2, x, fs, 1, v, NULL, &c) == XGR_ERR_SEMANTIC && !c);
    xgr_grammar_release(skel2);
    /* limits hold for the linked total */
    xgr_compile_options o;
    memset(&o, 0, sizeof o);
    o.max_fsm_states = 6;
    CHECK(xgr_compile_linked(skel, x, fs, 1, v, &o, &c) == XGR_ERR_LIMIT && !c);
    /* and the good case, with no fragment at all too */
    CHECK(xgr_compile_linked(skel, x, fs, 1, v, NULL, &c) == XGR_OK && c);
    xgr_matcher *m = NULL;
    int ok = 0;
    CHECK(c && xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m) == XGR_OK);
    CHECK(m && xgr_matcher_accept_bytes(m, (const uint8_t *)"<abc>", 5, &ok) == XGR_OK && ok);
    xgr_matcher_free(m);
    xgr_compiled_release(c);
    c = NULL;
    CHECK(xgr_compile_linked(skel, NULL, NULL, 0, v, NULL, &c) == XGR_OK && c);
    xgr_compiled_release(c);
    xgr_fragment_release(f);
    xgr_grammar_release(skel);
    xgr_vocab_release(v);
}

/* The spans' texts joined by "|", or "ERR". */
static void spans_text(const char *text, char *out, size_t cap) {
    uint64_t *sp = NULL;
    size_t n = 0;
    int rc = xgr_structural_tag_spans(text, strlen(text), &sp, &n);
    if (rc) {
        snprintf(out, cap, "ERR");
        CHECK(sp == NULL && n == 0);
        return;
    }
    size_t len = 0;
    out[0] = 0;
    for (size_t i = 0; i < n; i++) {
        char buf[64];
        size_t l = (size_t)(sp[2 * i + 1] - sp[2 * i]);
        snprintf(buf, sizeof buf, "%.*s", (int)(l < 60 ? l : 60), text + sp[2 * i]);
        len += (size_t)snprintf(out + len, cap > len ? cap - len : 0, "%s%s", i ? "|" : "", buf);
    }
    xgr_free(sp);
}

static void test_spans(void) {
    static const char *const cases[][2] = {
        {"{\"format\": {\"type\": \"triggered_tags\", \"tags\": [{\"a\": 1}, 2 , \"x\"]}}",
         "{\"a\": 1}|2|\"x\""},
        /* nested through content and elements; tags inside a tag are not split out */
        {"{\"format\":{\"elements\":[{\"content\":{\"tags\":[{\"content\":{\"tags\":[1]}}]}},"
         "{\"tags\":[true]}]}}",
         "{\"content\":{\"tags\":[1]}}|true"},
        /* keys elsewhere (a schema's "tags", a string that spells a key) are not followed */
        {"{\"format\":{\"json_schema\":{\"tags\":[1]},\"x\":\"\\\"tags\\\": [2]\","
         "\"tags\":[\"\\u005d\\\\\"]}}",
         "\"\\u005d\\\\\""},
        {"{\"format\":{\"tags\":[]}}", ""},
        {"  {\"type\":\"structural_tag\"}  ", ""},
        /* a repeated key on the path: its JSON reader keeps the last, so not split */
        {"{\"format\":{\"tags\":[1],\"tags\":[2]}}", "ERR"},
        {"{\"format\":{},\"format\":{}}", "ERR"},
        /* a repeated key elsewhere is fine */
        {"{\"format\":{\"tags\":[{\"a\":1,\"a\":2}]},\"x\":1,\"x\":2}", "{\"a\":1,\"a\":2}"},
        /* not JSON */
        {"{\"format\":{\"tags\":[1,]}}", "ERR"},
        {"{\"format\":{\"tags\":[01]}}", "ERR"},
        {"{\"format\":{\"tags\":[\"\\x\"]}}", "ERR"},
        {"{\"format\":{\"tags\":[\"a\tb\"]}}", "ERR"},
        {"{\"format\":{\"tags\":[NaN]}}", "ERR"},
        {"{\"format\":{\"tags\":[1]}} x", "ERR"},
        {"[1]", "ERR"},
        {"{\"format\":{\"tags\":[1e5, -0.5E-3, tru]}}", "ERR"},
        {"{\"format\":{\"tags\":[1e5, -0.5E-3, null]}}", "1e5|-0.5E-3|null"},
        {"{\"format\":{\"tags\":[\"\\u12G4\"]}}", "ERR"},
        {"{\"format\":{\"tags\":[\"unterminated]}}", "ERR"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char got[512];
        spans_text(cases[i][0], got, sizeof got);
        const char *body = got;
        if (strcmp(body, cases[i][1]) != 0) {
            fprintf(stderr, "case %zu: got <%s> want <%s>\n", i, body, cases[i][1]);
            n_fail++;
        }
        n_check++;
    }
    /* deep nesting is refused, not recursed into without bound */
    char deep[3000];
    size_t k = 0;
    k += (size_t)snprintf(deep, sizeof deep, "{\"format\":{\"tags\":[");
    for (int i = 0; i < 600; i++) deep[k++] = '[';
    for (int i = 0; i < 600; i++) deep[k++] = ']';
    k += (size_t)snprintf(deep + k, sizeof deep - k, "]}}");
    uint64_t *sp = NULL;
    size_t n = 0;
    CHECK(xgr_structural_tag_spans(deep, k, &sp, &n) == XGR_ERR_SYNTAX && !sp);
    CHECK(xgr_structural_tag_spans(NULL, 3, &sp, &n) == XGR_ERR_INVALID_ARG);
    /* strings are skipped sixteen bytes at a time: a quote, escape, control byte or
     * multi-byte character at every offset across two block boundaries is still seen,
     * and the bytes around the control range (0x1f, 0x20, 0x7f, 0x80, 0xff) are told apart */
    static const char *const inner[][2] = {{"\\\"", "ok"}, {"\\u00e9", "ok"}, {"\t", "ERR"},
                                           {"\x01", "ERR"}, {"\xc3\xa9", "ok"}, {"\\q", "ERR"},
                                           {"\x7f\xff", "ok"}, {"\"", "ERR"}, {"\x1f", "ERR"},
                                           {" \x80", "ok"}};
#define ALPHA "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    for (size_t j = 0; j < sizeof inner / sizeof *inner; j++)
        for (int pad = 0; pad < 40; pad++)
            for (int tail = 0; tail < 11; tail += 5) {
                char text[128], want[128], got[256];
                int a = snprintf(text, sizeof text, "{\"format\":{\"tags\":[\"%.*s%s%.*s\", 1]}}", pad,
                                 ALPHA, inner[j][0], tail, "ABCDEFGHIJKL");
                CHECK(a > 0 && (size_t)a < sizeof text);
                snprintf(want, sizeof want, "\"%.*s%s%.*s\"|1", pad, ALPHA, inner[j][0], tail,
                         "ABCDEFGHIJKL");
                spans_text(text, got, sizeof got);
                /* a lone quote ends the string early: what follows is not JSON */
                int ok = strcmp(inner[j][1], "ok") == 0;
                if (ok ? strcmp(got, want) != 0 : strcmp(got, "ERR") != 0) {
                    fprintf(stderr, "string case %zu pad %d tail %d: got <%s>\n", j, pad, tail, got);
                    n_fail++;
                }
                n_check++;
            }
}

#undef ALPHA

/* The tag table: a probe run survives removals (backward shift), replace keeps one entry,
 * take_used reports a resolve's use once, a request resolves only when every tag is in
 * the table (its skeleton has null for each tag), and the compiled hits accept what the
 * tags spell and decline a begin that lacks the trigger. */
static void test_tag_table(void) {
    xgr_tag_table *t = NULL;
    CHECK(xgr_tag_table_new(&t) == XGR_OK);
    if (!t) return;
    xgr_fragment *fx = fragment("root ::= " X_BODY "\n");
    if (!fx) {
        xgr_tag_table_free(t);
        return;
    }
    /* many keys (so probe runs form and wrap), half removed in a random order */
    enum { NK = 600 };
    static char keys[NK][24];
    static int present[NK];
    for (int i = 0; i < NK; i++) {
        snprintf(keys[i], sizeof keys[i], "{\"k\":%d}", i);
        CHECK(xgr_tag_table_put(t, (const uint8_t *)keys[i], strlen(keys[i]), (const uint8_t *)"<f=a>", 5,
                                "x", 1, (const uint8_t *)"</f>", 4, fx) == XGR_OK);
        present[i] = 1;
    }
    CHECK(xgr_tag_table_size(t) == NK);
    for (int k = 0; k < NK / 2; k++) {
        int i = (int)rnd(NK);
        CHECK(xgr_tag_table_remove(t, (const uint8_t *)keys[i], strlen(keys[i])) == present[i]);
        present[i] = 0;
    }
    size_t n_present = 0;
    for (int i = 0; i < NK; i++) {
        n_present += (size_t)present[i];
        /* re-removing an absent key answers 0 */
        if (!present[i]) CHECK(xgr_tag_table_remove(t, (const uint8_t *)keys[i], strlen(keys[i])) == 0);
    }
    CHECK(xgr_tag_table_size(t) == n_present);
    for (int i = 0; i < NK; i++) /* every key still present is found */
        if (present[i]) CHECK(xgr_tag_table_remove(t, (const uint8_t *)keys[i], strlen(keys[i])) == 1);
    CHECK(xgr_tag_table_size(t) == 0);

    /* two tags; a request of both resolves, one with a third does not */
    const char *ka = "{\"begin\":\"<f=a>\",\"c\":1}", *kb = "{\"begin\":\"<f=b>\",\"c\":2}";
    CHECK(xgr_tag_table_put(t, (const uint8_t *)ka, strlen(ka), (const uint8_t *)"<f=a>", 5, "x1", 2,
                            (const uint8_t *)"</f>", 4, fx) == XGR_OK);
    CHECK(xgr_tag_table_put(t, (const uint8_t *)kb, strlen(kb), (const uint8_t *)"<f=b>", 5, "x2", 2,
                            (const uint8_t *)"]</f>", 5, fx) == XGR_OK);
    /* replacing a key keeps one entry */
    CHECK(xgr_tag_table_put(t, (const uint8_t *)kb, strlen(kb), (const uint8_t *)"<f=b>", 5, "x2", 2,
                            (const uint8_t *)"</f>", 4, fx) == XGR_OK);
    CHECK(xgr_tag_table_size(t) == 2);
    char req[512];
    snprintf(req, sizeof req, "{\"format\": {\"tags\": [%s, %s, %s], \"triggers\": [\"<f=\"]}}", kb, ka, kb);
    xgr_tag_hits *h = NULL;
    uint8_t *sk = NULL;
    size_t sk_len = 0;
    CHECK(xgr_tag_table_resolve(t, (const uint8_t *)req, strlen(req), &h, &sk, &sk_len) == XGR_OK);
    CHECK(h && xgr_tag_hits_count(h) == 3);
    const char *want = "{\"format\": {\"tags\": [null, null, null], \"triggers\": [\"<f=\"]}}";
    CHECK(sk && sk_len == strlen(want) && memcmp(sk, want, sk_len) == 0);
    xgr_free(sk);
    CHECK(xgr_tag_table_take_used(t, (const uint8_t *)ka, strlen(ka)) == 1);
    CHECK(xgr_tag_table_take_used(t, (const uint8_t *)ka, strlen(ka)) == 0);
    int32_t n;
    xgr_vocab *v = vocab(&n);
    xgr_compiled *c = NULL;
    const uint8_t excl[] = "</f>";
    const uint32_t excl_off[2] = {0, 4};
    CHECK(xgr_compile_tag_hits(h, (const uint8_t *)"<f=", 3, excl, excl_off, 1, 1, NULL, NULL, NULL, 0,
                               v, NULL, &c) == XGR_OK);
    CHECK(c != NULL);
    /* the skeleton skipped the productivity check as productive by construction: it is */
    if (c) CHECK(xgr_fsm_check_productive(c->fsm) == XGR_OK);
    /* the tags' records outlive the table's entries */
    xgr_tag_table_clear(t);
    static const char *const texts[] = {"hi <f=b>{1}</f> <f=a>{23}</f>", "<f=a>{}</f>", "<f=c>{1}</f>",
                                        "x </f>"};
    static const int ok[] = {1, 0, 0, 0};
    for (size_t i = 0; c && i < sizeof texts / sizeof *texts; i++) {
        xgr_matcher *m = NULL;
        CHECK(xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m) == XGR_OK);
        int acc = 0;
        CHECK(xgr_matcher_accept_bytes(m, (const uint8_t *)texts[i], strlen(texts[i]), &acc) == XGR_OK);
        CHECK(acc == ok[i]);
        xgr_matcher_free(m);
    }
    xgr_compiled_release(c);
    /* a begin without the trigger: declined, nothing compiled */
    c = NULL;
    CHECK(xgr_compile_tag_hits(h, (const uint8_t *)"<g=", 3, NULL, NULL, 0, 1, NULL, NULL, NULL, 0, v, NULL,
                               &c) == XGR_OK);
    CHECK(c == NULL);
    xgr_tag_hits_free(h);
    /* a tag not in the table: no hits, no skeleton */
    CHECK(xgr_tag_table_put(t, (const uint8_t *)ka, strlen(ka), (const uint8_t *)"<f=a>", 5, "x1", 2,
                            (const uint8_t *)"</f>", 4, fx) == XGR_OK);
    h = (xgr_tag_hits *)1;
    sk = (uint8_t *)1;
    CHECK(xgr_tag_table_resolve(t, (const uint8_t *)req, strlen(req), &h, &sk, &sk_len) == XGR_OK);
    CHECK(h == NULL && sk == NULL);
    /* not JSON: the general way */
    CHECK(xgr_tag_table_resolve(t, (const uint8_t *)"{\"format\": [", 12, &h, &sk, &sk_len) == XGR_OK);
    CHECK(h == NULL && sk == NULL);
    /* bad arguments: refused with a message naming the call, nothing changed */
    CHECK(xgr_tag_table_new(NULL) == XGR_ERR_INVALID_ARG);
    CHECK(xgr_tag_table_put(t, NULL, 3, (const uint8_t *)"<f=", 3, "x", 1, (const uint8_t *)"", 0, fx) ==
          XGR_ERR_INVALID_ARG);
    CHECK(strstr(xgr_last_error(), "xgr_tag_table_put") != NULL);
    CHECK(xgr_tag_table_put(t, (const uint8_t *)"k", 1, (const uint8_t *)"<f=", 3, "x", 0, (const uint8_t *)"",
                            0, fx) == XGR_ERR_INVALID_ARG); /* empty stand-in name */
    CHECK(xgr_tag_table_put(t, (const uint8_t *)"k", 1, (const uint8_t *)"<f=", 3, "x\0y", 3,
                            (const uint8_t *)"", 0, fx) == XGR_ERR_INVALID_ARG); /* NUL in the name */
    CHECK(xgr_tag_table_put(t, (const uint8_t *)"k", 1, (const uint8_t *)"<f=", 3, "x", 1, (const uint8_t *)"",
                            0, NULL) == XGR_ERR_INVALID_ARG);
    CHECK(xgr_tag_table_size(t) == 1);
    CHECK(xgr_tag_table_resolve(t, (const uint8_t *)req, strlen(req), NULL, &sk, &sk_len) ==
          XGR_ERR_INVALID_ARG);
    CHECK(xgr_tag_table_resolve(NULL, (const uint8_t *)req, strlen(req), &h, &sk, &sk_len) ==
          XGR_ERR_INVALID_ARG);
    CHECK(strstr(xgr_last_error(), "xgr_tag_table_resolve") != NULL);
    c = (xgr_compiled *)1;
    CHECK(xgr_compile_tag_hits(NULL, (const uint8_t *)"<f=", 3, NULL, NULL, 0, 1, NULL, NULL, NULL, 0, v, NULL,
                               &c) == XGR_ERR_INVALID_ARG);
    CHECK(strstr(xgr_last_error(), "xgr_compile_tag_hits") != NULL);
    CHECK(xgr_tag_table_remove(NULL, (const uint8_t *)ka, strlen(ka)) == 0);
    CHECK(xgr_tag_table_take_used(NULL, (const uint8_t *)ka, strlen(ka)) == 0);
    CHECK(xgr_tag_table_size(NULL) == 0);
    xgr_fragment_release(fx);
    xgr_vocab_release(v);
    xgr_tag_table_free(t);
}

int main(void) {
    test_linked_equals_whole();
    test_multi_tool_rules_are_unique();
    test_link_errors();
    test_spans();
    test_tag_table();
    printf("test_link: %d checks, %d failures\n", n_check, n_fail);
    return n_fail ? 1 : 0;
}
