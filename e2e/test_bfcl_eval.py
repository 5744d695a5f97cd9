"""A slice of the BFCL evaluation (e2e/bfcl_eval.py) on a real vLLM server: SmolLM2-135M-Instruct,
xgrammar2 backend, hermes tool parser with ``--tool-strict-level parameter``; the first case of
each category (simple, multiple, parallel), unconstrained (``tool_choice="none"``) and xgrammar2
with ``auto`` / ``required`` / the named function. The pipeline must run end to end: no HTTP
errors, every request scored, and with ``required`` and a named function every answer of
xgrammar2 is a schema-valid call. (Upstream xgrammar and the pass rates are left to the full run,
``python e2e/bfcl_eval.py``: this is a pipeline check, and at 3 cases per category it was 491 s
of CI's 5,400 on a slow 2-CPU machine, ~55 s a case.)
"""

import json

import pytest

from e2e_helpers import HAVE_VLLM, SKIP_REASON

import bfcl_ast as B
import bfcl_eval as E

pytestmark = [
    pytest.mark.skipif(not HAVE_VLLM, reason=SKIP_REASON),
    pytest.mark.skipif(not B.BFCL_DIR.exists(), reason=f"{B.BFCL_DIR} not present"),
]

PER_CATEGORY = 1
MAX_TOKENS = 160


@pytest.fixture(scope="module")
def bfcl_server():
    srv = E.start_bfcl_server("xgrammar2", max_num_seqs=4)
    yield srv
    srv.stop()


def test_bfcl_slice(bfcl_server, tmp_path):
    # The first cases of each file: a case whose argument is an unbounded array can make the
    # model count until max_tokens (parallel_133 does), and the slice must be a stable check.
    cases = E.load_cases(E.CATEGORIES, PER_CATEGORY, first=True)
    assert len(cases) == PER_CATEGORY * len(E.CATEGORIES)
    records = E.evaluate(cases, ["none", "xgrammar2"], E.TOOL_CHOICES, max_tokens=MAX_TOKENS,
                         concurrency=4, servers={"xgrammar2": bfcl_server})
    failed = [(r["config"], r["tool_choice"], r["id"], r["status"], r["error"]) for r in records if r["status"] != 200]
    assert not failed, failed
    assert bfcl_server.alive() and bfcl_server.healthy()

    named = sum(1 for c in cases if c["named"])
    assert len(records) == len(cases) * 3 + named  # none, auto, required + named
    for r in records:
        assert isinstance(r["valid"], bool) and isinstance(r["correct"], bool), r
        if r["correct"]:
            assert r["valid"] or r["config"] == "none", r

    rows = E.summarize(records)
    by = {(r["category"], r["tool_choice"], r["config"]): r for r in rows}
    for cat in E.CATEGORIES + ("all",):
        assert by[(cat, "none", "none")]["n"] == (len(cases) if cat == "all" else PER_CATEGORY)
        for tc in ("auto", "required"):
            row = by[(cat, tc, "xgrammar2")]
            assert row["valid_pct"] is not None and row["correct_pct"] is not None
            assert row["failed"] == 0
    # Whatever the slice: a constrained answer that ended by itself is a schema-valid call.
    for r in records:
        if r["config"] == "xgrammar2" and r["tool_choice"] in ("required", "named") and r["finish_reason"] != "length":
            assert r["valid"], r
    for cat in E.CATEGORIES:
        row = by[(cat, "required", "xgrammar2")]
        bad = [(r["id"], r["valid_reason"], r["calls"], r["finish_reason"]) for r in records
               if r["config"] == "xgrammar2" and r["tool_choice"] == "required" and r["category"] == cat
               and not r["valid"]]
        assert row["valid_pct"] == 100.0, bad
        if (cat, "named", "xgrammar2") in by:
            assert by[(cat, "named", "xgrammar2")]["valid_pct"] == 100.0
    for r in records:
        print(f"[bfcl] {r['config']}/{r['tool_choice']}/{r['id']}: valid={r['valid']} correct={r['correct']} "
              f"calls={json.dumps(r['calls'])[:160]}")

    # the report is written from the same data
    meta = {"command": "pytest e2e/test_bfcl_eval.py", "started_utc": "-", "machine": "-", "wall_s": 0.0,
            "vllm": "-", "xgrammar": "-", "xgrammar2": "-", "categories": list(E.CATEGORIES),
            "max_tokens": MAX_TOKENS, "concurrency": 4, "cases": {c: PER_CATEGORY for c in E.CATEGORIES},
            "available": {c: PER_CATEGORY for c in E.CATEGORIES}, "phases": [], "loadavg_start": None,
            "loadavg_end": None}
    E.write_outputs({"meta": meta, "summary": rows, "records": records}, tmp_path / "bfcl")
    md = (tmp_path / "bfcl.md").read_text()
    assert "| all | required | xgrammar2 |" in md
    assert json.loads((tmp_path / "bfcl.json").read_text())["summary"] == rows
