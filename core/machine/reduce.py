"""REDUCE: every candidate's time as the slowest rank measured it, and each rank's own.

:func:`reduce_measurements` takes a tuning's measurements to the times
every rank agrees on, with the evidence SELECT judges the pick by, in one
collective: the reducer's ``gather_vector`` where it has one (so the record
keeps each rank's time), else its ``max``; sharded, one ``gather`` of each
rank's share (:func:`gather_times`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs
from kerneltune.core.errors import PluginError
from kerneltune.core.machine.confidence import Evidence, error, untrusted_share
from kerneltune.core.plugin_system.contracts import GatheringReducer, Reducer, provides
from kerneltune.core.values.records import Measurement, spread


@attrs.frozen
class Reduced:
    """The agreed times (``times[i]``: candidate ``i``'s on its slowest rank) and each rank's.

    ``rank_times[i][r]`` is rank ``r``'s time of it (``inf``: failed or not measured there);
    empty on one rank, or with a reducer without ``gather_vector``.
    """

    times: tuple[float, ...]
    rank_times: tuple[tuple[float, ...], ...] = ()
    #: the ``extra`` values, each the largest any rank held.
    extra: tuple[float, ...] = ()


def reduce_times(reducer: Reducer, local: Sequence[float], extra: Sequence[float] = ()) -> Reduced:
    """REDUCE ``local`` (this rank's time of each candidate) over the reducer's ranks, in one collective.

    :param extra: more numbers whose largest over the ranks every rank needs
        (what SELECT judges the pick by), carried in the same collective.
    :raises PluginError: when the reducer's ``gather_vector`` hands back
        something other than one vector of the numbers given per rank.
    """
    values = [*local, *extra]
    count = len(local)
    if reducer.world_size <= 1:
        return Reduced(tuple(local), extra=tuple(extra))
    if not provides(reducer, GatheringReducer):
        agreed = tuple(float(v) for v in reducer.max(values))
        return Reduced(agreed[:count], extra=agreed[count:])
    rows = [[float(v) for v in row] for row in reducer.gather_vector(values)]
    if len(rows) != reducer.world_size or any(len(row) != len(values) for row in rows):
        raise PluginError(
            f"reducer {getattr(reducer, 'name', type(reducer).__name__)!r}: gather_vector returned "
            f"{len(rows)} vectors of lengths {sorted({len(row) for row in rows})}, expected "
            f"{reducer.world_size} of length {len(values)}"
        )
    columns = tuple(zip(*rows, strict=True)) if values else ()
    agreed = tuple(max(column) for column in columns)
    return Reduced(agreed[:count], columns[:count], agreed[count:])


@attrs.frozen
class Agreed:
    """What every rank agrees on after REDUCE.

    :ivar reduced: each candidate's slowest-rank time (and each rank's, where known).
    :ivar evidence: what SELECT judges the pick by, the slowest rank's numbers.
    :ivar elsewhere: ``(candidate, rank)`` for candidates another rank measured (sharded).
    :ivar owners: sharded, the rank that measured each candidate (``None``: none did); else empty.
    :ivar measurements: sharded, each candidate's measurement from the rank that took it
        (this rank's own where none did), for the record; else empty.
    """

    reduced: Reduced
    evidence: Evidence
    elsewhere: tuple[tuple[int, int], ...] = ()
    owners: tuple[int | None, ...] = ()
    measurements: tuple[Measurement, ...] = ()


def reduce_measurements(
    reducer: Reducer, measurements: Sequence[Measurement], *, rounds: int, sharded: Sequence[int] | None
) -> Agreed:
    """REDUCE: the agreed times of ``measurements`` (one per candidate) and SELECT's evidence.

    :param rounds: the most interleaved rounds the tuning queued (sizes the evidence).
    :param sharded: the candidates measured, when the ranks split them: their times are
        gathered from the rank that measured each; ``None``: every rank measured alike, and
        one collective takes the maximum of the times and the evidence together.
    """
    if sharded is not None:
        return gather_times(reducer, measurements, sharded)
    count = len(measurements)
    vector = Evidence.of(measurements, rounds).to_vector()
    reduced = reduce_times(reducer, vector[:count], vector[count:])
    return Agreed(reduced, Evidence.from_vector([*reduced.times, *reduced.extra], count))


def gather_times(reducer: Reducer, measurements: Sequence[Measurement], measured: Sequence[int]) -> Agreed:
    """Sharded REDUCE: every candidate's measurement from the rank that took it, in one ``gather``.

    Each rank sends its share's samples (or errors), so every rank derives the same times and
    evidence and stores the same record.

    :param measured: the indices this rank measured (of ``measurements``, one per candidate).
    """
    mine = [
        [i, list(m.samples), m.error, list(m.rounds), m.untrusted]
        for i in measured
        for m in [measurements[i]]
    ]
    size = len(measurements)
    times, errors, spreads, untrusted = [math.inf] * size, [0.0] * size, [0.0] * size, [0.0] * size
    owners: list[int | None] = [None] * size
    taken = list(measurements)
    for rank, rows in enumerate(reducer.gather(mine)):
        for index, samples, its_error, rounds, kept_untrusted in rows:
            m = Measurement(index, tuple(float(s) for s in samples), its_error, tuple(rounds), kept_untrusted)
            finite = math.isfinite(m.mean)
            times[index] = m.mean
            errors[index] = error(m.samples) if finite else 0.0
            spreads[index], owners[index], taken[index] = spread(m.samples), rank, m
            untrusted[index] = untrusted_share(m)
    evidence = Evidence(tuple(times), tuple(errors), tuple(spreads), ((),) * size, tuple(untrusted))
    elsewhere = tuple((i, r) for i, r in enumerate(owners) if r is not None and r != reducer.rank)
    return Agreed(Reduced(tuple(times)), evidence, elsewhere, tuple(owners), tuple(taken))
