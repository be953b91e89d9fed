"""Ranks as threads of one process: a counting reducer double for engine tests.

:class:`ThreadGroup` plays a process group of ``size`` ranks; each rank's
thread passes ``group.member(rank)`` where a real caller passes
``autotune_pg``. The ``threads`` reducer (registered by :data:`plugin`, with
``gathering-threads``, which adds the optional ``gather_vector``)
exchanges data through shared slots, copies every payload through JSON so only
plain data crosses ranks (as with torch.distributed), and counts each
collective per rank. A collective that not every rank joins breaks the
group's barrier after a few seconds instead of hanging the test.

A driver that passes no group (a search_params kernel) reaches the same
reducer through :func:`act_as`, which makes a thread play one rank.
"""

from __future__ import annotations

import json
import threading
import types
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from kerneltune.core import PluginError, hookimpl

HANG_SECONDS = 5.0

_acting = threading.local()


def act_as(handle: RankHandle | None) -> None:
    """Make this thread's reducer, where a driver passes no group, ``handle``'s rank's (``None``: none)."""
    _acting.handle = handle


class ThreadGroup:
    """A process group of ``size`` thread-ranks, with per-rank collective counts."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.counts = [Counter() for _ in range(size)]
        self._barrier = threading.Barrier(size, timeout=HANG_SECONDS)
        self._slots: list[Any] = [None] * size

    def member(self, rank: int) -> RankHandle:
        """What rank ``rank`` passes as ``autotune_pg``."""
        return RankHandle(self, rank)

    def exchange(self, rank: int, payload: Any) -> list[Any]:
        self._slots[rank] = json.dumps(payload, allow_nan=False)
        self._barrier.wait()
        gathered = [json.loads(slot) for slot in self._slots]
        # Nobody may overwrite a slot before every rank has read them all.
        self._barrier.wait()
        return gathered

    def wait(self) -> None:
        self._barrier.wait()

    def reset_counts(self) -> None:
        for counter in self.counts:
            counter.clear()


class RankHandle:
    """One rank's view of a :class:`ThreadGroup`."""

    def __init__(self, group: ThreadGroup, rank: int) -> None:
        self.group = group
        self.rank = rank


class ThreadReducer:
    """The reducer for :class:`RankHandle` groups; counts gather, max and barrier calls."""

    name = "threads"
    auto_priority = 100

    @classmethod
    def is_available(cls, group: Any = None) -> bool:
        return isinstance(group, RankHandle) or (
            group is None and getattr(_acting, "handle", None) is not None
        )

    def __init__(self, group: Any = None) -> None:
        if group is None:
            group = getattr(_acting, "handle", None)
        if not isinstance(group, RankHandle):
            raise PluginError(f"reducer 'threads' needs a RankHandle, got {group!r}")
        self._handle = group
        self.rank = group.rank
        self.world_size = group.group.size
        self.global_rank = group.rank

    def _count(self, op: str) -> None:
        self._handle.group.counts[self.rank][op] += 1

    def gather(self, obj: Any) -> list[Any]:
        self._count("gather")
        return self._handle.group.exchange(self.rank, obj)

    def max(self, values: Sequence[float]) -> list[float]:
        self._count("max")
        # JSON has no infinity: carry it as None.
        rows = self._handle.group.exchange(self.rank, [None if v == float("inf") else v for v in values])
        return [max(float("inf") if v is None else v for v in column) for column in zip(*rows, strict=True)]

    def barrier(self) -> None:
        self._count("barrier")
        self._handle.group.wait()


class GatheringThreadReducer(ThreadReducer):
    """The ``threads`` reducer with the optional ``gather_vector``: every rank's vector, one exchange."""

    name = "gathering-threads"
    auto_priority = 0

    def gather_vector(self, values: Sequence[float]) -> list[list[float]]:
        self._count("gather_vector")
        rows = self._handle.group.exchange(self.rank, [None if v == float("inf") else v for v in values])
        return [[float("inf") if v is None else v for v in row] for row in rows]


plugin = types.ModuleType("tests_thread_reducer")
plugin.kerneltune_register_reducers = hookimpl(
    lambda register: [register(ThreadReducer), register(GatheringThreadReducer)]
)


def run_ranks(size: int, body: Callable[[int], Any]) -> list[Any]:
    """Run ``body(rank)`` on ``size`` threads; each result, or the exception it raised."""
    results: list[Any] = [None] * size

    def run(rank: int) -> None:
        try:
            results[rank] = body(rank)
        except BaseException as exc:
            results[rank] = exc

    threads = [threading.Thread(target=run, args=(rank,), daemon=True) for rank in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=4 * HANG_SECONDS)
    stuck = [rank for rank, thread in enumerate(threads) if thread.is_alive()]
    assert not stuck, f"ranks {stuck} never finished"
    return results
