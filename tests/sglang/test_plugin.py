"""The plugin through SGLang's own entry points: ``load_plugins()``, the CLI parsers of
``python -m sglang.launch_server`` and ``sglang serve``, and ``create_grammar_backend``."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap

import pytest

from sglang_harness import QWEN3_EOS, QWEN3_VOCAB, REPO, publish_server_args, require_sglang

require_sglang()


def test_entry_point_is_declared():
    from importlib.metadata import entry_points

    eps = [e for e in entry_points(group="sglang.srt.plugins") if e.name == "xgrammar2"]
    assert len(eps) == 1, "install xgrammar2 into this venv (e2e/setup_sglang_env.sh)"
    assert eps[0].value == "xgrammar2_sglang:register"


def test_load_plugins_registers_backend_and_choice():
    from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES
    from sglang.srt.constrained.base_grammar_backend import GRAMMAR_BACKEND_REGISTRY
    from sglang.srt.plugins import load_plugins

    import xgrammar2_sglang

    load_plugins()
    assert xgrammar2_sglang.is_registered()
    assert GRAMMAR_BACKEND_CHOICES.count("xgrammar2") == 1
    assert "xgrammar2" in GRAMMAR_BACKEND_REGISTRY
    # Idempotent: a second call changes nothing and reports the same state.
    assert xgrammar2_sglang.register() is True
    assert GRAMMAR_BACKEND_CHOICES.count("xgrammar2") == 1


def test_version_gate_refuses_untested_sglang(monkeypatch, caplog):
    import xgrammar2_sglang as plug

    monkeypatch.setattr(plug, "_state", {"attempted": False, "active": False})
    monkeypatch.setattr(plug, "_sglang_version", lambda: "0.4.10")
    monkeypatch.delenv("XGRAMMAR2_SGLANG_FORCE", raising=False)
    with caplog.at_level(logging.WARNING, logger="sglang.xgrammar2_sglang"):
        assert plug.register() is False
    assert "outside the tested range" in caplog.text and "0.4.10" in caplog.text
    assert plug.register() is False  # decided once per process
    assert not plug._supported("0.6.0") and plug._supported("0.5.23") and not plug._supported("0.5.22")


def test_cli_accepts_backend_and_alias(model_path):
    from sglang.srt.plugins import load_plugins
    from sglang.srt.server_args import prepare_server_args

    load_plugins()
    base = ["--model-path", str(model_path)]
    assert prepare_server_args(base + ["--grammar-backend", "xgrammar2"]).grammar_backend == "xgrammar2"
    assert prepare_server_args(base + ["--structured-output-backend", "xgrammar2"]).grammar_backend == "xgrammar2"
    assert prepare_server_args(base + ["--structured-output-backend=xgrammar"]).grammar_backend == "xgrammar"
    assert prepare_server_args(base).grammar_backend is None  # SGLang's own default untouched
    # Same value twice is fine; conflicting values and unknown names are CLI errors.
    assert prepare_server_args(
        base + ["--grammar-backend", "xgrammar2", "--structured-output-backend", "xgrammar2"]
    ).grammar_backend == "xgrammar2"
    with pytest.raises(SystemExit):
        prepare_server_args(base + ["--grammar-backend", "xgrammar", "--structured-output-backend", "xgrammar2"])
    with pytest.raises(SystemExit):
        prepare_server_args(base + ["--structured-output-backend", "bogus"])


def test_create_grammar_backend_returns_ours(published, tokenizer):
    from sglang.srt.constrained.base_grammar_backend import create_grammar_backend

    from xgrammar2_sglang.backend import XGrammar2GrammarBackend

    b = create_grammar_backend(published, tokenizer, QWEN3_VOCAB, set(QWEN3_EOS))
    assert type(b) is XGrammar2GrammarBackend
    # Whitespace is bounded by default (xgrammar2.serving), SGLang's flags unset.
    assert b.any_whitespace is True and b.max_whitespace_cnt == 16
    assert sorted(b.tokenizer_info.stop_token_ids) == sorted(QWEN3_EOS)
    assert b.tokenizer_info.vocab_size == QWEN3_VOCAB


def test_create_grammar_backend_reasoner_wrapped(model_path, tokenizer):
    from sglang.srt.constrained.base_grammar_backend import create_grammar_backend
    from sglang.srt.constrained.reasoner_grammar_backend import ReasonerGrammarBackend

    from xgrammar2_sglang.backend import XGrammar2GrammarBackend

    try:
        args = publish_server_args(model_path, "--grammar-backend", "xgrammar2", "--reasoning-parser", "qwen3")
        b = create_grammar_backend(args, tokenizer, QWEN3_VOCAB, set(QWEN3_EOS))
        assert type(b) is ReasonerGrammarBackend
        assert type(b.grammar_backend) is XGrammar2GrammarBackend
        assert b.think_end_ids == tokenizer.encode("</think>", add_special_tokens=False)
    finally:
        publish_server_args(model_path, "--grammar-backend", "xgrammar2")


def test_whitespace_flags_reach_the_backend(model_path, tokenizer):
    from sglang.srt.constrained.base_grammar_backend import create_grammar_backend

    try:
        args = publish_server_args(
            model_path, "--grammar-backend", "xgrammar2", "--constrained-json-disable-any-whitespace",
        )
        b = create_grammar_backend(args, tokenizer, QWEN3_VOCAB, set(QWEN3_EOS))
        assert b.any_whitespace is False
        args = publish_server_args(
            model_path, "--grammar-backend", "xgrammar2", "--constrained-json-max-whitespace-cnt", "2",
        )
        b = create_grammar_backend(args, tokenizer, QWEN3_VOCAB, set(QWEN3_EOS))
        assert b.any_whitespace is True and b.max_whitespace_cnt == 2
    finally:
        publish_server_args(model_path, "--grammar-backend", "xgrammar2")


_LAUNCH_PROBE = textwrap.dedent(
    """
    import sys
    import sglang.srt.entrypoints.http_server as hs

    def fake_launch(server_args, *a, **k):
        print("GRAMMAR_BACKEND=" + str(server_args.grammar_backend), flush=True)
        raise SystemExit(0)

    hs.launch_server = fake_launch
    mode = sys.argv[1]
    argv = sys.argv[2:]
    if mode == "launch_server":
        import runpy
        sys.argv = ["sglang.launch_server"] + argv
        runpy.run_module("sglang.launch_server", run_name="__main__")
    else:
        from sglang.cli.main import main
        sys.argv = ["sglang", "serve"] + argv
        main()
    """
)


@pytest.mark.parametrize("mode", ["launch_server", "serve"])
@pytest.mark.parametrize("flag", ["--grammar-backend", "--structured-output-backend"])
def test_real_launchers_accept_the_flag(model_path, tmp_path, mode, flag):
    """The real CLI entry points (plugins loaded by SGLang itself from the entry point, in a
    fresh process) parse and resolve the flag; only the HTTP server start is replaced."""
    probe = tmp_path / "probe.py"
    probe.write_text(_LAUNCH_PROBE)
    env = dict(os.environ)
    env.pop("SGLANG_PLUGINS", None)
    r = subprocess.run(
        [sys.executable, str(probe), mode, "--model-path", str(model_path), "--device", "cpu", flag, "xgrammar2"],
        capture_output=True, text=True, timeout=300, env=env, cwd=str(REPO),
    )
    assert "GRAMMAR_BACKEND=xgrammar2" in r.stdout, (r.returncode, r.stdout[-2000:], r.stderr[-4000:])


def test_sglang_plugins_whitelist_excluding_us(model_path, tmp_path):
    """With SGLANG_PLUGINS set and 'xgrammar2' not listed, SGLang does not run the plugin and
    the flag is rejected (documented: the whitelist must include xgrammar2)."""
    probe = tmp_path / "probe.py"
    probe.write_text(_LAUNCH_PROBE)
    env = dict(os.environ, SGLANG_PLUGINS="some_other_plugin")
    r = subprocess.run(
        [sys.executable, str(probe), "launch_server", "--model-path", str(model_path), "--grammar-backend", "xgrammar2"],
        capture_output=True, text=True, timeout=300, env=env, cwd=str(REPO),
    )
    assert r.returncode != 0 and "invalid choice: 'xgrammar2'" in r.stderr, r.stderr[-2000:]


def test_template_turn_grammar_hook():
    """SGLang enables the whole-turn response-template grammar only for "xgrammar"; after
    load_plugins() the AROUND hook also enables it for "xgrammar2" (same other conditions)."""
    from types import SimpleNamespace

    from sglang.srt.entrypoints.openai.serving_chat import OpenAIServingChat
    from sglang.srt.plugins import load_plugins

    load_plugins()

    def fake(backend, parser):
        return SimpleNamespace(
            tokenizer_manager=SimpleNamespace(config_value=lambda name: backend if name == "grammar_backend" else None),
            tool_call_parser=parser,
        )

    assert OpenAIServingChat._template_turn_grammar(fake("xgrammar", "beam")) is True
    assert OpenAIServingChat._template_turn_grammar(fake("xgrammar2", "beam")) is True
    assert OpenAIServingChat._template_turn_grammar(fake("xgrammar2", "qwen")) is False
    assert OpenAIServingChat._template_turn_grammar(fake("llguidance", "beam")) is False
