"""The host clock: right for work that finishes before the call returns (CPU)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from kerneltune.core import AlwaysAvailable, hookimpl


class WallclockTimer(AlwaysAvailable):
    """``time.perf_counter_ns`` around each call."""

    name: ClassVar[str] = "wallclock"
    auto_priority = 0

    def __init__(self) -> None:
        self._samples: list[float] = []

    def sample(self, fn: Callable[[], object], *, before: Callable[[], object] | None = None) -> None:
        """Run ``fn`` once and keep its duration; ``before`` runs first, off the clock."""
        if before is not None:
            before()
        start = time.perf_counter_ns()
        fn()
        self._samples.append((time.perf_counter_ns() - start) / 1e6)

    def collect(self) -> list[float]:
        """The samples since the last collect, in milliseconds."""
        samples, self._samples = self._samples, []
        return samples


@hookimpl
def kerneltune_register_timers(register):
    register(WallclockTimer)
