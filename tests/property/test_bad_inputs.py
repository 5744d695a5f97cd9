"""Property tests (hypothesis): random EBNF, regexes, JSON schemas, structural tags and token
id sequences always end in a result or a clean Python exception (a ValueError / TypeError /
NotImplementedError naming the problem), never a crash, a hang or an unrelated exception
(KeyError, RecursionError, ...). Whatever compiles is then driven through a matcher, with
the cached mask compared against the brute-force oracle now and then.

Hangs: every test has a pytest-timeout; compile-time and per-token limits are set low in
reliability_helpers.compiler()."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import xgrammar2 as xgr
from reliability_helpers import (allowed_error, assert_masks_agree, check_outcome, compiler, short_walk,
                                 tokenizer)

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies
BASE = hypothesis.settings(
    deadline=None, derandomize=True, suppress_health_check=list(hypothesis.HealthCheck),
    database=None,
)


#: XGR2_PROPERTY_SCALE=K runs K times as many examples with random seeds (a longer campaign).
SCALE = int(os.environ.get("XGR2_PROPERTY_SCALE", "1"))


def cfg(n: int):
    return hypothesis.settings(BASE, max_examples=n * SCALE, derandomize=SCALE == 1)

# ---- EBNF ------------------------------------------------------------------------------

EBNF_PIECES = [
    "root", "a", "b", " ::= ", "::=", "\n", " ", '"x"', '"ab"', '""', '"\\n"', '"\\u00e9"',
    '"\\xff"', "[a-z]", "[^\"\\\\]", "[\\u0000-\\U0010ffff]", "[]", "[^]", "|", "*", "+", "?",
    "{2,3}", "{0,}", "{1000000}", "{3,1}", "(", ")", "(= ", "(=", "TagDispatch(",
    '("<t>", a)', "loop_after_dispatch=false", "excludes=()", ",", 'Regex("a+")',
    'Regex("[")', "#c\n", "\\", "\"", "b\"\\x80\"", "b[\\x80-\\xbf]", "a ::= a a | \"a\"\n",
    "\xe9", "\x00", "Token(3)", "Token(-1)",
]
# Structured grammars (mostly valid, so compilation and matching get exercised too).
ebnf_atom = st.sampled_from(['"x"', '"ab"', "[a-z]", '[^"]', '""', "a", "b", '"\\u00e9"', '"\\n"',
                             'Regex("a+[0-9]?")', "[\\u4e00-\\u9fff]", '"{"', '"}"'])
ebnf_expr = st.recursive(ebnf_atom, lambda ch: st.one_of(
    st.lists(ch, min_size=1, max_size=3).map(" ".join),
    st.lists(ch, min_size=2, max_size=3).map(" | ".join),
    st.tuples(ch, st.sampled_from(["*", "+", "?", "{2,3}", "{0,40}", "{1,}", "{3}"])).map(
        lambda t: f"({t[0]}){t[1]}"),
), max_leaves=8)
ebnf_grammar = st.one_of(
    st.tuples(ebnf_expr, ebnf_expr, ebnf_expr).map(lambda t: f"root ::= {t[0]}\na ::= {t[1]}\nb ::= {t[2]}\n"),
    st.tuples(ebnf_expr, ebnf_expr, st.booleans()).map(
        lambda t: 'root ::= TagDispatch(("<t>", a), ("<u>", b), loop_after_dispatch='
                  f'{str(t[2]).lower()}, excludes=("</x>"))\na ::= {t[0]} "</t>"\nb ::= {t[1]}\n'),
)
ebnf_text = st.one_of(
    ebnf_grammar,
    ebnf_grammar.map(lambda g: g[: len(g) // 2]),  # cut in the middle
    st.lists(st.sampled_from(EBNF_PIECES), max_size=24).map("".join),
    st.lists(st.sampled_from(EBNF_PIECES), max_size=16).map(lambda xs: "root ::= " + "".join(xs)),
    st.text(max_size=60),
)


@pytest.mark.timeout(300)
@cfg(400)
@hypothesis.given(src=ebnf_text, choices=st.lists(st.integers(0, 10**6), max_size=6))
def test_random_ebnf(src, choices):
    compiled = check_outcome(compiler().compile_grammar, src)
    hypothesis.event("compiled" if compiled is not None else "clean error")
    if compiled is not None:
        check_outcome(short_walk, compiled, choices, oracle_every=3)


# ---- regex -----------------------------------------------------------------------------

REGEX_PIECES = [
    "a", "b", "é", "中", "[a-z]", "[^x]", "[]", "[^]", "[z-a]", "\\d", "\\w", "\\s", "\\D", ".",
    "(", ")", "(?:", "(?=", "(?!", "(?<n>", "\\1", "|", "*", "+", "?", "*?", "{2,5}", "{3}",
    "{1000000}", "{5,2}", "{", "}", "^", "$", "\\", "\\u00e9", "\\x4", "\\p{L}", "[\\d-z]",
    "\\b", "\x00", "\\Z",
]
regex_text = st.one_of(st.lists(st.sampled_from(REGEX_PIECES), max_size=20).map("".join),
                       st.text(max_size=40))


@pytest.mark.timeout(300)
@cfg(400)
@hypothesis.given(src=regex_text, choices=st.lists(st.integers(0, 10**6), max_size=6))
def test_random_regex(src, choices):
    compiled = check_outcome(compiler().compile_regex, src)
    hypothesis.event("compiled" if compiled is not None else "clean error")
    if compiled is not None:
        check_outcome(short_walk, compiled, choices, oracle_every=3)


# ---- JSON schemas -------------------------------------------------------------------------

KEYWORDS = [
    "type", "properties", "required", "items", "prefixItems", "additionalProperties", "enum",
    "const", "anyOf", "oneOf", "allOf", "not", "$ref", "$defs", "definitions", "minimum",
    "maximum", "exclusiveMinimum", "multipleOf", "minLength", "maxLength", "pattern", "format",
    "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties", "patternProperties",
    "propertyNames", "if", "then", "else", "dependentRequired", "contains", "unevaluatedProperties",
    "x-unknown", "$schema", "$id", "default", "title", "nullable",
]
TYPES = ["object", "array", "string", "integer", "number", "boolean", "null", "dict", "float", 7]
scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=False, width=32),
    st.sampled_from(TYPES), st.sampled_from(["#", "#/$defs/a", "#/definitions/x", "#/nope", "date-time",
                                             "email", "^[a-z]+$", "(", "uri", "a", "b"]),
    st.text(max_size=6),
)


def _extend(children):
    return st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.sampled_from(KEYWORDS + ["a", "b"]), children, max_size=4),
    )


schemas = st.one_of(
    st.booleans(),
    st.dictionaries(st.sampled_from(KEYWORDS), st.recursive(scalar, _extend, max_leaves=10), max_size=5),
    st.fixed_dictionaries(
        {"type": st.just("object"),
         "properties": st.dictionaries(st.text(max_size=4), st.recursive(scalar, _extend, max_leaves=6),
                                       max_size=3)},
        optional={"required": st.lists(st.text(max_size=4), max_size=3),
                  "additionalProperties": st.booleans()},
    ),
)


@pytest.mark.timeout(300)
@cfg(300)
@hypothesis.given(schema=schemas, strict=st.booleans(), as_text=st.booleans(),
                  choices=st.lists(st.integers(0, 10**6), max_size=5))
def test_random_json_schemas(schema, strict, as_text, choices):
    arg = json.dumps(schema) if as_text else schema
    compiled = check_outcome(compiler().compile_json_schema, arg, strict_mode=strict)
    hypothesis.event("compiled" if compiled is not None else "clean error")
    if compiled is not None:
        check_outcome(short_walk, compiled, choices, oracle_every=2)


def test_schema_text_that_is_not_json():
    for bad in ["{", "[1,", "nul", '{"type": "object",}', "\udc80", b"\xff\xfe"]:
        with pytest.raises(ValueError):
            compiler().compile_json_schema(bad)


# ---- structural tags ---------------------------------------------------------------------

FORMAT_TYPES = ["const_string", "json_schema", "any_text", "grammar", "regex", "sequence", "or",
                "tag", "triggered_tags", "tags_with_separator", "optional", "plus", "star", "repeat",
                "dispatch", "token", "exclude_token", "any_tokens", "qwen_xml_parameter", "nope", 3]
leaf_formats = st.one_of(
    st.fixed_dictionaries({"type": st.just("const_string"), "value": st.text(max_size=5)}),
    st.fixed_dictionaries({"type": st.just("any_text")},
                          optional={"excludes": st.lists(st.text(max_size=3), max_size=2)}),
    st.fixed_dictionaries({"type": st.just("regex"), "pattern": regex_text}),
    st.fixed_dictionaries({"type": st.just("grammar"), "grammar": ebnf_text}),
    st.fixed_dictionaries({"type": st.just("json_schema"), "json_schema": schemas}),
    st.fixed_dictionaries({"type": st.just("token"), "token": st.one_of(st.integers(-3, 60000),
                                                                       st.text(max_size=6))}),
    st.dictionaries(st.sampled_from(["type", "value", "content", "begin", "end", "elements", "min"]),
                    st.one_of(scalar, st.sampled_from(FORMAT_TYPES)), max_size=4),
)


def _formats(children):
    return st.one_of(
        st.fixed_dictionaries({"type": st.sampled_from(["sequence", "or"]),
                               "elements": st.lists(children, max_size=3)}),
        st.fixed_dictionaries({"type": st.just("tag"), "begin": st.text(max_size=5), "content": children,
                               "end": st.one_of(st.text(max_size=5), st.lists(st.text(max_size=3), max_size=2))}),
        st.fixed_dictionaries({"type": st.sampled_from(["optional", "plus", "star"]), "content": children}),
        st.fixed_dictionaries({"type": st.just("repeat"), "min": st.integers(-1, 4), "max": st.integers(-2, 6),
                               "content": children}),
        st.fixed_dictionaries(
            {"type": st.sampled_from(["triggered_tags", "tags_with_separator"]),
             "triggers": st.lists(st.text(min_size=0, max_size=3), max_size=2),
             "separator": st.text(max_size=2),
             "tags": st.lists(st.fixed_dictionaries({"begin": st.text(max_size=4), "content": children,
                                                     "end": st.text(max_size=4)}), max_size=2)},
            optional={"at_least_one": st.booleans(), "stop_after_first": st.one_of(st.booleans(), st.just(1))}),
        st.fixed_dictionaries({"type": st.just("dispatch"),
                               "rules": st.lists(st.tuples(st.text(max_size=3), children).map(list), max_size=2)},
                              optional={"loop": st.booleans()}),
    )


structural_tags = st.one_of(
    st.fixed_dictionaries({"type": st.just("structural_tag"),
                           "format": st.recursive(leaf_formats, _formats, max_leaves=6)}),
    st.recursive(leaf_formats, _formats, max_leaves=4),
    st.fixed_dictionaries({"type": st.just("structural_tag"),
                           "structures": st.lists(st.fixed_dictionaries(
                               {"begin": st.text(max_size=4), "schema": schemas, "end": st.text(max_size=4)}),
                               max_size=2),
                           "triggers": st.lists(st.text(max_size=3), max_size=2)}),
)


@pytest.mark.timeout(300)
@cfg(300)
@hypothesis.given(tag=structural_tags, as_text=st.booleans(),
                  choices=st.lists(st.integers(0, 10**6), max_size=5))
def test_random_structural_tags(tag, as_text, choices):
    arg = json.dumps(tag) if as_text else tag
    compiled = check_outcome(compiler().compile_structural_tag, arg)
    hypothesis.event("compiled" if compiled is not None else "clean error")
    if compiled is not None:
        check_outcome(short_walk, compiled, choices, oracle_every=2)


# ---- token id sequences into matchers -------------------------------------------------------

GRAMMARS = {
    "json": lambda c: c.compile_builtin_json_grammar(),
    "schema": lambda c: c.compile_json_schema(
        {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
         "required": ["name"]}),
    "regex": lambda c: c.compile_regex(r"[a-z]{1,8}@[a-z]+\.(com|org)"),
    "tags": lambda c: c.compile_structural_tag({"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [
            {"begin": "<tool_call>", "content": {"type": "json_schema", "json_schema": {"type": "object"}},
             "end": "</tool_call>"}]}}),
}
ops = st.lists(st.one_of(
    st.tuples(st.just("accept"), st.integers(-(2**31), 2**31 - 1)),
    st.tuples(st.just("accept"), st.integers(-5, 49152 + 5)),
    st.tuples(st.just("allowed"), st.integers(0, 10**6)),
    st.tuples(st.just("stop"), st.integers(0, 3)),
    st.tuples(st.just("rollback"), st.integers(-3, 8)),
    st.tuples(st.just("validate"), st.lists(st.integers(-3, 49160), max_size=4)),
    st.tuples(st.just("fork"), st.just(0)),
    st.tuples(st.just("reset"), st.just(0)),
    st.tuples(st.just("jump"), st.just(0)),
    st.tuples(st.just("string"), st.binary(max_size=8)),
), max_size=30)


@pytest.mark.timeout(300)
@cfg(250)
@hypothesis.given(which=st.sampled_from(sorted(GRAMMARS)), seq=ops, max_rollback=st.sampled_from([-1, 0, 2]))
def test_random_token_streams(which, seq, max_rollback):
    tok = tokenizer()
    n = tok.vocab_size
    compiled = GRAMMARS[which](compiler())
    m = xgr.GrammarMatcher(compiled, max_rollback_tokens=max_rollback)
    bm = xgr.allocate_token_bitmask(1, n)
    stops = list(tok.stop_token_ids)
    for op, arg in seq:
        steps = m.num_steps
        try:
            if op == "accept":
                r = m.accept_token(arg)
                assert isinstance(r, bool)
                assert m.num_steps == steps + (1 if r else 0)
            elif op == "allowed":
                m.fill_next_token_bitmask(bm)
                bits = np.unpackbits(np.asarray(bm).reshape(-1).view(np.uint8), bitorder="little")[:n]
                ids = np.flatnonzero(bits)
                if len(ids):
                    t = int(ids[arg % len(ids)])
                    assert m.accept_token(t), f"allowed token {t} rejected"
                else:
                    assert m.is_terminated() or not m.accept_token(0)
            elif op == "stop":
                r = m.accept_token(stops[arg % len(stops)])
                assert r == (m.is_terminated()) or not r
            elif op == "rollback":
                m.rollback(arg)
                assert m.num_steps == steps - arg
            elif op == "validate":
                k = m.validate_tokens(arg)
                assert 0 <= k <= len(arg) and m.num_steps == steps
            elif op == "fork":
                f = m.fork()
                assert f.num_steps == steps and f.is_terminated() == m.is_terminated()
            elif op == "reset":
                m.reset()
                assert m.num_steps == 0
            elif op == "jump":
                assert isinstance(m.find_jump_forward_string(), str)
            elif op == "string":
                assert isinstance(m.accept_string(arg), bool)
        except BaseException as e:  # noqa: BLE001
            if not allowed_error(e):
                raise
            assert m.num_steps == steps, f"{op}({arg!r}) failed but changed the state"
            if op == "accept":
                assert arg < 0 or arg >= n, f"in-range id {arg} raised {e!r}"
    # the matcher still answers consistently (after a stop token: no mask, as upstream)
    bm2 = xgr.allocate_token_bitmask(1, n)
    m._fill_next_token_bitmask_bruteforce(bm2)
    try:
        m.fill_next_token_bitmask(bm)
    except xgr.InvalidStateError:
        assert m.is_terminated() and not np.asarray(bm2).any()
        return
    assert_masks_agree(m, bm, bm2, n)


def test_out_of_range_ids_and_rollback_messages():
    m = xgr.GrammarMatcher(GRAMMARS["json"](compiler()))
    n = tokenizer().vocab_size
    for bad in (-1, n, n + 100, 2**31 - 1, -(2**31), 2**40):
        with pytest.raises(ValueError, match="outside the vocabulary|out of range"):
            m.accept_token(bad)
    with pytest.raises((ValueError, RuntimeError), match="rollback"):
        m.rollback(1)
    with pytest.raises(ValueError):
        m.rollback(-1)
    with pytest.raises(TypeError):
        m.accept_token("7")
