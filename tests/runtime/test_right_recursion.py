"""Right recursion is linear per byte (Leo items in the Earley parser, csrc/parse/earley.c;
Leo (1991), "A general context-free parsing algorithm running in linear time on every LR(k)
grammar"): GBNF-style grammars (llama.cpp's `item ::= x item | x`, `list ::= elem ("," list)?`,
`chars ::= char chars | ""`) accept long outputs in linear time, and masks, rollback,
jump-forward and completion stay exact along the way."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest

import xgrammar2 as xgr
from runtime_helpers import (
    allowed,
    compiler,
    masks_equal_oracle,
    new_bitmask,
    pick_token,
    tokenizer,
)
from xgrammar2.testing import _byte_tokenizer_info, _is_grammar_accept_string

# name -> (EBNF, a unit whose repetitions the grammar accepts, alphabet for random strings)
GRAMMARS = {
    "empty_alt": ('root ::= c\nc ::= "" | "a" c', "a", "ab"),
    "list": ('root ::= list\nlist ::= elem | elem "," list\nelem ::= [0-9]+', "12,3,", "1,x"),
    "gbnf_list": (
        'root ::= "[" list "]"\nlist ::= elem ("," list)?\nelem ::= [a-b]+ | "(" list ")"',
        None,
        "[a,()]",
    ),
    "gbnf_item": ('root ::= "<" item ">"\nitem ::= x item | x\nx ::= "ab" | "c" | " "', None, "<abc >"),
    "json_string": (
        'root ::= "{" ws "\\"k\\"" ws ":" ws string ws "}"\n'
        'string ::= "\\"" chars "\\""\n'
        'chars ::= char chars | ""\n'
        'char ::= [^"\\\\\\x00-\\x1f] | "\\\\" ["\\\\/bfnrt] | "\\\\u" [0-9a-fA-F]{4}\n'
        "ws ::= [ \\n]*",
        None,
        '{"k: ab\\n}u0',
    ),
    "mutual": ('root ::= a\na ::= "x" b | ""\nb ::= "y" a | ""', "xy", "xy"),
    "mid_nullable": ('root ::= c\nc ::= "a" ws c | "b" | ""\nws ::= [ \\n]*', "a  a", "ab "),
    "through_root": ('root ::= "a" root | "x" | ""', "a", "ax"),
    "three_rules": ('root ::= a\na ::= "x" b | "z"\nb ::= "y" c\nc ::= "w" a | ""', "xyw", "xywz"),
    # `b ::= c` forwards to a rule predicted in the same row as b itself
    "forwarding": ('root ::= a\na ::= "x" b | "z"\nb ::= c\nc ::= "w" a | ""', "xw", "xwz"),
}

LONG = {  # grammar -> a long input it accepts
    "empty_alt": lambda n: "a" * n,
    "list": lambda n: "12,3," * (n // 5) + "7",
    "gbnf_list": lambda n: "[" + "ab," * (n // 3) + "a]",
    "gbnf_item": lambda n: "<" + "abc " * (n // 4) + ">",
    "json_string": lambda n: '{"k": "' + "ab\\n" * (n // 4) + '"}',
    "mutual": lambda n: "xy" * (n // 2),
    "mid_nullable": lambda n: "a  a" * (n // 4) + "b",
    "through_root": lambda n: "a" * n + "x",
    "three_rules": lambda n: "xyw" * (n // 3) + "z",
    "forwarding": lambda n: "xw" * (n // 2) + "x",
}


def byte_matcher(ebnf: str, **kw) -> xgr.GrammarMatcher:
    compiled = xgr.GrammarCompiler(_byte_tokenizer_info(), cache_enabled=False).compile_grammar(ebnf)
    return xgr.GrammarMatcher(compiled, terminate_without_stop_token=False, **kw)


def accept_time(ebnf: str, text: str) -> float:
    m = byte_matcher(ebnf)
    t = time.perf_counter()
    assert m.accept_string(text.encode())
    dt = time.perf_counter() - t
    assert m.is_completed()
    return dt


def test_issue_repro_100k_bytes() -> None:
    g = xgr.Grammar.from_ebnf('root ::= c\nc ::= "" | "a" c')
    assert _is_grammar_accept_string(g, "a" * 1000)
    assert _is_grammar_accept_string(g, "a" * 100_000)
    assert not _is_grammar_accept_string(g, "a" * 100_000 + "b")


@pytest.mark.parametrize("name", sorted(LONG))
def test_long_inputs_are_linear(name: str) -> None:
    ebnf = GRAMMARS[name][0]
    small = min(accept_time(ebnf, LONG[name](5_000)) for _ in range(3))
    big = accept_time(ebnf, LONG[name](50_000))
    # 10x the bytes: linear is ~10x, the quadratic parser was ~100x (or max_step_work).
    assert big < max(40 * small, 0.05), f"{name}: 5k bytes {small * 1e3:.2f} ms, 50k {big * 1e3:.2f} ms"
    assert big < 2.0


@pytest.mark.parametrize("name", sorted(LONG))
def test_long_inputs_reject_a_bad_end(name: str) -> None:
    m = byte_matcher(GRAMMARS[name][0])
    assert m.accept_string(LONG[name](20_000).encode())
    assert m.is_completed()
    assert not m.accept_string(b"\x01")  # no grammar here allows a control byte
    assert m.is_completed()  # a rejected string leaves the state as it was


def test_tail_nullable_stays_correct() -> None:
    """`c ::= "a" c ws | ""`: every level waits on `ws` after its recursive call, so the rows
    keep one live item per level (no Leo item applies; upstream is quadratic too). Short
    inputs stay exact."""
    ebnf = 'root ::= c\nc ::= "a" c ws | ""\nws ::= " "*'
    assert _is_grammar_accept_string(ebnf, "aaa  ")
    assert _is_grammar_accept_string(ebnf, "a" * 200 + " " * 50)
    assert not _is_grammar_accept_string(ebnf, "a a")


def walk_and_check(name: str, vocab: str, steps: int, seed: int, checks: int) -> None:
    tok = tokenizer(vocab)
    compiled = compiler(vocab).compile_grammar(GRAMMARS[name][0])
    rng = random.Random(seed)
    check_at = set(rng.sample(range(steps), checks))
    m = xgr.GrammarMatcher(compiled)
    bm = new_bitmask(tok.vocab_size)
    for s in range(steps):
        m.fill_next_token_bitmask(bm)
        if s in check_at:
            ok, msg = masks_equal_oracle(m, tok.vocab_size)
            assert ok, f"{name} step {s}: {msg}"
        ids = allowed(bm, tok.vocab_size)
        assert len(ids), f"{name}: empty mask at step {s}"
        t = pick_token(rng, ids, tok, stop_weight=0.0)
        if t in tok.stop_token_ids:
            break
        assert m.accept_token(t)


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_masks_equal_bruteforce_along_walks(name: str) -> None:
    walk_and_check(name, "llama-3.1", steps=400, seed=hash(name) & 0xFFFF, checks=6)


@pytest.mark.parametrize("vocab", ["qwen3", "llama-2"])
def test_masks_equal_bruteforce_other_vocabs(vocab: str) -> None:
    walk_and_check("json_string", vocab, steps=300, seed=7, checks=4)
    walk_and_check("gbnf_list", vocab, steps=300, seed=8, checks=4)


# The byte that would end the right-recursive run, once it has been written this often: the
# rollback walks keep going inside the recursion.
CLOSERS = {"json_string": (ord('"'), 3), "gbnf_item": (ord(">"), 0)}


@pytest.mark.parametrize("name", ["empty_alt", "json_string", "gbnf_item", "mutual"])
def test_rollback_over_1000_tokens(name: str) -> None:
    tok = tokenizer("llama-3.1")
    compiled = compiler("llama-3.1").compile_grammar(GRAMMARS[name][0])
    rng = random.Random(11)
    m = xgr.GrammarMatcher(compiled)
    bm = new_bitmask(tok.vocab_size)
    masks, completed, taken = [], [], []
    closer, after = CLOSERS.get(name, (None, 0))
    if closer is not None:
        has_closer = np.array([closer in t for t in tok.decoded_vocab], dtype=bool)
    written = b""
    for _ in range(1200):
        m.fill_next_token_bitmask(bm)
        masks.append(bm.copy())
        completed.append(m.is_completed())
        ids = allowed(bm, tok.vocab_size)
        if closer is not None and written.count(closer) >= after:
            ids = ids[~has_closer[ids]]
        t = pick_token(rng, ids, tok, stop_weight=0.0)
        written += tok.decoded_vocab[t]
        assert t not in tok.stop_token_ids
        assert m.accept_token(t)
        taken.append(t)
    t0 = time.perf_counter()
    m.rollback(1000)
    assert time.perf_counter() - t0 < 0.05
    assert m.num_steps == 200
    m.fill_next_token_bitmask(bm)
    assert np.array_equal(bm, masks[200]) and m.is_completed() == completed[200]
    ok, msg = masks_equal_oracle(m, tok.vocab_size)
    assert ok, msg
    # and forward again over the same tokens, the masks as the first time
    for i in range(200, 1200):
        if i % 97 == 0:
            m.fill_next_token_bitmask(bm)
            assert np.array_equal(bm, masks[i]), f"step {i}"
        assert m.accept_token(taken[i])


def test_fork_and_jump_forward_on_long_runs() -> None:
    m = byte_matcher('root ::= "<" item ">"\nitem ::= "ab" item | "ab" "."')
    assert m.accept_string(b"<" + b"ab" * 20_000 + b"a")
    assert m.find_jump_forward_bytes() == b"b"
    f = m.fork()
    assert f.accept_string(b"b.>") and f.is_completed()
    assert m.accept_string(b"b") and not m.is_completed()
    assert m.accept_string(b"ab.") and m.find_jump_forward_bytes() == b">"


UPSTREAM_EXTRA = {
    "nested": ('root ::= s\ns ::= "(" s ")" s | ""', "()"),
    "then_bang": ('root ::= c "!"\nc ::= "a" c | "b"', "ab!"),
    "tail_nullable": ('root ::= c\nc ::= "a" c ws | ""\nws ::= " "*', "a "),
}


def test_agrees_with_upstream_on_random_strings() -> None:
    upstream = pytest.importorskip("xgrammar")
    from xgrammar.testing import _is_grammar_accept_string as upstream_accepts

    assert upstream
    cases = {k: (v[0], v[2]) for k, v in GRAMMARS.items()}
    cases.update(UPSTREAM_EXTRA)
    rng = random.Random(2024)
    for name, (ebnf, alpha) in cases.items():
        m0 = byte_matcher(ebnf)
        for _ in range(150):
            n = rng.choice([0, 1, 2, 3, 5, 8, 13, 30, 60])
            if rng.random() < 0.5:  # near-valid: the alphabet's pattern, then noise
                s = (alpha[:-1] * 40)[:n] + "".join(rng.choice(alpha) for _ in range(rng.randint(0, 2)))
            else:
                s = "".join(rng.choice(alpha) for _ in range(n))
            m = m0.fork()
            ours = m.accept_string(s.encode()) and m.is_completed()
            assert ours == upstream_accepts(ebnf, s), f"{name}: {s!r}"
