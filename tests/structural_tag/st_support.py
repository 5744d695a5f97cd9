"""Shared helpers for the structural-tag tests.

Engine selection: the EBNF our converter prints is matched with xgrammar2 when ``import
xgrammar2`` works and its EBNF parser accepts ``TagDispatch(...)``; otherwise with upstream
xgrammar (``xgrammar.Grammar.from_ebnf`` + its GrammarMatcher). The JSON-schema converter
inside tags is xgrammar2's (``xgrammar2.json_schema.json_schema_to_ebnf``) when it imports
and converts a probe schema; otherwise, in these tests only, upstream xgrammar's converter
stands in. ``pytest`` prints which ones ran in its header.
"""

import functools
import json
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "engine"))

DATA = Path(os.environ.get("XGR2_SHARED_DATA", REPO.parent / "shared" / "data"))
TEMPLATES = DATA / "chat_templates"
BFCL = DATA / "bfcl"

_PROBE_TAG_DISPATCH = 'root ::= TagDispatch(\n  ("<a", r),\n  loop_after_dispatch=true,\n  excludes=()\n)\nr ::= ">"\n'


def _pkg_version(name):
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:  # noqa: BLE001
        return "?"


def _pick_engine():
    why = []
    forced = os.environ.get("XGR2_ST_ENGINE")  # "xgrammar" (upstream) or "xgrammar2"
    if forced == "xgrammar":
        return "xgrammar", f"upstream xgrammar {_pkg_version('xgrammar')} (forced by XGR2_ST_ENGINE)"
    try:
        import xgrammar2

        try:
            from xgrammar2.testing import _is_grammar_accept_string as acc

            g = xgrammar2.Grammar.from_ebnf(_PROBE_TAG_DISPATCH)
            expected = {b"": True, b"x<a>y<a>": True, b"x<": True, b"x<a": False, b"x<ay": False}
            got = {s: bool(acc(g, s)) for s in expected}
            if got != expected:
                raise AssertionError(f"TagDispatch probe gave {got}")
            return "xgrammar2", "xgrammar2 (its EBNF parser and matcher handle TagDispatch)"
        except Exception as e:  # noqa: BLE001
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            why.append(f"xgrammar2 does not handle TagDispatch yet ({msg})")
    except Exception as e:  # noqa: BLE001
        why.append(f"import xgrammar2 failed ({e})")
    try:
        import xgrammar

        ver = getattr(xgrammar, "__version__", "") or _pkg_version("xgrammar")
        return "xgrammar", f"upstream xgrammar {ver}: " + "; ".join(why)
    except ImportError:
        return None, "no engine: " + "; ".join(why) + "; upstream xgrammar not installed"


ENGINE, ENGINE_WHY = _pick_engine()


def _pick_json_backend():
    try:
        from xgrammar2.json_schema import json_schema_to_ebnf  # noqa: F401

        text = json_schema_to_ebnf({"type": "object", "properties": {"a": {"type": "integer"}}},
                                   any_whitespace=True, indent=None, separators=None,
                                   strict_mode=True, max_whitespace_cnt=None, lenient=False)
        text = text if isinstance(text, str) else text.ebnf
        if ENGINE == "xgrammar":
            import xgrammar

            xgrammar.Grammar.from_ebnf(text)
        return json_schema_to_ebnf, "xgrammar2.json_schema.json_schema_to_ebnf"
    except Exception as e:  # noqa: BLE001
        reason = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    from xgrammar.testing import _json_schema_to_ebnf

    def upstream_json(schema, **opts):
        kw = {k: opts[k] for k in ("any_whitespace", "indent", "separators", "strict_mode",
                                    "max_whitespace_cnt", "any_order") if k in opts}
        if opts.get("excludes"):
            raise TypeError("excludes is not supported by this stand-in")
        return _json_schema_to_ebnf(schema, **kw)

    return upstream_json, f"upstream xgrammar's converter (stand-in; xgrammar2's: {reason})"


JSON_BACKEND, JSON_BACKEND_WHY = _pick_json_backend() if ENGINE else (None, "")


requires_engine = pytest.mark.skipif(ENGINE is None, reason=ENGINE_WHY)


def to_ebnf(tag, **kw):
    from xgrammar2.structural_tag import structural_tag_to_ebnf

    return structural_tag_to_ebnf(tag, json_schema_to_ebnf=JSON_BACKEND, **kw)


def fmt_ebnf(fmt):
    return to_ebnf({"type": "structural_tag", "format": fmt})


@functools.lru_cache(maxsize=256)
def compiled_bytes_grammar(text: str):
    """The grammar compiled against a byte vocabulary (256 single bytes + a stop token)."""
    if ENGINE == "xgrammar2":
        import xgrammar2 as x
        from xgrammar2.testing import _byte_tokenizer_info

        return x.GrammarCompiler(_byte_tokenizer_info(), cache_enabled=False).compile_grammar(text)
    import xgrammar as x

    info = x.TokenizerInfo([bytes([b]) for b in range(256)] + [b"</s>"],
                           stop_token_ids=[256], vocab_type=x.VocabType.RAW)
    return x.GrammarCompiler(info, cache_enabled=False).compile_grammar(text)


def engine_module():
    if ENGINE == "xgrammar2":
        import xgrammar2

        return xgrammar2
    import xgrammar

    return xgrammar


def accepts(text: str, s, *, complete: bool = True) -> bool:
    """Whether the grammar (EBNF text) accepts exactly ``s`` (str or bytes)."""
    x = engine_module()
    data = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    if ENGINE == "xgrammar2":
        from xgrammar2.testing import _is_grammar_accept_string

        return _is_grammar_accept_string(_parsed(text), data, require_termination=complete)
    m = x.GrammarMatcher(_string_compiled(text), terminate_without_stop_token=True)
    if not m.accept_string(data):
        return False
    return m.is_terminated() if complete else True


@functools.lru_cache(maxsize=64)
def _parsed(text: str):
    return engine_module().Grammar.from_ebnf(text)


@functools.lru_cache(maxsize=64)
def _string_compiled(text: str):
    """Compiled for string matching only (empty vocabulary: cheap to compile)."""
    import xgrammar

    return xgrammar.GrammarCompiler(xgrammar.TokenizerInfo([]), cache_enabled=False).compile_grammar(text)


def accepts_bytes(text: str, s) -> bool:
    """Like :func:`accepts`, but feeding one byte token at a time and ending with the stop
    token (exercises the token path)."""
    x = engine_module()
    m = x.GrammarMatcher(compiled_bytes_grammar(text), terminate_without_stop_token=False)
    data = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    for b in data:
        if not m.accept_token(b):
            return False
    return m.accept_token(256)


def upstream_accepts_tag(tag, s) -> bool:
    """Upstream xgrammar's own structural-tag compiler on the same input (reference)."""
    import xgrammar

    g = _upstream_grammar(json.dumps(tag))
    return _upstream_match(g, s)


@functools.lru_cache(maxsize=256)
def _upstream_grammar(tag_json: str):
    import xgrammar

    g = xgrammar.Grammar.from_structural_tag(tag_json)
    return xgrammar.GrammarCompiler(xgrammar.TokenizerInfo([]), cache_enabled=False).compile_grammar(g)


def _upstream_match(compiled, s) -> bool:
    import xgrammar

    m = xgrammar.GrammarMatcher(compiled, terminate_without_stop_token=True)
    data = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return bool(m.accept_string(data)) and m.is_terminated()


