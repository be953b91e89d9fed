"""Sharded tuning: ranks split the candidates, measure their share, and gather the times.

With ``shard = true`` and several ranks doing rank-independent work, N ranks
need not each measure every candidate: rank ``r`` measures the kept
candidates at positions ``r, r + N, r + 2N, ...`` and one ``gather`` at
SELECT gives every rank every time, so all pick alike. The ranks measure
apart, without the barrier before each candidate, and near ties are not
re-timed (their rounds would compare ranks' devices against each other).
The contextual tuner never shards: its ``is_dist`` takes the MAX over ranks
of the same work.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def share(items: Sequence[T], rank: int, world_size: int) -> list[T]:
    """The items rank ``rank`` of ``world_size`` measures."""
    return list(items[rank::world_size])


def gather_times(
    reducer: Any, local: Sequence[float], measured: Sequence[int]
) -> tuple[tuple[float, ...], tuple[int | None, ...]]:
    """Every candidate's time, from the rank that measured it, and that rank: one ``gather``.

    :param local: this rank's time for every candidate (``inf`` where it
        measured none, or the candidate failed).
    :param measured: the indices this rank measured.
    :returns: the times, and for each candidate the rank that measured it
        (``None``: no rank did).
    """
    mine = [[i, local[i] if math.isfinite(local[i]) else None] for i in measured]
    times = [math.inf] * len(local)
    owners: list[int | None] = [None] * len(local)
    for rank, rows in enumerate(reducer.gather(mine)):
        for index, value in rows:
            times[index] = math.inf if value is None else float(value)
            owners[index] = rank
    return tuple(times), tuple(owners)
