"""Demo: compile real grammars against a real tokenizer and generate constrained output.

    python -m xgrammar2.demo [--data ../shared/data] [--tokenizer llama-3.1] [--seed 0]

It loads a real vocabulary, compiles (1) the argument schema of real BFCL tools as JSON
Schema, (2) an EBNF grammar for a tool call, and walks a constrained generation step by
step, printing how many tokens each mask allows and what was chosen. The "model" is a seeded
random sampler over the allowed tokens (no weights are needed); every output is checked
afterwards (json.loads + jsonschema when installed), so the demo shows the constraint doing
all the work.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from typing import Any

import numpy as np

import xgrammar2 as xgr

BFCL_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}


def bfcl_to_json_schema(node: Any) -> Any:
    """BFCL tool definitions use Python type names (dict, float, tuple, any); map them to
    JSON Schema so the schema means what the tool author intended."""
    if isinstance(node, list):
        return [bfcl_to_json_schema(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: bfcl_to_json_schema(v) for k, v in node.items()}
    t = out.get("type")
    if isinstance(t, str) and t in BFCL_TYPES:
        if BFCL_TYPES[t] is None:
            del out["type"]
        else:
            out["type"] = BFCL_TYPES[t]
    return out


def find_data(arg: str | None) -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (arg, os.environ.get("XGR2_SHARED_DATA"), os.path.join(here, "..", "..", "..", "shared", "data"),
                 os.path.join(os.getcwd(), "..", "shared", "data")):
        if cand and os.path.isdir(os.path.join(cand, "tokenizers")):
            return os.path.abspath(cand)
    sys.exit("shared data not found: pass --data PATH (the folder with tokenizers/ and bfcl/)")


def allowed_ids(bitmask: np.ndarray, vocab_size: int) -> np.ndarray:
    bits = np.unpackbits(bitmask.reshape(-1).view(np.uint8), bitorder="little")
    return np.flatnonzero(bits[:vocab_size])


def generate(compiled: xgr.CompiledGrammar, tok: xgr.TokenizerInfo, rng: random.Random,
             max_tokens: int = 256, verbose: bool = True) -> tuple[str, int]:
    """Samples until the grammar terminates. The sampler prefers the stop token once the
    output may end (a real model would learn that) and otherwise picks a random allowed
    token, favouring short ones so strings stay readable."""
    m = xgr.GrammarMatcher(compiled)
    bm = xgr.allocate_token_bitmask(1, tok.vocab_size)
    bm_np = bm.numpy() if hasattr(bm, "numpy") else bm
    stops = set(tok.stop_token_ids)
    vocab = tok.decoded_vocab
    quote_ids = {i for i, b in enumerate(vocab) if b == b'"'}
    out = bytearray()
    steps = 0
    while not m.is_terminated() and steps < max_tokens:
        t0 = time.perf_counter()
        m.fill_next_token_bitmask(bm)
        us = (time.perf_counter() - t0) * 1e6
        ids = allowed_ids(bm_np, tok.vocab_size)
        if len(ids) == 0:
            raise RuntimeError("the grammar allowed no token: this is a bug")
        stop_ok = [int(t) for t in ids if int(t) in stops]
        text_ids = [int(t) for t in ids if int(t) not in stops]
        if stop_ok and (not text_ids or len(out) > 8 and rng.random() < 0.7):
            choice = stop_ok[0]
        else:
            sample = rng.sample(text_ids, min(len(text_ids), 24))
            # Free text (a string's body) allows ~all tokens; a model would close it
            # after a few words, so the sampler ends strings with some probability.
            quote = quote_ids.intersection(text_ids)
            if quote and len(ids) > 1000 and rng.random() < 0.12:
                choice = min(quote)
            else:
                sample.sort(key=lambda t: len(vocab[t]))
                choice = sample[0] if rng.random() < 0.75 else rng.choice(sample)
        if verbose:
            shown = "<stop>" if choice in stops else repr(vocab[choice].decode("utf-8", "replace"))
            print(f"  step {steps:3d}: {len(ids):6d} allowed  mask {us:7.1f} us  -> {shown}")
        if not m.accept_token(choice):
            raise RuntimeError("an allowed token was rejected: this is a bug")
        if choice not in stops:
            out += vocab[choice]
        steps += 1
    return out.decode("utf-8", errors="strict"), steps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="path to shared/data")
    ap.add_argument("--tokenizer", default="llama-3.1", help="canonical vocabulary name")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tools", type=int, default=3, help="how many BFCL tools to demo")
    args = ap.parse_args(argv)
    data = find_data(args.data)
    rng = random.Random(args.seed)

    t0 = time.perf_counter()
    tok = xgr.TokenizerInfo.from_canonical_json(os.path.join(data, "tokenizers", "canonical", args.tokenizer + ".json"))
    print(f"tokenizer {args.tokenizer}: {tok.vocab_size} tokens ({tok.vocab_type.name}), "
          f"loaded in {(time.perf_counter() - t0) * 1e3:.0f} ms, stop ids {tok.stop_token_ids}")
    compiler = xgr.GrammarCompiler(tok)

    with open(os.path.join(data, "bfcl", "BFCL_v4_simple_python.json"), encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    try:
        import jsonschema
    except ImportError:  # validation is optional for the demo
        jsonschema = None

    for rec in rng.sample(records, args.tools):
        fn = rec["function"][0]
        schema = bfcl_to_json_schema(fn["parameters"])
        t0 = time.perf_counter()
        compiled = compiler.compile_json_schema(schema, any_whitespace=False)
        ms = (time.perf_counter() - t0) * 1e3
        print(f"\ntool {fn['name']}: arguments schema compiled in {ms:.2f} ms")
        text, steps = generate(compiled, tok, rng)
        value = json.loads(text)
        if jsonschema is not None:
            jsonschema.validate(value, schema)
        print(f"  => {steps} tokens: {text}")
        print("     valid JSON" + (", valid against the schema" if jsonschema else ""))

    ebnf = r'''
root ::= "<function=" name ">" args "</function>"
name ::= "get_weather" | "get_time"
args ::= "{\"city\": \"" [A-Z] [a-z]{2,12} "\"}"
'''
    t0 = time.perf_counter()
    compiled = compiler.compile_grammar(ebnf)
    print(f"\nEBNF tool-call grammar compiled in {(time.perf_counter() - t0) * 1e3:.2f} ms")
    text, steps = generate(compiled, tok, rng)
    print(f"  => {steps} tokens: {text}")
    assert text.startswith("<function=") and text.endswith("</function>")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
