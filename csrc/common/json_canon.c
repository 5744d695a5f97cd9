/* The canonical text of a JSON document, as Python's
 * json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False) spells it, made in
 * one pass without building the document (the compile caches' key of a JSON schema,
 * compiler.py). The pass proves the result or gives up: anything it cannot spell exactly
 * like Python (NaN / Infinity, exponents, floats whose repr differs from their text, a lone
 * surrogate escape, duplicate object keys, integers of more than 640 digits, nesting over the
 * limit, anything json.loads refuses) is reported as unknown, and the caller takes the slow
 * path (json.loads + json.dumps). */
#include "json_canon.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

/* An integer longer than this may exceed Python's int_max_str_digits (640 is the least
 * value it can be set to), which would make json.loads refuse the text. */
#define CANON_MAX_INT_DIGITS 640

typedef struct {
    const char *p;
    size_t n;
} key_span;

typedef struct {
    const uint8_t *s;
    size_t len, i;
    char *out;
    size_t o;
    int numval; /* numbers by decimal value (xgr_json_canonical_value) */
} canon;

static void skip_ws(canon *c) {
    while (c->i < c->len) {
        uint8_t ch = c->s[c->i];
        if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r') break;
        c->i++;
    }
}

static int hex4(const uint8_t *s, uint32_t *v) {
    uint32_t x = 0;
    for (int k = 0; k < 4; k++) {
        uint8_t h = s[k];
        uint32_t d;
        if (h >= '0' && h <= '9') d = (uint32_t)(h - '0');
        else if (h >= 'a' && h <= 'f') d = (uint32_t)(h - 'a' + 10);
        else if (h >= 'A' && h <= 'F') d = (uint32_t)(h - 'A' + 10);
        else return 0;
        x = (x << 4) | d;
    }
    *v = x;
    return 1;
}

/* Appends code point cp as json.dumps(ensure_ascii=False) spells it inside a string. */
static void put_cp(canon *c, uint32_t cp) {
    static const char hexd[] = "0123456789abcdef";
    char *o = c->out + c->o;
    if (cp == '"' || cp == '\\') {
        o[0] = '\\', o[1] = (char)cp, c->o += 2;
    } else if (cp < 0x20) {
        char e = cp == '\b' ? 'b' : cp == '\f' ? 'f' : cp == '\n' ? 'n' : cp == '\r' ? 'r' : cp == '\t' ? 't' : 0;
        if (e) {
            o[0] = '\\', o[1] = e, c->o += 2;
        } else {
            memcpy(o, "\\u00", 4);
            o[4] = hexd[cp >> 4], o[5] = hexd[cp & 15], c->o += 6;
        }
    } else {
        c->o += (size_t)xgr_utf8_encode(cp, (uint8_t *)o);
    }
}

/* A string at c->i (its opening quote), copied in canonical form; 0 when unknown. The output
 * is never longer than the input: every escape is at least as long as what replaces it, and
 * raw characters (strictly valid UTF-8, no control characters) are copied. */
static int string(canon *c) {
    const uint8_t *s = c->s;
    size_t i = c->i + 1;
    c->out[c->o++] = '"';
    for (;;) {
        size_t run = i;
        while (i < c->len && s[i] >= 0x20 && s[i] < 0x80 && s[i] != '"' && s[i] != '\\') i++;
        memcpy(c->out + c->o, s + run, i - run);
        c->o += i - run;
        if (i >= c->len) return 0;
        uint8_t ch = s[i];
        if (ch == '"') break;
        if (ch < 0x20) return 0; /* json.loads (strict) refuses raw control characters */
        if (ch >= 0x80) {
            uint32_t cp;
            int k = xgr_utf8_decode(s + i, c->len - i, &cp);
            if (k == 0) return 0;
            memcpy(c->out + c->o, s + i, (size_t)k);
            c->o += (size_t)k, i += (size_t)k;
            continue;
        }
        /* a backslash */
        if (i + 1 >= c->len) return 0;
        uint8_t e = s[i + 1];
        uint32_t cp;
        switch (e) {
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            if (c->len - i < 6 || !hex4(s + i + 2, &cp)) return 0;
            if (cp >= 0xdc00 && cp <= 0xdfff) return 0; /* a lone low surrogate */
            if (cp >= 0xd800 && cp <= 0xdbff) {         /* must pair with a low surrogate */
                uint32_t lo;
                if (c->len - i < 12 || s[i + 6] != '\\' || s[i + 7] != 'u' || !hex4(s + i + 8, &lo)
                    || lo < 0xdc00 || lo > 0xdfff)
                    return 0;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                i += 6;
            }
            i += 4;
            break;
        default: return 0;
        }
        i += 2;
        put_cp(c, cp);
    }
    c->out[c->o++] = '"';
    c->i = i + 1;
    return 1;
}

/* A number at c->i; 0 when unknown. Integers are copied ("-0" becomes "0"); a fraction is
 * kept only when its text is exactly Python's repr of the float it reads as: no exponent,
 * at most 15 significant digits (so the text is the float's shortest round-trip form), a
 * decimal exponent within repr's fixed-point range (1e-4 <= |x| < 1e16, or zero), and no
 * trailing zero except in ".0". */
static int is_digit(uint8_t ch) { return ch >= '0' && ch <= '9'; }

/* A number as its decimal value: the significant digits D and the exponent X of D * 10^X,
 * spelled "D" or "DeX" (with '-' when negative and not zero): 1, 1.0, 10e-1 all give "1",
 * 100 and 1e2 "1e2". At most 2 * length + 22 bytes. */
static int number_value(canon *c) {
    const uint8_t *s = c->s;
    size_t i = c->i, n = c->len;
    int neg = 0;
    if (i < n && s[i] == '-') neg = 1, i++;
    if (i >= n || !is_digit(s[i])) return 0;
    size_t a = i;
    while (i < n && is_digit(s[i])) i++;
    size_t a_end = i, f = i, f_end = i;
    if (i < n && s[i] == '.') {
        f = ++i;
        while (i < n && is_digit(s[i])) i++;
        f_end = i;
        if (f_end == f) return 0;
    }
    int64_t ex = 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        int eneg = 0;
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) eneg = s[i++] == '-';
        if (i >= n || !is_digit(s[i])) return 0;
        while (i < n && is_digit(s[i])) {
            if (ex < 1000000000000000LL) ex = ex * 10 + (s[i] - '0');
            i++;
        }
        if (eneg) ex = -ex;
    }
    /* the digits: s[a .. a_end) then s[f .. f_end) */
    size_t ni = a_end - a, nf = f_end - f, total = ni + nf;
#define DIG(k) ((k) < ni ? s[a + (k)] : s[f + (k) - ni])
    size_t first = total, last = 0;
    for (size_t k = 0; k < total; k++)
        if (DIG(k) != '0') {
            if (first == total) first = k;
            last = k;
        }
    if (first == total) {
        c->out[c->o++] = '0';
    } else {
        if (neg) c->out[c->o++] = '-';
        for (size_t k = first; k <= last; k++) c->out[c->o++] = (char)DIG(k);
        int64_t x = ex - (int64_t)nf + (int64_t)(total - 1 - last);
        if (x) c->o += (size_t)snprintf(c->out + c->o, 24, "e%lld", (long long)x);
    }
#undef DIG
    c->i = i;
    return 1;
}

static int number(canon *c) {
    if (c->numval) return number_value(c);
    const uint8_t *s = c->s;
    size_t i = c->i, start = i;
    int neg = 0;
    if (s[i] == '-') neg = 1, i++;
    if (i >= c->len || s[i] < '0' || s[i] > '9') return 0; /* "-Infinity" or not JSON */
    size_t int_start = i;
    if (s[i] == '0') {
        i++;
    } else {
        while (i < c->len && s[i] >= '0' && s[i] <= '9') i++;
    }
    size_t int_digits = i - int_start;
    size_t frac_start = 0, frac_digits = 0;
    if (i + 1 < c->len && s[i] == '.' && s[i + 1] >= '0' && s[i + 1] <= '9') {
        frac_start = ++i;
        while (i < c->len && s[i] >= '0' && s[i] <= '9') i++;
        frac_digits = i - frac_start;
    }
    if (i < c->len && (s[i] == 'e' || s[i] == 'E')) return 0; /* a float spelled otherwise by repr */
    if (frac_digits == 0) {
        if (int_digits > CANON_MAX_INT_DIGITS) return 0;
        if (neg && int_digits == 1 && s[int_start] == '0') start++; /* -0 is the int 0 */
    } else {
        if (s[i - 1] == '0' && frac_digits > 1) return 0; /* repr drops trailing zeros */
        /* significant digits: from the first nonzero digit to the last one */
        size_t first = SIZE_MAX, last = 0, pos = 0, lead_frac_zeros = 0;
        for (size_t k = int_start; k < i; k++) {
            if (k == int_start + int_digits) continue; /* the point */
            if (s[k] != '0') {
                if (first == SIZE_MAX) first = pos;
                last = pos;
            }
            pos++;
        }
        if (first != SIZE_MAX) {
            if (last - first + 1 > 15) return 0;
            if (s[int_start] == '0') {
                while (lead_frac_zeros < frac_digits && s[frac_start + lead_frac_zeros] == '0')
                    lead_frac_zeros++;
                if (lead_frac_zeros > 3) return 0; /* below 1e-4: repr uses an exponent */
            } else if (int_digits > 16) {
                return 0; /* 1e16 and above: repr uses an exponent */
            }
        }
    }
    memcpy(c->out + c->o, s + start, i - start);
    c->o += i - start;
    c->i = i;
    return 1;
}

static int span_cmp(const void *a, const void *b) {
    const key_span *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    int r = memcmp(x->p, y->p, n);
    return r ? r : (x->n > y->n) - (x->n < y->n);
}

/* 1 when keys[0..n) (canonical spellings, so equal exactly when the decoded keys are) are
 * pairwise distinct; sorts them. */
static int distinct(key_span *keys, size_t n) {
    if (n < 2) return 1;
    if (n <= 8) {
        for (size_t a = 0; a < n; a++)
            for (size_t b = a + 1; b < n; b++)
                if (keys[a].n == keys[b].n && memcmp(keys[a].p, keys[b].p, keys[a].n) == 0) return 0;
        return 1;
    }
    qsort(keys, n, sizeof *keys, span_cmp);
    for (size_t a = 1; a < n; a++)
        if (span_cmp(&keys[a - 1], &keys[a]) == 0) return 0;
    return 1;
}

/* numval mode: the members of the object whose keys are keys[0 .. n) (in text order, the
 * last member running to c->o) rewritten in key order, and the spans moved with them, so
 * that objects equal as JSON values have one text. 0 on OOM. */
static int sort_members(canon *c, key_span *keys, size_t n) {
    if (n < 2) return 1;
    struct mem {
        key_span k;
        const char *m;
        size_t len;
    } *ms = malloc(n * sizeof *ms);
    size_t start = (size_t)(keys[0].p - c->out), end = c->o;
    char *tmp = malloc(end - start);
    if (!ms || !tmp) {
        free(ms);
        free(tmp);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        const char *e = i + 1 < n ? keys[i + 1].p - 1 : c->out + end; /* (before the ',') */
        ms[i] = (struct mem){keys[i], keys[i].p, (size_t)(e - keys[i].p)};
    }
    qsort(ms, n, sizeof *ms, span_cmp); /* (k is the first field) */
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (i) tmp[o++] = ',';
        memcpy(tmp + o, ms[i].m, ms[i].len);
        keys[i] = (key_span){c->out + start + o, ms[i].k.n};
        o += ms[i].len;
    }
    memcpy(c->out + start, tmp, o);
    free(ms);
    free(tmp);
    return 1;
}

typedef XGR_VEC(key_span) span_vec;
typedef XGR_VEC(size_t) size_vec;
typedef XGR_VEC(uint8_t) kind_vec;

/* The pass proper: 1 when proven (c->o is the length), 0 when unknown, -1 on OOM. */
static int run(canon *c, int32_t limit, span_vec *keys, size_vec *objs, kind_vec *kinds) {
    skip_ws(c);
    for (;;) {
        /* a value */
        if (c->i >= c->len) return 0;
        uint8_t ch = c->s[c->i];
        if (ch == '{' || ch == '[') {
            if (kinds->len >= (size_t)limit) return 0; /* deeper than the limit */
            if (XGR_VEC_PUSH(*kinds, ch)) return -1;
            c->out[c->o++] = (char)ch;
            c->i++;
            skip_ws(c);
            if (c->i < c->len && c->s[c->i] == (ch == '{' ? '}' : ']')) {
                c->out[c->o++] = (char)c->s[c->i++];
                kinds->len--;
            } else if (ch == '{') {
                if (XGR_VEC_PUSH(*objs, keys->len)) return -1;
                goto key;
            } else {
                continue;
            }
        } else if (ch == '"') {
            if (!string(c)) return 0;
        } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
            if (!number(c)) return 0;
        } else {
            static const char *const lits[] = {"true", "false", "null"};
            int ok = 0;
            for (int k = 0; k < 3 && !ok; k++) {
                size_t n = strlen(lits[k]);
                if (c->len - c->i >= n && memcmp(c->s + c->i, lits[k], n) == 0) {
                    memcpy(c->out + c->o, lits[k], n);
                    c->o += n, c->i += n, ok = 1;
                }
            }
            if (!ok) return 0; /* NaN, Infinity, or not JSON */
        }
        /* after a value: close containers, or go on to the next member */
        for (;;) {
            skip_ws(c);
            if (kinds->len == 0) return c->i == c->len;
            if (c->i >= c->len) return 0;
            uint8_t top = kinds->data[kinds->len - 1], next = c->s[c->i];
            if (next == ',') {
                c->out[c->o++] = ',';
                c->i++;
                skip_ws(c);
                if (top == '{') goto key;
                break; /* the next element */
            }
            if (next != (top == '{' ? '}' : ']')) return 0;
            if (top == '{') {
                size_t base = objs->data[--objs->len];
                if (c->numval && !sort_members(c, keys->data + base, keys->len - base)) return -1;
                if (!distinct(keys->data + base, keys->len - base)) return 0; /* json.loads keeps the last */
                keys->len = base;
            }
            c->out[c->o++] = (char)next;
            c->i++;
            kinds->len--;
        }
        continue;
    key:
        if (c->i >= c->len || c->s[c->i] != '"') return 0;
        {
            size_t at = c->o;
            if (!string(c)) return 0;
            key_span k = {c->out + at, c->o - at};
            if (XGR_VEC_PUSH(*keys, k)) return -1;
        }
        skip_ws(c);
        if (c->i >= c->len || c->s[c->i] != ':') return 0;
        c->out[c->o++] = ':';
        c->i++;
        skip_ws(c);
    }
}

static int canonical(const char *text, size_t len, int32_t limit, char *out, size_t *out_len,
                     int32_t *known, int numval) {
    if ((!text && len) || (!out && len) || !out_len || !known || limit < 0)
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_json_canonical: bad argument");
    *known = 0;
    *out_len = 0;
    canon c = {(const uint8_t *)text, len, 0, out, 0, numval};
    span_vec keys = {0};
    size_vec objs = {0};
    kind_vec kinds = {0};
    int r = len ? run(&c, limit, &keys, &objs, &kinds) : 0;
    XGR_VEC_FREE(keys);
    XGR_VEC_FREE(objs);
    XGR_VEC_FREE(kinds);
    if (r < 0) return xgr_fail(XGR_ERR_NOMEM, "xgr_json_canonical: out of memory");
    if (r > 0) {
        *known = 1;
        *out_len = c.o;
    }
    return XGR_OK;
}

int xgr_json_canonical(const char *text, size_t len, int32_t limit, char *out, size_t *out_len,
                       int32_t *known) {
    return canonical(text, len, limit, out, out_len, known, 0);
}

int xgr_json_canonical_value(const char *text, size_t len, int32_t limit, char *out,
                             size_t *out_len, int32_t *known) {
    return canonical(text, len, limit, out, out_len, known, 1);
}
