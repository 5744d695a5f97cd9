/* Internal helpers shared by the grammar front ends (EBNF, regex, builtin JSON) and the
 * IR printer. Internal header.
 *
 * Text conventions shared by the parser and the printer (csrc/ir/print.c):
 *   - "..." strings and [...] classes denote Unicode code points; `\xNN` inside them is
 *     the code point U+00NN (as in upstream xgrammar), so "\xe9" is the two UTF-8 bytes
 *     C3 A9.
 *   - Raw bytes need their own syntax because the IR can hold byte strings that are not
 *     valid UTF-8 (BYTES) and byte classes (BYTE_CLASS). An extension marks them with a
 *     `b` written directly before the quote or bracket: b"\xff\x80" is the two bytes
 *     FF 80 and b[\x80-\xbf] is one byte in 80..BF. Inside these, `\xNN` is a raw byte;
 *     other characters and escapes are UTF-8 encoded (b-strings) or must be ASCII
 *     (b-classes). A rule named `b` followed by a string must therefore be separated by
 *     whitespace (`b "x"`), which is how the printer writes it.
 *   - Surrogate code points cannot be UTF-8 encoded. In strings `\uD83D\uDE00` pairs
 *     combine into one code point and a lone surrogate is an error; in classes pairs
 *     written with \u combine too, while `\U0000D800` stays a lone surrogate endpoint
 *     (the printer uses that form so printing is lossless). */
#ifndef XGR_FRONT_H
#define XGR_FRONT_H

#include "../common/text.h"
#include "../ir/ir.h"
#include "diag.h" /* the error formatter, XGR_NOINLINE */

typedef XGR_VEC(int32_t) i32vec;
typedef XGR_VEC(uint8_t) u8vec;
typedef XGR_VEC(uint32_t) u32vec;

/* Nesting limit of every recursive-descent parser (groups, alternations): deeper input
 * gets XGR_ERR_LIMIT instead of exhausting the stack. */
#define XGR_FRONT_MAX_DEPTH 1000
/* Largest repetition bound accepted by {m,n} in EBNF and regex. */
#define XGR_FRONT_MAX_REPEAT 1000000000L

/* The builders in ir.h report failures by returning -1 with the message and status set
 * through xgr_fail; this returns that status (xgr_last_status). */
int xgr_front_ir_status(void);

/* Options of the regex front end (csrc/front/regex.c has the details); the dialects
 * XGR_REGEX_* are in xgr2.h. xgr_regex_to_node_opts takes the two upstream dialects. */
typedef struct {
    int dialect;     /* XGR_REGEX_CONVERTER or XGR_REGEX_MACRO (not ECMASCRIPT) */
    int json_string; /* Regex(..., json_string=true): no character match may produce '"',
                      * '\\' or U+0000..U+001F (the pattern runs inside a JSON string) */
    int has_flags;   /* Regex(..., flags="..."): '.' excludes \n unless dot_all */
    int icase;       /* flag i: ASCII letters match either case */
    int dot_all;     /* flag s */
} xgr_regex_opts;

/* Compiles a regex (anchored, whole-input semantics) into nodes of `g`; *out_node is the
 * root node of the expression. Errors read "regex error at line L, column C: ..." with
 * the position within `src` (diag.h). opts may be
 * NULL (the converter dialect, no options); xgr_regex_to_node is that case. */
int xgr_regex_to_node_opts(xgr_grammar *g, const char *src, size_t len,
                           const xgr_regex_opts *opts, int32_t *out_node);
int xgr_regex_to_node(xgr_grammar *g, const char *src, size_t len, int32_t *out_node);

/* A flat regex tree under construction (csrc/front/regex_ast.c; the layout is
 * xgr_regex_ast's in xgr2.h). The adders return the new node id, or -1 after xgr_fail. */
typedef struct {
    i32vec nodes, data;
} xgr_rx_builder;
int32_t xgr_rx_add(xgr_rx_builder *b, int kind, int32_t a, int32_t bb, int32_t c);
/* A SET node: n ranges (lo, hi pairs), np property codes, complemented when neg. */
int32_t xgr_rx_add_set(xgr_rx_builder *b, const uint32_t *ranges, size_t n,
                       const uint32_t *props, size_t np, int neg);
/* A CAT or ALT node over n children. */
int32_t xgr_rx_add_list(xgr_rx_builder *b, int kind, const int32_t *kids, size_t n);
/* Moves the builder's arrays into a new xgr_regex_ast (the builder is left empty). */
int xgr_rx_finish(xgr_rx_builder *b, int32_t root, xgr_regex_ast **out);
void xgr_rx_builder_free(xgr_rx_builder *b);

#endif
