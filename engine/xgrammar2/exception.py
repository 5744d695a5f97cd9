"""Exceptions raised by xgrammar2.

Every error that comes from the C core carries the core's message (which names the problem
and, for grammar text, the line and column). The classes subclass the builtin exception a
caller would naturally catch (ValueError for bad input, MemoryError, RuntimeError for misuse
of state and internal bugs), so code written against upstream xgrammar keeps working. Where
upstream raises RuntimeError for bad input (malformed or meaningless EBNF and regex, a JSON
schema or structural tag it cannot convert), ours are both ValueError and RuntimeError.
"""


class XGrammar2Error(Exception):
    """Base class of every xgrammar2 error."""


class InvalidArgumentError(XGrammar2Error, ValueError, RuntimeError):
    """An argument is out of range or malformed (e.g. a token id outside the vocabulary).
    Both a ValueError and, as upstream's failed argument checks, a RuntimeError."""


class InvalidIndexError(InvalidArgumentError, IndexError):
    """A row index or position is out of range (a ValueError, an IndexError and a
    RuntimeError)."""


class InvalidArgumentRuntimeError(InvalidArgumentError, RuntimeError):
    """An invalid argument where upstream xgrammar raises RuntimeError (a default
    temperature that is not finite and >= 0, a temperatures tensor of the wrong type)."""


class GrammarSyntaxError(XGrammar2Error, ValueError, RuntimeError):
    """Malformed EBNF or regex text; the message carries line and column. (Also a
    RuntimeError, which upstream xgrammar raises for it.)"""


class GrammarSemanticError(XGrammar2Error, ValueError, RuntimeError):
    """Well-formed but meaningless grammar: undefined rule, missing root, bad bounds. (Also
    a RuntimeError, which upstream xgrammar raises for it.)"""


class InvalidUTF8Error(XGrammar2Error, ValueError):
    """Invalid UTF-8 where text is expected."""


class GrammarLimitError(XGrammar2Error, ValueError, RuntimeError):
    """A configured size or work limit was exceeded while compiling or matching. (Also a
    RuntimeError: upstream xgrammar raises RuntimeError when it cannot compile a grammar.)"""


class OutOfMemoryError(XGrammar2Error, MemoryError):
    """The core could not allocate memory."""


class InvalidStateError(XGrammar2Error, RuntimeError):
    """The operation is not valid in the matcher's current state (e.g. rollback too far)."""


class InternalError(XGrammar2Error, RuntimeError):
    """A bug in xgrammar2: please report it with the message."""


# Names kept for compatibility with upstream xgrammar. Upstream raises them as
# RuntimeError; here they are also ValueError because they describe bad input.
class InvalidJSONError(XGrammar2Error, ValueError, RuntimeError):
    """A JSON document (schema, structural tag) is not valid JSON."""


class InvalidJSONSchemaError(XGrammar2Error, ValueError, RuntimeError):
    """A JSON schema is valid JSON but cannot be converted."""


class InvalidStructuralTagError(XGrammar2Error, ValueError, RuntimeError):
    """A structural tag is invalid."""


class DeserializeFormatError(XGrammar2Error, RuntimeError):
    """Serialized data does not follow the expected format."""


class DeserializeVersionError(XGrammar2Error, RuntimeError):
    """Serialized data comes from an incompatible version."""


__all__ = [
    "InvalidArgumentRuntimeError",
    "XGrammar2Error",
    "InvalidArgumentError",
    "InvalidIndexError",
    "GrammarSyntaxError",
    "GrammarSemanticError",
    "InvalidUTF8Error",
    "GrammarLimitError",
    "OutOfMemoryError",
    "InvalidStateError",
    "InternalError",
    "InvalidJSONError",
    "InvalidJSONSchemaError",
    "InvalidStructuralTagError",
    "DeserializeFormatError",
    "DeserializeVersionError",
]
