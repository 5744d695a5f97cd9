"""Small helpers shared by the JSON-schema tests."""

from __future__ import annotations

import functools
import json

from js_engine import ENGINE
from xgrammar2.json_schema import json_schema_to_ebnf


@functools.lru_cache(maxsize=512)
def _compile_cached(ebnf: str):
    return ENGINE.compile(ebnf)


def grammar_for(schema, **kw):
    return _compile_cached(json_schema_to_ebnf(schema, **kw).ebnf)


def accepts(schema, text: str, **kw) -> bool:
    return ENGINE.accepts(grammar_for(schema, **kw), text)


def check(schema, good=(), bad=(), **kw):
    """Asserts every text in ``good`` is accepted and every text in ``bad`` rejected.
    Non-string entries are serialized with json.dumps."""
    cg = grammar_for(schema, **kw)
    for t in good:
        t = t if isinstance(t, str) else json.dumps(t)
        assert ENGINE.accepts(cg, t), f"rejected valid text {t!r} for {json.dumps(schema)}"
    for t in bad:
        t = t if isinstance(t, str) else json.dumps(t)
        assert not ENGINE.accepts(cg, t), f"accepted invalid text {t!r} for {json.dumps(schema)}"
