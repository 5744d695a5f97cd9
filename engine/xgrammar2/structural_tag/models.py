"""Pydantic models of upstream xgrammar's structural-tag formats (same class names, fields
and defaults), so code that builds ``xgrammar.structural_tag.TagFormat(...)`` works with
``xgrammar2.structural_tag.TagFormat(...)``.

Validation of values that pydantic cannot express (a tag's begin starting with exactly one
trigger, non-empty ends around free text, ...) happens when the tag is converted, with the
JSON path of the offending value in the error.
"""

import json
from typing import Any, Dict, List, Literal, Optional, Tuple, Type, Union

try:
    from typing import Annotated
except ImportError:  # Python 3.8
    from typing_extensions import Annotated

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ConstStringFormat",
    "JSONSchemaFormat",
    "QwenXMLParameterFormat",
    "AnyTextFormat",
    "GrammarFormat",
    "RegexFormat",
    "TokenFormat",
    "ExcludeTokenFormat",
    "AnyTokensFormat",
    "SequenceFormat",
    "OrFormat",
    "TagFormat",
    "TriggeredTagsFormat",
    "TokenTriggeredTagsFormat",
    "TagsWithSeparatorFormat",
    "OptionalFormat",
    "PlusFormat",
    "StarFormat",
    "RepeatFormat",
    "DispatchFormat",
    "TokenDispatchFormat",
    "Format",
    "StructuralTagItem",
    "StructuralTag",
]

_MAX_I32 = 2_147_483_647

JSONSchemaStyle = Literal[
    "json",
    "qwen_xml",
    "minimax_xml",
    "minimax_m3_xml",
    "deepseek_xml",
    "glm_xml",
    "cohere_xml",
    "kimi_k3_xml",
    "deepseek_v4_1_xml",
]


# ---- leaf formats -----------------------------------------------------------------------


class ConstStringFormat(BaseModel):
    """Exactly the text ``value``."""

    type: Literal["const_string"] = "const_string"
    value: str


class JSONSchemaFormat(BaseModel):
    """A value of ``json_schema``, written as JSON (``style="json"``) or as one XML-like
    element per argument (``qwen_xml``: ``<parameter=key>value</parameter>``,
    ``minimax_xml``: ``<parameter name="key">value</parameter>``, ``deepseek_xml``:
    ``<｜DSML｜parameter name="key" string="true|false">value</｜DSML｜parameter>``,
    ``deepseek_v4_1_xml``, ``glm_xml``: ``<arg_key>key</arg_key><arg_value>value</arg_value>``,
    ``kimi_k3_xml``: ``<|open|>argument key="key" type="type"<|sep|>value<|close|>argument<|sep|>``,
    ``cohere_xml``: ``<cofl:value name="key" type="raw|json|dict|list">value</cofl:value>``
    recursively, ``minimax_m3_xml``: ``]<]minimax[>[<key>value]<]minimax[>[</key>``
    recursively); see ``docs/structural-tags.md``."""

    type: Literal["json_schema"] = "json_schema"
    json_schema: Union[bool, Dict[str, Any]]
    style: JSONSchemaStyle = "json"
    any_order: bool = False
    """Object properties may come in any order (key presence and uniqueness unchecked)."""
    max_whitespace_cnt: Optional[int] = None
    """Most consecutive whitespace characters; None = unbounded."""
    excludes: List[str] = []
    """Substrings forbidden in the string values without ``pattern`` / ``format`` and in
    property names, matched on the text as written (Kimi-K3's markers)."""


class AnyTextFormat(BaseModel):
    """Any text in which none of ``excludes`` appears (and, inside a tag, none of the tag's
    end strings)."""

    type: Literal["any_text"] = "any_text"
    excludes: List[str] = []
    max_tokens: Optional[int] = Field(default=None, ge=0, le=_MAX_I32)
    """Token budget: once spent, the text ends where it can (a rule attribute)."""
    max_chars: Optional[int] = Field(default=None, ge=0, le=_MAX_I32)
    """Code-point budget (a rule attribute)."""


class TokenFormat(BaseModel):
    """One token by id or string (token-level; not convertible by xgrammar2 yet)."""

    type: Literal["token"] = "token"
    token: Union[int, str]


class ExcludeTokenFormat(BaseModel):
    """One token not in ``exclude_tokens`` (token-level; not convertible by xgrammar2 yet)."""

    type: Literal["exclude_token"] = "exclude_token"
    exclude_tokens: List[Union[int, str]] = []


class AnyTokensFormat(BaseModel):
    """Any tokens not in ``exclude_tokens`` (token-level; not convertible by xgrammar2 yet)."""

    type: Literal["any_tokens"] = "any_tokens"
    exclude_tokens: List[Union[int, str]] = []
    max_tokens: Optional[int] = Field(default=None, ge=0, le=_MAX_I32)


class GrammarFormat(BaseModel):
    """Text of an EBNF grammar (start rule ``root``)."""

    type: Literal["grammar"] = "grammar"
    grammar: str


class RegexFormat(BaseModel):
    """Text matching a regular expression (whole match)."""

    type: Literal["regex"] = "regex"
    pattern: str


# ---- combinators ------------------------------------------------------------------------


class SequenceFormat(BaseModel):
    """The elements one after another."""

    type: Literal["sequence"] = "sequence"
    elements: List["Format"]


class OrFormat(BaseModel):
    """One of the elements."""

    type: Literal["or"] = "or"
    elements: List["Format"]


class TagFormat(BaseModel):
    """``begin``, then ``content``, then ``end`` (one of the strings when a list)."""

    type: Literal["tag"] = "tag"
    begin: Union[str, TokenFormat]
    content: "Format"
    end: Union[str, List[str], TokenFormat]


class TriggeredTagsFormat(BaseModel):
    """Free text; when a trigger appears, the tag whose begin starts with it must follow.

    ``at_least_one``: one tag first (no text before it). ``stop_after_first``: nothing after
    the first tag. ``excludes``: strings forbidden in the free text. Every tag's begin must
    start with exactly one trigger.
    """

    type: Literal["triggered_tags"] = "triggered_tags"
    triggers: List[str]
    tags: List[TagFormat]
    at_least_one: bool = False
    stop_after_first: bool = False
    excludes: List[str] = []


class TokenTriggeredTagsFormat(BaseModel):
    """Triggered tags with token triggers (token-level; not convertible by xgrammar2 yet)."""

    type: Literal["token_triggered_tags"] = "token_triggered_tags"
    trigger_tokens: List[Union[int, str]]
    tags: List[TagFormat]
    exclude_tokens: List[Union[int, str]] = []
    at_least_one: bool = False
    stop_after_first: bool = False


class TagsWithSeparatorFormat(BaseModel):
    """Zero or more tags (one or more with ``at_least_one``; at most one with
    ``stop_after_first``) separated by ``separator``, with no other text."""

    type: Literal["tags_with_separator"] = "tags_with_separator"
    tags: List[TagFormat]
    separator: str
    at_least_one: bool = False
    stop_after_first: bool = False


class OptionalFormat(BaseModel):
    """``content`` zero or one time."""

    type: Literal["optional"] = "optional"
    content: "Format"


class PlusFormat(BaseModel):
    """``content`` one or more times."""

    type: Literal["plus"] = "plus"
    content: "Format"


class StarFormat(BaseModel):
    """``content`` zero or more times."""

    type: Literal["star"] = "star"
    content: "Format"


class RepeatFormat(BaseModel):
    """``content`` between ``min`` and ``max`` times (``max=-1``: unbounded)."""

    type: Literal["repeat"] = "repeat"
    min: int
    max: int
    content: "Format"


class DispatchFormat(BaseModel):
    """Free text; when a pattern appears the paired format must follow. ``loop``: back to
    free text afterwards (else the format ends). ``excludes``: strings forbidden in the free
    text."""

    type: Literal["dispatch"] = "dispatch"
    rules: List[Tuple[str, "Format"]]
    loop: bool = True
    excludes: List[str] = []


class TokenDispatchFormat(BaseModel):
    """Dispatch on tokens (token-level; not convertible by xgrammar2 yet)."""

    type: Literal["token_dispatch"] = "token_dispatch"
    rules: List[Tuple[Union[int, str], "Format"]]
    loop: bool = True
    exclude_tokens: List[Union[int, str]] = []


class QwenXMLParameterFormat(BaseModel):
    """Deprecated: ``JSONSchemaFormat(style="qwen_xml")``."""

    type: Literal["qwen_xml_parameter"] = "qwen_xml_parameter"
    json_schema: Union[bool, Dict[str, Any]]


Format = Annotated[
    Union[
        AnyTextFormat,
        ConstStringFormat,
        JSONSchemaFormat,
        GrammarFormat,
        RegexFormat,
        QwenXMLParameterFormat,
        OrFormat,
        SequenceFormat,
        TagFormat,
        TriggeredTagsFormat,
        TokenTriggeredTagsFormat,
        TagsWithSeparatorFormat,
        OptionalFormat,
        PlusFormat,
        StarFormat,
        TokenFormat,
        ExcludeTokenFormat,
        AnyTokensFormat,
        RepeatFormat,
        DispatchFormat,
        TokenDispatchFormat,
    ],
    Field(discriminator="type"),
]
"""Any structural-tag format (discriminated by ``type``)."""

for _m in (
    SequenceFormat,
    OrFormat,
    TagFormat,
    TriggeredTagsFormat,
    TokenTriggeredTagsFormat,
    TagsWithSeparatorFormat,
    OptionalFormat,
    PlusFormat,
    StarFormat,
    RepeatFormat,
    DispatchFormat,
    TokenDispatchFormat,
):
    _m.model_rebuild()


# ---- top level --------------------------------------------------------------------------


class StructuralTagItem(BaseModel):
    """Deprecated (legacy form): text ``begin``, JSON matching ``schema``, text ``end``."""

    model_config = ConfigDict(populate_by_name=True, arbitrary_types_allowed=True)

    begin: str
    schema_: Union[str, Type[BaseModel], Dict[str, Any]] = Field(alias="schema")
    end: str


class StructuralTag(BaseModel):
    """A whole structural tag: ``{"type": "structural_tag", "format": {...}}`` (the
    ``response_format`` of an OpenAI-style request)."""

    type: Literal["structural_tag"] = "structural_tag"
    format: Format

    @staticmethod
    def from_legacy_structural_tag(
        tags: List[StructuralTagItem], triggers: List[str]
    ) -> "StructuralTag":
        """The legacy ``(tags, triggers)`` form as a triggered-tags structural tag."""
        converted = []
        for tag in tags:
            schema = tag.schema_
            if isinstance(schema, str):
                schema = json.loads(schema)
            elif isinstance(schema, type) and issubclass(schema, BaseModel):
                schema = schema.model_json_schema()
            converted.append(
                TagFormat(begin=tag.begin, content=JSONSchemaFormat(json_schema=schema), end=tag.end)
            )
        return StructuralTag(format=TriggeredTagsFormat(triggers=triggers, tags=converted))

    @staticmethod
    def from_json(json_str: Union[str, Dict[str, Any]]) -> "StructuralTag":
        """Validates JSON text or a dict."""
        if isinstance(json_str, str):
            return StructuralTag.model_validate_json(json_str)
        if isinstance(json_str, dict):
            return StructuralTag.model_validate(json_str)
        raise ValueError("Invalid JSON string or dictionary")

    def to_ebnf(self, **kwargs: Any) -> str:
        """The EBNF text of this structural tag (see
        :func:`xgrammar2.structural_tag.structural_tag_to_ebnf`)."""
        from .converter import structural_tag_to_ebnf

        return structural_tag_to_ebnf(self, **kwargs)
