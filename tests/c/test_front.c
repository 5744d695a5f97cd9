/* Standalone tests for the grammar front ends (EBNF, regex, builtin JSON, grammar ops)
 * and the IR printer. Build and run from the repository root with
 *   gcc -std=c11 -O1 -g -fsanitize=address,undefined -Wall -Wextra -Werror
 *       -pedantic-errors -o /tmp/test_front tests/c/test_front.c csrc/common/util.c
 *       csrc/ir/ir.c csrc/front/(every .c file) csrc/ir/print.c && /tmp/test_front
 * (an optional argument sets the number of fuzz iterations, default 6000).
 *
 * Besides exact printed forms and error messages, a small reference matcher over the IR
 * (sets of positions as 64-bit masks) checks the languages the front ends produce. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../csrc/front/front.h"

static int n_checks, n_failed;

#define CHECK(cond, ...)                                                            \
    do {                                                                            \
        n_checks++;                                                                 \
        if (!(cond)) {                                                              \
            n_failed++;                                                             \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                    \
            fprintf(stderr, __VA_ARGS__);                                           \
            fputc('\n', stderr);                                                    \
        }                                                                           \
    } while (0)

/* ---- reference matcher ------------------------------------------------------------ */

typedef struct {
    const xgr_grammar *g;
    const uint8_t *s;
    size_t n; /* <= 63 */
    int budget;
} matcher;

static int in_ranges(const xgr_grammar *g, const xgr_node *nd, uint32_t v) {
    int in = 0;
    for (int32_t i = 0; i < nd->count; i++)
        if (v >= g->ranges.data[nd->off + 2 * i] && v <= g->ranges.data[nd->off + 2 * i + 1])
            in = 1;
    return nd->negated ? !in : in;
}

/* End positions reachable by matching `id` from any start position in `starts`. */
static uint64_t match_node(matcher *m, int32_t id, uint64_t starts, int depth) {
    const xgr_grammar *g = m->g;
    const xgr_node *nd = &g->nodes.data[id];
    uint64_t out = 0;
    if (!starts || depth > 400 || --m->budget < 0) return 0;
    switch (nd->kind) {
    case XGR_NODE_EMPTY: return starts;
    case XGR_NODE_BYTES:
        for (size_t p = 0; p <= m->n; p++)
            if ((starts >> p & 1) && p + (size_t)nd->count <= m->n &&
                memcmp(m->s + p, g->bytes.data + nd->off, (size_t)nd->count) == 0)
                out |= 1ULL << (p + (size_t)nd->count);
        return out;
    case XGR_NODE_CLASS:
        for (size_t p = 0; p < m->n; p++) {
            uint32_t cp;
            int k;
            if ((starts >> p & 1) && (k = xgr_utf8_decode(m->s + p, m->n - p, &cp)) > 0 &&
                in_ranges(g, nd, cp))
                out |= 1ULL << (p + (size_t)k);
        }
        return out;
    case XGR_NODE_BYTE_CLASS:
        for (size_t p = 0; p < m->n; p++)
            if ((starts >> p & 1) && in_ranges(g, nd, m->s[p])) out |= 1ULL << (p + 1);
        return out;
    case XGR_NODE_SEQ:
        out = starts;
        for (int32_t i = 0; i < nd->count && out; i++)
            out = match_node(m, g->kids.data[nd->off + i], out, depth + 1);
        return out;
    case XGR_NODE_ALT:
        for (int32_t i = 0; i < nd->count; i++)
            out |= match_node(m, g->kids.data[nd->off + i], starts, depth + 1);
        return out;
    case XGR_NODE_REF: return match_node(m, g->rules.data[nd->a].body, starts, depth + 1);
    case XGR_NODE_REPEAT: {
        uint64_t cur = starts, seen = 0;
        if (nd->min == 0) out = seen = starts;
        for (long k = 1; cur; k++) {
            if (nd->max >= 0 && k > nd->max) break;
            cur = match_node(m, nd->a, cur, depth + 1);
            if (k >= nd->min) {
                if ((cur & ~seen) == 0) {
                    out |= cur;
                    break;
                }
                seen |= cur;
                out |= cur;
            }
            if (k > 200) break;
        }
        return out;
    }
    case XGR_NODE_SUBSTRING: /* "" or a run of consecutive chunks */
        out = starts;
        for (int32_t i = 0; i < nd->count; i++) {
            uint64_t cur = starts;
            for (int32_t j = i; j < nd->count && cur; j++) {
                cur = match_node(m, g->kids.data[nd->off + j], cur, depth + 1);
                out |= cur;
            }
        }
        return out;
    default: return 0;
    }
}

static int accepts(const xgr_grammar *g, const char *s) {
    matcher m = {g, (const uint8_t *)s, strlen(s), 200000};
    if (m.n > 63) return -1;
    uint64_t ends = match_node(&m, g->rules.data[g->root].body, 1, 0);
    return (int)(ends >> m.n & 1);
}

/* ---- helpers ------------------------------------------------------------------------ */

static char *print_g(const xgr_grammar *g) {
    char *s = NULL;
    size_t n = 0;
    int rc = xgr_grammar_to_ebnf(g, &s, &n);
    CHECK(rc == XGR_OK, "print failed: %s", xgr_last_error());
    if (rc) return NULL;
    CHECK(strlen(s) == n, "printed length mismatch");
    return s;
}

static int32_t skip_single(const xgr_grammar *g, int32_t id) {
    while ((g->nodes.data[id].kind == XGR_NODE_SEQ || g->nodes.data[id].kind == XGR_NODE_ALT) &&
           g->nodes.data[id].count == 1)
        id = g->kids.data[g->nodes.data[id].off];
    return id;
}

/* Structural equality of two expressions (rules compared by name; one-child SEQ / ALT
 * are transparent, an empty SEQ equals EMPTY and an empty ALT (in the first grammar)
 * equals the empty class, as in the printer). */
static int node_eq(const xgr_grammar *a, int32_t x, const xgr_grammar *b, int32_t y) {
    x = skip_single(a, x);
    y = skip_single(b, y);
    const xgr_node *p = &a->nodes.data[x], *q = &b->nodes.data[y];
    int pk = p->kind == XGR_NODE_SEQ && p->count == 0 ? XGR_NODE_EMPTY : p->kind;
    int qk = q->kind == XGR_NODE_SEQ && q->count == 0 ? XGR_NODE_EMPTY : q->kind;
    /* an empty ALT prints as the empty class [] */
    if (p->kind == XGR_NODE_ALT && p->count == 0)
        return q->kind == XGR_NODE_CLASS && q->count == 0 && !q->negated;
    if (pk != qk) return 0;
    switch (pk) {
    case XGR_NODE_EMPTY: return 1;
    case XGR_NODE_BYTES:
        return p->count == q->count &&
               memcmp(a->bytes.data + p->off, b->bytes.data + q->off, (size_t)p->count) == 0;
    case XGR_NODE_CLASS:
    case XGR_NODE_BYTE_CLASS:
        return p->count == q->count && !p->negated == !q->negated &&
               (p->count == 0 || memcmp(a->ranges.data + p->off, b->ranges.data + q->off,
                                        2 * (size_t)p->count * sizeof(uint32_t)) == 0);
    case XGR_NODE_REF:
        return strcmp(xgr_ir_rule_name(a, p->a), xgr_ir_rule_name(b, q->a)) == 0;
    case XGR_NODE_REPEAT:
        return p->min == q->min && p->max == q->max && node_eq(a, p->a, b, q->a);
    default:
        if (p->count != q->count) return 0;
        for (int32_t i = 0; i < p->count; i++)
            if (!node_eq(a, a->kids.data[p->off + i], b, b->kids.data[q->off + i])) return 0;
        return 1;
    }
}

static int grammar_eq(const xgr_grammar *a, const xgr_grammar *b) {
    if (a->rules.len != b->rules.len) return 0;
    if (strcmp(xgr_ir_rule_name(a, a->root), xgr_ir_rule_name(b, b->root))) return 0;
    for (size_t r = 0; r < a->rules.len; r++) {
        const char *nm = xgr_ir_rule_name(a, (int32_t)r);
        int32_t r2 = xgr_ir_find_rule(b, nm, strlen(nm));
        if (r2 < 0) return 0;
        const xgr_rule *x = &a->rules.data[r], *y = &b->rules.data[r2];
        if (!node_eq(a, x->body, b, y->body)) return 0;
        if ((x->lookahead < 0) != (y->lookahead < 0)) return 0;
        if (x->lookahead >= 0 && !node_eq(a, x->lookahead, b, y->lookahead)) return 0;
    }
    return 1;
}

/* print(parse(print(g))) == print(g) and parse(print(g)) has the same IR as g;
 * returns print(g) (caller frees). */
static char *roundtrip(const xgr_grammar *g, const char *what) {
    char *p1 = print_g(g);
    if (!p1) return NULL;
    xgr_grammar *g2 = NULL;
    int rc = xgr_grammar_from_ebnf(p1, strlen(p1), NULL, 0, &g2);
    CHECK(rc == XGR_OK, "reparse of printed %s failed: %s\n--- printed:\n%s", what,
          xgr_last_error(), p1);
    if (rc == XGR_OK) {
        CHECK(grammar_eq(g, g2), "reparsed IR differs for %s:\n%s", what, p1);
        char *p2 = print_g(g2);
        CHECK(p2 && strcmp(p1, p2) == 0, "print not stable for %s:\n--- first:\n%s--- second:\n%s",
              what, p1, p2 ? p2 : "(null)");
        xgr_free(p2);
        xgr_grammar_release(g2);
    }
    return p1;
}

static xgr_grammar *ebnf(const char *src) {
    xgr_grammar *g = NULL;
    int rc = xgr_grammar_from_ebnf(src, strlen(src), NULL, 0, &g);
    CHECK(rc == XGR_OK, "parse failed (%d) for:\n%s\n  error: %s", rc, src, xgr_last_error());
    return g;
}

/* Parses, checks the round trip and (when expect != NULL) the printed form. */
static void ok(const char *src, const char *expect) {
    xgr_grammar *g = ebnf(src);
    if (!g) return;
    char *p = roundtrip(g, src);
    if (p && expect)
        CHECK(strcmp(p, expect) == 0, "printed form of\n%s\n--- got:\n%s--- want:\n%s", src, p,
              expect);
    xgr_free(p);
    xgr_grammar_release(g);
}

static void bad_n(const char *src, size_t n, int code, const char *needle) {
    xgr_grammar *g = NULL;
    int rc = xgr_grammar_from_ebnf(src, n, NULL, 0, &g);
    CHECK(rc == code, "expected error %d, got %d for:\n%s\n  message: %s", code, rc, src,
          xgr_last_error());
    CHECK(g == NULL, "output set on error");
    CHECK(!needle || strstr(xgr_last_error(), needle), "message for\n%s\n  is '%s', want '%s'",
          src, xgr_last_error(), needle);
    xgr_grammar_release(g);
}
static void bad(const char *src, int code, const char *needle) {
    bad_n(src, strlen(src), code, needle);
}

static xgr_grammar *regex(const char *src) {
    xgr_grammar *g = NULL;
    int rc = xgr_grammar_from_regex(src, strlen(src), &g);
    CHECK(rc == XGR_OK, "regex failed (%d) for %s: %s", rc, src, xgr_last_error());
    return g;
}

static void rx(const char *src, const char *expect) {
    xgr_grammar *g = regex(src);
    if (!g) return;
    char *p = roundtrip(g, src);
    if (p && expect)
        CHECK(strcmp(p, expect) == 0, "regex %s printed\n%s  want\n%s", src, p, expect);
    xgr_free(p);
    xgr_grammar_release(g);
}

static void rx_bad(const char *src, int code, const char *needle) {
    xgr_grammar *g = NULL;
    int rc = xgr_grammar_from_regex(src, strlen(src), &g);
    CHECK(rc == code, "regex %s: expected error %d, got %d (%s)", src, code, rc,
          xgr_last_error());
    CHECK(!needle || strstr(xgr_last_error(), needle), "regex %s message '%s', want '%s'", src,
          xgr_last_error(), needle);
    xgr_grammar_release(g);
}

/* Every string in yes[] is accepted and every string in no[] rejected. */
static void lang(const xgr_grammar *g, const char *what, const char *const *yes,
                 const char *const *no) {
    for (; yes && *yes; yes++)
        CHECK(accepts(g, *yes) == 1, "%s should accept '%s'", what, *yes);
    for (; no && *no; no++) CHECK(accepts(g, *no) == 0, "%s should reject '%s'", what, *no);
}

static void rx_lang(const char *src, const char *const *yes, const char *const *no) {
    xgr_grammar *g = regex(src);
    if (!g) return;
    lang(g, src, yes, no);
    xgr_free(roundtrip(g, src));
    xgr_grammar_release(g);
}

static void ebnf_lang(const char *src, const char *const *yes, const char *const *no) {
    xgr_grammar *g = ebnf(src);
    if (!g) return;
    lang(g, src, yes, no);
    /* The printed grammar must denote the same language. */
    char *p = print_g(g);
    xgr_grammar *g2 = p ? ebnf(p) : NULL;
    if (g2) lang(g2, p, yes, no);
    xgr_grammar_release(g2);
    xgr_free(p);
    xgr_grammar_release(g);
}

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ---- EBNF ---------------------------------------------------------------------------- */

static void test_ebnf_valid(void) {
    ok("root ::= \"abc\"", "root ::= \"abc\"\n");
    ok("root ::= \"a\" b\nb ::= \"x\"\n  \"y\" | \"z\"", "root ::= \"a\" b\nb ::= \"x\" \"y\" | \"z\"\n");
    ok("root ::= \"a\"{2,3} (\"b\")* [^a-z]? (= \"c\")",
       "root ::= \"a\"{2,3} \"b\"* [^a-z]? (= \"c\")\n");
    ok("root ::= a.b\na.b ::= \"x\"", "root ::= a.b\na.b ::= \"x\"\n");
    ok("root ::= -x\n-x ::= \"y\"", "root ::= -x\n-x ::= \"y\"\n");
    ok("root ::= \"\\u00e9\\U0001F600\"", "root ::= \"\xc3\xa9\xf0\x9f\x98\x80\"\n");
    ok("root ::= \"\\uD83D\\uDE00\"", "root ::= \"\xf0\x9f\x98\x80\"\n");
    ok("root ::= [\\u0000-\\U0010FFFF]", "root ::= [\\x00-\\U0010ffff]\n");
    ok("root ::= \"\"", "root ::= \"\"\n");
    ok("root ::= \"a\" | \"\"", "root ::= \"a\" | \"\"\n");
    /* group structure is kept, redundant parentheses are not */
    ok("root ::= ((\"a\" \"b\") \"c\")", "root ::= (\"a\" \"b\") \"c\"\n");
    ok("root ::= ((((\"a\"))))", "root ::= \"a\"\n");
    ok("root ::= \"a\" (\"b\" | \"c\") | \"d\"", "root ::= \"a\" (\"b\" | \"c\") | \"d\"\n");
    ok("root ::= (\"a\" | \"b\") | \"c\"", "root ::= (\"a\" | \"b\") | \"c\"\n");
    ok("root ::= (\"a\"*)? (\"a\" \"b\")+ (\"x\" | \"y\"){3}",
       "root ::= (\"a\"*)? (\"a\" \"b\")+ (\"x\" | \"y\"){3}\n");
    ok("root ::= \"a\"{0,} \"b\"{1,} \"c\"{0,1} \"d\"{2,} \"e\"{ 2 , 5 }",
       "root ::= \"a\"* \"b\"+ \"c\"? \"d\"{2,} \"e\"{2,5}\n");
    ok("root ::= \"a\" *", "root ::= \"a\"*\n");
    ok("root ::= \"a\"{1000000000} \"b\"{0,1000000000}",
       "root ::= \"a\"{1000000000} \"b\"{0,1000000000}\n");
    ok("root ::= [\\-a\\]]", "root ::= [\\-a\\]]\n");
    ok("root ::= [-a-] [^^] [a^]", "root ::= [\\-a\\-] [^\\^] [a\\^]\n");
    ok("root ::= [] [^]", "root ::= [] [^]\n");
    ok("root ::= [\\x00-\\x1f\\x7f\"\\\\] \"\\x00\\x7f\\\"\\\\\\n\\r\\t\\b\\f\\v\\'\\/\"",
       "root ::= [\\x00-\\x1f\\x7f\"\\\\] \"\\x00\\x7f\\\"\\\\\\n\\r\\t\\x08\\x0c\\x0b'/\"\n");
    ok("root ::= \"\\x4\"", "root ::= \"\\x04\"\n");
    ok("root ::= \"\\xe9\" [\\xff]", "root ::= \"\xc3\xa9\" [\xc3\xbf]\n");
    ok("root ::= \"\\u0085\\u00a0\\u200b\\ufeff\"", "root ::= \"\\u0085\\u00a0\\u200b\\ufeff\"\n");
    ok("root ::= [\\U0000D800-\\U0000DFFF] [\\uD800\\uDC00]",
       "root ::= [\\U0000d800-\\U0000dfff] [\xf0\x90\x80\x80]\n");
    /* raw-byte extension */
    ok("root ::= b\"\\xff\\x00a\\\"\" b[\\x80-\\xbf] b \"x\"\nb ::= \"q\"",
       "root ::= b\"\\xff\\x00a\\\"\" b[\\x80-\\xbf] b \"x\"\nb ::= \"q\"\n");
    ok("root ::= b\"abc\" b[^a-z\\]] b[]", "root ::= \"abc\" b[^a-z\\]] b[]\n");
    /* comments, CRLF, rules in any order, root printed first */
    ok("# leading comment\r\nb ::= \"x\" # trailing\r\nroot ::= b | c # more\r\nc ::= \"y\"\r\n",
       "root ::= b | c\nb ::= \"x\"\nc ::= \"y\"\n");
    ok("root ::= \"a\"\n\n   | \"b\"", "root ::= \"a\" | \"b\"\n");
    ok("root ::=\n  \"a\"\n  (\n \"b\"\n  |\n \"c\"\n )\n", "root ::= \"a\" (\"b\" | \"c\")\n");
    /* recursion and self reference */
    ok("root ::= \"(\" root \")\" | \"\"", "root ::= \"(\" root \")\" | \"\"\n");
    ok("root ::= x (= \"a\" | [0-9])\nx ::= \"q\" (= \"z\")", "root ::= x (= \"a\" | [0-9])\nx ::= \"q\" (= \"z\")\n");
    ok("root ::= x ( = \"a\" )\nx ::= \"q\"", "root ::= x (= \"a\")\nx ::= \"q\"\n");
    /* macros */
    ok("root ::= Regex(\"[a-z]+\\\\.(com|org)$\")", "root ::= [a-z]+ \".\" (\"com\" | \"org\")\n");
    ok("root ::= \"<\" Regex( \"\\\\d{2,3}\" ) \">\"", "root ::= \"<\" [0-9]{2,3} \">\"\n");
    ok("root ::= Regex (\"x\")\nRegex ::= \"r\"", "root ::= Regex \"x\"\nRegex ::= \"r\"\n");
    ok("root ::= Regex(\"a+\" , json_string = false)", "root ::= \"a\"+\n");
    /* token-level terminals: Token(id) is one marker literal, printed back as Token(id) */
    ok("root ::= \"a\" Token(128010) \"b\"", "root ::= \"a\" Token(128010) \"b\"\n");
    ok("root ::= Token( 0 , 1073741823 )", "root ::= Token(0) | Token(1073741823)\n");
    ok("root ::= Token (7)\nToken ::= \"t\"", "root ::= Token(7)\nToken ::= \"t\"\n");
    /* token classes: ExcludeToken (sorted, distinct) and TokenTagDispatch written with it */
    ok("root ::= ExcludeToken(3, 1, 2, 1) Token(2147483647)",
       "root ::= ExcludeToken(1, 2, 3) Token(2147483647)\n");
    ok("root ::= ExcludeToken()", "root ::= ExcludeToken()\n");
    ok("b ::= \"x\"\nroot ::= TokenTagDispatch((3, b), excludes=(5,))",
       "root ::= (ExcludeToken(3, 5) | Token(3) b)*\nb ::= \"x\"\n");
    ok("b ::= \"x\"\nroot ::= TokenTagDispatch((3, b), loop_after_dispatch=false)",
       "root ::= ExcludeToken(3)* (Token(3) b)?\nb ::= \"x\"\n");
    ok("root ::= Token \"x\"\nToken ::= \"t\"", "root ::= Token \"x\"\nToken ::= \"t\"\n");
    ok("root ::= TagDispatch((Token(5), x), excludes=(Token(6), \"e\"))\nx ::= \"y\"",
       "root ::= TagDispatch(\n  (Token(5), x),\n  loop_after_dispatch=true,\n  excludes=(Token(6), \"e\")\n)\nx ::= \"y\"\n");
    /* Substring(...): a whole rule body, else lifted into rule_1, rule_2, ... */
    ok("root ::= Substring(\"abc\", \"\", \"\\0\")", "root ::= Substring(\"abc\", \"\", \"\\0\")\n");
    ok("root ::= Substring ( )", "root ::= Substring()\n");
    ok("root ::= \"x\" Substring(\"a\")* | Substring(b\"\\xff\")\nroot_1 ::= \"q\"",
       "root ::= \"x\" root_2* | root_3\nroot_1 ::= \"q\"\nroot_2 ::= Substring(\"a\")\n"
       "root_3 ::= Substring(b\"\\xff\")\n");
    ok("root ::= Substring \"x\"\nSubstring ::= \"s\"", "root ::= Substring \"x\"\nSubstring ::= \"s\"\n");
    /* upstream xgrammar's printed forms */
    ok("root ::= ((x{0, -1} x{2, 3})) (=([ \\n]* \"a\"))\nx ::= (([^\\\"\\\\\\0-\\x1f]) | (\"\\xe9\"))",
       "root ::= x* x{2,3} (= [ \\n]* \"a\")\nx ::= [^\"\\\\\\x00-\\x1f] | \"\xc3\xa9\"\n");
    /* UTF-8 literals */
    ok("root ::= \"h\xc3\xa9llo \xe4\xb8\x96\" [\xc3\xa0-\xc3\xbf\xf0\x9f\x98\x80]",
       "root ::= \"h\xc3\xa9llo \xe4\xb8\x96\" [\xc3\xa0-\xc3\xbf\xf0\x9f\x98\x80]\n");
    /* names that look like the raw-byte prefix or keywords */
    ok("root ::= bb b\nbb ::= \"1\"\nb ::= \"2\"", "root ::= bb b\nbb ::= \"1\"\nb ::= \"2\"\n");
    /* custom root */
    {
        xgr_grammar *g = NULL;
        const char *s = "start ::= a\na ::= \"x\"";
        int rc = xgr_grammar_from_ebnf(s, strlen(s), "start", 5, &g);
        CHECK(rc == XGR_OK, "custom root: %s", xgr_last_error());
        char *p = g ? print_g(g) : NULL;
        CHECK(p && strcmp(p, "start ::= a\na ::= \"x\"\n") == 0, "custom root print: %s", p);
        xgr_free(p);
        xgr_grammar_release(g);
        rc = xgr_grammar_from_ebnf(s, strlen(s), "a", 1, &g);
        CHECK(rc == XGR_OK && g && g->root == 1, "root 'a'");
        xgr_grammar_release(g);
    }
    /* src need not be NUL-terminated */
    {
        const char buf[] = {'r', 'o', 'o', 't', ':', ':', '=', '"', 'a', '"', '"', 'x'};
        xgr_grammar *g = NULL;
        int rc = xgr_grammar_from_ebnf(buf, 10, NULL, 0, &g);
        CHECK(rc == XGR_OK, "span parse: %s", xgr_last_error());
        xgr_grammar_release(g);
    }
}

static void test_ebnf_lang(void) {
    ebnf_lang("root ::= \"<\" Substring(\"ab\", \"a\", \"\", \"b\", \"ba\") \">\"",
              L("<>", "<ab>", "<aba>", "<abab>", "<ababba>", "<bba>", "<abba>"),
              L("<aa>", "<bab>", "<abaa>", "<"));
    ebnf_lang("root ::= Substring(\"\xe4\xbd\xa0\xe5\xa5\xbd\", \"\xe5\xa5\xbd\")",
              L("", "\xe4\xbd\xa0\xe5\xa5\xbd", "\xe4\xbd\xa0\xe5\xa5\xbd\xe5\xa5\xbd"),
              L("\xe4\xbd\xa0", "\xe5\xa5\xbd\xe4\xbd\xa0\xe5\xa5\xbd"));
    ebnf_lang("root ::= \"a\"{2,3} (\"b\" | \"cd\")*",
              L("aa", "aaa", "aab", "aacdb", "aaabcdcd"), L("a", "aaaa", "aac", "", "aabc"));
    ebnf_lang("root ::= [^a-c\\n] \"\\u00e9\"", L("x\xc3\xa9", "\xe4\xb8\x96\xc3\xa9"),
              L("a\xc3\xa9", "\n\xc3\xa9", "x\xe9"));
    ebnf_lang("root ::= b\"\\xff\" b[\\x80-\\xbf]", L("\xff\x80", "\xff\xbf"), L("\xff\x7f", "\xc3\xbf\x80"));
    ebnf_lang("root ::= \"(\" root \")\" | \"\"", L("", "()", "((()))"), L("(", "())", ")("));
    ebnf_lang("root ::= Regex(\"^(a|b)+c?$\")", L("a", "abba", "abc"), L("", "c", "abcc"));
    /* the Regex(...) dialect: leading (?i), lookaheads ignored, nested quantifiers,
     * \s without U+00A0, flags and json_string */
    ebnf_lang("root ::= Regex(\"(?i)a[b-c]\\\\x41(?=z)\")", L("abA", "ACa", "aCA"), L("abz", "abB"));
    ebnf_lang("root ::= Regex(\"a{2}{2}|b???\")", L("aaaa", "", "b"), L("aa", "bb"));
    ebnf_lang("root ::= Regex(\"\\\\s\")", L(" ", "\t", "\v"), L("\xc2\xa0"));
    ebnf_lang("root ::= Regex(\"a.b\", flags=\"i\")", L("AxB", "a\rb"), L("a\nb"));
    ebnf_lang("root ::= Regex(\"a.b\", flags=\"su\")", L("a\nb"), L("A\nb"));
    ebnf_lang("root ::= Regex(\"[^x]+|\\\\W\", json_string=true)", L("ab\x7f", "\xc3\xa9", "#"),
              L("a\"", "\\", "\n", "x"));
    /* as upstream: `( )` is the empty string, \? is '?' */
    ebnf_lang("root ::= \"a\" ( ) \"b\"", L("ab"), L("a", "a b"));
    ebnf_lang("root ::= \"\\?\" [\\?]", L("??"), L("?", "\\??"));
}

static void test_ebnf_errors(void) {
    bad("root ::= \"a\"**", XGR_ERR_SYNTAX, "line 1, column 14");
    bad("root ::= \"a\" (= \"b\") \"c\"", XGR_ERR_SYNTAX, "line 1, column 22");
    bad("root ::= (\"a\" (= \"b\"))", XGR_ERR_SYNTAX, "only allowed at the end of a rule body");
    bad("root ::= \"a\" (= \"b\") (= \"c\")", XGR_ERR_SYNTAX, "Expect rule name (a rule takes at most one lookahead");
    bad("root ::= x\nx ::= \"a\"\nx ::= \"b\"", XGR_ERR_SEMANTIC,
        "line 3, column 1: Rule \"x\" is defined multiple times (first at line 2, column 1)");
    bad("root ::= \"a\" y", XGR_ERR_SEMANTIC, "EBNF parser error at line 1, column 14: Rule \"y\" is not defined");
    bad("r ::= \"a\"", XGR_ERR_SEMANTIC,
        "EBNF parser error at line 1, column 1: The root rule with name \"root\" is not found");
    bad("", XGR_ERR_SEMANTIC, "The root rule with name \"root\" is not found");
    bad("root ::= \"a\"{3,2}", XGR_ERR_SEMANTIC, "line 1, column 16: Lower bound is larger than upper bound: 3 > 2");
    bad("root ::= \"a\"{2000000000}", XGR_ERR_SEMANTIC, "too large");
    bad("root ::= \"a\"{99999999999999999999999}", XGR_ERR_SEMANTIC, "too large");
    bad("root ::= \"a\"{", XGR_ERR_SYNTAX, "expected a number");
    bad("root ::= \"a\"{1", XGR_ERR_SYNTAX, "expected '}'");
    bad("root ::= \"a\"{1,x}", XGR_ERR_SYNTAX, "line 1, column 16");
    bad("root ::= \"a\"{,2}", XGR_ERR_SYNTAX, "expected a number");
    bad("root ::= TagDispatch((\"a\", b))", XGR_ERR_SEMANTIC,
        "line 1, column 21: Rule \"b\" is not defined (referenced by the TagDispatch pair at line 1, "
        "column 28)");
    bad("root ::= Substring(\"a\", x=1)", XGR_ERR_SYNTAX,
        "line 1, column 25: Substring() does not accept named arguments");
    bad("root ::= Substring(\"a\", 1)", XGR_ERR_SYNTAX, "line 1, column 25: Substring() arguments must be strings");
    bad("root ::= Substring(a)", XGR_ERR_SYNTAX, "line 1, column 20: Substring() arguments must be strings");
    bad("root ::= Substring(\"a\",)", XGR_ERR_SYNTAX, "line 1, column 24: expected a string argument");
    bad("root ::= Substring(\"a\"", XGR_ERR_SYNTAX, "line 1, column 10: unclosed 'Substring('");
    bad("root ::= \"a\" (= Substring(\"b\"))", XGR_ERR_SYNTAX,
        "line 1, column 17: Substring should not be in lookahead assertion");
    bad("root ::= \"abc", XGR_ERR_SYNTAX, "EBNF lexer error at line 1, column 14: Expect \" in string literal (the string starting at "
        "line 1, column 10 is not closed)");
    bad("root ::= \"ab\nc\"", XGR_ERR_SYNTAX, "line 1, column 13: Expect \" in string literal");
    bad("root ::= [abc", XGR_ERR_SYNTAX, "EBNF lexer error at line 1, column 14: Unterminated character class (the class starts at "
        "line 1, column 10)");
    bad("root ::= [z-a]", XGR_ERR_SEMANTIC, "EBNF parser error at line 1, column 11: Invalid character class: lower bound is larger than "
        "upper bound (U+007A > U+0061)");
    bad("root ::= \"\\q\"", XGR_ERR_SYNTAX, "EBNF lexer error at line 1, column 11: Invalid escape sequence: backslash followed by 'q'");
    bad("root ::= \"\\", XGR_ERR_SYNTAX, "Invalid escape sequence: a backslash ends the input");
    bad("root ::= \"\\x\"", XGR_ERR_SYNTAX, "hex digits after \\x");
    bad("root ::= \"\\u12\"", XGR_ERR_SYNTAX, "4 hex digits");
    bad("root ::= \"\\U0011FFFF\"", XGR_ERR_SYNTAX, "above U+10FFFF");
    bad("root ::= \"\\U001\"", XGR_ERR_SYNTAX, "8 hex digits");
    bad("root ::= \"\\uD800\"", XGR_ERR_SYNTAX, "lone surrogate");
    bad("root ::= \"\\]\"", XGR_ERR_SYNTAX, "Invalid escape sequence");
    bad("root ::= b[\\u00e9]", XGR_ERR_SYNTAX, "byte class");
    bad("root ::= b[\xc3\xa9]", XGR_ERR_SYNTAX, "byte class");
    bad("root ::= \"\xff\"", XGR_ERR_UTF8, "line 1, column 11");
    bad("root ::= \"a\"\n  \"\xc3\"", XGR_ERR_UTF8, "line 2, column 4");
    bad("root ::= [\xed\xa0\x80]", XGR_ERR_UTF8, "line 1, column 11"); /* encoded surrogate */
    bad("root ::= \"\xc0\xaf\"", XGR_ERR_UTF8, NULL);                   /* overlong */
    bad("root ::= \xe9", XGR_ERR_UTF8, "line 1, column 10");
    bad("root ::= \xc3\xa9", XGR_ERR_SYNTAX, "but got '\xc3\xa9'");
    bad("root ::= ", XGR_ERR_SYNTAX, "Expect element, but got end of input");
    bad("root ::= \"a\" |", XGR_ERR_SYNTAX, "line 1, column 15: Expect element, but got end of input (expected a string, character class, "
        "rule name or '(')");
    bad("root ::= | \"a\"", XGR_ERR_SYNTAX, "line 1, column 10");
    bad("root ::= (|)", XGR_ERR_SYNTAX, "line 1, column 11: Expect element, but got '|'");
    bad("root ::= (\"a\"", XGR_ERR_SYNTAX, "unclosed '('");
    bad("root ::= \"a\")", XGR_ERR_SYNTAX, "line 1, column 13: Expect rule name (unmatched ')')");
    bad("root ::= \"a\" )", XGR_ERR_SYNTAX, "unmatched ')'");
    bad("root ::= ( \"a\"\nb ::= \"c\" )", XGR_ERR_SYNTAX, "unclosed '('");
    bad("root ::= * \"a\"", XGR_ERR_SYNTAX, "Expect element, but got * (quantifier '*' has nothing to repeat)");
    bad("root \"a\"", XGR_ERR_SYNTAX, "line 1, column 6: expected '::=' after the rule name");
    bad("::= \"a\"", XGR_ERR_SYNTAX, "EBNF lexer error at line 1, column 1: Assign should not be the first token");
    bad("  ::= \"a\"", XGR_ERR_SYNTAX, "line 1, column 3: Assign should not be the first token");
    bad("root ::= ::= \"a\"", XGR_ERR_SYNTAX, "line 1, column 10: Assign should be preceded by an identifier (a rule name is missing");
    bad("root ::= \"a\" ; ", XGR_ERR_SYNTAX, "line 1, column 14: Expect element, but got ';'");
    bad("root ::= Regex(\"a(\")", XGR_ERR_SYNTAX, "in the pattern of Regex(...): regex error at line 1, column 2: The parenthesis is not closed.");
    bad("root ::= Regex(\"(?<=a)\")", XGR_ERR_SYNTAX, "Lookbehind assertion");
    bad("root ::= Regex(\"(?s)a\")", XGR_ERR_SYNTAX, "column 16: in the pattern of Regex(...): regex error at line 1, column 1: Unsupported group modifier '(?s'");
    bad("root ::= Regex(\"a]\")", XGR_ERR_SYNTAX, "Unmatched ']'");
    bad("root ::= Regex(\"[^]\")", XGR_ERR_SYNTAX, "Empty character class");
    bad("root ::= Regex()", XGR_ERR_SYNTAX, "column 10: Regex expects exactly one string argument");
    bad("root ::= Regex(\"a\", \"b\")", XGR_ERR_SYNTAX, "Regex expects exactly one string argument");
    bad("root ::= Regex(\"a\",)", XGR_ERR_SYNTAX, "Expect string, integer, boolean, or tuple");
    bad("root ::= Regex(\"a\", foo=(1, \"x\"))", XGR_ERR_SYNTAX, "column 21: Regex does not support the named argument foo");
    bad("root ::= Regex(\"a\", json_string=1)", XGR_ERR_SYNTAX, "json_string must be a boolean");
    bad("root ::= Regex(\"a\", flags=\"im\")", XGR_ERR_SYNTAX, "regular-expression flag 'm' is not supported");
    bad("root ::= Regex(\"a\"", XGR_ERR_SYNTAX, "')' closing Regex(");
    bad("root ::= Regex(x)", XGR_ERR_SYNTAX, "Regex pattern must be a string literal");
    bad("root ::= Regex(\"a\", flags=1)", XGR_ERR_SYNTAX, "flags must be a string");
    bad("root ::= Token()", XGR_ERR_SYNTAX, "a token id (a non-negative integer) in Token(...)");
    bad("root ::= Token(x)", XGR_ERR_SYNTAX, "a token id (a non-negative integer) in Token(...)");
    bad("root ::= Token(-1)", XGR_ERR_SYNTAX, "a token id (a non-negative integer) in Token(...)");
    bad("root ::= Token(2147483648)", XGR_ERR_SEMANTIC, "larger than 2147483647");
    bad("root ::= Token(1 2)", XGR_ERR_SYNTAX, "',' or ')' in Token(...)");
    bad("root ::= Token(1", XGR_ERR_SYNTAX, "unclosed 'Token('");
    bad("root ::= ExcludeToken(1 2)", XGR_ERR_SYNTAX, "',' or ')' after a token id");
    bad("root ::= ExcludeToken(1073741821)", XGR_ERR_SEMANTIC, "larger than 1073741820");
    bad("b ::= \"x\"\nroot ::= TokenTagDispatch((3, b), excludes=(3,))", XGR_ERR_SEMANTIC,
        "token 3 is both a trigger and excluded");
    bad("root ::= TokenTagDispatch(stop=1)", XGR_ERR_SYNTAX, "loop_after_dispatch= or excludes=");
    bad("root ::= TagDispatch((Token(1, 2), x))\nx ::= \"y\"", XGR_ERR_SEMANTIC, "takes one id");
    bad("root ::= \"a\"{1,-2}", XGR_ERR_SYNTAX, "expected a number");
    bad("root ::= x\nx ::= y\ny ::= z", XGR_ERR_SEMANTIC, "line 3, column 7: Rule \"z\" is not defined");
    bad_n("root ::= \"a\"\0", 13, XGR_ERR_SYNTAX, "line 1, column 13: Expect element, but got byte 0x00");
    {
        /* NUL inside a string is the code point U+0000; it prints escaped */
        xgr_grammar *g = NULL;
        int rc = xgr_grammar_from_ebnf("root ::= \"a\0\"", 13, NULL, 0, &g);
        CHECK(rc == XGR_OK, "NUL in string: %s", xgr_last_error());
        char *p = g ? roundtrip(g, "NUL in string") : NULL;
        CHECK(p && strcmp(p, "root ::= \"a\\x00\"\n") == 0, "NUL print: %s", p);
        xgr_free(p);
        xgr_grammar_release(g);
    }
    /* deep nesting is refused, not a stack overflow */
    {
        size_t depth = 200000;
        char *s = malloc(depth * 2 + 32);
        strcpy(s, "root ::= ");
        size_t n = strlen(s);
        for (size_t i = 0; i < depth; i++) s[n++] = '(';
        s[n++] = '"', s[n++] = 'a', s[n++] = '"';
        for (size_t i = 0; i < depth; i++) s[n++] = ')';
        s[n] = 0;
        bad(s, XGR_ERR_LIMIT, "nesting");
        /* at the limit it still works */
        n = strlen("root ::= ");
        for (size_t i = 0; i < XGR_FRONT_MAX_DEPTH - 1; i++) s[n++] = '(';
        s[n++] = '"', s[n++] = 'a', s[n++] = '"';
        for (size_t i = 0; i < XGR_FRONT_MAX_DEPTH - 1; i++) s[n++] = ')';
        s[n] = 0;
        ok(s, "root ::= \"a\"\n");
        free(s);
    }
    /* invalid arguments */
    {
        xgr_grammar *g = (xgr_grammar *)1;
        CHECK(xgr_grammar_from_ebnf(NULL, 3, NULL, 0, &g) == XGR_ERR_INVALID_ARG && !g, "NULL src");
        CHECK(xgr_grammar_from_ebnf("x", 1, NULL, 0, NULL) == XGR_ERR_INVALID_ARG, "NULL out");
        CHECK(xgr_grammar_from_ebnf("root ::= \"a\"", 12, "ro\0t", 4, &g) == XGR_ERR_INVALID_ARG,
              "NUL in root name");
        CHECK(xgr_grammar_from_ebnf("root ::= \"a\"", 12, "nope", 4, &g) == XGR_ERR_SEMANTIC &&
                  strstr(xgr_last_error(), "root rule with name \"nope\" is not found"),
              "unknown root: %s", xgr_last_error());
        CHECK(xgr_grammar_from_regex(NULL, 1, &g) == XGR_ERR_INVALID_ARG, "regex NULL");
        CHECK(xgr_grammar_builtin_json(NULL) == XGR_ERR_INVALID_ARG, "json NULL");
        CHECK(xgr_grammar_to_ebnf(NULL, NULL, NULL) == XGR_ERR_INVALID_ARG, "print NULL");
    }
}

/* ---- regex ---------------------------------------------------------------------------- */

static void test_regex(void) {
    rx("^a+$", "root ::= \"a\"+\n");
    rx("abc", "root ::= \"abc\"\n");
    rx("abc*d", "root ::= \"ab\" \"c\"* \"d\"\n");
    rx("a.b", "root ::= \"a\" [\\x00-\\U0010ffff] \"b\"\n"); /* any code point, as upstream */
    rx("(?:ab|c){2,}?", "root ::= (\"ab\" | \"c\"){2,}\n");
    rx("(?<year>\\d{4})-(?<m>\\d\\d)", "root ::= [0-9]{4} \"-\" ([0-9] [0-9])\n");
    rx("\\u{1F600}\\uD83D\\uDE00\\x41\\u00e9\\cJ\\0", "root ::= \"\xf0\x9f\x98\x80\xf0\x9f\x98\x80" "A\xc3\xa9\\n\\x00\"\n");
    rx("[^\\W]", "root ::= [^\\x00-/:-@\\[-\\^`{-\\U0010ffff]\n");
    /* \s is [\t\n\v\f\r \u00a0] in from_regex (upstream's converter) */
    rx("[\\d\\s]", "root ::= [0-9\\t-\\r \\u00a0]\n");
    rx("\\D\\S", "root ::= [^0-9] [^\\t-\\r \\u00a0]\n");
    rx("^abc$|^d(e|f)$", "root ::= \"abc\" | \"d\" (\"e\" | \"f\")\n");
    rx("(a$)|b", "root ::= \"a\" | \"b\"\n");
    rx("[\\w-.]+@x\\.com", "root ::= [0-9A-Z_a-z\\-.]+ \"@x.com\"\n");
    rx("", "root ::= \"\"\n");
    rx("()", "root ::= \"\"\n");
    rx("a|", "root ::= \"a\" | \"\"\n");
    rx("[^]", "root ::= [^]\n");
    /* anchors match "" anywhere; unknown letter escapes are the letter; \01 is NUL, '1' */
    rx("a$b^c", "root ::= \"abc\"\n");
    rx("(^a)*|b$", "root ::= \"a\"* | \"b\"\n");
    rx("\\q\\a\\e\\01", "root ::= \"q\\x07\\x1b\\x001\"\n");
    rx("(?<>a)", "root ::= \"a\"\n");
    rx("a}b]", "root ::= \"a}b]\"\n");
    rx("[a-]x[-b][a\\-z][\\b]", "root ::= [a\\-] \"x\" [\\-b] [a\\-z] [\\x08]\n");
    rx("\\$\\^\\.\\*\\+\\?\\(\\)\\[\\]\\{\\}\\|\\\\\\/", "root ::= \"$^.*+?()[]{}|\\\\/\"\n");
    rx("x{3}y{2,}z{1,4}w??v+?", "root ::= \"x\"{3} \"y\"{2,} \"z\"{1,4} \"w\"? \"v\"+\n");
    rx("\xc3\xa9+", "root ::= \"\xc3\xa9\"+\n");
    rx("^^a$$", "root ::= \"a\"\n");
    rx("[\\uD800-\\uDFFF]", "root ::= [\\U0000d800-\\U0000dfff]\n");

    rx_lang("^[\\w.-]+@[a-z]+\\.(com|org)$", L("a.b-c@x.com", "_@yy.org"),
            L("@x.com", "a@x.net", "a@X.com", "a b@x.com"));
    rx_lang("-?(0|[1-9]\\d*)(\\.\\d+)?([eE][+-]?\\d+)?", L("0", "-12.5e+3", "7E9"),
            L("01", "-", "1.", ".5", "1e"));
    rx_lang(".*", L("", "abc", "\xe4\xb8\x96", "a\nb", "\r\n"), L("\xff", "\xed\xa0\x80"));
    rx_lang("[^abc]{2}", L("xy", "\xc3\xa9z"), L("ax", "x", "xyz"));
    rx_lang("(ab|a)(c|bcd)", L("abc", "abcd"), L("ab", "acd"));
    rx_lang("\\s\\S\\w\\W\\d\\D", L(" x_.1a", "\t\xc3\xa9" "a-9-"), L("xx_.1a", " x..1a"));
    rx_lang("a{2,3}?", L("aa", "aaa"), L("a", "aaaa"));

    rx_bad("\\p{L}", XGR_ERR_SYNTAX, "column 1: Unicode property escape \\p / \\P is not supported");
    rx_bad("x(?=a)b", XGR_ERR_SYNTAX, "column 2: Lookahead assertion (?=...) is not supported");
    rx_bad("(?!a)", XGR_ERR_SYNTAX, "Lookahead");
    rx_bad("ab(?<=a)", XGR_ERR_SYNTAX, "column 3: Lookbehind assertion");
    rx_bad("(?<!a)", XGR_ERR_SYNTAX, "Lookbehind");
    rx_bad("(a)\\1", XGR_ERR_SYNTAX, "column 4: Backreference \\1 is not supported");
    rx_bad("(?<n>a)\\k<n>", XGR_ERR_SYNTAX, "Backreference \\k");
    rx_bad("(?P<n>a)", XGR_ERR_SYNTAX, "Unsupported group modifier '(?P'");
    rx_bad("a\\bc", XGR_ERR_SYNTAX, "Word boundary assertion \\b");
    rx_bad("(?i)a", XGR_ERR_SYNTAX, "Unsupported group modifier '(?i'");
    rx_bad("(?", XGR_ERR_SYNTAX, "Group modifier is not finished");
    rx_bad("a{2", XGR_ERR_SYNTAX, "column 2: Invalid repetition count: expected ',' or '}'");
    rx_bad("a{,2}", XGR_ERR_SYNTAX, "Invalid repetition count: expected a number");
    rx_bad("a{1,2", XGR_ERR_SYNTAX, "expected '}' after the upper bound");
    rx_bad("{", XGR_ERR_SYNTAX, "nothing to repeat");
    rx_bad("a{3,2}", XGR_ERR_SEMANTIC, "lower bound 3 is larger than the upper bound 2");
    rx_bad("a{9999999999}", XGR_ERR_SEMANTIC, "too large");
    rx_bad("a**", XGR_ERR_SYNTAX, "column 3: Two consecutive repetition modifiers are not allowed.");
    rx_bad("a+?{2}", XGR_ERR_SYNTAX, "column 4: Two consecutive");
    rx_bad("a{2}{3}", XGR_ERR_SYNTAX, "Two consecutive");
    rx_bad("*a", XGR_ERR_SYNTAX, "column 1: There is nothing to repeat before '*'");
    rx_bad("^*", XGR_ERR_SYNTAX, "nothing to repeat");
    rx_bad("(ab", XGR_ERR_SYNTAX, "column 1: The parenthesis is not closed.");
    rx_bad("ab)", XGR_ERR_SYNTAX, "column 3: Unmatched ')'");
    rx_bad("[ab", XGR_ERR_SYNTAX, "Unclosed '['");
    rx_bad("[]", XGR_ERR_SYNTAX, "Empty character class is not allowed in regex.");
    rx_bad("[]a]", XGR_ERR_SYNTAX, "Empty character class");
    rx_bad("[z-a]", XGR_ERR_SEMANTIC, "column 2: Invalid character range (lower bound exceeds");
    rx_bad("[a-\\d]", XGR_ERR_SYNTAX, "column 4: Invalid character range endpoint");
    rx_bad("ab\\", XGR_ERR_SYNTAX, "trailing backslash");
    rx_bad("\\x4", XGR_ERR_SYNTAX, "two hexadecimal digits");
    rx_bad("\\u12", XGR_ERR_SYNTAX, "four hexadecimal digits");
    rx_bad("\\u{110000}", XGR_ERR_SYNTAX, "beyond the Unicode range");
    rx_bad("\\u{}", XGR_ERR_SYNTAX, "one to six hexadecimal digits");
    rx_bad("\\u{0000041}", XGR_ERR_SYNTAX, "one to six hexadecimal digits");
    rx_bad("\\c1", XGR_ERR_SYNTAX, "\\c");
    rx_bad("\xc3\xa9\xff", XGR_ERR_UTF8, "column 2");
    rx_bad("(?<1>a)", XGR_ERR_SYNTAX, "Invalid named capturing group");
    {
        static const char nul[] = "ab[c]\0";
        xgr_grammar *g = NULL;
        CHECK(xgr_grammar_from_regex(nul, sizeof nul - 1, &g) == XGR_ERR_SYNTAX && !g &&
                  strstr(xgr_last_error(), "column 6: The regex must not contain null characters"),
              "NUL in a regex: %s", xgr_last_error());
    }
    {
        size_t depth = 100000;
        char *s = malloc(depth * 2 + 2);
        for (size_t i = 0; i < depth; i++) s[i] = '(', s[depth + i] = ')';
        s[2 * depth] = 0;
        rx_bad(s, XGR_ERR_LIMIT, "nesting");
        free(s);
    }
}

/* ---- builtin JSON, grammar operations, hand-built IR --------------------------------- */

/* ---- flat regex trees (xgr_regex_parse) ----------------------------------------- */

static void tree_put(char *buf, size_t cap, const char *fmt, ...) {
    size_t len = strlen(buf);
    va_list ap;
    va_start(ap, fmt);
    if (len < cap) vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
}

/* Prints node `id`: SET [lo-hi,..,pXx] (leading ^ when complemented), CAT (a b), ALT
 * (a|b), REP a{m,n} (n -1: unbounded), EPS (), BOL ^, EOL $. Checks child ids < id. */
static void tree_str(const xgr_regex_ast *t, int32_t id, char *buf, size_t cap) {
    const int32_t *n = t->nodes + 5 * (size_t)id;
    switch (n[0]) {
    case XGR_RX_SET:
        tree_put(buf, cap, "[%s", n[4] ? "^" : "");
        for (int32_t i = 0; i < n[2]; i++) {
            int32_t lo = t->data[n[1] + 2 * i], hi = t->data[n[1] + 2 * i + 1];
            tree_put(buf, cap, i ? ",%x" : "%x", (unsigned)lo);
            if (hi != lo) tree_put(buf, cap, "-%x", (unsigned)hi);
        }
        for (int32_t i = 0; i < n[3]; i++) {
            int32_t c = t->data[n[1] + 2 * n[2] + i];
            tree_put(buf, cap, "%s%c%c%c", n[2] + i ? "," : "", (c & 1) ? 'P' : 'p',
                     (char)((c >> 1) & 0xff), (c >> 9) ? (char)(c >> 9) : ' ');
        }
        tree_put(buf, cap, "]");
        break;
    case XGR_RX_CAT: case XGR_RX_ALT:
        tree_put(buf, cap, "(");
        for (int32_t i = 0; i < n[2]; i++) {
            int32_t k = t->data[n[1] + i];
            CHECK(k >= 0 && k < id, "child %d of node %d", k, id);
            if (i) tree_put(buf, cap, n[0] == XGR_RX_CAT ? " " : "|");
            if (k >= 0 && k < id) tree_str(t, k, buf, cap);
        }
        tree_put(buf, cap, ")");
        break;
    case XGR_RX_REP:
        CHECK(n[1] >= 0 && n[1] < id, "child %d of node %d", n[1], id);
        if (n[1] >= 0 && n[1] < id) tree_str(t, n[1], buf, cap);
        tree_put(buf, cap, "{%d,%d}", n[2], n[3]);
        break;
    case XGR_RX_EPS: tree_put(buf, cap, "()"); break;
    case XGR_RX_BOL: tree_put(buf, cap, "^"); break;
    case XGR_RX_EOL: tree_put(buf, cap, "$"); break;
    case XGR_RX_LOOK:
        CHECK(n[1] >= 0 && n[1] < id, "child %d of node %d", n[1], id);
        tree_put(buf, cap, n[2] ? "(?!" : "(?=");
        if (n[1] >= 0 && n[1] < id) tree_str(t, n[1], buf, cap);
        tree_put(buf, cap, ")");
        break;
    case XGR_RX_WORDB: tree_put(buf, cap, n[2] ? "\\B" : "\\b"); break;
    default: CHECK(0, "node kind %d", n[0]);
    }
}

static void tree_case(int dialect, const char *pattern, int want_rc, const char *want) {
    xgr_regex_ast *t = NULL;
    int rc = xgr_regex_parse(pattern, strlen(pattern), dialect, &t);
    CHECK(rc == want_rc, "xgr_regex_parse(%s, %d) = %d (want %d): %s", pattern, dialect, rc,
          want_rc, xgr_last_error());
    if (rc) {
        CHECK(t == NULL, "no tree after an error");
        CHECK(strstr(xgr_last_error(), want) != NULL, "/%s/: error '%s' lacks '%s'", pattern,
              xgr_last_error(), want);
        return;
    }
    char buf[512] = "";
    CHECK(t && t->root >= 0 && (size_t)t->root < t->n_nodes, "root");
    if (t && t->root >= 0 && (size_t)t->root < t->n_nodes) tree_str(t, t->root, buf, sizeof buf);
    CHECK(strcmp(buf, want) == 0, "/%s/ (dialect %d): tree %s, want %s", pattern, dialect, buf,
          want);
    xgr_regex_ast_free(t);
}

static void test_regex_tree(void) {
    const int E = XGR_REGEX_ECMASCRIPT, C = XGR_REGEX_CONVERTER, M = XGR_REGEX_MACRO;
    tree_case(E, "^a+$", 0, "(^ [61]{1,-1} $)");
    tree_case(E, ".", 0, "([0-9,b-c,e-2027,202a-10ffff])");
    tree_case(E, "[^\\d\\p{Lu}]x|\\P{L}", 0, "(([^30-39,pLu] [78])|([^pL ]))");
    tree_case(E, "\\s", 0, "([9-d,20,a0,1680,2000-200a,2028-2029,202f,205f,3000,feff])");
    tree_case(E, "a{,2}b{2}{3}", 0, "([61] [7b] [2c] [32] [7d] [62]{2,2}{3,3})");
    tree_case(E, "[]|[^]|(?<n>)", 0, "(([])|([^])|(()))");
    tree_case(E, "\\u{0001F600}\\0", 0, "([1f600] [0])");
    tree_case(C, "a^b", 0, "([61] [62])");
    tree_case(M, "(?=x)y", 0, "(() [79])");
    tree_case(E, "\\1", XGR_ERR_SEMANTIC, "Backreference");
    tree_case(E, "\\01", XGR_ERR_SEMANTIC, "octal");
    tree_case(E, "(?=a)x(?!b|c)", 0, "((?=([61])) [78] (?!(([62])|([63]))))");
    tree_case(E, "\\bx\\B[\\b]", 0, "(\\b [78] \\B [8])");
    tree_case(E, "(?=a)*", XGR_ERR_SYNTAX, "lookahead cannot be repeated");
    tree_case(E, "\\b+", XGR_ERR_SYNTAX, "assertion cannot be repeated");
    tree_case(E, "[\\B]", XGR_ERR_SEMANTIC, "Word boundary assertion \\B");
    tree_case(E, "(?<!a)", XGR_ERR_SEMANTIC, "Lookbehind assertion (?<!");
    tree_case(E, "(?<", XGR_ERR_SYNTAX, "named capturing group");
    tree_case(E, "(?i)a", XGR_ERR_SEMANTIC, "group modifier");
    tree_case(E, "\\q", XGR_ERR_SEMANTIC, "no meaning");
    tree_case(E, "\\p{Script=Greek}", XGR_ERR_SEMANTIC, "only general categories");
    tree_case(E, "\\p{Foo}", XGR_ERR_SEMANTIC, "unknown general category");
    tree_case(E, "a{1000000001}", XGR_ERR_SEMANTIC, "too large");
    tree_case(E, "(", XGR_ERR_SYNTAX, "not closed");
    tree_case(E, "a)", XGR_ERR_SYNTAX, "Unmatched ')'");
    tree_case(E, "^*", XGR_ERR_SYNTAX, "nothing to repeat");
    tree_case(E, "a{3,2}", XGR_ERR_SYNTAX, "lower bound");
    tree_case(E, "[z-a]", XGR_ERR_SYNTAX, "lower bound exceeds");
    tree_case(E, "[\\d-z]", XGR_ERR_SYNTAX, "cannot start a range");
    tree_case(E, "\\u{110000}", XGR_ERR_SYNTAX, "beyond the Unicode range");
    tree_case(E, "\\p", XGR_ERR_SYNTAX, "{name}");

    xgr_regex_ast *t = (xgr_regex_ast *)1;
    CHECK(xgr_regex_parse(NULL, 0, E, &t) == XGR_OK && t && t->n_nodes == 1, "empty pattern");
    xgr_regex_ast_free(t);
    CHECK(xgr_regex_parse("a", 1, 7, &t) == XGR_ERR_INVALID_ARG && !t, "bad dialect");
    CHECK(xgr_regex_parse("a", 1, E, NULL) == XGR_ERR_INVALID_ARG, "NULL out");
    CHECK(xgr_regex_parse(NULL, 1, E, &t) == XGR_ERR_INVALID_ARG, "NULL src");
    xgr_regex_ast_free(NULL);
    xgr_grammar *g = xgr_ir_new();
    int32_t node;
    xgr_regex_opts o = {XGR_REGEX_ECMASCRIPT, 0, 0, 0, 0};
    CHECK(g && xgr_regex_to_node_opts(g, "a", 1, &o, &node) == XGR_ERR_INVALID_ARG,
          "IR nodes take the upstream dialects only");
    xgr_ir_free(g);
}

static void test_json(void) {
    xgr_grammar *g = NULL;
    int rc = xgr_grammar_builtin_json(&g);
    CHECK(rc == XGR_OK, "builtin json: %s", xgr_last_error());
    if (rc) return;
    char *p = roundtrip(g, "builtin json");
    CHECK(p && strncmp(p, "root ::= object | array\nvalue ::= ", 34) == 0, "json print: %s", p);
    xgr_free(p);
    lang(g, "json",
         L("{}", "[]", "{ }", "[ 1 , 2 ]", "[\"\"]", "[\"a\\u00e9\\n\\\"\\\\\\/\"]", "[0]",
           "[-0.5e+10]", "[12E3]", "[true, false, null]", "{\"a\":{\"b\":[null,true,\"x\"]}}",
           "{\n\t\"k\" : [ ] ,\r\"l\":1}", "[\"\xe4\xb8\x96\"]"),
         /* the top-level value is an object or an array, as upstream's builtin grammar */
         L("", "\"\"", "\"abc\"", "0", "1", "-0.5e+10", "true", "false", "null", " {}", "{} ",
           "\n[]", "[ 1 ]\n", "[01]", "[1.]", "[.5]", "[+1]", "[\"\\x\"]", "[\"\\u12g4\"]",
           "[\"a\nb\"]", "[1,]", "{\"a\"}", "{1:2}", "[1 2]", "[nul]", "[True]", "['a']", "{,}"));
    xgr_grammar_release(g);
}

/* Special-token spellings: literals and TagDispatch triggers that spell a given text also
 * admit that token (Token(id)); grammars that spell none come back as NULL; bad
 * arguments are refused. */
static void test_spell_tokens(void) {
    const uint8_t data[] = "<|c|><|e|>";
    const uint32_t offs[] = {0, 5, 10};
    const int32_t ids[] = {7, 9};
    xgr_grammar *g = ebnf("root ::= \"a<|c|>b\" t\nt ::= TagDispatch((\"<|c|>x\", u), "
                          "excludes=(\"<|e|>\"))\nu ::= \"<|e|>\"");
    xgr_grammar *plain = ebnf("root ::= \"abc\"");
    if (!g || !plain) return;
    xgr_grammar *out = NULL;
    int rc = xgr_grammar_spell_tokens(g, data, offs, ids, 2, &out);
    CHECK(rc == XGR_OK && out, "spell: %s", xgr_last_error());
    char *p = out ? print_g(out) : NULL;
    CHECK(p && strcmp(p, "root ::= (\"a\" (\"<|c|>\" | Token(7)) \"b\") t\n"
                         "t ::= TagDispatch(\n  (\"<|c|>x\", u),\n  (b\"\\xff\\x80\\x80\\x80\\x80\\x87x\", u),\n"
                         "  loop_after_dispatch=true,\n  excludes=(\"<|e|>\")\n)\n"
                         "u ::= \"<|e|>\" | Token(9)\n") == 0, "spelled print:\n%s", p);
    /* the printed form parses back to a grammar that prints the same */
    xgr_grammar *again = p ? ebnf(p) : NULL;
    char *p2 = again ? print_g(again) : NULL;
    CHECK(p && p2 && strcmp(p, p2) == 0, "spelled reprint:\n%s", p2);
    xgr_free(p2);
    xgr_grammar_release(again);
    xgr_free(p);
    xgr_grammar_release(out);
    out = (xgr_grammar *)1;
    CHECK(xgr_grammar_spell_tokens(plain, data, offs, ids, 2, &out) == XGR_OK && out == NULL,
          "a grammar without spellings is returned as NULL");
    const int32_t bad_ids[] = {-1, 9};
    CHECK(xgr_grammar_spell_tokens(g, data, offs, bad_ids, 2, &out) == XGR_ERR_INVALID_ARG &&
              strstr(xgr_last_error(), "token id -1 out of range"),
          "negative token id: %s", xgr_last_error());
    CHECK(xgr_grammar_spell_tokens(NULL, data, offs, ids, 2, &out) == XGR_ERR_INVALID_ARG,
          "NULL grammar");
    CHECK(xgr_grammar_spell_tokens(g, NULL, offs, ids, 2, &out) == XGR_ERR_INVALID_ARG,
          "NULL spellings");
    xgr_grammar_release(g);
    xgr_grammar_release(plain);
    /* Spellings sharing a first byte, one of one byte, given unsorted and sorted: each
     * occurrence takes the longest spelling there, whatever the order. */
    const uint8_t many[] = "<|ab|><x<|a|>z<|a";
    const uint32_t many_offs[] = {0, 6, 8, 13, 14, 17};
    const int32_t many_ids[] = {1, 2, 3, 4, 5};
    const uint8_t sorted_data[] = "z<x<|a<|a|><|ab|>";
    const uint32_t sorted_offs[] = {0, 1, 3, 6, 11, 17};
    const int32_t sorted_ids[] = {4, 2, 5, 3, 1};
    xgr_grammar *lit = ebnf("root ::= \"q<|ab|>z<x<|a|>w<|\"");
    const char *want = "root ::= \"q\" (\"<|ab|>\" | Token(1)) (\"z\" | Token(4)) (\"<x\" | Token(2)) "
                       "(\"<|a|>\" | Token(3)) \"w<|\"\n";
    for (int k = 0; lit && k < 2; k++) {
        out = NULL;
        rc = k ? xgr_grammar_spell_tokens(lit, sorted_data, sorted_offs, sorted_ids, 5, &out)
               : xgr_grammar_spell_tokens(lit, many, many_offs, many_ids, 5, &out);
        p = out ? print_g(out) : NULL;
        CHECK(rc == XGR_OK && p && strcmp(p, want) == 0, "spellings %s:\n%s", k ? "sorted" : "unsorted",
              p ? p : xgr_last_error());
        xgr_free(p);
        xgr_grammar_release(out);
    }
    xgr_grammar_release(lit);
}

static void test_ops(void) {
    xgr_grammar *a = ebnf("root ::= \"a\" x\nx ::= \"x\"");
    xgr_grammar *b = ebnf("root ::= \"b\" x (= \"y\")\nx ::= \"y\"");
    xgr_grammar *c = regex("[0-9]+");
    if (!a || !b || !c) return;
    xgr_grammar *gs[3] = {a, b, c}, *u = NULL, *k = NULL;
    int rc = xgr_grammar_union(gs, 3, &u);
    CHECK(rc == XGR_OK, "union: %s", xgr_last_error());
    char *p = u ? roundtrip(u, "union") : NULL;
    CHECK(p && strcmp(p, "root ::= root_1 | root_2 | root_3\nroot_1 ::= \"a\" x\nx ::= \"x\"\n"
                         "root_2 ::= \"b\" x_1 (= \"y\")\nx_1 ::= \"y\"\nroot_3 ::= [0-9]+\n") == 0,
          "union print:\n%s", p);
    if (u) lang(u, "union", L("ax", "by", "123"), L("ay", "bx", "", "a"));
    xgr_free(p);
    rc = xgr_grammar_concat(gs, 3, &k);
    CHECK(rc == XGR_OK, "concat: %s", xgr_last_error());
    p = k ? roundtrip(k, "concat") : NULL;
    CHECK(p && strncmp(p, "root ::= root_1 root_2 root_3\n", 30) == 0, "concat print:\n%s", p);
    if (k) lang(k, "concat", L("axby1", "axby0123"), L("axby", "byax1"));
    xgr_free(p);
    xgr_grammar *one = NULL;
    CHECK(xgr_grammar_union(gs, 1, &one) == XGR_OK, "union of one");
    p = one ? print_g(one) : NULL;
    CHECK(p && strcmp(p, "root ::= root_1\nroot_1 ::= \"a\" x\nx ::= \"x\"\n") == 0, "union1: %s", p);
    xgr_free(p);
    xgr_grammar_release(one);
    xgr_grammar *none = (xgr_grammar *)1;
    CHECK(xgr_grammar_union(gs, 0, &none) == XGR_ERR_INVALID_ARG && none == NULL, "union of none");
    xgr_grammar *withnull[2] = {a, NULL};
    CHECK(xgr_grammar_concat(withnull, 2, &none) == XGR_ERR_INVALID_ARG, "concat with NULL");
    /* reference counting: a retained grammar survives one release */
    xgr_grammar_retain(a);
    xgr_grammar_release(a);
    p = print_g(a);
    CHECK(p != NULL, "retained grammar still usable");
    xgr_free(p);
    xgr_grammar_release(NULL);
    xgr_grammar_release(u);
    xgr_grammar_release(k);
    xgr_grammar_release(a);
    xgr_grammar_release(b);
    xgr_grammar_release(c);
}

/* IR the parser never produces directly (one-child lists, empty ALT, invalid UTF-8
 * literals, byte classes) still prints to something that round-trips. */
static void test_handmade_ir(void) {
    xgr_grammar *g = xgr_ir_new();
    int32_t root = xgr_ir_rule(g, "root", 4), other = xgr_ir_rule(g, "b", 1);
    uint32_t br[4] = {0x80, 0xbf, '-', '-'}, cr[4] = {0xd800, 0xd800, 0xdc00, 0xdc00};
    int32_t k[6];
    k[0] = xgr_ir_bytes(g, (const uint8_t *)"\xff\xfe\"\\", 4);
    k[1] = xgr_ir_byte_class(g, br, 2, 1);
    k[2] = xgr_ir_class(g, cr, 2, 0);
    k[3] = xgr_ir_alt(g, NULL, 0);
    int32_t inner[2] = {xgr_ir_ref(g, other), xgr_ir_bytes(g, (const uint8_t *)"x", 1)};
    int32_t one = xgr_ir_seq(g, inner, 2);
    k[4] = xgr_ir_alt(g, &one, 1); /* returns `one` itself */
    g->nodes.data[k[3]].kind = XGR_NODE_ALT;
    k[5] = xgr_ir_repeat(g, xgr_ir_repeat(g, k[0], 0, -1), 2, 7);
    g->rules.data[root].body = xgr_ir_seq(g, k, 6);
    g->rules.data[other].body = xgr_ir_empty(g);
    g->rules.data[other].lookahead = xgr_ir_byte_class(g, br, 1, 0);
    g->root = root;
    char *p = roundtrip(g, "handmade");
    CHECK(p && strcmp(p, "root ::= b\"\\xff\\xfe\\\"\\\\\" b[^\\x80-\\xbf\\-] [\\U0000d800\\U0000dc00] [] "
                         "(b \"x\") (b\"\\xff\\xfe\\\"\\\\\"*){2,7}\nb ::= \"\" (= b[\\x80-\\xbf])\n") == 0,
          "handmade print:\n%s", p);
    xgr_free(p);
    /* malformed IR is reported, not crashed on */
    g->nodes.data[k[2]].count = 1000;
    char *out = NULL;
    CHECK(xgr_grammar_to_ebnf(g, &out, NULL) == XGR_ERR_INTERNAL && out == NULL, "malformed IR");
    g->nodes.data[k[2]].count = 2;
    g->rules.data[other].body = -1;
    CHECK(xgr_grammar_to_ebnf(g, &out, NULL) != XGR_OK, "rule without body");
    xgr_grammar_release(g);
}

/* An IR builder's failure keeps the status it set; the front ends return it unchanged
 * (no guessing from the message text, which used to turn these into out-of-memory). */
static void test_ir_builder_status(void) {
    xgr_grammar *g = xgr_ir_new();
    int32_t r = xgr_ir_rule(g, "r", 1);
    int32_t a = xgr_ir_bytes(g, (const uint8_t *)"a", 1);
    CHECK(xgr_ir_repeat(g, a, 5, 2) < 0 && xgr_front_ir_status() == XGR_ERR_SEMANTIC,
          "bad repetition bounds: %d (%s)", xgr_front_ir_status(), xgr_last_error());
    const uint8_t *trig[1] = {(const uint8_t *)""};
    size_t trig_len[1] = {0};
    CHECK(xgr_ir_tag_dispatch(g, trig, trig_len, &r, 1, NULL, NULL, 0, 0) < 0 &&
              xgr_front_ir_status() == XGR_ERR_INVALID_ARG,
          "empty TagDispatch trigger: %d (%s)", xgr_front_ir_status(), xgr_last_error());
    xgr_grammar_release(g);
}

/* ---- fuzzing ---------------------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static const char *const CORPUS[] = {
    "root ::= \"a\" b | [x-z]* (= \"q\")\nb ::= \"\\u00e9\" b? | \"\"",
    "root ::= (\"a\" | \"b\"){2,5} Regex(\"[0-9]+(\\\\.[0-9]*)?\") b\"\\xff\" b[^\\x00-\\x7f]",
    "root ::= x\nx ::= [^\\]\\-\\\\] \"\\U0001F600\\t\" # c\n  | x x",
    "^(?:[a-z]+|\\d{1,3})\\.[\\w\\s-]*?\\u{41}$",
    "(a|b)*c+d?e{2}f{1,}g{1,2}[^\\W\\d].\\uD83D\\uDE00",
};
static const char *const TOKENS[] = {
    "root", " ::= ", "::=", "\"", "\"a\"", "\"\\", "\\x", "\\u", "\\U", "\\u{", "[", "]", "[^",
    "(", ")", "(=", "(?", "(?:", "(?<", "|", "*", "+", "?", "{", "}", ",", "1", "0", "9",
    "99999999999", "-", "^", "$", ".", "#", "\n", " ", "\r\n", "x", "b", "b\"", "b[", "Regex(",
    "TagDispatch(", "Substring(", "\\d", "\\", "\xc3\xa9", "\xff", "\xc3", "\0", "\\n", "\\0", "'", "=",
};

static int fuzz_ebnf_ok, fuzz_regex_ok;

static void fuzz_one(const char *s, size_t n) {
    xgr_grammar *g = NULL;
    if (xgr_grammar_from_ebnf(s, n, NULL, 0, &g) == XGR_OK) {
        fuzz_ebnf_ok++;
        xgr_free(roundtrip(g, "fuzzed ebnf"));
        xgr_grammar_release(g);
    } else {
        CHECK(g == NULL && xgr_last_error()[0], "failed parse leaves no output and a message");
    }
    g = NULL;
    if (xgr_grammar_from_regex(s, n, &g) == XGR_OK) {
        fuzz_regex_ok++;
        xgr_free(roundtrip(g, "fuzzed regex"));
        xgr_grammar_release(g);
    } else {
        CHECK(g == NULL && xgr_last_error()[0], "failed regex leaves no output and a message");
    }
}

/* Random text from a small alphabet, including escapes and multi-byte characters. */
static void gen_chars(xgr_strbuf *b, int in_class) {
    static const char *const pieces[] = {"a", "z", "0", " ", "\\\"", "\\\\", "\\n", "\\t",
                                         "\\x00", "\\x7f", "\\xe9", "\\u0085", "\\u00a0",
                                         "\\U0001F600", "\\uD83D\\uDE00", "\xc3\xa9",
                                         "\xe4\xb8\x96", "'", "/", "#", "(", "|", "{", "\\/"};
    static const char *const cls[] = {"\\]", "\\-", "\\^", "\\[", "\"", "a-z", "\\x00-\\x1f",
                                      "\\U0000D800", "\\u0100-\\U0010FFFF"};
    int n = (int)rnd(4);
    for (int i = 0; i < n; i++) {
        if (in_class && rnd(3) == 0)
            xgr_sb_puts(b, cls[rnd(sizeof cls / sizeof *cls)]);
        else
            xgr_sb_puts(b, pieces[rnd(sizeof pieces / sizeof *pieces)]);
    }
}

static void gen_expr(xgr_strbuf *b, int depth) {
    int n = (int)rnd(3) + 1;
    for (int i = 0; i < n; i++) {
        if (i) xgr_sb_puts(b, rnd(3) ? " " : (rnd(2) ? " | " : "\n  | "));
        switch (depth > 4 ? rnd(4) : rnd(6)) {
        case 0: xgr_sb_puts(b, rnd(6) ? "\"" : "b\""); gen_chars(b, 0); xgr_sb_puts(b, "\""); break;
        case 1: {
            int bytes = rnd(6) == 0;
            xgr_sb_puts(b, bytes ? "b[" : "[");
            if (rnd(3) == 0) xgr_sb_puts(b, "^");
            if (bytes)
                xgr_sb_puts(b, rnd(2) ? "a-z\\n" : "\\x80-\\xff\\]");
            else
                gen_chars(b, 1);
            xgr_sb_puts(b, "]");
            break;
        }
        case 2: xgr_sb_printf(b, "r%u", rnd(4)); break;
        case 3: xgr_sb_puts(b, "Regex(\"[a-c]+(x|y\\\\.)?\")"); break;
        default: xgr_sb_puts(b, "( "); gen_expr(b, depth + 1); xgr_sb_puts(b, " )"); break;
        }
        switch (rnd(10)) {
        case 0: xgr_sb_puts(b, "*"); break;
        case 1: xgr_sb_puts(b, "+"); break;
        case 2: xgr_sb_puts(b, "?"); break;
        case 3: xgr_sb_printf(b, "{%u}", rnd(5)); break;
        case 4: xgr_sb_printf(b, "{%u,}", rnd(5)); break;
        case 5: { unsigned lo = rnd(4); xgr_sb_printf(b, "{%u,%u}", lo, lo + rnd(4)); break; }
        default: break;
        }
    }
}

/* Random well-formed grammars must parse, round-trip, and keep their language. */
static void test_random_grammars(int iters) {
    for (int it = 0; it < iters; it++) {
        xgr_strbuf b = {0};
        int order[5] = {0, 1, 2, 3, 4};
        for (int i = 4; i > 0; i--) {
            int j = (int)rnd((uint32_t)i + 1), t = order[i];
            order[i] = order[j], order[j] = t;
        }
        for (int k = 0; k < 5; k++) {
            if (order[k] == 4) xgr_sb_puts(&b, "root"); else xgr_sb_printf(&b, "r%d", order[k]);
            xgr_sb_puts(&b, rnd(2) ? " ::= " : "::=\n ");
            gen_expr(&b, 0);
            if (rnd(5) == 0) {
                xgr_sb_puts(&b, " (= ");
                gen_expr(&b, 3);
                xgr_sb_puts(&b, ")");
            }
            xgr_sb_puts(&b, rnd(4) ? "\n" : " # comment\n");
        }
        xgr_grammar *g = ebnf(b.data);
        if (g) {
            xgr_free(roundtrip(g, b.data));
            xgr_grammar_release(g);
        }
        XGR_VEC_FREE(b);
    }
}

static void test_fuzz(int iters) {
    char buf[512];
    for (int it = 0; it < iters; it++) {
        size_t n = 0;
        switch (it % 3) {
        case 0: /* random bytes */
            n = rnd(80);
            for (size_t i = 0; i < n; i++) buf[i] = (char)rnd(256);
            break;
        case 1: /* token soup */
            while (n < 400) {
                const char *t = TOKENS[rnd(sizeof TOKENS / sizeof *TOKENS)];
                size_t tl = t[0] ? strlen(t) : 1;
                if (n + tl > 400 || rnd(40) == 0) break;
                memcpy(buf + n, t, tl);
                n += tl;
            }
            break;
        default: { /* mutated corpus entry */
            const char *c = CORPUS[rnd(sizeof CORPUS / sizeof *CORPUS)];
            n = strlen(c);
            memcpy(buf, c, n);
            for (int m = (int)rnd(4) + 1; m > 0; m--) {
                size_t at = n ? rnd((uint32_t)n) : 0;
                switch (rnd(3)) {
                case 0: if (n) buf[at] = (char)rnd(256); break;
                case 1:
                    if (n < sizeof buf - 1) {
                        memmove(buf + at + 1, buf + at, n - at);
                        buf[at] = "()[]{}|*+?\"\\-^$"[rnd(15)];
                        n++;
                    }
                    break;
                default:
                    if (n) {
                        memmove(buf + at, buf + at + 1, n - at - 1);
                        n--;
                    }
                }
            }
        }
        }
        fuzz_one(buf, n);
    }
    /* corpus entries themselves must be valid in their own language */
    for (size_t i = 0; i < 3; i++) {
        xgr_grammar *g = ebnf(CORPUS[i]);
        xgr_free(g ? roundtrip(g, CORPUS[i]) : NULL);
        xgr_grammar_release(g);
    }
    for (size_t i = 3; i < 5; i++) rx(CORPUS[i], NULL);
    CHECK(fuzz_ebnf_ok > 0 && fuzz_regex_ok > 0, "fuzzing never produced a valid input");
    printf("fuzz: %d inputs, %d valid EBNF, %d valid regex\n", iters, fuzz_ebnf_ok, fuzz_regex_ok);
}

/* ---- directly built tool-calling grammars (tag_links.c) ------------------------------- */

/* Builds from strings s[0..n) packed as xgr_grammar_triggered_links takes them. */
static int build_links(const char *const *s, size_t n, size_t n_tags, size_t n_excl, int loop,
                       xgr_grammar **out) {
    uint8_t data[512];
    uint32_t off[32];
    off[0] = 0;
    for (size_t k = 0; k < n; k++) {
        size_t len = strlen(s[k]);
        memcpy(data + off[k], s[k], len);
        off[k + 1] = off[k] + (uint32_t)len;
    }
    return xgr_grammar_triggered_links(data, off, n_tags, n_excl, loop, out);
}

static void test_triggered_links(void) {
    /* Two tags of one stand-in (the alternation keeps both: the caller deduplicates),
     * a tag whose begin is the whole trigger, one with no end, and an excluded string. */
    const char *s[] = {"<f=", "a>", "linked.0", "</f>", "", "linked.1", "</f>",
                       "b\"\n>", "linked.0", "", "<|eot|>"};
    xgr_grammar *g = NULL;
    CHECK(build_links(s, 11, 3, 1, 1, &g) == XGR_OK && g, "build: %s", xgr_last_error());
    char *txt = NULL;
    size_t len = 0;
    if (g && xgr_ir_print(g, &txt, &len) == XGR_OK) {
        const char *want = "root ::= triggered_tags\n"
                           "linked.0 ::= \"L\"\n"
                           "linked.1 ::= \"L\"\n"
                           "triggered_tags_group ::= \"a>\" linked.0 \"</f>\" | linked.1 \"</f>\" "
                           "| \"b\\\"\\n>\" linked.0\n"
                           "triggered_tags ::= TagDispatch(\n"
                           "  (\"<f=\", triggered_tags_group),\n"
                           "  loop_after_dispatch=true,\n"
                           "  excludes=(\"<|eot|>\")\n"
                           ")\n";
        CHECK(strcmp(txt, want) == 0, "printed:\n%s\nwanted:\n%s", txt, want);
        /* and the text parses back to the same grammar */
        xgr_grammar *h = NULL;
        char *txt2 = NULL;
        size_t len2 = 0;
        CHECK(xgr_grammar_from_ebnf(txt, len, "root", 4, &h) == XGR_OK &&
                  xgr_ir_print(h, &txt2, &len2) == XGR_OK && strcmp(txt, txt2) == 0,
              "reparse: %s", txt2 ? txt2 : xgr_last_error());
        free(txt2);
        xgr_grammar_release(h);
    }
    free(txt);
    xgr_grammar_release(g);
    /* one tag: the alternative is the rule body; stop after the first dispatch */
    const char *one[] = {"<f=", "a>", "linked.7", "</f>"};
    g = NULL;
    CHECK(build_links(one, 4, 1, 0, 0, &g) == XGR_OK, "one tag: %s", xgr_last_error());
    if (g && xgr_ir_print(g, &txt, &len) == XGR_OK) {
        CHECK(strstr(txt, "triggered_tags_group ::= \"a>\" linked.7 \"</f>\"\n") &&
                  strstr(txt, "loop_after_dispatch=false"),
              "one tag printed:\n%s", txt);
        free(txt);
    }
    xgr_grammar_release(g);
    /* refused: an empty trigger, a reserved or empty stand-in name, an empty exclude */
    const char *bad[][5] = {{"", "a>", "linked.0", "</f>", ""},
                            {"<f=", "a>", "root", "</f>", ""},
                            {"<f=", "a>", "triggered_tags_group", "</f>", ""},
                            {"<f=", "a>", "", "</f>", ""}};
    for (int k = 0; k < 4; k++) {
        g = NULL;
        CHECK(build_links(bad[k], 4, 1, 0, 1, &g) == XGR_ERR_INVALID_ARG && !g,
              "bad case %d accepted", k);
    }
    g = NULL;
    CHECK(build_links(bad[0] + 0, 0, 1, 0, 1, &g) == XGR_ERR_INVALID_ARG, "empty input accepted");
    const char *empty_excl[] = {"<f=", "a>", "linked.0", "</f>", ""};
    g = NULL;
    CHECK(build_links(empty_excl, 5, 1, 1, 1, &g) == XGR_ERR_INVALID_ARG && !g,
          "empty exclude accepted");
    uint8_t d[4] = {'<', 'a', 'b', 'c'};
    uint32_t dec[5] = {0, 2, 1, 3, 4};
    g = NULL;
    CHECK(xgr_grammar_triggered_links(d, dec, 1, 0, 1, &g) == XGR_ERR_INVALID_ARG && !g &&
              strstr(xgr_last_error(), "offsets decrease"),
          "decreasing offsets: %s", xgr_last_error());
    uint8_t nul[6] = {'<', 'a', 'x', 0, 'y', '>'};
    uint32_t no[5] = {0, 1, 2, 5, 6};
    g = NULL;
    CHECK(xgr_grammar_triggered_links(nul, no, 1, 0, 1, &g) == XGR_ERR_INVALID_ARG && !g,
          "a NUL in a stand-in name accepted");
}

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 6000;
    test_ebnf_valid();
    test_ebnf_lang();
    test_ebnf_errors();
    test_regex();
    test_regex_tree();
    test_json();
    test_ops();
    test_spell_tokens();
    test_handmade_ir();
    test_ir_builder_status();
    test_random_grammars(iters / 3);
    test_fuzz(iters);
    test_triggered_links();
    printf("test_front: %d checks, %d failed\n", n_checks, n_failed);
    return n_failed ? 1 : 0;
}
