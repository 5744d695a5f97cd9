"""Malformed structural tags raise ValueError subclasses whose message starts with the JSON
path of the culprit; token-level formats raise NotImplementedError naming the format."""

import json

import pytest

from xgrammar2.structural_tag import StructuralTagError, StructuralTagJSONError, structural_tag_to_ebnf
from xgrammar2.structural_tag.errors import MESSAGE_PREFIX


def cs(v):
    return {"type": "const_string", "value": v}


def tag(b, e, c=None):
    return {"begin": b, "content": c or cs("x"), "end": e}


def _fail(json_schema_to_ebnf=None):
    raise AssertionError("the JSON-schema converter should not be reached")


def err(tag_obj):
    with pytest.raises(ValueError) as ei:
        structural_tag_to_ebnf(tag_obj, json_schema_to_ebnf=lambda *a, **k: 'root ::= "{}"\n')
    return ei.value


def F(fmt):
    return {"type": "structural_tag", "format": fmt}


TT = lambda tags, **kw: F(dict({"type": "triggered_tags", "triggers": ["<f"], "tags": tags}, **kw))  # noqa: E731

CASES = [
    (TT([tag("<f1>", "</f>"), tag("<f2>", "</f>"), tag("<f3>", 5)]), "$.format.tags[2].end", "string"),
    (TT([tag("<f1>", "</f>"), tag("<g>", "</f>")]), "$.format.tags[1].begin", "does not start with any trigger"),
    (F({"type": "triggered_tags", "triggers": ["<f", "<fo"], "tags": [tag("<foo>", ".")]}),
     "$.format.tags[0].begin", "more than one trigger"),
    (F({"type": "triggered_tags", "triggers": ["<f", "<g"], "tags": [tag("<f>", ".")]}),
     "$.format.triggers[1]", "starts no tag"),
    (F({"type": "triggered_tags", "triggers": [], "tags": [tag("<f>", ".")]}), "$.format.triggers", "non-empty"),
    (F({"type": "triggered_tags", "triggers": [""], "tags": [tag("<f>", ".")]}), "$.format.triggers[0]", "non-empty"),
    (TT([]), "$.format.tags", "non-empty"),
    (TT([tag("<f1>", [])]), "$.format.tags[0].end", "must not be empty"),
    (TT([tag("<f1>", ["a", 3])]), "$.format.tags[0].end[1]", "string"),
    (TT([{"type": "const_string", "value": "x"}]), "$.format.tags[0].type", '"tag"'),
    (F({"type": "sequence", "elements": [cs("a"), {"type": "bogus"}]}), "$.format.elements[1].type", "Format type not recognized: bogus"),
    (F({"type": "sequence", "elements": []}), "$.format.elements", "non-empty"),
    (F({"type": "or", "elements": "x"}), "$.format.elements", "array"),
    (F({"type": "const_string"}), "$.format.value", "missing"),
    (F({"type": "const_string", "value": 1}), "$.format.value", "string"),
    (F({"type": "regex", "pattern": ""}), "$.format.pattern", "non-empty"),
    (F({"type": "grammar", "grammar": 'foo ::= "a"'}), "$.format.grammar", "root"),
    (F({"type": "repeat", "min": 3, "max": 2, "content": cs("a")}), "$.format.max", ">= min"),
    (F({"type": "repeat", "min": -1, "max": 2, "content": cs("a")}), "$.format.min", ">= 0"),
    (F({"type": "repeat", "min": 1.5, "max": 2, "content": cs("a")}), "$.format.min", "integer"),
    (F({"type": "optional"}), "$.format.content", "missing"),
    (F({"type": "json_schema", "json_schema": 3}), "$.format.json_schema", "JSON schema"),
    (F({"type": "json_schema", "json_schema": {}, "style": "yaml"}), "$.format.style", "unknown style"),
    (F({"type": "json_schema", "json_schema": {}, "max_whitespace_cnt": -1}), "$.format.max_whitespace_cnt", ">= 0"),
    (F({"type": "any_text", "excludes": "x"}), "$.format.excludes", "array"),
    (F({"type": "any_text", "excludes": ["a", 1]}), "$.format.excludes[1]", "string"),
    (F({"type": "triggered_tags", "triggers": ["<f"], "tags": [tag("<f>", ".")], "at_least_one": 1}),
     "$.format.at_least_one", "boolean"),
    (F({"type": "tags_with_separator", "tags": [tag("<a>", ".")]}), "$.format.separator", "missing"),
    (F({"type": "dispatch", "rules": [["<a>", cs("a")], ["", cs("b")]]}), "$.format.rules[1][0]", "non-empty"),
    (F({"type": "dispatch", "rules": [["<a>"]]}), "$.format.rules[0]", "pair"),
    (F({"type": "tag", "begin": "<a>", "content": {"type": "any_text"}, "end": ""}), "$.format.end", "non-empty"),
    (F({"type": "tag", "begin": "<a>", "content": {"type": "sequence", "elements": [cs("x"), {"type": "any_text"}]},
        "end": ""}), "$.format.end", "non-empty"),
    (F({"type": "tag", "begin": 3, "content": cs("x"), "end": "."}), "$.format.begin", "string"),
    (F({"type": "tag", "begin": "<a>", "content": {"type": "tag", "begin": "<b>", "content": {"type": "nope"},
                                                  "end": "."}, "end": "."}),
     "$.format.content.content.type", "Format type not recognized: nope"),
    ({"type": "structural_tag"}, "$", "must have a format field"),
    ({"type": "other", "format": cs("x")}, "$.type", "structural_tag"),
    (F("x"), "$.format", "must be an object"),
    (F({"no_type": 1}), "$.format", "no 'type'"),
    ({"type": "structural_tag", "triggers": ["<a"], "structures": [{"begin": "<a>", "end": "</a>"}]},
     "$.structures[0].schema", "missing"),
    (F({"type": "sequence", "elements": [cs("a"), {"type": "tag", "begin": "<x>", "content": cs("y"),
                                                   "end": {"a": 1}}]}),
     "$.format.elements[1].end", "token format"),
]


@pytest.mark.parametrize("tag_obj,path,words", CASES, ids=[c[1] + ":" + c[2] for c in CASES])
def test_error_names_json_path(tag_obj, path, words):
    e = err(tag_obj)
    assert isinstance(e, StructuralTagError), repr(e)
    assert e.path == path, (e.path, str(e))
    assert str(e).startswith(MESSAGE_PREFIX + path + ": "), str(e)
    assert words in str(e), str(e)


def test_json_text_errors():
    with pytest.raises(StructuralTagJSONError) as ei:
        structural_tag_to_ebnf('{"type": "structural_tag", "format": ')
    assert isinstance(ei.value, ValueError)
    e = err(json.dumps(F({"type": "tags_with_separator", "tags": [tag("<a>", "."), tag("<b>", 7)],
                          "separator": ","})))
    assert e.path == "$.format.tags[1].end"


def test_errors_from_json_schema_converter_name_the_path():
    def bad_converter(schema, **opts):
        raise ValueError("unsupported keyword 'foo' at #/properties/x")

    tagobj = TT([tag("<f1>", "</f>"), tag("<f2>", "</f>", {"type": "json_schema", "json_schema": {"foo": 1}})])
    with pytest.raises(StructuralTagError) as ei:
        structural_tag_to_ebnf(tagobj, json_schema_to_ebnf=bad_converter)
    assert ei.value.path == "$.format.tags[1].content.json_schema"
    assert "unsupported keyword 'foo'" in str(ei.value)


TOKEN_FORMATS = [
    ({"type": "exclude_token", "exclude_tokens": [1]}, "exclude_token ::= ExcludeToken(1)"),
    ({"type": "any_tokens", "exclude_tokens": [3, 1]}, "any_tokens_inner ::= ExcludeToken(1, 3)"),
    ({"type": "any_tokens", "max_tokens": 2}, "any_tokens[max_tokens=2] ::="),
    # (any_text max_tokens / max_chars: rule attributes, tests/runtime/test_rule_attributes.py)
]


@pytest.mark.parametrize("fmt,needle", TOKEN_FORMATS, ids=[c[1] for c in TOKEN_FORMATS])
def test_token_set_formats(fmt, needle):
    assert needle in structural_tag_to_ebnf(F(fmt))


def test_token_set_formats_need_a_tokenizer_for_token_strings():
    with pytest.raises(StructuralTagError) as ei:
        structural_tag_to_ebnf(F({"type": "exclude_token", "exclude_tokens": [1, "<x>"]}))
    assert ei.value.path == "$.format.exclude_tokens[1]"


TOKEN_TERMINALS = [
    ({"type": "token", "token": 5}, ["Token(5)"]),
    ({"type": "token_triggered_tags", "trigger_tokens": [7], "tags": [
        {"begin": {"type": "token", "token": 7}, "content": cs("x"), "end": "."}]}, ["TokenTagDispatch(\n  (7, "]),
    ({"type": "token_dispatch", "rules": [[7, cs("x")]]}, ["TokenTagDispatch(\n  (7, "]),
    ({"type": "sequence", "elements": [cs("a"), {"type": "tag", "begin": {"type": "token", "token": 3},
                                                 "content": cs("x"), "end": "."}]}, ["Token(3) \"x\" \".\""]),
    ({"type": "tag", "begin": "<a>", "content": cs("x"), "end": {"type": "token", "token": 9}},
     ["\"<a>\" \"x\" Token(9)"]),
]


@pytest.mark.parametrize("fmt,needles", TOKEN_TERMINALS, ids=[f["type"] for f, _ in TOKEN_TERMINALS])
def test_token_formats_become_token_terminals(fmt, needles):
    text = structural_tag_to_ebnf(F(fmt))
    for needle in needles:
        assert needle in text, text


@pytest.mark.parametrize("fmt,path", [
    ({"type": "tag", "begin": "<a>", "content": cs("x"), "end": {"type": "token", "token": "</s>"}},
     "$.format.end.token"),
    ({"type": "any_text", "excludes": ["a", {"type": "token", "token": 2}]}, "$.format.excludes[1]"),
])
def test_token_references_that_need_a_tokenizer_name_their_path(fmt, path):
    with pytest.raises(StructuralTagError) as ei:
        structural_tag_to_ebnf(F(fmt))
    assert ei.value.path == path, str(ei.value)
    assert "tokenizer" in str(ei.value)


def test_xml_style_limits():
    """Every upstream style converts; the limits upstream has are reported with the path:
    minimax_m3_xml takes no unconstrained schema and no additionalProperties, cohere_xml and
    minimax_m3_xml no excludes, XML excludes no leading / trailing whitespace."""
    for style in ("minimax_m3_xml", "cohere_xml", "kimi_k3_xml"):
        structural_tag_to_ebnf(F({"type": "json_schema", "style": style, "json_schema": {
            "type": "object", "properties": {"a": {"type": "string"}}}}))
    cases = [
        ({"json_schema": {}, "style": "minimax_m3_xml"}, "$.format.json_schema", "unconstrained"),
        ({"json_schema": {"type": "object", "additionalProperties": True}, "style": "minimax_m3_xml"},
         "$.format.json_schema", "additionalProperties"),
        ({"json_schema": {}, "style": "cohere_xml", "excludes": ["x"]}, "$.format.excludes", "excludes"),
        ({"json_schema": {}, "style": "kimi_k3_xml", "excludes": [" x"]}, "$.format.excludes", "whitespace"),
    ]
    for fmt, path, words in cases:
        with pytest.raises(StructuralTagError) as ei:
            structural_tag_to_ebnf(F(dict({"type": "json_schema"}, **fmt)))
        assert str(ei.value).startswith(MESSAGE_PREFIX + path) and words in str(ei.value), str(ei.value)


def test_public_api_raises_value_error():
    """Grammar.from_structural_tag / GrammarCompiler.compile_structural_tag report the same
    errors (they need the C core)."""
    import xgrammar2

    try:
        from xgrammar2 import _core

        if not _core.AVAILABLE:
            pytest.skip("xgrammar2 C core not built")
    except ImportError:
        pytest.skip("xgrammar2 C core not built")
    with pytest.raises(ValueError, match=r"\$\.format\.tags\[1\]\.begin"):
        xgrammar2.Grammar.from_structural_tag(TT([tag("<f1>", "."), tag("<g>", ".")]))
    g = xgrammar2.Grammar.from_structural_tag(F({"type": "regex", "pattern": "[a-c]+"}))
    assert "Regex" in str(g) or "root" in str(g)


@pytest.mark.parametrize("tag_obj,path,words", CASES, ids=[c[1] + ":" + c[2] for c in CASES])
def test_compiler_reports_a_dict_tags_errors_as_the_converter(tag_obj, path, words):
    """A dict goes to the compiler's linked path as its JSON dump: every malformed tag still
    raises the converter's error, at the same JSON path."""
    import xgrammar2

    with pytest.raises(ValueError) as want:
        structural_tag_to_ebnf(tag_obj)
    comp = xgrammar2.GrammarCompiler(xgrammar2.TokenizerInfo([f"t{i}" for i in range(8)]))
    with pytest.raises(ValueError) as got:
        comp.compile_structural_tag(tag_obj)
    assert type(got.value) is type(want.value), (repr(got.value), repr(want.value))
    assert str(got.value) == str(want.value)
