"""OpenAI chat request -> grammar (xgrammar2.structural_tag.openai)."""

import pytest

from st_support import JSON_BACKEND, accepts, requires_engine
from xgrammar2.structural_tag import StructuralTagError
from xgrammar2.structural_tag.openai import request_structural_tag, request_to_ebnf

pytestmark = requires_engine

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "strict": True,
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"], "additionalProperties": False}}}
LOOSE = {"type": "function", "function": {
    "name": "search", "strict": False,
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}
ANSWER = {"type": "json_schema", "json_schema": {"name": "answer", "strict": True, "schema": {
    "type": "object", "properties": {"temp": {"type": "number"}}, "required": ["temp"],
    "additionalProperties": False}}}


def ebnf(model, **req):
    return request_to_ebnf(model, json_schema_to_ebnf=JSON_BACKEND, **req)


def call(name, args):
    return f'<tool_call>\n{{"name": "{name}", "arguments": {args}}}\n</tool_call>'


def test_plain_text_is_unconstrained():
    assert request_structural_tag("qwen_3") is None
    assert request_structural_tag("qwen_3", response_format={"type": "text"}) is None
    assert request_structural_tag("qwen_3", tools=[WEATHER], tool_choice="none") is None


def test_response_format_json_schema_and_json_object():
    g = ebnf("qwen_3", response_format=ANSWER)
    assert accepts(g, '{"temp": 21.5}')
    assert not accepts(g, '{"temp": "hot"}')
    assert not accepts(g, 'Sure: {"temp": 1}')
    g = ebnf("qwen_3", response_format={"type": "json_object"})
    assert accepts(g, '{"anything": [1, 2]}')
    assert not accepts(g, "[1, 2]")


def test_response_format_structural_tag_current_and_legacy():
    st = {"type": "structural_tag", "format": {"type": "tag", "begin": "<a>", "content": {"type": "any_text"}, "end": "</a>"}}
    assert accepts(ebnf("llama", response_format=st), "<a>hi</a>")
    legacy = {"type": "structural_tag", "triggers": ["<f="],
              "structures": [{"begin": "<f=x>", "schema": {"type": "object"}, "end": "</f>"}]}
    g = ebnf("llama", response_format=legacy)
    assert accepts(g, "text <f=x>{}</f> more")
    assert not accepts(g, "text <f=y>{}</f>")


def test_tools_auto_required_named_parallel():
    tools = [WEATHER, LOOSE]
    c1 = call("get_weather", '{"city": "Paris"}')
    c2 = call("search", '{"anything": 1}')  # strict: false -> arguments unconstrained
    auto = ebnf("qwen_3", tools=tools)
    assert accepts(auto, "Hello")
    assert accepts(auto, c1 + "\n" + c2)
    assert not accepts(auto, call("get_weather", '{"city": 3}'))
    req = ebnf("qwen_3", tools=tools, tool_choice="required")
    assert not accepts(req, "Hello")
    assert accepts(req, c1)
    one = ebnf("qwen_3", tools=tools, tool_choice="required", parallel_tool_calls=False)
    assert accepts(one, c1)
    assert not accepts(one, c1 + "\n" + c2)
    named = ebnf("qwen_3", tools=tools, tool_choice={"type": "function", "function": {"name": "search"}})
    assert accepts(named, c2)
    assert not accepts(named, c1)


def test_enforce_non_strict_tools():
    g = ebnf("qwen_3", tools=[LOOSE], enforce_non_strict_tools=True)
    assert accepts(g, call("search", '{"q": "x"}'))
    assert not accepts(g, call("search", '{"anything": 1}'))


def test_auto_with_json_answer_is_answer_or_calls():
    g = ebnf("qwen_3", tools=[WEATHER], response_format=ANSWER)
    assert accepts(g, '{"temp": 3}')
    assert accepts(g, call("get_weather", '{"city": "Rome"}'))
    assert not accepts(g, "free text")


def test_reasoning_before_answer():
    g = ebnf("qwen_3", response_format=ANSWER, reasoning=True)  # the prompt ends with <think>
    assert accepts(g, '\nhmm\n</think>\n\n{"temp": 3}')
    assert not accepts(g, '{"temp": 3}') and not accepts(g, '<think>\nhmm\n</think>\n\n{"temp": 3}')
    g = ebnf("qwen_3", response_format=ANSWER, reasoning=True, prompt_ends_with_think=False)
    assert accepts(g, '<think>\nhmm\n</think>\n\n{"temp": 3}')
    assert not accepts(g, '{"temp": 3}')
    g = ebnf("deepseek_r1", response_format=ANSWER, reasoning=True)
    assert accepts(g, 'hmm</think>{"temp": 3}')  # the prompt ends with <think>\n
    g = ebnf("qwen_3", reasoning=True)
    assert accepts(g, "\nhmm\n</think>\n\nAny answer.")


def test_harmony_final_channel_answer():
    g = ebnf("harmony", response_format=ANSWER, reasoning=True)
    assert accepts(g, '<|channel|>analysis<|message|>think<|end|><|start|>assistant'
                      '<|channel|>final<|message|>{"temp": 1}<|return|>')
    assert accepts(g, '<|channel|>final<|message|>{"temp": 1}<|end|>')
    assert not accepts(g, '<|channel|>final<|message|>{"temp": "x"}<|end|>')
    g = ebnf("harmony", tools=[WEATHER], tool_choice="required")
    assert accepts(g, '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>'
                      '{"city": "Oslo"}<|call|>')
    assert not accepts(g, "<|channel|>final<|message|>hi<|end|>")


def test_bad_requests():
    with pytest.raises(StructuralTagError, match="response_format.type"):
        request_structural_tag("qwen_3", response_format={"type": "xml"})
    with pytest.raises(StructuralTagError, match="not in the tools list"):
        request_structural_tag("qwen_3", tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "x"}})


def test_compile_request_with_xgrammar2_compiler():
    """compile_request goes through GrammarCompiler.compile_structural_tag (needs the core
    and, for tool calls, TagDispatch support)."""
    from st_support import ENGINE

    if ENGINE != "xgrammar2":
        pytest.skip("xgrammar2 cannot match TagDispatch grammars yet")
    import xgrammar2 as xgr
    from xgrammar2.structural_tag.openai import compile_request
    from xgrammar2.testing import _byte_tokenizer_info

    compiler = xgr.GrammarCompiler(_byte_tokenizer_info())
    assert compile_request(compiler, "qwen_3", tools=[WEATHER]) is not None
