"""search_params over two real gloo ranks: one search, one pick, whatever each rank measured."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch.distributed as dist

pytestmark = pytest.mark.dist

WORKER = Path(__file__).with_name("search_params_dist_worker.py")
JOIN_TIMEOUT_S = 120


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("gloo is not available")
    run_dir = tmp_path_factory.mktemp("search-params-dist")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELTUNE_", "TRITON_DIST_AUTOTUNE_"))}
    env |= {
        "KERNELTUNE_DISABLE_PLUGIN_AUTOLOAD": "1",
        "TRITON_DIST_AUTOTUNE_CACHE_DIR": str(run_dir / "cache"),
        "GLOO_SOCKET_IFNAME": "lo",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(WORKER.parent), env.get("PYTHONPATH", "")]),
    }
    port = str(free_port())
    outs = [run_dir / f"rank{rank}.json" for rank in range(2)]
    ranks = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(rank), "2", port, str(outs[rank])],
            env=env,
            cwd=run_dir,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(2)
    ]
    logs = []
    for process in ranks:
        try:
            logs.append(process.communicate(timeout=JOIN_TIMEOUT_S)[0])
        except subprocess.TimeoutExpired:
            for other in ranks:
                other.kill()
            pytest.fail("a rank hung")
    for process, log in zip(ranks, logs, strict=True):
        assert process.returncode == 0, log
    return [json.loads(out.read_text()) for out in outs]


def test_both_ranks_search_the_same_points_and_pick_by_the_slowest_rank(outcomes):
    first, second = (o["plain"] for o in outcomes)
    # Alone, rank 0 would pick 16 and rank 1 would pick 64; the MAX over ranks favours 32.
    assert first["pick"] == second["pick"] == 32
    assert first["launched"] == second["launched"]
    assert first["correct"] and second["correct"]


def test_a_finalist_rejected_on_one_rank_is_rejected_on_all(outcomes):
    first, second = (o["gated"] for o in outcomes)
    assert first["pick"] == second["pick"] == 16
    assert first["correct"] and second["correct"]


def test_a_candidate_the_check_rejects_on_one_rank_is_dropped_on_all(outcomes):
    first, second = (o["checked"] for o in outcomes)
    assert first["pick"] == second["pick"] != 32
    assert first["correct"] and second["correct"]
    # Rejected at its first run on rank 1, infinite on both: neither re-times it as a finalist.
    assert first["runs"].count(32) == second["runs"].count(32) == 1
