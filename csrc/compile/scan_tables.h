/* Per-state and per-rule tables a compiled grammar derives from its automata
 * (scan_tables.c), computed once per fragment so a linked grammar copies them with offsets
 * instead of re-reading every fragment's edges. Internal header. */
#ifndef XGR_SCAN_TABLES_H
#define XGR_SCAN_TABLES_H

#include "../lower/fsm.h"

typedef struct {
    uint8_t *scannable;  /* per state: XGR_SCAN_BYTE | XGR_SCAN_LOOP (mask/stay.h), or 0 */
    int32_t *ref_begin;  /* per state: its first ref edge (byte edges come first) */
    int32_t *scan_local; /* per state: index among its rule's scannable states, or -1 */
    int32_t *n_scan;     /* per rule: how many scannable states it has */
    uint8_t *flat;       /* per rule: no ref edges */
    uint8_t *opaque;     /* per rule: 0, XGR_OPAQUE_DISPATCH or XGR_OPAQUE_GROUP */
} xgr_scan_tables;

/* Rules [r0, r1): flat when normal, opaque when a normal TagDispatch rule; n_scan zeroed. */
void xgr_scan_rules_init(const xgr_fsm *f, int32_t r0, int32_t r1, xgr_scan_tables *t);

/* States [0, ns) of f (their rules initialised, and every rule their edges reference):
 * scan flags, ref_begin, scan_local, n_scan counts; a rule holding a reference is not
 * flat, and a normal rule referenced from a TagDispatch rule becomes a tag group. */
void xgr_scan_states(const xgr_fsm *f, int32_t ns, xgr_scan_tables *t);

/* The ref edges of states [0, ns) whose referenced rule has scannable states, in edge
 * order: when `edges`/`first` are non-NULL, writes each one's edge id and the offset of
 * its first pair slot (from `base`). Returns how many there are; *total gets base plus
 * the pair slots they need. */
int32_t xgr_scan_pairs(const xgr_fsm *f, int32_t ns, const xgr_scan_tables *t, int64_t base,
                       int32_t *edges, int32_t *first, int64_t *total);

#endif
