"""Builtin structural tags: the structural tag of a model family's reasoning and tool-call
output, as upstream xgrammar 0.2.8's ``xgrammar.builtin_structural_tag`` builds it -- the
same functions, signatures, model keys and defaults, and the same structural tags (equal
``model_dump()``), so code written against ``xgrammar`` (vLLM's and SGLang's tool-call paths)
gets the same grammar from xgrammar2.

* :func:`get_model_structural_tag` (also ``xgrammar2.get_model_structural_tag``): a model key,
  OpenAI-style ``tools`` / ``tool_choice``, ``reasoning`` (default ``"enabled"``), ...
* :func:`normalize_tool_choice` (also ``xgrammar2.normalize_tool_choice``): tools and tool
  choice to ``(function tools, builtin tools, "auto" | "required" | "forced")``, the tools as
  :mod:`xgrammar2.openai_tool_call_schema` models.
* One builder per model format, ``get_<model>_structural_tag(tools, builtin_tools,
  tool_choice, reasoning, any_order, exclude_special_tokens, max_whitespace_cnt,
  parallel_tool_calls, **kwargs)``, taking the normalized tools and the simplified choice,
  and :func:`register_model_structural_tag` to add one.

``xgrammar2.structural_tag.get_model_structural_tag`` is xgrammar2's own variant of these
templates (more model keys and aliases, reasoning off by default, whitespace and header
spellings the real chat templates produce); see ``docs/structural-tags.md``.

Extensions (xgrammar2 only, keyword arguments that upstream does not have):
:func:`get_model_structural_tag` takes ``as_dict`` (return the plain dict) and
``prompt_ends_with_think`` (whether the generation prompt already holds the reasoning
opener: the default is each builder's, as upstream's); a model key upstream does not know
(``mistral``, aliases such as ``qwen``) falls back to xgrammar2's templates.

Needs pydantic (the results are :class:`xgrammar2.structural_tag.StructuralTag` models).
"""

from typing import Any, Callable, Dict, List, Literal, Optional, Sequence, Tuple, Union

from pydantic import TypeAdapter

from .openai_tool_call_schema import (
    AllowedToolChoiceParam,
    BuiltinToolChoiceParam,
    BuiltinToolParam,
    FunctionDefinition,
    FunctionToolParam,
    NamedToolChoiceParam,
    ToolChoiceOptionParam,
    ToolParam,
)
from .structural_tag.models import (  # noqa: F401  (re-exported, as upstream's module does)
    AnyTextFormat,
    ConstStringFormat,
    Format,
    JSONSchemaFormat,
    OptionalFormat,
    OrFormat,
    RegexFormat,
    SequenceFormat,
    StructuralTag,
    TagFormat,
    TagsWithSeparatorFormat,
    TriggeredTagsFormat,
)

__all__ = [
    "get_model_structural_tag",
    "get_builtin_structural_tag",
    "normalize_tool_choice",
    "register_model_structural_tag",
    "SimplifiedToolChoice",
    "BuiltinStructuralTagFn",
    "get_llama_structural_tag",
    "get_kimi_structural_tag",
    "get_kimi_k3_structural_tag",
    "get_deepseek_r1_structural_tag",
    "get_deepseek_v3_1_structural_tag",
    "get_deepseek_v3_2_structural_tag",
    "get_deepseek_v4_structural_tag",
    "get_deepseek_v4_1_structural_tag",
    "get_qwen_3_structural_tag",
    "get_qwen_3_5_structural_tag",
    "get_qwen_3_coder_structural_tag",
    "get_mimo_structural_tag",
    "get_harmony_structural_tag",
    "get_minimax_structural_tag",
    "get_minimax_m3_structural_tag",
    "get_glm_4_7_structural_tag",
    "get_cohere_structural_tag",
    "get_exaone_structural_tag",
]

SimplifiedToolChoice = Literal["auto", "required", "forced"]
ReasoningMode = Literal["enabled", "disabled", "auto"]
BuiltinStructuralTagFn = Callable[..., StructuralTag]

_TOOL_ADAPTER = TypeAdapter(ToolParam)
_TOOL_CHOICE_ADAPTER = TypeAdapter(ToolChoiceOptionParam)
_structural_tag_registry: Dict[str, BuiltinStructuralTagFn] = {}

Fmt = Dict[str, Any]
_THINK = ["<think>", "</think>"]


# ---- tools and tool choice --------------------------------------------------------------


def normalize_tool_choice(
    tools: Optional[List[Union[ToolParam, dict]]] = None,
    tool_choice: Union[ToolChoiceOptionParam, dict, None] = "auto",
) -> Tuple[List[FunctionToolParam], List[BuiltinToolParam], SimplifiedToolChoice]:
    """``(function tools, builtin tools, simplified choice)`` for OpenAI-style ``tools`` and
    ``tool_choice``, ready for a model builder (as upstream xgrammar's function):

    * ``"auto"`` / None: every tool, choice ``"auto"``; ``"none"``: no tool, ``"auto"``;
    * ``"required"``: every tool, ``"required"`` (at least one tool must remain);
    * ``{"type": "function", "function": {"name": N}}``: only N, ``"forced"``;
    * ``{"type": <builtin type>}``: the one builtin tool of that type, ``"forced"``;
    * ``{"type": "allowed_tools", "allowed_tools": {"mode", "tools"}}``: the listed tools
      (functions by name, builtin tools by type), choice ``mode``.

    Tools are :class:`FunctionToolParam` / :class:`BuiltinToolParam` models (dicts are
    validated into them). Raises ValueError (pydantic's ValidationError is one) for a bad
    tool or choice, a tool named but missing, or a required / forced choice without a tool.
    """
    if tools is None:
        tools = []
    if not isinstance(tools, list):
        raise ValueError("The 'tools' argument must be a list.")
    read = [t if isinstance(t, (FunctionToolParam, BuiltinToolParam)) else _TOOL_ADAPTER.validate_python(t)
            for t in tools]
    functions = [t for t in read if isinstance(t, FunctionToolParam)]
    builtins = [t for t in read if isinstance(t, BuiltinToolParam)]

    choice = "auto" if tool_choice is None else _TOOL_CHOICE_ADAPTER.validate_python(tool_choice)
    mode: SimplifiedToolChoice
    if isinstance(choice, AllowedToolChoiceParam):
        functions, builtins = _filter_allowed(functions, builtins, choice)
        mode = choice.allowed_tools.mode
    elif isinstance(choice, NamedToolChoiceParam):
        name = choice.function.name
        functions = [t for t in functions if t.function.name == name]
        if not functions:
            raise ValueError(f"The tool with name '{name}' is not found in the tools list.")
        builtins, mode = [], "forced"
    elif isinstance(choice, BuiltinToolChoiceParam):
        builtins = [t for t in builtins if t.type == choice.type]
        if len(builtins) != 1:
            raise ValueError("Builtin tool choice must match exactly one builtin tool, "
                             f"got {len(builtins)} matches.")
        functions, mode = [], "forced"
    elif choice == "none":
        functions, builtins, mode = [], [], "auto"
    else:
        mode = choice
    if mode == "required" and not functions and not builtins:
        raise ValueError("The 'tools' list is empty, which is not allowed when 'tool_choice' is 'required'.")
    if mode == "forced" and len(functions) + len(builtins) != 1:
        raise ValueError("Forced tool choice must resolve to exactly one tool.")
    return functions, builtins, mode


def _filter_allowed(functions: List[FunctionToolParam], builtins: List[BuiltinToolParam],
                    choice: AllowedToolChoiceParam) -> Tuple[List[FunctionToolParam], List[BuiltinToolParam]]:
    names, types = set(), set()
    for ref in choice.allowed_tools.tools:
        if ref.type == "function":
            if ref.function is None:
                raise ValueError("Allowed function tool references must include 'function'.")
            names.add(ref.function.name)
        else:
            types.add(ref.type)
    missing = names - {t.function.name for t in functions}
    if missing:
        raise ValueError(f"Allowed function tools are not found in the tools list: {missing}.")
    kept_builtins = [t for t in builtins if t.type in types]
    missing = types - {t.type for t in kept_builtins}
    if missing:
        raise ValueError(f"Allowed builtin tools are not found in the tools list: {missing}.")
    return [t for t in functions if t.function.name in names], kept_builtins


def _function_tools(tools: Optional[Sequence[Any]]) -> List[FunctionToolParam]:
    """The builders' ``tools`` as models (dicts are validated; an extension over upstream,
    whose builders need the models)."""
    return [t if isinstance(t, FunctionToolParam) else FunctionToolParam.model_validate(t)
            for t in (tools or [])]


def _builtin_tools(tools: Optional[Sequence[Any]]) -> List[BuiltinToolParam]:
    return [t if isinstance(t, BuiltinToolParam) else BuiltinToolParam.model_validate(t)
            for t in (tools or [])]


def _parameters(fn: Union[FunctionDefinition, BuiltinToolParam]) -> Union[Dict[str, Any], bool]:
    """The schema that constrains a tool's arguments: ``True`` (any JSON) without
    ``parameters`` or for a non-strict function."""
    if isinstance(fn, FunctionDefinition) and fn.strict is False:
        return True
    return True if fn.parameters is None else fn.parameters


def _builtin_name(tool: BuiltinToolParam) -> str:
    return tool.name or tool.type


# ---- format constructors (dicts, validated once at the end) ------------------------------


def _const(value: str) -> Fmt:
    return {"type": "const_string", "value": value}


def _any_text(excludes: Sequence[str] = ()) -> Fmt:
    return {"type": "any_text", "excludes": list(excludes)}


def _regex(pattern: str) -> Fmt:
    return {"type": "regex", "pattern": pattern}


def _seq(*elements: Fmt) -> Fmt:
    return {"type": "sequence", "elements": list(elements)}


def _or(*elements: Fmt) -> Fmt:
    return {"type": "or", "elements": list(elements)}


def _optional(content: Fmt) -> Fmt:
    return {"type": "optional", "content": content}


def _tag(begin: str, content: Fmt, end: Union[str, List[str]]) -> Fmt:
    return {"type": "tag", "begin": begin, "content": content, "end": end}


def _triggered(triggers: Sequence[str], tags: Sequence[Fmt], excludes: Sequence[str],
               at_least_one: bool = False, stop_after_first: bool = False) -> Fmt:
    return {"type": "triggered_tags", "triggers": list(triggers), "tags": list(tags),
            "excludes": list(excludes), "at_least_one": at_least_one,
            "stop_after_first": stop_after_first}


def _with_sep(tags: Sequence[Fmt], separator: str, at_least_one: bool = False,
              stop_after_first: bool = False) -> Fmt:
    return {"type": "tags_with_separator", "tags": list(tags), "separator": separator,
            "at_least_one": at_least_one, "stop_after_first": stop_after_first}


class _Opts:
    """The options every builder passes to its argument formats and free text."""

    def __init__(self, any_order: bool, exclude_special_tokens: bool,
                 max_whitespace_cnt: Optional[int], parallel_tool_calls: bool, kwargs: Dict[str, Any]):
        self.any_order = any_order
        self.exclude = exclude_special_tokens
        self.max_ws = max_whitespace_cnt
        self.parallel = parallel_tool_calls
        # xgrammar2 extension: whether the generation prompt already holds the reasoning
        # opener (None: the builder's default, as upstream).
        self.prompt_ends_with_think = kwargs.get("prompt_ends_with_think")

    def args(self, fn: Union[FunctionDefinition, BuiltinToolParam], style: str = "json",
             excludes: Optional[List[str]] = None) -> Fmt:
        f: Fmt = {"type": "json_schema", "json_schema": _parameters(fn), "style": style,
                  "any_order": self.any_order, "max_whitespace_cnt": self.max_ws}
        if excludes is not None:
            f["excludes"] = excludes
        return f

    def excl(self, tokens: Sequence[str]) -> List[str]:
        return list(tokens) if self.exclude else []

    def reasoning(self, mode: str, begin: str, end: str, excludes: Sequence[str],
                  prompt_ends_with_think: bool = True, suffix: str = "") -> Optional[Fmt]:
        """The leading reasoning block: ``enabled`` continues the opener the prompt ends
        with (``begin`` left out), ``auto`` makes a whole block optional, ``disabled`` has
        none."""
        if mode not in ("enabled", "disabled", "auto"):
            raise ValueError("The 'reasoning_mode' argument must be one of: 'enabled', 'disabled', 'auto'.")
        if mode == "disabled":
            return None
        if self.prompt_ends_with_think is not None:
            prompt_ends_with_think = self.prompt_ends_with_think
        block = _tag("" if mode == "enabled" and prompt_ends_with_think else begin,
                     _any_text(self.excl(excludes)), end)
        if suffix:
            block = _seq(block, _const(suffix))
        return _optional(block) if mode == "auto" else block


def _finish(fmt: Fmt) -> StructuralTag:
    return StructuralTag.model_validate({"type": "structural_tag", "format": fmt})


def _assemble(prefix: Optional[Fmt], suffix: Fmt) -> StructuralTag:
    return _finish(suffix if prefix is None else _seq(prefix, suffix))


def _forced_tool(tools: List[FunctionToolParam]) -> FunctionDefinition:
    if not tools:
        raise ValueError("Forced tool choice must resolve to exactly one tool.")
    return tools[0].function


def _required(tags: List[Fmt]) -> None:
    if not tags:
        raise ValueError("Required tool choice needs at least one function tool.")


def _flat(o: _Opts, choice: str, tools: List[FunctionToolParam], make_tag: Callable[[FunctionDefinition], Fmt],
          trigger: str, text_excludes: Sequence[str], no_tool_excludes: Sequence[str]) -> Fmt:
    """Calls written one after another, each starting with ``trigger`` (Llama, Qwen3,
    Qwen3-Coder, EXAONE, GLM, MiMo)."""
    if choice == "forced":
        return make_tag(_forced_tool(tools))
    tags = [make_tag(t.function) for t in tools]
    if choice == "required":
        _required(tags)
    elif not tags:
        return _any_text(o.excl(no_tool_excludes))
    return _triggered([trigger], tags, o.excl(text_excludes), at_least_one=choice == "required",
                      stop_after_first=not o.parallel)


def _calls_section(o: _Opts, choice: str, tags: List[Fmt], begin: str, end: str, separator: str,
                   trigger: str, text_excludes: Sequence[str]) -> Fmt:
    """``auto``: free text in which ``trigger`` opens one section of calls."""
    if not tags:
        return _any_text(o.excl(text_excludes))
    inner = _with_sep(tags, separator, at_least_one=True, stop_after_first=not o.parallel)
    return _triggered([trigger], [_tag(begin, inner, end)], o.excl(text_excludes),
                      stop_after_first=not o.parallel)


# ---- registry ---------------------------------------------------------------------------


def register_model_structural_tag(name: str):
    """Registers a builder under the model key ``name`` for :func:`get_model_structural_tag`
    (a decorator). The builder is called as ``builder(function_tools, builtin_tools,
    tool_choice, reasoning, any_order=..., exclude_special_tokens=..., max_whitespace_cnt=...,
    parallel_tool_calls=...)`` with the output of :func:`normalize_tool_choice` and returns a
    :class:`StructuralTag`."""

    def decorator(func):
        _structural_tag_registry[name] = func
        return func

    return decorator


# ---- the builders -------------------------------------------------------------------------


@register_model_structural_tag("llama")
def get_llama_structural_tag(
    tools: Optional[List[FunctionToolParam]] = None,
    builtin_tools: Optional[List[BuiltinToolParam]] = None,
    tool_choice: Literal["auto", "required", "forced"] = "auto",
    reasoning: Literal["enabled", "disabled", "auto"] = "enabled",
    any_order: bool = False,
    exclude_special_tokens: bool = True,
    max_whitespace_cnt: Optional[int] = None,
    parallel_tool_calls: bool = True,
    **kwargs: Any,
) -> StructuralTag:
    """Llama 3.x (model key ``"llama"``): ``{"name": "NAME", "parameters": {...}}`` calls in
    free text (trigger ``{"name": ``). No reasoning block (``reasoning`` is ignored)."""
    o = _Opts(any_order, exclude_special_tokens, max_whitespace_cnt, parallel_tool_calls, kwargs)
    tools = _function_tools(tools)

    def call(fn: FunctionDefinition) -> Fmt:
        return _tag('{"name": "' + fn.name + '", "parameters": ', o.args(fn), "}")

    return _finish(_flat(o, tool_choice, tools, call, '{"name": ', _THINK, _THINK))


@register_model_structural_tag("kimi")
def get_kimi_structural_tag(
    tools: Optional[List[FunctionToolParam]] = None,
    builtin_tools: Optional[List[BuiltinToolParam]] = None,
    tool_choice: Literal["auto", "required", "forced"] = "auto",
    reasoning: Literal["enabled", "disabled", "auto"] = "enabled",
    any_order: bool = False,
    exclude_special_tokens: bool = True,
    max_whitespace_cnt: Optional[int] = None,
    parallel_tool_calls: bool = True,
    **kwargs: Any,
) -> StructuralTag:
    """Kimi-K2 / K2.5 (``"kimi"``): ``<|tool_calls_section_begin|><|tool_call_begin|>
    functions.NAME:IDX<|tool_call_argument_begin|>{...}<|tool_call_end|>...
    <|tool_calls_section_end|>`` after an optional ``<think>...</think>`` block (which the
    model opens itself)."""
    o = _Opts(any_order, exclude_special_tokens, max_whitespace_cnt, parallel_tool_calls, kwargs)
    tools = _function_tools(tools)
    call_begin, sb, se = "<|tool_call_begin|>", "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"

    def call(fn: FunctionDefinition) -> Fmt:
        return _tag(call_begin + "functions." + fn.name + ":",
                    _seq(_regex(r"\d+"), _const("<|tool_call_argument_begin|>"), o.args(fn)),
                    "<|tool_call_end|>")

    if tool_choice == "forced":
        suffix = _seq(_const(sb), call(_forced_tool(tools)), _const(se))
    else:
        tags = [call(t.function) for t in tools]
        if tool_choice == "required":
            _required(tags)
            suffix = _seq(_const(sb), _with_sep(tags, "", True, not o.parallel), _const(se))
        elif tags:
            suffix = _calls_section(o, "auto", tags, sb, se, "", sb, _THINK + [call_begin])
        else:
            suffix = _any_text(o.excl(_THINK))
    # The model writes <think> itself; "enabled" keeps accepting it inside the block.
    prefix = o.reasoning(reasoning, "<think>", "</think>", _THINK if reasoning == "auto" else [])
    return _assemble(prefix, suffix)


@register_model_structural_tag("kimi_k3")
def get_kimi_k3_structural_tag(
    tools: Optional[List[FunctionToolParam]] = None,
    builtin_tools: Optional[List[BuiltinToolParam]] = None,
    tool_choice: Literal["auto", "required", "forced"] = "auto",
    reasoning: Literal["enabled", "disabled", "auto"] = "enabled",
    any_order: bool = False,
    exclude_special_tokens: bool = True,
    max_whitespace_cnt: Optional[int] = None,
    parallel_tool_calls: bool = True,
    **kwargs: Any,
) -> StructuralTag:
    """Kimi-K3 (``"kimi_k3"``): blocks delimited by ``<|open|>NAME<|sep|>`` and
    ``<|close|>NAME<|sep|>``, back to back::

        <|open|>think<|sep|>...<|close|>think<|sep|>
        <|open|>response<|sep|>...<|close|>response<|sep|>
        <|open|>tools<|sep|><|open|>call tool="NAME" index="1"<|sep|>
          <|open|>argument key="KEY" type="TYPE"<|sep|>VALUE<|close|>argument<|sep|>...
        <|close|>call<|sep|>...<|close|>tools<|sep|><|close|>message<|sep|>

    The generation prompt ends with the first block's opener (``think`` with reasoning,
    ``response`` without), so the output starts inside that block. Arguments use the
    ``kimi_k3_xml`` style; with ``exclude_special_tokens`` the markers are also kept out of
    string values and property names."""
    o = _Opts(any_order, exclude_special_tokens, max_whitespace_cnt, parallel_tool_calls, kwargs)
    tools = _function_tools(tools)
    OPEN, CLOSE, SEP = "<|open|>", "<|close|>", "<|sep|>"

    def call(fn: FunctionDefinition) -> Fmt:
        return _tag(f'{OPEN}call tool="{fn.name}" index="',
                    _seq(_regex(r"\d+"), _const(f'"{SEP}'),
                         o.args(fn, "kimi_k3_xml", o.excl([OPEN, CLOSE, SEP]))),
                    f"{CLOSE}call{SEP}")

    tools_begin, tools_end = f"{OPEN}tools{SEP}", f"{CLOSE}tools{SEP}"
    calls: Optional[Fmt] = None
    if tool_choice == "forced":
        calls = _seq(_const(tools_begin), call(_forced_tool(tools)), _const(tools_end))
    else:
        tags = [call(t.function) for t in tools]
        if tool_choice == "required":
            _required(tags)
            calls = _seq(_const(tools_begin), _with_sep(tags, "", True, not o.parallel), _const(tools_end))
        elif tags:
            calls = _optional(_tag(tools_begin, _with_sep(tags, "", True, not o.parallel), tools_end))
    markers = [OPEN, CLOSE]
    elements = []
    prefix = o.reasoning(reasoning, f"{OPEN}think{SEP}", f"{CLOSE}think{SEP}", markers)
    if prefix is not None:
        elements.append(prefix)
    elements.append(_tag("" if reasoning == "disabled" else f"{OPEN}response{SEP}",
                         _any_text(o.excl(markers)), f"{CLOSE}response{SEP}"))
    if calls is not None:
        elements.append(calls)
    elements.append(_const(f"{CLOSE}message{SEP}"))
    return _finish(_seq(*elements))


def _deepseek_json(name: str, sep_name: bool):
    """DeepSeek-R1 (``function<｜tool▁sep｜>NAME\\n```json\\n...\\n````) and V3.1
    (``NAME<｜tool▁sep｜>...``) calls inside ``<｜tool▁calls▁begin｜>...<｜tool▁calls▁end｜>``."""
    SB, SE = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
    CB, CE, TS = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"

    def build(tools, builtin_tools, tool_choice, reasoning, any_order, exclude_special_tokens,
              max_whitespace_cnt, parallel_tool_calls, kwargs) -> StructuralTag:
        o = _Opts(any_order, exclude_special_tokens, max_whitespace_cnt, parallel_tool_calls, kwargs)
        tools = _function_tools(tools)
        if sep_name:  # R1
            head = lambda fn: f"{CB}function{TS}{fn.name}\n```json\n"  # noqa: E731
            tail, separator = f"\n```{CE}", "\n"
        else:
            head = lambda fn: f"{CB}{fn.name}{TS}"  # noqa: E731
            tail, separator = CE, ""
        if tool_choice == "forced":
            fn = _forced_tool(tools)
            suffix = _tag(SB + head(fn), o.args(fn), tail + SE)
        else:
            tags = [_tag(head(t.function), o.args(t.function), tail) for t in tools]
            if tool_choice == "required":
                _required(tags)
                suffix = _tag(SB, _with_sep(tags, separator, True, not o.parallel), SE)
            else:
                suffix = _calls_section(o, "auto", tags, SB, SE, separator, SB, _THINK)
        return _assemble(o.reasoning(reasoning, "<think>", "</think>", _THINK), suffix)

    build.__name__ = name
    return build


_deepseek_r1 = _deepseek_json("_deepseek_r1", True)
_deepseek_v3_1 = _deepseek_json("_deepseek_v3_1", False)


@register_model_structural_tag("deepseek_r1")
def get_deepseek_r1_structural_tag(
    tools: Optional[List[FunctionToolParam]] = None,
    builtin_tools: Optional[List[BuiltinToolParam]] = None,
    tool_choice: Literal["auto", "required", "forced"] = "auto",
    reasoning: Literal["enabled", "disabled", "auto"] = "enabled",
    any_order: bool = False,
    exclude_special_tokens: bool = True,
    max_whitespace_cnt: Optional[int] = None,
    parallel_tool_calls: bool = True,
    **kwargs: Any,
) -> StructuralTag:
    """DeepSeek-R1 (``"deepseek_r1"``): ``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function
    <｜tool▁sep｜>NAME\\n```json\\n{...}\\n```<｜tool▁call▁end｜>`` calls (separated by
    ``\\n``) ``<｜tool▁calls▁end｜>``, after the ``<think>`` block the prompt opens."""
    return _deepseek_r1(tools, builtin_tools, tool_choice, reasoning, any_order,
                        exclude_special_tokens, max_whitespace_cnt, parallel_tool_calls, kwargs)


@register_model_structural_tag("deepseek_v3_1")
def get_deepseek_v3_1_structural_tag(
    tools: Optional[List[FunctionToolParam]] = None,
    builtin_tools: Optional[List[BuiltinToolParam]] = None,
    tool_choice: Literal["auto", "required", "forced"] = "auto",
    reasoning: Literal["enabled", "disabled", "auto"] = "enabled",
    any_order: bool = False,
    exclude_special_tokens: bool = True,
    max_whitespace_cnt: Optional[int] = None,
    parallel_tool_calls: bool = True,
    **kwargs: Any,
) -> StructuralTag:
    """DeepSeek-V3.1 / V3.2-Exp (``"deepseek_v3_1"``): ``<｜tool▁calls▁begin｜>
    <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>``."""
    return _deepseek_v3_1(tools, builtin_tools, tool_choice, reasoning, any_order,
                          exclude_special_tokens, max_whitespace_cnt, parallel_tool_calls, kwargs)


@register_model_structural_tag("qwen_3_5")
@register_model_structural_tag("qwen_3_coder")
def get_qwen_3_5_structural_tag(
    tools: Optional[List[FunctionToolParam]] = None,
    builtin_tools: Optional[List[BuiltinToolParam]] = None,
    tool_choice: Literal["auto", "required", "forced"] = "auto",
    reasoning: Literal["enabled", "disabled", "auto"] = "enabled",
    any_order: bool = False,
    exclude_special_tokens: bool = True,
    max_whitespace_cnt: Optional[int] = None,
    parallel_tool_calls: bool = True,
    **kwargs: Any,
) -> StructuralTag:
    """Qwen3.5 / Qwen3.6 / Qwen3-Coder (``"qwen_3_5"``, ``"qwen_3_coder"``):
    ``<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n...
    </function>\\n</tool_call>`` (``qwen_xml`` arguments), after ``...</think>\\n\\n``."""
    o = _Opts(any_order, exclude_special_tokens, max_whitespace_cnt, parallel_tool_calls, kwargs)
    tools = _function_tools(tools)

    def call(fn: FunctionDefinition) -> Fmt:
        return _tag(f"<tool_call>\n<function={fn.name}>\n", o.args(fn, "qwen_xml"),
                    "\n</function>\n</tool_call>")

    suffix = _flat(o, tool_choice, tools, call, "<tool_call>\n<function=", _THINK, _THINK)
    return _assemble(o.reasoning(reasoning, "<think>", "</think>", _THINK, suffix="\n\n"), suffix)


get_qwen_3_coder_structural_tag = get_qwen_3_5_structural_tag
"""Alias of :func:`get_qwen_3_5_structural_tag` (deprecated upstream)."""


@register_model_structural_tag("mimo")
def get_mimo_structural_tag(
    tools: Optional[List[FunctionToolParam]] = None,
    builtin_tools: Optional[List[BuiltinToolParam]] = None,
    tool_choice: Literal["auto", "required", "forced"] = "auto",
    reasoning: Literal["enabled", "disabled", "auto"] = "enabled",
    any_order: bool = False,
    exclude_special_tokens: bool = True,
    max_whitespace_cnt: Optional[int] = None,
    parallel_tool_calls: bool = True,
    **kwargs: Any,
) -> StructuralTag:
    """MiMo-V2.6 (``"mimo"``): ``<tool_call><function=NAME><parameter=KEY>VALUE</parameter>
    </function></tool_call>`` (``qwen_xml`` arguments, no newlines); with reasoning the model
    writes the whole ``<think>...</think>`` block."""
    if builtin_tools:
        raise ValueError("MiMo does not support builtin tools.")
    if tool_choice not in ("auto", "required", "forced"):
        raise ValueError(f"Unsupported tool choice: {tool_choice}")
    o = _Opts(any_order, exclude_special_tokens, max_whitespace_cnt, parallel_tool_calls, kwargs)
    tools = _function_tools(tools)
    text_excl = ["<think>", "</think>", "</tool_call>", "<function="]
    reasoning_excl = ["<tool_call>"] + text_excl

    def call(fn: FunctionDefinition) -> Fmt:
        return _tag(f"<tool_call><function={fn.name}>", o.args(fn, "qwen_xml"), "</function></tool_call>")

    suffix = _flat(o, tool_choice, tools, call, "<tool_call>", text_excl, reasoning_excl)
    prefix = o.reasoning(reasoning, "<think>", "</think>", reasoning_excl, prompt_ends_with_think=False)
    return _assemble(prefix, suffix)


@register_model_structural_tag("qwen_3")
def get_qwen_3_structural_tag(
    tools: Optional[List[FunctionToolParam]] = None,
    builtin_tools: Optional[List[BuiltinToolParam]] = None,
    tool_choice: Literal["auto", "required", "forced"] = "auto",
    reasoning: Literal["enabled", "disabled", "auto"] = "enabled",
    any_order: bool = False,
    exclude_special_tokens: bool = True,
    max_whitespace_cnt: Optional[int] = None,
    parallel_tool_calls: bool = True,
    **kwargs: Any,
) -> StructuralTag:
    """Qwen3 / Qwen3-Next (``"qwen_3"``): ``<tool_call>\\n{"name": "NAME", "arguments":
    {...}}\\n</tool_call>`` after ``...</think>\\n\\n`` (the prompt opens the block)."""
    o = _Opts(any_order, exclude_special_tokens, max_whitespace_cnt, parallel_tool_calls, kwargs)
    tools = _function_tools(tools)

    def call(fn: FunctionDefinition) -> Fmt:
        return _tag('<tool_call>\n{"name": "' + fn.name + '", "arguments": ', o.args(fn), "}\n</tool_call>")

    suffix = _flat(o, tool_choice, tools, call, "<tool_call>", _THINK, _THINK)
    return _assemble(o.reasoning(reasoning, "<think>", "</think>", _THINK, suffix="\n\n"), suffix)


@register_model_structural_tag("harmony")
def get_harmony_structural_tag(
    tools: Optional[List[FunctionToolParam]] = None,
    builtin_tools: Optional[List[BuiltinToolParam]] = None,
    tool_choice: Literal["auto", "required", "forced"] = "auto",
    reasoning: Literal["enabled", "disabled", "auto"] = "enabled",
    any_order: bool = False,
    exclude_special_tokens: bool = True,
    max_whitespace_cnt: Optional[int] = None,
    parallel_tool_calls: bool = True,
    **kwargs: Any,
) -> StructuralTag:
    """gpt-oss, OpenAI Harmony format (``"harmony"``): messages separated by
    ``<|start|>assistant``: function calls ``<|channel|>commentary to=functions.NAME
    <|constrain|>json<|message|>{...}<|call|>`` (and two other header spellings), builtin
    tool calls ``<|channel|>commentary to=NAME code<|message|>{...}<|call|>``, the final
    answer ``<|channel|>final<|message|>...<|end|>`` (``auto`` only) and, unless reasoning is
    disabled, analysis messages ``<|channel|>analysis<|message|>...<|end|>``."""
    o = _Opts(any_order, exclude_special_tokens, max_whitespace_cnt, parallel_tool_calls, kwargs)
    tools, builtin_tools = _function_tools(tools), _builtin_tools(builtin_tools)
    CALL, END, SEP = "<|call|>", ["<|end|>", "<|return|>"], "<|start|>assistant"

    def function_tags(fn: FunctionDefinition) -> List[Fmt]:
        heads = [f"<|channel|>commentary to=functions.{fn.name}<|constrain|>json<|message|>",
                 f" to=functions.{fn.name}<|channel|>commentary <|constrain|>json<|message|>",
                 f" to=functions.{fn.name}<|channel|>commentary json<|message|>"]
        return [_tag(h, o.args(fn), CALL) for h in heads]

    def builtin_tags(tool: BuiltinToolParam) -> List[Fmt]:
        name = _builtin_name(tool)
        heads = [f"<|channel|>commentary to={name} code<|message|>",
                 f" to={name}<|channel|>commentary code<|message|>"]
        return [_tag(h, o.args(tool), CALL) for h in heads]

    tags: List[Fmt] = []
    if tool_choice == "auto":
        for t in tools:
            tags += function_tags(t.function)
        for b in builtin_tools:
            tags += builtin_tags(b)
        tags.append(_tag("<|channel|>final<|message|>", _any_text(), END))
    elif tool_choice == "forced":
        if builtin_tools:
            tags += builtin_tags(builtin_tools[0])
        elif tools:
            tags += function_tags(tools[0].function)
        else:
            raise ValueError("Forced tool choice must resolve to exactly one tool.")
    elif tool_choice == "required":
        for b in builtin_tools:
            tags += builtin_tags(b)
        for t in tools:
            tags += function_tags(t.function)
        if not tags:
            raise ValueError("Required tool choice needs at least one tool.")
    if reasoning != "disabled":
        tags.append(_tag("<|channel|>analysis<|message|>", _any_text(), END))

    calls = [t for t in tags if t["end"] == CALL]
    messages = [t for t in tags if t["end"] != CALL]
    if o.parallel or not calls:
        return _finish(_with_sep(tags, SEP))
    # At most one call, which ends the turn; any other messages may come before it.
    one_call = _with_sep(calls, SEP, at_least_one=True, stop_after_first=True)
    if not messages:
        return _finish(_optional(one_call))
    return _finish(_or(_with_sep(messages, SEP), one_call,
                       _seq(_with_sep(messages, SEP, at_least_one=True), _const(SEP), one_call)))


def _dsml(name: str, calls: str, invoke: str, style: str, no_tool_trigger_excluded: bool):
    """DeepSeek-V3.2 / V4 / V4.1: ``<｜DSML｜CALLS>\\n<｜DSML｜INVOKE name="NAME">\\n
    ...parameters...</｜DSML｜INVOKE>\\n...</｜DSML｜CALLS>``."""
    D = "｜DSML｜"
    SB, SE, TRIGGER = f"<{D}{calls}>\n", f"</{D}{calls}>", f"<{D}{calls}>"

    def build(tools, builtin_tools, tool_choice, reasoning, any_order, exclude_special_tokens,
              max_whitespace_cnt, parallel_tool_calls, kwargs) -> StructuralTag:
        o = _Opts(any_order, exclude_special_tokens, max_whitespace_cnt, parallel_tool_calls, kwargs)
        tools = _function_tools(tools)

        def call(fn: FunctionDefinition) -> Fmt:
            return _tag(f'<{D}{invoke} name="{fn.name}">\n', o.args(fn, style), f"</{D}{invoke}>\n")

        if tool_choice == "forced":
            suffix = _seq(_const("\n\n" + SB), call(_forced_tool(tools)), _const(SE))
        else:
            tags = [call(t.function) for t in tools]
            if tool_choice == "required":
                _required(tags)
                suffix = _seq(_const("\n\n" + SB), _with_sep(tags, "", True, not o.parallel), _const(SE))
            elif tags:
                suffix = _calls_section(o, "auto", tags, SB, SE, "", TRIGGER, _THINK)
            else:
                # V4.1: with no tool, a calls block must not pass as text either.
                suffix = _any_text(o.excl(_THINK) + ([TRIGGER] if no_tool_trigger_excluded else []))
        return _assemble(o.reasoning(reasoning, "<think>", "</think>", _THINK), suffix)

    build.__name__ = name
    return build


_deepseek_v3_2 = _dsml("_deepseek_v3_2", "function_calls", "invoke", "deepseek_xml", False)
_deepseek_v4 = _dsml("_deepseek_v4", "tool_calls", "invoke", "deepseek_xml", False)
_deepseek_v4_1 = _dsml("_deepseek_v4_1", " calls", " invoke", "deepseek_v4_1_xml", True)


@register_model_structural_tag("deepseek_v3_2")
def get_deepseek_v3_2_structural_tag(
    tools: Optional[List[FunctionToolParam]] = None,
    builtin_tools: Optional[List[BuiltinToolParam]] = None,
    tool_choice: Literal["auto", "required", "forced"] = "auto",
    reasoning: Literal["enabled", "disabled", "auto"] = "enabled",
    any_order: bool = False,
    exclude_special_tokens: bool = True,
    max_whitespace_cnt: Optional[int] = None,
    parallel_tool_calls: bool = True,
    **kwargs: Any,
) -> StructuralTag:
    """DeepSeek-V3.2 (``"deepseek_v3_2"``): ``<｜DSML｜function_calls>\\n<｜DSML｜invoke
    name="NAME">\\n<｜DSML｜parameter name="KEY" string="true|false">VALUE
    </｜DSML｜parameter>...</｜DSML｜invoke>\\n...</｜DSML｜function_calls>``
    (``deepseek_xml`` arguments); a required or forced call starts with ``\\n\\n``."""
    return _deepseek_v3_2(tools, builtin_tools, tool_choice, reasoning, any_order,
                          exclude_special_tokens, max_whitespace_cnt, parallel_tool_calls, kwargs)


@register_model_structural_tag("minimax")
def get_minimax_structural_tag(
    tools: Optional[List[FunctionToolParam]] = None,
    builtin_tools: Optional[List[BuiltinToolParam]] = None,
    tool_choice: Literal["auto", "required", "forced"] = "auto",
    reasoning: Literal["enabled", "disabled", "auto"] = "enabled",
    any_order: bool = False,
    exclude_special_tokens: bool = True,
    max_whitespace_cnt: Optional[int] = None,
    parallel_tool_calls: bool = True,
    **kwargs: Any,
) -> StructuralTag:
    """MiniMax-M2.5 / M2.7 (``"minimax"``): ``<minimax:tool_call>\\n<invoke name="NAME">\\n
    <parameter name="KEY">VALUE</parameter>...</invoke>\\n...</minimax:tool_call>``
    (``minimax_xml`` arguments) after ``...</think>\\n\\n``; with reasoning disabled the
    output starts with an empty block's end, ``\\n</think>\\n\\n\\n\\n``."""
    o = _Opts(any_order, exclude_special_tokens, max_whitespace_cnt, parallel_tool_calls, kwargs)
    tools = _function_tools(tools)
    SB, SE, TRIGGER = "<minimax:tool_call>\n", "</minimax:tool_call>", "<minimax:tool_call>"

    def call(fn: FunctionDefinition) -> Fmt:
        return _tag(f'<invoke name="{fn.name}">\n', o.args(fn, "minimax_xml"), "</invoke>\n")

    if tool_choice == "forced":
        suffix = _seq(_const("\n" + SB), call(_forced_tool(tools)), _const(SE))
    else:
        tags = [call(t.function) for t in tools]
        if tool_choice == "required":
            _required(tags)
            suffix = _seq(_const("\n" + SB), _with_sep(tags, "", True, not o.parallel), _const(SE))
        else:
            suffix = _calls_section(o, "auto", tags, SB, SE, "", TRIGGER, _THINK)
    if reasoning == "disabled":
        return _finish(_seq(_const("\n</think>\n\n"), _const("\n\n"), suffix))
    prefix = o.reasoning(reasoning, "<think>", "</think>", [] if reasoning == "enabled" else _THINK,
                         suffix="\n\n")
    return _assemble(prefix, suffix)


@register_model_structural_tag("minimax_m3")
def get_minimax_m3_structural_tag(
    tools: Optional[List[FunctionToolParam]] = None,
    builtin_tools: Optional[List[BuiltinToolParam]] = None,
    tool_choice: Literal["auto", "required", "forced"] = "auto",
    reasoning: Literal["enabled", "disabled", "auto"] = "auto",
    any_order: bool = False,
    exclude_special_tokens: bool = True,
    max_whitespace_cnt: Optional[int] = None,
    parallel_tool_calls: bool = True,
    **kwargs: Any,
) -> StructuralTag:
    """MiniMax-M3 (``"minimax_m3"``): namespace-prefixed XML, ``]<]minimax[>[<tool_call>\\n
    ]<]minimax[>[<invoke name="NAME">]<]minimax[>[<KEY>VALUE]<]minimax[>[</KEY>...
    ]<]minimax[>[</invoke>\\n...]<]minimax[>[</tool_call>`` (``minimax_m3_xml`` arguments,
    nested values as nested elements). Reasoning ``<mm:think>...</mm:think>``: ``enabled``
    starts inside the block the prompt opened, ``auto`` (this builder's default) takes a
    whole block, a lone ``</mm:think>`` or nothing."""
    if tool_choice not in ("auto", "required", "forced"):
        raise ValueError(f"Unsupported tool choice: {tool_choice}")
    if builtin_tools:
        raise ValueError("MiniMax M3 does not support builtin tools.")
    o = _Opts(any_order, exclude_special_tokens, max_whitespace_cnt, parallel_tool_calls, kwargs)
    tools = _function_tools(tools)
    NS = "]<]minimax[>["
    TB, TE, TRIGGER = NS + "<tool_call>\n", NS + "</tool_call>", NS + "<tool_call>"
    THINK_B, THINK_E = "<mm:think>", "</mm:think>"
    # Not the bare namespace: every element, the trigger included, starts with it.
    text_excl = [THINK_B, THINK_E, TE, NS + "<invoke", NS + "</invoke>"]
    reasoning_excl = [TRIGGER] + text_excl
    invokes = [_tag(f'{NS}<invoke name="{t.function.name}">', o.args(t.function, "minimax_m3_xml"),
                    NS + "</invoke>\n") for t in tools]

    def section(tags: List[Fmt], many: bool = True) -> Fmt:
        return _tag(TB, _with_sep(tags, "", True, not o.parallel) if many else tags[0], TE)

    if tool_choice == "forced":
        if not invokes:
            raise ValueError("Forced tool choice must resolve to exactly one tool.")
        suffix = section(invokes[:1], many=False)
    elif tool_choice == "required":
        _required(invokes)
        suffix = _triggered([TRIGGER], [section(invokes)], o.excl(text_excl), at_least_one=True,
                            stop_after_first=not o.parallel)
    elif invokes:
        suffix = _triggered([TRIGGER], [section(invokes)], o.excl(text_excl),
                            stop_after_first=not o.parallel)
    else:
        suffix = _any_text(o.excl([TRIGGER] + text_excl))
    prefix = o.reasoning(reasoning, THINK_B, THINK_E, reasoning_excl)
    if reasoning == "auto":  # the adaptive template writes a lone </mm:think> when skipping
        prefix = _optional(_or(prefix["content"], _const(THINK_E)))
    return _assemble(prefix, suffix)


@register_model_structural_tag("glm_4_7")
def get_glm_4_7_structural_tag(
    tools: Optional[List[FunctionToolParam]] = None,
    builtin_tools: Optional[List[BuiltinToolParam]] = None,
    tool_choice: Literal["auto", "required", "forced"] = "auto",
    reasoning: Literal["enabled", "disabled", "auto"] = "enabled",
    any_order: bool = False,
    exclude_special_tokens: bool = True,
    max_whitespace_cnt: Optional[int] = None,
    parallel_tool_calls: bool = True,
    **kwargs: Any,
) -> StructuralTag:
    """GLM-4.7 / GLM-5 (``"glm_4_7"``): ``<tool_call>NAME<arg_key>KEY</arg_key><arg_value>
    VALUE</arg_value>...</tool_call>`` (``glm_xml`` arguments). The tool-call markers are
    kept out of reasoning and free text (``<tool_call>`` may start a call in free text)."""
    o = _Opts(any_order, exclude_special_tokens, max_whitespace_cnt, parallel_tool_calls, kwargs)
    tools = _function_tools(tools)
    arg_tokens = ["<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"]
    reasoning_excl = _THINK + ["<tool_call>", "</tool_call>"] + arg_tokens
    text_excl = _THINK + ["</tool_call>"] + arg_tokens

    def call(fn: FunctionDefinition) -> Fmt:
        return _tag("<tool_call>" + fn.name, o.args(fn, "glm_xml"), "</tool_call>")

    suffix = _flat(o, tool_choice, tools, call, "<tool_call>", text_excl, reasoning_excl)
    return _assemble(o.reasoning(reasoning, "<think>", "</think>", reasoning_excl), suffix)


@register_model_structural_tag("deepseek_v4")
def get_deepseek_v4_structural_tag(
    tools: Optional[List[FunctionToolParam]] = None,
    builtin_tools: Optional[List[BuiltinToolParam]] = None,
    tool_choice: Literal["auto", "required", "forced"] = "auto",
    reasoning: Literal["enabled", "disabled", "auto"] = "enabled",
    any_order: bool = False,
    exclude_special_tokens: bool = True,
    max_whitespace_cnt: Optional[int] = None,
    parallel_tool_calls: bool = True,
    **kwargs: Any,
) -> StructuralTag:
    """DeepSeek-V4 (``"deepseek_v4"``): as ``deepseek_v3_2`` with the section named
    ``tool_calls``."""
    return _deepseek_v4(tools, builtin_tools, tool_choice, reasoning, any_order,
                        exclude_special_tokens, max_whitespace_cnt, parallel_tool_calls, kwargs)


@register_model_structural_tag("deepseek_v4_1")
def get_deepseek_v4_1_structural_tag(
    tools: Optional[List[FunctionToolParam]] = None,
    builtin_tools: Optional[List[BuiltinToolParam]] = None,
    tool_choice: Literal["auto", "required", "forced"] = "auto",
    reasoning: Literal["enabled", "disabled", "auto"] = "enabled",
    any_order: bool = False,
    exclude_special_tokens: bool = True,
    max_whitespace_cnt: Optional[int] = None,
    parallel_tool_calls: bool = True,
    **kwargs: Any,
) -> StructuralTag:
    """DeepSeek-V4.1 (``"deepseek_v4_1"``): ``<｜DSML｜ calls>\\n<｜DSML｜ invoke name="NAME">\\n
    <｜DSML｜ parameter name="KEY" string="true|false">VALUE</｜DSML｜ parameter>...
    </｜DSML｜ invoke>\\n...</｜DSML｜ calls>`` (``deepseek_v4_1_xml`` arguments). Without
    tools the calls opener is kept out of the text."""
    return _deepseek_v4_1(tools, builtin_tools, tool_choice, reasoning, any_order,
                          exclude_special_tokens, max_whitespace_cnt, parallel_tool_calls, kwargs)


@register_model_structural_tag("cohere")
def get_cohere_structural_tag(
    tools: Optional[List[FunctionToolParam]] = None,
    builtin_tools: Optional[List[BuiltinToolParam]] = None,
    tool_choice: Literal["auto", "required", "forced"] = "auto",
    reasoning: Literal["enabled", "disabled", "auto"] = "enabled",
    any_order: bool = False,
    exclude_special_tokens: bool = True,
    max_whitespace_cnt: Optional[int] = None,
    parallel_tool_calls: bool = True,
    **kwargs: Any,
) -> StructuralTag:
    """Cohere Command (``"cohere"``): ``<cofl:tool_calls><cofl:tool_call id="N" name="NAME">
    <cofl:value name="KEY" type="raw|json|dict|list">VALUE</cofl:value>...
    </cofl:tool_call>...</cofl:tool_calls>`` (``cohere_xml`` arguments), after a reasoning
    block ``...<|END_THINKING|>`` (the prompt opens it)."""
    o = _Opts(any_order, exclude_special_tokens, max_whitespace_cnt, parallel_tool_calls, kwargs)
    tools = _function_tools(tools)
    SB, SE = "<cofl:tool_calls>", "</cofl:tool_calls>"
    THINK = ["<|START_THINKING|>", "<|END_THINKING|>"]

    def call(fn: FunctionDefinition) -> Fmt:
        return _tag('<cofl:tool_call id="',
                    _seq(_regex(r"\d+"), _const(f'" name="{fn.name}">'), o.args(fn, "cohere_xml")),
                    "</cofl:tool_call>")

    if tool_choice == "forced":
        suffix = _seq(_const(SB), call(_forced_tool(tools)), _const(SE))
    else:
        tags = [call(t.function) for t in tools]
        if tool_choice == "required":
            _required(tags)
            suffix = _seq(_const(SB), _with_sep(tags, "", True, not o.parallel), _const(SE))
        else:
            suffix = _calls_section(o, "auto", tags, SB, SE, "", SB, THINK)
    prefix = o.reasoning(reasoning, THINK[0], THINK[1], [] if reasoning == "enabled" else THINK)
    return _assemble(prefix, suffix)


@register_model_structural_tag("exaone")
def get_exaone_structural_tag(
    tools: Optional[List[FunctionToolParam]] = None,
    builtin_tools: Optional[List[BuiltinToolParam]] = None,
    tool_choice: Literal["auto", "required", "forced"] = "auto",
    reasoning: Literal["enabled", "disabled", "auto"] = "enabled",
    any_order: bool = False,
    exclude_special_tokens: bool = True,
    max_whitespace_cnt: Optional[int] = None,
    parallel_tool_calls: bool = True,
    **kwargs: Any,
) -> StructuralTag:
    """EXAONE 4.0 (``"exaone"``): ``<tool_call>{"name": "NAME", "arguments": {...}}
    </tool_call>`` after ``...</think>\\n\\n``."""
    o = _Opts(any_order, exclude_special_tokens, max_whitespace_cnt, parallel_tool_calls, kwargs)
    tools = _function_tools(tools)

    def call(fn: FunctionDefinition) -> Fmt:
        return _tag('<tool_call>{"name": "' + fn.name + '", "arguments": ', o.args(fn), "}</tool_call>")

    suffix = _flat(o, tool_choice, tools, call, "<tool_call>", _THINK, _THINK)
    prefix = o.reasoning(reasoning, "<think>", "</think>", [] if reasoning == "enabled" else _THINK,
                         suffix="\n\n")
    return _assemble(prefix, suffix)


# ---- entry point ------------------------------------------------------------------------


def get_model_structural_tag(
    model: str,
    tools: Optional[List[Union[ToolParam, dict]]] = None,
    tool_choice: Union[ToolChoiceOptionParam, dict, None] = "auto",
    reasoning: Union[bool, Literal["enabled", "disabled", "auto"]] = "enabled",
    force_reasoning: bool = False,
    any_order: bool = False,
    exclude_special_tokens: bool = True,
    max_whitespace_cnt: Optional[int] = None,
    parallel_tool_calls: bool = True,
    *,
    as_dict: bool = False,
    prompt_ends_with_think: Optional[bool] = None,
) -> Any:
    """The structural tag of ``model``'s reasoning and tool-call output for OpenAI-style
    ``tools`` and ``tool_choice`` (upstream xgrammar's function, same parameters and
    defaults).

    Parameters
    ----------
    model : str
        A registered model key: ``llama``, ``qwen_3``, ``qwen_3_5``, ``qwen_3_coder``,
        ``mimo``, ``exaone``, ``kimi``, ``kimi_k3``, ``deepseek_r1``, ``deepseek_v3_1``,
        ``deepseek_v3_2``, ``deepseek_v4``, ``deepseek_v4_1``, ``harmony``, ``minimax``,
        ``minimax_m3``, ``glm_4_7``, ``cohere`` (and any added with
        :func:`register_model_structural_tag`). Other keys of
        ``xgrammar2.structural_tag.get_model_structural_tag`` (``mistral``, aliases) are
        served by that function (an xgrammar2 extension).
    tools : list, optional
        Function tools ``{"type": "function", "function": {...}}`` and builtin tools
        ``{"type": ..., "name": ..., "parameters": ...}`` (dicts or
        :mod:`xgrammar2.openai_tool_call_schema` models).
    tool_choice : "auto" | "none" | "required" | dict, default "auto"
        See :func:`normalize_tool_choice`.
    reasoning : bool | "enabled" | "disabled" | "auto", default "enabled"
        The model's reasoning block: required, absent, or optional (``True`` / ``False`` are
        the deprecated spellings of ``"enabled"`` / ``"disabled"``). With ``"enabled"`` most
        formats start inside the block the generation prompt opened.
    force_reasoning : bool
        Deprecated and ignored, as upstream.
    any_order, max_whitespace_cnt
        Applied to every tool-argument ``json_schema`` format.
    exclude_special_tokens : bool, default True
        Keep the model's special markers (``<think>`` ...) out of free-text spans.
    parallel_tool_calls : bool, default True
        False allows at most one call (exactly one with ``required`` / a forced tool).
    as_dict : bool, keyword only, default False
        (xgrammar2) Return the plain dict (``model_dump()``) instead of the model.
    prompt_ends_with_think : bool, keyword only, optional
        (xgrammar2) Whether the generation prompt already ends with the reasoning opener;
        None keeps the model's default.

    Returns
    -------
    StructuralTag

    Raises
    ------
    ValueError
        Unknown model, bad tools, tool choice or reasoning mode, a required / forced choice
        without a tool.
    """
    func = _structural_tag_registry.get(model)
    if func is None:
        from .structural_tag.templates import _ALIASES, _REGISTRY

        if model in _REGISTRY or model in _ALIASES:
            return _templates_fallback(model, tools, tool_choice, reasoning, any_order,
                                       exclude_special_tokens, max_whitespace_cnt,
                                       parallel_tool_calls, as_dict, prompt_ends_with_think)
        raise ValueError(f"Unknown format type: {model}, supported types: {list(_structural_tag_registry)}")
    functions, builtins, choice = normalize_tool_choice(tools, tool_choice)
    if isinstance(reasoning, bool):
        mode = "enabled" if reasoning else "disabled"
    elif isinstance(reasoning, str) and reasoning in ("enabled", "disabled", "auto"):
        mode = reasoning
    else:
        raise ValueError("The 'reasoning' argument must be a bool or one of: 'enabled', 'disabled', 'auto'.")
    if not isinstance(parallel_tool_calls, bool):
        raise ValueError("The 'parallel_tool_calls' argument must be a bool.")
    extra = {} if prompt_ends_with_think is None else {"prompt_ends_with_think": prompt_ends_with_think}
    tag = func(functions, builtins, choice, mode, any_order=any_order,
               exclude_special_tokens=exclude_special_tokens, max_whitespace_cnt=max_whitespace_cnt,
               parallel_tool_calls=parallel_tool_calls, **extra)
    return tag.model_dump() if as_dict else tag


def _templates_fallback(model, tools, tool_choice, reasoning, any_order, exclude_special_tokens,
                        max_whitespace_cnt, parallel_tool_calls, as_dict, prompt_ends_with_think):
    from .structural_tag.templates import get_model_structural_tag as templates_tag

    try:
        return templates_tag(model, tools, tool_choice, reasoning, parallel_tool_calls,
                             prompt_ends_with_think=prompt_ends_with_think, any_order=any_order,
                             exclude_special_tokens=exclude_special_tokens,
                             max_whitespace_cnt=max_whitespace_cnt, as_dict=as_dict)
    except NotImplementedError:
        raise
    except ValueError as e:  # StructuralTagError: same message, ValueError as upstream
        raise ValueError(str(e)) from e


get_builtin_structural_tag = get_model_structural_tag
"""Deprecated alias of :func:`get_model_structural_tag` (as upstream)."""
