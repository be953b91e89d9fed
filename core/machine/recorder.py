"""The driver's side of MEASURE: taking a candidate's runs and recording their samples.

A :class:`Recorder` serves the job the tuning handed out last
(:meth:`Recorder.hand_out`); what runs next, and what is made of the
samples, stay with the tuning.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kerneltune.core.machine.failed_configs import expected_failure
from kerneltune.core.machine.options import OBJECTIVE
from kerneltune.core.machine.samples import Samples
from kerneltune.core.machine.schedule import Job, Schedule
from kerneltune.core.machine.timing import Around, CandidateRuns, IdleDevice, host_times
from kerneltune.core.plugin_system.contracts import ExpectingTimer, Timer, provides
from kerneltune.core.plugin_system.session import Session
from kerneltune.core.values.events import CandidateMeasured, Header
from kerneltune.core.values.records import Candidate, Measurement
from kerneltune.core.values.space import Space


class Recorder:
    """A tuning's measurements, as its driver takes them."""

    def __init__(
        self,
        session: Session,
        space: Space,
        schedule: Schedule,
        header: Header,
        measurements: Samples,
        *,
        before_timing: Callable[[], None],
        after_timing: Callable[[], None],
        retake: bool = True,
        on_failure: Callable[[Candidate, BaseException], None] | None = None,
    ) -> None:
        """:param measurements: the tuning's samples, which this records into.

        :param before_timing: called as a candidate's timed runs begin (COMPILE holds its loads).
        :param after_timing: called once they are launched (COMPILE's loads go on).
        :param retake: take again a timed run the thread was switched out of; only alone, as ranks
            must run a candidate alike (its work may hold collectives of its own).
        :param on_failure: told each failure :meth:`fail` records (the failed-config memory).
        """
        self.session = session
        self._space = space
        self._schedule = schedule
        self._header = header
        self._measurements = measurements
        self._before_timing = before_timing
        self._after_timing = after_timing
        self._retake = retake
        self._on_failure = on_failure
        #: the job handed out last (:meth:`hand_out`).
        self._job: Job | None = None
        #: what the device did in the first pass's timed runs, for SELECT's warning.
        self.idle = IdleDevice()
        self._host_us = host_times()
        #: batched jobs whose runs are launched and whose samples are not yet collected, in order;
        #: the first one's timer flushes and holds for the whole batch.
        self._parked: list[tuple[Job, CandidateRuns]] = []
        #: the runs :meth:`runs` handed to the driver for the job handed out last.
        self._handed: CandidateRuns | None = None
        #: the fastest mean before the first re-timing round, told to each of its timers that take it.
        self._fastest: float | None = None

    def hand_out(self, job: Job) -> None:
        """``job`` is the one the driver measures next."""
        self._job = job
        self._handed = None

    def runs(self, candidate: Candidate) -> CandidateRuns:
        """The runs to take of ``candidate``, the one handed out last (:meth:`hand_out`).

        Take them with :meth:`CandidateRuns.run`, then hand
        :meth:`CandidateRuns.samples` to :meth:`record` (or an exception to
        :meth:`fail`). Each measurement gets a timer of its own, so nothing
        a failed one sampled can reach the next.
        """
        self.settle()
        job = self._current(candidate)
        self._handed = self._runs(job, self._timer(job))
        return self._handed

    def _timer(self, job: Job) -> Timer:
        """A timer for ``job``: precise for a re-timing round, not for the first pass or a batched screen.

        A round's timer that takes it is told the fastest mean measured before the tuning's first
        round (:meth:`~kerneltune.core.plugin_system.contracts.ExpectingTimer.expect`), the same for
        every candidate, so that every round times them alike.
        """
        precise = job.stage is not None and not job.batched
        timer = self.session.make_timer(precise=precise)
        if precise and provides(timer, ExpectingTimer):
            if self._fastest is None:
                measured = self._measurements.measured()
                self._fastest = min((self._measurements.get(i).mean for i in measured), default=0.0)
            timer.expect(self._fastest)
        return timer

    def _runs(
        self, job: Job, timer: Timer, device_work: Timer | None = None, *, retake: bool = False
    ) -> CandidateRuns:
        return CandidateRuns(
            timer,
            warmup=job.warmup,
            repeat=job.repeat,
            objective=self.session.settings[OBJECTIVE],
            flush=self._schedule.flush,
            host_us=self._host_us,
            # The first pass alone: interleaved re-timing rounds size the hold from other
            # candidates' host times, so host work can outlast it and leak into device time.
            idle=self.idle if job.stage is None else None,
            before_timing=self._before_timing,
            after_timing=self._after_timing,
            device_work=device_work,
            batched=job.batched,
            retake=retake,
        )

    def _current(self, candidate: Candidate) -> Job:
        job = self._job
        if job is None or job.candidate.index != candidate.index:
            raise RuntimeError(
                f"{self._space.name}: candidate [{candidate.index}] is not the one "
                "next_candidate() handed out"
            )
        return job

    def record(
        self,
        candidate: Candidate,
        samples: Sequence[float],
        *,
        extend: bool | None = None,
        untrusted: int | None = None,
    ) -> None:
        """Take back a candidate's timing samples, in milliseconds.

        :param extend: add to the samples this tuning already holds for the
            candidate instead of replacing them; a candidate that failed
            stays failed. Default: as the queued measurement says (the later
            rounds of :meth:`request` extend).
        :param untrusted: how many of ``samples`` were taken while the thread was not
            running (default: as the runs :meth:`runs` handed out for the job counted,
            :attr:`CandidateRuns.untrusted`; none for samples of a driver's own).
        """
        job = self._job if self._job is not None and self._job.candidate.index == candidate.index else None
        if extend is None:
            extend = job is not None and job.extend
        if untrusted is None:
            untrusted = self._handed.untrusted if job is not None and self._handed is not None else 0
        measurement = self._measurements.take(candidate.index, samples, job, extend, untrusted)
        if measurement is None:
            return
        if job is None or job.reports:
            self._finish_candidate(measurement)
        else:
            self._measurements.put(measurement)

    def fail(self, candidate: Candidate, error: BaseException) -> None:
        """Record that a candidate raised; it counts as infinitely slow.

        Its first failure reaches the observers with its traceback, unless
        it is an expected drop (:func:`~.failed_configs.expected_failure`); the first
        failure of all becomes the cause of :class:`NoValidConfigError`.
        """
        expected = expected_failure(self.session, error)
        measurement, trace = self._measurements.failure(candidate.index, error, expected=expected)
        if self._on_failure is not None:
            self._on_failure(candidate, error)
        self._finish_candidate(measurement, traceback=trace)

    def measure(
        self, candidate: Candidate, run: Callable[[], object], *, around: Around | None = None
    ) -> None:
        """Take every run of ``candidate`` by calling ``run``, and record the samples.

        An exception from ``run`` or the timer, or wrong samples, fail the
        candidate. A batched job (:attr:`~kerneltune.core.machine.schedule.Job.batched`)
        does not wait for the device: :meth:`settle` collects its batch's
        samples, which saves a synchronise, and the idle device behind it, per candidate.

        :param around: called for each run instead of ``wrap(run)`` (:data:`~.timing.Around`).
        """
        job = self._current(candidate)
        timer = self._timer(job)
        if not job.batched:
            self.settle()
        work = self._parked[0][1].timer if job.batched and self._parked else None
        runs = self._runs(job, timer, work, retake=self._retake)
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
            self.record(candidate, samples, untrusted=runs.untrusted)

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
                self.record(job.candidate, samples, untrusted=runs.untrusted)
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
