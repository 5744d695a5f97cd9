/* Private to the EBNF front end: the parser state shared by ebnf.c (lexing of literals,
 * expressions and rules) and ebnf_macros.c (the Regex / Substring / TagDispatch / Token
 * macro calls), and the few helpers both use. Internal header. */
#ifndef XGR_FRONT_EBNF_INTERNAL_H
#define XGR_FRONT_EBNF_INTERNAL_H

#include "front.h"

typedef XGR_VEC(size_t) szvec;

typedef struct {
    const uint8_t *s;
    size_t n, pos;
    xgr_grammar *g;
    int depth;
    i32vec stack;  /* children of the SEQ / ALT nodes being built, shared by all levels */
    u8vec buf;     /* bytes of the literal being lexed */
    u32vec ranges; /* ranges of the class being lexed */
    szvec ref_pos; /* per rule: offset of its first reference + 1 (0: none) */
    szvec ref_td;  /* per rule: when that first reference is a TagDispatch pair's rule, its
                    * own offset + 1 (ref_pos then holds the macro's '(', where upstream
                    * reports an undefined rule); else 0 */
    szvec def_pos; /* per rule: offset of its definition + 1 (0: not defined yet) */
    int in_lookahead; /* parsing a `(= ...)` assertion, where TagDispatch is not allowed */
} ebnf;

/* ---- ebnf.c: errors and lexing helpers ----------------------------------------------- */

/* Errors at byte offset pos, through the front ends' one formatter (diag.h): a lexing
 * error (literals, escapes, classes, a misplaced '::=') reads "EBNF lexer error at line L,
 * column C: ...", any other "EBNF parser error at ...", as upstream xgrammar words them. */
XGR_NOINLINE int xgr_ebnf_lerr(const ebnf *p, int code, size_t pos, const char *fmt, ...)
    XGR_PRINTF(4, 5);
XGR_NOINLINE int xgr_ebnf_perr(const ebnf *p, int code, size_t pos, const char *fmt, ...)
    XGR_PRINTF(4, 5);
/* What the parser found at pos ("'x'", "end of input", ...), written to out. */
XGR_NOINLINE const char *xgr_ebnf_found(const ebnf *p, size_t pos, char *out, size_t cap);
/* "expected <what>, found <...>" at pos. */
XGR_NOINLINE int xgr_ebnf_expected(const ebnf *p, size_t pos, const char *what);
int xgr_ebnf_is_name_start(int c);
int xgr_ebnf_is_name_char(int c);
/* Past whitespace and # comments from i. */
size_t xgr_ebnf_skip_ws_at(const ebnf *p, size_t i);
void xgr_ebnf_skip_ws(ebnf *p);
size_t xgr_ebnf_name_end(const ebnf *p, size_t i);
/* `name ::=` (or `name[attrs] ::=`) starts at i. */
int xgr_ebnf_at_rule_start(const ebnf *p, size_t i);
/* Grows ref_pos / def_pos to the grammar's rule count. */
int xgr_ebnf_track_rules(ebnf *p);
/* Lexes "..." (or b"..." when bytes) at p->pos into p->buf. */
int xgr_ebnf_lex_string(ebnf *p, int bytes);

/* ---- ebnf_macros.c: macro calls --------------------------------------------------------- */

/* Regex(...): start is where "Regex" begins, p->pos just after its '('. */
XGR_NOINLINE int xgr_ebnf_macro_regex(ebnf *p, size_t start, int32_t *node);
/* Substring(...) / TagDispatch(...): start is where the name begins, p->pos at the '('. */
XGR_NOINLINE int xgr_ebnf_macro_substring(ebnf *p, size_t start, int32_t *node);
XGR_NOINLINE int xgr_ebnf_macro_tag_dispatch(ebnf *p, size_t start, int32_t *node);
/* Moves each TagDispatch / Substring node of rule `rule` (node ids from `first` on) that is
 * not its whole body `body` into a fresh rule, referenced in its place. */
int xgr_ebnf_macro_lift(ebnf *p, int32_t rule, int32_t body, size_t first);
/* `Token` followed by `(` at `at`. */
int xgr_ebnf_at_token_macro(const ebnf *p, size_t at);
/* The ids of `Token(...)` at p->pos, as token markers in p->buf; *count gets how many. */
int xgr_ebnf_lex_token_ids(ebnf *p, int32_t *count);
/* ExcludeToken(...) at `start` (its name); TokenTagDispatch(...) with p->pos at its '('
 * (ebnf_tokens.c). */
XGR_NOINLINE int xgr_ebnf_macro_exclude_token(ebnf *p, size_t start, int32_t *node);
XGR_NOINLINE int xgr_ebnf_macro_token_tag_dispatch(ebnf *p, size_t start, int32_t *node);

#endif
