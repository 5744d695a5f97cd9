/* Regex front end: an ECMAScript-flavoured regex (the dialect of JSON Schema "pattern")
 * compiled into IR nodes.
 *
 * Semantics and choices:
 *   - The whole output must match (anchored). `^` is accepted where nothing can have been
 *     consumed yet and `$` where nothing more can follow (end of the pattern, of an
 *     alternative or of a group that itself ends the pattern); both are then no-ops.
 *     Anchors elsewhere, or inside a repeated group, are errors rather than silently
 *     changing the language. Callers wanting search semantics wrap the pattern in .* .
 *   - Literals are code points (the pattern is UTF-8); consecutive literals merge into
 *     one BYTES node.
 *   - `.` is any code point, \n included, as upstream xgrammar's regex (and EBNF
 *     Regex(...)) converter has it. JSON Schema "pattern" does not come here: its
 *     ECMAScript `.` (no \n \r U+2028 U+2029) is json_schema/regex.py's.
 *   - \d \w are ASCII ([0-9], [0-9A-Za-z_]); \s is ECMAScript's WhiteSpace and
 *     LineTerminator set (\t \n \v \f \r space U+00A0 U+1680 U+2000-U+200A U+2028
 *     U+2029 U+202F U+205F U+3000 U+FEFF). Their negations complement within Unicode.
 *   - Lazy quantifiers (*? +? ?? {m,n}?) match the same language as greedy ones.
 *   - Not supported (XGR_ERR_SYNTAX with the column): lookarounds, backreferences,
 *     word boundaries \b \B, Unicode property escapes \p{..}, inline flags (?i), octal
 *     escapes, possessive quantifiers.
 *   - A `{` that does not start a valid {m}, {m,} or {m,n} is an error (as in
 *     ECMAScript's unicode mode); stray `}` and `]` are literals. */
#include <stdarg.h>
#include <stdio.h>

#include "front.h"

#if defined(__GNUC__)
#define XGR_NOINLINE __attribute__((noinline))
#else
#define XGR_NOINLINE
#endif

typedef XGR_VEC(int32_t) i32vec;
typedef XGR_VEC(uint8_t) u8vec;
typedef XGR_VEC(uint32_t) u32vec;

typedef struct {
    const uint8_t *s;
    size_t n, pos;
    xgr_grammar *g;
    int depth;
    int at_start;  /* nothing can have been consumed on the path to pos */
    long anchors;  /* anchors seen so far, to reject anchors inside repeats */
    i32vec stack;  /* children of SEQ / ALT nodes under construction */
    u8vec lit;     /* pending literal bytes; each sequence owns a suffix */
    u32vec ranges; /* class under construction */
} rx;

enum { SET_NONE = 0, SET_D, SET_W, SET_S };

static const uint32_t SET_D_RANGES[] = {'0', '9'};
static const uint32_t SET_W_RANGES[] = {'0', '9', 'A', 'Z', '_', '_', 'a', 'z'};
static const uint32_t SET_S_RANGES[] = {0x09,   0x0d,   0x20,   0x20,   0xa0,   0xa0,
                                        0x1680, 0x1680, 0x2000, 0x200a, 0x2028, 0x2029,
                                        0x202f, 0x202f, 0x205f, 0x205f, 0x3000, 0x3000,
                                        0xfeff, 0xfeff};

static void set_ranges(int set, const uint32_t **r, size_t *n) {
    switch (set) {
    case SET_D: *r = SET_D_RANGES, *n = sizeof SET_D_RANGES / sizeof *SET_D_RANGES / 2; break;
    case SET_W: *r = SET_W_RANGES, *n = sizeof SET_W_RANGES / sizeof *SET_W_RANGES / 2; break;
    default: *r = SET_S_RANGES, *n = sizeof SET_S_RANGES / sizeof *SET_S_RANGES / 2; break;
    }
}

static XGR_NOINLINE int rerr(const rx *p, int code, size_t pos, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static XGR_NOINLINE int rerr(const rx *p, int code, size_t pos, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t col = 1;
    if (pos > p->n) pos = p->n;
    for (size_t i = 0; i < pos; i++)
        if ((p->s[i] & 0xc0) != 0x80) col++;
    const char *kind = code == XGR_ERR_SYNTAX ? "regex syntax error"
                       : code == XGR_ERR_UTF8 ? "regex encoding error"
                                              : "regex error";
    return xgr_fail(code, "%s at column %zu: %s", kind, col, msg);
}

static int ir_fail(void) { return xgr_front_ir_status(); }

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int read_hex(const rx *p, size_t i, int digits, uint32_t *v) {
    uint32_t x = 0;
    if (i + (size_t)digits > p->n) return 0;
    for (int k = 0; k < digits; k++) {
        int h = hexval(p->s[i + (size_t)k]);
        if (h < 0) return 0;
        x = x * 16 + (uint32_t)h;
    }
    *v = x;
    return 1;
}

/* Parses the escape at p->pos (a backslash): either a literal code point (*set ==
 * SET_NONE) or a class escape (*set, *neg). */
static int parse_escape(rx *p, int in_class, uint32_t *cp, int *set, int *neg) {
    size_t start = p->pos;
    *set = SET_NONE;
    *neg = 0;
    if (start + 1 >= p->n) return rerr(p, XGR_ERR_SYNTAX, start, "pattern ends with a lone backslash");
    uint8_t c = p->s[start + 1];
    p->pos = start + 2;
    switch (c) {
    case 'd': case 'D': *set = SET_D, *neg = c == 'D'; return XGR_OK;
    case 'w': case 'W': *set = SET_W, *neg = c == 'W'; return XGR_OK;
    case 's': case 'S': *set = SET_S, *neg = c == 'S'; return XGR_OK;
    case 'n': *cp = '\n'; return XGR_OK;
    case 't': *cp = '\t'; return XGR_OK;
    case 'r': *cp = '\r'; return XGR_OK;
    case 'f': *cp = 0x0c; return XGR_OK;
    case 'v': *cp = 0x0b; return XGR_OK;
    case '0':
        if (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
            return rerr(p, XGR_ERR_SYNTAX, start, "octal escapes are not supported");
        *cp = 0;
        return XGR_OK;
    case 'b':
        if (in_class) {
            *cp = 0x08;
            return XGR_OK;
        }
        return rerr(p, XGR_ERR_SYNTAX, start, "word boundary assertion \\b is not supported");
    case 'B':
        return rerr(p, XGR_ERR_SYNTAX, start, "word boundary assertion \\B is not supported");
    case 'k':
        return rerr(p, XGR_ERR_SYNTAX, start, "backreference \\k<...> is not supported");
    case 'p': case 'P':
        return rerr(p, XGR_ERR_SYNTAX, start,
                    "Unicode property escape \\%c{...} is not supported", (char)c);
    case 'c':
        if (p->pos < p->n && ((p->s[p->pos] | 0x20) >= 'a' && (p->s[p->pos] | 0x20) <= 'z')) {
            *cp = p->s[p->pos] % 32u;
            p->pos++;
            return XGR_OK;
        }
        return rerr(p, XGR_ERR_SYNTAX, start, "\\c must be followed by a letter");
    case 'x':
        if (!read_hex(p, p->pos, 2, cp))
            return rerr(p, XGR_ERR_SYNTAX, start, "\\x must be followed by 2 hex digits");
        p->pos += 2;
        return XGR_OK;
    case 'u':
        if (p->pos < p->n && p->s[p->pos] == '{') {
            uint32_t v = 0;
            size_t i = p->pos + 1;
            int k = 0;
            while (i < p->n && hexval(p->s[i]) >= 0) {
                v = v * 16 + (uint32_t)hexval(p->s[i]);
                if (v > 0x10ffff)
                    return rerr(p, XGR_ERR_SYNTAX, start, "\\u{...} is above U+10FFFF");
                i++, k++;
            }
            if (k == 0 || i >= p->n || p->s[i] != '}')
                return rerr(p, XGR_ERR_SYNTAX, start,
                            "\\u{ must be followed by hex digits and '}'");
            p->pos = i + 1;
            *cp = v;
            return XGR_OK;
        }
        if (!read_hex(p, p->pos, 4, cp))
            return rerr(p, XGR_ERR_SYNTAX, start, "\\u must be followed by 4 hex digits");
        p->pos += 4;
        /* A UTF-16 surrogate pair written as two \u escapes is one code point. */
        if (*cp >= 0xd800 && *cp <= 0xdbff && p->pos + 6 <= p->n && p->s[p->pos] == '\\' &&
            p->s[p->pos + 1] == 'u') {
            uint32_t lo;
            if (read_hex(p, p->pos + 2, 4, &lo) && lo >= 0xdc00 && lo <= 0xdfff) {
                *cp = 0x10000 + ((*cp - 0xd800) << 10) + (lo - 0xdc00);
                p->pos += 6;
            }
        }
        return XGR_OK;
    default: break;
    }
    if (c >= '1' && c <= '9')
        return rerr(p, XGR_ERR_SYNTAX, start, "backreferences are not supported");
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return rerr(p, XGR_ERR_SYNTAX, start, "unknown escape \\%c", (char)c);
    /* Any other character escapes itself (\. \/ \- \\ \" ...). */
    int k = xgr_utf8_decode(p->s + start + 1, p->n - start - 1, cp);
    if (!k) return rerr(p, XGR_ERR_UTF8, start + 1, "invalid UTF-8 byte 0x%02x", (unsigned)c);
    p->pos = start + 1 + (size_t)k;
    return XGR_OK;
}

static int push_range(rx *p, uint32_t lo, uint32_t hi) {
    return XGR_VEC_PUSH(p->ranges, lo) || XGR_VEC_PUSH(p->ranges, hi) ? XGR_ERR_NOMEM : XGR_OK;
}

static int push_set(rx *p, int set, int neg) {
    const uint32_t *r;
    size_t n;
    set_ranges(set, &r, &n);
    if (!neg) {
        for (size_t i = 0; i < n; i++)
            if (push_range(p, r[2 * i], r[2 * i + 1])) return XGR_ERR_NOMEM;
        return XGR_OK;
    }
    uint32_t next = 0; /* complement of sorted disjoint ranges within [0, 0x10FFFF] */
    for (size_t i = 0; i < n; i++) {
        if (r[2 * i] > next && push_range(p, next, r[2 * i] - 1)) return XGR_ERR_NOMEM;
        next = r[2 * i + 1] + 1;
    }
    if (next <= 0x10ffff && push_range(p, next, 0x10ffff)) return XGR_ERR_NOMEM;
    return XGR_OK;
}

/* One class member at p->pos: literal code point or class escape. */
static int class_atom(rx *p, uint32_t *cp, int *set, int *neg) {
    uint8_t c = p->s[p->pos];
    *set = SET_NONE;
    *neg = 0;
    if (c == '\\') return parse_escape(p, 1, cp, set, neg);
    int k = xgr_utf8_decode(p->s + p->pos, p->n - p->pos, cp);
    if (!k) return rerr(p, XGR_ERR_UTF8, p->pos, "invalid UTF-8 byte 0x%02x", (unsigned)c);
    p->pos += (size_t)k;
    return XGR_OK;
}

static int parse_class(rx *p, int32_t *node) {
    size_t start = p->pos;
    int negated = 0, rc;
    p->pos++;
    if (p->pos < p->n && p->s[p->pos] == '^') {
        negated = 1;
        p->pos++;
    }
    p->ranges.len = 0;
    for (;;) {
        if (p->pos >= p->n)
            return rerr(p, XGR_ERR_SYNTAX, start, "unterminated character class");
        if (p->s[p->pos] == ']') {
            p->pos++;
            break;
        }
        size_t item = p->pos;
        uint32_t lo, hi;
        int set, neg;
        if ((rc = class_atom(p, &lo, &set, &neg))) return rc;
        if (set) {
            if ((rc = push_set(p, set, neg))) return rc;
            continue; /* a following '-' is then a literal, as in ECMAScript */
        }
        if (p->pos + 1 < p->n && p->s[p->pos] == '-' && p->s[p->pos + 1] != ']') {
            p->pos++;
            if ((rc = class_atom(p, &hi, &set, &neg))) return rc;
            if (set) {
                /* [a-\d]: '-' is a literal between the two members. */
                if (push_range(p, lo, lo) || push_range(p, '-', '-')) return XGR_ERR_NOMEM;
                if ((rc = push_set(p, set, neg))) return rc;
                continue;
            }
            if (lo > hi)
                return rerr(p, XGR_ERR_SEMANTIC, item,
                            "character range out of order: U+%04lX > U+%04lX",
                            (unsigned long)lo, (unsigned long)hi);
        } else {
            hi = lo;
        }
        if ((rc = push_range(p, lo, hi))) return rc;
    }
    *node = xgr_ir_class(p->g, p->ranges.data, p->ranges.len / 2, negated);
    return *node < 0 ? ir_fail() : XGR_OK;
}

static int parse_alt(rx *p, int32_t *node, int *ends_dollar);

static int parse_group(rx *p, int32_t *node, int *ends_dollar) {
    size_t start = p->pos;
    int rc;
    p->pos++;
    if (p->pos < p->n && p->s[p->pos] == '?') {
        size_t q = p->pos + 1;
        uint8_t c = q < p->n ? p->s[q] : 0;
        if (c == ':') {
            p->pos = q + 1;
        } else if (c == '=' || c == '!') {
            return rerr(p, XGR_ERR_SYNTAX, start, "lookaround assertion (?%c...) is not supported",
                        (char)c);
        } else if (c == '<' && q + 1 < p->n && (p->s[q + 1] == '=' || p->s[q + 1] == '!')) {
            return rerr(p, XGR_ERR_SYNTAX, start,
                        "lookaround assertion (?<%c...) is not supported", (char)p->s[q + 1]);
        } else if (c == '<' || (c == 'P' && q + 1 < p->n && p->s[q + 1] == '<')) {
            size_t i = q + (c == 'P' ? 2 : 1), ns = i;
            while (i < p->n && (p->s[i] == '_' || p->s[i] == '$' ||
                                (p->s[i] >= 'a' && p->s[i] <= 'z') ||
                                (p->s[i] >= 'A' && p->s[i] <= 'Z') ||
                                (i > ns && p->s[i] >= '0' && p->s[i] <= '9')))
                i++;
            if (i == ns || i >= p->n || p->s[i] != '>')
                return rerr(p, XGR_ERR_SYNTAX, start, "invalid group name in (?<name>...)");
            p->pos = i + 1;
        } else if (c == 'P' && q + 1 < p->n && p->s[q + 1] == '=') {
            return rerr(p, XGR_ERR_SYNTAX, start, "backreference (?P=...) is not supported");
        } else {
            return rerr(p, XGR_ERR_SYNTAX, start,
                        "unsupported group syntax '(?' (inline flags are not supported)");
        }
    }
    if ((rc = parse_alt(p, node, ends_dollar))) return rc;
    if (p->pos >= p->n || p->s[p->pos] != ')')
        return rerr(p, XGR_ERR_SYNTAX, start, "missing ')' for this group");
    p->pos++;
    return XGR_OK;
}

static int parse_number(rx *p, long *v) {
    long x = 0;
    size_t start = p->pos;
    while (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
        int digit = p->s[p->pos] - '0';
        /* checked before multiplying so a 32-bit long cannot overflow */
        if (x > (XGR_FRONT_MAX_REPEAT - digit) / 10)
            return rerr(p, XGR_ERR_SEMANTIC, start, "repetition bound is too large (limit %ld)",
                        (long)XGR_FRONT_MAX_REPEAT);
        x = x * 10 + digit;
        p->pos++;
    }
    *v = x;
    return p->pos > start ? XGR_OK : -1;
}

/* Parses an optional quantifier at p->pos; *has = 0 when there is none. */
static int parse_quant(rx *p, int *has, long *min, long *max) {
    *has = 0;
    if (p->pos >= p->n) return XGR_OK;
    size_t start = p->pos;
    uint8_t c = p->s[start];
    if (c == '*') {
        *min = 0, *max = -1;
        p->pos++;
    } else if (c == '+') {
        *min = 1, *max = -1;
        p->pos++;
    } else if (c == '?') {
        *min = 0, *max = 1;
        p->pos++;
    } else if (c == '{') {
        p->pos++;
        int rc = parse_number(p, min);
        if (rc > 0) return rc;
        if (rc < 0) goto bad;
        *max = *min;
        if (p->pos < p->n && p->s[p->pos] == ',') {
            p->pos++;
            if (p->pos < p->n && p->s[p->pos] == '}') {
                *max = -1;
            } else {
                rc = parse_number(p, max);
                if (rc > 0) return rc;
                if (rc < 0) goto bad;
            }
        }
        if (p->pos >= p->n || p->s[p->pos] != '}') goto bad;
        p->pos++;
        if (*max >= 0 && *min > *max)
            return rerr(p, XGR_ERR_SEMANTIC, start,
                        "numbers out of order in quantifier {%ld,%ld}", *min, *max);
    } else {
        return XGR_OK;
    }
    *has = 1;
    if (p->pos < p->n && p->s[p->pos] == '?') p->pos++; /* lazy: same language */
    if (p->pos < p->n && (p->s[p->pos] == '*' || p->s[p->pos] == '+' || p->s[p->pos] == '?' ||
                          p->s[p->pos] == '{'))
        return rerr(p, XGR_ERR_SYNTAX, p->pos, "nothing to repeat (quantifier follows a quantifier)");
    return XGR_OK;
bad:
    return rerr(p, XGR_ERR_SYNTAX, start,
                "incomplete quantifier: write {m}, {m,} or {m,n}, or escape '{' as \\{");
}

static int flush_lit(rx *p, size_t lit_base) {
    if (p->lit.len == lit_base) return XGR_OK;
    int32_t k = xgr_ir_bytes(p->g, p->lit.data + lit_base, p->lit.len - lit_base);
    p->lit.len = lit_base;
    if (k < 0) return ir_fail();
    return XGR_VEC_PUSH(p->stack, k) ? XGR_ERR_NOMEM : XGR_OK;
}

static int parse_seq(rx *p, int32_t *node, int *ends_dollar) {
    size_t base = p->stack.len, lit_base = p->lit.len;
    int dollar = 0, rc;
    size_t dollar_pos = 0;
    for (;;) {
        if (p->pos >= p->n) break;
        size_t at = p->pos;
        uint8_t c = p->s[at];
        if (c == '|' || c == ')') break;
        if (c == '$' || c == '^') {
            if (c == '^' && !p->at_start)
                return rerr(p, XGR_ERR_SYNTAX, at,
                            "'^' is only supported at the start of the pattern");
            p->pos++;
            p->anchors++;
            if (c == '$' && !dollar) dollar = 1, dollar_pos = at;
            if (p->pos < p->n && (p->s[p->pos] == '*' || p->s[p->pos] == '+' ||
                                  p->s[p->pos] == '?' || p->s[p->pos] == '{'))
                return rerr(p, XGR_ERR_SYNTAX, p->pos, "nothing to repeat (anchor before quantifier)");
            continue;
        }
        if (dollar)
            return rerr(p, XGR_ERR_SYNTAX, dollar_pos,
                        "'$' is only supported at the end of the pattern");
        long anchors_before = p->anchors;
        int32_t k = -1;
        uint32_t cp = 0;
        int is_lit = 0, grp_dollar = 0;
        if (c == '(') {
            if ((rc = parse_group(p, &k, &grp_dollar))) return rc;
        } else if (c == '[') {
            if ((rc = parse_class(p, &k))) return rc;
        } else if (c == '.') {
            static const uint32_t any[2] = {0, 0x10FFFF};
            p->pos++;
            k = xgr_ir_class(p->g, any, 1, 0);
            if (k < 0) return ir_fail();
        } else if (c == '\\') {
            int set, neg;
            if ((rc = parse_escape(p, 0, &cp, &set, &neg))) return rc;
            if (set) {
                p->ranges.len = 0;
                if ((rc = push_set(p, set, 0))) return rc;
                k = xgr_ir_class(p->g, p->ranges.data, p->ranges.len / 2, neg);
                if (k < 0) return ir_fail();
            } else {
                is_lit = 1;
            }
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            return rerr(p, XGR_ERR_SYNTAX, at, "nothing to repeat before '%c'", (char)c);
        } else {
            int n = xgr_utf8_decode(p->s + at, p->n - at, &cp);
            if (!n) return rerr(p, XGR_ERR_UTF8, at, "invalid UTF-8 byte 0x%02x", (unsigned)c);
            p->pos += (size_t)n;
            is_lit = 1;
        }
        int has;
        long min = 0, max = 0;
        if ((rc = parse_quant(p, &has, &min, &max))) return rc;
        if (has && p->anchors != anchors_before)
            return rerr(p, XGR_ERR_SYNTAX, at, "anchors inside a repeated group are not supported");
        p->at_start = 0;
        if (is_lit) {
            uint8_t u[4];
            int n = xgr_utf8_encode(cp, u);
            if (!has) {
                if (XGR_VEC_RESERVE(p->lit, p->lit.len + 4)) return XGR_ERR_NOMEM;
                memcpy(p->lit.data + p->lit.len, u, (size_t)n);
                p->lit.len += (size_t)n;
                continue;
            }
            if ((rc = flush_lit(p, lit_base))) return rc;
            k = xgr_ir_bytes(p->g, u, (size_t)n);
            if (k < 0) return ir_fail();
        } else if ((rc = flush_lit(p, lit_base))) {
            return rc;
        }
        if (has && (k = xgr_ir_repeat(p->g, k, (int32_t)min, (int32_t)max)) < 0) return ir_fail();
        if (XGR_VEC_PUSH(p->stack, k)) return XGR_ERR_NOMEM;
        if (grp_dollar) dollar = 1, dollar_pos = at;
    }
    if ((rc = flush_lit(p, lit_base))) return rc;
    *node = xgr_ir_seq(p->g, p->stack.data + base, p->stack.len - base);
    p->stack.len = base;
    *ends_dollar = dollar;
    return *node < 0 ? ir_fail() : XGR_OK;
}

static int parse_alt(rx *p, int32_t *node, int *ends_dollar) {
    int rc;
    if (++p->depth > XGR_FRONT_MAX_DEPTH)
        return rerr(p, XGR_ERR_LIMIT, p->pos, "group nesting is deeper than %d",
                    XGR_FRONT_MAX_DEPTH);
    size_t base = p->stack.len;
    int at_start = p->at_start;
    *ends_dollar = 0;
    for (;;) {
        int32_t k = -1;
        int d = 0;
        p->at_start = at_start;
        if ((rc = parse_seq(p, &k, &d))) return rc;
        *ends_dollar |= d;
        if (XGR_VEC_PUSH(p->stack, k)) return XGR_ERR_NOMEM;
        if (p->pos < p->n && p->s[p->pos] == '|') {
            p->pos++;
            continue;
        }
        break;
    }
    *node = xgr_ir_alt(p->g, p->stack.data + base, p->stack.len - base);
    p->stack.len = base;
    p->depth--;
    return *node < 0 ? ir_fail() : XGR_OK;
}

int xgr_regex_to_node(xgr_grammar *g, const char *src, size_t len, int32_t *out_node) {
    if (!g || !out_node || (!src && len))
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_regex_to_node: NULL argument");
    rx p;
    memset(&p, 0, sizeof p);
    p.s = (const uint8_t *)(src ? src : "");
    p.n = len;
    p.g = g;
    p.at_start = 1;
    /* a non-NULL stack even for "" (stack.data + base must never be NULL + 0) */
    if (XGR_VEC_RESERVE(p.stack, 16)) return xgr_fail(XGR_ERR_NOMEM, "out of memory");
    int d, rc = parse_alt(&p, out_node, &d);
    if (!rc && p.pos < p.n) rc = rerr(&p, XGR_ERR_SYNTAX, p.pos, "unmatched ')'");
    XGR_VEC_FREE(p.stack);
    XGR_VEC_FREE(p.lit);
    XGR_VEC_FREE(p.ranges);
    return rc;
}

int xgr_grammar_from_regex(const char *src, size_t src_len, xgr_grammar **out) {
    if (!out) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_grammar_from_regex: out is NULL");
    *out = NULL;
    if (!src && src_len)
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_grammar_from_regex: src is NULL");
    xgr_grammar *g = xgr_ir_new();
    if (!g) return XGR_ERR_NOMEM;
    int32_t node, r = xgr_ir_rule(g, "root", 4);
    int rc = r < 0 ? ir_fail() : xgr_regex_to_node(g, src, src_len, &node);
    if (!rc) {
        g->rules.data[r].body = node;
        g->root = r;
        rc = xgr_ir_validate(g);
    }
    if (rc) {
        xgr_ir_free(g);
        return rc;
    }
    *out = g;
    return XGR_OK;
}
