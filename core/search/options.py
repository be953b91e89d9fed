"""How generated spaces are searched, unless a kernel's hint says otherwise: the search settings."""

from __future__ import annotations

from kerneltune.core.plugin_system.parsers import integer, one_of, plugin_name, seconds
from kerneltune.core.plugin_system.settings import SettingSpec
from kerneltune.core.values.geometry import EFFORTS

SEARCH_STRATEGY = SettingSpec(
    "search_strategy",
    default="auto",
    parse=plugin_name,
    help="how search_params kernels search their space: a registered strategy's name, or auto",
    env=("KERNELTUNE_SEARCH_STRATEGY",),
)
SEARCH_EFFORT = SettingSpec(
    "search_effort",
    default="default",
    parse=one_of(*EFFORTS),
    help="how much the search strategy spends: " + ", ".join(EFFORTS),
    env=("KERNELTUNE_SEARCH_EFFORT",),
)
SEARCH_BUDGET_S = SettingSpec(
    "search_budget_s",
    default=0.0,
    parse=seconds,
    help="seconds after which a search starts no new round; 0: no limit",
    env=("KERNELTUNE_SEARCH_BUDGET_S",),
)
SEARCH_MAX_POINTS = SettingSpec(
    "search_max_points",
    default=0,
    parse=integer(0),
    help="the most candidates a search measures; 0: no cap",
    env=("KERNELTUNE_SEARCH_MAX_POINTS",),
)
