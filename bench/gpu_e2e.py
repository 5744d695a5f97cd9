"""End-to-end decoding on a GPU: time per output token of transformers' ``model.generate()``
with no constraint, with upstream xgrammar's ``contrib.hf.LogitsProcessor`` and with
xgrammar2's (plain, and with its overlap hook).

    python -m bench.gpu_e2e [--out docs/benchmarks/gpu_e2e.md] [--data DIR] [--tokens 128]
    python -m bench.gpu_e2e --tiny --out /tmp/e2e.md     # CPU smoke run (automatic without CUDA)
    python -m bench.gpu_e2e --write-data .gpu_data/e2e   # pack the inputs for a machine without ../shared

The model is a Llama-architecture network with random weights built in place (no download):
the Llama-3.2-1B shape (hidden 2048, 16 layers, 32 heads, 8 KV heads, MLP 8192, bf16) with the
vocabulary of the real Llama-3 tokenizer (128,256 ids), so the bitmask has its real size.

Workloads (prompts: 64 seeded random token ids per row):

- ``json``: four JSONSchemaBench schemas (two Glaiveai2K, two Github_medium; picked by a fixed
  rule), assigned to the batch rows in turn (one compiled grammar per row), compact JSON
  (``any_whitespace=False``);
- ``tools``: 20 BFCL tools as one structural tag, ``<function=NAME>{arguments}</function>``
  (``triggered_tags`` with ``at_least_one``: the answer starts with a call), the same grammar
  for every row.

Fairness: random weights make constrained and unconstrained runs generate different tokens,
so every run generates exactly N tokens: ``min_new_tokens = max_new_tokens = N`` and
``generate``'s ``eos_token_id`` is a reserved token that no grammar allows (the grammars' own
stop token is Llama-3's ``<|eot_id|>``). A row whose grammar terminated goes on unconstrained
with xgrammar2's processor, with its last mask with upstream's (each processor as shipped).
Sampling is ``do_sample=True`` (temperature 1, no top-k / top-p) from a fixed seed.
TPOT = (time of ``generate(N)`` - time of ``generate(1)``) / (N - 1): prefill, matcher
creation and the first mask are in both and cancel. Grammars are compiled, and one untimed
run per engine warms their mask caches and kernels, before anything is timed. Every output of
a constrained run is replayed through a fresh matcher of its engine: tokens up to the
grammar's termination must all be accepted (``violations``).
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import hashlib
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "docs" / "benchmarks" / "gpu_e2e.md"
TOKENIZER_NAME = "llama-3-instruct"
STOP_TOKEN = "<|eot_id|>"
SCHEMA_SUBSETS = (("Glaiveai2K", 2), ("Github_medium", 2))
N_TOOLS = 20
PROMPT_LEN = 64
MODES = ("none", "xgrammar", "xgrammar2", "xgrammar2+overlap")

LLAMA_1B = dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                num_key_value_heads=8, head_dim=64, rope_theta=500000.0, max_position_embeddings=4096,
                tie_word_embeddings=True)
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_heads=1, head_dim=32, max_position_embeddings=512, tie_word_embeddings=True)


def log(msg: str) -> None:
    print(f"[gpu_e2e {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---- inputs ---------------------------------------------------------------------------------

def shared_data() -> Path:
    for cand in (os.environ.get("XGR2_SHARED_DATA"), REPO.parent / "shared" / "data", "/work/shared/data"):
        if cand and (Path(cand) / "tokenizers").is_dir():
            return Path(cand)
    raise SystemExit("shared data not found: pass --data DIR (a folder written by --write-data)")


def select_schemas(data: Path) -> List[Dict[str, Any]]:
    """A fixed pick: per subset, records ordered by sha256("0:" + id), the first object schemas
    with 3 to 10 properties, at most 2,500 characters, no $ref / pattern / format, and a
    property set not seen before."""
    out = []
    for subset, count in SCHEMA_SUBSETS:
        with gzip.open(data / "jsonschemabench" / f"{subset}.jsonl.gz", "rt", encoding="utf-8") as f:
            recs = [json.loads(line) for line in f if line.strip()]
        recs.sort(key=lambda r: hashlib.sha256(f"0:{r['id']}".encode()).hexdigest())
        seen = set()
        taken = 0
        for r in recs:
            s = r["schema"]
            if not isinstance(s, dict) or s.get("type") != "object":
                continue
            text = json.dumps(s)
            props = s.get("properties") or {}
            if not isinstance(props, dict) or not 3 <= len(props) <= 10:
                continue
            if len(text) > 2500 or any(k in text for k in ('"$ref"', '"pattern"', '"format"')):
                continue
            key = tuple(sorted(props))
            if key in seen:
                continue
            seen.add(key)
            out.append({"id": r["id"], "schema": s})
            taken += 1
            if taken == count:
                break
    return out


def select_tools(n: int) -> List[Dict[str, Any]]:
    """The first n tools of bench/tools.py's BFCL pool (seed 0), as OpenAI function tools."""
    from bench.tools import load_pool

    return [t.tool for t in load_pool(0)[:n]]


def write_data(dest: Path) -> None:
    """Packs everything the benchmark reads into dest (tokenizer files, schemas, tools)."""
    data = shared_data()
    dest.mkdir(parents=True, exist_ok=True)
    src = data / "tokenizers" / "original" / TOKENIZER_NAME
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(src / name, dest / name)
    (dest / "schemas.json").write_text(json.dumps(select_schemas(data), indent=1))
    (dest / "tools.json").write_text(json.dumps(select_tools(N_TOOLS), indent=1))
    (dest / "SOURCES.md").write_text(
        f"Written by `python -m bench.gpu_e2e --write-data` from shared/data: "
        f"tokenizers/original/{TOKENIZER_NAME}/ (tokenizer files), jsonschemabench/ (schemas.json), "
        f"bfcl/ (tools.json, via bench/tools.py's pool). Not part of the repository.\n"
    )
    log(f"wrote {dest}")


def load_inputs(data_dir: Optional[str]) -> Tuple[Path, List[Dict[str, Any]], List[Dict[str, Any]]]:
    if data_dir:
        d = Path(data_dir)
        return d, json.loads((d / "schemas.json").read_text()), json.loads((d / "tools.json").read_text())
    data = shared_data()
    return data / "tokenizers" / "original" / TOKENIZER_NAME, select_schemas(data), select_tools(N_TOOLS)


def tools_structural_tag(tools: List[Dict[str, Any]]) -> str:
    tags = [{"type": "tag", "begin": f"<function={t['function']['name']}>",
             "content": {"type": "json_schema", "json_schema": t["function"]["parameters"]},
             "end": "</function>"} for t in tools]
    return json.dumps({"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<function="], "tags": tags,
        "at_least_one": True, "stop_after_first": False}})


# ---- engines --------------------------------------------------------------------------------

class Engine:
    """One grammar engine (xgrammar or xgrammar2) with its compiled workloads."""

    def __init__(self, name: str, module: Any, tokenizer: Any, vocab: int, stop: List[int]) -> None:
        self.name = name
        self.xgr = module
        t0 = time.perf_counter()
        self.info = module.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab, stop_token_ids=stop)
        self.compiler = module.GrammarCompiler(self.info)
        self.setup_s = time.perf_counter() - t0
        self.grammars: Dict[str, List[Any]] = {}
        self.compile_s: Dict[str, float] = {}

    def compile(self, workload: str, schemas: List[Dict[str, Any]], tools: List[Dict[str, Any]]) -> None:
        t0 = time.perf_counter()
        if workload == "json":
            self.grammars[workload] = [
                self.compiler.compile_json_schema(json.dumps(s["schema"]), any_whitespace=False) for s in schemas
            ]
        else:
            self.grammars[workload] = [self.compiler.compile_structural_tag(tools_structural_tag(tools))]
        self.compile_s[workload] = time.perf_counter() - t0

    def row_grammars(self, workload: str, batch: int) -> List[Any]:
        g = self.grammars[workload]
        return [g[i % len(g)] for i in range(batch)]

    def processor(self, workload: str, batch: int) -> Any:
        return self.xgr.contrib.hf.LogitsProcessor(self.row_grammars(workload, batch))

    def violations(self, workload: str, outputs: List[List[int]]) -> Tuple[int, int]:
        """(rows whose tokens before termination were not all accepted, rows terminated)."""
        bad = done = 0
        for grammar, row in zip(self.row_grammars(workload, len(outputs)), outputs):
            m = self.xgr.GrammarMatcher(grammar)
            for t in row:
                if m.is_terminated():
                    break
                if not m.accept_token(int(t)):
                    bad += 1
                    break
            done += bool(m.is_terminated())
        return bad, done


def load_engines(tokenizer: Any, vocab: int, stop: List[int]) -> Tuple[Dict[str, Engine], Dict[str, str]]:
    engines: Dict[str, Engine] = {}
    missing: Dict[str, str] = {}
    for name in ("xgrammar", "xgrammar2"):
        try:
            if name == "xgrammar":
                import xgrammar as module
                import xgrammar.contrib.hf  # noqa: F401
            else:
                import xgrammar2 as module
                import xgrammar2.contrib.hf  # noqa: F401
            engines[name] = Engine(name, module, tokenizer, vocab, stop)
        except Exception as e:  # noqa: BLE001 - the peer is optional; say why it is missing
            missing[name] = f"{type(e).__name__}: {str(e)[:300]}"
            log(f"{name} unavailable: {missing[name]}")
    return engines, missing


# ---- model and timing -----------------------------------------------------------------------

def build_model(vocab: int, tiny: bool, device: str, bos: int) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    shape = TINY if tiny else LLAMA_1B
    cfg = LlamaConfig(vocab_size=vocab, bos_token_id=bos, **shape)
    dtype = torch.float32 if tiny else torch.bfloat16
    torch.manual_seed(0)
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(old)
    return model.to(device=device, dtype=dtype).eval()


class Runner:
    def __init__(self, model: Any, device: str, eos: int, prompt_ids: List[int], seed: int) -> None:
        self.model = model
        self.device = device
        self.eos = eos
        self.prompt_ids = prompt_ids
        self.seed = seed

    def sync(self) -> None:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()

    def generate(self, batch: int, n: int, processor: Any = None, overlap: bool = False) -> Tuple[float, Any]:
        import torch

        ids = torch.tensor([self.prompt_ids[i % len(self.prompt_ids)] for i in range(batch)], device=self.device)
        kwargs: Dict[str, Any] = {}
        if processor is not None:
            kwargs["logits_processor"] = [processor]
            if overlap:
                kwargs["stopping_criteria"] = [processor.overlap_hook()]
        torch.manual_seed(self.seed)
        self.sync()
        t0 = time.perf_counter()
        out = self.model.generate(  # generate() runs under torch.no_grad() itself
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
            do_sample=True, temperature=1.0, top_k=0, top_p=1.0, eos_token_id=self.eos,
            pad_token_id=self.eos, **kwargs)
        self.sync()
        dt = time.perf_counter() - t0
        new = out[:, ids.shape[1]:]
        if new.shape[1] != n:
            raise RuntimeError(f"generate() made {new.shape[1]} tokens, not {n}")
        return dt, new


def run_mode(runner: Runner, engines: Dict[str, Engine], workload: str, mode: str, batch: int, n: int,
             repeats: int) -> Dict[str, Any]:
    engine = None if mode == "none" else engines[mode.split("+")[0]]
    overlap = mode.endswith("+overlap")

    def one(tokens: int) -> Tuple[float, Any]:
        proc = engine.processor(workload, batch) if engine else None
        return runner.generate(batch, tokens, proc, overlap)

    firsts = [one(1)[0] for _ in range(max(2, repeats))]
    fulls = []
    violations = terminated = 0
    for _ in range(repeats):
        dt, out = one(n)
        fulls.append(dt)
        if engine is not None:
            bad, done = engine.violations(workload, out.tolist())
            violations += bad
            terminated += done
    t1, tn = min(firsts), min(fulls)
    return {"workload": workload, "batch": batch, "mode": mode, "tokens": n, "repeats": repeats,
            "prefill_s": t1, "total_s": tn, "all_total_s": fulls, "all_prefill_s": firsts,
            "tpot_ms": (tn - t1) / (n - 1) * 1e3, "violations": violations,
            "rows_terminated": terminated, "rows": batch * repeats}


# ---- report ---------------------------------------------------------------------------------

def table(rows: List[Dict[str, Any]], modes: List[str]) -> str:
    keyed: Dict[Tuple[str, int], Dict[str, Dict[str, Any]]] = {}
    for r in rows:
        keyed.setdefault((r["workload"], r["batch"]), {})[r["mode"]] = r
    head = "| workload | batch | " + " | ".join(
        "TPOT none (ms)" if m == "none" else f"{m} (ms, overhead)" for m in modes) + " | violations |"
    lines = [head, "|" + "---|" * (3 + len(modes))]
    for (workload, batch), by in keyed.items():
        base = by.get("none")
        cells = []
        for m in modes:
            r = by.get(m)
            if r is None or "tpot_ms" not in r:
                cells.append(r.get("skipped", "n/a") if r else "n/a")
            elif m == "none" or base is None or "tpot_ms" not in base:
                cells.append(f"{r['tpot_ms']:.2f}")
            else:
                over = (r["tpot_ms"] / base["tpot_ms"] - 1) * 100
                cells.append(f"{r['tpot_ms']:.2f} ({over:+.1f}%)")
        viol = sum(r.get("violations", 0) for r in by.values())
        lines.append(f"| {workload} | {batch} | " + " | ".join(cells) + f" | {viol} |")
    return "\n".join(lines)


def render(meta: Dict[str, Any], rows: List[Dict[str, Any]], modes: List[str]) -> str:
    cfg = meta["model"]
    lines = [
        "# End-to-end decoding with transformers' generate() on a GPU" if not meta["tiny"]
        else "# End-to-end decoding with transformers' generate() (tiny CPU smoke run)",
        "",
        f"`python -m bench.gpu_e2e` on {meta['device']} (torch {meta['torch']}, transformers "
        f"{meta['transformers']}, xgrammar {meta['versions'].get('xgrammar') or 'n/a'}, xgrammar2 "
        f"{meta['versions'].get('xgrammar2') or 'n/a'}), {meta['date']}.",
        "",
        f"Model: random-weight LlamaForCausalLM, hidden {cfg['hidden_size']}, {cfg['num_hidden_layers']} layers, "
        f"{cfg['num_attention_heads']} heads / {cfg['num_key_value_heads']} KV heads, MLP "
        f"{cfg['intermediate_size']}, vocab {meta['vocab']} ({meta['tokenizer']}), {meta['dtype']}, "
        f"{meta['params'] / 1e9:.2f}B parameters. Prompt {PROMPT_LEN} tokens, {meta['tokens']} new tokens "
        f"per row (forced: min_new_tokens = max_new_tokens), do_sample (temperature 1, seed {meta['seed']}), "
        f"best of {meta['repeats']} runs.",
        "",
        "TPOT = (generate(N) - generate(1)) / (N - 1); overhead against the unconstrained run of the same "
        "row. *xgrammar*: upstream `xgrammar.contrib.hf.LogitsProcessor`; *xgrammar2*: "
        "`xgrammar2.contrib.hf.LogitsProcessor`; *+overlap*: the same with "
        "`stopping_criteria=[processor.overlap_hook()]` (the next mask is filled on a worker thread "
        "while the next forward pass runs). *violations*: output rows with a token their grammar "
        "rejects before it terminated (must be 0).",
        "",
        "Workloads: *json*: " + ", ".join(f"`{s}`" for s in meta["schemas"]) + " (one per row, in turn; "
        "compact JSON); *tools*: " + f"{meta['n_tools']} BFCL tools as one structural tag "
        "(`<function=NAME>{json}</function>`, a call first). Grammars compiled and warmed "
        "(one untimed run per engine) before timing.",
        "",
        table(rows, modes),
        "",
    ]
    if not meta.get("complete", True):
        lines.append("*Partial: the run had not finished when this was written.*")
    for name, why in meta.get("missing", {}).items():
        lines.append(f"{name}: not run ({why})")
    for mode, why in meta.get("errors", {}).items():
        lines.append(f"{mode}: failed ({why})")
    lines.append("")
    lines.append("Compile time (s, all grammars of the workload, before timing): " + "; ".join(
        f"{e} {w} {s:.2f}" for e, d in meta["compile_s"].items() for w, s in d.items()))
    lines.append("")
    return "\n".join(lines)


# ---- main -----------------------------------------------------------------------------------

def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help=f"markdown table here, JSON beside it (default: {DEFAULT_OUT.relative_to(REPO)}; "
                                  "a tiny run writes nothing unless --out is given)")
    ap.add_argument("--data", help="a folder written by --write-data (default: read ../shared/data)")
    ap.add_argument("--write-data", metavar="DIR", help="pack the inputs into DIR and exit")
    ap.add_argument("--tiny", action="store_true", help="tiny model on the CPU (automatic without CUDA)")
    ap.add_argument("--tokens", type=int, help="new tokens per row (default 128; tiny 6)")
    ap.add_argument("--batches", help="comma-separated batch sizes (default 1,16,64; tiny 1,2)")
    ap.add_argument("--repeats", type=int, help="timed runs per cell, best kept (default 2; tiny 1)")
    ap.add_argument("--workloads", default="json,tools")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--budget-s", type=float, default=0,
                    help="stop timing new cells after this many seconds (0 = no limit); skipped cells say so")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.write_data:
        write_data(Path(args.write_data))
        return 0

    import torch
    import transformers

    start = time.perf_counter()
    cuda = torch.cuda.is_available()
    tiny = args.tiny or not cuda
    if not cuda and not args.tiny:
        log("no CUDA device: running the tiny CPU configuration")
    device = "cuda" if cuda and not tiny else "cpu"
    if device == "cpu":
        torch.set_num_threads(1)  # tiny matrices: more threads only contend
    n = args.tokens or (6 if tiny else 128)
    if n < 2:
        raise SystemExit("--tokens must be at least 2")
    batches = [int(b) for b in (args.batches or ("1,2" if tiny else "1,16,64")).split(",")]
    repeats = first_repeats = args.repeats or (1 if tiny else 2)
    workloads = [w for w in args.workloads.split(",") if w]
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            raise SystemExit(f"unknown mode {m!r}; choose from {', '.join(MODES)}")
    if args.out:
        out = Path(args.out)
    elif tiny:
        out = None
    else:
        out = DEFAULT_OUT

    tok_dir, schemas, tools = load_inputs(args.data)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tok_dir))
    vocab = len(tokenizer)
    stop = [tokenizer.convert_tokens_to_ids(STOP_TOKEN)]
    specials = set(tokenizer.all_special_ids) | set(stop)
    # generate()'s own stop token: a reserved special token that no grammar allows.
    eos = max(i for i in range(vocab - 1, vocab - 300, -1) if i not in stop)
    log(f"tokenizer {TOKENIZER_NAME}: {vocab} ids, grammar stop {stop}, generate eos {eos}; "
        f"{len(schemas)} schemas, {len(tools)} tools; device {device}, tiny={tiny}")

    engines, missing = load_engines(tokenizer, vocab, stop)
    compile_s: Dict[str, Dict[str, float]] = {}
    for name, e in engines.items():
        for w in workloads:
            e.compile(w, schemas, tools)
        compile_s[name] = dict(e.compile_s)
        log(f"{name}: tokenizer info {e.setup_s:.2f}s, compile {e.compile_s}")

    import random

    rng = random.Random(args.seed)
    pool = [i for i in range(min(vocab, 128000)) if i not in specials]
    prompts = [[rng.choice(pool) for _ in range(PROMPT_LEN)] for _ in range(8)]
    t0 = time.perf_counter()
    model = build_model(vocab, tiny, device, bos=tokenizer.bos_token_id or 0)
    params = sum(p.numel() for p in model.parameters())
    log(f"model built in {time.perf_counter() - t0:.1f}s: {params / 1e9:.3f}B parameters")
    runner = Runner(model, device, eos, prompts, args.seed)

    available = [m for m in modes if m == "none" or m.split("+")[0] in engines]
    broken: Dict[str, str] = {}  # mode -> first error (its later cells are not run)
    rows: List[Dict[str, Any]] = []
    versions = {}
    for name in ("xgrammar", "xgrammar2"):
        try:
            from importlib.metadata import version

            versions[name] = version(name)
        except Exception:  # noqa: BLE001
            versions[name] = getattr(sys.modules.get(name), "__version__", None)
    meta = {
        "device": torch.cuda.get_device_name() if device == "cuda" else f"CPU ({platform.processor() or 'x86_64'})",
        "torch": torch.__version__, "transformers": transformers.__version__, "versions": versions,
        "date": datetime.date.today().isoformat(), "tiny": tiny, "tokens": n, "repeats": repeats,
        "seed": args.seed, "vocab": vocab, "tokenizer": TOKENIZER_NAME, "params": params,
        "dtype": "float32" if tiny else "bfloat16", "model": TINY if tiny else LLAMA_1B,
        "schemas": [s["id"] for s in schemas], "n_tools": len(tools), "missing": missing,
        "compile_s": compile_s, "python": platform.python_version(), "cpus": os.cpu_count(),
        "errors": broken,
    }

    def write(final: bool) -> str:
        """Renders the rows so far; also written after every cell, so a run cut short by a
        time limit still leaves its finished rows."""
        done = sorted(rows, key=lambda r: (workloads.index(r["workload"]), r["batch"], modes.index(r["mode"])))
        meta["elapsed_s"] = time.perf_counter() - start
        meta["complete"] = final
        text = render(meta, done, modes)
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text)
            out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": done}, indent=1))
        return text

    def attempt(mode: str, fn: Any) -> Optional[Dict[str, Any]]:
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - one engine's failure must not lose the others' rows
            import traceback

            broken.setdefault(mode, f"{type(e).__name__}: {str(e)[:300]}")
            log(f"{mode} failed: {broken[mode]}\n{traceback.format_exc()}")
            return None

    # Warm-up: kernels, CUDA graphs of cuBLAS, Triton compiles, and the engines' mask caches.
    runner.generate(min(batches), min(n, 16))
    for w in workloads:
        for m in available:
            if m != "none" and m not in broken:
                attempt(m, lambda: run_mode(runner, engines, w, m, max(batches), min(n, 32), 1))
    log(f"warm-up done at {time.perf_counter() - start:.0f}s")
    k = 0
    cells_left = len(workloads) * len(batches) * len(available)
    cell_s: List[float] = []
    for w in workloads:
        for b in batches:
            order = available[k % len(available):] + available[:k % len(available)]
            k += 1
            for m in order:
                cells_left -= 1
                elapsed = time.perf_counter() - start
                if m in broken:
                    rows.append({"workload": w, "batch": b, "mode": m, "skipped": "failed (see errors)"})
                    continue
                if args.budget_s and elapsed > args.budget_s:
                    rows.append({"workload": w, "batch": b, "mode": m, "skipped": "skipped (time budget)"})
                    continue
                if args.budget_s and repeats > 1 and cell_s:
                    # Cells grow with the batch: project from the slowest so far.
                    if elapsed + max(cell_s) * (cells_left + 1) > args.budget_s:
                        repeats = 1
                        meta["repeats"] = f"{first_repeats} (1 from {w} b={b} on: time budget)"
                        log("projected past --budget-s: one timed run per cell from here on")
                t_cell = time.perf_counter()
                r = attempt(m, lambda: run_mode(runner, engines, w, m, b, n, repeats))
                cell_s.append(time.perf_counter() - t_cell)
                if r is None:
                    rows.append({"workload": w, "batch": b, "mode": m, "skipped": "failed (see errors)"})
                    continue
                rows.append(r)
                log(f"{w} b={b} {m}: TPOT {r['tpot_ms']:.2f} ms (prefill {r['prefill_s'] * 1e3:.0f} ms)"
                    + (f", violations {r['violations']}" if m != "none" else ""))
                write(False)
            for m in modes:
                if m not in available:
                    rows.append({"workload": w, "batch": b, "mode": m,
                                 "skipped": "n/a (" + missing.get(m.split("+")[0], "unavailable")[:60] + ")"})
    text = write(True)
    print(text)
    if out is not None:
        log(f"wrote {out} and {out.with_suffix('.json')}")
    log(f"done in {time.perf_counter() - start:.0f}s")
    total_violations = sum(r.get("violations", 0) for r in rows)
    return 1 if total_violations or broken else 0


if __name__ == "__main__":
    raise SystemExit(main())
