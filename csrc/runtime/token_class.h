/* Token classes at run time: which `ExcludeToken(...)` terminals (common/token_marker.h)
 * the parser admits next, and reading one token as the union of its readings (its own
 * marker, the class spans it belongs to, its text). Internal header. */
#ifndef XGR_TOKEN_CLASS_H
#define XGR_TOKEN_CLASS_H

#include "../mask/vocab.h"
#include "../parse/earley.h"

typedef XGR_VEC(int32_t) xgr_tc_list;

/* Appends to *out every class whose span the parser's last row admits, as its id count n
 * then its n excluded ids ascending (a class twice when two spans admit it). Steps the
 * parser and leaves its rows as they were; the caller sets the token position (budgets).
 * XGR_ERR_LIMIT past a step bound (the classes found so far stay in *out). */
int xgr_token_classes_admitted(xgr_parser *p, xgr_tc_list *out);

/* Whether the class at cls (count, then ids ascending) excludes id. */
int xgr_token_class_excludes(const int32_t *cls, int32_t id);

/* The class's span: (cls[0] + 2) markers; out has room for that many * 6 bytes. */
void xgr_token_class_spell(const int32_t *cls, uint8_t *out);

/* One reading of a token: its bytes. */
typedef struct {
    const uint8_t *s;
    size_t n;
} xgr_tc_reading;

/* Feeds the union of the readings: the parser's rows after the token hold every item
 * any reading leads to (the last row's kernel is the union; the rows between hold the
 * first surviving reading's). *ok = 0 (rows unchanged) when no reading survives.
 * `next_tk` as the matcher sets it for a whole token (budgets). */
int xgr_token_feed_union(xgr_parser *p, const xgr_tc_reading *r, size_t n, int *ok);

/* May `id` be one token of a class? Any token of the vocabulary but special tokens and
 * the stop tokens (as upstream's ExcludeToken). */
int xgr_token_class_member(const struct xgr_vocab *v, const int32_t *stop, int32_t n_stop,
                           int32_t id);

/* Sets in `row` every member of every class the parser admits (token position set by the
 * caller). `members`: the bits of xgr_token_class_member; `scratch`: as many words. */
int xgr_token_classes_mask(xgr_parser *p, const uint32_t *members, uint32_t *scratch,
                           size_t row_words, uint32_t *row);

/* Reads class member `token` every way the parser admits at once: its marker when the
 * grammar names it (`named`), each admitted class that holds it, its text. *done = 0
 * (nothing changed) when no class holds it and it is not named: the caller reads it
 * alone; else *done = 1 and *ok says whether some reading survived. */
int xgr_token_accept_union(xgr_parser *p, const struct xgr_vocab *v, int32_t token, int named,
                           int *done, int *ok);

#endif
