/* Runtime semantics of rule attributes (ir.h xgr_rule_attrs) in the Earley parser.
 *
 * Budgets (max_chars, max_tokens) hold per occurrence of a rule. An occurrence predicted
 * at row o may consume code points up to row_cp[o] + max_chars (a hard limit), and once it
 * has touched max_tokens tokens (accept_string's text counts none) it ends at the first
 * position it can, as upstream xgrammar's soft token budget; both become absolute
 * deadlines. An item carries a budget context
 * (xgr_item.bud): the tightest deadlines of its rule's occurrence and of every occurrence
 * it was predicted in (nested budgets all apply). A row drops the items whose deadlines
 * its position has passed, and (hard budgets, parse/need.h) those whose rule can no longer
 * end within them: the context's effective deadlines (ceff, jeff) take off what the rules
 * above the item, up to each budget, still need once it returns, and an item lives while
 * the row's count plus its own state's need fits. Contexts are interned in the parser's
 * append-only table.
 *
 * max_json_chars counts decoded JSON-string characters instead (row_jc): a global count
 * driven by a small escape-state machine over the bytes (xgr_json_step), so a JSON escape
 * is the one character it decodes to and a surrogate-pair escape one code point, as
 * JSON Schema's maxLength (Python's json / jsonschema) counts. A character is counted at
 * the first byte where every way to go on counts it: a UTF-8 lead byte; an escape at its
 * `\`, except right after a high-surrogate escape (\uD800-\uDBFF), where the escape is
 * counted only once its bytes rule out a low surrogate (\uDC00-\uDFFF: the pair's second
 * half, 0). The count of a prefix is thus the least count of any text it starts, so a
 * deadline drops exactly the rows no continuation can bring back within the budget.
 * Backslashes are read as escapes everywhere, which is right only inside JSON strings:
 * the attribute is meant for a JSON string's body (between its quotes), where the state
 * is reset on entry (a string's body starts outside an escape).
 *
 * Lazy rules end at the first opportunity: once an occurrence (rule, origin) completes in
 * a row, its items neither scan from that row on nor appear in later rows.
 *
 * Captures: each row lists the captured occurrences that completed in it (a span from
 * the origin row to that row); the matcher turns them into (label, bytes) events.
 *
 * Internal header. */
#ifndef XGR_RUNTIME_ATTRS_H
#define XGR_RUNTIME_ATTRS_H

#include "earley.h"

#define XGR_NO_DEADLINE INT32_MAX

/* Escape states of xgr_json_step (parse/attrs.c), per row in row_js. */
enum {
    XGR_JS_TEXT = 0, /* outside an escape */
    XGR_JS_HIGH = 1, /* right after a \uD800-\uDBFF escape */
    XGR_JS_BS = 2,   /* after `\` (counted) */
    XGR_JS_BS_H = 3, /* after `\` right after a high surrogate (not counted yet) */
    XGR_JS_U = 4,    /* after `\u` (counted) */
    XGR_JS_U_H = 5,  /* after `\u` right after a high surrogate (not counted yet) */
    XGR_JS_UD = 6,   /* after `\ud` (counted) */
    XGR_JS_UD_H = 7, /* after `\ud` right after a high surrogate (not counted yet) */
    XGR_JS_SKIP = 8  /* + 2 * (k - 1) + high: k hex digits left (1..3), high: the escape
                      * is a high surrogate */
};

/* The escape state after `byte` read in state `s`; *inc = the decoded characters this
 * byte settles (0 or 1). Hex digits are not checked: the grammar does. */
static inline uint8_t xgr_json_step(uint8_t s, uint8_t byte, int32_t *inc) {
    uint8_t l = byte | 0x20; /* (ASCII letters to lower case) */
    *inc = 0;
    switch (s) {
    case XGR_JS_TEXT:
    case XGR_JS_HIGH:
        if (byte == '\\') {
            *inc = s == XGR_JS_TEXT;
            return s == XGR_JS_TEXT ? XGR_JS_BS : XGR_JS_BS_H;
        }
        *inc = (byte & 0xC0) != 0x80;
        return XGR_JS_TEXT;
    case XGR_JS_BS:
        return byte == 'u' ? XGR_JS_U : XGR_JS_TEXT;
    case XGR_JS_BS_H:
        if (byte == 'u') return XGR_JS_U_H;
        *inc = 1;
        return XGR_JS_TEXT;
    case XGR_JS_U:
        return l == 'd' ? XGR_JS_UD : XGR_JS_SKIP + 4; /* (3 left) */
    case XGR_JS_U_H:
        if (l == 'd') return XGR_JS_UD_H;
        *inc = 1;
        return XGR_JS_SKIP + 4;
    case XGR_JS_UD:
    case XGR_JS_UD_H: {
        int high = byte == '8' || byte == '9' || l == 'a' || l == 'b';
        if (s == XGR_JS_UD_H && !(l >= 'c' && l <= 'f')) *inc = 1; /* not the low half */
        return (uint8_t)(XGR_JS_SKIP + 2 + high); /* (2 left) */
    }
    default: {
        int k = (s - XGR_JS_SKIP) / 2 + 1, high = (s - XGR_JS_SKIP) & 1;
        if (k == 1) return high ? XGR_JS_HIGH : XGR_JS_TEXT;
        return (uint8_t)(XGR_JS_SKIP + 2 * (k - 2) + high);
    }
    }
}

/* Sets up p's attribute state for p->fsm (called by xgr_parser_init). */
int xgr_attrs_init(xgr_parser *p);
/* Resets the per-row attribute state to no rows (clear_rows). */
void xgr_attrs_clear(xgr_parser *p);
/* Turns on uniqueItems checks (parse/unique.h) when p's grammar has unique rules, and
 * clears p's rows (start it again). For a matcher's own parser only. */
int xgr_parser_unique_on(xgr_parser *p);
/* Budget context of an occurrence of `rule` predicted in the row under construction
 * inside context `parent`, by an item that becomes `ret` once the occurrence has returned
 * (NULL: none, the start); -1 on OOM. */
int32_t xgr_bud_enter(xgr_parser *p, int32_t rule, int32_t parent, const xgr_item *ret);

/* What a repetition item `it` of rule r still needs: its missing minimum count times the
 * least of its child (per_child: that rule's row of need.h's rule_cp or rule_jc). */
static inline int32_t xgr_need_repeat(const xgr_fsm *f, xgr_item it, int32_t r,
                                      const int32_t *per_child) {
    int64_t k = (int64_t)f->repeat_min[r] - it.count, v;
    if (k <= 0) return 0;
    v = k * per_child[f->repeat_child[r]];
    return v >= XGR_NEED_INF ? XGR_NEED_INF : (int32_t)v;
}
/* Code points item `it` still needs to end its rule (parse/need.h; 0 without a table). */
static inline int32_t xgr_need_cp(const xgr_fsm *f, xgr_item it) {
    const xgr_fsm_need *n = f->need;
    if (!n) return 0;
    int32_t r = f->state_rule[it.state];
    if (f->rule_kind[r] == XGR_RULE_REPEAT) return xgr_need_repeat(f, it, r, n->rule_cp);
    return n->cp[it.state];
}
/* Decoded JSON-string characters item `it` still needs from escape state js (js < 0:
 * unknown, the least over them). */
static inline int32_t xgr_need_jc(const xgr_fsm *f, xgr_item it, int js) {
    const xgr_fsm_need *n = f->need;
    if (!n) return 0;
    int32_t r = f->state_rule[it.state];
    if (f->rule_kind[r] == XGR_RULE_REPEAT) return xgr_need_repeat(f, it, r, n->rule_jc);
    return js < 0 ? n->jc_min[it.state] : n->jc[(size_t)it.state * XGR_NEED_JS + js];
}
/* The least need of state s (decoded characters) over the escape states in `ex`. */
static inline int32_t xgr_need_jc_exit(const xgr_fsm_need *n, int32_t s, uint16_t ex) {
    int32_t best = XGR_NEED_INF;
    for (int j = 0; j < XGR_NEED_JS; j++)
        if ((ex >> j & 1) && n->jc[(size_t)s * XGR_NEED_JS + j] < best)
            best = n->jc[(size_t)s * XGR_NEED_JS + j];
    return best;
}
/* What item `ret`, waiting on `rule` entered in escape state js, needs once the rule has
 * returned, in decoded characters from the least of the escape states it may end in. */
static inline int32_t xgr_need_jc_after(const xgr_fsm *f, xgr_item ret, int32_t rule, int js) {
    const xgr_fsm_need *n = f->need;
    if (!n) return 0;
    if (f->rule_attrs[rule].max_json_chars >= 0) js = XGR_JS_TEXT;
    uint16_t ex = n->rule_exit[(size_t)rule * XGR_NEED_JS + js];
    if (f->rule_kind[f->state_rule[ret.state]] == XGR_RULE_REPEAT || !ex)
        return xgr_need_jc(f, ret, -1);
    return xgr_need_jc_exit(n, ret.state, ex);
}
/* Does item `it`'s context allow it in the row under construction: its position within
 * the hard budgets, and (parse/need.h) what it still needs within what they leave? */
static inline int xgr_bud_alive(const xgr_parser *p, xgr_item it) {
    const xgr_budget *b = &p->buds.data[it.bud];
    if (p->cur_cp > b->cdl || p->cur_jc > b->jdl) return 0;
    if (b->ceff != XGR_NO_DEADLINE &&
        (int64_t)p->cur_cp + xgr_need_cp(p->fsm, it) > (int64_t)b->ceff)
        return 0;
    return b->jeff == XGR_NO_DEADLINE ||
           (int64_t)p->cur_jc + xgr_need_jc(p->fsm, it, p->cur_js) <= (int64_t)b->jeff;
}
/* Has the token budget of context `bud` run out at the row under construction? Then every
 * occurrence in it ends where it first completes (from then on, like a lazy one). */
static inline int xgr_bud_expired(const xgr_parser *p, int32_t bud) {
    int32_t tdl = p->buds.data[bud].tdl, tc = p->cur_tk >> 1;
    return tc > tdl || (tc == tdl && !(p->cur_tk & 1));
}
/* The edgeless state a forced close of `rule` ends in (ir.h forced_body: the target of
 * its start state's reference to the body; not final), or -1. */
static inline int32_t xgr_forced_state(const xgr_fsm *f, const xgr_rule_attrs *a, int32_t rule) {
    if (a->forced_body < 0) return -1;
    int32_t s = f->rule_start[rule];
    for (int32_t e = f->edge_begin[s]; e < f->edge_begin[s + 1]; e++)
        if (f->edges[e].ref == a->forced_body) return f->edges[e].target;
    return -1;
}
/* Is item `it`, in its rule's forced-close state, at a position (code points cp, token
 * position tk as in row_tk) where its budget is spent: no code point left, or the token
 * budget expired (xgr_bud_expired)? Only then does the rule end there, without its
 * marker (upstream xgrammar's forced close). */
static inline int xgr_forced_spent(const xgr_parser *p, xgr_item it, int32_t cp, int32_t tk) {
    if (!it.bud) return 0;
    const xgr_budget *b = &p->buds.data[it.bud];
    int32_t tc = tk >> 1;
    return cp >= b->cdl || tc > b->tdl || (tc == b->tdl && !(tk & 1));
}
/* Is item `it` of `rule` in its rule's forced-close state? */
static inline int xgr_forced_item(const xgr_parser *p, int32_t rule, xgr_item it) {
    return p->attrs && p->attrs[rule].forced_body >= 0 &&
           it.state == xgr_forced_state(p->fsm, &p->attrs[rule], rule);
}
/* Has the lazy occurrence (rule, origin) completed in a row in [origin, upto]? */
int xgr_lazy_closed(const xgr_parser *p, int32_t rule, int32_t origin, int32_t upto);
/* Has the occurrence that budget context `bud` was entered for (xgr_budget.own_rule)
 * ended in a row up to `upto`? Then its items are dead. */
static inline int xgr_bud_dead(const xgr_parser *p, int32_t bud, int32_t upto) {
    const xgr_budget *b = &p->buds.data[bud];
    return b->own_rule >= 0 && xgr_lazy_closed(p, b->own_rule, b->own_origin, upto);
}
/* Is item `it` (of `rule`) dead at rows up to `upto`: its lazy occurrence (or one with a
 * token budget) completed, or the forced-close occurrence its context belongs to ended? */
static inline int xgr_item_ended(const xgr_parser *p, xgr_item it, int32_t rule, int32_t upto) {
    if (!p->lazy || it.origin < 0) return 0;
    if ((p->attrs[rule].lazy || it.bud) && xgr_lazy_closed(p, rule, it.origin, upto)) return 1;
    return it.bud && xgr_bud_dead(p, it.bud, upto);
}
/* The same, also counting the row under construction. */
int xgr_lazy_closed_now(const xgr_parser *p, int32_t rule, int32_t origin);
/* Records that lazy occurrence (rule, origin) completed in the row under construction. */
int xgr_lazy_note(xgr_parser *p, int32_t rule, int32_t origin);
/* Does a completion of `rule` went through its suffix / stop marker (ir.h hidden_kind)
 * when its item is at `state`? A TagDispatch rule's free text may also end without one:
 * its marker is the trigger, after which the rule sits in its edgeless sink state. */
static inline int xgr_marker_seen(const xgr_fsm *f, int32_t rule, int32_t state) {
    return !f->rule_dispatch[rule] || f->edge_begin[state] == f->edge_begin[state + 1];
}
/* Is the completion of item `it` (of `rule`) in row cur_row a capture event: a captured
 * rule's non-empty occurrence, or a suffix / stop rule that went through its marker (that
 * one also when empty: a marker rule right after a trigger)? */
static inline int xgr_capture_wanted(const xgr_parser *p, int32_t rule, xgr_item it,
                                     int32_t cur_row) {
    const xgr_rule_attrs *a = &p->attrs[rule];
    if (a->hidden_kind && xgr_marker_seen(p->fsm, rule, it.state)) return 1;
    return it.origin != cur_row && a->capture_off >= 0;
}
/* Records that captured occurrence (rule, origin) completed in the row under
 * construction, its item at `state`. */
int xgr_capture_note(xgr_parser *p, int32_t rule, int32_t origin, int32_t state);
/* Ends the attribute state of the row under construction (push_row). */
int xgr_attrs_push_row(xgr_parser *p);
/* Copies the attribute state of src into dst (xgr_parser_copy). */
int xgr_attrs_copy(xgr_parser *dst, const xgr_parser *src);
void xgr_attrs_free(xgr_parser *p);

/* Capture events of rows 0 .. last (see xgr_matcher_captures for the format);
 * parse/captures.c. */
int xgr_parser_captures(const xgr_parser *p, int dedup, char **out, size_t *out_len);

/* Remaining budget at the last row over its items: characters (*chars: code points, or
 * decoded JSON-string characters, each at least a byte) and tokens (*tokens) before some
 * item's deadline passes, XGR_NO_DEADLINE when no item has one. */
void xgr_parser_budget_left(const xgr_parser *p, int32_t *chars, int32_t *tokens);

/* Whether some item of the last row is inside a budgeted occurrence (its budget context is
 * not the root's): 0 for a grammar without budgets. Where none is, what the row allows
 * depends on its items alone, as in a grammar without budgets. */
int xgr_parser_budget_open(const xgr_parser *p);

/* Characters left at the last row before some item's effective deadline (xgr_budget ceff /
 * jeff: what the rules still need already taken off, not the item's own need), the least
 * over both units; XGR_NO_DEADLINE when no item has one. */
int32_t xgr_parser_eff_left(const xgr_parser *p);

/* The tightest token deadline (absolute token count) over the last row's items; a
 * deadline saturated by a huge max_tokens reads INT32_MAX; -1 when no item has one. */
int32_t xgr_parser_token_deadline(const xgr_parser *p);

/* The sampling temperature at the last row: over the scannable items whose budget is not
 * spent, the temperature of the innermost open rule that has one (through the rules each
 * was predicted in); *has = 0 when none has one, else *out is the largest and *conflict
 * says whether they differ. */
int xgr_parser_temperature(const xgr_parser *p, int *has, float *out, int *conflict);

#endif
