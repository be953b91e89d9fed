"""Where a search strategy meets a run: the measure function it is handed, and its finalists checked.

A strategy is a plugin: every point it asks to measure or names as a
finalist must be a ``(shape, profile)`` point of the space, and its measure
function binds the search's budget whatever route it takes. A wrong answer
is a :class:`PluginError` naming the strategy's plugin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kerneltune.core import BudgetSpent, PluginError, Point, SearchBudget, SearchGeometry, SearchStrategy
from kerneltune.core.driving import SearchTuning

#: Measures a round of points the run has not measured yet; every rank's agreed time of each.
RoundMeasure = Callable[[list[Point]], dict[Point, float]]


def is_point(point: Any) -> bool:
    """``(shape, profile)``: a tuple of ints and an int, none of them a bool; negative ones are no index."""
    if not isinstance(point, tuple) or len(point) != 2:
        return False
    shape, profile = point
    return (
        isinstance(shape, tuple)
        and all(type(i) is int and i >= 0 for i in shape)
        and type(profile) is int
        and profile >= 0
    )


class BoundedMeasure:
    """What a strategy calls to measure (``measure(points)``) and to say what it will ask next (``ahead``).

    :ivar twins: the points measured so far that launch the program of a point measured before them
        (``Tuning.twins``): each got that point's time, and none counts against a point cap.
    """

    def __init__(
        self,
        measure: Callable[[Any], dict[Point, float]],
        ahead: Callable[[Any], None],
        twins: set[Point],
    ) -> None:
        self._measure = measure
        #: takes the points the strategy expects to measure next (``SearchLedger.ahead`` calls it).
        self.ahead = ahead
        self.twins = twins

    def __call__(self, points: Any) -> dict[Point, float]:
        """Every rank's agreed time of each of ``points`` (see :meth:`StrategySeam.bounded`)."""
        return self._measure(points)


class StrategySeam:
    """One strategy's calls into one run of ``kernel``, over ``geometry``.

    :param tuning: the run's tuning, which names the strategy's plugin.
    :param finalists: how many finalists the run takes at most.
    """

    def __init__(
        self,
        strategy: SearchStrategy,
        tuning: SearchTuning,
        geometry: SearchGeometry,
        kernel: str,
        finalists: int,
    ) -> None:
        self.strategy = strategy
        self.tuning = tuning
        self.geometry = geometry
        self.kernel = kernel
        self.finalists = finalists

    def named(self) -> str:
        """``plugin NAME (...): search strategy 'NAME'``, for errors."""
        return f"{self.tuning.origin(self.strategy)}: search strategy {self.strategy.name!r}"

    def bounded(
        self,
        measure: RoundMeasure,
        budget: SearchBudget,
        ahead: Callable[[list[Point]], None] = lambda points: None,
        twins: set[Point] | None = None,
    ) -> BoundedMeasure:
        """The measure function the strategy is handed: points checked, the budget bound, repeats not re-run.

        Its ``ahead(points)`` hands ``ahead`` the points the strategy expects to measure next, checked.

        :param twins: filled by ``measure`` with the points that were twins (see :class:`BoundedMeasure`):
            the point cap counts the others.
        :raises PluginError: for something that is no list of points of the space.
        :raises BudgetSpent: once the point cap or the wall-clock budget allows nothing more.
        """
        known: dict[Point, float] = {}
        twins = set() if twins is None else twins

        def measure_points(points: Any) -> dict[Point, float]:
            listed = self.points(points, "measure")
            counted = len(known) - len(twins)
            # Once nothing more may be measured, every call stops the strategy, a call for points it
            # has already had too: a strategy that never looks at its budget must still end.
            if budget.max_points is not None and counted >= budget.max_points:
                raise BudgetSpent(f"point cap of {budget.max_points} reached")
            if budget.expired():
                raise BudgetSpent(f"wall-clock budget of {budget.seconds:g} s spent")
            if len(known) == self.geometry.space_size:
                raise BudgetSpent("every point of the space is measured")
            fresh = [p for p in dict.fromkeys(listed) if p not in known]
            if budget.max_points is not None:
                fresh = fresh[: budget.max_points - counted]
            if fresh:
                known.update(measure(fresh))
            return {p: known[p] for p in listed if p in known}

        def expect(points: Any) -> None:
            listed = self.points(points, "compile ahead")
            ahead([p for p in dict.fromkeys(listed) if p not in known])

        return BoundedMeasure(measure_points, expect, twins)

    def points(self, points: Any, asked: str) -> list[Point]:
        """``points`` as a list, each a point of the space.

        :raises PluginError: naming the strategy's plugin and what it ``asked``, for anything else.
        """
        listed = list(points) if isinstance(points, list | tuple) else None
        if listed is None or not all(is_point(p) and self.geometry.holds(p) for p in listed):
            raise PluginError(
                f"{self.named()} asked {self.kernel} to {asked} {points!r}, which is not a "
                "list of (shape, profile) points of its space"
            )
        return listed

    def checked(self, finalists: Any) -> list[Point]:
        """The strategy's finalists, each once, at most as many as asked for.

        :raises PluginError: naming the strategy's plugin, for an answer that
            is no list, or a finalist that is not a point of the space.
        """
        if not isinstance(finalists, list | tuple):
            raise PluginError(
                f"{self.named()} returned {finalists!r} for {self.kernel}; a strategy returns a list of "
                "points"
            )
        kept: list[Point] = []
        for point in finalists:
            if not (is_point(point) and self.geometry.holds(point)):
                raise PluginError(
                    f"{self.named()} returned {point!r} as a finalist of {self.kernel}, which is not a "
                    "(shape, profile) point of its space"
                )
            if point not in kept:
                kept.append(point)
        return kept[: self.finalists]
