"""The vLLM internals the plugin wraps still have the shapes it was written for.

Each patch in ``xgrammar2_vllm.patches`` calls through to vLLM's original with the
arguments it received; if vLLM renames a parameter, adds one, or changes the rows it passes
to ``_fill_bitmasks``, a wrapper could fail at serving time (inside ``EngineCore.step``).
These tests read the originals (``__wrapped__``) and fail loudly on any change, naming it.
"""

from __future__ import annotations

import inspect
import typing

import pytest

from vllm_harness import require_vllm

require_vllm()


def _original(fn):
    return getattr(fn, "__wrapped__", fn)


def _params(fn):
    return [p.name for p in inspect.signature(_original(fn)).parameters.values()]


def _vllm_minor() -> tuple:
    import vllm

    major, minor = vllm.__version__.split(".")[:2]
    return int(major), int(minor)


def test_manager_methods(registered):
    from vllm.v1.structured_output import StructuredOutputManager as M

    assert _params(M.grammar_init) == ["self", "request"]
    assert _params(M._fill_bitmasks) == ["self", "batch"]
    assert _params(M.grammar_bitmask) == ["self", "requests", "structured_output_request_ids",
                                          "scheduled_spec_decode_tokens"]


def test_fill_bitmasks_row_shape(registered):
    """0.32 passes (grammar, index, apply_bitmask); 0.33 adds masked_ids. The wrapper reads
    only the first three fields and hands other rows to vLLM whole."""
    from vllm.v1.structured_output import StructuredOutputManager as M

    hint = typing.get_type_hints(_original(M._fill_bitmasks)).get("batch")
    row = typing.get_args(hint)[0]
    fields = typing.get_args(row)
    expected = 3 if _vllm_minor() < (0, 33) else 4
    assert len(fields) == expected, f"vLLM {_vllm_minor()} _fill_bitmasks rows: {row}"
    assert fields[1] is int and fields[2] is bool, row


def test_validation_and_input_processor(registered):
    from vllm.v1.engine.input_processor import InputProcessor
    from vllm.v1.structured_output import backend_xgrammar as bx

    assert _params(bx.validate_xgrammar_grammar) == ["sampling_params"]
    assert _params(InputProcessor.__init__)[:2] == ["self", "vllm_config"]
    assert getattr(InputProcessor.__init__, "_xgrammar2_patched", False)


def test_backend_interface(registered):
    from vllm.v1.structured_output.backend_types import StructuredOutputBackend, StructuredOutputGrammar

    # 0.33 adds stop_token_ids (the request's stop ids), which Xgrammar2Backend takes too.
    assert _params(StructuredOutputBackend.compile_grammar) in (
        ["self", "request_type", "grammar_spec"], ["self", "request_type", "grammar_spec", "stop_token_ids"])
    assert _params(StructuredOutputBackend.allocate_token_bitmask) == ["self", "max_num_seqs"]
    for name in ("accept_tokens", "validate_tokens", "rollback", "fill_bitmask", "is_terminated", "reset"):
        assert hasattr(StructuredOutputGrammar, name), name
    assert _params(StructuredOutputGrammar.fill_bitmask) == ["self", "bitmask", "batch_index"]
    # Ours takes the same parameters, so a call by keyword works too.
    from xgrammar2_vllm.backend import Xgrammar2Backend, Xgrammar2Grammar

    for name in ("accept_tokens", "validate_tokens", "rollback", "fill_bitmask", "is_terminated", "reset"):
        assert _params(getattr(Xgrammar2Grammar, name)) == _params(getattr(StructuredOutputGrammar, name)), name
    assert _params(Xgrammar2Backend.compile_grammar)[:3] == ["self", "request_type", "grammar_spec"]


@pytest.mark.parametrize("path", ["vllm.entrypoints.common.cli_args", "vllm.entrypoints.launchers.cli_args"])
def test_cli_parser_location(path):
    import importlib

    try:
        mod = importlib.import_module(path)
    except ImportError:
        pytest.skip(f"{path} is not in this vLLM ({_vllm_minor()})")
    assert callable(getattr(mod, "make_arg_parser"))
