/* Shared set-up of the pack drivers (test_mask_pack.c, test_layer_pack.c): the CHECK counter,
 * the grammars whose entries are packed, and a vocabulary of the driver's pieces (the last
 * piece the stop token). Header-only so each test driver stays one translation unit. */
#ifndef XGR_TEST_PACK_COMMON_H
#define XGR_TEST_PACK_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../../csrc/include/xgr2.h"

static int failures, checks;
#define CHECK(c)                                                             \
    do {                                                                     \
        checks++;                                                            \
        if (!(c)) {                                                          \
            failures++;                                                      \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
        }                                                                    \
    } while (0)

/* JSON-like nesting, a bounded repeat, and a TagDispatch loop (plain, pair-over-slot, loop
 * and TagDispatch entries all occur). */
static const char *const pack_grammars[] = {
    "root ::= \"{\" (s \":\" v (\",\" s \":\" v)*)? \"}\"\n"
    "s ::= \"\\\"\" [a-z]* \"\\\"\"\nv ::= s | [0-9]+ | root | \"[\" (v (\",\" v)*)? \"]\"\n",
    "root ::= x{2,30} \"}\"\nx ::= \"ab\" | \"c\" | [0-9]\n",
    "root ::= TagDispatch((\"<function=\", f), loop_after_dispatch=true)\n"
    "f ::= [a-z]+ \">\" \"{\" [a-z \"]* \"}\" \"</function>\"\n",
};
#define NG ((int)(sizeof pack_grammars / sizeof *pack_grammars))

/* A vocabulary of the first `np` of `pieces` (at most 256 bytes of text in all), the last of
 * them the stop token; NULL (a failed check) when it cannot be made. */
static xgr_vocab *pack_vocab(const char *const *pieces, int32_t np) {
    uint8_t data[256];
    uint32_t off[257], pos = 0;
    if (np < 1 || np > 256) {
        CHECK(!"pack_vocab: 1 to 256 pieces");
        return NULL;
    }
    for (int32_t i = 0; i < np; i++) {
        off[i] = pos;
        size_t l = strlen(pieces[i]);
        if (l > sizeof data - pos) {
            CHECK(!"pack_vocab: pieces over 256 bytes");
            return NULL;
        }
        memcpy(data + pos, pieces[i], l);
        pos += (uint32_t)l;
    }
    off[np] = pos;
    int32_t stop = np - 1;
    xgr_vocab *v = NULL;
    CHECK(xgr_vocab_new(data, off, np, np, NULL, 0, &stop, 1, &v) == XGR_OK);
    return v;
}

#endif
