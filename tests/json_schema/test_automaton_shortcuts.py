"""The converter's automaton shortcuts give exactly minimize's automata (same states, numbering
and labels), so the EBNF does not change (issue 36: key regions of objects with many listed
keys and a pattern cost ~5 ms each in refinements that merge nothing):

- literal_set_dfa minimizes its trie in one backward pass (an acyclic automaton);
- negate(a, minimal=True) of a minimize output skips the refinement (a complement of a minimal
  complete automaton is minimal), keeping the canonical numbering;
- restrict_alphabet(a, minimal=True) returns a minimize output whose labels lie in the
  alphabet as it is.
"""

import random

from xgrammar2.json_schema import automaton as fa
from xgrammar2.json_schema import charset as cs
from xgrammar2.json_schema import regex as rx

_ALPHABETS = ["ab", "abc", "abcxyz", "aé\u4e2d\U0001f600", "0123456789_-"]


def _trie(strings):
    """literal_set_dfa's trie, minimized by the generic refinement."""
    trans = [dict()]
    accept = [False]
    for s in strings:
        st = 0
        for ch in s:
            nxt = trans[st].get(ord(ch))
            if nxt is None:
                nxt = len(accept)
                trans[st][ord(ch)] = nxt
                trans.append(dict())
                accept.append(False)
            st = nxt
        accept[st] = True
    return fa.minimize(fa.DFA([[(((cp, cp),), t) for cp, t in row.items()] for row in trans], accept))


def _same(a: fa.DFA, b: fa.DFA) -> bool:
    return list(a.accept) == list(b.accept) and [tuple(r) for r in a.trans] == [tuple(r) for r in b.trans]


def _word_sets(rng, count):
    out = [[], [""], ["a"], ["", "a", "ab"], ["ab", "b"], ["abc", "bc", "c", "xbc"]]
    for _ in range(count):
        alpha = rng.choice(_ALPHABETS)
        k = rng.randint(1, 40)
        out.append(sorted({"".join(rng.choice(alpha) for _ in range(rng.randint(0, 9))) for _ in range(k)}))
    return out


def test_literal_set_dfa_equals_the_minimized_trie():
    rng = random.Random(44)
    for words in _word_sets(rng, 300):
        assert _same(fa.literal_set_dfa(words), _trie(words)), words


def test_negate_of_a_minimal_automaton_equals_the_refined_complement():
    rng = random.Random(4401)
    cases = [fa.literal_set_dfa(w) for w in _word_sets(rng, 150)]
    for pat in ["^a", "b$", "^[a-z]+$", "x", "^(foo|bar)[0-9]*$", ".*", "^$", "^[^a]", "é.", "^.{2,5}$",
                "^\\d+(\\.\\d+)?$", "^(?!x).*", "^a[\\s\\S]*$", "^(ab|c)[\\s\\S]*$", "[\\s\\S]*z[\\s\\S]*"]:
        try:
            cases.append(fa.from_regex(rx.parse(pat)))
        except Exception:  # noqa: BLE001 - a pattern this front end refuses is no case
            continue
    assert len(cases) > 150
    for d in cases:
        for universe in (cs.SCALARS, ((0, 0x10FFFF),)):
            assert _same(fa.negate(d, universe, minimal=True), fa.negate(d, universe)), d


def test_key_regions_automata_are_as_before():
    """key_regions' regions (listed keys x patterns), restricted to the scalars: the shortcut
    path equals the refined one."""
    from xgrammar2.json_schema import emit_somes, ir

    rng = random.Random(4402)
    pats = [rx.parse(p) for p in ["^x-", "^[a-z]+$", "id$", ".*_at$", "^(a|b)"]]
    for _ in range(60):
        words = sorted({"".join(rng.choice("abxid-_t") for _ in range(rng.randint(1, 6)))
                        for _ in range(rng.randint(1, 30))})
        ps = rng.sample(pats, rng.randint(1, 3))
        got = emit_somes.key_regions(words, ps, None, fa.DEFAULT_LIMIT)
        base = fa.negate(_trie(words))
        want = [((), base)]
        for p in ps:
            pd = ir.regex_dfa(p)
            nxt = []
            for m, d in want:
                inside = fa.intersect(d, pd)
                outside = fa.difference(d, pd)
                if not inside.is_empty():
                    nxt.append((m + (p,), inside))
                if not outside.is_empty():
                    nxt.append((m, outside))
            want = nxt
        assert [m for m, _ in got] == [m for m, _ in want]
        for (_, g), (_, w) in zip(got, want):
            assert _same(fa.restrict_alphabet(g, minimal=True), fa.restrict_alphabet(w)), (words, ps)


_DISJOINT_PATTERNS = ["^schema ", "^cast ", "^table ", "^type ", "^view ", "^x-", "^[a-z]+$", "id$", ".*_at$",
                      "^(a|b)", "^$", ".*", "^s.*e$", "^t", "^\\d+$", "^[^s]", "e "]


def test_disjoint_agrees_with_the_emptiness_of_the_product():
    dfas = [fa.from_regex(rx.parse(p)) for p in _DISJOINT_PATTERNS]
    dfas += [fa.literal_set_dfa(w) for w in (["schema a", "table"], ["id", "x-y"], [""], [])]
    dfas.append(fa.negate(fa.literal_set_dfa(["schema x"]), minimal=True))
    n_disjoint = 0
    for a in dfas:
        for b in dfas:
            want = fa.intersect(a, b).is_empty()
            assert fa.disjoint(a, b) == want, (a.key(), b.key())
            n_disjoint += want
    assert 0 < n_disjoint < len(dfas) ** 2


def test_key_regions_of_pattern_lists_sharing_prefixes_equal_a_fresh_split():
    """key_regions splits each prefix of patterns once per (listed keys) and reuses it for
    later objects (emit_somes._SPLITS), skipping the patterns a region cannot meet: every
    list of a family sharing prefixes (JsonSchemaStore pyrseas' shape) gives the regions of
    a split from scratch."""
    from xgrammar2.json_schema import emit_somes, ir

    rng = random.Random(4403)
    asts = [rx.parse(p) for p in _DISJOINT_PATTERNS]
    emit_somes._SPLITS.clear()
    for _ in range(40):
        head = rng.sample(asts, rng.randint(1, 6))
        words = rng.choice([[], ["schema a"], ["id", "table"], ["x-a", "type", "cast z"]])
        for tail in rng.sample(asts, 3):
            ps = head + [tail] if tail not in head else head
            try:
                got = emit_somes.key_regions(words, ps, None, fa.DEFAULT_LIMIT)
            except ir.NotExpressible:
                continue
            want = [((), fa.negate(_trie(words)) if words else None)]
            for p in ps:
                pd = ir.regex_dfa(p)
                nxt = []
                for m, d in want:
                    inside = pd if d is None else fa.intersect(d, pd)
                    outside = fa.negate(pd) if d is None else fa.difference(d, pd)
                    if not inside.is_empty():
                        nxt.append((m + (p,), inside))
                    if not outside.is_empty():
                        nxt.append((m, outside))
                want = nxt
            assert [m for m, _ in got] == [m for m, _ in want], (words, ps)
            for (_, g), (_, w) in zip(got, want):  # (as the emitter uses them: emit_somes.restricted)
                assert _same(fa.restrict_alphabet(g, minimal=True), fa.restrict_alphabet(w)), (words, ps)
    assert emit_somes._SPLIT_NODES[0] > 0


def _full(p):
    """The converter's automaton of pattern ``p`` (search semantics where not anchored)."""
    from xgrammar2.json_schema import ir

    raw = rx.parse(p)
    full = rx.to_full_match(raw)
    return ir.regex_dfa(full if full is not None else rx.cat(rx.ANY_STAR, raw, rx.ANY_STAR))


def test_minus_words_equals_the_refined_difference():
    """fa.minus_words(b, words): a pattern's keys (or its complement's) less the listed ones,
    decided on the trie's pairs without a refinement, equals the product with the complement
    of the trie refined by minimize (states, numbering, labels), for patterns with lookaheads,
    classes beyond the BMP and surrogate ranges; words sharing prefixes with the pattern's
    strings (web-types' "pattern" among listed names under ``^(?!pattern$).*$``)."""
    rng = random.Random(4404)
    pats = ["^(?!pattern$).*$", "^a", "^[a-c]+$", "b", "^x-", "^(ab|c)*$", "^.{2,3}$", "^[^a]", "a$",
            "^(?!ab).*", "^\\d+$", "[\\ud800-\\udfff]", "^[\U0001f600-\U0001f602]", "^$", "é"]
    sets = _word_sets(rng, 60) + [["pattern", "name", "path", "patterns", "a", "ab", "abc"]]
    n = 0
    for p in pats:
        pd = _full(p)
        sides = [fa.restrict_alphabet(pd, minimal=True),
                 fa.restrict_alphabet(fa.negate(pd, minimal=True), minimal=True)]
        for words in sets:
            if not words:
                continue
            others = fa.negate(fa.literal_set_dfa(words), minimal=True)
            for side, want in zip(sides, (fa.intersect(others, pd), fa.difference(others, pd))):
                got = fa.minus_words(side, words)
                assert _same(got, want), (p, words)
                assert _same(got, fa.minimize(fa.difference(side, fa.literal_set_dfa(words)))), (p, words)
                n += 1
    assert n > 1500


def test_minus_words_keeps_the_state_limit():
    words = ["k%d" % i for i in range(400)]
    try:
        fa.minus_words(_full("^k"), words, limit=50)
    except fa.AutomatonTooLarge:
        pass
    else:
        raise AssertionError("minus_words passed the state limit")


def test_patterns_that_miss_the_other_keys_leave_one_region_object():
    """Objects with one listed-key set whose patterns meet none of their other keys share the
    region automaton of those keys, one object (the emitter writes a key automaton's rules once
    per object: Github_trivial o88605 wrote them per pattern when each split made its own)."""
    from xgrammar2.json_schema import emit_somes

    emit_somes._SPLITS.clear()
    words = ["mbox", "openid", "account"]
    first = emit_somes.key_regions(words, [rx.parse("^mbox$")], None, fa.DEFAULT_LIMIT)
    second = emit_somes.key_regions(words, [rx.parse("^(openid|account)$")], None, fa.DEFAULT_LIMIT)
    assert [m for m, _ in first] == [()] and [m for m, _ in second] == [()]
    assert first[0][1] is second[0][1]
    assert _same(first[0][1], fa.negate(_trie(words)))
