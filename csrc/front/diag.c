/* The front ends' one error formatter (diag.h): "<what> error at line L, column C: ...". */
#include "diag.h"

#include <stdio.h>

#include "../common/text.h"

void xgr_diag_line_col(const uint8_t *s, size_t n, size_t pos, size_t *line, size_t *col) {
    size_t l = 1, c = 1;
    if (pos > n) pos = n;
    for (size_t i = 0; i < pos; i++) {
        if (s[i] == '\n') {
            l++;
            c = 1;
        } else if ((s[i] & 0xc0) != 0x80) {
            c++; /* columns count code points, not bytes */
        }
    }
    *line = l;
    *col = c;
}

XGR_NOINLINE int xgr_diag_vfail(int code, const char *what, const uint8_t *s, size_t n,
                                size_t pos, const char *fmt, va_list ap) {
    char msg[900];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t line, col;
    xgr_diag_line_col(s, n, pos, &line, &col);
    return xgr_fail(code, "%s error at line %zu, column %zu: %s", what, line, col, msg);
}

XGR_NOINLINE int xgr_diag_fail(int code, const char *what, const uint8_t *s, size_t n,
                               size_t pos, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = xgr_diag_vfail(code, what, s, n, pos, fmt, ap);
    va_end(ap);
    return rc;
}

const char *xgr_diag_found(const uint8_t *s, size_t n, size_t pos, char *out, size_t cap) {
    if (pos >= n) return "end of input";
    uint8_t c = s[pos];
    uint32_t cp;
    int k;
    if (c == '\n') return "end of line";
    if (c >= 0x20 && c < 0x7f) {
        snprintf(out, cap, "'%c'", (char)c);
    } else if (c >= 0x80 && (k = xgr_utf8_decode(s + pos, n - pos, &cp)) > 0) {
        snprintf(out, cap, "'%.*s'", k, (const char *)s + pos);
    } else {
        snprintf(out, cap, "byte 0x%02x", (unsigned)c);
    }
    return out;
}

const char *xgr_diag_quote(const uint8_t *s, size_t n, char *out, size_t cap) {
    size_t o = 0;
    if (cap < 8) {
        if (cap) out[0] = '\0';
        return out;
    }
    for (size_t i = 0; i < n; i++) {
        if (o + 8 >= cap) { /* room for "\xNN" or "..." and the NUL */
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (s[i] >= 0x20 && s[i] < 0x7f) {
            out[o++] = (char)s[i];
        } else {
            snprintf(out + o, cap - o, "\\x%02x", (unsigned)s[i]);
            o += 4;
        }
    }
    out[o] = '\0';
    return out;
}
