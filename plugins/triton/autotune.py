"""``triton.autotune`` itself: where a release takes ``hints``, and replacing it once per process.

search_params replaces the decorator (:func:`install_autotune`); the
isolation worker installs the same replacement (:func:`autotune_installer`).
Where the decorator takes ``hints`` differs between releases
(:func:`hints_parameter`), and so does how a dict ``key`` is read
(:func:`dict_key_arguments`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

#: Set on a ``triton.autotune`` replacement made here: the ``"module:function"`` that installs it.
SEARCH_PARAMS_MARK = "__kerneltune_search_params__"

#: triton-ascend's axis names (``triton.runtime.utils.valid_axis_names`` in 3.2.0), in the order
#: its auto-tiling tuner hands them to the arguments of a list ``key``; ``r``: a reduction axis.
AXIS_NAMES = ("x", "y", "z", "w", "v", "t", "rx", "ry", "rz", "rw", "rv", "rt")

#: The row of docs/ascend.md's porting table for a dict ``key``, its two cells, quoted where one
#: is refused (tests/test_ascend_porting.py checks that the page holds it).
DICT_KEY_ROW = (
    '`key={"x": "n"}` (axis name -> argument name)',
    'the same, or `key=["n"]`: picks are filed by the values of the arguments the dict names, in its '
    "order; its axis names must be triton-ascend's (`x`, `y`, `z`, `w`, `v`, `t`, `rx`, `ry`, `rz`, "
    "`rw`, `rv`, `rt`), with `enable_ascend_autotune` the first of them in that order",
)


def hints_parameter(autotune: Callable[..., Any]) -> str | None:
    """Where a ``triton.autotune`` implementation takes ``hints``.

    :returns: ``"positional"`` when it is an ordinary parameter (third on
        triton-ascend 3.2: ``autotune(configs, key, hints, ...)``),
        ``"keyword"`` when keyword-only (later triton-ascend), ``None`` when
        the implementation has no ``hints`` (upstream Triton).
    """
    try:
        parameter = inspect.signature(autotune).parameters.get("hints")
    except (TypeError, ValueError):
        return None
    if parameter is None:
        return None
    return "keyword" if parameter.kind is inspect.Parameter.KEYWORD_ONLY else "positional"


def install_autotune(make: Callable[[Callable[..., Any]], Callable[..., Any]], installer: str) -> bool:
    """Replace ``triton.autotune`` (and its aliases in ``triton.runtime``) with ``make(original)``.

    Done once per process: when the current ``triton.autotune`` is already a
    replacement made here, nothing changes. Kernels decorated before keep
    what they got.

    :param installer: ``"module:function"`` of what made this call, which
        another process (the isolation worker) calls without arguments to
        install the same replacement (:func:`autotune_installer`).
    :returns: whether this call installed the replacement.
    """
    import triton
    import triton.runtime
    import triton.runtime.autotuner

    current = triton.autotune
    if getattr(current, SEARCH_PARAMS_MARK, False):
        return False
    replacement = make(current)
    setattr(replacement, SEARCH_PARAMS_MARK, installer)
    for owner in (triton, triton.runtime, triton.runtime.autotuner):
        if getattr(owner, "autotune", None) is current:
            owner.autotune = replacement
    return True


def autotune_installer() -> str | None:
    """``"module:function"`` that installs the ``triton.autotune`` in force; ``None`` for Triton's own."""
    import triton

    return getattr(triton.autotune, SEARCH_PARAMS_MARK, None)


def dict_key_arguments(key: object, *, ordered: bool = False) -> list[str] | None:
    """The argument names a dict ``key`` (``{axis name: argument name}``) names, in its order.

    triton-ascend's auto-tiling tuners and DLCompiler's file their picks by
    those arguments' values; upstream Triton would read the axis names as
    argument names instead.

    :param ordered: the axes must also be the first of :data:`AXIS_NAMES`,
        in order: triton-ascend 3.2.0's auto-tiling tuner names the axes of a
        list key so, and takes no other.
    :returns: ``None`` for a key that is not a dict (a list is the ordinary key).
    :raises ValueError: for an axis name triton-ascend does not have, an
        argument name that is not a string, or (``ordered``) axes out of
        that order; the message quotes :data:`DICT_KEY_ROW`.
    """
    if not isinstance(key, Mapping):
        return None
    axes, names = list(key), list(key.values())
    problem = None
    unknown = [repr(axis) for axis in axes if axis not in AXIS_NAMES]
    if unknown:
        problem = f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} no triton-ascend axis name"
    elif not all(isinstance(name, str) for name in names):
        problem = "its values must be argument names"
    elif ordered and tuple(axes) != AXIS_NAMES[: len(axes)]:
        wanted = AXIS_NAMES[: len(axes)]
        named = f"the axes {', '.join(wanted)} in that order" if len(wanted) > 1 else f"the axis {wanted[0]}"
        problem = (
            f"with enable_ascend_autotune it must name {named}, as triton-ascend 3.2.0 names the "
            "arguments of a list key"
        )
    if problem is not None:
        raise ValueError(
            f"triton.autotune(key={key!r}): {problem}. docs/ascend.md, Porting: {DICT_KEY_ROW[0]}: "
            f"{DICT_KEY_ROW[1]}"
        )
    return names
