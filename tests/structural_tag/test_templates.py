"""Chat-template alignment of the model templates.

For every supported model family, real BFCL tool calls (``shared/data/bfcl``) are rendered
through the model's real chat template (``shared/data/chat_templates``, jinja2) as an
assistant turn; the turn (the text after the generation prompt, up to the end-of-turn token)
must be accepted by ``get_model_structural_tag``'s grammar under ``tool_choice`` auto,
required, named and ``parallel_tool_calls=False``, and mutations of it must be rejected:
a wrong tool name, a schema-invalid argument (an unknown argument; a wrong type), a missing
end marker.

By default a sample of each BFCL file runs (``XGR2_BFCL_LIMIT``, 12 cases per file);
``XGR2_BFCL_FULL=1`` runs all of them. ``XGR2_TEMPLATE_REPORT=path`` writes the per-family
counts as JSON.
"""

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import pytest

from chat import BFCL_KINDS, bfcl_cases, bfcl_limit, render
from st_support import TEMPLATES, accepts, requires_engine, to_ebnf

pytestmark = requires_engine

REASONING_TEXT = "The user wants this; I will call the tool."


@dataclass
class Family:
    key: str  # get_model_structural_tag model key
    template: str
    eos: Optional[str]  # the turn ends before its first occurrence (None: keep all)
    end_marker: str  # removed (last occurrence) by the "missing end" mutation
    render_kwargs: Dict[str, Any] = field(default_factory=dict)
    tag_kwargs: Dict[str, Any] = field(default_factory=dict)
    max_calls: int = 99  # the template renders at most this many calls per message
    reasoning_field: Optional[str] = None  # message field holding the reasoning text
    history_header: Optional[str] = None  # when the history drops the generation prompt's tail
    model_prefix: str = ""  # what the model writes that the history drops (R1's reasoning)
    content: Optional[str] = ""  # assistant content beside the calls
    call_id: bool = False  # 9-character call ids (Mistral)

    @property
    def name(self):
        extra = [f"{k}={v}" for k, v in self.render_kwargs.items()]
        if self.tag_kwargs.get("reasoning"):
            extra.append("reasoning")
        if self.content:
            extra.append("content")
        return f"{self.key}:{self.template.replace('.jinja', '')}" + (f"[{','.join(extra)}]" if extra else "")


R = {"reasoning": True}
FAMILIES: List[Family] = [
    # Llama 3.x: one call per message; JSON with "parameters".
    Family("llama", "meta-llama-Llama-3.1-8B-Instruct.jinja", "<|eot_id|>", "}", max_calls=1),
    Family("llama", "meta-llama-Llama-3.2-3B-Instruct.jinja", "<|eot_id|>", "}", max_calls=1),
    Family("llama", "meta-llama-Llama-3.3-70B-Instruct.jinja", "<|eot_id|>", "}", max_calls=1),
    # Qwen 2.5 / Qwen3 / QwQ / Hermes / MiMo-VL: <tool_call> JSON </tool_call>.
    Family("qwen_3", "Qwen-Qwen2.5-7B-Instruct.jinja", "<|im_end|>", "</tool_call>"),
    Family("qwen_3", "Qwen-Qwen3-0.6B.jinja", "<|im_end|>", "</tool_call>",
           render_kwargs={"enable_thinking": False}),
    # (the Qwen3-0.6B template lets the model write <think>; qwen_3 assumes the prompt did)
    Family("qwen_3", "Qwen-Qwen3-0.6B.jinja", "<|im_end|>", "</tool_call>",
           tag_kwargs={"reasoning": True, "prompt_ends_with_think": False},
           reasoning_field="reasoning_content", content="Sure."),
    Family("qwen_3", "Qwen-QwQ-32B.jinja", "<|im_end|>", "</tool_call>",
           render_kwargs={"enable_thinking": True},
           tag_kwargs={"reasoning": True, "prompt_ends_with_think": True},
           history_header="<|im_start|>assistant\n", model_prefix=REASONING_TEXT + "\n</think>\n\n"),
    Family("qwen_3", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "<|im_end|>", "</tool_call>"),
    Family("qwen_3", "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "<|im_end|>", "</tool_call>"),
    Family("qwen_3", "MiMo-VL.jinja", "<|im_end|>", "</tool_call>"),
    # Qwen3-Coder / Qwen3.5: XML parameters.
    Family("qwen_3_coder", "Qwen3-Coder.jinja", "<|im_end|>", "</tool_call>"),
    Family("qwen_3_coder", "Qwen3-Coder.jinja", "<|im_end|>", "</tool_call>", content="Sure."),
    Family("qwen_3_5", "Qwen3.5-4B.jinja", "<|im_end|>", "</tool_call>", tag_kwargs=R,
           reasoning_field="reasoning_content"),
    # DeepSeek R1 (llama.cpp's fixed distill templates): the prompt ends with <think>\n and the
    # history drops the reasoning, which the model writes before the calls.
    Family("deepseek_r1", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "<｜end▁of▁sentence｜>",
           "<｜tool▁calls▁end｜>", render_kwargs={"enable_thinking": True}, tag_kwargs=R,
           history_header="<｜Assistant｜>", model_prefix=REASONING_TEXT + "\n</think>\n\n"),
    Family("deepseek_r1", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "<｜end▁of▁sentence｜>",
           "<｜tool▁calls▁end｜>", render_kwargs={"enable_thinking": False},
           history_header="<｜Assistant｜>"),
    Family("deepseek_v3_1", "deepseek-ai-DeepSeek-V3.1.jinja", "<｜end▁of▁sentence｜>", "<｜tool▁calls▁end｜>"),
    Family("deepseek_v3_1", "deepseek-ai-DeepSeek-V3.1.jinja", "<｜end▁of▁sentence｜>", "<｜tool▁calls▁end｜>",
           render_kwargs={"thinking": True}, tag_kwargs=R),
    Family("deepseek_v3_2", "deepseek-ai-DeepSeek-V3.2.jinja", "<｜end▁of▁sentence｜>",
           "</｜DSML｜function_calls>", render_kwargs={"thinking": True}, tag_kwargs=R),
    Family("deepseek_v4", "deepseek-ai-DeepSeek-V4.jinja", "<｜end▁of▁sentence｜>", "</｜DSML｜tool_calls>"),
    Family("deepseek_v4", "deepseek-ai-DeepSeek-V4-Flash-0731.jinja", "<｜end▁of▁sentence｜>",
           "</｜DSML｜tool_calls>"),
    # Kimi K2.
    Family("kimi", "moonshotai-Kimi-K2.jinja", "<|im_end|>", "<|tool_calls_section_end|>"),
    Family("kimi", "Kimi-K2-Instruct.jinja", "<|im_end|>", "<|tool_calls_section_end|>", content="Sure."),
    Family("kimi", "Kimi-K2-Thinking.jinja", "<|im_end|>", "<|tool_calls_section_end|>", tag_kwargs=R,
           reasoning_field="reasoning_content"),
    # gpt-oss Harmony: the turn ends with the <|call|> stop token, part of the grammar.
    Family("harmony", "openai-gpt-oss-120b.jinja", None, "<|call|>", max_calls=1),
    Family("harmony", "openai-gpt-oss-120b.jinja", None, "<|call|>", max_calls=1, tag_kwargs=R,
           reasoning_field="thinking"),
    # GLM.
    Family("glm_4_7", "GLM-4.7-Flash.jinja", None, "</tool_call>", render_kwargs={"enable_thinking": False}),
    Family("glm_4_7", "GLM-4.7-Flash.jinja", None, "</tool_call>", tag_kwargs=R,
           reasoning_field="reasoning_content", content="Sure."),
    Family("glm_4_6", "GLM-4.6.jinja", None, "</tool_call>", render_kwargs={"enable_thinking": False}),
    Family("glm_4_6", "GLM-4.6.jinja", None, "</tool_call>", tag_kwargs=R, reasoning_field="reasoning_content"),
    # MiniMax M2: the prompt ends with <think>\n.
    Family("minimax", "MiniMax-M2.jinja", "[e~[", "</minimax:tool_call>", tag_kwargs=R,
           reasoning_field="reasoning_content"),
    Family("minimax", "MiniMax-M2.jinja", "[e~[", "</minimax:tool_call>", tag_kwargs=R,
           reasoning_field="reasoning_content", content="Sure."),
    # Mistral.
    Family("mistral", "Mistral-Small-3.2-24B-Instruct-2506.jinja", "</s>", "}", call_id=True),
    Family("mistral", "unsloth-mistral-Devstral-Small-2507.jinja", "</s>", "}"),
    Family("mistral", "mistralai-Ministral-3-14B-Reasoning-2512.jinja", "</s>", "}"),
    Family("mistral_nemo", "mistralai-Mistral-Nemo-Instruct-2407.jinja", "</s>", "]", call_id=True),
]


def _call_msg(i, name, args, fam):
    cid = f"call{i:05d}" if fam.call_id else f"call_{i}"
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def assistant_turn(fam: Family, case, calls, reasoning: bool = True) -> str:
    """The text the model writes for ``calls``, per the real chat template."""
    user = [dict(case["question"][0])] if isinstance(case["question"], list) else [case["question"]]
    user = [m for m in case["question"] if m.get("role") != "system"] or user
    msg = {"role": "assistant", "tool_calls": [_call_msg(i, n, a, fam) for i, (n, a) in enumerate(calls)]}
    if fam.content is not None:
        msg["content"] = fam.content
    if fam.reasoning_field and reasoning:
        msg[fam.reasoning_field] = REASONING_TEXT
    kw = fam.render_kwargs
    prompt = render(fam.template, user, case["tools"], True, **kw)
    full = render(fam.template, user + [msg], case["tools"], False, **kw)
    if fam.history_header is None:
        assert full.startswith(prompt), f"{fam.name}: the history does not extend the prompt"
        turn = full[len(prompt):]
    else:
        base = render(fam.template, user, case["tools"], False, **kw)
        assert full.startswith(base + fam.history_header), f"{fam.name}: unexpected history layout"
        turn = fam.model_prefix + full[len(base) + len(fam.history_header):]
    if fam.eos is not None:
        cut = turn.find(fam.eos)
        assert cut >= 0, f"{fam.name}: no {fam.eos!r} in {turn!r}"
        turn = turn[:cut]
    return turn


def grammar_for(fam: Family, tools, **kw) -> str:
    from xgrammar2.structural_tag import get_model_structural_tag

    args = dict(fam.tag_kwargs)
    args.update(kw)
    return to_ebnf(get_model_structural_tag(fam.key, tools, as_dict=True, **args))


def _type_of(schema, key):
    p = (schema.get("properties") or {}).get(key) or {}
    t = p.get("type")
    return t if isinstance(t, str) else None


def check_case(fam: Family, case) -> Tuple[bool, List[str]]:
    """Runs every check of one BFCL case; returns (ran, problems)."""
    calls = case["calls"]
    if not case["valid"] or not calls or len(calls) > fam.max_calls:
        return False, []
    problems: List[str] = []
    tools = case["tools"]
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}

    def expect(ok, what, ebnf, s):
        if accepts(ebnf, s) != ok:
            problems.append(f"{what}: expected {'accept' if ok else 'reject'} of {s!r}")

    turn = assistant_turn(fam, case, calls)
    auto = grammar_for(fam, tools)
    expect(True, "auto", auto, turn)
    required = grammar_for(fam, tools, tool_choice="required")
    if fam.content in ("", None):
        expect(True, "required", required, turn)
    single = len(calls) == 1
    if single:
        if fam.content in ("", None):
            named = grammar_for(fam, tools, tool_choice={"type": "function", "function": {"name": calls[0][0]}})
            expect(True, "named", named, turn)
            expect(True, "required, parallel_tool_calls=False",
                   grammar_for(fam, tools, tool_choice="required", parallel_tool_calls=False), turn)
        expect(True, "auto, parallel_tool_calls=False", grammar_for(fam, tools, parallel_tool_calls=False), turn)
    else:
        expect(False, "auto, parallel_tool_calls=False (several calls)",
               grammar_for(fam, tools, parallel_tool_calls=False), turn)
    # mutations
    name, args = calls[0]
    wrong = [("zz_" + name, args)] + calls[1:]
    expect(False, "wrong tool name", auto, assistant_turn(fam, case, wrong))
    extra = [(name, dict(args, zz_unknown_arg=1))] + calls[1:]
    expect(False, "unknown argument", auto, assistant_turn(fam, case, extra))
    typed = [k for k in args if _type_of(schemas[name], k) in ("integer", "number", "boolean")]
    if typed:
        bad = [(name, dict(args, **{typed[0]: "not a number"}))] + calls[1:]
        expect(False, f"wrong type for {typed[0]!r}", auto, assistant_turn(fam, case, bad))
    cut = turn.rfind(fam.end_marker)
    if cut >= 0:
        expect(False, "missing end marker", auto, turn[:cut])
    return True, problems


_RESULTS: Dict[str, Dict[str, int]] = {}


@pytest.mark.parametrize("fam", FAMILIES, ids=[f.name for f in FAMILIES])
def test_template_alignment(fam: Family):
    if not (TEMPLATES / fam.template).exists():
        pytest.skip(f"{fam.template} not found")
    pytest.importorskip("jinja2")
    pytest.importorskip("jsonschema")
    limit = bfcl_limit()
    ran = passed = 0
    failures: List[str] = []
    for kind in BFCL_KINDS:
        for case in bfcl_cases(kind, limit):
            did, problems = check_case(fam, case)
            if not did:
                continue
            ran += 1
            if problems:
                failures.append(f"{case['id']}: " + "; ".join(problems))
            else:
                passed += 1
    _RESULTS[fam.name] = {"cases": ran, "passed": passed}
    report = os.environ.get("XGR2_TEMPLATE_REPORT")
    if report:
        with open(report, "w") as f:
            json.dump(_RESULTS, f, indent=1, sort_keys=True)
    assert ran > 0
    assert not failures, f"{fam.name}: {len(failures)}/{ran} cases failed:\n" + "\n".join(failures[:10])


def test_reasoning_block_is_required_when_enabled():
    """reasoning=True puts the reasoning block first; without it the answer starts at once."""
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    from xgrammar2.structural_tag import get_model_structural_tag

    on = to_ebnf(get_model_structural_tag("qwen_3", tools, reasoning=True, as_dict=True))
    written = to_ebnf(get_model_structural_tag("qwen_3", tools, reasoning=True, as_dict=True,
                                               prompt_ends_with_think=False))
    off = to_ebnf(get_model_structural_tag("qwen_3", tools, as_dict=True))
    auto = to_ebnf(get_model_structural_tag("qwen_3", tools, reasoning="auto", as_dict=True))
    call = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    thought = "<think>\nhmm\n</think>\n\n"
    # as upstream's, qwen_3 takes the prompt to end with <think>: the output starts inside it
    assert accepts(on, thought[len("<think>"):] + call) and not accepts(on, call)
    assert not accepts(on, thought + call)
    assert accepts(written, thought + call) and not accepts(written, call)
    assert accepts(off, call) and not accepts(off, thought + call)
    assert accepts(auto, call) and accepts(auto, thought + call)
    r1 = to_ebnf(get_model_structural_tag("deepseek_r1", tools, reasoning=True, as_dict=True))
    assert accepts(r1, "hmm\n</think>\n\nThe answer.")  # the prompt already ends with <think>\n
    assert not accepts(r1, "The answer.")


def test_required_never_traps():
    """With tool_choice="required" every prefix of a call can be completed, and the output may
    end after the first call (and, with parallel calls, after any later one)."""
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}]
    from xgrammar2.structural_tag import get_model_structural_tag

    for key, call in [("qwen_3", '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'),
                      ("llama", '{"name": "f", "parameters": {"a": 1}}'),
                      ("kimi", "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
                               '<|tool_call_argument_begin|>{"a": 1}<|tool_call_end|><|tool_calls_section_end|>'),
                      ("deepseek_v3_1", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>"
                                        '{"a": 1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>')]:
        g = to_ebnf(get_model_structural_tag(key, tools, tool_choice="required", as_dict=True))
        assert not accepts(g, ""), key
        assert accepts(g, call), key
        for i in range(len(call)):
            assert accepts(g, call[:i], complete=False), (key, call[:i])
        one = to_ebnf(get_model_structural_tag(key, tools, tool_choice="required",
                                               parallel_tool_calls=False, as_dict=True))
        assert accepts(one, call), key


def test_tool_choice_none_and_no_tools_is_free_text():
    from xgrammar2.structural_tag import get_model_structural_tag

    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    for key, marker in [("qwen_3", "<think>"), ("llama", "</think>"), ("deepseek_v3_1", "<think>"),
                        ("kimi", "<think>"), ("glm_4_7", "<arg_key>"), ("minimax", "</think>"),
                        ("mistral", "[THINK]")]:
        g = to_ebnf(get_model_structural_tag(key, tools, tool_choice="none", as_dict=True))
        assert accepts(g, "Just an answer."), key
        assert not accepts(g, "a " + marker), key
        free = to_ebnf(get_model_structural_tag(key, tools, tool_choice="none", as_dict=True,
                                                exclude_special_tokens=False))
        assert accepts(free, "a " + marker), key


def test_unknown_model_and_bad_tool_choice():
    from xgrammar2.structural_tag import StructuralTagError, get_model_structural_tag

    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    with pytest.raises(StructuralTagError, match="unknown model format"):
        get_model_structural_tag("nope", tools)
    with pytest.raises(StructuralTagError, match="not in the tools list"):
        get_model_structural_tag("qwen_3", tools, {"type": "function", "function": {"name": "g"}})
    with pytest.raises(StructuralTagError, match="needs at least one tool"):
        get_model_structural_tag("qwen_3", [], "required")
    with pytest.raises(StructuralTagError, match=r"tools\[1\]\.function\.name"):
        get_model_structural_tag("qwen_3", tools + [{"type": "function", "function": {"parameters": {}}}])
    with pytest.raises(StructuralTagError, match="no builtin tools"):
        get_model_structural_tag("kimi_k3", tools + [{"type": "web_search"}])


# Families where upstream xgrammar's own template accepts the real turns too (auto mode).
# Not here: Qwen3-0.6B with reasoning (its template has the model write <think>; upstream
# assumes the prompt ends with it, as qwen_3 does unless prompt_ends_with_think=False),
# Qwen3-Coder / Qwen3.5 (upstream rejects the True/False the template writes for booleans),
# GLM-4.6 (newlines), the Mistral keys (not in upstream).
UPSTREAM_AGREES = {"llama", "deepseek_r1", "deepseek_v3_1", "deepseek_v3_2", "deepseek_v4", "kimi",
                   "harmony", "glm_4_7", "minimax"}


@pytest.mark.parametrize("fam", [f for f in FAMILIES if f.key in UPSTREAM_AGREES or (
    f.key == "qwen_3" and not (f.tag_kwargs.get("reasoning") and f.tag_kwargs.get("prompt_ends_with_think") is False))],
    ids=lambda f: f.name)
def test_upstream_model_tags_agree_on_template_turns(fam):
    """Differential: upstream xgrammar's get_model_structural_tag (same key, reasoning as
    configured) accepts the same rendered turns as ours."""
    import xgrammar
    from st_support import _upstream_match

    mode = "enabled" if fam.tag_kwargs.get("reasoning") else "disabled"
    checked = 0
    for kind in ("simple_python", "parallel"):
        for case in bfcl_cases(kind, 4):
            if not case["valid"] or len(case["calls"]) > fam.max_calls:
                continue
            turn = assistant_turn(fam, case, case["calls"])
            st = xgrammar.get_model_structural_tag(fam.key, case["tools"], reasoning=mode)
            compiled = xgrammar.GrammarCompiler(xgrammar.TokenizerInfo([]), cache_enabled=False).compile_grammar(
                xgrammar.Grammar.from_structural_tag(st.model_dump_json()))
            assert accepts(grammar_for(fam, case["tools"]), turn), (fam.name, turn)
            assert _upstream_match(compiled, turn), (fam.name, "upstream rejects", turn)
            checked += 1
    assert checked > 0
