/* Sharpening: this grammar's view of a context-free entry (follow checks, reference-start
 * checks, the exact pass over the few tokens a TagDispatch state keeps). */
#include "sharpen.h"

#include "descend.h"
#include "entry.h"
#include "follow_memo.h"
#include "global_cache.h"
#include "walk.h"

enum { V_ACCEPT = XGR_V_ACCEPT, V_REJECT = XGR_V_REJECT, V_UNCERTAIN = XGR_V_UNCERTAIN };

/* Raw entries leaving more tokens open than this skip sharpening (see sharpen). */
#define XGR_SHARPEN_MAX 4096
#define POP_REF_BIT XGR_POP_REF_BIT

/* walk.h's types under their short names */
typedef xgr_walk_token_list token_list;
typedef xgr_walk_first_cache first_cache;
typedef xgr_walk_out cl_out;
typedef xgr_pop_list pop_list;

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
    return xgr_walk_first_cache_admits(&rk->fc, f, s, tok[d]);
}

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
    int rc = rk.dstate ? xgr_walk_first_cache_init(&rk.fc, f) : XGR_ERR_NOMEM;
    if (!rc) rc = xgr_walk_flat_table(c, rule, 0, &rk.ft);
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
                                       : xgr_follow_memo(c, fo, rule, tok + d, len - d);
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
    xgr_walk_first_cache_free(&rk.fc);
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
            rc = xgr_walk_classify(c, p, fo, state, &tl, &o, 1);
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
    if (!rc) rc = xgr_entry_refined_from_lists(v, raw, acc, n_acc, unc, n_unc, &e);
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

/* open[] (row_words, by id, written whole) = the tokens that hold, after their first
 * byte, a byte of `ex` (a 256-bit set). Only tokens holding such a byte at all (the
 * vocabulary's folded byte sets, 64 sorted tokens a word) have their bytes read. */
static void unit_open_bits(const struct xgr_vocab *v, const uint32_t ex[8], uint32_t *open) {
    memset(open, 0, (size_t)v->row_words * sizeof *open);
    uint8_t fold[128] = {0};
    int rows[128], nrows = 0;
    for (int b = 0; b < 256; b++)
        if ((ex[b >> 5] >> (b & 31)) & 1) {
            if (b < 0x80) fold[b] = 1;
            else fold[0] = fold[XGR_FOLD_CHAR] = 1;
        }
    for (int b = 0; b < 128; b++)
        if (fold[b]) rows[nrows++] = b;
    size_t W = (size_t)v->set_words;
    for (size_t w = 0; w < W && nrows; w++) {
        uint64_t cand = 0;
        for (int k = 0; k < nrows; k++) cand |= v->byte_sets[(size_t)rows[k] * W + w];
        for (; cand; cand &= cand - 1) {
            int32_t i = (int32_t)(w * 64 + (size_t)xgr_ctz64(cand));
            uint32_t len;
            const uint8_t *tok = xgr_vocab_sorted_token(v, i, &len);
            int o = 0;
            for (uint32_t j = 1; j < len && !o; j++) o = (ex[tok[j] >> 5] >> (tok[j] & 31)) & 1;
            if (o) open[v->sorted[i] >> 5] |= 1u << (v->sorted[i] & 31);
        }
    }
}

/* This grammar's view of a context-free entry: its uncertain tokens whose bytes after a
 * pop could follow the rule somewhere in this grammar (stack-free over-approximation); the
 * rest are rejected. A TagDispatch state's entry (which always records its runs) is
 * settled by sharpen_dispatch; a tag group's classification already kept only viable
 * reference starts. */
/* `rep` >= 0: raw is a loop entry of state under unit repetition `rep` (loop_raw_entry),
 * whose pops leave `rep`: follow `rep`, and keep the first bytes of its follow. */
int xgr_sharpen(xgr_compiled *c, xgr_parser *p, xgr_follow *fo, int32_t state,
                int32_t rep, xgr_mask_entry *raw, xgr_mask_entry **out) {
    if (rep < 0 && raw->run_begin && raw->n_uncertain &&
        c->rule_opaque[c->fsm->state_rule[state]] == XGR_OPAQUE_DISPATCH)
        return sharpen_dispatch(c, p, fo, state, raw, out);
    const struct xgr_vocab *v = c->vocab;
    const xgr_fsm *f = c->fsm;
    int32_t rule = rep >= 0 ? rep : f->state_rule[state];
    size_t nu = (size_t)raw->n_uncertain + 1, nx = rep >= 0 ? 8 : 0;
    /* (the counter trim runs only under a bounded repetition) */
    size_t no = rep >= 0 && raw->unit_ids && f->repeat_max[rep] >= 0 ? (size_t)v->row_words : 0;
    char *tail = NULL;
    xgr_mask_entry *e = xgr_entry_grammar_block(c, (nu + nx + no) * 4, &tail);
    const xgr_region_sfx *S = raw->psfx;
    int8_t gkeep_local[256]; /* per suffix group, -1: not yet */
    int8_t *gkeep = !S || S->n <= 256 ? gkeep_local : xgr_malloc((size_t)S->n);
    if (!e || !gkeep) {
        xgr_mask_entry_free(e);
        return XGR_ERR_NOMEM;
    }
    int32_t *unc = xgr_entry_block_take(&tail, nu * sizeof *unc);
    if (S) memset(gkeep, -1, (size_t)S->n);
    if (rep >= 0) {
        e->exit_first = xgr_entry_block_take(&tail, nx * sizeof *e->exit_first);
        memset(e->exit_first, 0, nx * sizeof *e->exit_first);
        int rc = fo->t ? XGR_OK : xgr_follow_memo_tables(c, fo);
        for (int b = 0; b < 256 && !rc; b++)
            if (xgr_follow_first_admits(fo, rule, (uint8_t)b)) /* 1, or unknown */
                e->exit_first[b >> 5] |= 1u << (b & 31);
        if (rc) {
            xgr_mask_entry_free(e);
            if (gkeep != gkeep_local) free(gkeep);
            return rc;
        }
        if (no) {
            e->unit_open = xgr_entry_block_take(&tail, no * sizeof *e->unit_open);
            unit_open_bits(v, e->exit_first, e->unit_open);
        }
    }
    const uint32_t *ex = rep >= 0 ? e->exit_first : NULL; /* xgr_follow_first_admits of rep */
    /* A loop entry's pops lie where a repetition ends (a final state of the reference-free
     * child, whose row is its start's: xgr_walk_loop_child), ascending per token. When no
     * byte that may begin rep's follow can begin a repetition, a token whose next byte
     * passes the test below dies there: only its last pop can pass, and each earlier pop
     * has a next byte that began another repetition, which the test would reject. */
    int last_only = 0;
    if (ex) {
        uint32_t starts[8] = {0};
        xgr_fsm_byte_set(f, f->rule_start[f->state_rule[state]], starts);
        last_only = 1;
        for (int w = 0; w < 8; w++) last_only &= (starts[w] & ex[w]) == 0;
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
                gkeep[g] = (int8_t)xgr_follow_memo(c, fo, rule, S->bytes + S->off[g], S->off[g + 1] - S->off[g]);
            if (gkeep[g]) unc[n++] = raw->uncertain[i];
            continue;
        }
        uint32_t len;
        const uint8_t *tok = xgr_vocab_token(v, raw->uncertain[i], &len);
        int keep = 0;
        int32_t k0 = raw->pop_begin[i], k1 = raw->pop_begin[i + 1];
        if (last_only && k1 > k0) k0 = k1 - 1;
        for (int32_t k = k0; k < k1 && !keep; k++) {
            uint32_t d = raw->pop_depth[k];
            /* (a loop entry's pops lie at most depths of its tokens: those whose next byte
             * cannot begin rep's follow die here, as at xgr_follow_memo's first test) */
            if (ex && !(d & POP_REF_BIT) && d < len && !((ex[tok[d] >> 5] >> (tok[d] & 31)) & 1)) continue;
            keep = (d & POP_REF_BIT) || xgr_follow_memo(c, fo, rule, tok + d, len - d);
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
