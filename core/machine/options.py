"""The settings the tuning machine reads, declared next to it through ``kerneltune_add_settings``.

How candidates are measured (engine.py, measuring.py, tuning.py), compiled
ahead (compile.py), what a key without a stored pick gets and how stored
picks are trusted (decision.py, stored.py), and warm start (warm_start.py).
"""

from __future__ import annotations

from collections.abc import Callable

from kerneltune.core.isolation.options import MAX_TIMEOUT_S
from kerneltune.core.plugin_system.hookspecs.markers import hookimpl
from kerneltune.core.plugin_system.parsers import boolean, integer, one_of
from kerneltune.core.plugin_system.settings import TUNE_AUTO, TUNE_FAIL, TUNE_NEVER

#: The largest ``compile_deadline``: a deadline this many times the siblings' median compile
#: already leaves every compile to ``compile_timeout``; a larger one overflowed the deadline's
#: arithmetic.
MAX_DEADLINE = 1000


@hookimpl
def kerneltune_add_settings(add: Callable[..., None]) -> None:
    """Declare the measuring, compiling, stored-pick and warm-start settings."""
    _measuring(add)
    _compiling(add)
    _stored_picks(add)
    add(
        "warm_start",
        default="off",
        parse=one_of("off", "nearest", "screen"),
        help="nearest: a new key measures the best configs of the stored keys nearest to it; "
        "screen: it times every config briefly, then re-times the fastest and the nearest key's pick",
        env=("KERNELTUNE_WARM_START",),
    )
    add(
        "warm_start_budget",
        default=5,
        parse=integer(1),
        help="how many distinct configs a warm start measures at most (screen: re-times at most)",
        env=("KERNELTUNE_WARM_START_BUDGET",),
    )


def _measuring(add: Callable[..., None]) -> None:
    add(
        "warmup",
        default=5,
        parse=integer(0),
        help="untimed runs per candidate",
        env=("KERNELTUNE_WARMUP",),
    )
    add(
        "repeat",
        default=10,
        parse=integer(1),
        help="timed runs per candidate",
        env=("KERNELTUNE_REPEAT",),
    )
    add(
        "objective",
        default="device",
        parse=one_of("device", "wall"),
        help="what is compared: device time of the work, or wall (host-inclusive) time per call",
        env=("KERNELTUNE_OBJECTIVE",),
    )
    add(
        "tie_rounds",
        default=4,
        parse=integer(0),
        help="interleaved rounds in which near ties are re-timed before the pick; 0: none",
        env=("KERNELTUNE_TIE_ROUNDS",),
    )
    add(
        "shard",
        default=False,
        parse=boolean,
        help="with several ranks, each measures its share of the candidates, then one gather",
        env=("KERNELTUNE_SHARD",),
    )
    add(
        "pause_gc",
        default=True,
        parse=boolean,
        help="hold Python's garbage collector off while a key is tuned, as timeit does for its loop",
        env=("KERNELTUNE_PAUSE_GC",),
    )
    add(
        "twins",
        default=True,
        parse=boolean,
        help="measure once configs that compile to the same program (every rank alike; not sharded)",
        env=("KERNELTUNE_TWINS",),
    )


def _compiling(add: Callable[..., None]) -> None:
    add(
        "compile_workers",
        default=0,
        parse=integer(0),
        help="how many candidates compile at once ahead of measuring; 0: one per CPU core, at most 32",
        env=("KERNELTUNE_COMPILE_WORKERS",),
    )
    add(
        "compile_timeout",
        default=600,
        parse=integer(0, MAX_TIMEOUT_S, "seconds, the longest wait this platform takes"),
        help="seconds one candidate's compile may take before it fails; 0: no limit",
        env=("KERNELTUNE_COMPILE_TIMEOUT",),
    )
    add(
        "compile_deadline",
        default=3,
        parse=integer(0, MAX_DEADLINE, "times the median compile of its siblings"),
        help="a compile process this many times slower than the median of its siblings (and over 2 s) "
        "is stopped and its candidate fails; 0: no deadline",
        env=("KERNELTUNE_COMPILE_DEADLINE",),
    )
    add(
        "compile_pool",
        default="processes",
        parse=one_of("processes", "threads"),
        help="compile in processes forked from this one, or on threads of it",
        env=("KERNELTUNE_COMPILE_POOL",),
    )
    add(
        "compile_ahead",
        default=True,
        parse=boolean,
        help="a search compiles, in processes and at a lower priority, the points it expects to measure "
        "next while its round compiles; they are stopped while anything is measured",
        env=("KERNELTUNE_COMPILE_AHEAD",),
    )


def _stored_picks(add: Callable[..., None]) -> None:
    add(
        "tune",
        default=TUNE_AUTO,
        parse=one_of(TUNE_AUTO, TUNE_NEVER, TUNE_FAIL),
        help="what a key without a stored pick gets: a tuning, the first config unmeasured, or an error",
        env=("KERNELTUNE_TUNE",),
    )
    add(
        "always_tune",
        default=False,
        parse=boolean,
        help="ignore stored picks and retune, once per key per process",
        env=("TRITON_DIST_AUTOTUNE_ALWAYS_TUNE",),
    )
    add(
        "version_check",
        default=False,
        parse=boolean,
        help="retune where a record was made with other software versions",
        env=("TRITON_DIST_AUTOTUNE_VERSION_CHECK",),
    )
    add(
        "verify_pick",
        default=False,
        parse=boolean,
        help="with several ranks, check that every rank picked the same candidate",
        env=("KERNELTUNE_VERIFY_PICK",),
    )
    add(
        "recheck",
        default=True,
        parse=boolean,
        help="re-check an uncertain stored pick when a process first loads it",
        env=("KERNELTUNE_RECHECK",),
    )
