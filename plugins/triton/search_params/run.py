"""One fresh search_params tuning of one key: the strategy's rounds, then the finalists, through the engine.

:class:`SearchRun` lets the search strategy in force (hand-written configs
that give every searched param: ``exhaustive``) measure round by round
through the tuning's round API, then re-times the finalists head to head
in interleaved rounds (stage 3). Each candidate's first run is checked
(``check_outputs``): the arguments it writes against the first
candidate's, or ``reference_fn``'s verdict; with the check off,
``reference_fn`` gates the finalists in stage 3.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from kerneltune.core import (
    BudgetSpent,
    NoValidConfigError,
    PluginError,
    Point,
    RankMismatchError,
    SearchBudget,
    SearchStrategy,
    format_ms,
    verbose_line,
)
from kerneltune.core.driving import Candidate, OutputCheck, SearchTuning, describe_error
from kerneltune.plugins.triton.search_params.decorated import DecoratedKernel
from kerneltune.plugins.triton.search_params.launcher import Launcher
from kerneltune.plugins.triton.search_params.reference import ReferenceGate
from kerneltune.plugins.triton.search_params.seam import StrategySeam
from kerneltune.plugins.triton.search_params.space import SearchSpace
from kerneltune.plugins.triton.search_params.summary import SearchSummary, describe, print_autotuning

#: The strategy that measures hand-written configs: every one of them.
GIVEN_STRATEGY = "exhaustive"
#: The most untried points measured to tell a wrong candidate from a wrong reference.
SECOND_OPINIONS = 3

logger = logging.getLogger("kerneltune")


class SearchRun:
    """One fresh tuning of one key: the strategy's rounds and stage 3, driven through the engine."""

    def __init__(
        self,
        kernel: DecoratedKernel,
        space: SearchSpace,
        tuning: SearchTuning,
        args: tuple[Any, ...],
        launch: dict[str, Any],
        grid: Any,
        screen_one: Callable[[Candidate], None] | None = None,
    ) -> None:
        """:param screen_one: runs one candidate in the isolation worker (``isolate = "subprocess"``)."""
        self.kernel = kernel
        self.space = space
        self.tuning = tuning
        self.screen_one = screen_one
        self.hints = kernel.hints
        self.started = time.perf_counter()
        #: every candidate's latest agreed time (``inf``: failed or dropped), by index.
        self.outcomes: dict[int, float] = {}
        #: with several ranks and a wall-clock budget: the slowest rank's seconds at the last round.
        self.agreed_elapsed = 0.0
        self.timed = False
        #: the run has measured the space's fallback points.
        self.fell_back = False
        #: what :meth:`run` did, for ``kernel.last_search``; ``None`` until a search ends (not a re-check).
        self.summary: SearchSummary | None = None
        #: the pick may be stored and served again: not after a strategy that raised.
        self.persist = True
        #: the points the strategy expects to measure after its next round (``ahead``), to compile then.
        self.expected: list[Point] = []
        #: the points measured as twins of one measured before (they count against no point cap).
        self.twin_points: set[Point] = set()
        self.launcher = Launcher(kernel, space, args, launch, grid, self.say)
        reference = self.hints.reference_fn
        #: each candidate's first run checked; ``None`` where check_outputs is off...
        self.check = self.hints.checking.check(
            kernel.__name__,
            tuning.settings,
            kernel.arg_names,
            kernel,
            args,
            launch,
            judge=None if reference is None else ReferenceGate(reference, self.launcher).verdict,
            writes_arguments=True,
            odd_reference=True,
        )
        #: ...through every round's runs.
        self.runs = None if self.check is None else self.launcher.checked(self.check)

    def say(self, line: str) -> None:
        # The tuning is verbose with the debug hint or the verbose setting.
        if self.tuning.verbose:
            verbose_line(f"{self.kernel.__name__}: {line}", source="search_params")

    def run(self) -> Candidate:
        """Search, re-time, gate, and finish the tuning; the pick."""
        kernel = self.kernel
        if self.tuning.rechecking:
            return self.recheck()
        if self.space.given:
            count = self.space.geometry.space_size
            self.say(f"{count} hand-written configs give every search param; measuring them as they are")
            where = f"the hand-written configs of {kernel.__name__}"
            strategy = self.tuning.strategy(GIVEN_STRATEGY, where)
            budget = SearchBudget(finalists=self.hints.shape_final_top_k)
            chosen = "given"
        else:
            family = self.space.family or "none (compile options left to Triton's defaults)"
            self.say(f"operator class {kernel.operator} ({kernel.operator_reason}); profile family {family}")
            strategy, budget = self.pick_strategy()
            self.say(f"search strategy {strategy.name}: {budget.describe()}")
            chosen = strategy.name
        self.tuning.twins(self.launcher.program, self.launcher.options)
        best = self.finalise(self.search(strategy, budget))
        candidates = self.tuning.candidates
        dropped = self.launcher.dropped | set(self.tuning.twin_of)
        self.summary = SearchSummary(
            key=self.tuning.key,
            space=len(candidates),
            measured=len(set(self.outcomes) - dropped),
            dropped=len(dropped),
            seconds=time.perf_counter() - self.started,
            pick=best.label,
            strategy=chosen,
            times={
                candidates[index].label: math.inf if index in dropped else value
                for index, value in self.outcomes.items()
            },
        )
        self.say(describe(self.summary, best, self.outcomes))
        print_autotuning(
            kernel.__name__, self.summary, best, candidates, self.outcomes, self.launcher.failures
        )
        return best

    def pick_strategy(self) -> tuple[SearchStrategy, SearchBudget]:
        """The strategy and budget in force: the hint's, else the settings'; every rank must agree.

        With several ranks a wall-clock budget reads the slowest rank's clock (:meth:`measure`).
        """
        hints = self.hints
        distributed = self.tuning.world_size > 1
        clock = (lambda: self.started + self.agreed_elapsed) if distributed else time.perf_counter
        problem: str | None = None
        try:
            where = f"the search_params hint of {self.kernel.__name__}" if hints.strategy else None
            strategy = self.tuning.strategy(hints.strategy, where)
            budget = SearchBudget.resolve(
                self.tuning.settings,
                effort=hints.effort,
                seconds=hints.budget_s,
                max_points=hints.max_points,
                finalists=hints.shape_final_top_k,
                clock=clock,
            )
        except PluginError as exc:
            if not distributed:
                raise
            problem = str(exc)
        if not distributed:
            return strategy, budget
        self.timed = problem is None and budget.seconds is not None
        mine = problem or repr((strategy.name, budget.effort, budget.max_points, budget.seconds))
        everyone = self.tuning.gather(mine)
        if len(set(everyone)) > 1:
            lines = "; ".join(f"rank {rank}: {choice}" for rank, choice in enumerate(everyone))
            raise RankMismatchError(
                f"{self.kernel.__name__}: ranks disagree on the search strategy or its budget ({lines}); "
                "set search_strategy, search_effort, search_budget_s and search_max_points alike everywhere"
            )
        if problem is not None:
            raise PluginError(problem)
        return strategy, budget

    def search(self, strategy: SearchStrategy, budget: SearchBudget) -> list[Point]:
        """The strategy's search, its budget bound at the measure it is handed; its finalists.

        A strategy stopped by its budget (:class:`BudgetSpent`) ends with the
        best points measured; so does one that raises anything else, with one
        warning naming it (with several ranks, one ``max`` makes all go on alike),
        and its pick is not persisted: a later launch searches again.
        """
        seam = StrategySeam(
            strategy, self.tuning, self.space.geometry, self.kernel.__name__, self.hints.shape_final_top_k
        )
        failure: BaseException | None = None
        try:
            measure = seam.bounded(self.measure, budget, self.expect, self.twin_points)
            found = strategy.search(seam.geometry, measure, budget, self.say)
        except BudgetSpent as stop:
            self.say(f"search strategy {strategy.name}: stopped: {stop}")
            found = self.best_measured()
        except PluginError:
            raise
        except Exception as exc:
            failure = exc
            found = []
        if self.tuning.world_size > 1:
            (anyone,) = self.tuning.max_over_ranks([0.0 if failure is None else 1.0])
            if anyone and failure is None:
                failure = RuntimeError("it failed on another rank")
                found = []
        if failure is not None:
            self.tuning.fault(
                strategy,
                f"search strategy {strategy.name!r} raised {type(failure).__name__}: {failure}",
                f"{self.kernel.__name__} goes on with the best points measured and stores no pick",
            )
            self.persist = False
            found = self.best_measured()
        return seam.checked(found)

    def best_measured(self) -> list[Point]:
        """The fastest points measured so far, as many as the finalists asked for."""
        timed = [(value, index) for index, value in self.outcomes.items() if math.isfinite(value)]
        return [self.space.point(index) for _, index in sorted(timed)[: self.hints.shape_final_top_k]]

    def measure(self, points: list[Point]) -> dict[Point, float]:
        """Measure a round through the engine; every rank's agreed time per point.

        Candidates an earlier search of this key measured keep their stored
        times (``Tuning.reused``); stage 3 re-times the finalists whatever they hold.
        """
        expected, self.expected = self.expected, []
        stored = self.tuning.reused
        known = {p: stored[self.space.index(p)] for p in points if self.space.index(p) in stored}
        points = [p for p in points if p not in known]
        if not points:
            return known
        candidates = [self.space.candidate(p) for p in points]
        launcher = self.launcher
        problems = launcher.screen(points, candidates)
        self.isolate([c for c in candidates if c.index not in problems])
        times = self.tuning.round(
            candidates,
            launcher.runner,
            failed=problems,
            compile_one=None if launcher.compile_config is None else launcher.build,
            child=launcher.compile_process,
            ahead=self.likely(points, expected),
            around=self.runs,
        )
        if self.check is not None:  # those kept in doubt, once the reference is confirmed
            for index in self.check.resolve(self.tuning):
                self.outcomes[index] = math.inf
            times = [
                math.inf if c.index in self.check.wrong else t for c, t in zip(candidates, times, strict=True)
            ]
        times = self.twin_times(candidates, times)
        twin_of = self.tuning.twin_of
        self.twin_points.update(p for p, c in zip(points, candidates, strict=True) if c.index in twin_of)
        for candidate, value in zip(candidates, times, strict=True):
            self.outcomes[candidate.index] = value
        if self.timed:
            # One number more per round: the slowest rank's clock, so that every rank's budget
            # runs out at the same round (a rank stopping alone would leave the others waiting).
            (self.agreed_elapsed,) = self.tuning.max_over_ranks([time.perf_counter() - self.started])
        return {**known, **dict(zip(points, times, strict=True))}

    def expect(self, points: list[Point]) -> None:
        """The strategy's word on what it will measure after its next round (its measure's ``ahead``)."""
        self.expected = points

    def likely(self, points: list[Point], expected: list[Point]) -> list[Candidate]:
        """What to compile ahead of this round of ``points``: those ``expected`` next, less those
        measured, in this round, or ruled out before compiling (pruned, too big)."""
        stored = self.tuning.reused
        here = set(points)
        later = [
            p
            for p in expected
            if p not in here
            and self.space.index(p) not in self.outcomes
            and self.space.index(p) not in stored
        ]
        return self.launcher.worth_compiling(later, [self.space.candidate(p) for p in later])

    def twin_times(self, candidates: list[Candidate], times: list[float]) -> list[float]:
        """``times`` with each twin's (a candidate dropped because another launches its program) the
        time of the candidate measured for it: the strategy reads the same program as equally fast."""
        twin_of = self.tuning.twin_of
        if not twin_of:
            return times
        here = {c.index: t for c, t in zip(candidates, times, strict=True)}
        return [
            here.get(twin_of[c.index], self.outcomes.get(twin_of[c.index], t)) if c.index in twin_of else t
            for c, t in zip(candidates, times, strict=True)
        ]

    def isolate(self, candidates: list[Candidate]) -> None:
        """ISOLATE for a round: those that crash or hang the worker on any rank fail unlaunched.

        Every rank screens every round (one gather each), whatever it dropped.
        """
        if self.screen_one is None:
            return
        screened = self.tuning.isolate(self.screen_one, candidates)
        everyone = self.tuning.candidates
        for index, reason in sorted(screened.items()):
            why = f"ScreenedOut: {reason}"
            self.launcher.note(everyone[index], why)
            self.say(f"screened out {everyone[index].label}: {why}")

    def finalise(self, finalists: list[Point]) -> Candidate:
        """Stage 3: re-time the finalists precisely, gate them, and pick.

        Where no finalist is named, or every one fails here, the space's
        fallback points are measured too, once, and the pick is made among
        everything that ran.
        """
        twin_of = self.tuning.twin_of
        check = self.check
        if check is not None:  # which is wrong, a candidate or the reference, before stage 3
            self.second_opinion(check)
            check.settle(self.tuning)
            for index in check.wrong:
                self.outcomes[index] = math.inf
            kept = [p for p in finalists if self.space.index(p) not in check.wrong]
            if len(kept) < len(finalists):  # the strategy saw their times: the next fastest take their places
                kept += [p for p in self.best_measured() if p not in kept][: len(finalists) - len(kept)]
            finalists = kept
        # Distinct programs only: a twin's program is its first config's, re-timed once.
        finalists = [p for p in finalists if self.space.index(p) not in twin_of]
        if not finalists:
            finalists = self.fall_back("the search named no finalist")
        if not finalists:
            measured = [self.tuning.candidates[i] for i in sorted(self.outcomes)]
            return self.finish(measured)
        candidates = [self.space.candidate(p) for p in finalists]
        schedule = self.tuning.schedule
        per_round, rounds = schedule.stage3_per_round, schedule.stage3_rounds
        self.say(
            f"stage 3: re-timing {len(candidates)} finalist(s), {per_round * rounds} runs each "
            f"in {rounds} interleaved rounds"
        )
        # Every rank requests every finalist in every round, failed or not, so
        # that the per-candidate barriers stay matched across ranks.
        times = self.tuning.round(
            candidates,
            self.launcher.runner,
            repeat=per_round,
            rounds=rounds,
            purpose="stage 3",
            around=self.runs,
        )
        for candidate, value in zip(candidates, times, strict=True):
            self.outcomes[candidate.index] = value
            self.say(f"stage 3: {candidate.label}: {format_ms(value)}")
        if not any(math.isfinite(t) for t in times) and not self.fell_back:
            self.fall_back("every finalist failed in stage 3")
            ran = [self.tuning.candidates[i] for i, t in self.outcomes.items() if math.isfinite(t)]
            if ran:
                return self.finish(ran)
        gated = self.hints.reference_fn is not None and self.check is None
        if self.hints.reference_fn is not None and self.check is None:
            gate = ReferenceGate(self.hints.reference_fn, self.launcher)
            gate.gate(candidates, times, alone=self.tuning.world_size == 1, reject=self.reject)
        try:
            return self.finish(candidates)
        except NoValidConfigError as exc:
            if not gated:
                raise
            raise NoValidConfigError(
                f"{self.kernel.__name__}: none of the {len(candidates)} finalists passed reference_fn\n{exc}"
            ) from exc

    def second_opinion(self, check: OutputCheck) -> None:
        """Where one candidate differs from a first-candidate reference that none agreed with, measure
        untried points (at most :data:`SECOND_OPINIONS`) until the check can tell which of the two is wrong.

        Every rank asks, and takes the points in the space's order, so that all measure alike.
        """
        for _ in range(SECOND_OPINIONS):
            (unsure,) = self.tuning.max_over_ranks([float(check.unsure)])
            point = next(
                (p for p in self.space.geometry.points() if self.space.index(p) not in self.outcomes), None
            )
            if not unsure or point is None:
                return
            label = self.space.candidate(point).label
            self.say(f"a candidate differs from the reference; measuring {label} to tell")
            self.measure([point])

    def finish(self, among: list[Candidate]) -> Candidate:
        """SELECT among ``among``; with the check, its one warning, and the caller's arguments put back.

        :raises NoValidConfigError: where none is left, or where a reference
            config alone is left on any rank (it may be the wrong one); both
            name the wrong candidates, and nothing is stored.
        """
        check, key = self.check, self.tuning.key
        if check is not None:
            check.raise_if_unchecked()
            check.settle(self.tuning)
        # Every rank asks, so that all raise or none: one rank alone would leave the others waiting.
        (alone,) = self.tuning.max_over_ranks([float(check is not None and check.reference_alone)])
        if alone:
            why = check.summary(key) if check is not None else "another rank has only its reference left"
            raise NoValidConfigError(f"{self.kernel.__name__}: no candidate left but the reference: {why}")
        select = functools.partial(self.tuning.finish, among=among, persist=self.persist)
        return select() if check is None else check.finish(select, key)

    def reject(self, candidate: Candidate, problem: BaseException) -> None:
        """A finalist ``reference_fn`` rejected: failed here, and so at SELECT."""
        self.launcher.note(candidate, describe_error(problem))
        self.outcomes[candidate.index] = math.inf
        self.tuning.fail(candidate, problem)

    def recheck(self) -> Candidate:
        """Re-time a stored pick the record asks to re-check, head to head with its rivals; pick among them.

        Instead of searching again (``Tuning.rechecking``); SELECT's verdict replaces the stored one.
        """
        candidates = list(self.tuning.rechecking)
        rounds = self.tuning.schedule.recheck_rounds
        self.say(
            f"re-checking the stored pick {candidates[0].label} against {len(candidates) - 1} rival(s) "
            f"in {rounds} interleaved rounds"
        )
        launcher = self.launcher
        self.tuning.round(
            candidates,
            launcher.runner,
            compile_one=None if launcher.compile_config is None else launcher.build,
            child=launcher.compile_process,
            repeat=self.tuning.schedule.recheck_repeat,
            rounds=rounds,
            purpose="re-check",
            around=self.runs,
        )
        return self.finish(candidates)

    def fall_back(self, why: str) -> list[Point]:
        """Measure the space's fallback points not measured yet, once; the best points that ran since.

        Every rank reaches the same ``why`` from agreed times, so all fall back alike.
        """
        self.fell_back = True
        todo = [p for p in self.space.geometry.fallback() if self.space.index(p) not in self.outcomes]
        self.say(f"{why}; measuring {len(todo)} fallback point(s)")
        logger.info(
            "kerneltune: %s: key %r: %s; measuring its fallback points",
            self.kernel.__name__,
            self.tuning.key,
            why,
        )
        if todo:
            self.measure(todo)
        return self.best_measured()
