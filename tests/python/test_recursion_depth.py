"""The maximum recursion depth (xgrammar2/config.py; docs/limits.md): upstream xgrammar's
get / set / context-manager API, its validation, the environment variable, and what it bounds
(the nesting of JSON that xgrammar2 parses: schemas, structural tags, serialized payloads)
and does not (the matcher, EBNF nesting). Compared with upstream where it is installed."""

import json
import os
import subprocess
import sys
import threading

import pytest

from pyapi_helpers import requires_core

pytestmark = requires_core

import xgrammar2 as xgr  # noqa: E402
from xgrammar2.config import InvalidRecursionDepthError  # noqa: E402

try:
    import xgrammar as upstream
except ImportError:  # pragma: no cover
    upstream = None

requires_upstream = pytest.mark.skipif(upstream is None, reason="upstream xgrammar not installed")

ENV = "XGRAMMAR_MAX_RECURSION_DEPTH"


@pytest.fixture(autouse=True)
def restore_depth():
    before = xgr.get_max_recursion_depth()
    up_before = upstream.get_max_recursion_depth() if upstream is not None else None
    yield
    xgr.set_max_recursion_depth(before)
    if upstream is not None:
        upstream.set_max_recursion_depth(up_before)


def schema_text(depth: int) -> str:
    """A schema whose JSON nests ``depth + 1`` levels (an object around ``depth`` arrays)."""
    return '{"unused": ' + "[" * depth + "0" + "]" * depth + "}"


def matcher_for(grammar):
    compiled = xgr.GrammarCompiler(xgr.TokenizerInfo([]), cache_enabled=False).compile_grammar(
        grammar
    )
    return xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)


# ---- the API --------------------------------------------------------------------------------


@pytest.mark.skipif(ENV in os.environ, reason=f"{ENV} is set")
def test_default():
    assert xgr.get_max_recursion_depth() == 10000


def test_exports():
    for name in ("get_max_recursion_depth", "set_max_recursion_depth", "max_recursion_depth"):
        assert getattr(xgr, name) is getattr(xgr.config, name)
        assert name in xgr.__all__


def test_set_get():
    xgr.set_max_recursion_depth(1000)
    assert xgr.get_max_recursion_depth() == 1000
    xgr.set_max_recursion_depth(1)
    assert xgr.get_max_recursion_depth() == 1
    xgr.set_max_recursion_depth(1000000)
    assert xgr.get_max_recursion_depth() == 1000000


def test_context_manager_restores():
    before = xgr.get_max_recursion_depth()
    with xgr.max_recursion_depth(1000):
        assert xgr.get_max_recursion_depth() == 1000
        with xgr.max_recursion_depth(20):
            assert xgr.get_max_recursion_depth() == 20
        assert xgr.get_max_recursion_depth() == 1000
    assert xgr.get_max_recursion_depth() == before
    with pytest.raises(KeyError):
        with xgr.max_recursion_depth(30):
            raise KeyError("x")
    assert xgr.get_max_recursion_depth() == before


@pytest.mark.parametrize("value", [-1, 0, 1000001, 100000000, 2**40])
def test_out_of_range(value):
    before = xgr.get_max_recursion_depth()
    with pytest.raises(RuntimeError, match="positive"):  # what upstream raises
        xgr.set_max_recursion_depth(value)
    with pytest.raises(ValueError):
        xgr.set_max_recursion_depth(value)
    with pytest.raises(InvalidRecursionDepthError):
        xgr.set_max_recursion_depth(value)
    with pytest.raises(xgr.InvalidArgumentError):
        with xgr.max_recursion_depth(value):
            pass
    assert xgr.get_max_recursion_depth() == before


@pytest.mark.parametrize("value", [1.5, "5", None, 10.0])
def test_not_an_int(value):
    before = xgr.get_max_recursion_depth()
    with pytest.raises(TypeError):
        xgr.set_max_recursion_depth(value)
    assert xgr.get_max_recursion_depth() == before


def test_bool_is_an_int():
    xgr.set_max_recursion_depth(True)  # as upstream: 1
    assert xgr.get_max_recursion_depth() == 1
    assert type(xgr.get_max_recursion_depth()) is int


@requires_upstream
@pytest.mark.parametrize("value", [-1, 0, 1, 7, 1000000, 1000001, 1.5, "5", None, True])
def test_validation_matches_upstream(value):
    def outcome(module):
        try:
            module.set_max_recursion_depth(value)
        except TypeError:
            return "TypeError"
        except RuntimeError:
            return "RuntimeError"
        return module.get_max_recursion_depth()

    assert outcome(xgr) == outcome(upstream)


@pytest.mark.parametrize(
    "env, expected",
    [("1234", 1234), ("1", 1), ("abc", 10000), ("0", 10000), ("-5", 10000), ("", 10000),
     ("2000000", 1000000), ("1000000", 1000000)],
)
def test_environment_variable(env, expected):
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c",
         "import xgrammar2 as x; print(x.get_max_recursion_depth())"],
        env=dict(os.environ, **{ENV: env}), capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout) == expected


def test_environment_variable_warns_when_invalid():
    out = subprocess.run(
        [sys.executable, "-c", "import xgrammar2"],
        env=dict(os.environ, **{ENV: "lots"}), capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0
    assert ENV in out.stderr


def test_thread_safe():
    errors = []

    def worker(k):
        try:
            for i in range(200):
                with xgr.max_recursion_depth(10 + (k * 200 + i) % 1000):
                    assert 1 <= xgr.get_max_recursion_depth() <= 1000000
        except Exception as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


# ---- what it bounds -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "depth, ok", [(40, True), (48, True), (49, True), (50, False), (60, False)]
)
def test_json_schema_nesting(depth, ok):
    """``depth`` arrays in an object: ``depth + 1`` levels against a limit of 50."""
    with xgr.max_recursion_depth(50):
        for schema in (schema_text(depth), json.loads(schema_text(depth))):
            if ok:
                xgr.Grammar.from_json_schema(schema)
                continue
            with pytest.raises(RuntimeError, match="Maximum recursion depth exceeded"):
                xgr.Grammar.from_json_schema(schema)
            with pytest.raises(xgr.GrammarLimitError, match="max_recursion_depth = 50"):
                xgr.Grammar.from_json_schema(schema)
            with pytest.raises(RuntimeError, match="Maximum recursion depth exceeded"):
                compiler = xgr.GrammarCompiler(xgr.TokenizerInfo(["a"]))
                compiler.compile_json_schema(schema)


@requires_upstream
@pytest.mark.parametrize("depth", [1, 20, 48, 49, 50, 51, 200])
def test_json_schema_nesting_matches_upstream(depth):
    def outcome(module):
        with module.max_recursion_depth(50):
            try:
                module.Grammar.from_json_schema(schema_text(depth))
            except RuntimeError as e:
                assert "Maximum recursion depth exceeded" in str(e)
                return False
            return True

    assert outcome(xgr) == outcome(upstream)


def test_structural_tag_nesting():
    def tag(depth):
        return json.dumps({
            "type": "structural_tag",
            "format": {"type": "tag", "begin": "<a>", "end": "</a>",
                       "content": {"type": "json_schema",
                                   "json_schema": json.loads(schema_text(depth))}},
        })

    with xgr.max_recursion_depth(50):
        xgr.Grammar.from_structural_tag(tag(30))
        with pytest.raises(RuntimeError, match="Maximum recursion depth exceeded"):
            xgr.Grammar.from_structural_tag(tag(60))
        compiler = xgr.GrammarCompiler(xgr.TokenizerInfo(["a"]))
        with pytest.raises(RuntimeError, match="Maximum recursion depth exceeded"):
            compiler.compile_structural_tag(tag(60))


def test_deserialization_nesting():
    with xgr.max_recursion_depth(50):
        with pytest.raises(xgr.InvalidJSONError, match="Maximum recursion depth exceeded"):
            xgr.Grammar.deserialize_json("[" * 60 + "]" * 60)
    # Within the depth it parses, and is then not a payload.
    with xgr.max_recursion_depth(100):
        with pytest.raises(xgr.DeserializeFormatError):
            xgr.Grammar.deserialize_json("[" * 60 + "]" * 60)
    # Too small for any payload: refused as too deep (as upstream's).
    payload = xgr.Grammar.from_ebnf('root ::= "a"').serialize_json()
    with xgr.max_recursion_depth(1):
        with pytest.raises(xgr.InvalidJSONError, match="Maximum recursion depth exceeded"):
            xgr.Grammar.deserialize_json(payload)
    assert xgr.Grammar.deserialize_json(payload) is not None


def test_smaller_max_json_nesting_still_applies():
    old = xgr.limits.set_limits(max_json_nesting=20)
    try:
        with xgr.max_recursion_depth(50):
            with pytest.raises(xgr.GrammarLimitError, match="max_json_nesting = 20"):
                xgr.Grammar.from_json_schema(schema_text(30))
        assert xgr.limits.json_nesting_limit() == 20
    finally:
        xgr.limits.set_limits(**old)
    # The default depth (10,000) is above the default max_json_nesting (256).
    assert xgr.limits.json_nesting_limit() == min(256, xgr.get_max_recursion_depth())


# ---- what it does not bound -----------------------------------------------------------------


def test_matcher_is_not_bounded():
    """The Earley parser is iterative: a small depth does not limit the nesting of matched
    text (as upstream, where the Earley parser cannot exceed the depth either)."""
    with xgr.max_recursion_depth(10):
        m = matcher_for(xgr.Grammar.builtin_json_grammar())
        assert m.accept_string("[" * 2000 + "]" * 2000)
        assert m.is_terminated()
        m = matcher_for('root ::= "(" root ")" | ""')
        assert m.accept_string("(" * 3000 + ")" * 3000)
        assert m.is_terminated()
        m = matcher_for(r'''
root ::= "\"" basic_string "\""
basic_string ::= "" | [^"\\\r\n] basic_string | "\\" escape basic_string
escape ::= ["\\/bfnrt] | "u" [A-Fa-f0-9] [A-Fa-f0-9] [A-Fa-f0-9] [A-Fa-f0-9]
''')
        assert m.accept_string('"' + "ab\\n" * 100 + '"')
        assert m.is_terminated()


def test_long_right_recursive_string():
    """Upstream's test_recursion_exceed: 10,000 characters through a right-recursive rule
    under a depth of 1,000 (linear per byte through Leo items, csrc/parse/earley.c)."""
    with xgr.max_recursion_depth(1000):
        m = matcher_for(r'''
root ::= "\"" basic_string "\""
basic_string ::= "" | [^"\\\r\n] basic_string | "\\" escape basic_string
escape ::= ["\\/bfnrt] | "u" [A-Fa-f0-9] [A-Fa-f0-9] [A-Fa-f0-9] [A-Fa-f0-9]
''')
        assert m.accept_string('"' + " " * 10000 + '"')


def test_ebnf_nesting_is_not_bounded():
    # As upstream: EBNF and regex nesting have their own fixed bound (1000 levels).
    with xgr.max_recursion_depth(10):
        xgr.Grammar.from_ebnf("root ::= " + "(" * 100 + '"a"' + ")" * 100)
        xgr.Grammar.from_regex("(" * 100 + "a" + ")" * 100)
    with pytest.raises(RuntimeError):
        xgr.Grammar.from_ebnf("root ::= Token(" + "(" * 2000)
    with pytest.raises(RuntimeError):
        xgr.Grammar.from_ebnf("root ::= " + "(" * 2000 + '"a"' + ")" * 2000)
