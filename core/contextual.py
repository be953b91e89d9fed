"""The contextual driver: tune the kernels an outer function launches, inside that function.

This is the engine behind ``triton_dist.autotuner.contextual_autotune``. A
call of a :class:`ContextualAutoTuner` installs every available interceptor
plugin and runs the outer function again and again. Each launch of a
tunable kernel reaches :meth:`_Call.route` as a :class:`KernelLaunch` that
carries that execution's own arguments. Tuning state is kept per (kernel,
key): one :class:`~kerneltune.core.engine.Tuner` per kernel and candidate
list, one :class:`~kerneltune.core.engine.Tuning` per key, driven with
``next_candidate`` / ``record`` / ``fail`` / ``finish`` like the
function-level driver drives it, so agreement, reduction and selection are
the engine's.

One (kernel, key) is measured at a time, the first one launched while none
is: each of its candidates gets ``n_warmup`` untimed launches and then
``n_repeat`` timed ones, one launch per time the outer function launches
that kernel with that key, however many executions that takes. Every rank
spends the same number of launches on each candidate, failed or not, so
ranks whose outer function holds collectives stay aligned. Launches of
kernels that wait for their turn, and the remaining launches of a candidate
that failed, run with a stand-in config that works (their results are
thrown away with the execution's). When an execution goes by without
launching anything that waits for a pick, every kernel it launched ran with
its pick, and its result is returned.

An outer function that launches the same kernels with the same keys on every
execution launches the (kernel, key) being measured in every execution. One
whose kernels bring a new key each time (a counter or a pointer in the key)
never does again, and the others would wait for their turn forever: after
:data:`STALL_LIMIT` executions in a row that launch kernels waiting for a
pick but measure nothing, the call raises
:class:`~kerneltune.core.errors.StalledTuningError`.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import weakref
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import attrs
from kerneltune.core.contracts import Interceptor, KernelLaunch
from kerneltune.core.engine import Tuner, Tuning
from kerneltune.core.errors import NoValidConfigError, StalledTuningError, TunerBusyError, describe_error
from kerneltune.core.events import KernelTuned, LaunchMeasured
from kerneltune.core.measure import TIMED, WARMUP, CandidateRuns
from kerneltune.core.records import Candidate
from kerneltune.core.registry import collect_registry
from kerneltune.core.session import Session, current_session
from kerneltune.core.space import Space
from kerneltune.core.wrapping import FunctionWrapper

#: Executions in a row that may launch kernels waiting for a pick without
#: measuring anything before a call gives up. An outer function that launches
#: the same kernels with the same keys every time measures in every
#: execution; the slack is for one that launches a kernel only every few
#: executions.
STALL_LIMIT = 10

Thunk = Callable[[], object]


#: Each kernel object's tuners (one per candidate list), and with them its
#: in-process picks: they live as long as the kernel, and another kernel
#: object, even one of the same source and configs, or one made later at the
#: same address, starts with none. Only the one active tuner touches it.
_TUNERS: weakref.WeakKeyDictionary[object, dict[str, Tuner]] = weakref.WeakKeyDictionary()


class _Active:
    """The process's one active contextual tuner."""

    lock = threading.Lock()
    name = ""
    thread = ""


@attrs.define(eq=False)
class _KernelKey:
    """The tuning state of one (kernel, key) during one call."""

    kernel: object
    name: str
    key: Hashable
    space: Space | None = None
    kept: tuple[int, ...] = ()
    done: bool = False
    tuning: Tuning | None = None
    candidate: Candidate | None = None
    launches: int = 0
    runs: CandidateRuns | None = None
    error: BaseException | None = None
    means: dict[int, float] = attrs.field(factory=dict)
    good: list[int] = attrs.field(factory=list)
    bad: set[int] = attrs.field(factory=set)


class _Call:
    """The state of one call of a :class:`ContextualAutoTuner`: what ``route`` works on."""

    def __init__(self, owner: ContextualAutoTuner, session: Session) -> None:
        self.owner = owner
        self.session = session
        self.distributed = owner.is_dist and session.make_reducer(None).world_size > 1
        # By id(): every state holds its kernel, so no id is reused during the call.
        self.states: dict[tuple[int, Hashable], _KernelKey] = {}
        self.focus: _KernelKey | None = None
        self.abort: BaseException | None = None
        self._open: list[Tuning] = []
        #: this execution launched a (kernel, key) that has no pick yet.
        self.pending = False
        #: this execution measured a launch or settled a (kernel, key).
        self.measured = False
        #: executions in a row that were pending but measured nothing, and
        #: the (kernel, key) pairs they met first (for the error).
        self.stalls = 0
        self.fresh: list[_KernelKey] = []

    # -- executions --------------------------------------------------------------

    def start_execution(self) -> None:
        """Reset the per-execution flags before the outer function runs again."""
        self.pending = False
        self.measured = False

    def check_progress(self) -> None:
        """Count an execution that left kernels waiting; give up after :data:`STALL_LIMIT` idle ones.

        :raises StalledTuningError: naming the (kernel, key) being measured
            and the keys first seen while it was not launched.
        """
        if self.measured:
            self.stalls = 0
            self.fresh.clear()
            return
        self.stalls += 1
        if self.stalls >= STALL_LIMIT:
            raise StalledTuningError(self._stall_report())

    def _stall_report(self) -> str:
        # A launch that waits implies a focus: a launch met with no focus
        # becomes the focus and is measured.
        focus = self.focus
        assert focus is not None
        text = (
            f"contextual_autotune: {self.owner.__name__} cannot finish tuning: the last {self.stalls} "
            f"executions did not launch kernel {focus.name} with key {focus.key!r}, the one being measured"
        )
        if self.fresh:
            seen = [f"{s.name} {s.key!r}" for s in self.fresh]
            if len(seen) > 4:
                seen[3:-1] = ["..."]
            text += (
                f", but launched (kernel, key) pairs not seen before ({', '.join(seen)}); a key that "
                "holds a value changing from one execution to the next (a counter, a pointer), or a "
                "kernel object made anew in each execution, can never be tuned"
            )
        else:
            text += ", while they launched kernels that wait for their turn"
        return (
            text + ". Every execution of the outer function must launch the same kernels with the same keys."
        )

    # -- routing -----------------------------------------------------------------

    def route(self, launch: KernelLaunch) -> Any:
        """Run one intercepted launch: measure it, stand in for it, or dispatch its pick."""
        if self.abort is not None:
            raise self.abort
        slot = (id(launch.kernel), launch.key)
        state = self.states.get(slot)
        if state is None:
            # Kept only once discovery succeeded: a prune function that raised
            # (in an outer function that caught it) is asked again next time.
            state = self.states[slot] = self._discover(launch)
            if not state.done:
                self.fresh.append(state)
        if not state.done and self.focus is None:
            self._engine(self._focus_on, state, launch)
            self.measured = True
        if state.done:
            return launch.run_default()
        self.pending = True
        if state is self.focus:
            self.measured = True
            return self._measure(state, launch)
        return self._stand_in(state, launch)

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

    def _discover(self, launch: KernelLaunch) -> _KernelKey:
        state = _KernelKey(kernel=launch.kernel, name=launch.name, key=launch.key)
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
            state.done = True
            return state
        extra = [c for c in candidates if not _contains(configs, c)]
        listed = configs + extra
        state.space = Space.build(launch.name, listed, launch.source, label=launch.label)
        state.kept = tuple(i for i, c in enumerate(listed) if _contains(candidates, c))
        return state

    # -- the machine ---------------------------------------------------------------

    def _focus_on(self, state: _KernelKey, launch: KernelLaunch) -> None:
        assert state.space is not None
        tuners = _TUNERS.setdefault(state.kernel, {})
        tuner = tuners.get(state.space.fingerprint)
        if tuner is None:
            tuner = tuners[state.space.fingerprint] = Tuner(state.space)
        kept = frozenset(state.kept)
        tuning = tuner.begin(
            self.session,
            state.key,
            keep=lambda candidate: candidate.index in kept,
            group=None,
            verbose=self.owner.verbose,
            warmup=self.owner.n_warmup,
            repeat=self.owner.n_repeat,
            flush=self.owner.flush_cache,
        )
        self._open.append(tuning)
        if tuning.hit:
            best = tuning.finish()
            self._close(tuning)
            launch.commit(best.config)
            state.done = True
            return
        state.tuning = tuning
        self.focus = state
        compile_config = launch.compiler()
        if compile_config is not None:
            tuning.compile(lambda candidate: compile_config(candidate.config))
        self._next_candidate(state, launch)

    def _next_candidate(self, state: _KernelKey, launch: KernelLaunch) -> None:
        assert state.tuning is not None
        candidate = state.tuning.next_candidate()
        if candidate is None:
            self._finish(state, launch)
            return
        state.candidate = candidate
        state.launches = 0
        state.error = None
        state.runs = state.tuning.runs(candidate)

    def _finish(self, state: _KernelKey, launch: KernelLaunch) -> None:
        assert state.tuning is not None
        tuning, state.tuning = state.tuning, None
        self.focus = None
        try:
            best = tuning.finish()
        except NoValidConfigError:
            self._tuned(state, tuning, None)
            raise
        finally:
            self._close(tuning)
        self._tuned(state, tuning, best)
        launch.commit(best.config)
        state.done = True

    def _tuned(self, state: _KernelKey, tuning: Tuning, best: Candidate | None) -> None:
        # Reported only with an outcome: a tuning cut short (an interrupt, a
        # failed collective) has none and must not read as "no valid config".
        assert state.space is not None
        self.session.notify(
            "kerneltune_kernel_tuned",
            KernelTuned(
                kernel=state.name,
                key=state.key,
                candidates=state.space.candidates,
                means=tuple(state.means.get(c.index, float("inf")) for c in state.space.candidates),
                best=best,
                world_size=tuning.reducer.world_size,
                verbose=self.owner.verbose,
            ),
        )

    def _close(self, tuning: Tuning) -> None:
        self._open.remove(tuning)
        tuning.__exit__(None, None, None)

    def close(self) -> None:
        """Release every tuning still open (after an exception); nothing is persisted."""
        while self._open:
            self._close(self._open[-1])

    # -- launches --------------------------------------------------------------------

    def _measure(self, state: _KernelKey, launch: KernelLaunch) -> Any:
        candidate, runs = state.candidate, state.runs
        assert candidate is not None and runs is not None
        state.launches += 1
        if state.error is not None:
            result = self._stand_in(state, launch)
        else:
            phase, round_ = runs.phase, runs.round
            rounds = runs.warmup if phase == WARMUP else runs.repeat
            try:
                result = runs.run(lambda wrap: launch.run(candidate.config, around=wrap))
            except Exception as exc:
                state.error = exc
                state.bad.add(candidate.index)
                self._launch_event(state, candidate, phase, round_, rounds, None, exc)
                result = self._stand_in(state, launch)
            else:
                if phase == WARMUP:
                    self._launch_event(state, candidate, phase, round_, rounds, None, None)
        # Every rank spends every launch on a candidate, failed or not, so that
        # ranks whose outer function holds collectives stay aligned.
        if state.launches == runs.warmup + runs.repeat:
            self._engine(self._complete, state, launch)
        return result

    def _complete(self, state: _KernelKey, launch: KernelLaunch) -> None:
        candidate, runs = state.candidate, state.runs
        assert candidate is not None and runs is not None and state.tuning is not None
        if state.error is None:
            try:
                samples = runs.samples()
            except Exception as exc:
                # Where an asynchronous device error surfaces (a kernel that
                # faulted); the log must say why the candidate is invalid.
                state.error = exc
                self._launch_event(state, candidate, TIMED, runs.repeat, runs.repeat, None, exc)
            else:
                for i, sample in enumerate(samples):
                    self._launch_event(state, candidate, TIMED, i + 1, runs.repeat, sample, None)
                state.tuning.record(candidate, samples)
                state.means[candidate.index] = state.tuning.mean(candidate)
                if candidate.index not in state.good:
                    state.good.append(candidate.index)
        if state.error is not None:
            state.tuning.fail(candidate, state.error)
            state.means.pop(candidate.index, None)
        self._next_candidate(state, launch)

    def _stand_in(self, state: _KernelKey, launch: KernelLaunch) -> Any:
        """Run the launch with a config that works, untimed; ``None`` when none does."""
        assert state.space is not None
        order = state.good + [i for i in state.kept if i not in state.good]
        for index in order:
            if index in state.bad:
                continue
            try:
                return launch.run(state.space.candidates[index].config)
            except Exception:
                state.bad.add(index)
        return None

    # -- observers ---------------------------------------------------------------------

    def _launch_event(
        self,
        state: _KernelKey,
        candidate: Candidate,
        phase: str,
        round_: int,
        rounds: int,
        time_ms: float | None,
        error: BaseException | None,
    ) -> None:
        self.session.notify(
            "kerneltune_launch_measured",
            LaunchMeasured(
                kernel=state.name,
                key=state.key,
                candidate=candidate,
                phase=phase,
                round=round_,
                rounds=rounds,
                time_ms=time_ms,
                error=None if error is None else describe_error(error),
                verbose=self.owner.verbose,
            ),
        )


def _contains(configs: Sequence[Any], config: Any) -> bool:
    # Identity first: some releases' configs have no __eq__, others compare
    # by value, and a pruning function may hand back equal copies.
    return any(c is config for c in configs) or any(c == config for c in configs)


class ContextualAutoTuner(FunctionWrapper):
    """An outer function whose inner tunable kernels are tuned in its real context.

    Call it as the original function. See :func:`contextual_autotune`.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        is_dist: bool = False,
        n_repeat: int = 5,
        n_warmup: int = 3,
        flush_cache: bool = True,
        verbose: bool = False,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"contextual_autotune decorates a function, got {fn!r}")
        for name, value, least in (("n_repeat", n_repeat, 1), ("n_warmup", n_warmup, 0)):
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"contextual_autotune: {name} must be an integer >= {least}, got {value!r}")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.is_dist = bool(is_dist)
        self.n_repeat = n_repeat
        self.n_warmup = n_warmup
        self.flush_cache = bool(flush_cache)
        self.verbose = bool(verbose)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Tune every inner kernel launch not tuned yet, then return a run with the picks."""
        if not _Active.lock.acquire(blocking=False):
            raise TunerBusyError(
                f"contextual_autotune: cannot run {self.__name__} while {_Active.name} is being tuned "
                f"(in thread {_Active.thread}); only one ContextualAutoTuner may be active at a time, "
                "nested or concurrent use is not supported"
            )
        try:
            _Active.name = self.__name__
            _Active.thread = threading.current_thread().name
            return self._tune_and_run(args, kwargs)
        finally:
            _Active.name = _Active.thread = ""
            _Active.lock.release()

    def _tune_and_run(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        # The kernels' own caches hold the picks (and _TUNERS the engine's, per
        # kernel object): no cache plugin shares them across kernel objects or
        # processes, and without is_dist every rank tunes on its own.
        overrides: dict[str, Any] = {"cache": "none"}
        if not self.is_dist:
            overrides["reducer"] = "local"
        session = current_session(**overrides)
        interceptors = collect_registry(session.manager, "interceptor", "kerneltune_register_interceptors")
        call = _Call(self, session)
        # The stack undoes everything whatever is raised, uninstalls included:
        # one interceptor failing to uninstall must not leave another library
        # patched. Open tunings are released last.
        with contextlib.ExitStack() as undo:
            undo.callback(call.close)
            for cls in interceptors.classes.values():
                if cls.is_available():
                    interceptor: Interceptor = cls()
                    interceptor.install(call.route)
                    undo.callback(interceptor.uninstall)
            while True:
                call.start_execution()
                try:
                    result = self.fn(*args, **kwargs)
                except BaseException as exc:
                    if call.abort is not None and exc is not call.abort:
                        raise call.abort from exc
                    raise
                if call.abort is not None:
                    raise call.abort
                if not call.pending:
                    return result
                call.check_progress()


def contextual_autotune(
    is_dist: bool = False,
    n_repeat: int = 5,
    n_warmup: int = 3,
    *,
    flush_cache: bool = True,
    verbose: bool = False,
) -> Callable[[Callable[..., Any]], ContextualAutoTuner]:
    """Decorate a function so that the ``triton.autotune`` kernels it launches are tuned in its context.

    :param is_dist: take each candidate's MAX time over the ranks of
        torch.distributed's WORLD group before selecting (every rank must
        make the same calls); without it each rank picks on its own.
    :param n_repeat: timed launches per candidate; their mean is compared.
    :param n_warmup: untimed launches per candidate before timing.
    :param flush_cache: evict the device's L2 cache before each timed launch
        where the device has one (CUDA: a 256 MB write), outside the timing.
    :param verbose: print each candidate's time and the picks on stdout.

    The outer function runs repeatedly until every kernel it launches has a
    pick, then once more with the picks; that result is returned. A kernel
    whose candidates all fail raises ``RuntimeError("cannot find valid
    config ...")``. Executions that stop launching the (kernel, key) being
    measured, as when a key holds a counter, raise
    :class:`~kerneltune.core.errors.StalledTuningError` after
    :data:`STALL_LIMIT` of them in a row. Only one ContextualAutoTuner may
    be active at a time.
    """

    def decorate(fn: Callable[..., Any]) -> ContextualAutoTuner:
        return ContextualAutoTuner(
            fn,
            is_dist=is_dist,
            n_repeat=n_repeat,
            n_warmup=n_warmup,
            flush_cache=flush_cache,
            verbose=verbose,
        )

    return decorate
