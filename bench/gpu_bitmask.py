"""GPU timing of apply_token_bitmask_inplace: xgrammar2's backends against upstream xgrammar's.

Needs a CUDA device (and triton for the kernels). Every case first checks that each engine's
result equals xgrammar2's torch_native result, then times it two ways:

- *kernel*: ``triton.testing.do_bench`` (L2 flushed between runs), median and p99 in µs;
- *host*: wall time per call of back-to-back calls with one synchronize at the end, i.e. what
  the Python call costs the step when the GPU keeps up (argument checks, launch).

    python -m bench.gpu_bitmask [--out results.json] [--quick]

Prints a markdown table; ``--out`` also writes the rows as JSON.
"""

import argparse
import json
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

VOCABS = {"llama-2": 32000, "llama-3": 128256, "qwen3": 151936, "gpt-oss": 201088}
# Mask shapes: random bits at a given allowed fraction, and free text (everything allowed
# but the last 300 ids, as when only special tokens are excluded).
DENSITIES = {"1% allowed": 0.01, "50%": 0.5, "96% allowed": 0.96, "free text": None}


def _bitmask(rng: np.random.Generator, rows: int, vocab: int, allowed: Optional[float]) -> np.ndarray:
    n = ((vocab + 31) // 32) * 32
    if allowed is None:
        bits = np.ones((rows, n), dtype=bool)
        bits[:, vocab - 300 :] = False
    else:
        bits = rng.random((rows, n)) < allowed
    packed = np.packbits(bits, axis=-1, bitorder="little")
    return packed.view("<i4").astype(np.int32)


def _engines() -> Dict[str, Callable[..., None]]:
    import xgrammar2 as xgr2

    out: Dict[str, Callable[..., None]] = {
        "xgrammar2 auto": lambda lg, bm, idx: xgr2.apply_token_bitmask_inplace(lg, bm, indices=idx),
        "xgrammar2 torch_native": lambda lg, bm, idx: xgr2.apply_token_bitmask_inplace(
            lg, bm, indices=idx, backend="torch_native"
        ),
    }
    try:
        import xgrammar as xgr

        for backend in ("triton", "cuda"):
            out[f"xgrammar {backend}"] = (
                lambda lg, bm, idx, b=backend: xgr.apply_token_bitmask_inplace(lg, bm, indices=idx, backend=b)
            )
    except Exception as e:  # noqa: BLE001 - the peer is optional; say why it is missing
        print(f"upstream xgrammar unavailable: {type(e).__name__}: {e}", file=sys.stderr)
    return out


def _host_us(fn: Callable[[], None], reps: int) -> float:
    import torch

    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / reps * 1e6


def run(quick: bool) -> List[Dict[str, Any]]:
    import torch
    import triton.testing

    rng = np.random.default_rng(0)
    engines = _engines()
    cases: List[Tuple[str, int, str, Any, bool]] = []
    batches = (1, 64) if quick else (1, 16, 64, 256)
    for vocab_name in ("llama-3", "gpt-oss") if quick else VOCABS:
        for batch in batches:
            for density in DENSITIES:
                cases.append((vocab_name, batch, density, torch.float32, False))
    for vocab_name in ("llama-3", "qwen3"):
        cases.append((vocab_name, 64, "50%", torch.bfloat16, False))
        cases.append((vocab_name, 64, "50%", torch.float32, True))
    rows: List[Dict[str, Any]] = []
    broken: Dict[str, str] = {}
    for vocab_name, batch, density, dtype, half_rows in cases:
        vocab = VOCABS[vocab_name]
        bm = torch.from_numpy(_bitmask(rng, batch, vocab, DENSITIES[density])).cuda()
        base = torch.randn(batch, vocab, device="cuda").to(dtype)
        idx: Optional[List[int]] = list(range(0, batch, 2)) if half_rows else None
        want = base.clone()
        engines["xgrammar2 torch_native"](want, bm, idx)
        for name, fn in engines.items():
            if name in broken:
                continue
            logits = base.clone()
            try:
                fn(logits, bm, idx)
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 - a peer backend that cannot run here is reported
                broken[name] = f"{type(e).__name__}: {str(e)[:200]}"
                print(f"{name}: {broken[name]}", file=sys.stderr)
                continue
            if not torch.equal(logits, want):
                raise AssertionError(f"{name} differs from torch_native on {vocab_name} b={batch} {density}")
            times = triton.testing.do_bench(
                lambda: fn(logits, bm, idx), warmup=25, rep=200 if quick else 500, return_mode="all"
            )
            times_us = sorted(t * 1e3 for t in times)
            rows.append(
                {
                    "engine": name,
                    "vocab": vocab_name,
                    "batch": batch,
                    "density": density,
                    "dtype": str(dtype).replace("torch.", ""),
                    "indices": "every other row" if half_rows else "all rows",
                    "kernel_p50_us": statistics.median(times_us),
                    "kernel_p99_us": times_us[min(len(times_us) - 1, int(0.99 * len(times_us)))],
                    "host_us": _host_us(lambda: fn(logits, bm, idx), 200),
                }
            )
    for name, why in broken.items():
        rows.append({"engine": name, "unavailable": why})
    return rows


def table(rows: List[Dict[str, Any]]) -> str:
    """One line per case: each engine's kernel p50 / p99 and host µs, and the ratio of
    upstream xgrammar's triton kernel p50 to xgrammar2 auto's (above 1: xgrammar2 faster)."""
    timed = [r for r in rows if "kernel_p50_us" in r]
    names = list(dict.fromkeys(r["engine"] for r in timed))
    keyed: Dict[Tuple[Any, ...], Dict[str, Dict[str, Any]]] = {}
    for r in timed:
        key = (r["vocab"], r["batch"], r["density"], r["dtype"], r["indices"])
        keyed.setdefault(key, {})[r["engine"]] = r
    head = "| vocab | batch | allowed | dtype | rows | " + " | ".join(
        f"{n} p50 / p99 / host µs" for n in names
    ) + " | xgrammar triton ÷ xgrammar2 (p50) |"
    lines = [head, "|" + "---|" * (6 + len(names))]
    for key, by in keyed.items():
        cells = []
        for n in names:
            r = by.get(n)
            cells.append(
                "—" if r is None else f"{r['kernel_p50_us']:.1f} / {r['kernel_p99_us']:.1f} / {r['host_us']:.1f}"
            )
        ours, theirs = by.get("xgrammar2 auto"), by.get("xgrammar triton")
        ratio = f"{theirs['kernel_p50_us'] / ours['kernel_p50_us']:.2f}" if ours and theirs else "—"
        lines.append("| " + " | ".join(str(k) for k in key) + " | " + " | ".join(cells) + f" | {ratio} |")
    for r in rows:
        if "unavailable" in r:
            lines.append(f"\n{r['engine']}: not run ({r['unavailable']})")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="write the rows as JSON here")
    ap.add_argument("--quick", action="store_true", help="fewer cases and repetitions")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: nothing to time", file=sys.stderr)
        return 2
    rows = run(args.quick)
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    try:
        import triton

        meta["triton"] = triton.__version__
    except ImportError:
        pass
    print(f"device: {meta}\n")
    print(table(rows))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
