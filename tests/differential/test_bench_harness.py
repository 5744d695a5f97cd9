"""Fast checks of the benchmark harness itself (no engine is started): sampling, statistics, targets, report."""

from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

np = pytest.importorskip("numpy")

from bench import report, stats, workloads  # noqa: E402


def test_summarize_percentiles() -> None:
    s = stats.summarize(range(1, 101), cdf=True)
    assert s["n"] == 100 and s["max"] == 100 and s["min"] == 1
    assert s["p50"] == pytest.approx(50.5) and s["mean"] == pytest.approx(50.5)
    assert s["cdf"]["value"][-1] == 100 and len(s["cdf"]["value"]) == len(stats.CDF_POINTS)
    assert stats.summarize([]) is None


@pytest.mark.skipif(not os.path.isdir(os.path.join(workloads.DATA_DIR, "jsonschemabench")),
                    reason="shared/data not found")
def test_jsonschemabench_sample_is_deterministic_and_spread() -> None:
    a = workloads.jsonschemabench(16, 0, 3, True)
    b = workloads.jsonschemabench(16, 0, 3, True)
    assert [i.id for i in a] == [i.id for i in b]
    assert {i.meta["subset"] for i in a} == set(workloads.JSB_SUBSETS)
    c = workloads.jsonschemabench(16, 1, 3, True)
    assert [i.id for i in a] != [i.id for i in c]
    for it in a:
        assert sum(inst.valid for inst in it.instances) <= 3


def test_grammar_items_have_every_dialect() -> None:
    items = workloads.grammar_items(['{"a":1}'], 3, 0)
    for it in items:
        if it.spec["kind"] == "grammar":
            assert it.spec["ebnf"] and it.spec["lark"]
        assert it.instances or it.id == "builtin_json"


def _fake(engines: dict[str, tuple[float, float, int]]) -> dict:
    """results.json shape with given (compile p50 ms, mask+accept p50 µs, compiled) per engine."""
    comp, tok, acc = {}, {}, {}
    for e, (c, t, ok) in engines.items():
        comp[e] = {"ok": ok, "attempted": 50, "failed": 50 - ok, "unsupported": 0, "failures": [],
                   "cold_ms": {"p50": c, "p90": c, "p99": c * 2, "mean": c, "max": c * 3, "n": ok,
                               "cdf": {"percent": [0, 50, 100], "value": [c / 2, c, c * 3]}},
                   "nocache_ms": None, "warm_ms": None, "first_mask_ms": None,
                   "cold_plus_first_mask_ms": {"p50": c, "p90": c, "p99": c * 2, "mean": c, "max": c * 3, "n": ok}}
        tok[e] = {"tokens": 10, "mask_us": None, "accept_us": None,
                  "mask_accept_us": {"p50": t, "p90": t, "p99": t * 10, "mean": t, "max": t * 20, "n": 10,
                                     "cdf": {"percent": [0, 50, 100], "value": [t / 2, t, t * 20]}}}
        acc[e] = {"valid": {"accepted": 5}, "invalid": {"rejected": 4}, "valid_accepted": 5, "valid_total": 5,
                  "invalid_rejected": 4, "invalid_total": 4, "mask_accept_inconsistencies": 0}
    return {"engines": {e: {"available": True, "versions": {e: "1"}} for e in engines},
            "settings": {"tokenizer": "/x/shared/data/tok.json"}, "machine": {},
            "workloads": {"jsonschemabench": {"compile": comp, "per_token": tok, "per_token_common": tok,
                                              "acceptance": acc, "disagreements": [], "dataset_mismatches": [],
                                              "instances": {"valid": 5, "invalid": 4}, "sample": ["a"]}}}


def test_targets_unmarked_without_xgrammar2() -> None:
    r = _fake({"xgrammar": (2.0, 6.0, 50), "llguidance": (0.8, 30.0, 43)})
    rows = report.evaluate_targets(r)
    assert rows and all(t["met"] is None for t in rows)
    p50 = next(t for t in rows if t["target"].startswith("JSONSchemaBench compile + first mask p50"))
    assert p50["best_peer"] == ["llguidance", 0.8]


def test_targets_marked_with_xgrammar2(tmp_path) -> None:
    r = _fake({"xgrammar2": (0.3, 4.0, 50), "xgrammar": (2.0, 6.0, 50), "llguidance": (0.8, 30.0, 43)})
    rows = {t["target"]: t for t in report.evaluate_targets(r)}
    assert rows["JSONSchemaBench compile + first mask p50 (ms)"]["met"] is True
    assert rows["JSONSchemaBench compile + first mask p50 (ms)"]["beats_best_peer"] is True
    assert rows["JSONSchemaBench sample mask+accept p99 (µs/token)"]["met"] is True
    assert rows["JSONSchemaBench schemas compiled"]["met"] is True
    r2 = _fake({"xgrammar2": (0.5, 4.0, 49), "xgrammar": (2.0, 6.0, 50)})
    rows2 = {t["target"]: t for t in report.evaluate_targets(r2)}
    assert rows2["JSONSchemaBench compile + first mask p50 (ms)"]["met"] is False
    assert rows2["JSONSchemaBench schemas compiled"]["met"] is False
    r["targets"] = report.evaluate_targets(r)
    report.write_all(r, str(tmp_path), plots=False)
    md = (tmp_path / "README.md").read_text()
    assert "**met**" in md and "×6.7" in md  # 2.0 / 0.3 compile p50 ratio for xgrammar
