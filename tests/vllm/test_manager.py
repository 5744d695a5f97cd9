"""vLLM's StructuredOutputManager driven with the xgrammar2 backend: validate -> bitmask ->
accept -> rollback flows for every request kind, stop tokens, special tokens, speculative
drafts (accepted, rejected, padded), mixed batches, the reasoning gate, concurrent
compilation, and compile errors that fail one request without hurting the engine."""

import json
import threading

import numpy as np
import pytest

from vllm_harness import SKIP_REASON, require_vllm, Harness, allowed, make_manager, make_vllm_config

require_vllm()

EOS = 2  # <|im_end|> in the tiny tokenizer
SPECIAL = (0, 1, 2)  # <|endoftext|>, <|im_start|>, <|im_end|>

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}},
    },
    "required": ["name", "age"],
}

CASES = [
    ("json", {"json": PERSON}, '{"name": "Ada <|im_start|> x", "age": 36, "tags": ["a", "c"]}'),
    ("json_str", {"json": json.dumps(PERSON)}, '{"name":"Bo","age":7}'),
    ("json_object", {"json_object": True}, '{"k": [1, 2.5, {"z": null}], "t": true}'),
    ("regex", {"regex": r"[0-9]{3}-[a-z]{2}"}, "332-wp"),
    ("grammar", {"grammar": 'root ::= "SELECT " col " FROM " tbl\ncol ::= [a-z]+\ntbl ::= "t" [0-9]?'},
     "SELECT abc FROM t7"),
    ("choice", {"choice": ["yes", "no", "maybe so"]}, "maybe so"),
    ("lark", {"grammar": 'start: "(" item ("," item)* ")"\nitem: DIGIT+\nDIGIT: "0".."9"\n'}, "(12,3,456)"),
]


def _walk(h: Harness, req, ids):
    """Feeds ``ids`` through the manager one step at a time, checking each is allowed."""
    g = req.structured_output_request.grammar
    for i, t in enumerate(ids):
        row = h.bitmask(req)[0]
        assert t in allowed(row, h.vocab_size), f"token {i} ({t}) masked"
        assert EOS not in allowed(row, h.vocab_size) or g.matcher.is_completed()
        assert h.manager.accept_tokens(req, [t])
    return g


@pytest.mark.parametrize("name, so, text", CASES, ids=[c[0] for c in CASES])
def test_flow_each_kind(harness, name, so, text):
    h = harness
    if name == "json" and "<|im_start|>" in text:
        # Special tokens never match text: the tokenizer maps the literal to the control
        # token, which the grammar must reject; spell it with ordinary tokens instead.
        ids = h.encode('{"name": "Ada ') + h.encode("<|im_") + h.encode('start|> x", "age": 36, "tags": ["a", "c"]}')
        ids = [t for t in ids if t not in SPECIAL]
    else:
        ids = h.encode(text)
    req = h.request(**so)
    g = _walk(h, req, ids)
    row = h.bitmask(req)[0]
    assert EOS in allowed(row, h.vocab_size)
    assert g.validate_tokens([EOS, 5]) == [EOS]  # stops after the terminating token
    assert not g.is_terminated()  # complete but not terminated until the stop token
    assert h.manager.accept_tokens(req, [EOS])
    assert g.is_terminated()
    assert g.validate_tokens([EOS]) == []
    assert h.manager.accept_tokens(req, [5, 6])  # ignored after termination
    assert (h.bitmask(req)[0] == -1).all()  # the manager unconstrains terminated rows


def test_rejected_token_fails_request_only(harness):
    h = harness
    req = h.request(regex="[0-9]+")
    g = req.structured_output_request.grammar
    bad = h.encode("x")[0]
    assert not h.manager.accept_tokens(req, [bad])
    assert not g.is_terminated()
    assert h.manager.accept_tokens(req, h.encode("12"))


def test_special_and_padding_ids_never_text(harness):
    h = harness
    req = h.request(json={"type": "string"})
    _walk(h, req, h.encode('"abc'))  # inside a string: any character may follow
    ok = allowed(h.bitmask(req)[0], h.vocab_size)
    assert not ok & set(SPECIAL), "control tokens must not match string content"
    assert not ok & set(range(2000, 2048)), "ids past the tokenizer must be masked"
    assert len(ok) > 1500  # nearly the whole text vocabulary


def test_stop_token_override(harness):
    """all_stop_token_ids replaces the default stop set: the user's stop id ends the grammar,
    EOS (not in the set) stays masked even where the grammar may end."""
    h = harness
    req = h.request(stop_token_ids=[1], regex="ab")
    g = req.structured_output_request.grammar
    _walk(h, req, h.encode("ab"))
    ok = allowed(h.bitmask(req)[0], h.vocab_size)
    assert 1 in ok and EOS not in ok and ok == {1}
    assert not g.accept_tokens(req.request_id, [EOS])
    assert h.manager.accept_tokens(req, [1]) and g.is_terminated()


def test_bitmask_rows_overwritten_in_place(harness):
    h = harness
    req = h.request(regex="[a-c]+")
    g = req.structured_output_request.grammar
    backend = h.manager.backend
    bm = backend.allocate_token_bitmask(3)
    assert bm.dtype.is_floating_point is False and str(bm.dtype) == "torch.int32"
    assert tuple(bm.shape) == (3, 64) and bm.is_contiguous() and (bm == -1).all()
    bm[1].fill_(0x5A5A5A5A)
    g.fill_bitmask(bm, 1)
    clean = backend.allocate_token_bitmask(3).zero_()
    g.fill_bitmask(clean, 1)
    assert (bm[1] == clean[1]).all()
    assert (bm[0] == -1).all() and (bm[2] == -1).all()  # other rows untouched


def test_mixed_batch_fast_path_equals_per_row(harness):
    """One grammar_bitmask call over a batch of different kinds (the batched C fill) gives the
    rows each grammar fills on its own."""
    h = harness
    reqs = []
    for name, so, text in CASES:
        req = h.request(**so)
        prefix = h.encode(text)[: max(1, len(h.encode(text)) // 2)]
        if name != "json":
            assert h.manager.accept_tokens(req, prefix)
        reqs.append(req)
    term = h.request(regex="a")
    h.manager.accept_tokens(term, h.encode("a") + [EOS])
    reqs.append(term)
    batch = h.bitmask(*reqs).copy()
    assert batch.shape == (len(reqs), 64)
    for i, req in enumerate(reqs):
        single = h.bitmask(req)[0]
        assert (batch[i] == single).all(), f"row {i} differs"
    assert (batch[-1] == -1).all()


def test_batch_fill_switch(model_config, registered):
    cfg = make_vllm_config(model_config)
    cfg.additional_config = {"xgrammar2": {"batch_fill": False, "max_whitespace_cnt": 2, "bogus": 1,
                                           "precompute_k": 0}}
    h = Harness(make_manager(cfg), model_config)
    a, b = h.request(regex="[0-9]+"), h.request(json={"type": "integer"})
    rows = h.bitmask(a, b).copy()
    backend = h.manager.backend
    assert backend.batch_fill is False and backend.max_whitespace_cnt == 2
    assert "bogus" not in backend.options
    assert backend.precompute_k == 0 and backend.compiler._background is None
    assert (rows[0] == h.bitmask(a)[0]).all() and (rows[1] == h.bitmask(b)[0]).all()


# ---- speculative decoding ---------------------------------------------------------------


@pytest.fixture(scope="module")
def spec_harness(model_config, registered):
    return Harness(make_manager(make_vllm_config(model_config, num_spec=3)), model_config)


def _expected_rows(h, so, accepted_prefix, draft):
    """Rows an independent fresh grammar gives after prefix + each draft prefix."""
    g = h.manager.backend.compile_grammar(
        *__import__("vllm.v1.structured_output.request", fromlist=["x"]).get_structured_output_key(
            h.params(**so).structured_outputs
        ),
        stop_token_ids={EOS},
    )
    assert g.accept_tokens("x", accepted_prefix)
    bm = h.manager.backend.allocate_token_bitmask(len(draft) + 1)
    for i, t in enumerate(draft):
        g.fill_bitmask(bm, i)
        assert g.accept_tokens("x", [t])
    g.fill_bitmask(bm, len(draft))
    return bm.numpy()


def test_spec_validate_and_bitmask(spec_harness):
    h = spec_harness
    so = {"regex": r"[0-9]{3}-[a-z]{2}"}
    req = h.request(**so)
    g = req.structured_output_request.grammar
    assert h.manager.backend.num_speculative_tokens == 3
    ids = [h.encode(c)[0] for c in "332-wp"]
    assert h.manager.accept_tokens(req, ids[:1])
    before = h.bitmask(req)[0].copy()
    bad = h.encode("x")[0]
    # validate: longest valid prefix, no state change
    assert h.manager.validate_tokens(req, [ids[1], ids[2], bad]) == [ids[1], ids[2]]
    assert h.manager.validate_tokens(req, ids[1:4]) == ids[1:4]
    assert h.manager.validate_tokens(req, [bad, ids[1]]) == []
    assert (h.bitmask(req)[0] == before).all()
    # bitmask with 3 valid drafts: 4 rows, then the state is rolled back
    draft = ids[1:4]
    rows = h.bitmask(req, spec={req.request_id: draft})
    assert rows.shape == (4, 64)
    assert (rows == _expected_rows(h, so, ids[:1], draft)).all()
    assert (h.bitmask(req)[0] == before).all()
    assert g.num_processed_tokens == 1
    # the scheduler then accepts the verified tokens (2 drafts + bonus)
    assert h.manager.accept_tokens(req, ids[1:4])
    assert g.num_processed_tokens == 4
    g.rollback(2)  # rollback recomputes state
    assert g.num_processed_tokens == 2
    assert h.manager.accept_tokens(req, ids[2:6] + [EOS]) and g.is_terminated()
    g.rollback(1)
    assert not g.is_terminated()


def test_spec_rejected_draft_and_padding(spec_harness):
    h = spec_harness
    req = h.request(regex="[0-9]+")
    d = [h.encode(c)[0] for c in "12"]
    bad = h.encode("x")[0]
    # the manager normally cuts drafts to the valid prefix; if a bad one slips through, the
    # rows after it repeat the last valid row (no unconstrained rows)
    rows = h.bitmask(req, spec={req.request_id: [d[0], bad, d[1]]}).copy()
    assert (rows[2] == rows[1]).all() and (rows[3] == rows[1]).all()
    assert not (rows[1] == -1).all()
    # -1 padding: rows after the pad are all-ones
    rows = h.bitmask(req, spec={req.request_id: [d[0], -1, -1]}).copy()
    assert not (rows[0] == -1).all() and not (rows[1] == -1).all()
    assert (rows[2] == -1).all() and (rows[3] == -1).all()
    g = req.structured_output_request.grammar
    assert g.num_processed_tokens == 0 and g.validate_tokens([d[0], -1]) == [d[0]]


def test_spec_terminating_draft(spec_harness):
    h = spec_harness
    req = h.request(regex="ab")
    a, b = h.encode("a")[0], h.encode("b")[0]
    assert h.manager.validate_tokens(req, [a, b, EOS]) == [a, b, EOS]
    rows = h.bitmask(req, spec={req.request_id: [a, b, EOS]})
    assert allowed(rows[2], h.vocab_size) == {EOS}
    g = req.structured_output_request.grammar
    assert not g.is_terminated() and g.num_processed_tokens == 0


# ---- reasoning gate ---------------------------------------------------------------------


def test_reasoning_gate(model_config, registered):
    h = Harness(make_manager(make_vllm_config(model_config, reasoning_parser="deepseek_r1")), model_config)
    tok = h.tokenizer
    think_end = tok.convert_tokens_to_ids("</think>")
    req = h.request(regex="[0-9]+")
    # while reasoning: unconstrained rows, tokens not fed to the grammar
    assert (h.bitmask(req)[0] == -1).all()
    assert h.manager.accept_tokens(req, h.encode("hmm, let me think"))
    g = req.structured_output_request.grammar
    assert g.num_processed_tokens == 0
    # the end marker switches the constraint on; tokens after it in the same step are fed
    assert h.manager.accept_tokens(req, [think_end] + h.encode("4"))
    assert g.num_processed_tokens == 1
    ok = allowed(h.bitmask(req)[0], h.vocab_size)
    assert h.encode("2")[0] in ok and h.encode("x")[0] not in ok


# ---- compilation ------------------------------------------------------------------------


def test_concurrent_compilation_matches_serial(harness):
    backend = harness.manager.backend
    from vllm.v1.structured_output.backend_types import StructuredOutputOptions as O

    specs = [(O.JSON, json.dumps({"type": "object", "properties": {f"k{i}": {"type": "integer"}},
                                  "required": [f"k{i}"]})) for i in range(12)]
    specs += [(O.REGEX, f"[a-f]{{{i}}}x") for i in range(1, 7)]
    specs += [(O.GRAMMAR, f'root ::= "v{i}" [0-9]*') for i in range(6)]
    results = [None] * len(specs)
    errors = []

    def work(i):
        try:
            g = backend.compile_grammar(*specs[i], stop_token_ids={EOS})
            bm = backend.allocate_token_bitmask(1)
            g.fill_bitmask(bm, 0)
            results[i] = bm.numpy().copy()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(specs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    for i, spec in enumerate(specs):
        g = backend.compile_grammar(*spec, stop_token_ids={EOS})
        bm = backend.allocate_token_bitmask(1)
        g.fill_bitmask(bm, 0)
        assert (bm.numpy() == results[i]).all()


def test_compile_error_fails_only_that_request(harness):
    """A grammar that passes validation but fails in the engine (simulated by bypassing the
    validator) ends as an exception on its future; other requests keep working."""
    from vllm.sampling_params import SamplingParams, StructuredOutputsParams
    from vllm.v1.request import Request

    h = harness
    sp = SamplingParams(structured_outputs=StructuredOutputsParams(regex="("), max_tokens=8)
    sp.structured_outputs._backend = "xgrammar2"
    sp.all_stop_token_ids.add(EOS)
    req = Request("bad-1", [5], sp, None)
    h.manager.grammar_init(req)
    res = h.wait(req)
    assert isinstance(res, Exception) and "parenthesis is not closed" in str(res)
    ok = h.request(regex="[0-9]")
    assert allowed(h.bitmask(ok)[0], h.vocab_size)


def test_json_whitespace_options(model_config, registered):
    h = Harness(make_manager(make_vllm_config(model_config, disable_any_whitespace=True)), model_config)
    req = h.request(json={"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    _walk(h, req, h.encode('{"a":1'))
    ok = allowed(h.bitmask(req)[0], h.vocab_size)
    assert h.encode("}")[0] in ok and h.encode(" ")[0] not in ok
    with pytest.raises(AssertionError):
        _walk(h, h.request(json={"type": "object"}), h.encode('{ "a": 1}'))


def test_whitespace_bounded_by_default_everywhere(model_config, registered):
    """Default options: at most 16 whitespace characters in a row in JSON requests and in
    the json_schema contents of structural tags; max_whitespace_cnt null lifts the bound;
    disable_any_whitespace makes tag contents compact too."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    tag = {"type": "structural_tag", "format": {"type": "tag", "begin": "<f>",
                                                "content": {"type": "json_schema", "json_schema": schema},
                                                "end": "</f>"}}
    h = Harness(make_manager(make_vllm_config(model_config)), model_config)
    for so, text in (({"json": schema}, '{%s"a": 1}'), ({"structural_tag": json.dumps(tag)}, '<f>{%s"a": 1}</f>')):
        _walk(h, h.request(**so), h.encode(text % (" " * 16)))
        with pytest.raises(AssertionError, match="masked"):
            _walk(h, h.request(**so), h.encode(text % (" " * 17)))
    assert h.manager.backend.max_whitespace_cnt == 16
    cfg = make_vllm_config(model_config)
    cfg.additional_config = {"xgrammar2": {"max_whitespace_cnt": None}}
    h = Harness(make_manager(cfg), model_config)
    _walk(h, h.request(structural_tag=json.dumps(tag)), h.encode('<f>{%s"a": 1}</f>' % (" " * 40)))
    h = Harness(make_manager(make_vllm_config(model_config, disable_any_whitespace=True)), model_config)
    _walk(h, h.request(structural_tag=json.dumps(tag)), h.encode('<f>{"a":1}</f>'))
    with pytest.raises(AssertionError, match="masked"):
        _walk(h, h.request(structural_tag=json.dumps(tag)), h.encode('<f>{"a": 1}</f>'))


def test_broken_tool_is_refused_naming_it(harness):
    """Validation (the API server's 400) names the tool, not the tag index alone."""
    from vllm.exceptions import VLLMValidationError

    good = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    bad = {"type": "object", "properties": {"u": {"type": "array", "enum": ["c", "f"]}}, "required": ["u"]}
    tag = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [
        {"type": "tag", "begin": f'<tool_call>{{"name": "{n}", "arguments": ', "end": "}</tool_call>",
         "content": {"type": "json_schema", "json_schema": p}}
        for n, p in (("a", good), ("b", good), ("set_units", bad))]}}
    with pytest.raises(VLLMValidationError) as ei:
        harness.params(structural_tag=json.dumps(tag))
    assert "tools[2] (function 'set_units')" in str(ei.value), str(ei.value)


def test_unknown_format_compiles_and_lenient_option(model_config, registered):
    h = Harness(make_manager(make_vllm_config(model_config)), model_config)
    req = h.request(json={"type": "object", "properties": {"v": {"type": "string", "format": "semver"}},
                          "required": ["v"]})
    assert any("semver" in w for w in req.structured_output_request.grammar.ctx.warnings)
    _walk(h, req, h.encode('{"v": "x"}'))
    from xgrammar2_vllm.backend import _read_options

    cfg = make_vllm_config(model_config)
    cfg.additional_config = {"xgrammar2": {"lenient": True}}
    assert _read_options(cfg)["lenient"] is True
    assert make_manager(cfg) is not None


# ---- structural tags (tool calling) -----------------------------------------------------


HERMES_REQUIRED = {
    "type": "structural_tag",
    "format": {
        "type": "tags_with_separator",
        "tags": [{
            "type": "tag",
            "begin": '<tool_call>\n{"name": "get_weather", "arguments": ',
            "content": {"type": "json_schema", "style": "json", "json_schema": {
                "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
            "end": "}\n</tool_call>",
        }],
        "separator": "",
        "at_least_one": True,
        "stop_after_first": False,
    },
}


def test_structural_tag_tool_call_flow(harness):
    """The constraint vLLM builds for hermes tool_choice='required' (see vllm-integration.md)."""
    h = harness
    req = h.request(structural_tag=json.dumps(HERMES_REQUIRED))
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    g = _walk(h, req, h.encode(text))
    assert EOS in allowed(h.bitmask(req)[0], h.vocab_size)
    assert h.manager.accept_tokens(req, [EOS]) and g.is_terminated()
    bad = h.request(structural_tag=json.dumps(HERMES_REQUIRED))
    assert h.manager.validate_tokens(bad, h.encode("Sure! <tool_call>")) == []


def test_structural_tag_names_control_token(harness):
    """A tag that spells a control token may produce it there (as a token terminal); other
    control tokens stay masked, and so does the named one anywhere else."""
    h = harness
    tag = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "const_string", "value": "<|im_start|>"}, {"type": "any_text"}]}}
    req = h.request(structural_tag=json.dumps(tag))
    ok = allowed(h.bitmask(req)[0], h.vocab_size)
    assert 1 in ok and not ok & {0, 2}, "the named control token may start the output"
    assert all(h.tokenizer.decode([t]) and "<|im_start|>".startswith(h.tokenizer.decode([t])) for t in ok - {1})
    assert h.manager.accept_tokens(req, [1])
    ok = allowed(h.bitmask(req)[0], h.vocab_size)
    assert 0 not in ok and len(ok) > 1500  # <|endoftext|> is still a control token
    assert 1 not in ok  # only where the tag spells it: never inside its free text
    assert h.manager.backend.compiler_for_tag(tag) is h.manager.backend.compiler  # no vocabulary view


def test_parallel_fill_path_with_reasoning(model_config, registered):
    """> 128 requests with a reasoning parser: vLLM's own parallel path (batches of 16 on its
    thread pool) runs, and each batch is one xgrammar2 batch fill; gated rows stay -1."""
    h = Harness(make_manager(make_vllm_config(model_config, reasoning_parser="deepseek_r1",
                                              max_num_seqs=256)), model_config)
    think_end = h.tokenizer.convert_tokens_to_ids("</think>")
    reqs = []
    for i in range(140):
        req = h.request(regex=f"[0-9]{{{1 + i % 5}}}x" if i % 2 else "[a-z]+", reasoning_ended=(i % 3 != 0) or None)
        if i % 7 == 0:
            h.manager.accept_tokens(req, [think_end])
        reqs.append(req)
    rows = h.bitmask(*reqs).copy()
    assert rows.shape == (140, 64)
    for i, req in enumerate(reqs):
        g = req.structured_output_request.grammar
        gated = req.structured_output_request.reasoning_ended is not True
        if gated:
            assert (rows[i] == -1).all(), i
        else:
            bm = h.manager.backend.allocate_token_bitmask(1)
            g.fill_bitmask(bm, 0)
            assert (rows[i] == bm.numpy()[0]).all(), i


def test_new_grammars_build_masks_in_the_background(model_config, registered):
    """By default each newly compiled grammar is handed to the background precompute (its
    K most expensive mask entries are built while the request waits for prefill), once:
    a second request with the same schema hits the compile cache and queues nothing."""
    h = Harness(make_manager(make_vllm_config(model_config)), model_config)
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    first = h.request(json=schema)
    backend = h.manager.backend
    assert backend.precompute_k == 8
    bg = backend.compiler._background
    assert bg is not None and bg.wait_idle(60)
    assert bg.done == 1 and bg.failed == 0
    h.request(json=schema)
    assert bg.wait_idle(60) and bg.done == 1
    row = h.bitmask(first)[0]
    assert (row != 0).any()


def test_precompute_k_option_is_checked():
    """precompute_k takes 0 (off) and up; a negative, fractional or boolean value is logged
    and ignored, like every other malformed option."""
    from types import SimpleNamespace

    from xgrammar2_vllm.backend import _read_options

    def read(v):
        return _read_options(SimpleNamespace(additional_config={"xgrammar2": {"precompute_k": v}}))

    assert read(0) == {"precompute_k": 0} and read(3) == {"precompute_k": 3}
    assert read(-1) == {} and read(2.5) == {} and read(True) == {}
