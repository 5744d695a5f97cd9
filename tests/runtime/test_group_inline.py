"""Group inlining (csrc/lower/lower.c group_inline, nfa.c shared_ref): a regular
sub-language split into non-recursive rules that refer to each other in tail position (a
pattern's automaton emitted one rule per state, the shared branches of a key trie) is built
into its callers' automaton, each member once. The masks stay exact (brute-force oracle at
every step of seeded walks) and the accepted language is the one without inlining
(``inline_max_states=-1``: every rule its own automaton)."""

from __future__ import annotations

import functools
import random

import pytest

import xgrammar2 as xgr
from runtime_helpers import allowed, compiler, masks_equal_oracle, new_bitmask, oracle_walk, tokenizer
from xgrammar2.json_schema import json_schema_to_ebnf

# The converter's shapes: a semver `pattern` under `maxLength` (rules __q8 ... __q140, each
# referenced from two others), and the key of `additionalProperties` beside named
# properties (a trie of the excluded names with a shared branch rule).
SEMVER = {"type": "object", "properties": {"version": {
    "type": "string", "maxLength": 32, "pattern": "^(\\d+\\.\\d+\\.\\d+.*)$"}},
    "required": ["version"], "additionalProperties": False}
KEYS = {"type": "object", "properties": {
    "any-collection-root": {"type": "array"}, "any-object-root": {"type": "object"},
    "employee-info": {"type": "integer"}, "contact": {"type": "string"}},
    "additionalProperties": {"type": "integer"}}

# A word-count `pattern` under `maxLength` (the converter's shape of Github_medium o21142):
# one rule per state of the product automaton, each character a reference to a class rule
# whose `\\uXXXX` escapes are a rule of their own (referenced in non-tail position: a leaf
# that group members keep a reference to, lower.c group_pure), so the walk over the group
# hands over to the parser only on a backslash (walk.c walker_switch).
WORDS = {"type": "object", "properties": {"s": {
    "type": "string", "maxLength": 14, "pattern": "^(?:\\S+\\s+){0,2}\\S+$"}},
    "required": ["s"], "additionalProperties": False}

HAND = {
    # Members reading a finite reference-free rule (`esc`, a leaf once inline_max_states
    # is below its size) in non-tail position.
    "leaf": r'''
root ::= "<" q0
q0 ::= [a-z] q1 | esc q2 | ">"
q1 ::= [a-z] q2 | esc q2 | ">"
q2 ::= [a-z] q3 | esc q3 | "!>"
q3 ::= [a-z] ">" | esc ">"
esc ::= "\\u" [0-9a-f] [0-9a-f] [0-9a-f] [0-9a-f] | "\\" [n"]
''',
    # A DAG of tail references: q2 and q3 are reached from two rules each.
    "dag": r'''
root ::= "<" q0
q0 ::= [0-9] q1 | "." q2
q1 ::= [0-9] q1b | "." q2 | "-" q3
q1b ::= [0-9] q2 | "." q3
q2 ::= [a-z] q3 | "!>"
q3 ::= [a-z] q4 | "?>"
q4 ::= [a-z] [a-z] q5 | "#>"
q5 ::= "x>" | "yz>" | ">"
''',
    # q2 is referenced in a non-tail position (followed by "!]"), so it is its own host;
    # q4 is then reached from two hosts (q2 and root's group): no group for it.
    "mixed": r'''
root ::= "[" q1 | other
q1 ::= [a-c] q2 "!]" | [d-f] q3
q2 ::= [0-9] q4 | "z"
q3 ::= "k" q4 | "m]"
q4 ::= [0-9]{1,3} "]" | "w]"
other ::= "o" q3 | "p]"
''',
    # A member under a repetition of its host, and a nullable member.
    "repeat_nullable": r'''
root ::= ("(" a ")")* "."
a ::= [a-z] b | ""
b ::= [0-9] c | [a-z] a
c ::= "_" | ""
''',
}


@functools.lru_cache(maxsize=None)
def _small_inline(vocab: str) -> xgr.GrammarCompiler:
    return xgr.GrammarCompiler(tokenizer(vocab), inline_max_states=2)


def source(name: str) -> str:
    if name == "semver":
        return json_schema_to_ebnf(SEMVER).ebnf
    if name == "keys":
        return json_schema_to_ebnf(KEYS).ebnf
    if name == "words":
        return json_schema_to_ebnf(WORDS).ebnf
    return HAND[name]


SAMPLES = {
    "semver": ['{"version":"1.2.3"}', '{"version":"10.20.30-rc.1+x"}', '{"version":"1.2"}',
               '{"version":"1.2.3' + "a" * 27 + '"}', '{"version":"1.2.3' + "a" * 28 + '"}',
               '{"version":"a1.2.3"}', '{"version":"1.2.3\\u002e"}', '{"version":"\\u0031.2.3"}',
               '{"version": "1.2.3"}', '{"version":"1..3"}'],
    "keys": ['{"any-collection-root":[]}', '{"x":1}', '{"any":1}', '{"any-object-root":1}',
             '{"any-object-roots":1}', '{"employee-info":1,"employee":2}', '{"contact":"a","cont":3}',
             '{"contact":1}', '{"any-collection-roo":5}', '{"\\u0061ny":1}'],
    "words": ['{"s":"ab cd"}', '{"s":"a\\u0020b"}', '{"s":"a\\"b"}', '{"s":"a\\\\b c"}', '{"s":"ab  cd  ef"}',
              '{"s":"a b c d"}', '{"s":"abcdefghijklmn"}', '{"s":"abcdefghijklmno"}', '{"s":" a"}',
              '{"s":"\\u0041bc d"}', '{"s":"a\\tb"}', '{"s":"a\\u00a0b"}', '{"s":"ab "}'],
    "leaf": ["<>", "<a>", "<ab!>", "<abc>", "<\\u00a1b>", "<a\\nb!>", "<\\\"\\n\\u0000\\n>", "<ab\\u12>",
             "<abcd>", "<\\x>", "<a\\u00aa!>"],
    "dag": ["<1.!>", "<12.ab#>", "<123?>", "<1-?>", "<.a?>", "<.!>", "<12.abcdex>", "<12.abcdeyz>",
            "<12.abcde>", "<1x>", "<12.abcdeq>", "<>"],
    "mixed": ["[a1w]!]", "[az!]", "[dk5]", "[dm]", "ok12]", "om]", "p]", "[a!]", "ok1234]", "[dkw]",
              "[a12]!]", "[ez!]"],
    "repeat_nullable": [".", "().", "(a1_)(ab1)(abc2).", "(a).", "(ab).", "(a1__).", "(1).", "(aaaa)."],
}


@pytest.mark.parametrize("inline_max", [None, 2])
@pytest.mark.parametrize("name", list(SAMPLES))
def test_language_unchanged(name: str, inline_max: int | None) -> None:
    """Every sample string is accepted as without inlining (upstream's semantics: the
    grammar's language)."""
    tok = tokenizer("qwen3")
    src = source(name)
    on = xgr.GrammarCompiler(tok, cache_enabled=False, inline_max_states=inline_max).compile_grammar(src)
    off = xgr.GrammarCompiler(tok, cache_enabled=False, inline_max_states=-1).compile_grammar(src)
    rng = random.Random(name)
    texts = list(SAMPLES[name])
    for t in SAMPLES[name]:  # every prefix cut and a one-character edit of each sample
        for _ in range(6):
            i = rng.randrange(len(t) + 1)
            texts.append(t[:i])
            texts.append(t[:i] + rng.choice('0a.-"!?#xyz\\') + t[i:])
    for t in texts:
        a, b = xgr.GrammarMatcher(on), xgr.GrammarMatcher(off)
        ra, rb = a.accept_string(t), b.accept_string(t)
        assert ra == rb, f"{name}: {t!r} accepted={ra} without inlining={rb}"
        if ra:
            assert a.is_completed() == b.is_completed(), f"{name}: {t!r} completion differs"


@pytest.mark.parametrize("inline_max", [None, 2])
@pytest.mark.parametrize("vocab", ["qwen3", "llama-2"])
@pytest.mark.parametrize("name", list(SAMPLES))
def test_masks_exact_along_walks(name: str, vocab: str, inline_max: int | None) -> None:
    """inline_max_states=2 leaves the small rules of the hand-written grammars to the
    groups (by default they are small enough to be copied into every caller)."""
    tok = tokenizer(vocab)
    comp = compiler(vocab) if inline_max is None else _small_inline(vocab)
    compiled = comp.compile_grammar(source(name))
    rng = random.Random(f"{name}/{vocab}")
    # the second walk starts inside the sub-language (the first visit of its states)
    prefix = {"semver": '{"version":"', "keys": '{"', "words": '{"s":"'}.get(name, "")
    oracle_walk(compiled, tok, rng, f"{name}/{vocab}", 10, 2, ("", prefix))


def _random_dag(rng: random.Random) -> str:
    """A non-recursive grammar of rules that refer forward, mostly in tail position."""
    n = rng.randint(3, 12)
    atoms = ['"a"', '"b"', '"."', '"-"', "[a-c]", "[0-9]", '"ab"', '"\\u00e9"']
    lines = ['root ::= "<" q0' + rng.choice(["", ' ">"'])]
    for i in range(n):
        alts = []
        for _ in range(rng.randint(1, 3)):
            seq = [rng.choice(atoms) for _ in range(rng.randint(1, 2))]
            later = list(range(i + 1, n))
            if later and rng.random() < 0.8:
                ref = f"q{rng.choice(later)}"
                kind = rng.random()
                if kind < 0.7:
                    seq.append(ref)  # tail
                elif kind < 0.85:
                    seq += [ref, rng.choice(atoms)]  # not tail
                else:
                    seq.append(f"({ref} | {rng.choice(atoms)})?")  # under a repetition
            alts.append(" ".join(seq))
        if rng.random() < 0.2:
            alts.append('""')
        lines.append(f"q{i} ::= " + " | ".join(alts))
    return "\n".join(lines) + "\n"


TINY = [s.encode() for s in ["<", ">", "a", "b", ".", "-", "c", "0", "5", "9", "ab", "a.", "<a", "b>", "-0",
                               "ba", "abab", "0-", "9>", ".a", "é", "aé", "<0", "c9", "5b>", "a-b", "..", "bb"]]


@pytest.mark.parametrize("seed", range(40))
def test_random_dags_same_language_and_exact_masks(seed: int) -> None:
    rng = random.Random(seed)
    src = _random_dag(rng)
    tok = xgr.TokenizerInfo(TINY)
    grammars = {k: xgr.GrammarCompiler(tok, cache_enabled=False, inline_max_states=k).compile_grammar(src)
                for k in (-1, 2, 64)}
    alphabet = ["<", ">", "a", "b", ".", "-", "c", "0", "5", "é"]
    texts = []
    for _ in range(150):
        t = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9)))
        texts.append("<" + t if rng.random() < 0.7 else t)
    bm = new_bitmask(tok.vocab_size)
    for _ in range(20):  # strings of the language: random walks of the build without inlining
        m, out = xgr.GrammarMatcher(grammars[-1]), b""
        for _ in range(12):
            m.fill_next_token_bitmask(bm)
            ids = [int(i) for i in allowed(bm, tok.vocab_size) if int(i) < len(TINY)]
            if not ids or (m.is_completed() and rng.random() < 0.3):
                break
            t = rng.choice(ids)
            assert m.accept_token(t)
            out += TINY[t]
        w = out.decode("utf-8", "replace")
        texts += [w, w[:-1], w + rng.choice(alphabet)]
    for t in texts:
        ms = {k: xgr.GrammarMatcher(g) for k, g in grammars.items()}
        res = {k: (m.accept_string(t), m.is_completed()) for k, m in ms.items()}
        assert len(set(res.values())) == 1, f"seed {seed}: {t!r} {res}\n{src}"
    for k in (2, 64):
        m = xgr.GrammarMatcher(grammars[k])
        bm = new_bitmask(tok.vocab_size)
        for step in range(8):
            ok, why = masks_equal_oracle(m, tok.vocab_size)
            assert ok, f"seed {seed} inline {k} step {step}: {why}\n{src}"
            if m.is_terminated():
                break
            m.fill_next_token_bitmask(bm)
            ids = allowed(bm, tok.vocab_size)
            if not len(ids):
                break
            assert m.accept_token(int(rng.choice(list(ids))))
