"""Kernels decorated with ``triton.autotune(..., hints={"search_params": ...})``.

:func:`make_autotune` wraps Triton's ``autotune``: without the hint it calls
the original untouched; with it, the kernel becomes a
:class:`SearchParamsKernel`, whose candidates are generated
(:mod:`~kerneltune.plugins.triton.search_space`) and searched in stages
(:mod:`~kerneltune.plugins.triton.search_run`) instead of measured
exhaustively.

Every measurement goes through kerneltune's engine: one adaptive
:class:`~kerneltune.core.Tuning` per key over the whole space, so the timer,
the reducer (MAX over ranks), the observers and the cache are the
configured plugins, and the pick is remembered like any other. The kernel
has the parts of Triton's ``Autotuner`` that the adapter's launch functions
use (``fn``, ``arg_names``, ``pre_hook``, ``post_hook``), so it launches
candidates through them as the contextual tuner does.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import triton
from kerneltune.core import SUBPROCESS, Screening, current_session, screener
from kerneltune.plugins.triton import adapter
from kerneltune.plugins.triton.classify import operator_class, python_function
from kerneltune.plugins.triton.hints import SearchHints, check_params, parse_hints, wants_search
from kerneltune.plugins.triton.isolated import KernelIsolation
from kerneltune.plugins.triton.search_run import SearchRun, SearchSummary
from kerneltune.plugins.triton.search_space import SearchSpace, build_space

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
        self.early_prune = self._pruner(prune_configs_by)
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
        # Read by adapter.in_place_problem, as on Triton's own autotuner.
        self.reset_to_zero, self.restore_value = reset_to_zero, restore_value
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
        return adapter.run_function(
            self.fn, args, grid=grid, warmup=warmup, meta={**launch, **config.all_kwargs()}
        )

    def _tune(
        self,
        key: Hashable,
        fixed: tuple[tuple[str, Any], ...],
        args: tuple[Any, ...],
        launch: dict[str, Any],
        grid: Any,
    ) -> Any:
        problem = adapter.in_place_problem(self, args, launch)
        if problem is not None:
            raise TypeError(f"{self.__name__}: {problem}")
        session = current_session()
        space = self._space(session, fixed)
        # Before the agreement, as the function-level tuner: every rank raises alike.
        isolation = (
            KernelIsolation(self, args, {**launch, "grid": grid})
            if session.settings.isolate == SUBPROCESS
            else None
        )
        verbose = self.hints.debug or session.settings.verbose
        begin = space.tuner.begin
        with begin(session, key, adaptive=True, verbose=verbose, driver="search_params") as tuning:
            if tuning.best is not None:
                config = tuning.best.config
            else:
                # One screening for the whole search: the worker holds the arguments until it ends.
                with contextlib.ExitStack() as stack:
                    screen_one = None
                    if isolation is not None:
                        timeout = session.settings.isolate_timeout
                        screening = stack.enter_context(Screening(isolation.target, timeout))
                        screen_one = screener(screening, isolation.payload)
                    search = SearchRun(self, space, tuning, args, launch, grid, screen_one)
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
                space = self._spaces[fixed] = build_space(
                    name=self.__name__,
                    source=adapter.kernel_source(self),
                    params=self.hints.params,
                    values=self.hints.values,
                    given=self.configs if self._given else None,
                    seeds=self._seeds,
                    base=self._base,
                    operator=self.operator,
                    session=session,
                    fixed=dict(fixed),
                )
            return space
