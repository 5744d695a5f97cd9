"""Workload definitions: the data, the deterministic samples, the grammars in each engine's dialect, the traces.

Everything here is deterministic: the same arguments give the same items, in the same order, with the same token
sequences, on every machine.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
from dataclasses import dataclass, field
from typing import Any

DATA_DIR = os.path.normpath(os.environ.get(
    "XGR2_SHARED_DATA",
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data")),
)
if not os.path.isdir(DATA_DIR):
    DATA_DIR = "/work/shared/data"

JSB_SUBSETS = ["Github_easy", "Github_medium", "Github_trivial", "Github_ultra", "Glaiveai2K", "JsonSchemaStore",
               "Snowplow", "WashingtonPost"]

# The warm-up grammar every worker compiles before the first measured item (not part of any sample).
WARMUP_SPEC = {"kind": "json_schema", "schema": {
    "type": "object",
    "properties": {"warmup": {"type": "string"}, "n": {"type": "integer"}, "x": {"type": "number"},
                   "b": {"type": "boolean"}, "l": {"type": "array", "items": {"type": "string"}}},
    "required": ["warmup"]}}


@dataclass
class Instance:
    text: str
    valid: bool
    tokens: list[int] = field(default_factory=list)


@dataclass
class Item:
    """One thing to compile (and then trace)."""

    id: str
    spec: dict[str, Any]
    instances: list[Instance]
    meta: dict[str, Any] = field(default_factory=dict)


def llama31_tokenizer_info(xgr: Any) -> Any:
    """The shared data's canonical Llama-3.1 vocabulary as ``xgr.TokenizerInfo`` (``xgr``: the engine module
    of the tree under test, so a child process of a tree A/B builds it with its own tree)."""
    with open(os.path.join(DATA_DIR, "tokenizers/canonical/llama-3.1.json"), encoding="utf-8") as f:
        canon = json.load(f)
    return xgr.TokenizerInfo(canon["tokens"], vocab_type=xgr.VocabType.BYTE_LEVEL,
                             vocab_size=canon["num_tokens"], stop_token_ids=canon["eos_ids"])


def dump_compact(x: Any) -> str | None:
    try:
        return json.dumps(x, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (ValueError, TypeError):
        return None


def _hash_key(seed: int, s: str) -> str:
    return hashlib.sha256(f"{seed}:{s}".encode()).hexdigest()


def _read_jsonl_gz(path: str) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _instances(rec: dict[str, Any], max_tests: int, with_invalid: bool) -> list[Instance]:
    out: list[Instance] = []
    n_valid = n_invalid = 0
    for t in rec.get("tests", []):
        text = dump_compact(t.get("data"))
        if text is None:
            continue
        if t.get("valid"):
            if n_valid < max_tests:
                out.append(Instance(text, True))
                n_valid += 1
        elif with_invalid and n_invalid < max_tests:
            out.append(Instance(text, False))
            n_invalid += 1
    return out


def jsonschemabench(n: int, seed: int, max_tests: int, with_invalid: bool) -> list[Item]:
    """n schemas, round-robin over the 8 subsets, each subset ordered by sha256(seed:id)."""
    per_subset: list[list[dict[str, Any]]] = []
    for sub in JSB_SUBSETS:
        path = os.path.join(DATA_DIR, "jsonschemabench", f"{sub}.jsonl.gz")
        recs = _read_jsonl_gz(path)
        recs.sort(key=lambda r: _hash_key(seed, r["id"]))
        per_subset.append(recs)
    items: list[Item] = []
    i = 0
    while len(items) < n and any(i < len(r) for r in per_subset):
        for recs in per_subset:
            if i < len(recs) and len(items) < n:
                r = recs[i]
                items.append(Item(r["id"], {"kind": "json_schema", "schema": r["schema"]},
                                  _instances(r, max_tests, with_invalid), {"subset": r["subset"]}))
        i += 1
    return items


def json_mode_eval(n: int, max_tests: int, with_invalid: bool) -> list[Item]:
    recs = _read_jsonl_gz(os.path.join(DATA_DIR, "json-mode-eval", "json-mode-eval.maskbench.jsonl.gz"))
    recs.sort(key=lambda r: int(r["id"].split("---")[1]))
    return [Item(r["id"], {"kind": "json_schema", "schema": r["schema"]}, _instances(r, max_tests, with_invalid),
                 {"subset": "json-mode-eval"}) for r in recs[:n]]


# --- hand-written grammars ----------------------------------------------------------------------------------
# Each in upstream xgrammar's EBNF (also xgrammar2's) and in llguidance's lark dialect, for the same language up to
# where whitespace may go (EBNF: explicit ws rule; lark: %ignore between lexemes). Traces are compact, so both
# dialects accept them.

JSON_SHAPED_EBNF = r'''
root ::= "{" ws "\"id\"" ws ":" ws integer ws "," ws "\"name\"" ws ":" ws string ws "," ws "\"email\"" ws ":" ws string ws "," ws "\"tags\"" ws ":" ws tags ws "," ws "\"address\"" ws ":" ws address ws ("," ws "\"score\"" ws ":" ws number ws)? "}"
address ::= "{" ws "\"street\"" ws ":" ws string ws "," ws "\"city\"" ws ":" ws string ws "," ws "\"zip\"" ws ":" ws string ws "}"
tags ::= "[" ws (string (ws "," ws string)*)? ws "]"
string ::= "\"" char* "\""
char ::= [^"\\\x00-\x1f] | "\\" escape
escape ::= ["\\/bfnrt] | "u" [0-9a-fA-F]{4}
integer ::= "-"? ("0" | [1-9] [0-9]*)
number ::= integer ("." [0-9]+)? ([eE] [+-]? [0-9]+)?
ws ::= [ \t\n]*
'''

JSON_SHAPED_LARK = r'''
start: "{" "\"id\"" ":" INT "," "\"name\"" ":" STRING "," "\"email\"" ":" STRING "," "\"tags\"" ":" tags "," "\"address\"" ":" address ("," "\"score\"" ":" NUMBER)? "}"
address: "{" "\"street\"" ":" STRING "," "\"city\"" ":" STRING "," "\"zip\"" ":" STRING "}"
tags: "[" (STRING ("," STRING)*)? "]"
STRING: /"([^"\\\x00-\x1F]|\\["\\\/bfnrt]|\\u[0-9a-fA-F]{4})*"/
INT: /-?(0|[1-9][0-9]*)/
NUMBER: /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/
%ignore /[ \t\n]+/
'''

REPEAT_EBNF = r'root ::= "\"" [a-z]{0,2000} "\""'
REPEAT_LARK = r'start: /"[a-z]{0,2000}"/'
REPEAT_REGEX = r'"[a-z]{0,2000}"'

EMAIL_REGEX = r"[a-z0-9._%+-]{1,64}@[a-z0-9-]{1,63}(\.[a-z0-9-]{1,63}){0,3}\.[a-z]{2,10}"

LONG_STRING_SCHEMA = {"type": "string", "minLength": 500, "maxLength": 2000}
MANY_ITEMS_SCHEMA = {"type": "array", "items": {"type": "integer"}, "minItems": 50, "maxItems": 500}

_WORDS = ["alpha", "beta", "gamma", "delta", "omega", "zeta", "kappa", "lambda", "sigma", "tau", "Zürich", "naïve",
          "東京", "emoji 🚀", "quote \" inside", "back\\slash", "new\nline"]


def _person(rng: random.Random) -> dict[str, Any]:
    d: dict[str, Any] = {
        "id": rng.randint(-10**6, 10**9),
        "name": " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 3))),
        "email": f"{rng.choice(_WORDS[:10])}.{rng.randint(1, 999)}@example.org",
        "tags": [rng.choice(_WORDS) for _ in range(rng.randint(0, 5))],
        "address": {"street": f"{rng.randint(1, 999)} {rng.choice(_WORDS)} street", "city": rng.choice(_WORDS),
                    "zip": f"{rng.randint(10000, 99999)}"},
    }
    if rng.random() < 0.5:
        d["score"] = round(rng.uniform(-100, 100), rng.randint(0, 6))
    return d


def grammar_items(json_texts: list[str], n_traces: int, seed: int) -> list[Item]:
    rng = random.Random(seed)
    letters = lambda k: "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(k))  # noqa: E731
    persons = [dump_compact(_person(rng)) or "" for _ in range(n_traces)]
    rep_lens = [200, 1000, 2000][: max(1, min(3, n_traces))]
    emails = [f"{letters(rng.randint(3, 20))}.{letters(4)}@{letters(rng.randint(3, 12))}.example.{letters(3)}"
              for _ in range(n_traces)]
    long_strings = [json.dumps(" ".join(letters(rng.randint(2, 9)) for _ in range(rng.randint(120, 300))))
                    for _ in range(max(1, n_traces // 3))]
    many_items = [dump_compact([rng.randint(-10**5, 10**5) for _ in range(rng.randint(50, 400))]) or ""
                  for _ in range(max(1, n_traces // 3))]
    V = lambda ts: [Instance(t, True) for t in ts]  # noqa: E731
    return [
        Item("builtin_json", {"kind": "builtin_json"}, V(json_texts[:n_traces]),
             {"what": "each engine's builtin any-JSON grammar (llguidance: %json {})"}),
        Item("json_shaped_ebnf", {"kind": "grammar", "ebnf": JSON_SHAPED_EBNF, "lark": JSON_SHAPED_LARK},
             V(persons), {"what": "hand-written JSON-object-shaped grammar (EBNF / lark)"}),
        Item("repeat_az_2000", {"kind": "grammar", "ebnf": REPEAT_EBNF, "lark": REPEAT_LARK, "regex": REPEAT_REGEX},
             V([f'"{letters(k)}"' for k in rep_lens]), {"what": 'root ::= "\\"" [a-z]{0,2000} "\\""'}),
        Item("schema_long_string", {"kind": "json_schema", "schema": LONG_STRING_SCHEMA}, V(long_strings),
             {"what": "JSON schema string minLength 500 maxLength 2000"}),
        Item("schema_many_items", {"kind": "json_schema", "schema": MANY_ITEMS_SCHEMA}, V(many_items),
             {"what": "JSON schema integer array minItems 50 maxItems 500"}),
        Item("regex_email", {"kind": "regex", "regex": EMAIL_REGEX}, V(emails), {"what": "email-like regex"}),
    ]


class Tokenize:
    """The HF tokenizer of the run, used for every engine's traces."""

    def __init__(self, tokenizer_json: str) -> None:
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_file(tokenizer_json)

    def __call__(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False).ids)
