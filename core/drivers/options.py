"""The settings the tuners' front doors read, declared next to them (``kerneltune_add_settings``)."""

from __future__ import annotations

from collections.abc import Callable

from kerneltune.core.plugin_system.hookspecs.markers import hookimpl
from kerneltune.core.plugin_system.parsers import boolean, one_of

#: The ``contextual_cache`` setting's values: contextual picks live in the process (as
#: Triton-distributed's do), or in the cache on disk too, so that a restart tunes nothing.
CONTEXTUAL_PROCESS = "process"
CONTEXTUAL_DISK = "disk"


@hookimpl
def kerneltune_add_settings(add: Callable[..., None]) -> None:
    """Declare ``precompile``, ``verbose``, ``progress`` and ``contextual_cache``."""
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
    add(
        "contextual_cache",
        default=CONTEXTUAL_PROCESS,
        parse=one_of(CONTEXTUAL_PROCESS, CONTEXTUAL_DISK),
        help="where contextual picks live: this process, or the disk cache too (a restart tunes nothing)",
        env=("KERNELTUNE_CONTEXTUAL_CACHE",),
    )
