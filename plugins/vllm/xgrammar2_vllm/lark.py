"""A small Lark -> EBNF converter for the ``grammar`` requests vLLM classifies as Lark (no
line contains ``::=``).

xgrammar2 reads EBNF in upstream xgrammar's dialect, not Lark. Grammars that use only the
literal part of Lark are converted exactly:

    start: greeting (" " NAME)?        rules / terminals, `:` definitions, `|` alternatives
    greeting: "hi" | "hello"           "strings" (Python escapes), "a".."z" ranges
    NAME: ("a".."z")+                  ( ) grouping, [ ] optional, ? * + repetition,
                                       x ~ 3 / x ~ 2..5 bounded repetition, ?rule / !rule,
                                       -> aliases (ignored: they only name tree nodes)

Everything that changes what text matches in ways EBNF cannot say literally is rejected with
a ValueError naming the construct: regular-expression terminals ``/.../``, case-insensitive
strings ``"..."i``, directives (``%import``, ``%ignore``, ``%declare``, ...), templates and
priorities on terminals that overlap. The error tells the user to send EBNF instead.
"""

from __future__ import annotations

import ast
import re
from typing import Dict, List, Tuple

__all__ = ["lark_to_ebnf", "LarkConversionError"]


class LarkConversionError(ValueError):
    pass


_HINT = (
    "; the xgrammar2 backend accepts EBNF (rules written `name ::= ...`, root rule `root`) "
    "and only the literal subset of Lark (strings, ranges, rule references, ( ) [ ] ? * + ~)"
)

_TOKEN_RE = re.compile(
    r"""
    (?P<comment>//[^\n]*|\#[^\n]*)
  | (?P<newline>\n)
  | (?P<ws>[ \t\r\f]+)
  | (?P<string>"(?:\\.|[^"\\\n])*"i?|'(?:\\.|[^'\\\n])*'i?)
  | (?P<regexp>/(?:\\.|[^/\\\n])+/[imslux]*)
  | (?P<arrow>->)
  | (?P<directive>%[A-Za-z_]+)
  | (?P<name>[?!]?[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>\d+)
  | (?P<op>\.\.|[~:|()\[\]?*+.{},])
    """,
    re.VERBOSE,
)


def _err(msg: str) -> LarkConversionError:
    return LarkConversionError("unsupported Lark grammar: " + msg + _HINT)


def _tokenize(text: str) -> List[Tuple[str, str]]:
    out: List[Tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise _err(f"cannot read {text[pos:pos + 20]!r}")
        kind = m.lastgroup
        val = m.group()
        pos = m.end()
        if kind in ("comment", "ws"):
            continue
        if kind == "regexp":
            raise _err(f"regular-expression terminal {val}")
        if kind == "directive":
            raise _err(f"directive {val}")
        out.append((kind, val))
    out.append(("newline", "\n"))
    return out


def _escape_char(ch: str, in_class: bool) -> str:
    o = ord(ch)
    if ch == "\\":
        return "\\\\"
    if ch == "\n":
        return "\\n"
    if ch == "\r":
        return "\\r"
    if ch == "\t":
        return "\\t"
    if o < 0x20 or o == 0x7F:
        return f"\\x{o:02x}"
    if in_class and ch in "]^-[":
        return "\\" + ch
    if not in_class and ch == '"':
        return '\\"'
    return ch


def _literal(tok: str) -> str:
    if tok.endswith("i"):
        raise _err(f"case-insensitive string {tok}")
    try:
        value = ast.literal_eval(tok)
    except (ValueError, SyntaxError) as e:
        raise _err(f"bad string literal {tok}: {e}") from None
    if not isinstance(value, str):
        raise _err(f"bad string literal {tok}")
    return value


class _Parser:
    def __init__(self, toks: List[Tuple[str, str]], names: Dict[str, str]) -> None:
        self.toks = toks
        self.i = 0
        self.names = names
        self.used: set = set()

    def peek(self) -> Tuple[str, str]:
        return self.toks[self.i] if self.i < len(self.toks) else ("eof", "")

    def take(self) -> Tuple[str, str]:
        t = self.peek()
        self.i += 1
        return t

    def expect(self, val: str) -> None:
        t = self.take()
        if t[1] != val:
            raise _err(f"expected {val!r}, got {t[1]!r}")

    def expansions(self) -> str:
        alts = [self.alternative()]
        while self.peek()[1] == "|":
            self.take()
            alts.append(self.alternative())
        return alts[0] if len(alts) == 1 else " | ".join(alts)

    def alternative(self) -> str:
        items = []
        while True:
            kind, val = self.peek()
            if kind == "arrow":
                self.take()
                if self.take()[0] != "name":
                    raise _err("expected an alias name after ->")
                continue
            if kind in ("string", "name") or val in ("(", "["):
                items.append(self.item())
                continue
            break
        if not items:
            return '""'
        return " ".join(items)

    def item(self) -> str:
        atom = self.atom()
        kind, val = self.peek()
        if val in ("?", "*", "+"):
            self.take()
            return f"{atom}{val}"
        if val == "~":
            self.take()
            lo = self.take()
            if lo[0] != "number":
                raise _err("expected a number after ~")
            if self.peek()[1] == "..":
                self.take()
                hi = self.take()
                if hi[0] != "number":
                    raise _err("expected a number after ..")
                return f"{atom}{{{int(lo[1])},{int(hi[1])}}}"
            return f"{atom}{{{int(lo[1])}}}"
        return atom

    def atom(self) -> str:
        kind, val = self.take()
        if kind == "string":
            text = _literal(val)
            if self.peek()[1] == "..":
                self.take()
                k2, v2 = self.take()
                if k2 != "string":
                    raise _err("expected a string after .. in a range")
                hi = _literal(v2)
                if len(text) != 1 or len(hi) != 1 or ord(text) > ord(hi):
                    raise _err(f"bad range {val}..{v2}")
                return f"[{_escape_char(text, True)}-{_escape_char(hi, True)}]"
            if not text:
                return '""'
            return '"' + "".join(_escape_char(c, False) for c in text) + '"'
        if kind == "name":
            if val[0] in "?!":
                raise _err(f"unexpected {val}")
            if self.peek()[1] == "{":
                raise _err(f"template {val}{{...}}")
            if val not in self.names:
                raise _err(f"undefined rule or terminal {val}")
            self.used.add(val)
            return self.names[val]
        if val == "(":
            inner = self.expansions()
            self.expect(")")
            return f"({inner})"
        if val == "[":
            inner = self.expansions()
            self.expect("]")
            return f"({inner})?"
        raise _err(f"unexpected {val!r}")


def _split_rules(toks: List[Tuple[str, str]]) -> List[Tuple[str, List[Tuple[str, str]]]]:
    """[(name, body tokens)]; a definition is `name:` or `name.N:` at the start of a line."""
    rules: List[Tuple[str, List[Tuple[str, str]]]] = []
    i, at_line_start = 0, True
    cur = None
    while i < len(toks):
        kind, val = toks[i]
        if kind == "newline":
            at_line_start = True
            i += 1
            continue
        if at_line_start and kind == "name":
            j = i + 1
            if j + 1 < len(toks) and toks[j][1] == "." and toks[j + 1][0] == "number":
                j += 2  # priority: irrelevant to what matches
            if j < len(toks) and toks[j][1] == "{":
                raise _err(f"template {val}{{...}}")
            if j < len(toks) and toks[j][1] == ":":
                cur = (val.lstrip("?!"), [])
                rules.append(cur)
                i = j + 1
                at_line_start = False
                continue
        at_line_start = False
        if cur is None:
            raise _err(f"text before the first rule: {val!r}")
        cur[1].append((kind, val))
        i += 1
    return rules


def lark_to_ebnf(text: str) -> str:
    """EBNF (root rule ``root``, from Lark's ``start``) equivalent to a literal-only Lark
    grammar. Raises LarkConversionError (a ValueError) otherwise."""
    if not isinstance(text, str) or not text.strip():
        raise _err("empty grammar")
    rules = _split_rules(_tokenize(text))
    if not rules:
        raise _err("no rules")
    names: Dict[str, str] = {}
    for name, _ in rules:
        if name in names:
            raise _err(f"rule {name} is defined twice")
        if name == "start":
            names[name] = "root"
        elif name == "root":
            names[name] = "lark_root_"
        else:
            names[name] = name
    if "start" not in names:
        raise _err("no `start` rule")
    lines = []
    for name, body in rules:
        p = _Parser(body, names)
        expr = p.expansions()
        if p.i != len(body):
            raise _err(f"cannot parse rule {name} near {body[p.i][1]!r}")
        lines.append(f"{names[name]} ::= {expr}")
    root = [ln for ln in lines if ln.startswith("root ::= ")]
    rest = [ln for ln in lines if not ln.startswith("root ::= ")]
    return "\n".join(root + rest) + "\n"
