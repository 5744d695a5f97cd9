/* The vocabulary pass: walkers over a rule's automaton or the Earley parser, the flat
 * next-state tables they step through, and the classification of token lists. */
#include "walk.h"

#include "closure.h"
#include "descend.h"
#include "entry.h"
#include "follow_memo.h"
#include "stay.h"

enum { V_ACCEPT = XGR_V_ACCEPT, V_REJECT = XGR_V_REJECT, V_UNCERTAIN = XGR_V_UNCERTAIN };

/* pop[] flags: the rule can end here (POP_END), or a reference starts here in an opaque
 * rule (POP_REF, see compiled.h rule_opaque). A stored pop depth with POP_REF_BIT set
 * marks the latter: no follow check applies, the token stays uncertain. */
enum { POP_END = XGR_POP_END, POP_REF = XGR_POP_REF }; /* descend.h */
#define POP_REF_BIT XGR_POP_REF_BIT

/* walk.h's types under their short names */
typedef xgr_walk_token_list token_list;
typedef xgr_walk_first_cache first_cache;
typedef xgr_walk_out cl_out;

/* (sorted position, depth) of every pop a context-free classification leaves open */
typedef xgr_pop_list pop_list;

/* Is some pop at depth e in [1, d] (pop[e] set) followed by bytes tok[e..len) that the
 * stack-free follow automaton of `rule` admits? Then the token is uncertain. */
static int pop_continues(xgr_compiled *c, xgr_follow *fo, int32_t rule, const uint8_t *pop,
                         int32_t d, const uint8_t *tok, uint32_t len) {
    for (int32_t e = 1; e <= d; e++)
        if (pop[e] && (uint32_t)e < len && xgr_follow_memo(c, fo, rule, tok + e, len - (uint32_t)e))
            return 1;
    return 0;
}

/* Steps token bytes either through the Earley parser or, for a plain slot of a rule
 * without references (a pure DFA: one item per row) or an opaque rule, through the rule's
 * automaton alone, which is an order of magnitude cheaper per byte: a next-state table
 * over the rule's byte classes, built once per rule and grammar (flat_table), or for a
 * large rule the state's own sorted edges (a tag group of 20 tools has ~800 states: its
 * table would be ~150 KB, built and paged in for a walk through a dozen of them). */
typedef struct {
    xgr_parser *p;
    int32_t base;        /* Earley: row index of depth 0 */
    const xgr_fsm *f;
    int32_t rule_start;  /* flat: first state of the rule */
    const xgr_flat_table *ft; /* flat: the rule's table, NULL for Earley or edge walks */
    int edges;           /* flat, by each state's edges (no table) */
    int32_t *dstate;     /* flat: state at each depth */
    /* Hybrid (a plain slot of a rule with references): flat while the token stays on
     * states without reference edges, where the rule's own automaton is the only
     * derivation (a digit run followed by " the" dies at "t" without the parser); from
     * the first state with one, the parser, started there (depth sw; -1: still flat). */
    int hybrid;
    int32_t sw;
    const int32_t *ref_begin;
    /* Hybrid, start state with byte and reference edges whose references the callees'
     * own items decide (xgr_walk_refs_to_callees): no hand-over at depth 0. */
    int skip0;
} walker;

/* Rules with more states than this walk their edges instead of building a table. */
#define FLAT_TABLE_MAX_STATES 256
/* ... unless the walk covers the whole vocabulary (a new state's context-free entry, ~1M
 * steps at a 150k vocabulary): a table for a rule of this many states costs less to
 * build than the edge scans it saves there, and brings the stay test (a pattern's length
 * product of 1,463 states, Snowplow sp_345's semver string: its first entry 8.7 -> 3.5 ms
 * at Qwen3). Not for opaque rules (a tool set's tag group is built anew in every
 * request). Once built, a rule's table serves its other walks too. */
#define FLAT_TABLE_MAX_STATES_WHOLE 4096

/* stay.h xgr_next_fn over a flat table: local state -> local target. */
typedef struct {
    const xgr_flat_table *t;
    int32_t s0;
} flat_ctx;

static int32_t flat_next(const void *ctx, int32_t s, uint8_t b) {
    const flat_ctx *fc = ctx;
    int32_t t = fc->t->next[(size_t)s * (size_t)fc->t->n_cls + fc->t->cls[b]];
    return t < 0 ? -1 : t - fc->s0;
}

/* The byte-class next-state table of rule r: bytes are split into the classes no edge of
 * the rule tells apart (a few dozen in practice), so the table stays small for large
 * rules. Built on first use and published like the entries. `utf8`: search which states
 * every whole multi-byte character brings back (stay.h); without it their leave sets keep
 * the character bit (correct, and a walk for non-ASCII tokens). */
static int flat_table_at(xgr_compiled *c, int32_t r, int32_t at, int loop, int utf8,
                         const xgr_flat_table **out);

int xgr_walk_flat_table(xgr_compiled *c, int32_t r, int utf8, const xgr_flat_table **out) {
    return flat_table_at(c, r, r, 0, utf8, out);
}

/* The table of rule r, kept in flat_tables[at]. `loop`: r is a unit repetition's child
 * (loop_child), and every final state, which has no byte edge, takes its start state's
 * row: the next repetition, its counter aside. */
static int flat_table_at(xgr_compiled *c, int32_t r, int32_t at, int loop, int utf8,
                         const xgr_flat_table **out) {
    xgr_flat_table *t = atomic_load_explicit(&c->flat_tables[at], memory_order_acquire);
    if (t) {
        *out = t;
        return XGR_OK;
    }
    const xgr_fsm *f = c->fsm;
    int32_t s0 = f->rule_start[r], s1 = xgr_fsm_rule_end(f, r);
    t = xgr_calloc(1, sizeof *t);
    if (!t) return XGR_ERR_NOMEM;
    uint8_t cut[257] = {0};
    cut[0] = 1;
    for (int32_t e = f->edge_begin[s0]; e < f->edge_begin[s1]; e++)
        if (f->edges[e].ref < 0) {
            cut[f->edges[e].lo] = 1;
            cut[f->edges[e].hi + 1] = 1;
        }
    int32_t k = -1;
    for (int b = 0; b < 256; b++) {
        k += cut[b];
        t->cls[b] = (uint8_t)k;
    }
    t->n_cls = k + 1;
    size_t cells = (size_t)(s1 - s0) * (size_t)t->n_cls, nst = (size_t)(s1 - s0);
    size_t cells_al = (cells + 2) & ~(size_t)1; /* keeps `leave` 8-byte aligned */
    /* the per-state pop flags and leave sets share the block: one allocation, and one
     * load per byte for the pops instead of two */
    size_t bytes = cells_al * sizeof *t->next + nst * 2 * sizeof *t->leave + nst;
    t->next = xgr_malloc(bytes);
    if (!t->next) {
        free(t);
        return XGR_ERR_NOMEM;
    }
    memset(t->next, 0xff, cells * sizeof *t->next);
    t->leave = (uint64_t *)(void *)(t->next + cells_al);
    t->pops = (uint8_t *)(t->leave + nst * 2);
    for (int32_t s = s0; s < s1; s++) t->pops[s - s0] = (uint8_t)xgr_state_pops(f, s);
    for (int32_t s = s0; s < s1; s++)
        for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++) {
            if (f->edges[e].ref >= 0) break; /* byte edges come first */
            for (int32_t q = t->cls[f->edges[e].lo]; q <= t->cls[f->edges[e].hi]; q++)
                t->next[(size_t)(s - s0) * (size_t)t->n_cls + (size_t)q] = f->edges[e].target;
        }
    for (int32_t s = s0; s < s1 && loop; s++)
        if (f->final[s])
            memcpy(t->next + (size_t)(s - s0) * (size_t)t->n_cls, t->next,
                   (size_t)t->n_cls * sizeof *t->next);
    uint64_t cls_bits[256][2];
    memset(cls_bits, 0, sizeof cls_bits[0] * (size_t)t->n_cls);
    for (int b = 0; b < 256; b++) {
        int bit = xgr_byte_fold((uint8_t)b);
        cls_bits[t->cls[b]][bit >> 6] |= (uint64_t)1 << (bit & 63);
    }
    flat_ctx fctx = {t, s0};
    for (int32_t s = s0; s < s1; s++) {
        uint64_t *lv = t->leave + 2 * (size_t)(s - s0);
        int stays = 0;
        lv[0] = lv[1] = 0;
        for (int32_t q = 0; q < t->n_cls; q++)
            if (t->next[(size_t)(s - s0) * (size_t)t->n_cls + (size_t)q] != s) {
                lv[0] |= cls_bits[q][0];
                lv[1] |= cls_bits[q][1];
            } else {
                stays = t->any_stay = 1;
            }
        /* a whole multi-byte character keeps the state only where the search says so */
        uint64_t ch = (uint64_t)1 << (XGR_FOLD_CHAR & 63);
        if (!(lv[1] & ch) && (!utf8 || !stays || !xgr_utf8_closed(s - s0, s1 - s0, flat_next, &fctx)))
            lv[1] |= ch;
    }
    xgr_flat_table *expected = NULL;
    if (atomic_compare_exchange_strong(&c->flat_tables[at], &expected, t)) {
        atomic_fetch_add(&c->memory, sizeof *t + bytes);
    } else {
        free(t->next);
        free(t);
        t = expected;
    }
    *out = t;
    return XGR_OK;
}

/* `rep` >= 0: walk the state's rule as the loop of unit repetition `rep` (loop_child). */
static int walker_flat_init(xgr_compiled *c, walker *w, int32_t state, int32_t rep,
                            size_t depth_cap, int whole) {
    int32_t r = c->fsm->state_rule[state];
    w->f = c->fsm;
    w->rule_start = c->fsm->rule_start[r];
    w->dstate = xgr_malloc(depth_cap * sizeof *w->dstate);
    if (!w->dstate) return XGR_ERR_NOMEM;
    w->dstate[0] = state;
    if (rep >= 0) return flat_table_at(c, r, rep, 1, 0, &w->ft);
    int32_t max_states = whole && !c->rule_opaque[r] ? FLAT_TABLE_MAX_STATES_WHOLE : FLAT_TABLE_MAX_STATES;
    if (xgr_fsm_rule_end(c->fsm, r) - w->rule_start > max_states &&
        !atomic_load_explicit(&c->flat_tables[r], memory_order_acquire)) {
        w->edges = 1;
        return XGR_OK;
    }
    /* a tag group's table is built in every request: its states' UTF-8 closure (a few
     * microseconds each) would cost more there than the walks it saves; so would a large
     * rule's (the table then leaves the character bit in every looping state's leave set:
     * a token with a multi-byte character is stepped, not accepted at once) */
    int utf8 = c->rule_opaque[r] != XGR_OPAQUE_GROUP &&
               xgr_fsm_rule_end(c->fsm, r) - w->rule_start <= FLAT_TABLE_MAX_STATES;
    return xgr_walk_flat_table(c, r, utf8, &w->ft);
}

/* The child of a unit repetition: REPEAT rule `rep` over a reference-free rule whose
 * final states have no byte edge (each repetition ends where it can end: a JSON string's
 * `char` in `char{0,255}`), small enough for a table. Its body is then a plain automaton
 * (flat_table_at `loop`), and the pair slots of its states under `rep` are classified by
 * one table walk over the vocabulary instead of the parser on every token. -1 if not. */
int32_t xgr_walk_loop_child(const xgr_compiled *c, int32_t rep) {
    const xgr_fsm *f = c->fsm;
    if (f->rule_kind[rep] != XGR_RULE_REPEAT) return -1;
    int32_t r = f->repeat_child[rep];
    if (r < 0 || !c->rule_flat[r] || c->rule_opaque[r]) return -1;
    int32_t s0 = f->rule_start[r], s1 = xgr_fsm_rule_end(f, r);
    if (s1 - s0 > FLAT_TABLE_MAX_STATES || f->final[s0]) return -1;
    for (int32_t s = s0; s < s1; s++)
        if (f->final[s] && f->edge_begin[s + 1] > f->edge_begin[s]) return -1;
    return r;
}

int xgr_walk_refs_to_callees(const xgr_compiled *c, int32_t state) {
    const xgr_fsm *f = c->fsm;
    int32_t r = f->state_rule[state];
    if (c->rule_flat[r] || c->rule_opaque[r] || f->rule_kind[r] != XGR_RULE_NORMAL ||
        !c->scannable[state])
        return 0;
    int32_t e0 = c->ref_begin[state], e1 = f->edge_begin[state + 1];
    if (e0 == e1) return 0;
    for (int32_t e = e0; e < e1; e++) {
        int32_t t = f->edges[e].ref;
        if (t < 0) return 0;
        /* a callee whose start refers on (an optional-property chain: p_k's start predicts
         * p_k+1, which predicts p_k+2, ...): one walk through the parser here covers the
         * whole chain (cover.c), cheaper than an entry per predicted rule */
        int32_t s0 = f->rule_start[t];
        if (c->ref_begin[s0] != f->edge_begin[s0 + 1]) return 0;
    }
    return 1;
}

/* Hybrid walks: at depth d, on a state with reference edges, hand over to the parser
 * (row 0 = the closure of that state as the outer item) unless the token's byte there,
 * b, can start none of them (`fc`: xgr_ref_first, all bytes where a referenced rule
 * derives the empty string): then the parser would step on the byte edges alone, as the
 * walk does (a pattern's automaton reading each character through its own states, whose
 * `\uXXXX` escapes are a reference: only a backslash hands over). Returns whether it did.
 * At depth 0 of a start state whose references its callees' items decide (skip0), it
 * walks on over the byte edges only. */
static inline int walker_switch(walker *w, int32_t d, uint8_t b, first_cache *fc, int *rc) {
    int32_t s = w->dstate[d];
    *rc = XGR_OK;
    if (w->sw >= 0 || w->ref_begin[s] == w->f->edge_begin[s + 1] || (d == 0 && w->skip0))
        return 0;
    /* (the cache's scratch, n_states entries, is made at the first state asked about) */
    if (!fc->seen && (*rc = xgr_walk_first_cache_init(fc, w->f))) return 0;
    if (!xgr_walk_first_cache_admits(fc, w->f, s, b)) return 0;
    xgr_item it = {s, XGR_ORIGIN_OUTER, 0, 0};
    if ((*rc = xgr_parser_start(w->p, it))) return 0;
    w->sw = d;
    w->base = -d;
    return 1;
}

static inline int walker_step(walker *w, int32_t d, uint8_t byte, int *alive, int *popped) {
    if ((w->ft || w->edges) && w->sw < 0) {
        const xgr_flat_table *ft = w->ft;
        int32_t t = ft ? ft->next[(size_t)(w->dstate[d] - w->rule_start) * (size_t)ft->n_cls + ft->cls[byte]]
                       : xgr_fsm_byte_target(w->f, w->dstate[d], byte);
        *alive = t >= 0;
        if (t >= 0) {
            w->dstate[d + 1] = t;
            *popped = ft ? ft->pops[t - w->rule_start] : xgr_state_pops(w->f, t);
            if (w->hybrid) *popped &= POP_END; /* its references are followed, not pops */
        }
        return XGR_OK;
    }
    xgr_parser_truncate(w->p, w->base + d + 1);
    int rc = xgr_parser_step(w->p, byte, alive);
    *popped = w->p->popped;
    return rc;
}

/* xgr_row_stays for the first looping item of parser row `row` alone, resuming the byte
 * path kept for that row at depth *sd (walk_classify's spath; started afresh where *sd
 * is another depth): 1 when the item's byte edges consume tok[d..len). A 0 says nothing
 * of the row's other looping items. */
static int path_stays(const xgr_parser *p, int32_t row, const uint8_t *flags, const uint8_t *tok,
                      uint32_t len, int32_t d, int32_t *sd, int32_t *sn, int32_t *spath) {
    if (*sd != d) {
        int32_t k = p->row_begin.data[row], e = p->row_begin.data[row + 1];
        while (k < e && !(flags[p->items.data[k].state] & XGR_SCAN_LOOP)) k++;
        if (k == e) return 0;
        *sd = d;
        *sn = 0;
        spath[0] = p->items.data[k].state;
    }
    int32_t q = *sn, n = (int32_t)len - d;
    for (; q < n; q++) {
        int32_t t = xgr_fsm_byte_target(p->fsm, spath[q], tok[d + q]);
        if (t < 0) break;
        spath[q + 1] = t;
    }
    *sn = q;
    return q == n;
}

/* Clears the row-byte flags of depths `from` and beyond (every set flag is at a depth <= *hi). */
static inline void rb_drop(uint8_t *rbv, int32_t *hi, int32_t from) {
    for (int32_t j = from; j <= *hi; j++) rbv[j] = 0;
    if (*hi >= from) *hi = from - 1;
}

/* Classifies every sortable token for `slot` into verdict[] (indexed by sorted pos; may
 * be NULL for a context-free pass, whose acc / pops lists say it all).
 * A pair slot simulates its state with the caller state on the stack (compiled.h). */
static inline int tl_all(const token_list *t) { return !t->ids && !t->pos; }

static inline const uint8_t *tl_token(const token_list *t, int32_t i, uint32_t *len) {
    if (t->pos) return xgr_vocab_sorted_token(t->v, t->pos[i], len);
    return t->ids ? xgr_vocab_token(t->v, t->ids[i], len) : xgr_vocab_sorted_token(t->v, i, len);
}

/* Common prefix length of list items i-1 and i (0 for i == 0). */
static inline int32_t tl_lcp(const token_list *t, int32_t i) {
    if (tl_all(t)) return t->v->lcp[i];
    if (i == 0) return 0;
    if (t->pos && t->pos[i] == t->pos[i - 1] + 1) return t->v->lcp[t->pos[i]];
    uint32_t la, lb;
    const uint8_t *a = tl_token(t, i - 1, &la), *b = tl_token(t, i, &lb);
    return (int32_t)xgr_common_prefix(a, la, b, lb);
}

int xgr_walk_first_cache_init(first_cache *fc, const xgr_fsm *f) {
    fc->seen = xgr_calloc((size_t)f->n_states + 1, sizeof *fc->seen);
    fc->stack = xgr_malloc(((size_t)f->n_states + 1) * sizeof *fc->stack);
    fc->stamp = 0;
    fc->state = -1;
    return fc->seen && fc->stack ? XGR_OK : XGR_ERR_NOMEM;
}

void xgr_walk_first_cache_free(first_cache *fc) {
    free(fc->seen);
    free(fc->stack);
}

int xgr_walk_first_cache_admits(first_cache *fc, const xgr_fsm *f, int32_t state, uint8_t b) {
    if (state != fc->state) {
        xgr_ref_first(f, state, fc->seen, ++fc->stamp, fc->stack, fc->bits);
        if (fc->widen) xgr_ref_first_widen(fc->bits);
        fc->state = state;
    }
    return (fc->bits[b >> 5] >> (b & 31)) & 1;
}

/* The bytes a classification's walk can step on first, as 256 bits, when its start is
 * known without a step: the start state's byte edges for an automaton walk that begins on
 * it (a hybrid walk hands over to the parser at once where the state has references),
 * the parser row's scannable bytes otherwise. Returns 0 where it cannot tell. */
static int first_bytes(const xgr_compiled *c, const walker *w, int32_t state, uint32_t out[8]) {
    const xgr_fsm *f = c->fsm;
    if (!w->ft && !w->edges) {
        xgr_parser_next_bytes(w->p, out);
        return 1;
    }
    if (w->hybrid && !w->skip0 && c->ref_begin[state] != f->edge_begin[state + 1]) return 0;
    memset(out, 0, 8 * sizeof *out);
    xgr_fsm_byte_set(f, state, out);
    return 1;
}

/* xgr_walk_classify's token loop for a table walk (w->ft, not hybrid) of the whole sorted
 * vocabulary into acc_bits, with optional pops and units, no verdicts and no reference
 * checks: the same steps in the same order, so the same bits, pops and units.
 * `first_ok`: the start state's first bytes (NULL: every first byte steps); `tbytes`:
 * the tokens' byte sets for the stay test at character boundaries (NULL: none). */
static int flat_vocab_walk(const struct xgr_vocab *v, walker *w, uint64_t *blk, pop_list *pops,
                           uint16_t *units, const uint64_t *tbytes, const uint32_t *first_ok,
                           uint8_t *pop, int32_t *npop) {
    const xgr_flat_table *ft = w->ft;
    const int32_t *next = ft->next, rs = w->rule_start, ncls = ft->n_cls;
    const uint8_t *cls = ft->cls, *tpops = ft->pops;
    const uint64_t *leave = ft->leave;
    int32_t *dstate = w->dstate;
    const int32_t n = v->n_sorted;
    const uint8_t *ptok = NULL;
    uint32_t plen = 0;
    int skipped = 0;
    int32_t cur = 0;
    for (int32_t i = 0; i < n; i++) {
        if ((blk[i >> 6] >> (i & 63)) & 1) { /* accepted a range at a time: skip */
            if ((i = xgr_next_clear(blk, v->set_words, i)) >= n) break;
            skipped = 1;
        }
        uint32_t len;
        const uint8_t *tok = xgr_vocab_sorted_token(v, i, &len);
        if (first_ok && !((first_ok[tok[0] >> 5] >> (tok[0] & 31)) & 1)) {
            int b = tok[0] + 1;
            while (b < 256 && !((first_ok[b >> 5] >> (b & 31)) & 1)) b++;
            i = v->first_byte_start[b] - 1;
            skipped = 1;
            continue;
        }
        int32_t li = skipped && ptok ? (int32_t)xgr_common_prefix(ptok, plen, tok, len) : v->lcp[i];
        skipped = 0;
        ptok = tok;
        plen = len;
        int32_t d = li < cur ? li : cur;
        int dead = 0;
        uint64_t tb0 = tbytes ? tbytes[2 * (size_t)i] : 0, tb1 = tbytes ? tbytes[2 * (size_t)i + 1] : 0;
        while ((uint32_t)d < len) {
            if (tbytes && !xgr_utf8_cont(tok[d])) { /* at a character boundary (vocab.h) */
                const uint64_t *lv = leave + 2 * (size_t)(dstate[d] - rs);
                if (!((lv[0] & tb0) | (lv[1] & tb1))) break;
            }
            int32_t t = next[(size_t)(dstate[d] - rs) * (size_t)ncls + cls[tok[d]]];
            if (t < 0) {
                dead = 1;
                break;
            }
            dstate[d + 1] = t;
            uint8_t pp = tpops[t - rs];
            d++;
            pop[d] = pp;
            npop[d] = npop[d - 1] + (pp != 0);
        }
        cur = d;
        if (!dead) {
            /* (tbytes is NULL with units: a stay would not count them) */
            if (units) units[i] = (uint16_t)(npop[len - 1] < 65534 ? npop[len - 1] + 1 : 65535);
            blk[i >> 6] |= (uint64_t)1 << (i & 63);
            continue;
        }
        /* Byte d has no transition: the tokens sharing bytes 0..d die there with the same
         * pops (xgr_walk_classify). */
        int32_t live = npop[d];
        if (live == 0) {
            i = xgr_vocab_prefix_end(v, i, tok, (uint32_t)d + 1) - 1;
            continue;
        }
        for (int32_t j = i;; j++) {
            uint32_t lj;
            (void)xgr_vocab_sorted_token(v, j, &lj);
            if (pops)
                for (int32_t e = 1; e <= d; e++)
                    if (pop[e] && (uint32_t)e < lj) {
                        int32_t rec = (pop[e] & POP_REF) || e >= (int32_t)POP_REF_BIT
                                          ? (int32_t)(POP_REF_BIT | (e & 0x7fff))
                                          : e;
                        if (XGR_VEC_PUSH(*pops, j) || XGR_VEC_PUSH(*pops, rec)) return XGR_ERR_NOMEM;
                    }
            if (j + 1 >= n || v->lcp[j + 1] <= d) {
                i = j;
                break;
            }
        }
    }
    return XGR_OK;
}

/* `earley`: simulate through the parser even for an opaque rule, following its
 * references (a grammar's own view, where those references are known). */
int xgr_walk_classify(xgr_compiled *c, xgr_parser *p, xgr_follow *fo, int32_t slot,
                      const token_list *tl, const cl_out *o, int earley) {
    uint8_t *verdict = o->verdict;
    pop_list *pops = o->pops, *acc = o->acc, *groups = o->groups;
    uint64_t *blk = tl_all(tl) ? o->acc_bits : NULL;
    const struct xgr_vocab *v = c->vocab;
    int32_t ns = c->fsm->n_states;
    int32_t state = slot, caller = -1;
    if (slot >= ns) xgr_pair_slot(c, slot, &state, &caller);
    int32_t pop_rule = c->fsm->state_rule[state];
    size_t depth_cap = (size_t)v->max_token_len + 2;
    walker w = {0};
    int rc;
    if (o->units) {
        pop_rule = c->fsm->state_rule[caller];
        rc = walker_flat_init(c, &w, state, pop_rule, depth_cap, 1);
    } else if (slot >= ns) {
        pop_rule = c->fsm->state_rule[caller];
        xgr_item parent = {caller, XGR_ORIGIN_OUTER, 0, 0};
        xgr_item child = {state, 0, 0, 0};
        rc = xgr_parser_start_in_caller(p, parent, child);
    } else if (!earley && (c->rule_flat[pop_rule] || c->rule_opaque[pop_rule])) {
        rc = walker_flat_init(c, &w, state, -1, depth_cap, tl_all(tl));
    } else if (!earley && tl_all(tl)) {
        /* the whole vocabulary: most tokens die on the rule's own bytes */
        rc = walker_flat_init(c, &w, state, -1, depth_cap, 1);
        w.hybrid = 1;
        w.ref_begin = c->ref_begin;
        w.skip0 = xgr_walk_refs_to_callees(c, state);
    } else {
        xgr_item init = {state, XGR_ORIGIN_OUTER, 0, 0};
        rc = xgr_parser_start(p, init);
    }
    uint8_t *pop = xgr_calloc(depth_cap, 1);    /* pop[e]: the rule can end after e bytes */
    /* Per depth, the byte sets of the Earley row there (stay.h xgr_row_bytes: next 0..7,
     * loop 8..15), valid where rbv[d]; every flag set lies at a depth <= rb_hi. A row
     * holding a chain of optional properties has hundreds of items: a token whose byte
     * there no item scans dies at a bit read instead of a step over them all. */
    uint32_t(*rbits)[16] = xgr_malloc(depth_cap * sizeof *rbits);
    uint8_t *rbv = xgr_calloc(depth_cap, 1);
    int32_t rb_hi = -1;
    /* The byte path of the first looping item of the row at depth sd over the bytes of the
     * tokens from sd on: spath[q] is its state after q of them, valid for q <= sn (the
     * bytes the current token shares with those it was stepped on). Sorted tokens share
     * long prefixes, so the stay test at that row resumes where the path stands instead
     * of stepping every token's rest from the item (a string body with multi-byte
     * characters: ~100k tokens a pass). Dropped when the row's byte sets are computed
     * again (a new row there). */
    int32_t sd = -1, sn = 0;
    int32_t *spath = xgr_malloc((depth_cap + 1) * sizeof *spath);
    int32_t *npop = xgr_calloc(depth_cap, sizeof *npop); /* pops in depths 1..e */
    /* In an opaque rule a reference start counts as a pop only where the token's next byte
     * can start the reference: a whitespace run before a tool's arguments then rejects
     * " the" at its second byte instead of keeping every token that starts with a space
     * open, and so does a trigger ending in a space (`{"name": `). A tag group's entries
     * are its grammar's own; a dispatch rule's key holds those first bytes, widened as
     * here (closure.h xgr_ref_first_widen).
     * eff[] holds the pops that count. */
    int refchk = slot < ns && !earley && c->rule_opaque[pop_rule];
    uint8_t *eff = refchk ? xgr_calloc(depth_cap, 1) : NULL;
    first_cache fc = {0};
    if (!rc && refchk && !eff) rc = XGR_ERR_NOMEM;
    if (!rc && refchk) rc = xgr_walk_first_cache_init(&fc, c->fsm);
    fc.widen = refchk && c->rule_opaque[pop_rule] == XGR_OPAQUE_DISPATCH; /* as its key */
    if (!rc && (!pop || !npop || !rbits || !rbv || !spath)) rc = XGR_ERR_NOMEM;
    if (rc) goto out;
    w.p = p;
    w.base = w.ft || w.edges ? 0 : xgr_parser_rows(p) - 1;
    w.sw = -1;
    int32_t cur = 0; /* depths 0..cur are valid for the previous token's prefix */
    /* A table walk over the whole sorted vocabulary stops early where the state goes to
     * itself on every byte the token holds (free text away from a trigger): the token is
     * accepted there, without a step per byte. */
    const uint64_t *tbytes = w.ft && w.ft->any_stay && tl_all(tl) && !o->units ? v->sorted_bytes : NULL;
    if (blk && tbytes) {
        int32_t to[256], s0 = w.rule_start;
        const uint64_t *lv[256];
        uint64_t *scratch = xgr_malloc(((size_t)v->set_words + 1) * sizeof *scratch);
        if (!scratch) {
            rc = XGR_ERR_NOMEM;
            goto out;
        }
        for (int b = 0; b < 256; b++) {
            int32_t t = w.ft->next[(size_t)(state - s0) * (size_t)w.ft->n_cls + w.ft->cls[b]];
            to[b] = t < 0 ? -1 : t - s0;
        }
        /* (a token that stays is accepted whatever pops it passes) */
        flat_ctx fctx = {w.ft, s0};
        int32_t n_local = xgr_fsm_rule_end(c->fsm, c->fsm->state_rule[state]) - s0;
        xgr_stay_first(to, w.ft->leave, state - s0, n_local, flat_next, &fctx, lv);
        xgr_stay_accept(v, lv, blk, scratch);
        free(scratch);
    }
    /* Over the whole sorted vocabulary, a first byte the start state cannot step on kills
     * every token in its range at depth 0, where no pop is open: rejected, nothing to
     * record. Such ranges (most of the ~250 of a key or punctuation state) are skipped
     * whole instead of stepping one token of each. */
    uint32_t first_ok[8];
    int skip_first = tl_all(tl) && first_bytes(c, &w, state, first_ok);
    /* A table walk of a rule's own automaton over the whole vocabulary into acc_bits (a
     * flat rule's context-free entry, a loop entry): the loop below with every branch
     * this case never takes left out (no parser, no hand-over, no verdicts, no reference
     * pops), the same result. These walks are a new state's first entry (a bounded
     * string's loop, a pattern's automaton): ~1M steps at a 150k vocabulary. */
    if (w.ft && !w.hybrid && blk && !verdict && !acc && !groups && !refchk && tl_all(tl)) {
        rc = flat_vocab_walk(v, &w, blk, pops, o->units, tbytes, skip_first ? first_ok : NULL, pop,
                             npop);
        goto out;
    }
    /* the token whose prefix states dstate[0..cur] hold, once positions were skipped */
    const uint8_t *ptok = NULL;
    uint32_t plen = 0;
    int skipped = 0;
    for (int32_t i = 0; i < tl->n; i++) {
        if (blk && (blk[i >> 6] >> (i & 63)) & 1) { /* accepted a range at a time: skip */
            if ((i = xgr_next_clear(blk, v->set_words, i)) >= tl->n) break;
            skipped = 1;
        }
        uint32_t len;
        const uint8_t *tok = tl_token(tl, i, &len);
        if (skip_first && !((first_ok[tok[0] >> 5] >> (tok[0] & 31)) & 1)) {
            int b = tok[0] + 1;
            while (b < 256 && !((first_ok[b >> 5] >> (b & 31)) & 1)) b++;
            int32_t end = v->first_byte_start[b];
            if (verdict) memset(verdict + i, V_REJECT, (size_t)(end - i));
            i = end - 1;
            skipped = 1; /* the next token's prefix states are not those of the one before */
            continue;
        }
        int32_t li = skipped && ptok ? (int32_t)xgr_common_prefix(ptok, plen, tok, len) : tl_lcp(tl, i);
        skipped = 0;
        if (sd >= 0 && sn > li - sd) { /* the path holds for the bytes shared with the token */
            if (li < sd) sd = -1;        /* (then the row at sd is stepped again) */
            else sn = li - sd;
        }
        ptok = tok;
        plen = len;
        int32_t d = li < cur ? li : cur;
        if (w.hybrid && d < w.sw) w.sw = -1; /* back on the flat prefix */
        rb_drop(rbv, &rb_hi, d + 1); /* the rows past depth d are stepped again */
        int dead = 0;
        uint64_t tb0 = tbytes ? tbytes[2 * (size_t)i] : 0, tb1 = tbytes ? tbytes[2 * (size_t)i + 1] : 0;
        while ((uint32_t)d < len) {
            int earley_now = (!w.ft && !w.edges) || w.sw >= 0;
            if (tbytes && !earley_now && !xgr_utf8_cont(tok[d])) { /* at a character boundary (vocab.h) */
                const uint64_t *lv = w.ft->leave + 2 * (size_t)(w.dstate[d] - w.rule_start);
                if (!((lv[0] & tb0) | (lv[1] & tb1))) break;
            }
            if (w.hybrid && walker_switch(&w, d, tok[d], &fc, &rc)) {
                earley_now = 1;
                rb_drop(rbv, &rb_hi, d); /* a new row at depth d */
                if (d > 0 && p->popped && !pop[d]) { /* ends here through empty references */
                    pop[d] = POP_END;
                    npop[d] = npop[d - 1] + 1;
                }
            }
            if (rc) goto out;
            if (earley_now) {
                if (!rbv[d]) {
                    xgr_row_bytes(p, w.base + d, c->scannable, rbits[d], rbits[d] + 8);
                    rbv[d] = 1;
                    if (d > rb_hi) rb_hi = d;
                    if (sd == d) sd = -1;
                }
                uint8_t b = tok[d];
                if (!((rbits[d][b >> 5] >> (b & 31)) & 1)) {
                    dead = 1; /* no item scans it: the step would die */
                    break;
                }
                if (((rbits[d][8 + (b >> 5)] >> (b & 31)) & 1) &&
                    (path_stays(p, w.base + d, c->scannable, tok, len, d, &sd, &sn, spath) ||
                     xgr_row_stays(p, w.base + d, c->scannable, tok + d, len - (uint32_t)d)))
                    break; /* the rest stays in a loop of some item (a string body) */
            }
            int alive, popped = 0;
            if ((rc = walker_step(&w, d, tok[d], &alive, &popped))) goto out;
            if (!alive) {
                dead = 1;
                break;
            }
            d++;
            pop[d] = (uint8_t)popped;
            npop[d] = npop[d - 1] + (popped != 0);
        }
        cur = d;
        if (!dead) {
            if (o->units) o->units[i] = (uint16_t)(npop[len - 1] < 65534 ? npop[len - 1] + 1 : 65535);
            if (verdict) verdict[i] = V_ACCEPT;
            if (blk) blk[i >> 6] |= (uint64_t)1 << (i & 63);
            else if (acc && XGR_VEC_PUSH(*acc, i)) {
                rc = XGR_ERR_NOMEM;
                goto out;
            }
            continue;
        }
        /* Byte d has no transition: every following token sharing bytes 0..d dies at the
         * same place with the same pops; only their bytes after each pop differ. Without
         * pops they are all rejected: find the end of that prefix range by binary search
         * instead of walking it (most states reject most first bytes). */
        const uint8_t *pp = pop;
        int32_t live = npop[d];
        if (refchk && live) {
            live = 0;
            for (int32_t e = 1; e <= d; e++) {
                uint8_t q = pop[e] & POP_END;
                if ((pop[e] & POP_REF) && xgr_walk_first_cache_admits(&fc, c->fsm, w.dstate[e], tok[e]))
                    q |= POP_REF;
                eff[e] = q;
                live += q != 0;
            }
            pp = eff;
        }
        if (live == 0 && tl_all(tl)) {
            int32_t end = xgr_vocab_prefix_end(v, i, tok, (uint32_t)d + 1);
            if (verdict) memset(verdict + i, V_REJECT, (size_t)(end - i));
            i = end - 1;
            continue;
        }
        if (groups && pops && XGR_VEC_PUSH(*groups, (int32_t)pops->len)) {
            rc = XGR_ERR_NOMEM;
            goto out;
        }
        for (int32_t j = i;; j++) {
            uint32_t lj;
            const uint8_t *tj = tl_token(tl, j, &lj);
            if (pops) {
                /* context-free: keep every pop that leaves bytes for the caller */
                if (verdict) verdict[j] = V_REJECT;
                for (int32_t e = 1; e <= d && live; e++)
                    if (pp[e] && (uint32_t)e < lj) {
                        /* depths beyond the 15-bit field keep the token uncertain */
                        int32_t rec = (pp[e] & POP_REF) || e >= (int32_t)POP_REF_BIT
                                          ? (int32_t)(POP_REF_BIT | (e & 0x7fff))
                                          : e;
                        if (XGR_VEC_PUSH(*pops, j) || XGR_VEC_PUSH(*pops, rec)) {
                            rc = XGR_ERR_NOMEM;
                            goto out;
                        }
                        if (verdict) verdict[j] = V_UNCERTAIN;
                    }
            } else {
                verdict[j] = live && pop_continues(c, fo, pop_rule, pp, d, tj, lj)
                                 ? V_UNCERTAIN
                                 : V_REJECT;
            }
            if (j + 1 >= tl->n || tl_lcp(tl, j + 1) <= d) {
                i = j;
                break;
            }
        }
    }
out:
    free(pop);
    free(npop);
    free(rbits);
    free(rbv);
    free(spath);
    free(eff);
    xgr_walk_first_cache_free(&fc);
    free(w.dstate);
    return rc;
}
