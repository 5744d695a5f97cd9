"""Builds format_exprs.marshal (the shipped expressions of the string formats, format_exprs.py)
from the regexes: ``python -m xgrammar2.json_schema.format_exprs_build --write`` rewrites it,
without ``--write`` it checks that the shipped file is up to date. Kept apart from
format_exprs.py, which emit.py imports: building needs emit (an import circle otherwise)."""

from __future__ import annotations

import hashlib
import marshal

from . import emit
from . import format_exprs as fx
from . import formats as fmts
from . import grammar as G
from . import regex as rx


def build_entry(name: str):
    """The entry of ``name`` rebuilt from its regex (what --write stores)."""
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

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite format_exprs.marshal from the regexes")
    args = ap.parse_args(argv)
    table = build_table()
    if args.write:
        data = marshal.dumps((fx.VERSION, table), 4)
        with open(fx.PATH, "wb") as f:
            f.write(data)
        print(f"wrote {fx.PATH} ({len(data)} bytes)")
        return 0
    shipped = fx._load()
    same = set(shipped) == set(table) and all(
        shipped[k][0] == table[k][0] and marshal.loads(shipped[k][1]) == marshal.loads(table[k][1]) for k in table)
    print("format_exprs.marshal is " + ("up to date" if same else "STALE: run with --write"))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
