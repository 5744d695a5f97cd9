/* Character classes: normalisation of code-point / byte ranges and the split of
 * scalar-value ranges into UTF-8 byte-range sequences. */
#include "../common/text.h"
#include "lower_internal.h"

#define LW_MAX_SCALAR 0x10FFFFu

static int cmp_range(const void *x, const void *y) {
    const lw_range *a = x, *b = y;
    if (a->lo != b->lo) return a->lo < b->lo ? -1 : 1;
    if (a->hi != b->hi) return a->hi < b->hi ? -1 : 1;
    return 0;
}

/* Loads pairs clipped to [0, limit] and leaves them sorted, disjoint and
 * non-adjacent (adjacent ranges are merged). */
static int load_sorted(const uint32_t *pairs, int32_t n, uint32_t limit, lw_range_vec *v) {
    v->len = 0;
    if (XGR_VEC_RESERVE(*v, (size_t)n + 2)) return XGR_ERR_NOMEM;
    int sorted = 1;
    for (int32_t i = 0; i < n; i++) {
        uint32_t lo = pairs[2 * i], hi = pairs[2 * i + 1];
        if (lo > hi || lo > limit) continue;
        if (hi > limit) hi = limit;
        if (v->len && lo <= v->data[v->len - 1].lo) sorted = 0;
        v->data[v->len++] = (lw_range){lo, hi};
    }
    if (!sorted) qsort(v->data, v->len, sizeof *v->data, cmp_range);
    size_t k = 0;
    for (size_t i = 0; i < v->len; i++) {
        lw_range r = v->data[i];
        if (k && r.lo <= v->data[k - 1].hi + 1) {
            if (r.hi > v->data[k - 1].hi) v->data[k - 1].hi = r.hi;
        } else {
            v->data[k++] = r;
        }
    }
    v->len = k;
    return XGR_OK;
}

/* In place: each gap is written at an index <= the range it precedes, so nothing
 * unread is overwritten; capacity n + 1 was reserved by load_sorted. */
static void complement(lw_range_vec *v, uint32_t limit) {
    uint32_t next = 0;
    size_t k = 0, n = v->len;
    int done = 0;
    for (size_t i = 0; i < n; i++) {
        lw_range r = v->data[i];
        if (r.lo > next) v->data[k++] = (lw_range){next, r.lo - 1};
        if (r.hi >= limit) {
            done = 1;
            break;
        }
        next = r.hi + 1;
    }
    if (!done) v->data[k++] = (lw_range){next, limit};
    v->len = k;
}

/* Scalar values exclude D800-DFFF; one range may need splitting in two. */
static void remove_surrogates(lw_range_vec *v) {
    for (size_t i = 0; i < v->len; i++) {
        lw_range r = v->data[i];
        if (r.lo < 0xD800 && r.hi > 0xDFFF) {
            memmove(v->data + i + 2, v->data + i + 1, (v->len - i - 1) * sizeof *v->data);
            v->data[i] = (lw_range){r.lo, 0xD7FF};
            v->data[i + 1] = (lw_range){0xE000, r.hi};
            v->len++;
            return; /* ranges are disjoint: no other range touches the block */
        }
    }
    size_t k = 0;
    for (size_t i = 0; i < v->len; i++) {
        lw_range r = v->data[i];
        if (r.hi < 0xD800 || r.lo > 0xDFFF) {
            v->data[k++] = r;
            continue;
        }
        if (r.lo < 0xD800) v->data[k++] = (lw_range){r.lo, 0xD7FF};
        else if (r.hi > 0xDFFF) v->data[k++] = (lw_range){0xE000, r.hi};
    }
    v->len = k;
}

int lw_norm_class(const uint32_t *pairs, int32_t n, int negated, lw_range_vec *out) {
    int rc = load_sorted(pairs, n, LW_MAX_SCALAR, out);
    if (rc) return rc;
    if (negated) complement(out, LW_MAX_SCALAR);
    remove_surrogates(out);
    return XGR_OK;
}

int lw_norm_byte_class(const uint32_t *pairs, int32_t n, int negated, lw_range_vec *out) {
    int rc = load_sorted(pairs, n, 255, out);
    if (rc) return rc;
    if (negated) complement(out, 255);
    return XGR_OK;
}

/* Splits [lo, hi] until both ends encode to the same length and differ only in a
 * suffix of full continuation ranges; then byte i ranges over [enc(lo)[i], enc(hi)[i]]
 * independently. Same algorithm as Rust's utf8-ranges. */
int lw_utf8_sequences(const lw_range *rs, size_t n, lw_seq_vec *out) {
    uint32_t stack[64][2];
    for (size_t ri = 0; ri < n; ri++) {
        int sp = 0;
        stack[sp][0] = rs[ri].lo;
        stack[sp][1] = rs[ri].hi;
        sp++;
        while (sp > 0) {
            sp--;
            uint32_t s = stack[sp][0], e = stack[sp][1];
            /* Each split replaces one entry by two; splitting depth is bounded by the 3
             * length boundaries plus 2 per continuation level, far below 62. */
            if (sp > 62) return xgr_fail(XGR_ERR_INTERNAL, "utf8 split: stack overflow");
            static const uint32_t maxes[3] = {0x7F, 0x7FF, 0xFFFF};
            int split = 0;
            for (int k = 0; k < 3 && !split; k++) {
                if (s <= maxes[k] && maxes[k] < e) {
                    stack[sp][0] = maxes[k] + 1;
                    stack[sp][1] = e;
                    stack[sp + 1][0] = s;
                    stack[sp + 1][1] = maxes[k];
                    sp += 2;
                    split = 1;
                }
            }
            if (split) continue;
            if (e <= 0x7F) {
                lw_u8seq q = {1, {(uint8_t)s, 0, 0, 0}, {(uint8_t)e, 0, 0, 0}};
                if (XGR_VEC_PUSH(*out, q)) return XGR_ERR_NOMEM;
                continue;
            }
            for (int i = 1; i < 4 && !split; i++) {
                uint32_t m = (1u << (6 * i)) - 1;
                if ((s & ~m) != (e & ~m)) {
                    if ((s & m) != 0) {
                        stack[sp][0] = (s | m) + 1;
                        stack[sp][1] = e;
                        stack[sp + 1][0] = s;
                        stack[sp + 1][1] = s | m;
                        sp += 2;
                        split = 1;
                    } else if ((e & m) != m) {
                        stack[sp][0] = e & ~m;
                        stack[sp][1] = e;
                        stack[sp + 1][0] = s;
                        stack[sp + 1][1] = (e & ~m) - 1;
                        sp += 2;
                        split = 1;
                    }
                }
            }
            if (split) continue;
            lw_u8seq q;
            memset(&q, 0, sizeof q);
            int ls = xgr_utf8_encode(s, q.lo);
            int le = xgr_utf8_encode(e, q.hi);
            if (ls != le) return xgr_fail(XGR_ERR_INTERNAL, "utf8 split: length mismatch");
            q.n = (uint8_t)ls;
            if (XGR_VEC_PUSH(*out, q)) return XGR_ERR_NOMEM;
        }
    }
    return XGR_OK;
}
