"""A new accelerator for kerneltune in one plugin module: the toy device and its timer.

The toy device stands in for real hardware on any machine: its memory is the
host's, it has :data:`UNITS` units that are numbers this process keeps, and
work on it is done when its call returns. Everything a real accelerator's
plugin provides is here, and kerneltune's engine needs nothing else to tune
on it:

* :class:`ToyDevice` (``kerneltune_register_devices``): which tensors are
  its, its current unit, waiting, a health check and the facts that key its
  picks;
* :class:`ToyTimer` (``kerneltune_register_timers``): names the device it
  times (``device = "toy"``), so selecting ``timer = "toy-clock"`` makes
  ``toy`` the session's device, and the session hands the timer its
  instance.

With ``isolate = "subprocess"`` the worker process runs on the toy device:
it is given :class:`ToyDevice` and the unit, sets the unit, synchronises after
each candidate and checks the device's health. A candidate can break the
unit it runs on with :func:`fault`, as a kernel's illegal address breaks a
GPU's context; the health check then reports it and the candidate is
screened out.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

from kerneltune.core import hookimpl

__all__ = [
    "UNITS",
    "ToyDevice",
    "ToyTimer",
    "current_unit",
    "fault",
    "kerneltune_register_devices",
    "kerneltune_register_timers",
]

#: How many units the toy device has.
UNITS = 2

# The device's state in this process: its current unit, and the units broken by fault().
_current = [0]
_faulted: set[int] = set()


def current_unit() -> int:
    """The unit this process's toy work goes to (what a kernel library would read)."""
    return _current[0]


def fault() -> None:
    """Break the current unit, as a faulting kernel breaks a GPU's context: every later check fails."""
    _faulted.add(_current[0])


class ToyDevice:
    """The toy accelerator: host memory, :data:`UNITS` units, nothing left running after a call."""

    name: ClassVar[str] = "toy"
    # Never chosen over the built-ins; a session runs on it when its timer, toy-clock, is selected.
    auto_priority = -1
    # Its tensors are host tensors, which the isolation worker is sent as copies.
    shares_memory: ClassVar[bool] = False

    @classmethod
    def is_available(cls) -> bool:
        """Always: the toy device needs nothing but the host."""
        return True

    def owns(self, tensor: Any) -> bool:
        """Host tensors: the toy device's memory is the host's."""
        return getattr(getattr(tensor, "device", None), "type", None) == "cpu"

    def index_of(self, tensor: Any) -> int:
        """The current unit: every unit sees all of the memory."""
        return _current[0]

    def in_use(self) -> bool:
        """Always: there is no context to start."""
        return True

    def current(self) -> int:
        """The unit work goes to."""
        return _current[0]

    def set_current(self, index: int) -> None:
        """Send work to unit ``index``.

        :raises ValueError: for a unit the device does not have.
        """
        if not 0 <= index < UNITS:
            raise ValueError(f"the toy device has units 0 to {UNITS - 1}, not {index}")
        _current[0] = index

    def synchronize(self) -> None:
        """Nothing to wait for: toy work is done when its call returns."""

    def check_health(self) -> None:
        """Raise when the current unit was broken by :func:`fault`."""
        if _current[0] in _faulted:
            raise RuntimeError(f"toy unit {_current[0]} has faulted")

    def release(self) -> None:
        """Nothing is cached."""

    def facts(self) -> dict[str, Any]:
        """What picks made on the toy device depend on."""
        return {"device": "toy", "name": "toy accelerator (host memory)", "count": UNITS}


class ToyTimer:
    """The toy device's clock: the host's, each run followed by waiting for the device."""

    name: ClassVar[str] = "toy-clock"
    auto_priority = -1
    device: ClassVar[str] = "toy"

    @classmethod
    def is_available(cls) -> bool:
        """Always, like its device."""
        return True

    def __init__(self, device: ToyDevice) -> None:
        """:param device: the toy device's instance, given by the session."""
        self._device = device
        self._samples: list[float] = []

    def sample(self, fn: Callable[[], object], *, before: Callable[[], object] | None = None) -> None:
        """Time one run of ``fn`` until the device is done with it; ``before`` runs first, off the clock."""
        if before is not None:
            before()
        start = time.perf_counter_ns()
        fn()
        self._device.synchronize()
        self._samples.append((time.perf_counter_ns() - start) / 1e6)

    def collect(self) -> list[float]:
        """The samples since the last call, in milliseconds."""
        samples, self._samples = self._samples, []
        return samples


@hookimpl
def kerneltune_register_devices(register: Callable[[type], None]) -> None:
    """Offer :class:`ToyDevice`."""
    register(ToyDevice)


@hookimpl
def kerneltune_register_timers(register: Callable[[type], None]) -> None:
    """Offer :class:`ToyTimer`."""
    register(ToyTimer)
