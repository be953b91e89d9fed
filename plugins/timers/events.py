"""Device event timers for CUDA and Ascend NPUs: one implementation, two modules.

Each sample records an event pair on the current stream around the call;
``collect`` synchronises the device once and reads every pair. ``torch.cuda``
and ``torch.npu`` expose the same ``Event(enable_timing=True)``,
``record()``, ``elapsed_time()`` and ``synchronize()`` API, so the two timers
differ only in which module they ask for.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from kerneltune.core import hookimpl


class DeviceEventTimer:
    """Event pairs on the current stream of a torch device module."""

    name = ""
    auto_priority = 0

    @classmethod
    def device_module(cls) -> Any:
        """The torch device module (``torch.cuda``, ``torch.npu``), or ``None``."""
        raise NotImplementedError

    @classmethod
    def is_available(cls) -> bool:
        """Whether the device module exists and sees a device."""
        module = cls.device_module()
        return module is not None and bool(module.is_available())

    def __init__(self) -> None:
        self._module = self.device_module()
        self._pairs: list[tuple[Any, Any]] = []

    def sample(self, fn: Callable[[], object], *, before: Callable[[], object] | None = None) -> None:
        """Record an event pair around one call, without waiting for it.

        :param before: device work to enqueue just ahead of the start event
            (an L2 flush). It goes after the events are made so that, while
            the device runs it, the host's launch of ``fn`` catches up
            instead of leaving the device idle inside the timed region.
        """
        start = self._module.Event(enable_timing=True)
        end = self._module.Event(enable_timing=True)
        if before is not None:
            before()
        start.record()
        fn()
        end.record()
        self._pairs.append((start, end))

    def collect(self) -> list[float]:
        """Synchronise once and return each pair's elapsed milliseconds."""
        pairs, self._pairs = self._pairs, []
        if pairs:
            self._module.synchronize()
        return [float(start.elapsed_time(end)) for start, end in pairs]


class CudaEventTimer(DeviceEventTimer):
    """``torch.cuda.Event`` pairs."""

    name = "cuda-event"
    auto_priority = 10

    @classmethod
    def device_module(cls) -> Any:
        if importlib.util.find_spec("torch") is None:
            return None
        import torch

        return torch.cuda


class NpuEventTimer(DeviceEventTimer):
    """``torch.npu.Event`` pairs (torch_npu registers ``torch.npu`` on import)."""

    name = "npu-event"
    auto_priority = 20

    @classmethod
    def device_module(cls) -> Any:
        if importlib.util.find_spec("torch_npu") is None:
            return None
        import torch
        import torch_npu  # noqa: F401  (registers torch.npu)

        return getattr(torch, "npu", None)


@hookimpl
def kerneltune_register_timers(register):
    register(CudaEventTimer)
    register(NpuEventTimer)
