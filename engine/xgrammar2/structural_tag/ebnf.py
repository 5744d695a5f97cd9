"""Writing EBNF in upstream xgrammar's dialect: literals, ``TagDispatch(...)`` in upstream's
printed layout, and a rule set that embeds other grammars (JSON-schema output, user EBNF)
with their rules renamed apart.

Embedding shares rules: a rule whose name and body equal those of a rule seen before, and
which references only such rules (the ``ws`` / ``string`` / ``number`` family every
JSON-schema grammar carries), keeps its name and is written once; the other rules get a
prefix unique to their grammar (``s12.``). With 100 tools this keeps one copy of the JSON
value rules instead of 100, and the renamed text of each grammar is computed once per
process, so a tool seen before costs a cache lookup.
"""

import itertools
import functools
import re
import threading
from collections import OrderedDict
from typing import Dict, List, Optional, Sequence, Set, Tuple, Union

__all__ = [
    "quote",
    "tag_dispatch_body",
    "RuleSet",
    "parse_rules",
    "EbnfRule",
]

_NAME_START = re.compile(r"[A-Za-z_.\-]")


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_ESCAPES.update({chr(c): "\\x%02x" % c for c in list(range(0x20)) + [0x7F] if chr(c) not in _ESCAPES})
_ESCAPE_TABLE = str.maketrans(_ESCAPES)
_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f\x7f"\\]')


@functools.lru_cache(maxsize=8192)
def quote(s: str) -> str:
    """An EBNF string literal matching exactly ``s`` (UTF-8 text).

    Only escapes both upstream xgrammar and the xgrammar2 parser read identically are used:
    ``\\\\ \\" \\n \\r \\t`` and ``\\xNN`` for the other ASCII control characters.
    """
    if _NEEDS_ESCAPE.search(s) is None:
        return '"' + s + '"'
    return '"' + s.translate(_ESCAPE_TABLE) + '"'


class TokenTerm:
    """A token-level terminal: matches exactly token ``id`` (printed ``Token(id)``)."""

    __slots__ = ("id",)

    def __init__(self, token_id: int):
        self.id = int(token_id)

    def ebnf(self) -> str:
        return f"Token({self.id})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TokenTerm) and other.id == self.id

    def __hash__(self) -> int:
        return hash(("TokenTerm", self.id))

    def __repr__(self) -> str:
        return f"Token({self.id})"


def _term(x: Union[str, TokenTerm]) -> str:
    return x.ebnf() if isinstance(x, TokenTerm) else quote(x)


def tag_dispatch_body(
    pairs: Sequence[Tuple[Union[str, TokenTerm], str]], loop_after_dispatch: bool,
    excludes: Sequence[Union[str, TokenTerm]]
) -> str:
    """The body of a ``TagDispatch`` rule exactly as upstream xgrammar prints it::

        TagDispatch(
          ("<function=", triggered_tags_group),
          loop_after_dispatch=true,
          excludes=("</tool_call>")
        )
    """
    lines = ["TagDispatch("]
    for trigger, rule in pairs:
        lines.append(f"  ({_term(trigger)}, {rule}),")
    lines.append(f"  loop_after_dispatch={'true' if loop_after_dispatch else 'false'},")
    lines.append("  excludes=(" + ", ".join(_term(e) for e in excludes) + ")")
    lines.append(")")
    return "\n".join(lines)


def token_tag_dispatch_body(pairs: Sequence[Tuple[int, str]], loop_after_dispatch: bool,
                            excludes: Sequence[int]) -> str:
    """The body of a ``TokenTagDispatch`` rule as upstream xgrammar prints it: whole tokens,
    any but the triggers and ``excludes`` (token ids), in which trigger token ``t`` hands
    over to its rule::

        TokenTagDispatch(
          (10, token_triggered_tags_group),
          loop_after_dispatch=true,
          excludes=(50)
        )
    """
    lines = ["TokenTagDispatch("]
    for trigger, rule in pairs:
        lines.append(f"  ({trigger}, {rule}),")
    lines.append(f"  loop_after_dispatch={'true' if loop_after_dispatch else 'false'},")
    lines.append("  excludes=(" + ", ".join(str(e) for e in excludes) + ")")
    lines.append(")")
    return "\n".join(lines)


# ---- reading EBNF ----------------------------------------------------------------------

# One token of xgrammar's EBNF: a comment, a (byte) string, a (byte) character class, a name,
# '::=', whitespace, or any other single character. Strings and classes may contain escaped
# quotes / brackets; an unterminated one swallows the rest of the text (the parser that
# later reads the text reports it with a line and column).
_TOKEN = re.compile(
    r"""
      (?P<ws>\s+)
    | (?P<comment>\#[^\n]*)
    | (?P<str>b?"(?:[^"\\]|\\.)*(?:"|\Z))
    | (?P<cls>b?\[(?:[^\]\\]|\\.)*(?:\]|\Z))
    | (?P<name>[A-Za-z_.\-][A-Za-z0-9_.\-]*)
    | (?P<def>::=)
    | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)


class EbnfRule:
    """One rule of a parsed grammar: its name, its body as text, the names it references, and
    the body split into literal text and references (to rename them). Read-only once built:
    parsed grammars are cached and shared."""

    __slots__ = ("name", "attrs", "body", "refs", "segments")

    def __init__(self, name: str, tokens: List[Tuple[str, str]], attrs: str = ""):
        self.name = name
        #: the rule's attribute group as written (``[max_tokens=3]``), or ""
        self.attrs = attrs
        self.body = "".join(t for _, t in tokens).strip()
        self.refs: Set[str] = set()
        self.segments: Tuple[Tuple[bool, str], ...] = ()


def _finish(rule: EbnfRule, tokens: List[Tuple[str, str]]) -> None:
    segs: List[Tuple[bool, str]] = []
    buf: List[str] = []
    for kind, val in tokens:
        if kind == "ref":
            if buf:
                segs.append((False, "".join(buf)))
                buf = []
            segs.append((True, val))
        else:
            buf.append(val)
    if buf:
        segs.append((False, "".join(buf)))
    # Bodies are printed stripped, like ``body``.
    if segs and not segs[0][0]:
        segs[0] = (False, segs[0][1].lstrip())
    if segs and not segs[-1][0]:
        segs[-1] = (False, segs[-1][1].rstrip())
    rule.segments = tuple(segs)


_PARSE_CACHE: "OrderedDict[str, Tuple[EbnfRule, ...]]" = OrderedDict()
_PARSE_CACHE_SIZE = 256  # a miss here only happens on a miss of _PREPARED
_PARSE_LOCK = threading.Lock()


def parse_rules(text: str) -> Tuple[EbnfRule, ...]:
    """Splits EBNF text into rules (cached: the same JSON-schema grammar is embedded again
    and again). References are resolved against the defined names, so macro names
    (``TagDispatch``, ``Regex``), macro keywords and their values are left alone. The text is
    not validated here: the grammar parser does that."""
    with _PARSE_LOCK:
        hit = _PARSE_CACHE.get(text)
        if hit is not None:
            _PARSE_CACHE.move_to_end(text)
            return hit
    rules = _parse_rules(text)
    with _PARSE_LOCK:
        _PARSE_CACHE[text] = rules
        if len(_PARSE_CACHE) > _PARSE_CACHE_SIZE:
            _PARSE_CACHE.popitem(last=False)
    return rules


def _parse_rules(text: str) -> Tuple[EbnfRule, ...]:
    toks: List[Tuple[str, str]] = [(m.lastgroup, m.group()) for m in _TOKEN.finditer(text)]
    # Rule starts: a name followed (after optional whitespace) by '::='.
    starts: List[int] = []
    sig = [i for i, (k, _) in enumerate(toks) if k not in ("ws", "comment")]
    # A rule head may carry an attribute group right after its name: name[lazy] ::=
    for x, (a, b) in enumerate(zip(sig, sig[1:])):
        if toks[a][0] == "name" and toks[b][0] == "def":
            starts.append(a)
        elif (toks[a][0] == "name" and b == a + 1 and toks[b][0] == "cls" and
              not toks[b][1].startswith("b") and x + 2 < len(sig) and toks[sig[x + 2]][0] == "def"):
            starts.append(a)
    rules: List[EbnfRule] = []
    bodies: List[List[Tuple[str, str]]] = []
    for n, s in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(toks)
        j = s + 1
        attrs = toks[j][1] if toks[j][0] == "cls" else ""
        while toks[j][0] != "def":
            j += 1
        body = [t for t in toks[j + 1 : end] if t[0] != "comment"]
        rules.append(EbnfRule(toks[s][1], body, attrs))
        bodies.append(body)
    names = {r.name for r in rules}
    for r, body in zip(rules, bodies):
        sig_idx = [i for i, (k, _) in enumerate(body) if k != "ws"]
        for pos, i in enumerate(sig_idx):
            kind, val = body[i]
            if kind != "name" or val not in names:
                continue
            nxt = body[sig_idx[pos + 1]] if pos + 1 < len(sig_idx) else None
            prv = body[sig_idx[pos - 1]] if pos > 0 else None
            if i + 1 < len(body) and body[i + 1] == ("other", "("):
                continue  # a macro call such as Regex( or TagDispatch(
            if nxt is not None and nxt == ("other", "="):
                continue  # a macro keyword: loop_after_dispatch=
            if prv == ("other", "=") and pos > 1 and body[sig_idx[pos - 2]][0] == "name":
                continue  # a macro keyword's value: loop_after_dispatch=true
            r.refs.add(val)
            body[i] = ("ref", val)
        _finish(r, body)
    return tuple(rules)


def _render(rule: EbnfRule, mapping: Dict[str, str]) -> str:
    return "".join(mapping.get(v, v) if is_ref else v for is_ref, v in rule.segments)


class _Prepared:
    """An embeddable grammar, renamed once per process: its private rules carry a unique
    ``sN.`` prefix (so they never clash and their text can be reused verbatim), and the rules
    it shares with other grammars (``ws``, ``string``, ... of the JSON converter) keep their
    names."""

    __slots__ = ("root", "text", "names", "common", "name_set")

    def __init__(self, root: str, text: str, names: Tuple[str, ...], common: Tuple[Tuple[str, str], ...]):
        self.root = root
        self.text = text
        self.names = names
        self.common = common
        self.name_set = frozenset(names)


# Process-wide: the body each shared rule name stands for (first come), and the prepared
# grammars (LRU). Both bounded.
_COMMON: Dict[str, str] = {}
_COMMON_LIMIT = 65536
_PREPARED: "OrderedDict[Tuple[str, str], _Prepared]" = OrderedDict()
_PREPARED_SIZE = 2048
_PREP_LOCK = threading.Lock()
_SEQ = itertools.count()


def _shareable(rules: Sequence[EbnfRule], by_name: Dict[str, EbnfRule], root_rule: str,
               same_body) -> Set[str]:
    """Greatest set of rules whose body is the shared one for their name and whose
    references are all in the set too."""
    shared = {r.name for r in rules if r.name != root_rule and not r.attrs and same_body(r)}
    changed = True
    while changed:
        changed = False
        for name in list(shared):
            if any(ref not in shared for ref in by_name[name].refs):
                shared.discard(name)
                changed = True
    return shared


def _prepare(text: str, root_rule: str) -> _Prepared:
    key = (text, root_rule)
    with _PREP_LOCK:
        hit = _PREPARED.get(key)
        if hit is not None:
            _PREPARED.move_to_end(key)
            return hit
    rules = parse_rules(text)
    by_name = {r.name: r for r in rules}
    if root_rule not in by_name:
        raise ValueError(f"the grammar has no rule named {root_rule!r}")

    def same_body(r: EbnfRule) -> bool:
        with _PREP_LOCK:
            body = _COMMON.get(r.name)
            if body is None and len(_COMMON) < _COMMON_LIMIT:
                _COMMON[r.name] = body = r.body
        return body == r.body

    shared = _shareable(rules, by_name, root_rule, same_body)
    with _PREP_LOCK:
        prefix = f"s{next(_SEQ)}."
    mapping = {n: (n if n in shared else prefix + n) for n in by_name}
    private = [r for r in rules if r.name not in shared]
    prepared = _Prepared(
        mapping[root_rule],
        "".join(f"{mapping[r.name]}{r.attrs} ::= {_render(r, mapping)}\n" for r in private),
        tuple(mapping[r.name] for r in private),
        tuple((r.name, r.body) for r in rules if r.name in shared),
    )
    with _PREP_LOCK:
        _PREPARED[key] = prepared
        if len(_PREPARED) > _PREPARED_SIZE:
            _PREPARED.popitem(last=False)
    return prepared


class RuleSet:
    """An ordered set of EBNF rules with unique names, printed as one grammar."""

    def __init__(self, reserved: Sequence[str] = ()):
        self._bodies: Dict[str, str] = {}
        self._attrs: Dict[str, str] = {}  # name -> its attribute group ("[lazy]")
        # Rule names, and chunks of already printed rules (embedded grammars), in order.
        self._order: List[Tuple[bool, str]] = []
        self._reserved: Set[str] = set(reserved)
        self._counters: Dict[str, int] = {}
        # (EBNF text, root rule) -> name of the rule its root was embedded as.
        self._embedded: Dict[Tuple[str, str], str] = {}

    def __contains__(self, name: str) -> bool:
        return name in self._bodies

    @property
    def taken(self) -> Set[str]:
        """Every name defined or reserved (read-only view)."""
        return self._reserved

    def fresh(self, hint: str) -> str:
        """A rule name not used yet, derived from ``hint`` (``hint``, ``hint_1``, ...)."""
        if not hint or not _NAME_START.match(hint[0]):
            hint = "r_" + hint
        if hint not in self._bodies and hint not in self._reserved:
            self._reserved.add(hint)
            return hint
        k = self._counters.get(hint, 0)
        while True:
            k += 1
            name = f"{hint}_{k}"
            if name not in self._bodies and name not in self._reserved:
                self._counters[hint] = k
                self._reserved.add(name)
                return name

    def define(self, name: str, body: str, attrs: str = "") -> str:
        """Defines a rule under a name obtained from :meth:`fresh` (or reserved);
        ``attrs`` is its attribute group (``[max_tokens=3]``) or ""."""
        if name in self._bodies:
            raise ValueError(f"internal error: rule {name!r} defined twice")
        self._bodies[name] = body
        if attrs:
            self._attrs[name] = attrs
        self._order.append((False, name))
        self._reserved.add(name)
        return name

    def set_attrs(self, name: str, attrs: str) -> None:
        """Gives rule ``name`` the attribute group ``attrs`` (``[max_tokens=3]``; "" for
        none)."""
        if attrs:
            self._attrs[name] = attrs
        else:
            self._attrs.pop(name, None)

    def add(self, hint: str, body: str) -> str:
        """Defines a new rule named after ``hint`` and returns its name."""
        return self.define(self.fresh(hint), body)

    def embed(self, ebnf_text: str, root_rule: str = "root", hint: str = "root") -> str:
        """Adds the rules of another grammar, renamed apart from the rules present, and
        returns the name its root rule got. Rules shared with other grammars (same name and
        body) appear once; embedding the same text twice returns the same root."""
        key = (ebnf_text, root_rule)
        hit = self._embedded.get(key)
        if hit is not None:
            return hit
        p = _prepare(ebnf_text, root_rule)
        # (every defined name is reserved too, see define)
        fits = self._reserved.isdisjoint(p.name_set) and all(
            self._bodies.get(n, body) == body and (n in self._bodies or n not in self._reserved)
            for n, body in p.common
        )
        if not fits:  # a name clash with rules written here: rename one by one
            root = self._embed_renamed(ebnf_text, root_rule, hint)
        else:
            for n, body in p.common:
                if n not in self._bodies:
                    self.define(n, body)
            self._reserved.update(p.names)
            self._order.append((True, p.text))
            root = p.root
        self._embedded[key] = root
        return root

    def _embed_renamed(self, ebnf_text: str, root_rule: str, hint: str) -> str:
        rules = parse_rules(ebnf_text)
        by_name = {r.name: r for r in rules}
        shared = _shareable(rules, by_name, root_rule, lambda r: self._bodies.get(r.name) == r.body)
        mapping: Dict[str, str] = {}
        for r in rules:
            if r.name in shared:
                mapping[r.name] = r.name
            elif r.name == root_rule:
                mapping[r.name] = self.fresh(hint)
            else:
                mapping[r.name] = self.fresh(r.name)
        for r in rules:
            if r.name not in shared:
                self.define(mapping[r.name], _render(r, mapping), r.attrs)
        return mapping[root_rule]

    def to_ebnf(self, root: Optional[str] = None) -> str:
        """The grammar text; ``root`` (if given) is printed first."""
        out = []
        attrs = self._attrs
        if root is not None and root in self._bodies:
            out.append(f"{root}{attrs.get(root, '')} ::= {self._bodies[root]}\n")
        for is_text, item in self._order:
            if is_text:
                out.append(item)
            elif item != root:
                out.append(f"{item}{attrs.get(item, '')} ::= {self._bodies[item]}\n")
        return "".join(out)
