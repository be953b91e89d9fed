"""REDUCE: every candidate's time as the slowest rank measured it, and each rank's own.

:func:`reduce_measurements` takes a tuning's measurements to the times
every rank agrees on, with the evidence SELECT judges the pick by, in one
collective (sharded ranks gather each candidate from the rank that took it).

One collective carries the whole timing vector. A reducer with
``gather_vector`` (:class:`~kerneltune.core.plugin_system.contracts.GatheringReducer`)
hands back every rank's vector, and the maximum is taken here, so the record
can keep each rank's time; a reducer with only ``max`` gives the maximum
alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from kerneltune.core.errors import PluginError
from kerneltune.core.machine.confidence import Evidence
from kerneltune.core.machine.shard import gather_times
from kerneltune.core.plugin_system.contracts import GatheringReducer, Reducer, provides
from kerneltune.core.values.records import Measurement


@attrs.frozen
class Reduced:
    """The agreed times and, where the reducer gave them, each rank's.

    ``times[i]`` is candidate ``i``'s time on its slowest rank;
    ``rank_times[i][r]`` rank ``r``'s time of it (``inf``: failed or not
    measured there). ``rank_times`` is empty when the ranks' own times are
    not known: one rank, or a reducer without ``gather_vector``.
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
    count = len(measurements)
    if sharded is not None:
        gathered = gather_times(reducer, measurements, sharded)
        evidence = Evidence(gathered.times, gathered.errors, gathered.spreads, ((),) * count)
        here = reducer.rank
        elsewhere = tuple((i, r) for i, r in enumerate(gathered.owners) if r is not None and r != here)
        return Agreed(Reduced(gathered.times), evidence, elsewhere, gathered.owners, gathered.measurements)
    vector = Evidence.of(measurements, rounds).to_vector()
    reduced = reduce_times(reducer, vector[:count], vector[count:])
    return Agreed(reduced, Evidence.from_vector([*reduced.times, *reduced.extra], count))
