/* Tests for TagDispatch(...): EBNF parsing / printing (front/ebnf_macros.c, ir/print.c),
 * the IR builder (csrc/ir/ir.c) and the direct Aho-Corasick lowering
 * (csrc/lower/tag_dispatch.c), plus mask-vs-brute-force walks through the runtime.
 *
 * Build and run (from the repository root), as tests/c/run_sanitized.sh does:
 *   gcc -std=c11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -Wall -Wextra \
 *       -Werror -pedantic-errors -pthread -Icsrc/include tests/c/test_tag_dispatch.c \
 *       $(find csrc -name '*.c' | sort) -o /tmp/test_tag_dispatch -lm && /tmp/test_tag_dispatch
 *
 * The lowered automata are checked against fsm.h's invariants and, through a small
 * automaton simulator, against an oracle that implements the semantics from their
 * definition (longest pattern-prefix suffix recomputed from scratch at every byte, no
 * automaton), on exhaustive and random strings for random trigger / exclude sets. */
#include <stdarg.h>
#include <stdio.h>

#include "../../csrc/lower/fsm.h"
#include "../../csrc/lower/lower_internal.h"

static int n_fail = 0, n_check = 0;
#define CHECK(cond)                                                                    \
    do {                                                                               \
        n_check++;                                                                     \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
            n_fail++;                                                                  \
        }                                                                              \
    } while (0)
#define CHECKM(cond, ...)                                                              \
    do {                                                                               \
        n_check++;                                                                     \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                              \
            fprintf(stderr, "\n");                                                     \
            n_fail++;                                                                  \
        }                                                                              \
    } while (0)

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static xgr_compile_options opts(int inline_max, int thresh, int max_states) {
    xgr_compile_options o;
    memset(&o, 0, sizeof o);
    o.max_rules = 100000;
    o.max_fsm_states = max_states;
    o.inline_max_states = inline_max;
    o.repeat_threshold = thresh;
    return o;
}

static xgr_grammar *parse(const char *src) {
    xgr_grammar *g = NULL;
    int rc = xgr_grammar_from_ebnf(src, strlen(src), NULL, 0, &g);
    if (rc) fprintf(stderr, "parse failed (%d): %s\n--\n%s\n--\n", rc, xgr_last_error(), src);
    return g;
}

/* ---- fsm.h invariants ------------------------------------------------------------------ */
static void check_fsm(const xgr_fsm *f) {
    int bad = 0;
#define BAD(...)                                                                       \
    do {                                                                               \
        if (bad++ < 5) {                                                               \
            fprintf(stderr, "check_fsm: " __VA_ARGS__);                                \
            fprintf(stderr, "\n");                                                     \
        }                                                                              \
    } while (0)
    if (f->edge_begin[f->n_states] != f->n_edges) BAD("edge count");
    for (int32_t r = 0; r < f->n_rules; r++) {
        int32_t s0 = f->rule_start[r], s1 = r + 1 < f->n_rules ? f->rule_start[r + 1] : f->n_states;
        if (s1 <= s0) {
            BAD("rule %d has no states", r);
            continue;
        }
        int32_t ns = s1 - s0;
        uint8_t *fw = calloc((size_t)ns, 1), *bw = calloc((size_t)ns, 1);
        if (!fw || !bw) exit(2);
        fw[0] = 1;
        for (int ch = 1; ch;) {
            ch = 0;
            for (int32_t s = s0; s < s1; s++) {
                if (f->state_rule[s] != r) BAD("state_rule %d", s);
                if (f->final[s] && !bw[s - s0]) bw[s - s0] = 1, ch = 1;
                for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++) {
                    int32_t t = f->edges[e].target;
                    if (t < s0 || t >= s1) {
                        BAD("edge leaves rule");
                        continue;
                    }
                    if (fw[s - s0] && !fw[t - s0]) fw[t - s0] = 1, ch = 1;
                    if (bw[t - s0] && !bw[s - s0]) bw[s - s0] = 1, ch = 1;
                }
            }
        }
        for (int32_t i = 0; i < ns; i++) {
            if (!fw[i]) BAD("rule %d state %d unreachable", r, s0 + i);
            if (!bw[i] && !(ns == 1 && f->edge_begin[s0 + 1] == f->edge_begin[s0]))
                BAD("rule %d state %d cannot reach a final state", r, s0 + i);
        }
        free(fw);
        free(bw);
    }
    for (int32_t s = 0; s < f->n_states; s++) {
        int seen_ref = 0, last_hi = -1, last_ref = -1;
        int32_t last_t = -1;
        for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++) {
            const xgr_edge *ed = &f->edges[e];
            if (ed->ref < 0) {
                if (seen_ref) BAD("byte edge after ref at %d", s);
                if (ed->lo > ed->hi || (int)ed->lo <= last_hi) BAD("byte edges unsorted at %d", s);
                if ((int)ed->lo == last_hi + 1 && ed->target == last_t) BAD("unmerged ranges at %d", s);
                last_hi = ed->hi;
                last_t = ed->target;
            } else {
                seen_ref = 1;
                if (ed->ref <= last_ref || ed->ref >= f->n_rules) BAD("ref edges unsorted at %d", s);
                last_ref = ed->ref;
            }
        }
    }
    CHECK(bad == 0);
#undef BAD
}

#include "fsm_sim.h"

static int accepts(const xgr_fsm *f, const char *s) { return fsm_accepts_str(f, s); }

/* ---- semantic oracle ------------------------------------------------------------------ */
/* Paired rules of the random tests: g0 ::= "0" | "00"; g1 ::= "1" | ""; g2 ::= "2". */
static const char *const RULE_ALTS[3][3] = {{"0", "00", NULL}, {"1", "", NULL}, {"2", NULL, NULL}};
static const char *const RULE_EBNF = "g0 ::= \"0\" | \"00\"\ng1 ::= \"1\" | \"\"\ng2 ::= \"2\"\n";

typedef struct {
    char trig[6][8];
    int trule[6], nt;
    char excl[3][8];
    int ne, loop;
} tdspec;

static int is_pat_prefix(const tdspec *t, const uint8_t *w, int len) {
    for (int k = 0; k < t->nt + t->ne; k++) {
        const char *p = k < t->nt ? t->trig[k] : t->excl[k - t->nt];
        if ((int)strlen(p) >= len && memcmp(p, w, (size_t)len) == 0) return 1;
    }
    return 0;
}

/* Free text of the current segment is s[a..i): the definition, recomputed from scratch. */
static int oracle_from(const tdspec *t, const uint8_t *s, int n, int a, int i) {
    for (int k = 0; k < t->ne; k++) { /* an excluded string ends here: forbidden */
        int l = (int)strlen(t->excl[k]);
        if (l <= i - a && memcmp(s + i - l, t->excl[k], (size_t)l) == 0) return 0;
    }
    int L = i - a; /* longest suffix of the segment that is a prefix of some pattern */
    while (L > 0 && !is_pat_prefix(t, s + i - L, L)) L--;
    int trig = 0;
    for (int k = 0; k < t->nt; k++)
        if ((int)strlen(t->trig[k]) == L && memcmp(t->trig[k], s + i - L, (size_t)L) == 0) {
            trig = 1;
            for (int j = 0; j < 3 && RULE_ALTS[t->trule[k]][j]; j++) {
                const char *x = RULE_ALTS[t->trule[k]][j];
                int xl = (int)strlen(x);
                if (i + xl > n || memcmp(s + i, x, (size_t)xl) != 0) continue;
                if (t->loop ? oracle_from(t, s, n, i + xl, i + xl) : i + xl == n) return 1;
            }
        }
    if (!trig) return i == n || oracle_from(t, s, n, a, i + 1);
    /* a trigger just completed: only a longer pattern may continue the free text */
    return i < n && is_pat_prefix(t, s + i - L, L + 1) && oracle_from(t, s, n, a, i + 1);
}

static int oracle(const tdspec *t, const uint8_t *s, int n) { return oracle_from(t, s, n, 0, 0); }

static void random_spec(tdspec *t, const char *alpha) {
    memset(t, 0, sizeof *t);
    int na = (int)strlen(alpha);
    t->nt = (int)rnd(5);
    t->ne = (int)rnd(3);
    t->loop = (int)rnd(2);
    for (int k = 0; k < t->nt; k++) {
        int l = 1 + (int)rnd(4);
        for (int j = 0; j < l; j++) t->trig[k][j] = alpha[rnd((uint32_t)na)];
        t->trule[k] = (int)rnd(3);
    }
    for (int k = 0; k < t->ne; k++) {
        int l = 1 + (int)rnd(4);
        for (int j = 0; j < l; j++) t->excl[k][j] = alpha[rnd((uint32_t)na)];
    }
}

static void spec_ebnf(const tdspec *t, const char *head, char *out, size_t cap) {
    size_t p = (size_t)snprintf(out, cap, "%std ::= TagDispatch(", head);
    for (int k = 0; k < t->nt; k++)
        p += (size_t)snprintf(out + p, cap - p, "(\"%s\", g%d), ", t->trig[k], t->trule[k]);
    p += (size_t)snprintf(out + p, cap - p, "loop_after_dispatch=%s, excludes=(",
                          t->loop ? "true" : "false");
    for (int k = 0; k < t->ne; k++)
        p += (size_t)snprintf(out + p, cap - p, "%s\"%s\"", k ? ", " : "", t->excl[k]);
    snprintf(out + p, cap - p, "))\n%s", RULE_EBNF);
}

/* The grammar may also have been rejected by the parser (an exclude that is a prefix of a
 * trigger); the IR builder accepts those, so they are lowered from a hand-built IR. */
static xgr_grammar *spec_grammar(const tdspec *t, const char *head) {
    xgr_grammar *g = xgr_ir_new();
    if (!g) exit(2);
    const char *nm[3] = {"g0", "g1", "g2"};
    int32_t rid[3];
    for (int k = 0; k < 3; k++) {
        rid[k] = xgr_ir_rule(g, nm[k], 2);
        int32_t alts[3];
        int na = 0;
        for (int j = 0; j < 3 && RULE_ALTS[k][j]; j++)
            alts[na++] = xgr_ir_bytes(g, (const uint8_t *)RULE_ALTS[k][j], strlen(RULE_ALTS[k][j]));
        g->rules.data[rid[k]].body = xgr_ir_alt(g, alts, (size_t)na);
    }
    const uint8_t *ts[6], *es[3];
    size_t tl[6], el[3];
    int32_t tr[6];
    for (int k = 0; k < t->nt; k++)
        ts[k] = (const uint8_t *)t->trig[k], tl[k] = strlen(t->trig[k]), tr[k] = rid[t->trule[k]];
    for (int k = 0; k < t->ne; k++) es[k] = (const uint8_t *)t->excl[k], el[k] = strlen(t->excl[k]);
    int32_t td = xgr_ir_rule(g, "td", 2);
    int32_t body = xgr_ir_tag_dispatch(g, ts, tl, tr, (size_t)t->nt, es, el, (size_t)t->ne, t->loop);
    if (td < 0 || body < 0) exit(2);
    g->rules.data[td].body = body;
    if (head) { /* root ::= td{0,40} "Q": exercises the "minus the empty string" variant */
        int32_t root = xgr_ir_rule(g, "root", 4);
        int32_t kids[2] = {xgr_ir_repeat(g, xgr_ir_ref(g, td), 0, 40), xgr_ir_bytes(g, (const uint8_t *)"Q", 1)};
        g->rules.data[root].body = xgr_ir_seq(g, kids, 2);
        g->root = root;
    } else {
        g->root = td;
    }
    return g;
}

/* s in (L(td))* "Q" */
static int oracle_star_q(const tdspec *t, const uint8_t *s, int n) {
    if (n < 1 || s[n - 1] != 'Q') return 0;
    uint8_t reach[MAXLEN + 1] = {1};
    for (int b = 1; b < n; b++)
        for (int a = 0; a < b && !reach[b]; a++)
            if (reach[a] && oracle(t, s + a, b - a)) reach[b] = 1;
    return reach[n - 1];
}

static void test_random_vs_oracle(void) {
    char src[1024];
    int compared = 0, exhaustive = 0;
    for (int round = 0; round < 400; round++) {
        const char *alpha = round % 2 ? "ab" : "abc";
        tdspec t;
        random_spec(&t, alpha);
        int star = round % 4 == 3;
        xgr_grammar *g = spec_grammar(&t, star ? "" : NULL);
        /* the parser must agree with the hand-built IR where it accepts the text */
        spec_ebnf(&t, star ? "root ::= td{0,40} \"Q\"\n" : "", src, sizeof src);
        xgr_grammar *pg = NULL;
        if (!xgr_grammar_from_ebnf(src, strlen(src), star ? "root" : "td", star ? 4 : 2, &pg)) {
            char *a = NULL, *b = NULL;
            CHECK(!xgr_grammar_to_ebnf(pg, &a, NULL) && !xgr_grammar_to_ebnf(g, &b, NULL));
            if (a && b) {
                /* rule order differs; the TagDispatch rules must print the same */
                const char *ta = strstr(a, "td ::= "), *tb = strstr(b, "td ::= ");
                CHECK(ta && tb && strncmp(ta, tb, (size_t)(strstr(ta, "\n)") - ta)) == 0);
            }
            xgr_free(a);
            xgr_free(b);
            xgr_grammar_release(pg);
        }
        xgr_compile_options o = opts(round % 3 == 0 ? -1 : 32, star && round % 8 == 3 ? 1 : 16, 2000000);
        xgr_fsm *f = NULL;
        int rc = xgr_fsm_build(g, &o, &f);
        CHECKM(rc == XGR_OK, "%s", xgr_last_error());
        if (rc) {
            xgr_ir_free(g);
            continue;
        }
        check_fsm(f);
        const char *al = "abc012Q";
        int nal = star ? 7 : 6;
        uint8_t s[MAXLEN];
        /* every string up to length 5 over the alphabet (no Q), then random longer ones */
        if (!star && round < 60) {
            for (int len = 0; len <= 5; len++) {
                int total = 1;
                for (int k = 0; k < len; k++) total *= 6;
                for (int code = 0; code < total; code++) {
                    int c = code;
                    for (int k = 0; k < len; k++) s[k] = (uint8_t)al[c % 6], c /= 6;
                    int want = oracle(&t, s, len), got = fsm_accepts(f, s, len);
                    CHECKM(want == got, "round %d exhaustive: want %d got %d for %.*s\n%s", round, want,
                           got, len, (const char *)s, src);
                    exhaustive++;
                }
            }
        }
        for (int k = 0; k < 60; k++) {
            int len = (int)rnd(star ? 14 : 16);
            for (int j = 0; j < len; j++) s[j] = (uint8_t)al[rnd((uint32_t)nal)];
            if (star && len && rnd(2)) s[len - 1] = 'Q';
            int want = star ? oracle_star_q(&t, s, len) : oracle(&t, s, len);
            int got = fsm_accepts(f, s, len);
            CHECKM(want == got, "round %d: want %d got %d for '%.*s'\n%s", round, want, got, len,
                   (const char *)s, src);
            compared++;
        }
        xgr_fsm_free(f);
        xgr_ir_free(g);
    }
    printf("  random vs oracle: %d random + %d exhaustive strings\n", compared, exhaustive);
}

/* ---- parsing and printing ------------------------------------------------------------- */
static void test_round_trip(void) {
    static const char *const srcs[] = {
        "triggered_tags ::= TagDispatch(\n  (\"<function=\", triggered_tags_group),\n"
        "  (\"<tool_call>\", other_rule),\n  loop_after_dispatch=true,\n"
        "  excludes=(\"</tool_call>\", \"<|im_end|>\")\n)\n"
        "triggered_tags_group ::= \"a\"\nother_rule ::= \"b\"\n",
        "root ::= TagDispatch(\n  loop_after_dispatch=false,\n  excludes=()\n)\n",
        "root ::= TagDispatch(\n  (\"\\n\\t\\\"\\\\ \xc3\xa9\", g),\n  loop_after_dispatch=true,\n"
        "  excludes=(\"\\x00\")\n)\ng ::= \"x\"\n",
        "root ::= TagDispatch(\n  (b\"\\xff\", g),\n  loop_after_dispatch=true,\n"
        "  excludes=(b\"\\x80\\x81\")\n)\ng ::= \"x\"\n",
        "root ::= TagDispatch(\n  (\"a\", root),\n  loop_after_dispatch=true,\n  excludes=()\n) (= \"x\")\n",
    };
    for (size_t i = 0; i < sizeof srcs / sizeof *srcs; i++) {
        const char *src = srcs[i];
        const char *root = strncmp(src, "triggered", 9) == 0 ? "triggered_tags" : "root";
        xgr_grammar *g = NULL;
        int rc = xgr_grammar_from_ebnf(src, strlen(src), root, strlen(root), &g);
        CHECKM(rc == 0, "%s", xgr_last_error());
        if (rc) continue;
        char *out = NULL;
        size_t len = 0;
        CHECK(xgr_grammar_to_ebnf(g, &out, &len) == 0);
        CHECKM(out && strcmp(out, src) == 0, "printed:\n%s\nexpected:\n%s", out ? out : "", src);
        xgr_free(out);
        xgr_grammar_release(g);
    }
    /* lifting out of expressions: fresh names in source order, skipping taken ones */
    const char *src = "root ::= \"x\" TagDispatch((\"a\", g)) (TagDispatch((\"b\", g)))* | \"y\"\n"
                      "g ::= \"x\"\nroot_1 ::= \"q\"\n";
    xgr_grammar *g = parse(src);
    CHECK(g != NULL);
    if (g) {
        char *out = NULL;
        CHECK(xgr_grammar_to_ebnf(g, &out, NULL) == 0);
        CHECKM(out && strncmp(out, "root ::= \"x\" root_2 root_3* | \"y\"\n", 34) == 0, "%s", out ? out : "");
        xgr_grammar *g2 = out ? parse(out) : NULL;
        char *out2 = NULL;
        CHECK(g2 && xgr_grammar_to_ebnf(g2, &out2, NULL) == 0 && strcmp(out, out2) == 0);
        xgr_free(out);
        xgr_free(out2);
        xgr_grammar_release(g2);
        xgr_grammar_release(g);
    }
}

static void test_syntax_errors(void) {
    static const struct {
        const char *body;
        int code;
        const char *where, *needle;
    } cases[] = {
        {"TagDispatch((\"a\", g), foo=1)", XGR_ERR_SYNTAX, "line 1, column 21", "Unknown named argument for TagDispatch: foo (at line 1, column 32"},
        {"TagDispatch((\"a\", g), stop_eos=true)", XGR_ERR_SYNTAX, "line 1, column 21", "stop_eos (at line 1, column 32; older xgrammar"},
        {"TagDispatch((\"a\", g), stop_str=(\"x\"))", XGR_ERR_SYNTAX, "line 1, column 21", "TagDispatch: stop_str"},
        {"TagDispatch((\"\", g))", XGR_ERR_SEMANTIC, "line 1, column 21", "Tag must be a non-empty string literal (the trigger string at line 1, column 23 is empty)"},
        {"TagDispatch((\"a\", g), excludes=(\"\"))", XGR_ERR_SEMANTIC, "line 1, column 21", "Exclude must be a non-empty string literal (the excluded string at line 1, column 42"},
        {"TagDispatch((\"ab\", g), excludes=(\"a\"))", XGR_ERR_SEMANTIC, "line 1, column 21", "prefix of trigger string: a (the excluded string at line 1, column 43"},
        {"TagDispatch((\"a\", g), excludes=(\"a\"))", XGR_ERR_SEMANTIC, "line 1, column 21", "prefix of trigger string: a (the excluded string at line 1, column 42"},
        {"TagDispatch((\"a\", g)", XGR_ERR_SYNTAX, "line 2, column 1", "Expect , or ) in macro arguments (the 'TagDispatch(' at line 1, column 10 is not closed)"},
        {"TagDispatch((\"a\", g),)", XGR_ERR_SYNTAX, "line 1, column 31", "Expect string, integer, boolean, or tuple in macro argument"},
        {"TagDispatch((\"a\" g))", XGR_ERR_SYNTAX, "line 1, column 27", "Expect , or ) in tuple"},
        {"TagDispatch((\"a\", \"b\"))", XGR_ERR_SYNTAX, "line 1, column 28", "rule name"},
        {"TagDispatch((\"a\", g, h))", XGR_ERR_SYNTAX, "line 1, column 21", "pair (tag, rule) (the tuple at line 1, column 22"},
        {"TagDispatch(())", XGR_ERR_SYNTAX, "line 1, column 21", "pair (tag, rule) (the tuple at line 1, column 22"},
        {"TagDispatch(\"a\", g)", XGR_ERR_SYNTAX, "line 1, column 21", "must be a tuple (found a string at line 1, column 22"},
        {"TagDispatch((\"a\", g), loop_after_dispatch=1)", XGR_ERR_SYNTAX, "line 1, column 21", "boolean literal (true or false), found '1' at line 1, column 52"},
        {"TagDispatch((\"a\", g), excludes=\"b\")", XGR_ERR_SYNTAX, "line 1, column 41", "tuple"},
        {"TagDispatch((\"a\", g), excludes=(\"b\" \"c\"))", XGR_ERR_SYNTAX, "line 1, column 46", "excludes tuple"},
        {"TagDispatch((\"a\", nope))", XGR_ERR_SEMANTIC, "line 1, column 21", "Rule \"nope\" is not defined (referenced by the TagDispatch pair at line 1, column 28)"},
        {"\"x\" (= TagDispatch((\"a\", g)))", XGR_ERR_SYNTAX, "line 1, column 17", "lookahead"},
        {"TagDispatch(\n  (\"a\", g),\n  oops\n)", XGR_ERR_SYNTAX, "line 1, column 21", "must be a tuple (the name at line 3, column 3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char src[512];
        snprintf(src, sizeof src, "root ::= %s\ng ::= \"x\"\nh ::= \"y\"\n", cases[i].body);
        xgr_grammar *g = NULL;
        int rc = xgr_grammar_from_ebnf(src, strlen(src), NULL, 0, &g);
        const char *msg = xgr_last_error();
        CHECKM(rc == cases[i].code, "%s: rc %d (%s)", cases[i].body, rc, msg);
        CHECKM(strstr(msg, cases[i].where) && strstr(msg, cases[i].needle), "%s: %s", cases[i].body, msg);
        CHECK(g == NULL);
    }
}

/* ---- IR builder, import, lowering errors ----------------------------------------------- */
static void test_builder_and_import(void) {
    xgr_grammar *g = xgr_ir_new();
    if (!g) exit(2);
    int32_t r = xgr_ir_rule(g, "g", 1);
    const uint8_t *s[1] = {(const uint8_t *)"a"};
    size_t l0[1] = {0}, l1[1] = {1};
    int32_t bad_rule[1] = {5}, ok_rule[1] = {r};
    CHECK(xgr_ir_tag_dispatch(g, s, l0, ok_rule, 1, NULL, NULL, 0, 1) < 0); /* empty trigger */
    CHECK(xgr_ir_tag_dispatch(g, s, l1, bad_rule, 1, NULL, NULL, 0, 1) < 0);
    CHECK(xgr_ir_tag_dispatch(g, NULL, NULL, NULL, 0, s, l0, 1, 1) < 0); /* empty exclude */
    xgr_ir_free(g);

    /* union / concat import TagDispatch bodies with their rules renamed */
    xgr_grammar *a = parse("root ::= TagDispatch((\"<a>\", g), excludes=(\"!\"))\ng ::= \"A\"\n");
    xgr_grammar *b = parse("root ::= TagDispatch((\"<b>\", g), loop_after_dispatch=false)\ng ::= \"B\"\n");
    xgr_grammar *u = NULL;
    xgr_grammar *both[2] = {a, b};
    CHECK(a && b && xgr_grammar_concat(both, 2, &u) == 0);
    if (u) {
        char *out = NULL;
        CHECK(xgr_grammar_to_ebnf(u, &out, NULL) == 0);
        CHECKM(out && strstr(out, "(\"<a>\", g)") && strstr(out, "(\"<b>\", g_1)") &&
                   strstr(out, "excludes=(\"!\")") && strstr(out, "loop_after_dispatch=false"),
               "%s", out ? out : "");
        xgr_free(out);
        xgr_compile_options o = opts(32, 16, 2000000);
        xgr_fsm *f = NULL;
        CHECK(xgr_fsm_build(u, &o, &f) == 0);
        if (f) {
            check_fsm(f);
            CHECK(accepts(f, "x<a>Ay<a>A<b>B"));
            CHECK(accepts(f, "!<a>A")); /* "!" is free text of the second part */
            CHECK(!accepts(f, "!<b>B!")); /* the second part ends after one dispatch */
            CHECK(!accepts(f, "<a>A!<b>B!"));
        }
        xgr_fsm_free(f);
        xgr_grammar_release(u);
    }
    xgr_grammar_release(a);
    xgr_grammar_release(b);

    /* a TagDispatch node that is not a whole rule body is refused by the lowering */
    g = xgr_ir_new();
    if (!g) exit(2);
    int32_t root = xgr_ir_rule(g, "root", 4);
    int32_t td = xgr_ir_tag_dispatch(g, NULL, NULL, NULL, 0, NULL, NULL, 0, 1);
    int32_t kids[2] = {xgr_ir_bytes(g, (const uint8_t *)"x", 1), td};
    g->rules.data[root].body = xgr_ir_seq(g, kids, 2);
    g->root = root;
    xgr_compile_options o = opts(32, 16, 2000000);
    xgr_fsm *f = NULL;
    CHECK(xgr_fsm_build(g, &o, &f) == XGR_ERR_SEMANTIC && f == NULL);
    CHECK(strstr(xgr_last_error(), "whole rule body") != NULL);
    g->rules.data[root].body = kids[0];
    g->rules.data[root].lookahead = td;
    CHECK(xgr_fsm_build(g, &o, &f) == XGR_ERR_SEMANTIC && f == NULL);
    xgr_ir_free(g);
}

/* ---- structure, properties and limits ---------------------------------------------------- */
static int32_t find_rule(const xgr_fsm *f, const char *name) {
    for (int32_t r = 0; r < f->n_rules; r++)
        if (strcmp(f->rule_name[r], name) == 0) return r;
    return -1;
}

static void test_structure_and_limits(void) {
    /* 100 tool triggers sharing "<function=": the live trie nodes and nothing else (loop:
     * no sink). root + "<function=" (10) + "t" + 10 first digits + 100 second digits +
     * 100 ">" = 222, plus "<|eot_id|>" after the shared "<": 9 nodes, the last one dead. */
    char src[16384];
    size_t p = (size_t)snprintf(src, sizeof src, "root ::= TagDispatch(");
    const int trie = 222 + 8;
    for (int i = 0; i < 100; i++)
        p += (size_t)snprintf(src + p, sizeof src - p, "(\"<function=t%02d>\", c%d), ", i, i % 3);
    snprintf(src + p, sizeof src - p,
             "loop_after_dispatch=true, excludes=(\"<|eot_id|>\"))\n"
             "c0 ::= \"{}\"\nc1 ::= \"[]\"\nc2 ::= c0 c1\n");
    xgr_grammar *g = parse(src);
    CHECK(g != NULL);
    if (!g) return;
    xgr_compile_options o = opts(32, 16, 2000000);
    xgr_fsm *f = NULL;
    CHECK(xgr_fsm_build(g, &o, &f) == 0);
    if (f) {
        check_fsm(f);
        int32_t r = find_rule(f, "root");
        int32_t s0 = f->rule_start[r], s1 = r + 1 < f->n_rules ? f->rule_start[r + 1] : f->n_states;
        CHECKM(s1 - s0 == trie, "%d states, expected %d", (int)(s1 - s0), trie);
        /* the start state covers every byte; dispatching states: refs only, not final */
        int covered = 0, dispatch = 0;
        for (int32_t e = f->edge_begin[s0]; e < f->edge_begin[s0 + 1]; e++)
            covered += f->edges[e].hi - f->edges[e].lo + 1;
        CHECK(covered == 256 && f->final[s0]);
        for (int32_t s = s0; s < s1; s++) {
            int32_t e0 = f->edge_begin[s], e1 = f->edge_begin[s + 1];
            if (e1 > e0 && f->edges[e1 - 1].ref >= 0) {
                dispatch++;
                CHECK(!f->final[s] && f->edges[e0].ref >= 0 && e1 - e0 == 1 && f->edges[e0].target == s0);
            }
        }
        CHECK(dispatch == 100);
        CHECK(find_rule(f, "c0") >= 0 && find_rule(f, "c1") >= 0 && find_rule(f, "c2") >= 0);
        CHECK(accepts(f, "hi <function=t07>[] <function=t02>{}[] <|eot_id"));
        CHECK(accepts(f, "<function=t99>{}")); /* t<i> calls c<i % 3> */
        CHECK(!accepts(f, "hi <function=t07>{}"));
        CHECK(!accepts(f, "<|eot_id|>"));
        CHECK(accepts(f, "<function=t7>")); /* no such trigger: free text */
        CHECK(accepts(f, "<function=t7"));
        xgr_fsm_free(f);
    }
    /* max_fsm_states: the TagDispatch rule alone needs `trie` states */
    int32_t others = 0;
    {
        xgr_compile_options big = opts(32, 16, 2000000);
        xgr_fsm *f2 = NULL;
        if (!xgr_fsm_build(g, &big, &f2)) others = f2->n_states - trie;
        xgr_fsm_free(f2);
    }
    o = opts(32, 16, trie - 1);
    f = NULL;
    CHECK(xgr_fsm_build(g, &o, &f) == XGR_ERR_LIMIT && f == NULL);
    CHECKM(strstr(xgr_last_error(), "max_fsm_states") != NULL, "%s", xgr_last_error());
    o = opts(32, 16, trie + others);
    CHECK(xgr_fsm_build(g, &o, &f) == 0);
    xgr_fsm_free(f);
    xgr_grammar_release(g);

    /* loop_after_dispatch=false adds one final sink state */
    g = parse("root ::= TagDispatch((\"ab\", g), (\"abc\", h), loop_after_dispatch=false)\n"
              "g ::= \"G\"\nh ::= \"H\"\n");
    o = opts(-1, 16, 2000000);
    f = NULL;
    CHECK(g && xgr_fsm_build(g, &o, &f) == 0);
    if (f) {
        check_fsm(f);
        int32_t r = find_rule(f, "root");
        int32_t s0 = f->rule_start[r], s1 = r + 1 < f->n_rules ? f->rule_start[r + 1] : f->n_states;
        CHECK(s1 - s0 == 5); /* root, a, ab, abc, sink */
        CHECK(accepts(f, "xxabG") && accepts(f, "abcH") && !accepts(f, "abcG") && !accepts(f, "ab") &&
              accepts(f, "a") && !accepts(f, "abGx"));
    }
    xgr_fsm_free(f);
    xgr_grammar_release(g);
}

/* Every byte starts a pattern: non-emptiness is decided on the automaton itself. */
static void test_exact_nonempty(void) {
    for (int productive = 0; productive < 2; productive++) {
        char src[8192];
        size_t p = (size_t)snprintf(src, sizeof src, "root ::= td{0,40} \"Q\"\ntd ::= TagDispatch((\"a\", g), excludes=(");
        for (int b = 0; b < 256; b++) {
            if (b == 'a') continue;
            p += (size_t)snprintf(src + p, sizeof src - p, "%sb\"\\x%02x\"", p && src[p - 1] == '(' ? "" : ", ", b);
        }
        snprintf(src + p, sizeof src - p, "))\ng ::= %s\n", productive ? "\"x\"" : "\"x\" g");
        xgr_grammar *g = parse(src);
        CHECK(g != NULL);
        if (!g) continue;
        for (int thresh = 1; thresh <= 16; thresh += 15) {
            xgr_compile_options o = opts(32, thresh, 2000000);
            xgr_fsm *f = NULL;
            int rc = xgr_fsm_build(g, &o, &f);
            CHECKM(rc == 0, "%s", xgr_last_error());
            if (!f) continue;
            check_fsm(f);
            CHECK(accepts(f, "Q"));
            CHECK(accepts(f, "axQ") == productive && accepts(f, "axaxaxQ") == productive);
            CHECK(!accepts(f, "aQ") && !accepts(f, "bQ"));
            xgr_fsm_free(f);
        }
        xgr_grammar_release(g);
    }
}

/* ---- runtime: masks equal the brute-force oracle ---------------------------------------- */
static void test_runtime_masks(void) {
    static const char *const extra[] = {"<f", "<f=", "=A", "A>", "<t>", "</t>", "</", "t>", "ST", "STOP",
                                        "OP", "hello", " <", "B<", "<<", "x\xc3", "\xa9", ">B",
                                        /* longer free text: whole tokens the vocabulary pass
                                         * accepts by their byte sets, or must walk (a trigger,
                                         * an excluded string, non-ASCII bytes inside) */
                                        "free text", "text<f=A>", "x\xc3\xa9<t>B", "hello <",
                                        "STOP here", "no</t>", "\xc3\xa9\xc3\xa9" "ab", "<t>BB",
                                        /* tokens that finish a trigger and go on into its tag
                                         * (sharpen_dispatch decides them per run, then exactly):
                                         * a run whose first token cannot start the tag ("=0")
                                         * sorts before ones that can */
                                        "=0", "=0x", "=AB", "=A>x", "=A>", ">0", ">B!", "f=A",
                                        /* non-ASCII: a whole character, its lead byte or tail
                                         * alone, a trigger's character, text after it */
                                        "\xc3\xa9", "\xc3\xa9\"", "\xc3\xa9x\"", "\xef\xbd\x9c",
                                        "\xef\xbd", "\xbd\x9c", "\xef\xbd\x9c" "B", "x\xef\xbd",
                                        "\xbd\x9c" "B"};
    size_t ne = sizeof extra / sizeof *extra;
    int32_t n = 256 + (int32_t)ne + 1;
    uint8_t data[2048];
    uint32_t off[512];
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
    CHECK(xgr_vocab_new(data, off, n, n, NULL, 0, &stop, 1, &v) == 0);
    static const char *const grammars[] = {
        "root ::= TagDispatch((\"<f=\", g), (\"<t>\", o), loop_after_dispatch=true, "
        "excludes=(\"</t>\", \"STOP\"))\ng ::= \"A>\"\no ::= \"B\" | \"B\" root \"!\"\n",
        "root ::= TagDispatch((\"<f=\", g), (\"<t>\", o), (\"<\", o), loop_after_dispatch=false, "
        "excludes=(\"STOP\"))\ng ::= \"A>\" | \"\"\no ::= \"B\"\n",
        "root ::= (TagDispatch((\"<t>\", o), loop_after_dispatch=false) \"!\")+\no ::= \"B\"\n",
        /* a loop that whole characters bring back to but single non-ASCII bytes leave,
         * entered through a character */
        "root ::= \"\xc3\xa9\" s\ns ::= [^\"]* \"\\\"\"\n",
        /* partial-trigger states inside a multi-byte character */
        "root ::= TagDispatch((\"\xef\xbd\x9c\", o), loop_after_dispatch=true, "
        "excludes=(\"\xc3\xa9\xc3\xa9\"))\no ::= \"B\"\n",
    };
    size_t words = ((size_t)n + 31) / 32;
    int32_t *row = calloc(words, 4), *brute = calloc(words, 4);
    if (!row || !brute) exit(2);
    int steps = 0;
    for (size_t gi = 0; gi < sizeof grammars / sizeof *grammars && v; gi++) {
        xgr_grammar *g = parse(grammars[gi]);
        xgr_compiled *c = NULL;
        CHECK(g && xgr_compile(g, v, NULL, &c) == 0);
        for (int walk = 0; c && walk < 25; walk++) {
            xgr_matcher *m = NULL;
            if (xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m)) {
                CHECK(0);
                break;
            }
            for (int k = 0; k < 40 && !xgr_matcher_is_terminated(m); k++) {
                CHECK(xgr_matcher_fill_bitmask(m, row, words, NULL) == 0);
                CHECK(xgr_matcher_fill_bitmask_bruteforce(m, brute, words) == 0);
                CHECKM(memcmp(row, brute, words * 4) == 0, "grammar %zu walk %d step %d", gi, walk, k);
                steps++;
                /* prefer tokens that build triggers so walks get somewhere */
                int32_t allowed[512], na = 0;
                for (int32_t t = 0; t < n; t++)
                    if (row[t / 32] >> (t % 32) & 1) allowed[na++] = t;
                if (!na) break;
                int32_t pick = allowed[rnd((uint32_t)na)];
                for (int tries = 0; tries < 3; tries++) {
                    int32_t t = allowed[rnd((uint32_t)na)];
                    uint8_t b0 = data[off[t]];
                    if (t != stop && (t >= 256 || (b0 && strchr("<f=A>tB!/ST\xef\xbd\x9c", b0)))) pick = t;
                }
                if (pick == stop && k < 30 && na > 1) pick = allowed[0] == stop ? allowed[1] : allowed[0];
                int acc = 0;
                CHECK(xgr_matcher_accept_token(m, pick, &acc) == 0 && acc == 1);
            }
            xgr_matcher_free(m);
        }
        xgr_compiled_release(c);
        xgr_grammar_release(g);
    }
    printf("  runtime: %d mask steps equal to brute force\n", steps);
    free(row);
    free(brute);
    xgr_vocab_release(v);
}

/* A vocabulary of the 256 single bytes, then extra[0..n) (ids 256..), then a stop token
 * (the last id); special[] names special ids among them. NULL (and a failed check) when it
 * cannot be built. */
static xgr_vocab *bytes_plus(const char *const *extra, size_t n, const int32_t *special,
                             size_t n_special) {
    int32_t count = 256 + (int32_t)n + 1, stop = count - 1;
    uint8_t data[2048];
    uint32_t off[512], pos = 0;
    if (count >= 512) return NULL;
    for (int32_t i = 0; i < count; i++) {
        off[i] = pos;
        if (i < 256) {
            data[pos++] = (uint8_t)i;
        } else if (i < stop) {
            size_t l = strlen(extra[i - 256]);
            if (pos + l > sizeof data) return NULL;
            memcpy(data + pos, extra[i - 256], l);
            pos += (uint32_t)l;
        }
    }
    off[count] = pos;
    xgr_vocab *v = NULL;
    CHECK(xgr_vocab_new(data, off, count, count, special, n_special, &stop, 1, &v) == 0);
    return v;
}

/* Special tokens the grammar spells (gpt-oss's <|end|>, as token markers) are never free
 * text: an excluded spelling cannot slip through as its token, a token named elsewhere
 * in the grammar is refused in free text, and past a trigger's marker the text must
 * complete that trigger. Masks equal brute force along the way. */
static int32_t acc_tok(xgr_matcher *m, int32_t t) {
    int a = 0;
    return xgr_matcher_accept_token(m, t, &a) == 0 && a;
}

static int32_t acc_text(xgr_matcher *m, const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!acc_tok(m, ids[i])) return 0;
    return 1;
}

static void test_markers_are_not_free_text(void) {
    /* 0..255 single bytes, then "<|s|>", "<|e|>", "<|x|>" (special), stop */
    static const char *const sp[] = {"<|s|>", "<|e|>", "<|x|>"};
    enum { S = 256, E = 257, X = 258, STOP = 259, N = 260 };
    int32_t special[3] = {S, E, X};
    xgr_vocab *v = bytes_plus(sp, 3, special, 3);
    xgr_grammar *g0 = parse("root ::= TagDispatch((\"<|s|>a\", o), loop_after_dispatch=true, "
                            "excludes=(\"<|e|>\")) \"<|e|>\"\no ::= \"b\" | \"<|x|>\"\n");
    /* the spellings, as the Python compiler passes them */
    uint32_t soff[4] = {0, 5, 10, 15};
    xgr_grammar *g = NULL;
    CHECK(g0 && xgr_grammar_spell_tokens(g0, (const uint8_t *)"<|s|><|e|><|x|>", soff, special, 3,
                                         &g) == 0 && g);
    xgr_compiled *c = NULL;
    CHECK(g && v && xgr_compile(g, v, NULL, &c) == 0);
    if (!c) goto out;
    size_t words = (N + 31) / 32;
    int32_t row[9], brute[9];
    int32_t hi[2] = {'h', 'i'}, z = 'z', a = 'a', b = 'b';
    xgr_matcher *m = NULL;
    /* free text, then the excluded token ends it and the stop token terminates */
    CHECK(xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m) == 0);
    CHECK(acc_text(m, hi, 2));
    CHECK(xgr_matcher_fill_bitmask(m, row, words, NULL) == 0);
    CHECK(xgr_matcher_fill_bitmask_bruteforce(m, brute, words) == 0);
    CHECK(memcmp(row, brute, words * 4) == 0);
    CHECK(row[E / 32] >> (E % 32) & 1);
    CHECK(row[S / 32] >> (S % 32) & 1);
    CHECK(!(row[X / 32] >> (X % 32) & 1));  /* named by the grammar, but not free text */
    CHECK(!(row[STOP / 32] >> (STOP % 32) & 1));
    CHECK(!acc_tok(m, X));
    CHECK(acc_tok(m, E));
    CHECK(!acc_tok(m, 'h'));                /* the text ended with the token */
    CHECK(acc_tok(m, STOP) && xgr_matcher_is_terminated(m));
    xgr_matcher_free(m);
    /* the trigger's token, then its text, dispatches; after the rule, free text again */
    m = NULL;
    CHECK(xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m) == 0);
    CHECK(acc_tok(m, S));
    CHECK(xgr_matcher_fill_bitmask(m, row, words, NULL) == 0);
    CHECK(xgr_matcher_fill_bitmask_bruteforce(m, brute, words) == 0);
    CHECK(memcmp(row, brute, words * 4) == 0);
    CHECK(row[a / 32] >> (a % 32) & 1);
    CHECK(!(row[z / 32] >> (z % 32) & 1));  /* past a marker the trigger must complete */
    CHECK(!(row[E / 32] >> (E % 32) & 1));
    CHECK(!(row[STOP / 32] >> (STOP % 32) & 1));
    CHECK(!acc_tok(m, z));
    CHECK(acc_tok(m, a) && acc_tok(m, X) && acc_text(m, hi, 2) && acc_tok(m, E));
    CHECK(acc_tok(m, STOP) && xgr_matcher_is_terminated(m));
    xgr_matcher_free(m);
    /* the trigger spelled as text dispatches too; a text "<|e|>" is still excluded */
    m = NULL;
    int32_t spelled[6] = {'<', '|', 's', '|', '>', 'a'}, etext[5] = {'<', '|', 'e', '|', '>'};
    CHECK(xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m) == 0);
    CHECK(acc_text(m, spelled, 6) && acc_tok(m, b) && acc_text(m, etext, 5));
    CHECK(!acc_tok(m, 'h'));
    CHECK(acc_tok(m, STOP) && xgr_matcher_is_terminated(m));
    xgr_matcher_free(m);
    xgr_compiled_release(c);
out:
    xgr_grammar_release(g);
    xgr_grammar_release(g0);
    xgr_vocab_release(v);
}

/* Compiles src over v, accepts token `prefix`, and checks the mask against brute force,
 * with token `yes` allowed and `no` refused. */
static void mask_after_trigger_prefix(const xgr_vocab *v, const char *src, int32_t prefix,
                                      int32_t yes, int32_t no, int label) {
    int32_t row[16], brute[16];
    size_t words = ((size_t)xgr_vocab_size(v) + 31) / 32;
    xgr_grammar *g = parse(src);
    xgr_compiled *c = NULL;
    xgr_matcher *m = NULL;
    CHECK(g && xgr_compile(g, v, NULL, &c) == 0);
    if (c && words <= 16 && !xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m)) {
        CHECK(acc_tok(m, prefix));
        CHECK(xgr_matcher_fill_bitmask(m, row, words, NULL) == 0);
        CHECK(xgr_matcher_fill_bitmask_bruteforce(m, brute, words) == 0);
        CHECKM(memcmp(row, brute, words * 4) == 0, "grammar %d", label);
        CHECK((row[yes / 32] >> (yes % 32)) & 1);
        CHECK(!((row[no / 32] >> (no % 32)) & 1));
        xgr_matcher_free(m);
    }
    xgr_compiled_release(c);
    xgr_grammar_release(g);
}

/* A dispatch rule's entries keep a token that finishes a trigger only when its next byte
 * can start the tag (`{"name": ` then `"`), so two grammars with the same triggers but
 * tags that start differently must not share them: after "<f", "=A>" is allowed with the
 * tag "A>" and rejected with "B>", in either order through the cross-grammar cache. */
static void test_dispatch_entries_keyed_by_tag_first_bytes(void) {
    static const char *const extra[] = {"<f", "=A", "=B", "=A>", "=B>", "=Ax", " the"};
    int32_t lt_f = 256, eq_a_gt = 259, eq_b_gt = 260;
    xgr_vocab *v = bytes_plus(extra, sizeof extra / sizeof *extra, NULL, 0);
    static const char *const src[2] = {
        "root ::= TagDispatch((\"<f=\", g), loop_after_dispatch=true)\ng ::= \"A>\"\n",
        "root ::= TagDispatch((\"<f=\", g), loop_after_dispatch=true)\ng ::= \"B>\"\n",
    };
    for (int order = 0; order < 2 && v; order++) {
        xgr_cache_clear();
        for (int k = 0; k < 2; k++) {
            int gi = order ? 1 - k : k;
            mask_after_trigger_prefix(v, src[gi], lt_f, gi ? eq_b_gt : eq_a_gt, gi ? eq_a_gt : eq_b_gt, gi);
        }
    }
    /* tags that start with the same bytes still share the dispatch's entries */
    xgr_cache_clear();
    static const char *const same[2] = {
        "root ::= TagDispatch((\"<f=\", g), loop_after_dispatch=true)\ng ::= \"A>\"\n",
        "root ::= TagDispatch((\"<f=\", g), loop_after_dispatch=true)\ng ::= \"Ax\" | \"A>\" g\n",
    };
    uint64_t hits[2] = {0, 0};
    for (int gi = 0; gi < 2 && v; gi++) {
        mask_after_trigger_prefix(v, same[gi], lt_f, eq_a_gt, eq_b_gt, 10 + gi);
        xgr_cache_stats st;
        xgr_cache_get_stats(&st);
        hits[gi] = st.hits;
    }
    CHECK(hits[1] > hits[0]);
    xgr_vocab_release(v);
}

int main(void) {
    test_round_trip();
    test_syntax_errors();
    test_builder_and_import();
    test_structure_and_limits();
    test_exact_nonempty();
    test_random_vs_oracle();
    test_runtime_masks();
    test_markers_are_not_free_text();
    test_dispatch_entries_keyed_by_tag_first_bytes();
    printf("test_tag_dispatch: %d checks, %d failures\n", n_check, n_fail);
    return n_fail ? 1 : 0;
}
