"""A bare string format's regex AST, grammar expression and printed text are shipped as data
(json_schema/format_exprs.marshal, issue 36 item 1: a fresh process paid ~7 ms to parse and
walk uri-reference's regex): the table is exactly a rebuild from every format's regex, the
grammar is the same text with the table as without it (so the matcher accepts the same
strings), a shipped format is converted without parsing or walking its regex, an entry built
from another regex is ignored, and the file is package data."""

import json
import os
import re
from collections import OrderedDict

import pytest

import xgrammar2.json_schema as js
from js_engine import DATA, ENGINE
from xgrammar2.json_schema import emit
from xgrammar2.json_schema import format_exprs as fx
from xgrammar2.json_schema import format_exprs_build as fxb
from xgrammar2.json_schema import formats as fmts
from xgrammar2.json_schema import grammar as G
from xgrammar2.json_schema import regex as rx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FORMAT_DIR = os.path.join(DATA, "json-schema-test-suite", "draft2020-12", "optional", "format")


def _fresh(monkeypatch, shipped=True):
    """Every cache the bare-format path fills, emptied (restored after the test); without
    ``shipped``, no table (the regex is parsed and walked, as before the table)."""
    monkeypatch.setattr(fx, "_entries", {})
    monkeypatch.setattr(fx, "_table", None if shipped else {})  # (None: read from the file)
    monkeypatch.setattr(fmts, "_cache", {})
    monkeypatch.setattr(fmts, "_names", {})
    monkeypatch.setattr(rx, "_cache", {})
    monkeypatch.setattr(rx, "_ast_facts", {})
    monkeypatch.setattr(emit, "_rx_cache", {})
    monkeypatch.setattr(emit, "_char_cache", {})
    monkeypatch.setattr(G, "_print_memo", {})
    monkeypatch.setattr(js, "_cache", OrderedDict())


def _schemas(f):
    return [
        {"type": "string", "format": f},
        {"type": "object", "properties": {"a": {"type": "string", "format": f},
                                          "b": {"type": "string", "format": f, "maxLength": 40}}},
        {"type": "array", "items": {"format": f}, "maxItems": 3},
        {"anyOf": [{"type": "string", "format": f}, {"type": "integer"}]},
        {"type": "object", "propertyNames": {"format": f}},
        {"type": "string", "format": f, "minLength": 3},
    ]


def _ebnf(monkeypatch, schema, shipped):
    _fresh(monkeypatch, shipped)
    return js.json_schema_to_ebnf(schema).ebnf


def test_shipped_table_is_every_format_rebuilt_from_its_regex(monkeypatch):
    _fresh(monkeypatch)
    table = fx._load()
    assert set(table) == set(fmts.STRING_FORMATS)
    for name in fmts.STRING_FORMATS:
        assert fx.entry(name, fmts.STRING_FORMATS[name]) == fxb.build_entry(name), \
            f"stale {name}: PYTHONPATH=engine python -m xgrammar2.json_schema.format_exprs_build --write"
        assert fx.shipped_ast(name, fmts.STRING_FORMATS[name]) == rx.parse(fmts.STRING_FORMATS[name])


@pytest.mark.parametrize("name", sorted(fmts.STRING_FORMATS))
def test_the_grammar_is_the_same_text_with_the_table(monkeypatch, name):
    for schema in _schemas(name):
        old = _ebnf(monkeypatch, schema, shipped=False)
        new = _ebnf(monkeypatch, schema, shipped=True)
        assert new == old, json.dumps(schema)
        # and again in the same process (the caches the table seeded, reused)
        assert js.json_schema_to_ebnf(dict(schema, title="again")).ebnf == old


def test_a_shipped_format_is_neither_parsed_nor_walked(monkeypatch):
    expected = {n: _ebnf(monkeypatch, {"type": "string", "format": n}, shipped=False)
                for n in ("uri-reference", "email", "date-time", "ipv6")}
    _fresh(monkeypatch)

    def no(*a, **k):
        raise AssertionError("a shipped format's regex was parsed or walked")

    monkeypatch.setattr(rx, "parse", no)
    monkeypatch.setattr(emit, "_rx_build", no)
    monkeypatch.setattr(rx, "_length_range", no)
    monkeypatch.setattr(rx, "_has_anchor", no)
    for n, text in expected.items():
        assert js.json_schema_to_ebnf({"type": "string", "format": n}).ebnf == text


def test_a_stale_entry_is_ignored_and_the_format_built_from_its_regex(monkeypatch):
    _fresh(monkeypatch)
    monkeypatch.setitem(fmts.STRING_FORMATS, "uuid", "[0-9a-f]{4}-x")  # another regex
    assert fx.entry("uuid", fmts.STRING_FORMATS["uuid"]) is None and fx.shipped_ast("uuid", fmts.STRING_FORMATS["uuid"]) is None
    ebnf = js.json_schema_to_ebnf({"type": "string", "format": "uuid"}).ebnf
    assert "{4}" in ebnf and "\"x\"" in ebnf
    cg = ENGINE.compile(ebnf)
    assert ENGINE.accepts(cg, '"ab09-x"')
    assert not ENGINE.accepts(cg, '"123e4567-e89b-12d3-a456-426614174000"')


def test_print_memo_texts_are_the_printers(monkeypatch):
    _fresh(monkeypatch)
    for name in fmts.STRING_FORMATS:
        e = fx.entry(name, fmts.STRING_FORMATS[name])
        for i, text, refs, multi in e[5]:
            node = e[2] if i < 0 else e[2][1][i]
            out: list = []
            assert G.print_refs(node, 0, out) == text and tuple(out) == refs, name
            for prec in (1, 2):
                want = G.print_refs(node, prec, [])
                monkeypatch.setitem(G._print_memo, id(node), (node, text, refs, multi))
                assert G.print_refs(node, prec, []) == want, (name, prec)
                del G._print_memo[id(node)]


def _suite_strings(name):
    path = os.path.join(FORMAT_DIR, name + ".json")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        groups = json.load(f)
    return [t["data"] for g in groups for t in g["tests"] if isinstance(t["data"], str)]


@pytest.mark.parametrize("name", ["uri-reference", "uri", "email", "hostname", "date-time", "date", "time",
                                  "ipv4", "ipv6", "uuid", "duration", "json-pointer", "relative-json-pointer",
                                  "uri-template"])
def test_the_matcher_accepts_the_same_strings_with_the_table(monkeypatch, name):
    strings = _suite_strings(name)
    if not strings:
        pytest.skip(f"no JSON-Schema-Test-Suite strings for {name} under {FORMAT_DIR}")
    schema = {"type": "string", "format": name}
    old = ENGINE.compile(_ebnf(monkeypatch, schema, shipped=False))
    new = ENGINE.compile(_ebnf(monkeypatch, schema, shipped=True))
    accepted = 0
    for s in strings:
        for text in {json.dumps(s), json.dumps(s, ensure_ascii=False)}:
            a = ENGINE.accepts(old, text)
            assert ENGINE.accepts(new, text) == a, (name, text)
            accepted += a
    assert 0 < accepted < 2 * len(strings)  # (both valid and invalid strings were tried)


def test_the_table_is_package_data():
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"\[tool\.setuptools\.package-data\]\s*\nxgrammar2\s*=\s*\[([^\]]*)\]", text)
    assert m and '"json_schema/format_exprs.marshal"' in m.group(1)
    with open(os.path.join(ROOT, "MANIFEST.in"), encoding="utf-8") as f:
        assert "include engine/xgrammar2/json_schema/format_exprs.marshal" in f.read().splitlines()
    assert os.path.samefile(fx.PATH, os.path.join(ROOT, "engine", "xgrammar2", "json_schema",
                                                  "format_exprs.marshal"))


@pytest.mark.parametrize("garbage", [b"", b"not marshal at all", b"\xe9\x00\x01" * 50])
def test_a_corrupt_table_falls_back_to_the_regex(tmp_path, monkeypatch, garbage):
    # a truncated or foreign file is ignored (no entry), never trusted; conversion is unchanged
    want = js.json_schema_to_ebnf({"type": "string", "format": "uuid"}).ebnf
    bad = tmp_path / "format_exprs.marshal"
    bad.write_bytes(garbage)
    _fresh(monkeypatch)  # (also the converter's memo: the second conversion is made again)
    monkeypatch.setattr(fx, "PATH", str(bad))
    assert fx.entry("uuid", fmts.STRING_FORMATS["uuid"]) is None
    assert js.json_schema_to_ebnf({"type": "string", "format": "uuid"}).ebnf == want
