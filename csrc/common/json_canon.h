/* The canonical text of a JSON document (json_canon.c; declared for callers in xgr2.h as
 * xgr_json_canonical). */
#ifndef XGR_COMMON_JSON_CANON_H
#define XGR_COMMON_JSON_CANON_H

#include "util.h"

#endif
