"""Tokens of a Lark grammar (llguidance's / upstream xgrammar's dialect), each with its
line and column.

Newlines are tokens: a definition ends at the end of its line unless the next line starts
with ``|``. Comments (``#`` or ``//`` to the end of the line) and other whitespace are
dropped. The JSON value after ``%json``, ``%regex``, ``%grammar_options`` and
``%llguidance`` is read here (it may span lines) and kept as one token.
"""

import json
from typing import Any, List, Optional

from .errors import LarkGrammarError

__all__ = ["Token", "tokenize"]

# Token kinds.
NAME = "name"
STRING = "string"
REGEX = "regex"
NUMBER = "number"
SPECIAL = "special token"
GREF = "grammar reference"
JSON = "%json"
REGEXEXT = "%regex"
OPTIONS = "%grammar_options"
IMPORT = "%import"
IGNORE = "%ignore"
LARK = "%lark"
OVERRIDE = "%override"
EXTEND = "%extend"
DECLARE = "%declare"
IF = "%if"
DIRECTIVE = "directive"  # any other %word
NEWLINE = "newline"
END = "end of grammar"

_PUNCT = {
    ":": "':'", ",": "','", "=": "'='", "(": "'('", ")": "')'", "[": "'['", "]": "']'",
    "{": "'{'", "}": "'}'", "|": "'|'", "&": "'&'", "~": "'~'", "?": "'?'", "*": "'*'",
    "+": "'+'", ".": "'.'",
}

_JSON_DIRECTIVES = {"%json": JSON, "%regex": REGEXEXT, "%grammar_options": OPTIONS,
                    "%llguidance": OPTIONS}
_PLAIN_DIRECTIVES = {"%import": IMPORT, "%ignore": IGNORE, "%lark": LARK,
                     "%override": OVERRIDE, "%extend": EXTEND, "%declare": DECLARE, "%if": IF}


class Token:
    """``kind`` is one of the constants above or a punctuation string (``":"``, ``".."``,
    ``"->"``, ``"::"``); ``text`` the source text (a regex's pattern, a string's raw text
    with its quotes and flag); ``flags`` a regex's flags; ``value`` a JSON token's value."""

    __slots__ = ("kind", "text", "flags", "value", "line", "column")

    def __init__(self, kind: str, text: str, line: int, column: int,
                 flags: str = "", value: Any = None) -> None:
        self.kind = kind
        self.text = text
        self.flags = flags
        self.value = value
        self.line = line
        self.column = column

    def describe(self) -> str:
        if self.kind == END:
            return "the end of the grammar"
        if self.kind == NEWLINE:
            return "the end of the line"
        if len(self.kind) <= 2:  # punctuation
            return f"'{self.text}'"
        return f"{self.kind} {self.text!r}" if self.text else self.kind

    def __repr__(self) -> str:
        return f"Token({self.kind!r}, {self.text!r}, {self.line}:{self.column})"


def _is_name_start(c: str) -> bool:
    return c == "_" or ("a" <= c <= "z") or ("A" <= c <= "Z")


def _is_name_char(c: str) -> bool:
    return _is_name_start(c) or ("0" <= c <= "9") or c == "-"


class _Lexer:
    def __init__(self, source: str) -> None:
        self.s = source
        self.n = len(source)
        self.pos = 0
        self.line = 1
        self.line_start = 0  # offset of the current line's first character

    def err(self, message: str, line: int, column: int) -> LarkGrammarError:
        return LarkGrammarError(message, line, column, self.s)

    def col(self, pos: Optional[int] = None) -> int:
        return (self.pos if pos is None else pos) - self.line_start + 1

    def peek(self, k: int = 0) -> str:
        i = self.pos + k
        return self.s[i] if i < self.n else ""

    def tokens(self) -> List[Token]:
        out: List[Token] = []
        s = self.s
        while self.pos < self.n:
            c = s[self.pos]
            if c in " \t\f\v":
                self.pos += 1
                continue
            if c == "\n" or c == "\r":
                out.append(Token(NEWLINE, "\n", self.line, self.col()))
                if c == "\r" and self.peek(1) == "\n":
                    self.pos += 1
                self.pos += 1
                if s[self.pos - 1] == "\n":
                    self.line += 1
                    self.line_start = self.pos
                continue
            if c == "#" or (c == "/" and self.peek(1) == "/"):
                while self.pos < self.n and s[self.pos] not in "\r\n":
                    self.pos += 1
                continue
            line, column = self.line, self.col()
            if c == ":":
                if self.peek(1) == ":":
                    out.append(Token("::", "::", line, column))
                    self.pos += 2
                else:
                    out.append(Token(":", ":", line, column))
                    self.pos += 1
            elif c == ".":
                if self.peek(1) == ".":
                    out.append(Token("..", "..", line, column))
                    self.pos += 2
                else:
                    out.append(Token(".", ".", line, column))
                    self.pos += 1
            elif c == "-":
                if self.peek(1) == ">":
                    out.append(Token("->", "->", line, column))
                    self.pos += 2
                elif self.peek(1).isdigit():
                    out.append(self.number())
                else:
                    raise self.err("unexpected '-' character", line, column)
            elif c == "+" and self.peek(1).isdigit() and self.peek(1).isascii():
                out.append(self.number())
            elif c in _PUNCT and c not in "?":
                out.append(Token(c, c, line, column))
                self.pos += 1
            elif c == "?":
                if _is_name_start(self.peek(1)):
                    out.append(self.name())
                else:
                    out.append(Token("?", "?", line, column))
                    self.pos += 1
            elif c == "!":
                if _is_name_start(self.peek(1)):
                    out.append(self.name())
                else:
                    raise self.err("unexpected '!' character", line, column)
            elif c == '"':
                out.append(self.string())
            elif c == "/":
                out.append(self.regex())
            elif c == "<":
                out.append(self.special())
            elif c == "@":
                out.append(self.grammar_ref())
            elif c == "%":
                out.append(self.directive())
            elif _is_name_start(c):
                out.append(self.name())
            elif c.isdigit() and c.isascii():
                out.append(self.number())
            elif c == "'":
                raise self.err("string literals use double quotes (\"...\")", line, column)
            else:
                raise self.err(f"unexpected character {c!r}", line, column)
        out.append(Token(END, "", self.line, self.col()))
        return out

    def name(self) -> Token:
        start, column = self.pos, self.col()
        if self.s[self.pos] in "?!":
            self.pos += 1
        while self.pos < self.n and _is_name_char(self.s[self.pos]):
            self.pos += 1
        return Token(NAME, self.s[start:self.pos], self.line, column)

    def number(self) -> Token:
        start, column = self.pos, self.col()
        s = self.s
        if s[self.pos] in "+-":
            self.pos += 1
        while self.pos < self.n and s[self.pos].isascii() and s[self.pos].isdigit():
            self.pos += 1
        if self.peek() == "." and self.peek(1) != "." and self.peek(1).isdigit():
            self.pos += 1
            while self.pos < self.n and s[self.pos].isascii() and s[self.pos].isdigit():
                self.pos += 1
        if self.peek() in ("e", "E") and (self.peek(1).isdigit()
                                          or (self.peek(1) in "+-" and self.peek(2).isdigit())):
            self.pos += 2
            while self.pos < self.n and s[self.pos].isascii() and s[self.pos].isdigit():
                self.pos += 1
        return Token(NUMBER, s[start:self.pos], self.line, column)

    def string(self) -> Token:
        start, line, column = self.pos, self.line, self.col()
        s = self.s
        self.pos += 1
        while self.pos < self.n:
            c = s[self.pos]
            if c == "\\":
                self.pos += 2
                continue
            if c in "\r\n":
                break
            self.pos += 1
            if c == '"':
                flags = ""
                if self.peek() == "i":  # (as Lark: "a"iNAME is "a"i then NAME)
                    flags = "i"
                    self.pos += 1
                return Token(STRING, s[start:self.pos], line, column, flags=flags)
        raise self.err("unterminated string literal", line, column)

    def regex(self) -> Token:
        line, column = self.line, self.col()
        s = self.s
        self.pos += 1
        start = self.pos
        while self.pos < self.n:
            c = s[self.pos]
            if c == "\\":
                if self.pos + 1 < self.n and s[self.pos + 1] in "\r\n":
                    break
                self.pos += 2
                continue
            if c in "\r\n":
                break
            if c == "/":
                pattern = s[start:self.pos]
                self.pos += 1
                fstart = self.pos
                while self.pos < self.n and s[self.pos].isascii() and s[self.pos].isalpha():
                    self.pos += 1
                return Token(REGEX, pattern, line, column, flags=s[fstart:self.pos])
            self.pos += 1
        raise self.err("unterminated regular expression", line, column)

    def special(self) -> Token:
        start, line, column = self.pos, self.line, self.col()
        s = self.s
        self.pos += 1
        while self.pos < self.n and s[self.pos] != ">":
            if s[self.pos].isspace() or s[self.pos] == "<":
                raise self.err("invalid special token (no whitespace or '<' inside <...>)",
                               line, column)
            self.pos += 1
        if self.pos >= self.n:
            raise self.err("unterminated special token", line, column)
        self.pos += 1
        if self.pos - start == 2:
            raise self.err("empty special token '<>'", line, column)
        return Token(SPECIAL, s[start:self.pos], line, column)

    def grammar_ref(self) -> Token:
        start, line, column = self.pos, self.line, self.col()
        self.pos += 1
        while self.pos < self.n and (_is_name_char(self.s[self.pos]) or self.s[self.pos].isdigit()):
            self.pos += 1
        if self.pos == start + 1:
            raise self.err("empty grammar reference", line, column)
        return Token(GREF, self.s[start + 1:self.pos], line, column)

    def directive(self) -> Token:
        start, line, column = self.pos, self.line, self.col()
        self.pos += 1
        while self.pos < self.n and (self.s[self.pos] == "_" or
                                     (self.s[self.pos].isascii() and self.s[self.pos].isalpha())):
            self.pos += 1
        word = self.s[start:self.pos]
        kind = _JSON_DIRECTIVES.get(word)
        if kind is not None:
            return self.json_value(kind, word, line, column)
        return Token(_PLAIN_DIRECTIVES.get(word, DIRECTIVE), word, line, column)

    def json_value(self, kind: str, word: str, line: int, column: int) -> Token:
        s = self.s
        while self.pos < self.n and s[self.pos] in " \t\r\n\f\v":
            if s[self.pos] == "\n":
                self.line += 1
                self.line_start = self.pos + 1
            self.pos += 1
        try:
            value, end = json.JSONDecoder(strict=False).raw_decode(s, self.pos)
        except json.JSONDecodeError as e:
            raise self.err(f"failed to parse JSON value after {word}: {e.msg}",
                           line, column) from None
        except RecursionError:
            raise self.err(f"the JSON value after {word} is nested too deeply",
                           line, column) from None
        # the value alone counts towards the nesting bound (not brackets elsewhere)
        from ..exception import GrammarLimitError
        from ..limits import check_json_nesting

        try:
            check_json_nesting(value, f"the JSON value after {word}")
        except GrammarLimitError as e:
            raise self.err(str(e), line, column) from None
        # Keep line / column right past the value.
        nl = s.count("\n", self.pos, end)
        if nl:
            self.line += nl
            self.line_start = s.rfind("\n", self.pos, end) + 1
        self.pos = end
        return Token(kind, word, line, column, value=value)


def tokenize(source: str) -> List[Token]:
    return _Lexer(source).tokens()
