"""A double of torch_npu as the npu-profiler timer uses it: ``torch.npu`` and ``torch_npu.profiler``.

No torch_npu imports here (it needs CANN), so the timer is tested against
this double. Its profiler API has the names triton-ascend 3.2.0's
``do_bench_npu`` calls, with torch_npu's signatures: ``profile(activities,
schedule, on_trace_ready, record_shapes, profile_memory, with_stack,
with_flops, with_modules, experimental_config)`` with ``start``, ``step`` and
``stop``; ``ProfilerActivity.CPU`` / ``.NPU``; ``schedule(wait, active,
warmup, repeat, skip_first)``; ``tensorboard_trace_handler(dir_name,
worker_name, analyse_flag)``; ``_ExperimentalConfig``, ``AiCMetrics``,
``ProfilerLevel``. What it writes is what torch_npu's documentation gives:
``<dir>/<worker>_<time>_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv``,
with a ``Step Id`` column only when a schedule marks steps.

The device runs what was launched when it is synchronised, and the
profile files each kernel under a step by one of two rules (``attribution``):
the step in which the host launched it, or the step running when the
device ran it. The timer must read the same samples under both.
"""

from __future__ import annotations

import csv
import enum
import importlib.machinery
import sys
import types
from pathlib import Path
from typing import Any

import attrs
import torch

COLUMNS = (
    "Step Id",
    "Model ID",
    "Task ID",
    "Stream ID",
    "Name",
    "Type",
    "OP State",
    "Accelerator Core",
    "Start Time(us)",
    "Duration(us)",
    "Wait Time(us)",
    "Block Dim",
)


@attrs.define
class Kernel:
    """One kernel the double's device ran."""

    name: str
    microseconds: float
    launched_in: int | None
    ran_in: int | None = None
    start_us: float = 0.0


class ProfilerActivity(enum.Enum):
    CPU = "CPU"
    NPU = "NPU"


class AiCMetrics(enum.Enum):
    PipeUtilization = "PipeUtilization"
    AiCoreNone = "AiCoreNone"


class ProfilerLevel(enum.Enum):
    Level0 = "Level0"
    Level1 = "Level1"
    Level2 = "Level2"


class _ExperimentalConfig:
    def __init__(self, **options: Any) -> None:
        self.options = options


@attrs.frozen
class Schedule:
    wait: int
    active: int
    warmup: int = 0
    repeat: int = 0
    skip_first: int = 0

    def records(self, step: int) -> bool:
        """Whether ``step`` is recorded: within the first cycle's active steps (``repeat=1``)."""
        first = self.skip_first + self.wait + self.warmup
        return first <= step < first + self.active


class FakeNpu(types.ModuleType):
    """``torch.npu`` as the npu device and the timers use it, running what is launched at each synchronize."""

    def __init__(self, attribution: str = "device") -> None:
        super().__init__("npu")
        assert attribution in ("launch", "device")
        self.attribution = attribution
        self.available = True
        self.pending: list[Kernel] = []
        self.ran: list[Kernel] = []
        self.clock_us = 0.0
        self.synchronize_calls = 0
        #: the profiler recording now, if any (one per process, as torch_npu allows).
        self.profiler: profile | None = None
        #: every profile made, started or not.
        self.profiles: list[profile] = []
        #: the size of every flush buffer allocated, and each write of one (a kernel "ZerosLike").
        self.flush_buffers: list[int] = []

    def launch(self, name: str, microseconds: float) -> None:
        """A kernel the host enqueues now; it runs at the next synchronize."""
        step = self.profiler.step_num if self.profiler is not None else None
        self.pending.append(Kernel(name, microseconds, launched_in=step))

    def buffer(self, nbytes: int) -> object:
        """What the timer allocates to flush with: writing it is a 60 us kernel."""
        self.flush_buffers.append(nbytes)
        device = self

        class Buffer:
            def zero_(self) -> None:
                device.launch("ZerosLike", 60.0)

        return Buffer()

    def synchronize(self) -> None:
        self.synchronize_calls += 1
        step = self.profiler.step_num if self.profiler is not None else None
        for kernel in self.pending:
            kernel.ran_in, kernel.start_us = step, self.clock_us
            self.clock_us += kernel.microseconds
            if self.profiler is not None:
                self.profiler.kernels.append(kernel)
        self.ran.extend(self.pending)
        self.pending.clear()

    def is_available(self) -> bool:
        return self.available

    def is_initialized(self) -> bool:
        return True

    def current_device(self) -> int:
        return 0

    def set_device(self, index: int) -> None:
        assert index == 0

    def device_count(self) -> int:
        return 1

    def get_device_name(self, index: int = 0) -> str:
        return "Ascend910B4"

    def empty_cache(self) -> None:
        pass


class profile:
    """``torch_npu.profiler.profile``: one recording at a time per process."""

    def __init__(
        self,
        activities: list[ProfilerActivity] | None = None,
        schedule: Schedule | None = None,
        on_trace_ready: Any = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
        experimental_config: _ExperimentalConfig | None = None,
    ) -> None:
        self.activities = activities
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.experimental_config = experimental_config
        self.options = {
            "record_shapes": record_shapes,
            "profile_memory": profile_memory,
            "with_stack": with_stack,
            "with_flops": with_flops,
            "with_modules": with_modules,
        }
        self.step_num = 0
        self.kernels: list[Kernel] = []
        self.stopped = False
        self.device: FakeNpu = torch.npu  # type: ignore[attr-defined]
        self.device.profiles.append(self)

    def start(self) -> None:
        if self.device.profiler is not None:
            raise RuntimeError("a profiler is already running in this process")
        self.device.profiler = self

    def step(self) -> None:
        assert self.device.profiler is self, "step() on a profiler that is not running"
        self.step_num += 1

    def stop(self) -> None:
        assert self.device.profiler is self, "stop() on a profiler that is not running"
        self.device.profiler = None
        self.stopped = True
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def recorded(self) -> list[tuple[int | None, Kernel]]:
        """``(step id, kernel)`` of every kernel the profile holds, the step by the device's rule."""
        rows = []
        for kernel in self.kernels:
            step = kernel.launched_in if self.device.attribution == "launch" else kernel.ran_in
            if self.schedule is None or (step is not None and self.schedule.records(step)):
                rows.append((step, kernel))
        return rows


def schedule(wait: int, active: int, warmup: int = 0, repeat: int = 0, skip_first: int = 0) -> Schedule:
    assert repeat == 1, "the double records the first cycle only"
    return Schedule(wait=wait, active=active, warmup=warmup, repeat=repeat, skip_first=skip_first)


#: every folder a trace handler wrote into.
WRITTEN: list[Path] = []


def tensorboard_trace_handler(dir_name: str | None = None, worker_name: str | None = None, analyse_flag=True):
    """Write the profile's ``kernel_details.csv`` where torch_npu writes it."""

    def handle(prof: profile) -> None:
        folder = Path(dir_name or ".") / f"{worker_name or 'host_1'}_20260101000000_ascend_pt"
        output = folder / "ASCEND_PROFILER_OUTPUT"
        output.mkdir(parents=True)
        columns = COLUMNS if prof.schedule is not None else COLUMNS[1:]
        with (output / "kernel_details.csv").open("w", newline="") as file:
            writer = csv.writer(file)
            writer.writerow(columns)
            for task, (step, kernel) in enumerate(prof.recorded()):
                row = [0, task, 2, kernel.name, kernel.name, "dynamic", "AI_VECTOR_CORE"]
                row += [f"{kernel.start_us:.3f}", f"{kernel.microseconds:.3f}", "0.000", 40]
                writer.writerow(([step] if prof.schedule is not None else []) + row)
        WRITTEN.append(folder)

    return handle


def install(monkeypatch: Any, attribution: str = "device") -> FakeNpu:
    """Make ``import torch_npu`` give the double, and ``torch.npu`` the double's device."""
    package = types.ModuleType("torch_npu")
    package.__spec__ = importlib.machinery.ModuleSpec("torch_npu", loader=None)
    profiler = types.ModuleType("torch_npu.profiler")
    for name in (
        "profile",
        "ProfilerActivity",
        "schedule",
        "tensorboard_trace_handler",
        "_ExperimentalConfig",
        "AiCMetrics",
        "ProfilerLevel",
    ):
        setattr(profiler, name, globals()[name])
    package.profiler = profiler  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch_npu", package)
    monkeypatch.setitem(sys.modules, "torch_npu.profiler", profiler)
    device = FakeNpu(attribution)
    monkeypatch.setattr(torch, "npu", device, raising=False)
    WRITTEN.clear()
    return device
