"""Every dispatch kind through SGLang's BaseGrammarBackend machinery (executor futures, cache,
NUL rejection), and the BaseGrammarObject contract of XGrammar2Grammar (accept / reject /
rollback / terminate / copy / masks on CPU tensors / batched fill)."""

from __future__ import annotations

import json
import time

import pytest

from sglang_harness import QWEN3_EOS, QWEN3_VOCAB, allowed, encode, is_allowed, require_sglang, walk

require_sglang()

import torch  # noqa: E402
from sglang.srt.constrained.base_grammar_backend import (  # noqa: E402
    GrammarMask,
    GrammarRow,
    InvalidGrammarObject,
)

from xgrammar2_sglang.grammar import XGrammar2Grammar  # noqa: E402

V = QWEN3_VOCAB
EOS = QWEN3_EOS[0]

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
    },
    "required": ["name", "age"],
}

QWEN_XML_TAG = {
    "type": "structural_tag",
    "format": {
        "type": "triggered_tags",
        "triggers": ["<tool_call>"],
        "tags": [{
            "type": "tag",
            "begin": "<tool_call>\n<function=get_weather>\n",
            "content": {"type": "json_schema", "style": "qwen_xml", "json_schema": {
                "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city", "days"]}},
            "end": "</function>\n</tool_call>",
        }],
        "at_least_one": True,
        "stop_after_first": True,
    },
}

# (key_type, key_string, a valid complete output)
VALID = [
    ("json", json.dumps(PERSON), '{"name": "Ada", "age": 36, "tags": ["a", "b"]}'),
    ("json", "$$ANY$$", '[1, {"x": null}, "s"]'),
    ("json", '{"type": "object"}', '{"k": [1, 2.5], "t": true}'),
    ("regex", r"(cat|dog)s? [0-9]{2,3}", "dogs 042"),
    ("ebnf", 'root ::= "SELECT " col (", " col)* " FROM " tbl\ncol ::= [a-z]+\ntbl ::= "t" [0-9]?', "SELECT ab, c FROM t7"),
    ("full_assistant_ebnf", 'root ::= "<think>" [a-z ]* "</think>" "ok"', "<think>hmm ok</think>ok"),
    ("ebnf", 'root ::= "n=" Regex("[1-9][0-9]*")', "n=1203"),
    ("structural_tag", json.dumps({
        "type": "structural_tag",
        "structures": [{"begin": "<tool_call>", "schema": {"type": "object", "properties": {"x": {"type": "integer"}},
                                                           "required": ["x"]}, "end": "</tool_call>"}],
        "triggers": ["<tool_call>"],
    }), 'Sure. <tool_call>{"x": 5}</tool_call> done'),
    ("structural_tag", json.dumps({
        "type": "structural_tag",
        "structures": [{"begin": "<f>", "schema": None, "end": "</f>"}],
        "triggers": ["<f>"], "at_least_one": True,
    }), '<f>{"any": [1]}</f>'),
    ("structural_tag", json.dumps(QWEN_XML_TAG),
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
     "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"),
    ("structural_tag", json.dumps({"type": "structural_tag", "format": {
        "type": "sequence", "elements": [
            {"type": "const_string", "value": "Answer: "},
            {"type": "any_text", "excludes": ["STOP"]},
            {"type": "const_string", "value": "STOP"}]}}), "Answer: forty two STOP"),
]


EMPTY_OK = 7


def _compile(backend, key_type, key_string):
    """Through SGLang's own path: get_cached_or_future_value -> executor -> dispatch."""
    value, hit = backend.get_cached_or_future_value((key_type, key_string), False)
    assert not hit
    return value.result(timeout=120)


@pytest.mark.parametrize("case", range(len(VALID)), ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(VALID)])
def test_dispatch_compiles_and_walks(backend, tokenizer, case):
    key_type, key_string, text = VALID[case]
    g = _compile(backend, key_type, key_string)
    assert isinstance(g, XGrammar2Grammar), g
    assert g.grammar_stats is not None and g.grammar_stats.compilation_time is not None
    rows = walk(g, tokenizer, text, V)
    # A constrained row (except free-text positions) must not allow everything.
    assert any(len(r) < 1000 for r in rows)
    # The stop token is masked until the output may end (only the legacy tag without
    # at_least_one accepts an empty output).
    assert (EOS in rows[0]) == (case == EMPTY_OK)
    assert EOS in rows[-1]


def test_invalid_grammars_become_invalid_objects(backend):
    cases = [
        ("json", "{not json"),
        ("json", json.dumps({"type": "object", "properties": {"a": {"type": "nonsense"}}})),
        ("regex", "(unclosed"),
        ("ebnf", "root ::= undefined_rule"),
        ("structural_tag", json.dumps({"type": "structural_tag", "format": {"type": "no_such_format"}})),
        ("structural_tag", "[1, 2]"),
    ]
    for key in cases:
        g = _compile(backend, *key)
        assert isinstance(g, InvalidGrammarObject), (key, g)
        assert g.error_message.startswith("xgrammar2: ") and len(g.error_message) > 12, g.error_message


def test_nul_bytes_rejected_before_dispatch(backend):
    g = _compile(backend, "json", json.dumps({"type": "string", "pattern": "a\u0000b"}))
    assert isinstance(g, InvalidGrammarObject) and "NUL" in g.error_message


def test_cache_hit_returns_fresh_copy(backend, tokenizer):
    key = ("regex", "[ab]{3}")
    g = _compile(backend, *key)
    backend.set_cache(key, g.copy())
    g.accept_token(encode(tokenizer, "a")[0])
    hit, was_hit = backend.get_cached_or_future_value(key, False)
    assert was_hit and isinstance(hit, XGrammar2Grammar) and hit is not g
    assert hit.ctx is g.ctx  # shares the compiled grammar
    assert hit.num_accepted == 0 and hit.grammar_stats.is_cache_hit
    walk(hit, tokenizer, "bab", V)


def test_accept_reject_rollback_terminate(backend, tokenizer):
    g = backend.dispatch_regex("ab(c|d)")
    a, b, c = (encode(tokenizer, s)[0] for s in "abc")
    g.accept_token(a)
    with pytest.raises(ValueError, match="rejected token"):
        g.accept_token(a)
    with pytest.raises(ValueError):
        g.accept_token(V + 5)  # out of the vocabulary: still only ValueError
    g.accept_token(b)
    g.accept_token(c)
    assert not g.is_terminated()
    g.accept_token(EOS)
    assert g.is_terminated()
    g.accept_token(a)  # no-op once terminated (as SGLang's xgrammar object)
    g.rollback(1)
    assert not g.is_terminated()
    g.rollback(2)
    mask = g.allocate_vocab_mask(vocab_size=V, batch_size=1, device="cpu")
    g.fill_vocab_mask(mask, 0)
    after_a = allowed(mask[0].numpy(), V)
    assert b in after_a and {tokenizer.decode([t]) for t in after_a} <= {"b", "bc", "bd"}
    fresh = g.copy()
    fresh.fill_vocab_mask(mask, 0)
    first = allowed(mask[0].numpy(), V)
    assert a in first and {tokenizer.decode([t]) for t in first} <= {"a", "ab", "abc", "abd"}


def test_mask_layout_and_apply_on_cpu(backend, tokenizer):
    g = backend.dispatch_regex("(yes|no)")
    mask = g.allocate_vocab_mask(vocab_size=V, batch_size=3, device="cpu")
    assert mask.dtype == torch.int32 and tuple(mask.shape) == (3, (V + 31) // 32)
    assert bool((mask == -1).all())
    g.fill_vocab_mask(mask, 1)
    assert bool((mask[0] == -1).all()) and bool((mask[2] == -1).all())  # other rows untouched
    ok = allowed(mask[1].numpy(), V)
    assert ok and all(tokenizer.decode([t]) in ("y", "ye", "yes", "n", "no") for t in ok), ok
    # Padding ids past the tokenizer (151669..151935) are never allowed.
    assert not any(is_allowed(mask[1], t) for t in range(151669, V))
    moved = g.move_vocab_mask(mask, "cpu")
    logits = torch.randn(3, V)
    before = logits.clone()
    GrammarMask(g, moved).apply(logits)  # keyword call, as SGLang's sampler does
    finite = set(torch.nonzero(torch.isfinite(logits[1])).flatten().tolist())
    assert finite == ok
    assert torch.equal(logits[0], before[0]) and torch.equal(logits[2], before[2])


def test_fill_vocab_mask_batched_matches_per_row(backend, tokenizer):
    keys = [("regex", "[0-9]+"), ("json", json.dumps(PERSON)), ("ebnf", 'root ::= "x" | "yz"'), ("regex", "a|b")]
    grammars = [_compile(backend, *k) for k in keys]
    grammars[1].accept_token(encode(tokenizer, "{")[0])
    done = grammars[3]
    done.accept_token(encode(tokenizer, "a")[0])
    done.accept_token(EOS)
    assert done.is_terminated()
    rows = [4, 0, 2, 5]
    batched = grammars[0].allocate_vocab_mask(vocab_size=V, batch_size=6, device="cpu")
    batched.zero_()
    XGrammar2Grammar.fill_vocab_mask_batched([GrammarRow(r, g) for r, g in zip(rows, grammars)], batched)
    single = grammars[0].allocate_vocab_mask(vocab_size=V, batch_size=6, device="cpu")
    for r, g in zip(rows[:3], grammars[:3]):
        g.fill_vocab_mask(single, r)
    for r in rows[:3]:
        assert torch.equal(batched[r], single[r]), r
    assert bool((batched[5] == -1).all())  # terminated: all allowed, as SGLang leaves it
    assert bool((batched[1] == 0).all()) and bool((batched[3] == 0).all())  # unlisted untouched


def test_whitespace_options(tokenizer, published):
    from xgrammar2_sglang.backend import XGrammar2GrammarBackend

    schema = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    compact = XGrammar2GrammarBackend(tokenizer, V, QWEN3_EOS, any_whitespace=False)
    walk(compact.dispatch_json(schema), tokenizer, '{"a": 1}', V)
    with pytest.raises(AssertionError, match="masked"):
        walk(compact.dispatch_json(schema), tokenizer, '{ "a": 1}', V)
    bounded = XGrammar2GrammarBackend(tokenizer, V, QWEN3_EOS, any_whitespace=True, max_whitespace_cnt=2)
    walk(bounded.dispatch_json(schema), tokenizer, '{\n "a":1}', V)
    with pytest.raises(AssertionError, match="masked"):
        walk(bounded.dispatch_json(schema), tokenizer, '{    "a": 1}', V)


def test_whitespace_bound_reaches_tool_call_tags(tokenizer, published, monkeypatch):
    """The json_schema contents of a tool-call tag get the engine's bound (default 16;
    XGRAMMAR2_SGLANG_MAX_WHITESPACE_CNT=none lifts it); a tag's own bound wins."""
    from xgrammar2_sglang.backend import XGrammar2GrammarBackend

    params = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    tag = {"type": "structural_tag", "format": {"type": "tag", "begin": "<f>",
                                                "content": {"type": "json_schema", "json_schema": params},
                                                "end": "</f>"}}
    call = "<f>{%s\"a\": 1}</f>"
    b = XGrammar2GrammarBackend(tokenizer, V, QWEN3_EOS)
    assert b.max_whitespace_cnt == 16
    walk(b.dispatch_structural_tag(json.dumps(tag)), tokenizer, call % (" " * 16), V)
    with pytest.raises(AssertionError, match="masked"):
        walk(b.dispatch_structural_tag(json.dumps(tag)), tokenizer, call % (" " * 17), V)
    compact = XGrammar2GrammarBackend(tokenizer, V, QWEN3_EOS, any_whitespace=False)
    walk(compact.dispatch_structural_tag(json.dumps(tag)), tokenizer, call % " ", V)
    with pytest.raises(AssertionError, match="masked"):
        walk(compact.dispatch_structural_tag(json.dumps(tag)), tokenizer, call % "  ", V)
    monkeypatch.setenv("XGRAMMAR2_SGLANG_MAX_WHITESPACE_CNT", "none")
    unbounded = XGrammar2GrammarBackend(tokenizer, V, QWEN3_EOS)
    assert unbounded.max_whitespace_cnt is None
    walk(unbounded.dispatch_structural_tag(json.dumps(tag)), tokenizer, call % (" " * 40), V)


def test_broken_tool_error_names_it(tokenizer, published):
    from sglang.srt.constrained.base_grammar_backend import InvalidGrammarObject

    from xgrammar2_sglang.backend import XGrammar2GrammarBackend

    good = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    bad = {"type": "object", "properties": {"u": {"type": "array", "enum": ["c", "f"]}}, "required": ["u"]}
    tags = [{"begin": f'<tool_call>{{"name": "{n}", "arguments": ', "end": "}</tool_call>",
             "content": {"type": "json_schema", "json_schema": p}} for n, p in (("a", good), ("b", good), ("set_units", bad))]
    tag = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<tool_call>"],
                                                "tags": [dict(t, type="tag") for t in tags]}}
    g = XGrammar2GrammarBackend(tokenizer, V, QWEN3_EOS).dispatch_structural_tag(json.dumps(tag))
    assert isinstance(g, InvalidGrammarObject)
    assert "tools[2] (function 'set_units')" in g.error_message, g.error_message


def test_unknown_format_compiles(tokenizer, published):
    from xgrammar2_sglang.backend import XGrammar2GrammarBackend

    b = XGrammar2GrammarBackend(tokenizer, V, QWEN3_EOS)
    schema = json.dumps({"type": "object", "properties": {"v": {"type": "string", "format": "semver"},
                                                          "n": {"type": "integer", "format": "int32"}},
                         "required": ["v", "n"]})
    g = b.dispatch_json(schema)
    walk(g, tokenizer, '{"v": "1.2.3", "n": 2147483647}', V)
    with pytest.raises(AssertionError, match="masked"):
        walk(b.dispatch_json(schema), tokenizer, '{"v": "1.2.3", "n": 2147483648}', V)


def test_new_grammars_build_masks_in_the_background(tokenizer, published, monkeypatch):
    """Each newly compiled grammar is handed to the background precompute (default K = 8),
    once; XGRAMMAR2_SGLANG_PRECOMPUTE_K=0 turns it off, and a bad value falls back to 8."""
    from xgrammar2_sglang.backend import XGrammar2GrammarBackend

    schema = json.dumps({"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"]})
    on = XGrammar2GrammarBackend(tokenizer, V, QWEN3_EOS)
    assert on.precompute_k == 8
    walk(on.dispatch_json(schema), tokenizer, '{"b": "x"}', V)
    bg = on.compiler._background
    assert bg is not None and bg.wait_idle(60) and bg.done == 1 and bg.failed == 0
    on.dispatch_json(schema)  # a compile-cache hit: nothing new to build
    assert bg.wait_idle(60) and bg.done == 1
    monkeypatch.setenv("XGRAMMAR2_SGLANG_PRECOMPUTE_K", "0")
    off = XGrammar2GrammarBackend(tokenizer, V, QWEN3_EOS)
    walk(off.dispatch_json(schema), tokenizer, '{"b": "x"}', V)
    assert off.precompute_k == 0 and off.compiler._background is None
    monkeypatch.setenv("XGRAMMAR2_SGLANG_PRECOMPUTE_K", "lots")
    assert XGrammar2GrammarBackend(tokenizer, V, QWEN3_EOS).precompute_k == 8


def test_compilation_releases_the_gil(tokenizer, published):
    """While the executor compiles, a pure-Python thread keeps running: the C core compiles
    with the GIL released. The grammar is large enough that compiling takes a while."""
    from xgrammar2_sglang.backend import XGrammar2GrammarBackend

    ebnf = "root ::= " + " | ".join(f'"k{i}" [a-z]* "{i}"' for i in range(1000))
    import xgrammar2 as xgr2

    fresh = XGrammar2GrammarBackend(tokenizer, V, QWEN3_EOS)
    # precompute: build every token-mask entry at compile time (all of it C work), so the
    # compile is long enough to observe; the default builds them lazily.
    fresh.compiler = xgr2.GrammarCompiler(
        fresh.tokenizer_info, precompute=True, cache_enabled=False, cross_grammar_cache=False
    )
    fut = fresh.executor.submit(fresh._init_value_dispatch, ("ebnf", ebnf), False)
    ticks = 0
    t0 = time.perf_counter()
    while not fut.done():
        ticks += 1
    elapsed = time.perf_counter() - t0
    g = fut.result()
    assert isinstance(g, XGrammar2Grammar)
    # With the GIL held for the whole compile the loop would barely run; released, it spins
    # freely. (A conservative bound: >= 20k iterations per second of compile time.)
    assert elapsed > 0.05, f"compile too fast to measure ({elapsed:.3f}s)"
    assert ticks / elapsed > 20000, (ticks, elapsed)


def test_concurrent_compiles_on_the_executor(backend, tokenizer):
    schemas = [json.dumps({"type": "object", "properties": {f"k{i}": {"type": "integer"}}, "required": [f"k{i}"]})
               for i in range(8)]
    futures = [backend.get_cached_or_future_value(("json", s), False)[0] for s in schemas]
    for i, f in enumerate(futures):
        g = f.result(timeout=120)
        walk(g, tokenizer, json.dumps({f"k{i}": i}), V)


def test_tokenizer_with_init_xgrammar(tokenizer, published):
    """SGLang's tiktoken / Mistral tokenizers build their own upstream TokenizerInfo
    (``init_xgrammar()``, raw byte pieces); the backend converts it (same bytes, same special
    ids, so the same vocabulary semantics as upstream) and honours the override stop tokens.
    Rows equal SGLang's xgrammar backend built from the same tokenizer object."""
    import xgrammar
    from sglang.srt.constrained.xgrammar_backend import XGrammarGrammarBackend

    from sglang_harness import classify_difference
    from xgrammar2_sglang.backend import XGrammar2GrammarBackend

    class WithInit:
        def init_xgrammar(self):
            info = xgrammar.TokenizerInfo.from_huggingface(tokenizer, vocab_size=V, stop_token_ids=QWEN3_EOS)
            return info, list(QWEN3_EOS)

    ours_b = XGrammar2GrammarBackend(WithInit(), V, None)
    ours_b.max_whitespace_cnt = None  # upstream's unbounded JSON whitespace, for parity
    up_b = XGrammarGrammarBackend(WithInit(), vocab_size=V)
    assert ours_b.override_stop_tokens == QWEN3_EOS
    assert ours_b.tokenizer_info.vocab_size == V
    for kind, spec, text in [("regex", "(yes|no) sir", "yes sir"),
                             ("json", json.dumps(PERSON), '{"name": "Zoë <|im_start|>", "age": 3}')]:
        ours = getattr(ours_b, f"dispatch_{kind}")(spec)
        up = getattr(up_b, f"dispatch_{kind}")(spec)
        mask = ours.allocate_vocab_mask(vocab_size=V, batch_size=2, device="cpu")
        for t in encode(tokenizer, text) + [EOS]:
            ours.fill_vocab_mask(mask, 0)
            up.fill_vocab_mask(mask, 1)
            a, b = allowed(mask[0].numpy(), V), allowed(mask[1].numpy(), V)
            kinds, rest_ours, rest_up = classify_difference(tokenizer, a - b, b - a, up)
            assert not rest_ours and not rest_up and kinds <= {"CR", "INVALID_UTF8"}, (kind, kinds)
            assert t in a
            ours.accept_token(t)
            up.accept_token(t)
        assert ours.is_terminated() and up.is_terminated()


def test_unsupported_tokenizer_falls_back_to_no_backend(published, model_path):
    """Like SGLang's xgrammar path: no grammar backend (the runtime config says 'none', and a
    warning is logged), not a crash."""
    from sglang.srt.runtime_context import get_exec

    from sglang_harness import publish_server_args
    from xgrammar2_sglang.backend import TokenizerNotSupportedError, XGrammar2GrammarBackend, create_backend

    class Unsupported:
        def init_xgrammar(self):
            return None, None

    with pytest.raises(TokenizerNotSupportedError):
        XGrammar2GrammarBackend(Unsupported(), V, None)
    try:
        assert create_backend(published, Unsupported(), V, None) is None
        assert get_exec().kernel.grammar_backend == "none"
    finally:
        publish_server_args(model_path, "--grammar-backend", "xgrammar2")  # undo the override
    assert get_exec().kernel.grammar_backend == "xgrammar2"
