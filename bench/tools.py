"""Tool-calling workloads (XGrammar-2 paper, §4.1 Table 1 / Figure 6, §4.2 Figures 7-8): BFCL tool pools, tool formats,
request sequences, real tool-call traces, and the driver loop that runs a sequence on every engine.

- Pool: distinct BFCL functions (Python categories: simple, multiple, parallel, parallel_multiple; deduplicated by
  name; BFCL's Python type names mapped to JSON Schema) that have at least one ground-truth call whose arguments
  validate against the converted schema; ordered by sha256(seed:name), the first POOL_SIZE kept.
- Request sequences: *static* = the same N tools in every request (compiled once, then the engines' compile caches
  hit); *dynamic* = a fresh seeded random N-subset of the pool per request; then *seen-before* requests: new
  combinations drawn only from tools that earlier requests of the same sequence used (DESIGN.md §2's "≤ 1 ms when
  every tool was seen before in another combination"). Engine caches are cleared at the start of each sequence.
- Traces: one call per request, to a tool of that request's set, with arguments from BFCL's possible answers (first
  acceptable value of each argument), rendered in the format, after a line of real assistant text from CONFETTI's
  dialog acts where the format has free text; tokenized by the format's tokenizer, plus the stop token.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from bench.stats import summarize
from bench.workloads import DATA_DIR

POOL_SIZE = 200
BFCL_FILES = ("simple_python", "multiple", "parallel", "parallel_multiple")
_TYPE = {"dict": "object", "float": "number", "tuple": "array", "int": "integer", "bool": "boolean",
         "list": "array", "str": "string"}

FORMATS = {
    "function": "free text, then `<function=NAME>{json}</function>` (DESIGN.md §2's tool format)",
    "llama": "Llama 3.x JSON calls `{\"name\": \"NAME\", \"parameters\": {json}}` (get_model_structural_tag "
             "\"llama\")",
    "harmony": "gpt-oss Harmony: an analysis message, then `<|start|>assistant<|channel|>commentary "
               "to=functions.NAME<|constrain|>json<|message|>{json}<|call|>` (get_model_structural_tag "
               "\"harmony\", reasoning on)",
}


# ---- pool ---------------------------------------------------------------------------------------------------

def bfcl_schema(s: Any) -> Any:
    """BFCL's parameter schema as JSON Schema: Python type names mapped, ``any`` dropped, ``optional`` and
    ``default`` dropped."""
    if isinstance(s, list):
        return [bfcl_schema(x) for x in s]
    if not isinstance(s, dict):
        return s
    out = {}
    for k, v in s.items():
        if k == "type" and isinstance(v, str):
            if v == "any":
                continue
            out[k] = _TYPE.get(v, v)
        elif k == "properties" and isinstance(v, dict):
            out[k] = {pk: bfcl_schema(pv) for pk, pv in v.items()}
        elif k in ("items", "additionalProperties"):
            out[k] = bfcl_schema(v)
        elif k in ("optional", "default"):
            continue
        else:
            out[k] = v
    return out


def _first(c: Any) -> Any:
    """BFCL lists the acceptable values of each argument; take the first ("" = may be left out)."""
    if isinstance(c, dict):
        return {k: _first(v) for k, v in c.items()}
    if isinstance(c, list) and c:
        v = c[0]
        return {k: _first(x) for k, x in v.items()} if isinstance(v, dict) else v
    return c


def _coerce(v: Any, schema: Any) -> Any:
    """BFCL answers write integers as 10.0; JSON Schema validation accepts that for "integer", the grammars (rightly,
    text-wise) do not, and a model would write 10. Integral floats become ints where the schema says integer."""
    if not isinstance(schema, dict):
        return v
    t = schema.get("type")
    if isinstance(v, float) and v.is_integer() and (t == "integer" or (isinstance(t, list) and "integer" in t)):
        return int(v)
    if isinstance(v, dict):
        props = schema.get("properties") or {}
        return {k: _coerce(x, props.get(k)) for k, x in v.items()}
    if isinstance(v, list):
        return [_coerce(x, schema.get("items")) for x in v]
    return v


def call_args(params: dict[str, Any]) -> dict[str, Any]:
    """A BFCL ground-truth call's arguments: the first acceptable value of each, leaving out
    the optional ones whose first choice is "" (not given)."""
    args = {}
    for k, cands in params.items():
        v = _first(cands)
        if v == "" and isinstance(cands, list) and "" in cands:
            continue
        args[k] = v
    return args


@dataclass
class Tool:
    name: str
    tool: dict[str, Any]  # OpenAI function tool
    calls: list[dict[str, Any]] = field(default_factory=list)


def load_pool(seed: int = 0, size: int = POOL_SIZE) -> list[Tool]:
    import jsonschema

    bfcl = os.path.join(DATA_DIR, "bfcl")
    tools: dict[str, Tool] = {}
    for kind in BFCL_FILES:
        answers = {}
        with open(os.path.join(bfcl, "possible_answer", f"BFCL_v4_{kind}.json"), encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                answers[d["id"]] = d["ground_truth"]
        with open(os.path.join(bfcl, f"BFCL_v4_{kind}.json"), encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                for fn in d["function"]:
                    name = fn["name"].replace(".", "_")  # as BFCL does for OpenAI-style names
                    if name not in tools:
                        params = bfcl_schema(fn["parameters"])
                        tools[name] = Tool(name, {"type": "function", "function": {
                            "name": name, "description": fn.get("description", ""), "parameters": params}})
                for call in answers.get(d["id"], []):
                    (fname, params), = call.items()
                    t = tools.get(fname.replace(".", "_"))
                    if t is None:
                        continue
                    schema = t.tool["function"]["parameters"]
                    args = _coerce(call_args(params), schema)
                    props = list(schema.get("properties") or {})
                    if any(k not in props for k in args):
                        continue
                    try:
                        jsonschema.validate(args, schema)
                    except jsonschema.ValidationError:
                        continue
                    # The strict grammars take the arguments in the schema's property order, which is what a
                    # constrained model writes.
                    ordered = {k: args[k] for k in props if k in args}
                    if ordered not in t.calls:
                        t.calls.append(ordered)
    usable = [t for t in tools.values() if t.calls]
    usable.sort(key=lambda t: hashlib.sha256(f"{seed}:{t.name}".encode()).hexdigest())
    return usable[:size]


_CALL_TEXT = re.compile(r"^[A-Za-z_][\w.]*\(")


def confetti_texts(max_chars: int = 240) -> list[str]:
    """Assistant sentences from CONFETTI's dialog-act references (the natural-language turns, not the calls),
    cut at a word boundary; deterministic order."""
    out = []
    path = os.path.join(DATA_DIR, "confetti", "BFCL_v2_dialogacts.json")
    with open(path, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            for c in d.get("ground_truth_content") or []:
                if not isinstance(c, str) or _CALL_TEXT.match(c) or len(c) < 40:
                    continue
                c = " ".join(c.split())
                if "<" in c or "{" in c:
                    continue
                if len(c) > max_chars:
                    c = c[:max_chars].rsplit(" ", 1)[0]
                out.append(c)
    return out or ["Let me look that up for you."]


def render_call(fmt: str, name: str, args: dict[str, Any], text: str) -> str:
    a = json.dumps(args, ensure_ascii=False)
    if fmt == "function":
        return f"{text} <function={name}>{a}</function>"
    if fmt == "llama":
        # What Llama 3.x writes for a custom tool: the JSON call alone.
        return '{"name": "' + name + '", "parameters": ' + a + "}"
    if fmt == "harmony":
        # The header order both xgrammar templates accept (upstream has no space before <|constrain|>).
        return (f"<|channel|>analysis<|message|>{text}<|end|><|start|>assistant<|channel|>commentary "
                f"to=functions.{name}<|constrain|>json<|message|>{a}<|call|>")
    raise ValueError(fmt)


# ---- llguidance's native forms ---------------------------------------------------------------------------------

def llguidance_tools_grammar(llg: Any, spec: dict[str, Any]) -> str:
    """The tool format in llguidance's own terms: StructTag (lazy trigger lexemes over free text, %json arguments)
    for "function" and "llama"; a hand-written lark grammar with special tokens for Harmony (StructTag cannot put
    special tokens inside a tag's begin string)."""
    fmt, tools = spec["format"], spec["tools"]
    fns = [(t["function"]["name"], t["function"]["parameters"]) for t in tools]
    if fmt == "function":
        return llg.StructTag.to_grammar([llg.StructTag(trigger="<function=", begin=f"<function={n}>", grammar=p,
                                                       end="</function>") for n, p in fns])
    if fmt == "llama":
        return llg.StructTag.to_grammar([llg.StructTag(trigger='{"name": ', begin='{"name": "' + n
                                                       + '", "parameters": ', grammar=p, end="}") for n, p in fns])
    if fmt == "harmony":
        lines = ["%llguidance {}",
                 'start: msg (<|start|> "assistant" msg)*',
                 "msg: analysis | final" + "".join(f" | call_{i}" for i in range(len(fns))),
                 'analysis: <|channel|> "analysis" <|message|> TEXT <|end|>',
                 'final: <|channel|> "final" <|message|> TEXT <|end|>',
                 r"TEXT: /(.|\n)*/"]
        for i, (n, p) in enumerate(fns):
            q = json.dumps(f"to=functions.{n}")[1:-1]
            lines.append(f'call_{i}: head_{i} <|message|> %json {json.dumps(p)} <|call|>')
            lines.append(f'head_{i}: <|channel|> "commentary {q}" <|constrain|> "json"'
                         f' | " {q}" <|channel|> "commentary " <|constrain|> "json"'
                         f' | " {q}" <|channel|> "commentary json"')
        return "\n".join(lines) + "\n"
    raise ValueError(fmt)


# ---- sequences ------------------------------------------------------------------------------------------------

@dataclass
class Sequence:
    fmt: str
    n: int
    setting: str  # static | dynamic
    requests: list[list[int]]
    seen: list[list[int]]  # new combinations of tools used earlier in the sequence

    @property
    def label(self) -> str:
        return f"{self.fmt}/{self.setting}/N={self.n}"


def make_sequence(fmt: str, n: int, setting: str, pool_size: int, n_requests: int, n_seen: int,
                  seed: int) -> Sequence:
    rng = random.Random(f"{seed}:{fmt}:{n}:{setting}")
    if setting == "static":
        s = rng.sample(range(pool_size), n)
        return Sequence(fmt, n, setting, [list(s) for _ in range(n_requests)], [])
    reqs = [rng.sample(range(pool_size), n) for _ in range(n_requests)]
    used = sorted({i for r in reqs for i in r})
    seen_sets = {frozenset(r) for r in reqs}
    seen: list[list[int]] = []
    for _ in range(n_seen):
        if len(used) < n:
            break
        for _try in range(50):
            s = rng.sample(used, n)
            if frozenset(s) not in seen_sets:
                break
        seen_sets.add(frozenset(s))
        seen.append(s)
    return Sequence(fmt, n, setting, reqs, seen)


def reuse_rates(seq: Sequence) -> dict[str, float]:
    """Engine-independent reuse over the main requests (Table 1's two columns): *structure* = the request's whole
    tool set (as a set) appeared in an earlier request; *substructure* = a tool (its argument schema) of the request
    appeared in an earlier request."""
    sets: set[frozenset[int]] = set()
    tools: set[int] = set()
    s_hits = t_hits = t_total = 0
    for r in seq.requests:
        fs = frozenset(r)
        s_hits += fs in sets
        sets.add(fs)
        for t in r:
            t_hits += t in tools
            t_total += 1
        tools.update(r)
    n = len(seq.requests)
    return {"structure_reuse": s_hits / n if n else 0.0, "tool_reuse": t_hits / t_total if t_total else 0.0}


# ---- driver ---------------------------------------------------------------------------------------------------

def _rot(xs: list[str], k: int) -> list[str]:
    if not xs:
        return xs
    k %= len(xs)
    return xs[k:] + xs[:k]


def run_sequence(seq: Sequence, pool: list[Tool], texts: list[str], workers: dict[str, Any], cfg: Any,
                 tokenize: Callable[[str], list[int]], eos: int, log: Callable[[str], None],
                 trace: bool = True, key_prefix: str = "tools", warm_traces: int = 5) -> dict[str, Any]:
    engines = list(workers)
    rng = random.Random(f"trace:{seq.label}")
    for w in workers.values():
        w.call(("reset",), 60)
    before = {e: w.call(("stats", None), 60) for e, w in workers.items()}
    comp = {e: {"main": [], "seen": [], "first": None, "compile_only": [], "first_mask": [], "failed": 0,
                "unsupported": 0, "failures": []} for e in engines}
    tok = {e: {"mask_ns": [], "accept_ns": []} for e in engines}
    warm: dict[str, list[int]] = {e: [] for e in engines}
    outcomes: dict[str, dict[str, int]] = {e: {} for e in engines}
    violations: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
    disagreements: list[dict[str, Any]] = []
    rejected_by_all: list[dict[str, Any]] = []
    grammar_bytes: dict[str, Any] = {}
    t0 = time.time()
    phases = [("main", seq.requests), ("seen", seq.seen)]
    k = 0
    for phase, reqs in phases:
        for ri, idx in enumerate(reqs):
            spec = {"kind": "tools", "format": seq.fmt, "tools": [pool[i].tool for i in idx]}
            key = f"{key_prefix}:{seq.label}:{phase}:{ri}"
            order = _rot(engines, k)
            k += 1
            gen: dict[str, int] = {}
            for e in order:
                w = workers[e]
                r = w.call(("compile", key, spec, "cold"), cfg.compile_timeout_for(w.engine))
                c = comp[e]
                if r.get("ok"):
                    ms = r["ms"] + r["first_mask_ms"]
                    c[phase].append(ms)
                    c["compile_only"].append(r["ms"])
                    c["first_mask"].append(r["first_mask_ms"])
                    if c["first"] is None:
                        c["first"] = ms
                    gen[e] = w.generation
                elif r.get("unsupported"):
                    c["unsupported"] += 1
                    c["unsupported_why"] = r.get("error")
                else:
                    c["failed"] += 1
                    if len(c["failures"]) < 5:
                        c["failures"].append({"request": key, "error": str(r.get("error"))[:300]})
            if trace and phase == "main" and gen:
                t = pool[rng.choice(idx)]
                args = rng.choice(t.calls)
                text = render_call(seq.fmt, t.name, args, rng.choice(texts))
                tokens = tokenize(text) + [eos]
                outs: dict[str, str] = {}
                for e in _rot(order, 1):
                    w = workers[e]
                    if e not in gen or w.generation != gen[e]:
                        continue
                    r = w.call(("trace", key, tokens), cfg.trace_timeout)
                    if not r.get("ok"):
                        outs[e] = "timeout" if r.get("timeout") else "error: " + str(r.get("error"))[:200]
                        continue
                    o = r["outcome"]
                    outs[e] = f"rejected@{r['reject_step']}/{r['n_tokens']}" if o == "rejected" else o
                    outcomes[e][o] = outcomes[e].get(o, 0) + 1
                    tok[e]["mask_ns"].extend(r["mask_ns"])
                    tok[e]["accept_ns"].extend(r["accept_ns"])
                    for v in r["violations"]:
                        violations[e].append({"request": key, **v})
                if any(o != "accepted" for o in outs.values()):
                    rec = {"item": key, "tool": t.name, "text": text, "n_tokens": len(tokens), "outcomes": outs}
                    if any(o == "accepted" for o in outs.values()):
                        disagreements.append(rec)
                    else:
                        rejected_by_all.append(rec)  # the trace, not an engine, is at fault
                if ri < warm_traces:
                    # The same call again on the same compiled grammar: masks an engine builds lazily are warm
                    # now, which separates steady-state cost from first-use cost.
                    for e in _rot(order, 2):
                        w = workers[e]
                        if outs.get(e) != "accepted" or w.generation != gen[e]:
                            continue
                        r = w.call(("trace", key, tokens), cfg.trace_timeout)
                        if r.get("ok"):
                            warm[e].extend(m + x for m, x in zip(r["mask_ns"], r["accept_ns"]))
            if phase == "main" and ri == len(reqs) - 1:
                for e in engines:
                    if e in gen and workers[e].generation == gen[e]:
                        st = workers[e].call(("stats", key), 60)
                        if st.get("grammar_bytes") is not None:
                            grammar_bytes[e] = st["grammar_bytes"]
            for e in engines:
                if e in gen and workers[e].generation == gen[e]:
                    workers[e].call(("drop", key), 30)
    after = {e: w.call(("stats", None), 60) for e, w in workers.items()}
    out: dict[str, Any] = {"format": seq.fmt, "n": seq.n, "setting": seq.setting,
                           "requests": len(seq.requests), "seen_requests": len(seq.seen),
                           **reuse_rates(seq), "engines": {}, "disagreements": disagreements,
                           "rejected_by_all": rejected_by_all,
                           "duration_s": round(time.time() - t0, 1)}
    for e in engines:
        c = comp[e]
        b, a = before.get(e) or {}, after.get(e) or {}
        er: dict[str, Any] = {
            "compiled": len(c["main"]) + len(c["seen"]), "failed": c["failed"], "unsupported": c["unsupported"],
            "failures": c["failures"],
            "compile_ms": summarize(c["main"], cdf=True), "seen_ms": summarize(c["seen"]),
            "first_request_ms": c["first"],
            "compile_only_ms": summarize(c["compile_only"]), "first_mask_ms": summarize(c["first_mask"]),
            "outcomes": outcomes[e], "mask_accept_inconsistencies": len(violations[e]),
            "violations": violations[e][:5],
            "tokens": len(tok[e]["mask_ns"]),
            "mask_us": summarize(x / 1e3 for x in tok[e]["mask_ns"]),
            "accept_us": summarize(x / 1e3 for x in tok[e]["accept_ns"]),
            "mask_accept_us": summarize(((m + x) / 1e3 for m, x in zip(tok[e]["mask_ns"], tok[e]["accept_ns"])),
                                        cdf=True),
            "_mask_ns": tok[e]["mask_ns"], "_accept_ns": tok[e]["accept_ns"], "_warm_ns": warm[e],
            "warm_mask_accept_us": summarize(x / 1e3 for x in warm[e]),
        }
        if c.get("unsupported_why"):
            er["unsupported_why"] = c["unsupported_why"]
        if e in grammar_bytes:
            er["grammar_bytes_last"] = grammar_bytes[e]
        if "xgc_hits" in a and "xgc_hits" in b:
            h = a["xgc_hits"] - b["xgc_hits"]
            m = a["xgc_misses"] - b["xgc_misses"]
            er["xgc_hits"], er["xgc_misses"] = h, m
            er["xgc_hit_rate"] = h / (h + m) if h + m else None
            er["xgc_bytes"] = a.get("xgc_bytes")
        if "automaton_hits" in a and "automaton_hits" in b:
            h = a["automaton_hits"] - b["automaton_hits"]
            m = a["automaton_misses"] - b["automaton_misses"]
            er["automaton_hits"], er["automaton_misses"] = h, m
            er["automaton_hit_rate"] = h / (h + m) if h + m else None
        if a.get("compiler_cache_bytes") is not None:
            er["compiler_cache_bytes"] = a["compiler_cache_bytes"]
        if a.get("rss"):
            er["rss_mib"] = a["rss"] / 2**20
        out["engines"][e] = er
    cm = " ".join(f"{e}={(out['engines'][e]['compile_ms'] or {}).get('mean', float('nan')):.2f}ms"
                  for e in engines)
    log(f"tools {seq.label}: {len(seq.requests)}+{len(seq.seen)} requests, mean compile {cm} "
        f"({out['duration_s']:.0f}s)")
    return out


def pooled_tokens(seqs: list[dict[str, Any]], fmt: str, engine: str) -> dict[str, Any]:
    """Per-token fill and accept over every trace of one format (all N, static and dynamic)."""
    mask: list[int] = []
    acc: list[int] = []
    for s in seqs:
        if s["format"] == fmt:
            er = s["engines"].get(engine) or {}
            mask.extend(er.get("_mask_ns", []))
            acc.extend(er.get("_accept_ns", []))
    wm: list[int] = []
    for s in seqs:
        if s["format"] == fmt:
            wm.extend((s["engines"].get(engine) or {}).get("_warm_ns", []))
    return {"tokens": len(mask), "mask_us": summarize(x / 1e3 for x in mask),
            "warm_tokens": len(wm), "warm_mask_accept_us": summarize(x / 1e3 for x in wm),
            "accept_us": summarize(x / 1e3 for x in acc),
            "mask_accept_us": summarize(((m + a) / 1e3 for m, a in zip(mask, acc)), cdf=True)}


def strip_raw(seqs: list[dict[str, Any]]) -> None:
    for s in seqs:
        for er in s["engines"].values():
            er.pop("_mask_ns", None)
            er.pop("_accept_ns", None)
            er.pop("_warm_ns", None)


# ---- workload drivers (called by bench/cli.py) ----------------------------------------------------------------

TOOL_SIZES = [5, 20, 50, 100]


def tools_workload(pool: list[Tool], texts: list[str], workers: dict[str, Any], cfg: Any, tokenize: Callable,
                   eos: int, log: Callable[[str], None], sizes: list[int], n_dynamic: int, n_static: int,
                   n_seen: int, seed: int) -> dict[str, Any]:
    """DESIGN.md's tool format over N tools, static and dynamic (XGrammar-2 paper, Table 1, Figure 6)."""
    seqs = []
    for n in sizes:
        for setting, r, s in (("static", n_static, 0), ("dynamic", n_dynamic, n_seen)):
            seq = make_sequence("function", n, setting, len(pool), r, s, seed)
            seqs.append(run_sequence(seq, pool, texts, workers, cfg, tokenize, eos, log))
    per_token = {"function": {e: pooled_tokens(seqs, "function", e) for e in workers}}
    strip_raw(seqs)
    return {"format": "function", "formats": FORMATS, "sequences": seqs, "per_token": per_token}


def tool_formats_workload(pool: list[Tool], texts: list[str], fmt_workers: dict[str, tuple[dict[str, Any], Any,
                          Callable, int]], log: Callable[[str], None], sizes: list[int], n_dynamic: int,
                          n_seen: int, seed: int) -> dict[str, Any]:
    """Llama and Harmony tool formats, dynamic tool sets (XGrammar-2 paper, §4.2, Figures 7-8)."""
    seqs = []
    per_token: dict[str, Any] = {}
    for fmt, (workers, cfg, tokenize, eos) in fmt_workers.items():
        fseqs = []
        for n in sizes:
            seq = make_sequence(fmt, n, "dynamic", len(pool), n_dynamic, n_seen, seed)
            fseqs.append(run_sequence(seq, pool, texts, workers, cfg, tokenize, eos, log))
        per_token[fmt] = {e: pooled_tokens(fseqs, fmt, e) for e in workers}
        seqs += fseqs
    strip_raw(seqs)
    return {"formats": FORMATS, "sequences": seqs, "per_token": per_token}


def gpt_oss_tokenizer(cache_dir: str) -> tuple[str, str]:
    """(tokenizer.json, canonical json) of gpt-oss; the shared tokenizer.json is gzipped, so it is unpacked once
    into cache_dir (with its tokenizer_config.json, for the special-token names)."""
    import gzip
    import shutil

    src = os.path.join(DATA_DIR, "tokenizers", "original", "gpt-oss")
    dst = os.path.join(cache_dir, "gpt-oss")
    tj = os.path.join(dst, "tokenizer.json")
    if not os.path.exists(tj):
        os.makedirs(dst, exist_ok=True)
        with gzip.open(os.path.join(src, "tokenizer.json.gz"), "rb") as f, open(tj + ".tmp", "wb") as g:
            shutil.copyfileobj(f, g)
        os.replace(tj + ".tmp", tj)
        cfg = os.path.join(src, "tokenizer_config.json")
        if os.path.exists(cfg):
            shutil.copyfile(cfg, os.path.join(dst, "tokenizer_config.json"))
    return tj, os.path.join(DATA_DIR, "tokenizers", "canonical", "gpt-oss.json")


#: gpt-oss's end of an assistant turn; <|call|> (the other stop id of its generation config) is part of the
#: grammar (the end of a call), so only <|return|> is a stop token here, for every engine.
HARMONY_STOP = 200002
