"""``triton.autotune`` itself: where a release takes ``hints``, and replacing it once per process.

search_params replaces the decorator (:func:`install_autotune`); the
isolation worker asks which replacement is in force
(:func:`autotune_installer`) to install the same one. The module attribute
``triton.autotune`` and its aliases have the same shape in every row of the
adapter's version table; where the decorator takes ``hints`` does not
(:func:`hints_parameter`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

#: Set on a ``triton.autotune`` replacement made here: the ``"module:function"`` that installs it.
SEARCH_PARAMS_MARK = "__kerneltune_search_params__"


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
