"""OpenAI chat requests -> grammar: ``tools``, ``tool_choice``, ``parallel_tool_calls`` and
``response_format`` of a Chat Completions request, for a named model family.

The result is a structural tag (:func:`request_structural_tag`), its EBNF
(:func:`request_to_ebnf`), or a compiled grammar (:func:`compile_request`); ``None`` means
the request constrains nothing (plain text, no tools, no reasoning block asked for).

How the fields combine:

============================  ====================================================================
request                       output allowed
============================  ====================================================================
no tools / ``"none"``         the ``response_format`` answer (text: unconstrained)
``"auto"`` + tools            free text with tool calls; with a JSON ``response_format``: either
                              the JSON answer or tool calls
``"required"``                one or more tool calls (one with ``parallel_tool_calls=false``)
named tool                    exactly that call
============================  ====================================================================

``response_format``: ``{"type": "text"}``; ``{"type": "json_object"}`` (any JSON object);
``{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`` (the schema is
enforced whether or not ``strict`` is set, as vLLM and SGLang do); ``{"type":
"structural_tag", ...}`` (current or legacy form, used as given).

Tools: ``strict: false`` (or no ``parameters``) leaves a tool's arguments unconstrained JSON,
as upstream xgrammar does; pass ``enforce_non_strict_tools=True`` to enforce their schema.
With ``reasoning`` the model's reasoning block comes first (see
:func:`xgrammar2.structural_tag.get_model_structural_tag`).
"""

from typing import Any, Dict, Optional, Sequence

from .errors import StructuralTagError, describe
from .templates import (
    THINK,
    _ALIASES,
    _reasoning_mode,
    any_text,
    const,
    get_model_structural_tag,
    optional,
    seq,
    tag,
    with_sep,
)

__all__ = ["request_structural_tag", "request_to_ebnf", "compile_request", "response_format_to_format"]

# model key -> (begin, end, free-text excludes, prompt ends with the opener, suffix)
_REASONING: Dict[str, tuple] = {
    "qwen_3": ("<think>", "</think>", THINK, True, "\n\n"),  # as get_model_structural_tag
    "qwen_3_coder": ("<think>", "</think>", THINK, True, "\n\n"),
    "exaone": ("<think>", "</think>", THINK, True, "\n\n"),
    "mimo": ("<think>", "</think>", THINK, False, ""),
    "glm_4_7": ("<think>", "</think>", THINK, True, ""),
    "mistral": ("[THINK]", "[/THINK]", ("[THINK]", "[/THINK]"), False, ""),
    "kimi": ("<think>", "</think>", THINK, False, ""),
    "deepseek_r1": ("<think>", "</think>", THINK, True, ""),
    "deepseek_v3_1": ("<think>", "</think>", THINK, True, ""),
    "deepseek_v3_2": ("<think>", "</think>", THINK, True, ""),
    "deepseek_v4": ("<think>", "</think>", THINK, True, ""),
    "deepseek_v4_1": ("<think>", "</think>", THINK, True, ""),
    "minimax": ("<think>", "</think>", THINK, True, "\n\n"),
    "minimax_m3": ("<mm:think>", "</mm:think>", ("<mm:think>", "</mm:think>"), True, ""),
    "cohere": ("<|START_THINKING|>", "<|END_THINKING|>", ("<|START_THINKING|>", "<|END_THINKING|>"), True, ""),
}


def response_format_to_format(response_format: Any) -> Optional[Dict[str, Any]]:
    """The format dict of an OpenAI ``response_format`` (None for text)."""
    rf = response_format
    dump = getattr(rf, "model_dump", None)
    if callable(dump):
        rf = dump(by_alias=True, exclude_none=True)
    if rf is None:
        return None
    if not isinstance(rf, dict):
        raise StructuralTagError("response_format", f"must be an object, got {describe(rf)}")
    t = rf.get("type")
    if t == "text":
        return None
    if t == "json_object":
        return {"type": "json_schema", "json_schema": {"type": "object"}}
    if t == "json_schema":
        js = rf.get("json_schema")
        if not isinstance(js, dict):
            raise StructuralTagError("response_format.json_schema", "must be an object")
        schema = js.get("schema", js.get("schema_", True))
        if not isinstance(schema, (dict, bool)):
            raise StructuralTagError("response_format.json_schema.schema",
                                     f"must be a JSON schema, got {describe(schema)}")
        return {"type": "json_schema", "json_schema": schema}
    if t == "structural_tag":
        if "format" in rf:
            return rf["format"]
        if "structures" in rf:
            from .nodes import read_structural_tag  # validates; legacy -> triggered tags

            read_structural_tag(rf)
            return {
                "type": "triggered_tags",
                "triggers": rf.get("triggers", []),
                "tags": [
                    {"type": "tag", "begin": s["begin"],
                     "content": {"type": "json_schema", "json_schema": s.get("schema", s.get("parameters", True))},
                     "end": s["end"]}
                    for s in rf["structures"]
                ],
            }
        raise StructuralTagError("response_format", "a structural_tag response format needs 'format'")
    raise StructuralTagError("response_format.type",
                             f'must be "text", "json_object", "json_schema" or "structural_tag", got {t!r}')


def _strictify(tools: Optional[Sequence[Any]]) -> Optional[list]:
    if tools is None:
        return None
    out = []
    for t in tools:
        dump = getattr(t, "model_dump", None)
        t = dump(by_alias=True, exclude_none=True) if callable(dump) else t
        if isinstance(t, dict) and isinstance(t.get("function"), dict) and t["function"].get("strict") is False:
            t = dict(t, function=dict(t["function"], strict=None))
        out.append(t)
    return out


def _reasoning_block(model: str, mode: str, prompt_ends_with_think: Optional[bool]) -> Optional[Dict[str, Any]]:
    spec = _REASONING.get(model)
    if mode == "disabled" or spec is None:
        return None
    begin, end, excl, in_prompt, suffix = spec
    if prompt_ends_with_think is not None:
        in_prompt = prompt_ends_with_think
    b = "" if (mode == "enabled" and in_prompt) else begin
    block = tag(b, any_text(excl), end)
    if suffix:
        block = seq(block, const(suffix))
    return optional(block) if mode == "auto" else block


def request_structural_tag(
    model: str,
    *,
    tools: Optional[Sequence[Any]] = None,
    tool_choice: Any = None,
    parallel_tool_calls: Optional[bool] = None,
    response_format: Any = None,
    reasoning: Any = False,
    prompt_ends_with_think: Optional[bool] = None,
    enforce_non_strict_tools: bool = False,
    max_whitespace_cnt: Optional[int] = None,
) -> Optional[Dict[str, Any]]:
    """The structural tag (a dict) for an OpenAI chat request to a ``model`` family, or None
    when nothing is constrained. ``tool_choice`` defaults to ``"auto"`` with tools (as the
    OpenAI API does); ``parallel_tool_calls`` to True."""
    key = _ALIASES.get(model, model)
    mode = _reasoning_mode(reasoning)
    parallel = True if parallel_tool_calls is None else parallel_tool_calls
    if enforce_non_strict_tools:
        tools = _strictify(tools)
    answer = response_format_to_format(response_format)
    has_tools = bool(tools) and tool_choice != "none"
    if key == "kimi_k3" and answer is not None:
        # Kimi-K3 writes its answer inside a response block, which this mapping does not
        # build around a structured answer yet.
        raise NotImplementedError("kimi_k3: a structured response_format is not supported by the "
                                  "request mapping yet")
    if key == "kimi_k3" and not has_tools:
        if mode == "disabled":
            return None
        # The blocks (reasoning, response, message end) are the whole turn.
        return get_model_structural_tag(key, [], "auto", reasoning=reasoning,
                                        prompt_ends_with_think=prompt_ends_with_think, as_dict=True)
    common = dict(reasoning=reasoning, parallel_tool_calls=parallel,
                  prompt_ends_with_think=prompt_ends_with_think,
                  max_whitespace_cnt=max_whitespace_cnt, as_dict=True)
    if has_tools:
        choice = "auto" if tool_choice is None else tool_choice
        if answer is None or choice != "auto":
            return get_model_structural_tag(key, tools, choice, **common)
        # auto + a structured answer: either the answer or tool calls.
        calls = get_model_structural_tag(key, tools, "required", **dict(common, reasoning=False))["format"]
        if key in ("harmony",):
            return _harmony_answer(answer, mode, calls)
        body = {"type": "or", "elements": [answer, calls]}
        pre = _reasoning_block(key, mode, prompt_ends_with_think)
        return {"type": "structural_tag", "format": seq(pre, body)}
    if key == "harmony":
        if answer is None and mode == "disabled":
            return None
        return _harmony_answer(answer, mode, None)
    pre = _reasoning_block(key, mode, prompt_ends_with_think)
    if answer is None:
        if pre is None:
            return None
        answer = any_text()
    return {"type": "structural_tag", "format": seq(pre, answer)}


def _harmony_answer(answer, mode, calls):
    SEP = "<|start|>assistant"
    final = tag("<|channel|>final<|message|>", answer or any_text(), ["<|end|>", "<|return|>"])
    body = final if calls is None else {"type": "or", "elements": [final, calls]}
    if mode == "disabled":
        return {"type": "structural_tag", "format": body}
    analysis = with_sep([tag("<|channel|>analysis<|message|>", any_text(), ["<|end|>", "<|return|>"])],
                        SEP, at_least_one=True)
    return {"type": "structural_tag", "format": seq(optional(seq(analysis, const(SEP))), body)}


def request_to_ebnf(model: str, **request: Any) -> Optional[str]:
    """EBNF text (start rule ``root``) for :func:`request_structural_tag`'s result, or None.
    Takes the same keyword arguments plus ``json_schema_to_ebnf`` (the JSON-schema converter
    to use)."""
    from .converter import structural_tag_to_ebnf

    conv = request.pop("json_schema_to_ebnf", None)
    st = request_structural_tag(model, **request)
    if st is None:
        return None
    return structural_tag_to_ebnf(st, json_schema_to_ebnf=conv)


def compile_request(compiler: Any, model: str, **request: Any) -> Any:
    """A compiled grammar for the request (None when nothing is constrained), compiled by
    ``compiler`` (an ``xgrammar2.GrammarCompiler``; its cache applies)."""
    st = request_structural_tag(model, **request)
    if st is None:
        return None
    return compiler.compile_structural_tag(st)
