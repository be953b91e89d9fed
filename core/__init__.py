"""kerneltune's engine, and the one import a plugin author needs.

Every name in ``__all__`` is the plugin API: plugins and the examples
import these names from ``kerneltune.core`` and nothing deeper, and each is
one a plugin, an example or a documented recipe uses (tests/test_import_graph.py
checks both). A name keeps its meaning within a major version (docs/plugins.md,
"What the API promises"). Drivers have a door of their own,
:mod:`kerneltune.core.driving`; docs/architecture.md maps the modules below.
Nothing here imports torch or triton.
"""

from kerneltune.core.drivers.inplace import in_place_problem
from kerneltune.core.errors import (
    CacheReadError,
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
)
from kerneltune.core.isolation.targets import TURN_OFF, named_target
from kerneltune.core.isolation.worker import copier
from kerneltune.core.machine.confidence import TOLERANCE
from kerneltune.core.machine.timing import format_ms
from kerneltune.core.notices import user_stacklevel, warn_once
from kerneltune.core.plugin_system.contracts import (
    AlwaysAvailable,
    Cache,
    CompileProcess,
    ConfiguredCache,
    Device,
    IsolatingLaunch,
    KernelLaunch,
    LayeringCache,
    Reducer,
    RemoteStore,
    SearchStrategy,
    Timer,
    provides,
)
from kerneltune.core.plugin_system.hookspecs import hookimpl
from kerneltune.core.plugin_system.parsers import boolean, integer, one_of, seconds, text
from kerneltune.core.plugin_system.session import Session, add_plugin, remove_plugin
from kerneltune.core.plugin_system.settings import Settings, load_settings
from kerneltune.core.private_files import (
    MAX_READ,
    NotPrivateError,
    PrivateAppender,
    check_folder,
    check_root,
    make_private_dirs,
    read_private,
)
from kerneltune.core.search.ledger import SearchLedger
from kerneltune.core.torch_devices import TorchDeviceType
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
from kerneltune.core.values.geometry import BudgetSpent, Measure, Point, SearchBudget, SearchGeometry, Shape
from kerneltune.core.values.keys import register_key_encoder
from kerneltune.core.values.profiles import UNSET, CompileTarget, option_grid, unique_profiles
from kerneltune.core.values.records import NOT_MEASURED, PRUNED
from kerneltune.core.values.target import Target
from kerneltune.core.values.timings import CandidateTiming
from kerneltune.core.verbose import verbose_line

__all__ = [
    # the plugin system: the hook marker, adding a plugin, sessions, settings and their parsers
    "Session",
    "Settings",
    "add_plugin",
    "boolean",
    "hookimpl",
    "integer",
    "load_settings",
    "one_of",
    "remove_plugin",
    "seconds",
    "text",
    # the contracts a registered class meets, the test for optional parts, the always available base
    "AlwaysAvailable",
    "Cache",
    "CompileProcess",
    "ConfiguredCache",
    "Device",
    "IsolatingLaunch",
    "KernelLaunch",
    "LayeringCache",
    "Reducer",
    "RemoteStore",
    "SearchStrategy",
    "Timer",
    "provides",
    # values: records' markers, timings, keys, events, direct launches
    "CandidateMeasured",
    "CandidateTiming",
    "CompileFinished",
    "CompileStarted",
    "DirectLaunches",
    "KernelTuned",
    "LaunchMeasured",
    "NOT_MEASURED",
    "PRUNED",
    "PickLoaded",
    "TuningFinished",
    "TuningStarted",
    "register_key_encoder",
    # the tuning machine's measures
    "TOLERANCE",
    "format_ms",
    "in_place_problem",
    # generated spaces: the search vocabulary and compile targets
    "UNSET",
    "BudgetSpent",
    "CompileTarget",
    "Measure",
    "Point",
    "SearchBudget",
    "SearchGeometry",
    "SearchLedger",
    "Shape",
    "option_grid",
    "unique_profiles",
    # isolation
    "TURN_OFF",
    "Target",
    "copier",
    "named_target",
    # errors and warnings
    "CacheReadError",
    "CandidateFailedWarning",
    "CompileMiss",
    "ConfigError",
    "IsolationError",
    "KernelTuneError",
    "NoStoredPickError",
    "NoValidConfigError",
    "PluginError",
    "RankMismatchError",
    "StalledTuningError",
    "TunerBusyError",
    "UncertainPickWarning",
    "UserFunctionError",
    # notices, verbose lines, private files, device modules
    "MAX_READ",
    "NotPrivateError",
    "PrivateAppender",
    "check_folder",
    "check_root",
    "make_private_dirs",
    "read_private",
    "TorchDeviceType",
    "user_stacklevel",
    "verbose_line",
    "warn_once",
]
