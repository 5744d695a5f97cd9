/* Canonical serialisation of a rule's reference closure: the rule and every rule it can
 * reach, renumbered in breadth-first order from it, with states relative to each rule's
 * start. Two rules with byte-identical serialisations (in grammars over the same
 * vocabulary) have identical context-free mask-cache entries for corresponding states,
 * which is what lets the cross-grammar cache share them (XGrammar-2 paper, §3.3). The full bytes
 * are kept as the key, so a hash collision can never share a wrong entry.
 * Internal header. */
#ifndef XGR_CLOSURE_H
#define XGR_CLOSURE_H

#include "../lower/fsm.h"

/* *out (caller frees) receives the serialisation of rule's closure; *hash its 64-bit
 * hash. With `opaque`, only the rule itself is serialised, every reference standing for
 * "some rule" that can start with the bytes xgr_ref_first gives at its state: the key of
 * entries computed without entering references, which keep a reference start open only
 * for a token whose next byte is one of those (walk.c, sharpen.c).
 * Fails with XGR_ERR_LIMIT when the closure exceeds max_bytes, or reaches a rule r with
 * kind[r] == unique_kind (kind may be NULL): a rule no other grammar has (a request's tag
 * group), so no other grammar can share the key, and serialising what it holds (every
 * tool of the request) would cost more than the entry. */
int xgr_closure_key(const xgr_fsm *f, int32_t rule, int opaque, const uint8_t *kind,
                    uint8_t unique_kind, size_t max_bytes, uint8_t **out, size_t *out_len,
                    uint64_t *hash);

/* Bytes that can start what a reference at `state` enters (the referenced rules' first
 * bytes, through nullable references), as a 256-bit set; all bytes when one of them can
 * derive the empty string (then anything after it decides). `seen` (zeroed, n_states
 * entries) is scratch stamped with `stamp`, a value not used before with it; `stack` holds
 * n_states entries. Exact for the grammar, so a token whose next byte is outside the set
 * can never enter the reference. */
void xgr_ref_first(const xgr_fsm *f, int32_t state, uint32_t *seen, uint32_t stamp, int32_t *stack,
                   uint32_t out[8]);

/* Widens a TagDispatch rule's xgr_ref_first set: one holding a word byte ([0-9A-Za-z_])
 * holds them all. After a trigger such as `<function=`, the tag group starts with the
 * request's tool names, whose first letters differ between requests; the exact set gave
 * every request its own key, and so its own pass over the vocabulary, for the dispatch
 * states (the request's first mask). Widened, the key and the entries are shared, and the
 * few tokens the wider set keeps open are decided per grammar (sharpen.c
 * sharpen_dispatch, exactly). A trigger followed by punctuation (`{"name": ` then a quote)
 * keeps its exact set, which is what rejects " the" there at its second byte. */
void xgr_ref_first_widen(uint32_t out[8]);

#endif
