"""An example third-party kerneltune plugin: a process CPU-time timer.

The module itself is the plugin object: kerneltune loads it through the
``kerneltune`` entry-point group and calls its hook implementations.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from kerneltune.core import hookimpl

__all__ = ["CpuTimeTimer", "kerneltune_register_timers"]


class CpuTimeTimer:
    """Time each run by the CPU time this process uses, not by the wall clock.

    Useful for CPU-bound candidates on a busy machine: time spent descheduled
    or blocked does not count. Work done by other processes or by devices is
    invisible to it.
    """

    name: ClassVar[str] = "example-cputime"
    # Below every built-in timer: ``auto`` must never prefer a timer that
    # cannot see device work; this one is used only when selected by name.
    auto_priority = -1

    @classmethod
    def is_available(cls) -> bool:
        """Always: every supported platform reports process CPU time."""
        return True

    def __init__(self) -> None:
        self._samples: list[float] = []

    def sample(self, fn: Callable[[], object], *, before: Callable[[], object] | None = None) -> None:
        """Run ``fn`` once and keep the CPU time it took.

        :param fn: one run of the candidate.
        :param before: set-up to run first, outside the measurement.
        """
        if before is not None:
            before()
        start = time.process_time_ns()
        fn()
        self._samples.append((time.process_time_ns() - start) / 1e6)

    def collect(self) -> list[float]:
        """Return the samples taken since the last call, in milliseconds.

        :returns: one CPU-time duration per :meth:`sample` call, in order.
        """
        samples, self._samples = self._samples, []
        return samples


@hookimpl
def kerneltune_register_timers(register: Callable[[type], None]) -> None:
    """Offer :class:`CpuTimeTimer` to kerneltune.

    :param register: kerneltune's registration callback.
    """
    register(CpuTimeTimer)
