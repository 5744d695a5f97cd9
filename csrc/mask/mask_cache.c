/* Adaptive token-mask cache: per scannable state, split the vocabulary into accepted,
 * rejected and uncertain tokens by simulating the state's rule alone over the sorted
 * vocabulary, reusing parser rows across shared prefixes and skipping subtrees. */
#include "closure.h"
#include "descend.h"
#include "compiled.h"
#include "follow.h"
#include "global_cache.h"
#include "region.h"
#include "stay.h"
#include "suffix_set.h"

enum { V_ACCEPT = XGR_V_ACCEPT, V_REJECT = XGR_V_REJECT, V_UNCERTAIN = XGR_V_UNCERTAIN };

/* pop[] flags: the rule can end here (POP_END), or a reference starts here in an opaque
 * rule (POP_REF, see compiled.h rule_opaque). A stored pop depth with POP_REF_BIT set
 * marks the latter: no follow check applies, the token stays uncertain. */
enum { POP_END = XGR_POP_END, POP_REF = XGR_POP_REF }; /* descend.h */

/* Raw entries leaving more tokens open than this skip sharpening (see sharpen). */
#define XGR_SHARPEN_MAX 4096
/* Scratch lists (xgr_mask_scratch) with more room than this many items are freed after use. */
#define SCRATCH_KEEP 16384
#define POP_REF_BIT XGR_POP_REF_BIT

/* Frees array p of entry e unless it lies in e's own block (entry_block). */
static void free_array(const xgr_mask_entry *e, void *p) {
    uintptr_t a = (uintptr_t)p, lo = (uintptr_t)(e + 1);
    if (a < lo || a >= lo + e->block) free(p);
}

void xgr_mask_entry_free(xgr_mask_entry *e) {
    if (!e) return;
    if (e->owns_base) xgr_mask_entry_release(e->base);
    free_array(e, e->ids_by_len);
    free_array(e, e->run_begin);
    free_array(e, e->run_pos);
    free_array(e, e->pop_begin);
    free_array(e, e->pop_depth);
    free_array(e, e->ids);
    free_array(e, e->bits);
    free_array(e, e->uncertain);
    free_array(e, e->unit_ids);
    free_array(e, e->unit_end);
    free_array(e, e->exit_first);
    xgr_region_sfx_free(e->sfx);
    xgr_region_sfx_free(e->psfx);
    free(e->uoff);
    if (!e->in_arena) free(e);
}

/* mem as a zeroed entry with `extra` bytes of block behind it. */
static xgr_mask_entry *block_init(void *mem, size_t extra, char **tail) {
    xgr_mask_entry *e = mem;
    memset(e, 0, sizeof *e);
    e->block = extra;
    *tail = (char *)(e + 1);
    return e;
}

/* A zeroed entry with `extra` bytes behind it for its arrays, carved by the caller with
 * block_take. One allocation instead of one per array: a first visit runs on cold caches,
 * where each malloc costs more than the arrays' bytes (docs/mask-cache.md). */
static xgr_mask_entry *entry_block(size_t extra, char **tail) {
    void *mem = xgr_malloc(sizeof(xgr_mask_entry) + extra);
    return mem ? block_init(mem, extra, tail) : NULL;
}

/* Entries of at most this many bytes (with their block) that live as long as their grammar
 * come from the grammar's arena; chunks hold ARENA_CHUNK bytes. */
#define ARENA_MAX 2048
#define ARENA_CHUNK 16384

/* entry_block for an entry that only grammar c holds (a sharpened entry, published in one
 * of its slots): from c's arena when small, so a first visit makes no malloc for it. Its
 * memory returns with the grammar; one that loses the race to publish (xgr_mask_entry_get)
 * stays there unused until then. */
static xgr_mask_entry *grammar_block(xgr_compiled *c, size_t extra, char **tail) {
    size_t n = (sizeof(xgr_mask_entry) + extra + 15) & ~(size_t)15;
    if (n > ARENA_MAX) return entry_block(extra, tail);
    pthread_mutex_lock(&c->arena_lock);
    xgr_arena_chunk *k = c->arena;
    if (!k || k->cap - k->used < n) {
        k = xgr_malloc(sizeof *k + ARENA_CHUNK);
        if (!k) {
            pthread_mutex_unlock(&c->arena_lock);
            return NULL;
        }
        k->next = c->arena;
        k->used = 0;
        k->cap = ARENA_CHUNK;
        c->arena = k;
        atomic_fetch_add(&c->memory, sizeof *k + ARENA_CHUNK); /* (its entries: not again) */
    }
    void *mem = (char *)k->data + k->used;
    k->used += n;
    pthread_mutex_unlock(&c->arena_lock);
    xgr_mask_entry *e = block_init(mem, extra, tail);
    e->in_arena = 1;
    return e;
}

/* The next n bytes of an entry's block (4-byte arrays first, then 2-byte ones, keeps each
 * aligned: the entry's size is a multiple of 8). */
static void *block_take(char **tail, size_t n) {
    void *p = *tail;
    *tail += n;
    return p;
}

void xgr_region_sfx_free(xgr_region_sfx *S) {
    if (!S) return;
    free(S->group);
    free(S->exit);
    free(S->off);
    free(S->bytes);
    free(S);
}

/* Is some pop at depth e in [1, d] (pop[e] set) followed by bytes tok[e..len) that the
 * stack-free follow automaton of `rule` admits? Then the token is uncertain. */
static int follow_memo(xgr_compiled *c, xgr_follow *fo, int32_t rule, const uint8_t *s,
                       uint32_t n);

static int pop_continues(xgr_compiled *c, xgr_follow *fo, int32_t rule, const uint8_t *pop,
                         int32_t d, const uint8_t *tok, uint32_t len) {
    for (int32_t e = 1; e <= d; e++)
        if (pop[e] && (uint32_t)e < len && follow_memo(c, fo, rule, tok + e, len - (uint32_t)e))
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
} walker;

/* Rules with more states than this walk their edges instead of building a table. */
#define FLAT_TABLE_MAX_STATES 256

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

static int flat_table(xgr_compiled *c, int32_t r, int utf8, const xgr_flat_table **out) {
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
                            size_t depth_cap) {
    int32_t r = c->fsm->state_rule[state];
    w->f = c->fsm;
    w->rule_start = c->fsm->rule_start[r];
    w->dstate = xgr_malloc(depth_cap * sizeof *w->dstate);
    if (!w->dstate) return XGR_ERR_NOMEM;
    w->dstate[0] = state;
    if (rep >= 0) return flat_table_at(c, r, rep, 1, 0, &w->ft);
    if (xgr_fsm_rule_end(c->fsm, r) - w->rule_start > FLAT_TABLE_MAX_STATES) {
        w->edges = 1;
        return XGR_OK;
    }
    /* a tag group's table is built in every request: its states' UTF-8 closure (a few
     * microseconds each) would cost more there than the walks it saves */
    return flat_table(c, r, c->rule_opaque[r] != XGR_OPAQUE_GROUP, &w->ft);
}

/* The child of a unit repetition: REPEAT rule `rep` over a reference-free rule whose
 * final states have no byte edge (each repetition ends where it can end: a JSON string's
 * `char` in `char{0,255}`), small enough for a table. Its body is then a plain automaton
 * (flat_table_at `loop`), and the pair slots of its states under `rep` are classified by
 * one table walk over the vocabulary instead of the parser on every token. -1 if not. */
static int32_t loop_child(const xgr_compiled *c, int32_t rep) {
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

/* Hybrid walks: at depth d, on a state with reference edges, hand over to the parser
 * (row 0 = the closure of that state as the outer item). Returns whether it did. */
static inline int walker_switch(walker *w, int32_t d, int *rc) {
    int32_t s = w->dstate[d];
    *rc = XGR_OK;
    if (w->sw >= 0 || w->ref_begin[s] == w->f->edge_begin[s + 1]) return 0;
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

/* Classifies every sortable token for `slot` into verdict[] (indexed by sorted pos; may
 * be NULL for a context-free pass, whose acc / pops lists say it all).
 * A pair slot simulates its state with the caller state on the stack (compiled.h). */
static inline uint32_t common_prefix(const uint8_t *a, uint32_t la, const uint8_t *b,
                                     uint32_t lb) {
    uint32_t n = la < lb ? la : lb, k = 0;
    while (k < n && a[k] == b[k]) k++;
    return k;
}

/* Tokens to classify: all sorted tokens (ids and pos NULL), a sorted subset of ids, or a
 * subset of sorted positions, ascending. Positions read the bytes in sorted order, where
 * neighbours share cache lines and the lcp array gives their common prefix; ids jump
 * through the vocabulary, a cache miss per token on a cold cache. */
typedef struct {
    const struct xgr_vocab *v;
    const int32_t *ids;
    int32_t n;
    const int32_t *pos;
} token_list;

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
    return (int32_t)common_prefix(a, la, b, lb);
}

/* (sorted position, depth) of every pop a context-free classification leaves open */
typedef xgr_pop_list pop_list;

/* Can byte b start what a reference at `state` enters? (xgr_ref_first, cached for the last
 * state asked about; `seen` / `stack` are per-state scratch.) */
typedef struct {
    uint32_t *seen, stamp;
    int32_t *stack;
    int32_t state;
    uint32_t bits[8];
    int widen; /* xgr_ref_first_widen the sets: a TagDispatch rule's shared entries */
} first_cache;

static int first_cache_init(first_cache *fc, const xgr_fsm *f);
static void first_cache_free(first_cache *fc);
static int first_cache_admits(first_cache *fc, const xgr_fsm *f, int32_t state, uint8_t b);

/* What a classification writes; every member is optional. */
typedef struct {
    uint8_t *verdict; /* by list position */
    pop_list *pops;   /* context-free: (position, depth) of every pop that leaves bytes */
    pop_list *acc;    /* accepted list positions */
    /* The whole vocabulary only, instead of acc: the accepted sorted positions as bits
     * (vocab.h set_words words, zeroed). A table walk first accepts, a first-byte range
     * at a time, every token that stays put after its first byte (stay.h). */
    uint64_t *acc_bits;
    /* With pops: pops->len at the start of every run of tokens that die at the same byte
     * after the same prefix, so share their pops and every verdict that depends on bytes
     * up to there (sharpen_dispatch decides such runs at once). */
    pop_list *groups;
    /* Loop mode (the whole vocabulary, a pair slot whose caller is a unit repetition,
     * loop_child): walk the child's loop table, and for every accepted sorted position
     * write how many repetitions it runs (1 + the final states it passes before its end). */
    uint16_t *units;
} cl_out;

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
    if (w->hybrid && c->ref_begin[state] != f->edge_begin[state + 1]) return 0;
    memset(out, 0, 8 * sizeof *out);
    xgr_fsm_byte_set(f, state, out);
    return 1;
}

/* `earley`: simulate through the parser even for an opaque rule, following its
 * references (a grammar's own view, where those references are known). */
static int classify(xgr_compiled *c, xgr_parser *p, xgr_follow *fo, int32_t slot,
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
        rc = walker_flat_init(c, &w, state, pop_rule, depth_cap);
    } else if (slot >= ns) {
        pop_rule = c->fsm->state_rule[caller];
        xgr_item parent = {caller, XGR_ORIGIN_OUTER, 0, 0};
        xgr_item child = {state, 0, 0, 0};
        rc = xgr_parser_start_in_caller(p, parent, child);
    } else if (!earley && (c->rule_flat[pop_rule] || c->rule_opaque[pop_rule])) {
        rc = walker_flat_init(c, &w, state, -1, depth_cap);
    } else if (!earley && tl_all(tl)) {
        /* the whole vocabulary: most tokens die on the rule's own bytes */
        rc = walker_flat_init(c, &w, state, -1, depth_cap);
        w.hybrid = 1;
        w.ref_begin = c->ref_begin;
    } else {
        xgr_item init = {state, XGR_ORIGIN_OUTER, 0, 0};
        rc = xgr_parser_start(p, init);
    }
    uint8_t *pop = xgr_calloc(depth_cap, 1);    /* pop[e]: the rule can end after e bytes */
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
    if (!rc && refchk) rc = first_cache_init(&fc, c->fsm);
    fc.widen = refchk && c->rule_opaque[pop_rule] == XGR_OPAQUE_DISPATCH; /* as its key */
    if (!rc && (!pop || !npop)) rc = XGR_ERR_NOMEM;
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
        xgr_stay_first(to, w.ft->leave, state - s0, lv);
        xgr_stay_accept(v, lv, blk, scratch);
        free(scratch);
    }
    /* Over the whole sorted vocabulary, a first byte the start state cannot step on kills
     * every token in its range at depth 0, where no pop is open: rejected, nothing to
     * record. Such ranges (most of the ~250 of a key or punctuation state) are skipped
     * whole instead of stepping one token of each. */
    uint32_t first_ok[8];
    int skip_first = tl_all(tl) && first_bytes(c, &w, state, first_ok);
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
        int32_t li = skipped && ptok ? (int32_t)common_prefix(ptok, plen, tok, len) : tl_lcp(tl, i);
        skipped = 0;
        ptok = tok;
        plen = len;
        int32_t d = li < cur ? li : cur;
        if (w.hybrid && d < w.sw) w.sw = -1; /* back on the flat prefix */
        int dead = 0;
        uint64_t tb0 = tbytes ? tbytes[2 * (size_t)i] : 0, tb1 = tbytes ? tbytes[2 * (size_t)i + 1] : 0;
        while ((uint32_t)d < len) {
            int earley_now = (!w.ft && !w.edges) || w.sw >= 0;
            if (tbytes && !earley_now && !xgr_utf8_cont(tok[d])) { /* at a character boundary (vocab.h) */
                const uint64_t *lv = w.ft->leave + 2 * (size_t)(w.dstate[d] - w.rule_start);
                if (!((lv[0] & tb0) | (lv[1] & tb1))) break;
            }
            if (w.hybrid && walker_switch(&w, d, &rc)) {
                earley_now = 1;
                if (d > 0 && p->popped && !pop[d]) { /* ends here through empty references */
                    pop[d] = POP_END;
                    npop[d] = npop[d - 1] + 1;
                }
            }
            if (rc) goto out;
            if (earley_now && xgr_row_stays(p, w.base + d, c->scannable, tok + d, len - (uint32_t)d))
                break; /* the rest stays in a loop of some item (a string body) */
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
                if ((pop[e] & POP_REF) && first_cache_admits(&fc, c->fsm, w.dstate[e], tok[e]))
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
    free(eff);
    first_cache_free(&fc);
    free(w.dstate);
    return rc;
}

/* Number of distinct tokens in a (position, depth) pop list (positions ascending). */
static int32_t pop_tokens(const pop_list *pops) {
    int32_t n = 0;
    for (size_t k = 0; k < pops->len; k += 2) n += k == 0 || pops->data[k] != pops->data[k - 2];
    return n;
}

/* Block bytes for the uncertain part of a pop list with n tokens (set_uncertain). */
static size_t uncertain_bytes(const pop_list *pops, int32_t n) {
    return ((size_t)n + 1) * 8 + (pops->len / 2 + 1) * 2;
}

/* Fills e's uncertain tokens and their pop depths from a pop list of n tokens, in e's
 * block (uncertain_bytes of it, taken last: the depths are 2-byte); ids maps a list
 * position to its token id. */
static void set_uncertain(xgr_mask_entry *e, const pop_list *pops, int32_t n,
                          const int32_t *ids, char **tail) {
    e->n_uncertain = n;
    e->uncertain = block_take(tail, ((size_t)n + 1) * sizeof *e->uncertain);
    e->pop_begin = block_take(tail, ((size_t)n + 1) * sizeof *e->pop_begin);
    e->pop_depth = block_take(tail, (pops->len / 2 + 1) * sizeof *e->pop_depth);
    int32_t ku = 0;
    size_t np = 0;
    for (size_t k = 0; k < pops->len; k += 2) {
        if (k == 0 || pops->data[k] != pops->data[k - 2]) {
            e->pop_begin[ku] = (int32_t)np;
            e->uncertain[ku++] = ids[pops->data[k]];
        }
        e->pop_depth[np++] = (uint16_t)pops->data[k + 1];
    }
    e->pop_begin[ku] = (int32_t)np;
}

/* The form of a context-free entry with n_acc accepted and n_unc uncertain tokens: the
 * smallest of the three. A rejected-list entry is applied by clearing its rejected and its
 * uncertain tokens from the text row (matcher.c), so a long uncertain list (a TagDispatch
 * state just before a trigger's last byte) makes the bitset cheaper to apply. */
static int entry_form(const struct xgr_vocab *v, int32_t n_acc, int32_t n_unc) {
    int32_t n_rej = v->n_sorted - n_acc - n_unc;
    size_t list_acc = (size_t)n_acc * 4, list_rej = (size_t)n_rej * 4,
           bitset = (size_t)v->row_words * 4;
    if (list_acc <= list_rej && list_acc <= bitset) return XGR_MASK_ACCEPTED_LIST;
    if (list_rej + (size_t)n_unc * 4 <= bitset) return XGR_MASK_REJECTED_LIST;
    return XGR_MASK_BITSET;
}

/* A context-free entry of `form` with its uncertain part filled from pops and room for its
 * ids or bits (e->bytes set); NULL when out of memory. */
static xgr_mask_entry *entry_shell(const struct xgr_vocab *v, int form, int32_t n_acc,
                                   const pop_list *pops) {
    int32_t n_unc = pop_tokens(pops);
    int32_t n_ids = form == XGR_MASK_ACCEPTED_LIST   ? n_acc
                    : form == XGR_MASK_REJECTED_LIST ? v->n_sorted - n_acc - n_unc
                                                     : 0;
    size_t own = form == XGR_MASK_BITSET ? (size_t)v->row_words * sizeof(uint32_t)
                                         : ((size_t)n_ids + 1) * sizeof(int32_t);
    char *tail = NULL;
    xgr_mask_entry *e = entry_block(own + uncertain_bytes(pops, n_unc), &tail);
    if (!e) return NULL;
    e->form = form;
    e->n_ids = n_ids;
    atomic_init(&e->refcount, 1);
    e->n_accepted = n_acc;
    if (form == XGR_MASK_BITSET) e->bits = block_take(&tail, own);
    else e->ids = block_take(&tail, own);
    set_uncertain(e, pops, n_unc, v->sorted, &tail);
    e->bytes = sizeof *e + e->block;
    return e;
}

/* The bits of positions [s, t) in word w of a sorted-position bitset. */
static inline uint64_t range_word(int32_t s, int32_t t, int32_t w) {
    uint64_t in = ~(uint64_t)0;
    if (w == s >> 6) in &= ~(uint64_t)0 << (s & 63);
    if (w == (t - 1) >> 6 && (t & 63) != 0) in &= ~(uint64_t)0 >> (64 - (t & 63));
    return in;
}

/* Clears from `bits` (an id row) every wide first-byte range (vocab.h first_ids) that
 * holds few accepted positions, a word at a time, and sets those few back; *todo gets
 * ~acc_bits without those ranges, for the caller's per-token pass over the rest (NULL when
 * no range was cleared). */
static int clear_wide_ranges(const struct xgr_vocab *v, const uint64_t *acc_bits, uint32_t *bits,
                             uint64_t **todo) {
    size_t sw = (size_t)v->set_words;
    *todo = NULL;
    for (int b = 0; b < 256; b++) {
        if (!v->first_ids[b]) continue;
        int32_t s = v->first_byte_start[b], t = v->first_byte_start[b + 1], n_acc = 0;
        for (int32_t w = s >> 6; w <= (t - 1) >> 6; w++)
            n_acc += xgr_popcount64(acc_bits[w] & range_word(s, t, w));
        if (n_acc > (t - s) / 8) continue;
        if (!*todo) {
            if (!(*todo = xgr_malloc((sw + 1) * sizeof **todo))) return XGR_ERR_NOMEM;
            for (size_t w = 0; w < sw; w++) (*todo)[w] = ~acc_bits[w];
        }
        for (int32_t k = 0; k < v->row_words; k++) bits[k] &= ~v->first_ids[b][k];
        for (int32_t w = s >> 6; w <= (t - 1) >> 6; w++) {
            uint64_t in = range_word(s, t, w);
            (*todo)[w] &= ~in;
            for (uint64_t m = acc_bits[w] & in; m; m &= m - 1) {
                int32_t id = v->sorted[(size_t)w * 64 + (size_t)xgr_ctz64(m)];
                bits[id >> 5] |= 1u << (id & 31);
            }
        }
    }
    return XGR_OK;
}

/* Builds the context-free entry of a state from its classification of the whole sorted
 * vocabulary (accepted sorted positions as bits, set_words words; the (position, pop
 * depth) pairs of the uncertain ones; the rest rejected), in the smallest of the three
 * forms. Every form is built from the accepted bits or their complement, whichever is
 * sparse: a free-text state accepts nearly all 128k tokens, a key state nearly none. The
 * entry may be shared by other grammars, so it holds no grammar-specific data. */
int xgr_mask_entry_from_bits(const struct xgr_vocab *v, const uint64_t *acc_bits,
                             const pop_list *pops, xgr_mask_entry **out) {
    size_t sw = (size_t)v->set_words;
    int32_t n_acc = 0;
    for (size_t w = 0; w < sw; w++) n_acc += xgr_popcount64(acc_bits[w]);
    xgr_mask_entry *e = entry_shell(v, entry_form(v, n_acc, pop_tokens(pops)), n_acc, pops);
    if (!e) return XGR_ERR_NOMEM;
    int32_t k = 0;
    if (e->form == XGR_MASK_ACCEPTED_LIST) {
        for (size_t w = 0; w < sw; w++)
            for (uint64_t m = acc_bits[w]; m; m &= m - 1)
                e->ids[k++] = v->sorted[w * 64 + (size_t)xgr_ctz64(m)];
    } else {
        /* the positions not accepted: rejected ones, and the uncertain (pops, ascending) */
        uint64_t *todo = NULL; /* ~acc_bits less the first-byte ranges cleared word-wise */
        if (e->bits) {
            memcpy(e->bits, v->text_bits, (size_t)v->row_words * sizeof *e->bits);
            if (clear_wide_ranges(v, acc_bits, e->bits, &todo)) {
                xgr_mask_entry_free(e);
                return XGR_ERR_NOMEM;
            }
        }
        size_t kp = 0;
        for (size_t w = 0; w < sw; w++) {
            uint64_t m = todo ? todo[w] : ~acc_bits[w];
            if (w == sw - 1 && (v->n_sorted & 63)) m &= ~(uint64_t)0 >> (64 - (v->n_sorted & 63));
            for (; m; m &= m - 1) {
                int32_t i = (int32_t)(w * 64) + xgr_ctz64(m), id = v->sorted[i];
                if (e->bits) {
                    e->bits[id >> 5] &= ~(1u << (id & 31));
                    continue;
                }
                while (kp < pops->len && pops->data[kp] < i) kp += 2;
                if (kp < pops->len && pops->data[kp] == i) continue;
                e->ids[k++] = id;
            }
        }
        free(todo);
    }
    *out = e;
    return XGR_OK;
}

/* The same entry from the accepted sorted positions as a list (ascending), as the descent
 * gives them: an accepted list straight from it, without a pass over set_words words. */
static int entry_from_lists(const struct xgr_vocab *v, const pop_list *acc, const pop_list *pops,
                            xgr_mask_entry **out) {
    int32_t n_acc = (int32_t)acc->len;
    int form = entry_form(v, n_acc, pop_tokens(pops));
    if (form != XGR_MASK_ACCEPTED_LIST) {
        uint64_t *bits = xgr_calloc((size_t)v->set_words + 1, sizeof *bits);
        if (!bits) return XGR_ERR_NOMEM;
        for (size_t k = 0; k < acc->len; k++)
            bits[acc->data[k] >> 6] |= (uint64_t)1 << (acc->data[k] & 63);
        int rc = xgr_mask_entry_from_bits(v, bits, pops, out);
        free(bits);
        return rc;
    }
    xgr_mask_entry *e = entry_shell(v, form, n_acc, pops);
    if (!e) return XGR_ERR_NOMEM;
    for (int32_t k = 0; k < n_acc; k++) e->ids[k] = v->sorted[acc->data[k]];
    *out = e;
    return XGR_OK;
}

/* Memo of follow checks, per compiled grammar (compiled.h): tokens that leave a rule at
 * the same bytes (",", "\"}") share the verdict, those suffixes repeat across thousands of
 * tokens, and across every state of the rule, whose entries are built one at a time. The
 * suffixes point into the vocabulary, which the grammar keeps alive. */
static size_t fmemo_find(const xgr_follow_memo_slot *tab, size_t cap, uint64_t h, int32_t rule,
                         const uint8_t *s, uint32_t n) {
    for (size_t k = h & (cap - 1);; k = (k + 1) & (cap - 1))
        if (tab[k].val < 0 ||
            (tab[k].rule == rule && tab[k].n == n && memcmp(tab[k].s, s, n) == 0))
            return k;
}

static int fmemo_grow(xgr_compiled *c) {
    size_t cap = c->fmemo_cap ? c->fmemo_cap * 2 : 1024;
    xgr_follow_memo_slot *tab = xgr_malloc(cap * sizeof *tab);
    if (!tab) return -1;
    for (size_t k = 0; k < cap; k++) tab[k].val = -1;
    for (size_t k = 0; k < c->fmemo_cap; k++) {
        const xgr_follow_memo_slot *o = &c->fmemo[k];
        if (o->val >= 0) tab[fmemo_find(tab, cap, o->hash, o->rule, o->s, o->n)] = *o;
    }
    free(c->fmemo);
    atomic_fetch_add(&c->memory, (cap - c->fmemo_cap) * sizeof *tab);
    c->fmemo = tab;
    c->fmemo_cap = cap;
    return 0;
}

/* The grammar's return-point tables, built by the first query of any thread and published
 * with a compare-and-swap like the entries. */
static int follow_tables(xgr_compiled *c, xgr_follow *fo) {
    xgr_follow_tables *t = atomic_load_explicit(&c->follow, memory_order_acquire);
    if (!t) {
        int rc = xgr_follow_tables_build(c->fsm, &t);
        if (rc) return rc;
        xgr_follow_tables *expected = NULL;
        if (atomic_compare_exchange_strong(&c->follow, &expected, t)) {
            atomic_fetch_add(&c->memory, t->bytes);
        } else {
            xgr_follow_tables_free(t);
            t = expected;
        }
    }
    fo->t = t;
    return XGR_OK;
}

static int follow_memo(xgr_compiled *c, xgr_follow *fo, int32_t rule, const uint8_t *s,
                       uint32_t n) {
    if (!fo->t && follow_tables(c, fo)) return 1; /* out of memory: keep the token open */
    /* Most suffixes die at their first byte: no hashing, no lock. */
    if (n && !xgr_follow_first_admits(fo, rule, s[0])) return 0;
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)(uint32_t)rule;
    for (uint32_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ULL;
    h = xgr_mix64(h);
    int val = -1;
    pthread_mutex_lock(&c->fmemo_lock);
    if (c->fmemo_cap) {
        const xgr_follow_memo_slot *sl = &c->fmemo[fmemo_find(c->fmemo, c->fmemo_cap, h, rule, s, n)];
        val = sl->val;
    }
    pthread_mutex_unlock(&c->fmemo_lock);
    if (val >= 0) return val;
    val = xgr_follow_possible(fo, rule, s, n);
    if (val != 0 && val != 1) return 1; /* no scratch (out of memory): keep the token open */
    pthread_mutex_lock(&c->fmemo_lock);
    /* Bounded: past XGR_FOLLOW_MEMO_MAX slots a grammar just stops memoising. */
    if ((c->fmemo_len + 1) * 10 <= c->fmemo_cap * 7 ||
        (c->fmemo_cap < XGR_FOLLOW_MEMO_MAX && !fmemo_grow(c))) {
        xgr_follow_memo_slot *sl = &c->fmemo[fmemo_find(c->fmemo, c->fmemo_cap, h, rule, s, n)];
        if (sl->val < 0) {
            sl->s = s;
            sl->n = n;
            sl->rule = rule;
            sl->hash = h;
            sl->val = (int8_t)val;
            c->fmemo_len++;
        }
    }
    pthread_mutex_unlock(&c->fmemo_lock);
    return val;
}

static int first_cache_init(first_cache *fc, const xgr_fsm *f) {
    fc->seen = xgr_calloc((size_t)f->n_states + 1, sizeof *fc->seen);
    fc->stack = xgr_malloc(((size_t)f->n_states + 1) * sizeof *fc->stack);
    fc->stamp = 0;
    fc->state = -1;
    return fc->seen && fc->stack ? XGR_OK : XGR_ERR_NOMEM;
}

static void first_cache_free(first_cache *fc) {
    free(fc->seen);
    free(fc->stack);
}

static int first_cache_admits(first_cache *fc, const xgr_fsm *f, int32_t state, uint8_t b) {
    if (state != fc->state) {
        xgr_ref_first(f, state, fc->seen, ++fc->stamp, fc->stack, fc->bits);
        if (fc->widen) xgr_ref_first_widen(fc->bits);
        fc->state = state;
    }
    return (fc->bits[b >> 5] >> (b & 31)) & 1;
}

/* Opaque rules record "a reference starts here" as a pop (POP_REF_BIT) without knowing the
 * reference. For this grammar: can token bytes tok[d..) start it? Walks the token from
 * `state` on the rule's own automaton to depth d (reusing the previous token's walk for a
 * common prefix) and checks byte d against the references' first bytes there. */
typedef struct {
    const xgr_flat_table *ft;
    int32_t rule_start;
    int32_t *dstate; /* state at each depth of the previous token */
    const uint8_t *prev;
    uint32_t prev_len, valid; /* depths 0..valid hold prev's states */
    first_cache fc;
} ref_check;

/* Walks tok from the slot state to depth `upto` (reusing the previous token's states for
 * a common prefix); returns the depth reached: `upto`, or where the byte has no edge. */
static uint32_t walk_to(ref_check *rk, const uint8_t *tok, uint32_t len, uint32_t upto) {
    uint32_t q = 0, m = len < rk->prev_len ? len : rk->prev_len;
    while (q < rk->valid && q < m && q < upto && tok[q] == rk->prev[q]) q++;
    for (; q < upto; q++) {
        int32_t t = rk->ft->next[(size_t)(rk->dstate[q] - rk->rule_start) * (size_t)rk->ft->n_cls +
                                 rk->ft->cls[tok[q]]];
        if (t < 0) break;
        rk->dstate[q + 1] = t;
    }
    rk->prev = tok;
    rk->prev_len = len;
    rk->valid = q;
    return q;
}

static int ref_viable(const xgr_fsm *f, ref_check *rk, const uint8_t *tok, uint32_t len, uint32_t d) {
    if (d >= len) return 0;
    if (walk_to(rk, tok, len, d) < d) return 1; /* cannot happen for a recorded pop; stay conservative */
    int32_t s = rk->dstate[d];
    int32_t e1 = f->edge_begin[s + 1];
    if (e1 == f->edge_begin[s] || f->edges[e1 - 1].ref < 0) return 1; /* a deep END pop */
    return first_cache_admits(&rk->fc, f, s, tok[d]);
}

static int refined_from_lists(const struct xgr_vocab *v, const xgr_mask_entry *base,
                              const int32_t *acc, int32_t n_acc, const int32_t *unc,
                              int32_t n_unc, xgr_mask_entry **out);

/* Item i of run r of a TagDispatch entry (run r starts at uncertain[i0]): its sorted
 * position when every run is consecutive there (by_pos), else its id. */
static inline int32_t run_item(const xgr_mask_entry *raw, int by_pos, int32_t r, int32_t i0,
                               int32_t i) {
    return by_pos ? raw->run_pos[r] + (i - i0) : raw->uncertain[i];
}

/* A TagDispatch state's view in this grammar, run by run (compiled.h run_begin): a run
 * whose pops are all reference starts is kept or rejected as a whole by its first
 * token's next byte, so the pass costs a step per run, not per token (57k tokens in 121
 * runs after `{"name":`). The few tokens kept (those that finish a trigger and go on
 * into a tag) are then decided exactly by the parser, which sees this grammar's tags, so
 * the matcher does not re-check them at every step. */
static int sharpen_dispatch(xgr_compiled *c, xgr_parser *p, xgr_follow *fo, int32_t state,
                            xgr_mask_entry *raw, xgr_mask_entry **out) {
    const struct xgr_vocab *v = c->vocab;
    const xgr_fsm *f = c->fsm;
    int32_t rule = f->state_rule[state], n_keep = 0, n_acc = 0, n_unc = 0;
    pop_list keep = {0}; /* kept, in sorted order: sorted positions (by_pos) or ids */
    int by_pos = raw->run_pos != NULL;
    for (int32_t r = 0; r < raw->n_runs && by_pos; r++) by_pos = raw->run_pos[r] >= 0;
    int32_t *acc = NULL, *unc = NULL;
    uint8_t *exact = NULL;
    ref_check rk;
    memset(&rk, 0, sizeof rk);
    rk.rule_start = f->rule_start[rule];
    rk.dstate = xgr_malloc(((size_t)v->max_token_len + 2) * sizeof *rk.dstate);
    int rc = rk.dstate ? first_cache_init(&rk.fc, f) : XGR_ERR_NOMEM;
    if (!rc) rc = flat_table(c, rule, 0, &rk.ft);
    if (!rc) rk.dstate[0] = state;
    for (int32_t r = 0; r < raw->n_runs && !rc; r++) {
        int32_t i0 = raw->run_begin[r], i1 = raw->run_begin[r + 1];
        int only_refs = 1;
        for (int32_t k = raw->pop_begin[i0]; k < raw->pop_begin[i0 + 1]; k++)
            only_refs &= (raw->pop_depth[k] & POP_REF_BIT) != 0;
        for (int32_t i = i0; i < i1 && !rc; i++) {
            uint32_t len;
            const uint8_t *tok = by_pos ? xgr_vocab_sorted_token(v, run_item(raw, 1, r, i0, i), &len)
                                        : xgr_vocab_token(v, raw->uncertain[i], &len);
            int kept = 0;
            for (int32_t k = raw->pop_begin[i]; k < raw->pop_begin[i + 1] && !kept; k++) {
                uint32_t d = raw->pop_depth[k];
                kept = d & POP_REF_BIT ? ref_viable(f, &rk, tok, len, d & 0x7fffu)
                                       : follow_memo(c, fo, rule, tok + d, len - d);
            }
            if (only_refs) { /* the whole run shares the verdict */
                for (int32_t j = i0; j < i1 && kept && !rc; j++)
                    if (XGR_VEC_PUSH(keep, run_item(raw, by_pos, r, i0, j))) rc = XGR_ERR_NOMEM;
                break;
            }
            if (kept && XGR_VEC_PUSH(keep, run_item(raw, by_pos, r, i0, i))) rc = XGR_ERR_NOMEM;
        }
    }
    free(rk.dstate);
    first_cache_free(&rk.fc);
    n_keep = (int32_t)keep.len;
    acc = xgr_malloc(((size_t)n_keep + 1) * sizeof *acc);
    unc = xgr_malloc(((size_t)n_keep + 1) * sizeof *unc);
    exact = xgr_malloc((size_t)n_keep + 1);
    if (!rc && (!acc || !unc || !exact)) rc = XGR_ERR_NOMEM;
    if (!rc) {
        token_list tl = {v, by_pos ? NULL : keep.data, n_keep, by_pos ? keep.data : NULL};
        int ok = n_keep && n_keep <= XGR_SHARPEN_MAX;
        if (ok) {
            cl_out o = {exact, NULL, NULL, NULL, NULL, NULL};
            rc = classify(c, p, fo, state, &tl, &o, 1);
            if (rc == XGR_ERR_LIMIT) rc = XGR_OK, ok = 0; /* too much parser work: left open */
        }
        for (int32_t k = 0; k < n_keep && !rc; k++) {
            uint8_t vd = ok ? exact[k] : V_UNCERTAIN;
            int32_t id = by_pos ? v->sorted[keep.data[k]] : keep.data[k];
            if (vd == V_ACCEPT) acc[n_acc++] = id;
            if (vd == V_UNCERTAIN) unc[n_unc++] = id;
        }
    }
    xgr_mask_entry *e = NULL;
    if (!rc) rc = refined_from_lists(v, raw, acc, n_acc, unc, n_unc, &e);
    if (!rc) {
        e->owns_base = 1;
        xgr_mask_entry_retain(raw);
        e->wants_context = n_unc > c->opts.context_min_uncertain;
        *out = e;
    }
    XGR_VEC_FREE(keep);
    free(acc);
    free(unc);
    free(exact);
    return rc;
}

/* This grammar's view of a context-free entry: its uncertain tokens whose bytes after a
 * pop could follow the rule somewhere in this grammar (stack-free over-approximation); the
 * rest are rejected. A TagDispatch state's entry (which always records its runs) is
 * settled by sharpen_dispatch; a tag group's classification already kept only viable
 * reference starts. */
/* `rep` >= 0: raw is a loop entry of state under unit repetition `rep` (loop_raw_entry),
 * whose pops leave `rep`: follow `rep`, and keep the first bytes of its follow. */
static int sharpen(xgr_compiled *c, xgr_parser *p, xgr_follow *fo, int32_t state,
                   int32_t rep, xgr_mask_entry *raw, xgr_mask_entry **out) {
    if (rep < 0 && raw->run_begin && raw->n_uncertain &&
        c->rule_opaque[c->fsm->state_rule[state]] == XGR_OPAQUE_DISPATCH)
        return sharpen_dispatch(c, p, fo, state, raw, out);
    const struct xgr_vocab *v = c->vocab;
    const xgr_fsm *f = c->fsm;
    int32_t rule = rep >= 0 ? rep : f->state_rule[state];
    size_t nu = (size_t)raw->n_uncertain + 1, nx = rep >= 0 ? 8 : 0;
    char *tail = NULL;
    xgr_mask_entry *e = grammar_block(c, (nu + nx) * 4, &tail);
    const xgr_region_sfx *S = raw->psfx;
    int8_t gkeep_local[256]; /* per suffix group, -1: not yet */
    int8_t *gkeep = !S || S->n <= 256 ? gkeep_local : xgr_malloc((size_t)S->n);
    if (!e || !gkeep) {
        xgr_mask_entry_free(e);
        return XGR_ERR_NOMEM;
    }
    int32_t *unc = block_take(&tail, nu * sizeof *unc);
    if (S) memset(gkeep, -1, (size_t)S->n);
    if (rep >= 0) {
        e->exit_first = block_take(&tail, nx * sizeof *e->exit_first);
        memset(e->exit_first, 0, nx * sizeof *e->exit_first);
        int rc = fo->t ? XGR_OK : follow_tables(c, fo);
        for (int b = 0; b < 256 && !rc; b++)
            if (xgr_follow_first_admits(fo, rule, (uint8_t)b)) /* 1, or unknown */
                e->exit_first[b >> 5] |= 1u << (b & 31);
        if (rc) {
            xgr_mask_entry_free(e);
            if (gkeep != gkeep_local) free(gkeep);
            return rc;
        }
    }
    int opaque = c->rule_opaque[rule];
    int32_t n = 0;
    /* A state that leaves most of the vocabulary open (the one-character body of a
     * compressed repetition) is always served through its callers' context entries, which
     * re-decide the raw list anyway: sharpening it would cost a follow check per token for
     * nothing. Not for the root, which has no caller, nor without caller-context slots,
     * nor for opaque rules: their callers' entries are not shared. */
    int unsharpened = rep < 0 && raw->n_uncertain > XGR_SHARPEN_MAX && rule != f->root &&
                      c->n_slots > f->n_states && !opaque;
    if (unsharpened) {
        memcpy(unc, raw->uncertain, (size_t)raw->n_uncertain * sizeof *unc);
        n = raw->n_uncertain;
    }
    for (int32_t i = 0; i < raw->n_uncertain && !unsharpened; i++) {
        int32_t g = S ? S->group[i] : -1;
        if (g >= 0) {
            if (gkeep[g] < 0)
                gkeep[g] = (int8_t)follow_memo(c, fo, rule, S->bytes + S->off[g], S->off[g + 1] - S->off[g]);
            if (gkeep[g]) unc[n++] = raw->uncertain[i];
            continue;
        }
        uint32_t len;
        const uint8_t *tok = xgr_vocab_token(v, raw->uncertain[i], &len);
        int keep = 0;
        for (int32_t k = raw->pop_begin[i]; k < raw->pop_begin[i + 1] && !keep; k++) {
            uint32_t d = raw->pop_depth[k];
            keep = (d & POP_REF_BIT) || follow_memo(c, fo, rule, tok + d, len - d);
        }
        if (keep) unc[n++] = raw->uncertain[i];
    }
    if (gkeep != gkeep_local) free(gkeep);
    atomic_init(&e->refcount, 1);
    e->form = XGR_MASK_REFINED;
    e->base = raw;
    e->owns_base = 1;
    xgr_mask_entry_retain(raw);
    e->ids = NULL;
    e->n_ids = 0;
    e->uncertain = unc;
    e->n_uncertain = n;
    e->n_accepted = raw->n_accepted;
    e->wants_context = unsharpened || n > c->opts.context_min_uncertain;
    e->bytes = sizeof *e + e->block;
    *out = e;
    return XGR_OK;
}

/* Closure keys past this size are not worth building: a rule that holds a whole request's
 * tool set (Harmony's message loop: ~300 KB at 100 tools, 0.3 ms to serialise in every
 * request) is never seen in another grammar, and a grammar seen again whole is found by
 * the compile cache instead. A tool's argument schema, the closure that does recur, is a
 * few KB. */
#define XGR_KEY_MAX_BYTES ((size_t)64 << 10)

/* The closure key of `rule`, computed once per compiled grammar and published with a
 * compare-and-swap like the entries. */
static int rule_key(xgr_compiled *c, int32_t rule, const xgr_rule_key **out) {
    xgr_rule_key *k = atomic_load_explicit(&c->rule_keys[rule], memory_order_acquire);
    if (!k) {
        k = xgr_calloc(1, sizeof *k);
        if (!k) return XGR_ERR_NOMEM;
        int rc = c->rule_unique[rule]
                     ? XGR_ERR_LIMIT /* (a tag group's entries see its references: classify) */
                     : xgr_closure_key(c->fsm, rule, c->rule_opaque[rule], c->rule_unique, 1,
                                       XGR_KEY_MAX_BYTES, &k->bytes, &k->len, &k->hash);
        if (rc == XGR_ERR_LIMIT) {
            k->unshareable = 1; /* too big to be worth sharing, or this request's own */
        } else if (rc) {
            free(k);
            return rc;
        }
        xgr_rule_key *expected = NULL;
        if (!atomic_compare_exchange_strong(&c->rule_keys[rule], &expected, k)) {
            free(k->bytes);
            free(k);
            k = expected;
        } else {
            atomic_fetch_add(&c->memory, sizeof *k + k->len);
        }
    }
    *out = k;
    return XGR_OK;
}

/* Builds a REFINED entry from verdicts over base's uncertain tokens. */
/* ids sorted by token length, longest first (insertion into buckets by length). */
static int sort_by_length_desc(const struct xgr_vocab *v, const int32_t *ids, int32_t n,
                               int32_t *out) {
    int32_t maxl = v->max_token_len, local[XGR_DEPTHS_LOCAL];
    int32_t *cnt = maxl + 2 <= XGR_DEPTHS_LOCAL ? local
                                                : xgr_malloc(((size_t)maxl + 2) * sizeof *cnt);
    if (!cnt) return XGR_ERR_NOMEM;
    memset(cnt, 0, ((size_t)maxl + 2) * sizeof *cnt);
    for (int32_t i = 0; i < n; i++) {
        uint32_t l;
        xgr_vocab_token(v, ids[i], &l);
        cnt[maxl - (int32_t)l]++;
    }
    for (int32_t k = 0, acc = 0; k <= maxl; k++) {
        int32_t c0 = cnt[k];
        cnt[k] = acc;
        acc += c0;
    }
    for (int32_t i = 0; i < n; i++) {
        uint32_t l;
        xgr_vocab_token(v, ids[i], &l);
        out[cnt[maxl - (int32_t)l]++] = ids[i];
    }
    if (cnt != local) free(cnt);
    return XGR_OK;
}

/* A REFINED entry over `base` that accepts acc[0..n_acc) and leaves unc[0..n_unc) open
 * (both among base's uncertain tokens, in its order); base's other uncertain tokens are
 * rejected. The lists are copied. */
static int refined_from_lists(const struct xgr_vocab *v, const xgr_mask_entry *base,
                              const int32_t *acc, int32_t n_acc, const int32_t *unc,
                              int32_t n_unc, xgr_mask_entry **out) {
    /* Large sets are ORed as a bitset; the length order serves REPEAT callers near their
     * maximum, where the longest accepted tokens must be re-checked (matcher.c). */
    size_t rw = (size_t)v->row_words, nb = (size_t)n_acc > rw ? rw : 0;
    char *tail = NULL;
    xgr_mask_entry *e =
        entry_block((2 * ((size_t)n_acc + 1) + (size_t)n_unc + 1 + nb) * 4, &tail);
    if (!e) return XGR_ERR_NOMEM;
    atomic_init(&e->refcount, 1);
    e->form = XGR_MASK_REFINED;
    e->base = (xgr_mask_entry *)base;
    e->n_ids = n_acc;
    e->n_accepted = base->n_accepted + n_acc;
    e->n_uncertain = n_unc;
    e->ids = block_take(&tail, ((size_t)n_acc + 1) * sizeof *e->ids);
    e->ids_by_len = block_take(&tail, ((size_t)n_acc + 1) * sizeof *e->ids_by_len);
    e->uncertain = block_take(&tail, ((size_t)n_unc + 1) * sizeof *e->uncertain);
    memcpy(e->ids, acc, (size_t)n_acc * sizeof *e->ids);
    memcpy(e->uncertain, unc, (size_t)n_unc * sizeof *e->uncertain);
    e->bytes = sizeof *e + e->block;
    if (nb) {
        e->bits = block_take(&tail, nb * sizeof *e->bits);
        memset(e->bits, 0, nb * sizeof *e->bits);
        for (int32_t i = 0; i < n_acc; i++) e->bits[e->ids[i] >> 5] |= 1u << (e->ids[i] & 31);
    }
    if (sort_by_length_desc(v, e->ids, n_acc, e->ids_by_len)) {
        xgr_mask_entry_free(e);
        return XGR_ERR_NOMEM;
    }
    *out = e;
    return XGR_OK;
}

/* The same from verdicts over base's uncertain list. */
static int make_refined_entry(const struct xgr_vocab *v, const xgr_mask_entry *base,
                              const uint8_t *verdict, xgr_mask_entry **out) {
    int32_t n = base->n_uncertain, n_acc = 0, n_unc = 0;
    int32_t *acc = xgr_malloc(((size_t)n + 1) * sizeof *acc);
    int32_t *unc = xgr_malloc(((size_t)n + 1) * sizeof *unc);
    int rc = acc && unc ? XGR_OK : XGR_ERR_NOMEM;
    for (int32_t i = 0; i < n && !rc; i++) {
        if (verdict[i] == V_ACCEPT) acc[n_acc++] = base->uncertain[i];
        if (verdict[i] == V_UNCERTAIN) unc[n_unc++] = base->uncertain[i];
    }
    if (!rc) rc = refined_from_lists(v, base, acc, n_acc, unc, n_unc, out);
    free(acc);
    free(unc);
    return rc;
}

/* Splits e's uncertain tokens into runs (compiled.h run_begin): a run starts where
 * classify started a group (`groups`: pops->len there, so twice a pop index) or where the
 * pop depths differ from the previous token's; `pops` (sorted position, depth) gives each
 * run's sorted position where its tokens are consecutive there (run_pos). */
static int set_runs(xgr_mask_entry *e, const pop_list *groups, const pop_list *pops) {
    int32_t n = e->n_uncertain, nr = 0;
    int32_t *rb = xgr_malloc(((size_t)n + 1) * sizeof *rb);
    if (!rb) return XGR_ERR_NOMEM;
    size_t g = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t b = e->pop_begin[i], nb = e->pop_begin[i + 1] - b;
        while (g < groups->len && groups->data[g] / 2 < b) g++;
        int start = i == 0 || (g < groups->len && groups->data[g] / 2 == b);
        if (!start) {
            int32_t pb = e->pop_begin[i - 1];
            start = nb != b - pb || memcmp(e->pop_depth + pb, e->pop_depth + b, (size_t)nb * sizeof *e->pop_depth);
        }
        if (start) rb[nr++] = i;
    }
    rb[nr] = n;
    int32_t *shrunk = realloc(rb, ((size_t)nr + 1) * sizeof *rb);
    e->run_begin = shrunk ? shrunk : rb;
    e->n_runs = nr;
    e->bytes += ((size_t)nr + 1) * sizeof *rb;
    e->run_pos = xgr_malloc(((size_t)nr + 1) * sizeof *e->run_pos);
    if (!e->run_pos) return XGR_ERR_NOMEM;
    e->bytes += ((size_t)nr + 1) * sizeof *e->run_pos;
    /* token i's first pop record is pops[2 * pop_begin[i]] (set_uncertain's order) */
    for (int32_t r = 0; r < nr; r++) {
        int32_t i0 = e->run_begin[r], i1 = e->run_begin[r + 1];
        int32_t p0 = pops->data[2 * (size_t)e->pop_begin[i0]];
        int32_t p1 = pops->data[2 * (size_t)e->pop_begin[i1 - 1]];
        e->run_pos[r] = p1 - p0 == i1 - 1 - i0 ? p0 : -1;
    }
    return XGR_OK;
}

/* Groups e's uncertain tokens that have a single plain pop by the bytes after it
 * (compiled.h psfx), deduplicated through a hash table; the other tokens get group -1.
 * `pops`: the (sorted position, depth) list e was built from, so the bytes are read in
 * sorted order. Establishes e->psfx (its memory added to e->bytes, so call it before e is
 * shared); entries with few uncertain tokens, or runs, are left without. */
static int pop_suffixes(const struct xgr_vocab *v, xgr_mask_entry *e, const pop_list *pops) {
    if (e->run_begin || e->n_uncertain < XGR_PSFX_MIN) return XGR_OK;
    int32_t nu = e->n_uncertain;
    xgr_sfx_set set;
    xgr_region_sfx *S = xgr_calloc(1, sizeof *S);
    int rc = xgr_sfx_set_init(&set, nu);
    if (!rc && (!S || !(S->group = xgr_malloc(((size_t)nu + 1) * sizeof *S->group))))
        rc = XGR_ERR_NOMEM;
    for (int32_t i = 0; i < nu && !rc; i++) {
        int32_t k = e->pop_begin[i];
        uint32_t len, d = e->pop_depth[k];
        const uint8_t *tok = xgr_vocab_sorted_token(v, pops->data[2 * (size_t)k], &len);
        S->group[i] = -1;
        if (e->pop_begin[i + 1] - k != 1 || (d & POP_REF_BIT) || d >= len) continue;
        if ((S->group[i] = xgr_sfx_set_add(&set, 0, tok + d, len - d)) < 0) rc = XGR_ERR_NOMEM;
    }
    if (rc) {
        xgr_region_sfx_free(S);
        xgr_sfx_set_free(&set);
        return rc;
    }
    S->n = set.n;
    S->off = set.off; /* taken over from the set */
    S->bytes = set.bytes;
    set.off = NULL;
    set.bytes = NULL;
    S->mem = sizeof *S + ((size_t)nu + 1) * 4 + ((size_t)nu + 2) * 4 + set.bcap;
    xgr_sfx_set_free(&set);
    e->psfx = S;
    e->bytes += S->mem;
    return XGR_OK;
}

/* The context-free entry of `state` by one pass over the whole sorted vocabulary. */
static int classify_all(xgr_compiled *c, xgr_mask_scratch *s, int32_t state,
                        xgr_mask_entry **out) {
    const struct xgr_vocab *v = c->vocab;
    xgr_parser *p = &s->p;
    xgr_follow *fo = &s->fo;
    int32_t rule = c->fsm->state_rule[state];
    int runs = c->rule_opaque[rule] == XGR_OPAQUE_DISPATCH;
    int hybrid = !c->rule_flat[rule] && !c->rule_opaque[rule];
    if (!runs && !c->no_descend && xgr_descend_applies(c->fsm, state) &&
        !(hybrid && xgr_descend_ref_near(c->fsm, state, XGR_DESCEND_REF_NEAR))) {
        pop_list *acc = &s->dacc, *pops = &s->dpops;
        acc->len = pops->len = 0;
        int refchk = c->rule_opaque[rule] == XGR_OPAQUE_DISPATCH ? XGR_REFCHK_WIDE
                     : c->rule_opaque[rule]                      ? XGR_REFCHK_EXACT
                                                                 : 0;
        int rc = xgr_descend(v, c->fsm, state, refchk, hybrid, acc, pops);
        if (!rc) rc = entry_from_lists(v, acc, pops, out);
        if (!rc && (rc = pop_suffixes(v, *out, pops))) {
            xgr_mask_entry_free(*out);
            *out = NULL;
        }
        /* (kept for the next entry unless a wide state made them large) */
        if (acc->cap > SCRATCH_KEEP) XGR_VEC_FREE(*acc);
        if (pops->cap > SCRATCH_KEEP) XGR_VEC_FREE(*pops);
        if (rc != XGR_DESCEND_STOP) return rc;
    }
    token_list tl = {v, NULL, v->n_sorted, NULL};
    pop_list pops = {0}, groups = {0};
    uint64_t *bits = xgr_calloc((size_t)v->set_words + 1, sizeof *bits);
    cl_out o = {NULL, &pops, NULL, bits, runs ? &groups : NULL, NULL};
    int rc = bits ? classify(c, p, fo, state, &tl, &o, 0) : XGR_ERR_NOMEM;
    if (!rc) rc = xgr_mask_entry_from_bits(v, bits, &pops, out);
    if (!rc && (rc = runs ? set_runs(*out, &groups, &pops) : pop_suffixes(v, *out, &pops))) {
        xgr_mask_entry_free(*out);
        *out = NULL;
    }
    free(bits);
    XGR_VEC_FREE(pops);
    XGR_VEC_FREE(groups);
    return rc;
}

/* The context-free entry of plain slot `state`: from the cross-grammar cache when an
 * equal rule closure was seen before, else computed (and offered to the cache): from the
 * shared entry of the loop the state lies on when there is one (region.c), else by a
 * vocabulary pass. */
static int raw_entry(xgr_compiled *c, xgr_mask_scratch *s, int32_t state,
                     xgr_mask_entry **out) {
    xgr_parser *p = &s->p;
    const struct xgr_vocab *v = c->vocab;
    int32_t rule = c->fsm->state_rule[state], local = state - c->fsm->rule_start[rule];
    const xgr_rule_key *key = NULL;
    int rc;
    if (c->opts.cross_grammar_cache > 0) {
        if ((rc = rule_key(c, rule, &key))) return rc;
        if (key->unshareable) key = NULL;
    }
    if (key && (*out = xgr_gcache_lookup(v->fingerprint, key->hash, key->bytes, key->len, local)))
        return XGR_OK;
    xgr_mask_entry *e = NULL;
    if (c->opts.cross_grammar_cache > 0 && !c->rule_opaque[rule] &&
        (rc = xgr_region_raw_entry(c, p, state, &e)))
        return rc;
    if (!e && (rc = classify_all(c, s, state, &e))) return rc;
    if (key) {
        xgr_mask_entry *shared =
            xgr_gcache_insert(v->fingerprint, key->hash, key->bytes, key->len, local, e);
        if (shared) {
            xgr_mask_entry_release(e); /* ours, or the cache's twin if another won */
            e = shared;
        }
    }
    *out = e;
    return XGR_OK;
}

/* ---- caller-context entries shared across grammars -----------------------------------
 * A pair slot's verdicts depend on the caller rule's closure (which contains the child)
 * and, for tokens that finish the caller too, on what may follow it in this grammar. The
 * shared part classifies the child state's *raw* uncertain tokens (grammar-independent)
 * with the caller on the stack and keeps the pop depths of those that leave the caller;
 * each grammar then applies its own follow automaton, as `sharpen` does for plain
 * entries. Key: the caller rule's closure key + (caller state, ref edge, child state)
 * positions within it. */

/* Accepted ids (`ids`) and uncertain ids with pop depths, over `tl`; the rest of tl is
 * rejected. */
static int make_pair_entry(const token_list *tl, const pop_list *pops, const pop_list *acc,
                           xgr_mask_entry **out) {
    int32_t n_unc = pop_tokens(pops);
    char *tail = NULL;
    xgr_mask_entry *e =
        entry_block((acc->len + 1) * sizeof *e->ids + uncertain_bytes(pops, n_unc), &tail);
    if (!e) return XGR_ERR_NOMEM;
    atomic_init(&e->refcount, 1);
    e->form = XGR_MASK_ACCEPTED_LIST;
    e->n_ids = e->n_accepted = (int32_t)acc->len;
    e->ids = block_take(&tail, (acc->len + 1) * sizeof *e->ids);
    set_uncertain(e, pops, n_unc, tl->ids, &tail);
    for (size_t k = 0; k < acc->len; k++) e->ids[k] = tl->ids[acc->data[k]];
    e->bytes = sizeof *e + e->block;
    *out = e;
    return XGR_OK;
}

static int shared_pair_entry(xgr_compiled *c, xgr_parser *p, xgr_follow *fo, int32_t slot,
                             const xgr_rule_key *key, const xgr_mask_entry *raw,
                             xgr_mask_entry **out) {
    const xgr_fsm *f = c->fsm;
    const struct xgr_vocab *v = c->vocab;
    int32_t child, caller;
    xgr_pair_slot(c, slot, &child, &caller);
    int32_t crule = f->state_rule[child], edge = -1;
    for (int32_t e = c->ref_begin[caller]; e < f->edge_begin[caller + 1]; e++)
        if (f->edges[e].ref == crule) edge = e - f->edge_begin[caller];
    int32_t pos[3] = {caller - f->rule_start[f->state_rule[caller]], edge,
                      child - f->rule_start[crule]};
    uint8_t *k = xgr_malloc(key->len + sizeof pos + 4);
    if (!k) return XGR_ERR_NOMEM;
    memcpy(k, key->bytes, key->len);
    memcpy(k + key->len, "PAIR", 4);
    memcpy(k + key->len + 4, pos, sizeof pos);
    size_t klen = key->len + 4 + sizeof pos;
    uint64_t h = xgr_hash_combine(xgr_hash_combine(key->hash, 0x50414952u),
                                  xgr_hash_combine(((uint64_t)(uint32_t)pos[0] << 32) | (uint32_t)pos[1],
                                                   (uint64_t)(uint32_t)pos[2]));
    int rc = XGR_OK;
    xgr_mask_entry *e = xgr_gcache_lookup(v->fingerprint, h, k, klen, -1);
    if (!e) {
        token_list tl = {v, raw->uncertain, raw->n_uncertain, NULL};
        uint8_t *verdict = xgr_malloc((size_t)tl.n + 1);
        pop_list pops = {0}, acc = {0};
        cl_out o = {verdict, &pops, &acc, NULL, NULL, NULL};
        rc = verdict ? classify(c, p, fo, slot, &tl, &o, 0) : XGR_ERR_NOMEM;
        if (!rc) rc = make_pair_entry(&tl, &pops, &acc, &e);
        free(verdict);
        XGR_VEC_FREE(pops);
        XGR_VEC_FREE(acc);
        if (!rc) {
            xgr_mask_entry *shared = xgr_gcache_insert(v->fingerprint, h, k, klen, -1, e);
            if (shared) {
                xgr_mask_entry_release(e);
                e = shared;
            }
        }
    }
    free(k);
    *out = e;
    return rc;
}

/* This grammar's REFINED entry over `base` (the child's sharpened plain entry) from a
 * shared pair entry: its accepted tokens, and its uncertain ones whose bytes after a pop
 * could follow the caller rule here; every other token of base's uncertain list is
 * rejected (a token the pair accepts is always among them: the follow automaton admits
 * every real continuation). */
static int make_refined_entry(const struct xgr_vocab *v, const xgr_mask_entry *base,
                              const uint8_t *verdict, xgr_mask_entry **out);

static int refine_from_pair(xgr_compiled *c, xgr_follow *fo, int32_t caller_rule,
                            const xgr_mask_entry *base, const xgr_mask_entry *pair,
                            xgr_mask_entry **out) {
    const struct xgr_vocab *v = c->vocab;
    size_t rw = (size_t)v->row_words;
    uint32_t *acc_bits = xgr_calloc(2 * rw + 1, sizeof *acc_bits), *unc_bits = acc_bits + rw;
    uint8_t *verdict = xgr_malloc((size_t)base->n_uncertain + 1);
    int rc = XGR_OK;
    if (!acc_bits || !verdict) {
        rc = XGR_ERR_NOMEM;
        goto out;
    }
    for (int32_t i = 0; i < pair->n_ids; i++) acc_bits[pair->ids[i] >> 5] |= 1u << (pair->ids[i] & 31);
    for (int32_t i = 0; i < pair->n_uncertain; i++) {
        uint32_t len;
        const uint8_t *tok = xgr_vocab_token(v, pair->uncertain[i], &len);
        for (int32_t k = pair->pop_begin[i]; k < pair->pop_begin[i + 1]; k++) {
            uint32_t d = pair->pop_depth[k];
            if ((d & POP_REF_BIT) || follow_memo(c, fo, caller_rule, tok + d, len - d)) {
                unc_bits[pair->uncertain[i] >> 5] |= 1u << (pair->uncertain[i] & 31);
                break;
            }
        }
    }
    for (int32_t i = 0; i < base->n_uncertain; i++) {
        int32_t id = base->uncertain[i];
        verdict[i] = (acc_bits[id >> 5] >> (id & 31)) & 1   ? V_ACCEPT
                     : (unc_bits[id >> 5] >> (id & 31)) & 1 ? V_UNCERTAIN
                                                            : V_REJECT;
    }
    rc = make_refined_entry(v, base, verdict, out);
out:
    free(acc_bits);
    free(verdict);
    return rc;
}

/* Loop entries: the unit-ordered list of a loop entry's accepted tokens that run more
 * than one repetition (units by sorted position), for the matcher's counter check. */
static int set_units(xgr_mask_entry *e, const struct xgr_vocab *v, const uint64_t *acc_bits,
                     const uint16_t *units) {
    /* a counting sort, most units first; a token runs at most one repetition per byte */
    int32_t maxl = v->max_token_len, maxu = 1, n = 0;
    int32_t *pos = xgr_calloc((size_t)maxl + 2, sizeof *pos); /* count, then next slot */
    if (!pos) return XGR_ERR_NOMEM;
    for (size_t w = 0; w < (size_t)v->set_words; w++)
        for (uint64_t m = acc_bits[w]; m; m &= m - 1) {
            int32_t u = units[w * 64 + (size_t)xgr_ctz64(m)];
            if (u > 1) pos[u]++, n++;
            if (u > maxu) maxu = u;
        }
    e->max_units = maxu;
    e->unit_ids = xgr_malloc(((size_t)n + 1) * sizeof *e->unit_ids);
    e->unit_end = xgr_calloc((size_t)maxu + 2, sizeof *e->unit_end);
    if (!e->unit_ids || !e->unit_end) {
        free(pos);
        return XGR_ERR_NOMEM;
    }
    for (int32_t u = maxu, acc = 0; u >= 0; u--) { /* units u start after every larger one */
        int32_t k = pos[u];
        e->unit_end[u] = pos[u] = acc;
        acc += k;
    }
    for (size_t w = 0; w < (size_t)v->set_words; w++)
        for (uint64_t m = acc_bits[w]; m; m &= m - 1) {
            size_t i = w * 64 + (size_t)xgr_ctz64(m);
            if (units[i] > 1) e->unit_ids[pos[units[i]]++] = v->sorted[i];
        }
    free(pos);
    e->bytes += ((size_t)n + 1) * 4 + ((size_t)maxu + 2) * 4;
    return XGR_OK;
}

/* The context-free entry of child state `state` under unit repetition `rep` (loop_child),
 * its counter aside: one walk of the child's loop table over the whole vocabulary, the
 * final states recorded as pops (the repetition may end there). Shared across grammars
 * by the child's closure key, so every bound of `char{0,n}` uses one entry. */
static int loop_raw_entry(xgr_compiled *c, xgr_parser *p, xgr_follow *fo, int32_t slot,
                          int32_t state, xgr_mask_entry **out) {
    const struct xgr_vocab *v = c->vocab;
    int32_t r = c->fsm->state_rule[state], local = state - c->fsm->rule_start[r];
    const xgr_rule_key *key = NULL;
    uint8_t *k = NULL;
    size_t klen = 0;
    uint64_t h = 0;
    int rc;
    if (c->opts.cross_grammar_cache > 0) {
        if ((rc = rule_key(c, r, &key))) return rc;
        if (!key->unshareable) {
            if (!(k = xgr_malloc(key->len + 4))) return XGR_ERR_NOMEM;
            memcpy(k, key->bytes, key->len);
            memcpy(k + key->len, "LOOP", 4);
            klen = key->len + 4;
            h = xgr_hash_combine(key->hash, 0x4c4f4f50u);
            if ((*out = xgr_gcache_lookup(v->fingerprint, h, k, klen, local))) {
                free(k);
                return XGR_OK;
            }
        }
    }
    token_list tl = {v, NULL, v->n_sorted, NULL};
    pop_list pops = {0};
    uint64_t *bits = xgr_calloc((size_t)v->set_words + 1, sizeof *bits);
    uint16_t *units = xgr_malloc(((size_t)v->n_sorted + 1) * sizeof *units);
    cl_out o = {NULL, &pops, NULL, bits, NULL, units};
    xgr_mask_entry *e = NULL;
    rc = bits && units ? classify(c, p, fo, slot, &tl, &o, 0) : XGR_ERR_NOMEM;
    if (!rc) rc = xgr_mask_entry_from_bits(v, bits, &pops, &e);
    if (!rc && (rc = set_units(e, v, bits, units))) {
        xgr_mask_entry_free(e);
        e = NULL;
    }
    free(bits);
    free(units);
    XGR_VEC_FREE(pops);
    if (!rc && k) {
        xgr_mask_entry *shared = xgr_gcache_insert(v->fingerprint, h, k, klen, local, e);
        if (shared) {
            xgr_mask_entry_release(e);
            e = shared;
        }
    }
    free(k);
    *out = e;
    return rc;
}

static int build_entry(xgr_compiled *c, xgr_mask_scratch *s, int32_t slot,
                       xgr_mask_entry **out) {
    const struct xgr_vocab *v = c->vocab;
    int32_t ns = c->fsm->n_states;
    xgr_parser *p = &s->p;
    xgr_follow *fo = &s->fo;
    int rc;
    if (slot < ns) {
        xgr_mask_entry *raw = NULL;
        rc = raw_entry(c, s, slot, &raw);
        if (!rc) rc = sharpen(c, p, fo, slot, -1, raw, out);
        xgr_mask_entry_release(raw);
        return rc;
    }
    /* Parent context: plain verdicts hold in every context; only the plain entry's
     * uncertain tokens are re-decided with the caller on the stack. */
    const xgr_mask_entry *base = NULL;
    int32_t child, caller;
    xgr_pair_slot(c, slot, &child, &caller);
    int32_t rep = c->fsm->state_rule[caller];
    if (loop_child(c, rep) == c->fsm->state_rule[child]) {
        xgr_mask_entry *raw = NULL;
        rc = loop_raw_entry(c, p, fo, slot, child, &raw);
        if (!rc) rc = sharpen(c, p, fo, child, rep, raw, out);
        xgr_mask_entry_release(raw);
        return rc;
    }
    if ((rc = xgr_mask_entry_get(c, s, child, &base))) return rc;
    int32_t caller_rule = c->fsm->state_rule[caller];
    if (c->opts.cross_grammar_cache > 0 && !c->rule_opaque[caller_rule] && base->owns_base) {
        const xgr_rule_key *key = NULL;
        if ((rc = rule_key(c, caller_rule, &key))) return rc;
        if (!key->unshareable) {
            xgr_mask_entry *pair = NULL;
            rc = shared_pair_entry(c, p, fo, slot, key, base->base, &pair);
            if (!rc) rc = refine_from_pair(c, fo, caller_rule, base, pair, out);
            xgr_mask_entry_release(pair);
            return rc;
        }
    }
    token_list tl = {v, base->uncertain, base->n_uncertain, NULL};
    uint8_t *verdict = xgr_malloc((size_t)tl.n + 1);
    if (!verdict) rc = XGR_ERR_NOMEM;
    cl_out o = {verdict, NULL, NULL, NULL, NULL, NULL};
    if (!rc) rc = classify(c, p, fo, slot, &tl, &o, 0);
    if (!rc) rc = make_refined_entry(v, base, verdict, out);
    free(verdict);
    return rc;
}

int xgr_mask_scratch_init(xgr_mask_scratch *s, const xgr_compiled *c) {
    s->dacc = (xgr_pop_list){0};
    s->dpops = (xgr_pop_list){0};
    xgr_follow_init(&s->fo, c->fsm);
    int rc = xgr_parser_init(&s->p, c->fsm, c->opts.max_row_items);
    if (rc) return rc;
    s->p.ref_begin = c->ref_begin;
    s->p.leo_rules = c->rule_leo;
    s->p.max_work = c->opts.max_step_work;
    return XGR_OK;
}

void xgr_mask_scratch_free(xgr_mask_scratch *s) {
    XGR_VEC_FREE(s->dacc);
    XGR_VEC_FREE(s->dpops);
    xgr_parser_free(&s->p);
    xgr_follow_free(&s->fo);
}

/* Establishes e->uoff / e->ubytes (compiled.h) for an entry about to be published. */
static int copy_uncertain_bytes(const struct xgr_vocab *v, xgr_mask_entry *e) {
    int32_t n = e->n_uncertain;
    if (n == 0 || n > XGR_UBYTES_MAX) return XGR_OK;
    size_t total = 0;
    for (int32_t i = 0; i < n; i++)
        total += v->offsets[e->uncertain[i] + 1] - v->offsets[e->uncertain[i]];
    e->uoff = xgr_malloc(((size_t)n + 1) * sizeof *e->uoff + total + 1);
    if (!e->uoff) return XGR_ERR_NOMEM;
    e->ubytes = (uint8_t *)(e->uoff + n + 1);
    uint32_t pos = 0;
    for (int32_t i = 0; i < n; i++) {
        uint32_t len;
        const uint8_t *t = xgr_vocab_token(v, e->uncertain[i], &len);
        e->uoff[i] = pos;
        memcpy(e->ubytes + pos, t, len);
        pos += len;
    }
    e->uoff[n] = pos;
    e->bytes += ((size_t)n + 1) * sizeof *e->uoff + total + 1;
    return XGR_OK;
}

int xgr_mask_entry_get(xgr_compiled *c, xgr_mask_scratch *scratch, int32_t slot_id,
                       const xgr_mask_entry **out) {
    xgr_mask_entry *e = xgr_slot_load(c, slot_id);
    if (e) {
        *out = e;
        return XGR_OK;
    }
    int rc = build_entry(c, scratch, slot_id, &e);
    if (!rc) rc = copy_uncertain_bytes(c->vocab, e);
    if (rc) {
        xgr_mask_entry_free(e);
        return rc;
    }
    _Atomic(_Atomic(xgr_mask_entry *) *) *cp = &c->entry_chunks[slot_id / XGR_SLOT_CHUNK];
    _Atomic(xgr_mask_entry *) *chunk = atomic_load_explicit(cp, memory_order_acquire);
    if (!chunk) {
        _Atomic(xgr_mask_entry *) *fresh = xgr_malloc(XGR_SLOT_CHUNK * sizeof *fresh);
        if (!fresh) {
            xgr_mask_entry_free(e);
            return XGR_ERR_NOMEM;
        }
        for (int i = 0; i < XGR_SLOT_CHUNK; i++) atomic_init(&fresh[i], NULL);
        if (atomic_compare_exchange_strong_explicit(cp, &chunk, fresh, memory_order_acq_rel,
                                                    memory_order_acquire)) {
            chunk = fresh;
            atomic_fetch_add(&c->memory, XGR_SLOT_CHUNK * sizeof *fresh);
        } else {
            free((void *)fresh); /* another thread published one: `chunk` is it */
        }
    }
    _Atomic(xgr_mask_entry *) *slot = &chunk[slot_id % XGR_SLOT_CHUNK];
    xgr_mask_entry *expected = NULL;
    if (atomic_compare_exchange_strong_explicit(slot, &expected, e,
                                                memory_order_acq_rel, memory_order_acquire)) {
        atomic_fetch_add(&c->memory, e->in_arena ? e->bytes - sizeof *e - e->block : e->bytes);
        *out = e;
    } else {
        xgr_mask_entry_free(e);
        *out = expected;
    }
    return XGR_OK;
}
