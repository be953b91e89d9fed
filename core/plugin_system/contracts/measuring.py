"""Timing contracts: timers, their optional parts, and the devices they time."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    pass
from kerneltune.core.plugin_system.contracts.base import Registrable, Thunk


class Timer(Registrable, Protocol):
    """How long a candidate takes; registered by ``kerneltune_register_timers``.

    Constructed with no arguments. An instance measures one candidate: its
    warm-up and timed runs, then one :meth:`collect`. Built-in priorities:
    wallclock 0, cuda-event 10, npu-event 20, npu-profiler 30 where
    ``TRITON_BENCH_METHOD=npu`` and -1 elsewhere, cuda-graph -1; a timer that
    should never win ``auto`` uses a negative ``auto_priority``.
    """

    def __init__(self) -> None: ...

    def sample(self, fn: Thunk, *, before: Thunk | None = None) -> None:
        """Run ``fn`` once inside the timed region.

        :param fn: the work to time.
        :param before: set-up that must happen just ahead of the timed
            region but outside it (the engine's flush and hold, see
            :mod:`kerneltune.core.machine.timing`). A device timer enqueues it after
            its own bookkeeping and right before its start mark, so the
            device is busy with it while the host prepares the launch of
            ``fn``. ``None``: no set-up.
        """
        ...

    def collect(self) -> list[float]:
        """Wait for outstanding work once and return every sample since the last call.

        :returns: milliseconds, one finite, non-negative number per
            :meth:`sample`, in order. Anything else fails the candidate being
            measured, with a message naming the timer.
        """
        ...


@runtime_checkable
class FlushingTimer(Timer, Protocol):
    """A timer that can evict the device's caches (optional part of :class:`Timer`)."""

    def flush(self) -> None:
        """Enqueue device work that evicts the device's caches (an L2 write), without waiting."""
        ...


@runtime_checkable
class HoldingTimer(Timer, Protocol):
    """A timer that can keep the device busy (optional part of :class:`Timer`)."""

    def hold(self, microseconds: float) -> bool | None:
        """Enqueue device work that keeps the device busy for about ``microseconds``, without waiting.

        :returns: ``False`` where it could not (no spin kernel on this
            device); then a timed run's marks also span the host's launch,
            and the engine does not ask whether the device sat idle.
            ``True`` or ``None``: it held.
        """
        ...


@runtime_checkable
class FlushTimingTimer(FlushingTimer, Protocol):
    """A flushing timer that knows how long a flush takes on the device (optional part of :class:`Timer`)."""

    def flush_microseconds(self) -> float | None:
        """How long one :meth:`flush` keeps the current device busy, in microseconds; ``None`` if not known.

        The shortest this process has timed on that device. In a batch of
        timed runs launched without waiting (a warm start's screen and its
        finalists), the hold ahead of a run spins this much less: the flush
        after it keeps the device busy while the host launches the run as
        well. Without this part every run of a batch is held in full.
        """
        ...


@runtime_checkable
class PreciseTimer(Timer, Protocol):
    """A timer for the near-tie and finalist rounds alone (optional part of :class:`Timer`).

    Where it times too dearly for every candidate (a CUDA graph captured per
    candidate), the first pass and a warm start's batched screen are timed
    by the timer it names; the re-timing rounds that decide between close
    candidates, by it.
    """

    #: the registered name of the timer that takes the first pass and batched screens.
    first_pass: ClassVar[str]


@runtime_checkable
class ExpectingTimer(Timer, Protocol):
    """A re-timing round's timer told what to expect before it samples (optional part of :class:`Timer`)."""

    def expect(self, milliseconds: float) -> None:
        """Told before the first sample: the fastest candidate's mean in the first pass.

        The same for every candidate of a tuning's rounds (``inf`` or ``0``
        where nothing was measured), so a timer that sizes its runs by it
        (``cuda-graph`` holds short runs back to back) sizes them alike.
        """
        ...


@runtime_checkable
class DeviceTimer(Timer, Protocol):
    """A timer of one device's work (optional part of :class:`Timer`).

    The session's device (:attr:`kerneltune.core.Session.device`) follows
    the timer: selecting this timer selects the registered :class:`Device`
    it names, and its constructor receives that device's instance.
    """

    #: the registered name of the :class:`Device` whose work it times.
    device: ClassVar[str]

    def __init__(self, device: Device) -> None:
        """:param device: the instance of the device named by :attr:`device`."""
        ...


@runtime_checkable
class Device(Registrable, Protocol):
    """An accelerator, as the engine may know it; registered by ``kerneltune_register_devices``.

    The engine holds no device API of its own (neither torch's CUDA module
    nor its NPU one): the hardware facts of a cache key, the worker process of
    ``isolate = "subprocess"`` and the device timers ask a device plugin.
    Constructed with no arguments, only where ``is_available()``; an instance
    is cheap and starts nothing until a method that needs the device runs.
    Built-in: ``npu`` (``auto_priority`` 20), ``cuda`` (10) and ``cpu`` (0),
    the host, which every process has.

    A device has units, numbered from 0 (the GPUs of a host); the one this
    thread's work goes to is :meth:`current`. Tensors are whatever the
    device's tensor library hands out (``torch.Tensor`` for the built-ins);
    the engine only passes them back to the device that :meth:`owns` them.
    """

    #: whether torch's inter-process sharing sends this device's tensors to
    #: another process without a copy (CUDA and NPU IPC). Where false the
    #: isolation worker is sent a copy, made in this process, which torch
    #: must be able to pickle (host memory can).
    shares_memory: ClassVar[bool]

    def __init__(self) -> None: ...

    def owns(self, tensor: Any) -> bool:
        """Whether ``tensor`` lives in this device's memory; never raises for another device's tensor."""
        ...

    def index_of(self, tensor: Any) -> int:
        """The unit that holds ``tensor``, one :meth:`owns` accepts."""
        ...

    def in_use(self) -> bool:
        """Whether this process has started using the device (its context exists), asked without starting it.

        Isolation screens a candidate whose arguments hold no tensor of any
        device on the first device in use, at its current unit.
        """
        ...

    def current(self) -> int:
        """The unit this thread's work goes to."""
        ...

    def set_current(self, index: int) -> None:
        """Send this thread's work to unit ``index`` from now on (the isolation worker's first call)."""
        ...

    def synchronize(self) -> None:
        """Wait until the work queued on the current unit has finished; raise what it raised.

        A kernel's fault surfaces here: the isolation worker synchronises
        after each candidate, while that candidate is the one to blame.
        """
        ...

    def check_health(self) -> None:
        """Raise when the device no longer works; return when it does, or was never used here.

        Called in the isolation worker after every candidate, failed or
        not: a fault such as an illegal address reaches Python as an
        ordinary exception but can leave the device unusable, and every later
        call fails. A device that raises here ends the worker, and the
        candidate is screened out with the message. It may synchronise and
        run a tiny piece of work.
        """
        ...

    def release(self) -> None:
        """Hand the memory the device's allocator keeps cached back to the device.

        Called in the isolation worker after each healthy candidate, so that
        what a candidate allocated there is the user's process's to use.
        """
        ...

    def facts(self) -> dict[str, Any]:
        """Plain data describing the device picks depend on (``device``, ``name``, ``count``, ...).

        Merged under the ``kerneltune_hardware_info`` facts into every cache
        key, so a pick made on one device is not reused on another. Read
        once per session; it may start the device.
        """
        ...
