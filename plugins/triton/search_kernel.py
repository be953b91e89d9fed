"""Kernels decorated with ``triton.autotune(..., hints={"search_params": ...})``.

:func:`make_autotune` wraps Triton's ``autotune``: without the hint it calls
the original untouched; with it, the kernel becomes a
:class:`SearchParamsKernel`, whose candidates are generated (every block
shape of the searched params times every compile-option profile of the
family the operator classifier chooses) and searched in stages
(:mod:`kerneltune.plugins.triton.search`) instead of measured exhaustively.

Every measurement goes through kerneltune's engine: one adaptive
:class:`~kerneltune.core.Tuning` per key over the whole space, so the timer,
the reducer (MAX over ranks), the observers and the cache are the
configured plugins, and the pick is remembered like any other. Stage 3
re-times the finalists with more runs and applies ``reference_fn``.
"""

from __future__ import annotations

import copy
import functools
import inspect
import itertools
import math
import os
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import attrs
import triton
from kerneltune.core import (
    Candidate,
    NoValidConfigError,
    Space,
    Tuner,
    Tuning,
    current_session,
    describe_error,
    format_ms,
)
from kerneltune.core.profiles import choose_family, family_probes, family_profiles, unique_profiles
from kerneltune.plugins.triton import adapter, compiler
from kerneltune.plugins.triton.classify import operator_class, python_function
from kerneltune.plugins.triton.hints import SearchHints, check_params, parse_hints, wants_search
from kerneltune.plugins.triton.search import Point, Shape, StagedSearch, coarse_levels

#: Stage 3 times each finalist with this many times the configured repeats...
PRECISE_REPEAT_FACTOR = 4
#: ...in this many interleaved rounds (A B C A B C ...), so that clock and
#: thermal drift during stage 3 lands on every finalist alike instead of on
#: whichever ran last: on an H200 a block-after-block re-timing let a
#: finalist 2.5% slower win on a landscape whose top configs lie within 2.5%.
PRECISE_ROUNDS = 4
#: ``triton.autotune`` arguments a search_params kernel honours; the rest must keep their defaults.
SUPPORTED_ARGUMENTS = (
    "configs",
    "key",
    "prune_configs_by",
    "reset_to_zero",
    "restore_value",
    "pre_hook",
    "post_hook",
)
_TRUE = ("1", "true", "yes", "on")


class CandidateDropped(Exception):
    """A candidate was not measured: the device cannot run it, or a pruner removed it."""


class RejectedByReference(Exception):
    """A finalist's results did not pass ``reference_fn``."""


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def make_autotune(original: Callable[..., Any]) -> Callable[..., Any]:
    """A ``triton.autotune`` that serves ``hints={"search_params": ...}`` and otherwise is ``original``."""
    signature = inspect.signature(original)
    hints_where = adapter.hints_parameter(original)

    @functools.wraps(original)
    def autotune(*args: Any, **kwargs: Any) -> Any:
        if hints_where is None:
            hints = kwargs.get("hints")
        else:
            hints = signature.bind_partial(*args, **kwargs).arguments.get("hints")
        if not wants_search(hints):
            return original(*args, **kwargs)
        plain = {k: v for k, v in kwargs.items() if k != "hints"} if hints_where is None else kwargs
        arguments = dict(signature.bind(*args, **plain).arguments)
        arguments.pop("hints", None)
        for name, value in arguments.items():
            default = signature.parameters[name].default
            if name not in SUPPORTED_ARGUMENTS and value is not default and value != default:
                raise ValueError(
                    f"triton.autotune({name}=...) cannot be combined with search_params: it measures "
                    "with kerneltune's timer plugin (set warmup and repeat in kerneltune's config); "
                    f"supported arguments: {', '.join(SUPPORTED_ARGUMENTS)}"
                )
        chosen = {k: v for k, v in arguments.items() if k in SUPPORTED_ARGUMENTS}

        def decorate(fn: Any) -> SearchParamsKernel:
            return SearchParamsKernel(fn, hints, **chosen)

        return decorate

    return autotune


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


@attrs.frozen
class SearchSpace:
    """Everything one kernel searches for one set of fixed compile options."""

    tuner: Tuner
    #: the values of each searched param, ascending (empty for hand-written configs).
    axes: tuple[tuple[int, ...], ...]
    #: compile-option profiles, fixed options applied; index 0 is the base.
    profiles: tuple[dict[str, Any], ...]
    #: indices of the profiles stage 1 times every shape with (the base first).
    probes: tuple[int, ...]
    seeds: tuple[Shape, ...]
    family: str | None
    given: bool

    def index(self, point: Point) -> int:
        """The candidate index of a point."""
        shape, profile = point
        flat = 0
        for axis, position in enumerate(shape):
            flat = flat * (len(self.axes[axis]) if self.axes else 1) + position
        return flat * len(self.profiles) + profile

    def candidate(self, point: Point) -> Candidate:
        """The engine's candidate for a point."""
        return self.tuner.space.candidates[self.index(point)]


def _label(config: Any) -> str:
    return ", ".join(f"{name}={value}" for name, value in config.all_kwargs().items())


def candidate_label(shape: Mapping[str, int], profile: Mapping[str, Any]) -> str:
    """How a generated candidate is named: what was chosen, not every default its Config carries.

    ``"BLOCK_M=128, BLOCK_N=256, num_warps=8, num_stages=3"``: the searched
    params in their order, then the profile's options in theirs.
    """
    return ", ".join(f"{name}={value}" for name, value in {**shape, **profile}.items())


def _make_config(kwargs: Mapping[str, Any], options: Mapping[str, Any], fields: frozenset[str]) -> Any:
    own = {k: v for k, v in options.items() if k in fields}
    extra = {k: v for k, v in options.items() if k not in fields}
    return triton.Config({**kwargs, **extra}, **own)


def _with_options(config: Any, options: Mapping[str, Any], fields: frozenset[str]) -> Any:
    """A copy of a hand-written config with the caller's fixed options laid over it."""
    changed = copy.copy(config)
    changed.kwargs = {**config.kwargs, **{k: v for k, v in options.items() if k not in fields}}
    for name, value in options.items():
        if name in fields:
            setattr(changed, name, value)
    return changed


class SearchParamsKernel(triton.KernelInterface):
    """A Triton kernel whose tiles and compile options are searched per key.

    Launch it as any ``triton.autotune`` kernel, without the searched params;
    ``best_config`` is the config of the last launch.
    """

    def __init__(
        self,
        fn: Any,
        hints: Mapping[str, Any],
        configs: Sequence[Any] | None,
        key: Sequence[str] | None,
        prune_configs_by: Mapping[str, Any] | None = None,
        reset_to_zero: Sequence[str] | None = None,
        restore_value: Sequence[str] | None = None,
        pre_hook: Callable[..., Any] | None = None,
        post_hook: Callable[..., Any] | None = None,
    ) -> None:
        base = python_function(fn)
        if base is None or not hasattr(fn, "arg_names"):
            raise TypeError(f"triton.autotune with search_params decorates a @triton.jit kernel, got {fn!r}")
        self.fn = fn
        self.base_fn = base
        self.arg_names: list[str] = list(fn.arg_names)
        self.__name__ = name = base.__name__
        self.hints: SearchHints = parse_hints(hints, name)
        check_params(self.hints, base, name)
        self.keys: list[str] = list(key or ())
        for what, names in (
            ("key", self.keys),
            ("reset_to_zero", reset_to_zero),
            ("restore_value", restore_value),
        ):
            unknown = [n for n in names or () if n not in self.arg_names]
            if unknown:
                raise ValueError(
                    f"{name}: {what} names {', '.join(unknown)}, which are not kernel arguments "
                    f"(arguments: {', '.join(self.arg_names)})"
                )
        self._early_prune = self._pruner(prune_configs_by)
        self.configs = list(configs or ())
        self._given = bool(self.configs) and all(
            all(p in c.kwargs for p in self.hints.params) for c in self.configs
        )
        partial = [] if self._given else self.configs
        bases = [c for c in partial if c.kwargs and not any(p in c.kwargs for p in self.hints.params)]
        if len(bases) > 1:
            raise ValueError(
                f"{name}: {len(bases)} configs give none of the search params; at most one may, as the "
                "base that fixes the other meta-parameters of every generated candidate"
            )
        #: meta-parameters every generated candidate takes (from a config that gives no search param).
        self._base: dict[str, Any] = dict(bases[0].kwargs) if bases else {}
        self._seeds = [self._seed(c) for c in partial if c not in bases]
        self.operator, self.operator_reason = operator_class(fn)
        self._install_hooks(list(reset_to_zero or ()), list(restore_value or ()), pre_hook, post_hook)
        self._arg_set = frozenset(self.arg_names)
        self._params = frozenset(self.hints.params)
        self._first_param = min(self.arg_names.index(p) for p in self.hints.params)
        self.best_config: Any = None
        self.last_search: SearchSummary | None = None
        self._picks: dict[Hashable, Any] = {}
        self._spaces: dict[tuple[tuple[str, Any], ...], SearchSpace] = {}
        self._spaces_lock = threading.Lock()

    # -- decoration-time checks and hooks ------------------------------------

    def _pruner(self, prune_configs_by: Mapping[str, Any] | None) -> Callable[..., Any] | None:
        if not prune_configs_by:
            return None
        unsupported = sorted(set(prune_configs_by) - {"early_config_prune"})
        if unsupported:
            raise ValueError(
                f"{self.__name__}: prune_configs_by {', '.join(unsupported)} cannot be combined with "
                "search_params (the search decides what to measure); early_config_prune is supported"
            )
        return prune_configs_by.get("early_config_prune")

    def _seed(self, config: Any) -> dict[str, int]:
        others = sorted(set(config.kwargs) - set(self.hints.params))
        if others:
            raise ValueError(
                f"{self.__name__}: a config that gives only some search params is a seed and may give "
                f"nothing else, but one gives {', '.join(others)}; put those in a config that gives no "
                "search param (the base), or pass them at launch"
            )
        return dict(config.kwargs)

    def _install_hooks(
        self,
        reset_to_zero: list[str],
        restore_value: list[str],
        pre_hook: Callable[..., Any] | None,
        post_hook: Callable[..., Any] | None,
    ) -> None:
        """Triton's hook semantics: a user hook replaces the reset/restore default."""
        saved: dict[str, Any] = {}

        def reset_and_save(named: dict[str, Any], reset_only: bool = False) -> None:
            for name in reset_to_zero:
                if named.get(name) is not None:
                    named[name].zero_()
            if not reset_only:
                saved.clear()
                saved.update({n: named[n].clone() for n in restore_value if named.get(n) is not None})

        def restore(named: dict[str, Any], exception: BaseException | None) -> None:
            for name, value in saved.items():
                named[name].copy_(value)
            saved.clear()

        self.pre_hook: Callable[..., Any] = pre_hook or reset_and_save
        self.post_hook: Callable[..., Any] = post_hook or restore

    # -- launch ---------------------------------------------------------------

    def run(self, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        """Launch with this key's pick, searching for it first on a new key."""
        if len(args) > self._first_param or not self._params.isdisjoint(kwargs):
            given = sorted(self._params.intersection(kwargs)) or list(self.hints.params)
            raise ValueError(
                f"{self.__name__}: {', '.join(given)} are chosen by search_params; don't pass them "
                "(the grid function sees them in its meta argument)"
            )
        fixed = tuple(sorted((k, v) for k, v in kwargs.items() if k not in self._arg_set))
        key = (adapter.tuning_key(self, args, kwargs), fixed)
        config = self._picks.get(key)
        launch = {k: v for k, v in kwargs.items() if k in self._arg_set}
        if config is None:
            if warmup:
                return None
            config = self._tune(key, fixed, args, launch, grid)
        self.best_config = config
        if config.pre_hook is not None and not warmup:
            config.pre_hook(
                {**dict(zip(self.arg_names, args, strict=False)), **launch, **config.all_kwargs()}
            )
        return self.fn.run(*args, grid=grid, warmup=warmup, **launch, **config.all_kwargs())

    def _tune(
        self,
        key: Hashable,
        fixed: tuple[tuple[str, Any], ...],
        args: tuple[Any, ...],
        launch: dict[str, Any],
        grid: Any,
    ) -> Any:
        session = current_session()
        space = self._space(session, fixed)
        with space.tuner.begin(session, key, adaptive=True, verbose=self.hints.debug) as tuning:
            if tuning.best is not None:
                config = tuning.best.config
            else:
                search = _SearchRun(self, space, tuning, args, launch, grid)
                config = search.run().config
                named = {**dict(zip(self.arg_names, args, strict=False)), **launch, **config.all_kwargs()}
                self.pre_hook(named, reset_only=True)
        self._picks[key] = config
        return config

    # -- the space ------------------------------------------------------------

    def search_space(self, **fixed: Any) -> SearchSpace:
        """The space searched for launches that fix the compile options ``fixed`` (built on first use).

        Its ``tuner.space.candidates`` are every candidate, e.g. for an
        exhaustive measurement to compare the search with.
        """
        return self._space(current_session(), tuple(sorted(fixed.items())))

    def _space(self, session: Any, fixed: tuple[tuple[str, Any], ...]) -> SearchSpace:
        with self._spaces_lock:
            space = self._spaces.get(fixed)
            if space is None:
                space = self._spaces[fixed] = self._build_space(session, dict(fixed))
            return space

    def _build_space(self, session: Any, fixed: dict[str, Any]) -> SearchSpace:
        fields = adapter.config_fields()
        name = self.__name__
        source = adapter.kernel_source(self)
        if self._given:
            configs = [_with_options(c, fixed, fields) for c in self.configs]
            tuner = Tuner(Space.build(name, configs, source, label=_label))
            return SearchSpace(tuner, (), ({},), (0,), (), None, True)
        target = adapter.compile_target()
        family = choose_family(session, target, self.operator)
        offered = family_profiles(family, target) if family is not None else [{}]
        probed = family_probes(family, target, offered) if family is not None else offered
        profiles = unique_profiles([{**p, **fixed} for p in offered])
        # Fixed options may merge probes (all of them into the base, when they fix the probed option).
        probes = tuple(dict.fromkeys(profiles.index({**p, **fixed}) for p in probed))
        params = self.hints.params
        axes = tuple(
            tuple(sorted({*self.hints.values, *(s[p] for s in self._seeds if p in s)})) for p in params
        )
        seeds = []
        for seed in self._seeds:
            centre = [coarse_levels(len(values)) for values in axes]
            seeds.append(
                tuple(
                    axes[i].index(seed[p]) if p in seed else centre[i][len(centre[i]) // 2]
                    for i, p in enumerate(params)
                )
            )
        configs = []
        labels: dict[int, str] = {}
        for values in itertools.product(*axes):
            shape = dict(zip(params, values, strict=True))
            for profile in profiles:
                config = _make_config({**self._base, **shape}, profile, fields)
                configs.append(config)
                labels[id(config)] = candidate_label(shape, profile)
        tuner = Tuner(Space.build(name, configs, source, label=lambda config: labels[id(config)]))
        return SearchSpace(
            tuner, axes, tuple(profiles), probes, tuple(seeds), None if family is None else family.name, False
        )


class _SearchRun:
    """One fresh tuning of one key: stages 1-3 driven through the engine."""

    def __init__(
        self,
        kernel: SearchParamsKernel,
        space: SearchSpace,
        tuning: Tuning,
        args: tuple[Any, ...],
        launch: dict[str, Any],
        grid: Any,
    ) -> None:
        self.kernel = kernel
        self.space = space
        self.tuning = tuning
        self.args = args
        self.launch = launch
        self.grid = grid
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
        self.compile_config = compiler.config_compiler(kernel, args, {**launch, "grid": grid})

    def say(self, line: str) -> None:
        if self.hints.debug:
            print(f"[search_params] {self.kernel.__name__}: {line}", flush=True)

    def label(self, point: Point) -> str:
        return self.space.candidate(point).label

    # -- the stages -----------------------------------------------------------

    def run(self) -> Candidate:
        """Search, re-time, gate, and finish the tuning; the pick."""
        kernel = self.kernel
        if self.space.given:
            self.say(
                f"{len(kernel.configs)} hand-written configs give every search param; "
                "measuring them as they are"
            )
            points = [((i,), 0) for i in range(len(kernel.configs))]
            times = self.measure(points)
            ranked = sorted((p for p in points if math.isfinite(times[p])), key=lambda p: (times[p], p))
            finalists = ranked[: self.hints.shape_final_top_k]
        else:
            family = self.space.family or "none (compile options left to Triton's defaults)"
            self.say(f"operator class {kernel.operator} ({kernel.operator_reason}); profile family {family}")
            search = StagedSearch(
                [len(values) for values in self.space.axes],
                self.space.profiles,
                probes=self.space.probes,
                seeds=self.space.seeds,
                top_k=self.hints.shape_final_top_k,
                say=self.say,
                label=self.label,
            )
            finalists = search.run(self.measure)
        best = self.finalise(finalists)
        self.kernel.last_search = SearchSummary(
            key=self.tuning.key,
            space=len(self.tuning.tuner.space.candidates),
            measured=len(set(self.outcomes) - self.dropped),
            dropped=len(self.dropped),
            seconds=time.perf_counter() - self.started,
            pick=best.label,
        )
        self.report(best)
        return best

    def measure(self, points: list[Point]) -> dict[Point, float]:
        """Measure a round through the engine; every rank's agreed time per point.

        The round's candidates that may run are compiled by the engine's
        COMPILE stage while the first ones are measured.
        """
        candidates = [self.space.candidate(p) for p in points]
        problems = self.screen(points, candidates)
        self.tuning.request(candidates)
        by_index = dict(zip((c.index for c in candidates), points, strict=True))
        if self.compile_config is not None:
            runnable = [c for c in candidates if c.index not in problems]
            self.tuning.compile(lambda candidate: self.build(candidate, by_index[candidate.index]), runnable)
        while (candidate := self.tuning.next_candidate()) is not None:
            problem = problems.get(candidate.index)
            if problem is not None:
                self.tuning.fail(candidate, problem)
            else:
                self.tuning.measure(candidate, self.runner(candidate, by_index[candidate.index]))
        times = self.tuning.times(candidates)
        for candidate, value in zip(candidates, times, strict=True):
            self.outcomes[candidate.index] = value
        return dict(zip(points, times, strict=True))

    def finalise(self, finalists: list[Point]) -> Candidate:
        """Stage 3: re-time the finalists precisely, gate them, and pick."""
        if not finalists:
            measured = [self.tuning.tuner.space.candidates[i] for i in self.outcomes]
            return self.tuning.finish(among=measured)
        candidates = [self.space.candidate(p) for p in finalists]
        per_round = max(1, self.tuning.session.settings.repeat * PRECISE_REPEAT_FACTOR // PRECISE_ROUNDS)
        self.say(
            f"stage 3: re-timing {len(candidates)} finalist(s), {per_round * PRECISE_ROUNDS} runs each "
            f"in {PRECISE_ROUNDS} interleaved rounds"
        )
        by_index = dict(zip((c.index for c in candidates), finalists, strict=True))
        # Every rank requests every finalist in every round, failed or not, so
        # that the per-candidate barriers stay matched across ranks.
        self.tuning.request(candidates, repeat=per_round, rounds=PRECISE_ROUNDS)
        while (candidate := self.tuning.next_candidate()) is not None:
            self.tuning.measure(candidate, self.runner(candidate, by_index[candidate.index]))
        times = self.tuning.times(candidates)
        for candidate, value in zip(candidates, times, strict=True):
            self.outcomes[candidate.index] = value
            self.say(f"stage 3: {candidate.label}: {format_ms(value)}")
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

    def drop(self, candidate: Candidate, problem: BaseException) -> None:
        with self.noting:
            self.dropped.add(candidate.index)
            self.failures[candidate.index] = describe_error(problem)
        self.say(f"dropped {candidate.label}: {describe_error(problem)}")

    def pruned(self, configs: list[Any]) -> list[Any]:
        prune = self.kernel._early_prune
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
            if isinstance(exc, compiler.CannotRun) or adapter.out_of_resources(exc):
                with self.noting:
                    self.note_exhausted(point, str(exc))
            self.drop(candidate, exc)
            raise

    def runner(self, candidate: Candidate, point: Point) -> Callable[[], None]:
        def run() -> None:
            try:
                adapter.launch_config(self.kernel, self.args, self.kwargs(), candidate.config)
            except Exception as exc:
                self.failures[candidate.index] = describe_error(exc)
                if adapter.out_of_resources(exc):
                    self.note_exhausted(point, str(exc))
                raise

        return run

    # -- output ---------------------------------------------------------------

    def report(self, best: Candidate) -> None:
        """``TRITON_PRINT_AUTOTUNING``: the pick; ``..._TIMINGS``: every measured candidate too."""
        if not _env_flag("TRITON_PRINT_AUTOTUNING"):
            return
        summary = self.kernel.last_search
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
            candidates = self.tuning.tuner.space.candidates
            for index, value in sorted(self.outcomes.items(), key=lambda item: (item[1], item[0])):
                outcome = self.failures.get(index) if not math.isfinite(value) else None
                print(f"  {candidates[index].label}: {outcome or format_ms(value)}", flush=True)
