/* uniqueItems over elements whose values can run out (parse/unique_search.c).
 *
 * parse/unique.h refuses an element's completion when an earlier element of its array has
 * the same value. That keeps masks exact only where every prefix of an element that is not
 * complete still has infinitely many values ahead (a string without maxLength). An object
 * of enums, a string with a pattern or a maxLength, a bounded integer can run out: after
 * `{"kind":"a","n":` with {"kind":"a","n":1} already in the array and n's only value 1,
 * every completion is a duplicate, so the token that led there must be refused although
 * the grammar allows it. The converter marks such arrays `unique_search_scope` (ir.h
 * XGR_UNIQUE_SEARCH_SCOPE); for them the matcher asks, of each token that leaves the
 * element consistent with an earlier element (its text so far can still become that
 * value), whether some completion gives a value no earlier element has: a depth-first
 * search over the parser's bytes that follows the earlier values and stops at the first
 * byte that departs from all of them (xgr_uqs_search).
 *
 * Consistency is judged on the JSON texts (xgr_uqs_risk): objects by key, whatever the
 * order; strings by decoded character (escapes, surrogate pairs, a partial escape by its
 * hex digits); numbers by canonical text once they end, and a number that has not ended is
 * consistent with every number. The judgement errs only towards "consistent" (which costs
 * a search, never a wrong verdict) except where noted in the .c file. Internal header. */
#ifndef XGR_PARSE_UNIQUE_SEARCH_H
#define XGR_PARSE_UNIQUE_SEARCH_H

#include "earley.h"

/* A value of an earlier element: its text in the parser's history (not necessarily
 * canonical). */
typedef struct {
    const uint8_t *s;
    size_t n;
} xgr_uqs_val;

/* An earlier value an element's text is consistent with. */
typedef struct {
    size_t val;  /* index into vals */
    size_t vpos; /* where the element's text ends inside one of the value's strings, the
                  * offset in the value's text of the next character; SIZE_MAX: elsewhere */
} xgr_uqs_cons;

/* One open search scope: its earlier values vals[v0 .. v0 + nv), the history offset where
 * its element being written starts, the lexical state at the element text's end (nesting,
 * inside a string, after a backslash), and the earlier values that text is consistent with
 * (cons[c0 .. c0 + nc): a token can only keep or lose them). */
typedef struct {
    size_t v0, nv, estart, c0, nc;
    int32_t depth;
    uint8_t in_str, esc;
} xgr_uqs_frame;

/* One object of an earlier value, indexed (unique_search.c `members`): offsets relative to
 * its '{'. */
#define XGR_UQS_OMEMO_MEMBERS 64
typedef struct {
    const uint8_t *at; /* its '{' in the parser's history */
    uint32_t gen;      /* the fill it was indexed in (0: empty) */
    int32_t nm;        /* members, -1 over XGR_UQS_OMEMO_MEMBERS */
    uint32_t vend;     /* after its '}' */
    uint32_t keys[XGR_UQS_OMEMO_MEMBERS], vals[XGR_UQS_OMEMO_MEMBERS];
} xgr_uqs_members;

/* Earlier values' objects indexed for one fill: a direct-mapped table by address, valid
 * for the generation set by xgr_uqs_prepare and for objects ending before `stable`. */
#define XGR_UQS_OMEMO_SLOTS 32
typedef struct {
    xgr_uqs_members *slots; /* XGR_UQS_OMEMO_SLOTS, made at the first prepare */
    uint32_t gen;
    const uint8_t *stable;
} xgr_uqs_omemo;

/* Scratch for the checks, owned by a matcher and reused (zero-initialised; xgr_uqs_free).
 * The values point into the parser's history, whose room xgr_uqs_prepare reserves so that
 * the steps of a token and of a search never move it. */
typedef XGR_VEC(xgr_uqs_val) xgr_uqs_vals;
typedef struct {
    XGR_VEC(int32_t) scopes;
    XGR_VEC(xgr_uqs_frame) frames;
    xgr_uqs_vals vals;
    XGR_VEC(xgr_uqs_cons) cons;
    XGR_VEC(xgr_item) queue;
    xgr_uqs_omemo omemo;
    int all; /* the scopes looked for: every uniqueItems array, or only the searched ones */
} xgr_uqs;

/* Finds the `unique_search_scope` occurrences open at the parser's last row (every one,
 * nested ones too; with `all`, the `unique_scope` ones too) and reads their arrays from the
 * history; reserves room in the history for `room` more bytes plus a search. Returns 1 when
 * some scope is open, 0 when none, below 0 an error status (no memory). */
int xgr_uqs_prepare(xgr_uqs *u, xgr_parser *p, size_t room, int all);

/* After xgr_uqs_prepare, for the history plus the bytes x[0 .. xn) (xn <= room; not fed to
 * the parser): -1 when an element x completes equals an earlier element of its array, 1
 * when some element being written may still become an earlier value of its array, 0 when
 * neither. Only the scopes open before x are looked at: x must not complete an element of
 * an array it opens (a token without an element's end byte cannot). */
int xgr_uqs_text_risk(xgr_uqs *u, xgr_parser *p, const uint8_t *x, size_t xn);

/* From the parser's last row (reached within the room xgr_uqs_prepare reserved): is there a
 * completion after which no open scope's element being written can still become an earlier
 * value of its array (found by a depth-first search over the parser's bytes that follows the
 * earlier values and stops where all of them are left behind)? Steps the parser and
 * truncates its rows back. *budget counts parser steps; when it runs out, or past
 * XGR_UQS_MAX_DEPTH bytes, the answer is 1 (unknown counts as yes). Returns 1 / 0, or below
 * 0 an error status. */
#define XGR_UQS_MAX_DEPTH 192
int xgr_uqs_search(xgr_uqs *u, xgr_parser *p, int64_t *budget);

void xgr_uqs_free(xgr_uqs *u);

#endif
