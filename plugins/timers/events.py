"""Device event timers for CUDA and Ascend NPUs: one implementation, two modules.

Each sample records an event pair on the current stream around the call;
``collect`` has the device plugin (:mod:`kerneltune.plugins.devices.accelerators`)
synchronise once and reads every pair. ``torch.cuda`` and ``torch.npu`` share
the ``Event`` API, so the two timers differ only in which module, device
type and device plugin they ask for. ``cuda-graph`` times the near-tie and
finalist rounds by replaying a CUDA graph of the run between such a pair
(the run back to back several times, where one is short).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from kerneltune.core import TorchDeviceType, hookimpl, warn_once

if TYPE_CHECKING:
    from kerneltune.core import Device

#: Device clock cycles per calibration spin (about half a millisecond at 2 GHz)...
CALIBRATION_CYCLES = 1_000_000
#: ...and spins in the first calibration of a device: the earlier ones bring its clock up.
CALIBRATION_SPINS = 3
#: Bytes written to evict the device's L2 before a timed run where the device does not say how large
#: its L2 is: more than any such cache of today's accelerators, as much as Triton's own
#: benchmarker writes.
FLUSH_BYTES = 256 * 1024 * 1024
#: Where it does, this many times its L2 (at most FLUSH_BYTES): a write of about the L2's size
#: already leaves the work as slow as the full write does, and twice it costs the device about
#: half of what the full write costs before every timed run (docs/benchmark-history.md).
FLUSH_L2_TIMES = 2
#: Flushes timed per device and process, the first of as many timers, to learn how long one takes;
#: later ones are not timed, so that nothing but the flush goes ahead of most start marks.
FLUSHES_TIMED = 8
#: After a timer's first hold since its last ``collect``, every this-many-th hold is timed, to learn the
#: clock; the others only spin (an event pair costs the host more than the spin's launch).
HOLDS_TIMED_EVERY = 8
#: ``cuda-graph``: a replay of a run shorter than this (microseconds, by the first pass's fastest mean) is
#: timed largely by the graph's own launch and the flushed L2's first reads, which order candidates of a
#: few microseconds otherwise than the same runs back to back do (docs/measuring.md); such a run
#: is captured back to back as many times as make a replay of about ``GRAPH_FILL_US``, at most
#: ``GRAPH_RUNS_MAX``.
GRAPH_ALONE_US = 20.0
GRAPH_FILL_US = 150.0
GRAPH_RUNS_MAX = 64


class TorchDeviceTimer(TorchDeviceType):
    """What the timers of a torch device's work share: the L2 flush.

    A subclass names ``device_type`` and keeps the device plugin's instance
    as ``_device`` and a ``_flush_buffers`` dict (empty at first).
    """

    _device: Device
    _flush_buffers: dict[int, Any]

    def flush(self) -> None:
        """Evict the device's L2 cache: write :meth:`flush_bytes` on the current stream; no waiting.

        The buffer is allocated on a unit's first flush and kept while the
        timer lives (one candidate).
        """
        self._flush_unit(self._device.current())

    def _flush_unit(self, unit: int) -> None:
        buffer = self._flush_buffers.get(unit)
        if buffer is None:
            buffer = self._flush_buffers[unit] = self._allocate(self.flush_bytes(unit))
        buffer.zero_()

    #: :meth:`flush_bytes` by (device type, unit), asked once per process.
    _sizes: ClassVar[dict[tuple[str, int], int]] = {}

    @classmethod
    def flush_bytes(cls, unit: int) -> int:
        """How much a flush of ``unit`` writes: :data:`FLUSH_L2_TIMES` its L2 where the device module's
        ``get_device_properties`` gives ``L2_cache_size``, at most :data:`FLUSH_BYTES`; else that."""
        size = cls._sizes.get((cls.device_type, unit))
        if size is None:
            try:
                l2 = int(getattr(cls.device_module().get_device_properties(unit), "L2_cache_size", 0) or 0)
            except Exception:  # no such call, or no such device: the size that evicts any L2
                l2 = 0
            size = cls._sizes[(cls.device_type, unit)] = (
                min(FLUSH_BYTES, FLUSH_L2_TIMES * l2) if l2 > 0 else FLUSH_BYTES
            )
        return size

    def _allocate(self, nbytes: int) -> Any:
        import torch

        return torch.empty(nbytes, dtype=torch.uint8, device=self.device_type)


class DeviceEventTimer(TorchDeviceTimer):
    """Event pairs on the current stream of a torch device module."""

    name: ClassVar[str] = ""
    auto_priority = 0
    #: the registered device whose work it times; the session hands its instance to the constructor.
    device: ClassVar[str] = ""
    #: A program that never imported torch has no device work to time: ``auto`` does not ask.
    auto_requires_import: ClassVar[str] = "torch"
    #: cycles of the device's spin per microsecond, by (timer, device index): the highest seen.
    _cycles_per_us: ClassVar[dict[Any, float]] = {}
    #: how long a flush keeps the device busy, in microseconds, by (timer, device index): the shortest seen.
    _flush_us: ClassVar[dict[Any, float]] = {}
    #: how many flushes have been timed, by (timer, device index).
    _flushes_timed: ClassVar[dict[Any, int]] = {}

    def __init__(self, device: Device) -> None:
        """:param device: the device plugin's instance, which synchronises and knows the current unit."""
        self._device = device
        self._module = self.device_module()
        self._pairs: list[tuple[Any, Any]] = []
        self._holds: list[tuple[tuple[str, int], int, Any, Any]] = []
        #: holds since the last timed one.
        self._untimed_holds = 0
        self._flush_buffers: dict[int, Any] = {}
        #: flushes timed and not yet read, to learn how long one takes...
        self._flushes: list[tuple[tuple[str, int], Any, Any]] = []
        #: ...this timer's first on each device.
        self._flush_timed: set[tuple[str, int]] = set()
        #: while :meth:`sample` runs: the current unit and its current stream, looked up once.
        self._place: tuple[int, Any] | None = None

    def sample(self, fn: Callable[[], object], *, before: Callable[[], object] | None = None) -> None:
        """Record an event pair around one call, without waiting for it.

        :param before: device work to enqueue just ahead of the start event
            (an L2 flush). It goes after the events are made so that, while
            the device runs it, the host's launch of ``fn`` catches up
            instead of leaving the device idle inside the timed region.
        """
        start, end = self._event_pair()
        unit = self._device.current()
        stream = self._module.current_stream(unit)
        self._place = (unit, stream)
        try:
            if before is not None:
                before()
            start.record(stream)
            fn()
            end.record(stream)
        finally:
            self._place = None
        self._pairs.append((start, end))

    def _unit(self) -> int:
        """The current unit: :meth:`sample`'s, or asked for."""
        return self._place[0] if self._place is not None else self._device.current()

    def _stream(self, unit: int) -> Any:
        """``unit``'s current stream: :meth:`sample`'s, or looked up; only where events are recorded.

        Looking the stream up takes torch several microseconds, and without a
        stream ``Event.record`` looks it up on every call, up to four a timed run.
        """
        return self._place[1] if self._place is not None else self._module.current_stream(unit)

    def hold(self, microseconds: float) -> bool:
        """Enqueue a spin that keeps the device busy for about ``microseconds``; no waiting.

        Given as part of ``before``, it lets the host finish launching ``fn`` while the device
        still spins or flushes, so the launch does not land between the start mark and the work.
        It uses the device module's ``_sleep(cycles)`` spin kernel; with a module that has none
        it holds nothing and returns ``False``.

        Cycles per microsecond follow the device's clock, which rises under
        load, and a rate learnt too low makes every hold too short: the first
        hold on a device spins :data:`CALIBRATION_SPINS` times and times the
        last, and some later holds are timed too (:data:`HOLDS_TIMED_EVERY`);
        ``collect`` keeps the highest rate seen.
        """
        spin = getattr(self._module, "_sleep", None)
        if spin is None:
            return False
        if microseconds <= 0:
            return True
        unit = self._unit()
        device = (self.name, unit)
        if device not in self._cycles_per_us:
            self._calibrate(device, spin, self._stream(unit))
        cycles = max(1, round(microseconds * self._cycles_per_us[device]))
        if self._holds and self._untimed_holds < HOLDS_TIMED_EVERY - 1:
            self._untimed_holds += 1
            spin(cycles)
        else:
            self._untimed_holds = 0
            self._holds.append((device, cycles, *self._timed_spin(spin, cycles, self._stream(unit))))
        return True

    def flush(self) -> None:
        """Evict the device's L2 (:meth:`TorchDeviceTimer.flush`); the first on each device is timed.

        Where the device can hold, the first :data:`FLUSHES_TIMED` timers on
        a device each time their first flush there, for :meth:`flush_microseconds`.
        """
        unit = self._unit()
        device = (self.name, unit)
        timed = self._flushes_timed.get(device, 0)
        if (
            device in self._flush_timed
            or timed >= FLUSHES_TIMED
            or getattr(self._module, "_sleep", None) is None
        ):
            self._flush_unit(unit)
            return
        self._flushes_timed[device] = timed + 1
        self._flush_timed.add(device)
        start, end = self._event_pair()
        stream = self._stream(unit)
        start.record(stream)
        self._flush_unit(unit)
        end.record(stream)
        self._flushes.append((device, start, end))

    def flush_microseconds(self) -> float | None:
        """The shortest flush timed on the current device in this process, in microseconds; ``None``: none.

        The shortest: a first flush can be slow, and too long a figure would shorten holds too much.
        """
        return self._flush_us.get((self.name, self._device.current()))

    def _calibrate(self, device: tuple[str, int], spin: Callable[[int], object], stream: Any) -> None:
        for _ in range(CALIBRATION_SPINS - 1):
            spin(CALIBRATION_CYCLES)
        start, end = self._timed_spin(spin, CALIBRATION_CYCLES, stream)
        end.synchronize()
        self._learn(device, CALIBRATION_CYCLES, start.elapsed_time(end))

    def _event_pair(self) -> tuple[Any, Any]:
        return self._module.Event(enable_timing=True), self._module.Event(enable_timing=True)

    def _timed_spin(self, spin: Callable[[int], object], cycles: int, stream: Any) -> tuple[Any, Any]:
        start, end = self._event_pair()
        start.record(stream)
        spin(cycles)
        end.record(stream)
        return start, end

    def _learn(self, device: tuple[str, int], cycles: int, milliseconds: float) -> None:
        rate = cycles / max(milliseconds * 1000.0, 1e-3)
        self._cycles_per_us[device] = max(rate, self._cycles_per_us.get(device, 0.0))

    def collect(self) -> list[float]:
        """Synchronise once and return each pair's elapsed milliseconds."""
        pairs, self._pairs = self._pairs, []
        holds, self._holds = self._holds, []
        flushes, self._flushes = self._flushes, []
        if pairs or holds or flushes:
            self._device.synchronize()
        for device, cycles, start, end in holds:
            self._learn(device, cycles, start.elapsed_time(end))
        for device, start, end in flushes:
            microseconds = start.elapsed_time(end) * 1000.0
            self._flush_us[device] = min(microseconds, self._flush_us.get(device, math.inf))
        return [float(start.elapsed_time(end)) for start, end in pairs]


class CudaEventTimer(DeviceEventTimer):
    """``torch.cuda.Event`` pairs."""

    name = "cuda-event"
    auto_priority = 10
    device = "cuda"
    device_type = "cuda"


class CudaGraphTimer(CudaEventTimer):
    """``cuda-event`` pairs around the replay of a graph of the candidate's run, captured at its first sample.

    One timer measures one candidate's runs of one round (the engine makes
    a timer per measurement): its first :meth:`sample` captures ``fn`` on a
    side stream (nothing runs), :attr:`runs` times back to back where the
    first pass's fastest run (:meth:`expect`) is short (:data:`GRAPH_ALONE_US`);
    every sample then replays the graph between the events, after the flush
    and hold as ``cuda-event`` puts them, and counts as one run of the
    replay's time over :attr:`runs`. Work that cannot be captured (host
    synchronisation, an operation the capture refuses) runs as it is, timed
    by events, with one notice.
    """

    name = "cuda-graph"
    #: never chosen by ``auto``: it is asked for by name.
    auto_priority = -1
    #: the timer of the first pass and of batched screens (capture per candidate costs too much there).
    first_pass: ClassVar[str] = "cuda-event"

    #: a side stream per device unit, for the captures.
    _sides: ClassVar[dict[int, Any]] = {}

    def __init__(self, device: Any) -> None:
        super().__init__(device)
        #: the captured runs, ``None`` before the first sample; ``False`` where capture failed...
        self._graph: Any = None
        #: ...and why, told once the run went through without the graph.
        self._problem = ""
        #: how many runs of the candidate one replay holds.
        self.runs = 1

    def sample(self, fn: Callable[[], object], *, before: Callable[[], object] | None = None) -> None:
        """Replay ``fn``'s graph between an event pair (capturing it first); ``fn`` itself where it cannot."""
        if self._graph is None:
            self._graph = self._capture(fn)
        if self._graph is not False:
            super().sample(self._graph.replay, before=before)
            return
        super().sample(fn, before=before)  # a candidate that fails here fails: no notice
        if self._problem:
            warn_once(
                ("cuda-graph capture", self._problem.split(":")[0]),
                f"kerneltune: the cuda-graph timer cannot capture this work ({self._problem}); "
                "it is timed with CUDA events instead",
            )
            self._problem = ""

    def collect(self) -> list[float]:
        """Each replay's elapsed milliseconds over the runs it holds."""
        return [elapsed / self.runs for elapsed in super().collect()]

    def expect(self, milliseconds: float) -> None:
        """Size the graph: a run of the first pass's fastest ``milliseconds``, back to back to fill it."""
        microseconds = milliseconds * 1000.0
        if 0 < microseconds < GRAPH_ALONE_US:
            self.runs = min(GRAPH_RUNS_MAX, int(GRAPH_FILL_US // microseconds))

    def _capture(self, fn: Callable[[], object]) -> Any:
        """:attr:`runs` calls of ``fn`` captured on a side stream (nothing runs); ``False`` if refused."""
        import torch

        unit = self._device.current()
        side = self._sides.get(unit)
        if side is None:
            side = self._sides[unit] = torch.cuda.Stream(unit)
        current = torch.cuda.current_stream(unit)
        side.wait_stream(current)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.stream(side):
                graph.capture_begin()
                try:
                    for _ in range(self.runs):
                        fn()
                finally:
                    graph.capture_end()
        except Exception as exc:
            first = str(exc).splitlines()[0] if str(exc) else ""
            self._problem = f"{type(exc).__name__}: {first}"
            self.runs = 1  # each sample a run of fn, timed by events
            with contextlib.suppress(Exception):  # the capture's own error, raised again
                torch.cuda.synchronize(unit)
            return False
        current.wait_stream(side)
        return graph


class NpuEventTimer(DeviceEventTimer):
    """``torch.npu.Event`` pairs (torch_npu registers ``torch.npu`` on import)."""

    name = "npu-event"
    auto_priority = 20
    device = "npu"
    device_type = "npu"


@hookimpl
def kerneltune_register_timers(register):
    register(CudaEventTimer)
    register(CudaGraphTimer)
    register(NpuEventTimer)
