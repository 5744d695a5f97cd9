/* libFuzzer target: token / byte streams into matchers. The first input byte picks one
 * of a fixed set of grammars (compiled once, shared across inputs so the just-in-time
 * mask cache and the cross-grammar cache are exercised); the rest is an op stream
 * (accept in-range / out-of-range / negative / special / stop ids, raw bytes, fill and
 * compare with the brute-force mask, rollback past the start, fork, validate, jump
 * forward, reset, batch fill; see fuzz_common.h). */
#include "fuzz_common.h"

static const char *const grammars[] = {
    NULL, /* builtin JSON */
    "root ::= \"{\" ws \"\\\"name\\\"\" ws \":\" ws str ws (\",\" ws \"\\\"n\\\"\" ws \":\" ws num)? ws \"}\"\n"
    "str ::= \"\\\"\" ([^\"\\\\] | \"\\\\\" [\"\\\\/bfnrtu])* \"\\\"\"\n"
    "num ::= \"-\"? [0-9]+ (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)?\n"
    "ws ::= [ \\n\\t]{0,3}\n",
    "root ::= TagDispatch((\"<tool_call>\", call), (\"<function=\", fn), "
    "loop_after_dispatch=true, excludes=(\"<|\"))\n"
    "call ::= \"{\" [a-z]* \"}</tool_call>\"\n"
    "fn ::= [a-z_]+ \">\" [^<]{0,40} \"</function>\"\n",
    "root ::= a | b\n a ::= \"(\" root \")\" | \"x\" a?\n b ::= [0-9]{2,40} (= \"\")\n",
    "root ::= (\"ab\" | \"a\" | [\\u00e9\\u4e2d] )* \"\\n\" [^\\x00-\\x1f]{0,100}\n",
    "root ::= item{0,300}\n item ::= \"a\" | \"b\" \"c\"?\n",
    "root ::= e\n e ::= t (\"+\" t)*\n t ::= f (\"*\" f)*\n f ::= [0-9]+ | \"(\" e \")\"\n",
};
#define NG ((int)(sizeof grammars / sizeof *grammars))
static const char *const regexes[] = {
    "[a-z]{1,5}@[a-z]+\\.(com|org)",
    "(\\d{3}-)?\\d{4}|x+y*",
    "\"([^\"\\\\]|\\\\.)*\"",
    "(a|b)*abb(a|b){0,4}",
};
#define NR ((int)(sizeof regexes / sizeof *regexes))

static xgr_compiled *compiled[NG + NR];

static void init(void) {
    for (int i = 0; i < NG + NR; i++) {
        xgr_grammar *g = NULL;
        int rc;
        if (i == 0) rc = xgr_grammar_builtin_json(&g);
        else if (i < NG) rc = xgr_grammar_from_ebnf(grammars[i], strlen(grammars[i]), NULL, 0, &g);
        else rc = xgr_grammar_from_regex(regexes[i - NG], strlen(regexes[i - NG]), &g);
        if (rc) { fprintf(stderr, "grammar %d: %s\n", i, xgr_last_error()); abort(); }
        xgr_compile_options o;
        memset(&o, 0, sizeof o);
        o.repeat_threshold = (i % 2) ? 4 : 0; /* exercise compressed repetition too */
        if (xgr_compile(g, fz_vocab(), &o, &compiled[i])) {
            fprintf(stderr, "compile %d: %s\n", i, xgr_last_error());
            abort();
        }
        xgr_grammar_release(g);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!compiled[0]) init();
    if (size < 2) return 0;
    int which = data[0] % (NG + NR);
    int flags = data[1];
    int32_t stops[2] = {FZ_STOP, 3};
    xgr_matcher *m = NULL;
    if (xgr_matcher_new(compiled[which], stops, (size_t)(flags & 3) % 3, (flags >> 2) & 1,
                        (flags >> 3) & 1, (flags & 0x30) ? ((flags >> 4) & 3) : -1, &m))
        return 0;
    fz_check_masks(m);
    fz_drive(m, data + 2, size - 2);
    xgr_matcher_free(m);
    return 0;
}
