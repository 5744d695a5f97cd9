/* Tests for compiled-grammar images (csrc/compile/image.c), the on-disk compile cache's
 * core part: an image loads back to a compiled grammar with the original's masks along
 * random walks (and the brute-force oracle's), images itself back to the same bytes, and
 * every truncation, every single-byte change and a foreign version are refused or (a
 * change that leaves a well-formed automaton) loaded without reading out of bounds.
 *
 * Build and run (from the repository root), as tests/c/run_sanitized.sh does:
 *   gcc -std=c11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -Wall -Wextra \
 *       -Werror -pedantic-errors -pthread -Icsrc/include tests/c/test_image.c \
 *       $(find csrc -name '*.c' | sort) -o /tmp/test_image -lm && /tmp/test_image */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../csrc/include/xgr2.h"

static int n_fail = 0, n_check = 0;
#define CHECK(cond)                                                                    \
    do {                                                                               \
        n_check++;                                                                     \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
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

static const char *const pieces[] = {"a", "b", "c", "x", "y", "ab", "{", "}", "[", "]", "\"",
                                     ":", ",", " ", "0", "1", "9", "-", "true", "null", "<f=",
                                     ">", "</f>", "\xc3\xa9", "\xff"};
#define NP ((int32_t)(sizeof pieces / sizeof *pieces))
#define NV (NP + 2) /* + a special token and a stop token */
#define WORDS ((NV + 31) / 32)

static xgr_vocab *vocab(void) {
    uint8_t data[256];
    uint32_t off[NV + 1], pos = 0;
    for (int32_t i = 0; i < NV; i++) {
        off[i] = pos;
        if (i < NP) {
            size_t l = strlen(pieces[i]);
            memcpy(data + pos, pieces[i], l);
            pos += (uint32_t)l;
        }
    }
    off[NV] = pos;
    int32_t special = NP, stop = NP + 1;
    xgr_vocab *v = NULL;
    CHECK(xgr_vocab_new(data, off, NV, NV, &special, 1, &stop, 1, &v) == XGR_OK);
    return v;
}

static const char *const grammars[] = {
    "root ::= \"{\" (\"\\\"\" [a-c]* \"\\\"\" \":\" num (\",\" \"\\\"\" [a-c]* \"\\\"\" \":\" num)*)? \"}\"\n"
    "num ::= \"-\"? [0-9]+\n",
    "root ::= (\"ab\" | \"c\" root \"x\")* \"y\"\n",
    "root ::= item{2,40}\nitem ::= \"a\" | \"b\" \"c\"?\n",
    "root ::= TagDispatch((\"<f=\", f), loop_after_dispatch=true)\nf ::= [a-c]+ \">\" [0-9]* \"</f>\"\n",
    "root ::= \"a\" Token(3) (\"x\" | Token(5))* \"y\"\n",
    "root ::= e\ne ::= t (\"+\" t)*\nt ::= \"x\" | \"[\" e \"]\"\n",
};
#define NG ((int)(sizeof grammars / sizeof *grammars))

/* Masks of a and b agree (and agree with the oracle) along a random walk. */
static void same_walk(xgr_compiled *a, xgr_compiled *b) {
    xgr_matcher *ma = NULL, *mb = NULL;
    CHECK(xgr_matcher_new(a, NULL, 0, 0, 0, -1, &ma) == XGR_OK);
    CHECK(xgr_matcher_new(b, NULL, 0, 0, 0, -1, &mb) == XGR_OK);
    if (!ma || !mb) goto out;
    for (int step = 0; step < 40; step++) {
        int32_t ra[WORDS], rb[WORDS], ro[WORDS];
        int need;
        if (xgr_matcher_fill_bitmask(ma, ra, WORDS, &need) != XGR_OK) break;
        CHECK(xgr_matcher_fill_bitmask(mb, rb, WORDS, &need) == XGR_OK);
        CHECK(xgr_matcher_fill_bitmask_bruteforce(mb, ro, WORDS) == XGR_OK);
        CHECK(memcmp(ra, rb, sizeof ra) == 0);
        CHECK(memcmp(rb, ro, sizeof rb) == 0);
        int32_t allowed[NV], n = 0;
        for (int32_t t = 0; t < NV; t++)
            if ((ra[t / 32] >> (t % 32)) & 1 && t != NP + 1) allowed[n++] = t;
        if (!n) break;
        int32_t t = allowed[rnd((uint32_t)n)];
        int acc_a = 0, acc_b = 0;
        CHECK(xgr_matcher_accept_token(ma, t, &acc_a) == XGR_OK && acc_a);
        CHECK(xgr_matcher_accept_token(mb, t, &acc_b) == XGR_OK && acc_b);
    }
out:
    xgr_matcher_free(ma);
    xgr_matcher_free(mb);
}

/* Loads img (must not crash); when it loads, runs a short walk on it. */
static int try_load(const uint8_t *img, size_t len, xgr_vocab *v) {
    xgr_compiled *c = NULL;
    if (xgr_compiled_from_image(img, len, v, NULL, &c) != XGR_OK) {
        CHECK(strstr(xgr_last_error(), "image") != NULL || xgr_last_error()[0] != 0);
        return 0;
    }
    xgr_matcher *m = NULL;
    if (xgr_matcher_new(c, NULL, 0, 0, 0, -1, &m) == XGR_OK) {
        for (int step = 0; step < 6; step++) {
            int32_t row[WORDS];
            int need, acc;
            if (xgr_matcher_fill_bitmask(m, row, WORDS, &need) != XGR_OK) break;
            xgr_matcher_accept_token(m, (int32_t)rnd(NV), &acc);
        }
        xgr_matcher_free(m);
    }
    xgr_compiled_release(c);
    return 1;
}

static void test_images(void) {
    xgr_vocab *v = vocab();
    for (int i = 0; i < NG; i++) {
        xgr_grammar *g = NULL;
        CHECK(xgr_grammar_from_ebnf(grammars[i], strlen(grammars[i]), NULL, 0, &g) == XGR_OK);
        xgr_compiled *c = NULL, *d = NULL;
        CHECK(g && xgr_compile(g, v, NULL, &c) == XGR_OK);
        uint8_t *img = NULL, *again = NULL;
        size_t len = 0, again_len = 0;
        CHECK(c && xgr_compiled_image(c, &img, &len) == XGR_OK && img && len > 40);
        if (!img) continue;
        CHECK(xgr_compiled_from_image(img, len, v, NULL, &d) == XGR_OK);
        CHECK(d && xgr_compiled_grammar(d) == NULL);
        if (d) {
            same_walk(c, d);
            CHECK(xgr_compiled_image(d, &again, &again_len) == XGR_OK);
            CHECK(again_len == len && again && memcmp(again, img, len) == 0);
            xgr_free(again);
        }
        /* every truncation is refused */
        for (size_t k = 0; k < len; k++) CHECK(!try_load(img, k, v));
        /* every single-byte change: refused, or a well-formed automaton run safely */
        uint8_t *copy = malloc(len);
        CHECK(copy != NULL);
        int loaded = 0;
        for (size_t k = 0; copy && k < len; k++) {
            memcpy(copy, img, len);
            copy[k] ^= (uint8_t)(1u << rnd(8));
            loaded += try_load(copy, len, v);
        }
        /* another image version */
        if (copy) {
            memcpy(copy, img, len);
            copy[12] ^= 0x40;
            CHECK(!try_load(copy, len, v));
        }
        free(copy);
        CHECK(loaded < (int)len / 2);
        /* limits of the loading compile apply */
        xgr_compile_options o;
        memset(&o, 0, sizeof o);
        o.max_fsm_states = 1;
        xgr_compiled *e = NULL;
        CHECK(xgr_compiled_from_image(img, len, v, &o, &e) == XGR_ERR_LIMIT && e == NULL);
        xgr_free(img);
        xgr_compiled_release(c);
        xgr_compiled_release(d);
        xgr_grammar_release(g);
    }
    /* a grammar with rule attributes has no image */
    const char *attrs = "root ::= a \"b\"\na[max_chars=3] ::= [a-c]+\n";
    xgr_grammar *g = NULL;
    xgr_compiled *c = NULL;
    CHECK(xgr_grammar_from_ebnf(attrs, strlen(attrs), NULL, 0, &g) == XGR_OK);
    CHECK(g && xgr_compile(g, v, NULL, &c) == XGR_OK);
    uint8_t *img = (uint8_t *)1;
    size_t len = 1;
    CHECK(c && xgr_compiled_image(c, &img, &len) == XGR_OK && img == NULL && len == 0);
    xgr_compiled_release(c);
    xgr_grammar_release(g);
    /* NULL arguments */
    xgr_compiled *out = NULL;
    CHECK(xgr_compiled_from_image(NULL, 0, v, NULL, &out) == XGR_ERR_INVALID_ARG);
    CHECK(xgr_compiled_image(NULL, &img, &len) == XGR_ERR_INVALID_ARG);
    xgr_vocab_release(v);
}

/* A hand-made image (image.c's layout, no token ids): n_rules plain rules
 * starting at starts[], state rules in srule[], finals in fin[], edges (source, target, ref,
 * lo, hi) sorted by source; nullable[] per rule. Returns the length written into buf. */
typedef struct {
    int32_t src, target, ref;
    uint8_t lo, hi;
} hand_edge;

static size_t put_u32(uint8_t *p, uint32_t x) {
    memcpy(p, &x, 4);
    return 4;
}

static size_t hand_image(uint8_t *buf, int32_t nr, const int32_t *starts, const uint8_t *nullable,
                         int32_t ns, const int32_t *srule, const uint8_t *fin, int32_t ne,
                         const hand_edge *ed) {
    uint8_t *p = buf;
    memcpy(p, "XGR2FSM", 8);
    p += 8;
    p += put_u32(p, 0x01020304u);
    p += put_u32(p, 1);
    p += put_u32(p, (uint32_t)nr);
    p += put_u32(p, 0); /* root */
    p += put_u32(p, (uint32_t)ns);
    p += put_u32(p, (uint32_t)ne);
    p += put_u32(p, 0); /* token ids */
    p += put_u32(p, 0);
    for (int32_t r = 0; r < nr; r++) p += put_u32(p, (uint32_t)starts[r]);
    for (int32_t r = 0; r < nr; r++) *p++ = 0; /* XGR_RULE_NORMAL */
    for (int32_t r = 0; r < nr; r++) *p++ = nullable[r];
    for (int32_t r = 0; r < nr; r++) p += put_u32(p, (uint32_t)-1); /* repeat_child */
    for (int32_t r = 0; r < nr; r++) p += put_u32(p, 0);            /* repeat_min */
    for (int32_t r = 0; r < nr; r++) p += put_u32(p, 0);            /* repeat_max */
    for (int32_t r = 0; r < nr; r++) p += put_u32(p, (uint32_t)-1); /* lookahead */
    for (int32_t r = 0; r < nr; r++) *p++ = 0;                      /* dispatch */
    for (int32_t s = 0; s < ns; s++) p += put_u32(p, (uint32_t)srule[s]);
    for (int32_t s = 0; s < ns; s++) *p++ = fin[s];
    int32_t e = 0;
    for (int32_t s = 0; s <= ns; s++) {
        p += put_u32(p, (uint32_t)e);
        while (e < ne && ed[e].src == s) e++;
    }
    for (e = 0; e < ne; e++) {
        p += put_u32(p, (uint32_t)ed[e].target);
        p += put_u32(p, (uint32_t)ed[e].ref);
        *p++ = ed[e].lo;
        *p++ = ed[e].hi;
    }
    return (size_t)(p - buf);
}

/* Refused as a corrupt image (XGR_ERR_INVALID_ARG, "corrupt compiled image: ..."). */
static int refused_as_corrupt(const uint8_t *img, size_t len, xgr_vocab *v) {
    xgr_compiled *c = NULL;
    int rc = xgr_compiled_from_image(img, len, v, NULL, &c);
    if (rc == XGR_OK) {
        xgr_compiled_release(c);
        return 0;
    }
    return rc == XGR_ERR_INVALID_ARG && c == NULL &&
           strstr(xgr_last_error(), "corrupt compiled image") != NULL;
}

/* Automata that pass the per-edge checks but break a whole-automaton invariant: a state
 * that cannot reach an end, a rule that can never finish although every state reaches a
 * final state over some edge, an unreachable state. (The first is what the productivity
 * pass checks for every state since it replaced the backward pass over reversed edges.) */
static void test_handmade_images(void) {
    xgr_vocab *v = vocab();
    uint8_t buf[512];
    const int32_t st0[1] = {0};
    const uint8_t notnull[1] = {0};
    /* root: 0 -a-> 1 (final): loads */
    {
        const int32_t srule[2] = {0, 0};
        const uint8_t fin[2] = {0, 1};
        const hand_edge ed[1] = {{0, 1, -1, 'a', 'a'}};
        size_t len = hand_image(buf, 1, st0, notnull, 2, srule, fin, 1, ed);
        xgr_compiled *c = NULL;
        CHECK(xgr_compiled_from_image(buf, len, v, NULL, &c) == XGR_OK && c != NULL);
        xgr_compiled_release(c);
    }
    /* 0 -a-> 1 (final), 0 -b-> 2 (no edges, not final): state 2 cannot end */
    {
        const int32_t srule[3] = {0, 0, 0};
        const uint8_t fin[3] = {0, 1, 0};
        const hand_edge ed[2] = {{0, 1, -1, 'a', 'a'}, {0, 2, -1, 'b', 'b'}};
        size_t len = hand_image(buf, 1, st0, notnull, 3, srule, fin, 2, ed);
        CHECK(refused_as_corrupt(buf, len, v));
    }
    /* 0 -ref root-> 1 -a-> 2 (final): every state reaches a final state, the rule never
     * finishes (root ::= root "a") */
    {
        const int32_t srule[3] = {0, 0, 0};
        const uint8_t fin[3] = {0, 0, 1};
        const hand_edge ed[2] = {{0, 1, 0, 0, 0}, {1, 2, -1, 'a', 'a'}};
        size_t len = hand_image(buf, 1, st0, notnull, 3, srule, fin, 2, ed);
        CHECK(refused_as_corrupt(buf, len, v));
    }
    /* 0 -a-> 1 (final), 2 -a-> 1: state 2 is unreachable */
    {
        const int32_t srule[3] = {0, 0, 0};
        const uint8_t fin[3] = {0, 1, 0};
        const hand_edge ed[2] = {{0, 1, -1, 'a', 'a'}, {2, 1, -1, 'a', 'a'}};
        size_t len = hand_image(buf, 1, st0, notnull, 3, srule, fin, 2, ed);
        CHECK(refused_as_corrupt(buf, len, v));
    }
    xgr_vocab_release(v);
}

int main(void) {
    test_images();
    test_handmade_images();
    printf("test_image: %d checks, %d failures\n", n_check, n_fail);
    return n_fail ? 1 : 0;
}
