"""Engine-agnostic matching helper for the JSON-schema tests.

``XGR_TEST_ENGINE=xgrammar`` uses upstream xgrammar, ``XGR_TEST_ENGINE=xgrammar2`` our engine.
The default is xgrammar2, falling back to upstream xgrammar when xgrammar2 cannot be
imported or fails a smoke test (``ENGINE.fallback_reason`` says why). Every test report
names the engine that ran (see conftest.py).
"""

from __future__ import annotations

import importlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
ENGINE_DIR = os.path.join(REPO, "engine")
if ENGINE_DIR not in sys.path:
    sys.path.insert(0, ENGINE_DIR)

DATA = os.environ.get("XGR_SHARED_DATA", os.path.join(os.path.dirname(REPO), "shared", "data"))

_SMOKE_EBNF = r'''root ::= "{" ws "\"k\"" ws ":" ws s ws "}"
ws ::= [ \n\t]{0,4}
s ::= "\"" c{0,3} "\"" | [^\x00-\x1f]+ "!"
c ::= [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] | "\\u" [0-9a-fA-F]{4}
'''


def _ensure_json_schema_importable():
    """The converter is pure Python: when the xgrammar2 package itself cannot be imported
    (C extension not built), load xgrammar2.json_schema under a stub parent package so the
    converter can still be tested against upstream xgrammar."""
    try:
        importlib.import_module("xgrammar2.json_schema")
        return None
    except Exception as e:  # noqa: BLE001
        reason = f"{type(e).__name__}: {e}"
    import types

    for name in [m for m in sys.modules if m == "xgrammar2" or m.startswith("xgrammar2.")]:
        del sys.modules[name]
    stub = types.ModuleType("xgrammar2")
    stub.__path__ = [os.path.join(ENGINE_DIR, "xgrammar2")]
    sys.modules["xgrammar2"] = stub
    importlib.import_module("xgrammar2.json_schema")
    return reason


_IMPORT_PROBLEM = _ensure_json_schema_importable()


class Engine:
    def __init__(self, name: str, mod):
        self.name = name
        self.mod = mod
        self.fallback_reason = None
        self._tiny = None

    def tokenizer_info(self, vocab=None, **kw):
        return self.mod.TokenizerInfo(vocab if vocab is not None else ["a"], **kw)

    def compiler(self, tokenizer_info=None):
        if tokenizer_info is None:
            if self._tiny is None:
                self._tiny = self.mod.GrammarCompiler(self.tokenizer_info(), cache_enabled=False)
            return self._tiny
        return self.mod.GrammarCompiler(tokenizer_info, cache_enabled=False)

    def compile(self, ebnf: str, compiler=None):
        return (compiler or self.compiler()).compile_grammar(ebnf)

    def matcher(self, compiled, **kw):
        kw.setdefault("terminate_without_stop_token", True)
        return self.mod.GrammarMatcher(compiled, **kw)

    def accepts(self, compiled, text: str) -> bool:
        m = self.matcher(compiled)
        try:
            ok = m.accept_string(text)
        except Exception:
            return False
        return bool(ok) and bool(m.is_terminated())


def _smoke(eng: Engine):
    cg = eng.compile(_SMOKE_EBNF)
    good = ['{"k":"a\\n\\u00e9"}', '{ "k" :  "" }']
    bad = ['{"k":"abcd"}', '{"k":1}', '{ "k" :      "" }']
    for t in good:
        if not eng.accepts(cg, t):
            raise RuntimeError(f"smoke test: {t!r} rejected")
    for t in bad:
        if eng.accepts(cg, t):
            raise RuntimeError(f"smoke test: {t!r} accepted")


def select_engine() -> Engine:
    want = os.environ.get("XGR_TEST_ENGINE", "xgrammar2")
    if want not in ("xgrammar", "xgrammar2"):
        raise ValueError(f"XGR_TEST_ENGINE must be xgrammar or xgrammar2, got {want!r}")
    if want == "xgrammar2":
        try:
            if _IMPORT_PROBLEM is not None:
                raise ImportError(_IMPORT_PROBLEM)
            eng = Engine("xgrammar2", importlib.import_module("xgrammar2"))
            _smoke(eng)
            return eng
        except Exception as e:  # noqa: BLE001 - any failure means "not working yet"
            if os.environ.get("XGR_TEST_ENGINE") == "xgrammar2":
                raise
            reason = f"{type(e).__name__}: {e}"
        eng = Engine("xgrammar", importlib.import_module("xgrammar"))
        eng.fallback_reason = reason
        return eng
    return Engine("xgrammar", importlib.import_module("xgrammar"))


ENGINE = select_engine()


def text_variants(value, any_whitespace=True, indent=None, separators=None):
    """Serializations of a JSON value that a grammar for the given whitespace mode must
    accept: compact json.dumps (ASCII-escaped) and indent=2 without ASCII escaping when
    whitespace is free; exactly the json.dumps layout otherwise."""
    if any_whitespace:
        return [json.dumps(value), json.dumps(value, indent=2, ensure_ascii=False)]
    return [json.dumps(value, indent=indent, separators=separators), json.dumps(value, indent=indent,
                                                                                 separators=separators,
                                                                                 ensure_ascii=False)]
