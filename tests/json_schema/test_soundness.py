"""Soundness walks: random token-level generation under the grammar's bitmask with a real
vocabulary (GPT-2, byte-level) until the stop token; every completed output must parse as
JSON and validate with `jsonschema` (plus independent checks of the formats jsonschema
cannot check here). Walks that do not finish within MAX_STEPS are counted, not judged.
"""

from __future__ import annotations

import datetime
import functools
from decimal import Decimal
import ipaddress
import json
import os
import random
import re

import numpy as np
import pytest

from js_engine import DATA, ENGINE
from xgrammar2.json_schema import json_schema_to_ebnf

jsonschema = pytest.importorskip("jsonschema")

VOCAB_PATH = os.path.join(DATA, "tokenizers", "canonical", "gpt2.json")
MAX_STEPS = 160
WALKS = int(os.environ.get("XGR_SOUNDNESS_WALKS", "12"))

pytestmark = pytest.mark.skipif(not os.path.exists(VOCAB_PATH), reason="GPT-2 vocabulary not found")

FORMAT_CHECKER = jsonschema.FormatChecker()


@FORMAT_CHECKER.checks("date-time", raises=ValueError)
def _check_datetime(s):
    m = re.fullmatch(r"(\d{4}-\d{2}-\d{2})[Tt](.*)", s)
    return bool(m) and _check_date(m.group(1)) and _check_time(m.group(2))


def _check_date(s):
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", s):
        return False
    datetime.date.fromisoformat(s)
    return True


@FORMAT_CHECKER.checks("time", raises=ValueError)
def _check_time(s):
    m = re.fullmatch(r"(\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", s)
    if not m:
        return False
    h, mi, sec = int(m.group(1)), int(m.group(2)), int(m.group(3))
    off = m.group(5)
    if off not in "Zz":
        oh, om = int(off[1:3]), int(off[4:6])
        if oh > 23 or om > 59:
            return False
    if sec == 60:
        return (h, mi) == (23, 59) and off in ("Z", "z", "+00:00", "-00:00")
    return h <= 23 and mi <= 59 and sec <= 59


@FORMAT_CHECKER.checks("hostname")
def _check_hostname(s):
    if not s or len(s) > 253:
        return False
    return all(re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?", lab) for lab in s.split("."))


@FORMAT_CHECKER.checks("ipv4")
def _check_ipv4(s):
    try:
        ipaddress.IPv4Address(s)
        return True
    except ValueError:
        return False


_VOCAB = None


def _vocab():
    global _VOCAB
    if _VOCAB is None:
        with open(VOCAB_PATH) as f:
            d = json.load(f)
        byte_dec = _gpt2_byte_decoder()
        toks = d["tokens"]
        raw = []
        for i, t in enumerate(toks):
            if i in d["eos_ids"] or i in d.get("special_ids", []):
                raw.append(b"")
            else:
                raw.append(bytes(byte_dec[c] for c in t))
        # token classes steering walks toward completion: 2 = closes something, 1 = other
        # structural, 0 = rest
        struct = np.array([2 if (any(ch in tok for ch in b'"}].') and not any(ch in tok for ch in b'{[')) else
                           (1 if any(ch in tok for ch in b'{}[],:') else 0) for tok in raw])
        info = ENGINE.tokenizer_info(toks, vocab_type=ENGINE.mod.VocabType.BYTE_LEVEL, stop_token_ids=d["eos_ids"])
        _VOCAB = (info, raw, struct, d["eos_ids"][0], len(toks))
    return _VOCAB


def _gpt2_byte_decoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def _allowed(bitmask, vocab_size):
    arr = bitmask.numpy() if hasattr(bitmask, "numpy") else np.asarray(bitmask)
    bits = np.unpackbits(arr.reshape(-1).view(np.uint8), bitorder="little")[:vocab_size]
    return np.nonzero(bits)[0]


def _walk(compiled, rng, info, raw, struct, eos, vocab_size):
    m = ENGINE.matcher(compiled, terminate_without_stop_token=False)
    bitmask = ENGINE.mod.allocate_token_bitmask(1, info.vocab_size)
    out = []
    for _ in range(MAX_STEPS):
        m.fill_next_token_bitmask(bitmask)
        allowed = _allowed(bitmask, vocab_size)
        if len(allowed) == 0:
            raise AssertionError(f"empty mask after {b''.join(out)!r}")
        if eos in allowed and (len(allowed) == 1 or rng.random() < 0.7):
            assert m.accept_token(int(eos))
            return b"".join(out)
        cand = allowed[allowed != eos]
        r = rng.random()
        closers = cand[struct[cand] == 2]
        structural = cand[struct[cand] >= 1]
        if len(closers) and r < 0.45:
            pick = int(rng.choice(closers))
        elif len(structural) and r < 0.7:
            pick = int(rng.choice(structural))
        else:
            pick = int(rng.choice(cand))
        assert m.accept_token(pick), f"mask allowed token {pick} but accept_token refused it"
        out.append(raw[pick])
    return None


def _no_dup_keys(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _Dup()
    return dict(pairs)


class _Dup(Exception):
    pass


WALK_SCHEMAS = [
    {"type": "integer", "minimum": -37, "maximum": 1234},
    {"type": "number", "exclusiveMinimum": -2.5, "maximum": 17.25},
    {"type": "integer", "multipleOf": 7, "minimum": 10},
    {"type": "number", "multipleOf": 0.05, "maximum": 3},
    {"type": "string", "pattern": "^[a-z]+-[0-9]{2,4}$", "maxLength": 8},
    {"type": "string", "pattern": "ab", "minLength": 3, "maxLength": 6},
    {"type": "string", "minLength": 2, "maxLength": 5},
    {"type": "string", "format": "date"},
    {"type": "string", "format": "date-time"},
    {"type": "string", "format": "ipv4"},
    {"type": "string", "format": "uuid"},
    {"type": "string", "format": "hostname", "maxLength": 20},
    {"enum": ["red", "green", {"a": [1, 2]}, None, 3.5]},
    {"const": {"x": 1, "y": "z"}},
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 3},
                                      "c": {"type": "boolean"}}, "required": ["b"]},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "boolean"},
     "maxProperties": 2},
    {"type": "object", "patternProperties": {"^x[0-9]?$": {"type": "integer"}, "^[a-z]y$": {"type": "string"}},
     "additionalProperties": False, "maxProperties": 3},
    {"type": "object", "propertyNames": {"pattern": "^[a-c]{1,2}$"}, "additionalProperties": {"type": "null"}},
    {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "minItems": 2, "maxItems": 4},
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}], "items": False},
    {"type": "array", "contains": {"type": "string"}, "minContains": 1, "maxContains": 2, "maxItems": 4},
    {"type": "array", "items": {"enum": [1, 2, 3]}, "uniqueItems": True},
    {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 2}]},
    # exclusive oneOf negated relative to the other branch (closed objects, container constants)
    {"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}},
                "additionalProperties": False},
               {"type": "object", "properties": {"a": {"type": "integer", "maximum": 3}, "c": {"type": "null"}},
                "additionalProperties": False}]},
    {"oneOf": [{"const": [1, [2]]}, {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
               {"enum": [{"k": [True]}, {}]}, {"type": "object", "properties": {"k": {"type": "array"}},
                                                "additionalProperties": False}]},
    {"not": {"type": ["string", "object", "array"]}},
    {"if": {"type": "integer"}, "then": {"minimum": 5}, "else": {"type": "string", "maxLength": 2}},
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
     "dependentRequired": {"a": ["b"]}},
    {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
               {"properties": {"a": {"minimum": 3}, "b": {"type": "string"}}}]},
    {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                                         "kids": {"type": "array", "items": {"$ref": "#/$defs/node"},
                                                                  "maxItems": 2}},
                        "required": ["v"]}}, "$ref": "#/$defs/node"},
]


def _validate(schema, text):
    # Decimals: multipleOf must be judged on exact values (1.4 is a multiple of 0.05).
    try:
        val = json.loads(text, object_pairs_hook=_no_dup_keys, parse_float=Decimal)
    except _Dup:
        return "dup"
    dschema = json.loads(json.dumps(schema), parse_float=Decimal)
    jsonschema.validate(val, dschema, cls=jsonschema.Draft202012Validator, format_checker=FORMAT_CHECKER)
    return "ok"


@pytest.mark.parametrize("strict_mode", [True, False])
@pytest.mark.parametrize("idx", range(len(WALK_SCHEMAS)))
def test_random_walks_validate(idx, strict_mode):
    schema = WALK_SCHEMAS[idx]
    info, raw, struct, eos, vocab_size = _vocab()
    ebnf = json_schema_to_ebnf(schema, strict_mode=strict_mode).ebnf
    compiled = ENGINE.compiler(info).compile_grammar(ebnf)
    rng = random.Random(idx * 2 + strict_mode)
    nprng = np.random.default_rng(idx * 2 + strict_mode)

    class R:
        random = rng.random

        @staticmethod
        def choice(a):
            return a[nprng.integers(len(a))]

    done = unfinished = dups = 0
    for _ in range(WALKS):
        out = _walk(compiled, R, info, raw, struct, eos, vocab_size)
        if out is None:
            unfinished += 1
            continue
        text = out.decode("utf-8")
        try:
            r = _validate(schema, text)
        except jsonschema.ValidationError as e:
            raise AssertionError(f"generated {text!r} violates {json.dumps(schema)}: {e.message}") from None
        dups += r == "dup"
        done += 1
    print(f"schema {idx} strict={strict_mode}: {done} validated, {unfinished} unfinished, {dups} duplicate-key")
    assert done > 0, f"no walk finished within {MAX_STEPS} tokens"


@functools.lru_cache(maxsize=1)
def _bench_walk_schemas(count=8):
    import suite_runner as S

    from xgrammar2.json_schema import SchemaError

    picked = []
    for sub in S.bench_subsets():
        for r in S.load_bench(sub, 30):
            try:
                e = json_schema_to_ebnf(r["schema"], strict_mode=True).ebnf
            except SchemaError:
                continue
            if 200 < len(e) < 6000:
                picked.append((r["id"], r["schema"]))
                break
    return picked[:count]


@pytest.mark.parametrize("case", range(8))
def test_random_walks_on_bench_schemas(case):
    cases = _bench_walk_schemas()
    if case >= len(cases):
        pytest.skip("not enough small bench schemas")
    sid, schema = cases[case]
    info, raw, struct, eos, vocab_size = _vocab()
    compiled = ENGINE.compiler(info).compile_grammar(json_schema_to_ebnf(schema, strict_mode=True).ebnf)
    rng = random.Random(case)
    nprng = np.random.default_rng(case)

    class R:
        random = rng.random

        @staticmethod
        def choice(a):
            return a[nprng.integers(len(a))]

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    dschema = json.loads(json.dumps(schema), parse_float=Decimal)
    done = unfinished = 0
    for _ in range(WALKS // 2):
        out = _walk(compiled, R, info, raw, struct, eos, vocab_size)
        if out is None:
            unfinished += 1
            continue
        text = out.decode("utf-8")
        val = json.loads(text, parse_float=Decimal)
        errors = list(cls(dschema, format_checker=FORMAT_CHECKER).iter_errors(val))
        assert not errors, f"{sid}: generated {text!r} is invalid: {errors[0].message}"
        done += 1
    print(f"{sid}: {done} validated, {unfinished} unfinished")
