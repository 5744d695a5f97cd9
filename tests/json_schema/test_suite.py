"""Official JSON-Schema-Test-Suite (draft 2020-12) ratchet.

Mode: strict_mode=False (value-faithful: unlisted properties/items are allowed unless the
schema forbids them), any_whitespace=True, remote references resolved from the suite's
``remotes/`` folder. Every instance is checked as compact json.dumps and as indent=2
non-ASCII-escaped text; "accepted" means both are.

The baseline (baseline_suite.json) holds per file: groups, compiled, tests, right,
wrong_valid, wrong_invalid. A drop in compiled/right fails; any wrong-valid verdict fails.
To accept an improvement (or a deliberate change), rerun with XGR_UPDATE_BASELINE=1.
"""

from __future__ import annotations

import json
import os

import pytest

import suite_runner as S
from js_engine import ENGINE

BASELINE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "baseline_suite.json")
UPDATE_HINT = "update the baseline with: XGR_UPDATE_BASELINE=1 python -m pytest tests/json_schema/test_suite.py"

pytestmark = pytest.mark.skipif(not os.path.isdir(S.SUITE_DIR), reason="JSON-Schema-Test-Suite data not found")


VERDICTS: dict = {}


@pytest.fixture(scope="module")
def suite_result():
    return S.run_suite(S.OursPipeline(strict_mode=False), verdicts=VERDICTS)


@pytest.mark.parametrize("indent,separators", [(2, None), (None, (",", ":"))])
def test_suite_fixed_layout_same_verdicts(suite_result, indent, separators):
    """With any_whitespace=False the grammar accepts exactly json.dumps(indent=..., separators=...)
    layouts; the verdicts on those texts must equal the flexible-whitespace verdicts."""
    verdicts: dict = {}
    res, bad = S.run_suite(S.OursPipeline(strict_mode=False, any_whitespace=False, indent=indent,
                                          separators=separators), verdicts=verdicts)
    assert not bad
    diff = [k for k, v in verdicts.items() if VERDICTS.get(k) != v]
    assert not diff, f"{len(diff)} verdicts differ from the flexible layout, e.g. {diff[:5]}"


def test_suite_zero_wrong_valid(suite_result):
    res, bad = suite_result
    details = "\n".join(f"  {f}: {g} / {t}\n    schema={s}\n    data={d}" for f, g, t, s, d in bad[:20])
    assert not bad, f"{len(bad)} invalid instances accepted (engine {ENGINE.name}):\n{details}"


def test_suite_strict_mode_zero_wrong_valid():
    """strict_mode=True only narrows the grammar: still no invalid instance may pass."""
    res, bad = S.run_suite(S.OursPipeline(strict_mode=True))
    details = "\n".join(f"  {f}: {g} / {t}\n    data={d}" for f, g, t, s, d in bad[:20])
    assert not bad, f"{len(bad)} invalid instances accepted in strict mode:\n{details}"


def test_suite_ratchet(suite_result):
    res, _ = suite_result
    tot = S.totals(res)
    doc = {
        "mode": {"strict_mode": False, "any_whitespace": True, "variants": "compact + indent=2 non-ASCII"},
        "engine": ENGINE.name,
        "totals": tot,
        "files": res,
    }
    if os.environ.get("XGR_UPDATE_BASELINE"):
        with open(BASELINE, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")
        return
    if not os.path.exists(BASELINE):
        pytest.fail(f"no baseline file; {UPDATE_HINT}")
    with open(BASELINE) as f:
        base = json.load(f)
    regressions = []
    improvements = []
    for name, b in base["files"].items():
        cur = res.get(name)
        if cur is None:
            regressions.append(f"{name}: missing")
            continue
        for k in ("compiled", "right"):
            if cur[k] < b[k]:
                regressions.append(f"{name}: {k} {b[k]} -> {cur[k]}")
            elif cur[k] > b[k]:
                improvements.append(f"{name}: {k} {b[k]} -> {cur[k]}")
        if cur["wrong_valid"] > b["wrong_valid"]:
            regressions.append(f"{name}: wrong_valid {b['wrong_valid']} -> {cur['wrong_valid']}")
    summary = (f"groups compiled {tot['compiled']}/{tot['groups']}, right {tot['right']}/{tot['tests']}, "
               f"wrong-valid {tot['wrong_valid']}, wrong-invalid {tot['wrong_invalid']} (engine {ENGINE.name})")
    print("\nJSON-Schema-Test-Suite:", summary)
    if improvements:
        print("improvements over the baseline (" + UPDATE_HINT + "):\n  " + "\n  ".join(improvements))
    assert not regressions, "regressions against baseline_suite.json:\n  " + "\n  ".join(regressions) + \
        f"\n{summary}\nIf intended, {UPDATE_HINT}"
