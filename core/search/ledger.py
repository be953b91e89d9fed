"""The bookkeeping every search strategy needs: what was measured, and what the budget leaves.

A :class:`SearchLedger` wraps the measure function a strategy is handed
(:mod:`kerneltune.core.values.geometry`): it measures only points not measured
before, never more than the point cap allows, and starts no round once the
wall-clock budget is spent. The built-in strategies measure through one, so
they honour a budget alike; a third-party strategy may use it too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

from kerneltune.core.values.geometry import Measure, Point, SearchBudget

#: With a wall-clock budget, a batch is measured in rounds of at most this
#: many points, so the budget is looked at between them: one round of the
#: whole space could otherwise overrun it by the whole space.
TIMED_ROUND = 32


class SearchLedger:
    """Every point measured so far with its agreed time (``inf``: failed, dropped or out of resources).

    :param measure: the strategy's measure function.
    :param budget: the search's budget: its point cap and seconds.
    :param cap: a cap of the strategy's own (from its effort, say); the lower
        of it and the budget's applies.
    """

    def __init__(self, measure: Measure, budget: SearchBudget, *, cap: int | None = None) -> None:
        self._measure = measure
        self.budget = budget
        caps = [c for c in (budget.max_points, cap) if c is not None]
        #: the most distinct points this ledger measures (``None``: no cap).
        self.cap: int | None = min(caps) if caps else None
        #: every point measured, in the order measured.
        self.times: dict[Point, float] = {}
        #: how many rounds the measure function was called for.
        self.rounds = 0

    def __len__(self) -> int:
        return len(self.times)

    def __contains__(self, point: object) -> bool:
        return point in self.times

    @property
    def counted(self) -> int:
        """Points measured that count against the cap: every one but the twins.

        A twin (a point that launches the program of one measured before it)
        got that point's time and cost no measurement; the measure function
        kerneltune hands a strategy names them in its ``twins``.
        """
        twins = getattr(self._measure, "twins", ())
        return len(self.times) - sum(1 for p in twins if p in self.times)

    @property
    def left(self) -> int | None:
        """Points the cap still allows (``None``: no cap)."""
        return None if self.cap is None else max(0, self.cap - self.counted)

    @property
    def spent(self) -> bool:
        """Whether the budget allows no further measurement: the cap is reached or the time is up."""
        return self.left == 0 or self.budget.expired()

    def why_spent(self) -> str | None:
        """What stopped the search, for messages; ``None`` while the budget lasts."""
        if self.left == 0:
            return f"point cap of {self.cap} reached"
        if self.budget.expired():
            return f"wall-clock budget of {self.budget.seconds:g} s spent"
        return None

    def measure(self, points: Iterable[Point]) -> list[Point]:
        """Measure those of ``points`` not measured yet, in their order; the points measured.

        Repeats and known points are skipped; past the cap the rest are
        left out, so a strategy lists the points it wants most first. Twins
        (:attr:`counted`) leave room under the cap for more of the points.
        With a wall-clock budget the batch goes in rounds of at most
        :data:`TIMED_ROUND` points and no round starts once it is spent.
        """
        todo = [p for p in dict.fromkeys(points) if p not in self.times]
        measured: list[Point] = []
        while todo:
            # Twins found in a batch leave room under the cap: the rest of the points go in another.
            left = self.left
            batch_todo = todo if left is None else todo[:left]
            todo = todo[len(batch_todo) :]
            if not batch_todo or not self._take(batch_todo, measured):
                break
        return measured

    def _take(self, todo: list[Point], measured: list[Point]) -> bool:
        """Measure ``todo`` in rounds into :attr:`times`, adding them to ``measured``; whether all were."""
        for batch in self._rounds(todo):
            if self.budget.expired():
                return False
            result = self._measure(batch)
            self.rounds += 1
            for point in batch:
                self.times[point] = float(result.get(point, math.inf))
            measured.extend(batch)
        return True

    def ahead(self, points: Iterable[Point]) -> None:
        """Say which points the strategy expects to measure after the next :meth:`measure`.

        Call it just before that :meth:`measure`: the run may compile these
        while that batch compiles, and a later batch that holds them waits
        less. Nothing is measured or counted against the cap; points measured
        already and those past the cap are left out. A measure function
        without ``ahead`` (one a test hands in) ignores it.
        """
        tell = getattr(self._measure, "ahead", None)
        if tell is None or self.spent:
            return
        todo = [p for p in dict.fromkeys(points) if p not in self.times]
        left = self.left
        if left is not None:
            todo = todo[:left]
        if todo:
            tell(todo)

    def _rounds(self, todo: list[Point]) -> Iterator[list[Point]]:
        size = TIMED_ROUND if self.budget.seconds is not None else len(todo)
        for start in range(0, len(todo), size):
            yield todo[start : start + size]

    def time(self, point: Point) -> float:
        """A point's time; ``inf`` when it failed or was not measured."""
        return self.times.get(point, math.inf)

    def ranked(self, points: Iterable[Point] | None = None) -> list[Point]:
        """Those of ``points`` (default: every point measured) that ran, fastest first, ties by point."""
        chosen = self.times if points is None else [p for p in dict.fromkeys(points) if p in self.times]
        return sorted((p for p in chosen if math.isfinite(self.times[p])), key=lambda p: (self.times[p], p))

    def best(self, points: Iterable[Point] | None = None) -> Point | None:
        """The fastest of ``points`` that ran (default: of all), or ``None``."""
        ranked = self.ranked(points)
        return ranked[0] if ranked else None
