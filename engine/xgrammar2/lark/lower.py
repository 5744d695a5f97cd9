"""Lark syntax tree -> EBNF text in upstream xgrammar's dialect (what ``Grammar.from_ebnf``
reads). The semantics are upstream xgrammar 0.2.8's reading of llguidance's Lark:

* ``start`` is the root (printed as ``root``); rules may recurse, terminals may not and may
  reference only terminals. A terminal, string, range, regex, ``%json``, ``%lark``, special
  token, ``@name`` or ``%regex`` is a *lexeme*.
* ``%ignore X``: ``X*`` may follow every lexeme inside rules (never inside a terminal),
  including the last one; not before the first one unless ``%grammar_options
  {"allow_initial_skip": true}``. This is a context-free approximation of llguidance's
  lexer (which would, e.g., not split one maximal-munch lexeme into two): it accepts what
  upstream xgrammar accepts.
* ``%json``: the schema's grammar (any whitespace inside, strict mode), embedded.
* ``%lark {...}`` and ``@name``: separate grammars (own namespace, own ``%ignore``), embedded
  with their rules renamed apart.
* Special tokens become ``Token(id, ...)`` terminals.
* Rule attributes: ``lazy`` / ``stop`` / ``suffix`` as committed-shortest matching (a
  ``TagDispatch`` for free text up to a fixed string or token, as upstream; else a DFA of
  the terminal-like body, :mod:`.automaton`); ``max_tokens``, ``max_chars``, ``capture``
  and ``temperature`` pass through to the EBNF rule head (runtime semantics in the C core);
  a ``stop`` / ``suffix`` marker adds upstream's ``capture_hidden_{stop,suffix}_bytes=N``
  (and ``stop_capture``; for a marker of several lengths also the body and marker rules,
  ``capture_hidden_{body,marker}_rule_id``): captures leave it out (csrc/parse/captures.c).
"""

import json
import re
import sys
import warnings
from typing import Any, Dict, List, Optional, Set, Tuple

from ..structural_tag.ebnf import RuleSet, TokenTerm, parse_rules, quote, tag_dispatch_body
from . import ast as A
from . import regex as R
from .automaton import AutomatonTooLarge, lazy_rules
from .common import common_pattern
from .errors import LarkGrammarError
from .parser import parse_lark

__all__ = ["LarkLowering", "lower_lark"]

_NAMED_GRAMMAR_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_ANY_TEXT = {"(.|\\n)*", "(\\n|.)*", "(?s:.*)", "(?:.|\\n)*", "(?:\\n|.)*", "[\\s\\S]*"}
_ANY_TEXT_PREFIXES = ("(.|\\n)*", "(\\n|.)*", "(?:.|\\n)*", "(?:\\n|.)*", "[\\s\\S]*", "(?s:.*)")
_MAX_TOKEN_RANGE = 1_000_000
_TOKENS_PER_TERM = 64


def _warn_stderr(message: str) -> None:
    """A warning on stderr, as upstream xgrammar's C++ core prints it."""
    sys.stderr.write(f"[xgrammar2] warning: {message}\n")
    sys.stderr.flush()


class _Context:
    """What the grammars of one conversion share: the output rules, the tokenizer, the
    named grammars and the warnings."""

    def __init__(self, tokenizer_info: Any, named: Dict[str, Any], defer_tokens: bool) -> None:
        # Names the EBNF parser reads as macros when a '(' follows: never rule names.
        self.rules = RuleSet(reserved=("Token", "TagDispatch", "Regex", "ExcludeToken"))
        self.tokenizer_info = tokenizer_info
        self.named = named
        self.named_roots: Dict[str, str] = {}
        self.active: List[str] = []
        self.warnings: List[str] = []
        self.json_roots: Dict[str, str] = {}
        self.nested = 0
        self.defer_tokens = defer_tokens
        self.deferred_tokens = False
        self._vocab_index: Optional[Dict[bytes, List[int]]] = None

    def vocab_index(self) -> Dict[bytes, List[int]]:
        """token text -> ids: the decoded bytes of every token, and for special / added
        tokens (which decode to nothing in xgrammar2) their text as given."""
        if self._vocab_index is None:
            info = self.tokenizer_info
            index: Dict[bytes, List[int]] = {}
            decoded = info.decoded_vocab
            for i, b in enumerate(decoded):
                if b:
                    index.setdefault(bytes(b), []).append(i)
            encoded = info.encoded_vocab
            for i in sorted(set(info.special_token_ids) | set(info.added_token_ids)):
                if i >= len(encoded) or (i < len(decoded) and decoded[i]):
                    continue
                t = encoded[i]
                b = t.encode("utf-8", "surrogatepass") if isinstance(t, str) else bytes(t)
                if b:
                    index.setdefault(b, []).append(i)
            for ids in index.values():
                ids.sort()
            self._vocab_index = index
        return self._vocab_index


class _Doc:
    """Lowers one Lark document (the top level, a %lark block or a named grammar)."""

    def __init__(self, ctx: _Context, doc: A.Document, prefix: str, top: bool) -> None:
        self.ctx = ctx
        self.doc = doc
        self.src = doc.source
        self.prefix = prefix
        self.top = top
        self.defs: Dict[str, A.Definition] = {}
        self.names: Dict[str, str] = {}
        self.declared: Dict[str, Tuple[int, int]] = {}
        self.skip: Optional[str] = None
        self.allow_initial_skip = False
        #: rules whose max_chars dynamic dispatch makes meaningless (dropped with a warning)
        self.dropped_max_chars: Set[str] = set()

    # ---- errors -----------------------------------------------------------------------------

    def err(self, message: str, at: Any) -> LarkGrammarError:
        if isinstance(at, tuple):
            line, column = at
        else:
            line, column = at.line, at.column
        return LarkGrammarError(message, line, column, self.src)

    # ---- the document -------------------------------------------------------------------

    def lower(self) -> str:
        """Adds the document's rules to the context; returns its root rule's name."""
        self.collect_definitions()
        self.check_terminals()
        self.read_options()
        rules = self.ctx.rules
        self.names["start"] = rules.fresh("root" if self.top else self.prefix + "start")
        for name in self.defs:
            if name != "start":
                self.names[name] = rules.fresh(self.prefix + name)
        if self.doc.ignores:
            items = [self.expr(node, terminal=True)[0] for node in self.doc.ignores]
            body = items[0] if len(items) == 1 else " | ".join(items)
            item_rule = rules.add(self.prefix + "lark_ignore_item", body)
            self.skip = rules.add(self.prefix + "lark_ignore", f"{item_rule}*")
        dynamic = self.dynamic_start()
        for name, d in self.defs.items():
            self.definition(d, dynamic if name == "start" else None)
        return self.names["start"]

    def collect_definitions(self) -> None:
        doc = self.doc
        defs = self.defs
        for imp in doc.imports:
            parts = imp.path.split(".")
            if len(parts) != 2 or parts[0] != "common":
                raise self.err(f"cannot import '{imp.path}': only the common library can be "
                               "imported (%import common.NAME)", imp)
            pattern = common_pattern(parts[1])
            if pattern is None:
                raise self.err(f"unknown common import '{imp.path}'", imp)
            if imp.local in defs:
                raise self.err(f"duplicate rule or terminal '{imp.local}' (imported)", imp)
            defs[imp.local] = A.Definition(imp.local, True, A.Regex(imp.line, imp.column, pattern, ""),
                                           imp.line, imp.column)
        for d in doc.definitions:
            if d.mode != "define":
                continue
            if d.name in defs:
                raise self.err(f"duplicate rule or terminal '{d.name}'", d)
            defs[d.name] = d
        for d in doc.definitions:
            if d.mode == "define":
                continue
            old = defs.get(d.name)
            if old is None:
                raise self.err(f"%{d.mode} of '{d.name}', which is not defined", d)
            if old.is_terminal != d.is_terminal:
                raise self.err(f"%{d.mode} of '{d.name}' changes a rule into a terminal or back", d)
            if d.mode == "override":
                defs[d.name] = d
            else:
                defs[d.name] = A.Definition(old.name, old.is_terminal,
                                            A.Alt(d.line, d.column, [old.body, d.body]),
                                            old.line, old.column, old.attrs)
        for name, line, column in doc.declares:
            self.declared.setdefault(name, (line, column))
        start = defs.get("start")
        if start is None:
            raise self.err("no start rule found (the grammar must define a rule named 'start')",
                           (1, 1))
        if start.is_terminal:
            raise self.err("start must be a rule", start)

    def check_terminals(self) -> None:
        state: Dict[str, int] = {}

        def refs(node: A.Node, out: List[A.Name]) -> None:
            if isinstance(node, A.Name):
                out.append(node)
            elif isinstance(node, (A.Seq, A.Alt)):
                for x in node.items:
                    refs(x, out)
            elif isinstance(node, A.Rep):
                refs(node.item, out)

        def visit(d: A.Definition) -> None:
            state[d.name] = 1
            names: List[A.Name] = []
            refs(d.body, names)
            for n in names:
                target = self.defs.get(n.name)
                if target is None:
                    raise self.unknown_name(n)
                if not target.is_terminal:
                    raise self.err(f"terminal '{d.name}' cannot reference rule '{n.name}'", n)
                st = state.get(n.name, 0)
                if st == 1:
                    raise self.err(f"circular reference in terminal '{n.name}'", n)
                if st == 0:
                    visit(target)
            state[d.name] = 2

        for d in list(self.defs.values()):
            if d.is_terminal and state.get(d.name, 0) == 0:
                visit(d)

    def unknown_name(self, n: A.Name) -> LarkGrammarError:
        if n.name in self.declared:
            return self.err(f"terminal '{n.name}' is only %declare'd: a terminal made by a Lark "
                            "post-lexer has no text to match, so xgrammar2 cannot use it", n)
        return self.err(f"unknown name '{n.name}'", n)

    def read_options(self) -> None:
        for value, line, column in self.doc.options:
            if not isinstance(value, dict):
                raise self.err("%grammar_options value must be an object", (line, column))
            for key, option in value.items():
                if key == "allow_initial_skip":
                    if not isinstance(option, bool):
                        raise self.err("allow_initial_skip must be a boolean", (line, column))
                    self.allow_initial_skip = self.allow_initial_skip or option
                elif key in ("no_forcing", "allow_invalid_utf8"):
                    if not isinstance(option, bool):
                        raise self.err(f"{key} must be a boolean", (line, column))
                    if option:
                        raise self.err(f"%grammar_options option '{key}' is not supported",
                                       (line, column))
                else:
                    raise self.err(f"unknown %grammar_options option '{key}'", (line, column))

    # ---- definitions --------------------------------------------------------------------

    def definition(self, d: A.Definition, dynamic: Optional[str]) -> None:
        rules = self.ctx.rules
        name = self.names[d.name]
        if d.is_terminal:
            rules.define(name, self.expr(d.body, terminal=True)[0])
            return
        attrs = self.check_attributes(d)
        if attrs:
            rules.set_attrs(name, attrs)
        if dynamic is not None:
            body = dynamic
        elif self.is_lazy(d):
            initial_skip = d.name == "start" and self.allow_initial_skip and self.skip
            target = rules.fresh(name + "_lazy") if initial_skip else name
            body = self.lazy(d, target)
            if body is None:
                # committed-shortest matching already: the rule also says so (upstream
                # prints it); the runtime's lazy ending agrees with that language
                rules.set_attrs(target, self.with_lazy(attrs))
                if not initial_skip:
                    return  # defined by lazy()
                body = target
        elif "temperature" in d.attrs:
            # A temperature rule is a lexeme (terminals and subgrammars only): %ignore
            # text after it is outside it, as after a terminal.
            saved, self.skip = self.skip, None
            try:
                body = self.expr(d.body, terminal=False)[0]
            finally:
                self.skip = saved
        else:
            body = self.expr(d.body, terminal=False)[0]
        if d.name == "start" and self.allow_initial_skip and self.skip:
            body = f"{self.skip} ({body})"
        rules.define(name, body)

    def check_attributes(self, d: A.Definition) -> str:
        """Validates d's attributes; returns the EBNF attribute group the rule carries
        (``[max_tokens=3, capture="r"]``) or "". ``lazy`` / ``stop`` / ``suffix`` are
        lowered to committed-shortest matching instead (see :meth:`lazy`)."""
        a = d.attrs
        if "temperature" in a:
            names: List[A.Name] = []
            self.rule_refs(d.body, names)
            for n in names:
                target = self.defs.get(n.name)
                if target is not None and not target.is_terminal:
                    raise self.err("temperature is only supported on terminals and subgrammars",
                                   a["temperature"])
        hidden = self.hidden_marker(d)
        if "stop_capture" in a and hidden is None:
            msg = (f"Lark rule '{d.name}': stop_capture '{a['stop_capture'].value}' is accepted "
                   "but not recorded; the language is unchanged")
            self.ctx.warnings.append(msg)
            warnings.warn(msg, UserWarning, stacklevel=6)
        parts: List[str] = []
        for key in ("max_tokens", "max_chars"):
            if key == "max_chars" and d.name in self.dropped_max_chars:
                continue
            if key in a:
                parts.append(f"{key}={int(a[key].value)}")
        if "capture" in a:
            label = a["capture"].value or d.name
            parts.append(f"capture={json.dumps(label)}")
        if hidden is not None:
            # A budget on a marker rule whose body is not free text: the runtime closes it
            # without its marker once the budget is spent, where the body alone can end
            # (it runs the body rule: capture_hidden_body_rule_id, as upstream prints).
            budget = any(p.startswith(("max_tokens=", "max_chars=")) for p in parts)
            split = budget and self.trigger(d, allow_regex=False) is None
            parts.extend(self.hidden_attrs(d, *hidden, split=split))
        if "temperature" in a:
            parts.append(f"temperature={float(a['temperature'].value)!r}")
        return "[" + ", ".join(parts) + "]" if parts else ""

    def hidden_marker(self, d: A.Definition) -> Optional[Tuple[str, Optional[int]]]:
        """("stop" | "suffix", marker length in bytes, or None for a marker of several
        lengths) for a stop / suffix rule: what the runtime leaves out of captures (ir.h
        hidden_kind); None when the rule has no marker or it cannot be described."""
        kind = "stop" if "stop" in d.attrs else "suffix" if "suffix" in d.attrs else None
        if kind is None:
            return None
        if self.skip and self.trigger(d, allow_regex=False) is not None:
            return None  # the TagDispatch is wrapped with %ignore text after it
        try:
            return kind, R.fixed_bytes(self.tree(d.attrs[kind].value, set()))
        except Exception:  # reported where the marker is lowered
            return None

    def hidden_attrs(self, d: A.Definition, kind: str, n: Optional[int],
                     split: bool = False) -> List[str]:
        """The attribute items of a stop / suffix marker of n bytes; for a marker of several
        lengths (n None), or with ``split`` (a budget: the forced close runs the body),
        upstream's split rules: the body and the marker alone, defined here (the runtime
        finds the first split of an occurrence into the two)."""
        if n is None or split:
            rules = self.ctx.rules
            name = self.names[d.name]
            parts = []
            for suffix, node in (("_stop_body", d.body), ("_stop_marker", d.attrs[kind].value)):
                text = R.to_ebnf(self.tree(node, set()), quote)[0]
                parts.append(rules.define(rules.fresh(name + suffix), text))
            out = [f"capture_hidden_{kind}_bytes=1", f"capture_hidden_body_rule_id={parts[0]}",
                   f"capture_hidden_marker_rule_id={parts[1]}"]
        else:
            out = [f"capture_hidden_{kind}_bytes={n}"]
        if "stop_capture" in d.attrs:
            out.append(f"stop_capture={json.dumps(d.attrs['stop_capture'].value)}")
        return out

    @staticmethod
    def with_lazy(attrs: str) -> str:
        """``attrs`` with ``lazy`` added in upstream's order (before ``temperature``)."""
        parts = [p for p in attrs[1:-1].split(", ") if p] if attrs else []
        at = next((i for i, p in enumerate(parts) if p.startswith("temperature=")), len(parts))
        parts.insert(at, "lazy")
        return "[" + ", ".join(parts) + "]"

    def rule_refs(self, node: A.Node, out: List[A.Name]) -> None:
        """Appends the names node references (outside nested grammars)."""
        if isinstance(node, A.Name):
            out.append(node)
        elif isinstance(node, (A.Seq, A.Alt)):
            for x in node.items:
                self.rule_refs(x, out)
        elif isinstance(node, A.Rep):
            self.rule_refs(node.item, out)

    @staticmethod
    def is_lazy(d: A.Definition) -> bool:
        return "lazy" in d.attrs or "stop" in d.attrs or "suffix" in d.attrs

    def is_lexeme_rule(self, d: A.Definition) -> bool:
        return d.is_terminal or self.is_lazy(d) or "temperature" in d.attrs

    # ---- expressions --------------------------------------------------------------------

    def with_skip(self, text: str, prec: int) -> Tuple[str, int]:
        if self.skip is None:
            return text, prec
        return (f"({text})" if prec == 0 else text) + " " + self.skip, 1

    def expr(self, node: A.Node, terminal: bool) -> Tuple[str, int]:
        """(EBNF text, precedence: 2 atom, 1 sequence, 0 alternatives)."""
        if isinstance(node, A.Seq):
            if len(node.items) == 1:
                return self.expr(node.items[0], terminal)
            parts = []
            for x in node.items:
                t, p = self.expr(x, terminal)
                parts.append(f"({t})" if p == 0 else t)
            if not parts:
                return '""', 2
            return " ".join(parts), 1
        if isinstance(node, A.Alt):
            alts = [self.expr(x, terminal)[0] for x in node.items]
            return " | ".join(alts), 0
        if isinstance(node, A.Rep):
            t, p = self.expr(node.item, terminal)
            if node.hi == 0:
                return '""', 2
            if p < 2 or t.endswith(("*", "+", "?", "}")):
                t = f"({t})"
            lo, hi = node.lo, node.hi
            if (lo, hi) == (0, None):
                return t + "*", 2
            if (lo, hi) == (1, None):
                return t + "+", 2
            if (lo, hi) == (0, 1):
                return t + "?", 2
            if hi is None:
                return f"{t}{{{lo},}}", 2
            if lo == hi:
                return f"{t}{{{lo}}}", 2
            return f"{t}{{{lo},{hi}}}", 2
        if isinstance(node, A.Str):
            if not node.text:
                return '""', 2
            text, prec = R.to_ebnf(self.string_tree(node), quote)
            return (text, prec) if terminal else self.with_skip(text, prec)
        if isinstance(node, A.Range):
            text = R.class_ebnf(((node.lo, node.hi),))
            return (text, 2) if terminal else self.with_skip(text, 2)
        if isinstance(node, A.Regex):
            text, prec = R.to_ebnf(self.regex_tree(node), quote)
            return (text, prec) if terminal else self.with_skip(text, prec)
        if isinstance(node, A.Name):
            d = self.defs.get(node.name)
            if d is None:
                raise self.unknown_name(node)
            if terminal and not d.is_terminal:
                raise self.err(f"terminal cannot reference rule '{node.name}'", node)
            text = self.names[node.name]
            if not terminal and self.is_lexeme_rule(d):
                return self.with_skip(text, 2)
            return text, 2
        if isinstance(node, A.RegexExt):
            text = self.substring(node)
            return (text, 2) if terminal else self.with_skip(text, 2)
        what = {A.Json: "%json", A.NestedLark: "nested %lark", A.SpecialToken: "special tokens",
                A.GrammarRef: "named grammars (@name)"}.get(type(node))
        if what is None:
            raise AssertionError(type(node))
        if terminal:
            raise self.err(f"{what} cannot be used in terminals", node)
        if isinstance(node, A.Json):
            text = self.json(node)
        elif isinstance(node, A.NestedLark):
            text = self.nested(node)
        elif isinstance(node, A.SpecialToken):
            text, prec = self.special_token(node)
            return self.with_skip(text, prec)
        else:
            text = self.grammar_ref(node)
        return self.with_skip(text, 2)

    # ---- lexemes ----------------------------------------------------------------------------

    def string_tree(self, node: A.Str):
        if not node.nocase:
            return R.lit(node.text)
        items = []
        for ch in node.text:
            cp = ord(ch)
            if cp > 0x7F:
                raise self.err("case-insensitive string literals currently support ASCII characters only",
                               node)
            if 0x41 <= cp <= 0x5A or 0x61 <= cp <= 0x7A:
                items.append(R.cset(R.fold_ranges(((cp, cp),))))
            else:
                items.append(R.lit(ch))
        return R.seq(items)

    def regex_tree(self, node: A.Regex):
        def on_error(message: str, offset: int) -> LarkGrammarError:
            column = node.column if offset < 0 else node.column + 1 + offset
            return self.err(f"failed to compile regular expression /{node.pattern}/: {message}",
                            (node.line, column))

        return R.parse_regex(node.pattern, node.flags, on_error)

    def substring(self, node: A.RegexExt) -> str:
        spec = node.spec
        if not isinstance(spec, dict):
            raise self.err("%regex value must be an object", node)
        fields = [k for k, v in spec.items() if v is not None]
        for k in spec:
            if k not in ("substring_chunks", "substring_chars", "substring_words"):
                raise self.err(f"unknown field '{k}' in %regex (supported: substring_chunks, "
                               "substring_chars, substring_words)", node)
        if not fields:
            raise self.err("no fields set on %regex", node)
        if len(fields) != 1:
            raise self.err("only one field can be set on %regex", node)
        field = fields[0]
        value = spec[field]
        if field == "substring_chunks":
            if not isinstance(value, list) or not all(isinstance(c, str) for c in value):
                raise self.err("substring_chunks must be an array of strings", node)
            chunks = list(value)
        elif field == "substring_chars":
            if not isinstance(value, str):
                raise self.err("substring_chars must be a string", node)
            chunks = list(value)
        else:
            if not isinstance(value, str):
                raise self.err("substring_words must be a string", node)
            # Words, runs of whitespace and runs of other characters, as llguidance / guidance
            # split the text (Unicode \w).
            chunks = re.findall(r"\s+|\w+|[^\s\w]+", value)
        for c in chunks:
            try:
                c.encode("utf-8")
            except UnicodeEncodeError:
                raise self.err(f"{field} must be valid Unicode text", node) from None
        if not chunks:
            return '""'
        # One rule, as upstream lowers it: the EBNF Substring(...) macro, whose automaton
        # is the suffix automaton over the chunks (csrc/lower/substring.c).
        rule_name = self.ctx.rules.fresh(self.prefix + "lark_substring")
        self.ctx.rules.define(rule_name, "Substring(" + ", ".join(quote(c) for c in chunks) + ")")
        return rule_name

    def json(self, node: A.Json) -> str:
        from ..grammar import _schema_to_ebnf

        schema = node.schema
        try:
            key = json.dumps(schema, sort_keys=False, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError):
            key = None
        if key is not None and key in self.ctx.json_roots:
            return self.ctx.json_roots[key]
        messages: List[str] = []
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ebnf = _schema_to_ebnf(schema, _warnings_out=messages, any_whitespace=True,
                                       indent=None, separators=None, strict_mode=True,
                                       max_whitespace_cnt=None, lenient=False)
        except (ValueError, RuntimeError, TypeError, NotImplementedError) as e:
            raise self.err(f"failed to compile inline JSON schema: {e}", node) from None
        for m in messages:
            msg = f"%json at line {node.line}, column {node.column}: {m}"
            self.ctx.warnings.append(msg)
            warnings.warn(f"JSON schema: {msg}", UserWarning, stacklevel=6)
        root = self.ctx.rules.embed(ebnf, "root", self.prefix + "lark_json")
        if key is not None:
            self.ctx.json_roots[key] = root
        return root

    def nested(self, node: A.NestedLark) -> str:
        self.ctx.nested += 1
        sub = _Doc(self.ctx, node.doc, f"{self.prefix}lark{self.ctx.nested}.", top=False)
        try:
            return sub.lower()
        except LarkGrammarError as e:
            # Same source: keep the inner location, say where the block starts.
            raise LarkGrammarError(f"failed to compile nested Lark grammar (the %lark block at line "
                                   f"{node.line}, column {node.column}): {e.reason}", e.line,
                                   e.column, self.src) from None

    def grammar_ref(self, node: A.GrammarRef) -> str:
        from ..grammar import Grammar

        ctx = self.ctx
        name = node.name
        if name not in ctx.named:
            raise self.err(f"unknown named grammar '@{name}'", node)
        root = ctx.named_roots.get(name)
        if root is not None:
            return root
        value = ctx.named[name]
        if isinstance(value, Grammar):
            text = str(value)
            rules = parse_rules(text)
            if not rules:
                raise self.err(f"named grammar '@{name}' is empty", node)
            root = ctx.rules.embed(text, rules[0].name, f"{name}.root")
        else:
            if name in ctx.active:
                chain = " -> ".join("@" + n for n in ctx.active[ctx.active.index(name):] + [name])
                raise self.err(f"circular named grammar reference: {chain}", node)
            ctx.active.append(name)
            try:
                sub = _Doc(ctx, parse_lark(value), f"{name}.", top=False)
                root = sub.lower()
            except LarkGrammarError as e:
                raise self.err(f"failed to compile named grammar '@{name}': {e}", node) from None
            finally:
                ctx.active.pop()
        ctx.named_roots[name] = root
        return root

    # ---- special tokens ---------------------------------------------------------------------

    def token_ids(self, node: A.SpecialToken) -> Tuple[List[int], bool]:
        """(sorted ids, negated)."""
        text = node.text
        info = self.ctx.tokenizer_info
        if text.startswith("<[") and text.endswith("]>"):
            body = text[2:-2]
            negated = body.startswith("^")
            if negated:
                body = body[1:]
            if body.strip() == "*":
                if negated:
                    raise self.err("negated wildcard special token is not supported (<[^*]> matches nothing)", node)
                if info is None:
                    if self.ctx.defer_tokens:
                        self.ctx.deferred_tokens = True
                        return [0], False
                    raise self.err("wildcard special token requires tokenizer_info (<[*]>)", node)
                return self.all_tokens(), False
            if "*" in body:
                raise self.err("wildcard cannot be mixed with token ranges", node)
            ids: Set[int] = set()
            for part in body.split(","):
                part = part.strip()
                if not part:
                    continue
                m = re.fullmatch(r"(\d+)\s*(?:-\s*(\d+))?", part)
                if m is None:
                    raise self.err(f"invalid numeric special-token range '{part}'", node)
                lo = int(m.group(1))
                hi = int(m.group(2)) if m.group(2) is not None else lo
                if hi < lo or hi > 2**30 - 1:
                    raise self.err(f"invalid numeric special-token range '{part}'", node)
                if hi - lo > _MAX_TOKEN_RANGE:
                    raise self.err("special-token range is too large", node)
                ids.update(range(lo, hi + 1))
            if not ids:
                raise self.err("empty numeric special-token range", node)
            if negated:
                if info is None:
                    if self.ctx.defer_tokens:
                        self.ctx.deferred_tokens = True
                        return [0], False
                    raise self.err("a negated token set <[^...]> requires tokenizer_info in "
                                   "xgrammar2 (it is spelled as the tokens it allows)", node)
                return [i for i in self.all_tokens() if i not in ids], False
            return sorted(ids), False
        if info is None:
            if self.ctx.defer_tokens:
                self.ctx.deferred_tokens = True
                return [0], False
            raise self.err(f"named special token {text} requires tokenizer_info", node)
        ids_list = self.ctx.vocab_index().get(text.encode("utf-8"))
        if not ids_list:
            raise self.err(f"unknown special token {text}", node)
        return list(ids_list), False

    def all_tokens(self) -> List[int]:
        info = self.ctx.tokenizer_info
        stops = set(info.stop_token_ids)
        return [i for i in range(len(info.decoded_vocab)) if i not in stops]

    def special_token(self, node: A.SpecialToken) -> Tuple[str, int]:
        ids, _ = self.token_ids(node)
        if not ids:
            return "[^\\u0000-\\U0010ffff]", 2  # no token left: matches nothing
        terms = [f"Token({', '.join(map(str, ids[i:i + _TOKENS_PER_TERM]))})"
                 for i in range(0, len(ids), _TOKENS_PER_TERM)]
        return " | ".join(terms), (2 if len(terms) == 1 else 0)

    # ---- lazy rules and dynamic dispatch ----------------------------------------------------

    def is_any_text(self, node: A.Node, visiting: Optional[Set[str]] = None) -> bool:
        if isinstance(node, A.Regex):
            pattern = "".join(c for c in node.pattern if c not in " \t\r")
            if any(f not in "isu" for f in node.flags):
                return False
            if "s" in node.flags:
                return pattern == ".*"
            return pattern in _ANY_TEXT
        if isinstance(node, A.Seq) and len(node.items) == 1:
            return self.is_any_text(node.items[0], visiting)
        if isinstance(node, A.Name):
            visiting = visiting if visiting is not None else set()
            d = self.defs.get(node.name)
            if d is None or node.name in visiting:
                return False
            visiting.add(node.name)
            try:
                return self.is_any_text(d.body, visiting)
            finally:
                visiting.discard(node.name)
        return False

    @staticmethod
    def unwrap(node: A.Node) -> A.Node:
        while isinstance(node, A.Seq) and len(node.items) == 1:
            node = node.items[0]
        return node

    @staticmethod
    def flatten(node: A.Node) -> List[A.Node]:
        return list(node.items) if isinstance(node, A.Seq) else [node]

    def regex_trigger(self, node: A.Node) -> Optional[str]:
        """The fixed text after an any-text prefix in ``/(.|\\n)*TEXT/``, if the regex is
        that."""
        if not isinstance(node, A.Regex) or "i" in node.flags or \
                any(f not in "su" for f in node.flags):
            return None
        prefixes = (".*",) if "s" in node.flags else _ANY_TEXT_PREFIXES
        for p in prefixes:
            if len(node.pattern) > len(p) and node.pattern.startswith(p):
                rest = node.pattern[len(p):]
                try:
                    tree = R.parse_regex(rest, "", lambda m, o: ValueError(m))
                except ValueError:
                    return None
                if tree[0] == "lit":
                    return tree[1]
        return None

    def trigger(self, d: A.Definition, allow_regex: bool):
        """("string", text) / ("token", ids) when ``d`` is free text up to a fixed trigger,
        else None."""
        marker = d.attrs.get("stop") or d.attrs.get("suffix")
        if marker is not None:
            m = marker.value
            if self.is_any_text(d.body) and isinstance(m, A.Str) and not m.nocase:
                return ("string", m.text)
            return None
        if "lazy" not in d.attrs:
            return None
        body = self.unwrap(d.body)
        if allow_regex:
            t = self.regex_trigger(body)
            if t:
                return ("string", t)
        items = self.flatten(d.body)
        if len(items) != 2 or not self.is_any_text(items[0]):
            return None
        last = self.unwrap(items[1])
        if isinstance(last, A.Str) and last.text and not last.nocase:
            return ("string", last.text)
        if isinstance(last, A.SpecialToken):
            ids, _ = self.token_ids(last)
            if last.text.startswith("<[^"):
                raise self.err("lazy special-token trigger cannot be negated", last)
            return ("token", ids)
        return None

    def lazy(self, d: A.Definition, name: str) -> Optional[str]:
        rules = self.ctx.rules
        trig = self.trigger(d, allow_regex=False)
        if trig is not None:
            end = rules.add(self.prefix + "lark_lazy_end", '""')
            if trig[0] == "string":
                pairs = [(trig[1], end)]
            else:
                pairs = [(TokenTerm(i), end) for i in trig[1]]
            body = tag_dispatch_body(pairs, False, [])
            if self.skip:
                body = rules.add(self.prefix + "lark_lazy", body) + " " + self.skip
            return body
        # General committed-shortest matching over the terminal-like body (+ marker).
        marker = d.attrs.get("stop") or d.attrs.get("suffix")
        tree = self.tree(d.body, set())
        if marker is not None:
            tree = R.seq([tree, self.tree(marker.value, set())])
        try:
            out = lazy_rules(tree, name, lambda hint: rules.fresh(hint))
        except AutomatonTooLarge as e:
            raise self.err(f"lazy rule '{d.name}' is too large to compile as committed-shortest "
                           f"matching ({e})", d) from None
        for rule_name, body in out:
            rules.define(rule_name, body)
        return None

    def tree(self, node: A.Node, visiting: Set[str]):
        """The regex tree of a terminal-like expression (for lazy rules)."""
        if isinstance(node, A.Seq):
            return R.seq([self.tree(x, visiting) for x in node.items])
        if isinstance(node, A.Alt):
            return R.alt([self.tree(x, visiting) for x in node.items])
        if isinstance(node, A.Rep):
            return R.rep(self.tree(node.item, visiting), node.lo, node.hi)
        if isinstance(node, A.Str):
            return self.string_tree(node)
        if isinstance(node, A.Range):
            return R.cset(((node.lo, node.hi),))
        if isinstance(node, A.Regex):
            return self.regex_tree(node)
        if isinstance(node, A.Name):
            d = self.defs.get(node.name)
            if d is None:
                raise self.unknown_name(node)
            if not d.is_terminal:
                raise self.err(f"terminal cannot reference rule '{node.name}' (the body of a "
                               "lazy, stop or suffix rule must be terminal-like)", node)
            if node.name in visiting:
                raise self.err(f"recursive terminal '{node.name}' is not supported", node)
            visiting.add(node.name)
            try:
                return self.tree(d.body, visiting)
            finally:
                visiting.discard(node.name)
        what = {A.Json: "%json", A.NestedLark: "nested %lark", A.SpecialToken: "special tokens",
                A.GrammarRef: "named grammars (@name)", A.RegexExt: "structured %regex"}
        raise self.err(f"{what.get(type(node), 'this')} cannot be used in the body or marker of a "
                       "lazy, stop or suffix rule", node)

    def dynamic_start(self) -> Optional[str]:
        """upstream's tool-call dispatch: ``start: (tool | ...)* tail`` with ``tail`` free
        text and each tool starting with a lazy head (free text up to a trigger), becomes a
        TagDispatch that loops over the triggers."""
        start = self.defs["start"]
        if self.is_lazy(start):
            return None
        items = self.flatten(start.body)
        if len(items) != 2:
            return None
        loop = self.unwrap(items[0])
        if not isinstance(loop, A.Rep) or loop.lo != 0 or loop.hi is not None:
            return None
        body = self.unwrap(loop.item)
        if isinstance(body, A.Alt):
            tools = []
            for x in body.items:
                x = self.unwrap(x)
                if not isinstance(x, A.Name):
                    return None
                tools.append(x.name)
        elif isinstance(body, A.Name):
            tools = [body.name]
        else:
            return None
        tail = self.unwrap(items[1])
        if not isinstance(tail, A.Name):
            return None
        tail_def = self.defs.get(tail.name)
        if tail_def is None or not self.is_any_text(tail_def.body):
            return None
        alternatives = []  # (kind, trigger, remainder nodes, tool definition)
        pre: Dict[int, Tuple[str, str]] = {}  # id(remainder) -> (rule hint, attributes)
        for tool in tools:
            td = self.defs.get(tool)
            if td is None or td.is_terminal:
                return None
            elements = self.flatten(td.body)
            if not elements:
                return None
            trig = None
            rest: List[A.Node] = []
            first = self.unwrap(elements[0])
            if isinstance(first, A.Name) and first.name in self.defs:
                head = self.defs[first.name]
                trig = self.trigger(head, allow_regex=True)
                rest = elements[1:]
                hidden = self.hidden_marker(head) if trig is not None else None
                if hidden is not None and hidden[1] is not None and rest:
                    # the head's marker is the trigger the dispatch just read: the text
                    # after it goes into a rule whose attributes say what captures leave
                    # out before it (ir.h hidden_before)
                    attrs = self.hidden_attrs(head, *hidden)
                    attrs.insert(1, "capture_hidden_before")
                    pre[id(rest)] = (first.name + "_dynamic_marker", "[" + ", ".join(attrs) + "]")
            if trig is None and len(elements) >= 2 and self.is_any_text(elements[0]):
                tok = self.unwrap(elements[1])
                if isinstance(tok, A.SpecialToken):
                    if tok.text.startswith("<[^"):
                        raise self.err("dynamic special-token trigger cannot be negated", tok)
                    trig = ("token", self.token_ids(tok)[0])
                    rest = elements[2:]
            if trig is None:
                return None
            alternatives.append((trig, rest, td))
        kinds = {t[0][0] for t in alternatives}
        if len(kinds) > 1:
            raise self.err("a dynamic Lark start rule cannot mix string and token triggers", start)
        # Rule attributes of the dispatched rules (their bodies are inlined into the
        # dispatch): budgets and captures have no occurrence to hold on to.
        for _, _, td in alternatives:
            for key in ("max_tokens", "capture"):
                if key in td.attrs:
                    raise self.err(f"{key} is not supported on rules consumed by dynamic "
                                   "dispatch", td.attrs[key])
            if "max_chars" in td.attrs:
                self.dropped_max_chars.add(td.name)
                _warn_stderr(f"Ignoring max_chars on rule '{td.name}' because it is consumed "
                             "by dynamic dispatch.")
        if "max_chars" in start.attrs:
            self.dropped_max_chars.add("start")
            _warn_stderr("Ignoring max_chars on dynamic dispatch start rule 'start'.")
        rules = self.ctx.rules
        grouped: Dict[Any, List[List[A.Node]]] = {}
        order: List[Any] = []
        for (kind, value), rest, td in alternatives:
            keys = [value] if kind == "string" else list(value)
            for k in keys:
                if k not in grouped:
                    grouped[k] = []
                    order.append(k)
                grouped[k].append(rest)
        pairs = []
        for k in order:
            bodies = []
            for rest in grouped[k]:
                text = self.expr(A.Seq(start.line, start.column, rest), terminal=False)[0]
                if id(rest) in pre:
                    hint, attrs = pre[id(rest)]
                    text = rules.define(rules.fresh(self.prefix + hint), text, attrs)
                bodies.append(text)
            body_rule = rules.add(self.prefix + "lark_dynamic_body", " | ".join(bodies))
            pairs.append((k if isinstance(k, str) else TokenTerm(k), body_rule))
        return tag_dispatch_body(pairs, True, [])


class LarkLowering:
    """The result of lowering: EBNF text (root rule ``root``), the warnings, and whether
    special tokens were left unresolved (``defer_tokens``)."""

    __slots__ = ("ebnf", "warnings", "needs_tokenizer")

    def __init__(self, ebnf: str, warnings_: Tuple[str, ...], needs_tokenizer: bool) -> None:
        self.ebnf = ebnf
        self.warnings = warnings_
        self.needs_tokenizer = needs_tokenizer


def check_named_grammars(named_grammars: Any) -> Dict[str, Any]:
    from ..grammar import Grammar

    if named_grammars is None:
        return {}
    if not isinstance(named_grammars, dict):
        raise TypeError("named_grammars must be a dictionary")
    out: Dict[str, Any] = {}
    for name, value in named_grammars.items():
        if not isinstance(name, str):
            raise TypeError("named grammar names must be strings")
        if not _NAMED_GRAMMAR_NAME.match(name):
            raise LarkGrammarError(
                f"Invalid named grammar name {name!r}: names may contain only letters, digits, "
                "underscores, and hyphens (without the leading '@')")
        if not isinstance(value, (Grammar, str)):
            raise TypeError("named grammar values must be Grammar instances or Lark strings")
        out[name] = value
    return out


def lower_lark(source: str, *, tokenizer_info: Any = None, named_grammars: Any = None,
               defer_tokens: bool = False) -> LarkLowering:
    """Lark text -> :class:`LarkLowering`. ``defer_tokens``: special tokens that need a
    tokenizer (named ones, ``<[*]>``, negated sets) are checked for syntax only and spelled
    as a placeholder, and ``needs_tokenizer`` says so (validation without a tokenizer)."""
    if isinstance(source, (bytes, bytearray)):
        source = bytes(source).decode("utf-8")
    if not isinstance(source, str):
        raise TypeError(f"the Lark grammar must be a str, got {type(source).__name__}")
    ctx = _Context(tokenizer_info, check_named_grammars(named_grammars), defer_tokens)
    try:
        doc = parse_lark(source)
        root = _Doc(ctx, doc, "", top=True).lower()
    except RecursionError:
        raise LarkGrammarError("the grammar is nested too deeply (groups nested deeper than "
                               "Python's recursion limit allows)", 1, 1, source) from None
    return LarkLowering(ctx.rules.to_ebnf(root), tuple(ctx.warnings), ctx.deferred_tokens)
