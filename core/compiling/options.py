"""The settings COMPILE reads, declared next to it (stage.py, forks.py, siblings.py)."""

from __future__ import annotations

from kerneltune.core.plugin_system.parsers import MAX_TIMEOUT_S, boolean, integer, one_of
from kerneltune.core.plugin_system.settings import SettingSpec

#: The largest ``compile_deadline``: a deadline this many times the siblings' median compile
#: already leaves every compile to ``compile_timeout``; a larger one overflowed the deadline's
#: arithmetic.
MAX_DEADLINE = 1000

COMPILE_WORKERS = SettingSpec(
    "compile_workers",
    default=0,
    parse=integer(0),
    help="how many candidates compile at once ahead of measuring; 0: one per CPU core, at most 32",
    env=("KERNELTUNE_COMPILE_WORKERS",),
)
COMPILE_TIMEOUT = SettingSpec(
    "compile_timeout",
    default=600,
    parse=integer(0, MAX_TIMEOUT_S, "seconds, the longest wait this platform takes"),
    help="seconds one candidate's compile may take before it fails; 0: no limit",
    env=("KERNELTUNE_COMPILE_TIMEOUT",),
)
COMPILE_DEADLINE = SettingSpec(
    "compile_deadline",
    default=3,
    parse=integer(0, MAX_DEADLINE, "times the median compile of its siblings"),
    help="a compile process this many times slower than the median of its siblings (and over 2 s) "
    "is stopped and its candidate fails; 0: no deadline",
    env=("KERNELTUNE_COMPILE_DEADLINE",),
)
COMPILE_POOL = SettingSpec(
    "compile_pool",
    default="processes",
    parse=one_of("processes", "threads"),
    help="compile in processes forked from this one, or on threads of it",
    env=("KERNELTUNE_COMPILE_POOL",),
)
COMPILE_AHEAD = SettingSpec(
    "compile_ahead",
    default=True,
    parse=boolean,
    help="a search compiles, in processes and at a lower priority, the points it expects to measure "
    "next while its round compiles; they are stopped while anything is measured",
    env=("KERNELTUNE_COMPILE_AHEAD",),
)
