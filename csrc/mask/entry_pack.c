/* Entry packs: the shareable entries of the cross-grammar cache (global_cache.c) written
 * as one byte string and read back, every count, offset and token id checked, so another
 * process with the same vocabulary starts with the entries this one computed.
 *
 * Layout (native byte order, an order mark refuses any other; every array 8-aligned):
 *   magic "XGR2MSK\0", u32 order mark, u32 version, u64 vocabulary fingerprint,
 *   i32 vocab_size, n_sorted, row_words, n_entries; u32 n_keys, 0; per key (a rule's
 *   closure key, held once for all of its states' entries): u64 hash, u32 length, 0, its
 *   bytes; then per entry: u32 key index, i32 local state, 12 x i32 (form, n_ids,
 *   n_accepted, wants_context, n_uncertain, n_pops, n_runs or -1, max_units or 0,
 *   n_unit_ids, psfx groups or -1, psfx bytes, 0), then ids (or the bitset), uncertain,
 *   pop_begin, pop_depth (u16), run_begin, run_pos, unit_ids, unit_end, psfx group, off,
 *   bytes.
 * Loading checks the whole pack, then inserts its entries into the cache: copies (one
 * block each, as entry.c builds them; xgr_mask_pack_load), or entries that borrow their
 * arrays from a read-only file image and hold a reference to it (xgr_mask_pack_load_mapped:
 * no copy, so processes that map the same pack share its pages). A pack that fails any
 * check is refused whole: nothing of it is inserted. */
#include "entry_pack.h"

#include "../common/file_map.h"
#include "entry.h"
#include "global_cache.h"

#define PACK_MAGIC "XGR2MSK"
#define PACK_ORDER 0x01020304u
#define PACK_VERSION 1u
#define PACK_FIELDS 12
#define PACK_MAX_KEY ((size_t)1 << 26)

int xgr_entry_packable(const xgr_mask_entry *e) {
    if (e->form < XGR_MASK_ACCEPTED_LIST || e->form > XGR_MASK_BITSET) return 0;
    if (e->base || e->owns_base || e->ids_by_len || e->exit_first || e->unit_open || e->uoff || e->sfx ||
        e->in_arena)
        return 0;
    if (e->form == XGR_MASK_BITSET ? !e->bits : !e->ids) return 0;
    if (e->n_uncertain && (!e->uncertain || !e->pop_begin || !e->pop_depth)) return 0;
    if (!e->run_begin != !e->run_pos) return 0;
    if (!e->unit_ids != !e->unit_end) return 0;
    if (e->psfx && (e->psfx->exit || !e->psfx->group || !e->psfx->off)) return 0;
    return 1;
}

/* ---- writing -------------------------------------------------------------------------- */

typedef xgr_pack_bytes bytes_out;

int xgr_pack_put(bytes_out *b, const void *p, size_t n) {
    size_t pad = (8 - (n & 7)) & 7;
    if (XGR_VEC_RESERVE(*b, b->len + n + pad)) return XGR_ERR_NOMEM;
    if (n) memcpy(b->data + b->len, p, n);
    memset(b->data + b->len + n, 0, pad);
    b->len += n + pad;
    return XGR_OK;
}
#define put xgr_pack_put

int xgr_pack_put_plain(xgr_pack_bytes *b, const struct xgr_vocab *v, const xgr_mask_entry *e) {
    int32_t n_unc = e->n_uncertain, n_pops = n_unc ? e->pop_begin[n_unc] : 0;
    int32_t f[PACK_FIELDS] = {e->form, e->form == XGR_MASK_BITSET ? 0 : e->n_ids, e->n_accepted,
                              e->wants_context ? 1 : 0, n_unc, n_pops,
                              e->run_begin ? e->n_runs : -1, e->unit_ids ? e->max_units : 0,
                              e->unit_ids ? e->unit_end[0] : 0, e->psfx ? e->psfx->n : -1,
                              e->psfx ? (int32_t)e->psfx->off[e->psfx->n] : 0, 0};
    int32_t zero = 0;
    int rc = put(b, f, sizeof f);
    if (!rc) rc = e->form == XGR_MASK_BITSET ? put(b, e->bits, (size_t)v->row_words * 4)
                                            : put(b, e->ids, (size_t)e->n_ids * 4);
    if (!rc) rc = put(b, e->uncertain, (size_t)n_unc * 4);
    if (!rc) rc = n_unc ? put(b, e->pop_begin, ((size_t)n_unc + 1) * 4) : put(b, &zero, 4);
    if (!rc) rc = put(b, e->pop_depth, (size_t)n_pops * 2);
    if (!rc && e->run_begin) rc = put(b, e->run_begin, ((size_t)e->n_runs + 1) * 4);
    if (!rc && e->run_begin) rc = put(b, e->run_pos, (size_t)e->n_runs * 4);
    if (!rc && e->unit_ids) rc = put(b, e->unit_ids, (size_t)e->unit_end[0] * 4);
    if (!rc && e->unit_ids) rc = put(b, e->unit_end, ((size_t)e->max_units + 2) * 4);
    if (!rc && e->psfx) rc = put(b, e->psfx->group, (size_t)n_unc * 4);
    if (!rc && e->psfx) rc = put(b, e->psfx->off, ((size_t)e->psfx->n + 1) * 4);
    if (!rc && e->psfx) rc = put(b, e->psfx->bytes, e->psfx->off[e->psfx->n]);
    return rc;
}

static int put_entry(bytes_out *b, const struct xgr_vocab *v, const xgr_gcache_item *it,
                     uint32_t key_index) {
    int32_t h[2] = {(int32_t)key_index, it->local_state};
    int rc = put(b, h, sizeof h);
    return rc ? rc : xgr_pack_put_plain(b, v, it->entry);
}

/* kidx[i] = the index of item i's key among the distinct keys, in order of first use;
 * returns the number of keys, or -1 without memory. */
static int64_t key_indexes(const xgr_gcache_item *items, size_t n, uint32_t *kidx) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    size_t *slot = xgr_malloc(cap * sizeof *slot); /* item index + 1, 0: empty */
    if (!slot) return -1;
    memset(slot, 0, cap * sizeof *slot);
    uint32_t n_keys = 0;
    for (size_t i = 0; i < n; i++) {
        size_t h = (size_t)(((uintptr_t)items[i].key_ref >> 4) * 0x9e3779b97f4a7c15ULL) & (cap - 1);
        while (slot[h] && items[slot[h] - 1].key_ref != items[i].key_ref) h = (h + 1) & (cap - 1);
        if (slot[h]) kidx[i] = kidx[slot[h] - 1];
        else {
            slot[h] = i + 1;
            kidx[i] = n_keys++;
        }
    }
    free(slot);
    return n_keys;
}

/* unit_end[0] counts every unit id (units > 0 start after every larger one: mask_cache.c
 * set_units), so it is the list's length. */
int xgr_mask_pack_build(const xgr_vocab *v, uint64_t after_seq, uint8_t **out, size_t *out_len,
                        uint64_t *last_seq, int32_t *n_entries) {
    if (!v || !out || !out_len || !last_seq || !n_entries)
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_mask_pack_build: NULL argument");
    *out = NULL;
    *out_len = 0;
    *n_entries = 0;
    xgr_gcache_item *items = NULL;
    size_t n = 0;
    int rc = xgr_gcache_collect(v->fingerprint, after_seq, xgr_entry_packable, &items, &n, last_seq);
    if (rc) return xgr_fail(rc, "xgr_mask_pack_build: out of memory");
    bytes_out b = {0};
    struct {
        char magic[8];
        uint32_t order, version;
        uint64_t fp;
        int32_t vocab_size, n_sorted, row_words, n_entries;
    } hd;
    memset(&hd, 0, sizeof hd);
    memcpy(hd.magic, PACK_MAGIC, sizeof PACK_MAGIC);
    hd.order = PACK_ORDER;
    hd.version = PACK_VERSION;
    hd.fp = v->fingerprint;
    hd.vocab_size = v->vocab_size;
    hd.n_sorted = v->n_sorted;
    hd.row_words = v->row_words;
    /* each distinct key once, in order of first use */
    uint32_t *kidx = xgr_malloc((n + 1) * sizeof *kidx);
    int64_t n_keys = kidx ? key_indexes(items, n, kidx) : -1;
    int32_t kept = 0;
    if (n_keys < 0) rc = XGR_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) kept += items[i].local_state >= -1;
    hd.n_entries = kept;
    if (!rc) rc = put(&b, &hd, sizeof hd);
    uint32_t nk[2] = {(uint32_t)(n_keys < 0 ? 0 : n_keys), 0}, next = 0;
    if (!rc) rc = put(&b, nk, sizeof nk);
    for (size_t i = 0; i < n && !rc; i++) {
        if (kidx[i] != next) continue; /* not this key's first use */
        next++;
        const xgr_gcache_item *it = &items[i];
        struct {
            uint64_t hash;
            uint32_t len, zero;
        } kh = {it->hash, (uint32_t)it->key_len, 0};
        rc = it->key_len > PACK_MAX_KEY ? XGR_ERR_INVALID_ARG : put(&b, &kh, sizeof kh);
        if (!rc) rc = put(&b, it->key, it->key_len);
    }
    for (size_t i = 0; i < n && !rc; i++)
        if (items[i].local_state >= -1) rc = put_entry(&b, v, &items[i], kidx[i]);
    free(kidx);
    xgr_gcache_items_free(items, n);
    if (rc) {
        XGR_VEC_FREE(b);
        return xgr_fail(rc, "xgr_mask_pack_build: %s",
                        rc == XGR_ERR_NOMEM ? "out of memory" : "a key over 64 MiB");
    }
    *out = b.data;
    *out_len = b.len;
    *n_entries = kept;
    return XGR_OK;
}

/* ---- reading -------------------------------------------------------------------------- */

typedef xgr_pack_reader reader;

/* The next count * size bytes (8-padded), or NULL when the pack is shorter. */
const void *xgr_pack_take(reader *r, size_t count, size_t size) {
    if (size && count > r->left / size) return NULL;
    size_t n = count * size, pad = (8 - (n & 7)) & 7;
    if (n + pad > r->left) return NULL;
    const void *p = r->p;
    r->p += n + pad;
    r->left -= n + pad;
    return p;
}
#define take xgr_pack_take

int xgr_pack_is_text(const struct xgr_vocab *v, int32_t id) {
    return id >= 0 && id < v->vocab_size && id < v->n_tokens &&
           (v->text_bits[id >> 5] >> (id & 31) & 1u);
}

#define is_text xgr_pack_is_text

static int ids_ok(const struct xgr_vocab *v, const int32_t *ids, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        if (!is_text(v, ids[i])) return 0;
    return 1;
}

typedef struct {
    uint64_t hash;
    const uint8_t *bytes; /* into the pack */
    uint32_t len;
} pack_key;

typedef struct {
    const pack_key *key;
    int32_t local;
    xgr_mask_entry *e;
} loaded;

/* An entry whose arrays point into map (the pack's checked bytes), holding a reference to
 * it; e->bytes counts the arrays as a copy would, so the cache's budget is unchanged. */
static xgr_mask_entry *borrowed_entry(xgr_file_map *map, int32_t form, int32_t n_ids, const int32_t *ids,
                                      const uint32_t *bits, size_t rw, int32_t n_unc, const int32_t *unc,
                                      const int32_t *pb, int32_t n_pops, const uint16_t *pd,
                                      int32_t n_runs, const int32_t *rb, const int32_t *rp,
                                      int32_t max_units, int32_t n_unit, const int32_t *ui,
                                      const int32_t *ue, int32_t ps_n, const int32_t *pg,
                                      const uint32_t *po, const uint8_t *pbytes, int32_t ps_bytes) {
    xgr_mask_entry *e = xgr_calloc(1, sizeof *e);
    xgr_region_sfx *S = pg && e ? xgr_calloc(1, sizeof *S) : NULL;
    if (!e || (pg && !S)) {
        free(e);
        return NULL;
    }
    atomic_init(&e->refcount, 1);
    e->form = form;
    e->bytes = sizeof *e;
    if (bits) {
        e->bits = (uint32_t *)bits;
        e->bytes += rw * 4;
    } else {
        e->ids = (int32_t *)ids;
        e->n_ids = n_ids;
        e->bytes += ((size_t)n_ids + 1) * 4;
    }
    e->n_uncertain = n_unc;
    e->uncertain = (int32_t *)unc;
    e->pop_begin = (int32_t *)pb;
    e->pop_depth = (uint16_t *)pd;
    e->bytes += ((size_t)n_unc + 1) * 8 + ((size_t)n_pops + 1) * 2;
    if (rb) {
        e->n_runs = n_runs;
        e->run_begin = (int32_t *)rb;
        e->run_pos = (int32_t *)rp;
        e->bytes += ((size_t)n_runs + 1) * 8;
    }
    if (ue) {
        e->max_units = max_units;
        e->unit_ids = (int32_t *)ui;
        e->unit_end = (int32_t *)ue;
        e->bytes += ((size_t)n_unit + 1) * 4 + ((size_t)max_units + 2) * 4;
    }
    if (S) {
        S->n = ps_n;
        S->group = (int32_t *)pg;
        S->off = (uint32_t *)po;
        S->bytes = (uint8_t *)pbytes;
        S->mem = sizeof *S + ((size_t)n_unc + 1) * 4 + ((size_t)ps_n + 2) * 4 + (size_t)ps_bytes + 1;
        e->psfx = S;
        e->bytes += S->mem;
    }
    e->map = map;
    xgr_file_map_retain(map);
    return e;
}

/* One entry, checked, then copied (map NULL) or borrowed from map; *why names the first
 * failed check. */
static int read_entry(reader *r, const struct xgr_vocab *v, const pack_key *keys, uint32_t n_keys,
                      loaded *out, const char **why, xgr_file_map *map) {
    const uint8_t *hp = take(r, 8, 1);
    if (!hp) return *why = "truncated entry", XGR_ERR_INVALID_ARG;
    uint32_t key_index;
    memcpy(&key_index, hp, 4);
    memcpy(&out->local, hp + 4, 4);
    if (out->local < -1) return *why = "local state", XGR_ERR_INVALID_ARG;
    if (key_index >= n_keys) return *why = "key index", XGR_ERR_INVALID_ARG;
    out->key = &keys[key_index];
    return xgr_pack_read_plain(r, v, &out->e, why, map);
}

int xgr_pack_read_plain(reader *r, const struct xgr_vocab *v, xgr_mask_entry **out,
                        const char **why, xgr_file_map *map) {
    const int32_t *f = take(r, PACK_FIELDS, 4);
    if (!f) return *why = "truncated entry", XGR_ERR_INVALID_ARG;
    int32_t form = f[0], n_ids = f[1], n_acc = f[2], wants = f[3], n_unc = f[4], n_pops = f[5];
    int32_t n_runs = f[6], max_units = f[7], n_unit = f[8], ps_n = f[9], ps_bytes = f[10];
#define BAD(msg) return *why = (msg), XGR_ERR_INVALID_ARG
    if (form < XGR_MASK_ACCEPTED_LIST || form > XGR_MASK_BITSET) BAD("form");
    if (n_ids < 0 || n_ids > v->n_sorted || (form == XGR_MASK_BITSET && n_ids)) BAD("id count");
    if (n_acc < 0 || n_acc > v->vocab_size || (wants != 0 && wants != 1) || f[11]) BAD("fields");
    if (n_unc < 0 || n_unc > v->n_sorted || n_pops < 0 || (n_unc == 0 && n_pops))
        BAD("uncertain count");
    if (n_runs < -1 || n_runs > n_unc || (n_runs == 0 && n_unc)) BAD("run count");
    if (max_units < 0 || max_units > v->max_token_len + 1 || n_unit < 0 || n_unit > v->n_sorted ||
        (!max_units && n_unit))
        BAD("unit count");
    if (ps_n < -1 || ps_n > n_unc || ps_bytes < 0 || (ps_n < 0 && ps_bytes)) BAD("suffix count");
    size_t rw = (size_t)v->row_words;
    const int32_t *ids = form == XGR_MASK_BITSET ? NULL : take(r, (size_t)n_ids, 4);
    const uint32_t *bits = form == XGR_MASK_BITSET ? take(r, rw, 4) : NULL;
    const int32_t *unc = take(r, (size_t)n_unc, 4);
    const int32_t *pb = take(r, (size_t)n_unc + 1, 4);
    const uint16_t *pd = take(r, (size_t)n_pops, 2);
    const int32_t *rb = n_runs >= 0 ? take(r, (size_t)n_runs + 1, 4) : NULL;
    const int32_t *rp = n_runs >= 0 ? take(r, (size_t)n_runs, 4) : NULL;
    const int32_t *ui = max_units ? take(r, (size_t)n_unit, 4) : NULL;
    const int32_t *ue = max_units ? take(r, (size_t)max_units + 2, 4) : NULL;
    const int32_t *pg = ps_n >= 0 ? take(r, (size_t)n_unc, 4) : NULL;
    const uint32_t *po = ps_n >= 0 ? take(r, (size_t)ps_n + 1, 4) : NULL;
    const uint8_t *pbytes = ps_n >= 0 ? take(r, (size_t)ps_bytes, 1) : NULL;
    if ((form == XGR_MASK_BITSET ? !bits : !ids) || !unc || !pb || (n_pops && !pd) ||
        (n_runs >= 0 && (!rb || !rp)) || (max_units && (!ui || !ue)) ||
        (ps_n >= 0 && (!pg || !po || (ps_bytes && !pbytes))))
        BAD("truncated arrays");
    /* token ids: text tokens of this vocabulary */
    if (ids && !ids_ok(v, ids, n_ids)) BAD("token id");
    if (bits)
        for (size_t w = 0; w < rw; w++)
            if (bits[w] & ~v->text_bits[w]) BAD("bitset token");
    if (!ids_ok(v, unc, n_unc) || (ui && !ids_ok(v, ui, n_unit))) BAD("token id");
    /* pop lists: pop_begin runs 0 .. n_pops; every depth within its token */
    if (pb[0] != 0 || pb[n_unc] != n_pops) BAD("pop list");
    for (int32_t i = 0; i < n_unc; i++) {
        if (pb[i + 1] < pb[i] || pb[i + 1] > n_pops) BAD("pop list"); /* (before pd is read) */
        uint32_t len;
        (void)xgr_vocab_token(v, unc[i], &len);
        for (int32_t k = pb[i]; k < pb[i + 1]; k++)
            if ((pd[k] & 0x7fffu) > len) BAD("pop depth");
    }
    /* runs: non-empty, covering the uncertain list; a run by position names the same tokens */
    if (rb) {
        if (rb[0] != 0 || rb[n_runs] != n_unc) BAD("runs");
        for (int32_t k = 0; k < n_runs; k++) {
            if (rb[k + 1] <= rb[k] || rb[k + 1] > n_unc) BAD("runs"); /* (before unc is read) */
            if (rp[k] < -1) BAD("run position");
            if (rp[k] >= 0) {
                if (rp[k] > v->n_sorted - (rb[k + 1] - rb[k])) BAD("run position");
                for (int32_t i = rb[k]; i < rb[k + 1]; i++)
                    if (v->sorted[rp[k] + (i - rb[k])] != unc[i]) BAD("run position");
            }
        }
    }
    /* units: unit_end within unit_ids, unit_end[0] = all of them */
    if (ue) {
        if (ue[0] != n_unit) BAD("units");
        for (int32_t u = 0; u < max_units + 2; u++)
            if (ue[u] < 0 || ue[u] > n_unit) BAD("units");
    }
    /* suffix groups: group ids in range, offsets ascending within the bytes */
    if (pg) {
        for (int32_t i = 0; i < n_unc; i++)
            if (pg[i] < -1 || pg[i] >= ps_n) BAD("suffix group");
        if (po[0] != 0 || po[ps_n] != (uint32_t)ps_bytes) BAD("suffix offsets");
        for (int32_t g = 0; g < ps_n; g++)
            if (po[g + 1] < po[g]) BAD("suffix offsets");
    }
#undef BAD
    if (map) {
        xgr_mask_entry *e = borrowed_entry(map, form, n_ids, ids, bits, rw, n_unc, unc, pb, n_pops, pd,
                                           n_runs, rb, rp, max_units, n_unit, ui, ue, ps_n, pg, po,
                                           pbytes, ps_bytes);
        if (!e) return XGR_ERR_NOMEM;
        if (ue && xgr_entry_set_unit_count(v, e)) {
            xgr_mask_entry_free(e);
            return XGR_ERR_NOMEM;
        }
        e->n_accepted = n_acc;
        e->wants_context = wants;
        *out = e;
        return XGR_OK;
    }
    /* the copy: one block as entry.c builds them, the optional parts on their own */
    size_t list = form == XGR_MASK_BITSET ? rw * 4 : ((size_t)n_ids + 1) * 4;
    size_t extra = list + ((size_t)n_unc + 1) * 8 + ((size_t)n_pops + 1) * 2;
    extra = (extra + 7) & ~(size_t)7;
    char *tail = NULL;
    xgr_mask_entry *e = xgr_entry_block(extra, &tail);
    if (!e) return XGR_ERR_NOMEM;
    atomic_init(&e->refcount, 1);
    e->form = form;
    e->n_accepted = n_acc;
    e->wants_context = wants;
    if (bits) {
        e->bits = xgr_entry_block_take(&tail, list);
        memcpy(e->bits, bits, rw * 4);
    } else {
        e->ids = xgr_entry_block_take(&tail, list);
        e->n_ids = n_ids;
        memcpy(e->ids, ids, (size_t)n_ids * 4);
    }
    e->n_uncertain = n_unc;
    e->uncertain = xgr_entry_block_take(&tail, ((size_t)n_unc + 1) * 4);
    e->pop_begin = xgr_entry_block_take(&tail, ((size_t)n_unc + 1) * 4);
    e->pop_depth = xgr_entry_block_take(&tail, ((size_t)n_pops + 1) * 2);
    memcpy(e->uncertain, unc, (size_t)n_unc * 4);
    memcpy(e->pop_begin, pb, ((size_t)n_unc + 1) * 4);
    if (n_pops) memcpy(e->pop_depth, pd, (size_t)n_pops * 2);
    e->bytes = sizeof *e + e->block;
    int rc = XGR_OK;
    if (rb) {
        e->n_runs = n_runs;
        e->run_begin = xgr_malloc(((size_t)n_runs + 1) * 4);
        e->run_pos = xgr_malloc(((size_t)n_runs + 1) * 4);
        if (!e->run_begin || !e->run_pos) rc = XGR_ERR_NOMEM;
        else {
            memcpy(e->run_begin, rb, ((size_t)n_runs + 1) * 4);
            memcpy(e->run_pos, rp, (size_t)n_runs * 4);
            e->bytes += ((size_t)n_runs + 1) * 8;
        }
    }
    if (!rc && ue) {
        e->max_units = max_units;
        e->unit_ids = xgr_malloc(((size_t)n_unit + 1) * 4);
        e->unit_end = xgr_malloc(((size_t)max_units + 2) * 4);
        if (!e->unit_ids || !e->unit_end) rc = XGR_ERR_NOMEM;
        else {
            memcpy(e->unit_ids, ui, (size_t)n_unit * 4);
            memcpy(e->unit_end, ue, ((size_t)max_units + 2) * 4);
            e->bytes += ((size_t)n_unit + 1) * 4 + ((size_t)max_units + 2) * 4;
            rc = xgr_entry_set_unit_count(v, e);
        }
    }
    if (!rc && pg) {
        xgr_region_sfx *S = xgr_calloc(1, sizeof *S);
        if (S) {
            e->psfx = S;
            S->n = ps_n;
            S->group = xgr_malloc(((size_t)n_unc + 1) * 4);
            S->off = xgr_malloc(((size_t)ps_n + 2) * 4);
            S->bytes = xgr_malloc((size_t)ps_bytes + 1);
        }
        if (!S || !S->group || !S->off || !S->bytes) rc = XGR_ERR_NOMEM;
        else {
            memcpy(S->group, pg, (size_t)n_unc * 4);
            memcpy(S->off, po, ((size_t)ps_n + 1) * 4);
            if (ps_bytes) memcpy(S->bytes, pbytes, (size_t)ps_bytes);
            S->mem = sizeof *S + ((size_t)n_unc + 1) * 4 + ((size_t)ps_n + 2) * 4 + (size_t)ps_bytes + 1;
            e->bytes += S->mem;
        }
    }
    if (rc) {
        xgr_mask_entry_free(e);
        return rc;
    }
    *out = e;
    return XGR_OK;
}

static int load_aligned(const uint8_t *buf, size_t len, const xgr_vocab *v, int32_t *n_loaded,
                        xgr_file_map *map);

int xgr_mask_pack_load(const uint8_t *buf, size_t len, const xgr_vocab *v, int32_t *n_loaded) {
    if (!v || !n_loaded || (!buf && len))
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_mask_pack_load: NULL argument");
    *n_loaded = 0;
    if (!((uintptr_t)buf & 7)) return load_aligned(buf, len, v, n_loaded, NULL);
    uint8_t *copy = xgr_malloc(len ? len : 1); /* the arrays are read in place */
    if (!copy) return xgr_fail(XGR_ERR_NOMEM, "xgr_mask_pack_load: out of memory");
    memcpy(copy, buf, len);
    int rc = load_aligned(copy, len, v, n_loaded, NULL);
    free(copy);
    return rc;
}

int xgr_mask_pack_load_mapped(xgr_file_map *m, size_t offset, size_t len, const xgr_vocab *v,
                              int32_t *n_loaded) {
    if (!m || !v || !n_loaded)
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_mask_pack_load_mapped: NULL argument");
    *n_loaded = 0;
    if (offset > m->len || len > m->len - offset)
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_mask_pack_load_mapped: region outside the image");
    const uint8_t *buf = m->data + offset;
    if ((uintptr_t)buf & 7) return xgr_mask_pack_load(buf, len, v, n_loaded);
    return load_aligned(buf, len, v, n_loaded, m);
}

static int load_aligned(const uint8_t *buf, size_t len, const xgr_vocab *v, int32_t *n_loaded,
                        xgr_file_map *map) {
    reader r = {buf, len};
    const uint8_t *h = take(&r, 40, 1);
    uint32_t order, version;
    uint64_t fp;
    int32_t dims[4];
    if (!h) return xgr_fail(XGR_ERR_INVALID_ARG, "corrupt mask pack: truncated header");
    memcpy(&order, h + 8, 4);
    memcpy(&version, h + 12, 4);
    memcpy(&fp, h + 16, 8);
    memcpy(dims, h + 24, 16);
    if (memcmp(h, PACK_MAGIC, sizeof PACK_MAGIC) != 0 || order != PACK_ORDER)
        return xgr_fail(XGR_ERR_INVALID_ARG, "corrupt mask pack: magic or byte order");
    if (version != PACK_VERSION)
        return xgr_fail(XGR_ERR_INVALID_ARG, "corrupt mask pack: version %u", (unsigned)version);
    if (fp != v->fingerprint || dims[0] != v->vocab_size || dims[1] != v->n_sorted ||
        dims[2] != v->row_words)
        return xgr_fail(XGR_ERR_INVALID_ARG, "corrupt mask pack: another vocabulary");
    const uint32_t *nk = take(&r, 2, 4);
    if (!nk || nk[1] != 0 || nk[0] > r.left / 16)
        return xgr_fail(XGR_ERR_INVALID_ARG, "corrupt mask pack: key count");
    uint32_t n_keys = nk[0];
    pack_key *keys = xgr_calloc((size_t)n_keys + 1, sizeof *keys);
    if (!keys) return xgr_fail(XGR_ERR_NOMEM, "xgr_mask_pack_load: out of memory");
    const char *why = "out of memory";
    int rc = XGR_OK;
    for (uint32_t k = 0; k < n_keys && !rc; k++) {
        const uint8_t *kh = take(&r, 16, 1);
        uint32_t zero = 1;
        if (kh) {
            memcpy(&keys[k].hash, kh, 8);
            memcpy(&keys[k].len, kh + 8, 4);
            memcpy(&zero, kh + 12, 4);
        }
        if (!kh || zero || keys[k].len > PACK_MAX_KEY || !(keys[k].bytes = take(&r, keys[k].len, 1)))
            rc = XGR_ERR_INVALID_ARG, why = "key";
    }
    int32_t n = dims[3];
    if (!rc && (n < 0 || (size_t)n > r.left / 64)) rc = XGR_ERR_INVALID_ARG, why = "entry count";
    loaded *ents = rc ? NULL : xgr_calloc((size_t)n + 1, sizeof *ents);
    if (!rc && !ents) rc = XGR_ERR_NOMEM;
    int32_t got = 0;
    for (; !rc && got < n; got++)
        if ((rc = read_entry(&r, v, keys, n_keys, &ents[got], &why, map))) break;
    if (!rc && r.left) rc = XGR_ERR_INVALID_ARG, why = "trailing bytes";
    if (!rc)
        for (int32_t i = 0; i < n; i++) {
            const pack_key *k = ents[i].key;
            xgr_mask_entry *in = xgr_gcache_insert_ex(v->fingerprint, k->hash, k->bytes, k->len,
                                                      ents[i].local, ents[i].e, 1);
            xgr_mask_entry_release(in);
        }
    for (int32_t i = 0; i < got; i++) xgr_mask_entry_release(ents[i].e);
    free(ents);
    free(keys);
    if (rc == XGR_ERR_NOMEM) return xgr_fail(rc, "xgr_mask_pack_load: out of memory");
    if (rc) return xgr_fail(rc, "corrupt mask pack: %s", why);
    *n_loaded = n;
    return XGR_OK;
}
