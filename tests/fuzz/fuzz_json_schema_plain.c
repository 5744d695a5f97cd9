/* libFuzzer target: xgr_json_schema_plain (the core's JSON-schema front end for the plain
 * subset). Input: a JSON schema as text. As compile_json_schema does, the text is first made
 * canonical (xgr_json_canonical) and the canonical text converted; the raw input is converted
 * too (the call must refuse, never misread, text that is not canonical). A grammar it returns
 * must print to EBNF that parses back. Agreement with the Python converter is pinned by
 * tests/json_schema/test_plain_front.py. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../csrc/include/xgr2.h"

/* A table of string forms as the Python side passes one (texts shaped like the converter's). */
static const xgr_json_string_form FORMS[] = {
    {"format", "date", "\"\\\"\" ([0-9] | char_u_1){4} \"-\" [0-9]{2} \"\\\"\"", "char_u_1 ::= \"\\\\u003\" [0-9]\n"},
    {"format", "uuid", "\"\\\"\" ([0-9a-f] | char_u_1){8} \"\\\"\"", "char_u_1 ::= \"\\\\u003\" [0-9]\nchar_x ::= \"x\"\n"},
    {"format", "float", NULL, NULL},
    {"pattern", "^a", "\"\\\"\" \"a\" char* \"\\\"\"",
     "char ::= [^\\x00-\\x1f\"\\\\] | \"\\\\\" [\"/\\\\bfnrt] | \"\\\\u\" ([0-9A-CEFa-cef] [0-9A-Fa-f] [0-9A-Fa-f] "
     "[0-9A-Fa-f] | [Dd] [0-7] [0-9A-Fa-f] [0-9A-Fa-f]) | \"\\\\u\" [Dd] [89ABab] [0-9A-Fa-f] [0-9A-Fa-f] "
     "\"\\\\u\" [Dd] [C-Fc-f] [0-9A-Fa-f] [0-9A-Fa-f]\n"},
    {"pattern", "b$", "\"\\\"\" char* \"b\" \"\\\"\"", "char ::= \"x\"\n"}, /* a char rule not the front end's */
    /* type parts left to the converter (the seeds' keys): a rule of the form's own */
    {"schema", "{\"type\":\"number\",\"minimum\":0.5}", "sf1", "sf1 ::= \"0.\" [5-9] [0-9]* | [1-9] [0-9]*\n"},
    {"schema", "{\"type\":\"string\",\"pattern\":\"^a\",\"maxLength\":3}", "\"\\\"\" \"a\" [a-z]{0,2} \"\\\"\"", NULL},
    {"schema", "{\"type\":\"integer\",\"maximum\":2.5}", NULL, NULL}, /* no value: left to the caller */
};

/* The rules a caller's converter gives its parts (json_schema/core_strings.part_rows): shared
 * rules as the front end writes them, a helper, a rule of the parts' own. */
#define PART_RULES                                                                                   \
    "pp_1 ::= \"{\" ws \"}\" | value | char_u_1\nws ::= [ \\n\\r\\t]*\nchar_u_1 ::= \"\\\\u003\" [0-9]\n" \
    "value ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
#define MAX_PARTS 8

static void convert(const char *text, size_t n, int32_t max_ws) {
    xgr_grammar *g = NULL;
    int32_t missing = -1;
    char *wants = NULL;
    size_t wants_len = 0;
    size_t n_forms = n & 2 ? sizeof FORMS / sizeof *FORMS : 0;
    xgr_json_string_form forms[sizeof FORMS / sizeof *FORMS + MAX_PARTS];
    char keys[MAX_PARTS][48];
    memcpy(forms, FORMS, sizeof FORMS);
    for (int round = 0; round < 2; round++) {
        if (xgr_json_schema_plain(text, n, max_ws, forms, n_forms, &g, n & 4 ? &missing : NULL,
                                  n & 8 ? &wants : NULL, n & 8 ? &wants_len : NULL) != XGR_OK) {
            (void)xgr_last_error(); /* out of memory only (the table's texts parse) */
            return;
        }
        if (missing > 0 && g) abort(); /* values missing from the table: no grammar */
        /* the keys asked for: NUL-ended JSON objects of one type, or parts ("@OFF:LEN" spans of
         * an object in the text) */
        if (wants && (!wants_len || wants[wants_len - 1] != 0 || g)) abort();
        size_t parts = 0;
        for (size_t i = 0; i < wants_len; i += strlen(wants + i) + 1) {
            const char *k = wants + i;
            if (k[0] == '@') {
                long off = strtol(k + 1, NULL, 10), len = strtol(strchr(k, ':') + 1, NULL, 10);
                if (off < 0 || len < 2 || (size_t)(off + len) > n || text[off] != '{' || text[off + len - 1] != '}')
                    abort();
                if (parts < MAX_PARTS && strlen(k) < sizeof keys[0] && n_forms < sizeof forms / sizeof *forms) {
                    memcpy(keys[parts], k, strlen(k) + 1);
                    /* (the first part's value is its rule; each later one refers to it) */
                    forms[n_forms++] = (xgr_json_string_form){"part", keys[parts], "pp_1", parts ? NULL : PART_RULES};
                    parts++;
                }
            } else if (strncmp(k, "{\"type\":\"", 9) != 0) {
                abort();
            }
        }
        xgr_free(wants);
        wants = NULL, wants_len = 0;
        if (g || !parts) break; /* (again with the parts: the front end writes their rules in) */
    }
    if (!g) return;
    char *ebnf = NULL;
    size_t len = 0;
    if (xgr_grammar_to_ebnf(g, &ebnf, &len) == XGR_OK) {
        xgr_grammar *back = NULL;
        if (xgr_grammar_from_ebnf(ebnf, len, "root", 4, &back) != XGR_OK) abort();
        xgr_grammar_release(back);
        xgr_free(ebnf);
    }
    xgr_grammar_release(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    convert((const char *)data, size, size & 1 ? 16 : -1);
    char *out = malloc(size ? size : 1);
    if (!out) return 0;
    size_t n = 0;
    int32_t known = 0;
    if (xgr_json_canonical((const char *)data, size, 64, out, &n, &known) == XGR_OK && known)
        convert(out, n, -1);
    free(out);
    return 0;
}
