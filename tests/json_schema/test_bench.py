"""JSONSchemaBench ratchet (shared/data/jsonschemabench).

Default: a deterministic sample of XGR_BENCH_SAMPLE (default 100) schemas per subset, so the
test stays fast; XGR_FULL=1 runs every schema. Mode: strict_mode=False (the instances are
value-valid, extra properties included), any_whitespace=True; both text variants of each
instance must be accepted. Baseline: baseline_bench.json, keyed by sample size; per subset
schemas / compiled / valid / valid_accepted / invalid / invalid_rejected. A drop in compiled
or valid_accepted fails; any accepted invalid instance fails. Update with
XGR_UPDATE_BASELINE=1.
"""

from __future__ import annotations

import json
import os

import pytest

import suite_runner as S
from js_engine import ENGINE

BASELINE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "baseline_bench.json")
FULL = bool(os.environ.get("XGR_FULL"))
SAMPLE = None if FULL else int(os.environ.get("XGR_BENCH_SAMPLE", "100"))
KEY = "full" if SAMPLE is None else f"sample_{SAMPLE}"
UPDATE_HINT = "update the baseline with: XGR_UPDATE_BASELINE=1 python -m pytest tests/json_schema/test_bench.py" + \
    (" (with XGR_FULL=1 for the full run)" if FULL else "")

pytestmark = pytest.mark.skipif(not os.path.isdir(S.BENCH_DIR), reason="JSONSchemaBench data not found")


@pytest.fixture(scope="module")
def bench_result():
    return S.run_bench(S.OursPipeline(strict_mode=False), sample=SAMPLE)


def test_bench_no_invalid_accepted(bench_result):
    res, bad = bench_result
    assert not bad, f"{len(bad)} invalid instances accepted (engine {ENGINE.name}): {bad[:10]}"


def test_bench_ratchet(bench_result):
    res, _ = bench_result
    doc = {}
    if os.path.exists(BASELINE):
        with open(BASELINE) as f:
            doc = json.load(f)
    tot = {k: sum(s[k] for s in res.values()) for k in next(iter(res.values()))}
    summary = (f"[{KEY}] compiled {tot['compiled']}/{tot['schemas']}, valid accepted {tot['valid_accepted']}/"
               f"{tot['valid']}, invalid rejected {tot['invalid_rejected']}/{tot['invalid']} (engine {ENGINE.name})")
    print("\nJSONSchemaBench:", summary)
    if os.environ.get("XGR_UPDATE_BASELINE"):
        doc[KEY] = {"mode": {"strict_mode": False, "any_whitespace": True}, "engine": ENGINE.name, "totals": tot,
                    "subsets": res}
        with open(BASELINE, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")
        return
    if KEY not in doc:
        pytest.skip(f"no baseline for {KEY}; {UPDATE_HINT}")
    base = doc[KEY]["subsets"]
    regressions = []
    for sub, b in base.items():
        cur = res.get(sub)
        if cur is None:
            regressions.append(f"{sub}: missing")
            continue
        for k in ("compiled", "valid_accepted", "invalid_rejected"):
            if cur[k] < b[k]:
                regressions.append(f"{sub}: {k} {b[k]} -> {cur[k]}")
    assert not regressions, "regressions against baseline_bench.json:\n  " + "\n  ".join(regressions) + \
        f"\n{summary}\nIf intended, {UPDATE_HINT}"
