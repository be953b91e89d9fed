"""kerneltune's engine, and the one import a plugin author needs.

Every name in ``__all__`` is the plugin API: built-in plugins and the
examples import these names from ``kerneltune.core`` and nothing deeper, so
core's modules can be regrouped without breaking a plugin. A name keeps its
meaning within a major version; removing one, or changing what it takes or
returns, waits for the next major version (docs/plugins.md, "What the API
promises"). The modules below are grouped by role: ``values`` (plain data
on the ground floor), ``plugin_system``, ``search``, ``isolation``,
``machine`` (the state machine) and ``drivers`` (the tuners that drive it);
docs/architecture.md maps them. Nothing here imports torch or triton;
plugins do, lazily, when they run.
"""

from kerneltune.core.drivers.inplace import in_place_problem
from kerneltune.core.errors import (
    CacheReadError,
    CandidateDropped,
    CandidateFailedWarning,
    CompileMiss,
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
    UserFunctionError,
    describe_error,
)
from kerneltune.core.isolation.parent import SUBPROCESS, Screening, screener
from kerneltune.core.isolation.targets import TURN_OFF, named_target
from kerneltune.core.isolation.worker import copier
from kerneltune.core.machine.confidence import TOLERANCE
from kerneltune.core.machine.faces import SearchTuning, SteppedTuning
from kerneltune.core.machine.timing import format_ms
from kerneltune.core.machine.tuner import Tuner, Tuning
from kerneltune.core.notices import user_stacklevel, warn_once
from kerneltune.core.plugin_system.contracts import (
    Cache,
    CompileProcess,
    ConfiguredCache,
    Device,
    DeviceTimer,
    DirectInterceptor,
    DirectLaunch,
    Feature,
    FlushingTimer,
    FlushTimingTimer,
    ForkingLaunch,
    ForkingRecorder,
    GatheringReducer,
    GlobalRankReducer,
    HoldingTimer,
    InPlaceLaunch,
    Interceptor,
    IsolatedLaunch,
    IsolatingLaunch,
    KernelLaunch,
    LayeringCache,
    ListingCache,
    ProbingCompileProcess,
    ProbingProfileFamily,
    ProfileFamily,
    ProgramLaunch,
    RecordingInterceptor,
    Reducer,
    Registrable,
    RemoteStore,
    ReportingLaunch,
    SearchStrategy,
    Timer,
    UnsupportedLaunch,
    WeighingCompileProcess,
    provides,
)
from kerneltune.core.plugin_system.hookspecs import hookimpl, hookspec
from kerneltune.core.plugin_system.loading import load_settings
from kerneltune.core.plugin_system.parsers import boolean, integer, one_of, seconds, text
from kerneltune.core.plugin_system.registry import BUILTIN_PLUGINS, ENTRY_POINT_GROUP, make_plugin_manager
from kerneltune.core.plugin_system.seam import PluginFaultWarning, fault, origin
from kerneltune.core.plugin_system.session import Session, add_plugin, current_session, remove_plugin
from kerneltune.core.plugin_system.settings import SEARCH_EFFORTS, Settings, SettingSpec
from kerneltune.core.private_files import (
    MAX_READ,
    NotPrivateError,
    PrivateAppender,
    check_folder,
    check_root,
    make_private_dirs,
    open_private_append,
    read_private,
    remove_private,
)
from kerneltune.core.search.families import choose_family, family_probes, family_profiles
from kerneltune.core.search.ledger import SearchLedger
from kerneltune.core.search.strategies import choose_strategy
from kerneltune.core.torch_devices import device_unavailable_reason, torch_device_module
from kerneltune.core.values.direct import DirectLaunches
from kerneltune.core.values.events import (
    CandidateMeasured,
    CompileFinished,
    CompileStarted,
    KernelTuned,
    LaunchMeasured,
    PickLoaded,
    TuningFinished,
    TuningStarted,
)
from kerneltune.core.values.geometry import (
    BudgetSpent,
    Measure,
    Point,
    SearchBudget,
    SearchGeometry,
    Shape,
)
from kerneltune.core.values.keys import describe, digest, encode_key, register_key_encoder
from kerneltune.core.values.profiles import OPERATORS, UNSET, CompileTarget, option_grid, unique_profiles
from kerneltune.core.values.records import NOT_MEASURED, PRUNED, Candidate, Measurement, Method, TuningRecord
from kerneltune.core.values.space import Space
from kerneltune.core.values.target import Target
from kerneltune.core.values.timings import CandidateTiming
from kerneltune.core.verbose import verbose_line

__all__ = [
    # the plugin system: hooks, registration, sessions, settings
    "BUILTIN_PLUGINS",
    "ENTRY_POINT_GROUP",
    "SEARCH_EFFORTS",
    "Session",
    "SettingSpec",
    "Settings",
    "add_plugin",
    "boolean",
    "current_session",
    "hookimpl",
    "hookspec",
    "integer",
    "load_settings",
    "make_plugin_manager",
    "one_of",
    "remove_plugin",
    "seconds",
    "text",
    # the contracts a registered class meets, and the test for optional parts
    "Cache",
    "CompileProcess",
    "Device",
    "DeviceTimer",
    "Feature",
    "FlushingTimer",
    "ForkingLaunch",
    "ProgramLaunch",
    "ForkingRecorder",
    "ConfiguredCache",
    "GatheringReducer",
    "GlobalRankReducer",
    "HoldingTimer",
    "FlushTimingTimer",
    "DirectInterceptor",
    "DirectLaunch",
    "DirectLaunches",
    "InPlaceLaunch",
    "Interceptor",
    "IsolatedLaunch",
    "IsolatingLaunch",
    "KernelLaunch",
    "LayeringCache",
    "ListingCache",
    "ProbingCompileProcess",
    "ProbingProfileFamily",
    "ProfileFamily",
    "RecordingInterceptor",
    "Reducer",
    "Registrable",
    "RemoteStore",
    "ReportingLaunch",
    "SearchStrategy",
    "Timer",
    "UnsupportedLaunch",
    "WeighingCompileProcess",
    "provides",
    # values: candidates, records, keys, events
    "Candidate",
    "CandidateMeasured",
    "CandidateTiming",
    "CompileFinished",
    "CompileStarted",
    "KernelTuned",
    "LaunchMeasured",
    "Measurement",
    "Method",
    "NOT_MEASURED",
    "PRUNED",
    "PickLoaded",
    "Space",
    "TuningFinished",
    "TuningRecord",
    "TuningStarted",
    "describe",
    "digest",
    "encode_key",
    "register_key_encoder",
    # the tuning machine
    "TOLERANCE",
    "SearchTuning",
    "SteppedTuning",
    "Tuner",
    "Tuning",
    "format_ms",
    "in_place_problem",
    # generated spaces: the search vocabulary and compile targets
    "OPERATORS",
    "UNSET",
    "BudgetSpent",
    "CompileTarget",
    "Measure",
    "Point",
    "SearchBudget",
    "SearchGeometry",
    "SearchLedger",
    "Shape",
    "choose_family",
    "choose_strategy",
    "family_probes",
    "family_profiles",
    "option_grid",
    "unique_profiles",
    # isolation
    "SUBPROCESS",
    "TURN_OFF",
    "Screening",
    "Target",
    "copier",
    "named_target",
    "screener",
    # errors and warnings
    "CacheReadError",
    "CandidateDropped",
    "CandidateFailedWarning",
    "CompileMiss",
    "ConfigError",
    "IsolationError",
    "KernelTuneError",
    "NoStoredPickError",
    "NoValidConfigError",
    "PluginError",
    "PluginFaultWarning",
    "RankMismatchError",
    "StalledTuningError",
    "TunerBusyError",
    "UncertainPickWarning",
    "UserFunctionError",
    "describe_error",
    "fault",
    "origin",
    # notices, verbose lines, private files, device modules
    "MAX_READ",
    "NotPrivateError",
    "check_folder",
    "check_root",
    "make_private_dirs",
    "open_private_append",
    "PrivateAppender",
    "read_private",
    "remove_private",
    "device_unavailable_reason",
    "torch_device_module",
    "user_stacklevel",
    "verbose_line",
    "warn_once",
]
