"""CompiledGrammar: a grammar compiled against a tokenizer, the object a GrammarMatcher runs on."""

import sys
from typing import Any, Callable, Optional, Tuple

from . import _core
from .background import check_k
from .grammar import Grammar
from .tokenizer_info import TokenizerInfo

__all__ = ["CompiledGrammar"]


class CompiledGrammar:
    """A grammar compiled against a tokenizer: the object GrammarMatcher runs on. Immutable
    from Python's point of view and safe to share across threads (the core builds token
    masks lazily, lock-free, and shares them between all matchers of this grammar).

    Do not construct it directly: use :class:`GrammarCompiler`.
    """

    __slots__ = ("_ptr", "_tokenizer_info", "_grammar", "_rebuild", "_linked", "_warnings",
                 "_matcher_consts", "__weakref__")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("CompiledGrammar is created by GrammarCompiler.compile_* methods")

    @classmethod
    def _create(cls, ptr: Any, tokenizer_info: TokenizerInfo, grammar: Optional[Grammar],
                rebuild: Optional[Callable[[], Grammar]] = None, linked: bool = False,
                warnings: Tuple[str, ...] = ()):
        obj = object.__new__(cls)
        obj._ptr = ptr
        obj._tokenizer_info = tokenizer_info
        obj._grammar = grammar
        obj._rebuild = rebuild
        # Linked from cached fragments: cheap to build again (see _CompileCache._admit).
        obj._linked = linked
        obj._warnings = warnings
        obj._matcher_consts = None  # set by the first GrammarMatcher (matcher._grammar_consts)
        return obj

    @property
    def grammar(self) -> Grammar:
        """The grammar this was compiled from."""
        g = self._grammar
        if g is None:
            if self._rebuild is not None:
                # Compiled without keeping its grammar (a cached grammar's IR is several
                # times the size of its input): convert the input again.
                g = self._rebuild()
            else:
                g = Grammar._borrowed(_core.lib.xgr_compiled_grammar(self._ptr))
            self._grammar = g
        return g

    @property
    def tokenizer_info(self) -> TokenizerInfo:
        """The tokenizer info this was compiled against."""
        return self._tokenizer_info

    @property
    def warnings(self) -> Tuple[str, ...]:
        """(xgrammar2) The warnings of the grammar this was compiled from
        (:attr:`Grammar.warnings`): for a JSON schema, the constraints not enforced, such
        as ``format`` values that are annotations. Empty for other grammars."""
        return self._warnings

    @property
    def memory_size_bytes(self) -> int:
        """Bytes held by the compiled grammar: its grammar, automata and token-mask cache
        (which grows as masks are computed on first use)."""
        lib = _core.lib
        size = int(lib.xgr_compiled_memory(self._ptr))
        g = self._grammar
        if g is not None:
            # A grammar that spells special tokens is compiled from a rewritten copy (or
            # the core dropped its own): the one kept here for `.grammar` counts apart.
            if g._ptr != lib.xgr_compiled_grammar(self._ptr):
                size += int(lib.xgr_grammar_memory(g._ptr))
            if g._text is not None:  # its printed EBNF, once asked for
                size += sys.getsizeof(g._text)
        return size

    def precompute(self, k: int = -1) -> None:
        """Computes up to ``k`` not-yet-built token-mask cache entries now (all of them when
        ``k < 0``), e.g. while the engine runs prefill. Thread-safe."""
        k = max(min(check_k(k), 2**31 - 1), -1)
        _core.check(_core.lib.xgr_compiled_precompute(self._ptr, k), "precomputing masks")

    def serialize_json(self) -> str:
        """Versioned JSON of the grammar and the identity of its tokenizer info (not the
        vocabulary: pass the tokenizer info to :meth:`deserialize_json`; docs/serialization.md)."""
        from .serialization import serialize_compiled_grammar

        return serialize_compiled_grammar(self)

    @staticmethod
    def deserialize_json(json_str: str, tokenizer_info: TokenizerInfo) -> "CompiledGrammar":
        """The compiled grammar of :meth:`serialize_json`'s JSON, compiled again against
        ``tokenizer_info`` (which must be the one it was compiled with). Raises
        InvalidJSONError, DeserializeVersionError or DeserializeFormatError."""
        from .serialization import deserialize_compiled_grammar

        return deserialize_compiled_grammar(json_str, tokenizer_info)

    def __repr__(self) -> str:
        return (
            f"CompiledGrammar(vocab_size={self._tokenizer_info.vocab_size}, "
            f"memory_size_bytes={self.memory_size_bytes})"
        )
