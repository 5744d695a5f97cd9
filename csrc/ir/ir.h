/* Grammar IR: rules whose bodies are expression trees stored in flat arrays.
 * Front ends (EBNF, regex, builtin JSON) build it; the compiler lowers it to per-rule
 * FSMs (lower/fsm.h); the printer turns it back into EBNF.
 *
 * Storage is data-oriented: every node is a fixed-size record; variable-size payloads
 * live in pools addressed by (offset, count):
 *   - kids:   int32 node ids (SEQ / ALT children)
 *   - bytes:  literal bytes (BYTES)
 *   - ranges: uint32 code-point pairs lo,hi inclusive (CLASS), sorted, disjoint
 * Ids are int32 indexes. Internal header. */
#ifndef XGR_IR_H
#define XGR_IR_H

#include <stdatomic.h>
#include <stdint.h>

#include "../common/util.h"

typedef enum {
    XGR_NODE_EMPTY = 0,  /* matches "" */
    XGR_NODE_BYTES = 1,  /* literal byte string: off/count into bytes pool (count >= 1) */
    XGR_NODE_CLASS = 2,  /* one UTF-8 code point in ranges[off .. off+2*count); `negated`
                          * means the complement within [0, 0x10FFFF] minus surrogates.
                          * Ranges are kept as written; the compiler normalises. */
    XGR_NODE_SEQ = 3,    /* kids[off .. off+count) in order */
    XGR_NODE_ALT = 4,    /* one of kids[off .. off+count) */
    XGR_NODE_REF = 5,    /* rule `a` */
    XGR_NODE_REPEAT = 6, /* child `a` repeated min..max times; max = -1 means unbounded.
                          * `*` = {0,-1}, `+` = {1,-1}, `?` = {0,1} */
    XGR_NODE_BYTE_CLASS = 7, /* one raw byte in byte ranges ranges[off .. off+2*count)
                              * (values 0..255); `negated` complements within 0..255.
                              * Printed as b[...] (and non-UTF-8 literals as b"..."). */
    XGR_NODE_TAG_DISPATCH = 8, /* TagDispatch(...) (upstream xgrammar's macro): free text in
                               * which triggers dispatch to rules. Only ever a whole rule body
                               * (never a child, never a lookahead). Payload in kids:
                               * kids[off + 2i], kids[off + 2i + 1] for i < count are trigger i
                               * (a BYTES node, count >= 1 bytes) and its rule id; then
                               * kids[off + 2*count + j] for j < min are the excluded strings
                               * (BYTES nodes). `a` = 1 when loop_after_dispatch, else 0.
                               * Semantics: compile/tag_dispatch.c. */
    XGR_NODE_SUBSTRING = 9 /* Substring("c1", ..., "cn") (upstream xgrammar's macro): any run
                            * of consecutive chunks c_i c_i+1 ... c_j, the empty run included;
                            * chunks are atomic byte strings. kids[off .. off+count) are the
                            * chunks in order, each a BYTES or EMPTY node (kept as written, so
                            * "" chunks and repeats print back). The EBNF parser only makes it
                            * a whole rule body (never a lookahead); the lowering accepts it
                            * anywhere. Semantics: compile/substring.c. */
} xgr_node_kind;

typedef struct {
    int32_t kind;    /* xgr_node_kind */
    int32_t a;       /* REF: rule id; REPEAT: child node id */
    int32_t off;     /* BYTES/CLASS/BYTE_CLASS/SEQ/ALT: payload offset */
    int32_t count;   /* payload count (CLASS: number of ranges) */
    int32_t min;     /* REPEAT */
    int32_t max;     /* REPEAT (-1 = unbounded) */
    int32_t negated; /* CLASS / BYTE_CLASS */
} xgr_node;

/* Rule attributes (`name[max_tokens=3, temperature=0.5] ::= ...`, upstream xgrammar
 * 0.2.8's): budgets per occurrence of the rule, its sampling temperature, laziness and
 * a capture label. Semantics: parse/attrs.c. */
typedef struct {
    int32_t max_tokens;  /* token budget, -1: none */
    int32_t max_chars;   /* code-point budget, -1: none */
    int32_t capture_off; /* capture label (into names pool), -1: none */
    float temperature;   /* when has_temperature: finite, >= 0 */
    uint8_t has_temperature;
    uint8_t lazy;        /* ends at the first opportunity */
    /* Lark suffix= / stop= markers (upstream's capture_hidden_{suffix,stop}_bytes=N): a
     * completion that went through the marker ends with its last hidden_bytes bytes. The
     * rule's own
     * capture leaves them out, a stop marker is also left out of every enclosing capture,
     * and stop_capture (a label, -1: none) records them. With hidden_before, the marker
     * is the hidden_bytes bytes right before the occurrence instead (a Lark dynamic
     * dispatch: the trigger, read by the TagDispatch before the rule's text).
     * parse/captures.c. */
    uint8_t hidden_kind;      /* 0: none, XGR_HIDDEN_SUFFIX, XGR_HIDDEN_STOP */
    uint8_t hidden_before;
    int32_t hidden_bytes;     /* marker length in bytes, when hidden_kind */
    /* A variable-length marker (upstream's capture_hidden_{body,marker}_rule_id): rules
     * matching the body and the marker alone; the marker starts at the first split of the
     * occurrence into body and marker (hidden_bytes is then unused). -1: none. */
    int32_t hidden_body, hidden_marker;
    /* (while an EBNF text is parsed, a rule named in the text: -2 - its name's offset in
     * the names pool; the parser resolves it) */
    int32_t stop_capture_off; /* stop_capture label (into names pool), -1: none */
    /* Set by the lowering only (never in the IR, never printed): the forced close of a
     * suffix / stop rule with a budget whose body is not free text (upstream closes it
     * without its marker where the body can end once the budget is spent). The rule's
     * start state then has a reference edge to this output rule (the body alone, minus
     * "") leading to an edgeless state that is not final but counts as an end once the
     * occurrence's budget is spent (parse/attrs.h xgr_forced_state). -1: none. */
    int32_t forced_body;
    /* Budget in decoded JSON-string characters, -1: none (`max_json_chars=N`): like
     * max_chars, but a JSON escape counts as the one character it decodes to and a
     * surrogate-pair escape (`\uD83D\uDE00`) as one code point (parse/attrs.h). Meant for
     * the body of a JSON string (between the quotes); a hard bound, no forced close. */
    int32_t max_json_chars;
    /* JSON Schema uniqueItems at run time (xgrammar2's own; parse/unique.h): XGR_UNIQUE_ITEM
     * (`unique`) marks an array element's rule, whose occurrence may complete only with a
     * JSON value (compared canonically) that no earlier element of the same array has;
     * XGR_UNIQUE_SCOPE (`unique_scope`) marks the array's rule, the nearest of which above
     * an element is its array; XGR_UNIQUE_SEARCH_SCOPE (`unique_search_scope`) too, for an
     * array whose elements' values can run out before they complete: the matcher then also
     * refuses a token after which every completion of the element is a duplicate
     * (parse/unique_search.h). 0: none. */
    uint8_t unique;
} xgr_rule_attrs;

enum { XGR_UNIQUE_ITEM = 1, XGR_UNIQUE_SCOPE = 2, XGR_UNIQUE_SEARCH_SCOPE = 3 };

enum { XGR_HIDDEN_SUFFIX = 1, XGR_HIDDEN_STOP = 2 };

typedef struct {
    int32_t name_off;  /* into names pool, NUL-terminated */
    int32_t body;      /* node id, -1 while only declared */
    int32_t lookahead; /* node id of `(= ...)` assertion, -1 if none */
    xgr_rule_attrs attrs;
} xgr_rule;

/* No attributes. */
static inline xgr_rule_attrs xgr_attrs_none(void) {
    xgr_rule_attrs a = {-1, -1, -1, 0.0f, 0, 0, 0, 0, 0, -1, -1, -1, -1, -1, 0};
    return a;
}
static inline int xgr_attrs_any(const xgr_rule_attrs *a) {
    return a->max_tokens >= 0 || a->max_chars >= 0 || a->max_json_chars >= 0 ||
           a->capture_off >= 0 ||
           a->has_temperature || a->lazy || a->hidden_kind || a->stop_capture_off >= 0 ||
           a->unique;
}

struct xgr_grammar {
    atomic_int refcount;
    XGR_VEC(xgr_node) nodes;
    XGR_VEC(xgr_rule) rules;
    XGR_VEC(int32_t) kids;
    XGR_VEC(uint8_t) bytes;
    XGR_VEC(uint32_t) ranges;
    XGR_VEC(char) names;
    int32_t root; /* rule id */
    /* Open-addressing index name -> rule id (-1 = empty slot); capacity a power of 2. */
    int32_t *name_index;
    size_t name_index_cap;
};

/* ---- builder (used by front ends). All return a node/rule id >= 0, or -1 on OOM
 * (message already set). The grammar must come from xgr_ir_new. ---- */
xgr_grammar *xgr_ir_new(void);
void xgr_ir_free(xgr_grammar *g);
/* Bytes held by g's arrays (their capacity), for memory accounting. */
size_t xgr_ir_memory(const xgr_grammar *g);
int32_t xgr_ir_empty(xgr_grammar *g);
int32_t xgr_ir_bytes(xgr_grammar *g, const uint8_t *s, size_t n); /* n == 0 -> EMPTY */
int32_t xgr_ir_class(xgr_grammar *g, const uint32_t *ranges, size_t n_ranges, int negated);
int32_t xgr_ir_byte_class(xgr_grammar *g, const uint32_t *ranges, size_t n_ranges,
                          int negated);
int32_t xgr_ir_seq(xgr_grammar *g, const int32_t *kids, size_t n);
int32_t xgr_ir_alt(xgr_grammar *g, const int32_t *kids, size_t n);
int32_t xgr_ir_ref(xgr_grammar *g, int32_t rule);
int32_t xgr_ir_repeat(xgr_grammar *g, int32_t child, int32_t min, int32_t max);
/* A TAG_DISPATCH node: trigger i is trig[i][0 .. trig_len[i]) and dispatches to rule
 * trig_rule[i]; excl[j][0 .. excl_len[j]) are the excluded strings. Strings must be
 * non-empty and rule ids valid (XGR_ERR_INVALID_ARG message otherwise; -1 returned).
 * Use it only as a rule body. */
int32_t xgr_ir_tag_dispatch(xgr_grammar *g, const uint8_t *const *trig, const size_t *trig_len,
                            const int32_t *trig_rule, size_t n_trig,
                            const uint8_t *const *excl, const size_t *excl_len, size_t n_excl,
                            int loop_after_dispatch);
/* A SUBSTRING node over chunks chunk[i][0 .. chunk_len[i]) (empty chunks allowed; n may be
 * 0, which matches only ""). */
int32_t xgr_ir_substring(xgr_grammar *g, const uint8_t *const *chunk, const size_t *chunk_len,
                         size_t n);
/* Declares (body = -1) or finds a rule by name. */
int32_t xgr_ir_rule(xgr_grammar *g, const char *name, size_t name_len);
int32_t xgr_ir_find_rule(const xgr_grammar *g, const char *name, size_t name_len);
/* A fresh rule whose name starts with `base` and is unused (base, base_1, base_2, ...). */
int32_t xgr_ir_fresh_rule(xgr_grammar *g, const char *base);
static inline const char *xgr_ir_rule_name(const xgr_grammar *g, int32_t r) {
    return g->names.data + g->rules.data[r].name_off;
}
/* Appends NUL-terminated s[0..n) to g's names pool; its offset, or -1 (OOM, message set). */
int32_t xgr_ir_add_name(xgr_grammar *g, const char *s, size_t n);
/* Sets dst's rule dr's attributes to a copy of src's rule sr's (capture label copied into
 * dst's pool); XGR_OK or XGR_ERR_NOMEM. */
int xgr_ir_copy_attrs(xgr_grammar *dst, int32_t dr, const xgr_grammar *src, int32_t sr);
/* Does any rule of g carry attributes? */
int xgr_ir_has_attrs(const xgr_grammar *g);

/* Copies every rule of `src` into `dst`, renaming to avoid clashes; returns the id in
 * dst of src's root, or -1 on OOM. */
int32_t xgr_ir_import(xgr_grammar *dst, const xgr_grammar *src);

/* Rewrites applied while copying (xgr_ir_copy_node); a NULL hook copies as is. */
typedef struct {
    void *ctx;
    /* The node for literal s[0..n) in dst (-1 on failure, message set). */
    int32_t (*literal)(void *ctx, xgr_grammar *dst, const uint8_t *s, size_t n);
    /* Appends to (buf, spans) every string TagDispatch trigger s[0..n) stands for
     * (each triggers the same rule); XGR_OK or an error code. */
    int (*trigger)(void *ctx, const uint8_t *s, size_t n, xgr_keybuf *buf, xgr_spanvec *spans);
} xgr_ir_rewrite;
/* Copies node n of src (and its subtree) into dst; rule ids go through rmap; rw may be
 * NULL. Returns the new node id, or -1 (message set). */
int32_t xgr_ir_copy_node(xgr_grammar *dst, const xgr_grammar *src, int32_t n, const int32_t *rmap,
                         const xgr_ir_rewrite *rw, int depth);
/* Checks that every rule has a body and root is set; XGR_ERR_SEMANTIC otherwise. */
int xgr_ir_validate(const xgr_grammar *g);

/* Prints canonical EBNF (ir/print.c). *out is NUL-terminated, caller frees. */
int xgr_ir_print(const xgr_grammar *g, char **out, size_t *out_len);

#endif
