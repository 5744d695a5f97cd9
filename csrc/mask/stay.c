/* Tokens that stay put (stay.h): UTF-8 closure of a state, and acceptance of whole
 * first-byte ranges of the sorted vocabulary by ORs of per-byte token bitsets. */
#include "stay.h"

/* UTF-8 decoding states: what the bytes so far still need (Unicode table 3-7). */
enum { U_START, U_C1, U_C2, U_C3, U_E0, U_ED, U_F0, U_F4, U_N };

/* The state after byte b (>= 0x80) in decoding state u, or -1 when b cannot go there. */
static int utf8_next(int u, uint8_t b) {
    switch (u) {
    case U_START:
        if (b >= 0xC2 && b <= 0xDF) return U_C1;
        if (b == 0xE0) return U_E0;
        if (b == 0xED) return U_ED;
        if (b >= 0xE1 && b <= 0xEF) return U_C2;
        if (b == 0xF0) return U_F0;
        if (b >= 0xF1 && b <= 0xF3) return U_C3;
        if (b == 0xF4) return U_F4;
        return -1;
    case U_C1: return b >= 0x80 && b <= 0xBF ? U_START : -1;
    case U_C2: return b >= 0x80 && b <= 0xBF ? U_C1 : -1;
    case U_C3: return b >= 0x80 && b <= 0xBF ? U_C2 : -1;
    case U_E0: return b >= 0xA0 && b <= 0xBF ? U_C1 : -1;
    case U_ED: return b >= 0x80 && b <= 0x9F ? U_C1 : -1;
    case U_F0: return b >= 0x90 && b <= 0xBF ? U_C2 : -1;
    default:   return b >= 0x80 && b <= 0x8F ? U_C2 : -1; /* U_F4 */
    }
}

uint32_t xgr_utf8_char_len(const uint8_t *p, uint32_t n) {
    int u = U_START;
    for (uint32_t i = 0; i < n && i < 4; i++) {
        if ((u = utf8_next(u, p[i])) < 0) return 0;
        if (u == U_START) return i + 1;
    }
    return 0;
}

/* A search over (automaton state, decoding state) pairs from (s, start): every pair with
 * a character under way must step on every byte that continues it, and every completed
 * character must be back at s. */
int xgr_utf8_closed(int32_t s, int32_t n, xgr_next_fn next, const void *ctx) {
    uint8_t *seen = xgr_calloc((size_t)n * U_N, 1);
    int32_t *stack = xgr_malloc((size_t)n * U_N * sizeof *stack);
    int ok = seen && stack;
    int32_t sp = 0;
    if (ok) stack[sp++] = s * U_N + U_START;
    while (ok && sp) {
        int32_t pair = stack[--sp], t = pair / U_N, u = pair % U_N;
        for (int b = 0x80; b <= 0xFF && ok; b++) {
            int u2 = utf8_next(u, (uint8_t)b);
            if (u2 < 0) continue;
            int32_t t2 = next(ctx, t, (uint8_t)b);
            if (t2 < 0 || t2 >= n || (u2 == U_START && t2 != s)) {
                ok = 0;
                break;
            }
            int32_t p2 = t2 * U_N + u2;
            if (u2 != U_START && !seen[p2]) {
                seen[p2] = 1;
                stack[sp++] = p2;
            }
        }
    }
    free(seen);
    free(stack);
    return ok; /* out of memory: "no", which only costs speed */
}

/* The end state of every character continued from pair (t, u) (u != U_START), or -1;
 * seen (all zero on entry and on return) and stack hold n * U_N pairs each. */
static int32_t funnel_from(int32_t t0, int u0, int32_t n, xgr_next_fn next, const void *ctx,
                           uint8_t *seen, int32_t *stack) {
    int32_t end = -1, sp = 0, top = 0;
    int ok = 1;
    stack[top++] = t0 * U_N + u0;
    seen[t0 * U_N + u0] = 1;
    /* stack[0 .. top) lists every pair seen; sp walks it (breadth-first) */
    while (ok && sp < top) {
        int32_t pair = stack[sp++], t = pair / U_N, u = pair % U_N;
        for (int b = 0x80; b <= 0xBF && ok; b++) {
            int u2 = utf8_next(u, (uint8_t)b);
            if (u2 < 0) continue;
            int32_t t2 = next(ctx, t, (uint8_t)b);
            if (t2 < 0 || t2 >= n || (u2 == U_START && end >= 0 && t2 != end)) {
                ok = 0;
                break;
            }
            if (u2 == U_START) {
                end = t2;
                continue;
            }
            int32_t p2 = t2 * U_N + u2;
            if (!seen[p2]) {
                seen[p2] = 1;
                stack[top++] = p2;
            }
        }
    }
    for (int32_t k = 0; k < top; k++) seen[stack[k]] = 0;
    return ok ? end : -1;
}

/* out[c], for each lead byte c (0xC2..0xF4) with want[c]: the state every well-formed
 * multi-byte character starting with c takes local state s to (through states of its own
 * automaton, n of them), or -1 when they do not all end in one state or one of them dies
 * on the way (and for every other byte). */
static void utf8_funnels(int32_t s, int32_t n, xgr_next_fn next, const void *ctx,
                         const uint8_t want[256], int32_t out[256]) {
    for (int c = 0; c < 256; c++) out[c] = -1;
    uint8_t *seen = xgr_calloc((size_t)n * U_N, 1);
    int32_t *stack = xgr_malloc((size_t)n * U_N * sizeof *stack);
    int32_t *memo = xgr_calloc((size_t)n * U_N, sizeof *memo); /* end + 2 by start pair; 0: not yet */
    if (seen && stack && memo)
        for (int c = 0xC2; c <= 0xF4; c++) {
            if (!want[c]) continue;
            int u0 = utf8_next(U_START, (uint8_t)c);
            int32_t t0 = next(ctx, s, (uint8_t)c);
            if (u0 < 0 || t0 < 0 || t0 >= n) continue;
            int32_t *m = &memo[t0 * U_N + u0];
            if (!*m) *m = funnel_from(t0, u0, n, next, ctx, seen, stack) + 2;
            out[c] = *m - 2;
        }
    free(seen);
    free(stack);
    free(memo); /* out of memory: none, which only costs speed */
}

void xgr_stay_first(const int32_t to[256], const uint64_t *leave, int32_t start, int32_t n,
                    xgr_next_fn next, const void *ctx, const uint64_t *lv[256]) {
    const uint64_t *home = leave + 2 * (size_t)start;
    int closed = !((home[XGR_FOLD_CHAR >> 6] >> (XGR_FOLD_CHAR & 63)) & 1);
    /* lead bytes the first two branches below leave out: where their characters end */
    uint8_t want[256] = {0};
    int32_t funnel[256];
    int asked = 0;
    for (int c = 0xC2; c <= 0xF4 && next && !closed; c++)
        asked |= want[c] = to[c] >= 0 && (leave[2 * (size_t)to[c]] & 1);
    if (asked) utf8_funnels(start, n, next, ctx, want, funnel);
    for (int c = 0; c < 256; c++) {
        lv[c] = NULL;
        if (c < 0x80) {
            const uint64_t *t = to[c] >= 0 ? leave + 2 * (size_t)to[c] : NULL;
            if (t && !((t[c >> 6] >> (c & 63)) & 1)) lv[c] = t;
        } else if (c >= 0xC2 && c <= 0xF4 && closed) {
            lv[c] = home;
        } else if (to[c] >= 0 && !(leave[2 * (size_t)to[c]] & 1)) {
            /* The state byte c leads to keeps every non-ASCII byte (folded bit 0 clear):
             * the rest of c's character keeps it there too (free text reached from a
             * partial trigger by a character's lead byte). */
            lv[c] = leave + 2 * (size_t)to[c];
        } else if (asked && c >= 0xC2 && c <= 0xF4 && funnel[c] >= 0) {
            /* Every character starting with c ends in one state: a token that starts with
             * one stays there when that state is UTF-8 closed (its leave set misses
             * XGR_FOLD_CHAR, the fold of every complete character) and a cut or ill-formed
             * character (folded to bit 0, the token's first one included) leaves it. */
            const uint64_t *t = leave + 2 * (size_t)funnel[c];
            if (!((t[XGR_FOLD_CHAR >> 6] >> (XGR_FOLD_CHAR & 63)) & 1) && (t[0] & 1)) lv[c] = t;
        }
    }
}

void xgr_stay_accept(const struct xgr_vocab *v, const uint64_t *const lv[256], uint64_t *acc,
                     uint64_t *scratch) {
    size_t sw = (size_t)v->set_words;
    for (int c = 0; c < 256;) {
        const uint64_t *set = lv[c];
        int c1 = c + 1;
        while (c1 < 256 && lv[c1] == set) c1++; /* one pass over ranges with the same set */
        int32_t lo = v->first_byte_start[c], hi = v->first_byte_start[c1];
        c = c1;
        if (!set || lo >= hi) continue;
        /* A state that stays put on a few bytes only (a whitespace run, a digit run) keeps
         * few tokens to their end, and the walk settles the rest a prefix range at a time
         * (" the" dies at "t"): the ORs of a hundred byte sets over the range would cost
         * more than the walk saves. */
        if (xgr_popcount64(set[0]) + xgr_popcount64(set[1]) > XGR_STAY_MAX_LEAVE) continue;
        size_t w0 = (size_t)lo >> 6, w1 = (size_t)(hi - 1) >> 6;
        memset(scratch + w0, 0, (w1 - w0 + 1) * sizeof *scratch);
        uint64_t bits[2] = {set[0], set[1]};
        if ((bits[0] & XGR_CTRL_BITS) == XGR_CTRL_BITS) { /* all control bytes: one row */
            const uint64_t *has = v->byte_sets + (size_t)XGR_CTRL_SET * sw;
            for (size_t w = w0; w <= w1; w++) scratch[w] |= has[w];
            bits[0] &= ~XGR_CTRL_BITS;
        }
        for (int b = 0; b < 128; b++) {
            if (!((bits[b >> 6] >> (b & 63)) & 1)) continue;
            const uint64_t *has = v->byte_sets + (size_t)b * sw;
            for (size_t w = w0; w <= w1; w++) scratch[w] |= has[w];
        }
        for (size_t w = w0; w <= w1; w++) {
            uint64_t m = ~(uint64_t)0;
            if (w == w0) m &= ~(uint64_t)0 << (lo & 63);
            if (w == w1 && (hi & 63)) m &= ~(uint64_t)0 >> (64 - (hi & 63));
            acc[w] |= ~scratch[w] & m;
        }
    }
}

/* ORs bytes lo..hi into the 256-bit set s, a 32-bit word at a time (a string body's edges
 * span a hundred bytes or more). */
static void set_range(uint32_t s[8], int lo, int hi) {
    for (int w = lo >> 5; w <= hi >> 5; w++) {
        int a = w == lo >> 5 ? lo & 31 : 0, z = w == hi >> 5 ? hi & 31 : 31;
        s[w] |= (~0u >> (31 - z + a)) << a;
    }
}

void xgr_row_bytes(const xgr_parser *p, int32_t row, const uint8_t *flags, uint32_t next[8],
                   uint32_t loop[8]) {
    const xgr_fsm *f = p->fsm;
    memset(next, 0, 8 * sizeof *next);
    memset(loop, 0, 8 * sizeof *loop);
    for (int32_t k = p->row_begin.data[row]; k < p->row_begin.data[row + 1]; k++) {
        int32_t st = p->items.data[k].state;
        if (!(flags[st] & XGR_SCAN_BYTE)) continue;
        int lp = (flags[st] & XGR_SCAN_LOOP) != 0;
        for (int32_t e = f->edge_begin[st]; e < f->edge_begin[st + 1]; e++) {
            const xgr_edge *ed = &f->edges[e];
            if (ed->ref >= 0) break; /* byte edges come first */
            set_range(next, ed->lo, ed->hi);
            if (lp) set_range(loop, ed->lo, ed->hi);
        }
    }
}

int xgr_row_stays(const xgr_parser *p, int32_t row, const uint8_t *flags, const uint8_t *s,
                  uint32_t n) {
    const xgr_fsm *f = p->fsm;
    for (int32_t k = p->row_begin.data[row]; k < p->row_begin.data[row + 1]; k++) {
        int32_t st = p->items.data[k].state;
        if (!(flags[st] & XGR_SCAN_LOOP)) continue;
        /* the item's own byte edges, in and out of its loop (a multi-byte character of a
         * string body passes through continuation states): each is a scan of this item */
        uint32_t q = 0;
        while (q < n && (st = xgr_fsm_byte_target(f, st, s[q])) >= 0) q++;
        if (q == n) return 1;
    }
    return 0;
}
