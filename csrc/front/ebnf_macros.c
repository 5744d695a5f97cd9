/* EBNF front end, macro calls: Regex(...), Substring(...), TagDispatch(...) (with the
 * lifting of a TagDispatch / Substring that is not a whole rule body into a fresh rule)
 * and the Token(id, ...) terminal, in upstream xgrammar 0.2.8's argument syntax. The
 * rest of the EBNF parser is ebnf.c; the state both share is in ebnf_internal.h. */
#include <stdio.h>

#include "ebnf_internal.h"
#include "../common/token_marker.h"

/* One macro argument value at p->pos, skipped (a string is left in p->buf); *kind says
 * what it was. Upstream's values: string, integer, boolean, tuple; a bare name also
 * parses (Regex(abc) then reports that the pattern must be a string). */
enum { MARG_STRING, MARG_INT, MARG_TRUE, MARG_FALSE, MARG_TUPLE, MARG_NAME };

static int skip_macro_value(ebnf *p, int *kind, int depth) {
    size_t at = p->pos;
    uint8_t c = at < p->n ? p->s[at] : 0;
    if (depth > XGR_FRONT_MAX_DEPTH)
        return xgr_ebnf_perr(p, XGR_ERR_LIMIT, at, "macro argument nesting is deeper than %d",
                             XGR_FRONT_MAX_DEPTH);
    if (c == '"') {
        *kind = MARG_STRING;
        return xgr_ebnf_lex_string(p, 0);
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
        p->pos = xgr_ebnf_skip_ws_at(p, at + 1);
        while (p->pos < p->n && p->s[p->pos] != ')') {
            if ((rc = skip_macro_value(p, &k, depth + 1))) return rc;
            xgr_ebnf_skip_ws(p);
            if (p->pos < p->n && p->s[p->pos] == ',') p->pos = xgr_ebnf_skip_ws_at(p, p->pos + 1);
            else if (p->pos >= p->n || p->s[p->pos] != ')') return xgr_ebnf_expected(p, p->pos,
                                                                                     "',' or ')'");
        }
        if (p->pos >= p->n) return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, at, "unclosed '('");
        p->pos++;
        *kind = MARG_TUPLE;
        return XGR_OK;
    }
    if (xgr_ebnf_is_name_start(c)) {
        size_t e = xgr_ebnf_name_end(p, at);
        *kind = e - at == 4 && memcmp(p->s + at, "true", 4) == 0    ? MARG_TRUE
                : e - at == 5 && memcmp(p->s + at, "false", 5) == 0 ? MARG_FALSE
                                                                    : MARG_NAME;
        p->pos = e;
        return XGR_OK;
    }
    return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, at,
                         "Expect string, integer, boolean, or tuple in macro argument");
}

/* Regex("pattern" [, json_string=true|false] [, flags="..."]) with upstream xgrammar
 * 0.2.8's argument rules and messages; `start` is where "Regex" begins, p->pos is just
 * after its '('. flags: i (ASCII case folding), s ('.' matches \n), u (no-op); with a
 * flags argument, '.' excludes \n unless s. */
XGR_NOINLINE int xgr_ebnf_macro_regex(ebnf *p, size_t start, int32_t *node) {
    xgr_regex_opts o = {XGR_REGEX_MACRO, 0, 0, 0, 0};
    size_t str_pos = 0;
    int n_positional = 0, pat_is_string = 0, kind, rc;
    xgr_ebnf_skip_ws(p);
    while (p->pos < p->n && p->s[p->pos] != ')') {
        size_t arg = p->pos;
        size_t e = xgr_ebnf_is_name_start(p->s[arg]) ? xgr_ebnf_name_end(p, arg) : arg;
        size_t eq = xgr_ebnf_skip_ws_at(p, e);
        if (e > arg && eq < p->n && p->s[eq] == '=') {
            p->pos = xgr_ebnf_skip_ws_at(p, eq + 1);
            if ((rc = skip_macro_value(p, &kind, 0))) return rc;
            if (e - arg == 11 && memcmp(p->s + arg, "json_string", 11) == 0) {
                if (kind != MARG_TRUE && kind != MARG_FALSE)
                    return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, arg, "json_string must be a boolean");
                o.json_string = kind == MARG_TRUE;
            } else if (e - arg == 5 && memcmp(p->s + arg, "flags", 5) == 0) {
                if (kind != MARG_STRING)
                    return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, arg, "flags must be a string");
                o.has_flags = 1;
                for (size_t i = 0; i < p->buf.len; i++) {
                    uint8_t f = (uint8_t)p->buf.data[i];
                    if (f == 'i') o.icase = 1;
                    else if (f == 's') o.dot_all = 1;
                    else if (f != 'u')
                        return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, arg,
                                             f >= 0x20 && f < 0x7f
                                                 ? "regular-expression flag '%c' is not "
                                                   "supported (Regex flags are i, s and u)"
                                                 : "regular-expression flag '\\x%02x' is not "
                                                   "supported (Regex flags are i, s and u)",
                                             f);
                }
            } else {
                return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, arg,
                                     "Regex does not support the named argument %.*s (it has "
                                     "json_string and flags)",
                                     (int)(e - arg), (const char *)p->s + arg);
            }
        } else {
            if ((rc = skip_macro_value(p, &kind, 0))) return rc;
            if (++n_positional == 1) str_pos = arg, pat_is_string = kind == MARG_STRING;
        }
        xgr_ebnf_skip_ws(p);
        if (p->pos < p->n && p->s[p->pos] == ',') {
            p->pos++;
            xgr_ebnf_skip_ws(p);
            if (p->pos < p->n && p->s[p->pos] == ')')
                return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, p->pos,
                                     "Expect string, integer, boolean, or tuple in macro argument");
        } else if (p->pos >= p->n || p->s[p->pos] != ')') {
            return xgr_ebnf_expected(p, p->pos, "',' or ')' closing Regex(");
        }
    }
    if (p->pos >= p->n) return xgr_ebnf_expected(p, p->pos, "')' closing Regex(");
    p->pos++;
    if (n_positional != 1)
        return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, start, "Regex expects exactly one string argument");
    if (!pat_is_string)
        return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, str_pos, "Regex pattern must be a string literal");
    size_t end = p->pos; /* re-read the pattern: a flags string may have reused p->buf */
    p->pos = str_pos;
    if ((rc = xgr_ebnf_lex_string(p, 0))) return rc;
    p->pos = end;
    rc = xgr_regex_to_node_opts(p->g, (const char *)p->buf.data, p->buf.len, &o, node);
    if (rc) {
        char inner[600];
        snprintf(inner, sizeof inner, "%s", xgr_last_error());
        return xgr_ebnf_perr(p, rc, str_pos, "in the pattern of Regex(...): %s", inner);
    }
    return XGR_OK;
}

/* ---- Substring(...) --------------------------------------------------------------------
 * Upstream xgrammar 0.2.8's macro: Substring( ["chunk" {, "chunk"}] ), no trailing comma,
 * no named arguments. It matches any run of consecutive chunks (the empty run included);
 * chunks are atomic. Chunks may be empty and may use the b"..." raw-byte extension (so a
 * printed grammar parses back). Like TagDispatch, a Substring that is not a whole rule
 * body is moved into a fresh rule (xgr_ebnf_macro_lift). p->pos is at the '('. */
XGR_NOINLINE int xgr_ebnf_macro_substring(ebnf *p, size_t start, int32_t *node) {
    u8vec data = {0};
    szvec len = {0};
    const uint8_t **str = NULL;
    int rc = XGR_OK;
    p->pos = xgr_ebnf_skip_ws_at(p, p->pos + 1);
    if (p->pos < p->n && p->s[p->pos] == ')') {
        p->pos++;
    } else {
        for (;;) {
            size_t at = p->pos;
            int bytes = at + 1 < p->n && p->s[at] == 'b' && p->s[at + 1] == '"';
            if (at < p->n && (p->s[at] == '"' || bytes)) {
                if ((rc = xgr_ebnf_lex_string(p, bytes))) goto done;
                if (XGR_VEC_RESERVE(data, data.len + p->buf.len + 1) ||
                    XGR_VEC_PUSH(len, p->buf.len)) {
                    rc = XGR_ERR_NOMEM;
                    goto done;
                }
                if (p->buf.len) memcpy(data.data + data.len, p->buf.data, p->buf.len);
                data.len += p->buf.len;
            } else if (at < p->n && xgr_ebnf_is_name_start(p->s[at])) {
                size_t q = xgr_ebnf_skip_ws_at(p, xgr_ebnf_name_end(p, at));
                int nl = (int)(xgr_ebnf_name_end(p, at) - at > 40 ? 40
                                                                  : xgr_ebnf_name_end(p, at) - at);
                rc = q < p->n && p->s[q] == '='
                         ? xgr_ebnf_perr(p, XGR_ERR_SYNTAX, at,
                                         "Substring() does not accept named arguments, "
                                         "found '%.*s='",
                                         nl, (const char *)p->s + at)
                         : xgr_ebnf_perr(p, XGR_ERR_SYNTAX, at,
                                         "Substring() arguments must be strings (\"...\"), "
                                         "found '%.*s'",
                                         nl, (const char *)p->s + at);
                goto done;
            } else if (at >= p->n || p->s[at] == ')' || p->s[at] == ',' ||
                       xgr_ebnf_at_rule_start(p, at)) {
                rc = at >= p->n ? xgr_ebnf_perr(p, XGR_ERR_SYNTAX, start, "unclosed 'Substring('")
                                : xgr_ebnf_expected(p, at, "a string argument in Substring(...)");
                goto done;
            } else {
                char b[32];
                rc = xgr_ebnf_perr(p, XGR_ERR_SYNTAX, at,
                                   "Substring() arguments must be strings, found %s",
                                   xgr_ebnf_found(p, at, b, sizeof b));
                goto done;
            }
            p->pos = xgr_ebnf_skip_ws_at(p, p->pos);
            if (p->pos < p->n && p->s[p->pos] == ',') {
                p->pos = xgr_ebnf_skip_ws_at(p, p->pos + 1);
                continue;
            }
            if (p->pos < p->n && p->s[p->pos] == ')') {
                p->pos++;
                break;
            }
            rc = p->pos >= p->n || xgr_ebnf_at_rule_start(p, p->pos)
                     ? xgr_ebnf_perr(p, XGR_ERR_SYNTAX, start, "unclosed 'Substring('")
                     : xgr_ebnf_expected(p, p->pos, "',' or ')' in Substring(...)");
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
    if (*node < 0) rc = xgr_front_ir_status();
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
 * is not a whole rule body is moved into a fresh rule `<rule>_1` (see xgr_ebnf_macro_lift),
 * which is what upstream does too. */

typedef struct {
    size_t off, len, pos; /* bytes in td->data; source offset of the literal */
    int32_t rule;         /* triggers only */
} td_str;

typedef struct {
    XGR_VEC(td_str) trig, excl;
    u8vec data;
    int loop;
    size_t open; /* offset of the macro's '(': upstream reports argument errors there (our
                  * messages add the argument's own line:column) */
} td_args;

static void td_args_free(td_args *a) {
    XGR_VEC_FREE(a->trig);
    XGR_VEC_FREE(a->excl);
    XGR_VEC_FREE(a->data);
}

/* `Token(` at p->pos (the name): the token ids inside, as markers in p->buf, one after
 * another (XGR_TOKEN_MARKER_LEN bytes each); *count gets how many. Ids are decimal
 * integers separated by commas; `ExcludeToken(...)` is refused with a hint. */
int xgr_ebnf_lex_token_ids(ebnf *p, int32_t *count) {
    size_t start = p->pos;
    p->pos = xgr_ebnf_skip_ws_at(p, p->pos + 5);
    if (p->pos >= p->n || p->s[p->pos] != '(') return xgr_ebnf_expected(p, p->pos,
                                                                        "'(' after Token");
    p->pos = xgr_ebnf_skip_ws_at(p, p->pos + 1);
    p->buf.len = 0;
    *count = 0;
    for (;;) {
        size_t at = p->pos;
        long id = 0;
        if (at >= p->n || p->s[at] < '0' || p->s[at] > '9')
            return xgr_ebnf_expected(p, at, "a token id (a non-negative integer) in Token(...)");
        while (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
            id = id * 10 + (p->s[p->pos] - '0');
            if (id > INT32_MAX)
                return xgr_ebnf_perr(p, XGR_ERR_SEMANTIC, at,
                                     "token id in Token(...) is larger than %d", (int)INT32_MAX);
            p->pos++;
        }
        if (XGR_VEC_RESERVE(p->buf, p->buf.len + XGR_TOKEN_BIG_LEN)) return XGR_ERR_NOMEM;
        if (id >= XGR_TOKEN_PSEUDO_MIN) {
            xgr_token_big((int32_t)id, p->buf.data + p->buf.len);
            p->buf.len += XGR_TOKEN_BIG_LEN;
        } else {
            xgr_token_marker((int32_t)id, p->buf.data + p->buf.len);
            p->buf.len += XGR_TOKEN_MARKER_LEN;
        }
        (*count)++;
        p->pos = xgr_ebnf_skip_ws_at(p, p->pos);
        if (p->pos < p->n && p->s[p->pos] == ',') {
            p->pos = xgr_ebnf_skip_ws_at(p, p->pos + 1);
            continue;
        }
        if (p->pos < p->n && p->s[p->pos] == ')') {
            p->pos++;
            return XGR_OK;
        }
        if (p->pos >= p->n) return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, start, "unclosed 'Token('");
        return xgr_ebnf_expected(p, p->pos, "',' or ')' in Token(...)");
    }
}

int xgr_ebnf_at_token_macro(const ebnf *p, size_t at) {
    return at + 5 <= p->n && memcmp(p->s + at, "Token", 5) == 0 &&
           (at + 5 == p->n || !xgr_ebnf_is_name_char(p->s[at + 5])) &&
           xgr_ebnf_skip_ws_at(p, at + 5) < p->n && p->s[xgr_ebnf_skip_ws_at(p, at + 5)] == '(';
}

/* A non-empty string argument ("..." or b"..." or Token(k)) at p->pos, a trigger or an
 * excluded string, appended to a->data. */
static int td_string(ebnf *p, td_args *a, int trigger, td_str *out) {
    size_t at = p->pos, l, c; /* l, c: only computed for an error (a scan from the start) */
    int rc, bytes = at + 1 < p->n && p->s[at] == 'b' && p->s[at + 1] == '"';
    const char *what = trigger ? "Tag" : "Exclude";
    if (xgr_ebnf_at_token_macro(p, at)) {
        int32_t k;
        if ((rc = xgr_ebnf_lex_token_ids(p, &k))) return rc;
        if (k != 1)
            return xgr_ebnf_perr(p, XGR_ERR_SEMANTIC, at,
                                 "TagDispatch: Token(...) as %s takes one id",
                                 trigger ? "a trigger" : "an excluded string");
    } else if (!bytes && (at >= p->n || p->s[at] != '"')) {
        char b[32];
        xgr_diag_line_col(p->s, p->n, at, &l, &c);
        return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, a->open,
                             "%s must be a non-empty string literal (expected %s string at line "
                             "%zu, column %zu, found %s)",
                             what, trigger ? "a trigger" : "an excluded", l, c,
                             xgr_ebnf_found(p, at, b, sizeof b));
    } else if ((rc = xgr_ebnf_lex_string(p, bytes))) {
        return rc;
    }
    if (!p->buf.len) {
        xgr_diag_line_col(p->s, p->n, at, &l, &c);
        return xgr_ebnf_perr(p, XGR_ERR_SEMANTIC, a->open,
                             "%s must be a non-empty string literal (the %s string at line %zu, "
                             "column %zu is empty)",
                             what, trigger ? "trigger" : "excluded", l, c);
    }
    out->off = a->data.len;
    out->len = p->buf.len;
    out->pos = at;
    out->rule = -1;
    if (XGR_VEC_RESERVE(a->data, a->data.len + p->buf.len)) return XGR_ERR_NOMEM;
    memcpy(a->data.data + a->data.len, p->buf.data, p->buf.len);
    a->data.len += p->buf.len;
    return XGR_OK;
}

/* The element at `at` is not a ("trigger", rule_name) pair. */
static XGR_NOINLINE int td_not_pair(const ebnf *p, const td_args *a, size_t at) {
    size_t l, c;
    xgr_diag_line_col(p->s, p->n, at, &l, &c);
    return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, a->open,
                         "Each tag dispatch element must be a pair (tag, rule) (the tuple at "
                         "line %zu, column %zu is not a (\"trigger\", rule_name) pair)",
                         l, c);
}

/* ("trigger", rule_name) at p->pos (an opening parenthesis). */
static int td_pair(ebnf *p, td_args *a) {
    size_t open = p->pos;
    td_str t;
    int rc;
    p->pos = xgr_ebnf_skip_ws_at(p, p->pos + 1);
    if (p->pos < p->n && p->s[p->pos] == ')') return td_not_pair(p, a, open);
    if ((rc = td_string(p, a, 1, &t))) return rc;
    p->pos = xgr_ebnf_skip_ws_at(p, p->pos);
    if (p->pos >= p->n || p->s[p->pos] != ',') {
        char b[32];
        return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, p->pos,
                             "Expect , or ) in tuple (expected ',' and a rule name after the "
                             "trigger string, found %s)",
                             xgr_ebnf_found(p, p->pos, b, sizeof b));
    }
    p->pos = xgr_ebnf_skip_ws_at(p, p->pos + 1);
    size_t at = p->pos, e = xgr_ebnf_name_end(p, at);
    if (e == at) return xgr_ebnf_expected(p, at, "a rule name after the trigger string");
    int32_t r = xgr_ir_rule(p->g, (const char *)p->s + at, e - at);
    if (r < 0) return xgr_front_ir_status();
    if ((rc = xgr_ebnf_track_rules(p))) return rc;
    if (!p->ref_pos.data[r]) {
        p->ref_pos.data[r] = a->open + 1;
        p->ref_td.data[r] = at + 1;
    }
    t.rule = r;
    p->pos = xgr_ebnf_skip_ws_at(p, e);
    if (p->pos < p->n && p->s[p->pos] == ',') p->pos = xgr_ebnf_skip_ws_at(p, p->pos + 1);
    if (p->pos >= p->n || p->s[p->pos] != ')') {
        if (p->pos < p->n && (p->s[p->pos] == '"' || xgr_ebnf_is_name_start(p->s[p->pos])))
            return td_not_pair(p, a, open);
        return xgr_ebnf_expected(p, p->pos, "')' closing the (trigger, rule) pair");
    }
    p->pos++;
    return XGR_VEC_PUSH(a->trig, t) ? XGR_ERR_NOMEM : XGR_OK;
}

/* excludes=( ... ) value at p->pos. Replaces earlier excludes. */
static int td_excludes(ebnf *p, td_args *a) {
    int rc;
    if (p->pos >= p->n || p->s[p->pos] != '(')
        return xgr_ebnf_expected(p, p->pos, "a tuple of strings after excludes=, e.g. (\"</s>\")");
    a->excl.len = 0;
    p->pos = xgr_ebnf_skip_ws_at(p, p->pos + 1);
    while (p->pos < p->n && p->s[p->pos] != ')') {
        td_str t;
        if ((rc = td_string(p, a, 0, &t))) return rc;
        if (XGR_VEC_PUSH(a->excl, t)) return XGR_ERR_NOMEM;
        p->pos = xgr_ebnf_skip_ws_at(p, p->pos);
        if (p->pos < p->n && p->s[p->pos] == ',') {
            p->pos = xgr_ebnf_skip_ws_at(p, p->pos + 1);
        } else if (p->pos >= p->n || p->s[p->pos] != ')') {
            return xgr_ebnf_expected(p, p->pos, "',' or ')' in the excludes tuple");
        }
    }
    if (p->pos >= p->n) return xgr_ebnf_expected(p, p->pos, "')' closing the excludes tuple");
    p->pos++;
    return XGR_OK;
}

/* name=value at p->pos. */
static int td_named(ebnf *p, td_args *a) {
    size_t at = p->pos, e = xgr_ebnf_name_end(p, at), len = e - at;
    const char *nm = (const char *)p->s + at;
    int is_loop = len == 19 && memcmp(nm, "loop_after_dispatch", 19) == 0;
    int is_excl = len == 8 && memcmp(nm, "excludes", 8) == 0;
    size_t l, c; /* only computed for an error (a scan from the start) */
    if (!is_loop && !is_excl) {
        xgr_diag_line_col(p->s, p->n, at, &l, &c);
        if ((len == 8 && memcmp(nm, "stop_eos", 8) == 0) ||
            (len == 8 && memcmp(nm, "stop_str", 8) == 0))
            return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, a->open,
                                 "Unknown named argument for TagDispatch: %.*s (at line %zu, "
                                 "column %zu; older xgrammar releases had it, 0.2.8 does not: "
                                 "use loop_after_dispatch=true|false and excludes=(...), with "
                                 "the stop string after the rule)",
                                 (int)len, nm, l, c);
        size_t q = xgr_ebnf_skip_ws_at(p, e);
        if (q < p->n && p->s[q] == '=')
            return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, a->open,
                                 "Unknown named argument for TagDispatch: %.*s (at line %zu, "
                                 "column %zu; expected loop_after_dispatch or excludes)",
                                 (int)(len > 64 ? 64 : len), nm, l, c);
        return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, a->open,
                             "Each tag dispatch element must be a tuple (the name at line %zu, "
                             "column %zu is neither a (\"trigger\", rule_name) pair nor a named "
                             "argument)",
                             l, c);
    }
    p->pos = xgr_ebnf_skip_ws_at(p, e);
    if (p->pos >= p->n || p->s[p->pos] != '=')
        return xgr_ebnf_expected(p, p->pos,
                                 is_loop ? "'=' after loop_after_dispatch" : "'=' after excludes");
    p->pos = xgr_ebnf_skip_ws_at(p, p->pos + 1);
    if (is_excl) return td_excludes(p, a);
    size_t v = p->pos, ve = xgr_ebnf_name_end(p, v);
    if (ve - v == 4 && memcmp(p->s + v, "true", 4) == 0) {
        a->loop = 1;
    } else if (ve - v == 5 && memcmp(p->s + v, "false", 5) == 0) {
        a->loop = 0;
    } else {
        char b[48];
        xgr_diag_line_col(p->s, p->n, v, &l, &c);
        if (ve > v)
            snprintf(b, sizeof b, "'%.*s'", (int)(ve - v > 40 ? 40 : ve - v),
                     (const char *)p->s + v);
        return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, a->open,
                             "loop_after_dispatch must be a boolean literal (true or false), "
                             "found %s at line %zu, column %zu",
                             ve > v ? b : xgr_ebnf_found(p, v, b, sizeof b), l, c);
    }
    p->pos = ve;
    return XGR_OK;
}

/* The arguments after `TagDispatch`; p->pos is at the opening parenthesis. */
XGR_NOINLINE int xgr_ebnf_macro_tag_dispatch(ebnf *p, size_t start, int32_t *node) {
    td_args a;
    memset(&a, 0, sizeof a);
    a.loop = 1;
    a.open = p->pos;
    const uint8_t **str = NULL;
    size_t *len = NULL;
    int32_t *rules = NULL;
    int rc = XGR_OK;
    p->pos = xgr_ebnf_skip_ws_at(p, p->pos + 1);
    if (p->pos < p->n && p->s[p->pos] != ')') {
        for (;;) {
            if (p->pos < p->n && p->s[p->pos] == '(') {
                rc = td_pair(p, &a);
            } else if (p->pos < p->n && xgr_ebnf_is_name_start(p->s[p->pos]) &&
                       !(p->s[p->pos] == 'b' && p->pos + 1 < p->n && p->s[p->pos + 1] == '"')) {
                rc = td_named(p, &a);
            } else if (p->pos < p->n && (p->s[p->pos] == '"' || p->s[p->pos] == 'b')) {
                size_t l, c;
                xgr_diag_line_col(p->s, p->n, p->pos, &l, &c);
                rc = xgr_ebnf_perr(p, XGR_ERR_SYNTAX, a.open,
                                   "Each tag dispatch element must be a tuple (found a string at "
                                   "line %zu, column %zu; write (\"trigger\", rule_name))",
                                   l, c);
            } else if (p->pos < p->n && p->s[p->pos] == ')') {
                rc = xgr_ebnf_perr(p, XGR_ERR_SYNTAX, p->pos,
                                   "Expect string, integer, boolean, or tuple in macro argument "
                                   "(a comma after the last TagDispatch argument)");
            } else {
                rc = xgr_ebnf_expected(p, p->pos,
                                       "a (\"trigger\", rule_name) pair or a named argument");
            }
            if (rc) goto done;
            p->pos = xgr_ebnf_skip_ws_at(p, p->pos);
            if (p->pos < p->n && p->s[p->pos] == ',') {
                p->pos = xgr_ebnf_skip_ws_at(p, p->pos + 1);
                continue;
            }
            break;
        }
    }
    if (p->pos >= p->n || p->s[p->pos] != ')') {
        size_t l, c;
        xgr_diag_line_col(p->s, p->n, start, &l, &c);
        rc = p->pos >= p->n || xgr_ebnf_at_rule_start(p, p->pos)
                 ? xgr_ebnf_perr(p, XGR_ERR_SYNTAX, p->pos,
                                 "Expect , or ) in macro arguments (the 'TagDispatch(' at line "
                                 "%zu, column %zu is not closed)",
                                 l, c)
                 : xgr_ebnf_expected(p, p->pos, "',' or ')' in TagDispatch(...)");
        goto done;
    }
    p->pos++;
    /* As upstream: such an exclude would forbid the trigger itself, surely a mistake. */
    for (size_t j = 0; j < a.excl.len; j++) {
        const td_str *x = &a.excl.data[j];
        for (size_t i = 0; i < a.trig.len; i++) {
            const td_str *t = &a.trig.data[i];
            if (x->len <= t->len && memcmp(a.data.data + x->off, a.data.data + t->off, x->len) == 0) {
                size_t xl, xc, tl, tc;
                char q[80];
                xgr_diag_line_col(p->s, p->n, x->pos, &xl, &xc);
                xgr_diag_line_col(p->s, p->n, t->pos, &tl, &tc);
                rc = xgr_ebnf_perr(p, XGR_ERR_SEMANTIC, a.open,
                                   "Exclude string must not be a prefix of trigger string: %s "
                                   "(the excluded string at line %zu, column %zu is a prefix of, "
                                   "or equal to, the trigger at line %zu, column %zu)",
                                   xgr_diag_quote(a.data.data + x->off, x->len, q, sizeof q), xl,
                                   xc, tl, tc);
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
    if (*node < 0) rc = xgr_front_ir_status();
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
int xgr_ebnf_macro_lift(ebnf *p, int32_t rule, int32_t body, size_t first) {
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
            rc = xgr_front_ir_status();
            goto done;
        }
        g->rules.data[r].body = (int32_t)id;
        map[id - first] = ref;
    }
    if ((rc = xgr_ebnf_track_rules(p))) goto done;
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
