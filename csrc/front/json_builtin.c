/* The builtin JSON grammar (RFC 8259 values), written in EBNF and parsed by the EBNF
 * front end. As upstream xgrammar's builtin JSON grammar (what a `json_object` request
 * asks for), the top-level value is an object or an array; any value may appear inside.
 * Whitespace [ \n\t\r]* is allowed between tokens but not before or after the
 * top-level value, so generation cannot pad the output endlessly at either end.
 * Nothing is bounded here (depth, lengths): that is the JSON-schema front end's job.
 * The string body is a repeat of one character class or one escape so that the runtime
 * can cache masks for it well. */
#include "front.h"

static const char JSON_EBNF[] =
    "root ::= object | array\n"
    "value ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
    "object ::= \"{\" ws (member (ws \",\" ws member)* ws)? \"}\"\n"
    "member ::= string ws \":\" ws value\n"
    "array ::= \"[\" ws (value (ws \",\" ws value)* ws)? \"]\"\n"
    "string ::= \"\\\"\" ([^\"\\\\\\x00-\\x1f] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}))* \"\\\"\"\n"
    "number ::= \"-\"? (\"0\" | [1-9] [0-9]*) (\".\" [0-9]+)? ([eE] [+\\-]? [0-9]+)?\n"
    "ws ::= [ \\n\\t\\r]*\n";

int xgr_grammar_builtin_json(xgr_grammar **out) {
    if (!out) return xgr_fail(XGR_ERR_INVALID_ARG, "xgr_grammar_builtin_json: out is NULL");
    return xgr_grammar_from_ebnf(JSON_EBNF, sizeof JSON_EBNF - 1, "root", 4, out);
}
