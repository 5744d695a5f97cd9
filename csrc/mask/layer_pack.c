/* Layer packs: one compiled grammar's own mask layers (its published slot entries: the
 * sharpened plain entries, caller-context pair entries, TagDispatch views) with the
 * context-free entries they refine, written as one byte string and read back into a fresh
 * copy of the same grammar, every count, id and reference checked first, so a process that
 * loads the grammar from the on-disk cache does not rebuild them on its first pass
 * (docs/disk-cache.md, "Layer packs").
 *
 * Layout (native byte order, an order mark refuses any other; every array 8-aligned):
 *   magic "XGR2LYR\0", u32 order mark, u32 version, u64 vocabulary fingerprint,
 *   i32 vocab_size, n_sorted, row_words, 0; u64 grammar hash (layer_grammar_hash: the
 *   automata, the slot layout and the options entries depend on), i32 n_states, n_slots,
 *   n_bases, n_entries;
 *   n_bases context-free entries (entry_pack.c xgr_pack_put_plain: the pack's entry format
 *   without its cache key);
 *   n_entries slot entries, slots ascending: LAYER_FIELDS x i32 (slot, base: a base index,
 *   or -1 - s for the entry of plain slot s stored before it, n_ids, n_uncertain,
 *   n_accepted, wants_context, has_bits, has_exit_first, has_ubytes, ubytes length, 0, 0),
 *   then ids, ids_by_len, uncertain, bits (row_words), exit_first (8 words), uoff
 *   (n_uncertain + 1), ubytes.
 * Every slot entry is a REFINED entry (mask_cache.c build_entry): a plain slot's over its
 * context-free entry, a pair slot's over its child's plain slot entry, or over a loop entry.
 * An entry whose chain holds anything a pack cannot store (a region entry) is left out and
 * built again on first use. */
#include "layer_pack.h"

#include "../common/file_map.h"
#include "entry.h"
#include "entry_pack.h"
#include "global_cache.h"
#include "mask_cache.h"

#define LAYER_MAGIC "XGR2LYR"
#define LAYER_ORDER 0x01020304u
#define LAYER_VERSION 2u /* 2: layer_grammar_hash in four chains */
#define LAYER_FIELDS 12

typedef xgr_pack_reader reader;
#define put xgr_pack_put
#define take xgr_pack_take

/* Four independent chains over a byte string (32 bytes a round, each word by a
 * multiply-rotate round: lane4; the tail on the first by xgr_hash_combine), folded into h in
 * order with xgr_hash_combine. One serial xgr_hash_combine chain (two dependent multiplies
 * a word) was ~1 ms on a 1 MB image's automata, most of loading its layer file; this is a
 * consistency hash (the file's SHA-256 and the loader's bounds checks are the safety). */
static inline uint64_t lane4(uint64_t acc, uint64_t w) {
    acc += w * 0xc2b2ae3d27d4eb4fULL;
    acc = (acc << 31) | (acc >> 33);
    return acc * 0x9e3779b185ebca87ULL;
}
static uint64_t hash4_fold(uint64_t h, const uint64_t l[4]) {
    for (int k = 0; k < 4; k++) h = xgr_hash_combine(h, l[k]);
    return h;
}
static void hash4_seed(uint64_t h, uint64_t l[4]) {
    for (int k = 0; k < 4; k++) l[k] = xgr_hash_combine(h, (uint64_t)k + 1);
}
static uint64_t hash4_bytes(uint64_t h, const uint8_t *p, size_t n) {
    uint64_t l[4];
    hash4_seed(h, l);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        uint64_t w[4];
        memcpy(w, p + i, 32);
        l[0] = lane4(l[0], w[0]);
        l[1] = lane4(l[1], w[1]);
        l[2] = lane4(l[2], w[2]);
        l[3] = lane4(l[3], w[3]);
    }
    l[0] = xgr_hash_bytes(l[0], p + i, n - i);
    return hash4_fold(h, l);
}
static uint64_t edge_word(const xgr_edge *ed) {
    return ((uint64_t)(uint32_t)ed->target << 32) | (uint32_t)ed->ref;
}
static uint64_t hash4_edges(uint64_t h, const xgr_edge *ed, int32_t n) {
    uint64_t l[4];
    hash4_seed(h, l);
    int32_t e = 0;
    for (; e + 4 <= n; e += 4)
        for (int k = 0; k < 4; k++) {
            const xgr_edge *x = &ed[e + k];
            l[k] = lane4(lane4(l[k], edge_word(x)), ((uint64_t)x->lo << 8) | x->hi);
        }
    for (; e < n; e++)
        l[0] = xgr_hash_combine(xgr_hash_combine(l[0], edge_word(&ed[e])), ((uint64_t)ed[e].lo << 8) | ed[e].hi);
    return hash4_fold(h, l);
}

/* What the slot entries of a grammar depend on besides the vocabulary: its automata, its
 * slot layout (scannable states, pair slots), the rules whose entries are opaque or
 * unique, and the options that change how much an entry decides. */
static uint64_t layer_grammar_hash(const xgr_compiled *c) {
    const xgr_fsm *f = c->fsm;
    uint64_t h = xgr_hash_combine(0x4c415945u, (uint64_t)(uint32_t)f->n_states);
    h = xgr_hash_combine(h, (uint64_t)(uint32_t)f->n_rules);
    h = xgr_hash_combine(h, (uint64_t)(uint32_t)f->root);
    h = xgr_hash_combine(h, (uint64_t)(uint32_t)c->n_slots);
    h = hash4_bytes(h, (const uint8_t *)f->state_rule, (size_t)f->n_states * 4);
    h = hash4_bytes(h, f->final, (size_t)f->n_states);
    h = hash4_bytes(h, (const uint8_t *)f->edge_begin, ((size_t)f->n_states + 1) * 4);
    h = hash4_edges(h, f->edges, f->n_edges);
    h = xgr_hash_bytes(h, (const uint8_t *)f->rule_start, (size_t)f->n_rules * 4);
    h = xgr_hash_bytes(h, f->rule_kind, (size_t)f->n_rules);
    h = xgr_hash_bytes(h, (const uint8_t *)f->repeat_min, (size_t)f->n_rules * 4);
    h = xgr_hash_bytes(h, (const uint8_t *)f->repeat_max, (size_t)f->n_rules * 4);
    h = hash4_bytes(h, c->scannable, (size_t)f->n_states);
    h = xgr_hash_bytes(h, c->rule_opaque, (size_t)f->n_rules);
    h = xgr_hash_bytes(h, c->rule_unique, (size_t)f->n_rules);
    h = xgr_hash_combine(h, (uint64_t)(uint32_t)c->n_pair_edges);
    if (c->n_pair_edges) {
        h = xgr_hash_bytes(h, (const uint8_t *)c->pair_edges, (size_t)c->n_pair_edges * 4);
        h = xgr_hash_bytes(h, (const uint8_t *)c->pair_first, (size_t)c->n_pair_edges * 4);
    }
    const xgr_compile_options *o = &c->opts;
    int32_t opt[5] = {o->context_min_uncertain, o->cross_grammar_cache > 0, o->max_step_work,
                      o->max_row_items, c->no_descend};
    return xgr_hash_bytes(h, (const uint8_t *)opt, sizeof opt);
}

int32_t xgr_compiled_layer_count(const xgr_compiled *c) {
    if (!c) return 0;
    int32_t n = 0;
    for (int32_t k = 0; k <= (c->n_slots - 1) / XGR_SLOT_CHUNK && c->n_slots > 0; k++) {
        _Atomic(xgr_mask_entry *) *chunk =
            atomic_load_explicit(&c->entry_chunks[k], memory_order_acquire);
        if (!chunk) continue;
        for (int32_t j = 0; j < XGR_SLOT_CHUNK; j++)
            n += atomic_load_explicit(&chunk[j], memory_order_acquire) != NULL;
    }
    return n;
}

/* ---- writing -------------------------------------------------------------------------- */

/* A published slot entry with what it refines. */
typedef struct {
    int32_t slot;
    const xgr_mask_entry *e;
    int32_t base; /* base index, or -1 - s: plain slot s */
} slot_item;

/* The index of `base` among the distinct bases (open addressing on the pointer), added
 * when new; -1 without memory. */
static int32_t base_index(const xgr_mask_entry ***bases, int32_t *n_bases, int32_t **table,
                          size_t cap, const xgr_mask_entry *base) {
    size_t h = (size_t)(((uintptr_t)base >> 4) * 0x9e3779b97f4a7c15ULL) & (cap - 1);
    while ((*table)[h] >= 0 && (*bases)[(*table)[h]] != base) h = (h + 1) & (cap - 1);
    if ((*table)[h] >= 0) return (*table)[h];
    (*bases)[*n_bases] = base;
    (*table)[h] = *n_bases;
    return (*n_bases)++;
}

static int put_slot(xgr_pack_bytes *b, const struct xgr_vocab *v, const slot_item *it) {
    const xgr_mask_entry *e = it->e;
    int32_t n_unc = e->n_uncertain, ub = e->uoff ? (int32_t)e->uoff[n_unc] : 0;
    int32_t f[LAYER_FIELDS] = {it->slot, it->base, e->n_ids, n_unc, e->n_accepted,
                               e->wants_context ? 1 : 0, e->bits ? 1 : 0, e->exit_first ? 1 : 0,
                               e->uoff ? 1 : 0, ub, 0, 0};
    int rc = put(b, f, sizeof f);
    if (!rc) rc = put(b, e->ids, (size_t)e->n_ids * 4);
    if (!rc) rc = put(b, e->ids_by_len, (size_t)e->n_ids * 4);
    if (!rc) rc = put(b, e->uncertain, (size_t)n_unc * 4);
    if (!rc && e->bits) rc = put(b, e->bits, (size_t)v->row_words * 4);
    if (!rc && e->exit_first) rc = put(b, e->exit_first, 8 * 4);
    if (!rc && e->uoff) rc = put(b, e->uoff, ((size_t)n_unc + 1) * 4);
    if (!rc && e->uoff) rc = put(b, e->ubytes, (size_t)ub);
    return rc;
}

/* Whether e (a published slot entry) has the shape a layer stores: REFINED, its ids and
 * ids_by_len together, bits exactly when the ids outnumber the row's words. */
static int storable(const struct xgr_vocab *v, const xgr_mask_entry *e) {
    if (e->form != XGR_MASK_REFINED || !e->base || e->sfx || e->psfx ||
        e->run_begin || e->unit_ids || e->pop_begin)
        return 0;
    if (e->n_ids && (!e->ids || !e->ids_by_len)) return 0;
    if ((e->bits != NULL) != (e->n_ids > v->row_words)) return 0;
    if (e->n_uncertain && !e->uncertain) return 0;
    if ((e->uoff != NULL) != (e->n_uncertain > 0 && e->n_uncertain <= XGR_UBYTES_MAX)) return 0;
    return 1;
}

int xgr_layer_pack_build(const xgr_compiled *c, uint8_t **out, size_t *out_len,
                         int32_t *n_entries) {
    if (!c || !out || !out_len || !n_entries)
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_layer_pack_build: NULL argument");
    *out = NULL;
    *out_len = 0;
    *n_entries = 0;
    const struct xgr_vocab *v = c->vocab;
    int32_t ns = c->fsm->n_states, n_pub = xgr_compiled_layer_count(c);
    slot_item *items = xgr_malloc(((size_t)n_pub + 1) * sizeof *items);
    const xgr_mask_entry **bases = xgr_malloc(((size_t)n_pub + 1) * sizeof *bases);
    size_t cap = 16;
    while (cap < 2 * ((size_t)n_pub + 1)) cap *= 2;
    int32_t *table = xgr_malloc(cap * sizeof *table);
    /* per slot: stored (plain slots only matter) */
    uint8_t *stored = xgr_calloc((size_t)ns + 1, 1);
    int rc = items && bases && table && stored ? XGR_OK : XGR_ERR_NOMEM;
    int32_t n = 0, n_bases = 0;
    if (!rc) memset(table, -1, cap * sizeof *table);
    for (int32_t s = 0; s < c->n_slots && !rc && n < n_pub; s++) {
        const xgr_mask_entry *e = xgr_slot_load(c, s);
        if (!e || !storable(v, e)) continue;
        int32_t base = 0;
        if (e->owns_base) {
            if (!xgr_entry_packable(e->base)) continue; /* a region entry: built again */
            base = base_index(&bases, &n_bases, &table, cap, e->base);
        } else {
            if (s < ns) continue;
            int32_t child, caller;
            xgr_pair_slot(c, s, &child, &caller);
            if (!stored[child] || xgr_slot_load(c, child) != e->base) continue;
            base = -1 - child;
        }
        if (s < ns) stored[s] = 1;
        items[n++] = (slot_item){s, e, base};
    }
    xgr_pack_bytes b = {0};
    struct {
        char magic[8];
        uint32_t order, version;
        uint64_t fp;
        int32_t vocab_size, n_sorted, row_words, zero;
        uint64_t ghash;
        int32_t n_states, n_slots, n_bases, n_entries;
    } hd;
    memset(&hd, 0, sizeof hd);
    memcpy(hd.magic, LAYER_MAGIC, sizeof LAYER_MAGIC);
    hd.order = LAYER_ORDER;
    hd.version = LAYER_VERSION;
    hd.fp = v->fingerprint;
    hd.vocab_size = v->vocab_size;
    hd.n_sorted = v->n_sorted;
    hd.row_words = v->row_words;
    hd.ghash = layer_grammar_hash(c);
    hd.n_states = ns;
    hd.n_slots = c->n_slots;
    hd.n_bases = n_bases;
    hd.n_entries = n;
    if (!rc) rc = put(&b, &hd, sizeof hd);
    for (int32_t i = 0; i < n_bases && !rc; i++) rc = xgr_pack_put_plain(&b, v, bases[i]);
    for (int32_t i = 0; i < n && !rc; i++) rc = put_slot(&b, v, &items[i]);
    free(items);
    free(bases);
    free(table);
    free(stored);
    if (rc) {
        XGR_VEC_FREE(b);
        return xgr_fail(rc, "xgr_layer_pack_build: out of memory");
    }
    *out = b.data;
    *out_len = b.len;
    *n_entries = n;
    return XGR_OK;
}

/* ---- reading -------------------------------------------------------------------------- */

/* Marks (mark != 0) or clears the bits of ids[0..n) in a token bitset. */
static void mark_ids(uint32_t *bits, const int32_t *ids, int32_t n, int mark) {
    for (int32_t i = 0; i < n; i++) {
        if (mark) bits[ids[i] >> 5] |= 1u << (ids[i] & 31);
        else bits[ids[i] >> 5] = 0;
    }
}

static int all_marked(const uint32_t *bits, const int32_t *ids, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        if (!(bits[ids[i] >> 5] >> (ids[i] & 31) & 1u)) return 0;
    return 1;
}

/* One slot entry, checked against its base (`base`: the entry it refines, already read)
 * and borrowed from map; *why names the first failed check. `in_base` and `in_ids` are
 * zeroed token bitsets (row_words words), left zeroed. */
static int read_slot(reader *r, const xgr_compiled *c, const int32_t *f, const xgr_mask_entry *base,
                     uint32_t *in_base, uint32_t *in_ids, xgr_file_map *map, xgr_mask_entry **out,
                     const char **why) {
    const struct xgr_vocab *v = c->vocab;
    size_t rw = (size_t)v->row_words;
    int32_t n_ids = f[2], n_unc = f[3], n_acc = f[4], wants = f[5], has_bits = f[6];
    int32_t has_exit = f[7], has_ub = f[8], ub_len = f[9];
#define BAD(msg) return *why = (msg), XGR_ERR_INVALID_ARG
    if (n_ids < 0 || n_ids > base->n_uncertain || n_unc < 0 || n_unc > base->n_uncertain)
        BAD("slot entry count");
    if (n_acc < 0 || n_acc > v->vocab_size || (wants != 0 && wants != 1) || f[10] || f[11])
        BAD("slot entry fields");
    if (has_bits != (n_ids > v->row_words) || (has_exit != 0 && has_exit != 1) ||
        has_ub != (n_unc > 0 && n_unc <= XGR_UBYTES_MAX) || ub_len < 0 || (!has_ub && ub_len))
        BAD("slot entry parts");
    const int32_t *ids = take(r, (size_t)n_ids, 4);
    const int32_t *by_len = take(r, (size_t)n_ids, 4);
    const int32_t *unc = take(r, (size_t)n_unc, 4);
    const uint32_t *bits = has_bits ? take(r, rw, 4) : NULL;
    const uint32_t *exit_first = has_exit ? take(r, 8, 4) : NULL;
    const uint32_t *uoff = has_ub ? take(r, (size_t)n_unc + 1, 4) : NULL;
    const uint8_t *ubytes = has_ub ? take(r, (size_t)ub_len, 1) : NULL;
    if (!ids || !by_len || !unc || (has_bits && !bits) || (has_exit && !exit_first) ||
        (has_ub && (!uoff || !ubytes)))
        BAD("truncated slot entry");
    for (int32_t i = 0; i < n_ids; i++)
        if (!xgr_pack_is_text(v, ids[i])) BAD("token id");
    for (int32_t i = 0; i < n_unc; i++)
        if (!xgr_pack_is_text(v, unc[i])) BAD("token id");
    for (int32_t i = 0; i < n_ids; i++)
        if (!xgr_pack_is_text(v, by_len[i])) BAD("token id");
    /* every token this entry decides is one its base leaves open */
    mark_ids(in_base, base->uncertain, base->n_uncertain, 1);
    int sub = all_marked(in_base, ids, n_ids) && all_marked(in_base, unc, n_unc);
    mark_ids(in_base, base->uncertain, base->n_uncertain, 0);
    if (!sub) BAD("token outside the base's uncertain ones");
    /* ids_by_len: the ids, longest first; bits: exactly the ids */
    mark_ids(in_ids, ids, n_ids, 1);
    int ok = all_marked(in_ids, by_len, n_ids);
    uint32_t prev = UINT32_MAX;
    for (int32_t i = 0; i < n_ids && ok; i++) {
        uint32_t len;
        xgr_vocab_token(v, by_len[i], &len);
        ok = len <= prev;
        prev = len;
    }
    for (size_t w = 0; w < rw && bits && ok; w++) ok = bits[w] == in_ids[w];
    if (bits) memset(in_ids, 0, rw * sizeof *in_ids);
    else mark_ids(in_ids, ids, n_ids, 0);
    if (!ok) BAD("ids by length or bits");
    /* the uncertain tokens' bytes, in list order */
    if (uoff) {
        if (uoff[0] != 0 || uoff[n_unc] != (uint32_t)ub_len) BAD("uncertain bytes");
        for (int32_t i = 0; i < n_unc; i++) {
            uint32_t len;
            const uint8_t *t = xgr_vocab_token(v, unc[i], &len);
            if (uoff[i + 1] < uoff[i] || uoff[i + 1] - uoff[i] != len ||
                memcmp(ubytes + uoff[i], t, len) != 0)
                BAD("uncertain bytes");
        }
    }
#undef BAD
    xgr_mask_entry *e = xgr_calloc(1, sizeof *e);
    if (!e) return XGR_ERR_NOMEM;
    atomic_init(&e->refcount, 1);
    e->form = XGR_MASK_REFINED;
    e->n_ids = n_ids;
    e->ids = (int32_t *)ids;
    e->ids_by_len = (int32_t *)by_len;
    e->bits = (uint32_t *)bits;
    e->n_uncertain = n_unc;
    e->uncertain = (int32_t *)unc;
    e->n_accepted = n_acc;
    e->wants_context = wants;
    e->exit_first = (uint32_t *)exit_first;
    e->uoff = (uint32_t *)uoff;
    e->ubytes = (uint8_t *)ubytes;
    e->bytes = sizeof *e + ((size_t)n_ids + 1) * 8 + ((size_t)n_unc + 1) * 4 +
               (bits ? rw * 4 : 0) + (exit_first ? 32 : 0) +
               (uoff ? ((size_t)n_unc + 1) * 4 + (size_t)ub_len + 1 : 0);
    e->map = map;
    xgr_file_map_retain(map);
    *out = e;
    return XGR_OK;
}

static int load_aligned(xgr_compiled *c, xgr_file_map *map, const uint8_t *buf, size_t len,
                        int32_t *n_loaded);

int xgr_layer_pack_load_mapped(xgr_compiled *c, xgr_file_map *m, size_t offset, size_t len,
                               int32_t *n_loaded) {
    if (!c || !m || !n_loaded)
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_layer_pack_load_mapped: NULL argument");
    *n_loaded = 0;
    if (offset > m->len || len > m->len - offset)
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_layer_pack_load_mapped: region outside the image");
    const uint8_t *buf = m->data + offset;
    if (!((uintptr_t)buf & 7)) return load_aligned(c, m, buf, len, n_loaded);
    return xgr_layer_pack_load(c, buf, len, n_loaded);
}

int xgr_layer_pack_load(xgr_compiled *c, const uint8_t *buf, size_t len, int32_t *n_loaded) {
    if (!c || !n_loaded || (!buf && len))
        return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_layer_pack_load: NULL argument");
    *n_loaded = 0;
    xgr_file_map *m = NULL;
    int rc = xgr_file_map_from_bytes(buf, len, &m);
    if (rc) return rc;
    rc = load_aligned(c, m, m->data, len, n_loaded); /* (a heap block: 8-aligned) */
    xgr_file_map_release(m);                         /* the entries hold their own */
    return rc;
}

static int load_aligned(xgr_compiled *c, xgr_file_map *map, const uint8_t *buf, size_t len,
                        int32_t *n_loaded) {
    const struct xgr_vocab *v = c->vocab;
    reader r = {buf, len};
    const uint8_t *h = take(&r, 64, 1);
    if (!h) return xgr_fail(XGR_ERR_INVALID_ARG, "corrupt layer pack: truncated header");
    uint32_t order, version;
    uint64_t fp, ghash;
    int32_t dims[4], gd[4];
    memcpy(&order, h + 8, 4);
    memcpy(&version, h + 12, 4);
    memcpy(&fp, h + 16, 8);
    memcpy(dims, h + 24, 16);
    memcpy(&ghash, h + 40, 8);
    memcpy(gd, h + 48, 16);
    if (memcmp(h, LAYER_MAGIC, sizeof LAYER_MAGIC) != 0 || order != LAYER_ORDER)
        return xgr_fail(XGR_ERR_INVALID_ARG, "corrupt layer pack: magic or byte order");
    if (version != LAYER_VERSION)
        return xgr_fail(XGR_ERR_INVALID_ARG, "corrupt layer pack: version %u", (unsigned)version);
    if (fp != v->fingerprint || dims[0] != v->vocab_size || dims[1] != v->n_sorted ||
        dims[2] != v->row_words || dims[3])
        return xgr_fail(XGR_ERR_INVALID_ARG, "corrupt layer pack: another vocabulary");
    if (gd[0] != c->fsm->n_states || gd[1] != c->n_slots || ghash != layer_grammar_hash(c))
        return xgr_fail(XGR_ERR_INVALID_ARG, "corrupt layer pack: another grammar");
    int32_t n_bases = gd[2], n = gd[3];
    /* (each base takes at least 64 bytes, each slot entry 48) */
    if (n_bases < 0 || (size_t)n_bases > r.left / 64 || n < 0 || (size_t)n > r.left / 48 ||
        n > c->n_slots)
        return xgr_fail(XGR_ERR_INVALID_ARG, "corrupt layer pack: entry count");
    xgr_mask_entry **bases = xgr_calloc((size_t)n_bases + 1, sizeof *bases);
    xgr_mask_entry **ents = xgr_calloc((size_t)n + 1, sizeof *ents);
    int32_t *slots = xgr_malloc(((size_t)n + 1) * sizeof *slots);
    int32_t *bidx = xgr_malloc(((size_t)n + 1) * sizeof *bidx); /* a pair's base entry */
    uint32_t *marks = xgr_calloc(2 * (size_t)v->row_words + 1, sizeof *marks);
    const char *why = "out of memory";
    int rc = bases && ents && slots && bidx && marks ? XGR_OK : XGR_ERR_NOMEM;
    int32_t got_b = 0, got = 0;
    for (; !rc && got_b < n_bases; got_b++)
        if ((rc = xgr_pack_read_plain(&r, v, &bases[got_b], &why, map))) break;
    for (; !rc && got < n; got++) {
        const int32_t *f = take(&r, LAYER_FIELDS, 4);
        if (!f) {
            rc = XGR_ERR_INVALID_ARG, why = "truncated slot entry";
            break;
        }
        int32_t s = f[0], b = f[1];
        const xgr_mask_entry *base = NULL;
        if (s < 0 || s >= c->n_slots || (got && s <= slots[got - 1])) {
            rc = XGR_ERR_INVALID_ARG, why = "slot";
            break;
        }
        if (s < c->fsm->n_states && !c->scannable[s]) {
            rc = XGR_ERR_INVALID_ARG, why = "slot";
            break;
        }
        bidx[got] = -1;
        if (b >= 0) {
            if (b < n_bases) base = bases[b];
        } else if (s >= c->fsm->n_states) { /* a pair slot over its child's plain entry */
            int32_t child, caller, want = -1 - b, lo = 0, hi = got;
            xgr_pair_slot(c, s, &child, &caller);
            while (lo < hi) {
                int32_t mid = lo + (hi - lo) / 2;
                if (slots[mid] < want) lo = mid + 1;
                else hi = mid;
            }
            if (want == child && lo < got && slots[lo] == want) base = ents[bidx[got] = lo];
        }
        if (!base) {
            rc = XGR_ERR_INVALID_ARG, why = "slot entry base";
            break;
        }
        slots[got] = s;
        if ((rc = read_slot(&r, c, f, base, marks, marks + v->row_words, map, &ents[got], &why)))
            break;
        ents[got]->base = (xgr_mask_entry *)base;
        if (b >= 0) {
            ents[got]->owns_base = 1;
            xgr_mask_entry_retain(bases[b]);
        }
    }
    if (!rc && r.left) rc = XGR_ERR_INVALID_ARG, why = "trailing bytes";
    int32_t published = 0;
    if (!rc) {
        /* plain slots first (ascending): a pair entry over a plain slot that another thread
         * filled first is dropped with it (it would refine an entry that is not published) */
        uint8_t *lost = xgr_calloc((size_t)n + 1, 1); /* 1: dropped, 2: freed by publish */
        int32_t i = 0;
        if (!lost) rc = XGR_ERR_NOMEM;
        for (; i < n && !rc; i++) {
            const xgr_mask_entry *pub = NULL;
            if (bidx[i] >= 0 && lost[bidx[i]]) {
                lost[i] = 1;
                continue;
            }
            int p = xgr_mask_slot_publish(c, slots[i], ents[i], &pub);
            if (p < 0) rc = p; /* (ents[i] was freed) */
            if (p != 0) lost[i] = 2;
            else published++;
        }
        /* the rest (after running out of memory) and the dropped ones, after every entry
         * that refines them */
        for (int32_t j = n - 1; j >= 0 && lost; j--)
            if (j >= i || lost[j] == 1) xgr_mask_entry_free(ents[j]);
        free(lost);
    } else {
        for (int32_t i = got - 1; i >= 0; i--) xgr_mask_entry_free(ents[i]);
    }
    for (int32_t i = 0; i < got_b; i++) {
        /* a base some published entry holds lives as long as the grammar: count it there
         * (a context-free entry from the cross-grammar cache is counted by the cache) */
        if (!rc && atomic_load(&bases[i]->refcount) > 1) atomic_fetch_add(&c->memory, bases[i]->bytes);
        xgr_mask_entry_release(bases[i]);
    }
    free(bases);
    free(ents);
    free(slots);
    free(bidx);
    free(marks);
    if (rc == XGR_ERR_NOMEM) return xgr_fail(rc, "xgr_layer_pack_load: out of memory");
    if (rc) return xgr_fail(rc, "corrupt layer pack: %s", why);
    *n_loaded = published;
    return XGR_OK;
}
