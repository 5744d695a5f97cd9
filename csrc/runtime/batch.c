/* Parallel bitmask filling for a batch of matchers (one matcher per worker at a time). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>

#include "../common/util.h"

typedef struct {
    xgr_matcher *const *ms;
    size_t n;
    int32_t *bitmask;
    size_t row_words;
    const int32_t *indices;
    atomic_size_t next;
    atomic_int status;
    char message[512]; /* first failing worker's message, guarded by status CAS */
} batch_job;

static void *worker(void *arg) {
    batch_job *j = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&j->next, 1);
        if (i >= j->n || atomic_load(&j->status) != XGR_OK) break;
        size_t r = j->indices ? (size_t)j->indices[i] : i;
        /* (row_words 0, an empty vocabulary: bitmask may be NULL, and is not offset) */
        int32_t *row = j->row_words ? j->bitmask + r * j->row_words : j->bitmask;
        int rc = xgr_matcher_fill_bitmask(j->ms[i], row, j->row_words, NULL);
        if (rc) {
            int expected = XGR_OK;
            if (atomic_compare_exchange_strong(&j->status, &expected, rc)) {
                strncpy(j->message, xgr_last_error(), sizeof j->message - 1);
                j->message[sizeof j->message - 1] = '\0';
            }
            break;
        }
    }
    return NULL;
}

int xgr_fill_bitmask_batch(xgr_matcher *const *ms, size_t n, int32_t *bitmask,
                           size_t row_words, const int32_t *indices, int n_threads) {
    if ((!ms && n) || (!bitmask && n && row_words))
        return xgr_fail(XGR_ERR_INVALID_ARG, "fill_bitmask_batch: NULL argument");
    for (size_t i = 0; i < n; i++) {
        if (!ms[i]) return xgr_fail(XGR_ERR_INVALID_ARG, "fill_bitmask_batch: matcher %zu is NULL", i);
        if (indices && indices[i] < 0)
            return xgr_fail(XGR_ERR_INVALID_ARG, "fill_bitmask_batch: negative row index %d",
                            (int)indices[i]);
        for (size_t k = 0; k < i && n <= 4096; k++)
            if (ms[k] == ms[i])
                return xgr_fail(XGR_ERR_INVALID_ARG,
                                "fill_bitmask_batch: matcher %zu appears twice in the batch", i);
    }
    batch_job j;
    j.ms = ms;
    j.n = n;
    j.bitmask = bitmask;
    j.row_words = row_words;
    j.indices = indices;
    atomic_init(&j.next, 0);
    atomic_init(&j.status, XGR_OK);
    j.message[0] = '\0';
    size_t nt = n_threads > 1 ? (size_t)n_threads : 1;
    if (nt > n) nt = n ? n : 1;
    if (nt > 64) nt = 64;
    pthread_t th[64];
    size_t started = 0;
    for (size_t t = 1; t < nt; t++) {
        if (pthread_create(&th[started], NULL, worker, &j) != 0) break; /* run with fewer */
        started++;
    }
    worker(&j);
    for (size_t t = 0; t < started; t++) pthread_join(th[t], NULL);
    int rc = atomic_load(&j.status);
    if (rc) return xgr_fail(rc, "%s", j.message);
    return XGR_OK;
}
