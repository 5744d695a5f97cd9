/* Vocabulary as the mask machinery sees it: decoded token bytes plus the
 * lexicographically sorted list of grammar-matchable tokens with common-prefix
 * lengths, so mask computation can reuse parser rows and skip whole subtrees.
 * Internal header. */
#ifndef XGR_VOCAB_H
#define XGR_VOCAB_H

#include <stdatomic.h>

#include "../common/util.h"

/* A value derived from the vocabulary alone, memoised on it (xgr_vocab_memo_get). */
#define XGR_VOCAB_MEMO_SLOTS 16
#define XGR_VOCAB_MEMO_KEY 10 /* key words */
typedef struct xgr_vocab_memo_entry xgr_vocab_memo_entry;

struct xgr_vocab {
    atomic_int refcount;
    int32_t n_tokens;    /* tokens with bytes */
    int32_t vocab_size;  /* >= n_tokens; ids beyond n_tokens never allowed */
    int32_t row_words;   /* ceil(vocab_size / 32) */
    uint8_t *data;       /* token bytes, CSR by offsets */
    uint32_t *offsets;   /* n_tokens + 1 */
    uint8_t *is_special; /* n_tokens: control tokens, never grammar text */
    int32_t *stop_ids;
    int32_t n_stop;
    /* Tokens that can match grammar text (non-special, non-empty, not a stop token),
     * sorted by bytes; lcp[i] = common prefix length of sorted[i-1] and sorted[i]
     * (lcp[0] = 0). */
    int32_t *sorted;
    int32_t *lcp;
    /* next_shorter[i] = the first k > i with lcp[k] < lcp[i] (n_sorted if none): every
     * position in between shares the longer prefix, so a prefix range ends after a few
     * jumps (lcp strictly falls along them) instead of a search comparing token bytes. */
    int32_t *next_shorter;
    /* The sorted tokens' bytes again, in sorted order (sorted_offsets: n_sorted + 1), so a
     * vocabulary pass reads memory in sequence instead of jumping by token id. */
    uint8_t *sorted_data;
    uint32_t *sorted_offsets;
    /* Each sorted token's first 4 bytes, big-endian, zero past its end: a search over a
     * wide range reads one word per probe instead of an offset and then the bytes it points
     * to (two dependent cache misses on a cold cache). */
    uint32_t *sorted_head;
    /* Which bytes each sorted token holds, folded to 128 bits (xgr_fold_token), two words
     * per token: a state that goes to itself on every byte outside some set accepts a
     * token whose bits miss that set's without walking it (free text before a trigger). */
    uint64_t *sorted_bytes;
    /* The same transposed: for folded bit b, byte_sets[b * set_words ..] has bit i set when
     * sorted token i holds b, so a first-byte range is judged 64 tokens at a time (stay.h).
     * Row XGR_CTRL_SET holds the tokens with any control byte 0x01-0x1F: a JSON string's
     * leave set has all 31, which one OR then covers. */
    uint64_t *byte_sets;
    int32_t set_words; /* ceil(n_sorted / 64) */
    int32_t n_sorted;
    int32_t max_token_len;
    /* The sorted positions again, longest token first (equal lengths in sorted order): the
     * tokens longer than some length are a prefix of it, so a check of the few tokens too
     * long for a character budget (runtime/matcher.c) reads only them. */
    int32_t *by_len;
    uint32_t *text_bits; /* row_words: bit set for every token in `sorted` */
    /* Tokens whose bytes contain 0xFF (a marker's lead byte): never text in a grammar
     * with token-level terminals. A bitset (row_words) and the same ids as a list. */
    uint32_t *ff_bits;
    int32_t *ff_ids;
    int32_t n_ff;
    int32_t first_byte_count[256]; /* sortable tokens per first byte: mask-cost estimates */
    int32_t first_byte_start[257]; /* sorted positions: first byte b in [start[b], start[b+1]) */
    /* For a first byte that starts at least row_words sortable tokens (a space starts half
     * of Llama-3's): their ids as a bit row, so an entry that leaves the whole range out
     * clears it a word at a time instead of a bit per token (entry.c); NULL else. */
    uint32_t *first_ids[256];
    /* pair_start[b0 * 256 + b1]: the first sorted position whose first two bytes are at
     * least (b0, b1), a one-byte token b0 counting as below (b0, 0); [65536] = n_sorted.
     * A search by byte 1 inside a first-byte range is then a lookup. */
    int32_t *pair_start;
    uint64_t fingerprint; /* hash of everything mask verdicts depend on (cache key part) */
    /* Values derived from this vocabulary and a small key only (runtime/matcher.c: the token
     * lists of a 256-bit byte set), shared by every grammar compiled against it: slots
     * filled once with a compare-and-swap, never replaced, freed with the vocabulary. Bounded
     * by the slot count: a byte set's lists take at most ~9 bytes per token (1.3 MB at 151k
     * tokens, when every token qualifies), a JSON element's set a few percent of that. */
    _Atomic(xgr_vocab_memo_entry *) memo[XGR_VOCAB_MEMO_SLOTS];
};

/* The vocabulary memo. Thread-safe; a published value is immutable and lives until the
 * vocabulary is freed (a compiled grammar holds its vocabulary). get: the value stored
 * under `key`, or NULL. put: publishes `value` (ownership passes to the vocabulary) and
 * returns the value now stored under `key`: `value`, or the equal one another thread
 * published first (then `value` is released with free_fn); NULL when every slot holds
 * another key or out of memory (the caller keeps `value`). `v` is const as the caches
 * behind atomics elsewhere: the memo is not part of what the vocabulary says. */
const void *xgr_vocab_memo_get(const struct xgr_vocab *v, const uint32_t key[XGR_VOCAB_MEMO_KEY]);
const void *xgr_vocab_memo_put(const struct xgr_vocab *v, const uint32_t key[XGR_VOCAB_MEMO_KEY], void *value,
                               void (*free_fn)(void *));

/* The bit of byte b in a state's folded leave set: ASCII bytes are exact, every other byte
 * shares bit 0 with NUL. A token's folded set (vocab.c fold_token) puts each complete
 * well-formed multi-byte UTF-8 character on XGR_FOLD_CHAR instead (shared with DEL), which a
 * state's leave set holds unless every such character brings it back (stay.h
 * xgr_utf8_closed). Tests against folded sets can only err towards "may contain" at a
 * character boundary of the token: callers test only where the next byte is not a UTF-8
 * continuation byte. */
static inline int xgr_byte_fold(uint8_t b) { return b < 0x80 ? b : 0; }
#define XGR_CTRL_SET 128                     /* vocab byte_sets row: any of bits 1..31 */
#define XGR_CTRL_BITS ((uint64_t)0xFFFFFFFEu) /* folded bits 1..31 in word 0 */
#define XGR_FOLD_CHAR 0x7F
static inline int xgr_utf8_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

static inline const uint8_t *xgr_vocab_token(const struct xgr_vocab *v, int32_t id,
                                             uint32_t *len) {
    *len = v->offsets[id + 1] - v->offsets[id];
    return v->data + v->offsets[id];
}

/* The bytes of sorted token i. */
static inline const uint8_t *xgr_vocab_sorted_token(const struct xgr_vocab *v, int32_t i,
                                                    uint32_t *len) {
    *len = v->sorted_offsets[i + 1] - v->sorted_offsets[i];
    return v->sorted_data + v->sorted_offsets[i];
}

/* Does token `id` start with prefix[0..plen)? */
static inline int xgr_vocab_id_has_prefix(const struct xgr_vocab *v, int32_t id,
                                          const uint8_t *prefix, uint32_t plen) {
    uint32_t ml;
    const uint8_t *mt = xgr_vocab_token(v, id, &ml);
    return ml >= plen && memcmp(mt, prefix, plen) == 0;
}

/* First sorted index >= i whose token does not start with prefix[0..plen); sorted token
 * i itself has the prefix, and the tokens i.. that do are contiguous because the order is
 * lexicographic, so the range ends at the first lcp below plen. A one-byte prefix is a
 * table lookup; a longer one follows next_shorter (the mask passes skip thousands of such
 * ranges per state). */
static inline int32_t xgr_vocab_prefix_end(const struct xgr_vocab *v, int32_t i,
                                           const uint8_t *prefix, uint32_t plen) {
    if (plen == 1) return v->first_byte_start[prefix[0] + 1];
    int32_t j = i + 1;
    while (j < v->n_sorted && v->lcp[j] >= (int32_t)plen) j = v->next_shorter[j];
    return j;
}

#endif
