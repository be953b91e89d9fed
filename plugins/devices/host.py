"""The host as a kerneltune device: the one every process has, and the last one asked."""

from __future__ import annotations

import os
import platform
from typing import Any, ClassVar

from kerneltune.core import AlwaysAvailable, hookimpl


class CpuDevice(AlwaysAvailable):
    """Host memory and the CPU: one unit, always in use, nothing to wait for or release."""

    name: ClassVar[str] = "cpu"
    auto_priority = 0
    #: Host tensors are copied for the isolation worker: sharing would move the caller's own
    #: into shared memory.
    shares_memory: ClassVar[bool] = False

    def owns(self, tensor: Any) -> bool:
        """Whether the tensor lives in host memory."""
        return getattr(getattr(tensor, "device", None), "type", None) == "cpu"

    def index_of(self, tensor: Any) -> int:
        """0: the host is one unit."""
        return 0

    def in_use(self) -> bool:
        """Always: a process runs on its host."""
        return True

    def current(self) -> int:
        """0."""
        return 0

    def set_current(self, index: int) -> None:
        """Nothing to choose."""

    def synchronize(self) -> None:
        """Nothing to wait for: host work is done when its call returns."""

    def check_health(self) -> None:
        """Nothing to check: a candidate that breaks the host process kills the worker instead."""

    def release(self) -> None:
        """Nothing cached to hand back."""

    def facts(self) -> dict[str, Any]:
        """The processor's name and the number of cores."""
        return {"device": "cpu", "name": platform.processor() or platform.machine(), "count": os.cpu_count()}


@hookimpl
def kerneltune_register_devices(register):
    register(CpuDevice)
