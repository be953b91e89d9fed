"""The ``npu-profiler`` timer: each timed run's on-chip kernel time, read from torch_npu's profiler.

It measures as triton-ascend's ``do_bench_npu`` does (``TRITON_BENCH_METHOD=npu``),
one sample per timed run: the flush goes in one profiler step and the timed
run in the next, each closed by a synchronise, and a sample is the sum of
the ``Duration(us)`` of the kernels ``kernel_details.csv`` files under the
timed run's step. One profiler runs at a time in a process, so the timers
sampling meanwhile share one run (:class:`ProfilingRun`), stopped and read
at the first ``collect``. docs/ascend.md ("Timing: npu-event or
npu-profiler") says when to prefer it and what has not run on NPU hardware:
the calls are those triton-ascend 3.2.0's ``do_bench_npu`` makes.
"""

from __future__ import annotations

import csv
import importlib
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from kerneltune.core import hookimpl
from kerneltune.plugins.timers.events import FLUSH_BYTES as FLUSH_BYTES  # the size flushed, as npu-event
from kerneltune.plugins.timers.events import TorchDeviceTimer

if TYPE_CHECKING:
    from kerneltune.core import Device

#: The variable triton-ascend's ``do_bench`` reads; ``npu`` (any case) selects its profiler timing.
BENCH_METHOD = "TRITON_BENCH_METHOD"
#: ``auto_priority`` where :data:`BENCH_METHOD` selects the profiler: above npu-event's 20...
CHOSEN_PRIORITY = 30
#: ...and elsewhere, where it is taken only by name.
NAMED_PRIORITY = -1
#: Steps the schedule records: more than any tuning takes, so the profiler records until it is stopped.
ACTIVE_STEPS = 1 << 30
#: The profile file, and its columns, a sample is read from.
KERNEL_DETAILS = "kernel_details.csv"
STEP_COLUMN = "Step Id"
DURATION_COLUMN = "Duration(us)"


def chosen_by_environment() -> bool:
    """Whether ``TRITON_BENCH_METHOD`` asks for the profiler, as triton-ascend's ``do_bench`` reads it."""
    return os.environ.get(BENCH_METHOD, "default").lower() == "npu"


class ProfilingRun:
    """One ``torch_npu.profiler.profile`` of the process, shared by the timers sampling while it runs.

    Steps are numbered as the profiler names them (``ProfilerStep#N``, from 0
    at the start); step 0 is the schedule's warm-up, which records nothing,
    and is left at once. Every timer that samples in the run claims it, and
    gives its claim back when it has read its samples, or when it is dropped
    unread; the run stops at the first read (see :meth:`durations`), or when
    the last claim is given back unread.
    """

    #: the run samples go into now, if one is recording.
    current: ClassVar[ProfilingRun | None] = None

    def __init__(self, synchronize: Callable[[], object]) -> None:
        """Start the profiler, with the schedule and settings of triton-ascend's ``do_bench_npu``.

        :param synchronize: waits for the device (the ``npu`` device plugin's ``synchronize``).
        """
        profiler = importlib.import_module("torch_npu").profiler
        self._synchronize = synchronize
        self._directory = Path(tempfile.mkdtemp(prefix="kerneltune_npu_profile_"))
        self._write = profiler.tensorboard_trace_handler(str(self._directory))
        #: whether stopping should write the profile: not when every claim was given back unread.
        self._wanted = True
        self._claims = 0
        self._durations: dict[int, float] | None = None
        #: why reading the profile failed, for every timer that asks.
        self._failure: str | None = None
        self.step = 0
        try:
            self._start(profiler)
        except BaseException:
            shutil.rmtree(self._directory, ignore_errors=True)
            raise

    def _start(self, profiler: Any) -> None:
        self._profile = profiler.profile(
            # The host's activity records the steps' ranges, by which the profile files each kernel.
            activities=[profiler.ProfilerActivity.CPU, profiler.ProfilerActivity.NPU],
            schedule=profiler.schedule(wait=0, warmup=1, active=ACTIVE_STEPS, repeat=1, skip_first=0),
            on_trace_ready=self._ready,
            record_shapes=False,
            profile_memory=False,
            with_stack=False,
            with_flops=False,
            with_modules=False,
            experimental_config=profiler._ExperimentalConfig(
                aic_metrics=profiler.AiCMetrics.PipeUtilization,
                profiler_level=profiler.ProfilerLevel.Level1,
                l2_cache=False,
                data_simplification=False,
            ),
        )
        self._profile.start()
        self.next_step()  # out of the schedule's warm-up step, which records nothing

    @classmethod
    def recording(cls, synchronize: Callable[[], object]) -> ProfilingRun:
        """The run recording now, started if there is none."""
        if cls.current is None:
            cls.current = cls(synchronize)
        return cls.current

    def next_step(self) -> int:
        """Wait for the device, so this step's kernels end within it, then start the next step; its number."""
        self._synchronize()
        self._profile.step()
        self.step += 1
        return self.step

    def claim(self) -> Callable[[], None]:
        """Note one more timer with samples in this run; call what it returns to give the claim back."""
        self._claims += 1
        return self._give_back

    def _give_back(self) -> None:
        self._claims -= 1
        if self._claims == 0 and self._durations is None and self._failure is None:
            self._wanted = False
            self._stop()

    def durations(self) -> dict[int, float]:
        """Milliseconds of kernel time per step: the run is stopped and its profile read, the first time.

        :raises RuntimeError: where the profile holds no ``kernel_details.csv``
            with the ``Step Id`` and ``Duration(us)`` columns.
        """
        if self._failure is not None:
            raise RuntimeError(self._failure)
        if self._durations is None:
            try:
                self._stop()
                self._durations = self._read()
            except Exception as exc:
                # Every timer with samples here fails alike, not on the folder this one removed.
                self._failure = f"{type(exc).__name__}: {exc}"
                raise
            finally:
                shutil.rmtree(self._directory, ignore_errors=True)
        return self._durations

    def _stop(self) -> None:
        if ProfilingRun.current is self:
            ProfilingRun.current = None
            self._synchronize()
            self._profile.stop()
        if not self._wanted:
            shutil.rmtree(self._directory, ignore_errors=True)

    def _ready(self, profile: Any) -> None:
        if self._wanted:
            self._write(profile)

    def _read(self) -> dict[int, float]:
        found = sorted(self._directory.rglob(KERNEL_DETAILS))
        if not found:
            raise RuntimeError(
                f"torch_npu's profiler wrote no {KERNEL_DETAILS} under {self._directory} "
                "(is the NPU activity recorded?)"
            )
        totals: dict[int, float] = {}
        for path in found:
            for step, microseconds in _kernel_rows(path):
                totals[step] = totals.get(step, 0.0) + microseconds
        return {step: microseconds / 1000.0 for step, microseconds in totals.items()}


def _kernel_rows(path: Path) -> Iterator[tuple[int, float]]:
    """``(step, microseconds)`` of every kernel in one ``kernel_details.csv`` that a step holds."""
    with path.open(newline="", encoding="utf-8") as file:
        rows = csv.DictReader(file)
        missing = {STEP_COLUMN, DURATION_COLUMN} - set(rows.fieldnames or ())
        if missing:
            raise RuntimeError(
                f"{path} has no {' or '.join(sorted(missing))} column (columns: "
                f"{', '.join(rows.fieldnames or ())}); the profile cannot tell the timed runs apart"
            )
        for row in rows:
            try:
                step = int(float(row[STEP_COLUMN]))
                microseconds = float(row[DURATION_COLUMN])
            except (TypeError, ValueError):
                continue  # a kernel outside every step ("N/A")
            yield step, microseconds


class _PriorityFromEnvironment(type):
    """Gives :class:`NpuProfilerTimer` an ``auto_priority`` read when ``auto`` chooses, not at import."""

    @property
    def auto_priority(cls) -> int:
        """:data:`CHOSEN_PRIORITY` where :func:`chosen_by_environment`, else :data:`NAMED_PRIORITY`."""
        return CHOSEN_PRIORITY if chosen_by_environment() else NAMED_PRIORITY


class NpuProfilerTimer(TorchDeviceTimer, metaclass=_PriorityFromEnvironment):
    """On-chip kernel time of each timed run, from ``torch_npu.profiler`` (see the module's description).

    Its availability and flush are npu-event's (:class:`~kerneltune.plugins.timers.events.TorchDeviceTimer`).
    """

    name: ClassVar[str] = "npu-profiler"
    #: the registered device whose work it times.
    device: ClassVar[str] = "npu"
    device_type = "npu"
    #: A program that never imported torch has no device work to time: ``auto`` does not ask.
    auto_requires_import: ClassVar[str] = "torch"

    def __init__(self, device: Device) -> None:
        """:param device: the ``npu`` device plugin's instance: it synchronises and knows the current unit."""
        self._device = device
        #: ``(run, step)`` of every sample not yet collected, in order.
        self._samples: list[tuple[ProfilingRun, int]] = []
        #: the claim on each run this timer has samples in, given back when they are read (or it is dropped).
        self._claims: dict[ProfilingRun, weakref.finalize] = {}
        self._flush_buffers: dict[int, Any] = {}

    def sample(self, fn: Callable[[], object], *, before: Callable[[], object] | None = None) -> None:
        """Run ``fn`` alone in a profiler step of its own, after ``before`` in the step ahead of it.

        Both steps end with a synchronise, so ``before`` (the flush) has
        finished when ``fn``'s step begins and none of its kernels count.
        """
        run = ProfilingRun.recording(self._device.synchronize)
        if run not in self._claims:
            self._claims[run] = weakref.finalize(self, run.claim())
        if before is not None:
            before()
        step = run.next_step()
        try:
            fn()
        finally:
            run.next_step()
        self._samples.append((run, step))

    def hold(self, microseconds: float) -> bool:
        """Hold nothing: the time between kernels never counts here.

        ``True`` tells the engine the samples are device time, so a run
        with no device work reads 0 (work on the host alone).
        """
        return True

    def collect(self) -> list[float]:
        """Each sample's kernel milliseconds, in order; stops (and reads) the runs they are in.

        :raises RuntimeError: where a profile cannot be read (no
            ``kernel_details.csv``, or one without step numbers).
        """
        samples, self._samples = self._samples, []
        claims, self._claims = self._claims, {}
        try:
            return [run.durations().get(step, 0.0) for run, step in samples]
        finally:
            for give_back in claims.values():
                give_back()


@hookimpl
def kerneltune_register_timers(register):
    register(NpuProfilerTimer)
