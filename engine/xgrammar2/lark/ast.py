"""The syntax tree of a Lark grammar."""

from typing import Any, Dict, List, Optional, Tuple

__all__ = [
    "Node", "Seq", "Alt", "Rep", "Str", "Range", "Regex", "Name", "Json", "RegexExt",
    "NestedLark", "SpecialToken", "GrammarRef", "Attr", "Definition", "Import", "Document",
]


class Node:
    __slots__ = ("line", "column")

    def __init__(self, line: int, column: int) -> None:
        self.line = line
        self.column = column


class Seq(Node):
    __slots__ = ("items",)

    def __init__(self, line: int, column: int, items: List[Node]) -> None:
        super().__init__(line, column)
        self.items = items


class Alt(Node):
    __slots__ = ("items",)

    def __init__(self, line: int, column: int, items: List[Node]) -> None:
        super().__init__(line, column)
        self.items = items


class Rep(Node):
    """``item`` repeated ``lo`` to ``hi`` times (``hi`` None: unbounded)."""

    __slots__ = ("item", "lo", "hi")

    def __init__(self, line: int, column: int, item: Node, lo: int, hi: Optional[int]) -> None:
        super().__init__(line, column)
        self.item = item
        self.lo = lo
        self.hi = hi


class Str(Node):
    """A string literal (its decoded text); ``nocase`` for the ``i`` flag."""

    __slots__ = ("text", "nocase")

    def __init__(self, line: int, column: int, text: str, nocase: bool = False) -> None:
        super().__init__(line, column)
        self.text = text
        self.nocase = nocase


class Range(Node):
    """``"a".."z"``: one code point from ``lo`` to ``hi``."""

    __slots__ = ("lo", "hi")

    def __init__(self, line: int, column: int, lo: int, hi: int) -> None:
        super().__init__(line, column)
        self.lo = lo
        self.hi = hi


class Regex(Node):
    __slots__ = ("pattern", "flags")

    def __init__(self, line: int, column: int, pattern: str, flags: str) -> None:
        super().__init__(line, column)
        self.pattern = pattern
        self.flags = flags


class Name(Node):
    """A reference to a rule or a terminal (the name without a ``?`` / ``!`` prefix)."""

    __slots__ = ("name",)

    def __init__(self, line: int, column: int, name: str) -> None:
        super().__init__(line, column)
        self.name = name


class Json(Node):
    """``%json {...}``: a JSON schema."""

    __slots__ = ("schema",)

    def __init__(self, line: int, column: int, schema: Any) -> None:
        super().__init__(line, column)
        self.schema = schema


class RegexExt(Node):
    """``%regex {...}``: llguidance's structured regex (substring_*)."""

    __slots__ = ("spec",)

    def __init__(self, line: int, column: int, spec: Any) -> None:
        super().__init__(line, column)
        self.spec = spec


class NestedLark(Node):
    """``%lark { ... }``: a whole grammar with its own namespace."""

    __slots__ = ("doc",)

    def __init__(self, line: int, column: int, doc: "Document") -> None:
        super().__init__(line, column)
        self.doc = doc


class SpecialToken(Node):
    """``<|name|>`` (by its text) or ``<[ids]>`` (by id); ``text`` includes the brackets."""

    __slots__ = ("text",)

    def __init__(self, line: int, column: int, text: str) -> None:
        super().__init__(line, column)
        self.text = text


class GrammarRef(Node):
    """``@name``: a grammar from ``named_grammars``."""

    __slots__ = ("name",)

    def __init__(self, line: int, column: int, name: str) -> None:
        super().__init__(line, column)
        self.name = name


class Attr:
    """One rule attribute (``lazy``, ``stop=...``): its value and where it was written."""

    __slots__ = ("key", "value", "line", "column")

    def __init__(self, key: str, value: Any, line: int, column: int) -> None:
        self.key = key
        self.value = value
        self.line = line
        self.column = column


class Definition:
    """``name: body`` (a rule) or ``NAME: body`` (a terminal)."""

    __slots__ = ("name", "is_terminal", "attrs", "body", "line", "column", "mode")

    def __init__(self, name: str, is_terminal: bool, body: Node, line: int, column: int,
                 attrs: Optional[Dict[str, Attr]] = None, mode: str = "define") -> None:
        self.name = name
        self.is_terminal = is_terminal
        self.attrs: Dict[str, Attr] = attrs or {}
        self.body = body
        self.line = line
        self.column = column
        self.mode = mode  # "define", "override" or "extend"


class Import:
    __slots__ = ("path", "local", "line", "column")

    def __init__(self, path: str, local: str, line: int, column: int) -> None:
        self.path = path
        self.local = local
        self.line = line
        self.column = column


class Document:
    """One Lark grammar (the top level, a ``%lark {...}`` block or a named grammar)."""

    __slots__ = ("definitions", "ignores", "imports", "options", "declares", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self.definitions: List[Definition] = []
        self.ignores: List[Node] = []
        self.imports: List[Import] = []
        self.options: List[Tuple[Any, int, int]] = []  # (JSON value, line, column)
        self.declares: List[Tuple[str, int, int]] = []
