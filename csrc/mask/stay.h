/* Tokens that stay put: a state that goes to itself on every byte outside a small set
 * (free text before a trigger, a JSON string's body) accepts every token whose bytes all
 * lie outside it. These helpers decide that from folded byte sets (vocab.h), for a state
 * alone (its leave set) and for the whole sorted vocabulary 64 tokens at a time.
 * Internal header. */
#ifndef XGR_STAY_H
#define XGR_STAY_H

#include "../parse/earley.h"
#include "vocab.h"

/* Per-state flags (compiled.h `scannable`): the state has a byte edge; one of its byte
 * edges leads back to itself. */
enum { XGR_SCAN_BYTE = 1, XGR_SCAN_LOOP = 2 };

/* Do the byte edges of some item of parser row `row` consume all of s[0..n), from its state
 * on (staying in its loop or passing through other states of its rule, as a multi-byte
 * character of a string body does)? Each such edge is a scan of that item alone, so a
 * token whose rest is s survives wherever the row does (a string body, a whitespace run):
 * settled without an Earley step per byte. Only items whose state has XGR_SCAN_LOOP in
 * flags are tried. */
int xgr_row_stays(const xgr_parser *p, int32_t row, const uint8_t *flags, const uint8_t *s,
                  uint32_t n);

/* Two 256-bit byte sets of parser row `row`, for walks that read one row for many tokens:
 * next = the bytes some item of the row has a byte edge on (a superset of the bytes
 * xgr_parser_step survives from this row: a byte outside it kills every item), loop = the
 * bytes some XGR_SCAN_LOOP item (flags) has a byte edge on (a byte outside it makes
 * xgr_row_stays false for a tail starting with it). O(items) once, then
 * each token's test is a bit read instead of a step over a wide row. */
void xgr_row_bytes(const xgr_parser *p, int32_t row, const uint8_t *flags, uint32_t next[8],
                   uint32_t loop[8]);

/* The target of local state s on byte b, or any negative value for none. */
typedef int32_t (*xgr_next_fn)(const void *ctx, int32_t s, uint8_t b);

/* Length of the well-formed multi-byte UTF-8 character at p[0..n) (p[0] >= 0x80), or 0
 * when the bytes there are not one (cut, or ill-formed). */
uint32_t xgr_utf8_char_len(const uint8_t *p, uint32_t n);

/* Does every well-formed multi-byte UTF-8 character take local state s back to s
 * (through states of its own automaton, n of them)? Then the folded bit
 * XGR_FOLD_CHAR of a token (only complete characters) cannot move it. */
int xgr_utf8_closed(int32_t s, int32_t n, xgr_next_fn next, const void *ctx);

/* lv[] for xgr_stay_accept from where each first byte leads: to[c] is the local state
 * byte c leads to (negative: none), leave[2 * s ..] local state s's leave set, `start`
 * the state the tokens start in (a token that starts with a whole multi-byte character is
 * back there after it when `start` is UTF-8 closed, and stays where its lead byte leads
 * when that state keeps every non-ASCII byte). With `next` (the automaton's n local
 * states; NULL: not used), a lead byte whose every well-formed character ends in one state
 * (a search over the automaton times a UTF-8 decoder) takes that state's set when it is
 * UTF-8 closed and a cut character leaves it: a key-trie node, where any character but the
 * node's own letters goes on in the key's loop. A byte gets a set only when it does not
 * leave its target. */
void xgr_stay_first(const int32_t to[256], const uint64_t *leave, int32_t start, int32_t n,
                    xgr_next_fn next, const void *ctx, const uint64_t *lv[256]);

/* Sets in acc (bits by sorted position, v->set_words words) every token whose first byte
 * c has a leave set lv[c] (NULL: none) that the token's folded bytes miss: the state the
 * first byte leads to goes to itself on every byte after it. scratch: set_words words.
 * Ranges whose leave set has more than XGR_STAY_MAX_LEAVE of the 128 folded bytes are
 * left to the walk. */
#define XGR_STAY_MAX_LEAVE 64
void xgr_stay_accept(const struct xgr_vocab *v, const uint64_t *const lv[256], uint64_t *acc,
                     uint64_t *scratch);

/* The first position >= i whose bit is clear in bits (set_words words), or set_words * 64:
 * the next token a walk must visit after those accepted a range at a time. */
static inline int32_t xgr_next_clear(const uint64_t *bits, int32_t set_words, int32_t i) {
    size_t wi = (size_t)i >> 6;
    if (wi >= (size_t)set_words) return set_words * 64;
    uint64_t m = ~bits[wi] & (~(uint64_t)0 << (i & 63));
    while (!m && ++wi < (size_t)set_words) m = ~bits[wi];
    return m ? (int32_t)(wi * 64) + xgr_ctz64(m) : set_words * 64;
}

#endif
