"""The minimal automata of the string formats, shipped as data (format_dfas.json).

``automaton.from_regex`` of a format's regex costs a fresh process 10-60 ms for the large
ones (uri-reference, email, hostname, uri, ipv6); a string with a format and a length bound,
a pattern, or under ``not`` / ``oneOf`` needs that automaton. The table holds, for every
format of formats.STRING_FORMATS, exactly ``from_regex(format_ast(name))`` (the canonical
minimal DFA: numbering and labels included), together with the SHA-256 of the regex source
it was built from. An entry whose hash does not match the current regex is ignored (the
automaton is then built from the regex as before), and tests/json_schema/test_format_table.py
rebuilds every format and compares it with the table, so the table cannot drift.

Regenerate after changing formats.py, the regex front end or automaton construction:

    PYTHONPATH=engine python -m xgrammar2.json_schema.format_table --write

Format (version 1): ``{"version": 1, "labels": [[lo, hi, lo, hi, ...], ...],
"formats": {name: {"sha256": hex, "accept": "0110...", "rows": "l,t,l,t;l,t;..."}}}``: state
s's row is the s-th ``;``-separated item, its transitions in order as (index into labels,
target state) pairs (a string: only the formats used are decoded, json.loads of the whole
table as nested lists would cost a fresh process ~1.3 ms).
"""

from __future__ import annotations

import hashlib
import json
import os

from . import automaton as fa
from . import formats as fmts

VERSION = 1
PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "format_dfas.json")

_table = None          # the parsed file ({} when missing or unreadable)
_labels = None         # label index -> charset tuple
_dfas: dict = {}       # name -> DFA, decoded once


def regex_sha256(name: str) -> str:
    return hashlib.sha256(fmts.STRING_FORMATS[name].encode("utf-8")).hexdigest()


def _load():
    global _table, _labels
    if _table is None:
        try:
            with open(PATH, encoding="utf-8") as f:
                t = json.load(f)
            if t.get("version") != VERSION:
                t = {}
        except (OSError, ValueError):
            t = {}
        _labels = [tuple(zip(lab[0::2], lab[1::2])) for lab in t.get("labels", ())]
        _table = t.get("formats", {})
    return _table


def shipped(name: str):
    """The shipped DFA of format ``name``, or None (no entry, or one built from another
    regex than the current one)."""
    d = _dfas.get(name)
    if d is not None:
        return d
    e = _load().get(name)
    if e is None or name not in fmts.STRING_FORMATS or e["sha256"] != regex_sha256(name):
        return None
    labels = _labels
    trans = []
    for text in e["rows"].split(";"):
        r = [int(x) for x in text.split(",")] if text else []
        trans.append(tuple((labels[r[i]], r[i + 1]) for i in range(0, len(r), 2)))
    d = _dfas[name] = fa.DFA(trans, [c == "1" for c in e["accept"]])
    return d


def dfa_for_ast(ast):
    """The shipped DFA when ``ast`` is the AST of a string format (from formats.format_ast;
    equal to ``fa.from_regex(ast)``), else None."""
    name = fmts.format_name(ast)
    return None if name is None else shipped(name)


def build_table() -> dict:
    """The table, rebuilt from the regexes (what --write stores)."""
    labels: dict = {}
    out = {}
    for name in sorted(fmts.STRING_FORMATS):
        d = fa.from_regex(fmts.format_ast(name))
        rows = []
        for row in d.trans:
            r = []
            for c, t in row:
                li = labels.setdefault(c, len(labels))
                r += [li, t]
            rows.append(",".join(map(str, r)))
        out[name] = {"sha256": regex_sha256(name), "accept": "".join("1" if a else "0" for a in d.accept),
                     "rows": ";".join(rows)}
    return {"version": VERSION, "labels": [[x for lo_hi in c for x in lo_hi] for c in labels], "formats": out}


def dumps(table: dict) -> str:
    """The file's text: one format row list per line (compact, diffable)."""
    lines = ['{"version": %d,' % table["version"], ' "labels": ' + json.dumps(table["labels"], separators=(",", ":")) + ",",
             ' "formats": {']
    names = list(table["formats"])
    for i, name in enumerate(names):
        e = table["formats"][name]
        lines.append("  %s: {\"sha256\": %s, \"accept\": %s, \"rows\": %s}%s" % (
            json.dumps(name), json.dumps(e["sha256"]), json.dumps(e["accept"]),
            json.dumps(e["rows"]), "," if i + 1 < len(names) else ""))
    lines.append(" }}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite format_dfas.json from the regexes")
    ap.add_argument("--check", action="store_true", help="exit 1 when the shipped table differs from a rebuild")
    args = ap.parse_args(argv)
    text = dumps(build_table())
    if args.write:
        with open(PATH, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {PATH} ({len(text.encode())} bytes)")
        return 0
    try:
        with open(PATH, encoding="utf-8") as f:
            same = f.read() == text
    except OSError:
        same = False
    print("format_dfas.json is " + ("up to date" if same else "STALE: run with --write"))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
