/* EBNF front end: upstream xgrammar's dialect (plus the raw-byte extension described in
 * front.h) parsed by recursive descent straight into the IR.
 *
 * Rules are `name ::= expr` and may span lines: a rule ends where the next `name ::=`
 * starts, so newlines are plain whitespace. Groups keep their structure in the IR (no
 * flattening), which is what makes print(parse(print(parse(x)))) == print(parse(x)). */
#include <stdarg.h>
#include <stdio.h>

#include "front.h"
#include "rule_attrs.h"
#include "../common/token_marker.h"

#if defined(__GNUC__)
#define XGR_NOINLINE __attribute__((noinline))
#else
#define XGR_NOINLINE
#endif

typedef XGR_VEC(int32_t) i32vec;
typedef XGR_VEC(uint8_t) u8vec;
typedef XGR_VEC(uint32_t) u32vec;
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
    szvec def_pos; /* per rule: offset of its definition + 1 (0: not defined yet) */
    int in_lookahead; /* parsing a `(= ...)` assertion, where TagDispatch is not allowed */
} ebnf;

enum { CTX_STRING, CTX_BSTRING, CTX_CLASS, CTX_BCLASS };

static void line_col(const uint8_t *s, size_t n, size_t pos, size_t *line, size_t *col) {
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

/* Kept out of line so the message buffer does not sit in every recursive frame. */
static XGR_NOINLINE int perr(const ebnf *p, int code, size_t pos, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static XGR_NOINLINE int perr(const ebnf *p, int code, size_t pos, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t line, col;
    line_col(p->s, p->n, pos, &line, &col);
    const char *kind = code == XGR_ERR_SYNTAX ? "EBNF syntax error"
                       : code == XGR_ERR_UTF8 ? "EBNF encoding error"
                                              : "EBNF error";
    return xgr_fail(code, "%s at line %zu, column %zu: %s", kind, line, col, msg);
}

/* What the parser found at pos, for "expected X, found Y" messages. */
static XGR_NOINLINE const char *found(const ebnf *p, size_t pos, char *out, size_t cap) {
    if (pos >= p->n) return "end of input";
    uint8_t c = p->s[pos];
    uint32_t cp;
    int k;
    if (c == '\n') return "end of line";
    if (c >= 0x20 && c < 0x7f) {
        snprintf(out, cap, "'%c'", (char)c);
    } else if (c >= 0x80 && (k = xgr_utf8_decode(p->s + pos, p->n - pos, &cp)) > 0) {
        snprintf(out, cap, "'%.*s'", k, (const char *)p->s + pos);
    } else {
        snprintf(out, cap, "byte 0x%02x", (unsigned)c);
    }
    return out;
}

static XGR_NOINLINE int expected(const ebnf *p, size_t pos, const char *what) {
    char b[32];
    return perr(p, XGR_ERR_SYNTAX, pos, "expected %s, found %s", what, found(p, pos, b, sizeof b));
}

static int ir_fail(void) { return xgr_front_ir_status(); }

static int is_name_start(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-' ||
           c == '.';
}
static int is_name_char(int c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static size_t skip_ws_at(const ebnf *p, size_t i) {
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
static void skip_ws(ebnf *p) { p->pos = skip_ws_at(p, p->pos); }

static size_t name_end(const ebnf *p, size_t i) {
    if (i >= p->n || !is_name_start(p->s[i])) return i;
    while (i < p->n && is_name_char(p->s[i])) i++;
    return i;
}

/* End of a rule head's name at i: past `name` and its attribute group `[...]` when one
 * follows it directly (rule_attrs.h); i when there is no name. */
static size_t head_end(const ebnf *p, size_t i) {
    size_t e = name_end(p, i);
    if (e == i) return i;
    size_t g = xgr_attrs_group_len(p->s, p->n, e);
    if (g) {
        size_t j = skip_ws_at(p, e + g);
        if (j + 3 <= p->n && memcmp(p->s + j, "::=", 3) == 0) return e + g;
    }
    return e;
}

/* `name ::=` (or `name[attrs] ::=`) starts at i: the current rule body ends here. */
static int at_rule_start(const ebnf *p, size_t i) {
    size_t e = head_end(p, i);
    if (e == i) return 0;
    e = skip_ws_at(p, e);
    return e + 3 <= p->n && memcmp(p->s + e, "::=", 3) == 0;
}

/* `(` followed by `=`: a lookahead assertion starts at i. */
static int at_lookahead(const ebnf *p, size_t i) {
    if (i >= p->n || p->s[i] != '(') return 0;
    i = skip_ws_at(p, i + 1);
    return i < p->n && p->s[i] == '=';
}

static int track_rules(ebnf *p) {
    size_t nr = p->g->rules.len;
    if (XGR_VEC_RESERVE(p->ref_pos, nr) || XGR_VEC_RESERVE(p->def_pos, nr))
        return XGR_ERR_NOMEM;
    while (p->ref_pos.len < nr) p->ref_pos.data[p->ref_pos.len++] = 0;
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
        return perr(p, XGR_ERR_SYNTAX, start, "unterminated escape sequence at end of input");
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
    case '"': case '\\': case '\'': case '/': v = c; break;
    case ']': case '-': case '^': case '[':
        if (!in_class) goto bad;
        v = c;
        break;
    case 'x':
        if (!read_hex(p, start + 2, 1, 2, &v, &end))
            return perr(p, XGR_ERR_SYNTAX, start, "invalid escape: expected hex digits after \\x");
        *is_x = 1;
        break;
    case 'u':
        if (!read_hex(p, start + 2, 4, 4, &v, &end))
            return perr(p, XGR_ERR_SYNTAX, start,
                        "invalid escape: expected 4 hex digits after \\u");
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
            return perr(p, XGR_ERR_SYNTAX, start,
                        "invalid escape: expected 8 hex digits after \\U");
        if (v > 0x10ffff)
            return perr(p, XGR_ERR_SYNTAX, start,
                        "invalid escape: code point 0x%lx is above U+10FFFF",
                        (unsigned long)v);
        break;
    default:
    bad: {
        char b[32];
        return perr(p, XGR_ERR_SYNTAX, start, "invalid escape sequence: backslash followed by %s",
                    found(p, start + 1, b, sizeof b));
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
static int lex_string(ebnf *p, int bytes) {
    size_t start = p->pos;
    p->pos += bytes ? 2 : 1;
    p->buf.len = 0;
    for (;;) {
        if (p->pos >= p->n)
            return perr(p, XGR_ERR_SYNTAX, start, "unterminated string literal");
        uint8_t c = p->s[p->pos];
        if (c == '"') {
            p->pos++;
            return XGR_OK;
        }
        if (c == '\n')
            return perr(p, XGR_ERR_SYNTAX, start,
                        "unterminated string literal (a newline inside a string must be "
                        "written \\n)");
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
                return perr(p, XGR_ERR_SYNTAX, epos,
                            "lone surrogate U+%04lX cannot appear in a string",
                            (unsigned long)cp);
            if ((rc = buf_put_cp(p, cp))) return rc;
            continue;
        }
        uint32_t cp;
        int k = xgr_utf8_decode(p->s + p->pos, p->n - p->pos, &cp);
        if (!k) return perr(p, XGR_ERR_UTF8, p->pos, "invalid UTF-8 byte 0x%02x", (unsigned)c);
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
            return perr(p, XGR_ERR_SYNTAX, at,
                        "a byte class b[...] takes ASCII characters and \\xNN escapes only");
        return XGR_OK;
    }
    int k = xgr_utf8_decode(p->s + at, p->n - at, out);
    if (!k) return perr(p, XGR_ERR_UTF8, at, "invalid UTF-8 byte 0x%02x", (unsigned)c);
    if (bytes && *out > 0x7f)
        return perr(p, XGR_ERR_SYNTAX, at,
                    "a byte class b[...] takes ASCII characters and \\xNN escapes only");
    p->pos += (size_t)k;
    return XGR_OK;
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
        if (p->pos >= p->n || p->s[p->pos] == '\n')
            return perr(p, XGR_ERR_SYNTAX, start, "unterminated character class");
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
            if (p->s[p->pos] == '\n')
                return perr(p, XGR_ERR_SYNTAX, start, "unterminated character class");
            if ((rc = read_class_char(p, bytes, &hi))) return rc;
            if (lo > hi)
                return perr(p, XGR_ERR_SEMANTIC, item,
                            "invalid character range: start U+%04lX is above end U+%04lX",
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

/* One macro argument value at p->pos, skipped (a string is left in p->buf); *kind says
 * what it was. Upstream's values: string, integer, boolean, tuple; a bare name also
 * parses (Regex(abc) then reports that the pattern must be a string). */
enum { MARG_STRING, MARG_INT, MARG_TRUE, MARG_FALSE, MARG_TUPLE, MARG_NAME };

static int skip_macro_value(ebnf *p, int *kind, int depth) {
    size_t at = p->pos;
    uint8_t c = at < p->n ? p->s[at] : 0;
    if (depth > XGR_FRONT_MAX_DEPTH)
        return perr(p, XGR_ERR_LIMIT, at, "macro argument nesting is deeper than %d",
                    XGR_FRONT_MAX_DEPTH);
    if (c == '"') {
        *kind = MARG_STRING;
        return lex_string(p, 0);
    }
    if ((c >= '0' && c <= '9') || (c == '-' && at + 1 < p->n && p->s[at + 1] >= '0' &&
                                   p->s[at + 1] <= '9')) {
        p->pos++;
        while (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
        *kind = MARG_INT;
        return XGR_OK;
    }
    if (c == '(') {
        int k, rc;
        p->pos = skip_ws_at(p, at + 1);
        while (p->pos < p->n && p->s[p->pos] != ')') {
            if ((rc = skip_macro_value(p, &k, depth + 1))) return rc;
            skip_ws(p);
            if (p->pos < p->n && p->s[p->pos] == ',') p->pos = skip_ws_at(p, p->pos + 1);
            else if (p->pos >= p->n || p->s[p->pos] != ')') return expected(p, p->pos, "',' or ')'");
        }
        if (p->pos >= p->n) return perr(p, XGR_ERR_SYNTAX, at, "unclosed '('");
        p->pos++;
        *kind = MARG_TUPLE;
        return XGR_OK;
    }
    if (is_name_start(c)) {
        size_t e = name_end(p, at);
        *kind = e - at == 4 && memcmp(p->s + at, "true", 4) == 0    ? MARG_TRUE
                : e - at == 5 && memcmp(p->s + at, "false", 5) == 0 ? MARG_FALSE
                                                                    : MARG_NAME;
        p->pos = e;
        return XGR_OK;
    }
    return perr(p, XGR_ERR_SYNTAX, at,
                "Expect string, integer, boolean, or tuple in macro argument");
}

/* Regex("pattern" [, json_string=true|false] [, flags="..."]) with upstream xgrammar
 * 0.2.8's argument rules and messages; `start` is where "Regex" begins, p->pos is just
 * after its '('. flags: i (ASCII case folding), s ('.' matches \n), u (no-op); with a
 * flags argument, '.' excludes \n unless s. */
static XGR_NOINLINE int parse_regex_macro(ebnf *p, size_t start, int32_t *node) {
    xgr_regex_opts o = {XGR_REGEX_MACRO, 0, 0, 0, 0};
    size_t str_pos = 0;
    int n_positional = 0, pat_is_string = 0, kind, rc;
    skip_ws(p);
    while (p->pos < p->n && p->s[p->pos] != ')') {
        size_t arg = p->pos;
        size_t e = is_name_start(p->s[arg]) ? name_end(p, arg) : arg;
        size_t eq = skip_ws_at(p, e);
        if (e > arg && eq < p->n && p->s[eq] == '=') {
            p->pos = skip_ws_at(p, eq + 1);
            if ((rc = skip_macro_value(p, &kind, 0))) return rc;
            if (e - arg == 11 && memcmp(p->s + arg, "json_string", 11) == 0) {
                if (kind != MARG_TRUE && kind != MARG_FALSE)
                    return perr(p, XGR_ERR_SYNTAX, arg, "json_string must be a boolean");
                o.json_string = kind == MARG_TRUE;
            } else if (e - arg == 5 && memcmp(p->s + arg, "flags", 5) == 0) {
                if (kind != MARG_STRING)
                    return perr(p, XGR_ERR_SYNTAX, arg, "flags must be a string");
                o.has_flags = 1;
                for (size_t i = 0; i < p->buf.len; i++) {
                    uint8_t f = (uint8_t)p->buf.data[i];
                    if (f == 'i') o.icase = 1;
                    else if (f == 's') o.dot_all = 1;
                    else if (f != 'u')
                        return perr(p, XGR_ERR_SYNTAX, arg,
                                    f >= 0x20 && f < 0x7f
                                        ? "regular-expression flag '%c' is not supported "
                                          "(Regex flags are i, s and u)"
                                        : "regular-expression flag '\\x%02x' is not supported "
                                          "(Regex flags are i, s and u)",
                                    f);
                }
            } else {
                return perr(p, XGR_ERR_SYNTAX, arg,
                            "Regex does not support the named argument %.*s (it has "
                            "json_string and flags)",
                            (int)(e - arg), (const char *)p->s + arg);
            }
        } else {
            if ((rc = skip_macro_value(p, &kind, 0))) return rc;
            if (++n_positional == 1) str_pos = arg, pat_is_string = kind == MARG_STRING;
        }
        skip_ws(p);
        if (p->pos < p->n && p->s[p->pos] == ',') {
            p->pos++;
            skip_ws(p);
            if (p->pos < p->n && p->s[p->pos] == ')')
                return perr(p, XGR_ERR_SYNTAX, p->pos,
                            "Expect string, integer, boolean, or tuple in macro argument");
        } else if (p->pos >= p->n || p->s[p->pos] != ')') {
            return expected(p, p->pos, "',' or ')' closing Regex(");
        }
    }
    if (p->pos >= p->n) return expected(p, p->pos, "')' closing Regex(");
    p->pos++;
    if (n_positional != 1)
        return perr(p, XGR_ERR_SYNTAX, start, "Regex expects exactly one string argument");
    if (!pat_is_string)
        return perr(p, XGR_ERR_SYNTAX, str_pos, "Regex pattern must be a string literal");
    size_t end = p->pos; /* re-read the pattern: a flags string may have reused p->buf */
    p->pos = str_pos;
    if ((rc = lex_string(p, 0))) return rc;
    p->pos = end;
    rc = xgr_regex_to_node_opts(p->g, (const char *)p->buf.data, p->buf.len, &o, node);
    if (rc) {
        char inner[600];
        snprintf(inner, sizeof inner, "%s", xgr_last_error());
        return perr(p, rc, str_pos, "in the pattern of Regex(...): %s", inner);
    }
    return XGR_OK;
}

/* ---- Substring(...) --------------------------------------------------------------------
 * Upstream xgrammar 0.2.8's macro: Substring( ["chunk" {, "chunk"}] ), no trailing comma,
 * no named arguments. It matches any run of consecutive chunks (the empty run included);
 * chunks are atomic. Chunks may be empty and may use the b"..." raw-byte extension (so a
 * printed grammar parses back). Like TagDispatch, a Substring that is not a whole rule
 * body is moved into a fresh rule (lift_body_macros). p->pos is at the '('. */
static XGR_NOINLINE int parse_substring(ebnf *p, size_t start, int32_t *node) {
    u8vec data = {0};
    szvec len = {0};
    const uint8_t **str = NULL;
    int rc = XGR_OK;
    p->pos = skip_ws_at(p, p->pos + 1);
    if (p->pos < p->n && p->s[p->pos] == ')') {
        p->pos++;
    } else {
        for (;;) {
            size_t at = p->pos;
            int bytes = at + 1 < p->n && p->s[at] == 'b' && p->s[at + 1] == '"';
            if (at < p->n && (p->s[at] == '"' || bytes)) {
                if ((rc = lex_string(p, bytes))) goto done;
                if (XGR_VEC_RESERVE(data, data.len + p->buf.len + 1) ||
                    XGR_VEC_PUSH(len, p->buf.len)) {
                    rc = XGR_ERR_NOMEM;
                    goto done;
                }
                if (p->buf.len) memcpy(data.data + data.len, p->buf.data, p->buf.len);
                data.len += p->buf.len;
            } else if (at < p->n && is_name_start(p->s[at])) {
                size_t q = skip_ws_at(p, name_end(p, at));
                int nl = (int)(name_end(p, at) - at > 40 ? 40 : name_end(p, at) - at);
                rc = q < p->n && p->s[q] == '='
                         ? perr(p, XGR_ERR_SYNTAX, at,
                                "Substring() does not accept named arguments, found '%.*s='",
                                nl, (const char *)p->s + at)
                         : perr(p, XGR_ERR_SYNTAX, at,
                                "Substring() arguments must be strings (\"...\"), found '%.*s'",
                                nl, (const char *)p->s + at);
                goto done;
            } else if (at >= p->n || p->s[at] == ')' || p->s[at] == ',' ||
                       at_rule_start(p, at)) {
                rc = at >= p->n ? perr(p, XGR_ERR_SYNTAX, start, "unclosed 'Substring('")
                                : expected(p, at, "a string argument in Substring(...)");
                goto done;
            } else {
                char b[32];
                rc = perr(p, XGR_ERR_SYNTAX, at, "Substring() arguments must be strings, found %s",
                          found(p, at, b, sizeof b));
                goto done;
            }
            p->pos = skip_ws_at(p, p->pos);
            if (p->pos < p->n && p->s[p->pos] == ',') {
                p->pos = skip_ws_at(p, p->pos + 1);
                continue;
            }
            if (p->pos < p->n && p->s[p->pos] == ')') {
                p->pos++;
                break;
            }
            rc = p->pos >= p->n || at_rule_start(p, p->pos)
                     ? perr(p, XGR_ERR_SYNTAX, start, "unclosed 'Substring('")
                     : expected(p, p->pos, "',' or ')' in Substring(...)");
            goto done;
        }
    }
    str = xgr_malloc((len.len ? len.len : 1) * sizeof *str);
    if (!str) {
        rc = XGR_ERR_NOMEM;
        goto done;
    }
    for (size_t i = 0, off = 0; i < len.len; off += len.data[i], i++) str[i] = data.data + off;
    *node = xgr_ir_substring(p->g, str, len.data, len.len);
    if (*node < 0) rc = ir_fail();
done:
    free(str);
    XGR_VEC_FREE(data);
    XGR_VEC_FREE(len);
    return rc;
}

/* ---- TagDispatch(...) ------------------------------------------------------------------
 * Upstream xgrammar 0.2.8's macro, with its argument syntax:
 *   TagDispatch( [arg {, arg}] )        no trailing comma after the last argument
 *   arg := ("trigger", rule_name)       a pair; a trailing comma inside is allowed
 *        | loop_after_dispatch=true|false          (default true)
 *        | excludes=( ["s" {, "s"} [,]] )          (default ())
 * Pairs and named arguments may come in any order; a repeated named argument overrides the
 * earlier one. Strings must be non-empty and may use the b"..." raw-byte extension (so that
 * printed grammars with non-UTF-8 triggers parse back). As in upstream, an excluded string
 * must not be a prefix of (or equal to) a trigger. Upstream 0.2.8 rejects the older
 * `stop_eos` / `stop_str` arguments; so does this parser, with a hint. A TagDispatch that
 * is not a whole rule body is moved into a fresh rule `<rule>_1` (see lift_tag_dispatch),
 * which is what upstream does too. */

typedef struct {
    size_t off, len, pos; /* bytes in td->data; source offset of the literal */
    int32_t rule;         /* triggers only */
} td_str;

typedef struct {
    XGR_VEC(td_str) trig, excl;
    u8vec data;
    int loop;
} td_args;

static void td_args_free(td_args *a) {
    XGR_VEC_FREE(a->trig);
    XGR_VEC_FREE(a->excl);
    XGR_VEC_FREE(a->data);
}

/* `Token(` at p->pos (the name): the token ids inside, as markers in p->buf, one after
 * another (XGR_TOKEN_MARKER_LEN bytes each); *count gets how many. Ids are decimal
 * integers separated by commas; `ExcludeToken(...)` is refused with a hint. */
static int lex_token_ids(ebnf *p, int32_t *count) {
    size_t start = p->pos;
    p->pos = skip_ws_at(p, p->pos + 5);
    if (p->pos >= p->n || p->s[p->pos] != '(') return expected(p, p->pos, "'(' after Token");
    p->pos = skip_ws_at(p, p->pos + 1);
    p->buf.len = 0;
    *count = 0;
    for (;;) {
        size_t at = p->pos;
        long id = 0;
        if (at >= p->n || p->s[at] < '0' || p->s[at] > '9')
            return expected(p, at, "a token id (a non-negative integer) in Token(...)");
        while (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
            id = id * 10 + (p->s[p->pos] - '0');
            if (id > XGR_TOKEN_ID_MAX)
                return perr(p, XGR_ERR_SEMANTIC, at, "token id in Token(...) is larger than %d",
                            (int)XGR_TOKEN_ID_MAX);
            p->pos++;
        }
        if (XGR_VEC_RESERVE(p->buf, p->buf.len + XGR_TOKEN_MARKER_LEN)) return XGR_ERR_NOMEM;
        xgr_token_marker((int32_t)id, p->buf.data + p->buf.len);
        p->buf.len += XGR_TOKEN_MARKER_LEN;
        (*count)++;
        p->pos = skip_ws_at(p, p->pos);
        if (p->pos < p->n && p->s[p->pos] == ',') {
            p->pos = skip_ws_at(p, p->pos + 1);
            continue;
        }
        if (p->pos < p->n && p->s[p->pos] == ')') {
            p->pos++;
            return XGR_OK;
        }
        if (p->pos >= p->n) return perr(p, XGR_ERR_SYNTAX, start, "unclosed 'Token('");
        return expected(p, p->pos, "',' or ')' in Token(...)");
    }
}

static int at_token_macro(const ebnf *p, size_t at) {
    return at + 5 <= p->n && memcmp(p->s + at, "Token", 5) == 0 &&
           (at + 5 == p->n || !is_name_char(p->s[at + 5])) &&
           skip_ws_at(p, at + 5) < p->n && p->s[skip_ws_at(p, at + 5)] == '(';
}

/* A non-empty string argument ("..." or b"..." or Token(k)) at p->pos, appended to
 * a->data. */
static int td_string(ebnf *p, td_args *a, const char *what, td_str *out) {
    size_t at = p->pos;
    int rc, bytes = at + 1 < p->n && p->s[at] == 'b' && p->s[at + 1] == '"';
    if (at_token_macro(p, at)) {
        int32_t k;
        if ((rc = lex_token_ids(p, &k))) return rc;
        if (k != 1)
            return perr(p, XGR_ERR_SEMANTIC, at, "TagDispatch: Token(...) as %s takes one id",
                        what);
    } else if (!bytes && (at >= p->n || p->s[at] != '"')) {
        return expected(p, at, what);
    } else if ((rc = lex_string(p, bytes))) {
        return rc;
    }
    if (!p->buf.len)
        return perr(p, XGR_ERR_SEMANTIC, at, "TagDispatch: %s must not be empty", what);
    out->off = a->data.len;
    out->len = p->buf.len;
    out->pos = at;
    out->rule = -1;
    if (XGR_VEC_RESERVE(a->data, a->data.len + p->buf.len)) return XGR_ERR_NOMEM;
    memcpy(a->data.data + a->data.len, p->buf.data, p->buf.len);
    a->data.len += p->buf.len;
    return XGR_OK;
}

/* ("trigger", rule_name) at p->pos (an opening parenthesis). */
static int td_pair(ebnf *p, td_args *a) {
    size_t open = p->pos;
    td_str t;
    int rc;
    p->pos = skip_ws_at(p, p->pos + 1);
    if (p->pos < p->n && p->s[p->pos] == ')')
        return perr(p, XGR_ERR_SYNTAX, open,
                    "TagDispatch: each element must be a pair (\"trigger\", rule_name)");
    if ((rc = td_string(p, a, "a trigger string", &t))) return rc;
    p->pos = skip_ws_at(p, p->pos);
    if (p->pos >= p->n || p->s[p->pos] != ',')
        return expected(p, p->pos, "',' and a rule name after the trigger string");
    p->pos = skip_ws_at(p, p->pos + 1);
    size_t at = p->pos, e = name_end(p, at);
    if (e == at) return expected(p, at, "a rule name after the trigger string");
    int32_t r = xgr_ir_rule(p->g, (const char *)p->s + at, e - at);
    if (r < 0) return ir_fail();
    if ((rc = track_rules(p))) return rc;
    if (!p->ref_pos.data[r]) p->ref_pos.data[r] = at + 1;
    t.rule = r;
    p->pos = skip_ws_at(p, e);
    if (p->pos < p->n && p->s[p->pos] == ',') p->pos = skip_ws_at(p, p->pos + 1);
    if (p->pos >= p->n || p->s[p->pos] != ')') {
        if (p->pos < p->n && (p->s[p->pos] == '"' || is_name_start(p->s[p->pos])))
            return perr(p, XGR_ERR_SYNTAX, open,
                        "TagDispatch: each element must be a pair (\"trigger\", rule_name)");
        return expected(p, p->pos, "')' closing the (trigger, rule) pair");
    }
    p->pos++;
    return XGR_VEC_PUSH(a->trig, t) ? XGR_ERR_NOMEM : XGR_OK;
}

/* excludes=( ... ) value at p->pos. Replaces earlier excludes. */
static int td_excludes(ebnf *p, td_args *a) {
    int rc;
    if (p->pos >= p->n || p->s[p->pos] != '(')
        return expected(p, p->pos, "a tuple of strings after excludes=, e.g. (\"</s>\")");
    a->excl.len = 0;
    p->pos = skip_ws_at(p, p->pos + 1);
    while (p->pos < p->n && p->s[p->pos] != ')') {
        td_str t;
        if ((rc = td_string(p, a, "an excluded string", &t))) return rc;
        if (XGR_VEC_PUSH(a->excl, t)) return XGR_ERR_NOMEM;
        p->pos = skip_ws_at(p, p->pos);
        if (p->pos < p->n && p->s[p->pos] == ',') {
            p->pos = skip_ws_at(p, p->pos + 1);
        } else if (p->pos >= p->n || p->s[p->pos] != ')') {
            return expected(p, p->pos, "',' or ')' in the excludes tuple");
        }
    }
    if (p->pos >= p->n) return expected(p, p->pos, "')' closing the excludes tuple");
    p->pos++;
    return XGR_OK;
}

/* name=value at p->pos. */
static int td_named(ebnf *p, td_args *a) {
    size_t at = p->pos, e = name_end(p, at), len = e - at;
    const char *nm = (const char *)p->s + at;
    int is_loop = len == 19 && memcmp(nm, "loop_after_dispatch", 19) == 0;
    int is_excl = len == 8 && memcmp(nm, "excludes", 8) == 0;
    if (!is_loop && !is_excl) {
        if ((len == 8 && memcmp(nm, "stop_eos", 8) == 0) ||
            (len == 8 && memcmp(nm, "stop_str", 8) == 0))
            return perr(p, XGR_ERR_SYNTAX, at,
                        "TagDispatch argument '%.*s' (older xgrammar releases) is not "
                        "supported, as in xgrammar 0.2.8; use loop_after_dispatch=true|false "
                        "and excludes=(...), with the stop string after the rule",
                        (int)len, nm);
        size_t q = skip_ws_at(p, e);
        if (q < p->n && p->s[q] == '=')
            return perr(p, XGR_ERR_SYNTAX, at,
                        "unknown TagDispatch argument '%.*s' (expected loop_after_dispatch "
                        "or excludes)", (int)(len > 64 ? 64 : len), nm);
        return perr(p, XGR_ERR_SYNTAX, at,
                    "TagDispatch: each element must be a (\"trigger\", rule_name) pair "
                    "or a named argument");
    }
    p->pos = skip_ws_at(p, e);
    if (p->pos >= p->n || p->s[p->pos] != '=')
        return expected(p, p->pos, is_loop ? "'=' after loop_after_dispatch" : "'=' after excludes");
    p->pos = skip_ws_at(p, p->pos + 1);
    if (is_excl) return td_excludes(p, a);
    size_t v = p->pos, ve = name_end(p, v);
    if (ve - v == 4 && memcmp(p->s + v, "true", 4) == 0) {
        a->loop = 1;
    } else if (ve - v == 5 && memcmp(p->s + v, "false", 5) == 0) {
        a->loop = 0;
    } else if (ve > v) {
        return perr(p, XGR_ERR_SYNTAX, v,
                    "loop_after_dispatch takes a boolean literal (true or false), found '%.*s'",
                    (int)(ve - v > 40 ? 40 : ve - v), (const char *)p->s + v);
    } else {
        return expected(p, v, "true or false (loop_after_dispatch takes a boolean literal)");
    }
    p->pos = ve;
    return XGR_OK;
}

/* The arguments after `TagDispatch`; p->pos is at the opening parenthesis. */
static XGR_NOINLINE int parse_tag_dispatch(ebnf *p, size_t start, int32_t *node) {
    td_args a;
    memset(&a, 0, sizeof a);
    a.loop = 1;
    const uint8_t **str = NULL;
    size_t *len = NULL;
    int32_t *rules = NULL;
    int rc = XGR_OK;
    p->pos = skip_ws_at(p, p->pos + 1);
    if (p->pos < p->n && p->s[p->pos] != ')') {
        for (;;) {
            if (p->pos < p->n && p->s[p->pos] == '(')
                rc = td_pair(p, &a);
            else if (p->pos < p->n && is_name_start(p->s[p->pos]) &&
                     !(p->s[p->pos] == 'b' && p->pos + 1 < p->n && p->s[p->pos + 1] == '"'))
                rc = td_named(p, &a);
            else if (p->pos < p->n && (p->s[p->pos] == '"' || p->s[p->pos] == 'b'))
                rc = perr(p, XGR_ERR_SYNTAX, p->pos,
                          "TagDispatch: each element must be a (\"trigger\", rule_name) pair; "
                          "write (\"trigger\", rule_name)");
            else
                rc = expected(p, p->pos, "a (\"trigger\", rule_name) pair or a named argument");
            if (rc) goto done;
            p->pos = skip_ws_at(p, p->pos);
            if (p->pos < p->n && p->s[p->pos] == ',') {
                p->pos = skip_ws_at(p, p->pos + 1);
                continue;
            }
            break;
        }
    }
    if (p->pos >= p->n || p->s[p->pos] != ')') {
        rc = p->pos >= p->n || at_rule_start(p, p->pos)
                 ? perr(p, XGR_ERR_SYNTAX, start, "unclosed 'TagDispatch('")
                 : expected(p, p->pos, "',' or ')' in TagDispatch(...)");
        goto done;
    }
    p->pos++;
    /* As upstream: such an exclude would forbid the trigger itself, surely a mistake. */
    for (size_t j = 0; j < a.excl.len; j++) {
        const td_str *x = &a.excl.data[j];
        for (size_t i = 0; i < a.trig.len; i++) {
            const td_str *t = &a.trig.data[i];
            if (x->len <= t->len && memcmp(a.data.data + x->off, a.data.data + t->off, x->len) == 0) {
                size_t l, c;
                line_col(p->s, p->n, t->pos, &l, &c);
                rc = perr(p, XGR_ERR_SEMANTIC, x->pos,
                          "TagDispatch: Exclude string must not be a prefix of trigger string "
                          "(or equal to it), but this one is a prefix of the trigger at line "
                          "%zu, column %zu",
                          l, c);
                goto done;
            }
        }
    }
    size_t nt = a.trig.len, ne = a.excl.len, n = nt + ne;
    str = xgr_malloc((n ? n : 1) * sizeof *str);
    len = xgr_malloc((n ? n : 1) * sizeof *len);
    rules = xgr_malloc((nt ? nt : 1) * sizeof *rules);
    if (!str || !len || !rules) {
        rc = XGR_ERR_NOMEM;
        goto done;
    }
    for (size_t k = 0; k < n; k++) {
        const td_str *t = k < nt ? &a.trig.data[k] : &a.excl.data[k - nt];
        str[k] = a.data.data + t->off;
        len[k] = t->len;
        if (k < nt) rules[k] = t->rule;
    }
    *node = xgr_ir_tag_dispatch(p->g, str, len, rules, nt, str + nt, len + nt, ne, a.loop);
    if (*node < 0) rc = ir_fail();
done:
    free(str);
    free(len);
    free(rules);
    td_args_free(&a);
    return rc;
}

/* TagDispatch and Substring stand as a whole rule body, as upstream normalises them. */
static int is_body_macro(int32_t kind) {
    return kind == XGR_NODE_TAG_DISPATCH || kind == XGR_NODE_SUBSTRING;
}

/* Moves every TagDispatch / Substring node created for rule `rule` (node ids from `first`
 * on) that is not the whole body into a fresh rule named after `rule` (rule_1, rule_2, ...
 * in source order, as upstream names them) and references that rule in its place. */
static int lift_tag_dispatch(ebnf *p, int32_t rule, int32_t body, size_t first) {
    xgr_grammar *g = p->g;
    size_t end = g->nodes.len, n_td = 0;
    for (size_t id = first; id < end; id++)
        n_td += is_body_macro(g->nodes.data[id].kind) && (int32_t)id != body;
    if (!n_td) return XGR_OK;
    int rc = XGR_OK;
    /* map[k]: the TagDispatch node k - first (or -1) -> its REF node */
    int32_t *map = xgr_malloc((end - first) * sizeof *map);
    char *base = xgr_strndup(xgr_ir_rule_name(g, rule), strlen(xgr_ir_rule_name(g, rule)));
    if (!map || !base) {
        rc = XGR_ERR_NOMEM;
        goto done;
    }
    for (size_t id = first; id < end; id++) {
        map[id - first] = -1;
        if (!is_body_macro(g->nodes.data[id].kind) || (int32_t)id == body) continue;
        int32_t r = xgr_ir_fresh_rule(g, base), ref;
        if (r < 0 || (ref = xgr_ir_ref(g, r)) < 0) {
            rc = ir_fail();
            goto done;
        }
        g->rules.data[r].body = (int32_t)id;
        map[id - first] = ref;
    }
    if ((rc = track_rules(p))) goto done;
    for (size_t id = first; id < end; id++) {
        xgr_node *nd = &g->nodes.data[id];
        if (nd->kind == XGR_NODE_REPEAT) {
            if ((size_t)nd->a >= first && map[nd->a - (int32_t)first] >= 0)
                nd->a = map[nd->a - (int32_t)first];
        } else if (nd->kind == XGR_NODE_SEQ || nd->kind == XGR_NODE_ALT) {
            for (int32_t i = 0; i < nd->count; i++) {
                int32_t *k = &g->kids.data[nd->off + i];
                if ((size_t)*k >= first && map[*k - (int32_t)first] >= 0) *k = map[*k - (int32_t)first];
            }
        }
    }
done:
    free(map);
    free(base);
    return rc;
}

static int parse_primary(ebnf *p, int32_t *node) {
    size_t start = p->pos;
    uint8_t c = p->s[start];
    int rc;
    if (c == '"') {
        if ((rc = lex_string(p, 0))) return rc;
        *node = xgr_ir_bytes(p->g, p->buf.data, p->buf.len);
        return *node < 0 ? ir_fail() : XGR_OK;
    }
    if (c == '[') return parse_class(p, 0, node);
    if (c == '(') {
        p->pos++;
        skip_ws(p);
        if (p->pos < p->n && p->s[p->pos] == '=')
            return perr(p, XGR_ERR_SYNTAX, start,
                        "a lookahead assertion '(= ...)' is only allowed at the end of a "
                        "rule body");
        if ((rc = parse_alt(p, node))) return rc;
        skip_ws(p);
        if (at_lookahead(p, p->pos))
            return perr(p, XGR_ERR_SYNTAX, p->pos,
                        "a lookahead assertion '(= ...)' is only allowed at the end of a "
                        "rule body");
        if (p->pos >= p->n || p->s[p->pos] != ')') {
            if (p->pos >= p->n || at_rule_start(p, p->pos))
                return perr(p, XGR_ERR_SYNTAX, start, "unclosed '('");
            return expected(p, p->pos, "')' or '|'");
        }
        p->pos++;
        return XGR_OK;
    }
    if (c == 'b' && start + 1 < p->n && p->s[start + 1] == '"') {
        if ((rc = lex_string(p, 1))) return rc;
        *node = xgr_ir_bytes(p->g, p->buf.data, p->buf.len);
        return *node < 0 ? ir_fail() : XGR_OK;
    }
    if (c == 'b' && start + 1 < p->n && p->s[start + 1] == '[') return parse_class(p, 1, node);
    if (is_name_start(c)) {
        size_t e = name_end(p, start);
        size_t len = e - start;
        p->pos = e;
        if (e < p->n && p->s[e] == '(') {
            if (len == 5 && memcmp(p->s + start, "Regex", 5) == 0) {
                p->pos++;
                return parse_regex_macro(p, start, node);
            }
        }
        if (len == 5 && at_token_macro(p, start)) {
            int32_t k;
            p->pos = start;
            if ((rc = lex_token_ids(p, &k))) return rc;
            int32_t alts[64];
            if (k > 64)
                return perr(p, XGR_ERR_SEMANTIC, start,
                            "Token(...) takes at most 64 ids; write an alternation");
            for (int32_t i = 0; i < k; i++) {
                alts[i] = xgr_ir_bytes(p->g, p->buf.data + (size_t)i * XGR_TOKEN_MARKER_LEN,
                                       XGR_TOKEN_MARKER_LEN);
                if (alts[i] < 0) return ir_fail();
            }
            *node = k == 1 ? alts[0] : xgr_ir_alt(p->g, alts, (size_t)k);
            return *node < 0 ? ir_fail() : XGR_OK;
        }
        if (len == 12 && memcmp(p->s + start, "ExcludeToken", 12) == 0 && e < p->n &&
            skip_ws_at(p, e) < p->n && p->s[skip_ws_at(p, e)] == '(')
            return perr(p, XGR_ERR_SYNTAX, start,
                        "ExcludeToken(...) (any one token but these) is not supported by "
                        "xgrammar2; only Token(id, ...) terminals are");
        if (len == 9 && memcmp(p->s + start, "Substring", 9) == 0) {
            size_t q = skip_ws_at(p, e);
            if (q < p->n && p->s[q] == '(') {
                if (p->in_lookahead)
                    return perr(p, XGR_ERR_SYNTAX, start,
                                "Substring should not be in lookahead assertion");
                p->pos = q;
                return parse_substring(p, start, node);
            }
        }
        if (len == 11 && memcmp(p->s + start, "TagDispatch", 11) == 0) {
            size_t q = skip_ws_at(p, e);
            if (q < p->n && p->s[q] == '(') {
                if (p->in_lookahead)
                    return perr(p, XGR_ERR_SYNTAX, start,
                                "TagDispatch cannot appear in a lookahead assertion");
                p->pos = q;
                return parse_tag_dispatch(p, start, node);
            }
        }
        int32_t r = xgr_ir_rule(p->g, (const char *)p->s + start, len);
        if (r < 0) return ir_fail();
        if ((rc = track_rules(p))) return rc;
        if (!p->ref_pos.data[r]) p->ref_pos.data[r] = start + 1;
        *node = xgr_ir_ref(p->g, r);
        return *node < 0 ? ir_fail() : XGR_OK;
    }
    if (c == ')') return perr(p, XGR_ERR_SYNTAX, start, "unmatched ')'");
    if (c == '*' || c == '+' || c == '?' || c == '{')
        return perr(p, XGR_ERR_SYNTAX, start,
                    "quantifier '%c' has nothing to repeat", (char)c);
    if (c == ':' && start + 2 < p->n && memcmp(p->s + start, "::=", 3) == 0)
        return perr(p, XGR_ERR_SYNTAX, start, "unexpected '::=' (missing rule name?)");
    if (c >= 0x80) {
        uint32_t cp;
        if (!xgr_utf8_decode(p->s + start, p->n - start, &cp))
            return perr(p, XGR_ERR_UTF8, start, "invalid UTF-8 byte 0x%02x", (unsigned)c);
    }
    return expected(p, start, "a string, character class, rule name or '('");
}

static int parse_number(ebnf *p, long *v) {
    size_t start = p->pos;
    long x = 0;
    if (p->pos >= p->n || p->s[p->pos] < '0' || p->s[p->pos] > '9')
        return expected(p, p->pos, "a number in the repetition {m,n}");
    while (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
        int digit = p->s[p->pos] - '0';
        /* checked before multiplying so a 32-bit long cannot overflow */
        if (x > (XGR_FRONT_MAX_REPEAT - digit) / 10)
            return perr(p, XGR_ERR_SEMANTIC, start,
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
    size_t start = p->pos;
    int rc;
    p->pos++;
    skip_ws(p);
    if ((rc = parse_number(p, min))) return rc;
    skip_ws(p);
    *max = *min;
    if (p->pos < p->n && p->s[p->pos] == ',') {
        p->pos++;
        skip_ws(p);
        if (p->pos < p->n && p->s[p->pos] == '}') {
            *max = -1;
        } else if (p->pos + 1 < p->n && p->s[p->pos] == '-' && p->s[p->pos + 1] == '1') {
            /* upstream xgrammar prints unbounded repetitions as {m, -1} */
            p->pos += 2;
            *max = -1;
            skip_ws(p);
        } else {
            if ((rc = parse_number(p, max))) return rc;
            skip_ws(p);
        }
    }
    if (p->pos >= p->n || p->s[p->pos] != '}') return expected(p, p->pos, "'}' or ','");
    p->pos++;
    if (*max >= 0 && *min > *max)
        return perr(p, XGR_ERR_SEMANTIC, start,
                    "lower bound %ld of the repetition is larger than its upper bound %ld",
                    *min, *max);
    return XGR_OK;
}

static int parse_postfix(ebnf *p, int32_t *node) {
    int rc;
    if ((rc = parse_primary(p, node))) return rc;
    size_t q = skip_ws_at(p, p->pos);
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
    q = skip_ws_at(p, p->pos);
    if (q < p->n && (p->s[q] == '*' || p->s[q] == '+' || p->s[q] == '?' || p->s[q] == '{'))
        return perr(p, XGR_ERR_SYNTAX, q,
                    "a quantifier cannot follow another quantifier; use parentheses");
    *node = xgr_ir_repeat(p->g, *node, (int32_t)min, (int32_t)max);
    return *node < 0 ? ir_fail() : XGR_OK;
}

static int parse_seq(ebnf *p, int32_t *node) {
    size_t base = p->stack.len;
    int rc;
    for (;;) {
        skip_ws(p);
        if (p->pos >= p->n) break;
        uint8_t c = p->s[p->pos];
        if (c == '|' || c == ')' || at_lookahead(p, p->pos)) break;
        if (is_name_start(c) && at_rule_start(p, p->pos)) break;
        int32_t k = -1;
        if ((rc = parse_postfix(p, &k))) return rc;
        if (XGR_VEC_PUSH(p->stack, k)) return XGR_ERR_NOMEM;
    }
    size_t cnt = p->stack.len - base;
    if (cnt == 0) {
        if (p->pos < p->n && p->s[p->pos] == ')' && p->depth <= 1)
            return perr(p, XGR_ERR_SYNTAX, p->pos, "unmatched ')'");
        return expected(p, p->pos, "an expression (string, character class, rule name or '(')");
    }
    *node = xgr_ir_seq(p->g, p->stack.data + base, cnt);
    p->stack.len = base;
    return *node < 0 ? ir_fail() : XGR_OK;
}

static int parse_alt(ebnf *p, int32_t *node) {
    int rc;
    if (++p->depth > XGR_FRONT_MAX_DEPTH)
        return perr(p, XGR_ERR_LIMIT, p->pos, "expression nesting is deeper than %d",
                    XGR_FRONT_MAX_DEPTH);
    size_t base = p->stack.len;
    for (;;) {
        int32_t k = -1;
        if ((rc = parse_seq(p, &k))) return rc;
        if (XGR_VEC_PUSH(p->stack, k)) return XGR_ERR_NOMEM;
        skip_ws(p);
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
    if (!is_name_start(p->s[start])) {
        if (p->s[start] == ')') return perr(p, XGR_ERR_SYNTAX, start, "unmatched ')'");
        if (p->s[start] >= 0x80) {
            uint32_t cp;
            if (!xgr_utf8_decode(p->s + start, p->n - start, &cp))
                return perr(p, XGR_ERR_UTF8, start, "invalid UTF-8 byte 0x%02x",
                            (unsigned)p->s[start]);
        }
        return expected(p, start, "a rule name");
    }
    size_t e = name_end(p, start), he = head_end(p, start);
    p->pos = skip_ws_at(p, he);
    if (p->pos + 3 > p->n || memcmp(p->s + p->pos, "::=", 3) != 0)
        return expected(p, p->pos, "'::=' after the rule name");
    p->pos += 3;
    int32_t r = xgr_ir_rule(p->g, (const char *)p->s + start, e - start);
    if (r < 0) return ir_fail();
    if (he > e) {
        char msg[128];
        size_t at = e;
        xgr_rule_attrs a;
        rc = xgr_attrs_parse(p->s, e, he - e, p->g, &a, &at, msg, sizeof msg);
        if (rc == XGR_ERR_NOMEM) return ir_fail();
        if (rc) return perr(p, rc, at, "%s", msg);
        if (a.capture_off == -2 && (a.capture_off = xgr_ir_add_name(
                                        p->g, (const char *)p->s + start, e - start)) < 0)
            return ir_fail();
        p->g->rules.data[r].attrs = a;
    }
    if ((rc = track_rules(p))) return rc;
    if (p->def_pos.data[r]) {
        size_t l, c;
        line_col(p->s, p->n, p->def_pos.data[r] - 1, &l, &c);
        return perr(p, XGR_ERR_SEMANTIC, start,
                    "rule '%s' is defined more than once (first at line %zu, column %zu)",
                    xgr_ir_rule_name(p->g, r), l, c);
    }
    p->def_pos.data[r] = start + 1;
    int32_t body, la = -1;
    p->depth = 0;
    size_t first_node = p->g->nodes.len;
    if ((rc = parse_alt(p, &body))) return rc;
    if ((rc = lift_tag_dispatch(p, r, body, first_node))) return rc;
    skip_ws(p);
    if (at_lookahead(p, p->pos)) {
        p->pos = skip_ws_at(p, p->pos + 1) + 1; /* past '(' and '=' */
        skip_ws(p);
        p->in_lookahead = 1;
        rc = parse_alt(p, &la);
        p->in_lookahead = 0;
        if (rc) return rc;
        skip_ws(p);
        if (p->pos >= p->n || p->s[p->pos] != ')')
            return expected(p, p->pos, "')' closing the lookahead assertion");
        p->pos++;
        skip_ws(p);
        if (at_lookahead(p, p->pos))
            return perr(p, XGR_ERR_SYNTAX, p->pos, "a rule takes at most one lookahead assertion");
        if (p->pos < p->n && !at_rule_start(p, p->pos))
            return perr(p, XGR_ERR_SYNTAX, p->pos,
                        "the lookahead assertion '(= ...)' must end the rule body");
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
    size_t i = skip_ws_at(p, 0);
    while (i < p->n) {
        uint8_t c = p->s[i];
        if (c == '"' || c == '[') {
            uint8_t close = c == '"' ? '"' : ']';
            i++;
            while (i < p->n && p->s[i] != close && p->s[i] != '\n') i += p->s[i] == '\\' ? 2 : 1;
            i++;
        } else if (c == '#') {
            while (i < p->n && p->s[i] != '\n') i++;
        } else if (is_name_start(c)) {
            size_t e = name_end(p, i);
            size_t j = skip_ws_at(p, head_end(p, i));
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
    return track_rules(p);
}

static int parse_file(ebnf *p, const char *root, size_t root_len) {
    int rc;
    if ((rc = declare_rules(p))) return rc;
    skip_ws(p);
    while (p->pos < p->n) {
        if ((rc = parse_rule(p))) return rc;
        skip_ws(p);
    }
    for (size_t r = 0; r < p->g->rules.len; r++) {
        if (p->g->rules.data[r].body >= 0) continue;
        size_t at = r < p->ref_pos.len && p->ref_pos.data[r] ? p->ref_pos.data[r] - 1 : 0;
        return perr(p, XGR_ERR_SEMANTIC, at, "rule '%s' is referenced but not defined",
                    xgr_ir_rule_name(p->g, (int32_t)r));
    }
    int32_t rr = xgr_ir_find_rule(p->g, root, root_len);
    if (rr < 0)
        return xgr_fail(XGR_ERR_SEMANTIC,
                        "EBNF error: the root rule '%.*s' is not defined",
                        (int)(root_len > 200 ? 200 : root_len), root);
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
    XGR_VEC_FREE(p.def_pos);
    if (rc) {
        xgr_ir_free(p.g);
        return rc;
    }
    *out = p.g;
    return XGR_OK;
}
