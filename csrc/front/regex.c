/* Regex front end: the one regex parser of the core, for three dialects. The two of
 * upstream xgrammar 0.2.8 compile into IR nodes (xgr_regex_to_node_opts) or a flat tree;
 * ECMAScript only into the flat tree (xgr_regex_parse, xgr_regex_ast in xgr2.h), which
 * engine/xgrammar2/json_schema/regex.py turns into the AST its automata and emitters use.
 *   - XGR_REGEX_CONVERTER: Grammar.from_regex, compile_regex, structural-tag regexes.
 *   - XGR_REGEX_MACRO: the EBNF macro Regex("...", json_string=..., flags="...").
 *   - XGR_REGEX_ECMASCRIPT: JSON Schema pattern / patternProperties / propertyNames and
 *     string formats (ECMA-262, u flag; see "ECMAScript" below).
 *
 * Common semantics:
 *   - The whole output must match (anchored). `^` and `$` are accepted anywhere and
 *     match the empty string (as upstream). A quantifier right after an anchor applies to
 *     the atom before the anchor (`a$*` is `a*`); with nothing before, it is an error.
 *   - Literals are code points (the pattern is UTF-8); consecutive literals merge into
 *     one BYTES node. `.` is any code point, \n included (with a flags="..." argument of
 *     the macro: any but \n, unless the flags hold `s`).
 *   - \d \w are ASCII ([0-9], [0-9A-Za-z_]); \s is [\t\n\v\f\r ] (macro) or that plus
 *     U+00A0 (converter); \D \W \S complement within Unicode.
 *   - Escapes: \n \t \r \f \v \a \e \0 (a following digit is a literal digit), \cX,
 *     \xHH, \uHHHH (a \uD8xx\uDCxx surrogate pair is one code point), \u{H..H} (1 to 6
 *     digits, at most U+10FFFF); any other character escapes itself, letters included
 *     (\q is q). \b is backspace inside a class.
 *   - Lazy quantifiers (*? +? ?? {m,n}?) match the same language as greedy ones.
 *   - Errors (XGR_ERR_SYNTAX / SEMANTIC, "regex error at line L, column C: ..." from
 *     diag.h, the message phrased as upstream's):
 *     word boundaries \b \B, backreferences \1..\9 \k, Unicode property escapes \p \P,
 *     lookbehind, inline flags other than a leading (?i) in the macro, empty classes [],
 *     malformed escapes, quantifiers with nothing to repeat, unbalanced parentheses.
 * Converter only: a NUL character in the pattern, lookaheads, (?i) and (?P<name>...) are
 *   errors; two consecutive quantifiers (a**, a+?{2}) are an error; [^] is any character;
 *   a stray `]` is a literal.
 * Macro only: a leading (?i) (or flags="i") makes ASCII letters match either case (in
 *   literals and classes; non-ASCII letters stay exact); lookaheads (?=...) (?!...) are
 *   checked and then match the empty string; consecutive quantifiers nest (a{2}{3} is
 *   (a{2}){3}); [^] and a stray `]` are errors; json_string=true removes '"', '\\' and
 *   U+0000..U+001F from every character match.
 * ECMAScript (the common rules above where not said otherwise): search semantics, so `^`
 *   and `$` are BOL / EOL nodes of the tree, lookaheads (?=...) (?!...) LOOK nodes and
 *   \b \B WORDB nodes (a quantifier after any of these is an error); `.` is
 *   any code point but \n \r U+2028 U+2029; \s is ECMAScript's WhiteSpace and
 *   LineTerminator; \p{Name} / \P{Name} / \p{gc=Name} take Unicode general categories
 *   (the tree names them; the caller supplies the tables); \u{...} takes any number of
 *   hex digits; a '{' that starts no {m} {m,} {m,n} is a literal; quantifiers in a row
 *   nest; [] matches nothing and [^] anything; a NUL in the pattern is a literal; a class
 *   escape next to '-' in a class is an error. XGR_ERR_SEMANTIC (the caller's
 *   "unsupported") for \B in a class, backreferences \1-\9 \k \0<digit>, lookbehind, inline flags,
 *   unknown properties and an escaped ASCII letter or digit without an ECMAScript meaning
 *   (\a \e \q ...); XGR_ERR_SYNTAX for malformed patterns. */
#include <stdarg.h>
#include <stdio.h>

#include "front.h"

typedef struct {
    const uint8_t *s;
    size_t n, pos;
    xgr_grammar *g;
    int depth;
    int macro;     /* dialect is XGR_REGEX_MACRO */
    int icase;     /* ASCII case folding (macro: leading (?i) or flags="i") */
    int json;      /* json_string=true */
    int dot_nl;    /* '.' matches \n */
    i32vec stack;  /* children of SEQ / ALT nodes under construction */
    u8vec lit;     /* pending literal bytes; each sequence owns a suffix */
    u32vec ranges; /* class under construction */
    u32vec tmp;    /* scratch for finish_class */
    int never;     /* set by finish_class: the class it built matches nothing */
    int ecma;      /* dialect is XGR_REGEX_ECMASCRIPT (only with ast) */
    xgr_rx_builder *ast; /* xgr_regex_parse: nodes go here instead of into g */
    u32vec props;  /* ECMAScript \p{..} members of the class under construction */
} rx;

/* SET_WORDB: not a set but the assertion \\b (\\B when negated), ECMAScript only. */
enum { SET_NONE = 0, SET_D, SET_W, SET_S, SET_PROP, SET_WORDB };

static const uint32_t SET_D_RANGES[] = {'0', '9'};
static const uint32_t SET_W_RANGES[] = {'0', '9', 'A', 'Z', '_', '_', 'a', 'z'};
static const uint32_t SET_S_MACRO[] = {0x09, 0x0d, 0x20, 0x20};
static const uint32_t SET_S_CONV[] = {0x09, 0x0d, 0x20, 0x20, 0xa0, 0xa0};
/* ECMAScript WhiteSpace and LineTerminator (Unicode Zs included). */
static const uint32_t SET_S_ECMA[] = {0x09,   0x0d,   0x20,   0x20,   0xa0,   0xa0,
                                      0x1680, 0x1680, 0x2000, 0x200a, 0x2028, 0x2029,
                                      0x202f, 0x202f, 0x205f, 0x205f, 0x3000, 0x3000,
                                      0xfeff, 0xfeff};
/* ECMAScript '.': anything but the line terminators \n \r U+2028 U+2029. */
static const uint32_t DOT_ECMA[] = {0, 0x09, 0x0b, 0x0c, 0x0e, 0x2027, 0x202a, 0x10ffff};
/* What json_string=true removes from every character match (sorted, disjoint). */
static const uint32_t JSON_EXCLUDED[] = {0x00, 0x1f, '"', '"', '\\', '\\'};

static void set_ranges(const rx *p, int set, const uint32_t **r, size_t *n) {
    switch (set) {
    case SET_D: *r = SET_D_RANGES, *n = sizeof SET_D_RANGES / sizeof *SET_D_RANGES / 2; break;
    case SET_W: *r = SET_W_RANGES, *n = sizeof SET_W_RANGES / sizeof *SET_W_RANGES / 2; break;
    default:
        if (p->ecma)
            *r = SET_S_ECMA, *n = sizeof SET_S_ECMA / sizeof *SET_S_ECMA / 2;
        else if (p->macro)
            *r = SET_S_MACRO, *n = sizeof SET_S_MACRO / sizeof *SET_S_MACRO / 2;
        else
            *r = SET_S_CONV, *n = sizeof SET_S_CONV / sizeof *SET_S_CONV / 2;
        break;
    }
}

static XGR_NOINLINE int rerr(const rx *p, int code, size_t pos, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static XGR_NOINLINE int rerr(const rx *p, int code, size_t pos, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = xgr_diag_vfail(code, "regex", p->s, p->n, pos, fmt, ap);
    va_end(ap);
    return rc;
}

static int ir_fail(void) { return xgr_front_ir_status(); }

/* Node builders: IR nodes of p->g, or flat tree nodes of p->ast (xgr_regex_parse). Each
 * returns the node id, or -1 after xgr_fail. */
static int32_t mk_class(rx *p, const uint32_t *r, size_t n, int neg) {
    if (p->ast) return xgr_rx_add_set(p->ast, r, n, p->props.data, p->props.len, neg);
    return xgr_ir_class(p->g, r, n, neg);
}

static int32_t mk_bytes(rx *p, const uint8_t *b, size_t n) {
    if (!p->ast) return xgr_ir_bytes(p->g, b, n);
    /* tree mode keeps every literal a one-code-point SET (see lit_needs_class) */
    return xgr_fail(XGR_ERR_INTERNAL, "regex: literal run in tree mode"), -1;
}

static int32_t mk_list(rx *p, int kind, const int32_t *k, size_t n) {
    if (p->ast) {
        if (kind == XGR_RX_ALT && n == 1) return k[0]; /* a one-branch alternation */
        return xgr_rx_add_list(p->ast, kind, k, n);
    }
    return kind == XGR_RX_CAT ? xgr_ir_seq(p->g, k, n) : xgr_ir_alt(p->g, k, n);
}

static int32_t mk_repeat(rx *p, int32_t k, int32_t min, int32_t max) {
    if (p->ast) return xgr_rx_add(p->ast, XGR_RX_REP, k, min, max);
    return xgr_ir_repeat(p->g, k, min, max);
}

static int32_t mk_empty(rx *p, int kind) {
    if (p->ast) return xgr_rx_add(p->ast, kind, 0, 0, 0);
    return xgr_ir_empty(p->g);
}

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

static int is_ascii_letter(uint32_t c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }

/* Parses the \u escape whose 'u' is at p->pos - 1 (start = the backslash). */
static int parse_u_escape(rx *p, size_t start, uint32_t *cp) {
    if (p->pos < p->n && p->s[p->pos] == '{') {
        uint32_t v = 0;
        size_t i = p->pos + 1;
        int k = 0;
        while (i < p->n && hexval(p->s[i]) >= 0 && (p->ecma || k < 7)) {
            if (v <= 0x10ffff) v = v * 16 + (uint32_t)hexval(p->s[i]);
            i++, k++;
        }
        if (k == 0 || (k > 6 && !p->ecma) || i >= p->n || p->s[i] != '}')
            return rerr(p, XGR_ERR_SYNTAX, start,
                        p->ecma ? "\\u{...} must contain hexadecimal digits"
                                : "\\u{...} must contain one to six hexadecimal digits");
        if (v > 0x10ffff)
            return rerr(p, XGR_ERR_SYNTAX, start,
                        "\\u{...} escape is beyond the Unicode range (above U+10FFFF)");
        p->pos = i + 1;
        *cp = v;
        return XGR_OK;
    }
    if (!read_hex(p, p->pos, 4, cp))
        return rerr(p, XGR_ERR_SYNTAX, start, "\\u must be followed by four hexadecimal digits");
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
}

/* The Unicode general categories \p{..} accepts (ECMAScript): short and long names. */
static const char *const GC_NAMES[][2] = {
    {"L", "Letter"}, {"Lu", "Uppercase_Letter"}, {"Ll", "Lowercase_Letter"},
    {"Lt", "Titlecase_Letter"}, {"LC", "Cased_Letter"}, {"Lm", "Modifier_Letter"},
    {"Lo", "Other_Letter"}, {"M", "Mark"}, {"Mn", "Nonspacing_Mark"},
    {"Mc", "Spacing_Mark"}, {"Me", "Enclosing_Mark"}, {"N", "Number"},
    {"Nd", "Decimal_Number"}, {"Nl", "Letter_Number"}, {"No", "Other_Number"},
    {"P", "Punctuation"}, {"Pc", "Connector_Punctuation"}, {"Pd", "Dash_Punctuation"},
    {"Ps", "Open_Punctuation"}, {"Pe", "Close_Punctuation"},
    {"Pi", "Initial_Punctuation"}, {"Pf", "Final_Punctuation"},
    {"Po", "Other_Punctuation"}, {"S", "Symbol"}, {"Sm", "Math_Symbol"},
    {"Sc", "Currency_Symbol"}, {"Sk", "Modifier_Symbol"}, {"So", "Other_Symbol"},
    {"Z", "Separator"}, {"Zs", "Space_Separator"}, {"Zl", "Line_Separator"},
    {"Zp", "Paragraph_Separator"}, {"C", "Other"}, {"Cc", "Control"}, {"Cf", "Format"},
    {"Cs", "Surrogate"}, {"Co", "Private_Use"}, {"Cn", "Unassigned"},
    {"Nd", "digit"}, {"P", "punct"}, {"M", "Combining_Mark"}};

static int name_is(const uint8_t *s, size_t n, const char *name) {
    return strlen(name) == n && memcmp(s, name, n) == 0;
}

/* ECMAScript \p{Name} / \P{Name} (p->pos after the letter): *cp gets the category code
 * of xgr_regex_ast (first letter | second letter << 8). */
static int parse_property(rx *p, size_t start, uint8_t letter, uint32_t *cp) {
    if (p->pos >= p->n || p->s[p->pos] != '{')
        return rerr(p, XGR_ERR_SYNTAX, start, "\\%c must be followed by {name}", (char)letter);
    const uint8_t *end = memchr(p->s + p->pos, '}', p->n - p->pos);
    if (!end) return rerr(p, XGR_ERR_SYNTAX, start, "\\%c{ is not closed by '}'", (char)letter);
    const uint8_t *name = p->s + p->pos + 1, *eq = memchr(name, '=', (size_t)(end - name));
    const uint8_t *full = name;
    size_t len = (size_t)(end - name), full_len = len;
    p->pos = (size_t)(end - p->s) + 1;
    if (eq) {
        size_t klen = (size_t)(eq - name);
        if (!name_is(name, klen, "General_Category") && !name_is(name, klen, "gc"))
            return rerr(p, XGR_ERR_SEMANTIC, start,
                        "Unicode property escape \\%c{%.*s} is not supported (only general "
                        "categories)",
                        (char)letter, (int)len, (const char *)name);
        name = eq + 1, len = (size_t)(end - name);
    }
    for (size_t i = 0; i < sizeof GC_NAMES / sizeof *GC_NAMES; i++)
        if (name_is(name, len, GC_NAMES[i][0]) || name_is(name, len, GC_NAMES[i][1])) {
            const char *sh = GC_NAMES[i][0];
            *cp = (uint32_t)(uint8_t)sh[0] | (uint32_t)(uint8_t)sh[1] << 8;
            return XGR_OK;
        }
    return rerr(p, XGR_ERR_SEMANTIC, start,
                "Unicode property escape \\%c{%.*s} is not supported (unknown general category)",
                (char)letter, (int)full_len, (const char *)full);
}

/* The ECMAScript escapes that differ from the upstream dialects' (c after the backslash
 * at `start`). Returns 1 when the common code handles c. */
static int ecma_escape(rx *p, size_t start, uint8_t c, int in_class, uint32_t *cp, int *set,
                       int *neg, int *rc) {
    *rc = XGR_OK;
    switch (c) {
    case 'p': case 'P':
        *set = SET_PROP, *neg = c == 'P';
        *rc = parse_property(p, start, c, cp);
        return 0;
    case 'B':
        if (in_class) { /* no meaning in a class (u flag) */
            *rc = rerr(p, XGR_ERR_SEMANTIC, start,
                       "Word boundary assertion \\B is not supported in a character class");
            return 0;
        }
        *set = SET_WORDB, *neg = 1;
        return 0;
    case 'b':
        if (in_class) return 1;
        *set = SET_WORDB, *neg = 0;
        return 0;
    case 'k':
        *rc = rerr(p, XGR_ERR_SEMANTIC, start, "Backreference \\k is not supported in regex");
        return 0;
    case '0':
        if (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') break;
        return 1;
    case 'd': case 'D': case 'w': case 'W': case 's': case 'S': case 'n': case 't':
    case 'r': case 'f': case 'v': case 'c': case 'x': case 'u':
        return 1;
    default:
        if (!((c >= '0' && c <= '9') || is_ascii_letter(c))) {
            if (in_class && c == '-') *cp = '-', *set = SET_NONE;
            return 1;
        }
        if (c < '0' || c > '9') {
            *rc = rerr(p, XGR_ERR_SEMANTIC, start,
                       "The escape \\%c has no meaning in an ECMAScript regex (u flag)", (char)c);
            return 0;
        }
        break;
    }
    *rc = rerr(p, XGR_ERR_SEMANTIC, start,
               "Backreference or octal escape \\%c is not supported in regex", (char)c);
    return 0;
}

/* Parses the escape at p->pos (a backslash): either a literal code point (*set ==
 * SET_NONE) or a class escape (*set, *neg). */
static int parse_escape(rx *p, int in_class, uint32_t *cp, int *set, int *neg) {
    size_t start = p->pos;
    *set = SET_NONE;
    *neg = 0;
    if (start + 1 >= p->n)
        return rerr(p, XGR_ERR_SYNTAX, start, "Regex ends with a trailing backslash");
    uint8_t c = p->s[start + 1];
    p->pos = start + 2;
    if (p->ecma) {
        int rc;
        if (!ecma_escape(p, start, c, in_class, cp, set, neg, &rc)) return rc;
    }
    switch (c) {
    case 'd': case 'D': *set = SET_D, *neg = c == 'D'; return XGR_OK;
    case 'w': case 'W': *set = SET_W, *neg = c == 'W'; return XGR_OK;
    case 's': case 'S': *set = SET_S, *neg = c == 'S'; return XGR_OK;
    case 'n': *cp = '\n'; return XGR_OK;
    case 't': *cp = '\t'; return XGR_OK;
    case 'r': *cp = '\r'; return XGR_OK;
    case 'f': *cp = 0x0c; return XGR_OK;
    case 'v': *cp = 0x0b; return XGR_OK;
    case 'a': *cp = 0x07; return XGR_OK;
    case 'e': *cp = 0x1b; return XGR_OK;
    case '0': *cp = 0; return XGR_OK; /* \01 is NUL then '1': no octal escapes */
    case 'b':
        if (in_class) {
            *cp = 0x08;
            return XGR_OK;
        }
        return rerr(p, XGR_ERR_SYNTAX, start,
                    "Word boundary assertion \\b is not supported in regex");
    case 'B':
        if (in_class && !p->macro) {
            *cp = 'B';
            return XGR_OK;
        }
        return rerr(p, XGR_ERR_SYNTAX, start,
                    "Word boundary assertion \\B is not supported in regex");
    case 'k':
        return rerr(p, XGR_ERR_SYNTAX, start, "Backreference \\k is not supported in regex");
    case 'p': case 'P':
        return rerr(p, XGR_ERR_SYNTAX, start,
                    "Unicode property escape \\p / \\P is not supported in regex");
    case 'c':
        if (p->pos < p->n && is_ascii_letter(p->s[p->pos])) {
            *cp = p->s[p->pos] % 32u;
            p->pos++;
            return XGR_OK;
        }
        return rerr(p, XGR_ERR_SYNTAX, start, "\\c must be followed by a letter in regex");
    case 'x':
        if (!read_hex(p, p->pos, 2, cp))
            return rerr(p, XGR_ERR_SYNTAX, start,
                        "\\x must be followed by two hexadecimal digits in regex");
        p->pos += 2;
        return XGR_OK;
    case 'u': return parse_u_escape(p, start, cp);
    default: break;
    }
    if (c >= '1' && c <= '9')
        return rerr(p, XGR_ERR_SYNTAX, start, "Backreference \\%c is not supported in regex",
                    (char)c);
    /* Any other character escapes itself (\. \/ \- \\ \" \q ...). */
    int k = xgr_utf8_decode(p->s + start + 1, p->n - start - 1, cp);
    if (!k) return rerr(p, XGR_ERR_UTF8, start + 1, "invalid UTF-8 byte 0x%02x", (unsigned)c);
    p->pos = start + 1 + (size_t)k;
    return XGR_OK;
}

static int push_range_to(u32vec *v, uint32_t lo, uint32_t hi) {
    return XGR_VEC_PUSH(*v, lo) || XGR_VEC_PUSH(*v, hi) ? XGR_ERR_NOMEM : XGR_OK;
}

static int push_range(rx *p, uint32_t lo, uint32_t hi) { return push_range_to(&p->ranges, lo, hi); }

static int push_set(rx *p, int set, int neg, uint32_t prop) {
    const uint32_t *r;
    size_t n;
    if (set == SET_PROP)
        return XGR_VEC_PUSH(p->props, prop << 1 | (uint32_t)(neg != 0)) ? XGR_ERR_NOMEM : XGR_OK;
    set_ranges(p, set, &r, &n);
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

/* Turns p->ranges (the members as written) into a CLASS node: ASCII case folding adds
 * the other case of every letter (before negation, so (?i)[^k] excludes k and K), and
 * json_string removes JSON_EXCLUDED from what the class matches. */
static int finish_class(rx *p, int negated, int32_t *node) {
    size_t n = p->ranges.len / 2;
    p->never = 0;
    if (p->icase) {
        for (size_t i = 0; i < n; i++) {
            uint32_t lo = p->ranges.data[2 * i], hi = p->ranges.data[2 * i + 1];
            uint32_t a = lo > 'A' ? lo : 'A', b = hi < 'Z' ? hi : 'Z';
            if (a <= b && push_range(p, a + 32, b + 32)) return XGR_ERR_NOMEM;
            a = lo > 'a' ? lo : 'a', b = hi < 'z' ? hi : 'z';
            if (a <= b && push_range(p, a - 32, b - 32)) return XGR_ERR_NOMEM;
        }
        n = p->ranges.len / 2;
    }
    const size_t nx = sizeof JSON_EXCLUDED / sizeof *JSON_EXCLUDED / 2;
    if (p->json && negated) {
        for (size_t j = 0; j < nx; j++)
            if (push_range(p, JSON_EXCLUDED[2 * j], JSON_EXCLUDED[2 * j + 1]))
                return XGR_ERR_NOMEM;
        n = p->ranges.len / 2;
    } else if (p->json) {
        p->tmp.len = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t lo = p->ranges.data[2 * i], hi = p->ranges.data[2 * i + 1];
            for (size_t j = 0; j < nx && lo <= hi; j++) {
                uint32_t xlo = JSON_EXCLUDED[2 * j], xhi = JSON_EXCLUDED[2 * j + 1];
                if (xhi < lo || xlo > hi) continue;
                if (xlo > lo && push_range_to(&p->tmp, lo, xlo - 1)) return XGR_ERR_NOMEM;
                if (xhi >= hi) {
                    lo = 1, hi = 0; /* nothing left */
                    break;
                }
                lo = xhi + 1;
            }
            if (lo <= hi && push_range_to(&p->tmp, lo, hi)) return XGR_ERR_NOMEM;
        }
        p->never = p->tmp.len == 0;
        *node = mk_class(p, p->tmp.data, p->tmp.len / 2, 0);
        return *node < 0 ? ir_fail() : XGR_OK;
    }
    *node = mk_class(p, p->ranges.data, n, negated);
    p->props.len = 0;
    return *node < 0 ? ir_fail() : XGR_OK;
}

/* A literal code point that cannot go into a BYTES run: a letter under case folding or
 * a character json_string excludes. */
static int lit_needs_class(const rx *p, uint32_t cp) {
    return p->ast || (p->icase && is_ascii_letter(cp)) ||
           (p->json && (cp < 0x20 || cp == '"' || cp == '\\'));
}

static int lit_class(rx *p, uint32_t cp, int32_t *node) {
    p->ranges.len = 0;
    if (push_range(p, cp, cp)) return XGR_ERR_NOMEM;
    return finish_class(p, 0, node);
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
    if (p->pos < p->n && p->s[p->pos] == ']' && !p->ecma && (p->macro || !negated))
        return rerr(p, XGR_ERR_SYNTAX, start, "Empty character class is not allowed in regex.");
    p->ranges.len = 0;
    p->props.len = 0;
    for (;;) {
        if (p->pos >= p->n) return rerr(p, XGR_ERR_SYNTAX, start, "Unclosed '['");
        if (p->s[p->pos] == ']') {
            p->pos++;
            break;
        }
        size_t item = p->pos;
        uint32_t lo, hi;
        int set, neg;
        if ((rc = class_atom(p, &lo, &set, &neg))) return rc;
        if (set) {
            if (p->ecma && p->pos + 1 < p->n && p->s[p->pos] == '-' && p->s[p->pos + 1] != ']') {
                p->pos++; /* the range's end is read first: its own errors come first */
                if ((rc = class_atom(p, &hi, &set, &neg))) return rc;
                return rerr(p, XGR_ERR_SYNTAX, item,
                            "Invalid character range start in regex character class: a "
                            "class escape cannot start a range");
            }
            if ((rc = push_set(p, set, neg, lo))) return rc;
            continue; /* a following '-' is then a literal, as in ECMAScript's non-u mode */
        }
        if (p->pos + 1 < p->n && p->s[p->pos] == '-' && p->s[p->pos + 1] != ']') {
            p->pos++;
            size_t end_at = p->pos;
            if ((rc = class_atom(p, &hi, &set, &neg))) return rc;
            if (set)
                return rerr(p, XGR_ERR_SYNTAX, end_at,
                            "Invalid character range endpoint in regex character class: a "
                            "class escape cannot end a range");
            if (lo > hi)
                return rerr(p, p->ecma ? XGR_ERR_SYNTAX : XGR_ERR_SEMANTIC, item,
                            "Invalid character range (lower bound exceeds upper bound) in "
                            "regex character class: U+%04lX > U+%04lX",
                            (unsigned long)lo, (unsigned long)hi);
        } else {
            hi = lo;
        }
        if ((rc = push_range(p, lo, hi))) return rc;
    }
    return finish_class(p, negated, node);
}

static int parse_alt(rx *p, int32_t *node, int *never);

static int is_group_name_char(uint8_t c, int first) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (!first && c >= '0' && c <= '9');
}

/* *never: the group matches no string at all (json_string removed every character some
 * part of it needs). */
static int parse_group(rx *p, int32_t *node, int *never) {
    size_t start = p->pos;
    int rc, lookahead = 0;
    p->pos++;
    if (p->ecma && p->pos < p->n && p->s[p->pos] == '?') {
        size_t q = p->pos + 1;
        uint8_t c = q < p->n ? p->s[q] : 0;
        if (c == ':') {
            p->pos = q + 1;
        } else if (c == '<' && q + 1 < p->n && p->s[q + 1] != '=' && p->s[q + 1] != '!') {
            const uint8_t *gt = memchr(p->s + q, '>', p->n - q);
            if (!gt) return rerr(p, XGR_ERR_SYNTAX, start, "Invalid named capturing group");
            p->pos = (size_t)(gt - p->s) + 1;
        } else if (c == '<') {
            if (q + 1 >= p->n) return rerr(p, XGR_ERR_SYNTAX, start, "Invalid named capturing group");
            return rerr(p, XGR_ERR_SEMANTIC, start,
                        "Lookbehind assertion (?<%c...) is not supported in regex (lookahead "
                        "and \\b \\B are)",
                        (char)p->s[q + 1]);
        } else if (c == '=' || c == '!') { /* an XGR_RX_LOOK node (below) */
            lookahead = c == '=' ? 1 : 2;
            p->pos = q + 1;
        } else {
            return rerr(p, XGR_ERR_SEMANTIC, start,
                        "Unsupported group modifier '(?%.*s' (inline flags)",
                        q < p->n ? 1 : 0, (const char *)p->s + q);
        }
    } else if (p->pos < p->n && p->s[p->pos] == '?') {
        size_t q = p->pos + 1;
        uint8_t c = q < p->n ? p->s[q] : 0;
        if (q >= p->n) {
            return rerr(p, XGR_ERR_SYNTAX, start, "Group modifier is not finished");
        } else if (c == ':') {
            p->pos = q + 1;
        } else if (c == '=' || c == '!') {
            if (!p->macro)
                return rerr(p, XGR_ERR_SYNTAX, start,
                            "Lookahead assertion (?%c...) is not supported by "
                            "Grammar.from_regex (the EBNF Regex(...) macro ignores it)",
                            (char)c);
            lookahead = 1;
            p->pos = q + 1;
        } else if (c == '<' && q + 1 < p->n && (p->s[q + 1] == '=' || p->s[q + 1] == '!')) {
            return rerr(p, XGR_ERR_SYNTAX, start, "Lookbehind assertion is not supported in regex");
        } else if (c == '<' || (p->macro && c == 'P' && q + 1 < p->n && p->s[q + 1] == '<')) {
            size_t i = q + (c == 'P' ? 2 : 1), ns = i;
            if (p->macro) {
                while (i < p->n && p->s[i] != '>') i++;
                if (i == ns || i >= p->n)
                    return rerr(p, XGR_ERR_SYNTAX, start, "Invalid named capturing group");
            } else {
                while (i < p->n && is_group_name_char(p->s[i], i == ns)) i++;
                if (i >= p->n || p->s[i] != '>')
                    return rerr(p, XGR_ERR_SYNTAX, start, "Invalid named capturing group.");
            }
            p->pos = i + 1;
        } else {
            char shown[8] = {'?', 0};
            int k = xgr_utf8_decode(p->s + q, p->n - q, &(uint32_t){0});
            if (k <= 0 || k > 4) k = 1;
            memcpy(shown + 1, p->s + q, (size_t)k);
            shown[1 + k] = 0;
            return rerr(p, XGR_ERR_SYNTAX, start,
                        "Unsupported group modifier '(%s'%s", shown,
                        p->macro ? " (only a leading (?i) is supported)" : "");
        }
    }
    if ((rc = parse_alt(p, node, never))) return rc;
    if (p->pos >= p->n || p->s[p->pos] != ')')
        return rerr(p, XGR_ERR_SYNTAX, start, "The parenthesis is not closed.");
    p->pos++;
    if (lookahead && p->ecma) { /* the assertion on the rest of the input */
        *never = 0;
        *node = xgr_rx_add(p->ast, XGR_RX_LOOK, *node, lookahead == 2, 0);
        if (*node < 0) return ir_fail();
    } else if (lookahead) { /* checked, then ignored: matches "" (upstream's Regex(...)) */
        *never = 0;
        *node = mk_empty(p, XGR_RX_EPS);
        if (*node < 0) return ir_fail();
    }
    return XGR_OK;
}

static int parse_number(rx *p, long *v) {
    long x = 0;
    size_t start = p->pos;
    while (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
        int digit = p->s[p->pos] - '0';
        /* checked before multiplying so a 32-bit long cannot overflow */
        if (x > (XGR_FRONT_MAX_REPEAT - digit) / 10)
            return rerr(p, XGR_ERR_SEMANTIC, start,
                        "Invalid repetition count: the count is too large (limit %ld)",
                        (long)XGR_FRONT_MAX_REPEAT);
        x = x * 10 + digit;
        p->pos++;
    }
    *v = x;
    return p->pos > start ? XGR_OK : -1;
}

static int is_quant_char(uint8_t c) { return c == '*' || c == '+' || c == '?' || c == '{'; }

/* Whether a quantifier starts at i. In ECMAScript a '{' that does not start {m}, {m,} or
 * {m,n} is a literal brace. */
static int quant_at(const rx *p, size_t i) {
    if (i >= p->n || !is_quant_char(p->s[i])) return 0;
    if (p->s[i] != '{' || !p->ecma) return 1;
    size_t j = i + 1, d = j;
    while (j < p->n && p->s[j] >= '0' && p->s[j] <= '9') j++;
    if (j == d) return 0;
    if (j < p->n && p->s[j] == ',') {
        j++;
        while (j < p->n && p->s[j] >= '0' && p->s[j] <= '9') j++;
    }
    return j < p->n && p->s[j] == '}';
}

/* Parses one quantifier at p->pos (the caller saw is_quant_char), with an optional lazy
 * '?' after it. */
static int parse_quant(rx *p, long *min, long *max) {
    size_t start = p->pos;
    uint8_t c = p->s[start];
    int rc;
    if (c == '*') {
        *min = 0, *max = -1;
        p->pos++;
    } else if (c == '+') {
        *min = 1, *max = -1;
        p->pos++;
    } else if (c == '?') {
        *min = 0, *max = 1;
        p->pos++;
    } else {
        p->pos++;
        if ((rc = parse_number(p, min)) > 0) return rc;
        if (rc < 0)
            return rerr(p, XGR_ERR_SYNTAX, start,
                        "Invalid repetition count: expected a number after '{' (write "
                        "\\{ for a literal brace)");
        *max = *min;
        if (p->pos < p->n && p->s[p->pos] == ',') {
            p->pos++;
            if (p->pos < p->n && p->s[p->pos] == '}') {
                *max = -1;
            } else {
                if ((rc = parse_number(p, max)) > 0) return rc;
                if (rc < 0 || p->pos >= p->n || p->s[p->pos] != '}')
                    return rerr(p, XGR_ERR_SYNTAX, start,
                                "Invalid repetition count: expected '}' after the upper bound");
            }
        } else if (p->pos >= p->n || p->s[p->pos] != '}') {
            return rerr(p, XGR_ERR_SYNTAX, start,
                        "Invalid repetition count: expected ',' or '}' after the lower bound");
        }
        p->pos++;
        if (*max >= 0 && *min > *max)
            return rerr(p, p->ecma ? XGR_ERR_SYNTAX : XGR_ERR_SEMANTIC, start,
                        "Invalid repetition count: the lower bound %ld is larger than the "
                        "upper bound %ld",
                        *min, *max);
    }
    if (p->pos < p->n && p->s[p->pos] == '?') p->pos++; /* lazy: same language */
    return XGR_OK;
}

static int flush_lit(rx *p, size_t lit_base) {
    if (p->lit.len == lit_base) return XGR_OK;
    int32_t k = mk_bytes(p, p->lit.data + lit_base, p->lit.len - lit_base);
    p->lit.len = lit_base;
    if (k < 0) return ir_fail();
    return XGR_VEC_PUSH(p->stack, k) ? XGR_ERR_NOMEM : XGR_OK;
}

static void skip_anchors(rx *p) {
    while (p->pos < p->n && (p->s[p->pos] == '^' || p->s[p->pos] == '$')) p->pos++;
}

static int parse_seq(rx *p, int32_t *node, int *never) {
    size_t base = p->stack.len, lit_base = p->lit.len;
    int rc;
    *never = 0;
    for (;;) {
        if (!p->ecma) skip_anchors(p); /* '^' / '$' match "" wherever they are */
        if (p->pos >= p->n) break;
        size_t at = p->pos;
        uint8_t c = p->s[at];
        if (c == '|' || c == ')') break;
        int32_t k = -1;
        uint32_t cp = 0;
        int is_lit = 0, atom_never = 0;
        p->never = 0;
        if (c == '(') {
            if ((rc = parse_group(p, &k, &atom_never))) return rc;
            p->never = 0; /* whatever a class inside left; atom_never has the group's */
            if (p->ecma && at + 2 < p->n && p->s[at + 1] == '?' &&
                (p->s[at + 2] == '=' || p->s[at + 2] == '!') && quant_at(p, p->pos))
                return rerr(p, XGR_ERR_SYNTAX, p->pos,
                            "There is nothing to repeat before '%c' (a lookahead cannot be "
                            "repeated with the u flag)",
                            (char)p->s[p->pos]);
        } else if (c == '[') {
            if ((rc = parse_class(p, &k))) return rc;
        } else if (p->ecma && (c == '^' || c == '$')) { /* assertions, kept in the tree */
            p->pos++;
            if (quant_at(p, p->pos))
                return rerr(p, XGR_ERR_SYNTAX, p->pos,
                            "There is nothing to repeat before '%c' (an assertion cannot be "
                            "repeated)",
                            (char)p->s[p->pos]);
            if ((k = mk_empty(p, c == '^' ? XGR_RX_BOL : XGR_RX_EOL)) < 0) return ir_fail();
        } else if (c == '.' && p->ecma) {
            p->pos++;
            p->ranges.len = 0;
            for (size_t i = 0; i < sizeof DOT_ECMA / sizeof *DOT_ECMA; i += 2)
                if (push_range(p, DOT_ECMA[i], DOT_ECMA[i + 1])) return XGR_ERR_NOMEM;
            if ((rc = finish_class(p, 0, &k))) return rc;
        } else if (c == '.') {
            p->pos++;
            p->ranges.len = 0;
            if (p->dot_nl ? push_range(p, 0, 0x10ffff)
                          : push_range(p, 0, '\n' - 1) || push_range(p, '\n' + 1, 0x10ffff))
                return XGR_ERR_NOMEM;
            if ((rc = finish_class(p, 0, &k))) return rc;
        } else if (c == '\\') {
            int set, neg;
            if ((rc = parse_escape(p, 0, &cp, &set, &neg))) return rc;
            if (set == SET_WORDB) { /* \b \B: an assertion, kept in the tree */
                if (quant_at(p, p->pos))
                    return rerr(p, XGR_ERR_SYNTAX, p->pos,
                                "There is nothing to repeat before '%c' (an assertion cannot "
                                "be repeated)",
                                (char)p->s[p->pos]);
                if ((k = xgr_rx_add(p->ast, XGR_RX_WORDB, 0, neg, 0)) < 0) return ir_fail();
            } else if (set) {
                p->ranges.len = 0;
                p->props.len = 0;
                if ((rc = push_set(p, set, 0, cp))) return rc;
                if ((rc = finish_class(p, neg, &k))) return rc;
            } else {
                is_lit = 1;
            }
        } else if (quant_at(p, at)) {
            if (c == '{')
                return rerr(p, XGR_ERR_SYNTAX, at,
                            "There is nothing to repeat before the repetition");
            return rerr(p, XGR_ERR_SYNTAX, at, "There is nothing to repeat before '%c'", (char)c);
        } else if (c == ']' && p->macro) {
            return rerr(p, XGR_ERR_SYNTAX, at, "Unmatched ']'");
        } else {
            int n = xgr_utf8_decode(p->s + at, p->n - at, &cp);
            if (!n) return rerr(p, XGR_ERR_UTF8, at, "invalid UTF-8 byte 0x%02x", (unsigned)c);
            p->pos += (size_t)n;
            is_lit = 1;
        }
        /* Quantifiers: in the macro each further one nests; in the converter a second one
         * right after the first is an error. An anchor in between is skipped. */
        int nq = 0;
        for (;;) {
            size_t before = p->pos;
            if (!p->ecma) skip_anchors(p);
            if (!quant_at(p, p->pos)) {
                p->pos = before; /* leave the anchors to the outer loop */
                break;
            }
            if (nq && !p->macro && !p->ecma) /* an anchor in between does not separate them */
                return rerr(p, XGR_ERR_SYNTAX, p->pos,
                            "Two consecutive repetition modifiers are not allowed.");
            long min = 0, max = 0;
            if ((rc = parse_quant(p, &min, &max))) return rc;
            if (is_lit) {
                if ((rc = flush_lit(p, lit_base))) return rc;
                if (lit_needs_class(p, cp)) {
                    if ((rc = lit_class(p, cp, &k))) return rc;
                } else {
                    uint8_t u[4];
                    k = mk_bytes(p, u, (size_t)xgr_utf8_encode(cp, u));
                    if (k < 0) return ir_fail();
                }
                is_lit = 0;
            }
            atom_never |= p->never;
            p->never = 0;
            if (min == 0) atom_never = 0;
            if ((k = mk_repeat(p, k, (int32_t)min, (int32_t)max)) < 0) return ir_fail();
            nq++;
        }
        if (is_lit && !lit_needs_class(p, cp)) {
            uint8_t u[4];
            int n = xgr_utf8_encode(cp, u);
            if (XGR_VEC_RESERVE(p->lit, p->lit.len + 4)) return XGR_ERR_NOMEM;
            memcpy(p->lit.data + p->lit.len, u, (size_t)n);
            p->lit.len += (size_t)n;
            continue;
        }
        if (is_lit && (rc = lit_class(p, cp, &k))) return rc;
        *never |= atom_never | p->never;
        if ((rc = flush_lit(p, lit_base))) return rc;
        if (XGR_VEC_PUSH(p->stack, k)) return XGR_ERR_NOMEM;
    }
    if ((rc = flush_lit(p, lit_base))) return rc;
    *node = mk_list(p, XGR_RX_CAT, p->stack.data + base, p->stack.len - base);
    p->stack.len = base;
    return *node < 0 ? ir_fail() : XGR_OK;
}

static int parse_alt(rx *p, int32_t *node, int *never) {
    int rc;
    *never = 1;
    if (++p->depth > XGR_FRONT_MAX_DEPTH)
        return rerr(p, XGR_ERR_LIMIT, p->pos, "group nesting is deeper than %d",
                    XGR_FRONT_MAX_DEPTH);
    size_t base = p->stack.len;
    for (;;) {
        int32_t k = -1;
        int seq_never;
        if ((rc = parse_seq(p, &k, &seq_never))) return rc;
        *never &= seq_never;
        if (XGR_VEC_PUSH(p->stack, k)) return XGR_ERR_NOMEM;
        if (p->pos < p->n && p->s[p->pos] == '|') {
            p->pos++;
            continue;
        }
        break;
    }
    *node = mk_list(p, XGR_RX_ALT, p->stack.data + base, p->stack.len - base);
    p->stack.len = base;
    p->depth--;
    return *node < 0 ? ir_fail() : XGR_OK;
}

/* Parses src into p->g (IR) or p->ast (flat tree). */
static int run_parse(rx *p, const char *src, size_t len, const xgr_regex_opts *opts,
                     int32_t *out_node) {
    p->s = (const uint8_t *)(src ? src : "");
    p->n = len;
    p->macro = opts->dialect == XGR_REGEX_MACRO;
    p->ecma = opts->dialect == XGR_REGEX_ECMASCRIPT;
    p->icase = p->macro && opts->icase;
    p->json = p->macro && opts->json_string;
    p->dot_nl = !(p->macro && opts->has_flags) || opts->dot_all;
    if (p->macro && len >= 4 && memcmp(src, "(?i)", 4) == 0) { /* upstream's leading (?i) */
        p->icase = 1;
        p->pos = 4;
    }
    const uint8_t *nul = len ? memchr(p->s, 0, len) : NULL;
    if (nul && !p->macro && !p->ecma) /* upstream's converter works on C strings */
        return rerr(p, XGR_ERR_SYNTAX, (size_t)(nul - p->s),
                    "The regex must not contain null characters.");
    /* a non-NULL stack even for "" (stack.data + base must never be NULL + 0) */
    if (XGR_VEC_RESERVE(p->stack, 16)) return xgr_fail(XGR_ERR_NOMEM, "out of memory");
    int never = 0, rc = parse_alt(p, out_node, &never);
    if (!rc && p->pos < p->n) rc = rerr(p, XGR_ERR_SYNTAX, p->pos, "Unmatched ')'");
    if (!rc && never)
        rc = rerr(p, XGR_ERR_SEMANTIC, 0,
                  "the pattern matches no string: json_string=true removes '\"', '\\' and "
                  "U+0000..U+001F from every character match, and every alternative needs one");
    return rc;
}

static void rx_free(rx *p) {
    XGR_VEC_FREE(p->stack);
    XGR_VEC_FREE(p->lit);
    XGR_VEC_FREE(p->ranges);
    XGR_VEC_FREE(p->tmp);
    XGR_VEC_FREE(p->props);
}

int xgr_regex_to_node_opts(xgr_grammar *g, const char *src, size_t len,
                           const xgr_regex_opts *opts, int32_t *out_node) {
    if (!g || !out_node || (!src && len))
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_regex_to_node: NULL argument");
    static const xgr_regex_opts defaults = {XGR_REGEX_CONVERTER, 0, 0, 0, 0};
    if (!opts) opts = &defaults;
    if (opts->dialect != XGR_REGEX_CONVERTER && opts->dialect != XGR_REGEX_MACRO)
        return xgr_fail(XGR_ERR_INVALID_ARG,
                        "xgr_regex_to_node: the ECMAScript dialect has search semantics and "
                        "is parsed with xgr_regex_parse");
    rx p;
    memset(&p, 0, sizeof p);
    p.g = g;
    int rc = run_parse(&p, src, len, opts, out_node);
    rx_free(&p);
    return rc;
}

int xgr_regex_parse(const char *src, size_t src_len, int dialect, xgr_regex_ast **out) {
    if (!out) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_regex_parse: out is NULL");
    *out = NULL;
    if (!src && src_len) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_regex_parse: src is NULL");
    if (dialect != XGR_REGEX_CONVERTER && dialect != XGR_REGEX_MACRO &&
        dialect != XGR_REGEX_ECMASCRIPT)
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_regex_parse: unknown dialect %d", dialect);
    xgr_regex_opts opts = {dialect, 0, 0, 0, 0};
    xgr_rx_builder b;
    memset(&b, 0, sizeof b);
    rx p;
    memset(&p, 0, sizeof p);
    p.ast = &b;
    int32_t root = -1;
    int rc = run_parse(&p, src, src_len, &opts, &root);
    rx_free(&p);
    if (!rc) rc = xgr_rx_finish(&b, root, out);
    xgr_rx_builder_free(&b);
    return rc;
}

int xgr_regex_to_node(xgr_grammar *g, const char *src, size_t len, int32_t *out_node) {
    return xgr_regex_to_node_opts(g, src, len, NULL, out_node);
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
