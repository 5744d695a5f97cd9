/* Source diagnostics shared by the front ends (EBNF, regex): the one error formatter.
 * Internal header; defined in diag.c.
 *
 * Every front-end error message reads "<what> error at line L, column C: <message>"
 * ("EBNF lexer", "EBNF parser", "regex"), lines counted from 1 at '\n', columns counted
 * in code points from 1. The status code travels with the message: the formatter sets
 * both through xgr_fail, so xgr_last_status() (and the Python layer's exception class)
 * never depends on the text. */
#ifndef XGR_FRONT_DIAG_H
#define XGR_FRONT_DIAG_H

#include <stdarg.h>

#include "../common/util.h"

/* Keeps a cold path (an error report) out of the caller's code. */
#if defined(__GNUC__)
#define XGR_NOINLINE __attribute__((noinline))
#define XGR_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define XGR_NOINLINE
#define XGR_PRINTF(f, a)
#endif

/* 1-based line and column of byte offset pos in s[0..n) (pos > n counts as n). */
void xgr_diag_line_col(const uint8_t *s, size_t n, size_t pos, size_t *line, size_t *col);

/* Sets the calling thread's error to "<what> error at line L, column C: <message>" for
 * byte offset pos of s[0..n), with status `code`, and returns `code`. */
XGR_NOINLINE int xgr_diag_fail(int code, const char *what, const uint8_t *s, size_t n,
                               size_t pos, const char *fmt, ...) XGR_PRINTF(6, 7);
XGR_NOINLINE int xgr_diag_vfail(int code, const char *what, const uint8_t *s, size_t n,
                                size_t pos, const char *fmt, va_list ap) XGR_PRINTF(6, 0);

/* What a parser found at pos, for "found X" / "but got X" phrases: "'x'" (a printable
 * character or a valid UTF-8 sequence, quoted), "end of input", "end of line" or
 * "byte 0xNN". Returns out, or a static string. */
const char *xgr_diag_found(const uint8_t *s, size_t n, size_t pos, char *out, size_t cap);

/* s[0..n) for a message: printable ASCII as is, other bytes as \xNN; cut with "..." at
 * about cap bytes. Returns out. */
const char *xgr_diag_quote(const uint8_t *s, size_t n, char *out, size_t cap);

#endif
