"""Errors that upstream xgrammar 0.2.8 raises as RuntimeError are RuntimeErrors in xgrammar2 too
(InvalidArgumentError is a ValueError and a RuntimeError; InvalidStateError a RuntimeError).

Each case runs against xgrammar2 and, when installed, the real upstream package, and both must
raise RuntimeError."""

import pytest

torch = pytest.importorskip("torch")
xgr2 = pytest.importorskip("xgrammar2")
from xgrammar2.exception import InvalidArgumentError, InvalidStateError  # noqa: E402

try:
    import xgrammar as _up

    UP = None if _up is xgr2 or _up.__name__ != "xgrammar" else _up
except ImportError:  # pragma: no cover
    UP = None

ENGINES = [xgr2] + ([UP] if UP is not None else [])


def _terminated(mod):
    ti = mod.TokenizerInfo(["a", "b", "</s>"], stop_token_ids=[2])
    compiled = mod.GrammarCompiler(ti).compile_grammar(mod.Grammar.from_regex("a"))
    m = mod.GrammarMatcher(compiled)
    assert m.accept_token(0) and m.accept_token(2) and m.is_terminated()
    return m, compiled


@pytest.mark.parametrize("mod", ENGINES, ids=lambda m: m.__name__)
def test_fill_after_stop_token_raises_and_rollback_recovers(mod):
    m, _ = _terminated(mod)
    bm = mod.allocate_token_bitmask(1, 3)
    with pytest.raises(RuntimeError):
        m.fill_next_token_bitmask(bm)
    m.rollback(1)
    assert not m.is_terminated()
    m.fill_next_token_bitmask(bm)
    assert int(bm[0, 0]) & 0b111 == 0b100  # only the stop token
    if mod is xgr2:
        m.accept_token(2)
        with pytest.raises(InvalidStateError, match="terminated"):
            m.fill_next_token_bitmask(bm)


@pytest.mark.parametrize("mod", ENGINES, ids=lambda m: m.__name__)
def test_batch_fill_with_a_terminated_matcher_raises(mod):
    m, compiled = _terminated(mod)
    bm = mod.allocate_token_bitmask(2, 3)
    with pytest.raises(RuntimeError):
        mod.BatchGrammarMatcher(2).batch_fill_next_token_bitmask([mod.GrammarMatcher(compiled), m], bm)


def test_terminate_without_stop_token_still_fills():
    # is_terminated() there means "can end"; no stop token was accepted, so the mask is there
    ti = xgr2.TokenizerInfo(["a", "b"])
    m = xgr2.GrammarMatcher(xgr2.GrammarCompiler(ti).compile_grammar("root ::= [a]*"),
                            terminate_without_stop_token=True)
    assert m.is_terminated()
    bm = xgr2.allocate_token_bitmask(1, 2)
    m.fill_next_token_bitmask(bm)
    assert int(bm[0, 0]) & 0b11 == 0b01


@pytest.mark.parametrize("mod", ENGINES, ids=lambda m: m.__name__)
def test_bad_bitmasks_raise_runtime_error(mod):
    ti = mod.TokenizerInfo([f"t{i}" for i in range(40)])
    m = mod.GrammarMatcher(mod.GrammarCompiler(ti).compile_grammar(mod.Grammar.from_regex("t1")))
    with pytest.raises(RuntimeError):
        m.fill_next_token_bitmask(torch.zeros(1, 1, dtype=torch.int32))  # needs 2 words
    with pytest.raises(RuntimeError):
        m.fill_next_token_bitmask(torch.zeros(1, 2, dtype=torch.float32))
    with pytest.raises(RuntimeError):
        m.fill_next_token_bitmask(torch.zeros(1, 2, dtype=torch.int32), index=1)


@pytest.mark.parametrize("mod", ENGINES, ids=lambda m: m.__name__)
def test_argument_errors_raise_runtime_error(mod):
    ti = mod.TokenizerInfo(["a", "b", "c"], vocab_size=8)
    compiled = mod.GrammarCompiler(ti).compile_grammar(mod.Grammar.from_regex("a+"))
    with pytest.raises(RuntimeError):
        mod.GrammarMatcher(compiled, override_stop_tokens=[2**28])
    ms = [mod.GrammarMatcher(compiled), mod.GrammarMatcher(compiled)]
    with pytest.raises(RuntimeError):
        mod.BatchGrammarMatcher.batch_rollback(ms, [1])
    with pytest.raises(RuntimeError):
        mod.TokenizerInfo([str(i) for i in range(10)], vocab_size=1)


@pytest.mark.parametrize("mod", ENGINES, ids=lambda m: m.__name__)
def test_token_terminal_outside_the_vocabulary_fails_to_compile(mod):
    ti = mod.TokenizerInfo(["a", "b", "c", "d"])
    grammar = mod.Grammar.from_ebnf('root ::= Token(10) "c"')
    with pytest.raises(RuntimeError, match="out of the vocabulary range"):
        mod.GrammarCompiler(ti).compile_grammar(grammar)
    # an id inside the vocabulary compiles and matches
    compiled = mod.GrammarCompiler(ti).compile_grammar(mod.Grammar.from_ebnf('root ::= Token(3) "c"'))
    m = mod.GrammarMatcher(compiled)
    assert m.accept_token(3) and m.accept_token(2)


def test_invalid_argument_error_is_both():
    assert issubclass(InvalidArgumentError, ValueError)
    assert issubclass(InvalidArgumentError, RuntimeError)


@pytest.mark.parametrize("grammar", [r"root ::= [^\u0000-\U0010FFFF]", 'root ::= "a" root'])
def test_grammar_matching_nothing_is_refused_with_the_reason(grammar):
    # upstream compiles these into a matcher that accepts nothing; xgrammar2 refuses them
    ti = xgr2.TokenizerInfo(["a"])
    with pytest.raises(RuntimeError, match="rule 'root' can never finish: it matches no string"):
        xgr2.GrammarCompiler(ti).compile_grammar(grammar)
