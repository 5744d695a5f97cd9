"""The regex ASTs and grammar expressions of the string formats, shipped as data
(format_exprs.marshal; issue 36 item 1).

A bare ``{"type": "string", "format": F}`` is emitted from F's regex AST (emit.regex_expr:
the regex's structure, each character class as its JSON spellings), not from its automaton.
A fresh process paid for it ~3 ms to parse uri-reference's regex (regex.parse) and ~3 ms to
walk its ~1,700-node AST (emit._rx_build, emit._char_recipe: every class's escape
spellings), for every large format (uri, email, ipv6, date-time, ...) a share of that. This
table holds, for every format of formats.STRING_FORMATS, exactly what those functions return
(the parsed AST; emit.regex_expr's expression and charsets for a string value; the
_char_recipe of each of those charsets), so the emitted grammar is the same text; together
with the SHA-256 of the regex source. An entry whose hash does not match the current regex is
ignored (the regex is parsed and walked as before), and tests/json_schema/test_format_exprs.py
rebuilds every entry and compares it with the table, so the table cannot drift when the regex
front end or the emitter's spellings change.

Regenerate after changing formats.py, regex.py, or emit/grammar's character spellings:

    PYTHONPATH=engine python -m xgrammar2.json_schema.format_exprs --write

Format: marshal (version 4, nested tuples, ints, strings, booleans and None only) of
``(VERSION, {name: (sha256 hex, blob)})``, blob the marshal of ``(ast, facts, expr,
charsets, recipes, memos)`` (decoded only for the formats used; facts regex._facts' length
range, anchor and lookaround flags; charsets as emit.regex_expr lists them, recipes
``((charset, full), (expression, steps))`` pairs as emit._char_recipe returns them; memos the
printed texts print_memos returns, so that the grammar printer does not walk the expression).
"""

from __future__ import annotations

import hashlib
import marshal
import os

from . import formats as fmts

VERSION = 1
PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "format_exprs.marshal")

_table = None       # name -> (sha256, blob) ({} when missing or unreadable)
_entries: dict = {}  # name -> decoded (ast, expr, charsets, recipes), or None when stale


def _load():
    global _table
    if _table is None:
        try:
            with open(PATH, "rb") as f:
                v, t = marshal.loads(f.read())
            if v != VERSION or type(t) is not dict:
                t = {}
        except (OSError, ValueError, EOFError, TypeError):
            t = {}
        _table = t
    return _table


def entry(name: str):
    """``(ast, facts, expr, charsets, recipes, memos)`` of format ``name``, or None (no entry, or one built
    from another regex than the current one)."""
    if name in _entries:
        return _entries[name]
    e = None
    hit = _load().get(name)
    src = fmts.STRING_FORMATS.get(name)
    if hit is not None and src is not None and hit[0] == hashlib.sha256(src.encode("utf-8")).hexdigest():
        try:
            e = marshal.loads(hit[1])
        except (ValueError, EOFError, TypeError):
            e = None
    _entries[name] = e
    return e


def shipped_ast(name: str):
    """The shipped regex AST of format ``name`` (equal to regex.parse of its regex), or None;
    its length range and assertion facts (regex._facts) are recorded without a walk."""
    e = entry(name)
    if e is None:
        return None
    from . import regex as rx
    ast = e[0]
    if len(rx._ast_facts) > 4096:
        rx._ast_facts.clear()
    rx._ast_facts[id(ast)] = (ast,) + e[1]
    return ast


def build_entry(name: str):
    """The entry of ``name`` rebuilt from its regex (what --write stores)."""
    from . import emit
    from . import regex as rx
    ast = rx.parse(fmts.STRING_FORMATS[name])
    emit._char_cache.clear()  # (recipes computed here, none seeded from the table)
    chars: dict = {}
    flags: list = []
    expr = emit._rx_build(ast, False, chars, flags)
    assert not flags, name
    charsets = tuple(chars)
    recipes = tuple((mk, emit._char_recipe(mk)) for mk in charsets)
    facts = (rx.length_range(ast), rx.has_anchor(ast), rx.has_lookaround(ast))
    ent = _shared((ast, facts, expr, charsets, recipes), {})
    return ent + (print_memos(ent[2]),)


def print_memos(expr):
    """The printed texts of ``expr`` (or, a sequence being spliced into the sequence around
    it, of its compound items): ``(index or -1, text at prec 0, references, several parts)``
    as grammar._print_memo holds them."""
    from . import grammar as G
    saved = dict(G._print_memo)
    G._print_memo.clear()  # (printed here by the walk, none taken from the memo)
    try:
        if expr[0] == "seq":
            targets = [(i, x) for i, x in enumerate(expr[1]) if x[0] in ("seq", "alt", "rep")]
        elif expr[0] in ("alt", "rep"):
            targets = [(-1, expr)]
        else:
            targets = []
        memos = []
        for i, x in targets:
            out: list = []
            text = G.print_refs(x, 0, out)
            memos.append((i, text, tuple(out), x[0] == "seq" and G.print_refs(x, 2, []) != text))
        return tuple(memos)
    finally:
        G._print_memo.update(saved)


def _shared(x, seen):
    """``x`` with equal tuples made one object (marshal writes a shared object once, and
    loads it once: a smaller, faster blob; the value is the same)."""
    if type(x) is tuple:
        x = tuple(_shared(y, seen) for y in x)
        return seen.setdefault(x, x)
    return x


def build_table() -> dict:
    out = {}
    for name in sorted(fmts.STRING_FORMATS):
        sha = hashlib.sha256(fmts.STRING_FORMATS[name].encode("utf-8")).hexdigest()
        out[name] = (sha, marshal.dumps(build_entry(name), 4))
    return out


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite format_exprs.marshal from the regexes")
    args = ap.parse_args(argv)
    table = build_table()
    if args.write:
        data = marshal.dumps((VERSION, table), 4)
        with open(PATH, "wb") as f:
            f.write(data)
        print(f"wrote {PATH} ({len(data)} bytes)")
        return 0
    shipped = _load()
    same = set(shipped) == set(table) and all(
        shipped[k][0] == table[k][0] and marshal.loads(shipped[k][1]) == marshal.loads(table[k][1]) for k in table)
    print("format_exprs.marshal is " + ("up to date" if same else "STALE: run with --write"))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
