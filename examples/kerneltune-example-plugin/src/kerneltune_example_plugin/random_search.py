"""An example third-party search strategy: uniform random sampling of the space.

A baseline to compare real strategies with, and the smallest complete
strategy plugin: a class with ``name``, ``is_available`` and ``search``,
handed to kerneltune through ``kerneltune_register_search_strategies``.
Select it by name: ``search_strategy = "example-random"`` in a config file,
or ``"strategy": "example-random"`` in a kernel's ``search_params`` hint.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import ClassVar

from kerneltune.core import Measure, Point, SearchBudget, SearchGeometry, SearchLedger, hookimpl

__all__ = ["RandomSearch", "kerneltune_register_search_strategies"]

#: The share of the space sampled at each effort.
SHARES = {"quick": 0.05, "default": 0.1, "full": 0.25}


class RandomSearch:
    """Measure a random sample of the space, the seeds first; the fastest are the finalists.

    The sample comes from a fixed seed, so every rank of a distributed
    search draws the same points: a strategy must take the same decisions
    everywhere.
    """

    name: ClassVar[str] = "example-random"
    # Below every built-in: ``auto`` must never prefer a baseline.
    auto_priority = -1

    @classmethod
    def is_available(cls) -> bool:
        """Always: it needs only the standard library."""
        return True

    def search(
        self,
        geometry: SearchGeometry,
        measure: Measure,
        budget: SearchBudget,
        say: Callable[[str], None],
    ) -> list[Point]:
        """Sample ``SHARES[budget.effort]`` of the space (at least one point per profile) in one round.

        :param geometry: the space to sample.
        :param measure: kerneltune's measure function: a batch of points in,
            each point's agreed time out (``inf`` for one that did not run).
        :param budget: the effort and caps to honour; the ledger applies the caps.
        :param say: prints a line under the kernel's ``debug`` hint.
        :returns: the ``budget.finalists`` fastest points measured.
        """
        ledger = SearchLedger(measure, budget)
        points = list(geometry.points())
        count = max(len(geometry.profiles), math.ceil(SHARES[budget.effort] * len(points)))
        sample = random.Random(0).sample(points, min(count, len(points)))
        seeded = [(seed, profile) for seed in geometry.seeds for profile in geometry.probes]
        ledger.measure([*seeded, *sample])
        say(f"example-random: {len(ledger)} of {len(points)} points measured")
        return ledger.ranked()[: budget.finalists]


@hookimpl
def kerneltune_register_search_strategies(register: Callable[[type], None]) -> None:
    """Offer :class:`RandomSearch` to kerneltune.

    :param register: kerneltune's registration callback.
    """
    register(RandomSearch)
