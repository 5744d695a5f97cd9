"""The backend built at engine start (patches.start_backend_setup / take_backend) and the API
server's validation memo (validate.py)."""

import concurrent.futures
import json
import logging
import types

import pytest

from vllm_harness import Harness, make_manager, make_vllm_config, require_vllm

require_vllm()


# ---- the backend built when the StructuredOutputManager is created --------------------


def test_manager_builds_backend_at_start(registered, vllm_config, model_config, monkeypatch, caplog):
    from xgrammar2_vllm import backend as backend_mod
    from xgrammar2_vllm import patches

    monkeypatch.setattr(patches, "LOG_TIMES", True)
    monkeypatch.setattr(backend_mod, "LOG_TIMES", True)
    with caplog.at_level(logging.INFO, logger="vllm.xgrammar2_vllm"):
        m = make_manager(vllm_config)
        fut = getattr(m, patches._PENDING)
        assert isinstance(fut, concurrent.futures.Future)
        assert m.backend is None  # vLLM's own state is untouched until a request comes
        built = fut.result(timeout=300)
        assert isinstance(built, backend_mod.Xgrammar2Backend) and built.built_at_start
        # built on the set-up thread, not on the request
        assert "thread xgrammar2-backend-setup" in caplog.text, caplog.text
        h = Harness(m, model_config)
        req = h.request(json={"type": "object", "properties": {"eager": {"type": "integer"}}})
    assert m.backend is built
    assert getattr(m, patches._PENDING) is None
    assert "first request waited" in caplog.text, caplog.text
    assert req.structured_output_request.grammar.matcher is not None
    # a second request uses the same backend
    h.request(regex="[ab]+")
    assert m.backend is built


def test_no_eager_build_for_other_backends(registered, model_config):
    from xgrammar2_vllm import patches

    m = make_manager(make_vllm_config(model_config, backend="xgrammar"))
    assert getattr(m, patches._PENDING, None) is None


def test_eager_build_can_be_turned_off(registered, vllm_config, model_config, monkeypatch):
    from xgrammar2_vllm import patches

    monkeypatch.setattr(patches, "EAGER", False)
    m = make_manager(vllm_config)
    assert getattr(m, patches._PENDING, None) is None
    Harness(m, model_config).request(regex="[0-9]+")
    assert m.backend is not None and not m.backend.built_at_start  # built by the request


def test_failed_background_build_is_retried_for_the_request(registered, monkeypatch, caplog):
    """An error of the background build is not lost: the first request builds again (and
    fails there, as without the eager build, if the error persists)."""
    from xgrammar2_vllm import patches

    fut = concurrent.futures.Future()
    fut.set_exception(RuntimeError("tokenizer exploded"))
    manager = types.SimpleNamespace(vllm_config="cfg", tokenizer="tok")
    setattr(manager, patches._PENDING, fut)
    calls = []
    monkeypatch.setattr(patches, "make_backend", lambda cfg, tok: calls.append((cfg, tok)) or "fresh")
    with caplog.at_level(logging.WARNING, logger="vllm.xgrammar2_vllm"):
        assert patches.take_backend(manager) == "fresh"
    assert calls == [("cfg", "tok")]
    assert "tokenizer exploded" in caplog.text
    # nothing pending: built for the request
    assert patches.take_backend(manager) == "fresh" and len(calls) == 2


def test_start_skips_without_tokenizer(registered, vllm_config):
    from xgrammar2_vllm import patches

    m = types.SimpleNamespace(vllm_config=vllm_config, tokenizer=None, backend=None)
    assert patches.start_backend_setup(m) is None  # skip_tokenizer_init: nothing to build


# ---- validation memo ---------------------------------------------------------------------


def _tools_tag(n):
    tags = [{"type": "tag", "begin": f"<f{i}>", "end": "</f>",
             "content": {"type": "json_schema", "json_schema": {
                 "type": "object", "properties": {f"a{i}": {"type": "integer"}}, "required": [f"a{i}"]}}}
            for i in range(n)]
    return json.dumps({"type": "structural_tag",
                       "format": {"type": "triggered_tags", "triggers": ["<f"], "tags": tags}})


def test_validation_memo_converts_a_repeated_request_once(harness, monkeypatch):
    from xgrammar2_vllm import validate

    # an empty memo, and no cache directory: this pins the in-process memo (the directory's
    # markers, which keep accepted requests across configure/restarts, are pinned in test_plugin)
    validate.configure({"cache_dir": "off"})
    calls = {"tag": 0, "ebnf": 0}
    real_tag, real_ebnf = validate.xgr2.Grammar.from_structural_tag, validate.xgr2.Grammar.from_ebnf

    def count_tag(*a, **k):
        calls["tag"] += 1
        return real_tag(*a, **k)

    def count_ebnf(*a, **k):
        calls["ebnf"] += 1
        return real_ebnf(*a, **k)

    monkeypatch.setattr(validate.xgr2.Grammar, "from_structural_tag", staticmethod(count_tag))
    monkeypatch.setattr(validate.xgr2.Grammar, "from_ebnf", staticmethod(count_ebnf))
    tag = _tools_tag(3)
    for _ in range(3):
        harness.params(structural_tag=tag)
    assert calls["tag"] == 1
    calls["ebnf"] = 0  # (a structural tag's conversion may parse EBNF too)
    for _ in range(3):
        harness.params(choice=["memo-a", "memo-b"])
    assert calls["ebnf"] == 1
    # new options (configure): validated again
    validate.configure({"cache_dir": "off"})
    harness.params(structural_tag=tag)
    assert calls["tag"] == 2


def test_validation_memo_never_remembers_a_refusal(harness):
    from xgrammar2_vllm import validate

    validate.configure({})
    bogus = json.dumps({"type": "structural_tag", "format": {"type": "bogus"}})
    for _ in range(2):  # refused every time, with the same message
        with pytest.raises(Exception, match=r"xgrammar2: invalid structural tag.*\$\.format\.type"):
            harness.params(structural_tag=bogus)
    for _ in range(2):
        with pytest.raises(Exception, match="xgrammar2: invalid regex"):
            harness.params(regex="(")
    ok = _tools_tag(1)
    harness.params(structural_tag=ok)
    with pytest.raises(Exception, match="invalid structural tag"):
        harness.params(structural_tag=bogus)  # a remembered success changes nothing else


def test_validation_memo_is_bounded(harness, monkeypatch):
    from xgrammar2_vllm import validate

    validate.configure({})
    monkeypatch.setattr(validate, "_CACHE_SIZE", 4)
    for i in range(10):
        harness.params(regex=f"memo{i}[0-9]")
    assert len(validate._ok) == 4
    assert ("regex", "memo9[0-9]") in validate._ok and ("regex", "memo0[0-9]") not in validate._ok


def test_thread_that_cannot_start_leaves_the_lazy_path(registered, vllm_config, model_config,
                                                       monkeypatch, caplog):
    from xgrammar2_vllm import patches

    class NoThread:
        def __init__(self, *a, **k):
            pass

        def start(self):
            raise RuntimeError("can't start new thread")

    monkeypatch.setattr(patches.threading, "Thread", NoThread)
    with caplog.at_level(logging.WARNING, logger="vllm.xgrammar2_vllm"):
        m = make_manager(vllm_config)
    assert "could not start the backend set-up" in caplog.text
    assert getattr(m, patches._PENDING, None) is None  # nothing for the request to wait on
    monkeypatch.undo()
    Harness(m, model_config).request(regex="[xy]+")
    assert m.backend is not None and not m.backend.built_at_start
