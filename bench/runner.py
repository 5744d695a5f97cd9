"""The driver side: worker processes per engine, interleaved per item, with timeouts and restarts."""

from __future__ import annotations

import multiprocessing as mp
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from bench.stats import summarize
from bench.workloads import WARMUP_SPEC, Item

INIT_TIMEOUT_S = 300.0


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


@dataclass
class Config:
    tokenizer_json: str
    canonical_path: str
    eos_token: int
    threads: int = 1
    compile_timeout: float = 30.0
    trace_timeout: float = 120.0
    #: Per-engine compile timeouts overriding compile_timeout (outlines-core's regex compiles can take minutes).
    engine_compile_timeout: dict[str, float] | None = None

    def compile_timeout_for(self, engine: str) -> float:
        return (self.engine_compile_timeout or {}).get(engine, self.compile_timeout)


class Worker:
    """One engine in its own process. `generation` changes whenever the process is restarted, which invalidates
    every compiled handle the driver thinks it has there."""

    def __init__(self, name: str, cfg: Config, engine: str | None = None,
                 options: dict[str, Any] | None = None) -> None:
        self.name = name  # the label the results use (an engine, or an ablation variant of one)
        self.engine = engine or name
        self.options = dict(options or {})
        self.cfg = cfg
        self.proc: Any = None
        self.conn: Any = None
        self.info: dict[str, Any] | None = None
        self.error: str | None = None
        self.generation = 0
        self.restarts = 0
        self.crashes: list[str] = []

    def start(self) -> bool:
        self.launch()
        return self.wait_ready()

    def launch(self) -> None:
        """Spawn the process; wait_ready() then waits for its start-up (vocabulary, warm-up). Launching several
        workers before waiting on any overlaps their start-ups."""
        from bench.worker import serve

        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=serve, args=(child, self.engine, self.cfg.tokenizer_json,
                                                    self.cfg.canonical_path, self.cfg.threads, WARMUP_SPEC,
                                                    self.options),
                                daemon=True, name=f"bench-{self.name}")
        self.proc.start()
        child.close()
        self.conn = parent
        self.generation += 1

    def wait_ready(self) -> bool:
        parent = self.conn
        if not parent.poll(INIT_TIMEOUT_S):
            self.error = f"engine did not start within {INIT_TIMEOUT_S:.0f}s"
            self._kill()
            return False
        try:
            r = parent.recv()
        except EOFError:
            self.proc.join(5)
            self.error = f"engine process died during start (exit code {self.proc.exitcode})"
            return False
        if not r.get("ok"):
            self.error = r.get("error")
            self._kill()
            return False
        self.info = r["info"]
        return True

    def _kill(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.proc.kill()
        if self.proc is not None:
            self.proc.join(10)
        if self.conn is not None:
            self.conn.close()
        self.conn = None

    def alive(self) -> bool:
        return self.conn is not None and self.proc is not None and self.proc.is_alive()

    def call(self, msg: tuple, timeout: float) -> dict[str, Any]:
        if not self.alive() and not self._restart("worker was down"):
            return {"ok": False, "error": f"engine unavailable: {self.error}"}
        try:
            self.conn.send(msg)
            if self.conn.poll(timeout):
                return self.conn.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
            self.proc.join(5)
            why = f"engine process crashed (exit code {self.proc.exitcode}) during {msg[0]}"
            self.crashes.append(why)
            self._restart(why)
            return {"ok": False, "error": why, "crash": True}
        why = f"timeout after {timeout:.0f}s during {msg[0]}"
        self._restart(why)
        return {"ok": False, "error": why, "timeout": True}

    def _restart(self, why: str) -> bool:
        log(f"{self.name}: restarting worker ({why})")
        self.restarts += 1
        self._kill()
        return self.start()

    def close(self) -> None:
        if self.alive():
            try:
                self.conn.send(("quit",))
                self.proc.join(10)
            except (BrokenPipeError, OSError):
                pass
        self._kill()


def start_all(workers: list[Worker], parallel: int = 2) -> list[bool]:
    """Start workers, `parallel` start-ups at a time (the machine has few cores); results in order."""
    out: list[bool] = []
    for i in range(0, len(workers), parallel):
        batch = workers[i:i + parallel]
        for w in batch:
            w.launch()
        out += [w.wait_ready() for w in batch]
    return out


def _rot(xs: list[str], k: int) -> list[str]:
    if not xs:
        return xs
    k %= len(xs)
    return xs[k:] + xs[:k]


class ItemsRun:
    """Accumulates one workload's numbers over its items."""

    def __init__(self, engines: list[str]) -> None:
        self.engines = engines
        self.compile = {e: {"cold": [], "nocache": [], "warm": [], "first_mask": [], "cold_plus_first_mask": [],
                            "ok": 0, "failed": 0, "unsupported": 0, "failures": [],
                            "warm_failed": 0, "nocache_failed": 0} for e in engines}
        self.mask_ns: dict[str, list[int]] = {e: [] for e in engines}
        self.accept_ns: dict[str, list[int]] = {e: [] for e in engines}
        self.common_mask_ns: dict[str, list[int]] = {e: [] for e in engines}
        self.common_accept_ns: dict[str, list[int]] = {e: [] for e in engines}
        self.outcomes = {e: {"valid": {}, "invalid": {}} for e in engines}
        self.violations: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
        self.disagreements: list[dict[str, Any]] = []
        self.dataset_mismatches: list[dict[str, Any]] = []
        self.per_item: list[dict[str, Any]] = []
        self.n_instances = {"valid": 0, "invalid": 0}
        #: Per engine: verdicts with the compile options of `run_items(semantics=...)` (see there).
        self.semantics: dict[str, dict[str, Any]] = {}

    def _count(self, e: str, valid: bool, outcome: str) -> None:
        d = self.outcomes[e]["valid" if valid else "invalid"]
        d[outcome] = d.get(outcome, 0) + 1


def _tally(valid: dict[str, int], invalid: dict[str, int]) -> dict[str, int]:
    """Outcome counts by kind as accepted / rejected totals. An invalid instance is rejected when the engine
    refuses a token or does not terminate at EOS."""
    return {"valid_accepted": valid.get("accepted", 0), "valid_total": sum(valid.values()),
            "invalid_rejected": invalid.get("rejected", 0) + invalid.get("not_terminated", 0),
            "invalid_total": sum(invalid.values())}


def run_items(label: str, items: list[Item], workers: dict[str, Worker], cfg: Config,
              tokenize: Callable[[str], list[int]], compile_repeats: int = 1,
              semantics: dict[str, dict[str, Any]] | None = None) -> ItemsRun:
    """Compile and trace every item on every engine. `semantics` maps an engine to spec overrides (e.g.
    {"strict_mode": False}): each item it compiled is compiled again with them and every instance's verdict is
    recorded, untimed, in `run.semantics`."""
    engines = list(workers)
    run = ItemsRun(engines)
    sem = {e: o for e, o in (semantics or {}).items() if e in workers}
    for e, o in sem.items():
        run.semantics[e] = {"options": o, "valid": {}, "invalid": {}, "compile_failed": [], "misses": []}
    t_start = time.time()
    for ii, item in enumerate(items):
        order = _rot(engines, ii)
        key = f"{label}:{ii}"
        rec: dict[str, Any] = {"id": item.id, **item.meta, "engines": {e: {} for e in engines}}
        gen: dict[str, int] = {}
        # Compile, cold first for every engine, then the no-cache and warm variants (interleaved the same way).
        for e in order:
            w = workers[e]
            r = w.call(("compile", key, item.spec, "cold"), cfg.compile_timeout_for(w.engine))
            c = run.compile[e]
            er = rec["engines"][e]
            if r.get("ok"):
                c["ok"] += 1
                c["cold"].append(r["ms"])
                c["first_mask"].append(r["first_mask_ms"])
                c["cold_plus_first_mask"].append(r["ms"] + r["first_mask_ms"])
                er.update(cold_ms=r["ms"], first_mask_ms=r["first_mask_ms"])
                gen[e] = w.generation
            elif r.get("unsupported"):
                c["unsupported"] += 1
                er["unsupported"] = r.get("error")
            else:
                c["failed"] += 1
                c["failures"].append({"id": item.id, "error": r.get("error")})
                er["error"] = r.get("error")
        # Traces: each instance through every engine that compiled the item, starting engine rotated per instance.
        item_tok = {e: {"mask_ns": [], "accept_ns": []} for e in engines}
        for k, inst in enumerate(item.instances):
            if not inst.tokens:
                inst.tokens = tokenize(inst.text) + [cfg.eos_token]
            run.n_instances["valid" if inst.valid else "invalid"] += 1
            outs: dict[str, str] = {}
            times: dict[str, tuple[list[int], list[int]]] = {}
            for e in _rot(order, k):
                w = workers[e]
                if e not in gen:
                    outs[e] = "not_compiled"
                    continue
                if w.generation != gen[e]:
                    outs[e] = "skipped (worker restarted)"
                    continue
                r = w.call(("trace", key, inst.tokens), cfg.trace_timeout)
                if not r.get("ok"):
                    outs[e] = "timeout" if r.get("timeout") else "error: " + str(r.get("error"))[:200]
                    run._count(e, inst.valid, "error")
                    continue
                o = r["outcome"]
                if o == "rejected":
                    outs[e] = f"rejected@{r['reject_step']}/{r['n_tokens']}"
                elif o == "error":
                    outs[e] = "error: " + str(r.get("error"))[:200]
                else:
                    outs[e] = o
                run._count(e, inst.valid, o)
                if inst.valid:
                    er = rec["engines"][e]
                    er["valid_traces"] = er.get("valid_traces", 0) + 1
                    er["valid_accepted"] = er.get("valid_accepted", 0) + (o == "accepted")
                for v in r["violations"]:
                    run.violations[e].append({"item": item.id, "instance": k, **v})
                if inst.valid:
                    run.mask_ns[e].extend(r["mask_ns"])
                    run.accept_ns[e].extend(r["accept_ns"])
                    item_tok[e]["mask_ns"].extend(r["mask_ns"])
                    item_tok[e]["accept_ns"].extend(r["accept_ns"])
                    if o == "accepted":
                        times[e] = (r["mask_ns"], r["accept_ns"])
            if inst.valid and len(times) == len(engines):
                for e, (m, a) in times.items():
                    run.common_mask_ns[e].extend(m)
                    run.common_accept_ns[e].extend(a)
            mism = {e: o for e, o in outs.items() if e in gen and not o.startswith("skipped")
                    and (o == "accepted") != inst.valid}
            if mism:
                run.dataset_mismatches.append({"item": item.id, "instance": k, "valid_in_dataset": inst.valid,
                                               "text": inst.text if len(inst.text) <= 300 else inst.text[:300] + "...",
                                               "n_tokens": len(inst.tokens), "outcomes": outs})
            ran = {e: o for e, o in outs.items() if o not in ("not_compiled",) and not o.startswith("skipped")}
            verdicts = {o == "accepted" for o in ran.values()}
            if len(verdicts) > 1 or (ran and any(o.startswith("error") or o == "timeout" for o in ran.values())):
                run.disagreements.append({"item": item.id, "instance": k, "valid_in_dataset": inst.valid,
                                          "text": inst.text if len(inst.text) <= 300 else inst.text[:300] + "...",
                                          "n_tokens": len(inst.tokens), "outcomes": outs})
        for e, over in sem.items():
            if e not in gen or workers[e].generation != gen[e] or not item.instances:
                continue
            r = workers[e].call(("verdicts", {**item.spec, **over}, [inst.tokens for inst in item.instances]),
                                cfg.trace_timeout)
            d = run.semantics[e]
            if not r.get("ok"):
                d["compile_failed"].append({"item": item.id, "error": str(r.get("error"))[:300]})
                continue
            for k, (inst, o) in enumerate(zip(item.instances, r["outcomes"])):
                kind = "valid" if inst.valid else "invalid"
                short = "rejected" if o.startswith("rejected") else ("error" if o.startswith("error") else o)
                d[kind][short] = d[kind].get(short, 0) + 1
                if (o == "accepted") != inst.valid:
                    d["misses"].append({"item": item.id, "instance": k, "valid_in_dataset": inst.valid,
                                        "outcome": o})
        # Then warm (cache hit) and no-cache compiles, after the traces so that a no-cache timeout (which restarts
        # the worker) costs only its own number; skipped where the worker restarted since the cold compile.
        for mode in ("warm", "nocache"):
            reps = compile_repeats if mode == "nocache" else 1
            for rep in range(reps):
                for e in _rot(order, rep):
                    w = workers[e]
                    if e not in gen or w.generation != gen[e] or not (w.info or {}).get("has_cache"):
                        continue
                    r = w.call(("compile", key, item.spec, mode), cfg.compile_timeout_for(w.engine))
                    if r.get("ok"):
                        run.compile[e][mode].append(r["ms"])
                        rec["engines"][e].setdefault(f"{mode}_ms", []).append(r["ms"])
                    else:
                        run.compile[e][f"{mode}_failed"] += 1
                        rec["engines"][e][f"{mode}_error"] = r.get("error")
        for e in engines:
            if e in gen and workers[e].generation == gen[e]:
                workers[e].call(("drop", key), 30)
            mt = item_tok[e]
            if mt["mask_ns"]:
                rec["engines"][e]["mask_accept_us"] = summarize(
                    (m + a) / 1e3 for m, a in zip(mt["mask_ns"], mt["accept_ns"]))
        run.per_item.append(rec)
        el = time.time() - t_start
        cold = " ".join(f"{e}={rec['engines'][e].get('cold_ms', float('nan')):.2f}ms" for e in engines)
        log(f"{label} {ii + 1}/{len(items)} {item.id} [{len(item.instances)} inst] {cold} ({el:.0f}s)")
    return run


def summarize_run(run: ItemsRun, keep_cdf: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"instances": run.n_instances, "compile": {}, "per_token": {}, "per_token_common": {},
                           "acceptance": {}, "violations": run.violations, "disagreements": run.disagreements,
                           "dataset_mismatches": run.dataset_mismatches,
                           "per_item": run.per_item}
    for e in run.engines:
        c = run.compile[e]
        attempted = c["ok"] + c["failed"]
        out["compile"][e] = {
            "ok": c["ok"], "failed": c["failed"], "unsupported": c["unsupported"], "attempted": attempted,
            "cold_ms": summarize(c["cold"], cdf=keep_cdf),
            "nocache_ms": summarize(c["nocache"]), "nocache_failed": c["nocache_failed"],
            "warm_failed": c["warm_failed"],
            "warm_ms": summarize(c["warm"]),
            "first_mask_ms": summarize(c["first_mask"]),
            "cold_plus_first_mask_ms": summarize(c["cold_plus_first_mask"]),
            "failures": c["failures"],
        }
        for dst, mask, acc in (("per_token", run.mask_ns[e], run.accept_ns[e]),
                               ("per_token_common", run.common_mask_ns[e], run.common_accept_ns[e])):
            out[dst][e] = {
                "tokens": len(mask),
                "mask_us": summarize((x / 1e3 for x in mask)),
                "accept_us": summarize((x / 1e3 for x in acc)),
                "mask_accept_us": summarize(((m + a) / 1e3 for m, a in zip(mask, acc)), cdf=keep_cdf),
            }
        o = run.outcomes[e]
        out["acceptance"][e] = {
            "valid": o["valid"], "invalid": o["invalid"], **_tally(o["valid"], o["invalid"]),
            "mask_accept_inconsistencies": len(run.violations[e]),
        }
    if run.semantics:
        out["acceptance_semantics"] = {}
        for e, d in run.semantics.items():
            out["acceptance_semantics"][e] = {**d, **_tally(d["valid"], d["invalid"])}
    return out
