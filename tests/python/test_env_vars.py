"""Environment variables given values that are not theirs (xgrammar2.envvars): a switch takes
1/0, true/false, on/off, yes/no in any case; a number takes an integer at or above its minimum;
anything else gets one warning naming the variable and the value, and the default applies —
never a silent change of meaning, never a crash. Covers the engine's XGRAMMAR2_CACHE_LAYERS and
XGRAMMAR2_CACHE_MMAP and the switches of the vLLM and SGLang plugins that import without vLLM
or SGLang (their parsing is xgrammar2.envvars; the modules that need vLLM / SGLang are tested
in tests/vllm and tests/sglang)."""

import importlib
import logging
import os
import sys
import warnings

import pytest

from xgrammar2 import disk_cache as dcm
from xgrammar2 import disk_layers as dlm
from xgrammar2 import envvars

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRUE = ["1", "true", "TRUE", "On", "yes", " YES ", "tRuE"]
FALSE = ["0", "false", "False", "OFF", "no", " No\n"]
GARBAGE = ["2", "enable", "disabled", "tru", "-1", "y", "n", "1.0", "none"]


@pytest.fixture(autouse=True)
def _fresh_warnings():
    envvars._warned.clear()
    yield
    envvars._warned.clear()


def _flag(monkeypatch, value, default):
    monkeypatch.setenv("XGR2_TEST_FLAG", value)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = envvars.env_flag("XGR2_TEST_FLAG", default)
    return got, [str(x.message) for x in w if issubclass(x.category, RuntimeWarning)]


@pytest.mark.parametrize("default", [True, False])
def test_flag_accepted_values(monkeypatch, default):
    for v in TRUE:
        assert _flag(monkeypatch, v, default) == (True, [])
    for v in FALSE:
        assert _flag(monkeypatch, v, default) == (False, [])
    for v in ("", "  "):  # empty: unset
        assert _flag(monkeypatch, v, default) == (default, [])
    monkeypatch.delenv("XGR2_TEST_FLAG")
    assert envvars.env_flag("XGR2_TEST_FLAG", default) is default


@pytest.mark.parametrize("default", [True, False])
def test_flag_garbage_warns_once_and_keeps_default(monkeypatch, default):
    for v in GARBAGE:
        got, msgs = _flag(monkeypatch, v, default)
        assert got is default
        assert len(msgs) == 1 and "XGR2_TEST_FLAG" in msgs[0] and repr(v) in msgs[0], msgs
        assert ("on" if default else "off") in msgs[0]
        assert _flag(monkeypatch, v, default) == (default, [])  # once per value


def test_flag_through_a_logger(monkeypatch, caplog):
    log = logging.getLogger("xgr2.test.env")
    monkeypatch.setenv("XGR2_TEST_FLAG", "sure")
    with caplog.at_level(logging.WARNING, logger="xgr2.test.env"):
        assert envvars.env_flag("XGR2_TEST_FLAG", False, logger=log) is False
        assert envvars.env_flag("XGR2_TEST_FLAG", False, logger=log) is False
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 1 and "XGR2_TEST_FLAG='sure'" in msgs[0]


def test_int_values(monkeypatch):
    def get(value, **kw):
        monkeypatch.setenv("XGR2_TEST_INT", value)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            got = envvars.env_int("XGR2_TEST_INT", 7, **kw)
        return got, [str(x.message) for x in w]

    assert get("12") == (12, [])
    assert get(" 0 ") == (0, [])
    assert get("") == (7, [])
    assert get("NONE", words={"none": None}) == (None, [])
    for bad, kw in (("-3", {}), ("0", {"minimum": 1}), ("12MB", {}), ("1e3", {}), ("none", {}), ("x", {"words": {"none": None}})):
        got, msgs = get(bad, **kw)
        assert got == 7 and len(msgs) == 1 and "XGR2_TEST_INT" in msgs[0] and repr(bad) in msgs[0], (bad, msgs)
        assert "using 7" in msgs[0]


def test_cache_layers_switch(monkeypatch):
    """XGRAMMAR2_CACHE_LAYERS: the old reading took any value but 0/off/false/no as on, with
    no word said; now a value that is no switch is named in a warning (and leaves them on)."""
    for v, on in (("1", True), ("0", False), ("OFF", False), ("no", False), ("yes", True), ("", True)):
        monkeypatch.setenv(dlm.ENV_CACHE_LAYERS, v)
        assert dlm.LayerStore(object()).enabled is on, v
    monkeypatch.setenv(dlm.ENV_CACHE_LAYERS, "disable")
    with pytest.warns(RuntimeWarning, match="XGRAMMAR2_CACHE_LAYERS='disable'"):
        assert dlm.LayerStore(object()).enabled is True


def test_cache_mmap_switch(monkeypatch):
    for v, on in (("1", True), ("false", False), ("Off", False), ("", True)):
        monkeypatch.setenv(dcm.ENV_CACHE_MMAP, v)
        assert dcm._pack_mmap() is on, v
    monkeypatch.setenv(dcm.ENV_CACHE_MMAP, "copy")
    with pytest.warns(RuntimeWarning, match="XGRAMMAR2_CACHE_MMAP='copy'"):
        assert dcm._pack_mmap() is True
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dcm._pack_mmap() is True  # once


def _plugin(monkeypatch, folder, module):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "plugins", folder))
    mod = importlib.import_module(module)
    return importlib.reload(mod)


def test_vllm_switches(monkeypatch, caplog):
    """XGRAMMAR2_VLLM_EAGER / _LOG_TIMES / _FORCE: "false" used to mean on for EAGER and
    LOG_TIMES (anything but 0) and off for FORCE only by luck (anything but 1); garbage was
    taken silently."""
    pkg = _plugin(monkeypatch, "vllm", "xgrammar2_vllm")
    monkeypatch.setenv("XGRAMMAR2_VLLM_EAGER", "false")
    monkeypatch.setenv("XGRAMMAR2_VLLM_LOG_TIMES", "0")
    patches = _plugin(monkeypatch, "vllm", "xgrammar2_vllm.patches")
    assert patches.EAGER is False and patches.LOG_TIMES is False
    monkeypatch.setenv("XGRAMMAR2_VLLM_EAGER", "ON")
    monkeypatch.setenv("XGRAMMAR2_VLLM_LOG_TIMES", "lots")
    with caplog.at_level(logging.WARNING, logger="vllm.xgrammar2_vllm"):
        patches = _plugin(monkeypatch, "vllm", "xgrammar2_vllm.patches")
    assert patches.EAGER is True and patches.LOG_TIMES is False
    assert [r.getMessage() for r in caplog.records] == [
        "xgrammar2: XGRAMMAR2_VLLM_LOG_TIMES='lots' is not a switch (1/0, true/false, on/off, yes/no); using off"]
    for v, on in (("1", True), ("yes", True), ("TRUE", True), ("0", False), ("", False)):
        monkeypatch.setenv("XGRAMMAR2_VLLM_FORCE", v)
        assert pkg._force() is on, v
    caplog.clear()
    monkeypatch.setenv("XGRAMMAR2_VLLM_FORCE", "please")
    with caplog.at_level(logging.WARNING, logger="vllm.xgrammar2_vllm"):
        assert pkg._force() is False
    assert "XGRAMMAR2_VLLM_FORCE='please'" in caplog.text


def test_sglang_switches(monkeypatch, caplog):
    """XGRAMMAR2_SGLANG_INFER_TYPES / _TEMPLATE_TURN_GRAMMAR (anything but 0 was on) and
    _FORCE (only 1 was on)."""
    pkg = _plugin(monkeypatch, "sglang", "xgrammar2_sglang")
    monkeypatch.setenv("XGRAMMAR2_SGLANG_INFER_TYPES", "off")
    monkeypatch.setenv("XGRAMMAR2_SGLANG_TEMPLATE_TURN_GRAMMAR", "no")
    sc = _plugin(monkeypatch, "sglang", "xgrammar2_sglang.schema_compat")
    hooks = _plugin(monkeypatch, "sglang", "xgrammar2_sglang.hooks")
    assert sc.INFER_TYPES is False and hooks.TEMPLATE_TURN_GRAMMAR is False
    monkeypatch.setenv("XGRAMMAR2_SGLANG_INFER_TYPES", "maybe")
    with caplog.at_level(logging.WARNING, logger="sglang.xgrammar2_sglang"):
        sc = _plugin(monkeypatch, "sglang", "xgrammar2_sglang.schema_compat")
    assert sc.INFER_TYPES is True
    assert "XGRAMMAR2_SGLANG_INFER_TYPES='maybe'" in caplog.text
    for v, on in (("1", True), ("on", True), ("0", False), ("", False)):
        monkeypatch.setenv("XGRAMMAR2_SGLANG_FORCE", v)
        assert pkg._force() is on, v
    monkeypatch.delenv("XGRAMMAR2_SGLANG_INFER_TYPES")
    monkeypatch.delenv("XGRAMMAR2_SGLANG_TEMPLATE_TURN_GRAMMAR")
    _plugin(monkeypatch, "sglang", "xgrammar2_sglang.schema_compat")  # leave the defaults loaded
    _plugin(monkeypatch, "sglang", "xgrammar2_sglang.hooks")


@pytest.fixture
def sglang_backend(monkeypatch):
    """(xgrammar2_sglang.backend, xgrammar2_sglang.grammar) over a stand-in for the one SGLang
    module they import (the classes they subclass; nothing of them runs here); both are
    dropped from sys.modules afterwards."""
    import types

    stub = types.ModuleType("sglang.srt.constrained.base_grammar_backend")
    for name in ("BaseGrammarBackend", "BaseGrammarObject", "GrammarStats", "InvalidGrammarObject", "GrammarRow"):
        setattr(stub, name, type(name, (), {}))
    for name in ("sglang", "sglang.srt", "sglang.srt.constrained"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, stub.__name__, stub)
    _plugin(monkeypatch, "sglang", "xgrammar2_sglang")
    mods = ("xgrammar2_sglang.backend", "xgrammar2_sglang.grammar", "xgrammar2_sglang.masks")
    for name in mods:
        sys.modules.pop(name, None)
    try:
        yield importlib.import_module(mods[0]), importlib.import_module(mods[1])
    finally:
        for name in mods:
            sys.modules.pop(name, None)


def test_sglang_numbers(monkeypatch, caplog, sglang_backend):
    """XGRAMMAR2_SGLANG_MAX_WHITESPACE_CNT / _FILL_THREADS / _CACHE_MB / _CACHE_DIR_MB: a value
    that is no number (or under its minimum) was ignored without a word (FILL_THREADS, the two
    budgets) or logged on every backend; now it is logged once, naming it."""
    backend, grammar = sglang_backend
    default_ws = backend.xgr2.serving.DEFAULT_MAX_WHITESPACE_CNT
    for v, want in (("", default_ws), ("4", 4), ("None", None), ("unbounded", None)):
        monkeypatch.setenv("XGRAMMAR2_SGLANG_MAX_WHITESPACE_CNT", v)
        assert backend._whitespace_bound(None) == want, v
    assert backend._whitespace_bound(3) == 3  # SGLang's option first
    monkeypatch.setenv("XGRAMMAR2_SGLANG_FILL_THREADS", "3")
    assert grammar._fill_threads() == 3
    monkeypatch.setenv("XGRAMMAR2_SGLANG_CACHE_MB", "2")
    assert backend._env_mib("XGRAMMAR2_SGLANG_CACHE_MB") == 2 << 20
    bad = {"XGRAMMAR2_SGLANG_MAX_WHITESPACE_CNT": "0", "XGRAMMAR2_SGLANG_FILL_THREADS": "0",
           "XGRAMMAR2_SGLANG_CACHE_MB": "512MB", "XGRAMMAR2_SGLANG_CACHE_DIR_MB": "-1"}
    for k, v in bad.items():
        monkeypatch.setenv(k, v)
    with caplog.at_level(logging.WARNING, logger="sglang.xgrammar2_sglang"):
        for _ in range(2):
            assert backend._whitespace_bound(None) == default_ws
            assert grammar._fill_threads() == max(1, min((os.cpu_count() or 2) // 2, 8))
            assert backend._env_mib("XGRAMMAR2_SGLANG_CACHE_MB") is None
            assert backend._env_mib("XGRAMMAR2_SGLANG_CACHE_DIR_MB") is None
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == len(bad), msgs
    for k, v in bad.items():
        assert any(f"{k}={v!r}" in m for m in msgs), (k, msgs)


def test_plugins_read_no_variable_by_hand():
    """Every XGRAMMAR2_* switch or number of the plugins and the engine goes through
    xgrammar2.envvars (paths excepted), so none can slip back to a silent reading."""
    import re

    paths = {"XGRAMMAR2_CACHE_DIR", "XGRAMMAR2_SGLANG_CACHE_DIR"}
    bad = []
    for top in ("engine/xgrammar2", "plugins/vllm", "plugins/sglang"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if not name.endswith(".py"):
                    continue
                p = os.path.join(dirpath, name)
                with open(p, encoding="utf-8") as f:
                    src = f.read()
                for m in re.finditer(r"(?:os\.environ\.get|os\.getenv)\(\s*\"(XGRAMMAR2_\w+)\"", src):
                    if m.group(1) not in paths:
                        bad.append(f"{os.path.relpath(p, ROOT)}: {m.group(1)}")
    assert not bad, bad


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
