"""triton-ascend's auto-tiling tuner: the candidates its ``run`` generates for a launch, and its axes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kerneltune.plugins.triton.adapter.layouts import layout_of
from kerneltune.plugins.triton.autotune import AXIS_NAMES


def generated_configs(tuner: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """triton-ascend's auto-tiling tuner: the tiles it generates for this launch and the user's configs.

    The steps of its ``run`` before it benchmarks, through its own methods
    and in its order: on 3.2.0, parse the kernel for its split and tiling
    parameters; generate the tiles for the key's axis sizes
    (:func:`tiling_axes`) and the widest dtype; then ``prune_configs_by``.

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

    Its ``keys`` where they are a dict (axis name to argument name); a list
    key's arguments take the axis names in triton-ascend's order
    (:data:`~kerneltune.plugins.triton.autotune.AXIS_NAMES`), as 3.2.0's tuner names them.

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

    triton-ascend 3.2.0rc4's ``run``, cache hits included, reads its key
    as a dict from axis name to argument name: a list (as 3.2.0 takes it)
    fails there with ``AttributeError``. The list's arguments take the axis
    names in order (:func:`tiling_axes`); :func:`tuning_key` is the same
    either way. Any other autotuner is left as it is.
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
