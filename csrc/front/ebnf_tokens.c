/* EBNF front end, token-set macros (upstream xgrammar 0.2.8's):
 *   ExcludeToken(s1, ..., sn)    any one token whose id is none of the s_i (n may be 0)
 *   TokenTagDispatch((t, rule), ..., loop_after_dispatch=true|false, excludes=(e, ...))
 *                                whole tokens: free tokens (any but the triggers and the
 *                                excludes) in which trigger token t hands over to `rule`.
 * ExcludeToken is a class span of markers (common/token_marker.h). TokenTagDispatch is
 * written out with it: looping, (ExcludeToken(E u T) | Token(t1) r1 | ...)*; else
 * ExcludeToken(E u T)* (Token(t1) r1 | ...)?. */
#include <stdlib.h>
#include <string.h>

#include "../common/token_marker.h"
#include "ebnf_internal.h"

#define TK_MAX_IDS 4096

typedef XGR_VEC(int32_t) tk_ids;

static int cmp_id(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void sort_dedup(tk_ids *v) {
    if (!v->len) return;
    qsort(v->data, v->len, sizeof *v->data, cmp_id);
    size_t n = 1;
    for (size_t i = 1; i < v->len; i++)
        if (v->data[i] != v->data[n - 1]) v->data[n++] = v->data[i];
    v->len = n;
}

/* One token id at p->pos. */
static int lex_id(ebnf *p, const char *macro, int32_t *out) {
    size_t at = p->pos;
    long id = 0;
    if (at >= p->n || p->s[at] < '0' || p->s[at] > '9')
        return xgr_ebnf_expected(p, at, "a token id (a non-negative integer)");
    while (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
        id = id * 10 + (p->s[p->pos] - '0');
        if (id >= XGR_TOKEN_PSEUDO_MIN)
            return xgr_ebnf_perr(p, XGR_ERR_SEMANTIC, at, "token id in %s(...) is larger than %d",
                                 macro, (int)XGR_TOKEN_PSEUDO_MIN - 1);
        p->pos++;
    }
    *out = (int32_t)id;
    return XGR_OK;
}

/* "(" [id {"," id}] [","] ")" at p->pos, appended to *v. */
static int lex_id_tuple(ebnf *p, const char *macro, tk_ids *v) {
    size_t open = p->pos;
    if (p->pos >= p->n || p->s[p->pos] != '(') return xgr_ebnf_expected(p, p->pos, "'('");
    p->pos = xgr_ebnf_skip_ws_at(p, p->pos + 1);
    while (p->pos < p->n && p->s[p->pos] != ')') {
        int32_t id;
        int rc = lex_id(p, macro, &id);
        if (rc) return rc;
        if (v->len >= TK_MAX_IDS)
            return xgr_ebnf_perr(p, XGR_ERR_LIMIT, open, "%s(...) takes at most %d ids", macro,
                                 TK_MAX_IDS);
        if (XGR_VEC_PUSH(*v, id)) return XGR_ERR_NOMEM;
        p->pos = xgr_ebnf_skip_ws_at(p, p->pos);
        if (p->pos < p->n && p->s[p->pos] == ',') p->pos = xgr_ebnf_skip_ws_at(p, p->pos + 1);
        else if (p->pos >= p->n || p->s[p->pos] != ')')
            return xgr_ebnf_expected(p, p->pos, "',' or ')' after a token id");
    }
    if (p->pos >= p->n) return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, open, "unclosed '(' in %s", macro);
    p->pos++;
    return XGR_OK;
}

/* The class node of the sorted, distinct ids v. */
static int class_node(ebnf *p, const tk_ids *v, int32_t *node) {
    size_t n = (v->len + 2) * XGR_TOKEN_MARKER_LEN;
    uint8_t *s = xgr_malloc(n);
    if (!s) return XGR_ERR_NOMEM;
    xgr_token_marker(XGR_TOKEN_CLASS_OPEN, s);
    for (size_t i = 0; i < v->len; i++)
        xgr_token_marker(v->data[i], s + (i + 1) * XGR_TOKEN_MARKER_LEN);
    xgr_token_marker(XGR_TOKEN_CLASS_CLOSE, s + (v->len + 1) * XGR_TOKEN_MARKER_LEN);
    *node = xgr_ir_bytes(p->g, s, n);
    free(s);
    return *node < 0 ? xgr_front_ir_status() : XGR_OK;
}

int xgr_ebnf_macro_exclude_token(ebnf *p, size_t start, int32_t *node) {
    tk_ids v = {0};
    p->pos = xgr_ebnf_skip_ws_at(p, start + 12);
    int rc = lex_id_tuple(p, "ExcludeToken", &v);
    if (!rc) {
        sort_dedup(&v);
        rc = class_node(p, &v, node);
    }
    XGR_VEC_FREE(v);
    return rc;
}

static int token_node(ebnf *p, int32_t id, int32_t *node) {
    uint8_t mk[XGR_TOKEN_MARKER_LEN];
    xgr_token_marker(id, mk);
    *node = xgr_ir_bytes(p->g, mk, sizeof mk);
    return *node < 0 ? xgr_front_ir_status() : XGR_OK;
}

/* One (id, rule) pair at p->pos ('('). */
static int ttd_pair(ebnf *p, tk_ids *trig, tk_ids *rules) {
    p->pos = xgr_ebnf_skip_ws_at(p, p->pos + 1);
    int32_t id;
    int rc = lex_id(p, "TokenTagDispatch", &id);
    if (rc) return rc;
    p->pos = xgr_ebnf_skip_ws_at(p, p->pos);
    if (p->pos >= p->n || p->s[p->pos] != ',')
        return xgr_ebnf_expected(p, p->pos, "',' and a rule name after the trigger token id");
    p->pos = xgr_ebnf_skip_ws_at(p, p->pos + 1);
    size_t at = p->pos, e = xgr_ebnf_name_end(p, at);
    if (e == at) return xgr_ebnf_expected(p, at, "a rule name after the trigger token id");
    int32_t r = xgr_ir_rule(p->g, (const char *)p->s + at, e - at);
    if (r < 0) return xgr_front_ir_status();
    if ((rc = xgr_ebnf_track_rules(p))) return rc;
    if (!p->ref_pos.data[r]) p->ref_pos.data[r] = at + 1;
    p->pos = xgr_ebnf_skip_ws_at(p, e);
    if (p->pos >= p->n || p->s[p->pos] != ')')
        return xgr_ebnf_expected(p, p->pos, "')' closing the (token, rule) pair");
    p->pos++;
    return XGR_VEC_PUSH(*trig, id) || XGR_VEC_PUSH(*rules, r) ? XGR_ERR_NOMEM : XGR_OK;
}

static int ttd_args(ebnf *p, size_t start, tk_ids *trig, tk_ids *rules, tk_ids *excl,
                    int *loop) {
    size_t open = p->pos;
    int rc;
    p->pos = xgr_ebnf_skip_ws_at(p, p->pos + 1);
    while (p->pos < p->n && p->s[p->pos] != ')') {
        if (p->s[p->pos] == '(') {
            if ((rc = ttd_pair(p, trig, rules))) return rc;
        } else {
            size_t at = p->pos, e = xgr_ebnf_name_end(p, at);
            int is_loop = e - at == 19 && memcmp(p->s + at, "loop_after_dispatch", 19) == 0;
            int is_excl = e - at == 8 && memcmp(p->s + at, "excludes", 8) == 0;
            if (!is_loop && !is_excl)
                return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, at,
                                     "TokenTagDispatch: expected a (token_id, rule_name) pair, "
                                     "loop_after_dispatch= or excludes=");
            p->pos = xgr_ebnf_skip_ws_at(p, e);
            if (p->pos >= p->n || p->s[p->pos] != '=') return xgr_ebnf_expected(p, p->pos, "'='");
            p->pos = xgr_ebnf_skip_ws_at(p, p->pos + 1);
            if (is_excl) {
                excl->len = 0;
                if ((rc = lex_id_tuple(p, "TokenTagDispatch", excl))) return rc;
            } else {
                size_t v = p->pos, ve = xgr_ebnf_name_end(p, v);
                if (ve - v == 4 && memcmp(p->s + v, "true", 4) == 0) *loop = 1;
                else if (ve - v == 5 && memcmp(p->s + v, "false", 5) == 0) *loop = 0;
                else return xgr_ebnf_expected(p, v, "true or false after loop_after_dispatch=");
                p->pos = ve;
            }
        }
        p->pos = xgr_ebnf_skip_ws_at(p, p->pos);
        if (p->pos < p->n && p->s[p->pos] == ',') p->pos = xgr_ebnf_skip_ws_at(p, p->pos + 1);
        else if (p->pos >= p->n || p->s[p->pos] != ')')
            return xgr_ebnf_expected(p, p->pos, "',' or ')' in TokenTagDispatch(...)");
    }
    if (p->pos >= p->n)
        return xgr_ebnf_perr(p, XGR_ERR_SYNTAX, open, "unclosed 'TokenTagDispatch('");
    p->pos++;
    for (size_t i = 0; i < trig->len; i++)
        for (size_t j = 0; j < excl->len; j++)
            if (trig->data[i] == excl->data[j])
                return xgr_ebnf_perr(p, XGR_ERR_SEMANTIC, start,
                                     "TokenTagDispatch: token %d is both a trigger and excluded",
                                     (int)trig->data[i]);
    return XGR_OK;
}

int xgr_ebnf_macro_token_tag_dispatch(ebnf *p, size_t start, int32_t *node) {
    tk_ids trig = {0}, rules = {0}, excl = {0}, all = {0};
    XGR_VEC(int32_t) alts = {0};
    int loop = 1;
    int rc = ttd_args(p, start, &trig, &rules, &excl, &loop);
    int32_t cls = -1, n;
    for (size_t i = 0; !rc && i < excl.len + trig.len; i++)
        if (XGR_VEC_PUSH(all, i < excl.len ? excl.data[i] : trig.data[i - excl.len]))
            rc = XGR_ERR_NOMEM;
    if (!rc) {
        sort_dedup(&all);
        rc = class_node(p, &all, &cls);
    }
    if (!rc && loop && XGR_VEC_PUSH(alts, cls)) rc = XGR_ERR_NOMEM;
    for (size_t i = 0; !rc && i < trig.len; i++) {
        int32_t kids[2];
        if ((rc = token_node(p, trig.data[i], &kids[0]))) break;
        if ((kids[1] = xgr_ir_ref(p->g, rules.data[i])) < 0 ||
            (n = xgr_ir_seq(p->g, kids, 2)) < 0) {
            rc = xgr_front_ir_status();
            break;
        }
        if (XGR_VEC_PUSH(alts, n)) rc = XGR_ERR_NOMEM;
    }
    if (!rc) {
        int32_t body = -1;
        if (loop) {
            int32_t a = alts.len == 1 ? alts.data[0] : xgr_ir_alt(p->g, alts.data, alts.len);
            body = a < 0 ? -1 : xgr_ir_repeat(p->g, a, 0, -1);
        } else {
            int32_t kids[2] = {xgr_ir_repeat(p->g, cls, 0, -1), -1};
            if (kids[0] >= 0 && !alts.len) body = kids[0];
            else if (kids[0] >= 0) {
                int32_t a = alts.len == 1 ? alts.data[0] : xgr_ir_alt(p->g, alts.data, alts.len);
                kids[1] = a < 0 ? -1 : xgr_ir_repeat(p->g, a, 0, 1);
                body = kids[1] < 0 ? -1 : xgr_ir_seq(p->g, kids, 2);
            }
        }
        if (body < 0) rc = xgr_front_ir_status();
        else *node = body;
    }
    XGR_VEC_FREE(trig);
    XGR_VEC_FREE(rules);
    XGR_VEC_FREE(excl);
    XGR_VEC_FREE(all);
    XGR_VEC_FREE(alts);
    return rc;
}
