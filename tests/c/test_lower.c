/* Tests for the lowering pipeline (csrc/lower: IR -> per-rule DFAs).
 *
 * Build and run (from the repository root):
 *   gcc -std=c11 -O1 -g -fsanitize=address,undefined -Wall -Wextra -Werror -pedantic-errors \
 *       tests/c/test_lower.c csrc/common/util.c csrc/ir/ir.c csrc/lower/lower.c \
 *       csrc/lower/utf8_ranges.c csrc/lower/nfa.c csrc/lower/dfa.c \
 *       csrc/lower/fsm_build.c -o /tmp/test_lower && /tmp/test_lower
 *
 * Grammars are built by hand with the ir.h builder. Every produced automaton is checked
 * structurally (fsm.h invariants) and run by a small reference simulator (byte edges
 * followed directly, ref edges by memoised recursive descent, REPEAT rules with their
 * counter), which is compared against a direct interpreter of the IR on generated,
 * random and mutated strings. */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

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

static double now_ms(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- grammar building helpers ----------------------------------------------------- */
static xgr_grammar *G;

static int32_t ok(int32_t id) {
    if (id < 0) {
        fprintf(stderr, "builder failed: %s\n", xgr_last_error());
        exit(2);
    }
    return id;
}
static int32_t L(const char *s) { return ok(xgr_ir_bytes(G, (const uint8_t *)s, strlen(s))); }
static int32_t E(void) { return ok(xgr_ir_empty(G)); }
/* C(negated, n, lo1, hi1, ...) code-point class */
static int32_t C(int neg, int n, ...) {
    uint32_t r[64];
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < 2 * n; i++) r[i] = va_arg(ap, uint32_t);
    va_end(ap);
    return ok(xgr_ir_class(G, r, (size_t)n, neg));
}
static int32_t BC(int neg, int n, ...) {
    uint32_t r[64];
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < 2 * n; i++) r[i] = va_arg(ap, uint32_t);
    va_end(ap);
    return ok(xgr_ir_byte_class(G, r, (size_t)n, neg));
}
static int32_t S(int n, ...) {
    int32_t k[64];
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) k[i] = va_arg(ap, int32_t);
    va_end(ap);
    return ok(xgr_ir_seq(G, k, (size_t)n));
}
static int32_t A(int n, ...) {
    int32_t k[64];
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) k[i] = va_arg(ap, int32_t);
    va_end(ap);
    return ok(xgr_ir_alt(G, k, (size_t)n));
}
static int32_t RULE(const char *name) { return ok(xgr_ir_rule(G, name, strlen(name))); }
static int32_t R(const char *name) { return ok(xgr_ir_ref(G, RULE(name))); }
static int32_t REP(int32_t x, int min, int max) { return ok(xgr_ir_repeat(G, x, min, max)); }
static void DEF(const char *name, int32_t body) {
    int32_t r = RULE(name); /* before indexing: declaring may move the array */
    G->rules.data[r].body = body;
}
static void LOOK(const char *name, int32_t la) {
    int32_t r = RULE(name);
    G->rules.data[r].lookahead = la;
}
static void NEWG(void) {
    G = xgr_ir_new();
    if (!G) exit(2);
}
static void ROOT(const char *name) { G->root = RULE(name); }

static xgr_compile_options OPTS(int inline_max, int thresh) {
    xgr_compile_options o;
    memset(&o, 0, sizeof o);
    o.max_rules = 100000;
    o.max_fsm_states = 2000000;
    o.inline_max_states = inline_max;
    o.repeat_threshold = thresh;
    return o;
}

static xgr_fsm *build(const xgr_compile_options *o) {
    xgr_fsm *f = NULL;
    int rc = xgr_fsm_build(G, o, &f);
    if (rc) {
        fprintf(stderr, "xgr_fsm_build failed (%d): %s\n", rc, xgr_last_error());
        n_fail++;
        return NULL;
    }
    return f;
}

/* ---- strict UTF-8 --------------------------------------------------------------------- */
static int utf8_dec(const uint8_t *s, int n, uint32_t *cp) {
    if (n < 1) return 0;
    uint8_t b = s[0];
    int len;
    uint32_t c, min;
    if (b < 0x80) {
        *cp = b;
        return 1;
    } else if (b >= 0xC2 && b <= 0xDF) {
        len = 2, c = b & 0x1F, min = 0x80;
    } else if (b >= 0xE0 && b <= 0xEF) {
        len = 3, c = b & 0x0F, min = 0x800;
    } else if (b >= 0xF0 && b <= 0xF4) {
        len = 4, c = b & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len) return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return len;
}
static int utf8_enc(uint32_t c, uint8_t *b) {
    if (c < 0x80) return b[0] = (uint8_t)c, 1;
    if (c < 0x800) return b[0] = (uint8_t)(0xC0 | (c >> 6)), b[1] = (uint8_t)(0x80 | (c & 0x3F)), 2;
    if (c < 0x10000)
        return b[0] = (uint8_t)(0xE0 | (c >> 12)), b[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3F)),
               b[2] = (uint8_t)(0x80 | (c & 0x3F)), 3;
    b[0] = (uint8_t)(0xF0 | (c >> 18));
    b[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3F));
    b[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
    b[3] = (uint8_t)(0x80 | (c & 0x3F));
    return 4;
}

#include "fsm_sim.h"

/* ---- reference interpreter of the IR --------------------------------------------- */
typedef struct {
    const xgr_grammar *g;
    const uint8_t *s;
    int n;
    uint64_t *memo;
    uint8_t *done;
    int err;
} irsim;

static int in_class(const xgr_grammar *g, const xgr_node *nd, uint32_t c) {
    int in = 0;
    for (int32_t i = 0; i < nd->count; i++)
        if (c >= g->ranges.data[nd->off + 2 * i] && c <= g->ranges.data[nd->off + 2 * i + 1]) in = 1;
    return nd->negated ? !in : in;
}

static uint64_t ir_rule(irsim *m, int32_t r, int pos, int depth);
static uint64_t ir_node_(irsim *m, int32_t id, int pos, int depth);
/* Memoised per (node, position): node meaning does not depend on context. */
static uint64_t ir_node(irsim *m, int32_t id, int pos, int depth) {
    size_t key = (m->g->rules.len + (size_t)id) * (MAXLEN + 1) + (size_t)pos;
    if (m->done[key]) return m->memo[key];
    uint64_t v = ir_node_(m, id, pos, depth);
    m->done[key] = 1;
    m->memo[key] = v;
    return v;
}
static uint64_t ir_node_(irsim *m, int32_t id, int pos, int depth) {
    const xgr_grammar *g = m->g;
    const xgr_node *nd = &g->nodes.data[id];
    if (depth > 2000) {
        m->err = 1;
        return 0;
    }
    switch (nd->kind) {
    case XGR_NODE_EMPTY: return 1ULL << pos;
    case XGR_NODE_BYTES:
        if (pos + nd->count > m->n || memcmp(m->s + pos, g->bytes.data + nd->off, (size_t)nd->count))
            return 0;
        return 1ULL << (pos + nd->count);
    case XGR_NODE_CLASS: {
        uint32_t c;
        int l = utf8_dec(m->s + pos, m->n - pos, &c);
        if (!l || !in_class(g, nd, c)) return 0;
        return 1ULL << (pos + l);
    }
    case XGR_NODE_BYTE_CLASS:
        if (pos >= m->n || !in_class(g, nd, m->s[pos])) return 0;
        return 1ULL << (pos + 1);
    case XGR_NODE_SEQ: {
        uint64_t P = 1ULL << pos;
        for (int32_t i = 0; i < nd->count && P; i++) {
            uint64_t Q = 0;
            for (int p = 0; p <= m->n; p++)
                if (P >> p & 1) Q |= ir_node(m, g->kids.data[nd->off + i], p, depth + 1);
            P = Q;
        }
        return P;
    }
    case XGR_NODE_ALT: {
        uint64_t P = 0;
        for (int32_t i = 0; i < nd->count; i++) P |= ir_node(m, g->kids.data[nd->off + i], pos, depth + 1);
        return P;
    }
    case XGR_NODE_REF: return ir_rule(m, nd->a, pos, depth + 1);
    case XGR_NODE_REPEAT: {
        uint64_t P = 1ULL << pos, res = nd->min == 0 ? P : 0;
        /* beyond min + len + 1 repetitions, some repetition is empty and removable */
        for (int k = 1; P && (nd->max < 0 || k <= nd->max) && k <= nd->min + m->n + 1; k++) {
            uint64_t Q = 0;
            for (int p = 0; p <= m->n; p++)
                if (P >> p & 1) Q |= ir_node(m, nd->a, p, depth + 1);
            if (k >= nd->min) res |= Q;
            P = Q;
        }
        return res;
    }
    case XGR_NODE_SUBSTRING: { /* "" plus every run of consecutive chunks */
        uint64_t res = 1ULL << pos;
        for (int32_t i = 0; i < nd->count; i++) {
            uint64_t P = 1ULL << pos;
            for (int32_t j = i; j < nd->count && P; j++) {
                uint64_t Q = 0;
                for (int p = 0; p <= m->n; p++)
                    if (P >> p & 1) Q |= ir_node(m, g->kids.data[nd->off + j], p, depth + 1);
                res |= Q;
                P = Q;
            }
        }
        return res;
    }
    default: m->err = 1; return 0;
    }
}
static uint64_t ir_rule(irsim *m, int32_t r, int pos, int depth) {
    size_t key = (size_t)r * (MAXLEN + 1) + (size_t)pos;
    if (m->done[key]) return m->memo[key];
    uint64_t v = ir_node(m, m->g->rules.data[r].body, pos, depth + 1);
    m->done[key] = 1;
    m->memo[key] = v;
    return v;
}
static int ir_accepts(const xgr_grammar *g, const uint8_t *s, int n) {
    irsim m = {g, s, n, NULL, NULL, 0};
    size_t sz = (g->rules.len + g->nodes.len) * (MAXLEN + 1);
    m.memo = calloc(sz, sizeof *m.memo);
    m.done = calloc(sz, 1);
    if (!m.memo || !m.done) exit(2);
    uint64_t r = ir_rule(&m, g->root, 0, 0);
    free(m.memo);
    free(m.done);
    if (m.err) return -1;
    return (int)(r >> n & 1);
}

/* ---- random strings ------------------------------------------------------------------- */
static uint64_t rng_state = 0x12345678abcdefULL;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return n ? (uint32_t)(rng_state % n) : 0;
}

static uint32_t random_cp(void) {
    switch (rnd(4)) {
    case 0: return rnd(0x80);
    case 1: return 0x80 + rnd(0x800 - 0x80);
    case 2: {
        uint32_t c = 0x800 + rnd(0x10000 - 0x800);
        return (c >= 0xD800 && c <= 0xDFFF) ? 'x' : c;
    }
    default: return 0x10000 + rnd(0x100000);
    }
}

/* Random derivation of node id into buf; 0 when it gets too long or deep. */
static int gen(const xgr_grammar *g, int32_t id, uint8_t *buf, int *len, int depth) {
    if (depth > 40 || *len > MAXLEN) return 0;
    const xgr_node *nd = &g->nodes.data[id];
    switch (nd->kind) {
    case XGR_NODE_EMPTY: return 1;
    case XGR_NODE_BYTES:
        if (*len + nd->count > MAXLEN) return 0;
        memcpy(buf + *len, g->bytes.data + nd->off, (size_t)nd->count);
        *len += nd->count;
        return 1;
    case XGR_NODE_CLASS:
    case XGR_NODE_BYTE_CLASS: {
        int byte = nd->kind == XGR_NODE_BYTE_CLASS;
        for (int tries = 0; tries < 20; tries++) {
            uint32_t c;
            if (!nd->negated && nd->count > 0) {
                int32_t i = (int32_t)rnd((uint32_t)nd->count);
                uint32_t lo = g->ranges.data[nd->off + 2 * i], hi = g->ranges.data[nd->off + 2 * i + 1];
                if (hi < lo) continue;
                c = lo + rnd(hi - lo + 1);
            } else {
                c = byte ? rnd(256) : random_cp();
            }
            if (byte ? (c > 255) : (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))) continue;
            if (!in_class(g, nd, c)) continue;
            uint8_t b[4];
            int l = byte ? (b[0] = (uint8_t)c, 1) : utf8_enc(c, b);
            if (*len + l > MAXLEN) return 0;
            memcpy(buf + *len, b, (size_t)l);
            *len += l;
            return 1;
        }
        return 0;
    }
    case XGR_NODE_SEQ:
        for (int32_t i = 0; i < nd->count; i++)
            if (!gen(g, g->kids.data[nd->off + i], buf, len, depth + 1)) return 0;
        return 1;
    case XGR_NODE_ALT:
        if (nd->count == 0) return 0;
        return gen(g, g->kids.data[nd->off + (int32_t)rnd((uint32_t)nd->count)], buf, len, depth + 1);
    case XGR_NODE_REF: return gen(g, g->rules.data[nd->a].body, buf, len, depth + 1);
    case XGR_NODE_REPEAT: {
        int hi = nd->max < 0 ? nd->min + 4 : nd->max;
        if (hi > nd->min + 6) hi = nd->min + 6;
        int k = nd->min + (int)rnd((uint32_t)(hi - nd->min + 1));
        if (k > MAXLEN + 1) return 0;
        for (int i = 0; i < k; i++)
            if (!gen(g, nd->a, buf, len, depth + 1)) return 0;
        return 1;
    }
    case XGR_NODE_SUBSTRING: {
        if (nd->count == 0) return 1;
        int32_t i = (int32_t)rnd((uint32_t)nd->count + 1), j;
        if (i == nd->count) return 1; /* the empty run */
        j = i + (int32_t)rnd((uint32_t)(nd->count - i));
        for (int32_t k = i; k <= j; k++)
            if (!gen(g, g->kids.data[nd->off + k], buf, len, depth + 1)) return 0;
        return 1;
    }
    default: return 0;
    }
}

/* Bytes worth trying in random strings: literal bytes, class endpoints' encodings. */
static int alphabet(const xgr_grammar *g, uint8_t *out) {
    uint8_t seen[256] = {0};
    int n = 0;
    for (size_t i = 0; i < g->bytes.len; i++) seen[g->bytes.data[i]] = 1;
    for (size_t i = 0; i < g->nodes.len; i++) {
        const xgr_node *nd = &g->nodes.data[i];
        if (nd->kind != XGR_NODE_CLASS && nd->kind != XGR_NODE_BYTE_CLASS) continue;
        for (int32_t k = 0; k < 2 * nd->count; k++) {
            uint32_t c = g->ranges.data[nd->off + k];
            uint8_t b[4];
            if (nd->kind == XGR_NODE_BYTE_CLASS) {
                if (c < 256) seen[c] = 1;
            } else if (c <= 0x10FFFF) {
                int l = utf8_enc(c, b);
                for (int j = 0; j < l; j++) seen[b[j]] = 1;
            }
        }
    }
    seen['a'] = seen[0x80] = seen[0xC3] = seen[0xFF] = 1;
    for (int b = 0; b < 256; b++)
        if (seen[b]) out[n++] = (uint8_t)b;
    return n;
}

/* The automata and the IR interpreter must agree on every sample. */
static void diff_check(const char *label, const xgr_fsm *f, const xgr_grammar *g, int rounds,
                       int need_pos) {
    uint8_t alpha[256];
    int na = alphabet(g, alpha);
    int npos = 0, nmis = 0;
    for (int it = 0; it < rounds; it++) {
        uint8_t buf[MAXLEN + 8];
        int len = 0, kind = (int)rnd(3), positive = 0;
        if (kind == 0 || kind == 2) {
            positive = gen(g, g->rules.data[g->root].body, buf, &len, 0) && len <= MAXLEN;
            if (!positive) continue;
            if (kind == 2) { /* mutate */
                positive = 0;
                int op = (int)rnd(3), p = len ? (int)rnd((uint32_t)len) : 0;
                if (op == 0 && len < MAXLEN) {
                    memmove(buf + p + 1, buf + p, (size_t)(len - p));
                    buf[p] = alpha[rnd((uint32_t)na)];
                    len++;
                } else if (op == 1 && len > 0) {
                    memmove(buf + p, buf + p + 1, (size_t)(len - p - 1));
                    len--;
                } else if (len > 0) {
                    buf[p] = alpha[rnd((uint32_t)na)];
                }
            }
        } else {
            len = (int)rnd(12);
            for (int i = 0; i < len; i++) buf[i] = alpha[rnd((uint32_t)na)];
        }
        int a = fsm_accepts(f, buf, len), b = ir_accepts(g, buf, len);
        if (positive) npos++;
        if (a != b || (positive && a != 1)) {
            if (nmis++ < 5) {
                fprintf(stderr, "[%s] mismatch fsm=%d ir=%d positive=%d on \"", label, a, b, positive);
                for (int i = 0; i < len; i++)
                    fprintf(stderr, buf[i] >= 0x20 && buf[i] < 0x7f ? "%c" : "\\x%02x", buf[i]);
                fprintf(stderr, "\"\n");
            }
        }
    }
    CHECK(nmis == 0);
    if (need_pos) CHECK(npos > 0);
}

/* ---- structural invariants of fsm.h ------------------------------------------------- */
static void check_fsm(const xgr_fsm *f) {
    int bad = 0;
#define BAD(...) do { if (bad++ < 5) { fprintf(stderr, "check_fsm: " __VA_ARGS__); fprintf(stderr, "\n"); } } while (0)
    if (f->root < 0 || f->root >= f->n_rules || f->rule_kind[f->root] != XGR_RULE_NORMAL) BAD("root");
    if (f->edge_begin[f->n_states] != f->n_edges) BAD("edge count");
    for (int32_t r = 0; r < f->n_rules; r++) {
        int32_t s0 = f->rule_start[r], s1 = r + 1 < f->n_rules ? f->rule_start[r + 1] : f->n_states;
        if (s1 <= s0) BAD("rule %d has no states", r);
        for (int32_t s = s0; s < s1; s++)
            if (f->state_rule[s] != r) BAD("state_rule %d", s);
        if (f->rule_kind[r] == XGR_RULE_REPEAT) {
            int32_t ch = f->repeat_child[r];
            if (s1 - s0 != 1 || f->edge_begin[s0 + 1] - f->edge_begin[s0] != 1) BAD("repeat shape %d", r);
            else if (f->edges[f->edge_begin[s0]].ref != ch || f->edges[f->edge_begin[s0]].target != s0)
                BAD("repeat edge %d", r);
            if (ch < 0 || ch >= f->n_rules || f->rule_nullable[ch] || f->rule_kind[ch] != XGR_RULE_NORMAL)
                BAD("repeat child %d", r);
            if (f->repeat_max[r] >= 0 && f->repeat_max[r] < f->repeat_min[r]) BAD("repeat bounds %d", r);
            if (f->rule_nullable[r] != (f->repeat_min[r] == 0)) BAD("repeat nullable %d", r);
        } else if (f->repeat_child[r] != -1) {
            BAD("normal rule %d has a child", r);
        }
        if (f->rule_lookahead[r] >= f->n_rules) BAD("lookahead id");
        /* reachability and co-reachability within the rule */
        int32_t ns = s1 - s0;
        uint8_t *fw = calloc((size_t)ns, 1), *bw = calloc((size_t)ns, 1);
        fw[0] = 1;
        for (int ch = 1; ch;) {
            ch = 0;
            for (int32_t s = s0; s < s1; s++) {
                for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++) {
                    int32_t t = f->edges[e].target;
                    if (t < s0 || t >= s1) { BAD("edge leaves rule"); continue; }
                    if (fw[s - s0] && !fw[t - s0]) fw[t - s0] = 1, ch = 1;
                    if ((f->final[t] || bw[t - s0]) && !bw[s - s0]) bw[s - s0] = 1, ch = 1;
                }
                if (f->final[s] && !bw[s - s0]) bw[s - s0] = 1, ch = 1;
            }
        }
        for (int32_t i = 0; i < ns; i++) {
            if (!fw[i]) BAD("rule %d state %d unreachable", r, s0 + i);
            if (!bw[i] && !(ns == 1 && f->edge_begin[s0 + 1] == f->edge_begin[s0])) BAD("rule %d state %d dead", r, s0 + i);
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
                if (ed->lo > ed->hi || (int)ed->lo <= last_hi) BAD("byte edges unsorted/overlap at %d", s);
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
    /* rule_nullable must equal the fixpoint over the automata */
    uint8_t *nl = calloc((size_t)f->n_rules, 1);
    for (int ch = 1; ch;) {
        ch = 0;
        for (int32_t r = 0; r < f->n_rules; r++) {
            if (nl[r]) continue;
            int v = 0;
            if (f->rule_kind[r] == XGR_RULE_REPEAT) {
                v = f->repeat_min[r] == 0 || nl[f->repeat_child[r]];
            } else {
                int32_t s0 = f->rule_start[r], s1 = r + 1 < f->n_rules ? f->rule_start[r + 1] : f->n_states;
                uint8_t *vis = calloc((size_t)(s1 - s0), 1);
                vis[0] = 1;
                for (int c2 = 1; c2;) {
                    c2 = 0;
                    for (int32_t s = s0; s < s1; s++) {
                        if (!vis[s - s0]) continue;
                        if (f->final[s]) v = 1;
                        for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++)
                            if (f->edges[e].ref >= 0 && nl[f->edges[e].ref] && !vis[f->edges[e].target - s0])
                                vis[f->edges[e].target - s0] = 1, c2 = 1;
                    }
                }
                free(vis);
            }
            if (v) nl[r] = 1, ch = 1;
        }
    }
    for (int32_t r = 0; r < f->n_rules; r++)
        if (nl[r] != f->rule_nullable[r]) BAD("rule_nullable[%d]", r);
    free(nl);
    CHECK(bad == 0);
#undef BAD
}

static int32_t rule_states(const xgr_fsm *f, int32_t r) {
    int32_t s1 = r + 1 < f->n_rules ? f->rule_start[r + 1] : f->n_states;
    return s1 - f->rule_start[r];
}
static int32_t find_kind(const xgr_fsm *f, int kind, int from) {
    for (int32_t r = from; r < f->n_rules; r++)
        if (f->rule_kind[r] == kind) return r;
    return -1;
}
static int count_kind(const xgr_fsm *f, int kind) {
    int n = 0;
    for (int32_t r = 0; r < f->n_rules; r++) n += f->rule_kind[r] == kind;
    return n;
}

/* Builds with several option sets, checks structure and the language each time. */
static void check_all_opts(const char *label, int rounds) {
    const int inl[3] = {-1, 32, 100000};
    const int thr[3] = {16, 1, 100};
    char lab[128];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            xgr_compile_options o = OPTS(inl[i], thr[j]);
            xgr_fsm *f = build(&o);
            if (!f) continue;
            check_fsm(f);
            snprintf(lab, sizeof lab, "%s inline=%d thr=%d", label, inl[i], thr[j]);
            diff_check(lab, f, G, rounds, 1);
            xgr_fsm_free(f);
        }
}

/* ---- tests ---------------------------------------------------------------------------- */

static void test_utf8_split(void) {
    /* Every scalar value is matched by exactly the sequences of its class. */
    const uint32_t cls[][4] = {{0, 0x10FFFF, 0, 0},   {0x80, 0x7FF, 0, 0}, {0x41, 0x5A, 0x3B1, 0x3C9},
                               {0xD000, 0xE0FF, 0, 0}, {0x7F, 0x10000, 0, 0}, {0xFFFF, 0x10FFFF, 0, 0}};
    const int ncls = (int)(sizeof cls / sizeof cls[0]);
    for (int neg = 0; neg < 2; neg++)
        for (int k = 0; k < ncls; k++) {
            lw_range_vec rv = {0};
            lw_seq_vec sv = {0};
            int nr = cls[k][2] || cls[k][3] ? 2 : 1;
            CHECK(lw_norm_class(cls[k], nr, neg, &rv) == 0);
            CHECK(lw_utf8_sequences(rv.data, rv.len, &sv) == 0);
            int bad = 0;
            for (uint32_t c = 0; c <= 0x10FFFF; c++) {
                int want = 0;
                for (int i = 0; i < nr; i++) want |= c >= cls[k][2 * i] && c <= cls[k][2 * i + 1];
                if (neg) want = !want;
                if (c >= 0xD800 && c <= 0xDFFF) want = 0;
                uint8_t b[4];
                int l = utf8_enc(c, b), got = 0;
                for (size_t q = 0; q < sv.len; q++) {
                    const lw_u8seq *sq = &sv.data[q];
                    if (sq->n != l) continue;
                    int m = 1;
                    for (int j = 0; j < l; j++) m &= b[j] >= sq->lo[j] && b[j] <= sq->hi[j];
                    got += m;
                }
                if (got != want) bad++;
            }
            CHECK(bad == 0);
            XGR_VEC_FREE(rv);
            XGR_VEC_FREE(sv);
        }
    /* The full range gives the 9 canonical sequences (ASCII + 8 multi-byte). */
    lw_range_vec rv = {0};
    lw_seq_vec sv = {0};
    const uint32_t all[2] = {0, 0x10FFFF};
    CHECK(lw_norm_class(all, 1, 0, &rv) == 0 && rv.len == 2);
    CHECK(lw_utf8_sequences(rv.data, rv.len, &sv) == 0);
    CHECK(sv.len == 9);
    XGR_VEC_FREE(rv);
    XGR_VEC_FREE(sv);
    /* Byte classes */
    const uint32_t bc[4] = {0x10, 0x20, 0x15, 0x30};
    CHECK(lw_norm_byte_class(bc, 2, 1, &rv) == 0 && rv.len == 2 && rv.data[0].hi == 0x0F &&
          rv.data[1].lo == 0x31 && rv.data[1].hi == 0xFF);
    XGR_VEC_FREE(rv);
}

/* Deterministic walk for rules made of byte edges only. */
static int run_bytes(const xgr_fsm *f, int32_t r, const uint8_t *s, int n) {
    int32_t st = f->rule_start[r];
    for (int i = 0; i < n; i++) {
        int32_t nx = -1;
        for (int32_t e = f->edge_begin[st]; e < f->edge_begin[st + 1]; e++)
            if (f->edges[e].ref < 0 && s[i] >= f->edges[e].lo && s[i] <= f->edges[e].hi) nx = f->edges[e].target;
        if (nx < 0) return 0;
        st = nx;
    }
    return f->final[st];
}

static void test_literals_and_classes(void) {
    xgr_compile_options o = OPTS(32, 16);
    NEWG();
    DEF("root", L("abc"));
    ROOT("root");
    xgr_fsm *f = build(&o);
    if (f) {
        check_fsm(f);
        CHECK(f->n_rules == 1 && f->n_states == 4 && f->n_edges == 3);
        CHECK(fsm_accepts_str(f, "abc") == 1);
        CHECK(fsm_accepts_str(f, "ab") == 0);
        CHECK(fsm_accepts_str(f, "abcd") == 0);
        CHECK(strcmp(f->rule_name[0], "root") == 0);
        xgr_fsm_free(f);
    }
    xgr_ir_free(G);

    /* classes: exhaustive over all scalar values, plus invalid encodings */
    struct {
        int neg, n;
        uint32_t r[6];
    } cl[] = {{0, 1, {'a', 'z'}},
              {0, 2, {0x3B1, 0x3C9, 'A', 'Z'}},
              {1, 1, {'a', 'a'}},
              {1, 3, {'"', '"', '\\', '\\', 0, 0x1F}},
              {0, 1, {0x80, 0x10FFFF}},
              {0, 1, {0xD700, 0xE100}},
              {1, 1, {0x10000, 0x10FFFF}}};
    for (size_t k = 0; k < sizeof cl / sizeof cl[0]; k++) {
        NEWG();
        DEF("root", ok(xgr_ir_class(G, cl[k].r, (size_t)cl[k].n, cl[k].neg)));
        ROOT("root");
        f = build(&o);
        if (!f) continue;
        check_fsm(f);
        CHECK(f->n_rules == 1);
        int bad = 0;
        for (uint32_t c = 0; c <= 0x10FFFF; c++) {
            int want = 0;
            for (int i = 0; i < cl[k].n; i++) want |= c >= cl[k].r[2 * i] && c <= cl[k].r[2 * i + 1];
            if (cl[k].neg) want = !want;
            if (c >= 0xD800 && c <= 0xDFFF) {
                /* surrogates are never matched: check their (invalid) encoding */
                uint8_t b[3] = {0xED, (uint8_t)(0x80 | ((c >> 6) & 0x3F)), (uint8_t)(0x80 | (c & 0x3F))};
                if (run_bytes(f, 0, b, 3)) bad++;
                continue;
            }
            uint8_t b[4];
            int l = utf8_enc(c, b);
            if (run_bytes(f, 0, b, l) != want) bad++;
        }
        /* no invalid 1- or 2-byte string is accepted */
        for (int x = 0; x < 256; x++) {
            uint8_t b[2] = {(uint8_t)x, 0};
            uint32_t cp;
            if (run_bytes(f, 0, b, 1) && !utf8_dec(b, 1, &cp)) bad++;
            for (int y = 0; y < 256; y++) {
                b[1] = (uint8_t)y;
                if (run_bytes(f, 0, b, 2) && utf8_dec(b, 2, &cp) != 2) bad++;
            }
        }
        /* random 3/4-byte strings */
        for (int it = 0; it < 200000; it++) {
            uint8_t b[4] = {(uint8_t)(0xE0 + rnd(0x20)), (uint8_t)rnd(256), (uint8_t)rnd(256), (uint8_t)rnd(256)};
            uint32_t cp;
            int l = 3 + (int)rnd(2);
            if (run_bytes(f, 0, b, l) && utf8_dec(b, l, &cp) != l) bad++;
        }
        CHECK(bad == 0);
        if (k == 0) CHECK(f->n_states == 2 && f->n_edges == 1);
        xgr_fsm_free(f);
        xgr_ir_free(G);
    }

    /* [^"\\] with inlining produces a compact automaton (2-byte range rows merged) */
    NEWG();
    DEF("root", S(3, L("\""), REP(C(1, 2, '"', '"', '\\', '\\'), 0, -1), L("\"")));
    ROOT("root");
    check_all_opts("string", 300);
    xgr_ir_free(G);

    /* byte classes */
    NEWG();
    DEF("root", S(2, BC(1, 1, 0x80, 0xBF), REP(BC(0, 2, 0x80, 0xBF, 0, 3), 1, 3)));
    ROOT("root");
    f = build(&o);
    if (f) {
        check_fsm(f);
        CHECK(fsm_accepts(f, (const uint8_t *)"\xff\x80", 2) == 1);
        CHECK(fsm_accepts(f, (const uint8_t *)"\x7f\x01\x02\xbf", 4) == 1);
        CHECK(fsm_accepts(f, (const uint8_t *)"\x80\x80", 2) == 0);
        CHECK(fsm_accepts(f, (const uint8_t *)"\x00\x04", 2) == 0);
        xgr_fsm_free(f);
    }
    check_all_opts("byteclass", 300);
    xgr_ir_free(G);

    /* empty class: empty language; root keeps one non-final state */
    NEWG();
    DEF("root", A(2, C(1, 1, 0, 0x10FFFF), S(2, L("a"), C(0, 1, 0xD800, 0xDFFF))));
    ROOT("root");
    f = build(&o);
    if (f) {
        CHECK(f->n_rules == 1 && f->n_states == 1 && f->n_edges == 0 && !f->final[0]);
        xgr_fsm_free(f);
    }
    xgr_ir_free(G);
}

/* A state whose byte ranges are pairwise disjoint (listed out of order here) takes each
 * range as its own interval in the subset construction; ranges whose targets turn out
 * equivalent and adjacent end up as one edge after minimisation. Overlapping ranges take
 * the interval split. Exact rows and the language are checked. */
/* The start state of rule 0 has exactly two edges, on [lo0,hi0] and [lo1,hi1] in that order. */
static void check_start_ranges(const xgr_fsm *f, int lo0, int hi0, int lo1, int hi1) {
    int32_t s0 = f->rule_start[0];
    const xgr_edge *e = f->edges + f->edge_begin[s0];
    CHECK(f->edge_begin[s0 + 1] - f->edge_begin[s0] == 2);
    if (f->edge_begin[s0 + 1] - f->edge_begin[s0] == 2)
        CHECK(e[0].lo == lo0 && e[0].hi == hi0 && e[1].lo == lo1 && e[1].hi == hi1);
}

static void test_disjoint_ranges(void) {
    xgr_compile_options o = OPTS(32, 16);
    NEWG();
    /* root ::= "b" "1" | "a" "2" | [c-d] "2" | "f" "2" | "e" "9" */
    DEF("root", A(5, S(2, L("b"), L("1")), S(2, L("a"), L("2")),
                  S(2, BC(0, 1, 'c', 'd'), L("2")), S(2, L("f"), L("2")),
                  S(2, L("e"), L("9"))));
    ROOT("root");
    xgr_fsm *f = build(&o);
    if (f) {
        check_fsm(f);
        int32_t s0 = f->rule_start[0];
        const xgr_edge *e = f->edges + f->edge_begin[s0];
        /* a -> X, b -> Y, c-d -> X, e -> Z, f -> X: sorted, disjoint, not merged across b */
        CHECK(f->edge_begin[s0 + 1] - f->edge_begin[s0] == 5);
        if (f->edge_begin[s0 + 1] - f->edge_begin[s0] == 5) {
            CHECK(e[0].lo == 'a' && e[0].hi == 'a' && e[1].lo == 'b' && e[1].hi == 'b');
            CHECK(e[2].lo == 'c' && e[2].hi == 'd' && e[3].lo == 'e' && e[3].hi == 'e');
            CHECK(e[4].lo == 'f' && e[4].hi == 'f');
            CHECK(e[0].target == e[2].target && e[2].target == e[4].target);
            CHECK(e[1].target != e[0].target && e[3].target != e[0].target);
        }
        CHECK(f->n_states == 5); /* start, X, Y, Z, final */
        const char *yes[] = {"b1", "a2", "c2", "d2", "f2", "e9"};
        const char *no[] = {"b2", "a1", "e", "e2", "g2", "", "c", "e99"};
        for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) CHECK(fsm_accepts_str(f, yes[i]) == 1);
        for (size_t i = 0; i < sizeof no / sizeof *no; i++) CHECK(fsm_accepts_str(f, no[i]) == 0);
        xgr_fsm_free(f);
    }
    check_all_opts("disjoint ranges", 200);
    xgr_ir_free(G);

    /* adjacent disjoint ranges into equivalent states merge: "a" "2" | "b" "2" | [0-9] "x" */
    NEWG();
    DEF("root", A(3, S(2, L("b"), L("2")), S(2, L("a"), L("2")), S(2, BC(0, 1, '0', '9'), L("x"))));
    ROOT("root");
    f = build(&o);
    if (f) {
        check_fsm(f);
        check_start_ranges(f, '0', '9', 'a', 'b');
        CHECK(fsm_accepts_str(f, "a2") == 1 && fsm_accepts_str(f, "b2") == 1);
        CHECK(fsm_accepts_str(f, "5x") == 1 && fsm_accepts_str(f, "52") == 0);
        xgr_fsm_free(f);
    }
    xgr_ir_free(G);

    /* overlapping ranges: the interval split ("a" "x" | [a-c] "y") */
    NEWG();
    DEF("root", A(2, S(2, L("a"), L("x")), S(2, BC(0, 1, 'a', 'c'), L("y"))));
    ROOT("root");
    f = build(&o);
    if (f) {
        check_fsm(f);
        check_start_ranges(f, 'a', 'a', 'b', 'c');
        CHECK(fsm_accepts_str(f, "ax") == 1 && fsm_accepts_str(f, "ay") == 1);
        CHECK(fsm_accepts_str(f, "cy") == 1 && fsm_accepts_str(f, "cx") == 0);
        xgr_fsm_free(f);
    }
    check_all_opts("overlapping ranges", 200);
    xgr_ir_free(G);
}

static void test_small_repeats(void) {
    NEWG();
    DEF("root", A(6, S(2, L("a"), REP(L("xy"), 2, 4)), S(2, L("b"), REP(L("x"), 0, 3)),
                  S(2, L("c"), REP(L("x"), 3, -1)), S(2, L("d"), REP(L("x"), 0, -1)),
                  S(2, L("e"), REP(L("x"), 1, -1)), S(3, L("f"), REP(L("x"), 0, 1), L("y"))));
    ROOT("root");
    xgr_compile_options o = OPTS(32, 16);
    xgr_fsm *f = build(&o);
    if (f) {
        check_fsm(f);
        CHECK(f->n_rules == 1); /* everything unrolled */
        const char *yes[] = {"axyxy", "axyxyxyxy", "b", "bxxx", "cxxx", "cxxxxxxx", "d", "dxxxx", "ex", "fy", "fxy"};
        const char *no[] = {"axy", "axyxyxyxyxy", "bxxxx", "cxx", "e", "fxxy", "a"};
        for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) CHECK(fsm_accepts_str(f, yes[i]) == 1);
        for (size_t i = 0; i < sizeof no / sizeof *no; i++) CHECK(fsm_accepts_str(f, no[i]) == 0);
        xgr_fsm_free(f);
    }
    check_all_opts("small repeats", 400);
    xgr_ir_free(G);

    /* nested unrolled repeats with nullable bodies */
    NEWG();
    DEF("root", REP(S(2, REP(L("a"), 0, 2), REP(L("b"), 0, 1)), 2, 3));
    ROOT("root");
    check_all_opts("nested nullable", 400);
    xgr_ir_free(G);
}

static void test_large_repeats(void) {
    /* [a-z]{0,100000}: root -> REPEAT rule -> body rule; a handful of states, fast */
    NEWG();
    DEF("root", REP(C(0, 1, 'a', 'z'), 0, 100000));
    ROOT("root");
    xgr_compile_options o = OPTS(32, 16);
    double t0 = now_ms();
    xgr_fsm *f = build(&o);
    double t1 = now_ms();
    if (f) {
        check_fsm(f);
        printf("  [a-z]{0,100000}: %d rules, %d states, %.3f ms\n", (int)f->n_rules, (int)f->n_states, t1 - t0);
        CHECK(f->n_states <= 5);
        int32_t rr = find_kind(f, XGR_RULE_REPEAT, 0);
        CHECK(rr > 0);
        if (rr > 0) {
            CHECK(f->repeat_min[rr] == 0 && f->repeat_max[rr] == 100000);
            CHECK(f->rule_nullable[rr] == 1);
            int32_t ch = f->repeat_child[rr];
            CHECK(rule_states(f, ch) == 2 && !f->rule_nullable[ch]);
        }
        CHECK(f->rule_nullable[f->root] == 1);
        CHECK(fsm_accepts_str(f, "") == 1);
        CHECK(fsm_accepts_str(f, "abcxyz") == 1);
        CHECK(fsm_accepts_str(f, "abc1") == 0);
        xgr_fsm_free(f);
    }
    xgr_ir_free(G);

    /* x{20,}, x{17,30}, rule = large repeat (aliased to the counter rule when not
     * inlined) */
    NEWG();
    DEF("item", REP(L("ab"), 17, 30));
    DEF("root", A(3, S(2, L("u"), REP(L("x"), 20, -1)), S(2, L("v"), R("item")), S(3, L("w"), R("item"), R("item"))));
    ROOT("root");
    for (int inl = -1; inl <= 32; inl += 33) {
        o = OPTS(inl, 16);
        f = build(&o);
        if (!f) continue;
        check_fsm(f);
        CHECK(count_kind(f, XGR_RULE_REPEAT) == 2);
        CHECK(f->n_rules == 5);
        int found_item = 0, found_x = 0;
        for (int32_t r = 0; r < f->n_rules; r++) {
            if (f->rule_kind[r] != XGR_RULE_REPEAT) continue;
            if (f->repeat_min[r] == 17 && f->repeat_max[r] == 30)
                found_item = inl < 0 ? strcmp(f->rule_name[r], "item") == 0 : 1;
            if (f->repeat_min[r] == 20 && f->repeat_max[r] == -1) found_x = 1;
        }
        CHECK(found_item && found_x);
        char buf[80];
        memset(buf, 'x', 21);
        buf[0] = 'u';
        buf[21] = 0;
        CHECK(fsm_accepts_str(f, buf) == 1); /* u x^20 */
        buf[20] = 0;
        CHECK(fsm_accepts_str(f, buf) == 0); /* u x^19 */
        strcpy(buf, "v");
        for (int i = 0; i < 17; i++) strcat(buf, "ab");
        CHECK(fsm_accepts_str(f, buf) == 1);
        buf[strlen(buf) - 2] = 0;
        CHECK(fsm_accepts_str(f, buf) == 0);
        xgr_fsm_free(f);
    }
    check_all_opts("large repeats", 300);
    xgr_ir_free(G);

    /* unbounded repeat that stays unrolled vs compressed: x{3,} with threshold 2 */
    NEWG();
    DEF("root", S(2, REP(S(2, L("k"), REP(C(0, 1, '0', '9'), 1, 3)), 3, -1), L(";")));
    ROOT("root");
    check_all_opts("repeat of seq", 400);
    xgr_ir_free(G);

    /* nested small repeats: unrolling would multiply; the outer one is compressed */
    NEWG();
    DEF("root", S(2, REP(REP(REP(L("ab"), 0, 10), 1, 10), 2, 10), L(";")));
    ROOT("root");
    f = build(&o);
    if (f) {
        check_fsm(f);
        printf("  ((ab{0,10}){1,10}){2,10}: %d rules, %d states\n", (int)f->n_rules, (int)f->n_states);
        CHECK(count_kind(f, XGR_RULE_REPEAT) == 1 && f->n_states < 300);
        CHECK(fsm_accepts_str(f, ";") == 1);
        CHECK(fsm_accepts_str(f, "abab;") == 1);
        CHECK(fsm_accepts_str(f, "aba;") == 0);
        xgr_fsm_free(f);
    }
    check_all_opts("nested repeats", 300);
    xgr_ir_free(G);

    /* many large repeats of the same node share one counter rule */
    NEWG();
    int32_t big = REP(C(0, 1, 'a', 'b'), 0, 5000);
    DEF("w", big);
    DEF("root", S(5, R("w"), L(","), R("w"), L(","), big));
    ROOT("root");
    f = build(&o);
    if (f) {
        check_fsm(f);
        CHECK(count_kind(f, XGR_RULE_REPEAT) == 1);
        xgr_fsm_free(f);
    }
    xgr_ir_free(G);
}

static void test_nullable_repeat_children(void) {
    xgr_compile_options o = OPTS(32, 16);
    /* ("a" | ""){5,100}: body nullable -> min 0, child = "a" */
    NEWG();
    DEF("root", S(2, REP(A(2, L("a"), E()), 5, 100), L("!")));
    ROOT("root");
    xgr_fsm *f = build(&o);
    if (f) {
        check_fsm(f);
        int32_t rr = find_kind(f, XGR_RULE_REPEAT, 0);
        CHECK(rr >= 0);
        if (rr >= 0) {
            CHECK(f->repeat_min[rr] == 0 && f->repeat_max[rr] == 100);
            CHECK(!f->rule_nullable[f->repeat_child[rr]]);
        }
        CHECK(fsm_accepts_str(f, "!") == 1);
        CHECK(fsm_accepts_str(f, "aaa!") == 1);
        xgr_fsm_free(f);
    }
    check_all_opts("nullable body", 300);
    xgr_ir_free(G);

    /* ("a"? "b"?){3,50} and nullable through rule refs: B ::= A A, A ::= "a"? */
    NEWG();
    DEF("A", REP(L("a"), 0, 1));
    DEF("B", S(2, R("A"), R("A")));
    DEF("C", A(2, R("B"), S(2, L("c"), R("C"))));
    DEF("root", A(4, S(2, L("1"), REP(S(2, REP(L("a"), 0, 1), REP(L("b"), 0, 1)), 3, 50)),
                  S(3, L("2"), REP(R("B"), 20, 40), L("x")),
                  S(3, L("3"), REP(R("C"), 18, -1), L("y")),
                  S(3, L("4"), REP(S(2, R("B"), R("root")), 0, 30), L("z"))));
    ROOT("root");
    for (int inl = -1; inl <= 32; inl += 33) {
        o = OPTS(inl, 16);
        f = build(&o);
        if (!f) continue;
        check_fsm(f);
        for (int32_t r = 0; r < f->n_rules; r++)
            if (f->rule_kind[r] == XGR_RULE_REPEAT) {
                CHECK(f->repeat_min[r] == 0);
                CHECK(!f->rule_nullable[f->repeat_child[r]]);
            }
        CHECK(fsm_accepts_str(f, "1") == 1);
        CHECK(fsm_accepts_str(f, "1abba") == 1);
        CHECK(fsm_accepts_str(f, "2x") == 1);
        CHECK(fsm_accepts_str(f, "2aaax") == 1);
        CHECK(fsm_accepts_str(f, "3ccay") == 1);
        CHECK(fsm_accepts_str(f, "4a1z") == 1);
        CHECK(fsm_accepts_str(f, "42xz") == 1);
        CHECK(fsm_accepts_str(f, "4z") == 1);
        CHECK(fsm_accepts_str(f, "4") == 0);
        xgr_fsm_free(f);
    }
    check_all_opts("nullable refs", 400);
    xgr_ir_free(G);
}

/* A rule that spells "<inlined rule> <rule>" after many different prefixes (a trie of
 * property names, each branch ending in "any other character, then the rest"): the
 * sequences share one copy of the inlined rule (nfa.c, shared_seq); the language, and
 * the automaton, are those of separate copies. */
static void test_shared_ref_sequences(void) {
    NEWG();
    DEF("k", A(2, C(1, 3, 'a', 'c', '"', '"', 0, 0x1f), S(2, L("\\"), C(0, 2, 'n', 'n', 't', 't'))));
    DEF("rest", S(2, REP(C(1, 1, '"', '"'), 0, -1), L("\"")));
    DEF("j", A(2, C(0, 1, 'x', 'z'), L("w")));
    int32_t alts[40];
    for (int i = 0; i < 36; i++) {
        char w[4] = {(char)('a' + i % 3), (char)('a' + (i / 3) % 3), (char)('a' + i / 9), 0};
        alts[i] = S(2, L(w), i % 4 == 3 ? S(2, R("j"), R("rest")) : S(2, R("k"), R("rest")));
    }
    alts[36] = S(2, R("k"), R("rest"));
    alts[37] = S(3, L("q"), R("k"), A(2, S(2, R("k"), R("rest")), L("!")));
    alts[38] = S(3, R("k"), R("rest"), L("."));
    alts[39] = L("\"");
    int32_t body = A(2, alts[0], alts[1]);
    for (int i = 2; i < 40; i++) body = A(2, body, alts[i]);
    DEF("root", body);
    ROOT("root");
    check_all_opts("shared ref sequences", 3000);
    xgr_compile_options on = OPTS(64, 16);
    xgr_fsm *f = build(&on);
    if (f) {
        const char *yes[] = {"aab\\n\"", "abcd\"", "\\tzz\"", "qd\\n\"", "qd!", "e\".", "\""};
        const char *no[] = {"aaa\"", "qd", "qa", "\"x", "e\"x"};
        for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
            CHECK(fsm_accepts_str(f, yes[i]) == 1);
            CHECK(ir_accepts(G, (const uint8_t *)yes[i], (int)strlen(yes[i])) == 1);
        }
        for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
            CHECK(fsm_accepts_str(f, no[i]) == 0);
            CHECK(ir_accepts(G, (const uint8_t *)no[i], (int)strlen(no[i])) == 0);
        }
        xgr_fsm_free(f);
    }
    xgr_ir_free(G);
}

static void test_inlining_and_recursion(void) {
    /* JSON-like nested arrays */
    NEWG();
    DEF("ws", REP(C(0, 2, ' ', ' ', '\n', '\n'), 0, -1));
    DEF("num", S(2, REP(L("-"), 0, 1), REP(C(0, 1, '0', '9'), 1, -1)));
    DEF("str", S(3, L("\""), REP(A(2, C(1, 2, '"', '"', '\\', '\\'), S(2, L("\\"), C(0, 2, '"', '"', 'n', 'n'))), 0, -1), L("\"")));
    DEF("arr", S(4, L("["), R("ws"), REP(S(3, R("value"), REP(S(4, L(","), R("ws"), R("value"), R("ws")), 0, -1), R("ws")), 0, 1), L("]")));
    DEF("value", A(3, R("num"), R("str"), R("arr")));
    DEF("unused", L("never"));
    DEF("root", S(3, R("ws"), R("value"), R("ws")));
    ROOT("root");
    xgr_compile_options on = OPTS(32, 16), off = OPTS(-1, 16);
    xgr_fsm *a = build(&on), *b = build(&off);
    if (a && b) {
        check_fsm(a);
        check_fsm(b);
        printf("  json-ish: inline on %d rules / %d states, off %d rules / %d states\n", (int)a->n_rules,
               (int)a->n_states, (int)b->n_rules, (int)b->n_states);
        CHECK(a->n_rules < b->n_rules);
        CHECK(b->n_rules == 6); /* all but "unused" */
        for (int32_t r = 0; r < b->n_rules; r++) CHECK(strcmp(b->rule_name[r], "unused") != 0);
        CHECK(strcmp(a->rule_name[a->root], "root") == 0);
        const char *samples[] = {"[]", "[1,2]", "[[],[[\"a\\n\"]]]", " [ 1 , [ -2 ] ] ", "[1,]", "[", "\"x", "-", "[\"\\q\"]"};
        for (size_t i = 0; i < sizeof samples / sizeof *samples; i++) {
            int x = fsm_accepts_str(a, samples[i]), y = fsm_accepts_str(b, samples[i]);
            int z = ir_accepts(G, (const uint8_t *)samples[i], (int)strlen(samples[i]));
            CHECK(x == z && y == z);
        }
        CHECK(fsm_accepts_str(a, "[[],[[\"a\\n\"]]]") == 1);
        CHECK(fsm_accepts_str(a, "[1,]") == 0);
    }
    xgr_fsm_free(a);
    xgr_fsm_free(b);
    check_all_opts("json", 600);
    xgr_ir_free(G);

    /* self-recursive (not left) and mutually recursive rules are never inlined */
    NEWG();
    DEF("p", A(2, L("x"), S(3, L("("), R("q"), L(")"))));
    DEF("q", S(2, R("p"), REP(S(2, L("+"), R("p")), 0, -1)));
    DEF("root", R("q"));
    ROOT("root");
    xgr_fsm *f = build(&on);
    if (f) {
        check_fsm(f);
        CHECK(f->n_rules == 3);
        CHECK(fsm_accepts_str(f, "((x+x)+x)") == 1);
        CHECK(fsm_accepts_str(f, "((x+x)+x") == 0);
        xgr_fsm_free(f);
    }
    check_all_opts("mutual recursion", 400);
    xgr_ir_free(G);

    /* equal languages give identical automata (canonical minimal form) */
    NEWG();
    DEF("r1", A(3, L("ab"), L("ac"), S(2, L("a"), C(0, 1, 'b', 'c'))));
    DEF("r2", S(2, L("a"), A(2, L("c"), L("b"))));
    DEF("root", S(2, R("r1"), R("r2")));
    ROOT("root");
    xgr_compile_options noinl = OPTS(-1, 16);
    f = build(&noinl);
    if (f && f->n_rules == 3) {
        int32_t x = 1, y = 2;
        CHECK(rule_states(f, x) == rule_states(f, y));
        int same = rule_states(f, x) == 3;
        for (int32_t i = 0; same && i < rule_states(f, x); i++) {
            int32_t sx = f->rule_start[x] + i, sy = f->rule_start[y] + i;
            same = f->final[sx] == f->final[sy] &&
                   f->edge_begin[sx + 1] - f->edge_begin[sx] == f->edge_begin[sy + 1] - f->edge_begin[sy];
            for (int32_t e = 0; same && e < f->edge_begin[sx + 1] - f->edge_begin[sx]; e++) {
                const xgr_edge *ex = &f->edges[f->edge_begin[sx] + e], *ey = &f->edges[f->edge_begin[sy] + e];
                same = ex->lo == ey->lo && ex->hi == ey->hi && ex->ref == ey->ref &&
                       ex->target - f->rule_start[x] == ey->target - f->rule_start[y];
            }
        }
        CHECK(same);
    } else {
        CHECK(0);
    }
    xgr_fsm_free(f);
    xgr_ir_free(G);

    /* a rule deriving only "" disappears; an unproductive alternative is dropped */
    NEWG();
    DEF("nothing", E());
    DEF("loop", S(2, L("z"), R("loop")));
    DEF("root", A(2, S(3, L("a"), R("nothing"), L("b")), S(2, L("c"), R("loop"))));
    ROOT("root");
    f = build(&noinl);
    if (f) {
        check_fsm(f);
        CHECK(f->n_rules == 1);
        CHECK(fsm_accepts_str(f, "ab") == 1);
        xgr_fsm_free(f);
    }
    xgr_ir_free(G);
}

static int32_t rule_by_name(const xgr_fsm *f, const char *name) {
    for (int32_t r = 0; r < f->n_rules; r++)
        if (strcmp(f->rule_name[r], name) == 0) return r;
    return -1;
}

/* Literal-led alternations of 8+ sequences (tool-call groups, enums) are built directly
 * (trie_alt.c): minimal, references kept as references, the same language as the IR. */
static void test_literal_led_alternations(void) {
    static const char *names[10] = {"get_weather>", "get_time>",  "geo_lookup>", "search>",
                                    "send_mail>",   "sum>",       "a>",          "ab_test>",
                                    "zeta>",        "get_date>"};
    NEWG();
    DEF("args", S(3, L("{"), REP(C(0, 1, 'a', 'z'), 0, 3), L("}")));
    DEF("big", S(3, L("["), REP(C(0, 1, '0', '9'), 1, -1), L("]")));
    DEF("nothing", E());
    int32_t kids[10];
    for (int i = 0; i < 10; i++)
        kids[i] = i % 3 == 0 ? S(4, L(names[i]), R("args"), R("nothing"), L("</f>"))
                  : i % 3 == 1 ? S(3, L(names[i]), R("big"), L("</f>"))
                               : S(2, L(names[i]), L("</f>"));
    DEF("root", ok(xgr_ir_alt(G, kids, 10)));
    ROOT("root");
    check_all_opts("trie group", 300);
    xgr_compile_options o = OPTS(100000, 16);
    xgr_fsm *f = build(&o);
    if (f) {
        int32_t g = f->root, args = rule_by_name(f, "args");
        CHECK(g >= 0 && args >= 0); /* even a rule small enough to inline stays a reference */
        if (g >= 0) {
            /* Minimal: the alternatives with <args> share one tail, and so do those
             * with <big>: two reference edges in the whole rule. */
            int32_t refs = 0;
            for (int32_t s = f->rule_start[g]; s < f->rule_start[g] + rule_states(f, g); s++)
                for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++)
                    refs += f->edges[e].ref >= 0;
            CHECK(refs == 2);
            char buf[64];
            for (int i = 0; i < 10; i++) {
                snprintf(buf, sizeof buf, "%s%s</f>", names[i],
                         i % 3 == 0 ? "{ab}" : i % 3 == 1 ? "[42]" : "");
                CHECK(fsm_accepts_str(f, buf) == 1);
                snprintf(buf, sizeof buf, "%s</f>", names[i]);
                CHECK(fsm_accepts_str(f, buf) == (i % 3 == 2));
            }
            CHECK(fsm_accepts_str(f, "get_>{}</f>") == 0);
            CHECK(fsm_accepts_str(f, "a>{}</f>") == 1 && fsm_accepts_str(f, "a></f>") == 0);
            CHECK(fsm_accepts_str(f, "ab></f>") == 0);
        }
        xgr_fsm_free(f);
    }
    xgr_ir_free(G);

    /* A trie of property names with additional properties (json_schema/emit.py
     * key_not_in): each node reads the next letter of a name, `kchar_x rest` (any other
     * character, then the rest of the key) or the closing quote. Its references go to
     * small rules whose first bytes are wide (a JSON string character), so the direct
     * builder refuses it (trie_alt.c inlines_wide): the general path inlines them and the
     * key is one automaton without reference edges (as references, the first mask at the
     * key's start walked the vocabulary twice). Same language. */
    NEWG();
    {
        static const char *keys[8] = {"ab", "ba", "cd", "dc", "ef", "fe", "gh", "hg"};
        DEF("kch", A(2, C(1, 4, 'a', 'h', '"', '"', '\\', '\\', 0, 0x1f), S(2, L("\\"), C(0, 2, 'n', 'n', 't', 't'))));
        DEF("ch", A(2, C(1, 3, '\\', '\\', '"', '"', 0, 0x1f), S(2, L("\\"), C(0, 2, 'n', 'n', 't', 't'))));
        DEF("rest", S(2, REP(R("ch"), 0, -1), L("\"")));
        int32_t kk[10];
        for (int i = 0; i < 8; i++) {
            char l0[2] = {keys[i][0], 0}, l1[2] = {keys[i][1], 0};
            kk[i] = S(2, L(l0), A(3, S(3, L(l1), R("ch"), R("rest")),
                                  S(2, R("kch"), R("rest")), L("\"")));
        }
        kk[8] = S(2, R("kch"), R("rest"));
        kk[9] = L("\"");
        DEF("key", ok(xgr_ir_alt(G, kk, 10)));
        DEF("root", S(3, L("{\""), R("key"), L(":1}")));
        ROOT("root");
        check_all_opts("key trie", 300);
        xgr_compile_options dflt = OPTS(64, 16); /* the default inline_max_states */
        f = build(&dflt);
        if (f) {
            check_fsm(f);
            int32_t key = rule_by_name(f, "key"), refs = 0;
            CHECK(key >= 0 && key != f->root); /* too large to inline: its own automaton */
            CHECK(rule_by_name(f, "kch") < 0 && rule_by_name(f, "ch") < 0 && rule_by_name(f, "rest") < 0);
            for (int32_t st = 0; st < f->n_states; st++)
                for (int32_t e = f->edge_begin[st]; e < f->edge_begin[st + 1]; e++)
                    refs += f->edges[e].ref >= 0 && f->edges[e].ref != key;
            CHECK(refs == 0);
            CHECK(fsm_accepts_str(f, "{\"ab\":1}") == 0 && fsm_accepts_str(f, "{\"a\":1}") == 1);
            CHECK(fsm_accepts_str(f, "{\"abc\":1}") == 1 && fsm_accepts_str(f, "{\"a\\n\":1}") == 1);
            CHECK(fsm_accepts_str(f, "{\"\":1}") == 1 && fsm_accepts_str(f, "{\"zz\\t\":1}") == 1);
            CHECK(fsm_accepts_str(f, "{\"hg\":1}") == 0 && fsm_accepts_str(f, "{\"hgx\":1}") == 1);
            xgr_fsm_free(f);
        }
    }
    xgr_ir_free(G);

    /* Shapes the direct builder refuses (one literal a prefix of another, a nested
     * alternation, a leading reference) fall back to the general path, same language. */
    NEWG();
    DEF("x", L("x"));
    int32_t k2[9];
    for (int i = 0; i < 8; i++) {
        char lit[16];
        snprintf(lit, sizeof lit, "k%d", i);
        k2[i] = S(2, L(lit), R("x"));
    }
    k2[8] = S(2, L("k1"), L("0")); /* "k1" is a prefix of "k10" */
    DEF("root", ok(xgr_ir_alt(G, k2, 9)));
    ROOT("root");
    check_all_opts("trie fallback prefix", 200);
    xgr_ir_free(G);

    NEWG();
    DEF("x", L("x"));
    int32_t k3[8];
    for (int i = 0; i < 8; i++) {
        char lit[16];
        snprintf(lit, sizeof lit, "m%d", i);
        k3[i] = i == 7 ? S(2, R("x"), L(lit)) : i == 6 ? S(2, L(lit), A(2, L("p"), L("q"))) : L(lit);
    }
    DEF("root", ok(xgr_ir_alt(G, k3, 8)));
    ROOT("root");
    check_all_opts("trie fallback shapes", 200);
    xgr_ir_free(G);

    /* Alternatives holding small alternations of literals (a special token spelled as
     * ("<c>" | its marker bytes), two end strings) and words that are prefixes of others
     * ("t1" of "t10"): still built directly, each small alternation one symbol of the
     * trie (a choice) shared by every alternative, the small referenced rule kept as a
     * reference, same language, no duplicate ref edges. */
    NEWG();
    DEF("obj", S(3, L("{"), REP(C(0, 1, 'a', 'z'), 0, 2), L("}")));
    int32_t k5[12];
    for (int i = 0; i < 12; i++) {
        char lit[16];
        snprintf(lit, sizeof lit, "t%d", i);
        k5[i] = S(4, A(2, L("<c>"), L("\xff\x80")), L(lit), R("obj"), A(2, L("</c>"), L("!")));
    }
    DEF("root", ok(xgr_ir_alt(G, k5, 12)));
    ROOT("root");
    check_all_opts("trie expanded", 200);
    f = build(&o);
    if (f) {
        check_fsm(f);
        CHECK(rule_by_name(f, "obj") >= 0);
        CHECK(fsm_accepts_str(f, "<c>t10{ab}!") == 1 && fsm_accepts_str(f, "\xff\x80t1{}</c>") == 1);
        CHECK(fsm_accepts_str(f, "<c>t1{}") == 0 && fsm_accepts_str(f, "<c>t12{}!") == 0);
        /* one shared choice: the start reads '<' and 0xFF, and both spellings meet again
         * before the tool names */
        int32_t s0 = f->rule_start[f->root];
        CHECK(f->edge_begin[s0 + 1] - f->edge_begin[s0] == 2);
        if (f->edge_begin[s0 + 1] - f->edge_begin[s0] == 2) {
            int32_t a = f->edges[f->edge_begin[s0]].target, b = f->edges[f->edge_begin[s0] + 1].target;
            for (int k = 0; k < 2 && a >= 0; k++) /* "<c>": two more bytes */
                a = f->edge_begin[a + 1] - f->edge_begin[a] == 1 ? f->edges[f->edge_begin[a]].target : -1;
            if (b >= 0) /* 0xFF 0x80: one more byte */
                b = f->edge_begin[b + 1] - f->edge_begin[b] == 1 ? f->edges[f->edge_begin[b]].target : -2;
            CHECK(a >= 0 && a == b);
        }
        xgr_fsm_free(f);
    }
    xgr_ir_free(G);

    /* A choice whose first byte the same state also reads for another alternative ("p"
     * then ("ab" | "c") beside "pa" "x") cannot stay one symbol: the choices are expanded
     * into words after all, same language. */
    NEWG();
    int32_t k6[9];
    for (int i = 0; i < 8; i++) {
        char lit[16];
        snprintf(lit, sizeof lit, "q%d", i);
        k6[i] = S(3, L("p"), A(2, L("ab"), L("c")), L(lit));
    }
    k6[8] = S(2, L("pa"), L("x"));
    DEF("root", ok(xgr_ir_alt(G, k6, 9)));
    ROOT("root");
    check_all_opts("trie choice clash", 200);
    f = build(&o);
    if (f) {
        check_fsm(f);
        CHECK(fsm_accepts_str(f, "pabq3") == 1 && fsm_accepts_str(f, "pcq0") == 1);
        CHECK(fsm_accepts_str(f, "pax") == 1 && fsm_accepts_str(f, "pabx") == 0);
        CHECK(fsm_accepts_str(f, "paq1") == 0 && fsm_accepts_str(f, "pa") == 0);
        xgr_fsm_free(f);
    }
    xgr_ir_free(G);

    /* The rule a TagDispatch trigger hands over to is built directly however few tools it
     * has (a new tool set misses the automaton memo), so its small referenced rule stays a
     * reference there; the same two-way alternation elsewhere takes the general path,
     * which inlines it. */
    NEWG();
    DEF("args", S(3, L("{"), REP(C(0, 1, 'a', 'z'), 0, 3), L("}")));
    int32_t pair[2] = {S(3, L("f>"), R("args"), L("</f>")), S(3, L("g>"), R("args"), L("</f>"))};
    DEF("group", ok(xgr_ir_alt(G, pair, 2)));
    int32_t pair2[2] = {S(3, L("f>"), R("args"), L("</f>")), S(3, L("g>"), R("args"), L("</f>"))};
    DEF("plain", ok(xgr_ir_alt(G, pair2, 2)));
    {
        const uint8_t *trig[1] = {(const uint8_t *)"<call="};
        size_t tlen[1] = {6};
        int32_t trule[1] = {xgr_ir_find_rule(G, "group", 5)};
        DEF("calls", ok(xgr_ir_tag_dispatch(G, trig, tlen, trule, 1, NULL, NULL, 0, 1)));
    }
    DEF("root", S(3, R("calls"), L("|"), R("plain")));
    ROOT("root");
    f = build(&o); /* (the IR interpreter of check_all_opts has no TagDispatch) */
    if (f) {
        check_fsm(f);
        int32_t grp = rule_by_name(f, "group"), pl = rule_by_name(f, "plain");
        CHECK(grp >= 0 && rule_by_name(f, "args") >= 0);
        int32_t grp_refs = 0, root_refs = 0;
        if (grp >= 0)
            for (int32_t st = f->rule_start[grp]; st < f->rule_start[grp] + rule_states(f, grp); st++)
                for (int32_t e = f->edge_begin[st]; e < f->edge_begin[st + 1]; e++)
                    grp_refs += f->edges[e].ref >= 0;
        CHECK(grp_refs == 1); /* both tools share the <args> tail: minimal */
        /* "plain" is inlined into root or kept without reference edges */
        int32_t in = pl >= 0 ? pl : f->root;
        for (int32_t st = f->rule_start[in]; st < f->rule_start[in] + rule_states(f, in); st++)
            for (int32_t e = f->edge_begin[st]; e < f->edge_begin[st + 1]; e++)
                root_refs += f->edges[e].ref >= 0 && f->edges[e].ref == rule_by_name(f, "args");
        CHECK(root_refs == 0);
        CHECK(fsm_accepts_str(f, "hi <call=f>{ab}</f> ok|g>{}</f>") == 1);
        CHECK(fsm_accepts_str(f, "<call=g>{}</f>|f>{abc}</f>") == 1);
        CHECK(fsm_accepts_str(f, "<call=h>{}</f>|f>{}</f>") == 0);
        CHECK(fsm_accepts_str(f, "<call=f>{abcd}</f>|f>{}</f>") == 0);
        xgr_fsm_free(f);
    }
    xgr_ir_free(G);

    /* An enum of 300 quoted words: one state per distinct prefix, one shared final. */
    NEWG();
    int32_t k4[300];
    for (int i = 0; i < 300; i++) {
        char lit[16];
        snprintf(lit, sizeof lit, "\"w%03d\"", i);
        k4[i] = L(lit);
    }
    DEF("root", ok(xgr_ir_alt(G, k4, 300)));
    ROOT("root");
    check_all_opts("trie enum", 200);
    f = build(&o);
    if (f) {
        /* minimal: start, after '"', after 'w', then one state per digit position
         * (every hundreds / tens prefix has the same futures), before '"', final */
        CHECK(rule_states(f, f->root) == 7);
        CHECK(fsm_accepts_str(f, "\"w299\"") == 1 && fsm_accepts_str(f, "\"w300\"") == 0);
        xgr_fsm_free(f);
    }
    /* the state budget holds on this path too: an error naming the rule, no automaton */
    xgr_compile_options tiny = OPTS(100000, 16);
    tiny.max_fsm_states = 5;
    f = NULL;
    CHECK(xgr_fsm_build(G, &tiny, &f) == XGR_ERR_LIMIT && f == NULL &&
          strstr(xgr_last_error(), "'root'") != NULL);
    xgr_ir_free(G);
}

static void test_lookahead(void) {
    NEWG();
    DEF("key", REP(C(0, 1, 'a', 'z'), 1, -1));
    LOOK("key", S(2, REP(L(" "), 0, -1), L(":")));
    DEF("small", L("s"));
    LOOK("small", L(";"));
    DEF("root", S(5, L("{"), R("key"), L(":"), R("small"), L(";}")));
    ROOT("root");
    xgr_compile_options o = OPTS(100, 16);
    xgr_fsm *f = build(&o);
    if (f) {
        check_fsm(f);
        int32_t key = -1, small = -1;
        for (int32_t r = 0; r < f->n_rules; r++) {
            if (strcmp(f->rule_name[r], "key") == 0) key = r;
            if (strcmp(f->rule_name[r], "small") == 0) small = r;
        }
        CHECK(key > 0 && small > 0); /* rules with lookahead are not inlined */
        if (key > 0 && small > 0) {
            int32_t la = f->rule_lookahead[key], lb = f->rule_lookahead[small];
            CHECK(la > 0 && lb > 0 && la != lb);
            CHECK(f->rule_kind[la] == XGR_RULE_NORMAL);
            for (int32_t e = 0; e < f->n_edges; e++) CHECK(f->edges[e].ref != la && f->edges[e].ref != lb);
            /* the lookahead rule's language: run it as a root */
            int32_t saved = f->root;
            f->root = la;
            CHECK(fsm_accepts_str(f, "  :") == 1);
            CHECK(fsm_accepts_str(f, ":") == 1);
            CHECK(fsm_accepts_str(f, " ") == 0);
            f->root = saved;
        }
        CHECK(fsm_accepts_str(f, "{abc:s;}") == 1);
        char *dump = NULL;
        size_t dl = 0;
        CHECK(xgr_fsm_dump(f, &dump, &dl) == 0 && dump && strlen(dump) == dl && strstr(dump, "lookahead="));
        xgr_free(dump);
        xgr_fsm_free(f);
    }
    xgr_ir_free(G);
}

static void test_limits(void) {
    /* max_rules */
    NEWG();
    DEF("a", S(2, L("a"), REP(R("b"), 0, 1)));
    DEF("b", S(2, L("b"), REP(R("c"), 0, 1)));
    DEF("c", S(2, L("c"), REP(R("a"), 0, 1)));
    DEF("root", R("a"));
    ROOT("root");
    xgr_compile_options o = OPTS(-1, 16);
    o.max_rules = 2;
    xgr_fsm *f = NULL;
    int rc = xgr_fsm_build(G, &o, &f);
    CHECK(rc == XGR_ERR_LIMIT && f == NULL);
    CHECK(strstr(xgr_last_error(), "max_rules") != NULL);
    CHECK(strstr(xgr_last_error(), "'b'") != NULL);
    xgr_ir_free(G);

    /* max_fsm_states */
    NEWG();
    DEF("root", L("abcdefghijklmnopqrstuvwxyz"));
    ROOT("root");
    o = OPTS(32, 16);
    o.max_fsm_states = 10;
    rc = xgr_fsm_build(G, &o, &f);
    CHECK(rc == XGR_ERR_LIMIT && f == NULL);
    CHECK(strstr(xgr_last_error(), "'root'") != NULL);
    xgr_ir_free(G);

    /* exploding subset construction: (a|b)* a (a|b){22} needs 2^23 DFA states when
     * unrolled; the rule is rebuilt with the count as a REPEAT rule instead */
    NEWG();
    int32_t ab = C(0, 1, 'a', 'b');
    DEF("root", S(3, REP(ab, 0, -1), L("a"), REP(ab, 22, 22)));
    ROOT("root");
    o = OPTS(32, 100);
    o.max_fsm_states = 100000;
    double t0 = now_ms();
    f = build(&o);
    double t1 = now_ms();
    if (f) {
        check_fsm(f);
        printf("  (a|b)*a(a|b){22} (threshold 100): %d rules, %d states, %.1f ms\n", (int)f->n_rules,
               (int)f->n_states, t1 - t0);
        CHECK(count_kind(f, XGR_RULE_REPEAT) == 1 && f->n_states < 20);
        diff_check("explode-22", f, G, 300, 1);
        xgr_fsm_free(f);
    }
    xgr_ir_free(G);

    /* written out without a repetition there is nothing to compress: an error, fast */
    NEWG();
    ab = C(0, 1, 'a', 'b');
    int32_t kids[24];
    kids[0] = REP(ab, 0, -1);
    kids[1] = L("a");
    for (int i = 0; i < 22; i++) kids[2 + i] = ab;
    DEF("root", ok(xgr_ir_seq(G, kids, 24)));
    ROOT("root");
    t0 = now_ms();
    rc = xgr_fsm_build(G, &o, &f);
    t1 = now_ms();
    CHECK(rc == XGR_ERR_LIMIT && f == NULL);
    CHECK(strstr(xgr_last_error(), "'root'") != NULL);
    printf("  subset explosion stopped in %.1f ms: %s\n", t1 - t0, xgr_last_error());
    xgr_ir_free(G);

    /* the same with a smaller exponent is fine and minimal: 2^(k+1) states */
    NEWG();
    ab = C(0, 1, 'a', 'b');
    DEF("root", S(3, REP(ab, 0, -1), L("a"), REP(ab, 6, 6)));
    ROOT("root");
    f = build(&o);
    if (f) {
        check_fsm(f);
        CHECK(f->n_states == 128);
        diff_check("explode-7", f, G, 300, 1);
        xgr_fsm_free(f);
    }
    xgr_ir_free(G);

    /* very deep nesting is an error, not a stack overflow */
    NEWG();
    int32_t x = L("x");
    for (int i = 0; i < 5000; i++) x = S(2, L("("), x);
    DEF("root", x);
    ROOT("root");
    o = OPTS(32, 16);
    rc = xgr_fsm_build(G, &o, &f);
    CHECK(rc == XGR_ERR_LIMIT);
    xgr_ir_free(G);

    /* bad input */
    NEWG();
    DEF("root", R("undefined"));
    ROOT("root");
    rc = xgr_fsm_build(G, &o, &f);
    CHECK(rc == XGR_ERR_SEMANTIC);
    CHECK(xgr_fsm_build(NULL, &o, &f) == XGR_ERR_INVALID_ARG);
    xgr_ir_free(G);
}

/* A JSON-schema-like grammar with n rules: objects with fixed keys whose values are
 * strings, numbers, arrays or other objects (some recursive). */
static void make_big_grammar(int n) {
    NEWG();
    DEF("ws", REP(C(0, 3, ' ', ' ', '\n', '\n', '\t', '\t'), 0, -1));
    int32_t hex = C(0, 3, '0', '9', 'a', 'f', 'A', 'F');
    DEF("string", S(3, L("\""),
                    REP(A(2, C(1, 3, '"', '"', '\\', '\\', 0, 0x1F),
                          S(2, L("\\"), A(2, C(0, 8, '"', '"', '\\', '\\', '/', '/', 'b', 'b', 'f', 'f', 'n', 'n', 'r', 'r', 't', 't'),
                                           S(2, L("u"), REP(hex, 4, 4))))),
                        0, -1),
                    L("\"")));
    DEF("number", S(4, REP(L("-"), 0, 1), A(2, L("0"), S(2, C(0, 1, '1', '9'), REP(C(0, 1, '0', '9'), 0, -1))),
                    REP(S(2, L("."), REP(C(0, 1, '0', '9'), 1, -1)), 0, 1),
                    REP(S(3, C(0, 2, 'e', 'e', 'E', 'E'), REP(C(0, 2, '+', '+', '-', '-'), 0, 1), REP(C(0, 1, '0', '9'), 1, -1)), 0, 1)));
    char name[64], nx[64], nx2[64], key[64], key2[64];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "obj_%d", i);
        snprintf(nx, sizeof nx, "obj_%d", i + 1 < n ? i + 1 : 0);
        snprintf(nx2, sizeof nx2, "obj_%d", (i * 7 + 3) % n);
        snprintf(key, sizeof key, "\"field_%d\"", i);
        snprintf(key2, sizeof key2, "\"other_%d\"", i % 13);
        int32_t val;
        switch (i % 4) {
        case 0: val = R("string"); break;
        case 1: val = A(2, R("number"), L("null")); break;
        case 2: val = S(3, L("["), R("ws"), REP(S(2, R(nx2), REP(S(4, R("ws"), L(","), R("ws"), R(nx2)), 0, -1)), 0, 1)); break;
        default: val = R(nx); break;
        }
        if (i % 4 == 2) val = S(3, val, R("ws"), L("]"));
        DEF(name, S(10, L("{"), R("ws"), L(key), R("ws"), L(":"), R("ws"), val,
                    REP(S(6, R("ws"), L(","), R("ws"), L(key2), L(":"), R((i % 2) ? "string" : "number")), 0, 1),
                    REP(S(6, R("ws"), L(","), R("ws"), L("\"next\""), L(":"), R(nx)), 0, 1),
                    S(2, R("ws"), L("}"))));
    }
    DEF("root", S(3, R("ws"), R("obj_0"), R("ws")));
    ROOT("root");
}

static void test_big_grammar(void) {
    make_big_grammar(497); /* + ws, string, number, root = 501 rules */
    printf("  grammar with %zu rules\n", G->rules.len);
    for (int k = 0; k < 3; k++) {
        xgr_compile_options o = OPTS(k == 0 ? -1 : k == 1 ? 32 : 1000, 16);
        xgr_fsm *f = NULL;
        double best = 1e9;
        for (int rep = 0; rep < 5; rep++) {
            xgr_fsm_free(f);
            f = NULL;
            double t0 = now_ms();
            int rc = xgr_fsm_build(G, &o, &f);
            double t1 = now_ms();
            CHECK(rc == 0);
            if (t1 - t0 < best) best = t1 - t0;
        }
        if (!f) continue;
        check_fsm(f);
        printf("  500-rule grammar (inline=%d): %d rules, %d states, %d edges, best %.3f ms\n",
               (int)o.inline_max_states, (int)f->n_rules, (int)f->n_states, (int)f->n_edges, best);
        CHECK(fsm_accepts_str(f, "{\"field_0\":\"a\\u00e9b\"}") == 1);
        CHECK(fsm_accepts_str(f, "{\"field_0\":1}") == 0);
        if (k == 1) diff_check("big", f, G, 200, 0);
        xgr_fsm_free(f);
    }
    xgr_ir_free(G);

    /* small typical grammar (~50 rules) */
    make_big_grammar(47);
    xgr_compile_options o = OPTS(32, 16);
    double best = 1e9;
    for (int rep = 0; rep < 20; rep++) {
        xgr_fsm *f = NULL;
        double t0 = now_ms();
        CHECK(xgr_fsm_build(G, &o, &f) == 0);
        double t1 = now_ms();
        if (t1 - t0 < best) best = t1 - t0;
        xgr_fsm_free(f);
    }
    printf("  50-rule grammar: best %.3f ms\n", best);
    xgr_ir_free(G);
}

/* Random grammars: the strongest check that all passes preserve the language. Rule i
 * may reference rules j > i anywhere and any rule after a consumed "(", so there is no
 * left recursion (the reference simulators need that) but nullable rules abound. */
static int32_t rand_expr(int depth, int self, int nrules) {
    int k = depth > 3 ? (int)rnd(4) : (int)rnd(9);
    char nm[16];
    switch (k) {
    case 0: {
        static const char *lits[] = {"a", "b", "ab", "ba", "c", "\xc3\xa9"};
        return L(lits[rnd(6)]);
    }
    case 1:
        if (rnd(4) == 0) return BC((int)rnd(2), 2, 'a', 'a', 0xC3, 0xC3);
        return C((int)rnd(2), 1, 'a', 'b' + rnd(2));
    case 2: return rnd(3) ? E() : C(0, 1, 0xE9, 0x3B1);
    case 3: {
        uint32_t t = rnd((uint32_t)nrules);
        snprintf(nm, sizeof nm, "r%u", t);
        if ((int)t <= self) return S(2, L("("), R(nm));
        return R(nm);
    }
    case 4:
    case 5: return S(2, rand_expr(depth + 1, self, nrules), rand_expr(depth + 1, self, nrules));
    case 6: return A(2, rand_expr(depth + 1, self, nrules), rand_expr(depth + 1, self, nrules));
    default: {
        int mn = (int)rnd(3), mx = rnd(3) == 0 ? -1 : mn + (int)rnd(3);
        if (rnd(3) == 0) mx = mn + 20 + (int)rnd(3);
        if (rnd(4) == 0) {
            mn = 18;
            mx = rnd(2) ? -1 : 25;
        }
        return REP(rand_expr(depth + 1, self, nrules), mn, mx);
    }
    }
}

static void test_random_grammars(int count) {
    for (int it = 0; it < count; it++) {
        NEWG();
        int nr = 1 + (int)rnd(5);
        char nm[16];
        for (int r = 0; r < nr; r++) {
            snprintf(nm, sizeof nm, "r%d", r);
            RULE(nm);
        }
        for (int r = 0; r < nr; r++) {
            snprintf(nm, sizeof nm, "r%d", r);
            DEF(nm, rand_expr(0, r, nr));
            /* lookaheads do not change the language; they must not disturb lowering */
            if (rnd(4) == 0) LOOK(nm, rand_expr(0, nr, nr));
        }
        G->root = 0;
        char lab[32];
        snprintf(lab, sizeof lab, "random %d", it);
        const int inl[2] = {-1, 1000};
        const int thr[2] = {16, 1};
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                xgr_compile_options o = OPTS(inl[i], thr[j]);
                xgr_fsm *f = build(&o);
                if (!f) continue;
                check_fsm(f);
                diff_check(lab, f, G, 150, 0);
                xgr_fsm_free(f);
            }
        xgr_ir_free(G);
    }
    printf("  random grammars checked: %d\n", count);
}

/* Substring(...) (compile/substring.c): the suffix automaton over chunks, spelled as
 * byte tries, must give exactly the runs of consecutive chunks, alone and inside other
 * expressions (inlined or referenced, repeated, minus ""), under every option set. */
static int32_t SUB(int n, const char *const *chunks) {
    const uint8_t *p[16];
    size_t l[16];
    for (int i = 0; i < n; i++) {
        p[i] = (const uint8_t *)chunks[i];
        l[i] = strlen(chunks[i]);
    }
    return ok(xgr_ir_substring(G, p, l, (size_t)n));
}

static int accepts_str(const xgr_fsm *f, const char *s) {
    return fsm_accepts(f, (const uint8_t *)s, (int)strlen(s));
}

static void test_substring(int count) {
    /* fixed cases: the upstream examples */
    static const char *abc[] = {"abc", "de", "fg"};
    NEWG();
    DEF("root", SUB(3, abc));
    ROOT("root");
    xgr_compile_options o = OPTS(64, 16);
    xgr_fsm *f = build(&o);
    if (f) {
        check_fsm(f);
        static const char *yes[] = {"", "abc", "de", "fg", "abcde", "defg", "abcdefg"};
        static const char *no[] = {"ab", "cde", "abcfg", "deabc", "abcdefgabc", "c"};
        for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) CHECK(accepts_str(f, yes[i]) == 1);
        for (size_t i = 0; i < sizeof no / sizeof *no; i++) CHECK(accepts_str(f, no[i]) == 0);
        CHECK(f->rule_nullable[f->root]);
        xgr_fsm_free(f);
    }
    xgr_ir_free(G);
    /* zero chunks: only "" */
    NEWG();
    DEF("root", S(3, L("<"), SUB(0, abc), L(">")));
    ROOT("root");
    if ((f = build(&o))) {
        check_fsm(f);
        CHECK(accepts_str(f, "<>") == 1);
        CHECK(accepts_str(f, "<a>") == 0);
        xgr_fsm_free(f);
    }
    xgr_ir_free(G);
    /* one-byte chunks: the fragment is the byte-level suffix automaton (at most 2n - 1
     * states for n bytes), so a 4000-byte text stays small */
    {
        static char text[4001];
        for (int i = 0; i < 4000; i++) text[i] = "acgt"[rnd(4)];
        text[4000] = 0;
        const uint8_t **p = malloc(4000 * sizeof *p);
        size_t *l = malloc(4000 * sizeof *l);
        if (!p || !l) exit(2);
        for (int i = 0; i < 4000; i++) p[i] = (const uint8_t *)text + i, l[i] = 1;
        NEWG();
        DEF("root", ok(xgr_ir_substring(G, p, l, 4000)));
        ROOT("root");
        if ((f = build(&o))) {
            check_fsm(f);
            CHECK(f->n_states <= 2 * 4000);
            char buf[64];
            for (int k = 0; k < 50; k++) {
                int at = (int)rnd(4000 - 40), n = 1 + (int)rnd(40);
                memcpy(buf, text + at, (size_t)n);
                buf[n] = 0;
                CHECK(accepts_str(f, buf) == 1);
            }
            CHECK(accepts_str(f, "x") == 0);
            xgr_fsm_free(f);
        }
        xgr_ir_free(G);
        free(p);
        free(l);
    }
    /* random chunk lists in random contexts, against the IR interpreter */
    static const char *pool[] = {"a", "b", "ab", "ba", "", "aa", "abc", "\xc3\xa9", "a\xc3\xa9", "bab"};
    for (int it = 0; it < count; it++) {
        NEWG();
        const char *ch[8];
        int n = (int)rnd(8);
        for (int i = 0; i < n; i++) ch[i] = pool[rnd(sizeof pool / sizeof *pool)];
        int32_t sub = SUB(n, ch);
        int32_t body;
        switch (rnd(5)) {
        case 0: body = sub; break;
        case 1: body = S(3, L("<"), sub, L(">")); break;
        case 2: body = REP(S(2, sub, L(";")), 0, -1); break;
        case 3: body = REP(sub, (int)rnd(3), rnd(2) ? -1 : 3); break; /* nullable child */
        default: body = A(2, S(2, R("s"), L("!")), L("b")); break;
        }
        DEF("s", SUB(n, ch));
        DEF("root", body);
        ROOT("root");
        char lab[32];
        snprintf(lab, sizeof lab, "substring %d", it);
        const int inl[2] = {-1, 1000};
        for (int i = 0; i < 2; i++) {
            xgr_compile_options oo = OPTS(inl[i], 16);
            xgr_fsm *ff = build(&oo);
            if (!ff) continue;
            check_fsm(ff);
            diff_check(lab, ff, G, 120, 0);
            xgr_fsm_free(ff);
        }
        xgr_ir_free(G);
    }
    printf("  substring grammars checked: %d\n", count);
}

#define RUN(fn)                                                                        \
    do {                                                                               \
        double t0_ = now_ms();                                                         \
        fn;                                                                            \
        printf("  %-40s %8.1f ms\n", #fn, now_ms() - t0_);                             \
    } while (0)

int main(void) {
    /* LOWER_SEED / LOWER_RANDOM: longer randomized sweeps by hand */
    const char *seed = getenv("LOWER_SEED"), *nrand = getenv("LOWER_RANDOM");
    if (seed) rng_state = strtoull(seed, NULL, 10) * 2654435761ULL + 1;
    printf("test_lower\n");
    RUN(test_utf8_split());
    RUN(test_literals_and_classes());
    RUN(test_disjoint_ranges());
    RUN(test_small_repeats());
    RUN(test_large_repeats());
    RUN(test_nullable_repeat_children());
    RUN(test_inlining_and_recursion());
    RUN(test_shared_ref_sequences());
    RUN(test_lookahead());
    RUN(test_literal_led_alternations());
    RUN(test_limits());
    RUN(test_big_grammar());
    RUN(test_random_grammars(nrand ? atoi(nrand) : 400));
    RUN(test_substring(300));
    printf("%d checks, %d failures\n", n_check, n_fail);
    return n_fail ? 1 : 0;
}
