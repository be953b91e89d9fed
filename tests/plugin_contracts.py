"""Every registered plugin class, held to its family's protocol by mypy.

mypy checks this module (``[tool.mypy]`` in pyproject.toml names it), so a
built-in or example plugin class that drifts from its family's protocol (a
method renamed, a parameter added or retyped, a return type changed, the
``name`` missing) fails ``mypy`` here, instead of a user's tuning at run
time. Each list is typed by the protocol its classes must meet: the family's
own, then each optional part a class has. tests/test_plugin_contracts.py
imports this module and checks that the lists hold exactly the classes the
``kerneltune_register_*`` hooks register, and every optional part they provide.

A protocol's ``__init__`` is not compared: the engine constructs each family
as its protocol's docstring says, which the family's own tests exercise.
mypy's error names the class and the protocol, not the member at fault; an
instance assigned in a scratch module (``_: Timer = WallclockTimer()``) gets
the member listed.
"""

from __future__ import annotations

from kerneltune.core.plugin_system.contracts import (
    Cache,
    CheckedLaunch,
    CompileProcess,
    ConfiguredCache,
    Device,
    DeviceTimer,
    ExpectingTimer,
    Feature,
    FlushingTimer,
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
    PreciseTimer,
    ProbingCompileProcess,
    ProbingProfileFamily,
    ProfileFamily,
    ProgramLaunch,
    RecordingInterceptor,
    Reducer,
    RemoteStore,
    ReportingLaunch,
    SearchStrategy,
    Timer,
    UnsupportedLaunch,
    WeighingCompileProcess,
)
from kerneltune.plugins.caches.files import JsonCache, MsgpackCache
from kerneltune.plugins.caches.memory import MemoryCache
from kerneltune.plugins.caches.none import NoCache
from kerneltune.plugins.caches.redis import RedisStore
from kerneltune.plugins.devices.accelerators import CudaDevice, NpuDevice
from kerneltune.plugins.devices.host import CpuDevice
from kerneltune.plugins.profiles.ascend import AscendMixCVProfiles, AscendVectorSafeProfiles
from kerneltune.plugins.profiles.nvidia import NvidiaMatrixProfiles, NvidiaVectorProfiles
from kerneltune.plugins.reducers.local import LocalReducer
from kerneltune.plugins.reducers.world import WorldMaxReducer
from kerneltune.plugins.search.exhaustive import ExhaustiveStrategy
from kerneltune.plugins.search.pattern import PatternStrategy
from kerneltune.plugins.search.staged import StagedStrategy
from kerneltune.plugins.timers.events import CudaEventTimer, CudaGraphTimer, NpuEventTimer
from kerneltune.plugins.timers.npu_profiler import NpuProfilerTimer
from kerneltune.plugins.timers.wallclock import WallclockTimer
from kerneltune.plugins.triton.compiler import TritonCompileProcess
from kerneltune.plugins.triton.interceptor import TritonInterceptor, TritonLaunch
from kerneltune.plugins.triton.isolated import KernelIsolation
from kerneltune.plugins.triton.search_params import SearchParamsFeature
from kerneltune_example_device import ToyDevice, ToyTimer
from kerneltune_example_plugin import CpuTimeTimer
from kerneltune_example_plugin.random_search import RandomSearch

# -- the families, each by its kerneltune_register_* hook ---------------------

TIMERS: list[type[Timer]] = [
    WallclockTimer,
    CudaEventTimer,
    CudaGraphTimer,
    NpuEventTimer,
    NpuProfilerTimer,
    CpuTimeTimer,
    ToyTimer,
]
FLUSHING_TIMERS: list[type[FlushingTimer]] = [CudaEventTimer, CudaGraphTimer, NpuEventTimer, NpuProfilerTimer]
HOLDING_TIMERS: list[type[HoldingTimer]] = [CudaEventTimer, CudaGraphTimer, NpuEventTimer, NpuProfilerTimer]
DEVICE_TIMERS: list[type[DeviceTimer]] = [
    CudaEventTimer,
    CudaGraphTimer,
    NpuEventTimer,
    NpuProfilerTimer,
    ToyTimer,
]
PRECISE_TIMERS: list[type[PreciseTimer]] = [CudaGraphTimer]
EXPECTING_TIMERS: list[type[ExpectingTimer]] = [CudaGraphTimer]

CACHES: list[type[Cache]] = [JsonCache, MsgpackCache, MemoryCache, NoCache]
LISTING_CACHES: list[type[ListingCache]] = [JsonCache, MsgpackCache]
#: No built-in cache has settings of its own or layers over another (the redis store is layered by core).
CONFIGURED_CACHES: list[type[ConfiguredCache]] = []
LAYERING_CACHES: list[type[LayeringCache]] = []

REMOTE_STORES: list[type[RemoteStore]] = [RedisStore]

REDUCERS: list[type[Reducer]] = [LocalReducer, WorldMaxReducer]
GATHERING_REDUCERS: list[type[GatheringReducer]] = [LocalReducer, WorldMaxReducer]
# global_rank is set by __init__, so only an instance shows it at run time; mypy reads it all the same.
GLOBAL_RANK_REDUCERS: list[type[GlobalRankReducer]] = [LocalReducer, WorldMaxReducer]

DEVICES: list[type[Device]] = [CudaDevice, NpuDevice, CpuDevice, ToyDevice]

INTERCEPTORS: list[type[Interceptor]] = [TritonInterceptor]
RECORDING_INTERCEPTORS: list[type[RecordingInterceptor]] = [TritonInterceptor]
FORKING_RECORDERS: list[type[ForkingRecorder]] = [TritonInterceptor]

PROFILE_FAMILIES: list[type[ProfileFamily]] = [
    NvidiaMatrixProfiles,
    NvidiaVectorProfiles,
    AscendMixCVProfiles,
    AscendVectorSafeProfiles,
]
PROBING_PROFILE_FAMILIES: list[type[ProbingProfileFamily]] = [NvidiaMatrixProfiles]

FEATURES: list[type[Feature]] = [SearchParamsFeature]

SEARCH_STRATEGIES: list[type[SearchStrategy]] = [
    PatternStrategy,
    StagedStrategy,
    ExhaustiveStrategy,
    RandomSearch,
]

# -- what the interceptor hands over: registered by no hook, built by the plugin -----------------

KERNEL_LAUNCHES: list[type[KernelLaunch]] = [TritonLaunch]
UNSUPPORTED_LAUNCHES: list[type[UnsupportedLaunch]] = [TritonLaunch]
CHECKED_LAUNCHES: list[type[CheckedLaunch]] = [TritonLaunch]
IN_PLACE_LAUNCHES: list[type[InPlaceLaunch]] = [TritonLaunch]
ISOLATING_LAUNCHES: list[type[IsolatingLaunch]] = [TritonLaunch]
FORKING_LAUNCHES: list[type[ForkingLaunch]] = [TritonLaunch]
REPORTING_LAUNCHES: list[type[ReportingLaunch]] = [TritonLaunch]
PROGRAM_LAUNCHES: list[type[ProgramLaunch]] = [TritonLaunch]
ISOLATED_LAUNCHES: list[type[IsolatedLaunch]] = [KernelIsolation]
COMPILE_PROCESSES: list[type[CompileProcess]] = [TritonCompileProcess]
PROBING_COMPILE_PROCESSES: list[type[ProbingCompileProcess]] = [TritonCompileProcess]
WEIGHING_COMPILE_PROCESSES: list[type[WeighingCompileProcess]] = [TritonCompileProcess]
