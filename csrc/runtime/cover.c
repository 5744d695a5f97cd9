/* Covered items (cover.h): an optional-property chain `p1 ::= ws "," ... p2 | p2` predicts
 * every later property's rule after each value (200 properties: 200 scannable items, each
 * a first-visit vocabulary pass whose closure is the rest of the chain). The first one's
 * entry simulates them all: its walk enters p2 from p1's start state, p3 from p2's, and so
 * on, so the matcher builds and merges one entry instead of hundreds.
 *
 * Why a covered item X loses no token: X has origin = this row, so it exists because its
 * rule R was predicted here, by the items of this row whose state has a reference edge to
 * R (its predictors; X's state is R's start or a state reached from it over empty
 * references, in this same row). A token T that X can scan goes on inside R and either
 * ends inside R's closure or completes R and goes on after one predictor Y. Every
 * predictor is scannable and earlier in the row; by induction on the row index, each is
 * either simulated by its own entry or lies, with everything it predicts, inside the
 * simulation of an earlier uncovered item K. The entry of K (plain or with a caller, by
 * descent, region, vocabulary pass or the cross-grammar cache) follows references of an
 * ordinary, non-opaque rule through the parser, so it walks T from K through Y into R and
 * through X: it accepts T, or keeps it uncertain when T leaves K's rule (the matcher then
 * checks it on the real parser), and rejects it only when T has no derivation there, which
 * is every derivation T has through X. Opaque rules (whose entries stop at references)
 * and repetition rules (whose entries ignore counters) are never counted as covering, nor
 * is a state whose vocabulary pass leaves its own references to the callees' items
 * (walk.h xgr_walk_refs_to_callees: a listed name's byte edge beside the reference to an
 * additionalProperties key rule): its entry walks only its byte edges at the first byte,
 * so the callee's item keeps its own entry. */
#include "cover.h"

#include "../mask/walk.h"

void xgr_cover_free(xgr_cover *cv) {
    free(cv->stamp);
    free(cv->last);
    free(cv->ok);
    free(cv->drop);
    memset(cv, 0, sizeof *cv);
}

int32_t xgr_cover_mark(const xgr_compiled *c, const xgr_parser *p, xgr_cover *cv) {
    if (p->lazy || p->budgets) return 0;
    const xgr_fsm *f = c->fsm;
    int32_t last = xgr_parser_rows(p) - 1;
    int32_t k0 = p->row_begin.data[last], k1 = p->row_begin.data[last + 1], n = k1 - k0;
    if (n < 2) return 0;
    if (!cv->stamp) {
        size_t nr = (size_t)f->n_rules + 1;
        cv->stamp = xgr_calloc(nr, sizeof *cv->stamp);
        cv->last = xgr_malloc(nr * sizeof *cv->last);
        cv->ok = xgr_malloc(nr);
        if (!cv->stamp || !cv->last || !cv->ok) {
            xgr_cover_free(cv);
            return -1;
        }
    }
    if ((size_t)n > cv->drop_cap) {
        uint8_t *d = xgr_malloc((size_t)n);
        if (!d) return -1;
        free(cv->drop);
        cv->drop = d;
        cv->drop_cap = (size_t)n;
    }
    if (++cv->gen == 0) { /* the stamps wrapped: start over */
        memset(cv->stamp, 0, ((size_t)f->n_rules + 1) * sizeof *cv->stamp);
        cv->gen = 1;
    }
    uint32_t g = cv->gen;
    int32_t marked = 0;
    for (int32_t k = k0; k < k1; k++) {
        xgr_item it = p->items.data[k];
        int32_t s = it.state, r = f->state_rule[s];
        cv->drop[k - k0] = 0;
        /* first: is this item covered by the predictors seen so far? */
        if (it.origin == last && c->scannable[s] && r != f->root && cv->stamp[r] == g &&
            cv->ok[r] && cv->last[r] < k - k0) {
            cv->drop[k - k0] = 1;
            marked++;
        }
        /* then: this item as a predictor of the rules its reference edges enter */
        int32_t e0 = c->ref_begin[s], e1 = f->edge_begin[s + 1];
        if (e0 == e1) continue;
        /* (a state whose entry leaves its references to the callees' items covers none) */
        uint8_t good = c->scannable[s] && f->rule_kind[r] == XGR_RULE_NORMAL &&
                       !c->rule_opaque[r] && !xgr_walk_refs_to_callees(c, s);
        for (int32_t e = e0; e < e1; e++) {
            int32_t t = f->edges[e].ref;
            if (t < 0) continue;
            if (cv->stamp[t] != g) {
                cv->stamp[t] = g;
                cv->ok[t] = 1;
            }
            cv->ok[t] &= good;
            cv->last[t] = k - k0;
        }
    }
    return marked;
}

int xgr_cover_loop_body(const xgr_compiled *c, const xgr_parser *p, xgr_item it, int32_t rule) {
    const xgr_fsm *f = c->fsm;
    if (rule == f->root) return 0;
    int any = 0;
    for (int32_t q = p->row_begin.data[it.origin]; q < p->row_begin.data[it.origin + 1]; q++) {
        int32_t ps = p->items.data[q].state;
        for (int32_t e = c->ref_begin[ps]; e < f->edge_begin[ps + 1]; e++) {
            if (f->edges[e].ref != rule) continue;
            /* Bounded callers too: the matcher keeps, per pair slot, the largest count of
             * repetitions its callers have left (matcher.c push_key), so the loop entry's
             * counter trim is exact whatever the callers' counts. */
            if (xgr_walk_loop_child(c, f->state_rule[ps]) != rule || xgr_pair_base(c, e) < 0)
                return 0;
            any = 1;
        }
    }
    return any;
}
