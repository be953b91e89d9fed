"""One fresh search_params tuning of one key: the strategy's rounds, then the finalists, through the engine.

The search strategy in force (a plugin, :mod:`kerneltune.core.search.strategies`)
decides what to measure; :class:`SearchRun` screens each round (pruned, or
no smaller than a shape that ran out of resources), hands it to the engine's
COMPILE stage, measures it through the adaptive
:class:`~kerneltune.core.Tuning`, and returns every rank's agreed times to
the strategy. Whatever the strategy, the finalists it returns are then
re-timed head to head in interleaved rounds on the same engine path, and
``reference_fn`` applies (stage 3).
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import attrs
from kerneltune.core import (
    BudgetSpent,
    Candidate,
    CandidateDropped,
    NoValidConfigError,
    PluginError,
    Point,
    RankMismatchError,
    SearchBudget,
    SearchStrategy,
    Shape,
    Tuning,
    choose_strategy,
    describe_error,
    fault,
    format_ms,
    origin,
    verbose_line,
)
from kerneltune.plugins.triton import adapter, compiler
from kerneltune.plugins.triton.hints import SearchHints
from kerneltune.plugins.triton.search_space import SearchSpace

#: Stage 3 times each finalist with this many times the configured repeats...
PRECISE_REPEAT_FACTOR = 4
#: ...in this many interleaved rounds (A B C A B C ...), so that clock and
#: thermal drift during stage 3 lands on every finalist alike instead of on
#: whichever ran last: on an H200 a block-after-block re-timing let a
#: finalist 2.5% slower win on a landscape whose top configs lie within 2.5%.
PRECISE_ROUNDS = 4
_TRUE = ("1", "true", "yes", "on")

logger = logging.getLogger("kerneltune")


def _is_point(point: Any) -> bool:
    """``(shape, profile)``: a tuple of ints and an int, none of them a bool; negative ones are no index."""
    if not isinstance(point, tuple) or len(point) != 2:
        return False
    shape, profile = point
    return (
        isinstance(shape, tuple)
        and all(type(i) is int and i >= 0 for i in shape)
        and type(profile) is int
        and profile >= 0
    )


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


class RejectedByReference(Exception):
    """A finalist's results did not pass ``reference_fn``."""


@attrs.frozen
class SearchSummary:
    """What the last fresh tuning of a kernel did (``SearchParamsKernel.last_search``)."""

    key: Any
    #: candidates in the space (every shape times every profile).
    space: int
    #: candidates launched and timed at least once.
    measured: int
    #: candidates dropped before launching (pruned, or too large for the device).
    dropped: int
    seconds: float
    #: the pick's label.
    pick: str
    #: the search strategy's name (``"given"`` for hand-written configs, which are measured as they are).
    strategy: str = "given"
    #: each measured candidate's time by label, ms: the search's last value for it (stage 3's where it
    #: was re-timed); ``inf`` for one that failed to compile or launch, timed out, or was dropped.
    times: dict[str, float] = attrs.field(factory=dict)


class SearchedKernel(Protocol):
    """What a run reads of the kernel it tunes (a ``SearchParamsKernel``), and where it leaves its summary.

    A protocol rather than the class: the kernel's module starts runs, so a
    run naming the class would import its starter back.
    """

    __name__: str
    hints: SearchHints
    #: the hand-written configs.
    configs: list[Any]
    arg_names: list[str]
    #: the operator class and why (:func:`~kerneltune.plugins.triton.classify.operator_class`).
    operator: str
    operator_reason: str
    #: ``prune_configs_by``'s ``early_config_prune``, ``None`` without one.
    early_prune: Callable[..., Any] | None
    last_search: SearchSummary | None


class SearchRun:
    """One fresh tuning of one key: the strategy's rounds and stage 3, driven through the engine."""

    def __init__(
        self,
        kernel: SearchedKernel,
        space: SearchSpace,
        tuning: Tuning,
        args: tuple[Any, ...],
        launch: dict[str, Any],
        grid: Any,
        screen_one: Callable[[Candidate], None] | None = None,
    ) -> None:
        """:param screen_one: runs one candidate in the isolation worker (``isolate = "subprocess"``)."""
        self.kernel = kernel
        self.space = space
        self.tuning = tuning
        self.args = args
        self.launch = launch
        self.grid = grid
        self.screen_one = screen_one
        self.hints = kernel.hints
        self.started = time.perf_counter()
        #: every candidate's latest agreed time (``inf``: failed or dropped), by index.
        self.outcomes: dict[int, float] = {}
        #: why a candidate failed or was dropped, by index.
        self.failures: dict[int, str] = {}
        self.dropped: set[int] = set()
        self.exhausted: dict[int, list[tuple[Shape, str]]] = {}
        #: guards what compiles note from COMPILE's pool threads.
        self.noting = threading.Lock()
        #: with several ranks and a wall-clock budget: the slowest rank's seconds at the last round.
        self.agreed_elapsed = 0.0
        self.timed = False
        #: the run has measured the space's fallback points.
        self.fell_back = False
        # Compile processes first: asking for them starts the compiler's warm-up beside the driver's build.
        self.compile_process = compiler.forked_compiles()
        self.compile_config = compiler.config_compiler(kernel, args, {**launch, "grid": grid})

    def say(self, line: str) -> None:
        # The tuning is verbose with the debug hint or the verbose setting.
        if self.tuning.verbose:
            verbose_line(f"{self.kernel.__name__}: {line}", source="search_params")

    def label(self, point: Point) -> str:
        return self.space.candidate(point).label

    # -- the stages -----------------------------------------------------------

    def run(self) -> Candidate:
        """Search, re-time, gate, and finish the tuning; the pick."""
        kernel = self.kernel
        if self.tuning.rechecking:
            return self.recheck()
        if self.space.given:
            self.say(
                f"{len(kernel.configs)} hand-written configs give every search param; "
                "measuring them as they are"
            )
            points: list[Point] = [((i,), 0) for i in range(len(kernel.configs))]
            times = self.measure(points)
            ranked = sorted((p for p in points if math.isfinite(times[p])), key=lambda p: (times[p], p))
            finalists = ranked[: self.hints.shape_final_top_k]
            chosen = "given"
        else:
            family = self.space.family or "none (compile options left to Triton's defaults)"
            self.say(f"operator class {kernel.operator} ({kernel.operator_reason}); profile family {family}")
            strategy, budget = self.strategy()
            self.say(f"search strategy {strategy.name}: {budget.describe()}")
            finalists = self.search(strategy, budget)
            chosen = strategy.name
        best = self.finalise(finalists)
        candidates = self.tuning.space.candidates
        summary = SearchSummary(
            key=self.tuning.key,
            space=len(candidates),
            measured=len(set(self.outcomes) - self.dropped),
            dropped=len(self.dropped),
            seconds=time.perf_counter() - self.started,
            pick=best.label,
            strategy=chosen,
            times={
                candidates[index].label: math.inf if index in self.dropped else value
                for index, value in self.outcomes.items()
            },
        )
        self.kernel.last_search = summary
        self.report(best, summary)
        return best

    def strategy(self) -> tuple[SearchStrategy, SearchBudget]:
        """The strategy and budget in force: the hint's, else the settings'; every rank must agree.

        With several ranks a wall-clock budget is read from the slowest
        rank's elapsed time at the last round (:meth:`measure`), so every
        rank stops at the same round.
        """
        session = self.tuning.session
        hints = self.hints
        distributed = self.tuning.reducer.world_size > 1
        clock = (lambda: self.started + self.agreed_elapsed) if distributed else time.perf_counter
        problem: str | None = None
        try:
            where = f"the search_params hint of {self.kernel.__name__}" if hints.strategy else None
            strategy = choose_strategy(session, hints.strategy, where)
            budget = SearchBudget.resolve(
                session.settings,
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
        everyone = self.tuning.reducer.gather(mine)
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
        best points measured. One that raises anything else is a fault (one
        warning naming it) and the search goes on without it: with several
        ranks one ``max`` makes every rank go on alike. With no finalist
        that ran, the run falls back to the space's fallback points (in
        :meth:`finalise`).
        """
        measure = self.bounded(strategy, budget)
        failure: BaseException | None = None
        try:
            found = strategy.search(self.space.geometry, measure, budget, self.say)
        except BudgetSpent as stop:
            self.say(f"search strategy {strategy.name}: stopped: {stop}")
            found = self.best_measured()
        except PluginError:
            raise
        except Exception as exc:
            failure = exc
            found = []
        if self.tuning.reducer.world_size > 1:
            (anyone,) = self.tuning.reducer.max([0.0 if failure is None else 1.0])
            if anyone and failure is None:
                failure = RuntimeError("it failed on another rank")
                found = []
        if failure is not None:
            fault(
                self.tuning.session.manager,
                self.owner(strategy),
                f"search strategy {strategy.name!r} raised {type(failure).__name__}: {failure}",
                f"{self.kernel.__name__} goes on with the best points measured",
            )
            found = self.best_measured()
        return self.checked(strategy, found)

    def owner(self, strategy: SearchStrategy) -> str:
        """The plugin that registered ``strategy``."""
        return self.tuning.session.registries.search_strategies.owners.get(strategy.name, strategy.name)

    def bounded(self, strategy: SearchStrategy, budget: SearchBudget) -> Callable[[Any], dict[Point, float]]:
        """The measure function ``strategy`` is handed: points checked, the budget bound, repeats not re-run.

        :raises PluginError: for something that is no list of points of the space.
        :raises BudgetSpent: once the point cap or the wall-clock budget allows nothing more.
        """
        geometry = self.space.geometry
        known: dict[Point, float] = {}

        def measure(points: Any) -> dict[Point, float]:
            listed = list(points) if isinstance(points, list | tuple) else None
            if listed is None or not all(_is_point(p) and geometry.holds(p) for p in listed):
                raise PluginError(
                    f"{origin(self.tuning.session.manager, self.owner(strategy))}: search strategy "
                    f"{strategy.name!r} asked {self.kernel.__name__} to measure {points!r}, which is not a "
                    "list of (shape, profile) points of its space"
                )
            # Once nothing more may be measured, every call stops the strategy, a call for points it
            # has already had too: a strategy that never looks at its budget must still end.
            if budget.max_points is not None and len(known) >= budget.max_points:
                raise BudgetSpent(f"point cap of {budget.max_points} reached")
            if budget.expired():
                raise BudgetSpent(f"wall-clock budget of {budget.seconds:g} s spent")
            if len(known) == geometry.space_size:
                raise BudgetSpent("every point of the space is measured")
            fresh = [p for p in dict.fromkeys(listed) if p not in known]
            if budget.max_points is not None:
                fresh = fresh[: budget.max_points - len(known)]
            if fresh:
                known.update(self.measure(fresh))
            return {p: known[p] for p in listed if p in known}

        return measure

    def best_measured(self) -> list[Point]:
        """The fastest points measured so far, as many as the finalists asked for."""
        timed = [(value, index) for index, value in self.outcomes.items() if math.isfinite(value)]
        return [self.space.point(index) for _, index in sorted(timed)[: self.hints.shape_final_top_k]]

    def checked(self, strategy: SearchStrategy, finalists: Any) -> list[Point]:
        """The strategy's finalists, each once, at most as many as asked for.

        :raises PluginError: naming the strategy's plugin, for an answer that
            is no list, or a finalist that is not a point of the space.
        """
        geometry = self.space.geometry
        named = (
            f"{origin(self.tuning.session.manager, self.owner(strategy))}: search strategy {strategy.name!r}"
        )
        if not isinstance(finalists, list | tuple):
            raise PluginError(
                f"{named} returned {finalists!r} for {self.kernel.__name__}; a strategy returns a list of "
                "points"
            )
        kept: list[Point] = []
        for point in finalists:
            valid = (
                isinstance(point, tuple) and len(point) == 2 and _is_point(point) and geometry.holds(point)
            )
            if not valid:
                raise PluginError(
                    f"{named} returned {point!r} as a finalist of {self.kernel.__name__}, which is not a "
                    "(shape, profile) point of its space"
                )
            if point not in kept:
                kept.append(point)
        return kept[: self.hints.shape_final_top_k]

    def measure(self, points: list[Point]) -> dict[Point, float]:
        """Measure a round through the engine; every rank's agreed time per point.

        The round's candidates that may run are compiled by the engine's
        COMPILE stage, in parallel, before any of them is measured. Candidates an
        earlier search of this key measured, for a space that has changed
        since, keep their stored times (``Tuning.reused``, alike on every
        rank); stage 3 re-times the finalists whatever they hold.
        """
        stored = self.tuning.reused
        known = {p: stored[self.space.index(p)] for p in points if self.space.index(p) in stored}
        points = [p for p in points if p not in known]
        if not points:
            return known
        candidates = [self.space.candidate(p) for p in points]
        problems = self.screen(points, candidates)
        self.tuning.request(candidates)
        screened = self.isolate([c for c in candidates if c.index not in problems])
        by_index = dict(zip((c.index for c in candidates), points, strict=True))
        if self.compile_config is not None:
            runnable = [c for c in candidates if c.index not in problems and c.index not in screened]
            self.tuning.compile(
                lambda candidate: self.build(candidate, by_index[candidate.index]),
                runnable,
                child=self.compile_process,
            )
        while (candidate := self.tuning.next_candidate()) is not None:
            problem = problems.get(candidate.index)
            if problem is not None:
                self.tuning.fail(candidate, problem)
            else:
                self.tuning.measure(candidate, self.runner(candidate, by_index[candidate.index]))
        times = self.tuning.times(candidates)
        for candidate, value in zip(candidates, times, strict=True):
            self.outcomes[candidate.index] = value
        if self.timed:
            # One number more per round: the slowest rank's clock, so that every rank's budget
            # runs out at the same round (a rank stopping alone would leave the others waiting).
            (self.agreed_elapsed,) = self.tuning.reducer.max([time.perf_counter() - self.started])
        return {**known, **dict(zip(points, times, strict=True))}

    def finalise(self, finalists: list[Point]) -> Candidate:
        """Stage 3: re-time the finalists precisely, gate them, and pick.

        Where no finalist is named, or every one fails in stage 3, the
        space's fallback points (:meth:`SearchGeometry.fallback`) are
        measured too, once, and the pick is made among everything that ran:
        an empty plan never reaches SELECT.
        """
        if not finalists:
            finalists = self.fall_back("the search named no finalist")
        candidates = [self.space.candidate(p) for p in finalists]
        per_round = max(1, self.tuning.session.settings.repeat * PRECISE_REPEAT_FACTOR // PRECISE_ROUNDS)
        self.say(
            f"stage 3: re-timing {len(candidates)} finalist(s), {per_round * PRECISE_ROUNDS} runs each "
            f"in {PRECISE_ROUNDS} interleaved rounds"
        )
        by_index = dict(zip((c.index for c in candidates), finalists, strict=True))
        # Every rank requests every finalist in every round, failed or not, so
        # that the per-candidate barriers stay matched across ranks.
        self.tuning.request(candidates, repeat=per_round, rounds=PRECISE_ROUNDS, purpose="stage 3")
        while (candidate := self.tuning.next_candidate()) is not None:
            self.tuning.measure(candidate, self.runner(candidate, by_index[candidate.index]))
        times = self.tuning.times(candidates)
        for candidate, value in zip(candidates, times, strict=True):
            self.outcomes[candidate.index] = value
            self.say(f"stage 3: {candidate.label}: {format_ms(value)}")
        if not any(math.isfinite(t) for t in times) and not self.fell_back:
            self.fall_back("every finalist failed in stage 3")
            ran = [self.tuning.space.candidates[i] for i, t in self.outcomes.items() if math.isfinite(t)]
            if ran:
                return self.tuning.finish(among=ran)
        if self.hints.reference_fn is not None:
            self.gate(candidates, times)
        try:
            return self.tuning.finish(among=candidates)
        except NoValidConfigError as exc:
            if self.hints.reference_fn is None:
                raise
            raise NoValidConfigError(
                f"{self.kernel.__name__}: none of the {len(candidates)} finalists passed reference_fn\n{exc}"
            ) from exc

    def recheck(self) -> Candidate:
        """Re-time a stored pick the record asks to re-check, head to head with its rivals; pick among them.

        The pick was uncertain (or ``kerneltune cache verify`` marked it):
        instead of searching again, the pick and the rivals it could not be
        told apart from are compiled and timed in interleaved rounds, and
        SELECT's verdict replaces the stored one.
        """
        candidates = list(self.tuning.rechecking)
        points = {c.index: self.space.point(c.index) for c in candidates}
        rounds = self.tuning.recheck_rounds
        self.say(
            f"re-checking the stored pick {candidates[0].label} against {len(candidates) - 1} rival(s) "
            f"in {rounds} interleaved rounds"
        )
        if self.compile_config is not None:
            self.tuning.compile(
                lambda candidate: self.build(candidate, points[candidate.index]),
                candidates,
                child=self.compile_process,
            )
        per_round = max(1, self.tuning.session.settings.repeat // 2)
        self.tuning.request(candidates, repeat=per_round, rounds=rounds, purpose="re-check")
        while (candidate := self.tuning.next_candidate()) is not None:
            self.tuning.measure(candidate, self.runner(candidate, points[candidate.index]))
        return self.tuning.finish(among=candidates)

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

    def gate(self, candidates: list[Candidate], times: list[float]) -> None:
        """Check finalists fastest first; alone, stop at the first that passes."""
        alone = self.tuning.reducer.world_size == 1
        for i in sorted(range(len(candidates)), key=lambda i: (times[i], i)):
            candidate = candidates[i]
            if not math.isfinite(times[i]):
                continue
            problem = self.check(candidate)
            if problem is None:
                self.say(f"stage 3: {candidate.label} passed reference_fn")
                if alone:
                    return
            else:
                self.say(f"stage 3: {candidate.label} rejected: {describe_error(problem)}")
                self.failures[candidate.index] = describe_error(problem)
                self.outcomes[candidate.index] = math.inf
                self.tuning.fail(candidate, problem)

    def check(self, candidate: Candidate) -> BaseException | None:
        """Run a finalist once on the caller's arguments and ask ``reference_fn``; the rejection, if any."""
        reference = self.hints.reference_fn
        assert reference is not None  # finalise gates the finalists only with a reference_fn
        verdicts: list[BaseException] = []

        def launch_then_check(launch: Callable[[], object]) -> None:
            launch()
            try:
                passed = reference(*self.args, **self.launch)
            except Exception as exc:
                verdicts.append(RejectedByReference(f"reference_fn raised {describe_error(exc)}"))
                return
            if passed is False:
                verdicts.append(RejectedByReference("reference_fn returned False"))

        try:
            adapter.launch_config(
                self.kernel, self.args, self.kwargs(), candidate.config, around=launch_then_check
            )
        except Exception as exc:
            return exc
        return verdicts[0] if verdicts else None

    # -- one round: screening, parallel compilation, launching ----------------

    def kwargs(self) -> dict[str, Any]:
        return {**self.launch, "grid": self.grid, "warmup": False}

    def screen(self, points: list[Point], candidates: list[Candidate]) -> dict[int, BaseException]:
        """Find, before compiling, the candidates that must not run: pruned, or too big for the device."""
        problems: dict[int, BaseException] = {}
        pruned = self.pruned([c.config for c in candidates])
        for point, candidate in zip(points, candidates, strict=True):
            if candidate.config in pruned:
                problems[candidate.index] = CandidateDropped("removed by early_config_prune")
                continue
            larger = self.dominated(point)
            if larger is not None:
                problems[candidate.index] = CandidateDropped(larger)
        for candidate in candidates:
            problem = problems.get(candidate.index)
            if problem is not None:
                self.drop(candidate, problem)
        return problems

    def isolate(self, candidates: list[Candidate]) -> dict[int, str]:
        """ISOLATE for a round: those that crash or hang the worker on any rank fail unlaunched here.

        Every rank screens every round (one gather each), whatever it dropped.
        """
        if self.screen_one is None:
            return {}
        screened = self.tuning.isolate(self.screen_one, candidates)
        everyone = self.tuning.space.candidates
        for index, reason in sorted(screened.items()):
            with self.noting:
                self.failures[index] = f"ScreenedOut: {reason}"
            self.say(f"screened out {everyone[index].label}: {self.failures[index]}")
        return screened

    def drop(self, candidate: Candidate, problem: BaseException) -> None:
        with self.noting:
            self.dropped.add(candidate.index)
            self.failures[candidate.index] = describe_error(problem)
        self.say(f"dropped {candidate.label}: {describe_error(problem)}")

    def pruned(self, configs: list[Any]) -> list[Any]:
        prune = self.kernel.early_prune
        if prune is None:
            return []
        named = dict(zip(self.kernel.arg_names, self.args, strict=False))
        kept = prune(configs, named, **self.kwargs())
        return [c for c in configs if c not in kept]

    def dominated(self, point: Point) -> str | None:
        """Why a shape need not be compiled: it is no smaller than one that ran out of resources."""
        if self.space.given:
            return None
        shape, profile = point
        for smaller, reason in self.exhausted.get(profile, ()):
            if all(a >= b for a, b in zip(shape, smaller, strict=True)):
                return (
                    f"dropped before compiling: no block smaller than in {self.label((smaller, profile))} "
                    f"({reason})"
                )
        return None

    def note_exhausted(self, point: Point, reason: str) -> None:
        self.exhausted.setdefault(point[1], []).append((point[0], reason))

    def build(self, candidate: Candidate, point: Point) -> None:
        """Compile one candidate (on a COMPILE pool thread); a failure drops it, and
        a kernel out of resources rules out the shapes no smaller than it."""
        assert self.compile_config is not None
        try:
            self.compile_config(candidate.config)
        except Exception as exc:
            if compiler.in_compile_process():
                raise  # a forked compile process: the parent compiles again and notes the failure
            self.drop(candidate, exc)
            if isinstance(exc, compiler.CannotRun) or compiler.out_of_resources(exc):
                with self.noting:
                    self.note_exhausted(point, str(exc))
                # Too large for the device: part of searching, not a failure to warn about.
                raise CandidateDropped(describe_error(exc)) from exc
            raise

    def runner(self, candidate: Candidate, point: Point) -> Callable[[], None]:
        def run() -> None:
            try:
                adapter.launch_config(self.kernel, self.args, self.kwargs(), candidate.config)
            except Exception as exc:
                self.failures[candidate.index] = describe_error(exc)
                if compiler.out_of_resources(exc):
                    self.note_exhausted(point, str(exc))
                    raise CandidateDropped(describe_error(exc)) from exc
                raise

        return run

    # -- output ---------------------------------------------------------------

    def report(self, best: Candidate, summary: SearchSummary) -> None:
        """``TRITON_PRINT_AUTOTUNING``: the pick; ``..._TIMINGS``: every measured candidate too."""
        if not _env_flag("TRITON_PRINT_AUTOTUNING"):
            return
        triton_key, fixed = summary.key
        fixed_text = f" (fixed at launch: {', '.join(f'{k}={v}' for k, v in fixed)})" if fixed else ""
        print(
            f"Triton autotuning (kerneltune search_params) for function {self.kernel.__name__},\n"
            f"with key as {triton_key!r}{fixed_text},\n"
            f"finished after {summary.seconds:.2f}s, {summary.measured} of {summary.space} candidates "
            f"measured ({summary.dropped} dropped),\n"
            f"best config selected: {best.label} at {format_ms(self.outcomes[best.index])};",
            flush=True,
        )
        if _env_flag("TRITON_PRINT_AUTOTUNING_TIMINGS"):
            candidates = self.tuning.space.candidates
            for index, value in sorted(self.outcomes.items(), key=lambda item: (item[1], item[0])):
                outcome = self.failures.get(index) if not math.isfinite(value) else None
                print(f"  {candidates[index].label}: {outcome or format_ms(value)}", flush=True)
