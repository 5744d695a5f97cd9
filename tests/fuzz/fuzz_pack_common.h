/* Shared pieces of the pack harnesses (fuzz_mask_pack.c, fuzz_layer_pack.c): the grammars
 * whose entries are packed, the op stream that drives them, and the decoding of an input
 * into the bytes to load. Include after fuzz_common.h. */
#ifndef XGR_FUZZ_PACK_COMMON_H
#define XGR_FUZZ_PACK_COMMON_H

#include "fuzz_common.h"

/* JSON-like nesting, a bounded repeat, a TagDispatch loop, and (layer packs only) a star
 * over a bounded repeat. */
static const char *const fzk_grammars[] = {
    "root ::= \"{\" (s \":\" v (\",\" s \":\" v)*)? \"}\"\n"
    "s ::= \"\\\"\" [a-z]* \"\\\"\"\nv ::= s | [0-9]+ | root | \"[\" (v (\",\" v)*)? \"]\"\n",
    "root ::= x{2,30} \"}\"\nx ::= \"ab\" | \"c\" | [0-9]\n",
    "root ::= TagDispatch((\"<function=\", f), loop_after_dispatch=true)\n"
    "f ::= [a-z]+ \">\" \"{\" [a-z \"]* \"}\" \"</function>\"\n",
    "root ::= (\"a\" | b)* \"}\"\nb ::= \"[\" [0-9]{0,12} \"]\"\n",
};
#define FZK_N_ALL (sizeof fzk_grammars / sizeof *fzk_grammars)

static const uint8_t fzk_ops[] = {6, 0, 3, 6, 1, 5, 6, 10, 3, 'a', 'b', 'c', 6, 7, 2, 6, 11, 4, 6, 0, 1, 2};

/* Drives `c` once without and once with caller context. */
static void fzk_drive(xgr_compiled *c) {
    for (int ctx = 0; ctx < 2; ctx++) {
        xgr_matcher *m = NULL;
        if (xgr_matcher_new(c, NULL, 0, 0, ctx, -1, &m) == XGR_OK) {
            fz_check_masks(m);
            fz_drive(m, fzk_ops, sizeof fzk_ops);
            xgr_matcher_free(m);
        }
    }
}

/* The bytes to load (malloc'd, *len set; NULL when out of memory): when the first input byte
 * is even, the real `pack` with the edits that follow (pairs of a 2-byte offset and a byte to
 * write; sometimes the end cut), else the input as it is. */
static uint8_t *fzk_input(const uint8_t *data, size_t size, const uint8_t *pack, size_t pack_len,
                          size_t *len) {
    uint8_t *buf;
    if (size >= 1 && !(data[0] & 1)) { /* edits of the real pack */
        *len = pack_len;
        if (!(buf = malloc(pack_len))) return NULL;
        memcpy(buf, pack, pack_len);
        for (size_t i = 1; i + 2 < size; i += 3) {
            size_t at = (size_t)data[i] | (size_t)data[i + 1] << 8;
            if (at < pack_len) buf[at] = data[i + 2];
        }
        if (size % 3 == 2 && pack_len > 8) *len -= data[size - 1] % 64; /* sometimes cut the end */
    } else {
        *len = size;
        if (!(buf = malloc(size ? size : 1))) return NULL;
        if (size) memcpy(buf, data, size);
    }
    return buf;
}

/* Whether the input asks for the borrowing path: entries point into an image of exactly the
 * loaded bytes (a heap block, so ASan sees a read past it), which only they hold while
 * driven. */
static int fzk_borrow(const uint8_t *data, size_t size) { return size >= 1 && (data[0] & 2); }

#endif
