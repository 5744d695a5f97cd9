/* Analyses over IR rules that drive lowering: reachability, recursion (SCCs),
 * nullability / productivity, size estimates and inlining decisions. */
#include "lower_internal.h"

#define EST_CAP (1 << 30)

static int class_nonempty(lw_ctx *c, const xgr_node *n) {
    const uint32_t *p = c->g->ranges.data + n->off;
    uint32_t limit = n->kind == XGR_NODE_CLASS ? 0x10FFFF : 255;
    /* Fast paths: a plain class with one usable range; a negated class missing a probe. */
    if (!n->negated) {
        for (int32_t i = 0; i < n->count; i++) {
            uint32_t lo = p[2 * i], hi = p[2 * i + 1] < limit ? p[2 * i + 1] : limit;
            if (lo <= hi && (limit == 255 || lo < 0xD800 || hi > 0xDFFF)) return 1;
        }
        return 0;
    }
    static const uint32_t probes[4] = {0, 'a', 0xFF, 0x10FFFF};
    for (int k = 0; k < 4; k++) {
        if (probes[k] > limit) continue;
        int in = 0;
        for (int32_t i = 0; i < n->count && !in; i++) in = probes[k] >= p[2 * i] && probes[k] <= p[2 * i + 1];
        if (!in) return 1;
    }
    int rc = n->kind == XGR_NODE_CLASS ? lw_norm_class(p, n->count, n->negated, &c->ranges)
                                       : lw_norm_byte_class(p, n->count, n->negated, &c->ranges);
    if (rc) {
        if (!c->status) c->status = rc;
        return 0;
    }
    return c->ranges.len > 0;
}

static uint8_t rule_props(const lw_ctx *c, int32_t r) {
    uint8_t f = c->rflags[r];
    return (uint8_t)(((f & RF_NULLABLE) ? NP_NULLABLE : 0) | ((f & RF_NE) ? NP_NE : 0) |
                     ((f & RF_PROD) ? NP_PROD : 0));
}

uint8_t lw_node_props(lw_ctx *c, int32_t id, int depth) {
    if (c->memo_on && c->nprops[id]) return c->nprops[id] & 7;
    if (depth > LW_MAX_DEPTH) {
        if (!c->status)
            c->status = xgr_fail(XGR_ERR_LIMIT, "grammar expression nesting deeper than %d",
                                 LW_MAX_DEPTH);
        return 0;
    }
    const xgr_node *n = &c->g->nodes.data[id];
    uint8_t p = 0;
    switch (n->kind) {
    case XGR_NODE_EMPTY: p = NP_NULLABLE | NP_PROD; break;
    case XGR_NODE_BYTES: p = n->count > 0 ? NP_NE | NP_PROD : NP_NULLABLE | NP_PROD; break;
    case XGR_NODE_CLASS:
    case XGR_NODE_BYTE_CLASS: p = class_nonempty(c, n) ? NP_NE | NP_PROD : 0; break;
    case XGR_NODE_SEQ: {
        int all_null = 1, all_prod = 1, any_ne = 0;
        for (int32_t i = 0; i < n->count; i++) {
            uint8_t q = lw_node_props(c, c->g->kids.data[n->off + i], depth + 1);
            all_null &= (q & NP_NULLABLE) != 0;
            all_prod &= (q & NP_PROD) != 0;
            any_ne |= (q & NP_NE) != 0;
        }
        p = (uint8_t)((all_null ? NP_NULLABLE : 0) | (all_prod ? NP_PROD : 0) |
                      (all_prod && any_ne ? NP_NE : 0));
        break;
    }
    case XGR_NODE_ALT:
        for (int32_t i = 0; i < n->count; i++)
            p |= lw_node_props(c, c->g->kids.data[n->off + i], depth + 1);
        break;
    case XGR_NODE_REF: p = rule_props(c, n->a); break;
    case XGR_NODE_TAG_DISPATCH: p = lw_td_props(c, id); break;
    case XGR_NODE_SUBSTRING: p = lw_substring_props(c->g, id); break;
    case XGR_NODE_REPEAT: {
        uint8_t q = lw_node_props(c, n->a, depth + 1);
        if (n->max == 0) {
            p = NP_NULLABLE | NP_PROD;
        } else {
            p = (uint8_t)(((n->min == 0 || (q & NP_NULLABLE)) ? NP_NULLABLE : 0) |
                          ((n->min == 0 || (q & NP_PROD)) ? NP_PROD : 0) | (q & NP_NE));
        }
        break;
    }
    default: break; /* rejected by validate_tree */
    }
    if (c->memo_on) c->nprops[id] = (uint8_t)(p | NP_KNOWN);
    return p;
}

/* Checks node `id` and its subtree against the pools and appends the rule ids it
 * references to `out`, so later passes can index without checks. */
static int walk_refs(lw_ctx *c, int32_t id, lw_i32v *out, int depth) {
    const xgr_grammar *g = c->g;
    if (depth > LW_MAX_DEPTH)
        return xgr_fail(XGR_ERR_LIMIT, "grammar expression nesting deeper than %d",
                        LW_MAX_DEPTH);
    if (id < 0 || (size_t)id >= g->nodes.len)
        return xgr_fail(XGR_ERR_INVALID_ARG, "grammar node id %d out of range", (int)id);
    const xgr_node *n = &g->nodes.data[id];
    switch (n->kind) {
    case XGR_NODE_EMPTY: return XGR_OK;
    case XGR_NODE_BYTES:
        if (n->off < 0 || n->count < 0 || (size_t)n->off + (size_t)n->count > g->bytes.len)
            return xgr_fail(XGR_ERR_INVALID_ARG, "grammar literal out of range");
        return XGR_OK;
    case XGR_NODE_CLASS:
    case XGR_NODE_BYTE_CLASS:
        if (n->off < 0 || n->count < 0 ||
            (size_t)n->off + 2 * (size_t)n->count > g->ranges.len)
            return xgr_fail(XGR_ERR_INVALID_ARG, "grammar class out of range");
        return XGR_OK;
    case XGR_NODE_SEQ:
    case XGR_NODE_ALT:
        if (n->off < 0 || n->count < 0 || (size_t)n->off + (size_t)n->count > g->kids.len)
            return xgr_fail(XGR_ERR_INVALID_ARG, "grammar node list out of range");
        for (int32_t i = 0; i < n->count; i++) {
            int rc = walk_refs(c, g->kids.data[n->off + i], out, depth + 1);
            if (rc) return rc;
        }
        return XGR_OK;
    case XGR_NODE_REF:
        if (n->a < 0 || (size_t)n->a >= g->rules.len)
            return xgr_fail(XGR_ERR_INVALID_ARG, "grammar rule id %d out of range", (int)n->a);
        if (XGR_VEC_PUSH(*out, n->a)) return XGR_ERR_NOMEM;
        return XGR_OK;
    case XGR_NODE_REPEAT:
        if (n->min < 0 || n->max < -1 || (n->max >= 0 && n->max < n->min))
            return xgr_fail(XGR_ERR_SEMANTIC, "invalid repetition bounds {%d,%d}", (int)n->min,
                            (int)n->max);
        return walk_refs(c, n->a, out, depth + 1);
    case XGR_NODE_SUBSTRING: return lw_substring_check(g, id);
    case XGR_NODE_TAG_DISPATCH:
        /* lowered as a whole rule automaton (tag_dispatch.c), so only a rule body */
        if (depth > 0)
            return xgr_fail(XGR_ERR_SEMANTIC, "TagDispatch(...) must be a whole rule body "
                                              "(not part of an expression or a lookahead)");
        {
            size_t first = out->len;
            int rc = lw_td_refs(g, id, out);
            for (size_t k = first; !rc && k < out->len; k++)
                c->rflags[out->data[k]] |= RF_TD_TARGET; /* built as a trie (trie_alt.c) */
            return rc;
        }
    default:
        return xgr_fail(XGR_ERR_INVALID_ARG, "unknown grammar node kind %d", (int)n->kind);
    }
}

static int64_t est_node(lw_ctx *c, int32_t id, int depth);

/* Marks in first[8] (bit b of word b / 32) the bytes that can start a non-empty match of
 * node `id`, over-approximated. Returns 0, or -1 when unknown: a TagDispatch node, or
 * more than *budget nodes visited (rules are followed into their bodies whether inlined
 * or not, so a recursive rule spends the budget). */
static int node_first(lw_ctx *c, int32_t id, uint32_t first[8], int *budget) {
    if (--*budget < 0) return -1;
    const xgr_grammar *g = c->g;
    const xgr_node *n = &g->nodes.data[id];
    switch (n->kind) {
    case XGR_NODE_EMPTY: return 0;
    case XGR_NODE_BYTES:
        if (n->count > 0) {
            uint8_t b = g->bytes.data[n->off];
            first[b >> 5] |= 1u << (b & 31);
        }
        return 0;
    case XGR_NODE_CLASS:
    case XGR_NODE_BYTE_CLASS: {
        int rc = n->kind == XGR_NODE_CLASS
                     ? lw_norm_class(g->ranges.data + n->off, n->count, n->negated, &c->ranges)
                     : lw_norm_byte_class(g->ranges.data + n->off, n->count, n->negated, &c->ranges);
        if (rc) return -1;
        /* UTF-8 lead bytes, monotone within each encoded length */
        static const uint32_t band_lo[4] = {0, 0x80, 0x800, 0x10000},
                              band_hi[4] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
        for (size_t i = 0; i < c->ranges.len; i++) {
            uint32_t lo = c->ranges.data[i].lo, hi = c->ranges.data[i].hi;
            for (int k = 0; k < 4; k++) {
                uint32_t a = lo > band_lo[k] ? lo : band_lo[k], z = hi < band_hi[k] ? hi : band_hi[k];
                if (n->kind == XGR_NODE_BYTE_CLASS && k) break;
                if (a > z) continue;
                uint32_t la = a, lz = z;
                if (n->kind == XGR_NODE_CLASS && k) {
                    int sh = 6 * k;
                    uint32_t tag = k == 1 ? 0xC0 : k == 2 ? 0xE0 : 0xF0;
                    la = tag | (a >> sh);
                    lz = tag | (z >> sh);
                }
                for (uint32_t b = la; b <= lz && b < 256; b++) first[b >> 5] |= 1u << (b & 31);
            }
        }
        return 0;
    }
    case XGR_NODE_SEQ:
        for (int32_t i = 0; i < n->count; i++) {
            int32_t k = g->kids.data[n->off + i];
            if (node_first(c, k, first, budget)) return -1;
            if (!(lw_node_props(c, k, 0) & NP_NULLABLE)) break;
        }
        return 0;
    case XGR_NODE_ALT:
    case XGR_NODE_SUBSTRING: /* any run of chunks starts with one of them */
        for (int32_t i = 0; i < n->count; i++)
            if (node_first(c, g->kids.data[n->off + i], first, budget)) return -1;
        return 0;
    case XGR_NODE_REF: {
        int32_t body = g->rules.data[n->a].body;
        return body < 0 ? -1 : node_first(c, body, first, budget);
    }
    case XGR_NODE_REPEAT: return n->max == 0 ? 0 : node_first(c, n->a, first, budget);
    default: return -1;
    }
}

/* Is bounded REPEAT node `id`'s body wide (lower_internal.h lw_repeat_compressed)? */
static int repeat_wide(lw_ctx *c, int32_t id) {
    if (c->nwide[id]) return c->nwide[id] == 2;
    uint32_t first[8] = {0};
    int budget = 256, wide = 0;
    if (!node_first(c, c->g->nodes.data[id].a, first, &budget)) {
        int bytes = 0;
        for (int w = 0; w < 8; w++)
            for (uint32_t x = first[w]; x; x &= x - 1) bytes++;
        wide = bytes >= LW_WIDE_FIRST_BYTES;
    }
    c->nwide[id] = wide ? 2 : 1;
    return wide;
}

int lw_rule_wide(lw_ctx *c, int32_t r) {
    if (c->rwide[r]) return c->rwide[r] == 2;
    uint32_t first[8] = {0};
    int budget = 256, wide = 0;
    int32_t body = c->g->rules.data[r].body;
    if (body >= 0 && !node_first(c, body, first, &budget)) {
        int bytes = 0;
        for (int w = 0; w < 8; w++)
            for (uint32_t x = first[w]; x; x &= x - 1) bytes++;
        wide = bytes >= LW_WIDE_FIRST_BYTES;
    }
    c->rwide[r] = wide ? 2 : 1;
    return wide;
}

int lw_repeat_compressed(lw_ctx *c, int32_t id) {
    const xgr_node *n = &c->g->nodes.data[id];
    if (n->max >= 0 ? n->max > c->rthresh : n->min > c->rthresh) return 1;
    if (n->max == 0) return 0;
    if (n->max >= 2 && repeat_wide(c, id)) return 1;
    int64_t copies = n->max >= 0 ? n->max : (int64_t)n->min + 1;
    return est_node(c, n->a, 0) * copies > LW_MAX_UNROLL;
}

/* Automaton-size estimate of a node with inlined rules expanded (saturating). It only
 * depends on the inlining of rules in callee SCCs (final when first asked; rules of
 * the asking SCC are recursive, hence never inlined), so it is memoised per node. */
static int64_t est_node(lw_ctx *c, int32_t id, int depth) {
    if (c->nest[id] >= 0) return c->nest[id];
    if (depth > LW_MAX_DEPTH) return EST_CAP;
    const xgr_node *n = &c->g->nodes.data[id];
    int64_t s = 0;
    switch (n->kind) {
    case XGR_NODE_EMPTY: s = 0; break;
    case XGR_NODE_BYTES: s = n->count; break;
    case XGR_NODE_CLASS: {
        /* one transition plus the intermediate states of the longest UTF-8 form */
        uint32_t top = 0;
        const uint32_t *p = c->g->ranges.data + n->off;
        for (int32_t i = 0; i < n->count; i++)
            if (p[2 * i + 1] > top) top = p[2 * i + 1];
        if (n->negated) top = 0x10FFFF;
        int len = top < 0x80 ? 1 : top < 0x800 ? 2 : top < 0x10000 ? 3 : 4;
        s = 1 + 2 * (len - 1);
        break;
    }
    case XGR_NODE_BYTE_CLASS: s = 1; break;
    case XGR_NODE_TAG_DISPATCH: s = EST_CAP; break; /* never inlined */
    case XGR_NODE_SUBSTRING: s = lw_substring_est(c->g, id); break;
    case XGR_NODE_SEQ:
    case XGR_NODE_ALT:
        for (int32_t i = 0; i < n->count && s < EST_CAP; i++)
            s += est_node(c, c->g->kids.data[n->off + i], depth + 1);
        break;
    case XGR_NODE_REF: s = (c->rflags[n->a] & RF_INLINED) ? c->est[n->a] : 1; break;
    case XGR_NODE_REPEAT: {
        if (lw_repeat_compressed(c, id)) {
            s = 1;
            break;
        }
        int64_t k = n->max >= 0 ? n->max : (int64_t)n->min + 1;
        s = est_node(c, n->a, depth + 1) * k + 1;
        break;
    }
    default: s = EST_CAP; break;
    }
    if (s > EST_CAP) s = EST_CAP;
    c->nest[id] = (int32_t)s;
    return s;
}

/* Passes 2-3 for one SCC (callee SCCs are final): RF_NULLABLE / RF_NE / RF_PROD become
 * the least fixpoint; RF_RECURSIVE marks rules on a reference cycle; RF_INLINED marks
 * non-recursive rules other than the root, without lookahead, whose estimated
 * automaton has at most inline_max states. */
static int finish_scc(lw_ctx *c, const int32_t *m, size_t k, const lw_i32v *refs,
                      const int32_t *roff, const int32_t *rlen) {
    const xgr_grammar *g = c->g;
    int recursive = k > 1;
    for (int32_t i = 0; !recursive && i < rlen[m[0]]; i++)
        if (refs->data[roff[m[0]] + i] == m[0]) recursive = 1;
    /* (members in reverse order of discovery: a depth-first search finds callees after their
     * callers, so their flags are known when the callers are read and a pass propagates
     * them through the whole SCC; in discovery order a pass moved them one reference up,
     * and WashingtonPost's 800-rule SCCs took 14 passes. The least fixpoint is the same.) */
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = k; i-- > 0;) {
            int32_t r = m[i];
            uint8_t p = lw_node_props(c, g->rules.data[r].body, 0);
            if (c->status) return c->status;
            uint8_t f = (uint8_t)(((p & NP_NULLABLE) ? RF_NULLABLE : 0) |
                                  ((p & NP_NE) ? RF_NE : 0) | ((p & NP_PROD) ? RF_PROD : 0));
            uint8_t old = c->rflags[r] & (RF_NULLABLE | RF_NE | RF_PROD);
            if (f != old) {
                c->rflags[r] = (uint8_t)(c->rflags[r] | f);
                changed = recursive;
            }
        }
    }
    for (size_t i = 0; i < k; i++) {
        int32_t r = m[i];
        if (recursive) {
            c->rflags[r] |= RF_RECURSIVE;
            continue;
        }
        if (r == g->root || g->rules.data[r].lookahead >= 0 || c->inline_max < 0 ||
            xgr_attrs_any(&g->rules.data[r].attrs) || (c->rflags[r] & RF_HIDDEN) ||
            (c->externs && c->externs[r]))
            continue;
        int64_t e = est_node(c, g->rules.data[r].body, 0);
        c->est[r] = (int32_t)(e < EST_CAP ? e : EST_CAP);
        if (e <= c->inline_max) c->rflags[r] |= RF_INLINED;
    }
    return XGR_OK;
}

/* ---- Group inlining --------------------------------------------------------------
 * A regular sub-language that a front end split into non-recursive rules referring to
 * each other, such as a pattern's automaton emitted one rule per state
 * (`q8 ::= "." [0-9] q16 | [0-9] q13`) or the shared branches of a key trie, is larger
 * than inline_max as a whole, so each rule got its own automaton with a reference edge
 * to the next, and a first mask in such a state walked the vocabulary through the Earley
 * parser (a semver pattern: 148k tokens, 300k Earley steps, 11 ms). Such a rule joins its
 * callers' output rule instead (a *group* around one non-inlined *host*) when
 *  - it could be inlined but for its size (not recursive, not the root, no lookahead,
 *    attributes, hidden / extern / TagDispatch role), or it is inlined already (small:
 *    then it is built once in the group instead of copied into every use);
 *  - every reference to it is in tail position (nothing follows it up to the end of the
 *    referring rule's body: not inside a repetition or a lookahead) of the host or of a
 *    member of the host's group, so it is always built ending at the host's final state;
 *  - every rule it references is inlined or in the same group (a regular language: the
 *    host's automaton then reads it without reference edges; this keeps out the chains of
 *    optional properties, `p_k ::= ws "," "\"k\"" ws ":" value p_{k+1} | p_{k+1}`,
 *    whose automaton as one rule would hold a different key trie after every value);
 *  - the group's estimated size (sum of the members' own estimates, as nfa.c builds each
 *    member once per end state: shared_ref) stays within LW_GROUP_MAX.
 * The last three depend on each other, so the groups are recomputed until they no longer
 * change (a few rounds: each round can only drop rules); if they have not settled after
 * GROUP_ROUNDS, there is no group at all. */
#define GROUP_ROUNDS 8

/* Per reference occurrence in node `id` of a body whose host is hp (-1: copied, no
 * host): updates occ[] of the target. Returns 1 where nesting is too deep to tell (walk_refs
 * has refused such bodies already; then there are no groups at all). */
static int group_occ(lw_ctx *c, int32_t id, int tail, int32_t hp, int32_t *occ, int depth) {
    const xgr_grammar *g = c->g;
    if (depth > LW_MAX_DEPTH) return 1;
    const xgr_node *n = &g->nodes.data[id];
    switch (n->kind) {
    case XGR_NODE_SEQ:
        for (int32_t i = 0; i < n->count; i++)
            if (group_occ(c, g->kids.data[n->off + i], tail && i + 1 == n->count, hp, occ, depth + 1))
                return 1;
        return 0;
    case XGR_NODE_ALT:
        for (int32_t i = 0; i < n->count; i++)
            if (group_occ(c, g->kids.data[n->off + i], tail, hp, occ, depth + 1)) return 1;
        return 0;
    case XGR_NODE_REPEAT: return group_occ(c, n->a, 0, hp, occ, depth + 1);
    case XGR_NODE_REF: {
        /* occ: -1 unseen, -2 disqualified, else the one host of every occurrence */
        int32_t *o = &occ[n->a];
        if (!tail || hp < 0) *o = -2;
        else if (*o == -1) *o = hp;
        else if (*o != hp) *o = -2;
        return 0;
    }
    default: return 0; /* no references (TagDispatch targets are never candidates) */
    }
}

/* Is node `id` a finite regular language without references (no rule, TagDispatch or
 * Substring, every repetition bounded)? */
static int finite_leaf(const xgr_grammar *g, int32_t id, int depth) {
    if (depth > LW_MAX_DEPTH) return 0;
    const xgr_node *n = &g->nodes.data[id];
    switch (n->kind) {
    case XGR_NODE_EMPTY:
    case XGR_NODE_BYTES:
    case XGR_NODE_CLASS:
    case XGR_NODE_BYTE_CLASS: return 1;
    case XGR_NODE_SEQ:
    case XGR_NODE_ALT:
        for (int32_t i = 0; i < n->count; i++)
            if (!finite_leaf(g, g->kids.data[n->off + i], depth + 1)) return 0;
        return 1;
    case XGR_NODE_REPEAT: return n->max >= 0 && finite_leaf(g, n->a, depth + 1);
    default: return 0;
    }
}

/* Does node `id` reference only inlined rules, candidates (cand[t]) or leaves (leaf[t]:
 * rules that stay on their own and read a finite language without references, such as
 * the `\uXXXX` escapes of a string's character class: a member keeps a reference edge to
 * such a rule, whose size does not grow with the group, and the walk over the group's
 * automaton leaves its table only on a byte that can start one)? */
static int group_pure(lw_ctx *c, int32_t id, const uint8_t *cand, const uint8_t *elig,
                      const uint8_t *leaf, int depth) {
    const xgr_grammar *g = c->g;
    if (depth > LW_MAX_DEPTH) return 0;
    const xgr_node *n = &g->nodes.data[id];
    switch (n->kind) {
    case XGR_NODE_SEQ:
    case XGR_NODE_ALT:
        for (int32_t i = 0; i < n->count; i++)
            if (!group_pure(c, g->kids.data[n->off + i], cand, elig, leaf, depth + 1)) return 0;
        return 1;
    case XGR_NODE_REPEAT: return group_pure(c, n->a, cand, elig, leaf, depth + 1);
    case XGR_NODE_REF:
        return cand[n->a] || ((c->rflags[n->a] & RF_INLINED) && !elig[n->a]) || leaf[n->a];
    case XGR_NODE_TAG_DISPATCH: return 0;
    default: return 1;
    }
}

/* Decides the groups (c->grp) over the rules in `order` (callees first, as the SCCs were
 * finished) and marks their members RF_INLINED. */
static int group_inline(lw_ctx *c, const int32_t *order, size_t n) {
    const xgr_grammar *g = c->g;
    size_t nr = g->rules.len;
    if (c->inline_max < 0 || !nr) return XGR_OK;
    uint8_t *elig = xgr_calloc(nr, 1), *cand = xgr_calloc(nr, 1), *leaf = xgr_calloc(nr, 1);
    int32_t *occ = xgr_malloc(nr * sizeof *occ), *prev = xgr_malloc(nr * sizeof *prev);
    int64_t *size = xgr_calloc(nr, sizeof *size);
    c->grp = xgr_malloc(4 * nr * sizeof *c->grp);
    int rc = XGR_OK;
    if (!elig || !cand || !leaf || !occ || !prev || !size || !c->grp) {
        rc = XGR_ERR_NOMEM;
        goto done;
    }
    c->grp_stamp = c->grp + nr;
    c->grp_state = c->grp + 2 * nr;
    c->grp_end = c->grp + 3 * nr;
    memset(c->grp_stamp, 0, nr * sizeof *c->grp_stamp); /* nfa_builds starts at 1 */
    int any = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t r = order[i];
        uint8_t f = c->rflags[r];
        elig[r] = !(f & (RF_RECURSIVE | RF_HIDDEN | RF_TD_TARGET)) && r != g->root &&
                  g->rules.data[r].lookahead < 0 && !xgr_attrs_any(&g->rules.data[r].attrs) &&
                  !(c->externs && c->externs[r]) && (f & RF_PROD);
        any |= elig[r];
        /* a leaf stays its own rule (neither copied nor a member: referenced elsewhere
         * than in tail position), up to LW_LEAF_MAX states */
        leaf[r] = elig[r] && !(f & RF_INLINED) && c->est[r] <= LW_LEAF_MAX &&
                  finite_leaf(g, g->rules.data[r].body, 0);
    }
    for (size_t r = 0; r < nr; r++) c->grp[r] = -1;
    if (!any) goto done;
    int settled = 0, too_deep = 0;
    for (int round = 0; round < GROUP_ROUNDS && !settled; round++) {
        /* candidates, callees first: eligible and referencing only inlined rules, members
         * of the last round's groups, or (first round) other candidates */
        for (size_t i = 0; i < n; i++) {
            int32_t r = order[i];
            cand[r] = elig[r] && (round == 0 || c->grp[r] >= 0 || (c->rflags[r] & RF_INLINED)) &&
                      group_pure(c, g->rules.data[r].body, cand, elig, leaf, 0);
        }
        /* hosts, callers first */
        for (size_t r = 0; r < nr; r++) {
            occ[r] = -1;
            size[r] = 0;
            prev[r] = c->grp[r];
            c->grp[r] = -1;
        }
        for (size_t i = n; i-- > 0;) {
            int32_t r = order[i];
            const xgr_rule *ru = &g->rules.data[r];
            if (cand[r] && occ[r] >= 0 && size[occ[r]] + c->est[r] <= LW_GROUP_MAX) {
                c->grp[r] = occ[r];
                size[occ[r]] += c->est[r];
            }
            /* an ordinary inlined rule is copied wherever it is used: no host */
            int32_t hp = c->grp[r] >= 0 ? c->grp[r] : (c->rflags[r] & RF_INLINED) ? -1 : r;
            if (group_occ(c, ru->body, 1, hp, occ, 0) ||
                (ru->lookahead >= 0 && group_occ(c, ru->lookahead, 0, -1, occ, 0))) {
                too_deep = 1;
                break;
            }
            if (ru->attrs.hidden_kind) { /* parse/captures.c runs these on their own */
                if (ru->attrs.hidden_body >= 0) occ[ru->attrs.hidden_body] = -2;
                if (ru->attrs.hidden_marker >= 0) occ[ru->attrs.hidden_marker] = -2;
            }
        }
        if (too_deep) break; /* settled stays 0: no groups */
        settled = 1;
        for (size_t r = 0; r < nr && settled; r++)
            if (c->grp[r] != prev[r]) settled = 0;
    }
    /* settled: every member references only inlined rules or members */
    for (size_t r = 0; r < nr; r++) {
        if (!settled) c->grp[r] = -1;
        if (c->grp[r] >= 0) c->rflags[r] |= RF_INLINED;
    }
done:
    free(elig);
    free(cand);
    free(leaf);
    free(occ);
    free(prev);
    free(size);
    return rc;
}

/* ---- The copy budget ---------------------------------------------------------------
 * An inlined rule is copied into every rule that references it, and each copy's states
 * are states of its host: their mask-cache entries are keyed by the host, so a first
 * visit of each copy walks the vocabulary again. A value type that a long object uses
 * for every property shows it: Github_ultra o46322's `defs_monetary` (a number with
 * bounded digits, ~63 states) is referenced by 111 of 143 optional properties; each
 * copy's digit states were first visits (5-6 tokens of ~0.3 ms per property: 275 of
 * the 50-schema sample's 441 tokens over 200 us), and the copies were a third of its
 * automaton work. Such a rule keeps its own automaton when its copies would pass
 * LW_COPY_BUDGET states (references in reachable bodies x estimate); its states are
 * then shared by every use, and by other grammars through the cross-grammar cache.
 * Only reference-free rules of more than LW_COPY_SMALL states qualify:
 *  - a JSON string (`string` with `char`, ~34 states) kept as its own rule leaves every
 *    token holding a quote open in its in-string state, and deciding those against each
 *    caller in a long optional-property chain cost 90-140 ms per property (Snowplow
 *    sp_345's timestamps) where the inlined copy costs ~1 ms once;
 *  - a rule with references may be what keeps a pattern's rule-per-state chain one
 *    regular group (group_inline: members reference only inlined rules, members or
 *    finite leaves); without sp_345's `char_fbb...` inlined, its semver pattern became a
 *    chain of rules and its last token cost 100 ms.
 * Runs before group_inline, which then sees such a rule as any other non-inlined rule. */
static int copy_budget(lw_ctx *c, const int32_t *reach, size_t nreach, const lw_i32v *refs,
                       const int32_t *roff, const int32_t *rlen) {
    size_t nr = c->g->rules.len;
    if (c->inline_max < 0 || !nr) return XGR_OK;
    int32_t *uses = xgr_calloc(nr, sizeof *uses);
    if (!uses) return XGR_ERR_NOMEM;
    for (size_t i = 0; i < nreach; i++) {
        int32_t r = reach[i];
        for (int32_t j = 0; j < rlen[r]; j++) {
            int32_t t = refs->data[roff[r] + j];
            if (uses[t] < INT32_MAX) uses[t]++;
        }
    }
    for (size_t i = 0; i < nreach; i++) {
        int32_t r = reach[i];
        if ((c->rflags[r] & RF_INLINED) && rlen[r] == 0 && c->est[r] > LW_COPY_SMALL &&
            (int64_t)uses[r] * c->est[r] > LW_COPY_BUDGET)
            c->rflags[r] &= (uint8_t)~RF_INLINED;
    }
    free(uses);
    return XGR_OK;
}

typedef struct {
    int32_t r, i;
} tj_frame;

/* Passes 1-3 over IR rules: RF_REACH marks rules reachable from the root through
 * bodies and lookaheads (every reachable node is validated), then SCCs are finished
 * callees-first. Afterwards node properties are memoised. */
int lw_analyze(lw_ctx *c) {
    const xgr_grammar *g = c->g;
    size_t nr = g->rules.len;
    if (g->root < 0 || (size_t)g->root >= nr)
        return xgr_fail(XGR_ERR_SEMANTIC, "grammar has no root rule");
    int rc = XGR_OK;
    lw_i32v refs = {0}, stk = {0}, order = {0};
    XGR_VEC(tj_frame) frames = {0};
    int32_t *roff = xgr_malloc(nr * sizeof *roff);
    int32_t *rlen = xgr_calloc(nr, sizeof *rlen);
    int32_t *queue = xgr_malloc(nr * sizeof *queue);
    int32_t *idx = xgr_malloc(nr * sizeof *idx);
    int32_t *low = xgr_malloc(nr * sizeof *low);
    uint8_t *onstk = xgr_calloc(nr, 1);
    c->rflags = xgr_calloc(nr, 1);
    c->rwide = xgr_calloc(nr, 1);
    c->est = xgr_calloc(nr, sizeof *c->est);
    c->nprops = xgr_calloc(g->nodes.len, 1);
    c->nest = xgr_malloc((g->nodes.len ? g->nodes.len : 1) * sizeof *c->nest);
    if (c->nest) memset(c->nest, 0xff, g->nodes.len * sizeof *c->nest);
    c->nwide = xgr_calloc(g->nodes.len ? g->nodes.len : 1, 1);
    if (!c->nest || !c->nwide || !roff || !rlen || !queue || !idx || !low || !onstk || !c->rflags || !c->est ||
        !c->nprops || !c->rwide) {
        rc = XGR_ERR_NOMEM;
        goto done;
    }

    /* 1. Reachability from the root through bodies and lookaheads (a lookahead's rules
     * are needed by the lookahead rule built for it). */
    size_t qh = 0, qt = 0;
    queue[qt++] = g->root;
    c->rflags[g->root] |= RF_REACH;
    while (qh < qt) {
        int32_t r = queue[qh++];
        const xgr_rule *ru = &g->rules.data[r];
        if (ru->body < 0) {
            rc = xgr_fail(XGR_ERR_SEMANTIC, "rule '%s' is referenced but never defined",
                          xgr_ir_rule_name(g, r));
            goto done;
        }
        roff[r] = (int32_t)refs.len;
        if ((rc = walk_refs(c, ru->body, &refs, 0))) goto done;
        rlen[r] = (int32_t)refs.len - roff[r];
        if (ru->lookahead >= 0 && (rc = walk_refs(c, ru->lookahead, &refs, 1))) goto done;
        if (ru->attrs.hidden_kind && ru->attrs.hidden_body >= 0 && ru->attrs.hidden_marker >= 0) {
            c->rflags[ru->attrs.hidden_body] |= RF_HIDDEN;
            c->rflags[ru->attrs.hidden_marker] |= RF_HIDDEN;
            if (XGR_VEC_PUSH(refs, ru->attrs.hidden_body) ||
                XGR_VEC_PUSH(refs, ru->attrs.hidden_marker)) {
                rc = XGR_ERR_NOMEM;
                goto done;
            }
        }
        for (size_t i = (size_t)roff[r]; i < refs.len; i++) {
            int32_t t = refs.data[i];
            if (!(c->rflags[t] & RF_REACH)) {
                c->rflags[t] |= RF_REACH;
                queue[qt++] = t;
            }
        }
        refs.len = (size_t)roff[r] + (size_t)rlen[r];
    }

    /* 2-3. Tarjan's SCCs over body references (iterative: rule chains can be long).
     * SCCs pop callees-first, so each is finished as soon as it is found. */
    for (size_t i = 0; i < nr; i++) idx[i] = -1;
    int32_t counter = 0;
    for (size_t qi = 0; qi < qt; qi++) {
        int32_t v0 = queue[qi];
        if (idx[v0] >= 0) continue;
        idx[v0] = low[v0] = counter++;
        onstk[v0] = 1;
        if (XGR_VEC_PUSH(stk, v0) || XGR_VEC_PUSH(frames, ((tj_frame){v0, 0}))) {
            rc = XGR_ERR_NOMEM;
            goto done;
        }
        while (frames.len) {
            tj_frame *f = &frames.data[frames.len - 1];
            int32_t v = f->r;
            if (f->i < rlen[v]) {
                int32_t w = refs.data[roff[v] + f->i++];
                if (idx[w] < 0) {
                    idx[w] = low[w] = counter++;
                    onstk[w] = 1;
                    if (XGR_VEC_PUSH(stk, w) || XGR_VEC_PUSH(frames, ((tj_frame){w, 0}))) {
                        rc = XGR_ERR_NOMEM;
                        goto done;
                    }
                } else if (onstk[w] && idx[w] < low[v]) {
                    low[v] = idx[w];
                }
                continue;
            }
            frames.len--;
            if (low[v] == idx[v]) {
                size_t b = stk.len;
                do b--;
                while (stk.data[b] != v);
                for (size_t j = b; j < stk.len; j++) onstk[stk.data[j]] = 0;
                if ((rc = finish_scc(c, stk.data + b, stk.len - b, &refs, roff, rlen)))
                    goto done;
                for (size_t j = b; j < stk.len; j++)
                    if (XGR_VEC_PUSH(order, stk.data[j])) {
                        rc = XGR_ERR_NOMEM;
                        goto done;
                    }
                stk.len = b;
            }
            if (frames.len) {
                int32_t u = frames.data[frames.len - 1].r;
                if (low[v] < low[u]) low[u] = low[v];
            }
        }
    }
    c->memo_on = 1;
    rc = copy_budget(c, queue, qt, &refs, roff, rlen);
    if (!rc) rc = group_inline(c, order.data, order.len);
done:
    free(roff);
    free(rlen);
    free(queue);
    free(idx);
    free(low);
    free(onstk);
    XGR_VEC_FREE(refs);
    XGR_VEC_FREE(stk);
    XGR_VEC_FREE(order);
    XGR_VEC_FREE(frames);
    return rc;
}
