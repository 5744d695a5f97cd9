/* JSON Schema -> grammar for the plain subset, in the core: no Python converter.
 *
 * The Python converter (engine/xgrammar2/json_schema) handles all of draft 2020-12 and
 * costs ~60 us of fixed overhead plus ~40 us per property (docs/benchmarks/json_compile.md):
 * at the median of JSONSchemaBench it is more than half of the compile. Many schemas need
 * none of its machinery: objects with listed properties, arrays, scalar types and scalar
 * enums. This file converts those, from the schema's canonical text (xgr_json_canonical),
 * into EBNF for the default options of compile_json_schema (any whitespace, strict mode:
 * an object with listed properties admits no others), and parses it with the EBNF front
 * end. Everything else -- every other keyword, a property name or enum string that is not
 * printable ASCII, a float in an enum, an unsatisfiable schema -- is reported as outside
 * the subset (*out = NULL) and the caller converts it the Python way, so the subset only
 * grows by adding cases here; its grammars accept exactly what the Python converter's do
 * (tests/json_schema/test_plain_front.py compares the masks along every corpus instance).
 *
 * The language per schema (the Python converter's, docs/json-schema.md):
 *   true, {} (annotations only)      any JSON value
 *   "string" / "integer" / "number"  JSON string, integer (no fraction), number
 *   "boolean" / "null"               true | false, null
 *   "object", no properties          any object (additionalProperties false: only {})
 *   "object" with properties         the listed properties in schema order, each required
 *                                    one present, optional ones skippable, no others
 *   "array"                          items of the `items` schema (any value without it)
 *   enum / const of scalars          those values (an integer n also as n.0, n.00, ...),
 *                                    restricted to `type` when both are given
 *   a list of types                  the union of the types' generic values
 *   anyOf alone; oneOf alone whose   the union of the branches (disjoint by type: exactly
 *   branches have distinct types     one matches where any does)
 *   "format" F / "pattern" P         a string of format F or matching P as the caller's
 *                                    table spells it (the converter's own expression,
 *                                    json_schema/core_strings.py); not in the table: outside
 *   F or P with a length or both,    the converter's expression of that type part alone,
 *   number bounds, integer bounds    asked for by key (schema_form, json_form_key.c)
 *   that are not integers
 * with whitespace [ \n\r\t]* around punctuation (at most max_whitespace_cnt characters in a
 * run when it is given) and none before or after the root. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front.h"
#include "json_dom.h"
#include "json_form_key.h"
#include "json_key_excl.h"
#include "json_text.h"
#include "span_memo.h"

/* Deepest schema nesting converted here (deeper: the Python converter). */
#define PLAIN_MAX_DEPTH 64
/* Most properties of one object, members of one enum (the duplicate checks are quadratic). */
#define PLAIN_MAX_LIST 1024

/* The reader's nodes under short names. */
typedef json_dom_node jnode;
enum { J_NULL = JSON_DOM_NULL, J_FALSE = JSON_DOM_FALSE, J_TRUE = JSON_DOM_TRUE, J_NUM = JSON_DOM_NUM,
       J_STR = JSON_DOM_STR, J_ARR = JSON_DOM_ARR, J_OBJ = JSON_DOM_OBJ };

/* Status inside this file: OK, outside the subset, out of memory (the reader's values). */
enum { P_OK = JSON_DOM_OK, P_NO = JSON_DOM_NO, P_NOMEM = JSON_DOM_NOMEM };

/* ------------------------------------------------------------------ emission */

typedef json_text cbuf;

static int putf(cbuf *b, const char *fmt, ...) {
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) return P_NO;
    return json_put(b, tmp, (size_t)n);
}

/* Shared rules, emitted when used (names as the Python converter's). */
enum { U_WS = 1, U_STRING = 2, U_CHAR = 4, U_INTEGER = 8, U_NUMBER = 16, U_VALUE = 32,
       U_OBJECT = 64, U_ARRAY = 128, U_KEYU = 256 };
static const struct {
    unsigned bit, needs;
    const char *text;
} SHARED[] = {
    {U_WS, 0, "ws ::= [ \\n\\r\\t]*\n"},
    {U_STRING, U_CHAR, "string ::= \"\\\"\" char* \"\\\"\"\n"},
    {U_CHAR, 0,
     "char ::= [^\\x00-\\x1f\"\\\\] | \"\\\\\" [\"/\\\\bfnrt] | \"\\\\u\" ([0-9A-CEFa-cef] "
     "[0-9A-Fa-f] [0-9A-Fa-f] [0-9A-Fa-f] | [Dd] [0-7] [0-9A-Fa-f] [0-9A-Fa-f]) | \"\\\\u\" "
     "[Dd] [89ABab] [0-9A-Fa-f] [0-9A-Fa-f] \"\\\\u\" [Dd] [C-Fc-f] [0-9A-Fa-f] [0-9A-Fa-f]\n"},
    {U_INTEGER, 0, "integer ::= \"0\" | \"-\"? [1-9] [0-9]*\n"},
    {U_NUMBER, 0,
     "number ::= \"-\"? (\"0\" | [1-9] [0-9]*) (\".\" [0-9]+)? ([Ee] [+\\-]? [0-9]+)?\n"},
    {U_VALUE, U_OBJECT | U_ARRAY | U_STRING | U_NUMBER,
     "value ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"},
    {U_OBJECT, U_WS | U_STRING | U_VALUE,
     "object ::= \"{\" ws \"}\" | \"{\" ws string ws \":\" ws value (ws \",\" ws string ws "
     "\":\" ws value)* ws \"}\"\n"},
    {U_ARRAY, U_WS | U_VALUE,
     "array ::= \"[\" ws \"]\" | \"[\" ws value (ws \",\" ws value)* ws \"]\"\n"},
    {U_KEYU, 0, JSON_KEY_EXCL_XU},
};

typedef struct {
    int32_t id, off, len; /* rule e<id>, its body in `bodies` */
} enum_rule;

typedef struct {
    json_dom *p;
    cbuf rules; /* complete rule lines */
    unsigned used;
    int32_t next_id;
    int depth;
    cbuf bodies; /* the enum rules' bodies, one rule per distinct body */
    XGR_VEC(enum_rule) enums;
    int32_t root;              /* the root schema's node */
    int32_t defs[2];           /* its "definitions" and "$defs" objects (-1: none) */
    XGR_VEC(int32_t) def_rule; /* pairs (definition node, rule id d<id>) */
    const xgr_json_string_form *forms; /* the caller's formats and patterns (n_forms) */
    size_t n_forms;
    XGR_VEC(int32_t) form_rule;          /* pairs (form index, rule id f<id>) */
    XGR_VEC(size_t) helpers;             /* their helper rules written: (form index, line offset) */
    int32_t missing;                     /* string values met that are not in the table */
    cbuf wants;                          /* the keys of the "schema" forms missing, each NUL-ended */
    int parts;                           /* the caller converts parts ("@OFF:LEN" keys: wants given) */
    int parts_written;                   /* the "part" forms' rules are in `rules` */
    int poisoned;                        /* a definition's rule was begun and not finished */
    int32_t max_ws;                      /* max_whitespace (< 0: unbounded) */
    json_key_excl_ctx kx;                /* key exclusion: the xk<i> / xc<i> rules written */
    /* Subschemas converted, by their canonical text (equal text, equal language: the same
     * expression, so equal subschemas share their rules, as the converter's interned ones) */
    span_memo memo;
} emitter;

/* Enums with more than this many values, or with an integer (its "(. 0+)?" tail), get a
 * rule of their own, shared by equal enums (as the Python converter's interned rules): a
 * member chain or an array rule then holds a reference, not a copy of the alternation. */
#define PLAIN_INLINE_ENUM 3
#define PLAIN_MAX_SHARED_ENUMS 4096

#define NODE(e, id) ((e)->p->nodes.data[id])

static int key_is(emitter *e, const jnode *n, const char *k) {
    size_t l = strlen(k);
    return n->key_plain && (size_t)n->key_len == l && memcmp(e->p->s + n->key_off, k, l) == 0;
}

/* Type names -> bits. */
enum { T_STRING = 1, T_INTEGER = 2, T_NUMBER = 4, T_BOOLEAN = 8, T_NULL = 16, T_OBJECT = 32,
       T_ARRAY = 64 };
static unsigned type_bit(emitter *e, const jnode *n) {
    static const char *const names[7] = {"string", "integer", "number", "boolean",
                                         "null",   "object",  "array"};
    if (n->kind != J_STR || !n->plain) return 0;
    for (unsigned k = 0; k < 7; k++) {
        size_t l = strlen(names[k]);
        if ((size_t)n->len == l && memcmp(e->p->s + n->off, names[k], l) == 0) return 1u << k;
    }
    return 0;
}

static int schema_expr(emitter *e, int32_t id, cbuf *out);

/* The generic value of one type (bit t), as a factor. */
static int generic(emitter *e, unsigned t, cbuf *out) {
    switch (t) {
    case T_STRING: e->used |= U_STRING; return json_puts(out, "string");
    case T_INTEGER: e->used |= U_INTEGER; return json_puts(out, "integer");
    case T_NUMBER: e->used |= U_NUMBER; return json_puts(out, "number");
    case T_BOOLEAN: return json_puts(out, "(\"true\" | \"false\")");
    case T_NULL: return json_puts(out, "\"null\"");
    case T_OBJECT: e->used |= U_OBJECT; return json_puts(out, "object");
    case T_ARRAY: e->used |= U_ARRAY; return json_puts(out, "array");
    default: return P_NO;
    }
}

/* A reference to rule e<id> ::= body, one rule per distinct body (enums, integer ranges). */
static int shared_rule(emitter *e, const cbuf *body, cbuf *out) {
    int r = P_OK;
    int32_t id = -1;
    for (size_t k = 0; k < e->enums.len && id < 0; k++) {
        const enum_rule *q = &e->enums.data[k];
        if ((size_t)q->len == body->len && memcmp(e->bodies.data + q->off, body->data, body->len) == 0)
            id = q->id;
    }
    if (id < 0) {
        id = e->next_id++;
        if (e->enums.len < PLAIN_MAX_SHARED_ENUMS && body->len < (size_t)INT32_MAX &&
            e->bodies.len < (size_t)INT32_MAX - body->len) {
            enum_rule q = {id, (int32_t)e->bodies.len, (int32_t)body->len};
            if (XGR_VEC_PUSH(e->enums, q) || (r = json_put(&e->bodies, body->data, body->len)))
                r = P_NOMEM;
        }
        if (r == P_OK && (r = putf(&e->rules, "e%d ::= ", id)) == P_OK &&
            (r = json_put(&e->rules, body->data, body->len)) == P_OK)
            r = json_puts(&e->rules, "\n");
    }
    return r ? r : putf(out, "e%d", id);
}

/* ---- integer ranges: the decimal spellings (no leading zero, no "-0") of lo..hi */

/* One alternative to `b` (" | " before all but the first). */
static int alt_start(cbuf *b, int *nterms) { return (*nterms)++ ? json_puts(b, " | ") : P_OK; }

/* The digit strings of length L from lo to hi (equal length, lo <= hi; digits after the
 * first may be '0'), each alternative after `prefix` (pre digits). */
static int same_len(cbuf *b, int *nt, const char *prefix, int pre, const char *lo, const char *hi, int L) {
    int i = 0, r;
    while (i < L && lo[i] == hi[i]) i++;
    char P[40];
    if (pre + i + 1 >= (int)sizeof P) return P_NO;
    memcpy(P, prefix, (size_t)pre);
    memcpy(P + pre, lo, (size_t)i);
    int np = pre + i;
    if (i == L) {
        if ((r = alt_start(b, nt)) || (r = json_puts(b, "\"")) || (r = json_put(b, P, (size_t)np))) return r;
        return json_puts(b, "\"");
    }
    int rest = L - i - 1, lo_zero = 1, hi_nine = 1;
    for (int k = i + 1; k < L; k++) lo_zero &= lo[k] == '0', hi_nine &= hi[k] == '9';
    char d1 = lo[i], d2 = hi[i];
    if (rest > 0 && !lo_zero) {
        P[np] = d1;
        char nines[24];
        memset(nines, '9', (size_t)rest);
        if ((r = same_len(b, nt, P, np + 1, lo + i + 1, nines, rest))) return r;
        d1++;
    }
    char e2 = d2;
    if (rest > 0 && !hi_nine) e2--;
    if (d1 <= e2) {
        if ((r = alt_start(b, nt))) return r;
        if (np && ((r = json_puts(b, "\"")) || (r = json_put(b, P, (size_t)np)) || (r = json_puts(b, "\" ")))) return r;
        r = d1 == e2 ? putf(b, "\"%c\"", d1) : putf(b, "[%c-%c]", d1, e2);
        if (r == P_OK && rest == 1) r = json_puts(b, " [0-9]");
        else if (r == P_OK && rest > 1) r = putf(b, " [0-9]{%d}", rest);
        if (r) return r;
    }
    if (rest > 0 && !hi_nine) {
        P[np] = d2;
        char zeros[24];
        memset(zeros, '0', (size_t)rest);
        if ((r = same_len(b, nt, P, np + 1, zeros, hi + i + 1, rest))) return r;
    }
    return P_OK;
}

/* The non-negative integers a..b (b < 0: unbounded). */
static int nonneg_range(cbuf *b, int *nt, int64_t a, int64_t hi) {
    char as[24], bs[24], lo_s[24], hi_s[24];
    int la = snprintf(as, sizeof as, "%lld", (long long)a), lb = 0, r;
    if (hi >= 0) lb = snprintf(bs, sizeof bs, "%lld", (long long)hi);
    int last = hi >= 0 ? lb : la;
    for (int L = la; L <= last; L++) {
        if (L == la) memcpy(lo_s, as, (size_t)L);
        else lo_s[0] = '1', memset(lo_s + 1, '0', (size_t)L - 1);
        if (hi >= 0 && L == lb) memcpy(hi_s, bs, (size_t)L);
        else memset(hi_s, '9', (size_t)L);
        if ((r = same_len(b, nt, "", 0, lo_s, hi_s, L))) return r;
    }
    if (hi < 0) { /* every longer number */
        if ((r = alt_start(b, nt))) return r;
        return la == 1 ? json_puts(b, "[1-9] [0-9]+") : putf(b, "[1-9] [0-9]{%d,}", la);
    }
    return P_OK;
}

/* Integers lo..hi; has_lo / has_hi say whether each bound exists. */
#define PLAIN_MAX_INT 1000000000000000LL
static int int_range(emitter *e, int has_lo, int64_t lo, int has_hi, int64_t hi, cbuf *out) {
    cbuf body = {0};
    int nt = 0, r = P_OK;
    if (has_lo && has_hi && lo > hi) return P_NO; /* unsatisfiable: Python says why */
    if (!has_lo || lo < 0) { /* "-" magnitudes m1..m2 */
        int64_t m1 = has_hi && hi < 0 ? -hi : 1, m2 = has_lo ? -lo : -1;
        cbuf neg = {0};
        int nn = 0;
        r = nonneg_range(&neg, &nn, m1, m2);
        if (r == P_OK && (r = alt_start(&body, &nt)) == P_OK && (r = json_puts(&body, "\"-\" (")) == P_OK &&
            (r = json_put(&body, neg.data, neg.len)) == P_OK)
            r = json_puts(&body, ")");
        XGR_VEC_FREE(neg);
    }
    if (r == P_OK && (!has_hi || hi >= 0)) r = nonneg_range(&body, &nt, has_lo && lo > 0 ? lo : 0, has_hi ? hi : -1);
    if (r == P_OK) {
        if (nt <= 1) {
            if ((r = json_puts(out, "(")) == P_OK && (r = json_put(out, body.data, body.len)) == P_OK) r = json_puts(out, ")");
        } else {
            r = shared_rule(e, &body, out);
        }
    }
    XGR_VEC_FREE(body);
    return r;
}

/* An integer bound: minimum / maximum (inclusive) or exclusiveMinimum / exclusiveMaximum
 * (the 2020-12 numeric form), folded into *v (the stricter wins); P_NO for a fraction, a
 * draft-04 boolean form or a magnitude over PLAIN_MAX_INT. */
static int int_bound(emitter *e, int32_t id, int upper, int exclusive, int *has, int64_t *v) {
    if (id < 0) return P_OK;
    const jnode *n = &NODE(e, id);
    if (n->kind != J_NUM || !n->is_int || n->len > 17) return P_NO;
    const char *t = e->p->s + n->off;
    int neg = t[0] == '-';
    int64_t x = 0;
    for (int32_t i = neg; i < n->len; i++) x = x * 10 + (t[i] - '0');
    if (x > PLAIN_MAX_INT) return P_NO;
    if (neg) x = -x;
    if (exclusive) x += upper ? -1 : 1;
    if (!*has || (upper ? x < *v : x > *v)) *v = x;
    *has = 1;
    return P_OK;
}

/* enum (a J_ARR) or const (any node, `single`) restricted to the types `mask`. */
static int enum_expr(emitter *e, int32_t vals, int single, unsigned mask, cbuf *out) {
    int nk = 0, r = P_OK;
    int32_t first = single ? vals : NODE(e, vals).first;
    if (!single && (NODE(e, vals).kind != J_ARR || NODE(e, vals).n > PLAIN_MAX_LIST)) return P_NO;
    int32_t *kept = malloc(sizeof *kept * (single ? 1 : (size_t)NODE(e, vals).n + 1));
    if (!kept) return P_NOMEM;
    for (int32_t v = first; v >= 0; v = single ? -1 : NODE(e, v).next) {
        const jnode *n = &NODE(e, v);
        unsigned t;
        switch (n->kind) {
        case J_STR: t = n->plain ? T_STRING : 0; break;
        case J_NUM: t = n->is_int ? T_INTEGER | T_NUMBER : 0; break;
        case J_TRUE:
        case J_FALSE: t = T_BOOLEAN; break;
        case J_NULL: t = T_NULL; break;
        default: t = 0; break;
        }
        if (!t) {
            r = P_NO; /* a value outside the subset, even when `type` rules it out */
            break;
        }
        if (!(t & mask)) continue;
        int dup = 0;
        for (int k = 0; k < nk && !dup; k++) {
            const jnode *o = &NODE(e, kept[k]);
            dup = o->kind == n->kind && o->len == n->len &&
                  memcmp(e->p->s + o->off, e->p->s + n->off, (size_t)n->len) == 0;
        }
        if (!dup) kept[nk++] = v;
    }
    if (r == P_OK && nk == 0) r = P_NO; /* unsatisfiable: the Python converter says why */
    int has_int = 0;
    cbuf body = {0};
    for (int k = 0; k < nk && r == P_OK; k++) {
        const jnode *n = &NODE(e, kept[k]);
        if (k && (r = json_puts(&body, " | "))) break;
        switch (n->kind) {
        case J_STR:
            if ((r = json_puts(&body, "\"\\\"")) == P_OK &&
                (r = json_put(&body, e->p->s + n->off, (size_t)n->len)) == P_OK)
                r = json_puts(&body, "\\\"\"");
            break;
        case J_NUM:
            has_int = 1;
            if (n->len == 1 && e->p->s[n->off] == '0') r = json_puts(&body, "\"-\"? \"0\"");
            else if ((r = json_puts(&body, "\"")) == P_OK && (r = json_put(&body, e->p->s + n->off, (size_t)n->len)) == P_OK)
                r = json_puts(&body, "\"");
            if (r == P_OK) r = json_puts(&body, " (\".\" \"0\"+)?");
            break;
        case J_TRUE: r = json_puts(&body, "\"true\""); break;
        case J_FALSE: r = json_puts(&body, "\"false\""); break;
        default: r = json_puts(&body, "\"null\""); break;
        }
    }
    free(kept);
    if (r == P_OK && nk <= PLAIN_INLINE_ENUM && !has_int) {
        if ((r = json_puts(out, "(")) == P_OK && (r = json_put(out, body.data, body.len)) == P_OK)
            r = json_puts(out, ")");
    } else if (r == P_OK) {
        r = shared_rule(e, &body, out);
    }
    XGR_VEC_FREE(body);
    return r;
}

/* An object with listed properties: rule o<id> and its chain, o<id>_f<i> (no property
 * written yet, the next candidate is i) and o<id>_p<i> (some written, next candidate i). */
static int key_rule_of(emitter *e, const int32_t *ids, int32_t n, int32_t *k);

static int object_expr(emitter *e, int32_t props, int32_t req, int closed, int32_t extra, cbuf *out) {
    int32_t n = props >= 0 ? NODE(e, props).n : 0;
    int r = P_OK;
    if (props >= 0 && NODE(e, props).kind != J_OBJ) return P_NO;
    if (req >= 0 && (NODE(e, req).kind != J_ARR || NODE(e, req).n > PLAIN_MAX_LIST)) return P_NO;
    if (n == 0) {
        if (req >= 0 && NODE(e, req).n > 0) return P_NO;
        e->used |= U_WS;
        if (closed) return json_puts(out, "\"{\" ws \"}\"");
        if (extra >= 0 && NODE(e, extra).kind == J_OBJ) { /* any key, each value of that schema */
            cbuf v = {0};
            int32_t id = e->next_id++;
            e->used |= U_STRING;
            /* o ::= "{" ws "}" | "{" ws string ws ":" ws V (ws "," ws string ws ":" ws V)* ws "}" */
            if ((r = schema_expr(e, extra, &v)) == P_OK &&
                (r = putf(&e->rules, "o%d ::= \"{\" ws \"}\" | \"{\" ws string ws \":\" ws ", id)) == P_OK &&
                (r = json_put(&e->rules, v.data, v.len)) == P_OK &&
                (r = json_puts(&e->rules, " (ws \",\" ws string ws \":\" ws ")) == P_OK &&
                (r = json_put(&e->rules, v.data, v.len)) == P_OK)
                r = json_puts(&e->rules, ")* ws \"}\"\n");
            XGR_VEC_FREE(v);
            return r ? r : putf(out, "o%d", id);
        }
        e->used |= U_OBJECT;
        return json_puts(out, "object");
    }
    if (n > PLAIN_MAX_LIST) return P_NO;
    int32_t *ids = malloc(sizeof *ids * (size_t)n);
    uint8_t *need = calloc((size_t)n, 1);
    cbuf *kv = calloc((size_t)n, sizeof *kv);
    if (!ids || !need || !kv) {
        free(ids), free(need), free(kv);
        return P_NOMEM;
    }
    int32_t k = 0;
    for (int32_t c = NODE(e, props).first; c >= 0 && r == P_OK; c = NODE(e, c).next, k++) {
        const jnode *cn = &NODE(e, c);
        if (!cn->key_plain) r = P_NO;
        for (int32_t j = 0; j < k && r == P_OK; j++) {
            const jnode *o = &NODE(e, ids[j]);
            if (o->key_len == cn->key_len &&
                memcmp(e->p->s + o->key_off, e->p->s + cn->key_off, (size_t)cn->key_len) == 0)
                r = P_NO; /* a duplicate name (not canonical text) */
        }
        ids[k] = c;
    }
    for (int32_t c = req >= 0 ? NODE(e, req).first : -1; c >= 0 && r == P_OK; c = NODE(e, c).next) {
        const jnode *rn = &NODE(e, c);
        if (rn->kind != J_STR || !rn->plain) {
            r = P_NO;
            break;
        }
        int32_t j = 0;
        for (; j < n; j++) {
            const jnode *o = &NODE(e, ids[j]);
            if (o->key_len == rn->len &&
                memcmp(e->p->s + o->key_off, e->p->s + rn->off, (size_t)rn->len) == 0)
                break;
        }
        if (j == n) r = P_NO; /* required but not listed */
        else need[j] = 1;
    }
    /* Each member's text `"name" ws ":" ws VALUE`, children first. */
    for (int32_t j = 0; j < n && r == P_OK; j++) {
        const jnode *o = &NODE(e, ids[j]);
        if ((r = json_puts(&kv[j], "\"\\\"")) || (r = json_put(&kv[j], e->p->s + o->key_off, (size_t)o->key_len)) ||
            (r = json_puts(&kv[j], "\\\"\" ws \":\" ws ")))
            break;
        r = schema_expr(e, ids[j], &kv[j]);
    }
    int32_t id = e->next_id++;
    int any_req = 0;
    for (int32_t j = 0; j < n; j++) any_req |= need[j];
    /* Extra members (additionalProperties true or a schema), after the listed ones as in the
     * converter: o_x ::= "\"" KEY ws ":" ws VALUE, KEY none of the listed names
     * (json_key_excl.c); o_t ::= (ws "," ws o_x)*. The last listed member is followed by
     * o_t, and where it is optional it may give way to the extras (every listed member
     * skipped from some point on). */
    if (r == P_OK && extra >= 0 && !closed) {
        int32_t k = -1;
        cbuf v = {0};
        if ((r = key_rule_of(e, ids, n, &k)) == P_OK && (r = schema_expr(e, extra, &v)) == P_OK &&
            (r = putf(&e->rules, "o%d_x ::= \"\\\"\" xk%d ws \":\" ws ", id, k)) == P_OK &&
            (r = json_put(&e->rules, v.data, v.len)) == P_OK)
            r = putf(&e->rules, "\no%d_t ::= (ws \",\" ws o%d_x)*\n", id, id);
        XGR_VEC_FREE(v);
    }
    int extras = extra >= 0 && !closed;
    cbuf *R = &e->rules;
    e->used |= U_WS;
    /* o ::= "{" ws "}" | "{" ws o_f0 ws "}"   (the empty object only without required) */
    if (r == P_OK)
        r = !any_req ? putf(R, "o%d ::= \"{\" ws \"}\" | \"{\" ws o%d_f0 ws \"}\"\n", id, id)
                           : putf(R, "o%d ::= \"{\" ws o%d_f0 ws \"}\"\n", id, id);
    /* o_fi ::= KV_i [o_p(i+1)] [| o_f(i+1)]: the first member written is the i-th or a
     * later one (skipping only optional ones); o_pi ::= ws "," ws o_fi [| ""]: after a
     * member, another from the i-th on, or none once no required one is left. Each
     * member's text is written once (the Python converter's chain). */
    int32_t last_req = -1;
    for (int32_t j = 0; j < n; j++)
        if (need[j]) last_req = j;
    for (int32_t j = 0; j < n && r == P_OK; j++) {
        if ((r = putf(R, "o%d_f%d ::= ", id, j)) || (r = json_put(R, kv[j].data, kv[j].len))) break;
        if (j + 1 < n && (r = putf(R, " o%d_p%d", id, j + 1))) break;
        if (j + 1 == n && extras && (r = putf(R, " o%d_t", id))) break;
        if (!need[j] && j + 1 < n && (r = putf(R, " | o%d_f%d", id, j + 1))) break;
        if (!need[j] && j + 1 == n && extras && (r = putf(R, " | o%d_x o%d_t", id, id))) break;
        r = json_puts(R, "\n");
    }
    for (int32_t j = 1; j < n && r == P_OK; j++) {
        if ((r = putf(R, "o%d_p%d ::= ws \",\" ws o%d_f%d", id, j, id, j))) break;
        r = json_puts(R, j > last_req ? " | \"\"\n" : "\n");
    }
    for (int32_t j = 0; j < n; j++) XGR_VEC_FREE(kv[j]);
    free(kv), free(ids), free(need);
    if (r) return r;
    return putf(out, "o%d", id);
}

/* The longest listed name beside additionalProperties (longer: Python). */
#define PLAIN_MAX_EXCLUDED_KEY 512

/* Rule xk<*k>: the rest of a key that is none of the names of members ids[0..n)
 * (json_key_excl.c). */
static int key_rule_of(emitter *e, const int32_t *ids, int32_t n, int32_t *k) {
    for (int32_t j = 0; j < n; j++) /* (the trie's writer recurses once per character) */
        if (NODE(e, ids[j]).key_len > PLAIN_MAX_EXCLUDED_KEY) return P_NO;
    int32_t *koff = malloc(sizeof *koff * 2 * (size_t)(n > 0 ? n : 1));
    if (!koff) return P_NOMEM;
    for (int32_t j = 0; j < n; j++) {
        koff[j] = NODE(e, ids[j]).key_off;
        koff[n + j] = NODE(e, ids[j]).key_len;
    }
    int r = json_key_excl_rule(&e->kx, e->p->s, koff, koff + n, n, &e->rules, k);
    e->used |= U_CHAR | U_KEYU;
    free(koff);
    return r;
}

/* A non-negative integer bound no larger than PLAIN_MAX_BOUND (minLength, maxItems, ...). */
#define PLAIN_MAX_BOUND 100000
static int bound_of(emitter *e, int32_t id, int32_t *v) {
    if (id < 0) return P_OK; /* absent: *v unchanged */
    const jnode *n = &NODE(e, id);
    if (n->kind != J_NUM || !n->is_int || n->len > 6 || e->p->s[n->off] == '-') return P_NO;
    int32_t x = 0;
    for (int32_t i = 0; i < n->len; i++) x = x * 10 + (e->p->s[n->off + i] - '0');
    if (x > PLAIN_MAX_BOUND) return P_NO;
    *v = x;
    return P_OK;
}

/* An array of `items` (any value when -1) with lo..hi of them (hi -1: unbounded): rule a<id>. */
static int array_expr(emitter *e, int32_t items, int32_t lo, int32_t hi, cbuf *out) {
    cbuf v = {0};
    int r;
    if (items < 0) {
        e->used |= U_VALUE;
        r = json_puts(&v, "value");
    } else {
        r = schema_expr(e, items, &v);
    }
    int32_t id = e->next_id++;
    cbuf *R = &e->rules;
    e->used |= U_WS;
    if (r == P_OK) r = putf(R, "a%d ::= ", id);
    if (r == P_OK && hi == 0) r = json_puts(R, "\"[\" ws \"]\"\n");
    else if (r == P_OK) {
        if (lo == 0) r = json_puts(R, "\"[\" ws \"]\" | ");
        if (r == P_OK && (r = json_puts(R, "\"[\" ws ")) == P_OK && (r = json_put(R, v.data, v.len)) == P_OK) {
            int32_t a = lo > 0 ? lo - 1 : 0, b = hi < 0 ? -1 : hi - 1;
            if (b != 0) {
                if ((r = json_puts(R, " (ws \",\" ws ")) == P_OK && (r = json_put(R, v.data, v.len)) == P_OK) {
                    if (a == 0 && b < 0) r = json_puts(R, ")*");
                    else if (b < 0) r = putf(R, "){%d,}", a);
                    else r = putf(R, "){%d,%d}", a, b);
                }
            }
            if (r == P_OK) r = json_puts(R, " ws \"]\"\n");
        }
    }
    XGR_VEC_FREE(v);
    if (r) return r;
    return putf(out, "a%d", id);
}

/* The keywords the Python converter reads (policy.py's KEYWORD_POLICY) other than those
 * handled here and its annotations: a schema object with one of them goes to Python. Any
 * other keyword is an annotation there (JSON Schema 2020-12 section 4.3.1), so here too;
 * tests/json_schema/test_plain_front.py checks this list against KEYWORD_POLICY. */
static const char *const PYTHON_KEYWORDS[] = {
    "$anchor", "$dynamicAnchor", "$dynamicRef", "$recursiveAnchor",
    "$recursiveRef", "additionalItems", "allOf", "contains",
    "dependencies", "dependentRequired", "dependentSchemas", "else",
    "if", "maxContains", "maxProperties", "minContains", "minProperties",
    "multipleOf", "not", "patternProperties", "prefixItems",
    "propertyNames", "then", "unevaluatedItems", "unevaluatedProperties", "uniqueItems"};
/* The keywords schema_expr_in reads itself (every other member is an annotation), in the
 * order of its slots. */
static const char *const CORE_KEYWORDS[] = {
    "type", "properties", "required", "items", "additionalProperties", "enum", "const", "$ref",
    "definitions", "$defs", "anyOf", "oneOf", "minLength", "maxLength", "minItems", "maxItems",
    "$id", "id", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "format",
    "pattern"};

/* The node a local `$ref` names: a JSON pointer into the document ("#/definitions/NAME",
 * "#/$defs/a/properties/b", "#/items/0"), every segment spelled plainly (no escape, no percent
 * sign) and no schema on the way but the root naming a base of its own ($id, draft-04 id);
 * *def = -1 for "#" (the root). P_NO for any other reference. */
static int resolve_ref_text(emitter *e, const char *t, size_t n, int32_t *def);

static int resolve_ref(emitter *e, const jnode *ref, int32_t *def) {
    if (ref->kind != J_STR || !ref->plain || ref->len < 1) return P_NO;
    return resolve_ref_text(e, e->p->s + ref->off, (size_t)ref->len, def);
}

/* resolve_ref of a reference spelled `t` (n bytes, printable ASCII without '"' or '\\'). */
static int resolve_ref_text(emitter *e, const char *t, size_t n, int32_t *def) {
    if (n < 1 || t[0] != '#') return P_NO;
    if (n == 1) {
        *def = -1;
        return P_OK;
    }
    if (t[1] != '/') return P_NO;
    /* a JSON pointer of plain segments (no escape, no percent sign), through object members
     * and array items, none on the way (the root aside) naming a base of its own */
    int32_t node = e->root;
    for (size_t i = 2; i <= n;) {
        size_t j = i;
        while (j < n && t[j] != '/') j++;
        if (j == i) return P_NO;
        for (size_t k = i; k < j; k++)
            if (t[k] == '~' || t[k] == '%') return P_NO;
        const jnode *c = &NODE(e, node);
        int32_t next = -1;
        if (node != e->root && c->kind == J_OBJ)
            for (int32_t m = c->first; m >= 0; m = NODE(e, m).next)
                if ((key_is(e, &NODE(e, m), "$id") || key_is(e, &NODE(e, m), "id")) && NODE(e, m).kind == J_STR)
                    return P_NO;
        if (c->kind == J_OBJ) {
            for (int32_t m = c->first; m >= 0 && next < 0; m = NODE(e, m).next) {
                const jnode *d = &NODE(e, m);
                if (d->key_plain && (size_t)d->key_len == j - i && memcmp(e->p->s + d->key_off, t + i, j - i) == 0)
                    next = m;
            }
        } else if (c->kind == J_ARR) {
            long idx = 0;
            if (j - i > 9 || (t[i] == '0' && j - i > 1)) return P_NO;
            for (size_t k = i; k < j; k++) {
                if (t[k] < '0' || t[k] > '9') return P_NO;
                idx = idx * 10 + (t[k] - '0');
            }
            for (int32_t m = c->first; m >= 0 && next < 0; m = NODE(e, m).next, idx--)
                if (idx == 0) next = m;
        }
        if (next < 0) return P_NO;
        node = next;
        i = j + 1;
    }
    *def = node;
    return P_OK;
}

/* The `$ref` member of schema `id` when nothing but annotations stands beside it, else -1. */
static int32_t bare_ref(emitter *e, int32_t id) {
    const jnode *s = &NODE(e, id);
    int32_t ref = -1;
    if (s->kind != J_OBJ) return -1;
    for (int32_t c = s->first; c >= 0; c = NODE(e, c).next) {
        const jnode *m = &NODE(e, c);
        if (key_is(e, m, "$ref")) {
            if (ref >= 0) return -1;
            ref = c;
            continue;
        }
        if (!m->key_plain) return -1;
        /* a keyword beside it, read here or by Python, makes it an intersection (a chain
         * followed past `"minLength": 3` would drop the bound) */
        for (size_t a = 0; a < sizeof CORE_KEYWORDS / sizeof *CORE_KEYWORDS; a++)
            if (key_is(e, m, CORE_KEYWORDS[a])) return -1;
        for (size_t a = 0; a < sizeof PYTHON_KEYWORDS / sizeof *PYTHON_KEYWORDS; a++)
            if (key_is(e, m, PYTHON_KEYWORDS[a])) return -1;
    }
    return ref;
}

/* The rule of a definition: d<id>, written the first time it is referenced (its body may
 * refer to it again: recursion). Chains of bare references are followed to the schema
 * they end at; a cycle of them is left to Python. */
static int ref_expr_def(emitter *e, int32_t def, int r, cbuf *out);

static int ref_expr(emitter *e, const jnode *ref, cbuf *out) {
    int32_t def;
    int r = resolve_ref(e, ref, &def);
    return ref_expr_def(e, def, r, out);
}

/* ref_expr of the definition resolve_ref found (r its status). */
static int ref_expr_def(emitter *e, int32_t def, int r, cbuf *out) {
    for (int hops = 0; r == P_OK && def >= 0; hops++) {
        int32_t next = bare_ref(e, def);
        if (next < 0) break;
        if (hops >= 64) return P_NO;
        r = resolve_ref(e, &NODE(e, next), &def);
    }
    if (r) return r;
    if (def < 0) /* the root: itself a bare reference would make `root ::= root` */
        return bare_ref(e, e->root) >= 0 ? P_NO : json_puts(out, "root");
    for (size_t k = 0; k < e->def_rule.len; k += 2)
        if (e->def_rule.data[k] == def) return putf(out, "d%d", e->def_rule.data[k + 1]);
    if (e->def_rule.len >= 2 * PLAIN_MAX_LIST) return P_NO;
    int32_t id = e->next_id++;
    if (XGR_VEC_PUSH(e->def_rule, def) || XGR_VEC_PUSH(e->def_rule, id)) return P_NOMEM;
    cbuf body = {0};
    r = schema_expr(e, def, &body);
    /* (other rules may name d<id> already: with parts, this failure need not reach the
     * root, so the grammar must not be returned) */
    if (r == P_NO) e->poisoned = 1;
    if (r == P_OK && (r = putf(&e->rules, "d%d ::= ", id)) == P_OK &&
        (r = json_put(&e->rules, body.data, body.len)) == P_OK)
        r = json_puts(&e->rules, "\n");
    XGR_VEC_FREE(body);
    if (r) return r;
    return putf(out, "d%d", id);
}

/* The keywords of one schema object (member node ids, -1: absent). */
typedef struct {
    int32_t props, req, items, addp, minl, maxl, mini, maxi, vmin, vmax, xmin, xmax;
    int32_t form; /* the string format's or pattern's index in the caller's table, -1: none,
                   * FORM_MISSING: not in the table (the caller is asked for it) */
    int32_t fmt, pat; /* the format and pattern members (-1: none) */
    int both;         /* a format and a pattern that both constrain: an intersection */
} schema_kw;

#define FORM_MISSING (-2)

/* The caller's entry for member `m` (a "format" or "pattern" keyword): *k its index in the
 * table, -1 when the entry constrains nothing, FORM_MISSING (counted) for a value not in the
 * table: the caller builds the entries a schema needs only when the rest of it is in the
 * subset, and leaves those it cannot build (the converter warns, refuses or builds it in its
 * own way) out of the table. P_NO for a value that is not a string. */
static int string_form_of(emitter *e, const char *keyword, const jnode *m, int32_t *k) {
    if (m->kind != J_STR) return P_NO;
    for (size_t i = 0; i < e->n_forms && i < (size_t)INT32_MAX; i++) {
        const xgr_json_string_form *f = &e->forms[i];
        if (f->keyword && f->text && strcmp(f->keyword, keyword) == 0 && strlen(f->text) == (size_t)m->len &&
            memcmp(f->text, e->p->s + m->off, (size_t)m->len) == 0) {
            *k = f->value ? (int32_t)i : -1;
            return P_OK;
        }
    }
    e->missing++;
    *k = FORM_MISSING;
    return P_OK;
}

/* The length of the rule name that begins line `l` ("NAME ::= ..."), 0 when there is none. */
static size_t line_name(const char *l) {
    const char *sep = strstr(l, " ::= ");
    const char *nl = strchr(l, '\n');
    return sep && (!nl || sep < nl) ? (size_t)(sep - l) : 0;
}

/* Whether a helper rule named as line `l` (its name `name` long) is written already. */
static int helper_seen(const emitter *e, const char *l, size_t name) {
    for (size_t h = 0; h < e->helpers.len && name; h += 2) {
        const char *o = e->forms[e->helpers.data[h]].rules + e->helpers.data[h + 1];
        if (line_name(o) == name && memcmp(o, l, name) == 0) return 1;
    }
    return 0;
}

/* The ws rule's line (no newline) as max_whitespace makes it, in buf (64 bytes). */
static void ws_line(int32_t max_ws, char *buf) {
    if (max_ws < 0) snprintf(buf, 64, "ws ::= [ \\n\\r\\t]*");
    else if (max_ws == 0) snprintf(buf, 64, "ws ::= \"\"");
    else snprintf(buf, 64, "ws ::= [ \\n\\r\\t]{0,%d}", (int)max_ws);
}

/* A caller's line `l` (`len` bytes) that defines shared rule `bit`: P_OK (the rule marked
 * used) when it is this file's text, P_NO otherwise (the caller's grammar would differ). */
static int shared_line(emitter *e, const char *l, size_t len, unsigned bit) {
    char ws[64];
    const char *own = "";
    if (bit == U_WS) ws_line(e->max_ws, ws), own = ws;
    else
        for (size_t q = 0; q < sizeof SHARED / sizeof *SHARED; q++)
            if (SHARED[q].bit == bit) own = SHARED[q].text;
    if (strncmp(own, l, len) != 0 || (own[len] != '\n' && own[len] != '\0')) return P_NO;
    e->used |= bit;
    return P_OK;
}

/* A reference to rule f<id> ::= the value of string form k, written once per grammar with
 * the helper rules it refers to (each name once: forms share character rules; `char` is the
 * shared rule, which must be this file's). */
static int string_form_rule(emitter *e, int32_t k, cbuf *out) {
    for (size_t i = 0; i < e->form_rule.len; i += 2)
        if (e->form_rule.data[i] == k) return putf(out, "f%d", e->form_rule.data[i + 1]);
    const xgr_json_string_form *f = &e->forms[k];
    int32_t id = e->next_id++;
    if (XGR_VEC_PUSH(e->form_rule, k) || XGR_VEC_PUSH(e->form_rule, id)) return P_NOMEM;
    int r = putf(&e->rules, "f%d ::= ", id);
    if (r == P_OK && (r = json_puts(&e->rules, f->value)) == P_OK) r = json_puts(&e->rules, "\n");
    for (const char *l = f->rules; r == P_OK && l && *l;) {
        const char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) : strlen(l), name = line_name(l);
        int seen = helper_seen(e, l, name);
        if (name == 4 && memcmp(l, "char", 4) == 0) { /* the shared rule: this file's text */
            if (shared_line(e, l, len, U_CHAR)) return P_NO;
            seen = 1;
        }
        if (!seen && len) {
            if (XGR_VEC_PUSH(e->helpers, (size_t)k) || XGR_VEC_PUSH(e->helpers, (size_t)(l - f->rules)))
                return P_NOMEM;
            if ((r = json_put(&e->rules, l, len)) == P_OK) r = json_puts(&e->rules, "\n");
        }
        l = nl ? nl + 1 : l + len;
    }
    return r ? r : putf(out, "f%d", id);
}

/* A type part this file does not write itself -- a string format or pattern beside a
 * length or beside each other, bounds on numbers, bounds on integers that are not integers
 * -- as the caller's converter writes the subschema of just that type and those keywords
 * (xgr2.h: a form with keyword "schema", its text json_form_key's). Missing from the table:
 * counted, its key added to `wants` for the caller, and a stand-in written (this grammar is
 * not returned). P_NO for a member json_form_key cannot spell, or a "schema" form without a
 * value (the caller converts such a schema itself). */
static int schema_form(emitter *e, const char *type, const int32_t *members, size_t n, cbuf *out) {
    cbuf key = {0};
    int r = json_form_key(e->p, type, members, n, &key);
    for (size_t i = 0; r == P_OK && i < e->n_forms && i < (size_t)INT32_MAX; i++) {
        const xgr_json_string_form *f = &e->forms[i];
        if (f->keyword && f->text && strcmp(f->keyword, "schema") == 0 && strlen(f->text) == key.len &&
            memcmp(f->text, key.data, key.len) == 0) {
            XGR_VEC_FREE(key);
            return f->value ? string_form_rule(e, (int32_t)i, out) : P_NO;
        }
    }
    if (r == P_OK) {
        e->missing++;
        r = json_put(&e->wants, key.data, key.len + 1); /* (its NUL too) */
    }
    XGR_VEC_FREE(key);
    if (r) return r;
    e->used |= U_VALUE;
    return json_puts(out, "value");
}

/* The values of type t (one bit) that the keywords allow. */
static int type_part(emitter *e, unsigned t, const schema_kw *k, cbuf *out) {
    if (t == T_OBJECT) {
        int closed = 0;
        int32_t extra = -1; /* additionalProperties true or a schema: the extra members' values */
        if (k->props < 0 && k->req < 0 && k->addp < 0) return generic(e, T_OBJECT, out);
        if (k->addp >= 0) {
            const jnode *a = &NODE(e, k->addp);
            if (a->kind == J_FALSE) closed = 1;
            else if (a->kind == J_TRUE || a->kind == J_OBJ) extra = k->addp;
            else return P_NO;
        }
        /* strict mode: listed properties close the object (unless additionalProperties says
         * otherwise) */
        if (extra < 0 && k->props >= 0 && NODE(e, k->props).kind == J_OBJ && NODE(e, k->props).n > 0) closed = 1;
        return object_expr(e, k->props, k->req, closed, extra, out);
    }
    if (t == T_ARRAY) {
        int32_t lo = 0, hi = -1, items = k->items;
        if (bound_of(e, k->mini, &lo) || bound_of(e, k->maxi, &hi) || (hi >= 0 && lo > hi)) return P_NO;
        if (items >= 0 && NODE(e, items).kind == J_TRUE) items = -1;
        if (items >= 0 && NODE(e, items).kind != J_OBJ) return P_NO;
        if (items < 0 && lo == 0 && hi < 0) return generic(e, T_ARRAY, out);
        return array_expr(e, items, lo, hi, out);
    }
    if (t == T_INTEGER && (k->vmin >= 0 || k->vmax >= 0 || k->xmin >= 0 || k->xmax >= 0)) {
        int has_lo = 0, has_hi = 0;
        int64_t lo = 0, hi = 0;
        const int32_t b[4] = {k->vmin, k->vmax, k->xmin, k->xmax};
        if (int_bound(e, k->vmin, 0, 0, &has_lo, &lo) || int_bound(e, k->xmin, 0, 1, &has_lo, &lo) ||
            int_bound(e, k->vmax, 1, 0, &has_hi, &hi) || int_bound(e, k->xmax, 1, 1, &has_hi, &hi))
            return schema_form(e, "integer", b, 4, out); /* a fraction, draft-04's boolean form... */
        return int_range(e, has_lo, lo, has_hi, hi, out);
    }
    if (t == T_NUMBER && (k->vmin >= 0 || k->vmax >= 0 || k->xmin >= 0 || k->xmax >= 0)) {
        const int32_t b[4] = {k->vmin, k->vmax, k->xmin, k->xmax};
        return schema_form(e, "number", b, 4, out);
    }
    const int32_t sm[4] = {k->fmt, k->pat, k->minl, k->maxl};
    if (t == T_STRING && k->form == FORM_MISSING) { /* a stand-in: this grammar is not returned */
        /* (with a length, or both: the intersection is asked for now too, in case) */
        if (k->minl >= 0 || k->maxl >= 0 || (k->fmt >= 0 && k->pat >= 0)) return schema_form(e, "string", sm, 4, out);
        e->used |= U_STRING;
        return json_puts(out, "string");
    }
    if (t == T_STRING && k->form >= 0) /* with a length or with each other: an intersection */
        return k->minl >= 0 || k->maxl >= 0 || k->both ? schema_form(e, "string", sm, 4, out)
                                                       : string_form_rule(e, k->form, out);
    if (t == T_STRING && (k->minl >= 0 || k->maxl >= 0)) {
        int32_t lo = 0, hi = -1;
        if (bound_of(e, k->minl, &lo) || bound_of(e, k->maxl, &hi) || (hi >= 0 && lo > hi)) return P_NO;
        if (hi == 0) return json_puts(out, "\"\\\"\\\"\"");
        e->used |= U_CHAR;
        if (lo == 0 && hi < 0) {
            e->used |= U_STRING;
            return json_puts(out, "string");
        }
        return hi < 0 ? putf(out, "(\"\\\"\" char{%d,} \"\\\"\")", lo)
                      : putf(out, "(\"\\\"\" char{%d,%d} \"\\\"\")", lo, hi);
    }
    return generic(e, t, out);
}

/* Whether the branches of `oneOf` array `a` are pairwise disjoint by their `type` alone:
 * each an object with one type name, no two the same, not both integer and number (an
 * integer is a number). Exactly one of them then matches where any does: the union. */
static int one_of_disjoint(emitter *e, const jnode *a) {
    if (a->kind != J_ARR) return 0;
    unsigned seen = 0;
    for (int32_t c = a->first; c >= 0; c = NODE(e, c).next) {
        const jnode *b = &NODE(e, c);
        unsigned bit = 0;
        if (b->kind != J_OBJ) return 0;
        for (int32_t m = b->first; m >= 0; m = NODE(e, m).next)
            if (key_is(e, &NODE(e, m), "type")) bit = type_bit(e, &NODE(e, m));
        if (!bit || (seen & bit) || ((seen | bit) & (T_INTEGER | T_NUMBER)) == (T_INTEGER | T_NUMBER)) return 0;
        seen |= bit;
    }
    return 1;
}

static int schema_expr_in(emitter *e, int32_t id, cbuf *out) {
    const jnode *s = &NODE(e, id);
    if (s->kind == J_TRUE) {
        e->used |= U_VALUE;
        return json_puts(out, "value");
    }
    if (s->kind != J_OBJ) return P_NO;
    int32_t type = -1, props = -1, req = -1, items = -1, addp = -1, en = -1, cst = -1, ref = -1;
    int32_t defs = -1, defs2 = -1, any = -1, one = -1, minl = -1, maxl = -1, mini = -1, maxi = -1, sid = -1;
    int32_t vmin = -1, vmax = -1, xmin = -1, xmax = -1, fmt = -1, pat = -1, form = -1;
    for (int32_t c = s->first; c >= 0; c = NODE(e, c).next) {
        const jnode *m = &NODE(e, c);
        /* the member's slot, in CORE_KEYWORDS' order ($id and id share one) */
        int32_t *const slots[] = {&type, &props, &req,  &items, &addp, &en,   &cst,  &ref,
                                  &defs, &defs2, &any,  &one,   &minl, &maxl, &mini, &maxi,
                                  &sid,  &sid,   &vmin, &vmax,  &xmin, &xmax, &fmt,  &pat};
        _Static_assert(sizeof slots / sizeof *slots == sizeof CORE_KEYWORDS / sizeof *CORE_KEYWORDS,
                       "one slot per CORE_KEYWORDS entry");
        int32_t *slot = NULL;
        for (size_t a = 0; a < sizeof CORE_KEYWORDS / sizeof *CORE_KEYWORDS && !slot; a++)
            if (key_is(e, m, CORE_KEYWORDS[a])) slot = slots[a];
        if (slot) {
            if (*slot >= 0) return P_NO; /* a duplicate keyword (not canonical text) */
            *slot = c;
            continue;
        }
        if (!m->key_plain) return P_NO; /* (canonical text spells no keyword with an escape) */
        for (size_t a = 0; a < sizeof PYTHON_KEYWORDS / sizeof *PYTHON_KEYWORDS; a++)
            if (key_is(e, m, PYTHON_KEYWORDS[a])) return P_NO;
    }
    /* definitions only at the root (read there before the conversion starts); an id only
     * there too, naming the document without a fragment or with an empty one (draft-04's
     * "http://x/s.json#", 111 JSONSchemaBench schemas): local references resolve the same */
    if ((defs >= 0 || defs2 >= 0) && id != e->root) return P_NO;
    if (sid >= 0) {
        const jnode *v = &NODE(e, sid);
        const char *hash = v->kind == J_STR ? memchr(e->p->s + v->off, '#', (size_t)v->len) : NULL;
        if (id != e->root || v->kind != J_STR || !v->plain ||
            (hash && hash != e->p->s + v->off + v->len - 1))
            return P_NO;
    }
    int both = 0;
    if (fmt >= 0 && string_form_of(e, "format", &NODE(e, fmt), &form)) return P_NO;
    /* (an annotation format stays out of a "schema" form's key: it constrains nothing, and
     * the caller says so as for any other) */
    int32_t fmt_key = form == -1 ? -1 : fmt;
    if (pat >= 0) { /* a format and a pattern that both constrain: an intersection (Python) */
        int32_t pk;
        if (string_form_of(e, "pattern", &NODE(e, pat), &pk)) return P_NO;
        if (pk == FORM_MISSING || form == FORM_MISSING) form = FORM_MISSING;
        else if (pk >= 0 && form >= 0) both = 1;
        else if (pk >= 0) form = pk;
    }
    int strform = fmt >= 0 || pat >= 0;
    int structural = props >= 0 || req >= 0 || items >= 0 || addp >= 0;
    int lengths = minl >= 0 || maxl >= 0 || mini >= 0 || maxi >= 0;
    int bounds = vmin >= 0 || vmax >= 0 || xmin >= 0 || xmax >= 0;
    schema_kw kw = {props, req, items, addp, minl, maxl, mini, maxi, vmin, vmax, xmin, xmax, form, fmt_key, pat, both};
    if (ref >= 0) {
        if (structural || lengths || bounds || type >= 0 || en >= 0 || cst >= 0 || any >= 0 || one >= 0 ||
            strform)
            return P_NO; /* an intersection */
        return ref_expr(e, &NODE(e, ref), out);
    }
    if (one >= 0 && (any >= 0 || !one_of_disjoint(e, &NODE(e, one)))) return P_NO;
    if (any >= 0 || one >= 0) { /* a union, alone (beside other keywords it is an intersection) */
        const jnode *a = &NODE(e, any >= 0 ? any : one);
        if (structural || lengths || bounds || type >= 0 || en >= 0 || cst >= 0 || strform || a->kind != J_ARR || a->n == 0 ||
            a->n > PLAIN_MAX_LIST)
            return P_NO;
        int r = json_puts(out, "(");
        for (int32_t c = a->first; c >= 0 && r == P_OK; c = NODE(e, c).next) {
            if (c != a->first && (r = json_puts(out, " | "))) break;
            r = schema_expr(e, c, out);
        }
        return r ? r : json_puts(out, ")");
    }
    unsigned mask = 0;
    if (type >= 0) {
        const jnode *t = &NODE(e, type);
        if (t->kind == J_STR) {
            mask = type_bit(e, t);
        } else if (t->kind == J_ARR) {
            for (int32_t c = t->first; c >= 0; c = NODE(e, c).next) {
                unsigned b = type_bit(e, &NODE(e, c));
                if (!b || (mask & b)) return P_NO;
                mask |= b;
            }
        }
        if (!mask) return P_NO;
    }
    if (en >= 0 || cst >= 0) {
        if (structural || lengths || bounds || strform || (en >= 0 && cst >= 0)) return P_NO;
        return enum_expr(e, en >= 0 ? en : cst, en < 0, type >= 0 ? mask : ~0u, out);
    }
    /* Each keyword constrains its own type's values (JSON Schema: an object keyword says
     * nothing about a string): the schema is the union over the allowed types (all of
     * them without `type`) of each type's part. A keyword of a type not allowed goes to
     * Python (which drops it), as do bounds on numbers that are not integers. */
    if (type < 0) {
        if (!structural && !lengths && !bounds && form == -1) {
            e->used |= U_VALUE;
            return json_puts(out, "value");
        }
        mask = T_STRING | T_INTEGER | T_NUMBER | T_BOOLEAN | T_NULL | T_OBJECT | T_ARRAY;
    }
    if (mask & T_NUMBER) mask &= ~(unsigned)T_INTEGER; /* (integers are numbers) */
    if (((props >= 0 || req >= 0 || addp >= 0) && !(mask & T_OBJECT)) ||
        ((items >= 0 || mini >= 0 || maxi >= 0) && !(mask & T_ARRAY)) ||
        ((minl >= 0 || maxl >= 0) && !(mask & T_STRING)) || (bounds && !(mask & (T_INTEGER | T_NUMBER))))
        return P_NO;
    int r = P_OK, k = 0, many = (mask & (mask - 1)) != 0;
    if (many) r = json_puts(out, "(");
    for (unsigned b = 1; b <= T_ARRAY && r == P_OK; b <<= 1) {
        if (!(mask & b)) continue;
        if (k++ && (r = json_puts(out, " | "))) break;
        r = type_part(e, b, &kw, out);
    }
    if (r == P_OK && many) r = json_puts(out, ")");
    return r;
}

/* Subschemas shorter than this are converted again where they recur (their expressions are
 * a name or two: the lookup would cost more). */
#define PLAIN_MEMO_MIN 24

/* ------------------------------------------------------------------ parts
 *
 * A subschema object this file cannot write (a keyword of PYTHON_KEYWORDS, an overlapping
 * oneOf, $ref beside keywords...) inside a schema it can is a "part": when the caller takes
 * parts (it passed `wants`), its key "@OFF:LEN" (its span in the canonical text) goes to
 * `wants`, and the caller's converter writes its rule, resolving local references against the
 * whole document (xgr2.h, keyword "part"). The rest of the schema stays here. */

/* Whether the subtree of node `id` resolves nothing against a base other than the
 * document's: no $ref that is not a local fragment (or is "#" itself, the root: its rule is
 * this file's), no $id / id naming a resource, no anchors or dynamic references. */
static int part_ok(emitter *e, int32_t id, int depth) {
    static const char *const ANCHORS[] = {"$anchor", "$dynamicAnchor", "$dynamicRef", "$recursiveAnchor",
                                          "$recursiveRef"};
    if (depth > PLAIN_MAX_DEPTH * 2 + 8) return 0;
    for (int32_t c = NODE(e, id).first; c >= 0; c = NODE(e, c).next) {
        const jnode *m = &NODE(e, c);
        if (m->key_off >= 0) {
            if (!m->key_plain) return 0;
            if (key_is(e, m, "$ref") && (m->kind != J_STR || m->len < 2 || e->p->s[m->off] != '#')) return 0;
            if ((key_is(e, m, "$id") || key_is(e, m, "id")) && m->kind == J_STR) return 0;
            for (size_t a = 0; a < sizeof ANCHORS / sizeof *ANCHORS; a++)
                if (key_is(e, m, ANCHORS[a])) return 0;
        }
        if ((m->kind == J_OBJ || m->kind == J_ARR) && !part_ok(e, c, depth + 1)) return 0;
    }
    return 1;
}

/* The name of the shared rule that line `l` (its name `name` long) defines, as a SHARED bit;
 * 0 for another name. */
static unsigned shared_bit(const char *l, size_t name) {
    for (size_t q = 0; q < sizeof SHARED / sizeof *SHARED; q++) {
        const char *t = SHARED[q].text, *sep = strstr(t, " ::= ");
        if (sep && (size_t)(sep - t) == name && memcmp(t, l, name) == 0) return SHARED[q].bit;
    }
    return 0;
}

/* The rules of every "part" form, written once: a line defining a shared rule must be this
 * file's text (the ws rule as max_whitespace makes it) and is left to the end; a `char_*`
 * helper is written once among the forms' helpers; every other line as it is. */
static int part_rules(emitter *e) {
    e->parts_written = 1;
    for (size_t k = 0; k < e->n_forms; k++) {
        const xgr_json_string_form *f = &e->forms[k];
        if (!f->keyword || strcmp(f->keyword, "part") != 0 || !f->rules) continue;
        for (const char *l = f->rules; *l;) {
            const char *nl = strchr(l, '\n');
            size_t len = nl ? (size_t)(nl - l) : strlen(l), name = line_name(l);
            unsigned bit = name ? shared_bit(l, name) : 0;
            int r = P_OK;
            if (bit) {
                if (shared_line(e, l, len, bit)) return P_NO;
            } else if (name > 5 && memcmp(l, "char_", 5) == 0) {
                if (!helper_seen(e, l, name)) {
                    if (XGR_VEC_PUSH(e->helpers, k) || XGR_VEC_PUSH(e->helpers, (size_t)(l - f->rules)))
                        return P_NOMEM;
                    if ((r = json_put(&e->rules, l, len)) == P_OK) r = json_puts(&e->rules, "\n");
                }
            } else if (len) {
                if ((r = json_put(&e->rules, l, len)) == P_OK) r = json_puts(&e->rules, "\n");
            }
            if (r) return r;
            l = nl ? nl + 1 : l + len;
        }
    }
    /* the definitions the parts' rules name instead of converting them again: NAME ::= d<id> */
    for (size_t k = 0; k < e->n_forms; k++) {
        const xgr_json_string_form *f = &e->forms[k];
        if (!f->keyword || strcmp(f->keyword, "part-ref") != 0) continue;
        if (!f->text || !f->value) return P_NO;
        int32_t def;
        size_t n = strlen(f->text);
        for (size_t i = 0; i < n; i++)
            if (f->text[i] < 0x20 || f->text[i] > 0x7e || f->text[i] == '"' || f->text[i] == '\\') return P_NO;
        int r = resolve_ref_text(e, f->text, n, &def);
        if (r == P_OK && def < 0) r = P_NO; /* (the root: never named by the caller) */
        cbuf body = {0};
        if (r == P_OK) r = ref_expr_def(e, def, r, &body);
        if (r == P_OK && (r = json_puts(&e->rules, f->value)) == P_OK && (r = json_puts(&e->rules, " ::= ")) == P_OK &&
            (r = json_put(&e->rules, body.data, body.len)) == P_OK)
            r = json_puts(&e->rules, "\n");
        XGR_VEC_FREE(body);
        if (r) return r;
    }
    return P_OK;
}

/* The expression of part `id` (its caller's rule), or a stand-in with its key added to
 * `wants` when the table lacks it (this grammar is then not returned). P_NO when the caller
 * refused it (an entry without a value) or it is not one (part_ok). */
/* The definitions that local references in the subtree of node `id` name (resolve_ref),
 * converted here as for any reference: the caller's rules for a part name them (keyword
 * "part-ref") instead of converting them again, and any part they hold is asked for in the
 * same call as the part that reaches them. */
static int part_defs(emitter *e, int32_t id, int depth) {
    /* the keywords whose value is a schema, an array of schemas or a map to schemas (draft
     * 2020-12 and draft-04's `dependencies` / `additionalItems`); a reference anywhere else
     * is in an annotation (hyper-schema `links`, `examples`) and names nothing converted */
    static const char *const ONE[] = {"additionalProperties", "additionalItems", "contains", "propertyNames", "not",
                                      "if", "then", "else", "unevaluatedProperties", "unevaluatedItems", "items"};
    static const char *const LIST[] = {"allOf", "anyOf", "oneOf", "prefixItems", "items"};
    static const char *const MAP[] = {"properties", "patternProperties", "dependentSchemas", "dependencies"};
    if (depth > PLAIN_MAX_DEPTH * 2 + 8) return P_NO;
    if (NODE(e, id).kind != J_OBJ) return P_OK;
    for (int32_t c = NODE(e, id).first; c >= 0; c = NODE(e, c).next) {
        const jnode *m = &NODE(e, c);
        int r = P_OK;
        if (m->kind == J_STR && key_is(e, m, "$ref")) {
            int32_t def;
            cbuf tmp = {0};
            r = resolve_ref(e, m, &def);
            if (r == P_OK && def >= 0) r = ref_expr_def(e, def, r, &tmp);
            XGR_VEC_FREE(tmp);
            if (r == P_NOMEM) return r; /* (one the core cannot write: the caller converts it) */
            continue;
        }
        int kind = 0;
        for (size_t a = 0; a < sizeof ONE / sizeof *ONE && !kind; a++)
            if (key_is(e, m, ONE[a]) && m->kind == J_OBJ) kind = 1;
        for (size_t a = 0; a < sizeof LIST / sizeof *LIST && !kind; a++)
            if (key_is(e, m, LIST[a]) && m->kind == J_ARR) kind = 2;
        for (size_t a = 0; a < sizeof MAP / sizeof *MAP && !kind; a++)
            if (key_is(e, m, MAP[a]) && m->kind == J_OBJ) kind = 2;
        if (kind == 1) r = part_defs(e, c, depth + 1);
        for (int32_t k = kind == 2 ? m->first : -1; k >= 0 && r == P_OK; k = NODE(e, k).next)
            r = part_defs(e, k, depth + 1);
        if (r) return r;
    }
    return P_OK;
}

static int part_ref(emitter *e, int32_t id, cbuf *out) {
    const jnode *n = &NODE(e, id);
    if (!part_ok(e, id, 0)) return P_NO;
    int r = part_defs(e, id, 0);
    if (r) return r;
    char key[48];
    int kl = snprintf(key, sizeof key, "@%d:%d", (int)n->off, (int)n->len);
    if (kl <= 0 || (size_t)kl >= sizeof key) return P_NO;
    for (size_t i = 0; i < e->n_forms; i++) {
        const xgr_json_string_form *f = &e->forms[i];
        if (f->keyword && f->text && strcmp(f->keyword, "part") == 0 && strcmp(f->text, key) == 0) {
            if (!f->value) return P_NO;
            if (!e->parts_written && (r = part_rules(e)) != P_OK) {
                e->poisoned = 1; /* (its rules are partly written: other parts name them) */
                return r;
            }
            return json_puts(out, f->value);
        }
    }
    e->missing++;
    r = json_put(&e->wants, key, (size_t)kl + 1); /* (its NUL too) */
    if (r) return r;
    e->used |= U_VALUE;
    return json_puts(out, "value");
}

static int schema_expr(emitter *e, int32_t id, cbuf *out) {
    if (e->depth >= PLAIN_MAX_DEPTH) return P_NO;
    const jnode *n = &NODE(e, id);
    int memo = n->kind == J_OBJ && n->len >= PLAIN_MEMO_MIN;
    size_t hit_len = 0;
    const char *hit = memo ? span_memo_get(&e->memo, n->off, n->len, &hit_len) : NULL;
    if (hit) return json_put(out, hit, hit_len);
    size_t at = out->len;
    e->depth++;
    int r = schema_expr_in(e, id, out);
    e->depth--;
    /* (the root only with definitions: without any, the caller would convert all of it) */
    if (r == P_NO && e->parts && n->kind == J_OBJ && (id != e->root || e->defs[0] >= 0 || e->defs[1] >= 0)) {
        out->len = at;
        r = part_ref(e, id, out);
    }
    if (r || !memo) return r;
    return span_memo_put(&e->memo, n->off, n->len, out->data + at, out->len - at);
}

int xgr_json_schema_plain(const char *canon, size_t len, int32_t max_whitespace,
                          const xgr_json_string_form *forms, size_t n_forms, xgr_grammar **out,
                          int32_t *missing, char **wants, size_t *wants_len) {
    if (!out || (!canon && len) || (!wants != !wants_len))
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_json_schema_plain: NULL argument");
    *out = NULL;
    if (missing) *missing = 0;
    if (wants) *wants = NULL, *wants_len = 0;
    json_dom p;
    memset(&p, 0, sizeof p);
    emitter e;
    memset(&e, 0, sizeof e);
    e.p = &p;
    e.forms = forms;
    e.n_forms = forms ? n_forms : 0;
    e.memo.src = canon;
    e.parts = wants != NULL;
    e.max_ws = max_whitespace;
    cbuf text = {0};
    int32_t root = -1;
    int r = json_dom_parse(&p, canon, len, PLAIN_MAX_DEPTH * 2 + 8, &root);
    e.root = root;
    e.defs[0] = e.defs[1] = -1;
    if (r == P_OK && NODE(&e, root).kind == J_OBJ)
        for (int32_t c = NODE(&e, root).first; c >= 0; c = NODE(&e, c).next) {
            const jnode *m = &NODE(&e, c);
            int w = key_is(&e, m, "definitions") ? 0 : key_is(&e, m, "$defs") ? 1 : -1;
            if (w < 0) continue;
            if (m->kind != J_OBJ || e.defs[w] >= 0) r = P_NO;
            else e.defs[w] = c;
        }
    if (r == P_OK) r = json_puts(&text, "root ::= ");
    if (r == P_OK) r = schema_expr(&e, root, &text);
    if (r == P_OK) r = json_puts(&text, "\n");
    if (r == P_OK && e.poisoned) r = P_NO;
    if (r == P_OK && e.missing) { /* in the subset but for values the caller may add */
        if (missing) *missing = e.missing;
        if (wants && e.wants.len) { /* (handed over: the caller frees it) */
            *wants = e.wants.data, *wants_len = e.wants.len;
            e.wants.data = NULL, e.wants.len = e.wants.cap = 0;
        }
        r = P_NO;
    }
    if (r == P_OK && e.rules.len) r = json_put(&text, e.rules.data, e.rules.len);
    if (r == P_OK) {
        unsigned used = e.used, prev = 0;
        while (used != prev) { /* close over the shared rules' references */
            prev = used;
            for (size_t k = 0; k < sizeof SHARED / sizeof *SHARED; k++)
                if (used & SHARED[k].bit) used |= SHARED[k].needs;
        }
        for (size_t k = 0; k < sizeof SHARED / sizeof *SHARED && r == P_OK; k++) {
            if (!(used & SHARED[k].bit)) continue;
            if (SHARED[k].bit == U_WS && max_whitespace >= 0) {
                char ws[64];
                ws_line(max_whitespace, ws);
                if ((r = json_puts(&text, ws)) == P_OK) r = json_puts(&text, "\n");
            } else
                r = json_puts(&text, SHARED[k].text);
        }
    }
    json_dom_free(&p);
    XGR_VEC_FREE(e.rules);
    XGR_VEC_FREE(e.bodies);
    XGR_VEC_FREE(e.enums);
    XGR_VEC_FREE(e.def_rule);
    int used_forms = e.form_rule.len > 0 || e.parts_written; /* (the caller's texts are in it) */
    XGR_VEC_FREE(e.form_rule);
    XGR_VEC_FREE(e.helpers);
    XGR_VEC_FREE(e.wants);
    json_key_excl_ctx_free(&e.kx);
    span_memo_free(&e.memo);
    int st = XGR_OK;
    if (r == P_NOMEM) st = xgr_fail(XGR_ERR_NOMEM, "xgr_json_schema_plain: out of memory");
    else if (r == P_OK) {
        st = xgr_grammar_from_ebnf(text.data, text.len, "root", 4, out);
        if (st != XGR_OK && st != XGR_ERR_NOMEM && st != XGR_ERR_LIMIT) {
            char why[256];
            snprintf(why, sizeof why, "%s", xgr_last_error());
            st = used_forms ? xgr_fail(XGR_ERR_INVALID_ARG, "xgr_json_schema_plain: the grammar "
                                       "with the caller's formats and patterns does not parse: %s", why)
                              : xgr_fail(XGR_ERR_INTERNAL, "xgr_json_schema_plain: the grammar it "
                                         "wrote does not parse (a bug: please report): %s", why);
        }
    }
    XGR_VEC_FREE(text);
    return st;
}
