"""GrammarCompiler: compiles grammars against a tokenizer into CompiledGrammar objects
(compiled_grammar.py), cached in a byte-bounded LRU (compile_cache.py); structural tags take
the tool-call linking path (tool_call_compile.py)."""

import concurrent.futures
import json
import logging
import os
import threading
import warnings
from typing import Any, Callable, Dict, Hashable, Optional, Tuple, Type, Union

from . import _core, gc_pause
from .background import BackgroundPrecompute, check_k
from .compile_cache import CompileCache
from .compiled_grammar import CompiledGrammar
from .disk_cache import DiskCache, resolve_cache_dir, vocab_fingerprint
from .grammar import (Grammar, _json_schema_grammar, _json_schema_options, _plain_json_schema_grammar,
                      _schema_to_obj)
from .json_key import KeyMismatch, canonical_dumps, canonical_schema_text
from .limits import check_input_size, check_structural_tag_args, json_nesting_limit
from .matcher import _grammar_consts
from .structural_tag.converter import ebnf_from_api_args
from .structural_tag.link import TagCache
from .tokenizer_info import TokenizerInfo
from .tool_call_compile import LazyResolver, compile_tag_text, make_fragment, structural_tag_key

__all__ = ["CompiledGrammar", "GrammarCompiler", "DEFAULT_CACHE_LIMIT_BYTES"]

logger = logging.getLogger(__name__)

#: The cache budget used when ``cache_limit_bytes`` is not given: finite, so a server that
#: sees an unbounded stream of distinct schemas keeps a flat memory profile.
DEFAULT_CACHE_LIMIT_BYTES = 512 * 1024 * 1024

_UNSET = object()  # compile_json_schema: the canonical text was not made yet


def _opt_int(value: Optional[int], name: str, default: int = 0) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int or None, got {type(value).__name__}")
    if not -1 <= value <= 2**31 - 1:
        raise ValueError(f"{name} is out of range: {value}")
    return value


_PLAIN_OPTS = frozenset(["any_whitespace", "indent", "separators", "strict_mode", "max_whitespace_cnt",
                         "lenient"])


def _plain_schema_grammar(canonical: bytes, opts: Dict[str, Any]) -> Optional[Grammar]:
    """The core's grammar of a schema in its plain subset (csrc/front/json_schema_plain.c:
    listed properties, arrays, scalar types and enums), for the converter options it serves
    (any whitespace, strict mode, max_whitespace_cnt; lenient changes nothing there); None
    otherwise, and for schemas outside the subset: the Python converter takes those."""
    if (opts.keys() != _PLAIN_OPTS or opts["any_whitespace"] is not True or opts["indent"] is not None
            or opts["separators"] is not None or opts["strict_mode"] is not True):
        return None
    grammar = _plain_json_schema_grammar(canonical, opts["max_whitespace_cnt"])
    for message in grammar.warnings if grammar is not None else ():
        # (as the converter's path warns, grammar._schema_to_ebnf; a tool's fragment only logs)
        warnings.warn(f"JSON schema: {message}", UserWarning, stacklevel=3)
    return grammar


def _schema_grammar(canonical: bytes, opts: Dict[str, Any], parsed: Any = _UNSET) -> Grammar:
    """The grammar of the schema whose canonical text (UTF-8) is ``canonical``: the core's for
    a plain schema (:func:`_plain_schema_grammar`), else the Python converter's, of ``parsed``
    when given (the same schema, already parsed) or of the text parsed again."""
    plain = _plain_schema_grammar(canonical, opts)
    if plain is not None:
        return plain
    text = canonical.decode("utf-8", "surrogatepass")
    return _json_schema_grammar(json.loads(text) if parsed is _UNSET else parsed, _key_text=text, **opts)


class GrammarCompiler:
    """Compiles grammars against one tokenizer into :class:`CompiledGrammar` objects, caching
    the results.

    Compilation releases the GIL, so several threads may compile at once; the cache is
    thread-safe and coalesces concurrent compiles of the same input.
    """

    def __init__(
        self,
        tokenizer_info: TokenizerInfo,
        *,
        max_threads: int = 8,
        cache_enabled: bool = True,
        cache_limit_bytes: Optional[int] = None,
        inline_max_states: Optional[int] = None,
        repeat_threshold: Optional[int] = None,
        precompute: bool = False,
        max_rules: Optional[int] = None,
        max_fsm_states: Optional[int] = None,
        max_row_items: Optional[int] = None,
        max_step_work: Optional[int] = None,
        cross_grammar_cache: bool = True,
        context_min_uncertain: Optional[int] = None,
        cache_dir: Union[None, bool, str, "os.PathLike[str]"] = None,
        cache_dir_limit_bytes: Optional[int] = None,
    ) -> None:
        """Constructs the compiler.

        Parameters
        ----------
        tokenizer_info : TokenizerInfo
            The tokenizer to compile against.

        max_threads : int, default: 8
            Accepted for compatibility with upstream. Each compile runs on its calling thread
            (with the GIL released); use several threads to compile in parallel.

        cache_enabled : bool, default: True
            Whether to cache compiled grammars.

        cache_limit_bytes : Optional[int], default: None
            The cache's memory budget in bytes; -1 = unbounded (upstream's default), None =
            ``DEFAULT_CACHE_LIMIT_BYTES`` (512 MiB). Least recently used grammars are dropped
            first; the budget may be exceeded slightly while masks are being built.

        inline_max_states, repeat_threshold, precompute, max_rules, max_fsm_states,
        max_row_items, max_step_work
            (xgrammar2) Compile options of the core (see ``xgr_compile_options`` in
            ``xgr2.h``); None = the core's default. ``precompute=True`` builds every token
            mask at compile time instead of on first use. The ``max_*`` limits (defaults in
            ``docs/limits.md``) make too-large grammars fail with GrammarLimitError, and
            too-ambiguous ones fail at the token that would need more parser work than
            ``max_step_work`` per byte.

        cross_grammar_cache : bool, default: True
            (xgrammar2) Share context-free token-mask cache entries with every other compiled
            grammar in the process whose rule has the same structure (see
            :func:`xgrammar2.get_cross_grammar_cache_stats`). False keeps them private.

        context_min_uncertain : Optional[int], default: None
            (xgrammar2) A parser state whose context-free mask leaves more uncertain tokens
            than this gets masks computed with its caller on the stack (default 256; -1 =
            always).

        cache_dir : None, bool, str or PathLike, default: None
            (xgrammar2) A directory where compiled grammars are kept across processes and
            restarts (docs/disk-cache.md): on a compile-cache miss the grammar is read from
            there when another process (or an earlier run) compiled it, and a grammar
            compiled here is written there in the background. None (or True) = the
            directory named by ``$XGRAMMAR2_CACHE_DIR`` if set, else none; False or "" =
            none. Only used while ``cache_enabled``.

        cache_dir_limit_bytes : Optional[int], default: None
            (xgrammar2) The directory's byte budget (None = 1 GiB); the least recently used
            files are removed beyond it, by whichever process writes.
        """
        if not isinstance(tokenizer_info, TokenizerInfo):
            raise ValueError(
                "Please convert the tokenizer to TokenizerInfo before passing it to "
                "GrammarCompiler."
            )
        if isinstance(max_threads, bool) or not isinstance(max_threads, int) or max_threads < 1:
            raise ValueError(f"max_threads must be a positive int, got {max_threads!r}")
        if cache_limit_bytes is None:
            cache_limit_bytes = DEFAULT_CACHE_LIMIT_BYTES
        if isinstance(cache_limit_bytes, bool) or not isinstance(cache_limit_bytes, int):
            raise TypeError("cache_limit_bytes must be an int")
        if cache_limit_bytes < -1:
            raise ValueError(f"cache_limit_bytes must be -1 or >= 0, got {cache_limit_bytes}")
        _core.require_core()
        self._tokenizer_info = tokenizer_info
        self._max_threads = max_threads
        self._cache_enabled = bool(cache_enabled)
        self._cache_limit_bytes = cache_limit_bytes
        # Structural tags' tags with their contents lowered once (structural_tag/link.py)
        # get an eighth of the budget (a tool's automata are small next to its masks), the
        # compiled grammars the rest, so both together stay within cache_limit_bytes.

        tags_limit = cache_limit_bytes // 8 if cache_limit_bytes >= 0 else -1
        self._cache = CompileCache(cache_limit_bytes - tags_limit if cache_limit_bytes >= 0 else -1)
        self._tags = TagCache(tags_limit)
        opts = _core.ffi.new("xgr_compile_options *")
        opts.max_rules = _opt_int(max_rules, "max_rules")
        opts.max_fsm_states = _opt_int(max_fsm_states, "max_fsm_states")
        opts.inline_max_states = _opt_int(inline_max_states, "inline_max_states")
        opts.repeat_threshold = _opt_int(repeat_threshold, "repeat_threshold")
        opts.precompute = 1 if precompute else 0
        opts.max_row_items = _opt_int(max_row_items, "max_row_items")
        opts.max_step_work = _opt_int(max_step_work, "max_step_work")
        opts.cross_grammar_cache = 1 if cross_grammar_cache else -1
        opts.context_min_uncertain = _opt_int(context_min_uncertain, "context_min_uncertain")
        self._opts = opts
        # The same options for grammars the cache can rebuild (see _compile).
        self._opts_drop = _core.ffi.new("xgr_compile_options *", opts[0])
        self._opts_drop.drop_grammar = 1
        # compile_json_schema: (option values with their types) -> (options, their key text)
        self._opts_memo: Dict[Tuple[Any, ...], Tuple[Dict[str, Any], str]] = {}
        self._default_opts: Optional[Tuple[Dict[str, Any], str]] = None  # the same, defaults
        self._disk: Optional[DiskCache] = None
        disk_path = resolve_cache_dir(cache_dir)
        if disk_path is not None and self._cache_enabled:
            lowering = f"inline={opts.inline_max_states};repeat={opts.repeat_threshold}"
            self._disk = DiskCache(disk_path, vocab_fingerprint(tokenizer_info),
                                   lowering.encode("ascii"), cache_dir_limit_bytes)
        elif cache_dir_limit_bytes is not None:
            DiskCache._check_limit(cache_dir_limit_bytes)
        self._pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self._pool_lock = threading.Lock()
        self._background: Optional[BackgroundPrecompute] = None
        # Build the vocabulary handle now so that the first compile is not slower.
        tokenizer_info._handle()
        if self._disk is not None:  # load the directory's mask entry packs, then preload its grammars
            # (into this compile cache where the preload can, see adopt_preloaded)
            self._disk.preload.adopt_into(self)
            self._disk.prefetch_packs(tokenizer_info._handle(), self._opts)

    # ---- properties ---------------------------------------------------------------------

    @property
    def tokenizer_info(self) -> TokenizerInfo:
        return self._tokenizer_info

    @property
    def max_threads(self) -> int:
        return self._max_threads

    @property
    def cache_enabled(self) -> bool:
        return self._cache_enabled

    @property
    def cache_limit_bytes(self) -> int:
        """The cache's memory budget in bytes; -1 when unbounded."""
        return self._cache_limit_bytes

    # ---- core ---------------------------------------------------------------------------

    def _compile(self, grammar: Grammar,
                 rebuild: Optional[Callable[[], Grammar]] = None) -> CompiledGrammar:
        """Compiles ``grammar``; with ``rebuild`` (a pure function that returns the same
        grammar again), the core drops the grammar once compiled and ``.grammar`` calls
        ``rebuild`` when asked for."""
        ffi, lib = _core.ffi, _core.lib
        out = ffi.new("xgr_compiled **")
        gptr = self._spelled(grammar)
        opts = self._opts if rebuild is None else self._opts_drop
        _core.check(
            lib.xgr_compile(gptr, self._tokenizer_info._handle(), opts, out),
            "compiling the grammar",
        )
        ptr = ffi.gc(out[0], lib.xgr_compiled_release)
        kept = grammar if rebuild is None else None
        return CompiledGrammar._create(ptr, self._tokenizer_info, kept, rebuild,
                                       warnings=grammar.warnings)

    def _spelled(self, grammar: Grammar) -> Any:
        """The grammar pointer to compile: literals that spell a special token's text
        (gpt-oss's "<|channel|>", Kimi's section markers) also admit that token, since
        models emit the token, not its letters. (The pointer owns itself via ffi.gc.)"""
        ffi, lib = _core.ffi, _core.lib
        sp = self._tokenizer_info._special_spellings()
        if sp is None:
            return grammar._ptr
        sout = ffi.new("xgr_grammar **")
        _core.check(lib.xgr_grammar_spell_tokens(grammar._ptr, sp[0], sp[1], sp[2], sp[3], sout),
                    "admitting special tokens where the grammar spells them")
        if sout[0] == ffi.NULL:
            return grammar._ptr
        return ffi.gc(sout[0], lib.xgr_grammar_release)

    def _fragment(self, content: Any) -> Tuple[Any, int]:
        """A structural tag's JSON-schema content as a linkable fragment (tool_call_compile)."""
        return make_fragment(self, content)

    def _cached(self, key: Hashable, make_grammar: Callable[[], Grammar],
                rebuild: Optional[Callable[[], Grammar]] = None) -> CompiledGrammar:
        """Compiles ``make_grammar()`` through the cache. ``rebuild`` converts the request
        again from what the key holds (a pure function of it), so a cached grammar need not
        keep its converted grammar, often several times the size of the key; None when there
        is no such input (a caller's Grammar)."""
        if not self._cache_enabled:
            return self._compile(make_grammar())
        hit = self._cache.get(key)  # a hit makes no closures
        if hit is not None:
            return hit
        return self._cache.get_or_compile(
            key, self._through_disk(key, lambda: self._compile(make_grammar(), rebuild),
                                    rebuild, None if rebuild is not None else make_grammar))

    def _through_disk(self, key: Hashable, compile_fn: Callable[[], CompiledGrammar],
                      rebuild: Optional[Callable[[], Grammar]],
                      kept: Optional[Callable[[], Grammar]]) -> Callable[[], CompiledGrammar]:
        """``compile_fn`` behind the disk cache (when the compiler has one): the file of
        ``key`` when a process wrote it, else a compile whose result is queued for writing.
        ``kept`` gives the grammar to keep when there is no ``rebuild``."""
        disk = self._disk
        if disk is None:
            return compile_fn
        info = self._tokenizer_info

        def run() -> CompiledGrammar:
            def make(ptr: Any, linked: bool, warns: Tuple[str, ...]) -> CompiledGrammar:
                grammar = kept() if kept is not None else None
                return CompiledGrammar._create(ptr, info, grammar, rebuild, linked=linked,
                                               warnings=warns)

            hit = disk.load(key, make, self._opts, info._handle())
            if hit is not None:
                return hit
            compiled = compile_fn()
            disk.store(key, compiled)
            return compiled

        return run

    #: compile_json_schema's converter options a preloaded grammar's key may name (their
    #: values are JSON's own, so the key text gives them back exactly)
    _PRELOAD_JSON_OPTS = frozenset(("any_whitespace", "indent", "separators", "strict_mode",
                                    "max_whitespace_cnt", "lenient", "any_order"))

    def _rebuild_for_key(self, key: Any) -> Optional[Callable[[], Grammar]]:
        """What converts the request of a compile-cache ``key`` again (as the ``rebuild`` its
        compile would have made), for the kinds whose key holds the whole request; None for
        the others (a caller's Grammar object, Lark with named grammars...)."""
        if type(key) is not tuple or not key:
            return None
        kind = key[0]
        if kind == "json_schema" and len(key) == 3 and type(key[1]) is bytes and type(key[2]) is str:
            try:
                opts = json.loads(key[2])
            except ValueError:
                return None
            if (type(opts) is not dict or not set(opts) <= self._PRELOAD_JSON_OPTS
                    or json.dumps(opts, sort_keys=True, default=repr) != key[2]):
                return None
            if isinstance(opts.get("separators"), list):
                opts["separators"] = tuple(opts["separators"])
            canonical = key[1]

            return lambda: _schema_grammar(canonical, opts)
        if kind == "ebnf" and len(key) == 3 and type(key[1]) is str and type(key[2]) is str:
            text, root = key[1], key[2]
            return lambda: Grammar.from_ebnf(text, root_rule_name=root)
        if kind == "regex" and len(key) == 2 and type(key[1]) is str:
            regex = key[1]
            return lambda: Grammar.from_regex(regex)
        if key == ("builtin_json",):
            return Grammar.builtin_json_grammar
        if kind == "structural_tag" and len(key) == 3 and type(key[2]) is str:
            tag_text = key[2]
            resolver = LazyResolver(self._tokenizer_info)
            return lambda: Grammar.from_ebnf(ebnf_from_api_args(tag_text, token_resolver=resolver))
        return None

    def _adopt_preloaded(self, key: Any, ptr: Any, linked: bool, warns: Tuple[str, ...],
                         on_first_hit: Callable[[], None]) -> Optional[CompiledGrammar]:
        """Offers a grammar the disk cache's preload read (under ``key``, checked against its
        file's name) to the compile cache, where a request then finds it as a memory hit;
        the grammar when it went in, else None (the preload keeps it for DiskCache.load)."""
        if linked or not self._cache_enabled:
            return None  # (a linked grammar waits for its second compile: CompileCache._admit)
        rebuild = self._rebuild_for_key(key)
        if rebuild is None:
            return None
        compiled = CompiledGrammar._create(ptr, self._tokenizer_info, None, rebuild,
                                           linked=linked, warnings=warns)
        # What a grammar's first GrammarMatcher reads and keeps on it (vocabulary size, row
        # words, stop tokens), read here on the preload's thread: a request's first matcher of
        # it then starts as every later one does (docs/disk-cache.md, "Preload").
        _grammar_consts(compiled)
        return compiled if self._cache.offer(key, compiled, on_first_hit) else None

    # ---- public API ---------------------------------------------------------------------

    def compile_grammar(
        self, grammar: Union[str, Grammar], *, root_rule_name: str = "root"
    ) -> CompiledGrammar:
        """Compiles EBNF text (with ``root_rule_name`` as the start rule) or a Grammar."""
        if isinstance(grammar, Grammar):
            # (Its warnings are part of the key: two grammars with the same text may differ.)
            return self._cached(("grammar", str(grammar), grammar.warnings), lambda: grammar)
        if isinstance(grammar, (str, bytes)):
            text = grammar.decode("utf-8") if isinstance(grammar, bytes) else grammar

            def parse() -> Grammar:
                return Grammar.from_ebnf(text, root_rule_name=root_rule_name)

            return self._cached(("ebnf", text, root_rule_name), parse, parse)
        raise ValueError("Invalid grammar type. Please pass a string or a Grammar object.")

    def compile_json_schema(
        self,
        schema: Union[str, Type[Any], Dict[str, Any]],
        *,
        any_whitespace: bool = True,
        indent: Optional[int] = None,
        separators: Optional[Tuple[str, str]] = None,
        strict_mode: bool = True,
        max_whitespace_cnt: Optional[int] = None,
        any_order: bool = False,
        lenient: bool = False,
        **options: Any,
    ) -> CompiledGrammar:
        """Compiles a JSON schema (JSON text, dict, or pydantic model class). The options are
        those of :meth:`Grammar.from_json_schema`; ``indent`` and ``separators`` follow
        ``json.dumps`` and apply when ``any_whitespace`` is False.

        Raises
        ------
        InvalidJSONError
            ``schema`` is text that is not JSON (a ValueError).
        ValueError
            The schema cannot be converted (unsupported keyword unless ``lenient``).
        """
        # A hit on text runs here, without pausing the collector or making closures: first
        # the text as given (an alias of its cache entry, see CompileCache.add_alias), then
        # its canonical text straight from the core (json_key.py), which parses and dumps
        # nothing; None when the core cannot prove it. Misses go on in _compile_json_schema.
        if schema.__class__ is not str or not self._cache_enabled or options:
            return self._compile_json_schema(schema, _UNSET, None, any_whitespace, indent,
                                             separators, strict_mode, max_whitespace_cnt,
                                             any_order, lenient, options)
        if (any_whitespace is True and indent is None and separators is None
                and strict_mode is True and max_whitespace_cnt is None and any_order is False
                and lenient is False):
            memo = self._default_opts
            if memo is None:
                memo = self._default_opts = self._json_opts(True, None, None, True, None,
                                                            False, False, {})
        else:
            memo = self._json_opts(any_whitespace, indent, separators, strict_mode,
                                   max_whitespace_cnt, any_order, lenient, {})
        check_input_size(len(schema), "the JSON schema")
        cache = self._cache
        # The nesting limit is part of the alias: text over a lowered limit must fail again.
        alias = (schema, memo[1], json_nesting_limit())
        hit = cache.get_alias(alias)
        if hit is not None:
            return hit
        fast = canonical_schema_text(schema)
        if fast is not None:
            key = ("json_schema", fast, memo[1])
            hit = cache.get(key)
            if hit is not None:
                cache.add_alias(alias, key)
                return hit
        return self._compile_json_schema(schema, fast, memo, any_whitespace, indent, separators,
                                         strict_mode, max_whitespace_cnt, any_order, lenient,
                                         options, alias)

    def _json_opts(self, any_whitespace: Any, indent: Any, separators: Any, strict_mode: Any,
                   max_whitespace_cnt: Any, any_order: Any, lenient: Any,
                   options: Dict[str, Any]) -> Tuple[Dict[str, Any], str]:
        """compile_json_schema's options for the converter, with their key text."""
        memo_key: Optional[Tuple[Any, ...]] = None
        memo = None
        if not options:  # the options' key is memoized: a hit then dumps no JSON
            memo_key = tuple((type(v), v) for v in (any_whitespace, indent, separators, strict_mode,
                                                    max_whitespace_cnt, any_order, lenient))
            try:
                memo = self._opts_memo.get(memo_key)
            except TypeError:  # an unhashable value (separators as a list): not memoized
                memo_key = None
        if memo is not None:
            return memo
        if any_order:
            options = dict(options, any_order=True)
        opts = _json_schema_options(
            any_whitespace, indent, separators, strict_mode, max_whitespace_cnt, lenient, options
        )
        memo = (opts, json.dumps(opts, sort_keys=True, default=repr))
        if memo_key is not None:
            if len(self._opts_memo) >= 64:
                self._opts_memo.clear()
            self._opts_memo[memo_key] = memo
        return memo

    @gc_pause.pausing
    def _compile_json_schema(self, schema: Any, fast: Any,
                             memo: Optional[Tuple[Dict[str, Any], str]], any_whitespace: Any,
                             indent: Any, separators: Any, strict_mode: Any,
                             max_whitespace_cnt: Any, any_order: Any, lenient: Any,
                             options: Dict[str, Any],
                             alias: Optional[Tuple[Any, ...]] = None) -> CompiledGrammar:
        """compile_json_schema past the hits it checks: ``fast`` is the canonical text when
        it made it (None: the core could not prove it; _UNSET: not made), ``memo`` the
        options with their key text, ``alias`` the key of the text as given, added to the
        cache once the grammar is there."""
        if fast is _UNSET:
            fast = canonical_schema_text(schema) if isinstance(schema, str) and self._cache_enabled else None
        obj = _schema_to_obj(schema) if fast is None else None
        if memo is None:
            memo = self._json_opts(any_whitespace, indent, separators, strict_mode,
                                   max_whitespace_cnt, any_order, lenient, options)
        opts, opts_key = memo
        if fast is not None:
            try:
                compiled = self._compile_schema(fast, None, schema, opts, opts_key)
            except KeyMismatch:
                logger.warning("xgrammar2: the canonical text of a JSON schema differs from "
                               "json.dumps; compiling it the slow way (please report)")
                obj = _schema_to_obj(schema)
            else:
                if alias is not None:
                    self._cache.add_alias(alias, ("json_schema", fast, opts_key))
                return compiled
        return self._compile_schema(canonical_dumps(obj), obj, None, opts, opts_key)

    def _compile_schema(self, canonical: bytes, obj: Any, source: Optional[str],
                        opts: Dict[str, Any], opts_key: str) -> CompiledGrammar:
        """Compiles a JSON schema through the caches under its canonical text (UTF-8):
        ``obj`` is the parsed schema, or ``source`` its text when ``canonical`` came from the
        core (json_key.py): then a compile (a miss) parses ``source`` and checks that
        json.dumps of it gives ``canonical`` before anything is stored under it (KeyMismatch
        otherwise)."""

        def make() -> Grammar:  # (the key text spares the converter a repr of the schema)
            parsed = obj
            if source is not None:  # the caller's text, not the key's: a real check
                parsed = json.loads(source)
                if canonical_dumps(parsed) != canonical:
                    raise KeyMismatch()
            return _schema_grammar(canonical, opts, parsed)

        return self._cached(("json_schema", canonical, opts_key), make,
                            lambda: _schema_grammar(canonical, opts))  # the text: a dict may change

    def compile_builtin_json_grammar(self) -> CompiledGrammar:
        """Compiles the builtin JSON grammar (a JSON object or array, as upstream's)."""
        return self._cached(("builtin_json",), Grammar.builtin_json_grammar,
                            Grammar.builtin_json_grammar)

    def compile_regex(self, regex: str) -> CompiledGrammar:
        """Compiles a regular expression (whole-output match)."""
        if not isinstance(regex, str):
            raise TypeError(f"regex must be a str, got {type(regex).__name__}")
        def convert() -> Grammar:
            return Grammar.from_regex(regex)

        return self._cached(("regex", regex), convert, convert)

    def compile_structural_tag(self, *args: Any, **kwargs: Any) -> CompiledGrammar:
        """Compiles a structural tag (upstream xgrammar's format): one tag (JSON text, dict
        or ``xgrammar2.structural_tag.StructuralTag``), or the legacy ``(tags, triggers)``
        pair. Errors as :meth:`Grammar.from_structural_tag`."""

        # JSON text alone goes the linked way, which checks the nesting of what it parses
        # (_compile_tag_text): a request of tools seen before parses its skeleton only.
        text = len(args) == 1 and not kwargs and isinstance(args[0], (str, bytes, bytearray))
        if text:
            check_input_size(len(args[0]), "the structural tag")
            if self._cache_enabled and args[0].__class__ is str:  # a hit: its key as below
                hit = self._cache.get(("structural_tag", "s", args[0]))
                if hit is not None:
                    return hit
        else:
            check_structural_tag_args(args, kwargs)
        kwargs.setdefault("token_resolver", LazyResolver(self._tokenizer_info))
        keyed = structural_tag_key(args, kwargs) if self._cache_enabled else None
        if text and keyed is None:  # not cached (or not UTF-8): read whole below
            check_structural_tag_args(args, {})
        if keyed is None:
            return self.compile_grammar(ebnf_from_api_args(*args, **kwargs))
        kind, tag_text = keyed
        resolver = kwargs["token_resolver"]

        def rebuild() -> Grammar:
            # From the key's text, which the cache holds anyway (a dict or model the
            # caller still has may have changed since).
            return Grammar.from_ebnf(ebnf_from_api_args(tag_text, token_resolver=resolver))

        # Keyed by the tag itself, so a repeated tag (a static tool set) skips the
        # conversion to EBNF as well as the compile. The key holds the tag as JSON text
        # (given as text, or a dict or model dumped): its tags' contents are linked, so a
        # model template's tool list (get_model_structural_tag) reuses lowered tools too.
        key = ("structural_tag", kind, tag_text)
        hit = self._cache.get(key)  # a hit makes no closures
        if hit is not None:
            return hit
        return self._cache.get_or_compile(
            key, self._through_disk(key, lambda: compile_tag_text(self, tag_text, resolver, rebuild),
                                    rebuild, None))

    def compile_lark(
        self, lark_string: str, *, named_grammars: Optional[Dict[str, Union[Grammar, str]]] = None
    ) -> CompiledGrammar:
        """Compiles a Lark grammar (see :meth:`Grammar.from_lark`); the compiler's tokenizer
        resolves named special tokens. Cached by the source and the named grammars."""
        from .lark import grammar_from_lark
        from .lark.lower import check_named_grammars

        info = self._tokenizer_info
        named_grammars = check_named_grammars(named_grammars)  # TypeError / LarkGrammarError

        def make() -> Grammar:
            return grammar_from_lark(lark_string, tokenizer_info=info,
                                     named_grammars=named_grammars)

        if not isinstance(lark_string, str):
            return self._compile(make())  # raises the argument's error
        named = tuple(sorted(
            (k, ("grammar", str(v)) if isinstance(v, Grammar) else ("lark", v))
            for k, v in named_grammars.items()))
        return self._cached(("lark", lark_string, named), make, make)

    _ASYNC_KINDS = {
        "grammar": "compile_grammar",
        "json_schema": "compile_json_schema",
        "builtin_json": "compile_builtin_json_grammar",
        "regex": "compile_regex",
        "structural_tag": "compile_structural_tag",
        "lark": "compile_lark",
    }

    def compile_async(
        self, kind: str, *args: Any, precompute_k: int = 0, **kwargs: Any
    ) -> "concurrent.futures.Future[CompiledGrammar]":
        """(xgrammar2) Compiles on the compiler's thread pool (``max_threads`` workers) and
        returns a future, so an engine can overlap compilation with prefill; the C core
        releases the GIL throughout. ``kind`` is one of ``grammar``, ``json_schema``,
        ``builtin_json``, ``regex``, ``structural_tag``; the other arguments are those of
        the matching ``compile_*`` method. ``precompute_k > 0`` then builds the K most
        expensive token-mask cache entries in the same background task (XGrammar-2 paper, §3.5), so
        the first decoding steps hit a warm cache. Errors surface from ``future.result()``.
        """
        method = self._ASYNC_KINDS.get(kind)
        if method is None:
            raise ValueError(f"unknown compile kind {kind!r}; expected one of {sorted(self._ASYNC_KINDS)}")
        if isinstance(precompute_k, bool) or not isinstance(precompute_k, int):
            raise TypeError("precompute_k must be an int")
        fn = getattr(self, method)

        def task() -> CompiledGrammar:
            compiled = fn(*args, **kwargs)
            if precompute_k:
                compiled.precompute(precompute_k)
            return compiled

        with self._pool_lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    max_workers=self._max_threads, thread_name_prefix="xgrammar2-compile"
                )
            return self._pool.submit(task)

    def precompute_in_background(self, compiled: CompiledGrammar, k: int = 8) -> bool:
        """(xgrammar2) Queues ``compiled.precompute(k)`` on one daemon thread (a bounded queue)
        and returns at once: the engine plugins call it after a compile, so the K most
        expensive token-mask entries are built while the request waits for and runs its
        prefill (XGrammar-2 paper, §3.5). Each compiled grammar is queued once (a compile-cache hit
        returns False); under a burst the oldest waiting grammar is dropped and builds its
        masks on first use. ``k == 0`` does nothing; ``k < 0`` builds every entry."""
        if not isinstance(compiled, CompiledGrammar):
            raise TypeError(f"expected a CompiledGrammar, got {type(compiled).__name__}")
        if check_k(k) == 0:
            return False
        with self._pool_lock:
            if self._background is None:
                self._background = BackgroundPrecompute()
            bg = self._background
        return bg.submit(compiled, k)

    @property
    def disk_cache(self) -> Optional[DiskCache]:
        """(xgrammar2) The on-disk compile cache (docs/disk-cache.md), or None."""
        return self._disk

    def clear_cache(self) -> None:
        """Drops every cached compiled grammar (and every structural-tag tag lowered for
        linking)."""
        self._cache.clear()
        self._tags.clear()

    def get_cache_size_bytes(self) -> int:
        """The memory currently held by the cached compiled grammars (and the lowered
        structural-tag tags), in bytes."""
        return self._cache.size_bytes() + self._tags.size_bytes()
