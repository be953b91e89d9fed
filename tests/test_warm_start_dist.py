"""Reuse and warm start over real torch.distributed: 2 and 4 ranks holding different records.

The ranks run tests/warm_start_worker.py (started as test_distributed.py
starts its worker, and killed the same way should they hang). Each rank
keeps a cache directory of its own, and some tune alone first, so the
ranks meet with different records; they must still measure the same
candidates, pick the same and never wait on each other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_distributed import BACKEND, _unavailable, spawn, values

pytestmark = pytest.mark.dist

WORKER = Path(__file__).with_name("warm_start_worker.py")
SCENARIOS = ["warm_start_agrees", "grown_list_reuses_one_ranks_record"]
# The votes; two rounds of three candidates head to head, a barrier before each; one MAX over
# them (had all three failed, every rank would measure the rest of the list); REDUCE.
WARM_COLLECTIVES = {"all_gather_object": 1, "all_reduce": 1, "all_gather": 1, "barrier": 6}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    done: dict[int, Any] = {}

    def get(world: int) -> list[dict[str, Any]]:
        reason = _unavailable(world)
        if reason:
            pytest.skip(reason)
        if world not in done:
            try:
                done[world] = spawn(
                    world, SCENARIOS, tmp_path_factory.mktemp(f"{BACKEND}-{world}-warm"), WORKER
                )
            except AssertionError as exc:
                done[world] = exc
        if isinstance(done[world], AssertionError):
            raise done[world]
        return done[world]

    return get


@pytest.mark.parametrize("world", [2, 4])
def test_ranks_with_different_neighbours_warm_start_from_the_lowest_ranks(outcomes, world):
    results = values(outcomes(world), "warm_start_agrees")
    first = results[0]
    # Rank 0 holds key 64 (pick n=3): its pick and the two best of its other stored times, n=2
    # and n=4 (5 ms behind it, n=1 and n=5 10 ms); the last rank's key 512 would have started
    # elsewhere.
    assert first["measured"] == [2, 3, 4]
    assert first["pick"] == 4
    assert first["warm_start"]["from"] == 64
    for result in results:
        assert result["measured"] == first["measured"]
        assert result["pick"] == first["pick"]
        assert result["warm_start"] == first["warm_start"]
        assert result["calls"] == first["calls"]
        assert result["collectives"]["counts"] == WARM_COLLECTIVES


@pytest.mark.parametrize("world", [2, 4])
def test_a_grown_list_reuses_the_record_only_one_rank_holds_on_every_rank(outcomes, world):
    results = values(outcomes(world), "grown_list_reuses_one_ranks_record")
    assert results[0]["seeded"] == 3
    for result in results:
        # The stored pick n=3 and the new n=6, two rounds head to head; n=1, 2, 4 reused.
        assert result["measured"] == [3, 6]
        assert result["pick"] == 3
        head_to_head = {"all_gather_object": 1, "all_reduce": 1, "all_gather": 1, "barrier": 4}
        assert result["collectives"]["counts"] == head_to_head
        assert result["carried"] == [0, 1, 3]
        assert result["labels"] == ["n=<1>", "n=<2>", "n=<3>", "n=<4>", "n=<6>"]
