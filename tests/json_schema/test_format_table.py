"""The string formats' automata are shipped as data (json_schema/format_dfas.json, issue 36:
a fresh process paid 20-90 ms for from_regex of uri-reference, email, hostname...): the
table is exactly from_regex of every format's regex, regex_dfa takes a format's automaton
from it without building one, an entry built from another regex is ignored, and the file is
package data."""

import os
import re

from xgrammar2.json_schema import automaton as fa
from xgrammar2.json_schema import format_table as ft
from xgrammar2.json_schema import formats as fmts
from xgrammar2.json_schema import ir
from xgrammar2.json_schema import json_schema_to_ebnf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _fresh(monkeypatch):
    monkeypatch.setattr(ir, "_dfa_cache", {})
    monkeypatch.setattr(ft, "_dfas", {})


def test_shipped_table_is_every_format_rebuilt_from_its_regex(monkeypatch):
    _fresh(monkeypatch)
    with open(ft.PATH, encoding="utf-8") as f:
        assert f.read() == ft.dumps(ft.build_table()), \
            "stale: PYTHONPATH=engine python -m xgrammar2.json_schema.format_table --write"
    assert set(ft._load()) == set(fmts.STRING_FORMATS)
    for name in fmts.STRING_FORMATS:
        assert ft.shipped(name).key() == fa.from_regex(fmts.format_ast(name)).key(), name


def test_regex_dfa_of_a_format_comes_from_the_table_without_building(monkeypatch):
    _fresh(monkeypatch)
    expected = {n: fa.from_regex(fmts.format_ast(n)).key() for n in ("uri-reference", "hostname", "date")}

    def no_build(*a, **k):
        raise AssertionError("from_regex called for a shipped format")

    monkeypatch.setattr(fa, "from_regex", no_build)
    for name, key in expected.items():
        assert ir.regex_dfa(fmts.format_ast(name)).key() == key
    # a conversion that needs the automaton (a length bound on a format)
    r = json_schema_to_ebnf({"type": "string", "format": "uri-reference", "maxLength": 40})
    assert "root" in str(r)


def test_a_stale_table_entry_is_ignored_and_the_format_built_from_its_regex(monkeypatch):
    _fresh(monkeypatch)
    monkeypatch.setattr(ft, "regex_sha256", lambda name: "0" * 64)
    assert ft.shipped("uri") is None
    built = []
    real = fa.from_regex

    def spy(ast, *a, **k):
        built.append(ast)
        return real(ast, *a, **k)

    monkeypatch.setattr(fa, "from_regex", spy)
    d = ir.regex_dfa(fmts.format_ast("uri"))
    assert built == [fmts.format_ast("uri")]
    assert d.key() == real(fmts.format_ast("uri")).key()


def test_a_pattern_is_not_taken_from_the_table(monkeypatch):
    _fresh(monkeypatch)
    from xgrammar2.json_schema import regex as rx

    assert ft.dfa_for_ast(rx.parse("[a-z]+")) is None


def test_the_table_is_package_data():
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"\[tool\.setuptools\.package-data\]\s*\nxgrammar2\s*=\s*\[([^\]]*)\]", text)
    assert m and '"json_schema/format_dfas.json"' in m.group(1)
    with open(os.path.join(ROOT, "MANIFEST.in"), encoding="utf-8") as f:
        assert "include engine/xgrammar2/json_schema/format_dfas.json" in f.read().splitlines()
    assert os.path.samefile(ft.PATH, os.path.join(ROOT, "engine", "xgrammar2", "json_schema", "format_dfas.json"))
