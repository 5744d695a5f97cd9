"""Exceptions raised by the JSON Schema converter. All are ``ValueError`` subclasses, and
``RuntimeError`` ones too: upstream xgrammar raises RuntimeError for a schema it cannot
convert, so callers that catch either keep working."""


class SchemaError(ValueError, RuntimeError):
    """Base class; ``pointer`` is the JSON pointer (``#/...``) of the offending schema."""

    def __init__(self, message: str, pointer: str = "#", keyword: str | None = None):
        self.pointer = pointer
        self.keyword = keyword
        super().__init__(message)


class UnsupportedSchemaError(SchemaError):
    """A keyword or value the converter cannot enforce exactly. With ``lenient=True`` the
    constraint is dropped and reported in ``ConversionResult.warnings`` instead."""


class InvalidSchemaError(SchemaError):
    """The schema is not a valid JSON Schema (wrong keyword types, bad ``$ref``, bad regex)."""


class UnsatisfiableSchemaError(InvalidSchemaError):
    """The schema is valid but no JSON value satisfies it, so no grammar can be emitted."""
