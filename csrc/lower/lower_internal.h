/* Shared state of the lowering pipeline (IR -> per-rule DFAs, see fsm.h).
 *
 * Files: lower.c (analyses over IR rules), utf8_ranges.c (class normalisation and
 * UTF-8 byte-range splitting), nfa.c (Thompson construction and the "minus empty
 * string" product), dfa.c (subset construction, trimming, minimisation),
 * fsm_build.c (output-rule worklist, emission into the global pool, dump),
 * tag_dispatch.c (TagDispatch bodies: Aho-Corasick automata built directly),
 * substring.c (Substring(...): suffix automata over the chunks).
 * Internal header. */
#ifndef XGR_LOWER_INTERNAL_H
#define XGR_LOWER_INTERNAL_H

#include "fsm.h"

/* Nesting bound for the recursive passes over expression trees (inlined bodies count
 * too); keeps stack use well under 1 MiB even on small thread stacks. */
#define LW_MAX_DEPTH 3000

typedef XGR_VEC(int32_t) lw_i32v;
typedef XGR_VEC(uint8_t) lw_u8v;
typedef XGR_VEC(uint32_t) lw_u32v;

/* ---- utf8_ranges.c ---------------------------------------------------------------- */
typedef struct {
    uint32_t lo, hi;
} lw_range;
typedef XGR_VEC(lw_range) lw_range_vec;

/* One UTF-8 byte-range sequence: byte i of a matching code point is in [lo[i], hi[i]]. */
typedef struct {
    uint8_t n;
    uint8_t lo[4], hi[4];
} lw_u8seq;
typedef XGR_VEC(lw_u8seq) lw_seq_vec;

/* CLASS payload -> sorted, disjoint, non-adjacent scalar-value ranges (surrogates
 * removed, complemented within the scalar values when negated). out is overwritten. */
int lw_norm_class(const uint32_t *pairs, int32_t n, int negated, lw_range_vec *out);
/* BYTE_CLASS payload -> sorted disjoint byte ranges (complemented within 0..255). */
int lw_norm_byte_class(const uint32_t *pairs, int32_t n, int negated, lw_range_vec *out);
/* Appends the UTF-8 byte-range sequences matching exactly the scalar values of the
 * normalised ranges r[0..n) (the classic utf8-ranges split). */
int lw_utf8_sequences(const lw_range *r, size_t n, lw_seq_vec *out);

/* ---- NFA ------------------------------------------------------------------------- */
enum { LW_EPS = -2, LW_BYTE = -1 }; /* nfa edge labels; >= 0 is an output rule id */
typedef struct {
    int32_t from, to, label;
    uint8_t lo, hi;
} lw_nedge;
typedef struct {
    int32_t n_states, start, final;
    int may_dead; /* some state may be unable to reach `final` (else trimming is skipped) */
    XGR_VEC(lw_nedge) edges;
} lw_nfa;

/* ---- DFA ------------------------------------------------------------------------- */
typedef struct {
    int32_t n; /* states; state 0 is the start */
    lw_u8v final;
    lw_i32v ebeg; /* n + 1 */
    XGR_VEC(xgr_edge) edges; /* local targets; bytes sorted by lo, then refs by id */
} lw_dfa;

/* Per-rule determinisation budget: max(LW_DFA_MIN_BUDGET, LW_DFA_PER_NFA * NFA states)
 * (and never more than what max_fsm_states leaves). */
#define LW_DFA_PER_NFA 32
#define LW_DFA_MIN_BUDGET 100000

typedef struct lw_dfa_ws lw_dfa_ws;
lw_dfa_ws *lw_dfa_ws_new(void);
void lw_dfa_ws_free(lw_dfa_ws *w);
/* Determinises, trims and minimises `nfa` into w's result (returned in *out, owned by
 * w, valid until the next call). A rule with an empty language yields one non-final
 * state without edges. More than `budget` DFA states -> XGR_ERR_LIMIT. */
int lw_nfa_to_dfa(lw_dfa_ws *w, const lw_nfa *nfa, int64_t budget, const lw_dfa **out);
/* Subset states of w's last determinisation (before trimming and minimisation). */
int32_t lw_dfa_ws_raw_states(const lw_dfa_ws *w);

/* dfa_memo.c: lw_nfa_to_dfa through a process-wide memo keyed by the NFA with its
 * references renumbered by first appearance (so equal rules of different grammars hit);
 * the result, with output rule ids restored, is written to *scratch (caller-owned,
 * reused) and returned in *out. `nfa` is left as it was. Thread-safe. */
int lw_dfa_memo(lw_dfa_ws *ws, lw_nfa *nfa, int64_t budget, lw_dfa *scratch,
                const lw_dfa **out);
void lw_dfa_memo_set_budget(size_t bytes);
void lw_dfa_memo_clear(void);

/* ---- lowering context ----------------------------------------------------------- */
enum { /* per IR rule flags */
       RF_REACH = 1,
       RF_NULLABLE = 2,
       RF_NE = 4, /* derives some non-empty string */
       RF_PROD = 8, /* derives some string */
       RF_INLINED = 16,
       RF_RECURSIVE = 32,
       RF_HIDDEN = 128, /* names a suffix / stop rule's body or marker (ir.h): kept, never
                        * inlined (parse/captures.c runs its automaton) */
       RF_TD_TARGET = 64 /* a TagDispatch trigger hands over to it */
};
enum { NP_NULLABLE = 1, NP_NE = 2, NP_PROD = 4, NP_KNOWN = 0x80 }; /* node properties */

/* What an output rule is built from. Key (src, a, b, c):
 *   RULE:   IR rule a; b = 1 for "minus the empty string"
 *   EXPR:   IR node a; b as above (repetition bodies, lookaheads)
 *   REPEAT: child output rule a, min b, max c */
enum { LW_SRC_RULE = 0, LW_SRC_EXPR = 1, LW_SRC_REPEAT = 2 };

typedef struct {
    int32_t src, a, b, c;
    uint8_t kind;     /* XGR_RULE_* */
    uint8_t nullable; /* derives "" */
    uint8_t ne;       /* derives a non-empty string */
    int32_t lookahead; /* output rule id or -1 */
    char *name;
    uint8_t dispatch;  /* built from a TagDispatch body */
    int32_t forced;    /* output rule of the body a forced close runs (fsm_build.c
                        * add_forced_close), or -1 */
} lw_orule;

/* An inlined rule (n = 1) or a sequence of 2-4 rule references led by one (n >= 2)
 * already built into the current NFA, ending at state b: its fragment starts at the
 * fresh state s (see nfa.c, shared_frag). */
typedef struct {
    int32_t ids[4]; /* unused ones 0 */
    int32_t n, b, s;
    int32_t slot; /* its place in share_tab */
} lw_share;

typedef struct lw_ctx {
    const xgr_grammar *g;
    int32_t max_rules, inline_max, rthresh;
    int memo;          /* determinise through the process-wide memo (dfa_memo.c) */
    int markers;       /* the grammar has token-level terminals (common/token_marker.h) */
    const uint8_t *externs; /* per IR rule, or NULL: stand-ins for linked automata, never
                             * inlined (link.c replaces their output rules) */
    lw_dfa memo_out;   /* its result for the current rule */
    int64_t max_states, nfa_limit;
    int status; /* first error of a pass that cannot return one directly */

    /* per IR rule / node */
    uint8_t *rflags;
    int32_t *est;
    uint8_t *nprops; /* memo, valid once memo_on */
    int32_t *nest;   /* size-estimate memo per node, -1 = unknown */
    uint8_t *nwide;  /* per REPEAT node: 0 unknown, 1 narrow body, 2 wide (lw_repeat_compressed) */
    uint8_t *rwide;  /* per IR rule: 0 unknown, 1 narrow, 2 wide (lw_rule_wide) */
    int memo_on;

    /* output rules, in id order; processed as a FIFO worklist */
    XGR_VEC(lw_orule) orules;
    int32_t *omap; /* open-addressing table of output rule ids */
    size_t omap_cap;

    int32_t cur; /* output rule being built (messages, generated names) */
    int safe;    /* rebuilding a rule whose DFA blew up: no inlining, repeats >= 2 become
                  * counter rules, so nondeterminism moves into the Earley parser */
    int safe_differs; /* the last NFA build inlined or unrolled something safe mode keeps */
    lw_nfa nfa, nfa2;
    XGR_VEC(lw_share) share; /* per NFA build */
    int32_t *share_tab;      /* open-addressing index of `share` (-1 = free) */
    size_t share_cap;        /* 0 or a power of two, > 2 * share.len */
    /* Group inlining (lower.c lw_group_inline): per IR rule, grp[r] is the host rule whose
     * output rule r is built into, or -1; a member's fragment is built once per NFA build
     * and end state (nfa.c): grp_stamp[r] == nfa_builds when grp_state[r] is the start
     * of its fragment ending at grp_end[r]. One block of 4 * rules int32 (grp owns it). */
    int32_t *grp, *grp_stamp, *grp_state, *grp_end;
    int32_t nfa_builds;
    lw_range_vec ranges;
    lw_seq_vec seqs;
    /* UTF-8 sequences of each character-class node, computed once per compile (nfa.c):
     * node i's are cls_seqs[cls_beg[i] - 1 .. + cls_len[i]) when cls_beg[i] > 0. One
     * block of 2 * nodes int32 (cls_beg owns it), allocated at the first class built. */
    int32_t *cls_beg, *cls_len;
    lw_seq_vec cls_seqs;
} lw_ctx;

/* lower.c */
int lw_analyze(lw_ctx *c);
/* Largest sum of member size estimates of one inlining group (lower.c). */
#define LW_GROUP_MAX 16384
/* the largest rule a group member may keep a reference to (lower.c group_pure) */
#define LW_LEAF_MAX 1024
/* The copy budget (lower.c copy_budget): an inlined rule of more than LW_COPY_SMALL
 * estimated states whose copies (references x estimate) would pass LW_COPY_BUDGET
 * states keeps its own automaton instead. */
#define LW_COPY_SMALL 40
#define LW_COPY_BUDGET 1024
/* NP_* bits of node `id` (memoised once the analysis is done). */
uint8_t lw_node_props(lw_ctx *c, int32_t id, int depth);
/* Is REPEAT node `id` lowered to a counter rule rather than unrolled? Yes when its
 * bound exceeds opts->repeat_threshold, or when unrolling would copy the body into
 * more than LW_MAX_UNROLL states (nested small repeats multiply), or when it is bounded
 * (max >= 2) and its body is wide: it can start with at least LW_WIDE_FIRST_BYTES of
 * the 256 bytes (a JSON string's `char` in `char{0,15}`, `[^;]{2,8}`). Unrolled, each
 * position of such a body is its own automaton state, and each state's first mask is a
 * walk of most of the vocabulary (4-6 ms at 150k tokens); as a counter rule every
 * position and every bound shares one loop entry of the body (mask/walk.c
 * xgr_walk_loop_child), the counter applied per fill. */
#define LW_MAX_UNROLL 1024
#define LW_WIDE_FIRST_BYTES 96
int lw_repeat_compressed(lw_ctx *c, int32_t id);
/* Can IR rule r start with at least LW_WIDE_FIRST_BYTES of the 256 bytes (a JSON string
 * character)? A reference edge to such a rule leaves nearly every token uncertain where
 * it is entered (the rule pops after a character or so, and the caller decides), so the
 * first mask there walks the vocabulary twice (trie_alt.c leaves an alternation that
 * references such a rule to the general path, which inlines it). */
int lw_rule_wide(lw_ctx *c, int32_t r);

/* fsm_build.c: output-rule lookup / creation (may grow c->orules). */
int lw_ref_rule(lw_ctx *c, int32_t ir_rule, int nonempty, int32_t *out);
int lw_repeat_rule(lw_ctx *c, int32_t repeat_node, int nonempty, int32_t *out);
int lw_prime_rule(lw_ctx *c, int32_t orule, int32_t *out);

/* nfa.c: builds c->nfa for output rule `orule` (not a REPEAT rule). */
int lw_build_nfa(lw_ctx *c, int32_t orule);

/* tag_dispatch.c: rules whose body is a TagDispatch node get their automaton directly
 * (no NFA / subset construction). */
/* Validates TagDispatch node `id`'s payload and appends its paired rule ids to `out`. */
int lw_td_refs(const xgr_grammar *g, int32_t id, lw_i32v *out);
/* NP_* properties of TagDispatch node `id` under the current rule flags. */
uint8_t lw_td_props(lw_ctx *c, int32_t id);
/* Automaton of output rule `orule` (a TagDispatch rule, minus "" when its key says so)
 * into *out (vectors reused); more than `budget` states -> XGR_ERR_LIMIT. */
int lw_td_build(lw_ctx *c, int32_t orule, int64_t budget, lw_dfa *out);
void lw_td_dfa_free(lw_dfa *d);

/* nfa.c: a fresh state of c->nfa (XGR_ERR_LIMIT past c->nfa_limit) / an edge of it. */
int lw_nfa_state(lw_ctx *c, int32_t *s);
int lw_nfa_edge(lw_ctx *c, int32_t from, int32_t to, int32_t label, uint8_t lo, uint8_t hi);

/* substring.c: Substring(...) nodes (XGR_NODE_SUBSTRING). */
/* Validates node `id`'s chunk list against the pools. */
int lw_substring_check(const xgr_grammar *g, int32_t id);
/* NP_* properties (always nullable and productive). */
uint8_t lw_substring_props(const xgr_grammar *g, int32_t id);
/* Automaton-size estimate for inlining decisions. */
int64_t lw_substring_est(const xgr_grammar *g, int32_t id);
/* Adds to c->nfa states and edges so that the paths a -> b spell the node's language
 * (fresh states only, as nfa.c's build requires). */
int lw_substring_nfa(lw_ctx *c, int32_t id, int32_t a, int32_t b);

/* trie_alt.c: a rule whose body is an alternation of at least 8 alternatives, each a
 * finite sequence of literals, references and small alternations of those, gets its
 * minimal automaton directly into *out (vectors reused); *built = 0 (nothing done) for
 * any other rule. More than `budget` states -> XGR_ERR_LIMIT. */
int lw_trie_build(lw_ctx *c, int32_t orule, int64_t budget, lw_dfa *out, int *built);

/* Sorting int32 keys with a context comparator (C11 qsort has no context). */
typedef int (*lw_cmp_fn)(const void *ctx, int32_t a, int32_t b);
void lw_sort_i32(int32_t *a, size_t n, int32_t *tmp, lw_cmp_fn cmp, const void *ctx);

#endif
