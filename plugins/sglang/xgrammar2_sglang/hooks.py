"""Hooks registered with SGLang's ``HookRegistry`` (applied by ``load_plugins()``).

* ``ServerArgs.add_cli_args`` (AFTER): adds ``--structured-output-backend`` (vLLM's
  spelling) as an alias of ``--grammar-backend``. SGLang 0.5.23 has no such flag; the alias
  writes the same ``grammar_backend`` destination with the same (shared, extended) choices,
  and is ``SUPPRESS``-defaulted so that it never overrides ``--grammar-backend``'s default.
  Giving both flags with different values is an error.
* ``OpenAIServingChat._template_turn_grammar`` (AROUND): SGLang enables the whole-turn
  response-template grammar only when ``grammar_backend == "xgrammar"``. The hook applies
  the same conditions with ``xgrammar2`` accepted as well (see :data:`TEMPLATE_TURN_GRAMMAR`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any, Callable

from xgrammar2.envvars import env_flag

from . import ALIAS_FLAG, BACKEND_NAME

logger = logging.getLogger("sglang.xgrammar2_sglang")

#: Whether the AROUND hook enables the whole-turn response-template grammar for xgrammar2
#: (the tags it builds compile with xgrammar2; tests/sglang/test_tools.py checks that).
#: ``XGRAMMAR2_SGLANG_TEMPLATE_TURN_GRAMMAR=0`` turns it off.
TEMPLATE_TURN_GRAMMAR = env_flag("XGRAMMAR2_SGLANG_TEMPLATE_TURN_GRAMMAR", True, logger=logger)

ADD_CLI_ARGS_TARGET = "sglang.srt.server_args.ServerArgs.add_cli_args"
TEMPLATE_TURN_TARGET = "sglang.srt.entrypoints.openai.serving_chat.OpenAIServingChat._template_turn_grammar"


class _AliasAction(argparse.Action):
    """Stores into ``grammar_backend`` and rejects a conflicting ``--grammar-backend``."""

    def __call__(self, parser, namespace, values, option_string=None):  # noqa: D102
        seen = getattr(namespace, "_xgr2_alias_value", None)
        if seen is not None and seen != values:
            parser.error(f"{ALIAS_FLAG} given twice with different values ({seen!r}, {values!r})")
        setattr(namespace, "_xgr2_alias_value", values)
        setattr(namespace, self.dest, values)


def _grammar_backend_action(parser: argparse.ArgumentParser):
    for action in parser._actions:  # noqa: SLF001 - argparse has no public lookup
        if "--grammar-backend" in action.option_strings:
            return action
    return None


def add_alias_argument(parser: argparse.ArgumentParser) -> bool:
    """Adds ``--structured-output-backend`` to ``parser`` as an alias of
    ``--grammar-backend``. Returns whether it was added (False when the parser has no
    ``--grammar-backend`` or already has the flag)."""
    if ALIAS_FLAG in parser._option_string_actions:  # noqa: SLF001
        return False
    target = _grammar_backend_action(parser)
    if target is None:
        return False
    parser.add_argument(
        ALIAS_FLAG,
        dest=target.dest,
        choices=target.choices,  # the same list object: later extensions apply
        default=argparse.SUPPRESS,
        action=_AliasAction,
        help=f"Alias of --grammar-backend (added by the {BACKEND_NAME} plugin).",
    )
    return True


def _after_add_cli_args(result: Any, parser: Any = None, *args: Any, **kwargs: Any) -> Any:
    if parser is None:
        parser = kwargs.get("parser")
    if isinstance(parser, argparse.ArgumentParser):
        add_alias_argument(parser)
        _check_conflict_on_parse(parser)
    return result


def _check_conflict_on_parse(parser: argparse.ArgumentParser) -> None:
    """Makes ``parse_args`` fail when ``--grammar-backend`` and the alias disagree."""
    if getattr(parser, "_xgr2_conflict_check", False):
        return
    original: Callable = parser.parse_known_args

    def parse_known_args(args=None, namespace=None):
        ns, rest = original(args, namespace)
        alias = getattr(ns, "_xgr2_alias_value", None)
        if alias is not None:
            delattr(ns, "_xgr2_alias_value")
            argv = list(args) if args is not None else sys.argv[1:]
            explicit = _explicit_grammar_backend(argv)
            if explicit is not None and explicit != alias:
                parser.error(
                    f"--grammar-backend {explicit} and {ALIAS_FLAG} {alias} disagree; give one"
                )
        return ns, rest

    parser.parse_known_args = parse_known_args  # type: ignore[method-assign]
    parser._xgr2_conflict_check = True  # type: ignore[attr-defined]


def _explicit_grammar_backend(argv: list) -> Any:
    value = None
    for i, a in enumerate(argv):
        if a == "--grammar-backend" and i + 1 < len(argv):
            value = argv[i + 1]
        elif isinstance(a, str) and a.startswith("--grammar-backend="):
            value = a.split("=", 1)[1]
    return value


def _around_template_turn_grammar(original: Callable, self: Any, *args: Any, **kwargs: Any) -> bool:
    if original(self, *args, **kwargs):
        return True
    if not TEMPLATE_TURN_GRAMMAR:
        return False
    try:
        if self.tokenizer_manager.config_value("grammar_backend") != BACKEND_NAME:
            return False
        from sglang.srt.environ import envs
        from sglang.srt.function_call.function_call_parser import FunctionCallParser
        from sglang.srt.parser.response_template import ResponseTemplateToolDetector

        tool_detector = FunctionCallParser.ToolCallParserEnum.get(self.tool_call_parser)
        # SGLang 0.5.23's conditions, with the backend-name check widened to xgrammar2.
        return bool(
            envs.SGLANG_ENABLE_RESPONSE_TEMPLATE_TURN_GRAMMAR.get()
            and tool_detector is not None
            and issubclass(tool_detector, ResponseTemplateToolDetector)
            and tool_detector.constrains_every_turn
        )
    except Exception as e:  # noqa: BLE001 - a changed SGLang internal: keep its answer
        logger.warning("xgrammar2: template turn grammar hook failed (%s); left off", e)
        return False


def register_hooks() -> None:
    """Registers the hooks (SGLang's ``load_plugins()`` applies them after all plugins ran)."""
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(ADD_CLI_ARGS_TARGET, _after_add_cli_args, HookType.AFTER)
    HookRegistry.register(TEMPLATE_TURN_TARGET, _around_template_turn_grammar, HookType.AROUND)
