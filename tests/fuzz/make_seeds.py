"""Writes small seed corpora for the libFuzzer targets from ../shared/data.

    python tests/fuzz/make_seeds.py OUT_DIR [--per-target N]

OUT_DIR/<target>/ gets N seeds each (default 40):
  ebnf    EBNF from JSONSchemaBench schemas (Python JSON-schema converter) and from BFCL tool
          sets (structural tags with TagDispatch), each followed by a short op stream;
  regex   "pattern" values found in JSONSchemaBench schemas;
  matcher grammar selector + op streams;
  vocab   token lists built from a real tokenizer's vocabulary.
The committed corpus under tests/fuzz/corpus was produced by this script (N=40, seed 0)
and cut to inputs of at most 4 KiB; CI fuzzes from it, so it runs without ../shared.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("XGR2_SHARED_DATA") or os.path.join(HERE, "..", "..", "..", "shared", "data")
MAX_LEN = 4096


def write(out: str, target: str, data: bytes) -> None:
    if len(data) > MAX_LEN:
        return
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()[:16]), "wb") as f:
        f.write(data)


def ops(rng: random.Random, n: int) -> bytes:
    return bytes(rng.randrange(256) for _ in range(n))


def schemas(rng: random.Random, n: int):
    path = os.path.join(SHARED, "jsonschemabench", "Github_easy.jsonl.gz")
    rows = [json.loads(l) for l in gzip.open(path, "rt")]
    rng.shuffle(rows)
    return [r["schema"] for r in rows[: n * 4]]


def patterns(obj, acc):
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "pattern" and isinstance(v, str):
                acc.append(v)
            else:
                patterns(v, acc)
    elif isinstance(obj, list):
        for v in obj:
            patterns(v, acc)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--per-target", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    n = a.per_target
    sys.path.insert(0, os.path.join(HERE, "..", "..", "engine"))
    from xgrammar2.grammar import _schema_to_ebnf
    from xgrammar2.structural_tag import get_model_structural_tag, structural_tag_to_ebnf

    # ebnf: JSON schemas
    k = 0
    for s in schemas(rng, n):
        if k >= n // 2:
            break
        try:
            text = _schema_to_ebnf(s)
        except Exception:
            continue
        write(a.out, "ebnf", text.encode() + b"\xff\x00" + ops(rng, 24))
        k += 1
    # ebnf: BFCL tool sets through model templates (TagDispatch)
    tools = []
    for fn in ("BFCL_v4_simple_python.json", "BFCL_v4_multiple.json"):
        for line in open(os.path.join(SHARED, "bfcl", fn)):
            for f in json.loads(line)["function"]:
                p = dict(f.get("parameters") or {})
                if p.get("type") == "dict":
                    p["type"] = "object"
                tools.append({"type": "function", "function": {"name": f["name"], "parameters": p}})
    models = ["llama", "qwen_3", "qwen_3_coder", "deepseek_v3_1", "kimi", "harmony", "mistral", "glm_4_7"]
    k = 0
    while k < n - n // 2:
        ts = rng.sample(tools, rng.randint(1, 3))
        names = set()
        ts = [t for t in ts if not (t["function"]["name"] in names or names.add(t["function"]["name"]))]
        try:
            tag = get_model_structural_tag(rng.choice(models), ts, as_dict=True)
            text = structural_tag_to_ebnf(tag)
        except Exception:
            k += 1
            continue
        write(a.out, "ebnf", text.encode() + b"\xff\x00" + ops(rng, 24))
        k += 1
    # regex: JSON-schema patterns
    acc: list = []
    for sub in ("Github_medium.jsonl.gz", "JsonSchemaStore.jsonl.gz"):
        for line in gzip.open(os.path.join(SHARED, "jsonschemabench", sub), "rt"):
            patterns(json.loads(line)["schema"], acc)
    acc = sorted(set(acc))
    rng.shuffle(acc)
    for p in acc[:n]:
        write(a.out, "regex", p.encode() + b"\xff\x00" + ops(rng, 16))
    # matcher: grammar selector, flags, op stream
    for i in range(n):
        write(a.out, "matcher", bytes([i % 11, rng.randrange(256)]) + ops(rng, rng.randint(4, 64)))
    # vocab: real token strings (length-prefixed), terminator, walk choices, ids
    vocab = json.load(open(os.path.join(SHARED, "tokenizers", "canonical", "gpt2.json")))
    toks = vocab.get("tokens") or []
    strs = [t for t in toks if isinstance(t, str)][:5000]  # byte-level (GPT-2 alphabet) text
    for i in range(n):
        parts = []
        for t in rng.sample(strs, rng.randint(1, 60)) if strs else []:
            b = t.encode("utf-8", "replace")[:15]
            parts.append(bytes([len(b)]) + b)
        body = b"".join(parts) + b"\xee" + ops(rng, 8) + ops(rng, 3)
        write(a.out, "vocab", body)


if __name__ == "__main__":
    main()
