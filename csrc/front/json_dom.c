/* A small JSON reader for the core's JSON-schema front end (json_dom.h). */
#include "json_dom.h"

#include <string.h>

static void jskip_ws(json_dom *p) {
    while (p->i < p->len && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' ||
                             p->s[p->i] == '\r'))
        p->i++;
}

/* A string at p->i (its opening quote): its content span and whether it is plain. */
static int jstring(json_dom *p, int32_t *off, int32_t *len, uint8_t *plain) {
    size_t i = p->i + 1;
    int pl = 1;
    while (i < p->len && p->s[i] != '"') {
        uint8_t c = (uint8_t)p->s[i];
        if (c == '\\') {
            pl = 0;
            if (i + 1 >= p->len) return JSON_DOM_NO;
            i += p->s[i + 1] == 'u' ? 6 : 2;
            continue;
        }
        if (c < 0x20) return JSON_DOM_NO; /* not JSON */
        if (c > 0x7e) pl = 0;
        i++;
    }
    if (i >= p->len || i - p->i - 1 > (size_t)INT32_MAX) return JSON_DOM_NO;
    *off = (int32_t)(p->i + 1);
    *len = (int32_t)(i - p->i - 1);
    *plain = (uint8_t)pl;
    p->i = i + 1;
    return JSON_DOM_OK;
}

static int jvalue(json_dom *p, int depth, int32_t *out);

static int jnew(json_dom *p, uint8_t kind, int32_t *out) {
    json_dom_node n;
    memset(&n, 0, sizeof n);
    n.kind = kind;
    n.first = n.next = -1;
    n.key_off = -1;
    if (p->nodes.len >= (size_t)INT32_MAX || XGR_VEC_PUSH(p->nodes, n)) return JSON_DOM_NOMEM;
    *out = (int32_t)(p->nodes.len - 1);
    return JSON_DOM_OK;
}

/* The children of an array or object at p->i (its bracket), linked under node `id`. */
static int jcontainer(json_dom *p, int depth, int32_t id, int is_obj) {
    char close = is_obj ? '}' : ']';
    int32_t last = -1;
    p->i++;
    jskip_ws(p);
    if (p->i < p->len && p->s[p->i] == close) {
        p->i++;
        return JSON_DOM_OK;
    }
    for (;;) {
        int32_t koff = -1, klen = 0, kid;
        uint8_t kplain = 0;
        int r;
        jskip_ws(p);
        if (is_obj) {
            if (p->i >= p->len || p->s[p->i] != '"') return JSON_DOM_NO;
            if ((r = jstring(p, &koff, &klen, &kplain))) return r;
            jskip_ws(p);
            if (p->i >= p->len || p->s[p->i] != ':') return JSON_DOM_NO;
            p->i++;
        }
        if ((r = jvalue(p, depth + 1, &kid))) return r;
        json_dom_node *k = &p->nodes.data[kid];
        k->key_off = koff, k->key_len = klen, k->key_plain = kplain;
        if (last < 0) p->nodes.data[id].first = kid;
        else p->nodes.data[last].next = kid;
        last = kid;
        p->nodes.data[id].n++;
        jskip_ws(p);
        if (p->i >= p->len) return JSON_DOM_NO;
        if (p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->s[p->i] != close) return JSON_DOM_NO;
        p->i++;
        return JSON_DOM_OK;
    }
}

static int jvalue(json_dom *p, int depth, int32_t *out) {
    int r;
    if (depth > p->max_depth) return JSON_DOM_NO;
    jskip_ws(p);
    if (p->i >= p->len) return JSON_DOM_NO;
    char c = p->s[p->i];
    if (c == '{' || c == '[') {
        size_t st = p->i;
        if ((r = jnew(p, c == '{' ? JSON_DOM_OBJ : JSON_DOM_ARR, out))) return r;
        if ((r = jcontainer(p, depth, *out, c == '{'))) return r;
        if (p->i - st > (size_t)INT32_MAX || st > (size_t)INT32_MAX) return JSON_DOM_NO;
        p->nodes.data[*out].off = (int32_t)st, p->nodes.data[*out].len = (int32_t)(p->i - st);
        return JSON_DOM_OK;
    }
    if (c == '"') {
        int32_t off, len;
        uint8_t plain;
        if ((r = jstring(p, &off, &len, &plain))) return r;
        if ((r = jnew(p, JSON_DOM_STR, out))) return r;
        json_dom_node *n = &p->nodes.data[*out];
        n->off = off, n->len = len, n->plain = plain;
        return JSON_DOM_OK;
    }
    static const char *const lits[3] = {"null", "false", "true"};
    for (int k = 0; k < 3; k++) {
        size_t l = strlen(lits[k]);
        if (p->len - p->i >= l && memcmp(p->s + p->i, lits[k], l) == 0) {
            p->i += l;
            return jnew(p, (uint8_t)(JSON_DOM_NULL + k), out);
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        size_t st = p->i, i = p->i;
        if (p->s[i] == '-') i++;
        size_t d0 = i;
        while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') i++;
        if (i == d0 || (p->s[d0] == '0' && i - d0 > 1)) return JSON_DOM_NO;
        int is_int = 1;
        while (i < p->len && (p->s[i] == '.' || p->s[i] == 'e' || p->s[i] == 'E' ||
                              p->s[i] == '+' || p->s[i] == '-' ||
                              (p->s[i] >= '0' && p->s[i] <= '9'))) {
            is_int = 0;
            i++;
        }
        if (i - st > (size_t)INT32_MAX) return JSON_DOM_NO;
        if ((r = jnew(p, JSON_DOM_NUM, out))) return r;
        json_dom_node *n = &p->nodes.data[*out];
        n->off = (int32_t)st, n->len = (int32_t)(i - st), n->is_int = (uint8_t)is_int;
        p->i = i;
        return JSON_DOM_OK;
    }
    return JSON_DOM_NO;
}

int json_dom_parse(json_dom *d, const char *s, size_t len, int max_depth, int32_t *root) {
    d->s = s, d->len = len, d->i = 0, d->max_depth = max_depth;
    int r = jvalue(d, 0, root);
    if (r == JSON_DOM_OK) {
        jskip_ws(d);
        if (d->i != d->len) r = JSON_DOM_NO;
    }
    return r;
}

void json_dom_free(json_dom *d) { XGR_VEC_FREE(d->nodes); }
