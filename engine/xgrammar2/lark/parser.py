"""Lark grammar text -> :class:`~xgrammar2.lark.ast.Document` (recursive descent over the
tokens of :mod:`xgrammar2.lark.lexer`).

The dialect is llguidance's Lark, as upstream xgrammar 0.2.8 reads it::

    item:      definition | %import ... | %ignore expr | %grammar_options {json}
             | %override definition | %extend definition | %declare NAME...
    definition: NAME attrs? ":" alternatives
    attrs:     "[" attr ("," attr)* "]"       (rules only: lazy, stop=..., capture, ...)
    alternatives: sequence ("|" sequence)*   ("|" may start a continuation line)
    sequence:  expr* ("->" NAME)?            (aliases shape parse trees only: ignored)
    expr:      atom ("?" | "*" | "+" | "~" N (".." M)? | "{" N? ("," M?)? "}")?
    atom:      "(" alternatives ")" | "[" alternatives "]" | STRING ("i")? (".." STRING)?
             | /REGEX/flags | NAME | %json {..} | %regex {..} | %lark { grammar }
             | <special token> | @name
"""

import math
import json
from typing import Dict, List, Optional

from . import ast as A
from . import lexer as L
from .errors import LarkGrammarError

__all__ = ["parse_lark", "decode_string", "is_terminal_name", "normalize_name"]

_MAX_DEPTH = 100
_MAX_COUNT = 2**31 - 1


def is_terminal_name(raw: str) -> bool:
    """Uppercase after an optional ``?`` / ``!`` and leading underscores."""
    name = raw.lstrip("?!").lstrip("_")
    return bool(name) and "A" <= name[0] <= "Z"


def normalize_name(raw: str) -> str:
    return raw[1:] if raw[:1] in ("?", "!") else raw


def decode_string(tok: L.Token, source: str) -> str:
    """The text of a string token (JSON escapes: \\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)."""
    raw = tok.text[:-1] if tok.flags else tok.text
    try:
        value = json.loads(raw, strict=False)
    except ValueError as e:
        msg = getattr(e, "msg", str(e))
        raise LarkGrammarError(
            f"invalid string literal {raw} ({msg}; strings use JSON escapes: \\\" \\\\ \\/ "
            "\\b \\f \\n \\r \\t \\uXXXX)", tok.line, tok.column, source) from None
    if not isinstance(value, str):
        raise LarkGrammarError("invalid string literal", tok.line, tok.column, source)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise LarkGrammarError("invalid string literal: a lone UTF-16 surrogate escape",
                               tok.line, tok.column, source) from None
    return value


class _Parser:
    def __init__(self, source: str, tokens: List[L.Token]) -> None:
        self.src = source
        self.toks = tokens
        self.i = 0
        self.depth = 0

    # ---- helpers ------------------------------------------------------------------------

    def peek(self, k: int = 0) -> L.Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def at(self, kind: str) -> bool:
        return self.toks[self.i].kind == kind

    def match(self, kind: str) -> Optional[L.Token]:
        tok = self.toks[self.i]
        if tok.kind == kind:
            self.i += 1
            return tok
        return None

    def err(self, message: str, tok: Optional[L.Token] = None) -> LarkGrammarError:
        tok = tok or self.peek()
        return LarkGrammarError(message, tok.line, tok.column, self.src)

    def expect(self, kind: str, message: str) -> L.Token:
        tok = self.match(kind)
        if tok is None:
            raise self.err(f"{message}, found {self.peek().describe()}")
        return tok

    def skip_newlines(self) -> None:
        while self.toks[self.i].kind == L.NEWLINE:
            self.i += 1

    # ---- items --------------------------------------------------------------------------

    def document(self, nested: bool) -> A.Document:
        doc = A.Document(self.src)
        self.skip_newlines()
        while not self.at(L.END) and not (nested and self.at("}")):
            tok = self.peek()
            kind = tok.kind
            if kind == L.IMPORT:
                self.import_(doc)
            elif kind == L.IGNORE:
                self.i += 1
                doc.ignores.append(self.alternatives())
            elif kind == L.OPTIONS:
                self.i += 1
                doc.options.append((tok.value, tok.line, tok.column))
            elif kind in (L.OVERRIDE, L.EXTEND):
                self.i += 1
                d = self.definition()
                d.mode = "override" if kind == L.OVERRIDE else "extend"
                doc.definitions.append(d)
            elif kind == L.DECLARE:
                self.i += 1
                if not self.at(L.NAME):
                    raise self.err("expected terminal names after %declare")
                while self.at(L.NAME):
                    t = self.match(L.NAME)
                    doc.declares.append((normalize_name(t.text), t.line, t.column))
            elif kind == L.DIRECTIVE:
                raise self.err(f"directive {tok.text} is not supported", tok)
            elif kind in (L.JSON, L.REGEXEXT, L.LARK, L.IF):
                raise self.err(f"{tok.text} must be part of a rule body", tok)
            elif kind == L.NAME:
                doc.definitions.append(self.definition())
            else:
                raise self.err(f"expected a rule or terminal definition, found {tok.describe()}")
            if not (self.at(L.NEWLINE) or self.at(L.END) or (nested and self.at("}"))):
                raise self.err(f"expected the end of the line, found {self.peek().describe()}")
            self.skip_newlines()
        return doc

    def import_(self, doc: A.Document) -> None:
        self.match(L.IMPORT)
        first = self.expect(L.NAME, "expected an import path after %import")
        path = first.text
        while self.match("."):
            path += "." + self.expect(L.NAME, "expected a name after '.'").text
        if self.match("("):
            while True:
                t = self.expect(L.NAME, "expected an imported terminal name")
                doc.imports.append(A.Import(path + "." + t.text, t.text, t.line, t.column))
                if not self.match(","):
                    break
            self.expect(")", "expected ')' after the import list")
            return
        local = path.rsplit(".", 1)[-1]
        if self.match("->"):
            local = self.expect(L.NAME, "expected alias name after '->'").text
        doc.imports.append(A.Import(path, local, first.line, first.column))

    def definition(self) -> A.Definition:
        name_tok = self.expect(L.NAME, "expected a rule or terminal name")
        name = normalize_name(name_tok.text)
        terminal = is_terminal_name(name_tok.text)
        attrs: Dict[str, A.Attr] = {}
        if self.at("["):
            if terminal:
                raise self.err("attributes are only supported on rules (lowercase names), "
                               f"not on terminal {name}")
            attrs = self.attributes()
        if self.at("."):
            raise self.err("rule and terminal priorities are not supported (name.N)")
        if self.at("::"):
            raise self.err("parametric grammar is not supported (name::N)")
        if self.at("{"):
            raise self.err("Lark templates are not supported (name{params})")
        if not self.at(":"):
            raise self.err(f"expected ':' after rule name {name}, found {self.peek().describe()}")
        self.i += 1
        body = self.alternatives()
        return A.Definition(name, terminal, body, name_tok.line, name_tok.column, attrs)

    def attributes(self) -> Dict[str, A.Attr]:
        self.expect("[", "expected '['")
        attrs: Dict[str, A.Attr] = {}
        while not self.at("]"):
            key = self.expect(L.NAME, "expected a rule attribute")
            k = key.text
            if k in attrs:
                raise self.err(f"{k} attribute is specified more than once", key)
            if k == "lazy" and not self.at("="):
                value = True
            elif k == "capture":
                value = None
                if self.match("="):
                    value = self.capture_name("capture")
            elif k in ("max_tokens", "max_chars"):
                self.expect("=", f"expected '=' after {k}")
                num = self.expect(L.NUMBER, f"expected an integer after {k}=")
                try:
                    value = int(num.text)
                except ValueError:
                    raise self.err(f"{k} must be an integer", num) from None
                if value < 0 or value > _MAX_COUNT:
                    raise self.err(f"{k} must be between 0 and {_MAX_COUNT}", num)
                if k == "max_tokens" and value == 0:
                    raise self.err("max_tokens must be positive", num)
            elif k in ("suffix", "stop"):
                self.expect("=", f"expected '=' after {k}")
                value = self.marker(k)
            elif k == "stop_capture":
                self.expect("=", "expected '=' after stop_capture")
                value = self.capture_name("stop_capture")
            elif k == "temperature":
                self.expect("=", "expected '=' after temperature")
                num = self.expect(L.NUMBER, "expected number after temperature=")
                value = float(num.text)
                if not math.isfinite(value) or value < 0:
                    raise self.err("temperature must be a finite non-negative number", num)
            else:
                raise self.err(f"rule attribute '{k}' is not supported by xgrammar2's Lark "
                               "(supported: lazy, stop, suffix, capture, stop_capture, "
                               "max_tokens, max_chars, temperature)", key)
            attrs[k] = A.Attr(k, value, key.line, key.column)
            if not self.match(","):
                break
        self.expect("]", "expected ']' after the rule attributes")
        if "suffix" in attrs and "stop" in attrs:
            later, other = ("stop", "suffix") if list(attrs).index("stop") > \
                list(attrs).index("suffix") else ("suffix", "stop")
            a = attrs[later]
            raise LarkGrammarError(f"{later} cannot be combined with {other}", a.line, a.column,
                                   self.src)
        if "stop_capture" in attrs and "suffix" not in attrs and "stop" not in attrs:
            a = attrs["stop_capture"]
            raise LarkGrammarError("stop_capture requires stop or suffix", a.line, a.column,
                                   self.src)
        return attrs

    def capture_name(self, what: str) -> str:
        tok = self.expect(L.STRING, f"expected string literal after {what}=")
        if tok.flags:
            raise self.err(f"case-insensitive flags are not allowed on {what}", tok)
        name = decode_string(tok, self.src)
        if not name:
            raise self.err(f"{what} name must not be empty", tok)
        if not all(c.isascii() and (c.isalnum() or c in "_-.") for c in name):
            raise self.err(f"{what} name must only contain letters, digits, '_', '-' and '.'",
                           tok)
        return name

    def marker(self, what: str) -> A.Node:
        tok = self.peek()
        if tok.kind == L.STRING:
            self.i += 1
            node = A.Str(tok.line, tok.column, decode_string(tok, self.src), bool(tok.flags))
            if not node.text:
                raise self.err(f"{what} must not be empty (the llguidance end-of-sequence "
                               f"shorthand {what}=\"\" is not supported)", tok)
            return node
        if tok.kind == L.REGEX:
            self.i += 1
            return A.Regex(tok.line, tok.column, tok.text, tok.flags)
        if tok.kind == L.NAME:
            self.i += 1
            if not is_terminal_name(tok.text):
                raise self.err(f"{what} terminal name must be uppercase", tok)
            return A.Name(tok.line, tok.column, normalize_name(tok.text))
        raise self.err(f"expected a string literal, a regular expression, or an uppercase "
                       f"terminal name after {what}=")

    # ---- expressions --------------------------------------------------------------------

    def alternatives(self) -> A.Node:
        first = self.peek()
        alts = [self.sequence()]
        while self.alt_separator():
            alts.append(self.sequence())
        if len(alts) == 1:
            return alts[0]
        return A.Alt(first.line, first.column, alts)

    def alt_separator(self) -> bool:
        if self.match("|"):
            return True
        save = self.i
        self.skip_newlines()
        if self.match("|"):
            return True
        if self.depth > 0 and self.peek().kind in (")", "]", "}"):
            return False
        self.i = save
        return False

    def sequence(self) -> A.Node:
        first = self.peek()
        items: List[A.Node] = []
        while True:
            if self.depth > 0:
                # Inside ( ) / [ ], a line break does not end the definition.
                self.skip_newlines()
            kind = self.peek().kind
            if kind in (L.NEWLINE, "|", ")", "]", "}", L.END, "->", "&", L.IF):
                break
            items.append(self.expr())
        if self.match("->"):
            self.expect(L.NAME, "expected alias name after '->'")
        if self.at("&"):
            raise self.err("terminal intersection '&' is not supported")
        if self.at(L.IF):
            raise self.err("parametric %if conditions are not supported")
        if len(items) == 1:
            return items[0]
        return A.Seq(first.line, first.column, items)

    def count(self) -> int:
        tok = self.peek()
        if tok.kind != L.NUMBER:
            raise self.err(f"expected a repetition count, found {tok.describe()}")
        self.i += 1
        if not tok.text.isdigit():
            raise self.err(f"invalid repetition count {tok.text} (a non-negative integer)", tok)
        value = int(tok.text)
        if value > _MAX_COUNT:
            raise self.err(f"invalid repetition count {tok.text} (too large)", tok)
        return value

    def expr(self) -> A.Node:
        first = self.peek()
        if self.at("~"):
            raise self.err("regular-expression complement '~' is not supported")
        atom = self.atom()
        lo: Optional[int] = None
        hi: Optional[int] = None
        if self.match("?"):
            lo, hi = 0, 1
        elif self.match("*"):
            lo, hi = 0, None
        elif self.match("+"):
            lo, hi = 1, None
        elif self.match("~"):
            lo = self.count()
            hi = lo
            if self.match(".."):
                hi = self.count()
        elif self.at("{"):
            self.i += 1
            lo = 0 if self.at(",") else self.count()
            if self.match(","):
                hi = None if self.at("}") else self.count()
            else:
                hi = lo
            self.expect("}", "expected '}' after the repetition range")
        if lo is None:
            return atom
        if hi is not None and hi < lo:
            raise LarkGrammarError("repetition end must be greater than or equal to start",
                                   first.line, first.column, self.src)
        return A.Rep(first.line, first.column, atom, lo, hi)

    def group(self, open_tok: L.Token) -> A.Node:
        if self.depth >= _MAX_DEPTH:
            raise self.err(f"groups are nested deeper than {_MAX_DEPTH} levels", open_tok)
        self.depth += 1
        body = self.alternatives()
        self.depth -= 1
        return body

    def atom(self) -> A.Node:
        tok = self.peek()
        kind = tok.kind
        if kind == "(":
            self.i += 1
            body = self.group(tok)
            self.expect(")", "expected ')' after group")
            return body
        if kind == "[":
            self.i += 1
            body = self.group(tok)
            self.expect("]", "expected ']' after optional group")
            return A.Rep(tok.line, tok.column, body, 0, 1)
        if kind == L.STRING:
            self.i += 1
            text = decode_string(tok, self.src)
            if self.match(".."):
                end = self.expect(L.STRING, "expected a string after '..'")
                hi_text = decode_string(end, self.src)
                if tok.flags:
                    raise self.err("flags are not allowed on character ranges", tok)
                if end.flags:
                    raise self.err("flags are not allowed on character ranges", end)
                if len(text) != 1 or len(hi_text) != 1:
                    raise self.err("character range endpoints must be one character", tok)
                if ord(text) > ord(hi_text):
                    raise self.err("character range start must not exceed end", tok)
                return A.Range(tok.line, tok.column, ord(text), ord(hi_text))
            return A.Str(tok.line, tok.column, text, bool(tok.flags))
        if kind == L.REGEX:
            self.i += 1
            return A.Regex(tok.line, tok.column, tok.text, tok.flags)
        if kind == L.NAME:
            self.i += 1
            if self.at("::"):
                raise self.err("parametric grammar is not supported (name::N)")
            if self.at("{") and self.peek(1).kind not in (",", L.NUMBER):
                raise self.err("Lark templates are not supported (name{params})")
            return A.Name(tok.line, tok.column, normalize_name(tok.text))
        if kind == L.JSON:
            self.i += 1
            return A.Json(tok.line, tok.column, tok.value)
        if kind == L.REGEXEXT:
            self.i += 1
            return A.RegexExt(tok.line, tok.column, tok.value)
        if kind == L.SPECIAL:
            self.i += 1
            return A.SpecialToken(tok.line, tok.column, tok.text)
        if kind == L.GREF:
            self.i += 1
            return A.GrammarRef(tok.line, tok.column, tok.text)
        if kind == L.LARK:
            self.i += 1
            self.skip_newlines()
            self.expect("{", "expected '{' after %lark")
            if self.depth >= _MAX_DEPTH:
                raise self.err(f"groups are nested deeper than {_MAX_DEPTH} levels", tok)
            saved_depth = self.depth
            self.depth = 0
            doc = self.document(nested=True)
            self.depth = saved_depth
            self.expect("}", "expected '}' after the nested Lark grammar")
            return A.NestedLark(tok.line, tok.column, doc)
        if kind == L.DIRECTIVE:
            raise self.err(f"directive {tok.text} is not supported", tok)
        raise self.err(f"expected a grammar expression, found {tok.describe()}")


def parse_lark(source: str) -> A.Document:
    """Parses Lark text (syntax only: names are resolved when lowering)."""
    return _Parser(source, L.tokenize(source)).document(nested=False)
