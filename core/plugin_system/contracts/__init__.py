"""What a plugin's classes provide: one :class:`typing.Protocol` per family.

A plugin registers classes, not instances, through the ``kerneltune_register_*``
hooks (:mod:`kerneltune.core.plugin_system.hookspecs`); :class:`Registrable` is
what every class has, and each family's protocol what an instance must
provide. Optional parts (:class:`FlushingTimer`, :class:`ListingCache`, ...)
are runtime-checkable protocols of their own: the engine asks
:func:`provides` whether an instance has one and does without it where it
is missing.

Plugins need not import this module or subclass anything: a class matches by
its shape. The engine's signatures use these protocols, so a type checker
reading a plugin's class against them finds a missing or misnamed method.
"""

from __future__ import annotations

from kerneltune.core.plugin_system.contracts.base import AlwaysAvailable, Registrable, Thunk, provides
from kerneltune.core.plugin_system.contracts.launches import (
    CheckedLaunch,
    CompileProcess,
    DirectInterceptor,
    DirectLaunch,
    ForkingLaunch,
    ForkingRecorder,
    InPlaceLaunch,
    Interceptor,
    IsolatedLaunch,
    IsolatingLaunch,
    KernelLaunch,
    ProbingCompileProcess,
    ProgramLaunch,
    RecordingInterceptor,
    ReportingLaunch,
    UnsupportedLaunch,
    WeighingCompileProcess,
)
from kerneltune.core.plugin_system.contracts.measuring import (
    Device,
    DeviceTimer,
    ExpectingTimer,
    FlushingTimer,
    FlushTimingTimer,
    HoldingTimer,
    PreciseTimer,
    Timer,
)
from kerneltune.core.plugin_system.contracts.ranks import GatheringReducer, GlobalRankReducer, Reducer
from kerneltune.core.plugin_system.contracts.searching import (
    Feature,
    ProbingProfileFamily,
    ProfileFamily,
    SearchStrategy,
)
from kerneltune.core.plugin_system.contracts.storing import (
    AmendingCache,
    Cache,
    ConfiguredCache,
    LayeringCache,
    ListingCache,
    RemoteStore,
)

__all__ = [
    "AlwaysAvailable",
    "AmendingCache",
    "DirectInterceptor",
    "DirectLaunch",
    "Cache",
    "CheckedLaunch",
    "CompileProcess",
    "ConfiguredCache",
    "Device",
    "DeviceTimer",
    "ExpectingTimer",
    "Feature",
    "FlushingTimer",
    "ForkingLaunch",
    "ProgramLaunch",
    "ForkingRecorder",
    "GatheringReducer",
    "GlobalRankReducer",
    "HoldingTimer",
    "PreciseTimer",
    "FlushTimingTimer",
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
    "Thunk",
    "Timer",
    "UnsupportedLaunch",
    "WeighingCompileProcess",
    "provides",
]
