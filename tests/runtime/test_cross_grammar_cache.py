"""Cross-grammar cache: a rule shared by two grammars is computed once (the statistics
prove the reuse), shared entries give exactly the oracle's masks, and eviction keeps the
cache under its byte budget across many distinct grammars."""

from __future__ import annotations

import pytest

import xgrammar2 as xgr
from runtime_helpers import masks_equal_oracle, tokenizer

SHARED = r'''
addr ::= "{" "\"street\": " str ", \"zip\": " [0-9]{5} "}"
str ::= "\"" [a-zA-Z ]* "\""
'''


@pytest.fixture(autouse=True)
def fresh_cache():
    xgr.clear_cross_grammar_cache()
    yield
    xgr.set_cross_grammar_cache_budget(256 << 20)


def compile_private(src: str, **kw) -> xgr.CompiledGrammar:
    # no compiled-grammar cache and no inlining, so rules stay shareable units
    c = xgr.GrammarCompiler(tokenizer("llama-3.1"), cache_enabled=False, inline_max_states=-1, **kw)
    return c.compile_grammar(src)


def test_same_rule_in_two_grammars_is_reused_and_exact() -> None:
    tok = tokenizer("llama-3.1")
    g1 = compile_private('root ::= "home=" addr\n' + SHARED)
    m1 = xgr.GrammarMatcher(g1)
    assert m1.accept_string('home={"street": "Main St')
    ok, why = masks_equal_oracle(m1, tok.vocab_size)
    assert ok, why
    before = xgr.get_cross_grammar_cache_stats()
    assert before["inserts"] > 0 and before["bytes"] > 0

    g2 = compile_private('root ::= "[" addr ("," addr)* "]"\n' + SHARED)
    m2 = xgr.GrammarMatcher(g2)
    assert m2.accept_string('[{"street": "Elm')
    ok, why = masks_equal_oracle(m2, tok.vocab_size)
    assert ok, why
    after = xgr.get_cross_grammar_cache_stats()
    assert after["hits"] > before["hits"], (before, after)


def test_disabled_cache_shares_nothing() -> None:
    tok = tokenizer("llama-3.1")
    g = compile_private('root ::= "x" addr\n' + SHARED, cross_grammar_cache=False)
    m = xgr.GrammarMatcher(g)
    assert m.accept_string('x{"street": "A')
    ok, why = masks_equal_oracle(m, tok.vocab_size)
    assert ok, why
    st = xgr.get_cross_grammar_cache_stats()
    assert st["inserts"] == 0 and st["hits"] == 0


def test_eviction_keeps_bytes_under_budget() -> None:
    budget = 96 << 10
    xgr.set_cross_grammar_cache_budget(budget)
    for i in range(60):
        # (a wide state after "=": sparse states take the descent, which is not shared)
        g = compile_private(f'root ::= "k{i}" "=" [^,]{{{i % 7 + 1}}} "{i}" ("," [0-9]+)*')
        m = xgr.GrammarMatcher(g)
        assert m.accept_string(f"k{i}=")
        bm = xgr.allocate_token_bitmask(1, tokenizer("llama-3.1").vocab_size)
        m.fill_next_token_bitmask(bm)
        st = xgr.get_cross_grammar_cache_stats()
        assert st["bytes"] <= budget
    assert st["evictions"] > 0 and st["inserts"] > st["entries"]


def test_budget_argument_is_checked() -> None:
    with pytest.raises(ValueError):
        xgr.set_cross_grammar_cache_budget(-5)
    with pytest.raises(TypeError):
        xgr.set_cross_grammar_cache_budget("big")


def test_compile_async_with_background_precompute() -> None:
    tok = tokenizer("llama-3.1")
    c = xgr.GrammarCompiler(tok, cache_enabled=False, max_threads=2)
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    fut = c.compile_async("json_schema", schema, precompute_k=4)
    compiled = fut.result(timeout=60)
    assert compiled.memory_size_bytes > 0
    m = xgr.GrammarMatcher(compiled)
    assert m.accept_string('{"q": "hi"}') and m.is_completed()
    bad = c.compile_async("grammar", "root ::= (")
    with pytest.raises(ValueError):
        bad.result(timeout=60)
    with pytest.raises(ValueError):
        c.compile_async("nonsense", "x")


def _dispatch_grammar(tools: list[str]) -> str:
    bodies = " | ".join(f'("{{\\"name\\": \\"{t}\\", \\"arguments\\": " obj_{t} "}}</tool_call>")'
                        for t in tools)
    objs = "\n".join(f'obj_{t} ::= "{{\\"{t}_arg\\": " [0-9]+ "}}"' for t in tools)
    return (f"root ::= TagDispatch((\"<tool_call>\", group), loop_after_dispatch=true, "
            f"excludes=(\"</think>\"))\ngroup ::= {bodies}\n{objs}\n")


def test_dispatch_free_text_entry_is_shared_across_tool_sets_and_exact() -> None:
    """The free-text state of a TagDispatch rule does not depend on the tag bodies (they
    start only after a whole trigger), so a grammar with another tool set reuses its
    mask entry; masks stay equal to the brute-force oracle before, across and after the
    trigger."""
    tok = tokenizer("llama-3.1")
    m1 = xgr.GrammarMatcher(compile_private(_dispatch_grammar(["get_weather", "search"])))
    ok, why = masks_equal_oracle(m1, tok.vocab_size)
    assert ok, why
    before = xgr.get_cross_grammar_cache_stats()
    m2 = xgr.GrammarMatcher(compile_private(_dispatch_grammar(["book_flight", "cancel", "lookup"])))
    ok, why = masks_equal_oracle(m2, tok.vocab_size)
    assert ok, why
    after = xgr.get_cross_grammar_cache_stats()
    assert after["hits"] > before["hits"], (before, after)
    for text in ["Let me check. <tool", "Let me check. <tool_call>", 'Ok <tool_call>{"name": "lo',
                 'x<tool_call>{"name": "cancel", "arguments": {"cancel_arg": 12}}</tool_call> then <']:
        m = xgr.GrammarMatcher(compile_private(_dispatch_grammar(["book_flight", "cancel", "lookup"])))
        assert m.accept_string(text), text
        ok, why = masks_equal_oracle(m, tok.vocab_size)
        assert ok, (text, why)


def test_tool_automata_are_memoised_across_grammars_and_equal_to_fresh_ones() -> None:
    """A tool schema's rules, compiled in one grammar, are not determinised again in a
    grammar that combines it with other tools (the automaton memo's counters prove it),
    and the memoised automata give the same masks as a compile that bypasses every
    process-wide cache."""
    tok = tokenizer("llama-3.1")
    weather = ('weather ::= "{\\"city\\": " str ", \\"days\\": " [1-9] [0-9]? ", \\"unit\\": " '
               '("\\"C\\"" | "\\"F\\"") "}"\nstr ::= "\\"" [a-zA-Z ]* "\\""\n')
    g1 = 'root ::= "call weather " weather\n' + weather
    g2 = 'root ::= ("call weather " weather | "call other {" [0-9]+ "}")\n' + weather
    compile_private(g1)
    before = xgr.get_automaton_cache_stats()
    shared = compile_private(g2)
    after = xgr.get_automaton_cache_stats()
    assert after["hits"] > before["hits"], (before, after)
    assert after["entries"] > 0 and after["bytes"] > 0
    fresh = compile_private(g2, cross_grammar_cache=False)
    assert xgr.get_automaton_cache_stats()["hits"] == after["hits"]  # bypassed
    text = 'call weather {"city": "Oslo", "days": 1'
    ms, mf = xgr.GrammarMatcher(shared), xgr.GrammarMatcher(fresh)
    for i in range(len(text) + 1):
        a, b = xgr.allocate_token_bitmask(1, tok.vocab_size), xgr.allocate_token_bitmask(1, tok.vocab_size)
        ms.fill_next_token_bitmask(a)
        mf.fill_next_token_bitmask(b)
        assert (a.numpy() == b.numpy()).all(), f"masks differ after {text[:i]!r}"
        if i < len(text):
            assert ms.accept_string(text[i]) and mf.accept_string(text[i])
    ok, why = masks_equal_oracle(ms, tok.vocab_size)
    assert ok, why
    xgr.clear_cross_grammar_cache()
    assert xgr.get_automaton_cache_stats()["entries"] == 0


def test_caller_context_entries_are_shared_across_grammars_and_exact() -> None:
    """A caller-context (pair) entry depends only on the caller rule's closure and, for
    tokens that leave the caller, on what follows it in each grammar: the second grammar
    with the same caller rule reuses it (stats) and still gets the oracle's masks, though
    what follows the caller differs between the two grammars."""
    tok = tokenizer("llama-3.1")
    obj = ('obj ::= "{\\"city\\": " str ", \\"n\\": " [0-9]+ "}"\n'
           'str ::= "\\"" [a-zA-Z ,]* "\\""\n')
    g1 = compile_private('root ::= "call " obj\n' + obj, context_min_uncertain=-1)
    g2 = compile_private('root ::= "[" obj ("," obj)* "]" [a-z]*\n' + obj, context_min_uncertain=-1)
    m1 = xgr.GrammarMatcher(g1)
    assert m1.accept_string('call {"city": "Par')
    ok, why = masks_equal_oracle(m1, tok.vocab_size)
    assert ok, why
    before = xgr.get_cross_grammar_cache_stats()
    m2 = xgr.GrammarMatcher(g2)
    assert m2.accept_string('[{"city": "Par')
    ok, why = masks_equal_oracle(m2, tok.vocab_size)
    assert ok, why
    after = xgr.get_cross_grammar_cache_stats()
    assert after["hits"] > before["hits"], (before, after)
    for text in ['is", "n": 12},{"city": "', 'is", "n": 12}]', 'is", "n": 12}]ab']:
        m = xgr.GrammarMatcher(g2)
        assert m.accept_string('[{"city": "Par' + text), text
        ok, why = masks_equal_oracle(m, tok.vocab_size)
        assert ok, (text, why)


LOOP = r'"\"" ([^"\\\x00-\x1f] | "\\" ["\\/nt])* "\""'


def test_loop_entries_are_shared_across_rules_and_exact() -> None:
    """A string body inlined into two different rules (one reference-free, one recursive)
    is one loop: the second grammar reuses the loop's entry though the rules' closures
    differ (stats), and both give the oracle's masks inside the string, where tokens leave
    it, and after it; the same masks as with every process-wide cache off."""
    tok = tokenizer("llama-3.1")
    flat = f'root ::= "{{\\"city\\": " {LOOP} ", \\"n\\": " [0-9]+ "}}"\n'
    rec = (f'root ::= "{{\\"name\\": " {LOOP} ", \\"kids\\": [" (root ("," root)*)? "]}}"\n')

    def compiled(src: str, **kw) -> xgr.CompiledGrammar:
        return xgr.GrammarCompiler(tok, cache_enabled=False, **kw).compile_grammar(src)

    m1 = xgr.GrammarMatcher(compiled(flat))
    assert m1.accept_string('{"city": "Par')
    ok, why = masks_equal_oracle(m1, tok.vocab_size)
    assert ok, why
    before = xgr.get_cross_grammar_cache_stats()
    g2 = compiled(rec)
    m2 = xgr.GrammarMatcher(g2)
    assert m2.accept_string('{"name": "An')
    ok, why = masks_equal_oracle(m2, tok.vocab_size)
    assert ok, why
    after = xgr.get_cross_grammar_cache_stats()
    assert after["hits"] > before["hits"], (before, after)
    plain = compiled(rec, cross_grammar_cache=False)
    for text in ['{"name": "', '{"name": "An\\"n', '{"name": "Ann", "kids": [{"name": "B',
                 '{"name": "Ann", "kids": [{"name": "Bo", "kids": []}', '{"name": "A", "kids": []']:
        a, b = xgr.GrammarMatcher(g2), xgr.GrammarMatcher(plain)
        assert a.accept_string(text) and b.accept_string(text), text
        ok, why = masks_equal_oracle(a, tok.vocab_size)
        assert ok, (text, why)
        ma, mb = xgr.allocate_token_bitmask(1, tok.vocab_size), xgr.allocate_token_bitmask(1, tok.vocab_size)
        a.fill_next_token_bitmask(ma)
        b.fill_next_token_bitmask(mb)
        assert (ma.numpy() == mb.numpy()).all(), text


def test_string_entries_of_new_schemas_come_from_the_shared_loop() -> None:
    """JSON schemas that differ only in their property names share their in-string masks
    (inlined into each schema's own property rules): after the first schema, a new one's
    strings hit the cache, with exact masks inside, across and after them."""
    tok = tokenizer("llama-3.1")
    c = xgr.GrammarCompiler(tok, cache_enabled=False)

    def schema(k: int) -> dict:
        return {"type": "object", "properties": {f"key{k}": {"type": "string"}, f"n{k}": {"type": "integer"},
                                                 f"s{k}": {"type": "array", "items": {"type": "string"}}},
                "required": [f"key{k}", f"n{k}", f"s{k}"]}

    bm = xgr.allocate_token_bitmask(1, tok.vocab_size)
    for k in range(3):
        m = xgr.GrammarMatcher(c.compile_json_schema(schema(k)))
        for i, text in enumerate([f'{{"key{k}": "ab', f'", "n{k}": 5, "s{k}": ["x', '", "y\\"']):
            assert m.accept_string(text), text
            before = xgr.get_cross_grammar_cache_stats()
            m.fill_next_token_bitmask(bm)
            after = xgr.get_cross_grammar_cache_stats()
            if k and i < 2:  # the first visit of each string state of a new schema
                assert after["hits"] > before["hits"], (k, text, before, after)
            ok, why = masks_equal_oracle(m, tok.vocab_size)
            assert ok, (k, text, why)


def _tool_tag(names: list[str]) -> str:
    import json

    return json.dumps({"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<function="],
        "tags": [{"begin": f"<function={n}>", "content": {"type": "json_schema", "json_schema": {
            "type": "object", "properties": {f"{n}_q": {"type": "string"}, "k": {"type": "integer"}},
            "required": [f"{n}_q"]}}, "end": "</function>"} for n in names]}})


@pytest.mark.parametrize("n_tools", [2, 12])
def test_tool_arguments_after_whitespace_are_exact(n_tools: int) -> None:
    """A tool's argument object inlined into the request's tag group, where a reference
    start counts only if the token's next byte can begin it (so " the" after "{" is
    rejected at its second byte): masks equal the oracle's after "{" and whitespace, in the
    arguments and after the call, for few tools (general lowering) and many (direct)."""
    tok = tokenizer("llama-3.1")
    names = [f"tool{i}" for i in range(n_tools)]
    g = xgr.GrammarCompiler(tok, cache_enabled=False).compile_structural_tag(_tool_tag(names))
    for text in ["Sure. <function=tool1>{", "Sure. <function=tool1>{ ", "Sure. <function=tool1>{\n  ",
                 'Sure. <function=tool1>{"tool1_q": "a b', 'Sure. <function=tool1>{"tool1_q": "a", "k": 1',
                 'Sure. <function=tool1>{"tool1_q": "a"}', 'Sure. <function=tool1>{"tool1_q": "a"}</function> ok']:
        m = xgr.GrammarMatcher(g)
        assert m.accept_string(text), text
        ok, why = masks_equal_oracle(m, tok.vocab_size)
        assert ok, (text, why)


def test_dispatch_entries_are_shared_when_tool_names_start_differently() -> None:
    """After a trigger such as `<function=` the tag group starts with the tool names, whose
    first letters differ between requests: the dispatch rule's entries are keyed by the
    widened first bytes (any word character), so a request with other names computes no
    entry for its first mask, and the tokens that cross the trigger are still decided
    exactly for each request's names (masks equal the oracle's inside the trigger)."""
    tok = tokenizer("llama-3.1")
    comp = xgr.GrammarCompiler(tok, cache_enabled=False)
    bm = xgr.allocate_token_bitmask(1, tok.vocab_size)
    xgr.GrammarMatcher(comp.compile_structural_tag(_tool_tag(["alpha", "beta"]))).fill_next_token_bitmask(bm)
    before = xgr.get_cross_grammar_cache_stats()
    g = comp.compile_structural_tag(_tool_tag(["get_x", "search", "Zeta9"]))
    xgr.GrammarMatcher(g).fill_next_token_bitmask(bm)
    after = xgr.get_cross_grammar_cache_stats()
    assert after["misses"] == before["misses"] and after["hits"] > before["hits"], (before, after)
    for text in ["", "Sure ", "Sure <", "Sure <function", "Sure <function=", "Sure <function=sea",
                 'Sure <function=get_x>{"get_x_q": "a"}</function> <func']:
        m = xgr.GrammarMatcher(g)
        assert m.accept_string(text), text
        ok, why = masks_equal_oracle(m, tok.vocab_size)
        assert ok, (text, why)


def test_loops_through_final_states_are_shared_and_exact() -> None:
    """A digit run that can end its rule is a loop with a final state: tokens that leave it
    or die in it keep the depths where the rule could end. The loop entry is shared by a
    reference-free rule and a recursive one, with the oracle's masks in both. (The fraction
    separator is "~": some 6k of Llama-3's tokens start with ".", and a loop that many tokens
    leave at their first byte is classified by a pass over its rule instead.)"""
    tok = tokenizer("llama-3.1")
    c = xgr.GrammarCompiler(tok, cache_enabled=False)
    g1 = c.compile_grammar('root ::= "n=" [0-9]+ ("~" [0-9]+)?')
    g2 = c.compile_grammar('root ::= "(" root ")" | "v" [0-9]+ ("~" [0-9]+)?')
    bm = xgr.allocate_token_bitmask(1, tok.vocab_size)
    m = xgr.GrammarMatcher(g1)
    assert m.accept_string("n=12")
    ok, why = masks_equal_oracle(m, tok.vocab_size)
    assert ok, why
    for g, text in [(g2, "((v12"), (g1, "n=1~25"), (g2, "((v1~5"), (g2, "(v3"), (g2, "v"), (g1, "n=")]:
        m = xgr.GrammarMatcher(g)
        assert m.accept_string(text), text
        before = xgr.get_cross_grammar_cache_stats()
        m.fill_next_token_bitmask(bm)
        after = xgr.get_cross_grammar_cache_stats()
        if text == "((v12":
            assert after["hits"] > before["hits"], (before, after)
        ok, why = masks_equal_oracle(m, tok.vocab_size)
        assert ok, (text, why)


def test_a_grammar_with_a_budget_shares_the_entries_of_its_rules_without_one() -> None:
    """A JSON schema with one budgeted string (a pattern with a large maxLength) still shares
    its other strings' entries: a second schema like it (another property name) hits the
    cache at its plain string's first fill, before a budget's rule is ever entered, with the
    oracle's masks there and through the budgeted string."""
    tok = tokenizer("llama-3.1")
    c = xgr.GrammarCompiler(tok, cache_enabled=False)

    def schema(k: int) -> dict:
        return {"type": "object", "properties": {
            f"name{k}": {"type": "string", "maxLength": 40},
            "icon": {"type": "string", "maxLength": 30000, "pattern": "^data:[a-z]+,[0-9a-zA-Z+/=]*$"},
            "n": {"type": "integer"}}, "required": [f"name{k}", "icon", "n"]}

    src0 = xgr.Grammar.from_json_schema(schema(0))
    assert "max_json_chars=30000" in str(src0) or "max_chars=30000" in str(src0), str(src0)
    bm = xgr.allocate_token_bitmask(1, tok.vocab_size)
    for k in range(2):
        m = xgr.GrammarMatcher(c.compile_json_schema(schema(k)))
        assert m.accept_string(f'{{"name{k}": "ab')
        before = xgr.get_cross_grammar_cache_stats()
        m.fill_next_token_bitmask(bm)
        after = xgr.get_cross_grammar_cache_stats()
        if k:
            assert after["hits"] > before["hits"], (before, after)
        ok, why = masks_equal_oracle(m, tok.vocab_size)
        assert ok, why
        for text in ['", "icon": "data:x,', 'AB+', '", "n": 1']:
            assert m.accept_string(text), text
            ok, why = masks_equal_oracle(m, tok.vocab_size)
            assert ok, (k, text, why)


@pytest.mark.parametrize("budget_first", [True, False])
def test_an_entry_that_enters_a_budgeted_rule_is_never_shared(budget_first: bool) -> None:
    """Two grammars alike but for a character budget on the rule the root enters: the entry
    of the root's state classifies tokens that enter the budgeted rule, so it must not serve
    the grammar without the budget (which takes `"abcdef"`), nor the other way round."""
    tok = tokenizer("llama-3.1")
    body = 'root ::= "x=\\"" s "\\""\n'
    budget = body + "s[max_chars=3] ::= [a-z]*\n"
    plain = body + "s ::= [a-z]*\n"
    order = [budget, plain] if budget_first else [plain, budget]
    allowed_long = {}
    for src in order:
        m = xgr.GrammarMatcher(compile_private(src))
        assert m.accept_string('x="')
        ok, why = masks_equal_oracle(m, tok.vocab_size)
        assert ok, (src, why)
        bm = xgr.allocate_token_bitmask(1, tok.vocab_size)
        m.fill_next_token_bitmask(bm)
        ids = [i for i, t in enumerate(tok.decoded_vocab[: tok.vocab_size])
               if len(t) >= 5 and t.isascii() and t.isalpha() and t.islower()]
        assert len(ids) > 100
        bits = bm.numpy()[0]
        allowed_long[src] = sum(1 for i in ids if bits[i >> 5] >> (i & 31) & 1)
    assert allowed_long[budget] == 0 and allowed_long[plain] > 100, allowed_long


def test_sparse_states_off_loops_take_the_descent_and_are_not_shared() -> None:
    """The first key position of an object with many optional properties has one sparse
    state per property rule, each rule's closure the rest of the property chain: their
    entries come from the descent, without building those closures' keys or touching the
    cross-grammar cache (before: one lookup and one insert per property, keys of tens of KB),
    with the oracle's masks there and after."""
    tok = tokenizer("llama-3.1")
    c = xgr.GrammarCompiler(tok, cache_enabled=False)
    props = {f"field_{chr(97 + i % 26)}{i}": {"type": ["string", "integer"]} for i in range(40)}
    g = c.compile_json_schema({"type": "object", "properties": props})
    bm = xgr.allocate_token_bitmask(1, tok.vocab_size)
    for text in ['{"', '{"field_b1": 3, "', '{"field_b1": 3, "field_z25": "x", "fi']:
        m = xgr.GrammarMatcher(g)
        assert m.accept_string(text), text
        before = xgr.get_cross_grammar_cache_stats()
        m.fill_next_token_bitmask(bm)
        after = xgr.get_cross_grammar_cache_stats()
        assert after["misses"] == before["misses"] and after["inserts"] == before["inserts"], (text, before, after)
        ok, why = masks_equal_oracle(m, tok.vocab_size)
        assert ok, (text, why)
