"""Grammars: EBNF (upstream xgrammar's dialect), regex, JSON schema and the builtin JSON
grammar, combined with union / concat and printed back as EBNF."""

import json
import logging
import warnings
from typing import Any, Dict, Optional, Tuple, Type, Union

from . import _core
from .exception import InvalidJSONError
from .limits import check_input_size, check_json_nesting, check_structural_tag_args, too_deep_error

__all__ = ["Grammar"]


def _schema_to_obj(schema: Any) -> Any:
    """A JSON schema given as str / bytes / dict / bool / pydantic model class -> a Python
    object (dict or bool). Invalid JSON text raises InvalidJSONError (a ValueError)."""
    if isinstance(schema, (str, bytes, bytearray)):
        check_input_size(len(schema), "the JSON schema")
        # The nesting check on the text runs in the core (linear, no Python objects); the
        # same limit as the walk over the parsed value, before json.loads can recurse.
        check_json_nesting(schema, "the JSON schema")
        try:
            return json.loads(schema)
        except RecursionError:  # deeper than Python's recursion limit
            raise too_deep_error("the JSON schema") from None
        except ValueError as e:
            raise InvalidJSONError(f"the JSON schema is not valid JSON: {e}") from e
    if isinstance(schema, (dict, bool)):
        check_json_nesting(schema, "the JSON schema")
        return schema
    if isinstance(schema, type):
        to_schema = getattr(schema, "model_json_schema", None)  # pydantic v2
        if to_schema is None:
            to_schema = getattr(schema, "schema", None)  # pydantic v1
        if callable(to_schema):
            return to_schema()
    raise ValueError(
        "The schema should be a JSON string, a dict or a pydantic model class, got "
        f"{type(schema).__name__}"
    )


def _schema_to_ebnf(schema: Any, *, _warnings_out: Optional[list] = None, **options: Any) -> str:
    # Imported lazily: the JSON-schema front end is a separate module with its own cost.
    from .json_schema import json_schema_to_ebnf

    # ``_key_text`` (GrammarCompiler.compile_json_schema) comes with a schema object that
    # _schema_to_obj has already checked: no second walk over it.
    if not (options.get("_key_text") is not None and isinstance(schema, (dict, bool))):
        schema = _schema_to_obj(schema)
    result = json_schema_to_ebnf(schema, **options)
    if isinstance(result, str):
        return result
    # A ConversionResult: EBNF text plus the constraints not enforced (formats that are
    # annotations; keywords dropped in lenient mode).
    messages = tuple(getattr(result, "warnings", None) or ())
    for message in messages:
        warnings.warn(f"JSON schema: {message}", UserWarning, stacklevel=4)
    if _warnings_out is not None:
        _warnings_out.extend(messages)
    return result.ebnf


def _json_schema_grammar(schema: Any, **options: Any) -> "Grammar":
    """Grammar.from_ebnf of a JSON schema's conversion, carrying the conversion's
    warnings (``Grammar.warnings``)."""
    messages: list = []
    grammar = Grammar.from_ebnf(_schema_to_ebnf(schema, _warnings_out=messages, **options))
    grammar._warnings = tuple(messages)
    return grammar


def _plain_json_schema_grammar(canonical: bytes, max_whitespace_cnt: Optional[int] = None) -> "Optional[Grammar]":
    """The core's grammar of a schema in the plain subset (csrc/front/json_schema_plain.c),
    from its canonical text (UTF-8), for the default options of compile_json_schema (with
    ``max_whitespace_cnt``); None when the schema is outside that subset (the Python
    converter takes it, and says what is wrong with a ``max_whitespace_cnt`` that is not a
    non-negative int32)."""
    mw = max_whitespace_cnt
    if mw is not None and (type(mw) is not int or not 0 <= mw < 2 ** 31):
        return None
    ffi, lib = _core.ffi, _core.lib
    out = ffi.new("xgr_grammar **")
    missing = ffi.new("int32_t *")
    wants = ffi.new("char **")
    wants_len = ffi.new("size_t *")
    mw = -1 if mw is None else mw
    forms, n_forms, found = ffi.NULL, 0, None
    if b'"format":"' in canonical or b'"pattern":"' in canonical:  # as the converter writes them
        from .json_schema import core_strings

        found = core_strings.members(canonical)
        forms, n_forms = core_strings.cached_table(found)  # (NULL: not built yet)
    # In the subset but for its formats, patterns and the type parts it leaves to the
    # converter ("schema" forms, whose keys it names in `wants`): their entries, then again.
    # A second round can ask for another key: a format found to be an annotation leaves a
    # pattern's intersection with a length without it.
    have = found or frozenset()
    built = forms != ffi.NULL
    parts_have: frozenset = frozenset()
    part_rows: list = []
    keep: list = []  # (a table with parts: its buffers, alive while the core reads them)
    for _ in range(4):
        _core.check(lib.xgr_json_schema_plain(canonical, len(canonical), mw, forms, n_forms, out, missing, wants,
                                              wants_len), "converting a JSON schema")
        asked_text = b""
        if wants[0] != ffi.NULL:
            asked_text = ffi.buffer(wants[0], wants_len[0])[:]
            lib.xgr_free(wants[0])
        if out[0] != ffi.NULL or missing[0] <= 0:
            break
        from .json_schema import core_strings

        full = have | (core_strings.wanted(asked_text) if asked_text else frozenset())
        if not full or (built and full == have):
            break  # (nothing new to ask the converter: left to Python)
        asked_parts = frozenset(m for m in full if m[0] == b"part")
        if asked_parts:  # (subschemas the converter writes, in one conversion of the document)
            if asked_parts != parts_have:
                parts_have, part_rows = asked_parts, core_strings.part_rows(canonical, asked_parts, max_whitespace_cnt)
                if part_rows[0][2] is None:
                    break  # (refused: the whole schema goes to Python, which says why)
            forms, n_forms, keep = core_strings.with_parts(full, part_rows)
        else:
            forms, n_forms = core_strings.table(full)
        have, built = full, True
        if not n_forms:
            break
    if out[0] == ffi.NULL:
        return None
    grammar = Grammar._from_out(out)
    grammar._warnings = ()
    if found and core_strings.needs_warnings(found):  # formats left as annotations: say where
        warns = core_strings.format_warnings(json.loads(canonical))
        if warns:  # (logged as json_schema_to_ebnf does; compiler._plain_schema_grammar also warns)
            grammar._warnings = tuple(warns)
            logging.getLogger("xgrammar2.json_schema").warning(
                "JSON schema converted with %d constraint(s) not enforced: %s", len(warns), "; ".join(warns))
    return grammar


def _json_schema_options(
    any_whitespace: bool,
    indent: Optional[Union[int, str]],
    separators: Optional[Tuple[str, str]],
    strict_mode: bool,
    max_whitespace_cnt: Optional[int],
    lenient: bool,
    extra: Dict[str, Any],
) -> Dict[str, Any]:
    """The keyword options of the JSON-schema front end (which validates their values)."""
    if isinstance(separators, list):
        separators = tuple(separators)
    opts = dict(
        any_whitespace=bool(any_whitespace),
        indent=indent,
        separators=separators,
        strict_mode=bool(strict_mode),
        max_whitespace_cnt=max_whitespace_cnt,
        lenient=bool(lenient),
    )
    opts.update(extra)
    return opts


class Grammar:
    """A context-free grammar, immutable and shareable across threads.

    Text is EBNF in upstream xgrammar's dialect (GBNF-like: ``rule ::= ...``, ``|``, ``*``,
    ``+``, ``?``, ``{m,n}``, character classes, lookahead ``(= ...)``). ``str(grammar)``
    prints canonical EBNF that :meth:`from_ebnf` parses back.
    """

    __slots__ = ("_ptr", "_text", "_warnings", "__weakref__")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "Grammar cannot be constructed directly: use Grammar.from_ebnf, from_regex, "
            "from_json_schema or builtin_json_grammar"
        )

    @classmethod
    def _from_ptr(cls, ptr: Any, text: Optional[str] = None) -> "Grammar":
        obj = object.__new__(cls)
        obj._ptr = ptr
        obj._text = text
        obj._warnings = ()
        return obj

    @classmethod
    def _from_out(cls, out: Any) -> "Grammar":
        return cls._from_ptr(_core.ffi.gc(out[0], _core.lib.xgr_grammar_release))

    @classmethod
    def _borrowed(cls, ptr: Any) -> "Grammar":
        """Wraps a borrowed `const xgr_grammar *`, taking a reference of its own."""
        lib, ffi = _core.lib, _core.ffi
        raw = ffi.cast("xgr_grammar *", ptr)
        lib.xgr_grammar_retain(raw)
        return cls._from_ptr(ffi.gc(raw, lib.xgr_grammar_release))

    # ---- printing -----------------------------------------------------------------------

    def __str__(self) -> str:
        """The grammar as canonical EBNF."""
        if self._text is None:
            ffi, lib = _core.ffi, _core.lib
            out = ffi.new("char **")
            out_len = ffi.new("size_t *")
            _core.check(lib.xgr_grammar_to_ebnf(self._ptr, out, out_len), "printing the grammar")
            self._text = _core.take_string(out, out_len).decode("utf-8", "replace")
        return self._text

    def to_string(self) -> str:
        """Same as ``str(grammar)``."""
        return str(self)

    @property
    def warnings(self) -> Tuple[str, ...]:
        """(xgrammar2) What the conversion from a JSON schema did not enforce, one message
        per constraint naming its JSON pointer: ``format`` values that are annotations
        (e.g. ``#/properties/v: format 'semver' is not enforced (...)``) and, with
        ``lenient=True``, dropped keywords. Empty for every other grammar."""
        return self._warnings

    def __repr__(self) -> str:
        text = str(self)
        if len(text) > 200:
            text = text[:200] + "..."
        return f"Grammar({text!r})"

    # ---- constructors -------------------------------------------------------------------

    @staticmethod
    def from_ebnf(ebnf_string: str, *, root_rule_name: str = "root") -> "Grammar":
        """Parses a grammar in EBNF (upstream xgrammar / GBNF dialect).

        Parameters
        ----------
        ebnf_string : str
            The grammar text.

        root_rule_name : str, default: "root"
            The start rule.

        Raises
        ------
        GrammarSyntaxError
            Malformed text (the message has line and column). A ValueError.
        GrammarSemanticError
            Undefined rule, missing root rule, bad repetition bounds. A ValueError.
        """
        ffi, lib = _core.ffi, _core.lib
        src = _core.to_bytes(ebnf_string, "ebnf_string")
        check_input_size(len(src), "the EBNF grammar")
        root = _core.to_bytes(root_rule_name, "root_rule_name")
        if not root:
            raise ValueError("root_rule_name must not be empty")
        out = ffi.new("xgr_grammar **")
        _core.check(
            lib.xgr_grammar_from_ebnf(src, len(src), root, len(root), out), "parsing EBNF"
        )
        return Grammar._from_out(out)

    @staticmethod
    def from_regex(regex_string: str, *, print_converted_ebnf: bool = False) -> "Grammar":
        """A grammar matching exactly the strings of a regular expression (anchored at both
        ends; byte- and UTF-8-aware). Lookarounds and backreferences are rejected.

        Raises
        ------
        GrammarSyntaxError
            Malformed or unsupported regex. A ValueError.
        """
        ffi, lib = _core.ffi, _core.lib
        src = _core.to_bytes(regex_string, "regex_string")
        check_input_size(len(src), "the regex")
        out = ffi.new("xgr_grammar **")
        _core.check(lib.xgr_grammar_from_regex(src, len(src), out), "parsing the regex")
        g = Grammar._from_out(out)
        if print_converted_ebnf:
            print(str(g))
        return g

    @staticmethod
    def builtin_json_grammar() -> "Grammar":
        """The builtin JSON grammar (RFC 8259): as upstream xgrammar's, a JSON object or
        array at the top level (any value inside), no whitespace around it."""
        ffi, lib = _core.ffi, _core.lib
        out = ffi.new("xgr_grammar **")
        _core.check(lib.xgr_grammar_builtin_json(out), "building the JSON grammar")
        return Grammar._from_out(out)

    @staticmethod
    def from_json_schema(
        schema: Union[str, Type[Any], Dict[str, Any]],
        *,
        any_whitespace: bool = True,
        indent: Optional[int] = None,
        separators: Optional[Tuple[str, str]] = None,
        strict_mode: bool = True,
        max_whitespace_cnt: Optional[int] = None,
        print_converted_ebnf: bool = False,
        any_order: bool = False,
        lenient: bool = False,
        **options: Any,
    ) -> "Grammar":
        """A grammar of the JSON documents that a JSON schema accepts.

        Known ``format`` values are enforced; any other is an annotation (JSON Schema
        2020-12): not enforced, and reported in the result's :attr:`warnings` and as a
        ``UserWarning``.

        Parameters
        ----------
        schema : Union[str, Type[BaseModel], Dict[str, Any]]
            The schema as JSON text, a dict, or a pydantic model class.

        any_whitespace : bool, default: True
            Allow any whitespace between tokens (bounded by ``max_whitespace_cnt``); when
            False, ``indent`` and ``separators`` fix the layout as in ``json.dumps``.

        indent : Optional[int], default: None
            Indentation when ``any_whitespace`` is False; None = one line.

        separators : Optional[Tuple[str, str]], default: None
            (item separator, key separator) when ``any_whitespace`` is False; defaults to
            ``(",", ": ")`` with indent and ``(", ", ": ")`` without, like ``json.dumps``.

        strict_mode : bool, default: True
            Disallow properties and items the schema does not describe (as if
            ``unevaluatedProperties`` / ``unevaluatedItems`` were false).

        max_whitespace_cnt : Optional[int], default: None
            The most whitespace characters allowed at one place; None = unbounded.

        print_converted_ebnf : bool, default: False
            Print the generated EBNF (debugging).

        any_order : bool, default: False
            Object properties may appear in any order. Unlike upstream, exactly: required
            properties present, none twice (docs/json-schema.md, "any_order").

        lenient : bool, default: False
            (xgrammar2) Unsupported keywords warn and are dropped instead of raising.

        **options
            Further options passed to ``xgrammar2.json_schema.json_schema_to_ebnf``.

        Raises
        ------
        InvalidJSONError
            ``schema`` is text that is not JSON. A ValueError.
        ValueError
            The schema uses an unsupported keyword (unless ``lenient``) or is invalid.
        """
        if any_order:
            options = dict(options, any_order=True)
        opts = _json_schema_options(
            any_whitespace, indent, separators, strict_mode, max_whitespace_cnt, lenient, options
        )
        messages: list = []
        ebnf = _schema_to_ebnf(schema, _warnings_out=messages, **opts)
        if print_converted_ebnf:
            print(ebnf)
        grammar = Grammar.from_ebnf(ebnf)
        grammar._warnings = tuple(messages)
        return grammar

    @staticmethod
    def from_lark(
        lark_string: str,
        *,
        tokenizer_info: Optional[Any] = None,
        named_grammars: Optional[Dict[str, Union["Grammar", str]]] = None,
    ) -> "Grammar":
        """A grammar from Lark syntax (llguidance's dialect, as upstream xgrammar reads it;
        see docs/lark.md). The grammar must define a ``start`` rule.

        Parameters
        ----------
        lark_string : str
            The Lark grammar source.

        tokenizer_info : Optional[TokenizerInfo]
            Resolves named special tokens (``<|eot_id|>``), ``<[*]>`` and ``<[^...]>``.

        named_grammars : Optional[Dict[str, Union[Grammar, str]]]
            Grammars referenced as ``@name`` (keys without the ``@``): Grammar objects or
            Lark sources with their own ``start`` rule.

        Raises
        ------
        xgrammar2.lark.LarkGrammarError
            A bad or unsupported grammar; the message starts ``Lark error at line L,
            column C:``. A ValueError and a RuntimeError.
        """
        from .lark import grammar_from_lark

        return grammar_from_lark(lark_string, tokenizer_info=tokenizer_info,
                                 named_grammars=named_grammars)

    @staticmethod
    def from_structural_tag(*args: Any, **kwargs: Any) -> "Grammar":
        """Creates a grammar from a structural tag (upstream xgrammar's format): one tag
        (JSON text, dict or ``xgrammar2.structural_tag.StructuralTag``), or the legacy
        ``(tags, triggers)`` pair. See :mod:`xgrammar2.structural_tag`.

        Raises
        ------
        ValueError
            A malformed tag (the message names its JSON path, e.g. ``$.format.tags[2].end``).
        NotImplementedError
            A token-level format, or a feature xgrammar2 cannot express yet.
        """
        from .structural_tag.converter import ebnf_from_api_args

        check_structural_tag_args(args, kwargs)
        return Grammar.from_ebnf(ebnf_from_api_args(*args, **kwargs))

    # ---- combinators --------------------------------------------------------------------

    @staticmethod
    def _combine(grammars: Tuple["Grammar", ...], what: str) -> "Grammar":
        if len(grammars) == 1 and isinstance(grammars[0], (list, tuple)):
            grammars = tuple(grammars[0])  # also accept a single list, like upstream's C++ API
        if not grammars:
            raise ValueError(f"Grammar.{what} needs at least one grammar")
        for g in grammars:
            if not isinstance(g, Grammar):
                raise TypeError(f"Grammar.{what} takes Grammar objects, got {type(g).__name__}")
        ffi, lib = _core.ffi, _core.lib
        arr = ffi.new("xgr_grammar *[]", [g._ptr for g in grammars])
        out = ffi.new("xgr_grammar **")
        fn = lib.xgr_grammar_union if what == "union" else lib.xgr_grammar_concat
        _core.check(fn(arr, len(grammars), out), f"Grammar.{what}")
        return Grammar._from_out(out)

    @staticmethod
    def union(*grammars: "Grammar") -> "Grammar":
        """A grammar matching any one of the grammars (``g1 | g2 | ...``)."""
        return Grammar._combine(grammars, "union")

    @staticmethod
    def concat(*grammars: "Grammar") -> "Grammar":
        """A grammar matching the grammars one after another (``g1 g2 ...``)."""
        return Grammar._combine(grammars, "concat")

    def __reduce__(self):
        # Through serialize_json: keeps the root rule's name and the warnings.
        return (Grammar.deserialize_json, (self.serialize_json(),))

    # ---- serialization (xgrammar2/serialization.py, docs/serialization.md) ---------------

    def serialize_json(self) -> str:
        """The grammar as versioned JSON (its canonical EBNF, root rule and warnings)."""
        from .serialization import serialize_grammar

        return serialize_grammar(self)

    @staticmethod
    def deserialize_json(json_string: str) -> "Grammar":
        """The grammar of :meth:`serialize_json`'s JSON. Raises InvalidJSONError (not JSON),
        DeserializeVersionError (other ``__VERSION__``) or DeserializeFormatError."""
        from .serialization import deserialize_grammar

        return deserialize_grammar(json_string)

    # ---- comparison ---------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Grammar):
            return NotImplemented
        return self._ptr == other._ptr or str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))
