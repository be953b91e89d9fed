"""The ``exhaustive`` search strategy: every point of the space.

The reference the other strategies are judged against, and the right
choice for a space small enough to measure whole. Effort changes nothing;
the point cap and the wall-clock budget stop it early, in which case it
has measured the space in its own order: the probe profiles of every shape
first (the points the family expects to run best), then the rest, so a cut
budget still leaves a fair view of every shape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from kerneltune.core import Measure, Point, SearchBudget, SearchGeometry, SearchLedger, hookimpl


class ExhaustiveStrategy:
    """``exhaustive``: measure every point; the fastest are the finalists."""

    name: ClassVar[str] = "exhaustive"
    # Never taken by "auto": it costs the whole space.
    auto_priority = -10

    @classmethod
    def is_available(cls) -> bool:
        """Always: it needs nothing but the times it is handed."""
        return True

    def search(
        self, geometry: SearchGeometry, measure: Measure, budget: SearchBudget, say: Callable[[str], None]
    ) -> list[Point]:
        """Measure the whole space (or what the budget allows); the ``budget.finalists`` fastest points."""
        ledger = SearchLedger(measure, budget)
        first = [(shape, probe) for shape in geometry.shapes() for probe in geometry.probes]
        say(f"exhaustive: {geometry.space_size} points, {budget.describe()}")
        ledger.measure([*first, *geometry.points()])
        reason = ledger.why_spent()
        failed = sum(1 for time in ledger.times.values() if time == float("inf"))
        stopped = f"; stopped: {reason}" if reason is not None else ""
        say(f"exhaustive: {len(ledger)} of {geometry.space_size} measured, {failed} without a time{stopped}")
        return ledger.ranked()[: budget.finalists]


@hookimpl
def kerneltune_register_search_strategies(register):
    register(ExhaustiveStrategy)
