/* Tail memo (tail_memo.h). Why a verdict read from it is exact: the parser's answer to
 * bytes fed from a row depends only on that row's items (with their counters), on the
 * rows their origins point to, and recursively on the rows those rows' items point to
 * (Leo items included: a row's Leo items follow from its items and the older rows). A
 * memo row holds the items exactly, with absolute origins that are all at or before the
 * `stable` row of the fill that made it (rows that do not change until the matcher rolls
 * back or resets, when it clears the memo) or the row itself (-1). Two rows with the same
 * memo id therefore accept the same byte strings of at most XGR_TAIL_MAX_SUFFIX bytes (under a
 * collapsed key, those shorter than the row's room: tail_count). Items in a state without edges neither
 * scan nor complete again (their completion is already in the row), except the root's,
 * kept since it decides whether the grammar may end.
 *
 * What it is for: a string value inside an object with many optional properties. Each
 * token that closes the string (`UK","`, `10001"}`) is checked exactly, and from the row
 * after the closing quote, the same whatever the string held, its tail steps through a row
 * that predicts every later property. The rows before the quote repeat too (the string's
 * counter at the same value). So the tail `","` is walked once per such row, not once per
 * token and per fill. */
#include "tail_memo.h"

#include <string.h>

#include "../common/util.h"

struct xgr_tail_ent {
    uint64_t h;
    int32_t row; /* -1: empty slot (so is any slot of an older generation) */
    uint32_t len, off;
    int32_t verdict;
    uint32_t gen;
};

/* Is slot j live? (clearing bumps the generation instead of rewriting the table: the
 * matcher clears after every rollback, and the table may hold 2^18 slots) */
static inline int live(const xgr_tail_memo *t, size_t j) {
    return t->ents[j].gen == t->gen && t->ents[j].row >= 0;
}

#define TAIL_MAX_ENTS (1u << 17)
#define TAIL_MAX_ITEMS (1u << 20)

static inline uint64_t mix(uint64_t h, uint64_t x) {
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

void xgr_tail_memo_free(xgr_tail_memo *t) {
    XGR_VEC_FREE(t->items);
    XGR_VEC_FREE(t->row_off);
    XGR_VEC_FREE(t->row_hash);
    XGR_VEC_FREE(t->bytes);
    free(t->row_tab);
    free(t->ents);
    memset(t, 0, sizeof *t);
}

void xgr_tail_memo_clear(xgr_tail_memo *t) {
    t->items.len = t->row_off.len = t->row_hash.len = t->bytes.len = 0;
    if (t->row_tab) memset(t->row_tab, 0, t->row_cap * sizeof *t->row_tab);
    if (++t->gen == 0) { /* wrapped: start over */
        for (size_t i = 0; i < t->ent_cap; i++) t->ents[i].row = -1;
        t->gen = 1;
    }
    t->n_ents = 0;
}

int xgr_tail_memo_full(const xgr_tail_memo *t) {
    return t->n_ents > TAIL_MAX_ENTS || t->items.len > TAIL_MAX_ITEMS;
}

static int row_tab_grow(xgr_tail_memo *t) {
    size_t cap = t->row_cap ? 2 * t->row_cap : 256;
    int32_t *tab = xgr_calloc(cap, sizeof *tab);
    if (!tab) return -1;
    for (size_t i = 0; i + 1 < t->row_off.len; i++) {
        size_t j = (size_t)t->row_hash.data[i] & (cap - 1);
        while (tab[j]) j = (j + 1) & (cap - 1);
        tab[j] = (int32_t)i + 1;
    }
    free(t->row_tab);
    t->row_tab = tab;
    t->row_cap = cap;
    return 0;
}

/* An item's counter as the memo compares it. With `room` (the collapsed key), a repetition
 * of a child that cannot be empty, at or above its minimum, compares equal at every count
 * (-2), and its room (max - count) lowers *room. A verdict of a tail of n bytes is the same
 * at every such count whose room exceeds n: each repetition the tail starts consumes one
 * of its bytes, so the tail can neither overrun the bound nor be kept from leaving (the
 * verdict memo's room argument, matcher.c vm_count). The matcher reads and keeps a tail
 * under a row's collapsed key only when the tail is shorter than that row's room, and
 * under its exact key (room NULL: every counter as it is) otherwise. Inside a bounded
 * string (`char{0,255}`, `char{0,12}`), the rows after each of a token's bytes then share
 * one collapsed key, and so do the rows of the string's successive fills, for every tail
 * shorter than the room left. */
static inline int32_t tail_count(const xgr_fsm *f, xgr_item it, int32_t *room) {
    if (!room) return it.count;
    int32_t r = f->state_rule[it.state];
    if (f->rule_kind[r] != XGR_RULE_REPEAT || f->repeat_child[r] < 0 ||
        f->rule_nullable[f->repeat_child[r]] || it.count < f->repeat_min[r])
        return it.count;
    if (f->repeat_max[r] >= 0 && f->repeat_max[r] - it.count < *room)
        *room = f->repeat_max[r] - it.count;
    return -2;
}

int32_t xgr_tail_row(xgr_tail_memo *t, const xgr_parser *p, int32_t r, int32_t stable,
                     int32_t *room) {
    const xgr_fsm *f = p->fsm;
    if (room) *room = INT32_MAX;
    int32_t b = p->row_begin.data[r], e = p->row_begin.data[r + 1];
    if (!t->row_off.len && XGR_VEC_PUSH(t->row_off, 0u)) return -1;
    size_t start = t->items.len;
    if (XGR_VEC_RESERVE(t->items, start + (size_t)(e - b))) return -1;
    uint64_t h = 0x243f6a8885a308d3ull;
    for (int32_t k = b; k < e; k++) {
        xgr_item it = p->items.data[k];
        if (f->edge_begin[it.state + 1] == f->edge_begin[it.state] &&
            f->state_rule[it.state] != f->root)
            continue;
        if (it.origin >= r) it.origin = -1;
        else if (it.origin > stable) {
            t->items.len = start;
            return -1;
        }
        it.bud = 0;
        it.count = tail_count(f, it, room);
        t->items.data[t->items.len++] = it;
        h = mix(mix(mix(h, (uint32_t)it.state), (uint32_t)it.origin), (uint32_t)it.count);
    }
    size_t n = t->items.len - start;
    if (2 * t->row_off.len >= t->row_cap && row_tab_grow(t)) {
        t->items.len = start;
        return -1;
    }
    size_t j = (size_t)h & (t->row_cap - 1);
    for (; t->row_tab[j]; j = (j + 1) & (t->row_cap - 1)) {
        int32_t id = t->row_tab[j] - 1;
        uint32_t o = t->row_off.data[id], o1 = t->row_off.data[id + 1];
        if (t->row_hash.data[id] != h || o1 - o != n) continue;
        const xgr_item *a = t->items.data + o, *c = t->items.data + start;
        size_t i = 0;
        for (; i < n; i++)
            if (a[i].state != c[i].state || a[i].origin != c[i].origin || a[i].count != c[i].count)
                break;
        if (i == n) {
            t->items.len = start;
            return id;
        }
    }
    if (XGR_VEC_RESERVE(t->row_hash, t->row_hash.len + 1) ||
        XGR_VEC_RESERVE(t->row_off, t->row_off.len + 1)) {
        t->items.len = start;
        return -1;
    }
    t->row_hash.data[t->row_hash.len++] = h;
    t->row_off.data[t->row_off.len++] = (uint32_t)t->items.len;
    int32_t id = (int32_t)t->row_off.len - 2;
    t->row_tab[j] = id + 1;
    return id;
}

static inline uint64_t ent_hash(int32_t row, const uint8_t *s, uint32_t n) {
    uint64_t h = mix(0x13198a2e03707344ull, (uint32_t)row);
    for (uint32_t i = 0; i < n; i++) h = mix(h, s[i]);
    return mix(h, n);
}

int xgr_tail_get(const xgr_tail_memo *t, int32_t row, const uint8_t *s, uint32_t n) {
    if (!t->n_ents) return -1;
    uint64_t h = ent_hash(row, s, n);
    for (size_t j = (size_t)h & (t->ent_cap - 1); live(t, j); j = (j + 1) & (t->ent_cap - 1)) {
        const struct xgr_tail_ent *x = &t->ents[j];
        if (x->h == h && x->row == row && x->len == n && !memcmp(t->bytes.data + x->off, s, n))
            return x->verdict;
    }
    return -1;
}

static int ents_grow(xgr_tail_memo *t) {
    size_t cap = t->ent_cap ? 2 * t->ent_cap : 1024;
    struct xgr_tail_ent *e = xgr_malloc(cap * sizeof *e);
    if (!e) return -1;
    for (size_t i = 0; i < cap; i++) e[i].row = -1, e[i].gen = t->gen;
    for (size_t i = 0; i < t->ent_cap; i++) {
        if (!live(t, i)) continue;
        size_t j = (size_t)t->ents[i].h & (cap - 1);
        while (e[j].row >= 0) j = (j + 1) & (cap - 1);
        e[j] = t->ents[i];
    }
    free(t->ents);
    t->ents = e;
    t->ent_cap = cap;
    return 0;
}

void xgr_tail_put(xgr_tail_memo *t, int32_t row, const uint8_t *s, uint32_t n, int v) {
    if (2 * (t->n_ents + 1) > t->ent_cap && ents_grow(t)) return;
    uint64_t h = ent_hash(row, s, n);
    size_t j = (size_t)h & (t->ent_cap - 1);
    for (; live(t, j); j = (j + 1) & (t->ent_cap - 1)) {
        const struct xgr_tail_ent *x = &t->ents[j];
        if (x->h == h && x->row == row && x->len == n && !memcmp(t->bytes.data + x->off, s, n))
            return; /* known */
    }
    size_t off = t->bytes.len;
    if (XGR_VEC_RESERVE(t->bytes, off + n)) return;
    if (n) memcpy(t->bytes.data + off, s, n);
    t->bytes.len += n;
    t->ents[j] = (struct xgr_tail_ent){h, row, n, (uint32_t)off, v, t->gen};
    t->n_ents++;
}
