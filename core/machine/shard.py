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

import attrs
from kerneltune.core.machine.confidence import error
from kerneltune.core.values.records import Measurement, spread

T = TypeVar("T")


def share(items: Sequence[T], rank: int, world_size: int) -> list[T]:
    """The items rank ``rank`` of ``world_size`` measures."""
    return list(items[rank::world_size])


@attrs.frozen
class Gathered:
    """What sharded ranks learn at SELECT: each candidate's time, its noise, and the rank that measured it.

    ``times[i]`` is ``inf`` where no rank measured candidate ``i`` or it
    failed; ``errors[i]`` and ``spreads[i]`` are its standard error and
    spread (0 where unknown); ``owners[i]`` the rank (``None``: no rank).
    """

    times: tuple[float, ...]
    errors: tuple[float, ...]
    spreads: tuple[float, ...]
    owners: tuple[int | None, ...]


def gather_times(reducer: Any, measurements: Sequence[Measurement], measured: Sequence[int]) -> Gathered:
    """Every candidate's time and noise, from the rank that measured it, and that rank: one ``gather``.

    :param measurements: this rank's measurement of every candidate (failed
        or not measured where it measured none).
    :param measured: the indices this rank measured.
    """
    mine = []
    for i in measured:
        m = measurements[i]
        finite = math.isfinite(m.mean)
        mine.append([i, m.mean if finite else None, error(m.samples) if finite else 0.0, spread(m.samples)])
    size = len(measurements)
    times, errors, spreads = [math.inf] * size, [0.0] * size, [0.0] * size
    owners: list[int | None] = [None] * size
    for rank, rows in enumerate(reducer.gather(mine)):
        for index, value, its_error, its_spread in rows:
            times[index] = math.inf if value is None else float(value)
            errors[index], spreads[index], owners[index] = float(its_error), float(its_spread), rank
    return Gathered(tuple(times), tuple(errors), tuple(spreads), tuple(owners))
