/* Draft-tree traversal for speculative decoding (xgr_matcher_traverse_draft_tree, xgr2.h):
 * one bitmask row per node of an EAGLE-style token tree, walked depth first with accept /
 * rollback on the matcher. Only the public matcher calls are used. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/util.h"
#include "../include/xgr2.h"

static double now_seconds(void) {
    struct timespec ts;
    if (timespec_get(&ts, TIME_UTC) != TIME_UTC) return 0.0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Edges in [-1, n), no sibling and no parent for the root, at most one incoming edge per
 * node: the walk from the root then visits each node at most once. in_degree: n zeroed
 * counters (scratch). */
static int check_tree(const int64_t *next_token, const int64_t *next_sibling, int32_t n,
                      int32_t *in_degree) {
    if (next_sibling[0] != -1)
        return xgr_fail(XGR_ERR_INVALID_ARG, "The root node must not have siblings");
    for (int k = 0; k < 2; k++) {
        const int64_t *edges = k ? next_sibling : next_token;
        for (int32_t i = 0; i < n; i++) {
            int64_t j = edges[i];
            if (j < -1 || j >= n)
                return xgr_fail(XGR_ERR_INVALID_ARG,
                                "%s[%d] = %lld is out of bounds: it should be in [-1, %d).",
                                k ? "retrieve_next_sibling" : "retrieve_next_token", (int)i,
                                (long long)j, (int)n);
            if (j >= 0) in_degree[j]++;
        }
    }
    if (in_degree[0])
        return xgr_fail(XGR_ERR_INVALID_ARG,
                        "The root node must not be the child or sibling of a node");
    for (int32_t i = 1; i < n; i++)
        if (in_degree[i] > 1)
            return xgr_fail(XGR_ERR_INVALID_ARG,
                            "Node %d is the target of %d retrieve_next_token / "
                            "retrieve_next_sibling entries; the draft tree must not contain "
                            "cycles or shared nodes.",
                            (int)i, (int)in_degree[i]);
    return XGR_OK;
}

/* Fills the node's row; *live = 0 when the matcher is terminated there (zero row). */
static int fill_node(xgr_matcher *m, int32_t *row, size_t row_words, int *live) {
    *live = !xgr_matcher_is_terminated(m);
    if (!*live) {
        if (row_words) memset(row, 0, row_words * sizeof *row);
        return XGR_OK;
    }
    return xgr_matcher_fill_bitmask(m, row, row_words, NULL);
}

/* Trees up to this many nodes walk with scratch on the stack (no allocation per call). */
enum { SMALL_TREE = 256 };

static int walk(xgr_matcher *m, const int64_t *next_token, const int64_t *next_sibling,
                const int64_t *draft_tokens, int32_t *bitmask, size_t row_stride,
                size_t row_words, double time_threshold, int64_t *cursors, int *completed);

int xgr_matcher_traverse_draft_tree(xgr_matcher *m, const int64_t *next_token,
                                    const int64_t *next_sibling, const int64_t *draft_tokens,
                                    int32_t n, int32_t *bitmask, size_t row_stride,
                                    size_t row_words, double time_threshold, int *completed) {
    if (!m || !next_token || !next_sibling || !draft_tokens || !completed ||
        (!bitmask && row_words) || row_stride < row_words)
        return xgr_fail(XGR_ERR_INVALID_ARG, "traverse_draft_tree: bad argument");
    *completed = 0;
    if (n <= 0) return xgr_fail(XGR_ERR_INVALID_ARG, "The draft tree must not be empty");
    /* scratch: n in-degree counters for the check, n + 1 cursors for the walk */
    int32_t small_degree[SMALL_TREE];
    int64_t small_cursors[SMALL_TREE + 1];
    int32_t *in_degree = small_degree;
    int64_t *cursors = small_cursors;
    if (n > SMALL_TREE) {
        in_degree = xgr_malloc((size_t)n * sizeof *in_degree);
        cursors = xgr_malloc(((size_t)n + 1) * sizeof *cursors);
        if (!in_degree || !cursors) {
            free(in_degree);
            free(cursors);
            return XGR_ERR_NOMEM;
        }
    }
    memset(in_degree, 0, (size_t)n * sizeof *in_degree);
    int rc = check_tree(next_token, next_sibling, n, in_degree);
    if (!rc)
        rc = walk(m, next_token, next_sibling, draft_tokens, bitmask, row_stride, row_words,
                  time_threshold, cursors, completed);
    if (n > SMALL_TREE) {
        free(in_degree);
        free(cursors);
    }
    return rc;
}

int xgr_matcher_traverse_draft_tree_ret(xgr_matcher *m, uintptr_t next_token,
                                        uintptr_t next_sibling, uintptr_t draft_tokens,
                                        int64_t n_next_token, int64_t n_next_sibling,
                                        int64_t n_draft_tokens, int32_t *bitmask,
                                        int64_t bitmask_rows, size_t row_stride,
                                        size_t row_words, double time_threshold) {
    int rc;
    if (n_next_sibling != n_next_token)
        rc = xgr_fail(XGR_ERR_INVALID_ARG, "The retrieve_next_token and retrieve_next_sibling "
                                           "tensors must have the same length");
    else if (n_draft_tokens != n_next_token)
        rc = xgr_fail(XGR_ERR_INVALID_ARG,
                      "The retrieve_next_token and draft_tokens tensors must have the same length");
    else if (bitmask_rows != n_next_token)
        rc = xgr_fail(XGR_ERR_INVALID_ARG,
                      "The token_bitmask batch size must match the number of nodes in the tree "
                      "(%lld), got %lld",
                      (long long)n_next_token, (long long)bitmask_rows);
    else if (n_next_token <= 0) /* (before the pointers: an empty tensor's may be NULL) */
        rc = xgr_fail(XGR_ERR_INVALID_ARG, "The draft tree must not be empty");
    else if (n_next_token > INT32_MAX)
        rc = xgr_fail(XGR_ERR_INVALID_ARG,
                      "The draft tree has %lld nodes; at most 2**31 - 1 are supported",
                      (long long)n_next_token);
    else {
        int completed = 0;
        rc = xgr_matcher_traverse_draft_tree(
            m, (const int64_t *)next_token, (const int64_t *)next_sibling,
            (const int64_t *)draft_tokens, (int32_t)n_next_token, bitmask, row_stride,
            row_words, time_threshold, &completed);
        if (!rc) return completed;
    }
    return -rc;
}

/* The walk of a checked tree of n nodes; cursors: n + 1 entries of scratch. */
static int walk(xgr_matcher *m, const int64_t *next_token, const int64_t *next_sibling,
                const int64_t *draft_tokens, int32_t *bitmask, size_t row_stride,
                size_t row_words, double time_threshold, int64_t *cursors, int *completed) {
    double start = time_threshold > 0 ? now_seconds() : 0.0;
    /* cursors[k]: the next node to look at among the children of the node at depth k of
     * the current path; the matcher is k steps past its starting state. */
    int32_t depth = 0;
    int live, rc;
    if ((rc = fill_node(m, bitmask, row_words, &live))) return rc;
    cursors[0] = live ? next_token[0] : -1;
    int timed_out = 0;
    for (;;) {
        int64_t node = cursors[depth];
        if (node == -1) {
            if (depth == 0) break;
            if ((rc = xgr_matcher_rollback(m, 1))) goto out;
            depth--;
            continue;
        }
        if (time_threshold > 0 && now_seconds() - start > time_threshold) {
            timed_out = 1;
            break;
        }
        cursors[depth] = next_sibling[node];
        int32_t *row = row_words ? bitmask + (size_t)node * row_stride : bitmask;
        int64_t token = draft_tokens[node];
        int accepted = 0;
        if (token >= 0 && token <= INT32_MAX) {
            rc = xgr_matcher_accept_token(m, (int32_t)token, &accepted);
            if (rc == XGR_ERR_INVALID_ARG) rc = XGR_OK, accepted = 0; /* outside the vocabulary */
            if (rc) goto out;
        }
        if (!accepted) {
            if (row_words) memset(row, 0, row_words * sizeof *row);
            continue;
        }
        /* (depth + 1 <= n - 1: each node is entered at most once, the root never) */
        depth++;
        if ((rc = fill_node(m, row, row_words, &live))) goto out;
        cursors[depth] = live ? next_token[node] : -1;
    }
    *completed = !timed_out;
out:
    if (depth) {
        int rc2 = xgr_matcher_rollback(m, depth);
        if (!rc) rc = rc2;
    }
    return rc;
}
