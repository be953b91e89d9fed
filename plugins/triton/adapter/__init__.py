"""The one place that reads and writes the internals of Triton's ``Autotuner``.

Triton's autotuner has no public API for a launch's candidates, launching
with a chosen config or storing a pick; every such access is a function of
this package, checked against the version table of
:mod:`~kerneltune.plugins.triton.adapter.layouts` (docs/architecture.md,
"The Triton adapter and its version table").
"""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from kerneltune.core import in_place_problem as value_problem
from kerneltune.core import register_key_encoder
from kerneltune.plugins.triton.adapter.autotiling import generated_configs
from kerneltune.plugins.triton.adapter.autotiling import name_list_key_axes as name_list_key_axes
from kerneltune.plugins.triton.adapter.layouts import Layout, layout_of
from kerneltune.plugins.triton.adapter.layouts import autotuner_class as autotuner_class
from kerneltune.plugins.triton.adapter.layouts import own_runs as own_runs
from kerneltune.plugins.triton.adapter.layouts import release_layout as release_layout
from kerneltune.plugins.triton.adapter.layouts import understood as understood

Thunk = Callable[[], object]


def kernel_name(tuner: Any) -> str:
    """The Python name of the kernel under the autotuner."""
    return getattr(tuner.base_fn, "__name__", repr(tuner.base_fn))


def kernel_source(tuner: Any) -> str:
    """The kernel's source text, for fingerprints (its name where there is no source)."""
    try:
        return inspect.getsource(tuner.base_fn)
    except (OSError, TypeError):
        return kernel_name(tuner)


def candidate_configs(tuner: Any) -> list[Any]:
    """The configs the user gave the autotuner, in their order."""
    return list(getattr(tuner, layout_of(tuner).candidates_attr, None) or ())


def tunable(tuner: Any) -> bool:
    """Whether the autotuner may have more than one candidate to choose from.

    One that generates its candidates per launch always may.
    """
    return layout_of(tuner).generates or len(candidate_configs(tuner)) > 1


def named_arguments(tuner: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """A launch's kernel arguments by name (launch options such as ``grid`` left out)."""
    named = dict(zip(tuner.arg_names, args, strict=False))
    named.update((k, v) for k, v in kwargs.items() if k in tuner.arg_names)
    return named


def tuning_key(tuner: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """The key the autotuner files its pick under for this launch.

    The values of the key arguments in declaration order, then the dtype
    (as a string) of every argument that has one, as every release in the
    table computes it. Every launch under ``contextual_autotune`` asks, so
    the usual launch (kernel arguments by position, only launch options such
    as ``grid`` by name) takes a short path, planned once per autotuner.
    """
    plan = _KEY_PLANS.get(id(tuner))
    # The objects themselves are compared: a tuner whose key is renamed (name_list_key_axes), or
    # another made at a freed one's address, is planned anew.
    if plan is None or plan[0] is not tuner.arg_names or plan[1] is not tuner.keys:
        plan = _plan_key(tuner)
    if plan[2].isdisjoint(kwargs):
        key = []
        count = len(args)
        for i in plan[3]:
            if i < count:
                key.append(args[i])
        names = _DTYPE_NAMES
        for value in args:
            if type(value) not in NO_DTYPE and (dtype := getattr(value, "dtype", _ABSENT)) is not _ABSENT:
                key.append(names.get(dtype) or _dtype_name(dtype))
        return tuple(key)
    named = named_arguments(tuner, args, kwargs)
    keys = tuner.keys
    key = [named[name] for name in (keys.values() if isinstance(keys, dict) else keys) if name in named]
    key.extend(str(value.dtype) for value in named.values() if hasattr(value, "dtype"))
    return tuple(key)


#: Argument types that never carry a ``dtype``: the key skips them without asking.
NO_DTYPE = frozenset({int, float, bool, str, type(None)})
_ABSENT = object()
#: ``str(dtype)`` by dtype, as the key spells each.
_DTYPE_NAMES: dict[object, str] = {}


def _dtype_name(dtype: object) -> str:
    name = _DTYPE_NAMES[dtype] = str(dtype)
    return name


#: By autotuner: its ``arg_names`` and ``keys`` objects, the names as a set, and each key argument's position.
_KEY_PLANS: dict[int, tuple[object, object, frozenset[str], tuple[int, ...]]] = {}


def _plan_key(tuner: Any) -> tuple[object, object, frozenset[str], tuple[int, ...]]:
    arg_names, keys = tuner.arg_names, tuner.keys
    names = keys.values() if isinstance(keys, dict) else keys
    positions = tuple(arg_names.index(name) for name in names if name in arg_names)
    plan = _KEY_PLANS[id(tuner)] = (arg_names, keys, frozenset(arg_names), positions)
    return plan


def key_positions(tuner: Any) -> tuple[int, ...]:
    """The position of each key argument among the kernel's, in the key's order."""
    return _plan_key(tuner)[3]


def register_key_types() -> None:
    """Let the Triton values a ``key`` argument may hold into kerneltune's tuning keys.

    A ``tl.constexpr`` parameter named in ``key`` may be passed a Triton
    dtype (``tl.float16``): Triton files its pick under the object itself,
    kerneltune encodes it by its name. Registering again changes nothing.
    """
    import triton.language as tl

    register_key_encoder(tl.dtype, "triton.dtype", str)


def pruned_configs(tuner: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
    """The candidates left for this launch after the kernel's own ``prune_configs_by``.

    :param kwargs: the launch's keyword arguments, ``grid`` included, as
        ``Autotuner.run`` receives them.
    """
    if not layout_of(tuner).prunes:
        return candidate_configs(tuner)
    tuner.nargs = dict(zip(tuner.arg_names, args, strict=False))
    try:
        return list(tuner.prune_configs(kwargs))
    finally:
        tuner.nargs = None


def launch_configs(tuner: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """A launch's candidates as the autotuner's own ``run`` would benchmark them, before and after pruning.

    For most rows the configs the user listed and :func:`pruned_configs`;
    for an auto-tiling tuner, :func:`generated_configs`.
    """
    if layout_of(tuner).generates:
        return generated_configs(tuner, args, kwargs)
    return candidate_configs(tuner), pruned_configs(tuner, args, kwargs)


def cached_config(tuner: Any, key: Hashable) -> Any | None:
    """The config the autotuner's in-process cache holds for ``key``, or ``None``."""
    return tuner.cache.get(key)


def direct_entry(tuner: Any, key: Hashable) -> tuple[Any, dict[str, Any]] | None:
    """What a ``DirectKernel`` (adapter/direct.py) needs to make this key's hits, or ``None`` where it cannot.

    It can for a row whose hit is plain (:attr:`Layout.hits_directly`), a
    pick without a pre-hook, and a tuner whose runs change nothing in place.
    """
    config = cached_config(tuner, key)
    if (
        config is None
        or config.pre_hook is not None
        or changes_in_place(tuner)
        or not layout_of(tuner).hits_directly
    ):
        return None
    return config, config.all_kwargs()


def store_config(tuner: Any, key: Hashable, config: Any) -> None:
    """Make ``config`` the autotuner's pick for ``key``.

    Later launches with that key are ordinary cache hits of Triton, and
    ``tuner.best_config`` is ``config`` as after Triton's own tuning.
    """
    tuner.cache[key] = config
    tuner.best_config = config


def store_timings(tuner: Any, timings: Sequence[Any], seconds: float) -> None:
    """Leave ``configs_timings`` and ``bench_time`` on the autotuner as its own tuning does.

    ``configs_timings`` maps each kept config to three times in ms, where
    Triton gives the median and the 20th and 80th percentiles: the time the
    pick was chosen by (agreed over ranks), then the 20th and 80th
    percentiles of this rank's samples; ``inf`` three times for a failed
    config. ``bench_time`` is the tuning's seconds.

    :param timings: :class:`kerneltune.core.CandidateTiming` of each kept config.
    """
    tuner.configs_timings = triton_timings(timings)
    tuner.bench_time = seconds


def triton_timings(timings: Sequence[Any]) -> dict[Any, list[float]]:
    """``configs_timings`` in Triton's form (:func:`store_timings`) from ``CandidateTiming`` values."""
    return {t.config: _three_times(t.time, t.samples) for t in timings}


def tell_listener(
    tuner: Any, key: Hashable, config: Any, configs_timings: Mapping[Any, Any], seconds: float | None
) -> None:
    """Call Triton's autotune listener (``knobs.autotuning.listener``, 3.9 on) as Triton's own ``run`` does.

    Triton calls it when a key first meets its cache in the process: after
    a tuning (``seconds``: its duration), or where the pick came without
    benchmarking (``seconds`` ``None``: ``cache_hit=True``, ``duration=None``).
    Nothing on a release without the knob, or while it is unset.

    :param configs_timings: in Triton's form (:func:`triton_timings`).
    """
    try:
        from triton import knobs
    except ImportError:
        return
    listener = getattr(knobs.autotuning, "listener", None)
    if listener is None:
        return
    from triton.runtime.jit import JITFunction, KernelInterface

    # Through wrappers (heuristics) to the JITFunction, or under the interpreter what triton.jit made.
    fn = tuner.fn
    while not isinstance(fn, JITFunction) and isinstance(getattr(fn, "fn", None), KernelInterface):
        fn = fn.fn
    listener(
        fn=fn,
        key=key,
        best_config=config,
        configs_timings=configs_timings,
        duration=seconds,
        cache_hit=seconds is None,
    )


def _three_times(time: float, samples: Sequence[float]) -> list[float]:
    if not math.isfinite(time) or not samples:
        return [math.inf] * 3
    return [time, _quantile(samples, 0.2), _quantile(samples, 0.8)]


def _quantile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted samples, interpolated linearly between the two nearest (as torch's)."""
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def prints_autotuning() -> bool:
    """Whether the installed Triton prints its message after tuning (``TRITON_PRINT_AUTOTUNING``).

    Asked as the release asks: ``triton.knobs.autotuning.print`` where Triton
    has knobs (3.4 on), the variable being exactly ``"1"`` before.
    """
    try:
        from triton import knobs
    except ImportError:
        return os.environ.get("TRITON_PRINT_AUTOTUNING") == "1"
    return bool(knobs.autotuning.print)


def autotuning_message(layout: Layout, name: str, key: Any, seconds: float, config: Any) -> str:
    """What the release of ``layout`` prints after tuning kernel ``name`` for ``key`` (its own words).

    ``config`` is shown as Triton shows it, by ``str``.
    """
    if layout.prints_key:
        return (
            f"Triton autotuning for function {name},\nwith key as {key},\n"
            f"finished after {seconds:.2f}s,\nbest config selected: {config};"
        )
    return (
        f"Triton autotuning for function {name} finished after {seconds:.2f}s; "
        f"best config selected: {config};"
    )


def _call(thunk: Thunk) -> None:
    thunk()


def launch_config(
    tuner: Any,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    config: Any,
    around: Callable[[Thunk], object] | None = None,
) -> Any:
    """Launch the kernel once with ``config`` and this launch's own arguments.

    The config's and the autotuner's pre-hooks run first and the post-hook
    after (so ``reset_to_zero`` and ``restore_value`` behave as while Triton
    benchmarks), outside ``around``.

    :param around: called with a thunk that performs only the launch, e.g. a
        timer's ``sample``; default: call it.
    :returns: what the kernel's ``run`` returned.
    :raises ValueError: when the launch passes a meta-parameter the config
        sets too, as Triton does.
    """
    clashes = sorted(set(kwargs) & set(config.kwargs))
    if clashes:
        raise ValueError(
            f"Conflicting meta-parameters: {', '.join(clashes)}. Make sure that you don't re-define "
            "auto-tuned symbols."
        )
    meta = {**kwargs, **config.all_kwargs()}
    hooked = {**dict(zip(tuner.arg_names, args, strict=False)), **meta}
    return hooked_launch(tuner, hooked, config.pre_hook, lambda: tuner.fn.run(*args, **meta), around)


def hooked_launch(
    tuner: Any,
    hooked: dict[str, Any],
    pre_hook: Callable[..., Any] | None,
    launch: Callable[[], Any],
    around: Callable[[Thunk], object] | None = None,
) -> Any:
    """``launch()`` between the hooks Triton runs around a launch it benchmarks; what it returned.

    ``pre_hook`` (the config's) and ``tuner.pre_hook`` get ``hooked``, the
    launch's arguments by name, first; ``tuner.post_hook`` after, told of
    an exception ``launch`` raised. Only ``launch`` runs inside ``around``.
    """
    if pre_hook is not None:
        pre_hook(hooked)
    tuner.pre_hook(hooked)
    result: list[Any] = []
    try:
        (around or _call)(lambda: result.append(launch()))
    except Exception as exc:
        tuner.post_hook(hooked, exception=exc)
        raise
    tuner.post_hook(hooked, exception=None)
    return result[0] if result else None


def reset_arguments(tuner: Any, args: Sequence[Any], kwargs: dict[str, Any], config: Any) -> None:
    """Run ``tuner.pre_hook(..., reset_only=True)`` for a launch with ``config``, as Triton does after tuning.

    Triton calls it once between its tuning runs and the run with the
    pick: the ``reset_to_zero`` arguments are zeroed (or the user's
    ``pre_hook`` is told ``reset_only``), nothing is copied.
    """
    named = {**dict(zip(tuner.arg_names, args, strict=False)), **kwargs, **config.all_kwargs()}
    tuner.pre_hook(named, reset_only=True)


def in_place_problem(tuner: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> str | None:
    """Why the arguments the autotuner zeroes or restores cannot be, for this launch (``None``: they can).

    Read from ``t.reset_to_zero`` and ``t.restore_value``: a name the launch
    does not pass, or a value that is no tensor autograd lets change in place.
    """
    named = {**dict(zip(tuner.arg_names, args, strict=False)), **kwargs}
    for option in _IN_PLACE_OPTIONS:
        for name in getattr(tuner, option, None) or ():
            if name not in named:
                return f"{option} names {name!r}, which this launch does not pass"
            problem = value_problem(named[name])
            if problem is not None:
                return f"{option} names {name!r}, {problem}"
    return None


#: The autotuner's options naming the arguments it zeroes or restores around each run.
_IN_PLACE_OPTIONS = ("reset_to_zero", "restore_value")


def in_place_names(tuner: Any) -> tuple[str, ...]:
    """The arguments the autotuner zeroes (``reset_to_zero``) or restores (``restore_value``) around runs."""
    return tuple(name for option in _IN_PLACE_OPTIONS for name in getattr(tuner, option, None) or ())


def changes_in_place(tuner: Any) -> bool:
    """Whether the autotuner's runs change arguments it puts back: ``restore_value``, or a user post-hook."""
    return bool(getattr(tuner, "restore_value", None) or getattr(tuner, "user_defined_post_hook", False))


def interpreting() -> bool:
    """Whether kernels run in Triton's interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


def run_function(fn: Any, args: Sequence[Any], *, grid: Any, warmup: bool, meta: Mapping[str, Any]) -> Any:
    """``fn.run``: launch (or with ``warmup``, only compile) a JIT function or its wrapper."""
    return fn.run(*args, grid=grid, warmup=warmup, **meta)
