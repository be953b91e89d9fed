"""MEASURE: how every tuner times a candidate.

One candidate's measurement is ``warmup`` untimed runs, then ``repeat``
timed runs, taken one at a time by :class:`CandidateRuns`, whatever the
driver. Under the ``"device"`` objective the timer holds the device and
flushes its caches ahead of each timed run, where it can
(:meth:`CandidateRuns._before`); under ``"wall"`` timed runs follow each
other with nothing between them. docs/measuring.md ("The objective") says
what each compares. A timed run taken while the measuring thread was not
running (:func:`ran_throughout`) is not trusted: it is re-taken, a bounded
number of times, and those left are counted for SELECT's verdict.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TypeVar

from kerneltune.core.errors import PluginError
from kerneltune.core.plugin_system.contracts import (
    FlushingTimer,
    FlushTimingTimer,
    HoldingTimer,
    Timer,
    provides,
)
from kerneltune.core.values.records import trimmed

DEVICE = "device"
WALL = "wall"
OBJECTIVES = (DEVICE, WALL)

WARMUP = "warmup"
TIMED = "timed"

#: The device is held before each timed run for this many times the median
#: host time of recent runs (see :func:`hold_microseconds`)...
HOLD_FACTOR = 2.0
#: ...or for this long before any run has been timed on the host...
HOLD_DEFAULT_US = 200.0
#: ...and never longer than this.
HOLD_CAP_US = 2000.0
#: How many recent runs the host-time median is taken over.
HOST_TIMES_KEPT = 8
#: Empty timed runs an :class:`IdleDevice` takes to learn what a run with no device work reads...
IDLE_PROBES = 5
#: ...and how many times that a candidate's median may read and still count as no device work.
IDLE_FACTOR = 2.0

Thunk = Callable[[], object]
#: What a driver's work calls around exactly the part to time.
Wrap = Callable[[Thunk], object]
#: What a driver calls for each run instead of ``wrap(run)``: it calls ``wrap(run)`` once, and what it
#: does before and after (resetting in-place arguments) is not timed.
Around = Callable[[Wrap, Thunk], object]
T = TypeVar("T")

try:
    import resource
except ImportError:  # no getrusage (Windows): every run is trusted
    resource = None  # type: ignore[assignment]
#: The thread's own context switches where the platform counts them (Linux), else the process's...
USAGE_OF = getattr(resource, "RUSAGE_THREAD", getattr(resource, "RUSAGE_SELF", 0))
#: ...and its CPU time, to the nanosecond (``getrusage``'s moves by the scheduler's tick).
CPU_TIME = time.thread_time if hasattr(resource, "RUSAGE_THREAD") else time.process_time
#: A host-timed run is not trusted when the thread spent more than this fraction of it off the CPU...
OFF_CPU = 0.02
#: ...and more than this (seconds): reading the clocks takes about a microsecond.
OFF_CPU_FLOOR_S = 5e-6

#: What :func:`running` reads: the host clock and the thread's CPU time (seconds), and its
#: involuntary and voluntary context switches so far.
Running = tuple[float, float, int, int]


def running() -> Running | None:
    """How long the measuring thread has run so far, to tell whether it ran throughout a timed run."""
    if resource is None:
        return None
    usage = resource.getrusage(USAGE_OF)
    return time.perf_counter(), CPU_TIME(), usage.ru_nivcsw, usage.ru_nvcsw


def ran_throughout(start: Running | None, end: Running | None, *, host_timed: bool) -> bool:
    """Whether the measuring thread ran throughout a timed run, from :func:`running` either side of it.

    The scheduler taking the CPU away (an involuntary context switch)
    stretches a host-timed run by the time the thread was off the CPU, and a
    device-timed one where it falls between the marks' launches, by up to
    as long: such a run is not evidence about the work. A host-timed run
    that spent more than :data:`OFF_CPU` of it off the CPU is not trusted
    when it was switched out or never waited by itself (time taken by the
    hypervisor, which no switch shows); work that waits by itself (a sleep,
    a blocking synchronise, its own threads) is off the CPU by design. A
    device-timed run is not trusted after any involuntary switch.
    """
    if start is None or end is None:
        return True
    switched_out = end[2] > start[2]
    if not host_timed:
        return not switched_out
    wall = end[0] - start[0]
    off_cpu = wall - (end[1] - start[1])
    waited = end[3] > start[3]
    return off_cpu <= max(OFF_CPU * wall, OFF_CPU_FLOOR_S) or (waited and not switched_out)


def hold_microseconds(host_us: Sequence[float]) -> float:
    """How long to keep the device busy ahead of a timed run.

    The host needs about the median of its recent run times (``host_us``,
    microseconds) to get the work onto the device after the start mark;
    holding the device twice that long keeps ordinary jitter out of the
    timed region, and the cap keeps one slow run (a compilation) from
    costing much.
    """
    if not host_us:
        return HOLD_DEFAULT_US
    return min(HOLD_CAP_US, HOLD_FACTOR * statistics.median(host_us))


def host_times() -> deque[float]:
    """A fresh record of recent host run times, in microseconds, for :class:`CandidateRuns`."""
    return deque(maxlen=HOST_TIMES_KEPT)


def format_ms(value: float) -> str:
    """A time in milliseconds for logs and reports; ``inf`` for a failed candidate."""
    return f"{value:.4f} ms" if math.isfinite(value) else "inf"


def standard_error(samples: Sequence[float]) -> float:
    """The standard error of the trimmed samples' mean; ``inf`` with fewer than two."""
    kept = trimmed(list(samples))
    count = len(kept)
    if count < 2 or not all(math.isfinite(s) for s in kept):
        return math.inf
    # In floats: statistics.stdev is exact, through fractions, and took 30 us a call here.
    mean = math.fsum(kept) / count
    variance = math.fsum((s - mean) ** 2 for s in kept) / (count - 1)
    return math.sqrt(variance / count)


class IdleDevice:
    """Whether a tuning's work put anything on the device: one per tuning, shared by its candidates.

    Work that runs on the host alone puts nothing between the device's marks,
    so every candidate reads what an empty run reads and the pick is noise.
    The first :meth:`observe` takes :data:`IDLE_PROBES` empty runs, the fastest
    the floor (NaN, never idle, where a probe raises); :attr:`idle` is true
    once every candidate read at most :data:`IDLE_FACTOR` times it.
    """

    def __init__(self) -> None:
        self.floor_ms: float | None = None
        self.medians: list[float] = []

    def observe(self, median_ms: float, probe: Callable[[], list[float]]) -> None:
        """Note a candidate's median sample; ``probe`` takes and returns empty timed runs' samples."""
        if self.floor_ms is None:
            try:
                probes = probe()
            except Exception:  # a timer that cannot time nothing: no floor, never idle
                probes = []
            self.floor_ms = min(probes) if probes else math.nan
        self.medians.append(median_ms)

    @property
    def idle(self) -> bool:
        """Whether every candidate observed read no more than :data:`IDLE_FACTOR` times an empty run."""
        floor = self.floor_ms
        if floor is None or not self.medians:
            return False
        return all(m <= IDLE_FACTOR * floor for m in self.medians)


class CandidateRuns:
    """The warm-up and timed runs of one candidate, taken one at a time.

    :param timer: a timer plugin instance, for this candidate alone.
    :param host_us: recent host run times (:func:`host_times`), shared by a tuning's candidates
        so that one with no warm-up still gets a hold sized from its predecessors.
    :param flush: evict the device's caches before each timed run, where the timer can.
    :param idle: the tuning's :class:`IdleDevice`, told each candidate's median where runs are held.
    :param before_timing: called once, before the first timed run (COMPILE holds its loads).
    :param after_timing: called once, when the samples are collected (after the empty runs, where
        this candidate takes them for ``idle``).
    :param device_work: the timer whose ``flush`` and ``hold`` go ahead of each timed run
        (default: ``timer``); a batch shares its first one's, and so one flush buffer.
    :param batched: the runs are part of a batch launched without waiting (:meth:`_flush_credit`).
    :param retake: take a timed run again when the thread did not run throughout it
        (:func:`ran_throughout`), at most ``repeat`` times; a driver that counts its runs itself
        (the contextual one) takes none. Either way :attr:`untrusted` counts those kept.
    """

    def __init__(
        self,
        timer: Timer,
        *,
        warmup: int,
        repeat: int,
        objective: str = DEVICE,
        flush: bool = True,
        host_us: deque[float] | None = None,
        idle: IdleDevice | None = None,
        before_timing: Callable[[], object] | None = None,
        after_timing: Callable[[], object] | None = None,
        device_work: Timer | None = None,
        batched: bool = False,
        retake: bool = False,
    ) -> None:
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
        self.timer = timer
        self.warmup = warmup
        self.repeat = repeat
        self.done = 0
        self.host_us = host_times() if host_us is None else host_us
        device = objective == DEVICE
        work = timer if device_work is None else device_work
        self._flush = work.flush if device and flush and provides(work, FlushingTimer) else None
        self._hold = work.hold if device and provides(work, HoldingTimer) else None
        #: how long the flush ahead of each timed run keeps the device busy, where that counts.
        self._flush_time = (
            work.flush_microseconds
            if batched and self._flush is not None and provides(work, FlushTimingTimer)
            else None
        )
        self._idle = idle
        self._before_timing = before_timing
        self._after_timing = after_timing
        #: every hold so far kept the device busy (a timer's ``hold`` returns ``False`` where it cannot).
        self._held = True
        self._host_timed = self._hold is None
        #: whether the thread ran throughout the last timed run (:func:`ran_throughout`).
        self._ran_throughout = True
        self._retakes_left = repeat if retake else 0
        #: whether each timed run taken so far is kept (``False``: untrusted and re-taken).
        self._kept: list[bool] = []
        #: how many of the samples :meth:`samples` returns were taken while the thread was not running.
        self.untrusted = 0

    @property
    def finished(self) -> bool:
        """Whether every run has been taken."""
        return self.done >= self.warmup + self.repeat

    @property
    def phase(self) -> str:
        """:data:`WARMUP` or :data:`TIMED`: what the next run is."""
        return WARMUP if self.done < self.warmup else TIMED

    @property
    def round(self) -> int:
        """The next run's number within its phase, from 1."""
        return self.done + 1 if self.done < self.warmup else self.done - self.warmup + 1

    def run(self, work: Callable[[Wrap], T]) -> T:
        """Take the next run: ``work(wrap)`` must call ``wrap(thunk)`` once around exactly the work to time.

        The driver keeps what must stay untimed (a kernel's own hooks)
        outside ``thunk``. Returns what ``work`` returns.
        """
        if self.finished:
            raise RuntimeError("every run of this candidate has been taken")
        timed = self.phase == TIMED
        if timed and not self._kept and self._before_timing is not None:
            self._before_timing()
        self.done += 1
        if not timed:
            return work(self._hosted)
        self._ran_throughout = True
        result = work(self._timed)
        retaken = not self._ran_throughout and self._retakes_left > 0
        if retaken:
            self._retakes_left -= 1
            self.done -= 1
        else:
            self.untrusted += not self._ran_throughout
        self._kept.append(not retaken)
        return result

    def samples(self) -> list[float]:
        """Collect the timed runs' samples in milliseconds, checked.

        :raises PluginError: when the timer returns other than one finite,
            non-negative number per timed run; it names the timer.
        """
        # The first candidate's empty runs (IdleDevice) are timed runs too: nothing beside them.
        if self._idle is None or self._idle.floor_ms is not None:
            self._timing_over()
        samples = self.timer.collect()
        name = getattr(self.timer, "name", type(self.timer).__name__)
        taken = len(self._kept)
        if not isinstance(samples, list | tuple) or len(samples) != taken:
            count = len(samples) if isinstance(samples, list | tuple) else type(samples).__name__
            raise PluginError(f"timer {name!r} returned {count} samples for {taken} timed runs")
        for sample in samples:
            if isinstance(sample, bool) or not isinstance(sample, int | float) or not 0 <= sample < math.inf:
                raise PluginError(f"timer {name!r} returned a sample of {sample!r} ms")
        checked = [float(s) for s, kept in zip(samples, self._kept, strict=True) if kept]
        # Without a hold, an empty run's marks span the host's launch as well, and a tiny
        # kernel can read as little: only held runs tell an idle device apart.
        if self._idle is not None and self._hold is not None and self._held and checked:
            self._idle.observe(statistics.median(checked), self._empty_runs)
        self._timing_over()
        return checked

    def _timing_over(self) -> None:
        """Call ``after_timing``, once."""
        if self._after_timing is not None:
            after, self._after_timing = self._after_timing, None
            after()

    def _empty_runs(self) -> list[float]:
        """:data:`IDLE_PROBES` timed runs with nothing between the marks, set up as every timed run is."""
        for _ in range(IDLE_PROBES):
            self._sample(lambda: None)
        return [float(s) for s in self.timer.collect()]

    def _hosted(self, thunk: Thunk) -> None:
        started = time.perf_counter()
        thunk()
        self.host_us.append((time.perf_counter() - started) * 1e6)

    def _timed(self, thunk: Thunk) -> None:
        start = running()
        self._sample(lambda: self._hosted(thunk))
        self._ran_throughout = ran_throughout(start, running(), host_timed=self._host_timed)

    def _sample(self, fn: Thunk) -> None:
        """One timed run of ``fn``, the flush and hold (where there are) ahead of its start mark."""
        before = self._before()
        if before is None:
            # Timers written before ``before`` existed take only ``fn``.
            self.timer.sample(fn)
        else:
            self.timer.sample(fn, before=before)

    def _flush_credit(self) -> float:
        """In a batch, how long the flush keeps the device busy, in microseconds (0 where unknown).

        The hold need only make up what the flush does not cover. Outside a
        batch the hold is whole, so that the first pass's empty runs
        (:class:`IdleDevice`) are set up as every timed run is.
        """
        if self._flush_time is None:
            return 0.0
        known = self._flush_time()
        return known if known is not None and math.isfinite(known) and known > 0 else 0.0

    def _before(self) -> Thunk | None:
        """What the timer runs right before its start mark: the hold, then the flush.

        Both go inside the timer's set-up: enqueued earlier, the device could
        finish them and sit idle inside the timed region. The hold is twice
        the host's recent launch time (:func:`hold_microseconds`), less what
        a batch's flush covers (:meth:`_flush_credit`). The flush comes last,
        as in Triton's ``do_bench``: a spin between them let the device write
        the flush's dirty lines back first, and a matmul's near ties ranked otherwise.
        """
        flush, hold = self._flush, self._hold
        if hold is not None:
            microseconds = hold_microseconds(self.host_us) - self._flush_credit()

            def hold_then_flush() -> None:
                if microseconds > 0 and hold(microseconds) is False:
                    self._held = False
                if flush is not None:
                    flush()

            return hold_then_flush
        return flush
