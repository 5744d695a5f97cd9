"""The paths that make a request with known tools cheap must not change what is compiled:
the direct reader of plain JSON-schema tags, the process-wide memo of converted schemas
(the JSON-schema front end's, keyed by the schema's repr), and the C scanner behind
``max_json_nesting``."""

import json
import random

import pytest

import xgrammar2 as xgr
from xgrammar2.limits import check_json_nesting
from xgrammar2 import json_schema
from xgrammar2.structural_tag import nodes
from xgrammar2.structural_tag.converter import structural_tag_to_ebnf

from chat import load_pool


def _bfcl_functions(limit=60):
    """BFCL functions with their parameters as JSON Schema (the benchmark's tool pool)."""
    return [t.tool["function"] for t in load_pool(size=limit)]


def _tag(fns, general=False):
    """A tools format; ``general`` spells each tag so that only the general reader takes it
    (an end list, an explicit style), with the same meaning."""
    def content(fn):
        c = {"type": "json_schema", "json_schema": fn["parameters"]}
        if general:
            c["style"] = "json"
        return c

    return {"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<function="],
        "tags": [{"type": "tag", "begin": f"<function={fn['name']}>", "content": content(fn),
                  "end": ["</function>"] if general else "</function>"} for fn in fns]}}


def test_plain_json_schema_tags_are_read_directly():
    fns = _bfcl_functions(3)
    node = nodes.read_structural_tag(_tag(fns))
    general = nodes.read_structural_tag(_tag(fns, general=True))
    for fast, slow in zip(node.tags, general.tags):
        assert (fast.path, fast.begin, fast.end) == (slow.path, slow.begin, slow.end)
        assert (fast.content.path, fast.content.schema, fast.content.style) == \
            (slow.content.path, slow.content.schema, slow.content.style)
        assert (fast.content.any_order, fast.content.max_whitespace_cnt, fast.content.excludes) == \
            (slow.content.any_order, slow.content.max_whitespace_cnt, slow.content.excludes)


def test_a_pydantic_dump_of_plain_tags_is_read_directly():
    """A pydantic StructuralTag dumps every JSONSchemaFormat field (style, any_order,
    max_whitespace_cnt, excludes); at their defaults the tag is still a plain one, read the
    same as the general reader reads it."""
    from xgrammar2.structural_tag import StructuralTag

    fns = _bfcl_functions(3)
    dumped = StructuralTag.model_validate(_tag(fns)).model_dump(by_alias=True)
    tags = dumped["format"]["tags"]
    assert set(tags[0]["content"]) > {"type", "json_schema"}
    for i, t in enumerate(tags):
        fast = nodes._simple_json_tag(t, f"$.format.tags[{i}]")
        slow = nodes._read_tag(t, f"$.format.tags[{i}]", 0)
        assert fast is not None
        assert (fast.path, fast.begin, fast.end, fast.content.path, fast.content.schema) == \
            (slow.path, slow.begin, slow.end, slow.content.path, slow.content.schema)
    assert structural_tag_to_ebnf(dumped) == structural_tag_to_ebnf(_tag(fns))


@pytest.mark.parametrize("option, value, attr", [
    ("style", "qwen_xml", "style"), ("any_order", True, "any_order"),
    ("max_whitespace_cnt", 2, "max_whitespace_cnt"), ("excludes", ["x"], "excludes"),
    ("any_order", 0, None), ("max_whitespace_cnt", False, None),
])
def test_a_non_default_json_option_leaves_the_direct_reader(option, value, attr):
    """Any other value goes to the general reader, which keeps the option or names the bad
    value: the direct reader never drops a constraint (nor takes a key it does not know)."""
    fn = _bfcl_functions(1)[0]
    t = {"type": "tag", "begin": "<function=f>", "end": "</function>",
         "content": {"type": "json_schema", "json_schema": fn["parameters"], option: value}}
    assert nodes._simple_json_tag(t, "$") is None
    assert nodes._simple_json_tag({**t, "content": {**t["content"], option: None, "flavour": 1}}, "$") is None
    tag = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<function="],
                                                "tags": [t]}}
    if attr is None:
        with pytest.raises(ValueError, match=option):
            nodes.read_structural_tag(tag)
    else:
        read = nodes.read_structural_tag(tag)
        assert getattr(read.tags[0].content, attr) == value


@pytest.mark.parametrize("bad, where", [
    ({"begin": 5, "content": {"type": "json_schema", "json_schema": {}}, "end": "x"}, "tags[0].begin"),
    ({"begin": "<function=f>", "content": {"type": "json_schema", "json_schema": 3}, "end": "x"},
     "tags[0].content.json_schema"),
    ({"begin": "<function=f>", "content": {"type": "json_schema", "json_schema": {}}, "end": 7},
     "tags[0].end"),
    ({"begin": "<function=f>", "content": {"type": "json_schema"}, "end": "x"}, "tags[0].content"),
])
def test_malformed_tags_still_get_the_general_errors(bad, where):
    tag = {"type": "structural_tag", "format": {"type": "triggered_tags",
                                                "triggers": ["<function="], "tags": [bad]}}
    with pytest.raises(ValueError, match=r"\$\.format\." + where.replace("[", r"\[").replace("]", r"\]")):
        structural_tag_to_ebnf(tag)


def test_known_tools_in_new_combinations_convert_as_if_new():
    """Each tool set converts to the same EBNF whether its schemas come from the memo (seen
    in earlier combinations) or are converted afresh, and the same as through the general
    reader."""
    fns = _bfcl_functions(60)
    rng = random.Random(7)
    combos = [rng.sample(fns, rng.choice([1, 5, 20])) for _ in range(12)]
    warm = [structural_tag_to_ebnf(_tag(c)) for c in combos]
    # again, every schema now a memo hit, in another order of requests
    for c, text in reversed(list(zip(combos, warm))):
        assert structural_tag_to_ebnf(_tag(c)) == text
        assert structural_tag_to_ebnf(_tag(c, general=True)) == text
    with json_schema._lock:
        saved = list(json_schema._cache.items())
        json_schema._cache.clear()
    try:
        for c, text in zip(combos, warm):
            assert structural_tag_to_ebnf(json.dumps(_tag(c))) == text
    finally:
        with json_schema._lock:
            json_schema._cache.update(saved)


def test_schema_memo_tells_schemas_apart_by_value_and_order():
    """repr keys: 1 vs "1" vs true, and the property order, are different schemas (1 and
    1.0 are keyed apart too, and convert alike: JSON Schema compares numbers by value)."""
    base = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
            "required": ["a", "b"]}
    swapped = {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}},
               "required": ["a", "b"]}
    texts = {}
    for name, schema in (("base", base), ("swapped", swapped),
                         ("c1", {"const": 1}), ("c'1'", {"const": "1"}), ("ctrue", {"const": True})):
        tag = {"type": "structural_tag", "format": {"type": "json_schema", "json_schema": schema}}
        texts[name] = structural_tag_to_ebnf(tag)
    assert len(set(texts.values())) == len(texts)
    one_float = {"type": "structural_tag", "format": {"type": "json_schema", "json_schema": {"const": 1.0}}}
    assert structural_tag_to_ebnf(one_float) == texts["c1"]
    comp = xgr.GrammarCompiler(xgr.TokenizerInfo([f"t{i}" for i in range(8)] + ['{"a":1,"b":"x"}',
                                                                               '{"b":"x","a":1}']))
    for name, text, good, bad in (("base", texts["base"], '{"a":1,"b":"x"}', '{"b":"x","a":1}'),
                                  ("swapped", texts["swapped"], '{"b":"x","a":1}', '{"a":1,"b":"x"}')):
        m = xgr.GrammarMatcher(comp.compile_grammar(text))
        assert m.accept_string(good), name
        m = xgr.GrammarMatcher(comp.compile_grammar(text))
        assert not m.accept_string(bad), name


@pytest.mark.parametrize("text, deep", [
    ("[" * 256 + "]" * 256, False),
    ("[" * 257 + "]" * 257, True),
    ('{"a": "' + "[" * 400 + '"}', False),          # brackets in a string do not nest
    ('["\\"' + "{" * 400 + '"]', False),            # nor after an escaped quote
    ("{" * 300, True),                               # not JSON, still too deep
])
def test_nesting_limit_on_text(text, deep):
    for doc in (text, text.encode()):
        if deep:
            with pytest.raises(xgr.GrammarLimitError, match="max_json_nesting"):
                check_json_nesting(doc, "the structural tag")
        else:
            check_json_nesting(doc, "the structural tag")
