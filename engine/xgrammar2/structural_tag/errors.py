"""Errors raised while reading or converting a structural tag.

Every error names the JSON path of the offending value (``$.format.tags[2].end``) so that a
caller who wrote a large tag (hundreds of tools) can find the culprit without bisecting.
"""

import warnings
from typing import Any, Union

from ..exception import InvalidJSONError, InvalidStructuralTagError

__all__ = [
    "MESSAGE_PREFIX",
    "StructuralTagError",
    "StructuralTagJSONError",
    "path_join",
    "warn_approximation",
]


#: What every message starts with (upstream xgrammar's prefix for the same error class).
MESSAGE_PREFIX = "Invalid structural tag error: "


class StructuralTagError(InvalidStructuralTagError):
    """A structural tag is malformed (a ``ValueError``). ``path`` is the JSON path of the
    offending value, e.g. ``$.format.tags[2].end``; the message is
    ``"Invalid structural tag error: <path>: <detail>"``.

    ``code`` says what kind of problem a field has, when the reader knows it: "missing",
    "type" (wrong JSON type), "empty" (empty string or array), "item" (a bad array item) or
    "range" (a number out of range); None otherwise. It lets the reader put upstream
    xgrammar's wording for the field in front of the detail (see ``phrases.py``)."""

    def __init__(self, path: str, message: str, code: "str | None" = None):
        self.path = path
        self.detail = message
        self.code = code
        #: The JSON pointer inside a ``json_schema`` content's schema, when the error is the
        #: schema's (``#/properties/x``); None otherwise.
        self.schema_pointer: "str | None" = None
        super().__init__(f"{MESSAGE_PREFIX}{path}: {message}")


class StructuralTagJSONError(InvalidJSONError):
    """A structural tag given as text is not valid JSON (a ``ValueError``)."""


def path_join(path: str, *parts: Union[str, int]) -> str:
    """``path_join("$.format", "tags", 2, "end") == "$.format.tags[2].end"``."""
    out = path
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif p.isidentifier():
            out += "." + p
        else:
            out += "[" + _quote(p) + "]"
    return out


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def describe(value: Any) -> str:
    """A short description of a JSON value for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def warn_approximation(path: str, message: str) -> None:
    """Warns (UserWarning, attributed to the caller's caller) that the constraint at ``path``
    is not enforced exactly: ``message`` says what is approximated."""
    warnings.warn(f"{path}: {message}", stacklevel=3)
