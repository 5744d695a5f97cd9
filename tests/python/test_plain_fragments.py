"""Tool-call fragments from the core's plain JSON-schema front end (tool_call_compile.py
``_plain_fragment_grammar``): a structural tag's tool whose parameters schema is in the
core's plain subset is lowered from the core's grammar instead of the Python converter's.
The request must accept exactly what it accepted through the converter: a three-tool tag
(two plain schemas, one with a ``pattern`` and a ``maxLength`` that stays in Python) is compiled both ways on a
byte vocabulary and the allowed bytes + stop token compared at every step, along real
tool-call texts and seeded random walks."""

import json
import random

import pytest

import xgrammar2 as xgr
from xgrammar2 import tool_call_compile
from xgrammar2.structural_tag.nodes import JSONSchema
from xgrammar2.testing import _byte_tokenizer_info

WEATHER = {"type": "object", "properties": {
    "city": {"type": "string", "minLength": 1},
    "unit": {"enum": ["celsius", "fahrenheit"]},
    "days": {"type": "integer", "minimum": 1, "maximum": 14}},
    "required": ["city"], "additionalProperties": False}
SEARCH = {"type": "object", "properties": {
    "query": {"type": "string"},
    "filters": {"type": "array", "items": {"$ref": "#/$defs/filter"}, "maxItems": 3},
    "exact": {"type": "boolean"}},
    "required": ["query", "filters"], "$defs": {"filter": {"type": "object", "properties": {
        "field": {"type": "string"}, "value": {"type": ["string", "number", "null"]}},
        "required": ["field", "value"]}}}
CODE = {"type": "object", "properties": {"sha": {"type": "string", "pattern": "^[0-9a-f]+$", "maxLength": 7}},
        "required": ["sha"]}  # (a pattern with a length: a product, the converter's)
TOOLS = {"get_weather": WEATHER, "search": SEARCH, "lookup_commit": CODE}

CALLS = [
    '<function=get_weather>{"city": "Paris", "unit": "celsius", "days": 3}</function>',
    'Let me look. <function=search>{"query":"x","filters":[{"field":"a","value":1.5e3},'
    '{"field":"b","value":null}]}</function> done',
    '<function=lookup_commit>{"sha": "deadbee"}</function>',
    '<function=get_weather>{"city": "", "days": 15}</function>',  # refused inside
    '<function=search>{"query": "q", "filters": [], "exact": true, "x": 1}</function>',
]
WALKS = 6
WALK_STEPS = 300


def _tag_text(max_ws=None):
    tags = []
    for name, schema in TOOLS.items():
        content = {"type": "json_schema", "json_schema": schema}
        if max_ws is not None:
            content["max_whitespace_cnt"] = max_ws
        tags.append({"type": "tag", "begin": f"<function={name}>", "content": content, "end": "</function>"})
    fmt = {"type": "triggered_tags", "triggers": ["<function="], "tags": tags}
    return json.dumps({"type": "structural_tag", "format": fmt})


@pytest.fixture(scope="module")
def info():
    return _byte_tokenizer_info()


def _compile(info, text, plain):
    """A fresh compiler (its tag table empty) compiling ``text``, with or without the core's
    fragments; also returns how many contents were lowered and how many of them by the core."""
    made, calls = [], []
    real = tool_call_compile._plain_fragment_grammar

    def spy(content):
        calls.append(content)
        g = real(content) if plain else None
        if g is not None:
            made.append(content)
        return g

    tool_call_compile._plain_fragment_grammar = spy
    try:
        comp = xgr.GrammarCompiler(info)  # (the cache on: tags are linked only then)
        return comp.compile_structural_tag(text), len(calls), len(made)
    finally:
        tool_call_compile._plain_fragment_grammar = real


def _allowed(m, info, bm):
    bm.fill_(-1)
    m.fill_next_token_bitmask(bm, 0)
    words = bm[0].tolist()
    return frozenset(i for i in range(info.vocab_size) if (words[i >> 5] >> (i & 31)) & 1)


def _walk(info, ga, gb, data, rng):
    ma, mb = xgr.GrammarMatcher(ga), xgr.GrammarMatcher(gb)
    bm = xgr.allocate_token_bitmask(1, info.vocab_size)
    stop = info.stop_token_ids[0]
    steps = WALK_STEPS if rng is not None else len(data)
    for k in range(steps + 1):
        aa, ab = _allowed(ma, info, bm), _allowed(mb, info, bm)
        assert aa == ab, f"step {k}: masks differ on {sorted(aa ^ ab)[:8]}"
        if k == steps:
            return k
        if rng is not None:
            nxt = sorted(aa - {stop})
            if not nxt:
                return k
            b = rng.choice(nxt)
        else:
            b = data[k]
            if b not in aa:
                return k
        assert ma.accept_token(b) and mb.accept_token(b)
    return steps


@pytest.fixture(scope="module", params=[None, 2], ids=["any_ws", "max_ws_2"])
def pair(request, info):
    text = _tag_text(request.param)
    core, calls_core, n_core = _compile(info, text, plain=True)
    python, calls_python, n_python = _compile(info, text, plain=False)
    assert calls_core == calls_python == len(TOOLS)  # each tool lowered once, both ways
    return core, python, n_core, n_python


def test_plain_tools_take_the_core_front_end(pair):
    _, _, n_core, n_python = pair
    # get_weather, search and lookup_commit (its pattern with a length: a type part the core
    # asks the converter for, docs/json-schema.md "Type parts left to the converter")
    assert n_core == 3 and n_python == 0


@pytest.mark.parametrize("i", range(len(CALLS)))
def test_tool_call_texts_have_equal_masks(info, pair, i):
    core, python, _, _ = pair
    data = CALLS[i].encode()
    stopped = _walk(info, core, python, data, None)
    if i < 3:
        assert stopped == len(data)  # the valid calls are accepted to the end


@pytest.mark.parametrize("seed", range(WALKS))
def test_random_walks_have_equal_masks(info, pair, seed):
    core, python, _, _ = pair
    _walk(info, core, python, b"", random.Random(seed))


@pytest.mark.parametrize("content", [
    JSONSchema("$", WEATHER, style="qwen_xml"),
    JSONSchema("$", WEATHER, any_order=True),
    JSONSchema("$", WEATHER, excludes=["</function>"]),
    JSONSchema("$", WEATHER, strict=False),
    JSONSchema("$", WEATHER, max_whitespace_cnt=-3),
    JSONSchema("$", {"type": "object", "patternProperties": {"^x": {"type": "string"}}}),
    JSONSchema("$", {"type": "number", "minimum": float("nan")}),
], ids=["xml_style", "any_order", "excludes", "not_strict", "bad_max_ws", "patternProperties", "not_json"])
def test_contents_outside_the_core_go_to_python(content):
    assert tool_call_compile._plain_fragment_grammar(content) is None
