"""The state of one call of a contextual tuner, and what it does with each intercepted launch.

:class:`ContextualCall` is the interceptors' route: it discovers each
(kernel, key) (a :class:`~kerneltune.core.drivers.kernel_keys.KernelKey`),
drives the engine's tuning of the one being measured, launches the others
with a stand-in config, and tells the outer function's loop whether an
execution left kernels waiting.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from kerneltune.core.drivers.checked_launches import launch_check
from kerneltune.core.drivers.checked_outputs import CheckOptions
from kerneltune.core.drivers.executions import Executions
from kerneltune.core.drivers.kernel_keys import KernelKey
from kerneltune.core.drivers.options import VERBOSE
from kerneltune.core.errors import (
    CandidateDropped,
    KernelTuneError,
    NoValidConfigError,
    WrongOutput,
    describe_error,
    format_failure,
)
from kerneltune.core.isolation.options import ISOLATE
from kerneltune.core.isolation.parent import SUBPROCESS, ScreenedOut
from kerneltune.core.machine.faces import SteppedTuning
from kerneltune.core.machine.failed_configs import argument_dtypes
from kerneltune.core.machine.outputs import Tolerance
from kerneltune.core.machine.timing import TIMED, WARMUP
from kerneltune.core.notices import warn_once
from kerneltune.core.plugin_system.contracts import (
    CheckedLaunch,
    DirectLaunch,
    ForkingLaunch,
    InPlaceLaunch,
    IsolatingLaunch,
    KernelLaunch,
    ProgramLaunch,
    ReportingLaunch,
    UnsupportedLaunch,
    provides,
)
from kerneltune.core.plugin_system.session import Session
from kerneltune.core.values.direct import DirectLaunches
from kerneltune.core.values.events import KernelTuned, LaunchMeasured
from kerneltune.core.values.records import Candidate
from kerneltune.core.values.space import Space
from kerneltune.core.values.timings import CandidateTiming


class ContextualCall:
    """The state of one call of a contextual tuner: what ``route`` works on.

    :param name: the outer function's name, for messages.
    :param is_dist, verbose: the tuner's options of those names.
    :param warmup, repeat, flush: the tuner's ``n_warmup``, ``n_repeat`` and ``flush_cache``.
    :param direct: where launches met as plain cache hits are filed for the interceptors to make
        themselves in later calls (:class:`~kerneltune.core.values.direct.DirectLaunches`).
    :param checking: the tuner's ``check_outputs``, ``rtol`` and ``atol`` (default: the settings').
    """

    def __init__(
        self,
        name: str,
        session: Session,
        *,
        is_dist: bool,
        verbose: bool,
        warmup: int,
        repeat: int,
        flush: bool,
        context: str = "",
        direct: DirectLaunches | None = None,
        checking: CheckOptions | None = None,
    ) -> None:
        self.name = name
        self.session = session
        #: what a stored pick is keyed by besides each kernel's source: the outer function's
        #: source where picks persist across processes (contextual_cache = "disk"), else nothing.
        self.context = context
        self.verbose = verbose or session.settings[VERBOSE]
        reducer = session.make_reducer(None)
        self.distributed = is_dist and reducer.world_size > 1
        if is_dist and reducer.world_size == 1 and reducer.name == "local":
            warn_once(
                ("contextual-is-dist-alone", name),
                f"contextual_autotune(is_dist=True): {name} runs with no process group (torch.distributed "
                "is not initialized, or the reducer in force is 'local'): this process tunes alone, and "
                "other processes may pick other configs",
            )
        self.warmup = warmup
        self.repeat = repeat
        self.flush = flush
        self.direct = direct
        self.checking = checking or CheckOptions(None, Tolerance())
        self.isolating = session.settings[ISOLATE] == SUBPROCESS
        # By id(): every state holds its kernel, so no id is reused during the call.
        self.states: dict[tuple[int, Hashable], KernelKey] = {}
        self.focus: KernelKey | None = None
        self.abort: BaseException | None = None
        self._open: list[SteppedTuning] = []
        #: what the outer function's executions in this call did.
        self.executions = Executions(name)
        #: a launch that changes arguments in place ran as a cache hit in this call's first execution.
        self._changed: str | None = None

    def start_execution(self) -> None:
        """Reset the per-execution flags before the outer function runs again."""
        self.executions.start(any(not state.done for state in self.states.values()))

    def route(self, launch: KernelLaunch) -> Any:
        """Run one intercepted launch: measure it, stand in for it, or dispatch its pick."""
        if self.abort is not None:
            raise self.abort
        if provides(launch, UnsupportedLaunch) and (why := launch.unsupported()) is not None:
            return self._unsupported(launch, why)
        slot = (id(launch.kernel), launch.key)
        state = self.states.get(slot)
        if state is None:
            # Kept only once discovery succeeded: a prune function that raised
            # (in an outer function that caught it) is asked again next time.
            state = self.states[slot] = self._discover(launch)
            if not state.done:
                self.executions.fresh.append(state)
        if not state.done and self.focus is None:
            self._engine(self._focus_on, state, launch)
            self.executions.measured = True
        if state.done:
            return self._dispatch(state, launch)
        self._waiting()
        if state is self.focus:
            self.executions.measured = True
            return self._measure(state, launch)
        return self._stand_in(state, launch)

    def _unsupported(self, launch: KernelLaunch, why: str) -> Any:
        """A launch the interceptor cannot tune: refused where ranks must agree, else its own path."""
        if self.distributed:
            self.abort = KernelTuneError(
                f"contextual_autotune(is_dist=True): {self.name} launched kernel {launch.name}, which cannot "
                f"be tuned with the ranks agreeing: {why}. Left to itself, each rank would tune it alone and "
                "might pick another config; use triton.autotune or a tuner class kerneltune knows"
            )
            raise self.abort
        warn_once(
            ("contextual-unsupported", launch.name),
            f"contextual_autotune: {self.name}: kernel {launch.name} tunes itself, not kerneltune: {why}",
        )
        return launch.run_default()

    def _waiting(self) -> None:
        executions = self.executions
        if not executions.pending and self._changed is not None and executions.count == 1:
            warn_once(
                ("contextual-in-place", self.name, self._changed),
                f"contextual_autotune: in {self.name}, kernel {self._changed} changed arguments in place "
                "(restore_value) as a cache hit before a kernel that still needs tuning was launched; "
                "the function runs again, so that change is made twice in this call's result. Launch "
                "the kernels that need tuning first, or tune them in a call of their own",
            )
        executions.pending = True

    def _dispatch(self, state: KernelKey, launch: KernelLaunch) -> Any:
        """Launch a (kernel, key) that has its pick, as Triton would in this execution's place.

        In an execution that will be repeated, with the kernel's hooks around
        it, so nothing it zeroes or restores carries into the next. In one
        that may be returned, after a repeated one, the first launch of each
        (kernel, key) zeroes what the kernel zeroes, then the kernel's own cache hit.
        """
        if not provides(launch, InPlaceLaunch):
            return launch.run_default()
        pick, executions = launch.cached(), self.executions
        if pick is not None and (executions.pending or executions.rehearsal):
            executions.undone = True
            return launch.run(pick)
        if pick is not None and executions.count > 1 and state.reset_in != executions.count:
            state.reset_in = executions.count
            launch.reset(pick)
        elif executions.count == 1 and self._changed is None and launch.changes_in_place():
            self._changed = state.name
        elif (
            executions.count == 1
            and pick is not None
            and self.direct is not None
            and provides(launch, DirectLaunch)
            and (entry := launch.direct()) is not None
        ):
            # A first execution with nothing waiting runs exactly this in every later call.
            self.direct.add(launch.kernel, launch.key, entry)
        return launch.run_default()

    def _engine(self, step: Callable[..., object], *args: Any) -> None:
        # An error of the machine itself (no valid config, ranks disagreeing)
        # surfaces inside the user's kernel launch; remember it so that the
        # call raises it whatever the outer function does with it.
        try:
            step(*args)
        except BaseException as exc:
            if self.abort is None:
                self.abort = exc
            raise

    def _discover(self, launch: KernelLaunch) -> KernelKey:
        state = KernelKey(kernel=launch.kernel, name=launch.name, key=launch.key)
        if provides(launch, InPlaceLaunch) and (problem := launch.in_place_problem()) is not None:
            raise TypeError(f"contextual_autotune: {self.name}: kernel {launch.name}: {problem}")
        # With several ranks every (kernel, key) goes through the engine's
        # agreement, even where this rank's kernel cache already holds it:
        # a rank skipping it would leave the others waiting in a collective.
        if not self.distributed and launch.cached() is not None:
            state.done = True
            return state
        configs = list(launch.configs())
        candidates = list(launch.candidates())
        if not self.distributed and len(candidates) == 1:
            launch.commit(candidates[0])
            if provides(launch, ReportingLaunch):
                launch.report(candidates[0], (), None)
            state.done = True
            return state
        extra = [c for c in candidates if not _contains(configs, c)]
        listed = configs + extra
        state.space = Space.build(launch.name, listed, launch.source + self.context, label=launch.label)
        state.kept = tuple(i for i, c in enumerate(listed) if _contains(candidates, c))
        if self.isolating and provides(launch, IsolatingLaunch):
            # Before any collective of this (kernel, key): every rank raises alike.
            self._engine(self._isolation_of, state, launch)
        return state

    def _isolation_of(self, state: KernelKey, launch: IsolatingLaunch) -> None:
        state.isolated = launch.isolation()

    def _isolate(self, tuning: SteppedTuning, screened: dict[int, str]) -> None:
        """ISOLATE for the tuning: this rank's screening, shared with the other ranks by the engine."""

        def screen_one(candidate: Candidate) -> None:
            if candidate.index in screened:
                raise ScreenedOut(screened[candidate.index])

        tuning.isolate(screen_one)

    def _focus_on(self, state: KernelKey, launch: KernelLaunch) -> None:
        kept = frozenset(state.kept)
        tuning = state.tuner().begin(
            self.session,
            state.key,
            keep=lambda candidate: candidate.index in kept,
            group=None,
            verbose=self.verbose,
            warmup=self.warmup,
            repeat=self.repeat,
            flush=self.flush,
            driver="contextual",
            # Remembered failures are keyed by the arguments' dtypes: only a launch that shows them.
            dtypes=argument_dtypes(launch.arguments().values()) if provides(launch, CheckedLaunch) else None,
        )
        self._open.append(tuning)
        if tuning.hit:
            best = tuning.finish()
            self._close(tuning)
            launch.commit(best.config)
            if provides(launch, ReportingLaunch):
                launch.report(best.config, (), None)
            state.done = True
            return
        state.tuning = tuning
        state.check = launch_check(
            self.checking, self.session.settings, tuning, state.name, state.key, rerun=self.distributed
        )
        if state.check is not None:
            state.check.warm(launch)  # while the candidates compile
        self.focus = state
        screened = state.screened(self.session)
        if screened is not None:
            self._isolate(tuning, screened)
        # Compile processes first: asking for them starts the backend's
        # warm-up, which the compiler's own set-up then overlaps.
        child = launch.compile_process() if provides(launch, ForkingLaunch) else None
        compile_config = launch.compiler()
        if compile_config is not None:
            tuning.compile(lambda candidate: compile_config(candidate.config), child=child)
        if provides(launch, ProgramLaunch):
            tuning.twins(lambda c: launch.program(c.config), lambda c: launch.options(c.config))
        self._next_candidate(state, launch)

    def _next_candidate(self, state: KernelKey, launch: KernelLaunch) -> None:
        assert state.tuning is not None
        candidate = state.tuning.next_candidate()
        if candidate is None:
            self._finish(state, launch)
            return
        state.candidate = candidate
        state.launches = 0
        # One found wrong and handed out again (a later round) runs no more: stand-ins take its launches.
        state.error = None if state.check is None else state.check.dropped(candidate)
        state.runs = state.tuning.runs(candidate)

    def _finish(self, state: KernelKey, launch: KernelLaunch) -> None:
        assert state.tuning is not None
        tuning, state.tuning = state.tuning, None
        self.focus = None
        check, state.check = state.check, None
        try:
            best = tuning.finish()
        except NoValidConfigError as exc:
            self._tuned(state, tuning, None)
            if check is None or not check.wrong:
                raise
            raise NoValidConfigError(f"{exc}\n{check.summary()}") from exc.__cause__
        finally:
            self._close(tuning)
        self._tuned(state, tuning, best)
        if check is not None:
            check.warn()
        launch.commit(best.config)
        state.done = True
        if provides(launch, ReportingLaunch):
            self._report(state, tuning, best, launch)

    def _report(
        self, state: KernelKey, tuning: SteppedTuning, best: Candidate, launch: ReportingLaunch
    ) -> None:
        """Tell the kernel what its tuning measured of the candidates its pruning kept.

        A twin (a candidate launching the program of one measured before it) gets that one's times.
        """
        assert state.space is not None
        if tuning.seconds is None:  # picked without measuring: a hit, as the kernel's own tuner tells it
            launch.report(best.config, (), None)
            return
        timings = []
        for candidate in state.space.candidates:
            if candidate.index in state.kept:
                measured = tuning.measured_as(candidate)
                samples = tuple(sorted(tuning.samples(measured)))
                timings.append(CandidateTiming(candidate.config, tuning.agreed[measured.index], samples))
        launch.report(best.config, timings, tuning.seconds)

    def _tuned(self, state: KernelKey, tuning: SteppedTuning, best: Candidate | None) -> None:
        # Reported only with an outcome: a tuning cut short (an interrupt, a
        # failed collective) has none and must not read as "no valid config".
        assert state.space is not None
        self.session.observers.kernel_tuned(
            tuning.header.make(
                KernelTuned,
                candidates=state.space.candidates,
                means=tuple(state.means.get(c.index, float("inf")) for c in state.space.candidates),
                errors=tuple(tuning.error(c) for c in state.space.candidates),
                best=best,
                world_size=tuning.world_size,
            ),
        )

    def _close(self, tuning: SteppedTuning) -> None:
        self._open.remove(tuning)
        tuning.__exit__(None, None, None)

    def close(self) -> None:
        """Release every tuning still open (after an exception); nothing is persisted."""
        while self._open:
            self._close(self._open[-1])

    def _measure(self, state: KernelKey, launch: KernelLaunch) -> Any:
        candidate, runs = state.candidate, state.runs
        assert candidate is not None and runs is not None
        state.launches += 1
        if state.error is not None:
            result = self._stand_in(state, launch)
        else:
            phase, round_ = runs.phase, runs.round
            rounds = runs.warmup if phase == WARMUP else runs.repeat
            check = state.check
            try:
                if check is not None and candidate.index not in check.checked:
                    result = runs.run(functools.partial(check.run, launch, candidate))
                else:
                    result = runs.run(lambda wrap: launch.run(candidate.config, around=wrap))
            except Exception as exc:
                state.error = exc
                state.bad.add(candidate.index)
                self._launch_event(state, candidate, phase, round_, rounds, None, exc)
                if check is not None and isinstance(exc, WrongOutput):
                    result = check.result  # the reference's writes are in place: nothing to stand in for
                else:
                    result = self._stand_in(state, launch)
            else:
                if phase == WARMUP:
                    self._launch_event(state, candidate, phase, round_, rounds, None, None)
            if check is not None:
                self._engine(check.raise_if_unchecked)
        # Every rank spends every launch on a candidate, failed or not, so that
        # ranks whose outer function holds collectives stay aligned.
        if state.launches == runs.warmup + runs.repeat:
            self._engine(self._complete, state, launch)
        return result

    def _complete(self, state: KernelKey, launch: KernelLaunch) -> None:
        candidate, runs, check = state.candidate, state.runs, state.check
        assert candidate is not None and runs is not None and state.tuning is not None
        if state.error is None:
            try:
                samples = runs.samples()
                if check is not None and (wrong := check.settle(launch, candidate)) is not None:
                    raise wrong
            except Exception as exc:
                # Where an asynchronous device error surfaces (a kernel that faulted), or a
                # deferred verdict finds the candidate wrong; the log must say why it is invalid.
                state.error = exc
                state.bad.add(candidate.index)
                self._launch_event(state, candidate, TIMED, runs.repeat, runs.repeat, None, exc)
            else:
                for i, sample in enumerate(samples):
                    self._launch_event(state, candidate, TIMED, i + 1, runs.repeat, sample, None)
                state.tuning.record(candidate, samples)
                state.means[candidate.index] = state.tuning.mean(candidate)
                if candidate.index not in state.good:
                    state.good.append(candidate.index)
        if state.error is not None:
            if check is not None:
                check.drop(candidate)
            state.tuning.fail(candidate, state.error)
            state.means.pop(candidate.index, None)
        self._next_candidate(state, launch)

    def _stand_in(self, state: KernelKey, launch: KernelLaunch) -> Any:
        """Run the launch with a config that works, untimed; ``None`` when none does."""
        assert state.space is not None
        order = state.good + [i for i in state.kept if i not in state.good]
        unsafe = state.screened(self.session) or {}
        for index in order:
            if index in state.bad or index in unsafe:
                continue
            try:
                return launch.run(state.space.candidates[index].config)
            except Exception:
                state.bad.add(index)
        return None

    def _launch_event(
        self,
        state: KernelKey,
        candidate: Candidate,
        phase: str,
        round_: int,
        rounds: int,
        time_ms: float | None,
        error: BaseException | None,
    ) -> None:
        assert state.tuning is not None
        self.session.observers.launch_measured(
            state.tuning.header.make(
                LaunchMeasured,
                candidate=candidate,
                phase=phase,
                round=round_,
                rounds=rounds,
                time_ms=time_ms,
                error=None if error is None else describe_error(error),
                traceback=_traceback(error),
            ),
        )


def _traceback(error: BaseException | None) -> str | None:
    # A candidate dropped on purpose (a wrong output) has its reason, not a failure to trace.
    return None if error is None or isinstance(error, CandidateDropped) else format_failure(error)


def _contains(configs: Sequence[Any], config: Any) -> bool:
    # Identity first: some releases' configs have no __eq__, others compare
    # by value, and a pruning function may hand back equal copies.
    return any(c is config for c in configs) or any(c == config for c in configs)
