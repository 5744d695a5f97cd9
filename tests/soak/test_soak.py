"""CI version of the memory soak (tests/soak/soak.py): 1,000 distinct tool sets and 1,000
distinct schemas under small cache budgets (4 MiB cross-grammar cache, 8 MiB compiler
cache), matchers created and dropped. The cross-grammar cache never exceeds its budget,
the compiler cache stays within its limit, and RSS is flat over the second half. The
10,000-set run's figures are in docs/reliability.md."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import soak  # noqa: E402

pytestmark = pytest.mark.timeout(600)


def test_soak_1000_tool_sets_and_schemas():
    if not (soak.DATA / "bfcl").is_dir():
        pytest.skip(f"BFCL data not found under {soak.DATA}")
    import xgrammar2 as xgr

    old = xgr.get_cross_grammar_cache_stats()["budget"]
    try:
        r = soak.main(["--n", os.environ.get("XGR2_SOAK_N", "1000"), "--samples", "10",
                       "--cross-budget-mb", "4", "--compiler-cache-mb", "8", "--max-growth-mb", "24"])
    finally:
        xgr.set_cross_grammar_cache_budget(old)
    assert r["n_errors"] == 0, r["errors_sample"]
    assert r["max_cross_cache_bytes"] <= r["cross_cache_budget"]
    assert r["max_compiler_cache_bytes"] <= r["compiler_cache_limit"] * 1.05
    assert r["rss_second_half_growth_mb"] <= 24, [s["rss_mb"] for s in r["samples"]]
    assert r["ok"]
