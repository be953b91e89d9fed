"""The settings the tuners' front doors read, declared next to them (``kerneltune_add_settings``)."""

from __future__ import annotations

from collections.abc import Callable

from kerneltune.core.plugin_system.hookspecs.markers import hookimpl
from kerneltune.core.plugin_system.parsers import boolean


@hookimpl
def kerneltune_add_settings(add: Callable[..., None]) -> None:
    """Declare ``precompile``, ``verbose`` and ``progress``."""
    add(
        "precompile",
        default=True,
        parse=boolean,
        help="the function-level tuner records each candidate's Triton launches and compiles them ahead",
        env=("KERNELTUNE_PRECOMPILE",),
    )
    add(
        "verbose",
        default=False,
        parse=boolean,
        help="every tuner's verbose lines, as autotune_verbose=True gives them for one call",
        env=("KERNELTUNE_VERBOSE",),
    )
    add(
        "progress",
        default=True,
        parse=boolean,
        help="a progress bar on stderr for tunings past about a second, when stderr is a terminal",
        env=("KERNELTUNE_PROGRESS",),
    )
