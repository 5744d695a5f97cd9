"""Helpers for tests (names follow upstream ``xgrammar.testing``; not a stable API)."""

from typing import Any, List, Union

from .grammar import Grammar

__all__ = [
    "_json_schema_to_ebnf",
    "_ebnf_to_grammar_no_normalization",
    "_is_grammar_accept_string",
    "_get_masked_tokens_from_bitmask",
    "_get_allowed_tokens_from_bitmask",
    "_bool_mask_from_bitmask",
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


def _json_schema_to_ebnf(schema: Any, **options: Any) -> str:
    """The EBNF text the JSON-schema front end produces for ``schema``."""
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
