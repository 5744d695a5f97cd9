"""Structural tag -> EBNF text in upstream xgrammar's dialect.

The translation follows upstream xgrammar's own structural-tag compiler format by format, so
the language accepted for a tag is the one upstream accepts (checked in
``tests/structural_tag``):

* free text (``any_text`` with excludes, ``triggered_tags``, ``dispatch``) becomes a
  ``TagDispatch(...)`` rule;
* free text inside a ``tag`` may not contain that tag's end strings (they are added to its
  excludes), so the first end string closes the tag;
* ``triggered_tags`` pairs each trigger with a rule matching the rest of each tag's begin,
  its content and its end; ``at_least_one`` puts one full tag first (no text before it);
  ``stop_after_first`` turns off ``loop_after_dispatch``;
* JSON schemas are converted by :func:`xgrammar2.json_schema.json_schema_to_ebnf` and embedded
  with their rules renamed apart (rules common to several schemas are shared).
"""

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..json_schema import json_schema_to_ebnf as _default_json_schema_to_ebnf
from . import nodes as N
from .ebnf import RuleSet, TokenTerm, quote, tag_dispatch_body, token_tag_dispatch_body
from .tokens import TOKEN_ID_MAX, TokenResolver
from .errors import StructuralTagError, path_join, warn_approximation
from .excludes import filter_json_ebnf, prepare_schema

__all__ = ["structural_tag_to_ebnf", "format_to_ebnf", "format_to_linked_ebnf", "JsonSchemaToEbnf"]

JsonSchemaToEbnf = Callable[..., str]

#: Code points matched by free text without excludes (upstream prints the same class).
ANY_CHAR = "[\\0-\\U0010ffff]"


def structural_tag_to_ebnf(
    tag: Any, *, json_schema_to_ebnf: Optional[JsonSchemaToEbnf] = None,
    token_resolver: Optional[TokenResolver] = None,
) -> str:
    """Converts a structural tag to EBNF text whose start rule is ``root``.

    Parameters
    ----------
    tag : str | dict | pydantic model
        ``{"type": "structural_tag", "format": {...}}`` (or the legacy
        ``{"structures": [...], "triggers": [...]}`` form), as JSON text, a dict, or a
        :class:`xgrammar2.structural_tag.StructuralTag`.
    json_schema_to_ebnf : callable, optional
        Converter for embedded JSON schemas, called as ``f(schema, **options)`` and returning
        EBNF text with a ``root`` rule. Defaults to
        :func:`xgrammar2.json_schema.json_schema_to_ebnf`.

    Raises
    ------
    StructuralTagError
        The tag is malformed; the message starts with the JSON path (a ValueError).
    NotImplementedError
        A feature xgrammar2 cannot express yet (``exclude_token``, ``any_tokens``, token
        budgets); the message names it and its JSON path.

    Token-level formats become ``Token(id)`` terminals. Token strings (rather than ids) and
    ``exclude_tokens`` need ``token_resolver`` (:class:`.tokens.TokenResolver`), which
    :meth:`GrammarCompiler.compile_structural_tag` supplies.
    """
    node = N.read_structural_tag(tag)
    return format_to_ebnf(node, json_schema_to_ebnf=json_schema_to_ebnf,
                          token_resolver=token_resolver)


def format_to_ebnf(node: N.Node, *, json_schema_to_ebnf: Optional[JsonSchemaToEbnf] = None,
                   token_resolver: Optional[TokenResolver] = None) -> str:
    """EBNF text (start rule ``root``) for an already-read format tree."""
    conv = _Converter(json_schema_to_ebnf or _default_json_schema_to_ebnf, token_resolver)
    expr = conv.convert(node)
    conv.rules.define("root", expr)
    return conv.rules.to_ebnf(root="root")


def format_to_linked_ebnf(node: N.Node, *, token_resolver: Optional[TokenResolver] = None
                          ) -> Tuple[str, List[Tuple[str, Any]]]:
    """EBNF text (start rule ``root``) for a format tree whose :class:`~.nodes.LinkedJSON`
    contents become stand-in rules, and the (rule name, fragment) pairs to link."""
    conv = _Converter(_default_json_schema_to_ebnf, token_resolver)
    conv.linked = {}
    expr = conv.convert(node)
    conv.rules.define("root", expr)
    return conv.rules.to_ebnf(root="root"), list(conv.linked.values())


def _seq(parts: Sequence[str]) -> str:
    parts = [p for p in parts if p and p != '""']
    if not parts:
        return '""'
    if len(parts) == 1:
        return parts[0]
    return "(" + " ".join(parts) + ")"


def _alt(parts: Sequence[str]) -> str:
    uniq = list(dict.fromkeys(parts))  # first occurrences, in order
    if len(uniq) == 1:
        return uniq[0]
    return "(" + " | ".join(uniq) + ")"


def _lit(s: str) -> str:
    return quote(s) if s else '""'


def _dedupe(items: Sequence[str]) -> List[str]:
    out: List[str] = []
    for s in items:
        if s and s not in out:
            out.append(s)
    return out


def _is_unlimited(node: N.Node) -> bool:
    """Whether ``node`` ends in free text that nothing but an enclosing end string stops
    (upstream's rule: such content needs a non-empty tag end)."""
    if isinstance(node, (N.AnyText, N.TriggeredTags, N.TagsWithSeparator)):
        return True
    if isinstance(node, (N.Sequence, N.Or)):
        return any(_is_unlimited(e) and not _is_excluded(e) for e in node.elements)
    return False


def _is_excluded(node: N.Node) -> bool:
    return isinstance(node, (N.AnyText, N.TriggeredTags)) and bool(node.excludes)


class _Converter:
    def __init__(self, json_schema_to_ebnf: JsonSchemaToEbnf,
                 token_resolver: Optional[TokenResolver] = None):
        self.rules = RuleSet(reserved=["root"])
        self.json_schema_to_ebnf = json_schema_to_ebnf
        self.tokens = token_resolver
        # End strings of the enclosing tags, innermost last: free text stops before them.
        self.ends: List[List[str]] = []
        self.token_ends: List[List[int]] = []  # the enclosing tag's end token, if a token
        self._any_text_rule: Optional[str] = None
        self._json_cache: Dict[Any, Tuple[str, Any]] = {}
        # Linking converter only: fragment id -> (stand-in rule name, fragment).
        self.linked: Optional[Dict[int, Tuple[str, Any]]] = None

    # -- helpers ----------------------------------------------------------------------

    def link(self, node: N.LinkedJSON) -> str:
        """The stand-in rule for a linked fragment (one per fragment, named after it). Its
        body is never matched: the compiler replaces the rule by the fragment's automata."""
        hit = self.linked.get(id(node.fragment))
        if hit is None:
            name = node.name if node.name not in self.rules.taken else self.rules.fresh(node.name)
            hit = (self.rules.define(name, '"L"'), node.fragment)
            self.linked[id(node.fragment)] = hit
        return hit[0]

    def as_rule(self, expr: str, hint: str) -> str:
        """A rule name for ``expr`` (itself when it already is a rule name)."""
        if expr in self.rules:
            return expr
        return self.rules.add(hint, expr)

    def detected_ends(self) -> List[str]:
        return [e for e in self.ends[-1] if e] if self.ends else []

    def unsupported(self, node: N.Node, what: str) -> NotImplementedError:
        return NotImplementedError(f"{node.path}: {what} is not supported by xgrammar2")

    # -- tokens -------------------------------------------------------------------------

    def token(self, value: Any, path: str) -> TokenTerm:
        """The terminal for a token reference (an id, or a token string resolved with the
        tokenizer)."""
        if isinstance(value, N.TokenLevel):
            path, value = path_join(value.path, "token"), value.data["token"]
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise StructuralTagError(path, f"a token must be an id or a token string, got {value!r}")
        if isinstance(value, str):
            if self.tokens is None:
                raise StructuralTagError(
                    path, f"the token string {value!r} needs a tokenizer to resolve: compile with "
                    "GrammarCompiler.compile_structural_tag, or give the token id")
            tid = self.tokens.token_id(value)
            if tid is None:
                raise StructuralTagError(path, f"{value!r} is not a token of this tokenizer")
            value = tid
        if value > TOKEN_ID_MAX or (self.tokens is not None and value >= self.tokens.vocab_size):
            limit = self.tokens.vocab_size if self.tokens is not None else TOKEN_ID_MAX + 1
            raise StructuralTagError(path, f"token id {value} is outside the vocabulary [0, {limit})")
        return TokenTerm(value)

    def token_excludes(self, tokens: Sequence[Any], path: str,
                       paths: Optional[Sequence[str]] = None) -> List[str]:
        """String excludes standing for ``exclude_tokens`` in free text. A special token can
        never be free text (only a ``Token(...)`` terminal admits it), so it needs nothing;
        a text token is excluded by its text, which also forbids that text spelled by other
        tokens (stricter than a token-id exclusion, never looser)."""
        out: List[str] = []
        for i, t in enumerate(tokens):
            p = paths[i] if paths is not None else path_join(path, i)
            if isinstance(t, int) and self.tokens is None:
                raise StructuralTagError(
                    p, "exclude_tokens need a tokenizer (to tell special tokens from text): "
                    "compile with GrammarCompiler.compile_structural_tag")
            term = self.token(t, p)
            text = self.tokens.text(term.id) if self.tokens is not None else None
            if text is not None:
                try:
                    out.append(text.decode("utf-8"))
                except UnicodeDecodeError:
                    raise StructuralTagError(
                        p, f"token {term.id} is a partial UTF-8 sequence; it cannot be excluded "
                        "from free text") from None
        return out

    def free_text(self, excludes: Sequence[str], hint: str = "any_text") -> str:
        if excludes:
            return self.rules.add(hint, tag_dispatch_body([], False, _dedupe(excludes)))
        if self._any_text_rule is None:
            self._any_text_rule = self.rules.add(hint, ANY_CHAR + "*")
        return self._any_text_rule

    def end_expr(self, tag: N.Tag) -> str:
        ends = tag.end
        if isinstance(ends, N.TokenLevel):
            return self.token(ends, ends.path).ebnf()
        if len(ends) == 1:
            return _lit(ends[0])
        return self.as_rule(_alt([_lit(e) for e in ends]), "tag_end")

    def begin_expr(self, tag: N.Tag) -> str:
        if isinstance(tag.begin, N.TokenLevel):
            return self.token(tag.begin, tag.begin.path).ebnf()
        return _lit(tag.begin)

    def tag_content(self, tag: N.Tag) -> str:
        if type(tag.content) is N.LinkedJSON and self.linked is not None:
            return self.link(tag.content)  # no free text inside: the end needs no exclude
        token_end = isinstance(tag.end, N.TokenLevel)
        # A token end needs no exclude in the content: free text never produces a token
        # terminal, so the end token always closes the tag.
        if (_is_unlimited(tag.content) and not token_end and not any(tag.end)
                and not _is_excluded(tag.content)):
            raise StructuralTagError(
                path_join(tag.path, "end"),
                "When the content is unlimited, at least one end string must be non-empty: the "
                "tag's content is free text (any_text, triggered_tags, tags_with_separator) "
                "that only an end string can stop",
            )
        self.ends.append([] if token_end else list(tag.end))
        self.token_ends.append([self.token(tag.end, tag.end.path).id] if token_end else [])
        try:
            return self.convert(tag.content)
        finally:
            self.ends.pop()
            self.token_ends.pop()

    # -- formats ----------------------------------------------------------------------

    def convert(self, node: N.Node) -> str:
        method = getattr(self, "visit_" + node.kind)
        return method(node)

    def visit_const_string(self, node: N.ConstString) -> str:
        return _lit(node.value)

    def visit_json_schema(self, node: N.JSONSchema) -> str:
        if self.linked is not None and type(node) is N.LinkedJSON:
            return self.link(node)
        if node.style != "json":
            from .xml import xml_schema_expr

            return xml_schema_expr(self, node)
        return self.json_value(node, node.schema, hint="json_schema")

    def json_value(self, node: N.JSONSchema, schema: Any, hint: str, strict_mode: bool = True) -> str:
        """The root rule of ``schema`` as JSON, with ``node``'s options. Converted schemas are
        memoised by the JSON-schema front end across requests; here only within this tag,
        by the schema's id (the entry keeps the schema alive, so the id is not reused)."""
        key = (id(schema), strict_mode, node.max_whitespace_cnt, node.any_order, tuple(node.excludes))
        hit = self._json_cache.get(key)
        if hit is not None:
            return hit[0]
        opts: Dict[str, Any] = dict(
            any_whitespace=True,
            indent=None,
            separators=None,
            strict_mode=strict_mode,
            max_whitespace_cnt=node.max_whitespace_cnt,
            lenient=False,
        )
        if node.any_order:
            opts["any_order"] = True
        if node.excludes:
            opts["excludes"] = list(node.excludes)
        try:
            try:
                text = self.json_schema_to_ebnf(schema, **opts)
            except TypeError as e:
                if "excludes" not in opts or "excludes" not in str(e):
                    raise
                # A JSON-schema converter without excludes: they are applied to its plain
                # strings here (see excludes.py).
                del opts["excludes"]
                text = self.json_schema_to_ebnf(prepare_schema(schema, node.excludes, warn_approximation), **opts)
                text, complete = filter_json_ebnf(text if isinstance(text, str) else text.ebnf, node.excludes)
                if not complete:
                    warn_approximation(path_join(node.path, "excludes"), "not applied to the names "
                                       "of additional properties inside JSON values")
            if not isinstance(text, str):
                text = text.ebnf  # xgrammar2.json_schema returns a ConversionResult
        except TypeError as e:
            if "any_order" in opts:
                raise NotImplementedError(
                    f"{node.path}: any_order in a json_schema format is not supported by the "
                    f"JSON-schema converter: {e}"
                ) from e
            raise
        except NotImplementedError:
            raise
        except ValueError as e:
            err = StructuralTagError(path_join(node.path, "json_schema"), str(e))
            # Where inside the schema (a JSON pointer), for callers that name the tool.
            err.schema_pointer = getattr(e, "pointer", None)
            raise err from e
        root = self.rules.embed(text, "root", hint)
        self._json_cache[key] = (root, schema)
        return root

    def visit_any_text(self, node: N.AnyText) -> str:
        token_ex = self.token_excludes(
            [t.data["token"] for t in node.token_excludes], path_join(node.path, "excludes"),
            [t.path for t in node.token_excludes]) if node.token_excludes else []
        excludes = _dedupe(node.excludes + token_ex + self.detected_ends())
        if node.max_tokens is not None or node.max_chars is not None:
            # A budgeted free text is a rule of its own carrying the budgets as rule
            # attributes (runtime semantics in the C core: csrc/parse/attrs.c).
            parts = []
            if node.max_tokens is not None:
                parts.append(f"max_tokens={node.max_tokens}")
            if node.max_chars is not None:
                parts.append(f"max_chars={node.max_chars}")
            if node.max_tokens == 0:
                body = '""'
            elif excludes:
                body = tag_dispatch_body([], False, excludes)
            else:
                body = ANY_CHAR + "*"
            name = self.rules.add("any_text", body)
            self.rules.set_attrs(name, "[" + ", ".join(parts) + "]")
            return name
        return self.free_text(excludes)

    def visit_grammar(self, node: N.GrammarText) -> str:
        try:
            return self.rules.embed(node.grammar, "root", "grammar")
        except ValueError as e:
            raise StructuralTagError(path_join(node.path, "grammar"), str(e)) from e

    def visit_regex(self, node: N.Regex) -> str:
        # Upstream reads a structural tag's regex as Grammar.from_regex does (its "converter"
        # dialect, docs/regex.md), not as the EBNF Regex(...) macro: embed that grammar.
        from ..grammar import Grammar  # the C core; imported here to keep this module light

        try:
            text = str(Grammar.from_regex(node.pattern))
        except (RuntimeError, ValueError) as e:
            raise StructuralTagError(path_join(node.path, "pattern"), f"invalid regex: {e}") from e
        return self.rules.embed(text, "root", "regex")

    def visit_sequence(self, node: N.Sequence) -> str:
        return _seq([self.convert(e) for e in node.elements])

    def visit_or(self, node: N.Or) -> str:
        return _alt([self.convert(e) for e in node.elements])

    def visit_tag(self, node: N.Tag) -> str:
        return self.as_rule(self.tag_expr(node), "tag")

    def tag_expr(self, node: N.Tag) -> str:
        """The tag as an expression: begin, content, end."""
        content = self.tag_content(node)
        return _seq([self.begin_expr(node), content, self.end_expr(node)])

    def visit_triggered_tags(self, node: N.TriggeredTags) -> str:
        excludes = _dedupe(node.excludes + self.detected_ends())
        per_trigger: List[List[int]] = [[] for _ in node.triggers]
        for i, tag in enumerate(node.tags):
            if isinstance(tag.begin, N.TokenLevel):
                raise StructuralTagError(
                    path_join(tag.path, "begin"),
                    "Tags in triggered_tags must have a string begin, not a token format (for "
                    "token triggers use token_triggered_tags)")
            hits = [k for k, t in enumerate(node.triggers) if tag.begin.startswith(t)]
            if not hits:
                raise StructuralTagError(
                    path_join(tag.path, "begin"),
                    f"One tag does not match any trigger in a triggered tags format: the begin "
                    f"{tag.begin!r} does not start with any trigger "
                    f"({', '.join(repr(t) for t in node.triggers)})",
                )
            if len(hits) > 1:
                raise StructuralTagError(
                    path_join(tag.path, "begin"),
                    f"One tag matches multiple triggers in a triggered tags format: the begin "
                    f"{tag.begin!r} starts with more than one trigger "
                    f"({', '.join(repr(node.triggers[k]) for k in hits)})",
                )
            per_trigger[hits[0]].append(i)
        for k, ids in enumerate(per_trigger):
            if not ids:
                raise StructuralTagError(
                    path_join(node.path, "triggers", k),
                    f"the trigger {node.triggers[k]!r} starts no tag's begin",
                )
        contents = [self.tag_content(tag) for tag in node.tags]
        ends = [self.end_expr(tag) for tag in node.tags]
        full = [_seq([_lit(t.begin), c, e]) for t, c, e in zip(node.tags, contents, ends)] \
            if node.at_least_one else []
        if node.at_least_one and node.stop_after_first:
            return self.as_rule(_alt(full), "triggered_tags")
        pairs = []
        for k, ids in enumerate(per_trigger):
            trig = node.triggers[k]
            body = _alt([_seq([_lit(node.tags[i].begin[len(trig):]), contents[i], ends[i]])
                         for i in ids])
            pairs.append((trig, self.rules.add("triggered_tags_group", body)))
        loop = not node.stop_after_first
        if node.at_least_one:
            first = self.rules.add("triggered_tags_first", _alt(full))
            sub = self.rules.add("triggered_tags_sub", tag_dispatch_body(pairs, loop, excludes))
            return self.rules.add("triggered_tags", f"{first} {sub}")
        return self.rules.add("triggered_tags", tag_dispatch_body(pairs, loop, excludes))

    def visit_tags_with_separator(self, node: N.TagsWithSeparator) -> str:
        # The tags inline, not one rule each: the alternation of literal-led bodies is then
        # one rule that lowering builds directly as a trie (trie_alt.c), so a chat format
        # with many tools (Harmony: four header orders per tool) advances one parser item
        # per byte of the header instead of one per tag and header order.
        tags = self.as_rule(_alt([self.tag_expr(t) for t in node.tags]), "tags_with_separator_tags")
        if node.stop_after_first:
            body = tags
        else:
            body = f"{tags} ({_seq([_lit(node.separator), tags])})*"
        if not node.at_least_one:
            body = f'("" | {body})'
        return self.rules.add("tags_with_separator", body)

    def visit_optional(self, node: N.Optional_) -> str:
        return f"({self.convert(node.content)})?"

    def visit_plus(self, node: N.Plus) -> str:
        return f"({self.convert(node.content)})+"

    def visit_star(self, node: N.Star) -> str:
        return f"({self.convert(node.content)})*"

    def visit_repeat(self, node: N.Repeat) -> str:
        inner = self.convert(node.content)
        if node.max == 0:
            return '""'
        hi = "" if node.max == -1 else str(node.max)
        return f"({inner}){{{node.min},{hi}}}"

    def visit_dispatch(self, node: N.Dispatch) -> str:
        pairs = []
        for i, (pattern, fmt) in enumerate(node.rules):
            pairs.append((pattern, self.as_rule(self.convert(fmt), "dispatch_case")))
        return self.rules.add("tag_dispatch", tag_dispatch_body(pairs, node.loop, _dedupe(node.excludes)))

    def visit_token_level(self, node: N.TokenLevel) -> str:
        if node.type == "token":
            return self.token(node.data["token"], path_join(node.path, "token")).ebnf()
        if node.type == "token_triggered_tags":
            return self.token_triggered_tags(node)
        if node.type == "token_dispatch":
            pairs = []
            for i, (tok, fmt) in enumerate(node.data["rules"]):
                term = self.token(tok, path_join(node.path, "rules", i, 0))
                pairs.append((term, self.as_rule(self.convert(fmt), "dispatch_case")))
            excludes = self.exclude_ids(node, [t.id for t, _ in pairs])
            return self.rules.add("token_tag_dispatch", token_tag_dispatch_body(
                [(t.id, r) for t, r in pairs], node.data.get("loop", True), excludes))
        if node.type in ("exclude_token", "any_tokens"):
            return self.token_class(node)
        raise self.unsupported(node, f"the token-level format '{node.type}'")

    def exclude_ids(self, node: N.TokenLevel, triggers: List[int]) -> List[int]:
        """The sorted token ids a token-level format's free tokens exclude: its
        ``exclude_tokens`` and the enclosing tag's end token (not the triggers: a trigger
        and an exclude may not be the same token)."""
        ids = [self.token(t, path_join(node.path, "exclude_tokens", i)).id
               for i, t in enumerate(node.data["exclude_tokens"])]
        for i, t in enumerate(ids):
            if t in triggers:
                raise StructuralTagError(path_join(node.path, "exclude_tokens", i),
                                         f"token {t} is both a trigger and excluded")
        ends = [t for t in (self.token_ends[-1] if self.token_ends else []) if t not in triggers]
        return sorted(set(ids + ends))

    def token_class(self, node: N.TokenLevel) -> str:
        """``exclude_token``: one token not in ``exclude_tokens`` (nor the enclosing tag's
        end token); ``any_tokens``: any number of them, with an optional token budget.
        Written as upstream writes them (``ExcludeToken(...)``, csrc/front/ebnf_tokens.c)."""
        cls = "ExcludeToken(" + ", ".join(str(i) for i in self.exclude_ids(node, [])) + ")"
        if node.type == "exclude_token":
            return self.rules.add("exclude_token", cls)
        inner = self.rules.add("any_tokens_inner", cls)
        name = self.rules.fresh("any_tokens")
        budget = node.data.get("max_tokens")
        body = '""' if budget == 0 else f'"" | ({inner} {name})'
        self.rules.define(name, body, f"[max_tokens={budget}]" if budget is not None else "")
        return name

    def token_triggered_tags(self, node: N.TokenLevel) -> str:
        """As triggered_tags, with token triggers: a tag's begin is its trigger token."""
        d = node.data
        triggers = [self.token(t, path_join(node.path, "trigger_tokens", i))
                    for i, t in enumerate(d["trigger_tokens"])]
        tags: List[N.Tag] = d["tags"]
        per_trigger: List[List[int]] = [[] for _ in triggers]
        for i, tag in enumerate(tags):
            if not isinstance(tag.begin, N.TokenLevel):
                raise StructuralTagError(path_join(tag.path, "begin"),
                                         "Tags in token_triggered_tags must have a token format "
                                         "begin, not a string (one of trigger_tokens)")
            term = self.token(tag.begin, tag.begin.path)
            if term not in triggers:
                raise StructuralTagError(path_join(tag.path, "begin"),
                                         f"the begin {term!r} is not one of trigger_tokens")
            per_trigger[triggers.index(term)].append(i)
        for k, ids in enumerate(per_trigger):
            if not ids:
                raise StructuralTagError(path_join(node.path, "trigger_tokens", k),
                                         f"the trigger {triggers[k]!r} starts no tag")
        excludes = self.exclude_ids(node, [t.id for t in triggers])
        contents = [self.tag_content(tag) for tag in tags]
        ends = [self.end_expr(tag) for tag in tags]
        full = [_seq([self.begin_expr(t), c, e]) for t, c, e in zip(tags, contents, ends)]
        at_least_one, stop_after_first = d.get("at_least_one", False), d.get("stop_after_first", False)
        if at_least_one and stop_after_first:
            return self.as_rule(_alt(full), "token_triggered_tags")
        pairs = [(triggers[k].id, self.rules.add("token_triggered_tags_group",
                                              _alt([_seq([contents[i], ends[i]]) for i in ids])))
                 for k, ids in enumerate(per_trigger)]
        loop = not stop_after_first
        if at_least_one:
            first = self.rules.add("token_triggered_tags_first", _alt(full))
            rest = self.rules.add("token_triggered_tags_sub",
                                  token_tag_dispatch_body(pairs, loop, excludes))
            return self.rules.add("token_triggered_tags", f"{first} {rest}")
        return self.rules.add("token_triggered_tags", token_tag_dispatch_body(pairs, loop, excludes))


def ebnf_from_api_args(*args: Any, **kwargs: Any) -> str:
    """EBNF for the arguments of ``Grammar.from_structural_tag`` /
    ``GrammarCompiler.compile_structural_tag``: one structural tag (JSON text, dict, pydantic
    model), or upstream's legacy ``(tags, triggers)`` with ``tags`` a list of
    ``StructuralTagItem`` (or dicts with ``begin`` / ``schema`` / ``end``)."""
    conv = kwargs.pop("json_schema_to_ebnf", None)
    resolver = kwargs.pop("token_resolver", None)
    if "structural_tag" in kwargs:
        args = (kwargs.pop("structural_tag"),) + args
    if "tags" in kwargs or "triggers" in kwargs:
        args = args + (kwargs.pop("tags", None), kwargs.pop("triggers", None))
        args = tuple(a for a in args if a is not None)
    if kwargs:
        raise TypeError(f"unexpected keyword arguments: {', '.join(kwargs)}")
    if len(args) == 1:
        return structural_tag_to_ebnf(args[0], json_schema_to_ebnf=conv, token_resolver=resolver)
    if len(args) == 2:
        tags, triggers = args
        structures = []
        for t in tags:
            if isinstance(t, dict):
                structures.append(t)
                continue
            schema = getattr(t, "schema", None)
            if schema is None or not isinstance(schema, (str, dict, bool, type)):
                schema = getattr(t, "schema_", schema)
            structures.append({"begin": t.begin, "schema": schema, "end": t.end})
        legacy = {"type": "structural_tag", "structures": structures, "triggers": list(triggers)}
        return structural_tag_to_ebnf(legacy, json_schema_to_ebnf=conv, token_resolver=resolver)
    raise TypeError(
        "expected one structural tag, or the legacy (tags, triggers) pair; "
        f"got {len(args)} positional arguments"
    )
