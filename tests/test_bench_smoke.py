"""The GPU benchmarks' CPU smoke modes still run, so a bench that rots fails here, not on a lease.

Each runs under ``TRITON_INTERPRET=1`` in a fresh process, with its
``--out`` JSON checked for the figures BENCHMARKS.md quotes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_bench(script: str, *arguments: str, tmp_path: Path) -> dict:
    out = tmp_path / "out.json"
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--smoke", f"--out={out}", *arguments],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(out.read_text())


def test_warm_start_smoke_refines_every_pick_it_judges(tmp_path):
    result = run_bench("warm_start.py", tmp_path=tmp_path)
    assert result["refine"]["top"] == 4
    for row in result["rows"]:
        refined = {int(i) for i in row["refined_ms"]}
        assert {row["full"]["pick"], row["warm"]["pick"]} <= refined
        assert row["best"] in refined
    assert result["summary"]["warm_max_measured_after_first"] <= result["budget"]


def test_search_quality_smoke_judges_each_run_against_its_oracle(tmp_path):
    result = run_bench(
        "search_quality.py",
        "--kernels=reduction",
        "--strategies",
        "pattern",
        "--runs=2",
        "--cold-runs=1",
        tmp_path=tmp_path,
    )
    oracle = result["kernels"]["reduction"]["oracle"]
    runs = result["kernels"]["reduction"]["runs"]["pattern"]
    assert [run["cold"] for run in runs] == [True, False]
    assert all(oracle["table_ms"][run["pick"]] is not None for run in runs)
    assert all(run["times_ms"][run["pick"]] is not None for run in runs)
    (row,) = result["rows"]
    assert row["strategy"] == "pattern" and row["space"] == oracle["space"]
