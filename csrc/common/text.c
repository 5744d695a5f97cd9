/* UTF-8 and text-buffer helpers shared by the front ends, the printer and the lowering. */
#include "text.h"

#include <stdarg.h>
#include <stdio.h>

int xgr_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int len;
    uint32_t v, min;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2, v = c & 0x1f, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3, v = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < (size_t)len) return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
    *cp = v;
    return len;
}

int xgr_utf8_encode(uint32_t cp, uint8_t *out) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xc0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xe0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (uint8_t)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (uint8_t)(0xf0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (uint8_t)(0x80 | (cp & 0x3f));
    return 4;
}

int xgr_utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        int k = xgr_utf8_decode(s + i, n - i, &cp);
        if (!k) return 0;
        i += (size_t)k;
    }
    return 1;
}

int xgr_sb_put(xgr_strbuf *b, const char *s, size_t n) {
    if (XGR_VEC_RESERVE(*b, b->len + n + 1)) return XGR_ERR_NOMEM;
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return XGR_OK;
}

int xgr_sb_puts(xgr_strbuf *b, const char *s) { return xgr_sb_put(b, s, strlen(s)); }

int xgr_sb_printf(xgr_strbuf *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= sizeof tmp)
        return xgr_fail(XGR_ERR_INTERNAL, "formatted text too long");
    return xgr_sb_put(b, tmp, (size_t)w);
}

int xgr_json_nesting_depth(const char *text, size_t len, int32_t limit, int32_t *depth) {
    if ((!text && len) || !depth || limit < 0)
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_json_nesting_depth: bad argument");
    int32_t d = 0, best = 0;
    int in_string = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = text[i];
        if (in_string) {
            if (ch == '\\') i++; /* the escaped character cannot end the string */
            else if (ch == '"') in_string = 0;
        } else if (ch == '"') {
            in_string = 1;
        } else if (ch == '[' || ch == '{') {
            if (++d > best && (best = d) > limit) break;
        } else if ((ch == ']' || ch == '}') && d > 0) {
            d--;
        }
    }
    *depth = best;
    return XGR_OK;
}
