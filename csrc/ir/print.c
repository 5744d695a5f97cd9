/* IR -> canonical EBNF. The output parses back (xgr_grammar_from_ebnf) to an IR that
 * prints identically: groups are parenthesised exactly where the tree needs them and the
 * parser keeps group structure. Literal syntax (including the b"..." / b[...] raw-byte
 * extension for BYTES that are not valid UTF-8 and for BYTE_CLASS) is described in
 * csrc/front/front.h (the EBNF syntax).
 *
 * Layout: root rule first, then the other rules in id order, one per line:
 *   name ::= body
 *   name ::= body (= lookahead) */
#include <stdio.h>

#include "../common/text.h"
#include "ir.h"
#include "../common/token_marker.h"

enum { P_ALT = 0, P_SEQ = 1, P_REP = 2, P_ATOM = 3 };

/* Bounds the recursion (about 100 bytes of stack a level) and catches cyclic IR; the
 * EBNF parser accepts only XGR_FRONT_MAX_DEPTH levels of parentheses anyway. */
#define PRINT_MAX_DEPTH 10000

typedef struct {
    const xgr_grammar *g;
    xgr_strbuf out;
} printer;

static int malformed(const char *what) {
    return xgr_fail(XGR_ERR_INTERNAL, "cannot print grammar: malformed IR (%s)", what);
}

/* Code points that would print as nothing or as look-alike blanks: escaped so the
 * output stays readable and diffable. */
static int invisible(uint32_t cp) {
    return (cp >= 0x80 && cp <= 0xa0) || cp == 0xad || cp == 0x034f || cp == 0x061c ||
           cp == 0x1680 || cp == 0x180e || (cp >= 0x2000 && cp <= 0x200f) ||
           (cp >= 0x2028 && cp <= 0x202f) || (cp >= 0x205f && cp <= 0x206f) ||
           cp == 0x3000 || (cp >= 0xe000 && cp <= 0xf8ff) || (cp >= 0xfdd0 && cp <= 0xfdef) ||
           (cp >= 0xfe00 && cp <= 0xfe0f) || cp == 0xfeff || (cp >= 0xfff0 && cp <= 0xfffb) ||
           (cp & 0xfffe) == 0xfffe || (cp >= 0xe0000 && cp <= 0xe0fff) || cp >= 0xf0000;
}

static int put_cp_escaped(xgr_strbuf *b, uint32_t cp, int in_class) {
    switch (cp) {
    case '\n': return xgr_sb_puts(b, "\\n");
    case '\r': return xgr_sb_puts(b, "\\r");
    case '\t': return xgr_sb_puts(b, "\\t");
    case '\\': return xgr_sb_puts(b, "\\\\");
    default: break;
    }
    if (!in_class && cp == '"') return xgr_sb_puts(b, "\\\"");
    if (in_class && (cp == ']' || cp == '-' || cp == '^' || cp == '['))
        return xgr_sb_printf(b, "\\%c", (char)cp);
    if (cp < 0x20 || cp == 0x7f) return xgr_sb_printf(b, "\\x%02x", (unsigned)cp);
    /* \U form for surrogates: a pair of \u surrogates would be re-read as one code
     * point. */
    if ((cp >= 0xd800 && cp <= 0xdfff) || cp > 0xffff) {
        if ((cp >= 0xd800 && cp <= 0xdfff) || invisible(cp))
            return xgr_sb_printf(b, "\\U%08lx", (unsigned long)cp);
    } else if (invisible(cp)) {
        return xgr_sb_printf(b, "\\u%04x", (unsigned)cp);
    }
    uint8_t u[4];
    int k = xgr_utf8_encode(cp, u);
    return xgr_sb_put(b, (const char *)u, (size_t)k);
}

static int put_raw_byte(xgr_strbuf *b, uint32_t v, int in_class) {
    if (v > 0xff) return malformed("byte value above 0xff");
    if (v == '\\' || (!in_class && v == '"') ||
        (in_class && (v == ']' || v == '-' || v == '^' || v == '[')))
        return xgr_sb_printf(b, "\\%c", (char)v);
    if (v >= 0x20 && v < 0x7f) {
        char c = (char)v;
        return xgr_sb_put(b, &c, 1);
    }
    if (v == '\n') return xgr_sb_puts(b, "\\n");
    if (v == '\r') return xgr_sb_puts(b, "\\r");
    if (v == '\t') return xgr_sb_puts(b, "\\t");
    return xgr_sb_printf(b, "\\x%02x", (unsigned)v);
}

/* A literal; `chunk` for a Substring chunk: never Token(k), and NUL as \0 (how upstream
 * prints it there). */
static int print_bytes_ex(printer *p, const uint8_t *s, size_t n, int chunk) {
    int rc;
    int32_t token = xgr_token_marker_id(s, n), n_cls = 0;
    if (!chunk && xgr_token_class_span(s, n, &n_cls) == n) {
        if ((rc = xgr_sb_puts(&p->out, "ExcludeToken("))) return rc;
        for (int32_t i = 0; i < n_cls; i++)
            if ((rc = xgr_sb_printf(&p->out, i ? ", %d" : "%d",
                                    (int)xgr_token_marker_id(s + (size_t)(i + 1) * 6, 6))))
                return rc;
        return xgr_sb_puts(&p->out, ")");
    }
    if (!chunk && n == XGR_TOKEN_BIG_LEN && xgr_token_big_id(s, n) >= 0)
        return xgr_sb_printf(&p->out, "Token(%ld)", (long)xgr_token_big_id(s, n));
    if (!chunk && n == XGR_TOKEN_MARKER_LEN && token >= 0)
        return xgr_sb_printf(&p->out, "Token(%d)", (int)token);
    if (xgr_utf8_valid(s, n)) {
        if ((rc = xgr_sb_puts(&p->out, "\""))) return rc;
        for (size_t i = 0; i < n;) {
            uint32_t cp;
            int k = xgr_utf8_decode(s + i, n - i, &cp);
            rc = chunk && cp == 0 ? xgr_sb_puts(&p->out, "\\0") : put_cp_escaped(&p->out, cp, 0);
            if (rc) return rc;
            i += (size_t)k;
        }
    } else {
        if ((rc = xgr_sb_puts(&p->out, "b\""))) return rc;
        for (size_t i = 0; i < n; i++)
            if ((rc = put_raw_byte(&p->out, s[i], 0))) return rc;
    }
    return xgr_sb_puts(&p->out, "\"");
}

static int print_bytes(printer *p, const uint8_t *s, size_t n) { return print_bytes_ex(p, s, n, 0); }

static int print_class(printer *p, const xgr_node *nd) {
    const xgr_grammar *g = p->g;
    int bytes = nd->kind == XGR_NODE_BYTE_CLASS, rc;
    if (nd->count < 0 || nd->off < 0 || (size_t)nd->off + 2 * (size_t)nd->count > g->ranges.len)
        return malformed("class ranges out of bounds");
    if ((rc = xgr_sb_puts(&p->out, bytes ? "b[" : "["))) return rc;
    if (nd->negated && (rc = xgr_sb_puts(&p->out, "^"))) return rc;
    for (int32_t i = 0; i < nd->count; i++) {
        uint32_t lo = g->ranges.data[nd->off + 2 * i], hi = g->ranges.data[nd->off + 2 * i + 1];
        for (int end = 0; end < 2; end++) {
            uint32_t v = end ? hi : lo;
            if (end) {
                if (hi == lo) break;
                if ((rc = xgr_sb_puts(&p->out, "-"))) return rc;
            }
            rc = bytes ? put_raw_byte(&p->out, v, 1) : put_cp_escaped(&p->out, v, 1);
            if (rc) return rc;
        }
    }
    return xgr_sb_puts(&p->out, "]");
}

/* TagDispatch in upstream xgrammar's printed layout (a whole rule body):
 *   TagDispatch(
 *     ("<function=", rule),
 *     loop_after_dispatch=true,
 *     excludes=("</tool_call>", "<|im_end|>")
 *   )
 * Strings use the same literal syntax as BYTES nodes. */
static int check_node(const xgr_grammar *g, int32_t id);

/* Prints the BYTES node `s` (a TagDispatch string). */
static int print_td_string(printer *p, int32_t s) {
    const xgr_grammar *g = p->g;
    if (!check_node(g, s) || g->nodes.data[s].kind != XGR_NODE_BYTES)
        return malformed("TagDispatch string is not a literal");
    const xgr_node *b = &g->nodes.data[s];
    if (b->count < 1 || b->off < 0 || (size_t)b->off + (size_t)b->count > g->bytes.len)
        return malformed("literal out of bounds");
    return print_bytes(p, g->bytes.data + b->off, (size_t)b->count);
}

static int print_tag_dispatch(printer *p, const xgr_node *nd) {
    const xgr_grammar *g = p->g;
    int rc;
    if (nd->count < 0 || nd->min < 0 || nd->off < 0 ||
        (size_t)nd->off + 2 * (size_t)nd->count + (size_t)nd->min > g->kids.len)
        return malformed("TagDispatch payload out of bounds");
    const int32_t *pay = g->kids.data + nd->off;
    if ((rc = xgr_sb_puts(&p->out, "TagDispatch(\n"))) return rc;
    for (int32_t i = 0; i < nd->count; i++) {
        int32_t r = pay[2 * i + 1];
        if (r < 0 || (size_t)r >= g->rules.len) return malformed("rule id out of range");
        if ((rc = xgr_sb_puts(&p->out, "  (")) || (rc = print_td_string(p, pay[2 * i])) ||
            (rc = xgr_sb_puts(&p->out, ", ")) ||
            (rc = xgr_sb_puts(&p->out, xgr_ir_rule_name(g, r))) ||
            (rc = xgr_sb_puts(&p->out, "),\n")))
            return rc;
    }
    if ((rc = xgr_sb_puts(&p->out, nd->a ? "  loop_after_dispatch=true,\n  excludes=("
                                         : "  loop_after_dispatch=false,\n  excludes=(")))
        return rc;
    for (int32_t j = 0; j < nd->min; j++) {
        if (j && (rc = xgr_sb_puts(&p->out, ", "))) return rc;
        if ((rc = print_td_string(p, pay[2 * nd->count + j]))) return rc;
    }
    return xgr_sb_puts(&p->out, ")\n)");
}

static int check_node(const xgr_grammar *g, int32_t id) {
    return id >= 0 && (size_t)id < g->nodes.len;
}

/* Substring("abc", "", "de"), as upstream xgrammar prints it. */
static int print_substring(printer *p, const xgr_node *nd) {
    const xgr_grammar *g = p->g;
    int rc;
    if (nd->count < 0 || nd->off < 0 || (size_t)nd->off + (size_t)nd->count > g->kids.len)
        return malformed("Substring chunks out of bounds");
    if ((rc = xgr_sb_puts(&p->out, "Substring("))) return rc;
    for (int32_t i = 0; i < nd->count; i++) {
        int32_t k = g->kids.data[nd->off + i];
        if (i && (rc = xgr_sb_puts(&p->out, ", "))) return rc;
        if (!check_node(g, k)) return malformed("Substring chunk id out of range");
        const xgr_node *b = &g->nodes.data[k];
        if (b->kind == XGR_NODE_EMPTY) {
            rc = xgr_sb_puts(&p->out, "\"\"");
        } else if (b->kind != XGR_NODE_BYTES || b->count < 0 || b->off < 0 ||
                   (size_t)b->off + (size_t)b->count > g->bytes.len) {
            return malformed("Substring chunk is not a literal");
        } else {
            rc = print_bytes_ex(p, g->bytes.data + b->off, (size_t)b->count, 1);
        }
        if (rc) return rc;
    }
    return xgr_sb_puts(&p->out, ")");
}

/* Follows one-child SEQ / ALT nodes, which print as their child. */
static int resolve(const xgr_grammar *g, int32_t *id) {
    for (int guard = 0;; guard++) {
        if (!check_node(g, *id)) return malformed("node id out of range");
        const xgr_node *nd = &g->nodes.data[*id];
        if ((nd->kind != XGR_NODE_SEQ && nd->kind != XGR_NODE_ALT) || nd->count != 1)
            return XGR_OK;
        if (guard > PRINT_MAX_DEPTH) return malformed("cyclic node");
        if (nd->off < 0 || (size_t)nd->off >= g->kids.len) return malformed("kids out of bounds");
        *id = g->kids.data[nd->off];
    }
}

static int prec(const xgr_node *nd) {
    switch (nd->kind) {
    case XGR_NODE_ALT: return nd->count >= 2 ? P_ALT : P_ATOM;
    case XGR_NODE_SEQ: return nd->count >= 2 ? P_SEQ : P_ATOM;
    case XGR_NODE_REPEAT: return P_REP;
    default: return P_ATOM;
    }
}

static int print_node(printer *p, int32_t id, int need, int depth) {
    const xgr_grammar *g = p->g;
    int rc;
    if (depth > PRINT_MAX_DEPTH)
        return xgr_fail(XGR_ERR_LIMIT, "cannot print grammar: expression nesting deeper than "
                                       "%d (or cyclic IR)", PRINT_MAX_DEPTH);
    if ((rc = resolve(g, &id))) return rc;
    const xgr_node *nd = &g->nodes.data[id];
    int paren = prec(nd) < need;
    if (paren && (rc = xgr_sb_puts(&p->out, "("))) return rc;
    switch (nd->kind) {
    case XGR_NODE_EMPTY: rc = xgr_sb_puts(&p->out, "\"\""); break;
    case XGR_NODE_BYTES:
        if (nd->count < 0 || nd->off < 0 || (size_t)nd->off + (size_t)nd->count > g->bytes.len)
            return malformed("literal out of bounds");
        rc = print_bytes(p, g->bytes.data + nd->off, (size_t)nd->count);
        break;
    case XGR_NODE_CLASS:
    case XGR_NODE_BYTE_CLASS: rc = print_class(p, nd); break;
    case XGR_NODE_TAG_DISPATCH: rc = print_tag_dispatch(p, nd); break;
    case XGR_NODE_SUBSTRING: rc = print_substring(p, nd); break;
    case XGR_NODE_REF:
        if (nd->a < 0 || (size_t)nd->a >= g->rules.len) return malformed("rule id out of range");
        rc = xgr_sb_puts(&p->out, xgr_ir_rule_name(g, nd->a));
        break;
    case XGR_NODE_REPEAT: {
        int32_t mn = nd->min, mx = nd->max;
        if ((rc = print_node(p, nd->a, P_ATOM, depth + 1))) return rc;
        if (mn == 0 && mx == -1) rc = xgr_sb_puts(&p->out, "*");
        else if (mn == 1 && mx == -1) rc = xgr_sb_puts(&p->out, "+");
        else if (mn == 0 && mx == 1) rc = xgr_sb_puts(&p->out, "?");
        else if (mx == mn) rc = xgr_sb_printf(&p->out, "{%ld}", (long)mn);
        else if (mx == -1) rc = xgr_sb_printf(&p->out, "{%ld,}", (long)mn);
        else rc = xgr_sb_printf(&p->out, "{%ld,%ld}", (long)mn, (long)mx);
        break;
    }
    case XGR_NODE_SEQ:
    case XGR_NODE_ALT: {
        if (nd->count < 0 || nd->off < 0 || (size_t)nd->off + (size_t)nd->count > g->kids.len)
            return malformed("kids out of bounds");
        if (nd->count == 0) {
            /* Empty SEQ matches ""; empty ALT matches nothing, like the empty class. */
            rc = xgr_sb_puts(&p->out, nd->kind == XGR_NODE_SEQ ? "\"\"" : "[]");
            break;
        }
        int seq = nd->kind == XGR_NODE_SEQ;
        for (int32_t i = 0; i < nd->count; i++) {
            if (i && (rc = xgr_sb_puts(&p->out, seq ? " " : " | "))) return rc;
            if ((rc = print_node(p, g->kids.data[nd->off + i], seq ? P_REP : P_SEQ, depth + 1)))
                return rc;
        }
        rc = XGR_OK;
        break;
    }
    default: return malformed("unknown node kind");
    }
    if (rc) return rc;
    if (paren) return xgr_sb_puts(&p->out, ")");
    return XGR_OK;
}

/* `[max_tokens=N, max_chars=N, max_json_chars=N, capture="label", capture_hidden_stop_bytes=N,
 * stop_capture="label", lazy, temperature=T]`, in upstream
 * xgrammar's order and number format (the temperature as a float, %.9g), then xgrammar2's
 * unique / unique_scope; nothing when the rule has no attributes. */
static int print_attrs(printer *p, const xgr_rule_attrs *a) {
    if (!xgr_attrs_any(a)) return XGR_OK;
    char buf[64];
    const char *sep = "[";
    int rc = XGR_OK;
    if (a->max_tokens >= 0) {
        snprintf(buf, sizeof buf, "%smax_tokens=%ld", sep, (long)a->max_tokens);
        rc = xgr_sb_puts(&p->out, buf);
        sep = ", ";
    }
    if (!rc && a->max_chars >= 0) {
        snprintf(buf, sizeof buf, "%smax_chars=%ld", sep, (long)a->max_chars);
        rc = xgr_sb_puts(&p->out, buf);
        sep = ", ";
    }
    if (!rc && a->max_json_chars >= 0) {
        snprintf(buf, sizeof buf, "%smax_json_chars=%ld", sep, (long)a->max_json_chars);
        rc = xgr_sb_puts(&p->out, buf);
        sep = ", ";
    }
    if (!rc && a->capture_off >= 0) {
        if (!(rc = xgr_sb_puts(&p->out, sep)) && !(rc = xgr_sb_puts(&p->out, "capture=\"")) &&
            !(rc = xgr_sb_puts(&p->out, p->g->names.data + a->capture_off)))
            rc = xgr_sb_puts(&p->out, "\"");
        sep = ", ";
    }
    if (!rc && a->hidden_kind) {
        snprintf(buf, sizeof buf, "%scapture_hidden_%s_bytes=%ld", sep,
                 a->hidden_kind == XGR_HIDDEN_STOP ? "stop" : "suffix", (long)a->hidden_bytes);
        rc = xgr_sb_puts(&p->out, buf);
        if (!rc && a->hidden_before) rc = xgr_sb_puts(&p->out, ", capture_hidden_before");
        if (!rc && a->hidden_body >= 0 && a->hidden_marker >= 0) {
            snprintf(buf, sizeof buf, ", capture_hidden_body_rule_id=%ld", (long)a->hidden_body);
            if (!(rc = xgr_sb_puts(&p->out, buf))) {
                snprintf(buf, sizeof buf, ", capture_hidden_marker_rule_id=%ld",
                         (long)a->hidden_marker);
                rc = xgr_sb_puts(&p->out, buf);
            }
        }
        sep = ", ";
    }
    if (!rc && a->stop_capture_off >= 0) {
        if (!(rc = xgr_sb_puts(&p->out, sep)) &&
            !(rc = xgr_sb_puts(&p->out, "stop_capture=\"")) &&
            !(rc = xgr_sb_puts(&p->out, p->g->names.data + a->stop_capture_off)))
            rc = xgr_sb_puts(&p->out, "\"");
        sep = ", ";
    }
    if (!rc && a->lazy) {
        if (!(rc = xgr_sb_puts(&p->out, sep))) rc = xgr_sb_puts(&p->out, "lazy");
        sep = ", ";
    }
    if (!rc && a->has_temperature) {
        snprintf(buf, sizeof buf, "%stemperature=%.9g", sep, (double)a->temperature);
        rc = xgr_sb_puts(&p->out, buf);
        sep = ", ";
    }
    if (!rc && a->unique) {
        if (!(rc = xgr_sb_puts(&p->out, sep)))
            rc = xgr_sb_puts(&p->out, a->unique == XGR_UNIQUE_ITEM    ? "unique"
                                      : a->unique == XGR_UNIQUE_SCOPE ? "unique_scope"
                                                                      : "unique_search_scope");
    }
    return rc ? rc : xgr_sb_puts(&p->out, "]");
}

static int print_rule(printer *p, int32_t r) {
    const xgr_rule *rule = &p->g->rules.data[r];
    int rc;
    if (rule->body < 0)
        return xgr_fail(XGR_ERR_SEMANTIC, "cannot print grammar: rule '%s' has no body",
                        xgr_ir_rule_name(p->g, r));
    if ((rc = xgr_sb_puts(&p->out, xgr_ir_rule_name(p->g, r))) ||
        (rc = print_attrs(p, &rule->attrs)) || (rc = xgr_sb_puts(&p->out, " ::= ")) || (rc = print_node(p, rule->body, P_ALT, 0)))
        return rc;
    if (rule->lookahead >= 0) {
        if ((rc = xgr_sb_puts(&p->out, " (= ")) ||
            (rc = print_node(p, rule->lookahead, P_ALT, 0)) || (rc = xgr_sb_puts(&p->out, ")")))
            return rc;
    }
    return xgr_sb_puts(&p->out, "\n");
}

int xgr_ir_print(const xgr_grammar *g, char **out, size_t *out_len) {
    if (!g || !out) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_ir_print: NULL argument");
    *out = NULL;
    if (out_len) *out_len = 0;
    printer p;
    p.g = g;
    memset(&p.out, 0, sizeof p.out);
    int rc = xgr_sb_put(&p.out, "", 0);
    int32_t root = g->root >= 0 && (size_t)g->root < g->rules.len ? g->root : -1;
    if (!rc && root >= 0) rc = print_rule(&p, root);
    for (size_t r = 0; !rc && r < g->rules.len; r++)
        if ((int32_t)r != root) rc = print_rule(&p, (int32_t)r);
    if (rc) {
        XGR_VEC_FREE(p.out);
        return rc;
    }
    *out = p.out.data;
    if (out_len) *out_len = p.out.len;
    return XGR_OK;
}
