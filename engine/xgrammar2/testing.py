"""Helpers for tests (names follow upstream ``xgrammar.testing``; not a stable API)."""

from typing import Any, List, Optional, Tuple, Union

from .grammar import Grammar

__all__ = [
    "_json_schema_to_ebnf",
    "_ebnf_to_grammar_no_normalization",
    "_is_grammar_accept_string",
    "_get_masked_tokens_from_bitmask",
    "_get_allowed_tokens_from_bitmask",
    "_bool_mask_from_bitmask",
    "_get_matcher_from_grammar",
    "_get_matcher_from_grammar_and_tokenizer_info",
    "_regex_to_ebnf",
    "_is_single_token_bitmask",
    "_traverse_draft_tree",
    "_get_allow_empty_rule_ids",
    "GrammarFunctor",
    "bitmask_to_bool_mask",
    "bool_mask_to_bitmask",
    "_is_rule_fsm_accept_string",
    "_print_grammar_fsms",
    "_generate_range_regex",
    "_generate_float_regex",
]

_BYTE_TOKENIZER = None


def _byte_tokenizer_info():
    """A vocabulary of the 256 single bytes plus one stop token (id 256)."""
    global _BYTE_TOKENIZER
    if _BYTE_TOKENIZER is None:
        from .tokenizer_info import TokenizerInfo, VocabType

        _BYTE_TOKENIZER = TokenizerInfo(
            [bytes([b]) for b in range(256)] + [b"</s>"],
            VocabType.RAW,
            stop_token_ids=[256],
            special_token_ids=[256],
        )
    return _BYTE_TOKENIZER


def _json_schema_to_ebnf(schema: Any, *, json_format: str = "json", **options: Any) -> str:
    """The EBNF text the JSON-schema front end produces for ``schema``. ``json_format``
    other than "json" is one of the structural tags' XML styles (``qwen_xml``,
    ``minimax_xml``, ``deepseek_xml``, ``glm_xml``, ...): the grammar of a tool call's
    parameters in that style, as a ``json_schema`` content with that ``style`` converts."""
    if json_format != "json":
        import json as _json

        if isinstance(schema, (str, bytes, bytearray)):
            schema = _json.loads(schema)
        elif isinstance(schema, type) and hasattr(schema, "model_json_schema"):
            schema = schema.model_json_schema()
        content: dict = {"type": "json_schema", "json_schema": schema, "style": json_format}
        if options.get("max_whitespace_cnt") is not None:
            content["max_whitespace_cnt"] = options["max_whitespace_cnt"]
        if options.get("any_order"):
            content["any_order"] = True
        tag = {"type": "structural_tag", "format": content}
        if options.get("strict_mode", True):
            return str(Grammar.from_structural_tag(tag))
        # not strict: objects allow undeclared properties unless the schema says otherwise (a
        # structural tag has no such option; the node carries it)
        from .structural_tag.converter import format_to_ebnf
        from .structural_tag.nodes import read_structural_tag

        node = read_structural_tag(tag)
        node.strict = False
        return str(Grammar.from_ebnf(format_to_ebnf(node)))
    from .grammar import _schema_to_ebnf

    options.setdefault("any_whitespace", True)
    options.setdefault("indent", None)
    options.setdefault("separators", None)
    options.setdefault("strict_mode", True)
    options.setdefault("max_whitespace_cnt", None)
    options.setdefault("lenient", False)
    return _schema_to_ebnf(schema, **options)


def _ebnf_to_grammar_no_normalization(ebnf_string: str, root_rule_name: str = "root") -> Grammar:
    """Parses EBNF (the core has no separate normalization step)."""
    return Grammar.from_ebnf(ebnf_string, root_rule_name=root_rule_name)


def _get_matcher_from_grammar_and_tokenizer_info(
    grammar: Union[Grammar, str], tokenizer_info: Optional["TokenizerInfo"] = None, **kwargs: Any
) -> "GrammarMatcher":
    """A GrammarMatcher for ``grammar`` (a Grammar or EBNF text) over ``tokenizer_info``
    (an empty vocabulary when None: the matcher then matches strings, not tokens), compiled
    without the cache. ``kwargs`` go to GrammarMatcher."""
    from .compiler import GrammarCompiler
    from .matcher import GrammarMatcher
    from .tokenizer_info import TokenizerInfo

    if tokenizer_info is None:
        tokenizer_info = TokenizerInfo([])
    compiled = GrammarCompiler(tokenizer_info, cache_enabled=False).compile_grammar(grammar)
    return GrammarMatcher(compiled, **kwargs)


def _get_matcher_from_grammar(grammar: Union[Grammar, str], **kwargs: Any) -> "GrammarMatcher":
    """A GrammarMatcher for ``grammar`` (a Grammar or EBNF text) over an empty vocabulary:
    it matches strings (``accept_string``), not tokens, and terminates without a stop token
    (an empty vocabulary has none), as upstream's helper does. ``kwargs`` go to
    GrammarMatcher."""
    kwargs.setdefault("terminate_without_stop_token", True)
    return _get_matcher_from_grammar_and_tokenizer_info(grammar, None, **kwargs)


def _regex_to_ebnf(regex: str, with_rule_name: bool = True) -> str:
    """The EBNF of a regex as xgrammar2 lowers it (``root ::= ...``; the right-hand side
    alone with ``with_rule_name=False``). The text is xgrammar2's: equal in language, not
    always in spelling, to upstream's."""
    text = str(Grammar.from_regex(regex))
    if with_rule_name:
        return text
    head = "root ::= "
    first, _, rest = text.partition("\n")
    if first.startswith(head) and not rest.strip():
        return first[len(head):] + "\n"
    return text


def _is_single_token_bitmask(bitmask: Any, vocab_size: int, index: int = 0) -> Tuple[bool, int]:
    """(True, id) when the bitmask row allows exactly one token among the first
    ``vocab_size``, else (False, -1)."""
    import numpy as np

    ids = np.flatnonzero(_bool_mask_from_bitmask(bitmask, vocab_size, index))
    return (True, int(ids[0])) if len(ids) == 1 else (False, -1)


def _traverse_draft_tree(retrieve_next_token: Any, retrieve_next_sibling: Any, draft_tokens: Any,
                         matcher: Any, allocate_token_bitmask: Any, time_threshold: float = -1.0) -> bool:
    """Upstream's backward-compatible wrapper of ``GrammarMatcher.traverse_draft_tree`` (the
    matcher comes fourth, the bitmask fifth)."""
    return matcher.traverse_draft_tree(retrieve_next_token, retrieve_next_sibling, draft_tokens,
                                       allocate_token_bitmask, time_threshold)


def _get_allow_empty_rule_ids(compiled_grammar: Any) -> List[int]:
    """Upstream's ids of the rules that can match the empty string. xgrammar2 inlines and
    renumbers rules while lowering, so upstream's rule ids have no counterpart."""
    raise NotImplementedError("xgrammar2 does not expose upstream's rule ids (rules are inlined while lowering)")


class GrammarFunctor:
    """Upstream's C++ grammar passes (rule inliner, FSM builder, ...), exposed there for its
    tests. xgrammar2 lowers grammars in its own C pipeline (``csrc/compile``) with no
    one-to-one counterpart, so each pass raises NotImplementedError naming it."""

    def __getattr__(self, name: str) -> Any:
        raise NotImplementedError(f"GrammarFunctor.{name}: upstream's C++ grammar pass has no xgrammar2 "
                                  "counterpart")

    @staticmethod
    def _missing(name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError(f"GrammarFunctor.{name}: upstream's C++ grammar pass has no xgrammar2 "
                                      "counterpart")
        return staticmethod(call)


for _pass in ("byte_string_fuser", "dead_code_eliminator", "fsm_builder", "grammar_optimizer",
              "lookahead_assertion_analyzer", "repetition_normalizer", "rule_inliner", "structure_normalizer"):
    setattr(GrammarFunctor, _pass, GrammarFunctor._missing(_pass))


def _is_grammar_accept_string(
    grammar: Union[Grammar, str],
    input_str: Union[str, bytes],
    *,
    debug_print: bool = False,
    print_time: bool = False,
    require_termination: bool = True,
) -> bool:
    """Whether ``grammar`` (a Grammar or EBNF text) accepts exactly ``input_str``, matched
    byte by byte against a one-byte-per-token vocabulary. With ``require_termination`` the
    whole input must be a complete match; otherwise a valid prefix suffices."""
    import time

    from .compiler import GrammarCompiler
    from .matcher import GrammarMatcher

    if isinstance(grammar, str):
        grammar = Grammar.from_ebnf(grammar)
    start = time.perf_counter()
    compiled = GrammarCompiler(_byte_tokenizer_info(), cache_enabled=False).compile_grammar(grammar)
    matcher = GrammarMatcher(compiled, terminate_without_stop_token=False)
    data = input_str.encode("utf-8") if isinstance(input_str, str) else bytes(input_str)
    accepted = matcher.accept_string(data, debug_print=debug_print)
    if print_time:
        print(f"[xgrammar2] accept took {(time.perf_counter() - start) * 1e6:.1f} us")
    if not accepted:
        return False
    return matcher.is_completed() if require_termination else True


def _bool_mask_from_bitmask(bitmask: Any, vocab_size: int, index: int = 0):
    """A numpy bool array of length vocab_size: True where the token is allowed."""
    import numpy as np

    row = bitmask[index] if getattr(bitmask, "ndim", 1) == 2 else bitmask
    if hasattr(row, "numpy"):
        row = row.cpu().numpy()
    words = np.ascontiguousarray(np.asarray(row, dtype=np.int32), dtype="<i4")
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")
    return bits[:vocab_size].astype(bool)


def _get_masked_tokens_from_bitmask(
    bitmask: Any, vocab_size: int, index: int = 0
) -> List[int]:
    """Ids of the tokens the bitmask row disallows (as upstream's helper)."""
    import numpy as np

    return np.flatnonzero(~_bool_mask_from_bitmask(bitmask, vocab_size, index)).tolist()


def _get_allowed_tokens_from_bitmask(
    bitmask: Any, vocab_size: int, index: int = 0
) -> List[int]:
    """Ids of the tokens the bitmask row allows."""
    import numpy as np

    return np.flatnonzero(_bool_mask_from_bitmask(bitmask, vocab_size, index)).tolist()


def bitmask_to_bool_mask(bit_mask: Any, vocab_size: Optional[int] = None) -> Any:
    """A (batch, vocab_size) torch bool tensor from an int32 bitmask: True where a token is
    allowed (``vocab_size`` defaults to every bit of a row)."""
    import numpy as np
    import torch

    if bit_mask.dtype != torch.int32:
        raise ValueError("bit_mask should be of type torch.int32.")
    if bit_mask.dim() == 1:
        bit_mask = bit_mask.unsqueeze(0)
    width = bit_mask.shape[1] * 32
    if vocab_size is None:
        vocab_size = width
    if vocab_size > width:
        raise ValueError("vocab_size should be less than or equal to the size represented by bit_mask.")
    words = np.ascontiguousarray(bit_mask.cpu().numpy(), dtype="<i4")
    bits = np.unpackbits(words.view(np.uint8), axis=1, bitorder="little")[:, :vocab_size]
    return torch.from_numpy(bits.astype(bool))


def bool_mask_to_bitmask(bool_mask: Any) -> Any:
    """The int32 bitmask of a (batch, vocab) bool tensor; bits past the vocabulary (padding
    to a multiple of 32) are set, as upstream's helper sets them."""
    import numpy as np
    import torch

    if bool_mask.dim() == 1:
        bool_mask = bool_mask.unsqueeze(0)
    rows, n = bool_mask.shape
    pad = (32 - n % 32) % 32
    bits = np.ones((rows, n + pad), dtype=np.uint8)
    bits[:, :n] = bool_mask.cpu().numpy().astype(np.uint8)
    packed = np.packbits(bits, axis=1, bitorder="little")
    return torch.from_numpy(packed.view("<i4").astype(np.int32)).to(bool_mask.device)


def _is_rule_fsm_accept_string(grammar: Grammar, rule_id: int, input_str: str) -> bool:
    """Upstream's per-rule FSM check by upstream rule id; xgrammar2's per-rule automata are
    built after inlining and renumbering, so upstream's ids have no counterpart."""
    raise NotImplementedError("xgrammar2 does not expose upstream's rule ids (rules are inlined while lowering)")


def _print_grammar_fsms(grammar: Grammar) -> str:
    """Upstream's dump of its per-rule FSMs (its internal text format)."""
    raise NotImplementedError("xgrammar2 does not print upstream's per-rule FSM dump (internal format)")


def _generate_range_regex(start: Optional[int] = None, end: Optional[int] = None) -> str:
    """Upstream's text of its integer-range regex (its converter's internal spelling)."""
    raise NotImplementedError("xgrammar2's numeric ranges are automata (json_schema/numeric.py), not "
                              "upstream's regex text")


def _generate_float_regex(start: Optional[float] = None, end: Optional[float] = None,
                          exclusive_start: bool = False, exclusive_end: bool = False) -> str:
    """Upstream's text of its float-range regex (its converter's internal spelling)."""
    raise NotImplementedError("xgrammar2's numeric ranges are automata (json_schema/numeric.py), not "
                              "upstream's regex text")
