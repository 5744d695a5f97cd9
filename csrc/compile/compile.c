/* xgr_compile: lower a grammar to automata and set up its (lazy) mask cache. */
#include "compile.h"
#include "../parse/need.h"

#include "../mask/compiled.h"
#include "../mask/entry.h"
#include "../mask/mask_cache.h"
#include "link.h"
#include "prepare.h"
#include "../common/token_marker.h"

/* Lays out the parent-context slots (see compiled.h), from the per-rule counts of scannable
 * states. Above `budget` pair slots the grammar falls back to plain entries only, which
 * keeps memory bounded. A linked grammar scans its skeleton's states and takes each
 * fragment's ref edges, counted once per fragment, with offsets. */
static int layout_slots(xgr_compiled *c, const xgr_scan_tables *t, const xgr_link_layout *lay,
                        int64_t budget) {
    const xgr_fsm *f = c->fsm;
    int32_t ns = f->n_states, sk_ns = lay ? lay->sk_states : ns;
    int64_t total;
    int64_t n_pe = xgr_scan_pairs(f, sk_ns, t, 0, NULL, NULL, &total);
    for (size_t i = 0; lay && i < lay->n; i++) {
        n_pe += lay->frags[i]->n_pairs;
        total += lay->frags[i]->pair_slots;
    }
    if (total > budget) total = n_pe = 0;
    c->n_slots = ns + (int32_t)total;
    c->pair_edges = xgr_malloc(((size_t)n_pe + 1) * sizeof *c->pair_edges);
    c->pair_first = xgr_malloc(((size_t)n_pe + 1) * sizeof *c->pair_first);
    if (!c->pair_edges || !c->pair_first) return XGR_ERR_NOMEM;
    c->n_pair_edges = (int32_t)n_pe;
    if (!n_pe) return XGR_OK;
    int64_t base;
    int32_t k = xgr_scan_pairs(f, sk_ns, t, 0, c->pair_edges, c->pair_first, &base);
    int32_t eo = lay ? lay->sk_edges : 0;
    for (size_t i = 0; lay && i < lay->n; i++) {
        const xgr_fragment *q = lay->frags[i];
        int32_t *restrict pe = c->pair_edges + k, *restrict pf = c->pair_first + k;
        for (int32_t j = 0; j < q->n_pairs; j++) {
            pe[j] = q->pair_edges[j] + eo;
            pf[j] = q->pair_first[j] + (int32_t)base;
        }
        k += q->n_pairs;
        base += q->pair_slots;
        eo += q->fsm->n_edges;
    }
    return XGR_OK;
}

static void compiled_free(xgr_compiled *c) {
    if (!c) return;
    /* Parent-context entries borrow their plain entry: free them first (slots in reverse;
     * a chunk never built holds none, and most are never built). */
    if (c->entry_chunks && c->fsm)
        for (int32_t k = (c->n_slots - 1) / XGR_SLOT_CHUNK; k >= 0; k--) {
            _Atomic(xgr_mask_entry *) *chunk = atomic_load(&c->entry_chunks[k]);
            if (!chunk) continue;
            for (int32_t j = XGR_SLOT_CHUNK - 1; j >= 0; j--)
                if ((int64_t)k * XGR_SLOT_CHUNK + j < c->n_slots)
                    xgr_mask_entry_free(atomic_load(&chunk[j]));
        }
    if (c->entry_chunks)
        for (int32_t k = 0; k <= (c->n_slots - 1) / XGR_SLOT_CHUNK; k++)
            free((void *)atomic_load(&c->entry_chunks[k]));
    if (c->rule_keys && c->fsm)
        for (int32_t r = 0; r < c->fsm->n_rules; r++) {
            xgr_rule_key *k = atomic_load(&c->rule_keys[r]);
            if (k) free(k->bytes);
            free(k);
        }
    if (c->flat_tables && c->fsm)
        for (int32_t r = 0; r < c->fsm->n_rules; r++) {
            xgr_flat_table *t = atomic_load(&c->flat_tables[r]);
            if (t) free(t->next);
            free(t);
        }
    free((void *)c->flat_tables);
    if (c->rule_loops && c->fsm)
        for (int32_t r = 0; r < c->fsm->n_rules; r++) free(atomic_load(&c->rule_loops[r]));
    free((void *)c->rule_loops);
    free((void *)c->rule_keys);
    free((void *)c->entry_chunks);
    free(c->pair_first);
    free(c->scan_local);
    free(c->pair_edges);
    free(c->rule_flat);
    free(c->rule_opaque);
    free(c->rule_unique);
    free(c->token_ids);
    free(c->fmemo);
    xgr_follow_tables_free(atomic_load(&c->follow));
    xgr_uq_tables_drop(atomic_load(&c->uq));
    xgr_lazy_tables_drop(atomic_load(&c->lazy));
    pthread_mutex_destroy(&c->fmemo_lock);
    /* after every entry: the grammar's own ones lie here */
    for (xgr_arena_chunk *k = c->arena, *next; k; k = next) {
        next = k->next;
        free(k);
    }
    pthread_mutex_destroy(&c->arena_lock);
    free(c->ref_begin);
    free(c->rule_leo);
    free(c->scannable);
    xgr_fsm_free(c->fsm);
    xgr_grammar_release(c->grammar);
    xgr_vocab_release(c->vocab);
    free(c);
}

static int compiled_new(const xgr_grammar *g, const xgr_vocab *v, const xgr_compile_options *opts,
                        xgr_compiled **out);
static int compiled_finish(xgr_compiled *c, const xgr_link_layout *lay, xgr_compiled **out);

int xgr_compile(const xgr_grammar *g, const xgr_vocab *v, const xgr_compile_options *opts,
                xgr_compiled **out) {
    if (!g || !v || !out) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_compile: NULL argument");
    *out = NULL;
    int rc = xgr_ir_validate(g);
    if (rc) return rc;
    xgr_compiled *c;
    if ((rc = compiled_new(g, v, opts, &c))) return rc;
    if ((rc = xgr_fsm_build(g, &c->opts, &c->fsm)) || (rc = xgr_fsm_check_productive(c->fsm)) ||
        (rc = xgr_grammar_token_terms(g, NULL, 0, &c->token_ids, &c->n_token_ids))) {
        compiled_free(c);
        return rc;
    }
    return compiled_finish(c, NULL, out);
}

int xgr_compile_linked(const xgr_grammar *g, const char *const *names,
                       xgr_fragment *const *frags, size_t n, const xgr_vocab *v,
                       const xgr_compile_options *opts, xgr_compiled **out) {
    return xgr_compile_linked_ex(g, names, frags, n, v, opts, 0, out);
}

int xgr_compile_linked_ex(const xgr_grammar *g, const char *const *names,
                          xgr_fragment *const *frags, size_t n, const xgr_vocab *v,
                          const xgr_compile_options *opts, int productive, xgr_compiled **out) {
    if (!g || !v || !out || (n && (!names || !frags)))
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_compile_linked: NULL argument");
    *out = NULL;
    int rc = xgr_ir_validate(g);
    if (rc) return rc;
    xgr_compiled *c;
    if ((rc = compiled_new(g, v, opts, &c))) return rc;
    xgr_link_layout lay;
    if ((rc = xgr_link(g, names, frags, n, &c->opts, productive, &c->fsm, &c->token_ids,
                       &c->n_token_ids, &lay))) {
        compiled_free(c);
        return rc;
    }
    return compiled_finish(c, &lay, out);
}

int xgr_compile_from_fsm(xgr_fsm *f, int32_t *token_ids, int32_t n_token_ids,
                         const xgr_vocab *v, const xgr_compile_options *opts,
                         xgr_compiled **out) {
    *out = NULL;
    xgr_compiled *c;
    int rc = compiled_new(NULL, v, opts, &c);
    if (rc) {
        xgr_fsm_free(f);
        free(token_ids);
        return rc;
    }
    c->fsm = f;
    c->token_ids = token_ids;
    c->n_token_ids = n_token_ids;
    if (f->n_rules > c->opts.max_rules || f->n_states > c->opts.max_fsm_states) {
        rc = xgr_fail(XGR_ERR_LIMIT, "the image has %d rules and %d states, above the limits "
                      "max_rules %d / max_fsm_states %d", (int)f->n_rules, (int)f->n_states,
                      (int)c->opts.max_rules, (int)c->opts.max_fsm_states);
        compiled_free(c);
        return rc;
    }
    return compiled_finish(c, NULL, out);
}

/* A compiled grammar with no automata yet: options, grammar and vocabulary retained. */
static int compiled_new(const xgr_grammar *g, const xgr_vocab *v, const xgr_compile_options *opts,
                        xgr_compiled **out) {
    xgr_compiled *c = xgr_calloc(1, sizeof *c);
    if (!c) return XGR_ERR_NOMEM;
    atomic_init(&c->refcount, 1);
    atomic_init(&c->memory, sizeof *c);
    if (pthread_mutex_init(&c->fmemo_lock, NULL)) {
        free(c);
        return xgr_fail(XGR_ERR_NOMEM, "xgr_compile: cannot create a mutex");
    }
    if (pthread_mutex_init(&c->arena_lock, NULL)) {
        pthread_mutex_destroy(&c->fmemo_lock);
        free(c);
        return xgr_fail(XGR_ERR_NOMEM, "xgr_compile: cannot create a mutex");
    }
    if (opts) c->opts = *opts;
    xgr_compile_fill_defaults(&c->opts);
    xgr_grammar_retain((xgr_grammar *)g);
    c->grammar = (xgr_grammar *)g;
    xgr_vocab_retain((xgr_vocab *)v);
    c->vocab = (xgr_vocab *)v;
    *out = c;
    return XGR_OK;
}

/* The per-state and per-rule tables (scan_tables.h): a linked grammar copies each
 * fragment's, at its offsets, then scans its skeleton (whose references into the
 * fragments see their rules' tables); any other grammar scans every state. */
static void fill_scan_tables(const xgr_fsm *f, const xgr_link_layout *lay, xgr_scan_tables *t) {
    if (!lay) {
        xgr_scan_rules_init(f, 0, f->n_rules, t);
        xgr_scan_states(f, f->n_states, t);
        return;
    }
    int32_t ro = lay->sk_rules, so = lay->sk_states, eo = lay->sk_edges;
    for (size_t i = 0; i < lay->n; i++) {
        const xgr_fragment *fr = lay->frags[i];
        const xgr_scan_tables *q = &fr->scan;
        int32_t qs = fr->fsm->n_states, qr = fr->fsm->n_rules;
        memcpy(t->scannable + so, q->scannable, (size_t)qs);
        memcpy(t->scan_local + so, q->scan_local, (size_t)qs * sizeof(int32_t));
        const int32_t *restrict qb = q->ref_begin;
        int32_t *restrict rb = t->ref_begin + so;
        for (int32_t s = 0; s < qs; s++) rb[s] = qb[s] + eo;
        memcpy(t->n_scan + ro, q->n_scan, (size_t)qr * sizeof(int32_t));
        memcpy(t->flat + ro, q->flat, (size_t)qr);
        memcpy(t->opaque + ro, q->opaque, (size_t)qr);
        ro += qr;
        so += qs;
        eo += fr->fsm->n_edges;
    }
    xgr_scan_rules_init(f, 0, lay->sk_rules, t);
    xgr_scan_states(f, lay->sk_states, t);
}

/* unique[r] = 1 for the rules no other grammar has (compiled.h rule_unique): tag groups,
 * and skeleton rules of a linked grammar with references into two fragments or more. */
static void mark_unique(const xgr_fsm *f, const xgr_link_layout *lay, const uint8_t *opaque,
                        uint8_t *unique) {
    for (int32_t r = 0; r < f->n_rules; r++) unique[r] = opaque[r] == XGR_OPAQUE_GROUP;
    if (!lay || lay->n < 2) return;
    for (int32_t r = 0; r < lay->sk_rules; r++) {
        int32_t first = -1;
        for (int32_t e = f->edge_begin[f->rule_start[r]];
             e < f->edge_begin[xgr_fsm_rule_end(f, r)] && !unique[r]; e++) {
            int32_t ref = f->edges[e].ref;
            if (ref < lay->sk_rules) continue; /* a byte edge, or a skeleton rule */
            if (first < 0) first = ref;
            /* fragments' rules lie in order after the skeleton's: another root is
             * another fragment (a fragment is entered only at its root) */
            else if (ref != first) unique[r] = 1;
        }
    }
}

/* unique[r] = 1 also for the rules with a budget, a forced close or laziness: an entry
 * whose rule closure holds one bakes that rule's budget or end into its verdicts (the
 * classified rule's own occurrence enters its budget, parse/earley.c xgr_parser_start; so
 * does a rule a token enters), so closure keys stop at them and those entries stay in this
 * grammar. Every other entry depends on its closure alone, as in a grammar without
 * attributes, and is shared across grammars (a string's loop in a schema that has one
 * budgeted string elsewhere: docs/rule-attributes.md, "Masks"). */
static void mark_attributed(const xgr_fsm *f, uint8_t *unique) {
    if (!f->rule_attrs) return;
    for (int32_t r = 0; r < f->n_rules; r++) {
        const xgr_rule_attrs *a = &f->rule_attrs[r];
        if (a->max_chars >= 0 || a->max_tokens >= 0 || a->max_json_chars >= 0 || a->lazy ||
            a->forced_body >= 0)
            unique[r] = 1;
    }
}

/* Everything after the automata (c->fsm, c->token_ids set): scan flags, slot layout,
 * per-rule tables, memory accounting. `lay` says where a linked grammar's parts lie
 * (NULL: not linked). Frees c on failure. */
static int compiled_finish(xgr_compiled *c, const xgr_link_layout *lay, xgr_compiled **out) {
    int rc;
    /* A Token(k) terminal names a token of this vocabulary (as upstream, an error). */
    for (int32_t i = 0; i < c->n_token_ids; i++)
        if (c->token_ids[i] < 0 ||
            (c->token_ids[i] >= c->vocab->vocab_size && c->token_ids[i] != XGR_TOKEN_CLASS_OPEN)) {
            rc = xgr_fail(XGR_ERR_INVALID_ARG,
                          "Token id %d in the grammar is out of the vocabulary range [0, %d)",
                          (int)c->token_ids[i], (int)c->vocab->vocab_size);
            compiled_free(c);
            return rc;
        }
    const xgr_fsm *f = c->fsm;
    int32_t ns = f->n_states, nr = f->n_rules;
    int32_t *n_scan = xgr_malloc(((size_t)nr + 1) * sizeof *n_scan);
    c->scannable = xgr_malloc((size_t)ns + 1);
    c->ref_begin = xgr_malloc(((size_t)ns + 1) * sizeof *c->ref_begin);
    c->scan_local = xgr_malloc(((size_t)ns + 1) * sizeof *c->scan_local);
    c->rule_flat = xgr_malloc((size_t)nr + 1);
    c->rule_opaque = xgr_malloc((size_t)nr + 1);
    c->rule_unique = xgr_malloc((size_t)nr + 1);
    c->rule_leo = xgr_malloc((size_t)nr + 1);
    c->rule_keys = xgr_calloc((size_t)nr + 1, sizeof *c->rule_keys);
    c->flat_tables = xgr_calloc((size_t)nr + 1, sizeof *c->flat_tables);
    c->rule_loops = xgr_calloc((size_t)nr + 1, sizeof *c->rule_loops);
    if (!n_scan || !c->scannable || !c->ref_begin || !c->scan_local || !c->rule_flat ||
        !c->rule_opaque || !c->rule_unique || !c->rule_leo || !c->rule_keys || !c->flat_tables ||
        !c->rule_loops) {
        rc = XGR_ERR_NOMEM;
        goto fail;
    }
    for (int32_t r = 0; r < nr; r++) {
        atomic_init(&c->rule_keys[r], NULL);
        atomic_init(&c->flat_tables[r], NULL);
        atomic_init(&c->rule_loops[r], NULL);
    }
    xgr_scan_tables t = {c->scannable, c->ref_begin, c->scan_local,
                         n_scan,       c->rule_flat, c->rule_opaque};
    fill_scan_tables(f, lay, &t);
    mark_unique(f, lay, c->rule_opaque, c->rule_unique);
    if ((rc = xgr_leo_rules(f, c->rule_leo))) goto fail;
    if (f->attr_captures) memset(c->rule_leo, 0, (size_t)nr + 1); /* every level records */
    if (f->attr_budgets || f->attr_lazy) {
        /* Budgets and laziness hold per occurrence: a Leo item would elide the completed
         * items whose deadlines or closure decide (parse/attrs.h). */
        memset(c->rule_leo, 0, (size_t)nr + 1);
        mark_attributed(f, c->rule_unique);
        /* what each state still needs within a character budget (parse/need.h) */
        if ((rc = xgr_need_build(c->fsm))) goto fail;
    }
    if ((rc = layout_slots(c, &t, lay, (int64_t)1 << 22))) goto fail;
    free(n_scan);
    n_scan = NULL;
    size_t n_chunks = (size_t)c->n_slots / XGR_SLOT_CHUNK + 1;
    c->entry_chunks = xgr_calloc(n_chunks, sizeof *c->entry_chunks);
    if (!c->entry_chunks) {
        rc = XGR_ERR_NOMEM;
        goto fail;
    }
    for (size_t k = 0; k < n_chunks; k++) atomic_init(&c->entry_chunks[k], NULL);
    if (c->opts.drop_grammar) { /* xgr_grammar_token_terms was its last reader */
        xgr_grammar_release(c->grammar);
        c->grammar = NULL;
    }
    /* Everything this grammar holds, so a cache budget over xgr_compiled_memory is a
     * budget over real bytes: the IR (kept for printing unless dropped), the automata,
     * and per state (scannable, ref_begin, scan_local), per rule (flat, opaque, unique,
     * leo, three lazily built pointers), per edge with pair slots (edge, first slot), and
     * per slot chunk (the chunks themselves count when built). */
    size_t nr1 = (size_t)nr + 1;
    atomic_fetch_add(&c->memory, xgr_ir_memory(c->grammar) + xgr_fsm_memory(c->fsm) +
                                     ((size_t)ns + 1) * 9 + nr1 * (4 + 3 * sizeof(void *)) +
                                     ((size_t)c->n_pair_edges + 1) * 8 +
                                     n_chunks * sizeof *c->entry_chunks +
                                     (size_t)c->n_token_ids * sizeof *c->token_ids);
    if (c->opts.precompute && (rc = xgr_compiled_precompute(c, -1))) goto fail;
    *out = c;
    return XGR_OK;
fail:
    free(n_scan);
    compiled_free(c);
    return rc;
}

typedef struct {
    int64_t cost;
    int32_t state;
} state_cost;

static int by_cost_desc(const void *a, const void *b) {
    const state_cost *x = a, *y = b;
    if (x->cost != y->cost) return x->cost > y->cost ? -1 : 1;
    return x->state < y->state ? -1 : (x->state > y->state);
}

/* Estimated price of a state's mask entry: how many tokens start with a byte it can scan
 * (those are the ones the vocabulary pass cannot skip); pure-DFA rules run ~10x faster. */
static int64_t entry_cost(const xgr_compiled *c, xgr_parser *p, int32_t s) {
    xgr_item it = {s, XGR_ORIGIN_OUTER, 0, 0};
    if (xgr_parser_start(p, it)) return 0;
    uint32_t bits[8];
    xgr_parser_next_bytes(p, bits);
    int64_t cost = 1;
    for (int b = 0; b < 256; b++)
        if ((bits[b >> 5] >> (b & 31)) & 1) cost += c->vocab->first_byte_count[b];
    int32_t r = c->fsm->state_rule[s];
    return c->rule_flat[r] || c->rule_opaque[r] ? cost / 10 + 1 : cost;
}

int xgr_compiled_precompute(xgr_compiled *c, int32_t k) {
    if (!c) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_compiled_precompute: NULL");
    xgr_mask_scratch sc;
    int rc = xgr_mask_scratch_init(&sc, c); /* frees what it got on failure */
    if (rc) return rc;
    int32_t ns = c->fsm->n_states, n = 0;
    state_cost *order = xgr_malloc(((size_t)ns + 1) * sizeof *order);
    if (!order) {
        xgr_mask_scratch_free(&sc);
        return XGR_ERR_NOMEM;
    }
    for (int32_t s = 0; s < ns; s++)
        if (c->scannable[s] && !xgr_slot_load(c, s)) {
            order[n].state = s;
            order[n].cost = k < 0 ? 0 : entry_cost(c, &sc.p, s);
            n++;
        }
    /* The K most expensive first (XGrammar-2 paper, §3.5), so a budget spent during prefill takes
     * the largest bites out of the per-token JIT cost. */
    if (k >= 0) qsort(order, (size_t)n, sizeof *order, by_cost_desc);
    int32_t done = 0;
    for (int32_t i = 0; i < n && (k < 0 || done < k) && !rc; i++, done++) {
        const xgr_mask_entry *e;
        rc = xgr_mask_entry_get(c, &sc, order[i].state, &e);
    }
    /* Full precompute: also the caller-context entries of states that want them. */
    for (int32_t slot = ns; k < 0 && !rc && slot < c->n_slots; slot++) {
        int32_t child, caller;
        xgr_pair_slot(c, slot, &child, &caller);
        const xgr_mask_entry *plain = xgr_slot_load(c, child), *e;
        if (plain && plain->wants_context && !xgr_slot_load(c, slot))
            rc = xgr_mask_entry_get(c, &sc, slot, &e);
    }
    free(order);
    xgr_mask_scratch_free(&sc);
    return rc;
}

size_t xgr_compiled_memory(const xgr_compiled *c) {
    return c ? atomic_load(&((xgr_compiled *)c)->memory) : 0;
}
const xgr_grammar *xgr_compiled_grammar(const xgr_compiled *c) { return c ? c->grammar : NULL; }
const xgr_vocab *xgr_compiled_vocab(const xgr_compiled *c) { return c ? c->vocab : NULL; }
void xgr_compiled_retain(xgr_compiled *c) {
    if (c) atomic_fetch_add(&c->refcount, 1);
}
void xgr_compiled_release(xgr_compiled *c) {
    if (c && atomic_fetch_sub(&c->refcount, 1) == 1) compiled_free(c);
}
