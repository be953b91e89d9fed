"""One pass of the tuning state machine for one key: a :class:`Tuning`.

``Tuner.begin`` (:mod:`kerneltune.core.machine.engine`) makes one and runs its
LOOKUP, PRUNE and AGREE (:meth:`Tuning.prepare`); the driver then steps it
through COMPILE, MEASURE, REDUCE, SELECT and PERSIST (LOOKUP, PRUNE and
AGREE are :func:`~kerneltune.core.machine.decision.decide`'s).
docs/architecture.md ("The stages") draws the whole machine.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import TypeVar

import attrs
from kerneltune.core.errors import (
    NoValidConfigError,
)
from kerneltune.core.machine import collector
from kerneltune.core.machine.agreement import check_picks
from kerneltune.core.machine.decision import decide, untuned_pick
from kerneltune.core.machine.following import Following
from kerneltune.core.machine.measure import WALL
from kerneltune.core.machine.options import OBJECTIVE, TIE_ROUNDS, TUNE, TUNE_AUTO, TWINS
from kerneltune.core.machine.queue import MeasureQueue
from kerneltune.core.machine.readiness import Readiness
from kerneltune.core.machine.reuse import Plan, explain
from kerneltune.core.machine.rounds import Rounds
from kerneltune.core.machine.schedule import Setup
from kerneltune.core.machine.select import agree, choose, verdict_fields, warn_if_idle
from kerneltune.core.machine.shard import share
from kerneltune.core.machine.ties import NearTies, agreed_finalists
from kerneltune.core.machine.twins import Twins
from kerneltune.core.machine.warm_start import FINALIST_REPEAT, SCREEN_REPEAT, SCREEN_WARMUP, screen_finalists
from kerneltune.core.plugin_system.contracts import CompileProcess, GlobalRankReducer, HoldingTimer, provides
from kerneltune.core.values.events import Header, PickLoaded, TuningFinished, TuningStarted
from kerneltune.core.values.records import NOT_MEASURED, PRUNED, Candidate, TuningRecord

logger = logging.getLogger("kerneltune")

E = TypeVar("E", bound=attrs.AttrsInstance)

__all__ = ["NOT_MEASURED", "PRUNED", "Tuning"]


class Tuning(Rounds):
    """One pass of the machine for one key, driven from outside; see the module docstring.

    The driver's side of MEASURE (taking runs, recording samples and
    failures) is :class:`~kerneltune.core.machine.measuring.Measuring`'s; the
    round API an adaptive driver uses is :meth:`round` and
    :class:`~kerneltune.core.machine.rounds.Rounds`.
    """

    def __init__(self, setup: Setup, *, paused_gc: bool = False) -> None:
        """Hold ``setup``; nothing runs until :meth:`prepare` (``Tuner.begin`` makes and prepares one).

        :param paused_gc: ``Tuner.begin`` held the garbage collector off for this tuning
            (:func:`~kerneltune.core.machine.collector.hold_off`); :meth:`__exit__` lets it go.
        """
        self._paused_gc = paused_gc
        #: the candidate list tuned.
        self.space = setup.space
        self._picks, self._records = setup.picks, setup.records
        session, reducer = setup.session, setup.reducer
        self.key = setup.key
        self.verbose = setup.verbose
        self.driver = setup.driver
        self._setup = setup
        self._encoded = setup.encoded
        self._entry = setup.entry
        self._lock = setup.lock
        self._space = setup.space
        log_dir = session.cache_directory(self._space.name)
        # Per-rank files are named by the rank in the job: subgroups restart at 0.
        self._global_rank = reducer.global_rank if provides(reducer, GlobalRankReducer) else reducer.rank
        self._log_dir = log_dir
        #: what every event of this tuning says about it.
        self._header = Header(
            self._space.name, self.key, self._global_rank, self.verbose, log_dir, self.driver
        )
        super().__init__(session, reducer, self._space, setup.schedule, self._header)
        self._ready = Readiness(
            session, reducer, self._header, sharded=setup.schedule.shard, beside=not self._host_clock()
        )
        self._plan = Following(setup.space)
        self._queue = MeasureQueue(setup.schedule)
        self._ties_planned = setup.schedule.adaptive
        self._ties = NearTies()
        self._started = time.perf_counter()
        self._writers: frozenset[int] = frozenset({reducer.rank})
        self._verify_pick = False
        self.best: Candidate | None = None
        #: set by :meth:`finish` once it has reduced what was measured: each candidate's time as the
        #: ranks agreed on it (``inf``: failed, pruned or not measured), and the seconds from the
        #: tuning's start to then; empty and ``None`` for a pick found without measuring.
        self.agreed: tuple[float, ...] = ()
        self.seconds: float | None = None

    # -- context manager: the per-key lock is held from begin() to exit ------

    @property
    def header(self) -> Header:
        """What every event of this tuning says about it: a driver's own events are made from it too."""
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
        """The stored time of each candidate an earlier tuning of this key measured, and this one has not.

        Filled when the key's record was made for another candidate list
        (:mod:`kerneltune.core.machine.reuse`), alike on every rank (``inf``: it
        failed). An adaptive driver may take these times instead of
        measuring; :meth:`finish` still selects among measured candidates only.
        """
        return {i: row[0] for i, row in self._plan.stored(self._measurements).items()}

    @property
    def hit(self) -> bool:
        """Whether a pick was found without measuring (in-process, disk or another rank)."""
        return self.best is not None and not self._measurements

    # -- LOOKUP, PRUNE, AGREE ---------------------------------------------------

    def prepare(self, keep: Callable[[Candidate], bool] | None, failure: BaseException | None) -> None:
        """LOOKUP, PRUNE and AGREE: find the pick, or decide with the other ranks what to measure.

        :param keep: the prune predicate; ``False`` drops a candidate.
        :param failure: what went wrong computing the key, reported to every rank.
        """
        if failure is None:
            self.best = self._picks.get(self.key)
            if self.best is not None:
                return
        self._prepare(keep, failure)

    def _prepare(self, keep: Callable[[Candidate], bool] | None, failure: BaseException | None) -> None:
        decision = decide(self._setup, keep, failure, log_dir=self._log_dir, global_rank=self._global_rank)
        self._writers = decision.writers
        self._verify_pick = decision.verify_pick
        self._ready.neighbours = decision.neighbours
        if decision.pick is not None:
            assert decision.record is not None
            self._adopt(decision.pick, decision.record, store=decision.store)
            self._loaded(decision.source, decision.record.confidence)
        elif self.session.settings[TUNE] != TUNE_AUTO:
            self._untuned(decision.kept)
        else:
            self._follow(decision.plan, decision.record, decision.kept)

    def _follow(self, plan: Plan | None, shared: TuningRecord | None, kept: tuple[int, ...]) -> None:
        """Queue what the plan (or, without one, every kept candidate) says to measure."""
        follow = self._plan
        measured = follow.follow(plan, shared, kept)
        if plan is not None:
            explain(
                self._space.name,
                self.key,
                rechecked=follow.rechecked,
                rounds=self.recheck_rounds,
                warm_start=follow.warm_start,
                carried=len(follow.carried),
                scoped=bool(follow.scope),
                measuring=len(measured),
                kept=len(kept),
            )
        # An adaptive driver queues candidates itself, round by round (a re-check too: see rechecking).
        if self._schedule.shard:
            self._ties_planned = True
            self.request(share(measured, self.reducer.rank, self.reducer.world_size))
        elif follow.rechecked is not None:
            if not self._schedule.adaptive:
                self._queue.head_to_head(
                    measured, rounds=self.recheck_rounds, purpose="re-check", one_by_one=True
                )
        elif follow.scope is not None:
            self._queue.head_to_head(measured)
        elif follow.screening is not None:
            self._queue.request(
                measured,
                warmup=SCREEN_WARMUP,
                repeat=SCREEN_REPEAT,
                purpose="warm-start screen",
                batched=True,
            )
        elif not self._schedule.adaptive:
            self._first_pass(measured)
        self._measurements.prune(self._space.candidates, kept)
        self.session.observers.tuning_started(
            self._header.make(TuningStarted, candidates=measured, world_size=self.reducer.world_size)
        )

    def _untuned(self, kept: tuple[int, ...]) -> None:
        """A key no rank holds a pick for, under ``tune = "never"`` or ``"fail"``.

        ``never``: the first candidate kept runs, unmeasured and not stored
        (kept in-process, so later calls dispatch straight to it); ``fail``:
        :class:`NoStoredPickError`. With several ranks this follows the
        agreement, whose verdict every rank shares, so all ranks do alike.
        """
        first = untuned_pick(self.session.settings, self._space.name, self.key, kept, self.driver)
        self.best = self._space.candidates[first]
        self._picks[self.key] = self.best
        self._loaded("default")

    def _first_pass(self, candidates: tuple[Candidate, ...]) -> None:
        """Queue the first pass; on the host's clock, in two rounds (:meth:`MeasureQueue.first_pass`).

        ``tie_rounds = 0``, which turns interleaved re-timing off, keeps the
        first pass whole too.
        """
        split = (
            self._schedule.repeat >= 2
            and len(candidates) >= 2
            and self.session.settings[TIE_ROUNDS] > 0
            and self._host_clock()
        )
        self._queue.first_pass(candidates, split=split)

    def _host_clock(self) -> bool:
        """Whether samples are host time: the ``wall`` objective, or a timer without ``hold``."""
        settings = self.session.settings
        timer = self.session.timer
        return settings[OBJECTIVE] == WALL or not provides(timer, HoldingTimer)

    @property
    def recheck_rounds(self) -> int:
        """How many interleaved rounds a re-check of a stored pick takes: ``tie_rounds``, at least 2."""
        return max(2, self.session.settings[TIE_ROUNDS])

    @property
    def rechecking(self) -> tuple[Candidate, ...]:
        """For an adaptive driver: the stored pick, then its rivals, to re-time head to head; else empty.

        The stored record asked for a re-check (its pick was uncertain, or
        ``kerneltune cache verify`` marked it): the driver measures these in
        :attr:`recheck_rounds` interleaved rounds (:meth:`request`) and
        selects among them (``finish(among=...)``), instead of searching.
        """
        return self._plan.rechecking() if self._schedule.adaptive else ()

    def _loaded(self, source: str, confidence: str | None = None) -> None:
        assert self.best is not None
        cache = self.session.cache.name
        self.session.observers.pick_loaded(
            self._header.make(PickLoaded, best=self.best, source=source, cache=cache, confidence=confidence)
        )

    def _adopt(self, best: int, record: TuningRecord, *, store: bool) -> None:
        """Make candidate ``best`` the pick and ``record`` the key's record here; store it if asked."""
        self.best = self._space.candidates[best]
        self._picks[self.key] = self.best
        # A failure met while computing the key never reaches a record: no entry, nothing to store.
        if self._entry is None:
            return
        data = record.to_data()
        self._records[self._entry] = data
        if store and self.reducer.rank in self._writers:
            self.session.cache_store(self._space.name, self._entry, data)

    # -- MEASURE -----------------------------------------------------------------

    def _timing_begins(self) -> None:
        self._ready.timing_begins()

    def _timing_ends(self) -> None:
        self._ready.timing_ends()

    def next_candidate(self) -> Candidate | None:
        """The next candidate to measure, or ``None`` when there is none left.

        Once the queued candidates are measured, a tuning that is not
        adaptive re-times its near ties (:func:`near_ties`) in
        ``tie_rounds`` interleaved rounds before it says there is none left;
        with several ranks deciding which ones is one collective. With
        several ranks this is also a barrier, so every rank starts each
        candidate together.
        """
        if self.best is not None:
            return None
        self._ready.begin_measuring(self._space.name)
        while True:
            if not self._queue.batched_next():
                self.settle()
            if not self._queue and not self._ties_planned:
                self._ties_planned = True
                self._after_first_pass()
            if not self._queue:
                return None
            job = self._queue.pop()
            problem = self._ready.problem(job.candidate)
            # After the wait: a rank that compiled a candidate for its host holds
            # the others here until Triton's cache has it. With twins, the barrier
            # carries each rank's verdict, so that every rank drops alike.
            if self.reducer.world_size > 1 and not self._schedule.shard:
                problem = self._ready.agree_twin(job.candidate, problem, self.reducer)
            self._job = job
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
        """COMPILE: compile candidates on a pool; measuring starts once none of them runs.

        :param compile_one: compiles one candidate without running it, on pool threads, raising what
            makes it unusable (a compile error, a kernel too big for the device); a
            :class:`~kerneltune.core.CompileMiss` from the backend's probe must pass through it.
        :param candidates: what to compile, in the order it will be measured (default: every queued
            candidate); an adaptive driver calls this for each round. Ranks on one host each compile
            their share; the others load it from Triton's cache at their first run.
        :param child: the backend's part in compiling in forked processes (``compile_pool``; see
            :class:`~kerneltune.core.compiling.stage.CompileStage`, which reads the settings).
        """
        if self.best is not None:
            return
        self._ready.compile(compile_one, self.queued() if candidates is None else list(candidates), child)

    def twins(
        self,
        program_of: Callable[[Candidate], Hashable | None],
        options: Callable[[Candidate], Mapping[str, object]] | None = None,
    ) -> None:
        """Measure each program once: a candidate whose program (``program_of``, once compiled) an
        earlier one launches is dropped as its twin (:mod:`kerneltune.core.machine.twins`).

        Where the ``twins`` setting is on. With several ranks measuring alike, the
        barrier before each candidate becomes a ``max`` that carries each rank's verdict: a
        twin is dropped only where every rank's backend says so, so ranks never split. Sharded
        ranks (``shard``) measure every candidate: a twin's first config may be another rank's.

        :param options: a candidate's options by name, for the notice naming what twins differ in.
        """
        if self.best is None and self.session.settings[TWINS] and not self._schedule.shard:
            self._ready.twins = Twins(self._space.name, program_of, options)

    def measured_as(self, candidate: Candidate) -> Candidate:
        """The candidate measured for ``candidate``: itself, or the one it is a twin of."""
        twins = self._ready.twins
        index = candidate.index if twins is None else twins.dropped.get(candidate.index, candidate.index)
        return self._space.candidates[index]

    @property
    def twin_of(self) -> dict[int, int]:
        """Each candidate dropped as a twin so far -> the candidate measured for it."""
        twins = self._ready.twins
        return {} if twins is None else dict(twins.dropped)

    def isolate(
        self, screen_one: Callable[[Candidate], object], candidates: Iterable[Candidate] | None = None
    ) -> dict[int, str]:
        """ISOLATE: screen candidates where a crash cannot reach this process, before measuring them.

        :param screen_one: runs one candidate in an isolation worker
            (:class:`~kerneltune.core.isolation.parent.Screening`), raising
            :class:`~kerneltune.core.isolation.parent.ScreenedOut` for one that crashed or hung there
            (one that raised there fails as usual when measured).
        :param candidates: what to screen (default: the queued candidates; an adaptive driver's round).
        :returns: why each one screened out (or unscreenable) on any rank must not run, by index; with
            several ranks one gather makes every rank fail the same. :meth:`next_candidate` fails them.
        """
        if self.best is not None:
            return {}
        return self._ready.isolate(screen_one, self.queued() if candidates is None else candidates)

    def queued(self) -> list[Candidate]:
        """The candidates waiting to be measured, each once, in order (not those screened out)."""
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
        """Queue candidates for :meth:`next_candidate`, in order.

        A candidate measured before is measured again; its first new
        measurement replaces the old one. With ``rounds`` above one the
        candidates are measured in that many interleaved rounds, each round
        starting one candidate further on, and the later rounds add to the
        first round's samples (a staged search re-times its finalists so).
        Every rank must request the same candidates in the same order.

        :param warmup: untimed runs per candidate and round (default: the tuning's).
        :param repeat: timed runs per candidate and round (default: the tuning's).
        :param purpose: what these measurements are for ("near-tie re-timing"), which the
            observers' events carry with the round ("near-tie re-timing, round 2 of 4").
        :raises ValueError: for a candidate that was pruned.
        """
        listed = list(candidates)
        for candidate in listed:
            if self._measurements.pruned(candidate.index):
                raise ValueError(f"{self._space.name}: candidate [{candidate.index}] was pruned")
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
    ) -> list[float]:
        """Measure a batch now (an adaptive driver's round); every rank's agreed time of each, in order.

        Queues ``candidates`` (:meth:`request`, whose ``repeat``, ``rounds`` and
        ``purpose`` these are), compiles those that may run (:meth:`compile`,
        with ``compile_one`` and ``child``), then hands each out and measures
        it with ``run(candidate)``'s thunk, and returns :meth:`times`. Screen
        with :meth:`isolate` first where isolation is on: what it screened
        out is neither compiled nor run. Every rank calls it with the same
        candidates, as :meth:`request` asks.

        :param failed: candidates known not to run, by index, with why: they fail unlaunched.
        :param ahead: candidates the driver expects to ask for in a later round: with ``compile_one``
            and compile processes, and where ``compile_ahead`` is on, they compile while this round's
            compiles do, at a lower priority and stopped while anything is measured
            (:meth:`~kerneltune.core.compiling.stage.CompileStage.ahead`); nothing waits for them.
        """
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
                self.measure(candidate, run(candidate))
        return self.times(listed)

    def _after_first_pass(self) -> None:
        """Once the queued candidates are measured: fall back where a plan's all failed, else plan near ties.

        Both read the first pass as the ranks agree on it, from one ``max``
        (:func:`agreed_finalists`), taken where either needs it.
        """
        rounds = self.session.settings[TIE_ROUNDS]
        candidates = self._space.candidates
        schedule = self._schedule
        ties = rounds > 0 and len(self._measurements) >= 2
        follow = self._plan
        check = (
            follow.scope is not None and not follow.fell_back and not schedule.adaptive and not schedule.shard
        )
        if not ties and not check and follow.screening is None:
            return
        measurements = [self._measurement(c.index) for c in candidates]
        chosen = agreed_finalists(measurements, self.reducer)
        rest = follow.fall_back(chosen.times, self.key) if check else None
        if rest is not None:
            self.request(rest)
        if rest:
            self._ties_planned = False  # planned once the rest is measured
            return
        if follow.screening is not None and len(self._measurements) >= 2:
            # A screened warm start: its fastest and the neighbours' pick, head to head.
            chosen = screen_finalists(chosen, follow.screening, self._setup.warm.budget)
            follow.screened(chosen.indices)
            finalists = self._ties.take(chosen, candidates)
            if len(finalists) > 1:  # warmed up by the screen: a tie round's warm-up is enough
                # On a quiet machine launched as one batch, as the screen was: one wait, few holds.
                noisy = self._ties.noisy
                self._queue.interleave(
                    finalists,
                    2,
                    purpose="warm-start finalists",
                    one_by_one=noisy,
                    batched=not noisy,
                    at_most=FINALIST_REPEAT,
                )
        elif ties and (finalists := self._ties.take(chosen, candidates)):
            noisy = self._ties.noisy
            self._queue.interleave(finalists, rounds, purpose="near-tie re-timing", one_by_one=noisy)

    # -- REDUCE, SELECT, PERSIST ---------------------------------------------

    def finish(self, among: Iterable[Candidate] | None = None) -> Candidate:
        """Reduce, select and persist; the pick.

        :param among: select only among these candidates (a staged search's
            finalists, whose re-timed measurements are comparable); default:
            all of them.
        :raises NoValidConfigError: when no candidate (of ``among``) has a
            finite time on every rank; nothing is persisted then.
        """
        if self.best is not None and not self._measurements:
            return self.best
        self.settle()
        if self._queue:
            raise RuntimeError(f"finish() with {len(self._queue)} candidates still unmeasured")
        candidates = self._space.candidates
        measurements = [self._measurement(c.index) for c in candidates]
        sharded = None
        if self._schedule.shard:
            sharded = self._measurements.measured()
        agreed = agree(self.reducer, measurements, rounds=self._queue.rounds, sharded=sharded)
        reduced, times = agreed.reduced, agreed.reduced.times
        seconds = time.perf_counter() - self._started
        self.agreed, self.seconds = tuple(times), seconds
        if among is None:
            among = self._ties.finalists
        choice = choose(
            times,
            None if among is None else (c.index for c in among),
            finalists=among is self._ties.finalists,
            scope=self._plan.scope,
        )
        best, allowed = choice.best, choice.allowed
        verdict = None if best is None else self._ties.verdict(agreed.evidence, best, choice.compared)
        self.session.observers.tuning_finished(
            self._header.make(
                TuningFinished,
                candidates=candidates,
                times=times,
                best=None if best is None else candidates[best],
                seconds=seconds,
                rank_times=reduced.rank_times,
                errors=tuple(m.error for m in measurements),
                measured_elsewhere=agreed.elsewhere,
                world_size=self.reducer.world_size,
                measured_on=agreed.owners,
                recheck=self._plan.rechecked is not None,
                **verdict_fields(verdict),
            )
        )
        if best is None:
            report = self._measurements.report(self._space.name, self.key, candidates, allowed)
            raise NoValidConfigError(report) from self._measurements.first_failure
        # Its traceback holds the failed run's frames, and with them its arguments.
        self._measurements.first_failure = None
        warn_if_idle(self._space.name, self._idle)
        if self._verify_pick:
            check_picks(self.reducer, best, self._space.name)
        assert verdict is not None
        # Sharded, every rank's record keeps each candidate's measurement from the rank that took it.
        taken = agreed.measurements or tuple(measurements)
        on_some_rank = {i for i, r in enumerate(agreed.owners) if r is not None}
        record = self._plan.record(
            self.session,
            self._encoded,
            best,
            times,
            reduced.rank_times,
            taken.__getitem__,
            {*self._measurements.by_index, *on_some_rank},
            self._schedule,
            allowed=allowed,
            shards=self.reducer.world_size if self._schedule.shard else 1,
            verdict=verdict,
            measured_on=agreed.owners,
        )
        self._adopt(best, record, store=True)
        return candidates[best]
