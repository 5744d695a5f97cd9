"""Writing EBNF in upstream xgrammar's dialect: literals, ``TagDispatch(...)`` in upstream's
printed layout, and a rule set that embeds other grammars (JSON-schema output, user EBNF)
with their rules renamed apart.

Embedding shares rules: when an embedded grammar defines a rule whose name and body equal
one already present (the ``basic_string`` / ``basic_number`` family that every JSON-schema
grammar carries), the existing rule is reused instead of being copied under a new name. With
100 tools this keeps one copy of the JSON value rules instead of 100.
"""

import re
from typing import Dict, List, Optional, Sequence, Set, Tuple

__all__ = [
    "quote",
    "tag_dispatch_body",
    "RuleSet",
    "parse_rules",
    "EbnfRule",
]

_NAME_START = re.compile(r"[A-Za-z_.\-]")


def quote(s: str) -> str:
    """An EBNF string literal matching exactly ``s`` (UTF-8 text).

    Only escapes both upstream xgrammar and the xgrammar2 parser read identically are used:
    ``\\\\ \\" \\n \\r \\t`` and ``\\xNN`` for the other ASCII control characters.
    """
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif o < 0x20 or o == 0x7F:
            out.append("\\x%02x" % o)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def tag_dispatch_body(
    pairs: Sequence[Tuple[str, str]], loop_after_dispatch: bool, excludes: Sequence[str]
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
        lines.append(f"  ({quote(trigger)}, {rule}),")
    lines.append(f"  loop_after_dispatch={'true' if loop_after_dispatch else 'false'},")
    lines.append("  excludes=(" + ", ".join(quote(e) for e in excludes) + ")")
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
    """One rule of a parsed grammar: its name, its body as text, and the token layout of the
    body (to rename references)."""

    __slots__ = ("name", "tokens", "body", "refs")

    def __init__(self, name: str, tokens: List[Tuple[str, str]]):
        self.name = name
        self.tokens = tokens
        self.body = "".join(t for _, t in tokens).strip()
        self.refs: Set[str] = set()


def parse_rules(text: str) -> List[EbnfRule]:
    """Splits EBNF text into rules. References are resolved against the defined names, so
    macro names (``TagDispatch``, ``Regex``), macro keywords and their values are left
    alone. The text is not validated here: the grammar parser does that."""
    toks: List[Tuple[str, str]] = [(m.lastgroup, m.group()) for m in _TOKEN.finditer(text)]
    # Rule starts: a name followed (after optional whitespace) by '::='.
    starts: List[int] = []
    sig = [i for i, (k, _) in enumerate(toks) if k not in ("ws", "comment")]
    for a, b in zip(sig, sig[1:]):
        if toks[a][0] == "name" and toks[b][0] == "def":
            starts.append(a)
    rules: List[EbnfRule] = []
    for n, s in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(toks)
        j = s + 1
        while toks[j][0] != "def":
            j += 1
        body = [t for t in toks[j + 1 : end] if t[0] != "comment"]
        rules.append(EbnfRule(toks[s][1], body))
    names = {r.name for r in rules}
    for r in rules:
        body = r.tokens
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
            if (
                prv == ("other", "=")
                and pos > 1
                and body[sig_idx[pos - 2]][0] == "name"
            ):
                continue  # a macro keyword's value: loop_after_dispatch=true
            r.refs.add(val)
            body[i] = ("ref", val)
    return rules


def _render(rule: EbnfRule, mapping: Dict[str, str]) -> str:
    return "".join(mapping.get(v, v) if k == "ref" else v for k, v in rule.tokens).strip()


class RuleSet:
    """An ordered set of EBNF rules with unique names, printed as one grammar."""

    def __init__(self, reserved: Sequence[str] = ()):
        self._bodies: Dict[str, str] = {}
        self._order: List[str] = []
        self._reserved: Set[str] = set(reserved)
        self._counters: Dict[str, int] = {}
        # EBNF text -> name of the rule its root was embedded as.
        self._embedded: Dict[Tuple[str, str], str] = {}

    def __contains__(self, name: str) -> bool:
        return name in self._bodies

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

    def define(self, name: str, body: str) -> str:
        """Defines a rule under a name obtained from :meth:`fresh` (or reserved)."""
        if name in self._bodies:
            raise ValueError(f"internal error: rule {name!r} defined twice")
        self._bodies[name] = body
        self._order.append(name)
        self._reserved.add(name)
        return name

    def add(self, hint: str, body: str) -> str:
        """Defines a new rule named after ``hint`` and returns its name."""
        return self.define(self.fresh(hint), body)

    def embed(self, ebnf_text: str, root_rule: str = "root", hint: str = "root") -> str:
        """Adds the rules of another grammar, renamed apart from the rules present, and
        returns the name its root rule got. Rules equal (name and body) to present ones are
        shared; embedding the same text twice returns the same root."""
        key = (ebnf_text, root_rule)
        hit = self._embedded.get(key)
        if hit is not None:
            return hit
        rules = parse_rules(ebnf_text)
        by_name = {r.name: r for r in rules}
        if root_rule not in by_name:
            raise ValueError(f"the grammar has no rule named {root_rule!r}")
        # Greatest set of rules that can be shared: same name and same text as a present
        # rule, and every rule they reference is shared too.
        shared = {
            r.name
            for r in rules
            if r.name != root_rule and self._bodies.get(r.name) == r.body
        }
        changed = True
        while changed:
            changed = False
            for name in list(shared):
                if any(ref not in shared for ref in by_name[name].refs):
                    shared.discard(name)
                    changed = True
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
                self.define(mapping[r.name], _render(r, mapping))
        root = mapping[root_rule]
        self._embedded[key] = root
        return root

    def to_ebnf(self, root: Optional[str] = None) -> str:
        """The grammar text; ``root`` (if given) is printed first."""
        order = list(self._order)
        if root is not None and root in self._bodies:
            order.remove(root)
            order.insert(0, root)
        return "".join(f"{n} ::= {self._bodies[n]}\n" for n in order)
