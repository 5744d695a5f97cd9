"""Two memos of the exact checks, against the brute-force mask (every token run through the
parser) at every step.

1. Tail memo rows under a collapsed key (tail_memo.c tail_count, matcher.c tail_id): a
   repetition's counter at or above its minimum compares equal at every count, and a tail is
   read or kept under that key only when it is shorter than the row's room (max - count);
   otherwise under the row's exact key. Strings of `maxLength` 17-25 (within
   XGR_TAIL_MAX_SUFFIX of the bound at every count, so before this key every count had a row
   of its own) are typed one character per token, then closed by tokens that hold the
   closing quote and go on into a wide object, so that tails kept at a count with room are
   read at counts without. Fails when the collapsed key is used whatever the room.
2. The parser's completion memo (earley.c complete_from): the items that completing a rule
   advances in a wide origin row, by row and row generation. The exact checks truncate and
   build rows again at the same index token after token, and a rollback builds other rows
   where the old ones stood; a walk rolls back into the string and types other characters
   and other property values. Fails when the row's generation is left out of the key."""

from __future__ import annotations

import pytest

import xgrammar2 as xgr
from runtime_helpers import assert_oracle_mask, one_char_tokens, tokenizer, type_string_checked, wide_object_schema

VOCABS = ["qwen3", "llama-2"]


def _matcher(vocab: str, max_len: int, min_len: int) -> xgr.GrammarMatcher:
    c = xgr.GrammarCompiler(tokenizer(vocab), cache_enabled=False)
    g = c.compile_json_schema(wide_object_schema(max_len, min_len, 36, second_string=True), any_whitespace=False, separators=(",", ":"))
    return xgr.GrammarMatcher(g, max_rollback_tokens=128)


@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("min_len,max_len", [(0, 17), (0, 20), (3, 22), (0, 25), (18, 24)])
def test_string_near_its_bound_at_every_count(vocab: str, min_len: int, max_len: int) -> None:
    m = _matcher(vocab, max_len, min_len)
    type_string_checked(m, vocab, max_len, ['","t":"', "xy", '","q0', '2":true', "}"])


@pytest.mark.parametrize("vocab", VOCABS)
@pytest.mark.parametrize("max_len", [19, 23])
def test_rollback_into_the_string(vocab: str, max_len: int) -> None:
    m = _matcher(vocab, max_len, 0)
    one = one_char_tokens(vocab)
    assert m.accept_string('{"p03":7,"s":"')
    for ch in "abcdefghijklmnop"[: max_len - 4]:
        assert m.accept_token(one[ch])
    assert_oracle_mask(m, vocab, "inside the string")
    # close the string and type the next property, then roll back into the string
    closing = [one[c] for c in '","t":"uv","q01":false']
    for t in closing:
        assert m.accept_token(t)
    assert_oracle_mask(m, vocab, "after the next properties")
    m.rollback(len(closing) + 3)
    assert_oracle_mask(m, vocab, "after the rollback into the string")
    for ch in "XYZ":
        assert m.accept_token(one[ch])
        assert_oracle_mask(m, vocab, f"after {ch!r}")
    for piece in ['","q00', '":true,"q05":', "false}"]:
        assert m.accept_string(piece), piece
        assert_oracle_mask(m, vocab, f"after {piece!r}")


def _wide_ebnf(n: int = 40) -> str:
    # Row 1 predicts n rules k0..k(n-1) (a wide origin row); w and v wait there on the same
    # rules but go on differently after them. Each k is nested (not a tail reference: no Leo
    # item stands in for its completion) and recursive (not inlined).
    ks = [f'k{i} ::= "<" k{i} ">" | "{chr(97 + i % 26)}{i}"' for i in range(n)]
    w = "w ::= " + " | ".join(f"k{i}" for i in range(n))
    v = "v ::= " + " | ".join(f'k{i} "!"' for i in range(n))
    return "\n".join(['root ::= "a" w | "b" v', w, v] + ks) + "\n"


@pytest.mark.parametrize("vocab", VOCABS)
def test_completion_memo_after_rollback(vocab: str) -> None:
    # Completing k7 advances the items of row 1. After a rollback, row 1 is rebuilt from
    # another first byte: the items it advances are v's, not w's, though the row index and
    # the rule are the same (the memo keys by the row's generation).
    tok = tokenizer(vocab)
    g = xgr.GrammarCompiler(tok, cache_enabled=False).compile_grammar(_wide_ebnf())
    m = xgr.GrammarMatcher(g, max_rollback_tokens=16)
    for piece in ["a", "<", "h7", ">"]:
        assert m.accept_string(piece), piece
        assert_oracle_mask(m, vocab, f"after {piece!r}")
    assert not m.accept_string("!")
    m.rollback(4)
    fresh = xgr.GrammarMatcher(g)
    for piece in ["b", "<", "h7", ">"]:
        assert m.accept_string(piece), piece
        assert fresh.accept_string(piece), piece
        mine, theirs = xgr.allocate_token_bitmask(1, tok.vocab_size), xgr.allocate_token_bitmask(1, tok.vocab_size)
        m.fill_next_token_bitmask(mine)
        fresh.fill_next_token_bitmask(theirs)
        assert (mine == theirs).all(), f"{vocab}: the mask after {piece!r} differs from a new matcher's"
    assert m.accept_string("!"), "v's item after k7 was not advanced"
    assert m.is_terminated() or m.accept_token(tok.stop_token_ids[0])
