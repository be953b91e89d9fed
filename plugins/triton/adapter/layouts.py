"""The adapter's version table: how each line of Triton releases lays out its autotuner.

:data:`LAYOUTS` holds one row per line of releases, each checked against
the inventory above it of the autotuner attributes the adapter reads and writes.
"""

from __future__ import annotations

import functools
import importlib.metadata
import warnings
from collections.abc import Callable
from typing import Any

import attrs
from kerneltune.core import user_stacklevel


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
    #: ``fn.run(*args, **kwargs, **config.all_kwargs())``, which a ``DirectKernel`` makes itself.
    hits_directly: bool = False


# Triton promises none of the attributes below; they are stable in practice,
# and each row of LAYOUTS was checked against them. Every function of the
# adapter (this package) documents what it needs and what it guarantees.
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
#   benchmarks (autotiling's :func:`generated_configs`): on 3.2.0 ``autoparse_ptr_nums``,
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
