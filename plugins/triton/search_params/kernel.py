"""Kernels decorated with ``triton.autotune(..., hints={"search_params": ...})``.

:func:`make_autotune` wraps Triton's ``autotune``: without the hint it calls
the original untouched; with it, the kernel becomes a
:class:`SearchParamsKernel`, whose generated candidates the strategy in
force searches through one adaptive engine tuning per key, so the timer,
reducer, observers and cache are the configured plugins. It launches
candidates through the adapter as the contextual tuner does.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from kerneltune.core.driving import SUBPROCESS, Screening, argument_dtypes, current_session, screener
from kerneltune.plugins.triton import adapter
from kerneltune.plugins.triton.autotune import dict_key_arguments, hints_parameter
from kerneltune.plugins.triton.isolated import KernelIsolation
from kerneltune.plugins.triton.search_params.decorated import DecoratedKernel
from kerneltune.plugins.triton.search_params.hints import wants_search
from kerneltune.plugins.triton.search_params.run import SearchRun
from kerneltune.plugins.triton.search_params.space import SearchSpace, build_space
from kerneltune.plugins.triton.search_params.summary import SearchSummary, configs_timings

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
    """A ``triton.autotune`` that serves ``hints={"search_params": ...}`` and otherwise is ``original``.

    A dict ``key`` (``{axis name: argument name}``, triton-ascend's and
    DLCompiler's) is taken with their meaning, the arguments it names
    (:func:`~kerneltune.plugins.triton.autotune.dict_key_arguments`): a
    search_params kernel is keyed by them, and Triton's own decorator gets
    them as a list. A decorator another library put in Triton's place gets
    every key as given.
    """
    import triton.runtime.autotuner

    signature = inspect.signature(original)
    hints_where = hints_parameter(original)
    tritons_own = original is triton.runtime.autotuner.autotune

    @functools.wraps(original)
    def autotune(*args: Any, **kwargs: Any) -> Any:
        if hints_where is None:
            hints = kwargs.get("hints")
        else:
            hints = signature.bind_partial(*args, **kwargs).arguments.get("hints")
        if not wants_search(hints):
            if tritons_own:
                args, kwargs = _with_list_key(signature, args, kwargs, hints)
            return original(*args, **kwargs)
        plain = {k: v for k, v in kwargs.items() if k != "hints"} if hints_where is None else kwargs
        # Partial: seed 003 makes key optional (one pick then serves every shape), and configs may be
        # left to the search.
        arguments = dict(signature.bind_partial(*args, **plain).arguments)
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
        named = dict_key_arguments(chosen.get("key"))
        if named is not None:
            chosen["key"] = named

        def decorate(fn: Any) -> SearchParamsKernel:
            return SearchParamsKernel(fn, hints, **chosen)

        return decorate

    return autotune


def _with_list_key(
    signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any], hints: Any
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The decorator's arguments with a dict ``key`` made the list of the arguments it names.

    With ``enable_ascend_autotune`` (triton-ascend 3.2.0's auto-tiling
    tuner, which names a list key's axes itself) the dict's axes must be
    the ones it would give. A decorator given ``split_params`` or
    ``tiling_params`` (triton-ascend 3.2.0rc4's auto-tiling tuner) reads the
    dict itself, axis by name, and keeps it. Arguments the decorator cannot
    take are left for it to refuse.
    """
    try:
        bound = signature.bind_partial(*args, **kwargs)
    except TypeError:
        return args, kwargs
    if bound.arguments.get("split_params") or bound.arguments.get("tiling_params"):
        return args, kwargs
    tiles = isinstance(hints, Mapping) and bool(hints.get("enable_ascend_autotune"))
    named = dict_key_arguments(bound.arguments.get("key"), ordered=tiles)
    if named is None:
        return args, kwargs
    bound.arguments["key"] = named
    return bound.args, bound.kwargs


class SearchParamsKernel(DecoratedKernel):
    """A Triton kernel whose tiles and compile options are searched per key.

    Launch it as any ``triton.autotune`` kernel, without the searched params;
    ``best_config`` is the config of the last launch.
    """

    def __init__(self, fn: Any, hints: Mapping[str, Any], *arguments: Any, **named: Any) -> None:
        """Check the decoration (:class:`DecoratedKernel`); no key is tuned yet."""
        super().__init__(fn, hints, *arguments, **named)
        self._arg_set = frozenset(self.arg_names)
        self._params = frozenset(self.hints.params)
        self._first_param = min(self.arg_names.index(p) for p in self.hints.params)
        self.best_config: Any = None
        self.last_search: SearchSummary | None = None
        self._picks: dict[Hashable, Any] = {}
        self._spaces: dict[tuple[tuple[str, Any], ...], SearchSpace] = {}
        self._spaces_lock = threading.Lock()

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
        key: tuple[Hashable, tuple[tuple[str, Any], ...]],
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
            if session.settings.get("isolate") == SUBPROCESS
            else None
        )
        verbose = self.hints.debug or session.settings.get("verbose")
        begin = space.tuner.begin
        persist = True
        started = time.perf_counter()
        dtypes = argument_dtypes((*args, *launch.values()))
        with begin(
            session, key, adaptive=True, verbose=verbose, driver="search_params", dtypes=dtypes
        ) as tuning:
            if tuning.best is not None:
                config = tuning.best.config
                adapter.tell_listener(self, key[0], config, {}, None)
            else:
                # One screening for the whole search: the worker holds the arguments until it ends.
                with contextlib.ExitStack() as stack:
                    screen_one = None
                    if isolation is not None:
                        screening = stack.enter_context(Screening(isolation.target, session))
                        screen_one = screener(screening, isolation.payload)
                    search = SearchRun(self, space, tuning, args, launch, grid, screen_one)
                    config = search.run().config
                    persist = search.persist
                    if search.summary is not None:
                        self.last_search = search.summary
                named = {**dict(zip(self.arg_names, args, strict=False)), **launch, **config.all_kwargs()}
                self.pre_hook(named, reset_only=True)
                timings = configs_timings(tuning, search.outcomes)
                adapter.tell_listener(self, key[0], config, timings, time.perf_counter() - started)
        if persist:
            self._picks[key] = config
        return config

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
