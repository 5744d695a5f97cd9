/* Rule-head attributes: `[key, key=value, ...]` right after a rule's name.
 *
 * Keys (each at most once): max_tokens=N, max_chars=N and max_json_chars=N (decimal,
 * 0 .. INT32_MAX; the last counts decoded JSON-string characters, ir.h),
 * temperature=X (a decimal float, finite and >= 0, kept as a float), lazy, capture and
 * capture="label" (a plain non-empty string without escapes), stop_capture="label",
 * capture_hidden_{suffix,stop}_bytes=N and capture_hidden_before (Lark suffix= / stop=
 * markers, ir.h; the flag alone means nothing) and capture_hidden_{body,marker}_rule_id=N
 * (a rule id, or a rule name: resolved by the caller), and unique / unique_scope (JSON
 * Schema uniqueItems: an array element's rule / the array's rule, ir.h; one of the two at
 * most). Whitespace may surround
 * every item. Anything else makes the group malformed; upstream's lexer then reads the
 * brackets as a character class and fails on the following `::=`, hence its message. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rule_attrs.h"

size_t xgr_attrs_group_len(const uint8_t *s, size_t n, size_t i) {
    if (i >= n || s[i] != '[') return 0;
    for (size_t j = i + 1; j < n && s[j] != '\n'; j++) {
        if (s[j] == ']') return j + 1 - i;
        if (s[j] == '"') {
            for (j++; j < n && s[j] != '"' && s[j] != '\n'; j++)
                if (s[j] == '\\') j++;
            if (j >= n || s[j] != '"') return 0;
        }
    }
    return 0;
}

typedef struct {
    const uint8_t *s;
    size_t pos, end;
    size_t *err_pos;
    char *msg;
    size_t cap;
} ap_state;

static int ap_fail(ap_state *a, int code, size_t at, const char *what) {
    *a->err_pos = at;
    snprintf(a->msg, a->cap, "%s", what);
    return code;
}

static int ap_malformed(ap_state *a) {
    /* upstream reports the ']' of the group it took for a character class */
    return ap_fail(a, XGR_ERR_SYNTAX, a->end - 1, "Assign should be preceded by an identifier");
}

static void ap_ws(ap_state *a) {
    while (a->pos < a->end && (a->s[a->pos] == ' ' || a->s[a->pos] == '\t')) a->pos++;
}

static int ap_is_key(uint8_t c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (c >= '0' && c <= '9');
}

/* Reads `=`; 0 when absent. */
static int ap_eq(ap_state *a) {
    ap_ws(a);
    if (a->pos < a->end && a->s[a->pos] == '=') {
        a->pos++;
        ap_ws(a);
        return 1;
    }
    return 0;
}

static int ap_count(ap_state *a, int32_t *out) {
    size_t b = a->pos;
    int64_t v = 0;
    while (a->pos < a->end && a->s[a->pos] >= '0' && a->s[a->pos] <= '9') {
        v = v * 10 + (a->s[a->pos++] - '0');
        if (v > INT32_MAX)
            return ap_fail(a, XGR_ERR_SEMANTIC, b, "The budget must be at most 2147483647");
    }
    if (a->pos == b) return ap_malformed(a);
    *out = (int32_t)v;
    return XGR_OK;
}

static int ap_float(ap_state *a, float *out) {
    size_t b = a->pos, e = a->pos;
    const uint8_t *s = a->s;
    if (e < a->end && (s[e] == '+' || s[e] == '-')) e++;
    size_t digits = 0;
    while (e < a->end && s[e] >= '0' && s[e] <= '9') e++, digits++;
    if (e < a->end && s[e] == '.')
        for (e++; e < a->end && s[e] >= '0' && s[e] <= '9'; e++) digits++;
    if (!digits) return ap_malformed(a);
    if (e < a->end && (s[e] == 'e' || s[e] == 'E')) {
        size_t x = e + 1;
        if (x < a->end && (s[x] == '+' || s[x] == '-')) x++;
        size_t d0 = x;
        while (x < a->end && s[x] >= '0' && s[x] <= '9') x++;
        if (x == d0) return ap_malformed(a);
        e = x;
    }
    char buf[128];
    if (e - b >= sizeof buf) return ap_malformed(a);
    memcpy(buf, s + b, e - b);
    buf[e - b] = '\0';
    double v = strtod(buf, NULL);
    float f = (float)v;
    a->pos = e;
    if (!(v >= 0) || !isfinite(v) || !isfinite(f))
        return ap_fail(a, XGR_ERR_SEMANTIC, b, "The temperature must be a finite non-negative number");
    *out = f;
    return XGR_OK;
}

/* Reads `"label"` (no escapes, non-empty) into g's names pool: *off. */
static int ap_label(ap_state *a, xgr_grammar *g, size_t at, int32_t *off) {
    const uint8_t *s = a->s;
    if (a->pos >= a->end || s[a->pos] != '"') return ap_malformed(a);
    size_t q = ++a->pos;
    while (a->pos < a->end && s[a->pos] != '"') {
        if (s[a->pos] == '\\') return ap_malformed(a);
        a->pos++;
    }
    if (a->pos >= a->end) return ap_malformed(a);
    if (a->pos == q) return ap_fail(a, XGR_ERR_SEMANTIC, at, "The capture name must not be empty");
    if ((*off = xgr_ir_add_name(g, (const char *)s + q, a->pos - q)) < 0) return XGR_ERR_NOMEM;
    a->pos++;
    return XGR_OK;
}

int xgr_attrs_parse(const uint8_t *s, size_t i, size_t len, xgr_grammar *g,
                    xgr_rule_attrs *out, size_t *err_pos, char *msg, size_t cap) {
    ap_state a = {s, i + 1, i + len - 1, err_pos, msg, cap}; /* inside the brackets */
    xgr_rule_attrs r = xgr_attrs_none();
    int seen_capture = 0, rc;
    for (;;) {
        ap_ws(&a);
        size_t k0 = a.pos;
        while (a.pos < a.end && ap_is_key(s[a.pos])) a.pos++;
        size_t kl = a.pos - k0;
        const char *k = (const char *)s + k0;
#define KEY(lit) (kl == sizeof(lit) - 1 && memcmp(k, lit, kl) == 0)
        if (KEY("max_tokens") || KEY("max_chars") || KEY("max_json_chars")) {
            int32_t *dst = KEY("max_tokens") ? &r.max_tokens
                           : KEY("max_chars") ? &r.max_chars
                                              : &r.max_json_chars;
            if (*dst >= 0 || !ap_eq(&a)) return ap_malformed(&a);
            if ((rc = ap_count(&a, dst))) return rc;
        } else if (KEY("temperature")) {
            if (r.has_temperature || !ap_eq(&a)) return ap_malformed(&a);
            if ((rc = ap_float(&a, &r.temperature))) return rc;
            r.has_temperature = 1;
        } else if (KEY("lazy")) {
            if (r.lazy) return ap_malformed(&a);
            r.lazy = 1;
        } else if (KEY("unique") || KEY("unique_scope") || KEY("unique_search_scope")) {
            if (r.unique) return ap_malformed(&a);
            r.unique = KEY("unique")         ? XGR_UNIQUE_ITEM
                       : KEY("unique_scope") ? XGR_UNIQUE_SCOPE
                                             : XGR_UNIQUE_SEARCH_SCOPE;
        } else if (KEY("capture")) {
            if (seen_capture) return ap_malformed(&a);
            seen_capture = 1;
            if (ap_eq(&a)) {
                if ((rc = ap_label(&a, g, i, &r.capture_off))) return rc;
            } else {
                r.capture_off = -2; /* the rule's own name, filled in by the caller */
            }
        } else if (KEY("stop_capture")) {
            if (r.stop_capture_off >= 0 || !ap_eq(&a)) return ap_malformed(&a);
            if ((rc = ap_label(&a, g, i, &r.stop_capture_off))) return rc;
        } else if (KEY("capture_hidden_suffix_bytes") || KEY("capture_hidden_stop_bytes")) {
            if (r.hidden_kind || !ap_eq(&a)) return ap_malformed(&a);
            r.hidden_kind = KEY("capture_hidden_stop_bytes") ? XGR_HIDDEN_STOP : XGR_HIDDEN_SUFFIX;
            if ((rc = ap_count(&a, &r.hidden_bytes))) return rc;
        } else if (KEY("capture_hidden_before")) {
            if (r.hidden_before) return ap_malformed(&a);
            r.hidden_before = 1;
        } else if (KEY("capture_hidden_body_rule_id") || KEY("capture_hidden_marker_rule_id")) {
            /* a rule id (the rule's index in the text) or a rule name, resolved by the
             * caller (ir.h) */
            int32_t *dst = KEY("capture_hidden_body_rule_id") ? &r.hidden_body : &r.hidden_marker;
            if (*dst != -1 || !ap_eq(&a)) return ap_malformed(&a);
            if (a.pos < a.end && s[a.pos] >= '0' && s[a.pos] <= '9') {
                if ((rc = ap_count(&a, dst))) return rc;
            } else {
                size_t q = a.pos;
                while (a.pos < a.end && (ap_is_key(s[a.pos]) || s[a.pos] == '.' ||
                                         s[a.pos] == '-'))
                    a.pos++;
                if (a.pos == q) return ap_malformed(&a);
                int32_t off = xgr_ir_add_name(g, (const char *)s + q, a.pos - q);
                if (off < 0) return XGR_ERR_NOMEM;
                *dst = -2 - off;
            }
        } else {
            return ap_malformed(&a);
        }
#undef KEY
        ap_ws(&a);
        if (a.pos == a.end) break;
        if (s[a.pos] != ',') return ap_malformed(&a);
        a.pos++;
    }
    *out = r;
    return XGR_OK;
}
