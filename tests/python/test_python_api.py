"""The Python API over the C core: grammars, compiler, matcher, batch filling and argument
validation. Skipped when the core is not built.

The grammars here are small literal alternations so that every expectation follows from
the grammar text alone; the fork oracle (a token's bit == "a fork accepts it") checks the
masks.
"""

import gc
import threading

import numpy as np
import pytest

import xgrammar2 as xgr
from xgrammar2 import _core

from pyapi_helpers import requires_core

pytestmark = requires_core

VOCAB = [
    b"<s>",  # 0 special
    b"</s>",  # 1 stop
    b"a",  # 2
    b"b",  # 3
    b"c",  # 4
    b"d",  # 5
    b"ab",  # 6
    b"abc",  # 7
    b"bd",  # 8
    b"x",  # 9
    b"\xc3",  # 10 first byte of "é"
    b"\xa9",  # 11 second byte of "é"
    b"\xc3\xa9",  # 12 "é"
    b"{",  # 13
    b"}",  # 14
    b"{}",  # 15
    b"null",  # 16
    b" ",  # 17
]
VOCAB_SIZE = 40  # padded: ids 18..39 have no token
EOS = 1
ABC_ABD = 'root ::= "abc" | "abd" | "\\u00e9"'
ABC_ABD_BYTES = 'root ::= "abc" | "abd" | "é"'


@pytest.fixture(scope="module")
def info():
    return xgr.TokenizerInfo(
        VOCAB,
        xgr.VocabType.RAW,
        vocab_size=VOCAB_SIZE,
        stop_token_ids=[EOS],
        special_token_ids=[0],
    )


@pytest.fixture(scope="module")
def compiler(info):
    return xgr.GrammarCompiler(info)


@pytest.fixture()
def compiled(compiler):
    return compiler.compile_grammar(ABC_ABD_BYTES)


def allowed(bitmask_row, vocab_size=VOCAB_SIZE):
    row = np.asarray(bitmask_row).astype(np.int64) & 0xFFFFFFFF
    return [t for t in range(vocab_size) if (row[t // 32] >> (t % 32)) & 1]


def oracle(matcher, vocab_size=VOCAB_SIZE):
    return [t for t in range(vocab_size) if matcher.fork().accept_token(t)]


def mask_of(matcher):
    bm = xgr.allocate_token_bitmask(1, VOCAB_SIZE)
    matcher.fill_next_token_bitmask(bm)
    return allowed(bm[0].numpy())


# ---- grammars ---------------------------------------------------------------------------------


def test_grammar_roundtrip_and_errors():
    g = xgr.Grammar.from_ebnf(ABC_ABD_BYTES)
    text = str(g)
    assert "root" in text and "::=" in text
    again = xgr.Grammar.from_ebnf(text)
    assert str(again) == text
    with pytest.raises(xgr.GrammarSyntaxError) as e:
        xgr.Grammar.from_ebnf('root ::= "abc')
    assert isinstance(e.value, ValueError) and isinstance(e.value, xgr.XGrammar2Error)
    assert "line" in str(e.value)
    with pytest.raises(ValueError):
        xgr.Grammar.from_ebnf('start ::= "a"')  # no root rule
    g = xgr.Grammar.from_ebnf('start ::= "a"', root_rule_name="start")
    assert "a" in str(g)
    with pytest.raises(TypeError):
        xgr.Grammar.from_ebnf(3)
    with pytest.raises(TypeError):
        xgr.Grammar()


def test_grammar_pickles_as_ebnf():
    import pickle

    g = xgr.Grammar.from_ebnf(ABC_ABD_BYTES)
    assert str(pickle.loads(pickle.dumps(g))) == str(g)


def test_malformed_structural_tag_raises_value_error(compiler):
    with pytest.raises(ValueError):
        xgr.Grammar.from_structural_tag({"type": "structural_tag"})
    with pytest.raises(ValueError):
        compiler.compile_structural_tag({"type": "structural_tag"})


def test_union_concat_regex_builtin(compiler):
    a = xgr.Grammar.from_ebnf('root ::= "a"')
    b = xgr.Grammar.from_ebnf('root ::= "bd"')
    m = xgr.GrammarMatcher(compiler.compile_grammar(xgr.Grammar.union(a, b)))
    assert m.fork().accept_string("a") and m.fork().accept_string("bd")
    assert not m.fork().accept_string("abd")

    m = xgr.GrammarMatcher(compiler.compile_grammar(xgr.Grammar.concat(a, b)))
    assert m.accept_string("abd") and m.is_completed()
    with pytest.raises(ValueError):
        xgr.Grammar.union()
    with pytest.raises(TypeError):
        xgr.Grammar.concat(a, "root ::= x")

    m = xgr.GrammarMatcher(compiler.compile_regex("abc|abd"))
    assert m.accept_token(6) and m.accept_token(4) and m.is_completed()

    m = xgr.GrammarMatcher(compiler.compile_builtin_json_grammar())
    assert m.accept_token(15) and m.is_completed() and m.accept_token(EOS) and m.is_terminated()
    m = xgr.GrammarMatcher(compiler.compile_builtin_json_grammar())
    # the top-level value is an object or an array, as upstream's builtin grammar
    assert not m.accept_string("null") and m.accept_string("[null]") and m.is_completed()
    assert "root" in str(xgr.Grammar.builtin_json_grammar())


# ---- matcher ----------------------------------------------------------------------------------


def test_matcher_walk_and_masks(compiled):
    m = xgr.GrammarMatcher(compiled)
    assert m.stop_token_ids == [EOS]
    assert mask_of(m) == oracle(m) == [2, 6, 7, 10, 12]
    assert not m.is_completed() and not m.is_terminated()
    assert m.find_jump_forward_string() == ""
    assert m.accept_token(2)  # "a"
    assert m.find_jump_forward_string() == "b"
    assert mask_of(m) == oracle(m) == [3, 8]
    assert not m.accept_token(4)  # "c" rejected, state unchanged
    assert m.accept_token(3)  # "ab"
    assert mask_of(m) == oracle(m) == [4, 5]
    assert m.accept_token(5)  # "abd"
    assert m.is_completed() and not m.is_terminated()
    assert mask_of(m) == oracle(m) == [EOS]
    assert m.accept_token(EOS)
    assert m.is_terminated()
    assert not m.accept_token(2)  # nothing after termination
    assert not m.accept_string("a")


def test_special_and_padding_tokens_never_allowed(compiled):
    m = xgr.GrammarMatcher(compiled)
    bm = np.full((1, 2), -1, dtype=np.int32)
    assert m.fill_next_token_bitmask(bm) is True
    got = allowed(bm[0])
    assert 0 not in got and not any(t >= len(VOCAB) for t in got)
    assert not m.accept_token(0)
    assert not m.accept_token(VOCAB_SIZE - 1)


def test_utf8_split_across_tokens(compiled):
    m = xgr.GrammarMatcher(compiled)
    assert m.accept_token(10)  # 0xC3
    assert mask_of(m) == oracle(m) == [11]
    assert m.accept_token(11)  # 0xA9
    assert m.is_completed()
    m = xgr.GrammarMatcher(compiled)
    assert m.accept_string("é") and m.is_completed()
    m = xgr.GrammarMatcher(compiled)
    assert m.accept_string(b"\xc3") and m.accept_string(b"\xa9") and m.is_completed()


def test_rollback_reset_fork_validate(compiled):
    m = xgr.GrammarMatcher(compiled)
    assert m.validate_tokens([2, 3, 4, EOS, 2]) == 4
    assert m.validate_tokens([9]) == 0 and m.validate_tokens([]) == 0
    assert mask_of(m) == [2, 6, 7, 10, 12]  # unchanged by validate_tokens
    assert m.accept_token(6) and m.accept_token(4)
    assert m.num_steps == 2
    m.rollback(1)
    assert mask_of(m) == [4, 5]
    f = m.fork()
    assert f.accept_token(4) and f.is_completed()
    assert not m.is_completed() and mask_of(m) == [4, 5]
    m.rollback(0)
    with pytest.raises(RuntimeError):
        m.rollback(5)
    with pytest.raises(ValueError):
        m.rollback(-1)
    m.reset()
    assert m.num_steps == 0 and mask_of(m) == [2, 6, 7, 10, 12]
    assert m.accept_token(7) and m.accept_token(EOS) and m.is_terminated()
    m.rollback(1)
    assert not m.is_terminated() and m.is_completed()


def test_override_stop_and_terminate_without_stop(compiled):
    m = xgr.GrammarMatcher(compiled, override_stop_tokens=9)
    assert m.stop_token_ids == [9]
    assert m.accept_token(7)
    assert mask_of(m) == [9]
    assert not m.accept_token(EOS) and m.accept_token(9) and m.is_terminated()

    m = xgr.GrammarMatcher(compiled, override_stop_tokens=[])
    assert m.accept_token(7) and mask_of(m) == []

    m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
    assert m.accept_token(7) and m.is_terminated()

    with pytest.raises(ValueError, match="override_stop_tokens"):
        xgr.GrammarMatcher(compiled, override_stop_tokens=[VOCAB_SIZE])
    with pytest.raises(ValueError):
        xgr.GrammarMatcher("root ::= x")


@pytest.mark.parametrize("bad", [-1, VOCAB_SIZE, 2**31, 2**40, -(2**40)])
def test_token_id_out_of_range_is_value_error(compiled, bad):
    m = xgr.GrammarMatcher(compiled)
    with pytest.raises(ValueError):
        m.accept_token(bad)
    with pytest.raises(ValueError):
        m.validate_tokens([2, bad])
    assert mask_of(m) == [2, 6, 7, 10, 12]  # state unchanged


def test_token_ids_accept_numpy_ints(compiled):
    m = xgr.GrammarMatcher(compiled)
    assert m.accept_token(np.int64(2)) and m.accept_token(np.int32(3))
    assert m.validate_tokens(np.array([4], dtype=np.int64)) == 1


def test_fill_bitmask_argument_validation(compiled):
    torch = pytest.importorskip("torch")
    m = xgr.GrammarMatcher(compiled)
    with pytest.raises(ValueError, match="int32"):
        m.fill_next_token_bitmask(torch.zeros(1, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match="int32"):
        m.fill_next_token_bitmask(np.zeros((1, 2), dtype=np.uint32))
    with pytest.raises(ValueError, match="words"):
        m.fill_next_token_bitmask(torch.zeros(1, 1, dtype=torch.int32))
    with pytest.raises(ValueError, match="1-D or 2-D"):
        m.fill_next_token_bitmask(torch.zeros(1, 1, 2, dtype=torch.int32))
    for bad_index in (2, -1):
        with pytest.raises(ValueError, match="out of range") as e:
            m.fill_next_token_bitmask(torch.zeros(2, 2, dtype=torch.int32), index=bad_index)
        assert isinstance(e.value, IndexError)
    with pytest.raises(ValueError, match="contiguous"):
        m.fill_next_token_bitmask(torch.zeros(2, 4, dtype=torch.int32)[:, ::2])
    ro = np.zeros((1, 2), dtype=np.int32)
    ro.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        m.fill_next_token_bitmask(ro)
    with pytest.raises(TypeError):
        m.fill_next_token_bitmask([[0, 0]])
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="CPU"):
            m.fill_next_token_bitmask(torch.zeros(1, 2, dtype=torch.int32, device="cuda"))


def test_fill_bitmask_rows_in_place(compiled):
    torch = pytest.importorskip("torch")
    m = xgr.GrammarMatcher(compiled)
    bm = torch.full((3, 4), 7, dtype=torch.int32)  # wider rows than needed
    assert m.fill_next_token_bitmask(bm, 1)
    assert allowed(bm[1].numpy()) == [2, 6, 7, 10, 12]
    assert bool((bm[0] == 7).all()) and bool((bm[2] == 7).all())
    assert int(bm[1, 2]) == 0 and int(bm[1, 3]) == 0  # words past the vocabulary are zeroed
    # A row of a larger tensor (a view) and a 1-D tensor both work.
    big = torch.zeros(4, 2, dtype=torch.int32)
    m.fill_next_token_bitmask(big[2:], 1)
    assert allowed(big[3].numpy()) == [2, 6, 7, 10, 12]
    one = torch.zeros(2, dtype=torch.int32)
    m.fill_next_token_bitmask(one)
    assert allowed(one.numpy()) == [2, 6, 7, 10, 12]
    arr = np.zeros((2, 2), dtype=np.int32)
    m.fill_next_token_bitmask(arr, index=1)
    assert allowed(arr[1]) == [2, 6, 7, 10, 12] and not arr[0].any()


def test_fill_bitmask_follows_a_tensor_whose_storage_or_shape_changed(compiled):
    # The matcher reuses its checked view of the tensor it was given last; a tensor that
    # got new storage, or a new shape, must be written where it now lives.
    torch = pytest.importorskip("torch")
    m = xgr.GrammarMatcher(compiled)
    bm = torch.zeros(1, 2, dtype=torch.int32)
    m.fill_next_token_bitmask(bm)
    old = bm.data  # the first storage
    bm.data = torch.zeros(1, 2, dtype=torch.int32)
    m.fill_next_token_bitmask(bm)
    assert allowed(bm[0].numpy()) == [2, 6, 7, 10, 12]
    old.zero_()
    m.fill_next_token_bitmask(bm)
    assert not old.any()  # nothing written to the storage the tensor left
    bm.set_(torch.zeros(3, 2, dtype=torch.int32))
    m.fill_next_token_bitmask(bm, 2)
    assert allowed(bm[2].numpy()) == [2, 6, 7, 10, 12] and not bm[:2].any()
    bm.set_(torch.zeros(1, 1, dtype=torch.int32))
    with pytest.raises(ValueError, match="words"):
        m.fill_next_token_bitmask(bm)


def test_a_new_matcher_rechecks_a_tensor_changed_since_another_matcher_checked_it(compiled):
    # Matchers share the checked view of the last tensor any of them was given (an engine
    # hands every request the same one); a change to the tensor in between must be seen.
    torch = pytest.importorskip("torch")
    bm = torch.zeros(1, 2, dtype=torch.int32)
    xgr.GrammarMatcher(compiled).fill_next_token_bitmask(bm)
    bm.resize_(1, 1)  # same storage address, new shape and version
    with pytest.raises(ValueError, match="words"):
        xgr.GrammarMatcher(compiled).fill_next_token_bitmask(bm)
    bm.resize_(1, 2)
    xgr.GrammarMatcher(compiled).fill_next_token_bitmask(bm)
    bm.as_strided_((2, 2), (0, 1))  # rows now overlap: a 2-row view of one row's words
    m = xgr.GrammarMatcher(compiled)
    bm.zero_()
    m.fill_next_token_bitmask(bm, 1)
    assert allowed(bm[1].numpy()) == [2, 6, 7, 10, 12]
    with pytest.raises(IndexError):
        xgr.GrammarMatcher(compiled).fill_next_token_bitmask(bm, 2)
    bm.data = torch.zeros(3, 2, dtype=torch.int32)  # new storage, same version
    xgr.GrammarMatcher(compiled).fill_next_token_bitmask(bm, 2)
    assert allowed(bm[2].numpy()) == [2, 6, 7, 10, 12] and not bm[:2].any()


def _letters_info():
    # 4095 lowercase words (3800 without "z", then 295 with it) and a stop token: 4096
    # ids, a multiple of 32 and wider than one 64-word block of the row.
    import itertools

    every = ["".join(w) for n in (1, 2, 3) for w in itertools.product("abcdefghijklmnopqrstuvwxyz", repeat=n)]
    words = [w for w in every if "z" not in w][:3800] + [w for w in every if "z" in w][:295]
    vocab = [w.encode() for w in words] + [b"</s>"]
    return xgr.TokenizerInfo(vocab, xgr.VocabType.RAW, vocab_size=4096, stop_token_ids=[4095]), words


def test_need_apply_is_false_only_when_every_token_is_allowed():
    info, words = _letters_info()
    assert "z" in words[-1] and "z" not in words[2000]
    comp = xgr.GrammarCompiler(info)
    bm = xgr.allocate_token_bitmask(1, 4096)
    everything = xgr.GrammarMatcher(comp.compile_grammar("root ::= [a-z]*"))
    assert everything.fill_next_token_bitmask(bm) is False
    assert bool((bm == -1).all())
    # Only tokens in the row's last block are refused: the check must reach it.
    no_z = xgr.GrammarMatcher(comp.compile_grammar("root ::= [a-y]*"))
    assert no_z.fill_next_token_bitmask(bm) is True
    got = allowed(bm[0].numpy(), 4096)
    assert got == [t for t, w in enumerate(words) if "z" not in w] + [4095]
    # A state that cannot end refuses the stop token (the row's very last bit).
    must_go_on = xgr.GrammarMatcher(comp.compile_grammar("root ::= [a-z]+"))
    assert must_go_on.fill_next_token_bitmask(bm) is True
    assert allowed(bm[0].numpy(), 4096) == list(range(4095))


@pytest.mark.parametrize("size,z_at", [
    (4256, 2272 + 7 * 32),  # 133 words: a zero in lane 7 of the second 64-word block
    (4256, 4100),           # in the 5 words after the last whole block
    (4256, 0),              # in the first word
])
def test_need_apply_finds_one_refused_token_anywhere_in_the_row(size, z_at):
    import itertools

    plain = ["".join(w) for n in (1, 2, 3) for w in itertools.product("abcdefghijklmnopqrstuvwxy", repeat=n)]
    words = plain[:size - 2]
    words.insert(z_at, "z")
    info = xgr.TokenizerInfo([w.encode() for w in words] + [b"</s>"], xgr.VocabType.RAW,
                             vocab_size=size, stop_token_ids=[size - 1])
    comp = xgr.GrammarCompiler(info)
    bm = xgr.allocate_token_bitmask(1, size)
    assert xgr.GrammarMatcher(comp.compile_grammar("root ::= [a-z]*")).fill_next_token_bitmask(bm) is False
    m = xgr.GrammarMatcher(comp.compile_grammar("root ::= [a-y]*"))
    for _ in range(2):  # computed, then from the matcher's memo
        assert m.fill_next_token_bitmask(bm) is True
        assert allowed(bm[0].numpy(), size) == [t for t in range(size) if t != z_at]


def test_bruteforce_oracle_agrees(compiled):
    m = xgr.GrammarMatcher(compiled)
    for step in [None, 2, 3]:
        if step is not None:
            assert m.accept_token(step)
        fast = np.zeros((1, 2), dtype=np.int32)
        slow = np.zeros((1, 2), dtype=np.int32)
        m.fill_next_token_bitmask(fast)
        m._fill_next_token_bitmask_bruteforce(slow)
        assert fast.tolist() == slow.tolist()


# ---- batch ------------------------------------------------------------------------------------


def test_batch_fill_matches_single(compiled):
    torch = pytest.importorskip("torch")
    ms = [xgr.GrammarMatcher(compiled) for _ in range(5)]
    ms[1].accept_token(2)
    ms[2].accept_token(6)
    ms[3].accept_token(7)
    ms[4].accept_token(10)
    expected = xgr.allocate_token_bitmask(5, VOCAB_SIZE)
    for i, m in enumerate(ms):
        m.fill_next_token_bitmask(expected, i)
    got = xgr.allocate_token_bitmask(5, VOCAB_SIZE)
    xgr.BatchGrammarMatcher(max_threads=3).batch_fill_next_token_bitmask(ms, got)
    assert torch.equal(got, expected)

    got = xgr.allocate_token_bitmask(8, VOCAB_SIZE)
    xgr.fill_next_token_bitmask_batch(ms, got, indices=[7, 0, 5, 2, 3])
    for row, i in zip([7, 0, 5, 2, 3], range(5)):
        assert torch.equal(got[row], expected[i])
    assert bool((got[1] == -1).all())

    with pytest.raises(ValueError, match="more than once"):
        xgr.fill_next_token_bitmask_batch([ms[0], ms[0]], got)
    with pytest.raises(ValueError, match="unique"):
        xgr.fill_next_token_bitmask_batch(ms[:2], got, indices=[1, 1])
    with pytest.raises(ValueError, match="indices"):
        xgr.fill_next_token_bitmask_batch(ms[:2], got, indices=[1])
    with pytest.raises(IndexError):
        xgr.fill_next_token_bitmask_batch(ms[:2], got, indices=[1, 8])
    with pytest.raises(ValueError, match="rows"):
        xgr.fill_next_token_bitmask_batch(ms, xgr.allocate_token_bitmask(2, VOCAB_SIZE))
    with pytest.raises(ValueError, match="2-D"):
        xgr.fill_next_token_bitmask_batch(ms[:1], torch.zeros(2, dtype=torch.int32))

    assert xgr.BatchGrammarMatcher.batch_accept_token(ms[:2], [2, 3]) == [True, True]
    assert xgr.BatchGrammarMatcher.batch_accept_string(ms[:2], ["b", "zz"]) == [True, False]
    xgr.BatchGrammarMatcher.batch_rollback(ms[:2], [2, 1])
    assert mask_of(ms[0]) == [2, 6, 7, 10, 12]


# ---- compiler ---------------------------------------------------------------------------------


def test_compiled_grammar_properties(compiler, info):
    c = compiler.compile_grammar(ABC_ABD_BYTES)
    assert c.tokenizer_info is info
    assert "abc" in str(c.grammar)
    assert c.memory_size_bytes > 0
    c.precompute(4)
    c.precompute()
    assert c.memory_size_bytes > 0
    with pytest.raises(TypeError):
        xgr.CompiledGrammar()


def test_compiler_cache(info):
    comp = xgr.GrammarCompiler(info)
    a = comp.compile_grammar(ABC_ABD_BYTES)
    assert comp.compile_grammar(ABC_ABD_BYTES) is a
    assert comp.compile_grammar(xgr.Grammar.from_ebnf(ABC_ABD_BYTES)) is not None
    assert comp.compile_regex("ab") is comp.compile_regex("ab")
    assert comp.compile_builtin_json_grammar() is comp.compile_builtin_json_grammar()
    size = comp.get_cache_size_bytes()
    assert size >= a.memory_size_bytes > 0
    comp.clear_cache()
    assert comp.get_cache_size_bytes() == 0
    assert comp.compile_grammar(ABC_ABD_BYTES) is not a

    off = xgr.GrammarCompiler(info, cache_enabled=False)
    assert off.compile_regex("ab") is not off.compile_regex("ab")

    zero = xgr.GrammarCompiler(info, cache_limit_bytes=0)
    assert zero.compile_regex("ab") is not zero.compile_regex("ab")
    assert zero.get_cache_size_bytes() == 0

    # A budget of roughly one grammar keeps only the most recent one.
    one = comp.compile_regex("abc").memory_size_bytes
    lru = xgr.GrammarCompiler(info, cache_limit_bytes=one + one // 2)
    first = lru.compile_regex("abc")
    assert lru.compile_regex("abc") is first
    lru.compile_regex("abd")
    assert lru.compile_regex("abc") is not first
    assert lru.get_cache_size_bytes() <= one + one // 2

    assert xgr.GrammarCompiler(info, cache_limit_bytes=-1).cache_limit_bytes == -1
    assert comp.cache_limit_bytes > 0  # finite default
    with pytest.raises(ValueError):
        xgr.GrammarCompiler(info, cache_limit_bytes=-2)
    with pytest.raises(ValueError):
        xgr.GrammarCompiler(["a"])
    with pytest.raises(ValueError):
        comp.compile_grammar(3)


def test_compile_options_limits(info):
    recursive = 'root ::= a\na ::= "(" b ")" | "x"\nb ::= "[" a "]"'
    comp = xgr.GrammarCompiler(info, max_rules=1)
    with pytest.raises(xgr.GrammarLimitError, match="max_rules") as e:
        comp.compile_grammar(recursive)
    assert isinstance(e.value, ValueError)
    comp = xgr.GrammarCompiler(info, max_fsm_states=1)
    with pytest.raises(xgr.GrammarLimitError, match="max_fsm_states"):
        comp.compile_grammar(ABC_ABD_BYTES)
    pre = xgr.GrammarCompiler(info, precompute=True, repeat_threshold=4, inline_max_states=-1)
    m = xgr.GrammarMatcher(pre.compile_grammar(ABC_ABD_BYTES))
    assert mask_of(m) == [2, 6, 7, 10, 12]
    with pytest.raises(TypeError):
        xgr.GrammarCompiler(info, max_rules="many")


def test_concurrent_compiles_coalesce_and_matchers_run_in_threads(info):
    comp = xgr.GrammarCompiler(info)
    results = []
    errors = []

    def work():
        try:
            c = comp.compile_grammar(ABC_ABD_BYTES)
            results.append(c)
            m = xgr.GrammarMatcher(c)
            bm = np.zeros((1, 2), dtype=np.int32)
            for _ in range(50):
                m.reset()
                assert m.accept_token(2) and m.accept_token(3)
                m.fill_next_token_bitmask(bm)
                assert allowed(bm[0]) == [4, 5]
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len({id(c) for c in results}) == 1


def test_objects_are_released(info):
    comp = xgr.GrammarCompiler(info, cache_enabled=False)
    for _ in range(200):
        c = comp.compile_grammar(ABC_ABD_BYTES)
        m = xgr.GrammarMatcher(c)
        f = m.fork()
        del c, m
        assert f.accept_token(7)  # the fork keeps the compiled grammar alive
        _ = xgr.CompiledGrammar.__name__
    gc.collect()


# ---- JSON schema (needs the json_schema front end) ---------------------------------------------


def _json_schema_available():
    try:
        from xgrammar2.json_schema import json_schema_to_ebnf  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _json_schema_available(), reason="json_schema front end not available")
def test_compile_json_schema_inputs_share_the_cache(info):
    comp = xgr.GrammarCompiler(info)
    schema = {"type": "null"}
    a = comp.compile_json_schema(schema)
    assert comp.compile_json_schema('{"type": "null"}') is a
    assert comp.compile_json_schema(schema, any_whitespace=False) is not a
    m = xgr.GrammarMatcher(a)
    assert m.accept_token(16) and m.is_completed()
    with pytest.raises(xgr.InvalidJSONError):
        comp.compile_json_schema("{not json")
    with pytest.raises(ValueError):
        comp.compile_json_schema(schema, indent=-1)
    with pytest.raises(ValueError):
        comp.compile_json_schema(schema, separators=(",",))

    pydantic = pytest.importorskip("pydantic")

    class Model(pydantic.BaseModel):
        x: int

    assert comp.compile_json_schema(Model) is comp.compile_json_schema(Model.model_json_schema())


# ---- errors -------------------------------------------------------------------------------------


def test_status_codes_map_to_exceptions():
    expected = {
        1: ValueError,
        2: xgr.GrammarSyntaxError,
        3: xgr.GrammarSemanticError,
        4: MemoryError,
        5: xgr.GrammarLimitError,
        6: ValueError,
        7: RuntimeError,
        8: RuntimeError,
    }
    for code, cls in expected.items():
        err = _core.error_from_status(code, "ctx")
        assert isinstance(err, cls) and isinstance(err, xgr.XGrammar2Error)
        assert str(err).startswith("ctx")
    assert isinstance(_core.error_from_status(99), RuntimeError)
    assert _core.check(0) is None
    assert issubclass(xgr.GrammarLimitError, ValueError)
    assert _core.lib.XGR_ERR_LIMIT == 5 and _core.lib.XGR_ERR_STATE == 7


def test_property_order_is_part_of_the_schema_cache_key(compiler):
    # Two schemas that differ only in property order must give grammars in their own order
    # (a memo keyed on sorted JSON once handed the second one the first one's order).
    a = {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
         "required": ["x", "y"]}
    b = {"type": "object", "properties": {"y": {"type": "integer"}, "x": {"type": "integer"}},
         "required": ["y", "x"]}
    for schema, text in ((a, '{"x": 1, "y": 2}'), (b, '{"y": 2, "x": 1}')):
        m = xgr.GrammarMatcher(compiler.compile_json_schema(schema))
        assert m.accept_string(text) and m.is_completed(), text
