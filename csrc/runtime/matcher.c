/* GrammarMatcher: parser state per request, token acceptance, rollback and bitmask
 * filling from the mask cache plus exact checks of uncertain tokens. */
#include "../mask/compiled.h"
#include "../mask/mask_cache.h"
#include "../common/token_marker.h"
#include "../parse/attrs.h"
#include "../parse/unique.h"
#include "../parse/unique_search.h"
#include "cover.h"
#include "lazy_tokens.h"
#include "tail_memo.h"
#include "token_class.h"

typedef struct {
    int32_t rows_before; /* parser rows before this step */
    int32_t stop;        /* the step accepted a stop token */
} step_rec;

struct xgr_matcher {
    xgr_compiled *c;
    xgr_parser parser;
    xgr_mask_scratch scratch; /* builds mask-cache entries on first use */
    int32_t *stop_ids;
    int32_t n_stop;
    /* terminate_without_stop, as upstream xgrammar's: is_terminated reports can_end and
     * stop tokens are never accepted, but input the grammar allows goes on being
     * accepted once it may end (the mask still offers the stop tokens there, as in the
     * default mode). */
    int terminate_without_stop;
    int32_t max_rollback;
    int terminated; /* a stop token was accepted: nothing more is accepted */
    XGR_VEC(step_rec) steps;
    uint32_t *tmp_bits;     /* row_words */
    uint32_t *checked_bits; /* row_words */
    XGR_VEC(int32_t) states;
    XGR_VEC(int32_t) lims;   /* per key: tokens longer than this need an exact check */
    XGR_VEC(int32_t) extra;  /* tokens a key's length limit sent to the exact check */
    /* uniqueItems: the end-byte tokens this fill's completed-element check judged on their
     * text under every open array (in uq->one's order), which the search then skips */
    XGR_VEC(int32_t) uq_safe;
    XGR_VEC(const xgr_mask_entry *) ents; /* fill_states: per key its entry, then its base */
    /* The row of the last fill that did parser work (exact checks, several entries), for
     * the last parser row it was computed at: its items, with every origin at or past
     * that row written as -1 ("this row"). A fill whose last parser row holds the same
     * items reuses it: the rows their origins point to are the same rows, unchanged
     * (rollback and reset drop the memo), so every verdict would be the same. Inside a
     * key or a string value of a wide object, the parser comes back to the same items
     * token after token, and the exact checks of a wide row cost hundreds of
     * microseconds per fill. */
    uint32_t *memo_row; /* row_words, allocated on first use */
    XGR_VEC(xgr_item) memo_items;
    int memo_ok, memo_need_apply;
    /* Verdicts of exact checks (check_uncertain), kept while the last parser row holds the
     * same items up to the counters of bounded repetitions (vm_count): inside a string
     * with maxLength, successive fills differ only by that counter, so the whole-row memo
     * above misses, yet the tokens that close the string and go on in a wide object
     * (`1","next_key"`) get the same verdict at each step. A verdict holds at any counter
     * k >= min of a repetition whose child cannot be empty when the token has fewer bytes
     * than max - k (each repetition the token completes consumes one of its bytes): so a
     * token is read from the memo only when shorter than vm_room, the smallest such room
     * of every fill since the memo was started. */
    uint32_t *vm_known, *vm_acc; /* row_words each, from the first exact check (vm_alloc) */
    XGR_VEC(int32_t) vm_ids;     /* the tokens in vm_known, to clear it */
    XGR_VEC(xgr_item) vm_items;  /* the row the verdicts hold for (vm_item) */
    int32_t vm_room;
    int vm_ok;     /* vm_items is valid: the rows its origins point to are unchanged */
    int vm_active; /* this fill reads and writes the verdicts */
    xgr_tail_memo tail;        /* verdicts of token tails by parser row (tail_memo.h) */
    /* check_uncertain, per depth: the tail memo's ids of the row (tail_id), exact and
     * collapsed, and the collapsed key's room */
    XGR_VEC(int32_t) tail_rid, tail_cid, tail_room;
    int tail_stale;            /* rows it knows may have changed: clear before use */
    int32_t worked; /* this fill walked tokens in the parser, or merged several entries */
    uint32_t *class_bits; /* token classes: 2 * row_words (members, scratch), on first use */
    xgr_cover cover;      /* collect_states: items another item's entry covers (cover.h) */
    /* Lazy rules (lazy_tokens.h): the grammar's token lists (compiled.h xgr_lazy_tables),
     * fetched at the first fill that needs them */
    const xgr_lazy_tables *lazy;
    /* uniqueItems (parse/unique.h): the grammar's token lists (compiled.h xgr_uq_tables),
     * fetched at the first fill that needs them */
    const xgr_uq_tables *uq;
    /* uniqueItems over elements that can run out (parse/unique_search.h): the array's text,
     * an element's text with room for a token and a search, and the earlier elements'
     * values */
    xgr_uqs uqs;
};

#ifdef XGR_STATS
long xgr_stat_checks = 0;
#endif
static inline void set_bit(uint32_t *w, int32_t id) { w[id >> 5] |= 1u << (id & 31); }
static inline void clear_bit(uint32_t *w, int32_t id) { w[id >> 5] &= ~(1u << (id & 31)); }
static inline int get_bit(const uint32_t *w, int32_t id) { return (w[id >> 5] >> (id & 31)) & 1; }

/* Is `id` one of the grammar's token-level terminals (common/token_marker.h)? */
static int is_token_term(const xgr_compiled *c, int32_t id) {
    int32_t lo = 0, hi = c->n_token_ids;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (c->token_ids[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < c->n_token_ids && c->token_ids[lo] == id;
}

static int is_stop(const xgr_matcher *m, int32_t id) {
    for (int32_t i = 0; i < m->n_stop; i++)
        if (m->stop_ids[i] == id) return 1;
    return 0;
}

void xgr_matcher_free(xgr_matcher *m) {
    if (!m) return;
    xgr_parser_free(&m->parser);
    xgr_mask_scratch_free(&m->scratch);
    free(m->stop_ids);
    free(m->tmp_bits);
    free(m->checked_bits);
    XGR_VEC_FREE(m->steps);
    XGR_VEC_FREE(m->states);
    XGR_VEC_FREE(m->lims);
    XGR_VEC_FREE(m->extra);
    XGR_VEC_FREE(m->uq_safe);
    XGR_VEC_FREE(m->ents);
    free(m->memo_row);
    free(m->class_bits);
    xgr_uqs_free(&m->uqs);
    XGR_VEC_FREE(m->memo_items);
    free(m->vm_known);
    free(m->vm_acc);
    XGR_VEC_FREE(m->vm_ids);
    XGR_VEC_FREE(m->vm_items);
    xgr_tail_memo_free(&m->tail);
    XGR_VEC_FREE(m->tail_rid);
    XGR_VEC_FREE(m->tail_cid);
    XGR_VEC_FREE(m->tail_room);
    xgr_cover_free(&m->cover);
    xgr_compiled_release(m->c);
    free(m);
}

static int start_root(xgr_matcher *m) {
    const xgr_fsm *f = m->c->fsm;
    xgr_item root = {f->rule_start[f->root], 0, 0, 0};
    m->terminated = 0;
    m->memo_ok = 0;
    m->vm_ok = 0;
    m->tail_stale = 1;
    m->steps.len = 0;
    return xgr_parser_start(&m->parser, root);
}

static xgr_matcher *alloc_matcher(xgr_compiled *c, size_t n_stop) {
    xgr_matcher *m = xgr_calloc(1, sizeof *m);
    if (!m) return NULL;
    xgr_compiled_retain(c);
    m->c = c;
    /* (tmp_bits / checked_bits: at the first fill that needs them, scratch_bits) */
    m->stop_ids = xgr_malloc((n_stop ? n_stop : 1) * sizeof *m->stop_ids);
    /* Room for a typical tool call's bytes up front: growing these a doubling at a time
     * during the first tokens costs a cold realloc each. */
    if (!m->stop_ids ||
        xgr_parser_init(&m->parser, c->fsm, c->opts.max_row_items) ||
        xgr_parser_unique_on(&m->parser) ||
        XGR_VEC_RESERVE(m->parser.items, 1024) || XGR_VEC_RESERVE(m->parser.row_begin, 256) ||
        XGR_VEC_RESERVE(m->steps, 64) || xgr_mask_scratch_init(&m->scratch, c)) {
        xgr_matcher_free(m);
        return NULL;
    }
    m->parser.ref_begin = c->ref_begin;
    m->parser.leo_rules = c->rule_leo;
    m->parser.max_work = c->opts.max_step_work;
    return m;
}

int xgr_matcher_new(xgr_compiled *c, const int32_t *override_stop, size_t n_override,
                    int use_override, int terminate_without_stop, int32_t max_rollback,
                    xgr_matcher **out) {
    if (!c || !out) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_matcher_new: NULL argument");
    *out = NULL;
    const struct xgr_vocab *v = c->vocab;
    const int32_t *stops = use_override ? override_stop : v->stop_ids;
    size_t n_stop = use_override ? n_override : (size_t)v->n_stop;
    for (size_t i = 0; i < n_stop; i++)
        if (stops[i] < 0 || stops[i] >= v->vocab_size)
            return xgr_fail(XGR_ERR_INVALID_ARG, "stop token id %d out of range [0, %d)",
                            (int)stops[i], (int)v->vocab_size);
    xgr_matcher *m = alloc_matcher(c, n_stop);
    if (!m) return XGR_ERR_NOMEM;
    for (size_t i = 0; i < n_stop; i++)
        if (!is_stop(m, stops[i])) m->stop_ids[m->n_stop++] = stops[i];
    m->terminate_without_stop = terminate_without_stop ? 1 : 0;
    m->max_rollback = max_rollback;
    int rc = start_root(m);
    if (rc) {
        xgr_matcher_free(m);
        return rc;
    }
    *out = m;
    return XGR_OK;
}

int xgr_matcher_fork(const xgr_matcher *src, xgr_matcher **out) {
    if (!src || !out) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_matcher_fork: NULL argument");
    xgr_matcher *m = alloc_matcher(src->c, (size_t)src->n_stop);
    if (!m) return XGR_ERR_NOMEM;
    memcpy(m->stop_ids, src->stop_ids, (size_t)src->n_stop * sizeof *m->stop_ids);
    m->n_stop = src->n_stop;
    m->terminate_without_stop = src->terminate_without_stop;
    m->max_rollback = src->max_rollback;
    m->terminated = src->terminated;
    int rc = xgr_parser_copy(&m->parser, &src->parser);
    if (!rc && XGR_VEC_RESERVE(m->steps, src->steps.len)) rc = XGR_ERR_NOMEM;
    if (rc) {
        xgr_matcher_free(m);
        return rc;
    }
    if (src->steps.len) memcpy(m->steps.data, src->steps.data, src->steps.len * sizeof(step_rec));
    m->steps.len = src->steps.len;
    *out = m;
    return XGR_OK;
}

void xgr_matcher_reset(xgr_matcher *m) {
    if (m) (void)start_root(m); /* row 0 was built once already: cannot fail on memory */
}

int xgr_matcher_can_end(const xgr_matcher *m) {
    return m && (m->terminated || xgr_parser_can_end(&m->parser));
}

int xgr_matcher_is_terminated(const xgr_matcher *m) {
    if (!m) return 0;
    if (m->terminated) return 1;
    return m->terminate_without_stop && xgr_parser_can_end(&m->parser);
}

int32_t xgr_matcher_num_steps(const xgr_matcher *m) { return m ? (int32_t)m->steps.len : 0; }

int32_t xgr_matcher_token_deadline(const xgr_matcher *m) {
    return m ? xgr_parser_token_deadline(&m->parser) : -1;
}

static int push_step(xgr_matcher *m, int32_t rows_before, int stop) {
    step_rec s = {rows_before, stop};
    return XGR_VEC_PUSH(m->steps, s) ? XGR_ERR_NOMEM : XGR_OK;
}

/* Token position for rows the next steps build (parse/attrs.h): the token after the
 * last row's (or the same one when `cont`), mid-token (`mid`) until its last byte. */
static inline void set_token_pos(xgr_parser *p, int cont, int mid) {
    if (!p->budgets) return;
    int32_t tc = p->row_tk.data[xgr_parser_rows(p) - 1] >> 1;
    p->next_tk = ((tc + (cont ? 0 : 1)) << 1) | (mid ? 1 : 0);
}

/* Feeds bytes to the parser: one token (cont 0), the rest of one (cont 1) or text that is
 * no token (cont 2: accept_string's, which token budgets do not count); on a dead byte
 * the rows are restored and *ok = 0. */
static int feed_tok(xgr_matcher *m, const uint8_t *s, size_t n, int cont, int *ok) {
    int32_t rows = xgr_parser_rows(&m->parser);
    set_token_pos(&m->parser, cont, cont != 2);
    for (size_t i = 0; i < n; i++) {
        if (i + 1 == n && m->parser.budgets) m->parser.next_tk &= ~1;
        int alive, rc = xgr_parser_step(&m->parser, s[i], &alive);
        if (rc || !alive) {
            xgr_parser_truncate(&m->parser, rows);
            *ok = 0;
            return rc;
        }
    }
    *ok = 1;
    return XGR_OK;
}

static int feed(xgr_matcher *m, const uint8_t *s, size_t n, int *ok) {
    return feed_tok(m, s, n, 0, ok);
}

int xgr_matcher_temperature(const xgr_matcher *m, int *has, float *out, int *conflict) {
    if (!m || !has || !out || !conflict)
        return xgr_fail(XGR_ERR_INVALID_ARG, "temperature: NULL argument");
    if (m->terminated) {
        *has = *conflict = 0;
        *out = 0;
        return XGR_OK;
    }
    return xgr_parser_temperature(&m->parser, has, out, conflict);
}

int xgr_matcher_captures(const xgr_matcher *m, int dedup, char **out, size_t *out_len) {
    if (!m || !out || !out_len) return xgr_fail(XGR_ERR_INVALID_ARG, "captures: NULL argument");
    return xgr_parser_captures(&m->parser, dedup, out, out_len);
}

/* Does the grammar hold token classes (ExcludeToken)? Their pseudo id sorts last. */
static int has_classes(const xgr_compiled *c) {
    return c->n_token_ids && c->token_ids[c->n_token_ids - 1] == XGR_TOKEN_CLASS_OPEN;
}

static int class_member(const xgr_matcher *m, int32_t id) {
    return xgr_token_class_member(m->c->vocab, m->stop_ids, m->n_stop, id);
}

/* accept_token in a grammar with token classes: when some class the parser admits holds
 * `token`, or the grammar names it, the token is read every way at once (its own marker,
 * those classes, its text: runtime/token_class.c) and *done = 1; else *done = 0 and
 * nothing changed. */
static int accept_with_classes(xgr_matcher *m, int32_t token, int *done, int *accepted) {
    *done = 0;
    if (!class_member(m, token)) return XGR_OK;
    int32_t rows = xgr_parser_rows(&m->parser);
    int ok;
    set_token_pos(&m->parser, 0, 1);
    int rc = xgr_token_accept_union(&m->parser, m->c->vocab, token, is_token_term(m->c, token),
                                    done, &ok);
    if (rc || !*done || !ok) return rc;
    if ((rc = push_step(m, rows, 0))) {
        xgr_parser_truncate(&m->parser, rows);
        return rc;
    }
    *accepted = 1;
    return XGR_OK;
}

/* Parser steps one fill may spend searching for fresh completions (xgr_uqs_search); past
 * them a token's search answers "yes" (docs/json-schema.md, uniqueItems). */
#define UQS_FILL_BUDGET 200000

/* uniqueItems over elements that can run out: text just fed (accept_token, accept_bytes) that
 * leaves an element of an open searched array with only duplicates ahead is refused, as the
 * mask refuses it (check_search_tokens), so that tokens taken without a mask (speculative
 * decoding, jump-forward) cannot lead into a dead end. *ok = 0 when refused (the caller
 * truncates). */
static int search_after_feed(xgr_matcher *m, int *ok) {
    *ok = 1;
    if (!m->c->fsm->attr_unique_search) return XGR_OK;
    int rc = xgr_uqs_prepare(&m->uqs, &m->parser, 0, 0);
    if (rc <= 0) return rc;
    int64_t budget = UQS_FILL_BUDGET;
    rc = xgr_uqs_search(&m->uqs, &m->parser, &budget);
    if (rc < 0) return rc;
    *ok = rc;
    return XGR_OK;
}

int xgr_matcher_accept_token(xgr_matcher *m, int32_t token, int *accepted) {
    if (!m || !accepted) return xgr_fail(XGR_ERR_INVALID_ARG, "accept_token: NULL argument");
    *accepted = 0;
    const struct xgr_vocab *v = m->c->vocab;
    if (token < 0 || token >= v->vocab_size)
        return xgr_fail(XGR_ERR_INVALID_ARG, "token id %d out of range [0, %d)", (int)token,
                        (int)v->vocab_size);
    if (m->terminated) return XGR_OK;
    int32_t rows = xgr_parser_rows(&m->parser);
    if (has_classes(m->c) && !is_stop(m, token)) {
        int done, rc0 = accept_with_classes(m, token, &done, accepted);
        if (rc0 || done) return rc0;
    }
    if (m->c->n_token_ids && is_token_term(m->c, token)) {
        /* As a token-level terminal first (a stop token too: the grammar names it); as
         * text or a stop only where its marker is not admitted. */
        uint8_t mk[XGR_TOKEN_MARKER_LEN];
        int ok0, rc0;
        xgr_token_marker(token, mk);
        if ((rc0 = feed(m, mk, sizeof mk, &ok0))) return rc0;
        if (ok0) {
            if ((rc0 = push_step(m, rows, 0))) {
                xgr_parser_truncate(&m->parser, rows);
                return rc0;
            }
            *accepted = 1;
            return XGR_OK;
        }
    }
    if (is_stop(m, token)) {
        if (m->terminate_without_stop || !xgr_parser_can_end(&m->parser)) return XGR_OK;
        m->terminated = 1;
        int rc = push_step(m, rows, 1);
        if (rc) m->terminated = 0;
        else *accepted = 1;
        return rc;
    }
    int ok, rc;
    if (token >= v->n_tokens || v->is_special[token]) return XGR_OK;
    if (m->c->n_token_ids && get_bit(v->ff_bits, token)) return XGR_OK;
    uint32_t len;
    const uint8_t *s = xgr_vocab_token(v, token, &len);
    if (len == 0) return XGR_OK;
    rc = feed(m, s, len, &ok);
    if (rc || !ok) return rc;
    if ((rc = search_after_feed(m, &ok)) || !ok) {
        xgr_parser_truncate(&m->parser, rows);
        return rc;
    }
    if ((rc = push_step(m, rows, 0))) {
        xgr_parser_truncate(&m->parser, rows);
        return rc;
    }
    *accepted = 1;
    return XGR_OK;
}

int xgr_matcher_accept_bytes(xgr_matcher *m, const uint8_t *s, size_t n, int *accepted) {
    if (!m || !accepted || (!s && n))
        return xgr_fail(XGR_ERR_INVALID_ARG, "accept_bytes: NULL argument");
    *accepted = 0;
    if (m->terminated) return XGR_OK;
    int32_t rows = xgr_parser_rows(&m->parser);
    int ok, rc = feed_tok(m, s, n, 2, &ok);
    if (rc || !ok) return rc;
    if ((rc = search_after_feed(m, &ok)) || !ok) {
        xgr_parser_truncate(&m->parser, rows);
        return rc;
    }
    if ((rc = push_step(m, rows, 0))) {
        xgr_parser_truncate(&m->parser, rows);
        return rc;
    }
    *accepted = 1;
    return XGR_OK;
}

int xgr_matcher_rollback(xgr_matcher *m, int32_t n) {
    if (!m) return xgr_fail(XGR_ERR_INVALID_ARG, "rollback: NULL matcher");
    if (n < 0) return xgr_fail(XGR_ERR_INVALID_ARG, "rollback: negative count %d", (int)n);
    if ((size_t)n > m->steps.len)
        return xgr_fail(XGR_ERR_STATE, "rollback of %d steps but only %zu were accepted",
                        (int)n, m->steps.len);
    if (m->max_rollback >= 0 && n > m->max_rollback)
        return xgr_fail(XGR_ERR_STATE, "rollback of %d steps exceeds max_rollback_tokens %d",
                        (int)n, (int)m->max_rollback);
    if (n == 0) return XGR_OK;
    step_rec first = m->steps.data[m->steps.len - (size_t)n];
    m->steps.len -= (size_t)n;
    m->memo_ok = 0; /* rows its origins point to may be rebuilt otherwise */
    m->vm_ok = 0;
    m->tail_stale = 1;
    xgr_parser_truncate(&m->parser, first.rows_before);
    m->terminated = 0;
    for (size_t i = 0; i < m->steps.len; i++)
        if (m->steps.data[i].stop) m->terminated = 1;
    return XGR_OK;
}

int xgr_matcher_validate_tokens(xgr_matcher *m, const int32_t *tokens, size_t n,
                                size_t *n_accepted) {
    if (!m || !n_accepted || (!tokens && n))
        return xgr_fail(XGR_ERR_INVALID_ARG, "validate_tokens: NULL argument");
    *n_accepted = 0;
    size_t k = 0;
    int rc = XGR_OK;
    int32_t saved_max = m->max_rollback;
    for (; k < n; k++) {
        int acc;
        if ((rc = xgr_matcher_accept_token(m, tokens[k], &acc)) || !acc) break;
    }
    m->max_rollback = -1;
    int rc2 = xgr_matcher_rollback(m, (int32_t)k);
    m->max_rollback = saved_max;
    *n_accepted = k;
    return rc ? rc : rc2;
}


static int apply_token_classes(xgr_matcher *m, uint32_t *row);

/* Token-level terminals: text tokens containing 0xFF are never text in such a grammar;
 * each terminal id whose marker the parser admits is allowed (special or not). */
static int apply_token_terms(xgr_matcher *m, uint32_t *row) {
    const xgr_compiled *c = m->c;
    if (!c->n_token_ids) return XGR_OK;
    for (int32_t i = 0; i < c->vocab->n_ff; i++) clear_bit(row, c->vocab->ff_ids[i]);
    /* Every marker starts with the same lead byte: step it once; most states refuse it. */
    int32_t rows = xgr_parser_rows(&m->parser);
    set_token_pos(&m->parser, 0, 1);
    int alive, rc = xgr_parser_step(&m->parser, XGR_TOKEN_MARKER_LEAD, &alive);
    if (rc || !alive) { /* a work limit leaves the terminals out, as check_uncertain does */
        xgr_parser_truncate(&m->parser, rows);
        return rc == XGR_ERR_LIMIT ? XGR_OK : rc;
    }
    for (int32_t i = 0; i < c->n_token_ids && !rc; i++) {
        int32_t id = c->token_ids[i];
        if (id >= c->vocab->vocab_size) break;
        uint8_t mk[XGR_TOKEN_MARKER_LEN];
        xgr_token_marker(id, mk);
        int ok;
        rc = feed_tok(m, mk + 1, sizeof mk - 1, 1, &ok);
        xgr_parser_truncate(&m->parser, rows + 1);
        if (rc == XGR_ERR_LIMIT) rc = XGR_OK, ok = 0;
        if (!rc && ok) set_bit(row, id);
    }
    xgr_parser_truncate(&m->parser, rows);
    if (!rc && has_classes(c)) rc = apply_token_classes(m, row);
    return rc;
}

/* Token classes: every member of a class the parser admits is allowed. */
static int apply_token_classes(xgr_matcher *m, uint32_t *row) {
    const struct xgr_vocab *v = m->c->vocab;
    size_t rw = (size_t)v->row_words;
    if (!m->class_bits) {
        if (!(m->class_bits = xgr_calloc(2 * rw, sizeof *m->class_bits))) return XGR_ERR_NOMEM;
        for (int32_t id = 0; id < v->n_tokens; id++)
            if (class_member(m, id)) set_bit(m->class_bits, id);
    }
    set_token_pos(&m->parser, 0, 1);
    return xgr_token_classes_mask(&m->parser, m->class_bits, m->class_bits + rw, rw, row);
}

/* Exact check: would `token` be accepted from the current parser state? */
static int check_token(xgr_matcher *m, int32_t token, int *ok) {
    uint32_t len;
    const uint8_t *s = xgr_vocab_token(m->c->vocab, token, &len);
    int32_t rows = xgr_parser_rows(&m->parser);
    int rc = feed(m, s, len, ok);
    xgr_parser_truncate(&m->parser, rows);
    return rc;
}

/* The verdict memo's bit sets (zeroed), on the first exact check of a matcher: most
 * matchers of small grammars never check a token, and two row-sized callocs (37 KB at
 * Qwen3's vocabulary) on every first fill cost more than their fill. */
static int vm_alloc(xgr_matcher *m) {
    size_t rw = (size_t)m->c->vocab->row_words;
    m->vm_known = xgr_calloc(rw, sizeof *m->vm_known);
    m->vm_acc = xgr_calloc(rw, sizeof *m->vm_acc);
    if (m->vm_known && m->vm_acc) return XGR_OK;
    free(m->vm_known);
    free(m->vm_acc);
    m->vm_known = m->vm_acc = NULL;
    return XGR_ERR_NOMEM;
}

#define TM_UNKNOWN (-2)
/* Lists of more tokens than this (a key trie's first letters: tens of thousands of tokens
 * that rarely meet a row twice) skip the tail memo. */
#define TM_MAX_CHECKS 8192

/* Decides the uncertain tokens `ids` (in sorted-vocabulary order) exactly, setting the
 * accepted ones in `row`. Consecutive tokens share parser rows for their common prefix,
 * and a prefix that dies rejects every later token that starts with it. */
/* `uoff` / `ubytes`: the tokens' bytes in list order (compiled.h), or NULL to read them
 * from the vocabulary. */
/* The two vocabulary-wide rows of a fill (tmp_bits, and checked_bits, all zero between
 * fills), made at the first fill that needs them: a fill served by one cache entry with no
 * exact checks (most fills of a warm grammar) needs neither, so a new matcher does not pay
 * 2 x row_words words (32 KiB at a 128k vocabulary) of allocation and zeroing up front. */
static int scratch_bits(xgr_matcher *m) {
    if (m->checked_bits) return XGR_OK;
    size_t rw = (size_t)m->c->vocab->row_words;
    uint32_t *tmp = xgr_malloc(rw * sizeof *tmp);
    uint32_t *checked = xgr_calloc(rw, sizeof *checked);
    if (!tmp || !checked) {
        free(tmp);
        free(checked);
        return xgr_fail(XGR_ERR_NOMEM, "matcher: out of memory for a fill's rows");
    }
    m->tmp_bits = tmp;
    m->checked_bits = checked;
    return XGR_OK;
}

/* The tail memo's id for a tail of n bytes fed from row base + d: the row's collapsed key
 * (counters at or above their minimum compared equal, tail_memo.c tail_count) when the
 * tail is shorter than the room it leaves, else its exact key. rid / cid / room: per depth,
 * TM_UNKNOWN until asked. */
static int32_t tail_id(xgr_matcher *m, int32_t *rid, int32_t *cid, int32_t *room, int32_t base,
                       uint32_t d, uint32_t n) {
    const xgr_parser *p = &m->parser;
    if (cid[d] == TM_UNKNOWN)
        cid[d] = xgr_tail_row(&m->tail, p, base + (int32_t)d, base, &room[d]);
    if (cid[d] < 0 || (int64_t)n < room[d]) return cid[d];
    if (rid[d] == TM_UNKNOWN) rid[d] = xgr_tail_row(&m->tail, p, base + (int32_t)d, base, NULL);
    return rid[d];
}

static int check_uncertain(xgr_matcher *m, const int32_t *ids, int32_t n, const uint32_t *uoff,
                           const uint8_t *ubytes, uint32_t *row) {
    if (scratch_bits(m)) return XGR_ERR_NOMEM;
    const struct xgr_vocab *v = m->c->vocab;
    xgr_parser *p = &m->parser;
    int32_t base = xgr_parser_rows(p) - 1; /* row of depth 0 */
    set_token_pos(p, 0, 1);
    const uint8_t *prev = NULL;
    uint32_t prev_len = 0, valid = 0; /* rows base..base+valid hold prev's prefix */
    int64_t dead_len = -1;            /* prev's first dead prefix length, or -1 */
    int rc = XGR_OK;
    /* The tail memo (tail_memo.h) with the verdict memo's conditions (no budgets nor lazy
     * rules; captures left alone), for lists short enough: rid[d] / cid[d] are the memo's
     * exact / collapsed ids of row base + d (tail_id; TM_UNKNOWN until asked, -1 none). */
    int32_t *rid = NULL, *cid = NULL, *croom = NULL;
    if (m->vm_active && !m->vm_known && vm_alloc(m)) m->vm_active = 0; /* (no memory: no memo) */
    /* (not with uniqueItems: a row inside a token may follow an element the token completed) */
    /* (nor with budgets: rows inside a token may be inside an occurrence it entered, at a
     * depth, so with a budget left, that the row ids do not tell) */
    int tm = m->vm_active && !p->captures && !p->uniq && !p->budgets && n <= TM_MAX_CHECKS;
    if (tm) {
        if (m->tail_stale || xgr_tail_memo_full(&m->tail)) {
            xgr_tail_memo_clear(&m->tail);
            m->tail_stale = 0;
        }
        size_t depths = (size_t)v->max_token_len + 1;
        if (XGR_VEC_RESERVE(m->tail_rid, depths) || XGR_VEC_RESERVE(m->tail_cid, depths) ||
            XGR_VEC_RESERVE(m->tail_room, depths)) {
            tm = 0;
        } else {
            rid = m->tail_rid.data, cid = m->tail_cid.data, croom = m->tail_room.data;
            rid[0] = cid[0] = TM_UNKNOWN;
        }
    }
    for (int32_t i = 0; i < n && !rc; i++) {
        int32_t id = ids[i];
        if (get_bit(row, id) || get_bit(m->checked_bits, id)) continue;
        set_bit(m->checked_bits, id);
        m->worked = 1;
        uint32_t len;
        const uint8_t *tok;
        if (uoff) {
            tok = ubytes + uoff[i];
            len = uoff[i + 1] - uoff[i];
        } else {
            tok = xgr_vocab_token(v, id, &len);
        }
        if (m->vm_active && get_bit(m->vm_known, id) && (int64_t)len < m->vm_room) {
            if (get_bit(m->vm_acc, id)) set_bit(row, id);
            continue;
        }
#ifdef XGR_STATS
        xgr_stat_checks++;
#endif
        int limited = 0, verdict = -1;
        uint32_t l = prev ? xgr_common_prefix(prev, prev_len, tok, len) : 0;
        if (dead_len >= 0 && (int64_t)l >= dead_len) continue; /* shares a dead prefix */
        uint32_t d = l < valid ? l : valid;
        xgr_parser_truncate(p, base + (int32_t)d + 1);
        prev = tok;
        prev_len = len;
        dead_len = -1;
        for (; d < len; d++) {
            /* a tail already decided from this row (tail_memo.h) */
            if (tm && len - d <= XGR_TAIL_MAX_SUFFIX) {
                int32_t id_d = tail_id(m, rid, cid, croom, base, d, len - d);
                if (id_d >= 0 && (verdict = xgr_tail_get(&m->tail, id_d, tok + d, len - d)) >= 0)
                    break;
            }
            int alive;
            if ((rc = xgr_parser_step(p, tok[d], &alive))) {
                /* Too much parser work (max_step_work / max_row_items): the token is not
                 * allowed, as accepting it would fail with the same limit. A mask is always
                 * produced, so an ambiguous grammar cannot stop the engine's batch. */
                if (rc != XGR_ERR_LIMIT) break;
                rc = XGR_OK;
                alive = 0;
                limited = 1;
            }
            if (!alive) {
                dead_len = (int64_t)d + 1;
                break;
            }
            if (tm) rid[d + 1] = cid[d + 1] = TM_UNKNOWN;
        }
        valid = d;
        if (rc) break;
        int acc = verdict >= 0 ? verdict : dead_len < 0;
        if (acc) set_bit(row, id);
        if (limited) continue;
        if (m->vm_active && !get_bit(m->vm_known, id) && !XGR_VEC_PUSH(m->vm_ids, id)) {
            set_bit(m->vm_known, id);
            if (acc) set_bit(m->vm_acc, id);
        }
        /* the verdict holds for every tail of the token from the rows it went through,
         * up to where it was decided (rows base..base+valid exist). Not kept: the whole
         * token from the fill's own row, which the verdict memo already holds for this
         * fill and a later fill's row rarely repeats (the 50-schema JSON sample: 117k such
         * tails kept, 688 read again; the tails from inside the token, 47k kept, 131k
         * reads). */
        for (uint32_t e = 1; tm && e <= valid && e < len; e++) {
            if (len - e > XGR_TAIL_MAX_SUFFIX || (verdict >= 0 && e >= valid)) continue;
            int32_t id_e = tail_id(m, rid, cid, croom, base, e, len - e);
            if (id_e >= 0) xgr_tail_put(&m->tail, id_e, tok + e, len - e, acc);
        }
    }
    xgr_parser_truncate(p, base + 1);
    return rc;
}

/* ORs the tokens a plain entry accepts into row. */
/* Adds context-free entry e's accepted tokens to the row; with `overwrite`, writes them
 * over whatever the row held instead (one pass, no scratch row). */
static void apply_accepted(xgr_matcher *m, const xgr_mask_entry *e, uint32_t *row,
                           int overwrite) {
    const struct xgr_vocab *v = m->c->vocab;
    size_t rw = (size_t)v->row_words;
    if (e->form == XGR_MASK_ACCEPTED_LIST) {
        if (overwrite) memset(row, 0, rw * sizeof *row);
        for (int32_t i = 0; i < e->n_ids; i++) set_bit(row, e->ids[i]);
    } else if (e->form == XGR_MASK_BITSET) {
        if (overwrite) memcpy(row, e->bits, rw * sizeof *row);
        else
            for (size_t w = 0; w < rw; w++) row[w] |= e->bits[w];
    } else {
        uint32_t *dst = overwrite ? row : m->tmp_bits;
        memcpy(dst, v->text_bits, rw * sizeof *dst);
        for (int32_t i = 0; i < e->n_ids; i++) clear_bit(dst, e->ids[i]);
        for (int32_t i = 0; i < e->n_uncertain; i++) clear_bit(dst, e->uncertain[i]);
        if (!overwrite)
            for (size_t w = 0; w < rw; w++) row[w] |= dst[w];
    }
}

/* Adds cache slot `key` with `lim` repetitions left to its REPEAT caller (INT32_MAX: no
 * counter). One slot may come from several callers: the same caller state at different
 * counts (`x+ y{22}` predicts y's body under y{22} at every count after each character).
 * A token is allowed when one of them allows it, and the slot's entry decides it alike
 * under each, except that it must not run more repetitions than its caller has left: so
 * the slot keeps the largest `lim` of its callers. (The smallest, as before, made a loop
 * entry's drop_units reject tokens that only the callers with fewer repetitions left
 * cannot take: a fuzz_regex input, tests/fuzz/regressions/regex/regex-loop-body-bounded.) */
static int push_key(xgr_matcher *m, int32_t key, int32_t lim) {
    for (size_t j = 0; j < m->states.len; j++)
        if (m->states.data[j] == key) {
            if (lim > m->lims.data[j]) m->lims.data[j] = lim;
            return XGR_OK;
        }
    if (XGR_VEC_PUSH(m->states, key) || XGR_VEC_PUSH(m->lims, lim)) return XGR_ERR_NOMEM;
    return XGR_OK;
}

/* Collects the distinct cache slots for the scannable items of the last row into
 * m->states: a parent-context slot per caller when one applies, else the plain slot. */
static int collect_states(xgr_matcher *m) {
    const xgr_parser *p = &m->parser;
    xgr_compiled *c = m->c;
    const xgr_fsm *f = c->fsm;
    int32_t last = xgr_parser_rows(p) - 1;
    m->states.len = 0;
    m->lims.len = 0;
    int32_t k0 = p->row_begin.data[last];
    int32_t covered = xgr_cover_mark(c, p, &m->cover);
    if (covered < 0) return XGR_ERR_NOMEM;
    for (int32_t k = k0; k < p->row_begin.data[last + 1]; k++) {
        xgr_item it = p->items.data[k];
        if (!c->scannable[it.state]) continue;
        if (covered && m->cover.drop[k - k0]) continue; /* an earlier item's entry decides */
        int32_t rule = f->state_rule[it.state];
        if (p->lazy && xgr_item_ended(p, it, rule, last))
            continue; /* ended where it completed: scans nothing */
        int plain = 0, any = 0, rc;
        /* Parent-context slots cost a vocabulary pass each: use them only for states
         * whose plain entry leaves many tokens to the exact check. */
        /* (a loop body's plain entry would leave nearly every token open: cover.h) */
        const xgr_mask_entry *pe = xgr_slot_load(c, it.state);
        if (!pe && !xgr_cover_loop_body(c, p, it, rule) &&
            (rc = xgr_mask_entry_get(m->c, &m->scratch, it.state, &pe)))
            return rc;
        if (pe && !pe->wants_context) {
            if ((rc = push_key(m, it.state, INT32_MAX))) return rc;
            continue;
        }
        for (int32_t q = p->row_begin.data[it.origin]; q < p->row_begin.data[it.origin + 1];
             q++) {
            xgr_item par = p->items.data[q];
            int32_t pr = f->state_rule[par.state];
            for (int32_t e = f->edge_begin[par.state]; e < f->edge_begin[par.state + 1]; e++) {
                if (f->edges[e].ref != rule) continue;
                /* A caller-context entry ignores a REPEAT caller's counter. Each repetition
                 * a token completes from here consumes at least one of its bytes (one that
                 * completes with none is already in this row, under a caller with count+1),
                 * so a token of L <= max - count bytes cannot overrun; longer tokens that
                 * the entry accepts are checked exactly. A loop entry counts each token's
                 * repetitions instead (drop_units). */
                int32_t lim = INT32_MAX;
                if (f->rule_kind[pr] == XGR_RULE_REPEAT && f->repeat_max[pr] >= 0) {
                    if (par.count >= f->repeat_max[pr]) continue; /* never predicted it */
                    lim = f->repeat_max[pr] - par.count;
                }
                int32_t base = xgr_pair_base(c, e);
                if (base < 0) {
                    plain = 1;
                    continue;
                }
                int32_t key = f->n_states + base + c->scan_local[it.state];
                if ((rc = push_key(m, key, lim))) return rc;
                any = 1;
            }
        }
        /* The root has no caller; an item without a usable caller uses the plain slot. */
        if (plain || !any || rule == f->root) {
            if ((rc = push_key(m, it.state, INT32_MAX))) return rc;
        }
    }
    return XGR_OK;
}

/* Zeroes the bits the exact checks of one fill set (m->checked_bits is all zero between
 * fills): by list when the lists are short, else the whole row. */
static void clear_checked(xgr_matcher *m, const xgr_mask_entry **ents, size_t n_ents) {
    if (!m->checked_bits) return; /* (no exact check ran: nothing to clear) */
    size_t rw = (size_t)m->c->vocab->row_words, total = m->extra.len;
    for (size_t j = 0; j < n_ents; j++) total += (size_t)ents[j]->n_uncertain;
    if (total > rw / 4) {
        memset(m->checked_bits, 0, rw * sizeof *m->checked_bits);
        return;
    }
    for (size_t j = 0; j < n_ents; j++)
        for (int32_t i = 0; i < ents[j]->n_uncertain; i++)
            m->checked_bits[ents[j]->uncertain[i] >> 5] = 0;
    for (size_t i = 0; i < m->extra.len; i++) m->checked_bits[m->extra.data[i] >> 5] = 0;
}

/* Bit j set when u[j] > lim (j < 32; u[j] <= XGR_UNIT_COUNT_MAX, lim < it): eight counts
 * at a time, each plus (127 - lim) reaching its byte's high bit exactly when it exceeds
 * lim (no carry between bytes), the eight high bits gathered by one multiplication. */
static inline uint32_t unit_drop_word(const uint8_t *u, int32_t lim) {
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    uint64_t add = (uint64_t)(XGR_UNIT_COUNT_MAX - lim) * ones;
    uint32_t d = 0;
    for (int j = 0; j < 4; j++) {
        uint64_t x;
        memcpy(&x, u + 8 * j, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        x = __builtin_bswap64(x);
#endif
        uint64_t y = ((x + add) & high) >> 7; /* bit 8i: count i exceeds lim */
        d |= (uint32_t)((y * 0x0102040810204080ull) >> 56) << (8 * j);
    }
    return d;
}

/* A loop entry (compiled.h unit_ids) accepts tokens whatever its REPEAT caller's counter:
 * those that run more repetitions than the `lim` left are cleared from `row`. One that
 * holds, after its first byte, a byte that may follow the repetition (top's exit_first)
 * could leave it before the limit and go on in the caller: it goes to the exact check. */
static int drop_units(xgr_matcher *m, const xgr_mask_entry *top, const xgr_mask_entry *base,
                      int32_t lim, uint32_t *row) {
    if (lim > base->max_units) return XGR_OK;
    const struct xgr_vocab *v = m->c->vocab;
    const uint32_t *ex = top->exit_first, *ob = top->unit_open;
    if (lim < 0) lim = 0;
    int32_t n = base->unit_end[lim];
    size_t rw = (size_t)v->row_words;
    /* Many of them dropped (a few repetitions left): the dropped tokens' bits, 32 at a
     * time from their repetition counts; the open ones among them (unit_open, a word at a
     * time) go to the exact check. */
    if (base->unit_count && ob && lim < XGR_UNIT_COUNT_MAX && (size_t)n > 3 * rw) {
        for (size_t w = 0; w < rw; w++) {
            uint32_t d = unit_drop_word(base->unit_count + w * 32, lim);
            row[w] &= ~d;
            for (uint32_t x = ob[w] & d; x; x &= x - 1)
                if (XGR_VEC_PUSH(m->extra, (int32_t)(w * 32 + (size_t)xgr_ctz64(x))))
                    return XGR_ERR_NOMEM;
        }
        return XGR_OK;
    }
    for (int32_t k = 0; k < n; k++) {
        int32_t id = base->unit_ids[k];
        clear_bit(row, id);
        if (ob) {
            if (((ob[id >> 5] >> (id & 31)) & 1) && XGR_VEC_PUSH(m->extra, id)) return XGR_ERR_NOMEM;
            continue;
        }
        uint32_t len;
        const uint8_t *tok = xgr_vocab_token(v, id, &len);
        int open = !ex;
        for (uint32_t j = 1; j < len && !open; j++) open = (ex[tok[j] >> 5] >> (tok[j] & 31)) & 1;
        if (open && XGR_VEC_PUSH(m->extra, id)) return XGR_ERR_NOMEM;
    }
    return XGR_OK;
}

/* Writes the row for the states collect_states found. One context-free entry (the common
 * case: free text, a string body) is written straight into the row, in one pass over it;
 * anything else is OR-ed into a zeroed row. */
static int fill_states(xgr_matcher *m, uint32_t *row, size_t row_words) {
    const struct xgr_vocab *v = m->c->vocab;
    size_t rw = (size_t)v->row_words;
    int rc = XGR_OK;
    m->extra.len = 0;
    const xgr_mask_entry *one = NULL;
    if (m->states.len == 1) {
        if ((rc = xgr_mask_entry_get(m->c, &m->scratch, m->states.data[0], &one))) return rc;
        /* (a REPEAT caller's count that trims a refined entry's own tokens: general path) */
        if (one->form == XGR_MASK_REFINED && one->n_ids && m->lims.data[0] < v->max_token_len)
            one = NULL;
    }
    if (one) {
        const xgr_mask_entry *base = one;
        while (base->form == XGR_MASK_REFINED) base = base->base;
        if (row_words > rw) memset(row + rw, 0, (row_words - rw) * sizeof *row);
        apply_accepted(m, base, row, 1);
        /* A refined entry's own tokens are among its base's uncertain ones: add them. */
        for (const xgr_mask_entry *e = one; e != base; e = e->base)
            if (e == one && e->bits)
                for (size_t w = 0; w < rw; w++) row[w] |= e->bits[w];
            else
                for (int32_t i = 0; i < e->n_ids; i++) set_bit(row, e->ids[i]);
        if (base->unit_ids) rc = drop_units(m, one, base, m->lims.data[0], row);
        if (!rc && one->n_uncertain)
            rc = check_uncertain(m, one->uncertain, one->n_uncertain, one->uoff, one->ubytes, row);
        if (!rc && m->extra.len)
            rc = check_uncertain(m, m->extra.data, (int32_t)m->extra.len, NULL, NULL, row);
        if (one->n_uncertain || m->extra.len) clear_checked(m, &one, 1);
        return rc;
    }
    memset(row, 0, row_words * sizeof *row);
    if (!m->states.len) return XGR_OK;
    m->worked = 1;
    if (scratch_bits(m)) return XGR_ERR_NOMEM;
    if (XGR_VEC_RESERVE(m->ents, 2 * m->states.len)) return XGR_ERR_NOMEM;
    const xgr_mask_entry **ents = m->ents.data, **raws = ents + m->states.len;
    size_t got = 0;
    for (size_t j = 0; j < m->states.len && !rc; j++) {
        rc = xgr_mask_entry_get(m->c, &m->scratch, m->states.data[j], &ents[j]);
        if (rc) break;
        got = j + 1;
        const xgr_mask_entry *e = ents[j];
        /* A refined entry adds its own accepted tokens to its base's; the chain ends
         * at a context-free entry, applied once however many slots share it. */
        int32_t lim = m->lims.data[j];
        if (e->form == XGR_MASK_REFINED) {
            /* This entry's own tokens, minus those too long for a REPEAT caller's
             * remaining count (they go to the exact check). */
            uint32_t *dst = row;
            int32_t k = 0;
            if (lim < v->max_token_len && e->n_ids) {
                dst = m->tmp_bits;
                memset(dst, 0, rw * sizeof *dst);
            }
            if (e->bits)
                for (size_t w = 0; w < rw; w++) dst[w] |= e->bits[w];
            else
                for (int32_t i = 0; i < e->n_ids; i++) set_bit(dst, e->ids[i]);
            if (dst != row) {
                for (; k < e->n_ids && !rc; k++) {
                    uint32_t len;
                    int32_t id = e->ids_by_len[k];
                    xgr_vocab_token(v, id, &len);
                    if (len <= (uint32_t)(lim < 0 ? 0 : lim)) break;
                    dst[id >> 5] &= ~(1u << (id & 31));
                    if (XGR_VEC_PUSH(m->extra, id)) rc = XGR_ERR_NOMEM;
                }
                for (size_t w = 0; w < rw; w++) row[w] |= dst[w];
            }
            e = e->base;
        }
        while (e->form == XGR_MASK_REFINED) {
            for (int32_t i = 0; i < e->n_ids; i++) set_bit(row, e->ids[i]);
            e = e->base;
        }
        if (e->unit_ids && lim <= e->max_units) {
            /* this caller's counter drops some of its tokens: a row of its own */
            apply_accepted(m, e, m->tmp_bits, 1);
            rc = drop_units(m, ents[j], e, lim, m->tmp_bits);
            for (size_t w = 0; w < rw; w++) row[w] |= m->tmp_bits[w];
            raws[j] = NULL;
            continue;
        }
        int seen = 0;
        for (size_t k = 0; k < j && !seen; k++) seen = raws[k] == e;
        raws[j] = e;
        if (!seen) apply_accepted(m, e, row, 0);
    }
    for (size_t j = 0; j < m->states.len && !rc; j++)
        rc = check_uncertain(m, ents[j]->uncertain, ents[j]->n_uncertain, ents[j]->uoff,
                                 ents[j]->ubytes, row);
    if (!rc && m->extra.len)
        rc = check_uncertain(m, m->extra.data, (int32_t)m->extra.len, NULL, NULL, row);
    clear_checked(m, ents, got);
    return rc;
}

/* An item's counter as the memo compares it. A REPEAT item whose counter is more than a
 * token's length (each repetition of a child that cannot be empty consumes a byte) away
 * from both bounds accepts the same tokens at any such count: exit always possible (count
 * at or above the minimum) or never (below it by more), the loop never closed. Inside a
 * bounded string (maxLength) far from its bounds, the rows of successive tokens then
 * compare equal. */
static inline int32_t memo_count(const xgr_compiled *c, xgr_item it) {
    const xgr_fsm *f = c->fsm;
    int32_t r = f->state_rule[it.state];
    if (f->rule_kind[r] != XGR_RULE_REPEAT || f->repeat_child[r] < 0 ||
        f->rule_nullable[f->repeat_child[r]])
        return it.count;
    int32_t L = c->vocab->max_token_len, lo = f->repeat_min[r], hi = f->repeat_max[r], k = it.count;
    if ((k < lo && lo - k <= L) || (hi >= 0 && hi - k <= L)) return k;
    return k >= lo ? -2 : -3;
}

/* Items that matter for what the row allows: a state without edges (a rule's end, its
 * completion already applied to this row's items) can neither scan nor complete again,
 * except the root's, which says whether the grammar can end here (stop tokens). */
static inline int memo_keeps(const xgr_fsm *f, xgr_item it) {
    return f->edge_begin[it.state + 1] > f->edge_begin[it.state] ||
           f->state_rule[it.state] == f->root;
}

/* Item `it` of parser row `last` as the memo holds it (origin at or past the row: -1;
 * counter as memo_count); 0 when the memo leaves it out (memo_keeps). */
static inline int memo_item(const xgr_compiled *c, xgr_item it, int32_t last, xgr_item *out) {
    if (!memo_keeps(c->fsm, it)) return 0;
    out->state = it.state;
    out->origin = it.origin >= last ? -1 : it.origin;
    out->count = memo_count(c, it);
    return 1;
}

/* Does the parser's last row hold the memo's items? */
static int memo_hit(const xgr_matcher *m) {
    if (!m->memo_ok) return 0;
    const xgr_parser *p = &m->parser;
    int32_t last = xgr_parser_rows(p) - 1;
    size_t j = 0;
    for (int32_t k = p->row_begin.data[last]; k < p->row_begin.data[last + 1]; k++) {
        xgr_item it, mt;
        if (!memo_item(m->c, p->items.data[k], last, &it)) continue;
        if (j == m->memo_items.len) return 0;
        mt = m->memo_items.data[j++];
        if (it.state != mt.state || it.count != mt.count || it.origin != mt.origin) return 0;
    }
    return j == m->memo_items.len;
}

/* Keeps `row` (the finished row) for memo_hit; without memory it just keeps nothing. */
static void memo_store(xgr_matcher *m, const uint32_t *row, int need) {
    size_t rw = (size_t)m->c->vocab->row_words;
    const xgr_parser *p = &m->parser;
    int32_t last = xgr_parser_rows(p) - 1;
    int32_t b = p->row_begin.data[last], e = p->row_begin.data[last + 1];
    m->memo_ok = 0;
    if (!m->memo_row && !(m->memo_row = xgr_malloc(rw * sizeof *m->memo_row))) return;
    if (XGR_VEC_RESERVE(m->memo_items, (size_t)(e - b))) return;
    m->memo_items.len = 0;
    for (int32_t k = b; k < e; k++)
        m->memo_items.len += (size_t)memo_item(m->c, p->items.data[k], last,
                                               &m->memo_items.data[m->memo_items.len]);
    memcpy(m->memo_row, row, rw * sizeof *row);
    m->memo_need_apply = need;
    m->memo_ok = 1;
}

/* An item's counter as the verdict memo compares it: a bounded or unbounded repetition of
 * a child that cannot be empty, at or above its minimum, compares equal at every count
 * (-2); its room (max - count) goes to *room. Below the minimum the count stays. */
static inline int32_t vm_count(const xgr_fsm *f, xgr_item it, int32_t *room) {
    int32_t r = f->state_rule[it.state];
    if (f->rule_kind[r] != XGR_RULE_REPEAT || f->repeat_child[r] < 0 ||
        f->rule_nullable[f->repeat_child[r]] || it.count < f->repeat_min[r])
        return it.count;
    if (f->repeat_max[r] >= 0 && f->repeat_max[r] - it.count < *room)
        *room = f->repeat_max[r] - it.count;
    return -2;
}

/* Starts a fill's use of the verdict memo (the vm_* fields): kept when the last row holds
 * the memo's items (origins at or past the row as -1, counters as vm_count), else emptied
 * and keyed by this row. Without memory the fill just does not use it. */
static void vm_begin(xgr_matcher *m) {
    const xgr_fsm *f = m->c->fsm;
    const xgr_parser *p = &m->parser;
    size_t rw = (size_t)m->c->vocab->row_words;
    int32_t last = xgr_parser_rows(p) - 1;
    int32_t b = p->row_begin.data[last], e = p->row_begin.data[last + 1], room = INT32_MAX;
    m->vm_active = 0;
    int same = m->vm_ok;
    size_t j = 0;
    for (int32_t k = b; k < e && same; k++) {
        xgr_item it = p->items.data[k];
        if (!memo_keeps(f, it)) continue;
        if (j == m->vm_items.len) same = 0;
        else {
            xgr_item mt = m->vm_items.data[j++];
            same = it.state == mt.state && (it.origin >= last ? -1 : it.origin) == mt.origin &&
                   vm_count(f, it, &room) == mt.count;
        }
    }
    if (same && j == m->vm_items.len) {
        if (room < m->vm_room) m->vm_room = room;
        m->vm_active = 1;
        return;
    }
    /* a new row: forget the verdicts (by list when few) and key the memo by this row */
    m->vm_ok = 0;
    if (!m->vm_known) {
        /* (no verdict kept yet: the bit sets come with the first exact check, vm_alloc) */
    } else if (m->vm_ids.len > rw / 4) {
        memset(m->vm_known, 0, rw * sizeof *m->vm_known);
        memset(m->vm_acc, 0, rw * sizeof *m->vm_acc);
    } else {
        for (size_t i = 0; i < m->vm_ids.len; i++)
            m->vm_known[m->vm_ids.data[i] >> 5] = m->vm_acc[m->vm_ids.data[i] >> 5] = 0;
    }
    m->vm_ids.len = 0;
    if (XGR_VEC_RESERVE(m->vm_items, (size_t)(e - b))) return;
    m->vm_items.len = 0;
    room = INT32_MAX;
    for (int32_t k = b; k < e; k++) {
        xgr_item it = p->items.data[k];
        if (!memo_keeps(f, it)) continue;
        xgr_item *o = &m->vm_items.data[m->vm_items.len++];
        *o = it;
        o->origin = it.origin >= last ? -1 : it.origin;
        o->count = vm_count(f, it, &room);
    }
    m->vm_room = room;
    m->vm_ok = 1;
    m->vm_active = 1;
}

/* The vocabulary memo's key (vocab.h) of a byte set's token tables: their kind (1: lazy,
 * 2: uniqueItems), `all` and the set. */
static void byteset_key(uint32_t key[XGR_VOCAB_MEMO_KEY], uint32_t kind, int all, const uint32_t ends[8]) {
    key[0] = kind;
    key[1] = (uint32_t)all;
    memcpy(key + 2, ends, 8 * sizeof *ends);
}

static void lazy_tables_free_fn(void *p) { xgr_lazy_tables_free(p); }

static void uq_tables_free_fn(void *p) { xgr_uq_tables_free(p); }

/* The lazy token lists of byte set `ends` (lazy_tokens.h), built (a vocabulary pass: ~1.4 ms
 * at 151k tokens) or taken from the vocabulary's memo: grammars with the same set share one
 * copy. NULL out of memory. */
static xgr_lazy_tables *lazy_tables_of(const struct xgr_vocab *v, const uint32_t ends[8], int all) {
    uint32_t key[XGR_VOCAB_MEMO_KEY];
    byteset_key(key, 1, all, ends);
    xgr_lazy_tables *t = (xgr_lazy_tables *)xgr_vocab_memo_get(v, key);
    if (t) return t;
    t = xgr_calloc(1, sizeof *t);
    if (!t || xgr_lazy_risky_tokens(v, ends, all, &t->risky, &t->n)) {
        xgr_lazy_tables_free(t);
        return NULL;
    }
    if (t->n >= 0) {
        t->bits = xgr_calloc((size_t)v->row_words, sizeof *t->bits);
        if (!t->bits) {
            xgr_lazy_tables_free(t);
            return NULL;
        }
        for (int32_t i = 0; i < t->n; i++) set_bit(t->bits, t->risky[i]);
    }
    t->shared = 1;
    xgr_lazy_tables *kept = (xgr_lazy_tables *)xgr_vocab_memo_put(v, key, t, lazy_tables_free_fn);
    if (!kept) t->shared = 0; /* (the memo is full: the grammar owns its copy) */
    return kept ? kept : t;
}

/* Fetches m->lazy, the grammar's lazy token lists (lazy_tables_of), fetched by the first
 * matcher that needs them and kept on the grammar for all (published with a
 * compare-and-swap). */
static int lazy_prepare(xgr_matcher *m) {
    if (m->lazy) return XGR_OK;
    xgr_compiled *c = m->c;
    xgr_lazy_tables *t = atomic_load_explicit(&c->lazy, memory_order_acquire);
    if (!t) {
        const struct xgr_vocab *v = c->vocab;
        uint32_t ends[8];
        int all = xgr_lazy_end_bytes(c->fsm, 0, ends);
        if (all < 0 || !(t = lazy_tables_of(v, ends, all))) return XGR_ERR_NOMEM;
        xgr_lazy_tables *expected = NULL;
        if (!atomic_compare_exchange_strong_explicit(&c->lazy, &expected, t, memory_order_acq_rel,
                                                     memory_order_acquire)) {
            xgr_lazy_tables_drop(t);
            t = expected;
        } else if (!t->shared) {
            atomic_fetch_add(&c->memory, sizeof *t + (t->n > 0 ? (size_t)t->n * sizeof(int32_t) : 0) +
                                             (t->bits ? (size_t)v->row_words * sizeof(uint32_t) : 0));
        }
    }
    m->lazy = t;
    return XGR_OK;
}

/* Decides the tokens listed in m->extra (sorted order, cleared from `row`) exactly, then
 * empties the list and the checked bits it set. */
static int check_extra(xgr_matcher *m, uint32_t *row) {
    if (!m->extra.len) return XGR_OK;
    int rc = check_uncertain(m, m->extra.data, (int32_t)m->extra.len, NULL, NULL, row);
    if (m->checked_bits)
        for (size_t i = 0; i < m->extra.len; i++) m->checked_bits[m->extra.data[i] >> 5] = 0;
    m->extra.len = 0;
    return rc;
}

/* Moves the tokens of `ids` (n, sorted order; all of the vocabulary's when NULL) that `row`
 * accepts to m->extra, clearing them from the row. */
static int take_accepted(xgr_matcher *m, const int32_t *ids, int32_t n, uint32_t *row) {
    if (!ids) {
        ids = m->c->vocab->sorted;
        n = m->c->vocab->n_sorted;
    }
    for (int32_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (!get_bit(row, id)) continue;
        clear_bit(row, id);
        if (XGR_VEC_PUSH(m->extra, id)) return XGR_ERR_NOMEM;
    }
    return XGR_OK;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Budgets and lazy rules hold per occurrence, which the mask cache (keyed by automaton
 * state) does not see: its entries start from a rule's state as if the occurrence had no
 * budget and were open, so they accept a superset. A token of at most as many bytes as
 * code points every item's budget has left (and with a token of budget left), nor than
 * the smallest budget of the grammar (a rule the token enters), cannot meet a deadline;
 * nor can a token close a lazy occurrence and go on in it unless it holds, before its
 * last byte, a byte after which a lazy rule may complete (lazy_tokens.h: on Llama-3.1,
 * `a[stop="END"]` over a regex of [a-z ] leaves a few thousand such tokens of 128k, where every
 * token of two bytes or more used to be checked): the entry's verdict stands. Every
 * other accepted token is checked exactly. */
static int check_attr_tokens(xgr_matcher *m, uint32_t *row) {
    const struct xgr_vocab *v = m->c->vocab;
    const xgr_fsm *f = m->c->fsm;
    int32_t chars, tokens;
    xgr_parser_budget_left(&m->parser, &chars, &tokens);
    int64_t lim = chars;
    if (tokens < 1) lim = 0;
    /* (entries need not bake in the budgets of rules a token enters either) */
    if (m->parser.budgets && lim > f->attr_min_budget) lim = f->attr_min_budget;
    /* An item also dies where what it still needs no longer fits (parse/need.h), which
     * entries started below a budget do not see: a token's items, their rules and those
     * above them up to the budget need at most need->reach more, so a token of at most
     * (effective characters left - reach) bytes keeps every path its entry allowed. */
    if (m->parser.budgets && f->need) {
        int64_t w = f->need->reach;
        int32_t eff = xgr_parser_eff_left(&m->parser);
        if (eff != XGR_NO_DEADLINE) {
            int64_t l2 = w == XGR_NEED_INF ? 0 : (int64_t)eff - w;
            if (l2 < lim) lim = l2 < 0 ? 0 : l2;
        }
        /* (and a rule the token enters: its budget less the same, as the entries do not
         * all drop such items) */
        int64_t l3 = w == XGR_NEED_INF ? 0 : (int64_t)f->attr_min_budget - w;
        if (l3 < lim) lim = l3 < 0 ? 0 : l3;
    }
    /* the lazy rules' risky tokens, or (a nullable lazy rule) every token past one byte
     * (a spent token budget ends occurrences only at a token's end: no one-byte limit) */
    const uint32_t *risky = NULL;
    if (f->attr_lazy_rules) {
        int rc = lazy_prepare(m);
        if (rc) return rc;
        if (m->lazy->n < 0) {
            if (lim > 1) lim = 1;
        } else if (m->lazy->n > 0) {
            risky = m->lazy->bits;
        }
    }
    /* A forced close (ir.h forced_body) of an occurrence open in the row happens where its
     * budget is spent, which the entries do not see (they leave the rule there only when
     * the token enters it): near a deadline, a token that reaches it (as many bytes as
     * code points are left, or any once a token budget has expired) is checked exactly
     * whether or not its entry allowed it. */
    int64_t add = INT64_MAX;
    if (f->attr_forced && m->parser.budgets) {
        if (tokens < 1) add = 1;
        else if (chars != XGR_NO_DEADLINE) add = chars > 1 ? chars : 1;
    }
    /* the tokens to decide again, in sorted order so check_uncertain shares prefixes */
    m->extra.len = 0;
    if (lim >= v->max_token_len && add > v->max_token_len) {
        if (!risky) return XGR_OK;
        int rc = take_accepted(m, m->lazy->risky, m->lazy->n, row);
        if (rc) return rc;
    } else if (!risky) {
        /* only tokens longer than min(lim, add - 1) can qualify: a prefix of by_len, put
         * back in sorted order (few: tokens longer than a budget) */
        int64_t t = lim < add - 1 ? lim : add - 1;
        for (int32_t k = 0; k < v->n_sorted; k++) {
            int32_t i = v->by_len[k], id = v->sorted[i];
            uint32_t len = v->sorted_offsets[i + 1] - v->sorted_offsets[i];
            if ((int64_t)len <= t) break;
            if ((int64_t)len < add && !get_bit(row, id)) continue;
            if (XGR_VEC_PUSH(m->extra, i)) return XGR_ERR_NOMEM;
        }
        if (m->extra.len > 1) qsort(m->extra.data, m->extra.len, sizeof *m->extra.data, cmp_i32);
        for (size_t k = 0; k < m->extra.len; k++) {
            int32_t id = v->sorted[m->extra.data[k]];
            m->extra.data[k] = id;
            clear_bit(row, id);
        }
    } else {
        for (int32_t i = 0; i < v->n_sorted; i++) {
            int32_t id = v->sorted[i];
            uint32_t len;
            xgr_vocab_token(v, id, &len);
            if ((int64_t)len < add) {
                if (!get_bit(row, id) || ((int64_t)len <= lim && !(risky && get_bit(risky, id))))
                    continue;
            } else if (!len) {
                continue;
            }
            clear_bit(row, id);
            if (XGR_VEC_PUSH(m->extra, id)) return XGR_ERR_NOMEM;
        }
    }
    return check_extra(m, row);
}

/* The uniqueItems token lists of byte set `ends` (compiled.h xgr_uq_tables): built (two
 * vocabulary passes, ~3 ms at 151k tokens) or taken from the vocabulary's memo, shared by
 * every grammar with the same set (JSON elements end at the same few bytes). NULL out of
 * memory. */
static xgr_uq_tables *uq_tables_of(const struct xgr_vocab *v, const uint32_t ends[8], int all) {
    uint32_t key[XGR_VOCAB_MEMO_KEY];
    byteset_key(key, 2, all, ends);
    xgr_uq_tables *t = (xgr_uq_tables *)xgr_vocab_memo_get(v, key);
    if (t) return t;
    t = xgr_calloc(1, sizeof *t);
    if (!t) return NULL;
    t->one_bits = xgr_calloc((size_t)v->row_words, sizeof *t->one_bits);
    t->opens = xgr_calloc((size_t)v->row_words, sizeof *t->opens);
    if (!t->one_bits || !t->opens || xgr_lazy_unique_tokens(v, ends, all, 1, &t->one, &t->n_one) ||
        xgr_lazy_unique_tokens(v, ends, all, 2, &t->two, &t->n_two)) {
        xgr_uq_tables_free(t);
        return NULL;
    }
    for (int32_t i = 0; i < t->n_one; i++) {
        int32_t id = t->one[i];
        uint32_t len;
        const uint8_t *tok = xgr_vocab_token(v, id, &len);
        const uint8_t *lb = len ? memchr(tok, '[', len) : NULL;
        set_bit(t->one_bits, id);
        if (lb && memchr(lb, ',', len - (uint32_t)(lb - tok))) set_bit(t->opens, id);
    }
    t->shared = 1;
    xgr_uq_tables *kept = (xgr_uq_tables *)xgr_vocab_memo_put(v, key, t, uq_tables_free_fn);
    if (!kept) t->shared = 0;
    return kept ? kept : t;
}

/* The grammar's uniqueItems token lists (uq_tables_of), fetched by the first matcher that
 * needs them and kept on the grammar for all (published with a compare-and-swap). */
static int uq_tables(xgr_compiled *c, const xgr_uq_tables **out) {
    xgr_uq_tables *t = atomic_load_explicit(&c->uq, memory_order_acquire);
    if (t) {
        *out = t;
        return XGR_OK;
    }
    const struct xgr_vocab *v = c->vocab;
    uint32_t ends[8];
    int all = xgr_lazy_end_bytes(c->fsm, 1, ends);
    if (all < 0 || !(t = uq_tables_of(v, ends, all))) return XGR_ERR_NOMEM;
    xgr_uq_tables *expected = NULL;
    if (!atomic_compare_exchange_strong_explicit(&c->uq, &expected, t, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        xgr_uq_tables_drop(t);
        t = expected;
    } else if (!t->shared) {
        atomic_fetch_add(&c->memory, sizeof *t + ((size_t)t->n_one + (size_t)t->n_two) * sizeof(int32_t) +
                                         2 * (size_t)v->row_words * sizeof(uint32_t));
    }
    *out = t;
    return XGR_OK;
}

/* uniqueItems (parse/unique.h): the mask cache's entries ignore it, so a token that can
 * complete an element whose value an earlier element of its array already has is decided
 * exactly. An element completes only at one of its rules' end bytes (a string's closing
 * quote), and a duplicate needs an earlier element of the same array: one recorded in an
 * array still open at this row (then every token with such a byte is checked), or one the
 * token itself completes (then only tokens with two such bytes). Elements whose value set
 * never runs out before they complete (the converter emits only those) cannot reach a
 * dead end otherwise. */
static int check_unique_tokens(xgr_matcher *m, uint32_t *row) {
    if (!m->uq) {
        int rc0 = uq_tables(m->c, &m->uq);
        if (rc0) return rc0;
    }
    const xgr_uq_tables *uq = m->uq;
    int refused = xgr_uniq_refused_last(&m->parser), open = !refused && xgr_uniq_open(&m->parser);
    m->extra.len = 0;
    m->uq_safe.len = 0;
    /* (after a row that refused a value but lives on, "1" that may become "12", every
     * accepted token: the entries' parent contexts assume the element completed) */
    int rc = refused ? take_accepted(m, NULL, 0, row)
                     : take_accepted(m, open ? uq->one : uq->two, open ? uq->n_one : uq->n_two,
                                     row);
    if (!rc && !refused && m->extra.len) {
        /* A token whose text leaves every open array's element unlike its earlier elements
         * (parse/unique_search.h: no element it completes equals an earlier one, the element
         * it ends in is consistent with none) cannot meet a duplicate: its bit stands. Not
         * one that may open an array and start its second element (a ',' after a '['). */
        const struct xgr_vocab *v = m->c->vocab;
        int any = xgr_uqs_prepare(&m->uqs, &m->parser, (size_t)v->max_token_len, 1);
        if (any < 0) return any;
        if (any) {
            size_t k = 0;
            for (size_t i = 0; i < m->extra.len; i++) {
                int32_t id = m->extra.data[i];
                uint32_t len;
                const uint8_t *tok = xgr_vocab_token(v, id, &len);
                if (len && !get_bit(uq->opens, id) &&
                    xgr_uqs_text_risk(&m->uqs, &m->parser, tok, len) == 0) {
                    set_bit(row, id);
                    if (XGR_VEC_PUSH(m->uq_safe, id)) return XGR_ERR_NOMEM;
                } else {
                    m->extra.data[k++] = id;
                }
            }
            m->extra.len = k;
        }
    }
    return rc ? rc : check_extra(m, row);
}

/* One token of check_search_tokens: judged on its text, else stepped and searched; its bit
 * is cleared when no fresh completion follows it. `ends`: it holds an element end byte. */
static int search_token(xgr_matcher *m, uint32_t *row, int32_t id, int ends, int32_t rows,
                        int64_t *budget) {
    const struct xgr_vocab *v = m->c->vocab;
    xgr_parser *p = &m->parser;
    uint32_t len;
    if (id >= v->n_tokens || v->is_special[id] || is_stop(m, id)) return XGR_OK;
    const uint8_t *tok = xgr_vocab_token(v, id, &len);
    if (!len) return XGR_OK;
    /* (a token that can complete an element can open an array too and start its second
     * element: only one without a ',' after a '[' is judged on the open arrays' text) */
    int opens = ends && get_bit(m->uq->opens, id);
    if (!opens && xgr_uqs_text_risk(&m->uqs, p, tok, len) <= 0) return XGR_OK;
    int ok = 1, rc = XGR_OK;
    for (uint32_t d = 0; d < len && ok; d++) {
        int alive;
        rc = xgr_parser_step(p, tok[d], &alive);
        if (rc == XGR_ERR_LIMIT) rc = XGR_OK, alive = 0;
        if (rc) break;
        ok = alive;
    }
    if (!rc && ok) {
        int s = xgr_uqs_search(&m->uqs, p, budget);
        if (s < 0) rc = s;
        else ok = s;
    }
    xgr_parser_truncate(p, rows);
    if (!rc && !ok) clear_bit(row, id);
    return rc;
}

/* uniqueItems over elements that can run out (parse/unique_search.h): a token the row
 * allows after which every completion would leave an element a duplicate is cleared. Only
 * tokens that can leave an element consistent with an earlier value are looked at: those
 * whose first byte does (the element's text so far plus that byte, in any open search
 * scope), and those holding a byte where an element can complete (they may start the next
 * element, or open an array and fill it). Each is judged on its text first, except one
 * that can complete an element and holds a ',' after a '[' (it may open an array the text
 * does not know of and start its second element); those the text leaves at risk are fed
 * to the parser and searched. */
static int check_search_tokens(xgr_matcher *m, uint32_t *row) {
    xgr_parser *p = &m->parser;
    const struct xgr_vocab *v = m->c->vocab;
    int rc = xgr_uqs_prepare(&m->uqs, p, (size_t)v->max_token_len, 0);
    if (rc <= 0) return rc;
    const xgr_uq_tables *uq = m->uq; /* (check_unique_tokens, which runs first, fetched it) */
    uint32_t fb[8] = {0};
    for (int b = 0; b < 256; b++) {
        uint8_t x = (uint8_t)b;
        if (xgr_uqs_text_risk(&m->uqs, p, &x, 1)) fb[b >> 5] |= 1u << (b & 31);
    }
    int64_t budget = UQS_FILL_BUDGET;
    int32_t rows = xgr_parser_rows(p);
    set_token_pos(p, 0, 1);
    /* The candidates are listed, not found among the row's bits (a row inside a string
     * allows most of the vocabulary): the tokens with an element end byte (uq_one), then by
     * sorted position the tokens whose first byte is at risk (first_byte_start ranges). */
    /* (the completed-element check judged some on their text under every open array, the
     * searched ones among them: nothing to search; its list follows uq->one's order) */
    size_t sk = 0;
    for (int32_t i = 0; i < uq->n_one; i++) {
        int32_t id = uq->one[i];
        if (sk < m->uq_safe.len && m->uq_safe.data[sk] == id) {
            sk++;
            continue;
        }
        if (get_bit(row, id) && (rc = search_token(m, row, id, 1, rows, &budget))) return rc;
    }
    for (int b = 0; b < 256; b++) {
        if (!get_bit(fb, b)) continue;
        for (int32_t q = v->first_byte_start[b]; q < v->first_byte_start[b + 1]; q++) {
            int32_t id = v->sorted[q];
            if (get_bit(row, id) && !get_bit(uq->one_bits, id) &&
                (rc = search_token(m, row, id, 0, rows, &budget)))
                return rc;
        }
    }
    return XGR_OK;
}

/* Is every bit of the row set? Free text allows nearly every token, and Llama-like
 * vocabularies put the disallowed special tokens last, so the whole row is read: in blocks
 * of 64 words (a zero ends the scan at its block) AND-ed into 16 lanes, which vectorise to
 * independent chains instead of one latency-bound chain (2.2x faster at 4008 words). */
static int row_full(const uint32_t *row, size_t rw) {
    uint32_t acc = 0xffffffffu;
    size_t w = 0;
    for (; w + 64 <= rw && acc == 0xffffffffu; w += 64) {
        uint32_t a[16];
        for (int j = 0; j < 16; j++) a[j] = row[w + j];
        for (size_t k = 16; k < 64; k += 16)
            for (int j = 0; j < 16; j++) a[j] &= row[w + k + j];
        for (int j = 0; j < 16; j++) acc &= a[j];
    }
    for (; w < rw && acc == 0xffffffffu; w++) acc &= row[w];
    return acc == 0xffffffffu;
}

/* uniqueItems: the exact checks of the tokens a superset row allows that can meet a
 * duplicate (check_unique_tokens) or leave an element with none but duplicates ahead
 * (check_search_tokens). Stop tokens are set again where the grammar can end. */
static int unique_checks(xgr_matcher *m, uint32_t *row) {
    int rc = check_unique_tokens(m, row);
    if (!rc && m->c->fsm->attr_unique_search) rc = check_search_tokens(m, row);
    int end = !m->terminated && xgr_parser_can_end(&m->parser);
    for (int32_t i = 0; i < m->n_stop; i++) {
        if (end) set_bit(row, m->stop_ids[i]);
        else clear_bit(row, m->stop_ids[i]);
    }
    return rc;
}

int xgr_matcher_fill_bitmask(xgr_matcher *m, int32_t *row_out, size_t row_words,
                             int *need_apply) {
    if (!m || (!row_out && row_words))
        return xgr_fail(XGR_ERR_INVALID_ARG, "fill_bitmask: NULL argument");
    const struct xgr_vocab *v = m->c->vocab;
    size_t rw = (size_t)v->row_words;
    if (row_words < rw)
        return xgr_fail(XGR_ERR_INVALID_ARG,
                        "bitmask row has %zu int32 words but the vocabulary needs %zu",
                        row_words, rw);
    if (!row_words) { /* an empty vocabulary (vocab_size 0): the row has no bits */
        if (need_apply) *need_apply = 0;
        return XGR_OK;
    }
    uint32_t *row = (uint32_t *)row_out;
    int rc = XGR_OK;
    /* uniqueItems: a token's verdict may depend on the bytes before (the elements of an open
     * array, or the element it completes: two rows with equal items may differ there). The
     * row is first made without the parser's element checks (a superset, which depends on
     * the items alone, so the row and verdict memos hold for it), then the tokens that can
     * meet a duplicate are decided exactly (unique_checks), also after a memo hit. */
    int uq = m->parser.uniq;
    /* Budgets hold per occurrence (check_attr_tokens): a row with an item inside a budgeted
     * occurrence skips the memos, a row with none allows what its items allow whatever the
     * bytes before (the long tokens check_attr_tokens then decides depend on the grammar's
     * budgets alone), so it keeps them. */
    int memo_row = !m->parser.lazy && !xgr_parser_budget_open(&m->parser);
    m->worked = 0;
    m->vm_active = 0;
    if (m->terminated) {
        /* After a stop token nothing more can be accepted: the row is zeroed and, as in
         * upstream xgrammar, asking for it is an error. */
        memset(row, 0, row_words * sizeof *row);
        if (need_apply) *need_apply = 1;
        return xgr_fail(XGR_ERR_STATE,
                        "the matcher has terminated (it accepted a stop token): there is no "
                        "next-token bitmask; roll back or reset it first");
    } else if (memo_row && memo_hit(m)) {
        memcpy(row, m->memo_row, rw * sizeof *row);
        if (row_words > rw) memset(row + rw, 0, (row_words - rw) * sizeof *row);
        if (!uq) {
            if (need_apply) *need_apply = m->memo_need_apply;
            return XGR_OK;
        }
        if ((rc = unique_checks(m, row))) {
            memset(row, 0, row_words * sizeof *row);
            return rc;
        }
        if (need_apply) *need_apply = !((v->vocab_size % 32) == 0 && row_full(row, rw));
        return XGR_OK;
    } else {
        if (memo_row) vm_begin(m);
        if ((rc = collect_states(m))) {
            memset(row, 0, row_words * sizeof *row);
            return rc;
        }
        m->parser.uniq = 0; /* (the superset: see uq above) */
        rc = fill_states(m, row, row_words);
        m->parser.uniq = uq;
        m->vm_active = 0;
        if (!rc && (m->parser.budgets || m->parser.lazy)) rc = check_attr_tokens(m, row);
        if (rc) {
            memset(row, 0, row_words * sizeof *row);
            return rc;
        }
    }
    /* A stop id (override_stop may name an ordinary token) is never accepted as text:
     * only where the grammar can end, as below. */
    for (int32_t i = 0; i < m->n_stop; i++)
        row[m->stop_ids[i] >> 5] &= ~(1u << (m->stop_ids[i] & 31));
    if (!m->terminated && (rc = apply_token_terms(m, row))) {
        memset(row, 0, row_words * sizeof *row);
        return rc;
    }
    /* After a stop token nothing more is accepted, so the row stays empty. */
    if (!m->terminated && xgr_parser_can_end(&m->parser))
        for (int32_t i = 0; i < m->n_stop; i++) set_bit(row, m->stop_ids[i]);
    if (uq) {
        /* the memo keeps the superset; the exact checks run on every fill */
        if (m->worked && memo_row) memo_store(m, row, 1);
        if ((rc = unique_checks(m, row))) {
            memset(row, 0, row_words * sizeof *row);
            return rc;
        }
    }
    if (need_apply || m->worked) {
        /* (bits past the vocabulary are zero: such a row is never full) */
        int full = (v->vocab_size % 32) == 0 && row_full(row, rw);
        if (need_apply) *need_apply = !full;
        if (m->worked && memo_row && !uq) memo_store(m, row, !full);
    }
    return XGR_OK;
}

int xgr_matcher_accept_token_ret(xgr_matcher *m, int32_t token) {
    int ok = 0, rc = xgr_matcher_accept_token(m, token, &ok);
    return rc ? -rc : ok;
}

int xgr_matcher_fill_bitmask_ret(xgr_matcher *m, int32_t *row, size_t row_words) {
    int need = 1, rc = xgr_matcher_fill_bitmask(m, row, row_words, &need);
    return rc ? -rc : need;
}

#define JUMP_FORWARD_MAX_ITEMS ((size_t)1 << 16)

int xgr_matcher_jump_forward(xgr_matcher *m, char **out, size_t *out_len) {
    if (!m || !out || !out_len) return xgr_fail(XGR_ERR_INVALID_ARG, "jump_forward: NULL");
    *out = NULL;
    *out_len = 0;
    XGR_VEC(char) buf = {0};
    int32_t rows = xgr_parser_rows(&m->parser);
    size_t items0 = m->parser.items.len;
    int rc = XGR_OK;
    if (!m->terminated) {
        /* At most 4096 bytes, and at most JUMP_FORWARD_MAX_ITEMS parser items over all the
         * rows it builds: a grammar whose forced text leaves an item pending at every byte
         * grows each row by one, so the rows add up quadratically (a fuzzed image: 8.4M
         * items for 4096 bytes, 15 s per call under ASan). The text found so far is still
         * forced, and the next call goes on from where the caller has accepted it. */
        while (buf.len < 4096 && !xgr_parser_can_end(&m->parser) &&
               m->parser.items.len - items0 < JUMP_FORWARD_MAX_ITEMS) {
            uint32_t bits[8];
            xgr_parser_next_bytes(&m->parser, bits);
            int only = -1, count = 0;
            for (int b = 0; b < 256 && count < 2; b++)
                if ((bits[b >> 5] >> (b & 31)) & 1) {
                    only = b;
                    count++;
                }
            if (count != 1) break;
            int alive;
            /* never into a token-level terminal's marker: it is not text */
            if (only == XGR_TOKEN_MARKER_LEAD) break;
            if ((rc = xgr_parser_step(&m->parser, (uint8_t)only, &alive)) || !alive) break;
            if (XGR_VEC_PUSH(buf, (char)only)) {
                rc = XGR_ERR_NOMEM;
                break;
            }
        }
    }
    xgr_parser_truncate(&m->parser, rows);
    if (rc) {
        XGR_VEC_FREE(buf);
        return rc;
    }
    /* Cut an incomplete trailing UTF-8 sequence so the result is valid text. */
    size_t n = buf.len, i = n;
    while (i > 0 && ((uint8_t)buf.data[i - 1] & 0xC0) == 0x80 && n - i < 3) i--;
    if (i > 0) {
        uint8_t lead = (uint8_t)buf.data[i - 1];
        size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
        if (need > 1 && n - (i - 1) < need) n = i - 1;
    }
    char *s = xgr_malloc(n + 1);
    if (!s) {
        XGR_VEC_FREE(buf);
        return XGR_ERR_NOMEM;
    }
    if (n) memcpy(s, buf.data, n);
    s[n] = '\0';
    XGR_VEC_FREE(buf);
    *out = s;
    *out_len = n;
    return XGR_OK;
}

int xgr_matcher_fill_bitmask_bruteforce(xgr_matcher *m, int32_t *row_out, size_t row_words) {
    if (!m || (!row_out && row_words))
        return xgr_fail(XGR_ERR_INVALID_ARG, "fill_bitmask: NULL argument");
    const struct xgr_vocab *v = m->c->vocab;
    if (row_words < (size_t)v->row_words)
        return xgr_fail(XGR_ERR_INVALID_ARG, "bitmask row too short");
    if (!row_words) return XGR_OK; /* an empty vocabulary: the row has no bits */
    uint32_t *row = (uint32_t *)row_out;
    memset(row, 0, row_words * sizeof *row);
    if (!m->terminated)
        for (int32_t id = 0; id < v->n_tokens; id++) {
            if (v->is_special[id] || is_stop(m, id)) continue;
            uint32_t len;
            xgr_vocab_token(v, id, &len);
            if (!len) continue;
            int ok, rc = check_token(m, id, &ok);
            if (rc == XGR_ERR_LIMIT) rc = XGR_OK, ok = 0; /* as check_uncertain */
            if (rc) return rc;
            if (ok) set_bit(row, id);
        }
    if (!m->terminated && m->c->n_token_ids) {
        /* With token-level terminals, the definition itself: accept_token on each id. */
        memset(row, 0, row_words * sizeof *row);
        int32_t saved = m->max_rollback;
        m->max_rollback = -1;
        for (int32_t id = 0; id < v->vocab_size; id++) {
            int acc, rc = xgr_matcher_accept_token(m, id, &acc);
            if (!rc && acc) rc = xgr_matcher_rollback(m, 1);
            if (rc) {
                m->max_rollback = saved;
                return rc;
            }
            if (acc) set_bit(row, id);
        }
        m->max_rollback = saved;
    }
    if (!m->terminated && xgr_parser_can_end(&m->parser))
        for (int32_t i = 0; i < m->n_stop; i++) set_bit(row, m->stop_ids[i]);
    return XGR_OK;
}
