/* Tests for the descent (csrc/mask/descend.c): the context-free entry of every state that
 * takes it must equal, field by field, the entry the full vocabulary pass builds for the
 * same state of the same grammar (compiled twice, the second with no_descend set).
 *
 * Build and run (from the repository root), as tests/c/run_sanitized.sh does:
 *   gcc -std=c11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -Wall -Wextra \
 *       -Werror -pedantic-errors -pthread -Icsrc/include tests/c/test_descend.c \
 *       $(find csrc -name '*.c' | sort) -o /tmp/test_descend -lm && /tmp/test_descend */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../csrc/include/xgr2.h"
#include "../../csrc/mask/compiled.h"
#include "../../csrc/mask/descend.h"
#include "../../csrc/mask/follow.h"
#include "../../csrc/mask/mask_cache.h"

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

/* Every single byte, then tokens made of grammar punctuation, key and value fragments
 * and whitespace, so that many tokens share long prefixes (as BPE vocabularies do):
 * `", "`, `": "`, `"}}`, `name`, `  `, ... The last token is the stop token. */
static const char *const pieces[] = {"\"", ",", ":", " ", "{", "}", "[", "]", "name", "na",
                                     "me", "param", "eters", "a", "b", "c", "ab", "1", "23",
                                     "\n", "<f=", ">", "</f>", "get", "_", "city", "x", "\\"};

/* Tokens that run from a key into the value's reference (a rule with references: the
 * descent must stop there), and from a wide byte class through a literal into one (met
 * inside the token-by-token walk), appended after the random ones. */
static const char *const fixed[] = {"name:[", "name:1", "ame:[", "1name:[", "12name:1", "me:[1",
                                    "qabcdx", "qmbcdyy", "qkbcdxy", "qcbcdq"};

static xgr_vocab *vocab(int32_t n_random) {
    int32_t nf = (int32_t)(sizeof fixed / sizeof *fixed);
    int32_t n = 256 + n_random + nf + 1;
    size_t cap = (size_t)n * 40;
    uint8_t *data = malloc(cap);
    uint32_t *off = malloc(((size_t)n + 1) * sizeof *off);
    uint32_t pos = 0;
    size_t np = sizeof pieces / sizeof *pieces;
    for (int32_t i = 0; i < n; i++) {
        off[i] = pos;
        if (i < 256) {
            data[pos++] = (uint8_t)i;
        } else if (i >= 256 + n_random && i < n - 1) {
            size_t l = strlen(fixed[i - 256 - n_random]);
            memcpy(data + pos, fixed[i - 256 - n_random], l);
            pos += (uint32_t)l;
        } else if (i < n - 1) {
            int k = 2 + (int)rnd(4);
            for (int j = 0; j < k; j++) {
                const char *p = pieces[rnd((uint32_t)np)];
                size_t l = strlen(p);
                memcpy(data + pos, p, l);
                pos += (uint32_t)l;
            }
        }
    }
    off[n] = pos;
    int32_t stop = n - 1;
    xgr_vocab *v = NULL;
    CHECK(xgr_vocab_new(data, off, n, n, NULL, 0, &stop, 1, &v) == XGR_OK);
    free(data);
    free(off);
    return v;
}

static int same_entry(const xgr_mask_entry *a, const xgr_mask_entry *b, int32_t row_words) {
    if (!a || !b) return a == b;
    if (a->form != b->form || a->n_ids != b->n_ids || a->n_uncertain != b->n_uncertain ||
        a->n_accepted != b->n_accepted || a->wants_context != b->wants_context)
        return 0;
    if (a->n_ids && memcmp(a->ids, b->ids, (size_t)a->n_ids * sizeof *a->ids)) return 0;
    if (a->form == XGR_MASK_BITSET && memcmp(a->bits, b->bits, (size_t)row_words * 4)) return 0;
    if (a->n_uncertain &&
        memcmp(a->uncertain, b->uncertain, (size_t)a->n_uncertain * sizeof *a->uncertain))
        return 0;
    if (!a->pop_begin != !b->pop_begin) return 0;
    if (a->pop_begin) {
        if (memcmp(a->pop_begin, b->pop_begin, ((size_t)a->n_uncertain + 1) * sizeof *a->pop_begin))
            return 0;
        int32_t np = a->pop_begin[a->n_uncertain];
        if (np && memcmp(a->pop_depth, b->pop_depth, (size_t)np * sizeof *a->pop_depth)) return 0;
    }
    return same_entry(a->base, b->base, row_words);
}

/* The per-rule first-byte set (xgr_follow_first_admits) must answer as the full follow
 * check does for one byte, for every rule and byte: the mask cache rejects suffixes by it. */
static int32_t first_admitted = 0; /* (rule, byte) pairs admitted, over all grammars */
static int32_t two_admitted = 0;   /* (rule, two bytes) admitted, over all grammars */
static void check_first_bytes(const char *name, const xgr_fsm *f) {
    xgr_follow_tables *t = NULL;
    CHECK(xgr_follow_tables_build(f, &t) == XGR_OK);
    if (!t) return;
    xgr_follow fo;
    xgr_follow_init(&fo, f);
    fo.t = t;
    int32_t bad = 0;
    for (int32_t r = 0; r < f->n_rules; r++)
        for (int b = 0; b < 256; b++) {
            uint8_t byte = (uint8_t)b;
            int want = xgr_follow_possible(&fo, r, &byte, 1);
            int got = xgr_follow_first_admits(&fo, r, byte);
            first_admitted += got;
            if (got != want && bad++ < 3)
                fprintf(stderr, "%s: rule %d byte %d: first set %d, follow %d\n", name, r, b, got, want);
        }
    CHECK(bad == 0);
    /* The scratch keeps the last rule's first step (follow.c xgr_follow_step): asked rule
     * by rule in turn (byte outer), every query switches rules, so a step kept across rules
     * would answer with another rule's set. Two bytes: xgr_follow_two_admit decides them
     * exactly and must agree with the full check. */
    static const uint8_t two[] = {'"', ',', ':', ' ', '{', '}', '[', ']', 'a', 'n', '1', '<', '\n'};
    for (int b = 0; b < 256; b++)
        for (int32_t r = 0; r < f->n_rules; r++) {
            uint8_t byte = (uint8_t)b;
            int want = xgr_follow_first_admits(&fo, r, byte);
            int got = xgr_follow_possible(&fo, r, &byte, 1);
            if (got != want && bad++ < 3)
                fprintf(stderr, "%s: rule %d byte %d (rules in turn): follow %d, first set %d\n", name, r, b, got, want);
        }
    for (size_t i = 0; i < sizeof two; i++)
        for (size_t j = 0; j < sizeof two; j++)
            for (int32_t r = 0; r < f->n_rules; r++) {
                uint8_t s2[2] = {two[i], two[j]};
                int got = xgr_follow_two_admit(&fo, r, s2, 2), want = xgr_follow_possible(&fo, r, s2, 2);
                two_admitted += got;
                if (got != want && bad++ < 3)
                    fprintf(stderr, "%s: rule %d bytes %d %d: two %d, follow %d\n", name, r, s2[0], s2[1], got, want);
            }
    CHECK(bad == 0);
    xgr_follow_free(&fo);
    xgr_follow_tables_free(t);
}

/* Compiles `ebnf` twice (private entries), once with the descent and once without, and
 * compares the entries of every scannable state. Returns how many took the descent. */
static int32_t compare_grammar(const char *name, const char *ebnf, xgr_vocab *v) {
    xgr_grammar *g = NULL;
    if (xgr_grammar_from_ebnf(ebnf, strlen(ebnf), NULL, 0, &g)) {
        fprintf(stderr, "%s: parse failed: %s\n", name, xgr_last_error());
        n_fail++;
        return 0;
    }
    xgr_compile_options o = {0};
    o.cross_grammar_cache = -1;
    xgr_compiled *a = NULL, *b = NULL;
    CHECK(xgr_compile(g, v, &o, &a) == XGR_OK);
    CHECK(xgr_compile(g, v, &o, &b) == XGR_OK);
    xgr_grammar_release(g);
    if (!a || !b) return 0;
    b->no_descend = 1;
    xgr_mask_scratch sa, sb;
    CHECK(xgr_mask_scratch_init(&sa, a) == XGR_OK);
    CHECK(xgr_mask_scratch_init(&sb, b) == XGR_OK);
    const xgr_fsm *f = a->fsm;
    check_first_bytes(name, f);
    int32_t taken = 0, bad = 0;
    for (int32_t s = 0; s < f->n_states; s++) {
        if (!a->scannable[s]) continue;
        int32_t r = f->state_rule[s];
        taken += a->rule_opaque[r] != XGR_OPAQUE_DISPATCH && xgr_descend_applies(f, s);
        const xgr_mask_entry *ea = NULL, *eb = NULL;
        int ra = xgr_mask_entry_get(a, &sa, s, &ea), rb = xgr_mask_entry_get(b, &sb, s, &eb);
        CHECK(ra == XGR_OK && rb == XGR_OK);
        if (ra || rb) continue;
        if (!same_entry(ea, eb, v->row_words)) {
            if (bad++ < 3) {
                fprintf(stderr, "%s: state %d (rule %d) differs\n", name, s, r);
                const xgr_mask_entry *x[2] = {ea, eb};
                for (int k = 0; k < 2; k++) {
                    const xgr_mask_entry *e = x[k]->base ? x[k]->base : x[k];
                    fprintf(stderr, "  form %d n_ids %d n_unc %d n_acc %d:", e->form, e->n_ids, e->n_uncertain, e->n_accepted);
                    for (int32_t i = 0; i < e->n_uncertain && i < 8; i++) {
                        uint32_t l; const uint8_t *t = xgr_vocab_token(v, e->uncertain[i], &l);
                        fprintf(stderr, " [%.*s:", (int)l, t);
                        for (int32_t q = e->pop_begin[i]; q < e->pop_begin[i + 1]; q++) fprintf(stderr, "%d,", e->pop_depth[q]);
                        fprintf(stderr, "]");
                    }
                    for (int32_t i = 0; i < e->n_ids && e->form == 0; i++) {
                        uint32_t l; const uint8_t *t = xgr_vocab_token(v, e->ids[i], &l);
                        fprintf(stderr, " <%.*s>", (int)l, t);
                    }
                    fprintf(stderr, "\n");
                }
            }
        }
    }
    CHECK(bad == 0);
    xgr_mask_scratch_free(&sa);
    xgr_mask_scratch_free(&sb);
    xgr_compiled_release(a);
    xgr_compiled_release(b);
    return taken;
}

static const struct {
    const char *name, *ebnf;
} grammars[] = {
    {"json_object",
     "root ::= \"{\" ws \"\\\"name\\\"\" ws \":\" ws str ws \",\" ws \"\\\"parameters\\\"\" ws \":\" "
     "ws obj ws \"}\"\n"
     "obj ::= \"{\" ws (\"\\\"city\\\"\" ws \":\" ws str | \"\\\"n\\\"\" ws \":\" ws num) ws \"}\"\n"
     "str ::= \"\\\"\" [a-z_ ]* \"\\\"\"\n"
     "num ::= \"-\"? [0-9]+ (\".\" [0-9]+)?\n"
     "ws ::= [ \\n]*\n"},
    {"literal_keys",
     "root ::= \"{\" (\"\\\"name\\\": \" | \"\\\"na\\\": \" | \"\\\"param\\\": \") \"1\" \"}\"\n"},
    {"repetition", "root ::= \"\\\"\" [a-z ]{5,300} \"\\\"\" | \"[\" (\"ab\" | \"c\"){20,2000} \"]\"\n"},
    {"ends_inside", /* finals on the path: tokens that run on get pops */
     "root ::= (\"ab\" | \"a\" | \"abc\" \",\"?) (\" \" | \"\\n\")? x\nx ::= \"[\" [0-9]* \"]\" | \"c\"\n"},
    {"references", /* rules with references: the descent stops where a token enters one */
     "root ::= v\nv ::= \"[\" ws (v (ws \",\" ws v)*)? ws \"]\" | \"{\\\"na\\\": \" v \"}\" | [0-9]+ | \"x\" [0-9]+ \":\" v | \"y\" [0-9]* \"name:\" w | \"z\" \"name:\" v | "
     "\"\\\"\" [a-z]* \"\\\"\"\nws ::= [ \\n]*\n"
     "w ::= w \"1\" | \"[\" [0-9]*\n"},
    {"wide_into_reference", /* a class wider than the split mode one byte in, four bytes
                             * before a reference: the token-by-token walk meets it */
     "root ::= \"q\" [a-m] \"bcd\" r\nr ::= \"x\" r | \"y\" r?\n"},
    {"tags",
     "root ::= TagDispatch((\"<f=\", g), loop_after_dispatch=true, excludes=(\"</f>\"))\n"
     "g ::= \"get_city>\" a \"</f>\" | \"name>\" b \"</f>\" | \"na>\" \" \"* a \"</f>\"\n"
     "a ::= \"{\" [ ]* \"\\\"city\\\": \" [0-9]+ \"}\"\n"
     "b ::= \"[\" (\"ab\" | \"c\")* \"]\"\n"},
    {"tag_space_then_reference", /* Llama's `"parameters": ` then the arguments: after the
                                  * space only a reference start pops, and only where the
                                  * next byte can begin it (dead()'s search by first byte) */
     "root ::= TagDispatch((\"{\\\"na\\\": \", g), loop_after_dispatch=true)\n"
     "g ::= \"\\\"get\\\", \\\"param\\\": \" a \"}\" | \"\\\"x\\\", \\\"param\\\": \" b \"}\"\n"
     "a ::= \"{\" ws \"\\\"city\\\"\" ws \":\" ws [0-9]+ ws \"}\"\n"
     "b ::= \"[\" ws \"]\"\nws ::= [ \\n]*\n"},
};

int main(void) {
    xgr_vocab *v = vocab(6000);
    if (!v) return 1;
    int32_t taken = 0;
    for (size_t i = 0; i < sizeof grammars / sizeof *grammars; i++)
        taken += compare_grammar(grammars[i].name, grammars[i].ebnf, v);
    CHECK(taken > 20); /* the comparison covers states that take the descent */
    CHECK(first_admitted > 100); /* and first-byte sets that admit something */
    CHECK(two_admitted > 20);    /* and two-byte steps that admit something */
    xgr_vocab_release(v);
    printf("test_descend: %d checks, %d failures (%d states by descent)\n", n_check, n_fail, taken);
    return n_fail != 0;
}
