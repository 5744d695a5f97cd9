"""Objects without a property count: after a member comes the separator and then any later
member (or the end once no required key is left), so every member is spelt once in the
grammar (p_i = sep f_i | ""), not once per state it can follow, and the language stays the
converter's ordered-properties language: keys in schema order, none twice, every required
one present, additional members after the named ones."""
from __future__ import annotations

import itertools
import json

import pytest

import xgrammar2 as xgr
from xgrammar2.json_schema import json_schema_to_ebnf
from xgrammar2.testing import _is_grammar_accept_string


def _object(n, required=(), extras=None):
    s = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(n)}}
    if required:
        s["required"] = [f"k{i}" for i in required]
    if extras is not None:
        s["additionalProperties"] = extras
    return s


@pytest.mark.parametrize("n", [5, 40, 130])
def test_each_member_is_spelt_once(n):
    ebnf = json_schema_to_ebnf(_object(n)).ebnf
    for i in range(n):
        assert ebnf.count(f'"\\"k{i}\\""') == 1, i


def test_grammar_grows_by_one_member_per_property():
    # 20 more optional properties add 20 members' text, not 40
    def size(n):
        return len(json_schema_to_ebnf(_object(n)).ebnf)

    member = len('root__f00 ::= "\\"k00\\"" ws ":" ws integer root__p00 | root__f00\n'
                 'root__p00 ::= ws "," ws root__f00 | ""\n')
    assert size(40) - size(20) <= 20 * (member + 8)


def _members(keys, extra):
    out = [f'"{k}": {i}' for i, k in enumerate(keys)]
    if extra:
        out.append('"zz": true')
    return "{" + ", ".join(out) + "}"


@pytest.mark.parametrize("extras", [None, False, {"type": "boolean"}])
def test_ordered_subsets_match_the_rules_for_every_required_set(extras):
    n = 4
    for mask in range(1 << n):
        required = [i for i in range(n) if mask >> i & 1]
        schema = _object(n, required, extras)
        g = xgr.Grammar.from_json_schema(json.dumps(schema), any_whitespace=True)
        names = [f"k{i}" for i in range(n)]
        for r in range(n + 1):
            for keys in itertools.permutations(names, r):
                for extra in (False, True):
                    text = _members(keys, extra)
                    want = (list(keys) == sorted(keys, key=names.index)
                            and all(names[i] in keys for i in required)
                            and (not extra or isinstance(extras, dict)))
                    assert _is_grammar_accept_string(g, text) == want, (required, extras, text)
        # a key twice, and a key after an additional member, are refused
        assert not _is_grammar_accept_string(g, '{"k0": 1, "k0": 1}')
        if isinstance(extras, dict) and not required:
            assert _is_grammar_accept_string(g, '{"zz": true}')
            assert not _is_grammar_accept_string(g, '{"zz": true, "k3": 1}')
