"""Lookahead (?=..) (?!..) and word boundaries \\b \\B in JSON Schema patterns are compiled
exactly (automaton.from_regex's subset construction over pending lookahead obligations).

Oracle: Python's ``re.search`` on every string up to a length over a small alphabet that
covers the pattern's characters. Python and ECMA-262 (u flag) agree on these constructs
with re.ASCII (\\w \\b are ASCII in both) once ``$`` is written ``\\Z`` (Python's ``$`` also
matches before a final newline); the alphabets avoid \\r and U+2028/9 (where '.' differs).
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import re

import pytest

from xgrammar2.json_schema import automaton as fa
from xgrammar2.json_schema import json_schema_to_ebnf
from xgrammar2.json_schema import regex as rx
from xgrammar2.json_schema.errors import UnsupportedSchemaError

import suite_runner as S


def _python_re(p: str) -> str:
    """The pattern for Python's re: ``$`` outside classes becomes ``\\Z``."""
    out, i, in_class = [], 0, False
    while i < len(p):
        c = p[i]
        if c == "\\":
            out.append(p[i:i + 2])
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
        elif c == "]" and in_class:
            in_class = False
        elif c == "$" and not in_class:
            c = r"\Z"
        out.append(c)
        i += 1
    return "".join(out)


#: Where Python's re differs from ECMA-262: before Python 3.14, \B never matches the empty
#: string; in ECMA-262 it does (no word character on either side: /\B/.test("") is true).
ECMA_NOT_PYTHON = {("\\B", ""): True}


def _search_dfa(p: str):
    raw = rx.parse(p)
    full = rx.to_full_match(raw)
    return fa.from_regex(full if full is not None else rx.cat(rx.ANY_STAR, raw, rx.ANY_STAR))


def _search_matcher(p: str):
    raw = rx.parse(p)
    full = rx.to_full_match(raw)
    return fa.compile_nfa(full if full is not None else rx.cat(rx.ANY_STAR, raw, rx.ANY_STAR))


def _strings(alphabet, n):
    for k in range(n + 1):
        for t in itertools.product(alphabet, repeat=k):
            yield "".join(t)


def _mismatches(p, alphabet, n, extra=()):
    d = _search_dfa(p)
    m = _search_matcher(p)
    ref = re.compile(_python_re(p), re.ASCII)
    bad = []
    for s in itertools.chain(_strings(alphabet, n), extra):
        want = ECMA_NOT_PYTHON.get((p, s), ref.search(s) is not None)
        if d.run(s) != want or fa.nfa_match(m, s) != want:
            bad.append((s, want, d.run(s), fa.nfa_match(m, s)))
    return bad


# (pattern, alphabet, max length): lookaheads at the start, the middle, the end, negated,
# nested in lookaheads, in alternations and under quantifiers; \b \B next to word and other
# characters, at both ends, inside lookaheads; ^ and $ inside lookaheads.
HAND = [
    ("a(?=b)", "abx", 6),
    ("a(?!b)", "abx", 6),
    ("^(?!ab)[ab]+$", "abx", 6),
    ("^(?=.*b)(?=.*a)[ab]{2,4}$", "abx", 6),
    ("(?=a(?!b))", "abx", 6),
    ("^((?!ab).)*$", "abx", 6),
    ("x(?=.*y$)", "xy.", 6),
    ("^(?!^a|b).*", "abx", 6),
    ("(?:(?=a)\\w|b)+$", "ab.", 6),
    ("^(?:a(?!b)|b(?=a))*$", "abx", 6),
    ("(?=(?!a)b)", "abx", 6),
    ("^(?=a|b$)..$", "abx", 6),
    ("^(?!$)", "ab", 5),
    ("(?!)", "ab", 4),
    ("(?=)a", "ab", 4),
    ("a(?=$)", "ab", 5),
    ("(?=a{2,3}b)a", "ab", 7),
    ("\\bab\\b", "ab .", 6),
    ("a\\B", "ab .", 6),
    ("\\B", "a .", 5),
    ("\\b", "a .", 5),
    ("^\\b", "a .", 4),
    ("\\b$", "a .", 5),
    ("\\Ba\\B", "a _.", 5),
    ("(?=\\bb)", "ab .", 6),
    ("(?!a\\b)a", "ab .", 6),
    ("^(?:\\w+\\b\\W?)+$", "a .", 6),
    ("x\\b(?=\\W|$)", "x._", 6),
]


@pytest.mark.parametrize("p, alphabet, n", HAND)
def test_lookaround_search_language_matches_python_re(p, alphabet, n):
    """Every string up to n characters: the DFA and the lazy matcher (regex_match's path)
    accept exactly what re.search finds. Mutants that fail this: a negative lookahead read
    as positive (_Look._closure passing a[2] negated), obligations ignored at the end of
    the input (_Look.accepting without the all(...)), \\b's previous-character context
    reset to START after every character (moves: nctx = START)."""
    assert _mismatches(p, alphabet, n)[:5] == []


# The lookaround patterns of JSONSchemaBench's schemas (all in JsonSchemaStore), with an
# alphabet covering what they test and the words they name.
REAL = [
    ("^(?![ \\t\\n]*\\(default(.*)\\))[\\s\\S]*", " (d)x", 5, ["(default)", " (default x)", "(defaultx", "x(default)"]),
    ("^@([\\da-z](?:(?!.*--)[\\da-z-]*[\\da-z])?)/([\\da-z](?:(?!.*--)[\\da-z-]*[\\da-z])?)$", "@/a-", 6, []),
    ("^([\\da-z](?:(?!.*--)[\\da-z-]*[\\da-z])?)$", "a-1", 6, []),
    ("^(?!@@)[@a-zA-Z0-9_-]+$", "@a_", 6, []),
    ("^(?!org\\.bukkit\\.)([a-zA-Z_$][a-zA-Z\\d_$]*\\.)*[a-zA-Z_$][a-zA-Z\\d_$]*$", "a.1$", 5,
     ["org.bukkit.x", "org.bukkitx", "xorg.bukkit.x", "org.bukkit.", "com.org.bukkit.a"]),
    ("((?:[^/]*/)*)(?=\\.(yaml|yml|json))", "/.y", 4, [".yaml", "a/.yml", ".json", ".jso", "x.yamlx", "/.yam"]),
    ("^(?!@@)[\\w@]+$", "@a.", 6, []),
    ("^(https?://|/?.?-?(?!\\w+://)\\w).+\\.ya?ml$", "/:a.", 4,
     ["http://a.yml", "a://b.yaml", "/-a.yml", "ab://c.yml", "a.yml", "https://x.yaml", "/.-a.yaml"]),
    ("^(?!.*\\/)^(.*[^.]+.*)$", "./a", 6, []),
    ("^(?=[^=]+$)(?!\\s+$)(.|\\n)+$", "= \na", 5, []),
    ("^(?!tag|category)$", "tag", 4, ["category", "categor"]),
    ("^(?![i|I][o|O][b|B][r|R][o|O][k|K][e|E][r|R])", "iO|x", 4, ["iobroker", "IOBROKER", "ioBrokerX", "xiobroker", "i|b|r|k|"]),
    ("^(?!^lucene\\.|builtin\\.|mongodb\\.).*", "l.x", 4, ["lucene.x", "builtin.a", "mongodb.", "xlucene.", "lucene", "builtin"]),
    ("^(?!io\\.papermc\\.)([a-zA-Z_$][a-zA-Z\\d_$]*\\.)*[a-zA-Z_$][a-zA-Z\\d_$]*$", "i.$1", 5, ["io.papermc.x", "io.papermcx"]),
    ("^(?!interactive|name|style).+$", "nam", 5, ["name", "names", "style", "interactive", "xname", "styl"]),
    ("^(?!.*(\\{TriggerCondition\\}|\\{LoggingBlock\\}|\\{IncMeasurement\\}|\\{ConfigName\\}|\\{IncTrigger\\|[0-9]*\\}|"
     "[\"<>*?:/\\\\])).*\\.[bB][lL][fF]$", "a.b<", 4,
     ["x.blf", "a.BLF", "{ConfigName}.blf", "{IncTrigger|12}.blf", "{IncTrigger|}.blf", "{IncTrigger|x}.blf", "a:b.blf"]),
    ("^(?!pattern$).*$", "pat", 5, ["pattern", "patterns", "xpattern", "patter"]),
    ("^((?!(c|C)(l|L)(y|Y)(d|D)(e|E)).)*$", "cly", 5, ["clyde", "CLYDE", "a cLyDe b", "clydx", "clyd"]),
]


@pytest.mark.parametrize("p, alphabet, n, extra", REAL, ids=[r[0][:40] for r in REAL])
def test_real_schema_lookaround_patterns_match_python_re(p, alphabet, n, extra):
    """The same oracle on the JSONSchemaBench patterns, plus the words they name and near
    misses (enumeration over a few characters rarely spells them). Mutant that fails this:
    obligations dropped when their automaton reaches a dead state regardless of sign
    (_Look._norm returning _DROP for st is None on a positive lookahead)."""
    assert _mismatches(p, alphabet, n, extra)[:5] == []


def test_lookaround_keyword_list_is_exact():
    """The 76-word negative lookahead of JsonSchemaStore---vars: each keyword is refused
    as a whole name and accepted with a suffix (mutant: the obligation's sub-automaton
    built for X instead of X·Σ* in _sub_automaton fails on the suffixed names)."""
    p = ("^(?!(False|None|True|and|any_errors_fatal|as|assert|async|await|become|become_exe|become_flags|"
         "become_method|become_user|break|check_mode|class|collections|connection|continue|debugger|def|del|"
         "diff|elif|else|environment|except|fact_path|finally|for|force_handlers|from|gather_facts|"
         "gather_subset|gather_timeout|global|handlers|hosts|if|ignore_errors|ignore_unreachable|import|in|is|"
         "lambda|max_fail_percentage|module_defaults|name|no_log|nonlocal|not|or|order|pass|port|post_tasks|"
         "pre_tasks|raise|remote_user|return|roles|run_once|serial|strategy|tags|tasks|throttle|timeout|try|"
         "vars|vars_files|vars_prompt|while|with|yield)$)[a-zA-Z_][\\w]*$")
    words = re.findall(r"[A-Za-z_]+", p.split("(?!(")[1].split(")$)")[0])
    assert len(words) == 76
    extra = [w for w in words] + [w + "x" for w in words] + ["x" + w for w in words] + [w[:-1] for w in words]
    assert _mismatches(p, "a_1", 3, extra)[:5] == []
    d = _search_dfa(p)
    assert not any(d.run(w) for w in words) and all(d.run(w + "2") for w in words)


def test_lookbehind_and_repeated_assertions_are_refused_with_their_column():
    with pytest.raises(rx.RegexUnsupported, match=r"column 2: Lookbehind assertion \(\?<="):
        rx.parse("a(?<=a)")
    with pytest.raises(rx.RegexSyntaxError, match="column 6: There is nothing to repeat"):
        rx.parse("(?=a)+")
    with pytest.raises(UnsupportedSchemaError) as e:
        json_schema_to_ebnf({"type": "string", "pattern": "(?<!x)y"})
    assert e.value.keyword == "pattern" and "Lookbehind" in str(e.value)


def test_lookahead_automaton_keeps_the_state_limit():
    """A lookahead whose exact automaton is too large is refused by size, with the
    state-limit message, not approximated (JsonSchemaStore---aerleon-definitions' fqdn;
    a length lookahead whose body fits the 4,000-state limit and whose search automaton does not). Mutant that fails this: the limit
    check of _Look.dfa removed (the second pattern then compiles)."""
    with pytest.raises(fa.AutomatonTooLarge, match="state limit"):
        _search_dfa("^(?=.{0,2500}$)a*")
    assert _search_dfa("^(?=.{0,1500}$)a*").n == 1501
    p = "^(?!.*://)(?=.{1,255}$)((.{1,63}\\.){1,127}(?![0-9]*$)[a-z0-9-]+\\.?)$"
    with pytest.raises(fa.AutomatonTooLarge, match="state limit"):
        _search_dfa(p)
    with pytest.raises(UnsupportedSchemaError, match="exceeds the state limit"):
        json_schema_to_ebnf({"type": "string", "pattern": p})


def test_refused_pattern_automaton_is_built_once(monkeypatch):
    """A pattern whose automaton passes the state limit is refused again from memory: a oneOf's
    overlap check (the emptiness of the branches' intersection) and then the emitter each asked
    for it, and each built it up to the limit (0.3 s for JsonSchemaStore---aerleon-definitions'
    fqdn). The refusal is the one the emitter gave."""
    from xgrammar2.json_schema import ir

    p = "^(?!.*://)(?=.{1,255}$)((.{1,65}\\.){1,127}(?![0-9]*$)[a-z0-9-]+\\.?)$"  # (not the test above's)
    built = [0]  # (automata refused: the lookahead bodies' own automata, built inside, fit)
    orig = fa.from_regex

    def counted(*a, **k):
        try:
            return orig(*a, **k)
        except fa.AutomatonTooLarge:
            built[0] += 1
            raise

    monkeypatch.setattr(fa, "from_regex", counted)
    monkeypatch.setattr(ir, "_dfa_refused", {})
    schema = {"oneOf": [{"type": "string", "pattern": p}, {"type": "string", "maxLength": 2}]}
    with pytest.raises(UnsupportedSchemaError, match="'pattern' at #/oneOf/0: pattern automaton .* exceeds "
                                                     "the state limit"):
        json_schema_to_ebnf(schema)
    assert built[0] == 1, built[0]
    # the overlap check alone (another pair of branches): from memory too
    with pytest.raises(UnsupportedSchemaError, match="exceeds the state limit"):
        json_schema_to_ebnf({"oneOf": [{"type": "string", "maxLength": 3}, {"type": "string", "pattern": p}]})
    assert built[0] == 1, built[0]

def test_lookahead_schemas_constrain_strings_and_keys():
    """Through the converter and a matcher: pattern (string values, with a length bound and
    a second pattern) and patternProperties (key regions)."""
    check = S.OursPipeline(strict_mode=True)
    c, st = check.compile({"type": "string", "pattern": "^(?!org\\.)[a-z.]+$", "maxLength": 6})
    assert st == "compiled"
    acc = {s: check.accepts(c, json.dumps(s)) for s in ["or", "orgx", "org.a", "a.org.", "abcdefg", ""]}
    assert acc == {"or": True, "orgx": True, "org.a": False, "a.org.": True, "abcdefg": False, "": False}
    c, st = check.compile({"type": "object", "patternProperties": {"^(?!pattern$).*$": {"type": "integer"}},
                           "additionalProperties": {"type": "string"}})
    assert st == "compiled"
    acc = {s: check.accepts(c, s) for s in ['{"a": 1}', '{"pattern": "x"}', '{"pattern": 1}', '{"patterns": 1}',
                                            '{"a": "x"}']}
    assert acc == {'{"a": 1}': True, '{"pattern": "x"}': True, '{"pattern": 1}': False, '{"patterns": 1}': True,
                   '{"a": "x"}': False}
    c, st = check.compile({"type": "string", "pattern": "\\bcat\\b"})
    acc = {s: check.accepts(c, json.dumps(s)) for s in ["cat", "a cat.", "cats", "bobcat", "cat-1"]}
    assert acc == {"cat": True, "a cat.": True, "cats": False, "bobcat": False, "cat-1": True}


BENCH = os.path.join(S.BENCH_DIR, "JsonSchemaStore.jsonl.gz")
NOW_COMPILED = ["airlock-microgateway-3.2", "appsemblerc.schema", "browser.i18n", "catalogue-entry-schema",
                "chrome-extension-locales-messages", "gradle-enterprise-config-schema-7", "vars",
                "venvironment-basic-schema", "bukkit-plugin"]


@pytest.mark.skipif(not os.path.isfile(BENCH), reason="JSONSchemaBench data not found")
def test_jsonschemastore_lookahead_schemas_compile_and_judge_their_instances():
    """The JsonSchemaStore schemas whose only refusal was a lookahead pattern now compile
    (strict_mode=True, as bench.json_coverage), and (strict_mode=False, as the bench ratchet)
    accept their valid instances and reject the invalid ones (bukkit-plugin's two valid
    instances with a recursive $ref under a type list too: test_ref_intersection_deferred)."""
    with gzip.open(BENCH, "rt") as f:
        rows = {r["id"].split("---", 1)[1]: r for r in map(json.loads, f)}
    strict = S.OursPipeline(strict_mode=True)
    loose = S.OursPipeline(strict_mode=False)
    judged = 0
    for name in NOW_COMPILED:
        r = rows[name]
        _, st = strict.compile(r["schema"])
        assert st == "compiled", (name, st)
        c, st = loose.compile(r["schema"])
        assert st == "compiled", (name, st)
        for t in r["tests"]:
            acc = all(loose.accepts(c, x) for x in loose.variants(t["data"]))
            if not t["valid"]:
                assert not acc, (name, t["description"])
            else:
                assert acc, (name, t["description"])
            judged += 1
    assert judged == 29
