/* _py_arena.c: the CPython frame-chunk cache that stack_chunks.py installs. It is compiled into
 * the extension module beside the core (_build_ffi.py adds it to the sources; the core itself
 * never includes Python.h) and declared to cffi by _build_ffi.py's _PREAMBLE_CDEF.
 *
 * Python 3.11 and 3.12 keep Python frames in per-thread chunks (16 KiB) that are mmap'ed when
 * a call does not fit in the current one and munmap'ed when its first frame returns. A loop
 * whose callee's frame lands just past a chunk's end pays an mmap and a munmap per call
 * (CPython gh-142183, fixed in 3.13 and 3.14 by keeping one chunk per thread): the JSON-schema
 * converter's intersections of service-schema took 2.1 s instead of 0.5 s, 342k mmap/munmap
 * pairs. The interpreter takes these chunks from its arena allocator; this one (stack_chunks.py
 * installs it on those versions) keeps up to XGR2_ARENA_SLOTS freed blocks of at most
 * XGR2_ARENA_MAX bytes for the next request of the same size and hands everything else to the
 * allocator it replaced, which also frees every block in the end. The interpreter calls it with
 * its GIL held; the flag makes it safe under per-interpreter GILs too. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct {
    void *ctx;
    void *(*alloc)(void *ctx, size_t size);
    void (*free)(void *ctx, void *ptr, size_t size);
} xgr2_arena_t; /* PyObjectArenaAllocator (not in the limited API) */

#define XGR2_ARENA_SLOTS 4
#define XGR2_ARENA_MAX ((size_t)64 << 10)

static xgr2_arena_t xgr2_arena_prev;
static struct {
    void *p;
    size_t n;
} xgr2_arena_slot[XGR2_ARENA_SLOTS];
static int xgr2_arena_used;
static uint64_t xgr2_arena_counts[3]; /* served from the slots, passed on, kept */
static atomic_flag xgr2_arena_flag = ATOMIC_FLAG_INIT;

static void xgr2_arena_lock(void) {
    while (atomic_flag_test_and_set_explicit(&xgr2_arena_flag, memory_order_acquire)) {
    }
}

static void xgr2_arena_unlock(void) { atomic_flag_clear_explicit(&xgr2_arena_flag, memory_order_release); }

static void *xgr2_arena_alloc(void *ctx, size_t n) {
    (void)ctx;
    void *p = NULL;
    if (n <= XGR2_ARENA_MAX) {
        xgr2_arena_lock();
        for (int i = xgr2_arena_used - 1; i >= 0 && !p; i--)
            if (xgr2_arena_slot[i].n == n) {
                p = xgr2_arena_slot[i].p;
                xgr2_arena_slot[i] = xgr2_arena_slot[--xgr2_arena_used];
            }
        xgr2_arena_counts[p ? 0 : 1]++;
        xgr2_arena_unlock();
    }
    return p ? p : xgr2_arena_prev.alloc(xgr2_arena_prev.ctx, n);
}

static void xgr2_arena_free(void *ctx, void *p, size_t n) {
    (void)ctx;
    if (p && n <= XGR2_ARENA_MAX) {
        int kept = 0;
        xgr2_arena_lock();
        if (xgr2_arena_used < XGR2_ARENA_SLOTS) {
            xgr2_arena_slot[xgr2_arena_used].p = p;
            xgr2_arena_slot[xgr2_arena_used].n = n;
            xgr2_arena_used++;
            xgr2_arena_counts[2]++;
            kept = 1;
        }
        xgr2_arena_unlock();
        if (kept) return;
    }
    xgr2_arena_prev.free(xgr2_arena_prev.ctx, p, n);
}

/* Installs the caching arena allocator once (under the GIL, which cffi released for the
 * call); 1 when it is in place, 0 when the interpreter has no arena allocator API. */
int xgr2_py_arena_cache_install(void) {
    static int installed;
    int rc = 1;
    PyGILState_STATE g = PyGILState_Ensure();
    if (!installed) {
        void *get = dlsym(RTLD_DEFAULT, "PyObject_GetArenaAllocator");
        void *set = dlsym(RTLD_DEFAULT, "PyObject_SetArenaAllocator");
        if (get && set) {
            xgr2_arena_t mine = {NULL, xgr2_arena_alloc, xgr2_arena_free};
            ((void (*)(xgr2_arena_t *))get)(&xgr2_arena_prev);
            ((void (*)(xgr2_arena_t *))set)(&mine);
            installed = 1;
        } else {
            rc = 0;
        }
    }
    PyGILState_Release(g);
    return rc;
}

/* out[0]: requests served from the kept blocks, out[1]: requests passed on (sizes it keeps),
 * out[2]: blocks kept when freed. */
void xgr2_py_arena_cache_counts(uint64_t out[3]) {
    xgr2_arena_lock();
    for (int i = 0; i < 3; i++) out[i] = xgr2_arena_counts[i];
    xgr2_arena_unlock();
}
