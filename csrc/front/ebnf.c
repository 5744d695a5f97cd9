/* EBNF front end: upstream xgrammar's dialect (plus the raw-byte extension described in
 * front.h) parsed by recursive descent straight into the IR: lexing of literals,
 * expressions and rules. The macro calls (Regex, Substring, TagDispatch, Token) are
 * parsed in ebnf_macros.c; the parser state both share is in ebnf_internal.h.
 *
 * Rules are `name ::= expr` and may span lines: a rule ends where the next `name ::=`
 * starts, so newlines are plain whitespace. Groups keep their structure in the IR (no
 * flattening), which is what makes print(parse(print(parse(x)))) == print(parse(x)). */
#include <stdarg.h>

#include "ebnf_internal.h"
#include "rule_attrs.h"
#include "../common/token_marker.h"

enum { CTX_STRING, CTX_BSTRING, CTX_CLASS, CTX_BCLASS };

/* Kept out of line so the message buffers do not sit in every recursive frame. */
XGR_NOINLINE int xgr_ebnf_lerr(const ebnf *p, int code, size_t pos, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = xgr_diag_vfail(code, "EBNF lexer", p->s, p->n, pos, fmt, ap);
    va_end(ap);
    return rc;
}

XGR_NOINLINE int xgr_ebnf_perr(const ebnf *p, int code, size_t pos, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = xgr_diag_vfail(code, "EBNF parser", p->s, p->n, pos, fmt, ap);
    va_end(ap);
    return rc;
}

/* What the parser found at pos, for "expected X, found Y" messages. */
XGR_NOINLINE const char *xgr_ebnf_found(const ebnf *p, size_t pos, char *out, size_t cap) {
    return xgr_diag_found(p->s, p->n, pos, out, cap);
}

XGR_NOINLINE int xgr_ebnf_expected(const ebnf *p, size_t pos, const char *what) {
    char b[32];
    return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, pos, "expected %s, found %s", what,
                         xgr_ebnf_found(p, pos, b, sizeof b));
}

static int ir_fail(void) { return xgr_front_ir_status(); }

int xgr_ebnf_is_name_start(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-' ||
           c == '.';
}
int xgr_ebnf_is_name_char(int c) { return xgr_ebnf_is_name_start(c) || (c >= '0' && c <= '9'); }
static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

size_t xgr_ebnf_skip_ws_at(const ebnf *p, size_t i) {
    while (i < p->n) {
        uint8_t c = p->s[i];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
            i++;
        } else if (c == '#') {
            while (i < p->n && p->s[i] != '\n') i++;
        } else {
            break;
        }
    }
    return i;
}
void xgr_ebnf_skip_ws(ebnf *p) { p->pos = xgr_ebnf_skip_ws_at(p, p->pos); }

size_t xgr_ebnf_name_end(const ebnf *p, size_t i) {
    if (i >= p->n || !xgr_ebnf_is_name_start(p->s[i])) return i;
    while (i < p->n && xgr_ebnf_is_name_char(p->s[i])) i++;
    return i;
}

/* End of a rule head's name at i: past `name` and its attribute group `[...]` when one
 * follows it directly (rule_attrs.h); i when there is no name. */
static size_t head_end(const ebnf *p, size_t i) {
    size_t e = xgr_ebnf_name_end(p, i);
    if (e == i) return i;
    size_t g = xgr_attrs_group_len(p->s, p->n, e);
    if (g) {
        size_t j = xgr_ebnf_skip_ws_at(p, e + g);
        if (j + 3 <= p->n && memcmp(p->s + j, "::=", 3) == 0) return e + g;
    }
    return e;
}

/* `name ::=` (or `name[attrs] ::=`) starts at i: the current rule body ends here. */
int xgr_ebnf_at_rule_start(const ebnf *p, size_t i) {
    size_t e = head_end(p, i);
    if (e == i) return 0;
    e = xgr_ebnf_skip_ws_at(p, e);
    return e + 3 <= p->n && memcmp(p->s + e, "::=", 3) == 0;
}

/* `(` followed by `=`: a lookahead assertion starts at i. */
static int at_lookahead(const ebnf *p, size_t i) {
    if (i >= p->n || p->s[i] != '(') return 0;
    i = xgr_ebnf_skip_ws_at(p, i + 1);
    return i < p->n && p->s[i] == '=';
}

int xgr_ebnf_track_rules(ebnf *p) {
    size_t nr = p->g->rules.len;
    if (XGR_VEC_RESERVE(p->ref_pos, nr) || XGR_VEC_RESERVE(p->ref_td, nr) ||
        XGR_VEC_RESERVE(p->def_pos, nr))
        return XGR_ERR_NOMEM;
    while (p->ref_pos.len < nr) p->ref_pos.data[p->ref_pos.len++] = 0;
    while (p->ref_td.len < nr) p->ref_td.data[p->ref_td.len++] = 0;
    while (p->def_pos.len < nr) p->def_pos.data[p->def_pos.len++] = 0;
    return XGR_OK;
}

/* ---- lexing of literals ---------------------------------------------------------- */

static int read_hex(ebnf *p, size_t i, int min_digits, int max_digits, uint32_t *v,
                    size_t *end) {
    uint32_t x = 0;
    int k = 0;
    while (k < max_digits && i + (size_t)k < p->n && hexval(p->s[i + (size_t)k]) >= 0) {
        x = x * 16 + (uint32_t)hexval(p->s[i + (size_t)k]);
        k++;
    }
    if (k < min_digits) return 0;
    *v = x;
    *end = i + (size_t)k;
    return 1;
}

/* Parses the escape at p->pos (a backslash). *is_x tells `\xNN` apart, which is a raw
 * byte in b-strings and b-classes. */
static int parse_escape(ebnf *p, int ctx, uint32_t *cp, int *is_x) {
    size_t start = p->pos;
    *is_x = 0;
    if (start + 1 >= p->n)
        return xgr_ebnf_lerr(p, XGR_ERR_SYNTAX, start,
                             "Invalid escape sequence: a backslash ends the input");
    uint8_t c = p->s[start + 1];
    size_t end = start + 2;
    uint32_t v;
    int in_class = ctx == CTX_CLASS || ctx == CTX_BCLASS;
    switch (c) {
    case 'n': v = '\n'; break;
    case 'r': v = '\r'; break;
    case 't': v = '\t'; break;
    case 'b': v = 0x08; break;
    case 'f': v = 0x0c; break;
    case 'v': v = 0x0b; break;
    case '0': v = 0; break;
    case '"': case '\\': case '\'': case '/': case '?': v = c; break;
    case ']': case '-': case '^': case '[':
        if (!in_class) goto bad;
        v = c;
        break;
    case 'x':
        if (!read_hex(p, start + 2, 1, 2, &v, &end))
            return xgr_ebnf_lerr(p, XGR_ERR_SYNTAX, start,
                                 "Invalid escape sequence: expected hex digits after \\x");
        *is_x = 1;
        break;
    case 'u':
        if (!read_hex(p, start + 2, 4, 4, &v, &end))
            return xgr_ebnf_lerr(p, XGR_ERR_SYNTAX, start,
                                 "Invalid escape sequence: expected 4 hex digits after \\u");
        /* A UTF-16 surrogate pair written as two \u escapes is one code point. */
        if (v >= 0xd800 && v <= 0xdbff && end + 6 <= p->n && p->s[end] == '\\' &&
            p->s[end + 1] == 'u') {
            uint32_t lo;
            size_t e2;
            if (read_hex(p, end + 2, 4, 4, &lo, &e2) && lo >= 0xdc00 && lo <= 0xdfff) {
                v = 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00);
                end = e2;
            }
        }
        break;
    case 'U':
        if (!read_hex(p, start + 2, 8, 8, &v, &end))
            return xgr_ebnf_lerr(p, XGR_ERR_SYNTAX, start,
                                 "Invalid escape sequence: expected 8 hex digits after \\U");
        if (v > 0x10ffff)
            return xgr_ebnf_lerr(p, XGR_ERR_SYNTAX, start,
                                 "Invalid escape sequence: code point 0x%lx is above U+10FFFF",
                                 (unsigned long)v);
        break;
    default:
    bad: {
        char b[32];
        return xgr_ebnf_lerr(p, XGR_ERR_SYNTAX, start,
                             "Invalid escape sequence: backslash followed by %s",
                             xgr_ebnf_found(p, start + 1, b, sizeof b));
    }
    }
    p->pos = end;
    *cp = v;
    return XGR_OK;
}

static int buf_put_cp(ebnf *p, uint32_t cp) {
    uint8_t u[4];
    int k = xgr_utf8_encode(cp, u);
    if (XGR_VEC_RESERVE(p->buf, p->buf.len + 4)) return XGR_ERR_NOMEM;
    memcpy(p->buf.data + p->buf.len, u, (size_t)k);
    p->buf.len += (size_t)k;
    return XGR_OK;
}

/* Lexes "..." (or b"..." when bytes) at p->pos into p->buf. */
int xgr_ebnf_lex_string(ebnf *p, int bytes) {
    size_t start = p->pos;
    p->pos += bytes ? 2 : 1;
    p->buf.len = 0;
    for (;;) {
        if (p->pos >= p->n) {
            size_t l, c;
            xgr_diag_line_col(p->s, p->n, start, &l, &c);
            return xgr_ebnf_lerr(p, XGR_ERR_SYNTAX, p->pos,
                                 "Expect \" in string literal (the string starting at line %zu, "
                                 "column %zu is not closed)",
                                 l, c);
        }
        uint8_t c = p->s[p->pos];
        if (c == '"') {
            p->pos++;
            return XGR_OK;
        }
        if (c == '\n') {
            size_t l, col;
            xgr_diag_line_col(p->s, p->n, start, &l, &col);
            return xgr_ebnf_lerr(p, XGR_ERR_SYNTAX, p->pos,
                                 "Expect \" in string literal (the string starting at line %zu, "
                                 "column %zu is not closed on its line; a newline inside a "
                                 "string must be written \\n)",
                                 l, col);
        }
        if (c == '\\') {
            size_t epos = p->pos;
            uint32_t cp;
            int is_x, rc;
            if ((rc = parse_escape(p, bytes ? CTX_BSTRING : CTX_STRING, &cp, &is_x)))
                return rc;
            if (bytes && is_x) {
                if (XGR_VEC_PUSH(p->buf, (uint8_t)cp)) return XGR_ERR_NOMEM;
                continue;
            }
            if (cp >= 0xd800 && cp <= 0xdfff)
                return xgr_ebnf_lerr(p, XGR_ERR_SYNTAX, epos,
                                     "lone surrogate U+%04lX cannot appear in a string",
                                     (unsigned long)cp);
            if ((rc = buf_put_cp(p, cp))) return rc;
            continue;
        }
        uint32_t cp;
        int k = xgr_utf8_decode(p->s + p->pos, p->n - p->pos, &cp);
        if (!k) return xgr_ebnf_lerr(p, XGR_ERR_UTF8, p->pos, "invalid UTF-8 byte 0x%02x",
                                     (unsigned)c);
        if (XGR_VEC_RESERVE(p->buf, p->buf.len + (size_t)k)) return XGR_ERR_NOMEM;
        memcpy(p->buf.data + p->buf.len, p->s + p->pos, (size_t)k);
        p->buf.len += (size_t)k;
        p->pos += (size_t)k;
    }
}

static int read_class_char(ebnf *p, int bytes, uint32_t *out) {
    size_t at = p->pos;
    uint8_t c = p->s[at];
    if (c == '\\') {
        int is_x, rc;
        if ((rc = parse_escape(p, bytes ? CTX_BCLASS : CTX_CLASS, out, &is_x))) return rc;
        if (bytes && !is_x && *out > 0x7f)
            return xgr_ebnf_lerr(p, XGR_ERR_SYNTAX, at,
                                 "a byte class b[...] takes ASCII characters and \\xNN "
                                 "escapes only");
        return XGR_OK;
    }
    int k = xgr_utf8_decode(p->s + at, p->n - at, out);
    if (!k) return xgr_ebnf_lerr(p, XGR_ERR_UTF8, at, "invalid UTF-8 byte 0x%02x", (unsigned)c);
    if (bytes && *out > 0x7f)
        return xgr_ebnf_lerr(p, XGR_ERR_SYNTAX, at,
                             "a byte class b[...] takes ASCII characters and \\xNN escapes only");
    p->pos += (size_t)k;
    return XGR_OK;
}

/* The class starting at `start` is not closed before p->pos (end of input or a newline). */
static XGR_NOINLINE int class_unclosed(const ebnf *p, size_t start) {
    size_t l, c;
    xgr_diag_line_col(p->s, p->n, start, &l, &c);
    if (p->pos >= p->n)
        return xgr_ebnf_lerr(p, XGR_ERR_SYNTAX, p->pos,
                             "Unterminated character class (the class starts at line %zu, "
                             "column %zu)",
                             l, c);
    return xgr_ebnf_lerr(p, XGR_ERR_SYNTAX, p->pos,
                         "Character class should not contain newline (the class starting at "
                         "line %zu, column %zu is not closed on its line)",
                         l, c);
}

/* Lexes [...] / [^...] (b[...] when bytes) at p->pos into a CLASS / BYTE_CLASS node. */
static int parse_class(ebnf *p, int bytes, int32_t *node) {
    size_t start = p->pos;
    int negated = 0, rc;
    p->pos += bytes ? 2 : 1;
    if (p->pos < p->n && p->s[p->pos] == '^') {
        negated = 1;
        p->pos++;
    }
    p->ranges.len = 0;
    for (;;) {
        if (p->pos >= p->n || p->s[p->pos] == '\n') return class_unclosed(p, start);
        if (p->s[p->pos] == ']') {
            p->pos++;
            break;
        }
        size_t item = p->pos;
        uint32_t lo, hi;
        if ((rc = read_class_char(p, bytes, &lo))) return rc;
        hi = lo;
        if (p->pos + 1 < p->n && p->s[p->pos] == '-' && p->s[p->pos + 1] != ']') {
            p->pos++;
            if (p->s[p->pos] == '\n') return class_unclosed(p, start);
            if ((rc = read_class_char(p, bytes, &hi))) return rc;
            if (lo > hi)
                return xgr_ebnf_perr(p, XGR_ERR_SEMANTIC, item,
                                     "Invalid character class: lower bound is larger than upper "
                                     "bound (U+%04lX > U+%04lX)",
                                     (unsigned long)lo, (unsigned long)hi);
        }
        if (XGR_VEC_PUSH(p->ranges, lo) || XGR_VEC_PUSH(p->ranges, hi)) return XGR_ERR_NOMEM;
    }
    size_t nr = p->ranges.len / 2;
    *node = bytes ? xgr_ir_byte_class(p->g, p->ranges.data, nr, negated)
                  : xgr_ir_class(p->g, p->ranges.data, nr, negated);
    return *node < 0 ? ir_fail() : XGR_OK;
}

/* ---- expressions ------------------------------------------------------------------- */

static int parse_alt(ebnf *p, int32_t *node);

/* No expression starts at pos: upstream's "Expect element, but got X", with our list. */
static XGR_NOINLINE int expect_element(const ebnf *p, size_t pos) {
    char b[32];
    return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, pos,
                         "Expect element, but got %s (expected a string, character class, rule "
                         "name or '(')",
                         xgr_ebnf_found(p, pos, b, sizeof b));
}

static int parse_primary(ebnf *p, int32_t *node) {
    size_t start = p->pos;
    uint8_t c = p->s[start];
    int rc;
    if (c == '"') {
        if ((rc = xgr_ebnf_lex_string(p, 0))) return rc;
        *node = xgr_ir_bytes(p->g, p->buf.data, p->buf.len);
        return *node < 0 ? ir_fail() : XGR_OK;
    }
    if (c == '[') return parse_class(p, 0, node);
    if (c == '(') {
        p->pos++;
        xgr_ebnf_skip_ws(p);
        if (p->pos < p->n && p->s[p->pos] == '=')
            return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, start,
                                 "a lookahead assertion '(= ...)' is only allowed at the end of a "
                                 "rule body");
        if (p->pos < p->n && p->s[p->pos] == ')') { /* `( )` is the empty string, as upstream */
            p->pos++;
            *node = xgr_ir_bytes(p->g, (const uint8_t *)"", 0);
            return *node < 0 ? ir_fail() : XGR_OK;
        }
        if ((rc = parse_alt(p, node))) return rc;
        xgr_ebnf_skip_ws(p);
        if (at_lookahead(p, p->pos))
            return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, p->pos,
                                 "a lookahead assertion '(= ...)' is only allowed at the end of a "
                                 "rule body");
        if (p->pos >= p->n || p->s[p->pos] != ')') {
            if (p->pos >= p->n || xgr_ebnf_at_rule_start(p, p->pos)) {
                size_t l, col;
                xgr_diag_line_col(p->s, p->n, start, &l, &col);
                return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, p->pos,
                                     "Expect ) (unclosed '(' at line %zu, column %zu)", l, col);
            }
            return xgr_ebnf_expected(p, p->pos, "')' or '|'");
        }
        p->pos++;
        return XGR_OK;
    }
    if (c == 'b' && start + 1 < p->n && p->s[start + 1] == '"') {
        if ((rc = xgr_ebnf_lex_string(p, 1))) return rc;
        *node = xgr_ir_bytes(p->g, p->buf.data, p->buf.len);
        return *node < 0 ? ir_fail() : XGR_OK;
    }
    if (c == 'b' && start + 1 < p->n && p->s[start + 1] == '[') return parse_class(p, 1, node);
    if (xgr_ebnf_is_name_start(c)) {
        size_t e = xgr_ebnf_name_end(p, start);
        size_t len = e - start;
        p->pos = e;
        if (e < p->n && p->s[e] == '(') {
            if (len == 5 && memcmp(p->s + start, "Regex", 5) == 0) {
                p->pos++;
                return xgr_ebnf_macro_regex(p, start, node);
            }
        }
        if (len == 5 && xgr_ebnf_at_token_macro(p, start)) {
            int32_t k;
            p->pos = start;
            if ((rc = xgr_ebnf_lex_token_ids(p, &k))) return rc;
            int32_t alts[64];
            if (k > 64)
                return xgr_ebnf_perr(p, XGR_ERR_SEMANTIC, start,
                                     "Token(...) takes at most 64 ids; write an alternation");
            for (int32_t i = 0, at = 0; i < k; i++) {
                size_t len = xgr_token_big_id(p->buf.data + at, p->buf.len - (size_t)at) >= 0
                                 ? XGR_TOKEN_BIG_LEN
                                 : XGR_TOKEN_MARKER_LEN;
                alts[i] = xgr_ir_bytes(p->g, p->buf.data + at, len);
                if (alts[i] < 0) return ir_fail();
                at += (int32_t)len;
            }
            *node = k == 1 ? alts[0] : xgr_ir_alt(p->g, alts, (size_t)k);
            return *node < 0 ? ir_fail() : XGR_OK;
        }
        if (len == 12 && memcmp(p->s + start, "ExcludeToken", 12) == 0 && e < p->n &&
            xgr_ebnf_skip_ws_at(p, e) < p->n && p->s[xgr_ebnf_skip_ws_at(p, e)] == '(')
            return xgr_ebnf_macro_exclude_token(p, start, node);
        if (len == 16 && memcmp(p->s + start, "TokenTagDispatch", 16) == 0) {
            size_t q = xgr_ebnf_skip_ws_at(p, e);
            if (q < p->n && p->s[q] == '(') {
                if (p->in_lookahead)
                    return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, start,
                                         "TokenTagDispatch cannot appear in a lookahead assertion");
                p->pos = q;
                return xgr_ebnf_macro_token_tag_dispatch(p, start, node);
            }
        }
        if (len == 9 && memcmp(p->s + start, "Substring", 9) == 0) {
            size_t q = xgr_ebnf_skip_ws_at(p, e);
            if (q < p->n && p->s[q] == '(') {
                if (p->in_lookahead)
                    return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, start,
                                         "Substring should not be in lookahead assertion");
                p->pos = q;
                return xgr_ebnf_macro_substring(p, start, node);
            }
        }
        if (len == 11 && memcmp(p->s + start, "TagDispatch", 11) == 0) {
            size_t q = xgr_ebnf_skip_ws_at(p, e);
            if (q < p->n && p->s[q] == '(') {
                if (p->in_lookahead)
                    return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, start,
                                         "TagDispatch cannot appear in a lookahead assertion");
                p->pos = q;
                return xgr_ebnf_macro_tag_dispatch(p, start, node);
            }
        }
        int32_t r = xgr_ir_rule(p->g, (const char *)p->s + start, len);
        if (r < 0) return ir_fail();
        if ((rc = xgr_ebnf_track_rules(p))) return rc;
        if (!p->ref_pos.data[r]) p->ref_pos.data[r] = start + 1;
        *node = xgr_ir_ref(p->g, r);
        return *node < 0 ? ir_fail() : XGR_OK;
    }
    if (c == ')')
        return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, start, "Expect element, but got ) (unmatched ')')");
    if (c == '*' || c == '+' || c == '?' || c == '{')
        return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, start,
                             "Expect element, but got %c (quantifier '%c' has nothing to repeat)",
                             (char)c, (char)c);
    if (c == ':' && start + 2 < p->n && memcmp(p->s + start, "::=", 3) == 0)
        return xgr_ebnf_lerr(p, XGR_ERR_SYNTAX, start,
                             "Assign should be preceded by an identifier (a rule name is missing "
                             "before '::=')");
    if (c >= 0x80) {
        uint32_t cp;
        if (!xgr_utf8_decode(p->s + start, p->n - start, &cp))
            return xgr_ebnf_lerr(p, XGR_ERR_UTF8, start, "invalid UTF-8 byte 0x%02x", (unsigned)c);
    }
    return expect_element(p, start);
}

static int parse_number(ebnf *p, long *v) {
    size_t start = p->pos;
    long x = 0;
    if (p->pos >= p->n || p->s[p->pos] < '0' || p->s[p->pos] > '9')
        return xgr_ebnf_expected(p, p->pos, "a number in the repetition {m,n}");
    while (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
        int digit = p->s[p->pos] - '0';
        /* checked before multiplying so a 32-bit long cannot overflow */
        if (x > (XGR_FRONT_MAX_REPEAT - digit) / 10)
            return xgr_ebnf_perr(p, XGR_ERR_SEMANTIC, start,
                                 "repetition bound is too large (the limit is %ld)",
                                 (long)XGR_FRONT_MAX_REPEAT);
        x = x * 10 + digit;
        p->pos++;
    }
    *v = x;
    return XGR_OK;
}

/* Parses `{m}`, `{m,}` or `{m,n}` at p->pos. */
static int parse_braces(ebnf *p, long *min, long *max) {
    size_t max_at = p->pos;
    int rc;
    p->pos++;
    xgr_ebnf_skip_ws(p);
    if ((rc = parse_number(p, min))) return rc;
    xgr_ebnf_skip_ws(p);
    *max = *min;
    if (p->pos < p->n && p->s[p->pos] == ',') {
        p->pos++;
        xgr_ebnf_skip_ws(p);
        if (p->pos < p->n && p->s[p->pos] == '}') {
            *max = -1;
        } else if (p->pos + 1 < p->n && p->s[p->pos] == '-' && p->s[p->pos + 1] == '1') {
            /* upstream xgrammar prints unbounded repetitions as {m, -1} */
            p->pos += 2;
            *max = -1;
            xgr_ebnf_skip_ws(p);
        } else {
            max_at = p->pos;
            if ((rc = parse_number(p, max))) return rc;
            xgr_ebnf_skip_ws(p);
        }
    }
    if (p->pos >= p->n || p->s[p->pos] != '}') return xgr_ebnf_expected(p, p->pos, "'}' or ','");
    p->pos++;
    if (*max >= 0 && *min > *max) /* at the upper bound, as upstream */
        return xgr_ebnf_perr(p, XGR_ERR_SEMANTIC, max_at,
                             "Lower bound is larger than upper bound: %ld > %ld (in the "
                             "repetition {m,n})",
                             *min, *max);
    return XGR_OK;
}

static int parse_postfix(ebnf *p, int32_t *node) {
    int rc;
    if ((rc = parse_primary(p, node))) return rc;
    size_t q = xgr_ebnf_skip_ws_at(p, p->pos);
    if (q >= p->n) return XGR_OK;
    uint8_t c = p->s[q];
    long min, max;
    if (c == '*') {
        min = 0, max = -1;
        p->pos = q + 1;
    } else if (c == '+') {
        min = 1, max = -1;
        p->pos = q + 1;
    } else if (c == '?') {
        min = 0, max = 1;
        p->pos = q + 1;
    } else if (c == '{') {
        p->pos = q;
        if ((rc = parse_braces(p, &min, &max))) return rc;
    } else {
        return XGR_OK;
    }
    q = xgr_ebnf_skip_ws_at(p, p->pos);
    if (q < p->n && (p->s[q] == '*' || p->s[q] == '+' || p->s[q] == '?' || p->s[q] == '{'))
        return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, q,
                             "Expect element, but got %c (a quantifier cannot follow another "
                             "quantifier; use parentheses)",
                             (char)p->s[q]);
    *node = xgr_ir_repeat(p->g, *node, (int32_t)min, (int32_t)max);
    return *node < 0 ? ir_fail() : XGR_OK;
}

static int parse_seq(ebnf *p, int32_t *node) {
    size_t base = p->stack.len;
    int rc;
    for (;;) {
        xgr_ebnf_skip_ws(p);
        if (p->pos >= p->n) break;
        uint8_t c = p->s[p->pos];
        if (c == '|' || c == ')' || at_lookahead(p, p->pos)) break;
        if (xgr_ebnf_is_name_start(c) && xgr_ebnf_at_rule_start(p, p->pos)) break;
        int32_t k = -1;
        if ((rc = parse_postfix(p, &k))) return rc;
        if (XGR_VEC_PUSH(p->stack, k)) return XGR_ERR_NOMEM;
    }
    size_t cnt = p->stack.len - base;
    if (cnt == 0) {
        if (p->pos < p->n && p->s[p->pos] == ')' && p->depth <= 1)
            return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, p->pos,
                                 "Expect element, but got ) (unmatched ')')");
        return expect_element(p, p->pos);
    }
    *node = xgr_ir_seq(p->g, p->stack.data + base, cnt);
    p->stack.len = base;
    return *node < 0 ? ir_fail() : XGR_OK;
}

static int parse_alt(ebnf *p, int32_t *node) {
    int rc;
    if (++p->depth > XGR_FRONT_MAX_DEPTH)
        return xgr_ebnf_perr(p, XGR_ERR_LIMIT, p->pos, "expression nesting is deeper than %d",
                             XGR_FRONT_MAX_DEPTH);
    size_t base = p->stack.len;
    for (;;) {
        int32_t k = -1;
        if ((rc = parse_seq(p, &k))) return rc;
        if (XGR_VEC_PUSH(p->stack, k)) return XGR_ERR_NOMEM;
        xgr_ebnf_skip_ws(p);
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

/* ---- rules ---------------------------------------------------------------------------- */

static int parse_rule(ebnf *p) {
    size_t start = p->pos;
    int rc;
    if (!xgr_ebnf_is_name_start(p->s[start])) {
        if (p->s[start] == ')')
            return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, start, "Expect rule name (unmatched ')')");
        if (start + 3 <= p->n && memcmp(p->s + start, "::=", 3) == 0)
            return xgr_ebnf_lerr(p, XGR_ERR_SYNTAX, start,
                                 start == xgr_ebnf_skip_ws_at(p, 0)
                                     ? "Assign should not be the first token (a rule starts "
                                       "with its name: name ::= ...)"
                                     : "Assign should be preceded by an identifier (a rule name "
                                       "is missing before '::=')");
        if (p->s[start] >= 0x80) {
            uint32_t cp;
            if (!xgr_utf8_decode(p->s + start, p->n - start, &cp))
                return xgr_ebnf_lerr(p, XGR_ERR_UTF8, start, "invalid UTF-8 byte 0x%02x",
                                     (unsigned)p->s[start]);
        }
        char b[32];
        return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, start, "Expect rule name, but got %s",
                             xgr_ebnf_found(p, start, b, sizeof b));
    }
    size_t e = xgr_ebnf_name_end(p, start), he = head_end(p, start);
    p->pos = xgr_ebnf_skip_ws_at(p, he);
    if (p->pos + 3 > p->n || memcmp(p->s + p->pos, "::=", 3) != 0)
        return xgr_ebnf_expected(p, p->pos, "'::=' after the rule name");
    p->pos += 3;
    int32_t r = xgr_ir_rule(p->g, (const char *)p->s + start, e - start);
    if (r < 0) return ir_fail();
    if (he > e) {
        char msg[128];
        size_t at = e;
        xgr_rule_attrs a;
        rc = xgr_attrs_parse(p->s, e, he - e, p->g, &a, &at, msg, sizeof msg);
        if (rc == XGR_ERR_NOMEM) return ir_fail();
        if (rc) return xgr_ebnf_perr(p, rc, at, "%s", msg);
        if (a.capture_off == -2 && (a.capture_off = xgr_ir_add_name(
                                        p->g, (const char *)p->s + start, e - start)) < 0)
            return ir_fail();
        p->g->rules.data[r].attrs = a;
    }
    if ((rc = xgr_ebnf_track_rules(p))) return rc;
    if (p->def_pos.data[r]) {
        size_t l, c;
        xgr_diag_line_col(p->s, p->n, p->def_pos.data[r] - 1, &l, &c);
        return xgr_ebnf_perr(p, XGR_ERR_SEMANTIC, start,
                             "Rule \"%s\" is defined multiple times (first at line %zu, column "
                             "%zu)",
                             xgr_ir_rule_name(p->g, r), l, c);
    }
    p->def_pos.data[r] = start + 1;
    int32_t body, la = -1;
    p->depth = 0;
    size_t first_node = p->g->nodes.len;
    if ((rc = parse_alt(p, &body))) return rc;
    if ((rc = xgr_ebnf_macro_lift(p, r, body, first_node))) return rc;
    xgr_ebnf_skip_ws(p);
    if (at_lookahead(p, p->pos)) {
        p->pos = xgr_ebnf_skip_ws_at(p, p->pos + 1) + 1; /* past '(' and '=' */
        xgr_ebnf_skip_ws(p);
        p->in_lookahead = 1;
        rc = parse_alt(p, &la);
        p->in_lookahead = 0;
        if (rc) return rc;
        xgr_ebnf_skip_ws(p);
        if (p->pos >= p->n || p->s[p->pos] != ')')
            return xgr_ebnf_expected(p, p->pos, "')' closing the lookahead assertion");
        p->pos++;
        xgr_ebnf_skip_ws(p);
        if (at_lookahead(p, p->pos))
            return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, p->pos,
                                 "Expect rule name (a rule takes at most one lookahead "
                                 "assertion)");
        if (p->pos < p->n && !xgr_ebnf_at_rule_start(p, p->pos))
            return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, p->pos,
                                 "Expect rule name (the lookahead assertion '(= ...)' must end "
                                 "the rule body)");
    }
    p->g->rules.data[r].body = body;
    p->g->rules.data[r].lookahead = la;
    return XGR_OK;
}

/* Declares every rule in definition order before parsing, so rule ids (and hence the
 * printer's rule order) follow the source rather than the order of first mention; that
 * keeps print(parse(print(g))) == print(g). The scan skips literals and comments like
 * the lexer does; on malformed input it may disagree, but then parsing fails anyway. */
static int declare_rules(ebnf *p) {
    size_t i = xgr_ebnf_skip_ws_at(p, 0);
    while (i < p->n) {
        uint8_t c = p->s[i];
        if (c == '"' || c == '[') {
            uint8_t close = c == '"' ? '"' : ']';
            i++;
            while (i < p->n && p->s[i] != close && p->s[i] != '\n') i += p->s[i] == '\\' ? 2 : 1;
            i++;
        } else if (c == '#') {
            while (i < p->n && p->s[i] != '\n') i++;
        } else if (xgr_ebnf_is_name_start(c)) {
            size_t e = xgr_ebnf_name_end(p, i);
            size_t j = xgr_ebnf_skip_ws_at(p, head_end(p, i));
            if (j + 3 <= p->n && memcmp(p->s + j, "::=", 3) == 0) {
                if (xgr_ir_rule(p->g, (const char *)p->s + i, e - i) < 0) return ir_fail();
                i = j + 3;
            } else {
                i = e;
            }
        } else {
            i++;
        }
    }
    return xgr_ebnf_track_rules(p);
}

/* The rules named by capture_hidden_{body,marker}_rule_id (rule_attrs.c): an id (the
 * rule's index in the text) or a name. */
static int resolve_hidden(ebnf *p) {
    xgr_grammar *g = p->g;
    for (size_t r = 0; r < g->rules.len; r++) {
        int32_t *t[2] = {&g->rules.data[r].attrs.hidden_body, &g->rules.data[r].attrs.hidden_marker};
        for (int k = 0; k < 2; k++) {
            int32_t v = *t[k];
            if (v == -1) continue;
            if (v <= -2) {
                const char *nm = g->names.data + (-2 - v);
                v = xgr_ir_find_rule(g, nm, strlen(nm));
            }
            if (v < 0 || (size_t)v >= g->rules.len)
                return xgr_fail(XGR_ERR_SEMANTIC,
                                "EBNF error: capture_hidden_%s_rule_id of rule '%s' names no rule",
                                k ? "marker" : "body", xgr_ir_rule_name(g, (int32_t)r));
            *t[k] = v;
        }
    }
    return XGR_OK;
}

static int parse_file(ebnf *p, const char *root, size_t root_len) {
    int rc;
    if ((rc = declare_rules(p))) return rc;
    xgr_ebnf_skip_ws(p);
    while (p->pos < p->n) {
        if ((rc = parse_rule(p))) return rc;
        xgr_ebnf_skip_ws(p);
    }
    for (size_t r = 0; r < p->g->rules.len; r++) {
        if (p->g->rules.data[r].body >= 0) continue;
        size_t at = r < p->ref_pos.len && p->ref_pos.data[r] ? p->ref_pos.data[r] - 1 : 0;
        const char *name = xgr_ir_rule_name(p->g, (int32_t)r);
        if (r < p->ref_td.len && p->ref_td.data[r]) {
            size_t l, c;
            xgr_diag_line_col(p->s, p->n, p->ref_td.data[r] - 1, &l, &c);
            return xgr_ebnf_perr(p, XGR_ERR_SEMANTIC, at,
                                 "Rule \"%s\" is not defined (referenced by the TagDispatch "
                                 "pair at line %zu, column %zu)",
                                 name, l, c);
        }
        return xgr_ebnf_perr(p, XGR_ERR_SEMANTIC, at, "Rule \"%s\" is not defined", name);
    }
    if ((rc = resolve_hidden(p))) return rc;
    int32_t rr = xgr_ir_find_rule(p->g, root, root_len);
    if (rr < 0) {
        char q[80];
        return xgr_ebnf_perr(p, XGR_ERR_SEMANTIC, 0, "The root rule with name \"%s\" is not found",
                             xgr_diag_quote((const uint8_t *)root, root_len, q, sizeof q));
    }
    p->g->root = rr;
    return xgr_ir_validate(p->g);
}

int xgr_grammar_from_ebnf(const char *src, size_t src_len, const char *root,
                          size_t root_len, xgr_grammar **out) {
    if (!out) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_grammar_from_ebnf: out is NULL");
    *out = NULL;
    if (!src && src_len) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_grammar_from_ebnf: src is NULL");
    if (!root || root_len == 0) {
        root = "root";
        root_len = 4;
    }
    if (memchr(root, 0, root_len))
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_grammar_from_ebnf: root name contains NUL");
    ebnf p;
    memset(&p, 0, sizeof p);
    p.s = (const uint8_t *)(src ? src : "");
    p.n = src_len;
    p.g = xgr_ir_new();
    if (!p.g) return XGR_ERR_NOMEM;
    int rc = parse_file(&p, root, root_len);
    XGR_VEC_FREE(p.stack);
    XGR_VEC_FREE(p.buf);
    XGR_VEC_FREE(p.ranges);
    XGR_VEC_FREE(p.ref_pos);
    XGR_VEC_FREE(p.ref_td);
    XGR_VEC_FREE(p.def_pos);
    if (rc) {
        xgr_ir_free(p.g);
        return rc;
    }
    *out = p.g;
    return XGR_OK;
}
