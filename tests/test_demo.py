"""demo.py, run as a user runs it: twice, in fresh processes, sharing one cache directory."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[1] / "demo.py"


def run_demo(device: str, cache: Path, **variables: str) -> str:
    """Run demo.py in a new interpreter; its stdout (the run must succeed)."""
    # One BLAS thread: when other processes share a 2-core machine,
    # two spinning OpenMP threads can make the CPU tuning ten times slower.
    env = dict(os.environ, TRITON_DIST_AUTOTUNE_CACHE_DIR=str(cache), OMP_NUM_THREADS="1", **variables)
    # The CPU workload launches no Triton kernel; the CUDA one must not be interpreted.
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run(
        [sys.executable, str(DEMO), "--device", device],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, f"demo.py failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def pick_line(output: str) -> str:
    """The demo's 'pick: ...' line."""
    picks = [line for line in output.splitlines() if line.startswith("pick: [")]
    assert len(picks) == 1, output
    return picks[0]


def check_tune_then_hit(device: str, function: str, cache: Path) -> None:
    first = run_demo(device, cache)
    assert "result matches the reference" in first
    assert re.search(r"^TUNED: measured [1-9]\d* candidates", first, re.MULTILINE), first
    assert "[kerneltune]" in first  # autotune_verbose printed the tuning's INFO lines
    stored = list((cache / function).glob("[0-9a-f]*.json"))
    assert len(stored) == 1
    assert f"cache file: {stored[0]}" in first

    second = run_demo(device, cache)
    assert "result matches the reference" in second
    assert f"LOADED from disk cache {stored[0]}: no measuring" in second, second
    assert "TUNED" not in second
    # No tuning ran: the only verbose line says where the pick came from.
    logged = [line for line in second.splitlines() if line.startswith("[kerneltune]")]
    assert len(logged) == 1 and "using the stored pick" in logged[0], second
    assert "from the json cache: no measuring" in logged[0]
    assert pick_line(second) == pick_line(first)


def test_demo_tunes_on_cpu_then_loads_the_pick(tmp_path):
    check_tune_then_hit("cpu", "panel_matmul", tmp_path / "demo-cache")
    # Host work is timed on the host, whatever device the machine has.
    (record,) = (tmp_path / "demo-cache" / "panel_matmul").glob("[0-9a-f]*.json")
    assert json.loads(record.read_text())["measured_with"]["objective"] == "wall"


def test_demo_says_when_it_re_checks_a_stored_pick_then_loads_it(tmp_path):
    cache = tmp_path / "demo-cache"
    run_demo("cpu", cache)
    marked = subprocess.run(
        [sys.executable, "-m", "kerneltune", "cache", "verify", "--dir", str(cache)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert marked.returncode == 0, marked.stderr
    second = run_demo("cpu", cache, KERNELTUNE_RECHECK="1")
    rechecked = r"^RE-CHECKED the stored pick head to head: measured [2-4] candidates"
    assert re.search(rechecked, second, re.M), second
    third = run_demo("cpu", cache, KERNELTUNE_RECHECK="1")
    if "the pick is uncertain" not in second:
        assert "LOADED from disk cache" in third and pick_line(third) == pick_line(second), third


@pytest.mark.gpu
def test_demo_tunes_the_triton_kernel_then_loads_the_pick(tmp_path):
    check_tune_then_hit("cuda", "scale", tmp_path / "demo-cache")
