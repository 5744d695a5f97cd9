"""One engine per worker process; the driver talks to it over a multiprocessing Pipe.

Timing happens here, next to the engine, so the pipe is never inside a measured interval. A hang or crash costs the
driver a kill and a restart of this one process, and is recorded as a failure of the item being run.

Messages (tuples) and answers (dicts):
  ("compile", key, spec, mode)  mode: "cold" (cache on, first time this key is seen; keeps the handle for traces and
                                 also times the first mask), "nocache" (engine cache disabled), "warm" (cache on, again)
  ("trace", key, tokens)        new matcher, then per token: fill mask, accept (each timed); tokens end with EOS
  ("drop", key)                 forget a compiled handle
  ("reset",)                    clear the engine's caches (compile cache, xgrammar2's cross-grammar cache)
  ("stats", key|None)           RSS and engine-reported memory (bytes), of the handle `key` where given
  ("mem_run", specs, marks)     compile each spec (cold, cache on) and fill its first mask, keeping nothing but
                                 the engine's own caches; at each count in `marks`, RSS and engine memory
  ("quit",)
"""

from __future__ import annotations

import gc
import os
import time
import traceback
from typing import Any


def _err(e: BaseException) -> str:
    s = f"{type(e).__name__}: {e}"
    return s if len(s) <= 600 else s[:600] + "..."


def rss_bytes() -> int:
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def serve(conn, engine_name: str, tokenizer_json: str, canonical_path: str, threads: int,
          warmup_spec: dict[str, Any] | None, options: dict[str, Any] | None = None) -> None:
    try:
        from bench.engines import ENGINES, CompileError, Unsupported, load_canonical

        eng = ENGINES[engine_name]()
        eng.options = dict(options or {})
        t0 = time.perf_counter()
        info = eng.load_vocab(tokenizer_json, load_canonical(canonical_path), threads)
        info["load_s"] = time.perf_counter() - t0
        info["versions"] = eng.versions()
        info["has_cache"] = bool(getattr(eng, "has_cache", False))
        bitmask, view = eng.allocate_bitmask()
        info["bitmask_shape"] = list(view.shape)
        if warmup_spec is not None:
            # One-time lazy initialisation (thread pools, tokenizer tables, first-grammar caches) is paid here, as
            # a server pays it on its first request, and not by the first measured item.
            h = eng.compile(warmup_spec, cache=True)
            m = eng.new_matcher(h)
            for _ in range(3):
                eng.fill_mask(m, bitmask)
            if info["has_cache"]:
                eng.compile(warmup_spec, cache=False)
    except BaseException as e:  # noqa: BLE001 - report any start-up failure to the driver
        conn.send({"ok": False, "error": _err(e), "traceback": traceback.format_exc()})
        return
    conn.send({"ok": True, "info": info})

    handles: dict[Any, Any] = {}
    pc = time.perf_counter_ns
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        op = msg[0]
        if op == "quit":
            return
        if op == "drop":
            handles.pop(msg[1], None)
            conn.send({"ok": True})
            continue
        if op == "reset":
            try:
                eng.reset_caches()
                conn.send({"ok": True})
            except Exception as e:  # noqa: BLE001
                conn.send({"ok": False, "error": _err(e)})
            continue
        if op == "stats":
            gc.collect()
            conn.send({"ok": True, "rss": rss_bytes(), **eng.memory_stats(handles.get(msg[1]))})
            continue
        if op == "mem_run":
            _, specs, marks = msg
            points = []
            per_grammar = []
            err = None
            gc.collect()
            rss0 = rss_bytes()
            base = eng.memory_stats()
            try:
                for i, spec in enumerate(specs):
                    h = eng.compile(spec, cache=True)
                    m = eng.new_matcher(h)
                    eng.fill_mask(m, bitmask)
                    g = eng.memory_stats(h).get("grammar_bytes")
                    if g is not None:
                        per_grammar.append(g)
                    del h, m
                    if i + 1 in marks:
                        gc.collect()
                        points.append({"requests": i + 1, "rss": rss_bytes(), **eng.memory_stats()})
            except Exception as e:  # noqa: BLE001
                err = _err(e)
            conn.send({"ok": err is None, "error": err, "rss0": rss0, "base": base, "points": points,
                       "grammar_bytes": per_grammar})
            continue
        if op == "compile":
            _, key, spec, mode = msg
            gc.collect()
            gc.disable()
            try:
                spec = eng.request(spec)  # untimed: the request as the engine receives it
                t0 = pc()
                h = eng.compile(spec, cache=(mode != "nocache"))
                m = eng.new_matcher(h)
                t1 = pc()
                res: dict[str, Any] = {"ok": True, "ms": (t1 - t0) / 1e6}
                if mode == "cold":
                    t2 = pc()
                    eng.fill_mask(m, bitmask)
                    t3 = pc()
                    res["first_mask_ms"] = (t3 - t2) / 1e6
                    handles[key] = h
            except Unsupported as e:
                res = {"ok": False, "unsupported": True, "error": _err(e)}
            except CompileError as e:
                res = {"ok": False, "error": str(e)[:600]}
            except Exception as e:  # noqa: BLE001 - an engine bug is a failure of this item, not of the run
                res = {"ok": False, "error": _err(e)}
            finally:
                gc.enable()
            conn.send(res)
            continue
        if op == "verdicts":
            # Accept-only runs (no timing) of several token sequences through one grammar compiled from spec: the
            # acceptance cross-check under options other than the timed run's.
            _, spec, token_lists = msg
            try:
                h = eng.compile(spec, cache=True)
            except Exception as e:  # noqa: BLE001 - a compile failure is this item's verdict, not the run's
                conn.send({"ok": False, "error": _err(e)[:600]})
                continue
            outs: list[str] = []
            for tokens in token_lists:
                try:
                    m = eng.new_matcher(h)
                    o = "accepted"
                    for i, t in enumerate(tokens):
                        if not eng.accept(m, t):
                            o = f"rejected@{i}/{len(tokens)}"
                            break
                    if o == "accepted" and not eng.is_terminated(m):
                        o = "not_terminated"
                except Exception as e:  # noqa: BLE001 - some engines raise on a rejected token
                    o = "error: " + _err(e)[:200]
                outs.append(o)
            conn.send({"ok": True, "outcomes": outs})
            continue
        if op == "trace":
            _, key, tokens = msg
            h = handles.get(key)
            if h is None:
                conn.send({"ok": False, "error": "not compiled"})
                continue
            try:
                m = eng.new_matcher(h)
            except Exception as e:  # noqa: BLE001
                conn.send({"ok": False, "error": "new_matcher: " + _err(e)})
                continue
            mask_ns: list[int] = []
            acc_ns: list[int] = []
            violations: list[dict[str, Any]] = []
            outcome = "accepted"
            reject_step = None
            error = None
            fill = eng.fill_mask
            acc = eng.accept
            gc.collect()
            gc.disable()
            try:
                for i, t in enumerate(tokens):
                    t0 = pc()
                    fill(m, bitmask)
                    t1 = pc()
                    try:
                        ok = acc(m, t)
                    except Exception as e:  # noqa: BLE001 - some engines raise on a rejected token
                        ok = False
                        error = _err(e)
                    t2 = pc()
                    mask_ns.append(t1 - t0)
                    acc_ns.append(t2 - t1)
                    bit = (int(view[0, t >> 5]) >> (t & 31)) & 1
                    if bool(bit) != ok and len(violations) < 5:
                        # The mask and the accept disagree about this token: a correctness bug in the engine.
                        violations.append({"step": i, "token": t, "mask_bit": bit, "accepted": ok})
                    if not ok:
                        outcome = "rejected"
                        reject_step = i
                        break
                if outcome == "accepted" and not eng.is_terminated(m):
                    outcome = "not_terminated"
            except Exception as e:  # noqa: BLE001
                outcome = "error"
                error = _err(e)
            finally:
                gc.enable()
            conn.send({"ok": True, "outcome": outcome, "reject_step": reject_step, "n_tokens": len(tokens),
                       "mask_ns": mask_ns, "accept_ns": acc_ns, "violations": violations, "error": error})
            continue
        conn.send({"ok": False, "error": f"unknown op {op!r}"})
