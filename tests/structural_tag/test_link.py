"""Linked compiles of structural tags (structural_tag/link.py, csrc/compile/link.c): a
structural tag given as JSON text has each tag's JSON-schema content lowered once and
linked into every request that carries that tag. The result must be the grammar the
unlinked compile gives (masks compared token by token on a real vocabulary), tools seen
before must hit the tag cache, and errors keep their JSON paths."""

import json
import random

import numpy as np
import pytest

import xgrammar2 as xgr
from xgrammar2.structural_tag.errors import StructuralTagError
from xgrammar2.structural_tag.link import split, tag_slots

from chat import load_pool
from st_support import DATA

END = "</function>"


@pytest.fixture(scope="module")
def tok():
    path = DATA / "tokenizers" / "canonical" / "llama-3-instruct.json"
    if not path.exists():
        pytest.skip(f"{path} not found")
    return xgr.TokenizerInfo.from_canonical_json(str(path))


@pytest.fixture(scope="module")
def pool():
    return load_pool(size=12)


def _tag(tool, content=None):
    fn = tool.tool["function"]
    return {"type": "tag", "begin": f"<function={fn['name']}>",
            "content": content or {"type": "json_schema", "json_schema": fn["parameters"]}, "end": END}


def _triggered(tags, **kw):
    return {"type": "triggered_tags", "triggers": ["<function="], "tags": tags, **kw}


FORMS = {
    "triggered_tags": lambda tags: _triggered(tags),
    "at_least_one_stop_after_first": lambda tags: _triggered(tags, at_least_one=True, stop_after_first=True),
    "tags_with_separator": lambda tags: {"type": "tags_with_separator", "separator": "\n", "tags": tags},
    "reasoning_then_tools": lambda tags: {"type": "sequence", "elements": [
        {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"},
        _triggered(tags)]},
    # a tag that is not linked (free text, XML arguments) among linked ones
    "mixed_contents": lambda tags: _triggered(tags + [
        {"type": "tag", "begin": "<function=note>", "content": {"type": "any_text"}, "end": END},
        {"type": "tag", "begin": "<function=xml_args>", "end": END, "content": {
            "type": "json_schema", "style": "qwen_xml",
            "json_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}]),
}


def _text(form, tags):
    return json.dumps({"type": "structural_tag", "format": FORMS[form](tags)}, ensure_ascii=False)


def _allowed(m, vocab_size):
    bm = xgr.allocate_token_bitmask(1, vocab_size)
    m.fill_next_token_bitmask(bm)
    arr = bm.numpy() if hasattr(bm, "numpy") else np.asarray(bm)
    bits = np.unpackbits(arr.reshape(-1).view(np.uint8), bitorder="little")[:vocab_size]
    return np.flatnonzero(bits)


def _same_masks_along_walks(linked, whole, tok, seed, prefix=""):
    rng = random.Random(seed)
    for walk in range(3):
        a, b = xgr.GrammarMatcher(linked), xgr.GrammarMatcher(whole)
        if prefix:
            assert a.accept_string(prefix) and b.accept_string(prefix)
        for step in range(20):
            if a.is_terminated():  # (a stop token was accepted: there is no mask)
                assert b.is_terminated()
                break
            ia, ib = _allowed(a, tok.vocab_size), _allowed(b, tok.vocab_size)
            assert np.array_equal(ia, ib), f"walk {walk} step {step}: {len(np.setxor1d(ia, ib))} tokens differ"
            if not len(ia):
                break
            t = int(rng.choice(ia.tolist()))
            assert a.accept_token(t) and b.accept_token(t)


@pytest.mark.parametrize("form", list(FORMS))
def test_linked_compile_gives_the_unlinked_grammar(form, tok, pool):
    comp = xgr.GrammarCompiler(tok)
    whole = xgr.GrammarCompiler(tok, cache_enabled=False)  # no cache: the unlinked path
    rng = random.Random(form)
    for request in range(3):  # later requests reuse earlier tools: tag-cache hits
        tools = rng.sample(pool[:6], 4)
        text = _text(form, [_tag(t) for t in tools])
        linked, ref = comp.compile_structural_tag(text), whole.compile_structural_tag(text)
        call = tools[0]
        args = json.dumps(call.calls[0])
        name = call.tool["function"]["name"]
        good = f"<function={name}>{args}{END}"
        prefix = "<think>ok</think>" if form == "reasoning_then_tools" else ""
        for g in (linked, ref):
            assert xgr.GrammarMatcher(g).accept_string(prefix + good), (form, good)
            assert not xgr.GrammarMatcher(g).accept_string(prefix + f"<function={name}>{{\"no\": 1}}{END}")
        _same_masks_along_walks(linked, ref, tok, f"{form}/{request}", prefix + f"<function={name}>")
        _same_masks_along_walks(linked, ref, tok, f"{form}/{request}/free", prefix)
        # the grammar it reports is the whole one
        assert str(linked.grammar) == str(ref.grammar)


def test_tools_seen_before_are_linked_from_the_tag_cache(tok, pool):
    comp = xgr.GrammarCompiler(tok)
    a, b = pool[:5], pool[5:10]
    comp.compile_structural_tag(_text("triggered_tags", [_tag(t) for t in a]))
    comp.compile_structural_tag(_text("triggered_tags", [_tag(t) for t in b]))
    assert (comp._tags.hits, comp._tags.misses, len(comp._tags)) == (0, 10, 10)
    mix = [pool[i] for i in (7, 1, 9, 3)]
    cg = comp.compile_structural_tag(_text("triggered_tags", [_tag(t) for t in mix]))
    assert (comp._tags.hits, comp._tags.misses) == (4, 10)
    # the same tools in another form: still the cached tags
    comp.compile_structural_tag(_text("tags_with_separator", [_tag(t) for t in mix]))
    assert (comp._tags.hits, comp._tags.misses) == (8, 10)
    name = mix[2].tool["function"]["name"]
    assert xgr.GrammarMatcher(cg).accept_string(f"<function={name}>{json.dumps(mix[2].calls[0])}{END}")
    other = pool[0].tool["function"]["name"]  # known tool, not in this request
    assert not xgr.GrammarMatcher(cg).accept_string(f"<function={other}>")
    size = comp.get_cache_size_bytes()
    assert size > comp._cache.size_bytes() and comp._tags.size_bytes() > 0
    comp.clear_cache()
    assert len(comp._tags) == 0 and comp.get_cache_size_bytes() == 0


def test_a_linked_grammar_is_cached_the_second_time_its_request_comes(tok, pool):
    """Admission to the compile cache: a grammar linked from cached tags is kept only when
    its request comes again, so one-off tool combinations hold no cache memory; a grammar
    compiled whole is kept at once."""
    comp = xgr.GrammarCompiler(tok)
    text = _text("triggered_tags", [_tag(t) for t in pool[:4]])
    first = comp.compile_structural_tag(text)
    assert first._linked and len(comp._cache) == 0
    second = comp.compile_structural_tag(text)
    assert second is not first and len(comp._cache) == 1
    assert comp.compile_structural_tag(text) is second
    # the same tools in new combinations, each requested once: the cache does not grow
    size = comp._cache.size_bytes()
    rng = random.Random(7)
    for _ in range(12):
        comp.compile_structural_tag(_text("triggered_tags", [_tag(t) for t in rng.sample(pool[:6], 3)]))
    assert len(comp._cache) == 1 and comp._cache.size_bytes() == size
    # not linked (every tag's content is free text): cached the first time
    free = _text("triggered_tags", [_tag(t, {"type": "any_text"}) for t in pool[:2]])
    whole = comp.compile_structural_tag(free)
    assert not whole._linked and comp.compile_structural_tag(free) is whole
    schema = json.dumps(pool[0].tool["function"]["parameters"])
    assert comp.compile_json_schema(schema) is comp.compile_json_schema(schema)


def test_the_admission_memory_is_bounded(tok, pool):
    """The keys seen once are forgotten when their set is full: a request then needs two
    more sightings to be cached."""
    comp = xgr.GrammarCompiler(tok)
    comp._cache._DOOR_MAX = 3
    texts = [_text("triggered_tags", [_tag(t) for t in pool[k:k + 2]]) for k in range(4)]
    for text in texts:  # the fourth clears the three before it
        comp.compile_structural_tag(text)
    assert len(comp._cache._door) == 1 and len(comp._cache) == 0
    comp.compile_structural_tag(texts[0])
    assert len(comp._cache) == 0
    comp.compile_structural_tag(texts[0])
    comp.compile_structural_tag(texts[3])
    assert len(comp._cache) == 2
    comp.clear_cache()
    assert len(comp._cache._door) == 0


def test_errors_keep_their_json_paths_when_tags_are_cached(tok, pool):
    comp = xgr.GrammarCompiler(tok)
    tags = [_tag(t) for t in pool[:3]]
    comp.compile_structural_tag(_text("triggered_tags", tags))
    # every tag cached; the trigger starts none of them
    bad = json.dumps({"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<tool="], "tags": tags[::-1]}})
    with pytest.raises(StructuralTagError, match=r"\$\.format\.tags\[0\]\.begin"):
        comp.compile_structural_tag(bad)
    # a malformed tag after cached ones
    broken = tags + [{"type": "tag", "begin": 5, "content": {"type": "any_text"}, "end": END}]
    with pytest.raises(StructuralTagError, match=r"\$\.format\.tags\[3\]\.begin"):
        comp.compile_structural_tag(_text("triggered_tags", broken))
    # a schema the converter refuses, in a new tag after cached ones
    refused = tags[:2] + [_tag(pool[5], {"type": "json_schema", "json_schema": {
        "type": "object", "properties": {"a": {"type": "strnig"}}}})]
    with pytest.raises(Exception, match=r"\$\.format\.tags\[2\]\.content"):
        comp.compile_structural_tag(_text("triggered_tags", refused))
    # and the good request still compiles afterwards
    comp.compile_structural_tag(_text("triggered_tags", tags[::-1]))


def test_texts_the_scanner_cannot_split_compile_whole(tok, pool):
    """A repeated "tags" key: JSON readers keep the last one, so must the compile."""
    comp = xgr.GrammarCompiler(tok)
    first, last = _tag(pool[0]), _tag(pool[1])
    comp.compile_structural_tag(_text("triggered_tags", [first, last]))  # both tags cached
    text = ('{"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<function="], '
            f'"tags": [{json.dumps(first)}], "tags": [{json.dumps(last)}]}}}}')
    assert split(text.encode()) is None
    cg = comp.compile_structural_tag(text)
    for tool, ok in ((pool[1], True), (pool[0], False)):
        name = tool.tool["function"]["name"]
        call = f"<function={name}>{json.dumps(tool.calls[0])}{END}"
        assert xgr.GrammarMatcher(cg).accept_string(call) is ok


def test_spans_and_slots_agree(pool):
    """The C scanner's spans and the Python walker's slots are the same places."""
    tags = [_tag(t) for t in pool[:3]]
    docs = [{"type": "structural_tag", "format": FORMS[f](tags)} for f in FORMS]
    docs.append({"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "const_string", "value": "é\"tags\": [1]"}, _triggered(tags),
        {"type": "json_schema", "json_schema": {"type": "object", "tags": [{"a": 1}]}}]}})
    for doc in docs:
        for text in (json.dumps(doc), json.dumps(doc, ensure_ascii=False, indent=2)):
            raw = text.encode()
            spans = split(raw)
            slots = tag_slots(json.loads(text))
            assert spans is not None and len(spans) == len(slots)
            for (a, b), (arr, i) in zip(spans, slots):
                assert json.loads(raw[a:b]) == arr[i]


def test_tag_cache_stays_within_its_budget(tok, pool):
    comp = xgr.GrammarCompiler(tok, cache_limit_bytes=1 << 20)
    budget = (1 << 20) // 8
    rng = random.Random(3)
    for k in range(40):
        tool = rng.choice(pool)
        props = dict(tool.tool["function"]["parameters"])
        props["description"] = f"variant {k}"  # a new tag text every time
        comp.compile_structural_tag(_text("triggered_tags", [_tag(tool, {"type": "json_schema",
                                                                         "json_schema": props})]))
        assert comp._tags.size_bytes() <= budget
    assert 0 < len(comp._tags) < 40


def test_threads_share_the_tag_cache(tok, pool):
    """Compiles from several threads on one compiler (the GIL is released in the core):
    each result is the grammar its text compiles to alone."""
    import concurrent.futures

    comp = xgr.GrammarCompiler(tok)
    rng = random.Random(11)
    texts = [_text("triggered_tags", [_tag(t) for t in rng.sample(pool, 5)]) for _ in range(24)]
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        linked = list(ex.map(comp.compile_structural_tag, texts))
    whole = xgr.GrammarCompiler(tok, cache_enabled=False)
    for i, (text, g) in enumerate(zip(texts, linked)):
        if i % 4 == 0:
            _same_masks_along_walks(g, whole.compile_structural_tag(text), tok, f"threads/{i}")
    assert comp._tags.hits > 0


def _table_size(comp):
    return int(xgr._core.lib.xgr_tag_table_size(comp._tags._table))


def test_tools_seen_before_compile_in_the_core_from_the_tag_table(tok, pool, monkeypatch):
    """A request of the direct shape whose every tool was seen is resolved and compiled by
    the core's tag table (the general reader is never called), counts its hits, and is the
    grammar the unlinked compile gives."""
    import xgrammar2.tool_call_compile as compiler

    comp = xgr.GrammarCompiler(tok)
    for tools in (pool[:5], pool[5:10]):
        comp.compile_structural_tag(_text("triggered_tags", [_tag(t) for t in tools]))
    assert _table_size(comp) == len(comp._tags) == 10
    calls = []
    real = compiler.read_linked
    monkeypatch.setattr(compiler, "read_linked", lambda *a, **k: calls.append(1) or real(*a, **k))
    whole = xgr.GrammarCompiler(tok, cache_enabled=False)
    hits = comp._tags.hits
    for request, idx in enumerate([(7, 1, 9, 3), (0, 8, 8, 2), (4, 6)]):  # (8 listed twice)
        tools = [pool[i] for i in idx]
        text = _text("triggered_tags", [_tag(t) for t in tools])
        cg, ref = comp.compile_structural_tag(text), whole.compile_structural_tag(text)
        name = tools[0].tool["function"]["name"]
        _same_masks_along_walks(cg, ref, tok, f"table/{request}", f"<function={name}>")
        _same_masks_along_walks(cg, ref, tok, f"table/{request}/free")
        assert str(cg.grammar) == str(ref.grammar)
        hits += len(idx)
        assert comp._tags.hits == hits
    assert calls == []
    # a shape the direct build does not cover, or tags whose begins lack the trigger (the
    # core declines): the general way, which compiles or names the problem
    tags = [_tag(t) for t in pool[:3]]
    comp.compile_structural_tag(json.dumps({"type": "structural_tag",
                                            "format": _triggered(tags, at_least_one=True)}))
    for triggers, error in ((["<function=", "<tool>"], "'<tool>' starts no tag's begin"),
                            (["<tool>"], r"tags\[0\].begin: One tag does not match any trigger .* does not start with any trigger")):
        fmt = {**_triggered(tags), "triggers": triggers}
        with pytest.raises(StructuralTagError, match=error):
            comp.compile_structural_tag(json.dumps({"type": "structural_tag", "format": fmt}))
    assert len(calls) == 3


def test_tag_table_mirrors_the_cache_through_eviction(tok, pool):
    """The core's table holds exactly the cached tags of the direct shape as entries come
    and go under a small budget, and a tag a request used since it was cached survives an
    eviction that takes an unused one (the LRU order the resolve did not update)."""
    comp = xgr.GrammarCompiler(tok)
    tags = comp._tags
    for tools in (pool[:6],):
        comp.compile_structural_tag(_text("triggered_tags", [_tag(t) for t in tools]))
    sizes = [e[1] for e in tags._entries.values()]
    assert _table_size(comp) == 6
    # a budget that holds the six, then one request using the oldest two
    tags._limit = sum(sizes)
    comp._cache.clear()
    oldest = list(tags._entries)[:2]
    comp.compile_structural_tag(_text("triggered_tags", [_tag(t) for t in pool[:2]]))
    assert list(tags._entries)[:2] == oldest  # the resolve did not reorder them
    # two new tags push out two: not the used ones
    comp.compile_structural_tag(_text("triggered_tags", [_tag(t) for t in pool[6:8]]))
    left = list(tags._entries)
    assert all(k in left for k in oldest) and len(left) < 8
    assert _table_size(comp) == len(left) == sum(1 for e in tags._entries.values() if e[2] is not None)
    # the used ones are in the table: a request of them is still served by it
    hits = tags.hits
    comp._cache.clear()
    comp.compile_structural_tag(_text("triggered_tags", [_tag(t) for t in pool[:2]]))
    assert tags.hits == hits + 2
    comp.clear_cache()
    assert _table_size(comp) == 0 and len(tags) == 0


@pytest.mark.parametrize("text, error", [
    ('{"type": "structural_tag", "format": {"tags": [', ValueError),        # not JSON
    ('{"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<f="], '
     '"tags": [{"begin": "<f=a>", "content": {"type": "json_schema", "json_schema": {}}, "end": "x", '
     '"extra": 1}, NaN]}}', ValueError),                                     # not strict JSON
    ('{"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<f="], '
     '"tags": [7]}}', StructuralTagError),                                   # a tag that is no object
    ('{"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["\ud800"], '
     '"tags": [{"begin": "\ud800a", "content": {"type": "any_text"}, "end": "x"}]}}',
     ValueError),                                                            # a lone surrogate
    ('[1, 2]', StructuralTagError),
])
def test_garbage_text_raises_a_clear_error(tok, text, error):
    comp = xgr.GrammarCompiler(tok)
    with pytest.raises(error) as e:
        comp.compile_structural_tag(text)
    assert str(e.value)


# Requests of the direct shape (fast_link.py) and of shapes next to it that must not take it.
DIRECT_SHAPES = {
    "plain": (lambda tags: _triggered(tags), True),
    "stop_after_first": (lambda tags: _triggered(tags, stop_after_first=True), True),
    "excludes": (lambda tags: _triggered(tags, excludes=["<|eot|>", "", "<|eot|>", "</x>"]), True),
    "a_tag_twice": (lambda tags: _triggered(tags + tags[:1]), True),
    "at_least_one": (lambda tags: _triggered(tags, at_least_one=True), False),
    "two_triggers": (lambda tags: {**_triggered([{**tags[0], "begin": "<tool>" + tags[0]["begin"]}] + tags[1:]),
                                   "triggers": ["<function=", "<tool>"]}, False),
    "in_a_sequence": (lambda tags: {"type": "sequence", "elements": [_triggered(tags)]}, False),
    "extra_field": (lambda tags: {**_triggered(tags), "note": 1}, False),
}


@pytest.mark.parametrize("shape", list(DIRECT_SHAPES))
def test_direct_text_is_the_converters_text(shape, tok, pool):
    """Every tag seen before: the text written directly equals, character for character,
    what the converter writes from the format tree of the same request (and the same
    fragments are linked); shapes it does not cover take the tree."""
    from xgrammar2.structural_tag.converter import format_to_linked_ebnf
    from xgrammar2.structural_tag.fast_link import LinkedEBNF
    from xgrammar2.structural_tag.link import read_linked

    make, direct = DIRECT_SHAPES[shape]
    comp = xgr.GrammarCompiler(tok)
    tags = [_tag(t) for t in pool[:4]]
    raw = json.dumps({"type": "structural_tag", "format": make([tags[i] for i in (2, 0, 3)])}).encode()
    comp.compile_structural_tag(raw.decode())  # every tag seen (this request's cached whole)
    comp._cache.clear()
    spans = split(raw)
    fast = read_linked(raw, spans, comp._tags, comp._fragment)
    tree = read_linked(raw, spans, comp._tags, comp._fragment, direct=False)
    assert isinstance(fast, LinkedEBNF) == direct
    if direct:
        text, links = format_to_linked_ebnf(tree)
        assert fast.text == text
        assert str(fast.grammar()) == str(xgr.Grammar.from_ebnf(text))  # built without the text
        assert [(n, int(xgr._core.ffi.cast("uintptr_t", f))) for n, f in fast.links] == \
               [(n, int(xgr._core.ffi.cast("uintptr_t", f))) for n, f in links]
    # either way the compile accepts a call of one of its tools and not of the others
    cg = comp.compile_structural_tag(raw.decode())
    name = pool[0].tool["function"]["name"]
    assert xgr.GrammarMatcher(cg).accept_string(f"<function={name}>{json.dumps(pool[0].calls[0])}{END}")
    assert not xgr.GrammarMatcher(cg).accept_string(f"<function={pool[1].tool['function']['name']}>")


@pytest.mark.parametrize("begins, end", [
    (["<function=caf\u00e9>", "<function=\U0001f600>"], "</function>"),
    (['<function=a"b\\c>', "<function=x\ny\t>"], "\x01</function>"),
    (["<function=", "<function=b>"], "\u00e9"),  # a begin that is the trigger alone
])
def test_direct_grammar_of_odd_strings_is_its_text_parsed(tok, pool, begins, end):
    """Strings the EBNF text must escape reach the directly built grammar as their UTF-8
    bytes: it prints as the text parsed, and the compiled grammar accepts the calls."""
    from xgrammar2.structural_tag.fast_link import LinkedEBNF
    from xgrammar2.structural_tag.link import read_linked

    comp = xgr.GrammarCompiler(tok)
    tags = [{"type": "tag", "begin": b, "content": {"type": "json_schema", "json_schema": {"type": "integer"}},
             "end": end} for b in begins]
    raw = json.dumps({"type": "structural_tag", "format": _triggered(tags)}).encode()
    comp.compile_structural_tag(raw.decode())
    comp._cache.clear()
    fast = read_linked(raw, split(raw), comp._tags, comp._fragment)
    assert isinstance(fast, LinkedEBNF)
    assert str(fast.grammar()) == str(xgr.Grammar.from_ebnf(fast.text))
    cg = comp.compile_structural_tag(raw.decode())
    for b in begins:
        assert xgr.GrammarMatcher(cg).accept_string(f"hi {b}12{end} bye"), b
    assert not xgr.GrammarMatcher(cg).accept_string(f"hi {begins[1]}x")


def test_direct_grammar_with_a_lone_surrogate_raises_as_the_text_does(tok, pool):
    """Tags seen before, and an exclude that is not valid Unicode: it cannot be encoded for
    the core, so the request goes through the text, whose parser names the problem."""
    comp = xgr.GrammarCompiler(tok)
    tags = [_tag(t) for t in pool[:2]]
    comp.compile_structural_tag(json.dumps({"type": "structural_tag", "format": _triggered(tags)}))
    text = json.dumps({"type": "structural_tag", "format": _triggered(tags[::-1], excludes=["\ud800"])})
    with pytest.raises(xgr.InvalidUTF8Error, match="surrogate"):
        comp.compile_structural_tag(text)


def test_tools_seen_before_check_the_nesting_of_their_skeleton(tok, pool):
    """A request of tags read before parses only its skeleton, and that is what the nesting
    limit bounds (the cached tags were checked when first read): a limit below the
    skeleton's depth raises, one at it compiles although the schemas nest deeper."""
    comp = xgr.GrammarCompiler(tok)
    tags = [_tag(t, {"type": "json_schema", "json_schema": {"type": "object", "properties": {
        "a": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}}}})
        for t in pool[:2]]
    comp.compile_structural_tag(json.dumps({"type": "structural_tag", "format": _triggered(tags)}))
    text = json.dumps({"type": "structural_tag", "format": _triggered(tags[::-1])})  # depth 3 without tags
    old = xgr.limits.set_limits(max_json_nesting=2)
    try:
        with pytest.raises(xgr.GrammarLimitError, match="max_json_nesting"):
            comp.compile_structural_tag(text)
        xgr.limits.set_limits(max_json_nesting=3)
        cg = comp.compile_structural_tag(text)
        name = pool[0].tool["function"]["name"]
        assert xgr.GrammarMatcher(cg).accept_string(f'<function={name}>{{"a": [[1]]}}{END}')
        # a tag not seen before is read whole, and checked whole
        fresh = [_tag(pool[2])] + tags
        with pytest.raises(xgr.GrammarLimitError, match="max_json_nesting"):
            comp.compile_structural_tag(json.dumps({"type": "structural_tag", "format": _triggered(fresh)}))
    finally:
        xgr.limits.set_limits(**old)


# Templates whose tool tags sit in the top-level format's "tags" with JSON arguments (the
# content, or an element of a sequence content: Harmony's header then the arguments) are
# linked. Qwen3-Coder's arguments are XML (converted in the skeleton); DeepSeek V3.1 and
# Kimi wrap every call in one section tag, which is read whole.
@pytest.mark.parametrize("model, linked_tools", [("llama", True), ("harmony", True), ("qwen_3", True),
                                                 ("qwen_3_coder", False), ("deepseek_v3_1", False),
                                                 ("kimi", False)])
@pytest.mark.parametrize("as_dict", [False, True])
def test_model_templates_link_their_tools(model, linked_tools, as_dict, tok, pool):
    """A model template's structural tag (a pydantic model, or its dict) compiles through
    the linked path: a later tool list that shares tools hits the tag cache where the
    template's tool tags are linkable, and every mask along random walks equals the
    unlinked compile's."""
    comp = xgr.GrammarCompiler(tok)
    whole = xgr.GrammarCompiler(tok, cache_enabled=False)  # no cache: the unlinked path
    tools = [t.tool for t in pool[:6]]

    def tag(ts, choice="auto"):
        return xgr.structural_tag.get_model_structural_tag(model, tools=ts, tool_choice=choice, as_dict=as_dict)

    comp.compile_structural_tag(tag(tools[:4]))
    from xgrammar2.structural_tag.link import _Plain

    lowered = [e for e, _, _ in comp._tags._entries.values() if type(e) is not _Plain]
    assert len(lowered) == (4 if linked_tools else 0)  # one lowered tag per tool, or none
    hits = comp._tags.hits
    for i, t in enumerate((tag(tools[2:]), tag(tools[1:5], "required"))):
        linked, ref = comp.compile_structural_tag(t), whole.compile_structural_tag(t)
        assert comp._tags.hits > hits or not linked_tools, f"request {i}: no lowered tag reused"
        hits = comp._tags.hits
        _same_masks_along_walks(linked, ref, tok, f"{model}/{as_dict}/{i}")
