"""Every structural-tag format: the language of our EBNF, checked on accepted and rejected
strings, and compared string by string with upstream xgrammar's own structural-tag compiler
(``xgrammar.Grammar.from_structural_tag``) on the same tag."""

import json

import pytest

from st_support import accepts, accepts_bytes, fmt_ebnf, requires_engine, upstream_accepts_tag

pytestmark = requires_engine


def cs(v):
    return {"type": "const_string", "value": v}


OBJ_A = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
         "required": ["a"]}
XML_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "unit": {"type": "string", "enum": ["c", "f"]},
        "days": {"type": "integer"},
        "opts": {"type": "object", "properties": {"x": {"type": "boolean"}}},
    },
    "required": ["city", "days"],
}

# (id, format, accepted, rejected, compare with upstream)
CASES = [
    ("const_string", cs("héllo\n\"x\"\\"), ['héllo\n"x"\\'], ["héllo", 'héllo\n"x"\\!'], True),
    ("const_empty", cs(""), [""], ["a"], True),
    ("any_text", {"type": "any_text"}, ["", "anything </x> at all ✓"], [], True),
    ("any_text_excludes", {"type": "any_text", "excludes": ["<a>", "bb"]},
     ["", "a b <a", "<b>ab", "b"], ["x<a>", "bb", "abbc"], True),
    ("any_text_max_chars", {"type": "any_text", "max_chars": 3}, ["", "abc", "ééé"], ["abcd"], True),
    ("json_schema", {"type": "json_schema", "json_schema": OBJ_A},
     ['{"a": 1}', '{"a": -5, "b": "x"}'], ['{"b": "x"}', '{"a": "1"}', '{"a": 1, "c": 2}'], True),
    ("json_schema_true", {"type": "json_schema", "json_schema": True},
     ['{"a": [1, null]}', "3", '"s"'], ["{", "tru"], True),
    ("json_schema_max_ws", {"type": "json_schema", "json_schema": OBJ_A, "max_whitespace_cnt": 1},
     ['{ "a": 1}'], ['{  "a": 1}'], True),
    ("qwen_xml", {"type": "json_schema", "style": "qwen_xml", "json_schema": XML_SCHEMA},
     ["<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n",
      "<parameter=city>New York</parameter><parameter=unit> c </parameter>"
      "<parameter=days>3</parameter><parameter=opts>{\"x\": true}</parameter>"],
     ["<parameter=days>3</parameter>",
      "<parameter=city>Paris</parameter><parameter=days>three</parameter>",
      "<parameter=city>Paris</parameter><parameter=unit>k</parameter><parameter=days>3</parameter>",
      "<parameter=city>a</parameter>b</parameter><parameter=days>3</parameter>",
      "<parameter=days>3</parameter><parameter=city>Paris</parameter>"], True),
    ("qwen_xml_parameter", {"type": "qwen_xml_parameter", "json_schema": XML_SCHEMA},
     ["<parameter=city>Paris</parameter><parameter=days>3</parameter>"],
     ["<parameter=city>Paris</parameter>"], True),
    ("minimax_xml", {"type": "json_schema", "style": "minimax_xml", "json_schema": XML_SCHEMA},
     ['<parameter name="city">Paris</parameter>\n<parameter name="days">3</parameter>\n'],
     ['<parameter name="city">Paris</parameter>', '<parameter=city>Paris</parameter><parameter=days>3</parameter>'], True),
    ("deepseek_xml", {"type": "json_schema", "style": "deepseek_xml", "json_schema": XML_SCHEMA},
     ['<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n'
      '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n'],
     ['<｜DSML｜parameter name="city" string="false">Paris</｜DSML｜parameter>\n'
      '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n',
      '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n'
      '<｜DSML｜parameter name="days" string="true">3</｜DSML｜parameter>\n'], True),
    ("glm_xml", {"type": "json_schema", "style": "glm_xml", "json_schema": XML_SCHEMA},
     ["<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>3</arg_value>",
      "\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n"],
     ["<arg_key>city</arg_key><arg_value>Paris</arg_value>",
      "<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>x</arg_value>"], True),
    # A non-object root schema is the bare value (Kimi-K3's per-argument tags use this).
    ("xml_scalar_string_root", {"type": "json_schema", "style": "qwen_xml", "json_schema": {"type": "string"}},
     ["hello world", "a < b", ""], ["x</parameter>"], True),
    ("xml_scalar_integer_root", {"type": "json_schema", "style": "qwen_xml", "json_schema": {"type": "integer"}},
     ["12", "-3"], ["twelve", '"12"', "1.5"], True),
    ("xml_no_properties", {"type": "json_schema", "style": "qwen_xml", "json_schema": True},
     ["", "<parameter=any_name>text</parameter><parameter=x>[1, 2]</parameter>"],
     ["<parameter=>x</parameter>", "text"], True),
    # Deviation from upstream: the Qwen3-Coder / Qwen3.5 templates write booleans and null
    # with Jinja's |string (True / False / None).
    ("qwen_xml_python_scalars", {"type": "json_schema", "style": "qwen_xml", "json_schema": {
        "type": "object", "properties": {"flag": {"type": "boolean"}, "n": {"type": ["integer", "null"]}},
        "required": ["flag", "n"]}},
     ["<parameter=flag>\nTrue\n</parameter>\n<parameter=n>\nNone\n</parameter>\n",
      "<parameter=flag>false</parameter><parameter=n>3</parameter>"],
     ["<parameter=flag>yes</parameter><parameter=n>3</parameter>",
      "<parameter=flag>true</parameter><parameter=n>none</parameter>"], False),
    ("xml_string_pattern_and_format", {"type": "json_schema", "style": "qwen_xml", "json_schema": {
        "type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"},
                                         "day": {"type": "string", "format": "date"}},
        "required": ["code", "day"]}},
     ["<parameter=code>\nABC\n</parameter><parameter=day>2024-02-29</parameter>"],
     ["<parameter=code>ABCD</parameter><parameter=day>2024-02-29</parameter>",
      "<parameter=code>ABC</parameter><parameter=day>2023-02-29</parameter>"], False),
    ("regex", {"type": "regex", "pattern": "[a-z]+\\d{2}"}, ["ab12", "z99"], ["ab1", "AB12", "ab123"], True),
    ("grammar", {"type": "grammar", "grammar": 'root ::= "x" foo\nfoo ::= [0-9]+ | "-"'},
     ["x1", "x123", "x-"], ["x", "y1", "x1-"], True),
    ("sequence", {"type": "sequence", "elements": [cs("a"), {"type": "regex", "pattern": "[0-9]+"}, cs("b")]},
     ["a1b", "a123b"], ["ab", "a1", "1b"], True),
    ("or", {"type": "or", "elements": [cs("a"), cs("bc"), {"type": "json_schema", "json_schema": {"type": "integer"}}]},
     ["a", "bc", "42"], ["", "abc", "b"], True),
    ("optional", {"type": "optional", "content": cs("ab")}, ["", "ab"], ["a", "abab"], True),
    ("plus", {"type": "plus", "content": cs("ab")}, ["ab", "ababab"], ["", "aba"], True),
    ("star", {"type": "star", "content": cs("ab")}, ["", "ab", "abab"], ["a", "ba"], True),
    ("repeat", {"type": "repeat", "min": 2, "max": 3, "content": cs("ab")}, ["abab", "ababab"], ["ab", "abababab"], True),
    ("repeat_unbounded", {"type": "repeat", "min": 2, "max": -1, "content": cs("a")}, ["aa", "aaaaaa"], ["a", ""], True),
    ("repeat_zero", {"type": "repeat", "min": 0, "max": 0, "content": cs("a")}, [""], ["a"], True),
    ("tag", {"type": "tag", "begin": "<r>", "content": {"type": "json_schema", "json_schema": OBJ_A}, "end": "</r>"},
     ['<r>{"a": 1}</r>'], ['<r>{"a": 1}', '{"a": 1}</r>', '<r>{"a": 1}</r>x'], True),
    ("tag_any_text", {"type": "tag", "begin": "<r>", "content": {"type": "any_text"}, "end": "</r>"},
     ["<r></r>", "<r>a < / r > b</r>"], ["<r>a</r>b</r>", "<r>a"], True),
    ("tag_multi_end", {"type": "tag", "begin": "<r>", "content": {"type": "any_text", "excludes": ["X"]},
                       "end": ["</r>", "</R>"]},
     ["<r>ab</r>", "<r>ab</R>"], ["<r>aXb</r>", "<r>ab</r></R>", "<r>ab"], True),
    ("tag_end_with_empty", {"type": "tag", "begin": "<r>", "content": cs("x"), "end": ["</r>", ""]},
     ["<r>x</r>", "<r>x"], ["<r>x</"], True),
    ("tag_empty_end_excluded_text", {"type": "tag", "begin": "<r>", "content": {"type": "any_text", "excludes": ["Q"]}, "end": ""},
     ["<r>", "<r>abc"], ["<r>aQ"], True),
    ("triggered_tags", {"type": "triggered_tags", "triggers": ["<f"],
                        "tags": [{"begin": "<f1>", "content": cs("A"), "end": "</f>"},
                                 {"begin": "<f2>", "content": {"type": "json_schema", "json_schema": OBJ_A}, "end": "</f>"}],
                        "excludes": ["Q"]},
     ["", "text", "a<f1>A</f>b<f2>{\"a\": 2}</f>c", "<f1>A</f><f1>A</f>", "<", "x<"],
     ["a<f3>A</f>", "<f1>B</f>", "aQ", "<f1>A</f>Q", "<f", "<f1>A"], True),
    ("triggered_tags_at_least_one", {"type": "triggered_tags", "triggers": ["<f"], "at_least_one": True,
                                     "tags": [{"begin": "<f1>", "content": cs("A"), "end": "</f>"}]},
     ["<f1>A</f>", "<f1>A</f> text <f1>A</f>"], ["", "text<f1>A</f>"], True),
    ("triggered_tags_stop_after_first", {"type": "triggered_tags", "triggers": ["<f"], "stop_after_first": True,
                                         "tags": [{"begin": "<f1>", "content": cs("A"), "end": "</f>"}]},
     ["", "text", "text<f1>A</f>"], ["<f1>A</f>more", "<f1>A</f><f1>A</f>"], True),
    ("triggered_tags_exactly_one", {"type": "triggered_tags", "triggers": ["<f"], "stop_after_first": True,
                                    "at_least_one": True,
                                    "tags": [{"begin": "<f1>", "content": cs("A"), "end": "</f>"},
                                             {"begin": "<f2>", "content": cs("B"), "end": "</f>"}]},
     ["<f1>A</f>", "<f2>B</f>"], ["", "x<f1>A</f>", "<f1>A</f>x"], True),
    ("triggered_tags_in_tag", {"type": "tag", "begin": "<o>", "end": "</o>",
                               "content": {"type": "triggered_tags", "triggers": ["<f"],
                                           "tags": [{"begin": "<f1>", "content": cs("A"), "end": "</f>"}]}},
     ["<o></o>", "<o>x<f1>A</f>y</o>"], ["<o>x</o>y</o>", "<o>x"], True),
    ("triggered_tags_multi_trigger", {"type": "triggered_tags", "triggers": ["<a", "[b"],
                                      "tags": [{"begin": "<a>", "content": cs("1"), "end": "."},
                                               {"begin": "[b]", "content": cs("2"), "end": "."}]},
     ["x<a>1.y[b]2.", "<[", "[<"], ["<a>2.", "[b]1."], True),
    ("tags_with_separator", {"type": "tags_with_separator", "separator": ",",
                             "tags": [{"begin": "<a>", "content": cs("1"), "end": "</a>"},
                                      {"begin": "<b>", "content": cs("2"), "end": "</b>"}]},
     ["", "<a>1</a>", "<a>1</a>,<b>2</b>,<a>1</a>"], ["<a>1</a><b>2</b>", ",", "x<a>1</a>", "<a>1</a>,"], True),
    ("tags_with_separator_alo", {"type": "tags_with_separator", "separator": "", "at_least_one": True,
                                 "tags": [{"begin": "<a>", "content": cs("1"), "end": "</a>"}]},
     ["<a>1</a>", "<a>1</a><a>1</a>"], [""], True),
    ("tags_with_separator_saf", {"type": "tags_with_separator", "separator": ",", "stop_after_first": True,
                                 "tags": [{"begin": "<a>", "content": cs("1"), "end": "</a>"}]},
     ["", "<a>1</a>"], ["<a>1</a>,<a>1</a>"], True),
    ("dispatch_loop", {"type": "dispatch", "rules": [["<a>", cs("A")], ["<b>", {"type": "regex", "pattern": "[0-9]+;"}]],
                       "excludes": ["STOP"]},
     ["", "x<a>Ay<b>12;z<a>A", "<"], ["x<a>B", "<b>;", "xSTOP"], True),
    ("dispatch_once", {"type": "dispatch", "loop": False, "rules": [["<a>", cs("A")]]},
     ["", "text", "text<a>A"], ["<a>Atext", "<a>A<a>A"], True),
    ("legacy_nested_no_type_tag", {"begin": "<r>", "content": cs("x"), "end": "</r>"}, ["<r>x</r>"], ["<r></r>"], True),
]


@pytest.mark.parametrize("name,fmt,good,bad,compare", CASES, ids=[c[0] for c in CASES])
def test_format_language(name, fmt, good, bad, compare):
    text = fmt_ebnf(fmt)
    for s in good:
        assert accepts(text, s), f"{name}: should accept {s!r}\n{text}"
    for s in bad:
        assert not accepts(text, s), f"{name}: should reject {s!r}\n{text}"
    if compare:
        tag = {"type": "structural_tag", "format": fmt}
        for s in good + bad:
            assert upstream_accepts_tag(tag, s) == (s in good), (
                f"{name}: upstream xgrammar disagrees on {s!r}")


@pytest.mark.parametrize("name,fmt,good,bad,compare", CASES, ids=[c[0] for c in CASES])
def test_format_language_token_by_token(name, fmt, good, bad, compare):
    """The same strings fed as one-byte tokens, ending with a stop token (the mask path)."""
    text = fmt_ebnf(fmt)
    for s in good:
        assert accepts_bytes(text, s), f"{name}: should accept {s!r} byte by byte"
    for s in bad:
        assert not accepts_bytes(text, s), f"{name}: should reject {s!r} byte by byte"


def test_legacy_structures_form():
    tag = {"type": "structural_tag", "triggers": ["<function="],
           "structures": [{"begin": "<function=f>", "schema": OBJ_A, "end": "</function>"},
                          {"begin": "<function=g>", "schema": json.dumps({"type": "object"}), "end": "</function>"}]}
    from st_support import to_ebnf

    text = to_ebnf(tag)
    assert accepts(text, 'hi <function=f>{"a": 1}</function> bye <function=g>{}</function>')
    assert not accepts(text, '<function=f>{"b": 1}</function>')
    assert not accepts(text, '<function=h>{}</function>')


def test_legacy_tags_triggers_api():
    from xgrammar2.structural_tag.converter import ebnf_from_api_args
    from st_support import JSON_BACKEND
    from xgrammar2.structural_tag import StructuralTagItem

    items = [StructuralTagItem(begin="<function=f>", schema=OBJ_A, end="</function>"),
             {"begin": "<function=g>", "schema": {"type": "object"}, "end": "</function>"}]
    text = ebnf_from_api_args(items, ["<function="], json_schema_to_ebnf=JSON_BACKEND)
    assert accepts(text, 'x<function=f>{"a": 3}</function>')
    assert accepts(text, 'x<function=g>{}</function>')
    assert not accepts(text, 'x<function=f>{"a": "3"}</function>')


def test_pydantic_models_round_trip():
    from xgrammar2.structural_tag import (
        AnyTextFormat, JSONSchemaFormat, StructuralTag, TagFormat, TriggeredTagsFormat)
    from st_support import to_ebnf

    st = StructuralTag(format=TriggeredTagsFormat(
        triggers=["<tool_call>"],
        tags=[TagFormat(begin="<tool_call>", content=JSONSchemaFormat(json_schema=OBJ_A), end="</tool_call>")],
        excludes=["<think>"]))
    text = to_ebnf(st)
    assert accepts(text, 'a<tool_call>{"a": 1}</tool_call>')
    assert not accepts(text, "a<think>")
    assert to_ebnf(st.model_dump_json()) == text
    assert to_ebnf(st.model_dump()) == text
    # upstream's own models dump to the same JSON, so they convert too
    import xgrammar.structural_tag as up

    up_st = up.StructuralTag(format=up.AnyTextFormat(excludes=["x"]))
    assert accepts(to_ebnf(up_st.model_dump()), "abc")
    assert isinstance(AnyTextFormat(), AnyTextFormat)


def test_rules_are_shared_between_schemas():
    """100 tools -> one copy of the JSON value rules, not 100."""
    tags = [{"begin": f"<f{i}>", "content": {"type": "json_schema", "json_schema": {
        "type": "object", "properties": {f"p{i}": {"type": "string"}, "n": {"type": "number"}},
        "required": [f"p{i}"]}}, "end": "</f>"} for i in range(100)]
    text = fmt_ebnf({"type": "triggered_tags", "triggers": ["<f"], "tags": tags})
    rules = [line.split(" ::= ")[0] for line in text.splitlines() if " ::= " in line]
    assert len(rules) == len(set(rules))
    assert len(rules) < 100 * 3 + 20, len(rules)
    assert accepts(text, '<f7>{"p7": "x", "n": 1.5}</f>')
    assert not accepts(text, '<f7>{"p8": "x"}</f>')
