"""Tool-call constraints exactly as SGLang's function-call code builds them
(``FunctionCallParser.get_structure_constraint`` for ``tools`` + ``tool_choice``), from real
BFCL function definitions: every one compiles with xgrammar2, real tool calls in each
model's format are accepted (and parse back with SGLang's own detector), and the masks agree
with SGLang's built-in xgrammar backend along seeded random walks."""

from __future__ import annotations

import json
import random

import pytest

from sglang_harness import (
    QWEN3_EOS,
    QWEN3_VOCAB,
    allowed,
    bfcl_functions,
    classify_difference,
    require_sglang,
    walk,
)

require_sglang()

from sglang.srt.constrained.base_grammar_backend import InvalidGrammarObject  # noqa: E402
from sglang.srt.entrypoints.openai.protocol import Tool, ToolChoice  # noqa: E402
from sglang.srt.function_call.function_call_parser import FunctionCallParser  # noqa: E402

from xgrammar2_sglang.grammar import XGrammar2Grammar  # noqa: E402

V = QWEN3_VOCAB
EOS = QWEN3_EOS[0]
FNS = bfcl_functions(limit=3)
NAME = FNS[0]["function"]["name"]  # calculate_triangle_area(base:int, height:int, unit?:str)
OTHER = FNS[1]["function"]["name"]
ARGS = {"base": 10, "height": 5}

# Every --tool-call-parser of SGLang 0.5.23 that yields a constraint for required / named /
# auto-with-strict-tools (the others -- hunyuan, muse, spark25 -- build none; response_template
# needs a template file).
PARSERS = [
    "apertus2509", "beam", "cohere_command4", "deepseekv3", "deepseekv31", "deepseekv32", "deepseekv4",
    "deepseekv41", "dots", "gemma4", "gigachat3", "gigachat35", "glm", "glm45", "glm47", "gpt-oss", "hermes",
    "inkling", "interns1", "iquest_q1", "k2_horizon", "kimi_k2", "kimi_k3", "lfm2", "ling3", "llama3",
    "mimo", "minicpm5", "minimax-m2", "minimax-m3", "mistral", "nanbeige", "poolside_v1", "pythonic", "qwen",
    "qwen25", "qwen3_coder", "step3", "step3p5", "trinity",
]
CHOICES = ["required", "named", "auto_strict"]


def constraint(tokenizer, parser_name: str, choice: str, parallel: bool = True):
    """(key_type, key_string) of the grammar SGLang would request, or None."""
    tools = [Tool(**t) for t in FNS]
    if choice == "auto_strict":
        tools = [Tool(**{**t, "function": {**t["function"], "strict": True}}) for t in FNS]
        tool_choice = "auto"
    elif choice == "named":
        tool_choice = ToolChoice(type="function", function={"name": NAME})
    else:
        tool_choice = "required"
    parser = FunctionCallParser(tools, parser_name, tokenizer=tokenizer, tool_choice=tool_choice)
    c = parser.get_structure_constraint(tool_choice, parallel_tool_calls=parallel)
    if c is None:
        return None
    kind, value = c
    if not isinstance(value, str):
        value = json.dumps(value.model_dump(by_alias=True) if hasattr(value, "model_dump") else value)
    return {"json_schema": "json"}.get(kind, kind), value


def _dispatch(backend, key):
    return backend._init_value_dispatch(key, False)


@pytest.mark.parametrize("choice", CHOICES)
@pytest.mark.parametrize("parser_name", PARSERS)
def test_constraint_compiles_and_matches_builtin(backend, upstream, tokenizer, parser_name, choice):
    key = constraint(tokenizer, parser_name, choice)
    if key is None:
        pytest.skip(f"{parser_name} builds no constraint for {choice}")
    ours = _dispatch(backend, key)
    up = _dispatch(upstream, key)
    assert not isinstance(up, InvalidGrammarObject), up.error_message
    assert isinstance(ours, XGrammar2Grammar), getattr(ours, "error_message", ours)
    rng = random.Random(f"{parser_name}/{choice}")
    mask = ours.allocate_vocab_mask(vocab_size=V, batch_size=2, device="cpu")
    for step in range(24):
        ours.fill_vocab_mask(mask, 0)
        up.fill_vocab_mask(mask, 1)
        a, b = allowed(mask[0].numpy(), V), allowed(mask[1].numpy(), V)
        if a != b:
            kinds, rest_ours, rest_up = classify_difference(tokenizer, a - b, b - a, up)
            assert not rest_ours and not rest_up, (
                f"{parser_name}/{choice} step {step}: ours-only "
                f"{[tokenizer.decode([t]) for t in sorted(rest_ours)[:8]]} upstream-only "
                f"{[tokenizer.decode([t]) for t in sorted(rest_up)[:8]]}"
            )
        both = sorted((a & b) - set(QWEN3_EOS))
        if not both:
            break
        t = rng.choice(both)
        ours.accept_token(t)
        up.accept_token(t)


# Real tool calls in each model's own format (what the model emits for required / named).
REAL_CALLS = {
    "qwen": f'<tool_call>\n{{"name":"{NAME}", "arguments":{json.dumps(ARGS)}}}\n</tool_call>',
    "hermes": f'<tool_call>{{"name":"{NAME}", "arguments":{json.dumps(ARGS)}}}</tool_call>',
    "llama3": f'<|python_tag|>{{"name":"{NAME}", "arguments":{json.dumps(ARGS)}}}',
    "qwen3_coder": (f"<tool_call>\n<function={NAME}>\n<parameter=base>\n10\n</parameter>\n"
                    "<parameter=height>\n5\n</parameter>\n</function>\n</tool_call>"),
    "deepseekv31": f"<｜tool▁call▁begin｜>{NAME}<｜tool▁sep｜>{json.dumps(ARGS)}<｜tool▁call▁end｜>",
    "pythonic": json.dumps([{"name": NAME, "parameters": ARGS}]),  # the json_schema array fallback
}
PARSE_BACK = ("qwen", "hermes", "qwen3_coder")


@pytest.mark.parametrize("choice", ["required", "named", "auto_strict"])
@pytest.mark.parametrize("parser_name", sorted(REAL_CALLS))
def test_real_tool_calls_are_accepted(backend, tokenizer, parser_name, choice):
    key = constraint(tokenizer, parser_name, choice)
    if key is None:
        assert parser_name == "pythonic" and choice == "auto_strict"
        pytest.skip("SGLang builds no constraint for pythonic + auto (its JSON array is the "
                    "required / named fallback only)")
    text = REAL_CALLS[parser_name]
    g = _dispatch(backend, key)
    assert isinstance(g, XGrammar2Grammar), getattr(g, "error_message", g)
    walk(g, tokenizer, text, V)
    if parser_name in PARSE_BACK:
        parser = FunctionCallParser([Tool(**t) for t in FNS], parser_name, tokenizer=tokenizer)
        _, calls = parser.parse_non_stream(text)
        assert [c.name for c in calls] == [NAME]
        assert json.loads(calls[0].parameters) == ARGS


# Not the legacy-tag parsers (qwen, hermes, llama3, deepseekv31, ...): SGLang 0.5.23 builds
# their named-choice tag from every tool (get_legacy_structural_tag ignores the choice), for
# its built-in backend as well; test_constraint_compiles_and_matches_builtin covers them.
@pytest.mark.parametrize("parser_name", ["qwen3_coder", "pythonic"])
def test_named_choice_rejects_other_function(backend, tokenizer, parser_name):
    key = constraint(tokenizer, parser_name, "named")
    g = _dispatch(backend, key)
    bad = REAL_CALLS[parser_name].replace(NAME, OTHER)
    with pytest.raises((AssertionError, ValueError)):
        walk(g, tokenizer, bad, V)


def test_strict_tool_arguments_are_enforced(backend, tokenizer):
    """With strict tools the arguments follow the schema (integers stay integers)."""
    key = constraint(tokenizer, "qwen", "auto_strict")
    ok = _dispatch(backend, key)
    walk(ok, tokenizer, "Let me call it. " + REAL_CALLS["qwen"], V)
    bad = _dispatch(backend, key)
    with pytest.raises(AssertionError, match="masked"):
        walk(bad, tokenizer, REAL_CALLS["qwen"].replace('"base": 10', '"base": "ten"'), V)


def test_parallel_tool_calls_false_limits_to_one(backend, tokenizer):
    key = constraint(tokenizer, "pythonic", "required", parallel=False)
    one = json.dumps([{"name": NAME, "parameters": ARGS}])
    two = json.dumps([{"name": NAME, "parameters": ARGS}] * 2)
    walk(_dispatch(backend, key), tokenizer, one, V)
    with pytest.raises(AssertionError, match="masked"):
        walk(_dispatch(backend, key), tokenizer, two, V)


@pytest.mark.parametrize("tool_choice", ["auto", "none"])
@pytest.mark.parametrize("with_tools", [True, False])
def test_template_turn_grammar_tags(backend, upstream, tokenizer, tool_choice, with_tools):
    """The whole-turn tag OpenAIServingChat builds for response-template parsers that
    constrain every turn (Beam in SGLang 0.5.23), which the plugin's AROUND hook enables for
    xgrammar2: it compiles and its rows match the built-in backend on random walks."""
    tools = [Tool(**t) for t in FNS] if with_tools else []
    parser = FunctionCallParser(tools, "beam", tokenizer=tokenizer)
    assert parser.detector.constrains_every_turn
    tag = parser.detector.get_structural_tag(
        tools=parser.structural_tag_tools(), tool_choice=tool_choice, thinking_mode=False, parallel_tool_calls=True,
    )
    assert tag is not None
    key = ("structural_tag", json.dumps(tag if isinstance(tag, dict) else tag.model_dump(by_alias=True)))
    ours, up = _dispatch(backend, key), _dispatch(upstream, key)
    assert isinstance(ours, XGrammar2Grammar), getattr(ours, "error_message", ours)
    rng = random.Random(f"beam/{tool_choice}/{with_tools}")
    mask = ours.allocate_vocab_mask(vocab_size=V, batch_size=2, device="cpu")
    for step in range(24):
        ours.fill_vocab_mask(mask, 0)
        up.fill_vocab_mask(mask, 1)
        a, b = allowed(mask[0].numpy(), V), allowed(mask[1].numpy(), V)
        if a != b:
            kinds, rest_ours, rest_up = classify_difference(tokenizer, a - b, b - a, up)
            assert not rest_ours and not rest_up, (step, sorted(rest_ours)[:8], sorted(rest_up)[:8])
        both = sorted((a & b) - set(QWEN3_EOS))
        if not both:
            break
        t = rng.choice(both)
        ours.accept_token(t)
        up.accept_token(t)
