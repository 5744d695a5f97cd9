"""Lark grammars (llguidance's dialect, as upstream xgrammar 0.2.8 reads it) for xgrammar2.

``Grammar.from_lark`` and ``GrammarCompiler.compile_lark`` are the public entry points; this
package does the work: a lexer with line and column (:mod:`.lexer`), a parser to a syntax
tree (:mod:`.parser`, :mod:`.ast`), and a lowering to EBNF in upstream xgrammar's dialect
(:mod:`.lower`, with :mod:`.regex` for ``/regex/`` terminals, :mod:`.common` for
``%import common.X`` and :mod:`.automaton` for lazy rules). See docs/lark.md.

Every problem in a grammar raises :class:`LarkGrammarError` (a ValueError and a
RuntimeError) whose message starts ``Lark error at line L, column C: ...``.
"""

from typing import Any, Dict, Optional, Union

from .errors import LarkGrammarError
from .lower import LarkLowering, lower_lark

__all__ = ["LarkGrammarError", "lark_to_ebnf", "grammar_from_lark", "lower_lark",
           "LarkLowering"]


def lark_to_ebnf(lark_string: str, *, tokenizer_info: Any = None,
                 named_grammars: Optional[Dict[str, Any]] = None) -> str:
    """The EBNF (root rule ``root``) that ``Grammar.from_lark`` compiles for ``lark_string``.

    ``tokenizer_info`` resolves named special tokens (``<|eot_id|>``), the wildcard ``<[*]>``
    and negated token sets; ``named_grammars`` maps the names used as ``@name`` (without the
    ``@``) to Grammar objects or Lark sources."""
    return lower_lark(lark_string, tokenizer_info=tokenizer_info,
                      named_grammars=named_grammars).ebnf


def grammar_from_lark(lark_string: str, *, tokenizer_info: Any = None,
                      named_grammars: Optional[Dict[str, Union[Any, str]]] = None) -> Any:
    """``Grammar.from_lark``: the Grammar of a Lark source (its ``warnings`` list what is
    accepted but not enforced: JSON-schema annotations, unrecorded captures)."""
    from ..exception import GrammarSemanticError, GrammarSyntaxError
    from ..grammar import Grammar
    from ..limits import check_input_size

    if isinstance(lark_string, str):
        check_input_size(len(lark_string), "the Lark grammar")
    result = lower_lark(lark_string, tokenizer_info=tokenizer_info, named_grammars=named_grammars)
    try:
        grammar = Grammar.from_ebnf(result.ebnf)
    except (GrammarSyntaxError, GrammarSemanticError) as e:
        # The lowering writes valid EBNF; a failure here is a limit or an xgrammar2 bug.
        raise LarkGrammarError(f"the grammar could not be built: {e}", 1, 1) from e
    grammar._warnings = result.warnings
    return grammar
