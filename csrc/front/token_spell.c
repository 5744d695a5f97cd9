/* xgr_grammar_spell_tokens: literals that spell a special token's text also admit that
 * token (as a token-level terminal, common/token_marker.h).
 *
 * Tokenizers mark delimiters such as gpt-oss's `<|channel|>` or Kimi's
 * `<|tool_calls_section_begin|>` as special: they never match grammar text, yet tool-call
 * formats (structural tags, EBNF) spell them as text, and a model emits the special
 * token, not its letters. A copy of the grammar in which every literal occurrence of such
 * a text becomes ("text" | Token(id)) admits exactly what the format means, and nowhere
 * else: free text and JSON strings still never contain special tokens. TagDispatch
 * triggers get one extra trigger per spelling variant. */
#include "../common/token_marker.h"
#include "front.h"

typedef struct {
    const uint8_t *s;
    size_t n;
    int32_t id;
} spelling;

typedef struct {
    const spelling *sp; /* sorted by spell_lead */
    size_t n_sp;
    size_t first[257];  /* CSR by first byte into sp */
    int changed;
} spell_ctx;

/* The second byte of a spelling, -1 for a one-byte one: within a first-byte bucket the
 * spellings are sorted by it, so a position looks only at those that can match two bytes
 * (Llama's 256 special tokens all begin with '<', as do most tags' ends). */
static int spell_second(const spelling *p) { return p->n > 1 ? p->s[1] : -1; }

/* The earliest occurrence of a spelling in s[from..n) (the longest one there): its
 * position and index, or 0 when none. */
static int find_spelling(const spell_ctx *cx, const uint8_t *s, size_t n, size_t from,
                         size_t *pos, size_t *which) {
    for (size_t i = from; i < n; i++) {
        size_t best = SIZE_MAX, best_len = 0;
        size_t lo = cx->first[s[i]], hi = cx->first[s[i] + 1];
        if (lo < hi && cx->sp[lo].n == 1) best = lo, best_len = 1;
        if (i + 1 < n) { /* the run of spellings whose second byte is s[i + 1] */
            size_t a = lo, b = hi;
            while (a < b) {
                size_t mid = a + (b - a) / 2;
                if (spell_second(&cx->sp[mid]) < s[i + 1]) a = mid + 1;
                else b = mid;
            }
            for (size_t k = a; k < hi && spell_second(&cx->sp[k]) == s[i + 1]; k++) {
                const spelling *p = &cx->sp[k];
                if (p->n <= n - i && p->n > best_len && memcmp(s + i, p->s, p->n) == 0) {
                    best = k;
                    best_len = p->n;
                }
            }
        }
        if (best != SIZE_MAX) {
            *pos = i;
            *which = best;
            return 1;
        }
    }
    return 0;
}

/* s as a node: literal runs between spellings, each spelling as ("text" | Token(id)). */
static int32_t spell_bytes(void *ctx, xgr_grammar *dst, const uint8_t *s, size_t n) {
    spell_ctx *cx = ctx;
    XGR_VEC(int32_t) parts = {0};
    size_t at = 0, pos, which;
    int32_t r = -1;
    while (find_spelling(cx, s, n, at, &pos, &which)) {
        const spelling *p = &cx->sp[which];
        uint8_t mk[XGR_TOKEN_MARKER_LEN];
        xgr_token_marker(p->id, mk);
        int32_t alt[2] = {xgr_ir_bytes(dst, p->s, p->n), xgr_ir_bytes(dst, mk, sizeof mk)};
        int32_t pre = pos > at ? xgr_ir_bytes(dst, s + at, pos - at) : -2;
        int32_t both = alt[0] >= 0 && alt[1] >= 0 ? xgr_ir_alt(dst, alt, 2) : -1;
        if (pre == -1 || both < 0 || (pre >= 0 && XGR_VEC_PUSH(parts, pre)) ||
            XGR_VEC_PUSH(parts, both))
            goto out;
        at = pos + p->n;
        cx->changed = 1;
    }
    if (!parts.len) {
        r = xgr_ir_bytes(dst, s, n);
        goto out;
    }
    if (at < n) {
        int32_t suf = xgr_ir_bytes(dst, s + at, n - at);
        if (suf < 0 || XGR_VEC_PUSH(parts, suf)) goto out;
    }
    r = parts.len == 1 ? parts.data[0] : xgr_ir_seq(dst, parts.data, parts.len);
out:
    XGR_VEC_FREE(parts);
    return r;
}

/* Every spelling variant of a trigger (each occurrence as text or as its marker), at most
 * 2^4 of them; appended to out as (offset, length) pairs into buf. */
#define MAX_VARIANT_OCC 4

static int trigger_variants(void *ctx, const uint8_t *s, size_t n, xgr_keybuf *buf,
                            xgr_spanvec *spans) {
    spell_ctx *cx = ctx;
    size_t occ_pos[MAX_VARIANT_OCC], occ_which[MAX_VARIANT_OCC], k = 0, at = 0, pos, which;
    while (k < MAX_VARIANT_OCC && find_spelling(cx, s, n, at, &pos, &which)) {
        occ_pos[k] = pos;
        occ_which[k++] = which;
        at = pos + cx->sp[which].n;
    }
    for (size_t mask = 0; mask < ((size_t)1 << k); mask++) {
        size_t start = buf->len, prev = 0;
        for (size_t j = 0; j <= k; j++) {
            size_t end = j < k ? occ_pos[j] : n;
            if (XGR_VEC_RESERVE(*buf, buf->len + (end - prev) + XGR_TOKEN_MARKER_LEN))
                return XGR_ERR_NOMEM;
            memcpy(buf->data + buf->len, s + prev, end - prev);
            buf->len += end - prev;
            if (j == k) break;
            const spelling *p = &cx->sp[occ_which[j]];
            if (mask >> j & 1) {
                xgr_token_marker(p->id, buf->data + buf->len);
                buf->len += XGR_TOKEN_MARKER_LEN;
            } else {
                if (XGR_VEC_RESERVE(*buf, buf->len + p->n)) return XGR_ERR_NOMEM;
                memcpy(buf->data + buf->len, p->s, p->n);
                buf->len += p->n;
            }
            prev = end + p->n;
        }
        if (XGR_VEC_PUSH(*spans, start) || XGR_VEC_PUSH(*spans, buf->len - start))
            return XGR_ERR_NOMEM;
    }
    if (k) cx->changed = 1;
    return XGR_OK;
}

static int spell_lead(const void *a, const void *b) {
    const spelling *x = a, *y = b;
    if (x->s[0] != y->s[0]) return (int)x->s[0] - (int)y->s[0];
    return spell_second(x) - spell_second(y);
}

int xgr_grammar_spell_tokens(const xgr_grammar *g, const uint8_t *data, const uint32_t *offsets,
                             const int32_t *ids, size_t n, xgr_grammar **out) {
    if (!g || !out || (n && (!data || !offsets || !ids)))
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_grammar_spell_tokens: NULL argument");
    *out = NULL;
    spell_ctx cx;
    memset(&cx, 0, sizeof cx);
    spelling *sp = xgr_malloc((n + 1) * sizeof *sp);
    if (!sp) return XGR_ERR_NOMEM;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (offsets[i + 1] <= offsets[i]) continue; /* no text */
        if (ids[i] < 0 || ids[i] > XGR_TOKEN_ID_MAX) {
            free(sp);
            return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_grammar_spell_tokens: token id %d out of range",
                            (int)ids[i]);
        }
        sp[m++] = (spelling){data + offsets[i], offsets[i + 1] - offsets[i], ids[i]};
    }
    /* A tokenizer's spellings come sorted (tokenizer_info.py sorts them once): skip the
     * sort then, it is most of a small grammar's cost here. */
    size_t unsorted = 0;
    for (size_t i = 1; i < m && !unsorted; i++) unsorted = spell_lead(&sp[i - 1], &sp[i]) > 0;
    if (unsorted) qsort(sp, m, sizeof *sp, spell_lead);
    for (size_t i = 0; i < m; i++) cx.first[sp[i].s[0] + 1]++;
    for (int b = 0; b < 256; b++) cx.first[b + 1] += cx.first[b];
    cx.sp = sp;
    cx.n_sp = m;
    /* Quick exit (the common case): no literal of the grammar contains a spelling. */
    size_t pos, which;
    int any = 0;
    for (size_t i = 0; i < g->nodes.len && !any; i++) {
        const xgr_node *nd = &g->nodes.data[i];
        if (nd->kind == XGR_NODE_BYTES)
            any = find_spelling(&cx, g->bytes.data + nd->off, (size_t)nd->count, 0, &pos, &which);
    }
    if (!any) {
        free(sp);
        return XGR_OK;
    }
    xgr_grammar *dst = xgr_ir_new();
    int32_t *rmap = xgr_malloc((g->rules.len + 1) * sizeof *rmap); /* rule ids are kept */
    int rc = dst && rmap ? XGR_OK : XGR_ERR_NOMEM;
    xgr_ir_rewrite rw = {&cx, spell_bytes, trigger_variants};
    for (size_t r = 0; !rc && r < g->rules.len; r++) {
        const char *name = xgr_ir_rule_name(g, (int32_t)r);
        if (xgr_ir_rule(dst, name, strlen(name)) != (int32_t)r) rc = xgr_front_ir_status();
        rmap[r] = (int32_t)r;
    }
    for (size_t r = 0; !rc && r < g->rules.len; r++) {
        const xgr_rule *sr = &g->rules.data[r];
        int32_t body = -1, la = -1;
        if (sr->body >= 0 && (body = xgr_ir_copy_node(dst, g, sr->body, rmap, &rw, 0)) < 0)
            rc = xgr_front_ir_status();
        if (!rc && sr->lookahead >= 0 &&
            (la = xgr_ir_copy_node(dst, g, sr->lookahead, rmap, &rw, 0)) < 0)
            rc = xgr_front_ir_status();
        if (!rc) {
            dst->rules.data[r].body = body;
            dst->rules.data[r].lookahead = la;
            if (xgr_ir_copy_attrs(dst, (int32_t)r, g, (int32_t)r)) rc = XGR_ERR_NOMEM;
        }
    }
    if (!rc) {
        dst->root = g->root;
        rc = xgr_ir_validate(dst);
    }
    free(sp);
    free(rmap);
    if (rc) {
        xgr_ir_free(dst);
        return rc;
    }
    *out = dst;
    return XGR_OK;
}
