/* xgrammar2 C core: the single public header.
 *
 * Conventions
 * - Every function that can fail returns an int status (XGR_OK == 0). On failure the
 *   calling thread's message is available from xgr_last_error() until the next failing
 *   call on that thread. The core never aborts the process.
 * - Text and byte inputs are (ptr, len) spans; they need not be NUL-terminated and are
 *   copied when kept.
 * - Handles are opaque. Grammar, vocabulary and compiled-grammar handles are immutable
 *   after creation, reference counted (retain/release are atomic) and safe to share
 *   across threads. A matcher belongs to one thread at a time.
 * - Memory returned through `char **out` is owned by the caller and freed with xgr_free.
 */
#ifndef XGR2_H
#define XGR2_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status codes ------------------------------------------------------------- */
enum {
    XGR_OK = 0,
    XGR_ERR_INVALID_ARG = 1, /* bad argument: NULL, out-of-range id, bad option */
    XGR_ERR_SYNTAX = 2,      /* malformed EBNF / regex: message has line:column */
    XGR_ERR_SEMANTIC = 3,    /* undefined rule, missing root, bad repetition bounds */
    XGR_ERR_NOMEM = 4,       /* allocation failed */
    XGR_ERR_LIMIT = 5,       /* a configured size / work limit was exceeded */
    XGR_ERR_UTF8 = 6,        /* invalid UTF-8 where text is expected */
    XGR_ERR_STATE = 7,       /* operation not valid in the current state (e.g. rollback too far) */
    XGR_ERR_INTERNAL = 8     /* a bug: please report */
};

/* The calling thread's last error message ("" if none). Valid until the next failing
 * call on the same thread. Thread-safe. */
const char *xgr_last_error(void);

/* Frees memory returned by the core through `char **` / `int32_t **` outputs. */
void xgr_free(void *p);

/* ---- grammars (front ends) ---------------------------------------------------- */
typedef struct xgr_grammar xgr_grammar;

/* Parses EBNF in upstream xgrammar's dialect. `root` names the start rule ("root" when
 * root_len == 0). Errors carry "line L, column C". Thread-safe. */
int xgr_grammar_from_ebnf(const char *src, size_t src_len, const char *root,
                          size_t root_len, xgr_grammar **out);
/* The grammar of a triggered_tags structural tag with one trigger whose tags' contents are
 * stand-in rules to link (xgr_compile_linked): root ::= triggered_tags; each distinct
 * stand-in ::= "L"; triggered_tags_group ::= the alternatives (rest_i stand-in_i end_i);
 * triggered_tags ::= TagDispatch((trigger, triggered_tags_group), loop_after_dispatch,
 * excludes). The same grammar xgr_grammar_from_ebnf gives for that text, without the text.
 * String k is data[offsets[k] .. offsets[k+1]): the trigger, then per tag its begin after
 * the trigger, its stand-in's name and its end (empty parts are left out), then the
 * excluded strings; offsets has 2 + 3 * n_tags + n_excl entries. The caller passes the
 * alternatives and excludes already deduplicated. XGR_ERR_INVALID_ARG for an empty
 * trigger or exclude, a stand-in name that is empty, holds a NUL or is one of the three
 * rule names above. The caller owns *out. Thread-safe. */
int xgr_grammar_triggered_links(const uint8_t *data, const uint32_t *offsets, size_t n_tags,
                                size_t n_excl, int loop_after_dispatch, xgr_grammar **out);
/* Compiles a regex (whole-output, anchored semantics) into a grammar. Thread-safe. */
int xgr_grammar_from_regex(const char *src, size_t src_len, xgr_grammar **out);
/* Regex dialects: upstream xgrammar's two (Grammar.from_regex / compile_regex, and the EBNF
 * Regex(...) macro) and ECMAScript (ECMA-262 with the u flag: JSON Schema `pattern`,
 * `patternProperties`, `propertyNames`, string formats). docs/regex.md has the rules. */
enum { XGR_REGEX_CONVERTER = 0, XGR_REGEX_MACRO = 1, XGR_REGEX_ECMASCRIPT = 2 };
/* Node kinds of a flat regex syntax tree (xgr_regex_ast). */
enum {
    XGR_RX_SET = 0, /* one code point from a set (an empty set matches nothing) */
    XGR_RX_CAT = 1, /* concatenation of children */
    XGR_RX_ALT = 2, /* alternation of children */
    XGR_RX_REP = 3, /* repetition of one child */
    XGR_RX_EPS = 4, /* the empty string */
    XGR_RX_BOL = 5, /* ^ (ECMAScript only; the other dialects read ^ as EPS) */
    XGR_RX_EOL = 6, /* $ (ECMAScript only) */
    XGR_RX_LOOK = 7, /* lookahead (ECMAScript only): (?=child) or, when negated, (?!child) */
    XGR_RX_WORDB = 8 /* \b or, when negated, \B (ECMAScript only) */
};
/* A regex as a flat tree. Node i is nodes[5*i .. 5*i+5) = {kind, a, b, c, d}; a node's
 * children always have smaller ids, the root is node `root`.
 *   SET: data[a .. a+2b) are b (lo, hi) code-point ranges (as written: unsorted, maybe
 *        overlapping), then data[a+2b .. a+2b+c) are c Unicode general-category
 *        properties (\p{..}), each (first letter | second letter << 8) << 1 | negated
 *        (second letter 0 for one-letter categories; "LC" is Lu | Ll | Lt); the set is
 *        the union of all of these, complemented when d is 1.
 *   CAT / ALT: data[a .. a+b) are the b child ids, in order.
 *   REP: child a, at least b, at most c times (c = -1: unbounded).
 *   LOOK: child a, b is 1 for a negative lookahead (?!..), 0 for (?=..).
 *   WORDB: b is 1 for \B, 0 for \b.
 *   EPS / BOL / EOL: no fields. */
typedef struct xgr_regex_ast {
    int32_t *nodes;
    size_t n_nodes;
    int32_t *data;
    size_t n_data;
    int32_t root;
} xgr_regex_ast;
/* Parses `src` (UTF-8) in `dialect` (XGR_REGEX_*) into a flat tree; the caller owns *out
 * and frees it with xgr_regex_ast_free. The upstream dialects give the tree of what
 * xgr_grammar_from_regex / the macro compile (anchors as EPS, lookaheads as EPS).
 * Status: XGR_ERR_SYNTAX for a malformed pattern; XGR_ERR_SEMANTIC (ECMAScript) for a
 * valid pattern using a construct a regular grammar cannot express or that is not
 * supported (lookbehind, backreferences, unknown \p names, escapes
 * with no ECMAScript meaning, repetition counts above 10^9); XGR_ERR_UTF8, XGR_ERR_LIMIT
 * (nesting deeper than 1000), XGR_ERR_NOMEM, XGR_ERR_INVALID_ARG. Messages name the
 * column in the pattern. Thread-safe. */
int xgr_regex_parse(const char *src, size_t src_len, int dialect, xgr_regex_ast **out);
void xgr_regex_ast_free(xgr_regex_ast *ast); /* NULL is a no-op */
/* The builtin JSON grammar: an object or an array at the top level (as upstream
 * xgrammar's), any JSON value inside. Thread-safe. */
int xgr_grammar_builtin_json(xgr_grammar **out);
/* A grammar whose root is the alternation / concatenation of the given grammars' roots.
 * Rules are renamed to stay distinct. Thread-safe. */
int xgr_grammar_union(xgr_grammar *const *gs, size_t n, xgr_grammar **out);
int xgr_grammar_concat(xgr_grammar *const *gs, size_t n, xgr_grammar **out);
/* A copy of g in which every literal that spells one of the given texts (special tokens'
 * text: spelling i is data[offsets[i] .. offsets[i+1]) for token ids[i]) also admits that
 * token as a token-level terminal, and TagDispatch triggers that spell one get a variant
 * with the token. *out = NULL (and XGR_OK) when no literal spells any of them: use g.
 * The caller owns *out. Thread-safe. */
int xgr_grammar_spell_tokens(const xgr_grammar *g, const uint8_t *data, const uint32_t *offsets,
                             const int32_t *ids, size_t n, xgr_grammar **out);
/* Prints the grammar as canonical EBNF (parseable by xgr_grammar_from_ebnf).
 * *out is NUL-terminated; free with xgr_free. Thread-safe. */
int xgr_grammar_to_ebnf(const xgr_grammar *g, char **out, size_t *out_len);
void xgr_grammar_retain(xgr_grammar *g);
void xgr_grammar_release(xgr_grammar *g); /* NULL is a no-op */
/* Bytes held by g (0 for NULL). Thread-safe: g is immutable once built. */
size_t xgr_grammar_memory(const xgr_grammar *g);
/* The deepest nesting of arrays and objects in JSON text (brackets inside strings are not
 * counted; the text need not be valid JSON, it is only scanned). Stops early and reports
 * limit + 1 once the depth exceeds `limit`, so a deep document costs at most its length.
 * Thread-safe; allocates nothing. */
int xgr_json_nesting_depth(const char *text, size_t len, int32_t limit, int32_t *depth);
/* The canonical text of JSON text: what Python's json.dumps(json.loads(text),
 * separators=(",", ":"), ensure_ascii=False) gives, made in one pass without building the
 * document (the compile caches' key of a JSON schema). `out` must hold `len` bytes (the
 * canonical text is never longer). *known = 1 and *out_len = its length when the pass proves
 * it; *known = 0 when it cannot (not JSON, NaN / Infinity, an exponent, a float whose repr is
 * not its text, a lone surrogate escape, a duplicate key, an integer over 640 digits, nesting
 * deeper than `limit`): the caller converts the slow way. Thread-safe. */
int xgr_json_canonical(const char *text, size_t len, int32_t limit, char *out, size_t *out_len,
                       int32_t *known);
/* A string keyword's value that xgr_json_schema_plain may enforce as the caller's converter
 * enforces it: `keyword` is "format" or "pattern", `text` its string value as the canonical
 * text spells it between the quotes (escapes as they are). The texts are NUL-terminated and
 * borrowed for the call. `value` is the EBNF expression of a JSON string with that value
 * (its quotes included), or NULL when it constrains nothing (an annotation the converter
 * accepts without a warning). `rules` (NULL: none) holds the rules `value` refers to, one
 * "NAME ::= BODY" per line; equal names are taken to be equal rules (written once per
 * grammar). A rule named `char` must be the front end's own (JSON's string character) or
 * the schema is left to the caller; no other name may be one the front end writes (root, ws,
 * string, integer, number, value, object, array, or a letter of o, a, e, d, f followed by
 * digits, or x followed by letters and digits).
 * `keyword` "schema" is a type part the front end leaves to the converter: `text` the compact
 * JSON of the subschema of that one type with its keywords as the canonical text spells them
 * ({"type":"string","pattern":P,"maxLength":N}, {"type":"number","minimum":M}: a string
 * format or pattern beside a length or beside each other, bounds on a number, bounds on an
 * integer that are not integers), `value` the expression of that subschema (never NULL).
 * `keyword` "part" is a subschema object the front end cannot write inside a schema it can
 * (a keyword it leaves to the converter, an overlapping oneOf, $ref beside keywords...):
 * `text` "@OFF:LEN", its span in the canonical text (decimal byte offset and length), `value`
 * the name of the caller's rule for it, NULL when the caller refused it (the schema is then
 * left to the caller). The `rules` of every "part" entry are written once, in table order,
 * when a part is used: a rule named like a shared rule (ws, string, char, integer, number,
 * value, object, array) must be the front end's text (ws as max_whitespace makes it) or the
 * schema is left to the caller, a `char_*` rule is written once among the forms' helpers,
 * every other name must be one no other entry and not the front end define. */
typedef struct {
    const char *keyword;
    const char *text;
    const char *value;
    const char *rules;
} xgr_json_string_form;

/* The grammar of a JSON schema in the plain subset (csrc/front/json_schema_plain.c: listed
 * object properties, arrays, scalar types, scalar enums, the string formats and patterns of
 * `forms`, annotations), converted in the core for compile_json_schema's default options (any
 * whitespace, strict mode) with max_whitespace_cnt = max_whitespace (< 0: unbounded); it
 * accepts what the Python converter's grammar of the schema accepts. `canon` is the schema's
 * canonical text (xgr_json_canonical, or Python's compact json.dumps). *out = NULL with XGR_OK
 * when the schema is outside the subset, is not JSON or is unsatisfiable: the caller converts
 * it in Python. A `format` or `pattern` value not in `forms` (n_forms entries; NULL with 0)
 * gives *out = NULL too, and when `missing` is not NULL, *missing = how many such values
 * were met in a schema otherwise in the subset (0 otherwise): a caller can call without
 * forms first and build entries only for schemas the core will take. The same for a
 * "schema" form not in `forms`; their texts are not in the canonical text, so when `wants`
 * is not NULL (nor `wants_len`), *wants = the texts of those missing, each followed by a NUL
 * (*wants_len bytes in all; duplicates possible; NULL and 0 when none), freed with xgr_free.
 * A caller that passes `wants` converts parts too: the keys ("@OFF:LEN") of the parts not in
 * `forms` are in *wants, and counted in *missing (a part is never one whose subtree has a
 * $ref other than a local fragment, a "#" alone, an `$id` / `id` string or an anchor; the
 * root only when it has definitions). A "part-ref" entry (`text` a local reference such as
 * "#/definitions/NAME", `value` a rule name, `rules` NULL) is a definition the parts' rules
 * name instead of converting it: the front end writes `value ::= ` its own rule for it
 * (the schema is left to the caller when it cannot). Without `wants`, a schema with a part
 * is outside the subset.
 * XGR_ERR_INVALID_ARG when the texts of `forms` it used do not parse as EBNF. The caller owns
 * *out. Thread-safe. */
int xgr_json_schema_plain(const char *canon, size_t len, int32_t max_whitespace,
                          const xgr_json_string_form *forms, size_t n_forms, xgr_grammar **out,
                          int32_t *missing, char **wants, size_t *wants_len);

/* ---- vocabulary ---------------------------------------------------------------- */
typedef struct xgr_vocab xgr_vocab;

/* Builds a vocabulary from already-decoded token byte strings.
 * Token i is data[offsets[i] .. offsets[i+1]); offsets has n_tokens + 1 entries.
 * vocab_size >= n_tokens: ids in [n_tokens, vocab_size) have no token and are never
 * allowed. special_ids: control tokens that never match grammar text. stop_ids: tokens
 * that end generation (allowed only where the grammar can end). n_tokens and vocab_size
 * may be 0 (an empty vocabulary: strings only, empty masks). Thread-safe. */
int xgr_vocab_new(const uint8_t *data, const uint32_t *offsets, int32_t n_tokens,
                  int32_t vocab_size, const int32_t *special_ids, size_t n_special,
                  const int32_t *stop_ids, size_t n_stop, xgr_vocab **out);
int32_t xgr_vocab_size(const xgr_vocab *v);
void xgr_vocab_retain(xgr_vocab *v);
void xgr_vocab_release(xgr_vocab *v);

/* ---- compilation ---------------------------------------------------------------- */
typedef struct {
    int32_t max_rules;          /* 0 = default (100000) */
    int32_t max_fsm_states;     /* 0 = default (2000000) */
    int32_t inline_max_states;  /* inline non-recursive rules up to this size (0 = default 64;
                                 * a reference-free rule over 40 states whose copies would
                                 * pass 1,024 states keeps its own automaton); -1 = never */
    int32_t repeat_threshold;   /* unroll {m,n} when n (or m if n unbounded) <= this; 0 = default (16) */
    int32_t precompute;         /* 1: compute every mask-cache entry at compile time */
    int32_t max_row_items;      /* 0 = default (100000): parser row size limit per byte */
    int32_t context_min_uncertain; /* a state whose plain mask entry leaves more uncertain
                                    * tokens than this uses parent-context entries;
                                    * 0 = default (256), -1 = always */
    int32_t cross_grammar_cache; /* 0 = default (on), 1 = on, -1 = off (private entries, and
                                  * no process-wide memo of per-rule automata) */
    int32_t max_step_work;      /* 0 = default (500000): parser work units (items visited,
                                 * completions tried) allowed for one byte; bounds the time
                                 * one token costs on highly ambiguous grammars */
    int32_t drop_grammar;       /* 1: release the grammar once compiled (it is kept only for
                                 * xgr_compiled_grammar, which then returns NULL), for a
                                 * caller that can rebuild it and wants the memory back */
} xgr_compile_options;

typedef struct xgr_compiled xgr_compiled;

/* Compiles a grammar against a vocabulary. Safe to call from many threads at once.
 * `opts` may be NULL for defaults. */
int xgr_compile(const xgr_grammar *g, const xgr_vocab *v, const xgr_compile_options *opts,
                xgr_compiled **out);
/* ---- linking ------------------------------------------------------------------------
 * A request's tool set changes while its tools recur. A fragment is one tool's grammar
 * (say its argument schema) lowered to automata once; xgr_compile_linked compiles a
 * request grammar whose stand-in rules are replaced by fragments, so a tool seen before
 * costs a copy of its automata instead of a parse and a lowering. */
typedef struct xgr_fragment xgr_fragment;

/* Lowers g (validated, every rule productive) to a fragment. Its root rule must not match
 * the empty string (XGR_ERR_SEMANTIC). `opts` as for xgr_compile (NULL for defaults); a
 * fragment must be linked with the same options. The caller owns *out. Thread-safe;
 * a fragment is immutable and may be linked from many threads at once. */
int xgr_fragment_new(const xgr_grammar *g, const xgr_compile_options *opts,
                     xgr_fragment **out);
size_t xgr_fragment_memory(const xgr_fragment *f); /* bytes held, 0 for NULL */
void xgr_fragment_retain(xgr_fragment *f);
void xgr_fragment_release(xgr_fragment *f); /* NULL is a no-op */
/* Compiles g with its rules names[i] (i < n, distinct, each a non-nullable stand-in whose
 * body does not matter) replaced by frags[i]: every reference to names[i] enters
 * frags[i]'s root. Each stand-in is kept out of inlining so its uses stay references.
 * Borrows names and frags (the result retains what it needs). Errors as xgr_compile, plus
 * XGR_ERR_SEMANTIC for a name g does not define. Thread-safe. */
int xgr_compile_linked(const xgr_grammar *g, const char *const *names,
                       xgr_fragment *const *frags, size_t n, const xgr_vocab *v,
                       const xgr_compile_options *opts, xgr_compiled **out);
/* The byte spans of the tags in a structural tag's JSON text: the elements of every "tags"
 * array reached from the top-level object through "format", "content" and "elements"
 * only, in document order; (*spans)[2i], (*spans)[2i + 1] are the i-th tag's begin and
 * end offsets. Strict JSON; XGR_ERR_SYNTAX for text that is not, or that repeats one of
 * those four keys in an object (its reader would keep only the last), so the caller reads
 * it in full instead. *spans is freed with xgr_free (NULL when there are none).
 * Thread-safe. */
int xgr_structural_tag_spans(const char *text, size_t len, uint64_t **spans, size_t *n_spans);

/* ---- tag table ------------------------------------------------------------------------
 * Tool tags seen before, keyed by their JSON text, so that a request whose every tag was
 * seen (a tool list in a new combination) is resolved and compiled in two calls with no
 * per-tag work in the caller. The caller's tag cache owns the policy (what is kept, what
 * is evicted) and mirrors here each tag of the shape begin + JSON-schema content lowered
 * to a fragment + one end. Every function is thread-safe (one lock per table). */
typedef struct xgr_tag_table xgr_tag_table;
typedef struct xgr_tag_hits xgr_tag_hits;

int xgr_tag_table_new(xgr_tag_table **out); /* the caller owns *out */
void xgr_tag_table_free(xgr_tag_table *t);  /* NULL is a no-op; hits stay valid */
void xgr_tag_table_clear(xgr_tag_table *t);
size_t xgr_tag_table_size(xgr_tag_table *t); /* tags held */
/* Records (or replaces) the tag whose JSON text is key: its begin, the name of the
 * stand-in rule its content links through (non-empty, no NUL) and its end; retains frag.
 * All strings are copied. */
int xgr_tag_table_put(xgr_tag_table *t, const uint8_t *key, size_t klen, const uint8_t *begin,
                      size_t blen, const char *name, size_t nlen, const uint8_t *end,
                      size_t elen, xgr_fragment *frag);
/* Drops the tag with this text; 1 if it was there, else 0. */
int xgr_tag_table_remove(xgr_tag_table *t, const uint8_t *key, size_t klen);
/* Whether a resolve used the tag since the last call (and clears that): the caller's
 * eviction gives such a tag a second chance, as its LRU order would. 0 when absent. */
int xgr_tag_table_take_used(xgr_tag_table *t, const uint8_t *key, size_t klen);
/* The tags of the structural tag text raw (xgr_structural_tag_spans) when every one is in
 * t: *hits (each retained, in document order; free with xgr_tag_hits_free) and the
 * skeleton, raw with each tag replaced by `null` (NUL-terminated, *skeleton_len bytes
 * before the NUL; free with xgr_free). When the text cannot be split, has no tags or has
 * one not in t: XGR_OK with *hits = NULL and *skeleton = NULL. */
int xgr_tag_table_resolve(xgr_tag_table *t, const uint8_t *raw, size_t len,
                          xgr_tag_hits **hits, uint8_t **skeleton, size_t *skeleton_len);
size_t xgr_tag_hits_count(const xgr_tag_hits *h);
void xgr_tag_hits_free(xgr_tag_hits *h); /* NULL is a no-op */
/* Compiles the triggered_tags format with one trigger over the tags of h (a tag listed
 * twice counts once): the grammar xgr_grammar_triggered_links builds from their strings
 * (excludes: data[offsets[i] .. offsets[i+1]), i < n_excl, deduplicated, none empty),
 * with special tokens spelled as xgr_grammar_spell_tokens does (n_sp = 0: none), and each
 * tag's stand-in linked to its fragment (xgr_compile_linked). XGR_OK with *out = NULL
 * when a tag's begin does not start with the trigger or the strings are too long for the
 * direct build: the caller compiles the request the general way. */
int xgr_compile_tag_hits(const xgr_tag_hits *h, const uint8_t *trigger, size_t trigger_len,
                         const uint8_t *excl_data, const uint32_t *excl_offsets, size_t n_excl,
                         int loop_after_dispatch, const uint8_t *sp_data,
                         const uint32_t *sp_offsets, const int32_t *sp_ids, size_t n_sp,
                         const xgr_vocab *v, const xgr_compile_options *opts,
                         xgr_compiled **out);

/* ---- compiled images (the on-disk compile cache, docs/disk-cache.md) -----------------
 * An image is a compiled grammar's automata and token-terminal ids as one byte string
 * (native byte order), so another process with the same vocabulary can rebuild the
 * compiled grammar without parsing or lowering. The caller keys and checksums it. */
/* *out (free with xgr_free; *out_len bytes), or *out = NULL and *out_len = 0 when c has no
 * image (a grammar with rule attributes). Thread-safe. */
int xgr_compiled_image(const xgr_compiled *c, uint8_t **out, size_t *out_len);
/* The compiled grammar of an image, against v with opts (NULL for defaults; its limits
 * are checked again). Every count, offset and id is bounds-checked and the automata's
 * invariants are verified: a truncated, damaged or hostile image gives
 * XGR_ERR_INVALID_ARG ("corrupt compiled image: ..."), never a crash. The result keeps no
 * grammar (xgr_compiled_grammar returns NULL). The caller owns *out. Thread-safe. */
int xgr_compiled_from_image(const uint8_t *img, size_t len, const xgr_vocab *v,
                            const xgr_compile_options *opts, xgr_compiled **out);

/* ---- mask entry packs (the on-disk compile cache, docs/disk-cache.md) ----------------
 * A pack is the cross-grammar cache's shareable mask entries over vocabulary v (native byte
 * order), so another process with the same vocabulary and core build starts with them.
 * The caller names and checksums it. */
/* The entries of v inserted after insertion number after_seq (0: all) and not themselves
 * loaded from a pack: *out (free with xgr_free; *out_len bytes, *n_entries entries; a pack
 * with no entries when there are none); *last_seq = the insertion number to pass next
 * time. Thread-safe. */
int xgr_mask_pack_build(const xgr_vocab *v, uint64_t after_seq, uint8_t **out, size_t *out_len,
                        uint64_t *last_seq, int32_t *n_entries);
/* Checks every count, offset and token id of a pack against v and inserts its entries into
 * the cross-grammar cache (copies; entries already cached are kept). A truncated, damaged
 * or hostile pack gives XGR_ERR_INVALID_ARG ("corrupt mask pack: ...") and inserts
 * nothing, never a crash. Thread-safe. */
int xgr_mask_pack_load(const uint8_t *buf, size_t len, const xgr_vocab *v, int32_t *n_loaded);

/* A read-only file image with a reference count: a file's bytes mapped read-only (mmap)
 * where that is safe, else read into memory; released (unmapped or freed) when its last
 * reference goes. Mask entries loaded from one borrow their arrays from it (no copy), and
 * each holds a reference, so the image lives until the last of them is evicted. The file
 * may be renamed over or unlinked while mapped (the mapping keeps the old file); it must
 * not be written in place or truncated (the on-disk cache never does: it publishes by
 * rename and evicts by unlink). */
typedef struct xgr_file_map xgr_file_map;
enum {
    XGR_FILE_MAP_AUTO = 0, /* map on local filesystems; read into memory on network ones
                            * (NFS, SMB, Lustre, FUSE, ...: a file another node removes can
                            * fault a mapping) */
    XGR_FILE_MAP_READ = 1, /* always read into memory */
    XGR_FILE_MAP_MMAP = 2, /* always map (tests) */
    XGR_FILE_MAP_SMALL = 3 /* read a file of at most XGR_FILE_MAP_SMALL_BYTES into memory (one
                            * read costs less than mmap + munmap + fstatfs + page faults),
                            * a larger one as XGR_FILE_MAP_AUTO: one open decides both */
};
enum { XGR_FILE_MAP_SMALL_BYTES = 65536 };
/* Opens `path` (a regular file of at most max_len bytes) read-only: *out holds one
 * reference. XGR_ERR_INVALID_ARG when it cannot be opened or is not a regular file (the
 * message has the reason), XGR_ERR_LIMIT when longer than max_len. Thread-safe. */
int xgr_file_map_open(const char *path, int mode, size_t max_len, xgr_file_map **out);
/* An image of a copy of buf (heap, exactly len bytes): for tests and fuzzing. */
int xgr_file_map_from_bytes(const uint8_t *buf, size_t len, xgr_file_map **out);
/* The image's bytes (*len bytes; valid while a reference is held). */
const uint8_t *xgr_file_map_data(const xgr_file_map *m, size_t *len);
/* 1 when the image is a mapping, 0 when it was read into memory. */
int xgr_file_map_is_mapped(const xgr_file_map *m);
/* The current number of references (the caller's, and one per entry borrowing from it). */
int32_t xgr_file_map_refs(const xgr_file_map *m);
/* Drops one reference (NULL-safe); the last one unmaps or frees the image. */
void xgr_file_map_release(xgr_file_map *m);
/* xgr_mask_pack_load over m's bytes [offset, offset + len) without copying: the same checks,
 * all of them before anything is inserted, then every inserted entry points into m and
 * holds a reference to it (entries already cached are kept, and the pack's duplicates
 * dropped). A region that is not 8-aligned is loaded as copies. Thread-safe. */
int xgr_mask_pack_load_mapped(xgr_file_map *m, size_t offset, size_t len, const xgr_vocab *v,
                              int32_t *n_loaded);

/* ---- layer packs (the on-disk compile cache, docs/disk-cache.md, "Layer packs") ---------
 * A layer pack is one compiled grammar's own mask layers (its published slot entries:
 * sharpened plain entries, caller-context entries, TagDispatch views) with the context-free
 * entries they refine, so a process that loads the same grammar from the directory starts
 * with them. Native byte order; the caller names and checksums it. */
/* The number of c's published slot entries (cheap: a look at its slot table); a layer
 * pack is worth writing again when it grew. Thread-safe. */
int32_t xgr_compiled_layer_count(const xgr_compiled *c);
/* c's published slot entries that a pack can hold: *out (free with xgr_free; *out_len
 * bytes, *n_entries slot entries). Thread-safe (entries published meanwhile may be left
 * out). */
int xgr_layer_pack_build(const xgr_compiled *c, uint8_t **out, size_t *out_len,
                         int32_t *n_entries);
/* Checks the whole pack against c (version, vocabulary, the grammar's automata, slot
 * layout and options, every count, token id, slot and reference) and publishes its
 * entries in c's empty slots, borrowing their arrays from m's bytes [offset, offset + len)
 * (each holds a reference to m; a region that is not 8-aligned is loaded as one copy). A
 * truncated, damaged, hostile or foreign pack gives XGR_ERR_INVALID_ARG ("corrupt layer
 * pack: ...") and publishes nothing, never a crash. *n_loaded: entries published.
 * Thread-safe. */
int xgr_layer_pack_load_mapped(xgr_compiled *c, xgr_file_map *m, size_t offset, size_t len,
                               int32_t *n_loaded);
/* The same over a copy of buf (one heap block the entries borrow from). */
int xgr_layer_pack_load(xgr_compiled *c, const uint8_t *buf, size_t len, int32_t *n_loaded);

/* Bytes held by the compiled grammar: its grammar (unless dropped), automata, slot tables
 * and mask cache (grows as masks are JIT-built; shared entries count in every grammar
 * holding them). */
size_t xgr_compiled_memory(const xgr_compiled *c);
/* Builds the `k` most expensive not-yet-built mask-cache entries, by an estimate of
 * their vocabulary-pass cost (every entry, caller-context ones included, when k < 0).
 * Thread-safe: meant to run in the background while the engine prefills. */
int xgr_compiled_precompute(xgr_compiled *c, int32_t k);
/* Grammar / vocabulary the compiled grammar was built from (borrowed); the grammar is
 * NULL when compiled with drop_grammar. */
const xgr_grammar *xgr_compiled_grammar(const xgr_compiled *c);
const xgr_vocab *xgr_compiled_vocab(const xgr_compiled *c);
void xgr_compiled_retain(xgr_compiled *c);
void xgr_compiled_release(xgr_compiled *c);

/* ---- cross-grammar cache -------------------------------------------------------------- */
/* Mask-cache entries of rules that do not depend on their context are shared by every
 * compiled grammar in the process whose rule has the same canonical structure (over the
 * same vocabulary). The cache is bounded by a byte budget (default 256 MiB) with LRU
 * eviction. All three functions are thread-safe. */
typedef struct {
    uint64_t hits, misses, inserts, evictions;
    uint64_t entries, bytes, budget;
} xgr_cache_stats;
void xgr_cache_get_stats(xgr_cache_stats *out);
void xgr_cache_set_budget(uint64_t bytes); /* evicts down to the new budget at once */
void xgr_cache_clear(void);                /* drops every entry and zeroes the counters */
/* A second, smaller cache memoises per-rule automata (determinised and minimised) across
 * grammars, keyed by the rule's NFA with its references renumbered, so a tool schema seen
 * in an earlier request does not pay for its subset construction again. Its budget is an
 * eighth of the mask budget, at most 32 MiB (set by xgr_cache_set_budget); it is
 * emptied by xgr_cache_clear. Thread-safe. */
typedef struct {
    uint64_t hits, misses, entries, bytes;
} xgr_automaton_cache_stats;
void xgr_automaton_cache_get_stats(xgr_automaton_cache_stats *out);

/* ---- matcher ------------------------------------------------------------------------ */
typedef struct xgr_matcher xgr_matcher;

/* override_stop: when non-NULL, replaces the vocabulary's stop tokens (n may be 0).
 * terminate_without_stop (upstream xgrammar's semantics): xgr_matcher_is_terminated is
 * xgr_matcher_can_end and stop tokens are never accepted; whatever the grammar allows
 * goes on being accepted after it may end, and the mask is as without the flag (stop
 * tokens set where the grammar can end). max_rollback: tokens kept for rollback
 * (-1 = unlimited). Not thread-safe: use one matcher per thread. */
int xgr_matcher_new(xgr_compiled *c, const int32_t *override_stop, size_t n_override,
                    int use_override, int terminate_without_stop, int32_t max_rollback,
                    xgr_matcher **out);
void xgr_matcher_free(xgr_matcher *m);
/* A deep copy with identical state. */
int xgr_matcher_fork(const xgr_matcher *m, xgr_matcher **out);
/* *accepted = 1 and state advanced, or 0 and state unchanged. Ids out of
 * [0, vocab_size) return XGR_ERR_INVALID_ARG. */
int xgr_matcher_accept_token(xgr_matcher *m, int32_t token, int *accepted);
/* Accepts raw bytes (as one step for rollback). *accepted as above. */
int xgr_matcher_accept_bytes(xgr_matcher *m, const uint8_t *s, size_t n, int *accepted);
/* Writes the whole row: `row` has `row_words` int32 words (>= ceil(vocab_size/32); with
 * vocab_size 0, row_words may be 0 and row NULL).
 * Bit t%32 of word t/32 set = token t allowed. Words beyond the vocabulary are zeroed.
 * *need_apply = 0 when every token is allowed (may be NULL). After a stop token the row
 * is zeroed and XGR_ERR_STATE is returned (nothing more can be accepted; upstream raises). */
int xgr_matcher_fill_bitmask(xgr_matcher *m, int32_t *row, size_t row_words,
                             int *need_apply);
/* The same two calls with the result as the return value, for bindings (Python reads an
 * out-parameter through a boxed pointer, ~50 ns a call): accept returns 1 (accepted) or 0,
 * fill returns need_apply (1, or 0 when every token is allowed); a failure returns minus
 * its status, with the message in xgr_last_error as usual. */
int xgr_matcher_accept_token_ret(xgr_matcher *m, int32_t token);
int xgr_matcher_fill_bitmask_ret(xgr_matcher *m, int32_t *row, size_t row_words);
/* Test oracle: the same row as xgr_matcher_fill_bitmask, computed without the mask
 * cache by running the parser on every token. Slow; for tests and debugging. */
int xgr_matcher_fill_bitmask_bruteforce(xgr_matcher *m, int32_t *row, size_t row_words);
/* Undoes the last n accepted steps. */
int xgr_matcher_rollback(xgr_matcher *m, int32_t n);
/* Speculative decoding: fills one bitmask row per node of a draft tree (SGLang's layout:
 * next_token[i] = first child of node i, next_sibling[i] = its next sibling, -1 = none;
 * draft_tokens[i] = the token at node i; node 0 is the current state and its token is not
 * read). Row i (at bitmask + i * row_stride, row_words words) gets the mask after the path
 * root -> i, walked depth first with accept / rollback (the matcher ends where it started;
 * it needs max_rollback_tokens unlimited or at least the tree's depth). A node whose token
 * is rejected at its parent, and a node where the matcher is terminated, gets a zero row;
 * nodes below them, unreachable nodes and nodes not reached in time are left alone.
 * XGR_ERR_INVALID_ARG for edges outside [-1, n), a root with a sibling or a parent, or a
 * node with two incoming edges. time_threshold > 0: seconds before the walk stops with
 * *completed = 0 (checked before every non-root node); otherwise *completed = 1. */
int xgr_matcher_traverse_draft_tree(xgr_matcher *m, const int64_t *next_token,
                                    const int64_t *next_sibling, const int64_t *draft_tokens,
                                    int32_t n, int32_t *bitmask, size_t row_stride,
                                    size_t row_words, double time_threshold, int *completed);
/* The same walk for bindings, one call per tree: the three arrays' addresses as integers
 * (Python passes tensor data_ptr()s without boxing them as pointers) and their lengths,
 * the bitmask's rows; the lengths must agree (the same messages as upstream's checks).
 * Returns 1 (walked), 0 (time_threshold ran out) or minus a status (XGR_ERR_INVALID_ARG
 * for a bad shape or tree, with the message in xgr_last_error). */
int xgr_matcher_traverse_draft_tree_ret(xgr_matcher *m, uintptr_t next_token,
                                        uintptr_t next_sibling, uintptr_t draft_tokens,
                                        int64_t n_next_token, int64_t n_next_sibling,
                                        int64_t n_draft_tokens, int32_t *bitmask,
                                        int64_t bitmask_rows, size_t row_stride,
                                        size_t row_words, double time_threshold);
/* Longest prefix of `tokens` that would be accepted, without changing state. */
int xgr_matcher_validate_tokens(xgr_matcher *m, const int32_t *tokens, size_t n,
                                size_t *n_accepted);
/* The longest byte string every continuation must start with ("" when none). */
int xgr_matcher_jump_forward(xgr_matcher *m, char **out, size_t *out_len);
/* A stop token was accepted, or (terminate_without_stop) the grammar could end here. */
int xgr_matcher_is_terminated(const xgr_matcher *m);
/* The grammar could end here (a stop token would be accepted). */
int xgr_matcher_can_end(const xgr_matcher *m);
void xgr_matcher_reset(xgr_matcher *m);
/* Number of steps that can currently be rolled back. */
int32_t xgr_matcher_num_steps(const xgr_matcher *m);
/* Debugging: the tightest max_tokens deadline (absolute token count) of the open rule
 * occurrences; INT32_MAX when saturated by a huge budget, -1 when none has one. */
int32_t xgr_matcher_token_deadline(const xgr_matcher *m);
/* The sampling temperature the grammar asks for at this point (rule attribute
 * `temperature`, innermost open rule that has one; the largest over ambiguous paths):
 * *has = 0 when no open rule has one. *conflict = 1 when the paths disagree. */
int xgr_matcher_temperature(const xgr_matcher *m, int *has, float *out, int *conflict);
/* The spans of rules with a `capture` attribute that completed so far, in order, each
 * recorded as the rule completed (rolled back with the input): when `dedup`, only the
 * longest completion of each occurrence. *out (caller frees; *out_len bytes) holds, per
 * event, a uint32 label length, the label, a uint32 value length and the value (native
 * byte order). */
int xgr_matcher_captures(const xgr_matcher *m, int dedup, char **out, size_t *out_len);

/* Fills rows for n matchers in parallel on up to n_threads threads.
 * Row i goes to bitmask + indices[i] * row_words (indices NULL: row i). */
int xgr_fill_bitmask_batch(xgr_matcher *const *ms, size_t n, int32_t *bitmask,
                           size_t row_words, const int32_t *indices, int n_threads);

#ifdef __cplusplus
}
#endif
#endif
