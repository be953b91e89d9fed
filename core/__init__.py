"""kerneltune's engine: the tuning state machine and the plugin contract.

Grouped by role: ``machine`` (the state machine and its stages),
``drivers`` (the tuners that drive it), ``plugin_system``, ``search``
(generated spaces) and ``isolation``; docs/architecture.md maps them. This
package re-exports the public names. Nothing here imports torch or triton;
plugins do, lazily, when they run.
"""

from kerneltune.core.errors import (
    CacheReadError,
    CandidateDropped,
    CandidateFailedWarning,
    ConfigError,
    IsolationError,
    KernelTuneError,
    NoStoredPickError,
    NoValidConfigError,
    PluginError,
    RankMismatchError,
    StalledTuningError,
    TunerBusyError,
    UncertainPickWarning,
    describe_error,
)
from kerneltune.core.machine.engine import Tuner, Tuning
from kerneltune.core.machine.keys import describe, digest, encode_key, register_key_encoder
from kerneltune.core.machine.measure import format_ms
from kerneltune.core.machine.records import Candidate, Measurement, Method, TuningRecord
from kerneltune.core.machine.space import Space
from kerneltune.core.plugin_system.events import (
    CandidateMeasured,
    CompileFinished,
    CompileStarted,
    KernelTuned,
    LaunchMeasured,
    PickLoaded,
    TuningFinished,
    TuningStarted,
)
from kerneltune.core.plugin_system.hookspecs import hookimpl, hookspec
from kerneltune.core.plugin_system.registry import BUILTIN_PLUGINS, ENTRY_POINT_GROUP, make_plugin_manager
from kerneltune.core.plugin_system.session import Session, add_plugin, current_session, remove_plugin
from kerneltune.core.plugin_system.settings import Settings, load_settings

__all__ = [
    "BUILTIN_PLUGINS",
    "ENTRY_POINT_GROUP",
    "CacheReadError",
    "Candidate",
    "CandidateDropped",
    "CandidateFailedWarning",
    "CandidateMeasured",
    "CompileFinished",
    "CompileStarted",
    "ConfigError",
    "IsolationError",
    "KernelTuneError",
    "KernelTuned",
    "LaunchMeasured",
    "Measurement",
    "Method",
    "NoStoredPickError",
    "NoValidConfigError",
    "PickLoaded",
    "PluginError",
    "RankMismatchError",
    "Session",
    "Settings",
    "Space",
    "StalledTuningError",
    "Tuner",
    "TunerBusyError",
    "Tuning",
    "TuningFinished",
    "TuningRecord",
    "TuningStarted",
    "UncertainPickWarning",
    "add_plugin",
    "current_session",
    "describe",
    "describe_error",
    "digest",
    "encode_key",
    "format_ms",
    "hookimpl",
    "hookspec",
    "load_settings",
    "make_plugin_manager",
    "register_key_encoder",
    "remove_plugin",
]
