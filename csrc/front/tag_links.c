/* xgr_grammar_triggered_links: the grammar of the commonest tool-calling request whose
 * tags were all seen before, built straight into the IR.
 *
 * The request is one triggered_tags format with a single trigger, every tag's content a
 * linked fragment (structural_tag/fast_link.py). The EBNF text of that grammar is a few
 * bytes per tool, but writing it in Python and parsing it again cost about a third of such
 * a request; the rules here are the ones xgr_grammar_from_ebnf builds from that text, in
 * the same order (tests/structural_tag/test_link.py compares their prints):
 *
 *   root ::= triggered_tags
 *   <stand-in> ::= "L"                      one per distinct stand-in, first use first
 *   triggered_tags_group ::= (rest_i stand-in_i end_i) | ...    empty parts left out
 *   triggered_tags ::= TagDispatch((trigger, triggered_tags_group), loop, excludes) */
#include "front.h"

#include <string.h>

static const char *const reserved[3] = {"root", "triggered_tags", "triggered_tags_group"};

/* The rule body of alternative i: its non-empty parts in order, one part bare. */
static int32_t alternative(xgr_grammar *g, const uint8_t *rest, size_t rest_len, int32_t rule,
                           const uint8_t *end, size_t end_len) {
    int32_t parts[3];
    size_t n = 0;
    if (rest_len && (parts[n++] = xgr_ir_bytes(g, rest, rest_len)) < 0) return -1;
    if ((parts[n++] = xgr_ir_ref(g, rule)) < 0) return -1;
    if (end_len && (parts[n++] = xgr_ir_bytes(g, end, end_len)) < 0) return -1;
    return n == 1 ? parts[0] : xgr_ir_seq(g, parts, n);
}

int xgr_grammar_triggered_links(const uint8_t *data, const uint32_t *offsets, size_t n_tags,
                                size_t n_excl, int loop_after_dispatch, xgr_grammar **out) {
    if (!out) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_grammar_triggered_links: out is NULL");
    *out = NULL;
    if (!data || !offsets || n_tags == 0 || n_tags > (size_t)INT32_MAX / 8 ||
        n_excl > (size_t)INT32_MAX / 8)
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_grammar_triggered_links: bad argument");
    size_t n_str = 1 + 3 * n_tags + n_excl;
    for (size_t k = 0; k < n_str; k++)
        if (offsets[k + 1] < offsets[k])
            return xgr_fail(XGR_ERR_INVALID_ARG,
                            "xgr_grammar_triggered_links: offsets decrease at string %zu", k);
#define STR(k) (data + offsets[k])
#define LEN(k) ((size_t)(offsets[(k) + 1] - offsets[k]))
    if (!LEN(0)) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_grammar_triggered_links: empty trigger");
    for (size_t i = 0; i < n_tags; i++) {
        const char *name = (const char *)STR(2 + 3 * i);
        size_t len = LEN(2 + 3 * i);
        if (!len || memchr(name, 0, len))
            return xgr_fail(XGR_ERR_INVALID_ARG,
                            "xgr_grammar_triggered_links: stand-in %zu has an empty name or a NUL", i);
        for (int k = 0; k < 3; k++)
            if (len == strlen(reserved[k]) && memcmp(name, reserved[k], len) == 0)
                return xgr_fail(XGR_ERR_INVALID_ARG,
                                "xgr_grammar_triggered_links: stand-in %zu is named '%s'", i,
                                reserved[k]);
    }
    for (size_t j = 0; j < n_excl; j++)
        if (!LEN(1 + 3 * n_tags + j))
            return xgr_fail(XGR_ERR_INVALID_ARG,
                            "xgr_grammar_triggered_links: excluded string %zu is empty", j);
    xgr_grammar *g = xgr_ir_new();
    int32_t *alts = xgr_malloc(n_tags * sizeof *alts);
    const uint8_t **excl = xgr_malloc((n_excl + 1) * sizeof *excl);
    size_t *excl_len = xgr_malloc((n_excl + 1) * sizeof *excl_len);
    int rc = XGR_OK;
    if (!g || !alts || !excl || !excl_len) {
        rc = XGR_ERR_NOMEM;
        goto done;
    }
    int32_t root = xgr_ir_rule(g, "root", 4), body;
    if (root < 0) goto ir_failed;
    /* Stand-ins first, in first-use order, as the text defines them. */
    for (size_t i = 0; i < n_tags; i++) {
        const char *name = (const char *)STR(2 + 3 * i);
        size_t len = LEN(2 + 3 * i);
        if (xgr_ir_find_rule(g, name, len) >= 0) continue;
        int32_t r = xgr_ir_rule(g, name, len);
        if (r < 0 || (body = xgr_ir_bytes(g, (const uint8_t *)"L", 1)) < 0) goto ir_failed;
        g->rules.data[r].body = body;
    }
    int32_t group = xgr_ir_rule(g, reserved[2], strlen(reserved[2]));
    int32_t tt = group < 0 ? -1 : xgr_ir_rule(g, reserved[1], strlen(reserved[1]));
    if (tt < 0) goto ir_failed;
    for (size_t i = 0; i < n_tags; i++) {
        int32_t r = xgr_ir_find_rule(g, (const char *)STR(2 + 3 * i), LEN(2 + 3 * i));
        alts[i] = alternative(g, STR(1 + 3 * i), LEN(1 + 3 * i), r, STR(3 + 3 * i), LEN(3 + 3 * i));
        if (alts[i] < 0) goto ir_failed;
    }
    if ((body = n_tags == 1 ? alts[0] : xgr_ir_alt(g, alts, n_tags)) < 0) goto ir_failed;
    g->rules.data[group].body = body;
    for (size_t j = 0; j < n_excl; j++) {
        excl[j] = STR(1 + 3 * n_tags + j);
        excl_len[j] = LEN(1 + 3 * n_tags + j);
    }
    const uint8_t *trig = STR(0);
    size_t trig_len = LEN(0);
    if ((body = xgr_ir_tag_dispatch(g, &trig, &trig_len, &group, 1, excl, excl_len, n_excl,
                                    loop_after_dispatch)) < 0)
        goto ir_failed;
    g->rules.data[tt].body = body;
    if ((body = xgr_ir_ref(g, tt)) < 0) goto ir_failed;
    g->rules.data[root].body = body;
    g->root = root;
    if ((rc = xgr_ir_validate(g))) goto done;
    *out = g;
    g = NULL;
    goto done;
ir_failed:
    rc = xgr_front_ir_status();
done:
#undef STR
#undef LEN
    xgr_ir_free(g);
    free(alts);
    free(excl);
    free(excl_len);
    return rc;
}
