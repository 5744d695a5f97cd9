/* The key of an extra object member: a JSON string that is none of the listed names, as a
 * trie of their raw prefixes (json_key_excl.h). Written in the shape of the Python
 * converter's emit.key_not_in, so that the two grammars accept the same keys
 * (tests/json_schema/test_plain_front.py compares their masks). */
#include "json_key_excl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_dom.h"

const char JSON_KEY_EXCL_XU[] =
    "xu ::= \"\\\\u\" (\"0\" (\"0\" [0189A-Fa-f] [0-9A-Fa-f] | [1-9A-Fa-f] [0-9A-Fa-f] [0-9A-Fa-f]) | "
    "[1-9A-CEFa-cef] [0-9A-Fa-f] [0-9A-Fa-f] [0-9A-Fa-f] | [Dd] [0-7] [0-9A-Fa-f] [0-9A-Fa-f]) | "
    "\"\\\\u\" [Dd] [89ABab] [0-9A-Fa-f] [0-9A-Fa-f] \"\\\\u\" [Dd] [C-Fc-f] [0-9A-Fa-f] [0-9A-Fa-f]\n"
    "xr ::= char* \"\\\"\"\n";

/* Trie nodes deeper than this in one rule start a rule of their own (bounded nesting). */
#define KEY_RULE_DEPTH 16

typedef struct {
    const char *src;
    const int32_t *off, *len, *order; /* order: name indices, sorted by text */
    const char *name;
    json_text *rules;
    int32_t sub; /* sub-rules written */
    json_key_excl_ctx *ctx; /* the grammar's xc<i> rules */
} kx;

/* The character class text of one raw printable-ASCII character inside [...]. */
static int put_class_char(json_text *b, char c) {
    char t[3] = {'\\', c, 0};
    return c == ']' || c == '\\' || c == '^' || c == '-' || c == '"' ? json_put(b, t, 2) : json_put(b, t + 1, 1);
}

static const char *char_of(const kx *x, int32_t i, int32_t d) {
    return x->src + x->off[x->order[i]] + d;
}

static int node(kx *x, int32_t lo, int32_t hi, int32_t d, int depth, json_text *out);

/* A reference to rule xc<i> ::= any key spelling of a character outside excl[0..n) (raw, a
 * two-character escape, or xu), written once per distinct set and grammar (a name's chain
 * of single children repeats the same few, and so do the tries of a grammar's objects). */
static int kchar_ref(kx *x, const char *excl, int n, json_text *out) {
    json_key_excl_ctx *cx = x->ctx;
    char nm[32];
    for (size_t i = 0; i < cx->sets.len; i++)
        if (cx->sets.data[i].n == n && memcmp(cx->sets.data[i].c, excl, (size_t)n) == 0) {
            snprintf(nm, sizeof nm, "xc%d", (int)i);
            return json_puts(out, nm);
        }
    json_key_set st;
    st.n = n;
    memcpy(st.c, excl, (size_t)n);
    if (XGR_VEC_PUSH(cx->sets, st)) return JSON_DOM_NOMEM;
    snprintf(nm, sizeof nm, "xc%d", (int)(cx->sets.len - 1));
    int r = json_puts(x->rules, nm);
    if (!r) r = json_puts(x->rules, " ::= [^\\x00-\\x1f\"\\\\");
    for (int k = 0; k < n && !r; k++)
        if (excl[k] != '"' && excl[k] != '\\') r = put_class_char(x->rules, excl[k]);
    if (!r) r = json_puts(x->rules, "] | \"\\\\\" [\"/\\\\bfnrt] | xu\n");
    return r ? r : json_puts(out, nm);
}

void json_key_excl_ctx_free(json_key_excl_ctx *ctx) {
    XGR_VEC_FREE(ctx->sets);
    XGR_VEC_FREE(ctx->sigs);
    XGR_VEC_FREE(ctx->sig_at);
}

/* A rule of its own for the node of names [lo, hi) at depth d. */
static int sub_rule(kx *x, int32_t lo, int32_t hi, int32_t d, json_text *out) {
    json_text body = {0};
    int32_t id = ++x->sub;
    char nm[96];
    snprintf(nm, sizeof nm, "%s_t%d", x->name, id);
    int r = json_puts(&body, nm);
    if (!r) r = json_puts(&body, " ::= ");
    if (!r) r = node(x, lo, hi, d, 0, &body);
    if (!r) r = json_puts(&body, "\n");
    if (!r) r = json_put(x->rules, body.data, body.len);
    XGR_VEC_FREE(body);
    return r ? r : json_puts(out, nm);
}

/* The alternatives after the common prefix of length d of sorted names [lo, hi). */
static int node(kx *x, int32_t lo, int32_t hi, int32_t d, int depth, json_text *out) {
    if (depth >= KEY_RULE_DEPTH) return sub_rule(x, lo, hi, d, out);
    int terminal = x->len[x->order[lo]] == d; /* (sorted: the prefix itself comes first) */
    int r = json_puts(out, "(");
    char excl[96];
    int nex = 0, alts = 0;
    for (int32_t i = lo + terminal; i < hi && !r;) {
        char c = *char_of(x, i, d);
        int32_t j = i + 1;
        while (j < hi && *char_of(x, j, d) == c) j++;
        char lit[5] = {'"', c, '"', ' ', 0};
        if (alts++) r = json_puts(out, " | ");
        if (!r) r = json_put(out, lit, 4);
        if (!r) r = node(x, i, j, d + 1, depth + 1, out);
        if (nex < (int)sizeof excl) excl[nex++] = c;
        i = j;
    }
    /* any other first character, then any rest: past a whole name any JSON character, else
     * a key spelling (emit.key_not_in: the complement's char_ref) */
    if (!r && alts) r = json_puts(out, " | ");
    if (!r && !alts) r = json_puts(out, "char xr");
    if (!r && alts) r = kchar_ref(x, excl, nex, out);
    if (!r && alts) r = json_puts(out, " xr");
    if (!r && !terminal) r = json_puts(out, " | \"\\\"\"");
    return r ? r : json_puts(out, ")");
}

/* Whether name i sorts before name j (bytes, a prefix first). */
static int less(const kx *x, int32_t i, int32_t j) {
    int32_t li = x->len[i], lj = x->len[j];
    int c = memcmp(x->src + x->off[i], x->src + x->off[j], (size_t)(li < lj ? li : lj));
    return c ? c < 0 : li < lj;
}

/* Merge sort of a[0..n) by `less`, tmp the same size (no qsort: its comparator would need
 * the names through a global). */
static void sort_names(const kx *x, int32_t *a, int32_t *tmp, int32_t n) {
    if (n < 2) return;
    int32_t h = n / 2;
    sort_names(x, a, tmp, h);
    sort_names(x, a + h, tmp, n - h);
    int32_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = less(x, a[j], a[i]) ? a[j++] : a[i++];
    while (i < h) tmp[k++] = a[i++];
    while (j < n) tmp[k++] = a[j++];
    memcpy(a, tmp, sizeof *a * (size_t)n);
}

/* Writes rule `name` for the n names (json_key_excl_rule). */
static int write_rule(json_key_excl_ctx *ctx, const char *src, const int32_t *off, const int32_t *len,
                      int32_t n, const char *name, json_text *rules) {
    int32_t *order = xgr_malloc(sizeof *order * 2 * (size_t)(n > 0 ? n : 1));
    if (!order) return JSON_DOM_NOMEM;
    for (int32_t i = 0; i < n; i++) order[i] = i;
    kx x = {src, off, len, order, name, rules, 0, ctx};
    sort_names(&x, order, order + (n > 0 ? n : 1), n);
    json_text body = {0};
    int r = json_puts(&body, name);
    if (!r) r = json_puts(&body, " ::= ");
    if (!r) r = n > 0 ? node(&x, 0, n, 0, 0, &body) : json_puts(&body, "xr");
    if (!r) r = json_puts(&body, "\n");
    if (!r) r = json_put(rules, body.data, body.len);
    XGR_VEC_FREE(body);
    free(order);
    return r;
}

int json_key_excl_rule(json_key_excl_ctx *ctx, const char *src, const int32_t *off,
                       const int32_t *len, int32_t n, json_text *rules, int32_t *k) {
    size_t at = ctx->sigs.len;
    int r = JSON_DOM_OK;
    for (int32_t j = 0; j < n && !r; j++)
        if (!(r = json_put(&ctx->sigs, src + off[j], (size_t)len[j]))) r = json_puts(&ctx->sigs, "\n");
    if (r) return r;
    size_t sl = ctx->sigs.len - at;
    for (size_t i = 0; i + 1 < ctx->sig_at.len; i += 2)
        if ((size_t)ctx->sig_at.data[i + 1] == sl &&
            memcmp(ctx->sigs.data + ctx->sig_at.data[i], ctx->sigs.data + at, sl) == 0) {
            ctx->sigs.len = at; /* written before: the same rule */
            *k = (int32_t)(i / 2);
            return JSON_DOM_OK;
        }
    if (at > INT32_MAX || sl > INT32_MAX) return JSON_DOM_NOMEM;
    *k = (int32_t)(ctx->sig_at.len / 2);
    if (XGR_VEC_PUSH(ctx->sig_at, (int32_t)at) || XGR_VEC_PUSH(ctx->sig_at, (int32_t)sl)) return JSON_DOM_NOMEM;
    char name[32];
    snprintf(name, sizeof name, "xk%d", *k);
    return write_rule(ctx, src, off, len, n, name, rules);
}
