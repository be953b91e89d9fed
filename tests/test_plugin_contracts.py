"""tests/plugin_contracts.py lists every registered plugin class, and mypy reads it.

mypy holds each class listed there to its protocol; these tests keep the
lists whole (a class registered but not listed would escape the check) and
keep the module in mypy's checked set.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
from pathlib import Path

import plugin_contracts as contracts
import pytest
from kerneltune.core import ConfiguredCache, IsolatingLaunch, LayeringCache, provides
from kerneltune.core.driving import ListingCache
from kerneltune.core.plugin_system.contracts import (
    CheckedLaunch,
    DeviceTimer,
    ExpectingTimer,
    FlushingTimer,
    ForkingLaunch,
    ForkingRecorder,
    GatheringReducer,
    GlobalRankReducer,
    HoldingTimer,
    InPlaceLaunch,
    PreciseTimer,
    ProbingCompileProcess,
    ProbingProfileFamily,
    ProgramLaunch,
    RecordingInterceptor,
    ReportingLaunch,
    UnsupportedLaunch,
    WeighingCompileProcess,
)
from kerneltune.core.plugin_system.manager import BUILTIN_PLUGINS, ENTRY_POINT_GROUP

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent

#: Each registry hook: the list of its family, and the list of each optional part it has.
FAMILIES: dict[str, tuple[list[type], dict[object, list[type]]]] = {
    "kerneltune_register_timers": (
        contracts.TIMERS,
        {
            FlushingTimer: contracts.FLUSHING_TIMERS,
            HoldingTimer: contracts.HOLDING_TIMERS,
            DeviceTimer: contracts.DEVICE_TIMERS,
            PreciseTimer: contracts.PRECISE_TIMERS,
            ExpectingTimer: contracts.EXPECTING_TIMERS,
        },
    ),
    "kerneltune_register_caches": (
        contracts.CACHES,
        {
            ListingCache: contracts.LISTING_CACHES,
            ConfiguredCache: contracts.CONFIGURED_CACHES,
            LayeringCache: contracts.LAYERING_CACHES,
        },
    ),
    "kerneltune_register_remote_stores": (contracts.REMOTE_STORES, {}),
    "kerneltune_register_reducers": (
        contracts.REDUCERS,
        {
            GatheringReducer: contracts.GATHERING_REDUCERS,
            GlobalRankReducer: contracts.GLOBAL_RANK_REDUCERS,
        },
    ),
    "kerneltune_register_devices": (contracts.DEVICES, {}),
    "kerneltune_register_interceptors": (
        contracts.INTERCEPTORS,
        {
            RecordingInterceptor: contracts.RECORDING_INTERCEPTORS,
            ForkingRecorder: contracts.FORKING_RECORDERS,
        },
    ),
    "kerneltune_register_profile_families": (
        contracts.PROFILE_FAMILIES,
        {ProbingProfileFamily: contracts.PROBING_PROFILE_FAMILIES},
    ),
    "kerneltune_register_features": (contracts.FEATURES, {}),
    "kerneltune_register_search_strategies": (contracts.SEARCH_STRATEGIES, {}),
}

#: Optional parts whose members an instance gets in ``__init__``: a class cannot show them.
INSTANCE_PARTS = {GlobalRankReducer}


def plugin_modules() -> list[str]:
    """The built-in plugin modules and the example plugins' (found by their entry points)."""
    examples = sorted(
        entry.value
        for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
        if entry.value.startswith("kerneltune_example_")
    )
    assert len(examples) == 3, f"the example plugins are not installed (make install): {examples}"
    return [*BUILTIN_PLUGINS, *examples]


def registered(hook: str) -> list[type]:
    """Every class that an implementation of ``hook`` registers, in registration order."""
    classes: list[type] = []
    for name in plugin_modules():
        implementation = getattr(importlib.import_module(name), hook, None)
        if implementation is not None:
            implementation(register=classes.append)
    return classes


def names(classes: list[type]) -> list[str]:
    return sorted(f"{cls.__module__}.{cls.__qualname__}" for cls in classes)


@pytest.mark.parametrize("hook", sorted(FAMILIES))
def test_the_contracts_list_every_registered_class_of_the_family(hook):
    family, _ = FAMILIES[hook]
    assert names(family) == names(registered(hook))


@pytest.mark.parametrize("hook", sorted(FAMILIES))
def test_the_contracts_list_every_optional_part_a_registered_class_has(hook):
    family, parts = FAMILIES[hook]
    for part, listed in parts.items():
        assert set(listed) <= set(family), f"{part}: not of the family"
        having = [cls for cls in family if provides(cls, part)]
        if part in INSTANCE_PARTS:
            assert set(having) <= set(listed), part
        else:
            assert names(listed) == names(having), part


def test_the_launch_lists_hold_every_optional_part_of_the_launch():
    parts = {
        UnsupportedLaunch: contracts.UNSUPPORTED_LAUNCHES,
        CheckedLaunch: contracts.CHECKED_LAUNCHES,
        InPlaceLaunch: contracts.IN_PLACE_LAUNCHES,
        IsolatingLaunch: contracts.ISOLATING_LAUNCHES,
        ForkingLaunch: contracts.FORKING_LAUNCHES,
        ReportingLaunch: contracts.REPORTING_LAUNCHES,
        ProgramLaunch: contracts.PROGRAM_LAUNCHES,
    }
    for part, listed in parts.items():
        assert names([cls for cls in contracts.KERNEL_LAUNCHES if provides(cls, part)]) == names(listed)


def test_the_compile_process_lists_hold_every_optional_part_of_a_compile_process():
    parts = {
        ProbingCompileProcess: contracts.PROBING_COMPILE_PROCESSES,
        WeighingCompileProcess: contracts.WEIGHING_COMPILE_PROCESSES,
    }
    for part, listed in parts.items():
        assert names([cls for cls in contracts.COMPILE_PROCESSES if provides(cls, part)]) == names(listed)


def test_mypy_checks_the_contracts_module():
    """``mypy`` with no arguments (``make test``) reads tests/plugin_contracts.py, where it fails on drift."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert "plugin_contracts" in config["modules"]
    assert (ROOT / config["mypy_path"] / "plugin_contracts.py").is_file()
    for package in ("kerneltune.plugins", "kerneltune_example_device", "kerneltune_example_plugin"):
        assert any(package == p or package.startswith(f"{p}.") for p in config["packages"]), package


def test_mypy_checks_every_installed_module():
    """The packages mypy reads hold every import root setup.py installs: cli's modules are checked too."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    for root in ("kerneltune", "kerneltune.core", "kerneltune.plugins", "triton_dist"):
        assert any(root == p or root.startswith(f"{p}.") for p in config["packages"]), root
