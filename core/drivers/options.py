"""The settings the tuners' front doors and the progress bar read, declared next to them."""

from __future__ import annotations

from kerneltune.core.plugin_system.parsers import boolean, integer
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

#: The ``check_outputs`` setting's values: compare each candidate's outputs with the reference's
#: and drop the wrong ones, where they can be compared; never; or fail a tuning whose cannot be.
CHECK_ON = "on"
CHECK_OFF = "off"
CHECK_STRICT = "strict"


def check_mode(value: object, where: str) -> str:
    """``check_outputs``: ``strict``, or a flag (``true``/``on`` or ``false``/``off``)."""
    if isinstance(value, str) and value.strip().lower() == CHECK_STRICT:
        return CHECK_STRICT
    return CHECK_ON if boolean(value, where) else CHECK_OFF


CHECK_OUTPUTS = SettingSpec(
    "check_outputs",
    default=CHECK_ON,
    parse=check_mode,
    help="on: a candidate whose outputs differ from the reference's is dropped; off: none checked; "
    "strict: as on, and a tuning whose outputs cannot be checked fails",
    env=("KERNELTUNE_CHECK_OUTPUTS",),
)
CHECK_OUTPUTS_BUDGET = SettingSpec(
    "check_outputs_budget",
    default=1024,
    parse=integer(0),
    help="MiB the check may copy: arguments holding more are not checked, a return value holding more is "
    "checked on a sample (a notice says so); 0: no limit",
    env=("KERNELTUNE_CHECK_OUTPUTS_BUDGET",),
)
