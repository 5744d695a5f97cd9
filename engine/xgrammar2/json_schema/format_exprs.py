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

    PYTHONPATH=engine python -m xgrammar2.json_schema.format_exprs_build --write

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


def entry(name: str, src):
    """``(ast, facts, expr, charsets, recipes, memos)`` of format ``name`` whose regex is ``src``
    (formats.STRING_FORMATS; passed in, so that this module imports nothing of the converter),
    or None (no entry, or one built from another regex)."""
    if name in _entries:
        return _entries[name]
    e = None
    hit = _load().get(name)
    if hit is not None and src is not None and hit[0] == hashlib.sha256(src.encode("utf-8")).hexdigest():
        try:
            e = marshal.loads(hit[1])
        except (ValueError, EOFError, TypeError):
            e = None
    _entries[name] = e
    return e


def shipped_ast(name: str, src):
    """The shipped regex AST of format ``name`` (equal to regex.parse of its regex ``src``), or
    None; its length range and assertion facts (regex._facts) are recorded without a walk."""
    e = entry(name, src)
    if e is None:
        return None
    from . import regex as rx
    ast = e[0]
    if len(rx._ast_facts) > 4096:
        rx._ast_facts.clear()
    rx._ast_facts[id(ast)] = (ast,) + e[1]
    return ast
