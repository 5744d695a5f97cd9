/* The lowered grammar the runtime executes: one byte-level automaton per rule.
 *
 * All states of all rules live in one pool (global state ids). Each state has a CSR row
 * of edges. An edge either consumes one byte in [lo, hi] (ref == -1) or is a rule
 * reference (ref >= 0: the Earley parser predicts rule `ref` and advances to `target`
 * when it completes). There are no epsilon edges.
 *
 * Invariants the builder (compile/lower.c, compile/fsm_build.c) establishes:
 *   - every rule's automaton is deterministic over the alphabet bytes + rule ids: byte
 *     edges of one state are sorted by lo and pairwise disjoint; at most one ref edge
 *     per (state, rule); byte edges come before ref edges in a row;
 *   - `final[s]` marks states where the rule may end;
 *   - every state is reachable from its rule's start and can reach a final state;
 *   - rule_nullable[r] is 1 iff rule r derives "";
 *   - rule r's states are [rule_start[r], xgr_fsm_rule_end(f, r)).
 *
 * Repetition compression: a rule of kind XGR_RULE_REPEAT has exactly one state (its
 * start) with one ref edge to repeat_child[r] looping back to itself. The parser item of
 * such a rule carries a counter k (completed repetitions); it may take the edge while
 * k < repeat_max[r] (or max == -1) and may end when k >= repeat_min[r]. The child rule
 * never derives "" (the builder guarantees it).
 * Internal header. */
#ifndef XGR_FSM_H
#define XGR_FSM_H

#include <stdint.h>

#include "../ir/ir.h"

enum { XGR_RULE_NORMAL = 0, XGR_RULE_REPEAT = 1 };

typedef struct {
    int32_t target; /* global state id */
    int32_t ref;    /* -1: byte edge [lo, hi]; >= 0: rule reference */
    uint8_t lo, hi;
} xgr_edge;

/* What each state still needs to reach its rule's end, in characters (parse/need.c): set by
 * the compiler for a grammar with a character budget (max_chars / max_json_chars), so the
 * parser drops items that cannot finish within their budget; owned by the automaton. */
#define XGR_NEED_JS 14 /* escape states of parse/attrs.h xgr_json_step */
#define XGR_NEED_INF INT32_MAX
typedef struct {
    int32_t *cp;     /* per state: fewest code points to the rule's end (exact) */
    int32_t *jc;     /* per state x escape state: fewest decoded JSON-string characters */
    int32_t *jc_min; /* per state: the least of its jc row (escape state unknown) */
    int32_t *rule_cp, *rule_jc; /* per rule: from its start (jc: the least over escape
                                 * states); XGR_NEED_INF: it cannot end within its budget */
    uint16_t *rule_exit; /* per rule x escape state it is entered in: the escape states
                          * it may end in (a bit each; 0: not reached, any) */
    int32_t reach;   /* the most any item under a character budget still needs, itself
                      * and the rules above it up to the outermost budget (for the mask
                      * entries' trust, runtime/matcher.c); XGR_NEED_INF: unbounded */
} xgr_fsm_need;

typedef struct xgr_fsm {
    int32_t n_rules;
    int32_t root;             /* rule id of the start rule */
    char **rule_name;         /* for messages and printing (owned; NULL for a linked
                               * fragment's rules) */
    int32_t *rule_start;      /* start state of each rule */
    uint8_t *rule_kind;       /* XGR_RULE_NORMAL / XGR_RULE_REPEAT */
    uint8_t *rule_nullable;
    int32_t *repeat_child;    /* REPEAT rules; -1 otherwise */
    int32_t *repeat_min;
    int32_t *repeat_max;      /* -1 unbounded */
    int32_t *rule_lookahead;  /* rule id whose language must follow this rule, or -1.
                               * Used only to sharpen the mask cache; the grammar
                               * author guarantees it is implied by the grammar. */
    uint8_t *rule_dispatch;   /* 1: a TagDispatch rule (free text watched by triggers); its
                               * references are entered only after a whole trigger */

    /* Rule attributes (ir.h xgr_rule_attrs; parse/attrs.c), per rule, or NULL when no
     * rule has any. capture_off indexes attr_names. */
    xgr_rule_attrs *rule_attrs;
    char *attr_names;
    size_t attr_names_len;
    uint8_t attr_budgets;     /* some rule has max_tokens / max_chars / max_json_chars */
    uint8_t attr_unique;      /* some rule is a uniqueItems element (ir.h unique) */
    uint8_t attr_unique_search; /* some rule is a unique_search_scope (ir.h unique) */
    uint8_t attr_lazy;        /* some rule is lazy or has a token budget (both end
                               * occurrences early: parse/attrs.h) */
    uint8_t attr_captures;    /* some rule has a capture label */
    uint8_t attr_lazy_rules;  /* some rule has the lazy attribute itself */
    uint8_t attr_forced;      /* some rule has a forced close (ir.h forced_body) */
    int32_t attr_min_budget;  /* smallest max_chars or max_json_chars (0 if some
                               * max_tokens is 0), or
                               * INT32_MAX: a token of at most this many bytes cannot
                               * overrun a budget of a rule it enters */

    xgr_fsm_need *need;       /* NULL: not computed (no character budget) */

    int32_t n_states;
    int32_t *state_rule;      /* owning rule of each state */
    uint8_t *final;
    int32_t *edge_begin;      /* n_states + 1 */
    xgr_edge *edges;
    int32_t n_edges;
} xgr_fsm;

/* One past the last state of rule r: rules are emitted in id order, each rule's states
 * contiguous from its start. */
static inline int32_t xgr_fsm_rule_end(const xgr_fsm *f, int32_t r) {
    return r + 1 < f->n_rules ? f->rule_start[r + 1] : f->n_states;
}

/* The target of state s on byte b (edges sorted by lo, disjoint, byte edges first), or -1;
 * a linear scan, for the few edges most states have. */
static inline int32_t xgr_fsm_byte_target(const xgr_fsm *f, int32_t s, uint8_t b) {
    for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++) {
        const xgr_edge *ed = &f->edges[e];
        if (ed->ref >= 0 || b < ed->lo) break;
        if (b <= ed->hi) return ed->target;
    }
    return -1;
}

/* ORs the bytes state s has a byte edge on into the 256-bit set `out`. */
static inline void xgr_fsm_byte_set(const xgr_fsm *f, int32_t s, uint32_t out[8]) {
    for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++) {
        const xgr_edge *ed = &f->edges[e];
        if (ed->ref >= 0) break; /* byte edges come first */
        for (int b = ed->lo; b <= ed->hi; b++) out[b >> 5] |= 1u << (b & 31);
    }
}

/* Lowers a validated grammar to automata: inlines small non-recursive rules
 * (opts->inline_max_states), expands UTF-8 classes to byte ranges, unrolls or
 * compresses repetitions (opts->repeat_threshold), determinises and minimises each
 * rule, removes rules unreachable from the root, and computes nullability.
 * Enforces opts->max_rules / max_fsm_states (XGR_ERR_LIMIT). opts must be non-NULL with
 * defaults already filled in. */
int xgr_fsm_build(const xgr_grammar *g, const xgr_compile_options *opts, xgr_fsm **out);

/* Rules of a grammar that stand in for automata linked in afterwards (link.c). */
typedef struct {
    const uint8_t *is_extern; /* per IR rule: never inlined, so every use is a reference */
    int markers;              /* token-level terminals occur in the linked automata */
    int32_t *rule_extern;     /* out, per output rule (caller frees): the IR stand-in it
                               * was built from ("minus ''" variants too), or -1 */
} xgr_fsm_externs;
/* xgr_fsm_build with stand-in rules; ext may be NULL. */
int xgr_fsm_build_ex(const xgr_grammar *g, const xgr_compile_options *opts,
                     xgr_fsm_externs *ext, xgr_fsm **out);
/* An empty automaton with room for nr rules, ns states and ne edges: every array
 * allocated (contents unset, rule names NULL, no rule attributes), n_rules = nr and the
 * other counts 0; NULL when out of memory. Freed by xgr_fsm_free. */
xgr_fsm *xgr_fsm_alloc(size_t nr, size_t ns, size_t ne);
void xgr_fsm_free(xgr_fsm *f);
/* Bytes held by f, for memory accounting. */
size_t xgr_fsm_memory(const xgr_fsm *f);
/* Debug dump of the automata as text (caller frees). */
int xgr_fsm_dump(const xgr_fsm *f, char **out, size_t *out_len);

#endif
