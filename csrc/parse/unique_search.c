/* uniqueItems over elements whose values can run out: see unique_search.h. */
#include "unique_search.h"

#include <string.h>

#include "../common/json_canon.h"
#include "../common/text.h"

enum { M_FAIL = 0, M_PART = 1, M_DONE = 2 };

/* Where a consistent text ended: inside a string of the value, between two characters
 * (at_str), the character it expects next (want; -1 the closing quote) and where that
 * character starts in the value's text (vpos). */
typedef struct {
    int32_t want;
    size_t vpos;
    int at_str;
} part_info;

/* members of one object value compared by key; more are not compared (consistent) */
#define UQS_MAX_MEMBERS XGR_UQS_OMEMO_MEMBERS
/* nesting followed; deeper is consistent */
#define UQS_MAX_NEST 64
/* the items searched upward for the scope (xgr_uqs_scope) */
#define UQS_MAX_VISIT 65536

static int is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static size_t skip_ws(const uint8_t *s, size_t n, size_t i) {
    while (i < n && is_ws(s[i])) i++;
    return i;
}

static int hexval(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* End of the complete JSON value at v[j] (v is a whole value's text). */
static size_t v_skip(const uint8_t *v, size_t vn, size_t j) {
    int depth = 0, in_str = 0;
    for (; j < vn; j++) {
        uint8_t c = v[j];
        if (in_str) {
            if (c == '\\') j++;
            else if (c == '"') {
                in_str = 0;
                if (!depth) return j + 1;
            }
            continue;
        }
        if (c == '"') {
            in_str = 1;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (!depth) return j;
            if (!--depth) return j + 1;
        } else if (!depth && (c == ',' || c == ':' || is_ws(c))) {
            return j;
        }
    }
    return vn;
}

/* The next code point of a complete string at v[*j] (inside its quotes), advancing *j;
 * -1 at its closing quote (not consumed). */
static int32_t v_char(const uint8_t *v, size_t vn, size_t *j) {
    size_t k = *j;
    if (k >= vn || v[k] == '"') return -1;
    uint8_t c = v[k];
    if (c == '\\' && k + 1 < vn) {
        uint8_t e = v[k + 1];
        *j = k + 2;
        switch (e) {
        case 'b': return 8;
        case 'f': return 12;
        case 'n': return 10;
        case 'r': return 13;
        case 't': return 9;
        case 'u': {
            int32_t u = 0;
            for (int d = 0; d < 4; d++) {
                int h = k + 2 + (size_t)d < vn ? hexval(v[k + 2 + d]) : -1;
                if (h < 0) return 0xFFFD;
                u = u * 16 + h;
            }
            *j = k + 6;
            if (u >= 0xD800 && u <= 0xDBFF && k + 11 < vn && v[k + 6] == '\\' && v[k + 7] == 'u') {
                int32_t lo = 0;
                for (int d = 0; d < 4; d++) {
                    int h = hexval(v[k + 8 + d]);
                    if (h < 0) return u;
                    lo = lo * 16 + h;
                }
                if (lo >= 0xDC00 && lo <= 0xDFFF) {
                    *j = k + 12;
                    return 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                }
            }
            return u;
        }
        default: return e; /* " \ / */
        }
    }
    int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    int32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int d = 1; d < len; d++) cp = k + (size_t)d < vn ? (cp << 6) | (v[k + d] & 0x3F) : cp;
    *j = k + (size_t)len > vn ? vn : k + (size_t)len;
    return cp;
}

/* Do the hex digits s[i .. i+4) (as many as there are before n) spell code unit u?
 * M_DONE: all four; M_PART: a prefix so far. */
static int hex_unit(const uint8_t *s, size_t n, size_t i, int32_t u) {
    for (int d = 0; d < 4; d++) {
        if (i + (size_t)d >= n) return M_PART;
        if (hexval(s[i + d]) != ((u >> (12 - 4 * d)) & 0xF)) return M_FAIL;
    }
    return M_DONE;
}

/* The string at s[*i] (after its opening quote; the text may end inside it) against the
 * complete string at v[*j] (after its quote), by decoded character. *pi: filled when the
 * text ends between two characters, else left alone. */
static int m_string(const uint8_t *s, size_t n, size_t *i, const uint8_t *v, size_t vn, size_t *j,
                    part_info *pi) {
    for (;;) {
        size_t vj = *j;
        int32_t cv = v_char(v, vn, &vj);
        if (*i >= n) {
            if (pi) {
                pi->want = cv;
                pi->vpos = *j;
                pi->at_str = 1;
            }
            return M_PART;
        }
        uint8_t c = s[*i];
        if (c == '"') {
            if (cv != -1) return M_FAIL;
            *i += 1;
            *j = vj + 1;
            return M_DONE;
        }
        if (cv == -1) return M_FAIL;
        if (c == '\\') {
            if (*i + 1 >= n) return M_PART;
            uint8_t e = s[*i + 1];
            if (e == 'u') {
                int32_t hi = cv, lo = -1;
                if (cv >= 0x10000) {
                    hi = 0xD800 + ((cv - 0x10000) >> 10);
                    lo = 0xDC00 + ((cv - 0x10000) & 0x3FF);
                }
                int r = hex_unit(s, n, *i + 2, hi);
                if (r != M_DONE) return r;
                if (lo >= 0) {
                    size_t k = *i + 6;
                    if (k >= n) return M_PART;
                    if (s[k] != '\\') return M_FAIL;
                    if (k + 1 >= n) return M_PART;
                    if (s[k + 1] != 'u') return M_FAIL;
                    if ((r = hex_unit(s, n, k + 2, lo)) != M_DONE) return r;
                    *i = k + 6;
                } else {
                    *i += 6;
                }
            } else {
                int32_t d;
                switch (e) {
                case 'b': d = 8; break;
                case 'f': d = 12; break;
                case 'n': d = 10; break;
                case 'r': d = 13; break;
                case 't': d = 9; break;
                case '"': case '\\': case '/': d = e; break;
                default: return M_FAIL;
                }
                if (d != cv) return M_FAIL;
                *i += 2;
            }
        } else {
            uint8_t u[4];
            int len = xgr_utf8_encode((uint32_t)cv, u);
            for (int d = 0; d < len; d++) {
                if (*i + (size_t)d >= n) return M_PART;
                if (s[*i + d] != u[d]) return M_FAIL;
            }
            *i += (size_t)len;
        }
        *j = vj;
    }
}

static int num_char(uint8_t c) {
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

/* A number of the text against the value's number: a number still being written is
 * consistent with every number; an ended one is equal when their decimal values are
 * (json_canon.h xgr_json_canonical_value, as the parser compares elements). */
static int m_number(const uint8_t *s, size_t n, size_t *i, const uint8_t *v, size_t vn, size_t *j) {
    size_t a = *i, b = a;
    while (b < n && num_char(s[b])) b++;
    if (b >= n) return M_PART;
    size_t va = *j, vb = va;
    while (vb < vn && num_char(v[vb])) vb++;
    *i = b;
    *j = vb;
    if (b - a == vb - va && memcmp(s + a, v + va, b - a) == 0) return M_DONE;
    char c1[XGR_JSON_VALUE_OUT(64)], c2[XGR_JSON_VALUE_OUT(64)];
    size_t l1 = 0, l2 = 0;
    int32_t k1 = 0, k2 = 0;
    if (b - a > 64 || vb - va > 64) return M_DONE; /* (not compared: equal) */
    if (xgr_json_canonical_value((const char *)s + a, b - a, 1, c1, &l1, &k1) ||
        xgr_json_canonical_value((const char *)v + va, vb - va, 1, c2, &l2, &k2) || !k1 || !k2)
        return M_DONE;
    return l1 == l2 && memcmp(c1, c2, l1) == 0 ? M_DONE : M_FAIL;
}

static int m_value(const uint8_t *s, size_t n, size_t *i, const uint8_t *v, size_t vn, size_t *j,
                   int depth, part_info *want, xgr_uqs_omemo *mo);

/* The members of the object value at v[j] (its '{'): key and value offsets relative to j,
 * their count (-1: over UQS_MAX_MEMBERS) and the offset after its '}'. Every token a fill
 * judges compares its element with the same earlier values, so an earlier value's objects
 * are indexed once per fill (mo) instead of once per token: statamic.blueprint's searched
 * objects of ~250 bytes made this scan three quarters of a fill. Only objects wholly
 * before mo->stable (the history when the fill began, which does not change during it)
 * are kept; the others (inside the text of the token or of a search) are indexed anew. */
static const xgr_uqs_members *members(const uint8_t *v, size_t vn, size_t j, xgr_uqs_omemo *mo,
                                     xgr_uqs_members *tmp) {
    /* The list is always returned in the caller's `tmp`, never in a slot: a nested object
     * compared while the caller still reads its list may take the same slot. */
    const uint8_t *at = v + j;
    xgr_uqs_members *slot = NULL;
    if (mo && mo->slots) {
        size_t h = ((uintptr_t)at * 0x9E3779B97F4A7C15ull) >> 59; /* 32 slots */
        slot = &mo->slots[h];
        if (slot->gen == mo->gen && slot->at == at) {
            tmp->nm = slot->nm;
            tmp->vend = slot->vend;
            if (slot->nm > 0) {
                memcpy(tmp->keys, slot->keys, (size_t)slot->nm * sizeof *tmp->keys);
                memcpy(tmp->vals, slot->vals, (size_t)slot->nm * sizeof *tmp->vals);
            }
            return tmp;
        }
    }
    tmp->at = NULL;
    tmp->gen = 0;
    int nm = 0;
    size_t k = skip_ws(v, vn, j + 1);
    while (k < vn && v[k] == '"') {
        if (nm == UQS_MAX_MEMBERS) {
            nm = -1;
            break;
        }
        tmp->keys[nm] = (uint32_t)(k - j);
        k = skip_ws(v, vn, v_skip(v, vn, k));
        k = skip_ws(v, vn, k + 1); /* ':' */
        tmp->vals[nm++] = (uint32_t)(k - j);
        k = skip_ws(v, vn, v_skip(v, vn, k));
        if (k < vn && v[k] == ',') k = skip_ws(v, vn, k + 1);
    }
    tmp->nm = nm;
    tmp->vend = (uint32_t)(k + 1 - j); /* after '}' */
    if (slot && at + tmp->vend <= mo->stable && k - j < UINT32_MAX) {
        *slot = *tmp;
        slot->at = at;
        slot->gen = mo->gen;
    }
    return tmp;
}

static int m_object(const uint8_t *s, size_t n, size_t *i, const uint8_t *v, size_t vn, size_t *j,
                    int depth, part_info *want, xgr_uqs_omemo *mo) {
    xgr_uqs_members tmp;
    const xgr_uqs_members *ms = members(v, vn, *j, mo, &tmp);
    if (ms->nm < 0) return M_PART; /* (not compared: consistent) */
    int nm = ms->nm;
    size_t j0 = *j;
    size_t vend = j0 + ms->vend;
    uint64_t seen = 0;
    int nseen = 0;
    size_t x = *i + 1;
    for (;;) {
        x = skip_ws(s, n, x);
        if (x >= n) return M_PART;
        if (s[x] == '}') {
            if (nseen != nm) return M_FAIL;
            *i = x + 1;
            *j = vend;
            return M_DONE;
        }
        if (nseen) {
            if (s[x] != ',') return M_FAIL;
            x = skip_ws(s, n, x + 1);
            if (x >= n) return M_PART;
        }
        if (s[x] != '"') return M_FAIL;
        int match = -1, part = 0;
        size_t kend = 0;
        for (int m = 0; m < nm; m++) {
            if (seen >> m & 1) continue;
            size_t ii = x + 1, jj = j0 + ms->keys[m] + 1;
            int r = m_string(s, n, &ii, v, vn, &jj, NULL);
            if (r == M_PART) part = 1;
            else if (r == M_DONE) {
                match = m;
                kend = ii;
                break;
            }
        }
        if (match < 0) return part ? M_PART : M_FAIL;
        seen |= 1ull << match;
        nseen++;
        x = skip_ws(s, n, kend);
        if (x >= n) return M_PART;
        if (s[x] != ':') return M_FAIL;
        x++;
        size_t jj = j0 + ms->vals[match];
        int r = m_value(s, n, &x, v, vn, &jj, depth + 1, want, mo);
        if (r != M_DONE) return r;
    }
}

static int m_array(const uint8_t *s, size_t n, size_t *i, const uint8_t *v, size_t vn, size_t *j,
                   int depth, part_info *want, xgr_uqs_omemo *mo) {
    size_t x = *i + 1, y = *j + 1;
    for (int first = 1;; first = 0) {
        x = skip_ws(s, n, x);
        if (x >= n) return M_PART;
        y = skip_ws(v, vn, y);
        if (y >= vn) return M_FAIL;
        if (s[x] == ']') {
            if (v[y] != ']') return M_FAIL;
            *i = x + 1;
            *j = y + 1;
            return M_DONE;
        }
        if (!first) {
            if (s[x] != ',' || v[y] != ',') return M_FAIL;
            x = skip_ws(s, n, x + 1);
            y = skip_ws(v, vn, y + 1);
            if (x >= n) return M_PART;
        } else if (v[y] == ']') {
            return M_FAIL;
        }
        int r = m_value(s, n, &x, v, vn, &y, depth + 1, want, mo);
        if (r != M_DONE) return r;
    }
}

/* Can the text at s[*i] (a JSON value, possibly cut short) still be spelled as the value at
 * v[*j]? M_FAIL no; M_PART the text ended, consistent so far; M_DONE the text's value ended
 * and equals it (*i, *j after both). */
static int m_value(const uint8_t *s, size_t n, size_t *i, const uint8_t *v, size_t vn, size_t *j,
                   int depth, part_info *want, xgr_uqs_omemo *mo) {
    if (depth > UQS_MAX_NEST) return M_PART;
    *i = skip_ws(s, n, *i);
    if (*i >= n) return M_PART;
    *j = skip_ws(v, vn, *j);
    if (*j >= vn) return M_FAIL;
    uint8_t c = s[*i], d = v[*j];
    switch (c) {
    case '{': return d == '{' ? m_object(s, n, i, v, vn, j, depth, want, mo) : M_FAIL;
    case '[': return d == '[' ? m_array(s, n, i, v, vn, j, depth, want, mo) : M_FAIL;
    case '"':
        if (d != '"') return M_FAIL;
        *i += 1;
        *j += 1;
        return m_string(s, n, i, v, vn, j, want);
    case 't': case 'f': case 'n': {
        size_t e = v_skip(v, vn, *j);
        for (size_t k = 0; *j + k < e; k++) {
            if (*i + k >= n) return M_PART;
            if (s[*i + k] != v[*j + k]) return M_FAIL;
        }
        *i += e - *j;
        *j = e;
        return M_DONE;
    }
    default:
        if (c == '-' || (c >= '0' && c <= '9'))
            return d == '-' || (d >= '0' && d <= '9') ? m_number(s, n, i, v, vn, j) : M_FAIL;
        return M_FAIL;
    }
}

/* Is the element text t[0 .. n) consistent with value v (M_PART or M_DONE with nothing
 * but blanks after)? */
static int consistent(const uint8_t *t, size_t n, xgr_uqs_val v, part_info *want, xgr_uqs_omemo *mo) {
    size_t i = 0, j = 0;
    int r = m_value(t, n, &i, v.s, v.n, &j, 0, want, mo);
    if (r == M_PART) return 1;
    return r == M_DONE && skip_ws(t, n, i) >= n;
}

/* Is the complete element t[0 .. n - 1), followed by its separator t[n - 1] (',' or ']',
 * which ends a number), equal to value v? */
static int equal_complete(const uint8_t *t, size_t n, xgr_uqs_val v, xgr_uqs_omemo *mo) {
    size_t i = 0, j = 0;
    int r = m_value(t, n, &i, v.s, v.n, &j, 0, NULL, mo);
    return r == M_DONE && skip_ws(t, n, i) == n - 1;
}

/* Scans t[from .. n) at array level (depth 0: between the array's brackets) for the next
 * top-level ',' or ']' outside strings: its offset, or n. */
static size_t scan_from(const uint8_t *t, size_t n, size_t from, xgr_uqs_frame *st) {
    for (size_t k = from; k < n; k++) {
        uint8_t c = t[k];
        if (st->esc) {
            st->esc = 0;
        } else if (st->in_str) {
            if (c == '\\') st->esc = 1;
            else if (c == '"') st->in_str = 0;
        } else if (c == '"') {
            st->in_str = 1;
        } else if (c == '{' || c == '[') {
            st->depth++;
        } else if (c == '}' || c == ']') {
            if (!st->depth) return k;
            st->depth--;
        } else if (c == ',' && !st->depth) {
            return k;
        }
    }
    return n;
}

static size_t next_sep(const uint8_t *t, size_t n, size_t from) {
    xgr_uqs_frame st = {0};
    return scan_from(t, n, from, &st);
}

/* The array text a[0 .. n) (from its '['): its complete elements appended to *vals (texts
 * in a) and the offset of the element being written; 1 when the array has closed, below 0
 * no memory. */
static int split(const uint8_t *a, size_t n, xgr_uqs_vals *vals, size_t *elem_off) {
    size_t k = 1; /* after '[' */
    *elem_off = n < 1 ? n : 1;
    while (k <= n) {
        size_t e = next_sep(a, n, k);
        if (e >= n) {
            *elem_off = k;
            return 0;
        }
        size_t b = skip_ws(a, e, k), z = e;
        while (z > b && is_ws(a[z - 1])) z--;
        if (z > b) {
            xgr_uqs_val val = {a + b, z - b};
            if (XGR_VEC_PUSH(*vals, val)) return XGR_ERR_NOMEM;
        }
        if (a[e] == ']') return 1;
        k = e + 1;
    }
    *elem_off = n;
    return 0;
}

/* xgr_uqs_risk with *want: the next character some consistent value expects inside a
 * string (-2: none known); need_esc: set when one of them needs an escape there. */
static int risk(const uint8_t *t, size_t n, const xgr_uqs_val *vals, size_t nv, int *need_esc,
                xgr_uqs_omemo *mo) {
    xgr_uqs_val local[64];
    size_t nl = 0, k = 0;
    for (;;) {
        size_t e = next_sep(t, n, k);
        if (e >= n) break;
        size_t b = skip_ws(t, e, k), z = e;
        while (z > b && is_ws(t[z - 1])) z--;
        if (z > b) {
            for (size_t q = 0; q < nv + nl; q++)
                if (equal_complete(t + b, e + 1 - b, q < nv ? vals[q] : local[q - nv], mo)) return -1;
            if (nl < 64) local[nl++] = (xgr_uqs_val){t + b, z - b};
        }
        if (t[e] == ']') return 0;
        k = e + 1;
    }
    int any = 0;
    for (size_t q = 0; q < nv + nl; q++) {
        part_info pi = {-2, 0, 0};
        if (consistent(t + k, n - k, q < nv ? vals[q] : local[q - nv], need_esc ? &pi : NULL, mo)) {
            any = 1;
            if (!need_esc) break;
            if (pi.want == '"' || pi.want == '\\' || (pi.want >= 0 && pi.want < 0x20)) *need_esc = 1;
        }
    }
    return any;
}

/* The lexical state at the end of element text t: 0 outside strings, 1 in a string between
 * characters, 2 after a backslash, 3..6 after "\u" and 0..3 hex digits (*hex: those digits'
 * value so far). */
static int lex_end(const uint8_t *t, size_t n, int32_t *hex) {
    int st = 0;
    for (size_t k = 0; k < n; k++) {
        uint8_t c = t[k];
        if (st == 0) {
            if (c == '"') st = 1;
        } else if (st == 1) {
            if (c == '\\') st = 2;
            else if (c == '"') st = 0;
        } else if (st == 2) {
            if (c == 'u') {
                st = 3;
                *hex = 0;
            } else {
                st = 1;
            }
        } else {
            *hex = *hex * 16 + (hexval(c) < 0 ? 0 : hexval(c));
            st = st == 6 ? 1 : st + 1;
        }
    }
    return st;
}

static int has_bit(const uint32_t *b, int c) { return (int)(b[c >> 5] >> (c & 31) & 1u); }

/* Which bytes the search follows from a state where they keep the element consistent:
 * one spelling of each character. Blanks between values and other spellings of a
 * character (an escape where the raw byte follows the value too, an upper-case hex digit
 * where the lower-case one does) give the same values as the path taken. */
static void follow_set(const uint8_t *t, size_t tn, const uint32_t risky[8], int need_esc,
                       uint32_t out[8]) {
    int32_t hex = 0;
    int st = lex_end(t, tn, &hex);
    memcpy(out, risky, 8 * sizeof *out);
    int other = 0; /* (outside strings: not a blank; inside: not a backslash) */
    for (int c = 0; c < 256; c++)
        if (has_bit(risky, c) && c != '\\' && (st != 0 || !is_ws((uint8_t)c))) other = 1;
    if (st == 0) {
        /* blanks: one of them, only when nothing else keeps the element consistent */
        int kept = 0;
        static const uint8_t order[4] = {' ', '\n', '\t', '\r'};
        for (int q = 0; q < 4; q++) {
            int c = order[q];
            if (!has_bit(out, c)) continue;
            if (other || kept) out[c >> 5] &= ~(1u << (c & 31));
            else kept = 1;
        }
    } else if (st == 1) {
        if (other && !need_esc) out['\\' >> 5] &= ~(1u << ('\\' & 31));
    } else if (st >= 3) {
        for (int c = 'A'; c <= 'F'; c++)
            if (has_bit(out, c) && has_bit(out, c + 32)) out[c >> 5] &= ~(1u << (c & 31));
    }
}

/* The open search scopes at the parser's last row (origins ascending, outermost first)
 * into u->scopes, found upward through the items waiting on each rule. */
static int find_scopes(xgr_uqs *u, const xgr_parser *p, size_t *n_found) {
    const xgr_fsm *f = p->fsm;
    size_t base = u->scopes.len;
    *n_found = 0;
    int32_t last = xgr_parser_rows(p) - 1;
    if (last < 0 || !p->attrs) return XGR_OK;
    u->queue.len = 0;
    for (int32_t k = p->row_begin.data[last]; k < p->row_begin.data[last + 1]; k++)
        if (XGR_VEC_PUSH(u->queue, p->items.data[k])) return XGR_ERR_NOMEM;
    for (size_t h = 0; h < u->queue.len && h < UQS_MAX_VISIT; h++) {
        xgr_item y = u->queue.data[h];
        int32_t r = f->state_rule[y.state];
        if ((u->all ? p->attrs[r].unique >= XGR_UNIQUE_SCOPE : p->attrs[r].unique == XGR_UNIQUE_SEARCH_SCOPE) &&
            y.origin >= 0) {
            int dup = 0;
            for (size_t q = base; q < u->scopes.len && !dup; q++) dup = u->scopes.data[q] == y.origin;
            if (!dup && XGR_VEC_PUSH(u->scopes, y.origin)) return XGR_ERR_NOMEM;
        }
        /* (an item predicted in the last row has its callers there, already queued) */
        if (y.origin < 0 || y.origin == last) continue;
        for (int32_t k = p->row_begin.data[y.origin]; k < p->row_begin.data[y.origin + 1]; k++) {
            xgr_item z = p->items.data[k];
            for (int32_t e = f->edge_begin[z.state]; e < f->edge_begin[z.state + 1]; e++)
                if (f->edges[e].ref == r) {
                    int dup = 0;
                    for (size_t q = 0; q < u->queue.len && !dup; q++)
                        dup = u->queue.data[q].state == z.state && u->queue.data[q].origin == z.origin;
                    if (!dup && XGR_VEC_PUSH(u->queue, z)) return XGR_ERR_NOMEM;
                    break;
                }
        }
    }
    /* insertion sort: a handful */
    for (size_t i = base + 1; i < u->scopes.len; i++)
        for (size_t j = i; j > base && u->scopes.data[j - 1] > u->scopes.data[j]; j--) {
            int32_t x = u->scopes.data[j];
            u->scopes.data[j] = u->scopes.data[j - 1];
            u->scopes.data[j - 1] = x;
        }
    *n_found = u->scopes.len - base;
    return XGR_OK;
}

/* Frames for the scopes open now, appended from u->frames.len on: each scope's earlier
 * values (texts in the parser's history) and where its element being written starts. A
 * scope whose array has closed gets no frame. */
static int add_frames(xgr_uqs *u, const xgr_parser *p) {
    size_t s0 = u->scopes.len, nf = 0;
    int rc = find_scopes(u, p, &nf);
    if (rc) return rc;
    const uint8_t *h = p->hist.data;
    size_t len = p->hist.len;
    for (size_t q = s0; q < s0 + nf; q++) {
        size_t o = (size_t)u->scopes.data[q] + 1, eoff = 0;
        xgr_uqs_frame fr = {0};
        fr.v0 = u->vals.len;
        int closed = split(h + o, len - o, &u->vals, &eoff);
        if (closed < 0) return closed;
        if (closed) {
            u->vals.len = fr.v0;
            continue;
        }
        fr.nv = u->vals.len - fr.v0;
        fr.estart = o + eoff;
        scan_from(h + fr.estart, len - fr.estart, 0, &fr);
        fr.c0 = u->cons.len;
        for (size_t k = fr.v0; k < fr.v0 + fr.nv; k++) {
            part_info pi = {-2, 0, 0};
            if (!consistent(h + fr.estart, len - fr.estart, u->vals.data[k], &pi, &u->omemo)) continue;
            xgr_uqs_cons c = {k, pi.at_str ? pi.vpos : SIZE_MAX};
            if (XGR_VEC_PUSH(u->cons, c)) return XGR_ERR_NOMEM;
        }
        fr.nc = u->cons.len - fr.c0;
        if (XGR_VEC_PUSH(u->frames, fr)) return XGR_ERR_NOMEM;
    }
    u->scopes.len = s0;
    return XGR_OK;
}

/* Combined risk of frames [f0, u->frames.len) for the history plus x[0 .. xn) (written in
 * the history's spare room): -1 an element completes as a duplicate in some scope, 1 some
 * element being written may still become an earlier value, else 0. */
static int frames_risk(xgr_uqs *u, xgr_parser *p, size_t f0, const uint8_t *x, size_t xn, int *need_esc) {
    uint8_t *h = p->hist.data;
    size_t len = p->hist.len;
    if (xn) memcpy(h + len, x, xn);
    int any = 0;
    for (size_t k = f0; k < u->frames.len; k++) {
        const xgr_uqs_frame *fr = &u->frames.data[k];
        xgr_uqs_frame st = *fr;
        const uint8_t *e = h + fr->estart;
        size_t en = len + xn - fr->estart;
        if (scan_from(h + len, xn, 0, &st) < xn) {
            /* x completes the element: judged from the whole text */
            int r = risk(e, en, u->vals.data + fr->v0, fr->nv, need_esc, &u->omemo);
            if (r < 0) return -1;
            any |= r;
            continue;
        }
        /* x stays in the element: only the values its text is consistent with can remain;
         * where the text ends inside a string and x neither closes it nor escapes, x is
         * compared with the rest of each value's string alone */
        int in_str = fr->in_str && !fr->esc && !need_esc && !memchr(x, '"', xn) && !memchr(x, '\\', xn);
        for (size_t q = fr->c0; q < fr->c0 + fr->nc; q++) {
            const xgr_uqs_cons *c = &u->cons.data[q];
            xgr_uqs_val v = u->vals.data[c->val];
            if (in_str && c->vpos != SIZE_MAX) {
                size_t i = 0, j = c->vpos;
                if (m_string(x, xn, &i, v.s, v.n, &j, NULL) == M_FAIL) continue;
                any = 1;
                break;
            }
            part_info pi = {-2, 0, 0};
            if (!consistent(e, en, v, need_esc ? &pi : NULL, &u->omemo)) continue;
            any = 1;
            if (!need_esc) break;
            if (pi.want == '"' || pi.want == '\\' || (pi.want >= 0 && pi.want < 0x20)) *need_esc = 1;
        }
    }
    return any;
}

int xgr_uqs_prepare(xgr_uqs *u, xgr_parser *p, size_t room, int all) {
    u->frames.len = u->vals.len = u->scopes.len = u->cons.len = 0;
    u->all = all;
    if (XGR_VEC_RESERVE(p->hist, p->hist.len + room + XGR_UQS_MAX_DEPTH + 2)) return XGR_ERR_NOMEM;
    /* (the index of earlier objects holds for this history alone: a new generation; without
     * its slots, memory short, objects are indexed per comparison as before) */
    if (!u->omemo.slots) u->omemo.slots = xgr_calloc(XGR_UQS_OMEMO_SLOTS, sizeof *u->omemo.slots);
    if (++u->omemo.gen == 0) { /* (wrapped: no slot may match a stale generation) */
        if (u->omemo.slots) memset(u->omemo.slots, 0, XGR_UQS_OMEMO_SLOTS * sizeof *u->omemo.slots);
        u->omemo.gen = 1;
    }
    u->omemo.stable = p->hist.data + p->hist.len;
    int rc = add_frames(u, p);
    return rc ? rc : u->frames.len > 0;
}

int xgr_uqs_text_risk(xgr_uqs *u, xgr_parser *p, const uint8_t *x, size_t xn) {
    return frames_risk(u, p, 0, x, xn, NULL);
}

/* 1: from the parser's state a completion exists after which no element being written is a
 * duplicate (or the budget ran out); 0: none; < 0: error. */
static int search_at(xgr_uqs *u, xgr_parser *p, int64_t *budget, int depth) {
    size_t f0 = u->frames.len, v0 = u->vals.len, c0 = u->cons.len;
    int rc = add_frames(u, p);
    int result = 0;
    if (rc) return rc;
    int need_esc = 0;
    int now = frames_risk(u, p, f0, NULL, 0, &need_esc);
    if (now <= 0) { /* (a duplicate the parser took: its verdict stands) */
        result = 1;
        goto out;
    }
    uint32_t bs[8], risky[8] = {0}, follow[8];
    xgr_parser_next_bytes(p, bs);
    int32_t base = xgr_parser_rows(p);
    for (int b = 0; b < 256; b++) {
        if (!has_bit(bs, b)) continue;
        uint8_t x = (uint8_t)b;
        int r = frames_risk(u, p, f0, &x, 1, NULL);
        if (r < 0) continue; /* completes a duplicate: the parser refuses it */
        if (r > 0) {
            risky[b >> 5] |= 1u << (b & 31);
            continue;
        }
        if (--*budget < 0) {
            result = 1;
            goto out;
        }
        int alive;
        rc = xgr_parser_step(p, x, &alive);
        xgr_parser_truncate(p, base);
        if (rc == XGR_ERR_LIMIT) rc = XGR_OK, alive = 0;
        if (rc) goto out;
        if (alive) {
            result = 1;
            goto out;
        }
    }
    if (depth >= XGR_UQS_MAX_DEPTH) { /* (too deep to tell: counts as yes) */
        result = 1;
        goto out;
    }
    {
        /* the innermost element's lexical state (all end at the same byte) */
        const xgr_uqs_frame *in = &u->frames.data[u->frames.len - 1];
        follow_set(p->hist.data + in->estart, p->hist.len - in->estart, risky, need_esc, follow);
    }
    for (int b = 0; b < 256 && !result; b++) {
        if (!has_bit(follow, b)) continue;
        if (--*budget < 0) {
            result = 1;
            break;
        }
        int alive;
        rc = xgr_parser_step(p, (uint8_t)b, &alive);
        if (rc == XGR_ERR_LIMIT) rc = XGR_OK, alive = 0;
        if (!rc && alive) rc = result = search_at(u, p, budget, depth + 1);
        xgr_parser_truncate(p, base);
        if (rc < 0) goto out;
        rc = XGR_OK;
    }
out:
    u->frames.len = f0;
    u->vals.len = v0;
    u->cons.len = c0;
    return rc < 0 ? rc : result;
}

int xgr_uqs_search(xgr_uqs *u, xgr_parser *p, int64_t *budget) {
    u->all = 0;
    if (p->hist.cap - p->hist.len < XGR_UQS_MAX_DEPTH + 2 &&
        XGR_VEC_RESERVE(p->hist, p->hist.len + XGR_UQS_MAX_DEPTH + 2))
        return XGR_ERR_NOMEM;
    int32_t base = xgr_parser_rows(p);
    int r = search_at(u, p, budget, 0);
    xgr_parser_truncate(p, base);
    return r;
}

void xgr_uqs_free(xgr_uqs *u) {
    free(u->omemo.slots);
    u->omemo.slots = NULL;
    XGR_VEC_FREE(u->scopes);
    XGR_VEC_FREE(u->frames);
    XGR_VEC_FREE(u->vals);
    XGR_VEC_FREE(u->cons);
    XGR_VEC_FREE(u->queue);
}
