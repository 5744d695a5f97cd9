"""Registration, version gate, CLI flags and request validation of the xgrammar2 vLLM plugin."""

import json
import os
import subprocess
import sys

import pytest

from vllm_harness import REPO, SKIP_REASON, require_vllm

require_vllm()


def test_entry_point_declared():
    text = (REPO / "plugins" / "vllm" / "pyproject.toml").read_text()
    assert '[project.entry-points."vllm.general_plugins"]' in text
    assert 'xgrammar2 = "xgrammar2_vllm:register"' in text


def test_register_idempotent(registered):
    from vllm.config import StructuredOutputsConfig
    from vllm.v1.structured_output import StructuredOutputManager

    init = StructuredOutputManager.grammar_init
    assert registered.register() is True
    assert registered.register() is True
    assert StructuredOutputManager.grammar_init is init  # not wrapped twice
    from xgrammar2_vllm import patches

    patches.apply_all()  # re-applying the patches directly is a no-op too
    assert StructuredOutputManager.grammar_init is init
    assert StructuredOutputsConfig(backend="xgrammar2").backend == "xgrammar2"


def test_version_gate():
    import xgrammar2_vllm as p

    assert p._supported("0.32.0") and p._supported("0.33.0") and p._supported("0.33.2.dev7+gabc")
    assert not p._supported("0.31.9") and not p._supported("0.34.0") and not p._supported("1.0.0")
    assert not p._supported("garbage")


def _run(code, env=None):
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "plugins" / "vllm"), str(REPO / "e2e")]))
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=full_env
    )


def test_unsupported_version_does_nothing():
    code = (
        "import vllm; vllm.__version__ = '0.31.0'\n"
        "import xgrammar2_vllm\n"
        "assert xgrammar2_vllm.register() is False\n"
        "from vllm.config import StructuredOutputsConfig\n"
        "try:\n"
        "    StructuredOutputsConfig(backend='xgrammar2')\n"
        "except Exception:\n"
        "    print('REJECTED')\n"
    )
    r = _run(code)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "REJECTED" in r.stdout
    assert "outside the tested range" in r.stderr


def _parse_cli(argv):
    from vllm.engine.arg_utils import AsyncEngineArgs
    try:  # vLLM 0.33 moved it
        from vllm.entrypoints.common.cli_args import make_arg_parser
    except ImportError:
        from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())
    args = parser.parse_args(argv)
    return AsyncEngineArgs.from_cli_args(args), parser


@pytest.mark.parametrize(
    "flags",
    [
        ["--structured-outputs-config.backend", "xgrammar2"],
        ["--structured-outputs-config.backend=xgrammar2"],
        ["--structured-outputs-config", '{"backend": "xgrammar2"}'],
        ["--structured-output-backend", "xgrammar2"],
        ["--structured-output-backend=xgrammar2"],
    ],
)
def test_cli_backend_flags(registered, tiny_model_dir, flags):
    engine_args, _ = _parse_cli(["--model", tiny_model_dir] + flags)
    assert engine_args.structured_outputs_config.backend == "xgrammar2"


def test_cli_short_flag_merges_with_dotted_options(registered, tiny_model_dir):
    engine_args, parser = _parse_cli(
        ["--model", tiny_model_dir, "--structured-output-backend", "xgrammar2",
         "--structured-outputs-config.disable_any_whitespace", "true"]
    )
    cfg = engine_args.structured_outputs_config
    assert cfg.backend == "xgrammar2" and cfg.disable_any_whitespace is True
    assert "--structured-output-backend" in parser.format_help()


def test_cli_rejects_unknown_backend(registered, tiny_model_dir):
    with pytest.raises(SystemExit):
        _parse_cli(["--model", tiny_model_dir, "--structured-outputs-config.backend", "xgrammar3"])


def test_rewrite_short_flag():
    from xgrammar2_vllm.patches import rewrite_short_flag

    assert rewrite_short_flag(["a", "--structured-output-backend", "x", "b"]) == [
        "a", "--structured-outputs-config.backend=x", "b"]
    assert rewrite_short_flag(["--structured-output-backend=y"]) == ["--structured-outputs-config.backend=y"]


# ---- validation (API-server side) -------------------------------------------------------


def _validation_error(harness, **so):
    from vllm.exceptions import VLLMValidationError

    with pytest.raises(VLLMValidationError) as ei:
        harness.params(**so)
    return str(ei.value)


@pytest.mark.parametrize(
    "so, needle",
    [
        ({"json": {"type": "strin"}}, "unknown type name 'strin'"),
        ({"json": {"$ref": "#/nope"}}, "does not exist"),
        ({"json": '{"type": '}, "not valid JSON"),
        ({"json": {"type": "array", "uniqueItems": True, "minItems": 2}}, "uniqueItems"),
        ({"regex": "("}, "parenthesis is not closed"),
        ({"regex": "a{5,2}"}, "lower bound 5 is larger than the upper bound 2"),
        ({"grammar": 'root ::= "a" | rule2'}, "rule2"),
        ({"grammar": "root ::= ("}, "EBNF parser error at line 1, column 11"),
        ({"grammar": 'start: /(?<=a)b/'}, "line 1, column 9"),
        ({"grammar": 'start: NAME\n%import common.NOPE -> NAME'}, "line 2"),
    ],
)
def test_invalid_requests_get_our_message(harness, so, needle):
    msg = _validation_error(harness, **so)
    assert msg.startswith("xgrammar2: "), msg
    assert needle in msg, msg


def test_validated_by_xgrammar2_not_upstream(harness):
    """Schemas vLLM's upstream-xgrammar validator rejects but xgrammar2 compiles."""
    from vllm.v1.structured_output.backend_xgrammar import has_xgrammar_unsupported_json_features

    for schema in (
        {"type": "integer", "multipleOf": 3},
        {"type": "string", "pattern": "^a+$", "maxLength": 5},
        {"allOf": [{"type": "string"}, {"enum": ["yes", "no"]}]},
    ):
        assert has_xgrammar_unsupported_json_features(schema)
        sp = harness.params(json=schema)
        assert sp.structured_outputs._backend == "xgrammar2"


def test_choice_stays_choice_and_lark_becomes_ebnf(harness):
    sp = harness.params(choice=["yes", "no"])
    assert sp.structured_outputs.choice == ["yes", "no"] and sp.structured_outputs.grammar is None
    sp = harness.params(grammar='start: "a" b+\nb: "x" | "y"\n')
    assert sp.structured_outputs.grammar.startswith("root ::= ")


def test_structural_tags(harness):
    """Structural tags are validated by xgrammar2: supported ones pass, ones using features
    xgrammar2 cannot compile yet get a clear 400 message, malformed ones name the JSON path."""
    ok = {"type": "structural_tag", "format": {"type": "const_string", "value": "hi"}}
    assert harness.params(structural_tag=json.dumps(ok)).structured_outputs._backend == "xgrammar2"
    legacy = {"type": "structural_tag", "structures": [{"begin": "<f>", "schema": {"type": "integer"}, "end": "</f>"}],
              "triggers": ["<f>"]}
    from vllm.exceptions import VLLMValidationError

    try:  # the legacy (structures, triggers) form needs tag dispatch in the core
        harness.params(structural_tag=json.dumps(legacy))
    except VLLMValidationError as e:
        assert str(e).startswith("xgrammar2: "), str(e)
    # a token budget on free text is a rule attribute now (docs/rule-attributes.md)
    budget = {"type": "structural_tag", "format": {"type": "any_text", "max_tokens": 5}}
    harness.params(structural_tag=json.dumps(budget))
    bad_budget = {"type": "structural_tag", "format": {"type": "any_text", "max_tokens": -1}}
    msg = _validation_error(harness, structural_tag=json.dumps(bad_budget))
    assert msg.startswith("xgrammar2: ") and "max_tokens" in msg, msg
    bogus = {"type": "structural_tag", "format": {"type": "bogus"}}
    msg = _validation_error(harness, structural_tag=json.dumps(bogus))
    assert msg.startswith("xgrammar2: invalid structural tag") and "$.format.type" in msg, msg


def test_other_backends_untouched(registered, model_config, tokenizer):
    """Requests on the stock xgrammar backend still go through upstream's validator."""
    from vllm_harness import make_vllm_config
    from vllm.exceptions import VLLMValidationError
    from vllm.sampling_params import SamplingParams, StructuredOutputsParams

    cfg = make_vllm_config(model_config, backend="xgrammar")
    sp = SamplingParams(structured_outputs=StructuredOutputsParams(json={"type": "integer", "multipleOf": 3}))
    with pytest.raises(VLLMValidationError, match="not supported by xgrammar"):
        sp._validate_structured_outputs(model_config, cfg.structured_outputs_config, tokenizer)
    sp = SamplingParams(structured_outputs=StructuredOutputsParams(choice=["a", "b"]))
    sp._validate_structured_outputs(model_config, cfg.structured_outputs_config, tokenizer)
    assert sp.structured_outputs.grammar == 'root ::= "a" | "b"'  # upstream's rewrite


def test_log_times(harness, monkeypatch, caplog):
    """XGRAMMAR2_VLLM_LOG_TIMES: the API server's validation and the engine's compiles log
    their times (bench/vllm_restart_ttft.py reads these lines)."""
    import logging

    from xgrammar2_vllm import backend, validate

    monkeypatch.setattr(validate, "_LOG_TIMES", True)
    monkeypatch.setattr(backend, "LOG_TIMES", True)
    schema = {"type": "object", "properties": {"log_times": {"type": "integer"}}}
    with caplog.at_level(logging.INFO, logger="vllm.xgrammar2_vllm"):
        harness.request(json=schema)
    text = caplog.text
    assert "xgrammar2 times: validate (API server)" in text, text
    assert "xgrammar2 times: compile JSON" in text and "disk cache hits" in text, text


def test_a_restarted_api_server_does_not_convert_an_accepted_request_again(harness, tmp_path, monkeypatch):
    """With a cache directory, accepted requests are marked there (xgrammar2.validated): after
    a restart (the in-memory memo empty) the same request is accepted without running the
    front end; other options, or a request that was refused, are converted (and judged) again."""
    import xgrammar2 as xgr2
    from xgrammar2_vllm import validate

    saved = (dict(validate._options), validate._disk)
    try:
        validate.configure({"cache_dir": str(tmp_path)})
        schema = {"type": "object", "properties": {"restarted_api_server": {"type": "integer"}}}
        harness.params(json=schema)
        assert validate._disk is not None and validate._disk.writes == 1
        bad = {"type": "array", "uniqueItems": True, "minItems": 2}
        _validation_error(harness, json=bad)
        assert validate._disk.writes == 1  # refusals are not marked

        calls = []
        real = xgr2.Grammar.from_json_schema

        def counting(*a, **k):
            calls.append(a)
            return real(*a, **k)

        monkeypatch.setattr(xgr2.Grammar, "from_json_schema", counting)
        validate.configure({"cache_dir": str(tmp_path)})  # a new API server: memo empty
        harness.params(json=schema)
        assert calls == [] and validate._disk.hits == 1
        assert "uniqueItems" in _validation_error(harness, json=bad)
        assert len(calls) == 1
        validate.configure({"cache_dir": str(tmp_path), "lenient": True})  # other options
        harness.params(json=schema)
        assert len(calls) == 2
        validate.configure({"cache_dir": "off"})
        assert validate._disk is None
    finally:
        validate._options.clear()
        validate._options.update(saved[0])
        validate._disk = saved[1]
        validate._ok.clear()
