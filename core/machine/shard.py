"""Sharded tuning: ranks split the candidates, measure their share, and gather the measurements.

With ``shard = true`` and several ranks doing rank-independent work, N ranks
need not each measure every candidate: rank ``r`` measures the kept
candidates at positions ``r, r + N, r + 2N, ...`` and one ``gather`` at
SELECT gives every rank every candidate's samples, so all pick alike and
store the same record. The ranks measure
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
    """What sharded ranks learn at SELECT: each candidate's measurement, its noise, and the rank that took it.

    ``times[i]`` is ``inf`` where no rank measured candidate ``i`` or it
    failed; ``errors[i]`` and ``spreads[i]`` are its standard error and
    spread (0 where unknown); ``owners[i]`` the rank (``None``: no rank);
    ``measurements[i]`` the owner's measurement, samples or error (this
    rank's own where no rank measured it), which every rank's record keeps.
    """

    times: tuple[float, ...]
    errors: tuple[float, ...]
    spreads: tuple[float, ...]
    owners: tuple[int | None, ...]
    measurements: tuple[Measurement, ...] = ()


def gather_times(reducer: Any, measurements: Sequence[Measurement], measured: Sequence[int]) -> Gathered:
    """Every candidate's measurement from the rank that took it, and that rank: one ``gather``.

    Each rank sends its share's samples (or errors), so that every rank
    derives the same times and noise from them and stores the same record,
    whichever rank measured its pick.

    :param measurements: this rank's measurement of every candidate (failed
        or not measured where it measured none).
    :param measured: the indices this rank measured.
    """
    mine = [
        [i, list(measurements[i].samples), measurements[i].error, list(measurements[i].rounds)]
        for i in measured
    ]
    size = len(measurements)
    times, errors, spreads = [math.inf] * size, [0.0] * size, [0.0] * size
    owners: list[int | None] = [None] * size
    taken = list(measurements)
    for rank, rows in enumerate(reducer.gather(mine)):
        for index, samples, its_error, rounds in rows:
            m = Measurement(index, tuple(float(s) for s in samples), its_error, tuple(rounds))
            finite = math.isfinite(m.mean)
            times[index] = m.mean
            errors[index] = error(m.samples) if finite else 0.0
            spreads[index], owners[index], taken[index] = spread(m.samples), rank, m
    return Gathered(tuple(times), tuple(errors), tuple(spreads), tuple(owners), tuple(taken))
