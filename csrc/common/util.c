/* Error reporting and checked allocation for the C core. */
#include "util.h"

#include <stdarg.h>
#include <stdio.h>

/* One message and its status per thread: callers read them right after a failing call. */
static _Thread_local char tls_error[1024];
static _Thread_local int tls_status;

const char *xgr_last_error(void) { return tls_error; }

int xgr_last_status(void) { return tls_status; }

int xgr_fail(int code, const char *fmt, ...) {
    va_list ap;
    tls_status = code;
    va_start(ap, fmt);
    vsnprintf(tls_error, sizeof tls_error, fmt, ap);
    va_end(ap);
    return code;
}

void xgr_free(void *p) { free(p); }

void *xgr_malloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) xgr_fail(XGR_ERR_NOMEM, "out of memory allocating %zu bytes", n);
    return p;
}

void *xgr_calloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) xgr_fail(XGR_ERR_NOMEM, "out of memory allocating %zu x %zu bytes", count, size);
    return p;
}

void *xgr_realloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) xgr_fail(XGR_ERR_NOMEM, "out of memory reallocating %zu bytes", n);
    return q;
}

char *xgr_strndup(const char *s, size_t n) {
    char *p = xgr_malloc(n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

int xgr_chain_grow(xgr_chain ***buckets, size_t *n, size_t first) {
    size_t nb = *n ? *n * 2 : first;
    xgr_chain **b = calloc(nb, sizeof *b);
    if (!b) return -1;
    for (size_t i = 0; i < *n; i++)
        for (xgr_chain *it = (*buckets)[i], *next; it; it = next) {
            next = it->next;
            it->next = b[it->hash & (nb - 1)];
            b[it->hash & (nb - 1)] = it;
        }
    free(*buckets);
    *buckets = b;
    *n = nb;
    return 0;
}

void xgr_chain_unlink(xgr_chain **buckets, size_t n, xgr_chain *it) {
    xgr_chain **pp = &buckets[it->hash & (n - 1)];
    while (*pp && *pp != it) pp = &(*pp)->next;
    if (*pp) *pp = it->next;
}

int xgr_vec_grow_(void **data, size_t *cap, size_t need, size_t elem) {
    size_t ncap = *cap ? *cap : 8;
    while (ncap < need) {
        if (ncap > ((size_t)-1) / 2 / elem) {
            xgr_fail(XGR_ERR_NOMEM, "array size overflow");
            return -1;
        }
        ncap *= 2;
    }
    void *p = xgr_realloc(*data, ncap * elem);
    if (!p) return -1;
    *data = p;
    *cap = ncap;
    return 0;
}
