/* A compiled grammar: automata + vocabulary + the adaptive token-mask cache.
 *
 * The cache has one slot per automaton state that can scan a byte. A slot is filled
 * the first time a matcher needs it (or eagerly on request) and then never changes:
 * it is published with an atomic compare-and-swap, so readers take no lock and two
 * threads racing on one slot both compute it and one copy is dropped.
 * Internal header. */
#ifndef XGR_COMPILED_H
#define XGR_COMPILED_H

#include <pthread.h>
#include <stdatomic.h>

#include "../lower/fsm.h"
#include "../parse/earley.h"
#include "follow.h"
#include "stay.h"
#include "vocab.h"

enum {
    XGR_MASK_ACCEPTED_LIST = 0, /* ids = accepted tokens */
    XGR_MASK_REJECTED_LIST = 1, /* ids = rejected tokens; every other text token that is
                                 * not uncertain is accepted */
    XGR_MASK_BITSET = 2,        /* bits = accepted tokens (row_words words) */
    XGR_MASK_REFINED = 3        /* parent-context entry: `base` (the state's plain entry)
                                 * decides every token except base's uncertain ones, which
                                 * this entry re-decides with the caller on the stack:
                                 * ids = those now accepted, uncertain = still open */
};

/* rule_opaque kinds: a TagDispatch rule (its entries are shared by every grammar with the
 * same triggers), or a rule a trigger hands over to (a tag group: unique to its request,
 * so its entries are not shared and may look at what its references start with). */
enum { XGR_OPAQUE_DISPATCH = 1, XGR_OPAQUE_GROUP = 2 };

/* Uncertain tokens grouped by the bytes they leave, so each grammar decides every distinct
 * suffix once, without reading the tokens' bytes scattered over the vocabulary (",\""
 * follows thousands of string bodies). Region entries (region.c, `sfx`): the leaving
 * tokens by exit edge and the bytes after the exit. Large context-free entries (`psfx`,
 * entry.c xgr_entry_pop_suffixes): the tokens with a single plain pop by the bytes after it. */
#define XGR_PSFX_MIN 64 /* psfx: only entries with at least this many uncertain tokens */
typedef struct {
    int32_t n;      /* groups (sfx: ordered by exit, then first byte) */
    int32_t *group; /* per uncertain token: its group, or -1 (sfx: it died inside the loop;
                     * psfx: decided on its own) */
    int32_t *exit;  /* sfx, per group: exit index; psfx: NULL */
    uint32_t *off;  /* per group: bytes[off[g] .. off[g + 1]) */
    uint8_t *bytes;
    size_t mem;
} xgr_region_sfx;

/* unit_count saturates here: a counter with at least this many repetitions left reads
 * unit_ids instead. */
#define XGR_UNIT_COUNT_MAX 127

typedef struct xgr_mask_entry_s {
    atomic_int refcount; /* plain-layer entries may be shared across grammars */
    int32_t form;
    int32_t n_ids;
    int32_t n_uncertain;
    int32_t n_accepted; /* statistics */
    int32_t *ids;       /* ACCEPTED_LIST / REJECTED_LIST */
    uint32_t *bits;     /* BITSET */
    int32_t *uncertain; /* tokens whose fate depends on the enclosing rules */
    size_t bytes;       /* memory held by this entry */
    /* Plain entries only: so many tokens are uncertain that the matcher should use the
     * parent-context slots of this state instead (each costs a vocabulary pass). */
    int32_t wants_context;
    struct xgr_mask_entry_s *base; /* REFINED only */
    int32_t owns_base;             /* base is a reference-counted context-free entry */
    /* Context-free entries: for uncertain[i], the token depths where the rule could end
     * (pop_depth[pop_begin[i] .. pop_begin[i+1])), so each grammar can sharpen them. */
    int32_t *pop_begin;
    uint16_t *pop_depth;
    int32_t *ids_by_len; /* REFINED: ids again, longest token first */
    /* Context-free entries of TagDispatch states: uncertain[run_begin[k] ..
     * run_begin[k + 1]) share their pop depths and their bytes up to the deepest pop and
     * one past it, so a grammar decides their reference starts once per run (after a
     * trigger, every token that starts with a space and a letter is one run). NULL else. */
    int32_t *run_begin;
    int32_t n_runs;
    /* The sorted position of run k's first token when its tokens are consecutive in sorted
     * order (then run k is sorted[run_pos[k] ..]), else -1; NULL without runs. */
    int32_t *run_pos;
    /* Loop entries (a unit repetition's body, mask_cache.c loop_raw_entry) only: the
     * accepted tokens that run more than one repetition, most repetitions first, and
     * unit_end[u] = how many of them run more than u (u in [0, max_units]); a matcher whose
     * REPEAT caller has u repetitions left drops the first unit_end[u]. NULL else. */
    int32_t *unit_ids;
    int32_t *unit_end;
    int32_t max_units;
    /* With unit_ids: each token's repetitions by id (row_words * 32 bytes; 0 for those not
     * in unit_ids, at most XGR_UNIT_COUNT_MAX), so a counter that drops most of them (a
     * short bounded string drops every token of more characters than it has left) builds
     * the dropped tokens' bits 32 at a time instead of clearing them one by one
     * (matcher.c drop_units). */
    uint8_t *unit_count;
    /* This grammar's view of a loop entry (REFINED over it): the first bytes of what may
     * follow the repetition, so a dropped token that holds none of them after its first
     * byte cannot leave the repetition and is rejected without an exact check. */
    uint32_t *exit_first;
    /* With exit_first: the tokens (a row_words bitset by id) that hold, after their first
     * byte, a byte of exit_first, so the matcher's counter trim (drop_units) reads one bit
     * per dropped token instead of its bytes. NULL else. */
    uint32_t *unit_open;
    xgr_region_sfx *sfx;  /* region entries only, else NULL */
    xgr_region_sfx *psfx; /* context-free entries with many uncertain tokens, else NULL */
    /* A grammar's published entry with at most XGR_UBYTES_MAX uncertain tokens: their bytes
     * again, in list order (token i is ubytes[uoff[i] .. uoff[i + 1])), so the matcher's
     * exact checks read one block instead of an offset and the bytes per token, scattered
     * over the vocabulary. NULL else. */
    uint32_t *uoff;
    uint8_t *ubytes; /* in uoff's allocation */
    /* Bytes of array storage allocated with the entry itself, right behind it (entry.c
     * xgr_entry_block): arrays that point there are not freed on their own. 0: none. */
    size_t block;
    int32_t in_arena; /* the entry lies in its grammar's arena, freed with the grammar */
    /* An entry loaded from a mapped pack (entry_pack.c): its arrays (and its psfx's) point
     * into this read-only image, which the entry holds a reference to; only the entry and
     * its psfx struct are its own. NULL else. */
    xgr_file_map *map;
} xgr_mask_entry;

/* Next-state table of a reference-free (or opaque) rule over its byte classes. */
typedef struct {
    uint8_t cls[256]; /* byte -> class */
    int32_t n_cls;
    int32_t *next;    /* (state - rule_start) * n_cls + class -> target, -1: dead */
    uint8_t *pops;    /* state - rule_start -> its POP_END / POP_REF flags (in next's block) */
    /* state - rule_start -> two words: the folded set (vocab.h xgr_byte_fold) of the bytes
     * on which the state does not go to itself (in next's block) */
    uint64_t *leave;
    int any_stay; /* some state goes to itself on some byte (else leave[] never helps) */
} xgr_flat_table;

/* Follow-check memo slot (follow_memo.c): could `s[0..n)` follow a completion of `rule`? */
typedef struct {
    const uint8_t *s; /* into the vocabulary's token bytes */
    uint32_t n;
    int32_t rule;
    uint64_t hash;
    int8_t val; /* -1: empty slot */
} xgr_follow_memo_slot;
#define XGR_FOLLOW_MEMO_MAX ((size_t)1 << 17) /* slots per grammar (~4 MiB) */

/* uniqueItems token lists of one grammar (runtime/matcher.c): the tokens holding a byte
 * after which an element rule may complete (one), those holding two such bytes (two), in
 * sorted order, and as bit sets (row_words each): `one`, and those of `one` holding a ','
 * after a '[' (they may open an array and start its second element). They depend on the
 * vocabulary and that byte set only: `shared` tables live in the vocabulary's memo
 * (vocab.h), shared by every grammar with the same set; the others are freed with the
 * grammar (xgr_uq_tables_drop). Immutable once published. */
typedef struct {
    int32_t *one, *two;
    int32_t n_one, n_two;
    uint32_t *one_bits, *opens;
    int shared;
} xgr_uq_tables;

/* Lazy rules' token lists of one grammar (runtime/matcher.c, lazy_tokens.h): the tokens
 * that may close a lazy occurrence before their last byte, in sorted order and as a bit
 * set (row_words; NULL when n < 0: every token may, a nullable lazy rule). Immutable once
 * published; `shared` as xgr_uq_tables'. */
typedef struct {
    int32_t *risky;
    int32_t n;
    uint32_t *bits;
    int shared;
} xgr_lazy_tables;

static inline void xgr_lazy_tables_free(xgr_lazy_tables *t) {
    if (!t) return;
    free(t->risky);
    free(t->bits);
    free(t);
}

static inline void xgr_uq_tables_free(xgr_uq_tables *t) {
    if (!t) return;
    free(t->one);
    free(t->two);
    free(t->one_bits);
    free(t->opens);
    free(t);
}

/* A grammar lets go of its tables: frees them unless the vocabulary's memo owns them. */
static inline void xgr_uq_tables_drop(xgr_uq_tables *t) {
    if (t && !t->shared) xgr_uq_tables_free(t);
}

static inline void xgr_lazy_tables_drop(xgr_lazy_tables *t) {
    if (t && !t->shared) xgr_lazy_tables_free(t);
}

/* A rule's canonical closure serialisation (mask/closure.h), the cross-grammar key. */
typedef struct {
    uint8_t *bytes;
    size_t len;
    uint64_t hash;
    int unshareable;
} xgr_rule_key;

struct xgr_compiled {
    atomic_int refcount;
    xgr_grammar *grammar;
    xgr_vocab *vocab;
    xgr_fsm *fsm;
    xgr_compile_options opts;
    /* Slots: [0, n_states) are plain entries, one per state, simulating the state's rule
     * alone (leaving the rule makes a token uncertain). [n_states, n_slots) are
     * parent-context entries (XGrammar-2 paper, §3.6 generalised): for a ref edge e = (p --C--> t)
     * and a scannable state s of C, slot n_states + xgr_pair_base(e) + scan_local[s]
     * simulates s with the caller p on the stack, so tokens that finish C and go on in
     * the caller's rule (a `char*` loop, a {m,n} repetition) are decided by the cache.
     * For a REPEAT caller the entry ignores the counter, so the matcher uses it only when
     * the counter has headroom (max unbounded or max - count > the longest token). */
    /* The slots in chunks of XGR_SLOT_CHUNK, each allocated when one of its entries is
     * first built: a request visits few of its states, and fewer pair slots. */
    _Atomic(_Atomic(xgr_mask_entry *) *) *entry_chunks;
    int32_t n_slots;
    int32_t *scan_local;  /* per state: index among its rule's scannable states, or -1 */
    /* The ref edges with pair slots, in edge order (= slot order), and the offset of each
     * one's first pair slot: an edge's slots are n_states + pair_first[i] + scan_local[s]
     * for the scannable states s of the rule it references. Ref edges are a small part of
     * the edges, so this beats a per-edge table in a cache counted in bytes. */
    int32_t *pair_edges;
    int32_t *pair_first;
    int32_t n_pair_edges;
    int32_t *ref_begin;   /* per state: first ref edge (byte edges come first) */
    uint8_t *rule_flat;   /* per rule: no ref edges (its automaton alone decides) */
    /* Tests only: classify every plain state by the full vocabulary pass, never by
     * descent (mask_cache.c classify_all), to compare the two. */
    uint8_t no_descend;
    /* per rule: plain entries stop at references (a token that would enter one stays
     * uncertain), so they depend on the rule alone and are shared by every grammar with
     * the same rule, whatever it references. Set for TagDispatch rules, whose references
     * (the tag bodies, different in every request) start only after a whole trigger. */
    uint8_t *rule_opaque; /* 0, or XGR_OPAQUE_DISPATCH / XGR_OPAQUE_GROUP */
    /* 1: no other grammar has this rule, so closure keys stop at it (mask_cache.c rule_key):
     * a tag group, or a linked grammar's skeleton rule that references several tools
     * (Harmony's tag alternation: its closure is the request's whole tool set, tens of
     * KB to serialise on a first visit, for a key no later request repeats). */
    uint8_t *rule_unique;
    uint8_t *rule_leo;    /* per rule: may make Leo items (parse/earley.h xgr_leo_rules) */
    _Atomic(xgr_rule_key *) *rule_keys; /* per rule, built on first use */
    /* per rule, built on first use; for a unit REPEAT rule, its child's loop table
     * (walk.c xgr_walk_loop_child) */
    _Atomic(xgr_flat_table *) *flat_tables;
    /* per rule, built on first use (mask/region.c): for each of its states, the id of its
     * strongly connected component when that is a loop, else -1 */
    _Atomic(int32_t *) *rule_loops;
    uint8_t *scannable; /* n_states: XGR_SCAN_BYTE | XGR_SCAN_LOOP flags (stay.h), or 0 */
    /* Token-level terminals (common/token_marker.h): the ids whose markers occur in the
     * grammar, sorted and unique. When there are any, the vocabulary's tokens containing
     * byte 0xFF (vocab.h ff_bits) are never accepted as text. */
    int32_t *token_ids;
    int32_t n_token_ids;
    /* Follow-check memo shared by every entry build of this grammar (under the lock). */
    pthread_mutex_t fmemo_lock;
    xgr_follow_memo_slot *fmemo;
    size_t fmemo_cap, fmemo_len;
    _Atomic(xgr_follow_tables *) follow; /* built on the first follow check */
    /* uniqueItems (runtime/matcher.c check_unique_tokens): the token lists every matcher of
     * the grammar reads, built by the first fill that needs them (two vocabulary passes,
     * ~1-4 ms at 150k tokens: once per grammar, not once per request) */
    _Atomic(xgr_uq_tables *) uq;
    _Atomic(xgr_lazy_tables *) lazy; /* lazy rules' token lists, the same way */
    /* Storage for entries that live exactly as long as this grammar (entry.c
     * xgr_entry_grammar_block): chunks, newest first, under the lock. */
    pthread_mutex_t arena_lock;
    struct xgr_arena_chunk *arena;
    atomic_size_t memory;
};

/* One chunk of a grammar's entry storage. */
typedef struct xgr_arena_chunk {
    struct xgr_arena_chunk *next;
    size_t used, cap;
    max_align_t data[];
} xgr_arena_chunk;

#define XGR_SLOT_CHUNK 64

/* The entry of `slot` if built, else NULL. Thread-safe. */
static inline xgr_mask_entry *xgr_slot_load(const xgr_compiled *c, int32_t slot) {
    _Atomic(xgr_mask_entry *) *chunk =
        atomic_load_explicit(&c->entry_chunks[slot / XGR_SLOT_CHUNK], memory_order_acquire);
    return chunk ? atomic_load_explicit(&chunk[slot % XGR_SLOT_CHUNK], memory_order_acquire) : NULL;
}

/* The offset of edge e's first pair slot (see pair_first), or -1: a byte edge, a rule
 * without scannable states, or pair slots disabled. */
static inline int32_t xgr_pair_base(const xgr_compiled *c, int32_t e) {
    int32_t lo = 0, hi = c->n_pair_edges;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (c->pair_edges[mid] < e) lo = mid + 1;
        else hi = mid;
    }
    return lo < c->n_pair_edges && c->pair_edges[lo] == e ? c->pair_first[lo] : -1;
}

/* The child state s and caller state p of pair slot `slot` (>= n_states). */
void xgr_pair_slot(const xgr_compiled *c, int32_t slot, int32_t *state, int32_t *parent);

/* (sorted vocabulary position, pop depth) pairs, positions ascending */
typedef XGR_VEC(int32_t) xgr_pop_list;

#endif
