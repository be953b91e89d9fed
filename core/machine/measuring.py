"""The driver's side of MEASURE: taking a candidate's runs and handing back their samples.

:class:`Measuring` is the part of a :class:`~kerneltune.core.machine.tuning.Tuning`
a driver calls once :meth:`~kerneltune.core.machine.tuning.Tuning.next_candidate`
has handed it a candidate: the runs to take (:meth:`Measuring.runs`), the
samples or the failure to record. What runs next, and what is made of the
samples, stay with the tuning; the times the ranks agree on between rounds
are the round API's (:mod:`kerneltune.core.machine.rounds`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kerneltune.core.machine.measure import CandidateRuns, IdleDevice, Wrap, host_times
from kerneltune.core.machine.options import OBJECTIVE
from kerneltune.core.machine.samples import Samples
from kerneltune.core.machine.schedule import Job, Schedule
from kerneltune.core.plugin_system.contracts import Reducer, Timer
from kerneltune.core.plugin_system.session import Session
from kerneltune.core.values.events import CandidateMeasured, Header
from kerneltune.core.values.records import Candidate, Measurement
from kerneltune.core.values.space import Space


class Measuring:
    """A tuning's measurements, as its driver takes them; see the module docstring."""

    def __init__(
        self, session: Session, reducer: Reducer, space: Space, schedule: Schedule, header: Header
    ) -> None:
        self.session = session
        self.reducer = reducer
        self._space = space
        self._schedule = schedule
        self._header = header
        self._measurements = Samples()
        #: the job :meth:`next_candidate` handed out last.
        self._job: Job | None = None
        self._host_us = host_times()
        self._idle = IdleDevice()
        #: batched jobs whose runs are launched and whose samples are not yet collected, in order;
        #: the first one's timer flushes and holds for the whole batch.
        self._parked: list[tuple[Job, CandidateRuns]] = []

    def mean(self, candidate: Candidate) -> float:
        """This rank's mean time of ``candidate`` so far; ``inf`` if it failed or was not measured."""
        return self._measurement(candidate.index).mean

    def samples(self, candidate: Candidate) -> tuple[float, ...]:
        """This rank's samples of ``candidate`` in milliseconds, in the order taken; empty if it failed."""
        measurement = self._measurement(candidate.index)
        return () if measurement.error is not None else measurement.samples

    def runs(self, candidate: Candidate) -> CandidateRuns:
        """The runs to take of ``candidate``, the one :meth:`next_candidate` handed out.

        Take them with :meth:`CandidateRuns.run`, then hand
        :meth:`CandidateRuns.samples` to :meth:`record` (or an exception to
        :meth:`fail`). Each measurement gets a timer of its own, so nothing
        a failed one sampled can reach the next.
        """
        self.settle()
        return self._runs(self._current(candidate), self.session.make_timer())

    def _runs(self, job: Job, timer: Timer, device_work: Timer | None = None) -> CandidateRuns:
        return CandidateRuns(
            timer,
            warmup=job.warmup,
            repeat=job.repeat,
            objective=self.session.settings[OBJECTIVE],
            flush=self._schedule.flush,
            host_us=self._host_us,
            # The first pass alone: interleaved re-timing rounds size the hold from other
            # candidates' host times, so host work can outlast it and leak into device time.
            idle=self._idle if job.stage is None else None,
            before_timing=self._timing_begins,
            after_timing=self._timing_ends,
            device_work=device_work,
            batched=job.batched,
        )

    def _timing_begins(self) -> None:
        """A candidate's timed runs begin; the tuning keeps COMPILE's loads out of them."""

    def _timing_ends(self) -> None:
        """A candidate's timed runs are launched; the tuning lets COMPILE's loads go on."""

    def _current(self, candidate: Candidate) -> Job:
        job = self._job
        if job is None or job.candidate.index != candidate.index:
            raise RuntimeError(
                f"{self._space.name}: candidate [{candidate.index}] is not the one "
                "next_candidate() handed out"
            )
        return job

    def record(self, candidate: Candidate, samples: Sequence[float], *, extend: bool | None = None) -> None:
        """Take back a candidate's timing samples, in milliseconds.

        :param extend: add to the samples this tuning already holds for the
            candidate instead of replacing them; a candidate that failed
            stays failed. Default: as the queued measurement says (the later
            rounds of :meth:`request` extend).
        """
        job = self._job if self._job is not None and self._job.candidate.index == candidate.index else None
        if extend is None:
            extend = job is not None and job.extend
        measurement = self._measurements.take(candidate.index, samples, job, extend)
        if measurement is None:
            return
        if job is None or job.reports:
            self._finish_candidate(measurement)
        else:
            self._measurements.put(measurement)

    def error(self, candidate: Candidate) -> str | None:
        """Why ``candidate`` failed here (compiling, screening or running); ``None`` if it did not."""
        return self._measurements.error(candidate.index)

    def fail(self, candidate: Candidate, error: BaseException) -> None:
        """Record that a candidate raised; it counts as infinitely slow.

        A candidate's first failure in this tuning reaches the observers
        with its traceback (they warn once and log it), and the first
        failure of all becomes the cause of :class:`NoValidConfigError`;
        a :class:`~kerneltune.core.errors.CandidateDropped` is recorded
        alone.
        """
        measurement, trace = self._measurements.failure(candidate.index, error)
        self._finish_candidate(measurement, traceback=trace)

    def measure(
        self,
        candidate: Candidate,
        run: Callable[[], object],
        *,
        around: Callable[[Wrap, Callable[[], object]], object] | None = None,
    ) -> None:
        """Take every run of ``candidate`` by calling ``run``, and record the samples.

        Any exception from ``run`` or the timer, and samples the timer got
        wrong, mark the candidate failed.

        A batched job (:attr:`~kerneltune.core.machine.schedule.Job.batched`,
        a warm start's screen) does not wait for the device: its runs are
        launched, and its samples collected by :meth:`settle`, with the
        rest of its batch, once the batch's last job is launched. Each run
        is still flushed ahead of its start mark, and held for what the flush
        does not cover (see :class:`~kerneltune.core.machine.measure.CandidateRuns`);
        what the batch saves is a synchronise, and the idle device behind it,
        per candidate, and the spin the flush makes up for.

        :param around: called as ``around(wrap, run)`` for each run instead
            of ``wrap(run)``; it must call ``wrap(run)`` once, and what it
            does before and after (resetting in-place arguments) is not timed.
        """
        job = self._current(candidate)
        timer = self.session.make_timer()
        if not job.batched:
            self.settle()
        runs = self._runs(job, timer, self._parked[0][1].timer if job.batched and self._parked else None)
        take = (lambda wrap: wrap(run)) if around is None else (lambda wrap: around(wrap, run))
        try:
            while not runs.finished:
                runs.run(take)
            if job.batched:
                self._parked.append((job, runs))
                return
            samples = runs.samples()
        except Exception as exc:
            self.settle()  # a batch's earlier jobs are recorded first, in order
            self.fail(candidate, exc)
        else:
            self.record(candidate, samples)

    def settle(self) -> None:
        """Collect and record the samples of the batched jobs launched so far, in order.

        One wait for the device serves them all (the first timer's
        ``collect``). A tuning settles before it hands out a job that is not
        batched, and before it decides anything from the measurements.
        """
        parked, self._parked = self._parked, []
        if not parked:
            return
        current = self._job
        for job, runs in parked:
            self._job = job
            try:
                samples = runs.samples()
            except Exception as exc:
                self.fail(job.candidate, exc)
            else:
                self.record(job.candidate, samples)
        self._job = current

    def _finish_candidate(self, measurement: Measurement, traceback: str | None = None) -> None:
        self._measurements.put(measurement)
        job = self._job
        self.session.observers.candidate_measured(
            self._header.make(
                CandidateMeasured,
                candidate=self._space.candidates[measurement.index],
                measurement=measurement,
                traceback=traceback,
                stage=job.stage if job is not None and job.candidate.index == measurement.index else None,
            )
        )

    def _measurement(self, index: int) -> Measurement:
        return self._measurements.get(index)
