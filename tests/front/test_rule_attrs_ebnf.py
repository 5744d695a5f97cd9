"""EBNF rule-head attributes (`name[max_tokens=3, lazy] ::= ...`): parsing, validation and
printing, differential against real upstream xgrammar 0.2.8 where it is installed."""

import re

import pytest

import xgrammar2 as xgr

try:
    import xgrammar as upstream
except ImportError:  # pragma: no cover
    upstream = None

VALID = [
    'root[max_tokens=3, temperature=0.5] ::= "a"*',
    'root ::= v\nv[capture="x",temperature=0.2,lazy,max_chars=3,max_tokens=2] ::= "a"*',
    'root ::= v\nv[capture] ::= "a"*',
    'root ::= v\nv[capture="a b"] ::= "a"*',
    'root ::= v\nv[temperature=1e-3] ::= "a"*',
    'root ::= v\nv[temperature=.5] ::= "a"*',
    'root ::= v\nv[temperature=+1] ::= "a"*',
    'root ::= v\nv[temperature=0] ::= "a"*',
    'root ::= v\nv[ lazy ] ::= "a"*',
    'root ::= v\nv[lazy ,max_tokens = 2] ::= "a"*',
    'root ::= v\nv[max_tokens=00] ::= "a"*',
    'root ::= v\nv[max_tokens=2147483647] ::= "a"*',
    'root ::= v [lazy]\nv ::= "a"*',  # a reference and a class, not attributes
    'root ::= v\nv[temperature=0.5] ::= "a"* (= "b")\n',
]

INVALID = [
    ('root ::= v\nv[temperature=-0.1] ::= "a"*', "finite non-negative"),
    ('root ::= v\nv[temperature=1e999] ::= "a"*', "finite non-negative"),
    ('root[temperature=abc] ::= "a"', "Assign should be preceded by an identifier"),
    ('root ::= v\nv[lazy, lazy] ::= "a"*', "Assign should be preceded by an identifier"),
    ('root ::= v\nv[capture, capture="y"] ::= "a"*', "Assign should be preceded by an identifier"),
    ('root ::= v\nv[capture=""] ::= "a"*', "The capture name must not be empty"),
    ('root ::= v\nv[foo] ::= "a"*', "Assign should be preceded by an identifier"),
    ('root ::= v\nv[] ::= "a"*', "Assign should be preceded by an identifier"),
    ('root ::= v\nv[lazy,] ::= "a"*', "Assign should be preceded by an identifier"),
    ('root ::= v\nv[max_tokens=-1] ::= "a"*', "Assign should be preceded by an identifier"),
    ('root ::= v\nv[max_tokens=1.5] ::= "a"*', "Assign should be preceded by an identifier"),
]


def _heads(text):
    """The attribute group of each rule head in printed EBNF, by rule name."""
    return dict(re.findall(r"^([A-Za-z_.\-][\w.\-]*)(\[[^\]\n]*\])? ::=", text, re.M))


@pytest.mark.parametrize("src", VALID)
def test_valid_heads_print_like_upstream(src):
    ours = str(xgr.Grammar.from_ebnf(src))
    assert str(xgr.Grammar.from_ebnf(ours)) == ours  # print(parse(print(x))) is stable
    if upstream is None:
        return
    theirs = str(upstream.Grammar.from_ebnf(src))
    # upstream adds helper rules of its own; the rules both have carry the same attributes
    ours_h, theirs_h = _heads(ours), _heads(theirs)
    for name, attrs in ours_h.items():
        assert theirs_h.get(name) == attrs, (name, ours, theirs)


@pytest.mark.parametrize("src, phrase", INVALID)
def test_invalid_heads_fail_with_upstream_phrase(src, phrase):
    with pytest.raises(RuntimeError, match=re.escape(phrase)):
        xgr.Grammar.from_ebnf(src)
    if upstream is not None:
        with pytest.raises(RuntimeError, match=re.escape(phrase)):
            upstream.Grammar.from_ebnf(src)


def test_error_names_line_and_column():
    with pytest.raises(RuntimeError, match=r"line 2, column \d+"):
        xgr.Grammar.from_ebnf('root ::= v\nv[temperature=-1] ::= "a"')


def test_attributes_survive_union_and_serialization():
    g = xgr.Grammar.from_ebnf('root ::= v\nv[max_chars=4, temperature=0.25] ::= "a"*')
    u = xgr.Grammar.union(g, xgr.Grammar.from_ebnf('root ::= "b"'))
    assert "[max_chars=4, temperature=0.25]" in str(u)
    r = xgr.Grammar.deserialize_json(g.serialize_json())
    assert "[max_chars=4, temperature=0.25]" in str(r)
