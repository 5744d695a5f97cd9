"""Model templates: the structural tag of a model family's reasoning and tool-call syntax,
built from OpenAI-style ``tools`` and ``tool_choice``.

These are xgrammar2's variants of upstream xgrammar's builtin structural tags (every upstream
model key, plus more keys and aliases); :mod:`xgrammar2.builtin_structural_tag` (and
``xgrammar2.get_model_structural_tag``) builds upstream's exact tags. The formats here were
checked against the real chat templates in ``shared/data/chat_templates`` by rendering
BFCL tool calls through them (``tests/structural_tag/test_templates.py``). Where they differ
from upstream it is said at the builder, and in ``docs/structural-tags.md``.

Common behaviour:

* ``tool_choice="auto"`` (or None): free text, in which the model's tool-call opener starts a
  call of one of the tools (any number of calls; one with ``parallel_tool_calls=False``).
  No tools, or ``"none"``: free text only.
* ``"required"``: at least one call, starting right away (after the reasoning block); the
  output can always end after a call, so it never traps the model.
* ``{"type": "function", "function": {"name": ...}}``: exactly that call.
* ``reasoning``: ``False`` / ``"disabled"`` (default) no reasoning block; ``True`` /
  ``"enabled"`` a reasoning block (``<think>...</think>`` or the model's own markers) first;
  ``"auto"`` an optional one. ``prompt_ends_with_think`` says whether the generation prompt
  already holds the opener (then the output starts inside the block); its default is taken
  from the model's chat template.
* Free text may not contain the model's reasoning markers (``exclude_special_tokens``).
* A function tool with ``strict: false`` or without ``parameters`` gets unconstrained JSON
  arguments (as upstream).

The result is a :class:`xgrammar2.structural_tag.StructuralTag` (pydantic) by default, or the
plain dict with ``as_dict=True`` (cheaper: no pydantic validation, used by the OpenAI
mapping).
"""

from typing import Any, Callable, Dict, List, Literal, Optional, Sequence, Tuple, Union

from .errors import StructuralTagError, describe, path_join

__all__ = [
    "get_model_structural_tag",
    "read_tools",
    "register_model_structural_tag",
    "list_model_structural_tags",
    "FunctionTool",
    "BuiltinTool",
]

Fmt = Dict[str, Any]
ReasoningMode = Literal["enabled", "disabled", "auto"]

THINK = ("<think>", "</think>")


# ---- tools and tool choice --------------------------------------------------------------


class FunctionTool:
    """A normalized function tool: ``name``, ``parameters`` (the JSON schema that constrains
    the arguments: ``True`` when unconstrained), ``description``."""

    __slots__ = ("name", "parameters", "description", "strict")

    def __init__(self, name: str, parameters: Any, description: Optional[str], strict: Optional[bool]):
        self.name = name
        self.description = description
        self.strict = strict
        if strict is False or parameters is None:
            parameters = True
        self.parameters = parameters


class BuiltinTool:
    """A builtin / hosted tool (Harmony ``browser.search`` ...): provider ``type``, the
    ``name`` the model writes (``type`` when absent), argument ``parameters``."""

    __slots__ = ("type", "name", "parameters")

    def __init__(self, type_: str, name: Optional[str], parameters: Any):
        self.type = type_
        self.name = name or type_
        self.parameters = True if parameters is None else parameters


def _plain(x: Any) -> Any:
    dump = getattr(x, "model_dump", None)
    if callable(dump) and not isinstance(x, type):
        return dump(by_alias=True, exclude_none=True)
    return x


def _read_tool(tool: Any, path: str) -> Union[FunctionTool, BuiltinTool]:
    tool = _plain(tool)
    if isinstance(tool, (FunctionTool, BuiltinTool)):
        return tool
    if not isinstance(tool, dict):
        raise StructuralTagError(path, f"a tool must be an object, got {describe(tool)}")
    t = tool.get("type", "function")
    if not isinstance(t, str):
        raise StructuralTagError(path_join(path, "type"), f"must be a string, got {describe(t)}")
    if t == "function":
        fn = tool.get("function")
        fpath = path_join(path, "function")
        if fn is None and "name" in tool:  # Responses-API flat shape
            fn, fpath = tool, path
        fn = _plain(fn)
        if not isinstance(fn, dict):
            raise StructuralTagError(fpath, "a function tool needs a 'function' object")
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise StructuralTagError(path_join(fpath, "name"), "must be a non-empty string")
        params = fn.get("parameters")
        if params is not None and not isinstance(params, (dict, bool)):
            raise StructuralTagError(path_join(fpath, "parameters"),
                                     f"must be a JSON schema object, got {describe(params)}")
        strict = fn.get("strict")
        if strict is not None and not isinstance(strict, bool):
            raise StructuralTagError(path_join(fpath, "strict"), "must be a boolean")
        return FunctionTool(name, params, fn.get("description"), strict)
    name = tool.get("name")
    if name is not None and not isinstance(name, str):
        raise StructuralTagError(path_join(path, "name"), "must be a string")
    params = tool.get("parameters")
    if params is not None and not isinstance(params, (dict, bool)):
        raise StructuralTagError(path_join(path, "parameters"), "must be a JSON schema object")
    return BuiltinTool(t, name, params)


SimplifiedChoice = Literal["auto", "required", "forced"]


def read_tools(
    tools: Optional[Sequence[Any]] = None, tool_choice: Any = "auto"
) -> Tuple[List[FunctionTool], List[BuiltinTool], SimplifiedChoice]:
    """``(function tools, builtin tools, "auto" | "required" | "forced")`` for OpenAI-style
    ``tools`` and ``tool_choice``, the tools as :class:`FunctionTool` / :class:`BuiltinTool`
    (upstream's ``normalize_tool_choice``, which returns pydantic tool models, is
    :func:`xgrammar2.normalize_tool_choice`):

    * ``"auto"`` / None: all tools; ``"none"``: no tools (``"auto"``);
    * ``"required"``: all tools, at least one needed;
    * ``{"type": "function", "function": {"name": N}}`` (or ``{"type": "function",
      "name": N}``): only N, ``"forced"``; ``{"type": <builtin type>}``: that builtin tool;
    * ``{"type": "allowed_tools", "allowed_tools": {"mode": "auto"|"required", "tools":
      [...]}}``: the listed tools with that mode.

    Raises StructuralTagError (a ValueError) naming the bad value.
    """
    if tools is None:
        tools = []
    if not isinstance(tools, (list, tuple)):
        raise StructuralTagError("tools", f"must be an array, got {describe(tools)}")
    read = [_read_tool(t, f"tools[{i}]") for i, t in enumerate(tools)]
    fns = [t for t in read if isinstance(t, FunctionTool)]
    builtins = [t for t in read if isinstance(t, BuiltinTool)]
    seen = set()
    for i, t in enumerate(read):
        if isinstance(t, FunctionTool):
            if t.name in seen:
                raise StructuralTagError(f"tools[{i}].function.name", f"duplicate tool name {t.name!r}")
            seen.add(t.name)

    tc = _plain(tool_choice)
    if tc is None or tc == "auto":
        mode: SimplifiedChoice = "auto"
    elif tc == "none":
        return [], [], "auto"
    elif tc == "required":
        mode = "required"
    elif isinstance(tc, dict):
        t = tc.get("type")
        if t == "function":
            fn = _plain(tc.get("function")) or {}
            name = fn.get("name") if isinstance(fn, dict) else None
            if name is None:
                name = tc.get("name")
            if not isinstance(name, str):
                raise StructuralTagError("tool_choice.function.name", "must be a string")
            fns = [f for f in fns if f.name == name]
            if not fns:
                raise StructuralTagError("tool_choice.function.name",
                                         f"the tool {name!r} is not in the tools list")
            builtins, mode = [], "forced"
        elif t == "allowed_tools":
            allowed = _plain(tc.get("allowed_tools")) or {}
            m = allowed.get("mode", "auto")
            if m not in ("auto", "required"):
                raise StructuralTagError("tool_choice.allowed_tools.mode",
                                         f'must be "auto" or "required", got {m!r}')
            names, types = set(), set()
            for i, ref in enumerate(allowed.get("tools") or []):
                ref = _plain(ref)
                if not isinstance(ref, dict):
                    raise StructuralTagError(f"tool_choice.allowed_tools.tools[{i}]", "must be an object")
                if ref.get("type", "function") == "function":
                    f = _plain(ref.get("function")) or {}
                    n = f.get("name") if isinstance(f, dict) else None
                    n = n if n is not None else ref.get("name")
                    if n not in {x.name for x in fns}:
                        raise StructuralTagError(f"tool_choice.allowed_tools.tools[{i}]",
                                                 f"the tool {n!r} is not in the tools list")
                    names.add(n)
                else:
                    if ref["type"] not in {b.type for b in builtins}:
                        raise StructuralTagError(f"tool_choice.allowed_tools.tools[{i}]",
                                                 f"the builtin tool {ref['type']!r} is not in the tools list")
                    types.add(ref["type"])
            fns = [f for f in fns if f.name in names]
            builtins = [b for b in builtins if b.type in types]
            mode = m
        elif isinstance(t, str):
            builtins = [b for b in builtins if b.type == t]
            if len(builtins) != 1:
                raise StructuralTagError("tool_choice.type",
                                         f"must match exactly one builtin tool, matched {len(builtins)}")
            fns, mode = [], "forced"
        else:
            raise StructuralTagError("tool_choice", f"unknown tool choice {tc!r}")
    else:
        raise StructuralTagError(
            "tool_choice", f'must be "auto", "none", "required" or a named tool, got {tc!r}'
        )
    if mode == "required" and not fns and not builtins:
        raise StructuralTagError("tools", 'tool_choice "required" needs at least one tool')
    return fns, builtins, mode


# ---- format constructors (plain dicts: cheap, no validation) -----------------------------


def const(v: str) -> Fmt:
    return {"type": "const_string", "value": v}


def any_text(excludes: Sequence[str] = ()) -> Fmt:
    return {"type": "any_text", "excludes": list(excludes)}


def tag(begin: str, content: Fmt, end: Union[str, List[str]]) -> Fmt:
    return {"type": "tag", "begin": begin, "content": content, "end": end}


def seq(*elements: Optional[Fmt]) -> Fmt:
    els = [e for e in elements if e is not None]
    return els[0] if len(els) == 1 else {"type": "sequence", "elements": els}


def or_(*elements: Fmt) -> Fmt:
    return {"type": "or", "elements": list(elements)}


def optional(content: Fmt) -> Fmt:
    return {"type": "optional", "content": content}


def regex(pattern: str) -> Fmt:
    return {"type": "regex", "pattern": pattern}


def triggered(triggers, tags, excludes=(), at_least_one=False, stop_after_first=False) -> Fmt:
    return {"type": "triggered_tags", "triggers": list(triggers), "tags": list(tags),
            "excludes": list(excludes), "at_least_one": at_least_one,
            "stop_after_first": stop_after_first}


def with_sep(tags, separator, at_least_one=False, stop_after_first=False) -> Fmt:
    return {"type": "tags_with_separator", "tags": list(tags), "separator": separator,
            "at_least_one": at_least_one, "stop_after_first": stop_after_first}


class _Opts:
    """Options every builder receives."""

    def __init__(self, reasoning: ReasoningMode, prompt_ends_with_think: Optional[bool],
                 any_order: bool, exclude_special_tokens: bool, max_whitespace_cnt: Optional[int],
                 parallel_tool_calls: bool):
        self.reasoning = reasoning
        self.prompt_ends_with_think = prompt_ends_with_think
        self.any_order = any_order
        self.exclude_special_tokens = exclude_special_tokens
        self.max_whitespace_cnt = max_whitespace_cnt
        self.parallel = parallel_tool_calls

    def args(self, schema: Any, style: str = "json", excludes: Sequence[str] = ()) -> Fmt:
        f: Fmt = {"type": "json_schema", "json_schema": schema, "style": style}
        if self.any_order:
            f["any_order"] = True
        if self.max_whitespace_cnt is not None:
            f["max_whitespace_cnt"] = self.max_whitespace_cnt
        if excludes:
            f["excludes"] = list(excludes)
        return f

    def excl(self, tokens: Sequence[str]) -> List[str]:
        return list(tokens) if self.exclude_special_tokens else []

    def think_in_prompt(self, default: bool) -> bool:
        return default if self.prompt_ends_with_think is None else self.prompt_ends_with_think


def reasoning_prefix(o: _Opts, begin: str, end: str, excludes: Sequence[str], in_prompt: bool,
                     suffix: str = "") -> Optional[Fmt]:
    """The leading reasoning block: ``begin`` (left out when the prompt already ends with
    it), free text, ``end``, ``suffix``; optional in ``"auto"`` mode."""
    if o.reasoning == "disabled":
        return None
    b = "" if (o.reasoning == "enabled" and in_prompt) else begin
    block = tag(b, any_text(o.excl(excludes)), end)
    if suffix:
        block = seq(block, const(suffix))
    if o.reasoning == "auto":
        block = optional(block)
    return block


#: Whitespace a model may write before a required / forced call (after ``</think>`` or the
#: turn header), e.g. GLM-4.6's ``\n<tool_call>``. Upstream xgrammar allows none here.
LEADING_WS = {"type": "regex", "pattern": "[ \t\r\n]*"}


def _flat(o: _Opts, mode: SimplifiedChoice, fns: List[FunctionTool], make_tag: Callable,
          trigger: str, text_excludes: Sequence[str]) -> Fmt:
    """Calls written one after another, each starting with ``trigger`` (Hermes, Llama, ...)."""
    tags = [make_tag(f) for f in fns]
    if mode == "forced":
        return seq(LEADING_WS, tags[0])
    if not tags:
        return any_text(o.excl(text_excludes))
    tt = triggered([trigger], tags, o.excl(text_excludes), at_least_one=mode == "required",
                   stop_after_first=not o.parallel)
    return seq(LEADING_WS, tt) if mode == "required" else tt


def _section(o: _Opts, mode: SimplifiedChoice, fns: List[FunctionTool], make_tag: Callable,
             section_begin: str, section_end: str, separator: str, text_excludes: Sequence[str],
             trigger: Optional[str] = None, required_prefix: str = "") -> Fmt:
    """Calls grouped in one section (``<｜tool▁calls▁begin｜> ... <｜tool▁calls▁end｜>``)."""
    tags = [make_tag(f) for f in fns]
    if not tags:
        return any_text(o.excl(text_excludes))
    if mode == "forced":
        return seq(LEADING_WS, const(required_prefix + section_begin), tags[0], const(section_end))
    inner = with_sep(tags, separator, at_least_one=True, stop_after_first=not o.parallel)
    if mode == "required":
        return seq(LEADING_WS, const(required_prefix + section_begin), inner, const(section_end))
    section = tag(section_begin, inner, section_end)
    return triggered([trigger or section_begin], [section], o.excl(text_excludes),
                     stop_after_first=not o.parallel)


# ---- registry ---------------------------------------------------------------------------

Builder = Callable[[List[FunctionTool], List[BuiltinTool], SimplifiedChoice, _Opts], Fmt]
_REGISTRY: Dict[str, Builder] = {}
_ALIASES: Dict[str, str] = {}


def register_model_structural_tag(name: str, *aliases: str):
    """Registers a builder ``f(function_tools, builtin_tools, choice, opts) -> format dict``
    under ``name`` (and ``aliases``)."""

    def deco(fn: Builder) -> Builder:
        _REGISTRY[name] = fn
        for a in aliases:
            _ALIASES[a] = name
        return fn

    return deco


def list_model_structural_tags() -> List[str]:
    """The registered model keys (aliases not included)."""
    return sorted(_REGISTRY)


def _no_builtins(model: str, builtins: List[BuiltinTool]) -> None:
    if builtins:
        raise StructuralTagError("tools", f"the {model!r} format has no builtin tools "
                                          f"(got {builtins[0].type!r})")


@register_model_structural_tag("llama", "llama3", "llama_3", "llama_3_1", "llama_3_2", "llama_3_3")
def _llama(fns, builtins, mode, o):
    """Llama 3.1 / 3.2 / 3.3: ``{"name": "NAME", "parameters": {...}}``. The chat templates
    reject more than one call per message; ``parallel_tool_calls`` is honoured as given."""
    _no_builtins("llama", builtins)
    mk = lambda f: tag('{"name": "' + f.name + '", "parameters": ', o.args(f.parameters), "}")  # noqa: E731
    return _flat(o, mode, fns, mk, '{"name": ', THINK)


@register_model_structural_tag("qwen_3", "qwen", "qwen_2_5", "qwen2.5", "qwen3", "hermes", "qwq")
def _qwen_3(fns, builtins, mode, o):
    """Qwen2.5 / Qwen3 / QwQ / Hermes 2-3: ``<tool_call>\\n{"name": "NAME", "arguments":
    {...}}\\n</tool_call>``; reasoning ``<think>...</think>\\n\\n``. As upstream xgrammar's,
    the prompt is taken to end with ``<think>`` (QwQ's and the Qwen3 thinking templates'
    generation prompts do); the original Qwen3 template lets the model write ``<think>``
    itself: pass ``prompt_ends_with_think=False`` for it."""
    _no_builtins("qwen_3", builtins)
    mk = lambda f: tag('<tool_call>\n{"name": "' + f.name + '", "arguments": ',  # noqa: E731
                       o.args(f.parameters), "}\n</tool_call>")
    body = _flat(o, mode, fns, mk, "<tool_call>", THINK)
    pre = reasoning_prefix(o, *THINK, THINK, o.think_in_prompt(True), "\n\n")
    return seq(pre, body)


@register_model_structural_tag("qwen_3_coder", "qwen_3_5", "qwen3_coder", "qwen3.5")
def _qwen_3_coder(fns, builtins, mode, o):
    """Qwen3-Coder / Qwen3.5: ``<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n
    </parameter>\\n</function>\\n</tool_call>``; string values raw, others JSON. The Qwen3.5
    prompt ends with ``<think>\\n``."""
    _no_builtins("qwen_3_coder", builtins)
    mk = lambda f: tag("<tool_call>\n<function=" + f.name + ">\n",  # noqa: E731
                       o.args(f.parameters, "qwen_xml"), "\n</function>\n</tool_call>")
    body = _flat(o, mode, fns, mk, "<tool_call>\n<function=", THINK)
    pre = reasoning_prefix(o, *THINK, THINK, o.think_in_prompt(True), "\n\n")
    return seq(pre, body)


@register_model_structural_tag("exaone")
def _exaone(fns, builtins, mode, o):
    """EXAONE 4.0: ``<tool_call>{"name": "NAME", "arguments": {...}}</tool_call>``."""
    _no_builtins("exaone", builtins)
    mk = lambda f: tag('<tool_call>{"name": "' + f.name + '", "arguments": ',  # noqa: E731
                       o.args(f.parameters), "}</tool_call>")
    body = _flat(o, mode, fns, mk, "<tool_call>", THINK)
    return seq(reasoning_prefix(o, *THINK, THINK, o.think_in_prompt(True), "\n\n"), body)


@register_model_structural_tag("mimo")
def _mimo(fns, builtins, mode, o):
    """MiMo-V2.6: ``<tool_call><function=NAME><parameter=KEY>VALUE</parameter></function>
    </tool_call>`` (Qwen XML without newlines). MiMo-VL uses the Hermes format (``qwen_3``)."""
    _no_builtins("mimo", builtins)
    excl = ["<think>", "</think>", "</tool_call>", "<function="]
    mk = lambda f: tag("<tool_call><function=" + f.name + ">",  # noqa: E731
                       o.args(f.parameters, "qwen_xml"), "</function></tool_call>")
    body = _flat(o, mode, fns, mk, "<tool_call>", excl)
    if not fns:
        body = any_text(o.excl(["<tool_call>"] + excl))
    return seq(reasoning_prefix(o, *THINK, ["<tool_call>"] + excl, o.think_in_prompt(False)), body)


@register_model_structural_tag("glm_4_7", "glm", "glm_5")
def _glm(fns, builtins, mode, o):
    """GLM-4.5 / 4.6 / 4.7 / 5: ``<tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE
    </arg_value></tool_call>`` (4.6 puts newlines between the parts; both are accepted). The
    GLM-4.7 prompt ends with ``<think>``; GLM-4.6 lets the model write ``\\n<think>``."""
    _no_builtins("glm_4_7", builtins)
    args = ["<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"]
    reasoning_excl = list(THINK) + ["<tool_call>", "</tool_call>"] + args
    text_excl = list(THINK) + ["</tool_call>"] + args
    mk = lambda f: tag("<tool_call>" + f.name, o.args(f.parameters, "glm_xml"), "</tool_call>")  # noqa: E731
    body = _flat(o, mode, fns, mk, "<tool_call>", text_excl)
    if not fns:
        body = any_text(o.excl(reasoning_excl))
    return seq(reasoning_prefix(o, *THINK, reasoning_excl, o.think_in_prompt(True)), body)


@register_model_structural_tag("glm_4_6", "glm_4_5")
def _glm_4_6(fns, builtins, mode, o):
    """GLM-4.5 / 4.6: as ``glm_4_7`` with newlines between the parts; the model writes
    ``\n<think>...</think>`` itself (the GLM-4.6 prompt ends with ``<|assistant|>``)."""
    body = _glm(fns, builtins, mode, _Opts("disabled", None, o.any_order, o.exclude_special_tokens,
                                           o.max_whitespace_cnt, o.parallel))
    args = ["<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"]
    excl = list(THINK) + ["<tool_call>", "</tool_call>"] + args
    return seq(reasoning_prefix(o, "\n<think>", "</think>", excl, o.think_in_prompt(False)), body)


@register_model_structural_tag("mistral", "devstral", "ministral", "magistral", "mistral_small")
def _mistral(fns, builtins, mode, o):
    """Mistral (tokenizer v11+: Mistral Small 3.2, Devstral, Ministral 3, Magistral):
    ``[TOOL_CALLS]NAME[ARGS]{...}`` per call, Mistral Small 3.2 with ``[CALL_ID]<9
    alphanumerics>`` before ``[ARGS]`` (both accepted); reasoning ``[THINK]...[/THINK]``.
    Not in upstream xgrammar."""
    _no_builtins("mistral", builtins)
    marks = ["[THINK]", "[/THINK]"]
    # An empty end: the JSON arguments end the call; the next call or EOS follows.
    mk = lambda f: tag("[TOOL_CALLS]" + f.name, seq(  # noqa: E731
        optional(seq(const("[CALL_ID]"), regex("[a-zA-Z0-9]{9}"))), const("[ARGS]"),
        o.args(f.parameters)), "")
    body = _flat(o, mode, fns, mk, "[TOOL_CALLS]", marks)
    return seq(reasoning_prefix(o, "[THINK]", "[/THINK]", marks, o.think_in_prompt(False)), body)


@register_model_structural_tag("mistral_nemo", "mistral_v3")
def _mistral_nemo(fns, builtins, mode, o):
    """Mistral tokenizer v3 (Mistral-Nemo, Mistral 7B v0.3): ``[TOOL_CALLS][{"name": "NAME",
    "arguments": {...}, "id": "<9 alphanumerics>"}, ...]`` (the id is optional). Not in
    upstream xgrammar."""
    _no_builtins("mistral_nemo", builtins)
    mk = lambda f: tag('{"name": "' + f.name + '", "arguments": ', seq(  # noqa: E731
        o.args(f.parameters), optional(seq(const(', "id": "'), regex("[a-zA-Z0-9]{9}"), const('"')))), "}")
    return _section(o, mode, fns, mk, "[TOOL_CALLS][", "]", ", ", [], trigger="[TOOL_CALLS]")


@register_model_structural_tag("kimi", "kimi_k2", "kimi_k2_5")
def _kimi(fns, builtins, mode, o):
    """Kimi-K2: ``<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX
    <|tool_call_argument_begin|>{...}<|tool_call_end|>...<|tool_calls_section_end|>``;
    reasoning ``<think>...</think>`` written by the model."""
    _no_builtins("kimi", builtins)
    mk = lambda f: tag("<|tool_call_begin|>functions." + f.name + ":", seq(  # noqa: E731
        regex(r"\d+"), const("<|tool_call_argument_begin|>"), o.args(f.parameters)),
        "<|tool_call_end|>")
    body = _section(o, mode, fns, mk, "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>",
                    "", list(THINK) + ["<|tool_call_begin|>"])
    if not fns:
        body = any_text(o.excl(THINK))
    in_prompt = o.think_in_prompt(False)
    return seq(reasoning_prefix(o, *THINK, THINK if o.reasoning == "auto" else [], in_prompt), body)


@register_model_structural_tag("deepseek_r1", "deepseek_r1_distill")
def _deepseek_r1(fns, builtins, mode, o):
    """DeepSeek-R1: ``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
    \\n```json\\n{...}\\n```<｜tool▁call▁end｜>\\n...<｜tool▁calls▁end｜>``; the prompt ends
    with ``<think>\\n``."""
    _no_builtins("deepseek_r1", builtins)
    B, E = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
    mk = lambda f: tag("<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + f.name + "\n```json\n",  # noqa: E731
                       o.args(f.parameters), "\n```<｜tool▁call▁end｜>")
    body = _section(o, mode, fns, mk, B, E, "\n", THINK)
    return seq(reasoning_prefix(o, *THINK, THINK, o.think_in_prompt(True)), body)


@register_model_structural_tag("deepseek_v3_1", "deepseek_v3", "deepseek_v3_2_exp")
def _deepseek_v3_1(fns, builtins, mode, o):
    """DeepSeek-V3.1: ``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}
    <｜tool▁call▁end｜>...<｜tool▁calls▁end｜>``; the thinking prompt ends with ``<think>``."""
    _no_builtins("deepseek_v3_1", builtins)
    B, E = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
    mk = lambda f: tag("<｜tool▁call▁begin｜>" + f.name + "<｜tool▁sep｜>",  # noqa: E731
                       o.args(f.parameters), "<｜tool▁call▁end｜>")
    body = _section(o, mode, fns, mk, B, E, "", THINK)
    return seq(reasoning_prefix(o, *THINK, THINK, o.think_in_prompt(True)), body)


def _dsml(model: str, calls: str, invoke: str, style: str):
    def build(fns, builtins, mode, o):
        _no_builtins(model, builtins)
        d = "｜DSML｜"
        mk = lambda f: tag(f'<{d}{invoke} name="' + f.name + '">\n',  # noqa: E731
                           o.args(f.parameters, style), f"</{d}{invoke}>\n")
        body = _section(o, mode, fns, mk, f"<{d}{calls}>\n", f"</{d}{calls}>", "", THINK,
                        trigger=f"<{d}{calls}>", required_prefix="\n\n")
        return seq(reasoning_prefix(o, *THINK, THINK, o.think_in_prompt(True)), body)

    build.__doc__ = (f"{model}: ``<｜DSML｜{calls}>\\n<｜DSML｜{invoke} name=\"NAME\">\\n"
                     f"<｜DSML｜parameter name=\"KEY\" string=\"true|false\">VALUE"
                     f"</｜DSML｜parameter>...</｜DSML｜{invoke}>\\n</｜DSML｜{calls}>``.")
    return build


register_model_structural_tag("deepseek_v3_2")(_dsml("deepseek_v3_2", "function_calls", "invoke", "deepseek_xml"))
register_model_structural_tag("deepseek_v4")(_dsml("deepseek_v4", "tool_calls", "invoke", "deepseek_xml"))
register_model_structural_tag("deepseek_v4_1")(_dsml("deepseek_v4_1", " calls", " invoke", "deepseek_v4_1_xml"))


@register_model_structural_tag("minimax", "minimax_m2", "minimax_m2_5")
def _minimax(fns, builtins, mode, o):
    """MiniMax-M2: ``<minimax:tool_call>\\n<invoke name="NAME">\\n<parameter name="KEY">VALUE
    </parameter>\\n...</invoke>\\n</minimax:tool_call>``; the prompt ends with
    ``<think>\\n``."""
    _no_builtins("minimax", builtins)
    mk = lambda f: tag('<invoke name="' + f.name + '">\n', o.args(f.parameters, "minimax_xml"),  # noqa: E731
                       "</invoke>\n")
    body = _section(o, mode, fns, mk, "<minimax:tool_call>\n", "</minimax:tool_call>", "", THINK,
                    trigger="<minimax:tool_call>", required_prefix="\n")
    if o.reasoning == "disabled":
        return body
    pre = reasoning_prefix(o, *THINK, [] if o.reasoning == "enabled" else THINK,
                           o.think_in_prompt(True), "\n\n")
    return seq(pre, body)


@register_model_structural_tag("harmony", "gpt_oss", "gpt-oss")
def _harmony(fns, builtins, mode, o):
    """gpt-oss (Harmony): messages separated by ``<|start|>assistant``: tool calls
    ``<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>`` (and
    the two other header orders models write), the final answer
    ``<|channel|>final<|message|>...<|end|>``, and with reasoning the analysis channel
    ``<|channel|>analysis<|message|>...<|end|>``. Builtin tools (``browser.search`` ...) use
    ``to=NAME code``. Unlike upstream, ``required`` / a named tool needs the call (analysis
    messages may come first)."""
    END = ["<|end|>", "<|return|>"]
    CALL = "<|call|>"
    SEP = "<|start|>assistant"

    # One tag per tool, its header orders an alternation opening the content: the same
    # language as a tag per header order, with the tool's schema written, read and
    # converted once instead of four times.
    def call_tag(heads, params):
        return tag("", seq(or_(*[const(h) for h in heads]), o.args(params)), CALL)

    calls = [call_tag([f"<|channel|>commentary to=functions.{f.name} <|constrain|>json<|message|>",
                       f"<|channel|>commentary to=functions.{f.name}<|constrain|>json<|message|>",
                       f" to=functions.{f.name}<|channel|>commentary <|constrain|>json<|message|>",
                       f" to=functions.{f.name}<|channel|>commentary json<|message|>"], f.parameters)
             for f in fns]
    calls += [call_tag([f"<|channel|>commentary to={b.name} code<|message|>",
                        f" to={b.name}<|channel|>commentary code<|message|>"], b.parameters)
              for b in builtins]
    messages = []
    if o.reasoning != "disabled":
        messages.append(tag("<|channel|>analysis<|message|>", any_text(), END))
    if mode == "auto":
        messages.append(tag("<|channel|>final<|message|>", any_text(), END))
        if not calls:
            return with_sep(messages, SEP)
        if o.parallel:
            return with_sep(calls + messages, SEP)
        one = with_sep(calls, SEP, at_least_one=True, stop_after_first=True)
        return or_(with_sep(messages, SEP), one,
                   seq(with_sep(messages, SEP, at_least_one=True), const(SEP), one))
    need = with_sep(calls, SEP, at_least_one=True, stop_after_first=not o.parallel or mode == "forced")
    if not messages:
        return need
    return seq(optional(seq(with_sep(messages, SEP, at_least_one=True), const(SEP))), need)


@register_model_structural_tag("kimi_k3")
def _kimi_k3(fns, builtins, mode, o):
    """Kimi-K3: blocks ``<|open|>NAME<|sep|>...<|close|>NAME<|sep|>`` back to back: reasoning
    ``think``, then ``response``, then optionally ``tools`` holding ``<|open|>call tool="NAME"
    index="N"<|sep|>`` calls of ``kimi_k3_xml`` arguments, then ``<|close|>message<|sep|>``.
    The generation prompt ends with the first block's opener (``think`` with reasoning,
    ``response`` without). The markers are kept out of free text and, with
    ``exclude_special_tokens``, out of argument strings and names (as upstream)."""
    _no_builtins("kimi_k3", builtins)
    OPEN, CLOSE, SEP = "<|open|>", "<|close|>", "<|sep|>"
    mk = lambda f: tag(f'{OPEN}call tool="{f.name}" index="', seq(  # noqa: E731
        regex(r"\d+"), const(f'"{SEP}'), o.args(f.parameters, "kimi_k3_xml", o.excl([OPEN, CLOSE, SEP]))),
        f"{CLOSE}call{SEP}")
    tags = [mk(f) for f in fns]
    tb, te = f"{OPEN}tools{SEP}", f"{CLOSE}tools{SEP}"
    calls = None
    if mode == "forced":
        calls = seq(const(tb), tags[0], const(te))
    elif mode == "required":
        calls = seq(const(tb), with_sep(tags, "", at_least_one=True, stop_after_first=not o.parallel), const(te))
    elif tags:
        calls = optional(tag(tb, with_sep(tags, "", at_least_one=True, stop_after_first=not o.parallel), te))
    markers = [OPEN, CLOSE]
    in_prompt = o.think_in_prompt(True)
    pre = reasoning_prefix(o, f"{OPEN}think{SEP}", f"{CLOSE}think{SEP}", markers, in_prompt)
    response_begin = "" if o.reasoning == "disabled" and in_prompt else f"{OPEN}response{SEP}"
    response = tag(response_begin, any_text(o.excl(markers)), f"{CLOSE}response{SEP}")
    return seq(pre, response, calls, const(f"{CLOSE}message{SEP}"))


@register_model_structural_tag("minimax_m3")
def _minimax_m3(fns, builtins, mode, o):
    """MiniMax-M3: ``]<]minimax[>[<tool_call>\\n]<]minimax[>[<invoke name="NAME">`` arguments
    as namespace-prefixed elements (``minimax_m3_xml``, nested values nested)
    ``]<]minimax[>[</invoke>\\n...]<]minimax[>[</tool_call>``; reasoning
    ``<mm:think>...</mm:think>`` (``"auto"``: a whole block, a lone ``</mm:think>`` as the
    adaptive template writes, or nothing)."""
    _no_builtins("minimax_m3", builtins)
    NS = "]<]minimax[>["
    tb, te, trigger = NS + "<tool_call>\n", NS + "</tool_call>", NS + "<tool_call>"
    think_b, think_e = "<mm:think>", "</mm:think>"
    text_excl = [think_b, think_e, te, NS + "<invoke", NS + "</invoke>"]
    invokes = [tag(f'{NS}<invoke name="{f.name}">', o.args(f.parameters, "minimax_m3_xml"),
                   NS + "</invoke>\n") for f in fns]

    def section(ts, many=True):
        return tag(tb, with_sep(ts, "", at_least_one=True, stop_after_first=not o.parallel) if many else ts[0], te)

    if mode == "forced":
        body = seq(LEADING_WS, section(invokes[:1], many=False))
    elif mode == "required":
        body = seq(LEADING_WS, triggered([trigger], [section(invokes)], o.excl(text_excl), at_least_one=True,
                                         stop_after_first=not o.parallel))
    elif invokes:
        body = triggered([trigger], [section(invokes)], o.excl(text_excl), stop_after_first=not o.parallel)
    else:
        body = any_text(o.excl([trigger] + text_excl))
    pre = reasoning_prefix(o, think_b, think_e, [trigger] + text_excl, o.think_in_prompt(True))
    if o.reasoning == "auto":
        pre = optional(or_(pre["content"], const(think_e)))
    return seq(pre, body)


@register_model_structural_tag("cohere")
def _cohere(fns, builtins, mode, o):
    """Cohere Command (XML tool calls): ``<cofl:tool_calls><cofl:tool_call id="N" name="NAME">
    <cofl:value name="KEY" type="raw|json|dict|list">VALUE</cofl:value>...</cofl:tool_call>
    ...</cofl:tool_calls>`` (``cohere_xml`` arguments); reasoning ``<|START_THINKING|>...
    <|END_THINKING|>``, the prompt opening it."""
    _no_builtins("cohere", builtins)
    think = ("<|START_THINKING|>", "<|END_THINKING|>")
    mk = lambda f: tag('<cofl:tool_call id="', seq(  # noqa: E731
        regex(r"\d+"), const(f'" name="{f.name}">'), o.args(f.parameters, "cohere_xml")), "</cofl:tool_call>")
    body = _section(o, mode, fns, mk, "<cofl:tool_calls>", "</cofl:tool_calls>", "", think)
    pre = reasoning_prefix(o, *think, [] if o.reasoning == "enabled" else think, o.think_in_prompt(True))
    return seq(pre, body)


# ---- entry point ------------------------------------------------------------------------


def _reasoning_mode(reasoning: Any) -> ReasoningMode:
    if isinstance(reasoning, bool):
        return "enabled" if reasoning else "disabled"
    if reasoning is None:
        return "disabled"
    if reasoning in ("enabled", "disabled", "auto"):
        return reasoning
    raise StructuralTagError("reasoning", f'must be a bool or "enabled", "disabled", "auto"; got {reasoning!r}')


def get_model_structural_tag(
    model: str,
    tools: Optional[Sequence[Any]] = None,
    tool_choice: Any = "auto",
    reasoning: Union[bool, ReasoningMode] = False,
    parallel_tool_calls: bool = True,
    *,
    prompt_ends_with_think: Optional[bool] = None,
    any_order: bool = False,
    exclude_special_tokens: bool = True,
    max_whitespace_cnt: Optional[int] = None,
    force_reasoning: bool = False,
    as_dict: bool = False,
) -> Any:
    """The structural tag for ``model``'s reasoning and tool-call output.

    Parameters
    ----------
    model : str
        A model key: ``llama``, ``qwen_3`` (Qwen2.5/Qwen3/QwQ/Hermes), ``qwen_3_coder`` /
        ``qwen_3_5``, ``deepseek_r1``, ``deepseek_v3_1``, ``deepseek_v3_2``, ``deepseek_v4``,
        ``deepseek_v4_1``, ``kimi``, ``kimi_k3``, ``harmony`` (gpt-oss), ``glm_4_7``,
        ``minimax``, ``minimax_m3``, ``cohere``, ``mistral``, ``mistral_nemo``, ``mimo``,
        ``exaone`` (and aliases; see :func:`list_model_structural_tags`). Every key of
        upstream xgrammar's registry is one; :func:`xgrammar2.get_model_structural_tag`
        builds upstream's exact tags.
    tools : list, optional
        OpenAI tools: ``{"type": "function", "function": {"name", "parameters", "strict"}}``;
        builtin tools ``{"type": ..., "name": ..., "parameters": ...}`` (Harmony only).
    tool_choice : "auto" | "none" | "required" | dict
        See :func:`read_tools`.
    reasoning : bool | "enabled" | "disabled" | "auto", default False
        Whether a reasoning block comes first (see the module docs). Upstream xgrammar's
        default is ``"enabled"``; here it is off unless asked for.
    parallel_tool_calls : bool, default True
        False allows at most one call (exactly one with ``required`` / a named tool).
    prompt_ends_with_think : bool, optional
        Whether the generation prompt already ends with the reasoning opener; the default
        follows the model's chat template.
    any_order, max_whitespace_cnt
        Passed to every tool-argument ``json_schema`` format.
    exclude_special_tokens : bool, default True
        Forbid the model's reasoning / tool markers inside free text.
    as_dict : bool, default False
        Return the plain dict instead of a pydantic ``StructuralTag``.

    Raises
    ------
    StructuralTagError
        Unknown model, bad tools or tool choice (a ValueError naming the value).
    """
    key = _ALIASES.get(model, model)
    builder = _REGISTRY.get(key)
    if builder is None:
        raise StructuralTagError(
            "model", f"unknown model format {model!r}; supported: {', '.join(list_model_structural_tags())}"
        )
    if not isinstance(parallel_tool_calls, bool):
        raise StructuralTagError("parallel_tool_calls", "must be a boolean")
    mode = _reasoning_mode(reasoning)
    fns, builtins, choice = read_tools(tools, tool_choice)
    opts = _Opts(mode, prompt_ends_with_think, any_order, exclude_special_tokens,
                 max_whitespace_cnt, parallel_tool_calls)
    fmt = builder(fns, builtins, choice, opts)
    tag_dict = {"type": "structural_tag", "format": fmt}
    if as_dict:
        return tag_dict
    from .models import StructuralTag

    return StructuralTag.model_validate(tag_dict)
