"""One pass of the tuning state machine for one key: a :class:`Tuning`.

``Tuner.begin`` makes one and prepares it (LOOKUP, PRUNE, AGREE); the driver
steps it through the rest. docs/architecture.md ("The stages") draws the machine.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from kerneltune.core.errors import (
    NoValidConfigError,
)
from kerneltune.core.machine import collector
from kerneltune.core.machine.agreement import check_picks
from kerneltune.core.machine.decision import decide
from kerneltune.core.machine.faces import SearchTuning
from kerneltune.core.machine.following import Following
from kerneltune.core.machine.keeper import PickKeeper
from kerneltune.core.machine.options import OBJECTIVE, TWINS
from kerneltune.core.machine.planning import MeasurePlanner
from kerneltune.core.machine.readiness import Readiness
from kerneltune.core.machine.recorder import Recorder
from kerneltune.core.machine.reduce import reduce_measurements
from kerneltune.core.machine.samples import Samples
from kerneltune.core.machine.schedule import Setup
from kerneltune.core.machine.select import flag_idle_device, outcome, verdict_fields
from kerneltune.core.machine.serving import flush_marks, serves, untuned
from kerneltune.core.machine.timing import WALL, Around, CandidateRuns
from kerneltune.core.machine.twins import Twins
from kerneltune.core.plugin_system.contracts import (
    CompileProcess,
    GlobalRankReducer,
    HoldingTimer,
    PreciseTimer,
    SearchStrategy,
    provides,
)
from kerneltune.core.plugin_system.seam import fault, origin
from kerneltune.core.plugin_system.settings import Settings
from kerneltune.core.search.strategies import choose_strategy
from kerneltune.core.values.events import Header, TuningFinished, TuningStarted
from kerneltune.core.values.records import Candidate


class Tuning(SearchTuning):
    """One pass of the machine for one key, driven from outside.

    A coordinator of parts that own their state (a ``MeasurePlanner``, a
    ``Recorder``, ``Readiness``, a ``PickKeeper``; :func:`~kerneltune.core.machine.select.outcome`
    is the pick). Its members are documented on the faces drivers see
    (:mod:`kerneltune.core.machine.faces`).
    """

    def __init__(self, setup: Setup, *, paused_gc: bool = False) -> None:
        """Hold ``setup``; nothing runs until :meth:`prepare` (``Tuner.begin`` makes and prepares one).

        :param paused_gc: ``Tuner.begin`` held the garbage collector off for this tuning
            (:func:`~kerneltune.core.machine.collector.hold_off`); :meth:`__exit__` lets it go.
        """
        self._paused_gc = paused_gc
        #: the candidate list tuned.
        self.space = setup.space
        self.session = session = setup.session
        self.reducer = reducer = setup.reducer
        self.key = setup.key
        self.verbose = setup.verbose
        self.driver = setup.driver
        self.schedule = setup.schedule
        self._setup = setup
        self._lock = setup.lock
        self._log_dir = session.cache_directory(self.space.name)
        # Per-rank files are named by the rank in the job: subgroups restart at 0.
        self._global_rank = reducer.global_rank if provides(reducer, GlobalRankReducer) else reducer.rank
        self._header = Header(
            self.space.name, self.key, self._global_rank, self.verbose, self._log_dir, self.driver
        )
        settings, timer = session.settings, session.timer
        host_clock = settings[OBJECTIVE] == WALL or not provides(timer, HoldingTimer)
        self._ready = Readiness(
            session, reducer, self._header, sharded=self.schedule.shard, beside=not host_clock
        )
        self._measurements = Samples()
        self._recorder = Recorder(
            session,
            self.space,
            self.schedule,
            self._header,
            self._measurements,
            before_timing=self._ready.timing_begins,
            after_timing=self._ready.timing_ends,
            retake=self.reducer.world_size == 1,
            on_failure=None
            if setup.failed is None
            else functools.partial(setup.failed.note, session, setup.dtypes),
        )
        self._following = Following(setup.space)
        self._planner = MeasurePlanner(
            self.schedule,
            self._following,
            self._measurements,
            reducer,
            host_clock=host_clock,
            warm_budget=setup.warm.budget,
            precise=provides(timer, PreciseTimer),
        )
        self._queue = self._planner.queue
        self._started = time.perf_counter()
        self._keeper = PickKeeper(setup, self._header)
        self._verify_pick = False
        self.best: Candidate | None = None
        self.agreed: tuple[float, ...] = ()
        self.seconds: float | None = None

    # -- context manager: the per-key lock is held from begin() to exit ------

    @property
    def header(self) -> Header:
        return self._header

    def __enter__(self) -> Tuning:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self._ready.close()
        finally:
            if self._paused_gc:
                self._paused_gc = False
                collector.let_go()
            self._lock.release()

    @property
    def reused(self) -> dict[int, float]:
        return {i: row[0] for i, row in self._following.stored(self._measurements).items()}

    @property
    def hit(self) -> bool:
        return self.best is not None and not self._measurements

    # -- LOOKUP, PRUNE, AGREE ---------------------------------------------------

    def prepare(self, keep: Callable[[Candidate], bool] | None, failure: BaseException | None) -> None:
        """LOOKUP, PRUNE and AGREE (:func:`~.decision.decide`), then follow the decision."""
        if failure is None:
            self.best = self._setup.picks.get(self.key)
            if self.best is not None:
                return
        decision = decide(self._setup, keep, failure, log_dir=self._log_dir, global_rank=self._global_rank)
        self._keeper.writers = decision.writers
        self._verify_pick = decision.verify_pick
        self._ready.neighbours = decision.neighbours
        if decision.pick is not None:
            assert decision.record is not None
            self.best = self._keeper.adopt(decision.pick, decision.record, store=decision.store)
            self._keeper.loaded(self.best, decision.source, decision.record.confidence)
            if serves(self.session.settings, self.reducer.world_size):
                self._setup.stored.read_ahead(self.session, self.space)
        elif untuned(self.session.settings, decision.pending):
            self.best = self._keeper.untuned(decision.kept, decision.damaged)
        else:
            flush_marks()  # a served key's mark, written by a thread: not beside the timed runs
            measured = self._planner.start(decision.plan, decision.record, decision.kept, self.key)
            self._measurements.prune(self.space.candidates, decision.kept)
            # Alone only: ranks must run a candidate alike, and their memories may differ.
            if self._setup.failed is not None and self.reducer.world_size == 1:
                self._ready.remembered = self._setup.failed.remembered(self.session, self._setup.dtypes)
            self.session.observers.tuning_started(
                self._header.make(TuningStarted, candidates=measured, world_size=self.reducer.world_size)
            )

    @property
    def rechecking(self) -> tuple[Candidate, ...]:
        return self._following.rechecking() if self.schedule.adaptive else ()

    # -- MEASURE -----------------------------------------------------------------

    def next_candidate(self) -> Candidate | None:
        if self.best is not None:
            return None
        self._ready.begin_measuring(self.space.name)
        while True:
            if not self._queue.batched_next():
                self._recorder.settle()
            job = self._planner.next_job(self.key, self.space.candidates)
            if job is None:
                return None
            problem = self._ready.problem(job.candidate)
            # After the wait: a rank that compiled a candidate for its host holds
            # the others here until Triton's cache has it. With twins, the barrier
            # carries each rank's verdict, so that every rank drops alike.
            if self.reducer.world_size > 1 and not self.schedule.shard:
                problem = self._ready.barrier_with_twins(job.candidate, problem, self.reducer)
            self._recorder.hand_out(job)
            if problem is None:
                return job.candidate
            self.fail(job.candidate, problem)

    def compile(
        self,
        compile_one: Callable[[Candidate], object],
        candidates: Iterable[Candidate] | None = None,
        *,
        child: CompileProcess | None = None,
    ) -> None:
        if self.best is not None:
            return
        self._ready.compile(compile_one, self.queued() if candidates is None else list(candidates), child)

    def twins(
        self,
        program_of: Callable[[Candidate], Hashable | None],
        options: Callable[[Candidate], Mapping[str, object]] | None = None,
    ) -> None:
        if self.best is None and self.session.settings[TWINS] and not self.schedule.shard:
            self._ready.twins = Twins(self.space.name, program_of, options)

    def measured_as(self, candidate: Candidate) -> Candidate:
        twins = self._ready.twins
        index = candidate.index if twins is None else twins.dropped.get(candidate.index, candidate.index)
        return self.space.candidates[index]

    @property
    def twin_of(self) -> dict[int, int]:
        twins = self._ready.twins
        return {} if twins is None else dict(twins.dropped)

    def isolate(
        self, screen_one: Callable[[Candidate], object], candidates: Iterable[Candidate] | None = None
    ) -> dict[int, str]:
        if self.best is not None:
            return {}
        return self._ready.isolate(screen_one, self.queued() if candidates is None else candidates)

    def queued(self) -> list[Candidate]:
        return self._queue.candidates(self._ready.screened)

    def request(
        self,
        candidates: Iterable[Candidate],
        *,
        warmup: int | None = None,
        repeat: int | None = None,
        rounds: int = 1,
        purpose: str = "",
    ) -> None:
        """Queue candidates for :meth:`next_candidate`, in order; every rank must request the same.

        A candidate measured before is measured again, its first new measurement replacing the
        old one; with ``rounds`` above one, in that many interleaved rounds that add to the
        first's samples. ``warmup`` and ``repeat`` default to the tuning's; ``purpose`` is what
        the observers' events say the measurements are for.

        :raises ValueError: for a candidate that was pruned.
        """
        listed = list(candidates)
        for candidate in listed:
            if self._measurements.pruned(candidate.index):
                raise ValueError(f"{self.space.name}: candidate [{candidate.index}] was pruned")
        self._queue.request(listed, warmup=warmup, repeat=repeat, rounds=rounds, purpose=purpose)

    def round(
        self,
        candidates: Sequence[Candidate],
        run: Callable[[Candidate], Callable[[], object]],
        *,
        failed: Mapping[int, BaseException] | None = None,
        compile_one: Callable[[Candidate], object] | None = None,
        child: CompileProcess | None = None,
        repeat: int | None = None,
        rounds: int = 1,
        purpose: str = "",
        ahead: Sequence[Candidate] = (),
        around: Callable[[Candidate], Around | None] | None = None,
    ) -> list[float]:
        listed = list(candidates)
        failed = failed or {}
        self.request(listed, repeat=repeat, rounds=rounds, purpose=purpose)
        if compile_one is not None:
            skip = {*failed, *self._ready.screened}
            self.compile(compile_one, [c for c in listed if c.index not in skip], child=child)
            if self.best is None:
                here = {c.index for c in listed}
                later = [c for c in ahead if c.index not in here and c.index not in self._ready.screened]
                self._ready.ahead(compile_one, later, child)
        while (candidate := self.next_candidate()) is not None:
            problem = failed.get(candidate.index)
            if problem is not None:
                self.fail(candidate, problem)
            else:
                self.measure(candidate, run(candidate), around=None if around is None else around(candidate))
        return self.times(listed)

    # -- the driver's side of MEASURE: the recorder's -------------------------

    def runs(self, candidate: Candidate) -> CandidateRuns:
        return self._recorder.runs(candidate)

    def measure(
        self, candidate: Candidate, run: Callable[[], object], *, around: Around | None = None
    ) -> None:
        self._recorder.measure(candidate, run, around=around)

    def record(self, candidate: Candidate, samples: Sequence[float], *, extend: bool | None = None) -> None:
        self._recorder.record(candidate, samples, extend=extend)

    def fail(self, candidate: Candidate, error: BaseException) -> None:
        self._recorder.fail(candidate, error)

    def mean(self, candidate: Candidate) -> float:
        return self._measurements.get(candidate.index).mean

    def samples(self, candidate: Candidate) -> tuple[float, ...]:
        measurement = self._measurements.get(candidate.index)
        return () if measurement.error is not None else measurement.samples

    def error(self, candidate: Candidate) -> str | None:
        return self._measurements.error(candidate.index)

    # -- the round API: what an adaptive driver asks between rounds -----------

    @property
    def candidates(self) -> tuple[Candidate, ...]:
        return self.space.candidates

    @property
    def settings(self) -> Settings:
        return self.session.settings

    @property
    def world_size(self) -> int:
        return self.reducer.world_size

    def max_over_ranks(self, values: Sequence[float]) -> list[float]:
        listed = [float(v) for v in values]
        return list(self.reducer.max(listed)) if self.world_size > 1 else listed

    def gather(self, value: Any) -> list[Any]:
        return self.reducer.gather(value) if self.world_size > 1 else [value]

    def times(self, candidates: Sequence[Candidate]) -> list[float]:
        """REDUCE now: each candidate's mean over :meth:`max_over_ranks` (``inf``: failed or unmeasured)."""
        return self.max_over_ranks([self._measurements.get(c.index).mean for c in candidates])

    def strategy(self, hinted: str | None = None, where: str | None = None) -> SearchStrategy:
        return choose_strategy(self.session, hinted, where)

    def origin(self, strategy: SearchStrategy) -> str:
        return origin(self.session.manager, self._owner(strategy))

    def fault(self, strategy: SearchStrategy, what: str, consequence: str) -> None:
        fault(self.session.manager, self._owner(strategy), what, consequence)

    def _owner(self, strategy: SearchStrategy) -> str:
        return self.session.registries.search_strategies.owners.get(strategy.name, strategy.name)

    # -- REDUCE, SELECT, PERSIST ---------------------------------------------

    def finish(self, among: Iterable[Candidate] | None = None, *, persist: bool = True) -> Candidate:
        if self.best is not None and not self._measurements:
            return self.best
        self._recorder.settle()
        if self._queue:
            raise RuntimeError(f"finish() with {len(self._queue)} candidates still unmeasured")
        candidates = self.space.candidates
        measurements = [self._measurements.get(c.index) for c in candidates]
        sharded = self._measurements.measured() if self.schedule.shard else None
        agreed = reduce_measurements(self.reducer, measurements, rounds=self._queue.rounds, sharded=sharded)
        reduced, times = agreed.reduced, agreed.reduced.times
        seconds = time.perf_counter() - self._started
        self.agreed, self.seconds = tuple(times), seconds
        result = outcome(
            agreed,
            measurements,
            among,
            ties=self._planner.ties,
            follow=self._following,
            session=self.session,
            encoded=self._setup.encoded,
            schedule=self.schedule,
            measured=self._measurements.by_index,
            world_size=self.reducer.world_size,
        )
        best, allowed = result.choice.best, result.choice.allowed
        self.session.observers.tuning_finished(
            self._header.make(
                TuningFinished,
                candidates=candidates,
                times=times,
                best=None if best is None else candidates[best],
                seconds=seconds,
                rank_times=reduced.rank_times,
                errors=tuple(m.error for m in measurements),
                dropped=self._measurements.left_out(),
                measured_elsewhere=agreed.elsewhere,
                world_size=self.reducer.world_size,
                measured_on=agreed.owners,
                recheck=self._following.rechecked is not None,
                **verdict_fields(result.verdict),
            )
        )
        if best is None or result.record is None:
            report = self._measurements.report(self.space.name, self.key, candidates, allowed)
            raise NoValidConfigError(report) from self._measurements.first_failure
        # Its traceback holds the failed run's frames, and with them its arguments.
        self._measurements.first_failure = None
        record = flag_idle_device(self.space.name, self._recorder.idle, result.record)
        if self._verify_pick:
            check_picks(self.reducer, best, self.space.name)
        if not persist:
            self.best = candidates[best]
            return self.best
        self.best = self._keeper.adopt(best, record, store=True)
        return self.best
