/* The context-free vocabulary pass of a sparse state, by descent through the sorted
 * vocabulary (descend.h). A node is (state q, depth d, sorted range [lo, hi)): every token
 * in the range starts with the same d bytes, which take the start state to q. Its
 * children are the sub-ranges whose byte d has an edge from q. */
#include "descend.h"

#include <stdlib.h>
#include <string.h>

#include "closure.h"

/* A node whose edges cover at most this many byte values finds its children by binary
 * search; a wider one steps through the distinct bytes its range holds. */
#define SPLIT_MAX 8


typedef struct {
    const struct xgr_vocab *v;
    const xgr_fsm *f;
    int refchk;
    int hybrid; /* references are followed (by the parser): a token that reaches one stops us */
    xgr_pop_list *acc, *pops;
    int32_t *path; /* recorded pops of the current path's depths 1..d-1, ascending */
    int32_t npath;
    int32_t *dstate, *ext; /* scan: state at each depth, the dead token's own pops */
    /* xgr_ref_first of the last state asked about (refchk), scratch allocated on first use */
    uint32_t *seen, stamp;
    int32_t *stack;
    int32_t fstate;
    uint32_t fbits[8];
} dctx;

/* Byte d of sorted token i, which is longer than d. */
static inline uint8_t byte_at(const struct xgr_vocab *v, int32_t i, int32_t d) {
    if (d < 4) return (uint8_t)(v->sorted_head[i] >> (24 - 8 * d));
    return v->sorted_data[v->sorted_offsets[i] + (uint32_t)d];
}

static inline int32_t len_at(const struct xgr_vocab *v, int32_t i) {
    return (int32_t)(v->sorted_offsets[i + 1] - v->sorted_offsets[i]);
}

/* First position in [lo, hi) whose byte d is >= b (every token there is longer than d, and
 * all share bytes 0..d-1). */
static int32_t lower(const struct xgr_vocab *v, int32_t lo, int32_t hi, int32_t d, int b) {
    if (b > 255) return hi;
    if (d == 1 && lo < hi) { /* by the table of first two bytes */
        int32_t r = v->pair_start[byte_at(v, lo, 0) * 256 + b];
        return r < lo ? lo : r > hi ? hi : r;
    }
    while (hi - lo > 8) {
        int32_t mid = lo + (hi - lo) / 2;
        if (byte_at(v, mid, d) < b) lo = mid + 1;
        else hi = mid;
    }
    while (lo < hi && byte_at(v, lo, d) < b) lo++;
    return lo;
}

/* One past the tokens that share token i's first d + 1 bytes. */
static inline int32_t run_end(const struct xgr_vocab *v, int32_t i, int32_t d, int32_t hi) {
    int32_t e = xgr_vocab_prefix_end(v, i, v->sorted_data + v->sorted_offsets[i], (uint32_t)d + 1);
    return e < hi ? e : hi;
}

/* The pop that counts at depth d >= 1 on state q for a token whose byte d is b (-1: out
 * of memory). */
static int effective(dctx *x, int32_t q, int32_t d, uint8_t b) {
    if (d == 0) return 0;
    int fl = xgr_state_pops(x->f, q) & (x->hybrid ? XGR_POP_END : 3);
    if (!(fl & XGR_POP_REF) || !x->refchk) return fl;
    int r = fl & XGR_POP_END;
    if (q != x->fstate) {
        if (!x->seen) {
            x->seen = calloc((size_t)x->f->n_states + 1, sizeof *x->seen);
            x->stack = malloc(((size_t)x->f->n_states + 1) * sizeof *x->stack);
            if (!x->seen || !x->stack) return -1;
        }
        xgr_ref_first(x->f, q, x->seen, ++x->stamp, x->stack, x->fbits);
        if (x->refchk == XGR_REFCHK_WIDE) xgr_ref_first_widen(x->fbits);
        x->fstate = q;
    }
    return (x->fbits[b >> 5] >> (b & 31)) & 1 ? r | XGR_POP_REF : r;
}

static inline int has_ref(const xgr_fsm *f, int32_t q) {
    return xgr_state_pops(f, q) & XGR_POP_REF;
}

static inline int32_t record(int32_t e, int fl) {
    return (fl & XGR_POP_REF) || e >= (int32_t)XGR_POP_REF_BIT
               ? (int32_t)(XGR_POP_REF_BIT | ((uint32_t)e & 0x7fff))
               : e;
}

/* Tokens [a, b) are uncertain: each with the path's pops, then its own `n` records. */
static int uncertain(dctx *x, int32_t a, int32_t b, const int32_t *own, int32_t n) {
    for (int32_t j = a; j < b && (x->npath || n); j++) {
        for (int32_t k = 0; k < x->npath; k++)
            if (XGR_VEC_PUSH(*x->pops, j) || XGR_VEC_PUSH(*x->pops, x->path[k]))
                return XGR_ERR_NOMEM;
        for (int32_t k = 0; k < n; k++)
            if (XGR_VEC_PUSH(*x->pops, j) || XGR_VEC_PUSH(*x->pops, own[k]))
                return XGR_ERR_NOMEM;
    }
    return XGR_OK;
}

/* Tokens [a, b) die at byte d on q: uncertain with the path's pops and q's, if any. The
 * pop on q depends on byte d only, so the range goes a run of equal bytes at a time and a
 * run without pops is skipped whole (a reference start that no token's next byte can
 * begin rejects the 59k tokens after a space at a few hundred jumps). */
static int dead(dctx *x, int32_t q, int32_t d, int32_t a, int32_t b) {
    if (x->npath == 0 && d > 0) {
        int fl0 = xgr_state_pops(x->f, q) & (x->hybrid ? XGR_POP_END : 3);
        if (fl0 == 0) return XGR_OK; /* no pop here or before: nothing to record */
        if (fl0 == XGR_POP_REF && x->refchk) {
            /* only a reference start, which counts where byte d can begin it: those bytes'
             * runs alone, found by search, instead of every run of the range (the 59k tokens
             * after a space, in ~230 runs, when only "{" can start what follows) */
            if (effective(x, q, d, 0) < 0) return XGR_ERR_NOMEM; /* fills x->fbits for q */
            int32_t own = record(d, XGR_POP_REF);
            for (int c = 0; c < 256 && a < b; c++) {
                if (!((x->fbits[c >> 5] >> (c & 31)) & 1)) continue;
                int32_t s = lower(x->v, a, b, d, c), e = lower(x->v, s, b, d, c + 1);
                int rc = s < e ? uncertain(x, s, e, &own, 1) : XGR_OK;
                if (rc) return rc;
                a = e;
            }
            return XGR_OK;
        }
    }
    for (int32_t i = a; i < b;) {
        uint8_t byte = byte_at(x->v, i, d);
        int32_t be = run_end(x->v, i, d, b);
        int fl = effective(x, q, d, byte);
        if (fl < 0) return XGR_ERR_NOMEM;
        int32_t own = fl ? record(d, fl) : 0;
        int rc = uncertain(x, i, be, &own, fl != 0);
        if (rc) return rc;
        i = be;
    }
    return XGR_OK;
}

static int node(dctx *x, int32_t q, int32_t d, int32_t lo, int32_t hi);

/* Tokens [lo, hi), all longer than d, from q at depth d, one by one as the full pass walks
 * them (a wide node: a digit or whitespace run, whose range holds few tokens that do not
 * go on): each from the depth it shares with the token walked before, and a token that
 * dies with no pop open rejects every token with its prefix up to the dead byte. */
static int scan(dctx *x, int32_t q, int32_t d, int32_t lo, int32_t hi) {
    const struct xgr_vocab *v = x->v;
    int32_t *ds = x->dstate, cur = d;
    ds[d] = q;
    for (int32_t j = lo; j < hi;) {
        uint32_t len;
        const uint8_t *tok = xgr_vocab_sorted_token(v, j, &len);
        int32_t k = j == lo ? d : v->lcp[j];
        if (k > cur) k = cur;
        while ((uint32_t)k < len) {
            if (x->hybrid && has_ref(x->f, ds[k])) return XGR_DESCEND_STOP;
            int32_t t = xgr_fsm_byte_target(x->f, ds[k], tok[k]);
            if (t < 0) break;
            ds[++k] = t;
        }
        cur = k;
        if ((uint32_t)k == len) {
            if (XGR_VEC_PUSH(*x->acc, j)) return XGR_ERR_NOMEM;
            j++;
            continue;
        }
        int32_t n = 0; /* byte k has no edge: the pops at depths d..k */
        for (int32_t e = d > 0 ? d : 1; e <= k; e++) {
            int fl = effective(x, ds[e], e, tok[e]);
            if (fl < 0) return XGR_ERR_NOMEM;
            if (fl) x->ext[n++] = record(e, fl);
        }
        int32_t end = run_end(v, j, k, hi);
        int rc = uncertain(x, j, end, x->ext, n);
        if (rc) return rc;
        j = end;
    }
    return XGR_OK;
}
static int32_t byte_values(const xgr_fsm *f, int32_t q);

/* Tokens [a, b), whose byte d is b0, step from q to t. */
static int child(dctx *x, int32_t q, int32_t t, int32_t d, uint8_t b0, int32_t a, int32_t b) {
    int fl = effective(x, q, d, b0);
    if (fl < 0) return XGR_ERR_NOMEM;
    if (fl) x->path[x->npath++] = record(d, fl);
    int rc = node(x, t, d + 1, a, b);
    if (fl) x->npath--;
    return rc;
}

static int node(dctx *x, int32_t q, int32_t d, int32_t lo, int32_t hi) {
    const struct xgr_vocab *v = x->v;
    const xgr_fsm *f = x->f;
    for (; lo < hi && len_at(v, lo) == d; lo++) /* tokens that end here, alive (ties sort first) */
        if (XGR_VEC_PUSH(*x->acc, lo)) return XGR_ERR_NOMEM;
    if (lo >= hi) return XGR_OK;
    if (x->hybrid && has_ref(f, q)) return XGR_DESCEND_STOP;
    int need_dead = x->npath > 0 || xgr_state_pops(f, q) != 0;
    int32_t e0 = f->edge_begin[q], e1 = f->edge_begin[q + 1], nv = byte_values(f, q);
    int rc = XGR_OK;
    if (nv <= SPLIT_MAX) {
        int32_t cur = lo;
        for (int32_t e = e0; e < e1 && f->edges[e].ref < 0 && cur < hi && !rc; e++) {
            const xgr_edge *ed = &f->edges[e];
            int32_t s = lower(v, cur, hi, d, ed->lo);
            if (need_dead && cur < s && (rc = dead(x, q, d, cur, s))) return rc;
            int32_t en = lower(v, s, hi, d, ed->hi + 1);
            while (s < en && !rc) {
                uint8_t b = byte_at(v, s, d);
                int32_t be = ed->lo == ed->hi ? en : run_end(v, s, d, en);
                rc = child(x, q, ed->target, d, b, s, be);
                s = be;
            }
            cur = en;
        }
        if (!rc && need_dead && cur < hi) rc = dead(x, q, d, cur, hi);
        return rc;
    }
    return scan(x, q, d, lo, hi);
}

static int32_t byte_values(const xgr_fsm *f, int32_t q) {
    int32_t nv = 0;
    for (int32_t e = f->edge_begin[q]; e < f->edge_begin[q + 1] && f->edges[e].ref < 0; e++)
        nv += f->edges[e].hi - f->edges[e].lo + 1;
    return nv;
}

int xgr_descend_ref_near(const xgr_fsm *f, int32_t state, int depth) {
    if (has_ref(f, state)) return 1;
    if (depth == 0) return 0;
    for (int32_t e = f->edge_begin[state]; e < f->edge_begin[state + 1] && f->edges[e].ref < 0; e++)
        if (f->edges[e].target != state && xgr_descend_ref_near(f, f->edges[e].target, depth - 1))
            return 1;
    return 0;
}

int xgr_descend_applies(const xgr_fsm *f, int32_t state) {
    int32_t nv = byte_values(f, state);
    if (nv == 0 || nv > XGR_DESCEND_ROOT_MAX) return 0;
    /* and no wide state one byte on: the body of a string after its quote holds most of
     * the tokens that start with the quote, which the full pass accepts a block at a time */
    for (int32_t e = f->edge_begin[state]; e < f->edge_begin[state + 1] && f->edges[e].ref < 0; e++)
        if (byte_values(f, f->edges[e].target) > XGR_DESCEND_NEXT_MAX) return 0;
    return 1;
}

int xgr_descend(const struct xgr_vocab *v, const xgr_fsm *f, int32_t state, int refchk,
                int hybrid, xgr_pop_list *acc, xgr_pop_list *pops) {
    if (hybrid && has_ref(f, state)) return XGR_DESCEND_STOP;
    dctx x = {0};
    x.v = v;
    x.f = f;
    x.refchk = refchk;
    x.hybrid = hybrid;
    x.acc = acc;
    x.pops = pops;
    x.fstate = -1;
    /* per-depth arrays: on the stack for the usual token lengths (a first visit on cold
     * caches pays more for a malloc than for the walk of a key state) */
    size_t depths = (size_t)v->max_token_len + 2;
    int32_t local[3 * XGR_DEPTHS_LOCAL], *heap = NULL;
    if (depths > XGR_DEPTHS_LOCAL) heap = malloc(3 * depths * sizeof *heap);
    int32_t *arr = heap ? heap : local;
    x.path = arr;
    x.dstate = arr + depths;
    x.ext = arr + 2 * depths;
    int rc = depths <= XGR_DEPTHS_LOCAL || heap ? XGR_OK : XGR_ERR_NOMEM;
    /* depth 0: the first-byte table gives each child's range; no pop counts there */
    for (int32_t e = f->edge_begin[state]; e < f->edge_begin[state + 1] && !rc; e++) {
        const xgr_edge *ed = &f->edges[e];
        if (ed->ref >= 0) break;
        for (int b = ed->lo; b <= ed->hi && !rc; b++) {
            int32_t lo = v->first_byte_start[b], hi = v->first_byte_start[b + 1];
            if (lo < hi) rc = node(&x, ed->target, 1, lo, hi);
        }
    }
    free(heap);
    free(x.seen);
    free(x.stack);
    return rc;
}
