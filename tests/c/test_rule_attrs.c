/* Rule attributes through the public C API: EBNF heads parse and print back in upstream's
 * form, bad heads fail with a located message, and a matcher reports temperature, keeps a
 * code-point budget across tokens, counts decoded JSON-string characters (max_json_chars),
 * ends a spent token budget where it can, records captures that rollback undoes,
 * leaves no dead end at a budget's end (a rule's remaining need is reserved), and refuses
 * an array element equal to an earlier one (uniqueItems: `unique` / `unique_scope`), and,
 * under `unique_search_scope`, a token after which every completion is a duplicate. */
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

static xgr_grammar *parse(const char *src) {
    xgr_grammar *g = NULL;
    if (xgr_grammar_from_ebnf(src, strlen(src), "", 0, &g)) return NULL;
    return g;
}

static void heads(void) {
    xgr_grammar *g = parse("root ::= v\nv[capture=\"x\",temperature=0.2,lazy,max_chars=3,"
                           "max_tokens=2] ::= \"a\"*");
    CHECK(g, "parse: %s", xgr_last_error());
    if (g) {
        char *t = NULL;
        size_t n = 0;
        CHECK(!xgr_grammar_to_ebnf(g, &t, &n), "print");
        CHECK(t && strstr(t, "v[max_tokens=2, max_chars=3, capture=\"x\", lazy, "
                             "temperature=0.200000003] ::="),
              "printed: %s", t ? t : "(null)");
        xgr_grammar *g2 = t ? parse(t) : NULL;
        char *t2 = NULL;
        CHECK(g2 && !xgr_grammar_to_ebnf(g2, &t2, &n) && strcmp(t, t2) == 0, "round trip");
        xgr_free(t);
        xgr_free(t2);
        xgr_grammar_release(g2);
        xgr_grammar_release(g);
    }
    static const char *bad[][2] = {
        {"root ::= v\nv[temperature=-1] ::= \"a\"", "finite non-negative"},
        {"root ::= v\nv[lazy, lazy] ::= \"a\"", "Assign should be preceded by an identifier"},
        {"root ::= v\nv[capture=\"\"] ::= \"a\"", "capture name must not be empty"},
        {"root ::= v\nv[max_chars=99999999999] ::= \"a\"", "at most 2147483647"},
        {"root ::= v\nv[] ::= \"a\"", "line 2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        xgr_grammar *b = parse(bad[i][0]);
        CHECK(!b && strstr(xgr_last_error(), bad[i][1]), "bad head %zu: %s", i, xgr_last_error());
        xgr_grammar_release(b);
    }
}

static xgr_vocab *vocab(const char *const *toks, int32_t n) {
    uint32_t off[32];
    char data[256];
    uint32_t pos = 0;
    for (int32_t i = 0; i < n; i++) {
        off[i] = pos;
        memcpy(data + pos, toks[i], strlen(toks[i]));
        pos += (uint32_t)strlen(toks[i]);
    }
    off[n] = pos;
    xgr_vocab *v = NULL;
    if (xgr_vocab_new((const uint8_t *)data, off, n, n, NULL, 0, NULL, 0, &v)) return NULL;
    return v;
}

static xgr_matcher *matcher(const char *src, xgr_vocab *v, xgr_compiled **c) {
    xgr_grammar *g = parse(src);
    xgr_matcher *m = NULL;
    *c = NULL;
    if (!g || xgr_compile(g, v, NULL, c) || xgr_matcher_new(*c, NULL, 0, 0, 1, -1, &m)) {
        CHECK(0, "setup '%s': %s", src, xgr_last_error());
        m = NULL;
    }
    xgr_grammar_release(g);
    return m;
}

static int32_t mask0(xgr_matcher *m) {
    int32_t row[1] = {0};
    CHECK(!xgr_matcher_fill_bitmask(m, row, 1, NULL), "fill: %s", xgr_last_error());
    return row[0];
}

static int accept(xgr_matcher *m, int32_t t) {
    int ok = 0;
    CHECK(!xgr_matcher_accept_token(m, t, &ok), "accept: %s", xgr_last_error());
    return ok;
}

static void runtime(void) {
    static const char *toks[] = {"a", "ab", "abc", ">", "\xe4\xb8\xad", "\xe4\xb8\xad\xe6\x96\x87", " "};
    xgr_vocab *v = vocab(toks, 7);
    CHECK(v, "vocab: %s", xgr_last_error());
    if (!v) return;
    xgr_compiled *c;
    /* a code-point budget of 2 across tokens: "ab" or one CJK pair fills it */
    xgr_matcher *m = matcher("root ::= r \">\"\nr[max_chars=2, temperature=0.5] ::= [^>]*", v, &c);
    if (m) {
        int has = 0, conflict = 1;
        float t = 0;
        CHECK(!xgr_matcher_temperature(m, &has, &t, &conflict) && has && t == 0.5f && !conflict,
              "temperature inside r");
        CHECK(mask0(m) == (1 | 2 | 8 | 16 | 32 | 64), "mask at start: %x", (unsigned)mask0(m));
        CHECK(accept(m, 4), "one CJK char");
        CHECK(mask0(m) == (1 | 8 | 16 | 64), "mask after one char: %x", (unsigned)mask0(m));
        CHECK(!accept(m, 5), "two more chars overrun");
        CHECK(accept(m, 0) && mask0(m) == 8, "budget spent: only '>'");
        CHECK(!xgr_matcher_rollback(m, 1) && mask0(m) == (1 | 8 | 16 | 64), "rollback restores");
        CHECK(accept(m, 0) && accept(m, 3) && xgr_matcher_is_terminated(m), "then '>' ends");
        CHECK(!xgr_matcher_temperature(m, &has, &t, &conflict) && !has, "no temperature after r");
        xgr_matcher_free(m);
    }
    xgr_compiled_release(c);
    /* a token budget: spent after two tokens, r ends where it can (after a space) */
    m = matcher("root ::= r \">\"\nr[max_tokens=2] ::= ([a-c]+ \" \")+", v, &c);
    if (m) {
        CHECK(accept(m, 1) && accept(m, 6), "two tokens");
        CHECK(mask0(m) == 8, "spent where r can end: only '>' (%x)", (unsigned)mask0(m));
        xgr_matcher_free(m);
    }
    xgr_compiled_release(c);
    m = matcher("root ::= r \">\"\nr[max_tokens=1] ::= ([a-c]+ \" \")+", v, &c);
    if (m) {
        CHECK(accept(m, 1), "one token");
        CHECK(mask0(m) == (1 | 2 | 4 | 64), "spent mid-word: relaxed until r can end (%x)",
              (unsigned)mask0(m));
        xgr_matcher_free(m);
    }
    xgr_compiled_release(c);
    /* captures, rolled back with the input */
    m = matcher("root ::= \"a\" v \">\"\nv[capture=\"val\"] ::= [b-c]+", v, &c);
    if (m) {
        CHECK(accept(m, 2), "abc");
        char *out = NULL;
        size_t n = 0;
        CHECK(!xgr_matcher_captures(m, 1, &out, &n), "captures");
        CHECK(n == 4 + 3 + 4 + 2 && out && memcmp(out + 4, "val", 3) == 0 &&
                  memcmp(out + 11, "bc", 2) == 0,
              "one capture 'val' = 'bc' (%zu bytes)", n);
        xgr_free(out);
        CHECK(!xgr_matcher_captures(m, 0, &out, &n) && n == 12 + 13, "raw: b, bc (%zu)", n);
        xgr_free(out);
        CHECK(!xgr_matcher_rollback(m, 1) && !xgr_matcher_captures(m, 1, &out, &n) && n == 0,
              "rollback drops them");
        xgr_free(out);
        xgr_matcher_free(m);
    }
    xgr_compiled_release(c);
    xgr_vocab_release(v);
}

/* Do m's captures (deduplicated) equal the n (label, value) pairs of ev? */
static int captures_are(xgr_matcher *m, const char *const *ev, size_t n) {
    char *out = NULL;
    size_t len = 0, at = 0;
    int ok = !xgr_matcher_captures(m, 1, &out, &len);
    for (size_t i = 0; ok && i < 2 * n; i++) {
        uint32_t l;
        ok = at + 4 <= len;
        if (!ok) break;
        memcpy(&l, out + at, 4);
        ok = l == strlen(ev[i]) && at + 4 + l <= len && memcmp(out + at + 4, ev[i], l) == 0;
        at += 4 + l;
    }
    xgr_free(out);
    return ok && at == len;
}

/* Lark suffix= / stop= markers (parse/captures.c): fixed and split by body/marker rules. */
static void hidden_markers(void) {
    const char *toks[] = {"x", "!", "z", "x!!"};
    xgr_vocab *v = vocab(toks, 4);
    CHECK(v, "vocab: %s", xgr_last_error());
    if (!v) return;
    xgr_compiled *c = NULL;
    xgr_matcher *m = matcher("root[capture=\"o\"] ::= r r \"z\"\n"
                             "r[capture=\"i\", capture_hidden_stop_bytes=1, stop_capture=\"m\", "
                             "lazy] ::= [a-z]* \"!\"",
                             v, &c);
    if (m) {
        CHECK(accept(m, 0) && accept(m, 1) && accept(m, 0) && accept(m, 0) && accept(m, 1) &&
                  accept(m, 2) && xgr_matcher_is_terminated(m),
              "x!xx!z");
        const char *ev[] = {"m", "!", "i", "x", "m", "!", "i", "xx", "o", "xxxz"};
        CHECK(captures_are(m, ev, 5), "stop markers left out of i and o, recorded as m");
        xgr_matcher_free(m);
    }
    xgr_compiled_release(c);
    const char *split = "root[capture=\"o\"] ::= r \"z\"\nbody ::= [a-z]*\nmark ::= \"!\" \"!\"+\n"
                        "r[capture=\"i\", capture_hidden_suffix_bytes=1, "
                        "capture_hidden_body_rule_id=body, capture_hidden_marker_rule_id=mark, "
                        "stop_capture=\"m\", lazy] ::= [a-z]* \"!\" \"!\"+";
    xgr_grammar *g = parse(split);
    char *t = NULL;
    size_t n = 0;
    CHECK(g && !xgr_grammar_to_ebnf(g, &t, &n) && t &&
              strstr(t, "capture_hidden_body_rule_id=1, capture_hidden_marker_rule_id=2"),
          "split rules printed by id: %s", t ? t : "");
    xgr_free(t);
    xgr_grammar_release(g);
    m = matcher(split, v, &c);
    if (m) {
        CHECK(accept(m, 3) && accept(m, 2) && xgr_matcher_is_terminated(m), "x!!z");
        const char *ev[] = {"m", "!!", "i", "x", "o", "x!!z"};
        CHECK(captures_are(m, ev, 3), "suffix split at the first body/marker split");
        CHECK(!xgr_matcher_rollback(m, 2) && captures_are(m, ev, 0), "rollback drops them");
        xgr_matcher_free(m);
    }
    xgr_compiled_release(c);
    xgr_vocab_release(v);
}

/* The forced close (ir.h forced_body): a stop rule with a token budget and split rules ends
 * where its body can once the budget is spent, without the marker or a stop_capture event;
 * the marker path is kept before that, and rollback crosses the close. */
static void forced_close(void) {
    const char *toks[] = {"a", "b", "!", ">", "a!"};
    xgr_vocab *v = vocab(toks, 5);
    CHECK(v, "vocab: %s", xgr_last_error());
    if (!v) return;
    xgr_compiled *c = NULL;
    xgr_matcher *m = matcher("root[capture=\"o\"] ::= r \">\"\nbody ::= [ab]*\nmark ::= \"!\"\n"
                             "r[max_tokens=2, capture=\"i\", capture_hidden_stop_bytes=1, "
                             "capture_hidden_body_rule_id=body, capture_hidden_marker_rule_id=mark, "
                             "stop_capture=\"m\", lazy] ::= [ab]* \"!\"",
                             v, &c);
    if (m) {
        CHECK(accept(m, 0) && accept(m, 1), "ab: the budget is spent");
        CHECK(mask0(m) == 8, "closed without the marker: only '>' (%x)", (unsigned)mask0(m));
        CHECK(!accept(m, 2) && mask0(m) == 8, "the marker is refused, nothing committed");
        CHECK(accept(m, 3) && xgr_matcher_is_terminated(m), "ab>");
        const char *forced[] = {"i", "ab", "o", "ab>"};
        CHECK(captures_are(m, forced, 2), "forced: the body whole, no marker event");
        CHECK(!xgr_matcher_rollback(m, 3), "rollback across the close");
        CHECK(accept(m, 4) && accept(m, 3) && xgr_matcher_is_terminated(m), "a!>");
        const char *marked[] = {"m", "!", "i", "a", "o", "a>"};
        CHECK(captures_are(m, marked, 3), "marker first: the marker recorded and hidden");
        xgr_matcher_free(m);
    }
    xgr_compiled_release(c);
    xgr_vocab_release(v);
}

/* max_json_chars: a budget in decoded JSON-string characters (parse/attrs.h). An escape is
 * one character, a surrogate-pair escape one code point (the counts are Python's
 * len(json.loads(text))); masks at the deadline keep exactly the tokens that can still
 * finish (the low half of a pair after a high one); rollback and fork keep the count. */
static const char *const JSON_BUDGET =
    "root ::= \"\\\"\" s \"\\\"\"\ns[max_json_chars=3] ::= c*\n"
    "c ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" [\"\\\\/bfnrt] | \"\\\\u\" h h h h\nh ::= [0-9a-fA-F]";

static int accepts_text(xgr_compiled *c, const char *body) {
    xgr_matcher *m = NULL;
    int ok = 0;
    char buf[128];
    snprintf(buf, sizeof buf, "\"%s\"", body);
    if (xgr_matcher_new(c, NULL, 0, 0, 1, -1, &m)) return -1;
    if (xgr_matcher_accept_bytes(m, (const uint8_t *)buf, strlen(buf), &ok)) ok = -1;
    if (ok == 1) ok = xgr_matcher_is_terminated(m);
    xgr_matcher_free(m);
    return ok;
}

static void json_chars(void) {
    xgr_grammar *g = parse("root ::= v\nv[max_json_chars=7, max_chars=9] ::= \"a\"*");
    char *t = NULL;
    size_t tl = 0;
    CHECK(g && !xgr_grammar_to_ebnf(g, &t, &tl) &&
              strstr(t, "v[max_chars=9, max_json_chars=7] ::="),
          "max_json_chars prints back: %s", t ? t : xgr_last_error());
    xgr_free(t);
    xgr_grammar_release(g);
    g = parse("root ::= v\nv[max_json_chars=99999999999] ::= \"a\"");
    CHECK(!g && strstr(xgr_last_error(), "at most 2147483647"), "too large: %s", xgr_last_error());
    g = parse("root ::= v\nv[max_json_chars=1, max_json_chars=2] ::= \"a\"");
    CHECK(!g && strstr(xgr_last_error(), "Assign should be preceded"), "twice: %s",
          xgr_last_error());

    static const char *toks[] = {"\"", "\\", "u", "d", "e", "0", "\\ude00", "\\n", "a",
                                 "\\ud83d", "\\u0041", "8", "\\ud83d\\ude00", "\xc3\xa9"};
    xgr_vocab *v = vocab(toks, 14);
    CHECK(v, "vocab: %s", xgr_last_error());
    if (!v) return;
    xgr_compiled *c = NULL;
    xgr_matcher *m = matcher(JSON_BUDGET, v, &c);
    static const struct {
        const char *body;
        int ok;
    } texts[] = {
        {"abc", 1}, {"abcd", 0},
        {"\\n\\t\\u00e9", 1}, {"\\n\\t\\u00e9a", 0},
        {"\\ud83d\\ude00ab", 1}, {"\\ud83d\\ude00abc", 0},
        {"\\ud83d\\ude00\\ud83d\\ude00\\ud83d\\ude00", 1},
        {"\\ud83d\\ude00\\ud83d\\ude00\\ud83d\\ude00\\ud83d\\ude00", 0},
        {"\\ud83d\\ud83d\\ude00a", 1}, {"\\ud83d\\ud83d\\ude00ab", 0}, /* a lone high one */
        {"\\ude00\\ude00\\ude00", 1}, {"\\ude00\\ude00\\ude00\\ude00", 0}, /* lone low ones */
        {"\\ud83d\\u0041\\u0042", 1}, {"\\ud83d\\u0041\\u0042a", 0},
        {"\\uD83D\\uDE00\\uDBFF\\uDFFF\\\\", 1}, {"\\uD83D\\uDE00\\uDBFF\\uDFFF\\\\\\\"", 0},
        {"\\ud83d\\n\\n", 1}, {"\\ud83d\\n\\n\\n", 0},
        {"\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80", 1},
        {"\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80" "a", 0},
        {"\\\"\\\\\\/", 1}, {"\\\"\\\\\\/\\b", 0},
        {"\\ud800\\udc00\\udbff", 1}, {"\\ud800\\udc00\\udbff\\udfff\\udfff", 1},
    };
    for (size_t i = 0; c && i < sizeof texts / sizeof *texts; i++)
        CHECK(accepts_text(c, texts[i].body) == texts[i].ok, "json chars: \"%s\" should be %s",
              texts[i].body, texts[i].ok ? "accepted" : "refused");
    if (m) {
        int32_t all = (1 << 14) - 1, at_high = 1 | 2 | 64, ok = 0;
        int32_t bf[1] = {0};
        CHECK(accept(m, 0) && accept(m, 8) && accept(m, 8), "\"aa");
        CHECK(mask0(m) == all, "one character left: every token (%x)", (unsigned)mask0(m));
        CHECK(accept(m, 9), "\"aa\\ud83d: the budget is spent but for a pair's low half");
        CHECK(mask0(m) == at_high, "at the deadline after a high surrogate: '\"', '\\', the low "
              "half (%x)", (unsigned)mask0(m));
        CHECK(!xgr_matcher_fill_bitmask_bruteforce(m, bf, 1) && bf[0] == at_high,
              "brute force agrees (%x)", (unsigned)bf[0]);
        CHECK(accept(m, 1) && mask0(m) == 4, "after \\: only u (%x)", (unsigned)mask0(m));
        CHECK(accept(m, 2) && mask0(m) == 8, "after \\u: only d (%x)", (unsigned)mask0(m));
        CHECK(accept(m, 3) && mask0(m) == (8 | 16), "after \\ud: d or e, the low half (%x)",
              (unsigned)mask0(m));
        CHECK(accept(m, 4) && mask0(m) == (8 | 16 | 32 | 256 | 2048), "then any hex digit (%x)",
              (unsigned)mask0(m));
        CHECK(!xgr_matcher_rollback(m, 4) && mask0(m) == at_high, "rollback to the high half");
        xgr_matcher *f = NULL;
        CHECK(!xgr_matcher_fork(m, &f) && f, "fork");
        if (f) {
            CHECK(mask0(f) == at_high, "the fork keeps the count (%x)", (unsigned)mask0(f));
            CHECK(!accept(f, 7) && !accept(f, 10) && !accept(f, 8), "no other character fits");
            CHECK(accept(f, 6) && mask0(f) == 1, "the low half: only '\"' (%x)",
                  (unsigned)mask0(f));
            CHECK(accept(f, 0) && xgr_matcher_is_terminated(f), "closed");
            xgr_matcher_free(f);
        }
        CHECK(!xgr_matcher_rollback(m, 1) && mask0(m) == all, "rollback over the high half");
        CHECK(accept(m, 12) && mask0(m) == 1, "a pair in one token is one character");
        CHECK(!xgr_matcher_accept_bytes(m, (const uint8_t *)"\"", 1, &ok) && ok &&
                  xgr_matcher_is_terminated(m), "closed");
        xgr_matcher_free(m);
    }
    xgr_compiled_release(c);
    xgr_vocab_release(v);
}

/* A hard character budget leaves no dead end: an item dies once what its rule (and the
 * rules above it, up to the budget) still needs no longer fits (parse/need.h). Oracle: the
 * same grammar without the budget, its texts cut to those whose body has at most N
 * characters (every unit below is one character, code point or decoded), enumerated up
 * to N units; at every prefix of such a text, the mask (and the brute-force mask) must be
 * exactly the tokens after which some such text still starts. Each grammar is compiled
 * with rules inlined and with none (so sub-rules need their reserve). */
typedef struct {
    const char *rules; /* "%s": the attribute head of `body` */
    const char *unit[5];
    const char *extra[6]; /* more tokens: several units, part of one */
    int n;                /* the budget */
} dead_case;

typedef struct {
    char text[1024][80];
    int n_text;
    const char *tok[24];
    int n_tok;
    xgr_compiled *c;
    int nodes;
} dead_walk;

static int starts_text(const dead_walk *w, const char *pre, size_t len) {
    for (int i = 0; i < w->n_text; i++)
        if (strlen(w->text[i]) >= len && !memcmp(w->text[i], pre, len)) return 1;
    return 0;
}

static void dead_visit(dead_walk *w, xgr_matcher *m, char *pre, size_t len, const char *what) {
    w->nodes++;
    int32_t expect = 0, row[1] = {0}, bf[1] = {0};
    for (int t = 0; t < w->n_tok; t++) {
        size_t tl = strlen(w->tok[t]);
        if (len + tl >= 80) continue;
        memcpy(pre + len, w->tok[t], tl);
        if (starts_text(w, pre, len + tl)) expect |= 1 << t;
    }
    pre[len] = 0;
    if (!expect) return; /* a whole text: closed */
    CHECK(!xgr_matcher_fill_bitmask(m, row, 1, NULL), "fill: %s", xgr_last_error());
    CHECK(!xgr_matcher_fill_bitmask_bruteforce(m, bf, 1), "brute: %s", xgr_last_error());
    CHECK(row[0] == expect && bf[0] == expect, "%s after '%s': mask %x, brute force %x, "
          "expected %x", what, pre, (unsigned)row[0], (unsigned)bf[0], (unsigned)expect);
    for (int t = 0; t < w->n_tok; t++) {
        if (!(expect >> t & 1)) continue;
        size_t tl = strlen(w->tok[t]);
        memcpy(pre + len, w->tok[t], tl);
        if (accept(m, t)) {
            dead_visit(w, m, pre, len + tl, what);
            CHECK(!xgr_matcher_rollback(m, 1), "rollback: %s", xgr_last_error());
        }
        pre[len] = 0;
    }
}

static void dead_case_run(const dead_case *dc, const char *unit_attr) {
    char src[512], head[64];
    dead_walk *w = calloc(1, sizeof *w);
    if (!w) return;
    int nu = 0, ne = 0;
    while (nu < 5 && dc->unit[nu]) nu++;
    while (ne < 6 && dc->extra[ne]) ne++;
    w->tok[w->n_tok++] = "\"";
    for (int i = 0; i < nu; i++) w->tok[w->n_tok++] = dc->unit[i];
    for (int i = 0; i < ne; i++) w->tok[w->n_tok++] = dc->extra[i];
    xgr_vocab *v = vocab(w->tok, w->n_tok);
    snprintf(src, sizeof src, dc->rules, "");
    xgr_grammar *g0 = parse(src);
    xgr_compiled *c0 = NULL;
    CHECK(v && g0 && !xgr_compile(g0, v, NULL, &c0), "oracle '%s': %s", src, xgr_last_error());
    /* the texts: bodies of 1..n units the unbudgeted grammar accepts */
    int idx[16] = {0};
    for (int k = 1; c0 && k <= dc->n; k++) {
        memset(idx, 0, sizeof idx);
        for (;;) {
            char body[80] = "\"";
            for (int i = 0; i < k; i++) strcat(body, dc->unit[idx[i]]);
            strcat(body, "\"");
            xgr_matcher *m = NULL;
            int ok = 0;
            if (!xgr_matcher_new(c0, NULL, 0, 0, 1, -1, &m) &&
                !xgr_matcher_accept_bytes(m, (const uint8_t *)body, strlen(body), &ok) && ok &&
                xgr_matcher_is_terminated(m) && w->n_text < 1024)
                strcpy(w->text[w->n_text++], body);
            xgr_matcher_free(m);
            int i = k - 1;
            while (i >= 0 && ++idx[i] == nu) idx[i--] = 0;
            if (i < 0) break;
        }
    }
    CHECK(w->n_text > 0 && w->n_text < 1024, "texts: %d", w->n_text);
    snprintf(head, sizeof head, "[%s=%d]", unit_attr, dc->n);
    snprintf(src, sizeof src, dc->rules, head);
    xgr_grammar *g = parse(src);
    for (int inl = 0; g && c0 && inl < 2; inl++) {
        xgr_compile_options o;
        memset(&o, 0, sizeof o);
        o.inline_max_states = inl ? -1 : 0;
        xgr_compiled *c = NULL;
        xgr_matcher *m = NULL;
        if (xgr_compile(g, v, &o, &c) || xgr_matcher_new(c, NULL, 0, 0, 1, -1, &m)) {
            CHECK(0, "compile '%s': %s", src, xgr_last_error());
        } else {
            char pre[96] = "";
            char what[600];
            snprintf(what, sizeof what, "%s (%s)", src, inl ? "no inlining" : "inlined");
            dead_visit(w, m, pre, 0, what);
        }
        xgr_matcher_free(m);
        xgr_compiled_release(c);
    }
    CHECK(w->nodes > 10, "walked %d prefixes", w->nodes);
    xgr_grammar_release(g);
    xgr_grammar_release(g0);
    xgr_compiled_release(c0);
    xgr_vocab_release(v);
    free(w);
}

static void no_dead_ends(void) {
    static const dead_case cases[] = {
        /* a suffix after a repetition; a two-byte character counts once */
        {"root ::= \"\\\"\" body \"\\\"\"\nbody%s ::= [a-z\xc3\xa9]+ \"@\" [a-z]+",
         {"a", "\xc3\xa9", "@"}, {"a@", "@a", "a\"", "\xc3", "aa"}, 4},
        /* sub-rules: the local part needs room for "@" and a dotted domain */
        {"root ::= \"\\\"\" body \"\\\"\"\nbody%s ::= loc \"@\" dom\nloc ::= [a-z] loc | [a-z]\n"
         "dom ::= lab \".\" lab\nlab ::= [a-z] lab | [a-z]",
         {"a", "@", "."}, {"a@", "a.", ".a", "a\""}, 6},
        /* recursion: each "(" needs its ")" and the "@" */
        {"root ::= \"\\\"\" body \"\\\"\"\nbody%s ::= p \"@\"\np ::= \"a\" | \"(\" p \")\"",
         {"a", "(", ")", "@"}, {"((", "))", ")@", "@\""}, 6},
        /* a budget inside a budget */
        {"root ::= \"\\\"\" body \"\\\"\"\nbody%s ::= in \"@\" in\nin[max_chars=2] ::= [a-z]+",
         {"a", "@"}, {"aa", "a@", "@a", "aaa"}, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        dead_case_run(&cases[i], "max_chars");
        dead_case_run(&cases[i], "max_json_chars");
    }
    /* escapes: one decoded character each, a surrogate pair one too; a token may stop
     * inside an escape */
    static const dead_case esc = {
        "root ::= \"\\\"\" body \"\\\"\"\nbody%s ::= c+ \"@\" c+\n"
        "c ::= [a-z] | \"\\\\\" [n\\\"] | \"\\\\u\" h h h h\nh ::= [0-9a-fA-F]",
        {"a", "@", "\\n", "\\u0041", "\\ud83d\\ude00"}, {"\\", "\\u", "\\n@", "a\\", "@\\"}, 4};
    dead_case_run(&esc, "max_json_chars");
    /* a sub-rule that ends inside an escape: after `bs` the escape's letter counts nothing
     * (need.c exits: the escape states a rule may end in) */
    static const dead_case esc_split = {
        "root ::= \"\\\"\" body \"\\\"\"\nbody%s ::= (bs tail | \"a\")+ \"@\" \"a\"\n"
        "bs ::= \"\\\\\"\ntail ::= \"n\" | \"u0041\"",
        {"a", "@", "\\n", "\\u0041"}, {"\\", "a\\", "n@", "\\u", "@a"}, 4};
    dead_case_run(&esc_split, "max_json_chars");
}

/* ---- uniqueItems: the oracle is a hand-written prefix check of the same language -------- */

static const char *const UQ_GRAMMAR =
    "root ::= arr\narr[unique_scope] ::= \"[\" (el (\",\" el)*)? \"]\"\n"
    "el[unique] ::= \"\\\"\" c* \"\\\"\"\nc ::= [ab] | \"\\\\u0061\"";
static const char *const UQ_TOKS[] = {"[", "]", "\"", "a", "b", ",", "\"a\"", "\",\"", "\\u0061",
                                      "a\"", "\"]", "\"a\",\"a\"", "\\u00", "61\""};
#define UQ_NTOK ((int32_t)(sizeof UQ_TOKS / sizeof *UQ_TOKS))
#define UQ_MAXLEN 12

/* Is s[0 .. n) a prefix of an array of pairwise different strings over [ab] ("a" also
 * spelled \u0061), without spaces? Inside a string infinitely many values remain. */
static int uq_viable(const char *s, size_t n) {
    char items[UQ_MAXLEN + 8][UQ_MAXLEN + 8], cur[UQ_MAXLEN + 8];
    int ni = 0, cl = 0, st = 0; /* 0 '[' 1 '"' or ']' 2 string 3 ',' or ']' 4 '"' 5 end */
    for (size_t i = 0; i < n;) {
        char ch = s[i];
        if (st == 0 && ch == '[') st = 1, i++;
        else if ((st == 1 || st == 3) && ch == ']') st = 5, i++;
        else if ((st == 1 || st == 4) && ch == '"') st = 2, cl = 0, i++;
        else if (st == 3 && ch == ',') st = 4, i++;
        else if (st == 2 && (ch == 'a' || ch == 'b')) cur[cl++] = ch, i++;
        else if (st == 2 && ch == '\\') {
            const char *e = "\\u0061";
            size_t k = 0;
            for (; k < 6 && i + k < n; k++)
                if (s[i + k] != e[k]) return 0;
            if (k < 6) return 1; /* inside the escape */
            cur[cl++] = 'a';
            i += 6;
        } else if (st == 2 && ch == '"') {
            cur[cl] = 0;
            for (int j = 0; j < ni; j++)
                if (!strcmp(items[j], cur)) return 0;
            strcpy(items[ni++], cur);
            st = 3, i++;
        } else {
            return 0;
        }
    }
    return 1;
}

static void uq_visit(xgr_matcher *m, char *pre, size_t len, int *nodes) {
    ++*nodes;
    int32_t expect = 0, row[1] = {0}, bf[1] = {0};
    for (int32_t t = 0; t < UQ_NTOK; t++) {
        size_t tl = strlen(UQ_TOKS[t]);
        memcpy(pre + len, UQ_TOKS[t], tl);
        if (uq_viable(pre, len + tl)) expect |= 1 << t;
    }
    pre[len] = 0;
    CHECK(!xgr_matcher_fill_bitmask(m, row, 1, NULL), "fill: %s", xgr_last_error());
    CHECK(!xgr_matcher_fill_bitmask_bruteforce(m, bf, 1), "brute: %s", xgr_last_error());
    CHECK(row[0] == expect && bf[0] == expect,
          "unique after '%s': mask %x, brute force %x, expected %x", pre, (unsigned)row[0],
          (unsigned)bf[0], (unsigned)expect);
    for (int32_t t = 0; t < UQ_NTOK; t++) {
        size_t tl = strlen(UQ_TOKS[t]);
        if (len + tl > UQ_MAXLEN) continue;
        memcpy(pre + len, UQ_TOKS[t], tl);
        int ok = accept(m, t);
        CHECK(ok == (expect >> t & 1), "unique: accepting '%s' after '%.*s' gives %d", UQ_TOKS[t],
              (int)len, pre, ok);
        if (ok) {
            uq_visit(m, pre, len + tl, nodes);
            CHECK(!xgr_matcher_rollback(m, 1), "rollback: %s", xgr_last_error());
        }
        pre[len] = 0;
    }
}

static int uq_bytes(xgr_matcher *m, const char *s) {
    int ok = 0;
    if (xgr_matcher_accept_bytes(m, (const uint8_t *)s, strlen(s), &ok)) return -1;
    return ok;
}

static void unique_items(void) {
    xgr_grammar *g = parse(UQ_GRAMMAR);
    char *text = NULL;
    size_t tl = 0;
    CHECK(g && !xgr_grammar_to_ebnf(g, &text, &tl) && strstr(text, "arr[unique_scope] ::=") &&
              strstr(text, "el[unique] ::="),
          "unique heads print back: %s", text ? text : xgr_last_error());
    free(text);
    xgr_grammar_release(g);
    CHECK(!parse("root[unique, unique_scope] ::= \"a\""), "two unique kinds on one rule");
    xgr_vocab *v = vocab(UQ_TOKS, UQ_NTOK);
    xgr_compiled *c = NULL;
    xgr_matcher *m = v ? matcher(UQ_GRAMMAR, v, &c) : NULL;
    if (!m) {
        CHECK(0, "unique setup");
        xgr_vocab_release(v);
        return;
    }
    char pre[UQ_MAXLEN + 16] = {0};
    int nodes = 0;
    uq_visit(m, pre, 0, &nodes);
    CHECK(nodes > 1000, "unique: only %d prefixes visited", nodes);
    /* a fork keeps the earlier elements; each copy goes on alone */
    xgr_matcher *f = NULL;
    CHECK(uq_bytes(m, "[\"ab\",\"b") == 1, "prefix");
    CHECK(!xgr_matcher_fork(m, &f) && f, "fork: %s", xgr_last_error());
    if (f) {
        CHECK(uq_bytes(f, "\",\"ab\"") == 0, "fork: a repeated element is refused");
        CHECK(uq_bytes(f, "\",\"\\u0061b\"]") == 0, "fork: an escaped repeat is refused");
        CHECK(uq_bytes(f, "\",\"a\"]") == 1 && xgr_matcher_is_terminated(f),
              "fork: a new element ends the array");
        xgr_matcher_free(f);
    }
    CHECK(uq_bytes(m, "\"]") == 1, "the original goes on");
    xgr_matcher_free(m);
    xgr_compiled_release(c);
    /* an element that may go on past a refused value ("1" may become "12") */
    m = matcher("root ::= arr\narr[unique_scope] ::= \"[\" (el (\",\" el)*)? \"]\"\n"
                "el[unique] ::= \"0\" | [1-9] [0-9]*",
                v, &c);
    if (m) {
        CHECK(uq_bytes(m, "[1,0,1") == 1, "a repeated number's prefix lives on");
        CHECK(uq_bytes(m, ",") == 0 && uq_bytes(m, "]") == 0, "a repeated number ends nothing");
        CHECK(uq_bytes(m, "0,0") == 0, "a repeated 0 is refused");
        CHECK(uq_bytes(m, "0,2]") == 1 && xgr_matcher_is_terminated(m), "10 and 2 are new");
    }
    xgr_matcher_free(m);
    xgr_compiled_release(c);
    xgr_vocab_release(v);
}

/* ---- uniqueItems over elements that run out: the search (parse/unique_search.h) -------- */
static const char *const US_TOKS[] = {"[", "]", ",", "{", "}", "\"k\":", "1", "2", "{\"k\":1}",
                                      "{\"k\":2}", "1.0", " ", "{\"k\":1.0}", "{\"k\":2},"};
enum { US_N = sizeof US_TOKS / sizeof *US_TOKS };

static int32_t us_id(const char *t) {
    for (int32_t i = 0; i < US_N; i++)
        if (strcmp(US_TOKS[i], t) == 0) return i;
    return -1;
}

static int us_allowed(xgr_matcher *m, const char *t) { return (int)((uint32_t)mask0(m) >> us_id(t) & 1u); }

static void search_items(void) {
    xgr_vocab *v = vocab(US_TOKS, US_N);
    xgr_compiled *c = NULL;
    /* two values, {"k":1} and {"k":2} (1.0 is 1): after both, no element is left */
    xgr_matcher *m = matcher("root ::= arr\narr[unique_search_scope] ::= \"[\" (el (\",\" el)*)? \"]\"\n"
                             "el[unique] ::= \"{\" \"\\\"k\\\":\" n \"}\"\nn ::= \"1\" (\".0\")? | \"2\"",
                             v, &c);
    CHECK(m, "search setup: %s", xgr_last_error());
    if (!m) {
        xgr_vocab_release(v);
        return;
    }
    CHECK(us_allowed(m, "[") && !us_allowed(m, "{"), "search: start");
    CHECK(uq_bytes(m, "[{\"k\":1},") == 1, "search: first element");
    CHECK(us_allowed(m, "{\"k\":2}") && !us_allowed(m, "{\"k\":1}") && !us_allowed(m, "{\"k\":1.0}") &&
              us_allowed(m, "{") && us_allowed(m, "{\"k\":2},") == 0,
          "search: only the fresh element (mask %x)", (unsigned)mask0(m));
    CHECK(accept(m, us_id("{")) && accept(m, us_id("\"k\":")), "search: inside the second element");
    CHECK(us_allowed(m, "2") && !us_allowed(m, "1") && !us_allowed(m, "1.0"), "search: 1 and 1.0 are used");
    /* taken without a mask (speculative decoding): a token or text after which every
     * completion is a duplicate is refused as the mask refuses it, and leaves no trace */
    CHECK(!accept(m, us_id("1")) && !accept(m, us_id("1.0")), "search: accept_token refuses a dead end");
    CHECK(uq_bytes(m, "1") == 0 && uq_bytes(m, "1.") == 0, "search: accept_bytes refuses a dead end");
    CHECK(us_allowed(m, "2") && !us_allowed(m, "1"), "search: a refused accept leaves the state");
    CHECK(accept(m, us_id("2")) && accept(m, us_id("}")), "search: the second element");
    CHECK(us_allowed(m, "]") && !us_allowed(m, ","), "search: no third element (mask %x)", (unsigned)mask0(m));
    xgr_matcher *f = NULL;
    CHECK(!xgr_matcher_fork(m, &f) && f, "search: fork");
    if (f) {
        CHECK(!us_allowed(f, ","), "search: the fork knows the elements");
        xgr_matcher_free(f);
    }
    CHECK(!xgr_matcher_rollback(m, 2), "search: rollback");
    CHECK(us_allowed(m, "2") && !us_allowed(m, "1"), "search: after rollback");
    xgr_matcher_free(m);
    xgr_compiled_release(c);
    xgr_vocab_release(v);
}

int main(void) {
    heads();
    unique_items();
    search_items();
    runtime();
    hidden_markers();
    forced_close();
    json_chars();
    no_dead_ends();
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("ok test_rule_attrs\n");
    return 0;
}
