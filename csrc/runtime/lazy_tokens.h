/* Tokens a lazy rule (ir.h `lazy`: ends where it first completes) or a uniqueItems element
 * (ir.h `unique`, xgr_lazy_unique_tokens) can affect: the mask
 * cache's entries treat every occurrence as open, so a token along which a lazy
 * occurrence could complete before its last byte (and then, wrongly, go on in it) needs
 * an exact check. An occurrence completes only after a byte that can end its rule (a
 * byte edge into a state from which the rule may end through nullable references, or
 * such a byte of a rule referenced there): a token with none of those bytes before its
 * last cannot close one inside itself, and the entry's verdict stands. Internal header. */
#ifndef XGR_LAZY_TOKENS_H
#define XGR_LAZY_TOKENS_H

#include <stdint.h>

#include "../lower/fsm.h"
#include "../mask/vocab.h"

/* The 256-bit set of bytes after which some lazy rule of `f` (unique: some uniqueItems
 * element rule, ir.h) may complete. Returns 1 (set all ones) when such a rule is nullable
 * (it could complete without a byte: every token is at risk), 0 otherwise; -1 out of
 * memory. */
int xgr_lazy_end_bytes(const xgr_fsm *f, int unique, uint32_t out[8]);

/* Writes to *out (malloc'ed; caller frees) the sorted-order (vocab.h `sorted`) ids of
 * the tokens of more than one byte holding a byte of `ends` before their last byte, and
 * their count to *n; or *out = NULL, *n = -1 when `all` (every token is at risk).
 * Returns 0, or -1 out of memory. */
int xgr_lazy_risky_tokens(const struct xgr_vocab *v, const uint32_t ends[8], int all,
                          int32_t **out, int32_t *n);

/* uniqueItems (parse/unique.h): writes to *out (malloc'ed; caller frees) the sorted-order
 * ids of the tokens holding at least min_count bytes of `ends` (anywhere, the last one
 * too; `all`: every byte counts), and their count to *n: a token can complete an element
 * only at such a byte. Returns 0, or -1 out of memory. */
int xgr_lazy_unique_tokens(const struct xgr_vocab *v, const uint32_t ends[8], int all, int min_count,
                           int32_t **out, int32_t *n);

#endif
