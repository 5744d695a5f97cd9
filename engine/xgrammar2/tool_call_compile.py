"""The tool-call compile path of GrammarCompiler: a structural tag's JSON-schema contents (one
per tool) are lowered once to linkable fragments, kept in the compiler's tag table
(structural_tag/link.py, C compile/tag_table.c), and linked into each request's automata by
the core (compile/link.c), without converting or parsing the tools seen before again. The
functions take the GrammarCompiler (its tag table, options and special-token spelling)."""

import json
from typing import Any, Callable, Dict, Optional, Tuple

from . import _core
from . import limits as _limits
from .compiled_grammar import CompiledGrammar
from .grammar import Grammar, _plain_json_schema_grammar
from .json_key import canonical_dumps
from .limits import check_json_nesting
from .structural_tag.converter import format_to_ebnf, format_to_linked_ebnf
from .structural_tag.fast_link import LinkedEBNF, triggered_shape
from .structural_tag.link import read_linked, split
from .tokenizer_info import TokenizerInfo

__all__ = ["LazyResolver", "compile_tag_text", "make_fragment", "structural_tag_key"]


#: Stand-in rule name -> its C string. Names are unique to their fragment (link.py numbers
#: them) and recur with it in every request that reuses the tool, so each is encoded once.
_C_NAMES: Dict[str, Any] = {}
_C_NAMES_MAX = 1 << 14


def c_name(name: str) -> Any:
    c = _C_NAMES.get(name)
    if c is None:
        if len(_C_NAMES) >= _C_NAMES_MAX:
            _C_NAMES.clear()
        c = _C_NAMES[name] = _core.ffi.new("char[]", name.encode())
    return c


class LazyResolver:
    """Builds the tokenizer's token resolver (an O(vocabulary) table) only when a structural
    tag actually names a token."""

    def __init__(self, tokenizer_info: TokenizerInfo) -> None:
        self._info = tokenizer_info
        self.vocab_size = tokenizer_info.vocab_size

    def _get(self):
        from .structural_tag.tokens import resolver_for

        return resolver_for(self._info)

    def token_id(self, token: str):
        return self._get().token_id(token)

    def text(self, token_id: int):
        return self._get().text(token_id)


#: Skeletons of requests whose every tag was seen before (a tool list's JSON with each tag
#: replaced by null), with the nesting limit they were checked under, to what the core's
#: direct build needs of them (:func:`skeleton_shape`). They repeat across requests (one
#: per list length and options), and parsing one was a sizeable part of such a request.
_SKELETONS: Dict[Tuple[bytes, int, int], Optional[tuple]] = {}
_SKELETONS_MAX = 256
_UNSEEN = object()


def skeleton_shape(skeleton: bytes, n_tags: int) -> Optional[tuple]:
    """(trigger, loop, excludes joined, their offsets, how many) for xgr_compile_tag_hits
    when ``skeleton`` is the direct shape (fast_link.triggered_shape); None otherwise.
    Raises GrammarLimitError for a skeleton nested deeper than ``max_json_nesting`` (the
    cached tags were checked when first read; what is parsed now is the rest)."""
    check_json_nesting(skeleton, "the structural tag")
    try:
        shape = triggered_shape(json.loads(skeleton), n_tags)
    except ValueError:
        return None
    if shape is None:
        return None
    trigger, loop, excludes = shape
    try:
        trig = trigger.encode()
        excl = [e.encode() for e in excludes]
    except UnicodeEncodeError:  # the text's parser names it
        return None
    offsets = [0]
    for e in excl:
        offsets.append(offsets[-1] + len(e))
    if offsets[-1] >= 1 << 32:
        return None
    return trig, 1 if loop else 0, b"".join(excl), _core.ffi.new("uint32_t[]", offsets), len(excl)


def structural_tag_key(args: tuple, kwargs: dict) -> Optional[Tuple[str, str]]:
    """The compile-cache key of one structural tag (JSON text, dict or pydantic model): what
    it was given as ("s" text, "d" dict, "m:" + the model's class) and its JSON text (the
    text itself when given as text: a request's text is not copied to key it); None when
    the call is not a single plain tag (the legacy pair, a custom JSON-schema converter):
    those are keyed by their EBNF."""
    if len(args) != 1 or set(kwargs) - {"token_resolver"}:
        return None
    tag = args[0]
    try:
        if isinstance(tag, str):
            return "s", tag
        if isinstance(tag, (bytes, bytearray)):
            return "s", tag.decode("utf-8")
        if isinstance(tag, dict):
            return "d", json.dumps(tag, separators=(",", ":"))
        dump = getattr(tag, "model_dump_json", None)
        if dump is not None:
            return "m:" + type(tag).__name__, dump(by_alias=True)
    except (TypeError, ValueError, UnicodeDecodeError):
        return None
    return None


def _plain_fragment_grammar(content: Any) -> Optional[Grammar]:
    """The core's grammar of a tool's schema (csrc/front/json_schema_plain.c) when the
    content is JSON with the converter's defaults (strict objects, no ``excludes`` or
    ``any_order``) and its schema is in the core's plain subset; None otherwise (the Python
    converter takes it, and names any error). The grammar accepts what ``format_to_ebnf``'s
    does (tests/python/test_plain_fragments.py walks both)."""
    if (content.style != "json" or content.any_order or content.excludes or content.strict is not True):
        return None
    try:
        canonical = canonical_dumps(content.schema)
    except ValueError:
        return None
    return _plain_json_schema_grammar(canonical, content.max_whitespace_cnt)


def make_fragment(compiler: Any, content: Any) -> Tuple[Any, int]:
    """A structural tag's JSON-schema content lowered to a linkable fragment, and its
    size in bytes. Errors as converting the content in the whole tag."""

    ffi, lib = _core.ffi, _core.lib
    g = _plain_fragment_grammar(content)
    if g is None:
        g = Grammar.from_ebnf(format_to_ebnf(content))
    out = ffi.new("xgr_fragment **")
    _core.check(lib.xgr_fragment_new(compiler._spelled(g), compiler._opts, out),
                "compiling the grammar")
    frag = ffi.gc(out[0], lib.xgr_fragment_release)
    return frag, int(lib.xgr_fragment_memory(frag))


def compile_tag_text(compiler: Any, text: str, resolver: Any,
                     rebuild: Callable[[], Grammar]) -> CompiledGrammar:
    """A structural tag given as JSON text, each tag's JSON-schema content linked as a
    fragment built once per distinct tag text (structural_tag/link.py); a text that
    cannot be split by tags compiles as a whole."""

    ffi, lib = _core.ffi, _core.lib
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        raw = b""
    if raw:  # every tag seen before, the commonest request: two calls into the core
        hit = compiler._tags.resolve(raw)
        compiled = compile_hits(compiler, hit, rebuild) if hit is not None else None
        if compiled is not None:
            return compiled
    spans = split(raw) if raw else None
    node = read_linked(raw, spans, compiler._tags, compiler._fragment) if spans else None
    if node is None:  # the whole conversion, which is what rebuild does
        check_json_nesting(text, "the structural tag")
        return compiler._compile(rebuild(), rebuild)
    if isinstance(node, LinkedEBNF):  # every tag seen before, the commonest shape
        grammar, links = node.grammar(), node.links
    else:
        ebnf, links = format_to_linked_ebnf(node, token_resolver=resolver)
        grammar = Grammar.from_ebnf(ebnf)
    if not links:
        return compiler._compile(grammar, rebuild)
    names = [c_name(name) for name, _ in links]
    frags = [frag for _, frag in links]
    out = ffi.new("xgr_compiled **")
    _core.check(
        lib.xgr_compile_linked(compiler._spelled(grammar), names, frags, len(links),
                               compiler._tokenizer_info._handle(), compiler._opts_drop, out),
        "compiling the grammar",
    )
    ptr = ffi.gc(out[0], lib.xgr_compiled_release)
    return CompiledGrammar._create(ptr, compiler._tokenizer_info, None, rebuild, linked=True)


def compile_hits(compiler: Any, hit: Tuple[Any, bytes, int],
                 rebuild: Callable[[], Grammar]) -> Optional[CompiledGrammar]:
    """A request whose every tag the tag table resolved (``TagCache.resolve``), compiled
    by the core from their records when its skeleton is the direct shape
    (fast_link.py); None for any other shape, which goes the general way. The grammar
    is the one ``LinkedEBNF.grammar`` builds for the same request."""
    hits, skeleton, n = hit
    ffi, lib = _core.ffi, _core.lib
    key = (skeleton, n, _limits.json_nesting_limit())
    shape = _SKELETONS.get(key, _UNSEEN)
    if shape is _UNSEEN:
        shape = skeleton_shape(skeleton, n)  # raises as reading the text would
        if len(_SKELETONS) >= _SKELETONS_MAX:
            _SKELETONS.clear()
        _SKELETONS[key] = shape
    if shape is None:
        return None
    trig, loop, excl, offsets, n_excl = shape
    sp = compiler._tokenizer_info._special_spellings() or (ffi.NULL, ffi.NULL, ffi.NULL, 0)
    out = ffi.new("xgr_compiled **")
    _core.check(lib.xgr_compile_tag_hits(
        hits, trig, len(trig), excl, offsets, n_excl, loop, sp[0], sp[1], sp[2], sp[3],
        compiler._tokenizer_info._handle(), compiler._opts_drop, out), "compiling the grammar")
    if out[0] == ffi.NULL:
        return None
    compiler._tags.count_hits(n)
    ptr = ffi.gc(out[0], lib.xgr_compiled_release)
    return CompiledGrammar._create(ptr, compiler._tokenizer_info, None, rebuild, linked=True)
