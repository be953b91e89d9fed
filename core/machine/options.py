"""The settings the tuning machine reads, declared next to it (COMPILE's are in core/compiling/options.py)."""

from __future__ import annotations

from kerneltune.core.plugin_system.parsers import boolean, integer, one_of
from kerneltune.core.plugin_system.settings import SettingSpec

#: The ``tune`` setting's values: tune a key that has no stored pick; run
#: the first candidate instead, measuring nothing; raise instead; run the
#: nearest stored key's pick, measuring nothing, and mark the key pending;
#: tune the pending keys and serve every other as ``nearest`` does.
TUNE_AUTO = "auto"
TUNE_NEVER = "never"
TUNE_FAIL = "fail"
TUNE_NEAREST = "nearest"
TUNE_PENDING = "pending"

#: The ``contextual_cache`` setting's values: contextual picks live in the process (as
#: Triton-distributed's do), or in the cache on disk too, so that a restart tunes nothing.
CONTEXTUAL_PROCESS = "process"
CONTEXTUAL_DISK = "disk"

# Measuring.
WARMUP = SettingSpec(
    "warmup",
    default=5,
    parse=integer(0),
    help="untimed runs per candidate",
    env=("KERNELTUNE_WARMUP",),
)
REPEAT = SettingSpec(
    "repeat",
    default=10,
    parse=integer(1),
    help="timed runs per candidate",
    env=("KERNELTUNE_REPEAT",),
)
OBJECTIVE = SettingSpec(
    "objective",
    default="device",
    parse=one_of("device", "wall"),
    help="what is compared: device time of the work, or wall (host-inclusive) time per call",
    env=("KERNELTUNE_OBJECTIVE",),
)
TIE_ROUNDS = SettingSpec(
    "tie_rounds",
    default=4,
    parse=integer(0),
    help="interleaved rounds in which near ties are re-timed before the pick; 0: none",
    env=("KERNELTUNE_TIE_ROUNDS",),
)
SHARD = SettingSpec(
    "shard",
    default=False,
    parse=boolean,
    help="with several ranks, each measures its share of the candidates, then one gather",
    env=("KERNELTUNE_SHARD",),
)
PAUSE_GC = SettingSpec(
    "pause_gc",
    default=True,
    parse=boolean,
    help="hold Python's garbage collector off while a key is tuned, as timeit does for its loop",
    env=("KERNELTUNE_PAUSE_GC",),
)
TWINS = SettingSpec(
    "twins",
    default=True,
    parse=boolean,
    help="measure once configs that compile to the same program (every rank alike; not sharded)",
    env=("KERNELTUNE_TWINS",),
)

# Stored picks.
TUNE = SettingSpec(
    "tune",
    default=TUNE_AUTO,
    parse=one_of(TUNE_AUTO, TUNE_NEVER, TUNE_FAIL, TUNE_NEAREST, TUNE_PENDING),
    help="what a key without a stored pick gets: a tuning, the first config unmeasured, an error, "
    "the nearest stored key's pick unmeasured (marked pending), or that unless it is pending (tuned)",
    env=("KERNELTUNE_TUNE",),
)
ALWAYS_TUNE = SettingSpec(
    "always_tune",
    default=False,
    parse=boolean,
    help="ignore stored picks and retune, once per key per process",
    env=("TRITON_DIST_AUTOTUNE_ALWAYS_TUNE",),
)
VERSION_CHECK = SettingSpec(
    "version_check",
    default=False,
    parse=boolean,
    help="retune where a record was made with other software versions",
    env=("TRITON_DIST_AUTOTUNE_VERSION_CHECK",),
)
VERIFY_PICK = SettingSpec(
    "verify_pick",
    default=False,
    parse=boolean,
    help="with several ranks, check that every rank picked the same candidate",
    env=("KERNELTUNE_VERIFY_PICK",),
)
RECHECK = SettingSpec(
    "recheck",
    default=True,
    parse=boolean,
    help="re-check an uncertain stored pick when a process first loads it",
    env=("KERNELTUNE_RECHECK",),
)
CONTEXTUAL_CACHE = SettingSpec(
    "contextual_cache",
    default=CONTEXTUAL_PROCESS,
    parse=one_of(CONTEXTUAL_PROCESS, CONTEXTUAL_DISK),
    help="where contextual picks live: this process, or the disk cache too (a restart tunes nothing)",
    env=("KERNELTUNE_CONTEXTUAL_CACHE",),
)

# Warm start.
WARM_START = SettingSpec(
    "warm_start",
    default="off",
    parse=one_of("off", "nearest", "screen"),
    help="nearest: a new key measures the best configs of the stored keys nearest to it; "
    "screen: it times every config briefly, then re-times the fastest and the nearest key's pick",
    env=("KERNELTUNE_WARM_START",),
)
WARM_START_BUDGET = SettingSpec(
    "warm_start_budget",
    default=5,
    parse=integer(1),
    help="how many distinct configs a warm start measures at most (screen: re-times at most)",
    env=("KERNELTUNE_WARM_START_BUDGET",),
)
