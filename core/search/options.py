"""How generated spaces are searched, unless a kernel's hint says otherwise (``kerneltune_add_settings``)."""

from __future__ import annotations

from collections.abc import Callable

from kerneltune.core.plugin_system.hookspecs.markers import hookimpl
from kerneltune.core.plugin_system.parsers import integer, one_of, plugin_name, seconds
from kerneltune.core.values.geometry import EFFORTS


@hookimpl
def kerneltune_add_settings(add: Callable[..., None]) -> None:
    """Declare the search strategy, its effort and its caps (0: none)."""
    add(
        "search_strategy",
        default="auto",
        parse=plugin_name,
        help="how search_params kernels search their space: a registered strategy's name, or auto",
        env=("KERNELTUNE_SEARCH_STRATEGY",),
    )
    add(
        "search_effort",
        default="default",
        parse=one_of(*EFFORTS),
        help="how much the search strategy spends: " + ", ".join(EFFORTS),
        env=("KERNELTUNE_SEARCH_EFFORT",),
    )
    add(
        "search_budget_s",
        default=0.0,
        parse=seconds,
        help="seconds after which a search starts no new round; 0: no limit",
        env=("KERNELTUNE_SEARCH_BUDGET_S",),
    )
    add(
        "search_max_points",
        default=0,
        parse=integer(0),
        help="the most candidates a search measures; 0: no cap",
        env=("KERNELTUNE_SEARCH_MAX_POINTS",),
    )
