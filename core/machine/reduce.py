"""REDUCE: every candidate's time as the slowest rank measured it, and each rank's own.

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
from kerneltune.core.plugin_system.contracts import GatheringReducer, Reducer, provides


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
