"""Shared APIs that behave as upstream xgrammar 0.2.8's (issue 33): the builtin JSON grammar's
root, empty vocabularies, ``\\r`` as JSON whitespace, the exception classes code written for
upstream catches, the regex ``.``, and ``terminate_without_stop_token``.

Every case states the expected result, checked against xgrammar2; when upstream xgrammar is
installed the same case runs on it too, so a test fails if upstream's behaviour is not what
it states (the expectations were taken from upstream 0.2.8).
"""

import json

import numpy as np
import pytest

import xgrammar2 as xgr2

from pyapi_helpers import requires_core

pytestmark = requires_core

try:
    import xgrammar as xgr_up
except ImportError:  # upstream is optional: the expectations still hold for xgrammar2
    xgr_up = None

ENGINES = [pytest.param(xgr2, id="xgrammar2")]
if xgr_up is not None:
    ENGINES.append(pytest.param(xgr_up, id="upstream"))


def _is_ours(mod) -> bool:
    return mod is xgr2


def _accepts(mod, compiled, text: str) -> bool:
    m = mod.GrammarMatcher(compiled)
    return bool(m.accept_string(text)) and bool(m.is_completed())


def _compiler(mod, vocab=("a",)):
    return mod.GrammarCompiler(mod.TokenizerInfo(list(vocab)), cache_enabled=False)


# ---- 1. the builtin JSON grammar: an object or an array at the top ---------------------------

BUILTIN_JSON_CASES = [
    ("{}", True),
    ("[]", True),
    ("{ }", True),
    ("[ ]", True),
    ('{"a":1}', True),
    ("[1,2]", True),
    ('{"a" : [ 1 , 2 ] }', True),
    ('{"a":"\\u00e9"}', True),
    ('{"a":-0.5e+3}', True),
    ('{\n  "a": 1\n}', True),
    ("[\r]", True),
    ('[null, true, "x", {"b": []}]', True),
    # not an object or an array at the top
    ('"abc"', False),
    ("1", False),
    ("true", False),
    ("null", False),
    # no whitespace before or after the top-level value
    (" {}", False),
    ("{} ", False),
    ("\n{}", False),
    ("{}\n", False),
    ("\t[]", False),
    ("[1]\n\n", False),
    ('{"a":01}', False),
]


@pytest.mark.parametrize("mod", ENGINES)
def test_builtin_json_root_is_object_or_array(mod):
    compiled = _compiler(mod).compile_builtin_json_grammar()
    got = [(text, _accepts(mod, compiled, text)) for text, _ in BUILTIN_JSON_CASES]
    assert got == BUILTIN_JSON_CASES
    # Grammar.builtin_json_grammar() is the same grammar
    compiled = _compiler(mod).compile_grammar(mod.Grammar.builtin_json_grammar())
    assert [_accepts(mod, compiled, t) for t in ("[]", "{}", "1", '"s"')] == [
        True, True, False, False]


# ---- 2. an empty vocabulary ------------------------------------------------------------------


@pytest.mark.parametrize("mod", ENGINES)
def test_empty_vocabulary_matches_strings(mod):
    info = mod.TokenizerInfo([])
    assert info.vocab_size == 0 and list(info.stop_token_ids) == []
    compiler = mod.GrammarCompiler(info, cache_enabled=False)
    m = mod.GrammarMatcher(compiler.compile_grammar('root ::= "ab" [c-d]*'))
    assert m.accept_string("ab") and m.is_completed() and not m.is_terminated()
    assert not m.accept_string("x")
    assert m.accept_string("cd") and m.is_completed()
    m = mod.GrammarMatcher(compiler.compile_json_schema('{"type": "integer"}'))
    assert m.accept_string("12") and m.is_completed()
    m = mod.GrammarMatcher(compiler.compile_regex("a+b"))
    assert m.find_jump_forward_string() == "a"
    assert tuple(mod.allocate_token_bitmask(1, info.vocab_size).shape) == (1, 0)
    padded = mod.TokenizerInfo([], vocab_size=4)
    assert padded.vocab_size == 4


def test_empty_vocabulary_masks_are_empty():
    # (upstream 0.2.8 fails an internal check when filling a mask for an empty vocabulary)
    for info in (xgr2.TokenizerInfo([]), xgr2.TokenizerInfo([], vocab_size=40, stop_token_ids=[3])):
        compiler = xgr2.GrammarCompiler(info, cache_enabled=False)
        words = (info.vocab_size + 31) // 32
        for compiled in (compiler.compile_builtin_json_grammar(),
                         compiler.compile_grammar('root ::= [a-z]* "."'),
                         compiler.compile_json_schema({"type": "object"})):
            m = xgr2.GrammarMatcher(compiled)
            bm = xgr2.allocate_token_bitmask(2, info.vocab_size)
            assert tuple(bm.shape) == (2, words)
            bm.fill_(-1)
            assert m.fill_next_token_bitmask(bm) == (words > 0)
            assert bm[0].tolist() == [0] * words
            xgr2.BatchGrammarMatcher().batch_fill_next_token_bitmask([m, m.fork()], bm)
            assert bm.tolist() == [[0] * words] * 2
            oracle = np.full((1, words), -1, dtype=np.int32)
            m._fill_next_token_bitmask_bruteforce(oracle)
            assert oracle.tolist() == [[0] * words]
        m = xgr2.GrammarMatcher(compiler.compile_grammar('root ::= "x"'))
        assert m.accept_string("x")
        if info.vocab_size:
            bm = xgr2.allocate_token_bitmask(1, info.vocab_size)
            m.fill_next_token_bitmask(bm)
            assert bm.tolist() == [[8, 0]]  # the stop token, where the grammar may end
            assert not m.accept_token(0) and m.accept_token(3) and m.is_terminated()
        else:
            with pytest.raises(ValueError):
                m.accept_token(0)


# ---- 3. \r is JSON whitespace ------------------------------------------------------------------

WS_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "string"}}},
    "required": ["a", "b"],
}
WS_TEXTS = [
    '{"a":1,"b":[]}',
    '{\r"a":1,"b":[]}',
    '{\r\n"a"\r:\r1\r,\r"b"\r:\r[\r"x"\r]\r}',
    '{\t"a": 1, "b": []}',
    '{"a":1,"b":[   ]}',
    '{\r\r"a":1,"b":[]}',
    '{\r\r\r"a":1,"b":[]}',
    '{"a": 1, "b": []}',
]


@pytest.mark.parametrize("mod", ENGINES)
@pytest.mark.parametrize(
    "options, expected",
    [
        ({"any_whitespace": True}, [True] * 8),
        ({}, [True] * 8),
        ({"any_whitespace": True, "max_whitespace_cnt": 2},
         [True, True, True, True, False, True, False, True]),
        ({"any_whitespace": False}, [False] * 7 + [True]),
    ],
)
def test_json_schema_whitespace_includes_carriage_return(mod, options, expected):
    compiled = _compiler(mod).compile_json_schema(json.dumps(WS_SCHEMA), **options)
    assert [_accepts(mod, compiled, t) for t in WS_TEXTS] == expected


@pytest.mark.parametrize("mod", ENGINES)
@pytest.mark.parametrize("schema", ["{}", "true"])
def test_any_value_schema_whitespace_includes_carriage_return(mod, schema):
    compiled = _compiler(mod).compile_json_schema(schema, any_whitespace=True)
    texts = ["{\r}", "[\r1\r]", "1", '"a"', " 1", '{ \r\n\t"a" : 1 }']
    assert [_accepts(mod, compiled, t) for t in texts] == [True, True, True, True, False, True]


# ---- 4. errors code written for upstream catches as RuntimeError --------------------------------


def _bad_inputs(mod):
    c = _compiler(mod, ["a", "b"])
    return {
        "ebnf syntax": lambda: mod.Grammar.from_ebnf('root ::= "a'),
        "ebnf undefined rule": lambda: mod.Grammar.from_ebnf("root ::= x"),
        "ebnf no root": lambda: mod.Grammar.from_ebnf('a ::= "x"'),
        "ebnf root name": lambda: mod.Grammar.from_ebnf('root ::= "a"', root_rule_name="main"),
        "compile_grammar": lambda: c.compile_grammar("root ::= ("),
        "regex syntax": lambda: mod.Grammar.from_regex("a(b"),
        "regex range": lambda: c.compile_regex("[z-a]"),
        "regex bounds": lambda: c.compile_regex("a{3,1}"),
        "schema text": lambda: mod.Grammar.from_json_schema('{"type": '),
        "schema text (compiler)": lambda: c.compile_json_schema("{bad"),
        "schema unsatisfiable": lambda: c.compile_json_schema(
            '{"type":"integer","minimum":5,"maximum":1}'),
        "schema unknown type": lambda: c.compile_json_schema('{"type":"foo"}'),
        "schema bad $ref": lambda: c.compile_json_schema('{"$ref":"#/defs/nope"}'),
        "schema unsupported pattern": lambda: c.compile_json_schema(
            '{"type":"string","pattern":"(?<=a)b"}'),
        "structural tag text": lambda: c.compile_structural_tag("{bad"),
        "structural tag format": lambda: c.compile_structural_tag(
            '{"type":"structural_tag","format":{"type":"nope"}}'),
    }


@pytest.mark.parametrize("mod", ENGINES)
@pytest.mark.parametrize("case", list(_bad_inputs(xgr2)))
def test_bad_grammar_regex_schema_raise_runtime_error(mod, case):
    with pytest.raises(RuntimeError) as info:
        _bad_inputs(mod)[case]()
    if _is_ours(mod):
        # ... and they keep their own classes (ValueError users keep working)
        assert isinstance(info.value, ValueError)
        assert isinstance(info.value, (xgr2.XGrammar2Error, xgr2.json_schema.SchemaError))


def test_error_classes_are_value_and_runtime_errors():
    from xgrammar2.json_schema import (InvalidSchemaError, SchemaError, UnsatisfiableSchemaError,
                                       UnsupportedSchemaError)

    for cls in (xgr2.GrammarSyntaxError, xgr2.GrammarSemanticError, xgr2.GrammarLimitError,
                xgr2.InvalidJSONError, xgr2.InvalidJSONSchemaError, xgr2.InvalidStructuralTagError,
                SchemaError, UnsupportedSchemaError, InvalidSchemaError, UnsatisfiableSchemaError):
        assert issubclass(cls, ValueError) and issubclass(cls, RuntimeError), cls
    with pytest.raises(xgr2.GrammarSyntaxError, match="line 1, column 10"):
        xgr2.Grammar.from_ebnf('root ::= "a')
    with pytest.raises(UnsupportedSchemaError, match="pattern"):
        xgr2.Grammar.from_json_schema('{"type":"string","pattern":"(?<=a)b"}')


# ---- 5. the regex `.` is any character, \n included --------------------------------------------

DOT_TEXTS = ["axb", "a\nb", "a\rb", "a\u2028b", "a\u2029b", "a\x00b", "a\U0001F600b", "a\x85b", "ab"]


@pytest.mark.parametrize("mod", ENGINES)
@pytest.mark.parametrize("how", ["compile_regex", "from_regex", "ebnf Regex", "ebnf inline"])
def test_regex_dot_matches_newline(mod, how):
    c = _compiler(mod)
    compiled = {
        "compile_regex": lambda: c.compile_regex("a.b"),
        "from_regex": lambda: c.compile_grammar(mod.Grammar.from_regex("a.b")),
        "ebnf Regex": lambda: c.compile_grammar('root ::= Regex("a.b")'),
        "ebnf inline": lambda: c.compile_grammar('root ::= "<" Regex("a.b") ">"'),
    }[how]()
    texts = [f"<{t}>" for t in DOT_TEXTS] if how == "ebnf inline" else DOT_TEXTS
    assert [_accepts(mod, compiled, t) for t in texts] == [True] * 8 + [False]


@pytest.mark.parametrize("mod", ENGINES)
def test_regex_dot_star_spans_lines(mod):
    compiled = _compiler(mod).compile_regex("BEGIN.*END")
    assert _accepts(mod, compiled, "BEGIN line 1\r\nline 2\nEND")
    assert not _accepts(mod, compiled, "BEGIN line 1\nEN")


def test_json_schema_pattern_dot_keeps_ecmascript_semantics():
    # JSON Schema "pattern" is ECMA-262: `.` excludes \n \r U+2028 U+2029 (json_schema/regex.py)
    compiled = _compiler(xgr2).compile_json_schema('{"type": "string", "pattern": "^a.b$"}')
    assert _accepts(xgr2, compiled, '"axb"') and _accepts(xgr2, compiled, '"a\\tb"')
    for esc in ("\\n", "\\r", "\\u2028", "\\u2029"):
        assert not _accepts(xgr2, compiled, f'"a{esc}b"'), esc


# ---- 6. terminate_without_stop_token -----------------------------------------------------------

TWS_VOCAB = ["a", "b", "c", " ", "Let", " me", " check", ".", "<eos>", "ab", ".a", "!"]
EOS = 8


def _mask(mod, m, size):
    bm = mod.allocate_token_bitmask(1, size)
    m.fill_next_token_bitmask(bm)
    row = int(bm[0][0]) & 0xFFFFFFFF
    return [t for t in range(size) if (row >> t) & 1]


def _trace(mod, grammar, tokens):
    """(accepted, is_terminated, is_completed, mask) at the start and after each token."""
    info = mod.TokenizerInfo(TWS_VOCAB, stop_token_ids=[EOS])
    m = mod.GrammarMatcher(_compiler_for(mod, info).compile_grammar(grammar),
                           terminate_without_stop_token=True)
    out = [(None, m.is_terminated(), m.is_completed(), _mask(mod, m, len(TWS_VOCAB)))]
    for t in tokens:
        ok = m.accept_token(TWS_VOCAB.index(t))
        out.append((ok, m.is_terminated(), m.is_completed(), _mask(mod, m, len(TWS_VOCAB))))
    return out


def _compiler_for(mod, info):
    return mod.GrammarCompiler(info, cache_enabled=False)


@pytest.mark.parametrize("mod", ENGINES)
def test_terminate_without_stop_token_keeps_accepting(mod):
    letters = [0, 1, 2, EOS, 9]  # a b c <eos> ab
    # A nullable grammar is terminated from the start but goes on accepting letters; the mask
    # is the default mode's (with the stop token, which accept_token refuses in this mode).
    assert _trace(mod, "root ::= [a-z]*", ["a", "b", "<eos>", "Let", ".", "a"]) == [
        (None, True, True, letters),
        (True, True, True, letters),
        (True, True, True, letters),
        (False, True, True, letters),
        (False, True, True, letters),
        (False, True, True, letters),
        (True, True, True, letters),
    ]
    assert _trace(mod, 'root ::= "a" | "ab"', ["a", "b", "a"]) == [
        (None, False, False, [0, 9]),
        (True, True, True, [1, EOS]),
        (True, True, True, [EOS]),
        (False, True, True, [EOS]),
    ]
    assert _trace(mod, 'root ::= [a-z]* "."', ["a", ".", "a"]) == [
        (None, False, False, [0, 1, 2, 7, 9]),
        (True, False, False, [0, 1, 2, 7, 9]),
        (True, True, True, [EOS]),
        (False, True, True, [EOS]),
    ]


@pytest.mark.parametrize("mod", ENGINES)
def test_terminate_without_stop_token_strings(mod):
    compiled = _compiler(mod).compile_grammar("root ::= [a-z]*")
    m = mod.GrammarMatcher(compiled, terminate_without_stop_token=True)
    assert m.is_terminated()
    assert m.accept_string("abab") and m.is_terminated()
    assert m.accept_string("x") and not m.accept_string("Let me check.")
    m.rollback(2)
    assert m.is_terminated() and m.accept_string("zz")
    compiled = _compiler(mod).compile_grammar('root ::= "a" [b]*')
    m = mod.GrammarMatcher(compiled, terminate_without_stop_token=True)
    assert m.find_jump_forward_string() == "a"
    assert not m.is_terminated() and m.accept_string("a") and m.is_terminated()
    assert m.accept_string("bb") and m.is_terminated() and not m.accept_string("a")
    # the default mode is unchanged: a stop token ends it, then nothing is accepted
    info = mod.TokenizerInfo(TWS_VOCAB, stop_token_ids=[EOS])
    m = mod.GrammarMatcher(_compiler_for(mod, info).compile_grammar("root ::= [a-z]*"))
    assert not m.is_terminated() and m.accept_token(0) and m.accept_token(EOS)
    assert m.is_terminated() and not m.accept_token(0)
    # asking for a mask after the stop token is an error in both
    with pytest.raises(RuntimeError):
        _mask(mod, m, len(TWS_VOCAB))


def test_terminate_without_stop_token_same_as_upstream_on_walks():
    if xgr_up is None:
        pytest.skip("upstream xgrammar is not installed")
    grammars = ["root ::= [a-z]*", 'root ::= "ab"', 'root ::= "a" | "ab"', 'root ::= [a-z]* "."',
                'root ::= "a" [b]*', 'root ::= ([a-c] | " " | "!")* ("." | "")']
    walks = [["a", "b"], ["Let", " me", " check", "."], ["."], ["a", "."], ["a", "<eos>"],
             ["a", "a", "a"], ["a", "b", "a"], [".a", "!"], ["ab", " ", "c", "<eos>", "!"]]
    for g in grammars:
        for w in walks:
            assert _trace(xgr2, g, w) == _trace(xgr_up, g, w), (g, w)


# ---- 7. structural tags: XML additionalProperties, Qwen3 reasoning -------------------------------

_DSML = "\uff5cDSML\uff5c"
_XML_ELEMENT = {
    "qwen_xml": lambda n, v, s: f"<parameter={n}>{v}</parameter>",
    "minimax_xml": lambda n, v, s: f'<parameter name="{n}">{v}</parameter>',
    "glm_xml": lambda n, v, s: f"<arg_key>{n}</arg_key><arg_value>{v}</arg_value>",
    "deepseek_xml": lambda n, v, s: f'<{_DSML}parameter name="{n}" string="{s}">{v}</{_DSML}parameter>',
    "deepseek_v4_1_xml":
        lambda n, v, s: f'<{_DSML} parameter name="{n}" string="{s}">{v}</{_DSML} parameter>',
}
_XML_SCHEMAS = {
    "declared and int extras": {"type": "object", "properties": {"a": {"type": "string"}},
                                "required": ["a"], "additionalProperties": {"type": "integer"}},
    "declared and string extras": {"type": "object", "properties": {"a": {"type": "string"}},
                                   "required": ["a"], "additionalProperties": {"type": "string"}},
    "int extras only": {"type": "object", "additionalProperties": {"type": "integer"}},
    "string extras only": {"type": "object", "additionalProperties": {"type": "string"}},
    "enum extras only": {"type": "object", "additionalProperties": {"enum": ["x", "y"]}},
    "any extras": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
                   "additionalProperties": True},
}
# texts: a="x" | a, b=5 | a, b="hi" | b=5 | b="hi" | b="x" | b=5 and c=6 | nothing
_XML_EXPECTED = {
    "declared and int extras": "11000000",
    "declared and string extras": ("10100000", "11100000"),  # (typed styles, untyped styles)
    "int extras only": "00010011",
    "string extras only": ("10101101", "11111111"),
    "enum extras only": "10000101",
    "any extras": "11100000",
}


@pytest.mark.parametrize("mod", ENGINES)
@pytest.mark.parametrize("style", list(_XML_ELEMENT))
def test_xml_styles_follow_additional_properties_schemas(mod, style):
    el = _XML_ELEMENT[style]
    texts = [el("a", "x", "true"), el("a", "x", "true") + el("b", "5", "false"),
             el("a", "x", "true") + el("b", "hi", "true"), el("b", "5", "false"),
             el("b", "hi", "true"), el("b", "x", "true"),
             el("b", "5", "false") + "\n" + el("c", "6", "false"), ""]
    compiler = mod.GrammarCompiler(mod.TokenizerInfo([]), cache_enabled=False)
    typed = style.startswith("deepseek")
    for name, schema in _XML_SCHEMAS.items():
        tag = {"type": "structural_tag",
               "format": {"type": "json_schema", "json_schema": schema, "style": style}}
        compiled = compiler.compile_structural_tag(json.dumps(tag))
        got = "".join("1" if _accepts(mod, compiled, t) else "0" for t in texts)
        want = _XML_EXPECTED[name]
        if isinstance(want, tuple):
            want = want[0] if typed else want[1]
        assert got == want, (style, name)


@pytest.mark.parametrize("mod", ENGINES)
def test_qwen_3_reasoning_starts_inside_the_think_block(mod):
    pytest.importorskip("pydantic")
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    texts = ["<think>hmm</think>\n\nHello", "hmm</think>\n\nHello", "hmm</think>\n\n" + call,
             "<think>hmm</think>\n\n" + call, "Hello", ""]
    compiler = mod.GrammarCompiler(mod.TokenizerInfo([]), cache_enabled=False)

    def verdicts(**kw):
        compiled = compiler.compile_structural_tag(mod.get_model_structural_tag(
            "qwen_3", tools=tools, **kw))
        return [_accepts(mod, compiled, t) for t in texts]

    # the prompt already ends with <think> (upstream's assumption; Qwen3 thinking templates)
    assert verdicts(reasoning=True) == [False, True, True, False, False, False]
    assert verdicts(reasoning=True, tool_choice="required") == [False] * 2 + [True] + [False] * 3
    assert verdicts(reasoning="auto") == [True, False, False, True, True, True]
    assert verdicts(reasoning=False) == [False, False, False, False, True, True]
    if _is_ours(mod):  # (xgrammar2) the original Qwen3 template has the model write <think>
        assert verdicts(reasoning=True, prompt_ends_with_think=False) == [
            True, False, False, True, False, False]
