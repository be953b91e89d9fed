"""Rank contracts: how the ranks tuning together combine their timings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    pass
from kerneltune.core.plugin_system.contracts.base import Registrable


class Reducer(Registrable, Protocol):
    """How ranks exchange votes and timings; registered by ``kerneltune_register_reducers``.

    A thin transport: agreement, selection and persistence are the engine's.
    On a miss the engine calls :meth:`gather` once to agree; if the ranks then
    tune, :meth:`barrier` before each candidate, at REDUCE
    :meth:`GatheringReducer.gather_vector` once where the reducer has it and
    :meth:`max` once where it does not (an adaptive tuning :meth:`max` once
    more per round), and :meth:`gather` once more with ``verify_pick`` and
    once more with ``isolate = "subprocess"``. With ``world_size`` 1 it calls
    none of them.
    """

    #: This process's rank in the group; -1 outside it.
    rank: int
    #: The number of ranks in the group.
    world_size: int

    @classmethod
    def is_available(cls, group: Any = None) -> bool:
        """Whether ``auto`` may pick this reducer for ``group`` (``None``: the default group)."""
        ...

    def __init__(self, group: Any = None) -> None:
        """:param group: the ``autotune_pg`` a caller passed, or ``None`` for the default group.

        :raises kerneltune.core.PluginError: when it cannot run its
            collectives over exactly that group; it never falls back to another.
        """
        ...

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's small plain-data ``obj``, in rank order, on every rank."""
        ...

    def max(self, values: Sequence[float]) -> list[float]:
        """The element-wise maximum over ranks of a float vector, in one collective; ``inf`` survives."""
        ...

    def barrier(self) -> None:
        """Return once every rank of the group has called it."""
        ...


@runtime_checkable
class GatheringReducer(Reducer, Protocol):
    """A reducer that hands every rank's timing vector back (optional part of :class:`Reducer`).

    At REDUCE the engine then takes the maximum over ranks itself and keeps
    each rank's time of each candidate in the record. Without it the engine
    calls :meth:`Reducer.max` instead, and records keep no per-rank times.
    """

    def gather_vector(self, values: Sequence[float]) -> list[list[float]]:
        """Every rank's float vector, in rank order, on every rank, in one collective; ``inf`` survives.

        Every rank passes a vector of the same length.
        """
        ...


@runtime_checkable
class GlobalRankReducer(Reducer, Protocol):
    """A reducer that knows this process's rank in the whole job (optional part of :class:`Reducer`)."""

    #: The rank in the whole job, which names per-rank log files; without
    #: it the engine uses :attr:`Reducer.rank`.
    global_rank: int
