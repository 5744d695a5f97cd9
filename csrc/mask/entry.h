/* Mask-cache entries (entry.c): their allocation and release, and the forms they are
 * built in (accepted list, rejected list, bitset, REFINED over a base entry), with the
 * extras the builders attach (uncertain tokens and their pop depths, TagDispatch runs,
 * pop suffix groups). The entry type itself is compiled.h's xgr_mask_entry.
 * Internal header. */
#ifndef XGR_ENTRY_H
#define XGR_ENTRY_H

#include "compiled.h"

/* A token's verdict in a classification (walk.h), by list position. */
enum { XGR_V_ACCEPT = 0, XGR_V_REJECT = 1, XGR_V_UNCERTAIN = 2 };

void xgr_mask_entry_free(xgr_mask_entry *e);
void xgr_region_sfx_free(xgr_region_sfx *S); /* NULL-safe */

/* A zeroed entry with `extra` bytes of block behind it, carved with xgr_entry_block_take;
 * NULL when out of memory. */
xgr_mask_entry *xgr_entry_block(size_t extra, char **tail);
/* The same for an entry that only grammar c holds: from c's arena when small. */
xgr_mask_entry *xgr_entry_grammar_block(xgr_compiled *c, size_t extra, char **tail);

/* The next n bytes of an entry's block (4-byte arrays first, then 2-byte ones, keeps each
 * aligned: the entry's size is a multiple of 8). */
static inline void *xgr_entry_block_take(char **tail, size_t n) {
    void *p = *tail;
    *tail += n;
    return p;
}

/* Number of distinct tokens in a (position, depth) pop list (positions ascending). */
int32_t xgr_entry_pop_tokens(const xgr_pop_list *pops);
/* Block bytes for the uncertain part of a pop list with n tokens. */
size_t xgr_entry_uncertain_bytes(const xgr_pop_list *pops, int32_t n);
/* Fills e's uncertain tokens and pop depths from a pop list of n tokens, in e's block;
 * ids maps a list position to its token id. */
void xgr_entry_set_uncertain(xgr_mask_entry *e, const xgr_pop_list *pops, int32_t n,
                             const int32_t *ids, char **tail);

/* A context-free entry from a classification of the whole sorted vocabulary (the accepted
 * sorted positions as bits, vocab.h set_words words; the uncertain ones with their pop
 * depths; the rest rejected), in the smallest of the three plain forms. */
int xgr_mask_entry_from_bits(const struct xgr_vocab *v, const uint64_t *acc_bits,
                             const xgr_pop_list *pops, xgr_mask_entry **out);
/* The same from the accepted sorted positions as a list (ascending). */
int xgr_entry_from_lists(const struct xgr_vocab *v, const xgr_pop_list *acc,
                         const xgr_pop_list *pops, xgr_mask_entry **out);

/* A REFINED entry over `base` that accepts acc[0..n_acc) and leaves unc[0..n_unc) open
 * (both among base's uncertain tokens, in its order); the lists are copied. */
int xgr_entry_refined_from_lists(const struct xgr_vocab *v, const xgr_mask_entry *base,
                                 const int32_t *acc, int32_t n_acc, const int32_t *unc,
                                 int32_t n_unc, xgr_mask_entry **out);
/* The same from verdicts (XGR_V_*) over base's uncertain list. */
int xgr_entry_make_refined(const struct xgr_vocab *v, const xgr_mask_entry *base,
                           const uint8_t *verdict, xgr_mask_entry **out);

/* e->unit_count from e->unit_ids and unit_end (a loop entry's, compiled.h), counted in
 * e->bytes. */
int xgr_entry_set_unit_count(const struct xgr_vocab *v, xgr_mask_entry *e);
/* Splits e's uncertain tokens into runs (compiled.h run_begin), from the classification's
 * groups and the pop list e was built from. */
int xgr_entry_set_runs(xgr_mask_entry *e, const xgr_pop_list *groups, const xgr_pop_list *pops);
/* Groups e's uncertain tokens with a single plain pop by the bytes after it (compiled.h
 * psfx); call before e is shared. */
int xgr_entry_pop_suffixes(const struct xgr_vocab *v, xgr_mask_entry *e,
                           const xgr_pop_list *pops);

#endif
