/* Adaptive token-mask cache: per scannable state, split the vocabulary into accepted,
 * rejected and uncertain tokens by simulating the state's rule alone over the sorted
 * vocabulary, reusing parser rows across shared prefixes and skipping subtrees.
 * This file: the entry of a slot (a plain state's raw entry, by descent, vocabulary pass,
 * loop region or cross-grammar cache, then sharpened; a pair slot's from its caller's
 * context) and its publication. */
#include "mask_cache.h"

#include "closure.h"
#include "context.h"
#include "descend.h"
#include "entry.h"
#include "global_cache.h"
#include "region.h"
#include "sharpen.h"
#include "walk.h"

/* Scratch lists (xgr_mask_scratch) with more room than this many items are freed after use. */
#define SCRATCH_KEEP 16384

/* walk.h's types under their short names */
typedef xgr_walk_token_list token_list;
typedef xgr_walk_out cl_out;
typedef xgr_pop_list pop_list;

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

/* Whether `state` is sparse enough for descent (descend.c; never in a dispatch rule, whose
 * entries record runs). */
static int descends(const xgr_compiled *c, int32_t state) {
    int32_t rule = c->fsm->state_rule[state];
    int hybrid = !c->rule_flat[rule] && !c->rule_opaque[rule];
    return c->rule_opaque[rule] != XGR_OPAQUE_DISPATCH && !c->no_descend &&
           xgr_descend_applies(c->fsm, state) &&
           !(hybrid && xgr_descend_ref_near(c->fsm, state, XGR_DESCEND_REF_NEAR));
}

/* The context-free entry of a state that descends(), or XGR_DESCEND_STOP where the
 * descent gives up (a token reaches a reference in a rule with references). */
static int descend_entry(xgr_compiled *c, xgr_mask_scratch *s, int32_t state,
                         xgr_mask_entry **out) {
    const struct xgr_vocab *v = c->vocab;
    int32_t rule = c->fsm->state_rule[state];
    int hybrid = !c->rule_flat[rule] && !c->rule_opaque[rule];
    pop_list *acc = &s->dacc, *pops = &s->dpops;
    acc->len = pops->len = 0;
    int refchk = c->rule_opaque[rule] ? XGR_REFCHK_EXACT : 0; /* (never a dispatch rule here) */
    int rc = xgr_descend(v, c->fsm, state, refchk, hybrid, acc, pops);
    if (!rc) rc = xgr_entry_from_lists(v, acc, pops, out);
    if (!rc && (rc = xgr_entry_pop_suffixes(v, *out, pops))) {
        xgr_mask_entry_free(*out);
        *out = NULL;
    }
    /* (kept for the next entry unless a wide state made them large) */
    if (acc->cap > SCRATCH_KEEP) XGR_VEC_FREE(*acc);
    if (pops->cap > SCRATCH_KEEP) XGR_VEC_FREE(*pops);
    return rc;
}

/* The context-free entry of `state` by one pass over the whole sorted vocabulary (where
 * it does not descend, or the descent gave up). */
static int classify_all(xgr_compiled *c, xgr_mask_scratch *s, int32_t state,
                        xgr_mask_entry **out) {
    const struct xgr_vocab *v = c->vocab;
    xgr_parser *p = &s->p;
    xgr_follow *fo = &s->fo;
    int32_t rule = c->fsm->state_rule[state];
    int runs = c->rule_opaque[rule] == XGR_OPAQUE_DISPATCH;
    token_list tl = {v, NULL, v->n_sorted, NULL};
    pop_list pops = {0}, groups = {0};
    uint64_t *bits = xgr_calloc((size_t)v->set_words + 1, sizeof *bits);
    cl_out o = {NULL, &pops, NULL, bits, runs ? &groups : NULL, NULL};
    int rc = bits ? xgr_walk_classify(c, p, fo, state, &tl, &o, 0) : XGR_ERR_NOMEM;
    if (!rc) rc = xgr_mask_entry_from_bits(v, bits, &pops, out);
    if (!rc && (rc = runs ? xgr_entry_set_runs(*out, &groups, &pops) : xgr_entry_pop_suffixes(v, *out, &pops))) {
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
    /* A sparse state off any loop (a key's first byte, a literal's next one) has its entry
     * by descent for a few thousand instructions; its rule's closure key can cost a
     * hundred times that: the key rule of a wide object's property chain holds the rest
     * of the chain (Github_ultra---o46322's first key position built 124 such keys, 82%
     * of its 2.8 ms), for entries no other grammar asks for. So such a state descends
     * first and is not shared; loop states (digit runs, strings) keep their shared
     * entries (docs/mask-cache.md, "Sparse states"). */
    int sparse = descends(c, state), loop = 0, rc;
    if (sparse && (loop = xgr_region_on_loop(c, state)) < 0) return loop;
    if (sparse && !loop && (rc = descend_entry(c, s, state, out)) != XGR_DESCEND_STOP) return rc;
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
    if (!e && sparse && loop) {
        rc = descend_entry(c, s, state, &e);
        if (rc == XGR_DESCEND_STOP) {
            e = NULL;
        } else if (rc) {
            return rc;
        }
    }
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
    return xgr_entry_set_unit_count(v, e);
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
    rc = bits && units ? xgr_walk_classify(c, p, fo, slot, &tl, &o, 0) : XGR_ERR_NOMEM;
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
        if (!rc) rc = xgr_sharpen(c, p, fo, slot, -1, raw, out);
        xgr_mask_entry_release(raw);
        return rc;
    }
    /* Parent context: plain verdicts hold in every context; only the plain entry's
     * uncertain tokens are re-decided with the caller on the stack. */
    const xgr_mask_entry *base = NULL;
    int32_t child, caller;
    xgr_pair_slot(c, slot, &child, &caller);
    int32_t rep = c->fsm->state_rule[caller];
    if (xgr_walk_loop_child(c, rep) == c->fsm->state_rule[child]) {
        xgr_mask_entry *raw = NULL;
        rc = loop_raw_entry(c, p, fo, slot, child, &raw);
        if (!rc) rc = xgr_sharpen(c, p, fo, child, rep, raw, out);
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
            rc = xgr_context_shared_pair_entry(c, p, fo, slot, key, base->base, &pair);
            if (!rc) rc = xgr_context_refine_from_pair(c, fo, caller_rule, base, pair, out);
            xgr_mask_entry_release(pair);
            return rc;
        }
    }
    token_list tl = {v, base->uncertain, base->n_uncertain, NULL};
    uint8_t *verdict = xgr_malloc((size_t)tl.n + 1);
    if (!verdict) rc = XGR_ERR_NOMEM;
    cl_out o = {verdict, NULL, NULL, NULL, NULL, NULL};
    if (!rc) rc = xgr_walk_classify(c, p, fo, slot, &tl, &o, 0);
    if (!rc) rc = xgr_entry_make_refined(v, base, verdict, out);
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
    if ((rc = xgr_mask_slot_publish(c, slot_id, e, out)) > 0) rc = XGR_OK;
    return rc;
}

int xgr_mask_slot_publish(xgr_compiled *c, int32_t slot_id, xgr_mask_entry *e,
                          const xgr_mask_entry **out) {
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
        return XGR_OK;
    }
    xgr_mask_entry_free(e);
    *out = expected;
    return 1;
}
