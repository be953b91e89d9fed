"""contextual_autotune(is_dist=True) with real torch.distributed ranks (gloo, two processes).

Each scenario runs tests/contextual_dist_worker.py once per rank under a hard
time limit: a rank that hangs in a collective fails the test instead of
blocking the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import ascend_stand_in
import pytest
from kerneltune.core.drivers.contextual import STALL_LIMIT

WORKER = Path(__file__).with_name("contextual_dist_worker.py")
RANK_TIMEOUT_S = 90
WORLD = 2

pytestmark = pytest.mark.dist


def run_ranks(scenario: str, tmp_path: Path) -> list[dict]:
    out = tmp_path / "out"
    out.mkdir()
    store = tmp_path / "store"
    # Interpreted kernels on CPU tensors, timed by the host clock, even where a GPU is present.
    env = {
        **os.environ,
        "TRITON_INTERPRET": "1",
        "KERNELTUNE_TIMER": "wallclock",
        "KERNELTUNE_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    ranks = [
        subprocess.Popen(
            [sys.executable, str(WORKER), scenario, str(rank), str(WORLD), str(store), str(out)],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(WORLD)
    ]
    outputs = []
    try:
        for process in ranks:
            outputs.append(process.communicate(timeout=RANK_TIMEOUT_S)[0])
    except subprocess.TimeoutExpired:
        pytest.fail(f"scenario {scenario!r}: a rank did not finish within {RANK_TIMEOUT_S} s (hang)")
    finally:
        for process in ranks:
            if process.poll() is None:
                process.kill()
                process.wait()
    results = []
    for rank, text in enumerate(outputs):
        path = out / f"rank-{rank}.json"
        assert path.is_file(), f"rank {rank} wrote no result:\n{text}"
        results.append(json.loads(path.read_text()))
    return results


def test_seed_example_on_two_ranks_agrees_and_logs_per_rank(tmp_path):
    results = run_ranks("seed", tmp_path)
    assert all("error" not in r for r in results), results
    assert all(r["correct"] for r in results)
    assert results[0]["pick"] == results[1]["pick"]
    assert results[0]["executions"] == results[1]["executions"] == 2 * (2 + 3) + 1
    for rank in range(WORLD):
        log = (tmp_path / ".autotune_logs" / f"rank-{rank}.log").read_text()
        assert "timed round 3/3" in log
        assert "over 2 rank(s)" in log


def test_the_slowest_rank_decides(tmp_path):
    results = run_ranks("slowest", tmp_path)
    assert all("error" not in r for r in results), results
    # Rank 1 alone would pick config 1 (2 ms < 4 ms); the max over ranks is 4 ms vs 5 ms.
    assert [r["pick"] for r in results] == [0, 0]


def test_ranks_pruning_differently_fail_on_every_rank_without_hanging(tmp_path):
    results = run_ranks("mismatch", tmp_path)
    for rank, result in enumerate(results):
        assert result.get("error", "").startswith("RankMismatchError"), (rank, result)
        # The message names every rank and what it kept.
        assert "rank 0" in result["error"] and "rank 1" in result["error"]


def test_a_key_that_changes_every_execution_fails_on_every_rank_without_hanging(tmp_path):
    results = run_ranks("stalled", tmp_path)
    for rank, result in enumerate(results):
        assert result.get("error", "").startswith("StalledTuningError"), (rank, result)
        assert "stepped_kernel" in result["error"]
        assert result["executions"] == 1 + STALL_LIMIT


def test_a_crash_in_one_ranks_isolation_worker_fails_the_config_on_every_rank(tmp_path):
    results = run_ranks("isolated", tmp_path)
    assert all("error" not in r for r in results), results
    assert all(r["correct"] for r in results)
    assert results[0]["pick"] == results[1]["pick"] in (16, 32)
    crashed = "ScreenedOut: crashed the isolation worker (signal 11)"
    assert [r["errors"] for r in results] == [
        {"16": None, "32": None, "64": f"{crashed} on rank 1"},
        {"16": None, "32": None, "64": crashed},
    ]
    assert [r["here"] for r in results] == [[16, 32], [16, 32]], "block 64 never ran in a rank"
    assert [r["worker"] for r in results] == [[16, 32, 64], [16, 32, 64]]


def where_made(scenario: str, missing: str | None, id: str):
    """``scenario``, skipped with why where this triton-ascend cannot make that tuner (``missing``)."""
    return pytest.param(scenario, marks=pytest.mark.skipif(missing is not None, reason=missing or ""), id=id)


@pytest.mark.parametrize(
    "scenario",
    [
        where_made("autotiling", ascend_stand_in.auto_tiling_by_hints_missing(), id="from-hints"),
        where_made(
            "autotiling_by_params", ascend_stand_in.auto_tiling_by_params_missing(), id="from-split-params"
        ),
    ],
)
def test_triton_ascends_auto_tiling_tuner_is_tuned_by_kerneltune_with_the_ranks_agreeing(tmp_path, scenario):
    results = run_ranks(scenario, tmp_path)
    assert all("error" not in r for r in results), results
    assert all(r["correct"] for r in results)
    # Its own tiles for this launch, generated alike on both ranks, and one pick for both.
    assert results[0]["configs"] == results[1]["configs"] == [{"BLOCK": 2048}, {"BLOCK": 1639}]
    assert results[0]["pick"] == results[1]["pick"]
    for rank in range(WORLD):
        log = (tmp_path / ".autotune_logs" / f"rank-{rank}.log").read_text()
        assert "kernel add_kernel" in log and "over 2 rank(s)" in log


def test_an_autotuner_class_the_adapter_does_not_know_is_refused_on_every_rank(tmp_path):
    results = run_ranks("unknown_tuner", tmp_path)
    for result in results:
        assert result["error"].startswith(
            "KernelTuneError: contextual_autotune(is_dist=True): outer launched"
        )
        assert "FirstConfigTuner has a run() of its own" in result["error"]


def test_twins_are_dropped_alike_on_every_rank(tmp_path):
    results = run_ranks("twins", tmp_path)
    assert all("error" not in r for r in results), results
    assert all(r["correct"] for r in results)
    assert [r["measured"] for r in results] == [[0, 2, 4, 6]] * WORLD
    assert [r["dropped"] for r in results] == [[1, 3, 5, 7]] * WORLD
    assert results[0]["pick"] == results[1]["pick"]


def test_a_rank_that_sees_no_twins_has_every_rank_measure_them_all_without_hanging(tmp_path):
    results = run_ranks("twins_split", tmp_path)
    assert all("error" not in r for r in results), results
    assert [r["measured"] for r in results] == [list(range(8))] * WORLD
    assert [r["dropped"] for r in results] == [[]] * WORLD
    assert results[0]["pick"] == results[1]["pick"]


def test_a_candidate_wrong_on_one_rank_alone_is_picked_by_no_rank(tmp_path):
    results = run_ranks("wrong_on_one_rank", tmp_path)
    assert all("error" not in r for r in results), results
    # Kernels of is_dist=True may talk to other ranks: checked only where the decorator asks.
    assert [r["unchecked_pick"] for r in results] == [1, 1]
    assert all(r["correct"] for r in results)
    # The fastest on both ranks, but wrong on rank 1's data: infinite there, and so over the ranks.
    assert [r["pick"] for r in results] == [0, 0]
    assert results[0]["wrong"] == []
    (message,) = results[1]["wrong"]
    assert "kernel clamped_double: 1 candidate(s)" in message and "argument y_ptr: " in message
