"""Checked outputs over real torch.distributed (gloo, 2 ranks): ranks agree on the verdict.

The ranks run tests/checked_ranks_worker.py, started as test_distributed.py
starts its worker. A candidate whose output is wrong on one rank alone is
dropped on that rank; by the MAX of REDUCE it is infinite on every rank, so
none picks it and all pick the same; that holds where the wrong one is the
reference the others agree against there, too. test_distributed.py's
``wrong_on_one_rank`` has a candidate wrong on one rank at 2 and 4 ranks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_distributed import BACKEND, _unavailable, spawn, values

pytestmark = pytest.mark.dist

WORKER = Path(__file__).with_name("checked_ranks_worker.py")
SCENARIOS = ["reference_wrong_on_last_rank", "candidate_wrong_on_first_rank"]
WORLD = 2


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> list[dict[str, Any]]:
    reason = _unavailable(WORLD)
    if reason:
        pytest.skip(reason)
    return spawn(WORLD, SCENARIOS, tmp_path_factory.mktemp(f"{BACKEND}-{WORLD}-checked"), WORKER)


def test_a_reference_wrong_on_one_rank_is_dropped_on_every_rank(outcomes):
    results = values(outcomes, "reference_wrong_on_last_rank")
    assert [r["pick"] for r in results] == [2, 2]
    assert [r["result"] for r in results] == [28.0, 28.0]
    # Rank 0 wrote the record: config 0 ran right there, and is infinite all the same.
    times = [row["time_ms"] for row in results[0]["rows"]]
    assert times[0] is None and None not in times[1:]
    assert results[0]["rows"][0]["error"] is None
    assert results[0]["warnings"] == []
    (warning,) = results[1]["warnings"]
    assert "the reference [0] cfg=<0> looks wrong for key 8: the 3 other candidates" in warning


def test_a_candidate_wrong_on_one_rank_is_picked_by_none(outcomes):
    results = values(outcomes, "candidate_wrong_on_first_rank")
    assert [r["pick"] for r in results] == [2, 2]
    assert [r["result"] for r in results] == [28.0, 28.0]
    times = [row["time_ms"] for row in results[0]["rows"]]
    assert times[3] is None and None not in times[:3]
    error = results[0]["rows"][3]["error"]
    assert error.startswith("WrongOutput: differs from the reference [0] cfg=<0>: result")
    (warning,) = results[0]["warnings"]
    assert "[3] cfg=<3>: result: 1 of 1 values off, largest absolute error 7," in warning
    assert results[1]["warnings"] == []
