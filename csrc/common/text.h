/* UTF-8 coding and a growable text buffer: shared by the front ends, the IR printer and
 * the lowering (internal header; defined in text.c). */
#ifndef XGR_COMMON_TEXT_H
#define XGR_COMMON_TEXT_H

#include "util.h"

/* Strict UTF-8 decoding of one code point from s[0..n) (n >= 1): rejects overlong
 * forms, surrogates and values above U+10FFFF. Returns the sequence length (1..4) and
 * stores the code point, or 0 when the bytes are not valid UTF-8. */
int xgr_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp);
/* Writes the UTF-8 form of cp (<= 0x10FFFF, surrogates allowed: the caller checks) to
 * out[0..4) and returns its length. */
int xgr_utf8_encode(uint32_t cp, uint8_t *out);
/* 1 when s[0..n) is entirely valid UTF-8. */
int xgr_utf8_valid(const uint8_t *s, size_t n);

/* A growable byte buffer for building text. */
typedef XGR_VEC(char) xgr_strbuf;
int xgr_sb_put(xgr_strbuf *b, const char *s, size_t n);
int xgr_sb_puts(xgr_strbuf *b, const char *s);
int xgr_sb_printf(xgr_strbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
