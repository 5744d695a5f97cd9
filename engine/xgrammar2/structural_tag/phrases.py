"""Upstream xgrammar's wording for malformed structural-tag fields.

xgrammar2's reader names the JSON path of a bad field and what is wrong with it
(``$.format.begin: must be a string, got a number``). Code written against upstream
xgrammar matches on upstream's sentences ("Tag format's begin field must be a string"), so
the reader puts upstream's sentence for the field in front of its own detail:

    Invalid structural tag error: $.format.begin: Tag format's begin field must be a
    string (must be a string, got a number)

The table is keyed by (format type, field) and by the kind of problem (the ``code`` of
:class:`~.errors.StructuralTagError`: "missing", "type", "empty", "item", "range"; "*" is
any of them).
"""

import re
from typing import Dict, Optional, Tuple

from .errors import StructuralTagError

__all__ = ["annotate", "PHRASES"]

_ANY = "*"


def _tags_phrases(name: str) -> Dict[str, str]:
    return {
        "missing": f"{name} format must have a tags field with an array",
        "type": f"{name} format must have a tags field with an array",
        "empty": f"{name} format's tags must be non-empty",
    }


def _elements_phrases(name: str) -> Dict[str, str]:
    return {
        "missing": f"{name} format must have an elements field with an array",
        "type": f"{name} format must have an elements field with an array",
        "empty": f"{name} format must have at least one element",
    }


def _budget(field: str, fmt: str) -> Dict[str, str]:
    return {_ANY: f"{field} in {fmt} must be a non-negative 32-bit integer or null"}


_STYLES = ('style must be "json", "qwen_xml", "minimax_xml", "minimax_m3_xml", "deepseek_xml", '
           '"glm_xml", "cohere_xml", "kimi_k3_xml", or "deepseek_v4_1_xml"')

#: (format type, field) -> {problem code or "*": upstream's sentence}
PHRASES: Dict[Tuple[str, str], Dict[str, str]] = {
    ("const_string", "value"): {_ANY: "ConstString format must have a value field with a string"},
    ("json_schema", "json_schema"): {
        _ANY: "JSON schema format must have a json_schema field with a object or boolean value"},
    ("qwen_xml_parameter", "json_schema"): {
        _ANY: "Qwen XML Parameter format must have a json_schema field with a object or boolean value"},
    ("json_schema", "style"): {_ANY: _STYLES},
    ("json_schema", "excludes"): {_ANY: "JSONSchema format's excludes must be an array of non-empty strings"},
    ("json_schema", "any_order"): {_ANY: "any_order must be a boolean"},
    ("json_schema", "max_whitespace_cnt"): {_ANY: "max_whitespace_cnt must be a positive integer"},
    ("any_text", "excludes"): {
        "type": "AnyText format's excludes field must be an array",
        "item": "AnyText format's excluded_strs array must contain strings",
    },
    ("any_text", "max_tokens"): _budget("max_tokens", "any_text"),
    ("any_text", "max_chars"): _budget("max_chars", "any_text"),
    ("any_tokens", "max_tokens"): _budget("max_tokens", "any_tokens"),
    ("any_tokens", "exclude_tokens"): {_ANY: "exclude_tokens must be an array"},
    ("exclude_token", "exclude_tokens"): {_ANY: "exclude_tokens must be an array"},
    ("token", "token"): {"missing": "TokenFormat must have a token field",
                         "type": "Token ID must be an integer"},
    ("grammar", "grammar"): {_ANY: "Grammar format must have a grammar field with a non-empty string"},
    ("regex", "pattern"): {_ANY: "Regex format must have a pattern field with a non-empty string"},
    ("sequence", "elements"): _elements_phrases("Sequence"),
    ("or", "elements"): _elements_phrases("Or"),
    ("tag", "begin"): {"missing": "Tag format's begin field must be a string",
                       "type": "Tag format's begin field must be a string"},
    ("tag", "content"): {"missing": "Tag format must have a content field"},
    ("tag", "end"): {
        "missing": "Tag format must have an end field",
        "type": "Tag format's end field must be a string or array of strings",
        "empty": "Tag format's end array cannot be empty",
        "item": "Tag format's end array must contain only strings",
    },
    ("triggered_tags", "triggers"): {
        "missing": "Triggered tags format must have a triggers field with an array",
        "type": "Triggered tags format must have a triggers field with an array",
        "empty": "Triggered tags format's triggers must be non-empty",
        "item": "Triggered tags format's triggers must be non-empty strings",
    },
    ("triggered_tags", "tags"): _tags_phrases("Triggered tags"),
    ("triggered_tags", "excludes"): {_ANY: "Triggered tags format's excluded_strs must be non-empty strings"},
    ("tags_with_separator", "tags"): _tags_phrases("Tags with separator"),
    ("tags_with_separator", "separator"): {
        _ANY: "Tags with separator format's separator field must be a string"},
    ("token_triggered_tags", "trigger_tokens"): {
        _ANY: "TokenTriggeredTagsFormat must have a trigger_tokens field"},
    ("token_triggered_tags", "tags"): {
        _ANY: "TokenTriggeredTagsFormat must have a tags field with an array"},
    ("optional", "content"): {"missing": "Optional format must have a content field"},
    ("plus", "content"): {"missing": "Plus format must have a content field"},
    ("star", "content"): {"missing": "Star format must have a content field"},
    ("repeat", "content"): {"missing": "Repeat format must have a content field"},
    ("repeat", "min"): {"missing": "Repeat format must have a min field (number)",
                        "type": "Repeat format must have a min field (number)",
                        "range": "Repeat min must be >= 0"},
    ("repeat", "max"): {"missing": "Repeat format must have a max field (number)",
                        "type": "Repeat format must have a max field (number)",
                        "range": "Repeat max must be -1 (unbounded) or >= 0",
                        "order": "Repeat min must be <= max"},
    ("dispatch", "rules"): {"missing": "TagDispatch format must have a rules field with an array",
                            "type": "TagDispatch format must have a rules field with an array"},
    ("token_dispatch", "rules"): {"missing": "TokenDispatch format must have a rules field with an array",
                                  "type": "TokenDispatch format must have a rules field with an array"},
}

for _t in ("triggered_tags", "tags_with_separator", "token_triggered_tags"):
    PHRASES[(_t, "at_least_one")] = {_ANY: "at_least_one must be a boolean"}
    PHRASES[(_t, "stop_after_first")] = {_ANY: "stop_after_first must be a boolean"}

_FIELD = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)(\[\d+\])?$")


def annotate(err: StructuralTagError, fmt_type: str, fmt_path: str) -> StructuralTagError:
    """``err`` with upstream's sentence for its field in front of the detail, when ``err``
    is about a field of the format ``fmt_type`` read at ``fmt_path`` (or an item of one)
    and the table has a sentence for it; else ``err`` itself."""
    phrase = _phrase(err, fmt_type, fmt_path)
    if phrase is None:
        return err
    out = StructuralTagError(err.path, f"{phrase} ({err.detail})", err.code)
    out.schema_pointer = err.schema_pointer
    out.upstream_phrase = phrase  # type: ignore[attr-defined]
    return out


def _phrase(err: StructuralTagError, fmt_type: str, fmt_path: str) -> Optional[str]:
    if err.code is None or getattr(err, "upstream_phrase", None) is not None:
        return None
    if not err.path.startswith(fmt_path):
        return None
    m = _FIELD.fullmatch(err.path[len(fmt_path):])
    if m is None or (m.group(2) is not None) != (err.code == "item"):
        return None
    table = PHRASES.get((fmt_type, m.group(1)))
    if table is None:
        return None
    return table.get(err.code, table.get(_ANY))
