"""The error every problem in a Lark grammar raises: where (line, column) and what.

The message has upstream xgrammar's layout, so code that matches on it keeps working::

    Lark error at line 3, column 6: expected ':' after rule name
    item missing
         ^
"""

from typing import Optional

from ..exception import GrammarSyntaxError

__all__ = ["LarkGrammarError"]


class LarkGrammarError(GrammarSyntaxError):
    """A Lark grammar that cannot be read or compiled, or that uses a construct xgrammar2
    does not support. A ValueError and a RuntimeError (what upstream xgrammar raises).

    Attributes ``line`` and ``column`` (1-based) locate the problem; ``reason`` is the
    message without the location and source excerpt."""

    def __init__(self, message: str, line: int = 1, column: int = 1,
                 source: Optional[str] = None) -> None:
        self.reason = message
        self.line = line
        self.column = column
        text = f"Lark error at line {line}, column {column}: {message}"
        if source is not None:
            lines = source.split("\n")
            if 1 <= line <= len(lines):
                src_line = lines[line - 1].rstrip("\r")
                if src_line:
                    text += "\n" + src_line + "\n" + " " * max(0, column - 1) + "^"
        super().__init__(text)
