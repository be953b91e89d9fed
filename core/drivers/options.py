"""The settings the tuners' front doors and the progress bar read, declared next to them."""

from __future__ import annotations

from kerneltune.core.plugin_system.parsers import boolean
from kerneltune.core.plugin_system.settings import SettingSpec

PRECOMPILE = SettingSpec(
    "precompile",
    default=True,
    parse=boolean,
    help="the function-level tuner records each candidate's Triton launches and compiles them ahead",
    env=("KERNELTUNE_PRECOMPILE",),
)
VERBOSE = SettingSpec(
    "verbose",
    default=False,
    parse=boolean,
    help="every tuner's verbose lines, as autotune_verbose=True gives them for one call",
    env=("KERNELTUNE_VERBOSE",),
)
PROGRESS = SettingSpec(
    "progress",
    default=True,
    parse=boolean,
    help="a progress bar on stderr for tunings past about a second, when stderr is a terminal",
    env=("KERNELTUNE_PROGRESS",),
)
