"""The one place that reads and writes the internals of Triton's ``Autotuner``.

Triton's autotuner has no public API for a launch's candidates, launching
with a chosen config or storing a pick, so every such access lives here,
checked against :data:`LAYOUTS` (the attributes touched are listed above
it); the rest of kerneltune, the contextual interceptor, search_params and
:mod:`~kerneltune.plugins.triton.isolated` included, calls the functions
here. docs/architecture.md ("The Triton adapter and its version table") and
docs/contextual.md ("Triton versions") describe the rows. What kerneltune
uses of Triton's public parts, the same in every row, is elsewhere:
``triton.Config`` in :mod:`~kerneltune.plugins.triton.configs`,
``triton.autotune`` itself in :mod:`~kerneltune.plugins.triton.autotune`.
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import math
import os
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import attrs
from kerneltune.core import in_place_problem as value_problem
from kerneltune.core import register_key_encoder, user_stacklevel
from kerneltune.plugins.triton.autotune import AXIS_NAMES

Thunk = Callable[[], object]


@attrs.frozen
class Layout:
    """How one line of Triton releases lays out the parts of its autotuner we touch."""

    name: str
    #: ``(major, minor)`` releases this row was checked against.
    releases: tuple[tuple[int, int], ...]
    #: the attribute holding the candidates the user listed.
    candidates_attr: str
    #: whether ``prune_configs(kwargs)`` applies to those candidates.
    prunes: bool
    #: how this row was verified; docs/contextual.md repeats the table.
    verified: str
    #: the classes (module and name) whose own ``run`` this row describes.
    classes: tuple[str, ...] = ("triton.runtime.autotuner.Autotuner",)
    #: whether each launch generates its candidates (the user's configs are only some of them).
    generates: bool = False
    #: whether a generating tuner parses its kernel for the split and tiling parameters (triton-ascend
    #: 3.2.0), or takes them as the decorator was given them (3.2.0rc4).
    parses_kernel: bool = False
    #: whether ``TRITON_PRINT_AUTOTUNING``'s message names the key, on lines of their own (3.4 on),
    #: or is the one line of earlier releases (:func:`autotuning_message`).
    prints_key: bool = False
    #: whether a cache hit of this row's ``run`` is only ``best_config``, the config's pre-hook and
    #: ``fn.run(*args, **kwargs, **config.all_kwargs())``, which :func:`launch_direct` makes itself.
    hits_directly: bool = False


# Triton promises none of the attributes below; they are stable in practice,
# and each row of LAYOUTS was checked against them. Every function here
# documents what it needs and what it guarantees.
#
# Read on an ``Autotuner`` ``t`` (all rows):
#
# * ``t.fn`` (the wrapped ``JITFunction`` or interpreter function; ``.run``
#   launches it), ``t.base_fn`` (the Python function), ``t.arg_names``;
# * ``t.configs`` (candidates; ``t.user_configs`` on triton-ascend's
#   auto-tiling tuner), ``t.keys`` (argument names: a list, or on the
#   auto-tiling tuner a dict from axis name to argument name, which
#   3.2.0rc4's may also hold as a list);
# * on the auto-tiling tuner, the steps its ``run`` takes before it
#   benchmarks (:func:`generated_configs`): on 3.2.0 ``autoparse_ptr_nums``,
#   ``autoparse_low_dims``, ``autoparse_split_params``,
#   ``autoparse_tiling_params`` (and the ``input_ptr_nums``, ``low_dims``,
#   ``split_params``, ``tiling_params`` they fill); on both releases
#   ``_gen_tile_configs``, which reads ``split_params``, ``tiling_params``
#   and ``low_dims``;
# * ``t.prune_configs(kwargs)``, which reads ``t.nargs``;
# * ``t.pre_hook(nargs)`` / ``t.post_hook(nargs, exception=)`` (reset_to_zero
#   and restore_value live there; ``t.pre_hook(nargs, reset_only=True)`` as
#   Triton calls it after tuning), ``t.restore_value`` and
#   ``t.user_defined_post_hook`` (whether runs change arguments in place),
#   ``config.pre_hook``, ``config.kwargs``, ``config.all_kwargs()``.
#
# Written: ``t.nargs`` (set for pruning, then cleared, as ``Autotuner.run``
# does), ``t.configs`` on the auto-tiling tuner (the generated candidates,
# as its ``run`` sets them), ``t.keys`` on 3.2.0rc4's auto-tiling tuner
# given a list key (the axis dict its ``run`` reads: :func:`name_list_key_axes`),
# ``t.cache[key]`` and ``t.best_config`` (the pick), and the class attribute
# ``run`` of ``Autotuner`` and its subclasses (:func:`own_runs`), replaced
# for the rest of the process at the contextual tuner's first call by a
# pass-through (kerneltune.plugins.triton.interceptor), and after a tuning ``t.configs_timings``
# and ``t.bench_time`` (:func:`store_timings`), which every row's own ``run``
# sets and none reads.
LAYOUTS: tuple[Layout, ...] = (
    Layout(
        name="triton-3.2-3.3",
        releases=((3, 2), (3, 3)),
        candidates_attr="configs",
        prunes=True,
        verified=(
            "fake Autotuner shaped like 3.2 (tests); real 3.2.0 in a throwaway venv up to the launch, "
            "which 3.2's CPU interpreter rejects (it refuses Config's launch options); 3.3.1's "
            "autotuner.py read against 3.2's: the same attributes. Neither can decorate a kernel "
            "with triton.autotune without a GPU driver"
        ),
    ),
    Layout(
        name="triton-ascend-3.2",
        releases=((3, 2),),
        candidates_attr="configs",
        prunes=True,
        verified=(
            "real triton-ascend 3.2.0 and 3.2.0rc4, NPU driver stood in (make test-tritons): their Autotuner "
            "over a fake kernel, and with real kernels in their interpreters, taught the NPU's option names"
        ),
    ),
    Layout(
        name="triton-ascend-3.2-autotiling",
        releases=((3, 2),),
        candidates_attr="user_configs",
        prunes=True,
        verified=(
            "real triton-ascend 3.2.0's AutoTilingTuner over a fake kernel, as the row above, and with "
            "real interpreted kernels whose tiles it generates, on one rank and two (make test-tritons)"
        ),
        classes=("triton.runtime.autotiling_tuner.AutoTilingTuner",),
        generates=True,
        parses_kernel=True,
    ),
    Layout(
        name="triton-ascend-3.2rc4-autotiling",
        releases=((3, 2),),
        candidates_attr="user_configs",
        prunes=True,
        verified=(
            "real triton-ascend 3.2.0rc4's AutoTilingTuner, made from split_params and tiling_params with "
            "a dict key and with a list key, over a fake kernel and with real interpreted kernels whose "
            "tiles it generates, on one rank, and with the dict key on two (make test-tritons)"
        ),
        classes=("triton.runtime.autotiling_tuner.AutoTilingTuner",),
        generates=True,
    ),
    Layout(
        name="triton-3.4-3.9",
        releases=((3, 4), (3, 5), (3, 6), (3, 7), (3, 8), (3, 9)),
        candidates_attr="configs",
        prunes=True,
        verified=(
            "real 3.9.0 (CPU suite), 3.5.1 and 3.4.0 (Triton CPU tests in CI, make test-tritons), "
            "3.7.1 and 3.6.0 (CPU suite in throwaway venvs), 3.6.0 on H200"
        ),
        prints_key=True,
        hits_directly=True,
    ),
)

_BY_NAME = {layout.name: layout for layout in LAYOUTS}


@functools.cache
def triton_version() -> tuple[int, int] | None:
    """``(major, minor)`` of the installed ``triton`` (or ``triton-ascend``), or ``None``."""
    for package in ("triton", "triton-ascend"):
        try:
            text = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
        parts = text.split(".")
        try:
            return int(parts[0]), int(parts[1])
        except (IndexError, ValueError):
            return None
    return None


@functools.cache
def release_layout() -> Layout:
    """The version-table row of the installed release, for plain (list-keyed) autotuners.

    A release outside the table gets the newest upstream row and one warning.
    """
    try:
        importlib.metadata.version("triton-ascend")
    except importlib.metadata.PackageNotFoundError:
        pass
    else:
        return _BY_NAME["triton-ascend-3.2"]
    version = triton_version()
    for layout in LAYOUTS:
        if layout.name.startswith("triton-3") and version in layout.releases:
            return layout
    newest = _BY_NAME["triton-3.4-3.9"]
    label = "unknown" if version is None else f"{version[0]}.{version[1]}"
    warnings.warn(
        f"kerneltune: triton {label} is not in the adapter's version table; assuming the "
        f"{newest.name} layout",
        RuntimeWarning,
        stacklevel=user_stacklevel(),
    )
    return newest


def layout_of(tuner: Any) -> Layout:
    """The version-table row that describes ``tuner``.

    Shape decides first: a dict of keys or a tile generator
    (``_gen_tile_configs``) is triton-ascend's auto-tiling tuner, 3.2.0's
    where it parses its kernel (``autoparse_split_params``), else
    3.2.0rc4's; an ``auto_profile_dir`` attribute is triton-ascend's
    autotuner. Then the installed release (:func:`release_layout`).
    """
    if isinstance(getattr(tuner, "keys", None), dict) or hasattr(tuner, "_gen_tile_configs"):
        if hasattr(tuner, "autoparse_split_params"):
            return _BY_NAME["triton-ascend-3.2-autotiling"]
        return _BY_NAME["triton-ascend-3.2rc4-autotiling"]
    if hasattr(tuner, "auto_profile_dir"):
        return _BY_NAME["triton-ascend-3.2"]
    return release_layout()


@functools.cache
def autotuner_class() -> type:
    """Triton's ``Autotuner`` class."""
    from triton.runtime.autotuner import Autotuner

    return Autotuner


def _family(root: type) -> list[Any]:
    """``root`` and every loaded subclass of it; typed ``Any``, as Triton's classes are untyped."""
    seen: list[Any] = [root]
    for cls in seen:
        seen.extend(sub for sub in cls.__subclasses__() if sub not in seen)
    return seen


def own_runs(root: type | None = None) -> list[tuple[Any, Callable[..., Any]]]:
    """``Autotuner`` and each loaded subclass that defines its own ``run``, with that ``run``.

    :param root: the class to start from (default: :func:`autotuner_class`);
        tests pass fake autotuners.
    """
    family = _family(root if root is not None else autotuner_class())
    return [(cls, cls.__dict__["run"]) for cls in family if "run" in cls.__dict__]


def understood(owner: type) -> bool:
    """Whether a row of :data:`LAYOUTS` describes the ``run`` that ``owner`` defines."""
    name = f"{owner.__module__}.{owner.__qualname__}"
    return any(name in layout.classes for layout in LAYOUTS)


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
            if type(value) not in _NO_DTYPE and (dtype := getattr(value, "dtype", _ABSENT)) is not _ABSENT:
                key.append(names.get(dtype) or _dtype_name(dtype))
        return tuple(key)
    named = named_arguments(tuner, args, kwargs)
    keys = tuner.keys
    key = [named[name] for name in (keys.values() if isinstance(keys, dict) else keys) if name in named]
    key.extend(str(value.dtype) for value in named.values() if hasattr(value, "dtype"))
    return tuple(key)


#: Argument types that never carry a ``dtype``: the key skips them without asking.
_NO_DTYPE = frozenset({int, float, bool, str, type(None)})
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


def generated_configs(tuner: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """triton-ascend's auto-tiling tuner: the tiles it generates for this launch and the user's configs.

    The steps of its ``run`` before it benchmarks, through its own methods
    and in its order: on 3.2.0, parse the kernel for its split and tiling
    parameters (once per tuner, as it does; 3.2.0rc4's were given to the
    decorator), generate the tiles for the key's axis sizes
    (:func:`tiling_axes`) and the widest dtype, append the user's configs
    (``configs`` becomes that list, as in its ``run``), then
    ``prune_configs_by``.

    :returns: every candidate, and those left after pruning.
    :raises ValueError: for kernel arguments neither passed nor tunable, as 3.2.0's ``run`` raises.
    :raises NotImplementedError: for a launch without tensor arguments, as its ``run`` raises.
    """
    from triton.runtime.utils import get_byte_per_numel

    named = dict(zip(tuner.arg_names, args, strict=False))
    given = {**named, **kwargs}
    values = {k: v for k, v in given.items() if k in tuner.arg_names}
    axes = {axis: values[name] for axis, name in tiling_axes(tuner).items() if name in values}
    dtype = None
    for value in values.values():
        if hasattr(value, "dtype") and get_byte_per_numel(value.dtype) >= get_byte_per_numel(dtype):
            dtype = value.dtype
    if dtype is None:
        raise NotImplementedError("Not support for non-Tensor inputs")
    tuner.nargs = named
    try:
        if layout_of(tuner).parses_kernel:
            _parse_tiling_parameters(tuner, given)
        tuner.configs = tuner._gen_tile_configs(axes, dtype)
        return list(tuner.configs), list(tuner.prune_configs(kwargs))
    finally:
        tuner.nargs = None


def tiling_axes(tuner: Any) -> dict[str, str]:
    """The auto-tiling tuner's axes, each with the argument whose value is its size.

    Its ``keys`` where they are a dict (axis name to argument name, as
    triton-ascend 3.2.0's tuner always holds them and 3.2.0rc4's documents
    them); a list key's arguments take the axis names in triton-ascend's
    order (:data:`~kerneltune.plugins.triton.autotune.AXIS_NAMES`: ``x``,
    ``y``, ...), as 3.2.0's tuner names them. 3.2.0rc4's own ``run`` cannot
    read a list (:func:`name_list_key_axes`).

    :raises ValueError: for a list of more arguments than there are axes, as 3.2.0's tuner raises.
    """
    keys = tuner.keys
    if isinstance(keys, Mapping):
        return dict(keys)
    if len(keys) > len(AXIS_NAMES):
        raise ValueError(
            f"key {list(keys)!r} names {len(keys)} arguments; triton-ascend's auto-tiling tuner has "
            f"{len(AXIS_NAMES)} axes to give them"
        )
    return dict(zip(AXIS_NAMES, keys, strict=False))


def name_list_key_axes(tuner: Any) -> None:
    """Give an auto-tiling tuner holding a list ``key`` the axis dict its own ``run`` reads.

    triton-ascend 3.2.0rc4's tuner keeps its key as the decorator got it,
    and its ``run``, cache hits included, reads it as a dict from axis name
    to argument name: a list (written as 3.2.0 takes it) fails there with
    ``AttributeError: 'list' object has no attribute 'items'``. The list's
    arguments take the axis names in order (:func:`tiling_axes`), as 3.2.0's
    constructor names them; :func:`tuning_key` is the same either way. Any
    other autotuner is left as it is.
    """
    # Every launch routed under contextual_autotune asks: the cheap test first.
    if not isinstance(tuner.keys, Mapping) and layout_of(tuner).generates:
        tuner.keys = tiling_axes(tuner)


def _parse_tiling_parameters(tuner: Any, given: Mapping[str, Any]) -> None:
    """What triton-ascend 3.2.0's auto-tiling ``run`` parses from its kernel, through its own methods."""
    missing = [name for name in tuner.arg_names if name not in given]
    tuner.input_ptr_nums = tuner.autoparse_ptr_nums(missing)
    if not tuner.low_dims:
        tuner.low_dims = tuner.autoparse_low_dims()
    if not tuner.split_params:
        tuner.split_params = tuner.autoparse_split_params(missing)
    missing = [name for name in missing if name not in tuner.split_params.values()]
    if not tuner.tiling_params:
        tuner.tiling_params = tuner.autoparse_tiling_params(missing)
    missing = [name for name in missing if name not in tuner.tiling_params.values()]
    if missing:
        raise ValueError(
            f"Missing required arguments: {missing}. These arguments must be explicitly provided and "
            "cannot be automatically tuned."
        )


def cached_config(tuner: Any, key: Hashable) -> Any | None:
    """The config the autotuner's in-process cache holds for ``key``, or ``None``."""
    return tuner.cache.get(key)


def direct_entry(tuner: Any, key: Hashable) -> tuple[Any, dict[str, Any]] | None:
    """What :func:`launch_direct` needs to make this key's cache hits, or ``None`` where it cannot.

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


#: What :func:`launch_direct` returns for a launch it did not make.
NOT_DIRECT = object()


def launch_direct(
    tuner: Any,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    picks: Mapping[Hashable, Any],
) -> Any:
    """The autotuner's own cache hit, from ``picks`` (key -> :func:`direct_entry`) where they hold its key.

    :returns: what the kernel's ``run`` returned, or :data:`NOT_DIRECT` where
        ``picks`` lack this launch's key or the autotuner's cache no longer
        holds that pick.
    """
    key = tuning_key(tuner, args, kwargs)
    entry = picks.get(key)
    if entry is None or tuner.cache.get(key) is not entry[0]:
        return NOT_DIRECT
    tuner.best_config = entry[0]
    return tuner.fn.run(*args, **kwargs, **entry[1])


def store_config(tuner: Any, key: Hashable, config: Any) -> None:
    """Make ``config`` the autotuner's pick for ``key``.

    Later launches with that key are ordinary cache hits of Triton, and
    ``tuner.best_config`` is ``config`` as after Triton's own tuning.
    """
    tuner.cache[key] = config
    tuner.best_config = config


def store_timings(tuner: Any, timings: Sequence[Any], seconds: float) -> None:
    """Leave ``configs_timings`` and ``bench_time`` on the autotuner as its own tuning does.

    ``configs_timings`` maps each config the tuning kept to three times in
    ms, where Triton's benchmarker gives the median and the 20th and 80th
    percentiles: the time the pick was chosen by (agreed over ranks), then
    the 20th and 80th percentiles of this rank's samples; ``inf`` three
    times for a config that failed. ``min(configs_timings,
    key=configs_timings.get)`` is the pick, as after Triton's tuning.
    ``bench_time`` is the tuning's seconds.

    :param timings: :class:`kerneltune.core.CandidateTiming` of each kept config.
    """
    tuner.configs_timings = {t.config: _three_times(t.time, t.samples) for t in timings}
    tuner.bench_time = seconds


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
    for option in ("reset_to_zero", "restore_value"):
        for name in getattr(tuner, option, None) or ():
            if name not in named:
                return f"{option} names {name!r}, which this launch does not pass"
            problem = value_problem(named[name])
            if problem is not None:
                return f"{option} names {name!r}, {problem}"
    return None


def changes_in_place(tuner: Any) -> bool:
    """Whether the autotuner's runs change arguments it puts back: ``restore_value``, or a user post-hook."""
    return bool(getattr(tuner, "restore_value", None) or getattr(tuner, "user_defined_post_hook", False))


def interpreting() -> bool:
    """Whether kernels run in Triton's interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


def run_function(fn: Any, args: Sequence[Any], *, grid: Any, warmup: bool, meta: Mapping[str, Any]) -> Any:
    """``fn.run``: launch (or with ``warmup``, only compile) a JIT function or its wrapper."""
    return fn.run(*args, grid=grid, warmup=warmup, **meta)
