/* Read-only file images with a reference count (file_map.h). POSIX: open + fstat + mmap
 * (PROT_READ, MAP_SHARED: the pages are the page cache's, shared by every process that maps
 * the file); elsewhere, or on a network filesystem, the file is read into one heap block.
 * Nothing is ever written through an image. */
#if defined(__linux__) || defined(__APPLE__) || defined(__FreeBSD__) || defined(__unix__)
#define _DEFAULT_SOURCE 1
#define _DARWIN_C_SOURCE 1
#define XGR_FILE_MAP_POSIX 1
#endif
#include "file_map.h"

#include <errno.h>
#include <stdio.h>

#include "util.h"

#ifdef XGR_FILE_MAP_POSIX
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/vfs.h>
#elif defined(__APPLE__) || defined(__FreeBSD__)
#include <sys/mount.h>
#include <sys/param.h>
#endif
#endif

void xgr_file_map_retain(xgr_file_map *m) {
    if (m) atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
}

static void map_free(xgr_file_map *m) {
#ifdef XGR_FILE_MAP_POSIX
    if (m->mapped) munmap((void *)m->data, m->map_len);
    else free((void *)m->data);
#else
    free((void *)m->data);
#endif
    free(m);
}

void xgr_file_map_release(xgr_file_map *m) {
    if (m && atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) == 1) map_free(m);
}

const uint8_t *xgr_file_map_data(const xgr_file_map *m, size_t *len) {
    if (len) *len = m ? m->len : 0;
    return m ? m->data : NULL;
}

int xgr_file_map_is_mapped(const xgr_file_map *m) {
    return m ? m->mapped : 0;
}

int32_t xgr_file_map_refs(const xgr_file_map *m) {
    return m ? (int32_t)atomic_load(&m->refs) : 0;
}

static xgr_file_map *map_new(const uint8_t *data, size_t len, int mapped) {
    xgr_file_map *m = xgr_malloc(sizeof *m);
    if (!m) return NULL;
    atomic_init(&m->refs, 1);
    m->data = data;
    m->len = len;
    m->mapped = mapped;
    m->map_len = len;
    return m;
}

int xgr_file_map_from_bytes(const uint8_t *buf, size_t len, xgr_file_map **out) {
    if (!out || (!buf && len)) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_file_map_from_bytes: NULL argument");
    *out = NULL;
    uint8_t *copy = xgr_malloc(len ? len : 1);
    if (!copy) return xgr_fail(XGR_ERR_NOMEM, "xgr_file_map_from_bytes: out of memory");
    if (len) memcpy(copy, buf, len);
    xgr_file_map *m = map_new(copy, len, 0);
    if (!m) {
        free(copy);
        return xgr_fail(XGR_ERR_NOMEM, "xgr_file_map_from_bytes: out of memory");
    }
    *out = m;
    return XGR_OK;
}

#ifdef XGR_FILE_MAP_POSIX
/* Whether fd's filesystem is local, so a mapping cannot fault because another machine
 * removed or changed the file (on NFS a page read back after another client's unlink is a
 * SIGBUS). Unknown filesystems count as not local. */
static int fs_local(int fd) {
#if defined(__linux__)
    struct statfs s;
    if (fstatfs(fd, &s) != 0) return 0;
    switch ((unsigned long)s.f_type) {
    case 0xEF53UL:     /* ext2/3/4 */
    case 0x58465342UL: /* xfs */
    case 0x9123683EUL: /* btrfs */
    case 0x01021994UL: /* tmpfs */
    case 0x794C7630UL: /* overlayfs */
    case 0x2FC12FC1UL: /* zfs */
    case 0xF2F52010UL: /* f2fs */
    case 0x3153464AUL: /* jfs */
    case 0x52654973UL: /* reiserfs */
    case 0x858458F6UL: /* ramfs */
    case 0x4D44UL:     /* vfat */
        return 1;
    default:
        return 0;
    }
#elif defined(__APPLE__) || defined(__FreeBSD__)
    struct statfs s;
    return fstatfs(fd, &s) == 0 && (s.f_flags & MNT_LOCAL);
#else
    (void)fd;
    return 0;
#endif
}

/* Reads the whole file (size bytes) into a heap block. */
static int read_all(int fd, size_t size, uint8_t **out) {
    uint8_t *buf = xgr_malloc(size ? size : 1);
    if (!buf) return XGR_ERR_NOMEM;
    size_t got = 0;
    while (got < size) {
        ssize_t k = read(fd, buf + got, size - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) { /* an error, or the file shrank: refused */
            free(buf);
            return XGR_ERR_INVALID_ARG;
        }
        got += (size_t)k;
    }
    *out = buf;
    return XGR_OK;
}
#endif

int xgr_file_map_open(const char *path, int mode, size_t max_len, xgr_file_map **out) {
    if (!path || !out) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_file_map_open: NULL argument");
    *out = NULL;
#ifdef XGR_FILE_MAP_POSIX
    int fd;
    do fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_file_map_open: cannot open: %s", strerror(errno));
    struct stat st;
    int rc = XGR_OK;
    const char *why = NULL;
    if (fstat(fd, &st) != 0) rc = XGR_ERR_INVALID_ARG, why = strerror(errno);
    else if (!S_ISREG(st.st_mode)) rc = XGR_ERR_INVALID_ARG, why = "not a regular file";
    else if (st.st_size < 0 || (uint64_t)st.st_size > (uint64_t)max_len) rc = XGR_ERR_LIMIT, why = "too long";
    size_t size = rc ? 0 : (size_t)st.st_size;
    const uint8_t *data = NULL;
    int mapped = 0;
    if (mode == XGR_FILE_MAP_SMALL)
        mode = size <= XGR_FILE_MAP_SMALL_BYTES ? XGR_FILE_MAP_READ : XGR_FILE_MAP_AUTO;
    if (!rc && size && (mode == XGR_FILE_MAP_MMAP || (mode == XGR_FILE_MAP_AUTO && fs_local(fd)))) {
        void *p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) data = p, mapped = 1;
    }
    if (!rc && !mapped) {
        uint8_t *buf = NULL;
        rc = read_all(fd, size, &buf);
        if (rc == XGR_ERR_INVALID_ARG) why = "short read";
        data = buf;
    }
    close(fd);
    if (rc == XGR_ERR_NOMEM) return xgr_fail(rc, "xgr_file_map_open: out of memory");
    if (rc) return xgr_fail(rc, "xgr_file_map_open: %s", why);
    xgr_file_map *m = map_new(data, size, mapped);
    if (!m) {
        if (mapped) munmap((void *)data, size);
        else free((void *)data);
        return xgr_fail(XGR_ERR_NOMEM, "xgr_file_map_open: out of memory");
    }
    *out = m;
    return XGR_OK;
#else
    (void)mode;
    FILE *f = fopen(path, "rb");
    if (!f) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_file_map_open: cannot open");
    XGR_VEC(uint8_t) b = {0};
    int rc = XGR_OK;
    for (;;) {
        if (XGR_VEC_RESERVE(b, b.len + 65536)) {
            rc = XGR_ERR_NOMEM;
            break;
        }
        size_t k = fread(b.data + b.len, 1, 65536, f);
        b.len += k;
        if (b.len > max_len) rc = XGR_ERR_LIMIT;
        if (rc || k < 65536) break;
    }
    if (!rc && ferror(f)) rc = XGR_ERR_INVALID_ARG;
    fclose(f);
    xgr_file_map *m = rc ? NULL : map_new(b.data, b.len, 0);
    if (!m) {
        XGR_VEC_FREE(b);
        return xgr_fail(rc ? rc : XGR_ERR_NOMEM, "xgr_file_map_open: %s",
                        rc == XGR_ERR_LIMIT ? "too long" : rc ? "read error" : "out of memory");
    }
    *out = m;
    return XGR_OK;
#endif
}
