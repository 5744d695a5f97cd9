"""bench/gpu_e2e.py keeps working on a CPU-only machine: its tiny configuration (tiny random
Llama, batch 1 and 2, a few tokens) runs end to end in a subprocess and writes a table with a
row per workload and batch, every mode timed, and no grammar violation. It writes to a
temporary folder, never to docs/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("XGR2_SHARED_DATA", REPO.parent / "shared" / "data"))

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("jsonschema")  # bench/tools.py validates the BFCL calls it keeps


@pytest.mark.skipif(not (DATA / "tokenizers").is_dir(), reason=f"shared data not found at {DATA}")
def test_gpu_e2e_tiny_mode(tmp_path):
    from xgrammar2 import _core

    if not _core.AVAILABLE:
        pytest.skip("the xgrammar2 C core is not built")
    out = tmp_path / "gpu_e2e.md"
    docs = REPO / "docs" / "benchmarks" / "gpu_e2e.md"
    before = docs.stat().st_mtime_ns if docs.exists() else None
    env = dict(os.environ, XGR2_SHARED_DATA=str(DATA), CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run(
        [sys.executable, "-m", "bench.gpu_e2e", "--tiny", "--out", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = out.read_text()
    report = json.loads(out.with_suffix(".json").read_text())
    assert report["meta"]["tiny"] is True
    have_upstream = "xgrammar" not in report["meta"]["missing"]
    modes = ["none", "xgrammar2", "xgrammar2+overlap"] + (["xgrammar"] if have_upstream else [])
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| workload | batch | TPOT none (ms)")
    body = table[1:]
    for workload in ("json", "tools"):
        for batch in (1, 2):
            line = [r for r in body if r.startswith(f"| {workload} | {batch} |")]
            assert len(line) == 1, (workload, batch, text)
            cells = [c.strip() for c in line[0].strip("|").split("|")]
            assert len(cells) == 2 + 4 + 1
            assert cells[-1] == "0", f"grammar violations: {line[0]}"
            timed = [r for r in report["rows"] if r["workload"] == workload and r["batch"] == batch]
            by_mode = {r["mode"]: r for r in timed}
            for m in modes:
                assert by_mode[m].get("tpot_ms", 0) > 0, (m, by_mode[m])
            if not have_upstream:
                assert "n/a" in cells[3]
    after = docs.stat().st_mtime_ns if docs.exists() else None
    assert before == after, "a tiny run must not write docs/benchmarks"
